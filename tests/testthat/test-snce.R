# Sequential NCE against the exact MLE of the truncated-exponential Markov chain.

fit_chain <- function(y, ...) {
  snce(~ I(y * y_prev), data.frame(y = y), ref_uniform(y = c(0, 1)), ratio = 20, ...)
}
theta_of <- function(fit) coef(fit)[["I(y * y_prev)"]]
se_of <- function(fit) sqrt(vcov(fit)["I(y * y_prev)", "I(y * y_prev)"])

test_that("averaged over 20 chains, the spline-intercept fit is within 0.45 SE of the exact MLE", {
  set.seed(101)
  z <- replicate(20, {
    y <- rchain(2000, 2)
    fit <- fit_chain(y)
    abs(theta_of(fit) - chain_mle(y)) / se_of(fit)
  })
  # Measured: 0.20 with this seed.
  expect_lt(mean(z), 0.45)
})

test_that("95% intervals cover the true theta 93-97% of the time over 200 chains", {
  set.seed(102)
  cover <- replicate(200, {
    ci <- confint(fit_chain(rchain(2000, 2)), "I(y * y_prev)")
    ci[1] < 2 && 2 < ci[2]
  })
  message(sprintf("snce coverage over 200 chains: %.3f", mean(cover)))
  expect_gte(mean(cover), 0.93)
  expect_lte(mean(cover), 0.97)
})

test_that("the spline intercept tracks the true -log normaliser", {
  set.seed(103)
  y <- rchain(4000, 2)
  fit <- fit_chain(y)
  th <- theta_of(fit)
  grid <- data.frame(y = 0.5, y_prev = seq(0.05, 0.95, by = 0.05))
  chi <- predict(fit, grid, type = "log_density") - predict(fit, grid, type = "log_kernel")
  # chi(y_prev) estimates -log Z(theta y_prev) (q = 1 on [0, 1]).
  expect_lt(max(abs(chi - (-chain_log_z(th * grid$y_prev)))), 0.05)
  expect_equal(unname(predict(fit, grid, type = "log_kernel")), th * grid$y * grid$y_prev)
})

test_that("per-transition intercepts agree, with wider intervals", {
  set.seed(104)
  y <- rchain(2000, 2)
  fs <- fit_chain(y)
  ft <- fit_chain(y, intercept = "transition")
  expect_length(coef(ft), 2001L)   # (Intercept), theta and 1999 transition contrasts
  expect_lt(abs(theta_of(ft) - chain_mle(y)), 2 * se_of(ft))
  expect_gt(se_of(ft), se_of(fs))
  expect_error(predict(ft, data.frame(y = 0.5, y_prev = 0.5), type = "log_density"), "transition")
})

test_that("a truncated normal random-walk kernel estimates the same kernel", {
  set.seed(105)
  y <- rchain(2000, 2)
  fk <- snce(~ I(y * y_prev), data.frame(y = y), kernel_normal(c(y = 0.3), window = list(y = c(0, 1))), ratio = 20)
  expect_lt(abs(theta_of(fk) - chain_mle(y)), 2 * se_of(fk))
})

test_that("sequences: no transition crosses a group, order 2 and clustering by sequence", {
  set.seed(106)
  d <- do.call(rbind, lapply(1:4, function(g) data.frame(trial = g, y = rchain(200, 2))))
  fit <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, group = "trial")
  expect_equal(nobs(fit), nrow(d) - 4)
  expect_equal(fit$n_sequences, 4L)
  expect_true(all(model.frame(fit)$y_prev[model.frame(fit)$.label == 1] ==
                    unlist(lapply(split(d$y, d$trial), function(v) v[-length(v)]))))
  fs <- update(fit, cluster = "sequence")
  expect_false(isTRUE(all.equal(vcov(fs), vcov(fit))))
  f2 <- snce(~ I(y * y_prev) + I(y * y_prev2), d, ref_uniform(y = c(0, 1)), ratio = 5, group = "trial", order = 2,
             intercept = ~ s(y_prev, y_prev2, k = 10))
  expect_equal(nobs(f2), nrow(d) - 8)
  # the true kernel has no lag-2 term
  expect_lt(abs(coef(f2)[["I(y * y_prev2)"]]), 3 * sqrt(vcov(f2)["I(y * y_prev2)", "I(y * y_prev2)"]))
})

