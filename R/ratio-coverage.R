# Expected coverage of an amortised ratio's posteriors (Hermans et al. 2022): fresh simulations
# (theta_i, s_i) from the prior predictive; for each, the posterior prior x exp(log ratio) at
# s_i (by importance sampling over shared prior draws where that keeps an adequate effective
# sample, else by SMC), and the credible level of theta_i (the posterior mass denser than it). A
# calibrated posterior puts theta_i within its level-alpha highest-density region with
# probability alpha; a log ratio too flat (a stiff classifier) covers more often, one too sharp less.

#' Expected coverage of an amortised ratio estimator's posteriors
#'
#' Checks whether the posteriors of [ratio_posterior()] are as wide as they should be, without
#' knowing the exact posterior. `n` fresh pairs (theta_i, s_i) are simulated from the prior
#' predictive; for each, the posterior prior x exp(log ratio) at s_i is approximated, and the
#' credible level of the true theta_i is the posterior mass at densities above its own. For the
#' exact posterior these levels are uniform: theta_i falls in the level-alpha highest-density
#' region with probability alpha. Coverage above alpha means posteriors too wide (a log ratio
#' too flat, as a classifier too stiff for its data gives), below alpha too narrow
#' (overconfident). This is the expected-coverage check of Hermans et al. (2022).
#'
#' Each pair's posterior is sampled (`method = "auto"`) by importance sampling over `n_draws`
#' prior draws shared by all pairs where its effective sample is at least 200 (or a tenth of
#' `n_draws`, if smaller), and otherwise by
#' the tempered SMC sampler of [ratio_posterior()] with `n_chains` particles and `n_draws` draws
#' (posteriors narrow against the prior, where a few prior draws carry all the weight and the
#' levels and ranks would be coarse). The defaults were chosen on the two-moons network posterior
#' (`bench/README.md`, session 49): there the SMC credible levels of 100 pairs differed from
#' those of importance sampling over 200,000 prior draws by a median of 0.008 (at most 0.047).
#'
#' It checks calibration on average over the prior predictive, not the posterior of one observed
#' data set, and it cannot see a log ratio that ignores the data altogether (the prior is
#' calibrated). Checked against truth: on the Gaussian mean model of the examples with the exact
#' log ratio, coverages were within 2 standard errors of nominal; with the exact log ratio
#' halved (posteriors 1.41 times too wide) and doubled (0.71 times) the check reported
#' `"too wide"` and `"too narrow"`; on a posterior 100 times narrower than its prior (sampled by
#' SMC) likewise within 2.5 standard errors with the exact log ratio and `"too narrow"` at every
#' level with it doubled (`tests/testthat/test-ratio-coverage.R`). On two moons and ARCH(1) see
#' `bench/calibration.R` and `bench/README.md`.
#'
#' @param object An `nce_ratio` from [ratio_amortised()] (or an `nce_eig` / `nce_design` whose
#'   classifier serves, as in [ratio_posterior()]).
#' @param n Fresh simulations (test pairs).
#' @param levels Credible levels at which to report coverage, in (0, 1).
#' @param n_draws Prior draws for the importance-sampling posteriors (shared by all pairs), and
#'   draws of each SMC posterior.
#' @param method `"auto"` (importance sampling where its effective sample is at least 200 or a
#'   tenth of `n_draws`, else SMC), `"smc"` (every pair by SMC) or `"importance"` (every pair by
#'   importance sampling).
#' @param n_chains Particles of each SMC posterior (at most `n_draws`).
#' @return A data frame with one row per level: `level`, `coverage` (the share of the `n` pairs
#'   whose true theta lies in the level's highest-density region), `mc.error` (its Monte Carlo
#'   standard error over the pairs, \eqn{\sqrt{c(1-c)/n}}), `std.error` (the binomial
#'   standard error at nominal coverage, \eqn{\sqrt{\alpha(1-\alpha)/n}}), `z` (their
#'   difference in standard errors) and `verdict` (`"calibrated"` within 3 standard errors,
#'   `"too wide"` or `"too narrow"`; 3, not 2, because several levels are tested at once and the
#'   importance-sampling posteriors add their own error), of class `nce_ratio_coverage` (a data
#'   frame; [plot.nce_ratio_coverage()] draws it). Attributes: `credible_levels` (each
#'   pair's credible level of its true theta; uniform on (0, 1) when calibrated), `ranks` (the
#'   simulation-based calibration ranks: per pair and parameter, the posterior mass below the true
#'   value; uniform when calibrated), `ess` (each pair's effective sample size: importance
#'   sampling's, or the smallest over the parameters of SMC's), `sampler` (`"importance"` or
#'   `"smc"` for each pair), `time`.
#' @section What it refuses:
#' * `object` not a ratio estimator, `n` not a whole number in 10..100000, `n_draws` not a whole
#'   number in 100..1e6, `levels` not numbers in (0, 1), `method` not one of the choices,
#'   `n_chains` not a whole number in 4..100000 (`nce_error_input`);
#' * fewer than 10 successful simulations (`nce_error_simulation`).
#' @references Hermans, J., Delaunoy, A., Rozet, F., Wehenkel, A., Begy, V. and Louppe, G.
#'   (2022). A trust crisis in simulation-based inference? Your posterior approximations can be
#'   unfaithful. TMLR.
#' @seealso [ratio_amortised()], [ratio_posterior()]
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 1000, batch = TRUE,
#'                      formula = ~ te(mu, m, k = 5))
#' ratio_coverage(r, n = 100, n_draws = 500)
#' @export
ratio_coverage <- function(object, n = 200L, levels = c(0.5, 0.8, 0.95), n_draws = 2000L,
                           method = c("auto", "smc", "importance"), n_chains = 500L) {
  ucall <- sys.call()
  object <- as_ratio(object, ucall)
  check_count(n, min = 10, max = 1e5)
  check_count(n_draws, min = 100, max = 1e6)
  method <- check_choice(method, c("auto", "smc", "importance"), "method", ucall)
  check_count(n_chains, min = 4, max = 1e5)
  if (!is.numeric(levels) || !length(levels) || anyNA(levels) || any(levels <= 0 | levels >= 1)) {
    check_fail("numbers in (0, 1)", levels, "levels", ucall)
  }
  pr <- object$prior
  pars <- object$parameters
  t0 <- proc.time()[["elapsed"]]
  th <- as_theta_matrix(pr$sample(n), pr$names, call = ucall)
  sims <- run_simulations(object$simulator, object$summaries, th, 1L, object$batch, 100L, call = ucall)
  ok <- which(sims$ok)
  if (length(ok) < 10L) nce_abort("fewer than 10 of the test simulations succeeded.", "simulation", call = ucall)
  th <- sims$theta[ok, , drop = FALSE]
  s <- match_summary_columns(sims$summaries[ok, , drop = FALSE], object$summary_names, ucall)
  lp_true <- pr$log_density(th)
  res <- if (method == "smc") {
    list(cred = rep(NA_real_, nrow(th)), ranks = matrix(NA_real_, nrow(th), length(pars)), ess = rep(0, nrow(th)))
  } else {
    coverage_importance(object, th, s, lp_true, n_draws, ucall)
  }
  # Pairs whose importance sample is thin (a posterior narrow against the prior) go to SMC.
  redo <- switch(method, auto = which(res$ess < min(coverage_min_ess, n_draws / 10)), smc = seq_len(nrow(th)),
                 importance = integer())
  sampler <- rep("importance", nrow(th))
  for (i in redo) {
    one <- coverage_smc(object, th[i, , drop = FALSE], s[i, ], lp_true[i], n_draws, n_chains, ucall)
    res$cred[i] <- one$cred
    res$ranks[i, ] <- one$ranks
    res$ess[i] <- one$ess
    sampler[i] <- "smc"
  }
  cred <- res$cred
  m <- sum(!is.na(cred))
  coverage <- vapply(levels, function(a) mean(cred <= a, na.rm = TRUE), 0)
  se <- sqrt(levels * (1 - levels) / m)
  z <- (coverage - levels) / se
  out <- data.frame(level = levels, coverage = coverage, mc.error = sqrt(coverage * (1 - coverage) / m),
                    std.error = se, z = z,
                    verdict = ifelse(z > 3, "too wide", ifelse(z < -3, "too narrow", "calibrated")),
                    stringsAsFactors = FALSE)
  ranks <- res$ranks
  dimnames(ranks) <- list(NULL, pars)
  attr(out, "credible_levels") <- cred
  attr(out, "ranks") <- ranks
  attr(out, "ess") <- res$ess
  attr(out, "sampler") <- sampler
  attr(out, "time") <- proc.time()[["elapsed"]] - t0
  if (method == "importance" && stats::median(res$ess) < 50) {
    nce_warn(sprintf(paste("the importance-sampling posteriors kept a median effective sample of %.0f of %d prior",
                           "draws: the check is coarse where posteriors are narrow; use method = \"auto\""),
                     stats::median(res$ess), n_draws), "ess", call = ucall)
  }
  class(out) <- c("nce_ratio_coverage", class(out))
  out
}

