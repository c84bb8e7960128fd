# Main example of `make demo`: the truncated exponential fitted by NCE against
# its exact maximum likelihood estimate. Writes <outdir>/nce-demo.png.
# (Until latkes() lands this is the package's main example.)
library(nce)
args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args)) args[1] else "."

set.seed(1)
theta <- 2
n <- 1000
y <- log1p(runif(n) * (exp(theta) - 1)) / theta
fit <- nce(~ y, data.frame(y = y), reference = ref_uniform(y = c(0, 1)), ratio = 20)
print(summary(fit))

mean_y <- function(t) exp(t) / (exp(t) - 1) - 1 / t
mle <- uniroot(function(t) mean_y(t) - mean(y), c(-50, 50), tol = 1e-12)$root
cat(sprintf("\nexact MLE of theta: %.4f   NCE: %.4f (s.e. %.4f)\n", mle, coef(fit)[["y"]], sqrt(vcov(fit)[2, 2])))
cat(sprintf("log Z at the MLE:   %.4f   NCE: %.4f\n", log((exp(mle) - 1) / mle), fit$log_normaliser))

grid <- data.frame(y = seq(0, 1, length.out = 201))
p <- predict(fit, grid, type = "density", se.fit = TRUE)
file <- file.path(outdir, "nce-demo.png")
grDevices::png(file, width = 900, height = 600, res = 110, type = "cairo")
graphics::hist(y, breaks = 30, freq = FALSE, col = "grey90", border = "white",
               main = "Truncated exponential fitted by noise-contrastive estimation",
               xlab = "y", ylim = c(0, max(p$fit + 2 * p$se.fit) * 1.05))
graphics::polygon(c(grid$y, rev(grid$y)), c(p$fit - 2 * p$se.fit, rev(p$fit + 2 * p$se.fit)),
                  col = grDevices::adjustcolor("steelblue", 0.3), border = NA)
graphics::lines(grid$y, p$fit, col = "steelblue", lwd = 2)
graphics::lines(grid$y, exp(mle * grid$y) * mle / (exp(mle) - 1), col = "firebrick", lty = 2, lwd = 2)
graphics::legend("topleft", bty = "n", lwd = 2, lty = c(1, 2), col = c("steelblue", "firebrick"),
                 legend = c("NCE density (intercept = -log Z), 95% band", "exact maximum likelihood"))
invisible(grDevices::dev.off())
cat("plot written to", file, "\n")
