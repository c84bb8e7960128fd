# discrete = TRUE against the exact fit, and the two layouts the engine can hold a discretised
# design in (issue #34: "discrete = TRUE never more than 10% slower than exact"): the cost model's
# choice ("auto", the default), the compressed terms and their rounded bases expanded into one
# dense block (both forced by options(nce.discrete_layout =)). Each mode fits from the same RNG
# state, so the rows are the same; times are the best of `reps`; the REML iterations are printed
# because rounding moves the REML surface and with it their number.
# Models: the 5-parameter Gaussian classifier's default GAM (35 terms; bench/gaussian5-model.R),
# the three-term nce() of bench/smooth-setup.R at 42,000 and 420,000 rows, and the bimodal density
# of Table 2 of the Clivio et al. report (two normals, 5,000 points, ratio 10).
# Run: R_LIBS=.Rlib Rscript bench/discrete-layout.R [pairs] [reps]   (from the package root)
suppressPackageStartupMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
n_pairs <- if (length(args)) as.integer(args[1]) else 2000L
reps <- if (length(args) > 1L) as.integer(args[2]) else 3L
options(nce.threads = 2L)
here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "gaussian5-model.R"))
modes <- c("exact", "auto", "compressed", "dense")

run <- function(label, fit_fun, reps) {
  cat(sprintf("\n%s\n%-10s %8s %8s %-10s %6s %10s\n", label, "mode", "best s", "x exact", "layout", "outer",
              "max|eta-auto|"))
  eta_auto <- NULL
  t_exact <- NA
  for (m in modes) {
    options(nce.discrete_layout = if (m == "exact") "auto" else m)
    ts <- numeric(reps)
    for (i in seq_len(reps)) ts[i] <- system.time(f <- fit_fun(m != "exact"))[["elapsed"]]
    g <- if (inherits(f, "nce_ratio")) f$gam else f
    if (m == "exact") t_exact <- min(ts)
    if (m == "auto") eta_auto <- g$linear.predictors
    cat(sprintf("%-10s %8.2f %8.2f %-10s %6d %10s\n", m, min(ts), min(ts) / t_exact,
                if (is.null(g$discrete_layout)) "-" else g$discrete_layout, g$outer_iterations,
                if (is.null(eta_auto)) "-" else sprintf("%.1e", max(abs(g$linear.predictors - eta_auto)))))
  }
  options(nce.discrete_layout = NULL)
}
cat(sprintf("%d threads; %s\n", getOption("nce.threads"), format(Sys.time(), tz = "UTC", usetz = TRUE)))

pr <- prior_uniform(t1 = c(-3, 3), t2 = c(-3, 3), t3 = c(-3, 3), t4 = c(-3, 3), t5 = c(-3, 3))
form <- nce:::default_ratio_formula(paste0("t", 1:5), c("m1", "m2", "lv1", "lv2", "z"))
set.seed(43)
sims <- simulate_summaries(g5_simulate, g5_summaries, pr$sample(n_pairs), batch = TRUE)
# A first small fit loads what a session loads once.
invisible(ratio_amortised(g5_simulate, g5_summaries, pr, n = 300, batch = TRUE, formula = form, discrete = TRUE))
run(sprintf("5-parameter classifier, default GAM (35 terms), %d pairs", n_pairs), function(d) {
  set.seed(7)
  ratio_amortised(g5_simulate, g5_summaries, pr, n = n_pairs, batch = TRUE, formula = form, simulations = sims,
                  discrete = d)
}, 1L)

for (n in c(2000L, 20000L)) {
  set.seed(1)
  dat <- data.frame(u = stats::rbeta(n, 2, 3), v = stats::rbeta(n, 3, 2))
  ref <- ref_uniform(u = c(0, 1), v = c(0, 1))
  run(sprintf("nce(~ s(u, bs = 'cr') + s(v, bs = 'cr') + s(u, v, k = 30)), %d rows", 21L * n), function(d) {
    set.seed(2)
    nce(~ s(u, bs = "cr", k = 10) + s(v, bs = "cr", k = 10) + s(u, v, k = 30), data = dat, reference = ref,
        ratio = 20, discrete = d)
  }, reps)
}

set.seed(4)
y <- c(stats::rnorm(2500, -2, 0.6), stats::rnorm(2500, 2, 0.6))
run("Table 2 density: nce(~ s(y, k = 20)), 55,000 rows", function(d) {
  set.seed(5)
  nce(~ s(y, k = 20), data = data.frame(y = y), reference = ref_normal(y = c(0, 3)), ratio = 10,
      discrete = d)
}, reps)
