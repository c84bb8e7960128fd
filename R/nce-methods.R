# Methods for nce_fit objects, shaped after glm's.

#' Covariance of an nce fit
#'
#' @param object An `nce_fit` (also `snce_fit` and `latkes_fit`).
#' @param se_type `"sandwich"` (default: data and reference points as two
#'   independent samples, right for NCE; for [snce()] fits clustered by
#'   transition, or by sequence with `cluster = "sequence"`, plus mgcv's
#'   smoothing-bias term for smooths) or `"naive"` (inverse Hessian of the
#'   (penalised) logistic regression, which treats the reference points as fixed).
#' @inheritParams nce_vocabulary
#' @return Covariance matrix with the coefficients' names. With
#'   `snce(intercept = "transition")` the per-transition intercepts are not
#'   among the coefficients (they are eliminated in the fit); their standard
#'   errors are in `object$transition_intercept_se`.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' vcov(fit)
#' vcov(fit, se_type = "naive")
#' @export
vcov.nce_fit <- function(object, se_type = c("sandwich", "naive"), ...) {
  check_renamed_dots(...names(), c(type = "se_type"))
  se_type <- match_choice(se_type)
  if (se_type == "sandwich") object$vcov else object$vcov_naive
}

#' Wald confidence intervals for an nce fit
#'
#' @inheritParams nce_vocabulary
#' @return Matrix with one row per coefficient, columns for the lower and
#'   upper limits.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' confint(nce(~ y, df, ref_uniform(y = c(0, 1))))
#' @export
confint.nce_fit <- function(object, parm, level = 0.95, se_type = c("sandwich", "naive"), ...) {
  check_renamed_dots(...names(), c(type = "se_type"))
  call <- sys.call()
  wald_confint(object, parm, level, match_choice(se_type), call = call)
}

# Wald intervals from coef() and vcov(se_type =): the confint() of every class whose coefficients
# are asymptotically normal with the (sandwich or naive) covariance.
wald_confint <- function(object, parm, level, se_type, call) {
  check_probability(level, "level", call = call)
  cf <- stats::coef(object)
  se <- sqrt(pmax(diag(stats::vcov(object, se_type = se_type)), 0))
  pnames <- names(cf)
  if (missing(parm)) {
    parm <- pnames
  } else if (is.numeric(parm)) {
    if (anyNA(parm) || any(parm < 1 | parm > length(pnames) | parm != round(parm))) {
      nce_abort(sprintf("`parm` must be coefficient names or indices from 1 to %d", length(pnames)), "input",
                call = call)
    }
    parm <- pnames[parm]
  } else if (!is.character(parm)) {
    nce_abort(sprintf("`parm` must be coefficient names or indices, not %s.", describe_value(parm)), "input",
              call = call)
  }
  unknown <- setdiff(parm, pnames)
  if (length(unknown)) {
    nce_abort(sprintf("`parm` names unknown coefficient(s): %s", paste(unknown, collapse = ", ")), "input",
              call = call)
  }
  a <- (1 - level) / 2
  pct <- paste(format(100 * c(a, 1 - a), trim = TRUE, scientific = FALSE, digits = 3), "%")
  z <- stats::qnorm(1 - a)
  ci <- cbind(cf[parm] - z * se[parm], cf[parm] + z * se[parm])
  dimnames(ci) <- list(parm, pct)
  ci
}

#' @export
nobs.nce_fit <- function(object, ...) object$n

#' @export
formula.nce_fit <- function(x, ...) x$nce_formula

#' The data and reference rows of an nce fit
#'
#' @param formula An `nce_fit`.
#' @inheritParams nce_vocabulary
#' @return Data frame of the data rows then the reference rows, in the
#'   reference's columns, with `.label` (1 data, 0 reference) and `.offset`
#'   (the offset used in the fit: \eqn{\log(n/m) - \log q}).
#' @export
model.frame.nce_fit <- function(formula, ...) formula$nce_frame

#' @export
print.nce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nNoise-contrastive estimation (", x$method, ")\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  cat("Coefficients:\n")
  print.default(format(stats::coef(x), digits = digits), print.gap = 2L, quote = FALSE)
  cat(log_z_not_identified(x) %||%
        sprintf("\nlog normalising constant (-(Intercept)): %s\n", format(x$log_normaliser, digits = digits)))
  cat(sprintf("%d data points, %d reference points (ratio %g)%s\n", x$n, x$m, x$ratio,
              if (x$converged) "" else "; NOT CONVERGED"))
  if (isTRUE(x$relative)) cat(relative_note(x$reference), "\n", sep = "")
  invisible(x)
}

#' Summarise an nce fit
#'
#' @inheritParams nce_vocabulary
#' @param se_type Covariance used for standard errors, see [vcov.nce_fit()].
#' @return An object of class `summary.nce_fit`: the coefficient table
#'   (`coefficients`: estimate, standard error, z value, p value), the
#'   estimated log normalising constant with its standard error, and the
#'   fit's settings.
#' @export
summary.nce_fit <- function(object, se_type = c("sandwich", "naive"), ...) {
  check_renamed_dots(...names(), c(type = "se_type"))
  se_type <- match_choice(se_type)
  cf <- stats::coef(object)
  se <- sqrt(pmax(diag(stats::vcov(object, se_type = se_type)), 0))
  # A standard error of 0 (the intercept of an intercept-only fit is known exactly): no test.
  z <- ifelse(!is.na(se) & se > 0, cf / se, NA_real_)
  tab <- cbind(Estimate = cf, `Std. Error` = se, `z value` = z, `Pr(>|z|)` = 2 * stats::pnorm(-abs(z)))
  structure(c(list(call = object$call, coefficients = tab, se_type = se_type,
                 log_normaliser = c(estimate = object$log_normaliser, se = unname(se[1L])),
                 n = object$n, m = object$m, ratio = object$ratio, method = object$method,
                 converged = object$converged, iterations = object$iterations,
                 reference = object$reference, relative = object$relative, proper = object$proper,
                 improper_along = object$improper_along), summary_loglik(object)),
            class = "summary.nce_fit")
}

