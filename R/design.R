# Experimental design for simulator models by ratio estimation (Kleinegesse and Gutmann 2019,
# 2020). The expected information gain of a design d is the mutual information between the
# parameters and the data at d, the mean of log p(x | theta, d) / p(x | d) over the joint
# distribution; an amortised ratio classifier ([ratio_amortised()]) fitted to simulations at d
# estimates that log ratio, and held-out simulations turn it into an estimate of the EIG.

#' Expected information gain of a design, by ratio estimation
#'
#' Simulates `n` pairs (theta, x) at the design `design` (theta from the prior), fits the
#' amortised ratio classifier of [ratio_amortised()] by cross-fitting (on all folds of the pairs
#' but one, `folds` times), and estimates the expected information gain
#' \deqn{\mathrm{EIG}(d) = E_{p(x, \theta \mid d)} \log \frac{p(x \mid \theta, d)}{p(x \mid d)}}{
#' EIG(d) = E log p(x | theta, d) / p(x | d)}
#' on each fold with the log ratio \eqn{h} of the classifier that did not see it; the estimate
#' averages over all pairs:
#' * `plugin` (reported first, and the one [design_optimise()] maximises by default): the mean
#'   of \eqn{h} over joint pairs (Kleinegesse and Gutmann 2019). It estimates the EIG itself;
#'   its error is the Monte Carlo error plus the classifier's error.
#' * `nwj`: the lower bound of Nguyen, Wainwright and Jordan (2010),
#'   \eqn{E_{joint}[h] + 1 - E_{marginal}[e^h]}, which is below the EIG for any \eqn{h}
#'   (in expectation) and equal to it at the true log ratio. The marginal expectation averages
#'   \eqn{e^h} over `n_marginal` shuffles of the fold's parameters.
#' * `jsd`: the lower bound \eqn{\log 2 - \bar J(h) / 2} on the Jensen-Shannon divergence
#'   between the joint and the product of marginals (Kleinegesse and Gutmann 2020), where
#'   \eqn{\bar J} is the logistic loss with one marginal pair per joint pair. It bounds a
#'   different quantity (at most log 2), the proxy of the 2020 paper, not the EIG.
#' * `infonce`: the InfoNCE bound (van den Oord et al. 2018; Poole et al. 2019),
#'   \eqn{E[h - \log((e^h + \sum_k e^{h_k}) / (K + 1))]}{E[h - log((e^h + sum_k e^h_k) / (K + 1))]}
#'   with \eqn{h_k} the log ratios of a pair's data with the parameters of \eqn{K} (up to 255)
#'   other held-out pairs: the log ratio normalised over the prior, below the EIG in expectation
#'   for any held-out classifier (by about 0.01 nats with the exact log ratio on the death model)
#'   and blind to any offset of \eqn{h} that depends on the data only (which a contrastive loss
#'   such as the network's NRE-C leaves; its plug-in is then off by that offset).
#'
#' **How close to exact, and which estimator.** The defaults (`n = 2000`, `folds = 5`, the
#' classifier below) were chosen on the death model ([death_model()]: y ~ Bin(50, 1 - exp(-b t)),
#' b ~ N(1, 1) truncated at 0), against its exact EIG by quadrature (`bench/design-defaults.R`,
#' figures in `bench/README.md`). There the plug-in estimate is 0.00-0.06 nats below the exact EIG
#' over t in 0.25..3.5 (about 0.03 at t = 1.28 and t = 3); the NWJ bound is further below (0.02-0.6
#' nats: \eqn{e^h} on shuffled pairs is dominated by the classifier's extrapolations) and has
#' the larger spread, so the plug-in is the estimate to read. The previous default (a single
#' half split and the smaller bases of [ratio_amortised()], `s(k = 5)` and `ti(k = 4)`) was
#' 0.1-0.27 nats low at late times: too stiff a classifier shrinks \eqn{h} and the plug-in with it.
#'
#' **Standard errors** cover the classifier's error as well as the Monte Carlo error. Fold k's
#' mean term is \eqn{e_k = \mathrm{EIG} + M_k + D_k}, with \eqn{M_k} the Monte Carlo error of
#' its \eqn{m} pairs (variance \eqn{\sigma^2 / m}, from the spread of the terms within folds)
#' and \eqn{D_k} the error of classifier k (variance \eqn{\tau^2}). Two classifiers share
#' \eqn{(K - 2) / (K - 1)} of their training pairs; taking a fit's error as a mean over its
#' training pairs, their errors correlate by \eqn{\rho = (K - 2) / (K - 1)}. Then the
#' spread of the fold means is \eqn{\sigma^2 / m + \tau^2 (1 - \rho)} and the variance of the
#' estimate \eqn{\sigma^2 / n + \tau^2 (1 + (K - 1) \rho) / K}: the spread beyond its Monte
#' Carlo part, scaled, is the classifier's share. The standard error is conservative (its
#' classifier part rests on `folds - 1` degrees of freedom and is often larger than the
#' actual error); the Monte Carlo part alone is the column `mc.error` of `$estimates`. The
#' intervals (printed, and [confint()][nce_eig-methods]) take Student's t on the degrees of freedom
#' of the standard error (`$estimates$df`, Satterthwaite's rule: few with few folds, so that a
#' small classifier part estimated by chance does not give a short interval); their coverage of
#' the exact EIG is recorded in `bench/README.md`. With `folds = 1` (a single split holding out
#' `held_out`) only the Monte Carlo error is known, and the standard error is that.
#'
#' @param simulator The simulator at a design: `function(theta, design)` taking a named
#'   parameter vector and a named design vector and returning one data set; with `batch = TRUE`,
#'   `function(theta, n, design)` taking an n-row parameter matrix and returning n data sets.
#' @param summaries `function(x)` giving the summary statistics of one data set (with
#'   `batch = TRUE`, of a batch, as an n-row matrix with named columns); see
#'   [simulate_summaries()].
#' @param prior An `nce_prior` ([prior_uniform()], [prior_custom()], ...).
#' @param design The design: a named numeric vector (e.g. `c(t = 1)`).
#' @param n Simulations (pairs) at the design.
#' @param batch Whether `simulator` and `summaries` work on batches.
#' @param formula The classifier's right-hand side (see [ratio_amortised()]); by default a
#'   smooth of each parameter and summary (`s(k = 8)`) and the tensor-product interaction of
#'   each parameter with each summary (`ti(k = 6)`), with basis sizes capped by the number of
#'   distinct values (counts at an uninformative design take few): larger bases than
#'   [ratio_amortised()]'s default, which is too stiff here (see above).
#' @param classifier,hidden,control The classifier: `"gam"` (default: on the death model it was the
#'   stronger, plug-in errors 0.02-0.06 nats against the network's 0.03-0.17 at 500-2,000
#'   simulations, `bench/design-death.R`) or
#'   `"mlp"`, a neural network of the parameters and summaries with hidden layers of `hidden`
#'   units trained as [nce_ratio_control()] `control` says (see [ratio_amortised()]); one
#'   network per fold (the folds' cross-fitting already averages classifiers).
#' @param n_shuffle Shuffled pairs per joint pair in the classifier's training set. The
#'   default, 5, fills the corners of the product of marginals that joint pairs rarely reach;
#'   with 1, the classifier separates joint from shuffled pairs there almost perfectly and its
#'   log ratio diverges (seen on the death model at late times with 500 training pairs).
#' @param held_out With `folds = 1`: the fraction of the pairs held out to estimate the EIG
#'   (`NULL`, the default, holds out half). Given with `folds` > 1, where each fold is held out
#'   in turn, it is refused (`nce_error_input`).
#' @param folds Folds of the cross-fitting (1: a single split by `held_out`, the classifier's
#'   error then not in the standard error). Each fold needs at least 20 pairs.
#' @param n_marginal Shuffles of the held-out pairs for the marginal terms of the bounds.
#' @return An object of class `nce_eig`: `design`, `estimates` (a data frame: `estimator`,
#'   `estimate`, `std.error`, `mc.error`, `df`: the degrees of freedom of the standard error, by
#'   Satterthwaite's rule from its Monte Carlo and classifier parts), `cov` (their covariance,
#'   classifier error included), `cov_mc` (the Monte Carlo part), `fold_estimates`, `ratio` (the `nce_ratio` classifier
#'   refitted on all pairs, which [ratio_posterior()] turns into a posterior), `log_ratio`
#'   (cross-fitted joint log ratios), `n_train` (pairs per classifier), `n_test` (pairs
#'   averaged), `folds`, `time`.
#' @section What it refuses:
#' * `simulator` or `summaries` not a function, `prior` not an `nce_prior`, `design` not a
#'   named vector of finite numbers, `n` not a whole number >= 40, `batch` not TRUE/FALSE,
#'   `held_out` not strictly between 0 and 1 (or leaving fewer than 20 pairs on either side),
#'   `folds` not in 1..20 (or leaving a fold fewer than 20 pairs), `n_shuffle` not in 1..100,
#'   `n_marginal` not in 1..1000 (`nce_error_input`);
#' * simulations that would not fit in memory (`nce_error_size`, checked before simulating);
#'   fewer than 40 successful simulations (`nce_error_simulation`); failed simulations are
#'   counted and reported with a warning of class `nce_warning_simulation`.
#' @references Kleinegesse, S. and Gutmann, M. U. (2019). Efficient Bayesian experimental
#'   design for implicit models. AISTATS.
#'
#'   Kleinegesse, S. and Gutmann, M. U. (2020). Bayesian experimental design for implicit
#'   models by mutual information neural estimation. ICML.
#'
#'   Nguyen, X., Wainwright, M. J. and Jordan, M. I. (2010). Estimating divergence functionals
#'   and the likelihood ratio by convex risk minimization. IEEE Trans. Inf. Theory.
#' @seealso [design_optimise()] to choose the design, [death_model()] for an example with
#'   an exact EIG.
#' @examples
#' dm <- death_model()
#' set.seed(1)
#' e <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1), n = 1000, batch = TRUE)
#' e
#' death_model_eig(1)  # the exact value
#' @export
design_eig <- function(simulator, summaries, prior, design, n = 2000L, batch = FALSE, formula = NULL,
                       n_shuffle = 5L, held_out = NULL, n_marginal = 10L, folds = 5L, classifier = c("gam", "mlp"),
                       hidden = c(64, 64), control = NULL) {
  rng <- rng_state()
  call <- match.call()
  ucall <- sys.call()
  check_simulator(simulator, summaries, prior, ucall)
  design <- check_design_vector(design, "design", ucall)
  holdout_used <- check_eig_sizes(n, batch, n_shuffle, held_out, n_marginal, folds, ucall)
  if (!is.null(formula) && (!inherits(formula, "formula") || length(formula) != 2L)) {
    check_fail("a one-sided formula such as ~ te(theta, s)", formula, "formula", ucall)
  }
  clf <- eig_classifier(classifier, formula, hidden, control, missing(hidden), ucall)
  check_size(8 * n * (length(prior$names) + 22) * (1 + n_shuffle + n_marginal), "n", "the simulations",
             call = ucall)
  out <- eig_at_design(simulator, summaries, prior, design, n, batch, formula, n_shuffle, holdout_used, n_marginal,
                       ucall, folds = as.integer(folds), clf = clf)
  out$call <- call
  out$rng_state <- rng
  out$args <- list(simulator = simulator, summaries = summaries, prior = prior, design = design, n = n,
                   batch = batch, formula = formula, n_shuffle = n_shuffle, held_out = held_out,
                   n_marginal = n_marginal, folds = folds, classifier = clf$classifier, hidden = clf$hidden,
                   control = clf$control)
  out
}

