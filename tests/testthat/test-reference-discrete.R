# Bernoulli and categorical references: samplers against their probabilities, and Ising and
# Potts models fitted by nce() against the exact MLE. With few states the exact MLE of a
# log-linear model is the Poisson regression of the state counts on the sufficient
# statistics (glm), and the exact log normaliser a sum over the states.

# Ising model on {0,1}^5: p(y) proportional to exp(a'y + sum_{i<j} Q_ij y_i y_j).
ising5_states <- function() as.data.frame(ising_states(5))
ising5_formula <- function() {
  pr <- ising_pairs(5)
  stats::as.formula(paste("~", paste(c(paste0("y", 1:5), sprintf("I(y%d * y%d)", pr[, 1], pr[, 2])), collapse = " + ")))
}

test_that("ref_bernoulli draws and log density", {
  r <- ref_bernoulli(c(a = 0.2, b = 0.9))
  set.seed(1)
  u <- nce:::ref_draw(r, 20000)
  expect_equal(names(u), c("a", "b"))
  expect_true(all(unlist(u) %in% c(0, 1)))
  expect_equal(unname(colMeans(u)), c(0.2, 0.9), tolerance = 0.05)
  lq <- nce:::ref_logq(r, data.frame(a = c(1, 0, 0.5), b = c(TRUE, FALSE, TRUE)))
  expect_equal(lq[1:2], c(log(0.2 * 0.9), log(0.8 * 0.1)))
  expect_equal(lq[3], -Inf)
  # Fitted: (k + 1/2) / (n + 1), never 0 or 1.
  f <- ref_bernoulli(data = data.frame(a = c(0, 0, 0), b = c(1, 0, 1), c = c(2, 0, 1)))
  expect_equal(f$vars, c("a", "b"))
  expect_equal(f$prob, c(0.5 / 4, 2.5 / 4))
  expect_equal(ref_bernoulli(0.3, vars = c("x", "y"))$prob, c(0.3, 0.3))
})

test_that("ref_categorical draws and log density", {
  r <- ref_categorical(s = c("a", "b", "c"), t = c(u = 0.25, v = 0.75))
  set.seed(2)
  u <- nce:::ref_draw(r, 30000)
  expect_s3_class(u$s, "factor")
  expect_equal(levels(u$t), c("u", "v"))
  expect_equal(as.numeric(prop.table(table(u$s))), rep(1 / 3, 3), tolerance = 0.03)
  expect_equal(as.numeric(prop.table(table(u$t))), c(0.25, 0.75), tolerance = 0.03)
  lq <- nce:::ref_logq(r, data.frame(s = c("b", "z"), t = c("v", "u")))
  expect_equal(lq, c(log(0.75 / 3), -Inf))
  d <- ref_categorical(data = data.frame(k = factor(c("p", "q")), x = 1:2))
  expect_equal(d$levels, list(k = c("p", "q")))
})

test_that("Ising model (5 spins): nce() with a Bernoulli reference matches the exact MLE and log Z", {
  st <- ising5_states()
  pr <- ising_pairs(5)
  a <- c(-0.5, 0.3, 0, 0.5, -0.2)
  Q <- matrix(0, 5, 5)
  Q[pr] <- c(0.8, -0.6, 0.4, 0, 0.3, -0.4, 0.5, 0.2, -0.3, 0.6)
  phi <- as.matrix(cbind(st, st[, pr[, 1]] * st[, pr[, 2]]))
  theta <- c(a, Q[pr])
  p <- exp(drop(phi %*% theta))
  set.seed(21)
  n <- 2000
  d <- st[sample.int(32, n, replace = TRUE, prob = p), ]
  rownames(d) <- NULL
  # Exact MLE: Poisson log-linear regression of the 32 state counts.
  cnt <- tabulate(drop(as.matrix(d) %*% 2^(0:4)) + 1, 32)
  ml <- stats::glm(cnt ~ phi, family = stats::poisson(), control = stats::glm.control(epsilon = 1e-12))
  th_ml <- unname(coef(ml)[-1])
  lz_ml <- log(sum(exp(drop(phi %*% th_ml))))
  se_ml <- unname(sqrt(diag(vcov(ml)))[-1])
  fit <- nce(ising5_formula(), d, ref_bernoulli(data = d), ratio = 100)
  th <- unname(coef(fit)[-1])
  gap <- abs(th - th_ml) / se_ml
  lz_exact <- log(sum(exp(drop(phi %*% th))))
  message(sprintf(paste("Ising 5 spins, ratio 100: max |NCE - MLE| / MLE SE = %.3f (median %.3f);",
                        "log Z: NCE %.4f, exact at the NCE theta %.4f, at the MLE %.4f"),
                  max(gap), stats::median(gap), fit$log_normaliser, lz_exact, lz_ml))
  # At ratio 100 NCE is within a fifth of an SE of the MLE on every coefficient (measured with this
  # seed: at most 0.145, median 0.040); log Z 4.0266 against 4.0268 exact.
  expect_true(all(gap < 0.2))
  expect_true(all(abs(th - theta) < 4 * se_ml))
  # The intercept's log normaliser against the exact sum over the 32 states at the same theta.
  expect_equal(fit$log_normaliser, lz_exact, tolerance = 0.02 / lz_exact)
  # A fixed p = 1/2 reference gives the same estimate within the Monte Carlo spread.
  fit2 <- nce(ising5_formula(), d, ref_bernoulli(0.5, vars = paste0("y", 1:5)), ratio = 100)
  expect_true(all(abs(coef(fit2)[-1] - th_ml) / se_ml < 0.3))
})

