# Amortised ratio estimation (Hermans, Begy and Louppe 2020): one classifier between joint
# pairs (theta, s(x)), x simulated at theta ~ prior, and pairs with theta shuffled (drawn
# from the product of marginals). Its logit estimates log p(s | theta) / p(s) for every theta
# and s, so one fit serves any observed data set. The classifier is a GAM (smooth and
# tensor-product terms) fitted by the package's REML engine in Rust, or a neural network
# trained in Rust (R/nce-mlp.R) where the GAM would need many terms.

#' Amortised ratio estimation for simulator models
#'
#' Simulates `n` pairs (theta, s) with theta from the prior and fits a classifier between these
#' joint pairs and `n_shuffle` x `n` pairs whose theta are shuffled among the simulations: a
#' penalised logistic regression (a GAM whose smoothing parameters are chosen by REML) for few
#' parameters and summaries, a neural network for more (see `classifier`). The
#' logit estimates \eqn{\log p(s \mid \theta) / p(s)} for all theta and s; [ratio_posterior()]
#' turns it into a posterior for an observed data set without new simulations.
#'
#' @inheritParams lfire
#' @param n Number of joint simulations. The default, 10,000, was chosen on the simulator
#'   vignette's ARCH(1) model: posterior sds within 1.2 times exact for 28 of 30 data sets
#'   (`bench/README.md`).
#' @param formula The classifier's right-hand side in the parameter and summary names
#'   (e.g. `~ s(mu) + s(m) + ti(mu, m)`); by default, a smooth of each parameter and each
#'   summary plus a tensor-product interaction `ti(theta_j, s_k, k = 4)` of every pair.
#' @param n_shuffle Shuffled pairs per joint pair: by default 1 for the GAM and 5 for the network
#'   (shuffled pairs cost no simulations; on ARCH(1) 5 narrowed the network's posteriors towards
#'   exact, `bench/README.md`).
#' @param simulations Cached joint simulations ([simulate_summaries()] output at prior
#'   draws, one simulation per draw) to reuse.
#' @param discrete `TRUE` to fit the classifier on discretised covariates, as
#'   `mgcv::bam(discrete = TRUE)` does (see `discrete` in [nce()]): each smooth's parameters and
#'   summaries are rounded to a grid of 2000 (one covariate), 100 (two) or 25 (three or more)
#'   values over their range and the model matrix is held compressed, so large simulation sets
#'   fit in a fraction of the time. The log ratio then differs from the exact fit's by the
#'   effect of that rounding; with 10 or more smoothing parameters the classifier is fitted
#'   exactly (`fit$gam$discrete_layout` is `"exact"`; see `discrete` in [nce()]). Terms in three
#'   or more covariates are rounded to 25 values per covariate, which is coarse: prefer the exact
#'   fit for them. Timings against the exact fit: `bench/README.md`.
#' @param simulator,batch The simulator model; see [simulate_summaries()].
#' @param summaries A function of the simulator's output returning a matrix of summaries with
#'   named columns, or `NULL`: the simulator's output itself (its columns named `x1`, `x2`, ...
#'   where unnamed), for the network classifier to read directly or through an `embedding`.
#' @param classifier `"auto"` (default), `"gam"` (the GAM of `formula`) or `"mlp"`: a neural
#'   network trained in Rust (neural ratio estimation; see `loss`, `embedding`, `hidden`,
#'   `n_networks`, [nce_ratio_control()]). The network reads each simulation once and contrasts
#'   its joint pair with the parameters of `n_shuffle` other simulations of its minibatch, drawn
#'   afresh every epoch. Parameters are standardised, summaries read directly are mapped to
#'   normal scores by the joint simulations' quantiles (a monotone map, continued linearly
#'   beyond them), so heavy-tailed summaries do not dominate.
#'
#'   `"auto"` takes the GAM when `formula` or `discrete` is given and the network otherwise: a
#'   GAM's additive smooth and tensor-product terms cannot represent every joint density, where
#'   the network's posteriors were as close to exact or closer (`bench/README.md`). The GAM keeps
#'   the methods a network lacks (standard errors, `coef()`, `anova()`). The fit says which it
#'   took (`$classifier`).
#' @param loss With the network: `"nrec"` (default), the contrastive loss of NRE-C (Miller,
#'   Weniger and Forré 2022; the multinomial logistic loss of the source text, with `n_shuffle`
#'   + 1 classes and gamma = 1); `"nre"`, the binary loss with the contrasting pairs weighted
#'   as one class; or `"bnre"`, the binary loss with the balance penalty of Delaunoy et al.
#'   (2022, lambda = 100), which errs towards wider posteriors. Each loss's optimum is the exact
#'   log ratio. Chosen on sbibm's two moons (see `bench/README.md`).
#' @param embedding With the network: `NULL` (the summaries go to the classifier as they are) or
#'   an embedding network trained with the classifier ([embed_dense()], [embed_set()],
#'   [embed_series()]) that reads the data columns it names; learned summaries.
#' @param n_networks With the network: how many networks are trained on the same simulations,
#'   each from its own random start and held-out simulations; the log ratio is their mean logit
#'   (an ensemble). By default 5. Averaging cuts the part of the error that the training's chance
#'   sets, not the part the simulations set (which the networks share). The networks train side by
#'   side, one per thread, and do not depend on the thread count. Their spread is not an error bar
#'   for the posterior; [ratio_coverage()] checks whether the posteriors are as wide as they
#'   should be.
#' @param hidden With the network: units of each hidden layer of the classifier. The default,
#'   two layers of 128, was chosen on sbibm's two moons (`bench/README.md`).
#' @param control With the network: [nce_ratio_control()] or a list of some of its arguments.
#' @return An object of class `nce_ratio` (see [nce_ratio_methods]): `prior`, `parameters`,
#'   `summary_names`, `simulations`, `classifier` (`"gam"` or `"mlp"`), `time`. With the GAM,
#'   class `c("nce_ratio_gam", "nce_ratio", "nce_result")` holding the classifier (`gam`, a
#'   mgcv-compatible fit), `formula` and `discrete`; with the network,
#'   `c("nce_ratio_mlp", "nce_ratio", "nce_result")` holding `networks` and `training` (one
#'   entry per network), `n_networks`, `loss`, `embedding`, `scaling` (the inputs'
#'   standardisation) and `pairs` (the joint pairs and one shuffle of them).
#' @section What it refuses:
#' * `embedding` not from [embed_dense()], [embed_set()] or [embed_series()], or reading columns
#'   the summaries lack or that do not make whole items and windows; `loss` not one of the
#'   choices; a training beyond the work bound of [nce_ratio_control()] (`nce_error_input`);
#' * `simulator` or `summaries` not a function (or `NULL`), `prior` not an `nce_prior`, `n` not a whole
#'   number >= 10, `n_shuffle` not in 1..100, `batch` not TRUE/FALSE, `formula` not
#'   one-sided, `simulations` not from [simulate_summaries()] or lacking the prior's
#'   parameters (`nce_error_input`);
#' * `discrete` not TRUE/FALSE, or `TRUE` with a formula without smooth terms (`nce_error_input`);
#' * `n_networks` not a whole number in 1..100, or given with `formula`, `discrete` or
#'   `classifier = "gam"` (`nce_error_input`);
#' * summary names that clash with parameter names or `y`, or parameter or summary names
#'   that are not syntactic (they become formula terms) (`nce_error_input`);
#' * simulations that would not fit in memory (`nce_error_size`, checked before simulating);
#'   fewer than 10 successful simulations (`nce_error_simulation`); a classifier fit that
#'   fails keeps its engine error's class.
#' @references Hermans, J., Begy, V. and Louppe, G. (2020). Likelihood-free MCMC with
#'   amortized approximate ratio estimators. ICML.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' pr <- prior_uniform(mu = c(-2, 2))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, pr, n = 1000, batch = TRUE, formula = ~ te(mu, m, k = 5))
#' post <- ratio_posterior(r, matrix(rnorm(20, 0.5), 1), n_draws = 2000)
#' summary(post)
#' @export
ratio_amortised <- function(simulator, summaries, prior, n = 10000L, formula = NULL, batch = FALSE, n_shuffle = NULL,
                            simulations = NULL, discrete = FALSE, classifier = c("auto", "gam", "mlp"),
                            hidden = c(128, 128), control = NULL, n_networks = NULL, embedding = NULL,
                            loss = c("nrec", "nre", "bnre")) {
  rng <- rng_state()
  call <- match.call()
  ucall <- sys.call()
  net_given <- !missing(hidden) || !missing(loss)
  if (is.null(summaries)) summaries <- raw_summaries
  check_simulator(simulator, summaries, prior, ucall)
  if (!is.null(embedding) && !inherits(embedding, "nce_embedding")) {
    check_fail("NULL or an embedding (embed_dense(), embed_set(), embed_series())", embedding, "embedding", ucall)
  }
  loss <- check_choice(loss, ratio_losses, "loss", ucall)
  check_count(n, min = 10)
  check_bool(batch)
  check_bool(discrete)
  classifier <- check_choice(classifier, c("auto", "gam", "mlp"), "classifier", ucall)
  if (!is.null(n_shuffle)) check_count(n_shuffle, max = 100)
  if (!is.null(n_networks)) check_count(n_networks, max = 100)
  gam_args <- !is.null(formula) || discrete
  mlp_args <- net_given || !is.null(control) || !is.null(n_networks) || !is.null(embedding)
  if (gam_args && (classifier == "mlp" || (classifier == "auto" && mlp_args))) {
    nce_abort(paste("`formula` and `discrete` set up the GAM classifier, `hidden`, `control`, `n_networks`,",
                    "`embedding` and `loss` the network: give the one set that goes with `classifier`"),
              "input", call = ucall)
  }
  if (classifier == "gam" && mlp_args) {
    nce_abort(paste("`hidden`, `control`, `n_networks`, `embedding` and `loss` set up the network; they apply only",
                    "with classifier = \"mlp\""), "input", call = ucall)
  }
  if (classifier != "gam") {
    spec <- mlp_spec("x", hidden = hidden)
    control <- merge_control(control, nce_ratio_control, call = ucall)
  }
  t_sim <- 0
  if (is.null(simulations)) {
    th <- as_theta_matrix(prior$sample(n), prior$names, call = ucall)
    simulations <- run_simulations(simulator, summaries, th, 1L, batch, 100L, call = ucall)
    t_sim <- simulations$time
  } else {
    if (!inherits(simulations, "nce_simulations")) {
      check_fail("simulations from simulate_summaries()", simulations, "simulations", ucall)
    }
    if (!all(prior$names %in% colnames(simulations$theta))) {
      nce_abort("`simulations` lack some of the prior's parameters.", "input", call = ucall)
    }
  }
  rng_fit <- list(fit = rng_now())
  th <- simulations$theta[simulations$ok, prior$names, drop = FALSE]
  s <- simulations$summaries[simulations$ok, , drop = FALSE]
  snames <- colnames(s)
  check_ratio_names(prior$names, snames, ucall)
  m <- nrow(th)
  if (m < 10L) nce_abort("fewer than 10 simulations succeeded.", "simulation", call = ucall)
  if (classifier == "auto") classifier <- if (gam_args) "gam" else "mlp"
  if (is.null(n_shuffle)) n_shuffle <- if (classifier == "mlp") 5L else 1L
  if (classifier == "mlp") {
    n_networks <- as.integer(n_networks %||% 5L)
    out <- ratio_net_fit(th, s, n_shuffle, spec, control, n_networks, embedding, loss, ucall)
    own <- c(list(formula = NULL, hidden = spec$hidden, control = control, n_networks = n_networks), out)
    cls <- c("nce_ratio_mlp", "nce_ratio", "nce_result")
  } else {
    out <- ratio_gam_fit(th, s, prior$names, formula, n_shuffle, discrete, ucall)
    own <- out[c("gam", "formula")]
    cls <- c("nce_ratio_gam", "nce_ratio", "nce_result")
  }
  structure(c(list(call = call, rng_state = rng, rng_fit = rng_fit, prior = prior, parameters = prior$names,
                   summary_names = snames, n = m, n_shuffle = n_shuffle, simulations = simulations,
                   simulator = simulator, summaries = summaries, batch = batch, discrete = discrete,
                   classifier = classifier),
              own, list(time = c(simulation = t_sim, fitting = out$time_fit))),
            class = cls)
}