# The classifier's settings: the GAM of `formula`, or the network of `hidden` and `control`.
eig_classifier <- function(classifier, formula, hidden, control, default_hidden, call) {
  classifier <- check_choice(classifier, c("gam", "mlp"), "classifier", call)
  if (classifier == "mlp") {
    if (!is.null(formula)) {
      nce_abort("`formula` sets up the GAM classifier; with classifier = \"mlp\" leave it out", "input", call = call)
    }
    spec <- mlp_spec("x", hidden = hidden)
    return(list(classifier = "mlp", hidden = spec$hidden, control = merge_control(control, nce_ratio_control,
                                                                                   call = call)))
  }
  if (!is.null(control) || (!default_hidden && !is.null(hidden))) {
    nce_abort("`hidden` and `control` set up the network; they apply only with classifier = \"mlp\"", "input",
              call = call)
  }
  list(classifier = "gam", hidden = NULL, control = NULL)
}

check_design_vector <- function(design, arg, call) {
  if (is.data.frame(design) && nrow(design) == 1L) design <- unlist(design)
  if (!is.numeric(design) || length(design) < 1L || is.null(names(design)) || any(names(design) == "") ||
      anyNA(names(design)) || any(!is.finite(design)) || anyDuplicated(names(design))) {
    check_fail("a named vector of finite numbers such as c(t = 1)", design, arg, call)
  }
  stats::setNames(as.double(design), names(design))
}

# The simulator at one design, in the form run_simulations() calls; built here so that the
# closure future sends to the workers holds only the simulator and the design.
design_simulator <- function(simulator, design, batch) {
  force(simulator)
  force(design)
  if (batch) function(theta, n) simulator(theta, n, design) else function(theta) simulator(theta, design)
}

