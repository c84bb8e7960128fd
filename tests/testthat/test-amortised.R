# Amortised ratio estimation against the exact posterior of a Gaussian mean.

gauss_sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
gauss_summ <- function(x) cbind(m = rowMeans(x))

fit_gauss_ratio <- function() {
  set.seed(21)
  ratio_amortised(gauss_sim, gauss_summ, prior_uniform(mu = c(-2, 2)), n = 2000, batch = TRUE,
                  formula = ~ te(mu, m, k = 6))
}

test_that("the amortised posterior matches the exact one for two observed data sets", {
  r <- fit_gauss_ratio()
  expect_s3_class(r, "nce_ratio")
  for (truth in c(-0.8, 0.6)) {
    set.seed(5)
    x_obs <- matrix(rnorm(20, truth), 1)
    xbar <- mean(x_obs)
    # Exact posterior: N(xbar, 1/20) truncated to (-2, 2); far from the bounds, the normal.
    post <- ratio_posterior(r, x_obs, n_draws = 20000)
    # Stated tolerances: mean within 0.05 (posterior sd 0.22), sd within 20 %.
    expect_equal(unname(coef(post)), xbar, tolerance = 0.05 / abs(xbar))
    expect_equal(sqrt(vcov(post)[1, 1]), sqrt(1 / 20), tolerance = 0.2)
    expect_gt(post$ess, 1000)
  }
})

test_that("Metropolis on the amortised ratio agrees with importance sampling", {
  r <- fit_gauss_ratio()
  set.seed(6)
  x_obs <- matrix(rnorm(20, 0.3), 1)
  is <- ratio_posterior(r, x_obs, n_draws = 20000)
  mh <- ratio_posterior(r, x_obs, n_draws = 5000, method = "metropolis", n_chains = 50, burnin = 50)
  expect_equal(unname(coef(mh)), unname(coef(is)), tolerance = 0.03 / abs(coef(is)))
  expect_gt(mh$acceptance, 0.15)
  expect_lt(mh$acceptance, 0.8)
  expect_gt(mh$ess[[1]], 200)
  expect_snapshot(print(summary(is)$table[, c("mean", "sd")], digits = 2))
})

test_that("predict gives the log ratio, which is near the exact one in the bulk", {
  r <- fit_gauss_ratio()
  nd <- data.frame(mu = c(0, 0.2, -0.3), m = c(0.1, 0.1, -0.2))
  lr <- predict(r, nd)
  # Exact: log N(m; mu, 1/20) - log p(m), p(m) = (Phi((2 - m) sqrt 20) - Phi((-2 - m) sqrt 20)) / 4.
  pm <- (pnorm(2, nd$m, sqrt(1 / 20)) - pnorm(-2, nd$m, sqrt(1 / 20))) / 4
  truth <- dnorm(nd$m, nd$mu, sqrt(1 / 20), log = TRUE) - log(pm)
  expect_lt(max(abs(lr - truth)), 0.35)
  expect_error(predict(r, data.frame(mu = 1)), class = "nce_error_input")
})
