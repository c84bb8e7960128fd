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

#' @rdname tidy.nce_lfire
#' @exportS3Method generics::augment
augment.nce_lfire <- function(x, ...) {  # nolint: object_name_linter.
  nce_unsupported("augment", x, "there are no data rows to augment (use predict() for the log ratios)")
}
