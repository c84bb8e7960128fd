# Hostile inputs for nce(), its methods, the references, nce_control() and options: each gives
# a classed condition (never a crash, a bare base-R error or a silent wrong answer).

fuzz_data <- function() {
  set.seed(41)
  data.frame(y = rtexp(50, 2))
}

# fuzz_data() `d`, the uniform reference `u`, and a linear and a smooth fit to them (seed 42).
fuzz_fits <- function() {
  d <- fuzz_data()
  u <- ref_uniform(y = c(0, 1))
  set.seed(42)
  fit <- nce(~ y, d, u, ratio = 3)
  gfit <- nce(~ s(y, k = 4), d, u, ratio = 3)
  list(d = d, u = u, fit = fit, gfit = gfit)
}

test_that("hostile inputs give classed errors", {
  ff <- fuzz_fits()
  d <- ff$d
  u <- ff$u
  fit <- ff$fit
  gfit <- ff$gfit
  d_chr <- data.frame(y = as.character(d$y))
  cases <- list(
    # nce(): formula, data, reference, ratio
    list("formula not a formula", function() nce("y", d, u), "nce_error_input"),
    list("two-sided formula", function() nce(y ~ y, d, u), "nce_error_input"),
    list("no intercept", function() nce(~ y - 1, d, u), "nce_error_input"),
    list("formula var not in reference", function() nce(~ z, d, u), "nce_error_input"),
    list("data a matrix", function() nce(~ y, as.matrix(d), u), "nce_error_input"),
    list("data 0 rows", function() nce(~ y, d[0, , drop = FALSE], u), "nce_error_input"),
    list("data lacks column", function() nce(~ y, data.frame(z = 1), u), "nce_error_input"),
    list("character column", function() nce(~ y, d_chr, u), "nce_error_input"),
    list("factor column", function() nce(~ y, data.frame(y = factor(d$y)), u), "nce_error_input"),
    list("NA in data", function() nce(~ y, data.frame(y = c(d$y, NA)), u), "nce_error_data"),
    list("Inf in data", function() nce(~ y, data.frame(y = c(d$y, Inf)), u), "nce_error_data"),
    list("NaN in data", function() nce(~ y, data.frame(y = c(d$y, NaN)), u), "nce_error_data"),
    list("data outside support", function() nce(~ y, data.frame(y = c(d$y, 2)), u), "nce_error_support"),
    list("reference not a reference", function() nce(~ y, d, list(vars = "y")), "nce_error_input"),
    list("ratio NA", function() nce(~ y, d, u, ratio = NA), "nce_error_input"),
    list("ratio NaN", function() nce(~ y, d, u, ratio = NaN), "nce_error_input"),
    list("ratio Inf", function() nce(~ y, d, u, ratio = Inf), "nce_error_input"),
    list("ratio negative", function() nce(~ y, d, u, ratio = -1), "nce_error_input"),
    list("ratio 0", function() nce(~ y, d, u, ratio = 0), "nce_error_input"),
    list("ratio string", function() nce(~ y, d, u, ratio = "20"), "nce_error_input"),
    list("ratio two numbers", function() nce(~ y, d, u, ratio = c(1, 2)), "nce_error_input"),
    list("ratio tiny", function() nce(~ y, d, u, ratio = 1e-9), "nce_error_input"),
    list("ratio huge (memory)", function() nce(~ y, d, u, ratio = 1e7), "nce_error_size"),
    list("discrete NA", function() nce(~ s(y, k = 4), d, u, ratio = 3, discrete = NA), "nce_error_input"),
    list("discrete \"yes\"", function() nce(~ s(y, k = 4), d, u, ratio = 3, discrete = "yes"), "nce_error_input"),
    list("discrete two values", function() nce(~ s(y, k = 4), d, u, discrete = c(TRUE, FALSE)), "nce_error_input"),
    list("discrete 1", function() nce(~ s(y, k = 4), d, u, ratio = 3, discrete = 1), "nce_error_input"),
    list("discrete without smooths", function() nce(~ y, d, u, ratio = 3, discrete = TRUE), "nce_error_input"),
    list("discrete poisson", function() nce(~ s(y, k = 4), d, u, method = "poisson", discrete = TRUE),
         "nce_error_input"),
    list("ratio overflow (rows)", function() nce(~ y, d, u, ratio = 1e12), "nce_error_size"),
    list("sp without smooths", function() nce(~ y, d, u, sp = 1), "nce_error_input"),
    list("knots without smooths", function() nce(~ y, d, u, knots = list(y = c(0, 1))), "nce_error_input"),
    list("sp wrong length", function() nce(~ s(y, k = 4), d, u, sp = c(1, 2)), "nce_error_input"),
    list("sp negative", function() nce(~ s(y, k = 4), d, u, sp = -1), "nce_error_input"),
    list("smooth with poisson", function() nce(~ s(y, k = 4), d, u, method = "poisson"), "nce_error_input"),
    list("weights NA-free but wrong length", function() nce(~ y, d, u, weights = 1:2), "nce_error_input"),
    list("weights Inf", function() nce(~ y, d, u, weights = rep(Inf, 50)), "nce_error_input"),
    list("weights all 0", function() nce(~ y, d, u, weights = rep(0, 50)), "nce_error_input"),
    list("weights character", function() nce(~ y, d, u, weights = rep("a", 50)), "nce_error_input"),
    list("subset wrong length", function() nce(~ y, d, u, subset = c(TRUE, FALSE)), "nce_error_input"),
    list("subset selects nothing", function() nce(~ y, d, u, subset = y > 2), "nce_error_input"),
    list("subset NA index", function() nce(~ y, d, u, subset = c(1, NA)), "nce_error_input"),
    list("na.action na.pass", function() nce(~ y, d, u, na.action = na.pass), "nce_error_input"),
    list("na.action nonsense", function() nce(~ y, d, u, na.action = "drop"), "nce_error_input"),
    list("control unknown", function() nce(~ y, d, u, control = list(tol = 1)), "nce_error_input"),
    list("control NA maxit", function() nce(~ y, d, u, control = list(maxit = NA)), "nce_error_input"),
    list("control a number", function() nce(~ y, d, u, control = 3), "nce_error_input"),
    # nce_control()
    list("epsilon NA", function() nce_control(epsilon = NA), "nce_error_input"),
    list("epsilon 0", function() nce_control(epsilon = 0), "nce_error_input"),
    list("epsilon Inf", function() nce_control(epsilon = Inf), "nce_error_input"),
    list("maxit 2.5", function() nce_control(maxit = 2.5), "nce_error_input"),
    list("maxit 0", function() nce_control(maxit = 0), "nce_error_input"),
    list("maxit string", function() nce_control(maxit = "5"), "nce_error_input"),
    # references
    list("ref_uniform unnamed", function() ref_uniform(c(0, 1)), "nce_error_input"),
    list("ref_uniform reversed", function() ref_uniform(y = c(1, 0)), "nce_error_input"),
    list("ref_uniform NA", function() ref_uniform(y = c(0, NA)), "nce_error_input"),
    list("ref_uniform Inf", function() ref_uniform(y = c(0, Inf)), "nce_error_input"),
    list("ref_uniform character", function() ref_uniform(y = c("0", "1")), "nce_error_input"),
    list("ref_normal NaN mean", function() ref_normal(y = c(NaN, 1)), "nce_error_input"),
    list("ref_normal sd 0", function() ref_normal(y = c(0, 0)), "nce_error_input"),
    list("ref_normal cov wrong size", function() ref_normal(a = 0, b = 0, cov = diag(3)), "nce_error_input"),
    list("ref_normal cov Inf", function() ref_normal(a = 0, cov = Inf), "nce_error_input"),
    list("ref_normal nothing", function() ref_normal(), "nce_error_input"),
    list("ref_fit inflate NA", function() ref_fit(d, inflate = NA), "nce_error_input"),
    list("ref_fit inflate 0", function() ref_fit(d, inflate = 0), "nce_error_input"),
    list("ref_fit expand NA", function() ref_fit(d, "uniform", expand = NA), "nce_error_input"),
    list("ref_fit one row", function() ref_fit(d[1, , drop = FALSE]), "nce_error_input"),
    list("ref_fit character column", function() ref_fit(d_chr, vars = "y"), "nce_error_input"),
    list("ref_fit not a data frame", function() ref_fit(1:10), "nce_error_input"),
    list("ref_fit mixture components 0", function() ref_fit(d, "mixture", components = 0), "nce_error_input"),
    list("ref_fit mixture components 1.5", function() ref_fit(d, "mixture", components = 1.5), "nce_error_input"),
    list("ref_fit mixture components NA", function() ref_fit(d, "mixture", components = NA), "nce_error_input"),
    list("ref_fit mixture components 1e9", function() ref_fit(d, "mixture", components = 1e9), "nce_error_input"),
    list("ref_fit mixture too few rows", function() ref_fit(d[1:3, , drop = FALSE], "mixture", components = 2),
         "nce_error_input"),
    list("ref_fit mixture beyond the work bound",
         function() ref_fit(as.data.frame(matrix(rnorm(1e6), ncol = 5)), "mixture", components = 1:100),
         "nce_error_size"),
    list("ref_fit mixture constant column", function() ref_fit(data.frame(y = rep(1, 50)), "mixture"),
         "nce_error_input"),
    list("ref_fit mixture inflate -1", function() ref_fit(d, "mixture", inflate = -1), "nce_error_input"),
    list("relative NA", function() nce(~ y, d, u, relative = NA), "nce_error_input"),
    list("relative with given", function() nce(~ y, d, u, given = ~ y, relative = TRUE), "nce_error_input"),
    list("relative with start", function() nce(~ a * y, d, u, start = c(a = 1), relative = TRUE), "nce_error_input"),
    list("ref_custom sample not function", function() ref_custom(1, function(d) 0, "y"), "nce_error_input"),
    list("ref_custom vars NA", function() ref_custom(function(n) 0, function(d) 0, NA_character_), "nce_error_input"),
    list("ref_custom returns NA log q", function() {
      r <- ref_custom(function(n) data.frame(y = runif(n)), function(d) rep(NA_real_, nrow(d)), "y")
      nce(~ y, d, r)
    }, "nce_error_reference"),
    list("ref_custom returns wrong rows", function() {
      r <- ref_custom(function(n) data.frame(y = runif(2)), function(d) rep(0, nrow(d)), "y")
      nce(~ y, d, r)
    }, "nce_error_reference"),
    # predict
    list("predict newdata character", function() predict(fit, data.frame(y = c("0.2", "0.7"))), "nce_error_input"),
    list("predict newdata factor", function() predict(gfit, data.frame(y = factor(0.2))), "nce_error_input"),
    list("predict newdata lacks column", function() predict(fit, data.frame(z = 1)), "nce_error_input"),
    list("predict newdata a list", function() predict(fit, list(y = 1)), "nce_error_input"),
    list("predict se.fit NA", function() predict(fit, se.fit = NA), "nce_error_input"),
    list("predict gam se.fit string", function() predict(gfit, se.fit = "yes"), "nce_error_input"),
    # simulate, confint, vcov, update, anova, logLik
    list("simulate nsim NA", function() simulate(fit, nsim = NA), "nce_error_input"),
    list("simulate nsim 2.7", function() simulate(fit, nsim = 2.7), "nce_error_input"),
    list("simulate nsim 0", function() simulate(fit, nsim = 0), "nce_error_input"),
    list("simulate nsim Inf", function() simulate(fit, nsim = Inf), "nce_error_input"),
    list("simulate candidates NaN", function() simulate(fit, candidates = NaN), "nce_error_input"),
    list("simulate candidates huge", function() simulate(fit, candidates = 1e8), "nce_error_size"),
    list("confint level NA", function() confint(fit, level = NA), "nce_error_input"),
    list("confint level 1", function() confint(fit, level = 1), "nce_error_input"),
    list("confint level 95", function() confint(fit, level = 95), "nce_error_input"),
    list("confint parm unknown", function() confint(fit, parm = "z"), "nce_error_input"),
    list("confint parm out of range", function() confint(fit, parm = 7), "nce_error_input"),
    list("update formula with response", function() update(fit, y ~ .), "nce_error_input"),
    list("update formula a number", function() update(fit, 3), "nce_error_input"),
    list("update bad ratio", function() update(fit, ratio = -2), "nce_error_input"),
    list("anova with a non-fit", function() anova(fit, lm(y ~ 1, d)), "nce_error_input"),
    list("anova LRT", function() anova(fit, test = "LRT"), "nce_error_input"),
    list("anova different data", function() anova(fit, nce(~ y + I(y^2), d[1:20, , drop = FALSE], u)),
         "nce_error_input"),
    list("logLik newdata with NA", function() logLik(fit, newdata = data.frame(y = NA_real_)), "nce_error_input"),
    list("drop1 unknown scope", function() drop1(fit, scope = "z"), "nce_error_input")
  )
  for (case in cases) {
    expect_error(suppressWarnings(case[[2]]()), class = case[[3]], info = case[[1]])
  }
  expect_gte(length(cases), 40L)
})

