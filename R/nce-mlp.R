# Neural-network energies: the mlp() term of nce() formulas, its training settings, and the worker
# that trains a network by NCE in Rust (also used by the neural ratio classifiers). The methods of
# the fit (class nce_mlp) are in mlp-methods.R.

#' A neural-network term in an nce() formula
#'
#' `mlp(x1, x2, ...)` in the formula of [nce()] adds a multilayer perceptron \eqn{g(x)} of the
#' named variables to the log density, \eqn{f(x) = g(x) + \text{other terms}}: the deep
#' energy-based model of Gutmann's course notes and of the NCE literature, fitted by NCE
#' (logistic regression of data against reference points, with the reference's log density as
#' offset and a free log normaliser). The network has dense hidden layers of `hidden` units with
#' activation `activation`, and one linear output unit; its inputs are the variables
#' standardised by the data's means and standard deviations. The network is trained in Rust by
#' minibatch Adam, as [nce_mlp_control()] says; the model's parametric terms (the intercept,
#' whose estimate is minus the log normalising constant, and any other terms written beside
#' `mlp()`) are trained with it and then refitted by exact NCE logistic regression with the
#' network held fixed. Smooth terms (`s()`, `te()`, `ti()`) of variables outside the network are
#' fitted beside it by backfitting: the network is trained with the smooth model as offset, the
#' smooth model refitted by REML with the network as offset, for up to `backfit` rounds of
#' [nce_mlp_control()], keeping the round with the lowest held-out loss; on a ring times a
#' Beta density that beat a network over all three variables (`bench/README.md`).
#'
#' The network's output is centred to mean 0 over the data points (its
#' constant is not identified apart from the intercept), so minus the intercept is the log
#' normalising constant of \eqn{\exp\{g(x) + \text{other terms}\}} with that centred \eqn{g};
#' the fit also reports an importance-sampling estimate of the same constant from the reference
#' points (`log_normaliser_is`) as a check.
#'
#' Outside a formula `mlp()` only returns the term's specification.
#'
#' @param ... The variables of the network, unquoted column names (at least one).
#' @param hidden Units of each hidden layer, e.g. `c(64, 64)` for two layers of 64.
#' @param activation `"relu"` (default: the most accurate and fastest on the targets of
#'   [nce_mlp_control()]), `"softplus"` or `"tanh"`. Softplus and tanh give smooth log densities,
#'   ReLU piecewise-linear ones.
#' @return An object of class `nce_mlp_term`.
#' @seealso [nce()], [nce_mlp_control()], [predict.nce_mlp()], [simulate.nce_mlp()].
#' @examples
#' mlp(x1, x2, hidden = c(32, 32))
#' @export
mlp <- function(..., hidden = c(64, 64), activation = c("relu", "softplus", "tanh")) {
  vars <- vapply(as.list(substitute(list(...)))[-1L], function(e) {
    if (!is.name(e)) nce_abort(sprintf("mlp() takes variable names, not `%s`", deparse(e)), "input")
    as.character(e)
  }, "")
  if (!length(vars)) nce_abort("mlp() needs at least one variable", "input")
  if (anyDuplicated(vars)) nce_abort("mlp() names a variable twice", "input")
  mlp_spec(vars, hidden, activation)
}

# The checked specification of a network on `vars` (the classifiers name their inputs later).
mlp_spec <- function(vars, hidden = c(64, 64), activation = c("relu", "softplus", "tanh")) {
  if (!is.numeric(hidden) || !length(hidden) || anyNA(hidden) || any(hidden < 1 | hidden != round(hidden)) ||
        any(hidden > 4096)) {
    nce_abort(sprintf("`hidden` must be whole numbers of units from 1 to 4096 per layer, not %s",
                      describe_value(hidden)), "input")
  }
  activation <- check_choice(activation, c("relu", "softplus", "tanh"), "activation")
  structure(list(vars = vars, hidden = as.double(hidden), activation = activation), class = "nce_mlp_term")
}

