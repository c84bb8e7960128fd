# make bench-latkes: latkes() end to end against mgcv on the same model, in one R process.
# One simulated subject (rlatkes, 2,000 fixations in 20 trials, ratio 20, default kernel and
# intercept): latkes() versus mgcv::gam(method = "REML") and mgcv::bam(method = "fREML",
# discrete = TRUE) on model.frame(fit) with the same terms, each timed end to end including
# its set-up (latkes and bam in 9 alternating pairs, so both meet the same machine: best and
# median of each and the median of the pairs' ratios; one run of gam); then 14 such subjects with
# by = "subject" under future's sequential plan. Set NCE_BENCH_INTERCEPT to a formula (e.g.
# "~ te(x_prev, y_prev, bs = 'cr')") to time another spline intercept in all three.
suppressPackageStartupMessages(library(nce))
window <- c(0, 1024, 0, 768)
truth <- list(radius = function(r) -r / 200, dist = function(d) -d / 120, angle = function(a) 0.4 * cos(4 * a))
int_env <- Sys.getenv("NCE_BENCH_INTERCEPT")
intercept <- if (nzchar(int_env)) stats::as.formula(int_env) else NULL
int_terms <- if (is.null(intercept)) "s(x_prev, y_prev, xt = list(max.knots = 500))" else deparse(intercept[[2]])
best <- function(expr, times = 3) {
  e <- substitute(expr)
  env <- parent.frame()
  min(vapply(seq_len(times), function(i) system.time(eval(e, env))[["elapsed"]], 0))
}
set.seed(1)
d <- rlatkes(2000, truth, window = window, n_trials = 20)
rng_after_data <- .Random.seed
fit_nce <- function() {
  # The same reference rows every time: those of the rows gam and bam get.
  assign(".Random.seed", rng_after_data, envir = globalenv())
  latkes(d, group = "trial", window = window, ratio = 20, intercept = intercept)
}
fit <- fit_nce()
mf <- model.frame(fit)
form <- stats::as.formula(paste(".label ~ s(radius, bs = 'cr') + s(dist, bs = 'cr') + s(angle, bs = 'cc', k = 16) +",
                                int_terms, "+ offset(.offset)"))
kn <- list(angle = c(-pi, pi))
t_gam <- system.time(g <- mgcv::gam(form, family = stats::binomial, data = mf, method = "REML", knots = kn))[["elapsed"]]
fit_bam <- function() {
  mgcv::bam(form, family = stats::binomial, data = mf, method = "fREML", discrete = TRUE, knots = kn, nthreads = 2)
}
b <- fit_bam()
pairs <- t(vapply(seq_len(9), function(i) {
  c(system.time(fit <<- fit_nce())[["elapsed"]],
    system.time(b <<- fit_bam())[["elapsed"]])
}, numeric(2)))
t_nce <- min(pairs[, 1])
t_bam <- min(pairs[, 2])
cat(sprintf("one subject: %d transitions, %d rows, intercept %s, %d threads\n", nobs(fit), nrow(mf), int_terms,
            getOption("nce.threads", 2L)))
cat(sprintf("%-14s %8s %8s %10s %14s\n", "", "time (s)", "x nce", "total edf", "max|eta-gam|"))
row <- function(label, t, edf, eta) {
  cat(sprintf("%-14s %8.2f %8.1f %10.3f %14.2e\n", label, t, t / t_nce, sum(edf), max(abs(eta - g$linear.predictors))))
}
row("latkes", t_nce, fit$edf, fit$linear.predictors)
row("gam REML", t_gam, g$edf, g$linear.predictors)
row("bam discrete", t_bam, b$edf, b$linear.predictors)
cat(sprintf("medians of the 9 pairs: latkes %.3f s, bam %.3f s; median of the pairs' bam / latkes ratios %.2f\n",
            stats::median(pairs[, 1]), stats::median(pairs[, 2]), stats::median(pairs[, 2] / pairs[, 1])))
set.seed(2)
d14 <- rlatkes(2000, truth, window = window, n_subjects = 14, n_trials = 20)
if (requireNamespace("future", quietly = TRUE)) future::plan(future::sequential)
t14 <- system.time(fits <- latkes(d14, group = "trial", window = window, ratio = 20, intercept = intercept,
                                  by = "subject"))[["elapsed"]]
cat(sprintf("14 subjects, by = \"subject\", sequential plan: %.2f s (%.2f s per subject), all converged: %s\n",
            t14, t14 / 14, all(vapply(fits$fits, `[[`, TRUE, "converged"))))
