#' Sequential NCE for Markov models with unnormalised transition kernels
#'
#' Fits \eqn{p(y_t \mid y_{t-1}) \propto \exp\{f_\theta(y_t, y_{t-1})\}} by
#' contrasting each observed transition with `ratio` reference points drawn
#' from a reference kernel \eqn{q(\cdot \mid y_{t-1})} (Barthelme and Chopin,
#' 2015, part III). Each transition has its own log normaliser
#' \eqn{\chi(y_{t-1})}: a smooth of the previous state (the "spline
#' intercept", evaluated once per transition and shared by its rows), one free
#' intercept per transition, or none.
#'
#' The rows of `data` are states in time order; `group` splits them into
#' sequences, and no transition crosses a sequence. The first `order` states of
#' each sequence only condition. The formula and the intercept may use the
#' state columns at time t, the previous state as `<name>_prev` (and
#' `<name>_prev2`, ... for `order` > 1), and any other column of `data`, taken
#' at time t (covariates such as a subject factor). Reference rows copy the
#' covariates of their transition.
#'
#' Standard errors use a sandwich clustered by transition (a data point and its
#' reference points share \eqn{y_{t-1}}) or, with `cluster = "sequence"`, by
#' sequence; for smooth terms mgcv's smoothing-bias term is added, as in
#' [nce()].
#'
#' @param formula One-sided formula of \eqn{f_\theta}: parametric terms and
#'   mgcv smooths (`s()`, `te()`, `ti()`, `by =`, `bs = "re"`).
#' @param data Data frame of states in time order.
#' @param reference Reference kernel: any `ref_*()` of [nce()] (independent of
#'   the previous state), [kernel_normal()] or [kernel_custom()].
#' @param ratio Reference points per transition (a positive whole number); see
#'   [nce_vocabulary].
#' @param intercept `NULL` (default: `s()` of the `_prev` columns), a one-sided
#'   formula in the previous state's columns and per-transition covariates,
#'   `"transition"` (one free intercept per transition) or `"none"` (one global
#'   intercept).
#' @param group Name of the column that splits `data` into sequences, or `NULL`
#'   for one sequence.
#' @param order Order of the Markov chain.
#' @param time Optional name of a time column, checked to increase within each
#'   sequence.
#' @param cluster `"transition"` or `"sequence"`: clusters of the sandwich.
#' @param knots,sp As for [nce()].
#' @param control [nce_control()] or a list of some of its settings, merged into the
#'   defaults.
#' @param discrete `TRUE` to fit on discretised covariates, as
#'   `mgcv::bam(discrete = TRUE)` does (Wood, Li, Shaddick and Augustin 2017):
#'   the covariates of each smooth in `formula` are rounded to an equally spaced
#'   grid over their range of 2000 values (one covariate; mgcv uses 1000), 100
#'   per covariate (two) or 25 (three or more), and the model matrix is held as the basis of
#'   the distinct rounded rows plus an index per row, so memory and time per
#'   iteration grow with the number of rows only through index look-ups. Each
#'   covariate moves by at most half a grid step (1/4000 of its range for a
#'   one-covariate smooth); on the LATKES bench model the linear predictor
#'   moves by at most about 0.006. The spline intercept is computed per transition and stays
#'   exact; smooths with `by` variables or factor covariates keep their exact
#'   basis.
#' @param shards `NULL` to fit in this process, or [nce_shards()] (or a
#'   number of shards) to hold the row-level model matrix in row shards run by
#'   the workers of the current [future::plan()] (e.g. on a cluster), each
#'   computing its own rows: the same fit, bit for bit, for every number of
#'   shards (see [nce_shards()] for how it compares with the in-memory fit).
#'   Exact fits only (any `intercept`), not `discrete = TRUE`.
#' @return An object of class `snce_fit` (also `nce_fit`): `print`,
#'   `summary`, `coef`, `vcov`, `confint`, `predict`, `plot`, `nobs` (the
#'   number of transitions), `model.frame`, `update`.
#' @section Bad input: NA or non-finite states are an error (split the
#'   sequence with `group` at a gap, or impute): snce() drops nothing silently.
#'   Sequences shorter than `order + 1` give no transition and are left out
#'   with a warning that names them. Data outside the kernel's support are an
#'   error.
#' @examples
#' # Truncated exponential Markov chain: p(y_t | y_{t-1}) proportional to exp(2 y_t y_{t-1}) on [0, 1]
#' set.seed(1)
#' y <- numeric(1001); y[1] <- runif(1)
#' for (t in 2:1001) { a <- 2 * y[t - 1]; y[t] <- log1p(runif(1) * expm1(a)) / a }
#' fit <- snce(~ I(y * y_prev), data.frame(y = y), ref_uniform(y = c(0, 1)), ratio = 10)
#' summary(fit)
#' @export
snce <- function(formula, data, reference, ratio = 20, intercept = NULL, group = NULL, order = 1L,
                 time = NULL, cluster = c("transition", "sequence"), knots = NULL, sp = NULL,
                 control = nce_control(), discrete = FALSE, shards = NULL) {
  check_supplied(c(formula = missing(formula), data = missing(data), reference = missing(reference)))
  rng <- rng_state()
  cl <- match.call()
  check_bool(discrete, "discrete")
  cluster <- check_choice(cluster, c("transition", "sequence"), "cluster", sys.call())
  fit <- fit_snce(formula, data, reference, ratio = ratio, intercept = intercept, group = group, order = order,
                  time = time, cluster = cluster, knots = knots, sp = sp, control = control,
                  call = cl, user_call = sys.call(), discrete = discrete, shards = shards)
  as_result(fit, rng = rng, env = parent.frame())
}

