#' Argument names shared by every fit
#'
#' One vocabulary of argument names runs through the package, so that an argument means the
#' same thing wherever it appears, and one meaning has one name. The arguments below are
#' documented here once; the help pages of the functions and methods that take them inherit
#' this text. The whole table (every argument name of the exported functions and methods, with
#' its meaning) is `nce:::vocabulary`, and the package's tests check every exported function and
#' registered method against it.
#'
#' Names shared by many functions:
#' * `data` the data being modelled and `newdata` the data at which a fit is evaluated;
#' * `object` a fitted model (`object1`, `object2` for two), `x` the same for `print()`,
#'   `plot()` and broom's methods, whose generics name it so;
#' * `reference` the reference (noise) density and `ratio` the reference points per data point;
#' * `log_density` a (log) density given as a function, `gradient` its gradient in the
#'   parameters, `start` starting values of the parameters, `theta` parameter values;
#' * `draws` draws of a density, `observed` a simulator's observed data, `simulator`,
#'   `summaries`, `prior` and `batch` (a simulator that works on batches);
#' * counts: `n` simulations or points drawn, `n_draws` draws kept, `n_chains` chains run,
#'   `n_grid` grid points, `nsim` simulated data sets; `batch_size` rows per minibatch;
#' * `se_type` the covariance (`"sandwich"` or `"naive"`), `type` what a method returns,
#'   `method` the algorithm, `level` a confidence level, `held_out` a share held out,
#'   `lower`, `upper` bounds;
#' * `control` a list of settings: what its settings function returns (e.g.
#'   `nce_control(maxit = 50)`) or a plain list of some of its settings (e.g.
#'   `list(maxit = 50)`), which is merged into the defaults; a setting the function does not
#'   know is refused with `nce_error_input`.
#'
#' Threads are set once for the session by `options(nce.threads = n)`, not by an argument;
#' results do not depend on them.
#'
#' @param object A fitted model or result of this package (the class the help page is about).
#' @param x The same as `object`, for the generics that name it `x` (`print()`, `plot()`,
#'   broom's `tidy()`, `glance()`, `augment()`).
#' @param newdata Data at which the fit is evaluated, with the columns the fit used; by default
#'   (`NULL` or missing) the fit's own data.
#' @param data A data frame holding the model's variables.
#' @param reference The reference (noise) density the data are contrasted with.
#' @param ratio Reference points per data point.
#' @param control A list of settings (see Details).
#' @param digits Significant digits printed.
#' @param se.fit Also return standard errors (`predict()`'s name).
#' @param se_type The covariance used for standard errors: `"sandwich"` (default: the NCE
#'   sandwich, right for noise-contrastive estimation) or `"naive"` (the inverse Hessian of the
#'   logistic regression, which treats the reference points as fixed); see [vcov.nce_fit()].
#' @param parm Coefficients (names or indices); all by default.
#' @param level Confidence level.
#' @param conf.int Add confidence limits (broom's name).
#' @param conf.level Their level (broom's name).
#' @param nsim Number of simulated data sets.
#' @param seed `NULL` or an integer for `set.seed()`.
#' @param n_grid Grid points (per variable or curve).
#' @param n_draws Draws kept.
#' @param ... Unused.
#' @examples
#' set.seed(1)
#' d <- data.frame(y = rnorm(200))
#' # a partial control list is merged into nce_control()'s defaults
#' fit <- nce(~ y + I(y^2), data = d, reference = ref_normal(y = c(0, 2)), ratio = 5,
#'            control = list(maxit = 50))
#' fit$control
#' @name nce_vocabulary
#' @aliases vocabulary
NULL

