# Reference distributions q: small objects that sample and evaluate log q over
# named columns. Built-ins sample and evaluate in Rust.

new_reference <- function(kind, vars, ..., class = "nce_ref_builtin", call = caller_call()) {
  # Two ranges for one column would leave one of them unused, silently.
  if (anyDuplicated(vars)) {
    nce_abort(sprintf("column(s) %s are given more than once: name each column once",
                      paste(unique(vars[duplicated(vars)]), collapse = ", ")), "input", call = call)
  }
  structure(list(kind = kind, vars = vars, ...), class = c(class, "nce_reference"))
}

#' Uniform reference on a box
#'
#' Reference points drawn uniformly on a rectangle (box) in the named columns.
#'
#' @param ... Named ranges, one per column: `y = c(0, 1)`.
#' @return A reference distribution (class `nce_reference`) for [nce()].
#' @section What it refuses:
#' * unnamed `...`, or a range that is not two finite numbers with lower < upper
#'   (`nce_error_input`).
#' @examples
#' ref_uniform(y = c(0, 1))
#' ref_uniform(x = c(0, 1024), y = c(0, 768))
#' @export
ref_uniform <- function(...) {
  r <- list(...)
  if (length(r) == 0L || is.null(names(r)) || any(names(r) == "")) {
    nce_abort("`...` must be named ranges, e.g. ref_uniform(y = c(0, 1))", "input")
  }
  for (v in names(r)) {
    b <- r[[v]]
    if (!is.numeric(b) || length(b) != 2L || any(!is.finite(b)) || b[1] >= b[2]) {
      nce_abort(sprintf("range of `%s` must be two finite numbers, lower < upper", v), "input")
    }
  }
  new_reference("uniform", names(r),
                lower = vapply(r, `[`, 1, 1L, USE.NAMES = FALSE),
                upper = vapply(r, `[`, 1, 2L, USE.NAMES = FALSE))
}

#' Normal reference
#'
#' Reference points from a normal distribution over the named columns, in the
#' same style as [ref_uniform()]: one named argument per column.
#'
#' @param ... One named argument per column: `y = c(0, 2)` gives the mean and
#'   the standard deviation of independent columns; with `cov`, each argument
#'   is the column's mean alone (`a = 0, b = 1, cov = S`).
#' @param cov Optional covariance matrix over the columns in the order given
#'   (a variance for one column); `NULL` for independent columns with the
#'   standard deviations given in `...`.
#' @return A reference distribution (class `nce_reference`) for [nce()].
#' @section What it refuses:
#' * unnamed or missing `...`, or a named vector in it (the removed form
#'   `ref_normal(mean = c(y = 0), cov = 4)`: write `ref_normal(y = 0, cov = 4)`); a column not
#'   given as `c(mean, sd)` of finite numbers with
#'   sd > 0 (or, with `cov`, not one finite mean) (`nce_error_input`);
#' * `cov` not a finite square matrix with one row per column (`nce_error_input`), or not
#'   symmetric positive definite (checked in Rust when the reference is built, so a bad
#'   covariance fails here rather than in [nce()]) (`nce_error_input`); a singular covariance
#'   (smallest eigenvalue of its correlation matrix below 1e-10: the rounding of the covariance of
#'   exactly collinear columns leaves about 1e-16), naming the collinear columns (`nce_error_input`).
#' @examples
#' ref_normal(y = c(0, 2))                      # mean 0, sd 2
#' ref_normal(a = 0, b = 1, cov = diag(2))      # bivariate, with a covariance
#' ref_normal(a = c(0, 1), b = c(1, 3))         # independent columns
#' @export
ref_normal <- function(..., cov = NULL) {
  args <- list(...)
  nm <- names(args)
  if (is.null(nm)) nm <- rep("", length(args))
  # A named vector is the removed form ref_normal(mean = c(y = 0), cov = v): refused, not read
  # as a column called `mean`.
  named <- vapply(args, function(a) !is.null(names(a)), NA)
  if (any(named)) {
    nce_abort(paste("`...` holds a named vector: name the columns as arguments, as ref_uniform() does,",
                    "ref_normal(y = c(0, sd)) or ref_normal(y = 0, cov = v)"), "input")
  }
  if (!length(args) || any(nm == "")) {
    nce_abort("`...` must be named columns, e.g. ref_normal(y = c(0, 1)) (mean 0, sd 1)", "input")
  }
  for (v in nm) {
    a <- args[[v]]
    len <- if (is.null(cov)) 2L else 1L
    if (!is.numeric(a) || length(a) != len || any(!is.finite(a))) {
      nce_abort(sprintf("`%s` must be %s, not %s.", v,
                        if (len == 2L) "c(mean, sd): two finite numbers"
                        else "its mean (one finite number) when `cov` is given",
                        describe_value(a)), "input")
    }
    if (len == 2L && a[2L] <= 0) nce_abort(sprintf("the sd of `%s` must be > 0, not %g.", v, a[2L]), "input")
  }
  mean <- stats::setNames(vapply(args, `[`, 1, 1L), nm)
  if (is.null(cov)) {
    sds <- vapply(args, `[`, 1, 2L)
    cov <- diag(sds^2, length(sds))
  }
  ref_normal_build(mean, cov, call = sys.call())
}

