#' Fit an unnormalised model by noise-contrastive estimation
#'
#' Estimates a model whose density is known only up to a constant,
#' \eqn{p(y) = \exp\{f_\theta(y) + \nu\}}, by contrasting the `n` data points
#' with `m = ratio * n` reference points from a known density `q`. With
#' `method = "logistic"` this is a logistic regression of the label (1 data,
#' 0 reference) on the terms of `formula` with offset
#' \eqn{\log(n/m) - \log q(u)}; the intercept \eqn{\nu} estimates minus the
#' log normalising constant (Gutmann and Hyvarinen, 2012; Barthelme and
#' Chopin, 2015). With `method = "poisson"` the Poisson-transformed
#' log-likelihood \eqn{\sum_i \{f(y_i) + \nu\} - n \int \exp\{f + \nu\}} is
#' maximised with its integral estimated by importance sampling from `q`;
#' both approach maximum likelihood as `ratio` grows.
#'
#' Standard errors default to the NCE sandwich, which treats the data and the
#' reference points as two independent samples (the asymptotic covariance of
#' Gutmann and Hyvarinen); `vcov(fit, type = "naive")` gives the inverse
#' Hessian of the logistic regression, which ignores that the reference points
#' are random and is reported only for comparison.
#'
#' @param formula One-sided formula giving \eqn{f_\theta(y)} in the
#'   reference's columns: linear terms, `I()`, `poly()`, factors, and mgcv's
#'   smooth terms `s()`, `te()`, `ti()` (any basis: `bs = "cr"`, `"cc"`, `"tp"`,
#'   `"ps"`, ...; `by =` variables), whose smoothing parameters are chosen by
#'   REML (the criterion of `mgcv::gam(method = "REML")`). An intercept (the
#'   estimate of \eqn{-\log Z}) is always included.
#' @param data Data frame of observations; it must hold the reference's
#'   columns, without NA or non-finite values.
#' @param reference Reference distribution: [ref_uniform()], [ref_normal()],
#'   [ref_fit()] or [ref_custom()].
#' @param ratio Reference points per data point (m / n), positive.
#' @param method `"logistic"` (NCE) or `"poisson"` (Poisson transform with an
#'   importance-sampling integral).
#' @param knots Knots for smooth terms, as for [mgcv::gam()].
#' @param sp Fixed smoothing parameters (one per penalty, in mgcv's order);
#'   `NULL` estimates them by REML.
#' @param weights Optional non-negative weights of the data points, evaluated
#'   in `data` (a column name or an expression, as in [stats::glm()]): each
#'   point's term in the objective and in the log-likelihood is multiplied by
#'   its weight, and the reference is scaled to the total weight (offset
#'   \eqn{\log(W/m)}, \eqn{W = \sum w_i}). Standard errors treat the rows as
#'   independent draws carrying their weights (a survey-weights sandwich), so
#'   integer weights are not frequency counts for the standard errors.
#' @param subset Optional expression evaluated in `data` selecting the rows to
#'   use (logical or row indices), as in [stats::glm()].
#' @param na.action What to do with rows that have NA or non-finite values in
#'   the reference's columns (or the weights): `NULL` or `na.fail` (default)
#'   stops with an error naming the rows; `na.omit` or `na.exclude` (functions
#'   or their names) drops them with a warning of class `nce_warning_na`
#'   saying how many and which, and stores the dropped rows in
#'   `fit$na.action`.
#' @param control Settings of the Newton iteration: [nce_control()] or a list
#'   of some of its arguments (`list(maxit = 5)`), merged into its defaults.
#' @details
#' **What the statistics mean.** The log-likelihood of a fit ([logLik.nce_fit()])
#' is the data's log density under the fitted *normalised* model,
#' \eqn{\sum_i w_i \{f_{\hat\theta}(y_i) + \hat\nu\}}, with minus the intercept
#' \eqn{\hat\nu} as the log normaliser; its `df` is the number of estimated
#' coefficients including the intercept (the total effective degrees of freedom
#' for smooth fits), so `AIC()` and `BIC()` are \eqn{-2 \log L + k\,df}.
#' Because NCE does not maximise this likelihood, a likelihood-ratio statistic
#' between nested fits has no chi-squared law; [anova.nce_fit()] tests nested
#' fits by a Wald test on the extra coefficients with the NCE sandwich
#' covariance instead. `fitted()` gives the fitted density at the data points;
#' `residuals()` the residuals of the data-versus-reference classification at
#' the data and reference points (what `mgcv::gam.check()` plots).
#'
#' **What nce() refuses** (classed errors `nce_error_*`): character or factor
#' columns where the reference generates numbers (convert them with
#' `as.numeric()`), NA or non-finite values unless `na.action` says to drop
#' them, data outside the reference's support, and a `ratio` whose reference
#' sample would not fit in memory (`nce_error_size`, checked before
#' allocating; `options(nce.max_memory = bytes)` sets the limit).
#' Columns whose names are not syntactic (spaces, `%`) are used in the formula
#' with backticks: `` ~ `log dose` ``.
#' @return An object of class `nce_fit` with methods `print`, `summary`,
#'   `coef`, `vcov`, `confint`, `predict`, `fitted`, `residuals`, `logLik`,
#'   `AIC`/`BIC`, `anova`, `plot`, `nobs`, `model.frame`, `model.matrix`,
#'   `formula`, `terms`, `simulate`, `update` and broom's `tidy`, `glance` and
#'   `augment`. With smooth terms it is also of class `nce_gam`
#'   and `gam`, with mgcv's fields (`coefficients`, `Vp`, `Ve`, `edf`, `sp`,
#'   `smooth`, ...), so mgcv's `plot.gam`, `predict.gam`, `gam.check` and
#'   `concurvity` work on it. Its `Vp` is the NCE-corrected Bayesian covariance
#'   (the sandwich plus mgcv's smoothing-bias term \eqn{H^{-1} S H^{-1}});
#'   `Vp_naive` is mgcv's \eqn{(X'WX + S)^{-1}}. It has no response: `y` is
#'   `NULL` (the classifier's labels are `model.frame(fit)$.label`).
#' @references Barthelme, S. and Chopin, N. (2015). The Poisson transform for
#'   unnormalised statistical models. Statistics and Computing 25(4).
#'   Gutmann, M. U. and Hyvarinen, A. (2012). Noise-contrastive estimation of
#'   unnormalized statistical models. JMLR 13.
#' @examples
#' # Truncated exponential on [0, 1]: p(y) proportional to exp(2 y)
#' set.seed(1)
#' y <- log1p(runif(500) * (exp(2) - 1)) / 2
#' fit <- nce(~ y, data = data.frame(y = y), reference = ref_uniform(y = c(0, 1)))
#' summary(fit)
#' confint(fit)
#' log((exp(2) - 1) / 2)   # true log normaliser; compare with summary()
#' logLik(fit)             # log density of the data under the fitted model
#' fit2 <- update(fit, . ~ . + I(y^2))
#' anova(fit, fit2)        # Wald test (sandwich) of the extra coefficient
#' @export
nce <- function(formula, data, reference, ratio = 20, method = c("logistic", "poisson"),
                knots = NULL, sp = NULL, weights = NULL, subset = NULL, na.action = NULL,
                control = nce_control()) {
  cl <- match.call()
  method <- match.arg(method)
  control <- as_nce_control(control)
  check_nce_args(formula, data, reference, ratio)
  vars <- reference$vars
  check_reference_columns(data, reference)
  env <- parent.frame()
  w <- eval(substitute(weights), data, env)
  if (!is.null(w)) {
    if (!is.numeric(w) || length(w) != nrow(data)) {
      nce_abort(sprintf("`weights` must be %d numbers (one per row of `data`), not %s.", nrow(data),
                        describe_value(w)), "input")
    }
    if (any(w < 0 | is.infinite(w), na.rm = TRUE)) nce_abort("`weights` must be finite and >= 0.", "input")
  }
  rows <- nce_subset_rows(eval(substitute(subset), data, env), nrow(data))
  d <- data[rows, vars, drop = FALSE]
  if (!is.null(w)) w <- as.double(w[rows])
  drop <- nce_handle_na(d, w, rows, na.action)
  if (length(drop$omit)) {
    d <- d[-drop$rows, , drop = FALSE]
    if (!is.null(w)) w <- w[-drop$rows]
  }
  n <- nrow(d)
  if (n == 0L) nce_abort("no rows of `data` left to fit (after `subset` and `na.action`)", "input")
  nce_check_ratio_size(n, ratio, length(vars))
  m <- as.integer(round(ratio * n))
  if (m < 1L) nce_abort(sprintf("`ratio` = %g gives no reference points for n = %d", ratio, n), "input")
  w_total <- if (is.null(w)) n else sum(w)
  if (!(w_total > 0)) nce_abort("`weights` must not all be 0", "input")

  lq_data <- ref_logq(reference, d)
  outside <- which(lq_data == -Inf)
  if (length(outside)) {
    nce_abort(sprintf(paste("%d data point(s) lie outside the reference's support (rows %s):",
                            "NCE needs q > 0 wherever the data are; widen the reference"),
                      length(outside), format_positions(outside)), "support")
  }
  u <- ref_draw(reference, m)
  lq_ref <- ref_logq(reference, u)
  if (any(lq_ref == -Inf)) {
    nce_abort("the reference's log density is -Inf at some of its own draws", "reference")
  }
  rownames(d) <- NULL
  frame <- rbind(d, u)
  label <- rep(c(1, 0), c(n, m))
  offset <- log(w_total / m) - c(lq_data, lq_ref)
  # The Poisson transform's data term is f(y) + nu, without the reference's offset.
  if (method == "poisson") offset[seq_len(n)] <- 0
  prior_w <- c(if (is.null(w)) rep(1, n) else w, rep(1, m))

  frame$.label <- label
  frame$.offset <- offset
  nce_fields <- list(n = n, m = m, ratio = m / n, method = method, reference = reference,
                     nce_formula = formula, nce_frame = frame, control = control, call = cl,
                     data_weights = w, na.action = drop$omit)
  if (has_smooths(formula)) {
    if (method != "logistic") nce_abort("smooth terms need method = \"logistic\"", "input")
    return(nce_smooth_fit(formula, frame, label, offset, knots, sp, control, nce_fields, prior_w))
  }
  if (!is.null(sp)) nce_abort("`sp` applies only to formulas with smooth terms", "input")

  tt <- stats::terms(formula)
  mf <- stats::model.frame(tt, frame, na.action = stats::na.fail)
  x <- stats::model.matrix(tt, mf)
  storage.mode(x) <- "double"
  # Offsets written in the formula (offset(2 * y)) are part of f: add them to NCE's own.
  f_offset <- stats::model.offset(mf)
  if (!is.null(f_offset)) offset <- offset + f_offset
  family <- if (method == "logistic") "binomial" else "poisson_transform"
  res <- rs(nce_fit_glm(x, label, prior_w, offset, family, as.integer(label),
                        control, nce_threads()))

  cn <- colnames(x)
  beta <- stats::setNames(res$coefficients, cn)
  beta[res$aliased] <- NA_real_
  name_cov <- function(v) {
    v[is.nan(v)] <- NA_real_
    dimnames(v) <- list(cn, cn)
    nce_clamp_cov(v)
  }
  warn_fit(res, cn, n)
  structure(c(list(
    coefficients = beta,
    vcov = name_cov(res$cov_sandwich),
    vcov_naive = name_cov(res$cov),
    log_normaliser = -unname(beta[1L]),
    converged = res$converged,
    iterations = res$iterations,
    objective = res$loglik,
    linear_predictors = res$eta,
    fitted.values = res$fitted,
    terms = stats::terms(mf), xlevels = stats::.getXlevels(tt, mf),
    contrasts = attr(x, "contrasts")
  ), nce_fields), class = "nce_fit")
}

