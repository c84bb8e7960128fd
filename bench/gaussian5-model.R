# The 5-parameter Gaussian of bench/gaussian5.R (Hermans, Begy and Louppe 2020, as in the report's
# section 3.2): batch simulator, sufficient summaries and exact log likelihood. Sourced by
# bench/gaussian5.R and bench/many-penalties.R.

g5_simulate <- function(theta, n) {
  s1 <- theta[, "t3"]^2
  s2 <- theta[, "t4"]^2
  rho <- tanh(theta[, "t5"])
  z1 <- matrix(stats::rnorm(4 * n), n, 4)
  z2 <- matrix(stats::rnorm(4 * n), n, 4)
  a <- theta[, "t1"] + s1 * z1
  b <- theta[, "t2"] + s2 * (rho * z1 + sqrt(1 - rho^2) * z2)
  cbind(a, b)
}
g5_summaries <- function(x) {
  if (is.null(dim(x))) x <- matrix(x, 1L)
  a <- x[, 1:4, drop = FALSE]
  b <- x[, 5:8, drop = FALSE]
  ma <- rowMeans(a)
  mb <- rowMeans(b)
  va <- rowSums((a - ma)^2) / 3
  vb <- rowSums((b - mb)^2) / 3
  r <- rowSums((a - ma) * (b - mb)) / 3 / sqrt(va * vb)
  cbind(m1 = ma, m2 = mb, lv1 = log(va), lv2 = log(vb), z = atanh(pmin(pmax(r, -0.999), 0.999)))
}
g5_loglik <- function(th, x) {
  s1 <- th[, 3]^2
  s2 <- th[, 4]^2
  rho <- tanh(th[, 5])
  out <- 0
  for (i in 1:4) {
    u <- (x[i] - th[, 1]) / s1
    v <- (x[i + 4] - th[, 2]) / s2
    out <- out - log(2 * pi * s1 * s2 * sqrt(1 - rho^2)) - (u^2 - 2 * rho * u * v + v^2) / (2 * (1 - rho^2))
  }
  out
}
