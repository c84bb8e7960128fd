# Size of anova()'s Wald test between nested nce fits under the null, at 5%.
# Rscript bench/anova-size.R [reps] (with the package installed, e.g. R_LIBS=.Rlib).
# Null: a truncated exponential on [0, 1] (linear log density); tested against a quadratic
# (parametric, 1 df) and against a smooth (s(y, k = 6), span contrasts, 4 df).
library(nce)
args <- commandArgs(TRUE)
reps <- if (length(args)) as.integer(args[1]) else 300L
rtexp <- function(n, a) log1p(runif(n) * (exp(a) - 1)) / a
ref <- ref_uniform(y = c(0, 1))
set.seed(10)
sizes <- list()
for (n in c(100, 400)) {
  p <- t(vapply(seq_len(reps), function(i) {
    d <- data.frame(y = rtexp(n, 2))
    f1 <- nce(~ y, d, ref, ratio = 5)
    f2 <- nce(~ y + I(y^2), d, ref, ratio = 5)
    g <- suppressWarnings(nce(~ s(y, k = 6), d, ref, ratio = 5))
    c(quadratic = anova(f1, f2)[2L, "Pr(>Chisq)"], smooth = anova(f1, g)[2L, "Pr(>Chisq)"])
  }, numeric(2L)))
  rate <- colMeans(p < 0.05)
  sizes[[as.character(n)]] <- rate
  cat(sprintf("n = %d, ratio 5, %d fits: rejection at 5%%: quadratic %.3f, smooth %.3f (binomial sd %.3f)\n",
              n, reps, rate[1], rate[2], sqrt(0.05 * 0.95 / reps)))
}
