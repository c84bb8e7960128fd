# The neural ratio classifier of ratio_amortised(classifier = "mlp"), trained in Rust: each
# simulation's data are read once (through an embedding network when one is given), and the
# classifier contrasts every joint pair (theta_i, x_i) with parameters of other simulations of
# its minibatch, drawn afresh every epoch (nce-core estimators/ratio_net). Parameters are
# standardised, directly read summaries mapped to normal scores by their quantiles, embedded data
# standardised as a whole (sets, series) or column by column (dense).

ratio_losses <- c("nrec", "nre", "bnre")

#' Training settings of the neural ratio classifier
#'
#' Settings of the network classifier of [ratio_amortised()] (and of [design_eig()] with
#' `classifier = "mlp"`): minibatch Adam on the contrastive loss, the parameters of other
#' simulations of the minibatch drawn afresh as the contrasting pairs every epoch, and early
#' stopping on held-out simulations (20 epochs of patience, as the Python toolkit sbi); the step
#' is halved after `step_patience` epochs without a better held-out loss. The step, weight decay
#' and minibatch were chosen on sbibm's two moons (C2ST against sbi's settings in
#' `bench/README.md`).
#'
#' @param batch_size Simulations per minibatch (at least 2).
#' @param max_epochs Most epochs. Training work (epochs x simulations x the network's
#'   multiply-adds) is bounded: a setting beyond about 1e15 operations is refused.
#' @param step Adam's step size.
#' @param weight_decay Decoupled weight decay of the weights (AdamW).
#' @param held_out Share of the simulations held out for early stopping, in \[0, 0.9).
#' @param patience Epochs without a better held-out loss before training stops.
#' @param step_patience Epochs without a better held-out loss before the step is halved.
#' @return A list of class `nce_ratio_control`.
#' @examples
#' nce_ratio_control(max_epochs = 200)
#' @export
nce_ratio_control <- function(batch_size = 256L, max_epochs = 1000L, step = 2e-3, weight_decay = 1e-4, held_out = 0.1,
                              patience = 20L, step_patience = 5L) {
  check_count(batch_size, "batch_size", min = 2)
  check_count(max_epochs, "max_epochs")
  check_number(step, "step", min = 0, exclusive_min = TRUE, max = 1)
  check_number(weight_decay, "weight_decay", min = 0, max = 1)
  check_number(held_out, "held_out", min = 0, max = 0.9)
  check_count(patience, "patience")
  check_count(step_patience, "step_patience")
  structure(list(batch_size = as.double(batch_size), max_epochs = as.double(max_epochs), step = as.double(step),
                 weight_decay = as.double(weight_decay), held_out = as.double(held_out),
                 patience = as.double(patience), step_patience = as.double(step_patience)),
            class = c("nce_ratio_control", "list"))
}

# The standardisation of parameters `th` and summaries `s` (matrices of the joint simulations).
ratio_net_scaling <- function(th, s, embedding, call) {
  emb_idx <- if (is.null(embedding)) integer() else embedding_columns(embedding, colnames(s), call)
  direct <- setdiff(seq_len(ncol(s)), emb_idx)
  sd0 <- function(v) {
    r <- stats::sd(v)
    if (is.finite(r) && r > 0) r else 1
  }
  xe <- s[, emb_idx, drop = FALSE]
  if (!length(emb_idx)) {
    x_center <- x_scale <- numeric()
  } else if (embedding$kind == "dense") {
    x_center <- colMeans(xe)
    x_scale <- apply(xe, 2L, sd0)
  } else {
    x_center <- rep(mean(xe), ncol(xe))
    x_scale <- rep(sd0(as.vector(xe)), ncol(xe))
  }
  list(parameters = colnames(th), theta_center = colMeans(th), theta_scale = apply(th, 2L, sd0),
       direct = colnames(s)[direct], quantiles = lapply(direct, function(j) normal_score_knots(s[, j])),
       embedded = colnames(s)[emb_idx], x_center = unname(x_center), x_scale = unname(x_scale))
}

