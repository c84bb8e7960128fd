# Sequential ratio estimation for one observation by truncated priors (Miller, Cole, Louppe and
# Weniger 2021, swyft's truncated marginal neural ratio estimation; here the joint ratio). Round 1
# simulates from the prior; each later round draws its parameters from the prior truncated to a box
# holding the current posterior and retrains on every simulation inside that box. The boxes are
# nested (each is intersected with the one before), so the simulations of earlier rounds inside the
# current box are draws of the current truncated prior too and may be pooled: no importance
# correction is needed, and the posterior is the truncated prior x exp(log ratio).

#' Sequential ratio estimation for one observation (truncated priors)
#'
#' Spends a simulation budget `n` on one observed data set in `rounds` rounds, so that the
#' simulations go where its posterior is. Round 1 simulates `n / rounds` pairs from the prior and
#' fits [ratio_amortised()]'s classifier; its posterior for `observed` ([ratio_posterior()], `n_draws`
#' draws by tempered SMC) sets a box, one interval per parameter: the draws' range widened on each
#' side by `margin` times that range, intersected with the previous box. The next round simulates
#' its share from the prior truncated to the box and retrains the classifier on all the
#' simulations, of every round, that lie in the box. Because the boxes are nested, earlier
#' simulations inside the box are draws of the truncated prior as well, so pooling them needs no
#' correction (truncated proposals, as swyft: Miller et al. 2021). The last round's classifier,
#' with the truncated prior of its box, is the returned estimator: [ratio_posterior()] draws its
#' posterior, truncated prior x exp(log ratio).
#'
#' **Truncated priors.** A [prior_uniform()] truncated to a box is the uniform on the box (the
#' sampler then runs in Rust). A [prior_normal()] is drawn exactly inside the box by inverting each
#' component's distribution function; a [prior_custom()] by rejection: its own draws are kept
#' when they fall in the box, at most 10 million draws per call, and a box holding too little of
#' the prior's mass for that gives an error of class `nce_error_region`. Both keep the prior's
#' log density inside the box (and `-Inf` outside): the truncation's normalising constant is the
#' same for every parameter in the box, so it does not change the posterior's shape; it only
#' scales the evidence. `$rounds` reports each box's prior mass (exact for uniform and normal
#' priors, the share of round 1's prior draws inside it for a custom prior).
#'
#' **Why a widened range.** The box must not cut posterior mass the classifier has not yet
#' resolved. The draws' range, widened by `margin` = 0.25 of it on each side: for a normal
#' posterior, 10,000 SMC draws (an effective sample of about 2,000, spanning about +-3.5 sds)
#' give a box to about 4.4 sds from the mean, which leaves out about 1e-5 of the mass per
#' parameter (3.9 and 5.8 sds, 7e-9, for independent draws); the tests check that every box holds
#' 99.9% of exact posteriors. A classifier much too narrow or off in location in an early round
#' would need a larger `margin` (or fewer rounds, so that round 1 has more of the budget).
#'
#' The estimator is local: it is valid for `observed` only, and [ratio_posterior()] refuses
#' another data set (`nce_error_input`). The defaults (`rounds` = 4, `margin` = 0.25, one network
#' in the early rounds) follow the reasoning above and were not tuned by a sweep; on sbibm's two
#' moons at 10,000 simulations they gave a mean C2ST of 0.619 over observations 1-10 (the
#' amortised fit 0.728 in the same run, sbi NPE 0.564 on observation 1; `bench/README.md`,
#' session 49).
#'
#' @inheritParams ratio_amortised
#' @param observed The observed data set, as `summaries` takes it (as in [ratio_posterior()]).
#' @param n Total number of simulations over all rounds, shared equally among them.
#' @param rounds Number of rounds (1 is amortised estimation with the prior, for `observed`).
#' @param margin Widening of each round's box beyond its posterior draws' range, as a share of
#'   that range on each side (>= 0).
#' @param n_draws Posterior draws (tempered SMC) per round that set the next box.
#' @param early Arguments of [ratio_amortised()] that replace those of `...` in the rounds before
#'   the last, whose classifiers only set the boxes: by default one network (`n_networks = 1`)
#'   in place of the ensemble, which cuts the time of those rounds about fivefold; the margin
#'   guards the boxes against a single network's overconfidence. `list()` trains every round as
#'   the last.
#' @param ... Further arguments of [ratio_amortised()] for every round's classifier (`hidden`,
#'   `control`, `n_networks`, `embedding`, `loss`, `n_shuffle`, `classifier`, ...); not `n`,
#'   `simulations` or those above.
#' @return An object of class `nce_ratio_sequential`, also of the last round's classifier's
#'   classes (`nce_ratio_mlp` or `nce_ratio`), holding that classifier with `prior` the truncated
#'   prior of the last box and `simulations` the simulations it was trained on, and:
#'   `observed` and `observed_summaries`; `rounds`, a data frame with one row per round
#'   (simulations made, simulations trained on, the box's prior mass, the networks' mean best
#'   epoch and held-out loss, seconds simulating, fitting and drawing); `regions`, a list with
#'   one box per round (a 2-row matrix of lower and upper bounds per parameter; round 1's is the
#'   prior's support); `region`, the last box; `prior_full`, the prior given; `margin`;
#'   `n_total` (simulations made), `time` (seconds simulating, fitting and drawing, all rounds).
#' @section What it refuses:
#' * what [ratio_amortised()] refuses, for the arguments it passes on;
#' * `rounds` not a whole number in 1..20, `n` not a whole number >= 10 x `rounds`, `margin` not
#'   one number in \[0, 10\], `n_draws` not a whole number >= 100, arguments in `...` that are
#'   not [ratio_amortised()]'s or that it sets itself (`nce_error_input`);
#' * `summaries` failing on `observed` (`nce_error_input`);
#' * a box whose prior mass is too small to draw from a custom prior by rejection, or posterior
#'   draws that collapse to a point in some parameter (`nce_error_region`).
#' @references Miller, B. K., Cole, A., Forré, P., Louppe, G. and Weniger, C. (2021). Truncated
#'   marginal neural ratio estimation. NeurIPS.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' x_obs <- matrix(rnorm(20, 0.5), 1)
#' set.seed(1)
#' r <- ratio_sequential(sim, summ, prior_uniform(mu = c(-5, 5)), x_obs, n = 1500, rounds = 3,
#'                       batch = TRUE, hidden = c(16, 16), n_networks = 1, n_draws = 1000)
#' r
#' summary(ratio_posterior(r, x_obs, n_draws = 2000))
#' @export
ratio_sequential <- function(simulator, summaries, prior, observed, n = 10000L, rounds = 4L, margin = 0.25,
                             batch = FALSE, n_draws = 10000L, early = list(n_networks = 1L), ...) {
  rng <- rng_state()
  call <- match.call()
  ucall <- sys.call()
  if (is.null(summaries)) summaries <- raw_summaries
  check_simulator(simulator, summaries, prior, ucall)
  check_count(rounds, max = 20)
  check_count(n, min = 10 * rounds)
  check_number(margin, min = 0, max = 10)
  check_bool(batch)
  check_count(n_draws, min = 100)
  dots <- sequential_dots(list(...), ucall)
  # The GAM classifier has no ensemble to thin.
  gam <- !is.null(dots$formula) || isTRUE(dots$discrete) || identical(dots$classifier, "gam")
  if (missing(early) && gam) early <- list()
  if (!is.list(early)) check_fail("a list of arguments of ratio_amortised()", early, "early", ucall)
  early <- utils::modifyList(dots, sequential_dots(early, ucall, "early"))
  s_obs <- observed_summaries(summaries, observed, batch, ucall)
  shares <- diff(round(seq(0, n, length.out = rounds + 1L)))
  region <- rbind(lower = prior$lower, upper = prior$upper)
  pr_k <- prior
  sims <- NULL
  regions <- info <- vector("list", rounds)
  for (k in seq_len(rounds)) {
    regions[[k]] <- region
    t0 <- proc.time()[["elapsed"]]
    th <- as_theta_matrix(pr_k$sample(shares[k]), prior$names, call = ucall)
    sims <- bind_simulations(sims, run_simulations(simulator, summaries, th, 1L, batch, 100L, call = ucall))
    t_sim <- proc.time()[["elapsed"]] - t0
    train <- subset_simulations(sims, which(in_region(sims$theta[, prior$names, drop = FALSE], region)))
    fit <- with_call(ucall, do.call(ratio_amortised, c(list(simulator, summaries, pr_k, n = max(10L, nrow(train$theta)),
                                                              batch = batch, simulations = train),
                                                         if (k < rounds) early else dots)))
    t0 <- proc.time()[["elapsed"]]
    if (k < rounds) {
      post <- with_call(ucall, ratio_posterior(fit, observed, n_draws = n_draws, method = "smc"))
      region <- next_region(post$draws, region, margin, k, ucall)
      pr_k <- truncate_prior(prior, region[1L, ], region[2L, ])
    }
    info[[k]] <- round_summary(k, shares[k], fit, regions[[k]], prior, sims, shares[1L],
                               c(t_sim, fit$time[["fitting"]], proc.time()[["elapsed"]] - t0))
  }
  rounds_df <- do.call(rbind, info)
  fit$call <- call
  fit$rng_state <- rng
  fit$time <- c(simulation = sum(rounds_df$simulate_s), fitting = sum(rounds_df$fit_s),
                regions = sum(rounds_df$region_s))
  structure(c(fit[setdiff(names(fit), "time")],
              list(time = fit$time, observed = observed, observed_summaries = s_obs, rounds = rounds_df,
                   regions = regions, region = regions[[rounds]], prior_full = prior, margin = margin,
                   n_total = length(sims$ok))),
            class = c("nce_ratio_sequential", class(fit)))
}

