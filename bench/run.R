# make bench: the penalised REML engine against mgcv::gam(method = "REML") and
# mgcv::bam(method = "fREML", discrete = TRUE) on the same sequential-NCE problems, in one run.
# Problem 1: one LATKES-sized subject (2,000 transitions x 21 rows = 42,000 rows).
# Problem 2: 14 subjects pooled (588,000 rows); gam is skipped there unless NCE_BENCH_GAM_BIG=1.
here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
run <- function(engine, n_subjects) {
  out <- tempfile(fileext = ".rds")
  status <- system2(file.path(R.home("bin"), "Rscript"), c(file.path(here, "fit_one.R"), engine, n_subjects, out))
  if (status != 0) stop(sprintf("%s on %d subject(s) failed", engine, n_subjects))
  readRDS(out)
}
report <- function(label, fits) {
  ref <- fits$gam %||% fits$bam
  cat(sprintf("\n== %s: %d rows ==\n", label, fits$nce$rows))
  cat(sprintf("%-5s %9s %9s %9s %12s %12s %11s\n", "", "time (s)", "ratio", "total edf",
              "max|eta-ref|", "max|dlog sp|", "peak MB"))
  for (e in names(fits)) {
    f <- fits[[e]]
    cat(sprintf("%-5s %9.2f %9.1f %9.3f %12.2e %12.3f %11.0f\n", e, f$time, f$time / fits$nce$time, f$edf,
                max(abs(f$eta - ref$eta)), max(abs(log(f$sp) - log(ref$sp))), f$peak_mb))
  }
  cat(sprintf("(ratio = time / nce time; ref = %s; nce peak over its start-up: %.0f MB, dense design %.0f MB)\n",
              if (is.null(fits$gam)) "bam" else "gam", fits$nce$peak_mb - fits$nce$base_mb, fits$nce$design_mb))
}
`%||%` <- function(a, b) if (is.null(a)) b else a
one <- list(nce = run("nce", 1), gam = run("gam", 1), bam = run("bam", 1))
report("one subject", one)
big <- list(nce = run("nce", 14), bam = run("bam", 14))
if (identical(Sys.getenv("NCE_BENCH_GAM_BIG"), "1")) big$gam <- run("gam", 14)
report("14 subjects pooled", big)
