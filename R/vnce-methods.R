# Methods for vnce() fits.

#' @export
print.vnce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nCall:\n", paste(deparse(x$call), collapse = "\n"), "\n\n", sep = "")
  cat(vnce_description(x), "\n")
  if (inherits(x, "vnce_tgm")) {
    cat(sprintf("Precision matrix K (%d x %d), c = %s; %d off-diagonal entries above 0.1 in absolute value\n",
                x$d, x$d, format(x$c, digits = digits), nrow(tgm_edges(x, 0.1, abs = TRUE))))
  } else {
    cat("Coefficients:\n")
    print.default(format(coef(x), digits = digits), print.gap = 2L, quote = FALSE)
  }
  cat(sprintf("Objective %s; %s after %d iterations\n", format(x$objective, digits = digits + 3L),
              if (isTRUE(x$converged)) "converged" else "NOT converged", x$iterations))
  invisible(x)
}

vnce_description <- function(x) {
  est <- switch(x$method, vnce = "VNCE", em = "VNCE (EM variant)", nce = "NCE on the marginal model")
  if (inherits(x, "vnce_tgm")) {
    how <- switch(x$impute,
      latent = sprintf("missing values as latent variables, %d draws per point", x$n_latent),
      mean = "NCE after mean imputation", complete = sprintf("NCE on %d complete rows of %d", x$n, x$n_total))
    if (x$impute != "latent") est <- "NCE"
    sprintf("%s, truncated Gaussian graphical model: n = %d, d = %d, %.1f%% missing (%s), ratio = %g",
            est, x$n_total, x$d, 100 * x$missing, how, x$ratio)
  } else if (inherits(x, "vnce_mog")) {
    sprintf("%s, unnormalised mixture of Gaussians (sigma1 = %g): n = %d, ratio = %g", est, x$model$sigma1, x$n,
            x$ratio)
  } else {
    sprintf("%s, custom model with a discrete latent variable: n = %d, ratio = %g", est, x$n, x$ratio)
  }
}

#' Summarise a vnce() fit
#'
#' @inheritParams nce_vocabulary
#' @param threshold For graphical models: list the edges whose precision entry exceeds it.
#' @return A list of class `summary.vnce_fit` with the description, estimates, the largest edges
#'   (graphical models), the objective and the optimiser's report.
#' @examples
#' set.seed(1)
#' summary(vnce(rmog(300), mog_model()))
#' @export
summary.vnce_fit <- function(object, threshold = 0.1, ...) {
  out <- list(description = vnce_description(object), objective = object$objective,
              nce_objective = object$nce_objective, converged = object$converged,
              iterations = object$iterations, message = object$message)
  vc <- tryCatch(stats::vcov(object), nce_error = function(e) e)
  se <- if (inherits(vc, "error")) {
    out$se_note <- conditionMessage(vc)
    stats::setNames(rep(NA_real_, length(object$coefficients)), names(object$coefficients))
  } else {
    sqrt(diag(vc))
  }
  if (inherits(object, "vnce_tgm")) {
    ed <- tgm_edges(object, threshold)
    vars <- colnames(object$precision)
    ed$se <- unname(se[sprintf("K[%s,%s]", vars[ed$from], vars[ed$to])])
    out$edges <- ed
    out$c <- c(estimate = object$c, se = unname(se[["c"]]))
    out$normalisable <- object$normalisable
    out$noise <- data.frame(mean = object$noise$mean, sd = object$noise$sd, row.names = colnames(object$precision))
  } else {
    z <- stats::qnorm(0.975)
    cf <- object$coefficients
    out$coefficients <- cbind(Estimate = cf, `Std. Error` = se, lower95 = cf - z * se, upper95 = cf + z * se)
    out$variational <- object$variational$w
  }
  structure(c(out, summary_loglik(object)), class = "summary.vnce_fit")
}

