# Calibration of neural ratio posteriors (issue 74's target): expected coverage of the 50%, 80% and
# 95% highest-density regions over simulated data sets, within +/-0.03 of nominal on two moons
# (sbibm's task, bench/sbibm-tasks.R) and ARCH(1) from the raw 100-point series
# (embed_series(window = 3), tests/testthat/helper-arch.R); the balanced loss (loss = "bnre")
# never below nominal. For each task and loss: one ratio_amortised() fit at its defaults (the
# network ensemble) on `n_sims` simulations, then ratio_coverage() on `n_pairs` fresh pairs from
# the prior predictive, each pair's posterior by importance sampling over prior draws where its
# effective sample is >= 200, else by the SMC sampler (500 particles, 2,000 draws).
# Coverage is printed with its Monte Carlo standard error sqrt(c (1 - c) / n_pairs) (0.035 at
# 50%, 0.028 at 80%, 0.015 at 95% for 200 pairs: +/-0.03 is within the noise of 200 pairs at the
# lower levels).
# Run from the repository root:
#   Rscript bench/calibration.R [tasks] [losses] [n_pairs] [n_sims_two_moons] [n_sims_arch] [n_networks]
# defaults: two_moons,arch nrec,bnre 200 10000 20000 (the ratio_amortised() default ensemble).
suppressMessages(library(nce))
source("bench/sbibm-tasks.R")
source("tests/testthat/helper-arch.R")
args <- commandArgs(TRUE)
arg <- function(k, default) if (length(args) >= k && nzchar(args[k])) args[k] else default
tasks <- strsplit(arg(1, "two_moons,arch"), ",")[[1]]
losses <- strsplit(arg(2, "nrec,bnre"), ",")[[1]]
n_pairs <- as.integer(arg(3, "200"))
n_sims <- c(two_moons = as.integer(arg(4, "10000")), arch = as.integer(arg(5, "20000")))
n_networks <- if (length(args) >= 6L) as.integer(args[6]) else NULL
options(nce.threads = as.integer(Sys.getenv("NCE_THREADS", "2")))
cat(sprintf("nce %s, %d thread(s), %s; shared machine (other jobs running)\n", utils::packageVersion("nce"),
            getOption("nce.threads"), format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")))

fit_task <- function(task, loss) {
  if (task == "two_moons") {
    tk <- sbibm_task("two_moons")
    ratio_amortised(tk$simulator, NULL, tk$prior, n = n_sims[["two_moons"]], batch = TRUE, loss = loss,
                    n_networks = n_networks)
  } else {
    ratio_amortised(arch_simulate, NULL, prior_uniform(t1 = c(-1, 1), t2 = c(0, 1)), n = n_sims[["arch"]],
                    batch = TRUE, embedding = embed_series(window = 3), loss = loss, n_networks = n_networks)
  }
}

rows <- list()
for (task in tasks) {
  for (loss in losses) {
    set.seed(74)
    t_fit <- system.time(fit <- fit_task(task, loss))[["elapsed"]]
    set.seed(75)
    t_cov <- system.time(cv <- ratio_coverage(fit, n = n_pairs))[["elapsed"]]
    smc <- mean(attr(cv, "sampler") == "smc")
    cat(sprintf("%s, loss %s: %d simulations, fit %.0f s; %d pairs (%.0f%% by SMC, median ESS %.0f), %.0f s\n",
                task, loss, n_sims[[task]], t_fit, length(attr(cv, "credible_levels")), 100 * smc,
                stats::median(attr(cv, "ess")), t_cov))
    print(format(as.data.frame(cv), digits = 3), row.names = FALSE)
    rows[[length(rows) + 1L]] <- data.frame(task = task, loss = loss, level = cv$level, coverage = cv$coverage,
                                            mc_error = cv$mc.error, gap = cv$coverage - cv$level,
                                            within_0.03 = abs(cv$coverage - cv$level) <= 0.03,
                                            smc_share = smc, fit_s = t_fit, coverage_s = t_cov)
  }
}
tab <- do.call(rbind, rows)
cat("\nSummary (gap = coverage - nominal; the target: |gap| <= 0.03, bnre's gap >= 0)\n")
print(format(tab, digits = 3), row.names = FALSE)
