# Contract cases for nonlinear NCE fits (class nce_nls).
contract_cases_nonlinear <- function() {
  d <- function() {
    set.seed(1)
    data.frame(y = rnorm(200, 1, 0.5))
  }
  ref <- ref_normal(y = 1, cov = 1)
  list(
    list(name = "nce_nls (formula)",
         fit = function() {
           set.seed(2)
           # (a bounded term k sin(y), not k y^3: a cubic term makes the model improper, #76)
           nce(~ -(y - mu)^2 * exp(-2 * ls) / 2 + k * sin(y), d(), ref, ratio = 5, start = c(mu = 0, ls = 0, k = 0))
         },
         nested = function() {
           set.seed(2)
           nce(~ -(y - mu)^2 * exp(-2 * ls) / 2, d(), ref, ratio = 5, start = c(mu = 0, ls = 0))
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = c("predict_lpmatrix", "model.matrix", "terms")),
    list(name = "nce_nls (ICA, Rust)",
         fit = function() {
           set.seed(3)
           x <- rica(200, matrix(c(1, 0.4, -0.3, 1), 2))
           nce(model = ica_model(), data = x, reference = ref_normal(x1 = 0, x2 = 0, cov = cov(x)), ratio = 3,
               n_starts = 2)
         },
         unsupported = c("predict_lpmatrix", "model.matrix", "terms", "formula"))
  )
}
