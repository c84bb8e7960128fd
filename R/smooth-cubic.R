# Cubic regression splines (`bs = "cr"`) and their cyclic version (`bs = "cc"`) with the rows'
# basis computed in Rust: mgcv's constructor builds the smooth object from its knots (so
# PredictMat() and predict.gam() use mgcv's own code on it), and the model matrix on the data
# rows is written once into one R matrix (mgcv's C routine for `cr` and R code for `cc` make two
# to six temporary copies of it, which on millions of rows dominate the set-up's memory).

# The `nk` knots of a cubic (`cyclic = FALSE`) or cyclic cubic spline of `x` as mgcv's
# constructors choose them: the supplied `k`, else the type-7 quantiles of the distinct values
# (cr) or place.knots() (cc, also when `k` gives only the two ends), from one Rust sort. NULL
# where mgcv's own constructor must decide: fewer than `nk` distinct values (cr), knots it
# would refuse, rows beyond the cyclic range. Shared by the constructors below and by the
# Rust-held rows of spline_con_rust().
cubic_knots <- function(x, nk, k, cyclic) {
  if (cyclic) {
    if (is.null(k) || length(k) == 2L) {
      k <- rs(nce_spline_knots(if (is.null(k)) x else c(as.double(k), x), rep(0, nk), TRUE))$knots
    }
    if (length(k) != nk || min(x) < min(k) || max(x) > max(k)) return(NULL)
    return(as.numeric(k))
  }
  kn <- rs(nce_spline_knots(x, seq(0, 1, length = nk), FALSE))
  if (kn$n_unique < nk) return(NULL)
  if (is.null(k)) k <- kn$knots
  if (length(k) != nk || anyDuplicated(k) > 0L || is.unsorted(k)) return(NULL)
  as.numeric(k)
}

#' mgcv's cubic regression spline (`bs = "cr"`), basis computed in Rust
#'
#' The constructor behind `s(..., bs = "cr")` in the package's fits: the knots are mgcv's (the
#' ones supplied, or the quantiles of the distinct covariate values),
#' [mgcv::smooth.construct.cr.smooth.spec()] builds the `"cr.smooth"` object (penalty, `F`) on
#' the knots alone, and the model matrix on the data rows comes from mgcv's `crspl` computed in
#' Rust, the same operations in the same order (linear beyond the knots). Shrinkage (`"cs"`)
#' and terms mgcv would refuse go to mgcv. Internal.
#' @param object,data,knots As for [mgcv::smooth.construct()].
#' @return A `"cr.smooth"` object, as mgcv's constructor returns.
#' @keywords internal
#' @exportS3Method mgcv::smooth.construct
smooth.construct.ncecr.smooth.spec <- function(object, data, knots) {  # nolint: object_name_linter.
  class(object) <- "cr.smooth.spec"
  x <- data[[object$term]]
  nk <- if (object$bs.dim < 0) 10L else object$bs.dim
  if (length(object$term) != 1L || !is.null(attr(object, "shrink")) || nk < 3L || !is.numeric(x) || anyNA(x) ||
      length(x) < 1L) {
    return(mgcv::smooth.construct(object, data, knots))
  }
  k <- cubic_knots(as.double(x), nk, knots[[object$term]], FALSE)
  if (is.null(k)) return(mgcv::smooth.construct(object, data, knots))
  knots <- as.list(knots)
  knots[[object$term]] <- k
  # Knots given in full: mgcv's constructor uses the data only for the basis on the rows, and
  # the knots themselves are enough distinct values for its check.
  on_knots <- list(k)
  names(on_knots) <- object$term
  sm <- mgcv::smooth.construct(object, on_knots, knots)
  sm$X <- rs(nce_cr_basis(as.double(x), as.double(sm$xp), as.double(sm$F), nce_threads()))
  sm
}

#' mgcv's cyclic cubic regression spline (`bs = "cc"`), basis computed faster
#'
#' The constructor behind `s(..., bs = "cc")` in the package's fits: mgcv's own
#' [mgcv::smooth.construct.cc.smooth.spec()] sets up knots, penalty and the
#' `"cyclic.smooth"` object (prediction is mgcv's), and the model matrix on the
#' data comes from the same formula evaluated in Rust, written once into the
#' result (mgcv's `pred.mat()` dominates the set-up on ~40,000 rows, and its
#' intermediate matrices the set-up's memory on millions). Internal.
#' @param object,data,knots As for [mgcv::smooth.construct()].
#' @return A `"cyclic.smooth"` object, as mgcv's constructor returns, of subclass
#'   `"ncecyclic.smooth"` (its rows predicted in Rust: [Predict.matrix.ncecyclic.smooth()]).
#' @keywords internal
#' @exportS3Method mgcv::smooth.construct
smooth.construct.ncecc.smooth.spec <- function(object, data, knots) {  # nolint: object_name_linter.
  class(object) <- "cc.smooth.spec"
  x <- data[[object$term]]
  nk <- if (object$bs.dim < 0) 10L else object$bs.dim
  if (length(object$term) != 1L || nk < 4L || !is.numeric(x) || anyNA(x) || length(x) < 1L) {
    return(mgcv::smooth.construct(object, data, knots))
  }
  k <- cubic_knots(as.double(x), nk, knots[[object$term]], TRUE)
  if (is.null(k)) return(mgcv::smooth.construct(object, data, knots))
  knots <- as.list(knots)
  knots[[object$term]] <- k
  # Knots given in full: mgcv's constructor uses the data only for the basis on the rows.
  few <- lapply(data, function(v) v[seq_len(min(length(v), 2L))])
  sm <- mgcv::smooth.construct(object, few, knots)
  sm$X <- rs(nce_cc_basis(as.double(x), as.double(sm$xp), sm$BD, nce_threads()))
  class(sm) <- c("ncecyclic.smooth", class(sm))
  sm
}

#' Rows of the package's cyclic cubic splines, evaluated in Rust
#'
#' The [mgcv::Predict.matrix()] method of the cyclic smooths the package sets up
#' ([smooth.construct.ncecc.smooth.spec()]): the rows within the knots' range come from the
#' Rust code that built the fit's basis (the same values), others (missing values, rows beyond
#' the knots) from mgcv's `Predict.matrix.cyclic.smooth()`. On 2.3 million rows 0.11 s against
#' mgcv's 1.4 s. Internal.
#'
#' @param object A smooth from [smooth.construct.ncecc.smooth.spec()].
#' @param data A data frame or list with the smooth's covariate.
#' @return The basis at the rows of `data` (one row each).
#' @keywords internal
#' @exportS3Method mgcv::Predict.matrix
Predict.matrix.ncecyclic.smooth <- function(object, data) {  # nolint: object_name_linter.
  x <- data[[object$term]]
  xp <- object$xp
  if (is.numeric(x) && length(x) > 0L && !anyNA(x) && min(x) >= xp[1L] && max(x) <= xp[length(xp)]) {
    return(rs(nce_cc_basis(as.double(x), as.double(xp), object$BD, nce_threads())))
  }
  NextMethod()
}
