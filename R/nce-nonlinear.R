# nce() for models nonlinear in their parameters (`start =` or `model =`): set-up in R, fit in Rust.

nce_nonlinear <- function(formula, data, reference, ratio, method, start, model, gradient, n_starts, control,
                          call, env) {
  method <- match_choice(method, c("logistic", "poisson"))
  check_data_frame(data, call = call)
  if (!inherits(reference, "nce_reference")) {
    nce_abort(paste("`reference` must be a reference distribution such as ref_uniform(), ref_normal(), ref_fit()",
                    "or ref_custom()"), "input", call)
  }
  check_number(ratio, min = 0, exclusive_min = TRUE, call = call)
  check_nsim(n_starts, arg = "n_starts", what = "random starts (each a full fit)", max = 1000, call = call)
  check_function(gradient, allow_null = TRUE, call = call)
  vars <- reference$vars
  not_data <- setdiff(vars, names(data))
  if (length(not_data)) {
    nce_abort(sprintf("`data` lacks the reference's column(s) %s", paste(not_data, collapse = ", ")), "input", call)
  }
  has_formula <- !missing(formula) && !is.null(formula)
  spec <- nl_resolve_model(if (has_formula) formula, model, start, gradient, data, vars, call)
  model <- spec$model
  start <- spec$start
  is_ica <- spec$is_ica

  d <- data[vars]
  bad <- which(!rows_finite(d))
  if (length(bad)) {
    nce_abort(sprintf(paste("`data` has NA or non-finite values in %d row(s) (%s);",
                            "nce() drops nothing silently: remove or impute them first"),
                      length(bad), format_positions(bad)), "data", call)
  }
  n <- nrow(d)
  p <- length(start)
  # Same draws, in the same order, as the linear nce(): a linear model written as a formula gets
  # the same reference sample under the same seed.
  con <- contrast(d, reference, ratio, method = method, copies = 1, width = p + 4, call = call)
  m <- con$n_ref
  frame <- con$rows
  label <- con$y
  offset <- con$offset
  lq <- c(con$lq_data, con$lq_ref)

  # Check the model at the start: finite values and a gradient of the right shape.
  eval_start <- nl_evaluate(model, start, frame, call)
  if (model$gradient_source == "finite differences") {
    nce_warn(paste("no symbolic or user gradient: using central finite differences (slower and less accurate);",
                   "give `gradient = function(theta, data)`"), "finite_difference", call)
  }
  nu0 <- nl_intercept_start(eval_start$f, lq, label)
  ctrl <- nl_rust_control(control)
  # Fisher-scoring polish needs a smooth objective; |b'x| is not. (The Rust ICA fit smooths |.| and
  # preconditions L-BFGS with the Fisher information instead; see ?ica_model.)
  if (is_ica) ctrl$polish <- 0

  if (is_ica) {
    x <- as.matrix(frame[model$vars])
    storage.mode(x) <- "double"
    given <- if (is.null(attr(start, "given"))) matrix(0, p + 1L, 0L) else matrix(c(nu0, start), ncol = 1L)
    n_random <- n_starts - ncol(given)
    res <- rs(nce_nonlinear_fit_ica(x, label, offset, given, ctrl,
                                    list(method = method, n_random = as.integer(n_random), seed = draw_seed(),
                                         threads = nce_threads())), call = call)
  } else {
    starts <- nl_random_starts(start, n_starts)
    starts_full <- rbind(vapply(seq_len(ncol(starts)), function(k) {
      if (k == 1L) return(nu0)
      th <- stats::setNames(starts[, k], names(start))
      f <- tryCatch(nl_f(model, th, frame), error = function(e) NA_real_)
      if (all(is.finite(f))) nl_intercept_start(f, lq, label) else nu0
    }, numeric(1)), starts)
    state <- new.env()
    callback <- nl_callback(model, names(start), frame, state)
    res <- nce_nonlinear_fit_r(callback, p, label, offset, method, starts_full, ctrl)
    if (inherits(res, "nce_rust_error") && isTRUE(state$interrupted)) nce_interrupt()
    if (inherits(res, "nce_rust_error") && !is.null(state$error)) {
      nce_abort(sprintf("the model failed during the fit: %s", conditionMessage(state$error)), "model", call)
    }
    res <- rs(res, call = call)
  }
  nl_new_fit(res, start, model, formula = if (has_formula) formula else NULL, frame, label, offset, lq,
             n, m, method, reference, call, env, control, n_starts)
}

