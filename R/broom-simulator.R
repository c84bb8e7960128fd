# broom methods for simulator-model fits.

#' Tidy an LFIRE posterior
#'
#' @param x An `nce_lfire` fit.
#' @param conf.level Credible level of `conf.low`/`conf.high`.
#' @param ... Unused.
#' @return `tidy()`: one row per parameter (posterior mean as `estimate`, posterior sd as
#'   `std.error`, equal-tailed credible interval). `glance()`: one row on the fit.
#' @name tidy.nce_lfire
#' @exportS3Method generics::tidy
tidy.nce_lfire <- function(x, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  m <- posterior_moments(x)
  ci <- confint(x, level = conf.level)
  data.frame(term = names(m$mean), estimate = unname(m$mean), std.error = unname(m$sd),
             conf.low = unname(ci[, 1]), conf.high = unname(ci[, 2]),
             mode = unname(x$theta[lfire_mode(x), ]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_lfire
#' @exportS3Method generics::glance
glance.nce_lfire <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(n_values = nrow(x$theta), type = x$type, n_theta = x$n_theta, n_marginal = x$n_marginal,
             n_summaries = length(x$observed_summaries), penalty = x$penalty,
             n_failed = nrow(x$simulations$failures) + nrow(x$marginal$failures),
             ess = 1 / sum(x$posterior^2), simulation_time = unname(x$time["simulation"]),
             fitting_time = unname(x$time["fitting"]), stringsAsFactors = FALSE)
}

#' Tidy an amortised ratio estimator
#'
#' The classifier of [ratio_amortised()] as mgcv's GAMs are tidied: its parametric
#' coefficients (`parametric = TRUE`) or its smooth terms (edf, reference df, test statistic
#' and p-value); `glance()` one row on the fit; `augment()` the classifier's pairs (or
#' `newdata`) with the log ratio `.fitted` (and `.se.fit` with `se_fit = TRUE`).
#'
#' @param x An `nce_ratio` fit.
#' @param parametric Parametric coefficients (`TRUE`) or smooth terms (`FALSE`).
#' @param conf.int,conf.level Wald intervals for the parametric coefficients.
#' @param newdata Rows with a column per parameter and summary; by default the pairs.
#' @param se_fit Whether `augment()` adds `.se.fit`.
#' @param ... Unused.
#' @return A data frame.
#' @name tidy.nce_ratio
#' @exportS3Method generics::tidy
tidy.nce_ratio <- function(x, parametric = TRUE,  # nolint: object_name_linter.
                           conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  tidy_gam_tables(x, summary(x$gam), parametric, conf.int, conf.level)
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::glance
glance.nce_ratio <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  g <- x$gam
  data.frame(n_pairs = x$n, n_shuffle = x$n_shuffle, nobs = stats::nobs(x), edf = sum(g$edf),
             logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll), deviance = g$deviance,
             deviance_explained = 1 - g$deviance / g$null.deviance, discrete = isTRUE(x$discrete),
             simulation_time = unname(x$time[["simulation"]]), fitting_time = unname(x$time[["fitting"]]),
             stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::augment
augment.nce_ratio <- function(x, newdata = NULL, se_fit = FALSE, ...) {  # nolint: object_name_linter.
  check_bool(se_fit, "se_fit")
  rows <- ratio_newdata(x, newdata)
  # The classifier's own pairs may lack summaries its formula leaves out: predict them as such.
  p <- predict.nce_ratio(x, newdata, se.fit = se_fit)
  out <- as.data.frame(rows)
  out$.fitted <- if (se_fit) p$fit else p
  if (se_fit) out$.se.fit <- p$se.fit
  out
}

#' Tidy a posterior from an amortised ratio estimator
#'
#' @param x An `nce_ratio_posterior` from [ratio_posterior()].
#' @param conf.level Credible level of `conf.low`/`conf.high`.
#' @param ... Unused.
#' @return `tidy()`: one row per parameter (posterior mean as `estimate`, posterior sd as
#'   `std.error`, equal-tailed credible interval). `glance()`: one row on the sample (method,
#'   engine, draws, smallest effective sample size, acceptance rate, time).
#' @name tidy.nce_ratio_posterior
#' @exportS3Method generics::tidy
tidy.nce_ratio_posterior <- function(x, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  m <- stats::coef(x)
  ci <- stats::confint(x, level = conf.level)
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
