# Simulation plumbing for simulator models: priors, parameter grids, and summaries of
# simulated data computed through future.apply (any future backend) with progressr
# progress, reproducible under set.seed() whatever the number of workers, with failed
# simulations counted and reported.

#' Priors for simulator models
#'
#' `prior_uniform()` takes one range per parameter, `prior_normal()` a mean and a standard
#' deviation per parameter (independent components), `prior_custom()` a sampler and a log
#' density of your own.
#'
#' @param ... Named ranges `c(lower, upper)` (`prior_uniform()`).
#' @param mean,sd Named numeric vectors of the same length (`prior_normal()`).
#' @param sample `function(n)` returning an n-row matrix of draws with named columns.
#' @param log_density `function(theta)` taking a matrix of parameter rows and returning
#'   their log prior densities (up to a constant).
#' @param names Parameter names.
#' @param lower,upper Optional support bounds per parameter (used for grids and MCMC).
#' @return An object of class `nce_prior`.
#' @section What it refuses:
#' All refusals are errors of class `nce_error_input`:
#' * `prior_uniform()`: unnamed `...`, or a range that is not two finite numbers with
#'   lower < upper;
#' * `prior_normal()`: `mean` not a named vector of finite numbers, or `sd` not one finite
#'   number > 0 per element of `mean`;
#' * `prior_custom()`: `sample` or `log_density` not a function, `names` not a non-empty
#'   character vector without NA or "", `lower`/`upper` not one bound per name with
#'   lower < upper. A `sample(n)` whose draws lack a parameter column or hold non-finite
#'   values (NA, NaN, Inf) is refused when the prior is sampled, before any simulation; an
#'   error inside it is raised as `nce_error_model`.
#' @examples
#' pr <- prior_uniform(theta1 = c(-1, 1), theta2 = c(0, 1))
#' pr$sample(3)
#' @export
prior_uniform <- function(...) {
  r <- list(...)
  if (length(r) == 0L || is.null(names(r)) || any(names(r) == "")) {
    nce_abort("`...` must be named ranges, e.g. prior_uniform(a = c(0, 1), b = c(-1, 1)).", "input")
  }
  for (nm in names(r)) {
    v <- r[[nm]]
    if (!is.numeric(v) || length(v) != 2L || any(!is.finite(v)) || v[1] >= v[2]) {
      nce_abort(sprintf("`%s` must be a finite range c(lower, upper) with lower < upper, not %s.",
                        nm, describe_value(v)), "input")
    }
  }
  lower <- vapply(r, `[`, 1, 1L)
  upper <- vapply(r, `[`, 1, 2L)
  nms <- names(r)
  new_prior(
    names = nms, lower = lower, upper = upper, kind = "uniform",
    sample = function(n) {
      m <- vapply(seq_along(nms), function(j) stats::runif(n, lower[j], upper[j]), numeric(n))
      matrix(m, n, length(nms), dimnames = list(NULL, nms))
    },
    log_density = function(theta) {
      theta <- as_theta_matrix(theta, nms)
      inside <- rowSums(sweep(theta, 2L, lower, ">=") & sweep(theta, 2L, upper, "<=")) == length(nms)
      ifelse(inside, -sum(log(upper - lower)), -Inf)
    }
  )
}

#' @rdname prior_uniform
#' @export
prior_normal <- function(mean, sd) {
  if (!is.numeric(mean) || is.null(names(mean)) || any(names(mean) == "") || any(!is.finite(mean))) {
    nce_abort("`mean` must be a named numeric vector of finite values.", "input")
  }
  if (!is.numeric(sd) || length(sd) != length(mean) || any(!is.finite(sd)) || any(sd <= 0)) {
    nce_abort(sprintf("`sd` must hold %d positive numbers, one per parameter.", length(mean)), "input")
  }
  nms <- names(mean)
  pr <- new_prior(
    names = nms, lower = rep(-Inf, length(nms)), upper = rep(Inf, length(nms)), kind = "normal",
    sample = function(n) {
      m <- vapply(seq_along(nms), function(j) stats::rnorm(n, mean[j], sd[j]), numeric(n))
      matrix(m, n, length(nms), dimnames = list(NULL, nms))
    },
    log_density = function(theta) {
      theta <- as_theta_matrix(theta, nms)
      rowSums(stats::dnorm(theta, rep(mean, each = nrow(theta)), rep(sd, each = nrow(theta)), log = TRUE))
    }
  )
  # Kept for samplers that evaluate the prior outside R (ratio_posterior() in Rust).
  pr$mean <- stats::setNames(as.double(mean), nms)
  pr$sd <- stats::setNames(as.double(sd), nms)
  pr
}

