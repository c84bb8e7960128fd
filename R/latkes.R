#' LATKES: log-additive transition kernels for fixation sequences
#'
#' Fits the spatial Markov chain
#' \deqn{p(y_t \mid y_{t-1}, \ldots, y_{t-k}) \propto
#'   \exp\{\sum_i \beta_i v_i(y_t) + g(y_t, y_{t-1}, \ldots, y_{t-k})\}}
#' on a rectangular window (the screen) by sequential noise-contrastive
#' estimation ([snce()]; Barthelme and Chopin, 2015, part IV): each observed
#' fixation is contrasted with `ratio` reference points drawn uniformly over the
#' window, and the log normaliser of each transition is a spline of the previous
#' fixation (the spline intercept).
#'
#' @section Kernel features: Whatever their names in `data`, the coordinates
#'   are called `x` and `y` in formulas (`x_prev`, `y_prev` for the previous
#'   fixation, `x_prev2`, ... for earlier ones). latkes() adds these columns to
#'   every row (data and reference points) and to new data in `predict()`:
#'   - `dist`: saccade length \eqn{|y_t - y_{t-1}|}, in the data's units;
#'   - `angle`: saccade direction `atan2(y - y_prev, x - x_prev)` on
#'     \eqn{(-\pi, \pi]}: 0 points along +x, \eqn{\pi/2} along +y (downwards
#'     on a screen whose y axis grows downwards). Use `s(angle, bs = "cc")`:
#'     latkes() sets its knots to \eqn{(-\pi, \pi)};
#'   - `radius`: distance of \eqn{y_t} from the centre of the window;
#'   - with `order = 2`: `dist_prev` and `angle_prev` (the previous saccade)
#'     and `rel_angle`, the turn from the previous saccade's direction to this
#'     one's, wrapped to \eqn{(-\pi, \pi]}. A term in `dist_prev` or
#'     `angle_prev` alone is constant within a transition and is absorbed by the
#'     intercept: use them in interactions or `by =`.
#'
#'   Other columns of `data` may appear in the formulas, taken at time t.
#'
#' @section Spatial covariates: `maps = list(saliency = M)` adds a feature
#'   `saliency`, the value of the map at each fixation and reference point,
#'   usable in the kernel like the built-in ones (`~ s(dist) + saliency` for a
#'   linear effect \eqn{\beta v(y_t)}, or `s(saliency)`). `M` is a numeric
#'   matrix, or a named list of matrices (one per stimulus) chosen per row by
#'   the column `map_by` of `data` (its values must be names of the list).
#'   Several maps may be given, each with its own name.
#'
#'   Convention: the window is cut into `nrow(M)` x `ncol(M)` equal cells and
#'   `M[i, j]` is the value at the centre of the cell in row `i` and column
#'   `j`, rows counted along y from the window's lower bound `window[3]` (row 1
#'   at the top of a screen whose y axis grows downwards, as in an image) and
#'   columns along x from `window[1]`. Between cell centres the value is
#'   interpolated bilinearly (in Rust); in the half cell along the edges it is
#'   constant. Maps need not match the window's aspect ratio or resolution.
#'   An array from `png::readPNG()` is accepted as it is (`h x w`, or
#'   `h x w x channels`, turned into luminance \eqn{0.2126 R + 0.7152 G +
#'   0.0722 B}). Missing values in a map are an error.
#'
#'   `predict()`, `logLik()` and `simulate()` look the maps up again, so new
#'   data must carry the `map_by` column; [rlatkes()] simulates from kernels
#'   with map terms.
#'
#' @section Input care:
#'   - `drop_points` removes the fixations at exactly the given points before
#'     anything else (a tracker's code, such as (0, 0) for a lost eye), with a
#'     message of class `nce_message_drop_points` that counts them and the
#'     transitions lost; their sequence is split there, as for fixations outside
#'     the window. The fit keeps the points (`fit$drop_points`) and applies them
#'     to new fixations in `predict()` and `logLik(newdata =)`; the rows dropped
#'     are in `fit$dropped$points`.
#'   - More than 1% (and at least 3) of the fixations at one identical point
#'     inside the window give a warning of class `nce_warning_pile` naming the
#'     point and the count: a continuous kernel cannot explain a pile, which is
#'     often a tracker's code; drop it with `drop_points` if it is one.
#'   - `window = NULL` takes the range of the fixations (after `drop_points`),
#'     which moves the centre `radius` is measured from: a message of class
#'     `nce_message_window` gives the window taken. With `by`, one window is
#'     taken from all the data, shared by every fit. Give the screen instead.
#'   - Fixations outside `window` lie outside the model's support.
#'     With `outside = "drop"` (default) they are removed with a warning of
#'     class `nce_warning_outside` that counts them and the transitions lost,
#'     and their sequence is split there (no transition is invented across a
#'     gap); `outside = "error"` makes them an error of class
#'     `nce_error_support`. When the window loses more than half of the
#'     transitions, it is an error of class `nce_error_support` (rather a window
#'     in the wrong units or orientation than a choice): check the window.
#'     `fit$dropped$outside` holds the rows dropped.
#'   - Zero-length saccades (a fixation at exactly the previous location) have
#'     probability zero under a continuous kernel and no direction: the
#'     repeated fixation is removed with a warning of class
#'     `nce_warning_zero_length` (the next transition starts from the same
#'     place). In new data given to `predict()`, `angle` is 0 where `dist` is 0.
#'   - Sequences with fewer than `order + 1` fixations give no transition and
#'     are left out with snce()'s warning (`nce_warning_short`).
#'   - Missing or non-finite coordinates are an error (`nce_error_data`) that
#'     names the rows: split the sequence with `group` or impute.
#'
#' @param data Data frame of fixations in time order within each sequence.
#' @param x,y Names of the coordinate columns.
#' @param group Name of the column that splits `data` into sequences (trials),
#'   or `NULL` for one sequence. Left out while `data` has a column named like a
#'   trial or subject id (`trial`, `subject`, `id`, ...) with several values, or a
#'   fixation index that restarts, it gives a warning of class
#'   `nce_warning_group`: the jumps between trials would be fitted as saccades.
#' @param window `c(xmin, xmax, ymin, ymax)`, the rectangle the fixations live
#'   on (the screen); `NULL` takes the range of the coordinates.
#' @param ratio Reference points per transition (the paper used 20); see [nce_vocabulary].
#' @param kernel One-sided formula of the log kernel in the features above
#'   (any snce() terms: `s()`, `te()`, parametric, `by =`). The default is the
#'   paper's model: a centrality bias `s(radius)`, a saccade-length effect
#'   `s(dist)` and a direction effect `s(angle)`. Its one-dimensional smooths
#'   use cubic regression splines (`bs = "cr"`), whose set-up is linear in the
#'   number of rows (mgcv's default thin-plate basis costs seconds on 40,000
#'   rows), and the cyclic angle smooth has `k = 16` so that four cardinal
#'   peaks (a period of \eqn{\pi/2}) can be resolved.
#' @param intercept One-sided formula of the per-transition log normaliser in
#'   the previous fixation(s); `NULL` gives `~ s(x_prev, y_prev, xt =
#'   list(max.knots = 500))` for `order = 1` and the same plus
#'   `s(angle_prev, bs = "cc")` for `order = 2` (the normaliser then depends on
#'   the previous direction). `max.knots = 500`: the thin-plate basis takes its
#'   knots at 500 of the distinct previous fixations when there are more (a
#'   fixed random subset, as mgcv does above 2,000), which cuts its set-up time
#'   by three quarters; write `~ s(x_prev, y_prev)` to use them all.
#'   With maps per image (see Spatial covariates) the normaliser also depends
#'   on the image, and the default becomes one surface per image,
#'   `~ s(x_prev, y_prev, by = <map_by>) + <map_by>` (the `map_by` column is
#'   made a factor); with many images and few fixations each, consider a
#'   smaller `k` in your own intercept formula.
#'   `"transition"` and `"none"` as for [snce()].
#' @param order Order of the chain (1 or 2).
#' @param outside `"drop"` or `"error"`: what to do with fixations outside
#'   `window`.
#' @param by `NULL`, or the name of a column (e.g. `"subject"`): fit one model
#'   per level and return a [latkes_collection][latkes_collection].
#' @param maps `NULL`, or a named list of spatial covariates: each a numeric
#'   matrix (or image array) over the window, or a named list of them, one per
#'   image; see Spatial covariates.
#' @param map_by Name of the column of `data` whose values choose the map of
#'   each fixation when `maps` holds lists of maps per image.
#' @param drop_points `NULL`, or the points at which fixations are dropped
#'   (tracker codes), before the window is applied: one point `c(x, y)`, a
#'   2-column matrix or a list of points, matched exactly; see Input care.
#' @param ... Further arguments of [snce()]: `cluster`, `knots` (merged with
#'   the cyclic knots of the angles), `sp`, `time`, `control`, `discrete`,
#'   `shards`.
#' @return An object of class `latkes_fit` (also `snce_fit`, `nce_fit`), or a
#'   `latkes_collection` with `by`. Besides the snce() methods: [plot()][plot.latkes_fit]
#'   draws each kernel term on its natural scale, [predict()][predict.latkes_fit]
#'   gives the log kernel or the transition density normalised on a grid,
#'   [logLik()][logLik.latkes_fit] the log-likelihood of (held-out) sequences,
#'   [simulate()][simulate.latkes_fit] new scanpaths, [latkes_effects()] the
#'   estimated curves. `model.frame(fit)` holds the data and reference rows with
#'   the feature columns.
#' @seealso [rlatkes()] to simulate data from a known kernel.
#' @examples
#' set.seed(1)
#' d <- rlatkes(600, kernel = list(dist = function(d) -d / 150, angle = function(a) 0.5 * cos(4 * a)),
#'              window = c(0, 1024, 0, 768), n_trials = 3)
#' fit <- latkes(d, group = "trial", window = c(0, 1024, 0, 768), ratio = 10)
#' summary(fit)
#' plot(fit)
#'
#' # A saliency map per image: fixations are drawn to bright parts of the image shown.
#' left <- matrix(rep(c(1, 0), each = 12), 6, 8)   # bright left half (columns 1-4)
#' maps <- list(saliency = list(left = left, right = left[, 8:1]))
#' d <- rlatkes(600, kernel = list(dist = function(d) -d / 150, saliency = function(v) 1.5 * v),
#'              window = c(0, 1024, 0, 768), n_trials = 4, maps = maps)
#' fit <- latkes(d, group = "trial", window = c(0, 1024, 0, 768), ratio = 10,
#'               kernel = ~ s(dist, bs = "cr") + saliency, maps = maps, map_by = "image")
#' summary(fit)
#' @export
latkes <- function(data, x = "x", y = "y", group = NULL, window = NULL, ratio = 20,
                   kernel = ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 16),
                   intercept = NULL, order = 1,
                   outside = c("drop", "error"), by = NULL, maps = NULL, map_by = NULL, drop_points = NULL, ...) {
  rng <- rng_state()
  cl <- match.call()
  outside <- check_choice(outside, c("drop", "error"), "outside", sys.call())
  if (!is.null(by)) return(as_result(latkes_by(cl, data, by, parent.frame()), rng = rng, env = parent.frame()))
  check_whole(order, "order", min = 1, max = 2)
  check_count(ratio, "ratio")
  check_data_frame(data, "data")
  mp <- latkes_maps(maps, map_by, data)
  prep <- latkes_prepare(data, x, y, group, window, outside, order, names(mp), drop_points = drop_points,
                         max_lost = 0.5)
  if (!is.null(drop_points)) inform_dropped_points(prep, drop_points)
  if (is.null(intercept)) {
    # With maps per image the normaliser depends on the image: one surface per image.
    per_image <- any(vapply(mp, `[[`, TRUE, "per_image")) && length(unique(prep$data[[map_by]])) > 1L
    if (per_image) prep$data[[map_by]] <- factor(prep$data[[map_by]])
    intercept <- default_intercept(order, if (per_image) map_by)
  }
  dots <- list(...)
  bad <- setdiff(names(dots), c("cluster", "knots", "sp", "time", "control", "discrete", "shards"))
  if (length(bad) || (length(dots) && is.null(names(dots)))) {
    nce_abort(sprintf("unknown argument(s) in `...`: %s", paste(bad, collapse = ", ")), "input")
  }
  if (missing(group)) warn_ungrouped(data, c(x, y))  # once the arguments are checked
  knots <- utils::modifyList(cyclic_knots(), as.list(dots$knots))
  w <- prep$window
  fit <- fit_snce(kernel, prep$data, ref_uniform(x = w[1:2], y = w[3:4]), ratio = ratio, intercept = intercept,
                  group = ".sequence_id", order = order, time = dots$time,
                  cluster = check_choice(dots$cluster %||% c("transition", "sequence"), c("transition", "sequence"),
                                         "cluster", sys.call()), knots = knots, sp = dots$sp,
                  control = dots$control, call = cl,
                  features = latkes_features(c(mean(w[1:2]), mean(w[3:4])), mp, map_by, w), user_call = sys.call(),
                  formula_arg = "kernel",
                  discrete = if (is.null(dots$discrete)) FALSE else dots$discrete, shards = dots$shards)
  fit$window <- w
  fit$cache <- new.env(parent = emptyenv())
  fit$coords <- c(x = x, y = y)
  fit["group_column"] <- list(group) # may be NULL; `$group` would also match group_setup
  fit$outside <- outside
  fit$dropped <- prep$dropped
  fit["drop_points"] <- list(if (!is.null(drop_points)) check_drop_points(drop_points)) # for held-out data
  fit["maps"] <- list(mp)
  fit["map_by"] <- list(map_by)
  class(fit) <- c("latkes_fit", class(fit))
  as_result(fit, rng = rng, env = parent.frame())
}

