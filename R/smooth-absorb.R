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
  if (identical(object$xt$bs, "ncetp")) {
    class(inner) <- "tp.smooth.spec"
    sm <- tp_construct(inner, data, knots, absorb = TRUE)
    if (!is.null(sm)) return(sm)
  } else {
    class(inner) <- paste0(object$xt$bs, ".smooth.spec")
  }
  absorb_sum_to_zero(mgcv::smooth.construct(inner, data, knots))
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
