# The mixture reference of ref_fit(family = "mixture") and fits relative to their reference
# (nce(relative = TRUE)), against closed forms and mclust.

two_clusters <- function(n1 = 600, n2 = 400) {
  data.frame(a = c(rnorm(n1, -3), rnorm(n2, 3, 0.5)), b = c(rnorm(n1), rnorm(n2, 1, 2)))
}

test_that("one component is the sample mean and the maximum-likelihood covariance", {
  set.seed(1)
  df <- data.frame(a = rnorm(400, 2), b = rexp(400))
  r <- ref_fit(df, "mixture", components = 1)
  n <- nrow(df)
  s <- stats::cov(df) * (n - 1) / n
  expect_equal(unname(r$means[, 1]), unname(colMeans(df)), tolerance = 1e-12)
  # The ridge adds 1e-6 of each column's variance to the diagonal.
  expect_equal(r$sigmas[, , 1], unname(s + diag(1e-6 * diag(s))), tolerance = 1e-10)
  expect_equal(r$weights, 1)
  # A one-component mixture's log density is the normal's.
  rn <- ref_normal(a = 0, b = 0, cov = r$sigmas[, , 1])
  rn$mean <- unname(r$means[, 1])
  pts <- data.frame(a = c(0, 2, 5), b = c(1, -1, 3))
  expect_equal(nce:::ref_logq(r, pts), nce:::ref_logq(rn, pts), tolerance = 1e-12)
})

test_that("BIC finds two separated clusters; the fit is mclust's maximum likelihood", {
  set.seed(2)
  df <- two_clusters()
  r <- ref_fit(df, "mixture", components = 1:4)
  expect_length(r$weights, 2L)
  expect_equal(r$selection$components[r$selection$chosen], 2L)
  k <- which.min(r$means["a", ])
  expect_equal(r$weights[k], 0.6, tolerance = 0.05)
  expect_equal(unname(r$means[, k]), c(-3, 0), tolerance = 0.15)
  expect_equal(unname(r$means[, 3 - k]), c(3, 1), tolerance = 0.2)
  expect_output(print(r), "2 normal components")
  skip_if_not_installed("mclust")
  m <- mclust::densityMclust(df, G = 2, modelNames = "VVV", verbose = FALSE, plot = FALSE)
  # The same maximum of the likelihood (our ridge moves it by about 1e-6 per unit of variance).
  expect_equal(r$selection$loglik[2], m$loglik, tolerance = 1e-5)
})

test_that("the mixture's density integrates to 1 and draws follow it", {
  set.seed(3)
  x <- data.frame(y = c(rnorm(300, -2), rnorm(700, 1, 0.5)))
  r <- ref_fit(x, "mixture", components = 2)
  f <- function(y) exp(nce:::ref_logq(r, data.frame(y = y)))
  expect_equal(stats::integrate(f, -Inf, Inf)$value, 1, tolerance = 1e-6)
  w <- r$weights
  want <- w[1] * dnorm(0.3, r$means[1, 1], sqrt(r$sigmas[1, 1, 1])) +
    w[2] * dnorm(0.3, r$means[1, 2], sqrt(r$sigmas[1, 1, 2]))
  expect_equal(f(0.3), want, tolerance = 1e-12)
  set.seed(4)
  u <- nce:::ref_draw(r, 2e5)$y
  # P(y < 0) under the fitted mixture, against the draws (sd of the share about 0.001).
  p0 <- w[1] * pnorm(0, r$means[1, 1], sqrt(r$sigmas[1, 1, 1])) +
    w[2] * pnorm(0, r$means[1, 2], sqrt(r$sigmas[1, 1, 2]))
  expect_equal(mean(u < 0), p0, tolerance = 0.005 / p0)
})

test_that("the mixture fit is reproducible and the same on any number of threads", {
  set.seed(5)
  df <- two_clusters(300, 200)
  old <- options(nce.threads = 1L)
  on.exit(options(old))
  set.seed(9)
  r1 <- ref_fit(df, "mixture", components = 1:3)
  options(nce.threads = 2L)
  set.seed(9)
  r2 <- ref_fit(df, "mixture", components = 1:3)
  expect_identical(r1, r2)
})