# The arguments of ratio_amortised() given through `...`: its own, less those ratio_sequential()
# sets (an unknown or doubled name would otherwise surface as R's "unused argument" in round 1).
sequential_dots <- function(dots, call, arg = "...") {
  nms <- names(dots)
  if (length(dots) && (is.null(nms) || any(nms == ""))) {
    nce_abort(sprintf("the arguments in `%s` must be named (arguments of ratio_amortised()).", arg), "input",
              call = call)
  }
  own <- c("simulator", "summaries", "prior", "n", "batch", "simulations")
  bad <- nms[nms %in% own | !nms %in% names(formals(ratio_amortised))]
  if (length(bad)) {
    nce_abort(sprintf(paste("`%s` passes %s, which ratio_amortised() does not take or ratio_sequential() sets",
                            "itself; give hidden, control, n_networks, embedding, loss, n_shuffle or classifier"),
                      arg, paste0("`", bad, "`", collapse = ", ")), "input", call = call)
  }
  dots
}

# Errors of the package raised in a round name the user's call, not the inner one.
with_call <- function(call, expr) {
  withCallingHandlers(expr, nce_error = function(e) {
    e$call <- call
    stop(e)
  })
}

# Rows of `theta` inside the box `region` (rows lower, upper; bounds included).
in_region <- function(theta, region) {
  rowSums(sweep(theta, 2L, region[1L, ], ">=") & sweep(theta, 2L, region[2L, ], "<=")) == ncol(theta)
}