# The GAM classifier (classifier = "gam"): the joint pairs against n_shuffle shuffles of theta, by
# penalised REML with `formula` (the default formula when NULL).
ratio_gam_fit <- function(th, s, pars, formula, n_shuffle, discrete, ucall) {
  snames <- colnames(s)
  m <- nrow(th)
  if (is.null(formula)) formula <- default_ratio_formula(pars, snames, cbind(th, s))
  if (!inherits(formula, "formula") || length(formula) != 2L) {
    check_fail("a one-sided formula such as ~ te(theta, s)", formula, "formula", ucall)
  }
  unknown <- setdiff(all.vars(formula), c(pars, snames))
  if (length(unknown)) {
    nce_abort(sprintf("`formula` uses %s, neither a parameter (%s) nor a summary (%s).",
                      toString(unknown), toString(pars), toString(snames)), "input", call = ucall)
  }
  big <- snames[apply(abs(s), 2L, max) > 1e150]
  if (length(big)) {
    nce_abort(sprintf(paste("the summaries %s reach magnitudes above 1e150, where the classifier's squares",
                            "overflow: rescale them in `summaries`"), paste(big, collapse = ", ")),
              "data", call = ucall)
  }
  joint <- data.frame(th, s, y = 1, check.names = FALSE)
  shuffled <- do.call(rbind, lapply(seq_len(n_shuffle), function(k) {
    data.frame(th[sample.int(m), , drop = FALSE], s, y = 0, check.names = FALSE)
  }))
  dat <- rbind(joint, shuffled)
  f <- stats::update(formula, y ~ .)
  environment(f) <- environment()
  t0 <- proc.time()[["elapsed"]]
  if (discrete && !has_smooths(f)) {
    nce_abort(paste("`discrete = TRUE` needs smooth terms (s(), te(), ti()) in `formula`: it discretises their",
                    "covariates; use discrete = FALSE"), "input", call = ucall)
  }
  g <- tryCatch(fit_penalised(f, dat, "binomial", discrete = discrete), nce_error = function(e) {
    nce_abort(paste("the classifier fit failed:", conditionMessage(e)), class(e)[1L] |> sub(pattern = "^nce_error_",
              replacement = ""), call = ucall)
  })
  t_fit <- proc.time()[["elapsed"]] - t0
  class(g) <- c("gam", "glm", "lm")
  list(gam = g, formula = formula, time_fit = t_fit)
}

