# LFIRE against truth: the ARCH(1) posterior computed exactly on the same grid, a Gaussian
# model with a known log ratio, glmnet on the same lasso problems, and the simulation
# plumbing (reproducibility across workers, failures reported, caches reused).

# A logistic lasso problem with three signals among 12 features, and 10 CV folds.
lasso_problem <- function() {
  set.seed(1)
  n <- 600
  x <- matrix(rnorm(n * 12), n, 12)
  y <- as.double(runif(n) < plogis(0.4 + 1.2 * x[, 1] - 0.8 * x[, 2] + 0.3 * x[, 3]))
  list(x = x, y = y, foldid = sample(rep(1:10, length.out = n)))
}

# A Gaussian mean: 30 N(mu, 1) draws summarised by `summ` (by default their mean, s ~ N(mu, 1/30)),
# prior N(0, 1), an observed series at mu = 0.4 (seed 3) and a grid of `n_grid` values of mu on (-0.6, 1.4).
gaussian_mean_problem <- function(n_grid, summ = function(x) cbind(mean = rowMeans(x))) {
  sim <- function(theta, n) matrix(rnorm(n * 30, theta[, "mu"]), n, 30)
  set.seed(3)
  x_obs <- matrix(rnorm(30, 0.4), 1)
  pr <- prior_normal(c(mu = 0), 1)
  list(sim = sim, summ = summ, x_obs = x_obs, pr = pr, th = theta_grid(pr, n_grid, ranges = list(mu = c(-0.6, 1.4))))
}

test_that("the Rust lasso path and its CV match glmnet on the same data, folds and lambdas", {
  skip_if_not_installed("glmnet")
  pr <- lasso_problem()
  x <- pr$x
  y <- pr$y
  foldid <- pr$foldid
  ctrl <- list(nlambda = 60, lambda_min_ratio = 1e-3)
  ours <- nce:::rs(nce:::nce_lasso_cv(x, y, foldid, ctrl))
  g <- glmnet::glmnet(x, y, family = "binomial", lambda = ours$lambda, standardize = FALSE, thresh = 1e-14)
  b <- as.matrix(g$beta)
  k <- seq_len(min(ncol(b), length(ours$lambda)))
  expect_gt(length(k), 20)
  # Same path: coefficients to 1e-6 against glmnet converged to 1e-14 (each lambda's fit stops
  # when the KKT conditions hold to 1e-8; measured 1.5e-7, intercepts 1.8e-8).
  expect_lt(max(abs(b[, k] - ours$beta[, k])), 1e-6)
  expect_lt(max(abs(g$a0[k] - ours$intercept[k])), 1e-6)
  cv <- glmnet::cv.glmnet(x, y, family = "binomial", lambda = ours$lambda, standardize = FALSE, foldid = foldid,
                          thresh = 1e-14)
  expect_equal(unname(cv$cvm[k]), ours$cvm[k], tolerance = 1e-4)
  expect_equal(cv$lambda.min, ours$lambda[ours$index_min])
})

test_that("the lasso path meets the KKT conditions on strongly correlated features", {
  # Products of correlated summaries, as ARCH's autocorrelations and their pairwise products:
  # a rule on the size of coordinate-descent steps alone stopped 0.07 away from the optimum.
  set.seed(4)
  n <- 800
  z <- matrix(rnorm(n * 4), n, 4) %*% chol(0.8 + 0.2 * diag(4))
  x <- scale(cbind(z, z[, 1] * z[, 2], z[, 1] * z[, 3], z[, 2] * z[, 3], z[, 1]^2))
  y <- as.double(runif(n) < plogis(0.5 * z[, 1] - 0.7 * z[, 2] + 0.4 * z[, 1] * z[, 2]))
  fit <- nce:::rs(nce:::nce_lasso_cv(x, y, rep(1:10, length.out = n), list(nlambda = 80, lambda_min_ratio = 1e-4)))
  viol <- vapply(seq_along(fit$lambda), function(k) {
    b <- fit$beta[, k]
    r <- y - plogis(fit$intercept[k] + drop(x %*% b))
    g <- drop(crossprod(x, r)) / n
    lam <- fit$lambda[k]
    max(abs(mean(r)), abs(g[b != 0] - lam * sign(b[b != 0])), pmax(abs(g[b == 0]) - lam, 0))
  }, 0)
  expect_gt(length(viol), 40)
  expect_lt(max(viol), 1e-7)
})