#' @export
print.summary.nce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nNoise-contrastive estimation (", x$method, ")\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  cat(sprintf("Coefficients (%s standard errors):\n", x$se_type))
  stats::printCoefmat(x$coefficients, digits = digits, na.print = "NA")
  cat(log_z_not_identified(x) %||% sprintf("\nlog normalising constant: %s (s.e. %s)\n",
                                           format(x$log_normaliser[["estimate"]], digits = digits),
                                           format(x$log_normaliser[["se"]], digits = digits)))
  cat(sprintf("%d data points, %d reference points (ratio %g), reference: %s over %s\n",
              x$n, x$m, x$ratio, reference_label(x$reference, x$relative), paste(x$reference$vars, collapse = ", ")))
  format_loglik(x, digits, "normalised model; df")
  cat(sprintf("Newton iterations: %d%s\n", x$iterations, if (x$converged) "" else " (NOT CONVERGED)"))
  invisible(x)
}

#' Predict densities from an nce fit
#'
#' @inheritParams nce_vocabulary
#' @param newdata Data frame with the reference's columns; the data by default.
#'   Rows with NA give NA. Character or factor columns where the model needs
#'   numbers are refused (`nce_error_input`).
#' @param type `"link"` or `"log_density"` (the same: \eqn{f_\theta(y) + \nu},
#'   the log of the normalised density, with the intercept's estimate of
#'   \eqn{-\log Z}), `"response"` or `"density"` (its exponential),
#'   `"log_unnormalised"` (\eqn{f_\theta(y)} alone), `"lpmatrix"` (the model
#'   matrix at `newdata`, so that `lpmatrix %*% coef(object)` is the link, plus
#'   attribute `"model.offset"` for offsets in the formula) or `"terms"` (each
#'   term's contribution, a matrix; the intercept is attribute `"constant"`).
#'   The fitted model lives on the reference's support: outside it the density
#'   is 0 and the log density `-Inf`.
#' @param se.fit Also return standard errors (delta method for `"density"`).
#' @return A vector (a matrix for `"lpmatrix"` and `"terms"`), or with
#'   `se.fit = TRUE` a list with `fit` and `se.fit`.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' predict(fit, data.frame(y = c(0, 0.5, 1)), type = "density", se.fit = TRUE)
#' 2 * exp(2 * c(0, 0.5, 1)) / (exp(2) - 1)   # truth
#' predict(fit, data.frame(y = 2), type = "density")   # outside [0, 1]: 0
#' @export
predict.nce_fit <- function(object, newdata, type = c("link", "log_density", "response", "density",
                                                      "log_unnormalised", "lpmatrix", "terms"),
                            se.fit = FALSE, se_type = c("sandwich", "naive"), ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  check_bool(se.fit, "se.fit")
  newdata <- nce_predict_newdata(object, newdata, type)
  mm <- nce_model_matrix(object, newdata)
  x <- mm$x
  if (type == "lpmatrix") {
    off <- (if (is.null(mm$offset)) 0 else mm$offset) + relative_log_q(object, newdata)
    if (!is.null(mm$offset) || isTRUE(object$relative)) attr(x, "model.offset") <- off  # nolint: object_name_linter.
    rownames(x) <- rownames(newdata)
    return(x)
  }
  beta <- stats::coef(object)
  v <- stats::vcov(object, se_type = match_choice(se_type))
  if (type == "terms") return(nce_predict_terms(x, beta, v, attr(x, "assign"), object$terms, newdata, se.fit))
  keep <- !is.na(beta)
  if (type == "log_unnormalised") keep[1L] <- FALSE
  x <- x[, keep, drop = FALSE]
  fit <- drop(x %*% beta[keep]) + if (is.null(mm$offset)) 0 else mm$offset
  se <- sqrt(pmax(rowSums((x %*% v[keep, keep, drop = FALSE]) * x), 0))
  nce_finish_prediction(object, newdata, fit, se, type, se.fit)
}

# The data rows by default; otherwise a data frame with the model's columns, numeric where
# the reference generates numbers. An infinite coordinate has density 0: for the density
# types its row is set to 0 (log -Inf) by nce_finish_prediction() (attribute "nce_infinite");
# the other types refuse it.
nce_predict_newdata <- function(object, newdata, type = "link", call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (missing(newdata) || is.null(newdata)) {
    d <- data_rows(object)
    if (!is.null(object$data_names)) rownames(d) <- object$data_names
    # The fit's own rows: nce_finish_prediction() pads them at rows dropped by na.exclude, as glm.
    return(structure(d, nce_own_rows = TRUE))
  }
  check_data_frame(newdata, "newdata", min_rows = 0L, call = call)
  # A fit relative to its reference has a density over every column of the reference.
  needed <- union(model_vars(object$nce_formula), if (isTRUE(object$relative)) object$reference$vars)
  check_newdata_columns(newdata, needed, call = call)
  check_reference_columns(newdata, object$reference, arg = "newdata", call = call)
  newdata <- stand_in_infinite(newdata, intersect(object$reference$vars, names(newdata)), object$nce_frame)
  inf <- attr(newdata, "nce_infinite")
  if (length(inf) && !type %in% c("log_density", "link", "response", "density")) {
    nce_abort(sprintf("`newdata` has infinite values (rows %s): type = \"%s\" needs finite coordinates.",
                      format_positions(inf), type), "data", call = call)
  }
  newdata
}

# Rows where the model's density is 0: the reference's log density `lq` is -Inf there (NA rows
# are unknown, not outside), or the row had an infinite coordinate (stand_in_infinite()).
outside_support <- function(lq, newdata) {
  out <- !is.na(lq) & lq == -Inf
  out[attr(newdata, "nce_infinite")] <- TRUE
  out
}

# A log density with density 0 at the rows `out` (outside the reference's support, or at an
# infinite coordinate): log -Inf there with an NA standard error; on the response scale
# (`response`) the density, 0 there with standard error 0. One rule for every class.
zero_density_at <- function(fit, se, out, response) {
  fit[out] <- -Inf
  se[out] <- NA_real_
  if (response) {
    fit <- exp(fit)
    se <- fit * se
    se[out] <- 0
  }
  list(fit = fit, se = se)
}

