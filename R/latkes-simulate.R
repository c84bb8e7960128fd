# Simulation of LATKES chains on a grid: the log kernel is tabulated in R as a state part
# (cell centres) and an offset part (centre-to-centre offsets), and the chains run in Rust
# (src/rust/nce-core/src/latkes_sim.rs).

#' Simulate LATKES fixation sequences from a known kernel
#'
#' Generates first-order chains with
#' \deqn{p(y_t \mid y_{t-1}) \propto \exp\{b(|y_t - c|) + h_x(x_t) + h_y(y_t) + h(x_t, y_t)
#'   + r_d(|y_t - y_{t-1}|) + r_a(\angle(y_t - y_{t-1}))\}}
#' on the window (c its centre), from user functions for any subset of the
#' terms.
#'
#' @section Resolution: The simulation is exact for the kernel discretised on
#'   `grid` cells over the window: each step draws a cell with probability
#'   proportional to the kernel evaluated at the cell's centre, the previous
#'   fixation being replaced by the centre of its own cell, then a position
#'   uniform within the cell. With the default 256 x 192 cells on a
#'   1024 x 768 screen the cells are 4 pixels wide, so positions and saccade
#'   lengths are exact to about 3 pixels. Within the previous fixation's own
#'   cell the direction is undefined and the angle term is replaced by its
#'   average over the circle. The first fixation of each trial is drawn from
#'   the state terms alone (`radius`, `x`, `y`, `xy`; uniform without them).
#'   Chains run in parallel in Rust, one seeded stream per trial, seeded from
#'   R's RNG: `set.seed()` makes the result reproducible and it does not depend
#'   on `options(nce.threads)`.
#'
#' @param n Fixations per subject.
#' @param kernel Named list of vectorised functions (log scale): `radius`
#'   (distance to the window centre), `dist` (saccade length), `angle`
#'   (saccade direction on \eqn{(-\pi, \pi]}, 0 along +x), `x`, `y` (each
#'   coordinate) and `xy` (a function of both coordinates). Or a list of such
#'   lists, one per subject.
#' @param window `c(xmin, xmax, ymin, ymax)`.
#' @param n_subjects Number of subjects.
#' @param n_trials Trials (independent sequences) per subject; the `n`
#'   fixations are split evenly between them.
#' @param grid Cells along x and y, see Resolution.
#' @param maps `NULL`, or spatial covariates as in [latkes()]: a named list
#'   whose elements are matrices over the window or named lists of them (one
#'   per image). `kernel` may then hold a function of each map's value, e.g.
#'   `saliency = function(v) 2 * v`, a state term of the kernel.
#' @param images With maps per image: the image of each trial (recycled over
#'   the trials of each subject); by default the trials cycle through the
#'   names of the first list of maps.
#' @return Data frame with columns `subject`, `trial`, `fixation` (index
#'   within the trial), `x`, `y` (and `image` with maps per image);
#'   attributes `window` and `grid`.
#' @section What it refuses:
#' * `n_subjects` or `n_trials` not a whole number >= 1, `n` not a whole number >= `n_trials`
#'   (each trial needs a fixation) (`nce_error_input`);
#' * `window` not four finite numbers with xmin < xmax, ymin < ymax and finite widths; `grid`
#'   not two whole numbers >= 1 (`nce_error_input`);
#' * kernel tables for `grid`, or `n` fixations, that would not fit in memory
#'   (`nce_error_size`, checked before allocating);
#' * `kernel` not a named list of functions (or one such list per subject), a kernel function
#'   not returning one number (or -Inf) per input, `maps` or `images` not as [latkes()] takes
#'   them (`nce_error_input`); an image id without a map (`nce_error_data`).
#' @examples
#' set.seed(1)
#' k <- list(radius = function(r) -r / 200, dist = function(d) -d / 100,
#'           angle = function(a) 0.5 * cos(4 * a))
#' d <- rlatkes(2000, k, window = c(0, 1024, 0, 768), n_subjects = 2, n_trials = 4)
#' head(d)
#' @export
rlatkes <- function(n, kernel, window = c(0, 1024, 0, 768), n_subjects = 1, n_trials = 1, grid = c(256, 192),
                    maps = NULL, images = NULL) {
  check_count(n_subjects, "n_subjects")
  check_count(n_trials, "n_trials")
  check_count(n, "n", min = n_trials)
  n_subjects <- as.integer(n_subjects)
  n_trials <- as.integer(n_trials)
  n <- as.integer(n)
  check_window(window)
  check_grid(grid)
  # Tables of the kernel: grid cells and twice as many offsets per axis, per image.
  check_size(8 * 4 * prod(2 * as.double(grid)) * 6, "grid", "the kernel tables")
  # At the peak: the lattice run's coordinates, split(), two rbind() copies and the data frames.
  check_size(8 * as.double(n) * n_subjects * 32, "n", "the simulated fixations")
  mp <- latkes_maps(maps, if (any(vapply(maps, function(m) is.list(m) && !is.data.frame(m), TRUE))) "image")
  kernels <- if (is_kernel_list(kernel, names(mp))) rep(list(kernel), n_subjects) else kernel
  if (!is.list(kernels) || length(kernels) != n_subjects || !all(vapply(kernels, is_kernel_list, TRUE, names(mp)))) {
    nce_abort(paste("`kernel` must be a named list of functions (radius, dist, angle, x, y, xy, or the names of",
                    "`maps`) or a list of such lists, one per subject"), "input")
  }
  per_image <- Filter(function(m) m$per_image, mp)
  ids <- if (length(per_image)) {
    if (is.null(images)) images <- names(per_image[[1]]$mats)
    if (!is.character(images) || !length(images) || anyNA(images)) {
      nce_abort("`images` must be image ids (character)", "input")
    }
    ids <- rep_len(images, n_trials)
    for (nm in names(per_image)) map_index(per_image[[nm]], nm, ids, "images")
    ids
  } else {
    if (!is.null(images)) nce_abort("`images` is given but `maps` holds no lists of maps per image", "input")
    rep("", n_trials)
  }
  len <- diff(round(seq(0, n, length.out = n_trials + 1L)))
  centre <- c(mean(window[1:2]), mean(window[3:4]))
  out <- lapply(seq_len(n_subjects), function(s) {
    k <- kernels[[s]]
    term <- function(name, ...) {
      if (is.null(k[[name]])) numeric(length(..1)) else check_values(k[[name]](...), name, length(..1))
    }
    offset <- function(dx, dy) term("dist", sqrt(dx^2 + dy^2)) + term("angle", wrap_angle(atan2(dy, dx)))
    # One table per image: the map terms are state terms.
    xy <- vector("list", n_trials)
    for (id in unique(ids)) {
      state <- function(x, y) {
        v <- term("radius", sqrt((x - centre[1])^2 + (y - centre[2])^2)) + term("x", x) + term("y", y) +
          term("xy", x, y)
        if (length(mp)) {
          cells <- add_map_features(data.frame(x = x, y = y, image = rep(id, length(x))), mp, "image", window)
          for (nm in names(mp)) v <- v + term(nm, cells[[nm]])
        }
        v
      }
      tr <- which(ids == id)
      tab <- lattice_tables(window, grid, state, offset)
      # Named as the user wrote it (the engine's tables are `state` and `offset`).
      for (part in c("state", "offset")) {
        if (!any(tab[[part]] > -Inf)) {
          nce_abort(sprintf("`kernel` is -Inf at every %s: no fixation has any weight",
                            if (part == "state") "position of the window" else "move between grid cells"),
                    "input")
        }
      }
      run <- run_lattice(tab, window, grid, rep(NA_real_, length(tr)), rep(NA_real_, length(tr)), len[tr] - 1L)
      xy[tr] <- split(data.frame(x = run$x, y = run$y), rep(seq_along(tr), len[tr]))
    }
    xy <- do.call(rbind, xy)
    out <- data.frame(subject = s, trial = rep(seq_len(n_trials), len), fixation = sequence(len), x = xy$x, y = xy$y)
    if (length(per_image)) out$image <- rep(ids, len)
    out
  })
  out <- do.call(rbind, out)
  rownames(out) <- NULL
  structure(out, window = window, grid = grid)
}

