# Grouped designs [A | B[group, ]]: a per-transition spline intercept evaluated once per
# transition gives the same fit as mgcv::gam on the expanded design.

# T transitions of a state on [0, 1] with r reference rows each: the data's next state near the
# previous one, the reference uniform. `rows` (transition t, state x, label, x_prev, distance d,
# offset) and the previous states `xp`.
transition_rows <- function(T, r) {
  xp <- runif(T)
  xd <- pmin(pmax(xp + rnorm(T, 0, 0.15), 0), 1)
  rows <- data.frame(t = c(seq_len(T), rep(seq_len(T), each = r)), x = c(xd, runif(T * r)),
                     .label = rep(c(1, 0), c(T, T * r)))
  rows$x_prev <- xp[rows$t]
  rows$d <- abs(rows$x - rows$x_prev)
  rows$.offset <- log(1 / r)
  list(rows = rows, xp = xp)
}

test_that("a grouped REML fit equals gam on the expanded data", {
  set.seed(51)
  T <- 300
  tr <- transition_rows(T, 8)
  rows <- tr$rows
  xp <- tr$xp
  fit <- nce:::fit_grouped(~ s(d, bs = "cr", k = 8), rows, ~ s(x_prev, bs = "cr", k = 6),
                           data.frame(x_prev = xp), rows$t, rows$.label, rows$.offset,
                           cluster = seq_len(T))
  g <- mgcv::gam(.label ~ s(d, bs = "cr", k = 8) + s(x_prev, bs = "cr", k = 6), binomial, rows,
                 offset = .offset, method = "REML")
  expect_true(fit$converged)
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-3)
  expect_equal(sum(fit$edf), sum(g$edf), tolerance = 0.01)
  expect_equal(unname(fit$sp), unname(g$sp), tolerance = 0.05)
  expect_equal(unname(fit$coefficients), unname(coef(g)), tolerance = 1e-3)
  expect_equal(dim(fit$Vs), c(length(coef(g)), length(coef(g))))
  expect_error(nce:::fit_grouped(~ s(d, k = 8), rows, ~ s(x_prev, k = 6), data.frame(x_prev = xp),
                                 rows$t, rows$.label, rows$.offset, sp = 1),
               "`sp` must be 2 positive numbers", class = "nce_error_input")
})

test_that("the engine reads a model matrix's blocks where they lie, as it reads the bound matrix", {
  # term_setup(mode = "blocks") keeps the terms' blocks apart (no second copy of the design);
  # the fit must be the one on the bound matrix, bit for bit.
  set.seed(52)
  n <- 2000
  rows <- data.frame(g = rep(seq_len(200), each = 10), u = runif(n), v = runif(n), f = gl(2, n / 2),
                     .label = rep(c(1, 0, 0, 0, 0), n / 5))
  form <- ~ f + s(u, bs = "cr", k = 6) + s(v, bs = "cc", k = 8)
  bound <- nce:::term_setup(form, rows, intercept = TRUE, mode = "bound")
  held <- nce:::term_setup(form, rows, intercept = TRUE)
  expect_s3_class(held$X, "nce_blocks")
  # The cubic and cyclic blocks are held in Rust (copied out here to compare).
  as_matrix <- function(b) if (inherits(b, "nce_rust_block")) nce:::nce_block_matrix(b$ptr) else b
  expect_identical(unname(do.call(cbind, lapply(held$X, as_matrix))), unname(bound$X))
  expect_identical(held$colnames, colnames(bound$X))
  expect_identical(held$ncol, ncol(bound$X))
  pens <- lapply(bound$penalties, function(p) list(start = as.double(p$start), S = p$S))
  b <- matrix(runif(200), 200, 1)
  response <- list(y = rows$.label, weights = rep(1, n), offset = rep(log(1 / 4), n))
  settings <- list(family = "binomial", sp = NULL, control = nce::nce_control(), threads = 1L)
  fit_with <- function(a) {
    nce:::nce_fit_reml_grouped(a, b, list(group = rows$g, response = response, cluster = seq_len(200),
                                          penalties = pens, settings = settings))
  }
  expect_identical(fit_with(held$X), fit_with(bound$X))
  # Without the intercept (the free-intercept fit).
  held0 <- nce:::term_setup(form, rows, intercept = FALSE)
  pens0 <- lapply(held0$penalties, function(p) list(start = as.double(p$start), S = p$S))
  free_with <- function(a) {
    nce:::nce_fit_reml_free_intercepts(a, list(group = rows$g, response = response, cluster = NULL,
                                               penalties = pens0, settings = c(settings, ngroups = 200L)))
  }
  expect_identical(free_with(held0$X), free_with(nce:::term_setup(form, rows, intercept = FALSE, mode = "bound")$X))
  # A block held in Rust beside an R matrix a row short.
  expect_s3_class(held$X[[2]], "nce_rust_block")
  bad <- structure(list(held$X[[2]], nce:::nce_block_matrix(held$X[[3]]$ptr)[-1, ]), class = "nce_blocks")
  expect_error(nce:::rs(fit_with(bad)), "blocks of 2000 and 1999 rows", class = "nce_error_input")
})

