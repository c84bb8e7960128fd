test_that("known normalisers: 2-D standard normal, 10-D correlated normal, bounded beta-like kernel (within 0.01)", {
  set.seed(11)
  cases <- ml_cases()
  for (nm in names(cases)) {
    cs <- cases[[nm]]
    fit <- marglik_nce(cs$gen(10000), cs$lk, lower = cs$lb, upper = cs$ub)
    expect_lt(abs(fit$logml - cs$exact), 0.01, label = nm)
    expect_lt(abs(fit$logml - cs$exact), 4 * fit$se, label = nm)
    expect_true(fit$converged && !fit$separated)
    expect_equal(fit$n, 5000L)
    expect_equal(fit$n_ref, 5000L)
  }
  expect_equal(cases$normal2$exact, log(2 * pi))
})

test_that("Student t reference, all draws, more reference draws, given ess", {
  set.seed(12)
  cs <- ml_cases()$bounded
  x <- cs$gen(6000)
  a <- marglik_nce(x, cs$lk, lower = cs$lb, upper = cs$ub, reference = "t", df = 7)
  expect_lt(abs(a$logml - cs$exact), 0.01)
  expect_equal(a$reference$family, "t")
  b <- marglik_nce(x, cs$lk, lower = cs$lb, upper = cs$ub, split = FALSE, n_ref = 20000, ess = 6000)
  expect_lt(abs(b$logml - cs$exact), 0.01)
  expect_equal(c(b$n, b$n_ref, b$ess), c(6000, 20000, 6000))
  expect_equal(b$se, b$se_iid)
  expect_output(print(a), "log Z = ")
  expect_output(print(summary(b)), "reference: normal, fitted to all draws")
  # named bounds are matched to columns
  colnames(x) <- c("p", "s")
  d <- marglik_nce(x, cs$lk, lower = c(s = 0, p = 0), upper = c(s = Inf, p = 1), split = FALSE, n_ref = 20000,
                   ess = 6000)
  expect_equal(d$reference$ub, c(1, Inf))
})

test_that("reproducible with set.seed and independent of the thread count", {
  cs <- ml_cases()$normal10
  set.seed(13)
  x <- cs$gen(4000)
  old <- options(nce.threads = 1L)
  on.exit(options(old))
  set.seed(1)
  a <- marglik_nce(x, cs$lk)
  options(nce.threads = 2L)
  set.seed(1)
  b <- marglik_nce(x, cs$lk)
  expect_identical(a$logml, b$logml)
  expect_identical(a$se, b$se)
})

test_that("MCMC draws: the standard error grows with the autocorrelation", {
  # AR(1) chain with N(0, 1) margins, phi = 0.9: ESS about n (1 - phi) / (1 + phi)
  set.seed(14)
  n <- 20000
  x <- as.numeric(stats::filter(rnorm(n, sd = sqrt(1 - 0.81)), 0.9, method = "recursive"))
  fit <- marglik_nce(x, function(s) -0.5 * s[, 1]^2)
  expect_lt(fit$ess, 0.25 * fit$n)
  expect_gt(fit$se, 1.5 * fit$se_iid)
  expect_lt(abs(fit$logml - 0.5 * log(2 * pi)), 3 * fit$se)
})

test_that("bayes_factor_marglik() combines two marginal likelihoods", {
  set.seed(15)
  y <- 1.5
  lp1 <- function(m) dnorm(y, m[, 1], 1, log = TRUE) + dnorm(m[, 1], 0, 1, log = TRUE)
  ml1 <- marglik_nce(rnorm(10000, y / 2, sqrt(0.5)), lp1)
  ml2 <- structure(list(logml = dnorm(y, 0, 1, log = TRUE), se = 0), class = "nce_marglik")
  k <- bayes_factor_marglik(ml1, ml2)
  expect_s3_class(k, "nce_bf")
  expect_equal(k$log_bf, ml1$logml - ml2$logml)
  expect_equal(k$se, ml1$se)
  expect_lt(abs(k$log_bf - (dnorm(y, 0, sqrt(2), log = TRUE) - dnorm(y, 0, 1, log = TRUE))), 0.01)
  expect_output(print(summary(k)), "log marginal likelihoods")
  expect_error(bayes_factor_marglik(ml1, list()), "results of marglik_nce", class = "nce_error_input")
})

test_that("bad input is refused with classed errors", {
  lk <- function(s) -0.5 * rowSums(s^2)
  expect_error(marglik_nce(c(1, NA, 2, 3, 4), lk), "NA .* in 1 of 5 draws \\(rows 2\\)", class = "nce_error_data")
  expect_error(marglik_nce(1, lk), "has 1 draw", class = "nce_error_input")
  expect_error(marglik_nce(c(0.5, 1.5, 0.2, 0.3), lk, lower = 0, upper = 1), "1 draws of column 1 lie outside", class = "nce_error_support")
  expect_error(marglik_nce(rnorm(100), function(s) ifelse(s[, 1] > 0, NaN, 0)), "`log_density` is not finite at",
               class = "nce_error_data")
  expect_error(marglik_nce(rnorm(100), function(s) 0), "one number per row", class = "nce_error_input")
  expect_error(marglik_nce(matrix(rnorm(20), 10), lk, lower = c(0, 1, 2)), "length 1 or 2", class = "nce_error_input")
  expect_error(marglik_nce(cbind(rnorm(100), 1), lk), "cannot fit a reference", class = "nce_error_input")
  expect_error(marglik_nce(rnorm(100), lk, n_ref = 1), "n_ref", class = "nce_error_input")
})

