# One benchmark fit in a fresh R process (so its peak memory is its own):
#   Rscript bench/fit_one.R <engine: nce|gam|bam> <n_subjects> <outfile.rds>
args <- commandArgs(trailingOnly = TRUE)
engine <- args[1]
n_subjects <- as.integer(args[2])
out <- args[3]
source(file.path(dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))), "simulate.R"))
suppressPackageStartupMessages({ library(mgcv); library(nce) })
d <- simulate_bench(n_subjects)
rows <- d$rows
peak_kb <- function() as.numeric(sub("kB", "", strsplit(grep("VmHWM", readLines("/proc/self/status"), value = TRUE), ":")[[1]][2]))
# warm up namespaces outside the timing (both engines pay the same start-up otherwise)
invisible(mgcv::smoothCon(s(x), data.frame(x = 1:20)))
before_kb <- peak_kb()
time <- system.time(res <- switch(engine,
  nce = nce:::fit_grouped(bench_row_formula, rows, bench_group_formula, d$groups, rows$t,
                          rows$.label, rows$.offset, knots = bench_knots),
  gam = gam(bench_gam_formula, binomial, rows, offset = .offset, method = "REML", knots = bench_knots),
  bam = bam(bench_gam_formula, binomial, rows, offset = .offset, method = "fREML", discrete = TRUE,
            knots = bench_knots)
))[["elapsed"]]
design_mb <- nrow(rows) * 51 * 8 / 2^20   # the dense model matrix gam would form
saveRDS(list(engine = engine, n_subjects = n_subjects, rows = nrow(rows), time = time,
             edf = sum(res$edf), eta = res$linear.predictors, sp = res$sp,
             peak_mb = peak_kb() / 1024, base_mb = before_kb / 1024, design_mb = design_mb), out)
