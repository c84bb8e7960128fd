# The choice of ratio_amortised(classifier = "auto"): the default GAM against the neural
# classifier as the number of parameter-summary pairs grows. ARCH(1) of the simulator vignette
# (2 parameters, uniform prior), the first 1, 2, 4 or 8 of its 17 summaries (in the order below),
# 5,000 joint pairs, observed series simulated at (0.3, 0.7) with seed 7; the exact posterior on a
# 41 x 41 grid by quadrature (tests/testthat/helper-arch.R). Both classifiers see the same
# simulations (seeds 1..3); prints the mean errors and sd ratios against exact and the fit times.
# Run: R_LIBS=.Rlib Rscript bench/ratio-auto.R [seeds] [summaries]   (defaults 3 and "1,2,4,8")
suppressPackageStartupMessages(library(nce))
source("tests/testthat/helper-arch.R")
args <- commandArgs(trailingOnly = TRUE)
seeds <- seq_len(if (length(args)) as.integer(args[1]) else 3L)
sizes <- if (length(args) > 1L) as.integer(strsplit(args[2], ",")[[1]]) else c(1L, 2L, 4L, 8L)
options(nce.threads = 2L)
order_summ <- c("var", "ac1", "ac2", "mean", "ac3", "pw12", "ac4", "pw13", "ac5", "pw23")
pr <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
th <- theta_grid(pr, 41)
set.seed(7)
y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
moments <- function(w) {
  w <- w / sum(w)
  m <- colSums(th * w)
  c(m, sqrt(colSums(th^2 * w) - m^2))
}
ex <- moments(arch_exact_posterior(drop(y_obs), th))
rows <- list()
for (ns in sizes) {
  keep <- order_summ[seq_len(ns)]
  summ <- function(y) arch_summaries(y)[, keep, drop = FALSE]
  nd <- data.frame(th, summ(y_obs)[rep(1, nrow(th)), , drop = FALSE])
  for (seed in seeds) {
    set.seed(seed)
    sims <- simulate_summaries(arch_simulate, summ, pr$sample(5000), batch = TRUE)
    for (cls in c("gam", "mlp")) {
      sec <- system.time(r <- ratio_amortised(arch_simulate, summ, pr, simulations = sims, batch = TRUE,
                                              classifier = cls))[["elapsed"]]
      lw <- stats::predict(r, nd)
      e <- moments(exp(lw - max(lw)))
      rows[[length(rows) + 1L]] <- data.frame(summaries = ns, pairs = 2 * ns, seed = seed, classifier = cls,
                                              seconds = sec, err_t1 = e[1] - ex[1], err_t2 = e[2] - ex[2],
                                              sd_ratio_t1 = e[3] / ex[3], sd_ratio_t2 = e[4] / ex[4])
    }
  }
}
cat(sprintf("Exact posterior: means %.3f, %.3f; sds %.3f, %.3f\n", ex[1], ex[2], ex[3], ex[4]))
print(do.call(rbind, rows), digits = 3, row.names = FALSE)
