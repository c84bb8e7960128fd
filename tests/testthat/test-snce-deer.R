# Sequential NCE on real GPS data (one red deer, amt's `deer`): a step-selection kernel with
# per-transition intercepts is a logistic regression with one free intercept per stratum
# (transition); conditional logistic regression (survival::clogit) on the same rows is the
# exact-normaliser version. The two differ by the incidental-parameter bias of the free
# intercepts, which vanishes as the number of reference points per transition grows.

skip_if_not_installed("survival")

deer_data <- function() utils::read.csv(file.path(shared_data_dir(), "deer.csv"))

# Kernel terms: log step length, step length, cosine of the turning angle (order 2).
deer_formula <- ~ I(log(sqrt((x - x_prev)^2 + (y - y_prev)^2))) + I(sqrt((x - x_prev)^2 + (y - y_prev)^2)) +
  I(((x - x_prev) * (x_prev - x_prev2) + (y - y_prev) * (y_prev - y_prev2)) /
      (sqrt((x - x_prev)^2 + (y - y_prev)^2) * sqrt((x_prev - x_prev2)^2 + (y_prev - y_prev2)^2)))

# The usual step-selection reference: gamma step lengths (fitted by ML to the observed steps,
# within bursts) and uniform directions around the previous fix. In the plane,
# q(y_t | y_{t-1}) = gamma(r; shape, scale) / (2 pi r), r = |y_t - y_{t-1}|.
deer_gamma_kernel <- function(d) {
  sl <- unlist(lapply(split(d, d$burst), function(b) sqrt(diff(b$x)^2 + diff(b$y)^2)), use.names = FALSE)
  p <- stats::optim(c(0, log(stats::median(sl))),
                    function(p) -sum(stats::dgamma(sl, shape = exp(p[1]), scale = exp(p[2]), log = TRUE)))$par
  shape <- exp(p[1])
  scale <- exp(p[2])
  kernel_custom(
    function(prev, n) {
      m <- nrow(prev) * n
      r <- stats::rgamma(m, shape = shape, scale = scale)
      a <- stats::runif(m, 0, 2 * pi)
      i <- rep(seq_len(nrow(prev)), each = n)
      data.frame(x = prev$x[i] + r * cos(a), y = prev$y[i] + r * sin(a))
    },
    function(x, prev) {
      r <- sqrt((x$x - prev$x)^2 + (x$y - prev$y)^2)
      stats::dgamma(r, shape = shape, scale = scale, log = TRUE) - log(2 * pi * r)
    },
    vars = c("x", "y"))
}

fit_deer <- function(d, kernel, ratio, intercept = "transition") {
  # Six bursts have fewer than order + 1 = 3 fixes; snce() leaves them out with a warning
  # of class nce_warning_short. That warning is tested on its own below; here it is muffled,
  # and only it: any other warning (separation, convergence) still surfaces.
  withCallingHandlers(
    snce(deer_formula, d, kernel, ratio = ratio, intercept = intercept, group = "burst", order = 2, time = "time"),
    nce_warning_short = function(w) invokeRestart("muffleWarning"))
}

# clogit on the fit's own rows: label ~ same terms + offset (log(1/ratio) - log q), one
# stratum per transition.
clogit_deer <- function(fit) {
  mf <- model.frame(fit)
  mf$sl <- sqrt((mf$x - mf$x_prev)^2 + (mf$y - mf$y_prev)^2)
  mf$ca <- ((mf$x - mf$x_prev) * (mf$x_prev - mf$x_prev2) + (mf$y - mf$y_prev) * (mf$y_prev - mf$y_prev2)) /
    (mf$sl * sqrt((mf$x_prev - mf$x_prev2)^2 + (mf$y_prev - mf$y_prev2)^2))
  # clogit() builds a coxph() call and evaluates it in its caller's frame, so it needs
  # survival's functions in scope; evaluate it in an environment above survival's namespace
  # rather than attaching the package.
  env <- list2env(list(mf = mf), parent = asNamespace("survival"))
  cf <- eval(quote(clogit(.label ~ log(sl) + sl + ca + offset(.offset) + strata(.transition), data = mf)), env)
  list(coef = unname(stats::coef(cf)), se = unname(sqrt(diag(stats::vcov(cf)))))
}

# Kernel coefficients of an snce fit in the order of deer_formula's terms.
kernel_coef <- function(fit) {
  tab <- summary(fit)$coefficients
  expect_equal(nrow(tab), 3L)
  unname(tab[, "Estimate"])
}

# |snce - clogit| / clogit SE, per kernel coefficient.
gap_se <- function(fit) {
  cl <- clogit_deer(fit)
  abs(kernel_coef(fit) - cl$coef) / cl$se
}

test_that("deer: bursts shorter than order + 1 fixes are left out with a classed warning", {
  d <- deer_data()
  d$time <- as.POSIXct(d$time, format = "%Y-%m-%dT%H:%M:%SZ", tz = "UTC")
  len <- table(d$burst)
  expect_equal(sum(len < 3), 6L)
  set.seed(201)
  expect_warning(
    fit <- snce(deer_formula, d, deer_gamma_kernel(d), ratio = 2, intercept = "transition", group = "burst",
                order = 2, time = "time"),
    "6 sequence\\(s\\) shorter than order \\+ 1 = 3", class = "nce_warning_short")
  expect_equal(nobs(fit), sum(pmax(len - 2L, 0L)))
  expect_equal(nobs(fit), 759L)
  expect_equal(fit$n_sequences, sum(len >= 3))
})

