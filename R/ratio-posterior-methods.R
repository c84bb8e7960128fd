# Methods of ratio_posterior()'s results (class nce_ratio_posterior): a weighted sample from the
# posterior of an amortised ratio estimator.

#' Methods for posteriors from amortised ratio estimators
#'
#' A [ratio_posterior()] result is a (weighted) sample from the posterior. `coef()` gives the
#' posterior means, `vcov()` the posterior covariance, `confint()` equal-tailed credible
#' intervals, `summary()` all three with the effective sample size (and the acceptance rate of
#' Metropolis), `nobs()` the number of draws, `plot()` the marginal densities. `simulate()`
#' draws from the posterior predictive distribution: `nsim` parameter values from the posterior
#' (resampled by their weights), each with a new simulation and its summaries (a data frame of
#' parameters and summaries). `update()` samples again with other arguments of
#' [ratio_posterior()] (`n_draws`, `method`, ...) or another `observed` data set, with the same
#' classifier. Methods of a fitted model of data (`predict()`, `fitted()`, `residuals()`,
#' `logLik()`, `anova()`, `model.frame()`, `model.matrix()`, `formula()`, `terms()`) are
#' refused with `nce_error_unsupported`: use them on the ratio estimator.
#'
#' @param object,x An `nce_ratio_posterior` from [ratio_posterior()].
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param parm Parameters (names) for `confint()`.
#' @param level Credible level.
#' @param nsim Number of posterior predictive simulations.
#' @inheritParams nce_vocabulary
#' @param ... Arguments of [ratio_posterior()] to change (`update()`); unused otherwise.
#' @return As described.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 1000, batch = TRUE,
#'                      formula = ~ te(mu, m, k = 5))
#' post <- ratio_posterior(r, matrix(rnorm(20, 0.5), 1), n_draws = 4000)
#' coef(post); confint(post); nobs(post)
#' head(simulate(post, nsim = 5, seed = 2))   # posterior predictive summaries
#' update(post, method = "metropolis", n_chains = 20)
#' @name nce_ratio_posterior_methods
NULL

#' @rdname nce_ratio_posterior_methods
#' @export
nobs.nce_ratio_posterior <- function(object, ...) nrow(object$draws)

#' @rdname nce_ratio_posterior_methods
#' @export
simulate.nce_ratio_posterior <- function(object, nsim = 1, seed = NULL, ...) {
  check_count(nsim)
  r <- object$ratio
  if (is.null(r)) nce_unsupported("simulate", object, "this posterior does not hold its ratio estimator")
  posterior_predictive(object$draws, object$weights, nsim, seed, r$simulator, r$summaries, r$batch, sys.call())
}

#' @rdname nce_ratio_posterior_methods
#' @export
update.nce_ratio_posterior <- function(object, ..., resample = FALSE) {
  if (is.null(object$ratio)) nce_unsupported("update", object, "this posterior does not hold its ratio estimator")
  changes <- list(...)
  args <- c(list(object = object$ratio, observed = object$observed), object$args)
  args[names(changes)] <- changes
  rerun(object, ratio_posterior, args, resample)
}

#' Tidy a posterior from an amortised ratio estimator
#'
#' @param x An `nce_ratio_posterior` from [ratio_posterior()].
#' @param conf.level Credible level of `conf.low`/`conf.high`.
#' @inheritParams nce_vocabulary
#' @return `tidy()`: one row per parameter (posterior mean as `estimate`, posterior sd as
#'   `std.error`, equal-tailed credible interval). `glance()`: one row on the sample (method,
#'   engine, draws, smallest effective sample size, acceptance rate, time).
#' @name tidy.nce_ratio_posterior
#' @exportS3Method generics::tidy
tidy.nce_ratio_posterior <- function(x, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  m <- stats::coef(x)
  ci <- tidy_confint(x, conf.level)
  data.frame(term = names(m), estimate = unname(m), std.error = unname(sqrt(diag(stats::vcov(x)))),
             conf.low = unname(ci[, 1L]), conf.high = unname(ci[, 2L]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_ratio_posterior
#' @exportS3Method generics::glance
glance.nce_ratio_posterior <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(method = x$method, engine = if (is.null(x$engine)) NA_character_ else x$engine,
             n_draws = nrow(x$draws), ess = min(x$ess), acceptance = x$acceptance, time = x$time,
             stringsAsFactors = FALSE)
}

#' @rdname nce_ratio_posterior_methods
#' @export
coef.nce_ratio_posterior <- function(object, ...) colSums(object$draws * object$weights)

#' @rdname nce_ratio_posterior_methods
#' @export
vcov.nce_ratio_posterior <- function(object, ...) {
  cen <- sweep(object$draws, 2L, coef(object))
  crossprod(cen * sqrt(object$weights))
}

#' @rdname nce_ratio_posterior_methods
#' @export
confint.nce_ratio_posterior <- function(object, parm, level = 0.95, ...) {
  check_probability(level, "level")
  nms <- colnames(object$draws)
  if (missing(parm)) parm <- nms
  a <- (1 - level) / 2
  ci <- t(vapply(parm, function(p) weighted_quantile(object$draws[, p], object$weights, c(a, 1 - a)), numeric(2)))
  dimnames(ci) <- list(parm, sprintf("%s %%", format(100 * c(a, 1 - a), trim = TRUE)))
  ci
}

#' @rdname nce_ratio_posterior_methods
#' @export
summary.nce_ratio_posterior <- function(object, level = 0.95, ...) {
  ci <- confint(object, level = level)
  tab <- data.frame(mean = coef(object), sd = sqrt(diag(vcov(object))), lower = ci[, 1], upper = ci[, 2])
  structure(list(table = tab, method = object$method, engine = object$engine, ess = object$ess,
                 acceptance = object$acceptance, n = nrow(object$draws), level = level),
            class = "summary.nce_ratio_posterior")
}

#' @export
print.summary.nce_ratio_posterior <- function(x, digits = 4L, ...) {
  how <- if (x$method == "smc") {
    "tempered sequential Monte Carlo"
  } else if (is.null(x$engine)) {
    x$method
  } else {
    sprintf("%s in %s", x$method, if (x$engine == "r") "R" else "Rust")
  }
  cat(sprintf("Posterior from an amortised ratio estimator (%s, %d draws); %g%% credible intervals\n",
              how, x$n, 100 * x$level))
  print(format(x$table, digits = digits))
  cat("Effective sample size:", paste(format(round(x$ess, 1)), collapse = ", "), "\n")
  if (!is.na(x$acceptance)) cat(sprintf("Acceptance rate: %.3f\n", x$acceptance))
  # The draws follow the classifier; whether its posteriors are as wide as they should be is a
  # separate check over simulated data sets.
  cat("Calibration of the classifier not checked here: ratio_coverage() checks it\n")
  invisible(x)
}

#' @rdname nce_ratio_posterior_methods
#' @export
print.nce_ratio_posterior <- function(x, ...) {
  print(summary(x))
  invisible(x)
}

#' @rdname nce_ratio_posterior_methods
#' @export
plot.nce_ratio_posterior <- function(x, ...) {
  d <- ncol(x$draws)
  op <- graphics::par(mfrow = c(1L, d))
  on.exit(graphics::par(op))
  for (p in colnames(x$draws)) {
    de <- stats::density(x$draws[, p], weights = x$weights)
    plot(de$x, de$y, type = "l", xlab = p, ylab = "posterior density", main = paste("Marginal of", p), ...)
  }
  invisible(x)
}
