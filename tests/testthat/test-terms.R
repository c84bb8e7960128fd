# One term set-up on every path (term_setup(), issue #75): nested smooths (s(x) + te(x, z)) need
# mgcv's side constraints, taken over the rows' terms and a grouped fit's normaliser terms together,
# as gam() takes them on the expanded design. Each path against mgcv::gam(method = "REML") on the
# fit's own rows (model.frame()), the comparison and tolerances of test-latkes.R and test-grouped.R:
# the linear predictors within 0.01 and the total edf within 1%. Which columns gam.side() deletes
# depends on the rows its pivoted QR sees (the package's on at most 5,000 of them), so the count of
# deleted columns is compared, not their positions: the fits span the same space either way.

deleted <- function(fit) sum(lengths(lapply(fit$smooth, attr, "del.index")))

expect_gam_fit <- function(fit, g, n_deleted = NULL) {
  expect_true(fit$converged)
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 0.01)
  expect_equal(sum(fit$edf), sum(g$edf), tolerance = 0.01)
  expect_identical(deleted(fit), deleted(g))
  if (!is.null(n_deleted)) expect_identical(deleted(fit), n_deleted)
}

gam_on <- function(formula, fit, ...) {
  mgcv::gam(formula, family = stats::binomial, data = model.frame(fit), method = "REML", ...)
}

terms_latkes_data <- local({
  d <- NULL
  function() {
    if (is.null(d)) {
      set.seed(203)
      d <<- rlatkes(400, latkes_truth, window = screen)
    }
    d
  }
})

fit_terms_latkes <- function(kernel, ...) {
  set.seed(5)
  latkes(terms_latkes_data(), window = screen, ratio = 10, kernel = kernel, intercept = ~ te(x_prev, y_prev, k = 4),
         ...)
}

test_that("latkes() fits s(x) + te(x, z) and s(x) + s(z) + ti(x, z) as mgcv does", {
  skip_if_not_installed("mgcv")
  fit <- fit_terms_latkes(~ s(radius, bs = "cr") + s(dist, bs = "cr") + te(radius, dist, k = 5))
  g <- gam_on(.label ~ s(radius, bs = "cr") + s(dist, bs = "cr") + te(radius, dist, k = 5) +
                te(x_prev, y_prev, k = 4) + offset(.offset), fit)
  expect_gam_fit(fit, g, 2L)
  # The deleted columns are left out of predictions too (mgcv's PredictMat() honours them): with the
  # fitted intercept as normaliser, predict() gives the fit's linear predictor less the offset.
  nd <- fit$nce_frame[1:40, ]
  expect_equal(unname(predict(fit, newdata = nd, type = "link", normalise = "intercept")),
               fit$linear.predictors[1:40] - nd$.offset, tolerance = 1e-8)
  fit <- fit_terms_latkes(~ s(radius, bs = "cr") + s(dist, bs = "cr") + ti(radius, dist, k = 5))
  g <- gam_on(.label ~ s(radius, bs = "cr") + s(dist, bs = "cr") + ti(radius, dist, k = 5) +
                te(x_prev, y_prev, k = 4) + offset(.offset), fit)
  expect_gam_fit(fit, g, 0L)
})

