# Main example of `make demo`: LATKES on eye-movement fixations. Fits the real fixations
# in ../shared/data/fixations.csv when present, without the lost-eye code (0, 0) (else scanpaths
# simulated with rlatkes()),
# prints the fit, and writes <outdir>/latkes-effects.png (the kernel's three effects and the
# spline intercept) and <outdir>/latkes-scanpath.png (an observed and a simulated scanpath).
library(nce)
args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args)) args[1] else "."
screen <- c(0, 1024, 0, 768)

csv <- file.path("..", "shared", "data", "fixations.csv")
set.seed(1)
if (file.exists(csv)) {
  fix <- utils::read.csv(csv)
  cat("data:", csv, "\n")
} else {
  fix <- rlatkes(2000, list(radius = function(r) -r / 200, dist = function(d) -d / 120,
                            angle = function(a) 0.4 * cos(4 * a)), window = screen, n_trials = 10)
  cat("data: simulated with rlatkes() (", csv, "not found)\n")
}
# The 1024 x 768 screen (../shared/data/README.md); (0, 0) is the tracker's code for a lost eye:
# those fixations are dropped and their trials split there (a message says how many).
t <- system.time(fit <- withCallingHandlers(
  latkes(fix, group = "trial", window = screen, ratio = 20, drop_points = c(0, 0)),
  nce_warning = function(w) { message("note: ", conditionMessage(w)); invokeRestart("muffleWarning") }))
print(summary(fit))
cat(sprintf("\nfitted in %.2f s; held-in log-likelihood (grid-normalised): %.1f\n", t[["elapsed"]], logLik(fit)))

file <- file.path(outdir, "latkes-effects.png")
grDevices::png(file, width = 1200, height = 900, res = 110, type = "cairo")
plot(fit)
invisible(grDevices::dev.off())
cat("effects plot written to", file, "\n")

sim <- simulate(fit, seed = 2)
obs <- fit$transitions
first <- names(which.max(table(obs$.sequence))) # the longest piece of a trial
path_obs <- rbind(data.frame(x = obs$x_prev[obs$.sequence == first][1], y = obs$y_prev[obs$.sequence == first][1]),
                  obs[obs$.sequence == first, c("x", "y")])
path_sim <- sim[sim$.sequence == first, ]
file <- file.path(outdir, "latkes-scanpath.png")
grDevices::png(file, width = 1200, height = 500, res = 110, type = "cairo")
op <- graphics::par(mfrow = c(1, 2), mar = c(2, 2, 2, 1))
for (p in list(list(path_obs, "observed scanpath"), list(path_sim, "simulated from the fitted kernel"))) {
  graphics::plot(p[[1]]$x, p[[1]]$y, type = "o", pch = 19, cex = 0.6, col = "firebrick", xlim = screen[1:2],
                 ylim = rev(screen[3:4]), asp = 1, xlab = "", ylab = "", main = p[[2]])
  graphics::rect(screen[1], screen[3], screen[2], screen[4], border = "grey60")
}
graphics::par(op)
invisible(grDevices::dev.off())
cat("scanpath plot written to", file, "\n")
