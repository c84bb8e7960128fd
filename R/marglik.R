# Log normalising constants (marginal likelihoods) by logistic regression between
# draws of the unnormalised density and draws of a fitted reference (Geyer 1994;
# the optimal bridge sampling estimator). Transforms, reference fitting and
# sampling, and the 1-D solve run in Rust (src/rust/nce-core/src/bridge.rs).

#' Log normalising constant from draws by logistic regression against a reference
#'
#' Estimates \eqn{\log Z} for an unnormalised density \eqn{f} (a posterior
#' kernel, prior times likelihood, so that \eqn{Z} is the marginal likelihood,
#' or an energy model) from draws of \eqn{f/Z}. Parameters with bounds are
#' mapped to the real line (log for one bound, logit for two, as bridge
#' sampling does, with the Jacobian added to \eqn{\log f}); a multivariate
#' normal (or Student t) reference \eqn{g} is fitted to the transformed draws
#' and `n_ref` points are drawn from it. Draws of \eqn{f} (label 1) and of
#' \eqn{g} (label 0) are classified by a logistic regression with offset
#' \eqn{\log f - \log g + \log(n/n_{ref})} and intercept \eqn{-\log Z}: the
#' 1-D convex problem of [bayes_factor_nce()], solved in Rust. It is the
#' estimator of the optimal bridge sampling of Meng and Wong (1996).
#'
#' With `split = TRUE` (the default, as in bridgesampling) the first half of
#' the draws fits the reference and the second half enters the estimate, so
#' the reference does not depend on the draws it is compared with. The
#' standard error is that of [bayes_factor_nce()]; with `split = TRUE` and
#' `ess = NULL` the autocorrelation time of the score contributions is
#' estimated from both halves of each chain (each half about its own mean;
#' `log_density` is therefore also evaluated at the first half) and applied
#' to the second half, which halves the variance of the half's own estimate:
#' with chains of only ~50 effective draws in the estimate, a noisy
#' effective sample size makes intervals too short (see the Bayes factor
#' vignette for measured coverage).
#'
#' **Warped reference.** In many dimensions most of the gap between the
#' draws and a normal reference is in the marginals: a log-transformed scale
#' parameter is skewed, and a small mismatch per parameter adds up over
#' hundreds (a Gamma(2, 1) kernel on the log scale is 0.045 nats from its
#' best normal; 300 of them are 13.6 nats apart). The second largest part is
#' the noise of a full covariance fitted to \eqn{n} draws, about
#' \eqn{D^2/(4n)} nats. `reference = "warped"` maps each unconstrained
#' parameter through a monotone transport of a standard normal (the
#' Fritsch-Carlson monotone cubic through the draws' quantiles at the normal
#' scores \eqn{-3, \dots, 3}, linear beyond) and joins the marginals by a
#' Gaussian copula whose correlations are shrunk towards zero by the
#' Ledoit-Wolf (2004) intensity. The estimate runs on the normal-score scale,
#' a bijection with its Jacobian, so \eqn{\log Z} is unchanged; the
#' telescoping below then runs on that scale too. With 10,000 draws of a
#' 300-dimensional Gamma product the single classifier against it has
#' accuracy 0.57 (against the normal reference: 0.997).
#'
#' **Telescoping** (Rhodes, Xu and Gutmann 2020). In many dimensions the
#' draws and the reference barely overlap (a "density chasm"): one classifier
#' separates them almost perfectly and its intercept is poorly determined.
#' Waymark densities \eqn{p_b \propto g\,(f/g)^{1-b}} between the draws
#' (\eqn{b = 0}) and the reference (\eqn{b = 1}) split the gap; each
#' neighbouring pair is told apart by the same 1-D logistic regression (its
#' log ratio \eqn{(b_{k+1} - b_k)\log(f/g)} is known up to the intercept),
#' and \eqn{\log Z} is the sum of the intercepts. Samples of each waymark
#' come from those of the previous one by resampling and Metropolis moves
#' that mix each sample linearly with reference noise,
#' \eqn{z' = \sqrt{1-\beta^2}\,z + \beta\xi} on the whitened scale (the
#' preconditioned Crank-Nicolson proposal, which keeps \eqn{p_b} invariant);
#' this evaluates `log_density` at `control$moves` new points per sample and
#' waymark. The next waymark is the farthest whose classifier, estimated by
#' importance weighting, has accuracy `control$accuracy`, so the number of
#' waymarks follows the gap. The standard error sums each sample's influence
#' on the sum of intercepts over the descendants of each draw (the resampling
#' ancestry) and applies the draws' effective sample size to these totals.
#' The pairs are solved in parallel in Rust; results do not depend on the
#' number of threads.
#'
#' @param draws Draws of the density: a matrix with one row per draw or a
#'   vector for one parameter. MCMC draws in order (one chain, or chains one
#'   after another) so that effective sample sizes can be estimated.
#' @param log_density The unnormalised log density: a vectorised function of
#'   a draws matrix (with `draws`' column names) returning one value per row.
#'   It may return `-Inf` at reference points outside the support. Argument
#'   names follow [nce_vocabulary].
#' @param lower,upper Lower and upper bounds of the parameters: one number for all,
#'   or one per column (named by column or in column order); `-Inf`/`Inf`
#'   for none.
#' @param reference `"auto"` (the normal reference, or the warped one when
#'   the single classifier against the normal reference is more accurate than
#'   `control$switch`, i.e. the two barely overlap), `"normal"`, `"t"`
#'   (multivariate Student t with `df` degrees of freedom and the draws'
#'   covariance, for heavy tails), `"warped"` (fitted marginals and a
#'   Gaussian copula; see Details) or `"mixture"` (a mixture of normals fitted
#'   by EM, 1-9 components chosen by BIC, as [ref_fit()] fits it: for posteriors
#'   with separated modes, which a single normal covers with most of its mass
#'   between them; no telescoping).
#' @param df Degrees of freedom of the t reference.
#' @param n_ref Number of reference draws (a count, not a ratio per draw);
#'   by default as many as the draws in the estimate.
#' @param split Fit the reference to the first half of the draws and estimate
#'   with the second half (`TRUE`), or use all draws for both.
#' @param ess `NULL` to estimate the effective sample size of the draws from
#'   the score contributions, or one number (the reference draws are
#'   independent): that of the draws in the estimate (with `split = TRUE` the
#'   second half of each chain), so at most their number.
#' @param chains `NULL` for one chain (or independent draws), the number of
#'   chains of equal length stacked one after another in `draws`, or their
#'   lengths. Effective sample sizes are then estimated per chain (each chain's
#'   long-run variance about the overall mean, so that chains that disagree
#'   count), and with `split = TRUE` the first half of each chain fits the
#'   reference.
#' @param waymarks `"auto"` (telescope when the single classifier between the
#'   draws and the reference is too accurate, i.e. the two barely overlap),
#'   `"none"` (always the single classifier) or `"always"`. See Details.
#' @param control Settings of the telescoping, a list with `switch` (the
#'   accuracy of the single classifier above which `reference = "auto"` moves
#'   from the normal to the warped reference and `waymarks = "auto"`
#'   telescopes, 0.75),
#'   `accuracy` (the target accuracy of each neighbouring pair, 0.55) and
#'   `moves` (linear-mixing Metropolis moves per waymark, 10); a list of some
#'   of them is merged into these defaults.
#' @return An object of class `nce_marglik`, a list with `logml` (the
#'   estimate of \eqn{\log Z}), `se` (its standard error: the sandwich of the
#'   two-sample logistic problem, the draws' part inflated by
#'   \eqn{n/\mathrm{ESS}}), `se_iid`, `ess`, `n` (draws in the estimate),
#'   `n_ref`, `bounds` (importance sampling estimates from the reference and
#'   reciprocal importance sampling from the draws, lower and upper bounds in
#'   expectation), `reference` (the family used, mean and covariance on the
#'   unconstrained scale, or for `"warped"` on the normal-score scale with
#'   the transports' knots in `warp`, and `accuracy`, that of the single
#'   classifier against it), `separated`, `converged`, `iterations`, `chains`,
#'   `telescope` (`NULL` for the single classifier; otherwise the waymarks `b`,
#'   the intercepts `c` of the pairs with their accuracies, the moves'
#'   acceptance rates, the number of `log_density` evaluations, and
#'   `single`, the single classifier's estimate, standard error and
#'   accuracy). Methods:
#'   `coef()`, `vcov()`, `confint()`, `nobs()`, `tidy()`, `glance()` (see
#'   [estimate_methods]). Refused: `n_ref` whose reference draws would not fit
#'   in memory (`nce_error_size`, before allocating), `ess` that is not one
#'   positive finite number or is above the number of draws in the estimate
#'   (`nce_error_input`), log ratios beyond 1e12 (`nce_error_data`). An
#'   error inside `log_density` is raised as `nce_error_model`, quoting its
#'   message.
#' @references Geyer, C. J. (1994). Estimating normalizing constants and
#'   reweighting mixtures in Markov chain Monte Carlo. Technical report 568,
#'   School of Statistics, University of Minnesota.
#'
#'   Meng, X.-L. and Wong, W. H. (1996). Simulating ratios of normalizing
#'   constants via a simple identity. Statistica Sinica 6, 831-860.
#'
#'   Gronau, Q. F. et al. (2017). A tutorial on bridge sampling. Journal of
#'   Mathematical Psychology 81, 80-97.
#'
#'   Rhodes, B., Xu, K. and Gutmann, M. U. (2020). Telescoping density-ratio
#'   estimation. Advances in Neural Information Processing Systems 33.
#'
#'   Ledoit, O. and Wolf, M. (2004). A well-conditioned estimator for
#'   large-dimensional covariance matrices. Journal of Multivariate Analysis 88,
#'   365-411.
#'
#'   Fritsch, F. N. and Carlson, R. E. (1980). Monotone piecewise cubic
#'   interpolation. SIAM Journal on Numerical Analysis 17, 238-246.
#'
#'   Cotter, S. L., Roberts, G. O., Stuart, A. M. and White, D. (2013). MCMC
#'   methods for functions: modifying old algorithms to make them faster.
#'   Statistical Science 28, 424-446.
#' @seealso [bayes_factor_marglik()] for a Bayes factor from two estimates; [bayes_factor_nce()].
#' @examples
#' set.seed(1)
#' # 2-D standard normal kernel exp(-s's/2): log Z = log(2 pi)
#' x <- matrix(rnorm(4000), ncol = 2)
#' ml <- marglik_nce(x, function(s) -0.5 * rowSums(s^2))
#' ml
#' log(2 * pi)
#' # A Beta(3, 5) kernel on (0, 1): log Z = log B(3, 5)
#' ml_beta <- marglik_nce(rbeta(4000, 3, 5), function(p) 2 * log(p[, 1]) + 4 * log1p(-p[, 1]),
#'                        lower = 0, upper = 1)
#' summary(ml_beta)
#' lbeta(3, 5)
#' @export
marglik_nce <- function(draws, log_density, lower = -Inf, upper = Inf,
                        reference = c("auto", "normal", "t", "warped", "mixture"), df = 5, n_ref = NULL,
                        split = TRUE, ess = NULL, chains = NULL,
                        waymarks = c("auto", "none", "always"), control = list()) {
  rng <- rng_state()
  call <- match.call()
  ucall <- sys.call()
  reference <- match_choice(reference)
  waymarks <- check_choice(waymarks, c("auto", "none", "always"), "waymarks", call = ucall)
  control <- merge_control(control, telescope_control, call = ucall)
  x <- as_draws(draws, "draws")
  if (!is.function(log_density)) nce_abort("`log_density` must be a vectorised function of a draws matrix", "input")
  d <- ncol(x)
  lb <- bounds_arg(lower, x, "lower")
  ub <- bounds_arg(upper, x, "upper")
  bad <- which(!(lb < ub))
  if (length(bad)) nce_abort(sprintf("`lower` must be below `upper` (columns %s)", format_positions(bad)), "input")
  for (j in seq_len(d)) {
    out <- which(!(x[, j] > lb[j] & x[, j] < ub[j]))
    if (length(out)) {
      nce_abort(sprintf("%d draws of column %d lie outside the open interval (%g, %g) (rows %s)",
                        length(out), j, lb[j], ub[j], format_positions(out)), "support")
    }
  }
  check_number(df, "df", min = 0, exclusive_min = TRUE, call = ucall)
  check_bool(split, "split", call = ucall)
  check_draws_spread(x, constant_ok = TRUE, call = ucall)
  n <- nrow(x)
  chains <- chains_arg(chains, n, "chains", ucall)
  parts <- split_draws(x, chains, split, ucall)
  xf <- parts$xf
  xe <- parts$xe
  chains_e <- parts$chains_e
  half <- parts$half
  if (nrow(xf) <= d) {
    nce_abort(sprintf("%d draws cannot fit a %d-dimensional reference: need more than %d%s", nrow(xf), d, d,
                      if (split) " in the first half (split = TRUE)" else ""), "input")
  }
  if (is.null(n_ref)) n_ref <- nrow(xe)
  check_count(n_ref, "n_ref", min = 2, max = 2^52, call = ucall)
  check_ess(ess, 1L, ucall)
  check_ess_draws(ess, nrow(xe), if (split) "draws in the estimate (the second half of each chain)" else "draws",
                  ucall)
  # reference draws and their log densities in Rust, copies in R, log_density's own temporaries
  check_size(8 * n_ref * (4 * d + 8), "n_ref", "marglik_nce()", call = ucall)
  # with split = TRUE the scores' autocorrelation time comes from the whole chains (bridge_solve's `whole`)
  whole <- if (split && is.null(ess)) {
    list(x = x, half = half, chains = c(rbind(chains %/% 2L, chains - chains %/% 2L)))
  }
  est <- marglik_against(if (reference == "auto") "normal" else reference, xf, xe, colnames(x), log_density, lb, ub,
                         df, n_ref, split, ess, chains_e, ucall, whole)
  if (reference == "auto" && est$accuracy > control$switch) {
    # the draws and the normal reference barely overlap: match the marginals (R/marglik-warp.R)
    est <- marglik_against("warped", xf, xe, colnames(x), log_density, lb, ub, df, n_ref, split, ess, chains_e,
                           ucall, whole)
  }
  fit <- est$fit
  ref <- est$ref
  tele <- NULL
  if (waymarks != "none" && !fit$separated) {
    if (est$family %in% c("t", "mixture")) {
      if (waymarks == "always") nce_abort("telescoping needs `reference = \"normal\"`", "input", call = ucall)
    } else if (waymarks == "always" || est$accuracy > control$switch) {
      tele <- marglik_telescope(est$xf, est$xe, est$r1, est$r2, est$log_density, est$lb, est$ub, control$accuracy,
                                control$moves, chains_e, ess, est$family == "warped", ucall)
      tele$single <- c(logml = fit$log_ratio, se = fit$se, accuracy = est$accuracy)
      fit$log_ratio <- tele$log_z
      fit$se <- tele$se
      fit$se_iid <- tele$se_iid
      fit$ess[1L] <- tele$ess
      fit$converged <- tele$converged
      fit$iterations <- tele$iterations
    }
  }
  out <- structure(list(
    logml = fit$log_ratio, se = fit$se, se_iid = fit$se_iid,
    ess = fit$ess[1L], n = nrow(xe), n_ref = as.integer(n_ref),
    bounds = c(lower = fit$bound_lower, upper = fit$bound_upper),
    reference = list(family = est$family, df = if (est$family == "t") df else NULL,
                     mean = stats::setNames(ref$mean, colnames(x)), cov = ref$cov, lb = lb, ub = ub, warp = est$warp,
                     accuracy = est$accuracy),
    split = split, separated = fit$separated, converged = fit$converged,
    iterations = fit$iterations, chains = chains, telescope = tele, call = call),
    class = c("nce_marglik", "nce_estimate", "nce_result"))
  if (fit$separated) {
    out <- separated_result(out, fit, "log Z", "the draws and the reference draws do not overlap")
  } else if (!fit$converged) {
    nce_warn("the 1-D Newton/bisection search did not converge", "convergence")
  }
  as_result(out, rng = rng, env = parent.frame())
}

