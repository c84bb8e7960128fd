# Regressions of the one-contract issue: each defect a user met before the base class, as it
# must behave now (the contract table asserts the same invariants on every class).

small_latkes <- function() {
  set.seed(301)
  d <- rlatkes(120, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768), n_trials = 2)
  set.seed(302)
  latkes(d, group = "trial", window = c(0, 1024, 0, 768), ratio = 5, kernel = ~ s(dist, k = 5),
         intercept = ~ s(x_prev, y_prev, k = 10))
}

test_that("latkes: summary(), logLik(), AIC() and glance() report one log-likelihood with one df", {
  fit <- small_latkes()
  ll <- logLik(fit)
  s <- summary(fit)
  expect_equal(as.numeric(s$logLik), as.numeric(ll), tolerance = 1e-10)
  expect_equal(attr(s$logLik, "df"), attr(ll, "df"), tolerance = 1e-10)
  expect_equal(s$aic, AIC(fit), tolerance = 1e-10)
  skip_if_not_installed("broom")
  g <- broom::glance(fit)
  expect_equal(c(g$logLik, g$AIC, g$BIC), c(as.numeric(ll), AIC(fit), BIC(fit)), tolerance = 1e-10)
  # The grid normaliser is the default, with the kernel's df; the intercept's estimate on request.
  li <- logLik(fit, normalise = "intercept")
  expect_gt(attr(li, "df"), attr(ll, "df"))
  expect_equal(attr(ll, "df"), sum(fit$edf[nce:::kernel_columns(fit)$coef]))
})

test_that("predict() defaults to the link on sequential fits, and unknown types are classed errors", {
  fit <- small_latkes()
  expect_identical(predict(fit), predict(fit, type = "link"))
  expect_false(isTRUE(all.equal(predict(fit), predict(fit, type = "log_kernel"))))
  expect_equal(fitted(fit), predict(fit, type = "response"))
  e <- expect_error(predict(fit, type = "bogus"), class = "nce_error_input")
  expect_match(conditionMessage(e), "\"log_kernel\"")
})

test_that("predict() of an snce fit takes the very sequence it was fitted to", {
  set.seed(303)
  chain <- data.frame(y = rchain(60, 2))
  set.seed(304)
  s <- snce(~ I(y * y_prev), chain, ref_uniform(y = c(0, 1)), ratio = 5, intercept = ~ s(y_prev, k = 5))
  p <- predict(s, newdata = chain)
  expect_length(p, nrow(chain))
  expect_true(is.na(p[1L]))
  expect_equal(unname(p[-1L]), unname(predict(s)), tolerance = 1e-12)
  expect_error(predict(s, newdata = chain, type = "terms"), class = "nce_error_input")
})

test_that("predict(type = \"terms\") where a class has no terms is a classed error, not match.arg's", {
  set.seed(305)
  fit <- vnce(rmog(200, theta = 4), mog_model())
  expect_error(predict(fit, type = "terms"), class = "nce_error_input")
  d <- data.frame(y = rtexp(200, 2))
  set.seed(306)
  nl <- nce(~ a * y, d, ref_uniform(y = c(0, 1)), ratio = 5, start = c(a = 1))
  expect_error(predict(nl, type = "terms"), class = "nce_error_input")
})

test_that("amortised ratios: fitted() is predict(type = \"response\"); augment() works for any formula", {
  sim <- function(theta, n) matrix(stats::rnorm(n * 10, theta[, "mu"]), n, 10)
  summ <- function(x) cbind(m = rowMeans(x), v = apply(x, 1, stats::var))
  pr <- prior_uniform(mu = c(-1, 1))
  set.seed(307)
  r <- ratio_amortised(sim, summ, pr, n = 200, batch = TRUE, formula = ~ te(mu, m, k = 4))
  expect_equal(fitted(r), predict(r, type = "response"))
  expect_equal(fitted(r), exp(predict(r)))
  skip_if_not_installed("broom")
  a <- broom::augment(r)
  expect_equal(nrow(a), length(predict(r)))
  expect_equal(a$.fitted, unname(predict(r)))
})

test_that("anova() of a fit with itself says there is nothing to test, for nce and snce fits alike", {
  set.seed(308)
  chain <- data.frame(y = rchain(80, 2))
  s <- snce(~ I(y * y_prev), chain, ref_uniform(y = c(0, 1)), ratio = 5, intercept = ~ s(y_prev, k = 5))
  expect_error(anova(s, s), "nothing to test", class = "nce_error_input")
  f <- nce(~ y, data.frame(y = rtexp(100, 2)), ref_uniform(y = c(0, 1)), ratio = 5)
  expect_error(anova(f, f), "nothing to test", class = "nce_error_input")
})

test_that("update() reproduces the fit; resample = TRUE draws anew; a new formula keeps the reference draw", {
  set.seed(309)
  d <- data.frame(y = rtexp(300, 2))
  fit <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5)
  runif(3)  # the session's generator moves on; update() does not depend on it
  before <- .Random.seed
  expect_identical(coef(update(fit)), coef(fit))
  expect_identical(.Random.seed, before)  # and update() leaves it where it was
  expect_false(identical(coef(update(fit, resample = TRUE)), coef(fit)))
  big <- update(fit, . ~ . + I(y^2))
  ref_rows <- function(f) f$nce_frame$y[f$nce_frame$.label == 0]
  expect_identical(ref_rows(big), ref_rows(fit))
  # A data argument written in the call draws the same again.
  set.seed(310)
  f2 <- nce(~ y, data.frame(y = rtexp(200, 2)), ref_uniform(y = c(0, 1)), ratio = 5)
  expect_identical(coef(update(f2)), coef(f2))
})

test_that("intervals printed for Bayes factors and marginal likelihoods are ordered and hold their estimate", {
  set.seed(311)
  d1 <- matrix(rnorm(400, 0.1), ncol = 1)
  d2 <- matrix(rnorm(400, -0.1), ncol = 1)
  b <- bayes_factor_nce(d1, d2, function(x) dnorm(x[, 1], 0.1, log = TRUE), function(x) dnorm(x[, 1], -0.1, log = TRUE))
  out <- capture.output(print(summary(b)))
  iv <- regmatches(out, regexpr("\\[[-0-9.e]+, [-0-9.e]+\\]", out))
  for (s in iv) {
    v <- as.numeric(strsplit(gsub("\\[|\\]", "", s), ", ")[[1L]])
    expect_lte(v[1L], v[2L])
  }
  ci <- confint(b)
  expect_true(ci[1L] <= coef(b) && coef(b) <= ci[2L])
})
