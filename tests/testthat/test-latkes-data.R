# latkes() data handling: window = NULL, windows that lose most transitions, piles of identical
# fixations and `drop_points`, on simulated scanpaths and on the real fixations (../shared).

# A small, fast fit for these checks.
fit_small <- function(d, ...) {
  latkes(d, ratio = 3, kernel = ~ s(dist, bs = "cr", k = 5), intercept = ~ s(x_prev, y_prev, k = 10), ...)
}

sim_scanpaths <- function(seed, n = 400, n_trials = 4) {
  set.seed(seed)
  rlatkes(n, kernel = list(dist = function(d) -d / 150), window = screen, n_trials = n_trials, grid = c(64, 48))
}

# Without the message drop_points gives.
quiet_drop <- function(expr) withCallingHandlers(expr, nce_message_drop_points = function(m) invokeRestart("muffleMessage"))

# `d` with the fixations at rows `i` moved to (0, 0), a tracker's code for a lost eye.
with_lost_eye <- function(d, i) {
  d$x[i] <- 0
  d$y[i] <- 0
  d
}

test_that("window = NULL says which window it took, and a given window says nothing", {
  d <- sim_scanpaths(401)
  expect_message(fit <- fit_small(d, group = "trial"),
                 "window = NULL: using the range of the fixations, c\\(.*\\); give `window` \\(the screen\\)",
                 class = "nce_message_window")
  expect_equal(fit$window, c(range(d$x), range(d$y)))
  expect_no_message(fit_small(d, group = "trial", window = screen), class = "nce_message_window")
})

test_that("a window that loses more than half of the transitions is an error, a smaller loss a warning", {
  d <- sim_scanpaths(402)
  expect_error(fit_small(d, group = "trial", window = c(0, 300, 0, 300)),
               "leaves out [0-9]+ of 400 fixations .* [0-9]+ of 396 transitions lost, more than half\\. Check that `window` is the screen",
               class = "nce_error_support")
  # the error counts what the window loses, not what drop_points took before it
  expect_warning(fit <- fit_small(d, group = "trial", window = c(0, 1024, 0, 700)),
                 "outside the window .* losing [0-9]+ of 396 transitions", class = "nce_warning_outside")
  expect_gt(nobs(fit), 198)
})

test_that("a pile of identical fixations is named and counted; continuous data give no pile warning", {
  d <- sim_scanpaths(403)
  expect_no_warning(fit_small(d, group = "trial", window = screen))
  lost <- c(10, 11, 50, 120, 200, 333)
  d0 <- with_lost_eye(d, lost)
  expect_warning(suppressWarnings(fit_small(d0, group = "trial", window = screen), classes = "nce_warning_zero_length"),
                 "6 of 400 fixations \\(1\\.5%\\) sit at exactly \\(0, 0\\).*`drop_points = c\\(0, 0\\)`",
                 class = "nce_warning_pile")
  # 1% or fewer, or fewer than 3: no warning
  expect_no_warning(fit_small(with_lost_eye(d, c(10, 50, 120)), group = "trial", window = screen),
                    class = "nce_warning_pile")
  d2 <- with_lost_eye(d[1:100, ], c(10, 50))
  expect_no_warning(fit_small(d2, group = "trial", window = screen), class = "nce_warning_pile")
  # two piles: both named, and the suggested argument drops both
  d3 <- d0
  d3[c(20, 60, 90, 150, 250), c("x", "y")] <- list(512, 384)
  w <- tryCatch(suppressWarnings(fit_small(d3, group = "trial", window = screen), classes = "nce_warning_zero_length"),
                nce_warning_pile = function(w) conditionMessage(w))
  expect_match(w, "6 of 400 .*\\(0, 0\\); 5 of 400 .*\\(512, 384\\).*drop_points = list\\(c\\(0, 0\\), c\\(512, 384\\)\\)")
  expect_no_warning(suppressMessages(fit_small(d3, group = "trial", window = screen,
                                               drop_points = list(c(0, 0), c(512, 384)))))
})

