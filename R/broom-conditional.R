# broom methods for conditional nce fits, registered lazily when generics is loaded.

#' Tidy a conditional nce fit
#'
#' @param x An `nce_conditional` fit.
#' @param conf.int Add Wald confidence limits.
#' @param conf.level Their level.
#' @param ... Unused.
#' @return A data frame with one row per parametric coefficient: `term`,
#'   `component` (`"model"` for f(y, z), `"normaliser"` for the intercept in
#'   z), `estimate`, `std.error` (sandwich), `statistic`, `p.value`, and with
#'   `conf.int = TRUE` `conf.low`, `conf.high`. Spline coefficients are left
#'   out, as broom does for mgcv's smooths.
#' @exportS3Method generics::tidy
tidy.nce_conditional <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  cf <- x$coefficients
  lab <- names(cf)
  for (sm in x$smooth) lab[sm$first.para:sm$last.para] <- NA
  keep <- which(!is.na(lab))
  se <- sqrt(diag(x$vcov))[keep]
  out <- data.frame(term = names(cf)[keep],
                    component = ifelse(keep > x$row_setup$ncol | keep == 1L, "normaliser", "model"),
                    estimate = unname(cf[keep]), std.error = unname(se), statistic = unname(cf[keep] / se),
                    p.value = unname(2 * stats::pnorm(-abs(cf[keep] / se))), stringsAsFactors = FALSE)
  if (conf.int) {
    z <- stats::qnorm(1 - (1 - conf.level) / 2)
    out$conf.low <- out$estimate - z * out$std.error
    out$conf.high <- out$estimate + z * out$std.error
  }
  out
}

#' Glance at a conditional nce fit
#'
#' @param x An `nce_conditional` fit.
#' @param ... Unused.
#' @return A one-row data frame: `nobs`, `ratio`, `logLik`, `df`, `AIC`,
#'   `BIC`, `converged`.
#' @exportS3Method generics::glance
glance.nce_conditional <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(nobs = x$n, ratio = x$ratio, logLik = as.numeric(ll), df = attr(ll, "df"),
             AIC = stats::AIC(ll), BIC = stats::BIC(ll), converged = x$converged)
}

#' Augment data with a conditional nce fit's predictions
#'
#' @param x An `nce_conditional` fit.
#' @param newdata Data frame with the reference's and the given columns; the
#'   fit's data by default.
#' @param ... Unused.
#' @return `newdata` with `.fitted` (the log conditional density, type
#'   `"link"`) and `.se.fit`.
#' @exportS3Method generics::augment
augment.nce_conditional <- function(x, newdata = NULL, ...) {  # nolint: object_name_linter.
  if (is.null(newdata)) newdata <- cond_data_rows(x)
  p <- stats::predict(x, newdata, type = "link", se.fit = TRUE)
  newdata$.fitted <- unname(p$fit)
  newdata$.se.fit <- unname(p$se.fit)
  newdata
}
