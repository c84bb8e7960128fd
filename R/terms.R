# One term set-up for every path (IID, conditional, sequential and LATKES, discrete, shards), as mgcv's
# gam.setup() is one for gam() and bam(): the formula's parametric part and smooths, each smooth by the
# package's constructors (smooth_con(), discrete_smooth()), then mgcv's side constraints (gam.side())
# over all the model's smooths, and the columns, names and penalties numbered. Each path keeps its own
# data handling; only the design's layout differs (`mode`):
# - "blocks": the design as a list of blocks (class "nce_blocks": R matrices and Rust-held rows, which
#   the engine reads where they lie: binding them would hold the design twice at its peak);
# - "bound": one matrix with the columns named (a grouped fit's group block B);
# - "discrete": discretised covariates, `terms` (list(values, index) per block) in place of X;
# - "shards": no rows (X is NULL): each smooth's rows are dropped as soon as its object is built, as
#   the shards' workers compute their own (shard_design()), so at most one smooth's rows are held.
# `groups` (list(formula, data, index)) adds a grouped fit's block B: its terms on the groups' rows
# (one per group; `index` maps each row to its group), mode "bound", without an intercept column, and
# side constraints taken jointly with the rows' terms, as gam() takes them on the expanded design
# [A | B[index, ]] (so te(y, z) beside a normaliser s(z) loses the columns s(z) spans). With
# `free_intercepts` every group has its own intercept: the constant is in the model though A has no
# column for it. With `discrete_check`, a discretised design that would not pay (discrete_pays()) is
# set up exactly instead, marked layout = "exact". `side_rows`: see side_constrain().
# Returns X (or `terms`), ncol, colnames, penalties (start, S, label), smooth, pterms, xlevels,
# contrasts and assign, with `groups` the set-up of B when asked for.
term_setup <- function(formula, data, knots = NULL, intercept = TRUE,
                       mode = c("blocks", "bound", "discrete", "shards"), groups = NULL,
                       free_intercepts = FALSE, fast_tp = FALSE, discrete_check = FALSE, side_rows = 5000L) {
  mode <- match.arg(mode)
  a <- build_terms(formula, data, knots, intercept, mode, fast_tp)
  if (mode == "discrete" && discrete_check &&
        !discrete_pays(lay_out_discrete(a), nrow(data), sum(lengths(lapply(a$smooth, `[[`, "S"))))) {
    exact <- term_setup(formula, data, knots, intercept, "blocks", groups, free_intercepts, side_rows = side_rows)
    exact$layout <- "exact"
    return(exact)
  }
  b <- if (!is.null(groups)) build_terms(groups$formula, groups$data, knots, FALSE, "bound")
  sets <- side_constrain(list(a, b), list(data, groups$data), groups$index, free_intercepts, side_rows)
  out <- lay_out_terms(sets[[1L]], mode)
  if (!is.null(b)) out$groups <- lay_out_terms(sets[[2L]], "bound")
  out
}

# The terms of `formula` on `data`, before side constraints: `blocks` (the parametric block, then one
# per smooth, laid out for `mode`: Rust-held rows kept only in mode "blocks", NULL in mode "shards"),
# `ks` (each smooth's columns), the smooths, and the parametric part's terms, levels and contrasts.
build_terms <- function(formula, data, knots, intercept, mode, fast_tp = FALSE) {
  par <- parametric_part(formula, data, intercept)
  n <- nrow(par$x)
  blocks <- list(par$x)
  smooth <- list()
  ks <- integer(0)
  add <- function(sm, block) {
    ks[[length(ks) + 1L]] <<- block_ncol(sm$X)
    blocks[length(blocks) + 1L] <<- list(block)
    sm$X <- NULL
    smooth[[length(smooth) + 1L]] <<- sm
  }
  for (spec in par$gp$smooth.spec) {
    if (mode == "discrete") {
      comp <- discrete_smooth(spec, data, knots, fast_tp)
      if (!is.null(comp)) {
        for (sm in comp$smooths) add(sm, list(values = sm$X, index = comp$index))
        next
      }
    }
    sms <- tryCatch(smooth_con(spec, data, knots, rust_rows = mode != "discrete"),
      error = function(e) {
        nce_abort(sprintf(paste("cannot set up the smooth term %s: %s (for discrete or few distinct values use a",
                                "smaller `k`, or parametric or factor terms)"),
                          spec$label, conditionMessage(e)), "input", call = NULL)
      })
    for (sm in sms) {
      x <- sm$X
      if (inherits(x, "nce_rust_block") && mode != "blocks") {
        # Only a list of blocks reads Rust-held rows where they lie: a bound design copies them into
        # R, shards drop them (the same set-up, and so the same constraint, either way).
        x <- if (mode == "bound") rs(nce_block_matrix(x$ptr))
        release_rust_blocks(list(sm$X))
      }
      add(sm, switch(mode, discrete = list(values = x, index = seq_len(n)), shards = NULL, x))
    }
    if (mode == "shards") {
      k <- ks[length(ks)]
      rm(sms, x)
      collect_set_up_garbage(n * k)
    }
  }
  list(blocks = blocks, ks = ks, smooth = smooth, pterms = par$pt, xlevels = par$xlevels, n = n)
}