# Rows of `newdata` with an infinite value in `vars`, where a model's density is 0: each such value
# replaced by a finite stand-in (the first row of `standin`), so that the model matrix can be
# built, and the rows kept in attribute "nce_infinite" for the prediction to set afterwards.
stand_in_infinite <- function(newdata, vars, standin) {
  inf <- which(Reduce(`|`, lapply(newdata[vars], function(v) is.numeric(v) & is.infinite(v)), FALSE))
  if (!length(inf)) return(newdata)
  for (v in vars) if (is.numeric(newdata[[v]])) newdata[[v]][is.infinite(newdata[[v]])] <- standin[[v]][1L]
  attr(newdata, "nce_infinite") <- inf
  newdata
}

# Log density to the requested scale, with 0 density (log -Inf) outside the reference's support.
nce_finish_prediction <- function(object, newdata, fit, se, type, se_fit) {
  lq <- reference_log_q(object$reference, newdata)
  out <- outside_support(lq, newdata)
  # Relative to the reference, log p = log q + f + nu (NA at incomplete rows, -Inf set below).
  if (isTRUE(object$relative)) fit <- fit + ifelse(out, 0, lq)
  # An improper model has no normalised density (see ?nce_checks): NA, except 0 outside the support.
  if (isFALSE(object$proper) && type != "log_unnormalised") fit[] <- NA_real_
  p <- zero_density_at(fit, se, out, type %in% c("density", "response"))
  fit <- p$fit
  se <- p$se
  names(fit) <- names(se) <- rownames(newdata)
  if (isTRUE(attr(newdata, "nce_own_rows"))) {
    fit <- stats::napredict(object$na.action, fit)
    se <- stats::napredict(object$na.action, se)
  }
  if (se_fit) list(fit = fit, se.fit = se) else fit
}

# The reference's kind as printed, saying when the model is relative to it.
reference_label <- function(ref, relative) {
  paste0(ref$kind, if (isTRUE(relative)) " (the model relative to it)" else "")
}

# print()'s line for a fit relative to its reference.
relative_note <- function(ref) {
  sprintf("The model is relative to the %s reference: log density = log q + the terms above.", ref$kind)
}

# The offset a fit relative to its reference adds to its model matrix's rows (`"lpmatrix"`):
# log q at the rows of `newdata` (NA at incomplete rows, 0 outside the support, whose density
# nce_finish_prediction() sets to 0), else 0.
relative_log_q <- function(object, newdata) {
  if (!isTRUE(object$relative)) return(0)
  lq <- reference_log_q(object$reference, newdata)
  lq[is.infinite(lq)] <- 0
  lq
}

# log q of the reference at the rows of `newdata`: NA at incomplete rows, and at every row when
# `newdata` lacks a column of the reference.
reference_log_q <- function(ref, newdata) {
  lq <- rep(NA_real_, nrow(newdata))
  if (!all(ref$vars %in% names(newdata)) || !nrow(newdata)) return(lq)
  d <- newdata[ref$vars]
  ok <- which(rows_finite(d))
  if (length(ok)) lq[ok] <- ref_logq(ref, d[ok, , drop = FALSE])
  lq
}

# Each term's contribution (uncentred, as mgcv), with the intercept as attribute "constant".
nce_predict_terms <- function(x, beta, v, assign, tt, newdata, se_fit) {
  labels <- attr(tt, "term.labels")
  b <- beta
  b[is.na(b)] <- 0
  v[is.na(v)] <- 0
  fit <- se <- matrix(0, nrow(x), length(labels), dimnames = list(rownames(newdata), labels))
  for (j in seq_along(labels)) {
    cols <- which(assign == j)
    xj <- x[, cols, drop = FALSE]
    fit[, j] <- xj %*% b[cols]
    se[, j] <- sqrt(pmax(rowSums((xj %*% v[cols, cols, drop = FALSE]) * xj), 0))
  }
  const <- if (attr(tt, "intercept") == 1L) unname(b[1L]) else 0
  attr(fit, "constant") <- const
  if (se_fit) list(fit = fit, se.fit = se) else fit
}

# Model matrix of the fit's terms at new points (NA rows kept as NA), and the formula's offset.
nce_model_matrix <- function(object, newdata) {
  tt <- stats::delete.response(object$terms)
  mf <- stats::model.frame(tt, newdata, na.action = stats::na.pass, xlev = object$xlevels)
  x <- stats::model.matrix(tt, mf, contrasts.arg = object$contrasts)
  if (nrow(x) != nrow(newdata)) {
    out <- matrix(NA_real_, nrow(newdata), ncol(x), dimnames = list(NULL, colnames(x)))
    out[as.integer(rownames(x)), ] <- x
    attr(out, "assign") <- attr(x, "assign")
    x <- out
  }
  list(x = x, offset = stats::model.offset(mf))
}

#' Simulate from an nce fit
#'
#' Draws data sets of the fit's size from the fitted density by
#' sampling-importance-resampling: `candidates` reference draws per point are
#' weighted by \eqn{\exp\{f_\theta(u)\}/q(u)} and resampled. The draws are
#' approximate, with error falling as `candidates` grows; the effective sample
#' size of the weights is returned as attribute `"ess"`.
#'
#' @inheritParams nce_vocabulary
#' @param nsim Number of data sets, a whole number >= 1.
#' @param candidates Reference draws per simulated point (>= 1); a request
#'   that would not fit in memory is refused with `nce_error_size`.
#' @return Data frame with the reference's columns and `.sim` (data set index).
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' s <- simulate(fit, nsim = 2, seed = 3)
#' tapply(s$y, s$.sim, mean)
#' @export
simulate.nce_fit <- function(object, nsim = 1, seed = NULL, candidates = 100, ...) {
  check_proper(object, "simulate()")
  check_nsim(nsim, 8 * 2 * object$n * (length(object$reference$vars) + 2))
  check_number(candidates, "candidates", min = 1)
  n <- object$n
  k <- candidates * n
  if (k > .Machine$integer.max) {
    nce_abort(sprintf("`candidates` = %g asks for %.3g draws per data set, more than R's limit; lower it",
                      candidates, k), "size")
  }
  check_size(k * 8 * (3 * length(object$reference$vars) + 8), "candidates", "simulate()")
  k <- as.integer(round(k))
  old <- set_sim_seed(seed)
  on.exit(restore_seed(old))
  sir_simulate(object$reference, function(u) predict(object, u, type = "log_unnormalised"), n, k, nsim)
}