ref_normal_build <- function(mean, cov, call) {
  if (!is.numeric(mean) || is.null(names(mean)) || any(names(mean) == "") || any(!is.finite(mean))) {
    nce_abort("`mean` must be a named vector of finite numbers, e.g. c(y = 0)", "input", call = call)
  }
  d <- length(mean)
  if (is.null(cov)) nce_abort(sprintf("`cov` must be a finite %d x %d matrix", d, d), "input", call = call)
  cov <- as.matrix(cov)
  if (!is.numeric(cov) || !all(dim(cov) == d) || any(!is.finite(cov))) {
    nce_abort(sprintf("`cov` must be a finite %d x %d matrix", d, d), "input", call = call)
  }
  singular <- singular_columns(cov, names(mean))
  if (length(singular)) {
    nce_abort(sprintf(paste("`cov` is singular: the columns %s are (nearly) collinear (smallest eigenvalue of the",
                            "correlation matrix below %g), so the reference has no density off their subspace;",
                            "give a positive definite covariance"), paste(singular, collapse = ", "), singular_tol),
              "input", call = call)
  }
  ref <- new_reference("normal", names(mean), mean = unname(as.double(mean)),
                       sigma = matrix(as.double(cov), d, d), call = call)
  # Let Rust check symmetry and positive definiteness once, here (its field is `sigma`; the
  # user's argument `cov`).
  tryCatch(rs(nce_ref_log_density(ref_spec(ref), matrix(ref$mean, 1L), 1L), call = call), nce_error = function(e) {
    e$message <- sub("`sigma`", "`cov`", conditionMessage(e), fixed = TRUE)
    stop(e)
  })
  ref
}

