# Methods of the design results: nce_eig (the EIG at one design, design_eig()) and
# nce_design (the chosen design, design_optimise()). Neither is a density model of data, so
# the methods that need one (logLik, AIC, anova, simulate) refuse with nce_error_unsupported.

eig_label <- function(design) paste(sprintf("%s = %s", names(design), format(signif(design, 4))), collapse = ", ")

#' Methods for expected-information-gain estimates
#'
#' `coef()` gives the four estimates (plug-in, NWJ bound, JSD bound, InfoNCE bound; see
#' [design_eig()]), `vcov()` their covariance (Monte Carlo and classifier error), `confint()`
#' intervals of Student's t on the standard errors' degrees of freedom (`$estimates$df`; few
#' with few folds); `predict()` the classifier's log ratio
#' \eqn{\log p(s \mid \theta, d) / p(s \mid d)} at `newdata` (parameter and summary columns;
#' default: the held-out pairs), with
#' `type = "response"` the ratio; `plot()` the held-out log ratios of joint and shuffled pairs.
#' `update()` reruns [design_eig()] with changed arguments.
#'
#' @param object,x An `nce_eig`.
#' @inheritParams nce_vocabulary
#' @param newdata A data frame of parameter and summary columns.
#' @param type `"link"` (log ratio) or `"response"` (ratio).
#' @param se.fit Whether to return standard errors of the log ratio (from the classifier's
#'   Bayesian covariance).
#' @param parm,level Estimators and level of `confint()`.
#' @param formula An `nce_eig` (the argument name of the `model.frame()` generic).
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param ... Arguments changed by `update()`; unused elsewhere.
#' @return See the description.
#' @section What it refuses:
#' `logLik`, `AIC`, `BIC`, `anova`, `fitted`, `residuals`, `model.frame`, `model.matrix`,
#' `terms`, `simulate` and `predict(type = "lpmatrix")` give `nce_error_unsupported`: the
#' object estimates a number (the EIG), it is not a model of data. `newdata` without the
#' parameter and summary columns gives `nce_error_input`.
#' @name nce_eig-methods
NULL

#' @rdname nce_eig-methods
#' @export
print.nce_eig <- function(x, digits = 4L, ...) {
  cat(sprintf("Expected information gain at %s (ratio estimation)\n", eig_label(x$design)))
  failed <- if (x$n_failed > 0) sprintf(" (%d failed)", x$n_failed) else ""
  if (is.null(x$folds) || x$folds == 1L) {
    cat(sprintf("%d simulations: %d to train the classifier, %d held out%s\n", x$n, x$n_train, x$n_test, failed))
  } else {
    cat(sprintf("%d simulations, cross-fitted over %d folds (classifiers on %d pairs)%s\n", x$n, x$folds, x$n_train,
                failed))
  }
  tab <- x$estimates
  ci <- confint(x)
  tab$mc.error <- NULL
  tab$df <- NULL
  tab$`95% interval` <- sprintf("[%s, %s]", format(ci[, 1], digits = digits), format(ci[, 2], digits = digits))
  tab$meaning <- c("mean log ratio (estimate)", "NWJ lower bound on the EIG", "lower bound on the JSD proxy",
                   "InfoNCE lower bound on the EIG")
  print(format(tab, digits = digits), row.names = FALSE)
  invisible(x)
}

#' @rdname nce_eig-methods
#' @export
summary.nce_eig <- function(object, ...) {
  g <- object$ratio$gam
  structure(list(print = utils::capture.output(print(object)),
                 classifier = paste(deparse(object$ratio$formula, width.cutoff = 100L), collapse = " "),
                 deviance_explained = 1 - g$deviance / g$null.deviance, edf = sum(g$edf),
                 time = object$time), class = "summary.nce_eig")
}

#' @rdname nce_eig-methods
#' @export
print.summary.nce_eig <- function(x, ...) {
  writeLines(x$print)
  cat("Classifier: ", x$classifier, "\n", sep = "")
  cat(sprintf("Deviance explained %.3f, total edf %.1f\n", x$deviance_explained, x$edf))
  invisible(x)
}

#' @rdname nce_eig-methods
#' @export
coef.nce_eig <- function(object, ...) stats::setNames(object$estimates$estimate, object$estimates$estimator)

