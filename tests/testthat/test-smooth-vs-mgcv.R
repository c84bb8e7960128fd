# Smooth terms: the Rust REML engine against mgcv::gam(method = "REML") on the same design.

agree_with_gam <- function(fit, g, log_sp_tol = 0.05) {
  expect_true(fit$converged)
  expect_lt(abs(sum(fit$edf) / sum(g$edf) - 1), 0.01)
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 0.01)
  ok <- well_defined_sp(g)
  expect_true(any(ok))
  expect_lt(max(abs(log(fit$sp[ok]) - log(g$sp[ok]))), log_sp_tol)
}

# REML is flat in the smoothing parameters of a smooth shrunk to its penalty's null space
# (the optimum is at infinity and each fitter stops somewhere different): compare the others.
well_defined_sp <- function(g) {
  unlist(lapply(g$smooth, function(s) {
    edf <- sum(g$edf[s$first.para:s$last.para])
    rep(edf > s$null.space.dim + 0.5, length(s$S))
  }))
}

test_that("one cr smooth (binomial NCE) matches gam REML", {
  set.seed(31)
  df <- data.frame(y = rbeta(1500, 2, 5))
  fit <- nce(~ s(y, bs = "cr", k = 10), df, ref_uniform(y = c(0, 1)), ratio = 10)
  g <- mgcv::gam(.label ~ s(y, bs = "cr", k = 10), binomial, model.frame(fit),
                 offset = .offset, method = "REML")
  agree_with_gam(fit, g)
  expect_equal(as.numeric(fit$gcv.ubre), as.numeric(g$gcv.ubre), tolerance = 1e-6)
  expect_equal(names(coef(fit)), names(coef(g)))
})

test_that("a fit of 110,000 rows, started by performance iteration, matches gam REML", {
  # From 100,000 rows the engine starts REML by performance iteration (as bam's fREML) before
  # its exact Newton steps: the same optimum as gam's, REML score to 1e-6 relative.
  skip_on_cran()
  set.seed(31)
  df <- data.frame(y = rbeta(10000, 2, 5))
  set.seed(101)
  fit <- nce(~ s(y, bs = "cr", k = 10), df, ref_uniform(y = c(0, 1)), ratio = 10)
  expect_equal(nrow(model.frame(fit)), 110000L)
  g <- mgcv::gam(.label ~ s(y, bs = "cr", k = 10), binomial, model.frame(fit),
                 offset = .offset, method = "REML")
  agree_with_gam(fit, g)
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-3)
  expect_equal(as.numeric(fit$gcv.ubre), as.numeric(g$gcv.ubre), tolerance = 1e-6)
})

test_that("cr and cc smooths together match gam REML", {
  set.seed(32)
  n <- 1500
  # angle-like cyclic variable on (-pi, pi] with a two-peaked density, and a second variable
  df <- data.frame(a = atan2(sin(rnorm(n, 0, 0.8) + pi * rbinom(n, 1, 0.5)), cos(rnorm(n, 0, 0.8) + pi * rbinom(n, 1, 0.5))),
                   b = rgamma(n, 2, 4))
  df <- df[df$b < 3, ]
  ref <- ref_uniform(a = c(-pi, pi), b = c(0, 3))
  fit <- nce(~ s(a, bs = "cc", k = 10) + s(b, bs = "cr", k = 8), df, ref, ratio = 10,
             knots = list(a = c(-pi, pi)))
  g <- mgcv::gam(.label ~ s(a, bs = "cc", k = 10) + s(b, bs = "cr", k = 8), binomial, model.frame(fit),
                 offset = .offset, method = "REML", knots = list(a = c(-pi, pi)))
  agree_with_gam(fit, g)
  # The cyclic smooth joins up at the ends.
  p <- predict(fit, data.frame(a = c(-pi, pi), b = 1), type = "terms")
  expect_equal(p[1, "s(a)"], p[2, "s(a)"], tolerance = 1e-8)
})

test_that("a tensor smooth (two penalties on one block) matches gam REML", {
  set.seed(33)
  n <- 1200
  df <- data.frame(a = rbeta(n, 2, 2), b = rbeta(n, 2, 4))
  fit <- nce(~ te(a, b, k = 5), df, ref_uniform(a = c(0, 1), b = c(0, 1)), ratio = 10)
  g <- mgcv::gam(.label ~ te(a, b, k = 5), binomial, model.frame(fit), offset = .offset, method = "REML")
  expect_length(fit$sp, 2L)
  agree_with_gam(fit, g)
})

