# Hostile inputs to the simulator-model functions: each gives a classed condition, none
# crashes R.

fz_sim <- function(theta, n) matrix(rnorm(n * 5, theta[, "mu"]), n, 5)
fz_summ <- function(x) cbind(m = rowMeans(x), v = apply(x, 1, var))
fz_prior <- prior_uniform(mu = c(-1, 1))

test_that("priors and grids refuse bad input", {
  cases <- list(
    function() prior_uniform(),
    function() prior_uniform(c(0, 1)),
    function() prior_uniform(a = c(1, 0)),
    function() prior_uniform(a = c(0, Inf)),
    function() prior_uniform(a = c(NA, 1)),
    function() prior_uniform(a = "x"),
    function() prior_normal(c(a = 0), -1),
    function() prior_normal(c(0, 1), c(1, 1)),
    function() prior_normal(c(a = NaN), 1),
    function() prior_custom(1, function(t) 0, "a"),
    function() prior_custom(function(n) 1, function(t) 0, character()),
    function() theta_grid(fz_prior, 0),
    function() theta_grid(fz_prior, NA),
    function() theta_grid(fz_prior, c(2, 3)),
    function() theta_grid("prior", 3),
    function() theta_grid(prior_normal(c(a = 0), 1), 3)
  )
  for (f in cases) expect_error(f(), class = "nce_error_input")
  options(nce.max_memory = 1e6)
  on.exit(options(nce.max_memory = NULL))
  expect_error(theta_grid(fz_prior, 1e7), class = "nce_error_size")
})

test_that("simulate_summaries refuses bad input", {
  th <- cbind(mu = 0)
  cases <- list(
    function() simulate_summaries("f", fz_summ, th),
    function() simulate_summaries(fz_sim, NULL, th),
    function() simulate_summaries(fz_sim, fz_summ, th, n = 0),
    function() simulate_summaries(fz_sim, fz_summ, th, n = NA),
    function() simulate_summaries(fz_sim, fz_summ, th, n = 1.5),
    function() simulate_summaries(fz_sim, fz_summ, th, batch = NA),
    function() simulate_summaries(fz_sim, fz_summ, cbind(mu = NaN)),
    function() simulate_summaries(fz_sim, fz_summ, cbind(mu = Inf)),
    function() simulate_summaries(fz_sim, fz_summ, matrix(0, 0, 1, dimnames = list(NULL, "mu"))),
    function() simulate_summaries(fz_sim, fz_summ, matrix(0, 1, 1)),
    function() simulate_summaries(fz_sim, fz_summ, "mu"),
    function() simulate_summaries(fz_sim, fz_summ, th, chunk_size = -1)
  )
  for (f in cases) expect_error(f(), class = "nce_error_input")
  options(nce.max_memory = 1e4)
  on.exit(options(nce.max_memory = NULL))
  expect_error(simulate_summaries(fz_sim, fz_summ, th, n = 1e6), class = "nce_error_size")
})

test_that("a simulator that always fails gives a classed error; odd summaries are failures", {
  boom <- function(theta) stop("100% broken")
  expect_error(simulate_summaries(boom, fz_summ, cbind(mu = 0), n = 3), class = "nce_error_simulation")
  wrong_len <- function(x) if (runif(1) < 0.5) c(a = 1) else c(a = 1, b = 2)
  set.seed(1)
  expect_warning(s <- simulate_summaries(function(th) 1, wrong_len, cbind(mu = 0), n = 20),
                 class = "nce_warning_simulation")
  expect_true(any(grepl("length", s$failures$reason)))
  chars <- function(x) "a"
  expect_error(suppressWarnings(simulate_summaries(function(th) 1, chars, cbind(mu = 0), n = 2)),
               class = "nce_error_simulation")
})

