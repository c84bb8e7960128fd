# Methods for nce fits with smooth terms (class nce_gam), built on mgcv's own.

# The object as a plain gam, so mgcv's methods see only what they know.
as_gam <- function(object, se_type = "sandwich") {
  if (se_type == "naive") object$Vp <- object$Vp_naive
  class(object) <- c("gam", "glm", "lm")
  object
}

#' @export
print.nce_gam <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nNoise-contrastive estimation with smooth terms (REML)\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  edf <- vapply(x$smooth, function(s) sum(x$edf[s$first.para:s$last.para]), 0)
  names(edf) <- vapply(x$smooth, function(s) s$label, "")
  cat("Estimated degrees of freedom:\n")
  print.default(format(edf, digits = digits), print.gap = 2L, quote = FALSE)
  cat(sprintf("total = %s\n", format(sum(x$edf), digits = digits)))
  cat(sprintf("\nlog normalising constant (-(Intercept)): %s\n", format(x$log_normaliser, digits = digits)))
  cat(sprintf("REML score: %s; %d data points, %d reference points (ratio %g)%s\n",
              format(x$gcv.ubre, digits = digits + 2L), x$n, x$m, x$ratio,
              if (x$converged) "" else "; NOT CONVERGED"))
  invisible(x)
}

#' Summarise an nce fit with smooth terms
#'
#' mgcv's [mgcv::summary.gam()] on the fit (parametric coefficients, smooth
#' terms' effective degrees of freedom and approximate significance), using
#' the NCE-corrected covariance by default, plus the estimated log normaliser.
#'
#' @param object An `nce_gam` fit.
#' @param se_type `"sandwich"` (NCE-corrected Bayesian covariance) or
#'   `"naive"` (mgcv's \eqn{(X'WX + S)^{-1}}).
#' @param ... Passed to [mgcv::summary.gam()].
#' @return An object of class `summary.nce_gam`, extending mgcv's
#'   `summary.gam`, with `log_normaliser` (estimate and standard error).
#' @examples
#' set.seed(1)
#' df <- data.frame(y = rbeta(500, 2, 5))
#' fit <- nce(~ s(y, k = 6), df, ref_uniform(y = c(0, 1)), ratio = 10)
#' summary(fit)
#' @export
summary.nce_gam <- function(object, se_type = c("sandwich", "naive"), ...) {
  se_type <- match.arg(se_type)
  s <- mgcv::summary.gam(as_gam(object, se_type), ...)
  v <- if (se_type == "sandwich") object$Vp else object$Vp_naive
  s$log_normaliser <- c(estimate = object$log_normaliser, se = sqrt(v[1L, 1L]))
  s$nce <- list(n = object$n, m = object$m, ratio = object$ratio, reference = object$reference,
                se_type = se_type)
  class(s) <- c("summary.nce_gam", class(s))
  s
}

#' @export
print.summary.nce_gam <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nNoise-contrastive estimation with smooth terms\n")
  mgcv::print.summary.gam(x, digits = digits, ...)
  cat(sprintf("log normalising constant: %s (s.e. %s); %s standard errors\n",
              format(x$log_normaliser[["estimate"]], digits = digits),
              format(x$log_normaliser[["se"]], digits = digits), x$nce$se_type))
  cat(sprintf("%d data points, %d reference points (ratio %g), reference: %s over %s\n",
              x$nce$n, x$nce$m, x$nce$ratio, x$nce$reference$kind,
              paste(x$nce$reference$vars, collapse = ", ")))
  invisible(x)
}

#' Plot the smooth terms of an nce fit
#'
#' mgcv's [mgcv::plot.gam()]: each smooth with its confidence band, from the
#' NCE-corrected covariance by default.
#'
#' @param x An `nce_gam` fit.
#' @param se_type `"sandwich"` or `"naive"`, see [summary.nce_gam()].
#' @param ... Passed to [mgcv::plot.gam()] (`select`, `pages`, `shade`, ...).
#' @return What [mgcv::plot.gam()] returns, invisibly.
#' @export
plot.nce_gam <- function(x, se_type = c("sandwich", "naive"), ...) {
  invisible(mgcv::plot.gam(as_gam(x, match.arg(se_type)), ...))
}

#' Predict from an nce fit with smooth terms
#'
#' @param object An `nce_gam` fit.
#' @param newdata Data frame with the model's columns; the data by default.
#'   Rows with NA give NA.
#' @param type `"log_density"`, `"density"`, `"log_unnormalised"` as for
#'   [predict.nce_fit()]; `"link"` (mgcv's linear predictor, the same as
#'   `"log_density"`: the offset is not part of predictions) or `"terms"`
#'   (each term's contribution, from [mgcv::predict.gam()]).
#' @param se.fit Also return standard errors.
#' @param se_type `"sandwich"` or `"naive"`, see [summary.nce_gam()].
#' @param ... Unused.
#' @return A vector (a matrix for `"terms"`), or with `se.fit = TRUE` a list
#'   with `fit` and `se.fit`.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = rbeta(500, 2, 5))
#' fit <- nce(~ s(y, k = 6), df, ref_uniform(y = c(0, 1)), ratio = 10)
#' predict(fit, data.frame(y = c(0.1, 0.3)), type = "density", se.fit = TRUE)
#' dbeta(c(0.1, 0.3), 2, 5)
#' @export
predict.nce_gam <- function(object, newdata, type = c("log_density", "density", "log_unnormalised", "link", "terms"),
                            se.fit = FALSE, se_type = c("sandwich", "naive"), ...) {
  type <- match.arg(type)
  se_type <- match.arg(se_type)
  if (missing(newdata)) newdata <- data_rows(object)
  if (!is.data.frame(newdata)) nce_abort("`newdata` must be a data frame", "input")
  missing <- setdiff(all.vars(object$nce_formula), names(newdata))
  if (length(missing)) nce_abort(sprintf("`newdata` lacks column(s) %s", paste(missing, collapse = ", ")), "input")
  g <- as_gam(object, se_type)
  if (type == "terms") {
    return(mgcv::predict.gam(g, newdata, type = "terms", se.fit = se.fit, na.action = stats::na.pass))
  }
  x <- mgcv::predict.gam(g, newdata, type = "lpmatrix", na.action = stats::na.pass)
  if (type == "log_unnormalised") x[, 1L] <- 0
  fit <- drop(x %*% object$coefficients)
  se <- sqrt(rowSums((x %*% g$Vp) * x))
  if (type == "density") {
    fit <- exp(fit)
    se <- fit * se
  }
  names(fit) <- names(se) <- rownames(newdata)
  if (se.fit) list(fit = fit, se.fit = se) else fit
}