test_that("vcov se_type and options are checked", {
  d <- fuzz_data()
  fit <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 3)
  e <- expect_error(vcov(fit, se_type = "robust"), class = "nce_error_input")
  expect_match(conditionMessage(e), "`se_type` must be one of \"sandwich\", \"naive\"", fixed = TRUE)
  expect_equal(vcov(fit, se_type = "naive"), vcov(fit, se_type = "n"))   # partial matching, as match.arg()
  expect_error(confint(fit, se_type = NA), class = "nce_error_input")
  expect_error(summary(fit, se_type = c("naive", "sandwich")), class = "nce_error_input")
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), method = "bogus"), "`method`", class = "nce_error_input")
  for (bad in list(1e6, 1e10, 0, -1, NA, 2.5, "2", c(1, 2), Inf)) {
    withr_threads <- options(nce.threads = bad)
    expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 3), "nce.threads",
                 class = "nce_error_input", info = format(bad))
    options(withr_threads)
  }
  old <- options(nce.max_memory = 1e4)
  on.exit(options(old))
  expect_error(nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 20), "ratio", class = "nce_error_size")
})

test_that("no silent coercion: character data is not fitted as a factor", {
  d <- fuzz_data()
  fit <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 3)
  e <- tryCatch(predict(fit, data.frame(y = c("0.2", "0.7"))), error = identity)
  expect_match(conditionMessage(e), "`newdata` column\\(s\\) y must be numeric")
  expect_identical(conditionCall(e)[[1L]], quote(predict.nce_fit))
})

