# A reference distribution made from a fitted model: the adaptive reference of the deep
# energy-based models' "going further" (fit, then refit against draws from the fit).

#' A reference distribution from a fitted nce model
#'
#' Uses a fit of [nce()] for the reference of the next fit: an even mixture of the fitted density
#' and the fit's own reference (half the draws from each), so the new reference is close to the
#' data where the fit is good and keeps the old reference's support and tails. Gutmann and Hyvarinen
#' (2012) recommend a reference close to the data; iterating fit -> reference -> fit is the
#' adaptive reference of flow-contrastive and iterative NCE. Whether it helps depends on the
#' model: on a Gaussian fitted with a quadratic energy the second fit's standard errors were no
#' smaller than the first's (tests/testthat/test-reference-model.R); for network energies in 6
#' dimensions see the "Deep energy-based models" vignette.
#'
#' Draws from a fit with an [mlp()] energy alone come from the random-walk Metropolis sampler of
#' [simulate.nce_mlp()] (thinned chains, so nearly but not exactly independent); from other fits by
#' sampling-importance-resampling from the fit's own reference with `candidates` draws per point
#' ([simulate.nce_fit()]). The fitted density (zero outside the Metropolis box) is normalised
#' afresh by importance sampling with 200,000 draws from the fit's own reference, so the next
#' fit's normaliser does not inherit this fit's error in its intercept.
#'
#' @param object An `nce_fit` from [nce()] (not conditional).
#' @param candidates For fits sampled by importance resampling: reference draws per point.
#' @param n_chains,burnin,thin For network energies: the Metropolis chains (refused, with
#'   `nce_error_size`, above 5e8 steps in all: `n_chains` x `burnin` here, and with the draws
#'   when the reference is sampled).
#' @return A reference distribution (`nce_reference`) over the fit's variables.
#' @seealso [nce_adapt()], which runs the loop fit -> reference -> fit.
#' @references Gutmann, M. U. and Hyvarinen, A. (2012). Noise-contrastive estimation of
#'   unnormalized statistical models. JMLR 13.
#' @examples
#' set.seed(1)
#' d <- data.frame(x = rnorm(1000))
#' fit1 <- nce(~ x + I(x^2), d, ref_normal(x = 0, cov = 9), ratio = 5)
#' fit2 <- nce(~ x + I(x^2), d, ref_model(fit1), ratio = 5)
#' rbind(coef(fit1), coef(fit2))   # truth: 0, -0.5 for x^2; log Z 0.919
#' @export
ref_model <- function(object, candidates = 10, n_chains = 20L, burnin = 1000L, thin = 10L) {
  check_unconditional_fit(object, caller_call())
  check_number(candidates, "candidates", min = 1, max = 1e4)
  check_count(n_chains, "n_chains", max = 10000)
  check_whole(burnin, "burnin", min = 0)
  check_count(thin, "thin", max = 10000)
  # The burn-in alone, here; the draws when the reference is sampled.
  check_chain_work(n_chains, burnin, 0, c("n_chains", "burnin"))
  vars <- object$reference$vars
  metropolis <- inherits(object, "nce_mlp") && mlp_alone(object)
  from_fit <- if (metropolis) {
    function(n) as.data.frame(mlp_draws(object, n, n_chains, burnin, thin))[vars]
  } else {
    function(n) {
      k <- ceiling(candidates * n)
      check_size(k * 8 * (3 * length(vars) + 8), "candidates", "ref_model()")
      out <- sir_simulate(object$reference, function(u) stats::predict(object, u, type = "log_unnormalised"),
                          n, k, 1L)
      out[vars]
    }
  }
  # The sampled density is the fit's, on the Metropolis box when there is one: normalise it there
  # afresh by importance sampling from the fit's own reference (200,000 draws), so the next fit's
  # normaliser does not inherit this fit's error in its intercept.
  box <- if (metropolis) {
    all_x <- as.matrix(object$nce_frame[object$network$inputs])
    list(lower = apply(all_x, 2L, min), upper = apply(all_x, 2L, max))
  }
  in_box <- function(d) {
    if (is.null(box)) return(rep(TRUE, nrow(d)))
    x <- as.matrix(d[object$network$inputs])
    rowSums(sweep(x, 2L, box$lower, "<") | sweep(x, 2L, box$upper, ">")) == 0
  }
  u <- ref_draw(object$reference, 200000L)
  lw <- stats::predict(object, u, type = "log_density") - ref_logq(object$reference, u)
  lw[!in_box(u)] <- -Inf
  log_c <- log_mean_exp(lw)
  log_fit <- function(d) {
    out <- stats::predict(object, d, type = "log_density") - log_c
    out[!in_box(d)] <- -Inf
    out
  }
  # Half the draws from the fit, half from its own reference: the mixture keeps the old
  # reference's support (the fit alone is zero outside the Metropolis box) and its tails.
  q0 <- object$reference
  sample <- function(n) {
    k <- stats::rbinom(1L, n, 0.5)
    out <- rbind(if (k > 0L) from_fit(k), if (k < n) ref_draw(q0, n - k)[vars])
    out[sample.int(n), , drop = FALSE]
  }
  log_density <- function(d) {
    a <- log_fit(d)
    b <- ref_logq(q0, d)
    m <- pmax(a, b)
    ifelse(is.finite(m), m + log(0.5 * exp(a - m) + 0.5 * exp(b - m)), -Inf)
  }
  ref_custom(sample, log_density, vars)
}