# Sampling-importance-resampling from the density proportional to exp(log_f(u)): `nsim` data sets
# of `n` rows, each resampled from `k` reference draws weighted by exp(log_f(u)) / q(u). Returns
# the rows with `.sim` and the effective sample size of each set's weights as attribute "ess".
sir_simulate <- function(reference, log_f, n, k, nsim) {
  ess <- numeric(nsim)
  sims <- lapply(seq_len(nsim), function(s) {
    u <- ref_draw(reference, k)
    lw <- log_f(u) - ref_logq(reference, u)
    w <- exp(lw - max(lw))
    ess[s] <<- sum(w)^2 / sum(w^2)
    out <- u[sample.int(k, n, replace = TRUE, prob = w), , drop = FALSE]
    out$.sim <- s
    out
  })
  out <- do.call(rbind, sims)
  rownames(out) <- NULL
  attr(out, "ess") <- ess
  out
}

# The data rows of a fit, in the reference's columns.
data_rows <- function(object) {
  fr <- object$nce_frame
  fr[fr$.label == 1, object$reference$vars, drop = FALSE]
}

# simulate()'s `seed`: set it, returning the RNG state to restore (NULL when seed is NULL).
set_sim_seed <- function(seed, call = caller_call()) {
  if (is.null(seed)) return(NULL)
  if (!is.numeric(seed) || length(seed) != 1L || !is.finite(seed)) {
    nce_abort(sprintf("`seed` must be NULL or one finite number for set.seed(), not %s.", describe_value(seed)),
              "input", call = call)
  }
  if (!exists(".Random.seed", envir = .GlobalEnv, inherits = FALSE)) stats::runif(1)
  old <- get(".Random.seed", envir = .GlobalEnv)
  set.seed(seed)
  old
}

restore_seed <- function(old) {
  if (!is.null(old)) assign(".Random.seed", old, envir = .GlobalEnv)
}

#' Tidy, glance at and augment nce fits (broom)
#'
#' `tidy()` gives the coefficient table (sandwich standard errors, z
#' statistics; with `conf.int = TRUE` Wald intervals); for fits with smooth
#' terms the parametric coefficients by default, or with
#' `parametric = FALSE` the smooth terms (`edf`, `ref.df`, `statistic`,
#' `p.value`, from [summary.nce_gam()]). `glance()` gives one row: the log
#' normaliser and its standard error, the log-likelihood of the normalised
#' model with its `df`, AIC, BIC, the numbers of data and reference points and
#' whether the fit converged. `augment()` adds to the data (or `newdata`)
#' `.fitted` (the log density, or the density with `type.predict =
#' "response"`) and, with `se_fit = TRUE`, `.se.fit`.
#'
#' @inheritParams nce_vocabulary
#' @param conf.int Add `conf.low` and `conf.high`.
#' @param parametric For `nce_gam`: the parametric coefficients (`TRUE`) or
#'   the smooth terms (`FALSE`).
#' @param newdata Data frame to augment instead of the fit's data.
#' @param type.predict `"link"` (log density) or `"response"` (density).
#' @param se_fit Add `.se.fit`.
#' @return A data frame.
#' @name nce_broom
#' @examples
#' if (requireNamespace("broom", quietly = TRUE)) {
#'   set.seed(1)
#'   df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#'   fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#'   broom::tidy(fit, conf.int = TRUE)
#'   broom::glance(fit)
#'   head(broom::augment(fit))
#' }
NULL

#' @rdname nce_broom
#' @exportS3Method generics::tidy
tidy.nce_fit <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  check_bool(conf.int, "conf.int")
  tab <- summary(x)$coefficients
  out <- data.frame(term = rownames(tab), estimate = tab[, 1L], std.error = tab[, 2L],
                    statistic = tab[, 3L], p.value = tab[, 4L], row.names = NULL, stringsAsFactors = FALSE)
  if (conf.int) {
    ci <- tidy_confint(x, conf.level)
    out$conf.low <- unname(ci[, 1L])
    out$conf.high <- unname(ci[, 2L])
  }
  nce_as_tibble(out)
}

#' @rdname nce_broom
#' @exportS3Method generics::glance
glance.nce_fit <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  v <- stats::vcov(x)
  out <- data.frame(log_normaliser = x$log_normaliser, log_normaliser_se = sqrt(max(v[1L, 1L], 0)),
                    logLik = as.numeric(ll), df = attr(ll, "df"), AIC = stats::AIC(x), BIC = stats::BIC(x),
                    nobs = x$n, n_reference = x$m, ratio = x$ratio, method = x$method,
                    reference = x$reference$kind, converged = isTRUE(x$converged),
                    stringsAsFactors = FALSE)
  nce_as_tibble(out)
}

#' @rdname nce_broom
#' @exportS3Method generics::augment
augment.nce_fit <- function(x, newdata = NULL,  # nolint: object_name_linter.
                            type.predict = c("link", "response"), se_fit = FALSE, ...) {  # nolint: object_name_linter.
  type.predict <- match_choice(type.predict)  # nolint: object_name_linter.
  check_bool(se_fit, "se_fit")
  data <- if (is.null(newdata)) data_rows(x) else newdata
  p <- stats::predict(x, data, type = type.predict, se.fit = TRUE)
  out <- data
  out$.fitted <- unname(p$fit)
  if (se_fit) out$.se.fit <- unname(p$se.fit)
  rownames(out) <- NULL
  nce_as_tibble(out)
}

# broom returns tibbles; give one when tibble is installed, else a data frame.
nce_as_tibble <- function(df) {
  if (requireNamespace("tibble", quietly = TRUE)) tibble::as_tibble(df) else df
}

