# Likelihood-side methods of nce() fits (classes nce_fit and nce_gam): what the fitted,
# normalised density says about the data.

#' Log-likelihood, AIC and BIC of an nce fit
#'
#' The log-likelihood of an NCE fit is the log density of the data under the
#' fitted *normalised* model, \eqn{\sum_i w_i \{f_{\hat\theta}(y_i) + \hat\nu\}},
#' where minus the intercept \eqn{\hat\nu} is the estimated log normalising
#' constant; it equals `sum(predict(object, type = "link"))` (weighted by the
#' fit's weights). NCE does not maximise it, but with a large `ratio` it
#' approaches the maximised log-likelihood of the model. Its `df` is the number
#' of estimated coefficients including the intercept (the normaliser), or for
#' fits with smooth terms the total effective degrees of freedom (again
#' including the intercept); `nobs` is the number of data points. `AIC()` and
#' `BIC()` use these: \eqn{-2 \log L + k\,df}. Compare fits of the same data
#' (the reference draws add noise of order `n / sqrt(ratio * n)` to the
#' normaliser's contribution: use a large `ratio` when AIC differences are
#' small). For tests between nested fits, use [anova.nce_fit()], not a
#' likelihood-ratio test.
#'
#' @param object An `nce_fit` (or `nce_gam`).
#' @param newdata Optional data frame: the log-likelihood of these points
#'   (held-out data) instead of the fit's data, with `nobs` their number.
#' @param ... Unused.
#' @return An object of class `logLik` with attributes `df` and `nobs`.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)), ratio = 50)
#' logLik(fit)
#' AIC(fit, update(fit, . ~ . + I(y^2)))
#' # exact maximum likelihood for p(y) = exp(a y) / Z(a) on [0, 1]
#' nll <- function(a) -(a * sum(df$y) - nrow(df) * log(expm1(a) / a))
#' -optimize(nll, c(0.1, 5))$objective
#' @export
logLik.nce_fit <- function(object, newdata = NULL, ...) {
  if (is.null(newdata)) {
    ld <- stats::predict(object, type = "link")
    w <- object$data_weights
    if (!is.null(w)) ld <- w * ld
    nobs <- object$n
  } else {
    ld <- stats::predict(object, newdata, type = "link")
    nobs <- nrow(newdata)
  }
  if (anyNA(ld)) nce_abort("the log density is NA at some points (NA in `newdata`?): remove them first", "input")
  structure(sum(ld), df = nce_df(object), nobs = nobs, class = "logLik")
}

# Parameters counted by logLik: coefficients estimated (with the intercept), or the total edf.
nce_df <- function(object) {
  if (inherits(object, "nce_gam")) return(sum(object$edf))
  sum(!is.na(stats::coef(object)))
}

#' @rdname logLik.nce_fit
#' @param scale,k As for [stats::extractAIC()]: `k` is the penalty per degree
#'   of freedom (2 for AIC); `scale` is unused.
#' @param fit An `nce_fit`.
#' @export
extractAIC.nce_fit <- function(fit, scale = 0, k = 2, ...) {
  ll <- stats::logLik(fit)
  c(attr(ll, "df"), -2 * as.numeric(ll) + k * attr(ll, "df"))
}

