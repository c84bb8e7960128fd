# Spatial covariates (maps) in latkes() and rlatkes(): bilinear look-up in Rust, recovery of a
# known saliency coefficient, methods, and bad input.

lookup <- function(m, x, y, window = c(0, 40, 0, 30)) {
  mp <- nce:::latkes_maps(list(v = m), NULL)
  nce:::add_map_features(data.frame(x = x, y = y), mp, NULL, window)$v
}

test_that("bilinear look-up is exact on a linear ramp and constant beyond the outer cell centres", {
  # 3 x 4 cells on [0, 40] x [0, 30]: centres x = 5, 15, 25, 35 (columns), y = 5, 15, 25 (rows).
  m <- outer(c(5, 15, 25), c(5, 15, 25, 35), function(y, x) 1 + 0.3 * x - 0.7 * y)
  x <- c(5, 12.3, 34.9, 20, 0, 40, 2, 39)
  y <- c(5, 24.1, 6, 15, 10, 0, 30, 29)
  truth <- 1 + 0.3 * pmin(pmax(x, 5), 35) - 0.7 * pmin(pmax(y, 5), 25)
  expect_equal(lookup(m, x, y), truth, tolerance = 1e-12)
})

test_that("bilinear look-up on a known small matrix, and image arrays as luminance", {
  m <- matrix(c(1, 2, 3, 4), 2) # rows (1, 3) at y = 7.5 and (2, 4) at y = 22.5; columns at x = 10, 30
  expect_equal(lookup(m, c(10, 30, 10, 30, 20, 15, 20), c(7.5, 7.5, 22.5, 22.5, 15, 7.5, 0)),
               c(1, 3, 2, 4, 2.5, 1.5, 2))
  # An RGB(A) array as png::readPNG() returns it (h x w x channels): luminance.
  rgb <- array(0, c(2, 2, 4))
  rgb[, , 1] <- m / 10
  rgb[, , 2] <- 0.5
  rgb[, , 4] <- 1
  expect_equal(lookup(rgb, c(10, 30), c(7.5, 22.5)), 0.2126 * c(0.1, 0.4) + 0.7152 * 0.5)
  expect_equal(lookup(array(m, c(2, 2, 1)), 30, 7.5), 3)
})

test_that("a saliency coefficient is recovered from scanpaths on two images chosen per trial", {
  set.seed(11)
  ramp <- outer(1:12, 1:16, function(i, j) sin(i / 2) * cos(j / 3))
  maps <- list(saliency = list(a = ramp, b = t(ramp)[12:1, ]))
  d <- rlatkes(2000, list(dist = function(d) -d / 150, saliency = function(v) 1.5 * v), window = screen,
               n_trials = 10, maps = maps)
  expect_equal(unique(d$image), c("a", "b"))
  expect_equal(tapply(d$image, d$trial, unique), rep(c(a = "a", b = "b"), 5), ignore_attr = TRUE)
  fit <- latkes(d, group = "trial", window = screen, kernel = ~ s(dist, bs = "cr") + saliency, maps = maps,
                map_by = "image")
  expect_true(fit$converged)
  b <- coef(fit)[["saliency"]]
  se <- sqrt(vcov(fit)["saliency", "saliency"])
  message(sprintf("saliency: %.3f (SE %.3f), truth 1.5", b, se))
  expect_lt(abs(b - 1.5), 3 * se)
  # The SE is that of ~2,000 transitions (about 0.06 here), and the sandwich agrees with the naive one.
  expect_gt(se, 0.03)
  expect_lt(se, 0.12)
  expect_equal(se, sqrt(vcov(fit, se_type = "naive")["saliency", "saliency"]), tolerance = 0.25)
  # The default intercept is one surface per image.
  expect_setequal(vapply(fit$smooth, `[[`, "", "label"),
                  c("s(dist)", "s(x_prev,y_prev):imagea", "s(x_prev,y_prev):imageb"))
  # A single map, no map_by: the feature is the same everywhere.
  fit1 <- latkes(d[d$image == "a", ], group = "trial", window = screen, ratio = 5, kernel = ~ dist + saliency,
                 maps = list(saliency = ramp))
  expect_lt(abs(coef(fit1)[["saliency"]] - 1.5), 4 * sqrt(vcov(fit1)["saliency", "saliency"]))
})