# Simulate and estimate the EIG by cross-fitting: the pairs are split into `folds` folds, the
# classifier fitted on all folds but one gives the terms of the estimators on that one, and the
# estimate averages the terms of all pairs. With folds = 1 a single split holds out `held_out`.
eig_at_design <- function(simulator, summaries, prior, design, n, batch, formula, n_shuffle, held_out,
                          n_marginal, call, folds = 5L, keep_ratio = TRUE, clf = list(classifier = "gam")) {
  sim_d <- design_simulator(simulator, design, batch)
  th <- as_theta_matrix(prior$sample(n), prior$names, call = call)
  sims <- run_simulations(sim_d, summaries, th, 1L, batch, 100L, call = call)
  ok <- which(sims$ok)
  if (length(ok) < 40L) {
    nce_abort(sprintf("only %d of %d simulations at the design succeeded; at least 40 are needed.",
                      length(ok), n), "simulation", call = call)
  }
  check_ratio_names(prior$names, colnames(sims$summaries), call)
  if (folds == 1L) {
    n_test <- max(20L, round(held_out * length(ok)))
    fold_rows <- list(ok[seq.int(length(ok) - n_test + 1L, length(ok))])
  } else {
    fold_rows <- split(ok, cut(seq_along(ok), folds, labels = FALSE))
  }
  if (is.null(formula) && clf$classifier == "gam") {
    # Basis sizes capped by the distinct values of every fold's training pairs.
    vals <- cbind(sims$theta[, prior$names, drop = FALSE], sims$summaries)
    n_unique <- Reduce(pmin, lapply(fold_rows, function(test) {
      apply(vals[setdiff(ok, test), , drop = FALSE], 2L, function(v) length(unique(v)))
    }))
    formula <- default_eig_formula(prior$names, colnames(sims$summaries), n_unique = n_unique)
  }
  fit_ratio <- function(rows) {
    if (clf$classifier == "mlp") {
      return(ratio_amortised(sim_d, summaries, prior, n = length(rows), batch = batch, n_shuffle = n_shuffle,
                             simulations = subset_simulations(sims, rows), classifier = "mlp",
                             hidden = clf$hidden, control = clf$control, n_networks = 1L))
    }
    ratio_amortised(sim_d, summaries, prior, n = length(rows), formula = formula, batch = batch,
                    n_shuffle = n_shuffle, simulations = subset_simulations(sims, rows))
  }
  t_fit <- 0
  t0 <- proc.time()[["elapsed"]]
  per_fold <- lapply(fold_rows, function(test) {
    train <- setdiff(ok, test)
    ratio <- fit_ratio(train)
    t_fit <<- t_fit + ratio$time[["fitting"]]
    th_te <- sims$theta[test, prior$names, drop = FALSE]
    s_te <- sims$summaries[test, , drop = FALSE]
    h <- ratio_log_ratio(ratio, th_te, s_te)
    m <- length(test)
    idx <- as.vector(vapply(seq_len(n_marginal), function(k) sample.int(m), integer(m)))
    h_marg <- matrix(ratio_log_ratio(ratio, th_te[idx, , drop = FALSE],
                                     s_te[rep(seq_len(m), n_marginal), , drop = FALSE]), m, n_marginal)
    # Contrasting parameters of the InfoNCE bound: pair i's data with the parameters of the next
    # K held-out pairs (cyclically; the pairs are independent, so these are draws from the prior).
    n_con <- min(m - 1L, 255L)
    cidx <- (seq_len(m) - 1L + rep(seq_len(n_con), each = m)) %% m + 1L
    h_con <- matrix(ratio_log_ratio(ratio, th_te[cidx, , drop = FALSE],
                                    s_te[rep(seq_len(m), n_con), , drop = FALSE]), m, n_con)
    list(terms = eig_terms(h, h_marg, h_con), h = h, h_marg = h_marg[, 1L], ratio = ratio,
         held_out = data.frame(th_te, s_te, check.names = FALSE))
  })
  terms <- do.call(rbind, lapply(per_fold, `[[`, "terms"))
  err <- eig_errors(lapply(per_fold, `[[`, "terms"))
  # The classifier kept for predict() and ratio_posterior(): with cross-fitting, one refit on all
  # pairs (the best classifier the simulations give); with a single split, the one fitted.
  ratio <- per_fold[[1L]]$ratio
  if (folds > 1L && keep_ratio) {
    ratio <- fit_ratio(ok)
    t_fit <- t_fit + ratio$time[["fitting"]]
  }
  ratio$time[["simulation"]] <- sims$time
  ratio$call <- NULL
  if (!keep_ratio) ratio <- NULL
  n_used <- nrow(terms)
  estimates <- data.frame(estimator = eig_estimators, estimate = unname(colMeans(terms)),
                          std.error = sqrt(pmax(diag(err$cov), 0)), mc.error = sqrt(pmax(diag(err$cov_mc), 0)),
                          df = err$df, stringsAsFactors = FALSE)
  structure(list(design = design, estimates = estimates, cov = err$cov, cov_mc = err$cov_mc,
                 fold_estimates = err$fold_estimates, ratio = ratio, formula = formula,
                 log_ratio = unlist(lapply(per_fold, `[[`, "h")),
                 log_ratio_marginal = unlist(lapply(per_fold, `[[`, "h_marg")),
                 held_out = do.call(rbind, lapply(per_fold, `[[`, "held_out")),
                 n = n, folds = folds, n_train = length(ok) - if (folds == 1L) n_used else length(fold_rows[[1L]]),
                 n_test = n_used, n_failed = sum(!sims$ok), n_marginal = n_marginal,
                 time = c(simulation = sims$time, fitting = t_fit,
                          estimation = proc.time()[["elapsed"]] - t0 - t_fit)),
            class = c("nce_eig", "nce_result"))
}

# Standard errors of the cross-fitted estimates. Fold k's mean term e_k is the EIG plus M_k plus
# D_k, with M_k the Monte Carlo error of its m pairs (variance sigma^2 / m, from the terms' spread within
# folds) and D_k the error of classifier k (variance tau^2, correlation rho between two folds'
# classifiers). Two classifiers share (K - 2) / (K - 1) of their training pairs, and a fit's
# error behaves like a mean over its training pairs, so rho = (K - 2) / (K - 1). Then
#   E var(e_k) = sigma^2 / m + tau^2 (1 - rho),
#   var(mean e_k) = sigma^2 / n + tau^2 (1 + (K - 1) rho) / K,
# and the spread of the fold means beyond their Monte Carlo part estimates tau^2 (1 - rho).
# With one fold (a single split) only the Monte Carlo part is known.
eig_errors <- function(fold_terms) {
  k <- length(fold_terms)
  m <- vapply(fold_terms, nrow, 1L)
  n <- sum(m)
  within <- Reduce(`+`, lapply(fold_terms, function(tm) stats::cov(tm) * (nrow(tm) - 1))) / (n - k)
  cov_mc <- within / n
  means <- do.call(rbind, lapply(fold_terms, colMeans))
  if (k == 1L) return(list(cov = cov_mc, cov_mc = cov_mc, fold_estimates = means, df = rep(n - 1, ncol(means))))
  rho <- (k - 2) / (k - 1)
  spread <- stats::cov(means) - within / mean(m)
  # Only the part of the spread above the Monte Carlo variance is the classifiers'; keep it
  # positive semidefinite.
  ev <- eigen(spread, symmetric = TRUE)
  spread <- ev$vectors %*% diag(pmax(ev$values, 0), ncol(spread)) %*% t(ev$vectors)
  cov_cl <- spread * (1 + (k - 1) * rho) / (k * (1 - rho))
  dimnames(cov_cl) <- dimnames(cov_mc)
  # Degrees of freedom of each variance (Satterthwaite): the Monte Carlo part rests on n - k, the
  # classifier part on the k - 1 fold means, so with few folds the interval takes Student's t.
  a <- diag(cov_mc)
  b <- diag(cov_cl)
  df <- ifelse(a + b > 0, (a + b)^2 / (a^2 / (n - k) + b^2 / (k - 1)), n - k)
  list(cov = cov_mc + cov_cl, cov_mc = cov_mc, fold_estimates = means, df = unname(df))
}

