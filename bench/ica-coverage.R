# Coverage of the sandwich confidence intervals of the Laplace ICA model fitted by nce(model =
# ica_model()). The model is not differentiable in B (|b_i' x| has kinks), but its expected NCE
# objective is smooth, so the usual sandwich should hold asymptotically: this checks it.
# One fixed mixing matrix A (4-D, condition number < 50), `reps` data sets x = A s (Laplace sources
# of unit variance) of N points, Gaussian reference with covariance A A', ratio `ratio`, 3 random
# starts (best kept). The fitted rows are matched to the rows of B = A^{-1} (greedy on |B_hat A|,
# signs from the matched entries, as bench/ica.R); an entry's interval is the matched entry's Wald
# interval (a permutation and sign change of rows leaves the standard errors as they are). c is
# invariant to both. Reported: coverage of the 95% intervals per parameter (16 entries of B and c),
# overall, and the mean sandwich SE over the Monte Carlo SD of the estimates.
#
# Rscript bench/ica-coverage.R [reps] [N] [ratio] [seed]   (R_LIBS pointing at the installed package)
suppressMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
reps <- if (length(args) >= 1) as.integer(args[1]) else 200L
N <- if (length(args) >= 2) as.integer(args[2]) else 1000L
ratio <- if (length(args) >= 3) as.numeric(args[3]) else 10
seed <- if (length(args) >= 4) as.integer(args[4]) else 7L
d <- 4
set.seed(seed)
repeat {
  A <- matrix(rnorm(d * d), d)
  if (kappa(A) < 50) break
}
B <- solve(A)
c_true <- log(abs(det(B))) - d / 2 * log(2)
ref <- do.call(ref_normal, c(as.list(stats::setNames(rep(0, d), paste0("x", seq_len(d)))), list(cov = A %*% t(A))))

# Rows of B_hat matched to the rows of B: perm[j] = row of B_hat matched to row j, sgn[j] its sign.
align <- function(B_hat) {
  P <- B_hat %*% A
  perm <- sgn <- integer(d)
  rows <- cols <- seq_len(d)
  for (k in seq_len(d)) {
    sub <- abs(P[rows, cols, drop = FALSE])
    w <- which(sub == max(sub), arr.ind = TRUE)[1, ]
    i <- rows[w[1]]
    j <- cols[w[2]]
    perm[j] <- i
    sgn[j] <- sign(P[i, j])
    rows <- setdiff(rows, i)
    cols <- setdiff(cols, j)
  }
  list(perm = perm, sgn = sgn, dev = max(abs(abs(P[perm, ]) - diag(d))))
}

z <- stats::qnorm(0.975)
t0 <- proc.time()
res <- replicate(reps, simplify = FALSE, {
  x <- rica(N, A)
  fit <- suppressWarnings(nce(model = ica_model(), data = x, reference = ref, ratio = ratio, n_starts = 3))
  cf <- coef(fit)
  se <- sqrt(diag(vcov(fit)))
  Bh <- matrix(cf[-1], d, d, byrow = TRUE)
  Bse <- matrix(se[-1], d, d, byrow = TRUE)
  al <- align(Bh)
  est <- c(cf[[1]], as.vector(t(al$sgn * Bh[al$perm, ])))
  sd <- c(se[[1]], as.vector(t(Bse[al$perm, ])))
  list(est = est, se = sd, dev = al$dev, conv = isTRUE(fit$converged))
})
truth <- c(c_true, as.vector(t(B)))
nm <- c("c", sprintf("B[%d,%d]", rep(seq_len(d), each = d), rep(seq_len(d), d)))
est <- t(vapply(res, `[[`, numeric(d * d + 1), "est"))
se <- t(vapply(res, `[[`, numeric(d * d + 1), "se"))
dev <- vapply(res, `[[`, 0, "dev")
cover <- abs(est - rep(truth, each = reps)) <= z * se
colnames(cover) <- nm
cat(sprintf("ICA sandwich coverage: %d data sets, N = %d, ratio %g, d = %d, %.0f s\n", reps, N, ratio, d,
            (proc.time() - t0)[["elapsed"]]))
cat(sprintf("fits far from the truth (max |abs(B_hat A) - I| > 0.5 after matching): %d; not converged: %d\n",
            sum(dev > 0.5), sum(!vapply(res, `[[`, TRUE, "conv"))))
cat("95% interval coverage per parameter:\n")
print(round(colMeans(cover), 3))
cat(sprintf("B entries: %.3f, c: %.3f, all: %.3f (Monte Carlo se of one parameter's coverage %.3f)\n",
            mean(cover[, -1]), mean(cover[, 1]), mean(cover), sqrt(0.95 * 0.05 / reps)))
ratio_se <- colMeans(se) / apply(est, 2, stats::sd)
names(ratio_se) <- nm
cat("mean sandwich SE / Monte Carlo SD of the estimates:\n")
print(round(ratio_se, 2))