test_that("lfire refuses bad input", {
  x_obs <- matrix(rnorm(5), 1)
  th <- theta_grid(fz_prior, 3)
  fit_with <- function(...) {
    args <- list(observed = x_obs, simulator = fz_sim, summaries = fz_summ, prior = fz_prior, theta = th,
                 n_theta = 20, n_marginal = 20, batch = TRUE, control = lfire_control(folds = 3, nlambda = 5))
    args[names(list(...))] <- list(...)
    do.call(lfire, args)
  }
  cases <- list(
    list(prior = list()),
    list(n_theta = 1),
    list(n_marginal = NA),
    list(n_theta = Inf),
    list(penalty = "elastic"),
    list(theta = matrix(NaN, 2, 1, dimnames = list(NULL, "mu"))),
    list(theta = matrix(0, 2, 1, dimnames = list(NULL, "sigma"))),
    list(theta = "grid"),
    list(observed = matrix(NA, 1, 5)),
    list(observed = "text"),
    list(control = "fast"),
    list(summaries = function(x) cbind(m = rowMeans(x), const = 1)),
    list(marginal = data.frame(a = 1))
  )
  for (cs in cases) expect_error(do.call(fit_with, cs), class = "nce_error_input", info = names(cs))
  expect_error(lfire_control(folds = 1), class = "nce_error_input")
  expect_error(lfire_control(lambda_min_ratio = 1), class = "nce_error_input")
  expect_error(lfire_control(nlambda = 0), class = "nce_error_input")
  expect_error(lfire_control(lambda = "max"), class = "nce_error_input")
  expect_error(lfire_control(quadratic = "yes"), class = "nce_error_input")
  expect_error(lfire_control(quadratic = c(TRUE, FALSE)), class = "nce_error_input")
  options(nce.max_memory = 1e5)
  on.exit(options(nce.max_memory = NULL))
  expect_error(fit_with(n_theta = 1e6), class = "nce_error_size")
})

test_that("the Rust LFIRE engine refuses malformed problems without crashing", {
  m <- matrix(rnorm(20), 10, 2)
  ctrl <- list(nlambda = 5, lambda_min_ratio = 0.01, nfolds = 3, one_se = 0, coarse = 1)
  bad <- list(
    list(m, m, c(0L, 10L), c(0, 0), "lasso", ctrl, 1, 1L)[],
    list(m, m[, 1, drop = FALSE], c(0L, 10L), c(0, 0), "lasso", ctrl, 1, 1L),
    list(m, m, c(0L, 11L), c(0, 0), "lasso", ctrl, 1, 1L),
    list(m, m, c(0L, 10L), 0, "lasso", ctrl, 1, 1L),
    list(m, m, c(0L, 10L), c(0, 0), "lasso", ctrl, -1, 1L),
    list(m, m, c(0L, 10L), c(0, 0), "lasso", ctrl, 1, 0L),
    list(m, m, c(0L, 10L), c(0, 0), "lars", ctrl, 1, 1L),
    list(m, m, c(0L, 10L), c(0, 0), "lasso", list(), 1, 1L),
    list(m, m, c(0L, 1L, 10L), c(0, 0), "lasso", ctrl, 1, 1L),
    list(m, m, c(0L, 10L), c(0, NaN), "lasso", ctrl, 1, 1L),
    list(m, m, c(0L, 10L), c(0, 0), "lasso", modifyList(ctrl, list(nfolds = 1)), 1, 1L),
    list(m, m, c(0L, 10L), c(0, 0), "lasso", modifyList(ctrl, list(coarse = 0)), 1, 1L)
  )
  bad[[1]][[1]][1, 1] <- Inf
  lfire_fit <- function(marginal, at_theta, starts, observed, penalty, control, seed, threads) {
    nce:::nce_lfire_fit(marginal, at_theta, starts, observed,
                        list(penalty = penalty, control = control, seed = seed, threads = threads))
  }
  for (a in bad) {
    expect_error(nce:::rs(do.call(lfire_fit, a)), class = "nce_error_input")
  }
  expect_error(nce:::rs(nce:::nce_lasso_cv(m, c(rep(0, 10)), rep(1:2, 5), list(nlambda = 5, lambda_min_ratio = 0.1))),
               class = "nce_error_input")
})

