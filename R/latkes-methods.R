# Methods for LATKES fits: printing, prediction with the grid-normalised density, the
# log-likelihood of sequences, and the estimated kernel terms.

#' @export
print.latkes_fit <- function(x, ...) {
  NextMethod()
  w <- x$window
  cat(sprintf("LATKES window [%g, %g] x [%g, %g]", w[1], w[2], w[3], w[4]))
  nd <- lengths(x$dropped)
  if (any(nd > 0)) {
    cat(sprintf("; dropped: %d outside, %d zero-length saccade(s)", nd[["outside"]], nd[["zero_length"]]))
    if ("points" %in% names(nd) && nd[["points"]] > 0) cat(sprintf(", %d at drop_points", nd[["points"]]))
  }
  cat("\n")
  invisible(x)
}

#' Predict from a LATKES fit
#'
#' The log kernel, term contributions, or the transition density normalised
#' numerically over the window.
#'
#' `newdata` is either transitions in the fit's internal names (the fixation
#' at time t in `x`, `y`, the previous one in `x_prev`, `y_prev`, and
#' `x_prev2`, `y_prev2` for `order = 2`, plus any covariates of the formulas
#' and, for a fit with maps per image, the `map_by` column), or raw fixations
#' shaped like the training data (coordinates under their original names, the
#' `group` column, covariates; no `x_prev`): latkes() then builds the
#' transitions itself, as in fitting, and returns one value per row of
#' `newdata`, `NA` for fixations that have no previous fixation in their
#' sequence (the first `order` of each) or were dropped (outside the window,
#' zero-length saccades). The features (`dist`, `angle`, `radius`, map
#' values, ...) are computed from the coordinates.
#'
#' With `normalise = "grid"`, the log normaliser of each transition,
#' \eqn{\log \int_W \exp\{f(u, y_{t-1})\}\,du}, is computed by the midpoint
#' rule on `grid` cells over the window (64 x 48 by default), with the
#' `refine` x `refine` cells nearest the previous fixation (where the saccade
#' length and direction change fastest: direction is undefined at the previous
#' fixation) split into 8 x 8 sub-cells; with `extrapolate`
#' (default) the rule is also applied on a grid twice as fine and the two are
#' combined by Richardson extrapolation, \eqn{(4 Z_{h/2} - Z_h) / 3}. The rule
#' runs in Rust, in parallel over transitions (`options(nce.threads)`; the
#' result does not depend on the number of threads): each kernel term is a
#' function of one feature that varies over the window (`x`, `y`, `radius`,
#' `dist`, `angle`, `rel_angle` or a map), tabulated once on 8,193 values and
#' interpolated linearly (within 3e-7 of a 16 times finer table on the real
#' fixations of the demo), about 33,000 points per transition, read as a
#' product of table entries (four points at a time with AVX2): on the 777
#' real transitions of the demo the normaliser takes about the fit's own time,
#' twice that with the gradient for `se.fit`. A term in two
#' such features (`te(dist, angle)`, `s(x, y)`) cannot be tabulated so: the
#' kernel is then evaluated in R at every point, about 100 times slower.
#' Accuracy, against 1-pixel cells (themselves within 1e-4 of half-pixel
#' cells): the density integrates to 1 within 1e-3 on the simulated scanpaths
#' of the tests and within 3.4e-3 on the real fixations of the demo, whose
#' short saccades make the kernel peak at the previous fixation; a finer
#' `grid` (and `refine`) gives more. The standard error includes the normaliser's
#' dependence on the coefficients (its gradient is the kernel's design row
#' averaged under the fitted transition density). It is the default, and what
#' [logLik()], [summary()], [AIC()], `broom::glance()` and [fitted()] use too,
#' so that they agree; the normaliser of the fit's own transitions is computed
#' once and kept. `normalise = "intercept"` uses the spline intercept's NCE
#' estimate of minus the log normaliser instead (as [predict.snce_fit()] does):
#' one design row per transition, but an estimate (on the real fixations of
#' the demo at ratio 10 it puts the log-likelihood 154 below the grid's, 0.19
#' per transition).
#'
#' @inheritParams nce_vocabulary
#' @param newdata Data frame as described; the observed transitions by default.
#' @param type `"log_kernel"`, `"terms"`, `"link"` (the log transition
#'   density, also called `"log_density"`), `"response"` (the normalised
#'   transition density at `x`, `y` given the previous fixation, also called
#'   `"density"`; 0 outside the window) or `"lpmatrix"` (only with
#'   `normalise = "intercept"`: the grid normaliser is not linear in the
#'   coefficients).
#' @param se.fit Also return standard errors (delta method for the density).
#' @param normalise `"grid"` (default) or `"intercept"`, see Details.
#' @param grid Cells per axis of the normalising grid.
#' @param refine Cells per axis around the previous fixation split into 8 x 8
#'   sub-cells (an odd whole number; 0 for none).
#' @param extrapolate Richardson extrapolation from `grid` and a grid twice as
#'   fine (`TRUE`, default) or the midpoint rule on `grid` alone.
#' @return As [predict.snce_fit()].
#' @examples
#' set.seed(1)
#' d <- rlatkes(400, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768))
#' fit <- latkes(d, window = c(0, 1024, 0, 768), ratio = 10, kernel = ~ s(dist))
#' nd <- data.frame(x = c(520, 700), y = 400, x_prev = 512, y_prev = 384)
#' predict(fit, nd, type = "density")
#' predict(fit, d[1:5, ], type = "link")   # raw fixations: NA for the first
#' @export
predict.latkes_fit <- function(object, newdata, type = c("link", "log_kernel", "response", "log_density", "density",
                                                         "lpmatrix", "terms"),
                               se.fit = FALSE,  # nolint: object_name_linter.
                               normalise = c("grid", "intercept"), grid = c(64, 48), refine = 7,
                               extrapolate = TRUE, se_type = c("sandwich", "naive"), ...) {
  type <- predict_type(type)
  type <- switch(type, log_density = "link", density = "response", type)
  normalise <- match_choice(normalise)
  se_type <- match_choice(se_type)
  check_bool(se.fit, "se.fit")
  own <- missing(newdata) || is.null(newdata)
  if (own) {
    newdata <- object$transitions
  } else {
    check_data_frame(newdata, "newdata", min_rows = 0L)
    if (!all(c("x_prev", "y_prev") %in% names(newdata))) {
      return(predict_raw_fixations(object, newdata, type = type, se_fit = se.fit, normalise = normalise,
                                   grid = grid, refine = refine, extrapolate = extrapolate, se_type = se_type))
    }
    check_transition_rows(object, newdata)
  }
  # No rows: nothing to normalise (the intercept path gives the empty result of each type).
  if (type %in% c("log_kernel", "terms") || normalise == "intercept" || nrow(newdata) == 0L) {
    t2 <- if (type == "response") "link" else type
    # The fit's own transitions go as no newdata: per-transition intercepts exist only there.
    res <- predict.snce_fit(object, if (!own) newdata, type = t2, se.fit = se.fit, se_type = se_type)
    if (type != "response") return(res)
    if (!se.fit) return(exp(res) * inside_window(object, newdata))
    f <- exp(res$fit) * inside_window(object, newdata)
    return(list(fit = f, se.fit = f * res$se.fit))
  }
  if (type == "lpmatrix") {
    nce_unsupported("predict(type = \"lpmatrix\", normalise = \"grid\")", object,
                    "the grid normaliser is not linear in the coefficients; use normalise = \"intercept\"")
  }
  newdata <- object$features(newdata)
  k <- kernel_columns(object)
  xk <- setup_predict(object$row_setup, newdata, k$intercept)[, k$design, drop = FALSE]
  beta <- object$coefficients[k$coef]
  nz <- cached_normaliser(object, newdata, grid, se.fit, refine, extrapolate)
  fit <- drop(xk %*% beta) - nz$log_z
  inside <- inside_window(object, newdata)
  fit[!inside] <- -Inf
  names(fit) <- rownames(newdata)
  se <- NULL
  if (se.fit) {
    g <- xk - nz$mean_x
    v <- stats::vcov(object, se_type = se_type)[k$coef, k$coef, drop = FALSE]
    se <- stats::setNames(sqrt(rowSums((g %*% v) * g)), rownames(newdata))
    se[!inside] <- 0
  }
  if (type == "response") {
    fit <- exp(fit)
    if (se.fit) se <- fit * se
  }
  if (se.fit) list(fit = fit, se.fit = se) else fit
}

