# make bench-scale: one pooled LATKES fit over S subjects of 2,000 fixations (tracker issue 18).
# Data: rlatkes(2000, ..., n_subjects = S, n_trials = 20), each (subject, trial) one sequence;
# latkes() at ratio 20 with kernel s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc",
# k = 16) and intercept te(x_prev, y_prev, k = 5), exact and with discrete = TRUE; then
# mgcv::bam(method = "fREML", discrete = TRUE, nthreads = 2) on model.frame() of the exact fit with
# the same terms. Each engine runs in its own R process under /usr/bin/time -v (peak RSS = its
# "Maximum resident set size"); the time is the fit's elapsed time inside that process (set-up
# included, data simulation excluded). Ratios are within one run (the machine is shared).
#   Rscript bench/scale.R                    # S = 14 and 56 (NCE_SCALE_S="14,56")
#   NCE_SCALE_S=560 NCE_SCALE_ENGINES=discrete NCE_MAX_MEMORY=40e9 Rscript bench/scale.R
#     (NCE_MAX_MEMORY sets options(nce.max_memory): the up-front size check of the reference rows
#     assumes four copies of every row: it asks 28 GB for S = 560, whose discrete fit peaked at 10.4 GB)
#   Rscript bench/scale.R --one <engine> <S> <dir>   (one worker; engines: exact, discrete, bam)
#   Rscript bench/scale.R --session [S]      (the three fits one after another in one R process)
args <- commandArgs(trailingOnly = TRUE)
window <- c(0, 1024, 0, 768)
truth <- list(radius = function(r) -r / 200, dist = function(d) -d / 120, angle = function(a) 0.4 * cos(4 * a))
kernel <- ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 16)
intercept <- ~ te(x_prev, y_prev, k = 5)
bam_form <- .label ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 16) +
  te(x_prev, y_prev, k = 5) + offset(.offset)

simulate_scale <- function(n_subjects) {
  set.seed(n_subjects)
  d <- nce::rlatkes(2000, truth, window = window, n_subjects = n_subjects, n_trials = 20)
  d$sequence <- interaction(d$subject, d$trial, drop = TRUE, lex.order = TRUE)
  d
}

# The fits every mode times: latkes() exact or discretised on the simulated data, and bam on the
# exact fit's model frame.
fit_latkes <- function(d, engine) {
  extra <- if (engine == "discrete") list(discrete = TRUE) else list()
  do.call(nce::latkes, c(list(d, group = "sequence", window = window, ratio = 20, kernel = kernel,
                              intercept = intercept), extra))
}
fit_bam <- function(mf) {
  mgcv::bam(bam_form, family = binomial, data = mf, method = "fREML", discrete = TRUE,
            knots = list(angle = c(-pi, pi)), nthreads = 2)
}

# CPU seconds of the process (all threads), beside the elapsed time: the machine is shared.
cpu_time <- function(st) sum(st[c("user.self", "sys.self")])

if (length(args) >= 1 && args[1] == "--one") {
  engine <- args[2]
  n_subjects <- as.integer(args[3])
  dir <- args[4]
  suppressPackageStartupMessages({
    library(mgcv)
    library(nce)
  })
  if (nzchar(Sys.getenv("NCE_MAX_MEMORY"))) options(nce.max_memory = as.numeric(Sys.getenv("NCE_MAX_MEMORY")))
  out <- file.path(dir, sprintf("%s-%d.rds", engine, n_subjects))
  if (engine == "bam") {
    mf <- readRDS(file.path(dir, sprintf("frame-%d.rds", n_subjects)))
    st <- system.time(b <- fit_bam(mf))
    saveRDS(list(time = st[["elapsed"]], cpu = cpu_time(st), rows = nrow(mf), edf = sum(b$edf), eta = b$linear.predictors,
                 converged = b$outer.info$conv), out)
  } else {
    d <- simulate_scale(n_subjects)
    st <- system.time(fit <- fit_latkes(d, engine))
    data_mb <- as.numeric(utils::object.size(fit$nce_frame)) / 2^20
    if (engine == "exact") saveRDS(model.frame(fit), file.path(dir, sprintf("frame-%d.rds", n_subjects)))
    saveRDS(list(time = st[["elapsed"]], cpu = cpu_time(st), rows = nrow(fit$nce_frame), edf = sum(fit$edf), eta = fit$linear.predictors,
                 converged = fit$converged, data_mb = data_mb), out)
  }
  quit(save = "no")
}

