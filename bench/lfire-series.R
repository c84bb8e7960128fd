# LFIRE on ARCH(1) over many observed series: how wide is the default LFIRE posterior against the
# exact one, and against what the 17 summaries allow? One observed series (the vignette's) is
# one draw; this takes K series simulated at (t1, t2) = (0.3, 0.7), seeds 1..K, and for each
#   - the exact posterior on the 25 x 25 grid (quadrature, tests/testthat/helper-arch.R),
#   - lfire() at its defaults (ELFI's setting: 500 + 500 simulations per grid point),
#   - the amortised neural ratio of the same summaries (ratio_amortised(classifier = "mlp"),
#     20,000 pairs, an average of 3 networks' log ratios; one fit serves every series), the
#     best estimate here of the summaries' own posterior p(theta | s_obs).
# Prints sd ratios (estimate / exact) and mean errors per series, and their medians.
# Run: R_LIBS=.Rlib Rscript bench/lfire-series.R [K]   (from the package root; K = 10)
suppressPackageStartupMessages(library(nce))
source("tests/testthat/helper-arch.R")
args <- commandArgs(trailingOnly = TRUE)
K <- if (length(args)) as.integer(args[1]) else 10L
options(nce.threads = 2L)
pr <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
th <- theta_grid(pr, 25)
moments <- function(w) {
  w <- w / sum(w)
  m <- colSums(th * w)
  c(m, sqrt(colSums(th^2 * w) - m^2))
}
set.seed(99)
sims <- simulate_summaries(arch_simulate, arch_summaries, pr$sample(20000), batch = TRUE)
t_amort <- system.time(nets <- lapply(1:3, function(k) {
  ratio_amortised(arch_simulate, arch_summaries, pr, simulations = sims, batch = TRUE, classifier = "mlp")
}))[["elapsed"]]
rows <- lapply(seq_len(K), function(i) {
  set.seed(i)
  y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
  ex <- moments(arch_exact_posterior(drop(y_obs), th))
  set.seed(100 + i)
  t_lf <- system.time(f <- lfire(y_obs, arch_simulate, arch_summaries, pr, theta = th, batch = TRUE))[["elapsed"]]
  lf <- moments(f$posterior)
  nd <- data.frame(th, arch_summaries(y_obs)[rep(1, nrow(th)), , drop = FALSE])
  lw <- rowMeans(sapply(nets, stats::predict, newdata = nd))
  am <- moments(exp(lw - max(lw)))
  data.frame(series = i, exact_sd_t1 = ex[3], exact_sd_t2 = ex[4],
             lfire_sd_t1 = lf[3] / ex[3], lfire_sd_t2 = lf[4] / ex[4],
             lfire_err_t1 = lf[1] - ex[1], lfire_err_t2 = lf[2] - ex[2],
             summ_sd_t1 = am[3] / ex[3], summ_sd_t2 = am[4] / ex[4],
             summ_err_t1 = am[1] - ex[1], summ_err_t2 = am[2] - ex[2],
             lfire_vs_summ_t1 = lf[3] / am[3], lfire_vs_summ_t2 = lf[4] / am[4], lfire_s = t_lf)
})
tab <- do.call(rbind, rows)
rownames(tab) <- NULL
cat(sprintf("ARCH(1), %d observed series at (0.3, 0.7); amortised reference fitted once in %.1f s\n", K, t_amort))
print(tab, digits = 3)
cat("Medians:\n")
print(apply(tab[, -1], 2, stats::median), digits = 3)
cat("Medians of absolute mean errors: lfire", round(stats::median(abs(tab$lfire_err_t1)), 3),
    round(stats::median(abs(tab$lfire_err_t2)), 3), "; summaries' posterior",
    round(stats::median(abs(tab$summ_err_t1)), 3), round(stats::median(abs(tab$summ_err_t2)), 3), "\n")
