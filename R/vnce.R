# vnce(): variational noise-contrastive estimation (Rhodes and Gutmann, 2019).

#' Variational noise-contrastive estimation
#'
#' Fits an unnormalised model with latent variables by maximising the VNCE objective (Rhodes and
#' Gutmann, 2019, eq. 13), a lower bound to the NCE objective that is tight when the variational
#' distribution q(z | x) equals the posterior of the latent variables. Expectations over q use the
#' reparametrisation trick on fixed base draws, so the objective is deterministic and is maximised
#' jointly over the model parameters and the variational parameters by L-BFGS in Rust.
#'
#' Models:
#' * [tgm_model()]: the truncated Gaussian graphical model phi(x; K, c) = exp(-x'Kx/2 - c) on the
#'   positive orthant; missing entries of `data` (NA) are the latent variables. The variational family
#'   is by default the model's own truncated-normal posterior drawn by the GHK simulator
#'   (`family = "ghk"`), or the paper's joint lognormal whose conditionals give q for every
#'   missingness pattern (`family = "lognormal"`). The noise is a
#'   product of univariate normals truncated at zero, each fitted by maximum likelihood to a column's
#'   observed values; noise points copy the missingness pattern of the data row they pair with.
#'   `impute = "mean"` (NCE after mean imputation, with complete noise) and `impute = "complete"` (NCE
#'   on the complete rows) are the usual baselines.
#' * [mog_model()]: the unnormalised mixture of two Gaussians of section 4.2 with a binary latent
#'   component label and the paper's logistic q(z = 0 | x; w). Expectations over the binary latent are
#'   exact. `method = "em"` runs the EM variant (exact posterior in the E-step, Corollary 1), and
#'   `method = "nce"` fits the marginal model by plain NCE, for comparison (Theorem 2: same optimum).
#' * [custom_model()]: your own log phi(x, z; theta) and its gradient for a discrete latent variable,
#'   computed in R (slower; for small models).
#'
#' @param data The data being modelled: for [tgm_model()] a numeric matrix (rows = observations,
#'   NA = missing; values must be positive); for the mixture and custom models a numeric vector or
#'   matrix without NA. See [nce_vocabulary] for the argument names shared by every fit.
#' @param model A model specification: [tgm_model()], [mog_model()] or [custom_model()].
#' @param ratio Reference (noise) points per data point: `ratio * nrow(data)` noise points (a
#'   positive whole number for the graphical model, whose noise rows pair with data rows); as in
#'   [nce()], see [nce_vocabulary].
#' @param n_latent Number of draws from q per data or noise point (Monte Carlo size of the
#'   expectations over continuous latent variables).
#' @param method `"vnce"` (joint maximisation over model and variational parameters), `"em"` (the EM
#'   variant; needs the exact posterior, available for [mog_model()]) or `"nce"` (plain NCE on the
#'   marginal model, when the latent variable can be summed out).
#' @param impute For the graphical model: `"latent"` (missing values are latent variables: VNCE),
#'   `"mean"` (fill them with the column mean of the observed values and fit by NCE) or `"complete"`
#'   (NCE on the rows without missing values).
#' @param control Optimiser settings: [vnce_control()] or a list of some of its settings, merged
#'   into the defaults.
#' @return An object of class `vnce_fit` (and `vnce_tgm`, `vnce_mog` or `vnce_custom`) with the
#'   estimates (`coefficients`; for the graphical model also `precision`, the estimated K, and `c`),
#'   the variational parameters, the maximised objective, the optimiser's convergence report, the
#'   noise and the call. For the graphical model, `normalisable` records whether the fitted
#'   exp(-x'Kx/2) is integrable on the orthant (K strictly copositive: checked exactly for d <= 12
#'   through its principal submatrices, by sufficient conditions above); an improper fit gives a
#'   warning of class `nce_warning_improper` (`nce_warning_normalisability_unknown` when it cannot
#'   be decided). The fit is not constrained to be proper. Methods: `print()`, `summary()`, `coef()`,
#'   `vcov()` and `confint()` (sandwich standard errors, see [vnce_methods]), `predict()`
#'   (imputation, log density with standard errors), `logLik()`, `simulate()`, `update()`, `nobs()`,
#'   `model.frame()`, broom's `tidy()`/`glance()`/`augment()`, `plot()`, [tgm_edges()], [edge_roc()].
#'
#'   Refused before any work: `ratio`, `n_latent` that are not positive (whole) numbers, and fits whose
#'   noise and latent draws would not fit in memory (class `nce_error_size`, naming the argument that
#'   sets the size); data with non-numeric, infinite or (graphical model) non-positive values, rows
#'   with every value missing, columns with fewer than two observed values, and (every model but
#'   a custom one with its own noise) columns with fewer than two distinct values.
#' @references Rhodes, B. and Gutmann, M. U. (2019). Variational noise-contrastive estimation.
#'   AISTATS, PMLR 89.
#' @examples
#' set.seed(1)
#' K <- ring_graph(6)
#' x <- rtgm(300, K)
#' x[sample(length(x), 0.2 * length(x))] <- NA       # 20% missing at random
#' fit <- vnce(x, tgm_model(), n_latent = 5)
#' fit
#' edge_roc(fit, K)$auc
#'
#' # the unnormalised mixture of Gaussians (section 4.2)
#' y <- rmog(500, theta = 4)
#' vnce(y, mog_model())
#' @export
vnce <- function(data, model = tgm_model(), ratio = 1, n_latent = 10, method = c("vnce", "em", "nce"),
                 impute = c("latent", "mean", "complete"), control = vnce_control()) {
  rng <- rng_state()
  cl <- match.call()
  call <- sys.call()
  method <- check_choice(method, c("vnce", "em", "nce"), "method")
  impute <- check_choice(impute, c("latent", "mean", "complete"), "impute")
  if (!inherits(model, "vnce_model")) {
    nce_abort(sprintf("`model` must be a model specification from tgm_model(), mog_model() or custom_model(), not %s.",
                      describe_value(model)), call = call)
  }
  check_number(ratio, "ratio", min = 0, exclusive_min = TRUE, call = call)
  check_count(n_latent, "n_latent", max = 1e9, call = call)
  control <- merge_control(control, vnce_control, call = call)
  if (model$type != "tgm" && impute != "latent") {
    nce_abort("`impute` applies to tgm_model() only (this model has no missing data): leave it at \"latent\".",
              call = call)
  }
  vnce_check_size(data, model, ratio, n_latent, call)
  fit <- switch(model$type,
    tgm = fit_vnce_tgm(data, model, ratio, as.integer(n_latent), method, impute, control, call = call),
    mog = fit_vnce_mog(data, model, ratio, method, control, call = call),
    custom = fit_vnce_custom(data, model, ratio, method, control, call = call)
  )
  fit$call <- cl
  fit$ratio <- ratio
  fit$method <- method
  fit$args <- list(data = data, model = model, ratio = ratio, n_latent = n_latent, method = method, impute = impute,
                   control = control)
  if (!isTRUE(fit$converged)) {
    nce_warn(sprintf("the optimiser did not converge: %s", fit$message), "convergence", call = call)
  }
  if (inherits(fit, "vnce_tgm")) {
    fit$normalisable <- tgm_normalisable(fit$precision)
    warn_improper(fit$normalisable, call)
  }
  as_result(fit, rng = rng, env = parent.frame())
}

