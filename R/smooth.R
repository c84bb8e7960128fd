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

# The fields of mgcv's gam(fit = FALSE) set-up that fit_penalised() and the gam methods read, for the
# response formula `formula` on `data` with `offset`, built without gam(): the terms and mgcv's side
# constraints by term_setup() (R/terms.R), the design `X` a list of blocks ("nce_blocks": R matrices and
# Rust-held rows, which the engine reads where they lie) or, with `discrete`, `terms_discrete`
# (list(values, index) per block).
gam_setup <- function(formula, data, offset, knots, discrete = FALSE, side_rows = 5000L) {
  gp <- mgcv::interpret.gam(formula)
  if (any(vapply(gp$smooth.spec, function(s) !is.null(s$id), TRUE))) {
    nce_abort("linked smoothing parameters (`id=`) are not supported yet", "input", call = NULL)
  }
  a <- term_setup(formula[-2L], data, knots, intercept = TRUE, mode = if (discrete) "discrete" else "blocks",
                  fast_tp = discrete, discrete_check = discrete, side_rows = side_rows)
  discrete <- discrete && is.null(a$layout)
  a$blocks <- if (discrete) a$terms else unclass(a$X)
  mf <- stats::model.frame(gp$fake.formula, data, na.action = stats::na.fail)
  n <- nrow(mf)
  # Offsets written in the formula are added to the caller's, as gam() does.
  f_offset <- stats::model.offset(mf)
  if (!is.null(f_offset)) offset <- offset + f_offset
  sm <- a$smooth
  # Each smooth's smoothing parameters in the fit's `sp`, as gam() numbers them.
  n_sp <- 0
  for (i in seq_along(sm)) {
    if (length(sm[[i]]$S)) {
      sm[[i]]$first.sp <- n_sp + 1
      n_sp <- sm[[i]]$last.sp <- n_sp + length(sm[[i]]$S)
    }
  }
  variable_summary <- utils::getFromNamespace("variable.summary", "mgcv")
  sp <- unlist(lapply(sm, function(s) if (is.null(s$sp)) rep(-1, length(s$S)) else s$sp))
  names(sp) <- unlist(lapply(sm, function(s) {
    if (length(s$S) == 1L) s$label else if (length(s$S)) paste0(s$label, seq_along(s$S))
  }))
  nsdf <- if (length(sm)) sm[[1L]]$first.para - 1L else a$ncol
  out <- list(
    X = a$X, terms_discrete = a$terms,
    S = lapply(a$penalties, `[[`, "S"), off = vapply(a$penalties, function(pen) pen$start + 1, 0), sp = sp,
    L = NULL, y = stats::model.response(mf), offset = offset, term.names = a$colnames, smooth = sm,
    nsdf = nsdf, formula = formula,
    var.summary = variable_summary(gp$pf, as.list(mf)[all.vars(gp$fake.formula[-2L])], n),
    cmX = stats::setNames(unlist(lapply(a$blocks, block_means, n)), a$colnames), mf = mf, terms = stats::terms(mf),
    pred.formula = gp$pred.formula,
    # The parametric frame's terms with the response, as gam() keeps them: predict.gam() finds
    # offsets by their "dataClasses".
    pterms = attr(stats::model.frame(gp$pf, data, na.action = stats::na.fail), "terms"),
    assign = a$assign, contrasts = a$contrasts, xlevels = a$xlevels, Xcentre = NULL,
    min.edf = nsdf + sum(vapply(sm, function(s) as.numeric(s$null.space.dim), 0)), pP = NULL
  )
  out$layout <- a$layout  # "exact" where a discretised design would not pay
  out
}

# Columns of a block of a design: an R matrix, Rust-held rows ("nce_rust_block") or a discretised
# term (list(values, index)).
block_ncol <- function(x) {
  if (inherits(x, "nce_rust_block")) x$ncol else if (is.matrix(x)) ncol(x) else ncol(x$values)
}

# Column means of a block over its n rows (a discretised term's distinct rows weighted by how often
# they occur). Rust-held rows are a smooth's with its sum-to-zero constraint absorbed: their means are
# 0 (to rounding).
block_means <- function(x, n) {
  if (inherits(x, "nce_rust_block")) return(rep(0, x$ncol))
  if (is.matrix(x)) return(colMeans(x))
  if (is.null(x$index)) colMeans(x$values) else colSums(x$values * tabulate(x$index, nrow(x$values))) / n
}

# The rows `sub` of a parametric block (an R matrix or a discretised term).
block_rows <- function(x, sub) {
  if (is.matrix(x)) return(x[sub, , drop = FALSE])
  if (is.null(x$index)) x$values[sub, , drop = FALSE] else x$values[x$index[sub], , drop = FALSE]
}

