# discrete = TRUE (discretised covariates, compressed design): against the exact fit on the same
# rows, against mgcv::bam(discrete = TRUE), and thread invariance.

discrete_data <- function() {
  set.seed(11)
  truth <- list(radius = function(r) -r / 200, dist = function(d) -d / 120, angle = function(a) 0.4 * cos(4 * a))
  rlatkes(1500, truth, window = c(0, 1024, 0, 768), n_trials = 10)
}

discrete_kernel <- ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 12)

fit_latkes_seeded <- function(d, ...) {
  set.seed(5)
  latkes(d, group = "trial", window = c(0, 1024, 0, 768), ratio = 10, kernel = discrete_kernel,
         intercept = ~ te(x_prev, y_prev, k = 4), ...)
}

test_that("the discrete latkes fit is within 0.01 of the exact fit on the same rows", {
  d <- discrete_data()
  exact <- fit_latkes_seeded(d)
  disc <- fit_latkes_seeded(d, discrete = TRUE)
  expect_equal(nrow(disc$nce_frame), nrow(exact$nce_frame))
  expect_true(disc$converged)
  # Same smoothing parameters: only the rounding of the covariates differs.
  fixed <- fit_latkes_seeded(d, discrete = TRUE, sp = unname(exact$sp))
  expect_lt(max(abs(fixed$linear.predictors - exact$linear.predictors)), 0.01)
  # Own smoothing parameters (REML is flat in the near-linear terms): the curves still agree.
  expect_lt(max(abs(disc$linear.predictors - exact$linear.predictors)), 0.02)
  expect_equal(sum(disc$edf), sum(exact$edf), tolerance = 0.05)
  # predict() uses the stored smooths (mgcv's PredictMat) and reproduces the fitted values.
  nd <- disc$nce_frame[1:50, ]
  expect_equal(unname(predict(disc, newdata = nd, type = "link")),
               disc$linear.predictors[1:50] - nd$.offset, tolerance = 0.01)
})

test_that("the discrete fit agrees with mgcv::bam(discrete = TRUE) on the same rows", {
  skip_if_not_installed("mgcv")
  d <- discrete_data()
  disc <- fit_latkes_seeded(d, discrete = TRUE)
  mf <- model.frame(disc)
  b <- mgcv::bam(.label ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 12) +
                   te(x_prev, y_prev, k = 4) + offset(.offset), family = stats::binomial, data = mf,
                 method = "fREML", discrete = TRUE, knots = list(angle = c(-pi, pi)), nthreads = 1)
  # bam rounds to 1000 values and spreads the cr/cc knots evenly over its rounded values (the exact
  # fit and ours put them at data quantiles), so the two differ by more than their rounding: about
  # 0.13 at most on these rows, against 0.006 between our discrete and exact fits.
  dev <- abs(disc$linear.predictors - b$linear.predictors)
  expect_lt(max(dev), 0.2)
  expect_lt(mean(dev), 0.05)
  expect_equal(sum(disc$edf), sum(b$edf), tolerance = 0.1)
})

test_that("discrete fits do not depend on the number of threads", {
  d <- discrete_data()
  old <- options(nce.threads = 1L)
  on.exit(options(old))
  one <- fit_latkes_seeded(d, discrete = TRUE)
  options(nce.threads = 2L)
  two <- fit_latkes_seeded(d, discrete = TRUE)
  expect_identical(coef(one), coef(two))
  expect_identical(one$linear.predictors, two$linear.predictors)
})

test_that("discrete snce(): free intercepts, and smooths with `by` keep their exact basis", {
  set.seed(122)
  d <- do.call(rbind, lapply(1:2, function(s) data.frame(subject = factor(s), y = rchain(400, 2))))
  fit <- function(formula, ...) {
    set.seed(9)
    snce(formula, d, ref_uniform(y = c(0, 1)), ratio = 10, group = "subject", ...)
  }
  f1 <- ~ I(y * y_prev) + s(y, bs = "cr", k = 6)
  exact <- fit(f1, intercept = "transition")
  disc <- fit(f1, intercept = "transition", discrete = TRUE)
  expect_lt(max(abs(disc$linear.predictors - exact$linear.predictors)), 0.01)
  expect_equal(disc$transition_intercepts, exact$transition_intercepts, tolerance = 1e-2)
  # A by-smooth is not discretised: same model, same fit as the exact engine.
  f2 <- ~ I(y * y_prev) + s(y, by = subject, k = 5)
  exact <- fit(f2)
  disc <- fit(f2, discrete = TRUE)
  expect_equal(coef(disc), coef(exact), tolerance = 1e-6)
  expect_equal(disc$linear.predictors, exact$linear.predictors, tolerance = 1e-6)
  expect_error(fit(f1, discrete = NA), class = "nce_error_input")
})

