# Telescoping ratio estimation for marglik_nce() (Rhodes, Xu and Gutmann 2020): waymarks
# p_b ∝ g exp((1 - b) t) between the draws (b = 0) and the reference (b = 1) on the whitened
# scale, samples of each by resampling and linear-mixing (pCN) Metropolis moves, one 1-D logistic
# classifier per neighbouring pair, log Z as the sum. The numerics run in Rust
# (src/rust/nce-core/src/estimators/telescope.rs); this loop only evaluates log_density, which
# the Rust workers cannot call.

# Accuracy of the single classifier between draws (log ratios r1) and reference draws (r2) at
# the fitted intercept c: the mean probability of the right label in each class.
classifier_accuracy <- function(r1, r2, c) {
  nu <- log(length(r1) / length(r2))
  0.5 * mean(stats::plogis(r1 - c + nu)) + 0.5 * mean(stats::plogis(c - r2 - nu))
}

# t0: log f + log|dx/du| - log g at the estimation draws xe; t_ref: the same at the reference draws.
# Returns the combined fit (log_z, se, se_iid, ess, and per-pair c, se_pair, accuracy) with the
# waymarks `b`, the moves' acceptance rates and the number of log_density evaluations.
marglik_telescope <- function(xf, xe, t0, t_ref, log_density, lb, ub, accuracy, moves, chains, ess, shrink, call) {
  threads <- nce_threads()
  seed <- draw_seed()
  init <- rs(nce_tele_init(xf, xe, lb, ub, shrink, threads), call = call)
  z <- init$z
  n <- nrow(z)
  t <- t0
  eve <- seq_len(n)
  sets <- list(t0)
  eves <- list(eve)
  b <- 0
  bs <- 0
  beta <- 0.5
  step <- 0
  rates <- numeric(0)
  evals <- 0L
  repeat {
    nb <- rs(nce_tele_next(t, b, accuracy), call = call)
    if (nb >= 1) break
    if (length(bs) >= 500L) {
      nce_abort(sprintf(paste("telescoping needs more than 500 waymarks at accuracy %g: the draws and the",
                              "reference are too far apart; raise `accuracy` or fit a closer reference."), accuracy),
                "convergence", call = call)
    }
    step <- step + 1
    idx <- rs(nce_tele_resample(t, nb - b, seed, 2^41 + step), call = call)
    z <- z[idx, , drop = FALSE]
    t <- t[idx]
    eve <- eve[idx]
    acc_b <- 0
    for (s in seq_len(moves)) {
      step <- step + 1
      pr <- rs(nce_tele_propose(z, list(mean = init$mean, chol = init$chol, lb = lb, ub = ub),
                                list(beta = beta, seed = seed, step = step, threads = threads)), call = call)
      colnames(pr$x) <- colnames(xe)
      lp <- eval_logdens(log_density, pr$x, "log_density", "the telescoping proposals", call)
      evals <- evals + 1L
      bad <- which(is.nan(lp) | is.na(lp) | lp == Inf)
      if (length(bad)) {
        nce_abort(sprintf(paste("`log_density` is NA, NaN or +Inf at %d of %d telescoping proposals (rows %s);",
                                "it may be -Inf outside the support"), length(bad), length(lp),
                          format_positions(bad)), "data", call = call)
      }
      tp <- lp + pr$extra
      a <- rs(nce_tele_accept(t, tp, 1 - nb, seed, 2^40 + step), call = call)
      z[a, ] <- pr$z[a, , drop = FALSE]
      t[a] <- tp[a]
      rate <- mean(a)
      acc_b <- acc_b + rate / moves
      # Robbins-Monro-like step size towards an acceptance rate of 0.3 (any beta leaves p_b invariant)
      beta <- min(1, max(1e-3, beta * exp(rate - 0.3)))
    }
    rates <- c(rates, acc_b)
    b <- nb
    bs <- c(bs, b)
    sets <- c(sets, list(t))
    eves <- c(eves, list(eve))
  }
  bs <- c(bs, 1)
  sets <- c(sets, list(t_ref))
  fit <- rs(nce_tele_solve(sets, bs, eves, as.integer(chains), if (is.null(ess)) NaN else as.double(ess),
                           threads), call = call)
  fit$b <- bs
  fit$acceptance <- rates
  fit$evaluations <- evals * n
  fit$ancestors <- length(unique(eve))
  fit
}
