# Smooth set-up off the critical path (issue 18): two cases, each against mgcv on the same rows
# and the same model, in one R process.
# 1. nce(~ s(u, bs = "cr", k = 10) + s(v, bs = "cr", k = 10) + s(u, v, k = 30)) on 2,000 points at
#    ratio 20 (42,000 rows; the thin-plate term has mgcv's 2,000 random knots), against
#    mgcv::gam(method = "REML") on model.frame(fit) with the same formula and offset.
# 2. latkes() with intercept = ~ s(x_prev, y_prev, k = 30) (all ~2,000 distinct previous fixations
#    as knots) on one simulated subject of 2,000 fixations, against mgcv::bam(discrete = TRUE) and
#    gam REML on model.frame(fit).
# Each timed end to end with its set-up (best of 7 for the fast ones, with the median printed too:
# the first fits of a session are slower while R's heap grows; gam once). Prints the ratios
# and the largest difference in the linear predictor from gam's. Run: Rscript bench/smooth-setup.R
# (with R_LIBS pointing at the installed package). Set NCE_BENCH_SKIP_GAM=1 to skip the gam runs.
suppressPackageStartupMessages(library(nce))
best <- function(expr, times = 7) {
  e <- substitute(expr)
  env <- parent.frame()
  t <- vapply(seq_len(times), function(i) system.time(eval(e, env))[["elapsed"]], 0)
  cat(sprintf("  [%s: best %.3f s, median %.3f s of %d]\n", deparse(e, nlines = 1L)[1L], min(t), stats::median(t), times))
  min(t)
}
skip_gam <- nzchar(Sys.getenv("NCE_BENCH_SKIP_GAM"))
row <- function(label, t, t_ref, edf, eta, eta_ref) {
  cat(sprintf("%-16s %8.2f %10.1f %10.3f %14s\n", label, t, t_ref / t, sum(edf),
              if (is.null(eta_ref)) "-" else sprintf("%.2e", max(abs(eta - eta_ref)))))
}
cat(sprintf("%d threads; %s\n", getOption("nce.threads", 2L), format(Sys.time(), tz = "UTC", usetz = TRUE)))

# 1. nce() with a 2-D thin-plate term on many unique points.
set.seed(1)
n <- 2000
dat <- data.frame(u = stats::rbeta(n, 2, 3), v = stats::rbeta(n, 3, 2))
ref <- ref_uniform(u = c(0, 1), v = c(0, 1))
form <- ~ s(u, bs = "cr", k = 10) + s(v, bs = "cr", k = 10) + s(u, v, k = 30)
set.seed(2)
fit <- nce(form, data = dat, reference = ref, ratio = 20)
t_nce <- best({
  set.seed(2)
  fit <- nce(form, data = dat, reference = ref, ratio = 20)
})
mf <- model.frame(fit)
gform <- .label ~ s(u, bs = "cr", k = 10) + s(v, bs = "cr", k = 10) + s(u, v, k = 30) + offset(.offset)
mf$.label <- c(rep(1, n), rep(0, nrow(mf) - n))
cat(sprintf("\n1. nce(), %d rows, ~ s(u, bs = 'cr', k = 10) + s(v, bs = 'cr', k = 10) + s(u, v, k = 30)\n", nrow(mf)))
cat(sprintf("%-16s %8s %10s %10s %14s\n", "", "time (s)", "gam / this", "total edf", "max|eta-gam|"))
g <- NULL
if (!skip_gam) {
  t_gam <- system.time(g <- mgcv::gam(gform, family = stats::binomial, data = mf, method = "REML"))[["elapsed"]]
}
eta_gam <- if (is.null(g)) NULL else g$linear.predictors
tg <- if (is.null(g)) NA else t_gam
row("nce", t_nce, tg, fit$edf, fit$linear.predictors, eta_gam)
if (!is.null(g)) row("gam REML", t_gam, t_gam, g$edf, g$linear.predictors, eta_gam)
t_setup <- best(mgcv::gam(gform, family = stats::binomial, data = mf, method = "REML", fit = FALSE))
cat(sprintf("mgcv's set-up alone (gam(fit = FALSE)): %.2f s\n", t_setup))

