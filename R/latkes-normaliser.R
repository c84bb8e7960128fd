# The LATKES transition normaliser: log Z(y_prev) = log of the kernel's integral over the
# window, by the midpoint rule on a grid refined around the previous fixation, extrapolated
# (Richardson) from two grid sizes. The kernel goes to Rust (nce-core quadrature.rs) as tables:
# each term is a function of one feature that varies over the window (x, y, radius, dist, angle,
# rel_angle or a map's value), tabulated once per distinct value of what it holds fixed within a
# transition (a factor `by`, a covariate), and interpolated linearly there. A term in two such
# features (te(dist, angle), s(x, y)) cannot be tabulated in one dimension: the kernel is then
# evaluated in R at every point (grid_normaliser_once()), slower by two orders of magnitude.

# Points per term table: linear interpolation on 8192 intervals (0.3 pixels of saccade length
# on a 1920 x 1080 screen) is within 1e-7 of the smooth on the kernels of the tests.
table_size <- 8193L

# Rust's codes for the features that vary over the window (nce_core::quadrature::Feature); maps are 7.
window_feature_codes <- c(x = 1L, y = 2L, radius = 3L, dist = 4L, angle = 5L, rel_angle = 6L)

# grid_normaliser(), remembered for the fit's own transitions (fitted(), logLik(), AIC() and
# glance() all need it) in the fit's cache environment.
cached_normaliser <- function(object, newdata, grid, gradient, refine, extrapolate) {
  cache <- object[["cache"]]
  own <- is.environment(cache) && identical(newdata$.sequence, object$transitions$.sequence) &&
    nrow(newdata) == nrow(object$transitions) && identical(newdata$x, object$transitions$x) &&
    identical(newdata$x_prev, object$transitions$x_prev) && identical(newdata$y_prev, object$transitions$y_prev)
  norm <- function() {
    grid_normaliser(object, newdata, grid, gradient = gradient, refine = refine, extrapolate = extrapolate, call = NULL)
  }
  if (!own) return(norm())
  key <- function(g) paste(c(grid, refine, g, extrapolate), collapse = "/")
  # The normaliser with its gradient holds the one without.
  if (!gradient && !is.null(cache[[key(TRUE)]])) return(cache[[key(TRUE)]])
  if (is.null(cache[[key(gradient)]])) cache[[key(gradient)]] <- norm()
  cache[[key(gradient)]]
}

# Quadrature points of the window for a previous fixation at (px, py): the midpoints of a

# Log normaliser of the kernel for each row of `newdata` (its previous fixation(s) and
# covariates, with the features); with `gradient`, also the kernel's design row averaged under
# the normalised density (d log Z / d beta), one column per kernel coefficient. `tables = FALSE`
# forces the R rule (tests compare the two); `chunk` sets the transitions per progress step.
grid_normaliser <- function(object, newdata, grid, gradient = FALSE, refine = 7, extrapolate = TRUE,
                            call = caller_call(), tables = TRUE, chunk = NULL) {
  check_grid(grid, call = call)
  check_whole(refine, "refine", min = 0, max = 99, call = call)
  if (refine > 0 && refine %% 2 == 0) nce_abort("`refine` must be odd (cells centred on the previous fixation)",
                                                "input", call = call)
  check_bool(extrapolate, "extrapolate", call = call)
  # Rows that share the previous fixation(s) and what the kernel holds fixed share one normaliser.
  cond <- held_columns(object, newdata)
  key <- if (length(cond)) do.call(paste, c(unname(as.list(newdata[cond])), sep = "\r")) else rep("", nrow(newdata))
  first <- which(!duplicated(key))
  nd <- newdata[first, , drop = FALSE]
  # Per thread, about 20 numbers per point of the finer grid (the R rule's chunks hold as many).
  check_size(8 * 40 * (4 * prod(as.double(grid)) + 2 * 128 * (2 * refine + 1)^2), "grid",
             "the normalising grid", call = call)
  plan <- if (tables) normaliser_plan(object, nd, gradient)
  once <- function(rows, g, r) {
    if (is.null(plan)) grid_normaliser_once(object, nd[rows, , drop = FALSE], g, gradient, r)
    else plan_normaliser(plan, object, rows, g, r, gradient)
  }
  both <- function(rows) {
    a <- once(rows, grid, refine)
    if (extrapolate) richardson(a, once(rows, 2 * grid, 2 * refine + 1), gradient) else a
  }
  # Chunks of transitions, with a progress bar when there are several (held-out data of many
  # subjects; about 1 ms per transition in Rust, 100 times that on the R rule).
  per <- chunk %||% if (is.null(plan)) 64L else 2048L
  chunks <- split(seq_along(first), ceiling(seq_along(first) / per))
  parts <- if (length(chunks) > 1L) {
    with_simulation_progress(length(chunks), function(p) {
      lapply(chunks, function(rows) {
        out <- both(rows)
        if (!is.null(p)) p()
        out
      })
    })
  } else {
    lapply(chunks, both)
  }
  at <- match(key, key[first])
  log_z <- unlist(lapply(parts, `[[`, "log_z"), use.names = FALSE)
  mean_x <- if (gradient) do.call(rbind, lapply(parts, `[[`, "mean_x"))
  list(log_z = log_z[at], mean_x = if (gradient) mean_x[at, , drop = FALSE])
}