# Exactly 0 density (log density -Inf) outside the window: the kernel's support.
inside_window <- function(object, nd) {
  w <- object$window
  nd$x >= w[1] & nd$x <= w[2] & nd$y >= w[3] & nd$y <= w[4]
}

# Transitions given in the internal names: the columns the fit needs, without NA.
check_transition_rows <- function(object, nd, call = caller_call()) {
  need <- c("x", "y", "x_prev", "y_prev", if (object$order == 2) c("x_prev2", "y_prev2"))
  check_newdata_columns(nd, need, sprintf("give transitions (%s) or raw fixations", paste(need, collapse = ", ")),
                        call = call)
  check_numeric_columns(nd, need, "newdata", call = call)
  bad <- which(!rows_finite(nd[need]))
  if (length(bad)) {
    nce_abort(sprintf("`newdata` has NA or non-finite coordinates in %d row(s) (%s): drop or impute them",
                      length(bad), format_positions(bad)), "input", call = call)
  }
  invisible(nd)
}

# Raw fixations: build the transitions as latkes() does and return one value per row.
predict_raw_fixations <- function(object, newdata, type, se_fit, normalise, grid, refine, extrapolate, se_type) {
  xc <- object$coords[["x"]]
  yc <- object$coords[["y"]]
  if (!all(c(xc, yc) %in% names(newdata))) {
    nce_abort(sprintf(paste("`newdata` has neither transitions (x, y, x_prev, y_prev) nor raw fixations",
                            "(coordinate columns %s, %s)"), xc, yc), "input", call = NULL)
  }
  if (type == "terms") nce_abort("type = \"terms\" needs transitions (x, y, x_prev, y_prev), not raw fixations",
                                 "input", call = NULL)
  g <- object[["group_column"]]
  if (!is.null(g) && !g %in% names(newdata)) {
    nce_abort(sprintf("raw fixations in `newdata` need the group column %s", g), "input", call = NULL)
  }
  fit <- rep(NA_real_, nrow(newdata))
  se <- rep(NA_real_, nrow(newdata))
  names(fit) <- names(se) <- rownames(newdata)
  if (nrow(newdata) == 0L) return(if (se_fit) list(fit = fit, se.fit = se) else fit)  # no fixations: empty
  d <- newdata
  d$.row <- seq_len(nrow(d))
  prep <- suppressWarnings(latkes_prepare(d, xc, yc, g, object$window, "drop", object$order,
                                          names(object[["maps"]]), drop_points = object[["drop_points"]]))
  st <- tryCatch(suppressWarnings(sequence_transitions(prep$data, c("x", "y"), ".sequence_id", object$order, NULL)),
                 nce_error_data = function(e) NULL)
  if (!is.null(st)) {
    p <- predict.latkes_fit(object, st$trans, type = type, se.fit = TRUE, normalise = normalise, grid = grid,
                            refine = refine, extrapolate = extrapolate, se_type = se_type)
    fit[st$trans$.row] <- p$fit
    se[st$trans$.row] <- p$se.fit
  }
  if (se_fit) list(fit = fit, se.fit = se) else fit
}

