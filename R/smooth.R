# Smooth terms: mgcv's own constructors set up the design and penalties, the Rust
# core fits with smoothing parameters by REML, and the result is a gam-compatible
# object so mgcv's predict.gam, plot.gam and summary.gam work on it.

has_smooths <- function(formula) {
  # Look for the smooth constructors first: mgcv's parser cannot read non-syntactic names.
  uses <- all.names(formula)
  if (!any(c("s", "te", "ti", "t2") %in% uses)) return(FALSE)
  if (any(make.names(all.vars(formula)) != all.vars(formula))) {
    formula <- nce_rename_vars(formula, nce_syntactic_map(all.vars(formula)))
  }
  length(mgcv::interpret.gam(formula)$smooth.spec) > 0L
}

# mgcv's set-up of a response formula on `data`, with `offset` and no fitting.
# Thin-plate and cyclic s() terms are set up by the package's constructors (R/smooth-basis.R),
# which return mgcv's own smooth objects; the formula kept is the user's.
gam_setup <- function(formula, data, family, offset, knots, defer_side = nrow(data) >= side_rows_min) {
  # On many rows, mgcv's side constraints (gam.side(): pivoted QRs of every row) are found on a
  # subsample (deferred_side_constraints()), when every smooth is built by the "nceabs" constructor.
  bf <- nce_basis_formula(formula, defer_side)
  if (defer_side && !all(vapply(mgcv::interpret.gam(bf)$smooth.spec, inherits, TRUE, "nceabs.smooth.spec"))) {
    return(gam_setup(formula, data, family, offset, knots, FALSE))
  }
  data$.nce_offset <- offset
  # do.call keeps `offset = .nce_offset` unevaluated, so gam() finds it in `data`.
  setup <- do.call(mgcv::gam, list(formula = bf, family = family, data = data,
                                   offset = quote(.nce_offset), knots = knots, method = "REML", fit = FALSE))
  if (defer_side) {
    setup <- deferred_side_constraints(setup)
    # NULL (a whole penalty deleted, or parts laid out by penalty): mgcv sets the model up itself.
    if (is.null(setup)) return(gam_setup(formula, data, family, offset, knots, FALSE))
  }
  setup <- restore_absorbed(setup)
  setup$formula <- formula
  setup
}