#' @export
print.nce_mlp_term <- function(x, ...) {
  cat(sprintf("mlp(%s): %s network, hidden layers %s\n", paste(x$vars, collapse = ", "), x$activation,
              paste(x$hidden, collapse = "-")))
  invisible(x)
}

#' Training settings of neural-network terms
#'
#' Settings of the minibatch Adam training of an [mlp()] term in [nce()] (pass as `control`), and
#' of the neural classifiers of [ratio_amortised()] and [design_eig()]. Each epoch passes once over
#' the training rows in random minibatches. A share `held_out` of the data points and of the
#' reference points is kept out of training; training stops when their NCE loss has not improved
#' for `patience` epochs (or after `max_epochs`), and the parameters of the best epoch are kept.
#' The step is halved each time the held-out loss has not improved for `step_patience` epochs.
#' With `n_starts > 1` the network is trained from several random starts and the start with the
#' lowest held-out loss is kept.
#'
#' The defaults (with `mlp()`'s ReLU layers of 64 and 64 units) were chosen on the 2-D targets
#' of `bench/deep-ebm.R` (a ring and 8 Gaussians), where the network's log density was as close
#' to the truth as a tensor-product smooth or closer (`bench/README.md`).
#'
#' @param batch_size Rows per minibatch.
#' @param max_epochs Most passes over the training rows per start.
#' @param step Adam's initial step size.
#' @param weight_decay Decoupled weight decay (AdamW) on the network's weights (not its biases).
#' @param held_out Share of the data and of the reference points held out for early stopping,
#'   in \[0, 0.5\]; 0 trains on all rows and stops on the training loss.
#' @param patience Epochs without a better held-out loss before training stops.
#' @param step_patience Epochs without a better held-out loss before the step is halved.
#' @param n_starts Random starts.
#' @param backfit,backfit_tol With smooth terms beside `mlp()`: the most rounds of backfitting
#'   (train the network with the smooth terms fixed, then refit the smooth terms by REML with the
#'   network fixed), and the least improvement of the held-out NCE loss for another round; the
#'   round with the lowest held-out loss is kept. Unused otherwise.
#' @return A list of class `nce_mlp_control`.
#' @examples
#' nce_mlp_control(max_epochs = 50, n_starts = 3)
#' @export
nce_mlp_control <- function(batch_size = 256L, max_epochs = 200L, step = 2e-3, weight_decay = 1e-4, held_out = 0.1,
                            patience = 30L, step_patience = 10L, n_starts = 1L, backfit = 3L,
                            backfit_tol = 1e-4) {
  check_count(batch_size, "batch_size")
  check_count(max_epochs, "max_epochs")
  check_number(step, "step", min = 0, exclusive_min = TRUE, max = 1)
  check_number(weight_decay, "weight_decay", min = 0, max = 1)
  check_number(held_out, "held_out", min = 0, max = 0.5)
  check_count(patience, "patience")
  check_count(step_patience, "step_patience")
  check_count(n_starts, "n_starts", max = 100)
  check_count(backfit, "backfit", max = 100)
  check_number(backfit_tol, "backfit_tol", min = 0)
  structure(list(batch_size = as.double(batch_size), max_epochs = as.double(max_epochs), step = as.double(step),
                 weight_decay = as.double(weight_decay), held_out = as.double(held_out),
                 patience = as.double(patience), step_patience = as.double(step_patience),
                 n_starts = as.double(n_starts), backfit = as.double(backfit),
                 backfit_tol = as.double(backfit_tol)), class = c("nce_mlp_control", "list"))
}

# TRUE when the formula has an mlp() term.
has_mlp <- function(formula) "mlp" %in% all.names(formula)

# The variables of a formula's smooth terms.
smooth_vars <- function(formula) {
  unique(unlist(lapply(mgcv::interpret.gam(formula)$smooth.spec, function(s) s$term)))
}