# Aliases for non-syntactic names: c(`my var` = ".nce_v1"), empty when all are syntactic.
nce_syntactic_map <- function(vars) {
  odd <- vars[make.names(vars) != vars]
  stats::setNames(sprintf(".nce_v%d", seq_along(odd)), odd)
}

# Coefficient names and smooth labels of a fit made on aliases, with the users' names back.
nce_unalias_labels <- function(obj, var_map) {
  back <- function(x) {
    if (is.null(x)) return(x)
    for (k in rev(seq_along(var_map))) x <- gsub(var_map[[k]], paste0("`", names(var_map)[k], "`"), x, fixed = TRUE)
    x
  }
  names(obj$coefficients) <- back(names(obj$coefficients))
  for (f in c("Vp", "Ve", "Vs", "Vp_naive", "vcov", "vcov_naive")) {
    if (!is.null(obj[[f]])) dimnames(obj[[f]]) <- lapply(dimnames(obj[[f]]), back)
  }
  for (f in c("edf", "edf1", "sp")) if (!is.null(obj[[f]])) names(obj[[f]]) <- back(names(obj[[f]]))
  for (i in seq_along(obj$smooth)) obj$smooth[[i]]$label <- back(obj$smooth[[i]]$label)
  obj
}

nce_rename_columns <- function(nm, var_map) {
  i <- match(nm, names(var_map))
  nm[!is.na(i)] <- var_map[i[!is.na(i)]]
  nm
}

