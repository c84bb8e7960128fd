# Model methods of the amortised ratio estimator (class nce_ratio). Its classifier, `$gam`, is a
# mgcv-compatible GAM between joint (y = 1) and shuffled (y = 0) pairs, so the model methods
# are mgcv's on that classifier: coefficients, covariance, log-likelihood and residuals are
# those of the classification. The classifier's linear predictor plus log(n_shuffle) is the
# log ratio log p(s | theta) / p(s), which predict() returns.

#' Methods for amortised ratio estimators
#'
#' An [ratio_amortised()] fit is a logistic-regression classifier (a GAM) between joint and
#' shuffled (theta, s) pairs, and answers the model methods of mgcv's GAMs through it:
#' `coef()`, `vcov()` (the Bayesian covariance `Vp`), `confint()` (Wald intervals of the
#' coefficients), `nobs()` (classifier rows: joint plus shuffled pairs), `fitted()` (the
#' estimated ratio at the classifier's pairs, `predict(type = "response")` as for every result; the
#' classifier's probability that a pair is joint is `plogis(predict(x) - log(x$n_shuffle))`),
#' `residuals()` (of the classification), `logLik()`/`AIC()`/`BIC()` (of the
#' classification, with the effective degrees of freedom; comparable between classifiers fitted
#' to the same pairs), `anova()` (mgcv's tests of the smooth terms, or a deviance test between
#' classifiers fitted to the same pairs), `model.frame()` (the pairs), `model.matrix()`,
#' `formula()`, `terms()` and `plot()` (mgcv's plot of the smooth terms). `update()` refits,
#' reusing the simulations unless the simulator, summaries, prior or `n` change.
#' `simulate()` is refused: a ratio estimator is not a model of the pairs' labels (simulate
#' pairs with [simulate_summaries()]).
#'
#' `predict()` gives the log ratio \eqn{\log p(s \mid \theta) / p(s)} (`type = "link"`), the
#' ratio (`"response"`) or the classifier's linear-predictor matrix (`"lpmatrix"`; the log
#' ratio is that matrix times `coef()` plus `log(n_shuffle)`, its attribute `"constant"`), at
#' `newdata` (columns for every parameter and summary) or at the classifier's own pairs;
#' `se.fit = TRUE` adds standard errors from the classifier's Bayesian covariance.
#'
#' @param object,x,formula An `nce_ratio` from [ratio_amortised()].
#' @param newdata A data frame with a column per parameter and summary; by default the pairs.
#' @param type `"link"` (log ratio), `"response"` (ratio) or `"lpmatrix"`.
#' @param se.fit Whether to return standard errors too (a list `fit`, `se.fit`).
#' @param parm,level As for [stats::confint()].
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param ... Other `nce_ratio` fits (`anova()`), arguments of [ratio_amortised()] to change
#'   (`update()`), residual type (`residuals()`), or arguments of [mgcv::plot.gam()] (`plot()`).
#' @return As the generics; `predict()` a numeric vector, a list with `se.fit`, or a matrix.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 500, batch = TRUE,
#'                      formula = ~ s(mu, k = 5) + s(m, k = 5) + ti(mu, m, k = 4))
#' predict(r, data.frame(mu = c(0, 1), m = c(0.1, 0.1)), se.fit = TRUE)
#' r2 <- update(r, formula = ~ s(mu, k = 5) + s(m, k = 5))  # same simulations
#' AIC(r, r2)
#' plot(r, pages = 1)
#' @name nce_ratio_methods
NULL

#' @rdname nce_ratio_methods
#' @export
predict.nce_ratio <- function(object, newdata = NULL, type = c("link", "response", "lpmatrix"),
                              se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- check_choice(type, c("link", "response", "lpmatrix"), "type")
  check_bool(se.fit, "se.fit")
  nd <- ratio_newdata(object, newdata)
  const <- log(object$n_shuffle)
  if (type == "lpmatrix") {
    x <- mgcv::predict.gam(object$gam, newdata = nd, type = "lpmatrix")
    attr(x, "constant") <- const
    return(x)
  }
  p <- mgcv::predict.gam(object$gam, newdata = nd, type = "link", se.fit = se.fit)
  lr <- as.double(if (se.fit) p$fit else p) + const
  fit <- if (type == "link") lr else exp(lr)
  if (!se.fit) return(fit)
  se <- as.double(p$se.fit)
  list(fit = fit, se.fit = if (type == "link") se else fit * se)
}

