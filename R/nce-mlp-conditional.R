# Conditional NCE of network energies (Ceylan and Gutmann, 2018): noise drawn around each data
# point, no global reference; the normaliser cancels in the fit and is estimated afterwards by
# importance sampling.

#' Conditional noise for network energies (conditional NCE)
#'
#' A "reference" for [nce()] with an [mlp()] energy that is not a distribution: each data point
#' \eqn{x_i} gets `ratio` noise partners \eqn{y_{ik} = x_i + \epsilon_{ik}}, with Gaussian
#' \eqn{\epsilon} of the given standard deviations, and the network is fitted by the logistic loss
#' of telling \eqn{x_i} from \eqn{y_{ik}}: \eqn{\log\{1 + \exp(-(g(x_i) - g(y_{ik})))\}}
#' (Ceylan and Gutmann, 2018). The noise is symmetric, so neither its density nor the normalising
#' constant enters; no reference needs to cover the whole data. The log normaliser is then
#' estimated by importance sampling, with 20 times the data's size (at least 100,000) draws from
#' a normal distribution with the data's mean and 1.5 times its covariance (`ref_fit(inflate =
#' 1.5)`); its Monte Carlo standard error is the intercept's standard error.
#'
#' Small noise makes the pairs hard to tell apart and the estimate noisy; large noise makes them
#' far apart. By default each variable's noise sd is its sd in the data (`scale = 1`): on
#' N(0, 1) data with 2,000 points, a sd of 0.3 left the network nearly flat (density 0.44 at 0
#' and 0.17-0.19 at +-1, against 0.40 and 0.24), a sd of 1 gave 0.36-0.38 and 0.23-0.26.
#'
#' @param ... Named standard deviations of the noise, one per variable of the network
#'   (`x1 = 0.3, x2 = 0.3`); none: `scale` times each variable's sd in the data.
#' @param scale Without `...`: the noise sd as a multiple of each variable's sd in the data.
#' @return An object of class `nce_ref_conditional` for the `reference` of [nce()].
#' @references Ceylan, C. and Gutmann, M. U. (2018). Conditional noise-contrastive estimation of
#'   unnormalised models. ICML.
#' @examples
#' set.seed(1)
#' d <- data.frame(x = rnorm(1000))
#' fit <- nce(~ mlp(x, hidden = c(16, 16)), d, ref_conditional(), ratio = 5)
#' predict(fit, data.frame(x = c(-1, 0, 1)), type = "density")
#' dnorm(c(-1, 0, 1))
#' @export
ref_conditional <- function(..., scale = 1) {
  sd <- c(...)
  check_number(scale, "scale", min = 0, exclusive_min = TRUE)
  if (is.null(sd)) {
    return(structure(list(kind = "conditional", vars = character(), sd = NULL, scale = scale),
                     class = c("nce_ref_conditional", "nce_reference")))
  }
  if (!is.numeric(sd) || is.null(names(sd)) || any(names(sd) == "") || anyNA(sd) ||
        any(!is.finite(sd) | sd <= 0) || anyDuplicated(names(sd))) {
    nce_abort(sprintf("ref_conditional() takes named noise standard deviations > 0, e.g. x1 = 0.3, not %s",
                      describe_value(sd)), "input")
  }
  structure(list(kind = "conditional", vars = names(sd), sd = sd, scale = NULL),
            class = c("nce_ref_conditional", "nce_reference"))
}

#' @export
ref_draw.nce_ref_conditional <- function(ref, n) {  # nolint: object_name_linter.
  nce_abort("ref_conditional() draws noise around data points, not from a distribution of its own", "input")
}

# Conditional noise has no support of its own: the model lives everywhere.
#' @export
ref_logq.nce_ref_conditional <- function(ref, data) rep(0, nrow(data))  # nolint: object_name_linter.

