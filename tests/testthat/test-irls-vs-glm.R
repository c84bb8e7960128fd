# Plumbing: the Rust Newton/IRLS against glm() on the same data.

glm_ctrl <- glm.control(epsilon = 1e-14, maxit = 100)
rust_fit <- function(x, y, w, o, family) {
  nce:::rs(nce:::nce_fit_glm(x, list(y = y, weights = w, offset = o), NULL,
                             list(family = family, control = nce_control(epsilon = 1e-14), threads = 2L)))
}

test_that("binomial IRLS matches glm with offsets and prior weights", {
  set.seed(11)
  n <- 400
  d <- data.frame(a = rnorm(n), b = runif(n), f = factor(sample(letters[1:3], n, TRUE)))
  trials <- sample(1:6, n, TRUE)
  p <- plogis(-0.3 + 0.8 * d$a - 1.2 * d$b + (d$f == "b"))
  succ <- rbinom(n, trials, p)
  off <- rnorm(n, sd = 0.3)
  g <- glm(succ / trials ~ a + b + f, binomial, d, weights = trials, offset = off, control = glm_ctrl)
  x <- model.matrix(~ a + b + f, d)
  r <- rust_fit(x, succ / trials, as.double(trials), off, "binomial")
  expect_true(r$converged)
  expect_equal(r$coefficients, unname(coef(g)), tolerance = 1e-8)
  expect_equal(r$cov, unname(vcov(g)), tolerance = 1e-6)
  expect_equal(r$deviance, deviance(g), tolerance = 1e-8)
})

test_that("Poisson IRLS matches glm with offsets and prior weights", {
  set.seed(12)
  n <- 300
  d <- data.frame(a = rnorm(n), b = rnorm(n))
  w <- runif(n, 0.5, 2)
  off <- log(runif(n, 1, 3))
  y <- rpois(n, exp(0.2 + 0.5 * d$a - 0.3 * d$b + off))
  g <- suppressWarnings(glm(y ~ a + b, poisson, d, weights = w, offset = off, control = glm_ctrl))
  r <- rust_fit(model.matrix(~ a + b, d), as.double(y), w, off, "poisson")
  expect_equal(r$coefficients, unname(coef(g)), tolerance = 1e-8)
  expect_equal(r$deviance, deviance(g), tolerance = 1e-8)
})

test_that("a rank-deficient design gives NA for the aliased column, like glm", {
  set.seed(13)
  n <- 200
  d <- data.frame(a = rnorm(n))
  d$b <- 2 * d$a + 1
  y <- rbinom(n, 1, plogis(d$a))
  # The aliased column adds nothing: compare with glm on the reduced design.
  g <- glm(y ~ a, binomial, d, control = glm_ctrl)
  r <- rust_fit(model.matrix(~ a + b, d), as.double(y), rep(1, n), rep(0, n), "binomial")
  expect_equal(r$aliased, c(FALSE, FALSE, TRUE))
  expect_equal(r$coefficients[1:2], unname(coef(g)[1:2]), tolerance = 1e-8)
})