#' @rdname nce_eig-methods
#' @export
vcov.nce_eig <- function(object, ...) {
  v <- object$cov
  dimnames(v) <- list(object$estimates$estimator, object$estimates$estimator)
  v
}

#' @rdname nce_eig-methods
#' @export
confint.nce_eig <- function(object, parm, level = 0.95, ...) {
  check_probability(level)
  cf <- coef(object)
  if (missing(parm)) parm <- names(cf)
  if (!is.character(parm) || !all(parm %in% names(cf))) {
    check_fail(paste("estimator names among", paste(names(cf), collapse = ", ")), parm, "parm", sys.call())
  }
  se <- sqrt(diag(vcov(object)))[parm]
  a <- (1 - level) / 2
  # Student's t on the standard error's degrees of freedom (few with few folds); normal without.
  df <- object$estimates$df %||% rep(Inf, length(cf))
  q <- stats::qt(1 - a, df[match(parm, names(cf))])
  ci <- cbind(cf[parm] - q * se, cf[parm] + q * se)
  dimnames(ci) <- list(parm, sprintf("%s %%", format(100 * c(a, 1 - a), trim = TRUE)))
  ci
}

#' @rdname nce_eig-methods
#' @export
predict.nce_eig <- function(object, newdata, type = c("link", "response", "lpmatrix"),
                            se.fit = FALSE, ...) {  # nolint: object_name_linter. se.fit is predict()'s argument.
  type <- check_choice(type, c("link", "response", "lpmatrix"), "type", sys.call())
  if (type == "lpmatrix") {
    nce_unsupported("predict", object, paste("type = \"lpmatrix\": coef() holds EIG estimates, not the",
                                             "classifier's coefficients (see object$ratio$gam)"))
  }
  if (missing(newdata) || is.null(newdata)) newdata <- object$held_out
  r <- object$ratio
  if (!is.data.frame(newdata)) nce_abort("`newdata` must be a data frame with the parameter and summary columns.",
                                         "input")
  check_newdata_columns(newdata, c(r$parameters, r$summary_names))
  nd <- newdata[c(r$parameters, r$summary_names)]
  if (!se.fit) {
    lr <- ratio_log_ratio(r, nd[r$parameters], nd[r$summary_names])
    return(if (type == "link") lr else exp(lr))
  }
  p <- mgcv::predict.gam(r$gam, newdata = nd, type = "link", se.fit = TRUE)
  fit <- as.double(p$fit) + log(r$n_shuffle)
  se <- as.double(p$se.fit)
  if (type == "response") {
    fit <- exp(fit)
    se <- se * fit
  }
  list(fit = fit, se.fit = se)
}

#' @rdname nce_eig-methods
#' @export
nobs.nce_eig <- function(object, ...) object$n_test

#' @rdname nce_eig-methods
#' @export
formula.nce_eig <- function(x, ...) x$ratio$formula

#' @rdname nce_eig-methods
#' @export
plot.nce_eig <- function(x, ...) {
  dj <- stats::density(x$log_ratio)
  dm <- stats::density(x$log_ratio_marginal)
  plot(dj, xlim = range(dj$x, dm$x), ylim = c(0, max(dj$y, dm$y)), main = sprintf("Log ratios at %s",
                                                                                   eig_label(x$design)),
       xlab = "held-out log ratio h", ...)
  graphics::lines(dm, lty = 2)
  graphics::abline(v = coef(x)[["plugin"]], col = "grey40")
  graphics::legend("topleft", c("joint pairs", "shuffled pairs", "plug-in EIG"), lty = c(1, 2, 1),
                   col = c("black", "black", "grey40"), bty = "n")
  invisible(x)
}

#' @rdname nce_eig-methods
#' @export
update.nce_eig <- function(object, ..., resample = FALSE) {
  changes <- list(...)
  args <- object$args
  args[names(changes)] <- changes
  rerun(object, design_eig, args, resample)
}

