# Methods shared by the amortised ratio estimators of ratio_amortised(): class nce_ratio, the parent
# of the GAM classifier (nce_ratio_gam, ratio-gam-methods.R) and the network classifier
# (nce_ratio_mlp, ratio-net-methods.R). Both classify joint (y = 1) against shuffled (y = 0)
# (theta, s) pairs and give the log ratio log p(s | theta) / p(s) through predict(); here is what
# reads only that: the simulation set-up, the pairs, update(), the held-out log-likelihood. A
# method only the GAM has (coef, vcov, anova, ...) is defined on nce_ratio_gam; on a network it
# falls to the base class, which refuses it with nce_error_unsupported saying why.

#' Methods for amortised ratio estimators
#'
#' An [ratio_amortised()] fit is a classifier between joint and shuffled (theta, s) pairs: a GAM
#' (class `c("nce_ratio_gam", "nce_ratio", "nce_result")`) or a neural network
#' (`c("nce_ratio_mlp", "nce_ratio", "nce_result")`).
#'
#' Both answer `predict()`: the log ratio \eqn{\log p(s \mid \theta) / p(s)} (`type = "link"`)
#' or the ratio (`"response"`), at `newdata` (columns for every parameter and summary) or at the
#' classifier's own pairs; `fitted()` (the estimated ratio at the classifier's pairs,
#' `predict(type = "response")` as for every result; the classifier's probability that a pair is
#' joint is `plogis(predict(x) - log(k))`, `k` the shuffled pairs per joint one among the pairs),
#' `nobs()` (classifier rows: joint plus shuffled pairs), `model.frame()` (the pairs),
#' `logLik()`/`AIC()`/`BIC()` (the classification's Bernoulli log-likelihood, comparable between
#' classifiers fitted to the same pairs) and `update()`, which refits, reusing the simulations
#' unless the simulator, summaries, prior or `n` change.
#'
#' `logLik(newdata =)` is the held-out log-likelihood of the classification: each row of
#' `newdata` is a joint simulation (theta, s), contrasted with `k` shuffled pairs, its summaries
#' with the parameters of the next `k` rows (cyclically, so no random draw), scored at the
#' classifier's probability `plogis(log ratio - log(k))`; `nobs` counts the `(k + 1)` pairs per row.
#' It needs more than `k` rows.
#'
#' The GAM adds mgcv's model methods: `coef()`, `vcov()` (the Bayesian covariance `Vp`),
#' `confint()` (Wald intervals of the coefficients), `residuals()` (of the classification),
#' `anova()` (mgcv's tests of the smooth terms, or a deviance test between classifiers fitted to
#' the same pairs), `model.matrix()`, `formula()`, `terms()`, `plot()` (mgcv's plot of the smooth
#' terms), and `predict(se.fit = TRUE)` (standard errors from the Bayesian covariance) and
#' `predict(type = "lpmatrix")` (the log ratio is that matrix times `coef()` plus
#' `log(n_shuffle)`, its attribute `"constant"`). A network's weights are not identifiable, so it
#' refuses these with `nce_error_unsupported`. Both refuse `simulate()`: a ratio estimator is not a
#' model of the pairs' labels (simulate pairs with [simulate_summaries()]).
#'
#' @param object,x,formula An `nce_ratio` from [ratio_amortised()].
#' @param newdata A data frame with a column per parameter and summary; by default the pairs.
#' @param type `"link"` (log ratio), `"response"` (ratio) or `"lpmatrix"` (GAM only).
#' @param se.fit Whether to return standard errors too (a list `fit`, `se.fit`; GAM only).
#' @param resample For `update()`: `FALSE` (default) refits from the result's stored random state
#'   (bit for bit); `TRUE` draws anew (see [nce_result]).
#' @param ... Other `nce_ratio` fits (`anova()`), arguments of [ratio_amortised()] to change
#'   (`update()`), residual type (`residuals()`), or arguments of [mgcv::plot.gam()] (`plot()`).
#' @return As the generics; `predict()` a numeric vector, a list with `se.fit`, or a matrix.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 500, batch = TRUE,
#'                      formula = ~ s(mu, k = 5) + s(m, k = 5) + ti(mu, m, k = 4))
#' predict(r, data.frame(mu = c(0, 1), m = c(0.1, 0.1)), se.fit = TRUE)
#' r2 <- update(r, formula = ~ s(mu, k = 5) + s(m, k = 5))  # same simulations
#' AIC(r, r2)
#' plot(r, pages = 1)
#' # Held-out: new joint simulations, each contrasted with the parameters of the next one.
#' th <- cbind(mu = runif(50, -2, 2))
#' test <- data.frame(th, simulate_summaries(sim, summ, th, batch = TRUE)$summaries)
#' logLik(r, newdata = test)
#' @name nce_ratio_methods
NULL

# The rows to predict at: the classifier's pairs, or `newdata` checked for every parameter and
# summary column.
ratio_newdata <- function(object, newdata, call = caller_call()) {
  call <- call
  if (is.null(newdata)) return(stats::model.frame(object))
  if (!is.data.frame(newdata)) {
    nce_abort("`newdata` must be a data frame with the parameter and summary columns.", "input", call = call)
  }
  check_newdata_columns(newdata, c(object$parameters, object$summary_names), call = call)
  cols <- c(object$parameters, object$summary_names)
  # A column of NA only (logical in R) predicts NA, as a numeric NA does.
  for (v in cols) if (is.logical(newdata[[v]]) && all(is.na(newdata[[v]]))) newdata[[v]] <- as.double(newdata[[v]])
  bad <- Filter(function(v) !is.numeric(newdata[[v]]), cols)
  if (length(bad)) {
    nce_abort(sprintf("`newdata` column(s) %s must be numeric.", paste(bad, collapse = ", ")), "input", call = call)
  }
  inf <- Filter(function(v) any(is.infinite(newdata[[v]])), cols)
  if (length(inf)) {
    nce_abort(sprintf("`newdata` column(s) %s hold infinite values (NA predicts NA).", paste(inf, collapse = ", ")),
              "input", call = call)
  }
  newdata
}

