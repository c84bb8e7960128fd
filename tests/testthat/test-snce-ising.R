# Sequential NCE on the sequential Ising model (Barthelme and Chopin, part I):
# p(y_t | y_{t-1}) proportional to exp(a'y_t + y_t'Q y_t + y_t'R y_{t-1}), y_t in {0,1}^4,
# against the truth and the exact conditional MLE (2^4 states, enumerated).

ising_d <- 4L
ising_truth <- local({
  d <- ising_d
  Q <- matrix(0, d, d)
  Q[ising_pairs(d)] <- c(0.6, -0.5, 0.3, 0.4, -0.4, 0.5)
  R <- diag(1.2, d)
  R[1, 2] <- -0.6
  R[2, 3] <- 0.5
  R[3, 1] <- 0.4
  R[4, 2] <- -0.5
  R[1, 4] <- 0.3
  ising_theta(c(-0.6, -0.5, -0.6, -0.2), Q, R)
})

# Four chains of 500 transitions (2,000 in all).
ising_data <- local({
  set.seed(301)
  do.call(rbind, lapply(1:4, function(g) {
    data.frame(chain = g, ising_sim(500, stats::rbinom(ising_d, 1L, 0.5), ising_truth))
  }))
})

ising_formula <- stats::as.formula(paste("~", paste(ising_terms(ising_d), collapse = " + ")))

# The exact log normaliser depends on y_{t-1} nonlinearly; with 4 binary columns the full
# interaction of the previous state's columns (15 columns + the kernel's intercept = 16
# levels) represents any function of y_{t-1}, so this intercept is exact (saturated).
# (The default s(y1_prev, ..., y4_prev) cannot be set up on 16 distinct points.) A factor of
# the previous state spans the same columns: see the last test.
ising_intercept <- ~ y1_prev * y2_prev * y3_prev * y4_prev

fit_ising <- function(ratio, seed) {
  set.seed(seed)
  snce(ising_formula, ising_data, ising_reference(ising_d), ratio = ratio, group = "chain",
       intercept = ising_intercept)
}

ising_mle_fit <- ising_mle(ising_data, ising_d, "chain")

test_that("ising: the exact MLE is a maximum and the simulation is sound", {
  expect_equal(ising_mle_fit$convergence, 0L)
  expect_lt(max(abs(ising_mle_fit$score)), 1e-4)
  z <- (ising_mle_fit$par - ising_truth) / ising_mle_fit$se
  # Measured: max |z| 2.09.
  expect_lt(max(abs(z)), 3.5)
  # every state is visited
  expect_equal(nrow(unique(ising_data[paste0("y", 1:ising_d)])), 2L^ising_d)
})

test_that("ising: snce recovers a, Q and R within 3.5 standard errors", {
  fit <- fit_ising(100, 302)
  expect_true(fit$converged)
  expect_equal(nobs(fit), 2000L)
  tab <- summary(fit)$coefficients
  expect_identical(rownames(tab), ising_terms(ising_d))
  z <- (tab[, "Estimate"] - ising_truth) / tab[, "Std. Error"]
  e <- tab[, "Estimate"] - ising_truth
  wald <- drop(crossprod(e, solve(vcov(fit)[rownames(tab), rownames(tab)], e)))
  message(sprintf("ising snce (ratio 100) vs truth: max |z| %.2f, Wald %.1f on %d df", max(abs(z)), wald, length(z)))
  # Measured with this seed: max |z| 2.09, Wald 22.1 on 26 df (reference seeds 1-8: max |z|
  # 1.85-2.25).
  expect_lt(max(abs(z)), 3.5)
  expect_lt(wald, stats::qchisq(0.999, length(z)))
})

