# The transition normaliser in Rust (term tables, R/latkes-normaliser.R) against the rule
# evaluated point by point in R (tables = FALSE), against closed forms, and across threads.

# Normalisers by both rules on a few transitions of `fit`, with the gradient.
both_rules <- function(fit, rows = NULL, grid = c(32, 24), refine = 5) {
  if (is.null(rows)) rows <- round(seq(1, nrow(fit$transitions), length.out = 25))
  nd <- fit$features(fit$transitions[rows, ])
  list(rust = nce:::grid_normaliser(fit, nd, grid, gradient = TRUE, refine = refine),
       r = nce:::grid_normaliser(fit, nd, grid, gradient = TRUE, refine = refine, tables = FALSE),
       plan = nce:::normaliser_plan(fit, nd, TRUE))
}

expect_rules_agree <- function(b) {
  expect_false(is.null(b$plan))
  # The R rule interpolates 1-D smooths on 4096 points over each chunk's range, the tables on
  # 8192 over the feature's range: both are within 2e-6 of the smooth on these kernels.
  expect_lt(max(abs(b$rust$log_z - b$r$log_z)), 2e-6)
  expect_lt(max(abs(b$rust$mean_x - b$r$mean_x)), 1e-5 * max(1, abs(b$r$mean_x)))
}

test_that("the Rust normaliser equals the R rule on the default kernel, with maps, order 2 and covariates", {
  set.seed(301)
  d <- rlatkes(400, kernel = latkes_truth, window = screen, n_trials = 3)
  d$cond <- factor(ifelse(d$trial == 2, "b", "a"))
  d$z <- d$trial / 3
  set.seed(302)
  fit <- latkes(d, group = "trial", window = screen, ratio = 5)
  expect_rules_agree(both_rules(fit))
  # a factor `by` (one table per level), a parametric square and a covariate interaction
  set.seed(303)
  fit <- latkes(d, group = "trial", window = screen, ratio = 5,
                kernel = ~ s(dist, bs = "cr", by = cond) + I(radius^2) + angle:z + s(x, bs = "cr", k = 5))
  b <- both_rules(fit)
  expect_rules_agree(b)
  expect_length(b$plan$terms, 5L)   # s(dist):conda, s(dist):condb, s(x), I(radius^2), angle:z
  expect_identical(sort(unique(b$plan$table[, 1])), 1:2)   # one table per level of cond
  # order 2: the turn angle
  set.seed(304)
  d2 <- rlatkes(300, kernel = list(dist = function(d) -d / 150), window = screen, n_trials = 3)
  fit <- latkes(d2, group = "trial", window = screen, ratio = 5, order = 2,
                kernel = ~ s(dist, bs = "cr") + s(rel_angle, bs = "cc", k = 8) + radius)
  expect_rules_agree(both_rules(fit))
  # maps per image
  left <- matrix(rep(c(1, 0), each = 12), 6, 8)
  maps <- list(saliency = list(left = left, right = left[, 8:1]))
  set.seed(305)
  dm <- rlatkes(300, kernel = list(dist = function(d) -d / 150, saliency = function(v) 1.5 * v),
                window = screen, n_trials = 4, maps = maps)
  fit <- latkes(dm, group = "trial", window = screen, ratio = 5, maps = maps, map_by = "image",
                kernel = ~ s(dist, bs = "cr") + saliency + s(angle, bs = "cc", k = 8))
  expect_rules_agree(both_rules(fit))
})

test_that("a term in two window features falls back to the R rule", {
  set.seed(306)
  d <- rlatkes(200, kernel = latkes_truth, window = screen, n_trials = 2)
  set.seed(307)
  fit <- latkes(d, group = "trial", window = screen, ratio = 5, kernel = ~ te(dist, radius, k = c(4, 4)),
                intercept = ~ s(x_prev, y_prev, k = 10))
  nd <- fit$features(fit$transitions[1:3, ])
  expect_null(nce:::normaliser_plan(fit, nd, FALSE))
  a <- nce:::grid_normaliser(fit, nd, c(16, 12), refine = 3)$log_z
  b <- nce:::grid_normaliser(fit, nd, c(16, 12), refine = 3, tables = FALSE)$log_z
  expect_identical(a, b)
})

