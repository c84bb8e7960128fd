# ratio_sequential(): truncated-prior rounds for one observation, against exact conjugate posteriors.

# Two normal means observed through their sample means of 10 draws each (sd 1): the likelihood of
# (a, b) given the observed means (ma, mb) is N(ma, 1/10) x N(mb, 1/10).
seq_sim <- function(theta, n) {
  cbind(ma = stats::rnorm(n, theta[, "a"], sqrt(0.1)), mb = stats::rnorm(n, theta[, "b"], sqrt(0.1)))
}
seq_obs <- matrix(c(0.3, -0.4), 1L, dimnames = list(NULL, c("ma", "mb")))
seq_fit <- function(prior, ...) {
  ratio_sequential(seq_sim, NULL, prior, seq_obs, n = 3000, rounds = 3, batch = TRUE, n_draws = 2000,
                   hidden = c(32, 32), n_networks = 1, ...)
}
# Exact posterior mass of independent normal components inside a box (rows lower, upper).
box_mass <- function(box, mean, sd) prod(stats::pnorm(box[2L, ], mean, sd) - stats::pnorm(box[1L, ], mean, sd))

test_that("uniform prior: the posterior matches the exact one and the boxes keep its mass", {
  set.seed(1)
  r <- seq_fit(prior_uniform(a = c(-5, 5), b = c(-5, 5)))
  expect_s3_class(r, c("nce_ratio_sequential", "nce_ratio_mlp", "nce_ratio"))
  expect_equal(nrow(r$rounds), 3L)
  expect_equal(r$n_total, 3000L)
  expect_equal(r$rounds$simulated, c(1000, 1000, 1000))
  # The last round trains on round 3's simulations and on the earlier ones inside its box.
  expect_true(all(r$rounds$trained_on[3L] >= 1000))
  expect_true(r$rounds$trained_on[3L] < 3000)
  # Exact posterior: N(0.3, 0.1) x N(-0.4, 0.1) (the prior's box cuts nothing measurable).
  mu <- c(a = 0.3, b = -0.4)
  sdv <- sqrt(0.1)
  for (box in r$regions) expect_gt(box_mass(box, mu, sdv), 0.999)
  # The boxes are nested and the last is much smaller than the prior's.
  expect_true(all(r$regions[[3L]][1L, ] >= r$regions[[2L]][1L, ]) && all(r$regions[[3L]][2L, ] <= r$regions[[2L]][2L, ]))
  expect_lt(r$rounds$prior_mass[3L], 0.5)
  expect_equal(r$prior$kind, "uniform")
  expect_equal(r$rounds$prior_mass[3L], prod((r$region[2L, ] - r$region[1L, ]) / 10))
  post <- ratio_posterior(r, seq_obs, n_draws = 4000)
  expect_true(all(nce:::in_region(post$draws, r$region)))
  # Means within 0.15 (half a posterior sd; 3,000 simulations in all), sds within 0.8-1.25 times.
  expect_lt(max(abs(coef(post) - mu)), 0.15)
  ratio_sd <- sqrt(diag(vcov(post))) / sdv
  expect_true(all(ratio_sd > 0.8 & ratio_sd < 1.25), info = paste(round(ratio_sd, 3), collapse = " "))
  expect_output(print(r), "Sequential ratio estimator for one observation: 3 rounds")
  expect_output(print(summary(r)), "round 3:")
})

test_that("normal prior: exact truncated draws, and the posterior matches the conjugate one", {
  set.seed(2)
  pr <- prior_normal(mean = c(a = 0, b = 0), sd = c(a = 1, b = 1))
  r <- seq_fit(pr)
  # Conjugate posterior: precision 1 + 10, mean 10 / 11 x the observed mean.
  mu <- 10 / 11 * c(a = 0.3, b = -0.4)
  sdv <- sqrt(1 / 11)
  for (box in r$regions[-1L]) expect_gt(box_mass(box, mu, sdv), 0.999)
  expect_equal(r$prior$kind, "truncated")
  expect_equal(r$rounds$prior_mass[3L], box_mass(r$region, c(0, 0), 1))
  post <- ratio_posterior(r, seq_obs, n_draws = 4000)
  # Means within 0.15 (half a posterior sd; 3,000 simulations in all), sds within 0.8-1.25 times.
  expect_lt(max(abs(coef(post) - mu)), 0.15)
  ratio_sd <- sqrt(diag(vcov(post))) / sdv
  expect_true(all(ratio_sd > 0.8 & ratio_sd < 1.25), info = paste(round(ratio_sd, 3), collapse = " "))
})