# The three fits one after another in one R session, as a user runs them (issue 34: the ratio
# must hold there too): discrete, exact, bam, then bam, exact, discrete, so that neither engine
# always meets the heap the other left. Same data and bam call as above.
if (length(args) >= 1 && args[1] == "--session") {
  n_subjects <- if (length(args) >= 2) as.integer(args[2]) else 14L
  suppressPackageStartupMessages({
    library(mgcv)
    library(nce)
  })
  cat(sprintf("one session, S = %d; load average at start: %s\n", n_subjects,
              paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))
  d <- simulate_scale(n_subjects)
  mf <- NULL
  # bam's frame is the first latkes fit's (the first order fits before bam).
  fit_one <- function(engine) {
    if (engine == "bam") return(system.time(fit_bam(mf))[["elapsed"]])
    st <- system.time(fit <- fit_latkes(d, engine))
    if (is.null(mf)) mf <<- model.frame(fit)
    st[["elapsed"]]
  }
  for (order in list(c("discrete", "exact", "bam"), c("bam", "exact", "discrete"))) {
    t <- vapply(order, fit_one, 0)
    cat(sprintf("  %s; bam / exact %.2fx, bam / discrete %.2fx\n",
                paste(sprintf("%s %.2f s", order, t), collapse = ", "), t[["bam"]] / t[["exact"]],
                t[["bam"]] / t[["discrete"]]))
  }
  quit(save = "no")
}

sizes <- as.integer(strsplit(Sys.getenv("NCE_SCALE_S", "14,56"), ",")[[1]])
engines <- strsplit(Sys.getenv("NCE_SCALE_ENGINES", "exact,discrete,bam"), ",")[[1]]
dir <- tempfile("nce-scale-")
dir.create(dir)
script <- sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))
run_one <- function(engine, s) {
  log <- file.path(dir, sprintf("%s-%d.time", engine, s))
  status <- system2("/usr/bin/time", c("-v", "-o", log, "Rscript", script, "--one", engine, s, dir))
  res <- file.path(dir, sprintf("%s-%d.rds", engine, s))
  if (status != 0 || !file.exists(res)) return(NULL)
  r <- readRDS(res)
  tl <- readLines(log)
  r$peak_mb <- as.numeric(sub(".*: ", "", grep("Maximum resident", tl, value = TRUE))) / 1024
  r
}
cat(sprintf("load average at start: %s\n", paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))
cat(sprintf("%4s %10s %-9s %8s %8s %10s %9s %9s %14s %9s\n", "S", "rows", "engine", "time(s)", "cpu(s)", "peak(MB)",
            "data(MB)", "edf", "max|eta-exact|", "converged"))
results <- list()
for (s in sizes) {
  for (e in engines) {
    r <- run_one(e, s)
    results[[paste(e, s)]] <- r
    if (is.null(r)) {
      cat(sprintf("%4d %10s %-9s failed (see %s)\n", s, "", e, dir))
      next
    }
    ex <- results[[paste("exact", s)]]
    dev <- if (!is.null(ex) && length(ex$eta) == length(r$eta)) max(abs(r$eta - ex$eta)) else NA
    cat(sprintf("%4d %10d %-9s %8.2f %8.2f %10.0f %9s %9.2f %14.2e %9s\n", s, r$rows, e, r$time, r$cpu, r$peak_mb,
                if (is.null(r$data_mb)) "" else sprintf("%.0f", r$data_mb), r$edf, dev, format(r$converged)))
  }
  b <- results[[paste("bam", s)]]
  for (e in intersect(c("exact", "discrete"), engines)) {
    r <- results[[paste(e, s)]]
    if (!is.null(r) && !is.null(b)) {
      cat(sprintf("     S = %d: bam / %s time %.2fx (CPU %.2fx), %s / bam peak memory %.2fx\n", s, e, b$time / r$time,
                  b$cpu / r$cpu, e, r$peak_mb / b$peak_mb))
    }
  }
}
cat(sprintf("load average at end: %s\n", paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))
if (all(paste("exact", c(14, 56)) %in% names(results)) && !any(vapply(results[paste("exact", c(14, 56))], is.null, TRUE))) {
  cat(sprintf("exact: time S = 56 / S = 14: %.2fx\n", results[["exact 56"]]$time / results[["exact 14"]]$time))
}