#' Fitted densities, residuals and deviance of an nce fit
#'
#' `fitted()` gives the fitted (normalised) density at each data point, the
#' same as `predict(object, type = "response")`: `nobs(object)` values.
#'
#' `residuals()` gives the residuals of the classification that NCE fits: the
#' data points have label 1 and the reference points 0, and each point's
#' fitted probability of being data is
#' \eqn{p(u) / \{p(u) + (m/n) q(u)\}}. A density model has no residual at a
#' data point on its own; the classification residuals at the data *and*
#' reference points (`n + m` values, data first) show where the model puts too
#' much or too little mass: plotted against a covariate, a trend in them is a
#' trend the log density misses. This is what `mgcv::gam.check()` uses (its
#' check of the basis dimension `k` then asks whether the classification
#' residuals still vary smoothly with each covariate). Types are those of
#' [stats::residuals.glm()].
#'
#' `deviance()` is \eqn{-2 \log L} (with the log-likelihood of
#' [logLik.nce_fit()]): there is no saturated model for a density, so it is
#' not a deviance against one; `df.residual()` is `nobs - df`.
#'
#' @param object An `nce_fit` (or `nce_gam`).
#' @param type Residual type: `"deviance"`, `"pearson"`, `"response"` or
#'   `"working"`.
#' @param ... Unused.
#' @return `fitted()`: a numeric vector of `nobs(object)` densities (padded with
#'   NA at dropped rows when `na.action = na.exclude`); `residuals()`: a
#'   numeric vector of `n + m` classification residuals; `deviance()` and
#'   `df.residual()`: one number.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' head(fitted(fit))
#' r <- residuals(fit, type = "response")
#' round(tapply(r, cut(model.frame(fit)$y, 5), mean), 4)   # about 0: no misfit along y
#' @export
fitted.nce_fit <- function(object, ...) {
  stats::napredict(object$na.action, stats::predict(object, type = "response"))
}

#' @rdname fitted.nce_fit
#' @export
residuals.nce_fit <- function(object, type = c("deviance", "pearson", "response", "working"), ...) {
  type <- match.arg(type)
  label <- object$nce_frame$.label
  # mgcv's qq.gam() simulates labels into `y`; otherwise the fit has no response (see ?nce).
  y <- if (length(object$y) == length(label)) object$y else label
  mu <- object$fitted.values
  pw <- if (is.null(object$prior.weights)) rep(1, length(label)) else object$prior.weights
  fam <- if (identical(object$method, "poisson")) stats::poisson() else stats::binomial()
  r <- switch(type,
    deviance = sign(y - mu) * sqrt(pmax(fam$dev.resids(y, mu, pw), 0)),
    pearson = (y - mu) * sqrt(pw) / sqrt(fam$variance(mu)),
    response = y - mu,
    working = (y - mu) / fam$mu.eta(fam$linkfun(mu)))
  names(r) <- NULL
  r
}

#' @rdname fitted.nce_fit
#' @export
deviance.nce_fit <- function(object, ...) -2 * as.numeric(stats::logLik(object))

#' @rdname fitted.nce_fit
#' @export
df.residual.nce_fit <- function(object, ...) object$n - nce_df(object)

#' Model matrix of an nce fit
#'
#' The design of the fit: the columns of the model's terms at the data and
#' the reference points, the rows of [model.frame.nce_fit()] (data first), as
#' for glm and gam. `predict(object, type = "lpmatrix")` gives the rows of
#' the data points alone (and at `newdata`); `lpmatrix %*% coef(object)` is
#' the log density (plus offsets written in the formula).
#'
#' @param object An `nce_fit` (or `nce_gam`).
#' @param ... Passed to [predict.nce_fit()] (e.g. `newdata`).
#' @return A matrix with one row per data and reference point and one column
#'   per coefficient.
#' @export
model.matrix.nce_fit <- function(object, ...) {
  stats::predict(object, object$nce_frame[object$reference$vars], type = "lpmatrix", ...)
}

update_nce_formula <- function(old, new, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (is.character(new)) new <- stats::as.formula(new, env = environment(old))
  if (!inherits(new, "formula")) {
    nce_abort(sprintf("`formula.` must be a formula such as ~ . + x, not %s.", describe_value(new)), "input",
              call = call)
  }
  if (length(new) == 3L) {
    if (!identical(new[[2L]], quote(.))) {
      nce_abort("`formula.` must be one-sided (~ . + x) or have `.` on the left: nce() models have no response",
                "input", call = call)
    }
    new <- stats::as.formula(call("~", new[[3L]]), env = environment(new))
  }
  out <- stats::update.formula(old, new)
  environment(out) <- environment(old)
  out
}
