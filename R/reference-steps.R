# Step-selection reference kernel for snce(): a gamma step length times a von Mises (or
# uniform) turning angle, fitted to the observed steps as amt's fit_distr() does (gamma by
# maximum likelihood; von Mises concentration by maximum likelihood with the mean direction
# free, then used with mean 0), sampled and evaluated in Rust (nce-core ref_steps.rs).

#' Headings of a track: the direction of the step into each fix
#'
#' The state column a von Mises [ref_steps()] kernel needs: the direction, in
#' radians on (-pi, pi], of the step from the previous fix of the same
#' sequence. A fix reached by a zero-length step keeps the heading before it.
#' The first fix of each sequence has no incoming step and gets the value 4
#' (outside \[-pi, pi\]): the kernel refuses a transition from it, so fit with
#' `order = 2`, which (as amt does for turning angles) uses each sequence's
#' first step only to condition.
#'
#' @param data Data frame of fixes in time order.
#' @param x,y Names of the coordinate columns.
#' @param group Name of the column that splits `data` into sequences (bursts),
#'   or `NULL` for one sequence.
#' @return A numeric vector, one heading per row of `data`.
#' @section What it refuses:
#' * `data` not a data frame with at least one row, `x`/`y`/`group` not one string or not
#'   columns of `data`, coordinate columns not numeric (`nce_error_input`);
#' * NA or infinite coordinates, or NA in the `group` column (`nce_error_data`): split the
#'   track at gaps with `group` instead.
#' @examples
#' d <- data.frame(x = c(0, 1, 1, 0), y = c(0, 0, 1, 1))
#' step_headings(d)
#' @export
step_headings <- function(data, x = "x", y = "y", group = NULL) {
  tr <- track_columns(data, x, y, group)
  h <- rep(4, nrow(data))
  for (i in tr$idx) {
    if (length(i) < 2L) next
    prev <- 4
    for (k in seq_along(i)[-1L]) {
      dx <- tr$x[i[k]] - tr$x[i[k - 1L]]
      dy <- tr$y[i[k]] - tr$y[i[k - 1L]]
      h[i[k]] <- prev <- if (dx == 0 && dy == 0) prev else atan2(dy, dx)
    }
  }
  h
}

# Coordinates and sequences of a track, checked.
track_columns <- function(data, x, y, group, call = caller_call()) {
  check_data_frame(data, "data", call = call)
  check_string(x, "x", call = call)
  check_string(y, "y", call = call)
  check_string(group, "group", allow_null = TRUE, call = call)
  absent <- setdiff(c(x, y, group), names(data))
  if (length(absent)) {
    nce_abort(sprintf("`data` lacks column(s) %s", paste(absent, collapse = ", ")), "input", call = call)
  }
  check_numeric_columns(data, c(x, y), "data", call = call)
  bad <- which(!is.finite(data[[x]]) | !is.finite(data[[y]]))
  if (length(bad)) {
    nce_abort(sprintf("`data` has NA or non-finite coordinates in %d row(s) (%s): split the track at gaps with `group`",
                      length(bad), format_positions(bad)), "data", call = call)
  }
  g <- if (is.null(group)) rep(1L, nrow(data)) else data[[group]]
  if (anyNA(g)) nce_abort(sprintf("`group` column %s has NA", group), "data", call = call)
  list(x = as.double(data[[x]]), y = as.double(data[[y]]),
       idx = split(seq_len(nrow(data)), factor(g, levels = unique(g))))
}

