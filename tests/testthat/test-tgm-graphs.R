test_that("ring and hub graphs have the paper's structure and are diagonally dominant", {
  set.seed(1)
  K <- ring_graph(20)
  G <- attr(K, "graph")
  expect_equal(sum(G) / 2, 20)                     # a ring on 20 nodes has 20 edges
  expect_true(all(rowSums(G) == 2))
  off <- K[upper.tri(K) & G]
  expect_true(all(off >= 0.3 & off <= 0.5))
  expect_true(all(diag(K) > rowSums(abs(K)) - diag(K)))
  H <- hub_graph(20)
  deg <- rowSums(attr(H, "graph"))
  expect_true(max(deg) >= 5)                       # 2 hubs joined to a quarter of the nodes
  expect_true(all(eigen(H, only.values = TRUE)$values > 0))
  expect_error(ring_graph(2), class = "nce_error_input")
  expect_error(ring_graph(5, low = 0.5, high = 0.3), class = "nce_error_input")
})

test_that("edge_roc() gives the Mann-Whitney AUC", {
  set.seed(2)
  K <- ring_graph(10)
  expect_equal(edge_roc(K, K)$auc, 1)
  expect_equal(edge_roc(-K, K)$auc, 0)
  E <- K + matrix(rnorm(100, sd = 0.3), 10)
  G <- attr(K, "graph")
  s <- E[upper.tri(E)]
  e <- G[upper.tri(G)]
  w <- stats::wilcox.test(s[e], s[!e], exact = FALSE)$statistic
  expect_equal(edge_roc(E, K)$auc, unname(w) / (sum(e) * sum(!e)), tolerance = 1e-12)
  ed <- tgm_edges(K, 0.2)
  expect_equal(nrow(ed), 10)
  expect_false(exists("edges", envir = asNamespace("nce"), inherits = FALSE))  # old name dropped
  expect_true(all(ed$from < ed$to))
  expect_error(edge_roc(K, matrix(TRUE, 3, 3)), class = "nce_error_input")
})

test_that("rtgm() agrees with tmvtnorm's Gibbs sampler in mean and covariance", {
  skip_if_not_installed("tmvtnorm")
  set.seed(3)
  K <- ring_graph(5)
  n <- 20000
  a <- rtgm(n, K, burnin = 100, thin = 10, n_chains = 2)
  b <- tmvtnorm::rtmvnorm(n, mean = rep(0, 5), H = K, lower = rep(0, 5), algorithm = "gibbs",
                          burn.in.samples = 100, thinning = 10)
  expect_equal(dim(a), c(n, 5L))
  expect_true(all(a > 0))
  # Monte Carlo tolerance: 5 standard errors of a difference of two means (draws nearly independent after thinning)
  se_m <- sqrt(2 * apply(b, 2, var) / n)
  expect_lt(max(abs(colMeans(a) - colMeans(b)) / se_m), 5)
  va <- cov(a)
  vb <- cov(b)
  expect_lt(max(abs(va - vb)), 0.05 * max(abs(vb)))
})

test_that("rtgm() checks its arguments and does not depend on the thread count", {
  K <- ring_graph(4)
  expect_error(rtgm(10, -K), "not positive definite", class = "nce_error_input")
  expect_error(rtgm(10, K[1:3, ]), class = "nce_error_input")
  expect_error(rtgm(10, K, start = c(-1, 1, 1, 1)), class = "nce_error_input")
  set.seed(4); a <- withr_threads(1, rtgm(100, K, n_chains = 2))
  set.seed(4); b <- withr_threads(2, rtgm(100, K, n_chains = 2))
  expect_identical(a, b)
})

test_that("hub_graph() with heavy weights sets its own diagonal (regression: ring_graph(diag = 1) inside)", {
  set.seed(1)
  k <- hub_graph(10, low = 0.6, high = 0.8)
  expect_true(all(diag(k) > rowSums(abs(k)) - diag(k)))
  expect_gt(min(eigen(k, symmetric = TRUE, only.values = TRUE)$values), 0)
})

test_that("choice arguments give classed errors naming the argument", {
  expect_error(tgm_model("foo"), "`family`", class = "nce_error_input")
  expect_error(vnce(rtgm(20, ring_graph(3)), method = "bogus"), "`method`", class = "nce_error_input")
})
