# Methods of the GAM ratio classifier (ratio_amortised(classifier = "gam"), class nce_ratio_gam
# under nce_ratio). Its classifier, `$gam`, is a mgcv-compatible GAM between joint (y = 1) and
# shuffled (y = 0) pairs, so the model methods are mgcv's on that classifier: coefficients,
# covariance, log-likelihood and residuals are those of the classification. The classifier's
# linear predictor plus log(n_shuffle) is the log ratio, which predict() returns. Documented in
# ?nce_ratio_methods (ratio-methods.R).

#' @rdname nce_ratio_methods
#' @export
predict.nce_ratio_gam <- function(object, newdata = NULL, type = c("link", "response", "lpmatrix"),
                                  se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- check_choice(type, c("link", "response", "lpmatrix"), "type")
  check_bool(se.fit, "se.fit")
  nd <- ratio_newdata(object, newdata)
  const <- log(object$n_shuffle)
  if (type == "lpmatrix") {
    x <- mgcv::predict.gam(object$gam, newdata = nd, type = "lpmatrix")
    attr(x, "constant") <- const
    return(x)
  }
  p <- mgcv::predict.gam(object$gam, newdata = nd, type = "link", se.fit = se.fit)
  lr <- as.double(if (se.fit) p$fit else p) + const
  fit <- if (type == "link") lr else exp(lr)
  if (!se.fit) return(fit)
  se <- as.double(p$se.fit)
  list(fit = fit, se.fit = if (type == "link") se else fit * se)
}

#' @rdname nce_ratio_methods
#' @export
coef.nce_ratio_gam <- function(object, ...) stats::coef(object$gam)

#' @rdname nce_ratio_methods
#' @export
vcov.nce_ratio_gam <- function(object, ...) stats::vcov(object$gam)

#' @rdname nce_ratio_methods
#' @export
residuals.nce_ratio_gam <- function(object, ...) stats::residuals(object$gam, ...)

#' @rdname nce_ratio_methods
#' @export
logLik.nce_ratio_gam <- function(object, newdata = NULL, ...) {
  # The classification's Bernoulli log-likelihood at the penalised fit, with the total edf as
  # its degrees of freedom (as mgcv's logLik.gam counts them).
  g <- object$gam
  if (!is.null(newdata)) return(ratio_held_out_loglik(object, newdata, sum(g$edf)))
  w <- if (is.null(g$prior.weights)) 1 else g$prior.weights
  ll <- sum(w * stats::dbinom(g$y, 1, g$fitted.values, log = TRUE))
  structure(ll, df = sum(g$edf), nobs = nrow(g$model), class = "logLik")
}

#' @rdname nce_ratio_methods
#' @export
anova.nce_ratio_gam <- function(object, ...) {
  others <- list(...)
  if (!length(others)) return(mgcv::anova.gam(object$gam))
  if (!all(vapply(others, inherits, TRUE, "nce_ratio_gam"))) {
    nce_abort("anova() compares GAM ratio classifiers (nce_ratio_gam) with each other only.", "input")
  }
  n <- vapply(c(list(object), others), stats::nobs, 1)
  if (length(unique(n)) != 1L) {
    nce_abort("anova() needs classifiers fitted to the same pairs (different numbers of pairs).", "input")
  }
  # Classifiers are logistic regressions: a likelihood-ratio test (mgcv's), in the one layout.
  a <- do.call(mgcv::anova.gam, c(list(object$gam), lapply(others, `[[`, "gam"), list(test = "Chisq")))
  tab <- data.frame(a[1:4], Wald = NA_real_, `Pr(>Chi)` = a[[5L]], check.names = FALSE,
                    row.names = paste("Model", seq_len(nrow(a))))
  structure(tab, heading = c("Likelihood-ratio test of nested ratio classifiers (mgcv::anova.gam)\n",
                             paste0(rownames(tab), ": ", vapply(c(list(object), others),
                                                                function(f) deparse1(f$formula), ""), collapse = "\n")),
            class = c("anova", "data.frame"))
}

#' @rdname nce_ratio_methods
#' @export
model.frame.nce_ratio_gam <- function(formula, ...) formula$gam$model

#' @rdname nce_ratio_methods
#' @export
model.matrix.nce_ratio_gam <- function(object, ...) stats::model.matrix(object$gam)

#' @rdname nce_ratio_methods
#' @export
formula.nce_ratio_gam <- function(x, ...) x$gam$formula

#' @rdname nce_ratio_methods
#' @export
terms.nce_ratio_gam <- function(x, ...) stats::terms(x$gam)

#' @rdname nce_ratio_methods
#' @export
plot.nce_ratio_gam <- function(x, ...) {
  mgcv::plot.gam(x$gam, ...)
  invisible(x)
}

#' Tidy an amortised ratio estimator
#'
#' `tidy()` (GAM classifier only) gives the classifier of [ratio_amortised()] as mgcv's GAMs are
#' tidied: its parametric coefficients (`parametric = TRUE`) or its smooth terms (edf, reference
#' df, test statistic and p-value). `glance()` gives one row on either classifier (its
#' log-likelihood and df, with the GAM's deviance or the network's held-out loss); `augment()` the
#' classifier's pairs (or `newdata`) with the log ratio `.fitted` (and `.se.fit` with
#' `se_fit = TRUE`, GAM only).
#'
#' @inheritParams nce_vocabulary
#' @param parametric Parametric coefficients (`TRUE`) or smooth terms (`FALSE`).
#' @param conf.int,conf.level Wald intervals for the parametric coefficients.
#' @param newdata Rows with a column per parameter and summary; by default the pairs.
#' @param se_fit Whether `augment()` adds `.se.fit`.
#' @return A data frame.
#' @name tidy.nce_ratio
#' @exportS3Method generics::tidy
tidy.nce_ratio_gam <- function(x, parametric = TRUE,  # nolint: object_name_linter.
                               conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  tidy_gam_tables(x, summary(x$gam), parametric, conf.int, conf.level)
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::glance
glance.nce_ratio_gam <- function(x, ...) {  # nolint: object_name_linter.
  g <- x$gam
  cbind(NextMethod(), deviance = g$deviance, deviance_explained = 1 - g$deviance / g$null.deviance,
        discrete = isTRUE(x$discrete))
}

ratio_classifier_lines.nce_ratio_gam <- function(x) {  # nolint: object_name_linter.
  c(paste0("Classifier: ", paste(deparse(x$formula, width.cutoff = 100L), collapse = " ")),
    if (isTRUE(x$discrete)) discrete_note(x$gam$discrete_layout),
    sprintf("Total edf %.1f", sum(x$gam$edf)))
}

#' @export
summary.nce_ratio_gam <- function(object, ...) {
  g <- object$gam
  out <- NextMethod()
  out$deviance_explained <- 1 - g$deviance / g$null.deviance
  out$smooths <- vapply(g$smooth, function(sm) sum(g$edf[sm$first.para:sm$last.para]), 1) |>
    stats::setNames(vapply(g$smooth, `[[`, "", "label"))
  class(out) <- c("summary.nce_ratio_gam", class(out))
  out
}

#' @export
print.summary.nce_ratio_gam <- function(x, ...) {
  NextMethod()
  cat(sprintf("Classifier deviance explained: %.3f\nEffective degrees of freedom per smooth:\n", x$deviance_explained))
  print(round(x$smooths, 2L))
  invisible(x)
}