# Kernel part of the row design: its columns in setup_predict()'s matrix and in coef().
kernel_columns <- function(object) {
  a_int <- !identical(object$row_setup$intercept, FALSE) && object$intercept$type != "transition"
  pa <- object$row_setup$ncol
  list(intercept = a_int, design = if (a_int) seq_len(pa)[-1L] else seq_len(pa),
       coef = if (a_int) seq_len(pa)[-1L] else seq_len(pa))
}

# The log kernel (its terms `labels`, all by default) at the rows of `nd`, which has the
# features. One-dimensional smooths without `by` are evaluated on 4096 points over the range
# of their variable and interpolated linearly: mgcv's PredictMat() on millions of grid rows
# is what makes numerical normalisation slow, and the interpolation error is negligible.
kernel_eta <- function(object, nd, labels = NULL) {
  k <- kernel_columns(object)
  lab <- term_labels(object)
  beta <- object$coefficients
  if (is.null(labels)) labels <- unique(lab[k$coef])
  total <- rep(0, nrow(nd))
  ps <- object$row_setup
  ps$smooth <- list()
  pa <- object$row_setup$ncol
  first <- vapply(object$smooth, `[[`, 0L, "first.para")
  n_par <- if (any(first <= pa)) min(first[first <= pa]) - 1L else pa
  par_cols <- intersect(k$coef, seq_len(n_par))
  par_cols <- par_cols[lab[par_cols] %in% labels]
  if (length(par_cols)) {
    xp <- setup_predict(ps, nd, k$intercept)
    total <- total + drop(xp[, par_cols, drop = FALSE] %*% beta[par_cols])
  }
  for (sm in object$smooth) {
    if (sm$first.para > object$row_setup$ncol || !sm$label %in% labels) next
    j <- sm$first.para:sm$last.para
    if (sm$dim == 1L && identical(sm$by, "NA") && length(unique(range(nd[[sm$term]]))) == 2L) {
      v <- nd[[sm$term]]
      g <- seq(min(v), max(v), length.out = 4096)
      f <- drop(mgcv::PredictMat(sm, stats::setNames(data.frame(g), sm$term)) %*% beta[j])
      total <- total + stats::approx(g, f, v)$y
    } else {
      total <- total + drop(mgcv::PredictMat(sm, nd) %*% beta[j])
    }
  }
  total
}