# nce() with a conditional-noise reference: train the network on data-noise pairs, then estimate
# the normaliser by importance sampling.
nce_mlp_conditional_fit <- function(formula, d, reference, ratio, control, cl, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (!has_mlp(formula)) {
    nce_abort("ref_conditional() serves network energies: give `formula` an mlp() term", "input", call = call)
  }
  parts <- split_mlp_formula(formula, call)
  spec <- parts$spec
  if (length(attr(stats::terms(parts$rest), "term.labels"))) {
    nce_abort(paste("with ref_conditional() the formula is the network alone (terms beside mlp() have no",
                    "normaliser-free fit here): ~ mlp(...)"), "input", call = call)
  }
  if (is.null(reference$sd)) {
    sds <- vapply(d[reference$vars], stats::sd, 1)
    sds[!is.finite(sds) | sds <= 0] <- 1
    reference$sd <- reference$scale * sds
  }
  if (!setequal(spec$vars, reference$vars)) {
    nce_abort(sprintf("ref_conditional() gives noise for %s, but mlp() uses %s: give one sd per variable of %s",
                      paste(reference$vars, collapse = ", "), paste(spec$vars, collapse = ", "), "the network"),
              "input", call = call)
  }
  if (ratio != round(ratio) || ratio < 1) {
    nce_abort(sprintf(paste("with ref_conditional(), `ratio` is the number of noise partners per data point:",
                            "a whole number >= 1, not %g"), ratio), "input", call = call)
  }
  vars <- spec$vars
  n <- nrow(d)
  check_size(8 * as.double(n) * (ratio + 1) * (2 * length(vars) + 4), "ratio", "the noise", call = call)
  center <- colMeans(d[vars])
  scale <- vapply(d[vars], stats::sd, 1)
  scale[!is.finite(scale) | scale <= 0] <- 1
  xd <- as.matrix(d[vars])
  storage.mode(xd) <- "double"
  of <- rep(seq_len(n), each = ratio)
  noise <- xd[of, , drop = FALSE] + matrix(stats::rnorm(length(of) * length(vars)), ncol = length(vars)) *
    rep(reference$sd[vars], each = length(of))
  std <- function(x) sweep(sweep(x, 2L, center, "-"), 2L, scale, "/")
  held <- logical(n)
  if (control$held_out > 0) {
    k <- floor(control$held_out * n)
    if (k < 1L) nce_abort("`held_out` keeps no data point for early stopping: raise it, or set held_out = 0",
                          "input", call = call)
    held[sample.int(n, k)] <- TRUE
  }
  settings <- list(inputs = length(vars), hidden = spec$hidden, activation = spec$activation,
                   batch = control$batch, max_epochs = control$max_epochs, step = control$step,
                   weight_decay = control$weight_decay, step_patience = control$step_patience,
                   patience = control$patience, n_starts = control$n_starts, seed = draw_seed(),
                   threads = nce_threads(call), beta_start = numeric(), warm_start = NULL, progress = NULL)
  res <- rs(nce_mlp_train_conditional(std(xd), std(noise), held, settings), call = call)
  network <- list(inputs = vars, hidden = spec$hidden, activation = spec$activation, params = res$params,
                  n_params = mlp_n_params(length(vars), spec$hidden), center = center, scale = scale, shift = 0)
  g_data <- mlp_forward(network, std(xd))
  network$shift <- mean(g_data)
  # The normaliser by importance sampling from the data's normal, 1.5 times its covariance.
  proposal <- ref_fit(d[vars], inflate = 1.5)
  n_is <- max(100000L, 20L * n)
  u <- ref_draw(proposal, n_is)
  lw <- mlp_forward(network, mlp_inputs(u, vars, center, scale)) - ref_logq(proposal, u)
  w <- exp(lw - max(lw))
  log_z <- max(lw) + log(mean(w))
  se <- sqrt(stats::var(w) / n_is) / mean(w)
  history <- as.data.frame(res$history)
  names(history) <- c("start", "epoch", "train_loss", "held_out_loss", "step")
  training <- list(history = history,
                   starts = data.frame(start = seq_len(nrow(res$starts)), held_out_loss = res$starts[, 1L],
                                       best_epoch = res$starts[, 2L], stopped_early = res$starts[, 3L] == 1),
                   best_start = res$best_start, best_epoch = res$best_epoch, held_out_loss = res$held_out_loss,
                   held_out = held, control = control)
  frame <- stack_rows(d[vars], as.data.frame(noise))
  frame$.label <- rep(c(1, 0), c(n, length(of)))
  frame$.offset <- 0
  cov1 <- matrix(se^2, 1L, 1L, dimnames = list("(Intercept)", "(Intercept)"))
  tt <- stats::terms(parts$rest)
  structure(list(
    coefficients = c(`(Intercept)` = -log_z), vcov = cov1, vcov_naive = cov1, log_normaliser = log_z,
    log_normaliser_is = log_z, log_normaliser_ess = sum(w)^2 / sum(w^2), converged = TRUE, iterations = 0L,
    network = network, training = training, terms = stats::terms(formula, specials = "mlp"), rest_terms = tt,
    xlevels = list(), contrasts = NULL, n = n, m = length(of), ratio = ratio, method = "conditional",
    reference = reference, nce_formula = formula, nce_frame = frame, control = control, call = cl,
    data_weights = NULL, na.action = NULL),
    class = c("nce_mlp_conditional", "nce_mlp", "nce_fit", "nce_result"))
}
