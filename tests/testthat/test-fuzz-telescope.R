# Hostile inputs for the telescoping and chains arguments of marglik_nce() and bayes_factor_nce():
# each must give a classed condition.
tele_env <- local({
  set.seed(62)
  x <- matrix(rgamma(600, 2, 1), ncol = 3)
  lk <- function(x) rowSums(log(x) - x)
  l1 <- function(t) -0.5 * (t[, 1] - 0.5)^2
  l2 <- function(t) -0.5 * (t[, 1] + 0.5)^2
  d1 <- rnorm(100, 0.5)
  d2 <- rnorm(100, -0.5)
  # NaN at the telescoping proposals only (the draws and reference draws stay below 50)
  lk_nan <- function(x) ifelse(rowSums(x) > 50, NaN, rowSums(log(x) - x))
  xc <- cbind(x, 1)
  lk_len <- function(x) 0
  lk_inf <- function(x) rep(Inf, nrow(x))
  environment()
})

tele_cases <- list(
  list("chains NA", quote(marglik_nce(x, lk, lower = 0, chains = NA)), "nce_error_input"),
  list("chains Inf", quote(marglik_nce(x, lk, lower = 0, chains = Inf)), "nce_error_input"),
  list("chains 0", quote(marglik_nce(x, lk, lower = 0, chains = 0)), "nce_error_input"),
  list("chains fractional", quote(marglik_nce(x, lk, lower = 0, chains = 1.5)), "nce_error_input"),
  list("chains lengths too short", quote(marglik_nce(x, lk, lower = 0, chains = c(100, 50))), "nce_error_input"),
  list("chains of one draw with split", quote(marglik_nce(x, lk, lower = 0, chains = c(1, 199))), "nce_error_input"),
  list("chains a string", quote(marglik_nce(x, lk, lower = 0, chains = "2")), "nce_error_input"),
  list("control not a list", quote(marglik_nce(x, lk, lower = 0, control = 0.6)), "nce_error_input"),
  list("control unnamed", quote(marglik_nce(x, lk, lower = 0, control = list(0.6))), "nce_error_input"),
  list("control accuracy NA", quote(marglik_nce(x, lk, lower = 0, control = list(accuracy = NA))), "nce_error_input"),
  list("control accuracy 1", quote(marglik_nce(x, lk, lower = 0, control = list(accuracy = 1))), "nce_error_input"),
  list("control accuracy Inf", quote(marglik_nce(x, lk, lower = 0, control = list(accuracy = Inf))), "nce_error_input"),
  list("control switch 0.4", quote(marglik_nce(x, lk, lower = 0, control = list(switch = 0.4))), "nce_error_input"),
  list("control moves NaN", quote(marglik_nce(x, lk, lower = 0, control = list(moves = NaN))), "nce_error_input"),
  list("control moves 1e9", quote(marglik_nce(x, lk, lower = 0, control = list(moves = 1e9))), "nce_error_input"),
  list("waymarks always with a t reference",
       quote(marglik_nce(x, lk, lower = 0, reference = "t", waymarks = "always")), "nce_error_input"),
  list("log_density NaN at the proposals",
       quote(marglik_nce(x * 5, lk_nan, lower = 0, waymarks = "always", control = list(moves = 1))), "nce_error_data"),
  list("warped: a constant column",
       quote(marglik_nce(xc, lk, lower = 0, upper = c(Inf, Inf, Inf, 2), reference = "warped")),
       "nce_error_input"),
  list("warped: log_density of the wrong length", quote(marglik_nce(x, lk_len, lower = 0, reference = "warped")),
       "nce_error_input"),
  list("warped: log_density +Inf", quote(marglik_nce(x, lk_inf, lower = 0, reference = "warped")), "nce_error_data"),
  list("warped: log_density NaN at the reference draws",
       quote(marglik_nce(x * 5, lk_nan, lower = 0, reference = "warped", waymarks = "always",
                         control = list(moves = 1))),
       "nce_error_data"),
  list("reference unknown", quote(marglik_nce(x, lk, lower = 0, reference = "skew")), "error"),
  list("bayes_factor_nce: chains of three", quote(bayes_factor_nce(d1, d2, l1, l2, chains = list(1, 2, 3))),
       "nce_error_input"),
  list("bayes_factor_nce: chains not dividing", quote(bayes_factor_nce(d1, d2, l1, l2, chains = 3)), "nce_error_input"),
  list("bayes_factor_nce: chains NA", quote(bayes_factor_nce(d1, d2, l1, l2, chains = list(NA, NULL))),
       "nce_error_input"),
  # an effective sample size above the draws it describes would shrink the standard error
  list("ess 1e9", quote(marglik_nce(x, lk, lower = 0, ess = 1e9)), "nce_error_input"),
  list("ess above the estimation half (split)", quote(marglik_nce(x, lk, lower = 0, ess = 101)), "nce_error_input"),
  list("ess above the draws (no split)", quote(marglik_nce(x, lk, lower = 0, split = FALSE, ess = 201)),
       "nce_error_input"),
  list("bayes_factor_nce: ess above the draws", quote(bayes_factor_nce(d1, d2, l1, l2, ess = c(100, 1e9))),
       "nce_error_input")
)