# The classifier of design_eig(): a smooth of each parameter and summary (k = 8) and a
# tensor-product interaction of each parameter with each summary (k = 6), basis sizes capped by
# the numbers of distinct values. Chosen on the death model (bench/design-defaults.R): the
# smaller bases of ratio_amortised()'s default (5 and 4) are too stiff for the sharp log ratio
# of counts at late times and bias the EIG low by up to 0.25 nats.
default_eig_formula <- function(pars, snames, n_unique = NULL, k_main = 8L, k_inter = 6L) {
  vars <- c(pars, snames)
  nu <- stats::setNames(rep(Inf, length(vars)), vars)
  if (!is.null(n_unique)) nu[] <- n_unique[vars]
  main_term <- function(v) {
    if (nu[[v]] >= 3) return(sprintf("s(%s, k = %d)", v, as.integer(min(k_main, nu[[v]]))))
    if (nu[[v]] == 2) v else NULL
  }
  inter_term <- function(a, b) {
    m <- min(nu[[a]], nu[[b]])
    if (m >= 3) return(sprintf("ti(%s, %s, k = %d)", a, b, as.integer(min(k_inter, m))))
    if (m == 2) sprintf("%s:%s", a, b) else NULL
  }
  terms <- c(unlist(lapply(vars, main_term)),
             unlist(lapply(pars, function(a) lapply(snames, function(b) inter_term(a, b)))))
  if (!length(terms)) terms <- "1"
  stats::as.formula(paste("~", paste(terms, collapse = " + ")))
}

eig_estimators <- c("plugin", "nwj", "jsd", "infonce")

# Per-pair terms of the estimators: the joint log ratio; h + 1 - mean_k exp(h_k) (NWJ);
# log 2 - (log(1 + e^-h) + mean_k log(1 + e^h_k)) / 2 (JSD bound); h - log((e^h + sum_k e^c_k) /
# (K + 1)) with c_k the log ratios of the pair's data with K other pairs' parameters (InfoNCE:
# the log ratio normalised over the prior, which takes out any offset that depends on the data).
# exp() is capped so that a wild extrapolation of the classifier gives a large, finite, penalty.
eig_terms <- function(h, h_marg, h_con) {
  e_marg <- rowMeans(exp(pmin(h_marg, 700)))
  all <- cbind(h, h_con)
  mx <- apply(all, 1L, max)
  cbind(plugin = h, nwj = h + 1 - e_marg,
        jsd = log(2) - (log1pexp_r(-h) + rowMeans(log1pexp_r(h_marg))) / 2,
        infonce = h - (mx + log(rowSums(exp(all - mx))) - log(ncol(all))))
}

log1pexp_r <- function(x) ifelse(x > 35, x, log1p(exp(pmin(x, 35))))

subset_simulations <- function(sims, rows) {
  structure(list(theta = sims$theta[rows, , drop = FALSE], index = seq_along(rows),
                 summaries = sims$summaries[rows, , drop = FALSE], ok = sims$ok[rows],
                 failures = sims$failures[0L, , drop = FALSE], time = sims$time),
            class = "nce_simulations")
}

