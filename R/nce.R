#' Fit an unnormalised model by noise-contrastive estimation
#'
#' Estimates a model whose density is known only up to a constant,
#' \eqn{p(y) = \exp\{f_\theta(y) + \nu\}}, by contrasting the `n` data points
#' with `m = ratio * n` reference points from a known density `q`. With
#' `method = "logistic"` this is a logistic regression of the label (1 data,
#' 0 reference) on the terms of `formula` with offset
#' \eqn{\log(n/m) - \log q(u)}; the intercept \eqn{\nu} estimates minus the
#' log normalising constant (Gutmann and Hyvarinen, 2012; Barthelme and
#' Chopin, 2015). With `method = "poisson"` the Poisson-transformed
#' log-likelihood \eqn{\sum_i \{f(y_i) + \nu\} - n \int \exp\{f + \nu\}} is
#' maximised with its integral estimated by importance sampling from `q`;
#' both approach maximum likelihood as `ratio` grows.
#'
#' Standard errors default to the NCE sandwich, which treats the data and the
#' reference points as two independent samples (the asymptotic covariance of
#' Gutmann and Hyvarinen); `vcov(fit, type = "naive")` gives the inverse
#' Hessian of the logistic regression, which ignores that the reference points
#' are random and is reported only for comparison.
#'
#' @param formula One-sided formula giving \eqn{f_\theta(y)} in the
#'   reference's columns: linear terms, `I()`, `poly()`, factors, and mgcv's
#'   smooth terms `s()`, `te()`, `ti()` (any basis: `bs = "cr"`, `"cc"`, `"tp"`,
#'   `"ps"`, ...; `by =` variables), whose smoothing parameters are chosen by
#'   REML (the criterion of `mgcv::gam(method = "REML")`). An intercept (the
#'   estimate of \eqn{-\log Z}) is always included.
#' @param data Data frame of observations; it must hold the reference's
#'   columns, without NA or non-finite values.
#' @param reference Reference distribution: [ref_uniform()], [ref_normal()],
#'   [ref_fit()] or [ref_custom()].
#' @param ratio Reference points per data point (m / n), positive.
#' @param method `"logistic"` (NCE) or `"poisson"` (Poisson transform with an
#'   importance-sampling integral).
#' @param knots Knots for smooth terms, as for [mgcv::gam()].
#' @param sp Fixed smoothing parameters (one per penalty, in mgcv's order);
#'   `NULL` estimates them by REML.
#' @param control Settings of the Newton iteration, see [nce_control()] (nonlinear fits: L-BFGS with
#'   at most `max(2000, 20 * maxit)` iterations, then Fisher-scoring steps).
#' @param start Nonlinear models: named starting values of the parameters \eqn{\theta} (not the
#'   intercept, which nce() adds and starts at an importance-sampling estimate of \eqn{-\log Z}).
#'   With `start`, `formula` is the log density \eqn{f(x; \theta)} itself, an R expression in the
#'   reference's columns and the parameters, as in [stats::nls()]: e.g.
#'   `~ -abs(y - mu) / s` with `start = c(mu = 0, s = 1)`. Its gradient comes from [stats::deriv()]
#'   (`abs(u)` is differentiated as `sign(u) * du` by the chain rule), else from `gradient`, else
#'   from finite differences (warning `nce_warning_finite_difference`). For [ica_model()], an
#'   optional d x d start matrix B.
#' @param model Nonlinear models written as R functions: an [nce_model()] (user `log_f` and
#'   `gradient` functions, evaluated on all rows once per iterate) or the built-in [ica_model()]
#'   (fitted entirely in Rust). Give `model` or `formula`, not both.
#' @param gradient `function(theta, data)` returning the rows x parameters matrix of
#'   \eqn{\partial f/\partial\theta}, for formulas that [stats::deriv()] cannot differentiate
#'   (or to replace a model's gradient).
#' @param n_starts Nonlinear models: number of starts. Start 1 is `start`; the others jitter it
#'   (normal, sd `max(|start| / 2, 0.1)`, R's RNG), or for [ica_model()] are random whitened
#'   matrices. The best objective is kept; `fit$start_table` and `fit$spread` report all of them.
#' @return An object of class `nce_fit` with methods `print`, `summary`,
#'   `coef`, `vcov`, `confint`, `predict`, `plot`, `nobs`, `model.frame`,
#'   `simulate` and `update`. With smooth terms it is also of class `nce_gam`
#'   and `gam`, with mgcv's fields (`coefficients`, `Vp`, `Ve`, `edf`, `sp`,
#'   `smooth`, ...), so mgcv's `summary.gam`, `plot.gam` and `predict.gam`
#'   work on it. Its `Vp` is the NCE-corrected Bayesian covariance
#'   (the sandwich plus mgcv's smoothing-bias term \eqn{H^{-1} S H^{-1}});
#'   `Vp_naive` is mgcv's \eqn{(X'WX + S)^{-1}}.
#'
#'   With `start` or `model` (a model nonlinear in its parameters) the fit is of class `nce_nls`:
#'   the NCE logistic (or Poisson-transform) objective in \eqn{(\nu, \theta)} is minimised in
#'   Rust by L-BFGS with exact gradients, and the covariance is the two-sample sandwich on the
#'   nonlinear scores (Gutmann and Hyvarinen, 2012, Theorem 3). See [nce_model()], [ica_model()].
#' @references Barthelme, S. and Chopin, N. (2015). The Poisson transform for
#'   unnormalised statistical models. Statistics and Computing 25(4).
#'   Gutmann, M. U. and Hyvarinen, A. (2012). Noise-contrastive estimation of
#'   unnormalized statistical models. JMLR 13.
#' @examples
#' # Truncated exponential on [0, 1]: p(y) proportional to exp(2 y)
#' set.seed(1)
#' y <- log1p(runif(500) * (exp(2) - 1)) / 2
#' fit <- nce(~ y, data = data.frame(y = y), reference = ref_uniform(y = c(0, 1)))
#' summary(fit)
#' confint(fit)
#' log((exp(2) - 1) / 2)   # true log normaliser; compare with summary()
#' @export
nce <- function(formula, data, reference, ratio = 20, method = c("logistic", "poisson"),
                knots = NULL, sp = NULL, control = nce_control(),
                start = NULL, model = NULL, gradient = NULL, n_starts = 1L) {
  cl <- match.call()
  if (!is.null(start) || !is.null(model)) {
    return(nce_nonlinear(formula, data, reference, ratio, method, start, model, gradient, n_starts, control, cl,
                         parent.frame()))
  }
  method <- match.arg(method)
  check_nce_args(formula, data, reference, ratio)
  vars <- reference$vars
  d <- data[vars]
  bad <- which(!rows_finite(d))
  if (length(bad)) {
    nce_abort(sprintf(paste("`data` has NA or non-finite values in %d row(s) (%s);",
                            "nce() drops nothing silently: remove or impute them first"),
                      length(bad), format_positions(bad)), "data")
  }
  n <- nrow(d)
  m <- as.integer(round(ratio * n))
  if (m < 1L) nce_abort(sprintf("`ratio` = %g gives no reference points for n = %d", ratio, n), "input")

  lq_data <- ref_logq(reference, d)
  outside <- which(lq_data == -Inf)
  if (length(outside)) {
    nce_abort(sprintf(paste("%d data point(s) lie outside the reference's support (rows %s):",
                            "NCE needs q > 0 wherever the data are; widen the reference"),
                      length(outside), format_positions(outside)), "support")
  }
  u <- ref_draw(reference, m)
  lq_ref <- ref_logq(reference, u)
  if (any(lq_ref == -Inf)) {
    nce_abort("the reference's log density is -Inf at some of its own draws", "reference")
  }
  frame <- rbind(d, u)
  label <- rep(c(1, 0), c(n, m))
  offset <- log(n / m) - c(lq_data, lq_ref)
  # The Poisson transform's data term is f(y) + nu, without the reference's offset.
  if (method == "poisson") offset[seq_len(n)] <- 0

  frame$.label <- label
  frame$.offset <- offset
  nce_fields <- list(n = n, m = m, ratio = m / n, method = method, reference = reference,
                     nce_formula = formula, nce_frame = frame, control = control, call = cl)
  if (has_smooths(formula)) {
    if (method != "logistic") nce_abort("smooth terms need method = \"logistic\"", "input")
    return(nce_smooth_fit(formula, frame, label, offset, knots, sp, control, nce_fields))
  }
  if (!is.null(sp)) nce_abort("`sp` applies only to formulas with smooth terms", "input")

  tt <- stats::terms(formula)
  mf <- stats::model.frame(tt, frame, na.action = stats::na.fail)
  x <- stats::model.matrix(tt, mf)
  storage.mode(x) <- "double"
  family <- if (method == "logistic") "binomial" else "poisson_transform"
  res <- rs(nce_fit_glm(x, label, rep(1, n + m), offset, family, as.integer(label),
                        control, nce_threads()))

  cn <- colnames(x)
  beta <- stats::setNames(res$coefficients, cn)
  beta[res$aliased] <- NA_real_
  name_cov <- function(v) {
    v[is.nan(v)] <- NA_real_
    dimnames(v) <- list(cn, cn)
    v
  }
  warn_fit(res, cn, n)
  structure(c(list(
    coefficients = beta,
    vcov = name_cov(res$cov_sandwich),
    vcov_naive = name_cov(res$cov),
    log_normaliser = -unname(beta[1L]),
    converged = res$converged,
    iterations = res$iterations,
    objective = res$loglik,
    linear_predictors = res$eta,
    fitted.values = res$fitted,
    terms = stats::terms(mf), xlevels = stats::.getXlevels(tt, mf),
    contrasts = attr(x, "contrasts")
  ), nce_fields), class = "nce_fit")
}

