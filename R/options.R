# Threads and seeds shared by every Rust call.

# Threads for the Rust pools: option `nce.threads` (default 2), a whole number from 1 to a
# bound set by the machine (4 per core, at least 8), so a typo cannot ask for a million.
nce_threads <- function(call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  n <- getOption("nce.threads", 2L)
  limit <- max_threads()
  if (!is.numeric(n) || length(n) != 1L || !is.finite(n) || n < 1 || n != round(n) || n > limit) {
    nce_abort(sprintf(paste("option `nce.threads` must be one whole number from 1 to %d (4 per core of this",
                            "machine), not %s: set options(nce.threads = 2), say."), limit, describe_value(n)),
              "input", call = call)
  }
  as.integer(n)
}

max_threads <- function() {
  # detectCores() asks the system each time: once per session is enough.
  if (is.null(thread_cache$limit)) {
    cores <- tryCatch(parallel::detectCores(logical = TRUE), error = function(e) NA_integer_)
    if (length(cores) != 1L || is.na(cores) || cores < 1L) cores <- 1L
    thread_cache$limit <- as.integer(max(8L, 4L * cores))
  }
  thread_cache$limit
}
thread_cache <- new.env(parent = emptyenv())

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
#' @return A list for the `control` argument of [nce()], [snce()] and [latkes()], which also
#'   take a plain list of some of these settings, e.g. `list(maxit = 5)`, merged into these
#'   defaults (see [nce_vocabulary]).
#' @section What it refuses:
#' * `epsilon` not one finite number > 0, `maxit` not a whole number >= 1 (`nce_error_input`).
#'   A list given to `control =` with unknown or unnamed settings is refused by the fit
#'   (`nce_error_input`).
#' @examples
#' nce_control(epsilon = 1e-12)
#' @export
nce_control <- function(epsilon = 1e-10, maxit = 100L) {
  check_number(epsilon, "epsilon", min = 0, exclusive_min = TRUE)
  check_whole(maxit, "maxit", min = 1)
  list(epsilon = as.double(epsilon), maxit = as.double(round(maxit)))
}
