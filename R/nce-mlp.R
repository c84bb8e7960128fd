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
#' network held fixed. The network's output is centred to mean 0 over the data points (its
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
#' of `bench/deep-ebm.R`, n = 5,000 data points, uniform reference, ratio 10: a ring (radius 2,
#' radial sd 0.2) and 8 Gaussians (sd 0.25) on a circle of radius 2. The mean absolute error of
#' the normalised log density on a grid where the density exceeds 1e-3 of its maximum was 0.21
#' (ring) and 0.28 (8 Gaussians), against 0.21 and 0.68 for the smooth `te(x1, x2, k = 10)` of
#' [nce()] and 0.66 and 0.43 for `ks::kde()`. Softplus units gave 0.23 and 0.55 at four times the
#' time, tanh 0.38 and 0.34; a step of 5e-3, patience 15, a third layer, 128 units or batches
#' of 512 were no better.
#'
#' @param batch Rows per minibatch.
#' @param max_epochs Most passes over the training rows per start.
#' @param step Adam's initial step size.
#' @param weight_decay Decoupled weight decay (AdamW) on the network's weights (not its biases).
#' @param held_out Share of the data and of the reference points held out for early stopping,
#'   in \[0, 0.5\]; 0 trains on all rows and stops on the training loss.
#' @param patience Epochs without a better held-out loss before training stops.
#' @param step_patience Epochs without a better held-out loss before the step is halved.
#' @param n_starts Random starts.
#' @return A list of class `nce_mlp_control`.
#' @examples
#' nce_mlp_control(max_epochs = 50, n_starts = 3)
#' @export
nce_mlp_control <- function(batch = 256L, max_epochs = 200L, step = 2e-3, weight_decay = 1e-4, held_out = 0.1,
                            patience = 30L, step_patience = 10L, n_starts = 1L) {
  check_count(batch, "batch")
  check_count(max_epochs, "max_epochs")
  check_number(step, "step", min = 0, exclusive_min = TRUE, max = 1)
  check_number(weight_decay, "weight_decay", min = 0, max = 1)
  check_number(held_out, "held_out", min = 0, max = 0.5)
  check_count(patience, "patience")
  check_count(step_patience, "step_patience")
  check_count(n_starts, "n_starts", max = 100)
  structure(list(batch = as.double(batch), max_epochs = as.double(max_epochs), step = as.double(step),
                 weight_decay = as.double(weight_decay), held_out = as.double(held_out),
                 patience = as.double(patience), step_patience = as.double(step_patience),
                 n_starts = as.double(n_starts)), class = c("nce_mlp_control", "list"))
}

# TRUE when the formula has an mlp() term.
has_mlp <- function(formula) "mlp" %in% all.names(formula)

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

