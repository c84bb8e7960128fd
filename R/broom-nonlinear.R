# broom methods for nonlinear NCE fits (registered lazily when generics is loaded).

#' broom methods for nonlinear NCE fits
#'
#' @param x A fit of class `nce_nls`.
#' @param conf.int,conf.level Add Wald intervals (sandwich).
#' @param data,newdata Data for `augment()` (default: the fit's data).
#' @param se_fit Add `.se.fit` to `augment()`.
#' @param ... Unused.
#' @return A data frame.
#' @name nce_nls-broom
#' @keywords internal
NULL

#' @rdname nce_nls-broom
#' @exportS3Method generics::tidy
tidy.nce_nls <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  s <- summary(x)$coefficients
  out <- data.frame(term = rownames(s), estimate = s[, 1L], std.error = s[, 2L], statistic = s[, 3L],
                    p.value = s[, 4L], row.names = NULL)
  if (isTRUE(conf.int)) {
    ci <- stats::confint(x, level = conf.level)
    out$conf.low <- ci[, 1L]
    out$conf.high <- ci[, 2L]
  }
  out
}

#' @rdname nce_nls-broom
#' @exportS3Method generics::glance
glance.nce_nls <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(logLik = as.numeric(ll), AIC = stats::AIC(x), BIC = stats::BIC(x), nobs = x$n,
                       n_reference = x$m, df = attr(ll, "df"), log_normaliser = x$log_normaliser,
                       converged = x$converged, n_starts = nrow(x$start_table))
}

#' @rdname nce_nls-broom
#' @exportS3Method generics::augment
augment.nce_nls <- function(x, data = NULL, newdata = NULL, se_fit = FALSE, ...) {  # nolint: object_name_linter.
  nd <- if (!is.null(newdata)) newdata else if (!is.null(data)) data else nl_data_rows(x)
  p <- stats::predict(x, nd, type = "link", se.fit = TRUE)
  out <- nd
  out$.fitted <- unname(p$fit)
  if (isTRUE(se_fit)) out$.se.fit <- unname(p$se.fit)
  out
}