#' @rdname nce_ratio_methods
#' @export
nobs.nce_ratio <- function(object, ...) nrow(stats::model.frame(object))

# Shuffled pairs per joint one among the classifier's own pairs: the prior odds of its labels.
ratio_pair_odds <- function(object) {
  y <- stats::model.frame(object)$y
  sum(y == 0) / sum(y == 1)
}

# The held-out log-likelihood of the classification (see ?nce_ratio_methods): the rows of
# `newdata` as joint pairs, each with k shuffled ones built by cyclic shifts of the parameters, at
# the prior odds 1:k of the fit's own pairs.
ratio_held_out_loglik <- function(object, newdata, df, call = caller_call()) {
  call <- call
  nd <- ratio_newdata(object, newdata, call = call)
  k <- ratio_pair_odds(object)
  m <- nrow(nd)
  if (m <= k) {
    nce_abort(sprintf(paste("`newdata` has %d row(s): the held-out log-likelihood contrasts each joint simulation",
                            "with the parameters of %d other(s), so it needs at least %d"), m, k, k + 1L),
              "input", call = call)
  }
  th <- nd[object$parameters]
  s <- nd[object$summary_names]
  shifted <- lapply(seq_len(k), function(j) {
    data.frame(th[(seq_len(m) + j - 1L) %% m + 1L, , drop = FALSE], s, check.names = FALSE)
  })
  rows <- rbind(data.frame(th, s, check.names = FALSE), do.call(rbind, shifted))
  eta <- stats::predict(object, rows) - log(k)
  if (anyNA(eta)) nce_abort("`newdata` holds NA: every row must be a whole simulation.", "input", call = call)
  y <- rep(c(1, 0), c(m, k * m))
  ll <- sum(stats::plogis(ifelse(y == 1, eta, -eta), log.p = TRUE))
  structure(ll, df = df, nobs = length(y), class = "logLik")
}

#' @rdname nce_ratio_methods
#' @export
update.nce_ratio <- function(object, ..., resample = FALSE) {
  changes <- list(...)
  args <- list(simulator = object$simulator, summaries = object$summaries, prior = object$prior, n = object$n,
               batch = object$batch, n_shuffle = object$n_shuffle)
  args <- c(args, if (identical(object$classifier, "mlp")) {
    list(classifier = "mlp", hidden = object$hidden, control = object$control, n_networks = object$n_networks,
         loss = object$loss, embedding = object$embedding)
  } else {
    list(formula = object$formula, discrete = isTRUE(object$discrete))
  })
  if (!any(names(changes) %in% c("simulator", "summaries", "prior", "n", "batch"))) {
    args$simulations <- object$simulations
  }
  args[names(changes)] <- changes
  state <- if (is.null(args$simulations)) object$rng_state else object$rng_fit
  fit <- rerun(object, ratio_amortised, args, resample, state)
  for (nm in names(changes)) fit$call[[nm]] <- substitute(list(...))[[nm]]
  fit
}

#' @export
print.nce_ratio <- function(x, ...) {
  cat("Amortised ratio estimator (classifier between joint and shuffled (theta, s) pairs)\n")
  cat(sprintf("%d joint pairs, %d shuffled per pair; parameters %s; summaries %s\n", x$n, x$n_shuffle,
              paste(x$parameters, collapse = ", "), describe_names(x$summary_names)))
  writeLines(ratio_classifier_lines(x))
  cat(sprintf("Simulation %.2f s, fitting %.2f s\n", x$time[["simulation"]], x$time[["fitting"]]))
  invisible(x)
}

# The lines of print() that describe the classifier (methods in ratio-gam-methods.R and
# ratio-net-methods.R).
ratio_classifier_lines <- function(x) UseMethod("ratio_classifier_lines")

# Up to 6 names, then how many more.
describe_names <- function(v) {
  if (length(v) <= 6L) return(paste(v, collapse = ", "))
  sprintf("%s, ... (%d columns)", paste(v[1:5], collapse = ", "), length(v))
}

#' @export
summary.nce_ratio <- function(object, ...) {
  structure(c(list(print = utils::capture.output(print(object)), training = object$training),
              summary_loglik(object)), class = "summary.nce_ratio")
}

#' @export
print.summary.nce_ratio <- function(x, ...) {
  writeLines(x$print)
  format_loglik(x, 6L, "classification; df")
  invisible(x)
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::glance
glance.nce_ratio <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(n_pairs = x$n, n_shuffle = x$n_shuffle, nobs = stats::nobs(x), df = attr(ll, "df"),
             logLik = as.numeric(ll), AIC = stats::AIC(ll), BIC = stats::BIC(ll),
             simulation_time = unname(x$time[["simulation"]]), fitting_time = unname(x$time[["fitting"]]),
             stringsAsFactors = FALSE)
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::augment
augment.nce_ratio <- function(x, newdata = NULL, se_fit = FALSE, ...) {  # nolint: object_name_linter.
  check_bool(se_fit, "se_fit")
  rows <- ratio_newdata(x, newdata)
  p <- stats::predict(x, newdata, se.fit = se_fit)
  out <- as.data.frame(rows)
  out$.fitted <- if (se_fit) p$fit else p
  if (se_fit) out$.se.fit <- p$se.fit
  out
}
