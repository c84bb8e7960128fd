# The model-object contract for sequential fits (snce_fit, and latkes_fit through it): the
# statistics of glm/mgcv objects, with NCE's meaning. An snce fit inherits from nce_fit; every
# contract method is defined here for snce_fit so that the sequential meaning is used.

#' @export
coef.snce_fit <- function(object, ...) object$coefficients

#' Covariance of an snce fit
#'
#' @param object An `snce_fit`.
#' @param type `"sandwich"` (default: clustered by transition, or by sequence
#'   with `cluster = "sequence"`, plus mgcv's smoothing-bias term for smooths)
#'   or `"naive"` (the Bayesian covariance of the penalised logistic regression,
#'   which treats the reference points as fixed).
#' @param ... Unused.
#' @return Covariance matrix of `coef(object)`, with its names. With
#'   `intercept = "transition"` the per-transition intercepts are not among the
#'   coefficients (they are eliminated in the fit); their standard errors are in
#'   `object$transition_intercept_se`.
#' @export
vcov.snce_fit <- function(object, type = c("sandwich", "naive"), ...) {
  type <- match.arg(type)
  if (type == "sandwich") object$vcov else object$vcov_naive
}

#' @export
confint.snce_fit <- function(object, parm, level = 0.95, type = c("sandwich", "naive"), ...) {
  call <- sys.call()
  wald_confint(object, parm, level, match.arg(type), call = call)
}

#' @export
nobs.snce_fit <- function(object, ...) object$n

#' @export
formula.snce_fit <- function(x, ...) x$nce_formula

#' @export
terms.snce_fit <- function(x, ...) stats::terms(x$nce_formula)

#' The rows of an snce fit
#'
#' @param formula An `snce_fit`.
#' @param ... Unused.
#' @return Data frame of the transitions then their reference points, with the
#'   state, `_prev` and covariate columns (and LATKES features), `.label` (1
#'   data, 0 reference), `.transition` and `.offset`.
#' @export
model.frame.snce_fit <- function(formula, ...) formula$nce_frame

#' @export
model.matrix.snce_fit <- function(object, ...) {
  if (object$intercept$type == "transition") {
    # The kernel's columns: the per-transition intercepts are eliminated, not coefficients.
    x <- setup_predict(object$row_setup, object$nce_frame, FALSE)
    colnames(x) <- names(object$coefficients)
    return(x)
  }
  predict.snce_fit(object, newdata = object$nce_frame, type = "lpmatrix")
}

#' Fitted transition densities of an snce fit
#'
#' @param object An `snce_fit`.
#' @param ... Unused.
#' @return The fitted transition density at each observed transition
#'   (`predict(object, type = "response")`): `nobs(object)` values.

#' Residuals of an snce fit
#'
#' NCE fits a classifier of data against reference points; its residuals are
#' the diagnostics there are. A transition density has no residual of its own.
#'
#' @param object An `snce_fit`.
#' @param type `"response"` (label minus the fitted probability that the row is
#'   a data point) or `"deviance"` (signed square roots of the rows'
#'   deviance contributions).
#' @param ... Unused.
#' @return One value per row of `model.frame(object)` (data rows, then
#'   reference rows).
#' @export
residuals.snce_fit <- function(object, type = c("response", "deviance"), ...) {
  type <- match.arg(type)
  y <- object$nce_frame$.label
  p <- object$fitted.values
  if (type == "response") return(y - p)
  sign(y - p) * sqrt(-2 * (y * log(p) + (1 - y) * log1p(-p)))
}

#' Log-likelihood of an snce fit
#'
#' The sum over the observed transitions of the log transition density under
#' the fitted normalised kernel, \eqn{\sum_t f_{\hat\theta}(y_t, y_{t-1}) -
#' \log Z(y_{t-1})}. By default the log normaliser of each transition is minus
#' its intercept (the spline intercept's value, the global intercept with
#' `intercept = "none"`, or the transition's free intercept); with
#' `normalise = "reference"` it is computed by importance sampling from the
#' reference kernel, \eqn{\log \frac1K \sum_k \exp\{f(u_k, y_{t-1})\} / q(u_k
#' \mid y_{t-1})} with `n_draws` draws per transition, a check that does not
#' rest on the intercept.
#'
#' @param object An `snce_fit`.
#' @param normalise `"intercept"` or `"reference"`.
#' @param n_draws Reference draws per transition for `normalise = "reference"`.
#' @param ... Unused.
#' @return An object of class `logLik`: `df` is the effective number of
#'   parameters (the kernel's and the intercept's effective degrees of freedom,
#'   one per free intercept with `intercept = "transition"`), `nobs` the number
#'   of transitions.
#' @export
logLik.snce_fit <- function(object, normalise = c("intercept", "reference"), n_draws = 1000, ...) {
  normalise <- match.arg(normalise)
  ll <- if (normalise == "intercept") {
    sum(predict.snce_fit(object, type = "link"))
  } else {
    check_count(n_draws, "n_draws", min = 2)
    sum(predict.snce_fit(object, type = "log_kernel") - reference_log_z(object, object$transitions, n_draws))
  }
  structure(ll, df = snce_df(object), nobs = object$n, class = "logLik")
}

