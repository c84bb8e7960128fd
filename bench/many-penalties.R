# Many smoothing parameters: the classifier of the 5-parameter Gaussian (bench/gaussian5-model.R) with
# the three-way ti() terms of bench/gaussian5.R's formula B (19 terms, 32 penalties, 353
# coefficients), fitted by ratio_amortised() and by mgcv::gam(method = "REML") on the same rows and
# formula, in one R process. Prints the times, their ratio, both REML scores and the largest
# difference in the linear predictor.
# Run: R_LIBS=.Rlib Rscript bench/many-penalties.R [pairs]   (from the package root; default 2000)
suppressPackageStartupMessages(library(nce))
here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "gaussian5-model.R"))
args <- commandArgs(trailingOnly = TRUE)
n_sim <- if (length(args)) as.integer(args[1]) else 2000L
options(nce.threads = 2L)
form <- ~ s(t1) + s(t2) + s(t3) + s(t4) + s(t5) + s(m1) + s(m2) + s(lv1) + s(lv2) + s(z) +
  ti(t1, m1) + ti(t2, m2) + ti(t3, lv1) + ti(t4, lv2) + ti(t5, z) +
  ti(t1, m1, t3, k = 5) + ti(t2, m2, t4, k = 5) + ti(t1, m1, t5, k = 4) + ti(t2, m2, t5, k = 4)
pr <- prior_uniform(t1 = c(-3, 3), t2 = c(-3, 3), t3 = c(-3, 3), t4 = c(-3, 3), t5 = c(-3, 3))
set.seed(43)
t_nce <- system.time(r <- ratio_amortised(g5_simulate, g5_summaries, pr, n = n_sim, batch = TRUE,
                                          formula = form))[["elapsed"]]
fit <- r$gam
mf <- fit$model
gform <- stats::update(form, y ~ . + offset(`(offset)`))
t_gam <- system.time(g <- mgcv::gam(gform, family = stats::binomial, data = mf, method = "REML"))[["elapsed"]]
cat(sprintf("%d pairs (%d rows), %d coefficients, %d smoothing parameters, %s; %d threads\n", n_sim, nrow(mf),
            length(fit$coefficients), length(fit$sp), format(Sys.time(), tz = "UTC", usetz = TRUE),
            getOption("nce.threads")))
cat(sprintf("%-12s %9s %8s %16s %9s %10s\n", "", "time (s)", "x nce", "REML score", "outer", "total edf"))
cat(sprintf("%-12s %9.2f %8.1f %16.6f %9d %10.3f\n", "nce", t_nce, 1, fit$gcv.ubre, fit$outer_iterations,
            sum(fit$edf)))
cat(sprintf("%-12s %9.2f %8.1f %16.6f %9d %10.3f\n", "gam REML", t_gam, t_gam / t_nce, g$gcv.ubre,
            g$outer.info$iter, sum(g$edf)))
cat(sprintf("max |eta - eta_gam| = %.2e; converged: nce %s, gam %s\n",
            max(abs(fit$linear.predictors - g$linear.predictors)), fit$converged, g$converged))