# Refuse, before allocating, a fit whose noise and latent draws would not fit in memory: the
# noise matrix, its log densities, and per row with missing values n_latent draws of every
# coordinate (and their log uniforms), for data and noise rows (plus R's copies).
vnce_check_size <- function(x, model, nu, n_latent, call) {
  n <- NROW(x)
  d <- NCOL(x)
  if (!is.numeric(n) || !is.numeric(d) || n < 1L || d < 1L) return(invisible())
  rows <- (1 + nu) * n
  bytes <- if (model$type == "tgm") {
    frac <- if (is.numeric(x) || is.data.frame(x)) mean(rowSums(is.na(as.matrix(x))) > 0) else 1
    if (is.na(frac)) frac <- 1
    rows * d * 8 * 4 + frac * rows * n_latent * d * 8 * 2
  } else {
    rows * max(d, 1) * 8 * 6
  }
  arg <- if (model$type == "tgm" && n_latent * d > 4 * (1 + nu) * d) "n_latent" else "ratio"
  check_size(bytes, arg, "this vnce() fit", call = call)
}

# Is exp(-x'Kx/2) integrable on the positive orthant? Exactly when K is strictly copositive
# (x'Kx > 0 for x >= 0, x != 0). Checked: a diagonal entry <= 0 is a direction of no decay;
# positive definite, or a positive diagonal with non-negative off-diagonal entries, suffice;
# otherwise, for d <= 12, Kaplan's (2000) criterion: K is strictly copositive iff no principal
# submatrix has an eigenvector with positive entries and a non-positive eigenvalue.
tgm_normalisable <- function(k_mat, max_exact = 12L) {
  k_mat <- unname((k_mat + t(k_mat)) / 2)
  d <- ncol(k_mat)
  dg <- diag(k_mat)
  if (any(!is.finite(k_mat))) return(list(status = "unknown", why = "K has non-finite entries"))
  if (any(dg <= 0)) {
    j <- which(dg <= 0)
    return(list(status = "improper", why = sprintf(
      "K[%d,%d] = %.3g is not positive: phi does not decay along coordinate %d", j[1L], j[1L], dg[j[1L]], j[1L])))
  }
  if (!inherits(try(chol(k_mat), silent = TRUE), "try-error")) {
    return(list(status = "proper", why = "K is positive definite"))
  }
  off <- k_mat
  diag(off) <- 0
  if (all(off >= 0)) return(list(status = "proper", why = "K has a positive diagonal and no negative entries"))
  if (d > max_exact) {
    return(list(status = "unknown", why = sprintf(
      paste("K is not positive definite and has negative entries; exact copositivity is checked for d <= %d",
            "only"), max_exact)))
  }
  for (size in 2:d) {
    for (s in utils::combn(d, size, simplify = FALSE)) {
      e <- eigen(k_mat[s, s, drop = FALSE], symmetric = TRUE)
      for (k in which(e$values <= 0)) {
        v <- e$vectors[, k]
        if (all(v > 0) || all(v < 0)) {
          return(list(status = "improper", why = sprintf(
            "x'Kx <= 0 at x >= 0 supported on variables %s: phi does not decay in that direction",
            paste(s, collapse = ", "))))
        }
      }
    }
  }
  list(status = "proper", why = "K is strictly copositive (checked on every principal submatrix)")
}