# Parameter and summary names become formula terms: no clash with each other or the response
# `y`, and syntactic.
check_ratio_names <- function(pars, snames, call) {
  clash <- intersect(snames, c(pars, "y"))
  if (length(clash)) {
    nce_abort(sprintf("summary names %s clash with parameter names or `y`: rename them.",
                      paste(clash, collapse = ", ")), "input", call = call)
  }
  bad <- !grepl("^[A-Za-z.][A-Za-z0-9._]*$", c(pars, snames))
  if (any(bad)) {
    nce_abort(sprintf("names %s are not syntactic: rename parameters and summaries (letters, digits, . and _).",
                      paste(c(pars, snames)[bad], collapse = ", ")), "input", call = call)
  }
}

# A smooth of each parameter and summary (k = 5) and a ti() interaction (k = 4) of each
# pair. With `data`, basis sizes are capped by the number of distinct values (a count summary
# at an uninformative design takes only a few): 3 or 4 values give a smaller basis, 2 a
# linear term, 1 (constant) no term; interactions need 3 values on both sides.
default_ratio_formula <- function(pars, snames, data = NULL) {
  vars <- c(pars, snames)
  nu <- stats::setNames(rep(Inf, length(vars)), vars)
  if (!is.null(data)) nu[] <- vapply(vars, function(v) length(unique(data[, v])), 1)
  main_term <- function(v) {
    if (nu[[v]] >= 3) return(sprintf("s(%s, k = %d)", v, as.integer(min(5, nu[[v]]))))
    if (nu[[v]] == 2) v else NULL
  }
  main <- unlist(lapply(c(pars, snames), main_term))
  inter_term <- function(a, b) {
    m <- min(nu[[a]], nu[[b]])
    if (m >= 3) return(sprintf("ti(%s, %s, k = %d)", a, b, as.integer(min(4, m))))
    if (m == 2) sprintf("%s:%s", a, b) else NULL
  }
  inter <- unlist(lapply(pars, function(a) lapply(snames, function(b) inter_term(a, b))))
  terms <- c(main, inter)
  if (!length(terms)) terms <- "1"
  stats::as.formula(paste("~", paste(terms, collapse = " + ")))
}