test_that("the pile check counts pairs, not coordinates: frequent x and y values alone are no pile", {
  warn_piles <- nce:::warn_piles
  # Integer pixels in 3 columns and 3 rows, 9 points of 100 fixations each: every x and every y is
  # frequent, every pair too (9%).
  x <- rep(c(100, 200, 300), each = 300)
  y <- rep(c(50, 60, 70), times = 300)
  w <- tryCatch(warn_piles(x, y, 900), nce_warning_pile = function(w) conditionMessage(w))
  expect_match(w, "^100 of 900 fixations \\(11\\.1%\\) sit at exactly \\(100, 50\\);")
  expect_equal(lengths(regmatches(w, gregexpr("sit at exactly", w))), 9L)
  # Frequent x and y, but spread pairs: none reaches 1% of 2,000.
  set.seed(1)
  x <- sample(c(1, 2), 2000, replace = TRUE)
  y <- sample(1:400, 2000, replace = TRUE)
  expect_no_warning(warn_piles(x, y, 2000), class = "nce_warning_pile")
  # A pile of 25 among continuous points (over 1% of 2,000), found as before.
  x <- stats::runif(2000)
  y <- stats::runif(2000)
  x[1:25] <- 0.5
  y[1:25] <- 0.25
  expect_warning(warn_piles(x, y, 2000), "25 of 2,000 fixations \\(1\\.2%\\) sit at exactly \\(0\\.5, 0\\.25\\)",
                 class = "nce_warning_pile")
})

test_that("drop_points removes the fixations and splits their sequences as the window does", {
  d <- sim_scanpaths(404)
  lost <- c(10, 11, 50, 120, 200, 333)
  d0 <- with_lost_eye(d, lost)
  expect_message(fit <- fit_small(d0, group = "trial", window = screen, drop_points = c(0, 0)),
                 "drop_points: 6 fixation\\(s\\) at \\(0, 0\\) dropped; .* losing 10 of 396 transitions",
                 class = "nce_message_drop_points")
  expect_equal(fit$dropped$points, lost)
  expect_length(fit$dropped$outside, 0L)
  expect_equal(fit$drop_points, matrix(0, 1, 2))
  # the same transitions as when those fixations lie outside the window and are dropped there
  d_out <- d
  d_out[lost, c("x", "y")] <- list(-50, -50)
  fit_out <- suppressWarnings(fit_small(d_out, group = "trial", window = screen))
  cols <- c("x", "y", "x_prev", "y_prev")
  expect_equal(fit$transitions[cols], fit_out$transitions[cols])
  expect_equal(nobs(fit), 396L - 10L)
  # no transition ends or starts at a dropped point
  expect_false(any(fit$transitions$x == 0 & fit$transitions$y == 0))
  expect_false(any(fit$transitions$x_prev == 0 & fit$transitions$y_prev == 0))
  # the forms of drop_points agree; a point with no fixation says so; bad input is refused
  fit_m <- suppressMessages(fit_small(d0, group = "trial", window = screen, drop_points = rbind(c(0, 0), c(5, 5))))
  expect_equal(fit_m$transitions[cols], fit$transitions[cols])
  expect_message(fit_small(d, group = "trial", window = screen, drop_points = list(c(1, 2))),
                 "no fixation sits at \\(1, 2\\)", class = "nce_message_drop_points")
  expect_error(fit_small(d, window = screen, drop_points = c(0, 0, 0)), "`drop_points` must", class = "nce_error_input")
  expect_error(fit_small(d, window = screen, drop_points = c(0, NA)), "`drop_points` must", class = "nce_error_input")
  expect_error(fit_small(d, window = screen, drop_points = "0,0"), "`drop_points` must", class = "nce_error_input")
})

test_that("window = NULL takes the range after drop_points; by = shares one window; update() keeps the points", {
  d <- sim_scanpaths(405, n = 600, n_trials = 6)
  d$subject <- rep(c("a", "b"), each = 300)
  lost <- c(10, 11, 50, 320, 400, 401, 550)
  d0 <- with_lost_eye(d, lost)
  expect_message(quiet_drop(fit <- fit_small(d0, group = "trial", drop_points = c(0, 0))),
                 class = "nce_message_window")
  expect_equal(fit$window, c(range(d$x[-lost]), range(d$y[-lost])))
  msgs <- character()
  col <- withCallingHandlers(fit_small(d0, group = "trial", drop_points = c(0, 0), by = "subject"),
                             nce_message_window = function(m) {
                               msgs <<- c(msgs, conditionMessage(m))
                               invokeRestart("muffleMessage")
                             },
                             nce_message_drop_points = function(m) invokeRestart("muffleMessage"))
  expect_length(msgs, 1L)
  for (f in col$fits) {
    expect_equal(f$window, fit$window)
    expect_false(any(f$transitions$x == 0 & f$transitions$y == 0))
  }
  expect_equal(col$fits$b$dropped$points, lost[lost > 300] - 300L)
  # update() reruns the call: the points stay unless changed
  fit_u <- suppressMessages(update(fit, ratio = 4))
  expect_equal(fit_u$drop_points, fit$drop_points)
  expect_equal(nobs(fit_u), nobs(fit))
  expect_warning(suppressWarnings(suppressMessages(update(fit, drop_points = NULL)), classes = "nce_warning_zero_length"),
                 "sit at exactly \\(0, 0\\)", class = "nce_warning_pile")
})

