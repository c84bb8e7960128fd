# The shared vocabulary (?nce_vocabulary): every `control =` merges a partial list into its
# defaults through one helper, and refuses unknown settings with nce_error_input.

test_that("merge_control() merges, keeps complete results and refuses unknown settings", {
  mc <- nce:::merge_control
  expect_identical(mc(NULL, nce_control), nce_control())
  expect_identical(mc(list(maxit = 5), nce_control), nce_control(maxit = 5))
  expect_identical(mc(nce_control(epsilon = 1e-8), nce_control), nce_control(epsilon = 1e-8))
  expect_identical(mc(list(nfolds = 3), lfire_control), lfire_control(nfolds = 3))
  # lfire_control()'s result holds derived settings (`one_se`) it does not take: kept as is
  full <- lfire_control(nfolds = 4)
  expect_identical(mc(full, lfire_control), full)
  expect_s3_class(mc(list(maxit = 50), vnce_control), "vnce_control")
  expect_error(mc(list(tol = 1), nce_control), "tol.*nce_control\\(\\) knows epsilon, maxit", class = "nce_error_input")
  expect_error(mc(list(1), nce_control), "unnamed", class = "nce_error_input")
  expect_error(mc(3, nce_control), "`control` must be nce_control\\(\\)", class = "nce_error_input")
  expect_error(mc(list(maxit = -1), nce_control), "in `control`.*maxit", class = "nce_error_input")
})

test_that("snce(), latkes(), lfire() and vnce() take a partial control list", {
  set.seed(3)
  y <- numeric(200)
  y[1] <- 0.5
  for (i in 2:200) y[i] <- min(max(y[i - 1] + rnorm(1, 0, 0.1), 0.01), 0.99)
  d <- data.frame(y = y)
  set.seed(1)
  a <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, control = list(maxit = 50))
  set.seed(1)
  b <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, control = nce_control(maxit = 50))
  expect_identical(coef(a), coef(b))
  expect_identical(a$control, nce_control(maxit = 50))
  expect_error(snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, control = list(epsilom = 1)),
               "epsilom", class = "nce_error_input")

  sim <- rlatkes(150, latkes_truth, window = c(0, 1024, 0, 768))
  set.seed(2)
  fl <- latkes(sim, window = c(0, 1024, 0, 768), ratio = 2, kernel = ~ dist, intercept = ~ 1,
               control = list(maxit = 40))
  expect_identical(fl$control, nce_control(maxit = 40))
  expect_error(latkes(sim, window = c(0, 1024, 0, 768), ratio = 2, control = list(bogus = 1)), "bogus",
               class = "nce_error_input")

  p <- toy_lfire_problem(3)
  f1 <- toy_lfire_fit(p, n_theta = 40, n_marginal = 40, control = list(nfolds = 3, nlambda = 10))
  f2 <- toy_lfire_fit(p, n_theta = 40, n_marginal = 40, control = lfire_control(nfolds = 3, nlambda = 10))
  expect_identical(f1$posterior, f2$posterior)
  expect_error(lfire(matrix(rnorm(10), 1), p$sim, p$summ, p$pr, theta = p$th, batch = TRUE, control = list(folds = 3)),
               "folds", class = "nce_error_input")

  set.seed(4)
  x <- rmog(200, theta = 4)
  set.seed(5)
  v1 <- vnce(x, mog_model(), control = list(maxit = 300))
  set.seed(5)
  v2 <- vnce(x, mog_model(), control = vnce_control(maxit = 300))
  expect_identical(coef(v1), coef(v2))
  expect_identical(v1$args$ratio, 1)
  expect_identical(names(formals(vnce))[1:3], c("data", "model", "ratio"))
})