test_that("ratio_amortised and ratio_posterior refuse bad input", {
  cases <- list(
    function() ratio_amortised(fz_sim, fz_summ, "prior"),
    function() ratio_amortised(fz_sim, fz_summ, fz_prior, n = 5),
    function() ratio_amortised(fz_sim, fz_summ, fz_prior, n = 50, batch = TRUE, formula = "y"),
    function() ratio_amortised(fz_sim, function(x) cbind(mu = rowMeans(x)), fz_prior, n = 50, batch = TRUE),
    function() ratio_amortised(fz_sim, function(x) cbind(`a b` = rowMeans(x)), fz_prior, n = 50, batch = TRUE),
    function() ratio_amortised(fz_sim, fz_summ, fz_prior, n = 50, batch = TRUE, discrete = NA),
    function() ratio_amortised(fz_sim, fz_summ, fz_prior, n = 50, batch = TRUE, discrete = TRUE, formula = ~ mu + m),
    function() ratio_posterior("fit", 1)
  )
  for (f in cases) expect_error(f(), class = "nce_error_input")
})

test_that("the methods of an amortised ratio refuse bad input with classed errors", {
  set.seed(3)
  r <- ratio_amortised(fz_sim, fz_summ, fz_prior, n = 100, batch = TRUE, formula = ~ s(mu, k = 4) + ti(mu, m, k = 3))
  nd <- data.frame(mu = 0.1, m = 0.2, v = 1)
  cases <- list(
    function() predict(r, nd, type = "terms"),
    function() predict(r, nd, type = NA),
    function() predict(r, nd, se.fit = NA),
    function() predict(r, "rows"),
    function() predict(r, data.frame(mu = 1)),
    function() predict(r, data.frame(mu = "a", m = 1, v = 1)),
    function() predict(r, list(mu = 1, m = 2)),
    function() anova(r, lm(1 ~ 1)),
    function() generics::tidy(r, parametric = NA),
    function() generics::augment(r, se_fit = "yes"),
    function() generics::augment(r, newdata = data.frame(m = 1))
  )
  for (f in cases) expect_error(f(), class = "nce_error_input")
  expect_error(predict(r, data.frame(mu = Inf, m = 0.2, v = 1)), class = "nce_error_input")
  expect_error(generics::augment(r, newdata = data.frame(mu = 0.1, m = -Inf, v = 1)), class = "nce_error_input")
  expect_error(confint(r, level = 2), class = "nce_error_input")
  expect_error(confint(r, level = NA), class = "nce_error_input")
  expect_true(is.na(predict(r, data.frame(mu = NA, m = 0.2, v = 1))))
  expect_length(predict(r, data.frame(mu = numeric(0), m = numeric(0), v = numeric(0))), 0L)
  post <- ratio_posterior(r, matrix(rnorm(5), 1), n_draws = 200)
  for (bad in list(0, -1, NA, Inf, 2.5)) expect_error(simulate(post, nsim = bad), class = "nce_error_input")
  # A huge nsim is refused before anything of its size is allocated.
  expect_error(simulate(post, nsim = 2e9), class = "nce_error_size")
  expect_error(confint(post, level = 1.5), class = "nce_error_input")
  expect_error(generics::tidy(post, conf.level = 5), class = "nce_error_input")
  expect_error(simulate(r), class = "nce_error_unsupported")
  # ratio_coverage(): hostile sizes, levels and objects.
  cov_cases <- list(
    function() ratio_coverage("fit"),
    function() ratio_coverage(post),
    function() ratio_coverage(r, n = -1),
    function() ratio_coverage(r, n = NA),
    function() ratio_coverage(r, n = 1e12),
    function() ratio_coverage(r, n_draws = "a"),
    function() ratio_coverage(r, n_draws = 1e12),
    function() ratio_coverage(r, levels = NA),
    function() ratio_coverage(r, levels = c(0, 0.5)),
    function() ratio_coverage(r, levels = list(0.5))
  )
  for (f in cov_cases) expect_error(f(), class = "nce_error_input")
  set.seed(4)
  other <- ratio_amortised(fz_sim, fz_summ, fz_prior, n = 60, batch = TRUE, formula = ~ s(mu, k = 4) + s(m, k = 4))
  expect_error(anova(r, other), class = "nce_error_input")
  # Rows with NA summaries predict NA, as predict.gam does.
  expect_true(is.na(predict(r, data.frame(mu = 0.1, m = NA_real_, v = 1))))
})