test_that("the normaliser of a log-linear kernel matches its closed form", {
  # exp(a x + b y) over the window: (e^{a x1} - e^{a x0}) / a * (e^{b y1} - e^{b y0}) / b
  set.seed(308)
  d <- rlatkes(300, kernel = list(x = function(x) x / 300), window = screen, n_trials = 2)
  set.seed(309)
  fit <- latkes(d, group = "trial", window = screen, ratio = 5, kernel = ~ x + y, intercept = ~ s(x_prev, y_prev, k = 10))
  a <- coef(fit)[["x"]]
  b <- coef(fit)[["y"]]
  exact <- log((exp(a * 1024) - 1) / a) + log((exp(b * 768) - 1) / b)
  nd <- fit$features(fit$transitions[1:5, ])
  lz <- nce:::grid_normaliser(fit, nd, c(64, 48))$log_z
  # the kernel's design row here is (x, y); the normaliser adds the same a x + b y to both sides
  expect_equal(lz, rep(exact, 5), tolerance = 1e-8)
  g <- nce:::grid_normaliser(fit, nd, c(64, 48), gradient = TRUE)$mean_x
  mean_x <- 1 / (1 - exp(-a * 1024)) * 1024 - 1 / a   # E[x] under the truncated exponential
  expect_equal(g[, 1], rep(mean_x, 5), tolerance = 1e-6)
})

test_that("the normaliser does not depend on the number of threads", {
  set.seed(310)
  d <- rlatkes(300, kernel = latkes_truth, window = screen, n_trials = 2)
  set.seed(311)
  fit <- latkes(d, group = "trial", window = screen, ratio = 5)
  nd <- fit$features(fit$transitions)
  one <- withr_threads(1, nce:::grid_normaliser(fit, nd, c(64, 48), gradient = TRUE))
  three <- withr_threads(3, nce:::grid_normaliser(fit, nd, c(64, 48), gradient = TRUE))
  expect_identical(one, three)
})

test_that("the normaliser reports progress chunk by chunk, with the same values", {
  skip_if_not_installed("progressr")
  set.seed(312)
  d <- rlatkes(300, kernel = latkes_truth, window = screen, n_trials = 2)
  set.seed(313)
  fit <- latkes(d, group = "trial", window = screen, ratio = 5)
  nd <- fit$features(fit$transitions)
  whole <- nce:::grid_normaliser(fit, nd, c(32, 24), gradient = TRUE)
  steps <- 0L
  old <- options(progressr.enable = TRUE) # progressr is silent in non-interactive sessions
  on.exit(options(old))
  chunked <- withCallingHandlers(
    nce:::grid_normaliser(fit, nd, c(32, 24), gradient = TRUE, chunk = 50L),
    progression = function(c) if (identical(c$type, "update")) steps <<- steps + 1L
  )
  expect_identical(chunked, whole)
  expect_identical(steps, as.integer(ceiling(nrow(unique(nd[c("x_prev", "y_prev")])) / 50)))
})

test_that("on the real fixations, logLik() and predict(se.fit = TRUE) keep their values", {
  csv <- file.path(shared_data_dir(), "fixations.csv")
  fix <- utils::read.csv(csv)
  fix <- fix[!(fix$x == 0 & fix$y == 0), ]
  set.seed(1)
  fit <- suppressWarnings(latkes(fix, group = "trial", window = screen, ratio = 10))
  nd <- fit$features(fit$transitions[seq(1, nrow(fit$transitions), by = 40), ])
  b <- both_rules(fit, rows = seq(1, nrow(fit$transitions), by = 40), grid = c(64, 48), refine = 7)
  expect_rules_agree(b)
  # The default rule against 1-pixel cells (themselves within 1e-4 of 1/2-pixel cells refined
  # over 31 x 31 cells): the integral of the predicted density over the window is 1 within
  # 3.4e-3 on these 21 transitions (short saccades make the kernel peak near y_prev).
  fine <- nce:::grid_normaliser(fit, nd, c(1024, 768), refine = 9, extrapolate = FALSE)$log_z
  expect_lt(max(abs(exp(fine - b$rust$log_z) - 1)), 4e-3)
})
