# Models nonlinear in their parameters: user R functions (nce_model), formulas in the manner of
# nls() with symbolic gradients, and the built-in Laplace ICA model fitted in Rust.

#' An unnormalised model written as R functions, for nonlinear NCE
#'
#' Describes \eqn{f(x; \theta)}, the log of an unnormalised density, for
#' `nce(model = , start = )`. Both functions are called once per iterate on all rows at once
#' (data and reference points together), so write them vectorised.
#'
#' @param log_density `function(theta, data)`: \eqn{f}, the unnormalised log density, at every row
#'   of the data frame `data` (a numeric vector with one value per row); `theta` is the named
#'   parameter vector (names from `start`). Argument names follow [nce_vocabulary].
#' @param gradient `function(theta, data)`: the matrix of \eqn{\partial f / \partial \theta} with
#'   one row per row of `data` and one column per parameter (in the order of `start`). `NULL`
#'   uses central finite differences, with a warning of class `nce_warning_finite_difference`.
#' @param name A label for printing.
#' @return An object of class `nce_model`.
#' @section What it refuses:
#' * `log_density` not a function, `gradient` not a function or `NULL`, `name` not one string
#'   (`nce_error_input`). What the functions return is checked when [nce()] calls them.
#' @seealso [nce()], [ica_model()].
#' @examples
#' # A normal density in its location and log scale
#' m <- nce_model(
#'   log_density = function(theta, data) -(data$y - theta[["mu"]])^2 * exp(-2 * theta[["ls"]]) / 2,
#'   gradient = function(theta, data) {
#'     k <- exp(-2 * theta[["ls"]])
#'     cbind(mu = (data$y - theta[["mu"]]) * k, ls = (data$y - theta[["mu"]])^2 * k)
#'   })
#' set.seed(1)
#' fit <- nce(model = m, data = data.frame(y = rnorm(300, 1, 0.5)),
#'            reference = ref_normal(y = 1, cov = 1), start = c(mu = 0, ls = 0), ratio = 5)
#' coef(fit)
#' @export
nce_model <- function(log_density, gradient = NULL, name = "user model") {
  check_function(log_density)
  check_function(gradient, allow_null = TRUE)
  check_string(name)
  structure(list(log_f = log_density, gradient = gradient, name = name, rust = NULL,
                 gradient_source = if (is.null(gradient)) "finite differences" else "user function"),
            class = "nce_model")
}

#' Independent component analysis with Laplace sources, fitted in Rust
#'
#' The model of Gutmann and Hyvarinen (2010): \eqn{x = A s} with independent Laplace sources of
#' unit variance, so \eqn{\log p(x) = -\sqrt 2 \sum_i |b_i' x| + c} with \eqn{b_i} the rows of
#' \eqn{B = A^{-1}} and \eqn{c = \log|\det B| - (d/2)\log 2}. In `nce(model = ica_model(), ...)`
#' the parameters are the entries of B (named `B[i,j]`, by rows) and the intercept is c; the
#' objective, its gradient, the random starts and the optimiser all run in Rust. Random starts
#' (`n_starts`) are \eqn{B_0 = Q W}, W the data's whitening matrix and Q a random orthogonal
#' matrix from a ChaCha stream seeded from R's RNG (so they do not depend on the thread count).
#' `start`, when given, is a d x d matrix B used as the first start.
#'
#' The objective has a kink wherever \eqn{b_i'x = 0} for some row, and L-BFGS on it crawls near the
#' optimum. The fit therefore minimises it with \eqn{|u|} Huber-smoothed on \eqn{[-h, h]}
#' (\eqn{u^2/(2h) + h/2} there), first with \eqn{h = 0.1}, then from that optimum with
#' \eqn{h = 0.003} (sources have unit variance, so h is in their units), each time by L-BFGS
#' preconditioned with the Fisher information at its start; `fit$nls$start_table$objective` is the exact
#' objective at the result. The smoothing moves the estimate by a small fraction of its standard
#' error: the exact objective at it is as low, on average, as where L-BFGS on the exact objective
#' stops after hundreds of iterations. Standard errors: the sandwich on the exact model's scores.
#' They are somewhat optimistic for B at moderate N: in `bench/ica-coverage.R` (d = 4, ratio 10,
#' 200 data sets) the 95% intervals for the entries of B cover 91.8% at N = 1000 and 93.9% at
#' N = 4000, those for c 96.0% and 99.0% (vignette "nonlinear").
#'
#' @param vars The data columns x (default: the reference's columns).
#' @return An object of class `nce_model` (`ica_mle()` fits the same model by maximum
#'   likelihood).
#' @section What it refuses:
#' * `vars` not `NULL` or a non-empty character vector without NA (`nce_error_input`).
#' @references Gutmann, M. and Hyvarinen, A. (2010). Noise-contrastive estimation: a new
#'   estimation principle for unnormalized statistical models. AISTATS.
#' @examples
#' set.seed(1)
#' x <- rica(500, diag(2))
#' fit <- nce(model = ica_model(), data = x, reference = ref_normal(x1 = 0, x2 = 0, cov = cov(x)),
#'            ratio = 5, n_starts = 3)
#' round(ica_B(fit), 2)
#' @export
ica_model <- function(vars = NULL) {
  if (!is.null(vars) && (!is.character(vars) || length(vars) < 1L || anyNA(vars))) {
    nce_abort("`vars` must be NULL or the names of the data columns", "input")
  }
  log_f <- function(theta, data) {
    x <- as.matrix(data[, ica_vars(data, vars, theta), drop = FALSE])
    b <- ica_b_of(theta, ncol(x))
    -sqrt(2) * rowSums(abs(x %*% t(b)))
  }
  gradient <- function(theta, data) {
    x <- as.matrix(data[, ica_vars(data, vars, theta), drop = FALSE])
    d <- ncol(x)
    s <- sign(x %*% t(ica_b_of(theta, d)))
    g <- do.call(cbind, lapply(seq_len(d), function(i) -sqrt(2) * s[, i] * x))
    colnames(g) <- names(theta)
    g
  }
  structure(list(log_f = log_f, gradient = gradient, name = "Laplace ICA", rust = "ica", vars = vars,
                 gradient_source = "exact (Rust)"), class = "nce_model")
}

