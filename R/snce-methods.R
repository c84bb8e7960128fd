# Methods for snce fits.

# Columns of a term set-up (term_setup()) at new data: the parametric columns, then each smooth's
# rows from `smooth_rows` (mgcv::PredictMat() unless given).
setup_predict <- function(setup, newdata, intercept, smooth_rows = function(sm) mgcv::PredictMat(sm, newdata),
                          na_action = stats::na.pass) {
  pt <- stats::delete.response(setup$pterms)
  mf <- stats::model.frame(pt, newdata, na.action = na_action, xlev = setup$xlevels)
  xp <- stats::model.matrix(pt, mf, contrasts.arg = setup$contrasts)
  xp <- xp[, colnames(xp) != "(Intercept)" | intercept, drop = FALSE]
  # No rows, no columns to evaluate (mgcv's bases refuse to predict at no data).
  if (nrow(newdata) == 0L) smooth_rows <- function(sm) matrix(0, 0L, sm$last.para - sm$first.para + 1L)
  x <- do.call(cbind, c(list(xp), lapply(setup$smooth, smooth_rows)))
  if (nrow(x) != nrow(newdata)) nce_abort("`newdata` has NA in columns the model uses", "input")
  x
}

#' Predict from an snce fit
#'
#' @inheritParams nce_vocabulary
#' @param newdata Data frame with the state columns at time t, the previous
#'   state's `_prev` columns and covariates; the observed transitions by
#'   default.
#' @param type `"log_kernel"` (\eqn{f_\theta(y_t, y_{t-1})}, without the
#'   normaliser), `"link"` (the log transition density
#'   \eqn{f_\theta + \chi(y_{t-1})}, with the intercept's estimate of minus the
#'   log normaliser; `"log_density"` is the same), `"response"` (its
#'   exponential, the transition density), `"lpmatrix"` (the model matrix whose
#'   product with `coef()` is the link) or `"terms"` (each term's contribution,
#'   a matrix). With `intercept = "transition"` the normaliser is known only
#'   for the observed transitions (their free intercepts): `"link"` and
#'   `"response"` are available without `newdata` only, and `"lpmatrix"` not at
#'   all (the intercepts are eliminated in the fit, not coefficients).
#' @param se.fit Also return standard errors (delta method for `"response"`).
#' @param se_type `"sandwich"` (clustered, default) or `"naive"`.
#' @return A vector (matrix for `"terms"` and `"lpmatrix"`), or a list with
#'   `fit` and `se.fit`.
#' @export
predict.snce_fit <- function(object, newdata, type = c("link", "log_kernel", "response", "log_density", "lpmatrix",
                                                       "terms"),
                             se.fit = FALSE, se_type = c("sandwich", "naive"), ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  check_bool(se.fit, "se.fit")
  v <- stats::vcov(object, se_type = match_choice(se_type))
  training <- missing(newdata) || is.null(newdata)
  if (training) newdata <- object$transitions
  check_data_frame(newdata, "newdata", min_rows = 0L)
  vars <- object$reference$vars
  if (!all(paste0(vars, "_prev") %in% names(newdata))) {
    return(predict_raw_sequence(object, newdata, type, se.fit, match_choice(se_type)))
  }
  # The states themselves (a missing one would be looked up in the formula's environment).
  check_newdata_columns(newdata, vars, "give transitions (the states and their `_prev` columns) or sequences")
  check_numeric_columns(newdata, intersect(c(vars, paste0(vars, "_prev")), names(newdata)), "newdata")
  newdata <- stand_in_infinite(newdata, c(vars, paste0(vars, "_prev")), object$transitions)
  inf <- attr(newdata, "nce_infinite")
  if (!is.null(object$features)) newdata <- object$features(newdata)
  attr(newdata, "nce_infinite") <- inf
  # Factor columns of the fit (by variables, maps per image) given as strings: the fit's levels.
  for (col in intersect(names(newdata), names(object$transitions))) {
    if (is.factor(object$transitions[[col]]) && is.character(newdata[[col]])) {
      newdata[[col]] <- factor(newdata[[col]], levels = levels(object$transitions[[col]]))
    }
  }
  beta <- object$coefficients
  pa <- object$row_setup$ncol
  has_int <- !identical(object$row_setup$intercept, FALSE)
  xa <- setup_predict(object$row_setup, newdata, has_int)
  ia <- seq_len(pa)
  if (type == "terms") {
    labels <- term_labels(object)
    cols <- split(seq_len(pa), factor(labels[ia], levels = unique(labels[ia])))
    cols <- cols[names(cols) != "(Intercept)"]
    fit <- vapply(cols, function(j) drop(xa[, j, drop = FALSE] %*% beta[j]), numeric(nrow(newdata)))
    se <- vapply(cols, function(j) {
      sqrt(rowSums((xa[, j, drop = FALSE] %*% v[j, j, drop = FALSE]) * xa[, j, drop = FALSE]))
    }, numeric(nrow(newdata)))
    fit <- matrix(fit, nrow(newdata), length(cols), dimnames = list(rownames(newdata), names(cols)))
    se <- matrix(se, nrow(newdata), length(cols), dimnames = dimnames(fit))
    return(if (se.fit) list(fit = fit, se.fit = se) else fit)
  }
  extra <- 0
  if (type == "log_kernel") {
    x <- if (has_int) xa[, -1L, drop = FALSE] else xa
    idx <- if (has_int) ia[-1L] else ia
  } else if (object$intercept$type == "transition") {
    if (type == "lpmatrix") {
      nce_unsupported("predict(type = \"lpmatrix\")", object,
                      "the per-transition intercepts are eliminated in the fit, not coefficients of a model matrix")
    }
    if (!training) {
      nce_abort(paste("with intercept = \"transition\" the normaliser of a new transition is unknown:",
                      "use type = \"log_kernel\", or an intercept formula"), "input")
    }
    x <- xa
    idx <- ia
    extra <- object$transition_intercepts
  } else {
    xb <- setup_predict(object$group_setup, newdata, FALSE)
    x <- cbind(xa, xb)
    idx <- seq_along(beta)
  }
  if (type == "lpmatrix") {
    colnames(x) <- names(beta)
    rownames(x) <- rownames(newdata)
    return(x)
  }
  fit <- drop(x %*% beta[idx]) + extra
  se <- sqrt(rowSums((x %*% v[idx, idx, drop = FALSE]) * x))
  if (type != "log_kernel" && object$intercept$type == "transition") {
    # Kernel and intercept uncertainty, their covariance left out (not computed by the fit).
    se <- sqrt(se^2 + object$transition_intercept_se^2)
  }
  # Density 0 (log -Inf) outside the reference's support and at infinite coordinates, as nce().
  # (The fit's own transitions are inside: the contrast step refused data outside the support.)
  out <- if (training) logical(nrow(newdata)) else outside_kernel(object, newdata)
  p <- zero_density_at(fit, se, out, type == "response")
  fit <- p$fit
  se <- p$se
  names(fit) <- names(se) <- rownames(newdata)
  if (se.fit) list(fit = fit, se.fit = se) else fit
}