#' @export
print.summary.vnce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat(x$description, "\n\n")
  if (!is.null(x$edges)) {
    cat(sprintf("Edges with K[i, j] above the threshold: %d (se: sandwich standard error)\n", nrow(x$edges)))
    if (nrow(x$edges)) print(utils::head(x$edges, 15L), digits = digits, row.names = FALSE)
    cat(sprintf("c (log normaliser) = %s (s.e. %s)\n", format(x$c[["estimate"]], digits = digits),
                format(x$c[["se"]], digits = digits)))
    if (!is.null(x$normalisable)) cat(sprintf("Normalisable: %s (%s)\n", x$normalisable$status, x$normalisable$why))
  } else {
    cat("Coefficients (sandwich standard errors, 95% Wald intervals):\n")
    print(x$coefficients, digits = digits)
    if (length(x$variational)) {
      cat("Variational parameters:\n")
      print(x$variational, digits = digits)
    }
  }
  if (!is.null(x$se_note)) cat("Standard errors unavailable:", x$se_note, "\n")
  cat(sprintf("\nVNCE objective %s", format(x$objective, digits = digits + 3L)))
  if (!is.null(x$nce_objective)) {
    cat(sprintf(", NCE objective at the estimate %s", format(x$nce_objective, digits = digits + 3L)))
  }
  cat(sprintf("\nOptimiser: %s after %d iterations (%s)\n", if (isTRUE(x$converged)) "converged" else "not converged",
              x$iterations, x$message))
  invisible(x)
}

#' Impute missing values or evaluate the fitted model
#'
#' For a truncated Gaussian graphical model fitted by [vnce()], `type = "impute"` fills each
#' missing value by its posterior mean given the row's observed values: under the fitted model
#' (a normal truncated to the positive orthant, by self-normalised GHK importance sampling with
#' `n_draws` draws per row) for `family = "ghk"`, under the fitted lognormal conditional for
#' `family = "lognormal"`. `type = "link"` returns the fitted log density log phi(x) = -x'Kx/2 - c
#' of complete rows (c as the log normaliser; NA for rows with missing values), `"response"` its
#' exponential, `"lpmatrix"` the matrix X with `X %*% coef(object)` the link (the model is linear
#' in (K, c)); `"log_density"` is the same as `"link"`. The model lives on the positive orthant: a
#' row with a negative or infinite observed value has density 0 (`"link"` `-Inf`, `"response"` 0),
#' whatever its missing values; `"lpmatrix"` refuses infinite values (`nce_error_data`). A
#' `newdata` with 0 rows gives an empty result. For the mixture and custom models, `"link"`
#' is the log of phi(x) summed over the latent variable and `"response"` its exponential.
#'
#' `se.fit = TRUE` gives standard errors of the link from the sandwich covariance ([vcov()]) by
#' the delta method (`"response"`: times the density). It is refused (`nce_error_unsupported`)
#' for `type = "impute"`: an imputation is a posterior mean given K, whose spread is the
#' posterior's, not an estimation error.
#'
#' @inheritParams nce_vocabulary
#' @param newdata A matrix with the fit's columns (graphical model) or a vector of points
#'   (mixture, custom); default the data of the fit.
#' @param type `"link"` (the default), `"response"`, `"impute"` (graphical model), `"lpmatrix"`
#'   (graphical model) or `"log_density"` (the same as `"link"`).
#' @param se.fit Return standard errors too (a list with `fit` and `se.fit`).
#' @param n_draws Importance-sampling draws per row for `family = "ghk"` imputation.
#' @return The completed matrix, a vector, a matrix (`"lpmatrix"`), or with `se.fit = TRUE` a list
#'   with `fit` and `se.fit`.
#' @examples
#' set.seed(2)
#' x <- rtgm(200, ring_graph(5))
#' x[sample(length(x), 100)] <- NA
#' fit <- vnce(x, tgm_model(), n_latent = 5)
#' head(predict(fit))
#' @export
predict.vnce_tgm <- function(object, newdata = NULL, type = c("link", "response", "impute", "lpmatrix", "log_density"),
                             se.fit = FALSE, n_draws = 1000, ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  if (type == "log_density") type <- "link"
  check_bool(se.fit, "se.fit")
  check_count(n_draws, "n_draws", max = 1e8)
  x <- if (is.null(newdata)) object$x else newdata
  if (is.data.frame(x)) {
    check_numeric_columns(x, names(x), "newdata")
    x <- as.matrix(x)
  }
  if (!is.matrix(x) || !is.numeric(x) || ncol(x) != object$d) {
    nce_abort(sprintf("`newdata` must be a numeric matrix with %d columns, not %s.", object$d, describe_value(x)))
  }
  storage.mode(x) <- "double"
  if (type != "impute") {
    out <- tgm_outside(x)
    if (type == "lpmatrix" && any(is.infinite(x))) {
      nce_abort(sprintf("`newdata` has infinite values (rows %s): type = \"lpmatrix\" needs finite coordinates.",
                        format_positions(which(rowSums(is.infinite(x)) > 0L))), "data")
    }
    x[is.infinite(x)] <- 1  # a finite stand-in: these rows' density is set to 0 below
    lp <- tgm_lpmatrix(object, x)
    if (type == "lpmatrix") return(lp)
    return(zero_outside(linear_prediction(object, lp, type, se.fit), out, type))
  }
  if (se.fit) {
    nce_unsupported("predict(se.fit = TRUE, type = \"impute\")", object, paste(
      "an imputation is the posterior mean of a missing value given K: its spread is the posterior's, not an",
      "estimation error; use type = \"link\" or \"response\" for standard errors"))
  }
  if (any(x <= 0, na.rm = TRUE)) nce_abort("`newdata` must be positive (the model lives on the positive orthant).")
  check_size(8 * 4 * nrow(x) * object$d + 8 * n_draws * object$d * 4, "n_draws", "imputation")
  if (identical(object$variational$family, "ghk")) {
    k_mat <- unname(object$precision)
    out <- rs(nce_ghk_impute(unname(x), k_mat, as.integer(n_draws), draw_seed(), nce_threads()))
    dimnames(out) <- dimnames(x)
    return(out)
  }
  mu <- object$variational$mu
  lam <- object$variational$prec
  lx <- log(x)
  for (i in which(rowSums(is.na(x)) > 0L)) {
    m <- is.na(x[i, ])
    o <- !m
    lam_mm <- lam[m, m, drop = FALSE]
    lam_mm_inv <- solve(lam_mm)
    mc <- mu[m] - lam_mm_inv %*% lam[m, o, drop = FALSE] %*% (lx[i, o] - mu[o])
    x[i, m] <- exp(as.vector(mc) + diag(lam_mm_inv) / 2)
  }
  x
}

