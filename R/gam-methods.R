# Methods for nce fits with smooth terms (class nce_gam), built on mgcv's own.

# The object as a plain gam, so mgcv's methods see only what they know.
as_gam <- function(object, se_type = "sandwich") {
  if (se_type == "naive") object$Vp <- object$Vp_naive
  # The classifier's labels, for mgcv code that reads `y` (the fit itself has no response).
  if (is.null(object$y)) object$y <- object$nce_frame$.label
  object$na.action <- NULL
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
  cat(log_z_not_identified(x) %||%
        sprintf("\nlog normalising constant (-(Intercept)): %s\n", format(x$log_normaliser, digits = digits)))
  cat(sprintf("REML score: %s; %d data points, %d reference points (ratio %g)%s\n",
              format(x$gcv.ubre, digits = digits + 2L), x$n, x$m, x$ratio,
              if (x$converged) "" else "; NOT CONVERGED"))
  if (isTRUE(x$relative)) cat(relative_note(x$reference), "\n", sep = "")
  if (isTRUE(x$discrete)) cat(discrete_note(x$discrete_layout), "\n", sep = "")
  invisible(x)
}

#' Summarise an nce fit with smooth terms
#'
#' mgcv's [mgcv::summary.gam()] on the fit (parametric coefficients, smooth
#' terms' effective degrees of freedom and approximate significance), using
#' the NCE-corrected covariance by default, plus what matters for NCE: the
#' estimated log normaliser and its standard error, the log-likelihood of the
#' normalised model ([logLik.nce_fit()]), the ratio and the reference. The
#' R-squared and deviance explained of mgcv's summary are not printed: they
#' describe the data-versus-reference classification, not the density.
#'
#' @inheritParams nce_vocabulary
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
  se_type <- match_choice(se_type)
  s <- mgcv::summary.gam(as_gam(object, se_type), ...)
  v <- if (se_type == "sandwich") object$Vp else object$Vp_naive
  s$log_normaliser <- c(estimate = object$log_normaliser, se = sqrt(v[1L, 1L]))
  s$log_normaliser <- c(estimate = object$log_normaliser, se = sqrt(max(v[1L, 1L], 0)))
  s$nce <- list(n = object$n, m = object$m, ratio = object$ratio, reference = object$reference,
                relative = object$relative,
                se_type = se_type, formula = object$nce_formula, converged = object$converged)
  s[c("logLik", "aic")] <- summary_loglik(object)
  s[c("proper", "improper_along")] <- list(object$proper, object$improper_along)
  class(s) <- c("summary.nce_gam", class(s))
  s
}

#' @export
print.summary.nce_gam <- function(x, digits = max(3L, getOption("digits") - 3L),
                                  signif.stars = getOption("show.signif.stars"), ...) {  # nolint: object_name_linter.
  cat("\nNoise-contrastive estimation with smooth terms (REML)\n\n")
  cat("Formula:\n")
  cat(deparse(x$nce$formula, width.cutoff = 100L), sep = "\n")
  if (length(x$p.coeff) > 0L) {
    cat(sprintf("\nParametric coefficients (%s standard errors):\n", x$nce$se_type))
    stats::printCoefmat(x$p.table, digits = digits, signif.stars = signif.stars, na.print = "NA", ...)
  }
  if (x$m > 0L) {
    cat("\nApproximate significance of smooth terms:\n")
    stats::printCoefmat(x$s.table, digits = digits, signif.stars = signif.stars, has.Pvalue = TRUE,
                        na.print = "NA", cs.ind = 1, ...)
  }
  cat(log_z_not_identified(x) %||% sprintf("\nlog normalising constant: %s (s.e. %s)\n",
                                           format(x$log_normaliser[["estimate"]], digits = digits),
                                           format(x$log_normaliser[["se"]], digits = digits)))
  format_loglik(x, digits, "normalised model; total edf")
  cat(sprintf("%d data points, %d reference points (ratio %g), reference: %s over %s\n",
              x$nce$n, x$nce$m, x$nce$ratio, reference_label(x$nce$reference, x$nce$relative),
              paste(x$nce$reference$vars, collapse = ", ")))
  cat(sprintf("REML score: %s%s\n", format(x$sp.criterion, digits = digits + 2L),
              if (isTRUE(x$nce$converged)) "" else " (NOT CONVERGED)"))
  invisible(x)
}

#' Plot the smooth terms of an nce fit
#'
#' mgcv's [mgcv::plot.gam()]: each smooth with its confidence band, from the
#' NCE-corrected covariance by default.
#'
#' @inheritParams nce_vocabulary
#' @param ... Passed to [mgcv::plot.gam()] (`select`, `pages`, `shade`, ...).
#' @return What [mgcv::plot.gam()] returns, invisibly.
#' @export
plot.nce_gam <- function(x, se_type = c("sandwich", "naive"), ...) {
  invisible(mgcv::plot.gam(as_gam(x, match_choice(se_type)), ...))
}

