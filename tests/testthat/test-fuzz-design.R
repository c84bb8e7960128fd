# Hostile inputs for the design functions: each gives a classed condition, never a crash.

dm <- death_model()
eig_args <- list(simulator = dm$simulator, summaries = dm$summaries, prior = dm$prior, design = c(t = 1),
                 n = 100, batch = TRUE)
opt_args <- list(simulator = dm$simulator, summaries = dm$summaries, prior = dm$prior, lower = c(t = 0.01),
                 upper = c(t = 4), n = 100, batch = TRUE, n_initial = 4, rounds = 0, n_final = 0)

test_that("design_eig refuses hostile arguments with nce_error_input", {
  bad <- list(
    simulator = list(NULL, 1, "f"), summaries = list(NULL, 2), prior = list(NULL, list(names = "b"), 1),
    design = list(NA, NaN, Inf, -Inf, 1, c(1, 2), c(t = NA), c(t = Inf), c(t = "1"), list(t = 1), numeric(0),
                  c(t = 1, t = 2), stats::setNames(1, "")),
    n = list(NA, NaN, Inf, -1, 0, 39, 1.5, "100", c(100, 200)),
    batch = list(NA, 1, "yes", c(TRUE, FALSE)),
    formula = list(1, "~ s(b)", y ~ b),
    n_shuffle = list(0, 101, NA, 1.5), held_out = list(0, 1, NA, -0.5, 2, Inf), n_marginal = list(0, 1001, NA)
  )
  for (arg in names(bad)) for (v in bad[[arg]]) {
    a <- eig_args
    a[arg] <- list(v)
    expect_error(do.call(design_eig, a), class = "nce_error_input", info = paste(arg, deparse(v)))
  }
  # A held_out leaving fewer than 20 pairs on a side.
  expect_error(do.call(design_eig, modifyList(eig_args, list(n = 40, held_out = 0.9, folds = 1))),
               "`held_out` = 0.9 leaves 4 pairs to train", class = "nce_error_input")
  # #76: a held_out beside cross-fitting, where each fold is held out in turn, is refused, not ignored.
  for (f in list(eig_args, opt_args)) {
    fun <- if (is.null(f$design)) design_optimise else design_eig
    expect_error(do.call(fun, modifyList(f, list(held_out = 0.95))),
                 "`held_out` applies to a single split \\(`folds = 1`\\) only: with `folds` = 5",
                 class = "nce_error_input")
  }
})

test_that("design_optimise refuses hostile arguments with nce_error_input", {
  bad <- list(
    lower = list(NA, c(t = NA), c(t = Inf), c(s = 0.01), c(t = 5), 0.01, c(a = 0, b = 0, c = 0), "0"),
    upper = list(NA, c(t = NaN), c(t = -Inf), c(t = 0.01), c(u = 4), 4),
    n_initial = list(NA, 3, 1001, 4.5, "9"), n_refine = list(0, 101, NA), rounds = list(-1, 11, NA, 1.5),
    estimator = list("mean", NA, 1, c("plugin", "nwj")), level = list(0, 1, NA, 95),
    n_final = list(-1, 10, NA, 39.5), n = list(NA, 10, Inf)
  )
  for (arg in names(bad)) for (v in bad[[arg]]) {
    a <- opt_args
    a[arg] <- list(v)
    expect_error(do.call(design_optimise, a), class = "nce_error_input", info = paste(arg, deparse(v)))
  }
  # Two design variables: 2-D needs n_initial >= 9.
  expect_error(design_optimise(dm$simulator, dm$summaries, dm$prior, lower = c(a = 0, b = 0), upper = c(a = 1, b = 1),
                               n = 100, n_initial = 4), class = "nce_error_input")
})

test_that("death_model and its exact EIG refuse hostile arguments", {
  for (v in list(NA, 0, 1e5, 2.5, "50")) expect_error(death_model(n_individuals = v), class = "nce_error_input")
  for (v in list(NA, Inf, "1")) expect_error(death_model(prior_mean = v), class = "nce_error_input")
  for (v in list(NA, 0, -1, Inf)) expect_error(death_model(prior_sd = v), class = "nce_error_input")
  for (v in list(0, 3, NA)) expect_error(death_model(groups = v), class = "nce_error_input")
  for (v in list(NA, NaN, Inf, 0, -1, "1", numeric(0), matrix(1, 2, 3))) {
    expect_error(death_model_eig(v), class = "nce_error_input", info = deparse(v))
    expect_error(death_model_jsd(v), class = "nce_error_input", info = deparse(v))
  }
  for (v in list(100, 10, 1e6, NA)) expect_error(death_model_eig(1, nodes = v), class = "nce_error_input")
})

