# Methods for nce_fit objects, shaped after glm's.

#' Covariance of an nce fit
#'
#' @param object An `nce_fit`.
#' @param type `"sandwich"` (default: data and reference points as two
#'   independent samples, right for NCE) or `"naive"` (inverse Hessian of the
#'   logistic regression, which treats the reference points as fixed).
#' @param ... Unused.
#' @return Covariance matrix with the coefficients' names.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' vcov(fit)
#' vcov(fit, type = "naive")
#' @export
vcov.nce_fit <- function(object, type = c("sandwich", "naive"), ...) {
  type <- match.arg(type)
  if (type == "sandwich") object$vcov else object$vcov_naive
}

#' Wald confidence intervals for an nce fit
#'
#' @param object An `nce_fit`.
#' @param parm Coefficients (names or indices); all by default.
#' @param level Confidence level.
#' @param type Covariance used, see [vcov.nce_fit()].
#' @param ... Unused.
#' @return Matrix with one row per coefficient, columns for the lower and
#'   upper limits.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' confint(nce(~ y, df, ref_uniform(y = c(0, 1))))
#' @export
confint.nce_fit <- function(object, parm, level = 0.95, type = c("sandwich", "naive"), ...) {
  call <- sys.call()
  wald_confint(object, parm, level, match.arg(type), call = call)
}

# Wald intervals from coef() and vcov(type =): the confint() of every class whose coefficients
# are asymptotically normal with the (sandwich or naive) covariance.
wald_confint <- function(object, parm, level, type, call) {
  check_probability(level, "level", call = call)
  cf <- stats::coef(object)
  se <- sqrt(pmax(diag(stats::vcov(object, type = type)), 0))
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
#' @param ... Unused.
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
  cat(sprintf("\nlog normalising constant (-(Intercept)): %s\n", format(x$log_normaliser, digits = digits)))
  cat(sprintf("%d data points, %d reference points (ratio %g)%s\n", x$n, x$m, x$ratio,
              if (x$converged) "" else "; NOT CONVERGED"))
  invisible(x)
}

#' Summarise an nce fit
#'
#' @param object An `nce_fit`.
#' @param type Covariance used for standard errors, see [vcov.nce_fit()].
#' @param ... Unused.
#' @return An object of class `summary.nce_fit`: the coefficient table
#'   (`coefficients`: estimate, standard error, z value, p value), the
#'   estimated log normalising constant with its standard error, and the
#'   fit's settings.
#' @export
summary.nce_fit <- function(object, type = c("sandwich", "naive"), ...) {
  type <- match.arg(type)
  cf <- stats::coef(object)
  se <- sqrt(pmax(diag(stats::vcov(object, type = type)), 0))
  # A standard error of 0 (the intercept of an intercept-only fit is known exactly): no test.
  z <- ifelse(!is.na(se) & se > 0, cf / se, NA_real_)
  tab <- cbind(Estimate = cf, `Std. Error` = se, `z value` = z, `Pr(>|z|)` = 2 * stats::pnorm(-abs(z)))
  structure(list(call = object$call, coefficients = tab, se_type = type,
                 log_normaliser = c(estimate = object$log_normaliser, se = unname(se[1L])),
                 n = object$n, m = object$m, ratio = object$ratio, method = object$method,
                 converged = object$converged, iterations = object$iterations,
                 reference = object$reference, loglik = stats::logLik(object)),
            class = "summary.nce_fit")
}

#' @export
print.summary.nce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nNoise-contrastive estimation (", x$method, ")\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  cat(sprintf("Coefficients (%s standard errors):\n", x$se_type))
  stats::printCoefmat(x$coefficients, digits = digits, na.print = "NA")
  cat(sprintf("\nlog normalising constant: %s (s.e. %s)\n",
              format(x$log_normaliser[["estimate"]], digits = digits),
              format(x$log_normaliser[["se"]], digits = digits)))
  cat(sprintf("%d data points, %d reference points (ratio %g), reference: %s over %s\n",
              x$n, x$m, x$ratio, x$reference$kind, paste(x$reference$vars, collapse = ", ")))
  if (!is.null(x$loglik)) {
    cat(sprintf("log-likelihood (normalised model): %s (df %s), AIC %s\n",
                format(as.numeric(x$loglik), digits = digits),
                format(attr(x$loglik, "df"), digits = digits),
                format(-2 * as.numeric(x$loglik) + 2 * attr(x$loglik, "df"), digits = digits)))
  }
  cat(sprintf("Newton iterations: %d%s\n", x$iterations, if (x$converged) "" else " (NOT CONVERGED)"))
  invisible(x)
}