# Richardson: the midpoint rule's error is c h^2 + o(h^2), so (4 Z(h / 2) - Z(h)) / 3 is
# accurate to higher order (the refined block covers the same area at both sizes).
richardson <- function(a, b, gradient) {
  r <- exp(a$log_z - b$log_z)
  ok <- is.finite(r) & 4 - r > 0.5
  log_z <- ifelse(ok, b$log_z + log(pmax(4 - r, 0.5) / 3), b$log_z)
  mean_x <- NULL
  if (gradient) {
    mean_x <- (4 * b$mean_x - r * a$mean_x) / (4 - r)
    mean_x[!ok, ] <- b$mean_x[!ok, ]
  }
  list(log_z = log_z, mean_x = mean_x)
}

# Columns of `newdata` that the kernel holds fixed within a transition: the previous fixation(s),
# covariates of the formula, and the image column that chooses the maps.
held_columns <- function(object, newdata) {
  prev <- paste0(rep(c("x", "y"), object$order), rep(c("_prev", paste0("_prev", seq_len(object$order))[-1]), each = 2))
  setdiff(intersect(names(newdata), c(prev, all.vars(object$nce_formula), object[["map_by"]])),
          c("x", "y", latkes_feature_names, names(object[["maps"]])))
}

# The kernel's terms: for each, its smooth (or NULL for a parametric term), its coefficients,
# their positions among the kernel's (kernel_columns()$coef) and the variables it reads.
kernel_terms <- function(object, nd1) {
  k <- kernel_columns(object)
  pa <- object$row_setup$ncol
  out <- list()
  for (sm in object$smooth) {
    if (sm$first.para > pa) next
    out[[length(out) + 1L]] <- list(smooth = sm, coef = sm$first.para:sm$last.para,
                                    vars = c(sm$term, if (!identical(sm$by, "NA")) sm$by))
  }
  # Parametric columns belong to the terms model.matrix() says ("assign"; 0 for the intercept).
  pt <- stats::delete.response(object$row_setup$pterms)
  mf <- stats::model.frame(pt, nd1, na.action = stats::na.pass, xlev = object$row_setup$xlevels)
  xp <- stats::model.matrix(pt, mf, contrasts.arg = object$row_setup$contrasts)
  asg <- attr(xp, "assign")[colnames(xp) != "(Intercept)" | k$intercept]
  labels <- attr(pt, "term.labels")
  for (j in unique(asg)) {
    coef <- intersect(which(asg == j), k$coef)
    if (!length(coef)) next
    out[[length(out) + 1L]] <- list(smooth = NULL, coef = coef,
                                    vars = if (j == 0L) character() else all.vars(str2lang(labels[j])))
  }
  lapply(out, function(t) c(t, list(pos = match(t$coef, k$coef))))
}