# Rows outside the model's support, the closed positive orthant: a negative or infinite observed
# coordinate gives density 0 whatever the row's missing values are.
tgm_outside <- function(x) rowSums(!is.na(x) & (x < 0 | is.infinite(x))) > 0L

# Density 0 (log -Inf) at the rows `out` of a finished prediction, by zero_density_at()'s rule:
# the standard error is 0 on the response scale and NA on the log scale.
zero_outside <- function(pred, out, type) {
  if (!any(out)) return(pred)
  resp <- type == "response"
  if (!is.list(pred)) {
    pred[out] <- if (resp) 0 else -Inf
    return(pred)
  }
  pred$fit[out] <- if (resp) 0 else -Inf
  pred$se.fit[out] <- if (resp) 0 else NA_real_
  pred
}

# link / response from a linear predictor X %*% coef, with delta-method SEs from vcov().
linear_prediction <- function(object, lp, type, se_fit) {
  eta <- drop(lp %*% object$coefficients)
  names(eta) <- rownames(lp)
  fit <- if (type == "response") exp(eta) else eta
  if (!se_fit) return(fit)
  vc <- stats::vcov(object)
  se <- sqrt(pmax(rowSums((lp %*% vc) * lp), 0))
  if (type == "response") se <- se * fit
  list(fit = fit, se.fit = se)
}

#' @rdname predict.vnce_tgm
#' @export
predict.vnce_fit <- function(object, newdata = NULL, type = c("link", "response", "lpmatrix", "log_density"),
                             se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  if (type == "log_density") type <- "link"
  check_bool(se.fit, "se.fit")
  if (type == "lpmatrix") {
    nce_unsupported("predict(type = \"lpmatrix\")", object,
                    "the log density is not linear in the parameters (a log-sum over the latent variable)")
  }
  x <- if (is.null(newdata)) object$x else newdata
  if (is.data.frame(x)) {
    check_numeric_columns(x, names(x), "newdata")
    x <- as.matrix(x)
  }
  if (NROW(x) == 0L) return(if (se.fit) list(fit = numeric(0), se.fit = numeric(0)) else numeric(0))
  if (!is.numeric(x)) nce_abort(sprintf("`newdata` must be numeric, not %s.", describe_value(x)))
  if (NCOL(x) != NCOL(object$x)) {
    nce_abort(sprintf("`newdata` must have %d column(s) like the data, not %d.", NCOL(object$x), NCOL(x)))
  }
  if (inherits(object, "vnce_mog")) x <- as.vector(x)
  eta <- vnce_log_phi(object, x)
  fit <- if (type == "response") exp(eta) else eta
  if (!se.fit) return(fit)
  grad <- vnce_log_phi_grad(object, x)
  vc <- stats::vcov(object)
  se <- sqrt(pmax(rowSums((grad %*% vc) * grad), 0))
  if (type == "response") se <- se * fit
  list(fit = fit, se.fit = se)
}