#' Step-selection reference kernel: gamma step lengths and von Mises turning angles
#'
#' The reference of integrated step-selection analysis, as in the amt package:
#' from the previous fix, a step of gamma-distributed length in a direction
#' given by the previous heading plus a von Mises(0, kappa) turning angle
#' (`angle = "vonmises"`), or a uniform direction (`angle = "uniform"`). The
#' parameters are given, or fitted to the observed steps of `data` as amt's
#' `fit_distr()` does: the gamma by maximum likelihood, kappa by maximum
#' likelihood with the mean direction free (then used with mean 0). Steps of
#' length 0 have no gamma density and are left out of the fit with a warning.
#' In the plane the kernel's density is
#' \eqn{q(x, y \mid \cdot) = \mathrm{gamma}(r) \, \mathrm{vm}(\phi) / r},
#' r the step length and \eqn{\phi} the turning angle.
#'
#' With von Mises turning angles the kernel needs the previous heading, so its
#' state is `(x, y, heading)`: add the column with [step_headings()] and fit
#' [snce()] with `order = 2`. Formula terms then use `x_prev`, `y_prev`,
#' `heading_prev` (e.g. `cos(heading - heading_prev)`, the turning angle's
#' cosine). As everywhere in this package the formula models the whole log
#' density (the offset removes log q), so with log step length, step length
#' and that cosine in the formula the movement parameters come out of the
#' coefficients whatever the reference (integrated SSA): in the plane
#' \eqn{\log p = (\mathrm{shape} - 2)\log r - r/\mathrm{scale} +
#' \kappa\cos\phi + \dots}; the reference only needs to resemble them for
#' efficiency.
#'
#' @param data Data frame of fixes in time order, to fit the parameters.
#' @param x,y Names of the coordinate columns.
#' @param group Name of the column that splits `data` into sequences (no step
#'   crosses a sequence), or `NULL`.
#' @param angle `"vonmises"` or `"uniform"`.
#' @param heading Name of the heading column (von Mises only).
#' @param shape,scale Gamma step-length parameters (instead of fitting them).
#' @param kappa Von Mises concentration (instead of fitting it).
#' @return A reference kernel (class `nce_kernel`) for [snce()], with the
#'   parameters and, for those fitted, their covariance (`vcov$step` for
#'   shape and scale, `vcov$kappa`; inverse Fisher information) and the number
#'   of steps used (`n_steps`).
#' @section What it refuses:
#' * `angle` not "vonmises" or "uniform"; `x`, `y` or `heading` not one string or not three
#'   different columns; `shape` or `scale` not > 0, only one of them given; `kappa` not
#'   between 0 and 1e5 or given with `angle = "uniform"`; `data` missing when a parameter must be
#'   fitted (`nce_error_input`);
#' * a `data` track as refused by [step_headings()]; fewer than two steps of positive length,
#'   all step lengths equal (no gamma fits them), or fewer than two turning angles to fit
#'   `kappa` (`nce_error_data`).
#' @examples
#' set.seed(1)
#' d <- data.frame(x = cumsum(rgamma(50, 2, scale = 10)), y = cumsum(rnorm(50, 0, 5)))
#' d$heading <- step_headings(d)
#' k <- ref_steps(d)
#' k
#' fit <- snce(~ I(sqrt((x - x_prev)^2 + (y - y_prev)^2)) + I(cos(heading - heading_prev)),
#'             d, k, ratio = 10, order = 2, intercept = "none")
#' @export
ref_steps <- function(data = NULL, x = "x", y = "y", group = NULL, angle = c("vonmises", "uniform"),
                      heading = "heading", shape = NULL, scale = NULL, kappa = NULL) {
  if (identical(angle, c("vonmises", "uniform"))) angle <- "vonmises"
  if (!is.character(angle) || length(angle) != 1L || !angle %in% c("vonmises", "uniform")) {
    check_fail("\"vonmises\" or \"uniform\"", angle, "angle", caller_call(0L))
  }
  check_string(x, "x")
  check_string(y, "y")
  check_string(heading, "heading")
  check_number(shape, "shape", min = 0, exclusive_min = TRUE, allow_null = TRUE)
  check_number(scale, "scale", min = 0, exclusive_min = TRUE, allow_null = TRUE)
  check_number(kappa, "kappa", min = 0, max = 1e5, allow_null = TRUE)
  if (angle == "uniform" && !is.null(kappa)) nce_abort("`kappa` applies only to angle = \"vonmises\"", "input")
  if (is.null(shape) != is.null(scale)) nce_abort("give both `shape` and `scale`, or neither (to fit them)", "input")
  need_fit <- is.null(shape) || (angle == "vonmises" && is.null(kappa))
  vc <- list()
  n_steps <- NA_integer_
  if (need_fit) {
    if (is.null(data)) nce_abort("`data` is needed to fit the parameters that are not given", "input")
    st <- observed_steps(data, x, y, group)
    n_steps <- length(st$sl)
    if (is.null(shape)) {
      g <- fit_gamma(st$sl)
      shape <- g$shape
      scale <- g$scale
      vc$step <- g$vcov
    }
    if (angle == "vonmises" && is.null(kappa)) {
      if (length(st$ta) < 2L) nce_abort("`data` needs at least two turning angles to fit `kappa`", "data")
      v <- fit_von_mises(st$ta)
      kappa <- v$kappa
      vc$kappa <- v$var
    }
  }
  vars <- c(x, y, if (angle == "vonmises") heading)
  if (anyDuplicated(vars)) nce_abort("`x`, `y` and `heading` must be three different columns", "input")
  log_norm <- if (angle == "vonmises") log(2 * pi) + log(besselI(kappa, 0, expon.scaled = TRUE)) + kappa else NA_real_
  structure(list(kind = "steps", vars = vars, angle = angle, shape = shape, scale = scale,
                 kappa = if (angle == "vonmises") kappa else NA_real_, log_norm = log_norm,
                 vcov = vc, n_steps = n_steps),
            class = c("nce_kernel_steps", "nce_kernel"))
}

