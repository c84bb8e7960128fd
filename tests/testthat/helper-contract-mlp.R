# Contract case for nce() fits with a neural-network energy (class nce_mlp).
contract_cases_mlp <- function() {
  d <- function() {
    set.seed(1)
    data.frame(y = rtexp(300, 2))
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
         unsupported = c("predict_se", "predict_lpmatrix", "model.matrix", "anova"))
  )
}
