# Issue #76, "nothing silent": improper energies and references that do not fit the data warn
# (nce_warning_improper, nce_warning_reference) instead of reporting a wrong log Z; proper fits
# stay silent. See ?nce_checks for the rules and their thresholds.

# The fit and the classes of the nce warnings it gave.
fit_and_warnings <- function(expr) {
  classes <- character()
  fit <- withCallingHandlers(expr, nce_warning = function(w) {
    classes <<- c(classes, setdiff(class(w), c("nce_warning", "warning", "condition")))
    invokeRestart("muffleWarning")
  })
  list(fit = fit, warnings = classes)
}

two_d <- function(n = 1000, seed = 1) {
  set.seed(seed)
  data.frame(x1 = rnorm(n), x2 = rnorm(n))
}

test_that("an energy that ignores a column of an unbounded reference is improper along it", {
  d <- two_d()
  r <- fit_and_warnings(nce(~ x1 + I(x1^2), d, ref_normal(x1 = 0, x2 = 0, cov = diag(4, 2)), ratio = 5))
  expect_true("nce_warning_improper" %in% r$warnings)
  fit <- r$fit
  expect_false(fit$proper)
  expect_true(any(grepl("x2", fit$improper_along, fixed = TRUE)))
  expect_true(is.na(fit$log_normaliser))
  # The normalised density is not identified: NA, not the same number at (0, 50) as at (0, 0).
  p <- predict(fit, data.frame(x1 = 0, x2 = c(0, 50)), type = "density")
  expect_true(all(is.na(p)))
  # The unnormalised log density is still there (exact: the fit's own coefficients).
  expect_equal(unname(predict(fit, data.frame(x1 = 1, x2 = 0), type = "log_unnormalised")),
               unname(sum(coef(fit)[-1L])), tolerance = 1e-12)
  expect_output(print(fit), "log Z not identified: the model is improper along")
  expect_output(print(summary(fit)), "log Z not identified")
  expect_true(is.na(as.numeric(logLik(fit))))
  expect_error(simulate(fit), class = "nce_error_improper")
  expect_error(nce_adapt(fit), class = "nce_error_improper")
  expect_error(ref_model(fit), class = "nce_error_improper")
})

test_that("a network of one column on a two-column normal reference is improper along the other", {
  skip_on_cran()
  d <- two_d()
  r <- fit_and_warnings(nce(~ mlp(x1, hidden = 8), d, ref_normal(x1 = 0, x2 = 0, cov = diag(4, 2)), ratio = 5,
                            control = list(max_epochs = 30)))
  expect_true("nce_warning_improper" %in% r$warnings)
  expect_false(r$fit$proper)
  expect_true(all(is.na(predict(r$fit, data.frame(x1 = 0, x2 = c(0, 50)), type = "density"))))
  expect_output(print(r$fit), "log Z not identified")
})

test_that("exp(b x) on the real line is improper; on a bounded reference it is proper", {
  set.seed(2)
  d1 <- data.frame(x = rnorm(1000))
  r <- fit_and_warnings(nce(~ x, d1, ref_normal(x = 0, cov = 9)))
  expect_true("nce_warning_improper" %in% r$warnings)
  expect_false(r$fit$proper)
  expect_true(is.na(predict(r$fit, data.frame(x = -300), type = "density")))
  expect_error(nce_adapt(r$fit), class = "nce_error_improper")
  # Truncated exponential on [0, 1]: proper on its bounded support, no warning of either kind.
  y <- log1p(runif(1000) * (exp(2) - 1)) / 2
  r <- fit_and_warnings(nce(~ y, data.frame(y = y), ref_uniform(y = c(0, 1))))
  expect_length(r$warnings, 0L)
  expect_true(r$fit$proper)
  # Truth log((e^2 - 1) / 2) = 1.1614; tolerance 0.15 (about 3 standard errors at n = 1000).
  expect_equal(r$fit$log_normaliser, log((exp(2) - 1) / 2), tolerance = 0.15 / 1.16)
})

test_that("a quadratic of the wrong sign is improper", {
  set.seed(3)
  # Bimodal data at -2 and 2 on a standard normal reference: the fitted coefficient of x^2 is
  # positive (0.33 at this seed), so exp(f) grows both ways.
  d <- data.frame(x = c(rnorm(500, -2, 0.5), rnorm(500, 2, 0.5)))
  r <- fit_and_warnings(nce(~ I(x^2), d, ref_normal(x = 0, cov = 1), ratio = 5))
  expect_gt(coef(r$fit)[["I(x^2)"]], 0)
  expect_true("nce_warning_improper" %in% r$warnings)
  expect_false(r$fit$proper)
})

test_that("a network energy on a reference 100 times too wide warns that the reference does not fit", {
  skip_on_cran()
  d <- two_d()
  r <- fit_and_warnings(nce(~ mlp(x1, x2, hidden = 16), d, ref_normal(x1 = 0, x2 = 0, cov = diag(1e4, 2)),
                            ratio = 5))
  expect_true("nce_warning_reference" %in% r$warnings)
  chk <- r$fit$reference_check
  # The two estimates of log Z differ by more than the tolerance (0.5), or most data are separated.
  expect_true(abs(chk$log_normaliser_is - chk$log_normaliser) > 0.5 || chk$separated > 0.5)
  # The reference's sd is 100 times the data's (tolerance 10%: the data's sd from 1000 draws).
  expect_equal(unname(chk$sd_ratio), c(100, 100), tolerance = 0.1)
})