#' Reference fitted to the data
#'
#' A normal reference with the data's mean and (inflated) covariance, a
#' uniform one on the data's (expanded) bounding box, or a mixture of normals
#' fitted by EM: the usual ways to get a reference that covers the data (as in
#' the ICA experiment of Gutmann and Hyvarinen), and, for the mixture, one close
#' enough to the data that the model can be written relative to it
#' (`nce(relative = TRUE)`: "reference + difference = interest", as flows are
#' used in flow-contrastive estimation).
#'
#' **The mixture** has full covariances (mclust's `"VVV"`), fitted by EM in Rust
#' for each number of components in `components`: 20 iterations from each of 3
#' k-means++ starts, then the best continued to a relative change of the
#' log-likelihood below 1e-6; the number with the lowest BIC is kept
#' (`$selection` holds the table). Each covariance carries
#' a ridge of 1e-6 times its column's variance, so a component that shrinks onto a
#' few points stays proper. The starts use R's random numbers (`set.seed()`
#' reproduces the fit, on any number of threads). On 20,000 draws of an
#' 8-component mixture in 6 dimensions (`bench/deep-ebm-highdim.R`) it chose 8
#' components, and its KL divergence from the truth was that of
#' `mclust::densityMclust()` (0.0045); in 10 dimensions it chose 9, at 1.22 times
#' mclust's KL (0.0148 against 0.0121; see `bench/README.md`).
#'
#' @param data Data frame.
#' @param family `"normal"`, `"uniform"` or `"mixture"`.
#' @param vars Columns to cover (default: all numeric columns).
#' @param inflate Factor applied to the covariance (normal) or to each
#'   component's covariance (mixture).
#' @param expand Fraction of each range added on both sides (uniform).
#' @param components Numbers of mixture components to try (whole numbers from 1
#'   to 100; those needing more than the rows, G (d + 1), are skipped).
#' @return A reference distribution (class `nce_reference`) for [nce()].
#' @section What it refuses:
#' * `data` not a data frame, with fewer than two rows, or without numeric columns to
#'   cover; `vars` not in `data`; a used column that is not numeric (characters and factors
#'   are not coerced) or has NA or infinite values (`nce_error_input`);
#' * `expand` not one finite number >= 0, or (normal, mixture) `inflate` not one finite
#'   number > 0 (`nce_error_input`);
#' * (normal) columns that are (nearly) collinear in the data, so that their covariance is singular
#'   (smallest eigenvalue of their correlation matrix below 1e-10): ref_fit() does not regularise
#'   it, it refuses and names the columns (`nce_error_data`); drop one of them from `vars`. (The
#'   mixture's covariances carry a ridge, see above.)
#' * (mixture) `components` not whole numbers from 1 to 100, or too few rows for the
#'   smallest (`nce_error_input`); a column constant in the data (`nce_error_input`);
#'   numbers of components whose EM could take more than 1e12 updates (rows x components x
#'   d (d + 1) x 1060 iterations at most; about 40 minutes here), `nce_error_size`. The fits
#'   report progress through progressr, one step per number of components, and stop on an
#'   interrupt.
#' @examples
#' df <- data.frame(a = rnorm(100), b = rnorm(100))
#' ref_fit(df, "normal")
#' # Two clusters: a mixture reference finds them
#' set.seed(1)
#' two <- data.frame(a = c(rnorm(300, -3), rnorm(200, 3)), b = rnorm(500))
#' r <- ref_fit(two, "mixture", components = 1:4)
#' r
#' r$selection
#' @export
ref_fit <- function(data, family = c("normal", "uniform", "mixture"), vars = NULL,
                    inflate = 1, expand = 0.1, components = 1:9) {
  family <- match_choice(family)
  check_data_frame(data, "data", min_rows = 0L)
  check_number(expand, "expand", min = 0)
  if (is.null(vars)) vars <- names(data)[vapply(data, is.numeric, TRUE)]
  missing <- setdiff(vars, names(data))
  if (length(missing)) nce_abort(sprintf("`vars` not in `data`: %s", paste(missing, collapse = ", ")), "input")
  if (!length(vars)) nce_abort("`data` has no numeric columns for `ref_fit()` to cover: give `vars`", "input")
  check_numeric_columns(data, vars, "data")
  x <- as.matrix(data[vars])
  if (!is.numeric(x) || any(!is.finite(x))) {
    nce_abort("`data` columns used by `ref_fit()` must be numeric and finite", "input")
  }
  storage.mode(x) <- "double"  # integer columns too, for every family (the mixture's engine takes doubles)
  if (nrow(x) < 2L) nce_abort("`data` needs at least two rows to fit a reference", "input")
  flat <- vars[apply(x, 2L, function(v) diff(range(v)) == 0)]
  if (family != "uniform" && length(flat)) {
    nce_abort(sprintf("`data` column(s) %s are constant: a %s reference needs spread in every column",
                      paste(flat, collapse = ", "), if (family == "normal") "normal" else "mixture of normals"),
              "input")
  }
  if (family == "mixture") {
    check_number(inflate, "inflate", min = 0, exclusive_min = TRUE)
    return(own_arguments(ref_mixture_fit(x, components, inflate, call = sys.call())))
  }
  if (family == "normal") {
    check_number(inflate, "inflate", min = 0, exclusive_min = TRUE)
    singular <- singular_columns(stats::cov(x), vars)
    if (length(singular)) {
      nce_abort(sprintf(paste("`data` columns %s are (nearly) collinear (smallest eigenvalue of their correlation",
                              "matrix below %g): a normal reference fitted to them would be singular, with no",
                              "density off their line or plane. ref_fit() does not regularise it: drop one of them",
                              "from `vars`, or use family = \"uniform\""), paste(singular, collapse = ", "),
                      singular_tol), "data")
    }
    own_arguments(ref_normal_build(stats::setNames(colMeans(x), vars), inflate * stats::cov(x), call = sys.call()))
  } else {
    rng <- apply(x, 2L, range)
    w <- rng[2L, ] - rng[1L, ]
    w[w == 0] <- 1
    args <- lapply(seq_along(vars), function(j) c(rng[1L, j] - expand * w[j], rng[2L, j] + expand * w[j]))
    do.call(ref_uniform, stats::setNames(args, vars))
  }
}

