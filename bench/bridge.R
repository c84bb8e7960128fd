# Benchmark (not run in tests): marglik_nce() / bayes_factor_nce() against bridgesampling on the
# same draws. Accuracy (root mean squared error against the exact value over replications, mean
# reported standard error) and time per estimate.
#   R_LIBS=$PWD/.Rlib Rscript bench/bridge.R       # 100 replications, 10,000 draws (after make install)
#   NCE_BENCH_REPS=20 NCE_BENCH_DRAWS=100000 R_LIBS=$PWD/.Rlib Rscript bench/bridge.R
# bridgesampling's matrix interface calls log_posterior once per draw (its API); marglik_nce
# calls the vectorised function twice. Both use a normal reference fitted to the first half of
# the transformed draws, and the second half in the estimate.
library(nce)
if (!requireNamespace("bridgesampling", quietly = TRUE)) stop("bench/bridge.R needs bridgesampling")
here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "..", "tests", "testthat", "helper-bridge.R"))
reps <- as.integer(Sys.getenv("NCE_BENCH_REPS", "100"))
n <- as.integer(Sys.getenv("NCE_BENCH_DRAWS", "10000"))
set.seed(2024)

bs <- function(x, lk, lb, ub) {
  nm <- paste0("x", seq_len(ncol(x)))
  colnames(x) <- nm
  bridgesampling::bridge_sampler(x, log_posterior = function(p, data) lk(matrix(p, 1)), data = NULL,
                                 lb = stats::setNames(rep_len(lb, ncol(x)), nm),
                                 ub = stats::setNames(rep_len(ub, ncol(x)), nm), silent = TRUE)
}
timed <- function(expr) {
  t <- system.time(v <- expr)[["elapsed"]]
  list(value = v, time = t)
}
rows <- list()
add <- function(case, method, err, se, time) {
  rows[[length(rows) + 1L]] <<- data.frame(case = case, method = method, rmse = sqrt(mean(err^2)),
                                           max_abs_err = max(abs(err)), mean_se = mean(se), time_s = mean(time))
}

for (nm in names(cases <- ml_cases())) {
  cs <- cases[[nm]]
  e <- list(nce = NULL, bs = NULL); s <- e; tt <- e
  for (r in seq_len(reps)) {
    x <- cs$gen(n)
    a <- timed(marglik_nce(x, cs$lk, lower = cs$lb, upper = cs$ub))
    b <- timed(bs(x, cs$lk, cs$lb, cs$ub))
    e$nce <- c(e$nce, a$value$logml - cs$exact); s$nce <- c(s$nce, a$value$se); tt$nce <- c(tt$nce, a$time)
    e$bs <- c(e$bs, b$value$logml - cs$exact); tt$bs <- c(tt$bs, b$time)
    s$bs <- c(s$bs, sqrt(bridgesampling::error_measures(b$value)$re2))
  }
  add(nm, "marglik_nce", e$nce, s$nce, tt$nce)
  add(nm, "bridgesampling", e$bs, s$bs, tt$bs)
}

for (nm in names(bf_scenarios)) {
  sc <- bf_scenarios[[nm]]
  p1 <- function(x) sc$l1(x) - log(60)
  p2 <- function(x) sc$l2(x) - log(60)
  e <- list(two = NULL, ml = NULL, bs = NULL); s <- e; tt <- e
  for (r in seq_len(reps)) {
    d1 <- cbind(rpost_reject(n, sc$l1))
    d2 <- cbind(rpost_reject(n, sc$l2))
    a <- timed(bayes_factor_nce(d1, d2, sc$l1, sc$l2))
    m <- timed(bayes_factor_marglik(marglik_nce(d1, p1, lower = -30, upper = 30),
                                    marglik_nce(d2, p2, lower = -30, upper = 30)))
    b1 <- timed(bs(d1, p1, -30, 30))
    b2 <- timed(bs(d2, p2, -30, 30))
    e$two <- c(e$two, a$value$log_bf - sc$exact); s$two <- c(s$two, a$value$se); tt$two <- c(tt$two, a$time)
    e$ml <- c(e$ml, m$value$log_bf - sc$exact); s$ml <- c(s$ml, m$value$se); tt$ml <- c(tt$ml, m$time)
    e$bs <- c(e$bs, b1$value$logml - b2$value$logml - sc$exact); tt$bs <- c(tt$bs, b1$time + b2$time)
    s$bs <- c(s$bs, sqrt(bridgesampling::error_measures(b1$value)$re2 + bridgesampling::error_measures(b2$value)$re2))
  }
  add(paste0("table3_", nm), "bayes_factor_nce", e$two, s$two, tt$two)
  add(paste0("table3_", nm), "bayes_factor_marglik(marglik_nce)", e$ml, s$ml, tt$ml)
  add(paste0("table3_", nm), "bridgesampling", e$bs, s$bs, tt$bs)
}

out <- do.call(rbind, rows)
cat(sprintf("\n%d replications, %d draws per sample (bridgesampling's mean_se: sqrt of its re2)\n\n", reps, n))
print(format(out, digits = 3), row.names = FALSE)
