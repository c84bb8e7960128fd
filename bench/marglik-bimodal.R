# Marginal likelihood of a posterior with two separated modes: marglik_nce() with each reference
# ("auto", "normal", "warped", "mixture") against bridgesampling::bridge_sampler() on the same
# draws, against the exact log Z. The target is 0.5 N(-sep e1, I) + 0.5 N(sep e1, I) in d
# dimensions times exp(2.5), so log Z = 2.5; 4,000 independent draws per seed.
# Prints per reference the root-mean-square error of log Z, the mean standard error, the share of
# 95% intervals that hold 2.5 and the mean time.
# Run: Rscript bench/marglik-bimodal.R [d = 2] [seeds = 1:10] [sep = 3]
suppressMessages(library(nce))
args <- commandArgs(TRUE)
d <- if (length(args) >= 1) as.integer(args[1]) else 2L
seeds <- if (length(args) >= 2) eval(str2lang(args[2])) else 1:10
sep <- if (length(args) >= 3) as.numeric(args[3]) else 3
mu <- rbind(c(-sep, rep(0, d - 1)), c(sep, rep(0, d - 1)))
log_z <- 2.5
log_density <- function(x) {
  x <- as.matrix(x)
  l1 <- colSums(dnorm(t(x), mu[1, ], log = TRUE))
  l2 <- colSums(dnorm(t(x), mu[2, ], log = TRUE))
  m <- pmax(l1, l2)
  m + log(0.5 * exp(l1 - m) + 0.5 * exp(l2 - m)) + log_z
}
draws <- function(seed, n = 4000) {
  set.seed(seed)
  x <- matrix(rnorm(n * d), n, d) + mu[sample(1:2, n, TRUE), ]
  colnames(x) <- paste0("t", seq_len(d))
  x
}
rows <- list()
for (s in seeds) {
  x <- draws(s)
  for (ref in c("auto", "normal", "warped", "mixture")) {
    sec <- system.time(m <- suppressWarnings(marglik_nce(x, log_density, reference = ref)))[["elapsed"]]
    rows[[length(rows) + 1L]] <- data.frame(method = paste0("marglik_nce ", ref), seed = s,
                                            error = m$logml - log_z, se = m$se, sec = sec)
  }
  if (requireNamespace("bridgesampling", quietly = TRUE)) {
    bounds <- stats::setNames(rep(Inf, d), colnames(x))
    sec <- system.time(b <- bridgesampling::bridge_sampler(samples = x, data = NULL, lb = -bounds, ub = bounds,
                                                           log_posterior = function(p, data) log_density(matrix(p, 1L)),
                                                           silent = TRUE))[["elapsed"]]
    rows[[length(rows) + 1L]] <- data.frame(method = "bridgesampling", seed = s, error = b$logml - log_z,
                                            se = NA_real_, sec = sec)
  }
}
res <- do.call(rbind, rows)
cat(sprintf("d = %d, modes at +-%g, %d seeds; exact log Z = %g\n", d, sep, length(seeds), log_z))
for (m in unique(res$method)) {
  z <- res[res$method == m, ]
  cat(sprintf("%-22s rmse %.4f  mean se %s  95%% intervals hold log Z %s  mean %.2f s\n", m, sqrt(mean(z$error^2)),
              if (anyNA(z$se)) "   -  " else sprintf("%.4f", mean(z$se)),
              if (anyNA(z$se)) "   -" else sprintf("%d/%d", sum(abs(z$error) < 1.96 * z$se), nrow(z)), mean(z$sec)))
}
