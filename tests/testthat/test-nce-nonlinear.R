# |x - y| <= tol elementwise (absolute, unlike testthat's relative tolerance).
expect_abs_equal <- function(x, y, tol) {
  expect_lte(max(abs(unname(as.numeric(x)) - unname(as.numeric(y)))), tol)
}

# Nonlinear NCE against truth: the linear fit, symbolic vs numerical gradients, the exact MLE of a
# 2-D Gaussian in a Cholesky parametrisation (and coverage), the ICA MLE, and bad input.

test_that("a linear model written as a nonlinear formula gives the linear nce() fit", {
  set.seed(1)
  d <- data.frame(y = rtexp(400, 2))
  for (method in c("logistic", "poisson")) {
    set.seed(5)
    lin <- nce(~ y + I(y^2), d, ref_uniform(y = c(0, 1)), ratio = 5, method = method)
    set.seed(5)
    nl <- nce(~ a * y + b * y^2, d, ref_uniform(y = c(0, 1)), ratio = 5, method = method, start = c(a = 0, b = 0))
    expect_s3_class(nl, "nce_nls")
    expect_abs_equal(unname(coef(nl)), unname(coef(lin)), 1e-6)
    expect_abs_equal(unname(sqrt(diag(vcov(nl)))), unname(sqrt(diag(vcov(lin)))), 1e-6)
    expect_abs_equal(sqrt(diag(vcov(nl, se_type = "naive"))), sqrt(diag(vcov(lin, se_type = "naive"))), 1e-6)
  }
})

test_that("symbolic gradients (abs() through sign()) match finite differences", {
  set.seed(2)
  d <- data.frame(y = rnorm(50), z = runif(50))
  f <- ~ -abs(y - m * z) * exp(-s) + log(1 + abs(k * y)) - k^2 * z
  mod <- nce:::nl_formula_model(f, c(m = 0.3, s = 0.2, k = -0.7), c("y", "z"), NULL, NULL)
  expect_identical(mod$gradient_source, "symbolic (deriv)")
  th <- c(m = 0.3, s = 0.2, k = -0.7)
  g <- mod$gradient(th, d)
  num <- sapply(seq_along(th), function(j) {
    h <- 1e-6
    up <- th
    dn <- th
    up[j] <- up[j] + h
    dn[j] <- dn[j] - h
    (mod$log_f(up, d) - mod$log_f(dn, d)) / (2 * h)
  })
  expect_equal(unname(g), num, tolerance = 1e-6)
})

# 2-D Gaussian: f = -|L'(x - mu)|^2 / 2 with L lower triangular (exp on the diagonal); exact MLE
# from the sample mean and (1/n) covariance; log Z = log(2 pi) - a - c.
gauss2_formula <- ~ -((exp(a) * (x1 - m1) + b * (x2 - m2))^2 + (exp(c) * (x2 - m2))^2) / 2
gauss2_mle <- function(x) {
  mu <- colMeans(x)
  s <- crossprod(sweep(as.matrix(x), 2, mu)) / nrow(x)
  l <- t(chol(solve(s)))  # P = L L', L lower
  # f uses L'(x - mu) = (L11 z1 + L21 z2, L22 z2)
  c(`(Intercept)` = -(log(2 * pi) - log(l[1, 1]) - log(l[2, 2])), m1 = mu[[1]], m2 = mu[[2]],
    a = log(l[1, 1]), b = l[2, 1], c = log(l[2, 2]))
}
gauss2_truth <- function() {
  sigma <- matrix(c(1, 0.6, 0.6, 2), 2)
  l <- t(chol(solve(sigma)))
  list(sigma = sigma, par = c(`(Intercept)` = -(log(2 * pi) - log(l[1, 1]) - log(l[2, 2])), m1 = 1, m2 = -1,
                                a = log(l[1, 1]), b = l[2, 1], c = log(l[2, 2])))
}
gauss2_data <- function(n, tr) {
  z <- matrix(rnorm(2 * n), n) %*% chol(tr$sigma)
  data.frame(x1 = z[, 1] + 1, x2 = z[, 2] - 1)
}

