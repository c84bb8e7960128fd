# Expected coverage of an amortised ratio's posteriors (Hermans et al. 2022): fresh simulations
# (theta_i, s_i) from the prior predictive; for each, the posterior prior x exp(log ratio) at
# s_i by importance sampling over shared prior draws, and the credible level of theta_i (the
# posterior mass denser than it). A calibrated posterior puts theta_i within its level-alpha
# highest-density region with probability alpha; a log ratio too flat (a stiff classifier)
# covers more often, one too sharp less.

#' Expected coverage of an amortised ratio estimator's posteriors
#'
#' Checks whether the posteriors of [ratio_posterior()] are as wide as they should be, without
#' knowing the exact posterior. `n` fresh pairs (theta_i, s_i) are simulated from the prior
#' predictive; for each, the posterior prior x exp(log ratio) at s_i is approximated by
#' importance sampling over `n_draws` prior draws (shared by all pairs), and the credible level
#' of the true theta_i is the posterior mass at densities above its own. For the exact posterior
#' these levels are uniform: theta_i falls in the level-alpha highest-density region with
#' probability alpha. Coverage above alpha means posteriors too wide (a log ratio too flat, as a
#' classifier too stiff for its data gives), below alpha too narrow (overconfident). This is the
#' expected-coverage check of Hermans et al. (2022).
#'
#' It checks calibration on average over the prior predictive, not the posterior of one observed
#' data set, and it cannot see a log ratio that ignores the data altogether (the prior is
#' calibrated). Checked against truth: on the Gaussian mean model of the examples with the exact
#' log ratio, coverages were within 2 standard errors of nominal; with the exact log ratio
#' halved (posteriors 1.41 times too wide) and doubled (0.71 times) the check reported
#' `"too wide"` and `"too narrow"` (`tests/testthat/test-ratio-coverage.R`). On ARCH(1) (the
#' simulator vignette's model, 17 summaries, the network ensemble of `ratio_amortised()` on
#' 5,000 pairs), see `bench/README.md`.
#'
#' @param object An `nce_ratio` from [ratio_amortised()] (or an `nce_eig` / `nce_design` whose
#'   classifier serves, as in [ratio_posterior()]).
#' @param n Fresh simulations (test pairs).
#' @param levels Credible levels at which to report coverage, in (0, 1).
#' @param n_draws Prior draws for each pair's importance-sampling posterior.
#' @return A data frame with one row per level: `level`, `coverage` (the share of the `n` pairs
#'   whose true theta lies in the level's highest-density region), `std.error` (the binomial
#'   standard error at nominal coverage, \eqn{\sqrt{\alpha(1-\alpha)/n}}), `z` (their
#'   difference in standard errors) and `verdict` (`"calibrated"` within 3 standard errors,
#'   `"too wide"` or `"too narrow"`; 3, not 2, because several levels are tested at once and the
#'   importance-sampling posteriors add their own error), of class `nce_ratio_coverage` (a data
#'   frame; [plot.nce_ratio_coverage()] draws it). Attributes: `credible_levels` (each
#'   pair's credible level of its true theta; uniform on (0, 1) when calibrated), `ranks` (the
#'   simulation-based calibration ranks: per pair and parameter, the posterior mass below the true
#'   value; uniform when calibrated), `ess` (each
#'   pair's importance-sampling effective sample size), `time`.
#' @section What it refuses:
#' * `object` not a ratio estimator, `n` not a whole number in 10..100000, `n_draws` not a whole
#'   number in 100..1e6, `levels` not numbers in (0, 1) (`nce_error_input`);
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
ratio_coverage <- function(object, n = 200L, levels = c(0.5, 0.8, 0.95), n_draws = 2000L) {
  ucall <- sys.call()
  object <- as_ratio(object, ucall)
  check_count(n, min = 10, max = 1e5)
  check_count(n_draws, min = 100, max = 1e6)
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
  th <- sims$theta[ok, pars, drop = FALSE]
  s <- match_summary_columns(sims$summaries[ok, , drop = FALSE], object$summary_names, ucall)
  draws <- as_theta_matrix(pr$sample(n_draws), pr$names, call = ucall)[, pars, drop = FALSE]
  lp_draws <- pr$log_density(draws)
  lp_true <- pr$log_density(th)
  # Pairs in blocks of about 50,000 rows per predict() call.
  block <- max(1L, floor(5e4 / (n_draws + 1)))
  rows_of <- function(i) {
    rows <- rbind(draws, th[i, , drop = FALSE])
    sm <- s[rep(i, nrow(rows)), , drop = FALSE]
    list(rows = rows, sm = sm)
  }
  cred <- ess <- numeric(length(ok))
  ranks <- matrix(NA_real_, length(ok), length(pars), dimnames = list(NULL, pars))
  for (b in split(seq_along(ok), ceiling(seq_along(ok) / block))) {
    if (inherits(object, "nce_ratio_mlp")) {
      # The network reads (and embeds) each test pair's data once for all its draws.
      h <- vapply(b, function(i) observed_log_ratio(object, rbind(draws, th[i, , drop = FALSE]), s[i, ]),
                  numeric(n_draws + 1L))
    } else {
      parts <- lapply(b, rows_of)
      h <- ratio_log_ratio(object, do.call(rbind, lapply(parts, `[[`, "rows")),
                           do.call(rbind, lapply(parts, `[[`, "sm")))
    }
    h <- matrix(h, n_draws + 1L)
    for (j in seq_along(b)) {
      i <- b[j]
      h_draws <- h[seq_len(n_draws), j]
      w <- normalise_log_weights(h_draws)
      dens <- lp_draws + h_draws
      truth <- lp_true[i] + h[n_draws + 1L, j]
      cred[i] <- if (is.finite(truth)) sum(w[dens > truth]) else NA_real_
      ess[i] <- 1 / sum(w^2)
      # Simulation-based calibration: the posterior mass below the true value, per parameter.
      ranks[i, ] <- colSums(w * (draws < rep(th[i, ], each = n_draws)))
    }
  }
  m <- sum(!is.na(cred))
  coverage <- vapply(levels, function(a) mean(cred <= a, na.rm = TRUE), 0)
  se <- sqrt(levels * (1 - levels) / m)
  z <- (coverage - levels) / se
  out <- data.frame(level = levels, coverage = coverage, std.error = se, z = z,
                    verdict = ifelse(z > 3, "too wide", ifelse(z < -3, "too narrow", "calibrated")),
                    stringsAsFactors = FALSE)
  attr(out, "credible_levels") <- cred
  attr(out, "ranks") <- ranks
  attr(out, "ess") <- ess
  attr(out, "time") <- proc.time()[["elapsed"]] - t0
  low <- stats::median(ess) < 50
  if (low) {
    nce_warn(sprintf(paste("the importance-sampling posteriors kept a median effective sample of %.0f of %d prior",
                           "draws: the check is coarse where posteriors are narrow; raise `n_draws`"),
                     stats::median(ess), n_draws), "ess", call = ucall)
  }
  class(out) <- c("nce_ratio_coverage", class(out))
  out
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
