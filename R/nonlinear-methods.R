# Methods for nonlinear NCE fits (class nce_nls, under nce_fit, whose coef(), vcov(), confint(),
# nobs() and model.frame() serve it): what is here differs for a model nonlinear in its parameters.

#' Methods for nonlinear NCE fits
#'
#' Fits of [nce()] with `start =` or `model =` (class `c("nce_nls", "nce_fit", "nce_result")`).
#' As for every `nce_fit`, `vcov()` is the NCE sandwich (`se_type = "naive"`: the inverse Fisher
#' information of the logistic regression) and `confint()` gives Wald intervals
#' ([confint.nce_fit()]); `predict()` the normalised log density (`type = "link"` or
#' `"log_density"`), the density (`"response"`, `"density"`) or the unnormalised \eqn{f}
#' (`"log_unnormalised"`), with
#' delta-method standard errors; `logLik()` the data's log density under the fitted normalised
#' model (minus the intercept as log normaliser), with df the number of parameters including the
#' intercept, or with `newdata` the held-out log density of its points (`nobs` their number);
#' An improper fit (see [nce_checks]) gives `NA` for the normalised types, `fitted()` and
#' `logLik()`, and `simulate()` refuses it;
#' `anova()` a Wald test (sandwich covariance) of the parameters of the larger fit that
#' the smaller one lacks being 0, the smaller fit being the larger with those fixed at 0;
#' `residuals()` the label minus the fitted class probability on all data and reference rows;
#' `simulate()` sampling-importance-resampling from the reference; `plot()` the fitted log
#' density of a model in one or two variables.
#'
#' @param object,x A fit of class `nce_nls`.
#' @param type See Details.
#' @param se_type Covariance for `vcov()`, `confint()` and `summary()`: `"sandwich"` or `"naive"`.
#' @param newdata Data frame of points (default: the data); for `logLik()`, held-out points.
#' @inheritParams nce_vocabulary
#' @param nsim,seed,candidates For `simulate()`: `candidates * n` reference draws per simulation.
#' @param n_grid Grid points per axis for `plot()`.
#' @param ... Further fits (`anova()`), arguments to update (`update()`), unused otherwise.
#' @name nce_nls-methods
#' @examples
#' set.seed(1)
#' d <- data.frame(y = rnorm(300, 1, 0.5))
#' fit <- nce(~ -(y - mu)^2 * exp(-2 * ls) / 2, d, ref_normal(y = 1, cov = 1), ratio = 5,
#'            start = c(mu = 0, ls = 0))
#' summary(fit)
#' predict(fit, data.frame(y = c(0, 1, 2)), type = "density", se.fit = TRUE)
NULL

nl_data_rows <- function(object) {
  fr <- object$nce_frame
  fr[fr$.label == 1, object$reference$vars, drop = FALSE]
}

#' @rdname nce_nls-methods
#' @export
predict.nce_nls <- function(object, newdata, type = c("link", "response", "log_density", "density",
                                                      "log_unnormalised", "lpmatrix"),
                            se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  if (type == "lpmatrix") {
    nce_unsupported("predict(type = \"lpmatrix\")", object,
                    "the model is nonlinear in its parameters, so there is no linear predictor matrix")
  }
  check_bool(se.fit)
  if (missing(newdata) || is.null(newdata)) newdata <- nl_data_rows(object)
  check_data_frame(newdata, min_rows = 0L)
  vars <- object$reference$vars
  check_newdata_columns(newdata, vars)
  check_reference_columns(newdata, object$reference, arg = "newdata")
  nd <- newdata[vars]
  cf <- stats::coef(object)
  theta <- cf[-1L]
  f <- nl_f(object$nls$model, theta, nd)
  unnorm <- type == "log_unnormalised"
  fit <- if (unnorm) f else f + cf[[1L]]
  # An improper model has no normalised density (see ?nce_checks).
  if (isFALSE(object$proper) && !unnorm) fit[] <- NA_real_
  se <- rep(NA_real_, length(fit))
  if (se.fit && nrow(nd)) {
    g <- nl_gradient(object$nls$model, theta, nd, f)
    g <- cbind(if (unnorm) 0 else 1, matrix(g, nrow(nd)))
    se <- sqrt(pmax(rowSums((g %*% stats::vcov(object)) * g), 0))
  }
  # Density 0 outside the reference's support (a bounded reference), as for every class.
  out <- if (unnorm) rep(FALSE, length(fit)) else outside_support(reference_log_q(object$reference, nd), nd)
  p <- zero_density_at(fit, se, out, type %in% c("response", "density"))
  fit <- p$fit
  se <- p$se
  names(fit) <- names(se) <- rownames(newdata)
  if (!se.fit) return(fit)
  list(fit = fit, se.fit = se)
}