# summaries = NULL: the simulator's output as it is, its columns named x1, x2, ... where unnamed.
raw_summaries <- function(x) {
  x <- as.matrix(x)
  if (is.null(colnames(x))) colnames(x) <- paste0("x", seq_len(ncol(x)))
  x
}

# Log ratio of the classifier at rows of parameters and summaries: predict() of either classifier
# (the GAM's prediction basis with the prior odds of shuffled to joint pairs taken out, or the
# networks' mean logit).
ratio_log_ratio <- function(object, theta, s) {
  stats::predict(object, data.frame(theta, s, check.names = FALSE))
}

#' Posterior draws from an amortised ratio estimator
#'
#' For an observed data set, draws from prior x exp(log ratio) without new simulations: by
#' tempered sequential Monte Carlo (the default), by importance sampling with the prior as
#' proposal (weights, effective sample size), or by random-walk Metropolis run as `n_chains`
#' parallel chains (acceptance rate and effective sample size reported).
#'
#' **Sequential Monte Carlo** (`method = "smc"`, in Rust): `n_chains` particles (default 2,000)
#' start as prior draws and move to the posterior through a ladder of temperatures
#' prior x exp(beta x log ratio), beta from 0 to 1, each step chosen so that the particles' weights
#' keep an effective sample of half their number; at each temperature they are resampled and moved
#' by random-walk Metropolis whose proposal is the particles' own covariance, scaled towards 30%
#' acceptance. At the posterior every particle runs on as a chain, keeping every 10th step, until
#' `n_draws` draws are kept; the chains' steps alternate independence Metropolis-Hastings moves,
#' proposed from a Gaussian mixture fitted to the particles (components chosen by BIC, plus a wide
#' defensive component), with random-walk ones. The independence moves cross between modes (a
#' random walk does not), so the mode weights do not rest on the particle system alone and the
#' effective sample size, the multi-chain estimate below, is honest. The log ratio is evaluated
#' for all particles at once (one call of the classifier per Metropolis sweep); priors other than
#' [prior_uniform()] and [prior_normal()] are sampled and evaluated in R. Checked against truth in
#' the package's tests (a crescent, two modes, a correlated 10-D Gaussian); the defaults (2,000
#' particles, every 10th step) give an effective sample of 10,000 of 10,000 on these and on the
#' sbibm two-moons posterior, at 14-24 log-ratio evaluations per draw (figures in
#' `bench/README.md`). Importance sampling from the prior is kept as
#' an option; it warns (`nce_warning_ess`) when its effective sample is below 1,000 or a tenth of
#' `n_draws`, as on narrow posteriors (two moons: 180 of 10,000).
#'
#' Metropolis runs in Rust when it can (`engine = "auto"`): when no term of the classifier
#' involves two parameters (as the default formula of [ratio_amortised()]), its log ratio at
#' the observed summaries is a sum of one-parameter functions. These are tabulated by one
#' `predict.gam()` call on `n_grid` points per parameter, the chains run in Rust on the tables
#' interpolated by local cubics, one random stream per chain (seeded from R's generator, so
#' draws are reproducible under [set.seed()] whatever `options(nce.threads =)`), in parallel. The
#' interpolation error, measured against `predict.gam()` at 200 of the draws, is returned as
#' `table_error` (typically below 1e-8 with the default grid). Classifiers with a term in two
#' or more parameters (e.g. `ti(theta1, theta2)`) and priors other than [prior_uniform()] and
#' [prior_normal()] run the chains in R, one `predict.gam()` call per step for all chains. A
#' normal prior's tables span 10 prior sds on each side of its mean; proposals beyond them are
#' rejected and counted (`off_table`, with a warning).
#'
#' The Metropolis effective sample size is the multi-chain estimate of Gelman et al. (as Stan's:
#' within- and between-chain variances, autocorrelations summed by Geyer's initial positive
#' sequence), so chains that stay where they started count as about one draw each. An acceptance
#' rate below 2% or above 98% (a `scale` far from the posterior's spread) gives a warning of class
#' `nce_warning_mixing`.
#'
#' @param object An `nce_ratio` from [ratio_amortised()] or [ratio_sequential()], or a design result whose
#'   classifier serves: an `nce_eig` ([design_eig()]) or an `nce_design` ([design_optimise()],
#'   the classifier of its last evaluation, at the chosen design).
#' @param observed The observed data, as `summaries` takes it.
#' @param n_draws Importance: number of prior draws. SMC and Metropolis: total draws kept (each
#'   chain's draws in turn, step by step, so every chain is kept when `n_draws` is not a multiple
#'   of `n_chains`).
#' @param method `"smc"` (default), `"importance"` or `"metropolis"`.
#' @param n_chains,burnin SMC: particles (default 2,000, at most `n_draws`). Metropolis: parallel
#'   chains (default 100) and burn-in steps per chain.
#' @param scale Metropolis: proposal sd per parameter (default: from an importance pass).
#' @param engine Metropolis: `"auto"` (Rust when the classifier and prior allow it, else R),
#'   `"rust"` (an error when they do not) or `"r"`.
#' @param n_grid Metropolis in Rust: grid points per parameter of the log-ratio tables.
#' @return An object of class `nce_ratio_posterior`: `draws` (matrix), `weights`, `ess`,
#'   `acceptance` (SMC and Metropolis; per chain in `chain_acceptance`), `engine`, for SMC
#'   `smc` (the temperatures, the estimate of log p(observed), stages and sweeps), and for
#'   Metropolis in Rust `table_error` and `off_table`; with `summary()`, `coef()`, `vcov()`,
#'   `confint()`, `plot()`.
#' @section What it refuses:
#' * `object` not an `nce_ratio` (or an `nce_eig`, or an `nce_design` with a final
#'   evaluation), `n_draws` not a whole number >= 10, `method` not
#'   "smc", "importance" or "metropolis", `n_chains` not a whole number >= 2, `burnin` not a whole
#'   number >= 0, `scale` not NULL or one finite number > 0 per parameter, `engine` not one of
#'   the choices, `n_grid` not a whole number in 16..10^6 (`nce_error_input`);
#' * `engine = "rust"` for a classifier with a term in two parameters or a prior other than
#'   uniform or normal (`nce_error_unsupported`);
#' * draws that would not fit in memory, and chains of more than 5e8 steps in all
#'   (`n_chains` x (`burnin` + draws per chain); `nce_error_size`);
#' * `summaries` failing on `observed`, giving non-finite values, or giving another number
#'   of summaries than the simulations (`nce_error_input`);
#' * for a [ratio_sequential()] estimator, `observed` giving other summaries than the data set it
#'   was fitted for (`nce_error_input`): its truncated prior and classifier are local to that one.
#' @examples
#' sim <- function(theta, n) matrix(rnorm(n * 20, theta[, "mu"]), n, 20)
#' summ <- function(x) cbind(m = rowMeans(x))
#' set.seed(1)
#' r <- ratio_amortised(sim, summ, prior_uniform(mu = c(-2, 2)), n = 1000, batch = TRUE,
#'                      formula = ~ te(mu, m, k = 5))
#' post <- ratio_posterior(r, matrix(rnorm(20, 0.5), 1), n_draws = 4000, method = "metropolis",
#'                         n_chains = 20)
#' post$engine
#' summary(post)
#' @export
ratio_posterior <- function(object, observed, n_draws = 10000L, method = c("smc", "importance", "metropolis"),
                            n_chains = NULL, burnin = 100L, scale = NULL, engine = c("auto", "rust", "r"),
                            n_grid = 2049L) {
  rng <- rng_state()
  ucall <- sys.call()
  object <- as_ratio(object, ucall)
  check_count(n_draws, min = 10)
  method <- check_choice(method, c("smc", "importance", "metropolis"), "method", ucall)
  if (is.null(n_chains)) n_chains <- if (method == "smc") min(2000L, n_draws) else 100L
  check_count(n_chains, min = 2)
  check_count(burnin, min = 0)
  engine <- check_choice(engine, c("auto", "rust", "r"), "engine", ucall)
  check_count(n_grid, min = 16, max = 1e6)
  d <- length(object$parameters)
  if (!is.null(scale) && (!is.numeric(scale) || length(scale) != d || any(!is.finite(scale)) || any(scale <= 0))) {
    check_fail(sprintf("NULL or %d finite number(s) > 0, one per parameter", d), scale, "scale", ucall)
  }
  s_obs <- observed_summaries(object$summaries, observed, object$batch, ucall)
  s_obs <- match_summaries(s_obs, object$summary_names, call = ucall)
  check_sequential_observed(object, s_obs, ucall)
  pr <- object$prior
  log_ratio_obs <- function(th) observed_log_ratio(object, th, s_obs)
  log_target <- function(th) {
    lp <- pr$log_density(th)
    ok <- is.finite(lp)
    out <- rep(-Inf, nrow(th))
    if (any(ok)) out[ok] <- lp[ok] + log_ratio_obs(th[ok, , drop = FALSE])
    out
  }
  t0 <- proc.time()[["elapsed"]]
  if (method == "smc") {
    res <- ratio_smc(log_ratio_obs, pr, n_draws, n_chains, ucall)
    res$log_ratio <- res$log_prior <- NULL
  } else if (method == "importance") {
    th <- as_theta_matrix(pr$sample(n_draws), pr$names, call = ucall)
    w <- normalise_log_weights(log_ratio_obs(th))
    res <- list(draws = th, weights = w, ess = 1 / sum(w^2), acceptance = NA_real_)
    if (res$ess < min(1000, n_draws / 10)) {
      nce_warn(sprintf(paste("importance sampling from the prior kept an effective sample of %.0f of %d draws: the",
                             "posterior is far narrower than the prior; use method = \"smc\" (the default)"),
                       res$ess, n_draws), "ess", call = ucall)
    }
  } else {
    engine <- ratio_engine(engine, object, ucall)
    res <- ratio_metropolis(log_target, pr, n_draws, n_chains, burnin, scale, object, s_obs, engine, n_grid, ucall)
  }
  # Observed summaries outside every simulation: the classifier extrapolates and the weights collapse.
  check_extrapolation(as.data.frame(as.list(s_obs)), as.data.frame(object$simulations$summaries), "observed", ucall)
  args <- list(n_draws = n_draws, method = method, n_chains = n_chains, burnin = burnin, scale = scale,
               engine = engine, n_grid = n_grid)
  structure(c(res, list(method = method, observed_summaries = s_obs, prior = pr,
                        time = proc.time()[["elapsed"]] - t0, ratio = object, observed = observed, args = args,
                        rng_state = rng)),
            class = c("nce_ratio_posterior", "nce_result"))
}

