# LFIRE on ARCH(1) in ELFI's setting: theta = (0.3, 0.7), T = 100, priors U(-1, 1) x U(0, 1),
# 17 summaries, 25 x 25 grid, 500 simulations per parameter value and 500 prior-predictive
# simulations; the exact posterior on the same grid (likelihood with e_0 integrated by
# Gauss-Hermite quadrature) and the distances between the two. Also: the Rust lasso against
# glmnet's cv.glmnet on one parameter value's problem (same folds and lambdas): time and
# agreement. Also: lambda.1se, log(variance) in place of the variance, and rejection ABC on the
# same summaries (what the summaries can tell).
# Run: R_LIBS=.Rlib Rscript bench/lfire.R [workers]   (from the package root)
suppressPackageStartupMessages(library(nce))
source("tests/testthat/helper-arch.R")
args <- commandArgs(trailingOnly = TRUE)
workers <- if (length(args)) as.integer(args[1]) else 1L
if (workers > 1L) future::plan(future::multisession, workers = workers)
options(nce.threads = 2L)

set.seed(20170530)
y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
pr <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
th <- theta_grid(pr, 25)
t_exact <- system.time(exact <- arch_exact_posterior(drop(y_obs), th))[["elapsed"]]

run <- function(penalty) {
  t <- system.time(fit <- lfire(y_obs, arch_simulate, arch_summaries, pr, theta = th, n_theta = 500,
                                n_marginal = 500, batch = TRUE, penalty = penalty))
  list(fit = fit, total = t[["elapsed"]], cpu = t[["user.self"]] + t[["sys.self"]])
}
set.seed(1)
lasso <- run("lasso")
ridge <- update(lasso$fit, penalty = "ridge")
lasso_1se <- update(lasso$fit, control = lfire_control(lambda = "1se"))
lasso_exact_cv <- update(lasso$fit, control = lfire_control(cv = "exact"))
# The same simulations with log(variance) in place of the variance: the variance of an ARCH
# series with t2 > 1/3 has no finite second moment, and a log ratio linear in it fits badly.
log_var <- function(x) {
  x$summaries[, "var"] <- log(x$summaries[, "var"])
  x
}
summ_logvar <- function(y) {
  s <- arch_summaries(y)
  s[, "var"] <- log(s[, "var"])
  s
}
lasso_logvar <- lfire(y_obs, arch_simulate, summ_logvar, pr, theta = th, batch = TRUE,
                      marginal = log_var(lasso$fit$marginal), simulations = log_var(lasso$fit$simulations))

# What the 17 summaries can tell: rejection ABC on them (standardised as LFIRE does), 10^6
# prior simulations, the 1000 nearest kept. Its tolerance widens it, so it bounds the width of
# the summary-based posterior from above; the exact posterior uses all of y and is narrower.
abc <- local({
  f <- lasso$fit
  so <- (f$observed_summaries - f$center) / f$scale
  kept <- do.call(rbind, lapply(1:20, function(i) {
    thp <- cbind(t1 = runif(5e4, -1, 1), t2 = runif(5e4, 0, 1))
    s <- sweep(sweep(arch_summaries(arch_simulate(thp, 5e4)), 2L, f$center), 2L, f$scale, "/")
    d <- sqrt(colSums((t(s) - so)^2))
    o <- order(d)[1:1000]
    cbind(thp[o, ], d = d[o])
  }))
  kept[order(kept[, "d"])[1:1000], 1:2]
})

