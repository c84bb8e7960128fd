# Built-in references: moments of the draws and exact log densities.

test_that("normal reference draws have the right moments and log density", {
  set.seed(1)
  S <- matrix(c(2, 0.5, 0.5, 1), 2)
  r <- ref_normal(a = 1, b = -1, cov = S)
  x <- nce:::ref_draw(r, 50000)
  expect_named(x, c("a", "b"))
  expect_equal(colMeans(x), c(a = 1, b = -1), tolerance = 0.02)
  expect_equal(unname(cov(x)), S, tolerance = 0.03)
  pts <- data.frame(a = c(0, 1), b = c(0, 2))
  # closed form bivariate normal log density
  ld <- apply(as.matrix(pts), 1, function(v) {
    d <- v - c(1, -1)
    -log(2 * pi) - 0.5 * log(det(S)) - 0.5 * drop(t(d) %*% solve(S, d))
  })
  expect_equal(nce:::ref_logq(r, pts), unname(ld), tolerance = 1e-12)
})

test_that("uniform reference: support and density", {
  set.seed(2)
  r <- ref_uniform(x = c(0, 2), y = c(-1, 1))
  x <- nce:::ref_draw(r, 10000)
  expect_true(all(x$x >= 0 & x$x <= 2 & x$y >= -1 & x$y <= 1))
  expect_equal(nce:::ref_logq(r, data.frame(x = c(1, 3), y = c(0, 0))), c(-log(4), -Inf))
})

test_that("ref_fit covers the data", {
  set.seed(3)
  df <- data.frame(a = rnorm(500, 5, 2), b = runif(500))
  rn <- ref_fit(df, "normal")
  expect_equal(rn$mean, unname(colMeans(df)))
  ru <- ref_fit(df, "uniform")
  expect_true(all(ru$lower < apply(df, 2, min)) && all(ru$upper > apply(df, 2, max)))
  expect_output(print(ru), "uniform over a, b")
})

test_that("ref_normal takes named columns like ref_uniform; the old form is refused", {
  r1 <- ref_normal(a = c(1, 2), b = c(0, 0.5))
  expect_equal(r1$mean, c(1, 0))
  expect_equal(r1$sigma, diag(c(4, 0.25)))
  r2 <- ref_normal(a = 1, b = 0, cov = diag(c(4, 0.25)))
  expect_equal(r2[c("vars", "mean", "sigma")], r1[c("vars", "mean", "sigma")])
  # the removed form ref_normal(mean = c(a = 1), cov = v): refused, not read as a column `mean`
  expect_error(ref_normal(c(a = 1, b = 0), diag(c(4, 0.25))), "named vector", class = "nce_error_input")
  expect_error(ref_normal(mean = c(a = 1, b = 0), cov = diag(c(4, 0.25))), "named vector", class = "nce_error_input")
  expect_error(ref_normal(a = c(0, -1)), "sd", class = "nce_error_input")
  expect_error(ref_normal(a = 0), "c\\(mean, sd\\)", class = "nce_error_input")
  expect_error(ref_normal(a = c(0, 1), cov = 1), "its mean", class = "nce_error_input")
  expect_error(ref_normal(a = 0, b = 0, cov = matrix(c(1, 2, 2, 1), 2)), "positive definite", class = "nce_error_input")
})