test_that("one-step CV approximates glmnet's exact K-fold CV curve and its minimum", {
  skip_if_not_installed("glmnet")
  pr <- lasso_problem()
  x <- pr$x
  y <- pr$y
  foldid <- pr$foldid
  ctrl <- list(nlambda = 60, lambda_min_ratio = 1e-3, onestep = 1)
  os <- nce:::rs(nce:::nce_lasso_cv(x, y, foldid, ctrl))
  cv <- glmnet::cv.glmnet(x, y, family = "binomial", lambda = os$lambda, standardize = FALSE, foldid = foldid,
                          thresh = 1e-14)
  k <- seq_along(os$cvm)
  # Each fold's fit is one Newton step from the full-data fit: the CV deviance to 1e-3
  # relative (measured 3.8e-4), and the chosen lambda's exact CV deviance within 1e-3 of the
  # exact minimum (the curve is flat there: the two minima are 7 lambdas apart).
  expect_lt(max(abs(os$cvm - cv$cvm[k]) / cv$cvm[k]), 1e-3)
  expect_lt(cv$cvm[os$index_min] - min(cv$cvm), 1e-3 * min(cv$cvm))
  expect_equal(os$cvsd, cv$cvsd[k], tolerance = 0.05)
})

test_that("lfire recovers a Gaussian log ratio and ignores noise summaries", {
  # s ~ N(mu, 1/30) through the sample mean; prior N(0, 1): exact posterior is normal.
  # The log ratio is quadratic in the mean: (mean, mean^2) make the logistic model exact.
  summ <- function(x) {
    cbind(mean = rowMeans(x), mean2 = rowMeans(x)^2, noise1 = rnorm(nrow(x)), noise2 = rnorm(nrow(x)))
  }
  p <- gaussian_mean_problem(31, summ)
  fit <- lfire(p$x_obs, p$sim, p$summ, p$pr, theta = p$th, n_theta = 300, n_marginal = 600, batch = TRUE,
               control = lfire_control(folds = 5))
  xbar <- mean(p$x_obs)
  post_var <- 1 / (1 + 30)
  post_mean <- post_var * 30 * xbar
  # Grid of spacing 0.065: the posterior mean to 0.05 and the sd (0.18) to 25 %.
  expect_equal(unname(coef(fit)), post_mean, tolerance = 0.05 / abs(post_mean))
  expect_equal(sqrt(vcov(fit)[1, 1]), sqrt(post_var), tolerance = 0.25)
  s <- summary(fit)
  expect_true("mean" %in% s$selected)
})

test_that("quadratic features give a log ratio quadratic in the summary (exact for a Gaussian mean)", {
  # Only the sample mean as summary: log N(s; mu, 1/30) - log N(s; 0, 1 + 1/30) is quadratic
  # in s, so a linear log ratio cannot be exact, while (s, s^2) can.
  p <- gaussian_mean_problem(31)
  fit <- lfire(p$x_obs, p$sim, p$summ, p$pr, theta = p$th, n_theta = 300, n_marginal = 600, batch = TRUE,
               control = lfire_control(folds = 5, quadratic = TRUE, scores = "standard"))
  expect_identical(colnames(fit$beta), c("mean", "mean^2"))
  post_var <- 1 / 31
  post_mean <- post_var * 30 * mean(p$x_obs)
  # As the two-summary test above: the mean to 0.05, the sd (0.18) to 25 %.
  expect_equal(unname(coef(fit)), post_mean, tolerance = 0.05 / abs(post_mean))
  expect_equal(sqrt(vcov(fit)[1, 1]), sqrt(post_var), tolerance = 0.25)
  expect_true("mean^2" %in% summary(fit)$selected)
  # The defaults: normal scores (here nearly s / sd, the marginal being normal) and their
  # one-sided squares, which together hold the square: the same tolerances.
  fit_n <- update(fit, control = lfire_control(folds = 5))
  expect_identical(colnames(fit_n$beta), c("mean", "mean+^2", "mean-^2"))
  expect_equal(unname(coef(fit_n)), post_mean, tolerance = 0.05 / abs(post_mean))
  expect_equal(sqrt(vcov(fit_n)[1, 1]), sqrt(post_var), tolerance = 0.25)
  expect_error(lfire_control(quadratic = NA), class = "nce_error_input")
  expect_error(lfire_control(scores = "rank"), class = "nce_error_input")
})

