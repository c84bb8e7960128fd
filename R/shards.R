#' Row shards for pooled fits held by the workers of a future plan
#'
#' A pooled [snce()] or [latkes()] fit spends its time in sums over rows
#' (X'WX, X'Wz and the pieces of REML's derivatives). With `shards =
#' nce_shards(n)` the row-level model matrix is held in `n` row shards: this
#' process sets up the smooths (knots, constraints, penalties) and writes each
#' shard's rows of the data once to `dir`; each worker computes its shard's
#' rows of the model matrix from them, as the set-up computed them, and keeps
#' them.
#' Each iteration then runs the shards' sums through
#' [future.apply::future_lapply()], so the current [future::plan()] decides
#' where: in this R process (`sequential`), in background R processes
#' (`multisession`) or on the nodes of a cluster (`cluster`, or any other
#' future backend). A worker reads its shard once and keeps it until the
#' next sharded fit; each iteration sends it only coefficient- and
#' weight-sized data. The main process keeps the data, the row-length vectors
#' and the per-transition block, and never the row-level model matrix.
#'
#' A shard holds its rows of the model matrix and the other rows of its
#' transitions. In a [latkes()] fit these are few: a transition's reference rows
#' follow one another. On the 23.3-million-row pooled fit of the package's
#' benchmark (560 subjects, 33 row-level columns), each of two workers peaked at
#' 6.1-6.2 GB and the main process at 8.3 GB. The fit in one process peaked at
#' 11.3 GB.
#'
#' The shards' partial sums are added in the order of the in-memory fit's
#' fixed chunks of rows, so the fit is the same, bit for bit, whatever the
#' number of shards, workers or threads (on workers whose CPUs have the same
#' vector instructions, AVX2 and FMA, as this one's). The workers compute
#' their rows as the set-up did, so with cubic, cyclic, P- and tensor-product
#' splines and parametric terms the fit is the in-memory fit bit for bit;
#' smooths whose rows come from [mgcv::PredictMat()] (thin plates of two or
#' more covariates, `by` terms) agree with the set-up's basis to about 1e-15,
#' and the fit with the in-memory fit to rounding.
#'
#' Shards cover exact fits with every kind of transition intercept (a smooth,
#' the default; `"transition"`, one free intercept per transition, eliminated
#' per transition; or `"none"`); with `discrete = TRUE` they are an error of
#' class `nce_error_unsupported` (a discretised design is already small).
#'
#' @param n_shards Number of shards: a whole number from 1 to the number of chunks
#'   of 4096 rows (data and reference rows). Usually the number of workers.
#' @param dir Directory the shards are written to (one file per shard,
#'   removed after the fit): `NULL` for [tempdir()]. On a cluster, a directory
#'   every worker can read (shared storage) under the same path.
#' @return An object of class `nce_shards`, to give as `shards`. A plain
#'   number `n` as `shards` means `nce_shards(n)`.
#' @seealso [latkes()] and [snce()], which take `shards =`; the timings of sharded fits are in
#'   `bench/README.md` of the source repository.
#' @examples
#' set.seed(1)
#' win <- c(0, 1024, 0, 768)
#' d <- rlatkes(300, kernel = list(dist = function(d) -d / 150), window = win, n_trials = 2)
#' # In this process (future's default plan);
#' # plan(multisession, workers = 2) for two background workers.
#' fit <- latkes(d, group = "trial", window = win, ratio = 10, kernel = ~ s(dist, bs = "cr"),
#'               shards = nce_shards(1))
#' fit$sp  # the smoothing parameters, as in the fit without shards
#' @export
nce_shards <- function(n_shards = 2L, dir = NULL) {
  call <- caller_call()
  check_shard_number(n_shards, "n_shards", call)
  if (!is.null(dir) && !(is.character(dir) && length(dir) == 1L && !is.na(dir) && dir.exists(dir))) {
    nce_abort("`dir` of `shards` must be NULL or the path of an existing directory", "input", call = call)
  }
  if (!is.null(dir) && !dir_writable(dir)) {
    nce_abort(sprintf("`dir` of `shards` (%s) is not writable: the shard files go there; give a writable directory",
                      dir), "input", call = call)
  }
  structure(list(n = as.integer(n_shards), dir = dir), class = "nce_shards")
}

#' @export
print.nce_shards <- function(x, ...) {
  cat(sprintf("<nce_shards: %d shard%s in %s>\n", x$n, if (x$n == 1L) "" else "s",
              if (is.null(x$dir)) "tempdir()" else x$dir))
  invisible(x)
}

