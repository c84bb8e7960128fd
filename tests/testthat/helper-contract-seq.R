# Contract cases for sequential fits: snce() with a spline and with per-transition intercepts,
# latkes(), and a by-subject LATKES collection. Small sizes: the whole table runs in CI.
contract_cases_seq <- function() {
  chain <- function() {
    set.seed(31)
    data.frame(y = rchain(80, 2))
  }
  fix <- function(n_subjects = 1) {
    set.seed(32)
    rlatkes(50, kernel = list(dist = function(d) -d / 150, angle = function(a) 0.4 * cos(4 * a)),
            window = c(0, 1024, 0, 768), n_trials = 2, n_subjects = n_subjects, grid = c(64, 48))
  }
  lk <- function(d, kernel, ...) {
    set.seed(33)
    latkes(d, group = "trial", window = c(0, 1024, 0, 768), ratio = 5, kernel = kernel,
           intercept = ~ s(x_prev, y_prev, k = 10), ...)
  }
  list(
    list(name = "snce_fit (spline intercept)",
         fit = function() {
           set.seed(34)
           snce(~ I(y * y_prev) + I(y^2), chain(), ref_uniform(y = c(0, 1)), ratio = 5, intercept = ~ s(y_prev, k = 5))
         },
         nested = function() {
           set.seed(34)
           snce(~ I(y * y_prev), chain(), ref_uniform(y = c(0, 1)), ratio = 5, intercept = ~ s(y_prev, k = 5))
         },
         newdata = data.frame(y = chain()$y[2:6], y_prev = chain()$y[1:5]), newdata_index = 1:5,
         data = chain(),
         unsupported = character()),
    list(name = "snce_fit (per-transition intercepts)",
         fit = function() {
           set.seed(35)
           snce(~ I(y * y_prev) + s(y, k = 5), chain(), ref_uniform(y = c(0, 1)), ratio = 5, intercept = "transition")
         },
         nested = function() {
           set.seed(35)
           snce(~ I(y * y_prev), chain(), ref_uniform(y = c(0, 1)), ratio = 5, intercept = "transition")
         },
         unsupported = "predict_lpmatrix"),
    list(name = "latkes_fit",
         fit = function() lk(fix(), ~ s(dist, k = 5) + s(angle, bs = "cc", k = 6)),
         nested = function() lk(fix(), ~ s(dist, k = 5)),
         newdata = local({
           d <- fix()
           data.frame(x = d$x[2:5], y = d$y[2:5], x_prev = d$x[1:4], y_prev = d$y[1:4])
         }),
         newdata_index = 1:4,
         data = fix(),
         unsupported = "predict_lpmatrix"),
    list(name = "latkes_collection",
         fit = function() {
           d <- fix(2)
           suppressWarnings(lk(d, ~ s(dist, k = 5), by = "subject"))
         },
         newdata = local({
           d <- fix(2)
           i <- which(d$subject == 2)[1:4]
           data.frame(x = d$x[i + 1], y = d$y[i + 1], x_prev = d$x[i], y_prev = d$y[i], subject = 2)
         }),
         unsupported = c("predict_lpmatrix", "model.matrix", "anova"))
  )
}
