# Regenerates the mgcv reference problems read by tests/reml_mgcv.rs.
# Run from this directory: Rscript make_data.R   (R 4.2, mgcv 1.8-41 were used).
# Each case directory holds X.csv (model matrix), y.csv, pen.csv (start (0-based), size, file
# of each penalty matrix S_j as mgcv scales it), S<j>.csv, and ref.csv (name, index, value)
# with mgcv's answers for a fixed-sp fit and for the REML fit.
library(mgcv)

# 15 significant digits (write.table's default) keep the files small and are ample here.
wr <- function(x, f) write.table(x, f, sep = ",", quote = FALSE, row.names = FALSE, col.names = FALSE)

dump_case <- function(name, formula, data, family, sp_fixed) {
  dir.create(name, showWarnings = FALSE)
  b <- gam(formula, data = data, family = family, method = "REML")
  bf <- gam(formula, data = data, family = family, method = "REML", sp = sp_fixed)
  # Same fit with much tighter outer convergence: tells which smoothing parameters mgcv's
  # default stopped short of infinity (the score is flat there, so their values are arbitrary).
  bt <- gam(formula, data = data, family = family, method = "REML",
            control = gam.control(newton = list(conv.tol = 1e-10), epsilon = 1e-10))
  X <- model.matrix(b)
  wr(X, file.path(name, "X.csv"))
  wr(matrix(b$y, ncol = 1), file.path(name, "y.csv"))
  pen <- NULL
  k <- 0
  for (s in b$smooth) for (S in s$S) {
    k <- k + 1
    f <- sprintf("S%d.csv", k)
    wr(S, file.path(name, f))
    pen <- rbind(pen, data.frame(start = s$first.para - 1, size = ncol(S), file = f))
  }
  write.csv(pen, file.path(name, "pen.csv"), row.names = FALSE, quote = FALSE)
  ref <- rbind(
    data.frame(name = "family", index = 0, value = if (family$family == "binomial") 0 else 1),
    data.frame(name = "sp_fixed", index = seq_along(sp_fixed) - 1, value = sp_fixed),
    data.frame(name = "coef_fixed", index = seq_along(coef(bf)) - 1, value = coef(bf)),
    data.frame(name = "reml_fixed", index = 0, value = bf$gcv.ubre),
    data.frame(name = "edf_fixed", index = seq_along(bf$edf) - 1, value = bf$edf),
    data.frame(name = "sp_reml", index = seq_along(b$sp) - 1, value = b$sp),
    data.frame(name = "coef_reml", index = seq_along(coef(b)) - 1, value = coef(b)),
    data.frame(name = "reml_score", index = 0, value = b$gcv.ubre),
    data.frame(name = "edf_reml", index = seq_along(b$edf) - 1, value = b$edf),
    data.frame(name = "vp_diag", index = seq_along(coef(b)) - 1, value = diag(b$Vp)),
    data.frame(name = "eta_reml", index = seq_along(b$linear.predictors) - 1, value = b$linear.predictors),
    data.frame(name = "outer_iter", index = 0, value = b$outer.info$iter),
    data.frame(name = "sp_tight", index = seq_along(bt$sp) - 1, value = bt$sp),
    data.frame(name = "reml_tight", index = 0, value = bt$gcv.ubre))
  ref$value <- sprintf("%.17g", ref$value)
  write.csv(ref, file.path(name, "ref.csv"), row.names = FALSE, quote = FALSE)
  cat(name, ": sp =", format(b$sp, digits = 6), " edf =", format(sum(b$edf), digits = 6),
      " score =", format(b$gcv.ubre, digits = 10), " conv:", b$outer.info$conv, "\n")
}

set.seed(20240611)
n <- 300
x <- runif(n)
d1 <- data.frame(x = x, y = rbinom(n, 1, plogis(sin(2 * pi * x) * 1.5)))
dump_case("bin_cr", y ~ s(x, bs = "cr", k = 10), d1, binomial(), sp_fixed = 0.5)

n <- 400
d2 <- data.frame(x1 = runif(n), x2 = runif(n))
d2$y <- rbinom(n, 1, plogis(2 * sin(3 * d2$x1) - 1 + 1.5 * cos(2 * pi * d2$x2)))
dump_case("bin_cr_cc", y ~ s(x1, bs = "cr", k = 8) + s(x2, bs = "cc", k = 8), d2, binomial(),
          sp_fixed = c(2, 0.1))

n <- 300
x <- runif(n)
d3 <- data.frame(x = x, y = rpois(n, exp(1 + sin(3 * x))))
dump_case("pois_cr", y ~ s(x, bs = "cr", k = 12), d3, poisson(), sp_fixed = 1)

# Tensor smooths: two penalties on one block. Seed 2 gives smoothing parameters five orders of
# magnitude apart (the case that needs a stable log|S|); seed 3 gives comparable ones.
te_data <- function(seed) {
  set.seed(seed)
  n <- 500
  d <- data.frame(x = runif(n), z = runif(n))
  d$y <- rbinom(n, 1, plogis(3 * sin(3 * d$x) * (d$z - 0.3) - 0.5 + 2 * d$z^2))
  d
}
dump_case("bin_te", y ~ te(x, z, k = c(5, 5)), te_data(2), binomial(), sp_fixed = c(1e4, 1e-2))
dump_case("bin_te2", y ~ te(x, z, k = c(5, 5)), te_data(3), binomial(), sp_fixed = c(3, 0.3))
