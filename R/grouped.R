# Penalised fits on grouped designs [A | B[group, ]]: row-level terms (A) and terms that
# depend only on a row's group (B, one row per group; in sequential NCE the spline
# intercept of a transition, shared by its data and reference rows). Terms are set up with
# mgcv's own constructors (smoothCon, PredictMat), without gam(), so set-up stays cheap.

# Model matrix and penalties of a formula's terms on `data`.
setup_terms <- function(formula, data, knots = NULL, intercept = TRUE) {
  gp <- mgcv::interpret.gam(formula)
  pt <- stats::terms(gp$pf)
  pmf <- stats::model.frame(pt, data, na.action = stats::na.fail)
  # Factors are coded with the formula's intercept (treatment contrasts) even when the block
  # drops it: without `intercept` the constant lives in another block, and a full set of
  # dummies would be aliased with it.
  xp <- stats::model.matrix(pt, pmf)
  if (!intercept) xp <- xp[, colnames(xp) != "(Intercept)", drop = FALSE]
  blocks <- list(xp)
  names_out <- colnames(xp)
  smooth <- list()
  penalties <- list()
  p <- ncol(xp)
  for (spec in gp$smooth.spec) {
    sms <- tryCatch(smooth_con(spec, data, knots),
      error = function(e) {
        nce_abort(sprintf(paste("cannot set up the smooth term %s: %s (for discrete or few distinct values use a",
                                "smaller `k`, or parametric or factor terms)"),
                          spec$label, conditionMessage(e)), "input", call = NULL)
      })
    for (sm in sms) {
      k <- ncol(sm$X)
      sm$first.para <- p + 1L
      sm$last.para <- p + k
      for (S in sm$S) penalties[[length(penalties) + 1L]] <- list(start = p, S = S, label = sm$label)
      blocks[[length(blocks) + 1L]] <- sm$X
      names_out <- c(names_out, paste0(sm$label, ".", seq_len(k)))
      sm$X <- NULL
      smooth[[length(smooth) + 1L]] <- sm
      p <- p + k
    }
  }
  x <- do.call(cbind, blocks)
  storage.mode(x) <- "double"
  colnames(x) <- names_out
  list(X = x, penalties = penalties, smooth = smooth, pterms = pt,
       xlevels = stats::.getXlevels(pt, pmf), contrasts = attr(xp, "contrasts"))
}

# mgcv::smoothCon(absorb.cons = TRUE) with the usual sum-to-zero constraint absorbed here by
# one product with the constraint's null-space basis Z: mgcv absorbs it by qr.qty() on the
# transposed basis, which on ~40,000 rows costs more than building the basis. The result is
# the object mgcv would give (same "qrc" and "nCons", so PredictMat() applies the same Z);
# other constraint types are left to mgcv.
smooth_con <- function(spec, data, knots) {
  # Cyclic cubic splines: the same smooth, with the basis on the rows computed by cc_basis().
  if (identical(class(spec), "cc.smooth.spec") && identical(spec$by, "NA")) class(spec) <- "ncecc.smooth.spec"
  # Thin-plate splines: the same smooth, eigen-decomposition and rows' basis in Rust (tp_construct()).
  # (Two or more covariates: see nce_basis_formula() for why one-covariate terms stay with mgcv.)
  if (identical(class(spec), "tp.smooth.spec") && identical(spec$by, "NA") && spec$dim >= 2L) {
    class(spec) <- "ncetp.smooth.spec"
  }
  sms <- mgcv::smoothCon(spec, data = data, knots = knots, absorb.cons = FALSE,
                         scale.penalty = TRUE, null.space.penalty = FALSE)
  plain <- function(sm) {
    is.null(sm$Cp) && is.null(sm$g.index) && is.matrix(sm$C) &&
      (nrow(sm$C) == 0L || (ncol(sm$C) == ncol(sm$X) && all(colSums(sm$C) != 0))) && is.null(attr(sm$X, "offset"))
  }
  if (!all(vapply(sms, plain, TRUE))) {
    return(mgcv::smoothCon(spec, data = data, knots = knots, absorb.cons = TRUE,
                           scale.penalty = TRUE, null.space.penalty = FALSE))
  }
  lapply(sms, function(sm) {
    j <- nrow(sm$C)
    if (j == 0L) {
      attr(sm, "qrc") <- "no constraints"
      attr(sm, "nCons") <- 0  # nolint: object_name_linter.
      return(sm)
    }
    k <- ncol(sm$X)
    qrc <- qr(t(sm$C))
    z <- qr.qy(qrc, diag(k))[, (j + 1L):k, drop = FALSE]
    sm$X <- sm$X %*% z
    sm$S <- lapply(sm$S, function(s_j) crossprod(z, s_j %*% z))
    attr(sm, "qrc") <- qrc
    attr(sm, "nCons") <- j  # nolint: object_name_linter.
    sm$C <- NULL
    sm$rank <- pmin(sm$rank, k - j)
    sm$df <- sm$df - j
    sm$null.space.dim <- max(0, sm$null.space.dim - j)
    sm
  })
}

