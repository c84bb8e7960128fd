# design_eig() and design_optimise() on the death model against its exact EIG (issue #74):
# y ~ Binomial(50, 1 - exp(-b t)), b ~ N(1, 1) truncated to b > 0; exact EIG by quadrature
# (death_model_eig()), maximum 1.356 at t = 1.28.
#  curve:    design_eig() over a grid of t, GAM against the network classifier, at several budgets;
#            error of the plug-in against exact and coverage of estimate +- 1.96 se.
#  optimise: design_optimise() over seeds: chosen t against 1.28 (within 0.1?), whether the printed
#            interval for t holds 1.28, whether the printed EIG interval holds the exact EIG.
# Run: R_LIBS=.Rlib Rscript bench/design-death.R curve [seeds] [budgets] [classifiers]
#      R_LIBS=.Rlib Rscript bench/design-death.R optimise [seeds] [n] [extra design_optimise() arguments as R code]
suppressPackageStartupMessages(library(nce))
options(nce.threads = 1L)
args <- commandArgs(trailingOnly = TRUE)
part <- if (length(args) >= 1L) args[1] else "curve"
dm <- death_model()
t_opt <- 1.28
`%||%` <- function(a, b) if (is.null(a)) b else a
eig_max <- death_model_eig(t_opt)

if (part == "curve") {
  seeds <- if (length(args) >= 2L) as.integer(args[2]) else 3L
  budgets <- if (length(args) >= 3L) as.integer(strsplit(args[3], ",")[[1]]) else c(500L, 1000L, 2000L)
  classifiers <- if (length(args) >= 4L) strsplit(args[4], ",")[[1]] else c("gam", "mlp")
  times <- c(0.25, 0.5, 1, 1.28, 2, 3)
  rows <- NULL
  for (s in seq_len(seeds)) for (n in budgets) for (tt in times) for (cl in classifiers) {
    set.seed(100 * s + round(10 * tt) + n)
    tm <- system.time(e <- suppressMessages(design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = tt), n = n,
                                                       batch = TRUE, classifier = cl)))[["elapsed"]]
    est <- e$estimates
    rows <- rbind(rows, data.frame(seed = s, n = n, t = tt, classifier = cl, exact = death_model_eig(tt),
                                   plugin = est$estimate[1], se = est$std.error[1], mc = est$mc.error[1],
                                   df = est$df[1], nwj = est$estimate[2], infonce = est$estimate[4],
                                   infonce_se = est$std.error[4], infonce_df = est$df[4], time = tm))
    print(format(utils::tail(rows, 1), digits = 4), row.names = FALSE)
  }
  rows$err <- rows$plugin - rows$exact
  rows$err_nce <- rows$infonce - rows$exact
  rows$cover <- abs(rows$err) <= stats::qt(0.975, rows$df) * rows$se
  rows$cover_nce <- abs(rows$err_nce) <= stats::qt(0.975, rows$infonce_df) * rows$infonce_se
  agg <- aggregate(cbind(err, abs_err = abs(err), se, cover, err_nce, abs_err_nce = abs(err_nce), se_nce = infonce_se,
                         cover_nce, time) ~ classifier + n, rows, mean)
  cat(sprintf("curve: t = %s, %d seeds; mean over t and seeds\n", paste(times, collapse = ", "), seeds))
  print(format(agg, digits = 3), row.names = FALSE)
  for (v in c("err", "err_nce")) {
    by_t <- aggregate(rows[v], rows[c("classifier", "n", "t")], mean)
    cat(v, "by t:\n")
    print(stats::reshape(by_t, idvar = c("classifier", "n"), timevar = "t", direction = "wide"), digits = 2,
          row.names = FALSE)
  }
  saveRDS(rows, sprintf("/tmp/design-death-curve-%s.rds", paste(classifiers, collapse = "-")))
}

if (part == "optimise") {
  seeds <- if (length(args) >= 2L) eval(parse(text = args[2])) else 1:20
  if (length(seeds) == 1L) seeds <- seq_len(seeds)
  n <- if (length(args) >= 3L && args[3] != "default") as.integer(args[3]) else NULL
  extra <- if (length(args) >= 4L) eval(parse(text = sprintf("list(%s)", args[4]))) else list()
  keep <- list()
  out_file <- sprintf("/tmp/design-death-optimise-%s.rds", format(Sys.time(), "%H%M%S"))
  r <- do.call(rbind, lapply(seeds, function(s) {
    set.seed(s)
    a <- c(list(dm$simulator, dm$summaries, dm$prior, lower = dm$lower, upper = dm$upper, batch = TRUE), extra)
    if (!is.null(n)) a$n <- n
    tm <- system.time(o <- suppressMessages(do.call(design_optimise, a)))[["elapsed"]]
    th <- coef(o)[["t"]]
    ei <- o$eig_interval %||% (o$eig[["estimate"]] + c(-1.96, 1.96) * o$eig[["std.error"]])
    fin <- if (is.null(o$final)) c(NA, NA) else confint(o$final, "plugin")[1, ]
    ex <- death_model_eig(th)
    cat(sprintf("seed %d: t %.3f [%.3f, %.3f]  EIG %.3f [%.3f, %.3f] exact at t %.3f  %.1f s\n", s, th, o$band[1, 1],
                o$band[1, 2], o$eig[["estimate"]], ei[1], ei[2], ex, tm))
    keep[[as.character(s)]] <<- list(evaluations = o$evaluations, final = o$final$estimates, best = o$best,
                                      band = o$band, eig = o$eig, eig_interval = o$eig_interval)
    saveRDS(keep, out_file)
    data.frame(seed = s, t = th, lo = o$band[1, 1], hi = o$band[1, 2], eig = o$eig[["estimate"]], eig_lo = ei[1],
               eig_hi = ei[2], fin_lo = fin[1], fin_hi = fin[2], exact_at_t = ex, time = tm)
  }))
  k <- nrow(r)
  cat(sprintf(paste("optimise: %d seeds; chosen t within 0.1 of 1.28: %d, within 0.25: %d; max |t - 1.28| %.3f;",
                    "interval for t holds 1.28: %d (median width %.3f); EIG interval holds the exact EIG at the chosen t:",
                    "%d, holds the maximum 1.356: %d; final evaluation's 95%% interval holds the exact EIG at t: %d;",
                    "median %.1f s per call\n"),
              k, sum(abs(r$t - t_opt) <= 0.1), sum(abs(r$t - t_opt) <= 0.25), max(abs(r$t - t_opt)),
              sum(r$lo <= t_opt & t_opt <= r$hi), stats::median(r$hi - r$lo),
              sum(r$eig_lo <= r$exact_at_t & r$exact_at_t <= r$eig_hi), sum(r$eig_lo <= eig_max & eig_max <= r$eig_hi),
              sum(r$fin_lo <= r$exact_at_t & r$exact_at_t <= r$fin_hi, na.rm = TRUE), stats::median(r$time)))
}