# ref_fit()'s errors from the builders it shares with ref_normal() and the engine name their
# arguments (`cov`, `x`), which ref_fit() does not have: both are made from `data`, so say that.
own_arguments <- function(expr) {
  tryCatch(expr, nce_error = function(e) {
    e$message <- sub("`cov`", "the covariance of the `data` columns", conditionMessage(e), fixed = TRUE)
    e$message <- sub("`x`", "the `data` columns", conditionMessage(e), fixed = TRUE)
    stop(e)
  })
}

# A mixture of normals fitted by EM (Rust) for each number of `components`, the lowest BIC kept.
ref_mixture_fit <- function(x, components, inflate, call) {
  if (!is.numeric(components) || !length(components) || anyNA(components) || any(components != round(components)) ||
      any(components < 1 | components > 100)) {
    nce_abort(sprintf("`components` must be whole numbers from 1 to 100, not %s.", describe_value(components)),
              "input", call = call)
  }
  n <- nrow(x)
  d <- ncol(x)
  components <- sort(unique(as.integer(components)))
  # The rows, and 64 chunks' statistics (a weight, a mean and a covariance per component).
  check_size(8 * (2 * n * d + 64 * max(components) * (1 + d + d * (d + 1) / 2)), "components", "ref_fit()",
             call = call)
  tried <- components[n >= components * (d + 1)]
  if (!length(tried)) tried <- min(components)  # the engine says why it is too many
  check_mixture_work(n, d, tried, call)
  f <- mixture_fits(x, tried, call)
  if (!f$converged[f$chosen]) {
    nce_warn(sprintf("EM did not converge in %d iterations for %d components", f$iterations[f$chosen],
                     f$components[f$chosen]), "convergence", call = call)
  }
  g <- f$components[f$chosen]
  ref <- new_reference("mixture", colnames(x), weights = f$weights,
                       means = matrix(f$means, d, g, dimnames = list(colnames(x), NULL)),
                       sigmas = array(inflate * f$sigmas, c(d, d, g)),
                       selection = data.frame(components = f$components, loglik = f$loglik, df = f$df, bic = f$bic,
                                              iterations = f$iterations, chosen = seq_along(f$bic) == f$chosen))
  rs(nce_ref_log_density(ref_spec(ref), matrix(f$means[seq_len(d)], 1L), 1L), call = call)
  ref
}

# EM's worst case (3 starts of 20 iterations, then up to 1000 more), in row x component x
# covariance-entry updates, against a bound like the chains' and the networks' (about 40 minutes
# here): beyond it the numbers of components are refused, not run for hours.
max_mixture_work <- 1e12
check_mixture_work <- function(n, d, tried, call) {
  work <- as.double(n) * sum(tried) * d * (d + 1) * (3 * 20 + 1000)
  if (work > max_mixture_work) {
    nce_abort(sprintf(paste("fitting mixtures of %s components to %d rows of %d variables could take %.3g EM",
                            "updates, beyond the bound of %.0e: try fewer or smaller numbers of `components`"),
                      format_components(tried), n, d, work, max_mixture_work), "size", call = call)
  }
}

format_components <- function(g) {
  if (length(g) > 1L && all(diff(g) == 1L)) paste0(g[1L], "-", g[length(g)]) else paste(g, collapse = ", ")
}

