# Contract cases for simulator-model fits (lfire()).
contract_cases_simulator <- function() {
  fit_lfire <- function() {
    sim <- function(theta, n) matrix(stats::rnorm(n * 10, theta[, "mu"]), n, 10)
    summ <- function(x) cbind(m = rowMeans(x), v = apply(x, 1, stats::var))
    pr <- prior_uniform(mu = c(-1, 1))
    set.seed(2)
    lfire(matrix(stats::rnorm(10), 1), sim, summ, pr, theta = theta_grid(pr, 5), n_theta = 40, n_marginal = 40,
          batch = TRUE, control = lfire_control(nfolds = 3, nlambda = 15))
  }
  list(
    list(name = "nce_lfire", fit = fit_lfire,
         newdata = data.frame(mu = c(-0.2, 0.5)),
         # predict(newdata) simulates afresh at each call, so two calls differ by Monte Carlo error.
         response_is_exp_link = FALSE,
         unsupported = c("nobs", "fitted", "residuals", "logLik", "AIC", "BIC", "anova", "model.frame",
                         "model.matrix", "formula", "terms", "predict_se", "predict_lpmatrix", "augment"))
  )
}
