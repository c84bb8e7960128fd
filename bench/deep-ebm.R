# Deep energy-based models: the MLP energy of nce() against the te() smooth of nce() and ks::kde()
# on 2-D targets with known densities (a ring; 8 Gaussians on a circle), n = 5000 each.
# Error: mean absolute error of the normalised log density on a grid over the data's support
# (grid cells where the true density exceeds 1e-3 of its maximum).
# Run: Rscript bench/deep-ebm.R   (prints one table; ks is optional)
suppressMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
seeds <- if (length(args)) as.integer(args) else 1L

ring <- list(
  name = "ring",
  draw = function(n) {
    a <- runif(n, 0, 2 * pi)
    r <- rnorm(n, 2, 0.2)
    cbind(x1 = r * cos(a), x2 = r * sin(a))
  },
  # density of (r, a) is N(r; 2, 0.2) / (2 pi); in (x1, x2) divide by r
  logd = function(x) {
    r <- sqrt(rowSums(x^2))
    dnorm(r, 2, 0.2, log = TRUE) - log(2 * pi) - log(r)
  })
mix8 <- list(
  name = "8 Gaussians",
  draw = function(n) {
    k <- sample.int(8, n, TRUE)
    a <- 2 * pi * k / 8
    cbind(x1 = 2 * cos(a) + rnorm(n, 0, 0.25), x2 = 2 * sin(a) + rnorm(n, 0, 0.25))
  },
  logd = function(x) {
    a <- 2 * pi * (1:8) / 8
    l <- sapply(1:8, function(k) dnorm(x[, 1], 2 * cos(a[k]), 0.25, log = TRUE) +
      dnorm(x[, 2], 2 * sin(a[k]), 0.25, log = TRUE))
    m <- apply(l, 1, max)
    m + log(rowMeans(exp(l - m)))
  })

grid_error <- function(target, logd_hat, x) {
  g <- seq(-3, 3, length.out = 121)
  gx <- as.matrix(expand.grid(x1 = g, x2 = g))
  truth <- target$logd(gx)
  keep <- is.finite(truth) & truth > max(truth[is.finite(truth)]) + log(1e-3)
  mean(abs(logd_hat(gx[keep, , drop = FALSE]) - truth[keep]))
}

ref <- ref_uniform(x1 = c(-3.5, 3.5), x2 = c(-3.5, 3.5))
rows <- list()
for (target in list(ring, mix8)) for (seed in seeds) {
  set.seed(seed)
  x <- target$draw(5000)
  d <- as.data.frame(x)
  t_mlp <- system.time(f_mlp <- nce(~ mlp(x1, x2, hidden = c(64, 64)), d, ref, ratio = 10))[["elapsed"]]
  e_mlp <- grid_error(target, function(g) predict(f_mlp, as.data.frame(g)), x)
  t_te <- system.time(f_te <- nce(~ te(x1, x2, k = 10), d, ref, ratio = 10))[["elapsed"]]
  e_te <- grid_error(target, function(g) predict(f_te, as.data.frame(g)), x)
  e_kde <- NA_real_
  t_kde <- NA_real_
  if (requireNamespace("ks", quietly = TRUE)) {
    t_kde <- system.time(k <- ks::kde(x))[["elapsed"]]
    e_kde <- grid_error(target, function(g) log(pmax(predict(k, x = g), 1e-300)), x)
  }
  rows[[length(rows) + 1L]] <- data.frame(target = target$name, seed = seed, mlp = e_mlp, te = e_te, kde = e_kde,
                                          ratio_best = e_mlp / min(e_te, e_kde, na.rm = TRUE),
                                          sec_mlp = t_mlp, sec_te = t_te, sec_kde = t_kde)
  print(rows[[length(rows)]], digits = 3, row.names = FALSE)
}
cat("\nMean absolute error of the log density on the grid (truth > 1e-3 x max):\n")
print(do.call(rbind, rows), digits = 3, row.names = FALSE)