# One engine call per number of components (each from the same seed, so the fits are those of
# one call over all of them), with progress between them; the lowest BIC is kept.
mixture_fits <- function(x, tried, call) {
  seed <- draw_seed()
  threads <- nce_threads()
  fits <- with_simulation_progress(length(tried), function(p) {
    lapply(tried, function(g) {
      f <- rs(nce_mixture_fit(x, list(components = as.double(g), n_starts = 3, max_iter = 1000, tol = 1e-6,
                                       seed = seed, threads = threads)), call = call)
      if (!is.null(p)) p(sprintf("mixture of %d components", g))
      f
    })
  })
  pick <- function(field) vapply(fits, function(f) as.double(f[[field]]), 1)
  chosen <- which.min(pick("bic"))
  best <- fits[[chosen]]
  list(components = as.integer(pick("components")), df = pick("df"), loglik = pick("loglik"), bic = pick("bic"),
       iterations = as.integer(pick("iterations")), converged = vapply(fits, function(f) f$converged, TRUE),
       chosen = chosen, weights = best$weights, means = best$means, sigmas = best$sigmas)
}

# A covariance is singular when the smallest eigenvalue of its correlation matrix is below this:
# the rounding of a covariance of exactly collinear columns leaves ~1e-16.
singular_tol <- 1e-10

# The columns in the null direction of a (nearly) singular covariance `v`, or none.
singular_columns <- function(v, vars) {
  sds <- sqrt(pmax(diag(v), 0))
  if (length(sds) < 2L || any(sds == 0) || !isSymmetric(unname(v))) return(character())
  e <- eigen(v / outer(sds, sds), symmetric = TRUE)
  k <- length(e$values)
  # (An indefinite matrix is left to the positive-definiteness check in Rust.)
  if (abs(e$values[k]) >= singular_tol) return(character())
  u <- e$vectors[, k]
  vars[abs(u) > 1e-3 * max(abs(u))]
}

#' Reference given by user functions
#'
#' @param sample Function of `n` returning `n` draws: a data frame (or matrix)
#'   with the columns `vars`.
#' @param log_density Function of a data frame of points returning log q at
#'   each row (finite on the support, `-Inf` outside).
#' @param vars Names of the columns the reference generates.
#' @return A reference distribution (class `nce_reference`) for [nce()].
#' @section What it refuses:
#' * `sample` or `log_density` not a function, or `vars` not a non-empty character vector
#'   without NA or "" (`nce_error_input`). What the functions return is checked when [nce()]
#'   calls them; an error inside either is raised as `nce_error_model`, quoting its message.
#' @examples
#' # An exponential reference on [0, Inf)
#' r <- ref_custom(function(n) data.frame(y = rexp(n)),
#'                 function(d) dexp(d$y, log = TRUE), vars = "y")
#' @export
ref_custom <- function(sample, log_density, vars) {
  check_function(sample, "sample")
  check_function(log_density, "log_density")
  if (!is.character(vars) || length(vars) == 0L || anyNA(vars) || any(vars == "")) {
    nce_abort(sprintf("`vars` must name the columns the reference generates, not %s.", describe_value(vars)), "input")
  }
  structure(list(kind = "custom", vars = vars, sample = sample, log_density = log_density),
            class = c("nce_ref_custom", "nce_reference"))
}

#' @export
print.nce_reference <- function(x, ...) {
  desc <- switch(x$kind,
    uniform = paste(sprintf("%s in [%g, %g]", x$vars, x$lower, x$upper), collapse = ", "),
    normal = sprintf("mean (%s), %d x %d covariance", paste(format(x$mean, digits = 4), collapse = ", "),
                     length(x$vars), length(x$vars)),
    mixture = sprintf("%d normal components (weights %s), chosen by BIC", length(x$weights),
                      paste(format(x$weights, digits = 3), collapse = ", ")),
    custom = "user-supplied sampler and log density")
  cat(sprintf("<nce reference: %s over %s>\n  %s\n", x$kind, paste(x$vars, collapse = ", "), desc))
  invisible(x)
}

