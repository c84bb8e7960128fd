# rlatkes(), simulate(), logLik() and per-subject collections.

test_that("rlatkes is reproducible, thread-invariant and inside the window", {
  set.seed(301)
  # Speed is measured by bench scripts, not asserted: CI machines vary.
  d <- rlatkes(2000, latkes_truth, window = screen, n_subjects = 14, n_trials = 4)
  expect_equal(nrow(d), 28000)
  expect_equal(names(d), c("subject", "trial", "fixation", "x", "y"))
  expect_true(all(d$x >= 0 & d$x <= 1024 & d$y >= 0 & d$y <= 768))
  expect_equal(as.vector(table(d$trial)), rep(7000, 4))
  set.seed(1)
  a <- withr_threads(1, rlatkes(300, latkes_truth, n_trials = 3))
  set.seed(1)
  b <- withr_threads(2, rlatkes(300, latkes_truth, n_trials = 3))
  expect_identical(a, b)
  expect_error(rlatkes(10, list(speed = function(s) s)), "`kernel`", class = "nce_error_input")
  expect_error(rlatkes(10, list(dist = function(d) 1)), "vectorised", class = "nce_error_input")
})

test_that("rlatkes draws follow the kernel: a horizontal preference shows away from the edges", {
  set.seed(302)
  d <- rlatkes(6000, list(angle = function(a) 1.5 * cos(2 * a), dist = function(d) -d / 30), window = screen,
               grid = c(128, 96))
  dx <- diff(d$x)
  dy <- diff(d$y)
  prev <- d[-nrow(d), ]
  # Far from the edges (saccades are ~60 px long) the window hardly truncates the kernel.
  central <- prev$x > 250 & prev$x < 774 & prev$y > 200 & prev$y < 568
  expected <- stats::integrate(function(a) exp(1.5 * cos(2 * a)), -pi / 4, pi / 4)$value /
    stats::integrate(function(a) exp(1.5 * cos(2 * a)), 0, pi)$value
  message(sprintf("rlatkes: P(horizontal) %.3f (n = %d central steps), expected %.3f",
                  mean(abs(dx[central]) > abs(dy[central])), sum(central), expected))
  expect_gt(sum(central), 1000)
  expect_lt(abs(mean(abs(dx[central]) > abs(dy[central])) - expected), 0.04)
  expect_lt(abs(mean(dx[central] > 0) - 0.5), 0.05)
})

test_that("simulate() reproduces the fitted kernel on the grid and by SIR", {
  set.seed(303)
  sim <- rlatkes(1500, latkes_truth, window = screen, n_trials = 3)
  fit <- latkes(sim, group = "trial", window = screen, ratio = 10)
  s1 <- simulate(fit, seed = 7)
  expect_identical(s1, simulate(fit, seed = 7))
  expect_equal(nrow(s1), 1500)
  expect_equal(s1$.step[1:3], 0:2)
  expect_equal(s1[s1$.step == 0, c("x", "y")], sim[sim$fixation == 1, c("x", "y")], ignore_attr = TRUE)
  expect_true(all(s1$x >= 0 & s1$x <= 1024 & s1$y >= 0 & s1$y <= 768))
  # Refitting on the simulated scanpaths gives the same saccade-length effect.
  s10 <- simulate(fit, nsim = 2, seed = 8)
  s10$trial <- paste(s10$.sim, s10$.sequence)
  refit <- latkes(s10, group = "trial", window = screen, ratio = 10)
  e0 <- latkes_effects(fit, range = list(dist = c(0, 500)))[["s(dist)"]]
  e1 <- latkes_effects(refit, range = list(dist = c(0, 500)))[["s(dist)"]]
  expect_lt(max(abs((e1$fit - mean(e1$fit)) - (e0$fit - mean(e0$fit)))), 0.25)
  sir <- simulate(fit, seed = 1, method = "sir", candidates = 20)
  expect_equal(nrow(sir), 1500)
  f2 <- latkes(sim, group = "trial", window = screen, ratio = 5, order = 2,
               kernel = ~ s(dist, bs = "cr") + s(rel_angle, bs = "cc", k = 8))
  expect_error(simulate(f2, method = "grid"), "method = \"sir\"", class = "nce_error_input")
})

