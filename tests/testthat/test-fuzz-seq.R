# Hostile inputs to snce(), latkes(), rlatkes() and the sequential methods: each gives a classed
# condition, never a crash or a silent wrong answer. Allocation cases use sizes refused by the
# up-front check, so they run in milliseconds.

fuzz_chain <- local({
  set.seed(41)
  data.frame(y = rchain(60, 2))
})
fuzz_fix <- local({
  set.seed(42)
  rlatkes(60, kernel = list(dist = function(d) -d / 150), window = c(0, 1024, 0, 768), n_trials = 2,
          grid = c(32, 24))
})
fuzz_snce <- local({
  set.seed(43)
  snce(~ I(y * y_prev), fuzz_chain, ref_uniform(y = c(0, 1)), ratio = 3, intercept = ~ s(y_prev, k = 4))
})
fuzz_latkes <- local({
  set.seed(44)
  latkes(fuzz_fix, group = "trial", window = c(0, 1024, 0, 768), ratio = 3, kernel = ~ s(dist, k = 4),
         intercept = ~ s(x_prev, y_prev, k = 6))
})
ru <- ref_uniform(y = c(0, 1))
sn <- function(...) snce(~ I(y * y_prev), ...)
lk <- function(...) latkes(..., window = c(0, 1024, 0, 768), kernel = ~ s(dist, k = 4))
kern <- list(dist = function(d) -d / 150)