# The variables a formula models: all.vars() without the settings of mlp() terms (its named
# arguments, `hidden = h`, are R values, not columns).
model_vars <- function(formula) {
  if (!has_mlp(formula)) return(all.vars(formula))
  strip <- function(e) {
    if (!is.call(e)) return(e)
    if (identical(e[[1L]], as.name("mlp"))) {
      nm <- names(e)
      if (!is.null(nm)) e <- e[nm == ""]
      return(e)
    }
    for (i in seq_along(e)[-1L]) if (!is.null(e[[i]])) e[[i]] <- strip(e[[i]])
    e
  }
  all.vars(strip(formula))
}

# Which term labels are an mlp() call.
is_mlp_label <- function(labels) {
  vapply(labels, function(l) {
    e <- str2lang(l)
    is.call(e) && identical(e[[1L]], as.name("mlp"))
  }, TRUE, USE.NAMES = FALSE)
}

# The formula split into its one mlp() term (evaluated to its specification) and the rest (a
# formula of the other terms, with the intercept).
split_mlp_formula <- function(formula, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  tt <- stats::terms(formula, specials = "mlp")
  labels <- attr(tt, "term.labels")
  is_mlp <- is_mlp_label(labels)
  if (sum(is_mlp) != 1L || sum(vapply(labels, function(l) "mlp" %in% all.names(str2lang(l)), TRUE)) != 1L) {
    nce_abort(paste("`formula` must have exactly one mlp() term, added to the other terms (not inside an",
                    "interaction or a function): ~ mlp(x1, x2) + z"), "input", call = call)
  }
  spec <- tryCatch(eval(str2lang(labels[is_mlp]), list(mlp = mlp), environment(formula)),
                   nce_error = function(e) nce_abort(conditionMessage(e), "input", call = call))
  rest <- labels[!is_mlp]
  rest_formula <- if (length(rest)) stats::reformulate(rest, env = environment(formula)) else stats::as.formula(~1)
  environment(rest_formula) <- environment(formula)
  smooth <- has_smooths(rest_formula)
  if (smooth) {
    # A smooth of a network input is confounded with the network: backfitting would split the
    # effect between them arbitrarily.
    shared <- intersect(smooth_vars(rest_formula), spec$vars)
    if (length(shared)) {
      nce_abort(sprintf(paste("%s %s both in mlp() and in a smooth term: a smooth of a network input is not",
                              "identifiable beside the network; keep each variable in one of them"),
                        paste(shared, collapse = ", "), if (length(shared) > 1L) "are" else "is"),
                "input", call = call)
    }
  }
  list(spec = spec, rest = rest_formula, smooth = smooth)
}

# The network's inputs, standardised: columns `vars` of `frame` minus `center`, over `scale`;
# or, with `quantiles` (a list of each input's sorted knots), mapped to normal scores.
mlp_inputs <- function(frame, vars, center, scale, quantiles = NULL) {
  x <- as.matrix(frame[vars])
  storage.mode(x) <- "double"
  if (!is.null(quantiles)) {
    for (j in seq_along(vars)) x[, j] <- normal_scores(x[, j], quantiles[[j]])
    return(x)
  }
  sweep(sweep(x, 2L, center, "-"), 2L, scale, "/")
}

# Knots of the normal-score map of `v`: its quantiles at `k` probabilities (ties removed).
normal_score_knots <- function(v, k = 257L) {
  p <- (seq_len(k) - 0.5) / k
  q <- stats::quantile(v, p, names = FALSE, type = 8)
  keep <- !duplicated(q)
  list(x = q[keep], z = stats::qnorm(p[keep]))
}