# Without `group` the rows are one sequence, so the jump from one trial's last fixation to the next
# trial's first becomes a saccade of the kernel. Warn (nce_warning_group) when the data look like
# several sequences: a column named as a trial or subject id with more than one value, or a
# fixation index that restarts (falls).
warn_ungrouped <- function(data, coords) {
  cols <- setdiff(names(data), coords)
  id_names <- "^(trial|subject|subj|participant|session|group|id|sequence|seq|recording)([._]?(id|nr|no|index))?$"
  ids <- cols[grepl(id_names, cols, ignore.case = TRUE)]
  ids <- ids[vapply(ids, function(v) length(unique(data[[v]])) > 1L, TRUE)]
  idx <- cols[grepl("^(current_)?fix(ation)?([._]?(index|idx|nr|no|number|id))?$", cols, ignore.case = TRUE)]
  idx <- idx[vapply(idx, function(v) is.numeric(data[[v]]) && any(diff(data[[v]]) < 0, na.rm = TRUE), TRUE)]
  if (!length(ids) && !length(idx)) return(invisible(NULL))
  why <- c(if (length(ids) == 1L) sprintf("column %s looks like a trial or subject id", ids),
           if (length(ids) > 1L) sprintf("columns %s look like trial or subject ids", paste(ids, collapse = ", ")),
           if (length(idx) == 1L) sprintf("the fixation index %s restarts", idx),
           if (length(idx) > 1L) sprintf("the fixation indices %s restart", paste(idx, collapse = ", ")))
  fix <- if (length(ids)) sprintf("`group = \"%s\"`", ids[1L]) else "`group` (the trial's column)"
  nce_warn(sprintf(paste("`group` is missing, so the %d rows are fitted as one sequence and the jumps between",
                         "trials as saccades, but %s: pass %s to split the sequences, or `group = NULL` if the",
                         "rows are one sequence"),
                   nrow(data), paste(why, collapse = " and "), fix), "group", call = NULL)
}