# With `split`, the first half of each chain fits the reference (`xf`, rows `half` of `x`) and the
# second half enters the estimate (`xe`, chains of lengths `chains_e`); without, all draws do both.
split_draws <- function(x, chains, split, call) {
  if (!split) return(list(xf = x, xe = x, chains_e = chains, half = NULL))
  n <- nrow(x)
  if (n < 4L) nce_abort(sprintf("`split = TRUE` needs at least 4 draws, got %d", n), "input", call = call)
  if (any(chains < 2L)) nce_abort("with `split = TRUE` every chain needs at least two draws", "input", call = call)
  starts <- cumsum(chains) - chains
  half <- unlist(lapply(seq_along(chains), function(k) starts[k] + seq_len(chains[k] %/% 2L)))
  list(xf = x[half, , drop = FALSE], xe = x[-half, , drop = FALSE], chains_e = chains - chains %/% 2L, half = half)
}

# One reference (`family` "normal", "t" or "warped") against the draws: the reference fitted to
# `xf`, the single classifier with the `xe` draws, and what telescoping needs (the draws, kernel
# and bounds on the scale the reference lives on; for "warped" the normal scores of the transports).
marglik_against <- function(family, xf, xe, names, log_density, lb, ub, df, n_ref, split, ess, chains_e, call,
                            whole = NULL) {
  d <- ncol(xf)
  warp <- NULL
  rust_family <- family
  lp_e <- NULL
  # the scores are computed at every draw when the autocorrelation time comes from the whole chains
  xs <- if (is.null(whole)) xe else whole$x
  if (family == "warped") {
    # the estimator runs on the normal-score scale of the fitted transports (R/marglik-warp.R)
    uf <- warp_to_unc(xf, lb, ub)
    warp <- warp_fit(uf, call)
    yf <- warp_inverse(warp, uf)
    ue <- if (split) warp_to_unc(xs, lb, ub) else uf
    ye <- if (split) warp_inverse(warp, ue) else yf
    # the kernel at the draws themselves, not at their round trip through the transports
    lp_e <- eval_logdens(log_density, xs, "log_density", "draws", call)
    check_finite_values(lp_e, "log_density", "draws")
    lp_e <- lp_e + warp_from_unc(ue, lb, ub)$logjac + warp_forward(warp, ye)$logjac
    xf <- yf
    xs <- ye
    colnames(xf) <- colnames(xs) <- names
    log_density <- warp_log_posterior(warp, log_density, lb, ub, names)
    lb <- rep(-Inf, d)
    ub <- rep(Inf, d)
    rust_family <- "normal"
  }
  ref <- rs(nce_marglik_reference(xf, xs, lb, ub,
                                  list(family = rust_family, df = as.double(df), n_ref = as.double(n_ref),
                                       seed = draw_seed(), shrink = family == "warped", threads = nce_threads())))
  xr <- ref$ref_draws
  colnames(xr) <- names
  if (is.null(lp_e)) {
    lp_e <- eval_logdens(log_density, xs, "log_density", "draws", call)
    check_finite_values(lp_e, "log_density", "draws")
  }
  lp_r <- eval_logdens(log_density, xr, "log_density", "the reference draws", call)
  bad <- which(is.nan(lp_r) | is.na(lp_r) | lp_r == Inf)
  if (length(bad)) {
    nce_abort(sprintf(paste("`log_density` is NA, NaN or +Inf at %d of %d reference draws (rows %s); it may be",
                            "-Inf outside the support"),
                      length(bad), length(lp_r), format_positions(bad)), "data")
  }
  r_s <- lp_e + ref$est_logjac - ref$est_logref
  r1 <- if (is.null(whole)) r_s else r_s[-whole$half]
  xe <- if (is.null(whole)) xs else xs[-whole$half, , drop = FALSE]
  r2 <- lp_r + ref$ref_logjac - ref$ref_logref
  check_resolvable(r1, r2[is.finite(r2)], "log_density - log reference", call)
  fit <- bridge_solve(r1, r2, if (is.null(ess)) NULL else c(ess, n_ref), chains = list(chains_e, NULL),
                      whole = if (!is.null(whole)) list(r = r_s, chains = whole$chains))
  acc <- if (fit$separated) 1 else classifier_accuracy(r1, r2, fit$log_ratio)
  list(family = family, fit = fit, ref = ref, accuracy = acc, r1 = r1, r2 = r2, xf = xf, xe = xe,
       log_density = log_density, lb = lb, ub = ub, warp = warp)
}