#' Choose a design that maximises the expected information gain
#'
#' Estimates the EIG ([design_eig()]) on a coarse set of designs over the box
#' `lower`..`upper` (1 or 2 design variables), smooths the noisy estimates with a GAM and
#' refines: each round adds designs in a shrinking window around the smooth's maximum and
#' refits. The chosen design is the maximiser of the final smooth; its uncertainty band comes
#' from the smooth's posterior (draws of the GAM coefficients from their covariance corrected
#' for the smoothing parameters' uncertainty, mgcv's `Vc`, the maximiser of each draw, and their
#' quantiles), with the covariance scaled up where REML puts the residual variance below the
#' estimates' Monte Carlo variance, and each draw scaled by a draw of the residual scale (few
#' designs leave it uncertain). A last [design_eig()] run at the chosen
#' design (`n_final` simulations) gives an independent EIG estimate there, the printed interval
#' for the EIG (Student's t, as [design_eig()]; free of the selection bias of the smooth's
#' maximum, and of its shared classifier bias, which the smooth's standard error does not
#' include), and the classifier for the posterior of an observation made at that design
#' ([ratio_posterior()] takes the result directly). With `n_final = 0` the interval is the
#' smooth's, which is too short (see below).
#'
#' **Defaults, and how far from exact.** Each evaluation is a cross-fitted [design_eig()]
#' (5 folds; the evaluations skip its refit on all pairs). The defaults for one design variable
#' (`n = 1000` simulations per design, 9 initial designs, 3 rounds of 4) were measured on the
#' death model ([death_model()]) against the exact optimum t = 1.28 (`bench/design-defaults.R`,
#' 80 seeds). With one design variable and at least 9 evaluated designs the EIG is smoothed by an
#' adaptive smooth (mgcv's `bs = "ad"`; a thin plate with fewer designs or two variables): the
#' chosen t was within 0.25 of 1.28 for 77 of 80 seeds (the other figures: `bench/README.md`).
#'
#' **Intervals, issue #74** (`bench/design-death.R`, 20 seeds): at the defaults the band held
#' t = 1.28 for 20 of 20 seeds (median width 0.56; before, 19 with the smooth's `Vp`) and the
#' printed EIG interval the exact EIG at the chosen t for 18 of 20 (the smooth's own interval, 0.03
#' nats low with a standard error of 0.01, for 2); on the issue's small run (`n = 400`, 7 designs,
#' 2 folds) 20 of 20 (median width 3.0: so few evaluations do not locate the maximum) and 17 of 20.
#' The chosen t was within 0.1 of 1.28 for 9 of 20 only: the classifier's bias grows with t by
#' more than the 0.0015 nats the exact curve falls 0.1 from its maximum. The defaults (GAM
#' classifier, `n = 1000`, 3 rounds) were kept on these measurements: the network classifier was
#' 0.03-0.17 nats further off than the GAM at 500-2,000 simulations per design.
#'
#' The smooth is fitted by [mgcv::gam()] (Gaussian, REML), not the package's Rust engine:
#' the engine fits binomial and Poisson likelihoods with a known scale, and these estimates are
#' Gaussian with an unknown scale (the Monte Carlo error plus the classifier's design-to-design
#' bias). Estimates are weighted by their inverse Monte Carlo variances (floored at a tenth of
#' the median so a near-deterministic design does not take all the weight).
#'
#' @inheritParams design_eig
#' @param lower,upper Named numeric vectors (same names, 1 or 2 design variables): the box.
#' @param n Simulations per evaluated design.
#' @param n_initial Designs in the coarse set: equally spaced (1-D), or about
#'   `n_initial` on a square grid (2-D).
#' @param n_refine Designs added per refinement round.
#' @param rounds Refinement rounds: by default 3 with one design variable, 2 with two.
#' @param estimator Which estimate the smooth maximises: `"plugin"`, `"nwj"`, `"jsd"` or
#'   `"infonce"` (see [design_eig()]).
#' @param level Level of the uncertainty band.
#' @param n_final Simulations of the last evaluation at the chosen design (0: none; then
#'   the result holds no classifier and gives no posterior).
#' @return An object of class `nce_design`: `best` (the chosen design), `band` (its
#'   uncertainty band per design variable), `eig` (the smooth's EIG at `best`, with
#'   standard error), `eig_interval` (the printed interval for the EIG at `best`; its attribute
#'   `source` says whether from the new evaluation or the smooth), `evaluations` (designs,
#'   estimates, standard errors, round), `smooth` (the `gam`), `grid` (the smooth and its
#'   pointwise band on a fine grid), `final` (the `nce_eig` at `best`), `time`.
#' @section What it refuses:
#' * `lower`/`upper` not named finite vectors with the same 1 or 2 names and lower < upper;
#'   `n_initial` not a whole number >= 4 (1-D) or >= 9 (2-D), `n_refine` not in 1..100,
#'   `rounds` not in 0..10, `estimator` not one of the choices, `level` not strictly
#'   between 0 and 1, `n_final` not 0 or a whole number >= 40 (`nce_error_input`); the
#'   arguments of [design_eig()] as it refuses them.
#' @seealso [death_model()] (an example with an exact EIG curve), [ratio_posterior()].
#' @examples
#' dm <- death_model()
#' set.seed(1)
#' # Small settings for a quick run (2 folds, no final evaluation); the defaults take longer and
#' # vary less from seed to seed. The exact optimum is t = 1.28.
#' opt <- design_optimise(dm$simulator, dm$summaries, dm$prior, lower = c(t = 0.01), upper = c(t = 4),
#'                        n = 600, n_initial = 5, n_refine = 2, rounds = 1, batch = TRUE,
#'                        n_final = 0, folds = 2)
#' opt
#' @export
design_optimise <- function(simulator, summaries, prior, lower, upper, n = 1000L, batch = FALSE,
                            n_initial = NULL, n_refine = NULL, rounds = NULL,
                            estimator = eig_estimators, level = 0.95, n_final = n,
                            formula = NULL, n_shuffle = 5L, held_out = NULL, n_marginal = 10L, folds = 5L) {
  rng <- rng_state()
  call <- match.call()
  ucall <- sys.call()
  check_simulator(simulator, summaries, prior, ucall)
  lower <- check_design_vector(lower, "lower", ucall)
  upper <- check_design_vector(upper, "upper", ucall)
  if (length(lower) > 2L || !identical(sort(names(lower)), sort(names(upper))) || length(upper) != length(lower)) {
    nce_abort("`lower` and `upper` must name the same one or two design variables.", "input", call = ucall)
  }
  upper <- upper[names(lower)]
  if (any(lower >= upper)) {
    nce_abort(sprintf("`lower` must be below `upper` for every design variable (%s).",
                      paste(names(lower)[lower >= upper], collapse = ", ")), "input", call = ucall)
  }
  dim_d <- length(lower)
  if (is.null(n_initial)) n_initial <- if (dim_d == 1L) 9L else 25L
  if (is.null(n_refine)) n_refine <- if (dim_d == 1L) 4L else 9L
  if (is.null(rounds)) rounds <- if (dim_d == 1L) 3L else 2L
  check_count(n_initial, min = if (dim_d == 1L) 4 else 9, max = 1000)
  check_count(n_refine, max = 100)
  check_count(rounds, min = 0, max = 10)
  estimator <- check_choice(estimator, eig_estimators, "estimator", ucall)
  check_probability(level)
  check_count(n_final, min = 0)
  if (n_final > 0 && n_final < 40) check_fail("0 or a whole number >= 40", n_final, "n_final", ucall)
  holdout_used <- check_eig_sizes(n, batch, n_shuffle, held_out, n_marginal, folds, ucall)
  if (!is.null(formula) && (!inherits(formula, "formula") || length(formula) != 2L)) {
    check_fail("a one-sided formula such as ~ te(theta, s)", formula, "formula", ucall)
  }
  n_designs <- n_initial + rounds * n_refine
  check_size(8 * max(n, n_final) * (length(prior$names) + 22) * (1 + n_shuffle + n_marginal), "n",
             "the simulations", call = ucall)
  t0 <- proc.time()[["elapsed"]]
  evaluate <- function(designs, round) {
    rows <- lapply(seq_len(nrow(designs)), function(i) {
      d <- stats::setNames(designs[i, ], names(lower))
      e <- eig_at_design(simulator, summaries, prior, d, n, batch, formula, n_shuffle, holdout_used, n_marginal, ucall,
                         folds = as.integer(folds), keep_ratio = FALSE)
      est <- e$estimates
      cols <- c(stats::setNames(as.list(est$estimate), est$estimator),
                stats::setNames(as.list(est$std.error), paste0(est$estimator, "_se")),
                stats::setNames(as.list(est$mc.error), paste0(est$estimator, "_mc")))
      data.frame(as.list(d), cols, round = round, check.names = FALSE)
    })
    do.call(rbind, rows)
  }
  evals <- evaluate(initial_designs(lower, upper, n_initial), 0L)
  sm <- fit_eig_smooth(evals, names(lower), estimator, ucall)
  for (r in seq_len(rounds)) {
    best <- smooth_argmax(sm, lower, upper)
    evals <- rbind(evals, evaluate(refine_designs(best, lower, upper, n_refine, r), r))
    sm <- fit_eig_smooth(evals, names(lower), estimator, ucall)
  }
  grid <- design_grid(lower, upper)
  pr <- smooth_predict(sm, grid)
  z <- stats::qnorm(1 - (1 - level) / 2)
  grid$fit <- as.double(pr$fit)
  grid$se.fit <- as.double(pr$se.fit)
  grid$lower <- grid$fit - z * grid$se.fit
  grid$upper <- grid$fit + z * grid$se.fit
  best <- unlist(grid[which.max(grid$fit), names(lower), drop = FALSE])
  draws <- argmax_draws(sm, grid[names(lower)], 1000L)
  a <- (1 - level) / 2
  band <- t(vapply(names(lower), function(v) stats::quantile(draws[, v], c(a, 1 - a), names = FALSE), numeric(2)))
  colnames(band) <- sprintf("%s %%", format(100 * c(a, 1 - a), trim = TRUE))
  eig_best <- c(estimate = grid$fit[which.max(grid$fit)], std.error = grid$se.fit[which.max(grid$fit)])
  final <- NULL
  if (n_final > 0) {
    final <- eig_at_design(simulator, summaries, prior, best, n_final, batch, formula, n_shuffle, holdout_used,
                           n_marginal, ucall, folds = as.integer(folds))
  }
  structure(list(call = call, rng_state = rng,
                 best = best, band = band, eig = eig_best,
                 eig_interval = eig_interval(final, estimator, eig_best, level), level = level, estimator = estimator,
                 evaluations = evals, smooth = sm, grid = grid, argmax_draws = draws, final = final,
                 lower = lower, upper = upper, prior = prior, n = n, n_designs = nrow(evals),
                 smooth_weight_scale = sm$nce_weight_scale,
                 args = list(simulator = simulator, summaries = summaries, prior = prior, lower = lower,
                             upper = upper, n = n, batch = batch, n_initial = n_initial, n_refine = n_refine,
                             rounds = rounds, estimator = estimator, level = level, n_final = n_final,
                             formula = formula, n_shuffle = n_shuffle, held_out = held_out,
                             n_marginal = n_marginal, folds = folds),
                 time = proc.time()[["elapsed"]] - t0),
            class = c("nce_design", "nce_result"))
}

# The interval for the EIG at the chosen design: from the new evaluation there when there is one
# (independent of the choice, so free of the maximum's selection bias; Student's t on its
# standard error, the classifier's error included), else from the smooth.
eig_interval <- function(final, estimator, eig_best, level) {
  if (!is.null(final)) return(structure(confint(final, estimator, level = level)[1L, ], source = "new evaluation"))
  z <- stats::qnorm(1 - (1 - level) / 2)
  structure(unname(eig_best[["estimate"]] + c(-z, z) * eig_best[["std.error"]]), source = "smooth")
}

