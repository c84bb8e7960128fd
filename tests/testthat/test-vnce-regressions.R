# Regression tests for the vnce bugs of issues 13 and 14, each against a known answer.

test_that("an improper fit (negative diagonal) on valid complete data warns, and logLik/simulate refuse", {
  set.seed(8)
  x <- rtgm(150, ring_graph(4))
  expect_warning(fit <- vnce(x, tgm_model()), "improper", class = "nce_warning_improper")
  expect_lt(min(diag(fit$precision)), 0)
  expect_identical(fit$normalisable$status, "improper")
  expect_error(logLik(fit), "normalisable", class = "nce_error_unsupported")
  expect_error(simulate(fit), class = "nce_error_unsupported")
})

test_that("the normalisability check agrees with brute force over the simplex", {
  chk <- function(K) nce:::tgm_normalisable(K)$status
  expect_identical(chk(matrix(c(1, -1, -1, 1), 2)), "improper")          # x = (1, 1): x'Kx = 0
  expect_identical(chk(matrix(c(1, -0.9, -0.9, 1), 2)), "proper")        # positive definite
  expect_identical(chk(matrix(c(1, 2, 2, 1), 2)), "proper")              # copositive, not PD
  expect_identical(chk(matrix(c(1, 2, 2, -0.1), 2)), "improper")         # negative diagonal
  set.seed(9)
  u <- matrix(rexp(3 * 20000), ncol = 3)
  u <- u / rowSums(u)                                                     # points of the simplex
  for (i in 1:30) {
    K <- matrix(runif(9, -0.6, 1.5), 3)
    K <- (K + t(K)) / 2
    diag(K) <- runif(3, 0.2, 1)
    q <- min(rowSums((u %*% K) * u))
    s <- chk(K)
    # a clear margin either way: brute force decides
    if (q > 0.02) expect_identical(s, "proper")
    if (q < -0.02) expect_identical(s, "improper")
  }
})

test_that("model.frame() of a vnce fit is the data, nobs the rows, logLik the normalised density", {
  set.seed(41)
  x <- rtgm(150, ring_graph(4))
  set.seed(42)
  fit <- vnce(x, tgm_model(), ratio = 2)
  mf <- model.frame(fit)
  expect_s3_class(mf, "data.frame")
  expect_equal(unname(as.matrix(mf)), unname(x))
  expect_identical(nobs(fit), 150L)
  K <- fit$precision
  ll <- -0.5 * sum((x %*% K) * x) - 150 * fit$c
  expect_equal(as.numeric(logLik(fit)), ll, tolerance = 1e-10)
  expect_equal(attr(logLik(fit), "df"), 11)
  expect_error(formula(fit), "not a formula", class = "nce_error_unsupported")
  s <- simulate(fit, nsim = 2, seed = 1)
  expect_length(s, 2L)
  expect_equal(dim(s[[1]]), c(150L, 4L))
  expect_true(all(s[[1]] > 0))
  # se.fit is honoured for the link and refused for imputations, never ignored
  p <- predict(fit, type = "link", se.fit = TRUE)
  expect_named(p, c("fit", "se.fit"))
  expect_error(predict(fit, type = "impute", se.fit = TRUE), class = "nce_error_unsupported")
  # update() refits with changed arguments
  set.seed(3)
  u <- suppressWarnings(update(fit, ratio = 1))
  expect_equal(nrow(u$noise$y), 150)
})

test_that("the mixture's logLik is the normalised mixture density at the estimate", {
  set.seed(45)
  y <- rmog(300, theta = 4)
  fit <- vnce(y, mog_model())
  th <- coef(fit)[["theta"]]
  cc <- coef(fit)[["c"]]
  expect_equal(as.numeric(logLik(fit)), sum(log(exp(-y^2 / 2) + exp(-y^2 / (2 * th^2))) - cc), tolerance = 1e-10)
  # c estimates the log normaliser of the fitted theta
  expect_equal(cc, log(sqrt(2 * pi) * (1 + th)), tolerance = 0.05)
  s <- simulate(fit, nsim = 3, seed = 2)
  expect_equal(dim(s), c(300L, 3L))
})

test_that("edge_roc() refuses an estimate with NA instead of reporting auc = 1", {
  set.seed(1)
  K <- ring_graph(6)
  E <- K
  E[1, 2] <- E[2, 1] <- NA
  expect_error(edge_roc(E, K), "missing", class = "nce_error_data")
})

test_that("bayes_factor_nce() refuses log-likelihood ratios beyond double precision", {
  set.seed(2)
  e <- tryCatch(bayes_factor_nce(rnorm(50), rnorm(50), function(t) rep(1e300, nrow(t)),
                                 function(t) rep(-1e300, nrow(t))), error = identity)
  expect_s3_class(e, "nce_error_data")
  expect_match(conditionMessage(e), "log densities")
})

test_that("the old names edges() and bf() are gone, the new ones take `object`", {
  K <- ring_graph(5)
  expect_false(any(c("edges", "bf") %in% getNamespaceExports("nce")))
  expect_identical(tgm_edges(object = K, 0.1), tgm_edges(K, 0.1))
  expect_error(edge_roc(object = 1:3, K), "`object`", class = "nce_error_input")
})