# Transitions where the reference kernel has density 0 (log q = -Inf), or with an infinite
# coordinate (attribute "nce_infinite" of stand_in_infinite()): the model's density is 0 there.
outside_kernel <- function(object, newdata) {
  vars <- object$reference$vars
  prev <- paste0(vars, "_prev")
  lq <- rep(NA_real_, nrow(newdata))
  ok <- which(rows_finite(newdata[c(vars, prev)]))
  if (length(ok)) {
    lq[ok] <- kernel_logq(object$reference, newdata[ok, vars, drop = FALSE],
                          stats::setNames(newdata[ok, prev, drop = FALSE], vars))
  }
  outside_support(lq, newdata)
}

# Sequences as the fit's data (states, group, time): their transitions built as snce() did, one
# value per row (NA for the first `order` rows of each sequence).
predict_raw_sequence <- function(object, newdata, type, se_fit, se_type, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (type %in% c("terms", "lpmatrix")) {
    nce_abort(sprintf("type = \"%s\" needs transitions (the states and their `_prev` columns), not sequences",
                      type), "input", call = call)
  }
  fit <- se <- rep(NA_real_, nrow(newdata))
  if (nrow(newdata) > object$order) {
    d <- newdata
    d$.row <- seq_len(nrow(d))
    st <- sequence_transitions(d, object$reference$vars, object[["sequence_group"]], object$order,
                               object[["sequence_time"]])
    p <- predict.snce_fit(object, st$trans, type = type, se.fit = TRUE, se_type = se_type)
    fit[st$trans$.row] <- p$fit
    se[st$trans$.row] <- p$se.fit
  }
  names(fit) <- names(se) <- rownames(newdata)
  if (se_fit) list(fit = fit, se.fit = se) else fit
}

