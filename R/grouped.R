# Penalised fits on grouped designs [A | B[group, ]]: row-level terms (A) and terms that
# depend only on a row's group (B, one row per group; in sequential NCE the spline
# intercept of a transition, shared by its data and reference rows). Terms are set up with
# mgcv's own constructors (smoothCon, PredictMat), without gam(), so set-up stays cheap.

# A set-up's formula read by mgcv (`gp`) and its parametric terms (`pt`) on `data`: model matrix
# `x` (rows unnamed; without its "(Intercept)" column unless `intercept`) and the factors' levels.
# Factors are coded with the formula's intercept (treatment contrasts) even when the block drops
# it: without `intercept` the constant lives in another block, and a full set of dummies would be
# aliased with it. With no variables (`~ 1`, the usual case of a kernel or intercept block), the
# column of ones directly: model.frame() and model.matrix() on a pooled fit's rows cost a tenth
# of a second and a name per row, which the garbage collector then walks.
parametric_part <- function(formula, data, intercept) {
  gp <- mgcv::interpret.gam(formula)
  pt <- stats::terms(gp$pf)
  if (length(attr(pt, "term.labels")) == 0L && is.null(attr(pt, "offset")) && attr(pt, "response") == 0L &&
        is.data.frame(data)) {
    j <- attr(pt, "intercept")
    x <- matrix(1, nrow(data), j, dimnames = list(NULL, if (j == 1L) "(Intercept)"))
    attr(x, "assign") <- rep(0L, j)
    xlevels <- NULL
  } else {
    pmf <- stats::model.frame(pt, data, na.action = stats::na.fail)
    x <- stats::model.matrix(pt, pmf)
    rownames(x) <- NULL
    xlevels <- stats::.getXlevels(pt, pmf)
  }
  if (!intercept) x <- x[, colnames(x) != "(Intercept)", drop = FALSE]
  list(gp = gp, pt = pt, x = x, xlevels = xlevels)
}