cyclic_knots <- function() list(angle = c(-pi, pi), angle_prev = c(-pi, pi), rel_angle = c(-pi, pi))

# Angles wrapped to (-pi, pi].
wrap_angle <- function(a) a - 2 * pi * ceiling((a - pi) / (2 * pi))

latkes_feature_names <- c("dist", "angle", "radius", "dist_prev", "angle_prev", "rel_angle")

# The feature hook stored on the fit: adds the features whose inputs `d` has. Built here so
# that the closure holds the window centre and the maps only.
latkes_features <- function(centre, maps = NULL, map_by = NULL, window = NULL) {
  force(centre)
  force(maps)
  force(map_by)
  force(window)
  function(d) {
    has <- function(v) all(v %in% names(d))
    if (has(c("x", "y"))) {
      d$radius <- sqrt((d$x - centre[1])^2 + (d$y - centre[2])^2)
      if (length(maps)) d <- add_map_features(d, maps, map_by, window)
    }
    # Length and direction in one pass in Rust (R's vector arithmetic made a dozen copies of
    # the stacked rows): the direction in (-pi, pi], 0 with no saccade (see "Input care").
    saccade <- function(x1, y1, x0, y0) {
      rs(nce_saccades(as.double(x1), as.double(y1), as.double(x0), as.double(y0)))
    }
    if (has(c("x", "y", "x_prev", "y_prev"))) {
      s1 <- saccade(d$x, d$y, d$x_prev, d$y_prev)
      d$dist <- s1$dist
      d$angle <- s1$angle
      if (has(c("x_prev2", "y_prev2"))) {
        s0 <- saccade(d$x_prev, d$y_prev, d$x_prev2, d$y_prev2)
        d$dist_prev <- s0$dist
        d$angle_prev <- s0$angle
        d$rel_angle <- wrap_angle(s1$angle - s0$angle)
        d$rel_angle[s0$dist == 0 | s1$dist == 0] <- 0
      }
    }
    d
  }
}