warn_improper <- function(nz, call) {
  if (identical(nz$status, "improper")) {
    nce_warn(paste0("the fitted model is improper: ", nz$why, ". exp(-x'Kx/2) is then not integrable on the ",
                    "positive orthant, so c is no log normaliser and logLik() is refused. NCE does not enforce ",
                    "normalisability: use more data, a larger `ratio`, or fewer free parameters."),
             "improper", call = call)
  } else if (identical(nz$status, "unknown")) {
    nce_warn(paste0("could not verify that the fitted model is normalisable: ", nz$why, "."),
             "normalisability_unknown", call = call)
  }
}

#' Optimiser settings for vnce()
#'
#' @param maxit Maximum number of L-BFGS iterations.
#' @param gtol Convergence when the largest absolute gradient entry is below `gtol * max(1, |J|)`.
#' @param ftol Convergence when the relative change of the objective over an iteration is below it.
#' @param memory Number of correction pairs kept by L-BFGS.
#' @param em_maxit,em_tol Maximum number of EM iterations and tolerance on the change of the NCE
#'   objective between them (`method = "em"`).
#' @return A list of class `vnce_control`.
#' @section What it refuses:
#' * `maxit` or `em_maxit` not a whole number >= 1, `memory` not a whole number in 1..1000,
#'   `gtol`, `ftol` or `em_tol` not one finite number >= 0 (`nce_error_input`).
#' @examples
#' vnce_control(maxit = 500)
#' @export
vnce_control <- function(maxit = 2000, gtol = 1e-6, ftol = 1e-12, memory = 10, em_maxit = 200, em_tol = 1e-10) {
  call <- sys.call()
  check_count(maxit, "maxit", call = call)
  check_count(memory, "memory", max = 1000, call = call)
  check_count(em_maxit, "em_maxit", call = call)
  check_number(gtol, "gtol", min = 0, call = call)
  check_number(ftol, "ftol", min = 0, call = call)
  check_number(em_tol, "em_tol", min = 0, call = call)
  structure(list(maxit = as.double(maxit), gtol = as.double(gtol), ftol = as.double(ftol),
                 memory = as.double(memory), em_maxit = as.double(em_maxit), em_tol = as.double(em_tol)),
            class = "vnce_control")
}