ica_vars <- function(data, vars, theta) {
  if (!is.null(vars)) return(vars)
  d <- as.integer(round(sqrt(length(theta))))
  names(data)[seq_len(d)]
}

# B (d x d) from the parameter vector (by rows).
ica_b_of <- function(theta, d) matrix(unname(theta), d, d, byrow = TRUE)

ica_names <- function(d) sprintf("B[%d,%d]", rep(seq_len(d), each = d), rep(seq_len(d), d))

#' Simulate ICA data and fit the Laplace ICA model by maximum likelihood
#'
#' `rica()` draws \eqn{x = A s} with independent Laplace sources of unit variance. `ica_mle()`
#' fits B by maximum likelihood (the normaliser is known for this model), in Rust, by L-BFGS from
#' `n_starts` random whitened starts (as in [ica_model()]); c is \eqn{\log|\det B| - (d/2)\log 2}.
#' `ica_B()` returns the estimated B of an ICA fit.
#'
#' @param n Number of points.
#' @param A The d x d mixing matrix.
#' @param data A data frame or matrix of points (one row each).
#' @param n_starts Number of random starts.
#' @param object A fit of [ica_model()] by [nce()].
#' @return `rica()`: a data frame with columns `x1`, ..., `xd`. `ica_mle()`: a list with `B`, `c`,
#'   `loglik` (the log-likelihood) and `converged`. `ica_B()`: a matrix.
#' @section What it refuses:
#' * `rica()`: `n` not a whole number >= 1, `A` not a square numeric matrix of finite values
#'   (`nce_error_input`); `n` points that would not fit in memory (`nce_error_size`, checked
#'   before allocating);
#' * `ica_mle()`: `data` not a numeric matrix or data frame of finite values with more rows than
#'   columns, `n_starts` not a whole number >= 1 (`nce_error_input`);
#' * `ica_B()`: `object` not a fit of [ica_model()] by [nce()] (`nce_error_input`).
#' @examples
#' set.seed(2)
#' A <- matrix(c(1, 0.5, -0.3, 0.8), 2)
#' x <- rica(1000, A)
#' mle <- ica_mle(x)
#' round(mle$B %*% A, 2)   # close to a signed permutation matrix
#' @export
rica <- function(n, A) {  # nolint: object_name_linter.
  check_count(n)
  if (!is.matrix(A) || !is.numeric(A) || nrow(A) != ncol(A) || any(!is.finite(A))) {
    nce_abort("`A` must be a square numeric matrix of finite values", "input")
  }
  d <- nrow(A)
  check_size(8 * n * d * 3, "n", "the simulated data")
  s <- matrix(stats::rexp(n * d) / sqrt(2) * sample(c(-1, 1), n * d, replace = TRUE), n, d)
  x <- s %*% t(A)
  colnames(x) <- paste0("x", seq_len(d))
  as.data.frame(x)
}

#' @rdname rica
#' @export
ica_mle <- function(data, n_starts = 5L) {
  x <- if (is.data.frame(data)) as.matrix(data) else data
  if (!is.matrix(x) || !is.numeric(x) || nrow(x) < ncol(x) + 1L || any(!is.finite(x))) {
    nce_abort("`data` must be a numeric matrix or data frame of finite values with more rows than columns", "input")
  }
  check_count(n_starts)
  storage.mode(x) <- "double"
  d <- ncol(x)
  res <- rs(nce_ica_mle(x, as.integer(n_starts), draw_seed(), nl_rust_control(nce_control())))
  if (!res$converged) {
    nce_warn(sprintf("the ICA maximum-likelihood fit did not converge: %s", res$message), "convergence")
  }
  list(B = matrix(res$B, d, d, byrow = TRUE), c = res$c, loglik = res$loglik_mean * nrow(x),
       converged = res$converged)
}

#' @rdname rica
#' @export
ica_B <- function(object) {  # nolint: object_name_linter.
  if (!inherits(object, "nce_nls") || !identical(object$nls$model$rust, "ica")) {
    nce_abort("`object` must be a fit of ica_model() by nce()", "input")
  }
  theta <- object$coefficients[-1L]
  ica_b_of(theta, as.integer(round(sqrt(length(theta)))))
}

#' @export
print.nce_model <- function(x, ...) {
  cat(sprintf("Unnormalised model for nonlinear NCE: %s (gradient: %s)\n", x$name, x$gradient_source))
  invisible(x)
}
