# Reference kernels q(y_t | y_{t-1}) for snce(). Every nce reference (ref_*) is also a
# kernel that ignores the previous state.

#' Normal random-walk reference kernel
#'
#' Reference points for transition t drawn around the previous state:
#' independent normals per state column, truncated to `window` when given.
#'
#' @param sd Named vector of standard deviations, one per state column.
#' @param window `NULL`, or a named list of ranges (`list(x = c(0, 1024))`)
#'   for the columns to truncate; the density is renormalised on the window.
#' @return A reference kernel (class `nce_kernel`) for [snce()].
#' @section What it refuses:
#' * `sd` not a named vector of finite numbers > 0 (`nce_error_input`);
#' * `window` not a named list for columns of `sd`, or a range that is not two numbers with
#'   lower < upper (`nce_error_input`). Infinite ends are allowed (one-sided truncation).
#' @examples
#' kernel_normal(c(x = 50, y = 50), window = list(x = c(0, 1024), y = c(0, 768)))
#' @export
kernel_normal <- function(sd, window = NULL) {
  if (!is.numeric(sd) || is.null(names(sd)) || any(names(sd) == "") || any(!(sd > 0)) || any(!is.finite(sd))) {
    nce_abort("`sd` must be a named vector of positive numbers, e.g. c(y = 0.1)", "input")
  }
  vars <- names(sd)
  lower <- rep(-Inf, length(vars))
  upper <- rep(Inf, length(vars))
  if (!is.null(window)) {
    if (!is.list(window) || is.null(names(window)) || !all(names(window) %in% vars)) {
      nce_abort("`window` must be a named list of ranges for columns of `sd`", "input")
    }
    for (v in names(window)) {
      w <- window[[v]]
      if (!is.numeric(w) || length(w) != 2L || any(is.na(w)) || w[1] >= w[2]) {
        nce_abort(sprintf("window of `%s` must be two numbers, lower < upper", v), "input")
      }
      lower[match(v, vars)] <- w[1]
      upper[match(v, vars)] <- w[2]
    }
  }
  structure(list(kind = "normal_walk", vars = vars, sd = unname(as.double(sd)), lower = lower, upper = upper),
            class = c("nce_kernel_normal", "nce_kernel"))
}

#' Reference kernel given by user functions
#'
#' @param sample Function of `prev` (data frame of the previous states, one row
#'   per transition) and `n` returning `n` draws per transition as a data frame
#'   with `nrow(prev) * n` rows, the `n` draws of the first transition first.
#' @param log_density Function of `x` and `prev` (data frames with matching
#'   rows) returning log q(x | prev) for each row.
#' @param vars State columns the kernel generates.
#' @return A reference kernel (class `nce_kernel`) for [snce()].
#' @section What it refuses:
#' * `sample` or `log_density` not a function, or `vars` not a non-empty character vector
#'   without NA or "" (`nce_error_input`). What the functions return is checked when
#'   [snce()] calls them.
#' @examples
#' k <- kernel_custom(function(prev, n) data.frame(y = runif(nrow(prev) * n)),
#'                    function(x, prev) rep(0, nrow(x)), vars = "y")
#' @export
kernel_custom <- function(sample, log_density, vars) {
  check_function(sample, "sample")
  check_function(log_density, "log_density")
  if (!is.character(vars) || length(vars) == 0L || anyNA(vars) || any(vars == "")) {
    nce_abort("`vars` must name the state columns (a character vector)", "input")
  }
  structure(list(kind = "custom", vars = vars, sample = sample, log_density = log_density),
            class = c("nce_kernel_custom", "nce_kernel"))
}

#' @export
print.nce_kernel <- function(x, ...) {
  cat(sprintf("<nce kernel: %s over %s>\n", x$kind, paste(x$vars, collapse = ", ")))
  if (x$kind == "normal_walk") {
    cat(sprintf("  sd %s; window %s\n", paste(format(x$sd), collapse = ", "),
                paste(sprintf("[%g, %g]", x$lower, x$upper), collapse = " x ")))
  }
  invisible(x)
}

# n draws per transition (rows of prev, a data frame of the state columns), transition-major.
kernel_draw <- function(kernel, prev, n) UseMethod("kernel_draw")

#' @export
kernel_draw.nce_reference <- function(kernel, prev, n) ref_draw(kernel, nrow(prev) * n)

#' @export
kernel_draw.nce_kernel_normal <- function(kernel, prev, n) {
  p <- as.matrix(prev[kernel$vars])
  storage.mode(p) <- "double"
  x <- rs(nce_kernel_normal_sample(kernel$sd, kernel$lower, kernel$upper, p, as.double(n),
                                   draw_seed(), nce_threads()))
  colnames(x) <- kernel$vars
  as.data.frame(x)
}

#' @export
kernel_draw.nce_kernel_custom <- function(kernel, prev, n) {
  ref <- ref_custom(function(m) kernel$sample(prev, n), function(d) 0, kernel$vars)
  ref_draw(ref, nrow(prev) * n)
}

# log q(x | prev) row by row.
kernel_logq <- function(kernel, x, prev) UseMethod("kernel_logq")

#' @export
kernel_logq.nce_reference <- function(kernel, x, prev) ref_logq(kernel, x)

#' @export
kernel_logq.nce_kernel_normal <- function(kernel, x, prev) {
  as_mat <- function(d) {
    m <- as.matrix(d[kernel$vars])
    storage.mode(m) <- "double"
    m
  }
  rs(nce_kernel_normal_log_density(kernel$sd, kernel$lower, kernel$upper, as_mat(x), as_mat(prev), nce_threads()))
}

#' @export
kernel_logq.nce_kernel_custom <- function(kernel, x, prev) {
  ref <- ref_custom(function(m) NULL, function(d) kernel$log_density(d, prev), kernel$vars)
  ref_logq(ref, x)
}