# The term each coefficient belongs to: parametric column name or smooth label.
term_labels <- function(object) {
  lab <- names(object$coefficients)
  for (sm in object$smooth) lab[sm$first.para:sm$last.para] <- sm$label
  lab
}

smooth_table <- function(object) {
  if (!length(object$smooth)) return(NULL)
  pa <- object$row_setup$ncol
  data.frame(
    term = vapply(object$smooth, `[[`, "", "label"),
    part = ifelse(vapply(object$smooth, `[[`, 0L, "first.para") > pa, "intercept", "kernel"),
    edf = vapply(object$smooth, function(sm) sum(object$edf[sm$first.para:sm$last.para]), 0),
    k = vapply(object$smooth, function(sm) sm$last.para - sm$first.para + 1L, 0L),
    row.names = NULL
  )
}

#' @export
print.snce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nSequential noise-contrastive estimation\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  s <- summary(x)
  if (nrow(s$coefficients)) {
    cat("Kernel coefficients:\n")
    print.default(format(stats::setNames(s$coefficients[, 1L], rownames(s$coefficients)), digits = digits),
                  print.gap = 2L, quote = FALSE)
  }
  if (!is.null(s$smooths)) {
    cat("\nSmooth terms (edf):\n")
    print(s$smooths, digits = digits, row.names = FALSE)
  }
  cat(sprintf("\n%d transitions in %d sequence(s), %d reference points each; intercept: %s%s\n",
              x$n, x$n_sequences, x$ratio, x$intercept$type, if (x$converged) "" else "; NOT CONVERGED"))
  invisible(x)
}

#' Summarise an snce fit
#'
#' @inheritParams nce_vocabulary
#' @param se_type `"sandwich"` (clustered, default) or `"naive"`.
#' @return An object of class `summary.snce_fit` with the parametric kernel
#'   coefficients (`coefficients`: estimate, standard error, z, p), the smooth
#'   terms' effective degrees of freedom (`smooths`) and the fit's settings.
#' @export
summary.snce_fit <- function(object, se_type = c("sandwich", "naive"), ...) {
  se_type <- match_choice(se_type)
  lab <- term_labels(object)
  pa <- object$row_setup$ncol
  par <- which(seq_along(lab) <= pa & lab == names(object$coefficients) & lab != "(Intercept)")
  cf <- object$coefficients[par]
  se <- sqrt(diag(stats::vcov(object, se_type = se_type)))[par]
  z <- cf / se
  tab <- cbind(Estimate = cf, `Std. Error` = se, `z value` = z, `Pr(>|z|)` = 2 * stats::pnorm(-abs(z)))
  normaliser <- NULL
  if (object$intercept$type == "none") {
    normaliser <- c(estimate = -unname(object$coefficients[1L]),
                    se = unname(sqrt(stats::vcov(object, se_type = se_type)[1L, 1L])))
  }
  structure(c(list(call = object$call, coefficients = tab, smooths = smooth_table(object), se_type = se_type,
                 normaliser = normaliser,
                 n = object$n, n_sequences = object$n_sequences, ratio = object$ratio,
                 intercept = object$intercept$type, cluster = object$cluster, reml = object$reml,
                 converged = object$converged, reference = object$reference,
                 loglik_label = if (inherits(object, "latkes_fit")) "grid-normalised, kernel df" else
                   "normaliser from the intercept, effective df"), summary_loglik(object)),
            class = "summary.snce_fit")
}

