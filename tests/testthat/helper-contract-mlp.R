# Contract case for nce() fits with a neural-network energy (class nce_mlp).
contract_cases_mlp <- function() {
  d <- function() {
    set.seed(1)
    data.frame(y = rtexp(300, 2))
  }
  d2 <- function() {
    set.seed(1)
    data.frame(y = rtexp(300, 2), z = runif(300))
  }
  list(
    list(name = "nce_mlp (network energy)",
         fit = function() {
           set.seed(2)
           nce(~ mlp(y, hidden = 8), d(), ref_uniform(y = c(0, 1)), ratio = 5, control = list(max_epochs = 10))
         },
         nested = function() {
           set.seed(2)
           nce(~ y, d(), ref_uniform(y = c(0, 1)), ratio = 5)
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = c("predict_se", "predict_lpmatrix", "model.matrix", "anova")),
    list(name = "nce_mlp (network beside a smooth term)",
         fit = function() {
           set.seed(4)
           nce(~ mlp(y, hidden = 8) + s(z, k = 5), d2(), ref_uniform(y = c(0, 1), z = c(0, 1)), ratio = 5,
               control = list(max_epochs = 10, backfit = 2))
         },
         nested = function() {
           set.seed(4)
           nce(~ s(z, k = 5), d2(), ref_uniform(y = c(0, 1), z = c(0, 1)), ratio = 5)
         },
         newdata = d2()[1:5, ], newdata_index = 1:5, data = d2(),
         unsupported = c("predict_se", "predict_lpmatrix", "model.matrix", "anova")),
    list(name = "nce_mlp (network relative to a normal reference)",
         fit = function() {
           set.seed(2)
           nce(~ mlp(y, hidden = 8), d(), ref_normal(y = c(0.5, 0.5)), ratio = 5, relative = TRUE,
               control = list(max_epochs = 10))
         },
         nested = function() {
           set.seed(2)
           nce(~ y, d(), ref_normal(y = c(0.5, 0.5)), ratio = 5, relative = TRUE)
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = c("predict_se", "predict_lpmatrix", "model.matrix", "anova"))
  )
}

# The neural ratio classifier of ratio_amortised(classifier = "mlp") (class nce_ratio_mlp).
contract_cases_ratio_mlp <- function() {
  sim <- function(theta, n) matrix(rnorm(n * 10, theta[, "mu"]), n, 10)
  summ <- function(x) cbind(m = rowMeans(x))
  list(
    list(name = "nce_ratio_mlp (neural classifier)",
         fit = function() {
           set.seed(3)
           ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 200, batch = TRUE, classifier = "mlp",
                           hidden = 8, control = list(max_epochs = 10))
         },
         newdata = data.frame(mu = c(0, 0.5), m = c(0.1, 0.2)),
         # logLik(newdata =) scores each simulation's joint pair and one shuffled pair.
         held_out_nobs = function(k) 2 * k,
         unsupported = c("coef", "vcov", "confint", "predict_se", "predict_lpmatrix", "residuals", "anova",
                         "model.matrix", "formula", "terms", "plot", "simulate", "tidy"))
  )
}