# 2. latkes() with the 2-D thin-plate intercept on all distinct previous fixations.
window <- c(0, 1024, 0, 768)
truth <- list(radius = function(r) -r / 200, dist = function(d) -d / 120, angle = function(a) 0.4 * cos(4 * a))
set.seed(1)
d <- rlatkes(2000, truth, window = window, n_trials = 20)
intercept <- ~ s(x_prev, y_prev, k = 30)
set.seed(3)
fit2 <- latkes(d, group = "trial", window = window, ratio = 20, intercept = intercept)
t_lat <- best({
  set.seed(3)  # the same reference rows in every run, so the rows gam and bam get do not depend on `times`
  fit2 <- latkes(d, group = "trial", window = window, ratio = 20, intercept = intercept)
})
mf2 <- model.frame(fit2)
form2 <- .label ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 16) + s(x_prev, y_prev, k = 30) +
  offset(.offset)
kn <- list(angle = c(-pi, pi))
t_bam <- best(b <- mgcv::bam(form2, family = stats::binomial, data = mf2, method = "fREML", discrete = TRUE,
                             knots = kn, nthreads = 2))
g2 <- NULL
if (!skip_gam) {
  t_gam2 <- system.time(g2 <- mgcv::gam(form2, family = stats::binomial, data = mf2, method = "REML",
                                        knots = kn))[["elapsed"]]
}
eta2 <- if (is.null(g2)) NULL else g2$linear.predictors
cat(sprintf("\n2. latkes(), %d rows, intercept ~ s(x_prev, y_prev, k = 30)\n", nrow(mf2)))
cat(sprintf("%-16s %8s %10s %10s %14s\n", "", "time (s)", "bam / this", "total edf", "max|eta-gam|"))
row("latkes", t_lat, t_bam, fit2$edf, fit2$linear.predictors, eta2)
row("bam discrete", t_bam, t_bam, b$edf, b$linear.predictors, eta2)
if (!is.null(g2)) {
  row("gam REML", t_gam2, t_bam, g2$edf, g2$linear.predictors, eta2)
  cat(sprintf("gam REML / latkes: %.1f\n", t_gam2 / t_lat))
}

# 3. Thin-plate set-up alone against mgcv's constructor where mgcv's Lanczos is the faster
#    eigensolver (tp_eigen() routes these to slanczos()): 3-D with the default k, and 2-D with k = 100,
#    on 2,000 distinct points; and 2-D k = 30 (the Rust block Krylov solver).
cat("\n3. thin-plate set-up on 2,000 distinct points (smooth.construct), best of 3\n")
cat(sprintf("%-22s %10s %10s %8s\n", "", "this (s)", "mgcv (s)", "ratio"))
set.seed(15)
pts <- data.frame(u = stats::runif(2000), v = stats::runif(2000), w = stats::runif(2000))
for (spec in list(mgcv::s(u, v, w), mgcv::s(u, v, k = 100), mgcv::s(u, v, k = 30))) {
  ours <- spec
  class(ours) <- "ncetp.smooth.spec"
  t_mgcv <- min(replicate(3, system.time(mgcv::smooth.construct(spec, pts, NULL))[["elapsed"]]))
  t_ours <- min(replicate(3, system.time(mgcv::smooth.construct(ours, pts, NULL))[["elapsed"]]))
  cat(sprintf("%-22s %10.3f %10.3f %8.2f\n", sprintf("%s, k = %d", spec$label, ncol(mgcv::smooth.construct(spec, pts[1:200, ], NULL)$X)),
              t_ours, t_mgcv, t_mgcv / t_ours))
}
