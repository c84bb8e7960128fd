# Effective sample size of ratio_posterior()'s SMC sampler, and whether it is honest (issue 74:
# "at least 2,000 effective draws of 10,000 on every task, with an honest effective sample
# size"). For each target and sampler setting: `reps` independent runs of 10,000 draws (2,000
# particles, 5 kept steps per chain); the ESS reported (the multi-chain estimate, smallest over
# parameters and its mean over runs), the variance over runs of the posterior-mean estimate of the
# first parameter against sd^2 / ESS (ratio near 1: honest; above 1: the ESS overstates), and the
# log-ratio evaluations per draw. Settings: the random-walk chains alone ("rw", the sampler before
# session 49) and with independence moves from a mixture fitted to the particles ("imh", the
# default), each at thin = 10 sweeps per kept draw, and "imh" at thin = 4.
# Targets: a crescent (uniform prior on (-2, 2)^2, ring of radius 1, sd 0.1, tilted up), two
# normal modes of weights 0.3 and 0.7, a correlated 10-D Gaussian (AR(1) correlation 0.8), and
# the sbibm two-moons posterior of a network fitted by ratio_amortised() at its defaults (10,000
# simulations; observation simulated at theta = (0.25, 0.25)).
# Run from the repository root: Rscript bench/smc-ess.R [reps] [targets]
suppressMessages(library(nce))
source("bench/sbibm-tasks.R")
args <- commandArgs(TRUE)
reps <- if (length(args) >= 1L) as.integer(args[1]) else 40L
which_targets <- if (length(args) >= 2L) strsplit(args[2], ",")[[1]] else c("crescent", "bimodal", "gauss10", "two_moons")
options(nce.threads = 2L)
`%||%` <- function(a, b) if (is.null(a)) b else a
cat(sprintf("nce %s, %d thread(s), %s; shared machine (other jobs running)\n", utils::packageVersion("nce"),
            getOption("nce.threads"), format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")))

targets <- list(
  crescent = list(prior = prior_uniform(a = c(-2, 2), b = c(-2, 2)), lr = function(th) {
    r <- sqrt(th[, 1]^2 + th[, 2]^2)
    -(r - 1)^2 / (2 * 0.01) + 2 * th[, 2]
  }),
  bimodal = list(prior = prior_uniform(a = c(-5, 5), b = c(-5, 5)), lr = function(th) {
    q <- function(cc) -((th[, 1] - cc)^2 + (th[, 2] - cc)^2) / (2 * 0.09)
    a <- log(0.3) + q(-2)
    b <- log(0.7) + q(2)
    m <- pmax(a, b)
    m + log(exp(a - m) + exp(b - m))
  }, mean1 = 0.3 * -2 + 0.7 * 2, sd1 = sqrt(0.09 + 0.21 * 16)),
  gauss10 = local({
    s <- 0.5 + 0.05 * (0:9)
    cc <- outer(s, s) * 0.8^abs(outer(0:9, 0:9, "-"))
    p <- solve(cc)
    mu <- 1 - 0.2 * (0:9)
    pr <- do.call(prior_normal, c(list(mean = stats::setNames(rep(0, 10), paste0("t", 1:10))),
                                  list(sd = stats::setNames(rep(3, 10), paste0("t", 1:10)))))
    lam <- diag(10) / 9 + p
    post_cov <- solve(lam)
    list(prior = pr, lr = function(th) {
      r <- sweep(th, 2, mu)
      -0.5 * rowSums((r %*% p) * r)
    }, mean1 = drop(post_cov %*% (p %*% mu))[1], sd1 = sqrt(post_cov[1, 1]))
  })
)

if ("two_moons" %in% which_targets) {
  tk <- sbibm_task("two_moons")
  set.seed(1)
  fit <- ratio_amortised(tk$simulator, NULL, tk$prior, n = 10000, batch = TRUE)
  x_obs <- tk$simulator(cbind(theta1 = 0.25, theta2 = 0.25), 1)
  s_obs <- stats::setNames(drop(x_obs), fit$summary_names)
  targets$two_moons <- list(prior = tk$prior, lr = function(th) nce:::observed_log_ratio(fit, th, s_obs))
}

run <- function(tg, thin, independence) {
  evals <- 0
  lr <- function(th) {
    evals <<- evals + nrow(th)
    tg$lr(th)
  }
  t0 <- proc.time()[["elapsed"]]
  r <- nce:::ratio_smc(lr, tg$prior, 10000L, 2000L, quote(bench), thin = thin, independence = independence)
  c(mean1 = mean(r$draws[, 1]), sd1 = stats::sd(r$draws[, 1]), ess = min(r$ess), ess1 = r$ess[[1]],
    evals = evals / 10000, imh = r$smc$independence_acceptance, comps = r$smc$components,
    secs = proc.time()[["elapsed"]] - t0)
}

settings <- list(rw = list(thin = 10L, independence = FALSE), imh = list(thin = 10L, independence = TRUE),
                 imh4 = list(thin = 4L, independence = TRUE))
rows <- list()
for (nm in intersect(which_targets, names(targets))) {
  tg <- targets[[nm]]
  for (st in names(settings)) {
    set.seed(49)
    res <- t(vapply(seq_len(reps), function(k) run(tg, settings[[st]]$thin, settings[[st]]$independence), numeric(8)))
    sd1 <- tg$sd1 %||% mean(res[, "sd1"])
    pred <- mean(sd1^2 / res[, "ess1"])
    rows[[length(rows) + 1L]] <- data.frame(
      target = nm, sampler = st, thin = settings[[st]]$thin, ess_min = mean(res[, "ess"]),
      ess1 = mean(res[, "ess1"]), var_ratio = stats::var(res[, "mean1"]) / pred,
      bias_se = if (is.null(tg$mean1)) NA else (mean(res[, "mean1"]) - tg$mean1) / sqrt(stats::var(res[, "mean1"]) / reps),
      evals_per_draw = mean(res[, "evals"]), imh_acc = mean(res[, "imh"]), components = mean(res[, "comps"]),
      secs = mean(res[, "secs"]))
    print(rows[[length(rows)]], digits = 3, row.names = FALSE)
  }
}
cat(sprintf("\n%d runs each; var_ratio = var over runs of the mean of parameter 1 / mean(sd^2 / ESS); its relative",
            reps), sprintf("sd is about sqrt(2 / %d) = %.2f\n", reps - 1L, sqrt(2 / (reps - 1))))
print(format(do.call(rbind, rows), digits = 3), row.names = FALSE)