#' @rdname nce_nls-methods
#' @export
fitted.nce_nls <- function(object, ...) {
  v <- exp(object$nls$log_f[seq_len(object$n)] + object$coefficients[[1L]])
  if (isFALSE(object$proper)) v[] <- NA_real_
  names(v) <- seq_len(object$n)
  v
}

#' @rdname nce_nls-methods
#' @export
residuals.nce_nls <- function(object, ...) {
  fr <- object$nce_frame
  mu <- if (object$method == "logistic") stats::plogis(object$linear.predictors) else exp(object$linear.predictors)
  fr$.label - mu
}

#' @rdname nce_nls-methods
#' @export
logLik.nce_nls <- function(object, newdata = NULL, ...) {
  df <- length(object$coefficients)
  if (isFALSE(object$proper)) {
    return(structure(NA_real_, df = df, nobs = if (is.null(newdata)) object$n else nrow(newdata), class = "logLik"))
  }
  if (is.null(newdata)) {
    v <- sum(object$nls$log_f[seq_len(object$n)]) + object$n * object$coefficients[[1L]]
    return(structure(v, df = df, nobs = object$n, class = "logLik"))
  }
  # Held out: the log density at the new points, as logLik.nce_fit() computes it.
  ld <- predict.nce_nls(object, newdata, type = "link")
  if (anyNA(ld)) nce_abort("the log density is NA at some points (NA in `newdata`?): remove them first", "input")
  structure(sum(ld), df = df, nobs = length(ld), class = "logLik")
}

#' @rdname nce_nls-methods
#' @export
anova.nce_nls <- function(object, ...) {
  fits <- c(list(object), list(...))
  if (length(fits) != 2L || !all(vapply(fits, inherits, logical(1), "nce_nls"))) {
    nce_unsupported("anova", object, "it compares exactly two nested nonlinear NCE fits (a Wald test)")
  }
  k <- vapply(fits, function(f) length(f$coefficients), 1L)
  small <- fits[[which.min(k)]]
  big <- fits[[3L - which.min(k)]]
  extra <- setdiff(names(big$coefficients), names(small$coefficients))
  if (!length(extra) || !all(names(small$coefficients) %in% names(big$coefficients))) {
    nce_abort("the fits are not nested: the smaller fit's parameters must be a subset of the larger's", "input")
  }
  b <- big$coefficients[extra]
  v <- big$vcov[extra, extra, drop = FALSE]
  w <- tryCatch(drop(t(b) %*% solve(v, b)), error = function(e) NA_real_)
  df <- length(extra)
  anova_table(list(small, big), rbind(NA, c(df, w, stats::pchisq(w, df, lower.tail = FALSE))),
              sprintf("Wald test (NCE sandwich covariance) of %s = 0", paste(extra, collapse = ", ")),
              vapply(list(small, big), function(f) f$nls$model$name %||% deparse1(f$nce_formula), ""))
}