# The formula with each mapped variable's symbol replaced by its alias.
nce_rename_vars <- function(formula, var_map) {
  swap <- function(e) {
    if (is.name(e)) {
      k <- match(as.character(e), names(var_map))
      return(if (is.na(k)) e else as.name(var_map[[k]]))
    }
    if (is.call(e)) {
      for (i in seq_along(e)[-1L]) if (!is.null(e[[i]])) e[[i]] <- swap(e[[i]])
    }
    e
  }
  out <- formula
  out[[length(out)]] <- swap(formula[[length(formula)]])
  out
}

# Rows kept by `subset` (already evaluated in the data): logical, positive or negative indices.
nce_subset_rows <- function(r, n, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (is.null(r)) return(seq_len(n))
  if (is.logical(r) && length(r) == n) return(which(r & !is.na(r)))
  if (is.numeric(r) && all(is.finite(r)) && all(r == round(r)) && all(abs(r) <= n) &&
      (all(r > 0) || all(r < 0))) {
    return(seq_len(n)[r])
  }
  nce_abort(sprintf("`subset` must be a logical vector with one value per row of `data` (%d) or row indices, not %s.",
                    n, describe_value(r)), "input", call = call)
}

# Rows with NA or non-finite values (or NA weights): the error of old, or dropped with a warning.
nce_handle_na <- function(d, w, rows, na.action, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  bad <- which(!rows_finite(d) | (if (is.null(w)) FALSE else is.na(w)))
  action <- nce_na_action(na.action, call)
  if (!length(bad)) return(list(rows = integer(), omit = NULL))
  if (action == "na.fail") {
    nce_abort(sprintf(paste("`data` has NA or non-finite values in %d row(s) (%s);",
                            "nce() drops nothing silently: remove or impute them first,",
                            "or use na.action = na.omit"),
                      length(bad), format_positions(rows[bad])), "data", call = call)
  }
  omit <- stats::setNames(rows[bad], rownames(d)[bad])
  class(omit) <- if (action == "na.exclude") "exclude" else "omit"
  nce_warn(sprintf("dropped %d row(s) of `data` with NA or non-finite values (rows %s), as `na.action` asks",
                   length(bad), format_positions(rows[bad])), "na", call = call)
  list(rows = bad, omit = omit)
}