initial_designs <- function(lower, upper, n_initial) {
  if (length(lower) == 1L) {
    return(matrix(seq(lower, upper, length.out = n_initial), ncol = 1L, dimnames = list(NULL, names(lower))))
  }
  k <- ceiling(sqrt(n_initial))
  pts <- lapply(seq_along(lower), function(j) seq(lower[j], upper[j], length.out = k))
  names(pts) <- names(lower)
  as.matrix(expand.grid(pts, KEEP.OUT.ATTRS = FALSE))
}

# New designs around the smooth's maximum: a window of a quarter of the range in round 1,
# halved each round, moved inside the box.
refine_designs <- function(best, lower, upper, n_refine, round) {
  half <- (upper - lower) / 8 / 2^(round - 1)
  lo <- pmax(lower, pmin(best - half, upper - 2 * half))
  hi <- pmin(upper, lo + 2 * half)
  if (length(lower) == 1L) {
    pts <- if (n_refine == 1L) best else seq(lo, hi, length.out = n_refine)
    return(matrix(pts, ncol = 1L, dimnames = list(NULL, names(lower))))
  }
  k <- max(1L, floor(sqrt(n_refine)))
  pts <- lapply(seq_along(lower), function(j) if (k == 1L) best[j] else seq(lo[j], hi[j], length.out = k))
  names(pts) <- names(lower)
  g <- as.matrix(expand.grid(pts, KEEP.OUT.ATTRS = FALSE))
  extra <- n_refine - nrow(g)
  if (extra > 0L) {
    g <- rbind(g, matrix(stats::runif(extra * 2L, rep(lo, each = extra), rep(hi, each = extra)), extra, 2L,
                         dimnames = list(NULL, names(lower))))
  }
  g
}

design_grid <- function(lower, upper) {
  k <- if (length(lower) == 1L) 401L else 61L
  pts <- lapply(seq_along(lower), function(j) seq(lower[j], upper[j], length.out = k))
  names(pts) <- names(lower)
  expand.grid(pts, KEEP.OUT.ATTRS = FALSE)
}

fit_eig_smooth <- function(evals, vars, estimator, call) {
  y <- evals[[estimator]]
  # Weights from the Monte Carlo errors: the classifier's share of the standard errors rests on
  # few degrees of freedom per design, and the smooth's residual variance absorbs it.
  se <- evals[[paste0(estimator, "_mc")]]
  if (is.null(se)) se <- evals[[paste0(estimator, "_se")]]
  ok <- is.finite(y) & is.finite(se)
  dat <- evals[ok, , drop = FALSE]
  dat$.y <- y[ok]
  v <- pmax(se[ok]^2, stats::median(se[ok]^2) / 10, 1e-12)
  dat$.w <- (1 / v) / mean(1 / v)
  # The smooth's residual variance at a design is sig2 / w = sig2 mean(1 / v) v: sig2 mean(1 / v)
  # is the ratio of residual to Monte Carlo variance.
  n_unique <- nrow(unique(dat[vars]))
  if (n_unique < 4L) {
    nce_abort(sprintf("only %d designs gave finite EIG estimates: at least 4 are needed for the smooth.", n_unique),
              "simulation", call = call)
  }
  # One design variable: an adaptive smooth (mgcv's bs = "ad": the wiggliness penalty itself
  # varies along the design), as an EIG curve typically rises steeply from an uninformative
  # design and then lies flat about its maximum; with one penalty the smooth either chases the
  # classifier's design-to-design bias on the flat top or flattens the rise (bench/README.md).
  k1 <- min(10L, n_unique - 1L)
  f <- if (length(vars) == 1L && k1 >= 8L) {
    sprintf(".y ~ s(%s, bs = \"ad\", k = %d)", vars, k1)
  } else if (length(vars) == 1L) {
    sprintf(".y ~ s(%s, k = %d)", vars, k1)
  } else {
    sprintf(".y ~ s(%s, %s, k = %d)", vars[1], vars[2], min(30L, n_unique - 1L))
  }
  sm <- mgcv::gam(stats::as.formula(f), data = dat, weights = dat$.w, method = "REML")
  sm$nce_weight_scale <- mean(1 / v)
  # The residual variance is never below the estimates' Monte Carlo variance; with few designs
  # REML can put it far below (a band for t of width 0.01 on 7 designs, issue #74). The fit stays
  # (fixing the scale instead oversmooths to a line), its covariance is scaled up to that floor.
  sm$nce_inflate <- max(1, 1 / (sm$sig2 * sm$nce_weight_scale))
  sm
}

smooth_vcov <- function(sm) (if (is.null(sm$Vc)) sm$Vp else sm$Vc) * (sm$nce_inflate %||% 1)

# The smooth and its standard errors at `newdata`, from smooth_vcov().
smooth_predict <- function(sm, newdata) {
  # mgcv's basis refuses 0 rows: an empty prediction is empty.
  if (!nrow(newdata)) return(list(fit = numeric(), se.fit = numeric()))
  x <- stats::predict(sm, newdata = newdata, type = "lpmatrix")
  list(fit = as.double(x %*% stats::coef(sm)), se.fit = sqrt(pmax(rowSums((x %*% smooth_vcov(sm)) * x), 0)))
}

smooth_argmax <- function(sm, lower, upper) {
  grid <- design_grid(lower, upper)
  f <- stats::predict(sm, newdata = grid)
  unlist(grid[which.max(f), , drop = FALSE])
}

# Maximisers of draws from the smooth's Bayesian posterior (coefficients ~ N(beta, Vc): the
# covariance corrected for the smoothing parameters' uncertainty, which a flat top leaves large),
# each draw's deviation scaled by a draw of the residual scale from its chi-square on the residual
# degrees of freedom (few with few designs: 2 on 7 designs, where the normal draws held the
# optimum for 16 of 20 seeds and these for 20; bench/README.md).
argmax_draws <- function(sm, grid, n_draws) {
  x <- stats::predict(sm, newdata = grid, type = "lpmatrix")
  b <- mgcv::rmvn(n_draws, stats::coef(sm), smooth_vcov(sm))
  df_res <- max(1, length(sm$y) - sum(sm$edf))
  f <- sqrt(df_res / stats::rchisq(n_draws, df_res))
  b <- sweep(sweep(b, 2L, stats::coef(sm)) * f, 2L, stats::coef(sm), "+")
  f <- x %*% t(b)
  i <- apply(f, 2L, which.max)
  as.matrix(grid[i, , drop = FALSE])
}

