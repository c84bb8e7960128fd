# logLik, AIC/BIC, fitted, residuals, deviance of nce() fits, against truth.

test_that("logLik is close to the exact MLE's maximised log-likelihood when ratio is large", {
  # p(y) = exp(a y) / Z(a) on [0, 1]: the maximised log-likelihood is known in closed form.
  set.seed(11)
  d <- data.frame(y = rtexp(300, 2))
  f <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 200)
  a <- texp_mle(d$y)
  ll_mle <- a * sum(d$y) - nrow(d) * texp_log_z(a)
  ll <- logLik(f)
  # NCE's normaliser carries reference noise of order 1/sqrt(m) per point: over 20 data sets
  # the difference had sd 0.7 at n = 300, ratio 200; the tolerance is 0.01 per data point.
  expect_lt(abs(as.numeric(ll) - ll_mle), 0.01 * nrow(d))
  expect_equal(attr(ll, "df"), 2)
  expect_equal(attr(ll, "nobs"), 300L)
  # the NCE log-likelihood at the NCE estimate with the *exact* normaliser cannot beat the MLE
  b <- coef(f)[["y"]]
  expect_lte(b * sum(d$y) - nrow(d) * texp_log_z(b), ll_mle + 1e-8)
})

test_that("logLik is the sum of predict(type = 'link') at the data; AIC and BIC follow", {
  set.seed(12)
  d <- data.frame(y = rtexp(200, 1))
  for (f in list(nce(~ y + I(y^2), d, ref_uniform(y = c(0, 1)), ratio = 5),
                 nce(~ s(y, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 5))) {
    ll <- logLik(f)
    expect_equal(as.numeric(ll), sum(predict(f, type = "link")), tolerance = 1e-12)
    expect_equal(as.numeric(ll), sum(log(fitted(f))), tolerance = 1e-12)
    expect_equal(AIC(f), -2 * as.numeric(ll) + 2 * attr(ll, "df"))
    expect_equal(BIC(f), -2 * as.numeric(ll) + log(200) * attr(ll, "df"))
    expect_equal(deviance(f), -2 * as.numeric(ll))
    expect_equal(df.residual(f), 200 - attr(ll, "df"))
    expect_length(fitted(f), nobs(f))
    expect_length(residuals(f), f$n + f$m)
  }
  g <- nce(~ s(y, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 5)
  expect_equal(attr(logLik(g), "df"), sum(g$edf))
  a <- AIC(nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5), g)
  expect_equal(dim(a), c(2L, 2L))
  # held-out data: the log density summed over new points
  nd <- data.frame(y = c(0.1, 0.5, 0.9))
  expect_equal(as.numeric(logLik(g, newdata = nd)), sum(predict(g, nd)))
  expect_equal(attr(logLik(g, newdata = nd), "nobs"), 3L)
})

test_that("residuals are the classification residuals, as glm's on the same labels", {
  set.seed(13)
  d <- data.frame(y = rtexp(150, 2))
  f <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 4)
  fr <- model.frame(f)
  # glm on the same rows and offset gives the same classifier, hence the same residuals
  g <- suppressWarnings(glm(.label ~ y, binomial(), fr, offset = .offset))
  for (type in c("deviance", "pearson", "response", "working")) {
    expect_equal(residuals(f, type = type), unname(residuals(g, type = type)), tolerance = 1e-6)
  }
})

test_that("weights act as replicated rows on the estimates (same reference draws)", {
  set.seed(14)
  d <- data.frame(y = rtexp(60, 2))
  w <- rep(1:3, 20)
  set.seed(5)
  fw <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 10, weights = w)
  set.seed(5)
  fr <- nce(~ y, d[rep(seq_len(60), w), , drop = FALSE], ref_uniform(y = c(0, 1)), ratio = 600 / 120)
  expect_equal(coef(fw), coef(fr), tolerance = 1e-8)
  expect_equal(as.numeric(logLik(fw)), as.numeric(logLik(fr)), tolerance = 1e-8)
})

test_that("formula offsets are kept (issue 14: offset(2 * y) was dropped)", {
  set.seed(15)
  d <- data.frame(y = rtexp(2000, 2))
  f <- nce(~ offset(2 * y), d, ref_uniform(y = c(0, 1)), ratio = 20)
  # Only the normaliser is estimated: -log Z(2)
  expect_equal(unname(coef(f)), -texp_log_z(2), tolerance = 0.02)
  p <- predict(f, data.frame(y = c(0, 1)), type = "density")
  expect_equal(unname(p), 2 * exp(2 * c(0, 1)) / (exp(2) - 1), tolerance = 0.03)
  # With a smooth, the offset -2 y must be undone by the smooth's linear part: the density is
  # then the parametric fit's (same data; this sample's MLE is 8% below the truth at 0.1).
  g <- nce(~ s(y, k = 5) + offset(-2 * y), d, ref_uniform(y = c(0, 1)), ratio = 20)
  nd <- data.frame(y = c(0.1, 0.5, 0.9))
  p <- predict(g, nd, type = "density")
  expect_equal(unname(p), unname(predict(nce(~ y, d, ref_uniform(y = c(0, 1))), nd, type = "density")),
               tolerance = 0.03)
  expect_equal(unname(p), 2 * exp(2 * nd$y) / (exp(2) - 1), tolerance = 0.15)
  # The same with discretised covariates (its predict() failed on the offset).
  gd <- nce(~ s(y, k = 5) + offset(-2 * y), d, ref_uniform(y = c(0, 1)), ratio = 20, discrete = TRUE)
  expect_equal(predict(gd, nd, type = "density"), p, tolerance = 0.02)
})

test_that("outside the reference's support the density is 0 and the log density -Inf", {
  set.seed(16)
  d <- data.frame(y = rtexp(200, 2))
  for (f in list(nce(~ y, d, ref_uniform(y = c(0, 1))), nce(~ s(y, k = 5), d, ref_uniform(y = c(0, 1))))) {
    nd <- data.frame(y = c(-1, 0.5, 5, NA))
    p <- predict(f, nd, type = "density", se.fit = TRUE)
    expect_equal(unname(p$fit[c(1, 3)]), c(0, 0))
    expect_true(p$fit[2] > 0)
    expect_true(is.na(p$fit[4]))
    expect_equal(unname(p$se.fit[c(1, 3)]), c(0, 0))
    expect_equal(unname(predict(f, nd, type = "link")[c(1, 3)]), c(-Inf, -Inf))
  }
})

test_that("intercept-only fits: variance 0, not -5.6e-18, and summary shows no NaN", {
  set.seed(17)
  f <- nce(~ 1, data.frame(y = runif(100)), ref_uniform(y = c(0, 1)))
  expect_true(all(diag(vcov(f)) >= 0))
  out <- expect_silent(capture.output(print(summary(f))))
  expect_false(any(grepl("NaN", out)))
})