test_that("density predictions at infinite y are 0; other types refuse infinite y", {
  ff <- fuzz_fits()
  nd <- data.frame(y = c(Inf, 0.5, -Inf))
  for (f in list(ff$fit, ff$gfit)) {
    p <- predict(f, nd, type = "density")
    expect_identical(unname(p[c(1, 3)]), c(0, 0))
    expect_true(is.finite(p[[2]]) && p[[2]] > 0)
    expect_identical(unname(predict(f, nd, type = "log_density")[c(1, 3)]), c(-Inf, -Inf))
    expect_error(predict(f, nd, type = "lpmatrix"), "newdata", class = "nce_error_data")
  }
  set.seed(43)
  nfit <- nce(~ s(y, k = 4), data.frame(y = rnorm(60)), ref_normal(y = 0, cov = 1), ratio = 3)
  expect_identical(unname(predict(nfit, data.frame(y = c(Inf, -Inf)), type = "density")), c(0, 0))
  expect_error(predict(nfit, data.frame(y = Inf), type = "terms"), "newdata", class = "nce_error_data")
})

test_that("duplicated column names in data and newdata are refused", {
  d <- fuzz_data()
  u <- ref_uniform(y = c(0, 1))
  dd <- data.frame(y = d$y, y = rev(d$y), check.names = FALSE)
  expect_error(nce(~ y, dd, u, ratio = 3), "duplicated", class = "nce_error_input")
  expect_error(nce(~ s(y, k = 4), dd, u, ratio = 3), "`data`", class = "nce_error_input")
  set.seed(42)
  fit <- nce(~ y, d, u, ratio = 3)
  expect_error(predict(fit, data.frame(y = 0.2, y = 0.9, check.names = FALSE)), "`newdata`",
               class = "nce_error_input")
})

