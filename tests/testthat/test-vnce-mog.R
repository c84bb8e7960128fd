# The unnormalised mixture of Gaussians of Rhodes and Gutmann (2019, section 4.2): theta* = 4, sigma1 = 1.

fit_same_noise <- function(x, seed, ...) {
  set.seed(seed)
  vnce(x, ...)
}

test_that("VNCE and NCE reach the same optimum (Theorem 2) and q reaches the posterior", {
  set.seed(10)
  x <- rmog(1000, theta = 4)
  fv <- fit_same_noise(x, 11, mog_model())
  fn <- fit_same_noise(x, 11, mog_model(), method = "nce")
  expect_true(fv$converged && fn$converged)
  expect_equal(coef(fv)[["theta"]], coef(fn)[["theta"]], tolerance = 1e-5)
  expect_equal(coef(fv)[["c"]], coef(fn)[["c"]], tolerance = 1e-5)
  expect_equal(fv$objective, fn$objective, tolerance = 1e-8)      # max J_VNCE = max J_NCE
  expect_equal(fv$nce_objective, fn$objective, tolerance = 1e-8)
  # q(z = 0 | x; w) against the exact posterior at the estimate, on a grid
  th <- coef(fv)[["theta"]]
  g <- seq(-12, 12, by = 0.25)
  w <- fv$variational$w
  q0 <- plogis(-(w[1] + w[2] * g + w[3] * g^2))
  p0 <- 1 / (1 + exp(-g^2 / 2 + g^2 / (2 * th^2)))
  expect_lt(max(abs(q0 - p0)), 1e-3)
})

test_that("the EM variant never decreases the NCE objective and ends at the NCE optimum", {
  set.seed(12)
  x <- rmog(1000, theta = 4)
  fe <- fit_same_noise(x, 13, mog_model(start = list(theta = 1.5)), method = "em")
  fn <- fit_same_noise(x, 13, mog_model(), method = "nce")
  expect_gt(length(fe$trace), 2)
  expect_true(all(diff(fe$trace) >= -1e-12))
  expect_equal(coef(fe)[["theta"]], coef(fn)[["theta"]], tolerance = 1e-4)
})

test_that("the VNCE error falls with n like NCE's and the estimates are near the truth", {
  reps <- 12
  sizes <- c(100, 1000, 10000)
  err <- sapply(sizes, function(n) {
    e <- replicate(reps, {
      x <- rmog(n, theta = 4)
      s <- sample.int(1e6, 1)
      tv <- coef(suppressWarnings(fit_same_noise(x, s, mog_model())))[["theta"]]
      tn <- coef(suppressWarnings(fit_same_noise(x, s, mog_model(), method = "nce")))[["theta"]]
      c(vnce = (tv - 4)^2, nce = (tn - 4)^2)
    })
    apply(e, 1, median)
  })
  # median squared error drops by far more than 10x from n = 100 to n = 10,000 (theory: 100x)
  expect_lt(err["vnce", 3], err["vnce", 1] / 10)
  expect_lt(err["nce", 3], err["nce", 1] / 10)
  # and VNCE tracks NCE at every n
  expect_true(all(abs(log(err["vnce", ] / err["nce", ])) < log(2)))
  set.seed(14)
  f <- vnce(rmog(10000, theta = 4), mog_model())
  expect_lt(abs(coef(f)[["theta"]] - 4), 0.3)
  expect_lt(abs(coef(f)[["c"]] - log(sqrt(2 * pi) * 5)), 0.1)
})

test_that("a custom R model reproduces the built-in mixture", {
  set.seed(15)
  x <- rmog(600, theta = 4)
  s <- sqrt(mean(x^2))
  noise <- list(sample = function(n) rnorm(n, 0, s), log_density = function(y) dnorm(y, 0, s, log = TRUE))
  lp <- function(x, z, th) -th[2] - x^2 / (2 * if (z == 1) 1 else exp(2 * th[1]))
  gr <- function(x, z, th) cbind(if (z == 1) 0 * x else x^2 * exp(-2 * th[1]), -1)
  mod <- custom_model(lp, gr, start = c(log_theta = log(3), c = 2.5), latent = c(1, 0), reference = noise)
  fb <- fit_same_noise(x, 16, mog_model())
  fc <- fit_same_noise(x, 16, mod)
  fcn <- fit_same_noise(x, 16, mod, method = "nce")
  fce <- fit_same_noise(x, 16, mod, method = "em")
  expect_equal(exp(coef(fc)[["log_theta"]]), coef(fb)[["theta"]], tolerance = 1e-4)
  expect_equal(coef(fc)[["c"]], coef(fb)[["c"]], tolerance = 1e-4)
  expect_equal(fc$objective, fb$objective, tolerance = 1e-7)
  expect_equal(coef(fcn), coef(fc), tolerance = 1e-4)
  expect_equal(coef(fce), coef(fcn), tolerance = 1e-4)
  expect_true(all(diff(fce$trace) >= -1e-10))
})

test_that("mixture and custom models check their input", {
  expect_error(vnce(c(1, NA, 3), mog_model()), "missing or infinite", class = "nce_error_input")
  expect_error(vnce(rnorm(20), mog_model(sigma1 = -1)), class = "nce_error_input")
  expect_error(vnce(rnorm(20), mog_model(), impute = "mean"), "tgm_model", class = "nce_error_input")
  expect_error(custom_model(1, identity, 1), "log_density", class = "nce_error_input")
  bad <- custom_model(function(x, z, th) 1, function(x, z, th) matrix(0, length(x), 1), start = 1)
  expect_error(vnce(rnorm(20), bad), "one value per point", class = "nce_error_input")
})

test_that("logLik(newdata =) of a mixture fit is the held-out log-likelihood, not the in-sample one", {
  set.seed(2)
  x <- rmog(2000, theta = 4)
  xt <- rmog(50, theta = 4)
  v <- vnce(x, mog_model())
  held <- logLik(v, newdata = xt)
  expect_equal(attr(held, "nobs"), 50)
  # The true density of rmog(theta = 4): 1/5 N(0, 1) + 4/5 N(0, 16); -133.38 at these points,
  # the fit -133.65.
  expect_equal(as.numeric(held), sum(log(0.2 * dnorm(xt, 0, 1) + 0.8 * dnorm(xt, 0, 4))), tolerance = 2 / 133)
  expect_equal(as.numeric(logLik(v, newdata = xt[0])), 0)
  expect_equal(attr(logLik(v), "nobs"), 2000)
})
