# ref_model(): a fitted model as the next fit's reference.

test_that("a linear fit as reference gives the exact model's coefficients and normaliser", {
  set.seed(1)
  d <- data.frame(x = rnorm(2000))
  set.seed(2)
  fit1 <- nce(~ x + I(x^2), d, ref_normal(x = 0, cov = 9), ratio = 5)
  set.seed(3)
  fit2 <- nce(~ x + I(x^2), d, ref_model(fit1), ratio = 5)
  # Against the exact MLE of the normal model on these data: x^2 coefficient -1 / (2 s^2), log Z
  # log sqrt(2 pi s^2) + m^2 / (2 s^2); NCE at ratio 5 is within 0.03 of both.
  m <- mean(d$x)
  s2 <- mean((d$x - m)^2)
  expect_lt(abs(coef(fit2)[["I(x^2)"]] + 1 / (2 * s2)), 0.03)
  expect_lt(abs(fit2$log_normaliser - (0.5 * log(2 * pi * s2) + m^2 / (2 * s2))), 0.03)
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
  # The mixture's density integrates to 1 (quadrature over +-10: the old reference is N(0, 4)),
  # and outside the Metropolis box is half the old reference's.
  g <- seq(-10, 10, length.out = 8001)
  expect_equal(sum(exp(nce:::ref_logq(r, data.frame(x = g)))) * diff(g[1:2]), 1, tolerance = 0.01)
  hi <- max(fit$nce_frame$x) + 1
  expect_equal(nce:::ref_logq(r, data.frame(x = hi)), log(0.5) + dnorm(hi, 0, 2, log = TRUE))
  expect_error(ref_model(d), class = "nce_error_input")
  expect_error(ref_model(fit, candidates = 0), class = "nce_error_input")
})

test_that("nce_adapt() refits against its own fits: the exact normal MLE, and update() reproduces it", {
  set.seed(11)
  d <- data.frame(x = rnorm(2000, 1, 2))
  set.seed(12)
  fit <- nce(~ x + I(x^2), d, ref_normal(x = 0, cov = 25), ratio = 5)
  set.seed(13)
  fit2 <- nce_adapt(fit, iterations = 2)
  m <- mean(d$x)
  s2 <- mean((d$x - m)^2)
  # The exact MLE of the normal model: x^2 coefficient -1 / (2 s^2), log Z log sqrt(2 pi s^2) +
  # m^2 / (2 s^2); NCE at ratio 5 is within 0.03 of both (measured: 0.002 and 0.01).
  expect_lt(abs(coef(fit2)[["I(x^2)"]] + 1 / (2 * s2)), 0.03)
  expect_lt(abs(fit2$log_normaliser - (0.5 * log(2 * pi * s2) + m^2 / (2 * s2))), 0.03)
  expect_equal(fit2$adaptation$iteration, 0:2)
  expect_equal(fit2$adaptation$logLik[3], as.numeric(logLik(fit2)))
  expect_equal(coef(update(fit2)), coef(fit2))
  # The call gives the reference by its constructor, not a hidden name.
  expect_identical(fit2$call$reference, quote(ref_model(adapted_fit_1)))
  expect_output(print(fit2), "reference = ref_model(adapted_fit_1)", fixed = TRUE)
  set.seed(14)
  fit1 <- nce_adapt(fit, candidates = 5)
  expect_identical(fit1$call$reference, quote(ref_model(fit, candidates = 5)))
  expect_equal(coef(update(fit1)), coef(fit1))
  expect_error(nce_adapt(fit, iterations = 0), class = "nce_error_input")
  expect_error(nce_adapt(d), class = "nce_error_input")
})

test_that("plot() of an adapted fit draws, and a density not finite on the grid is a classed refusal", {
  set.seed(21)
  d <- data.frame(x = rnorm(500), y = rnorm(500))
  fit <- nce(~ x + y + I(x^2) + I(y^2), d, ref_normal(x = 0, y = 0, cov = diag(2) * 9), ratio = 5)
  set.seed(22)
  fit2 <- nce_adapt(fit)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_identical(plot(fit2), fit2)
  one <- nce(~ x + I(x^2), d, ref_normal(x = 0, cov = 9), ratio = 5)
  expect_silent(plot(nce_adapt(one)))
  # A reference of density 0 everywhere: the fitted density is 0 (log -Inf) on the whole grid.
  bad <- fit2
  bad$reference <- ref_custom(function(n) d[sample.int(500, n, TRUE), ], function(u) rep(-Inf, nrow(u)), c("x", "y"))
  expect_error(plot(bad), "not finite anywhere on the grid of `x`", class = "nce_error_numerical")
})
