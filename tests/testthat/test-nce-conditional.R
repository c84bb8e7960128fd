# nce(given =): conditional models p(y | z) with z fixed by the data. Truth: a Gaussian
# regression written as an unnormalised model, and truncated exponentials per level against
# glm (the same logistic regression) and clogit (the exact conditional likelihood).

# y | z ~ N(a + b z, s^2): log p = theta1 y + theta2 y^2 + theta3 y z - log Z(z) with
# theta = (a, -1/2, b) / s^2 and log Z(z) = log sqrt(pi / -theta2) - (theta1 + theta3 z)^2 / (4 theta2).
gauss_cond_data <- function(n, a = 1, b = 2, s = 0.5) {
  z <- stats::runif(n, -1, 1)
  data.frame(y = stats::rnorm(n, a + b * z, s), z = z)
}
gauss_log_z <- function(theta, z) 0.5 * log(pi / -theta[2]) - (theta[1] + theta[3] * z)^2 / (4 * theta[2])
# (a, b, s) from theta, with the delta-method covariance.
gauss_par <- function(theta, v) {
  t1 <- theta[1]; t2 <- theta[2]; t3 <- theta[3]
  est <- c(a = -t1 / (2 * t2), b = -t3 / (2 * t2), s = sqrt(-1 / (2 * t2)))
  j <- rbind(c(-1 / (2 * t2), t1 / (2 * t2^2), 0),
             c(0, t3 / (2 * t2^2), -1 / (2 * t2)),
             c(0, (-2 * t2)^(-1.5), 0))
  list(est = est, se = sqrt(diag(j %*% v %*% t(j))))
}

test_that("Gaussian p(y | z): a, b, s and the normaliser in z are recovered (spline intercept)", {
  set.seed(11)
  d <- gauss_cond_data(1000)
  fit <- nce(~ y + I(y^2) + I(y * z), d, ref_normal(y = 1, cov = 4), ratio = 20, given = ~ z)
  expect_s3_class(fit, "nce_conditional")
  expect_true(fit$converged)
  expect_equal(fit$intercept$type, "smooth")
  th <- unname(coef(fit)[c("y", "I(y^2)", "I(y * z)")])
  v <- vcov(fit)[2:4, 2:4]
  p <- gauss_par(th, v)
  # Exact conditional MLE: least squares, s^2 = RSS / n.
  ols <- stats::lm(y ~ z, d)
  mle <- c(a = unname(coef(ols)[1]), b = unname(coef(ols)[2]), s = sqrt(mean(residuals(ols)^2)))
  message(sprintf("Gaussian p(y|z): NCE a, b, s = %s (SE %s); MLE %s",
                  paste(signif(p$est, 5), collapse = ", "), paste(signif(p$se, 3), collapse = ", "),
                  paste(signif(mle, 5), collapse = ", ")))
  # Truth within 3 SE, and NCE at ratio 20 within one SE of the exact MLE (measured: 0.43, 0.45, 0.46
  # SE with this seed; the reference N(1, 4) is much wider than p(y | z), sd 0.5).
  expect_true(all(abs(p$est - c(1, 2, 0.5)) < 3 * p$se))
  expect_true(all(abs(p$est - mle) < p$se))
  # The spline normaliser against the closed form at the fitted theta (the fit's own
  # consistency) and at the true theta, over the inner 90% of z.
  zg <- seq(-0.9, 0.9, by = 0.1)
  lz <- predict(fit, data.frame(z = zg), type = "log_normaliser", se.fit = TRUE)
  gap_fit <- max(abs(lz$fit - gauss_log_z(th, zg)))
  truth <- gauss_log_z(c(1, -0.5, 2) / 0.25, zg)
  message(sprintf("log Z(z): max |spline - closed form at fitted theta| = %.4f; max |spline - truth| / SE = %.2f",
                  gap_fit, max(abs(lz$fit - truth) / lz$se.fit)))
  expect_lt(gap_fit, 0.1)   # measured 0.046
  expect_true(all(abs(lz$fit - truth) < 4 * lz$se.fit))
  # logLik is the data's log density under the fitted normalised model: sum of log p(y_i | z_i)
  # with the spline normaliser, close to the closed-form density at the fitted theta.
  ll_closed <- sum(th[1] * d$y + th[2] * d$y^2 + th[3] * d$y * d$z - gauss_log_z(th, d$z))
  expect_equal(as.numeric(logLik(fit)), ll_closed, tolerance = 1e-3)
  expect_equal(nobs(fit), 1000L)
  # response is the normalised conditional density.
  nd <- data.frame(y = c(0, 1, 3), z = c(-0.5, 0, 0.5))
  dens <- predict(fit, nd, type = "response")
  expect_equal(unname(dens), stats::dnorm(nd$y, 1 + 2 * nd$z, 0.5), tolerance = 0.1)
})