#' Log-likelihood, AIC and BIC of an nce fit
#'
#' The log-likelihood of an NCE fit is the log density of the data under the
#' fitted *normalised* model, \eqn{\sum_i w_i \{f_{\hat\theta}(y_i) + \hat\nu\}},
#' where minus the intercept \eqn{\hat\nu} is the estimated log normalising
#' constant; it equals `sum(predict(object, type = "link"))` (weighted by the
#' fit's weights). NCE does not maximise it, but with a large `ratio` it
#' approaches the maximised log-likelihood of the model. Its `df` is the number
#' of estimated coefficients including the intercept (the normaliser), or for
#' fits with smooth terms the total effective degrees of freedom (again
#' including the intercept); `nobs` is the number of data points. `AIC()` and
#' `BIC()` use these: \eqn{-2 \log L + k\,df}. Compare fits of the same data
#' (the reference draws add noise of order `n / sqrt(ratio * n)` to the
#' normaliser's contribution: use a large `ratio` when AIC differences are
#' small). For tests between nested fits, use [anova.nce_fit()], not a
#' likelihood-ratio test.
#'
#' @inheritParams nce_vocabulary
#' @param newdata Optional data frame: the log-likelihood of these points
#'   (held-out data) instead of the fit's data, with `nobs` their number.
#' @return An object of class `logLik` with attributes `df` and `nobs`.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)), ratio = 50)
#' logLik(fit)
#' AIC(fit, update(fit, . ~ . + I(y^2)))
#' # exact maximum likelihood for p(y) = exp(a y) / Z(a) on [0, 1]
#' nll <- function(a) -(a * sum(df$y) - nrow(df) * log(expm1(a) / a))
#' -optimize(nll, c(0.1, 5))$objective
#' @export
logLik.nce_fit <- function(object, newdata = NULL, ...) {
  # An improper model has no normalised log-likelihood (see ?nce_checks).
  if (isFALSE(object$proper)) {
    return(structure(NA_real_, df = nce_df(object), nobs = if (is.null(newdata)) object$n else nrow(newdata),
                     class = "logLik"))
  }
  if (is.null(newdata)) {
    ld <- stats::predict(object, type = "link")
    w <- object$data_weights
    if (!is.null(w)) ld <- w * ld
    nobs <- object$n
  } else {
    ld <- stats::predict(object, newdata, type = "link")
    nobs <- nrow(newdata)
  }
  if (anyNA(ld)) nce_abort("the log density is NA at some points (NA in `newdata`?): remove them first", "input")
  structure(sum(ld), df = nce_df(object), nobs = nobs, class = "logLik")
}

# Parameters counted by logLik: coefficients estimated (with the intercept), or the total edf.
nce_df <- function(object) {
  if (inherits(object, c("nce_gam", "nce_conditional"))) return(sum(object$edf))
  if (inherits(object, "nce_mlp")) {
    rest <- if (is.null(object$rest_fit)) sum(!is.na(stats::coef(object))) else sum(object$rest_fit$edf)
    return(rest + object$network$n_params)
  }
  sum(!is.na(stats::coef(object)))
}

#' @rdname logLik.nce_fit
#' @param scale,k As for [stats::extractAIC()]: `k` is the penalty per degree
#'   of freedom (2 for AIC); `scale` is unused.
#' @param fit An `nce_fit`.
#' @export
extractAIC.nce_fit <- function(fit, scale = 0, k = 2, ...) extractAIC.nce_result(fit, scale, k, ...)

#' Fitted densities, residuals and deviance of an nce fit
#'
#' `fitted()` gives the fitted (normalised) density at each data point, the
#' same as `predict(object, type = "response")`: `nobs(object)` values.
#'
#' `residuals()` gives the residuals of the classification that NCE fits: the
#' data points have label 1 and the reference points 0, and each point's
#' fitted probability of being data is
#' \eqn{p(u) / \{p(u) + (m/n) q(u)\}}. A density model has no residual at a
#' data point on its own; the classification residuals at the data *and*
#' reference points (`n + m` values, data first) show where the model puts too
#' much or too little mass: plotted against a covariate, a trend in them is a
#' trend the log density misses. This is what `mgcv::gam.check()` uses (its
#' check of the basis dimension `k` then asks whether the classification
#' residuals still vary smoothly with each covariate). Types are those of
#' [stats::residuals.glm()].
#'
#' `deviance()` is \eqn{-2 \log L} (with the log-likelihood of
#' [logLik.nce_fit()]): there is no saturated model for a density, so it is
#' not a deviance against one; `df.residual()` is `nobs - df`.
#'
#' @inheritParams nce_vocabulary
#' @param type Residual type: `"deviance"`, `"pearson"`, `"response"` or
#'   `"working"`.
#' @return `fitted()`: a numeric vector of `nobs(object)` densities (padded with
#'   NA at dropped rows when `na.action = na.exclude`); `residuals()`: a
#'   numeric vector of `n + m` classification residuals; `deviance()` and
#'   `df.residual()`: one number.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' head(fitted(fit))
#' r <- residuals(fit, type = "response")
#' round(tapply(r, cut(model.frame(fit)$y, 5), mean), 4)   # about 0: no misfit along y
#' @name fitted.nce_fit
NULL

#' @rdname fitted.nce_fit
#' @export
residuals.nce_fit <- function(object, type = c("deviance", "pearson", "response", "working"), ...) {
  type <- match_choice(type)
  label <- object$nce_frame$.label
  # mgcv's qq.gam() simulates labels into `y`; otherwise the fit has no response (see ?nce).
  y <- if (length(object$y) == length(label)) object$y else label
  mu <- object$fitted.values
  pw <- if (is.null(object$prior.weights)) rep(1, length(label)) else object$prior.weights
  fam <- if (identical(object$method, "poisson")) stats::poisson() else stats::binomial()
  r <- switch(type,
    deviance = sign(y - mu) * sqrt(pmax(fam$dev.resids(y, mu, pw), 0)),
    pearson = (y - mu) * sqrt(pw) / sqrt(fam$variance(mu)),
    response = y - mu,
    working = (y - mu) / fam$mu.eta(fam$linkfun(mu)))
  names(r) <- NULL
  r
}

# The base class's deviance(): a smooth fit is also a "glm", whose method comes before "nce_result".
#' @rdname fitted.nce_fit
#' @export
deviance.nce_fit <- function(object, ...) deviance.nce_result(object, ...)

#' @rdname fitted.nce_fit
#' @export
df.residual.nce_fit <- function(object, ...) object$n - nce_df(object)

#' Model matrix of an nce fit
#'
#' The design of the fit: the columns of the model's terms at the data and
#' the reference points, the rows of [model.frame.nce_fit()] (data first), as
#' for glm and gam. `predict(object, type = "lpmatrix")` gives the rows of
#' the data points alone (and at `newdata`); `lpmatrix %*% coef(object)` is
#' the log density (plus offsets written in the formula).
#'
#' @inheritParams nce_vocabulary
#' @param ... Passed to [predict.nce_fit()] (e.g. `newdata`).
#' @return A matrix with one row per data and reference point and one column
#'   per coefficient.
#' @export
model.matrix.nce_fit <- function(object, ...) {
  tryCatch(stats::predict(object, object$nce_frame[object$reference$vars], type = "lpmatrix", ...),
           nce_error_unsupported = function(e) refuse("model.matrix", object))
}