# The log ratio at parameter rows `th` for the observed summaries `s_obs` (a named vector): the
# network reads (and embeds) the observed data once for all rows.
observed_log_ratio <- function(object, th, s_obs) {
  if (!nrow(th)) return(numeric())
  s1 <- matrix(s_obs, 1L, length(s_obs), dimnames = list(NULL, names(s_obs)))
  if (inherits(object, "nce_ratio_mlp")) return(ratio_net_log_ratio(object, th, s1))
  ratio_log_ratio(object, th, s1[rep(1L, nrow(th)), , drop = FALSE])
}

# Tempered sequential Monte Carlo from the prior to the posterior (nce-core sampling/smc.rs):
# `n_chains` particles, moved by random-walk Metropolis scaled by their own spread at each
# temperature, then run as chains at the posterior for n_draws / n_chains kept steps of `thin`
# sweeps each, independence moves from a Gaussian mixture fitted to the particles in turn with
# random-walk ones. The log ratio is evaluated in R for all particles at once, called from the
# Rust sampler's main thread. Also returns the log ratio and the prior's log density at the draws.
ratio_smc <- function(log_ratio_obs, pr, n_draws, n_chains, call, thin = 10L, independence = TRUE) {
  d <- length(pr$names)
  steps <- ceiling(n_draws / n_chains)
  check_chain_work(n_chains, 0, steps, c("n_chains", "burnin", "n_draws"), call = call)
  check_size(2 * 8 * steps * n_chains * d, "n_draws", "the draws", call = call)
  # R errors and interrupts in the callbacks come back as values, which the sampler turns into an
  # nce_error_model or an interrupt.
  guarded <- function(f) function(x) tryCatch(f(x), error = identity, interrupt = identity)
  prior <- ratio_rust_prior(pr) %||%
    list(kind = "callback", sample = guarded(function(n) unname(as_theta_matrix(pr$sample(n), pr$names))),
         log_density = guarded(function(th) {
           colnames(th) <- pr$names
           as.double(pr$log_density(th))
         }))
  target <- guarded(function(th) {
    colnames(th) <- pr$names
    as.double(log_ratio_obs(th))
  })
  r <- rs(nce_smc_sample(target, prior, list(particles = as.double(n_chains), steps = as.double(steps), thin = thin,
                                             independence = as.double(independence), seed = draw_seed(),
                                             threads = nce_threads())), call = call)
  draws <- array(r$draws, c(steps, n_chains, d), dimnames = list(NULL, NULL, pr$names))
  flat <- matrix(aperm(draws, c(2L, 1L, 3L)), steps * n_chains, d, dimnames = list(NULL, pr$names))
  keep <- seq_len(n_draws)
  at_draws <- function(v) as.vector(t(matrix(v, steps, n_chains)))[keep]
  ess <- pmin(stats::setNames(as.double(r$ess), pr$names), n_draws)
  list(draws = flat[keep, , drop = FALSE], weights = rep(1 / n_draws, n_draws), ess = ess,
       acceptance = mean(r$acceptance), chain_acceptance = r$acceptance, engine = "rust",
       smc = list(temperatures = r$betas, log_evidence = r$log_evidence, stages = r$stages, sweeps = r$sweeps,
                  components = r$components, independence_acceptance = r$independence_acceptance,
                  evaluations = r$evaluations, calls = r$calls),
       log_ratio = at_draws(r$log_ratio), log_prior = at_draws(r$log_prior))
}

