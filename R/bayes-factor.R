# Bayes factors between models sharing a prior by logistic regression between
# posterior samples (eq. 19-20 of the NCL report; Geyer 1994). The numerics
# (1-D Newton/bisection, effective sample sizes) run in Rust: src/rust/nce-core/src/bridge.rs.

#' Bayes factor from posterior samples of two models sharing a prior
#'
#' Estimates \eqn{\log K = \log p_1(x) - \log p_2(x)} for two models with the
#' same prior on a common parameter from draws of each model's posterior.
#' Draws from the first posterior are labelled 1, draws from the second 0; the
#' probability of label 1 is
#' \eqn{\sigma(l_1(\theta) - l_2(\theta) - \log K + \log(n_1/n_2))}, with
#' \eqn{l_k} the log-likelihoods, so \eqn{\log K} is the offset of a logistic
#' regression with known slope. Its negative log-likelihood is convex in
#' \eqn{\log K}; it is minimised by Newton's method safeguarded by bisection.
#' This is Geyer's (1994) reverse logistic regression, the same estimator as
#' the optimal bridge sampling of Meng and Wong (1996).
#'
#' The standard error is the sandwich of the two-sample problem
#' (\eqn{1/I - 1/n_1 - 1/n_2} with \eqn{I} the Fisher information of the 1-D
#' problem when draws are independent) with each sample's score variance
#' multiplied by \eqn{n / \mathrm{ESS}}. Effective sample sizes are estimated
#' from the score contributions in draw order by Geyer's initial monotone
#' sequence (so pass each model's draws as one chain or chains one after the
#' other), or given through `ess`. The autocovariances are taken about the
#' estimated mean, which makes each low by about the variance of that mean,
#' so the sum over the \eqn{L} lags used is multiplied back by
#' \eqn{1/(1 - (2L - 1)/n)} (a first-order correction: on AR(1) chains with
#' 25 effective draws it overstates the autocorrelation time by about 15%,
#' without it the time is 7% low; it is negligible for independent draws).
#'
#' When the two samples are perfectly separated (every draw of the first
#' posterior has a larger \eqn{l_1 - l_2} than every draw of the second), the
#' draws do not identify \eqn{\log K}: the result has `log_bf = NA`, a
#' warning of class `nce_warning_separation`, and `bounds`.
#'
#' @param draws1,draws2 Posterior draws of model 1 and model 2: matrices with
#'   one row per draw (the same columns), or vectors for one parameter.
#' @param log_density1,log_density2 Each model's log-likelihood (the log density of the data given the
#'   parameters): a vectorised function
#'   of a draws matrix returning one value per row, or a list of two numeric
#'   vectors: the log-likelihood at `draws1` and at `draws2` (then `draws1`
#'   and `draws2` may be `NULL`).
#' @param ess `NULL` to estimate effective sample sizes, or two numbers (use
#'   the numbers of draws for independent draws), each at most its sample's
#'   number of draws.
#' @param prior_odds Prior odds of model 1 against model 2, for the posterior
#'   model probabilities.
#' @param chains `NULL` (each sample one chain, or independent draws), or the
#'   chains stacked in each sample: the number of chains of equal length or
#'   their lengths, for both samples, or a list of two such specifications
#'   (`NULL` for a sample of one chain). Effective sample sizes are then
#'   estimated per chain.
#' @return An object of class `nce_bf`, a list with `log_bf` (\eqn{\log K}),
#'   `se`, `bf` (\eqn{K}), `prob` (posterior model probabilities), `ess`, `n`,
#'   `se_iid` (the standard error for independent draws), `bounds`
#'   (importance sampling estimates from each sample:
#'   \eqn{\log \bar{e^{r}}} over the draws of model 2 and
#'   \eqn{-\log \bar{e^{-r}}} over those of model 1, with
#'   \eqn{r = l_1 - l_2}; their expectations bound \eqn{\log K} from below
#'   and above), `separated`, `converged`, `iterations`. Methods: `coef()`,
#'   `vcov()`, `confint()`, `nobs()`, `tidy()`, `glance()` (see
#'   [estimate_methods]). Refused: non-finite log-likelihoods, NA draws,
#'   `ess` that is not two positive finite numbers or is above a sample's
#'   number of draws, and log-likelihood ratios
#'   beyond 1e12 in absolute value (`nce_error_data`: double precision cannot
#'   resolve the differences between draws that estimate log K there). An
#'   error inside `log_density1` or `log_density2` is raised as `nce_error_model`,
#'   quoting its message.
#' @references Geyer, C. J. (1994). Estimating normalizing constants and
#'   reweighting mixtures in Markov chain Monte Carlo. Technical report 568,
#'   School of Statistics, University of Minnesota.
#'
#'   Meng, X.-L. and Wong, W. H. (1996). Simulating ratios of normalizing
#'   constants via a simple identity. Statistica Sinica 6, 831-860.
#' @seealso [marglik_nce()] and [bayes_factor_marglik()] when the priors differ.
#' @examples
#' # x0 = -1.0136; M1: x ~ N(-theta^2, 1), M2: x ~ N(theta^2, 1), theta ~ U(-30, 30)
#' x0 <- -1.0136
#' l1 <- function(th) dnorm(x0, -th[, 1]^2, 1, log = TRUE)
#' l2 <- function(th) dnorm(x0, th[, 1]^2, 1, log = TRUE)
#' # exact posterior draws by rejection from U(-4, 4) (the likelihoods vanish beyond)
#' rpost <- function(n, l) {
#'   th <- runif(20 * n, -4, 4)
#'   keep <- log(runif(length(th))) < l(cbind(th)) + 0.5 * log(2 * pi)
#'   th[keep][seq_len(n)]
#' }
#' set.seed(1)
#' fit <- bayes_factor_nce(rpost(5000, l1), rpost(5000, l2), l1, l2)
#' fit
#' summary(fit)
#' @export
bayes_factor_nce <- function(draws1, draws2, log_density1, log_density2, ess = NULL, prior_odds = 1, chains = NULL) {
  rng <- rng_state()
  call <- match.call()
  ucall <- sys.call()
  check_prior_odds(prior_odds)
  check_ess(ess, 2L, ucall)
  precomputed <- is.list(log_density1) && !is.function(log_density1)
  if (precomputed != (is.list(log_density2) && !is.function(log_density2))) {
    nce_abort("`log_density1` and `log_density2` must both be functions or both be lists of two vectors", "input")
  }
  if (precomputed) {
    l <- c(precomputed_loglik(log_density1, "log_density1"), precomputed_loglik(log_density2, "log_density2"))
    n1 <- length(l[[1L]])
    n2 <- length(l[[2L]])
    if (length(l[[3L]]) != n1 || length(l[[4L]]) != n2) {
      nce_abort(sprintf(paste("`log_density1` has %d and %d values, `log_density2` %d and %d: both need the values",
                              "at draws1 then at draws2"),
                        n1, n2, length(l[[3L]]), length(l[[4L]])), "input")
    }
    for (k in 1:2) {
      d <- list(draws1, draws2)[[k]]
      if (!is.null(d)) {
        d <- as_draws(d, c("draws1", "draws2")[k])
        if (nrow(d) != c(n1, n2)[k]) {
          nce_abort(sprintf("`draws%d` has %d rows but the log-likelihoods have %d values", k, nrow(d), c(n1, n2)[k]),
                    "input")
        }
      }
    }
    if (!is.null(draws1) && !is.null(draws2)) check_same_dim(as_draws(draws1, "draws1"), as_draws(draws2, "draws2"))
    l11 <- l[[1L]]
    l12 <- l[[2L]]
    l21 <- l[[3L]]
    l22 <- l[[4L]]
  } else {
    if (!is.function(log_density1) || !is.function(log_density2)) {
      nce_abort(paste("`log_density1` and `log_density2` must be functions of a draws matrix (or lists of two",
                      "vectors)"), "input")
    }
    d1 <- as_draws(draws1, "draws1")
    d2 <- as_draws(draws2, "draws2")
    check_same_dim(d1, d2)
    check_draws_spread(d1, "draws1", call = ucall)
    check_draws_spread(d2, "draws2", call = ucall)
    l11 <- eval_logdens(log_density1, d1, "log_density1", "draws1", ucall)
    l12 <- eval_logdens(log_density1, d2, "log_density1", "draws2", ucall)
    l21 <- eval_logdens(log_density2, d1, "log_density2", "draws1", ucall)
    l22 <- eval_logdens(log_density2, d2, "log_density2", "draws2", ucall)
  }
  if (length(l11) < 2L || length(l12) < 2L) {
    nce_abort(sprintf("each model needs at least two posterior draws (got %d and %d)", length(l11), length(l12)),
              "input")
  }
  check_ess_draws(ess, c(length(l11), length(l12)), c("draws of model 1", "draws of model 2"), ucall)
  check_finite_values(l11, "log_density1", "draws1")
  check_finite_values(l12, "log_density1", "draws2")
  check_finite_values(l21, "log_density2", "draws1")
  check_finite_values(l22, "log_density2", "draws2")
  check_resolvable(l11 - l21, l12 - l22, "log_density1 - log_density2", ucall)
  if (identical(l11, l12) && identical(l21, l22)) {
    nce_warn(paste("`draws1` and `draws2` are the same sample (the same log-likelihoods at both): the estimate",
                   "needs independent draws of each model's posterior, and its standard error assumes them"),
             "identical_samples", call = ucall)
  }
  if (!is.list(chains)) chains <- list(chains, chains)
  if (length(chains) != 2L) nce_abort("`chains` must be NULL, one chain specification, or a list of two", "input")
  chains <- list(chains_arg(chains[[1L]], length(l11), "chains", ucall),
                 chains_arg(chains[[2L]], length(l12), "chains", ucall))
  fit <- bridge_solve(l11 - l21, l12 - l22, ess, chains)
  if (!fit$separated && !(fit$se > 0)) {
    nce_abort(paste("the standard error of log K is 0: the log-likelihood ratios are (nearly) the same at every",
                    "draw of `draws1` and `draws2`, so the samples carry no information to tell the models apart;",
                    "check the draws (identical samples?) and the log-likelihoods"), "data", call = ucall)
  }
  out <- bf_result(fit$log_ratio, fit$se, prior_odds, call, "logistic regression between posterior samples")
  out$se_iid <- fit$se_iid
  out$ess <- stats::setNames(fit$ess, c("model1", "model2"))
  out$n <- stats::setNames(as.integer(fit$n), c("model1", "model2"))
  out$bounds <- c(lower = fit$bound_lower, upper = fit$bound_upper)
  out$separated <- fit$separated
  out$converged <- fit$converged
  out$iterations <- fit$iterations
  if (fit$separated) {
    out <- separated_result(out, fit, "log K", "the two posterior samples do not overlap")
  } else if (!fit$converged) {
    nce_warn("the 1-D Newton/bisection search did not converge", "convergence")
  }
  as_result(out, rng = rng, env = parent.frame())
}

