# The model-object contract for the scalar estimates of bayes_factor_nce(), marglik_nce(),
# bayes_factor_marglik() and for edge_roc()'s result. An estimate of log K or log Z is one number
# with a standard error: coef() is the estimate, vcov() its squared standard error, confint() a
# Wald interval, nobs() the number of draws. The methods of a fitted density (predict, logLik,
# anova, ...) have no meaning for them and are refused with the reason.

#' Methods for Bayes factor, marginal likelihood and edge-recovery results
#'
#' For the results of [bayes_factor_nce()], [bayes_factor_marglik()] (class `nce_bf`) and
#' [marglik_nce()] (class `nce_marglik`): `coef()` is the estimate (\eqn{\log K} or
#' \eqn{\log Z}), `vcov()` its squared standard error (a 1 x 1 matrix), `confint()` a Wald
#' interval, `nobs()` the number of posterior draws that enter the estimate (both samples for
#' `bayes_factor_nce()`, both estimates' for `bayes_factor_marglik()`; the reference draws are
#' not counted). A separated (unidentified) estimate has coefficient and variance `NA`.
#' `predict()`, `fitted()`, `residuals()`, `logLik()`, `anova()`, `update()`, `model.frame()`,
#' `model.matrix()`, `formula()`, `terms()`, `simulate()` and `plot()` are refused with
#' `nce_error_unsupported`: these are estimates of a constant from draws, not fitted models of
#' data (the marginal likelihood is itself the evidence; a log-likelihood of it means nothing).
#'
#' For [edge_roc()] results (class `nce_edge_roc`): `coef()` is the AUC, `nobs()` the number of
#' scored pairs, `plot()` the ROC curve; `vcov()` and the model methods are refused (the AUC
#' compares one estimate with a known graph: it has no sampling model here).
#'
#' @param object A result of those functions.
#' @param parm,level As for [stats::confint()].
#' @inheritParams nce_vocabulary
#' @return As described; errors of class `nce_error_unsupported` for the refused methods.
#' @name estimate_methods
#' @examples
#' set.seed(1)
#' ml <- marglik_nce(matrix(rnorm(2000), ncol = 1), function(s) -0.5 * s[, 1]^2)
#' coef(ml); sqrt(vcov(ml)); confint(ml); nobs(ml)
NULL

estimate_field <- function(object) if (inherits(object, "nce_bf")) "log_bf" else "logml"

# nce_bf and nce_marglik are both an estimate with a standard error (class nce_estimate).
#' @rdname estimate_methods
#' @export
coef.nce_estimate <- function(object, ...) stats::setNames(object[[estimate_field(object)]], estimate_field(object))

#' @rdname estimate_methods
#' @export
vcov.nce_estimate <- function(object, ...) {
  nm <- estimate_field(object)
  matrix(object$se^2, 1L, 1L, dimnames = list(nm, nm))
}

#' @rdname estimate_methods
#' @export
confint.nce_estimate <- function(object, parm, level = 0.95, ...) {
  check_probability(level, "level")
  est <- object[[estimate_field(object)]]
  z <- stats::qnorm((1 + level) / 2)
  a <- (1 - level) / 2
  matrix(c(est - z * object$se, est + z * object$se), 1L,
         dimnames = list(estimate_field(object), sprintf("%g %%", 100 * c(a, 1 - a))))
}

#' @rdname estimate_methods
#' @export
nobs.nce_bf <- function(object, ...) {
  if (is.null(object$n) || anyNA(object$n)) {
    nce_unsupported("nobs", object, "the marginal likelihood estimates it combines do not record their draws")
  }
  as.integer(sum(object$n))
}

#' @rdname estimate_methods
#' @export
nobs.nce_marglik <- function(object, ...) {
  if (is.null(object$n)) nce_unsupported("nobs", object, "this estimate does not record its draws")
  as.integer(object$n)
}

#' @rdname estimate_methods
#' @export
coef.nce_edge_roc <- function(object, ...) c(auc = object$auc)

#' @rdname estimate_methods
#' @export
nobs.nce_edge_roc <- function(object, ...) as.integer(object$n_pairs)

#' @export
summary.nce_edge_roc <- function(object, ...) {
  structure(list(auc = object$auc, n_edges = object$n_edges, n_pairs = object$n_pairs,
                 roc = object$roc), class = "summary.nce_edge_roc")
}

#' @export
print.summary.nce_edge_roc <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat(sprintf("Edge recovery: AUC %s; %d true edges among %d pairs; %d thresholds\n",
              format(x$auc, digits = digits), x$n_edges, x$n_pairs, nrow(x$roc) - 1L))
  invisible(x)
}

#' @rdname vnce_broom
#' @exportS3Method generics::tidy
tidy.nce_bf <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  estimate_tidy(x, conf.int, conf.level)
}

