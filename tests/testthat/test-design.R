# Experimental design by ratio estimation, against the exact EIG of the death model
# (Kleinegesse and Gutmann 2019): y ~ Binomial(50, 1 - exp(-b t)), b ~ N(1, 1) truncated to b > 0.

# Independent check of the quadrature: stats::integrate over b of the sum over y.
eig_by_integrate <- function(t, n = 50) {
  z <- pnorm(1)
  py <- vapply(0:n, function(y) {
    integrate(function(b) dnorm(b, 1, 1) / z * dbinom(y, n, 1 - exp(-b * t)), 0, Inf, rel.tol = 1e-10)$value
  }, 1)
  integrate(function(b) vapply(b, function(bb) {
    p <- dbinom(0:n, n, 1 - exp(-bb * t))
    dnorm(bb, 1, 1) / z * sum(ifelse(p > 0, p * (log(p) - log(py)), 0))
  }, 1), 0, Inf, rel.tol = 1e-10)$value
}

test_that("the exact EIG of the death model agrees with adaptive quadrature", {
  for (t in c(0.05, 3)) {
    expect_equal(death_model_eig(t), eig_by_integrate(t), tolerance = 1e-6)
  }
  # The curve: EIG > 0, maximal near t = 1.28 (grid step 0.01), JSD below log 2.
  tt <- seq(0.01, 4, by = 0.01)
  e <- death_model_eig(tt)
  expect_true(all(e > 0))
  expect_equal(tt[which.max(e)], 1.28)
  expect_true(all(death_model_jsd(c(0.1, 1, 4)) < log(2)))
  # Two groups measured at the same time carry more information than one, less than twice.
  e2 <- death_model_eig(cbind(1, 1))
  expect_gt(e2, death_model_eig(1))
  expect_lt(e2, 2 * death_model_eig(1))
  # Two groups at t1 = t2 = t are one group of 100 at t.
  expect_equal(e2, death_model_eig(1, n_individuals = 100), tolerance = 1e-8)
  expect_equal(death_model_jsd(cbind(1, 1)), death_model_jsd(1, n_individuals = 100), tolerance = 1e-8)
})

test_that("design_eig at its defaults is within max(2 se, 0.05) of the exact EIG", {
  dm <- death_model()
  # t = 1.28 (the optimum) and t = 3 (late, where the old default was 0.14-0.27 nats low).
  for (t in c(1.28, 3)) {
    set.seed(11)
    e <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = t), batch = TRUE)
    expect_s3_class(e, "nce_eig")
    expect_equal(e$folds, 5L)
    truth <- death_model_eig(t)
    est <- e$estimates
    # Stated tolerance (issue #33): plug-in within max(2 se, 0.05 nats) of the exact EIG, and
    # the standard error informative (below 0.15) and not below its Monte Carlo part.
    expect_lte(abs(est$estimate[1] - truth), max(2 * est$std.error[1], 0.05))
    expect_lt(est$std.error[1], 0.15)
    expect_true(all(est$std.error >= est$mc.error - 1e-12))
    # NWJ is a lower bound: not above the truth by more than 3 SEs.
    expect_lt(est$estimate[2], truth + 3 * est$std.error[2])
    # The JSD bound: below the exact JSD (3 SEs) and within 0.05 of it.
    jsd <- death_model_jsd(t)
    expect_lt(est$estimate[3], jsd + 3 * est$std.error[3])
    expect_lt(abs(est$estimate[3] - jsd), 0.05)
  }
  # A single split (folds = 1) reports only the Monte Carlo error.
  set.seed(2)
  e1 <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1), n = 600, batch = TRUE, folds = 1)
  expect_equal(e1$estimates$std.error, e1$estimates$mc.error)
  expect_equal(e1$n_test, 300L)
  expect_error(design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1), n = 60, batch = TRUE),
               class = "nce_error_input")
})

