# Table 3 of the NCL report (section 3.4): x0 from one of
#   M1: x ~ N(-theta^2, 1), M2: x ~ N(theta^2, 1), M3: x ~ N(theta^2, variance 2),
# theta ~ U(-30, 30) in every model. Exact log K by 1-D numerical integration
# (stats::integrate over [-30, 30], rel.tol 1e-12; the prior density cancels):
#   scenario 1 (x0 = -1.0136, M1 vs M2):  1.046732   (the report's estimate: 1.60)
#   scenario 2 (x0 = -1.0136, M1 vs M3):  0.871769   (report: 0.97)
#   scenario 3 (x0 =  1.7403, M1 vs M2): -2.069777   (report: -2.07)
bf_loglik <- function(x0, sign, var) function(th) stats::dnorm(x0, sign * th[, 1]^2, sqrt(var), log = TRUE)
bf_scenarios <- list(
  s1 = list(l1 = bf_loglik(-1.0136, -1, 1), l2 = bf_loglik(-1.0136, 1, 1), exact = 1.046732),
  s2 = list(l1 = bf_loglik(-1.0136, -1, 1), l2 = bf_loglik(-1.0136, 1, 2), exact = 0.871769),
  s3 = list(l1 = bf_loglik(1.7403, -1, 1), l2 = bf_loglik(1.7403, 1, 1), exact = -2.069777)
)
bf_exact <- function(x0, sign1, var1, sign2, var2) {
  ml <- function(sign, var) stats::integrate(function(t) stats::dnorm(x0, sign * t^2, sqrt(var)), -30, 30,
                                             subdivisions = 2000L, rel.tol = 1e-12)$value
  log(ml(sign1, var1)) - log(ml(sign2, var2))
}

# Independent posterior draws by rejection from the prior restricted to [-6, 6]
# (the likelihoods are below exp(-600) beyond), envelope the maximum likelihood.
rpost_reject <- function(n, loglik, a = -6, b = 6) {
  lmax <- max(loglik(cbind(seq(a, b, length.out = 20001L))))
  out <- numeric(0)
  while (length(out) < n) {
    th <- stats::runif(4L * n, a, b)
    out <- c(out, th[log(stats::runif(length(th))) < loglik(cbind(th)) - lmax])
  }
  out[seq_len(n)]
}

# Random-walk Metropolis on theta under the U(-30, 30) prior (as in the report).
rpost_mh <- function(n, loglik, step = 1.5, burn = 100L, init = 0.5) {
  th <- init
  lt <- loglik(cbind(th))
  out <- numeric(n + burn)
  for (i in seq_len(n + burn)) {
    p <- th + step * stats::rnorm(1L)
    if (abs(p) < 30) {
      lp <- loglik(cbind(p))
      if (log(stats::runif(1L)) < lp - lt) {
        th <- p
        lt <- lp
      }
    }
    out[i] <- th
  }
  out[-seq_len(burn)]
}

# Kernels with known normalisers for marglik_nce().
ml_cases <- function() {
  d <- 10L
  S <- 0.6^abs(outer(1:d, 1:d, "-")) * tcrossprod(seq(0.5, 2, length.out = d))
  Si <- solve(S)
  L <- chol(S)
  list(
    normal2 = list(gen = function(n) matrix(stats::rnorm(2L * n), ncol = 2L),
                   lk = function(x) -0.5 * rowSums(x^2), exact = log(2 * pi), lb = -Inf, ub = Inf),
    normal10 = list(gen = function(n) matrix(stats::rnorm(d * n), ncol = d) %*% L,
                    lk = function(x) -0.5 * rowSums((x %*% Si) * x),
                    exact = 0.5 * d * log(2 * pi) + 0.5 * as.numeric(determinant(S)$modulus), lb = -Inf, ub = Inf),
    # beta-like: p in (0, 1) with a Beta(3, 5) kernel, s > 0 with a Gamma(4, rate 2) kernel
    bounded = list(gen = function(n) cbind(stats::rbeta(n, 3, 5), stats::rgamma(n, 4, 2)),
                   lk = function(x) 2 * log(x[, 1]) + 4 * log1p(-x[, 1]) + 3 * log(x[, 2]) - 2 * x[, 2],
                   exact = lbeta(3, 5) + lgamma(4) - 4 * log(2), lb = c(0, 0), ub = c(1, Inf))
  )
}