# Gradient of the fitted log phi(x) (summed over the latent variable) in coef(): one row per point.
vnce_log_phi_grad <- function(fit, g) {
  if (inherits(fit, "vnce_mog")) {
    th <- fit$coefficients[["theta"]]
    s1 <- fit$model$sigma1
    a0 <- -g^2 / (2 * th^2)
    a1 <- -g^2 / (2 * s1^2)
    pi0 <- 1 / (1 + exp(a1 - a0))
    return(cbind(theta = pi0 * g^2 / th^3, c = -1))
  }
  m <- fit$model
  lp <- vapply(m$latent, function(z) call_user(m$log_phi, g, z, fit$coefficients, arg = "log_density"),
               numeric(NROW(g)))
  lp <- matrix(lp, NROW(g))
  w <- exp(lp - row_lse(lp))
  Reduce(`+`, lapply(seq_along(m$latent), function(l) {
    as.matrix(call_user(m$grad, g, m$latent[[l]], fit$coefficients, arg = "gradient")) * w[, l]
  }))
}

#' Plot a vnce() fit
#'
#' For a graphical model: the estimated off-diagonal precision entries as an image, with the true
#' graph's edges outlined when `truth` is given (and its ROC curve beside it). For the mixture and
#' custom models on one-dimensional data: a histogram of the data with the fitted density
#' phi(x; theta) (normalised by the estimated c).
#'
#' @inheritParams nce_vocabulary
#' @param truth Optional true graph or precision matrix (graphical models).
#' @param ... Passed to [graphics::image()] or [graphics::hist()].
#' @return `x`, invisibly.
#' @examples
#' set.seed(1)
#' K <- ring_graph(8)
#' fit <- vnce(rtgm(300, K), tgm_model())
#' plot(fit, truth = K)
#' @export
plot.vnce_fit <- function(x, truth = NULL, ...) {
  if (inherits(x, "vnce_tgm")) {
    k_mat <- x$precision
    off <- k_mat
    diag(off) <- NA
    if (!is.null(truth)) {
      op <- graphics::par(mfrow = c(1L, 2L))
      on.exit(graphics::par(op))
    }
    d <- ncol(k_mat)
    lim <- max(abs(off), na.rm = TRUE)
    graphics::image(seq_len(d), seq_len(d), off[, d:1], zlim = c(-lim, lim), axes = FALSE, xlab = "", ylab = "",
                    col = grDevices::hcl.colors(41L, "Blue-Red 3", rev = TRUE), main = "Estimated K (off-diagonal)",
                    ...)
    graphics::axis(1, seq_len(d), colnames(k_mat), las = 2, cex.axis = 0.7)
    graphics::axis(2, seq_len(d), rev(colnames(k_mat)), las = 1, cex.axis = 0.7)
    if (!is.null(truth)) {
      g_true <- if (!is.null(attr(truth, "graph"))) attr(truth, "graph") else truth != 0
      diag(g_true) <- FALSE
      ij <- which(g_true, arr.ind = TRUE)
      graphics::rect(ij[, 1] - 0.5, d + 1 - ij[, 2] - 0.5, ij[, 1] + 0.5, d + 1 - ij[, 2] + 0.5, border = "black")
      plot(edge_roc(x, truth))
    }
  } else {
    if (NCOL(x$x) != 1L) nce_abort("plot() draws one-dimensional fits only")
    graphics::hist(x$x, breaks = 40, freq = FALSE, main = vnce_description(x), xlab = "x", col = "grey90",
                   border = "white", ...)
    g <- seq(min(x$x), max(x$x), length.out = 400)
    graphics::lines(g, exp(vnce_log_phi(x, g)), col = "firebrick", lwd = 2)
  }
  invisible(x)
}