# The default spline intercept: a thin-plate surface in the previous fixation (one per level of
# `by`, plus its main effect), and for order 2 a cyclic term in the previous direction. Knots at
# (at most) 500 of the distinct previous fixations: mgcv's own device for large data (max.knots,
# default 2000), here a quarter of the set-up time of one subject.
default_intercept <- function(order, by = NULL) {
  f <- if (is.null(by)) quote(~ s(x_prev, y_prev, xt = list(max.knots = 500))) else
    bquote(~ s(x_prev, y_prev, by = .(b), xt = list(max.knots = 500)) + .(b), list(b = as.name(by)))
  if (order == 2) f[[2]] <- call("+", f[[2]], quote(s(angle_prev, bs = "cc")))
  eval(f, parent.frame())
}

# Checks the fixations and returns them with columns x, y and .sequence_id (the sequence,
# split where fixations at `drop_points` or outside the window were dropped), and what was dropped.
# Losing more than `max_lost` of the transitions to the window is an error (latkes() asks 0.5;
# held-out data in predict() and logLik() keep the warning).
latkes_prepare <- function(data, x, y, group, window, outside, order, map_names = NULL, drop_points = NULL,
                           max_lost = 1, call = caller_call()) {
  if (missing(call)) call <- sys.call(-1L) # the caller, taken here: the helpers below add frames
  d <- latkes_coordinates(data, x, y, group, map_names, call)
  pts <- check_drop_points(drop_points, call = call)
  at_pt <- at_points(d$x, d$y, pts)
  if (is.null(window)) window <- range_window(d$x[!at_pt], d$y[!at_pt], call = call)
  check_window(window, call = call)
  window <- as.double(window)
  seq0 <- if (is.null(group)) rep(1L, nrow(d)) else d[[group]]
  if (anyNA(seq0)) nce_abort(sprintf("`group` column %s has NA", group), "data")
  out <- !at_pt & (d$x < window[1] | d$x > window[2] | d$y < window[3] | d$y > window[4])
  if (any(out) && outside == "error") {
    nce_abort(sprintf("%d fixation(s) lie outside the window [%g, %g] x [%g, %g] (rows %s); use outside = \"drop\"",
                      sum(out), window[1], window[2], window[3], window[4], format_positions(which(out))),
              "support")
  }
  warn_piles(d$x[!at_pt & !out], d$y[!at_pt & !out], sum(!at_pt))
  gap <- out | at_pt
  keep <- !gap
  # Sequence pieces: a new piece starts after each dropped fixation (no transition across the gap).
  seq_f <- factor(seq0, levels = unique(seq0))
  split_seq <- tapply(gap, seq_f, any)[as.character(seq_f)]
  piece_id <- function(g) {
    if (!any(g)) return(as.character(seq0))
    piece <- stats::ave(as.integer(g), seq_f, FUN = cumsum)
    ifelse(tapply(g, seq_f, any)[as.character(seq_f)], paste0(seq0, ".", piece + 1L), as.character(seq0))
  }
  id <- piece_id(gap)
  # Zero-length saccades: the repeat of the previous kept fixation of the same piece.
  kd <- which(keep)
  rep_fix <- kd[c(FALSE, id[kd][-1] == id[kd][-length(kd)] & diff(d$x[kd]) == 0 & diff(d$y[kd]) == 0)]
  if (length(rep_fix)) {
    nce_warn(sprintf(paste("%d zero-length saccade(s) (a fixation at exactly the previous location, rows %s):",
                           "the repeated fixation is dropped"),
                     length(rep_fix), format_positions(rep_fix)), "zero_length", call = NULL)
    keep[rep_fix] <- FALSE
  }
  # Pieces made short by the split are dropped here and counted; sequences short from the
  # start are left to snce()'s warning.
  n_trans <- function(ids) sum(pmax(table(ids) - order, 0))
  not_rep <- !seq_along(keep) %in% rep_fix
  before <- n_trans(droplevels(seq_f[not_rep]))
  if (any(gap)) {
    n_piece <- table(id[keep])
    short_piece <- keep & split_seq & (n_piece[id] < order + 1L)
    short_piece[is.na(short_piece)] <- FALSE
    keep <- keep & !short_piece
  }
  after_pts <- n_trans(piece_id(at_pt)[not_rep & !at_pt])
  after <- n_trans(id[keep])
  if (any(out)) {
    lost <- after_pts - after
    msg <- sprintf("%d fixation(s) outside the window [%g, %g] x [%g, %g] dropped (rows %s);",
                   sum(out), window[1], window[2], window[3], window[4], format_positions(which(out)))
    if (lost > max_lost * after_pts) {
      nce_abort(sprintf(paste("the window [%g, %g] x [%g, %g] leaves out %d of %d fixations (rows %s), splitting",
                              "their sequences there: %d of %d transitions lost, more than half. Check that",
                              "`window` is the screen, c(xmin, xmax, ymin, ymax) in the units and orientation",
                              "of `%s` and `%s`, or pass a wider window"),
                        window[1], window[2], window[3], window[4], sum(out), sum(!at_pt),
                        format_positions(which(out)), lost, after_pts, x, y), "support", call = call)
    }
    nce_warn(sprintf(paste(msg, "their sequences are split there, losing %d of %d transitions"), lost, after_pts),
             "outside", call = NULL)
  }
  d$.sequence_id <- id
  list(data = d[keep, , drop = FALSE], window = window,
       dropped = list(outside = which(out), zero_length = rep_fix, points = which(at_pt)),
       transitions = c(before = before, after_points = after_pts, after = after))
}