# Importance samples below this effective size (or a tenth of the draws) are replaced by SMC in
# ratio_coverage(): the credible level of one pair then has a Monte Carlo sd of at most about 0.035.
coverage_min_ess <- 200

# Each pair's posterior by importance sampling over `n_draws` prior draws shared by all pairs:
# the credible level of its true theta (the posterior mass denser than it), its SBC ranks (the
# mass below it, per parameter) and the effective sample size.
coverage_importance <- function(object, th, s, lp_true, n_draws, call) {
  pr <- object$prior
  pars <- object$parameters
  draws <- as_theta_matrix(pr$sample(n_draws), pr$names, call = call)
  lp_draws <- pr$log_density(draws)
  k <- nrow(th)
  # Pairs in blocks of about 50,000 rows per predict() call.
  block <- max(1L, floor(5e4 / (n_draws + 1)))
  cred <- ess <- numeric(k)
  ranks <- matrix(NA_real_, k, length(pars))
  for (b in split(seq_len(k), ceiling(seq_len(k) / block))) {
    if (inherits(object, "nce_ratio_mlp")) {
      # The network reads (and embeds) each test pair's data once for all its draws.
      h <- vapply(b, function(i) observed_log_ratio(object, rbind(draws, th[i, , drop = FALSE]), s[i, ]),
                  numeric(n_draws + 1L))
    } else {
      rows <- do.call(rbind, lapply(b, function(i) rbind(draws, th[i, , drop = FALSE])))
      h <- ratio_log_ratio(object, rows, s[rep(b, each = n_draws + 1L), , drop = FALSE])
    }
    h <- matrix(h, n_draws + 1L)
    for (j in seq_along(b)) {
      i <- b[j]
      h_draws <- h[seq_len(n_draws), j]
      w <- normalise_log_weights(h_draws)
      truth <- lp_true[i] + h[n_draws + 1L, j]
      cred[i] <- if (is.finite(truth)) sum(w[lp_draws + h_draws > truth]) else NA_real_
      ess[i] <- 1 / sum(w^2)
      ranks[i, ] <- colSums(w * (draws[, pars, drop = FALSE] < rep(th[i, pars], each = n_draws)))
    }
  }
  list(cred = cred, ranks = ranks, ess = ess)
}

