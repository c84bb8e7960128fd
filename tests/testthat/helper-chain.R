# Truncated-exponential Markov chain on [0, 1]: p(y_t | y_{t-1}) proportional to
# exp(theta y_t y_{t-1}), whose normaliser (e^a - 1)/a, a = theta y_{t-1}, is closed form.
rchain <- function(n, theta) {
  y <- numeric(n + 1L)
  y[1] <- stats::runif(1)
  for (t in 2:(n + 1L)) {
    a <- theta * y[t - 1L]
    y[t] <- if (abs(a) < 1e-12) stats::runif(1) else log1p(stats::runif(1) * expm1(a)) / a
  }
  y
}
chain_log_z <- function(a) ifelse(abs(a) < 1e-10, 0, log(expm1(a) / a))
chain_loglik <- function(theta, y) {
  prev <- y[-length(y)]
  sum(theta * y[-1] * prev - chain_log_z(theta * prev))
}
chain_mle <- function(y) stats::optimize(function(t) -chain_loglik(t, y), c(-20, 20), tol = 1e-10)$minimum