check_shard_number <- function(n, arg, call) {
  if (!is.numeric(n) || length(n) != 1L || !is.finite(n) || n < 1 || n != round(n)) {
    nce_abort(sprintf("`%s` must be a whole number of shards, at least 1, not %s", arg, describe_value(n)), "input",
              call = call)
  }
}

# `shards` as given to snce()/latkes(): NULL (in-process), a number or nce_shards().
as_shards <- function(shards, call = caller_call()) {
  if (is.null(shards) || inherits(shards, "nce_shards")) return(shards)
  if (is.numeric(shards)) {
    check_shard_number(shards, "shards", call)
    return(nce_shards(shards))
  }
  nce_abort(sprintf("`shards` must be NULL, a number of shards or nce_shards(), not %s", describe_value(shards)),
            "input", call = call)
}

# Rows per chunk of the engine's sums (CHUNK_ROWS in engine/design.rs): shards hold whole chunks.
shard_chunk_rows <- 4096L

# At most one shard per chunk of rows, checked before the set-up of the model matrices.
check_shard_count <- function(shards, nrow, call = caller_call()) {
  chunks <- max(1L, ceiling(nrow / shard_chunk_rows))
  if (shards$n > chunks) {
    nce_abort(sprintf(paste("`shards` must be at most %d: the %d data and reference rows make %d chunk%s of %d rows,",
                            "and a shard holds whole chunks; got %d"),
                      chunks, nrow, chunks, if (chunks == 1) "" else "s", shard_chunk_rows, shards$n),
              "input", call = call)
  }
  invisible(shards)
}

# What a worker needs to compute its rows of A: the set-up (term_setup(mode = "shards"): smooth
# objects, parametric terms, levels), whether A keeps the intercept column, and the data's
# columns the formula uses.
row_recipe <- function(setup, formula, data, intercept) {
  setup$X <- setup$terms <- NULL
  # The terms' environment is where the formula was made (perhaps a frame holding all the data):
  # not sent. The formula's variables come from the shard's rows.
  attr(setup$pterms, ".Environment") <- globalenv()  # nolint: object_name_linter.
  vars <- intersect(all.vars(formula), names(data))
  list(setup = setup, intercept = intercept, data = data[, vars, drop = FALSE])
}

# Whether a file can be created in `dir` (file.access() says yes to root even where the
# file system refuses, as in /proc).
dir_writable <- function(dir) {
  f <- tempfile("nce-probe-", tmpdir = dir)
  ok <- isTRUE(suppressWarnings(tryCatch(file.create(f), error = function(e) FALSE)))
  if (ok) unlink(f)
  ok
}

# The rows of A (`recipe`: row_recipe()), B and the group of each row split into shards, one
# RDS file each in the shards' directory, written one at a time: list(paths, token, n, pa). The
# caller removes the files. Each shard holds the data on its rows (its own rows and those of its
# transitions, nce_shard_split()), not A: its worker computes A on them (shard_rows()), so no
# process holds all of A.
write_shards <- function(shards, recipe, b, group) {
  group <- as.integer(group)
  at <- function(i) recipe$data[i, , drop = FALSE]
  dir <- if (is.null(shards$dir)) tempdir() else shards$dir
  token <- basename(tempfile("nce-shards-"))
  paths <- character()
  s <- 1L
  repeat {
    part <- rs(nce_shard_split(b, group, shards$n, s))
    part$recipe <- list(setup = recipe$setup, intercept = recipe$intercept, rows = at(part$rows))
    part$rows <- NULL
    paths[s] <- file.path(dir, sprintf("%s-%d.rds", token, s))
    unwritable <- function(e) {
      nce_abort(sprintf("the shard file %s could not be written (%s): give `nce_shards(dir =)` a writable directory",
                        paths[s], conditionMessage(e)), "input", call = NULL)
    }
    tryCatch(saveRDS(part, paths[s], compress = FALSE), error = unwritable, warning = unwritable)
    if (s >= part$n_shards) break
    s <- s + 1L
  }
  # The shards' copies of the data are garbage now; collected before the fit, not kept through it.
  rm(part)
  invisible(gc(verbose = FALSE))
  list(paths = paths, token = token, n = length(paths), pa = recipe$setup$ncol)
}

# The model matrix of a set-up (term_setup()) on a shard's rows, computed as the set-up
# computed it: a smooth whose sum-to-zero constraint absorb_constraints() absorbed gets its
# basis from its Predict.matrix() method times the same null-space basis Z (so cubic, cyclic,
# P- and tensor-product splines give the set-up's rows bit for bit), less the columns that side
# constraints deleted, as PredictMat() deletes them; other smooths go through mgcv's PredictMat()
# (equal to rounding).
shard_design <- function(setup, data, intercept) {
  smooth_rows <- function(sm) {
    qrc <- attr(sm, "qrc")
    j <- attr(sm, "nCons")
    if (identical(sm$by, "NA") && inherits(qrc, "qr") && is.null(attr(sm, "indi")) && isTRUE(j > 0)) {
      x <- absorb_rows(mgcv::Predict.matrix(sm, data), qrc, j)
      del <- attr(sm, "del.index")
      return(if (is.null(del)) x else x[, -del, drop = FALSE])
    }
    mgcv::PredictMat(sm, data)
  }
  setup_predict(setup, data, intercept, smooth_rows, na_action = stats::na.fail)
}