# Settings for the Rust fit from nce_control(): L-BFGS iterations and Fisher-scoring polish.
nl_rust_control <- function(control) {
  list(maxit = max(2000, 20 * control$maxit), gtol = 1e-9, polish = 20)
}

nl_check_start <- function(start, data, vars, call) {
  if (!is.numeric(start) || length(start) < 1L || is.null(names(start)) || any(names(start) == "") ||
      anyDuplicated(names(start))) {
    nce_abort("`start` must be a named numeric vector of parameter values, e.g. c(b = 1, s = 0)", "input", call)
  }
  if (any(!is.finite(start))) {
    nce_abort(sprintf("`start` has non-finite values for %s", paste(names(start)[!is.finite(start)], collapse = ", ")),
              "input", call)
  }
  clash <- intersect(names(start), c(vars, names(data)))
  if (length(clash)) {
    nce_abort(sprintf("parameter(s) %s in `start` are also column(s) of the data: rename the parameter(s)",
                      paste(clash, collapse = ", ")), "input", call)
  }
  if ("(Intercept)" %in% names(start)) nce_abort("`start` must not name \"(Intercept)\": nce() adds it", "input", call)
  stats::setNames(as.double(start), names(start))
}

nl_ica_start <- function(start, d, call) {
  out <- stats::setNames(rep(0, d * d), ica_names(d))
  if (is.null(start)) return(out)
  if (!is.matrix(start) || !is.numeric(start) || !all(dim(start) == d) || any(!is.finite(start))) {
    nce_abort(sprintf("`start` for ica_model() must be a %d x %d matrix B of finite values", d, d), "input", call)
  }
  out[] <- as.double(t(start))
  attr(out, "given") <- TRUE
  out
}

# Starts 2, ..., n_starts: jitter around `start` (R's RNG), scale max(|start|/2, 0.1).
nl_random_starts <- function(start, n_starts) {
  k <- length(start)
  out <- matrix(start, k, n_starts)
  if (n_starts > 1L) {
    sd <- pmax(abs(start) / 2, 0.1)
    out[, -1L] <- start + sd * matrix(stats::rnorm(k * (n_starts - 1L)), k)
  }
  rownames(out) <- names(start)
  out
}

# Intercept start: minus the importance-sampling estimate of log Z from the reference rows.
nl_intercept_start <- function(f, lq, label) {
  -log_mean_exp(f[label == 0] - lq[label == 0])
}

nl_f <- function(model, theta, data) as.double(model$log_f(theta, data))

# f and its gradient on all rows; classed errors naming the cause.
nl_evaluate <- function(model, theta, frame, call) {
  nr <- nrow(frame)
  # Non-finite values are reported below as a classed error; R's own "NaNs produced" adds nothing.
  f <- tryCatch(suppressWarnings(model$log_f(theta, frame)), error = function(e) {
    nce_abort(sprintf("the model's log density fails at `start`: %s", conditionMessage(e)), "model", call)
  })
  if (!is.numeric(f) || length(f) != nr) {
    nce_abort(sprintf("the model's log density must return %d numbers (one per data and reference row), got %s",
                      nr, describe_value(f)), "model", call)
  }
  bad <- which(!is.finite(f))
  if (length(bad)) {
    nce_abort(sprintf("the model's log density is NA/NaN/Inf at `start` in %d row(s) (%s): choose another start",
                      length(bad), format_positions(bad)), "model", call)
  }
  g <- nl_gradient(model, theta, frame, f)
  p <- length(theta)
  if (!is.numeric(g) || !is.matrix(g) || nrow(g) != nr || ncol(g) != p) {
    dims <- if (is.matrix(g)) sprintf("a %d x %d matrix", nrow(g), ncol(g)) else describe_value(g)
    nce_abort(sprintf("the gradient must be a %d x %d matrix (rows x parameters), got %s", nr, p, dims),
              "gradient", call)
  }
  if (any(!is.finite(g))) nce_abort("the gradient is NA/NaN/Inf at `start`", "gradient", call)
  list(f = as.double(f), g = g)
}

nl_gradient <- function(model, theta, frame, f = NULL) {
  if (!is.null(model$gradient)) {
    g <- model$gradient(theta, frame)
    if (is.numeric(g) && is.null(dim(g)) && length(theta) == 1L) g <- matrix(g, ncol = 1L)
    return(g)
  }
  if (is.null(f)) f <- nl_f(model, theta, frame)
  vapply(seq_along(theta), function(k) {
    h <- 1e-5 * max(abs(theta[[k]]), 1)
    up <- theta
    dn <- theta
    up[k] <- up[k] + h
    dn[k] <- dn[k] - h
    (nl_f(model, up, frame) - nl_f(model, dn, frame)) / (2 * h)
  }, numeric(length(f)))
}

