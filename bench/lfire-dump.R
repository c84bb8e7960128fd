# Writes the ARCH(1) LFIRE problems of bench/lfire.R (25 x 25 grid, 500 simulations per point,
# 500 prior-predictive simulations, the 17 summaries standardised as lfire() does) and the exact
# posterior on the grid as little-endian doubles, for the Rust example bench_lfire:
#   dims.bin (n_marginal, p, total rows), marg.bin, at.bin (column-major), starts.bin (row offsets
#   of the grid points, 0-based), obs.bin (observed summaries), exact.bin (exact posterior).
# Also prints the simulation CPU time (one R process), the other half of the end-to-end time.
# Run: R_LIBS=.Rlib Rscript bench/lfire-dump.R [DIR]   (from the package root; DIR /tmp/nce-lfire)
#      cargo run --release -p nce-core --example bench_lfire -- DIR [--coarse 4]
suppressPackageStartupMessages(library(nce))
source("tests/testthat/helper-arch.R")
args <- commandArgs(trailingOnly = TRUE)
dir <- if (length(args)) args[1] else "/tmp/nce-lfire"
dir.create(dir, showWarnings = FALSE, recursive = TRUE)

set.seed(20170530)
y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
pr <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
th <- theta_grid(pr, 25)
set.seed(1)
cpu0 <- proc.time()
marginal <- simulate_summaries(arch_simulate, arch_summaries, pr$sample(500), batch = TRUE)
sims <- simulate_summaries(arch_simulate, arch_summaries, th, n = 500, batch = TRUE, chunk_size = 500)
cpu <- proc.time() - cpu0
cat(sprintf("simulation: %.1f CPU s, %.1f s elapsed\n", cpu[["user.self"]] + cpu[["sys.self"]], cpu[["elapsed"]]))

sm <- marginal$summaries[marginal$ok, ]
center <- colMeans(sm)
scale <- apply(sm, 2L, stats::sd)
std <- function(m) sweep(sweep(m, 2L, center), 2L, scale, "/")
ok <- sims$ok
ord <- order(sims$index[ok])
at <- std(sims$summaries[ok, , drop = FALSE][ord, ])
obs <- (drop(arch_summaries(y_obs)) - center) / scale
w <- function(x, f) writeBin(as.double(x), file.path(dir, f))
w(c(nrow(sm), ncol(sm), nrow(at)), "dims.bin")
w(std(sm), "marg.bin")
w(at, "at.bin")
w(c(0, cumsum(tabulate(sims$index[ok], nrow(th)))), "starts.bin")
w(obs, "obs.bin")
w(arch_exact_posterior(drop(y_obs), th), "exact.bin")
cat("wrote", dir, "\n")