test_that("ratio_posterior refuses bad Metropolis arguments, and the Rust sampler malformed tables", {
  set.seed(3)
  r <- ratio_amortised(fz_sim, fz_summ, fz_prior, n = 100, batch = TRUE, formula = ~ s(mu, k = 4) + s(m, k = 4))
  x <- matrix(rnorm(5), 1)
  mh <- function(...) ratio_posterior(r, x, n_draws = 100, method = "metropolis", n_chains = 5, burnin = 2, ...)
  cases <- list(
    function() ratio_posterior(r, x, method = "gibbs"),
    function() ratio_posterior(r, x, method = NA),
    function() mh(engine = "julia"),
    function() mh(engine = 1),
    function() mh(n_grid = 3),
    function() mh(n_grid = NaN),
    function() mh(n_grid = 1e9),
    function() mh(scale = -1),
    function() mh(scale = c(0.1, 0.1)),
    function() mh(scale = NA_real_),
    function() mh(scale = Inf),
    function() mh(scale = "a"),
    function() ratio_posterior(r, x, method = "metropolis", n_chains = 1),
    function() ratio_posterior(r, x, method = "metropolis", n_chains = NA),
    function() ratio_posterior(r, x, method = "metropolis", burnin = -1),
    function() ratio_posterior(r, x, method = "metropolis", burnin = Inf),
    function() ratio_posterior(r, x, n_draws = 5, method = "metropolis")
  )
  for (f in cases) expect_error(f(), class = "nce_error_input")
  options(nce.max_memory = 1e6)
  on.exit(options(nce.max_memory = NULL))
  expect_error(ratio_posterior(r, x, n_draws = 1e8, method = "metropolis"), class = "nce_error_size")
  options(nce.max_memory = NULL)
  v <- matrix(0, 10, 1)
  pr <- list(kind = "uniform", lower = -1, upper = 1)
  ok <- list(v, -1, 1, pr, matrix(0, 2, 1), 0.1, 0, 5, 1, 1L)
  bad <- list(
    replace(ok, 1L, list(matrix(0, 3, 1))),
    replace(ok, 1L, list(matrix(NaN, 10, 1))),
    replace(ok, 2L, list(c(-1, 0))),
    replace(ok, 3L, list(-2)),
    replace(ok, 4L, list(list(kind = "beta"))),
    replace(ok, 4L, list(list(kind = "normal", mean = 0, sd = 0))),
    replace(ok, 4L, list(list(kind = "uniform", lower = c(-1, 0), upper = 1))),
    replace(ok, 5L, list(matrix(0, 2, 2))),
    replace(ok, 5L, list(matrix(NA_real_, 2, 1))),
    replace(ok, 6L, list(0)),
    replace(ok, 6L, list(c(0.1, 0.1))),
    replace(ok, 7L, list(-1)),
    replace(ok, 8L, list(0)),
    replace(ok, 8L, list(2^60)),
    replace(ok, 9L, list(-1)),
    replace(ok, 10L, list(0L))
  )
  metropolis <- function(values, lo, hi, prior, starts, scale, burnin, steps, seed, threads) {
    nce:::nce_ratio_metropolis(list(values = values, lo = lo, hi = hi), prior, starts,
                               list(scale = scale, burnin = burnin, steps = steps, seed = seed, threads = threads))
  }
  for (a in bad) expect_error(nce:::rs(do.call(metropolis, a)), class = "nce_error_input")
  expect_type(nce:::rs(do.call(metropolis, ok))$draws, "double")
  expect_error(nce:::rs(nce:::nce_sum_tables_eval(v, -1, 1, matrix(0, 2, 3))), class = "nce_error_input")
  expect_true(is.na(nce:::rs(nce:::nce_sum_tables_eval(v, -1, 1, matrix(2, 1, 1)))))
})