update_nce_formula <- function(old, new, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (is.character(new)) new <- stats::as.formula(new, env = environment(old))
  if (!inherits(new, "formula")) {
    nce_abort(sprintf("`formula.` must be a formula such as ~ . + x, not %s.", describe_value(new)), "input",
              call = call)
  }
  if (length(new) == 3L) {
    if (!identical(new[[2L]], quote(.))) {
      nce_abort("`formula.` must be one-sided (~ . + x) or have `.` on the left: nce() models have no response",
                "input", call = call)
    }
    new <- stats::as.formula(call("~", new[[3L]]), env = environment(new))
  }
  out <- stats::update.formula(old, new)
  environment(out) <- environment(old)
  out
}

#' Compare nested nce fits
#'
#' With two or more fits of the same data, each larger fit is tested against
#' the next smaller one by a **Wald test with the NCE sandwich covariance** of
#' the larger fit: the null hypothesis is that the larger model's log density
#' lies in the smaller model's span, i.e. \eqn{C\beta = 0} for the contrasts
#' \eqn{C} that span the larger model's columns outside the smaller model's
#' (the extra coefficients when the smaller model's terms are a subset; for a
#' smooth against a linear term, the smooth's non-linear part), and the
#' statistic \eqn{(C\hat\beta)'(C V C')^{-1}(C\hat\beta)} is referred to a
#' chi-squared distribution with `rank(C)` degrees of freedom. A
#' likelihood-ratio test is not used: NCE does not maximise the likelihood, and
#' twice its log-likelihood difference has no chi-squared law. The size of the
#' test was checked by simulation under the null (`bench/anova-size.R`, 300 fits
#' of 100 points at ratio 5): a linear against a quadratic log density rejected
#' at 5% in 4.7% of the fits. For fits with smooth terms `V` is the
#' NCE-corrected Bayesian covariance `Vp` and the test uses all of the extra
#' terms' columns: it is conservative (valid, with less power) when the smooth
#' is shrunk towards the smaller model: a linear fit against `s(y, k = 6)`
#' rejected in 0.7% of the same fits.
#'
#' With one fit, each term is tested (Wald, sandwich covariance) with the
#' other terms in the model; for fits with smooth terms this is mgcv's
#' [mgcv::anova.gam()] on the fit, which uses its NCE-corrected `Vp`.
#'
#' @inheritParams nce_vocabulary
#' @param ... More fits of the same data, nested in one another (any order).
#' @param test Only `"Wald"`.
#' @return An object of class `anova` (a data frame) with the columns of
#'   [stats::anova.glm()] (`test = "Rao"`): for each fit `Resid. Df` (data
#'   points minus the fit's df), `Resid. Dev` (-2 log-likelihood, see
#'   [logLik.nce_fit()]), and from the second row on `Df` (of the test),
#'   `Deviance` (the drop in `Resid. Dev`), `Wald` (the statistic) and
#'   `Pr(>Chi)` against the previous row. Every anova() between fits of the
#'   package has this layout. With one fit, one row per term.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(400) * (exp(2) - 1)) / 2)
#' f1 <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' f2 <- update(f1, . ~ . + I(y^2) + I(y^3))
#' anova(f1, f2)
#' anova(f2)
#' @export
anova.nce_fit <- function(object, ..., test = "Wald") {
  for (f in list(...)) if (inherits(f, "nce_mlp")) refuse("anova", f)
  if (!identical(test, "Wald")) nce_abort("`test` must be \"Wald\": a likelihood-ratio test is not valid for NCE")
  fits <- c(list(object), list(...))
  is_fit <- vapply(fits, inherits, TRUE, "nce_fit")
  if (!all(is_fit)) nce_abort("all arguments of anova() must be nce fits", "input")
  # Conditional and nonlinear fits have their own anova(); here only as a later argument.
  if (any(vapply(fits, inherits, TRUE, c("nce_conditional", "nce_nls")))) {
    nce_abort("anova() compares conditional or nonlinear nce fits only with fits of their own class", "input")
  }
  if (length(fits) == 1L) return(nce_anova_terms(object))
  nce_anova_nested(fits, vapply(as.list(substitute(list(object, ...)))[-1L], function(e) deparse(e)[1L], ""))
}

nce_anova_nested <- function(fits, labels, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  n <- vapply(fits, function(f) f$n, 1)
  if (length(unique(n)) > 1L) {
    nce_abort(sprintf("the fits have different numbers of data points (%s): compare fits of the same data",
                      paste(n, collapse = ", ")), "input", call = call)
  }
  df <- vapply(fits, nce_df, 1)
  ord <- order(df)
  fits <- fits[ord]
  labels <- labels[ord]
  k <- length(fits)
  wald <- matrix(NA_real_, k, 3L)
  for (i in seq_len(k)[-1L]) wald[i, ] <- nce_wald(fits[[i - 1L]], fits[[i]], call = call)
  anova_table(fits, wald, "Wald tests of nested NCE fits (sandwich covariance of the larger fit)")
}

# The one layout of every anova() between fits: anova.glm's columns (test = "Rao"), with the
# Wald statistic of the larger fit against the smaller in place of the score statistic. `fits`
# run from small to large; `tests` has a row (Df, statistic, p-value) per fit, NA in the first.
anova_table <- function(fits, tests, heading, formulas = NULL) {
  ll <- lapply(fits, stats::logLik)
  dev <- -2 * vapply(ll, as.numeric, 0)
  tab <- data.frame(`Resid. Df` = vapply(ll, function(l) attr(l, "nobs") - attr(l, "df"), 0), `Resid. Dev` = dev,
                    Df = tests[, 1L], Deviance = c(NA, -diff(dev)), Wald = tests[, 2L], `Pr(>Chi)` = tests[, 3L],
                    check.names = FALSE, row.names = paste("Model", seq_along(fits)))
  if (is.null(formulas)) formulas <- vapply(fits, function(f) deparse1(stats::formula(f), width.cutoff = 200L), "")
  structure(tab, heading = c(paste0(heading, "\n"), paste0(rownames(tab), ": ", formulas, collapse = "\n")),
            class = c("anova", "data.frame"))
}

