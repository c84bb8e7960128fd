# Bad input: classed errors and warnings that name the problem; nothing silently dropped.

ref01 <- ref_uniform(y = c(0, 1))

test_that("NA and Inf in the data are errors that count the rows", {
  df <- data.frame(y = c(0.1, NA, 0.5, Inf, 0.3))
  expect_error(nce(~ y, df, ref01), class = "nce_error_data")
  expect_error(nce(~ y, df, ref01), "2 row\\(s\\) \\(2, 4\\)")
})

test_that("columns, formula and ratio are checked", {
  df <- data.frame(y = runif(20))
  expect_error(nce(~ y, data.frame(x = 1:3), ref01), "lacks the reference's column\\(s\\) y", class = "nce_error_input")
  expect_error(nce(~ y + z, df, ref01), "uses z, which the reference does not generate", class = "nce_error_input")
  expect_error(nce(y ~ 1, df, ref01), "one-sided", class = "nce_error_input")
  expect_error(nce(~ y - 1, df, ref01), "intercept", class = "nce_error_input")
  expect_error(nce(~ y, df, ref01, ratio = 0), "`ratio`", class = "nce_error_input")
  expect_error(nce(~ y, df, ref01, ratio = -2), "`ratio`", class = "nce_error_input")
  expect_error(nce(~ y, df, ref01, ratio = NA), "`ratio`", class = "nce_error_input")
  expect_error(nce(~ y, df, reference = list()), "`reference`", class = "nce_error_input")
  expect_error(ref_uniform(y = c(1, 0)), "lower < upper", class = "nce_error_input")
  expect_error(ref_normal(a = 0, b = 0, cov = matrix(c(1, 2, 2, 1), 2)), "not positive definite", class = "nce_error_input")
  expect_error(ref_normal(c(0, 0), diag(2)), "named", class = "nce_error_input")
})

test_that("data outside the reference's support is an error", {
  df <- data.frame(y = c(0.2, 1.5, 0.7, -0.1))
  expect_error(nce(~ y, df, ref01), "2 data point\\(s\\) lie outside the reference's support \\(rows 2, 4\\)",
               class = "nce_error_support")
})

test_that("a custom reference is checked for shape and finite values", {
  df <- data.frame(y = rexp(50))
  good_sample <- function(n) data.frame(y = rexp(n))
  bad_density <- ref_custom(good_sample, function(d) ifelse(d$y > 1, NaN, dexp(d$y, log = TRUE)), "y")
  expect_error(nce(~ y, df, bad_density), "NA, NaN or \\+Inf", class = "nce_error_reference")
  short <- ref_custom(good_sample, function(d) dexp(d$y[-1], log = TRUE), "y")
  expect_error(nce(~ y, df, short), "must return 50 numbers", class = "nce_error_reference")
  wrong_cols <- ref_custom(function(n) data.frame(x = rexp(n)), function(d) dexp(d$y, log = TRUE), "y")
  expect_error(nce(~ y, df, wrong_cols), "did not return column\\(s\\) y", class = "nce_error_reference")
  few_rows <- ref_custom(function(n) data.frame(y = rexp(n - 1)), function(d) dexp(d$y, log = TRUE), "y")
  expect_error(nce(~ y, df, few_rows), "returned 999 rows", class = "nce_error_reference")
  ok <- ref_custom(good_sample, function(d) dexp(d$y, log = TRUE), "y")
  fit <- nce(~ y, df, ok)
  expect_true(fit$converged)
})

test_that("separation (estimates running off) is a classed warning", {
  # The reference puts almost no mass where the data are.
  set.seed(3)
  df <- data.frame(y = runif(100, 9, 10))
  # (exp(b y) on the real line is also improper, #76.)
  expect_warning(expect_warning(nce(~ y, df, ref_normal(y = c(0, 1))), class = "nce_warning_separation"),
                 class = "nce_warning_improper")
})

test_that("an aliased term is reported and its coefficient is NA", {
  set.seed(4)
  df <- data.frame(y = runif(200))
  expect_warning(fit <- nce(~ y + I(2 * y), df, ref01), "not estimable", class = "nce_warning_rank")
  expect_true(is.na(coef(fit)[["I(2 * y)"]]))
  expect_false(is.na(coef(fit)[["y"]]))
  expect_true(all(is.finite(confint(fit)["y", ])))
})

test_that("non-convergence is a classed warning", {
  set.seed(5)
  df <- data.frame(y = rtexp(300, 2))
  expect_warning(nce(~ y, df, ref01, control = nce_control(maxit = 1)), class = "nce_warning_convergence")
})

test_that("messages with % reach R intact and panics become R errors", {
  expect_error(nce:::rs(nce:::nce_debug_error("50% %s %n")), "50% %s %n", fixed = TRUE, class = "nce_error_input")
  expect_error(nce:::rs(nce:::nce_debug_panic("boom %s", FALSE)), "boom %s", fixed = TRUE, class = "nce_error_internal")
  expect_error(nce:::rs(nce:::nce_debug_panic("worker %n", TRUE)), "worker %n", fixed = TRUE, class = "nce_error_internal")
  # The session is still alive and working.
  expect_equal(nce:::rs(nce:::nce_ref_log_density(list(kind = "uniform", lower = 0, upper = 2), matrix(1), 1L)), -log(2))
})

test_that("threads option is validated", {
  old <- options(nce.threads = 0)
  on.exit(options(old))
  expect_error(nce(~ y, data.frame(y = runif(10)), ref01), "nce.threads", class = "nce_error_input")
})
