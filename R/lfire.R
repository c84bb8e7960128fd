# LFIRE: likelihood-free inference by ratio estimation (Thomas, Dutta, Corander, Kaski and
# Gutmann 2020). For each parameter value theta a penalised logistic regression between
# simulations at theta and a shared prior-predictive sample estimates
# h_theta(s) = log p(s | theta) / p(s); the posterior is prior x exp(h_theta(s_obs)).

#' Control settings of [lfire()]
#'
#' @param nlambda Length of the lasso's lambda path.
#' @param lambda_min_ratio Smallest lambda as a fraction of the largest.
#' @param folds Folds of the cross-validation that chooses lambda (glmnet's `nfolds`).
#' @param lambda `"min"` (the lambda of least CV deviance, as Thomas et al. 2020) or
#'   `"1se"` (the largest lambda within one standard error of it).
#' @param chunk_size Simulations per unit of parallel work for the prior-predictive sample
#'   (see [simulate_summaries()]).
#' @param coarse The cross-validation runs on every `coarse`-th lambda of the path (and the
#'   last), then on every lambda between the two coarse neighbours of the best one, which it
#'   reaches from the fits at the coarse lambda above (1: on every lambda, as glmnet). On the
#'   ARCH(1) benchmark, 4 takes two thirds of the time of 1 and gives the same posterior up to
#'   the variation between two choices of CV folds.
#' @param cv How the cross-validation gets each fold's fit at each lambda. `"onestep"` (the
#'   default): one proximal Newton step from the fit on all rows, on the fold's training rows
#'   (approximate K-fold CV; Beirami et al. 2017, Rad and Maleki 2020), solved exactly by an
#'   active-set method, so features may enter or leave; it fits one path instead of
#'   `folds + 1`. `"exact"`: a lasso path per fold, as glmnet's `cv.glmnet()`. On the ARCH(1)
#'   benchmark `"onestep"` takes a fifth of the fitting time of `"exact"` and its posterior is
#'   as close to the exact one (symmetrised KL 2.27-2.30 against 2.30-2.32 over two fold
#'   seeds); the two posteriors differ by less than two fold seeds of the exact CV do.
#' @param quadratic If `TRUE` (default), squares of the (mapped) summaries join them as
#'   features, so the log ratio can be quadratic in each summary: with `scores = "normal"` the
#'   one-sided squares \eqn{\max(z, 0)^2} and \eqn{\min(z, 0)^2} of each normal score z (each
#'   tail curves on its own), with `"standard"` the squares \eqn{z^2}. A log ratio linear in the
#'   summaries is right when theta shifts their distribution; when theta also changes their
#'   spread (as the autocorrelations of a short series), or when the prior-predictive sample is
#'   wider than the simulations at one theta (always), the linear one is too flat and the
#'   posterior too wide.
#' @param scores How each summary is mapped before the regression: `"normal"` (default) to normal
#'   scores by the prior-predictive sample's quantiles (a monotone map, continued linearly
#'   beyond them; every feature then standardised over that sample), or `"standard"`
#'   (standardised by the prior-predictive mean and sd, as ELFI and earlier versions). With
#'   normal scores, summaries with heavy tails (a variance, products of autocorrelations) no
#'   longer put their extremes into the fit, and a quadratic in them is what Gaussian summaries
#'   need. Measured on ARCH(1) (see [lfire()]).
#' @return A list for the `control` argument of [lfire()].
#' @references Beirami, A., Razaviyayn, M., Shahrampour, S. and Tarokh, V. (2017). On optimal
#'   generalizability in parametric learning. NeurIPS.
#'
#'   Rad, K. R. and Maleki, A. (2020). A scalable estimate of the out-of-sample prediction
#'   error via approximate leave-one-out cross-validation. JRSS B 82, 965-996.
#' @section What it refuses:
#' * `nlambda` not a whole number in 1..10000, `lambda_min_ratio` not a number strictly
#'   between 0 and 1, `folds` not a whole number in 2..1000, `lambda` not "min" or "1se",
#'   `coarse` not a whole number in 1..100, `cv` not "onestep" or "exact",
#'   `chunk_size` not a whole number >= 1, `quadratic` not TRUE/FALSE, `scores` not "normal"
#'   or "standard" (`nce_error_input`).
#' @examples
#' lfire_control(folds = 5)
#' @export
lfire_control <- function(nlambda = 100L, lambda_min_ratio = 1e-4, folds = 10L, lambda = c("min", "1se"),
                          chunk_size = 100L, quadratic = TRUE, coarse = 4L, cv = c("onestep", "exact"),
                          scores = c("normal", "standard")) {
  check_count(nlambda, max = 1e4)
  check_number(lambda_min_ratio, min = 0, max = 1, exclusive_min = TRUE)
  if (lambda_min_ratio >= 1) check_fail("one number > 0 and < 1", lambda_min_ratio, "lambda_min_ratio", sys.call())
  check_count(folds, min = 2, max = 1000)
  lambda <- check_choice(lambda, c("min", "1se"), "lambda", sys.call())
  check_count(chunk_size)
  check_bool(quadratic)
  check_count(coarse, max = 100)
  cv <- check_choice(cv, c("onestep", "exact"), "cv", sys.call())
  scores <- check_choice(scores, c("normal", "standard"), "scores", sys.call())
  list(nlambda = as.double(nlambda), lambda_min_ratio = as.double(lambda_min_ratio), folds = as.double(folds),
       one_se = as.double(lambda == "1se"), lambda = lambda, chunk_size = as.integer(chunk_size),
       quadratic = quadratic, coarse = as.double(coarse), cv = cv, onestep = as.double(cv == "onestep"),
       scores = scores)
}

