# Coverage of the sandwich intervals of nonlinear NCE: a 2-D Gaussian in a Cholesky
# parametrisation (f = -|L'(x - mu)|^2 / 2, L lower triangular with exp() on its diagonal), the
# truth known, `reps` data sets of n = 300 at ratio 5. Rscript bench/nonlinear-coverage.R [reps]
suppressMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
reps <- if (length(args)) as.integer(args[1]) else 400L
sigma <- matrix(c(1, 0.6, 0.6, 2), 2)
l <- t(chol(solve(sigma)))
truth <- c(`(Intercept)` = -(log(2 * pi) - log(l[1, 1]) - log(l[2, 2])), m1 = 1, m2 = -1,
           a = log(l[1, 1]), b = l[2, 1], c = log(l[2, 2]))
f <- ~ -((exp(a) * (x1 - m1) + b * (x2 - m2))^2 + (exp(c) * (x2 - m2))^2) / 2
ref <- ref_normal(x1 = 1, x2 = -1, cov = 2 * sigma)
set.seed(42)
cover <- replicate(reps, {
  z <- matrix(rnorm(600), 300) %*% chol(sigma)
  x <- data.frame(x1 = z[, 1] + 1, x2 = z[, 2] - 1)
  fit <- nce(f, x, ref, ratio = 5, start = c(m1 = 0, m2 = 0, a = 0, b = 0, c = 0))
  ci <- confint(fit)
  ci[, 1] <= truth[rownames(ci)] & truth[rownames(ci)] <= ci[, 2]
})
cat(sprintf("95%% sandwich intervals over %d data sets:\n", reps))
print(round(rowMeans(cover), 3))
cat(sprintf("all parameters: %.3f (Monte Carlo se %.3f)\n", mean(cover), sqrt(0.95 * 0.05 / length(cover))))
