# ref_steps(): gamma step lengths and von Mises turning angles fitted as amt does, and a
# simulated step-selection process with a known selection coefficient and a known movement
# kernel, fitted by snce() with the kernel as reference; the deer tracks against clogit.

# Von Mises(0, kappa) by rejection from the uniform (independent of the package's sampler).
rvm <- function(n, kappa) {
  out <- numeric()
  while (length(out) < n) {
    t <- stats::runif(2 * n + 10, -pi, pi)
    out <- c(out, t[stats::runif(length(t)) < exp(kappa * (cos(t) - 1))])
  }
  out[seq_len(n)]
}

# Tracks in `bursts` sequences of `steps` steps: gamma(shape, scale) step lengths and von Mises
# turning angles, each step chosen among `k` candidates with probability proportional to
# exp(beta * x / 100) (sampling-importance-resampling from the selection kernel).
ssf_sim <- function(bursts, steps, shape, scale, kappa, beta, k = 500) {
  do.call(rbind, lapply(seq_len(bursts), function(b) {
    x <- y <- numeric(steps + 1L)
    h <- stats::runif(1, -pi, pi)
    for (t in seq_len(steps) + 1L) {
      r <- stats::rgamma(k, shape = shape, scale = scale)
      dir <- h + rvm(k, kappa)
      cx <- x[t - 1L] + r * cos(dir)
      cy <- y[t - 1L] + r * sin(dir)
      w <- exp(beta * (cx - max(cx)) / 100)
      j <- if (beta == 0) 1L else sample.int(k, 1L, prob = w)
      x[t] <- cx[j]
      y[t] <- cy[j]
      h <- dir[j]
    }
    data.frame(x = x, y = y, burst = b)
  }))
}

ssf_formula <- ~ I(x / 100) + I(log(sqrt((x - x_prev)^2 + (y - y_prev)^2))) + I(sqrt((x - x_prev)^2 + (y - y_prev)^2)) +
  I(cos(heading - heading_prev))

test_that("ref_steps() recovers the gamma and von Mises parameters of a movement kernel", {
  set.seed(41)
  d <- ssf_sim(4, 500, shape = 2, scale = 50, kappa = 1.5, beta = 0)
  k <- ref_steps(d, group = "burst")
  est <- c(k$shape, k$scale, k$kappa)
  se <- sqrt(c(diag(k$vcov$step), k$vcov$kappa))
  message(sprintf("ref_steps fit (2000 steps): shape %.4f, scale %.3f, kappa %.4f (SE %s); truth 2, 50, 1.5",
                  est[1], est[2], est[3], paste(signif(se, 3), collapse = ", ")))
  expect_true(all(abs(est - c(2, 50, 1.5)) < 3 * se))
  expect_equal(k$n_steps, 2000L)
  # The same maximum likelihood by direct optimisation (as amt's fitdistrplus / circular do).
  sl <- unlist(lapply(split(d, d$burst), function(b) sqrt(diff(b$x)^2 + diff(b$y)^2)))
  o <- stats::optim(c(0, log(stats::median(sl))),
                    function(p) -sum(stats::dgamma(sl, exp(p[1]), scale = exp(p[2]), log = TRUE)),
                    control = list(reltol = 1e-14))
  expect_equal(c(k$shape, k$scale), exp(o$par), tolerance = 1e-4)
  ta <- unlist(lapply(split(d, d$burst), function(b) {
    a <- diff(atan2(diff(b$y), diff(b$x)))
    atan2(sin(a), cos(a))
  }))
  vm_nll <- function(p) -sum(exp(p[2]) * cos(ta - p[1]) - log(2 * pi * besselI(exp(p[2]), 0)))
  ov <- stats::optim(c(0, 0), vm_nll, control = list(reltol = 1e-14))
  expect_equal(k$kappa, exp(ov$par[2]), tolerance = 1e-4)
  # Given parameters are kept; the uniform-angle kernel has no heading.
  expect_equal(ref_steps(shape = 2, scale = 3, kappa = 0.5)$kappa, 0.5)
  expect_equal(ref_steps(d, group = "burst", angle = "uniform")$vars, c("x", "y"))
})

test_that("the kernel's draws follow its parameters and its density integrates to one", {
  k <- ref_steps(shape = 3, scale = 20, kappa = 2)
  prev <- data.frame(x = c(0, 100), y = c(0, 50), heading = c(0.5, -2))
  set.seed(42)
  u <- nce:::kernel_draw(k, prev, 20000)
  i <- rep(1:2, each = 20000)
  dx <- u$x - prev$x[i]
  dy <- u$y - prev$y[i]
  expect_equal(mean(sqrt(dx^2 + dy^2)), 60, tolerance = 0.02)
  turn <- atan2(dy, dx) - prev$heading[i]
  expect_equal(mean(cos(turn)), besselI(2, 1) / besselI(2, 0), tolerance = 0.02)
  expect_equal(u$heading, atan2(dy, dx), tolerance = 1e-12)
  # Midpoint rule on a polar grid around the first start: the density integrates to 1.
  r <- seq(0.05, 400, by = 0.1)
  a <- seq(-pi, pi, length.out = 721)[-1] - pi / 720
  g <- expand.grid(r = r, a = a)
  pts <- data.frame(x = g$r * cos(g$a), y = g$r * sin(g$a), heading = 0)
  lq <- nce:::kernel_logq(k, pts, prev[rep(1L, nrow(pts)), ])
  expect_equal(sum(exp(lq) * g$r) * 0.1 * (2 * pi / 720), 1, tolerance = 1e-3)
})

