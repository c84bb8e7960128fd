# glm-like methods and their names.

make_fit <- function(seed = 1, ...) {
  set.seed(seed)
  nce(~ y, data.frame(y = rtexp(500, 2)), ref_uniform(y = c(0, 1)), ...)
}

test_that("names follow glm", {
  fit <- make_fit()
  expect_named(coef(fit), c("(Intercept)", "y"))
  expect_equal(dimnames(vcov(fit)), list(c("(Intercept)", "y"), c("(Intercept)", "y")))
  expect_equal(dimnames(confint(fit)), list(c("(Intercept)", "y"), c("2.5 %", "97.5 %")))
  expect_equal(rownames(confint(fit, "y", level = 0.9)), "y")
  expect_equal(colnames(confint(fit, level = 0.9)), c("5 %", "95 %"))
  s <- summary(fit)
  expect_equal(colnames(s$coefficients), c("Estimate", "Std. Error", "z value", "Pr(>|z|)"))
  expect_equal(unname(s$log_normaliser[["estimate"]]), -coef(fit)[[1]])
  expect_output(print(s), "log normalising constant")
  expect_output(print(fit), "500 data points, 10000 reference points")
})

test_that("nobs, model.frame, formula and update", {
  fit <- make_fit()
  expect_equal(nobs(fit), 500)
  mf <- model.frame(fit)
  expect_equal(nrow(mf), 500 + 10000)
  expect_equal(sum(mf$.label), 500)
  expect_equal(mf$.offset[mf$.label == 0], rep(log(500 / 10000), 10000))
  expect_equal(deparse(formula(fit)), "~y")
  set.seed(2)
  fit5 <- update(fit, ratio = 5)
  expect_equal(fit5$m, 2500)
  fit2 <- update(fit, ~ . + I(y^2))
  expect_named(coef(fit2), c("(Intercept)", "y", "I(y^2)"))
})

test_that("the model frame reproduces the fit with glm", {
  fit <- make_fit()
  g <- glm(.label ~ y + offset(.offset), binomial, model.frame(fit),
           control = glm.control(epsilon = 1e-14))
  expect_equal(coef(g), coef(fit), tolerance = 1e-8)
})

test_that("predict: default newdata, NA rows and types", {
  fit <- make_fit()
  expect_length(predict(fit), 500)
  p <- predict(fit, data.frame(y = c(0.5, NA)), se.fit = TRUE)
  expect_true(is.na(p$fit[2]) && is.finite(p$fit[1]))
  expect_equal(predict(fit, data.frame(y = 0.3), type = "density"),
               exp(predict(fit, data.frame(y = 0.3))))
  expect_error(predict(fit, data.frame(z = 1)), "lacks column\\(s\\) y", class = "nce_error_input")
})

test_that("poly() terms predict with their original basis", {
  set.seed(6)
  df <- data.frame(y = rtexp(1000, 2))
  fit <- nce(~ poly(y, 2), df, ref_uniform(y = c(0, 1)))
  fit_raw <- nce(~ y + I(y^2), df, ref_uniform(y = c(0, 1)))
  expect_equal(predict(fit, data.frame(y = c(0.2, 0.8))), predict(fit, data.frame(y = c(0.2, 0.8))))
  # Same model space: log densities agree up to Monte Carlo noise of different draws.
  expect_equal(unname(predict(fit, data.frame(y = c(0.2, 0.8)))),
               unname(predict(fit_raw, data.frame(y = c(0.2, 0.8)))), tolerance = 0.1)
})

test_that("factor terms work for a discrete model", {
  # p(k) on {a, b, c} with probabilities 0.2, 0.3, 0.5: uniform reference over the levels.
  set.seed(7)
  lv <- c("a", "b", "c")
  df <- data.frame(k = factor(sample(lv, 3000, TRUE, c(0.2, 0.3, 0.5)), levels = lv))
  ref <- ref_custom(function(n) data.frame(k = factor(sample(lv, n, TRUE), levels = lv)),
                    function(d) rep(log(1 / 3), nrow(d)), "k")
  fit <- nce(~ k, df, ref)
  p <- predict(fit, data.frame(k = factor(lv, levels = lv)), type = "density")
  expect_equal(unname(p), c(0.2, 0.3, 0.5), tolerance = 0.1)
})

test_that("simulate draws from the fitted density", {
  fit <- make_fit(ratio = 20)
  s <- simulate(fit, nsim = 3, seed = 10)
  expect_equal(nrow(s), 1500)
  expect_equal(sort(unique(s$.sim)), 1:3)
  expect_true(all(s$y >= 0 & s$y <= 1))
  # Mean of the fitted truncated exponential, within Monte Carlo error (sd of y ~ 0.27).
  th <- coef(fit)[["y"]]
  expect_lt(abs(mean(s$y) - texp_mean(th)), 4 * 0.27 / sqrt(1500))
  expect_identical(simulate(fit, 1, seed = 10)$y, simulate(fit, 1, seed = 10)$y)
})

test_that("plot draws 1-D and several-variable fits", {
  fit <- make_fit()
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  on.exit({ grDevices::dev.off(); unlink(f) })
  expect_invisible(plot(fit))
  set.seed(3)
  df <- data.frame(a = rnorm(300), b = rnorm(300))
  fit2 <- nce(~ I(a^2) + I(b^2), df, ref_fit(df, "normal", inflate = 1.5))
  expect_invisible(plot(fit2))
})
