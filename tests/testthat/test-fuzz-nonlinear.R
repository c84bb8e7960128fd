# Hostile inputs to nonlinear nce(), nce_model(), ica_model(), rica(), ica_mle(): classed errors.
fuzz_nl <- function() {
  set.seed(1)
  d <- data.frame(y = rnorm(30))
  ref <- ref_normal(y = 0, cov = 2)
  f <- ~ -(y - mu)^2 / 2
  s <- c(mu = 0)
  x2 <- rica(40, diag(2))
  r2 <- ref_normal(x1 = 0, x2 = 0, cov = diag(2))
  list(
    list("start NA", function() nce(f, d, ref, start = c(mu = NA)), "nce_error_input"),
    list("start Inf", function() nce(f, d, ref, start = c(mu = Inf)), "nce_error_input"),
    list("start unnamed", function() nce(f, d, ref, start = 0), "nce_error_input"),
    list("start character", function() nce(f, d, ref, start = c(mu = "a")), "nce_error_input"),
    list("start duplicated", function() nce(f, d, ref, start = c(mu = 0, mu = 1)), "nce_error_input"),
    list("data NA", function() nce(f, data.frame(y = c(NA, 1, 2)), ref, start = s), "nce_error_data"),
    list("data Inf", function() nce(f, data.frame(y = c(Inf, 1, 2)), ref, start = s), "nce_error_data"),
    list("data 0 rows", function() nce(f, d[0, , drop = FALSE], ref, start = s), "nce_error_input"),
    list("data not a frame", function() nce(f, d$y, ref, start = s), "nce_error_input"),
    list("ratio 0", function() nce(f, d, ref, ratio = 0, start = s), "nce_error_input"),
    list("ratio NaN", function() nce(f, d, ref, ratio = NaN, start = s), "nce_error_input"),
    list("ratio huge", function() nce(f, d, ref, ratio = 1e15, start = s), "nce_error_size"),
    list("n_starts 0", function() nce(f, d, ref, start = s, n_starts = 0), "nce_error_input"),
    list("n_starts NA", function() nce(f, d, ref, start = s, n_starts = NA), "nce_error_input"),
    list("two-sided formula", function() nce(y ~ mu, d, ref, start = s), "nce_error_input"),
    list("formula and model", function() nce(f, d, ref, model = ica_model(), start = s), "nce_error_input"),
    list("model not a model", function() nce(model = list(), data = d, reference = ref, start = s), "nce_error_input"),
    list("f returns wrong length", function() {
      nce(model = nce_model(function(theta, data) 1:3, function(theta, data) matrix(0, 3, 1)), data = d,
          reference = ref, start = s)
    }, "nce_error_model"),
    list("f errors", function() {
      nce(model = nce_model(function(theta, data) stop("boom %s"), NULL), data = d, reference = ref, start = s)
    }, "nce_error_model"),
    list("gradient NaN", function() {
      nce(model = nce_model(function(theta, data) -data$y^2, function(theta, data) matrix(NaN, nrow(data), 1)),
          data = d, reference = ref, start = s)
    }, "nce_error_gradient"),
    list("gradient a string", function() {
      nce(model = nce_model(function(theta, data) -data$y^2, function(theta, data) "a"), data = d, reference = ref,
          start = s)
    }, "nce_error_gradient"),
    list("odd column name", function() {
      nce(~ -(`a b%` - mu)^2, data.frame(`a b%` = d$y, check.names = FALSE),
          ref_normal(`a b%` = 0, cov = 1), start = c(mu = 0, `a b%` = 1))
    }, "nce_error_input"),
    list("nce_model log_density not a function", function() nce_model(1), "nce_error_input"),
    list("ica start wrong shape", function() nce(model = ica_model(), data = x2, reference = r2, start = diag(3)),
         "nce_error_input"),
    list("ica start NA", function() nce(model = ica_model(), data = x2, reference = r2, start = matrix(NA_real_, 2, 2)),
         "nce_error_input"),
    list("ica vars unknown", function() nce(model = ica_model(vars = c("p", "q")), data = x2, reference = r2),
         "nce_error_input"),
    list("rica A not square", function() rica(10, matrix(1, 2, 3)), "nce_error_input"),
    list("rica n huge", function() rica(1e15, diag(2)), "nce_error_input"),
    list("ica_mle one row", function() ica_mle(x2[1, ]), "nce_error_input"),
    list("ica_mle NA", function() ica_mle(rbind(x2, NA)), "nce_error_input"),
    list("ica_mle singular", function() ica_mle(cbind(x2$x1, x2$x1)), "nce_error_numerical")
  )
}

test_that("hostile inputs give classed errors", {
  for (case in fuzz_nl()) {
    expect_error(case[[2]](), class = case[[3]], info = case[[1]])
  }
})

test_that("nonlinear fits refuse huge simulate() and n_starts at once, and character newdata", {
  set.seed(1)
  d <- data.frame(y = rnorm(30))
  ref <- ref_normal(y = 0, cov = 2)
  fit <- nce(~ -(y - mu)^2 / 2, d, ref, start = c(mu = 0), ratio = 3)
  expect_error(simulate(fit, nsim = 1e8), "nsim", class = "nce_error_size")
  expect_error(nce(~ -(y - mu)^2 / 2, d, ref, start = c(mu = 0), n_starts = 1e6), "n_starts",
               class = "nce_error_size")
  expect_error(predict(fit, data.frame(y = c("0.1", "0.2"))), "newdata", class = "nce_error_input")
  expect_error(predict(fit, data.frame(y = 0, y = 1, check.names = FALSE)), "duplicated", class = "nce_error_input")
})

test_that("an interrupt in the model's R function goes on as an interrupt, not as a model error", {
  set.seed(1)
  d <- data.frame(y = rnorm(30))
  k <- 0
  log_f <- function(theta, data) {
    k <<- k + 1
    if (k > 3) signalCondition(structure(class = c("interrupt", "condition"), list()))
    -(data$y - theta[["mu"]])^2 / 2
  }
  grad <- function(theta, data) matrix(data$y - theta[["mu"]], nrow(data), 1)
  got <- tryCatch(nce(model = nce_model(log_f, grad), data = d, reference = ref_normal(y = 0, cov = 2),
                      start = c(mu = 0.5), ratio = 3),
                  interrupt = function(i) "interrupt", error = function(e) conditionMessage(e))
  expect_identical(got, "interrupt")
  # The Rust side's "interrupt" code (its poll saw Ctrl-C) is an interrupt too.
  rust_interrupt <- structure(list(message = "interrupted by the user", code = "interrupt"), class = "nce_rust_error")
  expect_identical(tryCatch(nce:::rs(rust_interrupt), interrupt = function(i) "interrupt"), "interrupt")
})

test_that("nonlinear predict() with 0 rows and se.fit gives an empty result", {
  set.seed(3)
  d <- data.frame(y = rnorm(60))
  fit <- nce(~ -(y - mu)^2 / 2, d, ref_normal(y = 0, cov = 2), start = c(mu = 0), ratio = 3)
  p <- expect_no_warning(predict(fit, d[0, , drop = FALSE], se.fit = TRUE, type = "response"))
  expect_length(p$fit, 0L)
  expect_length(p$se.fit, 0L)
})
