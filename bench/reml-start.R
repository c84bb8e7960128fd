# Where the REML fit starts (issue #34): performance iteration from `PERFORMANCE_MIN_ROWS` rows
# (nce-core engine/reml.rs), the start at the automatic scale below. For nce() fits of four
# models (one cr term; te(); s + s + ti(); the three-term thin-plate model of
# bench/smooth-setup.R) at data sizes n (ratio 20: 21 n rows), 3 seeds each, prints the inner
# iterations, the REML score minus mgcv::gam(method = "REML")'s on the same rows and model, the
# largest difference in the linear predictor from gam's and the fit's time on one thread. Run it
# on two builds to compare starts (the score and eta columns should agree; iter is the cost).
# Run: R_LIBS=.Rlib Rscript bench/reml-start.R [n ...]   (default n = 1000 2000 4000)
suppressPackageStartupMessages(library(nce))
options(nce.threads = 1L)
args <- commandArgs(trailingOnly = TRUE)
sizes <- if (length(args)) as.numeric(args) else c(1000, 2000, 4000)
forms <- list(cr = ~ s(a, bs = "cr"), te = ~ te(a, b), ti = ~ s(a, bs = "cr") + s(b, bs = "cr") + ti(a, b),
              tp = ~ s(a, bs = "cr", k = 10) + s(b, bs = "cr", k = 10) + s(a, b, k = 30))
rows <- list()
for (n in sizes) for (seed in 1:3) {
  set.seed(seed)
  dat <- data.frame(a = stats::rbeta(n, 2, 3), b = stats::rbeta(n, 3, 2))
  dat$b <- pmin(pmax(dat$b + 0.2 * sin(6 * dat$a) * (dat$b > 0.2), 0.001), 0.999)
  ref <- ref_uniform(a = c(0, 1), b = c(0, 1))
  for (nm in names(forms)) {
    set.seed(100 + seed)
    t <- system.time(fit <- nce(forms[[nm]], data = dat, reference = ref, ratio = 20))[["elapsed"]]
    mf <- model.frame(fit)
    mf$.label <- c(rep(1, n), rep(0, nrow(mf) - n))
    g <- mgcv::gam(stats::update(forms[[nm]], .label ~ . + offset(.offset)), family = stats::binomial, data = mf,
                   method = "REML")
    rows[[length(rows) + 1L]] <- data.frame(rows = nrow(mf), seed = seed, model = nm, iter = fit$iter,
                                            score_minus_gam = fit$gcv.ubre - g$gcv.ubre,
                                            max_eta_diff = max(abs(fit$linear.predictors - g$linear.predictors)),
                                            edf = sum(fit$edf), edf_gam = sum(g$edf), seconds = t)
  }
}
tab <- do.call(rbind, rows)
rownames(tab) <- NULL
print(tab, digits = 4)
cat(sprintf("inner iterations in all: %d; largest score above gam's: %.2e; largest eta difference: %.2e\n",
            sum(tab$iter), max(tab$score_minus_gam), max(tab$max_eta_diff)))
