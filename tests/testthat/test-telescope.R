# Telescoping waymarks in marglik_nce() (R/marglik-telescope.R, nce-core estimators/telescope.rs)
# and stacked chains. Exact values: a product of D Gamma(2, 1) kernels, log f = sum(log x - x),
# has log Z = 0.
gamma_lk <- function(x) rowSums(log(x) - x)

test_that("telescoping recovers log Z of a 40-D Gamma product (within 0.06 and 4 standard errors)", {
  set.seed(31)
  x <- matrix(rgamma(40 * 6000, 2, 1), ncol = 40)
  fit <- marglik_nce(x, gamma_lk, lower = 0, reference = "normal", waymarks = "always")
  tel <- fit$telescope
  expect_false(is.null(tel))
  expect_gt(length(tel$b), 2L)
  expect_equal(tel$b[c(1L, length(tel$b))], c(0, 1))
  expect_true(all(diff(tel$b) > 0))
  expect_equal(sum(tel$c), fit$logml)
  expect_true(all(tel$accuracy < 0.62))
  expect_lt(abs(fit$logml), 0.06)
  expect_lt(abs(fit$logml), 4 * fit$se)
  expect_true(fit$converged)
  expect_output(print(summary(fit)), "waymarks")
})

test_that("auto falls back to the single classifier where it suffices (same estimate as waymarks = 'none')", {
  set.seed(32)
  x <- matrix(rgamma(5 * 4000, 2, 1), ncol = 5)
  set.seed(1)
  a <- marglik_nce(x, gamma_lk, lower = 0)
  set.seed(1)
  b <- marglik_nce(x, gamma_lk, lower = 0, waymarks = "none")
  expect_null(a$telescope)
  expect_identical(a$logml, b$logml)
  expect_identical(a$se, b$se)
  expect_lt(abs(a$logml), 0.03)
})

test_that("telescoping does not depend on the thread count", {
  set.seed(33)
  x <- matrix(rgamma(20 * 2000, 2, 1), ncol = 20)
  old <- options(nce.threads = 1L)
  on.exit(options(old))
  set.seed(2)
  a <- marglik_nce(x, gamma_lk, lower = 0, reference = "normal", waymarks = "always", control = list(moves = 3))
  options(nce.threads = 2L)
  set.seed(2)
  b <- marglik_nce(x, gamma_lk, lower = 0, reference = "normal", waymarks = "always", control = list(moves = 3))
  expect_identical(a$logml, b$logml)
  expect_identical(a$se, b$se)
  expect_identical(a$telescope$b, b$telescope$b)
})

test_that("stacked chains: per-chain effective sample sizes; bad specifications are refused", {
  set.seed(34)
  ar <- function(n) as.numeric(stats::filter(rnorm(n, sd = sqrt(1 - 0.81)), 0.9, method = "recursive"))
  x <- c(ar(5000), ar(5000) + 0.05)
  lk <- function(s) -0.5 * s[, 1]^2
  one <- marglik_nce(x, lk)
  two <- marglik_nce(x, lk, chains = 2)
  expect_equal(two$chains, c(5000L, 5000L))
  expect_lt(two$ess, 0.25 * two$n)
  expect_lt(abs(two$logml - 0.5 * log(2 * pi)), 4 * two$se)
  expect_equal(marglik_nce(x, lk, chains = c(5000, 5000))$chains, c(5000L, 5000L))
  expect_error(marglik_nce(x, lk, chains = 3), "equal length", class = "nce_error_input")
  expect_error(marglik_nce(x, lk, chains = c(10, 20)), "sum to 30", class = "nce_error_input")
  expect_error(marglik_nce(x, lk, chains = "a"), "chain lengths", class = "nce_error_input")
  s <- bf_scenarios$s3
  d1 <- rpost_mh(4000, s$l1)
  d2 <- rpost_mh(4000, s$l2)
  k <- bayes_factor_nce(d1, d2, s$l1, s$l2, chains = list(c(2000, 2000), NULL))
  k1 <- bayes_factor_nce(d1, d2, s$l1, s$l2)
  expect_equal(k$log_bf, k1$log_bf)
  expect_true(all(k$ess < k$n))
  expect_error(bayes_factor_nce(d1, d2, s$l1, s$l2, chains = list(1, 2, 3)), "list of two", class = "nce_error_input")
})

test_that("telescoping settings are checked", {
  x <- matrix(rgamma(400, 2, 1), ncol = 2)
  expect_error(marglik_nce(x, gamma_lk, lower = 0, control = list(acuracy = 0.6)), "acuracy", class = "nce_error_input")
  expect_error(marglik_nce(x, gamma_lk, lower = 0, control = list(accuracy = 0.5)), "accuracy",
               class = "nce_error_input")
  expect_error(marglik_nce(x, gamma_lk, lower = 0, control = list(moves = 0)), "moves", class = "nce_error_input")
  expect_error(marglik_nce(x, gamma_lk, lower = 0, reference = "t", waymarks = "always"), "normal",
               class = "nce_error_input")
  expect_error(marglik_nce(x, gamma_lk, lower = 0, waymarks = "sometimes"), class = "error")
})

test_that("print and summary of a telescoped estimate", {
  set.seed(35)
  x <- matrix(rgamma(10 * 1000, 2, 1), ncol = 10)
  set.seed(3)
  fit <- marglik_nce(x, gamma_lk, lower = 0, waymarks = "always", control = list(moves = 2))
  fit$call <- quote(marglik_nce(x, gamma_lk, lower = 0, waymarks = "always", control = list(moves = 2)))
  expect_snapshot(print(fit, digits = 3))
  expect_snapshot(print(summary(fit), digits = 3))
})
