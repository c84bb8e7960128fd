# How design_eig() and design_optimise() defaults were chosen (issue #33), on the death model
# (y ~ Binomial(50, 1 - exp(-b t)), b ~ N(1, 1) truncated to b > 0) against its exact EIG by
# quadrature:
#  1. the EIG curve at t = 0.25, 0.5, 1, 1.28, 2, 3, 3.5: plug-in and NWJ against exact, for the
#     old default (single half split, s(k = 5) + ti(k = 4)), te(b, dead, k = 8) and the new default
#     (5-fold cross-fitting, s(k = 8) + ti(k = 6)); each estimate within max(2 se, 0.05)?
#  2. coverage of estimate +- 1.96 se over `reps_cov` seeds at one t (and of the Monte Carlo se alone);
#  3. design_optimise() at its defaults over `reps_opt` seeds: the chosen t against 1.28.
# Run: R_LIBS=.Rlib Rscript bench/design-defaults.R [part: curve|coverage|optimise] [seeds] [t]
suppressPackageStartupMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
part <- if (length(args) >= 1L) args[1] else "curve"
dm <- death_model()
old <- ~ s(b, k = 5) + s(dead, k = 5) + ti(b, dead, k = 4)

if (part == "curve") {
  seeds <- if (length(args) >= 2L) as.integer(args[2]) else 3L
  times <- c(0.25, 0.5, 1, 1.28, 2, 3, 3.5)
  variants <- list(old = list(formula = old, folds = 1L), te8 = list(formula = ~ te(b, dead, k = 8)), default = list())
  rows <- NULL
  for (s in seq_len(seeds)) for (tt in times) for (v in names(variants)) {
    set.seed(100 * s + round(10 * tt))
    tm <- system.time(e <- do.call(design_eig, c(list(dm$simulator, dm$summaries, dm$prior, design = c(t = tt), n = 2000,
                                                      batch = TRUE), variants[[v]])))[["elapsed"]]
    est <- e$estimates
    rows <- rbind(rows, data.frame(seed = s, t = tt, variant = v, exact = death_model_eig(tt), plugin = est$estimate[1],
                                   se = est$std.error[1], mc = est$mc.error[1], nwj = est$estimate[2], time = tm))
  }
  rows$within <- abs(rows$plugin - rows$exact) <= pmax(2 * rows$se, 0.05)
  agg <- aggregate(cbind(plugin_err = plugin - rows$exact, nwj_err = nwj - rows$exact, se, mc, within, time) ~ variant + t,
                   rows, mean)
  cat(sprintf("1. EIG at fixed t, n = 2000, %d seeds: mean errors (nats), mean se, share within max(2 se, 0.05)\n", seeds))
  print(format(agg[order(agg$variant, agg$t), ], digits = 3), row.names = FALSE)
  print(aggregate(cbind(abs_plugin = abs(plugin - exact), abs_nwj = abs(nwj - exact), within, time) ~ variant, rows, mean),
        digits = 3)
}

if (part == "coverage") {
  seeds <- if (length(args) >= 2L) as.integer(args[2]) else 50L
  tt <- if (length(args) >= 3L) as.numeric(args[3]) else 1.28
  ex <- death_model_eig(tt)
  r <- t(vapply(seq_len(seeds), function(s) {
    set.seed(7000 + s)
    e <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = tt), n = 2000, batch = TRUE)
    c(e$estimates$estimate[1], e$estimates$std.error[1], e$estimates$mc.error[1])
  }, numeric(3)))
  cat(sprintf(paste("2. t = %g, %d seeds, defaults: exact %.4f, bias %+.4f, sd %.4f, RMSE %.4f; se mean %.4f median %.4f;",
                    "coverage of +- 1.96 se %.2f (Monte Carlo se alone %.2f)\n"),
              tt, seeds, ex, mean(r[, 1]) - ex, sd(r[, 1]), sqrt(mean((r[, 1] - ex)^2)), mean(r[, 2]), stats::median(r[, 2]),
              mean(abs(r[, 1] - ex) <= 1.96 * r[, 2]), mean(abs(r[, 1] - ex) <= 1.96 * r[, 3])))
}

if (part == "optimise") {
  seeds <- if (length(args) >= 2L) as.integer(args[2]) else 20L
  r <- t(vapply(seq_len(seeds), function(s) {
    set.seed(s)
    tm <- system.time(o <- design_optimise(dm$simulator, dm$summaries, dm$prior, lower = dm$lower, upper = dm$upper,
                                           batch = TRUE))[["elapsed"]]
    c(coef(o)[["t"]], tm)
  }, numeric(2)))
  cat(sprintf("3. design_optimise() defaults, %d seeds: chosen t %s\n   within 0.25 of 1.28: %d of %d; max |t - 1.28| %.3f; median %.1f s each\n",
              seeds, paste(format(r[, 1], digits = 3), collapse = " "), sum(abs(r[, 1] - 1.28) <= 0.25), seeds,
              max(abs(r[, 1] - 1.28)), stats::median(r[, 2])))
}
