# Pooled fits with the row-level model matrix in shards run through the future plan
# (nce_shards()): the same fit, bit for bit, whatever the number of shards or workers. The
# workers compute their rows of the design as the set-up did, so with cubic and cyclic splines
# the fit is also the in-memory fit bit for bit; smooths they compute through PredictMat()
# (thin plates of two covariates, `by` terms) agree with the set-up's basis to about 1e-15.

# A LATKES problem of about 8,800 rows (three chunks of 4096 rows), its reference rows drawn
# from the same seed for every fit.
shard_problem <- local({
  d <- NULL
  function() {
    if (is.null(d)) {
      set.seed(11)
      d <<- rlatkes(800, latkes_truth, window = screen, n_trials = 4)
    }
    d
  }
})

# Formulas made here, not in fit_sharded(): their environment is part of the fit.
shard_kernel <- ~ s(dist, bs = "cr", k = 6) + s(angle, bs = "cc", k = 8)
shard_intercept <- ~ te(x_prev, y_prev, k = 3)
tp_kernel <- ~ s(dist, angle, k = 12)

fit_sharded <- function(shards = NULL, ...) {
  d <- shard_problem()
  set.seed(5)
  latkes(d, group = "trial", window = screen, ratio = 10, kernel = shard_kernel, intercept = shard_intercept,
         shards = shards, ...)
}

# All fields but the call and those holding environments: bit for bit, or (`tolerance`) to rounding.
# To rounding, the smoothing parameters are compared on the log scale (a term heading to its
# linear limit has a flat REML score in its parameter, which moves by about 1e-5 there).
expect_same_fit <- function(fit, ref, tolerance = NULL) {
  keep <- setdiff(names(ref), c("call", "cache", "call_env", "features", if (!is.null(tolerance)) "sp"))
  if (!is.null(tolerance)) expect_equal(log(fit$sp), log(ref$sp), tolerance = 1e-5)
  for (k in keep) {
    label <- sprintf("`%s` of the sharded fit", k)
    if (is.null(tolerance)) expect_identical(fit[[k]], ref[[k]], label = label) else
      expect_equal(fit[[k]], ref[[k]], tolerance = tolerance, label = label)
  }
}

fit_in_memory <- local({
  fit <- NULL
  function() {
    if (is.null(fit)) fit <<- fit_sharded()
    fit
  }
})

test_that("a sharded fit is bit-identical to the in-memory fit for 1, 2 and 3 shards", {
  skip_on_cran()
  skip_if_not_installed("future")
  ref <- fit_in_memory()
  expect_gt(nrow(ref$nce_frame), 2 * 4096)
  old <- future::plan(future::sequential)
  on.exit(future::plan(old), add = TRUE)
  for (s in 1:3) expect_same_fit(fit_sharded(s), ref)
})

test_that("a kernel with a two-covariate thin plate: the same fit for every shard count, in-memory to rounding", {
  skip_on_cran()
  skip_if_not_installed("future")
  d <- shard_problem()
  fit_tp <- function(shards = NULL) {
    set.seed(5)
    latkes(d, group = "trial", window = screen, ratio = 10, kernel = tp_kernel, intercept = "none", shards = shards)
  }
  ref <- fit_tp()
  old <- future::plan(future::sequential)
  on.exit(future::plan(old), add = TRUE)
  one <- fit_tp(1)
  expect_same_fit(one, ref, tolerance = 1e-7)
  expect_lt(max(abs(one$linear.predictors - ref$linear.predictors)), 1e-9)
  expect_same_fit(fit_tp(3), one)
})

test_that("the sharded fit's methods give the in-memory fit's results", {
  skip_on_cran()
  ref <- fit_in_memory()
  fit <- fit_sharded(nce_shards(2, dir = tempdir()))
  expect_identical(capture.output(print(fit)), capture.output(print(ref)))
  expect_identical(capture.output(summary(fit)), capture.output(summary(ref)))
  expect_identical(coef(fit), coef(ref))
  expect_identical(vcov(fit), vcov(ref))
  expect_identical(confint(fit), confint(ref))
  expect_identical(nobs(fit), nobs(ref))
  nd <- model.frame(ref)[1:20, ]
  expect_identical(predict(fit, newdata = nd), predict(ref, newdata = nd))
  expect_identical(latkes_effects(fit, n_grid = 50), latkes_effects(ref, n_grid = 50))
  # The shards' files are removed after the fit, and this process keeps no shard.
  expect_length(list.files(tempdir(), pattern = "^nce-shards-"), 0L)
  expect_length(ls(shard_cache, all.names = TRUE), 0L)
})

test_that("two multisession workers give the same fit", {
  skip_on_cran()
  skip_if_not_installed("future.apply")
  ref <- fit_in_memory()
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  expect_same_fit(fit_sharded(2), ref)
})

test_that("free per-transition intercepts (intercept = \"transition\") in shards: the in-memory fit, bit for bit", {
  skip_on_cran()
  skip_if_not_installed("future")
  d <- shard_problem()
  fit_free <- function(shards = NULL) {
    set.seed(5)
    latkes(d, group = "trial", window = screen, ratio = 10, kernel = shard_kernel, intercept = "transition",
           shards = shards)
  }
  ref <- fit_free()
  old <- future::plan(future::sequential)
  on.exit(future::plan(old), add = TRUE)
  for (s in 1:3) expect_same_fit(fit_free(s), ref)
  future::plan(future::multisession, workers = 2)
  fit <- fit_free(2)
  expect_same_fit(fit, ref)
  expect_identical(fit$transition_intercepts, ref$transition_intercepts)
  expect_identical(capture.output(summary(fit)), capture.output(summary(ref)))
  expect_length(list.files(tempdir(), pattern = "^nce-shards-"), 0L)
})