# One term's columns of the kernel design at the rows of `d`.
term_design <- function(object, term, d) {
  if (!is.null(term$smooth)) return(mgcv::PredictMat(term$smooth, d))
  ps <- object$row_setup
  ps$smooth <- list()
  setup_predict(ps, d, kernel_columns(object)$intercept)[, term$coef, drop = FALSE]
}

# Range of a window feature over every point of the window, for the transitions `nd`; the angle's
# table runs over its pseudo-angle (pseudo_angle_to_angle()).
feature_range <- function(object, v, nd) {
  w <- object$window
  cx <- w[c(1, 2, 1, 2)]
  cy <- w[c(3, 3, 4, 4)]
  r <- switch(v,
    x = w[1:2], y = w[3:4], angle = c(-2, 2), rel_angle = c(-pi, pi),
    radius = c(0, max(sqrt((cx - mean(w[1:2]))^2 + (cy - mean(w[3:4]))^2))),
    dist = c(0, sqrt(max(outer(nd$x_prev, cx, "-")^2 + outer(nd$y_prev, cy, "-")^2))),
    range(unlist(object[["maps"]][[v]]$mats))
  )
  if (r[2] > r[1]) r else r + c(-0.5, 0.5)
}

# The angle of pseudo-angle p in [-2, 2] (nce_core::quadrature::pseudo_angle: 1 - dx / (|dx| +
# |dy|) with the sign of dy), in which the angle's table is equally spaced: Rust then needs no
# arctangent per point. Spacing in the angle varies by less than a factor of 2 along the table.
pseudo_angle_to_angle <- function(p) {
  c <- 1 - abs(p)
  sign(p) * atan2(1 - abs(c), c)
}

# The kernel as the Rust quadrature takes it, for the distinct transitions `nd`: term tables,
# which table each transition uses, the maps, and the terms constant within a transition (added
# to log Z as they are; their design columns are their own mean). NULL when a term reads two
# window features, or needs too many tables.
normaliser_plan <- function(object, nd, gradient) {
  if (!nrow(nd)) return(NULL)
  k <- kernel_columns(object)
  beta <- object$coefficients[k$coef]
  maps <- object[["maps"]]
  vary <- c(names(window_feature_codes), names(maps))
  terms <- list()
  table <- matrix(0L, nrow(nd), 0L)
  const_eta <- numeric(nrow(nd))
  const_x <- matrix(0, nrow(nd), 0L)
  const_pos <- integer()
  for (term in kernel_terms(object, nd[1L, , drop = FALSE])) {
    v <- intersect(term$vars, vary)
    if (length(v) > 1L) return(NULL)
    if (!length(v)) {
      x <- term_design(object, term, nd)
      const_eta <- const_eta + drop(x %*% beta[term$pos])
      const_x <- cbind(const_x, x)
      const_pos <- c(const_pos, term$pos)
      next
    }
    held <- setdiff(term$vars, v)
    key <- if (length(held)) do.call(paste, c(unname(as.list(nd[held])), sep = "\r")) else rep("", nrow(nd))
    tmpl <- which(!duplicated(key))
    if (length(tmpl) * as.double(table_size) * (1 + gradient * length(term$pos)) > 5e7) return(NULL)
    r <- feature_range(object, v, nd)
    g <- seq(r[1], r[2], length.out = table_size)
    tabs <- lapply(tmpl, function(i) {
      # The transition's row repeated, with the window feature running over its range.
      td <- lapply(nd, function(col) rep(col[i], table_size))
      td[[v]] <- if (v == "angle") pseudo_angle_to_angle(g) else g
      x <- term_design(object, term, as.data.frame(td, stringsAsFactors = FALSE, optional = TRUE))
      list(values = drop(x %*% beta[term$pos]), basis = if (gradient) c(x))  # column by column
    })
    terms[[length(terms) + 1L]] <- list(
      feature = if (v %in% names(maps)) 7L else window_feature_codes[[v]], map = max(1L, match(v, names(maps), 0L)),
      lo = r[1], step = (r[2] - r[1]) / (table_size - 1L), n = table_size,
      values = unlist(lapply(tabs, `[[`, "values"), use.names = FALSE),
      basis = if (gradient) unlist(lapply(tabs, `[[`, "basis"), use.names = FALSE),
      cols = as.integer(term$pos)
    )
    table <- cbind(table, match(key, key[tmpl]))
  }
  map_by <- object[["map_by"]]
  map <- vapply(names(maps), function(nm) {
    mp <- maps[[nm]]
    map_index(mp, nm, if (mp$per_image) nd[[map_by]] else rep(NA, nrow(nd)), map_by)
  }, integer(nrow(nd)))
  angle_prev <- if (object$order == 2) ifelse(nd$dist_prev == 0, NaN, nd$angle_prev) else rep(NaN, nrow(nd))
  list(terms = terms, maps = lapply(unname(maps), function(mp) unname(mp$mats)), table = table,
       map = if (length(maps)) matrix(as.integer(map), nrow(nd)),
       px = as.double(nd$x_prev), py = as.double(nd$y_prev), angle_prev = as.double(angle_prev),
       const_eta = const_eta, const_x = const_x, const_pos = const_pos, ncoef = length(beta))
}