# Fit a penalised GLM set up by mgcv in Rust. `sample` (0/1 per row) requests the NCE
# sandwich. Returns a gam-like list (no class).
fit_penalised <- function(formula, data, family = c("binomial", "poisson"), offset = NULL,
                          knots = NULL, sp = NULL, sample = NULL, control = nce_control(), weights = NULL,
                          discrete = FALSE, setup = NULL, keep_setup = FALSE) {
  family <- match.arg(family)
  fam <- switch(family, binomial = stats::binomial(), poisson = stats::poisson())
  n <- nrow(data)
  if (is.null(offset)) offset <- rep(0, n)
  if (is.null(weights)) weights <- rep(1, n)
  if (is.null(setup)) {
    # discrete: the covariates of the smooths rounded and the design kept compressed (R/grouped.R).
    setup <- if (discrete) discrete_gam_setup(formula, data, offset, knots) else
      gam_setup(formula, data, fam, offset, knots)
    # The formula's own offsets, so a kept set-up can be refitted with another `offset`.
    if (keep_setup) setup$formula_offset <- setup$offset - offset
  } else {
    setup$offset <- setup$formula_offset + offset
  }
  kept <- if (keep_setup) setup
  m <- length(setup$S)
  fixed <- resolve_sp(setup, sp)
  sp <- fixed$sp
  setup$sp <- fixed$names
  setup$L <- NULL
  penalties <- lapply(seq_len(m), function(j) list(start = setup$off[j] - 1, S = setup$S[[j]]))
  y <- as.double(setup$y)
  if (discrete) {
    x <- setup$terms_discrete
    setup$terms_discrete <- NULL
  } else {
    x <- setup$X
    # Not storage.mode<- on a double matrix: it would copy the design.
    if (!is.double(x)) storage.mode(x) <- "double"
  }
  rfam <- if (family == "binomial") "binomial" else "poisson"
  res <- rs(nce_fit_reml(x, list(y = y, weights = as.double(weights), offset = as.double(setup$offset)),
                         if (is.null(sample)) NULL else as.integer(sample), penalties,
                         c(list(family = rfam, sp = if (is.null(sp)) NULL else as.double(sp),
                                control = control, threads = nce_threads()),
                           if (discrete) list(layout = discrete_layout()))))
  rm(x)
  cn <- setup$term.names
  p <- length(cn)
  named <- function(v) {
    v[is.nan(v)] <- NA_real_
    dimnames(v) <- list(cn, cn)
    v
  }
  vp <- named(res$vp)
  ve <- named(res$ve)
  s_lambda <- matrix(0, p, p)
  for (j in seq_len(m)) {
    idx <- setup$off[j] - 1 + seq_len(ncol(setup$S[[j]]))
    s_lambda[idx, idx] <- s_lambda[idx, idx] + res$sp[j] * setup$S[[j]]
  }
  # X'WX, F = Vp X'WX and R (R'R = X'WX) on the identifiable columns; aliased ones are 0.
  k <- !res$aliased
  xwx <- matrix(0, p, p)
  xwx[k, k] <- solve(vp[k, k, drop = FALSE]) - s_lambda[k, k, drop = FALSE]
  xwx <- (xwx + t(xwx)) / 2
  f_mat <- vp %*% xwx
  ev <- eigen(xwx, symmetric = TRUE)
  mu <- res$fitted
  w <- if (family == "binomial") mu * (1 - mu) else mu
  wtdmu <- mean(y)
  nulldev <- sum(fam$dev.resids(y, rep(wtdmu, n), rep(1, n)))
  edf <- stats::setNames(res$edf, cn)
  pred_formula <- setup$pred.formula
  attr(pred_formula, "full") <- stats::reformulate(all.vars(setup$terms))
  out <- list(
    coefficients = stats::setNames(res$coefficients, cn),
    Vp = vp, Ve = ve,
    Vs = if (is.null(res$cov_sandwich)) NULL else named(res$cov_sandwich),
    edf = edf, edf1 = stats::setNames(2 * diag(f_mat) - rowSums(f_mat * t(f_mat)), cn),
    F = f_mat, R = sqrt(pmax(ev$values, 0)) * t(ev$vectors),
    sp = stats::setNames(res$sp, names(setup$sp)), at_bound = res$at_bound,
    family = fam, sig2 = 1, scale = 1, scale.estimated = FALSE,
    method = "REML", gcv.ubre = c(REML = res$reml), optimizer = c("newton", "rust"),
    linear.predictors = res$eta, fitted.values = mu, y = y,
    prior.weights = weights, weights = w, residuals = (y - mu) / w,
    deviance = res$deviance, null.deviance = nulldev, df.null = n - 1,
    df.residual = n - sum(res$edf), rank = p,
    iter = res$inner_iterations, outer_iterations = res$outer_iterations,
    converged = res$converged, message = res$message, n_certain = res$n_certain,
    aliased = res$aliased, loglik = res$loglik,
    smooth = setup$smooth, nsdf = setup$nsdf, formula = setup$formula, var.summary = setup$var.summary,
    cmX = setup$cmX, model = setup$mf, terms = setup$terms, pred.formula = pred_formula,
    pterms = setup$pterms, assign = setup$assign, contrasts = setup$contrasts, xlevels = setup$xlevels,
    offset = setup$offset, Xcentre = setup$Xcentre, min.edf = setup$min.edf,
    control = mgcv::gam.control(), paraPen = setup$pP, discrete_layout = res$layout
  )
  out$setup <- kept
  out
}

# The smoothing parameters to fit with: `sp` as given, mgcv's fixed ones (s(sp =)), or NULL
# (all estimated by REML); with the penalties' names in `names` (setup$sp's shape).
resolve_sp <- function(setup, sp, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  m <- length(setup$S)
  sp_names <- setup$sp
  if (!is.null(setup$L)) {
    # mgcv maps the free smoothing parameters to the penalties by L, with those fixed by s(sp =)
    # in lsp0: L selecting columns is fixing, more than one penalty per column is `id=` linkage.
    l_mat <- setup$L
    if (any(colSums(l_mat != 0) != 1L) || any(l_mat != 0 & l_mat != 1)) {
      nce_abort("linked smoothing parameters (`id=`) are not supported yet", "input", call = call)
    }
    if (ncol(l_mat) > 0L && is.null(sp)) {
      nce_abort("fix either all smoothing parameters (s(..., sp =) or `sp`) or none", "input", call = call)
    }
    if (is.null(sp)) sp <- exp(setup$lsp0)
    sp_names <- stats::setNames(rep(-1, m), names(setup$lsp0))
  }
  if (any(sp_names >= 0) && is.null(sp)) {
    if (!all(sp_names >= 0)) {
      nce_abort("fix either all smoothing parameters (s(..., sp =) or `sp`) or none", "input", call = call)
    }
    sp <- sp_names
  }
  list(sp = check_sp(sp, m, names(sp_names), call = call), names = sp_names)
}