test_that("bad `shards` are classed errors naming the argument", {
  d <- shard_problem()
  # nce_shards()'s own argument is `n_shards`; through `shards =` the message names `shards`.
  expect_error(nce_shards(0), "`n_shards` must be a whole number of shards, at least 1", class = "nce_error_input")
  expect_error(nce_shards(1.5), "`n_shards` must be a whole number", class = "nce_error_input")
  expect_error(nce_shards(NA), "`n_shards` must be a whole number", class = "nce_error_input")
  expect_error(nce_shards(2, dir = file.path(tempdir(), "no-such-dir")), "`dir` of `shards`",
               class = "nce_error_input")
  expect_error(fit_sharded("two"), "`shards` must be NULL, a number of shards", class = "nce_error_input")
  expect_error(fit_sharded(0), "`shards` must be a whole number of shards, at least 1", class = "nce_error_input")
  expect_error(fit_sharded(50), "`shards` must be at most 3: .* 3 chunks of 4096 rows", class = "nce_error_input")
  expect_error(fit_sharded(2, discrete = TRUE), "`shards` is not supported with discrete = TRUE",
               class = "nce_error_unsupported")
  expect_output(print(nce_shards(3)), "<nce_shards: 3 shards in tempdir\\(\\)>")
})

test_that("a failing shard worker stops the fit with a classed error naming `shards`", {
  skip_on_cran()
  skip_if_not_installed("future")
  job <- list(path = file.path(tempdir(), "nce-shards-missing-1.rds"), token = "missing", task = list())
  expect_error(shard_job(job), "not found on worker .* shared by all workers")
  old <- future::plan(future::sequential)
  on.exit(future::plan(old), add = TRUE)
  suppressMessages(trace("shard_job", quote(if (job$task$op == "sums") stop("worker lost")), print = FALSE,
                         where = asNamespace("nce")))
  on.exit(suppressMessages(untrace("shard_job", where = asNamespace("nce"))), add = TRUE)
  expect_error(fit_sharded(2), "`shards`: a shard's worker failed: worker lost", class = "nce_error_input")
})

test_that("shards hold their rows of the data, and their workers compute their rows of the design", {
  set.seed(12)
  d <- data.frame(u = runif(9000), f = gl(3, 3000), g = rep(1:900, each = 10), unused = 0)
  form <- ~ f + s(u, bs = "cr", k = 5)
  a <- term_setup(form, d, intercept = TRUE, mode = "shards")
  expect_null(a$X)
  full <- term_setup(form, d, intercept = TRUE, mode = "bound")
  store <- write_shards(list(n = 2L, dir = tempdir()), row_recipe(a, form, d, TRUE), matrix(0, 900, 0L), d$g)
  on.exit(unlink(store$paths), add = TRUE)
  expect_identical(store$n, 2L)
  expect_identical(store$pa, ncol(full$X))
  parts <- lapply(store$paths, readRDS)
  # Each file holds its rows of the covariates the formula uses, not of the design.
  expect_null(parts[[1]]$a)
  expect_named(parts[[1]]$recipe$rows, c("u", "f"), ignore.order = TRUE)
  expect_identical(environment(parts[[1]]$recipe$setup$pterms), globalenv())
  # A on each shard's rows, computed in blocks of rows as the set-up computed it on all rows.
  held <- lapply(1:2, function(s) rs(nce_shard_split(matrix(0, 900, 0L), d$g, 2L, s))$rows)
  for (block in c(2^19, 1000)) {
    built <- lapply(parts, shard_rows, block = block)
    for (s in 1:2) expect_identical(built[[s]]$a, unname(full$X[held[[s]], , drop = FALSE]))
  }
  expect_identical(nrow(built[[2]]$a), length(built[[2]]$held_group))
})

test_that("the shard split: each shard's rows in order, all rows of its transitions, one shard at a time", {
  # 10,000 rows (three chunks of 4,096) in 1,000 groups of 10, B with two columns.
  g <- rep(seq_len(1000), each = 10)
  b <- matrix(seq_len(2000) / 7, 1000, 2)
  parts <- lapply(1:2, function(s) rs(nce_shard_split(b, g, 2L, s)))
  expect_identical(parts[[1]]$n_shards, 2L)
  # Own rows: whole chunks, in order, covering all rows once.
  own <- lapply(parts, function(p) p$rows[p$own + seq_len(p$nrow)])
  expect_identical(unlist(own), seq_len(1e4))
  expect_identical(own[[1]], seq_len(4096))
  for (s in 1:2) {
    p <- parts[[s]]
    expect_identical(p$group, g[own[[s]]] - 1L)
    expect_identical(p$b, b)
    # Held: the own rows and all rows of the shard's groups g0..g1 (0-based, end excluded), in
    # row order, with their groups within the shard (-1: not one of its groups).
    mine <- g - 1L >= p$g0 & g - 1L < p$g1
    expect_identical(p$rows, sort(union(own[[s]], which(mine))))
    expect_identical(p$held_group, ifelse(mine[p$rows], g[p$rows] - 1L - p$g0, -1L))
  }
  expect_error(rs(nce_shard_split(b, g, 2L, 3L)), "`which`: is 3, but there are 2 shards", class = "nce_error_input")
  expect_error(rs(nce_shard_split(b, g, 3L + 1L, 1L)), "`shards`", class = "nce_error_input")
})
