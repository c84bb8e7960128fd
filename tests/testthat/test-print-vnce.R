# Snapshots of print() and summary() for the classes of vnce(), the Bayes-factor and
# marginal-likelihood estimates and edge_roc(). Numbers are rounded so that the last digits of
# floating point do not move the snapshots.

snap_fits <- local({
  set.seed(71)
  K <- ring_graph(4)
  x <- rtgm(120, K)
  set.seed(72)
  tgm <- vnce(x, tgm_model(), ratio = 2)
  set.seed(73)
  mog <- vnce(rmog(200, theta = 4), mog_model())
  lp <- function(x, z, th) -th[2] - x^2 / (2 * if (z == 1) 1 else exp(2 * th[1]))
  gr <- function(x, z, th) cbind(if (z == 1) 0 * x else x^2 * exp(-2 * th[1]), -1)
  set.seed(74)
  custom <- vnce(rmog(200, theta = 4), custom_model(lp, gr, start = c(log_theta = log(3), c = 2.5), latent = c(1, 0)))
  set.seed(75)
  bf <- bayes_factor_nce(rnorm(400, 0.5), rnorm(400, -0.5), function(t) -0.5 * (t[, 1] - 0.5)^2,
                         function(t) -0.5 * (t[, 1] + 0.5)^2, ess = c(400, 400))
  set.seed(76)
  ml1 <- marglik_nce(matrix(rnorm(600), ncol = 1), function(s) -0.5 * s[, 1]^2)
  ml2 <- marglik_nce(matrix(rnorm(600, sd = 2), ncol = 1), function(s) -0.125 * s[, 1]^2)
  roc <- edge_roc(K + 0.05 * sin(outer(1:4, 1:4)), K)
  list(tgm = tgm, mog = mog, custom = custom, bf = bf, ml = ml1, bfm = bayes_factor_marglik(ml1, ml2), roc = roc)
})

# print() and then print(summary()) of one result, with the same arguments.
print_both <- function(x, ...) {
  print(x, ...)
  print(summary(x), ...)
  invisible(x)
}

test_that("print and summary of vnce fits", {
  expect_snapshot({
    print_both(snap_fits$tgm, digits = 3)
    print_both(snap_fits$mog, digits = 3)
    print_both(snap_fits$custom, digits = 3)
  }, transform = function(s) gsub("Call:.*", "Call: <call>", s))
})

test_that("print and summary of Bayes factor, marginal likelihood and edge-recovery results", {
  expect_snapshot({
    print_both(snap_fits$bf, digits = 3)
    print_both(snap_fits$ml, digits = 3)
    print_both(snap_fits$bfm, digits = 3)
    print_both(snap_fits$roc)
  })
})