# nce() with smooth terms: penalised fit with REML smoothing parameters.
nce_smooth_fit <- function(formula, frame, label, offset, knots, sp, control, nce_fields) {
  rhs <- formula[[2L]]
  f <- stats::as.formula(call("~", quote(.label), rhs), env = environment(formula))
  obj <- fit_penalised(f, frame, "binomial", offset, knots, sp, sample = label, control = control)
  warn_fit(obj, names(obj$coefficients), nce_fields$n, aliased_value = "0 (as mgcv does)")
  if (any(obj$at_bound)) {
    # Not a problem in itself (a smooth shrunk to its null space), but worth knowing.
    obj$message <- paste(c(obj$message, sprintf("%d smoothing parameter(s) at the bound of their range",
                                                 sum(obj$at_bound))), collapse = "; ")
  }
  obj$Vp_naive <- obj$Vp
  obj$Vp <- nce_bayes_cov(obj)
  obj$vcov <- obj$Vp
  obj$vcov_naive <- obj$Vp_naive
  obj$log_normaliser <- -unname(obj$coefficients[1L])
  obj$objective <- obj$loglik
  obj$iterations <- obj$iter
  obj$call <- NULL
  obj <- c(obj, nce_fields)
  class(obj) <- c("nce_gam", "nce_fit", "gam", "glm", "lm")
  obj
}

