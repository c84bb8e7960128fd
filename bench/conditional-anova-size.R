# Size of anova() between nested conditional NCE fits (Wald test with the sandwich
# covariance) at the 5% level, by simulation under the null: y | z ~ N(1, 0.5^2), so the
# coefficient of I(y * z) is 0. Run: R_LIBS=.Rlib Rscript bench/conditional-anova-size.R [reps]
library(nce)
args <- commandArgs(TRUE)
reps <- if (length(args)) as.integer(args[1]) else 200L
p <- vapply(seq_len(reps), function(r) {
  set.seed(1000 + r)
  z <- runif(300, -1, 1)
  d <- data.frame(y = rnorm(300, 1, 0.5), z = z)
  big <- nce(~ y + I(y^2) + I(y * z), d, ref_normal(y = 1, cov = 4), ratio = 10, given = ~ z)
  small <- nce(~ y + I(y^2), d, ref_normal(y = 1, cov = 4), ratio = 10, given = ~ z)
  anova(small, big)[["Pr(>Chi)"]][2]
}, 0)
rate <- mean(p < 0.05)
cat(sprintf("anova() Wald test, nested conditional fits, %d replicates under the null: rejection rate at 5%% = %.3f (binomial SE %.3f); at 10%% = %.3f\n",
            reps, rate, sqrt(0.05 * 0.95 / reps), mean(p < 0.1)))
