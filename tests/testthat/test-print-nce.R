# Snapshots of print() and summary() for nce fits (parametric and smooth) and references.

test_that("print and summary of a parametric nce fit", {
  set.seed(51)
  d <- data.frame(y = rtexp(200, 2))
  f <- nce(~ y + I(y^2), d, ref_uniform(y = c(0, 1)), ratio = 5)
  expect_snapshot(print(f, digits = 3))
  expect_snapshot(print(summary(f), digits = 3))
  expect_snapshot(print(anova(nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5), f), digits = 3))
})

test_that("print and summary of an intercept-only fit show no NaN", {
  set.seed(52)
  # The model is the reference's density on [0, 2] scaled to [0, 1]: nu = -log(2) exactly, s.e. 0.
  f <- nce(~ 1, data.frame(y = runif(50)), ref_uniform(y = c(0, 2)), ratio = 2)
  expect_snapshot(print(summary(f), digits = 2))
})

test_that("print and summary of a smooth nce fit", {
  set.seed(53)
  d <- data.frame(y = rbeta(200, 2, 5))
  g <- nce(~ s(y, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 5)
  expect_snapshot(print(g, digits = 3))
  expect_snapshot(print(summary(g), digits = 3))
})

test_that("print of references", {
  expect_snapshot({
    ref_uniform(y = c(0, 1))
    ref_normal(a = c(0, 1), b = c(1, 2))
  })
})
