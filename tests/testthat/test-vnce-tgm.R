# vnce() for the truncated Gaussian graphical model (Rhodes and Gutmann, 2019, section 5).

test_that("without missing values VNCE is NCE: the same optimum as glm() on the same sample", {
  set.seed(20)
  K <- ring_graph(5)
  x <- rtgm(400, K)
  fit <- vnce(x, tgm_model(), ratio = 2, control = vnce_control(gtol = 1e-10))
  expect_true(fit$converged)
  lab <- c(rep(1, nrow(x)), rep(0, nrow(fit$noise$y)))
  X <- tgm_features(rbind(x, fit$noise$y))
  off <- -log(2) - c(fit$noise$lpx, fit$noise$lpy)
  g <- glm(lab ~ X - 1 + offset(off), family = binomial())
  expect_equal(unname(fit$coefficients), unname(coef(g)), tolerance = 1e-5)
  # the objective is the NCE log-likelihood divided by n
  expect_equal(fit$objective, as.numeric(logLik(g)) / nrow(x), tolerance = 1e-8)
  # mean imputation and complete cases change nothing when nothing is missing
  set.seed(21); a <- vnce(x, tgm_model(), impute = "mean")
  set.seed(21); b <- vnce(x, tgm_model(), impute = "complete")
  set.seed(21); v <- vnce(x, tgm_model())
  expect_equal(a$precision, v$precision, tolerance = 1e-8)
  expect_equal(b$precision, v$precision, tolerance = 1e-8)
})

test_that("with missing values VNCE stays closer to the complete-data fit than mean imputation", {
  set.seed(22)
  K <- ring_graph(10)
  x <- rtgm(600, K)
  xm <- x
  xm[sample(length(x), 0.3 * length(x))] <- NA
  set.seed(23); fv <- vnce(xm, tgm_model(), n_latent = 10)
  set.seed(23); fm <- vnce(xm, tgm_model(), impute = "mean")
  set.seed(23); fc <- vnce(x, tgm_model())
  expect_true(fv$converged)
  expect_gt(edge_roc(fc, K)$auc, 0.85)
  expect_gt(edge_roc(fv, K)$auc, 0.75)
  # Mean imputation shrinks each column's spread, so its K is far too large; VNCE's is nearer the
  # complete-data estimate (measured: Frobenius distance about 2/3 of mean imputation's here).
  err <- function(f) sqrt(sum((f$precision - fc$precision)^2))
  expect_lt(err(fv), err(fm))
  expect_gt(mean(diag(fm$precision)), 1.5 * mean(diag(fc$precision)))
  # imputations: q's posterior means fill exactly the missing cells, positive
  imp <- predict(fv, type = "impute")
  expect_false(anyNA(imp))
  expect_equal(imp[!is.na(xm)], xm[!is.na(xm)])
  expect_true(all(imp > 0))
})

test_that("tgm fits are reproducible and do not depend on the thread count", {
  set.seed(24)
  x <- rtgm(200, ring_graph(5))
  x[sample(length(x), 150)] <- NA
  set.seed(25); a <- withr_threads(1, vnce(x, tgm_model(), n_latent = 4))
  set.seed(25); b <- withr_threads(2, vnce(x, tgm_model(), n_latent = 4))
  expect_identical(a$precision, b$precision)
  expect_identical(a$objective, b$objective)
})

test_that("tgm_model() input errors name the argument", {
  set.seed(26)
  x <- rtgm(50, ring_graph(4))
  y <- x; y[3, ] <- NA
  expect_error(vnce(y, tgm_model()), "every value missing: 3", class = "nce_error_input")
  y <- x; y[, 2] <- NA
  expect_error(vnce(y, tgm_model()), "columns with fewer than two", class = "nce_error_input")
  y <- x; y[5, 1] <- -1
  expect_error(vnce(y, tgm_model()), "must be positive.*row 5, column 1", class = "nce_error_input")
  y <- x; y[2, 2] <- Inf
  expect_error(vnce(y, tgm_model()), "infinite", class = "nce_error_input")
  expect_error(vnce(x, tgm_model(start = list(K = -diag(4)))), "start\\$K.*not positive definite", class = "nce_error_input")
  expect_error(vnce(x, tgm_model(), ratio = 1.5), "whole number", class = "nce_error_input")
  expect_error(vnce(x, tgm_model(), method = "em"), "not tractable", class = "nce_error_input")
  expect_error(vnce(x[, 1, drop = FALSE], tgm_model()), "two columns", class = "nce_error_input")
  y <- x; y[1:45, 1] <- NA
  expect_error(vnce(y, tgm_model(), impute = "complete"), "complete rows", class = "nce_error_input")
  expect_warning(vnce(x, tgm_model(), control = vnce_control(maxit = 2)), class = "nce_warning_convergence")
})

