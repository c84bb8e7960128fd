# The 5-parameter Gaussian of the report (section 3.2; Hermans, Begy and Louppe 2020):
# theta ~ U(-3, 3)^5, x = four draws of a 2-D normal with mean (theta1, theta2), sds theta3^2,
# theta4^2 and correlation tanh(theta5); theta* = (0.7, -2.9, -1.0, -0.9, 0.6). The posterior
# marginals by amortised ratio estimation (ratio_amortised() + ratio_posterior(), Metropolis)
# against random-walk Metropolis on the exact likelihood. The summaries (means, log variances,
# atanh of the correlation) are sufficient, so both target the same posterior.
# Writes vignettes/gaussian5-marginals.csv (histograms), which vignettes/simulator.Rmd plots.
# Run: R_LIBS=.Rlib Rscript bench/gaussian5.R [n] [formula] [discrete]   (from the package root)
# formula: "default" (ratio_amortised()'s defaults: with 5 parameters and 5 summaries,
# classifier = "auto" takes the neural network), "gam" (the GAM's default formula: a smooth of
# each parameter and summary and pairwise ti() terms), "A" or "B" (the three-way terms of the
# vignette's table); discrete: "discrete" for ratio_amortised(discrete = TRUE). Only the default
# call (10,000 pairs, the default of ratio_amortised(), defaults, exact) writes the CSV the vignette plots.
suppressPackageStartupMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
n_sim <- if (length(args)) as.integer(args[1]) else 10000L
form_name <- if (length(args) > 1L) args[2] else "default"
discrete <- length(args) > 2L && identical(args[3], "discrete")
default_formula_g5 <- function() {
  nce:::default_ratio_formula(paste0("t", 1:5), c("m1", "m2", "lv1", "lv2", "z"))
}
smooths <- ~ s(t1) + s(t2) + s(t3) + s(t4) + s(t5) + s(m1) + s(m2) + s(lv1) + s(lv2) + s(z) +
  ti(t1, m1) + ti(t2, m2) + ti(t3, lv1) + ti(t4, lv2) + ti(t5, z)
form <- switch(form_name,
  default = NULL,
  gam = default_formula_g5(),
  A = stats::update(smooths, ~ . + ti(t1, m1, t3, k = 4) + ti(t2, m2, t4, k = 4)),
  B = stats::update(smooths, ~ . + ti(t1, m1, t3, k = 5) + ti(t2, m2, t4, k = 5) + ti(t1, m1, t5, k = 4) +
                      ti(t2, m2, t5, k = 4)),
  stop("formula must be default, gam, A or B"))
write_csv <- n_sim == 10000L && form_name == "default" && !discrete
options(nce.threads = 2L)

here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "gaussian5-model.R"))

theta_star <- c(t1 = 0.7, t2 = -2.9, t3 = -1.0, t4 = -0.9, t5 = 0.6)
set.seed(42)
x0 <- g5_simulate(matrix(theta_star, 1, dimnames = list(NULL, names(theta_star))), 1)
pr <- prior_uniform(t1 = c(-3, 3), t2 = c(-3, 3), t3 = c(-3, 3), t4 = c(-3, 3), t5 = c(-3, 3))

# Exact: random-walk Metropolis, 100 chains moved together, proposal sd 0.3 (the report's
# N(theta, I) proposal accepts too rarely for short chains), 2000 burn-in and 5000 kept steps.
t_exact <- system.time({
  nc <- 100L
  cur <- matrix(stats::runif(5 * nc, -3, 3), nc, 5)
  lcur <- g5_loglik(cur, x0)
  keep <- matrix(NA_real_, 5000L * nc, 5)
  acc <- 0
  for (it in 1:7000) {
    prop <- cur + matrix(stats::rnorm(5 * nc, sd = 0.3), nc, 5)
    inside <- rowSums(abs(prop) < 3) == 5
    lp <- ifelse(inside, g5_loglik(prop, x0), -Inf)
    a <- log(stats::runif(nc)) < lp - lcur
    cur[a, ] <- prop[a, ]
    lcur[a] <- lp[a]
    if (it > 2000) {
      keep[(it - 2001) * nc + seq_len(nc), ] <- cur
      acc <- acc + mean(a)
    }
  }
})[["elapsed"]]
colnames(keep) <- names(theta_star)

set.seed(43)
t_amort <- system.time(r <- ratio_amortised(g5_simulate, g5_summaries, pr, n = n_sim, batch = TRUE, formula = form,
                                            discrete = discrete))[["elapsed"]]
t_post <- system.time(post <- ratio_posterior(r, x0, n_draws = 50000, method = "metropolis", n_chains = 100,
                                              burnin = 500))[["elapsed"]]

cat(sprintf("Exact-likelihood Metropolis: %d draws, acceptance %.2f, %.1f s\n", nrow(keep), acc / 5000, t_exact))
print(r)
cat(sprintf("Amortised ratio: fit %.1f s (simulation %.1f s); Metropolis %.1f s, acceptance %.2f\n", t_amort,
            r$time[["simulation"]], t_post, post$acceptance))
tab <- rbind(exact_mean = colMeans(keep), ratio_mean = colMeans(post$draws),
             exact_sd = apply(keep, 2, stats::sd), ratio_sd = apply(post$draws, 2, stats::sd))
print(round(tab, 3))
breaks <- seq(-3, 3, length.out = 61)
mids <- (breaks[-1] + breaks[-61]) / 2
hist_of <- function(d, method) {
  do.call(rbind, lapply(colnames(d), function(p) {
    h <- graphics::hist(pmin(pmax(d[, p], -3), 3), breaks = breaks, plot = FALSE)
    data.frame(method = method, parameter = p, mid = mids, density = h$density)
  }))
}
if (write_csv) {
  out <- rbind(hist_of(keep, "exact likelihood (Metropolis)"), hist_of(post$draws, "amortised ratio (Metropolis)"))
  utils::write.csv(out, "vignettes/gaussian5-marginals.csv", row.names = FALSE)
  cat("wrote vignettes/gaussian5-marginals.csv\n")
}