# The piecewise-linear normal-score map through the knots, continued linearly beyond them with
# the end segments' slopes (a monotone map: the classifier's log ratio does not depend on how
# its inputs are monotonely transformed, but heavy tails no longer dominate the standardisation).
normal_scores <- function(v, kn) {
  n <- length(kn$x)
  if (n < 2L) return(v - kn$x[1L])
  out <- stats::approx(kn$x, kn$z, v, rule = 2, ties = "ordered")$y
  lo <- which(v < kn$x[1L])
  hi <- which(v > kn$x[n])
  out[lo] <- kn$z[1L] + (v[lo] - kn$x[1L]) * (kn$z[2L] - kn$z[1L]) / (kn$x[2L] - kn$x[1L])
  out[hi] <- kn$z[n] + (v[hi] - kn$x[n]) * (kn$z[n] - kn$z[n - 1L]) / (kn$x[n] - kn$x[n - 1L])
  out
}

# The worker: train a network g on standardised inputs `x` (rows x inputs) with the other columns
# `z` (the intercept among them) by the NCE logistic loss of `y` (1 data, 0 reference) on
# g(x) + z'beta + offset, as `control` (nce_mlp_control()) says. `beta_start` starts the other
# columns, `warm_start` (if given) the network's parameters. `held`: the rows held out for early
# stopping, by default held_out_rows(). Returns the network (its settings and parameters), beta,
# and the training record.
train_mlp <- function(x, z, y, weights, offset, spec, control, beta_start, held = NULL, warm_start = NULL,
                      call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  train_mlps(x, z, y, weights, offset, spec, control, beta_start, 1L, held, warm_start, call)[[1L]]
}

# `n_networks` networks trained as train_mlp() trains one, each from its own start and (unless
# `held` is given) its own held-out rows, side by side in one pool of threads (a network per
# thread beats one network's small products split over threads; bench/README.md). R's random
# numbers are drawn network by network (held-out rows, then seed), as one train_mlp() call after
# another would draw them. Returns a list of train_mlp() results.
train_mlps <- function(x, z, y, weights, offset, spec, control, beta_start, n_networks, held = NULL,
                       warm_start = NULL, call = caller_call()) {
  call <- call
  n <- nrow(x)
  n_params <- mlp_n_params(ncol(x), spec$hidden)
  check_training_work(control$max_epochs * control$n_starts * n_networks, n, n_params, call)
  # Each session holds a copy of the rows besides R's.
  check_size(16 * n_networks * (as.double(n) * (ncol(x) + ncol(z) + 4) + 8 * n_params), "hidden",
             "the network's training", call = call)
  held_k <- vector("list", n_networks)
  sessions <- vector("list", n_networks)
  for (k in seq_len(n_networks)) {
    held_k[[k]] <- held %||% held_out_rows(y, control, call)
    settings <- list(inputs = ncol(x), hidden = spec$hidden, activation = spec$activation,
                     batch = control$batch_size, max_epochs = control$max_epochs, step = control$step,
                     weight_decay = control$weight_decay, step_patience = control$step_patience,
                     patience = control$patience, n_starts = control$n_starts, seed = draw_seed(),
                     beta_start = as.double(beta_start), warm_start = warm_start)
    sessions[[k]] <- rs(nce_mlp_session(x, z, list(y = as.double(y), weights = as.double(weights),
                                                   offset = as.double(offset), held_out = held_k[[k]]), settings),
                        call = call)
  }
  run_sessions(sessions, nce_mlp_sessions_run, control$max_epochs * control$n_starts, call, function(k, r) {
    sprintf("%sstart %d, epoch %d: held-out loss %.5f", if (n_networks > 1L) sprintf("network %d, ", k) else "",
            r[1L], r[2L], r[4L])
  })
  lapply(seq_len(n_networks), function(k) {
    res <- rs(nce_mlp_session_result(sessions[[k]]), call = call)
    history <- as.data.frame(res$history)
    names(history) <- c("start", "epoch", "train_loss", "held_out_loss", "step")
    starts <- data.frame(start = seq_len(nrow(res$starts)), held_out_loss = res$starts[, 1L],
                         best_epoch = res$starts[, 2L], stopped_early = res$starts[, 3L] == 1)
    list(network = list(inputs = colnames(x), hidden = spec$hidden, activation = spec$activation,
                        params = res$params, n_params = n_params),
         beta = res$beta,
         training = list(history = history, starts = starts, best_start = res$best_start,
                         best_epoch = res$best_epoch, held_out_loss = res$held_out_loss, held_out = held_k[[k]],
                         control = control))
  })
}