test_that("complete separation against the reference: no number, a warning and bounds", {
  set.seed(16)
  # the kernel is zero (-Inf) wherever the reference puts its draws but at the draws themselves
  x <- rnorm(200)
  lk <- function(s) ifelse(s[, 1] %in% x, 0, -Inf)
  expect_warning(fit <- marglik_nce(x, lk), "complete separation", class = "nce_warning_separation")
  expect_true(is.na(fit$logml) && fit$separated)
  expect_output(print(fit), "not identified")
})

test_that("accuracy at least as good as bridgesampling on the same draws (up to Monte Carlo noise)", {
  skip_if_not_installed("bridgesampling")
  # Both compute the optimal bridge estimator with a normal reference fitted to the first half of
  # the (transformed) draws: their errors differ only through the reference draws, so "at least as
  # good" is checked up to Monte Carlo noise. With 6 replications per case the ratio of the pooled
  # root mean squared errors has a standard deviation near 0.2 when the two are equally accurate
  # (bench/bridge.R, 100 replications per case: ratios 0.94 to 1.25; 300 replications of the two
  # scenario-2 models: 0.98 and 0.98), so it must stay below 1.5.
  set.seed(17)
  bs <- function(x, lk, lb, ub) {
    colnames(x) <- paste0("x", seq_len(ncol(x)))
    nm <- colnames(x)
    bridgesampling::bridge_sampler(x, log_posterior = function(p, data) lk(matrix(p, 1)), data = NULL,
                                   lb = stats::setNames(rep_len(lb, ncol(x)), nm),
                                   ub = stats::setNames(rep_len(ub, ncol(x)), nm), silent = TRUE)$logml
  }
  err_nce <- err_bs <- list()
  for (nm in names(cases <- ml_cases())) {
    cs <- cases[[nm]]
    for (r in 1:6) {
      x <- cs$gen(10000)
      err_nce[[nm]] <- c(err_nce[[nm]], marglik_nce(x, cs$lk, lower = cs$lb, upper = cs$ub)$logml - cs$exact)
      err_bs[[nm]] <- c(err_bs[[nm]], bs(x, cs$lk, cs$lb, cs$ub) - cs$exact)
    }
    expect_lt(max(abs(err_nce[[nm]])), 0.01, label = nm)
  }
  # Table 3 as a difference of two marginal likelihoods (prior density 1/60 on (-30, 30))
  for (nm in names(bf_scenarios)) {
    s <- bf_scenarios[[nm]]
    for (r in 1:6) {
      d1 <- cbind(rpost_reject(10000, s$l1))
      d2 <- cbind(rpost_reject(10000, s$l2))
      p1 <- function(x) s$l1(x) - log(60)
      p2 <- function(x) s$l2(x) - log(60)
      k <- bayes_factor_marglik(marglik_nce(d1, p1, lower = -30, upper = 30), marglik_nce(d2, p2, lower = -30, upper = 30))
      err_nce[[nm]] <- c(err_nce[[nm]], k$log_bf - s$exact)
      err_bs[[nm]] <- c(err_bs[[nm]], bs(d1, p1, -30, 30) - bs(d2, p2, -30, 30) - s$exact)
    }
    expect_lt(max(abs(err_nce[[nm]])), 0.05, label = nm)
  }
  rmse <- function(e) sqrt(mean(unlist(e)^2))
  expect_lte(rmse(err_nce), 1.5 * rmse(err_bs))
})

test_that("a mixture reference fits a posterior with two separated modes", {
  # 0.5 N((-3, 0), I) + 0.5 N((3, 0), I) times exp(2.5): log Z = 2.5 exactly.
  log_density <- function(x) {
    x <- as.matrix(x)
    l1 <- colSums(dnorm(t(x), c(-3, 0), log = TRUE))
    l2 <- colSums(dnorm(t(x), c(3, 0), log = TRUE))
    m <- pmax(l1, l2)
    m + log(0.5 * exp(l1 - m) + 0.5 * exp(l2 - m)) + 2.5
  }
  set.seed(4)
  k <- sample(1:2, 4000, TRUE)
  x <- matrix(rnorm(8000), 4000, 2) + rbind(c(-3, 0), c(3, 0))[k, ]
  colnames(x) <- c("a", "b")
  mix <- marglik_nce(x, log_density, reference = "mixture")
  normal <- marglik_nce(x, log_density, reference = "normal")
  expect_equal(mix$reference$family, "mixture")
  expect_lt(abs(mix$logml - 2.5), 4 * mix$se)
  # Over 10 such data sets (bench/README.md) the errors were 0.0011 against the normal's 0.015.
  expect_lt(mix$se, normal$se / 5)
  expect_lt(abs(mix$logml - 2.5), 0.01)
  expect_error(marglik_nce(x, log_density, reference = "mixture", waymarks = "always"), "telescoping",
               class = "nce_error_input")
  # A constant parameter has no mixture density: refused as the normal reference refuses it.
  x[, "b"] <- 1
  expect_error(marglik_nce(x, log_density, reference = "mixture"), "constant", class = "nce_error_input")
})