# A block without its columns `drop` (Rust-held rows in place).
block_drop <- function(x, drop) {
  if (inherits(x, "nce_rust_block")) {
    x$ncol <- rs(nce_block_drop(x$ptr, as.integer(drop)))
    return(x)
  }
  keep <- setdiff(seq_len(block_ncol(x)), drop)  # positive indices: a third of the time of x[, -drop]
  if (is.matrix(x)) return(x[, keep, drop = FALSE])
  x$values <- x$values[, keep, drop = FALSE]
  x
}

# Fit a penalised GLM set up by mgcv in Rust. `sample` (0/1 per row) requests the NCE
# sandwich. Returns a gam-like list (no class).
fit_penalised <- function(formula, data, family = c("binomial", "poisson"), offset = NULL,
                          knots = NULL, sp = NULL, sample = NULL, control = nce_control(), weights = NULL,
                          discrete = FALSE, setup = NULL, keep_setup = FALSE) {
  family <- match_choice(family)
  fam <- switch(family, binomial = stats::binomial(), poisson = stats::poisson())
  n <- nrow(data)
  if (is.null(offset)) offset <- rep(0, n)
  if (is.null(weights)) weights <- rep(1, n)
  # Rust-held rows of a set-up built here and not kept are freed after the fit (R would free them only
  # when it next collects garbage, not knowing their size).
  own <- is.null(setup) && !keep_setup
  if (is.null(setup)) {
    # discrete: the covariates of the smooths rounded and the design kept compressed (R/grouped.R).
    setup <- gam_setup(formula, data, offset, knots, discrete)
    # The formula's own offsets, so a kept set-up can be refitted with another `offset`.
    if (keep_setup) setup$formula_offset <- setup$offset - offset
  } else {
    setup$offset <- setup$formula_offset + offset
  }
  discrete <- discrete && is.null(setup$layout)
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
  }
  rfam <- if (family == "binomial") "binomial" else "poisson"
  res <- rs(nce_fit_reml(x, list(y = y, weights = as.double(weights), offset = as.double(setup$offset)),
                         if (is.null(sample)) NULL else as.integer(sample), penalties,
                         c(list(family = rfam, sp = if (is.null(sp)) NULL else as.double(sp),
                                control = control, threads = nce_threads()),
                           if (discrete) list(layout = discrete_layout()))))
  if (own && !discrete) release_rust_blocks(x)
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
  # mgcv's deviances: of the fitted means, without the penalty (the engine's `deviance` counts
  # it), and of the weighted mean.
  wtdmu <- sum(weights * y) / sum(weights)
  nulldev <- sum(fam$dev.resids(y, rep(wtdmu, n), weights))
  dev <- sum(fam$dev.resids(y, mu, weights))
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
    deviance = dev, null.deviance = nulldev, df.null = n - 1,
    df.residual = n - sum(res$edf), rank = p,
    iter = res$inner_iterations, outer_iterations = res$outer_iterations,
    converged = res$converged, message = res$message, n_certain = res$n_certain,
    aliased = res$aliased, loglik = res$loglik,
    smooth = setup$smooth, nsdf = setup$nsdf, formula = setup$formula, var.summary = setup$var.summary,
    cmX = setup$cmX, model = setup$mf, terms = setup$terms, pred.formula = pred_formula,
    pterms = setup$pterms, assign = setup$assign, contrasts = setup$contrasts, xlevels = setup$xlevels,
    offset = setup$offset, Xcentre = setup$Xcentre, min.edf = setup$min.edf,
    control = mgcv::gam.control(), paraPen = setup$pP,
    discrete_layout = if (is.null(setup$layout)) res$layout else setup$layout
  )
  out$setup <- kept
  out
}

# Does the discretised design pay? Where the engine's cost model of one X'WX would expand the
# compressed terms into one dense block, a pass over the exact design costs the same, and with
# many smoothing parameters the rounding moves the REML surface enough to multiply the
# iterations: on the 5-parameter classifier of bench/discrete-layout.R (60 penalties, 2,000
# pairs) 40 outer iterations against the exact fit's 9, 2.4 times its time; set up exactly once
# the rounded terms are built (gam_setup() asks before the side constraints), 1.03 times. With
# few penalties the rounded block is cheaper than the exact design to set up and takes the same
# iterations (the three-term nce() there, 3 penalties on 42,000 rows: 0.83-0.93 times exact, and
# 1.3 times when refitted exactly), so it stays.
# `options(nce.discrete_layout =)` other than "auto" keeps the discretised design (benchmarks).
discrete_pays <- function(terms, n, n_penalties) {
  n_penalties < 10L || !identical(discrete_layout(), "auto") ||
    !identical(rs(nce_discrete_layout(terms, as.double(n))), "dense")
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
