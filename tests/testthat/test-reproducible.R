# set.seed() makes fits reproducible, whatever the number of threads.

test_that("same seed, same fit, with 1 or 2 threads", {
  df <- data.frame(y = seq(0.01, 0.99, length.out = 300))
  fit_with <- function(threads) {
    old <- options(nce.threads = threads)
    on.exit(options(old))
    set.seed(1)
    nce(~ y, df, ref_uniform(y = c(0, 1)), ratio = 40)
  }
  a <- fit_with(1)
  b <- fit_with(2)
  c <- fit_with(2)
  expect_identical(coef(a), coef(b))
  expect_identical(vcov(a), vcov(b))
  expect_identical(coef(b), coef(c))
  set.seed(2)
  d <- nce(~ y, df, ref_uniform(y = c(0, 1)), ratio = 40)
  expect_false(identical(coef(a), coef(d)))
})

test_that("reference draws are identical across thread counts (several streams)", {
  draw <- function(threads) {
    old <- options(nce.threads = threads)
    on.exit(options(old))
    set.seed(3)
    nce:::ref_draw(ref_normal(a = 0, b = 1, cov = matrix(c(1, 0.5, 0.5, 2), 2)), 10000)
  }
  expect_identical(draw(1), draw(2))
})