test_that("a discrete reference value the data never take warns of separation", {
  set.seed(44)
  d <- data.frame(b = rep(1, 60))
  expect_warning(nce(~ b, d, ref_bernoulli(c(b = 0.5)), ratio = 3), "never takes", class = "nce_warning_separation")
  d2 <- data.frame(b = rep(c(0, 1), 30))
  expect_no_warning(nce(~ b, d2, ref_bernoulli(c(b = 0.5)), ratio = 3))
})

test_that("simulate() and size checks refuse at once, against the process's limits", {
  d <- fuzz_data()
  set.seed(42)
  fit <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 3)
  expect_error(simulate(fit, nsim = 1e8), "nsim", class = "nce_error_size")
  expect_error(nce:::check_nsim(1e8, 1e3), "nsim", class = "nce_error_size")
  expect_error(nce:::check_nsim(20, arg = "n_starts", max = 10), "n_starts", class = "nce_error_size")
  expect_error(nce:::check_nsim(0), class = "nce_error_input")
  # The limit is fixed for the process: the same on every call, at most the machine's RAM.
  expect_identical(nce:::available_memory(), nce:::available_memory())
  ram <- nce:::total_ram()
  if (length(ram) == 1L && is.finite(ram)) expect_lte(nce:::available_memory(), ram)
  old <- options(nce.max_memory = 1e6)
  on.exit(options(old))
  expect_identical(nce:::available_memory(), 1e6)
})