#' @rdname prior_uniform
#' @export
prior_custom <- function(sample, log_density, names, lower = NULL, upper = NULL) {
  check_function(sample)
  check_function(log_density)
  if (!is.character(names) || length(names) < 1L || anyNA(names) || any(names == "")) {
    nce_abort("`names` must be the parameter names (a character vector).", "input")
  }
  d <- length(names)
  if (is.null(lower)) lower <- rep(-Inf, d)
  if (is.null(upper)) upper <- rep(Inf, d)
  if (!is.numeric(lower) || !is.numeric(upper) || length(lower) != d || length(upper) != d ||
      anyNA(lower) || anyNA(upper) || any(lower >= upper)) {
    nce_abort(sprintf("`lower` and `upper` must hold %d bounds each, lower < upper.", d), "input")
  }
  new_prior(names = names, lower = lower, upper = upper, kind = "custom",
            sample = function(n) prior_custom_draws(sample, n, names),
            log_density = function(theta) as.double(log_density(as_theta_matrix(theta, names))))
}

# Draws of a custom prior, checked here, where every simulator front end draws them: a non-finite
# parameter value would reach the user's simulator, fail there (or worse, not fail) and be
# reported as a failed simulation, far from its cause.
prior_custom_draws <- function(sample, n, names) {
  m <- call_user(sample, n, arg = "prior", at = "its `sample(n)`", call = NULL)
  th <- as_theta_matrix(m, names, call = NULL, what = "the prior's `sample(n)`")
  bad <- which(rowSums(!is.finite(th)) > 0L)
  if (length(bad)) {
    nce_abort(sprintf(paste("`prior`'s `sample(n)` returned non-finite parameter values (NA, NaN or Inf) in %d of",
                            "%d draws (rows %s): fix the sampler given to prior_custom() so that it returns finite",
                            "draws."), length(bad), nrow(th), format_positions(bad)), "input", call = NULL)
  }
  th
}

new_prior <- function(names, lower, upper, kind, sample, log_density) {
  structure(list(names = names, lower = stats::setNames(as.double(lower), names),
                 upper = stats::setNames(as.double(upper), names), kind = kind,
                 sample = sample, log_density = log_density), class = "nce_prior")
}

#' @export
print.nce_prior <- function(x, ...) {
  cat(sprintf("<nce_prior: %s> on %s\n", x$kind, paste(x$names, collapse = ", ")))
  invisible(x)
}

# A numeric matrix with the parameter columns, from a matrix, data frame or named vector.
as_theta_matrix <- function(theta, names, call = caller_call(), what = "`theta`") {
  if (is.data.frame(theta)) theta <- as.matrix(theta)
  if (is.numeric(theta) && is.null(dim(theta))) {
    theta <- matrix(theta, nrow = 1L, dimnames = list(NULL, names(theta)))
  }
  if (!is.matrix(theta) || !is.numeric(theta)) {
    nce_abort(sprintf("%s must be a numeric matrix or data frame of parameter rows.", what), "input", call = call)
  }
  if (is.null(colnames(theta))) {
    if (ncol(theta) != length(names)) {
      nce_abort(sprintf("%s must have %d columns (%s).", what, length(names), paste(names, collapse = ", ")),
                "input", call = call)
    }
    colnames(theta) <- names
  }
  miss <- setdiff(names, colnames(theta))
  if (length(miss)) {
    nce_abort(sprintf("%s lacks the parameter column(s) %s.", what, paste(miss, collapse = ", ")), "input", call = call)
  }
  theta <- theta[, names, drop = FALSE]
  storage.mode(theta) <- "double"
  theta
}