#' The death model of Kleinegesse and Gutmann (2019), with its exact EIG
#'
#' `death_model()` returns the simulator, summaries and prior of the death model: `N`
#' individuals, each dead by time t with probability 1 - exp(-b t), so the number dead is
#' \eqn{y \sim \mathrm{Binomial}(N, 1 - e^{-b t})}{y ~ Binomial(N, 1 - exp(-b t))}, with the
#' prior b ~ N(mean, sd) truncated to b > 0 and the design t (the measurement time; the
#' papers take t in \[0.01, 4\]). With `groups = 2`, two independent groups of `N` are
#' measured, at t1 and t2 (a two-dimensional design).
#'
#' `death_model_eig()` computes the exact expected information gain (the mutual information
#' between b and y at t) by quadrature: composite Simpson in \eqn{u = \sqrt b}{u = sqrt(b)} over
#' b in \[0, mean + 12 sd\] with `nodes` points (agreeing with adaptive quadrature to about
#' 1e-8), and exact summation over y. `death_model_jsd()` does the same for the
#' Jensen-Shannon divergence between p(b, y | t) and p(b) p(y | t), which the `jsd` bound of
#' [design_eig()] estimates from below. Values are in nats.
#'
#' @param n_individuals N, the group size.
#' @param prior_mean,prior_sd The prior's normal mean and sd before truncation to b > 0.
#' @param groups 1 (design `t`) or 2 (designs `t1`, `t2`).
#' @param t Measurement times: a vector (one group), or a two-column matrix (two groups).
#' @param nodes Quadrature points over b (odd).
#' @param observed Optional earlier counts of other groups (a data frame with columns `t` and
#'   `dead`): the EIG is then that of a new group under the posterior given them (the second
#'   step of a sequential design).
#' @return `death_model()`: a list with `simulator` (batch form, `function(theta, n, design)`),
#'   `summaries` (the count `dead`, or `dead1`, `dead2`), `prior` (an `nce_prior` on `b`),
#'   `lower`, `upper` (the design box), `eig` (the exact EIG as a function of the design).
#'   `death_model_eig()`, `death_model_jsd()`: one value per time (or row of `t`).
#' @section What it refuses:
#' * `n_individuals` not a whole number in 1..10000, `prior_mean` not finite, `prior_sd` not
#'   above 0, `groups` not 1 or 2, `nodes` not an odd whole number in 101..100001 (`nce_error_input`);
#' * `t` not finite and > 0, or a matrix without two columns; `observed` not a data frame of
#'   times > 0 and counts in 0..N (`nce_error_input`).
#' @references Kleinegesse, S. and Gutmann, M. U. (2019). Efficient Bayesian experimental
#'   design for implicit models. AISTATS.
#' @examples
#' death_model_eig(c(0.5, 1, 1.5, 3))
#' dm <- death_model()
#' dm$simulator(cbind(b = c(0.5, 2)), 2, c(t = 1))
#' @export
death_model <- function(n_individuals = 50L, prior_mean = 1, prior_sd = 1, groups = 1L) {
  check_count(n_individuals, max = 1e4)
  check_number(prior_mean)
  check_number(prior_sd, min = 0, exclusive_min = TRUE)
  check_count(groups, max = 2)
  n_ind <- as.integer(n_individuals)
  p0 <- stats::pnorm(0, prior_mean, prior_sd)
  prior <- prior_custom(
    sample = function(n) {
      u <- stats::runif(n, p0, 1)
      cbind(b = pmax(stats::qnorm(u, prior_mean, prior_sd), .Machine$double.xmin))
    },
    log_density = function(theta) {
      b <- theta[, "b"]
      ifelse(b > 0, stats::dnorm(b, prior_mean, prior_sd, log = TRUE) - stats::pnorm(0, prior_mean, prior_sd,
                                                                                      lower.tail = FALSE, log.p = TRUE),
             -Inf)
    },
    names = "b", lower = 0, upper = Inf
  )
  if (groups == 1L) {
    simulator <- function(theta, n, design) {
      cbind(dead = stats::rbinom(n, n_ind, 1 - exp(-theta[, "b"] * design[["t"]])))
    }
    lower <- c(t = 0.01)
    upper <- c(t = 4)
    eig <- function(design) death_model_eig(design, n_ind, prior_mean, prior_sd)
  } else {
    simulator <- function(theta, n, design) {
      cbind(dead1 = stats::rbinom(n, n_ind, 1 - exp(-theta[, "b"] * design[["t1"]])),
            dead2 = stats::rbinom(n, n_ind, 1 - exp(-theta[, "b"] * design[["t2"]])))
    }
    lower <- c(t1 = 0.01, t2 = 0.01)
    upper <- c(t1 = 4, t2 = 4)
    eig <- function(design) death_model_eig(matrix(design, ncol = 2L), n_ind, prior_mean, prior_sd)
  }
  list(simulator = simulator, summaries = function(x) x, prior = prior, lower = lower, upper = upper, eig = eig,
       n_individuals = n_ind, prior_mean = prior_mean, prior_sd = prior_sd, groups = groups)
}

#' @rdname death_model
#' @export
death_model_eig <- function(t, n_individuals = 50L, prior_mean = 1, prior_sd = 1, nodes = 2001L, observed = NULL) {
  death_quadrature(t, n_individuals, prior_mean, prior_sd, nodes, "eig", sys.call(), observed)
}

#' @rdname death_model
#' @export
death_model_jsd <- function(t, n_individuals = 50L, prior_mean = 1, prior_sd = 1, nodes = 2001L, observed = NULL) {
  death_quadrature(t, n_individuals, prior_mean, prior_sd, nodes, "jsd", sys.call(), observed)
}

death_quadrature <- function(t, n_individuals, prior_mean, prior_sd, nodes, what, call, observed = NULL) {
  check_count(n_individuals, max = 1e4, call = call)
  check_number(prior_mean, call = call)
  check_number(prior_sd, min = 0, exclusive_min = TRUE, call = call)
  check_count(nodes, min = 101, max = 100001, call = call)
  if (nodes %% 2 == 0) check_fail("an odd whole number (Simpson's rule)", nodes, "nodes", call)
  if (is.data.frame(t)) t <- as.matrix(t)
  if (!is.numeric(t) || length(t) < 1L || any(!is.finite(t)) || any(t <= 0)) {
    check_fail("finite measurement times > 0", t, "t", call)
  }
  if (is.matrix(t) && ncol(t) > 2L) check_fail("a vector or a matrix of two columns", t, "t", call)
  t <- if (is.matrix(t)) t else matrix(t, ncol = 1L)
  nb <- as.integer(nodes)
  # Simpson's rule in u = sqrt(b): p log p behaves like b log b near b = 0, which is not smooth
  # in b (Simpson in b converges slowly, about 4e-5 off at 2001 points) but is in u.
  u <- seq(0, sqrt(max(prior_mean, 0) + 12 * prior_sd), length.out = nb)
  b <- u^2
  w <- rep(c(2, 4), length.out = nb)
  w[c(1L, nb)] <- 1
  w <- w * (u[2L] - u[1L]) / 3 * 2 * u
  pw <- w * stats::dnorm(b, prior_mean, prior_sd) / stats::pnorm(0, prior_mean, prior_sd, lower.tail = FALSE)
  if (!is.null(observed)) {
    # Earlier counts of other groups: the prior becomes the posterior given them.
    if (!is.data.frame(observed) || !all(c("t", "dead") %in% names(observed)) || nrow(observed) < 1L ||
        any(!is.finite(observed$t)) || any(observed$t <= 0) || any(!is.finite(observed$dead)) ||
        any(observed$dead < 0) || any(observed$dead > n_individuals) || any(observed$dead != round(observed$dead))) {
      check_fail("a data frame of earlier counts with columns t (> 0) and dead (0..N)", observed, "observed", call)
    }
    for (i in seq_len(nrow(observed))) {
      pw <- pw * stats::dbinom(observed$dead[i], n_individuals, 1 - exp(-b * observed$t[i]))
    }
  }
  # The node b = 0 has weight 0 (the Jacobian 2u): dropping it keeps every log probability finite.
  keep <- b > 0
  b <- b[keep]
  pw <- pw[keep] / sum(pw[keep])
  y <- 0:n_individuals
  # log p(y | b) = log choose(N, y) + y log(1 - e^(-bt)) - (N - y) b t, finite for every b > 0.
  loglik <- function(ti) {
    lchoose(n_individuals, y) + outer(y, log(-expm1(-b * ti))) - outer(n_individuals - y, b * ti)
  }
  apply(t, 1L, function(tt) {
    ll1 <- loglik(tt[1L])
    l1 <- exp(ll1)
    if (what == "eig") {
      # EIG = H(y) - E_b H(y | b); with two groups, y = (y1, y2) independent given b, so
      # p(y1, y2) = L1 diag(w) L2' and H(y | b) = H(y1 | b) + H(y2 | b).
      h_cond <- -colSums(l1 * ll1)
      if (length(tt) == 1L) {
        py <- as.vector(l1 %*% pw)
      } else {
        ll2 <- loglik(tt[2L])
        l2 <- exp(ll2)
        h_cond <- h_cond - colSums(l2 * ll2)
        py <- l1 %*% (pw * t(l2))
      }
      return(-sum(ifelse(py > 0, py * log(py), 0)) - sum(pw * h_cond))
    }
    py_b <- l1
    lpy_b <- ll1
    if (length(tt) == 2L) {
      ll2 <- loglik(tt[2L])
      lpy_b <- do.call(rbind, lapply(y + 1L, function(i) sweep(ll2, 2L, ll1[i, ], "+")))
      py_b <- exp(lpy_b)
    }
    py <- as.vector(py_b %*% pw)
    lm <- log((py_b + py) / 2)
    r <- (py_b * (lpy_b - lm) + py * (log(py) - lm)) / 2
    r[!is.finite(r)] <- 0  # both probabilities underflow to 0: no contribution
    sum(colSums(r) * pw)
  })
}

