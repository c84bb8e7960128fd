# The model-object contract for vnce() fits: standard errors (a sandwich for the VNCE objective),
# log-likelihood where the normalised density is available, simulation, and the methods that
# cannot make sense for these fits refused with the reason.

#' Standard errors and the glm method set for vnce() fits
#'
#' **Standard errors** are a sandwich for the VNCE objective. With the latent draws fixed (each
#' row has its own draws, made once), the objective is a sum of per-row terms over n i.i.d. data
#' rows and m i.i.d. noise rows: an M-estimator on two independent samples, so the covariance of
#' the estimate is \eqn{H^{-1} V H^{-1}}, with \eqn{H} the Hessian of the summed objective (central
#' differences of its exact gradient, in Rust) and \eqn{V} the sum, over the two samples, of the
#' centred outer products of the per-row scores (Gutmann and Hyvärinen's NCE covariance; with
#' nothing missing it is exactly the NCE sandwich). With missing values a noise row copies the
#' missingness pattern of the data row it pairs with, so the two samples are not independent:
#' \eqn{V} then sums the centred outer products of clusters, each a data row with its `ratio` noise
#' rows (the clusters are i.i.d.). The Monte Carlo error of the draws is part of each row's term
#' and is counted. Variational parameters (the lognormal family, the mixture's
#' logistic q) are estimated jointly and their uncertainty propagates; `vcov()` reports the model
#' parameters' block. For `impute = "mean"` the SEs treat the imputed values as data (they are
#' too small). A parametric bootstrap is not needed: the objective is smooth in the parameters.
#'
#' **Log-likelihood**: the data's log density under the fitted normalised model, with c as the
#' log normaliser. Available for the truncated Gaussian graphical model when no value is missing
#' and the fitted K is normalisable (exp(-x'Kx/2) integrable on the orthant), and for the
#' mixture of Gaussians (the latent label summed out exactly). Refused, with the reason, when
#' values are missing (the marginal over the missing values has no closed form), for an improper
#' fit, and for custom models (which parameter is the log normaliser is not declared).
#'
#' Refused for every vnce fit: `formula()`/`terms()` (vnce() takes a data matrix and a model
#' specification, not a formula), `residuals()` (a density has no response), `anova()` (there is
#' no nesting between vnce specifications to test).
#'
#' @param object,formula,x A [vnce()] fit.
#' @param evaluate For `update()`: `FALSE` returns the call instead of refitting.
#' @param ... Unused (or, for `update()`, arguments of [vnce()] to change).
#' @return `vcov()`: the covariance matrix of `coef()`. `nobs()`: the number of data rows used.
#'   `model.frame()`: the data as a data frame. `logLik()`: a `logLik` object with df the number
#'   of model parameters (c included). `simulate()`: a list of `nsim` data sets (graphical model,
#'   from the fitted K by [rtgm()]) or a data frame with one column per simulation (mixture).
#' @name vnce_methods
#' @examples
#' set.seed(1)
#' fit <- vnce(rmog(400, theta = 4), mog_model())
#' vcov(fit)
#' confint(fit)
#' logLik(fit)
NULL

#' @rdname vnce_methods
#' @export
vcov.vnce_fit <- function(object, ...) {
  nm <- names(object$coefficients)
  v <- if (inherits(object, "vnce_tgm")) tgm_vcov(object) else if (inherits(object, "vnce_mog")) mog_vcov(object) else
    custom_vcov(object)
  dimnames(v) <- list(nm, nm)
  v
}

tgm_vcov <- function(object) {
  d <- object$d
  nt <- d * (d + 1) / 2 + 1
  rows <- nrow(object$data) + nrow(object$noise$y)
  # with nothing missing q plays no part (and the lognormal family's parameters are not identified):
  # the objective is NCE's in (K, c) for either family
  family <- if (anyNA(object$data)) object$variational$family else "ghk"
  p <- if (family == "ghk") nt else nt + 2 * d + d * (d - 1) / 2
  check_size(8 * (rows * p + 4 * p^2), "x", "the sandwich covariance", call = caller_call(2L))
  params <- list(K = unname(object$precision), c = object$c)
  if (family == "lognormal") {
    params$mu <- unname(object$variational$mu)
    params$prec <- unname(object$variational$prec)
  }
  res <- nce_vnce_tgm_vcov(list(x = object$data, y = object$noise$y, lpx = object$noise$lpx, lpy = object$noise$lpy),
                           params, list(n_latent = as.integer(object$n_latent), seed = object$seed,
                                        threads = nce_threads(), family = family))
  dg <- diag(object$precision)
  if (inherits(res, "nce_rust_error") && identical(res$code, "numerical") && min(dg) < 1e-3 * max(abs(dg))) {
    j <- which.min(dg)
    nce_abort(sprintf(paste("no standard errors: the estimate lies on the boundary of the parameter space",
                            "(K[%s,%s] = %.3g, next to 0, where the missing values' posterior ceases to exist);",
                            "the sandwich needs an interior maximum (%s)"),
                      names(dg)[j], names(dg)[j], dg[j], res$message), "numerical", call = caller_call(2L))
  }
  res <- rs(res, call = caller_call(2L))
  v <- res$vcov[seq_len(nt), seq_len(nt), drop = FALSE]
  # Rust packs K's upper triangle row by row; coef() holds it column by column.
  up <- which(upper.tri(diag(d), diag = TRUE), arr.ind = TRUE)
  key_r <- c(sprintf("%d,%d", up[, 1L], up[, 2L]), "c")
  rust <- sub("^K\\[(.*)\\]$", "\\1", res$names[seq_len(nt)])
  o <- match(key_r, rust)
  v[o, o, drop = FALSE]
}