#' Posterior of a simulator model by ratio estimation (LFIRE)
#'
#' For each parameter value in `theta`, `lfire()` simulates `n_theta` data sets, and once
#' for all values `n_marginal` data sets from the prior predictive; a penalised logistic
#' regression between the two samples' summary statistics estimates
#' \eqn{h_\theta(s) = \log p(s \mid \theta) - \log p(s)} (Thomas et al. 2020). The
#' posterior is \eqn{\pi(\theta) \exp(h_\theta(s_{obs}))}, normalised over a grid, or
#' weights \eqn{\exp(h_\theta(s_{obs}))} on draws from the prior.
#'
#' With `penalty = "lasso"` (default) the regression has an L1 penalty whose weight is
#' chosen by K-fold cross-validation of the binomial deviance (as glmnet's `cv.glmnet`),
#' which selects among many summaries; `penalty = "ridge"` uses a quadratic penalty with
#' its weight chosen by REML (the package's GAM engine). Both fits run in Rust, one
#' parameter value per thread. Summaries are standardised by the mean and standard
#' deviation of the prior-predictive sample.
#'
#' **Defaults, and how far from exact.** `n_theta = n_marginal = 500`, 10-fold one-step CV and
#' lambda.min are ELFI's setting of ARCH(1) (Thomas et al. 2020; `vignette("simulator")`,
#' `bench/lfire.R`), where the exact posterior is known by quadrature. The features (each summary
#' mapped to normal scores by the prior-predictive quantiles, plus its one-sided squares; see
#' [lfire_control()]) were chosen there over 10 observed series (`bench/lfire-series.R`): the
#' median posterior sds are 1.44 and 1.17 times the exact ones (more in `bench/README.md`).
#'
#' **Is the classifier too stiff?** A log ratio linear in the summaries is right when theta
#' shifts their distribution, too flat when theta also changes their spread, and a log ratio too
#' flat gives a posterior too wide. With the lasso, `lfire()` checks this at the (up to) 10
#' parameter values of highest posterior weight: it refits there with the next powers of the
#' summaries as extra features (cubes for the quadratic default, one-sided with normal scores;
#' squares with `quadratic = FALSE`)
#' and compares the cross-validated, i.e. held-out, binomial deviance per pair of the two fits.
#' When the richer classifier predicts held-out pairs better (a mean gain above 0.01 per pair
#' and above 2 standard errors of its spread over the points), `print()` says the classifier is
#' too stiff; `summary()` always reports the check (`$stiffness` holds it).
#'
#' @param observed The observed data, in the form `summaries` takes (with `batch = TRUE`,
#'   a batch of one data set).
#' @param simulator,summaries,batch The simulator model; see [simulate_summaries()].
#' @param prior An `nce_prior` ([prior_uniform()] etc.).
#' @param theta Parameter values: a grid from [theta_grid()] (default, 25 points per
#'   parameter), or a matrix of draws from the prior (then `type = "draws"`).
#' @param n_theta Simulations at each parameter value.
#' @param n_marginal Simulations from the prior predictive (shared).
#' @param penalty `"lasso"` or `"ridge"`.
#' @param method `"grid"` (posterior = prior x ratio, normalised over the points) or
#'   `"draws"` (`theta` drawn from the prior: weights proportional to the ratio); `"auto"`
#'   takes `"grid"` for [theta_grid()] output and `"draws"` otherwise.
#' @param marginal,simulations Cached simulations to reuse ([simulate_summaries()] output or
#'   a previous fit's `$marginal` / `$simulations`): the prior-predictive sample, and the
#'   simulations at `theta` (their parameter values must match `theta`).
#' @param control [lfire_control()] or a list of some of its settings, merged into the
#'   defaults (see [nce_vocabulary]).
#' @return An object of class `nce_lfire`: `theta`, `log_ratio`, `log_prior`, `posterior`
#'   (weights summing to 1), the fits (`intercept`, `beta` on the features (see [lfire_control()]),
#'   `lambda`, `df`), the simulations, `time` (simulation and fitting seconds, elapsed) and
#'   `cpu_time` (the same in CPU seconds of this R process, Rust threads included),
#'   `stiffness` (the check above: `points`, `deviance` and `deviance_richer` there, the mean
#'   `gain` and its `std.error`, `flagged`; `NULL` with the ridge penalty).
#' @section What it refuses:
#' * `simulator` or `summaries` not a function, `prior` not an `nce_prior`, `n_theta` or
#'   `n_marginal` not a whole number >= 2, `batch` not TRUE/FALSE, `penalty` or `method` not
#'   one of the choices, `control` not from [lfire_control()] (`nce_error_input`);
#' * `theta` without the prior's parameter columns or with non-finite values; `summaries`
#'   failing on, or giving non-finite values for, the observed data; cached `marginal` or
#'   `simulations` not from [simulate_summaries()], with another number of summaries, or
#'   run at other parameter values; a summary constant over the prior-predictive sample
#'   (it cannot be standardised) (`nce_error_input`);
#' * simulations at `theta` that would not fit in memory (`nce_error_size`, checked before
#'   simulating); fewer than two successful prior-predictive simulations
#'   (`nce_error_simulation`).
#' @references Thomas, O., Dutta, R., Corander, J., Kaski, S. and Gutmann, M. U. (2020).
#'   Likelihood-free inference by ratio estimation. Bayesian Analysis.
#' @examples
#' # Gaussian mean with unknown location, 3 summaries (one of them noise)
#' sim <- function(theta) rnorm(30, theta[["mu"]])
#' summ <- function(x) c(mean = mean(x), median = stats::median(x), noise = stats::rnorm(1))
#' set.seed(1)
#' x_obs <- rnorm(30, 0.5)
#' pr <- prior_uniform(mu = c(-2, 2))
#' fit <- lfire(x_obs, sim, summ, pr, theta = theta_grid(pr, 15), n_theta = 100, n_marginal = 100,
#'              control = lfire_control(folds = 5))
#' summary(fit)
#' @export
lfire <- function(observed, simulator, summaries, prior, theta = theta_grid(prior, 25L), n_theta = 500L,
                  n_marginal = 500L, penalty = c("lasso", "ridge"), batch = FALSE,
                  method = c("auto", "grid", "draws"), marginal = NULL, simulations = NULL,
                  control = lfire_control()) {
  rng <- rng_state()
  call <- match.call()
  ucall <- sys.call()
  check_simulator(simulator, summaries, prior, ucall)
  check_count(n_theta, min = 2)
  check_count(n_marginal, min = 2)
  check_bool(batch)
  penalty <- check_choice(penalty, c("lasso", "ridge"), "penalty", ucall)
  type <- check_choice(method, c("auto", "grid", "draws"), "method", ucall)
  control <- merge_control(control, lfire_control, call = ucall)
  if (type == "auto") type <- if (is.null(attr(theta, "grid"))) "draws" else "grid"
  grid_pts <- attr(theta, "grid")
  theta <- as_theta_matrix(theta, prior$names, call = ucall)
  if (any(!is.finite(theta))) nce_abort("`theta` has non-finite parameter values.", "input", call = ucall)
  if (is.null(simulations)) check_size(8 * nrow(theta) * n_theta * 20, "n_theta", "the simulations", call = ucall)

  s_obs <- observed_summaries(summaries, observed, batch, ucall)
  t_sim <- 0
  c_sim <- 0
  if (is.null(marginal)) {
    marginal <- lfire_prior_predictive(simulator, summaries, prior, n_marginal, batch, control$chunk_size, ucall)
    t_sim <- t_sim + marginal$time
    c_sim <- c_sim + marginal$cpu
  } else {
    check_simulations(marginal, "marginal", length(s_obs), ucall)
    # (a run made here is checked by lfire_prior_predictive(); both before the simulations at
    # `theta`, and before anything reads the summaries: ranges of no values warn in base R)
    check_prior_predictive(marginal, ucall)
  }
  if (is.null(simulations)) {
    simulations <- run_simulations_timed(simulator, summaries, theta, n_theta, batch, n_theta, call = ucall)
    t_sim <- t_sim + simulations$time
    c_sim <- c_sim + simulations$cpu
  } else {
    check_simulations(simulations, "simulations", length(s_obs), ucall)
    if (!identical(unname(simulations$theta[!duplicated(simulations$index), , drop = FALSE]), unname(theta)) ||
        max(simulations$index) != nrow(theta)) {
      nce_abort("`simulations` were run at other parameter values than `theta`: pass the same `theta`.",
                "input", call = ucall)
    }
  }
  s_obs <- match_summaries(s_obs, colnames(marginal$summaries), call = ucall)
  # Observed summaries outside every simulation: the fits extrapolate and the posterior collapses.
  check_extrapolation(as.data.frame(as.list(s_obs)),
                      as.data.frame(rbind(marginal$summaries, simulations$summaries)), "observed", ucall)
  rng_fit <- list(fit = rng_now())
  fit <- lfire_engine(s_obs, marginal, simulations, nrow(theta), penalty, control, ucall)
  log_prior <- prior$log_density(theta)
  lp <- fit$log_ratio + if (type == "grid") log_prior else 0
  w <- normalise_log_weights(lp)
  stiffness <- lfire_stiffness(fit, w, s_obs, marginal, simulations, nrow(theta), penalty, control, ucall)
  structure(c(list(call = call, rng_state = rng, rng_fit = rng_fit,
                   observed = observed, theta = theta, grid = grid_pts, type = type, prior = prior,
                   log_prior = log_prior, posterior = w, penalty = penalty, control = control,
                   n_theta = n_theta, n_marginal = n_marginal, observed_summaries = s_obs,
                   marginal = marginal, simulations = simulations, stiffness = stiffness,
                   simulator = simulator, summaries = summaries, batch = batch,
                   time = c(simulation = t_sim, fitting = fit$time),
                   cpu_time = c(simulation = c_sim, fitting = fit$cpu)),
              fit[setdiff(names(fit), c("time", "cpu"))]),
            class = c("nce_lfire", "nce_result"))
}