# The classifier behind a ratio object: itself, an nce_eig's, or an nce_design's final one.
as_ratio <- function(object, call) {
  if (inherits(object, "nce_eig")) object <- object$ratio
  if (inherits(object, "nce_design")) {
    if (is.null(object$final)) {
      nce_abort("this design result has no final evaluation (`n_final = 0`): rerun with `n_final` >= 40.",
                "input", call = call)
    }
    object <- object$final$ratio
  }
  if (!inherits(object, "nce_ratio")) {
    check_fail("an nce_ratio from ratio_amortised() (or an nce_eig or nce_design)", object, "object", call)
  }
  object
}

# Random-walk Metropolis with n_chains chains, started from an importance-resampled
# population; the step loop in Rust on tabulated log ratios (ratio_tables()) or in R, all chains
# moved together (one vectorised log-ratio evaluation per step).
ratio_metropolis <- function(log_target, pr, n_draws, n_chains, burnin, scale, object, s_obs, engine, n_grid,
                             call) {
  d <- length(pr$names)
  steps <- ceiling(n_draws / n_chains)
  check_chain_work(n_chains, burnin, steps, c("n_chains", "burnin", "n_draws"), call = call)
  check_size(2 * 8 * steps * n_chains * d, "n_draws", "the draws", call = call)
  init <- as_theta_matrix(pr$sample(max(2000L, 10L * n_chains)), pr$names)
  lw <- log_target(init)
  w <- normalise_log_weights(lw)
  if (is.null(scale)) {
    mu <- colSums(init * w)
    scale <- 2.38 / sqrt(d) * sqrt(pmax(colSums(sweep(init, 2L, mu)^2 * w), 1e-12))
  }
  scale <- stats::setNames(as.double(scale), pr$names)
  cur <- init[sample.int(nrow(init), n_chains, replace = TRUE, prob = w), , drop = FALSE]
  extra <- list()
  if (engine == "rust") {
    tab <- ratio_tables(object, s_obs, n_grid)
    r <- rs(nce_ratio_metropolis(list(values = tab$values, lo = tab$lo, hi = tab$hi), ratio_rust_prior(pr), unname(cur),
                                 list(scale = unname(scale), burnin = as.double(burnin), steps = as.double(steps),
                                      seed = draw_seed(), threads = nce_threads())), call = call)
    draws <- array(r$draws, c(steps, n_chains, d), dimnames = list(NULL, NULL, pr$names))
    acc_chain <- r$accepted
    # The interpolation error at up to 200 draws (evenly spaced, no use of the RNG).
    flat0 <- matrix(draws, steps * n_chains, d, dimnames = list(NULL, pr$names))
    at <- flat0[unique(round(seq(1, nrow(flat0), length.out = min(200L, nrow(flat0))))), , drop = FALSE]
    sm <- matrix(s_obs, nrow(at), length(s_obs), byrow = TRUE, dimnames = list(NULL, names(s_obs)))
    table_error <- max(abs(rs(nce_sum_tables_eval(tab$values, tab$lo, tab$hi, unname(at)), call = call) -
                             ratio_log_ratio(object, at, sm)))
    if (r$off_table > 0) {
      nce_warn(sprintf(paste("%d proposal(s) fell beyond the log-ratio tables (10 prior sds from the mean) and were",
                             "rejected: the posterior lies far in the prior's tails; check the fit."), r$off_table),
               "tables", call = call)
    }
    extra <- list(table_error = table_error, off_table = r$off_table, n_grid = n_grid)
  } else {
    lcur <- log_target(cur)
    draws <- array(NA_real_, c(steps, n_chains, d), dimnames = list(NULL, NULL, pr$names))
    acc_chain <- numeric(n_chains)
    for (it in seq_len(burnin + steps)) {
      prop <- cur + matrix(stats::rnorm(n_chains * d), n_chains, d) * rep(scale, each = n_chains)
      colnames(prop) <- pr$names
      lprop <- log_target(prop)
      a <- log(stats::runif(n_chains)) < lprop - lcur
      a[is.na(a)] <- FALSE
      cur[a, ] <- prop[a, ]
      lcur[a] <- lprop[a]
      if (it > burnin) {
        draws[it - burnin, , ] <- cur
        acc_chain <- acc_chain + a
      }
    }
  }
  # Step by step across the chains, so that n_draws (not a multiple of n_chains) keeps every chain.
  flat <- matrix(aperm(draws, c(2L, 1L, 3L)), steps * n_chains, d, dimnames = list(NULL, pr$names))
  flat <- flat[seq_len(n_draws), , drop = FALSE]
  ess <- pmin(vapply(seq_len(d), function(j) chain_ess(draws[, , j, drop = TRUE]), 1), n_draws)
  acc <- sum(acc_chain) / (steps * n_chains)
  if (acc < 0.02 || acc > 0.98) {
    nce_warn(sprintf(paste("the chains accepted %.1f%% of their proposals: they %s (effective sample size %s);",
                           "set `scale` nearer the posterior's spread, or leave it NULL"), 100 * acc,
                     if (acc < 0.02) "barely move" else "take steps too small to explore",
                     paste(format(round(ess)), collapse = ", ")), "mixing", call = call)
  }
  c(list(draws = flat, weights = rep(1 / nrow(flat), nrow(flat)), ess = stats::setNames(ess, pr$names),
         acceptance = acc, chain_acceptance = acc_chain / steps, scale = scale,
         engine = engine), extra)
}