test_that("truncated priors draw from the truncated distribution and keep the log density inside", {
  # N(0, 1) truncated to [1, 2]: mean (phi(1) - phi(2)) / (Phi(2) - Phi(1)) = 1.383.
  exact <- (dnorm(1) - dnorm(2)) / (pnorm(2) - pnorm(1))
  pr_n <- prior_normal(mean = c(a = 0), sd = c(a = 1))
  pr_c <- prior_custom(function(n) cbind(a = rnorm(n)), function(th) dnorm(th[, "a"], log = TRUE), names = "a")
  set.seed(3)
  for (pr in list(pr_n, pr_c)) {
    tp <- nce:::truncate_prior(pr, 1, 2)
    th <- tp$sample(20000)
    expect_true(all(th >= 1 & th <= 2))
    # Monte Carlo se of the mean: sd 0.27 / sqrt(20000) = 0.002.
    expect_lt(abs(mean(th) - exact), 0.01)
    expect_equal(tp$log_density(cbind(a = c(1.5, 0.5, 2.5))), c(dnorm(1.5, log = TRUE), -Inf, -Inf))
  }
  tu <- nce:::truncate_prior(prior_uniform(a = c(0, 10)), -1, 4)
  expect_equal(unname(c(tu$lower, tu$upper, tu$mass)), c(0, 4, 0.4))
  # The next box: the draws' range widened by margin x range on each side, within the current box.
  nb <- nce:::next_region(cbind(mu = c(0, 1, 0.5)), rbind(lower = c(mu = -5), upper = c(mu = 1.1)), 0.25, 2L, NULL)
  expect_equal(nb, rbind(lower = c(mu = -0.25), upper = c(mu = 1.1)))
  expect_error(nce:::next_region(cbind(mu = c(1, 1)), nb, 0.25, 2L, NULL), class = "nce_error_region")
  # A box with too little of a custom prior's mass to draw by rejection.
  tc <- nce:::truncate_prior(pr_c, 6, 7, max_draws = 1e4)
  expect_error(tc$sample(10), class = "nce_error_region")
})

test_that("reproducible under set.seed(), and local to its observation", {
  run <- function() {
    set.seed(4)
    ratio_sequential(seq_sim, NULL, prior_uniform(a = c(-5, 5), b = c(-5, 5)), seq_obs, n = 400, rounds = 2,
                     batch = TRUE, n_draws = 200, hidden = c(8), n_networks = 1,
                     control = nce_ratio_control(max_epochs = 20))
  }
  r1 <- run()
  r2 <- run()
  expect_identical(r1$regions, r2$regions)
  expect_identical(colnames(r1$region), c("a", "b"))
  expect_identical(r1$simulations$theta, r2$simulations$theta)
  expect_identical(r1$networks, r2$networks)
  other <- seq_obs
  other[1L, 1L] <- 1
  expect_error(ratio_posterior(r1, other, n_draws = 100), class = "nce_error_input")
  expect_error(update(r1), class = "nce_error_unsupported")
})

test_that("bad inputs are refused with classed errors", {
  pr <- prior_uniform(a = c(-5, 5), b = c(-5, 5))
  call_seq <- function(...) ratio_sequential(seq_sim, NULL, pr, seq_obs, batch = TRUE, ...)
  expect_error(call_seq(rounds = 0), class = "nce_error_input")
  expect_error(call_seq(rounds = 2.5), class = "nce_error_input")
  expect_error(call_seq(n = 30, rounds = 4), class = "nce_error_input")
  expect_error(call_seq(margin = -1), class = "nce_error_input")
  expect_error(call_seq(n_draws = 10), class = "nce_error_input")
  expect_error(call_seq(simulations = NULL), class = "nce_error_input")
  expect_error(call_seq(hiden = 8), class = "nce_error_input")
  expect_error(call_seq(8), class = "nce_error_input")
  expect_error(call_seq(early = 1), class = "nce_error_input")
  expect_error(call_seq(early = list(n = 5)), class = "nce_error_input")
  expect_error(ratio_sequential(seq_sim, NULL, list(), seq_obs), class = "nce_error_input")
  expect_error(ratio_sequential(seq_sim, function(x) stop("no"), pr, seq_obs), class = "nce_error_input")
  # Errors from the rounds name the user's call.
  e <- tryCatch(call_seq(n = 100, rounds = 2, loss = "nope"), error = identity)
  expect_s3_class(e, "nce_error_input")
  expect_identical(e$call[[1L]], as.name("ratio_sequential"))
})