# The next box: the posterior draws' range widened by `margin` times it on each side, within the
# current box (so the boxes are nested and pooled simulations stay draws of the truncated prior).
next_region <- function(draws, region, margin, k, call) {
  lo <- apply(draws, 2L, min)
  hi <- apply(draws, 2L, max)
  flat <- colnames(draws)[!(hi > lo)]
  if (length(flat)) {
    nce_abort(sprintf(paste("the posterior draws of round %d collapse to one value in %s: the classifier is degenerate",
                            "there; use more simulations per round or fewer rounds"), k, toString(flat)),
              "region", call = call)
  }
  w <- hi - lo
  out <- rbind(lower = pmax(region[1L, ], lo - margin * w), upper = pmin(region[2L, ], hi + margin * w))
  colnames(out) <- colnames(draws)  # kept for one parameter, where region[1L, ] drops them
  out
}

# The prior truncated to the box [lower, upper]: a uniform stays uniform; a normal is drawn exactly
# by inverting its components' distribution functions; a custom prior by rejection, with at most
# 1e7 draws per call. The log density is the prior's in the box (its normalising constant changes
# nothing in the posterior's shape), -Inf outside.
truncate_prior <- function(prior, lower, upper, max_draws = 1e7) {
  nms <- prior$names
  lower <- pmax(stats::setNames(as.double(lower), nms), prior$lower)
  upper <- pmin(stats::setNames(as.double(upper), nms), prior$upper)
  if (identical(prior$kind, "uniform")) {
    out <- do.call(prior_uniform, stats::setNames(Map(c, lower, upper), nms))
    out$mass <- prod((upper - lower) / (prior$upper - prior$lower))
    return(out)
  }
  box <- rbind(lower, upper)
  sample <- if (identical(prior$kind, "normal") && !is.null(prior$mean)) {
    function(n) {
      p_lo <- stats::pnorm(lower, prior$mean, prior$sd)
      p_hi <- stats::pnorm(upper, prior$mean, prior$sd)
      m <- vapply(seq_along(nms), function(j) {
        stats::qnorm(stats::runif(n, p_lo[j], p_hi[j]), prior$mean[j], prior$sd[j])
      }, numeric(n))
      matrix(pmin(pmax(m, rep(lower, each = n)), rep(upper, each = n)), n, length(nms), dimnames = list(NULL, nms))
    }
  } else {
    function(n) rejection_draws(prior, box, n, max_draws)
  }
  out <- new_prior(names = nms, lower = lower, upper = upper, kind = "truncated", sample = sample,
                   log_density = function(theta) {
                     theta <- as_theta_matrix(theta, nms)
                     lp <- as.double(prior$log_density(theta))
                     lp[!in_region(theta, box)] <- -Inf
                     lp
                   })
  if (identical(prior$kind, "normal") && !is.null(prior$mean)) {
    out$mass <- prod(stats::pnorm(upper, prior$mean, prior$sd) - stats::pnorm(lower, prior$mean, prior$sd))
  }
  out$base <- prior
  out
}