test_that("the address-space limit (ulimit -v) bounds the size checks", {
  skip_on_cran()
  skip_if_not(file.exists("/proc/self/limits") && nzchar(Sys.which("bash")))
  rscript <- file.path(R.home("bin"), "Rscript")
  cmd <- sprintf("ulimit -v 3000000 && '%s' -e 'cat(nce:::available_memory())'", rscript)
  out <- suppressWarnings(system2("bash", c("-c", shQuote(cmd)), stdout = TRUE, stderr = FALSE,
                                  env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = ":")))))
  skip_if(!length(out), "Rscript did not start under the limit")
  expect_lte(as.double(out[length(out)]), 3000000 * 1024)
})

test_that("an unwritable shard directory is a classed error naming `dir`", {
  ro <- "/proc"
  skip_if_not(dir.exists(ro) && !nce:::dir_writable(ro))
  expect_error(nce_shards(2, dir = ro), "`dir` of `shards`", class = "nce_error_input")
})

test_that("hostile inputs to network energies and neural classifiers give classed errors", {
  d <- fuzz_data()
  u <- ref_uniform(y = c(0, 1))
  set.seed(43)
  fit <- nce(~ mlp(y, hidden = 4), d, u, ratio = 3, control = list(max_epochs = 3))
  sim <- function(theta, n) matrix(rnorm(n * 5, theta[, "mu"]), n, 5)
  summ <- function(x) cbind(m = rowMeans(x))
  pr <- prior_uniform(mu = c(-1, 1))
  cases <- list(
    list("hidden negative", function() nce(~ mlp(y, hidden = -1), d, u), "nce_error_input"),
    list("ref_model burnin endless", function() ref_model(fit, burnin = 1e12), "nce_error_size"),
    list("drop1 of a network fit", function() drop1(fit), "nce_error_unsupported"),
    list("hidden NA", function() nce(~ mlp(y, hidden = NA), d, u), "nce_error_input"),
    list("hidden string", function() nce(~ mlp(y, hidden = "64"), d, u), "nce_error_input"),
    list("hidden huge", function() nce(~ mlp(y, hidden = 1e9), d, u), "nce_error_input"),
    list("activation NA", function() nce(~ mlp(y, activation = NA), d, u), "nce_error_input"),
    list("mlp of a constant", function() nce(~ mlp(1), d, u), "nce_error_input"),
    list("mlp of an unknown column", function() nce(~ mlp(z), d, u), "nce_error_input"),
    list("mlp with given", function() nce(~ mlp(y), d, u, given = ~ y), "nce_error_input"),
    list("mlp with sp", function() nce(~ mlp(y), d, u, sp = 1), "nce_error_input"),
    list("control not a list", function() nce(~ mlp(y), d, u, control = "fast"), "nce_error_input"),
    list("training endless", function() nce(~ mlp(y), d, u, control = list(max_epochs = 1e9, patience = 1e9)),
         "nce_error_input"),
    list("ratio training endless", function() {
      ratio_amortised(function(theta, n) matrix(rnorm(n, theta[, "mu"]), n, 1), NULL, pr, n = 50, batch = TRUE,
                      control = list(max_epochs = 2e9, patience = 1e9))
    }, "nce_error_input"),
    list("control unnamed", function() nce(~ mlp(y), d, u, control = list(3)), "nce_error_input"),
    list("batch_size 0", function() nce(~ mlp(y), d, u, control = list(batch_size = 0)), "nce_error_input"),
    list("max_epochs Inf", function() nce(~ mlp(y), d, u, control = list(max_epochs = Inf)), "nce_error_input"),
    list("step NaN", function() nce(~ mlp(y), d, u, control = list(step = NaN)), "nce_error_input"),
    list("weight_decay negative", function() nce(~ mlp(y), d, u, control = list(weight_decay = -1)),
         "nce_error_input"),
    list("n_starts 0", function() nce(~ mlp(y), d, u, control = list(n_starts = 0)), "nce_error_input"),
    list("backfit 0", function() nce(~ mlp(y), d, u, control = list(backfit = 0)), "nce_error_input"),
    list("backfit_tol negative", function() nce(~ mlp(y), d, u, control = list(backfit_tol = -1)),
         "nce_error_input"),
    list("smooth of a network input", function() nce(~ mlp(y) + s(y), d, u), "nce_error_input"),
    list("knots without smooths beside mlp", function() nce(~ mlp(y), d, u, knots = list(y = c(0, 1))),
         "nce_error_input"),
    list("predict type", function() predict(fit, type = "probability"), "nce_error_input"),
    list("predict newdata matrix", function() predict(fit, as.matrix(d)), "nce_error_input"),
    list("predict newdata character", function() predict(fit, data.frame(y = "a")), "nce_error_input"),
    list("predict se.fit NA", function() predict(fit, se.fit = NA), "nce_error_input"),
    list("simulate nsim 0", function() simulate(fit, nsim = 0), "nce_error_input"),
    list("simulate burnin -1", function() simulate(fit, burnin = -1), "nce_error_input"),
    list("simulate thin 0", function() simulate(fit, thin = 0), "nce_error_input"),
    list("simulate huge", function() simulate(fit, nsim = 1e12), "nce_error_input"),
    list("plot n_grid 1", function() plot(fit, n_grid = 1), "nce_error_input"),
    list("classifier unknown", function() ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, classifier = "rf"),
         "nce_error_input"),
    list("classifier NA", function() ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, classifier = NA),
         "nce_error_input"),
    list("mlp classifier with discrete", function() {
      ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, classifier = "mlp", discrete = TRUE)
    }, "nce_error_input"),
    list("mlp classifier bad hidden", function() {
      ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, classifier = "mlp", hidden = 0)
    }, "nce_error_input"),
    list("mlp classifier n_networks 0", function() {
      ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, classifier = "mlp", n_networks = 0)
    }, "nce_error_input"),
    list("mlp classifier n_networks 1.5", function() {
      ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, n_networks = 1.5)
    }, "nce_error_input"),
    list("mlp classifier n_networks huge", function() {
      ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, n_networks = 1e6)
    }, "nce_error_input"),
    list("mlp classifier bad control", function() {
      ratio_amortised(sim, summ, pr, n = 20, batch = TRUE, classifier = "mlp", control = list(foo = 1))
    }, "nce_error_input")
  )
  for (case in cases) {
    expect_error(suppressWarnings(case[[2]]()), class = case[[3]], info = case[[1]])
  }
})