# The rows to predict at: the classifier's pairs, or `newdata` checked for every parameter and
# summary column.
ratio_newdata <- function(object, newdata, call = caller_call()) {
  call <- call
  if (is.null(newdata)) return(object$gam$model)
  if (!is.data.frame(newdata)) {
    nce_abort("`newdata` must be a data frame with the parameter and summary columns.", "input", call = call)
  }
  check_newdata_columns(newdata, c(object$parameters, object$summary_names), call = call)
  cols <- c(object$parameters, object$summary_names)
  # A column of NA only (logical in R) predicts NA, as a numeric NA does.
  for (v in cols) if (is.logical(newdata[[v]]) && all(is.na(newdata[[v]]))) newdata[[v]] <- as.double(newdata[[v]])
  bad <- Filter(function(v) !is.numeric(newdata[[v]]), cols)
  if (length(bad)) {
    nce_abort(sprintf("`newdata` column(s) %s must be numeric.", paste(bad, collapse = ", ")), "input", call = call)
  }
  inf <- Filter(function(v) any(is.infinite(newdata[[v]])), cols)
  if (length(inf)) {
    nce_abort(sprintf("`newdata` column(s) %s hold infinite values (NA predicts NA).", paste(inf, collapse = ", ")),
              "input", call = call)
  }
  newdata
}

#' @rdname nce_ratio_methods
#' @export
coef.nce_ratio <- function(object, ...) stats::coef(object$gam)

#' @rdname nce_ratio_methods
#' @export
vcov.nce_ratio <- function(object, ...) stats::vcov(object$gam)

#' @rdname nce_ratio_methods
#' @export
confint.nce_ratio <- function(object, parm, level = 0.95, ...) {
  check_probability(level, "level")
  if (missing(parm)) stats::confint.default(object, level = level) else stats::confint.default(object, parm, level)
}

#' @rdname nce_ratio_methods
#' @export
nobs.nce_ratio <- function(object, ...) nrow(object$gam$model)

#' @rdname nce_ratio_methods
#' @export
residuals.nce_ratio <- function(object, ...) stats::residuals(object$gam, ...)

#' @rdname nce_ratio_methods
#' @export
logLik.nce_ratio <- function(object, ...) {
  # The classification's Bernoulli log-likelihood at the penalised fit, with the total edf as
  # its degrees of freedom (as mgcv's logLik.gam counts them).
  if (!is.null(list(...)$newdata)) {
    nce_unsupported("logLik(newdata =)", object, paste(
      "its log-likelihood is the classifier's at its own labelled pairs; held-out (theta, s) pairs carry no",
      "labels to score (use predict(newdata =) for their log ratios)"))
  }
  g <- object$gam
  w <- if (is.null(g$prior.weights)) 1 else g$prior.weights
  ll <- sum(w * stats::dbinom(g$y, 1, g$fitted.values, log = TRUE))
  structure(ll, df = sum(g$edf), nobs = nobs.nce_ratio(object), class = "logLik")
}