test_that("summaries are matched by name; wrong, missing or fewer observed summaries are refused", {
  sim1 <- function(theta) rnorm(30, theta[["mu"]])
  k <- 0
  swap <- function(x) {
    k <<- k + 1
    if (k %% 2) c(mean = mean(x), sd = stats::sd(x)) else c(sd = stats::sd(x), mean = mean(x))
  }
  set.seed(5)
  s <- simulate_summaries(sim1, swap, cbind(mu = c(0, 0.1)), n = 10)
  expect_identical(colnames(s$summaries), c("mean", "sd"))
  expect_true(all(s$summaries[, "sd"] > 0.5) && all(abs(s$summaries[, "mean"]) < 0.8))
  renamed <- function(x) {
    k <<- k + 1
    if (k %% 2) c(mean = mean(x), sd = stats::sd(x)) else c(a = mean(x), b = stats::sd(x))
  }
  k <- 0
  expect_warning(s2 <- simulate_summaries(sim1, renamed, cbind(mu = 0), n = 10), "named",
                 class = "nce_warning_simulation")
  expect_identical(sum(s2$ok), 5L)
  summ1 <- function(x) c(mean = mean(x), sd = stats::sd(x))
  obs_only <- function(f) function(x) if (length(x) == 29L) f(x) else summ1(x)
  x_obs <- rnorm(29)
  fit_with <- function(summ) {
    set.seed(6)
    lfire(x_obs, sim1, summ, fz_prior, theta = theta_grid(fz_prior, 5), n_theta = 30, n_marginal = 30,
          control = lfire_control(folds = 3))
  }
  expect_error(fit_with(obs_only(function(x) c(mean = mean(x)))), "observed", class = "nce_error_input")
  expect_error(fit_with(obs_only(function(x) c(a = mean(x), b = stats::sd(x)))), "named", class = "nce_error_input")
  expect_error(fit_with(obs_only(function(x) c(mean(x), stats::sd(x)))), "named", class = "nce_error_input")
  swapped <- fit_with(obs_only(function(x) c(sd = stats::sd(x), mean = mean(x))))
  expect_identical(swapped$observed_summaries, summ1(x_obs))
  expect_equal(swapped$log_ratio, fit_with(summ1)$log_ratio)
})

test_that("observed data outside every simulation warn; odd formulas and huge summaries are classed", {
  set.seed(3)
  r <- ratio_amortised(fz_sim, fz_summ, fz_prior, n = 100, batch = TRUE, formula = ~ s(mu, k = 4) + s(m, k = 4))
  expect_warning(ratio_posterior(r, matrix(rnorm(5, 50), 1), n_draws = 200), "observed",
                 class = "nce_warning_extrapolation")
  expect_no_warning(ratio_posterior(r, matrix(rnorm(5, 0), 1), n_draws = 200))
  sim1 <- function(theta) rnorm(30, theta[["mu"]])
  summ1 <- function(x) c(mean = mean(x), sd = stats::sd(x))
  set.seed(7)
  expect_warning(lfire(rnorm(30, 40), sim1, summ1, fz_prior, theta = theta_grid(fz_prior, 5), n_theta = 30,
                       n_marginal = 30, control = lfire_control(folds = 3)),
                 "observed", class = "nce_warning_extrapolation")
  expect_error(ratio_amortised(fz_sim, fz_summ, fz_prior, n = 50, batch = TRUE, formula = ~ s(unknown)), "unknown",
               class = "nce_error_input")
  s300 <- function(x) cbind(m = rowMeans(x) * 1e300, v = apply(x, 1, var))
  expect_error(ratio_amortised(fz_sim, s300, fz_prior, n = 50, batch = TRUE, classifier = "gam"), "1e150",
               class = "nce_error_data")
})