fuzz_cases <- list(
  # snce(): arguments
  list("snce ratio NA", function() sn(fuzz_chain, ru, ratio = NA), "nce_error_input"),
  list("snce ratio NaN", function() sn(fuzz_chain, ru, ratio = NaN), "nce_error_input"),
  list("snce ratio Inf", function() sn(fuzz_chain, ru, ratio = Inf), "nce_error_input"),
  list("snce ratio 0", function() sn(fuzz_chain, ru, ratio = 0), "nce_error_input"),
  list("snce ratio 2.5", function() sn(fuzz_chain, ru, ratio = 2.5), "nce_error_input"),
  list("snce ratio string", function() sn(fuzz_chain, ru, ratio = "5"), "nce_error_input"),
  list("snce ratio two values", function() sn(fuzz_chain, ru, ratio = c(2, 3)), "nce_error_input"),
  list("snce ratio 1e7 (size)", function() sn(fuzz_chain, ru, ratio = 1e7), "nce_error_size"),
  list("snce ratio 1e9 (size)", function() sn(fuzz_chain, ru, ratio = 1e9), "nce_error_size"),
  list("snce order 0", function() sn(fuzz_chain, ru, order = 0), "nce_error_input"),
  list("snce cluster unknown", function() sn(fuzz_chain, ru, cluster = "subject"), "nce_error_input"),
  list("snce order NA", function() sn(fuzz_chain, ru, order = NA), "nce_error_input"),
  list("snce data not a data frame", function() sn(fuzz_chain$y, ru), "nce_error_input"),
  list("snce data 0 rows", function() sn(fuzz_chain[0, , drop = FALSE], ru), "nce_error_input"),
  list("snce data 1 row", function() suppressWarnings(sn(fuzz_chain[1, , drop = FALSE], ru)), "nce_error_data"),
  list("snce state NA", function() sn(data.frame(y = c(fuzz_chain$y[1:5], NA, fuzz_chain$y[7:60])), ru),
       "nce_error_data"),
  list("snce state Inf", function() sn(data.frame(y = c(Inf, fuzz_chain$y[-1])), ru), "nce_error_data"),
  list("snce state character", function() sn(data.frame(y = as.character(fuzz_chain$y)), ru), "nce_error_input"),
  list("snce state outside support", function() sn(data.frame(y = fuzz_chain$y + 5), ru), "nce_error_support"),
  list("snce formula two-sided", function() snce(y ~ I(y * y_prev), fuzz_chain, ru), "nce_error_input"),
  list("snce reference wrong", function() sn(fuzz_chain, list(kind = "uniform")), "nce_error_input"),
  list("snce intercept wrong", function() sn(fuzz_chain, ru, intercept = "sequence"), "nce_error_input"),
  list("snce group missing column", function() sn(fuzz_chain, ru, group = "nope"), "nce_error_input"),
  list("snce cluster one sequence warns", function() sn(fuzz_chain, ru, ratio = 3, cluster = "sequence"),
       "nce_warning_one_cluster", "warning"),
  list("snce sp wrong length", function() snce(~ s(y, k = 4), fuzz_chain, ru, ratio = 3, sp = c(1, 2, 3)),
       "nce_error_input"),
  list("snce transition intercepts without a kernel term",
       function() snce(~ 1, fuzz_chain, ru, intercept = "transition"),
       "nce_error_input"),
  # kernels
  list("kernel_normal sd negative", function() kernel_normal(c(y = -1)), "nce_error_input"),
  list("kernel_normal sd NA", function() kernel_normal(c(y = NA)), "nce_error_input"),
  list("kernel_normal sd unnamed", function() kernel_normal(0.1), "nce_error_input"),
  list("kernel_normal window reversed", function() kernel_normal(c(y = 0.1), window = list(y = c(1, 0))),
       "nce_error_input"),
  list("kernel_custom sample not a function", function() kernel_custom(1, function(x, prev) 0, "y"), "nce_error_input"),
  list("kernel_custom vars NA", function() kernel_custom(function(p, n) 0, function(x, p) 0, NA_character_),
       "nce_error_input"),
  # snce methods
  list("predict snce newdata not a data frame", function() predict(fuzz_snce, 1:3), "nce_error_input"),
  list("predict snce newdata character state", function() predict(fuzz_snce, data.frame(y = "0.2", y_prev = 0.5)),
       "nce_error_input"),
  list("predict snce se.fit NA", function() predict(fuzz_snce, se.fit = NA), "nce_error_input"),
  list("confint snce level NA", function() confint(fuzz_snce, level = NA), "nce_error_input"),
  list("confint snce level 1", function() confint(fuzz_snce, level = 1), "nce_error_input"),
  list("simulate snce nsim 2.7", function() simulate(fuzz_snce, nsim = 2.7), "nce_error_input"),
  list("simulate snce nsim NA", function() simulate(fuzz_snce, nsim = NA), "nce_error_input"),
  list("simulate snce nsim 2e9", function() simulate(fuzz_snce, nsim = 2e9), "nce_error_size"),
  list("simulate snce candidates 1e12 (size)", function() simulate(fuzz_snce, candidates = 1e9), "nce_error_size"),
  list("logLik snce n_draws 0", function() logLik(fuzz_snce, normalise = "reference", n_draws = 0), "nce_error_input"),
  list("anova snce not nested", function() anova(fuzz_snce, fuzz_snce), "nce_error_input"),
  list("plot snce select out of range", function() plot(fuzz_snce, select = 9), "nce_error_input"),
  # latkes()
  list("latkes ratio 1e7 (size)", function() lk(fuzz_fix, group = "trial", ratio = 1e7), "nce_error_size"),
  list("latkes ratio 1e9 (size, past the integer range)", function() lk(fuzz_fix, group = "trial", ratio = 1e9),
       "nce_error_size"),
  list("latkes ratio NA", function() lk(fuzz_fix, group = "trial", ratio = NA), "nce_error_input"),
  list("latkes order 3", function() lk(fuzz_fix, group = "trial", order = 3), "nce_error_input"),
  list("latkes cluster unknown", function() lk(fuzz_fix, group = "trial", cluster = "subject"), "nce_error_input"),
  list("latkes outside unknown", function() lk(fuzz_fix, group = "trial", outside = "keep"), "nce_error_input"),
  list("latkes x not a column", function() lk(fuzz_fix, x = "nope"), "nce_error_input"),
  list("latkes coordinate character", function() lk(transform(fuzz_fix, x = as.character(x))), "nce_error_input"),
  list("latkes coordinate NA", function() lk(transform(fuzz_fix, x = replace(x, 3, NA))), "nce_error_data"),
  list("latkes 0 rows", function() lk(fuzz_fix[0, ]), "nce_error_input"),
  list("latkes window Inf", function() latkes(fuzz_fix, window = c(0, Inf, 0, 768)), "nce_error_input"),
  list("latkes window width overflows", function() latkes(fuzz_fix, window = c(-1e308, 1e308, 0, 768)),
       "nce_error_input"),
  list("latkes unknown argument", function() lk(fuzz_fix, group = "trial", bogus = 1), "nce_error_input"),
  list("latkes by missing column", function() lk(fuzz_fix, by = "nope"), "nce_error_input"),
  # latkes methods
  list("predict latkes without x_prev or raw coordinates", function() predict(fuzz_latkes, data.frame(a = 1)),
       "nce_error_input"),
  list("predict latkes x_prev NA",
       function() predict(fuzz_latkes, data.frame(x = 500, y = 400, x_prev = NA, y_prev = 300)),
       "nce_error_input"),
  list("predict latkes y_prev missing", function() predict(fuzz_latkes, data.frame(x = 500, y = 400, x_prev = 3)),
       "nce_error_input"),
  list("predict latkes grid NA", function() predict(fuzz_latkes, type = "link", normalise = "grid", grid = c(NA, 4)), "nce_error_input"),
  list("predict latkes grid huge (size)", function() predict(fuzz_latkes, type = "link", normalise = "grid", grid = c(1e8, 1e8)),
       "nce_error_size"),
  list("predict latkes refine even", function() predict(fuzz_latkes, type = "link", normalise = "grid", refine = 4), "nce_error_input"),
  list("predict latkes lpmatrix grid", function() predict(fuzz_latkes, type = "lpmatrix", normalise = "grid"),
       "nce_error_unsupported"),
  list("latkes_effects level 2", function() latkes_effects(fuzz_latkes, level = 2), "nce_error_input"),
  list("latkes_effects level NA", function() latkes_effects(fuzz_latkes, level = NA), "nce_error_input"),
  list("latkes_effects n_grid 0", function() latkes_effects(fuzz_latkes, n_grid = 0), "nce_error_input"),
  list("simulate latkes nsim 2.7", function() simulate(fuzz_latkes, nsim = 2.7), "nce_error_input"),
  list("simulate latkes nsim 2e9", function() simulate(fuzz_latkes, nsim = 2e9), "nce_error_size"),
  list("simulate latkes grid huge (size)", function() simulate(fuzz_latkes, grid = c(1e6, 1e6)), "nce_error_size"),
  # rlatkes()
  list("rlatkes nsim-like n 2.7", function() rlatkes(2.7, kern), "nce_error_input"),
  list("rlatkes n NA", function() rlatkes(NA, kern), "nce_error_input"),
  list("rlatkes n below n_trials", function() rlatkes(3, kern, n_trials = 5), "nce_error_input"),
  list("rlatkes n huge (size)", function() rlatkes(2e9, kern), "nce_error_size"),
  list("rlatkes n_subjects 0", function() rlatkes(10, kern, n_subjects = 0), "nce_error_input"),
  list("rlatkes window width overflows", function() rlatkes(10, kern, window = c(-1e308, 1e308, 0, 768)),
       "nce_error_input"),
  list("rlatkes window NaN", function() rlatkes(10, kern, window = c(0, NaN, 0, 768)), "nce_error_input"),
  list("rlatkes grid huge (size)", function() rlatkes(10, kern, grid = c(1e6, 1e6)), "nce_error_size"),
  list("rlatkes kernel not functions", function() rlatkes(10, list(dist = 3)), "nce_error_input"),
  list("rlatkes kernel returns NA", function() rlatkes(10, list(dist = function(d) d * NA)), "nce_error_input")
)

