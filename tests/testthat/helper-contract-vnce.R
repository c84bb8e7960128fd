# Contract cases for vnce() fits (graphical model: GHK family complete and with missing values,
# lognormal family; mixture of Gaussians; custom model) and for the results of
# bayes_factor_nce(), marglik_nce(), bayes_factor_marglik() and edge_roc().
contract_cases_vnce <- function() {
  tgm_data <- function(missing = 0) {
    set.seed(41)
    K <- ring_graph(4)
    x <- rtgm(150, K)
    if (missing > 0) x[sample(length(x), missing * length(x))] <- NA
    x
  }
  no_model <- c("anova", "formula", "terms", "residuals")
  estimate_refused <- c("predict", "predict_newdata", "predict_se", "predict_link", "predict_response",
                        "predict_lpmatrix", "fitted", "residuals", "logLik", "AIC", "BIC", "anova",
                        "model.frame", "model.matrix", "formula", "terms", "plot", "simulate", "augment")
  mog_lp <- function(x, z, th) -th[2] - x^2 / (2 * if (z == 1) 1 else exp(2 * th[1]))
  mog_gr <- function(x, z, th) cbind(if (z == 1) 0 * x else x^2 * exp(-2 * th[1]), -1)
  ml <- function(seed) {
    set.seed(seed)
    marglik_nce(matrix(rnorm(800), ncol = 1), function(s) -0.5 * s[, 1]^2)
  }
  list(
    list(name = "vnce_tgm (GHK family, complete data)",
         fit = function() {
           x <- tgm_data()
           set.seed(42)
           vnce(x, tgm_model(), ratio = 2)
         },
         unsupported = no_model),
    list(name = "vnce_tgm (GHK family, 20% missing)",
         fit = function() {
           x <- tgm_data(0.2)
           set.seed(43)
           vnce(x, tgm_model(), n_latent = 3)
         },
         unsupported = c(no_model, "logLik", "AIC", "BIC")),
    list(name = "vnce_tgm (lognormal family, 20% missing)",
         fit = function() {
           x <- tgm_data(0.2)
           set.seed(44)
           suppressWarnings(vnce(x, tgm_model("lognormal"), n_latent = 3))
         },
         unsupported = c(no_model, "logLik", "AIC", "BIC")),
    list(name = "vnce_mog (mixture of Gaussians)",
         fit = function() {
           set.seed(45)
           vnce(rmog(300, theta = 4), mog_model())
         },
         newdata = data.frame(x = c(-1, 0.5, 2)),
         unsupported = c(no_model, "predict_lpmatrix", "model.matrix")),
    list(name = "vnce_custom (hand-written mixture, NCE on the marginal: fast in R)",
         fit = function() {
           set.seed(46)
           vnce(rmog(300, theta = 4), custom_model(mog_lp, mog_gr, start = c(log_theta = log(3), c = 2.5),
                                                   latent = c(1, 0)), method = "nce")
         },
         newdata = data.frame(x = c(-1, 0.5, 2)),
         unsupported = c(no_model, "predict_lpmatrix", "model.matrix", "logLik", "AIC", "BIC", "simulate")),
    list(name = "nce_bf (bayes_factor_nce)",
         fit = function() {
           set.seed(47)
           bayes_factor_nce(rnorm(500, 0.5, 1), rnorm(500, -0.5, 1),
                            function(t) -0.5 * (t[, 1] - 0.5)^2, function(t) -0.5 * (t[, 1] + 0.5)^2,
                            ess = c(500, 500))
         },
         unsupported = estimate_refused),
    list(name = "nce_marglik (marglik_nce)",
         fit = function() ml(48),
         unsupported = estimate_refused),
    list(name = "nce_bf (bayes_factor_marglik)",
         fit = function() bayes_factor_marglik(ml(49), ml(50)),
         unsupported = estimate_refused),
    list(name = "nce_edge_roc (edge_roc)",
         fit = function() {
           set.seed(51)
           K <- ring_graph(6)
           edge_roc(K + matrix(rnorm(36, sd = 0.1), 6), K)
         },
         unsupported = c(setdiff(estimate_refused, "plot"), "vcov", "confint"))
  )
}
