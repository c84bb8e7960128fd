# broom's tidy/glance/augment for vnce() fits and for the Bayes-factor, marginal-likelihood
# and edge-recovery results (registered lazily when generics is loaded).

#' broom methods for vnce() fits and Bayes-factor results
#'
#' `tidy()`: one row per coefficient with `estimate`, `std.error` (sandwich), `statistic` (z) and
#' `p.value`, and `conf.low`/`conf.high` with `conf.int = TRUE`. `glance()`: one row (number of
#' observations, log-likelihood and AIC where [logLik()] is available, else `NA`, the objective,
#' convergence). `augment()`: the data with `.fitted`, the fitted log density (link; `NA` for
#' graphical-model rows with missing values). For Bayes-factor and marginal-likelihood results
#' `tidy()` and `glance()` describe the one estimate; `augment()` is refused (no data rows).
#'
#' @param x A [vnce()] fit or a result of [bayes_factor_nce()], [bayes_factor_marglik()],
#'   [marglik_nce()] or [edge_roc()].
#' @param conf.int,conf.level Add a Wald interval at this level.
#' @param data Unused (the fit's own data are used).
#' @param ... Unused.
#' @return A data frame.
#' @name vnce_broom
#' @keywords internal
NULL

#' @rdname vnce_broom
#' @exportS3Method generics::tidy
tidy.vnce_fit <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  cf <- x$coefficients
  se <- sqrt(diag(stats::vcov(x)))
  out <- data.frame(term = names(cf), estimate = unname(cf), std.error = unname(se),
                    statistic = unname(cf / se), p.value = unname(2 * stats::pnorm(-abs(cf / se))),
                    stringsAsFactors = FALSE)
  if (conf.int) {
    z <- stats::qnorm((1 + conf.level) / 2)
    out$conf.low <- out$estimate - z * out$std.error
    out$conf.high <- out$estimate + z * out$std.error
  }
  out
}

#' @rdname vnce_broom
#' @exportS3Method generics::glance
glance.vnce_fit <- function(x, ...) {  # nolint: object_name_linter.
  ll <- tryCatch(stats::logLik(x), nce_error_unsupported = function(e) NULL)
  data.frame(nobs = stats::nobs(x), df = length(x$coefficients),
             logLik = if (is.null(ll)) NA_real_ else as.numeric(ll),
             AIC = if (is.null(ll)) NA_real_ else stats::AIC(ll), BIC = if (is.null(ll)) NA_real_ else stats::BIC(ll),
             objective = x$objective, converged = isTRUE(x$converged), iterations = x$iterations, nu = x$nu)
}

#' @rdname vnce_broom
#' @exportS3Method generics::augment
augment.vnce_fit <- function(x, data = NULL, ...) {  # nolint: object_name_linter.
  out <- stats::model.frame(x)
  out$.fitted <- unname(stats::predict(x, type = "link"))
  out
}

#' @rdname vnce_broom
#' @exportS3Method generics::tidy
tidy.nce_bf <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  estimate_tidy(x, conf.int, conf.level)
}

#' @rdname vnce_broom
#' @exportS3Method generics::tidy
tidy.nce_marglik <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  estimate_tidy(x, conf.int, conf.level)
}

estimate_tidy <- function(x, conf_int, conf_level) {
  est <- stats::coef(x)
  out <- data.frame(term = names(est), estimate = unname(est), std.error = x$se, stringsAsFactors = FALSE)
  if (conf_int) {
    ci <- stats::confint(x, level = conf_level)
    out$conf.low <- ci[1L, 1L]
    out$conf.high <- ci[1L, 2L]
  }
  out
}

#' @rdname vnce_broom
#' @exportS3Method generics::glance
glance.nce_bf <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(log_bf = x$log_bf, std.error = x$se, bf = x$bf, prob_model1 = x$prob[["model1"]],
             nobs = if (is.null(x$n) || anyNA(x$n)) NA_integer_ else as.integer(sum(x$n)),
             separated = isTRUE(x$separated), method = x$method, stringsAsFactors = FALSE)
}

#' @rdname vnce_broom
#' @exportS3Method generics::glance
glance.nce_marglik <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(logml = x$logml, std.error = x$se, std.error.iid = x$se_iid %||% NA_real_,
             nobs = x$n %||% NA_integer_, ess = x$ess %||% NA_real_, n_ref = x$n_ref %||% NA_integer_,
             separated = isTRUE(x$separated), stringsAsFactors = FALSE)
}

#' @rdname vnce_broom
#' @exportS3Method generics::tidy
tidy.nce_edge_roc <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(term = "auc", estimate = x$auc, stringsAsFactors = FALSE)
}

#' @rdname vnce_broom
#' @exportS3Method generics::glance
glance.nce_edge_roc <- function(x, ...) {  # nolint: object_name_linter.
  data.frame(auc = x$auc, n_edges = x$n_edges, n_pairs = x$n_pairs, n_thresholds = nrow(x$roc) - 1L)
}