# `n` draws of `prior` inside `box` by rejection, in batches sized by the acceptance seen so far.
rejection_draws <- function(prior, box, n, max_draws) {
  kept <- list()
  got <- 0L
  tried <- 0
  while (got < n) {
    if (tried >= max_draws) {
      nce_abort(sprintf(paste("the truncated prior kept %d of %.0f draws of the prior inside the box [%s]: the box",
                              "holds too little of the prior's mass (about %.2g) to draw %d by rejection; widen",
                              "`margin`, or give a prior whose sampler draws inside the box"),
                        got, tried, paste(sprintf("%s: %.4g to %.4g", colnames(box), box[1L, ], box[2L, ]),
                                          collapse = ", "), got / tried, n),
                "region", call = NULL)
    }
    rate <- max(got, 1) / max(tried, 1)
    m <- as.integer(min(max_draws - tried, 1e6, max(1000, ceiling(1.2 * (n - got) / rate))))
    th <- as_theta_matrix(prior$sample(m), prior$names, call = NULL)
    tried <- tried + m
    ok <- in_region(th, box)
    kept[[length(kept) + 1L]] <- th[ok, , drop = FALSE]
    got <- got + sum(ok)
  }
  do.call(rbind, kept)[seq_len(n), , drop = FALSE]
}

