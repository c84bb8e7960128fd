# snce(intercept = "transition") against survival::clogit on the same rows, at 500 to 4,000
# transitions of the truncated-exponential chain (kernel exp(2 y_t y_{t-1}) on [0, 1]), ratio 10.
# Run from the package root after `make install`:
#   R_LIBS=.Rlib Rscript bench/snce-transition.R
# Each time is the best of 3 (clogit on model.frame(fit), the rows snce fitted), 2 threads.
library(nce)
source("tests/testthat/helper-chain.R")
sizes <- as.integer(strsplit(Sys.getenv("SIZES", "500,1000,2000,4000"), ",")[[1]])
best <- function(f, reps = 3) min(vapply(seq_len(reps), function(i) system.time(f())[["elapsed"]], 0))
rows <- lapply(sizes, function(n) {
  set.seed(n)
  d <- data.frame(y = rchain(n, 2))
  set.seed(1)
  fit <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 10, intercept = "transition")
  t_snce <- best(function() {
    set.seed(1)
    snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 10, intercept = "transition")
  })
  mf <- model.frame(fit)
  mf$yy <- mf$y * mf$y_prev
  env <- list2env(list(mf = mf), parent = asNamespace("survival"))
  cl_call <- quote(clogit(.label ~ yy + offset(.offset) + strata(.transition), data = mf))
  t_cl <- best(function() eval(cl_call, env))
  cl <- eval(cl_call, env)
  data.frame(transitions = n, snce_s = t_snce, clogit_s = t_cl,
             coef_diff = abs(unname(coef(fit)["I(y * y_prev)"]) - unname(coef(cl))),
             naive_se = sqrt(vcov(fit, se_type = "naive")["I(y * y_prev)", "I(y * y_prev)"]),
             clogit_se = sqrt(vcov(cl)[1, 1]))
})
print(do.call(rbind, rows), digits = 4)