test_that("the InfoNCE term with the exact log ratio is a lower bound close to the EIG, blind to data offsets", {
  # Exact log ratio of the death model at t: log p(y | b, t) - log p(y | t), p(y | t) by quadrature.
  t <- 1.28
  b <- seq(1e-4, 12, length.out = 6001)
  wb <- dnorm(b, 1, 1)
  wb <- wb / sum(wb)
  py <- vapply(0:50, function(y) sum(wb * dbinom(y, 50, 1 - exp(-b * t))), 1)
  set.seed(21)
  m <- 4000
  th <- death_model()$prior$sample(m)[, "b"]
  y <- rbinom(m, 50, 1 - exp(-th * t))
  h_at <- function(bb, yy) dbinom(yy, 50, 1 - exp(-bb * t), log = TRUE) - log(py[yy + 1L])
  h <- h_at(th, y)
  k <- 255L
  cidx <- (seq_len(m) - 1L + rep(seq_len(k), each = m)) %% m + 1L
  h_con <- matrix(h_at(th[cidx], rep(y, k)), m, k)
  h_marg <- h_con[, 1:10]
  terms <- nce:::eig_terms(h, h_marg, h_con)
  exact <- death_model_eig(t)
  est <- colMeans(terms)
  mc <- apply(terms, 2L, sd) / sqrt(m)
  # Plug-in unbiased: within 3 Monte Carlo se; InfoNCE below the EIG (3 se) by at most 0.03 nats (its
  # gap with 255 contrasts, computed: about 0.01).
  expect_lt(abs(est[["plugin"]] - exact), 3 * mc[["plugin"]])
  expect_lt(est[["infonce"]], exact + 3 * mc[["infonce"]])
  expect_gt(est[["infonce"]], exact - 0.03 - 3 * mc[["infonce"]])
  # A log ratio off by a function of the data (an unnormalised classifier) moves the plug-in, not InfoNCE.
  off <- function(yy) 0.3 * (yy / 50 - 0.5)
  terms_off <- nce:::eig_terms(h + off(y), h_marg + off(y), h_con + off(y))
  expect_equal(terms_off[, "infonce"], terms[, "infonce"], tolerance = 1e-10)
  expect_gt(abs(mean(terms_off[, "plugin"]) - est[["plugin"]]), 0.01)
})

test_that("design_eig's printed intervals cover the exact EIG at a small budget", {
  # 400 simulations, 5 folds: intervals of Student's t on the standard error's degrees of freedom.
  # Measured (bench/design-death.R, 500-2,000 simulations, t = 0.25..3): coverage 1.0 of 18 for
  # the GAM. Stated tolerance: at least 3 of 4 seeds at t = 1.28.
  dm <- death_model()
  exact <- death_model_eig(1.28)
  hit <- vapply(1:4, function(s) {
    set.seed(30 + s)
    e <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1.28), n = 400, batch = TRUE)
    ci <- confint(e, "plugin")
    expect_equal(ci[1, ], coef(e)[["plugin"]] + c(-1, 1) * qt(0.975, e$estimates$df[1]) * e$estimates$std.error[1],
                 tolerance = 1e-12, ignore_attr = TRUE)
    ci[1, 1] <= exact && exact <= ci[1, 2]
  }, TRUE)
  expect_gte(sum(hit), 3)
})

test_that("the same seed gives the same estimate under a multisession plan", {
  skip_if_not_installed("future.apply")
  dm <- death_model()
  run <- function() {
    set.seed(3)
    coef(design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1), n = 300, batch = TRUE))
  }
  a <- run()
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  expect_equal(run(), a, tolerance = 1e-10)
})

# One optimisation shared by the tests below (made on first use).
fit_death_design <- local({
  fit <- NULL
  function() {
    if (is.null(fit)) {
      dm <- death_model()
      set.seed(7)
      fit <<- design_optimise(dm$simulator, dm$summaries, dm$prior, lower = dm$lower, upper = dm$upper, n = 1000,
                              batch = TRUE, n_initial = 8, n_refine = 4, rounds = 1)
    }
    fit
  }
})

test_that("design_optimise chooses a time near the exact argmax of the death model", {
  o <- fit_death_design()
  expect_s3_class(o, "nce_design")
  t_hat <- coef(o)[["t"]]
  exact <- death_model_eig(seq(0.01, 4, by = 0.01))
  # The exact curve is flat near its maximum (t = 1.28): within 0.06 nats of it on [0.75, 2.05].
  # Stated tolerance: the exact EIG at the chosen t within 0.06 of the maximum (so t in that set).
  expect_gt(death_model_eig(t_hat), max(exact) - 0.06)
  expect_lt(abs(t_hat - 1.28), 0.8)
  expect_true(o$band[1, 1] <= t_hat && t_hat <= o$band[1, 2])
  # The smooth's EIG at the chosen design and the new evaluation there: within 0.15 of the truth.
  expect_lt(abs(o$eig[["estimate"]] - death_model_eig(t_hat)), 0.15)
  expect_lt(abs(coef(o$final)[["plugin"]] - death_model_eig(t_hat)), 0.15)
  # The printed EIG interval is the new evaluation's (measured: it held the exact EIG for 18 of 20
  # seeds at the defaults, bench/README.md); here it holds it. (The band's coverage of t = 1.28 is
  # measured over seeds in bench/README.md, not asserted on this one: at this seed it misses.)
  expect_identical(attr(o$eig_interval, "source"), "new evaluation")
  expect_equal(unname(o$eig_interval), unname(confint(o$final, "plugin")[1, ]), ignore_attr = TRUE)
  expect_true(o$eig_interval[1] <= death_model_eig(t_hat) && death_model_eig(t_hat) <= o$eig_interval[2])
  # Methods.
  expect_equal(nobs(o), nrow(o$evaluations))
  expect_equal(fitted(o) + residuals(o), o$evaluations$plugin)
  p <- predict(o, data.frame(t = c(0.5, 1.3)), se.fit = TRUE)
  expect_equal(length(p$se.fit), 2L)
  expect_lt(max(abs(p$fit - death_model_eig(c(0.5, 1.3)))), 0.15)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(o, truth = function(d) death_model_eig(d[, "t"])))

  # The posterior at the chosen design for an observation, against the exact posterior.
  set.seed(8)
  y_obs <- matrix(c(dead = 25), 1, dimnames = list(NULL, "dead"))
  post <- ratio_posterior(o, y_obs, n_draws = 20000)
  b <- seq(1e-4, 8, length.out = 8001)
  w <- dnorm(b, 1, 1) * dbinom(25, 50, 1 - exp(-b * t_hat))
  w <- w / sum(w)
  m <- sum(w * b)
  s <- sqrt(sum(w * (b - m)^2))
  # Stated tolerances: mean within a third of the posterior sd, sd within 30 %.
  expect_lt(abs(coef(post)[["b"]] - m), s / 3)
  expect_equal(sqrt(vcov(post)[1, 1]), s, tolerance = 0.3)
})

