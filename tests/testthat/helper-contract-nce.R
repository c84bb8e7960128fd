# Contract cases for nce() fits (parametric and smooth).
contract_cases_nce <- function() {
  d <- function() {
    set.seed(1)
    data.frame(y = rtexp(300, 2))
  }
  list(
    list(name = "nce_fit (parametric)",
         fit = function() {
           set.seed(2)
           nce(~ y + I(y^2), d(), ref_uniform(y = c(0, 1)), ratio = 5)
         },
         nested = function() {
           set.seed(2)
           nce(~ y, d(), ref_uniform(y = c(0, 1)), ratio = 5)
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = character()),
    list(name = "nce_gam (smooth)",
         fit = function() {
           set.seed(2)
           nce(~ s(y, k = 5), d(), ref_uniform(y = c(0, 1)), ratio = 5)
         },
         nested = function() {
           set.seed(2)
           nce(~ y, d(), ref_uniform(y = c(0, 1)), ratio = 5)
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = character()),
    list(name = "nce_gam (smooth, discrete = TRUE)",
         fit = function() {
           set.seed(2)
           nce(~ s(y, k = 5), d(), ref_uniform(y = c(0, 1)), ratio = 5, discrete = TRUE)
         },
         nested = function() {
           set.seed(2)
           nce(~ y, d(), ref_uniform(y = c(0, 1)), ratio = 5)
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = character()),
    list(name = "nce_fit (relative to a fitted mixture reference)",
         fit = function() {
           set.seed(2)
           nce(~ y + I(y^2), d(), ref_fit(d(), "mixture", components = 1:2), ratio = 5, relative = TRUE)
         },
         nested = function() {
           set.seed(2)
           nce(~ y, d(), ref_fit(d(), "mixture", components = 1:2), ratio = 5, relative = TRUE)
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = character()),
    list(name = "nce_gam (smooth, relative to a normal reference)",
         fit = function() {
           set.seed(2)
           nce(~ s(y, k = 5), d(), ref_normal(y = c(0.5, 0.5)), ratio = 5, relative = TRUE)
         },
         nested = function() {
           set.seed(2)
           nce(~ y, d(), ref_normal(y = c(0.5, 0.5)), ratio = 5, relative = TRUE)
         },
         newdata = d()[1:5, , drop = FALSE], newdata_index = 1:5, data = d(),
         unsupported = character())
  )
}
