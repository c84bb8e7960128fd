# LFIRE on ARCH(1) in ELFI's setting: theta = (0.3, 0.7), T = 100, priors U(-1, 1) x U(0, 1),
# 17 summaries, 25 x 25 grid, 500 simulations per parameter value and 500 prior-predictive
# simulations; the exact posterior on the same grid (likelihood with e_0 integrated by
# Gauss-Hermite quadrature) and the distances between the two. Also: the Rust lasso against
# glmnet's cv.glmnet on one parameter value's problem (same folds and lambdas): time and
# agreement. Run: R_LIBS=.Rlib Rscript bench/lfire.R [workers]   (from the package root)
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

row <- function(name, fit, total) {
  m <- coef(fit)
  s <- sqrt(diag(vcov(fit)))
  data.frame(method = name, total_s = round(total, 1), simulation_s = round(fit$time[["simulation"]], 1),
             fitting_s = round(fit$time[["fitting"]], 1), sym_kl = round(sym_kl(fit$posterior, exact), 3),
             mean_t1 = round(m[1], 3), mean_t2 = round(m[2], 3), sd_t1 = round(s[1], 3), sd_t2 = round(s[2], 3))
}
em <- colSums(th * exact)
es <- sqrt(colSums(th^2 * exact) - em^2)
tab <- rbind(
  data.frame(method = "exact", total_s = round(t_exact, 1), simulation_s = NA, fitting_s = NA, sym_kl = 0,
             mean_t1 = round(em[1], 3), mean_t2 = round(em[2], 3), sd_t1 = round(es[1], 3), sd_t2 = round(es[2], 3)),
  row("lfire lasso (CV)", lasso$fit, lasso$total),
  row("lfire ridge (REML), same simulations", ridge, ridge$time[["fitting"]])
)
rownames(tab) <- NULL
cat(sprintf("ARCH(1), 25 x 25 grid, 500 + 500 simulations, %d future worker(s), 2 Rust threads\n", workers))
cat(sprintf("Load average at the end: %s; lasso run CPU time (all threads of this process) %.1f s\n",
            paste(readLines("/proc/loadavg", warn = FALSE), collapse = ""), lasso$cpu))
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
  t_glm <- system.time(for (i in 1:reps) cg <- glmnet::cv.glmnet(x, y, family = "binomial", lambda = r$lambda,
                                                                  foldid = foldid, standardize = FALSE))
  k <- seq_len(min(length(cg$lambda), length(r$lambda)))
  b <- as.matrix(cg$glmnet.fit$beta)
  cat(sprintf(paste("One 10-fold CV lasso path (1000 rows, 17 summaries): Rust %.1f ms, glmnet %.1f ms;",
                    "max |coef difference| %.1e, lambda.min Rust %.4g glmnet %.4g\n"),
              1000 * t_rust[["elapsed"]] / reps, 1000 * t_glm[["elapsed"]] / reps,
              max(abs(b[, k] - r$beta[, k])), r$lambda[r$index_min], cg$lambda.min))
}