is_kernel_list <- function(k, map_names = NULL) {
  is.list(k) && length(k) > 0L && !is.null(names(k)) &&
    all(names(k) %in% c("radius", "dist", "angle", "x", "y", "xy", map_names)) && all(vapply(k, is.function, TRUE))
}

check_values <- function(v, name, n) {
  if (!is.numeric(v) || length(v) != n || anyNA(v) || any(v == Inf)) {
    nce_abort(sprintf("kernel function `%s` must return one number (or -Inf) per input, vectorised", name), "input")
  }
  v
}

# A finite window whose widths are finite too (c(-1e308, 1e308, ...) overflows).
check_window <- function(window, call = caller_call()) {
  if (!is.numeric(window) || length(window) != 4L || any(!is.finite(window)) ||
      window[1] >= window[2] || window[3] >= window[4] || any(!is.finite(c(window[2] - window[1],
                                                                            window[4] - window[3])))) {
    nce_abort(paste("`window` must be c(xmin, xmax, ymin, ymax), finite, with xmin < xmax and ymin < ymax",
                    "and finite widths"), "input", call = call)
  }
}

check_grid <- function(grid, call = caller_call()) {
  if (!is.numeric(grid) || length(grid) != 2L || any(!is.finite(grid)) || any(grid < 1) || any(grid != round(grid))) {
    nce_abort("`grid` must be two positive whole numbers (cells along x and y)", "input", call = call)
  }
}

