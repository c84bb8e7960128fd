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
#' @param object An `snce_fit`.
#' @param nsim Number of simulated copies of the observed set of sequences.
#' @param seed `NULL` or an integer for `set.seed()`.
#' @param candidates Reference draws per step.
#' @param ... Unused.
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

# nsim copies of the observed sequences: their states and covariates, one row per transition.
check_sim_size <- function(object, nsim, call = caller_call()) {
  call <- call  # the simulate() call, forced here
  check_nsim(nsim, 8 * nrow(object$transitions) * (ncol(object$transitions) + 2), what = "the simulated sequences",
             call = call)
}