observed_summaries <- function(summaries, observed, batch, call) {
  s <- tryCatch(summaries(observed), error = function(e) {
    nce_abort(paste("`summaries` failed on the observed data:", conditionMessage(e)), "input", call = call)
  })
  if (is.data.frame(s)) s <- as.matrix(s)
  if (is.matrix(s)) {
    if (nrow(s) != 1L) nce_abort("`summaries(observed)` must give one row of summaries.", "input", call = call)
    s <- stats::setNames(s[1L, ], colnames(s))
  }
  if (!is.numeric(s) || length(s) < 1L || any(!is.finite(s))) {
    nce_abort("`summaries(observed)` must be finite numbers.", "input", call = call)
  }
  if (is.null(names(s)) || any(names(s) == "")) names(s) <- paste0("s", seq_along(s))
  s
}

check_simulations <- function(x, arg, k, call) {
  if (!inherits(x, "nce_simulations")) check_fail("simulations from simulate_summaries()", x, arg, call)
  if (ncol(x$summaries) != k) {
    nce_abort(sprintf("`%s` hold %d summaries but the observed data give %d.", arg, ncol(x$summaries), k),
              "input", call = call)
  }
}

# The prior-predictive simulations. When fewer than two succeed the fit is refused right away, before
# the simulations at `theta` run, by one error that says why (their warning would only repeat it).
lfire_prior_predictive <- function(simulator, summaries, prior, n, batch, chunk_size, call) {
  held <- NULL
  th <- as_theta_matrix(prior$sample(n), prior$names, call = call)
  marginal <- withCallingHandlers(
    run_simulations_timed(simulator, summaries, th, 1L, batch, chunk_size, call = call),
    nce_warning_simulation = function(w) {
      held <<- w
      invokeRestart("muffleWarning")
    })
  check_prior_predictive(marginal, call)
  if (!is.null(held)) warning(held)
  marginal
}

