# A network beside a smooth term: the ring of bench/deep-ebm.R in (x1, x2) times an independent
# Beta(2, 5) in x3, n points, ratio 10, uniform reference. Mean absolute error of the normalised
# log density at 20,000 draws from the truth, for ~ mlp(x1, x2) + s(x3) (backfitting),
# ~ mlp(x1, x2, x3) (one network) and ~ te(x1, x2, k = 10) + s(x3), with their times.
# Run: Rscript bench/deep-ebm-beside.R [n = 5000] [seeds = 3]
suppressMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
n <- if (length(args) >= 1L) as.integer(args[1L]) else 5000L
seeds <- seq_len(if (length(args) >= 2L) as.integer(args[2L]) else 3L)
# ring_beta_log_density() and ring_beta(): the truth and its simulator, shared with the tests.
source("tests/testthat/helper-ring-beta.R")
ref <- ref_uniform(x1 = c(-3, 3), x2 = c(-3, 3), x3 = c(0, 1))
set.seed(9)
g <- ring_beta(20000)
err <- function(fit) mean(abs(predict(fit, g) - ring_beta_log_density(g)))
rows <- list()
for (s in seeds) {
  set.seed(100 + s)
  d <- ring_beta(n)
  set.seed(s)
  t1 <- system.time(f1 <- nce(~ mlp(x1, x2) + s(x3), d, ref, ratio = 10))[["elapsed"]]
  set.seed(s)
  t3 <- system.time(f3 <- nce(~ mlp(x1, x2, x3), d, ref, ratio = 10))[["elapsed"]]
  set.seed(s)
  t2 <- system.time(f2 <- nce(~ te(x1, x2, k = 10) + s(x3), d, ref, ratio = 10))[["elapsed"]]
  rows[[s]] <- data.frame(seed = s, beside = err(f1), beside_s = t1, rounds = nrow(f1$training$rounds),
                          one_network = err(f3), one_network_s = t3, te_s = err(f2), te_s_s = t2)
}
print(do.call(rbind, rows), digits = 3, row.names = FALSE)
