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
#' @param object,x,formula A result of those functions.
#' @param parm,level As for [stats::confint()].
#' @param ... Unused.
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
    ci <- stats::confint(x, level = conf_level)
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