#' Methods for chosen designs
#'
#' `coef()` gives the chosen design, `confint()` its uncertainty band (quantiles of the
#' maximisers of draws from the smooth's posterior), `vcov()` the covariance of those
#' maximisers; `predict()` the smoothed EIG at designs (`newdata`, default the evaluated
#' ones; `type = "link"` and `"response"` both give the EIG, on its own scale), `fitted()` and
#' `residuals()` the smooth at the evaluated designs and the estimates' departures from it,
#' `nobs()` the number of evaluated designs. `plot()` draws the EIG curve (one design variable)
#' or surface (two) with its band, the estimates with their Monte Carlo error bars and the
#' chosen design with its band; `truth`, a function of a design matrix, adds a reference
#' curve (e.g. the exact EIG of [death_model()]). `update()` reruns [design_optimise()].
#'
#' @param object,x An `nce_design`.
#' @inheritParams nce_vocabulary
#' @param newdata A data frame of designs.
#' @param se.fit Whether to return the smooth's standard errors.
#' @param type `"link"` or `"response"` (both: the EIG).
#' @param parm,level Design variables and level of `confint()`.
#' @param formula An `nce_design` (the argument name of the `model.frame()` generic).
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param truth Optional `function(design)` giving a reference EIG for a matrix of designs.
#' @param ... Arguments changed by `update()`; graphical arguments for `plot()`.
#' @return See the description.
#' @section What it refuses:
#' `logLik`, `AIC`, `BIC`, `anova`, `model.matrix`, `simulate` and `predict(type = "lpmatrix")`
#' give `nce_error_unsupported` (a design choice is not a model of data: the smooth's own
#' methods are those of `object$smooth`, an mgcv `gam`); `newdata` without the design columns
#' gives `nce_error_input`.
#' @name nce_design-methods
NULL

#' @rdname nce_design-methods
#' @export
print.nce_design <- function(x, digits = 4L, ...) {
  d <- length(x$best)
  cat(sprintf("Design maximising the expected information gain (%s estimator, %d design variable%s)\n",
              x$estimator, d, if (d > 1L) "s" else ""))
  tab <- data.frame(best = x$best, lower = x$band[, 1], upper = x$band[, 2], row.names = names(x$best))
  names(tab)[2:3] <- colnames(x$band)
  print(format(tab, digits = digits))
  cat(sprintf("EIG at the chosen design: %s (smooth, se %s)", format(x$eig[["estimate"]], digits = digits),
              format(x$eig[["std.error"]], digits = 2L)))
  if (!is.null(x$final)) {
    e <- x$final$estimates
    i <- match(x$estimator, e$estimator)
    cat(sprintf("; %s (new evaluation, se %s)", format(e$estimate[i], digits = digits),
                format(e$std.error[i], digits = 2L)))
  }
  if (!is.null(x$eig_interval)) {
    cat(sprintf("\n%g%% interval for the EIG there: [%s, %s] (%s)", 100 * x$level,
                format(x$eig_interval[1], digits = digits), format(x$eig_interval[2], digits = digits),
                attr(x$eig_interval, "source")))
  }
  cat(sprintf("\n%d designs evaluated with %d simulations each; %.1f s\n", x$n_designs, x$n, x$time))
  invisible(x)
}

#' @rdname nce_design-methods
#' @export
summary.nce_design <- function(object, ...) {
  sm <- object$smooth
  ev <- object$evaluations
  vars <- names(object$best)
  keep <- c(vars, object$estimator, paste0(object$estimator, "_se"), "round")
  structure(list(print = utils::capture.output(print(object)), evaluations = ev[keep],
                 smooth_edf = sum(sm$edf) - 1, deviance_explained = summary(sm)$dev.expl,
                 inflation = sm$sig2 * object$smooth_weight_scale), class = "summary.nce_design")
}

#' @rdname nce_design-methods
#' @export
print.summary.nce_design <- function(x, digits = 3L, ...) {
  writeLines(x$print)
  cat(sprintf("Smooth of the estimates: edf %.2f, deviance explained %.3f\n", x$smooth_edf, x$deviance_explained))
  cat(sprintf("Residual variance / Monte Carlo variance: %.3g (above 1: the classifier's bias varies by design)\n",
              x$inflation))
  cat("Evaluated designs:\n")
  print(format(x$evaluations, digits = digits), row.names = FALSE)
  invisible(x)
}

#' @rdname nce_design-methods
#' @export
coef.nce_design <- function(object, ...) object$best

#' @rdname nce_design-methods
#' @export
vcov.nce_design <- function(object, ...) {
  v <- stats::cov(object$argmax_draws)
  dimnames(v) <- list(names(object$best), names(object$best))
  v
}