test_that("snce() fits a kernel that nests the normaliser's smooth, s(y) + te(y, y_prev), as mgcv does", {
  skip_if_not_installed("mgcv")
  set.seed(7)
  d <- data.frame(y = rchain(800, 2))
  # The default normaliser s(y_prev) is a term of B (one row per transition): te(y, y_prev) loses the
  # columns it spans as well as those s(y) spans.
  fit <- snce(~ s(y, bs = "cr") + te(y, y_prev, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 10)
  g <- gam_on(.label ~ s(y, bs = "cr") + te(y, y_prev, k = 5) + s(y_prev) + offset(.offset), fit)
  expect_gam_fit(fit, g, 2L)
  fit <- snce(~ s(y, bs = "cr") + ti(y, y_prev, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 10)
  g <- gam_on(.label ~ s(y, bs = "cr") + ti(y, y_prev, k = 5) + s(y_prev) + offset(.offset), fit)
  expect_gam_fit(fit, g, 0L)
  # No normaliser term: s(y) alone is nested in te(y, y_prev).
  fit <- snce(~ s(y, bs = "cr") + te(y, y_prev, k = 5), d, ref_uniform(y = c(0, 1)), ratio = 10,
              intercept = "none")
  g <- gam_on(.label ~ s(y, bs = "cr") + te(y, y_prev, k = 5) + offset(.offset), fit)
  expect_gam_fit(fit, g, 1L)
})

test_that("snce() with free per-transition intercepts fits s(y1) + te(y1, y2) as gam() with a factor does", {
  skip_if_not_installed("mgcv")
  # A random walk on the unit square: te() of the two state variables, whose constant the free
  # intercepts (eliminated in the engine, no column in the kernel's block) stand for in gam.side().
  set.seed(8)
  n <- 150
  y <- matrix(0.5, n, 2)
  for (t in 2:n) y[t, ] <- pmin(pmax(y[t - 1, ] + stats::rnorm(2, 0, 0.15), 0.01), 0.99)
  fit <- snce(~ s(y1, bs = "cr") + te(y1, y2, k = 5), data.frame(y1 = y[, 1], y2 = y[, 2]),
              ref_uniform(y1 = c(0, 1), y2 = c(0, 1)), ratio = 10, intercept = "transition")
  g <- gam_on(.label ~ factor(.transition) + s(y1, bs = "cr") + te(y1, y2, k = 5) + offset(.offset), fit)
  expect_true(fit$converged)
  expect_identical(deleted(fit), 1L)
  expect_identical(deleted(g), 1L)
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-3)
  expect_equal(coef(fit), coef(g)[names(coef(fit))], tolerance = 1e-3)
})

test_that("conditional nce() fits s(y) + te(y, z) and s(y) + ti(y, z) beside its normaliser s(z) as mgcv does", {
  skip_if_not_installed("mgcv")
  set.seed(2)
  z <- runif(600)
  d <- data.frame(y = rnorm(600, sin(3 * z), 0.5), z = z)
  fit <- nce(~ s(y, bs = "cr") + te(y, z, k = 5), d, ref_normal(y = c(0, 1)), ratio = 10, given = ~ z)
  g <- gam_on(.label ~ s(y, bs = "cr") + te(y, z, k = 5) + s(z, k = 10) + offset(.offset), fit)
  expect_gam_fit(fit, g, 2L)
  fit <- nce(~ s(y, bs = "cr") + ti(y, z, k = 5), d, ref_normal(y = c(0, 1)), ratio = 10, given = ~ z)
  g <- gam_on(.label ~ s(y, bs = "cr") + ti(y, z, k = 5) + s(z, k = 10) + offset(.offset), fit)
  expect_gam_fit(fit, g, 0L)
})

test_that("discretised and sharded fits take the same side constraints as the exact in-memory fit", {
  kern <- ~ s(radius, bs = "cr") + s(dist, bs = "cr") + te(radius, dist, k = 5)
  exact <- fit_terms_latkes(kern)
  # Discretised: the smooths' own rounded rows, the deletions found on the exact rows (as the
  # discrete test's three-term model is within 0.02 of its exact fit).
  disc <- fit_terms_latkes(kern, discrete = TRUE)
  expect_true(disc$converged)
  expect_identical(deleted(disc), deleted(exact))
  expect_lt(max(abs(disc$linear.predictors - exact$linear.predictors)), 0.02)
  expect_equal(sum(disc$edf), sum(exact$edf), tolerance = 0.05)
  # Shards: the workers' rows of the design lose the same columns; the fit is the in-memory fit.
  skip_if_not_installed("future")
  old <- future::plan(future::sequential)
  on.exit(future::plan(old), add = TRUE)
  sharded <- fit_terms_latkes(kern, shards = 2L)
  expect_identical(lapply(sharded$smooth, attr, "del.index"), lapply(exact$smooth, attr, "del.index"))
  expect_equal(sharded$coefficients, exact$coefficients, tolerance = 1e-8)
  expect_equal(sharded$linear.predictors, exact$linear.predictors, tolerance = 1e-8)
})

test_that("term_setup() deletes a grouped design's nested columns as gam.side() does on the expanded design", {
  skip_if_not_installed("mgcv")
  set.seed(9)
  groups <- data.frame(z = runif(300))
  index <- rep(seq_len(300), each = 6)
  rows <- data.frame(y = runif(1800), z = groups$z[index])
  a <- nce:::term_setup(~ s(y, bs = "cr", k = 6) + te(y, z, k = 4), rows,
                        groups = list(formula = ~ s(z, bs = "cr", k = 6), data = groups, index = index),
                        side_rows = Inf)
  g <- mgcv::gam(resp ~ s(y, bs = "cr", k = 6) + te(y, z, k = 4) + s(z, bs = "cr", k = 6),
                 data = cbind(rows, resp = 0), fit = FALSE)
  del <- function(sm) lapply(sm, function(s) sort(attr(s, "del.index")))
  expect_identical(del(c(a$smooth, a$groups$smooth)), del(g$smooth))
  # The design [A | B[index, ]] is gam()'s, column for column.
  x <- cbind(nce:::term_setup(~ s(y, bs = "cr", k = 6) + te(y, z, k = 4), rows, mode = "bound",
                              groups = list(formula = ~ s(z, bs = "cr", k = 6), data = groups, index = index),
                              side_rows = Inf)$X,
             a$groups$X[index, , drop = FALSE])
  expect_equal(unname(x), unname(g$X), tolerance = 1e-10)
  expect_identical(a$ncol + a$groups$ncol, ncol(g$X))
  expect_identical(vapply(a$penalties, function(p) p$start, 0), unname(g$off[seq_along(a$penalties)] - 1))
})
