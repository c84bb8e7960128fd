# The base class of every result, `nce_result`: the methods that mean the same for every class
# (fitted() as predict(type = "response"), update() that reproduces the fit, the log-likelihood
# fields of summaries) and every refusal, once. Each class adds only what differs.
#
# Layout: front ends (nce.R, snce.R, latkes.R, vnce.R, lfire.R, ratio-amortised.R, design.R,
# marglik.R, bayes-factor.R) check arguments and call the workers (contrast.R: data against
# reference; grouped.R and smooth.R: the term set-up; the Rust engine through the bindings); the
# S3 methods of a class live together in its methods file (nce-methods.R, gam-methods.R,
# snce-methods.R, latkes-methods.R, latkes-collection.R, conditional-methods.R,
# nonlinear-methods.R, vnce-methods.R, estimate-methods.R, lfire-methods.R, ratio-methods.R (with
# ratio-gam-methods.R and ratio-net-methods.R), ratio-posterior-methods.R, design-methods.R),
# broom's included; what is the same for all is here.

#' The base class of nce results
#'
#' Every result of the package (fits of [nce()], [snce()], [latkes()], [vnce()], [lfire()],
#' [ratio_amortised()], [design_eig()], and the estimates of [marglik_nce()],
#' [bayes_factor_nce()], [edge_roc()]) has class `nce_result` last. It carries one contract:
#' - `predict()` defaults to `type = "link"`; an unknown `type` is an error of class
#'   `nce_error_input` that lists the valid ones; `newdata` with 0 rows gives an empty result.
#' - `fitted(x)` is `predict(x, type = "response")` at the fit's own rows.
#' - `summary()`, `logLik()`, `AIC()`, `BIC()` and `broom::glance()` report one log-likelihood
#'   with one df; `deviance()` is `-2 * logLik()` (a density has no saturated model).
#' - `update(x)` reproduces `x` bit for bit: the fit stores the state of R's random number
#'   generator at its call, and `update()` re-evaluates the call from that state (then puts the
#'   session's generator back as it was). `update(x, resample = TRUE)` draws anew from the
#'   session's generator; `update()` with a changed formula reuses the same reference draw.
#' - A method a class cannot answer is refused with an error of class `nce_error_unsupported`
#'   saying why.
#'
#' @inheritParams nce_vocabulary
#' @param formula. Changes to the model formula (`~ . + x`), for results fitted from one.
#' @param ... For `update()`, arguments of the fitting call to change; otherwise unused.
#' @param resample For `update()`: `FALSE` (default) re-evaluates the call from the random state
#'   of the original fit (the same reference draws and simulations); `TRUE` draws anew.
#' @param evaluate For `update()`: `FALSE` returns the updated call.
#' @return `fitted()`: as `predict(type = "response")`; `update()`: the new fit (or its call);
#'   the refused methods signal `nce_error_unsupported`.
#' @name nce_result
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' identical(coef(update(fit)), coef(fit))          # TRUE: the same reference draw
#' coef(update(fit, resample = TRUE)) - coef(fit)   # a new draw
#' all.equal(fitted(fit), predict(fit, type = "response"))
NULL

