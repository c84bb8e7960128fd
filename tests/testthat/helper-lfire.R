# A toy LFIRE problem (test-lfire.R, test-vocabulary.R): ten N(mu, 1) draws summarised by their
# mean and variance, a uniform prior on (-1, 1) and a grid of `n_grid` values of mu.
toy_lfire_problem <- function(n_grid) {
  pr <- prior_uniform(mu = c(-1, 1))
  list(sim = function(theta, n) matrix(rnorm(n * 10, theta[, "mu"]), n, 10),
       summ = function(x) cbind(m = rowMeans(x), v = apply(x, 1, var)),
       pr = pr, th = theta_grid(pr, n_grid))
}

# lfire() on problem `p` at an observed series drawn after set.seed(2); `...`: n_theta, n_marginal, control.
toy_lfire_fit <- function(p, ...) {
  set.seed(2)
  lfire(matrix(rnorm(10), 1), p$sim, p$summ, p$pr, theta = p$th, batch = TRUE, ...)
}