#' A grid of parameter values over a prior's support
#'
#' @param prior An `nce_prior` with finite bounds (or give `ranges`).
#' @param n_grid Points per parameter (one number, or one per parameter).
#' @param ranges Optional named list of ranges overriding the prior's bounds.
#' @return A matrix of parameter rows (all combinations), with attribute `"grid"`
#'   holding the points per parameter; [lfire()] treats it as a grid.
#' @section What it refuses:
#' * `prior` not an `nce_prior`, or `n_grid` not one whole number >= 1 or one per parameter
#'   (`nce_error_input`);
#' * a grid that would not fit in memory (`nce_error_size`, checked before allocating;
#'   `options(nce.max_memory =)` sets the limit);
#' * a parameter without a finite range in the prior or in `ranges` (`nce_error_input`):
#'   a grid needs bounds, so a `prior_normal()` needs `ranges`.
#' @details Points are the midpoints of `n_grid` equal cells, so they avoid the support's edges.
#' @examples
#' theta_grid(prior_uniform(a = c(0, 1), b = c(-1, 1)), n_grid = 3)
#' @export
theta_grid <- function(prior, n_grid = 25L, ranges = NULL) {
  n <- n_grid
  if (!inherits(prior, "nce_prior")) check_fail("an nce_prior", prior, "prior", caller_call(0L))
  d <- length(prior$names)
  if (!is.numeric(n) || !(length(n) %in% c(1L, d)) || any(!is.finite(n)) || any(n < 1) || any(n != round(n))) {
    nce_abort(sprintf("`n_grid` must be one whole number >= 1 or %d of them.", d), "input")
  }
  n <- rep_len(n, d)
  if (!is.null(ranges) && (!is.list(ranges) || is.null(names(ranges)) || !all(names(ranges) %in% prior$names))) {
    nce_abort(sprintf("`ranges` must be NULL or a list named by parameters among %s, e.g. list(%s = c(lower, upper)).",
                      paste(prior$names, collapse = ", "), prior$names[1L]), "input")
  }
  check_size(8 * prod(n) * d, "n_grid", "the grid")
  pts <- lapply(seq_len(d), function(j) {
    nm <- prior$names[j]
    r <- if (!is.null(ranges[[nm]])) ranges[[nm]] else c(prior$lower[j], prior$upper[j])
    if (!is.numeric(r) || length(r) != 2L || any(!is.finite(r)) || r[1] >= r[2]) {
      nce_abort(sprintf("parameter `%s` needs a finite range: give `ranges = list(%s = c(lower, upper))`.", nm, nm),
                "input")
    }
    r[1] + (seq_len(n[j]) - 0.5) * diff(r) / n[j]
  })
  names(pts) <- prior$names
  g <- as.matrix(expand.grid(pts, KEEP.OUT.ATTRS = FALSE))
  attr(g, "grid") <- pts
  g
}

#' Simulate summaries from a simulator model
#'
#' Runs `simulator` at each row of `theta` (`n` times) and applies `summaries` to every
#' simulated data set, through [future.apply::future_lapply()] when future.apply is
#' installed (so `future::plan()` chooses the backend: sequential, multisession, a cluster).
#' Results are the same under `set.seed()` whatever the plan and number of workers: each
#' chunk of work gets its own L'Ecuyer-CMRG stream derived from R's RNG. Progress is
#' reported through progressr (wrap the call in `progressr::with_progress()` or set
#' `progressr::handlers(global = TRUE)` to see a bar).
#'
#' @param simulator `function(theta)` taking a named parameter vector and returning one
#'   data set; with `batch = TRUE`, `function(theta, n)` taking an n-row parameter matrix
#'   and returning n data sets in any form `summaries` accepts.
#' @param summaries `function(x)` returning the summary statistics of one data set (a
#'   numeric vector); with `batch = TRUE`, of a batch, as an n-row matrix.
#' @param theta Matrix or data frame of parameter rows.
#' @param n Simulations per row of `theta`.
#' @param batch Whether `simulator` and `summaries` work on batches.
#' @param chunk_size Simulations per unit of parallel work (default: `n` when `n > 1`, else
#'   100). It fixes the random streams: change it and the draws change.
#' @return An object of class `nce_simulations`: `theta` (one row per simulation),
#'   `index` (row of the input `theta`), `summaries` (NA rows where a simulation failed),
#'   `ok`, `failures` (a data frame of the failed simulations and why), `time` (seconds).
#'   Failed simulations (an error, or a non-finite or wrong-length summary) are counted
#'   and reported with a warning of class `nce_warning_simulation`, never dropped silently.
#' @section What it refuses:
#' * `simulator` or `summaries` not a function, `n` or `chunk_size` not a whole number >= 1,
#'   `batch` not TRUE or FALSE (`nce_error_input`);
#' * `theta` not a numeric matrix or data frame with named columns and at least one row, or
#'   with NA or infinite values (`nce_error_input`);
#' * `nrow(theta) * n` simulations whose results would not fit in memory (`nce_error_size`,
#'   checked before simulating). Failed single simulations are not refused: they are
#'   counted and reported with a warning.
#' @examples
#' sim <- function(theta) rnorm(20, theta[["mu"]])
#' set.seed(1)
#' s <- simulate_summaries(sim, function(x) c(m = mean(x), v = var(x)),
#'                         theta = cbind(mu = c(0, 1)), n = 5)
#' s
#' @export
simulate_summaries <- function(simulator, summaries, theta, n = 1L, batch = FALSE, chunk_size = NULL) {
  call <- sys.call()
  check_function(simulator)
  check_function(summaries)
  check_count(n)
  check_bool(batch)
  check_count(chunk_size, allow_null = TRUE)
  if (is.data.frame(theta)) theta <- as.matrix(theta)
  if (!is.matrix(theta) || !is.numeric(theta) || nrow(theta) < 1L || is.null(colnames(theta))) {
    check_fail("a numeric matrix or data frame of parameter rows with named columns", theta, "theta", call)
  }
  if (any(!is.finite(theta))) {
    nce_abort("`theta` has non-finite parameter values: give finite values only.", "input", call = call)
  }
  run_simulations(simulator, summaries, theta, n, batch, chunk_size, call = call)
}

