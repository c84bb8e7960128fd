# Threads and seeds shared by every Rust call.

nce_threads <- function() {
  n <- getOption("nce.threads", 2L)
  if (!is.numeric(n) || length(n) != 1L || is.na(n) || n < 1 || n != round(n)) {
    nce_abort("option `nce.threads` must be one positive whole number", "input")
  }
  as.integer(n)
}

# A seed for the Rust generator drawn from R's RNG, so set.seed() makes fits
# reproducible. 52 bits: exact as a double.
draw_seed <- function() {
  u <- sample.int(2097152L, 1L) - 1
  v <- sample.int(.Machine$integer.max, 1L) - 1
  u * 2147483648 + v
}

#' Control settings of the Newton/IRLS fit
#'
#' @param epsilon Convergence tolerance on the relative change of the deviance.
#' @param maxit Maximum number of Newton iterations.
#' @return A list for the `control` argument of [nce()].
#' @examples
#' nce_control(epsilon = 1e-12)
#' @export
nce_control <- function(epsilon = 1e-10, maxit = 100L) {
  if (!is.numeric(epsilon) || length(epsilon) != 1L || !is.finite(epsilon) || epsilon <= 0) {
    nce_abort("`epsilon` must be one positive number", "input")
  }
  if (!is.numeric(maxit) || length(maxit) != 1L || !is.finite(maxit) || maxit < 1) {
    nce_abort("`maxit` must be one positive whole number", "input")
  }
  list(epsilon = as.double(epsilon), maxit = as.double(round(maxit)))
}