# Why a class refuses a method: `.why` for all its refusals, or one entry per method. Looked up
# along the class vector, so a subclass may say more than its parent.
refusal_reasons <- list(
  nce_bf = list(.why = "it is an estimate of a log Bayes factor from draws, not a fitted model of data"),
  nce_marglik = list(.why = paste("it is an estimate of a normalising constant from draws, not a fitted model",
                                  "of data (the marginal likelihood is itself the evidence)")),
  nce_edge_roc = list(.why = "it is a comparison of an estimated graph with the true one, not a fitted model of data",
                      vcov = "the AUC compares one estimate with a known graph; it carries no sampling model here",
                      confint = "the AUC compares one estimate with a known graph; it carries no sampling model here"),
  nce_ratio_posterior = list(.why = "it is a posterior sample, not a fitted model of data; use the ratio estimator",
                             augment = "a posterior sample has no data rows to augment"),
  nce_lfire = list(.why = "the model is a simulator function, not a formula on data",
                   nobs = "the data are one observed data set seen through its summaries",
                   fitted = "there is no fitted density of the observed data, only ratios at parameter values",
                   residuals = "there are no fitted values of the observed data",
                   logLik = "a simulator model has no likelihood to evaluate; the fit estimates ratios",
                   anova = "there are no nested likelihood models to test",
                   model.matrix = "each parameter value has its own regression on simulated summaries",
                   augment = "there are no data rows to augment (use predict() for the log ratios)"),
  nce_eig = list(.why = "an EIG estimate is not a model of data (see coef(), confint(), predict())",
                 simulate = "simulate from the simulator itself (an EIG estimate is not a model of data)"),
  nce_design = list(.why = "a chosen design is not a model of data (the EIG smooth is `$smooth`)",
                    simulate = "simulate from the simulator at coef(object) instead"),
  nce_ratio_mlp = list(.why = paste("the classifier is a neural network, whose weights are not identifiable, with",
                                    "no model matrix, coefficients' covariance or smooth terms (the GAM classifier,",
                                    "classifier = \"gam\", has them); use predict() for log ratios")),
  nce_ratio = list(simulate = paste("a ratio estimator is not a model of the pairs' labels;",
                                    "simulate (theta, s) pairs with simulate_summaries()")),
  nce_mlp = list(drop1 = paste("single-term deletions are tested by anova(), which a fit with a network refuses:",
                               "compare held-out log-likelihoods, logLik(fit, newdata = held_out)"),
                 .why = paste("the network is not linear in its parameters, and its weights are not identifiable",
                              "(permuting hidden units gives the same function): there is no model matrix and no",
                              "covariance for them"),
                 anova = paste("nested fits with a network are not tested by a Wald test on the network's weights;",
                               "compare held-out log-likelihoods, logLik(fit, newdata = held_out)")),
  nce_nls = list(model.matrix = "the model is nonlinear in its parameters (predict(se.fit = TRUE) uses its gradient)",
                 drop1 = paste("a nonlinear log density has no additive terms to delete; compare fits with",
                               "parameters fixed by anova(small, large)"),
                 terms = "a nonlinear log density has no terms object; see formula()"),
  latkes_collection = list(anova = paste("compare the subjects' fits one at a time,",
                                         "anova(x$fits[[i]], y$fits[[i]]) (a Wald test each)"),
                           model.matrix = "each subject's fit has its own design; use model.matrix(x$fits[[i]])"),
  vnce_fit = list(anova = paste("vnce specifications are not nested in one another (no constrained graph or",
                                "mixture is fitted); compare parameters with their sandwich standard errors",
                                "(vcov(), confint())"),
                  formula = paste("vnce() takes a data matrix and a model specification (tgm_model(),",
                                  "mog_model(), custom_model()), not a formula"),
                  terms = "vnce() takes a data matrix and a model specification, not a formula",
                  residuals = paste("a density model has no response to take residuals of;",
                                    "see fitted() for the density at the data"))
)

refusal_reason <- function(object, method) {
  reasons <- refusal_reasons[intersect(class(object), names(refusal_reasons))]
  # A reason for this method (the nearest class's) before any class's general one.
  for (r in reasons) if (!is.null(r[[method]])) return(r[[method]])
  for (r in reasons) if (!is.null(r$.why)) return(r$.why)
  "this kind of result does not define it"
}

refuse <- function(method, object, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  nce_unsupported(method, object, refusal_reason(object, method), call = call)
}

# The refusals: a class that answers a method defines it; every other class lands here.
#' @export
predict.nce_result <- function(object, ...) refuse("predict", object)
#' @export
residuals.nce_result <- function(object, ...) refuse("residuals", object)
#' @export
logLik.nce_result <- function(object, ...) refuse("logLik", object)
#' @export
anova.nce_result <- function(object, ...) refuse("anova", object)
#' @export
model.frame.nce_result <- function(formula, ...) refuse("model.frame", formula)
#' @export
model.matrix.nce_result <- function(object, ...) refuse("model.matrix", object)
#' @export
formula.nce_result <- function(x, ...) refuse("formula", x)
#' @export
terms.nce_result <- function(x, ...) {
  if (!is.null(x$terms)) return(x$terms)
  tt <- tryCatch(stats::terms(stats::formula(x)), error = function(e) NULL)
  if (is.null(tt)) refuse("terms", x) else tt
}
#' @export
plot.nce_result <- function(x, ...) refuse("plot", x)
#' @export
simulate.nce_result <- function(object, nsim = 1, seed = NULL, ...) refuse("simulate", object)
#' @export
vcov.nce_result <- function(object, ...) refuse("vcov", object)
# The coefficients where the result has them (the fixed field), else refused.
#' @export
coef.nce_result <- function(object, ...) {
  if (is.null(object[["coefficients"]])) refuse("coef", object) else object[["coefficients"]]
}
# Wald intervals from coef() and vcov() where the class has both; refused, as confint(), where not.
#' @export
confint.nce_result <- function(object, parm, level = 0.95, ...) {
  check_probability(level, "level")
  tryCatch(list(stats::coef(object), stats::vcov(object)), nce_error_unsupported = function(e) {
    refuse("confint", object)
  })
  stats::confint.default(object, parm, level, ...)
}
#' @export
nobs.nce_result <- function(object, ...) refuse("nobs", object)