test_that("a custom prior's non-finite or failing draws are refused where they are drawn, before simulating", {
  called <- FALSE
  sim <- function(theta, n) {
    called <<- TRUE
    matrix(rnorm(n * 5, theta[, "mu"]), n, 5)
  }
  na_prior <- prior_custom(sample = function(n) cbind(mu = c(NA, runif(n - 1))),
                           log_density = function(t) rep(0, nrow(t)), names = "mu")
  inf_prior <- prior_custom(sample = function(n) cbind(mu = c(runif(n - 1), Inf)),
                            log_density = function(t) rep(0, nrow(t)), names = "mu")
  failing_prior <- prior_custom(sample = function(n) stop("boom"), log_density = function(t) rep(0, nrow(t)),
                                names = "mu")
  cases <- list(
    list("ratio_amortised, NA draw", function() ratio_amortised(sim, fz_summ, na_prior, n = 50, batch = TRUE),
         "nce_error_input"),
    list("ratio_amortised, Inf draw", function() ratio_amortised(sim, fz_summ, inf_prior, n = 50, batch = TRUE),
         "nce_error_input"),
    list("lfire, NA draw", function() lfire(matrix(rnorm(5), 1), sim, fz_summ, na_prior, theta = cbind(mu = 0),
                                            n_theta = 20, n_marginal = 20, batch = TRUE), "nce_error_input"),
    list("ratio_amortised, sample fails", function() ratio_amortised(sim, fz_summ, failing_prior, n = 50, batch = TRUE),
         "nce_error_model")
  )
  for (cs in cases) {
    e <- expect_error(expect_no_warning(cs[[2L]]()), class = cs[[3L]], label = cs[[1L]])
    expect_match(conditionMessage(e), "`prior`", label = cs[[1L]])
  }
  expect_false(called)
})

test_that("lfire() with a simulator that always fails gives only its classed error, before simulating at theta", {
  n_calls <- 0L
  na_sim <- function(theta, n) {
    n_calls <<- n_calls + 1L
    matrix(NA_real_, n, 5)
  }
  pr <- prior_uniform(mu = c(-2, 2))
  expect_no_warning(expect_error(
    lfire(matrix(rnorm(5), 1), na_sim, fz_summ, pr, theta = theta_grid(pr, 9), n_theta = 20, n_marginal = 50,
          batch = TRUE), "prior-predictive.*non-finite summary", class = "nce_error_simulation"))
  expect_identical(n_calls, 1L)  # the prior-predictive chunk only
})

test_that("Metropolis posteriors: stuck chains warn and count as few draws; endless chains are refused at once", {
  set.seed(9)
  r <- ratio_amortised(fz_sim, fz_summ, fz_prior, n = 600, batch = TRUE, formula = ~ te(mu, m, k = 4))
  obs <- matrix(rnorm(5, 0.3), 1)
  for (sc in c(1e-300, 1e300)) {
    expect_warning(p <- ratio_posterior(r, obs, n_draws = 1000, method = "metropolis", n_chains = 20, scale = sc),
                   "accepted", class = "nce_warning_mixing")
    # 20 chains that never move are about 20 draws, not 1000 (the estimate gave 1000 before).
    expect_lt(p$ess[[1]], 21)
  }
  good <- ratio_posterior(r, obs, n_draws = 1000, method = "metropolis", n_chains = 20)
  expect_gt(good$ess[[1]], 50)
  t0 <- proc.time()[["elapsed"]]
  expect_error(ratio_posterior(r, obs, method = "metropolis", n_chains = 20, burnin = 2e9), "burnin",
               class = "nce_error_size")
  expect_error(ratio_posterior(r, obs, n_draws = 1000, method = "metropolis", n_chains = 1e9), "n_chains",
               class = "nce_error_size")
  expect_error(rtgm(10, ring_graph(4), burnin = 2e9), "burnin", class = "nce_error_size")
  expect_lt(proc.time()[["elapsed"]] - t0, 5)
})

