# glm habits of nce(): update(), control lists, weights, subset, na.action; mgcv's tools.

test_that("update() takes one- and two-sided dot formulas and works inside functions", {
  set.seed(31)
  d <- data.frame(y = rtexp(200, 2))
  f <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5)
  f2 <- update(f, . ~ . + I(y^2))
  f3 <- update(f, ~ . + I(y^2))
  expect_named(coef(f2), c("(Intercept)", "y", "I(y^2)"))
  expect_equal(formula(f2), formula(f3))
  expect_error(update(f, z ~ .), "one-sided", class = "nce_error_input")
  expect_equal(update(f, ratio = 3)$m, 600L)
  expect_true(is.call(update(f, . ~ . + I(y^2), evaluate = FALSE)))
  # a fit made inside a function, updated outside it: the call is evaluated where it was made
  make <- function() {
    local_d <- data.frame(y = rtexp(150, 1))
    nce(~ y, local_d, ref_uniform(y = c(0, 1)), ratio = 5)
  }
  g <- make()
  expect_named(coef(update(g, . ~ . + I(y^2))), c("(Intercept)", "y", "I(y^2)"))
  # and a formula built elsewhere, data local to the caller of update()
  fo <- ~ y
  upd <- function() {
    dd <- data.frame(y = rtexp(100, 1))
    h <- nce(fo, dd, ref_uniform(y = c(0, 1)), ratio = 5)
    update(h, ratio = 4)
  }
  expect_equal(upd()$m, 400L)
})

test_that("control = list(...) is merged into nce_control()'s defaults", {
  set.seed(32)
  d <- data.frame(y = rtexp(100, 2))
  expect_warning(f <- nce(~ y + I(y^2) + I(y^3), d, ref_uniform(y = c(0, 1)), control = list(maxit = 1)),
                 class = "nce_warning_convergence")
  expect_equal(f$control, nce_control(maxit = 1))
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), control = list(maxiter = 5)), "maxiter", class = "nce_error_input")
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), control = list(maxit = -1)), "maxit", class = "nce_error_input")
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), control = 5), "control", class = "nce_error_input")
})

test_that("subset and na.action select rows; na.omit reports what it drops", {
  set.seed(33)
  d <- data.frame(y = rtexp(120, 2), g = rep(1:2, 60))
  set.seed(1)
  f1 <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5, subset = g == 1)
  set.seed(1)
  f2 <- nce(~ y, d[d$g == 1, ], ref_uniform(y = c(0, 1)), ratio = 5)
  expect_equal(coef(f1), coef(f2))
  expect_equal(nobs(f1), 60L)
  d$y[c(3, 7)] <- NA
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1))), "3, 7", class = "nce_error_data")
  expect_warning(f3 <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5, na.action = na.omit),
                 "2 row\\(s\\).*3, 7", class = "nce_warning_na")
  expect_equal(nobs(f3), 118L)
  expect_equal(unname(unclass(f3$na.action)), c(3L, 7L))
  expect_warning(f4 <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5, na.action = "na.exclude"),
                 class = "nce_warning_na")
  expect_length(fitted(f4), 120L)   # padded with NA, as glm does with na.exclude
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), na.action = na.pass), "na.pass", class = "nce_error_input")
})

test_that("weights are checked and enter the log-likelihood", {
  set.seed(34)
  d <- data.frame(y = rtexp(80, 2), w = rep(c(0.5, 1.5), 40))
  f <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5, weights = w)
  expect_equal(as.numeric(logLik(f)), sum(d$w * predict(f, type = "link")))
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), weights = -w), "weights", class = "nce_error_input")
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), weights = 1:3), "weights", class = "nce_error_input")
})

test_that("mgcv's gam.check, concurvity, anova and model.matrix work on nce_gam", {
  set.seed(35)
  d <- data.frame(a = rnorm(300), b = rnorm(300))
  g <- nce(~ s(a, k = 6) + s(b, k = 6), d, ref_normal(a = 0, b = 0, cov = diag(2) * 2), ratio = 4)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  out <- capture.output(mgcv::gam.check(g))
  expect_true(any(grepl("k-index", out)))
  cc <- mgcv::concurvity(g)
  expect_equal(dim(cc), c(3L, 3L))
  expect_true(all(cc >= 0 & cc <= 1 + 1e-8))
  x <- model.matrix(g)
  expect_equal(dim(x), c(g$n + g$m, length(coef(g))))
  expect_equal(unname(drop(predict(g, type = "lpmatrix") %*% coef(g))), unname(predict(g, type = "link")))
  s <- capture.output(print(summary(g)))
  expect_false(any(grepl("R-sq|Deviance explained", s)))
  expect_true(any(grepl("log normalising constant", s)))
})

test_that("columns named with spaces or % work (issue 14: unexpected SPECIAL)", {
  set.seed(36)
  d <- data.frame(`my var` = rtexp(200, 2), `x%` = runif(200), check.names = FALSE)
  r <- ref_uniform(`my var` = c(0, 1), `x%` = c(0, 1))
  f <- nce(~ `my var` + `x%`, d, r, ratio = 5)
  expect_named(coef(f), c("(Intercept)", "`my var`", "`x%`"))
  g <- nce(~ s(`my var`, k = 5) + `x%`, d, r, ratio = 5)
  expect_true("`x%`" %in% names(coef(g)))
  expect_equal(unname(predict(g, d[1:3, ])), unname(predict(g)[1:3]))
  expect_s3_class(anova(f, g), "anova")
})

test_that("broom: tidy, glance and augment for both classes", {
  skip_if_not_installed("broom")
  set.seed(37)
  d <- data.frame(y = rtexp(200, 2))
  f <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 5)
  g <- nce(~ s(y, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 5)
  td <- broom::tidy(f, conf.int = TRUE)
  expect_equal(td$estimate, unname(coef(f)))
  expect_equal(td$std.error, unname(sqrt(diag(vcov(f)))))
  expect_equal(td$conf.low, unname(confint(f)[, 1]))
  gl <- broom::glance(f)
  expect_equal(gl$logLik, as.numeric(logLik(f)))
  expect_equal(gl$log_normaliser, f$log_normaliser)
  expect_equal(gl$AIC, AIC(f))
  au <- broom::augment(f, newdata = data.frame(y = c(0.2, 0.8)), type.predict = "response", se_fit = TRUE)
  expect_equal(au$.fitted, unname(predict(f, data.frame(y = c(0.2, 0.8)), type = "response")))
  expect_true(".se.fit" %in% names(au))
  ts <- broom::tidy(g, parametric = FALSE)
  expect_equal(ts$term, "s(y)")
  expect_equal(ts$edf, unname(summary(g)$s.table[, "edf"]))
  expect_equal(broom::tidy(g)$term, "(Intercept)")
  expect_equal(broom::glance(g)$df, sum(g$edf))
  expect_error(plot(f, level = 2), "level", class = "nce_error_input")
})