#' @exportS3Method generics::tidy
tidy.nce_result <- function(x, ...) refuse("tidy", x)  # nolint: object_name_linter.
#' @exportS3Method generics::augment
augment.nce_result <- function(x, ...) refuse("augment", x)  # nolint: object_name_linter.

#' @rdname nce_result
#' @export
fitted.nce_result <- function(object, ...) stats::predict(object, type = "response")

# From logLik(), so that the two never disagree; refused where logLik() is. (The methods of
# nce_fit call these: a smooth fit is also a "glm", whose methods come before "nce_result".)
#' @export
extractAIC.nce_result <- function(fit, scale = 0, k = 2, ...) {
  ll <- stats::logLik(fit)
  c(attr(ll, "df"), -2 * as.numeric(ll) + k * attr(ll, "df"))
}
#' @export
drop1.nce_result <- function(object, ...) refuse("drop1", object)

# -2 log L, with the log-likelihood of logLik() (there is no saturated model for a density), so
# the two never disagree; refused where logLik() is.
#' @export
deviance.nce_result <- function(object, ...) -2 * as.numeric(stats::logLik(object))

# The one shape of a fit of nce() (class nce_fit and below): the fields every fit has, which
# nce_fit's methods read (coefficients, the sandwich and naive covariances, the log normaliser
# -intercept, convergence, the classifier's linear predictors at the frame's rows, n data and m
# reference rows, reference, method, formula, frame of data and reference rows, control, call),
# and the class's own extras as one named sub-list in `...` (the nonlinear fit's `nls`). The
# front end adds the random state (as_result()). Built here rather than by merging lists with c():
# so far by the nonlinear wrapper, nce_nonlinear().
new_nce_fit <- function(class, coefficients, vcov, vcov_naive, converged, message, iterations, objective,
                        linear.predictors,  # nolint: object_name_linter.
                        n, m, reference, method, formula, frame, control, call, env, ratio = m / n, ...) {
  extras <- list(...)
  p <- length(coefficients)
  stopifnot(is.numeric(coefficients), !is.null(names(coefficients)), identical(dim(vcov), c(p, p)),
            identical(dim(vcov_naive), c(p, p)), nrow(frame) == n + m, length(linear.predictors) == n + m,
            length(extras) == length(setdiff(names(extras), "")))
  fixed <- list(coefficients = coefficients, vcov = vcov, vcov_naive = vcov_naive,
                log_normaliser = -unname(coefficients[1L]), converged = converged, message = message,
                iterations = iterations, objective = objective, linear.predictors = linear.predictors, n = n, m = m,
                ratio = ratio, reference = reference, method = method, nce_formula = formula, nce_frame = frame,
                control = control, call = call, env = env)
  structure(c(fixed, extras), class = c(class, "nce_fit", "nce_result"))
}

# The random state of a front end's call, stored in its result for update(): `call`, the state
# at the call (before its arguments are evaluated), and `fit`, the state after the arguments the
# caller supplied are evaluated, from which the fit's own draws start. update() restores both: an
# argument written in the call (`data = rnorm(10)`) draws again from `call`, an argument passed as
# a variable is a value by then, and either way the fit starts from `fit`. Creates the session's
# seed first if there is none yet (as the first random draw would).
# `lazy` names arguments the front end evaluates in its data (weights, subset), not here.
rng_state <- function(lazy = character(), env = parent.frame()) {
  if (!exists(".Random.seed", envir = globalenv(), inherits = FALSE)) stats::runif(1L)
  at_call <- get(".Random.seed", envir = globalenv(), inherits = FALSE)
  fn <- sys.function(sys.parent())
  for (a in setdiff(names(formals(fn)), c("...", lazy))) {
    if (!eval(call("missing", as.name(a)), env)) get(a, envir = env)
  }
  if (!is.null(replay$fit)) {
    assign(".Random.seed", replay$fit, envir = globalenv())
    replay$fit <- NULL  # the outermost front end replays; the calls it makes draw on
  }
  list(call = at_call, fit = rng_now())
}

rng_now <- function() {
  if (!exists(".Random.seed", envir = globalenv(), inherits = FALSE)) stats::runif(1L)
  get(".Random.seed", envir = globalenv(), inherits = FALSE)
}