test_that("cubic and cyclic splines set up in Rust equal mgcv's set-up, rows and all", {
  set.seed(58)
  n <- 3000
  d <- data.frame(x = round(rbeta(n, 2, 3), 3), a = runif(n, -pi, pi))
  d$x[1:5] <- c(-0, 0, 0.5, 0.5, 1)  # ties and a negative zero
  cases <- list(list(spec = mgcv::s(x, bs = "cr"), knots = NULL),
                list(spec = mgcv::s(x, bs = "cr", k = 6), knots = list(x = c(0, 0.1, 0.3, 0.5, 0.7, 1))),
                list(spec = mgcv::s(a, bs = "cc", k = 12), knots = list(a = c(-pi, pi))),
                list(spec = mgcv::s(a, bs = "cc"), knots = NULL))
  for (cs in cases) {
    rust <- nce:::spline_con_rust(cs$spec, d, cs$knots)
    ref <- mgcv::smoothCon(cs$spec, d, cs$knots, absorb.cons = TRUE, scale.penalty = TRUE, null.space.penalty = FALSE)[[1]]
    expect_s3_class(rust$X, "nce_rust_block")
    x_rust <- nce:::nce_block_matrix(rust$X$ptr)
    # Same knots, penalty and constraint as mgcv, so the same rows and penalty to rounding.
    expect_equal(as.numeric(rust$xp), as.numeric(ref$xp), tolerance = 1e-15)
    expect_equal(x_rust, unname(ref$X), tolerance = 1e-12)
    expect_equal(rust$S[[1]], ref$S[[1]], tolerance = 1e-12)
    expect_equal(rust$S.scale, ref$S.scale, tolerance = 1e-12)
    expect_equal(attr(rust, "nCons"), 1)
    expect_equal(c(rust$rank, rust$df, rust$null.space.dim), c(ref$rank, ref$df, ref$null.space.dim))
    # mgcv predicts new rows from the object as for its own.
    nd <- d[1:50, , drop = FALSE]
    expect_equal(mgcv::PredictMat(rust, nd), mgcv::PredictMat(ref, nd), tolerance = 1e-12)
    nce:::release_rust_blocks(list(rust$X))
    expect_error(nce:::rs(nce:::nce_block_matrix(rust$X$ptr)), class = "nce_error", regexp = "released")
  }
  # Knots as R and mgcv place them.
  x <- c(d$x, d$x[1:100])
  expect_identical(nce:::nce_spline_knots(x, seq(0, 1, length = 10), FALSE)$knots,
                   unname(quantile(unique(x), seq(0, 1, length = 10))))
  expect_identical(nce:::nce_spline_knots(d$a, rep(0, 9), TRUE)$knots, as.numeric(mgcv::place.knots(d$a, 9)))
  expect_identical(nce:::nce_spline_knots(d$x, 1:3 / 4, FALSE)$n_unique, as.double(length(unique(d$x))))
})

test_that("a pooled exact fit with Rust-held rows equals one set up by mgcv", {
  set.seed(59)
  tr <- transition_rows(400, 6)
  rows <- tr$rows
  xp <- tr$xp
  rows$a <- atan2(rows$x - rows$x_prev, 0.1)
  fit <- nce:::fit_grouped(~ s(d, bs = "cr", k = 8) + s(a, bs = "cc", k = 8), rows, ~ s(x_prev, bs = "cr", k = 6),
                           data.frame(x_prev = xp), rows$t, rows$.label, rows$.offset)
  g <- mgcv::gam(.label ~ s(d, bs = "cr", k = 8) + s(a, bs = "cc", k = 8) + s(x_prev, bs = "cr", k = 6), binomial,
                 rows, offset = .offset, method = "REML")
  # As close as the fit set up by mgcv was (the REML optima agree to gam's convergence).
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-3)
  expect_equal(sum(fit$edf), sum(g$edf), tolerance = 0.01)
})

test_that("saccade features from Rust follow R's arithmetic", {
  set.seed(60)
  x0 <- c(runif(200, 0, 100), 5, 5, 0)
  y0 <- c(runif(200, 0, 100), 5, 5, 0)
  x1 <- c(runif(200, 0, 100), 5, 3, -0)
  y1 <- c(runif(200, 0, 100), 5, 5, 0)
  s <- nce:::nce_saccades(x1, y1, x0, y0)
  dx <- x1 - x0
  dy <- y1 - y0
  a <- atan2(dy, dx)
  a[a == -pi] <- pi
  a[dx == 0 & dy == 0] <- 0
  expect_identical(s$dist, sqrt(dx^2 + dy^2))
  expect_identical(s$angle, a)
  expect_identical(s$angle[202], pi)
})