# Training work bounded as the ratio networks' (nce-core ratio_net MAX_TRAINING_FLOPS): about 6
# multiply-adds per parameter and row an epoch (forward and backward), at most 1e15 in all, about
# half a day at 20 GFLOP/s; without it max_epochs = 1e9 ran until killed.
check_training_work <- function(epochs, rows, n_params, call) {
  flops <- 6 * as.double(epochs) * rows * n_params
  if (!is.finite(flops) || flops > 1e15) {
    nce_abort(sprintf(paste("`max_epochs`: the training would take about %.1e floating-point operations (epochs x",
                            "starts x networks x rows x parameters), more than the 1e15 allowed; lower `max_epochs`",
                            "or `n_starts`, or use a smaller network"), flops), "input", call = call)
  }
  invisible(flops)
}

# Train the Rust sessions side by side a slice of time at a time (`run`: nce_mlp_sessions_run or
# nce_ratio_net_sessions_run), reporting every epoch from R between slices (a handler called from
# inside the Rust call would not see the caller's progressr handlers): `describe(k, report)` is
# network k's message for one row of its epoch reports; `epochs` the most epochs per session.
run_sessions <- function(sessions, run, epochs, call, describe) {
  threads <- nce_threads(call)
  n <- length(sessions)
  with_simulation_progress(epochs * n, function(p) {
    done <- logical(n)
    while (!all(done)) {
      live <- which(!done)
      steps <- rs(run(sessions[live], 0.2, threads), call = call)
      if (!is.null(p)) {
        for (j in seq_along(steps)) {
          r <- steps[[j]]$reports
          for (i in seq_len(nrow(r))) p(message = describe(live[j], r[i, ]))
        }
      }
      done[live] <- vapply(steps, function(st) isTRUE(st$done), TRUE)
    }
  })
}

# Rows held out for early stopping: a share `control$held_out` of each label, drawn with R's RNG.
held_out_rows <- function(y, control, call = caller_call()) {
  held <- logical(length(y))
  if (control$held_out > 0) {
    for (lab in c(1, 0)) {
      rows <- which(y == lab)
      k <- floor(control$held_out * length(rows))
      if (k < 1L) {
        nce_abort(sprintf(paste("`held_out` = %g keeps none of the %d %s points for early stopping: raise it,",
                                "or set held_out = 0"), control$held_out, length(rows),
                          if (lab == 1) "data" else "reference"), "input", call = call)
      }
      held[rows[sample.int(length(rows), k)]] <- TRUE
    }
  }
  held
}

mlp_n_params <- function(inputs, hidden) {
  fan <- c(inputs, hidden)
  sum(hidden * (fan[-length(fan)] + 1)) + hidden[length(hidden)]
}

# The network's output g at standardised inputs `x`.
mlp_forward <- function(network, x) {
  if (!nrow(x)) return(numeric())
  g <- rs(nce_mlp_forward(x, network$params, list(inputs = length(network$inputs), hidden = network$hidden,
                                                   activation = network$activation, threads = nce_threads())))
  g - (network$shift %||% 0)
}