test_that("bad sequence input is reported", {
  set.seed(107)
  d <- data.frame(trial = rep(1:3, c(50, 1, 50)), y = runif(101), time = c(1:50, 1, 50:1))
  expect_warning(snce(~ I(y * y_prev), d[d$trial != 3, ], ref_uniform(y = c(0, 1)), ratio = 2, group = "trial"),
                 "1 sequence\\(s\\) shorter than order \\+ 1 = 2", class = "nce_warning_short")
  expect_error(suppressWarnings(snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 2, group = "trial", time = "time")),
               "time does not increase within sequence\\(s\\) 3", class = "nce_error_data")
  d2 <- d[d$trial == 1, ]
  d2$y[10] <- NA
  expect_error(snce(~ I(y * y_prev), d2, ref_uniform(y = c(0, 1)), ratio = 2), "row\\(s\\) \\(10\\)", class = "nce_error_data")
  d3 <- d[d$trial == 1, ]
  d3$y[5] <- 1.5
  expect_error(snce(~ I(y * y_prev), d3, ref_uniform(y = c(0, 1)), ratio = 2), "outside the reference kernel's support \\(rows 5",
               class = "nce_error_support")
  expect_error(snce(~ I(y * y_prev), d2, ref_uniform(y = c(0, 1)), ratio = 2.5), "whole number", class = "nce_error_input")
  expect_error(snce(~ I(y * y_prev), d[d$trial == 1, ], ref_uniform(y = c(0, 1)), intercept = "spline"), "`intercept`",
               class = "nce_error_input")
})

test_that("methods: summary, print, predict terms, plot", {
  set.seed(108)
  y <- rchain(800, 2)
  fit <- snce(~ s(y, k = 6) + I(y * y_prev), data.frame(y = y), ref_uniform(y = c(0, 1)), ratio = 10)
  s <- summary(fit)
  expect_equal(rownames(s$coefficients), "I(y * y_prev)")
  expect_equal(s$smooths$part, c("kernel", "intercept"))
  expect_output(print(fit), "800 transitions in 1 sequence")
  tm <- predict(fit, data.frame(y = c(0.2, 0.8), y_prev = 0.5), type = "terms", se.fit = TRUE)
  expect_equal(colnames(tm$fit), c("I(y * y_prev)", "s(y)"))
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  on.exit({ grDevices::dev.off(); unlink(f) })
  expect_invisible(plot(fit))
})

test_that("simulated chains follow the fitted kernel", {
  set.seed(109)
  y <- rchain(3000, 2)
  fit <- fit_chain(y)
  s <- simulate(fit, nsim = 1, seed = 5, candidates = 200)
  expect_equal(nrow(s), 3001)
  expect_equal(s$.step, 0:3000)
  expect_true(all(s$y >= 0 & s$y <= 1))
  # The exact MLE on the simulated chain recovers the fitted theta.
  th <- coef(fit)[["I(y * y_prev)"]]
  mle_sim <- chain_mle(s$y)
  expect_lt(abs(mle_sim - th), 3 * 0.13)
  expect_identical(simulate(fit, seed = 5, candidates = 20)$y, simulate(fit, seed = 5, candidates = 20)$y)
  d <- data.frame(trial = rep(1:2, each = 101), y = c(rchain(100, 2), rchain(100, 2)))
  f2 <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, group = "trial")
  s2 <- simulate(f2, nsim = 2, seed = 1, candidates = 20)
  expect_equal(nrow(s2), 2 * 2 * 101)
  expect_equal(sort(unique(s2$.sequence)), c("1", "2"))
})

test_that("a smooth that cannot be set up is a classed error naming the term", {
  set.seed(110)
  d <- data.frame(y = rbinom(200, 1, 0.5) * 0.5 + 0.25)
  expect_error(snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 2),
               "cannot set up the smooth term s\\(y_prev\\)", class = "nce_error_input")
})
