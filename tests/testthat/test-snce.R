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
  expect_length(coef(ft), 1L)   # theta; the 2000 free intercepts are eliminated in the fit
  expect_length(ft$transition_intercepts, 2000L)
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
  expect_warning(fs <- update(fit, cluster = "sequence"), class = "nce_warning_few_clusters")
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


test_that("per-transition intercepts: the eliminated fit is the MLE of glm with one intercept per transition", {
  set.seed(111)
  y <- rchain(60, 2)
  set.seed(112)
  ft <- snce(~ I(y * y_prev), data.frame(y = y), ref_uniform(y = c(0, 1)), ratio = 4, intercept = "transition")
  mf <- model.frame(ft)
  g <- suppressWarnings(glm(.label ~ 0 + I(y * y_prev) + factor(.transition) + offset(.offset), binomial, mf,
                            control = glm.control(epsilon = 1e-12, maxit = 100)))
  expect_equal(unname(coef(ft)), unname(coef(g)[1]), tolerance = 1e-7)
  expect_equal(unname(vcov(ft, se_type = "naive")[1, 1]), unname(vcov(g)[1, 1]), tolerance = 1e-6)
  expect_equal(unname(ft$transition_intercepts), unname(coef(g)[-1]), tolerance = 1e-6)
  expect_equal(unname(ft$transition_intercept_se), unname(sqrt(diag(vcov(g)))[-1]), tolerance = 1e-6)
  # logLik: kernel plus the transition's own intercept, one df per intercept
  ll <- logLik(ft)
  expect_equal(as.numeric(ll), sum(coef(ft) * y[-1] * y[-61] + ft$transition_intercepts), tolerance = 1e-10)
  expect_equal(attr(ll, "df"), sum(ft$edf) + 60)
  expect_error(predict(ft, type = "lpmatrix"), class = "nce_error_unsupported")
})

test_that("logLik is the sum of log transition densities, checked against the closed-form normaliser", {
  set.seed(113)
  y <- rchain(400, 2)
  set.seed(114)
  fit <- snce(~ I(y * y_prev), data.frame(y = y), ref_uniform(y = c(0, 1)), ratio = 20, intercept = ~ s(y_prev, k = 6))
  th <- unname(coef(fit)["I(y * y_prev)"])
  exact <- chain_loglik(th, y)   # the fitted kernel, normalised exactly
  ll <- logLik(fit)
  expect_equal(attr(ll, "nobs"), 400)
  expect_equal(attr(ll, "df"), sum(fit$edf))
  # The spline intercept estimates -log Z(y_prev) with error O(1 / sqrt(ratio)) per transition:
  # within 0.02 per transition on average.
  expect_lt(abs(as.numeric(ll) - exact) / 400, 0.02)
  # Importance sampling from the reference: within 0.005 per transition with 2000 draws each.
  set.seed(115)
  lr <- logLik(fit, normalise = "reference", n_draws = 2000)
  expect_lt(abs(as.numeric(lr) - exact) / 400, 0.005)
  expect_equal(AIC(fit), -2 * as.numeric(ll) + 2 * attr(ll, "df"))
})

test_that("anova of nested snce fits is a Wald test with the sandwich covariance", {
  set.seed(116)
  y <- rchain(300, 2)
  d <- data.frame(y = y)
  set.seed(117)
  big <- snce(~ I(y * y_prev) + I(y^2), d, ref_uniform(y = c(0, 1)), ratio = 10, intercept = ~ s(y_prev, k = 5))
  set.seed(117)
  small <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 10, intercept = ~ s(y_prev, k = 5))
  a <- anova(small, big)
  b <- coef(big)["I(y^2)"]
  w <- unname(b^2 / vcov(big)["I(y^2)", "I(y^2)"])
  expect_equal(a$Wald[2], w, tolerance = 1e-10)
  expect_equal(a[["Pr(>Chi)"]][2], pchisq(w, 1, lower.tail = FALSE), tolerance = 1e-10)
  expect_identical(anova(big, small)$Wald, a$Wald)
})

test_that("a random-effect smooth in the kernel plots (as a QQ plot) without printing the factor", {
  set.seed(118)
  d <- do.call(rbind, lapply(1:4, function(s) data.frame(y = rchain(40, 2), subject = factor(s, levels = 1:4))))
  set.seed(119)
  fit <- snce(~ I(y * y_prev) + s(y, subject, bs = "re"), d, ref_uniform(y = c(0, 1)), ratio = 5, group = "subject",
              intercept = ~ s(y_prev, k = 5))
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  out <- utils::capture.output(res <- plot(fit))
  expect_identical(out, character())
  expect_identical(res, fit)
})

