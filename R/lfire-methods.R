# Methods for LFIRE fits (class nce_lfire): a posterior over parameter values given as
# weights on a grid or on prior draws.

# Weighted quantiles of a discrete distribution, interpolating the CDF between support
# points taken at the middle of their mass (so a grid's quantiles move smoothly).
weighted_quantile <- function(x, w, probs) {
  ok <- w > 0 & is.finite(x)
  x <- x[ok]
  w <- w[ok] / sum(w[ok])
  if (length(x) == 0L) return(rep(NA_real_, length(probs)))
  agg <- tapply(w, x, sum)
  v <- as.double(names(agg))
  cw <- cumsum(agg) - agg / 2
  if (length(v) == 1L) return(rep(v, length(probs)))
  stats::approx(cw, v, xout = probs, rule = 2, ties = "ordered")$y
}

posterior_moments <- function(object) {
  w <- object$posterior
  th <- object$theta
  mean <- colSums(th * w)
  cen <- sweep(th, 2L, mean)
  cov <- crossprod(cen * sqrt(w))
  list(mean = mean, cov = cov, sd = sqrt(diag(cov)))
}

lfire_mode <- function(object) which.max(object$posterior)

#' Methods for LFIRE fits
#'
#' `coef()` gives the posterior means, `vcov()` the posterior covariance, `confint()`
#' equal-tailed credible intervals; `predict()` the estimated log ratio
#' \eqn{\log p(s_{obs} \mid \theta) / p(s_{obs})} at the fitted parameter values or, with
#' `newdata`, at new ones (simulating there and reusing the fit's prior-predictive sample);
#' `simulate()` draws from the posterior predictive distribution of the summaries;
#' `update()` refits, reusing the simulations when the simulation settings are unchanged
#' (e.g. `update(fit, penalty = "ridge")`).
#'
#' @param object,x An `nce_lfire` fit.
#' @param parm Parameters (names or positions).
#' @param level Credible level.
#' @param newdata Matrix or data frame of parameter values.
#' @param type `"link"` (log ratio), `"response"` (ratio) or `"posterior"` (posterior
#'   weights, at the fitted values only); `"lpmatrix"` is not available.
#' @param se.fit Not available (the ratio's sampling error is not estimated).
#' @param nsim Number of posterior-predictive simulations.
#' @inheritParams nce_vocabulary
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param select For `plot()`: parameters to show.
#' @param ... Unused, or (update) arguments of [lfire()] to change.
#' @name lfire-methods
#' @return See the descriptions above.
NULL

#' @rdname lfire-methods
#' @export
coef.nce_lfire <- function(object, ...) posterior_moments(object)$mean

#' @rdname lfire-methods
#' @export
vcov.nce_lfire <- function(object, ...) posterior_moments(object)$cov

#' @rdname lfire-methods
#' @export
confint.nce_lfire <- function(object, parm, level = 0.95, ...) {
  check_probability(level)
  nms <- colnames(object$theta)
  if (missing(parm)) parm <- nms
  if (is.numeric(parm)) parm <- nms[parm]
  if (!is.character(parm) || anyNA(parm) || !all(parm %in% nms)) {
    nce_abort(sprintf("`parm` must name parameters among %s.", paste(nms, collapse = ", ")), "input")
  }
  a <- (1 - level) / 2
  ci <- t(vapply(parm, function(p) weighted_quantile(object$theta[, p], object$posterior, c(a, 1 - a)), numeric(2)))
  dimnames(ci) <- list(parm, sprintf("%s %%", format(100 * c(a, 1 - a), trim = TRUE)))
  ci
}

#' @rdname lfire-methods
#' @export
predict.nce_lfire <- function(object, newdata = NULL, type = c("link", "response", "posterior", "lpmatrix"),
                              se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  if (type == "lpmatrix") {
    nce_unsupported("predict(type = \"lpmatrix\")", object,
                    "each parameter value has its own regression on simulated summaries, not one linear predictor")
  }
  if (!isFALSE(se.fit)) {
    nce_unsupported("predict(se.fit = TRUE)", object,
                    "the log ratio's Monte Carlo error is not estimated (refit with other seeds to see it)")
  }
  if (is.null(newdata)) {
    lr <- object$log_ratio
  } else {
    if (type == "posterior") {
      nce_abort("type = \"posterior\" is defined on the fitted parameter values only: drop `newdata`.", "input")
    }
    if (NROW(newdata) == 0L) return(numeric(0))
    th <- as_theta_matrix(newdata, object$prior$names, what = "`newdata`")
    if (any(!is.finite(th))) nce_abort("`newdata` has non-finite parameter values.", "input")
    sims <- run_simulations(object$simulator, object$summaries, th, object$n_theta, object$batch,
                            object$n_theta, call = sys.call())
    lr <- lfire_engine(object$observed_summaries, object$marginal, sims, nrow(th), object$penalty,
                       object$control, sys.call())$log_ratio
  }
  switch(type, link = lr, response = exp(lr), posterior = object$posterior)
}