# nce() with smooth terms: the issue's model (s(u) + s(v) + s(u, v), side constraints) on ~20,000 rows.
nce_discrete_fit <- function(...) {
  set.seed(31)
  d <- data.frame(u = stats::rbeta(1000, 2, 3), v = stats::runif(1000))
  set.seed(32)
  nce(~ s(u, bs = "cr", k = 10) + s(v, bs = "cr", k = 10) + s(u, v, k = 30), d,
      ref_uniform(u = c(0, 1), v = c(0, 1)), ratio = 20, ...)
}

test_that("nce(discrete = TRUE) is within 0.01 of the exact fit, with the same edf", {
  exact <- nce_discrete_fit()
  disc <- nce_discrete_fit(discrete = TRUE)
  expect_s3_class(disc, "nce_gam")
  expect_true(disc$discrete)
  expect_true(disc$converged)
  expect_equal(nrow(disc$nce_frame), 21000L)
  # mgcv's side constraints delete the same columns of s(u, v) as in the exact fit.
  expect_identical(names(coef(disc)), names(coef(exact)))
  expect_lt(max(abs(disc$linear.predictors - exact$linear.predictors)), 0.01)
  expect_equal(sum(disc$edf), sum(exact$edf), tolerance = 0.05)
  # Sandwich standard errors close to the exact fit's.
  expect_equal(sqrt(diag(vcov(disc)))[1], sqrt(diag(vcov(exact)))[1], tolerance = 0.05)
  # predict() (mgcv's PredictMat on the stored smooths) reproduces the fitted linear predictor.
  nd <- disc$nce_frame[c(1:20, 1001:1020), ]
  expect_equal(unname(predict(disc, newdata = nd, type = "link")),
               disc$linear.predictors[c(1:20, 1001:1020)] - nd$.offset, tolerance = 0.01)
  expect_equal(unname(predict(disc, newdata = nd)), unname(predict(exact, newdata = nd)), tolerance = 0.02)
  s <- summary(disc)
  expect_equal(nrow(s$s.table), 3L)
  expect_true(all(is.finite(s$s.table[, "edf"])))
})

test_that("a term whose rounding leaves more distinct rows than half the rows keeps its exact basis", {
  set.seed(31)
  dat <- data.frame(u = runif(300), v = runif(300), w = runif(300))
  ref <- ref_uniform(u = c(0, 1), v = c(0, 1), w = c(0, 1))
  # Three covariates on the 25-value grid: nearly every one of the 1,500 rows its own cell.
  set.seed(4)
  exact <- nce(~ s(u, v, w, k = 15), data = dat, reference = ref, ratio = 4)
  set.seed(4)
  disc <- nce(~ s(u, v, w, k = 15), data = dat, reference = ref, ratio = 4, discrete = TRUE)
  expect_true(disc$discrete)
  expect_lt(max(abs(disc$linear.predictors - exact$linear.predictors)), 1e-5)
  setup <- nce:::term_setup(~ s(u, v, w, k = 15), disc$nce_frame, mode = "discrete")
  expect_equal(nrow(setup$terms[[2L]]$values), nrow(disc$nce_frame))
  # A one-covariate term on these rows still rounds (2,000 grid values, 1,500 rows, ties).
  setup <- nce:::term_setup(~ s(u, k = 15), rbind(disc$nce_frame, disc$nce_frame), mode = "discrete")
  expect_lt(nrow(setup$terms[[2L]]$values), nrow(disc$nce_frame))
})

test_that("nce(discrete = TRUE) does not depend on the number of threads", {
  old <- options(nce.threads = 1L)
  on.exit(options(old))
  one <- nce_discrete_fit(discrete = TRUE)
  options(nce.threads = 2L)
  two <- nce_discrete_fit(discrete = TRUE)
  expect_identical(coef(one), coef(two))
  expect_identical(one$linear.predictors, two$linear.predictors)
  expect_identical(vcov(one), vcov(two))
})