test_that("ising: snce is close to the exact conditional MLE, closer as the ratio grows", {
  res <- lapply(c(20, 100), function(r) {
    fit <- fit_ising(r, 303)
    tab <- summary(fit)$coefficients
    list(tab = tab, gap = abs(tab[, "Estimate"] - ising_mle_fit$par) / tab[, "Std. Error"])
  })
  g20 <- res[[1]]$gap
  g100 <- res[[2]]$gap
  tab <- res[[2]]$tab
  message("ising truth / exact MLE / snce (ratio 100) / snce SE / MLE SE:\n",
          paste(utils::capture.output(print(round(cbind(truth = ising_truth, mle = ising_mle_fit$par,
                                                        snce = tab[, 1], se = tab[, 2],
                                                        se_mle = ising_mle_fit$se), 3))), collapse = "\n"))
  message(sprintf("ising |snce - MLE| / SE: ratio 20 max %.3f mean %.3f; ratio 100 max %.3f mean %.3f",
                  max(g20), mean(g20), max(g100), mean(g100)))
  # Measured with this seed: ratio 20 max 0.67, mean 0.23; ratio 100 max 0.26, mean 0.078.
  # Over reference seeds 1-8: ratio 20 max 0.35-0.67, mean 0.16-0.28; ratio 100 max 0.15-0.26,
  # mean 0.068-0.105. The gap is Monte Carlo noise of order SE / sqrt(ratio).
  expect_lt(max(g20), 0.9)
  expect_lt(mean(g20), 0.35)
  expect_lt(max(g100), 0.4)
  expect_lt(mean(g100), 0.15)
  expect_lt(mean(g100), mean(g20))
  # The sandwich SEs match the MLE's at ratio 100 (measured ratio 0.986-1.031 over seeds 1-8).
  se_ratio <- tab[, "Std. Error"] / ising_mle_fit$se
  expect_true(all(se_ratio > 0.95 & se_ratio < 1.1))
})

test_that("ising: the saturated intercept estimates the exact log normaliser", {
  fit <- fit_ising(100, 304)
  st <- ising_states(ising_d)
  k <- nrow(st)
  # For each previous state, the fitted transition density over the 16 states sums to
  # about 1, and matches the exact log normaliser at the snce estimate.
  tab <- summary(fit)$coefficients
  th <- unname(tab[, "Estimate"])
  err <- vapply(seq_len(k), function(j) {
    prev <- matrix(st[j, ], k, ising_d, byrow = TRUE, dimnames = list(NULL, paste0(colnames(st), "_prev")))
    nd <- data.frame(st, prev)
    ld <- predict(fit, nd, type = "log_density")
    lk <- predict(fit, nd, type = "log_kernel")
    expect_equal(unname(lk), drop(ising_features(st, prev) %*% th), tolerance = 1e-8)
    chi <- (ld - lk)[1]
    l <- drop(ising_features(st, prev) %*% th)
    c(total = log(sum(exp(ld))), chi = unname(chi + max(l) + log(sum(exp(l - max(l))))))
  }, c(total = 0, chi = 0))
  message(sprintf("ising: |log sum of fitted transition probabilities| max %.4f; |chi + log Z| max %.4f",
                  max(abs(err["total", ])), max(abs(err["chi", ]))))
  # Both are the same quantity; measured max 0.011 with this seed, 0.016-0.028 over seeds 1-8.
  expect_lt(max(abs(err["total", ])), 0.06)
  expect_equal(err["total", ], err["chi", ], tolerance = 1e-8)
})

test_that("ising: a factor of the previous state as intercept gives the same fit", {
  # Same 16-dimensional column space as the full interaction: identical estimates for the same
  # reference draws. (Before commit 9f2ce1b this failed: the factor got a full set of dummies,
  # aliased with the kernel's intercept.)
  f1 <- fit_ising(20, 305)
  set.seed(305)
  f2 <- snce(ising_formula, ising_data, ising_reference(ising_d), ratio = 20, group = "chain",
             intercept = ~ factor(paste(y1_prev, y2_prev, y3_prev, y4_prev)))
  expect_true(f2$converged)
  expect_equal(summary(f2)$coefficients, summary(f1)$coefficients, tolerance = 1e-6)
  nd <- data.frame(ising_states(ising_d), y1_prev = 1, y2_prev = 0, y3_prev = 1, y4_prev = 1)
  expect_equal(predict(f2, nd, type = "log_density"), predict(f1, nd, type = "log_density"), tolerance = 1e-6)
})
