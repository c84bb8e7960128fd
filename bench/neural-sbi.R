# Neural ratio estimation from raw data against exact posteriors (issue 74's targets):
# - ARCH(1) from the raw 100-point series (no hand-made summaries), embed_series(window = 3):
#   the simulator vignette's series (seed 20170530) and 10 others (seeds 1-10), exact posterior
#   on a 101 x 100 grid; target: sds within 1.25x and means within 0.05 of exact, <= 20,000
#   simulations.
# - Exchangeable data: 50 draws of N(mu, sigma^2) under the conjugate normal-inverse-gamma prior,
#   read raw through embed_set(); exact posterior in closed form; target: sds within 1.1x and
#   means within 0.05 posterior sds of exact.
# Every fit's posterior comes from ratio_posterior()'s default sampler (SMC); its effective sample
# size is printed. Optional arguments: which part ("arch", "normal", or both by default), the
# number of ARCH series (default 11), the loss, and the networks per fit (default 1: the default
# ensemble of 5 takes five times as long).
# Run: Rscript bench/neural-sbi.R [arch|normal|both] [n_series] [loss] [n_networks]
suppressMessages(library(nce))
source("tests/testthat/helper-arch.R")
args <- commandArgs(TRUE)
part <- if (length(args) >= 1L) args[1] else "both"
n_series <- if (length(args) >= 2L) as.integer(args[2]) else 11L
loss <- if (length(args) >= 3L) args[3] else "nrec"
n_networks <- if (length(args) >= 4L) as.integer(args[4]) else 1L
cat(sprintf("nce %s, loss %s, %d thread(s), %s\n", utils::packageVersion("nce"), loss,
            getOption("nce.threads", 2L), format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")))

if (part %in% c("arch", "both")) {
  prior <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
  gh <- gauss_hermite_normal()
  grid <- as.matrix(expand.grid(t1 = seq(-1, 1, length.out = 101), t2 = seq(0.005, 0.995, length.out = 100)))
  set.seed(2026)
  t_fit <- system.time(r <- ratio_amortised(arch_simulate, NULL, prior, n = 20000, batch = TRUE,
                                             embedding = embed_series(window = 3), loss = loss,
                                             n_networks = n_networks))[["elapsed"]]
  print(r)
  cat(sprintf("ARCH(1), raw series, 20,000 simulations: fit %.1f s\n", t_fit))
  seeds <- c(20170530L, seq_len(n_series - 1L))
  rows <- lapply(seeds, function(sd) {
    set.seed(sd)
    y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
    ll <- apply(grid, 1, function(th) arch_loglik(drop(y_obs), th[["t1"]], th[["t2"]], gh))
    w <- exp(ll - max(ll))
    w <- w / sum(w)
    ex_mean <- colSums(grid * w)
    ex_sd <- sqrt(colSums(grid^2 * w) - ex_mean^2)
    t0 <- proc.time()[["elapsed"]]
    post <- ratio_posterior(r, y_obs)
    data.frame(series = sd, mean_err_t1 = coef(post)[["t1"]] - ex_mean[1], mean_err_t2 = coef(post)[["t2"]] - ex_mean[2],
               sd_ratio_t1 = sqrt(vcov(post)[1, 1]) / ex_sd[1], sd_ratio_t2 = sqrt(vcov(post)[2, 2]) / ex_sd[2],
               ess = min(post$ess), sample_s = proc.time()[["elapsed"]] - t0)
  })
  tab <- do.call(rbind, rows)
  print(format(tab, digits = 3), row.names = FALSE)
  ok <- abs(tab$mean_err_t1) <= 0.05 & abs(tab$mean_err_t2) <= 0.05 &
    pmax(tab$sd_ratio_t1, 1 / tab$sd_ratio_t1, tab$sd_ratio_t2, 1 / tab$sd_ratio_t2) <= 1.25
  cat(sprintf("ARCH(1): %d of %d series within the target (means 0.05, sds 1.25x); min ESS %.0f\n\n", sum(ok),
              nrow(tab), min(tab$ess)))
}

if (part %in% c("normal", "both")) {
  # Normal-inverse-gamma prior: sigma2 ~ InvGamma(a0, b0), mu | sigma2 ~ N(m0, sigma2 / k0).
  m0 <- 0
  k0 <- 1
  a0 <- 3
  b0 <- 2
  n_obs <- 50L
  prior <- prior_custom(
    sample = function(n) {
      s2 <- 1 / stats::rgamma(n, a0, b0)
      cbind(mu = stats::rnorm(n, m0, sqrt(s2 / k0)), sigma2 = s2)
    },
    log_density = function(th) {
      s2 <- th[, "sigma2"]
      out <- ifelse(s2 > 0, stats::dgamma(1 / s2, a0, b0, log = TRUE) - 2 * log(s2) +
                      stats::dnorm(th[, "mu"], m0, sqrt(s2 / k0), log = TRUE), -Inf)
      out[is.na(out)] <- -Inf
      out
    },
    names = c("mu", "sigma2"), lower = c(mu = -Inf, sigma2 = 0))
  sim <- function(theta, n) {
    matrix(stats::rnorm(n * n_obs, theta[, "mu"], sqrt(theta[, "sigma2"])), n, n_obs)
  }
  set.seed(2027)
  t_fit <- system.time(r <- ratio_amortised(sim, NULL, prior, n = 20000, batch = TRUE,
                                             embedding = embed_set(), loss = loss,
                                             n_networks = n_networks))[["elapsed"]]
  cat(sprintf("Normal, 50 exchangeable draws, raw: fit %.1f s\n", t_fit))
  rows <- lapply(1:10, function(sd) {
    set.seed(100 + sd)
    th <- prior$sample(1)
    x <- sim(th, 1)
    xb <- mean(x)
    kn <- k0 + n_obs
    mn <- (k0 * m0 + n_obs * xb) / kn
    an <- a0 + n_obs / 2
    bn <- b0 + 0.5 * sum((x - xb)^2) + k0 * n_obs * (xb - m0)^2 / (2 * kn)
    # Exact marginals: mu ~ t_{2 an}(mn, bn / (an kn)), sigma2 ~ InvGamma(an, bn).
    ex_mean <- c(mn, bn / (an - 1))
    ex_sd <- c(sqrt(bn / (an * kn) * (2 * an) / (2 * an - 2)), sqrt(bn^2 / ((an - 1)^2 * (an - 2))))
    post <- ratio_posterior(r, x)
    data.frame(data_set = sd, mean_err_mu = (coef(post)[["mu"]] - ex_mean[1]) / ex_sd[1],
               mean_err_sigma2 = (coef(post)[["sigma2"]] - ex_mean[2]) / ex_sd[2],
               sd_ratio_mu = sqrt(vcov(post)[1, 1]) / ex_sd[1], sd_ratio_sigma2 = sqrt(vcov(post)[2, 2]) / ex_sd[2],
               ess = min(post$ess))
  })
  tab <- do.call(rbind, rows)
  print(format(tab, digits = 3), row.names = FALSE)
  ok <- abs(tab$mean_err_mu) <= 0.05 & abs(tab$mean_err_sigma2) <= 0.05 &
    pmax(tab$sd_ratio_mu, 1 / tab$sd_ratio_mu, tab$sd_ratio_sigma2, 1 / tab$sd_ratio_sigma2) <= 1.1
  cat(sprintf("Normal: %d of %d data sets within the target (means 0.05 sds, sds 1.1x); min ESS %.0f\n", sum(ok),
              nrow(tab), min(tab$ess)))
}