test_that("the stiffness check flags a log ratio linear in a summary where it is quadratic", {
  # As above: the exact log ratio is quadratic in the sample mean, so linear features are too
  # stiff (held-out deviance clearly above that of the fit with squares), and squares are not.
  p <- gaussian_mean_problem(15)
  lin <- lfire(p$x_obs, p$sim, p$summ, p$pr, theta = p$th, n_theta = 200, n_marginal = 400, batch = TRUE,
               control = lfire_control(folds = 5, quadratic = FALSE))
  expect_true(lin$stiffness$flagged)
  expect_gt(lin$stiffness$gain, 0.1)
  expect_output(print(lin), "too stiff")
  expect_output(print(summary(lin)), "Classifier check")
  quad <- update(lin, control = lfire_control(folds = 5, quadratic = TRUE))
  expect_false(quad$stiffness$flagged)
  expect_null(update(lin, penalty = "ridge")$stiffness)
})

test_that("lfire's ARCH(1) posterior is close to the exact one on the same grid (lasso and ridge)", {
  set.seed(11)
  y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
  pr <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
  th <- theta_grid(pr, c(10, 8))
  exact <- arch_exact_posterior(drop(y_obs), th)
  fit <- lfire(y_obs, arch_simulate, arch_summaries, pr, theta = th, n_theta = 150, n_marginal = 300,
               batch = TRUE, control = lfire_control(folds = 5, nlambda = 50))
  em <- colSums(th * exact)
  lm <- coef(fit)
  flat <- rep(1 / nrow(th), nrow(th))
  # Stated tolerances at this CI size (80 points, 150 simulations per point, 17 summaries):
  # posterior means within 0.25 of the exact ones (measured 0.18), the symmetrised KL to the
  # exact posterior below 4 (measured 1.2-2.7) and at most half that of the flat prior's.
  expect_lt(max(abs(lm - em)), 0.25)
  expect_lt(sym_kl(fit$posterior, exact), 4)
  expect_lt(sym_kl(fit$posterior, exact), 0.5 * sym_kl(flat, exact))
  ridge <- update(fit, penalty = "ridge")
  expect_identical(ridge$simulations, fit$simulations)
  expect_true(all(is.finite(ridge$log_ratio)))
})

test_that("simulations are reproducible under set.seed() whatever the number of workers", {
  skip_if_not_installed("future")
  sim <- function(theta) rnorm(5, theta[["a"]])
  summ <- function(x) c(m = mean(x), s = sd(x))
  th <- cbind(a = c(0, 1, 2))
  future::plan("sequential")
  set.seed(4)
  s1 <- simulate_summaries(sim, summ, th, n = 4, chunk_size = 3)
  oplan <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(oplan), add = TRUE)
  set.seed(4)
  s2 <- simulate_summaries(sim, summ, th, n = 4, chunk_size = 3)
  future::plan("sequential")
  expect_identical(s1$summaries, s2$summaries)
  expect_equal(nrow(s1$summaries), 12L)
  # Means follow theta: one row of theta per block of 4.
  expect_equal(as.vector(tapply(s1$summaries[, "m"], s1$index, mean)), c(0, 1, 2), tolerance = 1)
})