# Simulation sets joined row-wise (later rounds after earlier ones).
bind_simulations <- function(a, b) {
  if (is.null(a)) return(b)
  if (!identical(colnames(a$summaries), colnames(b$summaries))) {
    nce_abort(sprintf("the summaries changed between rounds (%s, then %s): `summaries` must give the same ones.",
                      toString(colnames(a$summaries)), toString(colnames(b$summaries))), "simulation", call = NULL)
  }
  fb <- b$failures
  fb$simulation <- fb$simulation + length(a$ok)
  fb$theta_row <- fb$theta_row + length(a$ok)
  structure(list(theta = rbind(a$theta, b$theta), index = c(a$index, b$index + length(a$ok)),
                 summaries = rbind(a$summaries, b$summaries), ok = c(a$ok, b$ok), failures = rbind(a$failures, fb),
                 time = a$time + b$time), class = "nce_simulations")
}

# One row of `$rounds`: the round's budget, training set, box and times (simulate, fit, region).
round_summary <- function(k, n_sim, fit, region, prior, sims, n1, times) {
  th1 <- sims$theta[seq_len(n1), prior$names, drop = FALSE]
  mass <- if (k == 1L) 1 else truncate_prior(prior, region[1L, ], region[2L, ])$mass %||% mean(in_region(th1, region))
  tr <- fit$training
  data.frame(round = k, simulated = n_sim, trained_on = fit$n, prior_mass = mass,
             best_epoch = if (is.null(tr)) NA_real_ else mean(vapply(tr, function(t) t$best_epoch, 0)),
             held_out_loss = if (is.null(tr)) NA_real_ else mean(held_out_losses(fit)),
             simulate_s = times[1L], fit_s = times[2L], region_s = times[3L])
}

# The observed summaries must be those the sequential estimator was fitted for.
check_sequential_observed <- function(object, s_obs, call) {
  if (!inherits(object, "nce_ratio_sequential")) return(invisible())
  ref <- object$observed_summaries
  same <- length(ref) == length(s_obs) && isTRUE(all.equal(unname(as.double(ref)), unname(as.double(s_obs)),
                                                           tolerance = 1e-10))
  if (!same) {
    nce_abort(paste("this sequential ratio estimator was fitted for one observed data set and is valid only in its",
                    "truncated prior's box: `observed` gives other summaries. Fit ratio_sequential() for this",
                    "data set, or ratio_amortised() for any data set"), "input", call = call)
  }
  invisible()
}

#' @export
print.nce_ratio_sequential <- function(x, ...) {
  cat(sprintf("Sequential ratio estimator for one observation: %d rounds, %d simulations, boxes widened by %g\n",
              nrow(x$rounds), x$n_total, x$margin))
  tab <- x$rounds[, c("round", "simulated", "trained_on", "prior_mass")]
  widths <- vapply(x$regions, function(r) sprintf("%.3g", r[2L, ] - r[1L, ]), character(ncol(x$region)))
  widths <- matrix(widths, nrow = length(x$regions), byrow = TRUE,
                   dimnames = list(NULL, paste0("width_", colnames(x$region))))
  print(cbind(format(tab, digits = 3L), widths), row.names = FALSE)
  cat("Last round's classifier (on the truncated prior of the last box):\n")
  NextMethod()
  cat(sprintf("(simulation and fitting: all rounds); posterior draws for the boxes %.2f s\n", x$time[["regions"]]))
  invisible(x)
}

#' @export
summary.nce_ratio_sequential <- function(object, ...) {
  out <- NextMethod()
  out$rounds <- object$rounds
  out$regions <- object$regions
  out$print <- utils::capture.output(print(object))
  class(out) <- c("summary.nce_ratio_sequential", class(out))
  out
}

#' @export
print.summary.nce_ratio_sequential <- function(x, ...) {
  NextMethod()
  cat("Boxes (lower, upper per parameter):\n")
  for (k in seq_along(x$regions)) {
    cat(sprintf("  round %d: %s\n", k, paste(sprintf("%s [%.4g, %.4g]", colnames(x$regions[[k]]),
                                                      x$regions[[k]][1L, ], x$regions[[k]][2L, ]), collapse = "; ")))
  }
  invisible(x)
}

#' @export
update.nce_ratio_sequential <- function(object, ..., resample = FALSE) {
  nce_unsupported("update", object, "its rounds depend on one another; call ratio_sequential() again",
                  call = sys.call())
}
