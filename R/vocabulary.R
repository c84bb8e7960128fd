#' Argument names shared by every fit
#'
#' One vocabulary of argument names runs through the package, so that an argument means the
#' same thing wherever it appears.
#'
#' * `data`: the data being modelled ([nce()], [snce()], [latkes()], [vnce()], [ica_mle()],
#'   [ref_fit()]).
#' * `newdata`: data at which a fitted model is evaluated (`predict()`, `augment()` and the
#'   other methods).
#' * `draws`: draws of a posterior or of any density ([marglik_nce()]; `draws1`, `draws2` in
#'   [bayes_factor_nce()]).
#' * `observed`: a simulator's observed data ([lfire()], [ratio_posterior()]).
#' * `object`: a fitted object passed to a function ([tgm_edges()], [edge_roc()], [ica_B()],
#'   [ratio_posterior()], [prior_from_posterior()], the methods; `object1`, `object2` in
#'   [bayes_factor_marglik()]).
#' * `reference`: the reference (noise) density ([nce()], [snce()], [marglik_nce()]).
#' * `ratio`: reference points per data point ([nce()], [snce()], [latkes()], [vnce()]).
#' * `log_density`: the (unnormalised) log density, a function ([nce_model()],
#'   [custom_model()], [marglik_nce()], [kernel_custom()], [ref_custom()], [prior_custom()]).
#' * `gradient`: the gradient of `log_density` in the parameters ([nce_model()],
#'   [custom_model()]).
#' * `control`: a list of settings; a partial list is merged into the defaults
#'   ([nce_control()], [vnce_control()], [lfire_control()], `marglik_nce(control =)`).
#' * `n`: a number of simulations or of points drawn ([ratio_amortised()],
#'   [simulate_summaries()], [rica()]).
#' * `nsim`: the number of simulated data sets, and `seed`, a seed for R's generator
#'   (`simulate()`).
#'
#' Threads are set once for the session by `options(nce.threads = n)`, not by an argument;
#' results do not depend on them.
#'
#' `control =` takes what its settings function returns (e.g. `nce_control(maxit = 50)`) or a
#' plain list of some of its settings (e.g. `list(maxit = 50)`), which is merged into the
#' defaults; a setting the function does not know is refused with `nce_error_input`.
#'
#' `marglik_nce(n_ref =)` is a count of reference draws, not a ratio per draw, so it keeps its
#' own name.
#'
#' @examples
#' set.seed(1)
#' d <- data.frame(y = rnorm(200))
#' # a partial control list is merged into nce_control()'s defaults
#' fit <- nce(~ y + I(y^2), data = d, reference = ref_normal(y = 0, cov = 4), ratio = 5,
#'            control = list(maxit = 50))
#' fit$control
#' @name nce_vocabulary
#' @aliases vocabulary
NULL
