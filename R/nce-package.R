#' nce: noise-contrastive estimation for unnormalised models
#'
#' Fits models whose density is known only up to a normalising constant by
#' contrasting the data with reference points from a known density in a
#' logistic regression (the Poisson transform of Barthelme and Chopin, 2015;
#' noise-contrastive estimation of Gutmann and Hyvarinen, 2012). The fitting
#' runs in a Rust core.
#'
#' Options:
#' * `nce.threads`: threads used by the Rust core (default 2). Results do not
#'   depend on it.
#'
#' @keywords internal
#' @useDynLib nce, .registration = TRUE
#' @importFrom stats coef confint vcov nobs model.frame predict simulate update formula
#'   qnorm pnorm delete.response model.matrix terms .getXlevels na.pass cov
#'   setNames logLik AIC BIC anova fitted residuals deviance df.residual extractAIC drop1
#' @docType package
#' @name nce-package
#' @aliases nce-package
NULL