# The checked coordinate columns of the fixations, copied to x and y.
latkes_coordinates <- function(data, x, y, group, map_names, call) {
  check_data_frame(data, "data", call = call)
  check_string(x, "x", call = call)
  check_string(y, "y", call = call)
  for (a in c(x, y)) {
    if (!a %in% names(data)) {
      nce_abort(sprintf("`x` and `y` must name columns of `data`; \"%s\" is not one", a), "input", call = call)
    }
  }
  check_numeric_columns(data, c(x, y), "data", call = call)
  clash <- c(intersect(names(data), c(latkes_feature_names, map_names)),
             setdiff(intersect(names(data), c("x", "y")), c(x, y)))
  if (length(clash)) {
    nce_abort(sprintf("`data` has column(s) %s, names latkes() gives to features or coordinates: rename them",
                      paste(clash, collapse = ", ")), "input", call = call)
  }
  if (!is.null(group) && (!is.character(group) || length(group) != 1L || !group %in% names(data))) {
    nce_abort("`group` must name a column of `data`", "input", call = call)
  }
  d <- data
  d$x <- as.double(data[[x]])
  d$y <- as.double(data[[y]])
  bad <- which(!is.finite(d$x) | !is.finite(d$y))
  if (length(bad)) {
    nce_abort(sprintf("missing or non-finite coordinates in %d row(s) (%s): split the sequence with `group` or impute",
                      length(bad), format_positions(bad)), "data", call = call)
  }
  d
}