#' @export
print.summary.snce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nSequential noise-contrastive estimation\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  if (nrow(x$coefficients)) {
    cat(sprintf("Kernel coefficients (%s standard errors, clustered by %s):\n", x$se_type, x$cluster))
    stats::printCoefmat(x$coefficients, digits = digits)
  }
  if (!is.null(x$smooths)) {
    cat("\nSmooth terms:\n")
    print(x$smooths, digits = digits, row.names = FALSE)
  }
  cat(sprintf("\n%d transitions in %d sequence(s); %d reference points per transition from %s over %s\n",
              x$n, x$n_sequences, x$ratio, x$reference$kind, paste(x$reference$vars, collapse = ", ")))
  cat(sprintf("intercept (log normaliser): %s; REML score %s%s\n", x$intercept,
              format(x$reml, digits = digits + 2L), if (x$converged) "" else " (NOT CONVERGED)"))
  if (!is.null(x$normaliser)) {
    cat(sprintf("log normalising constant (-(Intercept)): %s (s.e. %s)\n",
                format(x$normaliser[["estimate"]], digits = digits),
                format(x$normaliser[["se"]], digits = digits)))
  }
  format_loglik(x, digits + 2L, x$loglik_label)
  invisible(x)
}

#' Plot the smooth terms of an snce fit
#'
#' Each one-dimensional smooth with its confidence band, each two-dimensional
#' smooth as an image with contours; kernel terms and intercept terms alike.
#'
#' @inheritParams nce_vocabulary
#' @param select Indices of the smooths to draw (all by default).
#' @param level Confidence level of the bands.
#' @param n_grid Grid points per axis.
#' @param ... Passed to the plotting functions.
#' @return `x`, invisibly.
#' @export
plot.snce_fit <- function(x, select = NULL, level = 0.95, se_type = c("sandwich", "naive"), n_grid = 100, ...) {
  v <- stats::vcov(x, se_type = match_choice(se_type))
  check_probability(level, "level")
  sms <- x$smooth
  if (!length(sms)) {
    nce_unsupported("plot", x, "the fit has no smooth terms to plot (its coefficients are in summary())")
  }
  if (is.null(select)) select <- seq_along(sms)
  if (!is.numeric(select) || anyNA(select) || any(!select %in% seq_along(sms))) {
    nce_abort(sprintf("`select` must index the %d smooth term(s)", length(sms)), "input")
  }
  z <- stats::qnorm(1 - (1 - level) / 2)
  pa <- x$row_setup$ncol
  for (i in select) {
    sm <- sms[[i]]
    src <- if (sm$first.para > pa) x$transitions else x$nce_frame
    j <- sm$first.para:sm$last.para
    numeric_terms <- all(vapply(sm$term, function(v) is.numeric(src[[v]]), TRUE))
    if (inherits(sm, "random.effect") || !numeric_terms) {
      # A random effect (or a smooth of a factor): its coefficients against normal quantiles, as mgcv does.
      b <- x$coefficients[j]
      stats::qqnorm(b, main = sm$label, ylab = sprintf("%s coefficients (edf %.2f)", sm$label, sum(x$edf[j])), ...)
      stats::qqline(b)
      next
    }
    if (sm$dim == 1L) {
      v1 <- sm$term
      nd <- data.frame(seq(min(src[[v1]]), max(src[[v1]]), length.out = n_grid))
      names(nd) <- v1
      if (!identical(sm$by, "NA")) {
        nd[[sm$by]] <- if (!is.null(sm$by.level)) factor(sm$by.level, levels = levels(src[[sm$by]])) else 1
      }
      xm <- mgcv::PredictMat(sm, nd)
      f <- drop(xm %*% x$coefficients[j])
      se <- sqrt(rowSums((xm %*% v[j, j]) * xm))
      graphics::plot(nd[[v1]], f, type = "n", ylim = range(f - z * se, f + z * se), xlab = v1,
                     ylab = sprintf("%s (edf %.2f)", sm$label, sum(x$edf[j])), ...)
      graphics::polygon(c(nd[[v1]], rev(nd[[v1]])), c(f - z * se, rev(f + z * se)),
                        col = grDevices::adjustcolor("steelblue", 0.3), border = NA)
      graphics::lines(nd[[v1]], f, lwd = 2, col = "steelblue")
      graphics::rug(src[[v1]][src$.label %in% c(1, NULL) | is.null(src$.label)], col = "grey50")
    } else if (sm$dim == 2L) {
      g1 <- seq(min(src[[sm$term[1]]]), max(src[[sm$term[1]]]), length.out = n_grid %/% 2)
      g2 <- seq(min(src[[sm$term[2]]]), max(src[[sm$term[2]]]), length.out = n_grid %/% 2)
      nd <- stats::setNames(expand.grid(g1, g2), sm$term)
      f <- matrix(drop(mgcv::PredictMat(sm, nd) %*% x$coefficients[j]), length(g1))
      graphics::image(g1, g2, f, xlab = sm$term[1], ylab = sm$term[2], main = sm$label,
                      col = grDevices::hcl.colors(30, "Blues 3", rev = TRUE), ...)
      graphics::contour(g1, g2, f, add = TRUE)
    }
  }
  invisible(x)
}