test_that("deer: per-transition-intercept snce converges to clogit as the ratio grows (gamma-step kernel)", {
  d <- deer_data()
  d$time <- as.POSIXct(d$time, format = "%Y-%m-%dT%H:%M:%SZ", tz = "UTC")
  k <- deer_gamma_kernel(d)
  ratios <- c(10, 50, 200)
  gaps <- sapply(ratios, function(r) {
    set.seed(202)
    fit <- fit_deer(d, k, r)
    expect_true(fit$converged)
    g <- gap_se(fit)
    if (r == 200) {
      cl <- clogit_deer(fit)
      message(sprintf("deer clogit (ratio 200): coef %s; SE %s; snce sandwich SE %s",
                      paste(signif(cl$coef, 4), collapse = ", "), paste(signif(cl$se, 3), collapse = ", "),
                      paste(signif(summary(fit)$coefficients[, 2], 3), collapse = ", ")))
    }
    g
  })
  dimnames(gaps) <- list(c("log(sl)", "sl", "cos(turn)"), paste0("ratio", ratios))
  message("deer |snce - clogit| / clogit SE (gamma-step kernel):\n",
          paste(utils::capture.output(print(round(gaps, 4))), collapse = "\n"))
  # Measured with this seed, ratio 10 / 50 / 200: log(sl) 0.045 / 0.0002 / 0.0004,
  # sl 0.022 / 0.005 / 0.001, cos 0.33 / 0.071 / 0.018 (seeds 1-6: at most 0.05, 0.08, 0.38
  # at ratio 10 and 0.0011, 0.0015, 0.018 at ratio 200): the cos gap falls like 1 / ratio.
  # The requirement: within a tenth of clogit's SE at ratio 200, for every coefficient.
  expect_true(all(gaps[, "ratio200"] < 0.1))
  # The largest gap (the turning-angle term) shrinks from 10 to 50 to 200, by a factor of
  # at least 2 each time (measured: about 5 and 4).
  mx <- apply(gaps, 2, max)
  expect_lt(mx[["ratio50"]], mx[["ratio10"]] / 2)
  expect_lt(mx[["ratio200"]], mx[["ratio50"]] / 2)
  # Each coefficient's gap at 200 is below its gap at 10 (the step terms' gaps are already
  # tiny at 10, since the gamma reference has the same step-length family as the kernel, so
  # their 50 -> 200 change is Monte Carlo noise and is not asserted).
  expect_true(all(gaps[, "ratio200"] < gaps[, "ratio10"]))
})

test_that("deer: the spline-intercept fit at ratio 20 lands on clogit", {
  d <- deer_data()
  d$time <- as.POSIXct(d$time, format = "%Y-%m-%dT%H:%M:%SZ", tz = "UTC")
  set.seed(203)
  # Default intercept: s(x_prev, y_prev). The kernel is translation and rotation invariant,
  # so the true log normaliser is constant and the smooth should shrink to (near) flat.
  fit <- fit_deer(d, deer_gamma_kernel(d), 20, intercept = NULL)
  expect_true(fit$converged)
  expect_equal(fit$intercept$type, "smooth")
  cl <- clogit_deer(fit)
  z <- (kernel_coef(fit) - cl$coef) / cl$se
  message(sprintf("deer spline intercept (ratio 20): (snce - clogit) / clogit SE = %s; intercept edf %.2f",
                  paste(sprintf("%.4f", z), collapse = ", "), summary(fit)$smooths$edf))
  # Measured (seeds 1-3 and this one): within 0.015 SE.
  expect_true(all(abs(z) < 0.05))
})

test_that("deer: with a normal random-walk reference the gap also shrinks, but slowly", {
  d <- deer_data()
  d$time <- as.POSIXct(d$time, format = "%Y-%m-%dT%H:%M:%SZ", tz = "UTC")
  # A normal kernel has bounded density at zero step while the deer's step-length density is
  # steep there (many steps of a few metres), so p / q is large for short observed steps and
  # the logistic (free-intercept) and conditional likelihoods agree only for very large
  # ratios. Measured with sd 200 m: gaps (log(sl), sl, cos) 7.2, 6.4, 0.90 SE at ratio 10,
  # 3.9, 3.8, 0.23 at 50 and 2.2, 2.5, 0.05 at 200 (with sd 300 or 1000 m, as large or larger).
  # That is why the tests above use the gamma-step reference.
  gaps <- sapply(c(10, 50, 200), function(r) {
    set.seed(204)
    # A few of the shortest observed steps are numerically certain data points
    # (nce_warning_separation) under this reference: that is the weakness measured here.
    fit <- withCallingHandlers(fit_deer(d, kernel_normal(c(x = 200, y = 200)), r),
                               nce_warning_separation = function(w) invokeRestart("muffleWarning"))
    gap_se(fit)
  })
  message("deer |snce - clogit| / clogit SE (normal kernel, sd 200 m), ratio 10 / 50 / 200:\n",
          paste(utils::capture.output(print(round(gaps, 3))), collapse = "\n"))
  expect_true(all(gaps[, 2] < gaps[, 1]))
  expect_true(all(gaps[, 3] < gaps[, 2]))
})