# Fit by REML on [A | B[group, ]]. `rows` and `groups` are data frames; `group` maps each row
# (1-based) to its row of `groups`. `cluster` (one entry per group) requests the clustered
# sandwich. A carries the intercept.
fit_grouped <- function(row_formula, rows, group_formula, groups, group, y, offset,
                        family = "binomial", cluster = NULL, knots = NULL, sp = NULL,
                        control = nce_control()) {
  a <- setup_terms(row_formula, rows, knots, intercept = TRUE)
  b <- setup_terms(group_formula, groups, knots, intercept = FALSE)
  pa <- ncol(a$X)
  at <- function(pen, shift) list(start = as.double(pen$start + shift), S = pen$S)
  penalties <- c(lapply(a$penalties, at, 0), lapply(b$penalties, at, pa))
  m <- length(penalties)
  if (!is.null(sp) && (!is.numeric(sp) || length(sp) != m || any(!(sp > 0)))) {
    nce_abort(sprintf("`sp` must be %d positive numbers, one per penalty", m), "input")
  }
  res <- rs(nce_fit_reml_grouped(a$X, b$X, as.integer(group), as.double(y), rep(1, length(y)),
                                 as.double(offset), family,
                                 if (is.null(cluster)) NULL else as.integer(cluster), penalties,
                                 if (is.null(sp)) NULL else as.double(sp), control, nce_threads()))
  cn <- c(colnames(a$X), colnames(b$X))
  for (i in seq_along(b$smooth)) {
    b$smooth[[i]]$first.para <- b$smooth[[i]]$first.para + pa
    b$smooth[[i]]$last.para <- b$smooth[[i]]$last.para + pa
  }
  labels <- vapply(c(a$penalties, b$penalties), `[[`, "", "label")
  # Keep the set-ups for prediction, not their (large) model matrices.
  a$ncol <- pa
  a$intercept <- TRUE
  b$ncol <- ncol(b$X)
  a$X <- b$X <- NULL
  named <- function(v) {
    dimnames(v) <- list(cn, cn)
    v
  }
  list(coefficients = stats::setNames(res$coefficients, cn), sp = stats::setNames(res$sp, labels),
       edf = stats::setNames(res$edf, cn), Vp = named(res$vp), Ve = named(res$ve),
       Vs = if (is.null(res$cov_sandwich)) NULL else named(res$cov_sandwich),
       reml = res$reml, linear.predictors = res$eta, fitted.values = res$fitted,
       loglik = res$loglik, deviance = res$deviance, converged = res$converged,
       message = res$message, outer_iterations = res$outer_iterations,
       iter = res$inner_iterations, n_certain = res$n_certain, aliased = res$aliased,
       at_bound = res$at_bound, smooth = c(a$smooth, b$smooth), row_setup = a, group_setup = b)
}

#' mgcv's cyclic cubic regression spline (`bs = "cc"`), basis computed faster
#'
#' The constructor behind `s(..., bs = "cc")` in the package's fits: mgcv's own
#' [mgcv::smooth.construct.cc.smooth.spec()] sets up knots, penalty and the
#' `"cyclic.smooth"` object (prediction is mgcv's), and the model matrix on the
#' data comes from the same formula evaluated with two row gathers instead of
#' six (mgcv's `pred.mat()` dominates the set-up on ~40,000 rows). Internal.
#' @param object,data,knots As for [mgcv::smooth.construct()].
#' @return A `"cyclic.smooth"` object, as mgcv's constructor returns.
#' @keywords internal
#' @exportS3Method mgcv::smooth.construct
smooth.construct.ncecc.smooth.spec <- function(object, data, knots) {  # nolint: object_name_linter.
  class(object) <- "cc.smooth.spec"
  x <- data[[object$term]]
  nk <- if (object$bs.dim < 0) 10L else object$bs.dim
  k <- knots[[object$term]]
  if (is.null(k)) k <- mgcv::place.knots(x, nk) else if (length(k) == 2L) k <- mgcv::place.knots(c(k, x), nk)
  if (length(object$term) != 1L || nk < 4L || length(k) != nk || !is.numeric(x) || anyNA(x) || length(x) < 1L ||
      min(x) < min(k) || max(x) > max(k)) {
    return(mgcv::smooth.construct(object, data, knots))
  }
  knots[[object$term]] <- k
  # Knots given in full: mgcv's constructor uses the data only for the basis on the rows.
  few <- lapply(data, function(v) v[seq_len(min(length(v), 2L))])
  sm <- mgcv::smooth.construct(object, few, knots)
  sm$X <- cc_basis(x, sm$xp, sm$BD)
  sm
}