test_that("a simulated step-selection process: the selection coefficient within 3 SE", {
  set.seed(43)
  beta <- 0.4
  d <- ssf_sim(4, 250, shape = 2, scale = 50, kappa = 1, beta = beta)
  d$heading <- step_headings(d, group = "burst")
  k <- ref_steps(d, group = "burst")
  # The true log normaliser is linear in x_prev plus a function of the previous heading.
  fit <- snce(ssf_formula, d, k, ratio = 20, group = "burst", order = 2,
              intercept = ~ I(x_prev / 100) + s(heading_prev, bs = "cc", k = 8),
              knots = list(heading_prev = c(-pi, pi)))
  s <- summary(fit)$coefficients
  est <- s["I(x/100)", "Estimate"]
  se <- s["I(x/100)", "Std. Error"]
  # f is the whole log transition density (the offset removes log q), so the movement
  # parameters come out of the coefficients whatever the reference: in the plane
  # log p = (shape - 2) log r - r / scale + kappa cos(turn) + beta x / 100 + const(prev).
  b <- s[, "Estimate"]
  bse <- s[, "Std. Error"]
  move <- c(shape = b[[2]] + 2, scale = -1 / b[[3]], kappa = b[[4]])
  move_se <- c(bse[[2]], bse[[3]] / b[[3]]^2, bse[[4]])
  message(sprintf(paste("SSF (996 transitions, ratio 20): beta %.4f (SE %.4f, truth %.1f); movement from the",
                        "coefficients shape %.3f, scale %.2f, kappa %.3f (SE %s; truth 2, 50, 1); reference",
                        "fitted to the observed steps shape %.3f, scale %.2f, kappa %.3f"),
                  est, se, beta, move[1], move[2], move[3], paste(signif(move_se, 3), collapse = ", "),
                  k$shape, k$scale, k$kappa))
  expect_lt(abs(est - beta), 3 * se)
  expect_true(all(abs(move - c(2, 50, 1)) < 3 * move_se))
})

test_that("deer: ref_steps() fitted as amt does, and snce() with it lands on clogit", {
  d <- utils::read.csv(file.path(shared_data_dir(), "deer.csv"))
  skip_if_not_installed("survival")
  d$heading <- step_headings(d, group = "burst")
  k <- ref_steps(d, group = "burst")
  sl <- unlist(lapply(split(d, d$burst), function(b) sqrt(diff(b$x)^2 + diff(b$y)^2)))
  o <- stats::optim(c(0, log(stats::median(sl))),
                    function(p) -sum(stats::dgamma(sl, exp(p[1]), scale = exp(p[2]), log = TRUE)),
                    control = list(reltol = 1e-14))
  expect_equal(c(k$shape, k$scale), exp(o$par), tolerance = 1e-4)
  set.seed(44)
  f <- ~ I(log(sqrt((x - x_prev)^2 + (y - y_prev)^2))) + I(sqrt((x - x_prev)^2 + (y - y_prev)^2)) +
    I(cos(heading - heading_prev))
  fit <- withCallingHandlers(snce(f, d, k, ratio = 50, intercept = "transition", group = "burst", order = 2),
                             nce_warning_short = function(w) invokeRestart("muffleWarning"))
  expect_equal(nobs(fit), 759L)
  mf <- model.frame(fit)
  mf$sl <- sqrt((mf$x - mf$x_prev)^2 + (mf$y - mf$y_prev)^2)
  mf$ca <- cos(mf$heading - mf$heading_prev)
  env <- list2env(list(mf = mf), parent = asNamespace("survival"))
  cl <- eval(quote(clogit(.label ~ log(sl) + sl + ca + offset(.offset) + strata(.transition), data = mf)), env)
  gap <- abs(unname(summary(fit)$coefficients[, "Estimate"]) - unname(coef(cl))) / sqrt(diag(vcov(cl)))
  message(sprintf("deer, ref_steps kernel (shape %.3f, scale %.1f, kappa %.3f), ratio 50: |snce - clogit| / SE = %s",
                  k$shape, k$scale, k$kappa, paste(signif(gap, 3), collapse = ", ")))
  # Measured with this seed: 0.0007, 0.0065, 0.146 SE; the free intercepts' incidental bias falls like
  # 1 / ratio (test-snce-deer.R).
  expect_true(all(gap < 0.25))
})

test_that("snapshots: print of ref_steps kernels", {
  expect_snapshot(print(ref_steps(shape = 2, scale = 50, kappa = 1.5)))
  expect_snapshot(print(ref_steps(shape = 2, scale = 50, angle = "uniform")))
})