test_that("proper fits on a good reference are silent and their two log Z estimates agree", {
  d <- two_d()
  r <- fit_and_warnings(nce(~ x1 + x2 + I(x1^2) + I(x2^2), d, ref_fit(d, inflate = 2), ratio = 10))
  expect_length(r$warnings, 0L)
  expect_true(r$fit$proper)
  chk <- r$fit$reference_check
  # Truth log(2 pi) = 1.838; both estimates within 0.1 of it (a few standard errors at n = 1000).
  expect_equal(chk$log_normaliser, log(2 * pi), tolerance = 0.1 / 1.838)
  expect_equal(chk$log_normaliser_is, log(2 * pi), tolerance = 0.1 / 1.838)
  expect_lt(chk$separated, 0.05)
  # Relative to the reference, an energy of x1 alone is proper: log q bounds x2.
  r <- fit_and_warnings(nce(~ x1 + I(x1^2), d, ref_fit(d, inflate = 2), ratio = 10, relative = TRUE))
  expect_length(r$warnings, 0L)
  expect_true(r$fit$proper)
  # A smooth energy on a normal reference extrapolates downwards: proper.
  set.seed(4)
  r <- fit_and_warnings(nce(~ s(x), data.frame(x = rnorm(1000)), ref_normal(x = 0, cov = 4), ratio = 10))
  expect_length(r$warnings, 0L)
  expect_true(r$fit$proper)
})

test_that("ref_fit() refuses collinear columns and ref_normal() a singular covariance", {
  set.seed(5)
  d <- data.frame(a = rnorm(200))
  d$b <- 2 * d$a + 1
  expect_error(ref_fit(d), class = "nce_error_data")
  expect_error(ref_fit(d), "a, b")
  expect_error(ref_normal(a = 0, b = 0, cov = matrix(c(1, 2, 2, 4), 2)), class = "nce_error_input")
  expect_error(ref_normal(a = 0, b = 0, cov = stats::cov(d)), class = "nce_error_input")
  # A well-conditioned covariance is accepted.
  expect_s3_class(ref_normal(a = 0, b = 0, cov = matrix(c(1, 0.9, 0.9, 1), 2)), "nce_reference")
  expect_s3_class(ref_fit(d, "uniform"), "nce_reference")
})

test_that("a nonlinear model that ignores a column is improper; with both columns its log Z is exact", {
  set.seed(1)
  d <- data.frame(x1 = rnorm(500), x2 = rnorm(500))
  ref <- ref_normal(x1 = 0, x2 = 0, cov = diag(4, 2))
  expect_warning(f1 <- nce(~ -a * x1^2, d, ref, ratio = 5, start = c(a = 1)), class = "nce_warning_improper")
  expect_false(f1$proper)
  expect_setequal(f1$improper_along, c("+x2", "-x2"))
  expect_true(is.na(f1$log_normaliser))
  expect_true(all(is.na(predict(f1, d[1:3, ]))))
  expect_false(anyNA(predict(f1, d[1:3, ], type = "log_unnormalised")))
  expect_true(is.na(logLik(f1)))
  expect_true(all(is.na(fitted(f1))))
  expect_output(print(f1), "log Z not identified")
  expect_output(print(summary(f1)), "log Z not identified")
  expect_error(simulate(f1), class = "nce_error_improper")
  # exp(-a x1^2 - b x2^2) with a = b = 1/2 is the standard normal: log Z = log(2 pi) = 1.838.
  expect_no_warning(f2 <- nce(~ -a * x1^2 - b * x2^2, d, ref, ratio = 5, start = c(a = 1, b = 1)))
  expect_true(f2$proper)
  expect_lt(abs(f2$log_normaliser - log(2 * pi)), 3 * sqrt(vcov(f2)[1, 1]))
  # The reference check's importance-sampling log Z agrees with the intercept's.
  expect_lt(abs(f2$reference_check$log_normaliser_is - f2$log_normaliser), 0.05)
})

test_that("a nonlinear model on a bounded reference is proper, with density 0 outside its support", {
  set.seed(306)
  d <- data.frame(y = rtexp(200, 2))
  expect_no_warning(nl <- nce(~ a * y, d, ref_uniform(y = c(0, 1)), ratio = 5, start = c(a = 1)))
  expect_true(nl$proper)
  expect_equal(unname(predict(nl, data.frame(y = c(-1, 2)), type = "density")), c(0, 0))
  expect_equal(unname(predict(nl, data.frame(y = 2))), -Inf)
  # Inside, the normalised density of exp(a y) on [0, 1]: a / (e^a - 1) e^(a y).
  a <- coef(nl)[["a"]]
  expect_equal(unname(predict(nl, data.frame(y = 0.5))), log(a / expm1(a)) + a / 2, tolerance = 0.02)
})