row <- function(name, fit, total) {
  m <- coef(fit)
  s <- sqrt(diag(vcov(fit)))
  data.frame(method = name, total_s = round(total, 1), simulation_s = round(fit$time[["simulation"]], 1),
             fitting_s = round(fit$time[["fitting"]], 1), sim_cpu_s = round(fit$cpu_time[["simulation"]], 1),
             fit_cpu_s = round(fit$cpu_time[["fitting"]], 1), sym_kl = round(sym_kl(fit$posterior, exact), 3),
             mean_t1 = round(m[1], 3), mean_t2 = round(m[2], 3), sd_t1 = round(s[1], 3), sd_t2 = round(s[2], 3))
}
em <- colSums(th * exact)
es <- sqrt(colSums(th^2 * exact) - em^2)
am <- colMeans(abc)
as <- apply(abc, 2, sd)
tab <- rbind(
  data.frame(method = "exact", total_s = round(t_exact, 1), simulation_s = NA, fitting_s = NA, sim_cpu_s = NA,
             fit_cpu_s = NA, sym_kl = 0, mean_t1 = round(em[1], 3), mean_t2 = round(em[2], 3),
             sd_t1 = round(es[1], 3), sd_t2 = round(es[2], 3)),
  data.frame(method = "rejection ABC, same 17 summaries", total_s = NA, simulation_s = NA, fitting_s = NA,
             sim_cpu_s = NA, fit_cpu_s = NA, sym_kl = NA, mean_t1 = round(am[1], 3), mean_t2 = round(am[2], 3),
             sd_t1 = round(as[1], 3), sd_t2 = round(as[2], 3)),
  row("lfire lasso (one-step CV, lambda.min)", lasso$fit, lasso$total),
  row("lfire lasso (exact CV, lambda.min), same simulations", lasso_exact_cv, lasso_exact_cv$time[["fitting"]]),
  row("lfire lasso (CV, lambda.1se), same simulations", lasso_1se, lasso_1se$time[["fitting"]]),
  row("lfire lasso, log(var) summary, same simulations", lasso_logvar, lasso_logvar$time[["fitting"]]),
  row("lfire ridge (REML), same simulations", ridge, ridge$time[["fitting"]])
)
rownames(tab) <- NULL
cat(sprintf("ARCH(1), 25 x 25 grid, 500 + 500 simulations, %d future worker(s), 2 Rust threads\n", workers))
cat(sprintf("Load average at the end: %s; lasso run CPU time (all threads of this process) %.1f s\n",
            paste(readLines("/proc/loadavg", warn = FALSE), collapse = ""), lasso$cpu))
cat(sprintf("Projected wall time with 2 free cores: simulation CPU %.1f s (one R process) + fitting CPU %.1f s / 2\n",
            lasso$fit$cpu_time[["simulation"]], lasso$fit$cpu_time[["fitting"]]))
print(tab)
mode <- which.max(lasso$fit$posterior)
cat("Summaries selected at the posterior mode (lasso):", paste(summary(lasso$fit)$selected, collapse = ", "), "\n")

# The Rust lasso against glmnet on the problem at the grid point nearest the truth.
if (requireNamespace("glmnet", quietly = TRUE)) {
  g <- which.min((th[, 1] - 0.3)^2 + (th[, 2] - 0.7)^2)
  fit <- lasso$fit
  std <- function(m) sweep(sweep(m, 2L, fit$center), 2L, fit$scale, "/")
  x <- rbind(std(fit$simulations$summaries[fit$simulations$index == g, ]), std(fit$marginal$summaries))
  y <- rep(c(1, 0), c(500, 500))
  set.seed(3)
  foldid <- sample(rep(1:10, length.out = 1000))
  reps <- 20
  t_rust <- system.time(for (i in 1:reps) r <- nce:::nce_lasso_cv(x, y, foldid,
                                                                   list(nlambda = 100, lambda_min_ratio = 1e-4)))
  t_one <- system.time(for (i in 1:reps) r1 <- nce:::nce_lasso_cv(x, y, foldid, list(nlambda = 100,
                                                                        lambda_min_ratio = 1e-4, onestep = 1)))
  t_glm <- system.time(for (i in 1:reps) cg <- glmnet::cv.glmnet(x, y, family = "binomial", lambda = r$lambda,
                                                                  foldid = foldid, standardize = FALSE))
  # Coefficients against glmnet converged to 1e-14 (its default threshold stops early here).
  g14 <- glmnet::glmnet(x, y, family = "binomial", lambda = r$lambda, standardize = FALSE, thresh = 1e-14)
  k <- seq_len(min(length(g14$lambda), length(r$lambda)))
  b <- as.matrix(g14$beta)
  cat(sprintf(paste("One 10-fold CV lasso path (1000 rows, 17 summaries): Rust %.1f ms (one-step CV %.1f ms),",
                    "glmnet %.1f ms; max |coef difference| to glmnet(thresh = 1e-14) %.1e, lambda.min Rust %.4g (one-step %.4g) glmnet %.4g\n"),
              1000 * t_rust[["elapsed"]] / reps, 1000 * t_one[["elapsed"]] / reps, 1000 * t_glm[["elapsed"]] / reps,
              max(abs(b[, k] - r$beta[, k])), r$lambda[r$index_min], r1$lambda[r1$index_min], cg$lambda.min))
}