test_that("print of an snce fit with one kernel coefficient keeps its name", {
  set.seed(120)
  fit <- snce(~ I(y * y_prev), data.frame(y = rchain(100, 2)), ref_uniform(y = c(0, 1)), ratio = 5,
              intercept = ~ s(y_prev, k = 5))
  out <- utils::capture.output(print(fit))
  expect_true(any(grepl("I(y * y_prev)", out, fixed = TRUE)))
})

test_that("cluster = \"sequence\" warns with few sequences and falls back with one", {
  set.seed(121)
  d <- data.frame(y = rchain(199, 2), g = rep(1:4, each = 50))
  expect_warning(snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 3, group = "g", cluster = "sequence"),
                 "4 sequences", class = "nce_warning_few_clusters")
  expect_warning(f1 <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 3, cluster = "sequence"),
                 "clustered by transition instead", class = "nce_warning_one_cluster")
  expect_identical(f1$cluster, "transition")
})

test_that("snce(ratio = 1e7) is refused before allocating", {
  expect_error(snce(~ I(y * y_prev), data.frame(y = rchain(100, 2)), ref_uniform(y = c(0, 1)), ratio = 1e7),
               "ratio", class = "nce_error_size")
})

test_that("data and reference rows are stacked exactly as rbind() stacks them", {
  a <- data.frame(x = 1:2, f = factor(c("a", "b")), o = factor(c("lo", "hi"), levels = c("lo", "hi"), ordered = TRUE),
                  s = c("u", "v"), l = c(TRUE, FALSE))
  b <- data.frame(x = 3.5, f = factor("c"), o = factor("hi", levels = c("lo", "hi"), ordered = TRUE), s = "w",
                  l = NA)
  want <- rbind(a, b)
  rownames(want) <- NULL
  expect_identical(nce:::stack_rows(a, b), want)
  # Columns rbind() treats specially (dates here) take rbind()'s own path.
  a$d <- as.Date("2026-01-01") + 0:1
  b$d <- as.Date("2026-02-01")
  want <- rbind(a, b)
  rownames(want) <- NULL
  expect_identical(nce:::stack_rows(a, b), want)
})

test_that("predict() at no rows gives empty results, as glm's does", {
  set.seed(3)
  d <- rlatkes(300, list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768), n_trials = 2)
  f <- latkes(d, group = "trial", window = c(0, 1024, 0, 768), ratio = 10,
              kernel = ~ s(dist, bs = "cr") + s(angle, bs = "cc", k = 8))
  nd <- model.frame(f)[0, ]
  expect_length(predict(f, newdata = nd), 0L)
  p <- predict(f, newdata = nd, se.fit = TRUE)
  expect_length(p$fit, 0L)
  expect_length(p$se.fit, 0L)
  tm <- predict(f, newdata = nd, type = "terms", se.fit = TRUE)
  expect_identical(dim(tm$fit), c(0L, 2L))
  expect_identical(colnames(tm$se.fit), c("s(dist)", "s(angle)"))
  # The same columns as at one row.
  expect_identical(colnames(predict(f, newdata = model.frame(f)[1, ], type = "terms")), colnames(tm$fit))
})

test_that("logLik(newdata =) of an snce fit is the held-out log-likelihood of the new transitions", {
  set.seed(31)
  ch <- data.frame(y = rchain(300, 2))
  held_out <- data.frame(y = rchain(60, 2))
  fit <- snce(~ I(y * y_prev) + I(y^2), ch, ref_uniform(y = c(0, 1)), ratio = 5, intercept = ~ s(y_prev, k = 5))
  ll <- logLik(fit, newdata = held_out)
  expect_equal(attr(ll, "nobs"), 60)
  # The chain's true transition log density over the 60 held-out transitions: 1.74 (the fit 1.51).
  expect_lt(abs(as.numeric(ll) - chain_loglik(2, held_out$y)), 1)
  expect_lt(abs(as.numeric(logLik(fit, newdata = held_out, normalise = "reference")) - as.numeric(ll)), 0.5)
  # Transitions give the same as the sequence they come from.
  tr <- data.frame(y = held_out$y[-1], y_prev = held_out$y[-61])
  expect_equal(as.numeric(logLik(fit, newdata = tr)), as.numeric(ll), tolerance = 1e-10)
  expect_equal(attr(logLik(fit), "nobs"), 300)
})