ref_spec <- function(ref) ref[setdiff(names(ref), "vars")]

# n draws as a data frame with the reference's columns.
ref_draw <- function(ref, n) UseMethod("ref_draw")

#' @export
ref_draw.nce_ref_builtin <- function(ref, n) builtin_draws(ref, n, FALSE)$draws

#' @export
ref_draw.nce_ref_custom <- function(ref, n) {
  x <- call_user(ref$sample, n, arg = "reference", at = "its `sample(n)`", call = NULL)
  if (is.matrix(x)) x <- as.data.frame(x)
  if (!is.data.frame(x)) nce_abort("the reference's `sample(n)` must return a data frame or matrix", "reference")
  missing <- setdiff(ref$vars, names(x))
  if (length(missing)) {
    nce_abort(sprintf("the reference's `sample(n)` did not return column(s) %s", paste(missing, collapse = ", ")),
              "reference")
  }
  if (nrow(x) != n) {
    nce_abort(sprintf("the reference's `sample(n)` returned %d rows for n = %d", nrow(x), n), "reference")
  }
  x <- x[ref$vars]
  bad <- which(!rows_finite(x))
  if (length(bad)) {
    nce_abort(sprintf("the reference's `sample(n)` returned NA or non-finite values in %d row(s): %s",
                      length(bad), format_positions(bad)), "reference")
  }
  x
}

# n draws (`draws`, a data frame) with log q at them (`logq`), as ref_draw() then ref_logq():
# the same RNG calls and values. Built-in references do both in one Rust pass and hand over
# plain columns, so R holds the draws once (the contrast step of a pooled fit draws millions).
ref_draw_logq <- function(ref, n) UseMethod("ref_draw_logq")

#' @export
ref_draw_logq.default <- function(ref, n) {
  u <- ref_draw(ref, n)
  list(draws = u, logq = ref_logq(ref, u))
}

#' @export
ref_draw_logq.nce_ref_builtin <- function(ref, n) builtin_draws(ref, n, TRUE)

# A built-in reference's n draws as a data frame of the columns Rust hands over (`draws`), with
# their log density from the same pass when `logq` (else NULL).
builtin_draws <- function(ref, n, logq) {
  r <- rs(nce_ref_sample(ref_spec(ref), as.double(n), draw_seed(), logq, nce_threads()))
  u <- r$columns
  attributes(u) <- list(names = ref$vars, class = "data.frame", row.names = .set_row_names(as.integer(n)))
  list(draws = u, logq = r$log_density)
}

# log q at the rows of a data frame holding the reference's columns.
ref_logq <- function(ref, data) UseMethod("ref_logq")

#' @export
ref_logq.nce_ref_builtin <- function(ref, data) {
  x <- as.matrix(data[ref$vars])
  storage.mode(x) <- "double"
  rs(nce_ref_log_density(ref_spec(ref), x, nce_threads()))
}

#' @export
ref_logq.nce_ref_custom <- function(ref, data) {
  lq <- call_user(ref$log_density, data[ref$vars], arg = "reference", at = "its `log_density()`", call = NULL)
  if (!is.numeric(lq) || length(lq) != nrow(data)) {
    nce_abort(sprintf("the reference's `log_density()` must return %d numbers, one per row; it returned %d",
                      nrow(data), length(lq)), "reference")
  }
  bad <- which(is.na(lq) | lq == Inf)
  if (length(bad)) {
    nce_abort(sprintf("the reference's `log_density()` returned NA, NaN or +Inf at %d row(s): %s",
                      length(bad), format_positions(bad)), "reference")
  }
  as.double(lq)
}

# log(mean(exp(l))) without overflow: the importance-sampling estimate of a log normaliser from
# log weights `l`.
log_mean_exp <- function(l) {
  mx <- max(l)
  mx + log(mean(exp(l - mx)))
}

# TRUE for rows whose numeric columns are finite and other columns not NA.
rows_finite <- function(df) {
  ok <- rep(TRUE, nrow(df))
  for (v in df) ok <- ok & if (is.numeric(v)) is.finite(v) else !is.na(v)
  ok
}