nce_na_action <- function(na.action, call) {
  if (is.null(na.action)) return("na.fail")
  if (is.character(na.action) && length(na.action) == 1L && na.action %in% c("na.fail", "na.omit", "na.exclude")) {
    return(na.action)
  }
  if (is.function(na.action)) {
    for (f in c("na.fail", "na.omit", "na.exclude")) {
      if (identical(na.action, get(f, envir = asNamespace("stats")))) return(f)
    }
  }
  nce_abort(sprintf(paste("`na.action` must be NULL, na.fail, na.omit or na.exclude (a function or its name),",
                          "not %s: NCE cannot fit rows with missing values (na.pass)."),
                    describe_value(na.action)), "input", call = call)
}

# Characters and factors where the reference generates numbers are refused, not coerced.
check_reference_columns <- function(data, reference, arg = "data", call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  vars <- intersect(reference$vars, names(data))
  if (inherits(reference, "nce_ref_builtin") && reference$kind %in% c("uniform", "normal")) {
    check_numeric_columns(data, vars, arg = arg, call = call)
  } else {
    chr <- vars[vapply(data[vars], is.character, TRUE)]
    if (length(chr)) {
      nce_abort(sprintf("`%s` column(s) %s are character: convert them with as.numeric() (or factor()) first.",
                        arg, paste(chr, collapse = ", ")), "input", call = call)
    }
  }
  invisible(data)
}