texp_groups <- function(n, theta = c(a = -1, b = 1, c = 3)) {
  g <- factor(sample(names(theta), n, replace = TRUE), levels = names(theta))
  data.frame(y = rtexp(n, theta[as.character(g)]), g = g)
}

test_that("per-level normaliser: the same logistic regression as glm, truth within 3 SE, near clogit", {
  set.seed(12)
  theta <- c(a = -1, b = 1, c = 3)
  d <- texp_groups(600, theta)
  fit <- nce(~ y:g, d, ref_uniform(y = c(0, 1)), ratio = 20, given = "g")
  expect_equal(fit$intercept$type, "levels")
  mf <- model.frame(fit)
  gl <- stats::glm(.label ~ y:g + g + offset(.offset), family = stats::binomial(), data = mf,
                   control = stats::glm.control(epsilon = 1e-12, maxit = 50))
  expect_equal(coef(fit)[names(coef(gl))], coef(gl), tolerance = 1e-6)
  se <- sqrt(diag(vcov(fit)))
  est <- coef(fit)[c("y:ga", "y:gb", "y:gc")]
  expect_true(all(abs(est - theta) < 3 * se[names(est)]))
  # Log normaliser per level against the truncated exponential's closed form.
  lz <- predict(fit, data.frame(g = factor(names(theta))), type = "log_normaliser", se.fit = TRUE)
  expect_true(all(abs(lz$fit - texp_log_z(theta)) < 3 * lz$se.fit))
  s <- summary(fit)
  expect_equal(s$normaliser$log_normaliser, unname(lz$fit), tolerance = 1e-12)
  # logLik: sum over rows of f + nu(level), by hand from the coefficients.
  b <- coef(fit)
  nu <- b[["(Intercept)"]] + c(a = 0, b = b[["gb"]], c = b[["gc"]])[as.character(d$g)]
  ll <- sum(est[paste0("y:g", d$g)] * d$y + nu)
  expect_equal(as.numeric(logLik(fit)), ll, tolerance = 1e-10)
  expect_equal(attr(logLik(fit), "df"), 6)
  skip_if_not_installed("survival")
  env <- list2env(list(mf = mf), parent = asNamespace("survival"))
  cl <- eval(quote(clogit(.label ~ y:g + offset(.offset) + strata(.group), data = mf)), env)
  gap <- abs(est - coef(cl)[names(est)]) / sqrt(diag(vcov(cl)))[names(est)]
  message(sprintf("per-level NCE vs clogit (ratio 20): |gap| / SE = %s", paste(signif(gap, 3), collapse = ", ")))
  expect_true(all(gap < 0.5))
})

test_that("a given formula with other terms is the normaliser as written; several given columns", {
  set.seed(13)
  d <- gauss_cond_data(400)
  fit <- nce(~ y + I(y^2) + I(y * z), d, ref_normal(y = 1, cov = 4), ratio = 10, given = ~ z + I(z^2))
  expect_equal(fit$intercept$type, "formula")
  # The quadratic normaliser is exact here: its coefficients follow theta.
  th <- coef(fit)[c("y", "I(y^2)", "I(y * z)")]
  expect_equal(unname(coef(fit)["z"]), unname(-(2 * th[1] * th[3]) / (-4 * th[2])), tolerance = 0.05)
  d$g <- factor(sample(c("u", "v"), nrow(d), replace = TRUE))
  fit2 <- nce(~ y + I(y^2) + I(y * z), d, ref_normal(y = 1, cov = 4), ratio = 10, given = c("z", "g"))
  expect_equal(fit2$intercept$type, "mixed")
  expect_true(all(c("gv") %in% names(coef(fit2))))
})