# The classifiers standardise by the prior-predictive simulations: at least two must have succeeded.
check_prior_predictive <- function(marginal, call) {
  if (sum(marginal$ok) >= 2L) return(invisible())
  why <- sort(table(marginal$failures$reason), decreasing = TRUE)
  why <- paste(sprintf("%d x %s", as.integer(why), names(why))[seq_len(min(3L, length(why)))], collapse = "; ")
  nce_abort(sprintf(paste("fewer than two prior-predictive simulations succeeded (%d of %d failed: %s): check",
                          "`simulator` and `summaries`."), sum(!marginal$ok), length(marginal$ok), why),
            "simulation", call = call)
}

normalise_log_weights <- function(lp) {
  ok <- is.finite(lp)
  w <- numeric(length(lp))
  if (any(ok)) {
    w[ok] <- exp(lp[ok] - max(lp[ok]))
    w <- w / sum(w)
  }
  w
}

# Standardise, stack and fit in Rust. Parameter values with fewer than two successful
# simulations get an NA log ratio (and zero posterior weight), with a warning.
lfire_engine <- function(s_obs, marginal, simulations, n_values, penalty, control, call, degree = NULL, only = NULL) {
  check_prior_predictive(marginal, call)
  sm <- marginal$summaries[marginal$ok, , drop = FALSE]
  center <- colMeans(sm)
  scale <- sqrt(colSums(sweep(sm, 2L, center)^2) / (nrow(sm) - 1L))
  const <- !(scale > 1e-12 * pmax(1, abs(center)))
  if (any(const)) {
    nce_abort(sprintf("summary statistic(s) %s are constant over the prior-predictive simulations: drop them.",
                      paste(names(s_obs)[const], collapse = ", ")), "input", call = call)
  }
  if (is.null(degree)) degree <- 1L + isTRUE(control$quadratic)
  # Features: the summaries mapped to normal scores z by the prior-predictive sample's
  # quantiles and the one-sided powers max(z, 0)^d, min(z, 0)^d for d = 2..degree; or (`scores =
  # "standard"`, and controls saved before `scores` existed) standardised by its mean and sd and
  # their powers z^d. A log ratio quadratic in normal scores is the exact one for Gaussian
  # summaries, where in the raw summaries of heavy-tailed statistics (variances, products of
  # autocorrelations) it is far from it. One-sided squares let each tail curve on its own: a
  # square fitted to simulations in one tail does not carry its curvature into the other, where
  # an observed summary beyond both classes' data would take it (on ARCH(1), squares z^2 put 97%
  # of one observed series' posterior on a parameter value 0.6 from the exact mean).
  std <- if (identical(control$scores, "normal")) {
    knots <- lapply(seq_len(ncol(sm)), function(j) normal_score_knots(sm[, j]))
    to_scores <- function(m) {
      for (j in seq_len(ncol(m))) m[, j] <- normal_scores(m[, j], knots[[j]])
      feature_powers(m, degree, one_sided = TRUE)
    }
    # Each feature standardised over the prior-predictive sample, so the lasso penalises
    # scores and their squares alike (glmnet's `standardize = TRUE`).
    f_sm <- to_scores(sm)
    f_center <- colMeans(f_sm)
    f_scale <- sqrt(colSums(sweep(f_sm, 2L, f_center)^2) / (nrow(f_sm) - 1L))
    f_scale[!(f_scale > 1e-8)] <- 1
    function(m) sweep(sweep(to_scores(m), 2L, f_center), 2L, f_scale, "/")
  } else {
    function(m) feature_powers(sweep(sweep(m, 2L, center), 2L, scale, "/"), degree, one_sided = FALSE)
  }
  at <- simulations$summaries
  counts <- tabulate(simulations$index[simulations$ok], nbins = n_values)
  if (!is.null(only)) counts[-only] <- 0L  # fit only these parameter values (the stiffness check)
  good <- counts >= 2L
  if (!all(good) && is.null(only)) {
    nce_warn(sprintf("%d parameter value(s) had fewer than two successful simulations and get no posterior weight.",
                     sum(!good)), "simulation", call = call)
  }
  keep <- simulations$ok & good[simulations$index]
  ord <- order(simulations$index[keep])
  at_std <- std(at[keep, , drop = FALSE][ord, , drop = FALSE])
  starts <- as.integer(c(0L, cumsum(counts[good])))
  obs_std <- std(matrix(s_obs, 1L, dimnames = list(NULL, names(s_obs))))[1L, ]
  feat_names <- names(obs_std)
  if (is.null(control$coarse)) control$coarse <- 1  # controls saved before `coarse` existed
  if (is.null(control$onestep)) control$onestep <- 0  # ... or before `cv`
  t0 <- proc.time()[["elapsed"]]
  c0 <- cpu_seconds()
  fit_control <- control[c("nlambda", "lambda_min_ratio", "folds", "one_se", "coarse", "onestep")]
  names(fit_control)[3L] <- "nfolds"  # the Rust side's name
  res <- rs(nce_lfire_fit(std(sm), at_std, starts, as.double(obs_std),
                          list(penalty = penalty, control = fit_control, seed = draw_seed(), threads = nce_threads())),
            call = call)
  t_fit <- proc.time()[["elapsed"]] - t0
  c_fit <- cpu_seconds() - c0
  fill <- function(v) {
    out <- rep(NA_real_, n_values)
    out[good] <- v
    out
  }
  beta <- matrix(NA_real_, n_values, length(feat_names), dimnames = list(NULL, feat_names))
  beta[good, ] <- res$beta
  list(log_ratio = fill(res$log_ratio), intercept = fill(res$intercept), beta = beta, lambda = fill(res$lambda),
       criterion = fill(res$criterion), df = fill(res$df), center = center, scale = scale,
       n_success = counts, time = t_fit, cpu = c_fit)
}

