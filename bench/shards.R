# Pooled LATKES fit with the row-level model matrix in row shards (tracker issue 18, "beyond one
# machine"): the bench/scale.R problem at S subjects (default 14: rlatkes(2000, ..., n_subjects =
# S, n_trials = 20), ratio 20, kernel s(radius) + s(dist) + s(angle, cc), intercept te(x_prev,
# y_prev)), fitted (1) in this process, (2) with shards = 1 under the sequential plan (the
# shards' plumbing without other processes; counts the shard calls) and (3) with shards = 2 on
# plan(multisession, workers = 2). Wall and CPU seconds (this process; the workers' CPU
# separately), the ratios to (1) within this run, and the largest difference in the linear
# predictor (0: the fits are bit-identical).
#   Rscript bench/shards.R            # S = 14
#   NCE_SHARDS_S=4 Rscript bench/shards.R
#   NCE_SHARDS_INTERCEPT=transition Rscript bench/shards.R   # one free intercept per transition
#   NCE_SHARDS_S=560 NCE_SHARDS_ONLY=1 NCE_MAX_MEMORY=40e9 Rscript bench/shards.R   # the sharded fit alone
suppressPackageStartupMessages(library(nce))
n_subjects <- as.integer(Sys.getenv("NCE_SHARDS_S", "14"))
window <- c(0, 1024, 0, 768)
truth <- list(radius = function(r) -r / 200, dist = function(d) -d / 120, angle = function(a) 0.4 * cos(4 * a))
kernel <- ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 16)
intercept <- if (identical(Sys.getenv("NCE_SHARDS_INTERCEPT"), "transition")) "transition" else ~ te(x_prev, y_prev, k = 5)
set.seed(n_subjects)
d <- rlatkes(2000, truth, window = window, n_subjects = n_subjects, n_trials = 20)
d$sequence <- interaction(d$subject, d$trial, drop = TRUE, lex.order = TRUE)

fit <- function(shards = NULL) {
  set.seed(1)
  latkes(d, group = "sequence", window = window, ratio = 20, kernel = kernel, intercept = intercept, shards = shards)
}
cpu <- function(st) sum(st[c("user.self", "sys.self")])
# CPU seconds of the multisession workers (each of the two futures lands on its own worker).
worker_cpu <- function() {
  sum(unlist(future.apply::future_lapply(1:2, function(i) sum(proc.time()[c("user.self", "sys.self")]))))
}

cat(sprintf("load average at start: %s\n", paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))
# Peak resident memory (MB) of this process, and of each multisession worker.
peak_mb <- function() as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmHWM", readLines("/proc/self/status"), value = TRUE))) / 1024
if (nzchar(Sys.getenv("NCE_SHARDS_ONLY"))) {
  # Only the sharded fit on 2 workers (for S = 560, where the in-process fit is bench/scale.R's
  # exact engine, in its own process).
  if (nzchar(Sys.getenv("NCE_MAX_MEMORY"))) options(nce.max_memory = as.numeric(Sys.getenv("NCE_MAX_MEMORY")))
  future::plan(future::multisession, workers = 2)
  w0 <- worker_cpu()
  st2 <- system.time(f2 <- fit(2))
  w1 <- worker_cpu()
  wpeak <- unlist(future.apply::future_lapply(1:2, function(i) peak_mb()))
  future::plan(future::sequential)
  cat(sprintf(paste("S = %d, %s rows, 2 shards on 2 multisession workers: wall %.1f s, CPU %.1f s here and %.1f s in the",
                    "workers; peak RSS %.0f MB here, %s MB in the workers; total edf %.2f, converged %s\n"),
              n_subjects, format(nrow(f2$nce_frame), big.mark = ","), st2[["elapsed"]], cpu(st2), w1 - w0, peak_mb(),
              paste(sprintf("%.0f", wpeak), collapse = " and "), sum(f2$edf), f2$converged))
  quit(save = "no")
}
st0 <- system.time(f0 <- fit())
n <- nrow(f0$nce_frame)
pa <- sum(vapply(f0$row_setup$smooth, function(s) s$last.para - s$first.para + 1, 0)) + !is.character(intercept)
cat(sprintf("intercept: %s\n", if (is.character(intercept)) intercept else deparse(intercept)))
cat(sprintf("S = %d: %s rows, %d coefficients (%d row-level: A is %.0f MB), %d outer / %d inner iterations\n",
            n_subjects, format(n, big.mark = ","), length(coef(f0)), pa, 8 * n * pa / 2^20,
            f0$outer_iterations, f0$iter))

# (2) In-process shards: count the calls the engine makes to the shards.
ops <- new.env()
ops$n <- character()
invisible(suppressMessages(trace("shard_job", quote(ops$n <- c(ops$n, job$task$op)), print = FALSE, where = asNamespace("nce"))))
future::plan(future::sequential)
st1 <- system.time(f1 <- fit(1))
suppressMessages(untrace("shard_job", where = asNamespace("nce")))
calls <- table(ops$n)

# (3) Two background workers, two shards.
future::plan(future::multisession, workers = 2)
w0 <- worker_cpu()
st2 <- system.time(f2 <- fit(2))
w1 <- worker_cpu()
future::plan(future::sequential)

same <- function(f) {
  identical(f$coefficients, f0$coefficients) && identical(f$Vp, f0$Vp) && identical(f$Vs, f0$Vs) &&
    identical(f$transition_intercepts, f0$transition_intercepts)
}
cat(sprintf("calls to the shards per fit: %d (%s)\n", sum(calls),
            paste(sprintf("%s %d", names(calls), calls), collapse = ", ")))
cat(sprintf("%-34s %8s %8s %12s %10s %14s %10s\n", "", "wall(s)", "cpu(s)", "workers cpu", "wall ratio",
            "max|eta diff|", "identical"))
row <- function(label, st, wcpu, f) {
  cat(sprintf("%-34s %8.2f %8.2f %12s %10.2f %14.3g %10s\n", label, st[["elapsed"]], cpu(st),
              if (is.na(wcpu)) "-" else sprintf("%.2f", wcpu), st[["elapsed"]] / st0[["elapsed"]],
              max(abs(f$linear.predictors - f0$linear.predictors)), same(f)))
}
row("in process", st0, NA, f0)
row("1 shard, sequential plan", st1, NA, f1)
row("2 shards, multisession (2 workers)", st2, w1 - w0, f2)
cat(sprintf("extra wall time per shard call: sequential %.3f s, multisession %.3f s\n",
            (st1[["elapsed"]] - st0[["elapsed"]]) / sum(calls), (st2[["elapsed"]] - st0[["elapsed"]]) / sum(calls)))