#' @rdname nce_ratio_methods
#' @export
anova.nce_ratio <- function(object, ...) {
  others <- list(...)
  if (!length(others)) return(mgcv::anova.gam(object$gam))
  if (!all(vapply(others, inherits, TRUE, "nce_ratio"))) {
    nce_abort("anova() compares nce_ratio fits with each other only.", "input")
  }
  n <- vapply(c(list(object), others), nobs.nce_ratio, 1)
  if (length(unique(n)) != 1L) {
    nce_abort("anova() needs classifiers fitted to the same pairs (different numbers of pairs).", "input")
  }
  # Classifiers are logistic regressions: a likelihood-ratio test (mgcv's), in the one layout.
  a <- do.call(mgcv::anova.gam, c(list(object$gam), lapply(others, `[[`, "gam"), list(test = "Chisq")))
  tab <- data.frame(a[1:4], Wald = NA_real_, `Pr(>Chi)` = a[[5L]], check.names = FALSE,
                    row.names = paste("Model", seq_len(nrow(a))))
  structure(tab, heading = c("Likelihood-ratio test of nested ratio classifiers (mgcv::anova.gam)\n",
                             paste0(rownames(tab), ": ", vapply(c(list(object), others),
                                                                function(f) deparse1(f$formula), ""), collapse = "\n")),
            class = c("anova", "data.frame"))
}

#' @rdname nce_ratio_methods
#' @export
update.nce_ratio <- function(object, ..., resample = FALSE) {
  changes <- list(...)
  args <- list(simulator = object$simulator, summaries = object$summaries, prior = object$prior, n = object$n,
               batch = object$batch, n_shuffle = object$n_shuffle)
  args <- c(args, if (inherits(object, "nce_ratio_mlp")) {
    list(classifier = "mlp", hidden = object$hidden, control = object$control)
  } else {
    list(formula = object$formula, discrete = isTRUE(object$discrete))
  })
  if (!any(names(changes) %in% c("simulator", "summaries", "prior", "n", "batch"))) {
    args$simulations <- object$simulations
  }
  args[names(changes)] <- changes
  state <- if (is.null(args$simulations)) object$rng_state else object$rng_fit
  fit <- rerun(object, ratio_amortised, args, resample, state)
  for (nm in names(changes)) fit$call[[nm]] <- substitute(list(...))[[nm]]
  fit
}

#' @rdname nce_ratio_methods
#' @export
model.frame.nce_ratio <- function(formula, ...) formula$gam$model

#' @rdname nce_ratio_methods
#' @export
model.matrix.nce_ratio <- function(object, ...) stats::model.matrix(object$gam)

#' @rdname nce_ratio_methods
#' @export
formula.nce_ratio <- function(x, ...) x$gam$formula

#' @rdname nce_ratio_methods
#' @export
terms.nce_ratio <- function(x, ...) stats::terms(x$gam)

#' @rdname nce_ratio_methods
#' @export
plot.nce_ratio <- function(x, ...) {
  mgcv::plot.gam(x$gam, ...)
  invisible(x)
}

#' Methods for posteriors from amortised ratio estimators
#'
#' A [ratio_posterior()] result is a (weighted) sample from the posterior. `coef()` gives the
#' posterior means, `vcov()` the posterior covariance, `confint()` equal-tailed credible
#' intervals, `summary()` all three with the effective sample size (and the acceptance rate of
#' Metropolis), `nobs()` the number of draws, `plot()` the marginal densities. `simulate()`
#' draws from the posterior predictive distribution: `nsim` parameter values from the posterior
#' (resampled by their weights), each with a new simulation and its summaries (a data frame of
#' parameters and summaries). `update()` samples again with other arguments of
#' [ratio_posterior()] (`n_draws`, `method`, ...) or another `observed` data set, with the same
#' classifier. Methods of a fitted model of data (`predict()`, `fitted()`, `residuals()`,
#' `logLik()`, `anova()`, `model.frame()`, `model.matrix()`, `formula()`, `terms()`) are
#' refused with `nce_error_unsupported`: use them on the ratio estimator.
#'
#' @param object,x An `nce_ratio_posterior` from [ratio_posterior()].
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param parm Parameters (names) for `confint()`.
#' @param level Credible level.
#' @param nsim Number of posterior predictive simulations.
#' @inheritParams nce_vocabulary
#' @param ... Arguments of [ratio_posterior()] to change (`update()`); unused otherwise.
#' @return As described.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 1000, batch = TRUE,
#'                      formula = ~ te(mu, m, k = 5))
#' post <- ratio_posterior(r, matrix(rnorm(20, 0.5), 1), n_draws = 4000)
#' coef(post); confint(post); nobs(post)
#' head(simulate(post, nsim = 5, seed = 2))   # posterior predictive summaries
#' update(post, method = "metropolis", n_chains = 20)
#' @name nce_ratio_posterior_methods
NULL