#' A prior from a posterior, for sequential design
#'
#' Turns weighted posterior draws ([ratio_posterior()] output) into an `nce_prior`: a Gaussian
#' kernel density estimate over (a weighted resample of) the draws, restricted to the support of
#' the prior the posterior came from. After observing data at a first design, this prior serves
#' [design_optimise()] to choose the next design, as in sequential design by ratio estimation
#' (Kleinegesse, Drovandi and Gutmann 2020). It assumes the next experiment's data are
#' independent of the earlier data given the parameters (a new group, a new subject).
#'
#' @param object An `nce_ratio_posterior` from [ratio_posterior()] (argument names:
#'   [nce_vocabulary]).
#' @param n_points Draws kept (a weighted resample) as kernel centres.
#' @param bandwidth Kernel sd per parameter; by default Silverman's rule on the kept draws.
#' @return An `nce_prior` (kind `"posterior"`).
#' @section What it refuses:
#' * `object` not an `nce_ratio_posterior` (or one without its prior), `n_points` not a
#'   whole number in 10..100000, `bandwidth` not one positive number per parameter
#'   (`nce_error_input`).
#' @references Kleinegesse, S., Drovandi, C. and Gutmann, M. U. (2020). Sequential Bayesian
#'   experimental design for implicit models via mutual information. Bayesian Analysis.
#' @examples
#' dm <- death_model()
#' set.seed(1)
#' e <- design_eig(dm$simulator, dm$summaries, dm$prior, design = c(t = 1), n = 600, batch = TRUE)
#' post <- ratio_posterior(e, matrix(20, 1, dimnames = list(NULL, "dead")), n_draws = 4000)
#' pr2 <- prior_from_posterior(post)
#' colMeans(pr2$sample(2000))
#' @export
prior_from_posterior <- function(object, n_points = 1000L, bandwidth = NULL) {
  if (!inherits(object, "nce_ratio_posterior") || is.null(object$prior)) {
    check_fail("an nce_ratio_posterior from ratio_posterior()", object, "object", sys.call())
  }
  check_count(n_points, min = 10, max = 1e5)
  base <- object$prior
  nms <- base$names
  d <- length(nms)
  keep <- sample.int(nrow(object$draws), n_points, replace = TRUE, prob = object$weights)
  centres <- object$draws[keep, nms, drop = FALSE]
  if (is.null(bandwidth)) {
    sds <- apply(centres, 2L, stats::sd)
    sds[!(sds > 0)] <- 1e-6 * pmax(1, abs(colMeans(centres)))[!(sds > 0)]
    bandwidth <- sds * (4 / ((d + 2) * n_points))^(1 / (d + 4))
  }
  if (!is.numeric(bandwidth) || length(bandwidth) != d || any(!is.finite(bandwidth)) || any(bandwidth <= 0)) {
    check_fail(sprintf("%d positive numbers, one per parameter", d), bandwidth, "bandwidth", sys.call())
  }
  bandwidth <- stats::setNames(as.double(bandwidth), nms)
  inside <- function(th) is.finite(base$log_density(th))
  new_prior(
    names = nms, lower = base$lower, upper = base$upper, kind = "posterior",
    sample = function(n) {
      out <- matrix(NA_real_, 0L, d, dimnames = list(NULL, nms))
      for (pass in 1:50) {
        m <- 2L * (n - nrow(out)) + 10L
        th <- centres[sample.int(n_points, m, replace = TRUE), , drop = FALSE] +
          matrix(stats::rnorm(m * d), m, d) * rep(bandwidth, each = m)
        out <- rbind(out, th[inside(th), , drop = FALSE])
        if (nrow(out) >= n) break
      }
      if (nrow(out) < n) nce_abort("the posterior prior's kernels fall outside the support of the prior.", "input")
      out[seq_len(n), , drop = FALSE]
    },
    log_density = function(theta) {
      theta <- as_theta_matrix(theta, nms)
      lk <- vapply(seq_len(nrow(theta)), function(i) {
        z <- sweep(centres, 2L, theta[i, ]) / rep(bandwidth, each = n_points)
        log_mean_exp(-0.5 * rowSums(z^2))
      }, 1) - sum(log(bandwidth)) - d / 2 * log(2 * pi)
      ifelse(inside(theta), lk, -Inf)
    }
  )
}

# The simulation and classifier sizes of design_eig() and design_optimise(): at least 20 pairs
# to train and 20 to test in each fold (or the single split).
# Returns the fraction held out with folds = 1: `held_out`, 0.5 by default.
check_eig_sizes <- function(n, batch, n_shuffle, held_out, n_marginal, folds, call) {
  check_count(n, min = 40, call = call)
  check_bool(batch, call = call)
  check_count(n_shuffle, max = 100, call = call)
  if (!is.null(held_out)) check_probability(held_out, call = call)
  check_count(n_marginal, max = 1000, call = call)
  check_count(folds, max = 20, call = call)
  # Cross-fitting holds out each fold in turn (1 / folds of the pairs): a `held_out` beside it would
  # be ignored, so it is refused rather than silently dropped.
  if (!is.null(held_out) && folds > 1L) {
    nce_abort(sprintf(paste("`held_out` applies to a single split (`folds = 1`) only: with `folds` = %d each fold",
                            "holds out 1/%d of the pairs in turn. Drop `held_out`, or set `folds = 1`"),
                      as.integer(folds), as.integer(folds)), "input", call = call)
  }
  held_out <- held_out %||% 0.5
  n_test <- if (folds == 1L) round(held_out * n) else floor(n / folds)
  if (n_test < 20L || n - n_test < 20L) {
    what <- if (folds == 1L) sprintf("`held_out` = %s", format(held_out)) else
      sprintf("`folds` = %d", as.integer(folds))
    nce_abort(sprintf("%s leaves %d pairs to train and %d to test: each needs at least 20.",
                      what, n - n_test, n_test), "input", call = call)
  }
  held_out
}
