# Edge recovery from incomplete data (Rhodes and Gutmann, 2019, section 5.2, Figure 5):
# VNCE against NCE with mean imputation, with complete-data NCE as the ceiling.
# Usage: Rscript bench/vnce.R [reps = 10] [d = 20] [n = 1000] [n_latent = 10] [nu = 1]
# The variational family is tgm_model()'s default ("ghk"); NCE_VNCE_FAMILY=lognormal selects the
# paper's joint lognormal.
# Prints median (and quartile) AUCs per graph and missing fraction, and fit times.
suppressPackageStartupMessages(library(nce))
args <- as.numeric(commandArgs(trailingOnly = TRUE))
reps <- if (length(args) >= 1) args[1] else 10
d <- if (length(args) >= 2) args[2] else 20
n <- if (length(args) >= 3) args[3] else 1000
n_latent <- if (length(args) >= 4) args[4] else 10
nu <- if (length(args) >= 5) args[5] else 1
family <- Sys.getenv("NCE_VNCE_FAMILY", "ghk")
fractions <- seq(0, 0.5, by = 0.1)
cat(sprintf("d = %d, n = %d, %d data sets per fraction, n_latent = %d, nu = %g, family %s, threads = %d\n",
            d, n, reps, n_latent, nu, family, getOption("nce.threads", 2L)))

timed <- function(expr) {
  t <- system.time(v <- suppressWarnings(expr))[["elapsed"]]
  list(value = v, time = t)
}

run_graph <- function(graph) {
  rows <- list()
  for (r in seq_len(reps)) {
    set.seed(1000 * r + (graph == "hub"))
    K <- if (graph == "ring") ring_graph(d) else hub_graph(d)
    x <- rtgm(n, K, burnin = 100, thin = 10)
    full <- timed(vnce(x, tgm_model(), ratio = nu))
    for (p in fractions) {
      xm <- x
      if (p > 0) xm[sample(length(x), round(p * length(x)))] <- NA
      v <- timed(vnce(xm, tgm_model(family), n_latent = n_latent, ratio = nu))
      m <- timed(vnce(xm, tgm_model(), impute = "mean", ratio = nu))
      rows[[length(rows) + 1L]] <- data.frame(
        graph = graph, rep = r, missing = p,
        vnce = edge_roc(v$value, K)$auc, nce_mean = edge_roc(m$value, K)$auc,
        nce_complete_data = edge_roc(full$value, K)$auc,
        t_vnce = v$time, t_mean = m$time, it_vnce = v$value$iterations, conv_vnce = v$value$converged)
    }
    cat(sprintf("  %s data set %d done\n", graph, r))
  }
  do.call(rbind, rows)
}

res <- rbind(run_graph("ring"), run_graph("hub"))
q <- function(v) sprintf("%.3f [%.3f, %.3f]", median(v), quantile(v, 0.25), quantile(v, 0.75))
tab <- do.call(rbind, lapply(split(res, list(res$missing, res$graph), drop = TRUE), function(s) {
  data.frame(graph = s$graph[1], missing = s$missing[1], vnce = q(s$vnce), nce_mean = q(s$nce_mean),
             complete_data = sprintf("%.3f", median(s$nce_complete_data)),
             vnce_ge_mean = sprintf("%d/%d", sum(s$vnce >= s$nce_mean), nrow(s)),
             sec_vnce = sprintf("%.1f", median(s$t_vnce)), sec_mean = sprintf("%.2f", median(s$t_mean)),
             iter_vnce = median(s$it_vnce), converged = sprintf("%d/%d", sum(s$conv_vnce), nrow(s)))
}))
rownames(tab) <- NULL
cat("\nMedian AUC [interquartile range] over data sets:\n")
print(tab, right = FALSE)