test_that("update() of an LFIRE fit reproduces it when the summaries draw random numbers", {
  noisy <- function(x) cbind(m = rowMeans(x), noise = rowMeans(x) + stats::rnorm(nrow(x), 0, 0.1))
  set.seed(10)
  obs <- matrix(rnorm(5, 0.2), 1)
  fit <- lfire(obs, fz_sim, noisy, fz_prior, theta = theta_grid(fz_prior, 5), n_theta = 60, n_marginal = 80,
               batch = TRUE, penalty = "ridge")
  again <- update(fit)
  expect_identical(coef(again), coef(fit))
  expect_identical(again$observed_summaries, fit$observed_summaries)
  expect_identical(again$summaries, fit$summaries)
})

test_that("grids, graphs and Metropolis draws: the second audit's cases", {
  expect_error(theta_grid(fz_prior, 3, ranges = "mu"), "`ranges`", class = "nce_error_input")
  expect_error(theta_grid(fz_prior, 3, ranges = list(zz = c(0, 2))), "`ranges`", class = "nce_error_input")
  expect_identical(nrow(theta_grid(fz_prior, 3, ranges = list(mu = c(0, 2)))), 3L)
  expect_error(ring_graph(5, low = 1e308, high = 1e308), "too large", class = "nce_error_input")
  k <- ring_graph(5)
  k[1, 2] <- k[2, 1] <- NA
  expect_error(tgm_edges(k, 0.1), "missing", class = "nce_error_data")
  set.seed(11)
  r <- ratio_amortised(fz_sim, fz_summ, fz_prior, n = 600, batch = TRUE, formula = ~ te(mu, m, k = 4))
  obs <- matrix(rnorm(5, 0.3), 1)
  for (nd in c(10, 15, 1000)) {
    p <- ratio_posterior(r, obs, n_draws = nd, method = "metropolis", n_chains = if (nd == 10) 20 else 10)
    expect_identical(nrow(p$draws), as.integer(nd))
    expect_lte(p$ess[[1]], nd)
  }
})

test_that("a simulator failing every time names the cause: a parameter it reads, or a vector for a matrix", {
  summ <- function(x) cbind(m = rowMeans(x))
  # A column the prior does not have: R says only "subscript out of bounds".
  sim <- function(theta, n) matrix(rnorm(n * 10, theta[, "sigma"]), n, 10)
  set.seed(1)
  expect_error(ratio_amortised(sim, summ, fz_prior, n = 50, batch = TRUE),
               "reads the parameter\\(s\\) \"sigma\", not among those it is given \\(the prior's: mu\\)",
               class = "nce_error_simulation")
  sim1 <- function(theta) rnorm(10, theta[["tau"]])
  expect_error(simulate_summaries(sim1, function(x) c(m = mean(x)), cbind(mu = c(0, 1))), "\"tau\"",
               class = "nce_error_simulation")
  # A batch simulator returning a vector where summaries wants a matrix.
  sim2 <- function(theta, n) rnorm(n * 10, theta[, "mu"])
  set.seed(1)
  expect_error(ratio_amortised(sim2, summ, fz_prior, n = 50, batch = TRUE),
               "returned a vector \\(length 10\\) for one parameter row", class = "nce_error_simulation")
  # Matrix indexing of the one parameter vector a simulator gets without batch = TRUE.
  sim3 <- function(theta) rnorm(10, theta[, "mu"])
  expect_error(simulate_summaries(sim3, function(x) c(m = mean(x)), cbind(mu = c(0, 1))),
               "without `batch = TRUE` the simulator gets one named parameter vector", class = "nce_error_simulation")
  # A failure of the model itself is reported as it was, with no guessed cause.
  sim4 <- function(theta, n) stop("model diverged")
  e <- expect_error(ratio_amortised(sim4, summ, fz_prior, n = 50, batch = TRUE), class = "nce_error_simulation")
  expect_match(conditionMessage(e), "model diverged")
  expect_false(grepl("Likely cause", conditionMessage(e)))
})