# The formula split into its one mlp() term (evaluated to its specification) and the rest (a
# formula of the other terms, with the intercept).
split_mlp_formula <- function(formula, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  tt <- stats::terms(formula, specials = "mlp")
  labels <- attr(tt, "term.labels")
  is_mlp <- vapply(labels, function(l) {
    e <- str2lang(l)
    is.call(e) && identical(e[[1L]], as.name("mlp"))
  }, TRUE, USE.NAMES = FALSE)
  if (sum(is_mlp) != 1L || sum(vapply(labels, function(l) "mlp" %in% all.names(str2lang(l)), TRUE)) != 1L) {
    nce_abort(paste("`formula` must have exactly one mlp() term, added to the other terms (not inside an",
                    "interaction or a function): ~ mlp(x1, x2) + z"), "input", call = call)
  }
  spec <- tryCatch(eval(str2lang(labels[is_mlp]), list(mlp = mlp), environment(formula)),
                   nce_error = function(e) nce_abort(conditionMessage(e), "input", call = call))
  rest <- labels[!is_mlp]
  rest_formula <- if (length(rest)) stats::reformulate(rest, env = environment(formula)) else stats::as.formula(~1)
  environment(rest_formula) <- environment(formula)
  if (has_smooths(rest_formula)) {
    nce_abort(paste("smooth terms (s(), te(), ti()) beside mlp() are not supported: put their variables in the",
                    "network, or fit the smooth model without mlp()"), "input", call = call)
  }
  list(spec = spec, rest = rest_formula)
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
# columns. Rows held out for early stopping: a share of each label, drawn with R's RNG. Returns
# the network (its settings and parameters), beta, and the training record.
train_mlp <- function(x, z, y, weights, offset, spec, control, beta_start, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  n <- nrow(x)
  held <- logical(n)
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
  settings <- list(inputs = ncol(x), hidden = spec$hidden, activation = spec$activation,
                   batch = control$batch, max_epochs = control$max_epochs, step = control$step,
                   weight_decay = control$weight_decay, step_patience = control$step_patience,
                   patience = control$patience, n_starts = control$n_starts, seed = draw_seed(),
                   threads = nce_threads(call), beta_start = as.double(beta_start), warm_start = NULL,
                   progress = NULL)
  n_params <- mlp_n_params(ncol(x), spec$hidden)
  check_size(8 * (as.double(n) * (ncol(x) + ncol(z) + 4) + 8 * n_params), "hidden", "the network's training",
             call = call)
  res <- with_simulation_progress(control$max_epochs * control$n_starts, function(p) {
    if (!is.null(p)) {
      settings$progress <- function(start, epoch, train_loss, held_out_loss) {
        p(message = sprintf("start %d, epoch %d: held-out loss %.5f", start, epoch, held_out_loss))
      }
    }
    rs(nce_mlp_train(x, z, list(y = as.double(y), weights = as.double(weights), offset = as.double(offset),
                                held_out = held), settings), call = call)
  })
  history <- as.data.frame(res$history)
  names(history) <- c("start", "epoch", "train_loss", "held_out_loss", "step")
  starts <- data.frame(start = seq_len(nrow(res$starts)), held_out_loss = res$starts[, 1L],
                       best_epoch = res$starts[, 2L], stopped_early = res$starts[, 3L] == 1)
  list(network = list(inputs = colnames(x), hidden = spec$hidden, activation = spec$activation,
                      params = res$params, n_params = n_params),
       beta = res$beta,
       training = list(history = history, starts = starts, best_start = res$best_start,
                       best_epoch = res$best_epoch, held_out_loss = res$held_out_loss, held_out = held,
                       control = control))
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
nce_mlp_fit <- function(formula, frame, label, offset, control, nce_fields, prior_w, call = caller_call()) {
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
  # The network's constant is not identified apart from the intercept: centre g at the data, so
  # the intercept is the data's mean log density under the normalised model.
  tr$network$shift <- 0
  g <- mlp_forward(tr$network, x)
  tr$network$shift <- mean(g[label == 1])
  g <- g - tr$network$shift
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
  lw <- f_ref - nce_fields$lq_ref
  log_z_is <- max(lw) + log(mean(exp(lw - max(lw))))
  tr$network$center <- center
  tr$network$scale <- scale
  structure(c(list(
    coefficients = beta,
    vcov = cf$vcov,
    vcov_naive = cf$vcov_naive,
    log_normaliser = -unname(beta[1L]),
    log_normaliser_is = log_z_is,
    converged = res$converged,
    iterations = res$iterations,
    objective = res$loglik,
    linear.predictors = res$eta,
    fitted.values = res$fitted,
    network = tr$network,
    training = tr$training,
    terms = stats::terms(formula, specials = "mlp"),
    rest_terms = tt,
    xlevels = stats::.getXlevels(tt, mf),
    contrasts = attr(z, "contrasts")
  ), nce_fields[setdiff(names(nce_fields), "lq_ref")]), class = c("nce_mlp", "nce_fit", "nce_result"))
}

# The neural ratio classifier of ratio_amortised(classifier = "mlp"): joint pairs (label 1)
# against shuffled ones (0), the network of all parameters and summaries, each mapped to normal
# scores by the joint pairs' quantiles; the intercept refitted with the network fixed.
ratio_mlp_fit <- function(th, s, n_shuffle, spec, control, call) {
  m <- nrow(th)
  perm <- unlist(lapply(seq_len(n_shuffle), function(k) sample.int(m)))
  pairs <- rbind(data.frame(th, s, check.names = FALSE),
                 data.frame(th[perm, , drop = FALSE], s[rep(seq_len(m), n_shuffle), , drop = FALSE],
                            check.names = FALSE))
  y <- rep(c(1, 0), c(m, m * n_shuffle))
  vars <- c(colnames(th), colnames(s))
  quantiles <- lapply(vars, function(v) normal_score_knots(pairs[[v]][y == 1]))
  x <- mlp_inputs(pairs, vars, quantiles = quantiles)
  z <- matrix(1, nrow(x), 1L, dimnames = list(NULL, "(Intercept)"))
  w <- rep(1, nrow(x))
  t0 <- proc.time()[["elapsed"]]
  spec$vars <- vars
  tr <- train_mlp(x, z, y, w, rep(0, nrow(x)), spec, control, -log(n_shuffle), call = call)
  tr$network$quantiles <- quantiles
  tr$network$shift <- 0
  g <- mlp_forward(tr$network, x)
  res <- rs(nce_fit_glm(z, list(y = y, weights = w, offset = g), as.integer(y),
                        list(family = "binomial", control = nce_control(), threads = nce_threads())), call = call)
  eta <- g + res$coefficients[1L]
  pairs$y <- y
  list(network = tr$network, training = tr$training, intercept = res$coefficients[1L], pairs = pairs,
       fitted.values = stats::plogis(eta), time_fit = proc.time()[["elapsed"]] - t0)
}
