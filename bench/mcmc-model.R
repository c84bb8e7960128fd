# The model, data and sampler of bench/mcmc-coverage.R and bench/mcmc-coverage-marglik.R (sourced by both): one
# slope, y_i ~ Bernoulli(F(theta x_i)), theta ~ N(0, prior_sd^2), F the logistic or the normal cdf; 100 simulated
# points (seed 20261123); exact log marginal likelihoods by 1-D quadrature; random-walk Metropolis.
set.seed(20261123)
m <- 100
xd <- rnorm(m)
yd <- rbinom(m, 1, plogis(1.2 * xd))
prior_sd <- 2
loglik_logit <- function(th) {
  colSums(yd * plogis(outer(xd, th), log.p = TRUE) + (1 - yd) * plogis(-outer(xd, th), log.p = TRUE))
}
loglik_probit <- function(th) {
  colSums(yd * pnorm(outer(xd, th), log.p = TRUE) + (1 - yd) * pnorm(-outer(xd, th), log.p = TRUE))
}
log_evidence <- function(ll) {
  lmax <- max(ll(seq(-10, 10, by = 0.001)))
  f <- function(t) exp(ll(t) - lmax) * dnorm(t, 0, prior_sd)
  log(integrate(f, -10, 10, subdivisions = 2000L, rel.tol = 1e-12)$value) + lmax
}

# Metropolis with proposal sd `step` for `k` chains at once: a draws matrix (iterations x chains).
metropolis <- function(k, iters, ll, init, step, burn = 2000L) {
  th <- init
  lp <- ll(th) + dnorm(th, 0, prior_sd, log = TRUE)
  out <- matrix(0, iters, k)
  for (i in seq_len(iters + burn)) {
    p <- th + step * rnorm(k)
    lpp <- ll(p) + dnorm(p, 0, prior_sd, log = TRUE)
    acc <- log(runif(k)) < lpp - lp
    th[acc] <- p[acc]
    lp[acc] <- lpp[acc]
    if (i > burn) out[i - burn, ] <- th
  }
  out
}