check_nce_args <- function(formula, data, reference, ratio) {
  if (!inherits(formula, "formula") || length(formula) != 2L) {
    nce_abort("`formula` must be one-sided, e.g. ~ y: the response is the data/reference label nce() builds", "input")
  }
  if (attr(stats::terms(formula), "intercept") == 0L) {
    nce_abort("`formula` must keep its intercept: it estimates minus the log normalising constant", "input")
  }
  if (!is.data.frame(data) || nrow(data) == 0L) nce_abort("`data` must be a data frame with at least one row", "input")
  if (!inherits(reference, "nce_reference")) {
    nce_abort("`reference` must be a reference distribution such as ref_uniform(), ref_normal(), ref_fit() or ref_custom()", "input")
  }
  if (!is.numeric(ratio) || length(ratio) != 1L || !is.finite(ratio) || ratio <= 0) {
    nce_abort("`ratio` must be one positive number (reference points per data point)", "input")
  }
  not_ref <- setdiff(all.vars(formula), reference$vars)
  if (length(not_ref)) {
    nce_abort(sprintf("`formula` uses %s, which the reference does not generate (it has %s)",
                      paste(not_ref, collapse = ", "), paste(reference$vars, collapse = ", ")), "input")
  }
  not_data <- setdiff(reference$vars, names(data))
  if (length(not_data)) {
    nce_abort(sprintf("`data` lacks the reference's column(s) %s", paste(not_data, collapse = ", ")), "input")
  }
  invisible(TRUE)
}

# Classed warnings about the fit; never silent.
warn_fit <- function(res, names, n, aliased_value = "NA") {
  if (!res$converged) {
    nce_warn(sprintf("the fit did not converge: %s; see nce_control()", res$message), "convergence", call = NULL)
  }
  if (res$n_certain > 0L) {
    nce_warn(sprintf(paste("fitted probabilities are numerically 1 at %d of %d data points: the estimates",
                           "may be running off to infinity (separation), usually because the reference",
                           "puts almost no mass where the data are"), res$n_certain, n), "separation", call = NULL)
  }
  if (any(res$aliased)) {
    nce_warn(sprintf("%d coefficient(s) not estimable (aliased with others), set to %s: %s",
                     sum(res$aliased), aliased_value, paste(names[res$aliased], collapse = ", ")),
             "rank", call = NULL)
  }
}

# Covariance of a penalised NCE fit: the NCE sandwich plus mgcv's smoothing-bias term
# Vp - Ve = H^{-1} S H^{-1}; the plain sandwich when nothing is penalised.
nce_bayes_cov <- function(fit) fit$Vs + fit$Vp - fit$Ve