# Fitted log phi(x) summed over the latent variable (1-D models).
vnce_log_phi <- function(fit, g) {
  if (inherits(fit, "vnce_mog")) {
    th <- fit$coefficients[["theta"]]
    s1 <- fit$model$sigma1
    return(-fit$coefficients[["c"]] + log(exp(-g^2 / (2 * s1^2)) + exp(-g^2 / (2 * th^2))))
  }
  m <- fit$model
  lp <- vapply(m$latent, function(z) call_user(m$log_phi, g, z, fit$coefficients, arg = "log_density"),
               numeric(NROW(g)))
  row_lse(matrix(lp, NROW(g)))
}

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
#' @inheritParams nce_vocabulary
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
             objective = x$objective, converged = isTRUE(x$converged), iterations = x$iterations, ratio = x$ratio)
}

#' @rdname vnce_broom
#' @exportS3Method generics::augment
augment.vnce_fit <- function(x, data = NULL, ...) {  # nolint: object_name_linter.
  out <- stats::model.frame(x)
  out$.fitted <- unname(stats::predict(x, type = "link"))
  out
}

#' Standard errors and the glm method set for vnce() fits
#'
#' **Standard errors** are a sandwich for the VNCE objective. With the latent draws fixed (each
#' row has its own draws, made once), the objective is a sum of per-row terms over n i.i.d. data
#' rows and m i.i.d. noise rows: an M-estimator on two independent samples, so the covariance of
#' the estimate is \eqn{H^{-1} V H^{-1}}, with \eqn{H} the Hessian of the summed objective (central
#' differences of its exact gradient, in Rust) and \eqn{V} the sum, over the two samples, of the
#' centred outer products of the per-row scores (Gutmann and Hyvärinen's NCE covariance; with
#' nothing missing it is exactly the NCE sandwich). With missing values a noise row copies the
#' missingness pattern of the data row it pairs with, so the two samples are not independent:
#' \eqn{V} then sums the centred outer products of clusters, each a data row with its `ratio` noise
#' rows (the clusters are i.i.d.). The Monte Carlo error of the draws is part of each row's term
#' and is counted. Variational parameters (the lognormal family, the mixture's
#' logistic q) are estimated jointly and their uncertainty propagates; `vcov()` reports the model
#' parameters' block. For `impute = "mean"` the SEs treat the imputed values as data (they are
#' too small). A parametric bootstrap is not needed: the objective is smooth in the parameters.
#'
#' **Log-likelihood**: the data's log density under the fitted normalised model, with c as the
#' log normaliser; with `newdata` (points or rows as [predict()] takes them) the held-out log
#' density of those, `nobs` their number. Available for the truncated Gaussian graphical model when no value is missing
#' and the fitted K is normalisable (exp(-x'Kx/2) integrable on the orthant), and for the
#' mixture of Gaussians (the latent label summed out exactly). Refused, with the reason, when
#' values are missing (the marginal over the missing values has no closed form), for an improper
#' fit, and for custom models (which parameter is the log normaliser is not declared).
#'
#' Refused for every vnce fit: `formula()`/`terms()` (vnce() takes a data matrix and a model
#' specification, not a formula), `residuals()` (a density has no response), `anova()` (there is
#' no nesting between vnce specifications to test).
#'
#' @param object,formula A [vnce()] fit.
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param evaluate For `update()`: `FALSE` returns the call instead of refitting.
#' @param newdata For `logLik()`: held-out points (a vector for the mixture) or rows (a matrix
#'   with the fit's columns); `NULL` (default) for the data of the fit.
#' @param ... Unused (or, for `update()`, arguments of [vnce()] to change).
#' @return `vcov()`: the covariance matrix of `coef()`. `nobs()`: the number of data rows used.
#'   `model.frame()`: the data as a data frame. `logLik()`: a `logLik` object with df the number
#'   of model parameters (c included). `simulate()`: a list of `nsim` data sets (graphical model,
#'   from the fitted K by [rtgm()]) or a data frame with one column per simulation (mixture).
#' @name vnce_methods
#' @examples
#' set.seed(1)
#' fit <- vnce(rmog(400, theta = 4), mog_model())
#' vcov(fit)
#' confint(fit)
#' logLik(fit)
NULL