test_that("a discretised design fits the same compressed or expanded, and says which layout it took", {
  fits <- lapply(c(compressed = "compressed", dense = "dense"), function(layout) {
    old <- options(nce.discrete_layout = layout)
    on.exit(options(old))
    nce_discrete_fit(discrete = TRUE)
  })
  expect_identical(fits$compressed$discrete_layout, "compressed")
  expect_identical(fits$dense$discrete_layout, "dense")
  # One model, two ways of holding its matrix: equal to rounding.
  expect_equal(coef(fits$dense), coef(fits$compressed), tolerance = 1e-7)
  expect_equal(fits$dense$gcv.ubre, fits$compressed$gcv.ubre, tolerance = 1e-9)
  expect_equal(vcov(fits$dense), vcov(fits$compressed), tolerance = 1e-6)
  # The default lets the cost model choose (and with many penalties the exact design where
  # compression would not pay); print() names it.
  auto <- nce_discrete_fit(discrete = TRUE)
  expect_true(auto$discrete_layout %in% c("compressed", "dense"))
  expect_identical(coef(auto), coef(fits[[auto$discrete_layout]]))
  expect_output(print(fits$dense), "rounded bases held as one dense block")
  expect_output(print(fits$compressed), "design held compressed")
  old <- options(nce.discrete_layout = "sparse")
  on.exit(options(old))
  expect_error(nce_discrete_fit(discrete = TRUE), class = "nce_error_input", regexp = "nce.discrete_layout")
})

test_that("many terms of many values on few rows are fitted exactly, few terms on many rows compressed", {
  # The 5-parameter classifier's default shape in small: 12 smooths and ti() pairs on 3,000 rows,
  # each term with hundreds of distinct rounded values: the cross blocks of 78 pairs of terms,
  # a pass over the rows each, cost more than one dense pass (bench/README.md), which costs what
  # a pass over the exact design costs, and with 18 penalties the fit is the exact one, bit for bit.
  # With 3 penalties the rounded bases stay, held dense.
  set.seed(8)
  n <- 1500
  d <- as.data.frame(matrix(runif(6 * n), n, 6, dimnames = list(NULL, paste0("x", 1:6))))
  ref <- do.call(ref_uniform, stats::setNames(rep(list(c(0, 1)), 6), names(d)))
  form <- ~ s(x1, k = 6) + s(x2, k = 6) + s(x3, k = 6) + s(x4, k = 6) + s(x5, k = 6) + s(x6, k = 6) +
    ti(x1, x2, k = 4) + ti(x3, x4, k = 4) + ti(x5, x6, k = 4) + ti(x1, x3, k = 4) + ti(x2, x4, k = 4) +
    ti(x4, x6, k = 4)
  set.seed(9)
  many <- nce(form, d, ref, ratio = 1, discrete = TRUE)
  expect_identical(many$discrete_layout, "exact")
  expect_true(many$converged)
  set.seed(9)
  exact <- nce(form, d, ref, ratio = 1)
  expect_identical(coef(many), coef(exact))
  expect_identical(vcov(many), vcov(exact))
  expect_output(print(many), "fitted exactly: a compressed design would not be faster here")
  # update() keeps the choice; a forced layout keeps the rounded design.
  expect_identical(coef(update(many)), coef(many))
  old <- options(nce.discrete_layout = "dense")
  on.exit(options(old))
  set.seed(9)
  dense <- nce(form, d, ref, ratio = 1, discrete = TRUE)
  expect_identical(dense$discrete_layout, "dense")
  options(old)
  # One smooth of 30 basis functions on 21,000 rows: its per-value sums and no cross blocks, against
  # a dense pass of 31 columns.
  set.seed(10)
  few <- nce(~ s(u, k = 30), data.frame(u = rbeta(1000, 2, 3)), ref_uniform(u = c(0, 1)), ratio = 20,
             discrete = TRUE)
  expect_identical(few$discrete_layout, "compressed")
  # Three penalties, dense by the cost model (bench/discrete-layout.R's three-term fit): rounded.
  set.seed(1)
  uv <- data.frame(u = stats::rbeta(2000, 2, 3), v = stats::rbeta(2000, 3, 2))
  set.seed(2)
  three <- nce(~ s(u, bs = "cr", k = 10) + s(v, bs = "cr", k = 10) + s(u, v, k = 30), uv,
               ref_uniform(u = c(0, 1), v = c(0, 1)), ratio = 20, discrete = TRUE)
  expect_identical(three$discrete_layout, "dense")
})

test_that("nce(discrete = TRUE) is refused without smooth terms and with method = \"poisson\"", {
  d <- data.frame(u = c(0.2, 0.5, 0.7), v = c(0.1, 0.4, 0.9))
  ref <- ref_uniform(u = c(0, 1), v = c(0, 1))
  expect_error(nce(~ u + v, d, ref, discrete = TRUE), class = "nce_error_input", regexp = "discrete")
  expect_error(nce(~ s(u), d, ref, method = "poisson", discrete = TRUE), class = "nce_error_input",
               regexp = "discrete")
  expect_error(nce(~ u, d, ref, given = "v", discrete = TRUE), class = "nce_error_input", regexp = "discrete")
})