mog_vcov <- function(object) {
  th <- object$coefficients[["theta"]]
  cc <- object$coefficients[["c"]]
  vn <- object$method != "nce"
  p <- if (vn) c(log(th), cc, object$variational$w) else c(log(th), cc)
  v <- rs(nce_vnce_mog_vcov(list(x = object$x, y = object$noise$y, sigma1 = object$model$sigma1,
                                 noise_mean = object$noise$mean, noise_sd = object$noise$sd),
                            as.double(p), if (vn) "vnce" else "nce", nce_threads()), call = caller_call(2L))
  v <- v[1:2, 1:2, drop = FALSE]
  jac <- diag(c(th, 1))                      # delta method: d theta / d log theta = theta
  jac %*% v %*% jac
}

#' @rdname vnce_methods
#' @export
nobs.vnce_fit <- function(object, ...) as.integer(object$n)

#' @rdname vnce_methods
#' @export
model.frame.vnce_fit <- function(formula, ...) {
  x <- formula$x
  out <- as.data.frame(if (is.null(dim(x))) list(x = x) else x)
  if (inherits(formula, "vnce_tgm") && is.null(colnames(x))) names(out) <- colnames(formula$precision)
  out
}

#' @rdname vnce_methods
#' @export
model.matrix.vnce_fit <- function(object, ...) {
  if (!inherits(object, "vnce_tgm")) {
    nce_unsupported("model.matrix", object, paste(
      "the model is not linear in its parameters (the mixture's log density depends on theta through a log-sum)"))
  }
  tgm_lpmatrix(object, object$x)
}

#' @rdname vnce_methods
#' @export
logLik.vnce_fit <- function(object, ...) {
  if (inherits(object, "vnce_custom")) {
    nce_unsupported("logLik", object, paste(
      "a custom model does not declare which parameter is its log normaliser, so its normalised density is unknown"))
  }
  if (inherits(object, "vnce_tgm")) {
    if (anyNA(object$x)) {
      nce_unsupported("logLik", object, paste(
        "the data have missing values, and the marginal density of a row over its missing values is an integral",
        "over the orthant with no closed form"))
    }
    if (!identical(object$normalisable$status, "proper")) {
      nce_unsupported("logLik", object, paste0("the fitted model is not known to be normalisable (",
                                                object$normalisable$why, "), so c is no log normaliser"))
    }
  }
  val <- sum(stats::predict(object, type = "link"))
  structure(val, df = length(object$coefficients), nobs = nobs(object), class = "logLik")
}

#' @rdname vnce_methods
#' @param nsim Number of data sets to simulate.
#' @param seed `NULL` or an integer for [set.seed()].
#' @export
simulate.vnce_fit <- function(object, nsim = 1, seed = NULL, ...) {
  check_nsim(nsim, 8 * 2 * nrow(as.matrix(object$x)) * max(1, object$d), max = 1e6)
  if (inherits(object, "vnce_custom")) {
    nce_unsupported("simulate", object, "there is no sampler for a user-supplied unnormalised model")
  }
  if (!is.null(seed)) {
    old <- if (exists(".Random.seed", globalenv())) get(".Random.seed", globalenv()) else NULL
    set.seed(seed)
    on.exit(if (!is.null(old)) assign(".Random.seed", old, globalenv()))
  }
  n <- nrow(as.matrix(object$x))
  if (inherits(object, "vnce_tgm")) {
    if (!identical(object$normalisable$status, "proper")) {
      nce_unsupported("simulate", object, paste0("the fitted model is not known to be normalisable (",
                                                  object$normalisable$why, ")"))
    }
    d <- object$d
    check_size(8 * 2 * nsim * n * d, "nsim", "simulate()")
    k_mat <- unname(object$precision)
    return(lapply(seq_len(nsim), function(i) {
      x <- rs(nce_rtgm(as.double(n), k_mat, rep(0, d),
                       list(burnin = 100L, thin = 10L, chains = 1L, start = NULL, seed = draw_seed(),
                            threads = nce_threads(), require_pd = FALSE)))
      colnames(x) <- colnames(object$precision)
      x
    }))
  }
  check_size(8 * 2 * nsim * n, "nsim", "simulate()")
  th <- object$coefficients[["theta"]]
  out <- as.data.frame(lapply(seq_len(nsim), function(i) rmog(n, th, object$model$sigma1)))
  names(out) <- paste0("sim_", seq_len(nsim))
  out
}

#' @rdname vnce_methods
#' @export
update.vnce_fit <- function(object, ..., resample = FALSE, evaluate = TRUE) {
  args <- object$args
  new <- list(...)
  args[names(new)] <- new
  if (!evaluate) return(as.call(c(list(quote(vnce)), args)))
  rerun(object, vnce, args, resample)
}

# Features of log phi(x) = -x'Kx/2 - c that are linear in coef(): -x_j^2/2, -x_j x_k, and -1.
tgm_lpmatrix <- function(object, x) {
  d <- object$d
  up <- which(upper.tri(diag(d), diag = TRUE), arr.ind = TRUE)
  lp <- vapply(seq_len(nrow(up)), function(k) {
    i <- up[k, 1L]
    j <- up[k, 2L]
    if (i == j) -x[, i]^2 / 2 else -x[, i] * x[, j]
  }, numeric(nrow(x)))
  lp <- cbind(matrix(lp, nrow(x)), -1)
  colnames(lp) <- names(object$coefficients)
  lp
}