# Settings of the telescoping: `switch`, the accuracy of the single classifier above which
# waymarks are used (waymarks = "auto"); `accuracy`, the target accuracy of each neighbouring
# pair; `moves`, linear-mixing Metropolis moves per waymark. `marglik_nce(control =)` merges a
# partial list into these defaults (merge_control()).
telescope_control <- function(switch = 0.75, accuracy = 0.55, moves = 10L) {
  call <- sys.call()
  check_number(switch, "control$switch", min = 0.5, max = 1, exclusive_min = TRUE, call = call)
  check_number(accuracy, "control$accuracy", min = 0.5, max = 1, exclusive_min = TRUE, call = call)
  if (accuracy >= 1) nce_abort("`control$accuracy` must be below 1", "input", call = call)
  check_count(moves, "control$moves", min = 1, max = 1000, call = call)
  list(switch = switch, accuracy = accuracy, moves = moves)
}

# `chains`: NULL (one chain), one number k (k chains of equal length stacked) or the chain lengths.
chains_arg <- function(chains, n, arg, call) {
  if (is.null(chains)) return(n)
  if (!is.numeric(chains) || !length(chains) || anyNA(chains) || any(!is.finite(chains)) || any(chains < 1) ||
      any(chains != round(chains)) || any(chains > n)) {
    nce_abort(sprintf("`%s` must be NULL, a number of chains or the chain lengths (positive whole numbers)", arg),
              "input", call = call)
  }
  if (length(chains) == 1L) {
    if (n %% chains != 0) {
      nce_abort(sprintf("%d draws cannot form %d chains of equal length: give the chain lengths in `%s`", n, chains,
                        arg), "input", call = call)
    }
    return(rep(as.integer(n %/% chains), chains))
  }
  if (sum(chains) != n) {
    nce_abort(sprintf("the chain lengths in `%s` sum to %d, but there are %d draws", arg, sum(chains), n), "input",
              call = call)
  }
  as.integer(chains)
}