test_that("simulator errors and non-finite summaries are counted and reported, not dropped silently", {
  sim <- function(theta) {
    if (theta[["a"]] > 1.5) stop("exploded")
    rnorm(5, theta[["a"]])
  }
  summ <- function(x) c(m = mean(x), l = if (mean(x) < -10) NaN else 1)
  th <- cbind(a = c(0, 1, 2, -20))
  set.seed(1)
  expect_warning(s <- simulate_summaries(sim, summ, th, n = 2), class = "nce_warning_simulation")
  expect_equal(sum(!s$ok), 4L)
  expect_setequal(unique(s$failures$reason), c("error: exploded", "non-finite summary"))
  expect_true(all(is.na(s$summaries[!s$ok, ])))
  expect_true(all(is.finite(s$summaries[s$ok, ])))
})

test_that("cached simulations are reused and give the same fit", {
  p <- toy_lfire_problem(5)
  fit <- toy_lfire_fit(p, n_theta = 50, n_marginal = 60, control = lfire_control(folds = 3, nlambda = 20))
  set.seed(99)
  again <- lfire(matrix(rnorm(10), 1), p$sim, p$summ, p$pr, theta = p$th, batch = TRUE, marginal = fit$marginal,
                 simulations = fit$simulations, control = lfire_control(folds = 3, nlambda = 20))
  expect_identical(again$simulations, fit$simulations)
  expect_equal(again$time[["simulation"]], 0)
  expect_error(lfire(matrix(rnorm(10), 1), p$sim, p$summ, p$pr, theta = p$th[1:3, ], batch = TRUE,
                     simulations = fit$simulations), class = "nce_error_input")
})

test_that("predict gives the log ratio at fitted and new parameter values", {
  sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
  summ <- function(x) cbind(m = rowMeans(x), m2 = rowMeans(x)^2)
  pr <- prior_uniform(mu = c(-1, 1))
  set.seed(5)
  x_obs <- matrix(rnorm(20, 0.2), 1)
  fit <- lfire(x_obs, sim, summ, pr, theta = theta_grid(pr, 7), n_theta = 400, n_marginal = 400, batch = TRUE,
               control = lfire_control(folds = 5, nlambda = 30))
  expect_equal(predict(fit), fit$log_ratio)
  expect_equal(sum(predict(fit, type = "posterior")), 1)
  # In the posterior's bulk (sd 0.22); in the far tails the fit extrapolates.
  xbar <- mean(x_obs)
  new_mu <- xbar + c(-0.15, 0.1)
  lr <- predict(fit, newdata = data.frame(mu = new_mu))
  # Truth: log N(xbar; mu, 1/20) - log p(xbar) with p the uniform-prior marginal.
  marg <- (pnorm(1, xbar, sqrt(1 / 20)) - pnorm(-1, xbar, sqrt(1 / 20))) / 2
  truth <- dnorm(xbar, new_mu, sqrt(1 / 20), log = TRUE) - log(marg)
  # Monte Carlo error of a 400 + 400 logistic fit: 0.5 on the log scale.
  expect_lt(max(abs(lr - truth)), 0.5)
  expect_error(predict(fit, se.fit = TRUE), class = "nce_error_unsupported")
})

test_that("prints and summaries are stable", {
  sim <- function(theta, n) matrix(rnorm(n * 10, theta[, "mu"]), n, 10)
  summ <- function(x) cbind(m = rowMeans(x), v = apply(x, 1, var))
  pr <- prior_uniform(mu = c(-1, 1))
  set.seed(2)
  fit <- lfire(matrix(rnorm(10), 1), sim, summ, pr, theta = theta_grid(pr, 5), n_theta = 50, n_marginal = 60,
               batch = TRUE, control = lfire_control(folds = 3, nlambda = 20))
  expect_snapshot(print(fit))
  expect_snapshot(summary(fit))
  expect_snapshot(print(pr))
})