# A shard read from its file, with its rows of A computed from its recipe (write_shards()), a
# block of rows at a time: the bases' temporaries stay a block's size, not the shard's (a
# shard of the 23-million-row fit holds 12 million rows). Then one collection: R would keep the
# recipe and the blocks' garbage (as large as A) until its heap filled again.
shard_rows <- function(shard, block = 2^17) {
  r <- shard$recipe
  if (is.null(r)) return(shard)
  n <- nrow(r$rows)
  a <- matrix(0, n, r$setup$ncol)
  for (k in seq_len(ceiling(n / block))) {
    i <- ((k - 1) * block + 1):min(n, k * block)
    x <- shard_design(r$setup, r$rows[i, , drop = FALSE], r$intercept)
    if (ncol(x) != ncol(a)) stop(sprintf("the shard's rows have %d columns, expected %d", ncol(x), ncol(a)))
    a[i, ] <- x
  }
  shard$a <- a
  shard$recipe <- NULL
  rm(r, a)
  invisible(gc(verbose = FALSE))
  shard
}

# The function the engine calls whenever it needs the sums of the shards of `store`
# (write_shards()): one task per shard through future.apply, results in shard order.
shard_runner <- function(store) {
  paths <- store$paths
  token <- store$token
  # Sent to the workers with each call: a closure of the base environment travels light (the
  # package's own function as FUN made each call about four times slower under multisession).
  worker <- local(function(job) utils::getFromNamespace("shard_job", "nce")(job), baseenv())
  function(tasks) {
    jobs <- lapply(seq_along(tasks), function(s) list(path = paths[s], token = token, task = tasks[[s]]))
    tryCatch(
      if (requireNamespace("future.apply", quietly = TRUE)) {
        future.apply::future_lapply(jobs, worker, future.packages = "nce", future.seed = NULL)
      } else {
        lapply(jobs, shard_job)
      },
      error = function(e) e, interrupt = function(e) e)
  }
}

# Shards run in this process (sequential plan) are not kept after the fit.
forget_shards <- function(store) {
  if (identical(shard_cache$.token, store$token)) rm(list = ls(shard_cache, all.names = TRUE), envir = shard_cache)
}

# The REML fit of fit_grouped() with A in the shards of `store`.
fit_grouped_sharded <- function(store, b, group, y, offset, family, cluster, penalties, sp, control) {
  on.exit(forget_shards(store), add = TRUE)
  nce_fit_reml_grouped_sharded(shard_runner(store), b,
                               grouped_problem(group, y, offset, cluster, penalties, family, sp, control,
                                               shards = store$n, pa = store$pa))
}

# The REML fit of fit_free_intercepts() with A in the shards of `store` (written with a B of no
# columns).
fit_free_sharded <- function(store, ngroups, group, y, offset, family, cluster, penalties, sp, control) {
  on.exit(forget_shards(store), add = TRUE)
  nce_fit_reml_free_intercepts_sharded(shard_runner(store),
                                       grouped_problem(group, y, offset, cluster, penalties, family, sp, control,
                                                       ngroups = as.integer(ngroups), shards = store$n,
                                                       pa = store$pa))
}

# Shards read by this process, of the latest sharded fit only (keyed by file).
shard_cache <- new.env(parent = emptyenv())

# One shard's task, on a worker: its shard read once per fit, then the sums in Rust.
shard_job <- function(job) {
  if (!identical(shard_cache$.token, job$token)) {
    rm(list = ls(shard_cache, all.names = TRUE), envir = shard_cache)
    shard_cache$.token <- job$token
  }
  shard <- shard_cache[[job$path]]
  if (is.null(shard)) {
    if (!file.exists(job$path)) {
      stop(sprintf("shard file %s not found on worker %s: is the shards' `dir` shared by all workers?",
                   job$path, Sys.info()[["nodename"]]), call. = FALSE)
    }
    shard <- shard_rows(readRDS(job$path))
    assign(job$path, shard, envir = shard_cache)
  }
  res <- nce_shard_task(shard, job$task, nce_threads())
  if (inherits(res, "nce_rust_error")) stop(res$message, call. = FALSE)
  res
}
