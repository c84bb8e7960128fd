# Benchmark (not run in tests): marglik_nce() with telescoping waymarks (waymarks = "auto") against
# the single classifier (waymarks = "none") and bridgesampling on the same draws.
#   R_LIBS=$PWD/.Rlib Rscript bench/telescope.R                 # all cases
#   NCE_BENCH_CASES=gamma300 NCE_BENCH_SEEDS=10 R_LIBS=$PWD/.Rlib Rscript bench/telescope.R
# Cases: gamma<D> (a product of D Gamma(2, 1) kernels, log f = sum(log x - x), lb = 0, exact
# log Z = 0, 10,000 independent draws), hier100 (a conjugate hierarchical normal model with 100
# groups: y_j ~ N(theta_j, s_j^2), theta_j ~ N(mu, 1), mu ~ N(0, 10^2); D = 101, exact log
# marginal likelihood from y ~ N(0, diag(s^2) + I + 100 11'); 10,000 exact posterior draws).
library(nce)
cases <- strsplit(Sys.getenv("NCE_BENCH_CASES", "gamma10,gamma20,gamma100,hier100,gamma300,gamma1000"), ",")[[1]]
seeds <- as.integer(Sys.getenv("NCE_BENCH_SEEDS", "10"))
n <- as.integer(Sys.getenv("NCE_BENCH_DRAWS", "10000"))
with_bs <- requireNamespace("bridgesampling", quietly = TRUE) && Sys.getenv("NCE_BENCH_BS", "1") == "1"

gamma_case <- function(d) {
  list(gen = function(n) matrix(stats::rgamma(n * d, 2, 1), n, d), lk = function(x) rowSums(log(x) - x),
       lb = 0, ub = Inf, exact = 0)
}
hier_case <- function(J = 100L) {
  set.seed(99)
  s <- stats::runif(J, 0.5, 2)
  theta <- stats::rnorm(J, 1, 1)
  y <- stats::rnorm(J, theta, s)
  tau <- 1
  sd_mu <- 10
  Sy <- diag(s^2 + tau^2) + sd_mu^2
  exact <- -0.5 * (J * log(2 * pi) + as.numeric(determinant(Sy)$modulus) + sum(y * solve(Sy, y)))
  v_mu <- 1 / (1 / sd_mu^2 + sum(1 / (s^2 + tau^2)))
  m_mu <- v_mu * sum(y / (s^2 + tau^2))
  prec <- 1 / s^2 + 1 / tau^2
  list(gen = function(n) {
    mu <- stats::rnorm(n, m_mu, sqrt(v_mu))
    th <- (matrix(y / s^2, n, J, byrow = TRUE) + mu / tau^2) / matrix(prec, n, J, byrow = TRUE) +
      matrix(stats::rnorm(n * J), n, J) / matrix(sqrt(prec), n, J, byrow = TRUE)
    cbind(mu, th)
  }, lk = function(p) {
    th <- p[, -1, drop = FALSE]
    rowSums(stats::dnorm(matrix(y, nrow(p), J, byrow = TRUE), th, matrix(s, nrow(p), J, byrow = TRUE), log = TRUE)) +
      rowSums(stats::dnorm(th, p[, 1], tau, log = TRUE)) + stats::dnorm(p[, 1], 0, sd_mu, log = TRUE)
  }, lb = -Inf, ub = Inf, exact = exact)
}
bs <- function(x, lk, lb, ub) {
  nm <- paste0("x", seq_len(ncol(x)))
  colnames(x) <- nm
  bridgesampling::bridge_sampler(x, log_posterior = function(p, data) lk(matrix(p, 1)), data = NULL,
                                 lb = stats::setNames(rep_len(lb, ncol(x)), nm),
                                 ub = stats::setNames(rep_len(ub, ncol(x)), nm), silent = TRUE)$logml
}
timed <- function(expr) {
  t <- system.time(v <- expr)[["elapsed"]]
  list(value = v, time = t)
}

rows <- list()
for (cs_name in cases) {
  cs <- if (cs_name == "hier100") hier_case() else gamma_case(as.integer(sub("gamma", "", cs_name)))
  for (s in seq_len(seeds)) {
    set.seed(1000 + s)
    x <- cs$gen(n)
    a <- timed(marglik_nce(x, cs$lk, lb = cs$lb, ub = cs$ub, waymarks = "auto"))
    o <- timed(marglik_nce(x, cs$lk, lb = cs$lb, ub = cs$ub, waymarks = "none"))
    b <- if (with_bs && ncol(x) <= 300) timed(bs(x, cs$lk, cs$lb, cs$ub)) else list(value = NA, time = NA)
    tel <- a$value$telescope
    rows[[length(rows) + 1L]] <- data.frame(
      case = cs_name, seed = s, auto = a$value$logml - cs$exact, auto_se = a$value$se,
      waymarks = if (is.null(tel)) 0L else length(tel$b) - 2L, time_auto = a$time,
      single = o$value$logml - cs$exact, single_se = o$value$se, single_acc = if (is.null(tel)) NA else tel$single[["accuracy"]],
      time_single = o$time, bridgesampling = b$value - cs$exact, time_bs = b$time)
    print(utils::tail(rows[[length(rows)]], 1), row.names = FALSE, digits = 3)
  }
}
out <- do.call(rbind, rows)
cat(sprintf("\n%d draws per estimate (%d in the estimate, split = TRUE); errors against the exact log Z\n\n", n, n / 2))
summ <- do.call(rbind, lapply(split(out, out$case), function(d) {
  data.frame(case = d$case[1], max_abs_auto = max(abs(d$auto)), rmse_auto = sqrt(mean(d$auto^2)),
             mean_se_auto = mean(d$auto_se), covered_2se = mean(abs(d$auto) <= 2 * d$auto_se),
             waymarks = mean(d$waymarks), time_auto = mean(d$time_auto),
             max_abs_single = max(abs(d$single)), rmse_single = sqrt(mean(d$single^2)), time_single = mean(d$time_single),
             max_abs_bs = max(abs(d$bridgesampling)), rmse_bs = sqrt(mean(d$bridgesampling^2)), time_bs = mean(d$time_bs))
}))
print(format(summ, digits = 3), row.names = FALSE)