test_that("the fuzz table has at least 40 cases", {
  expect_gte(length(fuzz_cases), 40L)
})

for (cs in fuzz_cases) {
  local({
    cs <- cs
    test_that(paste("fuzz:", cs[[1]]), {
      if (length(cs) >= 4L && cs[[4]] == "warning") {
        expect_warning(cs[[2]](), class = cs[[3]])
      } else {
        expect_error(cs[[2]](), class = cs[[3]])
      }
    })
  })
}

test_that("simulate() of sequence fits and rlatkes() refuse huge sizes at once", {
  old <- options(nce.max_memory = 8 * 2^30)
  on.exit(options(old))
  expect_error(rlatkes(1e8, kern), "`n`", class = "nce_error_size")
  expect_error(simulate(fuzz_snce, nsim = 1e8), "nsim", class = "nce_error_size")
  expect_error(simulate(fuzz_latkes, nsim = 1e8), "nsim", class = "nce_error_size")
})

test_that("snce() refuses unknown formula variables as nce() does", {
  set.seed(1)
  chain <- data.frame(y = stats::runif(40))
  expect_error(snce(~ I(y * w_prev), chain, ref_uniform(y = c(0, 1)), ratio = 2), "w_prev", class = "nce_error_input")
  expect_error(nce(~ I(y * w), chain, ref_uniform(y = c(0, 1)), ratio = 2), "w", class = "nce_error_input")
})

test_that("snce predict() needs the states in newdata and gives density 0 outside the reference", {
  # A state missing from newdata was looked up in the formula's environment.
  y <- runif(20)  # nolint: object_usage_linter. (the variable the old lookup found)
  expect_error(predict(fuzz_snce, data.frame(y_prev = runif(5))), "lacks column\\(s\\) y", class = "nce_error_input")
  nd <- data.frame(y = c(0.5, 2, -1, Inf), y_prev = 0.5)
  p <- predict(fuzz_snce, nd, type = "response", se.fit = TRUE)
  expect_gt(p$fit[[1]], 0)
  expect_identical(unname(p$fit[2:4]), c(0, 0, 0))
  expect_identical(unname(p$se.fit[2:4]), c(0, 0, 0))
  expect_identical(unname(predict(fuzz_snce, nd)[2:4]), rep(-Inf, 3))
  expect_identical(unname(predict(fuzz_snce, nd, type = "log_kernel")[2:4]), rep(-Inf, 3))
  # Inside the support, the prediction is as before the check.
  expect_equal(predict(fuzz_snce, nd[1, ]), predict(fuzz_snce, data.frame(y = 0.5, y_prev = 0.5)))
})