#' Bayes factor from two marginal likelihood estimates
#'
#' Combines two [marglik_nce()] results (models with any priors and parameter
#' spaces) into \eqn{\log K = \log p_1(x) - \log p_2(x)}, with the standard
#' errors added in quadrature (the estimates use independent draws).
#'
#' @param object1,object2 Results of [marglik_nce()] for model 1 and model 2 (argument names:
#'   [nce_vocabulary]).
#' @param prior_odds Prior odds of model 1 against model 2.
#' @return An object of class `nce_bf` (see [bayes_factor_nce()]). Refused:
#'   inputs that are not [marglik_nce()] results, a separated (unidentified)
#'   estimate, `prior_odds` that is not one positive number.
#' @examples
#' set.seed(1)
#' # Model 1: y ~ N(mu, 1), mu ~ N(0, 1); model 2: mu = 0. Data y = 1.5.
#' y <- 1.5
#' lp1 <- function(m) dnorm(y, m[, 1], 1, log = TRUE) + dnorm(m[, 1], 0, 1, log = TRUE)
#' ml1 <- marglik_nce(rnorm(4000, y / 2, sqrt(0.5)), lp1)
#' ml2 <- structure(list(logml = dnorm(y, 0, 1, log = TRUE), se = 0),
#'                  class = c("nce_marglik", "nce_estimate", "nce_result"))
#' bayes_factor_marglik(ml1, ml2)
#' # exact: dnorm(y, 0, sqrt(2), log = TRUE) - dnorm(y, 0, 1, log = TRUE)
#' @export
bayes_factor_marglik <- function(object1, object2, prior_odds = 1) {
  call <- sys.call()
  if (!inherits(object1, "nce_marglik") || !inherits(object2, "nce_marglik")) {
    nce_abort(sprintf("`object1` and `object2` must be results of marglik_nce(), not %s and %s.",
                      describe_value(object1), describe_value(object2)), "input", call = call)
  }
  check_prior_odds(prior_odds)
  for (k in 1:2) {
    x <- list(object1, object2)[[k]]
    if (!is.numeric(x$logml) || length(x$logml) != 1L || is.na(x$logml)) {
      why <- if (isTRUE(x$separated)) ": its samples were separated (draw more or bridge)" else ""
      nce_abort(sprintf("`object%d`'s log marginal likelihood estimate is %s%s: no Bayes factor.", k,
                        describe_value(x$logml), why), "input", call = call)
    }
  }
  out <- bf_result(object1$logml - object2$logml, sqrt(object1$se^2 + object2$se^2), prior_odds, match.call(),
                   "difference of two marginal likelihoods (marglik_nce)")
  out$logml <- c(model1 = object1$logml, model2 = object2$logml)
  out$n <- c(model1 = object1$n %||% NA_integer_, model2 = object2$n %||% NA_integer_)
  out$combined <- TRUE
  as_result(out, rng = NULL, env = parent.frame())
}