test_that("a fit relative to a normal reference has the closed-form coefficients", {
  # Data N(0, 1), reference N(0, 2^2): p / q = 2 exp(-3 x^2 / 8), so with f = b x^2,
  # b = -3/8 and the intercept nu = log 2.
  set.seed(6)
  df <- data.frame(x = rnorm(5000))
  fit <- nce(~ I(x^2), df, ref_normal(x = c(0, 2)), ratio = 10, relative = TRUE)
  se <- sqrt(diag(vcov(fit)))
  expect_lt(abs(coef(fit)[[2]] + 3 / 8), 3 * se[[2]])
  expect_lt(abs(coef(fit)[[1]] - log(2)), 3 * se[[1]])
  pts <- data.frame(x = c(-1, 0, 1.5))
  expect_equal(unname(predict(fit, pts, type = "density")), dnorm(pts$x), tolerance = 0.03)
  # The link is the reference's log density plus the model's terms.
  lq <- dnorm(pts$x, 0, 2, log = TRUE)
  expect_equal(unname(predict(fit, pts)), lq + drop(cbind(1, pts$x^2) %*% coef(fit)), tolerance = 1e-12)
  lp <- predict(fit, pts, type = "lpmatrix")
  expect_equal(unname(drop(lp %*% coef(fit)) + attr(lp, "model.offset")), unname(predict(fit, pts)),
               tolerance = 1e-12)
  expect_equal(as.numeric(logLik(fit)), sum(predict(fit)), tolerance = 1e-12)
  expect_output(print(summary(fit)), "the model relative to it")
  expect_output(print(fit), "relative to the normal reference")
  # Not relative, the same model must learn the whole log density: its x^2 term is -1/2.
  plain <- nce(~ I(x^2), df, ref_normal(x = c(0, 2)), ratio = 10)
  expect_equal(coef(plain)[[2]] - coef(fit)[[2]], -1 / 8, tolerance = 0.15)
})

test_that("a network relative to a fitted mixture: SIR draws, and Metropolis refused", {
  set.seed(7)
  df <- data.frame(y = c(rnorm(600, -2, 0.5), rnorm(400, 2, 0.5)))
  ref <- ref_fit(df, "mixture", components = 1:3)
  fit <- nce(~ mlp(y, hidden = 8), df, ref, ratio = 5, relative = TRUE, control = list(max_epochs = 20))
  pts <- data.frame(y = c(-2, 0, 2))
  truth <- log(0.6 * dnorm(pts$y, -2, 0.5) + 0.4 * dnorm(pts$y, 2, 0.5))
  expect_equal(unname(predict(fit, pts)), truth, tolerance = 0.1)
  # The intercept's normaliser and its importance-sampling check agree.
  expect_equal(fit$log_normaliser, fit$log_normaliser_is, tolerance = 0.05)
  expect_error(simulate(fit, method = "metropolis"), "relative", class = "nce_error_input")
  s <- simulate(fit, seed = 1)
  expect_equal(mean(s$y < 0), 0.6, tolerance = 0.05 / 0.6)
})

test_that("a relative fit's density needs every column of its reference in newdata", {
  set.seed(8)
  d <- data.frame(x1 = rnorm(300), x2 = rnorm(300))
  fit <- nce(~ I(x1^2), d, ref_normal(x1 = c(0, 2), x2 = c(0, 1)), ratio = 5, relative = TRUE)
  expect_error(predict(fit, data.frame(x1 = 0)), "lacks column\\(s\\) x2", class = "nce_error_input")
  # With both columns: log q of both plus the model's term.
  nd <- data.frame(x1 = 0.5, x2 = -1)
  lq <- dnorm(0.5, 0, 2, log = TRUE) + dnorm(-1, log = TRUE)
  expect_equal(unname(predict(fit, nd)), lq + coef(fit)[[1]] + coef(fit)[[2]] * 0.25, tolerance = 1e-12)
  # The same model not relative predicts from x1 alone.
  # (Improper: flat along x2, so its density is NA, #76; the check here is of the columns needed.)
  expect_warning(plain <- nce(~ I(x1^2), d, ref_normal(x1 = c(0, 2), x2 = c(0, 1)), ratio = 5),
                 class = "nce_warning_improper")
  expect_length(predict(plain, data.frame(x1 = 0)), 1L)
})

test_that("each number of components is fitted as alone, and work beyond the bound is refused", {
  set.seed(5)
  df <- two_clusters(300, 200)
  set.seed(11)
  r13 <- ref_fit(df, "mixture", components = 1:3)
  set.seed(11)
  r2 <- ref_fit(df, "mixture", components = 2)
  # One seed serves every number of components, so the 2-component fit is the same either way.
  expect_identical(r13$selection$loglik[2], r2$selection$loglik)
  # 200,000 rows of 5 variables and 1-100 components: about 3e13 updates, refused at once.
  big <- as.data.frame(matrix(rnorm(1e6), ncol = 5))
  t0 <- proc.time()[["elapsed"]]
  expect_error(ref_fit(big, "mixture", components = 1:100), class = "nce_error_size")
  expect_lt(proc.time()[["elapsed"]] - t0, 5)
})