# nce() with an mlp() term: train the network with the other terms, then refit the other terms
# (the intercept: minus the log normaliser) by NCE logistic regression with the network fixed.
nce_mlp_fit <- function(formula, frame, label, offset, control, nce_fields, prior_w, knots = NULL, sp = NULL,
                        discrete = FALSE, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  parts <- split_mlp_formula(formula, call)
  spec <- parts$spec
  vars <- spec$vars
  ref_vars <- nce_fields$reference$vars
  if (!all(vars %in% ref_vars)) {
    nce_abort(sprintf("mlp() uses %s, which the reference does not generate", paste(setdiff(vars, ref_vars),
                                                                                     collapse = ", ")),
              "input", call = call)
  }
  check_numeric_columns(frame, vars, arg = "data", call = call)
  data_x <- as.matrix(frame[label == 1, vars, drop = FALSE])
  center <- colMeans(data_x)
  scale <- apply(data_x, 2L, stats::sd)
  scale[!is.finite(scale) | scale <= 0] <- 1
  x <- mlp_inputs(frame, vars, center, scale)
  scaling <- list(center = center, scale = scale)
  if (parts$smooth) {
    return(nce_mlp_smooth_fit(formula, parts, x, scaling, frame, label, offset, control, nce_fields, prior_w,
                              knots, sp, discrete, call))
  }
  # The same refusals as nce() without a network.
  refuse_smooth_args(knots, sp, call = call)
  if (discrete) {
    nce_abort(paste("`discrete = TRUE` needs smooth terms (s(), te(), ti()) beside the mlp() term: it discretises",
                    "their covariates; the network's inputs are used as they are"), "input", call = call)
  }
  tt <- stats::terms(parts$rest)
  mf <- stats::model.frame(tt, frame, na.action = stats::na.fail)
  z <- stats::model.matrix(tt, mf)
  storage.mode(z) <- "double"
  f_offset <- stats::model.offset(mf)
  if (!is.null(f_offset)) offset <- offset + f_offset
  # Start the other terms at their NCE fit without the network.
  glm_settings <- list(family = "binomial", control = nce_control(), threads = nce_threads())
  start <- rs(nce_fit_glm(z, list(y = label, weights = prior_w, offset = offset), as.integer(label), glm_settings))
  beta0 <- start$coefficients
  beta0[!is.finite(beta0)] <- 0
  tr <- train_mlp(x, z, label, prior_w, offset, spec, control, beta0, call = call)
  centred <- centre_network(tr$network, x, label == 1)
  tr$network <- centred$network
  g <- centred$g
  res <- rs(nce_fit_glm(z, list(y = label, weights = prior_w, offset = offset + g), as.integer(label),
                        glm_settings))
  cn <- colnames(z)
  cf <- glm_coefficients(res, cn)
  beta <- cf$coefficients
  warn_fit(res, cn, nce_fields$n)
  # The importance-sampling check of the normaliser: log Z = log mean over the reference of
  # exp(f(u)) / q(u), with f the unnormalised log density (network and non-intercept terms).
  ref <- label == 0
  b0 <- beta
  b0[is.na(b0)] <- 0
  f_ref <- g[ref] + drop(z[ref, -1L, drop = FALSE] %*% b0[-1L]) +
    (if (is.null(f_offset)) 0 else f_offset[ref])
  mlp_result(list(
    coefficients = beta,
    vcov = cf$vcov,
    vcov_naive = cf$vcov_naive,
    log_normaliser = -unname(beta[1L]),
    log_normaliser_is = log_mean_exp(f_ref - nce_fields$lq_ref),
    converged = res$converged,
    iterations = res$iterations,
    objective = res$loglik,
    linear.predictors = res$eta,
    fitted.values = res$fitted,
    rest_terms = tt,
    xlevels = stats::.getXlevels(tt, mf),
    contrasts = attr(z, "contrasts")
  ), tr, scaling, formula, nce_fields)
}

# The network's constant is not identified apart from the intercept: its output `g` at the rows
# `x`, centred at the data rows, so the intercept is the data's mean log density under the
# normalised model; the network carries the shift.
centre_network <- function(network, x, data) {
  network$shift <- 0
  g <- mlp_forward(network, x)
  network$shift <- mean(g[data])
  list(network = network, g = g - network$shift)
}

# An nce_mlp fit from the fields of its other terms (`fields`), the training result `tr` and
# the inputs' `scaling`.
mlp_result <- function(fields, tr, scaling, formula, nce_fields) {
  tr$network$center <- scaling$center
  tr$network$scale <- scaling$scale
  structure(c(fields, list(network = tr$network, training = tr$training,
                           terms = stats::terms(formula, specials = "mlp")),
              nce_fields[setdiff(names(nce_fields), "lq_ref")]), class = c("nce_mlp", "nce_fit", "nce_result"))
}