run_simulations <- function(simulator, summaries, theta, n, batch, chunk_size, call) {
  storage.mode(theta) <- "double"
  total <- nrow(theta) * n
  check_size(8 * total * (ncol(theta) + 2), "n", "the simulations", call = call)
  if (is.null(chunk_size)) chunk_size <- if (n > 1L) n else 100L
  index <- rep(seq_len(nrow(theta)), each = n)
  chunks <- split(seq_len(total), ceiling(seq_len(total) / chunk_size))
  seeds <- chunk_seeds(length(chunks))
  t0 <- proc.time()[["elapsed"]]
  one_chunk <- function(rows, p) {
    out <- simulate_chunk(simulator, summaries, theta[index[rows], , drop = FALSE], batch)
    if (!is.null(p)) p()
    out
  }
  res <- with_simulation_progress(length(chunks), function(p) {
    if (requireNamespace("future.apply", quietly = TRUE)) {
      future.apply::future_lapply(chunks, one_chunk, p = p, future.seed = seeds)
    } else {
      lapply(seq_along(chunks), function(k) with_seed(seeds[[k]], one_chunk(chunks[[k]], p)))
    }
  })
  elapsed <- proc.time()[["elapsed"]] - t0
  assemble_simulations(res, theta, index, elapsed, call,
                       diagnose = function() diagnose_simulator(simulator, summaries, theta[1L, , drop = FALSE], batch))
}

# Why every simulation failed, when the cause is the plumbing between prior, simulator and
# summaries rather than the model: parameter columns the simulator reads that the prior does not
# have (R's "subscript out of bounds" does not name them), matrix indexing of the one parameter
# vector a simulator gets without `batch`, or a vector returned where `summaries` wants a matrix.
# Runs the simulator once on the first parameter row; NULL when none of these is the cause.
diagnose_simulator <- function(simulator, summaries, th1, batch) {
  miss <- setdiff(simulator_reads(simulator), colnames(th1))
  if (length(miss)) {
    return(sprintf("the simulator reads the parameter(s) %s, not among those it is given (the prior's: %s)",
                   paste0("\"", miss, "\"", collapse = ", "), paste(colnames(th1), collapse = ", ")))
  }
  x <- tryCatch(if (batch) simulator(th1, 1L) else simulator(th1[1L, ]), error = function(e) e)
  if (inherits(x, "error")) {
    if (!batch && grepl("incorrect number of dimensions", conditionMessage(x), fixed = TRUE)) {
      return(paste("without `batch = TRUE` the simulator gets one named parameter vector (read it as",
                   "theta[[\"name\"]]), not a matrix: index it so, or pass `batch = TRUE` with function(theta, n)"))
    }
    return(NULL)
  }
  s <- tryCatch(summaries(x), error = function(e) e)
  if (batch && is.null(dim(x)) && !is.list(x) && (inherits(s, "error") || is.null(dim(s)))) {
    return(sprintf(paste("with `batch = TRUE` the simulator returned a vector (length %d) for one parameter row, where",
                         "a matrix with one row per simulation (or what `summaries` takes for a batch) is expected"),
                   length(x)))
  }
  NULL
}