#' @rdname nce_nls-methods
#' @export
formula.nce_nls <- function(x, ...) {
  if (is.null(x$nce_formula)) {
    nce_unsupported("formula", x, "the model was given as R functions (model =), not as a formula")
  }
  x$nce_formula
}

#' @rdname nce_nls-methods
#' @export
simulate.nce_nls <- function(object, nsim = 1, seed = NULL, candidates = 100, ...) {
  check_proper(object, "simulate()")
  check_nsim(nsim, 8 * 2 * object$n * (length(object$reference$vars) + 2))
  check_count(candidates)
  old <- set_sim_seed(seed)
  on.exit(restore_seed(old))
  n <- object$n
  k <- as.integer(round(candidates * n))
  check_size(8 * k * (length(object$reference$vars) + 2), "candidates", "the simulation")
  sir_simulate(object$reference,
               function(u) nl_f(object$nls$model, object$coefficients[-1L], u[object$reference$vars]), n, k, nsim)
}

#' @rdname nce_nls-methods
#' @export
print.nce_nls <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("Nonlinear noise-contrastive estimation (", x$method, ")\n", sep = "")
  cat("Model: ", x$nls$model$name, "\n", sep = "")
  cat(sprintf("Data: %d points; reference: %d points (ratio %g)\n", x$n, x$m, x$ratio))
  cat("\nCoefficients:\n")
  print(round(x$coefficients, digits))
  cat(log_z_not_identified(x) %||% sprintf("\nlog normaliser: %s; ", format(x$log_normaliser, digits = digits)))
  cat(sprintf("%s after %d iterations (best of %d start(s))\n", if (x$converged) "converged" else "NOT converged",
              x$iterations, nrow(x$nls$start_table)))
  invisible(x)
}

#' @rdname nce_nls-methods
#' @export
summary.nce_nls <- function(object, se_type = c("sandwich", "naive"), ...) {
  check_renamed_dots(...names(), c(type = "se_type"))
  se_type <- match_choice(se_type)
  cf <- stats::coef(object)
  se <- sqrt(diag(stats::vcov(object, se_type = se_type)))
  z <- cf / se
  tab <- cbind(Estimate = cf, `Std. Error` = se, `z value` = z, `Pr(>|z|)` = 2 * stats::pnorm(-abs(z)))
  structure(c(list(coefficients = tab, type = se_type, model = object$nls$model$name, method = object$method,
                 n = object$n, m = object$m, log_normaliser = object$log_normaliser, proper = object$proper,
                 improper_along = object$improper_along,
                 gradient_source = object$nls$model$gradient_source, converged = object$converged,
                 start_table = object$nls$start_table, spread = object$nls$spread), summary_loglik(object)),
            class = "summary.nce_nls")
}

#' @export
print.summary.nce_nls <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("Nonlinear noise-contrastive estimation (", x$method, ")\n", sep = "")
  cat("Model: ", x$model, "\nGradient: ", x$gradient_source, "\n", sep = "")
  cat(sprintf("Data: %d points; reference: %d points\n\n", x$n, x$m))
  stats::printCoefmat(x$coefficients, digits = digits)
  cat(sprintf("\nStandard errors: %s. (Intercept) = -log normaliser",
              if (x$type == "sandwich") "NCE sandwich (two independent samples)" else "naive (inverse information)"))
  cat(log_z_not_identified(x) %||% sprintf("; log normaliser %s\n", format(x$log_normaliser, digits = digits)))
  cat(sprintf("log-likelihood of the data under the normalised fit: %s (df = %d)\n",
              format(as.numeric(x$logLik), digits = digits), attr(x$logLik, "df")))
  s <- nrow(x$start_table)
  if (s > 1L) {
    cat(sprintf("Starts: %d, %d converged; objective spread %s, largest parameter distance to the best %s\n",
                s, sum(x$start_table$converged), nl_small(x$spread[["objective"]]),
                nl_small(x$spread[["max_parameter_distance"]])))
  }
  if (!x$converged) cat("The best start did NOT converge.\n")
  invisible(x)
}