#' Log-likelihood of fixation sequences under a LATKES fit
#'
#' Sums the log transition densities over the transitions of the fit's own data
#' or of held-out sequences, so that kernels can be compared on the same data.
#' Each density is normalised numerically on a grid over the window
#' (`normalise = "grid"`, the default, see [predict.latkes_fit()]; the number
#' that [summary()], [AIC()] and `broom::glance()` report too) or by the fitted
#' intercept (`normalise = "intercept"`: NCE's estimate of minus the log
#' normaliser, fast but an estimate).
#'
#' @inheritParams nce_vocabulary
#' @param newdata `NULL` (the fit's transitions) or a data frame of fixations
#'   with the columns the fit used (coordinates under their original names,
#'   `group`, covariates); it is prepared as in [latkes()] (fixations outside
#'   the window, zero-length saccades).
#' @param normalise `"grid"` (default) or `"intercept"`.
#' @param grid,refine,extrapolate The normalising grid, see [predict.latkes_fit()].
#' @return An object of class `logLik` with attributes `df` and `nobs`
#'   (transitions). `df` counts what the normalised density estimates: the
#'   kernel's effective degrees of freedom with `normalise = "grid"`, the
#'   kernel's and the intercept's with `"intercept"`.
#' @examples
#' set.seed(1)
#' d <- rlatkes(400, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768),
#'              n_trials = 2)
#' fit <- latkes(d[d$trial == 1, ], window = c(0, 1024, 0, 768), ratio = 10, kernel = ~ s(dist))
#' # A coarser normalising grid than the default, for speed: here within 0.01 of the default's value.
#' # A coarser normalising grid than the default, for speed: here within 0.01 of the default's value.
#' logLik(fit, newdata = d[d$trial == 2, ], grid = c(32, 24), refine = 1)
#' logLik(fit, newdata = d[d$trial == 2, ], normalise = "intercept")
#' @export
logLik.latkes_fit <- function(object, newdata = NULL, normalise = c("grid", "intercept"), grid = c(64, 48),
                              refine = 7, extrapolate = TRUE, ...) {
  normalise <- check_choice(normalise, c("grid", "intercept"), "normalise")
  trans <- if (is.null(newdata)) {
    object$transitions
  } else {
    check_data_frame(newdata, "newdata")
    prep <- latkes_prepare(newdata, object$coords[["x"]], object$coords[["y"]], object[["group_column"]], object$window,
                           object$outside, object$order, names(object[["maps"]]), drop_points = object[["drop_points"]])
    sequence_transitions(prep$data, c("x", "y"), ".sequence_id", object$order, NULL)$trans
  }
  ld <- predict.latkes_fit(object, if (!is.null(newdata)) trans, type = "link", normalise = normalise, grid = grid,
                           refine = refine, extrapolate = extrapolate)
  df <- if (normalise == "grid") sum(object$edf[kernel_columns(object)$coef]) else snce_df(object)
  structure(sum(ld), df = df, nobs = length(ld), class = "logLik")
}

