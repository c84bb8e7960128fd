# make bench-latkes-methods: what a researcher calls after latkes() on the real fixations
# (../shared/data/fixations.csv without its (0, 0) rows, screen window c(0, 1024, 0, 768),
# ratio 10, 777 transitions), timed against the fit itself (best of 5 each), in one R process, with the
# normaliser's two rules side by side: the Rust tables (default) and the kernel evaluated in R
# at every point (the rule before issue 31, kept for terms in two window features). Prints the
# times, their ratio to the fit's, and the largest relative differences between the rules.
# NCE_BENCH_R_RULE=false skips the R rule (about 80 s).
suppressPackageStartupMessages(library(nce))
csv <- file.path(Sys.getenv("NCE_SHARED_DATA", file.path("..", "shared", "data")), "fixations.csv")
if (!file.exists(csv)) stop("needs ", csv, " (set NCE_SHARED_DATA)")
fix <- utils::read.csv(csv)
fix <- fix[!(fix$x == 0 & fix$y == 0), ]
screen <- c(0, 1024, 0, 768)
threads <- getOption("nce.threads", 2L)
elapsed <- function(expr) system.time(expr)[["elapsed"]]
fresh <- function(fit) {
  rm(list = ls(fit$cache), envir = fit$cache) # the normaliser of the fit's transitions is kept
  fit
}
set.seed(1)
fit <- suppressWarnings(latkes(fix, group = "trial", window = screen, ratio = 10))
set.seed(1)
t_fit <- min(replicate(5, elapsed(suppressWarnings(latkes(fix, group = "trial", window = screen, ratio = 10)))))
calls <- list(
  "logLik()" = function(f) logLik(f),
  "fitted()" = function(f) fitted(f),
  "AIC()" = function(f) AIC(f),
  "broom::glance()" = function(f) broom::glance(f),
  "summary()" = function(f) summary(f),
  "predict(response, se.fit)" = function(f) predict(f, type = "response", se.fit = TRUE),
  "broom::augment()" = function(f) broom::augment(f)
)
calls <- calls[!grepl("broom", names(calls)) | requireNamespace("broom", quietly = TRUE)]
times <- vapply(calls, function(g) min(replicate(5, elapsed(g(fresh(fit))))), 0)
cat(sprintf("real fixations: %d transitions, ratio 10, %d threads; latkes() %.2f s (best of 5)\n",
            nobs(fit), threads, t_fit))
cat(sprintf("%-28s %7.2f s  %5.2f x the fit\n", names(times), times, times / t_fit), sep = "")

if (!identical(Sys.getenv("NCE_BENCH_R_RULE"), "false")) {
  nd <- fit$features(fit$transitions)
  norm <- function(tables, gradient) {
    nce:::grid_normaliser(fit, nd, c(64, 48), gradient = gradient, tables = tables)
  }
  t_rust <- elapsed(a <- norm(TRUE, TRUE))
  t_r <- elapsed(b <- norm(FALSE, TRUE))
  rel <- function(x, y) max(abs(x - y) / pmax(abs(y), 1e-12))
  cat(sprintf("normaliser with gradient, all transitions: Rust tables %.2f s, R rule %.2f s (%.0fx)\n",
              t_rust, t_r, t_r / t_rust))
  ll <- function(lz) sum(drop(nce:::setup_predict(fit$row_setup, nd, TRUE)[, -1] %*% coef(fit)[2:fit$row_setup$ncol]) - lz)
  cat(sprintf("largest relative difference: log Z %.1e, mean design row %.1e (absolute %.1e); log-likelihood %.10g vs %.10g\n",
              rel(a$log_z, b$log_z), rel(a$mean_x, b$mean_x), max(abs(a$mean_x - b$mean_x)),
              ll(a$log_z), ll(b$log_z)))
}