#' Tidy, glance and augment sequential fits
#'
#' `tidy()` gives one row per coefficient (kernel and intercept parts; with
#' `intercept = "transition"` the kernel's only), `glance()` one row of fit
#' statistics, `augment()` the observed transitions with the fitted log
#' transition density (`.fitted`, `type.predict = "link"`) and its standard
#' error. For a `latkes_collection`, `tidy()` stacks the fits' tables with a
#' column naming the fit and `glance()` one row of totals (log-likelihoods, degrees of
#' freedom and transitions summed over the independent fits).
#'
#' @param x An `snce_fit`, `latkes_fit` or `latkes_collection`.
#' @param conf.int,conf.level Add Wald confidence limits.
#' @inheritParams nce_vocabulary
#' @param newdata Optional data for `augment()`, as for `predict()`.
#' @param type.predict Prediction type for `.fitted`.
#' @param se_fit Add `.se.fit`.
#' @return A data frame.
#' @name tidy_seq
NULL

#' @rdname tidy_seq
#' @exportS3Method generics::tidy
tidy.snce_fit <- function(x, conf.int = FALSE, conf.level = 0.95,  # nolint: object_name_linter.
                          se_type = c("sandwich", "naive"), ...) {
  se_type <- match_choice(se_type)
  check_bool(conf.int, "conf.int")
  cf <- stats::coef(x)
  se <- sqrt(pmax(diag(stats::vcov(x, se_type = se_type)), 0))
  lab <- term_labels(x)
  pa <- x$row_setup$ncol
  out <- data.frame(term = names(cf), estimate = unname(cf), std.error = unname(se),
                    statistic = unname(cf / se), p.value = unname(2 * stats::pnorm(-abs(cf / se))),
                    component = ifelse(seq_along(cf) <= pa, "kernel", "intercept"),
                    smooth = ifelse(lab == names(cf), NA_character_, lab), stringsAsFactors = FALSE)
  if (conf.int) {
    ci <- tidy_confint(x, conf.level, se_type = se_type)
    out$conf.low <- unname(ci[, 1])
    out$conf.high <- unname(ci[, 2])
  }
  rownames(out) <- NULL
  out
}

#' @rdname tidy_seq
#' @exportS3Method generics::glance
glance.snce_fit <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll), df = attr(ll, "df"),
             nobs = x$n, n_sequences = x$n_sequences, ratio = x$ratio, intercept = x$intercept$type,
             reml = x$reml, converged = x$converged, stringsAsFactors = FALSE)
}

#' @rdname tidy_seq
#' @exportS3Method generics::augment
augment.snce_fit <- function(x, newdata = NULL,  # nolint: object_name_linter.
                             type.predict = c("link", "log_kernel", "response"),  # nolint: object_name_linter.
                             se_fit = FALSE, ...) {
  type.predict <- match_choice(type.predict)  # nolint: object_name_linter.
  check_bool(se_fit, "se_fit")
  d <- if (is.null(newdata)) x$transitions else newdata
  # Standard errors only when asked: LATKES's need the normaliser's gradient, twice its cost.
  p <- if (is.null(newdata)) predict(x, type = type.predict, se.fit = se_fit) else
    predict(x, newdata, type = type.predict, se.fit = se_fit)
  fit <- if (se_fit) p$fit else p
  if (length(fit) != nrow(d)) d <- x$transitions # raw LATKES fixations: predictions per transition row
  d$.fitted <- unname(fit)
  if (se_fit) d$.se.fit <- unname(p$se.fit)
  d
}

#' @export
terms.snce_fit <- function(x, ...) stats::terms(x$nce_formula)

#' The rows of an snce fit
#'
#' @param formula An `snce_fit`.
#' @inheritParams nce_vocabulary
#' @return Data frame of the transitions then their reference points, with the
#'   state, `_prev` and covariate columns (and LATKES features), `.label` (1
#'   data, 0 reference), `.transition` and `.offset`.
#' @export
model.frame.snce_fit <- function(formula, ...) formula$nce_frame