# The Rust quadrature on the rows `rows` of a plan.
plan_normaliser <- function(plan, object, rows, grid, refine, gradient) {
  storage.mode(plan$table) <- "integer"
  out <- rs(nce_latkes_normaliser(
    plan$terms, plan$maps,
    list(px = plan$px[rows], py = plan$py[rows], angle_prev = plan$angle_prev[rows],
         map = if (!is.null(plan$map)) plan$map[rows, , drop = FALSE],
         table = if (ncol(plan$table)) plan$table[rows, , drop = FALSE]),
    list(window = as.double(object$window), grid = as.integer(grid), refine = as.integer(refine),
         centre = c(mean(object$window[1:2]), mean(object$window[3:4])), ncoef = plan$ncoef,
         gradient = gradient, threads = nce_threads())
  ))
  mean_x <- out$mean_x
  if (gradient && length(plan$const_pos)) mean_x[, plan$const_pos] <- plan$const_x[rows, , drop = FALSE]
  list(log_z = out$log_z + plan$const_eta[rows], mean_x = mean_x)
}

# The rule in R, for kernels the tables cannot hold: the kernel evaluated at every point of
# window_points() for each (distinct) row of `newdata`.
grid_normaliser_once <- function(object, newdata, grid, gradient, refine) {
  w <- object$window
  cond <- held_columns(object, newdata)
  first <- seq_len(nrow(newdata))
  k <- kernel_columns(object)
  beta <- object$coefficients[k$coef]
  log_z <- numeric(length(first))
  mean_x <- if (gradient) matrix(0, length(first), length(beta)) else NULL
  pts <- lapply(first, function(i) window_points(w, grid, newdata$x_prev[i], newdata$y_prev[i], refine))
  sizes <- lengths(lapply(pts, `[[`, "x"))
  per_chunk <- max(1L, floor(2e5 / max(sizes)))
  for (ch in split(seq_along(first), ceiling(seq_along(first) / per_chunk))) {
    # Column by column: indexing a data frame by repeated rows spends its time in make.unique().
    nd <- lapply(newdata[cond], function(col) rep(col[first[ch]], times = sizes[ch]))
    nd$x <- unlist(lapply(pts[ch], `[[`, "x"), use.names = FALSE)
    nd$y <- unlist(lapply(pts[ch], `[[`, "y"), use.names = FALSE)
    la <- unlist(lapply(pts[ch], `[[`, "log_area"), use.names = FALSE)
    of <- rep(seq_along(ch), times = sizes[ch])
    nd <- as.data.frame(nd, stringsAsFactors = FALSE, optional = TRUE)
    nd <- object$features(nd)
    if (gradient) {
      xg <- kernel_design(object, nd)
      eta <- drop(xg %*% beta) + la
    } else {
      eta <- kernel_eta(object, nd) + la
    }
    mx <- vapply(split(eta, of), max, 0)
    p <- exp(eta - mx[of])
    s <- vapply(split(p, of), sum, 0)
    log_z[ch] <- mx + log(s)
    if (gradient) {
      mean_x[ch, ] <- rowsum(xg * (p / s[of]), of, reorder = FALSE)
    }
  }
  list(log_z = log_z, mean_x = mean_x)
}