#' @rdname lfire-methods
#' @export
simulate.nce_lfire <- function(object, nsim = 1, seed = NULL, ...) {
  check_count(nsim)
  posterior_predictive(object$theta, object$posterior, nsim, seed, object$simulator, object$summaries, object$batch,
                       sys.call())
}

# nsim parameter values drawn from a weighted posterior sample, each simulated once: a data frame
# of the parameters and their summaries.
posterior_predictive <- function(theta, weights, nsim, seed, simulator, summaries, batch, call) {
  # Before drawing nsim indices (run_simulations() checks again, naming its own argument).
  check_nsim(nsim, 8 * (ncol(theta) + 2), call = call)
  if (!is.null(seed)) set.seed(seed)
  i <- sample.int(nrow(theta), nsim, replace = TRUE, prob = weights)
  th <- theta[i, , drop = FALSE]
  s <- run_simulations(simulator, summaries, th, 1L, batch, 100L, call = call)
  data.frame(th, s$summaries, check.names = FALSE)
}

#' @rdname lfire-methods
#' @export
update.nce_lfire <- function(object, ..., resample = FALSE) {
  changes <- list(...)
  args <- list(observed = object$observed, simulator = object$simulator, summaries = object$summaries,
               prior = object$prior, theta = structure(object$theta, grid = object$grid), n_theta = object$n_theta,
               n_marginal = object$n_marginal, penalty = object$penalty, batch = object$batch,
               method = object$type, control = object$control)
  sim_args <- c("simulator", "summaries", "batch", "prior")
  if (!any(names(changes) %in% c(sim_args, "n_marginal"))) args$marginal <- object$marginal
  if (!any(names(changes) %in% c(sim_args, "theta", "n_theta"))) args$simulations <- object$simulations
  args[names(changes)] <- changes
  kept <- !is.null(args$marginal) && !is.null(args$simulations)
  user_summaries <- args$summaries
  wrap <- kept && !resample && !any(names(changes) %in% c("observed", "summaries"))
  if (wrap) {
    # The kept simulations resume at the random state after them, where a summaries function that
    # draws random numbers would give the observed data other summaries: they are the fit's own.
    s_obs <- matrix(object$observed_summaries, 1L, dimnames = list(NULL, names(object$observed_summaries)))
    args$summaries <- function(x) if (identical(x, args$observed)) s_obs else user_summaries(x)
  }
  fit <- rerun(object, lfire, args, resample, if (kept) object$rng_fit else object$rng_state)
  if (wrap) fit$summaries <- user_summaries
  for (nm in names(changes)) fit$call[[nm]] <- substitute(list(...))[[nm]]
  fit
}

#' @export
print.nce_lfire <- function(x, ...) {
  cat("LFIRE posterior (likelihood-free inference by ratio estimation)\n")
  cat("Call: ", paste(deparse(x$call, width.cutoff = 100L), collapse = "\n"), "\n", sep = "")
  pen <- if (x$penalty == "lasso") {
    sprintf("lasso (lambda by %s%d-fold CV, %s)", if (isTRUE(x$control$onestep == 1)) "one-step " else "",
            x$control$folds, x$control$lambda)
  } else {
    "ridge (REML)"
  }
  cat(sprintf("%d parameter values (%s), %d simulations each, %d prior-predictive; penalty %s\n",
              nrow(x$theta), x$type, x$n_theta, x$n_marginal, pen))
  nf <- nrow(x$simulations$failures) + nrow(x$marginal$failures)
  if (nf > 0L) cat(sprintf("%d simulations failed and were left out\n", nf))
  m <- posterior_moments(x)
  print(round(rbind(mean = m$mean, sd = m$sd), 4L))
  if (isTRUE(x$stiffness$flagged)) cat(strwrap(stiffness_message(x$stiffness), width = 100L), sep = "\n")
  invisible(x)
}

#' @rdname lfire-methods
#' @export
summary.nce_lfire <- function(object, level = 0.95, ...) {
  m <- posterior_moments(object)
  ci <- confint(object, level = level)
  med <- vapply(colnames(object$theta), function(p) weighted_quantile(object$theta[, p], object$posterior, 0.5), 1)
  mode <- lfire_mode(object)
  tab <- data.frame(mean = m$mean, sd = m$sd, lower = ci[, 1], median = med, upper = ci[, 2],
                    mode = object$theta[mode, ], row.names = colnames(object$theta))
  b <- object$beta[mode, ]
  selected <- colnames(object$beta)[!is.na(b) & b != 0]
  structure(list(call = object$call, table = tab, level = level, selected = selected,
                 n_summaries = length(object$observed_summaries), n_features = ncol(object$beta),
                 penalty = object$penalty,
                 ess = 1 / sum(object$posterior^2), type = object$type, n_values = nrow(object$theta),
                 failures = nrow(object$simulations$failures) + nrow(object$marginal$failures),
                 stiffness = object$stiffness, time = object$time),
            class = "summary.nce_lfire")
}