#' @rdname vnce_broom
#' @exportS3Method generics::tidy
tidy.nce_marglik <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  estimate_tidy(x, conf.int, conf.level)
}

estimate_tidy <- function(x, conf_int, conf_level) {
  est <- stats::coef(x)
  out <- data.frame(term = names(est), estimate = unname(est), std.error = x$se, stringsAsFactors = FALSE)
  if (conf_int) {
    ci <- tidy_confint(x, conf_level)
    out$conf.low <- ci[1L, 1L]
    out$conf.high <- ci[1L, 2L]
  }
  out
}

#' @rdname vnce_broom
#' @exportS3Method generics::glance
glance.nce_bf <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(log_bf = x$log_bf, std.error = x$se, bf = x$bf, prob_model1 = x$prob[["model1"]],
             nobs = if (is.null(x$n) || anyNA(x$n)) NA_integer_ else as.integer(sum(x$n)),
             separated = isTRUE(x$separated), method = x$method, stringsAsFactors = FALSE)
}

#' @rdname vnce_broom
#' @exportS3Method generics::glance
glance.nce_marglik <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(logml = x$logml, std.error = x$se, std.error.iid = x$se_iid %||% NA_real_,
             nobs = x$n %||% NA_integer_, ess = x$ess %||% NA_real_, n_ref = x$n_ref %||% NA_integer_,
             separated = isTRUE(x$separated), stringsAsFactors = FALSE)
}

#' @rdname vnce_broom
#' @exportS3Method generics::tidy
tidy.nce_edge_roc <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(term = "auc", estimate = x$auc, stringsAsFactors = FALSE)
}

#' @rdname vnce_broom
#' @exportS3Method generics::glance
glance.nce_edge_roc <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(auc = x$auc, n_edges = x$n_edges, n_pairs = x$n_pairs, n_thresholds = nrow(x$roc) - 1L)
}

#' @export
print.nce_bf <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nBayes factor by ", x$method, "\n\n", sep = "")
  if (is.na(x$log_bf) && isTRUE(x$separated)) {
    cat(sprintf("log K not identified (separated samples); importance sampling bounds [%s, %s]\n",
                format(x$bounds[["lower"]], digits = digits), format(x$bounds[["upper"]], digits = digits)))
  } else {
    cat(sprintf("log K = %s (s.e. %s),  K = %s\n", format(x$log_bf, digits = digits),
                format(x$se, digits = digits), format(x$bf, digits = digits)))
    cat(sprintf("P(model 1 | x) = %s at prior odds %g\n", format(x$prob[["model1"]], digits = digits), x$prior_odds))
  }
  invisible(x)
}

#' Summarise a Bayes factor estimate
#'
#' @param object An `nce_bf` from [bayes_factor_nce()] or [bayes_factor_marglik()].
#' @inheritParams nce_vocabulary
#' @return An object of class `summary.nce_bf`: a table of \eqn{\log K} with
#'   its standard error and a 95% interval, \eqn{K}, the posterior model
#'   probabilities, and the diagnostics (draws, effective sample sizes,
#'   importance sampling bounds) when available.
#' @export
summary.nce_bf <- function(object, ...) estimate_summary(object, "log_bf", "log K", "summary.nce_bf")

#' @export
print.summary.nce_bf <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nBayes factor by ", x$method, "\n\nCall:  ", paste(deparse(x$call), collapse = "\n"), "\n\n", sep = "")
  print(signif(x$table, digits))
  cat(sprintf("\nK = %s; posterior probabilities (prior odds %g): model 1 %s, model 2 %s\n",
              format(x$bf, digits = digits), x$prior_odds, format(x$prob[["model1"]], digits = digits),
              format(x$prob[["model2"]], digits = digits)))
  if (!is.null(x$logml)) {
    cat(sprintf("log marginal likelihoods: %s\n", paste(format(x$logml, digits = digits), collapse = ", ")))
  }
  if (isTRUE(x$combined)) {
    cat(sprintf("draws in the two estimates: %s and %s\n", x$n[[1L]], x$n[[2L]]))
  } else if (!is.null(x$n)) {
    cat(sprintf("draws: %d and %d; effective sample sizes (of the score): %s and %s\n", x$n[[1L]], x$n[[2L]],
                format(x$ess[[1L]], digits = 3), format(x$ess[[2L]], digits = 3)))
    print_bridge_diagnostics(x, "log K", digits)
  }
  invisible(x)
}