# "auto" -> "rust" when the classifier's log ratio is a sum of one-parameter functions and the
# prior has a Rust form, else "r"; "rust" refused when it cannot serve.
ratio_engine <- function(engine, object, call) {
  if (engine == "r") return("r")
  why <- if (!inherits(object, "nce_ratio_gam")) {
    "the classifier is not a GAM of separate terms, so its log ratio cannot be tabulated per parameter"
  } else if (!ratio_separable(object$gam, object$parameters)) {
    "a term of the classifier involves two or more parameters, so its log ratio cannot be tabulated per parameter"
  } else if (is.null(ratio_rust_prior(object$prior))) {
    "the prior exists only as R functions (prior_custom()); Rust knows prior_uniform() and prior_normal()"
  }
  if (is.null(why)) return("rust")
  if (engine == "rust") {
    nce_abort(paste0("`engine = \"rust\"` cannot serve this posterior: ", why, "; use `engine = \"r\"`."),
              "unsupported", call = call)
  }
  "r"
}

# TRUE when no model term (smooth, with its `by` variable, or parametric, or offset) involves more
# than one parameter.
ratio_separable <- function(g, pars) {
  n_par <- function(exprs) sum(pars %in% unlist(lapply(exprs, function(e) all.vars(str2lang(e)))))
  for (sm in g$smooth) {
    if (n_par(c(sm$term, if (!identical(sm$by, "NA")) sm$by)) > 1L) return(FALSE)
  }
  fac <- attr(g$pterms, "factors")
  if (length(fac)) {
    for (k in seq_len(ncol(fac))) if (n_par(rownames(fac)[fac[, k] > 0]) > 1L) return(FALSE)
  }
  off <- attr(g$pterms, "offset")
  if (length(off) && n_par(rownames(attr(g$pterms, "factors"))[off]) > 1L) return(FALSE)
  TRUE
}