# mgcv::smoothCon(absorb.cons = TRUE) with the usual sum-to-zero constraint absorbed here by
# one product with the constraint's null-space basis Z: mgcv absorbs it by qr.qty() on the
# transposed basis, which on ~40,000 rows costs more than building the basis. The result is
# the object mgcv would give (same "qrc" and "nCons", so PredictMat() applies the same Z);
# other constraint types are left to mgcv.
smooth_con <- function(spec, data, knots, rust_rows = FALSE) {
  if (rust_rows) {
    sm <- spline_con_rust(spec, data, knots)
    if (is.null(sm)) sm <- tp_con_rust(spec, data, knots)
    if (!is.null(sm)) return(list(sm))
  }
  # Cubic and cyclic cubic splines: the same smooth, with the basis on the rows computed in Rust
  # (R/smooth-cubic.R).
  if (identical(class(spec), "cc.smooth.spec") && identical(spec$by, "NA")) class(spec) <- "ncecc.smooth.spec"
  if (identical(class(spec), "cr.smooth.spec") && identical(spec$by, "NA")) class(spec) <- "ncecr.smooth.spec"
  # Tensor products: the margins' rows likewise (mgcv forms their row-wise products).
  if (identical(class(spec), "tensor.smooth.spec")) {
    for (i in seq_along(spec$margin)) {
      cl <- class(spec$margin[[i]])
      if (identical(cl, "cr.smooth.spec") || identical(cl, "cc.smooth.spec")) {
        class(spec$margin[[i]]) <- paste0("nce", cl)
      }
    }
  }
  # Thin-plate splines of two or more covariates: the same smooth, eigen-decomposition and rows' basis
  # in Rust (tp_construct()). It spans the same space with the same penalty as mgcv's, but in a rotated
  # basis, and smoothCon()'s penalty scaling depends on the basis, so the term's smoothing parameters
  # are on the package's scale, not mgcv's (fits with a fixed `sp` take the same constructor, so that
  # `sp = fit$sp` refits the fit itself). One-covariate terms and terms with their own `sp` or `id`
  # keep mgcv's constructor, so their smoothing parameters are mgcv's (a one-covariate term on 55,000
  # rows would set up 3.6x faster in Rust, but with an `sp` 1.6 times mgcv's).
  if (identical(class(spec), "tp.smooth.spec") && identical(spec$by, "NA") && spec$dim >= 2L &&
        is.null(spec$sp) && is.null(spec$id)) {
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
  lapply(sms, function(sm) absorb_constraints(sm, sm$C))
}

# smooth_con() for a one-covariate cubic or cyclic cubic spline (no `by`, mgcv's usual
# sum-to-zero constraint) whose rows are built and kept in Rust (an "nce_rust_block", read by
# the engine where it lies): R allocates none of the n rows, so a pooled fit's set-up no
# longer drives R's garbage collector (on 14 LATKES subjects, 582,000 rows, the set-up's
# collections took 1.3 s of a 6.4 s fit). mgcv sets up the smooth on its knots alone, as the
# package's "ncecr"/"ncecc" constructors do; the constraint (the rows' column means) and the
# penalty scaling (smoothCon()'s norm(X, "I")) come from the Rust rows, and the constraint is
# absorbed in place. NULL where smooth_con()'s usual route applies (a point constraint, `pc`, among
# them: it is not the rows' means).
spline_con_rust <- function(spec, data, knots) {
  cyclic <- identical(class(spec), "cc.smooth.spec")
  if (!(cyclic || identical(class(spec), "cr.smooth.spec")) || !identical(spec$by, "NA") ||
        length(spec$term) != 1L || !is.null(attr(spec, "shrink")) || !is.null(spec$point.con)) {
    return(NULL)
  }
  x <- data[[spec$term]]
  nk <- if (spec$bs.dim < 0) 10L else spec$bs.dim
  if (!is.double(x) || length(x) < 2L || anyNA(x) || nk < (if (cyclic) 4L else 3L)) return(NULL)
  k <- cubic_knots(x, nk, knots[[spec$term]], cyclic)
  if (is.null(k)) return(NULL)
  skeleton <- list(if (cyclic) x[1:2] else k)
  skeleton <- structure(skeleton, names = spec$term, class = "data.frame",
                        row.names = .set_row_names(length(skeleton[[1L]])))
  knots <- as.list(knots)
  knots[[spec$term]] <- k
  sm <- mgcv::smoothCon(spec, data = skeleton, knots = knots, absorb.cons = FALSE, scale.penalty = FALSE,
                        null.space.penalty = FALSE)[[1L]]
  if (!is.null(sm$Cp) || !is.null(sm$g.index) || !identical(nrow(sm$C), 1L)) return(NULL)
  blk <- rs(nce_spline_block(if (cyclic) "cc" else "cr", x, as.double(sm$xp), as.double(if (cyclic) sm$BD else sm$F),
                             nce_threads(call = NULL)))
  if (cyclic) class(sm) <- c("ncecyclic.smooth", class(sm))
  sm$X <- blk
  absorb_row_stats(sm, blk)
}

# The last steps of smoothCon(absorb.cons = FALSE, scale.penalty = TRUE), then absorb_constraints(),
# for a smooth `sm` whose rows (`sm$X`, Rust-held or an R matrix) come with their statistics `st`: the
# column means (the sum-to-zero constraint) and the largest absolute row sum (norm(X, "I"), by whose
# square the penalties are scaled). NULL, the Rust-held rows released, where a column mean is 0:
# smoothCon() absorbs such constraints on the other columns only.
absorb_row_stats <- function(sm, st) {
  if (any(st$means == 0)) {
    release_rust_blocks(list(sm$X))
    return(NULL)
  }
  if (length(sm$S) && is.null(sm$no.rescale)) {
    for (i in seq_along(sm$S)) {
      ma_s <- norm(sm$S[[i]]) / st$max_row_sum^2
      sm$S[[i]] <- sm$S[[i]] / ma_s
      sm$S.scale[i] <- ma_s
    }
  }
  if (inherits(sm$X, "nce_rust_block")) sm$X$means <- sm$X$max_row_sum <- sm$X$scale <- NULL
  absorb_constraints(sm, matrix(st$means, 1L))
}

# smooth_con() for a thin-plate spline of two or more covariates set up by the package's
# constructor (tp_construct()), whose rows on the data, when computed from knots (more distinct
# points than mgcv's max.knots), are built and kept in Rust, as spline_con_rust() keeps cubic
# splines': the steps of mgcv::smoothCon(absorb.cons = FALSE) on one smooth without `by`, then the
# constraint absorbed (absorb_row_stats()). NULL where smooth_con()'s usual route applies.
tp_con_rust <- function(spec, data, knots) {
  if (!identical(class(spec), "tp.smooth.spec") || !identical(spec$by, "NA") || spec$dim < 2L ||
        !is.null(spec$sp) || !is.null(spec$id) || !is.null(spec$point.con)) {
    return(NULL)
  }
  dk <- utils::getFromNamespace("ExtractData", "mgcv")(spec, data, knots)
  if (!is.null(attr(dk$data, "index"))) return(NULL)
  sm <- tp_construct(spec, dk$data, dk$knots, rust_rows = TRUE)
  if (is.null(sm)) return(NULL)
  class(sm) <- c(class(sm), "mgcv.smooth")
  sm[c("plot.me", "side.constrain", "repara")] <- list(TRUE, TRUE, TRUE)
  if (isTRUE(spec$fixed)) sm$S <- NULL
  sm$S.scale <- rep(1, length(sm$S))
  absorb_row_stats(sm, if (inherits(sm$X, "nce_rust_block")) sm$X else rs(nce_basis_stats(sm$X, FALSE)))
}

# Frees now the Rust-held rows among a set-up's blocks (R would free them only when it next
# collects garbage, not knowing their size).
release_rust_blocks <- function(blocks) {
  for (b in blocks) if (inherits(b, "nce_rust_block")) nce_block_release(b$ptr)
  invisible(NULL)
}

# The k x (k - j) basis Z of the null space of j constraints whose transposed QR is `qrc`: the
# columns of Q after the first j. A smooth's rows times Z are its constrained rows (shards compute
# theirs with the same Z: shard_design()).
constraint_null_space <- function(qrc, j, k) {
  qr.qy(qrc, diag(k))[, (j + 1L):k, drop = FALSE]
}

# The rows `x` (n x k) times that null-space basis: for the usual single constraint by its
# Householder reflection, one rank-one update per row in Rust (nce_scale_absorb(), or
# nce_block_absorb() for Rust-held rows; on 41,580 rows of a 16-column term 2.8 ms against 9.0 ms for
# R's reference BLAS product); each row depends on itself only, so shard rows equal these bit
# for bit. Several constraints, or values Rust refuses: the matrix product.
absorb_rows <- function(x, qrc, j) {
  if (inherits(x, "nce_rust_block")) {
    x$ncol <- rs(nce_block_absorb(x$ptr, c(qrc$qraux[1L], qrc$qr[-1L, 1L])))
    return(x)
  }
  k <- ncol(x)
  if (j == 1L && is.double(x) && k >= 2L && nrow(x) >= 1L) {
    out <- nce_scale_absorb(x, rep(1, k), c(qrc$qraux[1L], qrc$qr[-1L, 1L]), nce_threads(call = NULL))
    if (!inherits(out, "nce_rust_error")) return(out)
  }
  x %*% constraint_null_space(qrc, j, k)
}

# `sm` (built with absorb.cons = FALSE) with the constraints `cmat` (j x k) absorbed as
# smoothCon(absorb.cons = TRUE) absorbs them: X and S times the null-space basis Z of the
# constraints, "qrc" and "nCons" for PredictMat(), and rank, df and null-space dimension
# reduced by j. No constraints (j = 0): marked as mgcv marks them.
absorb_constraints <- function(sm, cmat) {
  j <- nrow(cmat)
  if (j == 0L) {
    attr(sm, "qrc") <- "no constraints"
    attr(sm, "nCons") <- 0  # nolint: object_name_linter.
    return(sm)
  }
  k <- block_ncol(sm$X)
  qrc <- qr(t(cmat))
  z <- constraint_null_space(qrc, j, k)
  sm$X <- absorb_rows(sm$X, qrc, j)
  sm$S <- lapply(sm$S, function(s_j) crossprod(z, s_j %*% z))
  attr(sm, "qrc") <- qrc
  attr(sm, "nCons") <- j  # nolint: object_name_linter.
  sm$C <- NULL
  sm$rank <- pmin(sm$rank, k - j)
  sm$df <- sm$df - j
  sm$null.space.dim <- max(0, sm$null.space.dim - j)
  sm
}

# Discretised covariates (`discrete = TRUE`; Wood, Li, Shaddick and Augustin 2017, section 3,
# mgcv's rounding, finer in one dimension): the numeric covariates of a smooth of d covariates
# are rounded to an equally spaced grid of 2000 (d = 1), 100 (d = 2) or 25 (d >= 3) values over
# their range (mgcv's compress.df uses 1000 for d = 1; 2000 halves the rounding error, on the
# LATKES bench model from 0.012 to 0.006 in the linear predictor, at the cost of a 2000-row
# block per smooth), so each covariate moves by at most half a grid step. The smooth is set up
# by mgcv on the distinct rounded rows (knots of one-covariate cr/cc smooths at the quantiles of
# the rounded data, as mgcv puts them on continuous data: discrete_knots(); the sum-to-zero
# constraint weighted by how often each distinct row occurs, so it equals the constraint of the
# full rounded data), and the block is stored as those distinct rows'
# basis (m x k) plus the index of each row. Smooths with `by` variables, factor covariates,
# constraints other than the usual one, or more distinct rounded rows than half the rows keep
# their exact basis (term_setup(mode = "discrete"), R/terms.R).
discrete_grid <- c(2000, 100, 25)

# How the engine holds a discretised design (nce-core discrete.rs): "auto" (default) lets its cost
# model choose between the compressed terms and their rounded bases expanded into one dense block,
# the faster of the two for many terms of many distinct values on few rows; the option
# `nce.discrete_layout` ("compressed" or "dense") fixes it, for benchmarks.
discrete_layout <- function() {
  layout <- getOption("nce.discrete_layout", "auto")
  if (!(is.character(layout) && length(layout) == 1L && layout %in% c("auto", "compressed", "dense"))) {
    nce_abort(sprintf("option `nce.discrete_layout` must be \"auto\", \"compressed\" or \"dense\", not %s",
                      describe_value(layout)), "input", call = NULL)
  }
  layout
}

# Knots of a one-covariate cr/cs/cc smooth as mgcv's place.knots() puts them on the distinct values
# of continuous data (their quantiles), from the rounded values and their counts: on the distinct
# rounded values alone they would be spread evenly over the range. Unchanged otherwise.
discrete_knots <- function(spec, u, counts, knots) {
  v <- spec$term
  cyclic <- inherits(spec, "cyclic.spec") || inherits(spec, "cc.smooth.spec")
  if (length(v) != 1L || !(inherits(spec, c("cr.smooth.spec", "cs.smooth.spec")) || cyclic)) return(knots)
  given <- knots[[v]]
  x <- u[[v]]
  if (!is.null(given) && !(cyclic && length(given) == 2L)) return(knots)
  if (!is.null(given)) {
    x <- c(given[1], x, given[2])
    counts <- c(1L, counts, 1L)
    o <- order(x)
    x <- x[o]
    counts <- counts[o]
  }
  nk <- if (spec$bs.dim < 0) 10L else spec$bs.dim
  n <- sum(counts)
  if (nk < 3L || nk > length(x)) return(knots)
  cum <- c(0, cumsum(counts))
  at <- function(j) x[findInterval(j - 0.5, cum)]
  delta <- (n - 1) / (nk - 1)
  lbi <- floor(delta * seq_len(nk - 2L)) + 1
  frac <- delta * seq_len(nk - 2L) + 1 - lbi
  k <- c(x[1], at(lbi) * (1 - frac) + at(lbi + 1) * frac, x[length(x)])
  if (any(diff(k) <= 0)) return(knots)
  if (is.null(knots)) knots <- list()
  knots[[v]] <- k
  knots
}

# A smooth on discretised covariates: list(smooths, index), or NULL when the smooth keeps its
# exact basis (by variables, non-numeric covariates, constraints other than sum-to-zero, more
# distinct rounded rows than half the rows).
# `fast_tp`: thin-plate terms of two or more covariates without an `sp` in the term are set up by the
# package's constructor (smooth.construct.ncetp.smooth.spec(): mgcv's object, eigen-decomposition in
# Rust), as smooth_con() does for exact fits: on up to 100^2 distinct rounded points mgcv's own set-up
# is the slowest step of the fit.
discrete_smooth <- function(spec, data, knots, fast_tp = FALSE) {
  vars <- spec$term
  if (!identical(spec$by, "NA") || !all(vapply(data[vars], is.numeric, TRUE))) return(NULL)
  d <- length(vars)
  m <- discrete_grid[min(d, 3L)]
  n <- nrow(data)
  # Each covariate to seq(min, max, length.out = m), the cells present and each row's cell, in
  # one pass in Rust (R's arithmetic here made about eight copies of every covariate).
  rd <- rs(nce_round_to_grids(lapply(vars, function(v) as.double(data[[v]])), as.integer(m)))
  if (is.null(rd)) return(NULL)
  grids <- stats::setNames(rd$grids, vars)
  present <- rd$present
  # Rounding that leaves more distinct rows than half the rows compresses nothing (terms of three
  # or more covariates on the 25-value grid): the term keeps its exact basis, one row per row.
  if (length(present) * 2L > n) return(NULL)
  index <- rd$index
  # The distinct rows' covariate values, decoded from their codes.
  u <- list()
  rest <- present - 1
  for (v in rev(vars)) {
    g <- grids[[v]]
    u[[v]] <- g[rest %% length(g) + 1]
    rest <- rest %/% length(g)
  }
  u <- as.data.frame(u[vars])
  counts <- rd$counts
  knots <- discrete_knots(spec, u, counts, knots)
  if (fast_tp && identical(class(spec), "tp.smooth.spec") && spec$dim >= 2L && is.null(spec$sp) &&
      is.null(spec$id)) {
    class(spec) <- "ncetp.smooth.spec"
  }
  sms <- tryCatch(mgcv::smoothCon(spec, data = u, knots = knots, absorb.cons = FALSE, scale.penalty = TRUE,
                                  null.space.penalty = FALSE),
                  error = function(e) NULL)
  if (is.null(sms)) return(NULL)
  plain <- function(sm) {
    is.null(sm$Cp) && is.null(sm$g.index) && is.matrix(sm$C) && is.null(attr(sm$X, "offset")) &&
      (nrow(sm$C) == 0L || (nrow(sm$C) == 1L && ncol(sm$C) == ncol(sm$X) &&
                               isTRUE(all.equal(as.numeric(sm$C), colMeans(sm$X)))))
  }
  if (!all(vapply(sms, plain, TRUE))) return(NULL)
  smooths <- lapply(sms, function(sm) {
    # Sum to zero over the rows (the distinct rows weighted by their counts).
    absorb_constraints(sm, if (nrow(sm$C) == 0L) sm$C else matrix(colSums(sm$X * counts) / n, 1L))
  })
  list(smooths = smooths, index = index)
}

# R collects garbage only when R allocates, and the engine's working memory is not R's: the
# set-up's temporaries (a smooth's unconstrained basis, mgcv's intermediate matrices, together
# about as large as the design) would stay resident through the whole fit. One full collection
# before a large fit (0.15 s with 1.2 GB live at 2.3 million rows) frees them; otherwise a young
# one (2 ms) frees what the set-up left since R's last collection, which, on a heap that
# contrast() grew at once (reserve_heap()), is most of it: on 14 LATKES subjects it took the
# peak back below what it was before the heap was grown (408 MB discretised, 553 MB exact).
collect_set_up_garbage <- function(n_values) {
  invisible(gc(verbose = FALSE, full = n_values > 1e7))
}

# The values of a design's blocks that R holds, for collect_set_up_garbage(): blocks held in
# Rust leave no basis temporaries in R, so they do not count (on 14 LATKES subjects of cubic
# and cyclic terms, skipping that collection saved 0.3 s and left the peak memory as it was). A
# discretised design (a list of terms) counts its distinct rows and row indices, about what its
# set-up left behind: on 14 subjects (2.4 million values) skipping the collection saved 0.13 s
# and left the peak at 478 MB; a dense matrix counts n * pa.
r_held_values <- function(a, n, pa) {
  if (inherits(a, "nce_blocks")) {
    return(sum(vapply(a, function(b) if (inherits(b, "nce_rust_block")) 0 else as.double(length(b)), 0)))
  }
  if (is.list(a)) return(sum(vapply(a, function(t) as.double(length(t$values) + length(t$index)), 0)))
  n * pa
}

# Fit by REML on [A | B[group, ]], both set up by term_setup() (with mgcv's side constraints over the
# terms of A and B together). `rows` and `groups` are data frames; `group` maps each row
# (1-based) to its row of `groups`. `cluster` (one entry per group) requests the clustered
# sandwich. A carries the intercept. With `discrete`, A's smooths are discretised
# (term_setup(mode = "discrete")); B is already compressed by group and stays exact. With `shards`
# (nce_shards(), exact fits only) A is held in row shards by the workers of the future plan.
fit_grouped <- function(row_formula, rows, group_formula, groups, group, y, offset,
                        family = "binomial", cluster = NULL, knots = NULL, sp = NULL,
                        control = nce_control(), discrete = FALSE, shards = NULL) {
  a <- term_setup(row_formula, rows, knots, intercept = TRUE, mode = setup_mode(discrete, shards),
                  groups = list(formula = group_formula, data = groups, index = group))
  held <- a$X
  on.exit(release_rust_blocks(held), add = TRUE)
  b <- a$groups
  a$groups <- NULL
  a_engine <- if (discrete) a$terms else a$X
  pa <- a$ncol
  at <- function(pen, shift) list(start = as.double(pen$start + shift), S = pen$S)
  penalties <- c(lapply(a$penalties, at, 0), lapply(b$penalties, at, pa))
  m <- length(penalties)
  check_sp(sp, m)
  cn <- c(a$colnames, colnames(b$X))
  if (is.null(shards)) {
    collect_set_up_garbage(r_held_values(a_engine, length(y), pa))
    res <- rs(nce_fit_reml_grouped(a_engine, b$X,
                                   grouped_problem(group, y, offset, cluster, penalties, family, sp, control)))
  } else {
    # The workers compute their rows of A from the set-up (this process never holds A).
    store <- write_shards(shards, row_recipe(a, row_formula, rows, TRUE), b$X, group)
    on.exit(unlink(store$paths), add = TRUE)
    collect_set_up_garbage(length(y) * pa)
    res <- rs(fit_grouped_sharded(store, b$X, group, y, offset, family, cluster, penalties, sp, control))
  }
  release_rust_blocks(held)
  rm(a_engine)
  held <- NULL
  for (i in seq_along(b$smooth)) {
    b$smooth[[i]]$first.para <- b$smooth[[i]]$first.para + pa
    b$smooth[[i]]$last.para <- b$smooth[[i]]$last.para + pa
  }
  labels <- vapply(c(a$penalties, b$penalties), `[[`, "", "label")
  # Keep the set-ups for prediction, not their (large) model matrices.
  a$ncol <- pa
  a$intercept <- TRUE
  b$ncol <- ncol(b$X)
  a$X <- b$X <- a$terms <- a$colnames <- NULL
  a$discrete <- discrete
  grouped_result(res, cn, labels, c(a$smooth, b$smooth), a, b)
}

# term_setup()'s layout of a grouped fit's rows: discretised, held by shards, or a list of blocks.
setup_mode <- function(discrete, shards) {
  if (discrete) "discrete" else if (!is.null(shards)) "shards" else "blocks"
}

# The one `problem` list of the grouped engine calls (in memory or sharded): the rows' groups,
# response and offsets, the groups' clusters (or NULL), the penalties and the settings, with
# `...` the counts some calls need (ngroups, shards, pa).
grouped_problem <- function(group, y, offset, cluster, penalties, family, sp, control, ...) {
  list(group = as.integer(group), response = list(y = as.double(y), weights = NULL, offset = as.double(offset)),
       cluster = if (is.null(cluster)) NULL else as.integer(cluster), penalties = penalties,
       settings = list(family = family, sp = if (is.null(sp)) NULL else as.double(sp), control = control,
                       threads = nce_threads(), ...))
}

# The fit list of fit_grouped() and fit_free_intercepts() from the engine's result `res`:
# names `cn` on coefficients and covariances, `labels` on the smoothing parameters, and the
# smooths and set-ups kept for prediction.
grouped_result <- function(res, cn, labels, smooth, row_setup, group_setup) {
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
       at_bound = res$at_bound, smooth = smooth, row_setup = row_setup, group_setup = group_setup)
}