# Wald test that `big`'s log density lies in the span of `small`'s: returns (df, chisq, p).
# When the smaller fit's terms are terms of the larger one, the test is of the extra terms'
# coefficients (smooths are rebuilt on each fit's own reference draws, so their bases differ
# slightly between fits); otherwise of the contrasts outside the smaller model's span.
nce_wald <- function(small, big, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  cs <- nce_term_columns(small)
  cb <- nce_term_columns(big)
  beta <- stats::coef(big)
  keep <- !is.na(beta)
  if (all(names(cs) %in% names(cb))) {
    extra <- setdiff(unlist(cb[setdiff(names(cb), names(cs))]), which(!keep))
    if (!length(extra)) nce_abort("the two fits have the same terms: there is nothing to test", "input", call = call)
    cmat <- matrix(0, length(extra), sum(keep))
    cmat[cbind(seq_along(extra), match(extra, which(keep)))] <- 1
    return(nce_wald_stat(cmat, beta[keep], stats::vcov(big)[keep, keep, drop = FALSE]))
  }
  rows <- nce_wald_rows(big)
  xb <- stats::predict(big, rows, type = "lpmatrix")
  xs <- stats::predict(small, rows, type = "lpmatrix")
  xb <- xb[, keep, drop = FALSE]
  scale <- max(1, abs(xb), abs(xs))
  # Nested: the smaller model's columns lie in the larger's span.
  if (max(abs(qr.resid(qr(xb), xs))) > 1e-6 * scale) {
    nce_abort(paste("the fits are not nested: the smaller model has terms outside the larger one's span;",
                    "anova() compares nested fits"), "input", call = call)
  }
  r <- qr.resid(qr(xs), xb)
  sv <- svd(r)
  rank <- sum(sv$d > max(sv$d) * 1e-7 & sv$d > 1e-9 * scale)
  if (rank == 0L) {
    nce_abort("the two fits span the same model: there is nothing to test", "input", call = call)
  }
  cmat <- t(sv$v[, seq_len(rank), drop = FALSE])
  nce_wald_stat(cmat, beta[keep], stats::vcov(big)[keep, keep, drop = FALSE])
}

# (C b)' (C V C')^+ (C b) on chi-squared with rank(C V C') df: returns (df, chisq, p).
nce_wald_stat <- function(cmat, beta, v) {
  cb <- cmat %*% beta
  cv <- cmat %*% v %*% t(cmat)
  e <- eigen((cv + t(cv)) / 2, symmetric = TRUE)
  ok <- e$values > max(e$values) * 1e-10
  stat <- sum((crossprod(e$vectors[, ok, drop = FALSE], cb))^2 / e$values[ok])
  c(sum(ok), stat, stats::pchisq(stat, sum(ok), lower.tail = FALSE))
}

# Coefficient positions of each term, named by label (mgcv's labels for smooths), intercept
# included as "(Intercept)".
nce_term_columns <- function(fit) {
  if (inherits(fit, "nce_gam")) {
    labels <- c("(Intercept)", attr(fit$pterms, "term.labels"))
    out <- split(seq_along(fit$assign), factor(labels[fit$assign + 1L], levels = labels))
    for (sm in fit$smooth) out[[sm$label]] <- sm$first.para:sm$last.para
    return(out)
  }
  x <- nce_model_matrix(fit, data_rows(fit)[1L, , drop = FALSE])$x
  labels <- c("(Intercept)", attr(fit$terms, "term.labels"))
  split(seq_len(ncol(x)), factor(labels[attr(x, "assign") + 1L], levels = labels))
}

# Points at which to compare two models' spans: the data and up to 5000 reference points.
nce_wald_rows <- function(fit) {
  fr <- fit$nce_frame
  ref <- which(fr$.label == 0)
  if (length(ref) > 5000L) ref <- ref[round(seq(1, length(ref), length.out = 5000L))]
  fr[c(which(fr$.label == 1), ref), fit$reference$vars, drop = FALSE]
}

# One fit: each term against the others, Wald with the sandwich covariance.
nce_anova_terms <- function(object) {
  tt <- object$terms
  labels <- attr(tt, "term.labels")
  x <- stats::predict(object, type = "lpmatrix")
  assign <- attr(x, "assign")
  beta <- stats::coef(object)
  v <- stats::vcov(object)
  tab <- t(vapply(seq_along(labels), function(j) {
    cols <- which(assign == j & !is.na(beta))
    if (!length(cols)) return(c(0, NA, NA))
    vj <- v[cols, cols, drop = FALSE]
    stat <- drop(crossprod(beta[cols], solve(vj, beta[cols])))
    c(length(cols), stat, stats::pchisq(stat, length(cols), lower.tail = FALSE))
  }, numeric(3L)))
  tab <- as.data.frame(tab)
  names(tab) <- c("Df", "Wald", "Pr(>Chi)")
  rownames(tab) <- labels
  structure(tab, heading = c("Wald tests of each term (NCE sandwich covariance)\n",
                             paste("Model:", paste(deparse(object$nce_formula), collapse = " "))),
            class = c("anova", "data.frame"))
}