# The engine behind snce() and latkes(). `features`, when given, is a function of a data
# frame of rows (state, `_prev` columns and covariates) that returns it with derived
# columns added; it is applied to the data and reference rows before fitting, stored on
# the fit, and applied again to new data in predict() (and so in simulate()).
fit_snce <- function(formula, data, reference, ratio, intercept, group, order, time, cluster, knots, sp,
                     control, call, features = NULL, user_call = call, discrete = FALSE, shards = NULL,
                     formula_arg = "formula") {
  cl <- call
  if (!inherits(reference, c("nce_reference", "nce_kernel"))) {
    nce_abort("`reference` must be a ref_*() or kernel_*() object", "input", user_call)
  }
  check_state_names(reference$vars, user_call)
  control <- merge_control(control, nce_control, call = user_call)
  int <- intercept_spec(intercept, reference$vars, call = user_call)
  shards <- as_shards(shards, call = user_call)
  if (!is.null(shards) && isTRUE(discrete)) {
    nce_abort("`shards` is not supported with discrete = TRUE (a discretised design is small): fit in one process",
              "unsupported", call = user_call)
  }
  tr <- build_transitions(formula, data, reference, ratio, group, order, time, features, call = user_call,
                          discrete = discrete, formula_arg = formula_arg)
  rows <- tr$rows
  if (!is.null(shards)) check_shard_count(shards, nrow(rows), call = user_call)
  nt <- nrow(tr$trans)
  n_clusters <- length(unique(tr$trans$.sequence))
  if (cluster == "sequence" && n_clusters == 1L) {
    nce_warn(paste("cluster = \"sequence\" with one sequence cannot estimate a clustered covariance:",
                   "standard errors are clustered by transition instead"), "one_cluster", call = user_call)
    cluster <- "transition"
  } else if (cluster == "sequence" && n_clusters < 20L) {
    nce_warn(sprintf(paste("cluster = \"sequence\" with %d sequences: a clustered sandwich needs about 20 or more",
                           "clusters, and with fewer its standard errors are too small; consider",
                           "cluster = \"transition\""), n_clusters), "few_clusters", call = user_call)
  }
  clus <- if (cluster == "transition") seq_len(nt) else as.integer(factor(tr$trans$.sequence))
  res <- switch(int$type,
    smooth = fit_grouped(formula, rows, int$formula, tr$trans, rows$.transition, rows$.label, rows$.offset,
                         cluster = clus, knots = knots, sp = sp, control = control, discrete = discrete,
                         shards = shards),
    transition = fit_free_intercepts(formula, rows, nt, rows$.transition, rows$.label, rows$.offset,
                                     cluster = clus, knots = knots, sp = sp, control = control, discrete = discrete,
                                     shards = shards),
    # A formula made here would carry this frame (all the rows) into the fit's group set-up.
    none = fit_grouped(formula, rows, stats::as.formula("~ 1", env = baseenv()), tr$trans, rows$.transition,
                       rows$.label, rows$.offset,
                       cluster = clus, knots = knots, sp = sp, control = control, discrete = discrete,
                       shards = shards)
  )
  warn_fit(res, names(res$coefficients), nt)
  res$vcov <- nce_bayes_cov(res)
  res$vcov_naive <- res$Vp
  structure(c(res, list(
    intercept = int, nce_formula = formula, nce_frame = rows, transitions = tr$trans,
    reference = reference, ratio = tr$ratio, order = tr$order, n = nt, m = nt * tr$ratio,
    n_sequences = length(unique(tr$trans$.sequence)), cluster = cluster, method = "logistic",
    knots = knots, control = control, features = features, discrete = discrete, call = cl,
    sequence_group = group, sequence_time = time
  )), class = c("snce_fit", "nce_fit", "nce_result"))
}