test_that("a latkes collection's augment() keeps one `by` column", {
  skip_if_not_installed("broom")
  set.seed(45)
  fx <- rbind(transform(fuzz_fix, subject = "a"), transform(fuzz_fix, subject = "b"))
  co <- latkes(fx, group = "trial", by = "subject", window = c(0, 1024, 0, 768), ratio = 3, kernel = ~ s(dist, k = 4),
               intercept = ~ s(x_prev, y_prev, k = 6))
  a <- broom::augment(co)
  expect_identical(sum(names(a) == "subject"), 1L)
  expect_setequal(unique(a$subject), c("a", "b"))
})

test_that("logLik() of a latkes fit names `newdata` for 0 rows", {
  expect_error(logLik(fuzz_latkes, newdata = fuzz_fix[0, ]), "`newdata` must have at least 1 row",
               class = "nce_error_input")
})

test_that("rlatkes() names `kernel` when it is -Inf everywhere", {
  k <- list(dist = function(d) rep(-Inf, length(d)))
  expect_error(rlatkes(20, kernel = k, window = c(0, 100, 0, 100), grid = c(8, 8)), "`kernel` is -Inf at every move",
               class = "nce_error_input")
})

test_that("latkes() names `kernel` for a variable it does not know", {
  expect_error(latkes(fuzz_fix, group = "trial", window = c(0, 1024, 0, 768), ratio = 3,
                      kernel = ~ s(dist, k = 4) + nope), "`kernel` uses nope", class = "nce_error_input")
})

test_that("latkes_effects() refuses a huge grid at once", {
  t0 <- proc.time()[["elapsed"]]
  expect_error(latkes_effects(fuzz_latkes, n_grid = 1e9), "`n_grid`", class = "nce_error_size")
  expect_lt(proc.time()[["elapsed"]] - t0, 2)
})

test_that("in-sample predict() of snce and latkes fits names a transition by the data row it ends at", {
  # As predict.glm() names fitted values: predict(fit)["k"] and predict(fit, newdata = data)["k"]
  # are the same transition (they were the k-th transition and the one ending at row k).
  p <- predict(fuzz_snce)
  q <- predict(fuzz_snce, newdata = fuzz_chain)
  expect_identical(names(p), as.character(2:61))
  expect_equal(q[names(p)], p, tolerance = 1e-12)
  expect_true(is.na(q[["1"]]))
  pl <- predict(fuzz_latkes)
  ql <- predict(fuzz_latkes, newdata = fuzz_fix)
  expect_equal(ql[names(pl)], pl, tolerance = 1e-12)
  # Each trial's first fixation starts a sequence: no transition ends there.
  starts <- as.character(which(!duplicated(fuzz_fix$trial)))
  expect_false(any(starts %in% names(pl)))
  # Row names of the data carry over.
  ch <- fuzz_chain
  rownames(ch) <- paste0("t", seq_len(nrow(ch)))
  set.seed(43)
  f <- snce(~ I(y * y_prev), ch, ref_uniform(y = c(0, 1)), ratio = 3, intercept = ~ s(y_prev, k = 4))
  expect_identical(names(predict(f)), paste0("t", 2:61))
})

test_that("latkes() without `group` warns when the data look like several trials", {
  set.seed(45)
  expect_warning(lk(fuzz_fix, ratio = 3, intercept = ~ s(x_prev, y_prev, k = 6)),
                 "column trial looks like a trial or subject id", class = "nce_warning_group")
  # A restarting fixation index alone is named too.
  d <- fuzz_fix[setdiff(names(fuzz_fix), c("trial", "fixation"))]
  d$fix_index <- stats::ave(seq_len(nrow(d)), fuzz_fix$trial, FUN = seq_along)
  set.seed(45)
  expect_warning(lk(d, ratio = 3, intercept = ~ s(x_prev, y_prev, k = 6)), "fixation index fix_index restarts",
                 class = "nce_warning_group")
  # `group = NULL` says the rows are one sequence; one trial or a steady index gives no warning.
  set.seed(45)
  expect_no_warning(lk(fuzz_fix, group = NULL, ratio = 3, intercept = ~ s(x_prev, y_prev, k = 6)))
  one <- fuzz_fix[fuzz_fix$trial == 1, ]
  set.seed(45)
  expect_no_warning(lk(one, ratio = 3, intercept = ~ s(x_prev, y_prev, k = 6)))
})

test_that("#76: snce() names a state column that is not a syntactic name, not R's parse error", {
  ch <- data.frame(`my y` = fuzz_chain$y, check.names = FALSE)
  expect_error(snce(~ I(`my y` * `my y_prev`), ch, ref_uniform(`my y` = c(0, 1)), ratio = 3),
               "the state column\\(s\\) \"my y\" .* not syntactic R names.*my\\.y", class = "nce_error_input")
})