test_that("ti() main effects and interaction match gam REML", {
  set.seed(34)
  n <- 1200
  df <- data.frame(a = rbeta(n, 2, 2), b = rbeta(n, 2, 4))
  f <- ~ ti(a, k = 5) + ti(b, k = 5) + ti(a, b, k = 4)
  fit <- nce(f, df, ref_uniform(a = c(0, 1), b = c(0, 1)), ratio = 10)
  g <- mgcv::gam(.label ~ ti(a, k = 5) + ti(b, k = 5) + ti(a, b, k = 4), binomial, model.frame(fit),
                 offset = .offset, method = "REML")
  agree_with_gam(fit, g)
})

test_that("with fixed sp the coefficients match gam to 1e-6", {
  set.seed(35)
  df <- data.frame(a = rbeta(800, 2, 3), b = runif(800))
  ref <- ref_uniform(a = c(0, 1), b = c(0, 1))
  sp <- c(0.5, 20)
  fit <- nce(~ s(a, k = 8) + s(b, bs = "ps", k = 8), df, ref, ratio = 5, sp = sp)
  g <- mgcv::gam(.label ~ s(a, k = 8) + s(b, bs = "ps", k = 8), binomial, model.frame(fit),
                 offset = .offset, sp = sp, control = mgcv::gam.control(epsilon = 1e-12))
  expect_equal(unname(fit$sp), sp)
  expect_equal(coef(fit), coef(g), tolerance = 1e-6)
  expect_equal(fit$edf, g$edf, tolerance = 1e-6, ignore_attr = TRUE)
  expect_equal(fit$Vp_naive, g$Vp, tolerance = 1e-5, ignore_attr = TRUE)
})

test_that("by= factor smooths match gam REML", {
  set.seed(36)
  n <- 1000
  df <- data.frame(a = c(rbeta(n / 2, 2, 5), rbeta(n / 2, 5, 2)), g = factor(rep(c("u", "v"), each = n / 2)))
  # reference: uniform a, and the group drawn with its empirical frequency
  ref <- ref_custom(function(m) data.frame(a = runif(m), g = factor(sample(c("u", "v"), m, TRUE), levels = c("u", "v"))),
                    function(d) rep(log(0.5), nrow(d)), c("a", "g"))
  fit <- nce(~ g + s(a, by = g, k = 8), df, ref, ratio = 10)
  gm <- mgcv::gam(.label ~ g + s(a, by = g, k = 8), binomial, model.frame(fit), offset = .offset, method = "REML")
  agree_with_gam(fit, gm)
})

test_that("Poisson family in the engine matches gam REML", {
  set.seed(37)
  n <- 400
  d <- data.frame(x = runif(n), z = runif(n))
  d$y <- rpois(n, exp(1 + sin(2 * pi * d$x) + 0.5 * d$z))
  fit <- nce:::fit_penalised(y ~ s(x, k = 10) + s(z, k = 6), d, "poisson")
  g <- mgcv::gam(y ~ s(x, k = 10) + s(z, k = 6), poisson, d, method = "REML")
  agree_with_gam(fit, g)
  fit_sp <- nce:::fit_penalised(y ~ s(x, k = 10) + s(z, k = 6), d, "poisson", sp = c(0.1, 1))
  g_sp <- mgcv::gam(y ~ s(x, k = 10) + s(z, k = 6), poisson, d, sp = c(0.1, 1),
                    control = mgcv::gam.control(epsilon = 1e-12))
  expect_equal(unname(fit_sp$coefficients), unname(coef(g_sp)), tolerance = 1e-6)
})

test_that("mgcv's own predict.gam and plot.gam work on the fit", {
  set.seed(38)
  df <- data.frame(y = rbeta(600, 2, 5))
  fit <- nce(~ s(y, k = 6), df, ref_uniform(y = c(0, 1)), ratio = 10)
  nd <- data.frame(y = c(0.2, 0.5))
  expect_equal(as.vector(mgcv::predict.gam(fit, nd)), unname(predict(fit, nd, type = "link")))
  expect_equal(unname(predict(fit, nd, type = "log_density")), unname(predict(fit, nd, type = "link")))
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  on.exit({ grDevices::dev.off(); unlink(f) })
  expect_no_error(plot(fit, shade = TRUE))
  expect_s3_class(summary(fit), "summary.gam")
  expect_output(print(summary(fit)), "log normalising constant")
})