# Quadrature points of the window for a previous fixation at (px, py): the midpoints of a
# `grid` of cells, with the refine x refine cells around (px, py) each split into 8 x 8.
# Returns x, y and the log area of each point.
window_points <- function(w, grid, px, py, refine) {
  nx <- grid[1]
  ny <- grid[2]
  hx <- (w[2] - w[1]) / nx
  hy <- (w[4] - w[3]) / ny
  ix <- rep(seq_len(nx), ny)
  iy <- rep(seq_len(ny), each = nx)
  cx <- min(nx, max(1L, ceiling((px - w[1]) / hx)))
  cy <- min(ny, max(1L, ceiling((py - w[3]) / hy)))
  h <- refine %/% 2
  near <- abs(ix - cx) <= h & abs(iy - cy) <= h & refine > 0
  x <- w[1] + (ix[!near] - 0.5) * hx
  y <- w[3] + (iy[!near] - 0.5) * hy
  la <- rep(log(hx * hy), length(x))
  if (any(near)) {
    s <- 8L
    off <- (seq_len(s) - 0.5) / s
    # every (sub-x, sub-y) pair within each refined cell
    k <- sum(near)
    xs <- unlist(lapply(seq_len(k), function(j) rep(w[1] + (ix[near][j] - 1 + off) * hx, s)))
    ys <- unlist(lapply(seq_len(k), function(j) rep(w[3] + (iy[near][j] - 1 + off) * hy, each = s)))
    x <- c(x, xs)
    y <- c(y, ys)
    la <- c(la, rep(log(hx * hy / s^2), length(xs)))
  }
  list(x = x, y = y, log_area = la)
}

# The kernel's design matrix (its columns in coef(): kernel_columns()$coef) at the rows of `nd`,
# with one-dimensional smooths without `by` interpolated linearly from 4096 points over their
# variable's range, as in kernel_eta().
kernel_design <- function(object, nd) {
  k <- kernel_columns(object)
  x <- matrix(0, nrow(nd), length(k$coef))
  ps <- object$row_setup
  ps$smooth <- list()
  first <- vapply(object$smooth, `[[`, 0L, "first.para")
  pa <- object$row_setup$ncol
  n_par <- if (any(first <= pa)) min(first[first <= pa]) - 1L else pa
  par_cols <- intersect(k$coef, seq_len(n_par))
  if (length(par_cols)) {
    xp <- setup_predict(ps, nd, k$intercept)
    x[, match(par_cols, k$coef)] <- xp[, par_cols, drop = FALSE]
  }
  for (sm in object$smooth) {
    if (sm$first.para > pa) next
    j <- match(sm$first.para:sm$last.para, k$coef)
    if (sm$dim == 1L && identical(sm$by, "NA") && length(unique(range(nd[[sm$term]]))) == 2L) {
      v <- nd[[sm$term]]
      g <- seq(min(v), max(v), length.out = 4096)
      b <- mgcv::PredictMat(sm, stats::setNames(data.frame(g), sm$term))
      pos <- (v - g[1]) / (g[2] - g[1]) + 1
      lo <- pmin(pmax(floor(pos), 1L), 4095L)
      w <- pos - lo
      x[, j] <- b[lo, , drop = FALSE] * (1 - w) + b[lo + 1L, , drop = FALSE] * w
    } else {
      x[, j] <- mgcv::PredictMat(sm, nd)
    }
  }
  x
}
