# nsim copies of the observed sequences: their states and covariates, one row per transition.
check_sim_size <- function(object, nsim, call = caller_call()) {
  call <- call  # the simulate() call, forced here
  check_nsim(nsim, 8 * nrow(object$transitions) * (ncol(object$transitions) + 2), what = "the simulated sequences",
             call = call)
}
