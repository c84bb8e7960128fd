# ARCH(1) as in ELFI's LFIRE example: y_t = t1 y_{t-1} + e_t,
# e_t = xi_t sqrt(0.2 + t2 e_{t-1}^2), xi_t and e_0 standard normal, y_0 = 0.
# Batch simulator (one row of `theta` per series) and ELFI's 17 summaries, vectorised over
# series; and the exact log likelihood (e_t recovered from y, e_0 integrated by
# Gauss-Hermite quadrature), for the exact posterior on a grid.

arch_simulate <- function(theta, n, n_obs = 100L) {
  t1 <- theta[, "t1"]
  t2 <- theta[, "t2"]
  e <- stats::rnorm(n)
  y_prev <- numeric(n)
  y <- matrix(0, n, n_obs)
  xi <- matrix(stats::rnorm(n * n_obs), n, n_obs)
  for (i in seq_len(n_obs)) {
    e <- xi[, i] * sqrt(0.2 + t2 * e^2)
    y_prev <- t1 * y_prev + e
    y[, i] <- y_prev
  }
  y
}

arch_summaries <- function(y) {
  if (is.null(dim(y))) y <- matrix(y, 1L)
  n <- ncol(y)
  mu <- rowMeans(y)
  v <- rowSums((y - mu)^2) / (n - 1)
  sc <- (y - mu) / sqrt(v)
  ac <- vapply(1:5, function(l) rowSums(sc[, (l + 1):n, drop = FALSE] * sc[, 1:(n - l), drop = FALSE]) / (n - l),
               numeric(nrow(y)))
  if (is.null(dim(ac))) ac <- matrix(ac, 1L)
  pairs <- utils::combn(5, 2)
  pw <- vapply(seq_len(ncol(pairs)), function(k) ac[, pairs[1, k]] * ac[, pairs[2, k]], numeric(nrow(y)))
  if (is.null(dim(pw))) pw <- matrix(pw, 1L)
  out <- cbind(mu, v, ac, pw)
  colnames(out) <- c("mean", "var", paste0("ac", 1:5), paste0("pw", pairs[1, ], pairs[2, ]))
  out
}

# Gauss-Hermite nodes and weights for integrals against the standard normal density
# (Golub-Welsch on the probabilists' Hermite recurrence).
gauss_hermite_normal <- function(k = 60L) {
  J <- matrix(0, k, k)
  off <- sqrt(seq_len(k - 1))
  J[cbind(1:(k - 1), 2:k)] <- off
  J[cbind(2:k, 1:(k - 1))] <- off
  e <- eigen(J, symmetric = TRUE)
  list(x = e$values, w = e$vectors[1, ]^2)
}

arch_loglik <- function(y, t1, t2, gh = gauss_hermite_normal()) {
  n <- length(y)
  e <- y - t1 * c(0, y[-n])
  rest <- sum(stats::dnorm(e[-1], 0, sqrt(0.2 + t2 * e[-n]^2), log = TRUE))
  first <- log(sum(gh$w * stats::dnorm(e[1], 0, sqrt(0.2 + t2 * gh$x^2))))
  rest + first
}

# Exact posterior on the rows of `theta` (uniform prior: proportional to the likelihood).
arch_exact_posterior <- function(y, theta) {
  gh <- gauss_hermite_normal()
  ll <- vapply(seq_len(nrow(theta)), function(i) arch_loglik(y, theta[i, "t1"], theta[i, "t2"], gh), 1)
  w <- exp(ll - max(ll))
  w / sum(w)
}

# Symmetrised KL divergence between two distributions on the same points.
sym_kl <- function(p, q, floor = 1e-300) {
  p <- pmax(p, floor)
  q <- pmax(q, floor)
  sum((p - q) * (log(p) - log(q)))
}