`%||%` <- function(a, b) if (is.null(a)) b else a

# `ess`: NULL or k positive finite numbers (Inf would make the standard error meaningless).
check_ess <- function(ess, k, call) {
  if (is.null(ess)) return(invisible())
  if (!is.numeric(ess) || length(ess) != k || anyNA(ess) || any(!is.finite(ess)) || any(ess <= 0)) {
    nce_abort(sprintf(paste("`ess` must be NULL (to estimate it) or %s positive finite number%s (effective sample",
                            "size%s of the draws), not %s: use the numbers of draws for independent draws."),
                      if (k == 1L) "one" else "two", if (k == 1L) "" else "s", if (k == 1L) "" else "s of each sample",
                      if (is.numeric(ess)) paste(format(ess), collapse = ", ") else describe_value(ess)),
              "input", call = call)
  }
}

# An effective sample size above the number of draws it describes would make the standard error
# smaller than independent draws give: refuse it (`n`: the draws in the estimate, per sample).
check_ess_draws <- function(ess, n, what, call) {
  if (is.null(ess)) return(invisible())
  over <- which(ess > n)
  if (length(over)) {
    k <- over[1L]
    nce_abort(sprintf(paste("`ess` = %s is above the %d %s it describes: an effective sample size cannot exceed",
                            "the number of draws; give at most %d (the number of draws, for independent draws), or",
                            "NULL to estimate it."), format(ess[k]), n[k], what[k], n[k]), "input", call = call)
  }
}