#' Predict densities from an nce fit
#'
#' @param object An `nce_fit`.
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
#' @param se_type Covariance used, see [vcov.nce_fit()].
#' @param ... Unused.
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
predict.nce_fit <- function(object, newdata, type = c("log_density", "link", "response", "density",
                                                      "log_unnormalised", "lpmatrix", "terms"),
                            se.fit = FALSE, se_type = c("sandwich", "naive"), ...) {  # nolint: object_name_linter.
  type <- match.arg(type)
  check_bool(se.fit, "se.fit")
  newdata <- nce_predict_newdata(object, newdata, type)
  mm <- nce_model_matrix(object, newdata)
  x <- mm$x
  if (type == "lpmatrix") {
    if (!is.null(mm$offset)) attr(x, "model.offset") <- mm$offset  # nolint: object_name_linter.
    rownames(x) <- rownames(newdata)
    return(x)
  }
  beta <- stats::coef(object)
  v <- stats::vcov(object, type = match.arg(se_type))
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
  if (missing(newdata) || is.null(newdata)) return(data_rows(object))
  check_data_frame(newdata, "newdata", min_rows = 0L, call = call)
  missing <- setdiff(all.vars(object$nce_formula), names(newdata))
  if (length(missing)) {
    nce_abort(sprintf("`newdata` lacks column(s) %s", paste(missing, collapse = ", ")), "input", call = call)
  }
  check_reference_columns(newdata, object$reference, arg = "newdata", call = call)
  vars <- intersect(object$reference$vars, names(newdata))
  inf <- which(Reduce(`|`, lapply(newdata[vars], function(v) is.numeric(v) & is.infinite(v)), FALSE))
  if (length(inf)) {
    if (!type %in% c("log_density", "link", "response", "density")) {
      nce_abort(sprintf("`newdata` has infinite values (rows %s): type = \"%s\" needs finite coordinates.",
                        format_positions(inf), type), "data", call = call)
    }
    # A finite stand-in (the first data point's value), overwritten by nce_finish_prediction().
    for (v in vars) if (is.numeric(newdata[[v]])) newdata[[v]][is.infinite(newdata[[v]])] <- object$nce_frame[[v]][1L]
    attr(newdata, "nce_infinite") <- inf
  }
  newdata
}

# Log density to the requested scale, with 0 density (log -Inf) outside the reference's support.
nce_finish_prediction <- function(object, newdata, fit, se, type, se_fit) {
  out <- nce_outside_support(object$reference, newdata)
  out[attr(newdata, "nce_infinite")] <- TRUE
  fit[out] <- -Inf
  se[out] <- NA_real_
  if (type %in% c("density", "response")) {
    fit <- exp(fit)
    se <- fit * se
    se[out] <- 0
  }
  names(fit) <- names(se) <- rownames(newdata)
  if (se_fit) list(fit = fit, se.fit = se) else fit
}

# TRUE at complete rows where the reference's density is 0.
nce_outside_support <- function(ref, newdata) {
  out <- rep(FALSE, nrow(newdata))
  if (!all(ref$vars %in% names(newdata)) || !nrow(newdata)) return(out)
  d <- newdata[ref$vars]
  ok <- which(rows_finite(d))
  if (length(ok)) out[ok] <- ref_logq(ref, d[ok, , drop = FALSE]) == -Inf
  out
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
#' @param object An `nce_fit`.
#' @param nsim Number of data sets, a whole number >= 1.
#' @param seed As for [stats::simulate()]: `NULL` or an integer for `set.seed()`.
#' @param candidates Reference draws per simulated point (>= 1); a request
#'   that would not fit in memory is refused with `nce_error_size`.
#' @param ... Unused.
#' @return Data frame with the reference's columns and `.sim` (data set index).
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' s <- simulate(fit, nsim = 2, seed = 3)
#' tapply(s$y, s$.sim, mean)
#' @export
simulate.nce_fit <- function(object, nsim = 1, seed = NULL, candidates = 100, ...) {
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
set_sim_seed <- function(seed) {
  if (is.null(seed)) return(NULL)
  if (!exists(".Random.seed", envir = .GlobalEnv, inherits = FALSE)) stats::runif(1)
  old <- get(".Random.seed", envir = .GlobalEnv)
  set.seed(seed)
  old
}

restore_seed <- function(old) {
  if (!is.null(old)) assign(".Random.seed", old, envir = .GlobalEnv)
}