#' Estimated kernel terms of a LATKES fit
#'
#' Each one-dimensional smooth term of the kernel evaluated on a grid over its
#' natural range: angles on \eqn{(-\pi, \pi]}, `dist` and `radius` from 0 to
#' their largest observed value, other variables over their observed range.
#' Terms are as fitted, i.e. centred by their identifiability constraint over
#' the data and reference rows.
#'
#' @param object A `latkes_fit` or `latkes_collection`.
#' @param n_grid Grid points per term.
#' @param level Confidence level of the bands.
#' @inheritParams nce_vocabulary
#' @param range Optional named list of ranges, e.g. `list(dist = c(0, 400))`.
#' @return A named list (by term label) of data frames with columns `value`,
#'   `fit`, `se`, `lower`, `upper`; attributes `variable` and `edf`. For a
#'   collection, a list of data frames with one column of curves per fit
#'   (`fit_<level>`), centred to mean zero, and their pointwise `mean`.
#' @section What it refuses:
#' * for a `latkes_fit`, `n_grid` not a whole number >= 2 or `level` not a number strictly between
#'   0 and 1, or `se_type` not "sandwich" or "naive" (`nce_error_input`); a grid whose basis
#'   rows would not fit in memory (`nce_error_size`).
#' @examples
#' set.seed(1)
#' d <- rlatkes(400, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768))
#' fit <- latkes(d, window = c(0, 1024, 0, 768), ratio = 10, kernel = ~ s(dist))
#' head(latkes_effects(fit)[["s(dist)"]])
#' @export
latkes_effects <- function(object, ...) UseMethod("latkes_effects")

#' @rdname latkes_effects
#' @export
latkes_effects.latkes_fit <- function(object, n_grid = 200, level = 0.95, se_type = c("sandwich", "naive"),
                                      range = NULL, ...) {
  check_count(n_grid, "n_grid", min = 2)
  check_probability(level, "level")
  # Each term's grid rows of its basis, and their products with the covariance.
  k_max <- max(0, vapply(object$smooth, function(sm) sm$last.para - sm$first.para + 1, 0))
  check_size(8 * as.double(n_grid) * (3 * k_max + 8), "n_grid", "latkes_effects()")
  v <- stats::vcov(object, se_type = check_choice(se_type, c("sandwich", "naive"), "se_type"))
  z <- stats::qnorm(1 - (1 - level) / 2)
  pa <- object$row_setup$ncol
  out <- list()
  for (sm in object$smooth) {
    if (sm$first.para > pa || sm$dim != 1L) next
    var <- sm$term
    r <- if (!is.null(range[[var]])) range[[var]] else effect_range(object, var)
    nd <- stats::setNames(data.frame(seq(r[1], r[2], length.out = n_grid)), var)
    if (!identical(sm$by, "NA")) {
      src <- object$nce_frame[[sm$by]]
      nd[[sm$by]] <- if (!is.null(sm$by.level)) factor(sm$by.level, levels = levels(src)) else 1
    }
    j <- sm$first.para:sm$last.para
    xm <- mgcv::PredictMat(sm, nd)
    f <- drop(xm %*% object$coefficients[j])
    se <- sqrt(rowSums((xm %*% v[j, j, drop = FALSE]) * xm))
    out[[sm$label]] <- structure(data.frame(value = nd[[var]], fit = f, se = se, lower = f - z * se,
                                            upper = f + z * se),
                                 variable = var, edf = sum(object$edf[j]))
  }
  out
}

# Natural plotting range of a kernel variable.
effect_range <- function(object, var) {
  if (var %in% c("angle", "angle_prev", "rel_angle")) return(c(-pi, pi))
  w <- object$window
  if (var %in% c("x", "x_prev")) return(w[1:2])
  if (var %in% c("y", "y_prev")) return(w[3:4])
  obs <- object$nce_frame[[var]][object$nce_frame$.label == 1]
  if (var %in% c("dist", "radius", "dist_prev")) c(0, max(obs)) else range(obs)
}

