# The sum-to-zero constraint of a smooth absorbed in Rust during gam()'s set-up. mgcv's
# smoothCon(absorb.cons = TRUE) absorbs it by qr.qty() on the transposed basis; on 42,000 rows
# that takes 10 ms for a 10-column cr smooth and 50 ms for a 30-column thin-plate one, longer
# than building the basis in Rust. gam_setup() routes plain s() terms through the "nceabs"
# constructor, which builds the term with its own constructor, scales the penalty and absorbs
# the constraint exactly as smoothCon() would, and hands smoothCon() a term without a constraint
# left to absorb; restore_absorbed() then gives the term the "qrc" and "nCons" attributes and
# penalty scale smoothCon() would have set, so the set-up equals mgcv's to rounding and
# PredictMat() absorbs the constraint in predictions as usual.

#' mgcv's smooths with their constraint absorbed faster
#'
#' The constructor behind plain `s()` terms (thin-plate, cubic regression, cyclic and P-spline
#' bases, without `by`, `id` or `pc`) in the package's fits of smooth models. The term is built
#' by its own constructor (mgcv's, or this package's for thin-plate terms of two or more
#' covariates and cyclic splines), then its penalty is scaled and its sum-to-zero constraint
#' absorbed as [mgcv::smoothCon()] does with `absorb.cons = TRUE`, the constraint by one rank-one
#' update per row in Rust where mgcv applies `qr.qty()` to the transposed basis. The fit's smooth
#' objects are mgcv's own (same class, `"qrc"` and `"nCons"`), so [mgcv::PredictMat()] applies
#' the constraint in predictions. Internal.
#'
#' @param object,data,knots As for [mgcv::smooth.construct()]; `object$xt` holds the term's
#'   basis (`bs`) and its own `xt`.
#' @return The smooth object of the term's basis, constraint absorbed.
#' @keywords internal
#' @exportS3Method mgcv::smooth.construct
smooth.construct.nceabs.smooth.spec <- function(object, data, knots) {  # nolint: object_name_linter.
  inner <- object
  inner["xt"] <- list(object$xt$xt)
  sm <- NULL
  if (identical(object$xt$bs, "ncetp")) {
    class(inner) <- "tp.smooth.spec"
    sm <- tp_construct(inner, data, knots, absorb = TRUE)
  } else {
    class(inner) <- paste0(object$xt$bs, ".smooth.spec")
  }
  if (is.null(sm)) sm <- absorb_sum_to_zero(mgcv::smooth.construct(inner, data, knots))
  # gam_setup() applies mgcv's side constraints itself on a subsample of the rows (deferred_side_constraints()).
  if (isTRUE(object$xt$defer_side) && !identical(sm$side.constrain, FALSE)) {
    sm$side.constrain <- FALSE
    sm$nce_defer_side <- TRUE
  }
  sm
}

# smoothCon(absorb.cons = TRUE)'s penalty scaling (by norm(X, "I")^2, of the basis before the
# constraint) and sum-to-zero constraint (C = colMeans(X), Z from qr(t(C))) applied to `sm`,
# whose basis on the rows is `x` with columns divided by stats$scale (nce_basis_stats()). The
# term then carries a 0-row C (smoothCon() absorbs nothing), no.rescale (it scales nothing), and
# in `nce_absorbed` what restore_absorbed() sets after smoothCon(). Terms whose constraint is not
# the plain one are returned as built, for smoothCon() to handle.
absorb_sum_to_zero <- function(sm, x = sm$X, stats = NULL) {
  threads <- nce_threads(call = NULL)
  k <- NCOL(x)
  plain <- is.null(sm$C) && is.null(sm$Cp) && is.null(sm$g.index) && is.null(sm$ind) && is.null(sm$by.done) &&
    is.null(attr(x, "offset")) && is.matrix(x) && is.double(x) && k >= 2L && nrow(x) >= 1L
  if (plain && is.null(stats)) {
    stats <- nce_basis_stats(x, FALSE)
    if (inherits(stats, "nce_rust_error")) plain <- FALSE
  }
  # A zero column mean: smoothCon() absorbs such constraints on the other columns only.
  if (!plain || any(stats$means == 0)) {
    if (!is.null(stats) && !all(stats$scale == 1)) sm$X <- rs(nce_scale_absorb(x, stats$scale, NULL, threads))
    return(sm)
  }
  qrc <- qr(t(matrix(stats$means, 1L)))
  s_scale <- rep(1, length(sm$S))
  if (length(sm$S) && is.null(sm$no.rescale)) {
    ma_xx <- stats$max_row_sum^2
    for (i in seq_along(sm$S)) {
      ma_s <- norm(sm$S[[i]]) / ma_xx
      sm$S[[i]] <- sm$S[[i]] / ma_s
      s_scale[i] <- ma_s
    }
  }
  for (i in seq_along(sm$S)) {
    zsz <- qr.qty(qrc, sm$S[[i]])[2:k, , drop = FALSE]
    sm$S[[i]] <- t(qr.qty(qrc, t(zsz))[2:k, , drop = FALSE])
  }
  sm$X <- rs(nce_scale_absorb(x, stats$scale, c(qrc$qraux[1L], qrc$qr[-1L, 1L]), threads))
  sm$nce_absorbed <- list(qrc = qrc, S.scale = s_scale, no.rescale = sm$no.rescale)
  sm$no.rescale <- TRUE
  sm$C <- matrix(0, 0L, k - 1L)
  sm$df <- (if (is.null(sm$df)) sm$bs.dim else sm$df) - 1L
  sm$rank <- pmin(sm$rank, k - 1L)
  sm$null.space.dim <- max(0, sm$null.space.dim - 1L)
  sm
}

