# ratio_coverage() against truth: the Gaussian mean model (20 draws of N(mu, 1), summary the
# mean; the exact log ratio is log N(m; mu, 1/20) up to a term free of mu), with the exact log
# ratio, and with it halved (posteriors sqrt(2) times too wide) and doubled (too narrow).

exact_ratio_object <- function(scale) {
  sim <- function(theta, n) matrix(stats::rnorm(n * 20, theta[, "mu"]), n, 20)
  summ <- function(x) cbind(m = rowMeans(x))
  structure(list(prior = prior_normal(mean = c(mu = 0), sd = c(mu = 1)), parameters = "mu", summary_names = "m", simulator = sim,
                 summaries = summ, batch = TRUE, scale = scale),
            class = c("test_exact_ratio", "nce_ratio", "nce_result"))
}

test_that("ratio_coverage() finds the exact log ratio calibrated, and halved or doubled ones too wide or narrow", {
  registerS3method("predict", "test_exact_ratio", function(object, newdata, ...) {
    object$scale * stats::dnorm(newdata$m, newdata$mu, sqrt(1 / 20), log = TRUE)
  })
  set.seed(1)
  exact <- ratio_coverage(exact_ratio_object(1), n = 400, n_draws = 2000)
  expect_identical(exact$level, c(0.5, 0.8, 0.95))
  # Nominal coverage within 2.5 binomial standard errors (0.025-0.06 at n = 400).
  expect_true(all(abs(exact$z) < 2.5))
  expect_length(attr(exact, "credible_levels"), 400L)
  # Uniform credible levels: their mean 0.5 within 4 standard errors (sqrt(1/12/400) = 0.014).
  expect_lt(abs(mean(attr(exact, "credible_levels")) - 0.5), 0.058)
  set.seed(1)
  wide <- ratio_coverage(exact_ratio_object(0.5), n = 400, n_draws = 2000)
  # A N(0, 2) region at level 0.5 holds a N(0, 1) truth with probability 0.66, at 0.8 0.93.
  expect_equal(wide$coverage[1:2], c(0.66, 0.93), tolerance = 0.1)
  expect_identical(wide$verdict[1:2], c("too wide", "too wide"))
  set.seed(1)
  narrow <- ratio_coverage(exact_ratio_object(2), n = 400, n_draws = 2000)
  # A N(0, 1/2) region at level 0.5 holds it with probability 0.36, at 0.8 0.64.
  expect_equal(narrow$coverage[1:2], c(0.36, 0.64), tolerance = 0.1)
  expect_identical(narrow$verdict[1:2], c("too narrow", "too narrow"))
  # Simulation-based calibration ranks: uniform for the exact ratio (Kolmogorov-Smirnov p > 0.001);
  # too narrow posteriors put the truth in the tails: ranks below 0.1 or above 0.9 have probability
  # 0.37 (posterior sd 1/sqrt(2) of the truth's spread), not 0.2, and 0.07 for too wide ones.
  r_exact <- attr(exact, "ranks")[, "mu"]
  expect_gt(suppressWarnings(stats::ks.test(r_exact, "punif"))$p.value, 0.001)
  tails <- function(x) mean(attr(x, "ranks")[, "mu"] < 0.1 | attr(x, "ranks")[, "mu"] > 0.9)
  expect_gt(tails(narrow), 0.28)
  expect_lt(tails(wide), 0.14)
  expect_s3_class(exact, "nce_ratio_coverage")
  pdf(NULL)
  on.exit(dev.off())
  expect_identical(plot(exact), exact)
})

# A narrow posterior: the mean of 10,000 draws of N(mu, 1) (sd 0.01 against the prior's 1), where
# 2,000 prior draws leave importance sampling an effective sample of about 20; SMC takes over.
narrow_ratio_object <- function(scale) {
  sim <- function(theta, n) matrix(stats::rnorm(n, theta[, "mu"], 0.01), n, 1)
  summ <- function(x) cbind(m = x[, 1])
  structure(list(prior = prior_normal(mean = c(mu = 0), sd = c(mu = 1)), parameters = "mu", summary_names = "m",
                 simulator = sim, summaries = summ, batch = TRUE, scale = scale),
            class = c("test_narrow_ratio", "nce_ratio", "nce_result"))
}

test_that("ratio_coverage() samples narrow posteriors by SMC: exact ratio calibrated, doubled one too narrow", {
  registerS3method("predict", "test_narrow_ratio", function(object, newdata, ...) {
    object$scale * stats::dnorm(newdata$m, newdata$mu, 0.01, log = TRUE)
  })
  set.seed(3)
  exact <- ratio_coverage(narrow_ratio_object(1), n = 300, n_draws = 1000, n_chains = 250)
  expect_identical(unique(attr(exact, "sampler")), "smc")
  # The SMC posteriors' effective samples (the smallest is still far above importance's ~20).
  expect_gt(min(attr(exact, "ess")), 200)
  # Nominal within 2.5 binomial standard errors (0.029-0.013 at n = 300); mc.error is the
  # estimate's own standard error.
  expect_true(all(abs(exact$z) < 2.5))
  expect_equal(exact$mc.error, sqrt(exact$coverage * (1 - exact$coverage) / 300))
  expect_lt(abs(mean(attr(exact, "credible_levels")) - 0.5), 4 * sqrt(1 / 12 / 300))
  expect_gt(suppressWarnings(stats::ks.test(attr(exact, "ranks")[, "mu"], "punif"))$p.value, 0.001)
  set.seed(3)
  narrow <- ratio_coverage(narrow_ratio_object(2), n = 300, n_draws = 1000, n_chains = 250)
  # Posterior sd 1/sqrt(2) of the truth's spread: coverage 0.36 at 0.5, 0.64 at 0.8, 0.83 at 0.95.
  expect_equal(narrow$coverage, c(0.36, 0.64, 0.83), tolerance = 0.1)
  expect_identical(narrow$verdict, rep("too narrow", 3))
  # Importance sampling alone: thin, and said so.
  set.seed(3)
  expect_warning(ratio_coverage(narrow_ratio_object(1), n = 20, n_draws = 1000, method = "importance"),
                 class = "nce_warning_ess")
})

test_that("ratio_coverage() on a fitted classifier, and its refusals", {
  sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
  summ <- function(x) cbind(m = rowMeans(x))
  set.seed(2)
  r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 2000, batch = TRUE, formula = ~ te(mu, m, k = 6))
  cv <- ratio_coverage(r, n = 200, n_draws = 1000)
  # A well-fitted GAM of a sufficient summary: within 3 standard errors of nominal.
  expect_true(all(abs(cv$z) < 3))
  expect_true(all(attr(cv, "ess") > 10))
  expect_error(ratio_coverage(list()), class = "nce_error_input")
  expect_error(ratio_coverage(r, n = 5), class = "nce_error_input")
  expect_error(ratio_coverage(r, levels = c(0.5, 1)), class = "nce_error_input")
  expect_error(ratio_coverage(r, levels = "a"), class = "nce_error_input")
  expect_error(ratio_coverage(r, n_draws = 10), class = "nce_error_input")
  expect_error(ratio_coverage(r, n = 1e9), class = "nce_error_input")
  expect_error(ratio_coverage(r, method = "mcmc"), class = "nce_error_input")
  expect_error(ratio_coverage(r, n_chains = 2), class = "nce_error_input")
})