test_that("held-out fixations get the fit's drop_points in predict() and logLik()", {
  d <- sim_scanpaths(406)
  lost <- c(10, 11, 50, 120, 200, 333)
  d0 <- with_lost_eye(d, lost)
  fit <- suppressMessages(fit_small(d0[d0$trial <= 3, ], group = "trial", window = screen, drop_points = c(0, 0)))
  held <- d0[d0$trial == 4, ]
  held_out <- held
  held_out[held$x == 0 & held$y == 0, c("x", "y")] <- list(-50, -50)
  expect_gt(sum(held$x == 0 & held$y == 0), 0)
  p <- predict(fit, held, type = "link")
  expect_equal(p, predict(fit, held_out, type = "link"))
  at0 <- which(held$x == 0 & held$y == 0)
  expect_true(all(is.na(p[c(at0, at0 + 1L)])))
  expect_no_warning(l0 <- logLik(fit, newdata = held, normalise = "intercept"))
  l_out <- suppressWarnings(logLik(fit, newdata = held_out, normalise = "intercept"))
  expect_equal(as.numeric(l0), as.numeric(l_out))
  expect_equal(nobs(l0), nobs(l_out))
})

# The real fixations (../shared/data/fixations.csv): 970 fixations in 10 trials, 63 of them at
# exactly (0, 0), the tracker's code for a lost eye.
read_real_fixations <- function() utils::read.csv(file.path(shared_data_dir(), "fixations.csv"))

test_that("real fixations: the (0, 0) pile is named, and drop_points = c(0, 0) removes it", {
  fix <- read_real_fixations()
  expect_warning(expect_warning(expect_warning(
    fit <- latkes(fix, group = "trial", window = screen, ratio = 5),
    "63 of 970 fixations \\(6\\.5%\\) sit at exactly \\(0, 0\\): a tracker code for a lost eye\\? drop them with `drop_points = c\\(0, 0\\)`",
    class = "nce_warning_pile"),
    class = "nce_warning_zero_length"), class = "nce_warning_outside")
  expect_message(fit0 <- suppressWarnings(latkes(fix, group = "trial", window = screen, ratio = 5,
                                                 drop_points = c(0, 0))),
                 "drop_points: 63 fixation\\(s\\) at \\(0, 0\\) dropped", class = "nce_message_drop_points")
  expect_equal(fit0$dropped$points, which(fix$x == 0 & fix$y == 0))
  expect_false(any(fit0$transitions$x == 0 & fit0$transitions$y == 0))
  expect_false(any(fit0$transitions$x_prev == 0 & fit0$transitions$y_prev == 0))
  expect_lt(nobs(fit0), nobs(fit))
  # held-out trial: its (0, 0) fixations are dropped as in the fit (the fast normaliser here)
  held <- fix[fix$trial == 10, ]
  expect_no_warning(suppressWarnings(logLik(fit0, newdata = held, normalise = "intercept"),
                                     classes = c("nce_warning_outside", "nce_warning_zero_length")))
})

test_that("real fixations: window = NULL names the range, a 300 x 300 window is refused", {
  fix <- read_real_fixations()
  expect_message(quiet_drop(suppressWarnings(latkes(fix, group = "trial", ratio = 3, drop_points = c(0, 0),
                                                    kernel = ~ s(dist, bs = "cr", k = 5)))),
                 "window = NULL: using the range of the fixations, c\\(-281\\.55, 1798\\.6, -115\\.93, 844\\.99\\)",
                 class = "nce_message_window")
  expect_error(suppressWarnings(latkes(fix, group = "trial", window = c(0, 300, 0, 300))),
               "leaves out 831 of 970 fixations .* 891 of 949 transitions lost, more than half\\. Check that `window` is the screen",
               class = "nce_error_support")
})