#' Plot a LATKES fit
#'
#' Each kernel term on its natural scale with its confidence band: saccade
#' direction on \eqn{(-\pi, \pi]} with the cardinal directions marked (or as a
#' polar plot of the multiplicative effect \eqn{\exp(f)}), distances in the
#' data's units; two-dimensional terms (the spline intercept in the previous
#' fixation, `s(x, y)`) as images over the window.
#'
#' @inheritParams nce_vocabulary
#' @param select Which parts to draw: `"kernel"`, `"intercept"` or both.
#' @param angle `"line"` or `"polar"`: how to draw angle terms.
#' @param level Confidence level of the bands.
#' @param n_grid Grid points per term.
#' @param combine Put all panels in one figure (sets `par(mfrow)` and restores it).
#' @param col Colour of the curves.
#' @return The kernel effects ([latkes_effects()]), invisibly.
#' @examples
#' set.seed(1)
#' d <- rlatkes(400, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768))
#' fit <- latkes(d, window = c(0, 1024, 0, 768), ratio = 10, kernel = ~ s(dist) + s(angle, bs = "cc"))
#' plot(fit)
#' @export
plot.latkes_fit <- function(x, select = c("kernel", "intercept"), angle = c("line", "polar"), level = 0.95,
                            se_type = c("sandwich", "naive"), n_grid = 200, combine = TRUE, col = "steelblue", ...) {
  select <- match_choice(select, several.ok = TRUE)
  angle <- match_choice(angle)
  se_type <- match_choice(se_type)
  check_probability(level, "level")
  eff <- latkes_effects(x, n_grid = n_grid, level = level, se_type = se_type)
  pa <- x$row_setup$ncol
  two_d <- Filter(function(sm) {
    sm$dim == 2L && ((sm$first.para <= pa && "kernel" %in% select) || (sm$first.para > pa && "intercept" %in% select))
  }, x$smooth)
  one_int <- Filter(function(sm) sm$dim == 1L && sm$first.para > pa && "intercept" %in% select, x$smooth)
  if (!"kernel" %in% select) eff <- list()
  n_panels <- length(eff) + length(two_d) + length(one_int)
  if (n_panels == 0L) {
    nce_unsupported("plot", x, "the fit has no smooth terms to plot (its coefficients are in summary())")
  }
  if (combine && n_panels > 1L) {
    op <- graphics::par(mfrow = panel_layout(n_panels))
    on.exit(graphics::par(op))
  }
  for (nm in names(eff)) draw_effect(eff[[nm]], nm, angle, col, x)
  v <- stats::vcov(x, se_type = se_type)
  for (sm in one_int) {
    j <- sm$first.para:sm$last.para
    nd <- stats::setNames(data.frame(seq(effect_range(x, sm$term)[1], effect_range(x, sm$term)[2],
                                         length.out = n_grid)), sm$term)
    xm <- mgcv::PredictMat(sm, nd)
    f <- drop(xm %*% x$coefficients[j])
    se <- sqrt(rowSums((xm %*% v[j, j, drop = FALSE]) * xm))
    z <- stats::qnorm(1 - (1 - level) / 2)
    e <- structure(data.frame(value = nd[[1]], fit = f, se = se, lower = f - z * se, upper = f + z * se),
                   variable = sm$term, edf = sum(x$edf[j]))
    draw_effect(e, sm$label, "line", col, x)
  }
  for (sm in two_d) draw_image(x, sm, n_grid %/% 3)
  invisible(eff)
}

# Panels side by side up to three, then a grid.
panel_layout <- function(n) if (n <= 3L) c(1L, n) else grDevices::n2mfrow(n)

angle_axis <- function() {
  at <- c(-pi, -pi / 2, 0, pi / 2, pi)
  graphics::axis(1, at = at, labels = expression(-pi, -pi / 2, 0, pi / 2, pi))
  graphics::abline(v = at, lty = 3, col = "grey70")
  graphics::axis(3, at = at, labels = c("-x", "-y", "+x", "+y", "-x"), tick = FALSE, line = -0.9, cex.axis = 0.75)
}

