# Grouped designs [A | B[group, ]]: a per-transition spline intercept evaluated once per
# transition gives the same fit as mgcv::gam on the expanded design.

test_that("a grouped REML fit equals gam on the expanded data", {
  set.seed(51)
  T <- 300
  r <- 8
  xp <- runif(T)
  # data: next state near the previous one; reference: uniform on [0, 1]
  xd <- pmin(pmax(xp + rnorm(T, 0, 0.15), 0), 1)
  rows <- data.frame(t = c(seq_len(T), rep(seq_len(T), each = r)), x = c(xd, runif(T * r)),
                     .label = rep(c(1, 0), c(T, T * r)))
  rows$x_prev <- xp[rows$t]
  rows$d <- abs(rows$x - rows$x_prev)
  rows$.offset <- log(1 / r)
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
  # setup_terms(blocks = TRUE) keeps the terms' blocks apart (no second copy of the design);
  # the fit must be the one on the bound matrix, bit for bit.
  set.seed(52)
  n <- 2000
  rows <- data.frame(g = rep(seq_len(200), each = 10), u = runif(n), v = runif(n), f = gl(2, n / 2),
                     .label = rep(c(1, 0, 0, 0, 0), n / 5))
  form <- ~ f + s(u, bs = "cr", k = 6) + s(v, bs = "cc", k = 8)
  bound <- nce:::setup_terms(form, rows, intercept = TRUE)
  held <- nce:::setup_terms(form, rows, intercept = TRUE, blocks = TRUE)
  expect_s3_class(held$X, "nce_blocks")
  expect_identical(unname(do.call(cbind, held$X)), unname(bound$X))
  expect_identical(held$colnames, colnames(bound$X))
  expect_identical(held$ncol, ncol(bound$X))
  pens <- lapply(bound$penalties, function(p) list(start = as.double(p$start), S = p$S))
  b <- matrix(runif(200), 200, 1)
  fit_with <- function(a) {
    nce:::nce_fit_reml_grouped(a, b, rows$g, list(y = rows$.label, weights = rep(1, n), offset = rep(log(1 / 4), n)),
                               seq_len(200), pens,
                               list(family = "binomial", sp = NULL, control = nce::nce_control(), threads = 1L))
  }
  expect_identical(fit_with(held$X), fit_with(bound$X))
  # Without the intercept (the free-intercept fit).
  held0 <- nce:::setup_terms(form, rows, intercept = FALSE, blocks = TRUE)
  pens0 <- lapply(held0$penalties, function(p) list(start = as.double(p$start), S = p$S))
  free_with <- function(a) {
    nce:::nce_fit_reml_free_intercepts(a, rows$g,
                                       list(y = rows$.label, weights = rep(1, n), offset = rep(log(1 / 4), n)),
                                       NULL, pens0,
                                       list(family = "binomial", sp = NULL, control = nce::nce_control(),
                                            threads = 1L, ngroups = 200L))
  }
  expect_identical(free_with(held0$X), free_with(nce:::setup_terms(form, rows, intercept = FALSE)$X))
  bad <- structure(list(held$X[[2]], held$X[[3]][-1, ]), class = "nce_blocks")
  expect_error(nce:::rs(fit_with(bad)), "blocks of 2000 and 1999 rows", class = "nce_error_input")
})