#' Drop each term of an nce fit in turn
#'
#' Refits the model without each term (on the same reference draws, via [update()])
#' and reports each smaller fit's `df` and AIC with the Wald test of the term
#' from [anova()] of the two fits. The same for sequential fits ([snce()],
#' [latkes()]) and conditional ones (`given =`); fits with a network term refuse it,
#' as they refuse `anova()`.
#'
#' @param object An `nce_fit` (or `nce_gam`, `snce_fit`, `latkes_fit`, `nce_conditional`).
#' @param scope Term labels to drop (all by default).
#' @inheritParams nce_vocabulary
#' @return An `anova` data frame, one row for the full fit and one per term.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' drop1(nce(~ y + I(y^2), df, ref_uniform(y = c(0, 1))))
#' @export
drop1.nce_fit <- function(object, scope, ...) {
  # Single-term deletions need a formula of additive terms (not a nonlinear log density).
  tt <- tryCatch(stats::terms(object$nce_formula), error = function(e) refuse("drop1", object))
  labels <- attr(tt, "term.labels")
  if (missing(scope)) scope <- labels
  if (!is.character(scope) || !all(scope %in% labels)) {
    nce_abort(sprintf("`scope` must be term labels of the model (%s)", paste(labels, collapse = ", ")), "input")
  }
  rows <- lapply(scope, function(term) {
    f <- stats::update.formula(object$nce_formula, stats::as.formula(paste("~ . -", term)))
    small <- stats::update(object, formula. = f)
    # The class's own two-fit test, in the one anova layout.
    w <- unlist(stats::anova(small, object)[2L, c("Df", "Wald", "Pr(>Chi)")])
    c(stats::extractAIC(small), w)
  })
  tab <- rbind(c(stats::extractAIC(object), NA, NA, NA), do.call(rbind, rows))
  tab <- as.data.frame(tab)
  names(tab) <- c("Df", "AIC", "Wald Df", "Wald", "Pr(>Chi)")
  rownames(tab) <- c("<none>", scope)
  structure(tab, heading = c("Single term deletions (refits; Wald tests with the NCE sandwich covariance)\n",
                             paste("Model:", paste(deparse(object$nce_formula), collapse = " "))),
            class = c("anova", "data.frame"))
}

#' Plot an nce fit
#'
#' For a model in one numeric variable: the fitted (normalised) density with a
#' pointwise confidence band over a histogram of the data. With several
#' variables: the fitted log density along each numeric variable, the others
#' held at the data's medians.
#'
#' @inheritParams nce_vocabulary
#' @param n_grid Grid points per curve.
#' @param level Confidence level of the band.
#' @param ... Passed to [graphics::plot()].
#' @return `x`, invisibly.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(500) * (exp(2) - 1)) / 2)
#' plot(nce(~ y, df, ref_uniform(y = c(0, 1))))
#' @export
plot.nce_fit <- function(x, n_grid = 200, level = 0.95, ...) {
  check_count(n_grid, "n_grid", min = 2, max = 1e6)
  check_probability(level, "level")
  data <- data_rows(x)
  vars <- names(data)[vapply(data, is.numeric, TRUE)]
  if (!length(vars)) nce_abort("plot() needs at least one numeric variable in the model", "input")
  z <- stats::qnorm(1 - (1 - level) / 2)
  one_d <- length(x$reference$vars) == 1L
  if (!one_d) {
    old <- graphics::par(mfrow = grDevices::n2mfrow(length(vars)))
    on.exit(graphics::par(old))
  }
  # A Bernoulli reference has mass at 0 and 1 only: points with intervals there, not curves.
  binary <- identical(x$reference$kind, "bernoulli")
  for (v in vars) {
    grid_v <- if (binary) c(0, 1) else plot_range(x$reference, data[[v]], v, n_grid)
    newdata <- as.data.frame(lapply(data, function(col) {
      # (A binary variable's median may be 0.5, outside its support: its commoner value instead.)
      at <- if (binary) as.numeric(stats::median(col) >= 0.5) else if (is.numeric(col)) stats::median(col) else col[1L]
      rep(at, length(grid_v))
    }))
    newdata[[v]] <- grid_v
    if (binary) {
      plot_binary(grid_v, predict(x, newdata, type = "log_density", se.fit = TRUE), z, v, ...)
      next
    }
    p <- predict(x, newdata, type = if (one_d) "density" else "log_density", se.fit = TRUE)
    lo <- if (one_d) exp(log(p$fit) - z * p$se.fit / p$fit) else p$fit - z * p$se.fit
    hi <- if (one_d) exp(log(p$fit) + z * p$se.fit / p$fit) else p$fit + z * p$se.fit
    # The axis from the finite values only: density 0 outside a reference's support (log density
    # -Inf, its band NaN) is drawn as a gap, not passed to plot() as an infinite limit.
    ylim <- plot_ylim(if (one_d) c(0, hi) else c(lo, hi), v)
    if (one_d) {
      h <- graphics::hist(data[[v]], plot = FALSE, breaks = "FD")
      graphics::plot(h, freq = FALSE, col = "grey90", border = "white", main = "", xlab = v,
                     ylim = c(0, max(ylim[2L], h$density)), xlim = range(grid_v), ...)
    } else {
      graphics::plot(grid_v, p$fit, type = "n", ylim = ylim, xlab = v,
                     ylab = "log density (others at medians)", ...)
    }
    ok <- is.finite(lo) & is.finite(hi)
    lo[!ok] <- hi[!ok] <- NA_real_
    graphics::polygon(c(grid_v, rev(grid_v)), c(lo, rev(hi)),
                      col = grDevices::adjustcolor("steelblue", 0.3), border = NA)
    graphics::lines(grid_v, p$fit, col = "steelblue", lwd = 2)
    graphics::rug(data[[v]], col = "grey50")
  }
  invisible(x)
}

# The y-axis limits of plot(): the range of the finite values; none finite is refused (plot()'s
# own error, "need finite 'ylim' values", says nothing of the fit).
plot_ylim <- function(values, v, call = caller_call(2L)) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  r <- suppressWarnings(range(values, finite = TRUE))
  if (!all(is.finite(r))) {
    nce_abort(sprintf(paste("the fitted density and its interval are not finite anywhere on the grid of `%s`",
                            "(outside the reference's support, or standard errors not available): nothing to plot"),
                      v), "numerical", call = call)
  }
  r
}

# Log density at 0 and 1 with its Wald interval (a binary variable, the others at their commoner values).
plot_binary <- function(at, p, z, v, ...) {
  lo <- p$fit - z * p$se.fit
  hi <- p$fit + z * p$se.fit
  graphics::plot(at, p$fit, xlim = c(-0.5, 1.5), ylim = range(lo, hi), xaxt = "n", pch = 19, col = "steelblue",
                 xlab = v, ylab = "log probability (others at their commoner values)", ...)
  graphics::axis(1, at = at)
  graphics::segments(at, lo, at, hi, col = "steelblue", lwd = 2)
}

# Grid over a uniform reference's box, else the data's range padded by 10%.
plot_range <- function(ref, values, v, n) {
  if (identical(ref$kind, "uniform")) {
    j <- match(v, ref$vars)
    return(seq(ref$lower[j], ref$upper[j], length.out = n))
  }
  r <- range(values)
  pad <- 0.1 * diff(r)
  seq(r[1] - pad, r[2] + pad, length.out = n)
}
