# broom methods for the design results (nce_eig, nce_design).

#' Tidy expected-information-gain estimates and chosen designs
#'
#' @param x An `nce_eig` ([design_eig()]) or `nce_design` ([design_optimise()]).
#' @param conf.level Level of `conf.low`/`conf.high`.
#' @param ... Unused.
#' @return `tidy()`: for an `nce_eig`, one row per estimator (`plugin`, `nwj`, `jsd`) with
#'   the estimate, its Monte Carlo standard error and a normal interval; for an `nce_design`,
#'   one row per design variable with the chosen value, the sd of the smooth's posterior
#'   maximisers and the band. `glance()`: one row on the fit. `augment()`: for an `nce_eig`, the
#'   held-out pairs with their log ratio `.fitted`; for an `nce_design`, the evaluated designs
#'   with the smooth (`.fitted`, `.se.fit`) and `.resid`.
#' @name tidy.nce_eig
#' @exportS3Method generics::tidy
tidy.nce_eig <- function(x, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  ci <- confint(x, level = conf.level)
  data.frame(term = x$estimates$estimator, estimate = x$estimates$estimate, std.error = x$estimates$std.error,
             conf.low = unname(ci[, 1]), conf.high = unname(ci[, 2]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_eig
#' @exportS3Method generics::glance
glance.nce_eig <- function(x, ...) {  # nolint: object_name_linter.
  cf <- coef(x)
  data.frame(design = eig_label(x$design), eig = cf[["plugin"]], std.error = x$estimates$std.error[1],
             nwj = cf[["nwj"]], jsd = cf[["jsd"]], n_train = x$n_train, n_test = x$n_test, n_failed = x$n_failed,
             edf = sum(x$ratio$gam$edf), simulation_time = unname(x$time["simulation"]),
             fitting_time = unname(x$time["fitting"]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_eig
#' @exportS3Method generics::augment
augment.nce_eig <- function(x, ...) {  # nolint: object_name_linter.
  cbind(x$held_out, .fitted = x$log_ratio)
}

#' @rdname tidy.nce_eig
#' @exportS3Method generics::tidy
tidy.nce_design <- function(x, conf.level = x$level, ...) {  # nolint: object_name_linter.
  ci <- confint(x, level = conf.level)
  data.frame(term = names(x$best), estimate = unname(x$best), std.error = unname(sqrt(diag(vcov(x)))),
             conf.low = unname(ci[, 1]), conf.high = unname(ci[, 2]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_eig
#' @exportS3Method generics::glance
glance.nce_design <- function(x, ...) {  # nolint: object_name_linter.
  fin <- if (is.null(x$final)) NA_real_ else x$final$estimates$estimate[match(x$estimator, x$final$estimates$estimator)]
  data.frame(estimator = x$estimator, eig = x$eig[["estimate"]], eig_se = x$eig[["std.error"]], eig_final = fin,
             n_designs = x$n_designs, n = x$n, smooth_edf = sum(x$smooth$edf) - 1, time = x$time,
             stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_eig
#' @exportS3Method generics::augment
augment.nce_design <- function(x, ...) {  # nolint: object_name_linter.
  p <- predict(x, se.fit = TRUE)
  ev <- x$evaluations
  cbind(ev, .fitted = p$fit, .se.fit = p$se.fit, .resid = ev[[x$estimator]] - p$fit)
}
