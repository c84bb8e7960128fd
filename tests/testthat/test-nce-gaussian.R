# A 2-D Gaussian with unknown precision and mean, fitted as an unnormalised model
# f(y) = -y'Py/2 + (P mu)'y against a reference fitted to the data.

test_that("a 2-D Gaussian's precision, mean and normaliser are recovered", {
  set.seed(21)
  n <- 3000
  sigma <- matrix(c(1, 0.6, 0.6, 2), 2)
  mu <- c(1, -1)
  y <- sweep(matrix(rnorm(2 * n), n) %*% chol(sigma), 2, mu, "+")
  df <- data.frame(a = y[, 1], b = y[, 2])
  fit <- nce(~ I(a^2) + I(a * b) + I(b^2) + a + b, df, ref_fit(df, "normal", inflate = 1.5), ratio = 20)
  P <- solve(sigma)
  truth <- c(`(Intercept)` = -(log(2 * pi) - 0.5 * log(det(P)) + 0.5 * drop(t(mu) %*% P %*% mu)),
             `I(a^2)` = -P[1, 1] / 2, `I(a * b)` = -P[1, 2], `I(b^2)` = -P[2, 2] / 2,
             a = (P %*% mu)[1], b = (P %*% mu)[2])
  se <- sqrt(diag(vcov(fit)))
  expect_named(coef(fit), names(truth))
  expect_true(all(abs(coef(fit) - truth) < 3.5 * se), info = paste(round((coef(fit) - truth) / se, 2), collapse = " "))
  # The normaliser of the fitted Gaussian, in closed form, equals the intercept's estimate.
  b <- coef(fit)
  Ph <- -matrix(c(2 * b[["I(a^2)"]], b[["I(a * b)"]], b[["I(a * b)"]], 2 * b[["I(b^2)"]]), 2)
  h <- c(b[["a"]], b[["b"]])
  log_z_hat <- log(2 * pi) - 0.5 * log(det(Ph)) + 0.5 * drop(t(h) %*% solve(Ph, h))
  expect_lt(abs(fit$log_normaliser - log_z_hat), 2 * se[[1]])
})
