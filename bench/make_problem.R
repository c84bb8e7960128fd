# Benchmark problems for the REML engine (nce-core's reml::fit_reml) against mgcv.
#
# Takes the sequential-NCE problems of bench/simulate.R (one eye-movement subject: 2,000
# transitions, each with 1 data row and 20 uniform reference rows, 42,000 rows; and 14 subjects
# pooled, 588,000 rows); builds the design with mgcv, times gam(method = "REML") and
# bam(method = "fREML", discrete = TRUE), and writes everything the Rust example
# src/rust/nce-core/examples/bench_reml.rs reads to /tmp/nce-bench/<name>/ (not the repository).
#
# Usage: Rscript bench/make_problem.R [subject|pooled|all] [--gam-pooled]
#   gam REML on the pooled problem takes many minutes; it runs only with --gam-pooled.
#
# Files (little-endian doubles unless noted; matrices column-major):
#   meta.txt          n ng pa pb m (rows, transitions, row-level cols, per-transition cols, penalties)
#   A.bin             n x pa     row-level block: s(radius), s(dist), s(angle)
#   B.bin             ng x pb    per-transition block: intercept, te(x_prev, y_prev)
#   group.bin         n int32    0-based transition of each row
#   y.bin, offset.bin n
#   pen.txt           one line per penalty: start (0-based, in [A | B] column order) size file
#   S<j>.bin          the penalty matrices
#   <fit>_sp.bin, <fit>_eta.bin (linear predictor incl. offset), <fit>_edf.bin (per coefficient,
#   [A | B] order), <fit>_info.txt (seconds, REML score, outer iterations) for fit in gam, bam.

suppressPackageStartupMessages(library(mgcv))
args <- commandArgs(trailingOnly = TRUE)
which_problems <- if (length(args) && !startsWith(args[1], "--")) args[1] else "all"
gam_pooled <- "--gam-pooled" %in% args
out_root <- "/tmp/nce-bench"
# The same simulated problems as bench/run.R (bench/simulate.R).
here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "simulate.R"))
fml <- bench_gam_formula
knots <- bench_knots
# One data frame of rows; .group is the 1-based transition, its rows contiguous.
bench_frame <- function(n_subjects) {
  rows <- simulate_bench(n_subjects)$rows
  rows$.group <- rows$t
  rows
}

wbin <- function(v, file) writeBin(as.double(v), file, endian = "little")

write_problem <- function(name, df) {
  dir <- file.path(out_root, name)
  dir.create(dir, recursive = TRUE, showWarnings = FALSE)
  G <- gam(fml, family = binomial, data = df, offset = .offset, knots = knots, fit = FALSE)
  X <- G$X
  nm <- G$term.names
  b_cols <- c(1, grep("^te\\(", nm))
  a_cols <- setdiff(seq_len(ncol(X)), b_cols)
  perm <- c(a_cols, b_cols) # [A | B] order; position of mgcv column perm[k] is k
  first <- match(unique(df$.group), df$.group)
  Bm <- X[first, b_cols, drop = FALSE]
  # The B block must really be shared by the rows of a transition.
  stopifnot(max(abs(X[, b_cols] - Bm[df$.group, ])) < 1e-12)
  n <- nrow(X); ng <- nrow(Bm); pa <- length(a_cols); pb <- length(b_cols)
  writeLines(paste(n, ng, pa, pb, length(G$S)), file.path(dir, "meta.txt"))
  wbin(X[, a_cols], file.path(dir, "A.bin"))
  wbin(Bm, file.path(dir, "B.bin"))
  writeBin(as.integer(df$.group - 1L), file.path(dir, "group.bin"), size = 4, endian = "little")
  wbin(df$.label, file.path(dir, "y.bin"))
  wbin(G$offset, file.path(dir, "offset.bin"))
  pen_lines <- character(0)
  for (j in seq_along(G$S)) {
    start <- G$off[j] # 1-based, mgcv column order
    k <- ncol(G$S[[j]])
    cols <- match(start:(start + k - 1), perm)
    stopifnot(all(diff(cols) == 1))
    wbin(G$S[[j]], file.path(dir, sprintf("S%d.bin", j)))
    pen_lines <- c(pen_lines, sprintf("%d %d S%d.bin", cols[1] - 1, k, j))
  }
  writeLines(pen_lines, file.path(dir, "pen.txt"))
  cat(sprintf("%s: %d rows, %d transitions, %d + %d columns, %d penalties (dense design %.1f MB)\n",
              name, n, ng, pa, pb, length(G$S), n * (pa + pb) * 8 / 2^20))
  list(dir = dir, perm = perm, df = df)
}

record <- function(P, tag, fit, secs) {
  wbin(fit$sp, file.path(P$dir, paste0(tag, "_sp.bin")))
  wbin(fit$linear.predictors, file.path(P$dir, paste0(tag, "_eta.bin")))
  wbin(fit$edf[P$perm], file.path(P$dir, paste0(tag, "_edf.bin")))
  outer <- if (!is.null(fit$outer.info$iter)) fit$outer.info$iter else NA
  writeLines(sprintf("%.4f %.10g %s", secs, fit$gcv.ubre, outer), file.path(P$dir, paste0(tag, "_info.txt")))
  cat(sprintf("  %s: %.2f s, edf %.3f, sp %s\n", tag, secs, sum(fit$edf),
              paste(signif(fit$sp, 4), collapse = " ")))
}

run_fits <- function(P, do_gam = TRUE) {
  df <- P$df
  if (do_gam) {
    t <- system.time(fit <- gam(fml, family = binomial, data = df, offset = .offset, knots = knots,
                                method = "REML"))[["elapsed"]]
    record(P, "gam", fit, t)
  }
  t <- system.time(fit <- bam(fml, family = binomial, data = df, offset = .offset, knots = knots,
                              method = "fREML", discrete = TRUE, nthreads = 2))[["elapsed"]]
  record(P, "bam", fit, t)
}

if (which_problems %in% c("subject", "all")) run_fits(write_problem("subject", bench_frame(1)))
if (which_problems %in% c("pooled", "all")) {
  run_fits(write_problem("pooled", bench_frame(14)), do_gam = gam_pooled)
}
