# Neural ratio estimation on ARCH(1) (the simulator vignette's model: 17 summaries, uniform
# prior on (t1, t2) in [-1, 1] x [0, 1], observed series at t1 = 0.3, t2 = 0.7): the posterior of
# ratio_amortised(classifier = "mlp") against the exact posterior on a 41 x 41 grid.
# Run: Rscript bench/ratio-mlp.R [gam]   ("gam" also fits the GAM classifier with its default
# formula at 1,000 pairs, 27-42 s, for the time ratio).
suppressMessages(library(nce))
arch_simulate <- function(theta, n, n_obs = 100L) {
  t1 <- theta[, "t1"]
  t2 <- theta[, "t2"]
  e <- stats::rnorm(n)
  y_prev <- numeric(n)
  y <- matrix(0, n, n_obs)
  xi <- matrix(stats::rnorm(n * n_obs), n, n_obs)
  for (i in seq_len(n_obs)) {
    e <- xi[, i] * sqrt(0.2 + t2 * e^2)
    y_prev <- t1 * y_prev + e
    y[, i] <- y_prev
  }
  y
}
arch_summaries <- function(y) {
  if (is.null(dim(y))) y <- matrix(y, 1L)
  n <- ncol(y)
  mu <- rowMeans(y)
  v <- rowSums((y - mu)^2) / (n - 1)
  sc <- (y - mu) / sqrt(v)
  ac <- vapply(1:5, function(l) rowSums(sc[, (l + 1):n, drop = FALSE] * sc[, 1:(n - l), drop = FALSE]) / (n - l),
               numeric(nrow(y)))
  if (is.null(dim(ac))) ac <- matrix(ac, 1L)
  pr <- utils::combn(5, 2)
  pw <- matrix(vapply(1:10, function(k) ac[, pr[1, k]] * ac[, pr[2, k]], numeric(nrow(y))), nrow(y))
  out <- cbind(mu, v, ac, pw)
  colnames(out) <- c("mean", "var", paste0("ac", 1:5), paste0("pw", pr[1, ], pr[2, ]))
  out
}
arch_loglik <- function(y, t1, t2, gh) {
  n <- length(y)
  e <- y - t1 * c(0, y[-n])
  sum(stats::dnorm(e[-1], 0, sqrt(0.2 + t2 * e[-n]^2), log = TRUE)) +
    log(sum(gh$w * stats::dnorm(e[1], 0, sqrt(0.2 + t2 * gh$x^2))))
}
gh <- local({
  k <- 60L
  J <- matrix(0, k, k)
  J[cbind(1:(k - 1), 2:k)] <- J[cbind(2:k, 1:(k - 1))] <- sqrt(seq_len(k - 1))
  e <- eigen(J, symmetric = TRUE)
  list(x = e$values, w = e$vectors[1, ]^2)
})
set.seed(7)
y_obs <- arch_simulate(cbind(t1 = 0.3, t2 = 0.7), 1)
prior <- prior_uniform(t1 = c(-1, 1), t2 = c(0, 1))
grid <- as.matrix(expand.grid(t1 = seq(-1, 1, length.out = 41), t2 = seq(0, 1, length.out = 41)))
ll <- apply(grid, 1, function(th) arch_loglik(drop(y_obs), th[["t1"]], th[["t2"]], gh))
moments <- function(lw) {
  w <- exp(lw - max(lw))
  w <- w / sum(w)
  m <- colSums(grid * w)
  c(m, sqrt(colSums(grid^2 * w) - m^2))
}
ex <- moments(ll)
nd <- data.frame(grid, arch_summaries(y_obs)[rep(1, nrow(grid)), , drop = FALSE])
row <- function(label, n, seed, sec, est) {
  data.frame(classifier = label, pairs = n, seed = seed, seconds = sec, err_mean_t1 = est[1] - ex[1],
             err_mean_t2 = est[2] - ex[2], sd_ratio_t1 = est[3] / ex[3], sd_ratio_t2 = est[4] / ex[4])
}
out <- list()
for (n in c(1000, 2000)) for (seed in 1:4) {
  set.seed(seed)
  sec <- system.time(r <- ratio_amortised(arch_simulate, arch_summaries, prior, n = n, batch = TRUE,
                                          classifier = "mlp"))[["elapsed"]]
  out[[length(out) + 1L]] <- row("mlp", n, seed, sec, moments(predict(r, nd)))
}
if ("gam" %in% commandArgs(TRUE)) {
  set.seed(1)
  sec <- system.time(r <- ratio_amortised(arch_simulate, arch_summaries, prior, n = 1000, batch = TRUE,
                                          classifier = "gam"))[["elapsed"]]
  out[[length(out) + 1L]] <- row("gam (default formula)", 1000, 1, sec, moments(predict(r, nd)))
}
cat(sprintf("Exact posterior: means %.3f, %.3f; sds %.3f, %.3f\n", ex[1], ex[2], ex[3], ex[4]))
print(do.call(rbind, out), digits = 3, row.names = FALSE)