test_that("na.exclude pads fitted() and predict() alike, with the data's row names", {
  set.seed(5)
  d <- data.frame(y = c(NA, runif(59)))
  for (form in list(~ y, ~ s(y, k = 4))) {
    f <- suppressWarnings(nce(form, d, ref_uniform(y = c(0, 1)), ratio = 3, na.action = na.exclude))
    p <- predict(f, type = "response")
    expect_identical(fitted(f), p)
    expect_length(p, 60L)
    expect_true(is.na(p[[1]]))
    expect_identical(names(p)[1:3], c("1", "2", "3"))
    omitted <- suppressWarnings(nce(form, d, ref_uniform(y = c(0, 1)), ratio = 3, na.action = na.omit))
    expect_length(fitted(omitted), 59L)
  }
})

test_that("arguments left out, duplicated reference columns, bad seeds and unknown update() arguments", {
  d <- data.frame(y = runif(30))
  expect_error(nce(~ y, d), "`reference` must be given", class = "nce_error_input")
  expect_error(snce(~ y, d), "`reference` must be given", class = "nce_error_input")
  expect_error(ref_uniform(y = c(0, 1), y = c(0, 2)), "more than once", class = "nce_error_input")
  expect_error(ref_normal(y = c(0, 1), y = c(0, 2)), "more than once", class = "nce_error_input")
  expect_error(ref_normal(y = 0, cov = -1), "`cov`", class = "nce_error_input")
  expect_error(ref_fit(data.frame(a = 1:5, b = 1)), "b are constant", class = "nce_error_input")
  set.seed(6)
  f <- nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 3)
  expect_error(simulate(f, seed = "a"), "`seed`", class = "nce_error_input")
  expect_error(update(f, foo = 1), "no argument\\(s\\) foo", class = "nce_error_input")
})

