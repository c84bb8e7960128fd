test_that("Table 3 exact values follow from 1-D integration", {
  expect_equal(bf_exact(-1.0136, -1, 1, 1, 1), bf_scenarios$s1$exact, tolerance = 1e-6)
  expect_equal(bf_exact(-1.0136, -1, 1, 1, 2), bf_scenarios$s2$exact, tolerance = 1e-6)
  expect_equal(bf_exact(1.7403, -1, 1, 1, 1), bf_scenarios$s3$exact, tolerance = 1e-6)
})

test_that("Table 3 scenarios: within 0.05 and 3 standard errors of the exact log K (independent draws)", {
  set.seed(20240601)
  for (nm in names(bf_scenarios)) {
    s <- bf_scenarios[[nm]]
    fit <- bayes_factor_nce(rpost_reject(10000, s$l1), rpost_reject(10000, s$l2), s$l1, s$l2)
    err <- fit$log_bf - s$exact
    expect_lt(abs(err), 0.05, label = paste(nm, "error"))
    expect_lt(abs(err), 3 * fit$se, label = paste(nm, "error"))
    expect_true(fit$converged)
    expect_equal(fit$bf, exp(fit$log_bf))
    expect_equal(sum(fit$prob), 1)
    expect_equal(fit$prob[["model1"]], plogis(fit$log_bf))
  }
})

test_that("MCMC draws: effective sample sizes inflate the standard error, which covers the exact log K", {
  set.seed(7)
  for (nm in names(bf_scenarios)) {
    s <- bf_scenarios[[nm]]
    fit <- bayes_factor_nce(rpost_mh(10000, s$l1), rpost_mh(10000, s$l2), s$l1, s$l2)
    expect_lt(abs(fit$log_bf - s$exact), 3 * fit$se, label = nm)
    expect_true(all(fit$ess < 0.6 * fit$n))
    expect_gt(fit$se, 1.3 * fit$se_iid)
  }
})

test_that("precomputed log-likelihoods give the same estimate; ess can be given", {
  set.seed(2)
  s <- bf_scenarios$s1
  d1 <- rpost_reject(2000, s$l1)
  d2 <- rpost_reject(3000, s$l2)
  a <- bayes_factor_nce(d1, d2, s$l1, s$l2)
  b <- bayes_factor_nce(NULL, NULL, list(s$l1(cbind(d1)), s$l1(cbind(d2))), list(s$l2(cbind(d1)), s$l2(cbind(d2))))
  expect_equal(a$log_bf, b$log_bf)
  expect_equal(a$n, c(model1 = 2000L, model2 = 3000L))
  c <- bayes_factor_nce(d1, d2, s$l1, s$l2, ess = c(2000, 3000))
  expect_equal(c$se, c$se_iid)
  expect_equal(c$log_bf, a$log_bf)
  p <- bayes_factor_nce(d1, d2, s$l1, s$l2, prior_odds = 3)
  expect_equal(p$prob[["model1"]], plogis(a$log_bf + log(3)))
  expect_output(print(a), "log K = ")
  expect_output(print(summary(a)), "effective sample sizes")
})

test_that("the estimate does not depend on the thread count", {
  set.seed(3)
  s <- bf_scenarios$s3
  d1 <- rpost_reject(5000, s$l1)
  d2 <- rpost_reject(5000, s$l2)
  old <- options(nce.threads = 1L)
  on.exit(options(old))
  a <- bayes_factor_nce(d1, d2, s$l1, s$l2)
  options(nce.threads = 2L)
  b <- bayes_factor_nce(d1, d2, s$l1, s$l2)
  expect_identical(a$log_bf, b$log_bf)
  expect_identical(a$se, b$se)
})

test_that("bad input: NA draws, non-finite log-likelihoods, one draw, different dimensions", {
  s <- bf_scenarios$s1
  d <- c(0.1, NA, 0.3, NA)
  expect_error(bayes_factor_nce(d, 1:4 / 10, s$l1, s$l2), "`draws1` has NA .* in 2 of 4 draws \\(rows 2, 4\\)",
               class = "nce_error_data")
  lbad <- function(th) ifelse(th[, 1] > 0.5, -Inf, s$l1(th))
  expect_error(bayes_factor_nce(c(0.1, 0.7, 0.9), c(0.2, 0.3), lbad, s$l2),
               "`log_density1` is not finite at 2 of 3 draws of draws1 \\(rows 2, 3; values -Inf\\)",
               class = "nce_error_data")
  expect_error(bayes_factor_nce(NULL, NULL, list(c(1, NaN), c(1, 2)), list(c(1, 2), c(1, 2))),
               "`log_density1` is not finite at 1 of 2 draws of draws1 \\(rows 2",
               class = "nce_error_data")
  expect_error(bayes_factor_nce(0.5, c(0.2, 0.3), s$l1, s$l2), "has 1 draw: at least two", class = "nce_error_input")
  expect_error(bayes_factor_nce(matrix(0, 3, 2), matrix(0, 3, 1), s$l1, s$l2), "2 columns and `draws2` 1",
               class = "nce_error_input")
  expect_error(bayes_factor_nce(1:3 / 10, 1:3 / 10, s$l1, function(th) 1), "one number per row", class = "nce_error_input")
  expect_error(bayes_factor_nce(1:3 / 10, 1:3 / 10, s$l1, list(1, 2)), "both be functions", class = "nce_error_input")
  expect_error(bayes_factor_nce(1:3 / 10, 1:3 / 10, s$l1, s$l2, ess = c(1, -1)), "ess", class = "nce_error_input")
})

test_that("complete separation: no number, a warning and bounds", {
  # x0 = 0; M1: x ~ N(theta, 0.01^2), M2: x ~ N(theta - 5, 0.01^2); flat prior: exact log K = 0,
  # but the posteriors (near 0 and near 5) do not overlap.
  set.seed(4)
  l1 <- function(th) dnorm(0, th[, 1], 0.01, log = TRUE)
  l2 <- function(th) dnorm(0, th[, 1] - 5, 0.01, log = TRUE)
  expect_warning(fit <- bayes_factor_nce(rnorm(500, 0, 0.01), rnorm(500, 5, 0.01), l1, l2),
                 "complete separation.*do not overlap.*bounds it", class = "nce_warning_separation")
  expect_true(fit$separated)
  expect_true(is.na(fit$log_bf) && is.na(fit$se) && is.na(fit$bf))
  expect_lt(fit$bounds[["lower"]], 0)
  expect_gt(fit$bounds[["upper"]], 0)
  expect_output(print(fit), "not identified")
})