# One 1-D effect with its band; angles on (-pi, pi] or polar.
draw_effect <- function(e, label, angle, col, fit, add = FALSE) {
  var <- attr(e, "variable")
  ylab <- sprintf("%s (edf %.2f)", label, attr(e, "edf"))
  is_angle <- var %in% c("angle", "angle_prev", "rel_angle")
  if (is_angle && angle == "polar") {
    r <- exp(cbind(e$fit, e$lower, e$upper))
    lim <- max(r) * c(-1, 1)
    graphics::plot(0, 0, type = "n", xlim = lim, ylim = lim, asp = 1, axes = FALSE, xlab = "", ylab = "",
                   main = sprintf("exp(%s), edf %.2f", label, attr(e, "edf")))
    th <- seq(-pi, pi, length.out = 200)
    graphics::lines(cos(th), sin(th), lty = 3, col = "grey50")
    graphics::polygon(c(r[, 3] * cos(e$value), rev(r[, 2] * cos(e$value))),
                      c(r[, 3] * sin(e$value), rev(r[, 2] * sin(e$value))),
                      col = grDevices::adjustcolor(col, 0.3), border = NA)
    graphics::lines(r[, 1] * cos(e$value), r[, 1] * sin(e$value), lwd = 2, col = col)
    graphics::segments(c(-lim[2], 0), c(0, -lim[2]), c(lim[2], 0), c(0, lim[2]), lty = 3, col = "grey70")
    graphics::text(c(lim[2], 0, -lim[2], 0), c(0, lim[2], 0, -lim[2]), c("+x", "+y", "-x", "-y"), cex = 0.75,
                   pos = c(2, 1, 4, 3))
    return(invisible())
  }
  graphics::plot(e$value, e$fit, type = "n", ylim = range(e$lower, e$upper), xlab = var, ylab = ylab,
                 xaxt = if (is_angle) "n" else "s")
  if (is_angle) angle_axis()
  graphics::polygon(c(e$value, rev(e$value)), c(e$lower, rev(e$upper)), col = grDevices::adjustcolor(col, 0.3),
                    border = NA)
  graphics::lines(e$value, e$fit, lwd = 2, col = col)
  obs <- fit$nce_frame[[var]][fit$nce_frame$.label == 1]
  if (length(obs)) graphics::rug(obs, col = "grey50")
}

# A 2-D smooth as an image (over the window for coordinates) with contours.
draw_image <- function(fit, sm, n) {
  r1 <- effect_range(fit, sm$term[1])
  r2 <- effect_range(fit, sm$term[2])
  g1 <- seq(r1[1], r1[2], length.out = n)
  g2 <- seq(r2[1], r2[2], length.out = n)
  nd <- stats::setNames(expand.grid(g1, g2), sm$term)
  if (!identical(sm$by, "NA")) { # a surface per level (e.g. per image): draw that level's
    src <- if (sm$first.para > fit$row_setup$ncol) fit$transitions[[sm$by]] else fit$nce_frame[[sm$by]]
    nd[[sm$by]] <- if (!is.null(sm$by.level)) factor(sm$by.level, levels = levels(src)) else 1
  }
  j <- sm$first.para:sm$last.para
  f <- matrix(drop(mgcv::PredictMat(sm, nd) %*% fit$coefficients[j]), n)
  # Screen orientation: y grows downwards, as in the data and in image maps (row 1 at the top).
  ylim <- if (sm$term[2] %in% c("y", "y_prev", "y_prev2")) rev(range(g2)) else range(g2)
  graphics::image(g1, g2, f, xlab = sm$term[1], ylab = sm$term[2], ylim = ylim,
                  col = grDevices::hcl.colors(30, "Blues 3", rev = TRUE),
                  main = sprintf("%s (edf %.2f)", sm$label, sum(fit$edf[j])))
  graphics::contour(g1, g2, f, add = TRUE, drawlabels = FALSE, col = "grey40")
  src <- if (sm$first.para > fit$row_setup$ncol) fit$transitions else fit$nce_frame[fit$nce_frame$.label == 1, ]
  graphics::points(src[[sm$term[1]]], src[[sm$term[2]]], pch = ".", col = "grey20")
}