#' @export
print.nce_marglik <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nLog normalising constant by logistic regression against a", x$reference$family, "reference\n\n")
  if (is.na(x$logml) && isTRUE(x$separated)) {
    cat(sprintf("log Z not identified (separated samples); importance sampling bounds [%s, %s]\n",
                format(x$bounds[["lower"]], digits = digits), format(x$bounds[["upper"]], digits = digits)))
  } else {
    tel <- if (is.null(x$telescope)) "" else sprintf(", telescoped through %s", n_waymarks(x$telescope))
    cat(sprintf("log Z = %s (s.e. %s)%s\n", format(x$logml, digits = digits), format(x$se, digits = digits), tel))
  }
  invisible(x)
}

#' Summarise a log normalising constant estimate
#'
#' @param object An `nce_marglik` from [marglik_nce()].
#' @inheritParams nce_vocabulary
#' @return An object of class `summary.nce_marglik`: \eqn{\log Z} with its
#'   standard error and 95% interval, and the diagnostics (draws, effective
#'   sample size, reference, importance sampling bounds).
#' @export
summary.nce_marglik <- function(object, ...) estimate_summary(object, "logml", "log Z", "summary.nce_marglik")

#' @export
print.summary.nce_marglik <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nLog normalising constant by logistic regression against a reference\n\nCall:  ",
      paste(deparse(x$call), collapse = "\n"), "\n\n", sep = "")
  print(signif(x$table, digits))
  r <- x$reference
  cat(sprintf("\nreference: %s%s, fitted to %s draws on the unconstrained scale (%d dimension%s)\n",
              r$family, if (!is.null(r$df)) sprintf(" (df %g)", r$df) else if (identical(r$family, "warped"))
                " (marginal transports, Gaussian copula with shrunk correlations)" else "",
              if (x$split) "the first half of the" else "all", length(r$mean), if (length(r$mean) == 1L) "" else "s"))
  cat(sprintf("draws in the estimate: %d (effective %s)%s; reference draws: %d\n", x$n,
              format(x$ess, digits = 3),
              if (length(x$chains) > 1L) sprintf(" in %d chains", length(x$chains)) else "", x$n_ref))
  tel <- x$telescope
  if (!is.null(tel)) {
    cat(sprintf(paste0("telescoped through %s (single classifier: accuracy %s, log Z %s, s.e. %s);\n",
                       "  pair accuracies %s to %s, %d log_density evaluations\n"),
                n_waymarks(tel), format(tel$single[["accuracy"]], digits = 3),
                format(tel$single[["logml"]], digits = digits), format(tel$single[["se"]], digits = digits),
                format(min(tel$accuracy), digits = 3), format(max(tel$accuracy), digits = 3), tel$evaluations))
  }
  print_bridge_diagnostics(x, "log Z", digits)
  invisible(x)
}

# Summary of a scalar estimate with its standard error: a one-row table with a 95% interval,
# and the object's other fields (diagnostics).
estimate_summary <- function(object, field, label, class) {
  z <- stats::qnorm(0.975)
  est <- object[[field]]
  tab <- cbind(Estimate = est, `Std. Error` = object$se, lower95 = est - z * object$se, upper95 = est + z * object$se)
  rownames(tab) <- label
  structure(c(list(table = tab), object[setdiff(names(object), c(field, "se"))]), class = class)
}

n_waymarks <- function(tel) {
  k <- length(tel$b) - 2L
  sprintf("%d waymark%s", k, if (k == 1L) "" else "s")
}

# Diagnostics shared by the summaries of log K and log Z estimates.
print_bridge_diagnostics <- function(x, what, digits) {
  # Bounds in expectation only: in a finite sample they may cross, so they are not printed as an
  # interval (which would have to be ordered and hold the estimate).
  cat(sprintf("s.e. for independent draws: %s; importance sampling %s (a lower bound in expectation), %s (upper)\n",
              format(x$se_iid, digits = digits), format(x$bounds[["lower"]], digits = digits),
              format(x$bounds[["upper"]], digits = digits)))
  if (isTRUE(x$separated)) cat(sprintf("The samples are completely separated: %s is not identified.\n", what))
  cat(sprintf("Newton/bisection iterations: %d%s\n", x$iterations, if (x$converged) "" else " (NOT CONVERGED)"))
}

#' @export
print.nce_edge_roc <- function(x, ...) {
  cat(sprintf("Edge recovery: AUC %.3f over %d thresholds\n", x$auc, nrow(x$roc) - 1L))
  invisible(x)
}

#' @export
plot.nce_edge_roc <- function(x, ...) {
  graphics::plot(x$roc$fpr, x$roc$tpr, type = "s", xlim = c(0, 1), ylim = c(0, 1),
                 xlab = "false-positive rate", ylab = "true-positive rate",
                 main = sprintf("AUC %.3f", x$auc), ...)
  graphics::abline(0, 1, lty = 3, col = "grey50")
  invisible(x)
}
