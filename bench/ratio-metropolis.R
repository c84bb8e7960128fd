# Metropolis on an amortised ratio posterior: the step loop in Rust (tabulated log ratios,
# ratio_posterior(engine = "rust")) against the loop in R (one predict.gam() call per step,
# engine = "r"), on the same classifier and the same starting points, and both against the
# exact posterior. Model: x = 20 draws of N(mu, exp(lsig)^2), summaries mean and log variance
# (sufficient), priors U(-2, 2) x U(-1, 1), the default formula (smooths of each parameter and
# summary and the 4 parameter-summary ti() interactions). The exact posterior is computed on a
# 400 x 400 grid. Reports the time of each engine (elapsed and CPU, measured in one run, so their
# ratio is what compares), the interpolation error of the tables, means and sds, and checks that
# the Rust draws do not depend on the number of threads. The R loop's means are compared with a
# long Rust run (2 million draws) in units of the Monte Carlo sd of one run, measured as the
# spread of 12 Rust runs with other seeds (the chains' ESS overestimates it a little).
# Run: R_LIBS=.Rlib Rscript bench/ratio-metropolis.R [n_sim]   (from the package root)
suppressPackageStartupMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
n_sim <- if (length(args)) as.integer(args[1]) else 3000L
options(nce.threads = 2L)

sim <- function(theta, n) matrix(stats::rnorm(n * 20, theta[, "mu"], exp(theta[, "lsig"])), n, 20)
summ <- function(x) cbind(m = rowMeans(x), lv = log(apply(x, 1, stats::var)))
pr <- prior_uniform(mu = c(-2, 2), lsig = c(-1, 1))
set.seed(1)
t_fit <- system.time(r <- ratio_amortised(sim, summ, pr, n = n_sim, batch = TRUE))[["elapsed"]]
print(r)
set.seed(2)
x_obs <- sim(cbind(mu = 0.5, lsig = 0.3), 1)

# Exact posterior on a grid (flat prior on the box).
g_mu <- seq(-2, 2, length.out = 400)
g_ls <- seq(-1, 1, length.out = 400)
ll <- outer(g_mu, g_ls, Vectorize(function(m, l) sum(stats::dnorm(x_obs, m, exp(l), log = TRUE))))
p <- exp(ll - max(ll))
p <- p / sum(p)
ex_mean <- c(mu = sum(rowSums(p) * g_mu), lsig = sum(colSums(p) * g_ls))
ex_sd <- sqrt(c(sum(rowSums(p) * g_mu^2), sum(colSums(p) * g_ls^2)) - ex_mean^2)

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}
run <- function(engine, seed = 3) {
  set.seed(seed)
  c0 <- cpu()
  t <- system.time(post <- ratio_posterior(r, x_obs, n_draws = 50000, method = "metropolis", n_chains = 100,
                                           burnin = 500, engine = engine))[["elapsed"]]
  list(post = post, elapsed = t, cpu = cpu() - c0)
}
rust <- run("rust")
rloop <- run("r")
options(nce.threads = 1L)
rust1 <- run("rust")
options(nce.threads = 2L)

row <- function(name, x) {
  p <- x$post
  data.frame(engine = name, elapsed_s = round(x$elapsed, 2), cpu_s = round(x$cpu, 2),
             mean_mu = round(coef(p)[[1]], 4), mean_lsig = round(coef(p)[[2]], 4),
             sd_mu = round(sqrt(vcov(p)[1, 1]), 4), sd_lsig = round(sqrt(vcov(p)[2, 2]), 4),
             ess_mu = round(p$ess[[1]]), acceptance = round(p$acceptance, 3))
}
tab <- rbind(row("rust (tables, 2 threads)", rust), row("R loop (predict.gam per step)", rloop),
             data.frame(engine = "exact (grid)", elapsed_s = NA, cpu_s = NA, mean_mu = round(ex_mean[[1]], 4),
                        mean_lsig = round(ex_mean[[2]], 4), sd_mu = round(ex_sd[[1]], 4),
                        sd_lsig = round(ex_sd[[2]], 4), ess_mu = NA, acceptance = NA))
cat(sprintf("ratio_amortised: %d joint pairs, %.1f s; load average %s\n", r$n, t_fit,
            paste(readLines("/proc/loadavg", warn = FALSE), collapse = "")))
cat("ratio_posterior(method = \"metropolis\"), 100 chains x 500 kept steps after 500 burn-in:\n")
print(tab)
cat(sprintf("Speed-up of the Rust loop: %.0fx elapsed, %.0fx CPU (tabulation included)\n",
            rloop$elapsed / rust$elapsed, rloop$cpu / rust$cpu))
cat(sprintf("Tables: %d points per parameter; max |interpolated - predict.gam| at 200 draws %.2e\n",
            rust$post$n_grid, rust$post$table_error))
reps <- t(vapply(1:12, function(k) coef(run("rust", 100 + k)$post), numeric(2)))
set.seed(4)
long <- ratio_posterior(r, x_obs, n_draws = 2e6, method = "metropolis", n_chains = 100, burnin = 500)
mc_sd <- apply(reps, 2L, stats::sd)
cat("Monte Carlo sd of one run's means (12 Rust runs):", paste(signif(mc_sd, 2), collapse = ", "),
    "; means of a 2e6-draw Rust run:", paste(round(coef(long), 4), collapse = ", "), "\n")
# Three more R-loop runs (other seeds): their means against the long Rust run.
r_means <- rbind(coef(rloop$post), t(vapply(1:3, function(k) coef(run("r", 200 + k)$post), numeric(2))))
z <- sweep(sweep(r_means, 2L, coef(long)), 2L, mc_sd, "/")
cat("R-loop runs - long Rust run, in Monte Carlo sds (rows: 4 seeds; columns: mu, lsig):\n")
print(round(z, 2))
cat("Mean over the 4 R-loop runs - long Rust run, in sds of a 4-run mean:",
    paste(round(colMeans(z) * 2, 2), collapse = ", "), "\n")
cat("Rust run - long Rust run, in Monte Carlo sds:", paste(round((coef(rust$post) - coef(long)) / mc_sd, 2),
                                                         collapse = ", "), "\n")
cat("Rust draws with 1 and 2 threads identical:", identical(rust$post$draws, rust1$post$draws), "\n")
