# Benchmark (not run in tests): marglik_nce() in high dimensions. Columns: the default
# (reference = "auto": the normal reference, or the warped reference of fitted marginal transports
# and a shrunk Gaussian copula when the normal one barely overlaps the draws; waymarks = "auto"),
# reference = "warped" (run separately only where "auto" kept the normal reference),
# the single classifier against the normal reference (reference = "normal", waymarks = "none"),
# and bridgesampling (method "normal", and "warp3" with NCE_BENCH_WARP3=1) on the same draws.
# Times are CPU seconds of this process (user + system).
#   R_LIBS=$PWD/.Rlib Rscript bench/telescope.R                 # all cases
#   NCE_BENCH_CASES=gamma300 NCE_BENCH_SEEDS=10 R_LIBS=$PWD/.Rlib Rscript bench/telescope.R
# Cases: gamma<D> (a product of D Gamma(2, 1) kernels, log f = sum(log x - x), lb = 0, exact
# log Z = 0, 10,000 independent draws), hier100 (a conjugate hierarchical normal model with 100
# groups: y_j ~ N(theta_j, s_j^2), theta_j ~ N(mu, 1), mu ~ N(0, 10^2); D = 101, exact log
# marginal likelihood from y ~ N(0, diag(s^2) + I + 100 11'); 10,000 exact posterior draws).
# NCE_BENCH_BS_MAXD (default 1000): no bridgesampling above this dimension.
# NCE_BENCH_OUT: a CSV file for the per-seed rows.
library(nce)
cases <- strsplit(Sys.getenv("NCE_BENCH_CASES", "gamma10,gamma20,gamma100,hier100,gamma300,gamma1000,bf300"), ",")[[1]]
seeds <- as.integer(Sys.getenv("NCE_BENCH_SEEDS", "10"))
n <- as.integer(Sys.getenv("NCE_BENCH_DRAWS", "10000"))
with_bs <- requireNamespace("bridgesampling", quietly = TRUE) && Sys.getenv("NCE_BENCH_BS", "1") == "1"
bs_maxd <- as.integer(Sys.getenv("NCE_BENCH_BS_MAXD", "1000"))
with_warp3 <- Sys.getenv("NCE_BENCH_WARP3", "0") == "1"
out_csv <- Sys.getenv("NCE_BENCH_OUT", "")

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
bs <- function(x, lk, lb, ub, method) {
  nm <- paste0("x", seq_len(ncol(x)))
  colnames(x) <- nm
  bridgesampling::bridge_sampler(x, log_posterior = function(p, data) lk(matrix(p, 1)), data = NULL,
                                 lb = stats::setNames(rep_len(lb, ncol(x)), nm),
                                 ub = stats::setNames(rep_len(ub, ncol(x)), nm), method = method, silent = TRUE)$logml
}
none <- list(value = NA_real_, time = NA_real_)

# bf300: a Bayes factor between two Poisson models sharing a Gamma(2, 1) prior on D = 300 rates
# (y_j ~ Poisson(theta_j) against y_j ~ Poisson(2 theta_j)); the posteriors are Gamma(2 + y, 2)
# and Gamma(2 + y, 3), log K exact. bayes_factor_nce() classifies between the two posteriors;
# the other route is bayes_factor_marglik() of two marglik_nce() estimates, each against its own
# (warped) reference.
bf_case <- function(seeds, n, d = 300L) {
  set.seed(7)
  y <- stats::rpois(d, 1)
  l1 <- function(p) rowSums(sweep(log(p), 2, y, "*") - p)
  l2 <- function(p) rowSums(sweep(log(2 * p), 2, y, "*") - 2 * p)
  lprior <- function(p) rowSums(log(p) - p)
  logz <- function(c) sum(lgamma(2 + y) - (2 + y) * log(1 + c) + y * log(c) - lgamma(y + 1))
  exact <- logz(1) - logz(2)
  out <- lapply(seq_len(seeds), function(s) {
    set.seed(100 + s)
    d1 <- matrix(stats::rgamma(n * d, 2 + y, 2), n, d, byrow = TRUE)
    d2 <- matrix(stats::rgamma(n * d, 2 + y, 3), n, d, byrow = TRUE)
    k <- cpu(suppressWarnings(bayes_factor_nce(d1, d2, l1, l2)))
    m <- cpu(bayes_factor_marglik(marglik_nce(d1, function(p) l1(p) + lprior(p), lower = 0),
                                  marglik_nce(d2, function(p) l2(p) + lprior(p), lower = 0)))
    r <- data.frame(seed = s, exact = exact, direct = k$value$log_bf - exact, direct_se = k$value$se,
                    cpu_direct = k$time, marglik = m$value$log_bf - exact, marglik_se = m$value$se, cpu_marglik = m$time)
    print(r, row.names = FALSE, digits = 3)
    r
  })
  do.call(rbind, out)
}