test_that("GHK family: with one missing value per row J is the exact NCE objective of the marginal model", {
  set.seed(30)
  K <- ring_graph(4)
  x <- rtgm(120, K)
  xm <- x
  xm[cbind(seq_len(120), sample(4, 120, replace = TRUE))] <- NA
  fit <- vnce(xm, tgm_model(), n_latent = 3)
  expect_true(fit$converged)
  # log phi(x_o) = log int_0^inf exp(-x'Kx/2) dz - c in closed form for one missing value z.
  log_marg <- function(v, K, c) {
    m <- which(is.na(v)); o <- which(!is.na(v))
    a <- K[m, m]; b <- sum(K[m, o] * v[o])
    -0.5 * sum(v[o] * (K[o, o] %*% v[o])) + b^2 / (2 * a) + 0.5 * log(2 * pi / a) +
      stats::pnorm(-b / sqrt(a), log.p = TRUE) - c
  }
  exact_J <- function(K, c) {
    gx <- apply(fit$data, 1, log_marg, K = K, c = c) - log(fit$ratio) - fit$noise$lpx
    gy <- apply(fit$noise$y, 1, log_marg, K = K, c = c) - log(fit$ratio) - fit$noise$lpy
    (sum(stats::plogis(gx, log.p = TRUE)) + sum(stats::plogis(-gy, log.p = TRUE))) / nrow(fit$data)
  }
  for (s in list(list(K = K, c = 0.5), list(K = unname(fit$precision), c = fit$c))) {
    samples <- list(x = fit$data, y = fit$noise$y, lpx = fit$noise$lpx, lpy = fit$noise$lpy)
    ob <- nce:::nce_vnce_tgm_ghk_objective(samples, s, list(n_latent = 3L, seed = 11, threads = 2L))
    expect_equal(ob$value, exact_J(s$K, s$c), tolerance = 1e-10)
  }
  # at the estimate the exact NCE gradient vanishes: J is maximised over (K, c)
  expect_equal(fit$objective, exact_J(unname(fit$precision), fit$c), tolerance = 1e-10)
})

test_that("GHK imputation gives the truncated-normal posterior mean (tmvtnorm::mtmvnorm)", {
  skip_if_not_installed("tmvtnorm")
  set.seed(31)
  x <- rtgm(300, ring_graph(5))
  fit <- vnce(x, tgm_model())
  newx <- matrix(c(0.5, NA, NA, 1.0, NA), 1)
  set.seed(32)
  imp <- predict(fit, newx, type = "impute", n_draws = 20000)
  K <- unname(fit$precision)
  m <- c(2, 3, 5); o <- c(1, 4)
  S <- solve(K[m, m]); S <- (S + t(S)) / 2
  mu <- -as.vector(S %*% K[m, o] %*% newx[1, o])
  ref <- tmvtnorm::mtmvnorm(mean = mu, sigma = S, lower = rep(0, 3))$tmean
  expect_equal(imp[1, m], ref, tolerance = 0.01)
  expect_equal(imp[1, o], newx[1, o])
  expect_error(predict(fit, newx, type = "impute", n_draws = 0), "n_draws", class = "nce_error_input")
})

test_that("the paper's lognormal family is still available and gives a positive definite fit", {
  set.seed(33)
  K <- ring_graph(6)
  x <- rtgm(300, K)
  x[sample(length(x), 0.2 * length(x))] <- NA
  fit <- vnce(x, tgm_model("lognormal"), n_latent = 5)
  expect_identical(fit$variational$family, "lognormal")
  expect_equal(dim(fit$variational$prec), c(6L, 6L))
  expect_true(fit$converged)
  imp <- predict(fit, type = "impute")
  expect_false(anyNA(imp))
  expect_error(tgm_model("normal"), "must be one of", class = "nce_error_input")
})