#' Model specifications for vnce()
#'
#' `tgm_model()`: the truncated Gaussian graphical model phi(x; K, c) = exp(-x'Kx/2 - c) on the
#' positive orthant (Rhodes and Gutmann, 2019, section 5). `mog_model()`: the unnormalised mixture of
#' two zero-mean Gaussians phi(x, z; theta, c) = exp(-c) (z exp(-x^2 / (2 sigma1^2)) + (1 - z)
#' exp(-x^2 / (2 theta^2))) with known `sigma1` (section 4.2) and variational family q(z = 0 | x; w) =
#' 1 / (1 + exp(w0 + w1 x + w2 x^2)).
#'
#' @param family For `tgm_model()`, the variational family q of the missing values given the
#'   observed ones. `"ghk"` (default): the model's own posterior, a normal truncated to the positive
#'   orthant, drawn by the GHK simulator (Geweke, Hajivassiliou and Keane) from fixed base draws; it
#'   has no parameters of its own and moves with K, so VNCE maximises over (K, c) only and the
#'   importance weights phi/q stay bounded. `"lognormal"`: the joint lognormal of Rhodes and Gutmann
#'   (2019, section 5) whose conditionals give q for every missingness pattern, fitted jointly with
#'   (K, c). Its density vanishes at zero where the posterior does not, which makes the noise term's
#'   importance weights heavy-tailed; in our comparisons it recovers edges less well (see the
#'   vignette "Missing data with VNCE").
#' @param start For `tgm_model()`: `NULL` or a list with any of `K` (positive definite start for the
#'   precision matrix), `c`, `mu` and `prec` (mean and precision of the lognormal variational family
#'   on log x; used by `family = "lognormal"`). Defaults: K diagonal with 1 / mean(x_j^2), c its exact log
#'   normaliser, mu and prec from the observed log values. For `mog_model()`: `NULL` or a list with `theta`, `c`
#'   and `w`.
#' @param sigma1 The known standard deviation of the first component.
#' @return A model specification (class `vnce_model`).
#' @section What it refuses:
#' * `family` not "ghk" or "lognormal" (`nce_error_input`);
#' * `start` not `NULL` or a list whose names are among those listed above (`nce_error_input`);
#' * `mog_model()`: `sigma1` not one finite number > 0 (`nce_error_input`).
#' @examples
#' tgm_model()
#' mog_model(sigma1 = 1)
#' @export
tgm_model <- function(family = c("ghk", "lognormal"), start = NULL) {
  if (!is.character(family) || length(family) < 1L || anyNA(family)) {
    nce_abort(sprintf("`family` must be \"ghk\" or \"lognormal\", not %s.", describe_value(family)))
  }
  family <- check_choice(family, c("ghk", "lognormal"), "family")
  if (!is.null(start) && (!is.list(start) || !all(names(start) %in% c("K", "c", "mu", "prec")))) {
    nce_abort(sprintf("`start` must be NULL or a list with elements among K, c, mu and prec, not %s.",
                      describe_value(start)))
  }
  structure(list(type = "tgm", family = family, start = start), class = "vnce_model")
}

#' @rdname tgm_model
#' @export
mog_model <- function(sigma1 = 1, start = NULL) {
  check_number(sigma1, "sigma1", min = 0, exclusive_min = TRUE)
  if (!is.null(start) && (!is.list(start) || !all(names(start) %in% c("theta", "c", "w")))) {
    nce_abort(sprintf("`start` must be NULL or a list with elements among theta, c and w, not %s.",
                      describe_value(start)))
  }
  structure(list(type = "mog", sigma1 = sigma1, start = start), class = "vnce_model")
}

#' @export
print.vnce_model <- function(x, ...) {
  desc <- switch(x$type,
    tgm = sprintf("truncated Gaussian graphical model, phi(x) = exp(-x'Kx/2 - c) on x > 0 (%s variational family)",
                  x$family),
    mog = sprintf("unnormalised mixture of N(0, %g^2) and N(0, theta^2)", x$sigma1),
    custom = sprintf("custom model with %d parameters and a latent variable on %d values",
                     length(x$theta), length(x$latent))
  )
  cat("vnce model:", desc, "\n")
  invisible(x)
}

#' Simulate from the mixture of Gaussians of mog_model()
#'
#' Draws from the normalised version of the unnormalised mixture: N(0, sigma1^2) with probability
#' sigma1 / (sigma1 + theta), else N(0, theta^2). Its log normaliser is c = log(sqrt(2 pi) (sigma1 +
#' theta)).
#'
#' @param n Number of draws.
#' @param theta Standard deviation of the second component.
#' @param sigma1 Standard deviation of the first component.
#' @return A numeric vector.
#' @section What it refuses:
#' * `n` not a whole number >= 0, `theta` or `sigma1` not one finite number > 0
#'   (`nce_error_input`);
#' * `n` draws that would not fit in memory (`nce_error_size`, checked before allocating).
#' @examples
#' set.seed(1)
#' summary(rmog(1000, theta = 4))
#' @export
rmog <- function(n, theta = 4, sigma1 = 1) {
  check_count(n, "n", min = 0, max = 2^52)
  check_number(theta, "theta", min = 0, exclusive_min = TRUE)
  check_number(sigma1, "sigma1", min = 0, exclusive_min = TRUE)
  check_size(n * 8 * 4, "n", "rmog()")
  first <- stats::runif(n) < sigma1 / (sigma1 + theta)
  stats::rnorm(n, 0, ifelse(first, sigma1, theta))
}