# n * ratio reference points: refuse before allocating when they cannot fit.
nce_check_ratio_size <- function(n, ratio, n_vars, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  m <- ratio * n
  if (m + n > .Machine$integer.max) {
    nce_abort(sprintf(paste("`ratio` = %g asks for %.3g reference points for n = %d, more than R's",
                            "limit of %d rows; lower `ratio`"), ratio, m, n, .Machine$integer.max),
              "size", call = call)
  }
  # The frame (columns, label, offset, log q), the model matrix and the fit's working vectors.
  check_size((n + m) * 8 * (3 * n_vars + 12), "ratio", "the reference sample", call = call)
}

# A covariance whose diagonal is 0 up to rounding (e.g. -5.6e-18 for an intercept-only fit,
# whose variance is 0): set such rows and columns to exactly 0.
nce_clamp_cov <- function(v) {
  if (!length(v)) return(v)
  d <- diag(v)
  scale <- max(c(1, abs(v[is.finite(v)])))
  # Rounding leaves |variance| ~ 1e-17 where it is 0; a true variance below 1e-12 would need
  # ~1e12 data points.
  tiny <- !is.na(d) & abs(d) < 1e-12 * scale
  if (any(tiny)) {
    v[tiny, ] <- 0
    v[, tiny] <- 0
  }
  v
}