test_that("hostile telescoping and chains inputs give classed conditions", {
  for (case in tele_cases) {
    expect_error(eval(case[[2L]], tele_env), class = case[[3L]], label = case[[1L]])
  }
})

test_that("degenerate or overflowing draws and bogus choices are refused with classed errors", {
  set.seed(63)
  lk <- function(s) -0.5 * rowSums(s^2)
  two <- sample(c(0.1, 0.2), 400, TRUE)
  expect_error(marglik_nce(two, lk), "distinct", class = "nce_error_input")
  expect_error(marglik_nce(stats::rnorm(400) * 1e300, lk, reference = "warped"), "draws", class = "nce_error_data")
  expect_error(marglik_nce(stats::rnorm(400), lk, waymarks = "bogus"), "waymarks", class = "nce_error_input")
  l1 <- function(th) stats::dnorm(0.3, th[, 1], 1, log = TRUE)
  l2 <- function(th) stats::dnorm(0.3, 0, 1, log = TRUE) + 0 * th[, 1]
  same <- matrix(0.5, 400, 1)
  e <- expect_error(bayes_factor_nce(same, same, l1, l2), "draws1", class = "nce_error_input")
  expect_no_match(conditionMessage(e), "marglik_nce")
  # precomputed log-likelihoods of identical draws: the standard error would be 0
  expect_error(suppressWarnings(bayes_factor_nce(NULL, NULL, list(rep(-1, 50), rep(-1, 50)),
                                                 list(rep(-2, 50), rep(-2, 50)), ess = c(50, 50))),
               class = "nce_error")
})

test_that("an NA estimate in bayes_factor_marglik() is reported as NA, not as separation", {
  na_ml <- structure(list(logml = NA_real_, se = NA_real_), class = "nce_marglik")
  ok_ml <- structure(list(logml = 1, se = 0.1), class = "nce_marglik")
  e <- expect_error(bayes_factor_marglik(na_ml, ok_ml), class = "nce_error_input")
  expect_match(conditionMessage(e), "`object1`'s log marginal likelihood estimate is NA")
  expect_no_match(conditionMessage(e), "separated")
  expect_error(bayes_factor_marglik(ok_ml, na_ml), "`object2`", class = "nce_error_input")
})

test_that("the same sample passed as both posteriors warns", {
  set.seed(64)
  x <- matrix(stats::rnorm(400), ncol = 1)
  l1 <- function(th) stats::dnorm(0.3, th[, 1], 1, log = TRUE)
  l2 <- function(th) stats::dnorm(0.3, 0, 1, log = TRUE) + 0 * th[, 1]
  expect_warning(bayes_factor_nce(x, x, l1, l2), "same sample", class = "nce_warning_identical_samples")
})

test_that("an ess at the number of draws in the estimate is accepted, and gives the i.i.d. standard error", {
  set.seed(5)
  d <- stats::rnorm(500)
  l <- function(m) stats::dnorm(m[, 1], log = TRUE)
  fit <- marglik_nce(d, l, ess = 250)
  expect_equal(fit$se, fit$se_iid)
  e <- expect_error(marglik_nce(d, l, ess = 1e9), class = "nce_error_input")
  expect_match(conditionMessage(e), "`ess`.*250 draws in the estimate")
})