#' Refit an nce model against references made from its own fits
#'
#' The loop of the adaptive reference: `iterations` times, the model is refitted by [update()]
#' with `reference = ref_model(object)` of the previous fit (the data, formula and other arguments
#' unchanged), so each reference is closer to the data than the last. One iteration lowered a
#' network energy's KL divergence from the truth by up to a half on the 6-D targets of the "Deep
#' energy-based models" vignette, at twice the time (`bench/README.md`).
#'
#' @param object An unconditional fit of [nce()] (linear, smooth or with an [mlp()] term).
#' @param iterations Refits, each against the reference made from the one before.
#' @param ... Passed to [ref_model()] (`candidates`, `n_chains`, `burnin`, `thin`).
#' @return The last fit, with `adaptation`: a data frame with one row per fit (the first is
#'   `object`), its log normalising constant from the intercept and from importance sampling over
#'   its reference points (`log_normaliser_is`, for network fits), and its log-likelihood. Its
#'   call gives the reference as `ref_model(<the fit before>)`: `object` by the name it was passed
#'   as, later fits as `adapted_fit_1`, ..., kept with the call, so that [update()] of the result
#'   refits it. Data changed or removed since `object` was made are refused (`nce_error_data`): the
#'   refits would use other data than the fit's.
#' @seealso [ref_model()].
#' @examples
#' set.seed(1)
#' d <- data.frame(x = rnorm(1000))
#' fit <- nce(~ x + I(x^2), d, ref_normal(x = 0, cov = 9), ratio = 5)
#' fit2 <- nce_adapt(fit, iterations = 2)
#' fit2$adaptation   # truth: log normalising constant 0.919
#' @export
nce_adapt <- function(object, iterations = 1L, ...) {
  call <- sys.call()
  check_count(iterations, "iterations", max = 100, call = call)
  check_unconditional_fit(object, call)
  nm <- ...names()
  unknown <- setdiff(nm, c(names(formals(ref_model)), "", NA))
  if (...length() && (is.null(nm) || anyNA(nm) || any(nm == "") || length(unknown))) {
    nce_abort(sprintf("`...` goes to ref_model() and must name its arguments (candidates, n_chains, burnin, thin)%s",
                      if (length(unknown)) paste0(", not ", paste(unknown, collapse = ", ")) else ""),
              "input", call = call)
  }
  check_fit_data(object, parent.frame(), call)
  row <- function(f, i) {
    data.frame(iteration = i, log_normaliser = f$log_normaliser,
               log_normaliser_is = f$log_normaliser_is %||% NA_real_, logLik = as.numeric(stats::logLik(f)))
  }
  rows <- list(row(object, 0L))
  # The call gives each reference by its constructor, ref_model(<previous fit>, ...): the first
  # previous fit under the name it was passed by (`fit` if not a name), the later ones as
  # adapted_fit_1, ..., each bound in an environment above the fit's own. The printed call reads
  # as what was fitted, and update() of the result draws the reference again from the fit's
  # random state (nce() evaluates its arguments from the state its call stored), bit for bit.
  first <- substitute(object)
  ctor <- if ("package:nce" %in% search()) quote(ref_model) else quote(nce::ref_model)
  for (i in seq_len(iterations)) {
    prev <- if (i > 1L) sprintf("adapted_fit_%d", i - 1L) else if (is.name(first)) as.character(first) else "fit"
    env <- new.env(parent = object[["call_env"]] %||% environment(stats::formula(object)))
    assign(prev, object, envir = env)
    object$call$reference <- as.call(c(list(ctor, as.name(prev)), list(...)))
    object$call_env <- env
    object <- stats::update(object, resample = TRUE)
    rows[[i + 1L]] <- row(object, i)
  }
  object$adaptation <- do.call(rbind, rows)
  object
}

# nce_adapt() refits the call's `data` by update(): refuse data gone since the fit (update() would
# report R's bare "object not found") or changed since (it would refit them silently), by the
# checksum the fit stored. Looked up where the fit was made, then in `caller`, as update() does.
check_fit_data <- function(fit, caller, call) {
  expr <- fit$call$data
  if (is.null(expr)) return(invisible())
  env <- fit[["call_env"]]
  if (!is.environment(env)) env <- environment(stats::formula(fit))
  d <- tryCatch(eval(expr, env), error = function(e) tryCatch(eval(expr, caller), error = function(e2) e))
  what <- sprintf("the data the fit used (`data = %s`)", deparse1(expr, width.cutoff = 60L))
  if (inherits(d, "error")) {
    nce_abort(sprintf("%s are gone (%s): nce_adapt() refits them; put them back or fit again with nce()",
                      what, conditionMessage(d)), "data", call = call)
  }
  if (!is.null(fit$data_hash) && !identical(data_hash(d), fit$data_hash)) {
    nce_abort(sprintf(paste("%s have changed since the fit: nce_adapt() would refit other data than the fit's.",
                            "Fit the new data with nce() first, or restore the old"), what), "data", call = call)
  }
  invisible()
}

# `object` must be an unconditional fit of nce(): the fits a reference can be made from.
check_unconditional_fit <- function(object, call) {
  if (!inherits(object, "nce_fit") || inherits(object, c("nce_conditional", "snce_fit", "nce_nls"))) {
    check_fail("an unconditional fit of nce() (linear, smooth or mlp())", object, "object", call)
  }
  check_proper(object, "a reference made from a fit", call = call)
}