# The parameter names a simulator reads by name from its first argument: theta[, "a"],
# theta[["a"]], theta["a"] and theta$a in its body.
simulator_reads <- function(simulator) {
  arg <- names(formals(simulator))[1L]
  if (is.null(arg) || identical(arg, "...")) return(character())
  found <- character()
  walk <- function(e) {
    if (!is.call(e)) return()
    f <- e[[1L]]
    if ((identical(f, as.name("[")) || identical(f, as.name("[["))) && identical(e[[2L]], as.name(arg))) {
      for (i in seq_along(e)[-(1:2)]) if (is.character(e[[i]])) found <<- c(found, e[[i]])
    }
    if (identical(f, as.name("$")) && identical(e[[2L]], as.name(arg))) found <<- c(found, as.character(e[[3L]]))
    for (i in seq_along(e)[-1L]) if (is.call(e[[i]])) walk(e[[i]])
  }
  walk(body(simulator))
  unique(found)
}

# One L'Ecuyer-CMRG stream per chunk, derived from R's RNG so set.seed() fixes them all.
chunk_seeds <- function(k) {
  s <- c(10407L, sample.int(.Machine$integer.max - 1L, 6L))
  out <- vector("list", k)
  for (i in seq_len(k)) {
    out[[i]] <- s
    s <- parallel::nextRNGStream(s)
  }
  out
}

# Evaluate `expr` with `.Random.seed` set to `seed` (L'Ecuyer-CMRG), restoring the caller's RNG.
with_seed <- function(seed, expr) {
  genv <- globalenv()
  old_kind <- RNGkind()
  old <- if (exists(".Random.seed", envir = genv, inherits = FALSE)) get(".Random.seed", envir = genv) else NULL
  on.exit({
    RNGkind(old_kind[1L], old_kind[2L], old_kind[3L])
    if (is.null(old)) rm(".Random.seed", envir = genv) else assign(".Random.seed", old, envir = genv)
  })
  RNGkind("L'Ecuyer-CMRG")
  assign(".Random.seed", seed, envir = genv)
  expr
}

with_simulation_progress <- function(steps, f) {
  if (requireNamespace("progressr", quietly = TRUE)) {
    p <- progressr::progressor(steps = steps)
    f(p)
  } else {
    f(NULL)
  }
}

# Run one chunk: summaries as a matrix (NA rows for failures) and the failure reasons.
simulate_chunk <- function(simulator, summaries, th, batch) {
  m <- nrow(th)
  as_row <- function(s) {
    if (is.data.frame(s)) s <- unlist(s)
    if (!is.numeric(s) && !is.logical(s)) stop("summaries must return numbers, not ", class(s)[1L])
    s
  }
  if (batch) {
    r <- tryCatch({
      x <- simulator(th, m)
      s <- summaries(x)
      if (is.data.frame(s)) s <- as.matrix(s)
      if (is.null(dim(s)) && m == 1L) s <- matrix(s, 1L, dimnames = list(NULL, names(s)))
      if (!is.matrix(s) || nrow(s) != m) {
        stop(sprintf("a batch of %d simulations gave summaries with %s rows", m,
                     if (is.matrix(s)) nrow(s) else "no"))
      }
      storage.mode(s) <- "double"
      list(s = s, why = ifelse(apply(is.finite(s), 1L, all), NA_character_, "non-finite summary"))
    }, error = function(e) list(s = NULL, why = rep(paste("error:", conditionMessage(e)), m)))
    return(r)
  }
  vals <- vector("list", m)
  why <- rep(NA_character_, m)
  for (i in seq_len(m)) {
    theta_i <- th[i, ]
    v <- tryCatch(as_row(summaries(simulator(theta_i))), error = function(e) e)
    if (inherits(v, "error")) {
      why[i] <- paste("error:", conditionMessage(v))
    } else {
      vals[[i]] <- v
      if (!all(is.finite(v))) why[i] <- "non-finite summary"
    }
  }
  list(vals = vals, why = why)
}

