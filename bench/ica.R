# The ICA experiment of Gutmann and Hyvarinen (2010, Figure 1), section 3.1 of the NCL report:
# x = A s in 4-D, Laplace sources of unit variance, Gaussian reference with covariance A A'.
# For each N (log-spaced 100..1000) and each of `reps` random mixing matrices: NCE at ratio 1 and
# 10 (built-in Rust ICA model, 5 starts, best kept) and the MLE (normaliser known, 5 starts).
# Error of B: rows of B_hat matched to rows of B = A^{-1} greedily on |B_hat A| (largest entry
# first, then the largest among the remaining rows and columns), each row's sign set by the sign
# of its matched entry; squared error sum((B_aligned - B)^2). Error of c: (c_hat - c)^2 with
# c = log|det B| - 2 log 2. Medians over the mixing matrices.
#
# Rscript bench/ica.R [reps] [out.csv] [seed]   (R_LIBS pointing at the installed package);
# several processes with different seeds can share the reps, then bench/ica-combine.R merges them.
suppressMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
reps <- if (length(args) >= 1) as.integer(args[1]) else 100L
out <- if (length(args) >= 2) args[2] else "inst/extdata/ica-bench.csv"
seed <- if (length(args) >= 3) as.integer(args[3]) else 20101L
Ns <- round(10^seq(2, 3, length.out = 5))
d <- 4

align_error <- function(B_hat, A) {
  B <- solve(A)
  P <- B_hat %*% A
  al <- matrix(0, d, d)
  rows <- seq_len(d)
  cols <- seq_len(d)
  for (k in seq_len(d)) {
    sub <- abs(P[rows, cols, drop = FALSE])
    w <- which(sub == max(sub), arr.ind = TRUE)[1, ]
    i <- rows[w[1]]
    j <- cols[w[2]]
    al[j, ] <- sign(P[i, j]) * B_hat[i, ]
    rows <- setdiff(rows, i)
    cols <- setdiff(cols, j)
  }
  sum((al - B)^2)
}
c_true <- function(A) log(abs(det(solve(A)))) - d / 2 * log(2)

one <- function(N) {
  repeat {
    A <- matrix(rnorm(d * d), d)
    if (kappa(A) < 50) break  # G&H draw random well-conditioned mixing matrices
  }
  x <- rica(N, A)
  ref <- do.call(ref_normal, c(as.list(stats::setNames(rep(0, d), names(x))), list(cov = A %*% t(A))))
  res <- c(N = N)
  for (r in c(1, 10)) {
    fit <- suppressWarnings(nce(model = ica_model(), data = x, reference = ref, ratio = r, n_starts = 5))
    res[paste0("B_nce", r)] <- align_error(ica_B(fit), A)
    res[paste0("c_nce", r)] <- (coef(fit)[[1]] - c_true(A))^2
    res[paste0("conv_nce", r)] <- fit$converged
  }
  m <- suppressWarnings(ica_mle(x, n_starts = 5))
  res["B_mle"] <- align_error(m$B, A)
  res["c_mle"] <- (m$c - c_true(A))^2
  res
}

set.seed(seed)
t0 <- proc.time()
all <- NULL
for (N in if (reps > 0) Ns) {
  rows <- t(vapply(seq_len(reps), function(i) one(N), numeric(9)))
  all <- rbind(all, rows)
  tab <- aggregate(. ~ N, data = as.data.frame(all), FUN = median)
  tab$reps <- as.vector(table(all[, "N"]))
  write.csv(tab, out, row.names = FALSE)
  write.csv(as.data.frame(all), sub("\\.csv$", "-raw.csv", out), row.names = FALSE)
  cat(sprintf("N = %d done (%.0f s)\n", N, (proc.time() - t0)[["elapsed"]]))
}
if (reps > 0) {
  print(tab, digits = 3)
  # slope of log median error on log N (1/N gives -1)
  for (v in c("B_nce1", "B_nce10", "B_mle", "c_nce1", "c_nce10", "c_mle")) {
    cat(sprintf("slope %s: %.2f\n", v, coef(lm(log(tab[[v]]) ~ log(tab$N)))[[2]]))
  }
}

# Speed: bench/ica-speed.R (CPU time of one fit and of the R-callback route).
