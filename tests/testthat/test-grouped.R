# Grouped designs [A | B[group, ]]: a per-transition spline intercept evaluated once per
# transition gives the same fit as mgcv::gam on the expanded design.

test_that("a grouped REML fit equals gam on the expanded data", {
  set.seed(51)
  T <- 300
  r <- 8
  xp <- runif(T)
  # data: next state near the previous one; reference: uniform on [0, 1]
  xd <- pmin(pmax(xp + rnorm(T, 0, 0.15), 0), 1)
  rows <- data.frame(t = c(seq_len(T), rep(seq_len(T), each = r)), x = c(xd, runif(T * r)),
                     .label = rep(c(1, 0), c(T, T * r)))
  rows$x_prev <- xp[rows$t]
  rows$d <- abs(rows$x - rows$x_prev)
  rows$.offset <- log(1 / r)
  fit <- nce:::fit_grouped(~ s(d, bs = "cr", k = 8), rows, ~ s(x_prev, bs = "cr", k = 6),
                           data.frame(x_prev = xp), rows$t, rows$.label, rows$.offset,
                           cluster = seq_len(T))
  g <- mgcv::gam(.label ~ s(d, bs = "cr", k = 8) + s(x_prev, bs = "cr", k = 6), binomial, rows,
                 offset = .offset, method = "REML")
  expect_true(fit$converged)
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-3)
  expect_equal(sum(fit$edf), sum(g$edf), tolerance = 0.01)
  expect_equal(unname(fit$sp), unname(g$sp), tolerance = 0.05)
  expect_equal(unname(fit$coefficients), unname(coef(g)), tolerance = 1e-3)
  expect_equal(dim(fit$Vs), c(length(coef(g)), length(coef(g))))
  expect_error(nce:::fit_grouped(~ s(d, k = 8), rows, ~ s(x_prev, k = 6), data.frame(x_prev = xp),
                                 rows$t, rows$.label, rows$.offset, sp = 1),
               "`sp` must be 2 positive numbers", class = "nce_error_input")
})