# mgcv's side constraints (gam.side(), as gam() applies them) on the term sets `sets` (build_terms();
# NULL entries skipped), the first on the rows `data[[1]]`, any second on the groups' rows `data[[2]]`,
# group `index[i]` for row i: where a smooth nests others (s(u) + s(v) + s(u, v), s(y) + te(y, z)),
# the columns of the larger one that repeat the smaller ones are deleted (attr "del.index", which
# PredictMat() honours), with its penalties. gam.side() finds the dependence by pivoted QRs of the
# smooths' rows; here on at most `side_rows` evenly spaced rows (at least 4 per column), where the
# nested terms repeat each other exactly as on all rows. The rows are the exact bases: a discretised
# term's are computed anew (PredictMat()), as its rounded rows, rounded to different grids, would be
# nearly, not exactly, aliased; so are those of a set-up without rows (shards). Returns the sets with
# the columns deleted from their blocks and `ks`.
side_constrain <- function(sets, data, index, free_intercepts, side_rows) {
  live <- which(!vapply(sets, is.null, TRUE))
  sm <- unlist(lapply(sets[live], `[[`, "smooth"), recursive = FALSE)
  # gam.side() changes nothing unless some covariate is in two smooths.
  vn <- unlist(lapply(sm, function(s) {
    v <- s$term
    if (s$by != "NA") v <- paste0(v, s$by)
    if (!is.null(s$by.level)) v <- paste0(v, s$by.level)
    v
  }))
  if (!anyDuplicated(vn)) return(sets)
  n <- nrow(data[[1L]])
  p <- sum(vapply(sets[live], function(s) block_ncol(s$blocks[[1L]]) + sum(s$ks), 0))
  sub <- unique(round(seq(1, n, length.out = min(n, max(side_rows, 4L * p)))))
  at <- list(sub, index[sub])
  i <- 0L
  for (s in live) {
    d <- data[[s]][at[[s]], , drop = FALSE]
    for (j in seq_along(sets[[s]]$smooth)) {
      b <- sets[[s]]$blocks[[j + 1L]]
      i <- i + 1L
      sm[[i]]$X <- if (is.matrix(b)) {
        b[at[[s]], , drop = FALSE]
      } else if (inherits(b, "nce_rust_block")) {
        rs(nce_block_rows(b$ptr, as.integer(at[[s]])))
      } else {
        mgcv::PredictMat(sm[[i]], d)
      }
    }
  }
  xp <- block_rows(sets[[1L]]$blocks[[1L]], sub)
  if (free_intercepts) xp <- cbind(1, xp)
  # Its warning (repeated one-covariate smooths of a variable: columns deleted) as a classed one.
  sm <- withCallingHandlers(mgcv::gam.side(sm, xp, tol = .Machine$double.eps^0.5),
                            warning = function(w) {
                              nce_warn(conditionMessage(w), "rank", call = NULL)
                              invokeRestart("muffleWarning")
                            })
  i <- 0L
  for (s in live) {
    for (j in seq_along(sets[[s]]$smooth)) {
      i <- i + 1L
      sm[[i]]$X <- NULL
      del <- attr(sm[[i]], "del.index")
      b <- sets[[s]]$blocks[[j + 1L]]
      if (!is.null(del)) {
        if (!is.null(b)) sets[[s]]$blocks[[j + 1L]] <- block_drop(b, del)
        sets[[s]]$ks[j] <- sets[[s]]$ks[j] - length(del)
      }
      sets[[s]]$smooth[[j]] <- sm[[i]]
    }
  }
  sets
}

# A term set (build_terms(), side constraints applied) as term_setup() returns it: columns, names and
# penalties numbered, and the design laid out for `mode`.
lay_out_terms <- function(set, mode) {
  xp <- set$blocks[[1L]]
  p <- ncol(xp)
  names_out <- colnames(xp)
  penalties <- list()
  smooth <- set$smooth
  for (i in seq_along(smooth)) {
    k <- set$ks[i]
    smooth[[i]]$first.para <- p + 1L
    smooth[[i]]$last.para <- p + k
    for (S in smooth[[i]]$S) penalties[[length(penalties) + 1L]] <- list(start = p, S = S, label = smooth[[i]]$label)
    names_out <- c(names_out, if (k) paste0(smooth[[i]]$label, ".", seq_len(k)))
    p <- p + k
  }
  out <- list(X = NULL, ncol = p, colnames = names_out, penalties = penalties, smooth = smooth, pterms = set$pterms,
              xlevels = set$xlevels, contrasts = attr(xp, "contrasts"), assign = attr(xp, "assign"))
  double <- function(b) {
    if (!inherits(b, "nce_rust_block") && !is.double(b)) storage.mode(b) <- "double"
    b
  }
  if (mode == "blocks") {
    out$X <- structure(lapply(set$blocks, double), class = "nce_blocks")
  } else if (mode == "bound") {
    out$X <- double(do.call(cbind, set$blocks))
    colnames(out$X) <- names_out
  } else if (mode == "discrete") {
    out$terms <- lay_out_discrete(set)
  }
  out
}

# A discretised term set's blocks as the engine reads them (list(values, index) each): the parametric
# block without a block where it has no columns, and as one stored row where it is the intercept
# alone (model.matrix's intercept is all 1).
lay_out_discrete <- function(set) {
  xp <- set$blocks[[1L]]
  storage.mode(xp) <- "double"
  par <- if (identical(colnames(xp), "(Intercept)")) {
    list(list(values = matrix(1, 1L, 1L), index = rep(1L, set$n)))
  } else if (ncol(xp) > 0L) {
    list(list(values = unname(xp), index = NULL))
  }
  c(par, lapply(set$blocks[-1L], function(b) {
    storage.mode(b$values) <- "double"
    b$values <- unname(b$values)
    b
  }))
}
