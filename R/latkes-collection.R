# Per-subject LATKES fits: latkes(..., by = "subject").

# One latkes() fit per level of `by`, through future.apply when it is installed (so
# future::plan() decides where they run) and lapply otherwise. Seeds: future's
# parallel-safe streams drawn from R's RNG, so set.seed() makes the collection reproducible.
latkes_by <- function(cl, data, by, env) {
  if (!is.data.frame(data)) nce_abort("`data` must be a data frame", "input")
  if (!is.character(by) || length(by) != 1L || !by %in% names(data)) nce_abort("`by` must name a column of `data`", "input")
  if (anyNA(data[[by]])) nce_abort(sprintf("`by` column %s has NA", by), "data")
  args <- lapply(as.list(cl)[-1L], eval, envir = env)
  args$by <- NULL
  levs <- unique(data[[by]])
  one <- function(lev) {
    a <- args
    a$data <- data[data[[by]] == lev, , drop = FALSE]
    fit <- do.call(latkes, a)
    call <- cl
    call$by <- NULL
    call$data <- substitute(d[d[[b]] == l, ], list(d = cl$data, b = by, l = lev))
    fit$call <- call
    fit
  }
  fits <- if (requireNamespace("future.apply", quietly = TRUE)) {
    future.apply::future_lapply(levs, one, future.seed = TRUE)
  } else {
    lapply(levs, one)
  }
  names(fits) <- as.character(levs)
  structure(list(fits = fits, by = by, call = cl), class = "latkes_collection")
}

#' Per-subject LATKES fits
#'
#' `latkes(data, ..., by = "subject")` fits the model separately for each
#' subject and returns a collection: `print()` lists the fits, `plot()` draws
#' each kernel term with the individual curves in grey and their pointwise
#' average in colour (as in Barthelme and Chopin's figure), and
#' `latkes_effects()` returns those curves. The fits run through
#' `future.apply::future_lapply()` when future.apply is installed, so a
#' `future::plan()` (e.g. `plan(multisession)`) spreads them over processes;
#' otherwise one after the other. `x$fits` holds the `latkes_fit`s.
#'
#' @name latkes_collection
#' @param x,object A `latkes_collection`.
#' @param n Grid points per curve.
#' @param range Optional named list of ranges per variable; by default the
#'   median over the fits of each fit's range.
#' @param angle `"line"` or `"polar"`.
#' @param col Colour of the average.
#' @param combine Put all panels in one figure.
#' @param ... Unused.
#' @examples
#' set.seed(1)
#' d <- rlatkes(400, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768), n_subjects = 3)
#' fits <- latkes(d, window = c(0, 1024, 0, 768), ratio = 10, kernel = ~ s(dist), by = "subject")
#' fits
#' plot(fits)
NULL

#' @rdname latkes_collection
#' @export
print.latkes_collection <- function(x, ...) {
  cat(sprintf("\n%d LATKES fits by %s\n\n", length(x$fits), x$by))
  tab <- do.call(rbind, lapply(names(x$fits), function(nm) {
    f <- x$fits[[nm]]
    st <- smooth_table(f)
    st <- st[st$part == "kernel", , drop = FALSE]
    data.frame(level = nm, transitions = f$n, t(stats::setNames(round(st$edf, 2), st$term)),
               converged = f$converged, check.names = FALSE)
  }))
  names(tab)[1] <- x$by
  print(tab, row.names = FALSE)
  cat("(edf of the kernel's smooth terms)\n")
  invisible(x)
}

#' @rdname latkes_collection
#' @export
latkes_effects.latkes_collection <- function(object, n = 200, range = NULL, ...) {
  effs <- lapply(object$fits, function(f) latkes_effects(f, n = 2L))
  labels <- unique(unlist(lapply(effs, names)))
  out <- list()
  for (lab in labels) {
    has <- vapply(effs, function(e) !is.null(e[[lab]]), TRUE)
    var <- attr(effs[[which(has)[1]]][[lab]], "variable")
    r <- if (!is.null(range[[var]])) range[[var]] else {
      rr <- vapply(object$fits[has], effect_range, numeric(2), var = var)
      apply(rr, 1L, stats::median)
    }
    curves <- vapply(object$fits[has], function(f) {
      e <- latkes_effects(f, n = n, range = stats::setNames(list(r), var))[[lab]]
      e$fit - mean(e$fit)
    }, numeric(n))
    curves <- matrix(curves, n)
    colnames(curves) <- paste0("fit_", names(object$fits)[has])
    out[[lab]] <- structure(data.frame(value = seq(r[1], r[2], length.out = n), curves, mean = rowMeans(curves),
                                       check.names = FALSE), variable = var)
  }
  out
}

#' @rdname latkes_collection
#' @export
plot.latkes_collection <- function(x, n = 200, range = NULL, angle = c("line", "polar"), col = "steelblue",
                                   combine = TRUE, ...) {
  angle <- match.arg(angle)
  eff <- latkes_effects(x, n = n, range = range)
  if (!length(eff)) nce_abort("the fits have no one-dimensional kernel terms to plot", "input")
  if (combine && length(eff) > 1L) {
    op <- graphics::par(mfrow = panel_layout(length(eff)))
    on.exit(graphics::par(op))
  }
  for (lab in names(eff)) {
    e <- eff[[lab]]
    var <- attr(e, "variable")
    curves <- as.matrix(e[grep("^fit_", names(e))])
    is_angle <- var %in% c("angle", "angle_prev", "rel_angle")
    if (is_angle && angle == "polar") {
      r <- exp(cbind(curves, e$mean))
      lim <- max(r) * c(-1, 1)
      graphics::plot(0, 0, type = "n", xlim = lim, ylim = lim, asp = 1, axes = FALSE, xlab = "", ylab = "",
                     main = sprintf("exp(%s), centred", lab))
      graphics::matlines(r[, -ncol(r)] * cos(e$value), r[, -ncol(r)] * sin(e$value), lty = 1, col = "grey70")
      graphics::lines(r[, ncol(r)] * cos(e$value), r[, ncol(r)] * sin(e$value), lwd = 2, col = col)
      graphics::segments(c(lim[1], 0), c(0, lim[1]), c(lim[2], 0), c(0, lim[2]), lty = 3, col = "grey70")
      graphics::text(c(lim[2], 0, lim[1], 0), c(0, lim[2], 0, lim[1]), c("+x", "+y", "-x", "-y"), cex = 0.75,
                     pos = c(2, 1, 4, 3))
      next
    }
    graphics::matplot(e$value, curves, type = "l", lty = 1, col = "grey70", xlab = var,
                      ylab = sprintf("%s, centred", lab), xaxt = if (is_angle) "n" else "s")
    if (is_angle) angle_axis()
    graphics::lines(e$value, e$mean, lwd = 2.5, col = col)
  }
  invisible(eff)
}
