# How narrow can a posterior from ARCH(1)'s 17 summaries be? The summaries' own posterior,
# p(theta | s(y_obs)), is the limit of every summary-based method (LFIRE, ratio_amortised(),
# rejection ABC) as its simulations grow; the exact posterior p(theta | y_obs) conditions on the
# whole series. Two estimates of the limit at one observed series, against the exact posterior
# on a 101 x 100 grid:
# - ratio_amortised(classifier = "mlp") on many pairs (default 20,000; 5 networks), seeds 1-2;
# - rejection ABC on 2 million prior simulations, Euclidean distance of the summaries scaled by
#   their MADs, at acceptance rates 1% to 0.03% (wider than the limit, by the distance's choice).
# Run: Rscript bench/summaries-limit.R [series seed, default 20170530 = the simulator vignette's
# series; bench/ratio-mlp.R's series is 7] [pairs]   (about 2-3 minutes on 2 threads)
suppressMessages(library(nce))
# arch_simulate(), arch_summaries(), arch_loglik() and gauss_hermite_normal(): the tests' ARCH(1) helper.
source("tests/testthat/helper-arch.R")
args <- commandArgs(TRUE)
series_seed <- if (length(args) >= 1L) as.integer(args[1]) else 20170530L
pairs <- if (length(args) >= 2L) as.integer(args[2]) else 20000L
set.seed(series_seed)
y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
prior <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
gh <- gauss_hermite_normal()
grid <- as.matrix(expand.grid(t1 = seq(-1, 1, length.out = 101), t2 = seq(0.005, 0.995, length.out = 100)))
ll <- apply(grid, 1, function(th) arch_loglik(drop(y_obs), th[["t1"]], th[["t2"]], gh))
w <- exp(ll - max(ll))
w <- w / sum(w)
ex_mean <- colSums(grid * w)
ex_sd <- sqrt(colSums(grid^2 * w) - ex_mean^2)
line <- function(label, m, s) {
  cat(sprintf("%-34s means %.3f %.3f (exact %.3f %.3f)   sd / exact %.2f %.2f\n", label, m[1], m[2],
              ex_mean[1], ex_mean[2], s[1] / ex_sd[1], s[2] / ex_sd[2]))
}
cat(sprintf("ARCH(1) series of seed %d at (0.3, 0.7); exact posterior sds %.3f %.3f\n", series_seed,
            ex_sd[1], ex_sd[2]))
for (seed in 1:2) {
  set.seed(seed)
  t0 <- proc.time()[["elapsed"]]
  r <- ratio_amortised(arch_simulate, arch_summaries, prior, n = pairs, batch = TRUE, classifier = "mlp")
  post <- ratio_posterior(r, y_obs, n_draws = 20000)
  line(sprintf("neural ratio, %d pairs, seed %d", pairs, seed), coef(post), sqrt(diag(vcov(post))))
  cat(sprintf("  (fit %.1f s)\n", proc.time()[["elapsed"]] - t0))
}
set.seed(11)
s_obs <- drop(arch_summaries(y_obs))
theta <- NULL
s <- NULL
for (b in 1:20) {
  t <- cbind(t1 = stats::runif(1e5, -1, 1), t2 = stats::runif(1e5, 0, 1))
  theta <- rbind(theta, t)
  s <- rbind(s, arch_summaries(arch_simulate(t, 1e5)))
}
d <- sqrt(colSums(((t(s) - s_obs) / apply(s, 2, stats::mad))^2))
for (q in c(0.01, 0.003, 0.001, 0.0003)) {
  keep <- d <= stats::quantile(d, q)
  line(sprintf("rejection ABC, accept %.2f%%", 100 * q), colMeans(theta[keep, ]), apply(theta[keep, ], 2, stats::sd))
}
