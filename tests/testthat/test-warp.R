# The warped reference of marglik_nce() (R/marglik-warp.R; Ledoit-Wolf shrinkage in nce-core
# telescope::shrink_cov): marginal transports and a Gaussian copula. Exact values: a product of
# D Gamma(2, 1) kernels, log f = sum(log x - x), has log Z = 0; a Beta(3, 5) kernel has
# log Z = lbeta(3, 5).
gamma_lk <- function(x) rowSums(log(x) - x)

test_that("the transports round-trip and their log Jacobian matches numerical derivatives", {
  set.seed(41)
  x <- cbind(rgamma(3000, 2), rbeta(3000, 3, 5) * 4 - 1, -rgamma(3000, 0.7), rnorm(3000))
  lb <- c(0, -1, -Inf, -Inf)
  ub <- c(Inf, 3, 0, Inf)
  u <- nce:::warp_to_unc(x, lb, ub)
  w <- nce:::warp_fit(u, NULL)
  y <- nce:::warp_inverse(w, u)
  fw <- nce:::warp_forward(w, y)
  expect_lt(max(abs(fw$u - u)), 1e-10)
  back <- nce:::warp_from_unc(fw$u, lb, ub)
  expect_lt(max(abs(back$x - x)), 1e-9)
  # the normal scores are close to standard normal in each column
  expect_lt(max(abs(colMeans(y))), 0.05)
  expect_lt(max(abs(apply(y, 2, sd) - 1)), 0.05)
  # log |du/dy| and log |dx/du| against central differences, in and beyond the outer scores
  yy <- matrix(seq(-4.5, 4.5, length.out = 41), 41, 4)
  h <- 1e-6
  num <- rowSums(log((nce:::warp_forward(w, yy + h)$u - nce:::warp_forward(w, yy - h)$u) / (2 * h)))
  expect_lt(max(abs(num - nce:::warp_forward(w, yy)$logjac)), 1e-6)
  uu <- nce:::warp_forward(w, yy)$u
  numx <- rowSums(log(abs((nce:::warp_from_unc(uu + h, lb, ub)$x - nce:::warp_from_unc(uu - h, lb, ub)$x) / (2 * h))))
  expect_lt(max(abs(numx - nce:::warp_from_unc(uu, lb, ub)$logjac)), 1e-5)
})

test_that("the warped reference recovers log Z of a 40-D Gamma product far better than the normal one", {
  set.seed(42)
  x <- matrix(rgamma(40 * 6000, 2, 1), ncol = 40)
  set.seed(1)
  w <- marglik_nce(x, gamma_lk, lower = 0, reference = "warped")
  set.seed(1)
  nrm <- marglik_nce(x, gamma_lk, lower = 0, reference = "normal", waymarks = "none")
  expect_equal(w$reference$family, "warped")
  expect_null(w$telescope)
  expect_lt(abs(w$logml), 0.02)
  expect_lt(abs(w$logml), 4 * w$se)
  expect_lt(w$se, nrm$se / 3)
  expect_lt(w$reference$accuracy, 0.6)
  expect_gt(nrm$reference$accuracy, 0.75)
})

test_that("auto switches to the warped reference only when the normal one barely overlaps", {
  set.seed(43)
  x <- matrix(rgamma(40 * 4000, 2, 1), ncol = 40)
  a <- marglik_nce(x, gamma_lk, lower = 0)
  expect_equal(a$reference$family, "warped")
  expect_lt(abs(a$logml), 0.03)
  x5 <- matrix(rgamma(5 * 4000, 2, 1), ncol = 5)
  set.seed(2)
  a5 <- marglik_nce(x5, gamma_lk, lower = 0)
  set.seed(2)
  n5 <- marglik_nce(x5, gamma_lk, lower = 0, reference = "normal")
  expect_equal(a5$reference$family, "normal")
  expect_identical(a5$logml, n5$logml)
})

test_that("the warped reference handles two-sided and upper bounds (Beta and negated Gamma kernels)", {
  set.seed(44)
  d <- 6
  x <- cbind(matrix(rbeta(d * 4000, 3, 5), ncol = d), -matrix(rgamma(d * 4000, 2), ncol = d))
  lk <- function(p) rowSums(2 * log(p[, 1:d]) + 4 * log1p(-p[, 1:d])) + rowSums(log(-p[, -(1:d)]) + p[, -(1:d)])
  fit <- marglik_nce(x, lk, lower = rep(c(0, -Inf), each = d), upper = rep(c(1, 0), each = d), reference = "warped")
  exact <- d * lbeta(3, 5)
  expect_lt(abs(fit$logml - exact), 0.03)
  expect_lt(abs(fit$logml - exact), 4 * fit$se)
})

test_that("telescoping runs on the warped scale", {
  set.seed(45)
  x <- matrix(rgamma(40 * 3000, 2, 1), ncol = 40)
  fit <- marglik_nce(x, gamma_lk, lower = 0, reference = "warped", waymarks = "always",
                     control = list(accuracy = 0.505, moves = 2))
  expect_gt(length(fit$telescope$b), 2L)
  expect_equal(fit$reference$family, "warped")
  expect_lt(abs(fit$logml), 0.03)
  expect_lt(abs(fit$logml), 4 * fit$se)
})

test_that("print and summary of a warped estimate", {
  set.seed(46)
  x <- matrix(rgamma(4 * 1000, 2, 1), ncol = 4)
  set.seed(4)
  fit <- marglik_nce(x, gamma_lk, lower = 0, reference = "warped")
  fit$call <- quote(marglik_nce(x, gamma_lk, lower = 0, reference = "warped"))
  expect_snapshot(print(fit, digits = 3))
  expect_snapshot(print(summary(fit), digits = 3))
})
