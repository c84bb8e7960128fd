# Contract cases for simulator-model fits (lfire(), ratio_amortised()).
contract_cases_simulator <- function() {
  fit_lfire <- function() {
    sim <- function(theta, n) matrix(stats::rnorm(n * 10, theta[, "mu"]), n, 10)
    summ <- function(x) cbind(m = rowMeans(x), v = apply(x, 1, stats::var))
    pr <- prior_uniform(mu = c(-1, 1))
    set.seed(2)
    lfire(matrix(stats::rnorm(10), 1), sim, summ, pr, theta = theta_grid(pr, 5), n_theta = 40, n_marginal = 40,
          batch = TRUE, control = lfire_control(folds = 3, nlambda = 15))
  }
  # Amortised ratios: the nested classifier is fitted to the same pairs (same simulations, and
  # the same shuffle under the same seed), as anova() between classifiers needs.
  ratio_sims <- local({
    sim <- function(theta, n) matrix(stats::rnorm(n * 10, theta[, "mu"]), n, 10)
    summ <- function(x) cbind(m = rowMeans(x))
    pr <- prior_uniform(mu = c(-1, 1))
    set.seed(3)
    list(sim = sim, summ = summ, prior = pr, sims = simulate_summaries(sim, summ, pr$sample(200), batch = TRUE))
  })
  fit_ratio <- function(formula) {
    function() {
      set.seed(4)
      ratio_amortised(ratio_sims$sim, ratio_sims$summ, ratio_sims$prior, n = 200, batch = TRUE, formula = formula,
                      simulations = ratio_sims$sims)
    }
  }
  list(
    list(name = "nce_ratio_gam", fit = fit_ratio(~ s(mu, k = 4) + s(m, k = 4) + ti(mu, m, k = 3)),
         nested = fit_ratio(~ s(mu, k = 4) + s(m, k = 4)),
         newdata = data.frame(mu = c(-0.2, 0.5), m = c(0, 0.4)),
         # logLik(newdata =) scores each simulation's joint pair and n_shuffle = 1 shuffled pair.
         held_out_nobs = function(k) 2 * k,
         # type = "response" is the ratio, exp of the log ratio.
         unsupported = "simulate"),
    list(name = "nce_ratio_posterior", fit = function() {
           r <- fit_ratio(~ s(mu, k = 4) + s(m, k = 4) + ti(mu, m, k = 3))()
           ratio_posterior(r, matrix(stats::rnorm(10, 0.3), 1), n_draws = 500)
         },
         unsupported = c("predict", "predict_newdata", "predict_se", "predict_link", "predict_response",
                         "predict_lpmatrix", "fitted", "residuals", "logLik", "AIC", "BIC", "anova",
                         "model.frame", "model.matrix", "formula", "terms", "augment")),
    list(name = "nce_lfire", fit = fit_lfire,
         newdata = data.frame(mu = c(-0.2, 0.5)),
         # predict(newdata) simulates afresh at each call, so two calls differ by Monte Carlo error.
         response_is_exp_link = FALSE,
         unsupported = c("nobs", "residuals", "logLik", "AIC", "BIC", "anova", "model.frame",
                         "model.matrix", "formula", "terms", "predict_se", "predict_lpmatrix", "augment"))
  )
}