# nce() with smooth terms: penalised fit with REML smoothing parameters.
nce_smooth_fit <- function(formula, frame, label, offset, knots, sp, control, nce_fields, weights = NULL) {
  # mgcv cannot parse non-syntactic column names (spaces, %): fit on syntactic aliases.
  var_map <- nce_syntactic_map(nce_fields$reference$vars)
  if (length(var_map)) {
    formula <- nce_rename_vars(formula, var_map)
    names(frame) <- nce_rename_columns(names(frame), var_map)
    if (!is.null(knots)) names(knots) <- nce_rename_columns(names(knots), var_map)
  }
  rhs <- formula[[2L]]
  f <- stats::as.formula(call("~", quote(.label), rhs), env = environment(formula))
  obj <- fit_penalised(f, frame, "binomial", offset, knots, sp, sample = label, control = control,
                       weights = weights)
  warn_fit(obj, names(obj$coefficients), nce_fields$n, aliased_value = "0 (as mgcv does)")
  if (any(obj$at_bound)) {
    # Not a problem in itself (a smooth shrunk to its null space), but worth knowing.
    obj$message <- paste(c(obj$message, sprintf("%d smoothing parameter(s) at the bound of their range",
                                                 sum(obj$at_bound))), collapse = "; ")
  }
  obj$Vp_naive <- obj$Vp
  obj$Vp <- nce_clamp_cov(nce_bayes_cov(obj))
  obj$vcov <- obj$Vp
  obj$vcov_naive <- obj$Vp_naive
  obj$log_normaliser <- -unname(obj$coefficients[1L])
  obj$objective <- obj$loglik
  obj$iterations <- obj$iter
  obj$call <- NULL
  # mgcv's gam.check() reads these: the outer (REML) iteration, and no response (see ?nce).
  obj$outer.info <- list(conv = if (obj$converged) "full convergence" else obj$message,
                         iter = obj$outer_iterations, inner_iter = obj$iter, score = obj$gcv.ubre)
  obj$y <- NULL
  obj$na.action <- NULL
  obj$nce_var_map <- var_map
  if (length(var_map)) obj <- nce_unalias_labels(obj, var_map)
  obj <- c(obj, nce_fields)
  class(obj) <- c("nce_gam", "nce_fit", "gam", "glm", "lm")
  obj
}

check_nce_args <- function(formula, data, reference, ratio, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (!inherits(formula, "formula") || length(formula) != 2L) {
    nce_abort("`formula` must be one-sided, e.g. ~ y: the response is the data/reference label nce() builds",
              "input", call = call)
  }
  if (attr(stats::terms(formula), "intercept") == 0L) {
    nce_abort("`formula` must keep its intercept: it estimates minus the log normalising constant",
              "input", call = call)
  }
  check_data_frame(data, "data", call = call)
  if (!inherits(reference, "nce_reference")) {
    nce_abort(paste("`reference` must be a reference distribution such as ref_uniform(), ref_normal(), ref_fit()",
                    "or ref_custom()"), "input", call = call)
  }
  check_number(ratio, "ratio", min = 0, exclusive_min = TRUE, call = call)
  not_ref <- setdiff(all.vars(formula), reference$vars)
  if (length(not_ref)) {
    nce_abort(sprintf("`formula` uses %s, which the reference does not generate (it has %s)",
                      paste(not_ref, collapse = ", "), paste(reference$vars, collapse = ", ")), "input", call = call)
  }
  not_data <- setdiff(reference$vars, names(data))
  if (length(not_data)) {
    nce_abort(sprintf("`data` lacks the reference's column(s) %s", paste(not_data, collapse = ", ")),
              "input", call = call)
  }
  invisible(TRUE)
}

# Classed warnings about the fit; never silent.
warn_fit <- function(res, names, n, aliased_value = "NA") {
  if (!res$converged) {
    nce_warn(sprintf("the fit did not converge: %s; see nce_control()", res$message), "convergence", call = NULL)
  }
  if (res$n_certain > 0L) {
    nce_warn(sprintf(paste("fitted probabilities are numerically 1 at %d of %d data points: the estimates",
                           "may be running off to infinity (separation), usually because the reference",
                           "puts almost no mass where the data are"), res$n_certain, n), "separation", call = NULL)
  }
  if (any(res$aliased)) {
    nce_warn(sprintf("%d coefficient(s) not estimable (aliased with others), set to %s: %s",
                     sum(res$aliased), aliased_value, paste(names[res$aliased], collapse = ", ")),
             "rank", call = NULL)
  }
}

# Covariance of a penalised NCE fit: the NCE sandwich plus mgcv's smoothing-bias term
# Vp - Ve = H^{-1} S H^{-1}; the plain sandwich when nothing is penalised.
nce_bayes_cov <- function(fit) fit$Vs + fit$Vp - fit$Ve