assemble_simulations <- function(res, theta, index, elapsed, call, diagnose = function() NULL) {
  total <- length(index)
  why <- unlist(lapply(res, `[[`, "why"), use.names = FALSE)
  # Summary length and names: from the first successful simulation.
  first <- NULL
  for (r in res) {
    if (!is.null(r$s)) {
      first <- r$s[1L, ]
      break
    }
    ok_i <- which(!vapply(r$vals, is.null, TRUE))
    if (length(ok_i)) {
      first <- r$vals[[ok_i[1L]]]
      break
    }
  }
  if (is.null(first)) {
    cause <- tryCatch(diagnose(), error = function(e) NULL)
    nce_abort(sprintf("all %d simulations failed; the first reason: %s%s", total, why[1L],
                      if (is.null(cause)) "" else paste0(". Likely cause: ", cause)), "simulation", call = call)
  }
  k <- length(first)
  nms <- names(first)
  # Named summaries are matched by name (a simulator may return them in another order).
  named <- !is.null(nms) && !any(nms == "") && !anyDuplicated(nms)
  if (is.null(nms) || any(nms == "")) nms <- paste0("s", seq_len(k))
  s <- matrix(NA_real_, total, k, dimnames = list(NULL, nms))
  pos <- 0L
  for (r in res) {
    m <- length(r$why)
    if (!is.null(r$s)) {
      cn <- colnames(r$s)
      if (ncol(r$s) != k) {
        why[pos + seq_len(m)] <- sprintf("summaries of length %d, not %d", ncol(r$s), k)
      } else if (named && !is.null(cn) && !identical(cn, nms)) {
        if (setequal(cn, nms) && !anyDuplicated(cn)) s[pos + seq_len(m), ] <- r$s[, nms, drop = FALSE]
        else why[pos + seq_len(m)] <- sprintf("summaries named %s, not %s", toString(cn), toString(nms))
      } else {
        s[pos + seq_len(m), ] <- r$s
      }
    } else if (!is.null(r$vals)) {
      for (i in seq_len(m)) {
        v <- r$vals[[i]]
        if (is.null(v)) next
        if (length(v) != k) {
          why[pos + i] <- sprintf("summaries of length %d, not %d", length(v), k)
        } else if (named && !is.null(names(v)) && !identical(names(v), nms)) {
          if (setequal(names(v), nms) && !anyDuplicated(names(v))) s[pos + i, ] <- as.double(v[nms])
          else why[pos + i] <- sprintf("summaries named %s, not %s", toString(names(v)), toString(nms))
        } else {
          s[pos + i, ] <- as.double(v)
        }
      }
    }
    pos <- pos + m
  }
  why[is.na(why) & !apply(is.finite(s), 1L, all)] <- "non-finite summary"
  ok <- is.na(why)
  s[!ok, ] <- NA_real_
  failures <- data.frame(simulation = which(!ok), theta_row = index[!ok], reason = why[!ok],
                         stringsAsFactors = FALSE)
  out <- structure(list(theta = theta[index, , drop = FALSE], index = index, summaries = s, ok = ok,
                        failures = failures, time = elapsed), class = "nce_simulations")
  report_failures(out, call)
  out
}

report_failures <- function(sims, call, what = "simulations") {
  nf <- nrow(sims$failures)
  if (nf == 0L) return(invisible())
  tab <- sort(table(sims$failures$reason), decreasing = TRUE)
  top <- paste(sprintf("%d x %s", as.integer(tab), names(tab))[seq_len(min(3L, length(tab)))], collapse = "; ")
  nce_warn(sprintf("%d of %d %s failed and are left out (%s); see `$failures`.", nf, length(sims$ok), what, top),
           "simulation", call = call)
}

#' @export
print.nce_simulations <- function(x, ...) {
  cat(sprintf("<nce_simulations> %d simulations at %d parameter value(s), %d summaries; %d failed; %.2f s\n",
              length(x$ok), length(unique(x$index)), ncol(x$summaries), sum(!x$ok), x$time))
  invisible(x)
}

# The simulator, summaries and prior every simulator front end takes.
check_simulator <- function(simulator, summaries, prior, call) {
  check_function(simulator, "simulator", call = call)
  check_function(summaries, "summaries", call = call)
  if (!inherits(prior, "nce_prior")) check_fail("an nce_prior (see prior_uniform())", prior, "prior", call)
}