test_that("plot() of a Bernoulli fit draws its two values, not a curve through 0.5", {
  set.seed(7)
  db <- data.frame(a = rbinom(300, 1, 0.5), b = rbinom(300, 1, 0.3))
  f <- nce(~ a + b, db, ref_bernoulli(0.5, vars = c("a", "b")), ratio = 3)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_no_error(plot(f))
})

test_that("tidy() names `conf.level` when it refuses one", {
  skip_if_not_installed("broom")
  set.seed(8)
  d <- data.frame(y = runif(40))
  for (f in list(nce(~ y, d, ref_uniform(y = c(0, 1)), ratio = 3), nce(~ s(y, k = 4), d, ref_uniform(y = c(0, 1)), ratio = 3))) {
    expect_error(broom::tidy(f, conf.int = TRUE, conf.level = 5), "`conf.level`", class = "nce_error_input")
  }
})

test_that("nce_adapt() refuses arguments ref_model() does not have", {
  set.seed(12)
  d <- data.frame(x = rnorm(200))
  f <- nce(~ x + I(x^2), d, ref_normal(x = 0, cov = 9), ratio = 3)
  expect_error(nce_adapt(f, foo = 1), "not foo", class = "nce_error_input")
  expect_error(nce_adapt(f, 1, 2), "must name", class = "nce_error_input")
})

