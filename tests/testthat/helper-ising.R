# Sequential Ising model on {0,1}^d (Barthelme and Chopin):
# p(y_t | y_{t-1}) proportional to exp(a'y_t + sum_{i<j} Q_ij y_ti y_tj + y_t' R y_{t-1}).
# With d small the 2^d states can be enumerated: exact simulation and the exact conditional MLE.

ising_states <- function(d) {
  s <- as.matrix(expand.grid(rep(list(0:1), d)))
  dimnames(s) <- list(NULL, paste0("y", seq_len(d)))
  s
}
ising_pairs <- function(d) t(utils::combn(d, 2))

# Sufficient statistics, one row per (y, y_prev) pair: y_i, y_i y_j (i < j), then
# y_i y_prev_j with i varying fastest (so R's coefficients are c(R)).
ising_features <- function(y, yp) {
  d <- ncol(y)
  pr <- ising_pairs(d)
  cbind(y, y[, pr[, 1], drop = FALSE] * y[, pr[, 2], drop = FALSE],
        do.call(cbind, lapply(seq_len(d), function(j) y * yp[, j])))
}

# Formula terms in the same order as ising_features().
ising_terms <- function(d) {
  pr <- ising_pairs(d)
  c(paste0("y", seq_len(d)), sprintf("I(y%d * y%d)", pr[, 1], pr[, 2]),
    sprintf("I(y%d * y%d_prev)", rep(seq_len(d), d), rep(seq_len(d), each = d)))
}

ising_theta <- function(a, Q, R) c(a, Q[ising_pairs(length(a))], c(R))

# One chain of n transitions from y0, drawn from the exact conditionals.
ising_sim <- function(n, y0, theta) {
  d <- length(y0)
  st <- ising_states(d)
  k <- nrow(st)
  y <- matrix(0L, n + 1L, d, dimnames = list(NULL, colnames(st)))
  y[1, ] <- y0
  for (t in seq_len(n) + 1L) {
    lp <- drop(ising_features(st, matrix(y[t - 1L, ], k, d, byrow = TRUE)) %*% theta)
    y[t, ] <- st[sample.int(k, 1L, prob = exp(lp - max(lp))), ]
  }
  y
}

# Exact conditional MLE over the transitions of `data` (state columns y1..yd, sequences in
# column `group`), by BFGS with the analytic score; returns estimate and inverse Hessian SEs.
ising_mle <- function(data, d, group) {
  st <- ising_states(d)
  vars <- colnames(st)
  k <- nrow(st)
  tr <- lapply(split(data[vars], data[[group]]), as.matrix)
  y <- do.call(rbind, lapply(tr, function(m) m[-1, , drop = FALSE]))
  yp <- do.call(rbind, lapply(tr, function(m) m[-nrow(m), , drop = FALSE]))
  s_obs <- colSums(ising_features(y, yp))
  # Number of transitions from each previous state (rows of st, expand.grid order).
  cnt <- tabulate(drop(yp %*% 2^(seq_len(d) - 1L)) + 1L, k)
  phi <- lapply(seq_len(k), function(j) ising_features(st, matrix(st[j, ], k, d, byrow = TRUE)))
  probs <- function(th, j) {
    l <- drop(phi[[j]] %*% th)
    p <- exp(l - max(l))
    list(p = p / sum(p), lz = max(l) + log(sum(p)))
  }
  nll <- function(th) -(sum(s_obs * th) - sum(cnt * vapply(seq_len(k), function(j) probs(th, j)$lz, 0)))
  score <- function(th) {
    -(s_obs - Reduce(`+`, lapply(seq_len(k), function(j) cnt[j] * colSums(phi[[j]] * probs(th, j)$p))))
  }
  # Exact information: sum over previous states of count * Cov(features | previous state).
  info <- function(th) {
    Reduce(`+`, lapply(seq_len(k), function(j) {
      p <- probs(th, j)$p
      m <- colSums(phi[[j]] * p)
      cnt[j] * (crossprod(phi[[j]], phi[[j]] * p) - tcrossprod(m))
    }))
  }
  o <- stats::optim(rep(0, ncol(phi[[1]])), nll, score, method = "BFGS",
                    control = list(reltol = 1e-14, maxit = 2000))
  list(par = o$par, se = sqrt(diag(solve(info(o$par)))), convergence = o$convergence,
       score = score(o$par))
}

# Independent Bernoulli(1/2) reference over y1..yd: log q = d log(1/2).
ising_reference <- function(d) {
  vars <- paste0("y", seq_len(d))
  ref_custom(function(n) as.data.frame(stats::setNames(replicate(d, stats::rbinom(n, 1L, 0.5), simplify = FALSE), vars)),
             function(x) rep(d * log(0.5), nrow(x)), vars = vars)
}