# mlp() beside smooth terms, by backfitting: the smooth model (REML, as nce() fits it) starts
# without the network; then in each round (`control$backfit` at most) the network, with a free
# intercept, is trained with the smooth model's terms as offset (continuing from its previous
# weights, on the same held-out rows), and the smooth model is refitted with the centred network
# as offset (its mgcv set-up built once). Rounds stop when the network's held-out NCE loss has
# not improved by `control$backfit_tol`; the round with the lowest held-out loss is kept. Its
# smoothing parameters and covariances are those of its smooth fit, the network held fixed.
nce_mlp_smooth_fit <- function(formula, parts, x, scaling, frame, label, offset, control, nce_fields, prior_w,
                               knots, sp, discrete, call) {
  rest_fields <- nce_fields
  rest_fields$relative <- FALSE  # the outer fit adds log q once
  rest_fields$nce_formula <- parts$rest
  rest_fields$control <- nce_control()
  setup <- NULL
  fit_rest <- function(off) {
    r <- nce_smooth_fit(parts$rest, frame, label, off, knots, sp, nce_control(), rest_fields, prior_w,
                        discrete = discrete, setup = setup, keep_setup = is.null(setup))
    # The rest's own terms at every row: its linear predictor without the offset passed in.
    r$rest_eta <- r$linear.predictors - off
    r
  }
  rest <- fit_rest(offset)
  setup <- rest$setup
  rest$setup <- NULL
  data <- label == 1
  z <- matrix(1, nrow(x), 1L, dimnames = list(NULL, "(Intercept)"))
  held <- held_out_rows(label, control, call)
  tr <- NULL
  g <- rep(0, nrow(x))
  best <- NULL
  rounds <- data.frame(round = integer(), held_out_loss = double(), change = double(), best_epoch = integer())
  for (r in seq_len(control$backfit)) {
    b0 <- rest$coefficients[[1L]]
    tr <- train_mlp(x, z, label, prior_w, offset + rest$rest_eta - b0, parts$spec, control, b0, held = held,
                    warm_start = tr$network$params, call = call)
    centred <- centre_network(tr$network, x, data)
    tr$network <- centred$network
    g_new <- centred$g
    before <- g + rest$rest_eta
    rest <- fit_rest(offset + g_new)
    g <- g_new
    loss <- tr$training$held_out_loss
    rounds[r, ] <- list(r, loss, mean(abs(g + rest$rest_eta - before)[data]), tr$training$best_epoch)
    improved <- is.null(best) || loss < best$loss - control$backfit_tol
    if (is.null(best) || loss < best$loss) best <- list(loss = loss, tr = tr, rest = rest, g = g, round = r)
    if (!improved) break
  }
  rounds$kept <- rounds$round == best$round
  rounds$still_improving <- improved
  tr <- best$tr
  rest <- best$rest
  g <- best$g
  tr$training$rounds <- rounds
  # The importance-sampling check of the normaliser, as in nce_mlp_fit().
  ref <- label == 0
  log_z_is <- log_mean_exp(g[ref] + rest$rest_eta[ref] - rest$coefficients[[1L]] - nce_fields$lq_ref)
  rest$rest_eta <- NULL
  mlp_result(list(
    coefficients = rest$coefficients,
    vcov = rest$vcov,
    vcov_naive = rest$vcov_naive,
    log_normaliser = rest$log_normaliser,
    log_normaliser_is = log_z_is,
    converged = rest$converged,
    iterations = rest$iterations,
    objective = rest$objective,
    linear.predictors = rest$linear.predictors,
    fitted.values = rest$fitted.values,
    rest_fit = rest,
    rest_terms = stats::terms(parts$rest)
  ), tr, scaling, formula, nce_fields)
}