#' @export
model.matrix.snce_fit <- function(object, ...) {
  if (object$intercept$type == "transition") {
    # The kernel's columns: the per-transition intercepts are eliminated, not coefficients.
    x <- setup_predict(object$row_setup, object$nce_frame, FALSE)
    colnames(x) <- names(object$coefficients)
    return(x)
  }
  predict.snce_fit(object, newdata = object$nce_frame, type = "lpmatrix")
}

#' Fitted transition densities of an snce fit
#'
#' @inheritParams nce_vocabulary
#' @return The fitted transition density at each observed transition
#'   (`predict(object, type = "response")`): `nobs(object)` values.

#' Residuals of an snce fit
#'
#' NCE fits a classifier of data against reference points; its residuals are
#' the diagnostics there are. A transition density has no residual of its own.
#'
#' @inheritParams nce_vocabulary
#' @param type `"response"` (label minus the fitted probability that the row is
#'   a data point) or `"deviance"` (signed square roots of the rows'
#'   deviance contributions).
#' @return One value per row of `model.frame(object)` (data rows, then
#'   reference rows).
#' @export
residuals.snce_fit <- function(object, type = c("response", "deviance"), ...) {
  type <- match_choice(type)
  y <- object$nce_frame$.label
  p <- object$fitted.values
  if (type == "response") return(y - p)
  sign(y - p) * sqrt(-2 * (y * log(p) + (1 - y) * log1p(-p)))
}

#' Log-likelihood of an snce fit
#'
#' The sum over the observed transitions of the log transition density under
#' the fitted normalised kernel, \eqn{\sum_t f_{\hat\theta}(y_t, y_{t-1}) -
#' \log Z(y_{t-1})}. By default the log normaliser of each transition is minus
#' its intercept (the spline intercept's value, the global intercept with
#' `intercept = "none"`, or the transition's free intercept); with
#' `normalise = "reference"` it is computed by importance sampling from the
#' reference kernel, \eqn{\log \frac1K \sum_k \exp\{f(u_k, y_{t-1})\} / q(u_k
#' \mid y_{t-1})} with `n_draws` draws per transition, a check that does not
#' rest on the intercept.
#'
#' With `newdata` (transitions, or sequences as the fit's data) it is the
#' held-out log-likelihood of those transitions, as [predict()] gives their log
#' densities (refused with `intercept = "transition"`, whose normaliser is
#' known for the observed transitions only, unless `normalise = "reference"`).
#'
#' @inheritParams nce_vocabulary
#' @param newdata Held-out transitions or sequences; `NULL` (default) for the
#'   observed transitions.
#' @param normalise `"intercept"` or `"reference"`.
#' @param n_draws Reference draws per transition for `normalise = "reference"`.
#' @return An object of class `logLik`: `df` is the effective number of
#'   parameters (the kernel's and the intercept's effective degrees of freedom,
#'   one per free intercept with `intercept = "transition"`), `nobs` the number
#'   of transitions.
#' @export
logLik.snce_fit <- function(object, newdata = NULL, normalise = c("intercept", "reference"), n_draws = 1000, ...) {
  normalise <- match_choice(normalise)
  trans <- if (is.null(newdata)) object$transitions else snce_held_out(object, newdata)
  nd <- if (!is.null(newdata)) trans
  ld <- if (normalise == "intercept") {
    predict.snce_fit(object, nd, type = "link")
  } else {
    check_count(n_draws, "n_draws", min = 2)
    predict.snce_fit(object, nd, type = "log_kernel") - reference_log_z(object, trans, n_draws)
  }
  if (anyNA(ld)) nce_abort("the log density is NA at some transitions (NA in `newdata`?): remove them first", "input")
  structure(sum(ld), df = snce_df(object), nobs = length(ld), class = "logLik")
}

# Held-out transitions for logLik(): `newdata` as transitions (the states and their `_prev`
# columns), or sequences as the fit's data, made into transitions as snce() made them.
snce_held_out <- function(object, newdata, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  check_data_frame(newdata, "newdata", min_rows = 0L, call = call)
  vars <- object$reference$vars
  if (all(paste0(vars, "_prev") %in% names(newdata)) || nrow(newdata) == 0L) return(newdata)
  sequence_transitions(newdata, vars, object[["sequence_group"]], object$order, object[["sequence_time"]])$trans
}