# `drop_points` as a 2-column matrix (one point per row), or NULL.
check_drop_points <- function(p, call = caller_call()) {
  if (is.null(p)) return(NULL)
  if (is.list(p) && !is.data.frame(p)) {
    ok <- vapply(p, function(q) is.numeric(q) && length(q) == 2L, logical(1))
    if (length(p) && all(ok)) p <- do.call(rbind, p)
  } else if (is.numeric(p) && is.null(dim(p)) && length(p) == 2L) {
    p <- matrix(p, 1L)
  }
  if (!is.matrix(p) || !is.numeric(p) || ncol(p) != 2L || !nrow(p) || any(!is.finite(p))) {
    nce_abort(paste("`drop_points` must be NULL, a point c(x, y), a 2-column matrix of points or a list of",
                    "points, finite"), "input", call = call)
  }
  unname(p + 0)
}

# Rows at exactly one of the points.
at_points <- function(x, y, pts) {
  hit <- rep(FALSE, length(x))
  for (i in seq_len(NROW(pts))) hit <- hit | (x == pts[i, 1] & y == pts[i, 2])
  hit
}

format_point <- function(p) sprintf("(%s)", paste(as.character(p), collapse = ", "))

# window = NULL: the range of the fixations, said in a message since it moves the centre
# that `radius` is measured from.
range_window <- function(x, y, call = caller_call()) {
  if (!length(x)) nce_abort("`drop_points` leaves no fixation to take the window from", "data", call = call)
  w <- c(range(x), range(y))
  nce_inform(sprintf(paste("window = NULL: using the range of the fixations, c(%s); give `window` (the screen)",
                           "to measure `radius` from the screen's centre"),
                     paste(signif(w, 5), collapse = ", ")), "window")
  w
}