# One pair's posterior by the SMC sampler of ratio_posterior() (`n_chains` particles, `n_draws`
# draws): credible level, SBC ranks and the smallest effective sample size over the parameters.
coverage_smc <- function(object, th1, s1, lp_true, n_draws, n_chains, call) {
  pr <- object$prior
  pars <- object$parameters
  lr <- function(x) observed_log_ratio(object, x, s1)
  res <- ratio_smc(lr, pr, n_draws, min(n_chains, n_draws), call, thin = 10L)
  # The prior's log density in R's convention at the draws and the truth alike.
  dens <- pr$log_density(res$draws) + res$log_ratio
  truth <- lp_true + lr(th1)
  list(cred = if (is.finite(truth)) mean(dens > truth) else NA_real_,
       ranks = colMeans(res$draws[, pars, drop = FALSE] < rep(th1[1L, pars], each = n_draws)),
       ess = min(res$ess))
}

#' Plot a coverage check
#'
#' The expected-coverage curve of [ratio_coverage()] (the share of test pairs whose true
#' parameter lies in the posterior's level-alpha highest-density region, against alpha, with a
#' pointwise binomial band of 2 standard errors about the diagonal) and, per parameter, the
#' histogram of the simulation-based calibration ranks (the posterior mass below the true value:
#' uniform when calibrated; a hump means posteriors too wide, a U too narrow, a slope a bias).
#'
#' @param x A result of [ratio_coverage()].
#' @inheritParams nce_vocabulary
#' @return `x`, invisibly.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 1000, batch = TRUE,
#'                      formula = ~ te(mu, m, k = 5))
#' plot(ratio_coverage(r, n = 100, n_draws = 500))
#' @export
plot.nce_ratio_coverage <- function(x, ...) {
  cred <- attr(x, "credible_levels")
  ranks <- attr(x, "ranks")
  cred <- cred[!is.na(cred)]
  op <- graphics::par(mfrow = c(1L, 1L + ncol(ranks)))
  on.exit(graphics::par(op))
  a <- seq(0, 1, length.out = 101)
  band <- 2 * sqrt(a * (1 - a) / length(cred))
  plot(a, vapply(a, function(l) mean(cred <= l), 0), type = "l", xlab = "credible level", ylab = "coverage",
       main = "Expected coverage", xlim = c(0, 1), ylim = c(0, 1))
  graphics::polygon(c(a, rev(a)), c(a - band, rev(a + band)), col = grDevices::adjustcolor("grey", 0.4), border = NA)
  graphics::abline(0, 1, lty = 2)
  for (j in seq_len(ncol(ranks))) {
    graphics::hist(ranks[, j], breaks = seq(0, 1, by = 0.1), main = paste("Ranks of", colnames(ranks)[j]),
                   xlab = "posterior mass below the truth", col = "grey85")
    graphics::abline(h = sum(!is.na(ranks[, j])) / 10, lty = 2)
  }
  invisible(x)
}

# The test simulations' summaries as the classifier's columns, by name.
match_summary_columns <- function(s, names, call) {
  if (is.null(colnames(s)) || !all(names %in% colnames(s))) {
    nce_abort("the summaries of the test simulations lack some of the classifier's summaries.", "simulation",
              call = call)
  }
  s[, names, drop = FALSE]
}