# The function Rust calls once per iterate: list(f, g), or NULL with the error kept in `state`.
nl_callback <- function(model, pnames, frame, state) {
  nr <- nrow(frame)
  p <- length(pnames)
  function(par) {
    theta <- stats::setNames(par, pnames)
    tryCatch({
      f <- as.double(model$log_f(theta, frame))
      g <- nl_gradient(model, theta, frame, f)
      if (length(f) != nr || !is.matrix(g) || nrow(g) != nr || ncol(g) != p) {
        stop(sprintf("log density of length %d or gradient of shape %s (need %d and %d x %d)", length(f),
                     paste(dim(g), collapse = " x "), nr, nr, p))
      }
      storage.mode(g) <- "double"
      list(f = f, g = g)
    }, error = function(e) {
      state$error <- e
      NULL
    }, interrupt = function(i) {
      # Ctrl-C in the user's function: the fit stops and the interrupt goes on (nce_interrupt()).
      state$interrupted <- TRUE
      NULL
    })
  }
}

nl_new_fit <- function(res, start, model, formula, frame, label, offset, lq, n, m, method, reference, call, env,
                       control, n_starts) {
  cn <- c("(Intercept)", names(start))
  beta <- stats::setNames(res$coefficients, cn)
  name_cov <- function(v) {
    v[is.nan(v)] <- NA_real_
    dimnames(v) <- list(cn, cn)
    v
  }
  starts <- res$starts
  dimnames(starts) <- list(cn, NULL)
  start_table <- data.frame(start = seq_len(ncol(starts)), objective = -res$values, converged = res$converged,
                            iterations = res$iterations, evaluations = res$evaluations, message = res$messages)
  best <- res$best
  ok <- is.finite(res$values)
  spread <- if (ncol(starts) > 1L) {
    c(objective = max(res$values[ok]) - min(res$values[ok]),
      max_parameter_distance = max(abs(starts[, ok, drop = FALSE] - starts[, best])))
  } else {
    c(objective = 0, max_parameter_distance = 0)
  }
  fit <- new_nce_fit(
    "nce_nls", coefficients = beta, vcov = name_cov(res$cov_sandwich), vcov_naive = name_cov(res$cov),
    converged = res$converged[best], message = res$messages[best], iterations = res$iterations[best],
    objective = res$loglik, linear.predictors = res$eta, n = n, m = m, reference = reference, method = method,
    formula = formula, frame = cbind(frame, .label = label, .offset = offset), control = control, call = call,
    env = env,
    nls = list(model = model, log_f = res$f, log_q = lq, starts = starts, start_table = start_table, best_start = best,
               spread = spread, n_starts = n_starts))
  if (!fit$converged) {
    nce_warn(sprintf("the nonlinear NCE fit did not converge: %s; see nce_control(maxit =)", fit$message),
             "convergence", call = NULL)
  }
  if (anyNA(diag(fit$vcov))) {
    nce_warn("the Fisher information is singular at the estimate: standard errors are NA (parameters not identified?)",
             "rank", call = NULL)
  }
  fit
}

# The model of a nonlinear fit, from `formula` and `start` or from `model` (nce_model() or
# ica_model()), with its start checked and the gradient the user gave.
nl_resolve_model <- function(formula, model, start, gradient, data, vars, call) {
  has_formula <- !is.null(formula)
  if (!is.null(model) && has_formula) {
    nce_abort("give either `formula` (with `start`) or `model`, not both", "input", call)
  }
  if (is.null(model) && !has_formula) {
    nce_abort("nonlinear nce() needs `formula` and `start`, or `model`", "input", call)
  }
  is_ica <- !is.null(model) && identical(model$rust, "ica")
  if (!is.null(model) && !inherits(model, "nce_model")) {
    nce_abort("`model` must be built by nce_model() or ica_model()", "input", call)
  }
  if (is_ica) {
    ica_vars <- if (is.null(model$vars)) vars else model$vars
    if (!all(ica_vars %in% vars)) {
      nce_abort("ica_model(vars =) must name columns the reference generates", "input", call)
    }
    model$vars <- ica_vars
    start <- nl_ica_start(start, length(ica_vars), call)
  } else {
    start <- nl_check_start(start, data, vars, call)
  }
  if (has_formula) {
    model <- nl_formula_model(formula, start, vars, gradient, call)
  } else if (!is.null(gradient)) {
    model$gradient <- gradient
    model$gradient_source <- "user function"
  }
  list(model = model, start = start, is_ica = is_ica)
}
