# broom methods for sequential fits (snce_fit, latkes_fit) and LATKES collections, registered
# lazily for the generics package (which broom re-exports).

#' Tidy, glance and augment sequential fits
#'
#' `tidy()` gives one row per coefficient (kernel and intercept parts; with
#' `intercept = "transition"` the kernel's only), `glance()` one row of fit
#' statistics, `augment()` the observed transitions with the fitted log
#' transition density (`.fitted`, `type.predict = "link"`) and its standard
#' error. For a `latkes_collection`, `tidy()` stacks the fits' tables with a
#' column naming the fit and `glance()` one row of totals (log-likelihoods, degrees of
#' freedom and transitions summed over the independent fits).
#'
#' @param x An `snce_fit`, `latkes_fit` or `latkes_collection`.
#' @param conf.int,conf.level Add Wald confidence limits.
#' @param se_type Covariance: `"sandwich"` or `"naive"`.
#' @param newdata Optional data for `augment()`, as for `predict()`.
#' @param type.predict Prediction type for `.fitted`.
#' @param se_fit Add `.se.fit`.
#' @param ... Unused.
#' @return A data frame.
#' @name tidy_seq
NULL

#' @rdname tidy_seq
#' @exportS3Method generics::tidy
tidy.snce_fit <- function(x, conf.int = FALSE, conf.level = 0.95,  # nolint: object_name_linter.
                          se_type = c("sandwich", "naive"), ...) {
  se_type <- match.arg(se_type)
  check_bool(conf.int, "conf.int")
  cf <- stats::coef(x)
  se <- sqrt(pmax(diag(stats::vcov(x, type = se_type)), 0))
  lab <- term_labels(x)
  pa <- x$row_setup$ncol
  out <- data.frame(term = names(cf), estimate = unname(cf), std.error = unname(se),
                    statistic = unname(cf / se), p.value = unname(2 * stats::pnorm(-abs(cf / se))),
                    component = ifelse(seq_along(cf) <= pa, "kernel", "intercept"),
                    smooth = ifelse(lab == names(cf), NA_character_, lab), stringsAsFactors = FALSE)
  if (conf.int) {
    ci <- confint.snce_fit(x, level = conf.level, type = se_type)
    out$conf.low <- unname(ci[, 1])
    out$conf.high <- unname(ci[, 2])
  }
  rownames(out) <- NULL
  out
}

#' @rdname tidy_seq
#' @exportS3Method generics::glance
glance.snce_fit <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll), df = attr(ll, "df"),
             nobs = x$n, n_sequences = x$n_sequences, ratio = x$ratio, intercept = x$intercept$type,
             reml = x$reml, converged = x$converged, stringsAsFactors = FALSE)
}

#' @rdname tidy_seq
#' @exportS3Method generics::augment
augment.snce_fit <- function(x, newdata = NULL,  # nolint: object_name_linter.
                             type.predict = c("link", "log_kernel", "response"),  # nolint: object_name_linter.
                             se_fit = FALSE, ...) {
  type.predict <- match.arg(type.predict)  # nolint: object_name_linter.
  check_bool(se_fit, "se_fit")
  d <- if (is.null(newdata)) x$transitions else newdata
  p <- if (is.null(newdata)) predict(x, type = type.predict, se.fit = TRUE) else
    predict(x, newdata, type = type.predict, se.fit = TRUE)
  if (length(p$fit) != nrow(d)) d <- x$transitions # raw LATKES fixations: predictions per transition row
  d$.fitted <- unname(p$fit)
  if (se_fit) d$.se.fit <- unname(p$se.fit)
  d
}

#' @rdname tidy_seq
#' @exportS3Method generics::tidy
tidy.latkes_collection <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  out <- do.call(rbind, lapply(names(x$fits), function(nm) {
    t <- tidy.snce_fit(x$fits[[nm]], conf.int = conf.int, conf.level = conf.level)
    cbind(stats::setNames(data.frame(nm, stringsAsFactors = FALSE), x$by), t)
  }))
  rownames(out) <- NULL
  out
}

#' @rdname tidy_seq
#' @exportS3Method generics::glance
glance.latkes_collection <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(n_fits = length(x$fits), logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll),
             df = attr(ll, "df"), nobs = attr(ll, "nobs"),
             converged = all(vapply(x$fits, function(f) isTRUE(f$converged), TRUE)))
}

#' @rdname tidy_seq
#' @exportS3Method generics::augment
augment.latkes_collection <- function(x, ...) {  # nolint: object_name_linter.
  out <- do.call(rbind, lapply(names(x$fits), function(nm) {
    a <- augment.snce_fit(x$fits[[nm]], ...)
    cbind(stats::setNames(data.frame(rep(nm, nrow(a)), stringsAsFactors = FALSE), x$by), a)
  }))
  rownames(out) <- NULL
  out
}