test_that("sizes beyond the memory limit are refused before simulating", {
  withr_opt <- options(nce.max_memory = 1e4)
  on.exit(options(withr_opt))
  expect_error(do.call(design_eig, modifyList(eig_args, list(n = 1e6))), class = "nce_error_size")
  expect_error(do.call(design_optimise, modifyList(opt_args, list(n = 1e6))), class = "nce_error_size")
})

test_that("failing simulators give classed conditions, not crashes", {
  boom <- function(theta, n, design) stop("no")
  expect_error(suppressWarnings(do.call(design_eig, modifyList(eig_args, list(simulator = boom)))),
               class = "nce_error_simulation")
  # Most simulations failing: fewer than 40 succeed.
  few <- function(theta, n, design) {
    x <- cbind(dead = stats::rbinom(n, 50, 0.5))
    x[-(1:10), ] <- NA
    x
  }
  expect_error(suppressWarnings(do.call(design_eig, modifyList(eig_args, list(simulator = few)))),
               class = "nce_error_simulation")
  # Some failing: counted and reported with a warning, the estimate still made.
  some <- function(theta, n, design) {
    x <- dm$simulator(theta, n, design)
    x[1:5, ] <- NaN
    x
  }
  set.seed(1)
  expect_warning(e <- do.call(design_eig, modifyList(eig_args, list(simulator = some, n = 200))),
                 class = "nce_warning_simulation")
  expect_gt(e$n_failed, 0)
  # Odd summary names (not syntactic) are refused by the classifier's formula.
  odd <- function(theta, n, design) cbind(`dead %` = dm$simulator(theta, n, design)[, 1])
  expect_error(do.call(design_eig, modifyList(eig_args, list(simulator = odd))), class = "nce_error_input")
})

test_that("methods refuse what makes no sense and bad newdata", {
  set.seed(2)
  e <- do.call(design_eig, modifyList(eig_args, list(n = 100)))
  expect_error(predict(e, data.frame(b = 1)), class = "nce_error_input")
  expect_error(predict(e, "x"), class = "nce_error_input")
  expect_error(predict(e, type = "bogus"), class = "nce_error_input")
  expect_error(confint(e, parm = "zzz"), class = "nce_error_input")
  expect_error(confint(e, level = 2), class = "nce_error_input")
  expect_error(logLik(e), class = "nce_error_unsupported")
  expect_error(ratio_posterior(list(), 1), class = "nce_error_input")
})

test_that("predict() of a design warns outside the design range and at a negative EIG", {
  set.seed(1)
  o <- do.call(design_optimise, modifyList(opt_args, list(n_initial = 6)))
  expect_no_warning(predict(o, data.frame(t = c(0.5, 1.3))))
  cls <- character()
  p <- withCallingHandlers(predict(o, data.frame(t = c(-10, 0.5, 50))), warning = function(w) {
    cls <<- c(cls, class(w)[1L])
    invokeRestart("muffleWarning")
  })
  expect_true("nce_warning_extrapolation" %in% cls)
  if (any(p < 0)) expect_true("nce_warning_negative_eig" %in% cls)
  # Far outside, the smoothed EIG may also be negative: both warnings are collected.
  ws <- list()
  withCallingHandlers(predict(o, data.frame(t = 8)), warning = function(w) {
    ws[[length(ws) + 1L]] <<- w
    invokeRestart("muffleWarning")
  })
  expect_true(any(vapply(ws, function(w) {
    inherits(w, "nce_warning_extrapolation") && grepl("`newdata` has t outside", conditionMessage(w))
  }, TRUE)))
  expect_error(predict(o, data.frame(t = "1")), "newdata", class = "nce_error_input")
})

test_that("#76: `held_out` is used with folds = 1 and its default holds out half", {
  set.seed(3)
  a <- do.call(design_eig, modifyList(eig_args, list(folds = 1)))
  set.seed(3)
  b <- do.call(design_eig, modifyList(eig_args, list(folds = 1, held_out = 0.5)))
  set.seed(3)
  c3 <- do.call(design_eig, modifyList(eig_args, list(folds = 1, held_out = 0.3)))
  expect_identical(a$estimates, b$estimates)
  expect_equal(a$n_test, 50)
  expect_equal(c3$n_test, 30)
  # update() of a cross-fitted estimate keeps working (its stored held_out is NULL).
  set.seed(4)
  e <- do.call(design_eig, eig_args)
  expect_null(e$args$held_out)
  expect_identical(update(e)$estimates, e$estimates)
})