#' Simulate scanpaths from a LATKES fit
#'
#' New fixation sequences from the fitted kernel, one per observed sequence
#' (same start, same number of transitions), `nsim` times.
#'
#' `method = "grid"` runs the chains in Rust on the fitted kernel tabulated on
#' `grid` cells over the window, exactly as [rlatkes()] does (exact up to that
#' resolution); it needs a first-order kernel whose terms each depend either
#' on the fixation (`x`, `y`, `radius`, maps) or on the saccade (`dist`,
#' `angle`). With maps per image, each sequence uses the map of its image.
#' `method = "sir"` uses [simulate.snce_fit()] (sampling-importance-resampling
#' from uniform candidates, approximate, any kernel). `"auto"` takes `"grid"`
#' when it applies.
#'
#' @inheritParams nce_vocabulary
#' @param nsim Number of simulated copies of the observed sequences.
#' @param method `"auto"`, `"grid"` or `"sir"`.
#' @param grid Cells along x and y for `method = "grid"`.
#' @param ... Passed to [simulate.snce_fit()] for `method = "sir"` (`candidates`).
#' @return Data frame with `x`, `y`, `.sequence`, `.step` (0 for the start) and `.sim`.
#' @examples
#' set.seed(1)
#' d <- rlatkes(400, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768))
#' fit <- latkes(d, window = c(0, 1024, 0, 768), ratio = 10, kernel = ~ s(dist) + s(angle, bs = "cc"))
#' head(simulate(fit, seed = 1))
#' @export
simulate.latkes_fit <- function(object, nsim = 1, seed = NULL, method = c("auto", "grid", "sir"),
                                grid = c(256, 192), ...) {
  method <- match_choice(method)
  check_count(nsim, "nsim")
  check_sim_size(object, nsim)
  parts <- kernel_parts(object)
  if (method == "auto") method <- if (is.null(parts)) "sir" else "grid"
  if (method == "sir") return(NextMethod())
  if (is.null(parts)) {
    nce_abort(paste("method = \"grid\" needs a first-order kernel whose terms depend on the fixation (x, y, radius)",
                    "or on the saccade (dist, angle) only: use method = \"sir\""), "input")
  }
  check_grid(grid)
  check_size(8 * 4 * prod(2 * as.double(grid)) * 6, "grid", "the kernel tables")
  old <- set_sim_seed(seed)
  on.exit(restore_seed(old))
  w <- object$window
  centre <- c(mean(w[1:2]), mean(w[3:4]))
  trans <- object$transitions
  seqs <- split(seq_len(nrow(trans)), factor(trans$.sequence, levels = unique(trans$.sequence)))
  first <- vapply(seqs, `[`, 1L, 1L)
  chains <- rep(seq_along(seqs), times = nsim)
  # With maps per image, one state table per image (the image of each sequence's first row).
  map_by <- object[["map_by"]]
  image <- if (is.null(map_by)) rep("", length(seqs)) else as.character(trans[[map_by]][first])
  steps <- lengths(seqs)[chains]
  xy <- vector("list", length(chains))
  for (id in unique(image)) {
    rows <- function(x, y, x_prev, y_prev) {
      nd <- data.frame(x = x, y = y, x_prev = x_prev, y_prev = y_prev)
      if (!is.null(map_by)) nd[[map_by]] <- rep(id, length(x))
      object$features(nd)
    }
    state <- function(x, y) kernel_eta(object, rows(x, y, x, y), parts$state)
    offset <- function(dx, dy) {
      kernel_eta(object, rows(centre[1] + dx, centre[2] + dy, centre[1], centre[2]), parts$offset)
    }
    ch <- which(image[chains] == id)
    run <- run_lattice(lattice_tables(w, grid, state, offset), w, grid, trans$x_prev[first][chains[ch]],
                       trans$y_prev[first][chains[ch]], steps[ch])
    xy[ch] <- split(data.frame(x = run$x, y = run$y), rep(seq_along(ch), steps[ch] + 1L))
  }
  xy <- do.call(rbind, xy)
  len <- steps + 1L
  data.frame(x = xy$x, y = xy$y, .sequence = rep(names(seqs)[chains], len), .step = sequence(len) - 1L,
             .sim = rep((seq_along(chains) - 1L) %/% length(seqs) + 1L, len), stringsAsFactors = FALSE)
}