test_that("predict, logLik and simulate look the maps up per image", {
  set.seed(12)
  left <- matrix(rep(c(1, 0), each = 24), 6, 8) # bright left half
  maps <- list(saliency = list(left = left, right = left[, 8:1]))
  d <- rlatkes(600, list(dist = function(d) -d / 150, saliency = function(v) 2 * v), window = screen,
               n_trials = 4, maps = maps)
  expect_gt(mean(d$x[d$image == "left"] < 512), 0.75)
  expect_lt(mean(d$x[d$image == "right"] < 512), 0.25)
  fit <- latkes(d, group = "trial", window = screen, ratio = 10, kernel = ~ s(dist, bs = "cr") + saliency,
                maps = maps, map_by = "image")
  # Same saccade length, map values 1 and 0: the log kernels differ by the coefficient.
  nd <- data.frame(x = c(112, 912), y = 384, x_prev = 512, y_prev = 384, image = c("left", "left"))
  lk <- predict(fit, nd)
  expect_equal(unname(lk[1] - lk[2]), coef(fit)[["saliency"]], tolerance = 1e-8)
  dens <- predict(fit, nd, type = "density")
  nd$image <- "right"
  expect_gt(dens[1] / dens[2], 2)
  expect_lt(predict(fit, nd, type = "density")[1] / predict(fit, nd, type = "density")[2], 0.5)
  expect_true(is.finite(logLik(fit)))
  s <- simulate(fit, seed = 1)
  img <- fit$transitions$image[match(unique(s$.sequence), fit$transitions$.sequence)]
  on_left <- tapply(s$x < 512, s$.sequence, mean)[unique(s$.sequence)]
  expect_gt(min(on_left[img == "left"]), max(on_left[img == "right"]))
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  on.exit(unlink(f))
  expect_silent(plot(fit))
  grDevices::dev.off()
})

test_that("bad maps and image ids are errors that say what is wrong", {
  set.seed(13)
  m <- matrix(runif(12), 3)
  d <- rlatkes(100, list(dist = function(d) -d / 150), window = screen, n_trials = 2)
  d$image <- c("a", "b")[d$trial]
  maps <- list(saliency = list(a = m, b = m))
  k <- ~ s(dist, k = 5) + saliency
  expect_error(latkes(d, group = "trial", window = screen, kernel = k, maps = maps), "map_by", class = "nce_error_input")
  expect_error(latkes(d, group = "trial", window = screen, kernel = k, maps = maps, map_by = "stimulus"),
               "not in `data`", class = "nce_error_input")
  expect_error(latkes(d, group = "trial", window = screen, kernel = k, maps = list(saliency = list(a = m)), map_by = "image"),
               "value\\(s\\) b have no map", class = "nce_error_data")
  m_na <- m
  m_na[2, 3] <- NA
  expect_error(latkes(d, window = screen, kernel = k, maps = list(saliency = m_na)), "row 2, column 3",
               class = "nce_error_input")
  expect_error(latkes(d, window = screen, kernel = k, maps = list(saliency = matrix("a", 2, 2))), "numeric matrix",
               class = "nce_error_input")
  expect_error(latkes(d, window = screen, kernel = k, maps = list(saliency = as.data.frame(m))), "numeric matrix",
               class = "nce_error_input")
  expect_error(latkes(d, window = screen, kernel = k, maps = list(m)), "named list", class = "nce_error_input")
  expect_error(latkes(d, window = screen, kernel = k, maps = list(dist = m)), "built-in", class = "nce_error_input")
  expect_error(latkes(d, window = screen, kernel = k, map_by = "image"), "`maps` is not", class = "nce_error_input")
  fit <- latkes(d, group = "trial", window = screen, ratio = 5, kernel = k, maps = maps, map_by = "image")
  nd <- data.frame(x = 100, y = 400, x_prev = 512, y_prev = 384)
  expect_error(predict(fit, nd), "needs the column image", class = "nce_error_input")
  nd$image <- "c"
  expect_error(predict(fit, nd), "value\\(s\\) c have no map", class = "nce_error_data")
  expect_error(rlatkes(10, list(saliency = identity), maps = maps, images = "z"), "have no map", class = "nce_error_data")
  expect_error(rlatkes(10, list(brightness = identity), maps = maps), "names of `maps`", class = "nce_error_input")
})