test_that("order 2: the turn angle of a first-order chain is flat (given the centrality term)", {
  set.seed(304)
  sim <- rlatkes(1500, latkes_truth, window = screen, n_trials = 3)
  f2 <- latkes(sim, group = "trial", window = screen, ratio = 10, order = 2,
               kernel = ~ s(radius, bs = "cr") + s(dist, bs = "cr") + s(angle, bs = "cc", k = 16) +
                 s(rel_angle, bs = "cc", k = 8))
  expect_true(all(c("dist_prev", "angle_prev", "rel_angle") %in% names(model.frame(f2))))
  e <- latkes_effects(f2)[["s(rel_angle)"]]
  expect_gt(mean(e$lower <= 0 & 0 <= e$upper), 0.9)
})

test_that("held-out logLik prefers the kernel with the direction effect", {
  set.seed(305)
  sim <- rlatkes(2400, latkes_truth, window = screen, n_trials = 4)
  train <- sim[sim$trial <= 3, ]
  test <- sim[sim$trial == 4, ]
  full <- latkes(train, group = "trial", window = screen, ratio = 10)
  no_angle <- latkes(train, group = "trial", window = screen, ratio = 10,
                     kernel = ~ s(radius, bs = "cr") + s(dist, bs = "cr"))
  l_full <- logLik(full, newdata = test)
  l_none <- logLik(no_angle, newdata = test)
  expect_equal(attr(l_full, "nobs"), 599L)
  message(sprintf("held-out logLik: with angle %.1f, without %.1f", l_full, l_none))
  expect_gt(as.numeric(l_full) - as.numeric(l_none), 10)
  # A finer grid changes the log-likelihood little.
  expect_lt(abs(as.numeric(logLik(full, test, grid = c(96, 72))) - as.numeric(l_full)) / 599, 0.01)
})

test_that("by = \"subject\" fits a collection with individual curves and their average", {
  set.seed(306)
  ks <- lapply(c(80, 120, 160), function(s) list(dist = function(d) -d / s, angle = latkes_truth$angle))
  d <- rlatkes(800, ks, window = screen, n_subjects = 3, n_trials = 2)
  col <- latkes(d, group = "trial", window = screen, ratio = 10, by = "subject",
                kernel = ~ s(dist, bs = "cr") + s(angle, bs = "cc", k = 16))
  expect_s3_class(col, "latkes_collection")
  expect_equal(names(col$fits), c("1", "2", "3"))
  expect_true(all(vapply(col$fits, inherits, TRUE, "latkes_fit")))
  expect_output(print(col), "3 LATKES fits by subject")
  eff <- latkes_effects(col, range = list(dist = c(0, 400)))
  e <- eff[["s(dist)"]]
  expect_equal(e$mean, rowMeans(e[c("fit_1", "fit_2", "fit_3")]), ignore_attr = TRUE)
  # Slopes ordered as the true ones (-1/80 < -1/120 < -1/160).
  slope <- vapply(c("fit_1", "fit_2", "fit_3"), function(cn) stats::coef(stats::lm(e[[cn]] ~ e$value))[[2]], 0)
  expect_true(all(diff(slope) > 0))
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  on.exit({ grDevices::dev.off(); unlink(f) })
  expect_invisible(plot(col))
  expect_invisible(plot(col, angle = "polar"))
  # No rows: the error latkes() gives without `by`; a collection emptied by hand still prints.
  expect_error(latkes(d[0, ], window = screen, by = "subject"), class = "nce_error_input")
  col$fits <- list()
  expect_output(print(col), "0 LATKES fits by subject")
})

test_that("one pooled fit with s(dist, by = subject) recovers each subject's slope", {
  set.seed(3)
  slopes <- c(a = 1 / 100, b = 1 / 300)
  d <- do.call(rbind, lapply(names(slopes), function(s) {
    ds <- rlatkes(1500, kernel = list(dist = function(d) -slopes[[s]] * d), window = screen, n_trials = 5)
    ds$trial <- paste(s, ds$trial)
    ds$subject <- s
    ds
  }))
  d$subject <- factor(d$subject)
  # by-factor smooths are centred: the subject main effect shifts the log normaliser per subject.
  fit <- latkes(d, group = "trial", window = screen, ratio = 10,
                kernel = ~ s(dist, bs = "cr", by = subject) + subject)
  expect_s3_class(fit, "latkes_fit")
  nd <- data.frame(x = 512 + c(50, 400), y = 384, x_prev = 512, y_prev = 384)
  for (s in names(slopes)) {
    nd$subject <- factor(s, levels = levels(d$subject))
    tt <- predict(fit, nd, type = "terms")[, paste0("s(dist):subject", s)]
    # True drop over dist 50 -> 400: 3.5 (a), 1.17 (b); the fit gives 3.46 and 1.35.
    expect_lt(abs((tt[1] - tt[2]) - 350 * slopes[[s]]), 0.35)
  }
})
