# Snapshots of print() and summary() of sequential fits (numbers are reproducible: seeds, and
# results independent of the thread count).

print_chain <- function() {
  set.seed(51)
  data.frame(y = rchain(120, 2))
}

test_that("print and summary of an snce fit (spline intercept)", {
  set.seed(52)
  fit <- snce(~ I(y * y_prev), print_chain(), ref_uniform(y = c(0, 1)), ratio = 5, intercept = ~ s(y_prev, k = 5))
  expect_snapshot(print(fit, digits = 3))
  expect_snapshot(print(summary(fit), digits = 3))
})

test_that("print and summary of an snce fit (one global intercept, per-transition intercepts)", {
  set.seed(53)
  fit <- snce(~ I(y * y_prev), print_chain(), ref_uniform(y = c(0, 1)), ratio = 5, intercept = "none")
  expect_snapshot(print(summary(fit), digits = 3))
  set.seed(54)
  ft <- snce(~ I(y * y_prev), print_chain(), ref_uniform(y = c(0, 1)), ratio = 5, intercept = "transition")
  expect_snapshot(print(ft, digits = 3))
})

print_fix <- function(n_subjects = 1) {
  set.seed(55)
  rlatkes(100, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768), n_trials = 2,
          n_subjects = n_subjects, grid = c(64, 48))
}

test_that("print and summary of a latkes fit and a collection", {
  set.seed(56)
  fit <- latkes(print_fix(), group = "trial", window = c(0, 1024, 0, 768), ratio = 4, kernel = ~ s(dist, k = 4),
                intercept = ~ s(x_prev, y_prev, k = 6))
  expect_snapshot(print(fit, digits = 3))
  expect_snapshot(print(summary(fit), digits = 3))
  set.seed(57)
  fits <- latkes(print_fix(2), group = "trial", window = c(0, 1024, 0, 768), ratio = 4, kernel = ~ s(dist, k = 4),
                 intercept = ~ s(x_prev, y_prev, k = 6), by = "subject")
  expect_snapshot(print(fits))
  expect_snapshot(print(summary(fits), digits = 3))
})