#' @rdname vnce_methods
#' @export
vcov.vnce_fit <- function(object, ...) {
  nm <- names(object$coefficients)
  v <- if (inherits(object, "vnce_tgm")) tgm_vcov(object) else if (inherits(object, "vnce_mog")) mog_vcov(object) else
    custom_vcov(object)
  dimnames(v) <- list(nm, nm)
  v
}

tgm_vcov <- function(object) {
  d <- object$d
  nt <- d * (d + 1) / 2 + 1
  rows <- nrow(object$data) + nrow(object$noise$y)
  # with nothing missing q plays no part (and the lognormal family's parameters are not identified):
  # the objective is NCE's in (K, c) for either family
  family <- if (anyNA(object$data)) object$variational$family else "ghk"
  p <- if (family == "ghk") nt else nt + 2 * d + d * (d - 1) / 2
  check_size(8 * (rows * p + 4 * p^2), "x", "the sandwich covariance", call = caller_call(2L))
  params <- list(K = unname(object$precision), c = object$c)
  if (family == "lognormal") {
    params$mu <- unname(object$variational$mu)
    params$prec <- unname(object$variational$prec)
  }
  res <- nce_vnce_tgm_vcov(list(x = object$data, y = object$noise$y, lpx = object$noise$lpx, lpy = object$noise$lpy),
                           params, list(n_latent = as.integer(object$n_latent), seed = object$seed,
                                        threads = nce_threads(), family = family))
  dg <- diag(object$precision)
  if (inherits(res, "nce_rust_error") && identical(res$code, "numerical") && min(dg) < 1e-3 * max(abs(dg))) {
    j <- which.min(dg)
    nce_abort(sprintf(paste("no standard errors: the estimate lies on the boundary of the parameter space",
                            "(K[%s,%s] = %.3g, next to 0, where the missing values' posterior ceases to exist);",
                            "the sandwich needs an interior maximum (%s)"),
                      names(dg)[j], names(dg)[j], dg[j], res$message), "numerical", call = caller_call(2L))
  }
  res <- rs(res, call = caller_call(2L))
  v <- res$vcov[seq_len(nt), seq_len(nt), drop = FALSE]
  # Rust packs K's upper triangle row by row; coef() holds it column by column.
  up <- which(upper.tri(diag(d), diag = TRUE), arr.ind = TRUE)
  key_r <- c(sprintf("%d,%d", up[, 1L], up[, 2L]), "c")
  rust <- sub("^K\\[(.*)\\]$", "\\1", res$names[seq_len(nt)])
  o <- match(key_r, rust)
  v[o, o, drop = FALSE]
}

mog_vcov <- function(object) {
  th <- object$coefficients[["theta"]]
  cc <- object$coefficients[["c"]]
  vn <- object$method != "nce"
  p <- if (vn) c(log(th), cc, object$variational$w) else c(log(th), cc)
  v <- rs(nce_vnce_mog_vcov(list(x = object$x, y = object$noise$y, sigma1 = object$model$sigma1,
                                 noise_mean = object$noise$mean, noise_sd = object$noise$sd),
                            as.double(p), if (vn) "vnce" else "nce", nce_threads()), call = caller_call(2L))
  v <- v[1:2, 1:2, drop = FALSE]
  jac <- diag(c(th, 1))                      # delta method: d theta / d log theta = theta
  jac %*% v %*% jac
}

#' @rdname vnce_methods
#' @export
nobs.vnce_fit <- function(object, ...) as.integer(object$n)

#' @rdname vnce_methods
#' @export
model.frame.vnce_fit <- function(formula, ...) {
  x <- formula$x
  out <- as.data.frame(if (is.null(dim(x))) list(x = x) else x)
  if (inherits(formula, "vnce_tgm") && is.null(colnames(x))) names(out) <- colnames(formula$precision)
  out
}

#' @rdname vnce_methods
#' @export
model.matrix.vnce_fit <- function(object, ...) {
  if (!inherits(object, "vnce_tgm")) {
    nce_unsupported("model.matrix", object, paste(
      "the model is not linear in its parameters (the mixture's log density depends on theta through a log-sum)"))
  }
  tgm_lpmatrix(object, object$x)
}