bounds_arg <- function(b, x, arg) {
  d <- ncol(x)
  if (!is.numeric(b) || anyNA(b)) nce_abort(sprintf("`%s` must be numeric without NA", arg), "input")
  if (length(b) == 1L) return(rep(as.double(b), d))
  if (length(b) != d) {
    nce_abort(sprintf("`%s` must have length 1 or %d (one per column), got %d", arg, d, length(b)), "input")
  }
  if (!is.null(names(b)) && !is.null(colnames(x))) {
    if (!setequal(names(b), colnames(x))) {
      nce_abort(sprintf("names of `%s` must be the columns of `draws` (%s)", arg, paste(colnames(x), collapse = ", ")),
                "input")
    }
    b <- b[colnames(x)]
  }
  unname(as.double(b))
}

# Draws of a continuous posterior: each column needs several distinct values (a reference fitted
# to two values has no spread to speak of, and the estimate would be confident nonsense), and
# magnitudes whose squares are finite (the reference's moments).
check_draws_spread <- function(x, arg = "draws", constant_ok = FALSE, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  need <- min(5L, nrow(x))
  k <- vapply(seq_len(ncol(x)), function(j) length(unique(x[, j])), 1L)
  # (marglik_nce() refuses a constant column where it fits the reference: constant_ok)
  bad <- which(k < need & (k > 1L | !constant_ok))
  if (length(bad)) {
    # the message names the caller's argument only: check_draws_spread() serves more than one function
    nce_abort(sprintf(paste("`%s` column(s) %s have only %s distinct value(s): `%s` must be draws of a",
                            "continuous posterior (at least %d distinct values per column); check the sampler"),
                      arg, format_positions(bad), paste(unique(k[bad]), collapse = "/"), arg, need), "input",
              call = call)
  }
  big <- which(apply(abs(x), 2L, max) > 1e150)
  if (length(big)) {
    nce_abort(sprintf(paste("`%s` column(s) %s reach magnitudes above 1e150, where their squares overflow:",
                            "rescale the parameters"), arg, format_positions(big)), "data", call = call)
  }
  invisible(x)
}
