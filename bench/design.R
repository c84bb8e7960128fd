# Experimental design on the death model (Kleinegesse and Gutmann 2019): y ~ Binomial(50, 1 - exp(-b t)),
# b ~ N(1, 1) truncated to b > 0, t in [0.01, 4]. Reports
#  1. the estimated EIG curve (plug-in, NWJ bound; and the JSD bound against the exact JSD) against the
#     exact one (quadrature) on a grid of times, n simulations per time: bias, RMSE, coverage of +- 2 se;
#  2. design_optimise() over `reps` seeds: the chosen t against the exact argmax (1.28), the exact EIG
#     lost at the chosen t, whether the band covers the argmax, and elapsed and CPU time.
# Run: R_LIBS=.Rlib Rscript bench/design.R [reps] [n] [workers]   (from the package root)
suppressPackageStartupMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
reps <- if (length(args) >= 1L) as.integer(args[1]) else 5L
n <- if (length(args) >= 2L) as.integer(args[2]) else 1000L
workers <- if (length(args) >= 3L) as.integer(args[3]) else 1L
if (workers > 1L) future::plan(future::multisession, workers = workers)
dm <- death_model()
timed <- function(expr) {
  t <- system.time(v <- expr)
  list(value = v, elapsed = t[["elapsed"]], cpu = t[["user.self"]] + t[["sys.self"]])
}

cat(sprintf("Death model: n = %d simulations per design, %d repetitions, %d worker(s)\n\n", n, reps, workers))
t_grid <- seq(0.01, 4, by = 0.01)
exact <- death_model_eig(t_grid)
t_star <- t_grid[which.max(exact)]
cat(sprintf("Exact EIG: argmax t = %.2f, max %.4f nats\n\n", t_star, max(exact)))

# 1. The curve at fixed times.
times <- c(0.05, 0.25, 0.5, 1, 1.5, 2, 3, 4)
curve <- NULL
t_eig <- timed(for (r in seq_len(reps)) for (tt in times) {
  set.seed(1000 * r + round(100 * tt))
  e <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = tt), n = n, batch = TRUE)
  curve <- rbind(curve, data.frame(rep = r, t = tt, exact = death_model_eig(tt), jsd_exact = death_model_jsd(tt),
                                   plugin = coef(e)[["plugin"]], plugin_se = e$estimates$std.error[1],
                                   nwj = coef(e)[["nwj"]], nwj_se = e$estimates$std.error[2],
                                   jsd = coef(e)[["jsd"]], jsd_se = e$estimates$std.error[3]))
})
summ <- do.call(rbind, lapply(split(curve, curve$t), function(d) {
  data.frame(t = d$t[1], exact = d$exact[1], plugin_bias = mean(d$plugin - d$exact),
             plugin_rmse = sqrt(mean((d$plugin - d$exact)^2)), plugin_cover = mean(abs(d$plugin - d$exact) < 2 * d$plugin_se),
             nwj_median_err = stats::median(d$nwj - d$exact), jsd_exact = d$jsd_exact[1],
             jsd_bias = mean(d$jsd - d$jsd_exact), jsd_rmse = sqrt(mean((d$jsd - d$jsd_exact)^2)))
}))
cat("1. EIG estimates at fixed times against the exact values (nats)\n")
print(format(summ, digits = 3), row.names = FALSE)
cat(sprintf("Over all times: plug-in RMSE %.3f, |error| max %.3f; JSD-bound RMSE %.4f; NWJ above the truth + 2 se in %d of %d\n",
            sqrt(mean((curve$plugin - curve$exact)^2)), max(abs(curve$plugin - curve$exact)),
            sqrt(mean((curve$jsd - curve$jsd_exact)^2)), sum(curve$nwj > curve$exact + 2 * curve$nwj_se), nrow(curve)))
cat(sprintf("Time: %.1f s elapsed, %.1f s CPU for %d design_eig() calls (%.2f s CPU each)\n\n", t_eig$elapsed, t_eig$cpu,
            nrow(curve), t_eig$cpu / nrow(curve)))

# 2. The chosen design.
opt_rows <- NULL
for (r in seq_len(reps)) {
  set.seed(r)
  o <- timed(design_optimise(dm$simulator, dm$summaries, dm$prior, lower = dm$lower, upper = dm$upper, n = n,
                             batch = TRUE, n_initial = 8, n_refine = 4, rounds = 1))
  t_hat <- coef(o$value)[["t"]]
  opt_rows <- rbind(opt_rows, data.frame(rep = r, t_hat = t_hat, band_low = o$value$band[1, 1], band_high = o$value$band[1, 2],
                                         covers = o$value$band[1, 1] <= t_star && t_star <= o$value$band[1, 2],
                                         eig_lost = max(exact) - death_model_eig(t_hat),
                                         eig_smooth_err = o$value$eig[["estimate"]] - death_model_eig(t_hat),
                                         elapsed = o$elapsed, cpu = o$cpu))
}
cat("2. design_optimise(): 8 initial designs + 4 refined, one final evaluation\n")
print(format(opt_rows, digits = 3), row.names = FALSE)
cat(sprintf("|t_hat - %.2f|: median %.2f, max %.2f; exact EIG lost: median %.4f, max %.4f nats; band covers the argmax in %d of %d\n",
            t_star, stats::median(abs(opt_rows$t_hat - t_star)), max(abs(opt_rows$t_hat - t_star)),
            stats::median(opt_rows$eig_lost), max(opt_rows$eig_lost), sum(opt_rows$covers), reps))
cat(sprintf("Time per optimisation: %.1f s elapsed, %.1f s CPU (median)\n", stats::median(opt_rows$elapsed),
            stats::median(opt_rows$cpu)))