#' @rdname nce_design-methods
#' @export
confint.nce_design <- function(object, parm, level = object$level, ...) {
  check_probability(level)
  if (missing(parm)) parm <- names(object$best)
  if (!is.character(parm) || !all(parm %in% names(object$best))) {
    check_fail(paste("design variable names among", paste(names(object$best), collapse = ", ")), parm, "parm",
               sys.call())
  }
  a <- (1 - level) / 2
  ci <- t(vapply(parm, function(v) stats::quantile(object$argmax_draws[, v], c(a, 1 - a), names = FALSE),
                 numeric(2)))
  dimnames(ci) <- list(parm, sprintf("%s %%", format(100 * c(a, 1 - a), trim = TRUE)))
  ci
}

#' @rdname nce_design-methods
#' @export
predict.nce_design <- function(object, newdata,
                               se.fit = FALSE,  # nolint: object_name_linter. se.fit is predict()'s argument.
                               type = c("link", "response", "lpmatrix"), ...) {
  type <- check_choice(type, c("link", "response", "lpmatrix"), "type", sys.call())
  if (type == "lpmatrix") {
    nce_unsupported("predict", object, paste("type = \"lpmatrix\": coef() holds the chosen design",
                                             "(see object$smooth for the EIG smooth)"))
  }
  if (missing(newdata) || is.null(newdata)) newdata <- object$evaluations
  if (!is.data.frame(newdata)) nce_abort("`newdata` must be a data frame of designs.", "input")
  miss <- setdiff(names(object$best), names(newdata))
  if (length(miss)) nce_abort(sprintf("`newdata` lacks design column(s) %s.", paste(miss, collapse = ", ")), "input")
  v <- names(object$best)
  check_numeric_columns(newdata, v, "newdata", call = sys.call())
  # Outside [lower, upper] the smooth extrapolates (and can go below 0).
  check_extrapolation(newdata[v], as.data.frame(rbind(object$lower[v], object$upper[v])), call = sys.call())
  p <- smooth_predict(object$smooth, newdata[v])
  neg <- which(p$fit < 0)
  if (length(neg)) {
    nce_warn(sprintf(paste("the smoothed EIG is negative at %d design(s) of `newdata` (rows %s), though an EIG is",
                           "never below 0: the smooth is unreliable there (more evaluations, or a narrower range)"),
                     length(neg), format_positions(neg)), "negative_eig", call = sys.call())
  }
  if (se.fit) list(fit = as.double(p$fit), se.fit = as.double(p$se.fit)) else as.double(p$fit)
}

#' @rdname nce_design-methods
#' @export
fitted.nce_design <- function(object, ...) predict(object)

#' @rdname nce_design-methods
#' @export
residuals.nce_design <- function(object, ...) object$evaluations[[object$estimator]] - predict(object)

#' @rdname nce_design-methods
#' @export
nobs.nce_design <- function(object, ...) nrow(object$evaluations)

#' @rdname nce_design-methods
#' @export
model.frame.nce_design <- function(formula, ...) formula$evaluations

#' @rdname nce_design-methods
#' @export
formula.nce_design <- function(x, ...) stats::formula(x$smooth)

#' @rdname nce_design-methods
#' @export
terms.nce_design <- function(x, ...) stats::terms(x$smooth)

#' @rdname nce_design-methods
#' @export
update.nce_design <- function(object, ..., resample = FALSE) {
  changes <- list(...)
  args <- object$args
  args[names(changes)] <- changes
  rerun(object, design_optimise, args, resample)
}

