# Size of anova()'s Wald test between nested snce fits: chains from the kernel exp(2 y_t y_{t-1})
# on [0, 1] (no y^2 term), fitted with and without I(y^2); the share of p-values below 5% should
# be near 0.05. Run from the package root after `make install`:
#   R_LIBS=.Rlib Rscript bench/snce-anova-size.R [reps]
library(nce)
source("tests/testthat/helper-chain.R")
reps <- as.integer(commandArgs(TRUE)[1])
if (is.na(reps)) reps <- 200L
p <- vapply(seq_len(reps), function(i) {
  set.seed(1000 + i)
  d <- data.frame(y = rchain(300, 2))
  big <- snce(~ I(y * y_prev) + I(y^2), d, ref_uniform(y = c(0, 1)), ratio = 10, intercept = ~ s(y_prev, k = 5))
  small <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 10, intercept = ~ s(y_prev, k = 5))
  anova(small, big)[["Pr(>Chisq)"]][2]
}, 0)
cat(sprintf("Wald test size at 5%%: %.3f (%d replicates, binomial SE %.3f)\n", mean(p < 0.05), reps,
            sqrt(0.05 * 0.95 / reps)))
