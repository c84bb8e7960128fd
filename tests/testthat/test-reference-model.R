# ref_model(): a fitted model as the next fit's reference.

test_that("a linear fit as reference gives the exact model's coefficients and normaliser", {
  set.seed(1)
  d <- data.frame(x = rnorm(2000))
  set.seed(2)
  fit1 <- nce(~ x + I(x^2), d, ref_normal(x = 0, cov = 9), ratio = 5)
  set.seed(3)
  fit2 <- nce(~ x + I(x^2), d, ref_model(fit1), ratio = 5)
  # N(0, 1): coefficient of x^2 is -1/2, log Z = log sqrt(2 pi) = 0.919 (the data's own MLE is
  # within sampling error of these: 2000 points).
  se <- sqrt(diag(vcov(fit2)))
  expect_lt(abs(coef(fit2)[["I(x^2)"]] + 0.5), 4 * se[["I(x^2)"]])
  expect_lt(abs(fit2$log_normaliser - 0.5 * log(2 * pi)), 0.05)
})

test_that("a network fit as reference: draws in the box, a normalised log density", {
  set.seed(4)
  d <- data.frame(x = rnorm(1000))
  set.seed(5)
  fit <- nce(~ mlp(x, hidden = 8), d, ref_normal(x = 0, cov = 4), ratio = 5, control = list(max_epochs = 20))
  r <- ref_model(fit)
  expect_s3_class(r, "nce_reference")
  set.seed(6)
  u <- nce:::ref_draw(r, 500)
  expect_equal(dim(u), c(500L, 1L))
  lo <- min(fit$nce_frame$x)
  hi <- max(fit$nce_frame$x)
  expect_true(all(u$x >= lo & u$x <= hi))
  # The density integrates to 1 over the box (quadrature), and is 0 outside it.
  g <- seq(lo, hi, length.out = 4001)
  expect_equal(sum(exp(nce:::ref_logq(r, data.frame(x = g)))) * diff(g[1:2]), 1, tolerance = 0.01)
  expect_equal(nce:::ref_logq(r, data.frame(x = hi + 1)), -Inf)
  expect_error(ref_model(d), class = "nce_error_input")
  expect_error(ref_model(fit, candidates = 0), class = "nce_error_input")
})