# Effective number of parameters, the normaliser's included.
snce_df <- function(object) {
  df <- sum(object$edf)
  if (object$intercept$type == "transition") df <- df + length(object$transition_intercepts)
  df
}

# Log normaliser of the fitted kernel for each row of `trans` (previous state and
# covariates), by importance sampling from the reference kernel.
reference_log_z <- function(object, trans, n_draws, call = caller_call()) {
  vars <- object$reference$vars
  nt <- nrow(trans)
  check_size(8 * as.double(nt) * n_draws * (ncol(trans) + 8), "n_draws", "the importance-sampling normaliser",
             call = call)
  prev <- stats::setNames(trans[paste0(vars, "_prev")], vars)
  u <- kernel_draw(object$reference, prev, n_draws)
  of <- rep(seq_len(nt), each = n_draws)
  nd <- take_rows(trans, of)
  nd[vars] <- u[vars]
  lw <- predict.snce_fit(object, nd, type = "log_kernel") -
    kernel_logq(object$reference, u[vars], prev[of, , drop = FALSE])
  vapply(split(lw, of), function(l) {
    mx <- max(l)
    mx + log(mean(exp(l - mx)))
  }, 0)
}

#' Wald tests between nested snce fits
#'
#' Tests the coefficients the larger fit has beyond the smaller one (matched by
#' name) with a Wald statistic and the fit's sandwich covariance (clustered as
#' the fit was), which is valid for NCE whatever the ratio, unlike a likelihood
#' ratio of the classifiers. For smooth terms the statistic uses the
#' pseudo-inverse of their covariance of rank the rounded sum of their
#' effective degrees of freedom (at least 1), and that rank as degrees of
#' freedom. Both fits must be on the same transitions.
#'
#' @param object,... Two `snce_fit`s, in any order.
#' @param se_type Covariance: `"sandwich"` or `"naive"`.
#' @return An `anova` data frame in the layout of [anova.nce_fit()] (the
#'   columns of [stats::anova.glm()]): one row per fit, the Wald statistic, its
#'   degrees of freedom and `Pr(>Chi)` in the larger fit's row.
#' @export
anova.snce_fit <- function(object, ..., se_type = c("sandwich", "naive")) {
  se_type <- match.arg(se_type)
  fits <- c(list(object), list(...))
  if (length(fits) != 2L || !all(vapply(fits, inherits, TRUE, "snce_fit"))) {
    nce_abort("anova() of snce fits compares exactly two nested snce_fit objects", "input")
  }
  n_coef <- vapply(fits, function(f) length(stats::coef(f)), 0L)
  o <- order(n_coef)
  small <- fits[[o[1]]]
  big <- fits[[o[2]]]
  if (small$n != big$n || !isTRUE(all.equal(small$transitions[small$reference$vars],
                                            big$transitions[big$reference$vars], check.attributes = FALSE))) {
    nce_abort("the two fits are not on the same transitions", "input")
  }
  extra <- setdiff(names(stats::coef(big)), names(stats::coef(small)))
  if (!length(extra) && setequal(names(stats::coef(big)), names(stats::coef(small)))) {
    nce_abort("the two fits have the same terms: there is nothing to test", "input")
  }
  if (!length(extra) || !all(names(stats::coef(small)) %in% names(stats::coef(big)))) {
    nce_abort("the fits are not nested: the smaller fit's coefficients must all be in the larger fit", "input")
  }
  b <- stats::coef(big)[extra]
  v <- stats::vcov(big, type = se_type)[extra, extra, drop = FALSE]
  rank <- max(1L, min(length(extra), round(sum(big$edf[extra]))))
  e <- eigen((v + t(v)) / 2, symmetric = TRUE)
  keep <- seq_len(rank)
  keep <- keep[e$values[keep] > max(e$values) * 1e-10]
  wald <- sum((crossprod(e$vectors[, keep, drop = FALSE], b))^2 / e$values[keep])
  df <- length(keep)
  tests <- rbind(NA, c(df, wald, stats::pchisq(wald, df, lower.tail = FALSE)))
  anova_table(list(small, big), tests, sprintf("Wald test of nested snce fits (%s covariance, clustered by %s)",
                                               se_type, big$cluster))
}