test_that("held-out logLik, simulate and update", {
  set.seed(14)
  d <- gauss_cond_data(300)
  fit <- nce(~ y + I(y^2) + I(y * z), d, ref_normal(y = 1, cov = 4), ratio = 10, given = ~ z)
  new <- gauss_cond_data(50)
  expect_equal(as.numeric(logLik(fit, newdata = new)), sum(predict(fit, new)))
  s <- simulate(fit, nsim = 2, seed = 1, candidates = 200)
  expect_equal(nrow(s), 600L)
  expect_equal(s$z[1:300], fit$groups$z)
  # Simulated y | z follow the fitted regression: residual sd near 0.5.
  r <- s$y - (1 + 2 * s$z)
  expect_equal(stats::sd(r), 0.5, tolerance = 0.1)
  small <- update(fit, . ~ . - I(y * z))
  expect_equal(names(coef(small))[1:3], c("(Intercept)", "y", "I(y^2)"))
  a <- anova(small, fit)
  expect_lt(a[["Pr(>Chi)"]][2], 1e-6)
})

test_that("snapshots: print and summary of a conditional fit", {
  set.seed(15)
  d <- texp_groups(200)
  fit <- nce(~ y:g, d, ref_uniform(y = c(0, 1)), ratio = 5, given = ~ g)
  # Three significant digits: robust to the last bits of the optimiser.
  expect_snapshot(print(fit, digits = 3))
  expect_snapshot(print(summary(fit), digits = 3))
  fit2 <- nce(~ y + I(y^2) + I(y * z), gauss_cond_data(200), ref_normal(y = 1, cov = 4), ratio = 5, given = "z")
  expect_snapshot(print(fit2, digits = 3))
})

test_that("predict(type = \"terms\") adds up to the link", {
  set.seed(16)
  d <- texp_groups(200)
  d$x <- stats::runif(200)
  fit <- nce(~ I(y * x) + I(y * (g == "b")) + s(y, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 5,
             given = ~ g + s(x, k = 5))
  tt <- predict(fit, d[1:6, ], type = "terms", se.fit = TRUE)
  expect_equal(colnames(tt$fit), c("I(y * x)", "I(y * (g == \"b\"))", "s(y)", "(normaliser)"))
  expect_equal(unname(rowSums(tt$fit)), unname(predict(fit, d[1:6, ])), tolerance = 1e-10)
  expect_true(all(tt$se.fit >= 0))
  expect_equal(unname(tt$fit[, "(normaliser)"]), unname(-predict(fit, d[1:6, ], type = "log_normaliser")),
               tolerance = 1e-10)
})

test_that("a conditional fit is an nce_fit: its classification residuals and the base methods", {
  set.seed(34)
  g <- factor(rep(c("a", "b"), each = 150))
  d <- data.frame(y = c(rbeta(150, 2, 1), rbeta(150, 1, 2)), g = g)
  fit <- nce(~ y:g, d, ref_uniform(y = c(0, 1)), ratio = 5, given = "g")
  expect_identical(class(fit), c("nce_conditional", "nce_fit", "nce_result"))
  # The normaliser has one unpenalised intercept per level of g: at the fit, the score equation of
  # each says the response residuals (label - fitted probability of being data) sum to 0 within
  # its level, over the level's data and reference rows (n + m values in all).
  r <- residuals(fit, type = "response")
  expect_length(r, nrow(model.frame(fit)))
  expect_equal(as.vector(tapply(r, model.frame(fit)$g, sum)), c(0, 0), tolerance = 1e-6)
  # vcov(), confint() and nobs() are nce_fit's: Wald intervals from the sandwich or naive covariance.
  se <- sqrt(diag(vcov(fit, se_type = "naive")))
  expect_equal(confint(fit, se_type = "naive")[, 2], coef(fit) + qnorm(0.975) * se)
  expect_identical(nobs(fit), 300L)
  expect_identical(coef(update(fit)), coef(fit))
})
