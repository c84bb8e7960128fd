# The sbibm tasks two_moons and slcp (Lueckmann et al. 2021) in R, written from sbibm 1.1.0's
# task code (sbibm/tasks/two_moons/task.py, sbibm/tasks/slcp/task.py), in the batch form that
# nce::ratio_amortised(batch = TRUE) calls: simulator(theta, n) with an n-row theta matrix
# (columns named as the prior's parameters) returning an n-row matrix. Sourced by bench/sbibm.R;
# bench/sbibm/check_tasks.py and sbibm_check_tasks() below compare them with sbibm's simulators.

# Two moons: prior U(-1, 1)^2. a ~ U(-pi/2, pi/2), r ~ N(0.1, 0.01^2),
# p = (r cos a + 0.25, r sin a); with the rotation by -pi/4 of sbibm's _map_fun,
# z0 = (theta1 + theta2) / sqrt(2), z1 = (-theta1 + theta2) / sqrt(2), x = p + (-|z0|, z1).
two_moons_prior <- function() nce::prior_uniform(theta1 = c(-1, 1), theta2 = c(-1, 1))

two_moons_simulator <- function(theta, n = nrow(theta)) {
  theta <- as.matrix(theta)
  a <- stats::runif(n, -pi / 2, pi / 2)
  r <- stats::rnorm(n, 0.1, 0.01)
  p1 <- r * cos(a) + 0.25
  p2 <- r * sin(a)
  z0 <- (theta[, 1] + theta[, 2]) / sqrt(2)
  z1 <- (-theta[, 1] + theta[, 2]) / sqrt(2)
  cbind(x1 = p1 - abs(z0), x2 = p2 + z1)
}

# SLCP: prior U(-3, 3)^5. Four independent bivariate normal draws with mean (theta1, theta2),
# s1 = theta3^2, s2 = theta4^2, rho = tanh(theta5) and covariance
# [[s1^2 + eps, rho s1 s2], [rho s1 s2, s2^2 + eps]], eps = 1e-6 (so the sds are about theta3^2
# and theta4^2). x = (draw1[1], draw1[2], draw2[1], ..., draw4[2]), sbibm's flattening of its
# (n, 4, 2) array.
slcp_prior <- function() {
  nce::prior_uniform(theta1 = c(-3, 3), theta2 = c(-3, 3), theta3 = c(-3, 3), theta4 = c(-3, 3),
                     theta5 = c(-3, 3))
}

slcp_simulator <- function(theta, n = nrow(theta)) {
  theta <- as.matrix(theta)
  eps <- 1e-6
  s1 <- theta[, 3]^2
  s2 <- theta[, 4]^2
  rho <- tanh(theta[, 5])
  v11 <- s1^2 + eps
  v22 <- s2^2 + eps
  v12 <- rho * s1 * s2
  # Cholesky factor of each 2x2 covariance.
  l11 <- sqrt(v11)
  l21 <- v12 / l11
  l22 <- sqrt(pmax(v22 - l21^2, 0))
  out <- matrix(NA_real_, n, 8L, dimnames = list(NULL, paste0("x", 1:8)))
  for (k in 1:4) {
    z1 <- stats::rnorm(n)
    z2 <- stats::rnorm(n)
    out[, 2L * k - 1L] <- theta[, 1] + l11 * z1
    out[, 2L * k] <- theta[, 2] + l21 * z1 + l22 * z2
  }
  out
}

sbibm_task <- function(task) {
  switch(task,
         two_moons = list(name = task, prior = two_moons_prior(), simulator = two_moons_simulator, dim_x = 2L),
         slcp = list(name = task, prior = slcp_prior(), simulator = slcp_simulator, dim_x = 8L),
         stop("unknown task ", task))
}

# Means and sds of n simulations at one theta, in R, for the comparison with sbibm's simulator.
sbibm_sim_moments <- function(task, theta, n = 10000L) {
  tk <- sbibm_task(task)
  th <- matrix(theta, n, length(theta), byrow = TRUE, dimnames = list(NULL, tk$prior$names))
  x <- tk$simulator(th, n)
  rbind(mean = colMeans(x), sd = apply(x, 2, stats::sd))
}