#' @rdname vnce_methods
#' @export
logLik.vnce_fit <- function(object, newdata = NULL, ...) {
  if (inherits(object, "vnce_custom")) {
    nce_unsupported("logLik", object, paste(
      "a custom model does not declare which parameter is its log normaliser, so its normalised density is unknown"))
  }
  if (inherits(object, "vnce_tgm")) {
    if (anyNA(object$x)) {
      nce_unsupported("logLik", object, paste(
        "the data have missing values, and the marginal density of a row over its missing values is an integral",
        "over the orthant with no closed form"))
    }
    if (!identical(object$normalisable$status, "proper")) {
      nce_unsupported("logLik", object, paste0("the fitted model is not known to be normalisable (",
                                                object$normalisable$why, "), so c is no log normaliser"))
    }
  }
  if (is.null(newdata)) {
    val <- sum(stats::predict(object, type = "link"))
    return(structure(val, df = length(object$coefficients), nobs = nobs(object), class = "logLik"))
  }
  # Held out: the log density at the new points (rows), as logLik.nce_fit() computes it.
  if (inherits(object, "vnce_tgm") && anyNA(newdata)) {
    nce_unsupported("logLik(newdata =)", object, paste(
      "`newdata` has missing values, and the marginal density of a row over its missing values has no closed form"))
  }
  ld <- stats::predict(object, newdata, type = "link")
  if (anyNA(ld)) nce_abort("the log density is NA at some points (NA in `newdata`?): remove them first", "input")
  structure(sum(ld), df = length(object$coefficients), nobs = length(ld), class = "logLik")
}

#' @rdname vnce_methods
#' @param nsim Number of data sets to simulate.
#' @inheritParams nce_vocabulary
#' @export
simulate.vnce_fit <- function(object, nsim = 1, seed = NULL, ...) {
  check_nsim(nsim, 8 * 2 * nrow(as.matrix(object$x)) * max(1, object$d), max = 1e6)
  if (inherits(object, "vnce_custom")) {
    nce_unsupported("simulate", object, "there is no sampler for a user-supplied unnormalised model")
  }
  if (!is.null(seed)) {
    old <- if (exists(".Random.seed", globalenv())) get(".Random.seed", globalenv()) else NULL
    set.seed(seed)
    on.exit(if (!is.null(old)) assign(".Random.seed", old, globalenv()))
  }
  n <- nrow(as.matrix(object$x))
  if (inherits(object, "vnce_tgm")) {
    if (!identical(object$normalisable$status, "proper")) {
      nce_unsupported("simulate", object, paste0("the fitted model is not known to be normalisable (",
                                                  object$normalisable$why, ")"))
    }
    d <- object$d
    check_size(8 * 2 * nsim * n * d, "nsim", "simulate()")
    k_mat <- unname(object$precision)
    return(lapply(seq_len(nsim), function(i) {
      x <- rs(nce_rtgm(as.double(n), k_mat, rep(0, d),
                       list(burnin = 100L, thin = 10L, chains = 1L, start = NULL, seed = draw_seed(),
                            threads = nce_threads(), require_pd = FALSE)))
      colnames(x) <- colnames(object$precision)
      x
    }))
  }
  check_size(8 * 2 * nsim * n, "nsim", "simulate()")
  th <- object$coefficients[["theta"]]
  out <- as.data.frame(lapply(seq_len(nsim), function(i) rmog(n, th, object$model$sigma1)))
  names(out) <- paste0("sim_", seq_len(nsim))
  out
}

#' @rdname vnce_methods
#' @export
update.vnce_fit <- function(object, ..., resample = FALSE, evaluate = TRUE) {
  args <- object$args
  new <- list(...)
  args[names(new)] <- new
  if (!evaluate) return(as.call(c(list(quote(vnce)), args)))
  rerun(object, vnce, args, resample)
}

# Features of log phi(x) = -x'Kx/2 - c that are linear in coef(): -x_j^2/2, -x_j x_k, and -1.
tgm_lpmatrix <- function(object, x) {
  d <- object$d
  up <- which(upper.tri(diag(d), diag = TRUE), arr.ind = TRUE)
  # built column-wise on the matrix itself, so 0 rows give a 0-row matrix of the right width
  lp <- -x[, up[, 1L], drop = FALSE] * x[, up[, 2L], drop = FALSE]
  on_diag <- up[, 1L] == up[, 2L]
  lp[, on_diag] <- lp[, on_diag] / 2
  lp <- cbind(lp, matrix(-1, nrow(x), 1L))
  dimnames(lp) <- list(rownames(x), names(object$coefficients))
  lp
}