# The table: every argument name of the exported functions and of the methods of exported or
# other packages' generics, with its one meaning (one name per meaning, one meaning per name).
# Names fixed by R's or broom's generics (x, digits, se.fit, parm, conf.level, ...) are here too,
# with the generic named. tests/testthat/test-vocabulary.R checks the installed API against it.
vocabulary <- c(
  `...` = "further arguments, passed on or unused",
  A = "the mixing matrix of an ICA model",
  abs = "compare absolute values of precision entries",
  activation = "the activation function of a network's hidden layers",
  angle = "how angle terms are drawn: on a line or polar",
  backfit = "most rounds of backfitting a network beside smooth terms",
  backfit_tol = "least improvement of the held-out loss for another backfitting round",
  bandwidth = "kernel standard deviation per parameter of a kernel density",
  batch = "whether a simulator and summaries work on batches of simulations",
  batch_size = "rows (or simulations) per minibatch of stochastic training",
  burnin = "Markov chain steps dropped at the start of each chain",
  by = "a column whose levels get one model each",
  candidates = "reference draws per point in sampling-importance-resampling",
  chains = "the chains stacked in given draws: their number or lengths",
  chunk_size = "simulations per unit of parallel work",
  classifier = "the ratio classifier: a GAM or a network",
  cluster = "the clusters of the sandwich covariance: transitions or sequences",
  coarse = "cross-validate on every coarse-th lambda of the lasso path",
  col = "a colour",
  columns = "the data columns an embedding network reads",
  combine = "put all panels in one figure",
  components = "numbers of mixture components to try",
  conf.int = "broom's tidy(): add confidence limits",
  conf.level = "broom's tidy(): level of the confidence limits",
  control = "a list of settings, partial lists merged into the defaults",
  cov = "a covariance matrix",
  cv = "how cross-validation gets each fold's fit",
  d = "a dimension: number of nodes or variables",
  data = "the data being modelled",
  design = "an experimental design: a named numeric vector",
  df = "degrees of freedom of a t density",
  diag = "the common diagonal value of a precision matrix",
  digits = "print(): significant digits",
  dir = "a directory files are written to",
  discrete = "fit on discretised covariates (mgcv's discrete = TRUE)",
  draws = "draws of a density, one row per draw",
  draws1 = "draws of model 1's posterior",
  draws2 = "draws of model 2's posterior",
  drop_points = "points at which fixations are dropped from a scanpath",
  early = "settings of the fits before the last (sequential rounds)",
  em_maxit = "most EM iterations",
  em_tol = "EM tolerance on the change of the objective",
  embedding = "an embedding network of the raw simulated data",
  engine = "where a sampler runs: Rust or R",
  epsilon = "convergence tolerance on the relative change of the deviance",
  ess = "effective sample sizes, or NULL to estimate them",
  estimator = "which bound of the expected information gain is estimated",
  evaluate = "update(): FALSE returns the call instead of refitting",
  expand = "fraction of a range added on both sides",
  extrapolate = "Richardson extrapolation of a grid normaliser",
  family = "a distribution family",
  fit = "extractAIC(): the fitted model (the generic's name)",
  folds = "number of folds (of cross-validation or cross-fitting)",
  formula = "a model formula (for model.frame(), whose generic names it so, the fit)",
  formula. = "update(): changes to the model formula",
  ftol = "convergence tolerance on the relative change of the objective",
  given = "covariates a conditional model conditions on",
  gradient = "the gradient of log_density in the parameters",
  grid = "cells per axis of a grid over the plane",
  group = "the column that splits data into sequences",
  groups = "number of groups of individuals in a design",
  gtol = "convergence tolerance on the largest gradient entry",
  heading = "the heading column of a step model",
  held_out = "share of rows held out of training",
  hidden = "units per hidden layer of a network",
  high = "upper end of the range of edge weights",
  images = "the image of each trial",
  impute = "how missing values are handled",
  inflate = "factor widening a fitted reference",
  intercept = "the per-transition log normaliser: a formula or a kind",
  item = "values per observation of a set or time point of a series",
  iterations = "refits of an adaptive loop",
  k = "extractAIC(): penalty per degree of freedom",
  K = "a precision matrix",
  kappa = "a von Mises concentration",
  kernel = "a transition kernel: formula, functions or specification",
  knots = "knots of smooth terms, as for mgcv::gam()",
  lambda = "which lasso penalty is chosen from the cross-validation",
  lambda_min_ratio = "smallest lasso lambda as a fraction of the largest",
  latent = "the values a discrete latent variable takes",
  level = "a confidence or credible level",
  levels = "credible levels at which coverage is reported",
  log_density = "a (log) density given as a function",
  log_density1 = "model 1's log-likelihood as a function of its draws",
  log_density2 = "model 2's log-likelihood as a function of its draws",
  loss = "the training loss of a network classifier",
  low = "lower end of the range of edge weights",
  lower = "lower bounds (of parameters or design variables)",
  map_by = "the column choosing the map of each fixation",
  maps = "spatial covariates: maps over the plane",
  margin = "a relative margin: of diagonal dominance, or added to each side of a sequential round's box",
  marginal = "cached prior-predictive simulations",
  max_epochs = "most epochs of training",
  max_vars = "most variables shown",
  maxit = "most iterations of an optimiser",
  mean = "a mean or location",
  memory = "correction pairs kept by L-BFGS",
  method = "the algorithm used",
  model = "a model specification",
  n = "a number of simulations or of points drawn",
  n_chains = "number of Markov chains run",
  n_draws = "number of draws kept",
  n_final = "simulations of the last evaluation at the chosen design",
  n_grid = "number of grid points (per variable, parameter or curve)",
  n_individuals = "individuals per group of a design",
  n_initial = "designs in the initial coarse set",
  n_latent = "draws of the latent variables per point",
  n_marginal = "simulations or shuffles for the marginal terms",
  n_networks = "networks trained on the same data (an ensemble)",
  n_points = "draws kept as kernel centres",
  n_ref = "number of reference draws (a count, not a ratio per draw)",
  n_refine = "designs added per refinement round",
  n_shards = "number of shards",
  n_shuffle = "shuffled pairs per joint pair",
  n_starts = "random starts of an optimiser",
  n_subjects = "number of subjects simulated",
  n_theta = "simulations at each parameter value",
  n_trials = "trials (sequences) per subject",
  na.action = "what to do with rows holding NA (model.frame()'s name)",
  name = "a label for printing",
  names = "parameter names",
  newdata = "data at which a fit is evaluated",
  nlambda = "length of the lasso's lambda path (glmnet's name)",
  nodes = "quadrature points",
  normalise = "how a transition kernel is normalised: grid or intercept",
  nsim = "simulate(): number of simulated data sets",
  object = "a fitted model or result",
  object1 = "the result for model 1",
  object2 = "the result for model 2",
  observed = "the observed data of a simulator or design",
  order = "the order of a Markov chain",
  out = "features an embedding network gives",
  outside = "what to do with points outside the window",
  parametric = "tidy(): parametric coefficients rather than smooth terms",
  parm = "confint(): the coefficients",
  patience = "epochs without improvement before training stops",
  penalty = "the penalty of a regularised regression: lasso or ridge",
  prior = "a prior distribution of the parameters",
  prior_mean = "the mean of a normal prior",
  prior_odds = "prior odds of model 1 against model 2",
  prior_sd = "the standard deviation of a normal prior",
  prob = "probabilities of a 1",
  q_features = "features of the variational family",
  quadratic = "add squares of the summaries",
  range = "named list of ranges over which effects are drawn",
  ranges = "named list of parameter ranges overriding the prior's bounds",
  ratio = "reference points per data point",
  reference = "the reference (noise) density",
  refine = "cells refined around the previous fixation",
  relative = "write the model relative to the reference",
  resample = "update(): draw new random numbers instead of the stored state",
  rounds = "refinement rounds",
  sample = "a function drawing samples",
  scale = "extractAIC(): the scale (the generic's name)",
  scope = "drop1(): term labels to drop",
  scores = "how summaries are mapped before the regression",
  sd = "a standard deviation",
  se_fit = "broom's augment(): add standard errors",
  se_type = "the covariance: sandwich or naive",
  se.fit = "predict(): also return standard errors",
  seed = "simulate(): a seed for R's generator",
  select = "plot(): which terms, parts or parameters are drawn",
  shape = "a gamma shape",
  shards = "how a fit is split into shards",
  sigma1 = "the standard deviation of a mixture's first component",
  signif.stars = "print significance stars",
  simulations = "cached simulations at the parameter values",
  simulator = "a simulator: a function of the parameters returning data",
  sp = "fixed smoothing parameters",
  split = "fit the reference to half the draws, estimate on the other half",
  start = "starting values of the parameters",
  step = "the step size of stochastic gradient training",
  step_patience = "epochs without improvement before the step is halved",
  subset = "rows of the data used",
  summaries = "a function giving summary statistics of one data set",
  t = "measurement times",
  test = "anova(): the test",
  theta = "parameter values",
  thin = "keep one chain step in thin",
  threshold = "entries above it are edges",
  time = "a time column",
  truth = "the true value to compare with",
  type = "what a method returns",
  type.predict = "broom's augment(): the type of prediction",
  upper = "upper bounds (of parameters or design variables)",
  vars = "the variables (columns) a density covers",
  waymarks = "whether telescoping waymarks are used",
  weight_decay = "decoupled weight decay of training",
  weights = "weights of the data points",
  window = "the rectangle (or ranges) the points live in",
  x = "the fitted model or result for print(), plot() and broom's methods"
)

# A renamed argument passed under its old name lands in a method's `...`: refused, not ignored
# (`vcov(fit, type = "naive")` would otherwise give the sandwich). `renamed`: old = new names.
check_renamed_dots <- function(dot_names, renamed, call = caller_call()) {
  old <- intersect(dot_names, names(renamed))
  if (length(old)) {
    nce_abort(sprintf("`%s` is not an argument here: use `%s`", old[1L], renamed[[old[1L]]]), "input", call = call)
  }
}
