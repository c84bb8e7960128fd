# Deep energy-based models in 6 and 10 dimensions (n = 20,000): the MLP energy of nce() against
# the best single Gaussian, mclust's Gaussian mixture and ks::kde() (6-D only), by
# KL(truth || model), estimated by Monte Carlo over 20,000 fresh draws from the truth. The MLP's
# log normaliser is its fitted intercept; its importance-sampling check is printed beside it, and
# the KL after renormalising the fitted density by defensive importance sampling.
# Targets: a product of 3 (6-D) or 5 (10-D) two-dimensional bananas, and an 8-component
# Gaussian mixture. ks::kde() uses the normal-scale bandwidth (its plug-in selector is too slow in
# 6-D). Beside them, the model relative to a fitted reference (`nce(relative = TRUE)` with
# `ref_fit(family = "mixture")`: log p = log q + network + nu), and that reference alone.
# Run: Rscript bench/deep-ebm-highdim.R [seed]
suppressMessages(library(nce))
seed <- if (length(commandArgs(TRUE))) as.integer(commandArgs(TRUE)[1]) else 1L

# Banana pair: x1 ~ N(0, 1), x2 | x1 ~ N(0.5 (x1^2 - 1), 0.5^2).
bananas <- function(d) {
  list(name = sprintf("%d bananas (%d-D)", d / 2, d),
       draw = function(n) {
         x <- matrix(0, n, d)
         for (k in seq(1, d, by = 2)) {
           x[, k] <- rnorm(n)
           x[, k + 1] <- 0.5 * (x[, k]^2 - 1) + rnorm(n, 0, 0.5)
         }
         colnames(x) <- paste0("x", seq_len(d))
         x
       },
       logd = function(x) {
         out <- 0
         for (k in seq(1, d, by = 2)) {
           out <- out + dnorm(x[, k], log = TRUE) + dnorm(x[, k + 1], 0.5 * (x[, k]^2 - 1), 0.5, log = TRUE)
         }
         out
       })
}
mixture <- function(d) {
  set.seed(1000 + d)
  mu <- matrix(sample(c(-2, 2), 8 * d, TRUE), 8, d)
  list(name = sprintf("8 Gaussians (%d-D)", d),
       draw = function(n) {
         k <- sample.int(8, n, TRUE)
         x <- mu[k, , drop = FALSE] + matrix(rnorm(n * d, 0, 0.6), n, d)
         colnames(x) <- paste0("x", seq_len(d))
         x
       },
       logd = function(x) {
         l <- sapply(1:8, function(k) colSums(dnorm(t(x), mu[k, ], 0.6, log = TRUE)))
         m <- apply(l, 1, max)
         m + log(rowMeans(exp(l - m)))
       })
}

kl <- function(target, logd_model, x_test) mean(target$logd(x_test) - logd_model(x_test))

# The log of the fitted density's total mass, by defensive importance sampling: 200,000 draws
# from 0.5 truth + 0.5 reference.
log_mass <- function(target, fit, ref, vars) {
  nd <- 100000
  xs <- rbind(target$draw(nd), as.matrix(nce:::ref_draw(ref, nd))[, vars])
  lq <- log(0.5 * exp(target$logd(xs)) + 0.5 * exp(nce:::ref_logq(ref, as.data.frame(xs))))
  lw <- predict(fit, as.data.frame(xs)) - lq
  max(lw) + log(mean(exp(lw - max(lw))))
}

rows <- list()
for (target in list(bananas(6), mixture(6), bananas(10), mixture(10))) {
  set.seed(seed)
  x <- target$draw(20000)
  x_test <- target$draw(20000)
  d <- as.data.frame(x)
  vars <- colnames(x)
  f <- stats::as.formula(sprintf("~ mlp(%s, hidden = c(64, 64))", paste(vars, collapse = ", ")))
  ref <- ref_fit(d, inflate = 1.5)
  t_mlp <- system.time(fit <- nce(f, d, ref, ratio = 10))[["elapsed"]]
  kl_mlp <- kl(target, function(z) predict(fit, as.data.frame(z)), x_test)
  # The MLP's normalisation checked by defensive importance sampling: 200,000 draws from
  # 0.5 truth + 0.5 reference; log_z_error is the log of the fitted density's total mass.
  log_z_error <- log_mass(target, fit, ref, vars)
  # Relative to a fitted mixture of normals.
  t_mix <- system.time(mix <- ref_fit(d, "mixture"))[["elapsed"]]
  kl_mix <- kl(target, function(z) nce:::ref_logq(mix, as.data.frame(z)), x_test)
  t_rel <- system.time(rel <- nce(f, d, mix, ratio = 10, relative = TRUE))[["elapsed"]]
  kl_rel <- kl(target, function(z) predict(rel, as.data.frame(z)), x_test) + log_mass(target, rel, mix, vars)
  mu <- colMeans(x)
  S <- stats::cov(x)
  kl_gauss <- kl(target, function(z) {
    r <- chol(S)
    q <- backsolve(r, t(z) - mu, transpose = TRUE)
    -0.5 * colSums(q^2) - sum(log(diag(r))) - ncol(z) / 2 * log(2 * pi)
  }, x_test)
  kl_mclust <- NA_real_
  t_mclust <- NA_real_
  if (requireNamespace("mclust", quietly = TRUE)) {
    t_mclust <- system.time(mc <- mclust::densityMclust(x, G = 1:9, modelNames = "VVV", verbose = FALSE,
                                                        plot = FALSE,
                                                        # mclust's hierarchical start is O(n^2): on a subset
                                                        initialization = list(subset = sample.int(nrow(x), 2000))))[["elapsed"]]
    kl_mclust <- kl(target, function(z) log(predict(mc, z)), x_test)
  }
  kl_kde <- NA_real_
  if (ncol(x) <= 6 && requireNamespace("ks", quietly = TRUE)) {
    # Normal-scale bandwidth: ks's plug-in selector (Hpi) takes minutes in 6-D even on 2,000 points.
    k <- ks::kde(x, H = ks::Hns(x), binned = FALSE, eval.points = x_test)
    kl_kde <- mean(target$logd(x_test) - log(pmax(k$estimate, 1e-300)))
  }
  rows[[length(rows) + 1L]] <- data.frame(target = target$name, kl_mlp = kl_mlp, kl_gauss = kl_gauss,
                                          kl_mlp_renormalised = kl_mlp + log_z_error,
                                          kl_mixture_ref = kl_mix, kl_relative_renormalised = kl_rel,
                                          components = length(mix$weights), sec_mixture = t_mix, sec_relative = t_rel,
                                          kl_mclust = kl_mclust, kl_kde = kl_kde, sec_mlp = t_mlp,
                                          sec_mclust = t_mclust, log_z = fit$log_normaliser,
                                          log_z_is = fit$log_normaliser_is)
  print(rows[[length(rows)]], digits = 3, row.names = FALSE)
}
cat("\nKL(truth || model) by Monte Carlo over 20,000 draws of the truth:\n")
print(do.call(rbind, rows), digits = 3, row.names = FALSE)
