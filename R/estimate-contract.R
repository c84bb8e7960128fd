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

#' @rdname estimate_methods
#' @export
coef.nce_bf <- function(object, ...) c(log_bf = object$log_bf)

#' @rdname estimate_methods
#' @export
coef.nce_marglik <- function(object, ...) c(logml = object$logml)

#' @rdname estimate_methods
#' @export
vcov.nce_bf <- function(object, ...) estimate_vcov(object)

#' @rdname estimate_methods
#' @export
vcov.nce_marglik <- function(object, ...) estimate_vcov(object)

estimate_vcov <- function(object) {
  nm <- estimate_field(object)
  matrix(object$se^2, 1L, 1L, dimnames = list(nm, nm))
}

#' @rdname estimate_methods
#' @export
confint.nce_bf <- function(object, parm, level = 0.95, ...) estimate_confint(object, level)

#' @rdname estimate_methods
#' @export
confint.nce_marglik <- function(object, parm, level = 0.95, ...) estimate_confint(object, level)

estimate_confint <- function(object, level, call = caller_call()) {
  check_probability(level, "level", call = call)
  est <- object[[estimate_field(object)]]
  z <- stats::qnorm((1 + level) / 2)
  a <- (1 - level) / 2
  ci <- matrix(c(est - z * object$se, est + z * object$se), 1L,
               dimnames = list(estimate_field(object), sprintf("%g %%", 100 * c(a, 1 - a))))
  ci
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

#' @rdname estimate_methods
#' @export
vcov.nce_edge_roc <- function(object, ...) {
  nce_unsupported("vcov", object, "the AUC compares one estimate with a known graph; it carries no sampling model here")
}

#' @rdname estimate_methods
#' @export
confint.nce_edge_roc <- function(object, parm, level = 0.95, ...) {
  nce_unsupported("confint", object,
                  "the AUC compares one estimate with a known graph; it carries no sampling model here")
}

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

# Methods with no meaning for these results (and for ratio_posterior()'s sample): refused with the reason.
refuse_estimate <- function(method) {
  force(method)
  f <- function(object, ...) {
    why <- if (inherits(object, "nce_edge_roc")) {
      "it is a comparison of an estimated graph with the true one, not a fitted model of data"
    } else if (inherits(object, "nce_ratio_posterior")) {
      "it is a posterior sample, not a fitted model of data; use the ratio estimator"
    } else {
      "it is an estimate of a normalising constant from draws, not a fitted model of data"
    }
    nce_unsupported(method, object, why)
  }
  # The method's first argument has the generic's name (R CMD check's S3 consistency).
  first <- switch(method, model.frame = "formula", formula = , terms = , plot = "x", "object")
  if (first != "object") {
    body(f) <- do.call(substitute, list(body(f), stats::setNames(list(as.name(first)), "object")))
    names(formals(f))[1L] <- first
  }
  f
}

#' @rdname estimate_methods
#' @export
predict.nce_bf <- refuse_estimate("predict")
#' @rdname estimate_methods
#' @export
predict.nce_marglik <- refuse_estimate("predict")
#' @rdname estimate_methods
#' @export
predict.nce_edge_roc <- refuse_estimate("predict")
#' @rdname estimate_methods
#' @export
fitted.nce_bf <- refuse_estimate("fitted")
#' @rdname estimate_methods
#' @export
fitted.nce_marglik <- refuse_estimate("fitted")
#' @rdname estimate_methods
#' @export
fitted.nce_edge_roc <- refuse_estimate("fitted")
#' @rdname estimate_methods
#' @export
residuals.nce_bf <- refuse_estimate("residuals")
#' @rdname estimate_methods
#' @export
residuals.nce_marglik <- refuse_estimate("residuals")
#' @rdname estimate_methods
#' @export
residuals.nce_edge_roc <- refuse_estimate("residuals")
#' @rdname estimate_methods
#' @export
logLik.nce_bf <- refuse_estimate("logLik")
#' @rdname estimate_methods
#' @export
logLik.nce_marglik <- refuse_estimate("logLik")
#' @rdname estimate_methods
#' @export
logLik.nce_edge_roc <- refuse_estimate("logLik")
#' @rdname estimate_methods
#' @export
anova.nce_bf <- refuse_estimate("anova")
#' @rdname estimate_methods
#' @export
anova.nce_marglik <- refuse_estimate("anova")
#' @rdname estimate_methods
#' @export
anova.nce_edge_roc <- refuse_estimate("anova")
#' @rdname estimate_methods
#' @export
update.nce_bf <- refuse_estimate("update")
#' @rdname estimate_methods
#' @export
update.nce_marglik <- refuse_estimate("update")
#' @rdname estimate_methods
#' @export
update.nce_edge_roc <- refuse_estimate("update")
#' @rdname estimate_methods
#' @export
model.frame.nce_bf <- refuse_estimate("model.frame")
#' @rdname estimate_methods
#' @export
model.frame.nce_marglik <- refuse_estimate("model.frame")
#' @rdname estimate_methods
#' @export
model.frame.nce_edge_roc <- refuse_estimate("model.frame")
#' @rdname estimate_methods
#' @export
model.matrix.nce_bf <- refuse_estimate("model.matrix")
#' @rdname estimate_methods
#' @export
model.matrix.nce_marglik <- refuse_estimate("model.matrix")
#' @rdname estimate_methods
#' @export
model.matrix.nce_edge_roc <- refuse_estimate("model.matrix")
#' @rdname estimate_methods
#' @export
formula.nce_bf <- refuse_estimate("formula")
#' @rdname estimate_methods
#' @export
formula.nce_marglik <- refuse_estimate("formula")
#' @rdname estimate_methods
#' @export
formula.nce_edge_roc <- refuse_estimate("formula")
#' @rdname estimate_methods
#' @export
terms.nce_bf <- refuse_estimate("terms")
#' @rdname estimate_methods
#' @export
terms.nce_marglik <- refuse_estimate("terms")
#' @rdname estimate_methods
#' @export
terms.nce_edge_roc <- refuse_estimate("terms")
#' @rdname estimate_methods
#' @export
simulate.nce_bf <- refuse_estimate("simulate")
#' @rdname estimate_methods
#' @export
simulate.nce_marglik <- refuse_estimate("simulate")
#' @rdname estimate_methods
#' @export
simulate.nce_edge_roc <- refuse_estimate("simulate")
#' @rdname estimate_methods
#' @export
plot.nce_bf <- refuse_estimate("plot")
#' @rdname estimate_methods
#' @export
plot.nce_marglik <- refuse_estimate("plot")