cpu <- function(expr) {
  t0 <- proc.time()
  v <- expr
  t <- proc.time() - t0
  list(value = v, time = t[["user.self"]] + t[["sys.self"]])
}
if ("bf300" %in% cases) {
  bf <- bf_case(seeds, n)
  cat(sprintf("\nbf300: bayes_factor_nce() separated in %d of %d; marglik route RMSE %.4f, max %.4f, mean s.e. %.4f\n",
              sum(is.na(bf$direct)), nrow(bf), sqrt(mean(bf$marglik^2)), max(abs(bf$marglik)), mean(bf$marglik_se)))
  cases <- setdiff(cases, "bf300")
}

rows <- list()
for (cs_name in cases) {
  cs <- if (cs_name == "hier100") hier_case() else gamma_case(as.integer(sub("gamma", "", cs_name)))
  for (s in seq_len(seeds)) {
    set.seed(1000 + s)
    x <- cs$gen(n)
    a <- cpu(marglik_nce(x, cs$lk, lower = cs$lb, upper = cs$ub))
    o <- cpu(marglik_nce(x, cs$lk, lower = cs$lb, upper = cs$ub, reference = "normal", waymarks = "none"))
    # the warped reference where "auto" kept the normal one
    wp <- if (a$value$reference$family == "warped") a else cpu(marglik_nce(x, cs$lk, lower = cs$lb, upper = cs$ub,
                                                                           reference = "warped"))
    use_bs <- with_bs && ncol(x) <= bs_maxd
    b <- if (use_bs) cpu(bs(x, cs$lk, cs$lb, cs$ub, "normal")) else none
    w3 <- if (use_bs && with_warp3) cpu(bs(x, cs$lk, cs$lb, cs$ub, "warp3")) else none
    tel <- a$value$telescope
    rows[[length(rows) + 1L]] <- data.frame(
      case = cs_name, seed = s, auto = a$value$logml - cs$exact, auto_se = a$value$se,
      reference = a$value$reference$family, waymarks = if (is.null(tel)) 0L else length(tel$b) - 2L,
      auto_acc = a$value$reference$accuracy, cpu_auto = a$time, single = o$value$logml - cs$exact,
      single_se = o$value$se,
      single_acc = o$value$reference$accuracy, cpu_single = o$time, warped = wp$value$logml - cs$exact,
      warped_se = wp$value$se, cpu_warped = wp$time,
      bs = b$value - cs$exact, cpu_bs = b$time, bs_warp3 = w3$value - cs$exact, cpu_warp3 = w3$time)
    print(utils::tail(rows[[length(rows)]], 1), row.names = FALSE, digits = 3)
    if (nzchar(out_csv)) utils::write.csv(do.call(rbind, rows), out_csv, row.names = FALSE)
  }
}
if (length(rows)) {
  out <- do.call(rbind, rows)
  cat(sprintf("\n%d draws per estimate (%d in the estimate, split = TRUE); errors against the exact log Z\n\n", n, n / 2))
  rmse <- function(v) sqrt(mean(v^2))
  summ <- do.call(rbind, lapply(split(out, out$case), function(d) {
    data.frame(case = d$case[1], seeds = nrow(d), max_abs_auto = max(abs(d$auto)), rmse_auto = rmse(d$auto),
               mean_se_auto = mean(d$auto_se), covered_2se = mean(abs(d$auto) <= 2 * d$auto_se),
               warped = mean(d$reference == "warped"), waymarks = mean(d$waymarks), cpu_auto = mean(d$cpu_auto),
             max_abs_warped = max(abs(d$warped)), rmse_warped = rmse(d$warped), mean_se_warped = mean(d$warped_se),
             cpu_warped = mean(d$cpu_warped),
               max_abs_single = max(abs(d$single)), rmse_single = rmse(d$single), cpu_single = mean(d$cpu_single),
               max_abs_bs = max(abs(d$bs)), rmse_bs = rmse(d$bs), cpu_bs = mean(d$cpu_bs),
               rmse_warp3 = rmse(d$bs_warp3), cpu_warp3 = mean(d$cpu_warp3))
  }))
  print(format(summ, digits = 3), row.names = FALSE)
}