# Step lengths (> 0) and turning angles between consecutive non-zero steps, within sequences.
observed_steps <- function(data, x, y, group, call = caller_call()) {
  tr <- track_columns(data, x, y, group, call = call)
  sl <- ta <- numeric()
  zero <- 0L
  for (i in tr$idx) {
    if (length(i) < 2L) next
    dx <- diff(tr$x[i])
    dy <- diff(tr$y[i])
    r <- sqrt(dx^2 + dy^2)
    zero <- zero + sum(r == 0)
    keep <- r > 0
    dir <- atan2(dy, dx)[keep]
    sl <- c(sl, r[keep])
    if (length(dir) > 1L) ta <- c(ta, wrap_angle(diff(dir)))
  }
  if (zero) {
    nce_warn(sprintf("%d step(s) of length 0 left out of the step-length fit (no gamma density at 0)", zero),
             "zero_length", call = call)
  }
  if (length(sl) < 2L) {
    nce_abort("`data` needs at least two steps of positive length to fit the kernel", "data", call = call)
  }
  list(sl = sl, ta = ta)
}

# Gamma maximum likelihood: log(shape) - digamma(shape) = log(mean) - mean(log), solved for
# the shape; covariance from the Fisher information of (shape, scale).
fit_gamma <- function(sl) {
  n <- length(sl)
  s <- log(mean(sl)) - mean(log(sl))
  if (!(s > 1e-12)) {
    nce_abort("all observed step lengths are equal: no gamma distribution fits them", "data", call = NULL)
  }
  f <- function(k) log(k) - digamma(k) - s
  shape <- stats::uniroot(f, c(1e-8, 1e8), tol = 1e-14)$root
  scale <- mean(sl) / shape
  info <- n * matrix(c(trigamma(shape), 1 / scale, 1 / scale, shape / scale^2), 2L)
  nm <- c("shape", "scale")
  list(shape = shape, scale = scale, vcov = structure(solve(info), dimnames = list(nm, nm)))
}

# Von Mises concentration by maximum likelihood with free mean direction: A(kappa) = Rbar,
# A = I1 / I0; variance 1 / (n A'(kappa)), A' = 1 - A / kappa - A^2.
fit_von_mises <- function(ta) {
  n <- length(ta)
  rbar <- sqrt(mean(cos(ta))^2 + mean(sin(ta))^2)
  a <- function(k) besselI(k, 1, expon.scaled = TRUE) / besselI(k, 0, expon.scaled = TRUE)
  if (rbar < 1e-10) return(list(kappa = 0, var = 2 / n))
  if (rbar > 1 - 1e-10) {
    nce_abort("all turning angles are equal: no von Mises distribution fits them", "data", call = NULL)
  }
  kappa <- stats::uniroot(function(k) a(k) - rbar, c(1e-10, 1e5), tol = 1e-13)$root
  ak <- a(kappa)
  list(kappa = kappa, var = 1 / (n * (1 - ak / kappa - ak^2)))
}

steps_par <- function(kernel) c(kernel$shape, kernel$scale, kernel$kappa, kernel$log_norm)

steps_matrix <- function(kernel, d) {
  m <- vapply(kernel$vars, function(v) as.double(d[[v]]), numeric(nrow(d)))
  matrix(m, nrow(d), length(kernel$vars))
}

#' @export
kernel_draw.nce_kernel_steps <- function(kernel, prev, n) {  # nolint: object_name_linter.
  x <- rs(nce_ref_steps_sample(steps_par(kernel), steps_matrix(kernel, prev), as.double(n), draw_seed(),
                               nce_threads()))
  colnames(x) <- kernel$vars
  as.data.frame(x)
}

#' @export
kernel_logq.nce_kernel_steps <- function(kernel, x, prev) {  # nolint: object_name_linter.
  rs(nce_ref_steps_log_density(steps_par(kernel), steps_matrix(kernel, x), steps_matrix(kernel, prev), nce_threads()))
}

#' @export
print.nce_kernel_steps <- function(x, ...) {
  cat(sprintf("<nce kernel: steps over %s>\n", paste(x$vars, collapse = ", ")))
  cat(sprintf("  step length gamma(shape %s, scale %s); turning angle %s\n", format(x$shape, digits = 4),
              format(x$scale, digits = 4),
              if (x$angle == "vonmises") sprintf("von Mises(0, kappa %s)", format(x$kappa, digits = 4)) else "uniform"))
  if (!is.na(x$n_steps)) cat(sprintf("  fitted to %d observed steps\n", x$n_steps))
  invisible(x)
}
