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

test_that("discrete = TRUE: the same posterior and log ratio as the exact fit, near the truth", {
  set.seed(22)
  pr <- prior_uniform(mu = c(-2, 2))
  sims <- simulate_summaries(gauss_sim, gauss_summ, pr$sample(4000), batch = TRUE)
  ex <- ratio_amortised(gauss_sim, gauss_summ, pr, n = 4000, batch = TRUE, formula = ~ te(mu, m, k = 6),
                        simulations = sims)
  set.seed(22)
  di <- ratio_amortised(gauss_sim, gauss_summ, pr, n = 4000, batch = TRUE, formula = ~ te(mu, m, k = 6),
                        simulations = sims, discrete = TRUE)
  expect_true(di$discrete)
  expect_false(ex$discrete)
  expect_output(print(di), "Discretised covariates")
  # Log ratio in the bulk of the joint distribution, against the truth with the exact fit's
  # tolerance (0.35). Between the two fits: the rounding moves m by up to 0.023 (100 values
  # over a range of about 4.6), and the true log ratio's slope in m, 20 |m - mu|, reaches 6
  # at these points, so up to 0.14 from the rounding alone: tolerance 0.25.
  nd <- data.frame(mu = c(0, 0.2, -0.3, 1), m = c(0.1, 0.1, -0.2, 0.9))
  pm <- (pnorm(2, nd$m, sqrt(1 / 20)) - pnorm(-2, nd$m, sqrt(1 / 20))) / 4
  truth <- dnorm(nd$m, nd$mu, sqrt(1 / 20), log = TRUE) - log(pm)
  expect_lt(max(abs(predict(di, nd) - truth)), 0.35)
  expect_lt(max(abs(predict(di, nd) - predict(ex, nd))), 0.25)
  set.seed(5)
  x_obs <- matrix(rnorm(20, 0.6), 1)
  post <- ratio_posterior(di, x_obs, n_draws = 20000)
  # Exact posterior N(xbar, 1/20): mean within 0.05, sd within 20 %.
  expect_lt(abs(coef(post) - mean(x_obs)), 0.05)
  expect_equal(sqrt(vcov(post)[1, 1]), sqrt(1 / 20), tolerance = 0.2)
})