#' Predict from an nce fit with smooth terms
#'
#' @inheritParams nce_vocabulary
#' @param newdata Data frame with the model's columns; the data by default.
#'   Rows with NA give NA; character or factor columns where the model needs
#'   numbers are refused.
#' @param type `"link"` or `"log_density"` (the log of the normalised
#'   density, \eqn{f_\theta(y) + \nu}: mgcv's linear predictor without NCE's
#'   offset), `"response"` or `"density"` (its exponential),
#'   `"log_unnormalised"` (\eqn{f_\theta(y)} alone), `"lpmatrix"` (mgcv's
#'   linear predictor matrix: `lpmatrix %*% coef` is the link) or `"terms"`
#'   (each term's contribution, from [mgcv::predict.gam()]). Outside the
#'   reference's support the density is 0 and the log density `-Inf`.
#' @return A vector (a matrix for `"lpmatrix"` and `"terms"`), or with
#'   `se.fit = TRUE` a list with `fit` and `se.fit`.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = rbeta(500, 2, 5))
#' fit <- nce(~ s(y, k = 6), df, ref_uniform(y = c(0, 1)), ratio = 10)
#' predict(fit, data.frame(y = c(0.1, 0.3)), type = "density", se.fit = TRUE)
#' dbeta(c(0.1, 0.3), 2, 5)
#' @export
predict.nce_gam <- function(object, newdata, type = c("link", "log_density", "response", "density",
                                                      "log_unnormalised", "lpmatrix", "terms"),
                            se.fit = FALSE, se_type = c("sandwich", "naive"), ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  se_type <- match_choice(se_type)
  check_bool(se.fit, "se.fit")
  newdata <- nce_predict_newdata(object, newdata, type)
  g <- as_gam(object, se_type)
  # mgcv refuses to predict at no rows: predict at one data row and keep none of it.
  empty <- nrow(newdata) == 0L
  nd <- if (empty) data_rows(object)[1L, , drop = FALSE] else newdata
  if (length(object$nce_var_map)) names(nd) <- nce_rename_columns(names(nd), object$nce_var_map)
  if (type == "terms") {
    p <- mgcv::predict.gam(g, nd, type = "terms", se.fit = se.fit, na.action = stats::na.pass)
    if (!empty) return(p)
    return(if (se.fit) lapply(p, function(m) m[0L, , drop = FALSE]) else p[0L, , drop = FALSE])
  }
  x <- mgcv::predict.gam(g, nd, type = "lpmatrix", na.action = stats::na.pass)
  if (empty) x <- x[0L, , drop = FALSE]
  if (type == "lpmatrix") {
    rownames(x) <- rownames(newdata)
    if (isTRUE(object$relative)) {
      off <- attr(x, "model.offset")
      off <- (if (length(off)) off else 0) + relative_log_q(object, newdata)
      attr(x, "model.offset") <- off  # nolint: object_name_linter.
    }
    return(x)
  }
  off <- attr(x, "model.offset")
  if (type == "log_unnormalised") x[, 1L] <- 0
  fit <- drop(x %*% object$coefficients) + if (is.null(off) || !length(off)) 0 else off
  se <- sqrt(pmax(rowSums((x %*% g$Vp) * x), 0))
  nce_finish_prediction(object, newdata, fit, se, type, se.fit)
}

#' @rdname nce_broom
#' @exportS3Method generics::tidy
tidy.nce_gam <- function(x, parametric = TRUE,  # nolint: object_name_linter.
                         conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  tidy_gam_tables(x, summary(x), parametric, conf.int, conf.level)
}

# tidy() of a GAM-like fit from its mgcv summary `s`: the parametric coefficients (with Wald
# intervals from confint(x)) or the smooth terms' tests.
tidy_gam_tables <- function(x, s, parametric, conf_int, conf_level, call = caller_call()) {
  call <- call  # force the caller's call now
  check_bool(parametric, "parametric", call = call)
  check_bool(conf_int, "conf.int", call = call)
  if (parametric) {
    tab <- s$p.table
    out <- data.frame(term = rownames(tab), estimate = tab[, 1L], std.error = tab[, 2L],
                      statistic = tab[, 3L], p.value = tab[, 4L], row.names = NULL, stringsAsFactors = FALSE)
    if (conf_int) {
      ci <- tidy_confint(x, conf_level, parm = rownames(tab))
      out$conf.low <- unname(ci[, 1L])
      out$conf.high <- unname(ci[, 2L])
    }
  } else {
    tab <- s$s.table
    out <- data.frame(term = rownames(tab), edf = tab[, 1L], ref.df = tab[, 2L], statistic = tab[, 3L],
                      p.value = tab[, 4L], row.names = NULL, stringsAsFactors = FALSE)
  }
  nce_as_tibble(out)
}

#' @rdname anova.nce_fit
#' @export
anova.nce_gam <- function(object, ..., test = "Wald") {
  if (length(list(...)) == 0L) {
    if (!identical(test, "Wald")) nce_abort("`test` must be \"Wald\"")
    return(mgcv::anova.gam(as_gam(object)))
  }
  anova.nce_fit(object, ..., test = test)
}