#' @rdname nce_nls-methods
#' @export
plot.nce_nls <- function(x, n_grid = 100, ...) {
  vars <- x$reference$vars
  check_count(n_grid, min = 2)
  d <- nl_data_rows(x)
  rng <- lapply(vars, function(v) range(d[[v]]))
  if (length(vars) == 1L) {
    g <- stats::setNames(data.frame(seq(rng[[1L]][1L], rng[[1L]][2L], length.out = n_grid)), vars)
    p <- stats::predict(x, g, type = "link", se.fit = TRUE)
    lo <- p$fit - 2 * p$se.fit
    hi <- p$fit + 2 * p$se.fit
    graphics::plot(g[[1L]], p$fit, type = "l", ylim = range(lo, hi), xlab = vars, ylab = "log density", ...)
    graphics::lines(g[[1L]], lo, lty = 2)
    graphics::lines(g[[1L]], hi, lty = 2)
    graphics::rug(d[[1L]])
  } else if (length(vars) == 2L) {
    s1 <- seq(rng[[1L]][1L], rng[[1L]][2L], length.out = n_grid)
    s2 <- seq(rng[[2L]][1L], rng[[2L]][2L], length.out = n_grid)
    g <- stats::setNames(expand.grid(s1, s2), vars)
    z <- matrix(stats::predict(x, g, type = "link"), n_grid, n_grid)
    graphics::contour(s1, s2, z, xlab = vars[1L], ylab = vars[2L], main = "fitted log density", ...)
    graphics::points(d[[1L]], d[[2L]], pch = ".", col = "grey40")
  } else {
    nce_unsupported("plot", x, sprintf("plot draws models in one or two variables; this one has %d", length(vars)))
  }
  invisible(x)
}

# Spreads below 1e-6 are round-off: print them as such, so output is stable across machines.
nl_small <- function(v) if (v < 1e-6) "< 1e-6" else format(v, digits = 3)

#' broom methods for nonlinear NCE fits
#'
#' @inheritParams nce_vocabulary
#' @param conf.int,conf.level Add Wald intervals (sandwich).
#' @param data,newdata Data for `augment()` (default: the fit's data).
#' @param se_fit Add `.se.fit` to `augment()`.
#' @return A data frame.
#' @name nce_nls-broom
#' @keywords internal
NULL

#' @rdname nce_nls-broom
#' @exportS3Method generics::tidy
tidy.nce_nls <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  s <- summary(x)$coefficients
  out <- data.frame(term = rownames(s), estimate = s[, 1L], std.error = s[, 2L], statistic = s[, 3L],
                    p.value = s[, 4L], row.names = NULL)
  if (isTRUE(conf.int)) {
    ci <- tidy_confint(x, conf.level)
    out$conf.low <- ci[, 1L]
    out$conf.high <- ci[, 2L]
  }
  out
}

#' @rdname nce_nls-broom
#' @exportS3Method generics::glance
glance.nce_nls <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(logLik = as.numeric(ll), AIC = stats::AIC(x), BIC = stats::BIC(x), nobs = x$n,
                       n_reference = x$m, df = attr(ll, "df"), log_normaliser = x$log_normaliser,
                       converged = x$converged, n_starts = nrow(x$nls$start_table))
}

#' @rdname nce_nls-broom
#' @exportS3Method generics::augment
augment.nce_nls <- function(x, data = NULL, newdata = NULL, se_fit = FALSE, ...) {  # nolint: object_name_linter.
  nd <- if (!is.null(newdata)) newdata else if (!is.null(data)) data else nl_data_rows(x)
  p <- stats::predict(x, nd, type = "link", se.fit = TRUE)
  out <- nd
  out$.fitted <- unname(p$fit)
  if (isTRUE(se_fit)) out$.se.fit <- unname(p$se.fit)
  out
}