test_that("Metropolis on the amortised ratio agrees with importance sampling", {
  r <- fit_gauss_ratio()
  set.seed(6)
  x_obs <- matrix(rnorm(20, 0.3), 1)
  is <- ratio_posterior(r, x_obs, n_draws = 20000, method = "importance")
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

test_that("Metropolis in Rust: tables match predict.gam, the R loop agrees, draws do not depend on threads", {
  r <- fit_gauss_ratio()
  set.seed(7)
  x_obs <- matrix(rnorm(20, -0.4), 1)
  set.seed(8)
  rust <- ratio_posterior(r, x_obs, n_draws = 20000, method = "metropolis", n_chains = 40, burnin = 100)
  expect_identical(rust$engine, "rust")
  # Local cubic interpolation of tables on 2049 points: against predict.gam at 200 draws.
  expect_lt(rust$table_error, 1e-6)
  expect_identical(rust$off_table, 0)
  set.seed(9)
  rloop <- ratio_posterior(r, x_obs, n_draws = 20000, method = "metropolis", n_chains = 40, burnin = 100,
                           engine = "r")
  expect_identical(rloop$engine, "r")
  # Same target: means within 4 Monte Carlo sds of their difference, sds within 5 %.
  se <- sqrt(vcov(rust)[1, 1] / rust$ess + vcov(rloop)[1, 1] / rloop$ess)
  expect_lt(abs(coef(rust) - coef(rloop)), 4 * se)
  expect_equal(sqrt(vcov(rust)[1, 1]), sqrt(vcov(rloop)[1, 1]), tolerance = 0.05)
  # Against the exact posterior N(xbar, 1/20) (the bounds +-2 are > 7 sds away).
  expect_lt(abs(coef(rust) - mean(x_obs)), 0.05)
  expect_equal(sqrt(vcov(rust)[1, 1]), sqrt(1 / 20), tolerance = 0.15)
  expect_length(rust$chain_acceptance, 40)
  old <- options(nce.threads = 1L)
  on.exit(options(old))
  set.seed(8)
  one <- ratio_posterior(r, x_obs, n_draws = 20000, method = "metropolis", n_chains = 40, burnin = 100)
  options(nce.threads = 2L)
  set.seed(8)
  two <- ratio_posterior(r, x_obs, n_draws = 20000, method = "metropolis", n_chains = 40, burnin = 100)
  expect_identical(one$draws, rust$draws)
  expect_identical(two$draws, rust$draws)
  expect_snapshot(print(summary(rust), digits = 2))
  expect_snapshot(print(summary(rloop), digits = 2))
})

test_that("Metropolis in Rust with a normal prior recovers the conjugate posterior", {
  set.seed(31)
  r <- ratio_amortised(gauss_sim, gauss_summ, prior_normal(c(mu = 0), c(mu = 1)), n = 2000, batch = TRUE,
                       formula = ~ te(mu, m, k = 6))
  set.seed(32)
  x_obs <- matrix(rnorm(20, 0.8), 1)
  post <- ratio_posterior(r, x_obs, n_draws = 20000, method = "metropolis", n_chains = 40)
  expect_identical(post$engine, "rust")
  expect_lt(post$table_error, 1e-6)
  # Exact: N(20 xbar / 21, 1 / 21); tolerances 0.05 on the mean (sd 0.22) and 15 % on the sd.
  expect_lt(abs(coef(post) - 20 * mean(x_obs) / 21), 0.05)
  expect_equal(sqrt(vcov(post)[1, 1]), sqrt(1 / 21), tolerance = 0.15)
})

test_that("classifiers with parameter-parameter terms and custom priors fall back to the R loop", {
  sim2 <- function(theta, n) matrix(rnorm(n * 10, theta[, "a"] + theta[, "b"]), n, 10)
  summ2 <- function(x) cbind(m = rowMeans(x))
  pr <- prior_uniform(a = c(-1, 1), b = c(-1, 1))
  set.seed(41)
  r <- ratio_amortised(sim2, summ2, pr, n = 300, batch = TRUE, formula = ~ s(a, k = 4) + s(m, k = 4) + ti(a, b, k = 3))
  expect_false(nce:::ratio_separable(r$gam, r$parameters))
  x_obs <- matrix(rnorm(10, 0.2), 1)
  post <- ratio_posterior(r, x_obs, n_draws = 200, method = "metropolis", n_chains = 10, burnin = 5)
  expect_identical(post$engine, "r")
  expect_error(ratio_posterior(r, x_obs, n_draws = 200, method = "metropolis", n_chains = 10, engine = "rust"),
               class = "nce_error_unsupported")
  expect_true(nce:::ratio_separable(list(smooth = list(list(term = "a", by = "m")), pterms = stats::terms(~ a + m)),
                                    c("a", "b")))
  expect_false(nce:::ratio_separable(list(smooth = list(list(term = "a", by = "b")), pterms = stats::terms(~ 1)),
                                     c("a", "b")))
  expect_false(nce:::ratio_separable(list(smooth = list(), pterms = stats::terms(~ a:b + m)), c("a", "b")))
  expect_false(nce:::ratio_separable(list(smooth = list(), pterms = stats::terms(~ I(a * b))), c("a", "b")))
  expect_true(nce:::ratio_separable(list(smooth = list(), pterms = stats::terms(~ a:m + b)), c("a", "b")))
  rc <- fit_gauss_ratio()
  rc$prior <- prior_custom(function(n) cbind(mu = runif(n, -2, 2)), function(th) rep(0, nrow(th)), "mu", -2, 2)
  post <- ratio_posterior(rc, matrix(rnorm(20), 1), n_draws = 200, method = "metropolis", n_chains = 10, burnin = 5)
  expect_identical(post$engine, "r")
})

test_that("print and summary of an amortised ratio and its posterior", {
  r <- fit_gauss_ratio()
  set.seed(6)
  post <- ratio_posterior(r, matrix(rnorm(20, 0.3), 1), n_draws = 2000)
  # timings vary from run to run
  mask <- function(x) gsub("[0-9.]+ s\\b", "<t> s", x)
  expect_snapshot(print(r), transform = mask)
  expect_snapshot(print(summary(r)), transform = mask)
  expect_snapshot(print(post))
})

test_that("posterior predictive simulation and update() of an amortised posterior", {
  r <- fit_gauss_ratio()
  set.seed(5)
  x_obs <- matrix(rnorm(20, 0.6), 1)
  post <- ratio_posterior(r, x_obs, n_draws = 20000)
  expect_identical(nobs(post), 20000L)
  pp <- simulate(post, nsim = 4000, seed = 1)
  expect_identical(names(pp), c("mu", "m"))
  expect_identical(pp, simulate(post, nsim = 4000, seed = 1))
  # Exact posterior predictive of m: N(xbar, 1/20 + 1/20) (posterior N(xbar, 1/20) far from the
  # bounds); tolerance: 4 Monte Carlo sds of the mean (0.016 at 4000 draws) plus the
  # classifier's posterior error (0.05, as above), and 15 % on the sd.
  expect_lt(abs(mean(pp$m) - mean(x_obs)), 0.05 + 4 * sqrt(0.1 / 4000))
  expect_equal(sd(pp$m), sqrt(0.1), tolerance = 0.15)
  expect_lt(abs(mean(pp$mu) - coef(post)), 4 * sqrt(vcov(post)[1, 1] / 4000))
  set.seed(6)
  mh <- update(post, method = "metropolis", n_draws = 5000, n_chains = 50, burnin = 50)
  expect_s3_class(mh, "nce_ratio_posterior")
  expect_identical(mh$method, "metropolis")
  expect_lt(abs(coef(mh) - coef(post)), 0.03)
  other <- update(post, observed = matrix(rnorm(20, -0.5), 1))
  expect_lt(coef(other), coef(post) - 0.5)
  expect_error(simulate(post, nsim = 0), class = "nce_error_input")
  expect_error(predict(post), class = "nce_error_unsupported")
  expect_identical(generics::tidy(post)$term, "mu")
  expect_equal(generics::tidy(post)$estimate, unname(coef(post)))
})

test_that("the classifier's deviance is mgcv's (unpenalised) in deviance(), glance(), anova() and summary()", {
  set.seed(3)
  sims <- simulate_summaries(gauss_sim, gauss_summ, cbind(mu = runif(400, -2, 2)), batch = TRUE)
  fit <- function(formula) {
    set.seed(4)
    ratio_amortised(gauss_sim, gauss_summ, prior_uniform(mu = c(-2, 2)), n = 400, batch = TRUE, formula = formula,
                    simulations = sims)
  }
  r <- fit(~ s(mu, k = 5) + s(m, k = 5) + ti(mu, m, k = 4))
  r0 <- fit(~ s(mu, k = 5) + s(m, k = 5))
  # mgcv at the same pairs and smoothing parameters: the same fit (coefficients to 1e-8), whose
  # deviance has no penalty in it; the engine's penalised deviance was 1.2% larger here.
  m <- mgcv::gam(y ~ s(mu, k = 5) + s(m, k = 5) + ti(mu, m, k = 4), data = r$gam$model, family = binomial,
                 sp = r$gam$sp)
  expect_equal(unname(coef(r)), unname(coef(m)), tolerance = 1e-8)
  expect_equal(deviance(r), deviance(m), tolerance = 1e-8)
  expect_equal(r$gam$null.deviance, m$null.deviance, tolerance = 1e-10)
  g <- broom::glance(r)
  expect_equal(g$deviance, deviance(m), tolerance = 1e-8)
  expect_equal(g$deviance_explained, summary(m)$dev.expl, tolerance = 1e-8)
  expect_equal(summary(r)$deviance_explained, summary(m)$dev.expl, tolerance = 1e-8)
  a <- anova(r0, r)
  expect_equal(a[["Resid. Dev"]], c(deviance(r0), deviance(r)), tolerance = 1e-10)
  expect_equal(a$Deviance[2L], deviance(r0) - deviance(r), tolerance = 1e-10)
})

test_that("fitted() of a ratio classifier is the ratio, predict(type = \"response\"), as its help says", {
  r <- fit_gauss_ratio()
  expect_equal(fitted(r), predict(r, type = "response"), tolerance = 1e-12)
  # The probability that a pair is joint, which the help gives as plogis(predict() - log(n_shuffle)).
  expect_equal(plogis(predict(r) - log(r$n_shuffle)), unname(r$gam$fitted.values), tolerance = 1e-10)
})

test_that("logLik(newdata =) is the held-out log-likelihood of the classification, near the exact ratio's", {
  r <- fit_gauss_ratio()
  expect_s3_class(r, c("nce_ratio_gam", "nce_ratio", "nce_result"), exact = TRUE)
  set.seed(8)
  th <- cbind(mu = runif(1000, -2, 2))
  test <- data.frame(th, simulate_summaries(gauss_sim, gauss_summ, th, batch = TRUE)$summaries)
  held <- logLik(r, newdata = test)
  # 1,000 joint pairs and 1,000 shuffled ones (n_shuffle = 1); df as in-sample.
  expect_identical(attr(held, "nobs"), 2000L)
  expect_identical(attr(held, "df"), attr(logLik(r), "df"))
  # The exact log ratio: m | mu ~ N(mu, 1/20), mu ~ U(-2, 2), so p(m) = (Phi((m + 2)/s) - Phi((m - 2)/s)) / 4.
  s <- sqrt(1 / 20)
  exact_lr <- function(mu, m) dnorm(m, mu, s, log = TRUE) - log((pnorm((m + 2) / s) - pnorm((m - 2) / s)) / 4)
  shift <- c(2:1000, 1L)
  ll_exact <- sum(plogis(exact_lr(test$mu, test$m), log.p = TRUE)) +
    sum(plogis(-exact_lr(test$mu[shift], test$m), log.p = TRUE))
  # The fitted classifier scores held-out pairs within 2% of the exact ratio (measured: 0.9%, -609.7
  # against -604.4), far above a classifier that cannot tell the pairs apart (2000 log(1/2) = -1386).
  expect_equal(as.numeric(held), ll_exact, tolerance = 0.02)
  expect_gt(as.numeric(held), 2000 * log(0.5))
  # Not the in-sample value, and it moves with the rows.
  expect_false(isTRUE(all.equal(as.numeric(held), as.numeric(logLik(r, newdata = test[1:500, ])))))
  expect_error(logLik(r, newdata = test[1, ]), class = "nce_error_input")
  expect_error(logLik(r, newdata = test[0, ]), class = "nce_error_input")
  # Two shuffled pairs per joint one: each row contrasted with the next two.
  set.seed(21)
  r2 <- ratio_amortised(gauss_sim, gauss_summ, prior_uniform(mu = c(-2, 2)), n = 500, batch = TRUE,
                        formula = ~ te(mu, m, k = 5), n_shuffle = 2)
  expect_identical(attr(logLik(r2, newdata = test[1:10, ]), "nobs"), 30L)
  # The GAM-only methods stay on the GAM; a network refuses them, saying why (test-nce-mlp.R).
  expect_identical(confint(r), stats::confint.default(r))
})