# Effective number of parameters, the normaliser's included.
snce_df <- function(object) {
  df <- sum(object$edf)
  if (object$intercept$type == "transition") df <- df + length(object$transition_intercepts)
  df
}

# Log normaliser of the fitted kernel for each row of `trans` (previous state and
# covariates), by importance sampling from the reference kernel.
reference_log_z <- function(object, trans, n_draws, call = caller_call()) {
  vars <- object$reference$vars
  nt <- nrow(trans)
  check_size(8 * as.double(nt) * n_draws * (ncol(trans) + 8), "n_draws", "the importance-sampling normaliser",
             call = call)
  prev <- stats::setNames(trans[paste0(vars, "_prev")], vars)
  u <- kernel_draw(object$reference, prev, n_draws)
  of <- rep(seq_len(nt), each = n_draws)
  nd <- take_rows(trans, of)
  nd[vars] <- u[vars]
  lw <- predict.snce_fit(object, nd, type = "log_kernel") -
    kernel_logq(object$reference, u[vars], prev[of, , drop = FALSE])
  vapply(split(lw, of), log_mean_exp, 0)
}

#' Wald tests between nested snce fits
#'
#' Tests the coefficients the larger fit has beyond the smaller one (matched by
#' name) with a Wald statistic and the fit's sandwich covariance (clustered as
#' the fit was), which is valid for NCE whatever the ratio, unlike a likelihood
#' ratio of the classifiers. For smooth terms the statistic uses the
#' pseudo-inverse of their covariance of rank the rounded sum of their
#' effective degrees of freedom (at least 1), and that rank as degrees of
#' freedom. Both fits must be on the same transitions.
#'
#' @param object,... Two `snce_fit`s, in any order.
#' @inheritParams nce_vocabulary
#' @return An `anova` data frame in the layout of [anova.nce_fit()] (the
#'   columns of [stats::anova.glm()]): one row per fit, the Wald statistic, its
#'   degrees of freedom and `Pr(>Chi)` in the larger fit's row.
#' @export
anova.snce_fit <- function(object, ..., se_type = c("sandwich", "naive")) {
  se_type <- match_choice(se_type)
  fits <- c(list(object), list(...))
  if (length(fits) != 2L || !all(vapply(fits, inherits, TRUE, "snce_fit"))) {
    nce_abort("anova() of snce fits compares exactly two nested snce_fit objects", "input")
  }
  n_coef <- vapply(fits, function(f) length(stats::coef(f)), 0L)
  o <- order(n_coef)
  small <- fits[[o[1]]]
  big <- fits[[o[2]]]
  if (small$n != big$n || !isTRUE(all.equal(small$transitions[small$reference$vars],
                                            big$transitions[big$reference$vars], check.attributes = FALSE))) {
    nce_abort("the two fits are not on the same transitions", "input")
  }
  extra <- setdiff(names(stats::coef(big)), names(stats::coef(small)))
  if (!length(extra) && setequal(names(stats::coef(big)), names(stats::coef(small)))) {
    nce_abort("the two fits have the same terms: there is nothing to test", "input")
  }
  if (!length(extra) || !all(names(stats::coef(small)) %in% names(stats::coef(big)))) {
    nce_abort("the fits are not nested: the smaller fit's coefficients must all be in the larger fit", "input")
  }
  b <- stats::coef(big)[extra]
  v <- stats::vcov(big, se_type = se_type)[extra, extra, drop = FALSE]
  rank <- max(1L, min(length(extra), round(sum(big$edf[extra]))))
  e <- eigen((v + t(v)) / 2, symmetric = TRUE)
  keep <- seq_len(rank)
  keep <- keep[e$values[keep] > max(e$values) * 1e-10]
  wald <- sum((crossprod(e$vectors[, keep, drop = FALSE], b))^2 / e$values[keep])
  df <- length(keep)
  tests <- rbind(NA, c(df, wald, stats::pchisq(wald, df, lower.tail = FALSE)))
  anova_table(list(small, big), tests, sprintf("Wald test of nested snce fits (%s covariance, clustered by %s)",
                                               se_type, big$cluster))
}