# The state a front end replays, set by with_rng_state() for the call it evaluates.
replay <- new.env(parent = emptyenv())

# A front end's result with its call and the random state the call started from.
as_result <- function(out, call = out$call, rng, env = NULL) {
  out["call"] <- list(call)
  out$rng_state <- rng
  if (!is.null(env)) out$call_env <- env
  if (!inherits(out, "nce_result")) class(out) <- c(class(out), "nce_result")
  out
}

# Evaluates `expr` (a front end's call) from the random state `state` (see rng_state()), then
# puts the session's state back.
with_rng_state <- function(state, expr) {
  if (is.null(state)) return(expr)
  had <- exists(".Random.seed", envir = globalenv(), inherits = FALSE)
  old <- if (had) get(".Random.seed", envir = globalenv(), inherits = FALSE)
  on.exit({
    replay$fit <- NULL
    if (had) assign(".Random.seed", old, envir = globalenv()) else rm(".Random.seed", envir = globalenv())
  })
  if (!is.null(state$call)) assign(".Random.seed", state$call, envir = globalenv())
  replay$fit <- state$fit
  expr
}

# The name of the call's argument that holds the model formula.
formula_arg <- function(call) {
  fn <- as.character(call[[1L]])
  if (fn[length(fn)] == "latkes") "kernel" else "formula"
}

#' @rdname nce_result
#' @export
update.nce_result <- function(object, formula., ..., resample = FALSE,  # nolint: object_name_linter.
                              evaluate = TRUE) {
  check_bool(resample, "resample")
  call <- object$call
  if (is.null(call)) nce_unsupported("update", object, "the result keeps no call to re-evaluate")
  extras <- match.call(expand.dots = FALSE)$...
  if (!missing(formula.)) call[[formula_arg(call)]] <- update_nce_formula(stats::formula(object), formula.)
  for (a in names(extras)) call[[a]] <- extras[[a]]
  if (!evaluate) return(call)
  env <- object[["call_env"]]
  if (!is.environment(env)) env <- tryCatch(environment(stats::formula(object)), error = function(e) NULL)
  caller <- parent.frame()
  if (!is.environment(env)) env <- caller
  # An argument the front end does not have: refused here, not by R's bare "unused argument".
  fun <- tryCatch(eval(call[[1L]], env), error = function(e) NULL)
  if (is.function(fun) && !"..." %in% names(formals(fun))) {
    unknown <- setdiff(names(extras), names(formals(fun)))
    if (length(unknown)) {
      nce_abort(sprintf("%s has no argument(s) %s to change.", deparse(call[[1L]]), paste(unknown, collapse = ", ")),
                "input")
    }
  }
  run <- function() {
    tryCatch(eval(call, env), nce_error = function(e) stop(e), error = function(e) {
      # Objects of the call not where the fit was made (a formula built elsewhere): try the caller.
      eval(call, caller)
    })
  }
  if (resample) run() else with_rng_state(object$rng_state, run())
}

# update() of results that keep their arguments (and simulations) rather than a call: runs `fun`
# on `args` from the result's random state unless `resample`, keeping the original call.
# `state` is the random state to start from: the call's, or (when stored simulations are passed
# back) the state the original fit had after simulating.
rerun <- function(object, fun, args, resample, state = object$rng_state) {
  check_bool(resample, "resample")
  fit <- if (resample) do.call(fun, args) else with_rng_state(state, do.call(fun, args))
  if (!resample) fit$rng_state <- object$rng_state
  if (!is.null(object$call)) fit$call <- object$call
  fit
}

# predict()'s `type`: the first of the method's choices ("link") by default, otherwise one of them
# (a classed error lists them), as check_choice(): exact, classed.
predict_type <- function(type, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  choices <- eval(formals(sys.function(sys.parent()))$type)
  check_choice(type, choices, "type", call = call)
}

# The log-likelihood fields a summary carries: the logLik() object and its AIC, or none when the
# class refuses logLik().
summary_loglik <- function(object, ...) {
  ll <- tryCatch(stats::logLik(object, ...), nce_error_unsupported = function(e) NULL)
  if (is.null(ll)) return(list())
  list(logLik = ll, aic = -2 * as.numeric(ll) + 2 * attr(ll, "df"))
}

# One line for print.summary methods.
format_loglik <- function(x, digits, df_label = "df") {
  if (is.null(x$logLik)) return(invisible(NULL))
  cat(sprintf("log-likelihood %s (%s %s), AIC %s\n", format(as.numeric(x$logLik), digits = digits), df_label,
              format(attr(x$logLik, "df"), digits = digits), format(x$aic, digits = digits)))
}