#' @rdname nce_design-methods
#' @export
plot.nce_design <- function(x, truth = NULL, ...) {
  if (!is.null(truth)) check_function(truth)
  vars <- names(x$best)
  ev <- x$evaluations
  y <- ev[[x$estimator]]
  se <- ev[[paste0(x$estimator, "_se")]]
  g <- x$grid
  if (length(vars) == 1L) {
    d <- g[[vars]]
    ref <- if (is.null(truth)) NULL else truth(as.matrix(g[vars]))
    yl <- range(g$lower, g$upper, y - 2 * se, y + 2 * se, ref, finite = TRUE)
    plot(d, g$fit, type = "n", ylim = yl, xlab = vars, ylab = sprintf("EIG (%s)", x$estimator),
         main = "Expected information gain", ...)
    graphics::rect(x$band[1, 1], yl[1] - 1, x$band[1, 2], yl[2] + 1, col = grDevices::grey(0.93), border = NA)
    graphics::polygon(c(d, rev(d)), c(g$lower, rev(g$upper)), col = grDevices::grey(0.8), border = NA)
    graphics::lines(d, g$fit, lwd = 2)
    graphics::segments(ev[[vars]], y - 2 * se, ev[[vars]], y + 2 * se, col = "grey30")
    graphics::points(ev[[vars]], y, pch = 19, cex = 0.7)
    graphics::abline(v = x$best, lty = 2)
    leg <- c("smooth and band", "estimates +- 2 se", "chosen design and band")
    lty <- c(1, 1, 2)
    col <- c("black", "grey30", "black")
    if (!is.null(ref)) {
      graphics::lines(d, ref, col = "firebrick", lwd = 2)
      leg <- c(leg, "reference")
      lty <- c(lty, 1)
      col <- c(col, "firebrick")
    }
    graphics::legend("bottomright", leg, lty = lty, col = col, bty = "n", cex = 0.8)
  } else {
    u1 <- sort(unique(g[[vars[1]]]))
    u2 <- sort(unique(g[[vars[2]]]))
    z <- matrix(g$fit, length(u1), length(u2))
    graphics::image(u1, u2, z, col = grDevices::hcl.colors(30, "YlOrRd", rev = TRUE), xlab = vars[1],
                    ylab = vars[2], main = sprintf("Expected information gain (%s)", x$estimator), ...)
    graphics::contour(u1, u2, z, add = TRUE)
    if (!is.null(truth)) {
      # A coarser grid for the reference: exact surfaces are often slow to compute.
      v1 <- seq(min(u1), max(u1), length.out = 21L)
      v2 <- seq(min(u2), max(u2), length.out = 21L)
      zt <- matrix(truth(as.matrix(expand.grid(stats::setNames(list(v1, v2), vars)))), 21L, 21L)
      graphics::contour(v1, v2, zt, add = TRUE, col = "blue", lty = 2)
    }
    graphics::points(ev[[vars[1]]], ev[[vars[2]]], pch = 3, cex = 0.6)
    graphics::rect(x$band[1, 1], x$band[2, 1], x$band[1, 2], x$band[2, 2], lty = 2)
    graphics::points(x$best[1], x$best[2], pch = 19)
  }
  invisible(x)
}

#' Tidy expected-information-gain estimates and chosen designs
#'
#' @param x An `nce_eig` ([design_eig()]) or `nce_design` ([design_optimise()]).
#' @param conf.level Level of `conf.low`/`conf.high`.
#' @inheritParams nce_vocabulary
#' @return `tidy()`: for an `nce_eig`, one row per estimator (`plugin`, `nwj`, `jsd`, `infonce`) with
#'   the estimate, its standard error and the interval of `confint()`; for an `nce_design`,
#'   one row per design variable with the chosen value, the sd of the smooth's posterior
#'   maximisers and the band. `glance()`: one row on the fit. `augment()`: for an `nce_eig`, the
#'   held-out pairs with their log ratio `.fitted`; for an `nce_design`, the evaluated designs
#'   with the smooth (`.fitted`, `.se.fit`) and `.resid`.
#' @name tidy.nce_eig
#' @exportS3Method generics::tidy
tidy.nce_eig <- function(x, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  ci <- tidy_confint(x, conf.level)
  data.frame(term = x$estimates$estimator, estimate = x$estimates$estimate, std.error = x$estimates$std.error,
             conf.low = unname(ci[, 1]), conf.high = unname(ci[, 2]), stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_eig
#' @exportS3Method generics::glance
glance.nce_eig <- function(x, ...) {  # nolint: object_name_linter.
  cf <- coef(x)
  data.frame(design = eig_label(x$design), eig = cf[["plugin"]], std.error = x$estimates$std.error[1],
             nwj = cf[["nwj"]], jsd = cf[["jsd"]], infonce = cf[["infonce"]], n_train = x$n_train, n_test = x$n_test,
             n_failed = x$n_failed,
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
  ci <- tidy_confint(x, conf.level)
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
