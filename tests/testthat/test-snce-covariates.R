# Covariates in snce(): subject-specific kernel terms, by-subject smooths and random effects.

test_that("subject-specific kernels with a by-subject spline intercept recover each subject's theta", {
  set.seed(121)
  thetas <- c(a = 1, b = 3)
  d <- do.call(rbind, lapply(names(thetas), function(s) {
    data.frame(subject = s, trial = paste0(s, 1:2), y = c(rchain(700, thetas[[s]]), rchain(700, thetas[[s]])))
  }))
  d$subject <- factor(d$subject)
  fit <- snce(~ subject:I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 20, group = "trial",
              intercept = ~ subject + s(y_prev, by = subject, k = 6))
  est <- coef(fit)[c("subjecta:I(y * y_prev)", "subjectb:I(y * y_prev)")]
  se <- sqrt(diag(vcov(fit))[names(est)])
  # exact MLE of each subject's chains
  mle <- vapply(names(thetas), function(s) {
    ys <- split(d$y[d$subject == s], d$trial[d$subject == s])
    stats::optimize(function(t) -sum(vapply(ys, function(y) chain_loglik(t, y), 0)), c(-20, 20), tol = 1e-10)$minimum
  }, 0)
  expect_true(all(abs(est - mle) < 0.5 * se))
  expect_true(all(abs(est - thetas) < 3 * se))
  expect_equal(sort(summary(fit)$smooths$term), c("s(y_prev):subjecta", "s(y_prev):subjectb"))
})

test_that("a subject random effect in the intercept fits", {
  set.seed(122)
  d <- do.call(rbind, lapply(1:6, function(s) data.frame(subject = factor(s), y = rchain(300, 2))))
  fit <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 10, group = "subject",
              intercept = ~ s(y_prev) + s(subject, bs = "re"))
  expect_true(fit$converged)
  expect_true("s(subject)" %in% summary(fit)$smooths$term)
  mle <- stats::optimize(function(t) -sum(vapply(split(d$y, d$subject), function(y) chain_loglik(t, y), 0)),
                         c(-20, 20), tol = 1e-10)$minimum
  expect_lt(abs(coef(fit)[["I(y * y_prev)"]] - mle), sqrt(vcov(fit)[2, 2]))
})