test_that("a 2-D Gaussian in a Cholesky parametrisation: estimates near the exact MLE", {
  tr <- gauss2_truth()
  set.seed(3)
  x <- gauss2_data(1000, tr)
  ref <- ref_normal(x1 = 1, x2 = -1, cov = 2 * tr$sigma)
  fit <- nce(gauss2_formula, x, ref, ratio = 10, start = c(m1 = 0, m2 = 0, a = 0, b = 0, c = 0))
  mle <- gauss2_mle(x)
  se <- sqrt(diag(vcov(fit)))
  # NCE at ratio 10 is close to the MLE on the scale of its own standard errors
  expect_true(all(abs(coef(fit) - mle[names(coef(fit))]) < se))
  expect_abs_equal(fit$log_normaliser, -mle[["(Intercept)"]], 2 * se[[1]])
})

test_that("sandwich intervals cover the truth (light check; bench/nonlinear-coverage.R runs more)", {
  tr <- gauss2_truth()
  set.seed(4)
  ref <- ref_normal(x1 = 1, x2 = -1, cov = 2 * tr$sigma)
  cover <- replicate(30, {
    x <- gauss2_data(300, tr)
    fit <- nce(gauss2_formula, x, ref, ratio = 5, start = c(m1 = 0, m2 = 0, a = 0, b = 0, c = 0))
    ci <- confint(fit)
    ci[, 1] <= tr$par[rownames(ci)] & tr$par[rownames(ci)] <= ci[, 2]
  })
  expect_gt(mean(cover), 0.88)
  expect_lt(mean(cover), 0.995)
})

test_that("built-in ICA: Rust model = R-callback model, and close to the MLE", {
  set.seed(6)
  A <- matrix(c(1, 0.5, -0.3, 0.8), 2)
  x <- rica(1500, A)
  ref <- ref_normal(x1 = 0, x2 = 0, cov = cov(x))
  mle <- ica_mle(x, n_starts = 3)
  set.seed(7)
  fr <- nce(model = ica_model(), data = x, reference = ref, ratio = 5, start = mle$B)
  im <- ica_model()
  set.seed(7)
  fc <- nce(model = nce_model(im$log_f, im$gradient), data = x, reference = ref, ratio = 5,
            start = stats::setNames(as.double(t(mle$B)), nce:::ica_names(2)))
  # The Rust fit minimises |.| Huber-smoothed on [-0.003, 0.003], the callback route the exact
  # objective; both stop within the exact objective's kink noise of its minimum: estimates well
  # inside a quarter of a standard error, exact log-likelihoods within 0.05.
  expect_lt(max(abs(coef(fr) - coef(fc)) / sqrt(diag(vcov(fr)))), 0.25)
  expect_abs_equal(fr$objective, fc$objective, 0.05)
  expect_abs_equal(ica_B(fr), mle$B, 0.1)
  expect_abs_equal(coef(fr)[[1]], mle$c, 0.1)
  # exact normaliser of the estimated B vs the estimated intercept
  expect_abs_equal(coef(fr)[[1]], log(abs(det(ica_B(fr)))) - log(2), 0.1)
  # random restarts: several starts, the best kept
  set.seed(8)
  f5 <- nce(model = ica_model(), data = x, reference = ref, ratio = 5, n_starts = 3)
  expect_equal(nrow(f5$nls$start_table), 3L)
  expect_equal(f5$objective, max(f5$nls$start_table$objective), tolerance = 1e-8)
  P <- abs(ica_B(f5) %*% A)
  expect_abs_equal(sort(apply(P, 1, max)), c(1, 1), 0.1)
})

test_that("random starts do not depend on the thread count", {
  set.seed(9)
  x <- rica(300, diag(2))
  ref <- ref_normal(x1 = 0, x2 = 0, cov = cov(x))
  fits <- lapply(1:2, function(k) {
    old <- options(nce.threads = k)
    on.exit(options(old))
    set.seed(10)
    nce(model = ica_model(), data = x, reference = ref, ratio = 2, n_starts = 2)
  })
  expect_identical(coef(fits[[1]]), coef(fits[[2]]))
})