# Log kernel tables: `state(x, y)` at the cell centres (x fastest) and `offset(dx, dy)` at
# the centre-to-centre offsets (dx fastest, offset 0 in the middle). At offset 0 the
# direction is undefined: there the offset part is averaged over directions at a tiny
# distance.
lattice_tables <- function(window, grid, state, offset) {
  nx <- grid[1]
  ny <- grid[2]
  cw <- (window[2] - window[1]) / nx
  ch <- (window[4] - window[3]) / ny
  cells <- expand.grid(x = window[1] + (seq_len(nx) - 0.5) * cw, y = window[3] + (seq_len(ny) - 0.5) * ch)
  off <- expand.grid(dx = seq(-(nx - 1), nx - 1) * cw, dy = seq(-(ny - 1), ny - 1) * ch)
  g <- offset(off$dx, off$dy)
  th <- seq(-pi, pi, length.out = 65)[-1]
  eps <- 1e-9 * min(cw, ch)
  g[(ny - 1) * (2 * nx - 1) + nx] <- mean(offset(eps * cos(th), eps * sin(th)))
  list(state = as.double(state(cells$x, cells$y)), offset = as.double(g))
}

run_lattice <- function(tab, window, grid, start_x, start_y, steps) {
  rs(nce_latkes_simulate(tab$state, tab$offset,
                         list(start_x = as.double(start_x), start_y = as.double(start_y), steps = as.integer(steps)),
                         list(grid = as.integer(grid), window = as.double(window), seed = draw_seed(),
                              threads = nce_threads())))
}

# Kernel term labels split into state terms (x, y, radius) and saccade terms (dist, angle),
# or NULL when some term fits neither (or the chain is not first order).
kernel_parts <- function(object) {
  if (object$order != 1L) return(NULL)
  labels <- unique(term_labels(object)[kernel_columns(object)$coef])
  vars_of <- function(lab) {
    sm <- Filter(function(s) s$label == lab, object$smooth)
    v <- if (length(sm)) c(sm[[1]]$term, if (!identical(sm[[1]]$by, "NA")) sm[[1]]$by) else
      all.vars(stats::reformulate(lab))
    v
  }
  state <- offset <- character()
  for (lab in labels) {
    v <- vars_of(lab)
    if (all(v %in% c("x", "y", "radius", names(object[["maps"]])))) state <- c(state, lab)
    else if (all(v %in% c("dist", "angle"))) offset <- c(offset, lab)
    else return(NULL)
  }
  list(state = state, offset = offset)
}