# The states' names must be syntactic: mgcv reads the terms of a formula (the default intercept
# s(<state>_prev) among them) back from their text, where `my y` is two symbols (R's bare parse
# error, "unexpected symbol").
check_state_names <- function(vars, call) {
  bad <- vars[make.names(vars) != vars]
  if (length(bad)) {
    nce_abort(sprintf(paste("the state column(s) %s of `data` and `reference` are not syntactic R names, which the",
                            "model formulas cannot hold: rename them (e.g. to %s)"),
                      paste0("\"", bad, "\"", collapse = ", "), paste(make.names(bad), collapse = ", ")),
              "input", call = call)
  }
}

# Default, formula, "transition" or "none".
intercept_spec <- function(intercept, vars, call = caller_call()) {
  if (is.null(intercept)) {
    f <- stats::as.formula(paste0("~ s(", paste0(vars, "_prev", collapse = ", "), ")"))
    return(list(type = "smooth", formula = f))
  }
  if (inherits(intercept, "formula")) {
    if (length(intercept) != 2L) nce_abort("`intercept` must be a one-sided formula, e.g. ~ s(y_prev)", "input", call)
    return(list(type = "smooth", formula = intercept))
  }
  if (is.character(intercept) && length(intercept) == 1L && intercept %in% c("transition", "none")) {
    return(list(type = intercept, formula = NULL))
  }
  nce_abort("`intercept` must be NULL, a one-sided formula, \"transition\" or \"none\"", "input", call)
}

# Transitions of each sequence with their reference points: the rows of the NCE regression.
build_transitions <- function(formula, data, reference, ratio, group, order, time, features = NULL,
                              call = caller_call(), discrete = FALSE, formula_arg = "formula") {
  if (!inherits(formula, "formula") || length(formula) != 2L) {
    nce_abort("`formula` must be one-sided, e.g. ~ I(y * y_prev)", "input", call)
  }
  check_data_frame(data, "data", call = call)
  if (!inherits(reference, c("nce_reference", "nce_kernel"))) {
    nce_abort("`reference` must be a ref_*() or kernel_*() object", "input", call)
  }
  check_count(ratio, "ratio", call = call)
  check_count(order, "order", call = call)
  ratio <- as.integer(ratio)
  order <- as.integer(order)
  vars <- reference$vars
  check_numeric_columns(data, vars, "data", call = call)
  st <- sequence_transitions(data, vars, group, order, time)
  trans <- st$trans
  nt <- nrow(trans)
  prev_state <- stats::setNames(trans[paste0(vars, "_prev")], vars)
  # Reference rows: nt * ratio, each a copy of its transition's columns and the model matrices
  # built on them (about four copies in all; two with discrete = TRUE, whose model matrices hold
  # only the distinct rounded rows; measured against this estimate in bench/README.md).
  copies <- if (isTRUE(discrete)) 2 else 4
  con <- contrast(trans, reference, ratio, paired = TRUE, prev = prev_state, transform = features,
                  data_rows = st$cur, copies = copies, width = copies * (4 * order + 24), call = call)
  check_formula_vars(formula, names(con$data), call, formula_arg)
  rows <- con$rows
  rows$.label <- con$y
  rows$.transition <- c(seq_len(nt), con$of)
  rows$.offset <- con$offset
  list(rows = rows, trans = con$data, ratio = ratio, order = order)
}