# What `drop_points` removed, said once per fit.
inform_dropped_points <- function(prep, drop_points) {
  pts <- check_drop_points(drop_points)
  where <- paste(apply(pts, 1, format_point), collapse = ", ")
  n <- length(prep$dropped$points)
  tr <- prep$transitions
  msg <- if (n) {
    sprintf("drop_points: %d fixation(s) at %s dropped; their sequences are split there, losing %d of %d transitions",
            n, where, tr[["before"]] - tr[["after_points"]], tr[["before"]])
  } else {
    sprintf("drop_points: no fixation sits at %s", where)
  }
  nce_inform(msg, "drop_points")
}

# More than 1% (and at least 3) of the fixations at one identical point is rarely a look: often an
# eye tracker's code (e.g. (0, 0) for a lost eye), which a continuous kernel cannot explain.
warn_piles <- function(x, y, n) {
  if (length(x) < 3L) return(invisible())
  # Only rows whose x and whose y each reach the count can be in a pile: the pasted keys and
  # their table (2 s for the 117,600 fixations of 56 subjects) are made for those rows alone.
  min_count <- max(3, floor(0.01 * n) + 1)
  frequent <- function(v) {
    u <- unique(v)
    v %in% u[tabulate(match(v, u), length(u)) >= min_count]
  }
  cand <- which(frequent(x))
  cand <- cand[frequent(y[cand])]
  if (!length(cand)) return(invisible())
  key <- paste(x[cand], y[cand], sep = "\r")
  tab <- table(key)
  big <- tab[tab >= 3L & tab > 0.01 * n]
  if (!length(big)) return(invisible())
  big <- big[order(-big)]
  first <- cand[match(names(big), key)]
  pts <- cbind(x[first], y[first])
  as_arg <- function(p) sprintf("c(%s)", paste(as.character(p), collapse = ", "))
  where <- sprintf("%d of %s fixations (%.1f%%) sit at exactly %s", as.integer(big), format(n, big.mark = ","),
                   100 * as.integer(big) / n, apply(pts, 1, format_point))
  args <- apply(pts, 1, as_arg)
  arg <- if (length(big) == 1L) args else sprintf("list(%s)", paste(args, collapse = ", "))
  nce_warn(sprintf("%s: a tracker code for a lost eye? drop them with `drop_points = %s`",
                   paste(where, collapse = "; "), arg), "pile", call = NULL)
}
