# Contract cases for conditional nce fits (nce(given =)): a spline normaliser in a numeric
# covariate and a per-level normaliser in a factor.
contract_cases_conditional <- function() {
  gauss <- function() {
    set.seed(31)
    z <- stats::runif(200, -1, 1)
    data.frame(y = stats::rnorm(200, 1 + 2 * z, 0.5), z = z)
  }
  groups <- function() {
    set.seed(32)
    g <- factor(sample(c("a", "b", "c"), 200, replace = TRUE))
    data.frame(y = rtexp(200, c(a = -1, b = 1, c = 3)[as.character(g)]), g = g)
  }
  list(
    list(name = "nce_conditional (spline normaliser)",
         fit = function() {
           set.seed(33)
           nce(~ y + I(y^2) + I(y * z), gauss(), ref_normal(y = 1, cov = 4), ratio = 5, given = ~ z)
         },
         nested = function() {
           set.seed(33)
           nce(~ y + I(y^2), gauss(), ref_normal(y = 1, cov = 4), ratio = 5, given = ~ z)
         },
         newdata = gauss()[1:5, ], newdata_index = 1:5, data = gauss(),
         # residuals(): the classification residuals of data and reference rows, as for nce_fit.
         unsupported = character()),
    list(name = "nce_conditional (per-level normaliser)",
         fit = function() {
           set.seed(34)
           nce(~ y + y:g, groups(), ref_uniform(y = c(0, 1)), ratio = 5, given = "g")
         },
         nested = function() {
           set.seed(34)
           nce(~ y, groups(), ref_uniform(y = c(0, 1)), ratio = 5, given = "g")
         },
         newdata = groups()[1:5, ], newdata_index = 1:5, data = groups(),
         unsupported = character())
  )
}