# mgcv's pred.mat() of Predict.matrix.cyclic.smooth for x within the knots' range: row i is
# BD[j1, ] a_i + BD[j, ] b_i + e_j1' c_i + e_j' d_i with j the knot interval of x_i.
cc_basis <- function(x, knots, bd) {
  x <- as.numeric(x)
  knots <- as.numeric(knots)
  n <- length(knots)
  h <- knots[-1L] - knots[-n]
  j <- pmax(findInterval(x, knots, left.open = TRUE) + 1L, 2L)
  j1 <- j - 1L
  j[j == n] <- 1L
  hj <- h[j1]
  up <- knots[j1 + 1L] - x
  lo <- x - knots[j1]
  basis <- bd[j1, , drop = FALSE] * (up^3 / (6 * hj) - hj * up / 6) +
    bd[j, , drop = FALSE] * (lo^3 / (6 * hj) - hj * lo / 6)
  i <- seq_along(x)
  basis[cbind(i, j1)] <- basis[cbind(i, j1)] + up / hj
  basis[cbind(i, j)] <- basis[cbind(i, j)] + lo / hj
  basis
}

# Fit by REML on [A | one free intercept per group] (intercept = "transition"): the intercepts
# are eliminated per group in the Rust engine (a Schur complement), so the cost is linear in
# the number of groups; same estimates and kernel covariances as fit_grouped() with a factor
# of groups. A has no intercept column. The intercepts come back in `transition_intercepts`
# (with `transition_intercept_se`), not among the coefficients.
fit_free_intercepts <- function(row_formula, rows, ngroups, group, y, offset, family = "binomial", cluster = NULL,
                                knots = NULL, sp = NULL, control = nce_control()) {
  a <- setup_terms(row_formula, rows, knots, intercept = FALSE)
  pa <- ncol(a$X)
  if (pa == 0L) nce_abort("`formula` has no kernel term beside the per-transition intercepts", "input", call = NULL)
  penalties <- lapply(a$penalties, function(pen) list(start = as.double(pen$start), S = pen$S))
  m <- length(penalties)
  if (!is.null(sp) && (!is.numeric(sp) || length(sp) != m || any(!(sp > 0)))) {
    nce_abort(sprintf("`sp` must be %d positive numbers, one per penalty", m), "input", call = NULL)
  }
  res <- rs(nce_fit_reml_free_intercepts(a$X, as.integer(group), as.integer(ngroups), as.double(y), rep(1, length(y)),
                                         as.double(offset), family,
                                         if (is.null(cluster)) NULL else as.integer(cluster), penalties,
                                         if (is.null(sp)) NULL else as.double(sp), control, nce_threads()))
  cn <- colnames(a$X)
  labels <- vapply(a$penalties, `[[`, "", "label")
  a$ncol <- pa
  a$intercept <- FALSE
  a$X <- NULL
  named <- function(v) {
    dimnames(v) <- list(cn, cn)
    v
  }
  list(coefficients = stats::setNames(res$coefficients, cn), sp = stats::setNames(res$sp, labels),
       edf = stats::setNames(res$edf, cn), Vp = named(res$vp), Ve = named(res$ve),
       Vs = if (is.null(res$cov_sandwich)) NULL else named(res$cov_sandwich),
       reml = res$reml, linear.predictors = res$eta, fitted.values = res$fitted,
       loglik = res$loglik, deviance = res$deviance, converged = res$converged,
       message = res$message, outer_iterations = res$outer_iterations,
       iter = res$inner_iterations, n_certain = res$n_certain, aliased = res$aliased,
       at_bound = res$at_bound, smooth = a$smooth, row_setup = a, group_setup = NULL,
       transition_intercepts = res$intercepts, transition_intercept_se = res$intercept_se)
}
