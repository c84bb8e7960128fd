# p(x1, x2, x3) = ring(x1, x2) x Beta(x3; 2, 5): radius 2 with radial sd 0.2, uniform angle
# (test-nce-mlp.R and bench/deep-ebm-beside.R). The exact log density, and n draws as a data frame.
ring_beta_log_density <- function(d) {
  r <- sqrt(d$x1^2 + d$x2^2)
  dnorm(r, 2, 0.2, log = TRUE) - log(2 * pi * r) + dbeta(d$x3, 2, 5, log = TRUE)
}
ring_beta <- function(n) {
  th <- runif(n, 0, 2 * pi)
  r <- rnorm(n, 2, 0.2)
  data.frame(x1 = r * cos(th), x2 = r * sin(th), x3 = rbeta(n, 2, 5))
}