test_that("#76: a failing reference function, integer columns in ref_fit(), data gone before nce_adapt()", {
  d <- fuzz_data()
  # An error inside a custom reference's functions is the user's model failing, quoted.
  boom <- ref_custom(function(n) data.frame(y = runif(n)), function(u) stop("user boom"), "y")
  expect_error(nce(~ y, d, boom, ratio = 3), "`reference` failed at its `log_density\\(\\)`: user boom",
               class = "nce_error_model")
  boom_draw <- ref_custom(function(n) stop("draw boom"), function(u) rep(0, nrow(u)), "y")
  expect_error(nce(~ y, d, boom_draw, ratio = 3), "draw boom", class = "nce_error_model")
  # Integer columns: every family accepts them, and the mixture fits as on the same doubles.
  set.seed(5)
  di <- data.frame(a = sample(1:20, 200, TRUE), b = sample(1:50, 200, TRUE))
  set.seed(6)
  ri <- ref_fit(di, "mixture", components = 1:2)
  set.seed(6)
  rd <- ref_fit(as.data.frame(lapply(di, as.double)), "mixture", components = 1:2)
  expect_equal(ri$means, rd$means, tolerance = 1e-12)
  expect_s3_class(ref_fit(di, "normal"), "nce_reference")
  # ref_fit() names its own arguments, not the builders' `cov` and `x`.
  dc <- data.frame(a = 1:50 + 0.5)
  dc$b <- 2 * dc$a
  # (collinear columns: refused by the singularity check, which names the data's columns)
  e <- expect_error(ref_fit(dc, "normal"), "`data` columns a, b", class = "nce_error_data")
  expect_false(grepl("`cov`|`x`", conditionMessage(e)))
  # The data of a fit removed before nce_adapt(): a classed error saying so, not "object not found".
  local({
    dd <- fuzz_data()
    set.seed(7)
    f <- nce(~ y, dd, ref_uniform(y = c(0, 1)), ratio = 3)
    rm(dd)
    expect_error(nce_adapt(f), "the data the fit used \\(`data = dd`\\) are gone", class = "nce_error_data")
  })
})

test_that("#76: nce_adapt() refuses data changed since the fit, by the checksum stored with it", {
  dd <- fuzz_data()
  set.seed(8)
  f <- nce(~ y, dd, ref_uniform(y = c(0, 1)), ratio = 3)
  expect_type(f$data_hash, "character")
  # The same values however made keep the checksum: a column written back, an ALTREP 1:n and its copy.
  same <- dd
  same$y[1] <- dd$y[1]
  expect_identical(nce:::data_hash(same), f$data_hash)
  a <- data.frame(i = 1:10)
  b <- a
  b$i[1] <- 1L
  expect_identical(nce:::data_hash(a), nce:::data_hash(b))
  dd$y[3] <- 0.5
  expect_error(nce_adapt(f), "the data the fit used \\(`data = dd`\\) have changed since the fit",
               class = "nce_error_data")
  dd <- fuzz_data()[1:40, , drop = FALSE]
  expect_error(nce_adapt(f), "have changed", class = "nce_error_data")
  # Restored, the refit runs.
  dd <- fuzz_data()
  set.seed(9)
  expect_s3_class(nce_adapt(f, candidates = 3), "nce_fit")
})