# Log-likelihood ratios so large that double precision cannot resolve the O(1) differences that
# the logistic regression compares (the spacing of doubles near 1e15 is 0.125): refuse.
check_resolvable <- function(r1, r2, what, call) {
  big <- max(abs(c(r1, r2)))
  if (big > 1e12) {
    nce_abort(sprintf(paste("`%s` reaches %s in absolute value: at that size double precision cannot resolve the",
                            "differences between draws that estimate the constant (limit 1e12). Check that the",
                            "functions return log densities (not densities, not -log), and centre them if they",
                            "carry a huge constant."), what, format(big, digits = 3)), "data", call = call)
  }
}

bf_result <- function(log_bf, se, prior_odds, call, method) {
  lpo <- log_bf + log(prior_odds)
  p1 <- stats::plogis(lpo)
  structure(list(log_bf = log_bf, se = se, bf = exp(log_bf),
                 prob = c(model1 = p1, model2 = stats::plogis(-lpo)),
                 prior_odds = prior_odds, method = method, call = call),
            class = c("nce_bf", "nce_estimate", "nce_result"))
}

# Complete separation: no estimate, a warning and the importance sampling bounds.
separated_result <- function(out, fit, what, why) {
  est <- if (!is.null(out$log_bf)) "log_bf" else "logml"
  out[[est]] <- NA_real_
  out$se <- NA_real_
  if (est == "log_bf") {
    out$bf <- NA_real_
    out$prob[] <- NA_real_
  }
  nce_warn(sprintf(paste0(
    "complete separation: %s (every draw of the first is classified correctly at any %s between %s and %s). ",
    "%s is not identified by these draws; importance sampling from each sample bounds it (in expectation) ",
    "between %s and %s. Draw more, or bridge through an intermediate density."),
    why, what, format(fit$max_r2, digits = 4), format(fit$min_r1, digits = 4), what,
    format(fit$bound_lower, digits = 4), format(fit$bound_upper, digits = 4)), "separation")
  out
}

