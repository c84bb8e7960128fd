# The neural ratio classifier (Rust ratio_net) and the SMC posterior sampler against the exact
# posterior of a Gaussian mean: x = 20 draws of N(mu, 1), mu ~ U(-2, 2); the posterior given x is
# N(mean(x), 1/20) truncated to (-2, 2) (the bounds are 8 sds away from the data used here).

rn_sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
rn_prior <- prior_uniform(mu = c(-2, 2))

rn_env <- new.env()
rn_fit <- function() {
  if (is.null(rn_env$fit)) {
    set.seed(31)
    rn_env$fit <- ratio_amortised(rn_sim, NULL, rn_prior, n = 3000, batch = TRUE, embedding = embed_set(out = 8),
                                  n_networks = 2)
  }
  rn_env$fit
}

test_that("learned summaries of raw exchangeable data give the exact posterior", {
  r <- rn_fit()
  expect_s3_class(r, "nce_ratio_mlp")
  expect_identical(r$classifier, "mlp")
  expect_identical(r$loss, "nrec")
  expect_length(r$summary_names, 20L)
  for (truth in c(-0.7, 0.5)) {
    set.seed(6)
    x <- matrix(rnorm(20, truth), 1)
    post <- ratio_posterior(r, x)
    # Stated tolerances: the mean within 0.3 posterior sds (0.067), the sd within 25% (3,000
    # simulations, 2 networks; measured 0.02-0.05 and 2-15%).
    expect_equal(unname(coef(post)), mean(x), tolerance = 0.067 / abs(mean(x)))
    expect_equal(sqrt(vcov(post)[1, 1]), sqrt(1 / 20), tolerance = 0.25)
    expect_gte(min(post$ess), 2000)
    expect_identical(post$method, "smc")
  }
})

test_that("the learned log ratio is near the exact one where the posterior puts its mass", {
  r <- rn_fit()
  set.seed(7)
  th <- cbind(mu = runif(200, -1.5, 1.5))
  x <- rn_sim(th, 200)
  colnames(x) <- paste0("x", 1:20)
  m <- rowMeans(x)
  # Exact: log N(m; mu, 1/20) - log p(m), p(m) the prior predictive of the mean.
  pm <- vapply(m, function(v) integrate(function(u) dnorm(v, u, sqrt(1 / 20)) / 4, -2, 2)$value, 1)
  exact <- dnorm(m, th[, 1], sqrt(1 / 20), log = TRUE) - log(pm)
  est <- predict(r, data.frame(th, x))
  # Stated tolerance: root-mean-square error below 0.35 on pairs drawn from the joint.
  expect_lt(sqrt(mean((est - exact)^2)), 0.35)
  expect_equal(fitted(r), predict(r, type = "response"))
  expect_length(predict(r, data.frame(th, x)[0, ]), 0L)
})

test_that("the networks are reproducible under set.seed() and do not depend on the thread count", {
  fit_one <- function(threads) {
    old <- options(nce.threads = threads)
    on.exit(options(old))
    set.seed(3)
    r <- ratio_amortised(rn_sim, NULL, rn_prior, n = 300, batch = TRUE, embedding = embed_set(out = 4),
                         n_networks = 2, control = nce_ratio_control(max_epochs = 5))
    set.seed(4)
    list(pred = predict(r), post = ratio_posterior(r, matrix(rnorm(20), 1), n_draws = 500)$draws)
  }
  expect_identical(fit_one(1L), fit_one(2L))
})

test_that("every loss and embedding runs; hand-made summaries combine with an embedding", {
  summ <- function(x) cbind(m = rowMeans(x), matrix(x, nrow(x), dimnames = list(NULL, paste0("x", 1:20))))
  for (loss in c("nre", "bnre")) {
    set.seed(8)
    r <- ratio_amortised(rn_sim, summ, rn_prior, n = 400, batch = TRUE, loss = loss, n_networks = 1,
                         embedding = embed_dense(out = 4, columns = 2:21), control = list(max_epochs = 20))
    expect_identical(r$scaling$direct, "m")
    expect_length(r$scaling$embedded, 20L)
    expect_true(all(is.finite(predict(r))))
  }
  set.seed(9)
  r <- ratio_amortised(rn_sim, NULL, rn_prior, n = 400, batch = TRUE, n_networks = 1,
                       embedding = embed_series(window = 2), control = list(max_epochs = 20))
  expect_output(print(r), "per-window network")
})

test_that("the network classifier and the sampler refuse bad input with classed errors", {
  expect_error(ratio_amortised(rn_sim, NULL, rn_prior, n = 50, batch = TRUE, embedding = "set"),
               class = "nce_error_input")
  expect_error(ratio_amortised(rn_sim, NULL, rn_prior, n = 50, batch = TRUE, embedding = embed_set(item = 3)),
               class = "nce_error_input")
  expect_error(ratio_amortised(rn_sim, NULL, rn_prior, n = 50, batch = TRUE, embedding = embed_series(window = 30)),
               class = "nce_error_input")
  expect_error(ratio_amortised(rn_sim, NULL, rn_prior, n = 50, batch = TRUE, embedding = embed_set(columns = "z")),
               class = "nce_error_input")
  expect_error(ratio_amortised(rn_sim, NULL, rn_prior, n = 50, batch = TRUE, loss = "hinge"),
               class = "nce_error_input")
  expect_error(ratio_amortised(rn_sim, NULL, rn_prior, n = 50, batch = TRUE, loss = "nre", formula = ~ s(mu)),
               class = "nce_error_input")
  expect_error(embed_set(out = 0), class = "nce_error_input")
  expect_error(embed_dense(hidden = -1), class = "nce_error_input")
  expect_error(nce_ratio_control(batch_size = 1), class = "nce_error_input")
  # A training beyond the work bound is refused before it starts.
  expect_error(ratio_amortised(rn_sim, NULL, rn_prior, n = 50, batch = TRUE, control = list(max_epochs = 2e9)),
               class = "nce_error_input")
})

test_that("SMC with a prior known only in R; a failing prior is a model error", {
  r <- rn_fit()
  pr <- prior_custom(sample = function(n) cbind(mu = rnorm(n, 0, 0.5)),
                     log_density = function(th) dnorm(th[, "mu"], 0, 0.5, log = TRUE), names = "mu")
  r2 <- r
  r2$prior <- pr
  set.seed(10)
  x <- matrix(rnorm(20, 0.4), 1)
  post <- ratio_posterior(r2, x)
  # Conjugate: precision 4 + 20, mean 20 mean(x) / 24 (within 0.3 posterior sds, sd within 25%).
  expect_equal(unname(coef(post)), 20 * mean(x) / 24, tolerance = 0.3 * sqrt(1 / 24) / (20 * mean(x) / 24))
  expect_equal(sqrt(vcov(post)[1, 1]), sqrt(1 / 24), tolerance = 0.25)
  bad <- prior_custom(sample = function(n) cbind(mu = rnorm(n)), log_density = function(th) stop("prior boom"),
                      names = "mu")
  r2$prior <- bad
  expect_error(ratio_posterior(r2, x), class = "nce_error_model")
})