# Fit by REML on [A | one free intercept per group] (intercept = "transition"): the intercepts
# are eliminated per group in the Rust engine (a Schur complement), so the cost is linear in
# the number of groups; same estimates and kernel covariances as fit_grouped() with a factor
# of groups. A has no intercept column. The intercepts come back in `transition_intercepts`
# (with `transition_intercept_se`), not among the coefficients.
fit_free_intercepts <- function(row_formula, rows, ngroups, group, y, offset, family = "binomial", cluster = NULL,
                                knots = NULL, sp = NULL, control = nce_control(), discrete = FALSE, shards = NULL) {
  a <- term_setup(row_formula, rows, knots, intercept = FALSE, mode = setup_mode(discrete, shards),
                  free_intercepts = TRUE)
  held <- a$X
  on.exit(release_rust_blocks(held), add = TRUE)
  a_engine <- if (discrete) a$terms else a$X
  pa <- a$ncol
  if (pa == 0L) nce_abort("`formula` has no kernel term beside the per-transition intercepts", "input", call = NULL)
  penalties <- lapply(a$penalties, function(pen) list(start = as.double(pen$start), S = pen$S))
  m <- length(penalties)
  check_sp(sp, m, call = NULL)
  cn <- a$colnames
  if (is.null(shards)) {
    collect_set_up_garbage(r_held_values(a_engine, length(y), pa))
    res <- rs(nce_fit_reml_free_intercepts(a_engine, grouped_problem(group, y, offset, cluster, penalties, family,
                                                                     sp, control, ngroups = as.integer(ngroups))))
  } else {
    # The workers compute their rows of A from the set-up (their B has no columns).
    store <- write_shards(shards, row_recipe(a, row_formula, rows, FALSE), matrix(0, ngroups, 0L), group)
    on.exit(unlink(store$paths), add = TRUE)
    collect_set_up_garbage(length(y) * pa)
    res <- rs(fit_free_sharded(store, ngroups, group, y, offset, family, cluster, penalties, sp, control))
  }
  release_rust_blocks(held)
  rm(a_engine)
  held <- NULL
  labels <- vapply(a$penalties, `[[`, "", "label")
  a$ncol <- pa
  a$intercept <- FALSE
  a$X <- a$terms <- a$colnames <- NULL
  a$discrete <- discrete
  c(grouped_result(res, cn, labels, a$smooth, a, NULL),
    list(transition_intercepts = res$intercepts, transition_intercept_se = res$intercept_se))
}

# One line for print(): the discretised fit and the layout the engine chose.
discrete_note <- function(layout) {
  switch(if (is.null(layout)) "" else layout,
         compressed = "Discretised covariates, design held compressed",
         dense = "Discretised covariates, rounded bases held as one dense block (faster here than compressed)",
         exact = "discrete = TRUE, fitted exactly: a compressed design would not be faster here",
         "Discretised covariates")
}