#' @rdname nce_ratio_posterior_methods
#' @export
nobs.nce_ratio_posterior <- function(object, ...) nrow(object$draws)

#' @rdname nce_ratio_posterior_methods
#' @export
simulate.nce_ratio_posterior <- function(object, nsim = 1, seed = NULL, ...) {
  check_count(nsim)
  r <- object$ratio
  if (is.null(r)) nce_unsupported("simulate", object, "this posterior does not hold its ratio estimator")
  posterior_predictive(object$draws, object$weights, nsim, seed, r$simulator, r$summaries, r$batch, sys.call())
}

#' @rdname nce_ratio_posterior_methods
#' @export
update.nce_ratio_posterior <- function(object, ..., resample = FALSE) {
  if (is.null(object$ratio)) nce_unsupported("update", object, "this posterior does not hold its ratio estimator")
  changes <- list(...)
  args <- c(list(object = object$ratio, observed = object$observed), object$args)
  args[names(changes)] <- changes
  rerun(object, ratio_posterior, args, resample)
}

#' Tidy an amortised ratio estimator
#'
#' The classifier of [ratio_amortised()] as mgcv's GAMs are tidied: its parametric
#' coefficients (`parametric = TRUE`) or its smooth terms (edf, reference df, test statistic
#' and p-value); `glance()` one row on the fit; `augment()` the classifier's pairs (or
#' `newdata`) with the log ratio `.fitted` (and `.se.fit` with `se_fit = TRUE`).
#'
#' @inheritParams nce_vocabulary
#' @param parametric Parametric coefficients (`TRUE`) or smooth terms (`FALSE`).
#' @param conf.int,conf.level Wald intervals for the parametric coefficients.
#' @param newdata Rows with a column per parameter and summary; by default the pairs.
#' @param se_fit Whether `augment()` adds `.se.fit`.
#' @return A data frame.
#' @name tidy.nce_ratio
#' @exportS3Method generics::tidy
tidy.nce_ratio <- function(x, parametric = TRUE,  # nolint: object_name_linter.
                           conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  tidy_gam_tables(x, summary(x$gam), parametric, conf.int, conf.level)
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::glance
glance.nce_ratio <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  g <- x$gam
  data.frame(n_pairs = x$n, n_shuffle = x$n_shuffle, nobs = stats::nobs(x), edf = sum(g$edf),
             logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll), deviance = g$deviance,
             deviance_explained = 1 - g$deviance / g$null.deviance, discrete = isTRUE(x$discrete),
             simulation_time = unname(x$time[["simulation"]]), fitting_time = unname(x$time[["fitting"]]),
             stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::augment
augment.nce_ratio <- function(x, newdata = NULL, se_fit = FALSE, ...) {  # nolint: object_name_linter.
  check_bool(se_fit, "se_fit")
  rows <- ratio_newdata(x, newdata)
  # The classifier's own pairs may lack summaries its formula leaves out: predict them as such.
  p <- predict.nce_ratio(x, newdata, se.fit = se_fit)
  out <- as.data.frame(rows)
  out$.fitted <- if (se_fit) p$fit else p
  if (se_fit) out$.se.fit <- p$se.fit
  out
}

#' Tidy a posterior from an amortised ratio estimator
#'
#' @param x An `nce_ratio_posterior` from [ratio_posterior()].
#' @param conf.level Credible level of `conf.low`/`conf.high`.
#' @inheritParams nce_vocabulary
#' @return `tidy()`: one row per parameter (posterior mean as `estimate`, posterior sd as
#'   `std.error`, equal-tailed credible interval). `glance()`: one row on the sample (method,
#'   engine, draws, smallest effective sample size, acceptance rate, time).
#' @name tidy.nce_ratio_posterior
#' @exportS3Method generics::tidy
tidy.nce_ratio_posterior <- function(x, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  m <- stats::coef(x)
  ci <- tidy_confint(x, conf.level)
  data.frame(term = names(m), estimate = unname(m), std.error = unname(sqrt(diag(stats::vcov(x)))),
             conf.low = unname(ci[, 1L]), conf.high = unname(ci[, 2L]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_ratio_posterior
#' @exportS3Method generics::glance
glance.nce_ratio_posterior <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(method = x$method, engine = if (is.null(x$engine)) NA_character_ else x$engine,
             n_draws = nrow(x$draws), ess = min(x$ess), acceptance = x$acceptance, time = x$time,
             stringsAsFactors = FALSE)
}

#' @export
print.nce_ratio <- function(x, ...) {
  cat("Amortised ratio estimator (classifier between joint and shuffled (theta, s) pairs)\n")
  cat(sprintf("%d joint pairs, %d shuffled per pair; parameters %s; summaries %s\n", x$n, x$n_shuffle,
              paste(x$parameters, collapse = ", "), paste(x$summary_names, collapse = ", ")))
  cat("Classifier: ", paste(deparse(x$formula, width.cutoff = 100L), collapse = " "),
      "\n", sep = "")
  if (isTRUE(x$discrete)) cat(discrete_note(x$gam$discrete_layout), "\n", sep = "")
  cat(sprintf("Total edf %.1f; simulation %.2f s, fitting %.2f s\n", sum(x$gam$edf), x$time[["simulation"]],
              x$time[["fitting"]]))
  invisible(x)
}

#' @export
summary.nce_ratio <- function(object, ...) {
  g <- object$gam
  structure(c(list(print = utils::capture.output(print(object)),
                   deviance_explained = 1 - g$deviance / g$null.deviance,
                   smooths = vapply(g$smooth, function(sm) sum(g$edf[sm$first.para:sm$last.para]), 1) |>
                     stats::setNames(vapply(g$smooth, `[[`, "", "label"))), summary_loglik(object)),
            class = "summary.nce_ratio")
}

#' @export
print.summary.nce_ratio <- function(x, ...) {
  writeLines(x$print)
  cat(sprintf("Classifier deviance explained: %.3f\nEffective degrees of freedom per smooth:\n", x$deviance_explained))
  print(round(x$smooths, 2L))
  invisible(x)
}

#' @rdname nce_ratio_posterior_methods
#' @export
coef.nce_ratio_posterior <- function(object, ...) colSums(object$draws * object$weights)

#' @rdname nce_ratio_posterior_methods
#' @export
vcov.nce_ratio_posterior <- function(object, ...) {
  cen <- sweep(object$draws, 2L, coef(object))
  crossprod(cen * sqrt(object$weights))
}

#' @rdname nce_ratio_posterior_methods
#' @export
confint.nce_ratio_posterior <- function(object, parm, level = 0.95, ...) {
  check_probability(level, "level")
  nms <- colnames(object$draws)
  if (missing(parm)) parm <- nms
  a <- (1 - level) / 2
  ci <- t(vapply(parm, function(p) weighted_quantile(object$draws[, p], object$weights, c(a, 1 - a)), numeric(2)))
  dimnames(ci) <- list(parm, sprintf("%s %%", format(100 * c(a, 1 - a), trim = TRUE)))
  ci
}

#' @rdname nce_ratio_posterior_methods
#' @export
summary.nce_ratio_posterior <- function(object, level = 0.95, ...) {
  ci <- confint(object, level = level)
  tab <- data.frame(mean = coef(object), sd = sqrt(diag(vcov(object))), lower = ci[, 1], upper = ci[, 2])
  structure(list(table = tab, method = object$method, engine = object$engine, ess = object$ess,
                 acceptance = object$acceptance, n = nrow(object$draws), level = level),
            class = "summary.nce_ratio_posterior")
}

#' @export
print.summary.nce_ratio_posterior <- function(x, digits = 4L, ...) {
  how <- if (x$method == "smc") {
    "tempered sequential Monte Carlo"
  } else if (is.null(x$engine)) {
    x$method
  } else {
    sprintf("%s in %s", x$method, if (x$engine == "r") "R" else "Rust")
  }
  cat(sprintf("Posterior from an amortised ratio estimator (%s, %d draws); %g%% credible intervals\n",
              how, x$n, 100 * x$level))
  print(format(x$table, digits = digits))
  cat("Effective sample size:", paste(format(round(x$ess, 1)), collapse = ", "), "\n")
  if (!is.na(x$acceptance)) cat(sprintf("Acceptance rate: %.3f\n", x$acceptance))
  # The draws follow the classifier; whether its posteriors are as wide as they should be is a
  # separate check over simulated data sets.
  cat("Calibration of the classifier not checked here: ratio_coverage() checks it\n")
  invisible(x)
}

#' @rdname nce_ratio_posterior_methods
#' @export
print.nce_ratio_posterior <- function(x, ...) {
  print(summary(x))
  invisible(x)
}

#' @rdname nce_ratio_posterior_methods
#' @export
plot.nce_ratio_posterior <- function(x, ...) {
  d <- ncol(x$draws)
  op <- graphics::par(mfrow = c(1L, d))
  on.exit(graphics::par(op))
  for (p in colnames(x$draws)) {
    de <- stats::density(x$draws[, p], weights = x$weights)
    plot(de$x, de$y, type = "l", xlab = p, ylab = "posterior density", main = paste("Marginal of", p), ...)
  }
  invisible(x)
}

# The neural classifier (ratio_amortised(classifier = "mlp"), class nce_ratio_mlp): the log ratio
# is the networks' mean logit (their losses make the logit the log ratio itself). What needs the
# GAM is refused.

#' @export
predict.nce_ratio_mlp <- function(object, newdata = NULL, type = c("link", "response", "lpmatrix"),
                                  se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- check_choice(type, c("link", "response", "lpmatrix"), "type")
  check_bool(se.fit, "se.fit")
  if (type == "lpmatrix") refuse("predict(type = \"lpmatrix\")", object)
  if (se.fit) refuse("predict(se.fit = TRUE)", object)
  nd <- if (is.null(newdata)) object$pairs else ratio_newdata(object, newdata)
  out <- rep(NA_real_, nrow(nd))
  ok <- which(rows_finite(nd[c(object$parameters, object$summary_names)]))
  if (length(ok)) {
    rows <- nd[ok, , drop = FALSE]
    out[ok] <- ratio_net_log_ratio(object, rows, rows)
  }
  if (type == "link") out else exp(out)
}

#' @export
nobs.nce_ratio_mlp <- function(object, ...) nrow(object$pairs)

#' @export
model.frame.nce_ratio_mlp <- function(formula, ...) formula$pairs

#' @export
logLik.nce_ratio_mlp <- function(object, ...) {
  # The classification's Bernoulli log-likelihood on the joint pairs and one shuffle of them; df
  # counts every parameter of every network (an upper bound on the effective number).
  p <- object$fitted.values
  y <- object$pairs$y
  structure(sum(stats::dbinom(y, 1, p, log = TRUE)), df = ensemble_n_params(object$networks),
            nobs = nrow(object$pairs), class = "logLik")
}

#' @export
coef.nce_ratio_mlp <- function(object, ...) refuse("coef", object)
#' @export
vcov.nce_ratio_mlp <- function(object, ...) refuse("vcov", object)
#' @export
confint.nce_ratio_mlp <- function(object, parm, level = 0.95, ...) refuse("confint", object)
#' @export
residuals.nce_ratio_mlp <- function(object, ...) refuse("residuals", object)
#' @export
anova.nce_ratio_mlp <- function(object, ...) refuse("anova", object)
#' @export
model.matrix.nce_ratio_mlp <- function(object, ...) refuse("model.matrix", object)
#' @export
formula.nce_ratio_mlp <- function(x, ...) refuse("formula", x)
#' @export
terms.nce_ratio_mlp <- function(x, ...) refuse("terms", x)
#' @export
plot.nce_ratio_mlp <- function(x, ...) refuse("plot", x)
#' @exportS3Method generics::tidy
tidy.nce_ratio_mlp <- function(x, ...) refuse("tidy", x)  # nolint: object_name_linter.

#' @exportS3Method generics::glance
glance.nce_ratio_mlp <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(n_pairs = x$n, n_shuffle = x$n_shuffle, n_networks = length(x$networks), nobs = stats::nobs(x),
             df = attr(ll, "df"), logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll),
             held_out_loss = mean(held_out_losses(x)), simulation_time = unname(x$time[["simulation"]]),
             fitting_time = unname(x$time[["fitting"]]), stringsAsFactors = FALSE)
}

#' @exportS3Method generics::augment
augment.nce_ratio_mlp <- function(x, newdata = NULL, ...) {  # nolint: object_name_linter.
  rows <- if (is.null(newdata)) x$pairs else ratio_newdata(x, newdata)
  out <- as.data.frame(rows)
  out$.fitted <- predict.nce_ratio_mlp(x, newdata)
  out
}

held_out_losses <- function(x) vapply(x$training, function(t) t$held_out_loss, 0)

ensemble_n_params <- function(networks) sum(vapply(networks, function(net) net$n_params, 0))

#' @export
print.nce_ratio_mlp <- function(x, ...) {
  loss <- switch(x$loss, nrec = "contrastive (NRE-C)", nre = "binary (NRE)", bnre = "balanced binary (BNRE)")
  cat(sprintf("Amortised ratio estimator: neural classifier, %s loss, %d other parameter draw(s) per joint pair\n",
              loss, x$n_shuffle))
  cat(sprintf("%d joint simulations; parameters %s; data %s\n", x$n, paste(x$parameters, collapse = ", "),
              describe_names(x$summary_names)))
  if (!is.null(x$embedding)) {
    cat(sprintf("  %s columns read through the embedding: ", length(x$scaling$embedded)))
    print(x$embedding)
  }
  k <- length(x$networks)
  epochs <- vapply(x$training, function(t) as.integer(t$best_epoch), 0L)
  loss_h <- held_out_losses(x)
  cat(sprintf("%s: ReLU, hidden layers %s, %d parameters%s\n",
              if (k == 1L) "Network" else sprintf("Ensemble of %d networks, log ratios averaged", k),
              paste(x$hidden, collapse = "-"), x$networks[[1L]]$n_params, if (k > 1L) " each" else ""))
  cat(sprintf("Best epoch%s %s; held-out loss %s\n", if (k > 1L) "s" else "", paste(epochs, collapse = ", "),
              if (k > 1L) sprintf("%.5f (mean; %.5f-%.5f)", mean(loss_h), min(loss_h), max(loss_h)) else
                sprintf("%.5f", loss_h)))
  capped <- epochs >= x$control$max_epochs
  if (any(capped)) {
    cat(sprintf("%d network(s) still improving at max_epochs = %d: consider more epochs\n", sum(capped),
                as.integer(x$control$max_epochs)))
  }
  cat(sprintf("Simulation %.2f s, fitting %.2f s\n", x$time[["simulation"]], x$time[["fitting"]]))
  invisible(x)
}

# Up to 6 names, then how many more.
describe_names <- function(v) {
  if (length(v) <= 6L) return(paste(v, collapse = ", "))
  sprintf("%s, ... (%d columns)", paste(v[1:5], collapse = ", "), length(v))
}

#' @export
summary.nce_ratio_mlp <- function(object, ...) {
  structure(c(list(print = utils::capture.output(print(object)), training = object$training),
              summary_loglik(object)), class = "summary.nce_ratio_mlp")
}

#' @export
print.summary.nce_ratio_mlp <- function(x, ...) {
  writeLines(x$print)
  format_loglik(x, 6L, "classification; df, all network parameters")
  invisible(x)
}