# After gam(fit = FALSE): the terms built by absorb_sum_to_zero() get what smoothCon() sets when
# it absorbs the constraint itself.
restore_absorbed <- function(setup) {
  for (i in seq_along(setup$smooth)) {
    sm <- setup$smooth[[i]]
    a <- sm$nce_absorbed
    if (is.null(a)) next
    attr(sm, "qrc") <- a$qrc
    attr(sm, "nCons") <- 1L  # nolint: object_name_linter.
    sm$C <- NULL
    sm$nce_absorbed <- NULL
    sm$no.rescale <- a$no.rescale
    # gam.side() drops the scale of a penalty it removes: the scales are restored when none was.
    if (length(sm$S.scale) == length(a$S.scale)) sm$S.scale <- a$S.scale
    setup$smooth[[i]] <- sm
  }
  setup
}

# Rows from which gam_setup() finds mgcv's side constraints on a subsample (side_rows of them).
side_rows_min <- 10000L
side_rows <- 5000L

# mgcv's side constraints (gam.side()) for a set-up whose smooths were built with them deferred
# (by the "nceabs" constructor): gam.side() itself, on side_rows evenly spaced rows of each term's
# columns, then its deletions applied to the design, the penalties and the parameter bookkeeping
# as gam.setup() lays them out. The columns it deletes (the linear part of s(u, v) beside s(u) and
# s(v)) repeat nested terms exactly, on these rows as on all. NULL where a deletion would remove a
# whole penalty, or the set-up has parts laid out by penalty (paraPen, linked or fixed smoothing
# parameters): gam_setup() then lets mgcv set it up.
deferred_side_constraints <- function(setup) {
  sm <- setup$smooth
  deferred <- vapply(sm, function(s) isTRUE(s$nce_defer_side), TRUE)
  if (!any(deferred)) return(setup)
  for (i in which(deferred)) {
    sm[[i]]$side.constrain <- TRUE
    sm[[i]]$nce_defer_side <- NULL
  }
  n <- nrow(setup$X)
  sub <- unique(round(seq(1, n, length.out = min(n, max(side_rows, 4L * ncol(setup$X))))))
  xs <- setup$X[sub, , drop = FALSE]
  for (i in seq_along(sm)) sm[[i]]$X <- xs[, sm[[i]]$first.para:sm[[i]]$last.para, drop = FALSE]
  # Its one warning (repeated one-covariate smooths) was given by gam()'s own call already.
  sc <- suppressWarnings(mgcv::gam.side(sm, xs[, seq_len(setup$nsdf), drop = FALSE], tol = .Machine$double.eps^0.5))
  dels <- lapply(sc, attr, "del.index")
  for (i in seq_along(sm)) sm[[i]]$X <- NULL
  if (all(vapply(dels, is.null, TRUE))) {
    setup$smooth <- sm
    return(setup)
  }
  if (any(lengths(lapply(sc, `[[`, "S")) != lengths(lapply(sm, `[[`, "S"))) || !is.null(setup$pP) ||
      !is.null(setup$L) || !is.null(setup$H) || !is.null(setup$P) || !is.null(setup$g.index)) {
    return(NULL)
  }
  drop <- unlist(lapply(seq_along(sm), function(i) if (!is.null(dels[[i]])) sm[[i]]$first.para - 1L + dels[[i]]))
  keep <- setdiff(seq_len(ncol(setup$X)), drop)  # positive indices: a third of the time of X[, -drop]
  setup$X <- setup$X[, keep, drop = FALSE]
  setup$cmX <- setup$cmX[keep]
  p <- setup$nsdf
  names_out <- setup$term.names[seq_len(p)]
  setup$S <- list()
  setup$off <- setup$rank <- numeric(0)
  setup$min.edf <- setup$nsdf
  for (i in seq_along(sc)) {
    s <- sc[[i]]
    s$X <- NULL
    s$vn <- NULL
    k <- s$last.para - s$first.para + 1L - length(dels[[i]])
    s$first.para <- p + 1
    s$last.para <- p + k
    for (j in seq_along(s$S)) {
      setup$S[[length(setup$S) + 1L]] <- s$S[[j]]
      setup$off <- c(setup$off, p + 1)
      setup$rank <- c(setup$rank, s$rank[j])
    }
    setup$min.edf <- setup$min.edf + s$null.space.dim
    names_out <- c(names_out, paste0(s$label, ".", seq_len(k)))
    p <- p + k
    sc[[i]] <- s
  }
  setup$term.names <- names_out
  setup$smooth <- sc
  setup
}