#' Simulate sequences from an snce fit
#'
#' Generates new sequences from the fitted transition kernel by
#' sampling-importance-resampling: at each step, `candidates` points are drawn
#' from the reference kernel \eqn{q(\cdot \mid y_{t-1})}, weighted by
#' \eqn{\exp\{f_\theta(u, y_{t-1})\} / q(u \mid y_{t-1})} and one is kept.
#' The draws are approximate, with error falling as `candidates` grows (the
#' normaliser is not needed). Each simulated sequence starts from the first
#' `order` states of an observed sequence, has its number of transitions and
#' replays its covariates.
#'
#' @inheritParams nce_vocabulary
#' @param nsim Number of simulated copies of the observed set of sequences.
#' @param candidates Reference draws per step.
#' @return Data frame with the state columns, `.sequence` (the observed
#'   sequence it copies), `.step` (0 for the starting states) and `.sim`.
#' @examples
#' set.seed(1)
#' y <- numeric(301); y[1] <- runif(1)
#' for (t in 2:301) { a <- 2 * y[t - 1]; y[t] <- log1p(runif(1) * expm1(a)) / a }
#' fit <- snce(~ I(y * y_prev), data.frame(y = y), ref_uniform(y = c(0, 1)), ratio = 10)
#' s <- simulate(fit, nsim = 2, seed = 1)
#' head(s)
#' @export
simulate.snce_fit <- function(object, nsim = 1, seed = NULL, candidates = 200, ...) {
  check_count(nsim, "nsim")
  check_sim_size(object, nsim)
  check_count(candidates, "candidates", min = 2)
  check_size(8 * as.double(candidates) * nrow(object$transitions) * (ncol(object$transitions) + 8), "candidates",
             "the candidate draws of one step")
  old <- set_sim_seed(seed)
  on.exit(restore_seed(old))
  k <- as.integer(candidates)
  vars <- object$reference$vars
  order <- object$order
  trans <- object$transitions
  lag_name <- function(v, j) if (j == 1L) paste0(v, "_prev") else paste0(v, "_prev", j)
  # Chains: one per (copy, observed sequence); rows of `trans` give each step's covariates.
  steps <- split(seq_len(nrow(trans)), factor(trans$.sequence, levels = unique(trans$.sequence)))
  chains <- rep(seq_along(steps), times = nsim)
  len <- lengths(steps)[chains]
  # prev[[j]]: data frame (one row per chain) of the state j steps back
  first <- vapply(steps, `[`, 1L, 1L)[chains]
  prev <- lapply(seq_len(order), function(j) {
    stats::setNames(trans[first, vapply(vars, lag_name, "", j), drop = FALSE], vars)
  })
  out <- list()
  for (j in rev(seq_len(order))) {
    out[[length(out) + 1L]] <- cbind(prev[[j]], .chain = seq_along(chains), .step = 1L - j)
  }
  for (s in seq_len(max(len))) {
    act <- which(len >= s)
    rows <- vapply(steps[chains[act]], `[`, 1L, s)
    p1 <- prev[[1L]][act, , drop = FALSE]
    cand <- kernel_draw(object$reference, p1, k)
    of <- rep(seq_along(act), each = k)
    nd <- trans[rows[of], , drop = FALSE]
    nd[vars] <- cand[vars]
    for (j in seq_len(order)) for (v in vars) nd[[lag_name(v, j)]] <- prev[[j]][[v]][act][of]
    lw <- predict(object, nd, type = "log_kernel") - kernel_logq(object$reference, cand, p1[of, , drop = FALSE])
    pick <- vapply(split(seq_along(of), of), function(i) {
      w <- exp(lw[i] - max(lw[i]))
      i[sample.int(length(i), 1L, prob = w)]
    }, 1L)
    new <- cand[pick, vars, drop = FALSE]
    if (order > 1L) for (j in order:2) prev[[j]][act, ] <- prev[[j - 1L]][act, ]
    prev[[1L]][act, ] <- new
    out[[length(out) + 1L]] <- cbind(new, .chain = act, .step = s)
  }
  res <- do.call(rbind, out)
  res <- res[order(res$.chain, res$.step), , drop = FALSE]
  res$.sequence <- names(steps)[chains[res$.chain]]
  res$.sim <- (res$.chain - 1L) %/% length(steps) + 1L
  res$.chain <- NULL
  rownames(res) <- NULL
  res
}
