# Snapshots of the print() methods of model specifications, kernels, priors and simulations
# (the fits' print and summary methods have theirs in test-print-*.R and the area test files).

test_that("print of model specifications", {
  m <- nce_model(function(theta, data) -(data$y - theta[["mu"]])^2 / 2, name = "normal location")
  expect_snapshot({
    print(m)
    print(tgm_model())
    print(tgm_model(family = "lognormal"))
    print(mog_model(sigma1 = 2))
  })
})

test_that("print of step kernels", {
  expect_snapshot({
    print(kernel_normal(c(x = 50, y = 50), window = list(x = c(0, 1024), y = c(0, 768))))
    print(kernel_custom(function(prev, n) data.frame(y = rep(0, nrow(prev) * n)),
                        function(x, prev) rep(0, nrow(x)), vars = "y"))
  })
})

test_that("print of priors and simulations", {
  pr <- prior_uniform(theta1 = c(-1, 1), theta2 = c(0, 1))
  set.seed(1)
  s <- simulate_summaries(function(theta) rnorm(20, theta[["mu"]]), function(x) c(m = mean(x), v = var(x)),
                          theta = cbind(mu = c(0, 1)), n = 5)
  expect_snapshot({
    print(pr)
    print(prior_normal(mean = c(a = 0, b = 1), sd = c(a = 1, b = 2)))
  })
  # The elapsed time varies from run to run.
  expect_snapshot(print(s), transform = function(l) sub("[0-9.]+ s$", "<time> s", l))
})
