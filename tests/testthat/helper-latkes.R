# A LATKES kernel with centrality, saccade-length and cardinal-direction effects.
latkes_truth <- list(radius = function(r) -r / 200, dist = function(d) -d / 120,
                     angle = function(a) 0.4 * cos(4 * a))
screen <- c(0, 1024, 0, 768)

# Largest error of a fitted 1-D term against the truth, and the share of the grid inside the
# 95% band, on the part of the range below the 95th percentile of the observed values. The
# truth is centred as the fitted term is: to mean zero over the fit's rows (its
# identifiability constraint), so the band applies as it stands.
term_error <- function(fit, label, truth) {
  e <- latkes_effects(fit, n_grid = 200)[[label]]
  mf <- model.frame(fit)
  v <- mf[[attr(e, "variable")]]
  keep <- e$value <= stats::quantile(v[mf$.label == 1], 0.95)
  d <- e$fit - (truth(e$value) - mean(truth(v)))
  list(max = max(abs(d[keep])), inside = mean(abs(d[keep]) <= stats::qnorm(0.975) * e$se[keep]))
}

# Evaluate `expr` with options(nce.threads = n).
withr_threads <- function(n, expr) {
  old <- options(nce.threads = n)
  on.exit(options(old))
  expr
}