test_that("Potts model (3 sites, 3 colours): nce() with a categorical reference matches the exact MLE", {
  lev <- c("r", "g", "b")
  st <- expand.grid(s1 = lev, s2 = lev, s3 = lev)
  for (v in names(st)) st[[v]] <- factor(st[[v]], levels = lev)
  f <- ~ s1 + s2 + s3 + I(s1 == s2) + I(s2 == s3) + I(s1 == s3)
  x <- stats::model.matrix(f, st)[, -1]
  theta <- c(0.3, -0.2, 0.5, 0.1, -0.4, 0.2, 0.8, 0.5, -0.3)
  set.seed(22)
  n <- 3000
  d <- st[sample.int(27, n, replace = TRUE, prob = exp(drop(x %*% theta))), ]
  rownames(d) <- NULL
  cnt <- as.vector(table(factor(interaction(d$s1, d$s2, d$s3), levels = levels(interaction(st$s1, st$s2, st$s3)))))
  ml <- stats::glm(cnt ~ x, family = stats::poisson(), control = stats::glm.control(epsilon = 1e-12))
  th_ml <- unname(coef(ml)[-1])
  se_ml <- unname(sqrt(diag(vcov(ml)))[-1])
  fit <- nce(f, d, ref_categorical(data = d), ratio = 100)
  th <- unname(coef(fit)[-1])
  gap <- abs(th - th_ml) / se_ml
  lz_exact <- log(sum(exp(drop(x %*% th))))
  message(sprintf("Potts, ratio 100: max |NCE - MLE| / MLE SE = %.3f; log Z NCE %.4f vs exact %.4f",
                  max(gap), fit$log_normaliser, lz_exact))
  expect_true(all(gap < 0.25))   # measured: at most 0.178 (0.252 at ratio 50); log Z 3.9601 vs 3.9575
  expect_equal(fit$log_normaliser, lz_exact, tolerance = 0.02 / abs(lz_exact))
})

test_that("snapshots: print of the discrete references", {
  expect_snapshot(print(ref_bernoulli(c(y1 = 0.5, y2 = 0.25))))
  expect_snapshot(print(ref_bernoulli(data = data.frame(a = c(0, 1, 1)))))
  expect_snapshot(print(ref_categorical(s = c("a", "b"), t = c(x = 0.2, y = 0.3, z = 0.5))))
})

test_that("ref_bernoulli() as an snce() reference: sequential Ising model (3 spins) on the exact conditional MLE", {
  d <- 3L
  Q <- matrix(0, d, d)
  Q[ising_pairs(d)] <- c(0.6, -0.5, 0.4)
  R <- diag(1, d)
  R[1, 2] <- -0.6
  R[3, 1] <- 0.5
  theta <- ising_theta(c(-0.5, 0.2, -0.3), Q, R)
  set.seed(23)
  dat <- do.call(rbind, lapply(1:2, function(g) data.frame(chain = g, ising_sim(400, c(0, 1, 0), theta))))
  ml <- ising_mle(dat, d, "chain")
  f <- stats::as.formula(paste("~", paste(ising_terms(d), collapse = " + ")))
  fit <- snce(f, dat, ref_bernoulli(data = dat, vars = paste0("y", 1:d)), ratio = 100, group = "chain",
              intercept = ~ y1_prev * y2_prev * y3_prev)
  gap <- abs(summary(fit)$coefficients[, "Estimate"] - ml$par) / ml$se
  message(sprintf("sequential Ising (3 spins, 800 transitions), ratio 100: max |snce - MLE| / SE = %.3f", max(gap)))
  expect_true(all(gap < 0.3))   # measured with this seed: 0.203
})