# The columns of z and their powers 2..degree, named after them: z^d ("s^2"), or one-sided
# (`one_sided`: max(z, 0)^d and min(z, 0)^d, "s+^2" and "s-^2").
feature_powers <- function(z, degree, one_sided) {
  named <- function(x, suffix) `colnames<-`(x, paste0(colnames(z), suffix))
  higher <- lapply(seq_len(degree)[-1L], function(d) {
    if (one_sided) cbind(named(pmax(z, 0)^d, paste0("+^", d)), named(pmin(z, 0)^d, paste0("-^", d))) else
      named(z^d, paste0("^", d))
  })
  do.call(cbind, c(list(z), higher))
}

# Is the classifier too stiff for its data? At the parameter values of highest posterior weight
# (up to 10), refit with the next powers of the summaries as extra features (squares for the
# linear default) and compare the cross-validated (held-out) binomial deviance per pair of the two
# fits. A richer classifier that predicts held-out pairs better means the log ratio is missing
# shape the summaries carry, and a log ratio too flat widens the posterior. Flagged when the mean
# gain over the points exceeds 0.01 per pair and 2 standard errors of its spread over them.
# Lasso only (the ridge's criterion is a REML score, not a held-out deviance).
lfire_stiffness <- function(fit, w, s_obs, marginal, simulations, n_values, penalty, control, call) {
  if (penalty != "lasso") return(NULL)
  top <- utils::head(order(w, decreasing = TRUE), 10L)
  top <- top[w[top] > 0 & is.finite(fit$criterion[top])]
  if (length(top) < 2L) return(NULL)
  degree <- 1L + isTRUE(control$quadratic)
  rich <- lfire_engine(s_obs, marginal, simulations, n_values, penalty, control, call, degree = degree + 1L,
                       only = top)
  gain <- fit$criterion[top] - rich$criterion[top]
  se <- stats::sd(gain) / sqrt(length(gain))
  list(points = top, deviance = fit$criterion[top], deviance_richer = rich$criterion[top], gain = mean(gain),
       std.error = se, degree = degree, flagged = mean(gain) > max(0.01, 2 * se))
}

stiffness_message <- function(st) {
  if (is.null(st)) return(NULL)
  richer <- switch(as.character(st$degree), "1" = "squares of the summaries", "2" = "cubes of the summaries",
                   sprintf("powers %d of the summaries", st$degree + 1L))
  verdict <- if (st$flagged) {
    paste("the classifier is too stiff for these summaries (its posterior is likely too wide);",
          if (st$degree == 1L) "try control = lfire_control(quadratic = TRUE) or more simulations" else
            "try more simulations or better summaries")
  } else {
    "no sign of a classifier too stiff"
  }
  sprintf(paste("Classifier check: adding %s changes the held-out (CV) deviance per pair by %+.4f (se %.4f)",
                "at the %d values of highest posterior weight: %s"),
          richer, -st$gain, st$std.error, length(st$points), verdict)
}

# CPU seconds of this R process, its Rust threads included (not those of future workers).
cpu_seconds <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}

# Run the simulations and record the CPU seconds they took in this process as `$cpu`.
run_simulations_timed <- function(...) {
  c0 <- cpu_seconds()
  out <- run_simulations(...)
  out$cpu <- cpu_seconds() - c0
  out
}
