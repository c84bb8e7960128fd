# Per-subject LATKES fits: latkes(..., by = "subject").

# One latkes() fit per level of `by`, through future.apply when it is installed (so
# future::plan() decides where they run) and lapply otherwise. Seeds: future's
# parallel-safe streams drawn from R's RNG, so set.seed() makes the collection reproducible.
latkes_by <- function(cl, data, by, env) {
  check_data_frame(data, "data", min_rows = 1L) # as latkes() without `by`: no levels, no fits
  if (!is.character(by) || length(by) != 1L || !by %in% names(data)) {
    nce_abort("`by` must name a column of `data`", "input")
  }
  if (anyNA(data[[by]])) nce_abort(sprintf("`by` column %s has NA", by), "data")
  args <- lapply(as.list(cl)[-1L], eval, envir = env)
  args$by <- NULL
  if (is.null(args$window) && nrow(data) > 0L) {
    # One window for all levels, so that `radius` is measured from one centre in every fit.
    xy <- latkes_coordinates(data, args$x %||% "x", args$y %||% "y", NULL, NULL, call = cl)
    at_pt <- at_points(xy$x, xy$y, check_drop_points(args$drop_points, call = cl))
    args$window <- range_window(xy$x[!at_pt], xy$y[!at_pt], call = cl)
  }
  levs <- unique(data[[by]])
  one <- function(lev) {
    a <- args
    a$data <- data[data[[by]] == lev, , drop = FALSE]
    fit <- do.call(latkes, a)
    call <- cl
    call$by <- NULL
    call$window <- args$window # the common window, also for update() of one fit
    call$data <- substitute(d[d[[b]] == l, ], list(d = cl$data, b = by, l = lev))
    fit$call <- call
    fit$call_env <- env
    fit
  }
  fits <- if (requireNamespace("future.apply", quietly = TRUE)) {
    future.apply::future_lapply(levs, one, future.seed = TRUE)
  } else {
    lapply(levs, one)
  }
  names(fits) <- as.character(levs)
  structure(list(fits = fits, by = by, call = cl), class = c("latkes_collection", "nce_result"))
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
#' @param n_grid Grid points per curve.
#' @param range Optional named list of ranges per variable; by default the
#'   median over the fits of each fit's range.
#' @param angle `"line"` or `"polar"`.
#' @param col Colour of the average.
#' @param combine Put all panels in one figure.
#' @inheritParams nce_vocabulary
#' @examples
#' set.seed(1)
#' d <- rlatkes(400, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768),
#'              n_subjects = 3)
#' fits <- latkes(d, window = c(0, 1024, 0, 768), ratio = 10, kernel = ~ s(dist), by = "subject")
#' fits
#' plot(fits)
NULL

#' @rdname latkes_collection
#' @export
print.latkes_collection <- function(x, ...) {
  cat(sprintf("\n%d LATKES fits by %s\n\n", length(x$fits), x$by))
  if (!length(x$fits)) return(invisible(x))
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
latkes_effects.latkes_collection <- function(object, n_grid = 200, range = NULL, ...) {  # nolint: object_name_linter.
  effs <- lapply(object$fits, function(f) latkes_effects(f, n_grid = 2L))
  labels <- unique(unlist(lapply(effs, names)))
  out <- list()
  for (lab in labels) {
    has <- vapply(effs, function(e) !is.null(e[[lab]]), TRUE)
    var <- attr(effs[[which(has)[1]]][[lab]], "variable")
    r <- if (!is.null(range[[var]])) {
      range[[var]]
    } else {
      rr <- vapply(object$fits[has], effect_range, numeric(2), var = var)
      apply(rr, 1L, stats::median)
    }
    curves <- vapply(object$fits[has], function(f) {
      e <- latkes_effects(f, n_grid = n_grid, range = stats::setNames(list(r), var))[[lab]]
      e$fit - mean(e$fit)
    }, numeric(n_grid))
    curves <- matrix(curves, n_grid)
    colnames(curves) <- paste0("fit_", names(object$fits)[has])
    out[[lab]] <- structure(data.frame(value = seq(r[1], r[2], length.out = n_grid), curves, mean = rowMeans(curves),
                                       check.names = FALSE), variable = var)
  }
  out
}

#' @rdname latkes_collection
#' @export
plot.latkes_collection <- function(x, n_grid = 200, range = NULL, angle = c("line", "polar"), col = "steelblue",
                                   combine = TRUE, ...) {
  angle <- match_choice(angle)
  eff <- latkes_effects(x, n_grid = n_grid, range = range)
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

# The model-object contract for a collection: the subjects' fits are independent, so the
# coefficients are stacked (named "<level>:<coefficient>"), the covariance is block-diagonal,
# the log-likelihoods, degrees of freedom and transitions add up, and predictions route each
# row of new data to the fit of its level of `by`.

stacked <- function(x, f) {
  out <- lapply(names(x$fits), function(nm) {
    v <- f(x$fits[[nm]])
    stats::setNames(v, paste0(nm, ":", names(v)))
  })
  unlist(out)
}

#' @rdname latkes_collection
#' @export
coef.latkes_collection <- function(object, ...) stacked(object, stats::coef)

#' @rdname latkes_collection
#' @inheritParams nce_vocabulary
#' @export
vcov.latkes_collection <- function(object, se_type = c("sandwich", "naive"), ...) {
  check_renamed_dots(...names(), c(type = "se_type"))
  se_type <- match_choice(se_type)
  vs <- lapply(object$fits, stats::vcov, se_type = se_type)
  p <- vapply(vs, nrow, 0L)
  out <- matrix(0, sum(p), sum(p))
  at <- cumsum(c(0L, p))
  for (i in seq_along(vs)) out[at[i] + seq_len(p[i]), at[i] + seq_len(p[i])] <- vs[[i]]
  nm <- names(stats::coef(object))
  dimnames(out) <- list(nm, nm)
  out
}

#' @rdname latkes_collection
#' @param parm,level As for [stats::confint()].
#' @export
confint.latkes_collection <- function(object, parm, level = 0.95, ...) {
  check_probability(level, "level")
  out <- do.call(rbind, lapply(names(object$fits), function(nm) {
    ci <- stats::confint(object$fits[[nm]], level = level, ...)
    rownames(ci) <- paste0(nm, ":", rownames(ci))
    ci
  }))
  if (missing(parm)) out else out[parm, , drop = FALSE]
}

#' @rdname latkes_collection
#' @export
nobs.latkes_collection <- function(object, ...) sum(vapply(object$fits, function(f) f$n, 0))

#' @rdname latkes_collection
#' @export
logLik.latkes_collection <- function(object, newdata = NULL, ...) {
  fits <- object$fits
  if (!is.null(newdata)) {
    # Each held-out row goes to the fit of its level, as predict() sends it (every fit on every
    # row would count each row once per subject).
    check_data_frame(newdata, "newdata", min_rows = 0L)
    if (!object$by %in% names(newdata)) {
      nce_abort(sprintf("`newdata` needs the column %s: it chooses the fit of each row", object$by), "input")
    }
    lev <- as.character(newdata[[object$by]])
    unknown <- setdiff(unique(lev), names(fits))
    if (length(unknown)) {
      nce_abort(sprintf("`newdata` has level(s) %s of %s with no fit", format_positions(unknown), object$by), "input")
    }
    if (!length(lev)) nce_abort("`newdata` has no rows to evaluate the log-likelihood at", "input")
    ll <- lapply(unique(lev), function(l) stats::logLik(fits[[l]], newdata = newdata[lev == l, , drop = FALSE], ...))
  } else {
    ll <- lapply(fits, stats::logLik, ...)
  }
  structure(sum(vapply(ll, as.numeric, 0)), df = sum(vapply(ll, attr, 0, "df")),
            nobs = sum(vapply(ll, attr, 0, "nobs")), class = "logLik")
}

#' @rdname latkes_collection
#' @param newdata Optional data frame with the `by` column: each row is
#'   predicted by the fit of its level (transitions or raw fixations, as for
#'   [predict.latkes_fit()]); by default every fit's own transitions, stacked.
#' @export
predict.latkes_collection <- function(object, newdata, ...) {
  if (identical(list(...)$type, "lpmatrix")) {
    nce_unsupported("predict(type = \"lpmatrix\")", object,
                    "each subject's fit has its own design; use predict(x$fits[[i]], type = \"lpmatrix\")")
  }
  if (missing(newdata) || is.null(newdata)) {
    res <- lapply(object$fits, function(f) predict(f, ...))
    return(stacked_predictions(object, res))
  }
  check_data_frame(newdata, "newdata", min_rows = 0L)
  if (!object$by %in% names(newdata)) {
    nce_abort(sprintf("`newdata` needs the column %s: it chooses the fit of each row", object$by), "input")
  }
  if (nrow(newdata) == 0L) return(predict(object$fits[[1L]], newdata, ...))
  lev <- as.character(newdata[[object$by]])
  unknown <- setdiff(unique(lev), names(object$fits))
  if (length(unknown)) {
    nce_abort(sprintf("`newdata` has level(s) %s of %s with no fit", format_positions(unknown), object$by), "input")
  }
  parts <- lapply(split(seq_len(nrow(newdata)), factor(lev, levels = unique(lev))), function(i) {
    list(i = i, p = predict(object$fits[[lev[i[1]]]], newdata[i, , drop = FALSE], ...))
  })
  first <- parts[[1]]$p
  if (is.list(first)) {
    fit <- se <- rep(NA_real_, nrow(newdata))
    for (pt in parts) {
      fit[pt$i] <- pt$p$fit
      se[pt$i] <- pt$p$se.fit
    }
    return(list(fit = fit, se.fit = se))
  }
  out <- rep(NA_real_, nrow(newdata))
  for (pt in parts) out[pt$i] <- pt$p
  out
}

stacked_predictions <- function(object, res) {
  if (is.list(res[[1]]) && !is.null(res[[1]]$fit)) {
    return(list(fit = unlist(lapply(res, `[[`, "fit"), use.names = FALSE),
                se.fit = unlist(lapply(res, `[[`, "se.fit"), use.names = FALSE)))
  }
  if (is.matrix(res[[1]])) return(do.call(rbind, res))
  unlist(res, use.names = FALSE)
}

#' @rdname latkes_collection
#' @export
residuals.latkes_collection <- function(object, ...) {
  unlist(lapply(object$fits, stats::residuals, ...), use.names = FALSE)
}

#' @rdname latkes_collection
#' @export
formula.latkes_collection <- function(x, ...) stats::formula(x$fits[[1]])

#' @rdname latkes_collection
#' @export
terms.latkes_collection <- function(x, ...) stats::terms(x$fits[[1]])

#' @rdname latkes_collection
#' @param formula A `latkes_collection`.
#' @export
model.frame.latkes_collection <- function(formula, ...) {
  x <- formula
  do.call(rbind, lapply(names(x$fits), function(nm) {
    mf <- x$fits[[nm]]$nce_frame
    mf[[paste0(".", x$by)]] <- nm
    mf
  }))
}

#' @rdname latkes_collection
#' @param nsim,seed As for [simulate.latkes_fit()].
#' @export
simulate.latkes_collection <- function(object, nsim = 1, seed = NULL, ...) {
  check_nsim(nsim, 8 * sum(vapply(object$fits, function(f) as.double(nrow(f$transitions)), 0)) * 12)
  old <- set_sim_seed(seed)
  on.exit(restore_seed(old))
  do.call(rbind, lapply(names(object$fits), function(nm) {
    s <- stats::simulate(object$fits[[nm]], nsim = nsim, ...)
    s[[object$by]] <- rep(nm, nrow(s))
    s
  }))
}

#' @rdname latkes_collection
#' @export
summary.latkes_collection <- function(object, ...) {
  tab <- do.call(rbind, lapply(names(object$fits), function(nm) {
    f <- object$fits[[nm]]
    ll <- stats::logLik(f)
    data.frame(level = nm, transitions = f$n, sequences = f$n_sequences, edf = round(attr(ll, "df"), 2),
               logLik = as.numeric(ll), converged = f$converged, stringsAsFactors = FALSE)
  }))
  names(tab)[1] <- object$by
  structure(c(list(table = tab, by = object$by, formula = stats::formula(object), n = sum(tab$transitions)),
              summary_loglik(object)),
            class = "summary.latkes_collection")
}

#' @export
print.summary.latkes_collection <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat(sprintf("\n%d LATKES fits by %s, kernel %s\n\n", nrow(x$table), x$by, deparse1(x$formula)))
  print(x$table, row.names = FALSE, digits = digits)
  cat(sprintf("\nTotal: %d transitions, log-likelihood %s (summed over the fits; df %s), AIC %s\n",
              x$n, format(as.numeric(x$logLik), digits = digits + 2L), format(attr(x$logLik, "df"), digits = digits),
              format(x$aic, digits = digits + 2L)))
  invisible(x)
}

#' @rdname tidy_seq
#' @exportS3Method generics::tidy
tidy.latkes_collection <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  out <- do.call(rbind, lapply(names(x$fits), function(nm) {
    t <- tidy.snce_fit(x$fits[[nm]], conf.int = conf.int, conf.level = conf.level)
    cbind(stats::setNames(data.frame(nm, stringsAsFactors = FALSE), x$by), t)
  }))
  rownames(out) <- NULL
  out
}

#' @rdname tidy_seq
#' @exportS3Method generics::glance
glance.latkes_collection <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(n_fits = length(x$fits), logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll),
             df = attr(ll, "df"), nobs = attr(ll, "nobs"),
             converged = all(vapply(x$fits, function(f) isTRUE(f$converged), TRUE)))
}

#' @rdname tidy_seq
#' @exportS3Method generics::augment
augment.latkes_collection <- function(x, ...) {  # nolint: object_name_linter.
  out <- do.call(rbind, lapply(names(x$fits), function(nm) {
    a <- augment.snce_fit(x$fits[[nm]], ...)
    # The rows carry the `by` column already when they are the fit's own or the user's.
    if (x$by %in% names(a)) return(a)
    cbind(stats::setNames(data.frame(rep(nm, nrow(a)), stringsAsFactors = FALSE), x$by), a)
  }))
  rownames(out) <- NULL
  out
}