test_that("bad input gives classed errors naming the cause", {
  set.seed(1)
  d <- data.frame(y = rnorm(50))
  ref <- ref_normal(y = 0, cov = 2)
  expect_error(nce(~ -(y - mu)^2 * s, d, ref, start = c(mu = 0)), class = "nce_error_input", regexp = "\\bs\\b")
  expect_error(nce(~ -(y - mu)^2, d, ref, start = c(mu = 0, y = 1)), class = "nce_error_input",
               regexp = "also column")
  expect_error(nce(~ log(y - mu), d, ref, start = c(mu = 0)), class = "nce_error_model", regexp = "NA/NaN/Inf")
  bad_grad <- nce_model(function(theta, data) -(data$y - theta[["mu"]])^2,
                        function(theta, data) matrix(0, 3, 1))
  expect_error(nce(model = bad_grad, data = d, reference = ref, start = c(mu = 0)), class = "nce_error_gradient",
               regexp = "gradient")
  expect_error(nce(~ -(y - mu)^2, d, ref, start = c(mu = 0, k = 1)), class = "nce_error_input", regexp = "k")
  expect_warning(nce(model = nce_model(function(theta, data) -(data$y - theta[["mu"]])^2 / 2), data = d,
                     reference = ref, start = c(mu = 0)), class = "nce_warning_finite_difference")
})

test_that("print and summary", {
  set.seed(1)
  d <- data.frame(y = rnorm(200, 1, 0.5))
  set.seed(2)
  fit <- nce(~ -(y - mu)^2 * exp(-2 * ls) / 2, d, ref_normal(y = 1, cov = 1), ratio = 5, start = c(mu = 0, ls = 0),
             n_starts = 2)
  expect_snapshot(print(fit))
  expect_snapshot(print(summary(fit)))
})

test_that("logLik(newdata =) of a nonlinear fit is the held-out log-likelihood, not the in-sample one", {
  set.seed(1)
  d <- data.frame(y = rnorm(2000, 1, 0.5))
  test <- data.frame(y = rnorm(50, 1, 0.5))
  f <- nce(~ -(y - mu)^2 * exp(-2 * ls) / 2, d, ref_normal(y = 1, cov = 1), ratio = 5, start = c(mu = 0, ls = 0))
  held <- logLik(f, newdata = test)
  expect_equal(attr(held, "nobs"), 50)
  expect_equal(as.numeric(held), sum(predict(f, test, type = "log_density")), tolerance = 1e-12)
  # Against the true N(1, 0.5) density of the 50 points: -43.16; the fit gave -42.78.
  expect_equal(as.numeric(held), sum(dnorm(test$y, 1, 0.5, log = TRUE)), tolerance = 2 / 43)
  expect_equal(as.numeric(logLik(f, newdata = test[0, , drop = FALSE])), 0)
  expect_equal(attr(logLik(f), "nobs"), 2000)
})

test_that("a nonlinear fit is an nce_fit: nce_fit's Wald intervals; what needs additive terms is refused", {
  set.seed(1)
  d <- data.frame(y = rnorm(500, 1, 0.5))
  f <- nce(~ -(y - mu)^2 * exp(-2 * ls) / 2, d, ref_normal(y = 1, cov = 1), ratio = 5, start = c(mu = 0, ls = 0))
  expect_identical(class(f), c("nce_nls", "nce_fit", "nce_result"))
  # The one fit shape (new_nce_fit()): the fields every fit has, the nonlinear extras in `$nls`.
  expect_true(all(c("coefficients", "vcov", "vcov_naive", "n", "m", "ratio", "reference", "call", "nls") %in% names(f)))
  expect_false(any(c("start_table", "log_f", "model", "starts") %in% names(f)))
  expect_identical(nrow(f$nls$start_table), 1L)
  # Truth: mu = 1, ls = log(0.5); the sandwich intervals hold both here.
  ci <- confint(f)
  expect_true(ci["mu", 1] < 1 && 1 < ci["mu", 2])
  expect_true(ci["ls", 1] < log(0.5) && log(0.5) < ci["ls", 2])
  expect_equal(ci[, 2] - coef(f), qnorm(0.975) * sqrt(diag(vcov(f))))
  expect_error(confint(f, parm = "sigma"), class = "nce_error_input")
  expect_error(drop1(f), "no additive terms", class = "nce_error_unsupported")
  expect_error(model.matrix(f), "nonlinear in its parameters", class = "nce_error_unsupported")
  expect_error(anova(nce(~ y + I(y^2), d, ref_normal(y = 1, cov = 1), ratio = 5), f), class = "nce_error_input")
  expect_identical(coef(update(f)), coef(f))
})