#' @export
print.summary.nce_lfire <- function(x, digits = 4L, ...) {
  cat("LFIRE posterior\n")
  cat("Call: ", paste(deparse(x$call, width.cutoff = 100L), collapse = "\n"), "\n\n", sep = "")
  cat(sprintf("Posterior over %d parameter values (%s); lower/upper: %g%% equal-tailed credible interval\n",
              x$n_values, x$type, 100 * x$level))
  print(format(x$table, digits = digits))
  if (x$type == "draws") cat(sprintf("Effective sample size of the weights: %.1f\n", x$ess))
  n_feat <- x$n_features
  what <- if (n_feat > x$n_summaries) "Features (summaries and their powers)" else "Summaries"
  cat("\n")
  cat(strwrap(sprintf("%s used at the posterior mode (%s penalty): %d of %d: %s", what, x$penalty,
                      length(x$selected), n_feat,
                      if (length(x$selected)) paste(x$selected, collapse = ", ") else "none"), width = 100L),
      sep = "\n")
  if (x$failures > 0L) cat(sprintf("%d simulations failed and were left out\n", x$failures))
  if (!is.null(x$stiffness)) cat(strwrap(stiffness_message(x$stiffness), width = 100L), sep = "\n")
  invisible(x)
}

#' @rdname lfire-methods
#' @export
plot.nce_lfire <- function(x, select = colnames(x$theta), ...) {
  nms <- colnames(x$theta)
  if (is.numeric(select)) select <- nms[select]
  if (!is.character(select) || !all(select %in% nms)) {
    nce_abort(sprintf("`select` must name parameters among %s.", paste(nms, collapse = ", ")), "input")
  }
  two <- length(select) == 2L && x$type == "grid"
  op <- graphics::par(mfrow = c(1L, length(select) + two))
  on.exit(graphics::par(op))
  for (p in select) {
    d <- lfire_marginal(x, p)
    plot(d$x, d$y, type = "l", xlab = p, ylab = "posterior density", main = paste("Marginal of", p), ...)
  }
  if (two) {
    pts <- x$grid[select]
    z <- tapply(x$posterior, list(factor(x$theta[, select[1]], pts[[1]]), factor(x$theta[, select[2]], pts[[2]])), sum)
    z[is.na(z)] <- 0
    graphics::contour(pts[[1]], pts[[2]], z, xlab = select[1], ylab = select[2], main = "Joint posterior",
                      drawlabels = FALSE)
  }
  invisible(x)
}

# Marginal density of parameter p: mass per grid value over the cell width (grid), or a
# weighted kernel density (draws).
lfire_marginal <- function(x, p) {
  if (x$type == "grid" && !is.null(x$grid[[p]])) {
    v <- x$grid[[p]]
    mass <- tapply(x$posterior, factor(x$theta[, p], v), sum)
    mass[is.na(mass)] <- 0
    width <- if (length(v) > 1L) mean(diff(v)) else 1
    list(x = v, y = as.double(mass) / width)
  } else {
    d <- stats::density(x$theta[, p], weights = x$posterior)
    list(x = d$x, y = d$y)
  }
}

#' Tidy an LFIRE posterior
#'
#' @inheritParams nce_vocabulary
#' @param conf.level Credible level of `conf.low`/`conf.high`.
#' @return `tidy()`: one row per parameter (posterior mean as `estimate`, posterior sd as
#'   `std.error`, equal-tailed credible interval). `glance()`: one row on the fit.
#' @name tidy.nce_lfire
#' @exportS3Method generics::tidy
tidy.nce_lfire <- function(x, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  m <- posterior_moments(x)
  ci <- tidy_confint(x, conf.level)
  data.frame(term = names(m$mean), estimate = unname(m$mean), std.error = unname(m$sd),
             conf.low = unname(ci[, 1]), conf.high = unname(ci[, 2]),
             mode = unname(x$theta[lfire_mode(x), ]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_lfire
#' @exportS3Method generics::glance
glance.nce_lfire <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(n_values = nrow(x$theta), type = x$type, n_theta = x$n_theta, n_marginal = x$n_marginal,
             n_summaries = length(x$observed_summaries), penalty = x$penalty,
             n_failed = nrow(x$simulations$failures) + nrow(x$marginal$failures),
             ess = 1 / sum(x$posterior^2), simulation_time = unname(x$time["simulation"]),
             fitting_time = unname(x$time["fitting"]), stringsAsFactors = FALSE)
}
