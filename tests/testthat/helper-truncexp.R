# Truncated exponential on [0, 1]: p(y) proportional to exp(theta y).
rtexp <- function(n, theta) log1p(stats::runif(n) * (exp(theta) - 1)) / theta
texp_log_z <- function(theta) log((exp(theta) - 1) / theta)
texp_mean <- function(theta) exp(theta) / (exp(theta) - 1) - 1 / theta
# Exact MLE: the score equation mean(y) = E_theta[y].
texp_mle <- function(y) {
  stats::uniroot(function(t) texp_mean(t) - mean(y), c(-50, 50), tol = 1e-12)$root
}
shared_data_dir <- function() {
  d <- Sys.getenv("NCE_SHARED_DATA")
  if (!nzchar(d) || !dir.exists(d)) testthat::skip("shared data not available (set NCE_SHARED_DATA)")
  d
}
