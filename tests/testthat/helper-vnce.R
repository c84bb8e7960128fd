# Sufficient statistics of the truncated Gaussian graphical model exp(-x'Kx/2 - c): one column per
# K_ij, i <= j, in the order of which(upper.tri(.., diag = TRUE)), then one for c. The design of
# the equivalent NCE logistic regression, for the checks of vnce() against glm().
tgm_features <- function(x) {
  d <- ncol(x)
  up <- which(upper.tri(diag(d), diag = TRUE), arr.ind = TRUE)
  f <- sapply(seq_len(nrow(up)), function(k) {
    i <- up[k, 1]; j <- up[k, 2]
    if (i == j) -x[, i]^2 / 2 else -x[, i] * x[, j]
  })
  cbind(f, -1)
}