test_that("print and summary of design results", {
  dm <- death_model()
  set.seed(4)
  e <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1), n = 200, batch = TRUE)
  o <- fit_death_design()
  no_time <- function(x) gsub("[0-9.]+ s$", "<time> s", x)
  local_reproducible_output(width = 100)
  expect_snapshot({
    print(e, digits = 2)
    print(summary(e))
    print(o, digits = 2)
    print(summary(o), digits = 2)
  }, transform = no_time)
  o$final <- NULL
  expect_error(ratio_posterior(o, matrix(c(dead = 3), 1, dimnames = list(NULL, "dead"))), class = "nce_error_input")
})

test_that("a two-dimensional design: two groups measured at t1 and t2", {
  dm <- death_model(groups = 2)
  set.seed(9)
  o <- design_optimise(dm$simulator, dm$summaries, dm$prior, lower = dm$lower, upper = dm$upper, n = 300,
                       batch = TRUE, n_initial = 9, n_refine = 4, rounds = 1, n_final = 0)
  expect_equal(names(coef(o)), c("t1", "t2"))
  expect_equal(dim(confint(o)), c(2L, 2L))
  # The exact maximum lies on the diagonal t1 = t2 (checked on a 0.25-spaced grid of (t1, t2):
  # maximum 1.6765 at (1.25, 1.25)), where two groups are one group of 100. Stated tolerance: the
  # chosen pair's exact EIG within 0.1 nats of that maximum.
  best_exact <- max(death_model_eig(seq(0.5, 2.5, by = 0.01), n_individuals = 100))
  expect_gt(death_model_eig(matrix(coef(o), 1)), best_exact - 0.1)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(o))
})

test_that("sequential design: the posterior after a first count becomes the prior of the next design", {
  o <- fit_death_design()
  t1 <- coef(o)[["t"]]
  dm <- death_model()
  set.seed(12)
  post <- ratio_posterior(o, matrix(30, 1, dimnames = list(NULL, "dead")), n_draws = 10000)
  pr2 <- prior_from_posterior(post)
  expect_s3_class(pr2, "nce_prior")
  # Exact posterior given 30 deaths at t1; the new prior's draws match it (kernel widening included).
  b <- seq(1e-4, 8, length.out = 8001)
  w <- dnorm(b, 1, 1) * dbinom(30, 50, 1 - exp(-b * t1))
  w <- w / sum(w)
  m <- sum(w * b)
  s <- sqrt(sum(w * (b - m)^2))
  d <- pr2$sample(5000)
  expect_true(all(d[, "b"] > 0))
  expect_lt(abs(mean(d[, "b"]) - m), s / 3)
  expect_equal(sd(d[, "b"]), s, tolerance = 0.35)
  expect_true(all(is.finite(pr2$log_density(d[1:5, , drop = FALSE]))))
  expect_equal(pr2$log_density(cbind(b = -1)), -Inf)
  # Second design: the exact EIG of a new group given the first count, against the chosen t2.
  set.seed(13)
  o2 <- design_optimise(dm$simulator, dm$summaries, pr2, lower = dm$lower, upper = dm$upper, n = 500,
                        batch = TRUE, n_initial = 6, n_refine = 3, rounds = 1, n_final = 0)
  obs <- data.frame(t = t1, dead = 30)
  tt <- seq(0.05, 4, by = 0.05)
  exact2 <- death_model_eig(tt, observed = obs)
  # Stated tolerance: the exact conditional EIG at t2 within 0.05 nats of its maximum (for t1 near
  # 1.2 the maximum is near t = 2 and the set within 0.05 about [1.05, 3.4]).
  expect_gt(death_model_eig(coef(o2)[["t"]], observed = obs), max(exact2) - 0.05)
  expect_error(prior_from_posterior(o), class = "nce_error_input")
  expect_error(prior_from_posterior(post, bandwidth = -1), class = "nce_error_input")
})