# The prior as the Rust sampler takes it, or NULL.
ratio_rust_prior <- function(pr) {
  if (identical(pr$kind, "uniform") && all(is.finite(c(pr$lower, pr$upper)))) {
    return(list(kind = "uniform", lower = unname(pr$lower), upper = unname(pr$upper)))
  }
  if (identical(pr$kind, "normal") && is.numeric(pr$mean) && is.numeric(pr$sd)) {
    return(list(kind = "normal", mean = unname(as.double(pr$mean)), sd = unname(as.double(pr$sd))))
  }
  NULL
}

# The log ratio at the observed summaries, separable in the parameters, as one table per
# parameter on n_grid equally spaced points (the prior's box, or 10 sds around a normal prior's
# mean): log r(theta) = log r(ref) + sum_j [log r(ref with theta_j) - log r(ref)], exact at the
# grid points; the constant log r(ref) goes into the first table. One predict.gam() call.
ratio_tables <- function(object, s_obs, n_grid) {
  pr <- object$prior
  pars <- object$parameters
  d <- length(pars)
  if (identical(pr$kind, "normal")) {
    lo <- pr$mean - 10 * pr$sd
    hi <- pr$mean + 10 * pr$sd
  } else {
    lo <- pr$lower
    hi <- pr$upper
  }
  lo <- as.double(lo[pars])
  hi <- as.double(hi[pars])
  ref <- (lo + hi) / 2
  grids <- vapply(seq_len(d), function(j) seq(lo[j], hi[j], length.out = n_grid), numeric(n_grid))
  th <- matrix(rep(ref, each = d * n_grid + 1L), d * n_grid + 1L, d, dimnames = list(NULL, pars))
  for (j in seq_len(d)) th[(j - 1L) * n_grid + seq_len(n_grid), j] <- grids[, j]
  sm <- matrix(s_obs, nrow(th), length(s_obs), byrow = TRUE, dimnames = list(NULL, names(s_obs)))
  eta <- ratio_log_ratio(object, th, sm)
  base <- eta[length(eta)]
  values <- matrix(eta[-length(eta)] - base, n_grid, d)
  values[, 1L] <- values[, 1L] + base
  list(values = values, lo = lo, hi = hi)
}

# Effective sample size of parallel chains (columns): n_total / tau, tau = 1 + 2 sum of the
# multi-chain autocorrelations, cut at the first negative pair sum (Geyer's rule).
chain_ess <- function(x) {
  x <- as.matrix(x)
  n <- nrow(x)
  m <- ncol(x)
  if (n < 4L) return(length(x))
  means <- colMeans(x)
  xc <- sweep(x, 2L, means)
  # Within- and between-chain variances (Gelman et al.'s multi-chain estimate, as Stan's): chains
  # that never move have no within-chain variance, and their draws count as about one per chain.
  w <- sum(xc^2) / (m * (n - 1))
  var_plus <- (n - 1) / n * w + (if (m > 1L) stats::var(means) else 0)
  if (!(var_plus > 0)) return(1)
  maxlag <- min(n - 1L, 200L)
  acov <- vapply(0:maxlag, function(k) sum(xc[(k + 1):n, , drop = FALSE] * xc[1:(n - k), , drop = FALSE]) / (m * n), 1)
  rho <- c(1, 1 - (w - acov[-1L]) / var_plus)
  # Geyer's initial positive sequence: pairs of autocorrelations summed while positive.
  tau <- -1
  for (k in seq(1L, length(rho) - 1L, by = 2L)) {
    pair <- rho[k] + rho[k + 1L]
    if (pair < 0) break
    tau <- tau + 2 * pair
  }
  min(length(x), length(x) / tau)
}