check_prior_odds <- function(prior_odds, call = caller_call()) {
  check_number(prior_odds, "prior_odds", min = 0, exclusive_min = TRUE, call = call)
}

# Draws as a numeric matrix with at least one row and no NA.
as_draws <- function(x, arg) {
  if (is.data.frame(x)) x <- as.matrix(x)
  if (is.null(x) || !is.numeric(x) || (!is.null(dim(x)) && length(dim(x)) != 2L)) {
    nce_abort(sprintf("`%s` must be a numeric matrix (rows = draws) or vector", arg), "input")
  }
  if (is.null(dim(x))) x <- matrix(x, ncol = 1L)
  storage.mode(x) <- "double"
  if (nrow(x) < 2L) {
    nce_abort(sprintf("`%s` has %d draw%s: at least two are needed", arg, nrow(x), if (nrow(x) == 1L) "" else "s"),
              "input")
  }
  if (ncol(x) < 1L) nce_abort(sprintf("`%s` has no columns", arg), "input")
  bad <- which(!stats::complete.cases(x))
  if (length(bad)) {
    nce_abort(sprintf("`%s` has NA (or NaN) in %d of %d draws (rows %s)", arg, length(bad), nrow(x),
                      format_positions(bad)), "data")
  }
  if (any(!is.finite(x))) {
    bad <- which(rowSums(!is.finite(x)) > 0)
    nce_abort(sprintf("`%s` has infinite values in %d draws (rows %s)", arg, length(bad), format_positions(bad)),
              "data")
  }
  x
}

check_same_dim <- function(d1, d2) {
  if (ncol(d1) != ncol(d2)) {
    nce_abort(sprintf(paste0("`draws1` has %d columns and `draws2` %d: a shared-prior Bayes factor needs draws of ",
                             "the same ",
                             "parameter; for different parameter spaces use marglik_nce() on each model and ",
                             "bayes_factor_marglik()"),
                      ncol(d1), ncol(d2)), "input")
  }
}

precomputed_loglik <- function(l, arg) {
  if (length(l) != 2L || !all(vapply(l, is.numeric, TRUE))) {
    nce_abort(sprintf("`%s` must be a function or a list of two numeric vectors (values at draws1, at draws2)", arg),
              "input")
  }
  lapply(l, as.double)
}

