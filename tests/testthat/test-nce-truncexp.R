# NCE against the exact answer for the truncated exponential on [0, 1].

fit_texp <- function(y, ratio = 20, method = "logistic") {
  nce(~ y, data.frame(y = y), ref_uniform(y = c(0, 1)), ratio = ratio, method = method)
}

test_that("averaged over 20 data sets, NCE is close to the exact MLE and to log Z", {
  set.seed(42)
  z <- replicate(20, {
    y <- rtexp(1000, 2)
    fit <- fit_texp(y)
    se <- sqrt(diag(vcov(fit)))
    c(theta = abs(coef(fit)[["y"]] - texp_mle(y)) / se[["y"]],
      log_z = abs(fit$log_normaliser - texp_log_z(2)) / se[["(Intercept)"]])
  })
  z <- rowMeans(z)
  # Measured: 0.20 and 1.04 with this seed.
  expect_lt(z[["theta"]], 0.4)
  expect_lt(z[["log_z"]], 1.2)
})

test_that("95% sandwich intervals cover the truth 93-97% of the time over 200 data sets", {
  set.seed(2024)
  cover <- replicate(200, {
    fit <- fit_texp(rtexp(1000, 2))
    ci <- confint(fit)
    cn <- confint(fit, se_type = "naive")
    c(sandwich = ci["y", 1] < 2 && 2 < ci["y", 2],
      naive = cn["y", 1] < 2 && 2 < cn["y", 2],
      log_z = ci[1, 1] < -texp_log_z(2) && -texp_log_z(2) < ci[1, 2])
  })
  cov <- rowMeans(cover)
  # The naive logistic-regression intervals ignore that reference points are random;
  # reported for comparison, not asserted.
  message(sprintf("coverage over 200 data sets: sandwich %.3f, naive %.3f, log Z (sandwich) %.3f",
                  cov[["sandwich"]], cov[["naive"]], cov[["log_z"]]))
  expect_gte(cov[["sandwich"]], 0.93)
  expect_lte(cov[["sandwich"]], 0.97)
  expect_gte(cov[["log_z"]], 0.92)
})

test_that("the NCE estimate approaches the MLE as the ratio grows", {
  set.seed(7)
  ys <- replicate(10, rtexp(1000, 2), simplify = FALSE)
  gap <- vapply(c(1, 5, 20, 100), function(r) {
    mean(vapply(ys, function(y) abs(coef(fit_texp(y, r))[["y"]] - texp_mle(y)), 0))
  }, 0)
  # Measured: about 0.14, 0.05, 0.03, 0.01 (the MLE's own s.e. is 0.12).
  expect_true(all(diff(gap) < 0))
  expect_lt(gap[4], 0.1 * 0.12)
})

test_that("the Poisson-transform method estimates the same model", {
  set.seed(8)
  y <- rtexp(2000, 2)
  fl <- fit_texp(y, 100)
  fp <- fit_texp(y, 100, method = "poisson")
  expect_true(fp$converged)
  se <- sqrt(diag(vcov(fp)))
  expect_lt(abs(coef(fp)[["y"]] - texp_mle(y)), 0.2 * se[["y"]])
  expect_lt(abs(fp$log_normaliser - texp_log_z(coef(fp)[["y"]])), 0.2 * se[[1]])
  expect_equal(coef(fp), coef(fl), tolerance = 0.05)
})

test_that("predicted densities match the true density", {
  set.seed(9)
  fit <- fit_texp(rtexp(5000, 2), 50)
  grid <- data.frame(y = c(0.1, 0.5, 0.9))
  p <- predict(fit, grid, type = "density", se.fit = TRUE)
  truth <- exp(2 * grid$y - texp_log_z(2))
  expect_true(all(abs(p$fit - truth) < 3 * p$se.fit))
  lu <- predict(fit, grid, type = "log_unnormalised")
  expect_equal(unname(lu), coef(fit)[["y"]] * grid$y)
})
