# Coverage of marglik_nce()'s intervals alone on the posterior of bench/mcmc-coverage.R (the same data and
# Metropolis sampler), with another seed for the chains, chains started from the posterior (mean and sd by
# quadrature), and 400 replications by default (Monte Carlo s.e. of a 95% coverage 1.1 points).
#   STEP=0.15 REPS=400 SEED=5 R_LIBS=$PWD/.Rlib Rscript bench/mcmc-coverage-marglik.R   # lag-1 autocorrelation 0.91
#   STEP=0.06 ...                                                                        # 0.98
library(nce)
options(nce.threads = 1L)
here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "mcmc-model.R"))
exact <- log_evidence(loglik_logit)
g <- seq(-1, 4, by = 1e-4)
lp <- loglik_logit(g) + dnorm(g, 0, prior_sd, log = TRUE)
mx <- max(lp)
cat(sprintf("exact by integrate %.6f, by fine grid %.6f\n", exact, mx + log(sum(exp(lp - mx)) * 1e-4)))
w <- exp(lp - mx); w <- w / sum(w); mu <- sum(w * g); sdp <- sqrt(sum(w * (g - mu)^2))
cat(sprintf("posterior mean %.4f sd %.4f skew %.3f kurt %.3f\n", mu, sdp, sum(w * (g - mu)^3) / sdp^3,
            sum(w * (g - mu)^4) / sdp^4))
set.seed(as.integer(Sys.getenv("SEED", "5")))
step <- as.numeric(Sys.getenv("STEP", "0.15")); reps <- as.integer(Sys.getenv("REPS", "400"))
d <- metropolis(reps, 10000, loglik_logit, rnorm(reps, mu, sdp), step)
lp1 <- function(th) loglik_logit(th[, 1]) + dnorm(th[, 1], 0, prior_sd, log = TRUE)
res <- t(sapply(seq_len(reps), function(r) {
  ml <- marglik_nce(d[, r], lp1)
  c(err = ml$logml - exact, se = ml$se, se_iid = ml$se_iid, ess = ml$ess)
}))
z <- res[, "err"] / res[, "se"]
cat(sprintf(paste("step %.2f reps %d: rmse %.5f rms se %.5f cv se %.2f coverage %.3f (MC s.e. %.3f) mean ess %.1f",
                  "sd(z) %.2f bias %.5f\n"), step, reps, sqrt(mean(res[, "err"]^2)), sqrt(mean(res[, "se"]^2)),
            sd(res[, "se"]) / mean(res[, "se"]), mean(abs(z) < 1.96), sqrt(0.95 * 0.05 / reps), mean(res[, "ess"]),
            sd(z), mean(res[, "err"])))