# A vectorised log density evaluated at the rows of a draws matrix.
eval_logdens <- function(f, x, fname, xname, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  v <- call_user(f, x, arg = fname, at = xname, call = call)
  if (!is.numeric(v) || length(v) != nrow(x)) {
    nce_abort(sprintf("`%s` must return one number per row of its argument: got %s of length %d for the %d rows of %s",
                      fname, class(v)[1L], length(v), nrow(x), xname), "input", call = call)
  }
  as.double(v)
}

check_finite_values <- function(v, fname, xname) {
  bad <- which(!is.finite(v))
  if (length(bad)) {
    vals <- unique(format(v[bad]))
    nce_abort(sprintf("`%s` is not finite at %d of %d draws of %s (rows %s; values %s)", fname, length(bad),
                      length(v), xname, format_positions(bad), paste(utils::head(vals, 3L), collapse = ", ")), "data")
  }
}

# The Rust solve of the two-sample logistic problem for c = log(Z1 / Z2). `chains`: for each
# sample NULL (one chain) or its chain lengths; with several chains the effective sample size of
# that sample's scores is estimated per chain (then the solve is repeated with it: the estimate
# does not change, only its standard error). `whole`: NULL, or for sample 1 drawn as the second
# halves of chains, list(r = the log ratios at the whole chains in draw order, chains = the lengths
# of their halves): the autocorrelation time of the scores is then estimated from both halves of
# every chain (each about its own mean: the reference fitted to the first half shifts its scores),
# with half the noise of the estimation half's own estimate, and applied to the estimation half.
bridge_solve <- function(r1, r2, ess = NULL, chains = list(NULL, NULL), whole = NULL) {
  if (is.null(ess)) ess <- c(NA_real_, NA_real_)
  fit <- nce_bridge_solve(as.double(r1), as.double(r2), as.double(ess), 1e-12, 200L, nce_threads())
  per_chain <- vapply(chains, function(ch) length(ch) > 1L, TRUE) & is.na(ess)
  use_whole <- !is.null(whole) && is.na(ess[1L])
  if ((any(per_chain) || use_whole) && !inherits(fit, "nce_rust_error") && !isTRUE(fit$separated)) {
    nu <- log(length(r1) / length(r2))
    c0 <- fit$log_ratio
    scores <- list(stats::plogis(-(r1 - c0 + nu)), stats::plogis(r2 - c0 + nu))
    for (k in which(per_chain)) ess[k] <- rs(nce_ess_chains(scores[[k]], as.integer(chains[[k]])))
    if (use_whole) {
      ess[1L] <- length(r1) / length(whole$r) *
        rs(nce_ess_chains(stats::plogis(-(whole$r - c0 + nu)), as.integer(whole$chains)))
    }
    fit <- nce_bridge_solve(as.double(r1), as.double(r2), as.double(ess), 1e-12, 200L, nce_threads())
  }
  if (inherits(fit, "nce_rust_error") && grepl("effective sample size", fit$message) && anyNA(ess)) {
    nce_abort(paste("the effective sample sizes could not be estimated: the classification scores are the same at",
                    "every draw (the log ratios are constant, e.g. identical log-likelihoods or log densities, or",
                    "the classifier saturates). Check the log-likelihoods, or pass `ess` (for independent draws,",
                    "the numbers of draws)."), "data", call = caller_call(2L))
  }
  fit <- rs(fit, call = caller_call(2L))
  if (!fit$separated && (!is.finite(fit$log_ratio) || !is.finite(fit$se))) {
    nce_abort(sprintf(paste("the estimate is not finite (log ratio %s, s.e. %s): the draws' log ratios are",
                            "degenerate; check the log densities."), format(fit$log_ratio), format(fit$se)),
              "numerical", call = caller_call(2L))
  }
  fit
}