# The network's three inputs at parameter rows `th` and summary rows `s` (matrices or data frames
# with the named columns): theta, the directly read summaries (z) and the embedded data (x).
ratio_net_inputs <- function(scaling, th, s) {
  th <- as.matrix(th[, scaling$parameters, drop = FALSE])
  storage.mode(th) <- "double"
  theta <- sweep(sweep(th, 2L, scaling$theta_center, "-"), 2L, scaling$theta_scale, "/")
  z <- matrix(0, nrow(s), length(scaling$direct))
  for (j in seq_along(scaling$direct)) {
    z[, j] <- normal_scores(as.double(s[, scaling$direct[j]]), scaling$quantiles[[j]])
  }
  x <- as.matrix(s[, scaling$embedded, drop = FALSE])
  storage.mode(x) <- "double"
  x <- sweep(sweep(x, 2L, scaling$x_center, "-"), 2L, scaling$x_scale, "/")
  # Without an embedding the summaries are the network's data input (kind "none").
  if (!ncol(x)) return(list(theta = unname(theta), z = matrix(0, nrow(z), 0L), x = z))
  list(theta = unname(theta), z = unname(z), x = unname(x))
}

# The Rust settings of the classifier (without the seed).
ratio_net_settings <- function(embedding, spec, control, loss, n_negatives) {
  emb <- if (is.null(embedding)) {
    list(kind = "none", hidden = numeric(), out = 0, item = 1, window = 1)
  } else {
    list(kind = if (embedding$kind == "dense") "dense" else "pooled", hidden = as.double(embedding$hidden),
         out = as.double(embedding$out), item = as.double(embedding$item), window = as.double(embedding$window))
  }
  list(embedding = emb, hidden = as.double(spec$hidden), activation = spec$activation, loss = loss,
       n_negatives = as.double(n_negatives), gamma = 1, lambda = 100, batch = control$batch_size,
       max_epochs = control$max_epochs, step = control$step, weight_decay = control$weight_decay,
       step_patience = control$step_patience, patience = control$patience, held_out = control$held_out)
}

# Train `n_networks` classifiers on the joint simulations (th, s), side by side in one pool of
# threads, R's random numbers drawn network by network (the seeds); then the methods' pairs: the
# joint ones and one shuffle.
ratio_net_fit <- function(th, s, n_shuffle, spec, control, n_networks, embedding, loss, call) {
  m <- nrow(th)
  scaling <- ratio_net_scaling(th, s, embedding, call)
  inp <- ratio_net_inputs(scaling, th, s)
  settings <- ratio_net_settings(embedding, spec, control, loss, n_shuffle)
  check_size(16 * n_networks * as.double(m) * (ncol(th) + ncol(s) + 4), "n", "the network's training", call = call)
  t0 <- proc.time()[["elapsed"]]
  sessions <- lapply(seq_len(n_networks), function(k) {
    rs(nce_ratio_net_session(inp$theta, inp$z, inp$x, c(settings, list(seed = draw_seed()))), call = call)
  })
  run_sessions(sessions, nce_ratio_net_sessions_run, control$max_epochs, call, function(k, r) {
    sprintf("%sepoch %d: held-out loss %.5f", if (n_networks > 1L) sprintf("network %d, ", k) else "", r[1L], r[3L])
  })
  trained <- lapply(sessions, function(ses) rs(nce_ratio_net_session_result(ses), call = call))
  networks <- lapply(trained, function(res) list(params = res$params, n_params = length(res$params)))
  training <- lapply(trained, function(res) {
    history <- as.data.frame(res$history)
    names(history) <- c("epoch", "train_loss", "held_out_loss", "step")
    list(history = history, best_epoch = res$best_epoch, held_out_loss = res$held_out_loss,
         max_epochs = control$max_epochs, control = control)
  })
  fit <- list(networks = networks, settings = settings, scaling = scaling)
  perm <- sample.int(m)
  pairs <- rbind(data.frame(th, s, check.names = FALSE),
                 data.frame(th[perm, , drop = FALSE], s, check.names = FALSE))
  g <- ratio_net_log_ratio(fit, pairs, pairs)
  pairs$y <- rep(c(1, 0), c(m, m))
  c(fit, list(training = training, loss = loss, embedding = embedding, intercept = 0, pairs = pairs,
              fitted.values = stats::plogis(g), time_fit = proc.time()[["elapsed"]] - t0))
}

# The ensemble's log ratio (the mean of its networks' logits) at parameter rows `th` and summary
# rows `s`; `s` may be one row, shared by every parameter row (read and embedded once).
ratio_net_log_ratio <- function(fit, th, s) {
  n <- nrow(th)
  if (!n) return(numeric())
  inp <- ratio_net_inputs(fit$scaling, th, s)
  threads <- nce_threads()
  out <- numeric(n)
  for (net in fit$networks) {
    out <- out + rs(nce_ratio_net_log_ratio(net$params, fit$settings, inp$theta, inp$z, inp$x, threads))
  }
  out / length(fit$networks)
}