test_that("the smooth NCE fit recovers a known density and its normaliser", {
  set.seed(39)
  df <- data.frame(y = rbeta(3000, 2, 5))
  fit <- nce(~ s(y, k = 10), df, ref_uniform(y = c(0, 1)), ratio = 20)
  grid <- data.frame(y = seq(0.05, 0.9, by = 0.05))
  p <- predict(fit, grid, type = "log_density", se.fit = TRUE)
  z <- (p$fit - dbeta(grid$y, 2, 5, log = TRUE)) / p$se.fit
  expect_gt(mean(abs(z) < 2), 0.8)
  # The fitted density integrates to one (the intercept is -log Z).
  yy <- seq(0.0005, 0.9995, by = 0.001)
  expect_equal(sum(predict(fit, data.frame(y = yy), type = "density")) * 0.001, 1, tolerance = 0.03)
})

test_that("bad smooth input is reported", {
  df <- data.frame(y = runif(100))
  expect_error(nce(~ s(y, k = 5), df, ref_uniform(y = c(0, 1)), sp = c(1, 2)), "`sp` must be 1 positive", class = "nce_error_input")
  expect_error(nce(~ y, df, ref_uniform(y = c(0, 1)), sp = 1), "only to formulas with smooth", class = "nce_error_input")
  expect_error(nce(~ s(y, k = 5), df, ref_uniform(y = c(0, 1)), method = "poisson"), "logistic", class = "nce_error_input")
})

test_that("a rank-deficient design (parametric term in a smooth's null space) matches gam", {
  set.seed(40)
  df <- data.frame(y = rbeta(800, 2, 5))
  expect_warning(fit <- nce(~ y + s(y, k = 8), df, ref_uniform(y = c(0, 1)), ratio = 10),
                 "not estimable", class = "nce_warning_rank")
  g <- mgcv::gam(.label ~ y + s(y, k = 8), binomial, model.frame(fit), offset = .offset, method = "REML")
  expect_equal(g$rank, 8L)
  # mgcv drops the parametric column too, so even the coefficients agree.
  expect_equal(coef(fit)[["y"]], 0)
  expect_equal(coef(fit), coef(g), tolerance = 1e-4)
  agree_with_gam(fit, g)
})

test_that("smoothing parameters fixed in s(sp =) give gam's fit with the same fixed values", {
  set.seed(21)
  dat <- data.frame(u = rbeta(300, 2, 3), v = rbeta(300, 3, 2))
  ref <- ref_uniform(u = c(0, 1), v = c(0, 1))
  set.seed(2)
  fit <- nce(~ s(u, k = 5, sp = 0.1) + s(v, bs = "cr", sp = 2), data = dat, reference = ref, ratio = 5)
  expect_equal(fit$sp, c("s(u)" = 0.1, "s(v)" = 2))
  mf <- model.frame(fit)
  mf$.label <- c(rep(1, 300), rep(0, nrow(mf) - 300))
  g <- mgcv::gam(.label ~ s(u, k = 5, sp = 0.1) + s(v, bs = "cr", sp = 2) + offset(.offset), family = binomial,
                 data = mf)
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-8)
  # The same as `sp =` of nce().
  set.seed(2)
  fit2 <- nce(~ s(u, k = 5) + s(v, bs = "cr"), data = dat, reference = ref, ratio = 5, sp = c(0.1, 2))
  expect_equal(fit2$linear.predictors, fit$linear.predictors, tolerance = 1e-12)
  # Some fixed and some not, and linked ones: classed errors.
  expect_error(nce(~ s(u, k = 5, sp = 0.1) + s(v, bs = "cr"), data = dat, reference = ref, ratio = 5),
               "fix either all", class = "nce_error_input")
  expect_error(nce(~ s(u, k = 5, id = 1) + s(v, k = 5, id = 1), data = dat, reference = ref, ratio = 5),
               "id=", class = "nce_error_input")
})

test_that("a fit's own smoothing parameters, given back as `sp`, refit the same model (2-D thin plate)", {
  # The 2-D thin-plate term is set up in Rust in a rotation of mgcv's basis; with `sp` given it
  # was set up by mgcv, whose penalty scaling differs, and the refit smoothed less (edf 16.6
  # against 15.6, linear predictor 0.26 apart).
  set.seed(1)
  d <- data.frame(u = rbeta(600, 2, 3), v = rbeta(600, 3, 2))
  ref <- ref_uniform(u = c(0, 1), v = c(0, 1))
  set.seed(2)
  f1 <- nce(~ s(u, v, k = 20), d, ref, ratio = 5)
  set.seed(2)
  f2 <- nce(~ s(u, v, k = 20), d, ref, ratio = 5, sp = f1$sp)
  expect_equal(sum(f2$edf), sum(f1$edf), tolerance = 1e-6)
  expect_lt(max(abs(f2$linear.predictors - f1$linear.predictors)), 1e-6)
  f3 <- update(f1, sp = f1$sp)
  expect_lt(max(abs(f3$linear.predictors - f1$linear.predictors)), 1e-6)
})
