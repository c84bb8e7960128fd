# Contract cases for the design results: nce_eig (design_eig()) and nce_design (design_optimise()).
# Neither is a model of data: logLik, AIC, BIC, anova and simulate refuse with nce_error_unsupported.
contract_cases_design <- function() {
  fit_eig <- function() {
    dm <- death_model()
    set.seed(31)
    design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1), n = 200, batch = TRUE)
  }
  fit_design <- function() {
    dm <- death_model()
    set.seed(32)
    design_optimise(dm$simulator, dm$summaries, dm$prior, lower = dm$lower, upper = dm$upper, n = 120,
                    batch = TRUE, n_initial = 5, rounds = 0, n_final = 0)
  }
  list(
    list(name = "nce_eig", fit = fit_eig,
         newdata = data.frame(b = c(0.5, 1.5), dead = c(10, 30)),
         unsupported = c("predict_lpmatrix", "residuals", "logLik", "AIC", "BIC", "anova",
                         "model.frame", "model.matrix", "simulate")),
    list(name = "nce_design", fit = fit_design,
         newdata = data.frame(t = c(0.5, 2)),
         # predict() gives the smoothed EIG for both types (no log scale).
         response_is_exp_link = FALSE,
         unsupported = c("predict_lpmatrix", "logLik", "AIC", "BIC", "anova", "model.matrix", "simulate"))
  )
}
