# anova() between nested nce fits: Wald tests with the sandwich covariance.

test_that("the nested Wald test holds its size at 5% under the null", {
  # 150 small fits under H0 (a truncated exponential, linear log density) tested against a
  # quadratic; bench/anova-size.R runs 300 (rejection rate 0.047). With 150 fits the binomial
  # sd of the rate is 0.018: the tolerance [0.01, 0.10] is about 2.2 sd below and 2.8 above.
  set.seed(21)
  ref <- ref_uniform(y = c(0, 1))
  p <- vapply(1:150, function(i) {
    d <- data.frame(y = rtexp(100, 2))
    f1 <- nce(~ y, d, ref, ratio = 5)
    f2 <- nce(~ y + I(y^2), d, ref, ratio = 5)
    anova(f1, f2)[2L, "Pr(>Chi)"]
  }, 0)
  rate <- mean(p < 0.05)
  expect_gte(rate, 0.01)
  expect_lte(rate, 0.10)
})

test_that("anova finds a real effect and orders fits by df", {
  set.seed(22)
  d <- data.frame(y = rbeta(400, 2, 5))
  f1 <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5)
  f2 <- nce(~ y + log(y), d, ref_uniform(y = c(0, 1)), ratio = 5)
  a <- anova(f2, f1)
  expect_s3_class(a, "anova")
  # anova.glm's layout: residual df and -2 logLik per fit, then the test against the row above
  expect_identical(names(a), c("Resid. Df", "Resid. Dev", "Df", "Deviance", "Wald", "Pr(>Chi)"))
  expect_equal(a[["Resid. Df"]], 400 - c(2, 3))
  expect_equal(a[["Resid. Dev"]], -2 * c(as.numeric(logLik(f1)), as.numeric(logLik(f2))))
  expect_equal(a[2L, "Deviance"], a[1L, "Resid. Dev"] - a[2L, "Resid. Dev"])
  expect_equal(a[2L, "Df"], 1)
  expect_lt(a[2L, "Pr(>Chi)"], 1e-6)
  # the statistic is (b / se)^2 of the extra coefficient, sandwich se
  z <- coef(f2)[["log(y)"]] / sqrt(vcov(f2)["log(y)", "log(y)"])
  expect_equal(a[2L, "Wald"], z^2)
  expect_error(anova(f1, nce(~ log(y), d, ref_uniform(y = c(0, 1)))), "not nested", class = "nce_error_input")
  expect_error(anova(f1, f1), "nothing to test", class = "nce_error_input")
})

test_that("anova compares a linear with a smooth fit, and smooth fits by term", {
  set.seed(23)
  d <- data.frame(a = rnorm(400), b = rnorm(400))
  ref <- ref_normal(a = 0, b = 0, cov = diag(2) * 2)
  g <- nce(~ s(a, k = 6) + s(b, k = 6), d, ref, ratio = 4)
  # Without b, or linear, the density does not fall along b (improper, #76): the Wald tests below
  # test coefficients of the bigger fit and need no normalising constant.
  expect_warning(g2 <- nce(~ s(a, k = 6), d, ref, ratio = 4), class = "nce_warning_improper")
  a <- anova(g2, g)
  expect_equal(a[2L, "Df"], 5)   # the columns of s(b, k = 6)
  expect_lt(a[2L, "Pr(>Chi)"], 1e-6)   # b is normal, not the reference's N(0, 2)
  # a linear fit lies in the smooths' span (their null space): tested by span contrasts
  expect_warning(lin <- nce(~ a + b, d, ref, ratio = 4), class = "nce_warning_improper")
  a2 <- anova(lin, g)
  expect_equal(a2[2L, "Df"], 8)   # 11 columns, minus the linear fit's 3
  expect_lt(a2[2L, "Pr(>Chi)"], 1e-6)
  expect_error(anova(lin, g2), "not nested", class = "nce_error_input")
  # one fit: mgcv's anova.gam on the NCE-corrected Vp
  one <- anova(g)
  expect_s3_class(one, "anova.gam")
  expect_equal(one$s.table, summary(g)$s.table)
  dr <- suppressWarnings(drop1(g), classes = "nce_warning_improper")   # each submodel ignores a column
  expect_equal(rownames(dr), c("<none>", "s(a, k = 6)", "s(b, k = 6)"))
  expect_true(all(dr[-1L, "Pr(>Chi)"] < 1e-4))
})

test_that("anova of one parametric fit tests each term with the sandwich", {
  set.seed(24)
  d <- data.frame(y = rtexp(300, 2))
  f <- nce(~ y + I(y^2), d, ref_uniform(y = c(0, 1)), ratio = 5)
  a <- anova(f)
  expect_equal(rownames(a), c("y", "I(y^2)"))
  expect_equal(a["I(y^2)", "Wald"], unname(coef(f)[3]^2 / vcov(f)[3, 3]))
  expect_error(anova(f, test = "LRT"), class = "nce_error_input")
})