# Variables of `formula` that are neither columns of the transitions (states, their `_prev`
# columns, covariates, features) nor objects of the formula's environment: refused as nce()
# refuses them, before model.frame()'s bare "object not found".
check_formula_vars <- function(formula, cols, call, arg = "formula") {
  env <- environment(formula)
  if (is.null(env)) env <- globalenv()
  unknown <- setdiff(all.vars(formula), cols)
  unknown <- unknown[!vapply(unknown, exists, TRUE, envir = env)]
  if (length(unknown)) {
    nce_abort(sprintf(paste("`%s` uses %s, which is neither a column of `data` (or a state's `_prev` column,",
                            "or a feature) nor a variable of the formula's environment"), arg,
                      paste(unknown, collapse = ", ")),
              "input", call)
  }
}

# The observed transitions of each sequence: rows at time t with the `_prev` columns of the
# `order` states before, and `.sequence`, named as the rows of `data` they end at; `cur` holds those rows.
sequence_transitions <- function(data, vars, group, order, time) {
  missing <- setdiff(vars, names(data))
  if (length(missing)) {
    nce_abort(sprintf("`data` lacks the reference's column(s) %s", paste(missing, collapse = ", ")), "input")
  }
  seq_id <- if (is.null(group)) {
    rep(1L, nrow(data))
  } else {
    if (!is.character(group) || length(group) != 1L || !group %in% names(data)) {
      nce_abort("`group` must name a column of `data`", "input")
    }
    if (anyNA(data[[group]])) nce_abort(sprintf("`group` column %s has NA", group), "data")
    data[[group]]
  }
  bad <- which(!rows_finite(data[vars]))
  if (length(bad)) {
    nce_abort(sprintf(paste("NA or non-finite states in %d row(s) (%s): snce() does not split sequences silently;",
                            "start a new sequence after a gap (`group`) or impute"),
                      length(bad), format_positions(bad)), "data")
  }
  idx <- split(seq_len(nrow(data)), factor(seq_id, levels = unique(seq_id)))
  if (!is.null(time)) {
    if (!is.character(time) || !time %in% names(data)) nce_abort("`time` must name a column of `data`", "input")
    unsorted <- names(idx)[vapply(idx, function(i) any(diff(as.numeric(data[[time]][i])) <= 0), TRUE)]
    if (length(unsorted)) {
      nce_abort(sprintf("time does not increase within sequence(s) %s: sort `data` by time within `group`",
                        format_positions(unsorted)), "data")
    }
  }
  short <- names(idx)[lengths(idx) < order + 1L]
  if (length(short)) {
    nce_warn(sprintf("%d sequence(s) shorter than order + 1 = %d give no transition and are left out: %s",
                     length(short), order + 1L, format_positions(short)), "short", call = NULL)
    idx <- idx[lengths(idx) >= order + 1L]
  }
  if (!length(idx)) nce_abort("no sequence is long enough to give a transition", "data")
  lagged <- function(k) unlist(lapply(idx, function(i) i[seq_len(length(i) - order) + order - k]), use.names = FALSE)
  cur <- lagged(0L)
  trans <- data[cur, , drop = FALSE]
  for (k in seq_len(order)) {
    suffix <- if (k == 1L) "_prev" else paste0("_prev", k)
    for (v in vars) trans[[paste0(v, suffix)]] <- data[[v]][lagged(k)]
  }
  trans$.sequence <- seq_id[cur]
  # Each transition keeps the name of the data row it ends at, so predict() at the fit's own
  # transitions and at the data (one value per row) name a transition alike, as predict.glm()
  # names fitted values by the data's rows.
  list(trans = trans, cur = cur)
}
