# Neural ratio estimation on ARCH(1) (the simulator vignette's model: 17 summaries, uniform
# prior on (t1, t2) in [-1, 1] x [0, 1], observed series at t1 = 0.3, t2 = 0.7): the posterior of
# ratio_amortised(classifier = "mlp") against the exact posterior on a 41 x 41 grid.
# One network and the default ensemble of 5 on the same simulations, 1,000, 5,000 and 10,000
# (the default) pairs.
# Run: Rscript bench/ratio-mlp.R [from:to] [pairs=1000,5000,10000] [gam]   (simulation seeds,
# default 13:42, about 20 min; "gam" also fits the GAM classifier with its default formula at
# 1,000 pairs, 19-34 s, for the time ratio).
suppressMessages(library(nce))
# arch_simulate(), arch_summaries(), arch_loglik() and gauss_hermite_normal(): the tests' ARCH(1) helper.
source("tests/testthat/helper-arch.R")
gh <- gauss_hermite_normal()
args <- commandArgs(TRUE)
seeds <- if (length(args) && grepl("^[0-9]+:[0-9]+$", args[1])) eval(str2lang(args[1])) else 13:42
pairs_arg <- grep("^pairs=", args, value = TRUE)
sizes <- if (length(pairs_arg)) as.numeric(strsplit(sub("^pairs=", "", pairs_arg), ",")[[1]]) else c(1000, 5000, 10000)
set.seed(7)
y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
prior <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
grid <- as.matrix(expand.grid(t1 = seq(-1, 1, length.out = 41), t2 = seq(0, 1, length.out = 41)))
ll <- apply(grid, 1, function(th) arch_loglik(drop(y_obs), th[["t1"]], th[["t2"]], gh))
moments <- function(lw) {
  w <- exp(lw - max(lw))
  w <- w / sum(w)
  m <- colSums(grid * w)
  c(m, sqrt(colSums(grid^2 * w) - m^2))
}
ex <- moments(ll)
nd <- data.frame(grid, arch_summaries(y_obs)[rep(1, nrow(grid)), , drop = FALSE])
row <- function(label, n, seed, sec, est) {
  data.frame(classifier = label, pairs = n, seed = seed, seconds = sec, err_mean_t1 = est[1] - ex[1],
             err_mean_t2 = est[2] - ex[2], sd_ratio_t1 = est[3] / ex[3], sd_ratio_t2 = est[4] / ex[4])
}
# One network against the default ensemble of 5 (n_networks), on the same simulations per seed.
out <- list()
for (n in sizes) for (seed in seeds) {
  set.seed(seed)
  sims <- simulate_summaries(arch_simulate, arch_summaries, prior$sample(n), batch = TRUE)
  for (k in c(1L, 5L)) {
    set.seed(seed + 5000)
    sec <- system.time(r <- ratio_amortised(arch_simulate, arch_summaries, prior, simulations = sims, batch = TRUE,
                                            classifier = "mlp", n_networks = k))[["elapsed"]]
    out[[length(out) + 1L]] <- row(sprintf("mlp x %d", k), n, seed, sec, moments(predict(r, nd)))
  }
}
if ("gam" %in% commandArgs(TRUE)) {
  set.seed(1)
  sec <- system.time(r <- ratio_amortised(arch_simulate, arch_summaries, prior, n = 1000, batch = TRUE,
                                          classifier = "gam"))[["elapsed"]]
  out[[length(out) + 1L]] <- row("gam (default formula)", 1000, 1, sec, moments(predict(r, nd)))
}
cat(sprintf("Exact posterior: means %.3f, %.3f; sds %.3f, %.3f\n", ex[1], ex[2], ex[3], ex[4]))
res <- do.call(rbind, out)
print(res, digits = 3, row.names = FALSE)
# Per classifier and size: ranges over the seeds, root-mean-square errors of the means and of the
# log sd ratios, and how many seeds have both sd ratios within 1/1.2-1.2 ("sd ok") and, besides,
# both means within 0.05 ("all ok").
worst <- pmax(res$sd_ratio_t1, 1 / res$sd_ratio_t1, res$sd_ratio_t2, 1 / res$sd_ratio_t2)
res$sd_ok <- worst <= 1.2
res$all_ok <- res$sd_ok & abs(res$err_mean_t1) <= 0.05 & abs(res$err_mean_t2) <= 0.05
rms <- function(v) sqrt(mean(v^2))
for (key in unique(paste(res$classifier, res$pairs))) {
  d <- res[paste(res$classifier, res$pairs) == key, ]
  cat(sprintf(paste("%s pairs: %.1f-%.1f s; |mean error| max %.3f, %.3f, rms %.3f, %.3f; sd ratios %.2f-%.2f,",
                    "%.2f-%.2f, rms of logs %.3f, %.3f; sd ok %d, all ok %d of %d\n"),
              key, min(d$seconds), max(d$seconds), max(abs(d$err_mean_t1)), max(abs(d$err_mean_t2)),
              rms(d$err_mean_t1), rms(d$err_mean_t2), min(d$sd_ratio_t1), max(d$sd_ratio_t1), min(d$sd_ratio_t2),
              max(d$sd_ratio_t2), rms(log(d$sd_ratio_t1)), rms(log(d$sd_ratio_t2)), sum(d$sd_ok), sum(d$all_ok),
              nrow(d)))
}
