# Hostile inputs for vnce(), the model specifications, the graph tools, rmog(), and the
# Bayes-factor and marginal-likelihood functions: each must give a classed condition (never a
# crash, an unclassed error or a silent wrong answer). Allocation cases use sizes refused by the
# up-front check, so they run in milliseconds.

fuzz_env <- local({
  set.seed(61)
  K4 <- ring_graph(4)
  x <- rtgm(60, K4)
  xm <- x
  xm[sample(length(xm), 30)] <- NA
  y1 <- rmog(80, theta = 3)
  lp <- function(x, z, th) -th[2] - x^2 / (2 * if (z == 1) 1 else exp(2 * th[1]))
  gr <- function(x, z, th) cbind(if (z == 1) 0 * x else x^2 * exp(-2 * th[1]), -1)
  l1 <- function(t) -0.5 * (t[, 1] - 0.5)^2
  l2 <- function(t) -0.5 * (t[, 1] + 0.5)^2
  d1 <- rnorm(100, 0.5)
  d2 <- rnorm(100, -0.5)
  ml <- marglik_nce(matrix(rnorm(400), ncol = 1), function(s) -0.5 * s[, 1]^2)
  environment()
})

fuzz_cases <- list(
  # vnce() arguments
  list("vnce: model not a specification", quote(vnce(x, "tgm")), "nce_error_input"),
  list("vnce: ratio NA", quote(vnce(x, tgm_model(), ratio = NA)), "nce_error_input"),
  list("vnce: ratio NaN", quote(vnce(x, tgm_model(), ratio = NaN)), "nce_error_input"),
  list("vnce: ratio Inf", quote(vnce(x, tgm_model(), ratio = Inf)), "nce_error_input"),
  list("vnce: ratio negative", quote(vnce(x, tgm_model(), ratio = -1)), "nce_error_input"),
  list("vnce: ratio zero", quote(vnce(x, tgm_model(), ratio = 0)), "nce_error_input"),
  list("vnce: ratio a string", quote(vnce(x, tgm_model(), ratio = "1")), "nce_error_input"),
  list("vnce: ratio two values", quote(vnce(x, tgm_model(), ratio = c(1, 2))), "nce_error_input"),
  list("vnce: ratio 1e7 (memory)", quote(vnce(x, tgm_model(), ratio = 1e7)), "nce_error_size"),
  list("vnce: n_latent 1e7 (memory)", quote(vnce(xm, tgm_model(), n_latent = 1e7)), "nce_error_size"),
  list("vnce: n_latent 0", quote(vnce(xm, tgm_model(), n_latent = 0)), "nce_error_input"),
  list("vnce: n_latent 2.5", quote(vnce(xm, tgm_model(), n_latent = 2.5)), "nce_error_input"),
  list("vnce: n_latent NA", quote(vnce(xm, tgm_model(), n_latent = NA)), "nce_error_input"),
  list("vnce: control with an unknown setting", quote(vnce(x, tgm_model(), control = list(tol = 5))),
       "nce_error_input"),
  list("vnce: impute with mog", quote(vnce(y1, mog_model(), impute = "mean")), "nce_error_input"),
  # tgm data
  list("tgm: character matrix", quote(vnce(matrix(letters[1:8], 4), tgm_model())), "nce_error_input"),
  list("tgm: one row", quote(vnce(x[1, , drop = FALSE], tgm_model())), "nce_error_input"),
  list("tgm: zero rows", quote(vnce(x[0, ], tgm_model())), "nce_error_input"),
  list("tgm: one column", quote(vnce(x[, 1, drop = FALSE], tgm_model())), "nce_error_input"),
  list("tgm: negative value", quote(vnce(replace(x, 3, -1), tgm_model())), "nce_error_input"),
  list("tgm: zero value", quote(vnce(replace(x, 3, 0), tgm_model())), "nce_error_input"),
  list("tgm: Inf value", quote(vnce(replace(x, 3, Inf), tgm_model())), "nce_error_input"),
  list("tgm: a row all NA", quote(vnce(`[<-`(x, 2, , NA), tgm_model())), "nce_error_input"),
  list("tgm: data frame with a factor", quote(vnce(data.frame(a = x[, 1], b = factor(x[, 2])), tgm_model())),
       "nce_error_input"),
  list("tgm: ratio 1.5", quote(vnce(x, tgm_model(), ratio = 1.5)), "nce_error_input"),
  list("tgm: method em", quote(vnce(x, tgm_model(), method = "em")), "nce_error_input"),
  list("tgm_model: family NA", quote(tgm_model(NA_character_)), "nce_error_input"),
  list("tgm_model: family a number", quote(tgm_model(1)), "nce_error_input"),
  list("tgm_model: start not a list", quote(tgm_model(start = 3)), "nce_error_input"),
  list("tgm_model: start$K not PD", quote(vnce(x, tgm_model(start = list(K = -diag(4))))), "nce_error_input"),
  list("tgm_model: start$c NA", quote(vnce(x, tgm_model(start = list(c = NA_real_)))), "nce_error_input"),
  # mog and custom
  list("mog_model: sigma1 0", quote(mog_model(sigma1 = 0)), "nce_error_input"),
  list("mog_model: sigma1 NA", quote(mog_model(sigma1 = NA)), "nce_error_input"),
  list("mog_model: sigma1 Inf", quote(mog_model(sigma1 = Inf)), "nce_error_input"),
  list("mog: data with NA", quote(vnce(c(y1, NA), mog_model())), "nce_error_input"),
  list("mog: one value", quote(vnce(1, mog_model())), "nce_error_input"),
  list("mog: constant data", quote(vnce(rep(1, 100), mog_model())), "nce_error_input"),
  list("custom: constant data", quote(vnce(rep(1, 100), custom_model(lp, gr, start = c(a = 1, c = 0)))),
       "nce_error_input"),
  list("mog: a matrix of two columns", quote(vnce(cbind(y1, y1), mog_model())), "nce_error_input"),
  list("mog: start theta negative", quote(vnce(y1, mog_model(start = list(theta = -1)))), "nce_error_input"),
  list("custom_model: log_density not a function", quote(custom_model(1, gr, start = c(a = 1, c = 0))),
       "nce_error_input"),
  list("custom_model: start NA", quote(custom_model(lp, gr, start = c(a = NA, c = 0))), "nce_error_input"),
  list("custom_model: one latent value", quote(custom_model(lp, gr, start = c(a = 1, c = 0), latent = 1)),
       "nce_error_input"),
  list("custom: log_density returns NA", quote(vnce(y1, custom_model(function(x, z, th) rep(NA_real_, length(x)), gr,
                                                                 start = c(a = 1, c = 0)))), "nce_error_input"),
  list("custom: log_density wrong length", quote(vnce(y1, custom_model(function(x, z, th) 1, gr,
                                                                   start = c(a = 1, c = 0)))), "nce_error_input"),
  list("custom: log_density fails", quote(vnce(y1, custom_model(function(x, z, th) stop("boom"), gr,
                                                             start = c(a = 1, c = 0)))), "nce_error_model"),
  list("custom: gradient fails", quote(vnce(y1, custom_model(lp, function(x, z, th) stop("boom"),
                                                          start = c(a = 1, c = 0)))), "nce_error_model"),
  list("custom: reference$sample fails", quote(vnce(y1, custom_model(lp, gr, start = c(a = 1, c = 0), reference = list(
    sample = function(n) stop("boom"), log_density = function(x) dnorm(x, log = TRUE))))), "nce_error_model"),
  list("custom: q_features fails", quote(vnce(y1, custom_model(lp, gr, start = c(a = 1, c = 0),
                                                            q_features = function(x) stop("boom")))),
       "nce_error_model"),
  # rtgm and graphs
  list("rtgm: n 1e9 (memory)", quote(rtgm(1e9, diag(2))), "nce_error_size"),
  list("rtgm: n 0", quote(rtgm(0, diag(2))), "nce_error_input"),
  list("rtgm: n NA", quote(rtgm(NA, diag(2))), "nce_error_input"),
  list("rtgm: n 2.7", quote(rtgm(2.7, diag(2))), "nce_error_input"),
  list("rtgm: K not PD", quote(rtgm(5, matrix(c(1, 2, 2, 1), 2))), "nce_error_input"),
  list("rtgm: K with NA", quote(rtgm(5, matrix(c(1, NA, NA, 1), 2))), "nce_error_input"),
  list("rtgm: K not square", quote(rtgm(5, matrix(1, 2, 3))), "nce_error_input"),
  list("rtgm: K asymmetric", quote(rtgm(5, matrix(c(2, 0.5, 0, 2), 2))), "nce_error_input"),
  list("rtgm: mean wrong length", quote(rtgm(5, diag(3), mean = c(1, 2))), "nce_error_input"),
  list("rtgm: thin 0", quote(rtgm(5, diag(2), thin = 0)), "nce_error_input"),
  list("rtgm: n_chains > n", quote(rtgm(5, diag(2), n_chains = 6)), "nce_error_input"),
  list("rtgm: start negative", quote(rtgm(5, diag(2), start = c(-1, 1))), "nce_error_input"),
  list("ring_graph: d 2", quote(ring_graph(2)), "nce_error_input"),
  list("ring_graph: d NA", quote(ring_graph(NA)), "nce_error_input"),
  list("ring_graph: d 1e6 (memory)", quote(ring_graph(46000)), "nce_error_size"),
  list("ring_graph: low > high", quote(ring_graph(5, low = 0.6, high = 0.5)), "nce_error_input"),
  list("ring_graph: diag too small", quote(ring_graph(5, diag = 0.1)), "nce_error_input"),
  list("hub_graph: margin 0", quote(hub_graph(10, margin = 0)), "nce_error_input"),
  list("hub_graph: d a string", quote(hub_graph("10")), "nce_error_input"),
  list("tgm_edges: not a matrix", quote(tgm_edges(1:3)), "nce_error_input"),
  list("tgm_edges: threshold NA", quote(tgm_edges(K4, NA)), "nce_error_input"),
  list("tgm_edges: abs NA", quote(tgm_edges(K4, abs = NA)), "nce_error_input"),
  list("edge_roc: NA in the estimate", quote(edge_roc(replace(K4, 5, NA), K4)), "nce_error_data"),
  list("edge_roc: truth of another size", quote(edge_roc(K4, diag(3))), "nce_error_input"),
  list("edge_roc: truth all edges", quote(edge_roc(K4, matrix(1, 4, 4))), "nce_error_input"),
  list("edge_roc: truth with NA", quote(edge_roc(K4, replace(K4 != 0, 2, NA))), "nce_error_input"),
  list("edge_roc: truth a precision matrix with NA (graph attribute intact)",
       quote(edge_roc(K4, `[<-`(K4, cbind(1:2, 2:1), NA))), "nce_error_input"),
  # rmog
  list("rmog: n NA", quote(rmog(NA)), "nce_error_input"),
  list("rmog: n -1", quote(rmog(-1)), "nce_error_input"),
  list("rmog: n 1e15 (memory)", quote(rmog(1e15)), "nce_error_size"),
  list("rmog: theta 0", quote(rmog(5, theta = 0)), "nce_error_input"),
  # Bayes factors and marginal likelihoods
  list("bayes_factor_nce: 1e300 log-likelihoods",
       quote(bayes_factor_nce(d1, d2, function(t) rep(1e300, nrow(t)), function(t) rep(-1e300, nrow(t)))),
       "nce_error_data"),
  list("bayes_factor_nce: ess Inf", quote(bayes_factor_nce(d1, d2, l1, l2, ess = c(Inf, 100))), "nce_error_input"),
  list("bayes_factor_nce: ess one number", quote(bayes_factor_nce(d1, d2, l1, l2, ess = 100)), "nce_error_input"),
  list("bayes_factor_nce: NA draws", quote(bayes_factor_nce(c(d1, NA), d2, l1, l2)), "nce_error_data"),
  list("bayes_factor_nce: one draw", quote(bayes_factor_nce(1, d2, l1, l2)), "nce_error_input"),
  list("bayes_factor_nce: loglik returns NA", quote(bayes_factor_nce(d1, d2, function(t) rep(NA, nrow(t)), l2)),
       "nce_error_input"),
  list("bayes_factor_nce: prior_odds 0", quote(bayes_factor_nce(d1, d2, l1, l2, prior_odds = 0)), "nce_error_input"),
  list("bayes_factor_nce: prior_odds NA", quote(bayes_factor_nce(d1, d2, l1, l2, prior_odds = NA)), "nce_error_input"),
  list("bayes_factor_nce: mismatched columns", quote(bayes_factor_nce(cbind(d1, d1), d2, l1, l2)), "nce_error_input"),
  list("marglik_nce: n_ref 1e9 (memory)", quote(marglik_nce(rnorm(100), function(p) -0.5 * p[, 1]^2, n_ref = 1e9)),
       "nce_error_size"),
  list("marglik_nce: n_ref 1", quote(marglik_nce(rnorm(100), function(p) -0.5 * p[, 1]^2, n_ref = 1)),
       "nce_error_input"),
  list("marglik_nce: n_ref NA", quote(marglik_nce(rnorm(100), function(p) -0.5 * p[, 1]^2, n_ref = NA)),
       "nce_error_input"),
  list("marglik_nce: ess Inf", quote(marglik_nce(rnorm(100), function(p) -0.5 * p[, 1]^2, ess = Inf)),
       "nce_error_input"),
  list("marglik_nce: df 0", quote(marglik_nce(rnorm(100), function(p) -0.5 * p[, 1]^2, reference = "t", df = 0)),
       "nce_error_input"),
  list("marglik_nce: split NA", quote(marglik_nce(rnorm(100), function(p) -0.5 * p[, 1]^2, split = NA)),
       "nce_error_input"),
  list("marglik_nce: 1e300 log posterior", quote(marglik_nce(rnorm(100), function(p) 1e300 - 0.5 * p[, 1]^2)),
       "nce_error_data"),
  list("marglik_nce: not a function", quote(marglik_nce(rnorm(100), 3)), "nce_error_input"),
  list("marglik_nce: log_density fails", quote(marglik_nce(rnorm(100), function(p) stop("boom"))), "nce_error_model"),
  list("bayes_factor_nce: log_density1 fails", quote(bayes_factor_nce(d1, d2, function(t) stop("boom"), l2)),
       "nce_error_model"),
  list("bayes_factor_nce: log_density2 fails", quote(bayes_factor_nce(d1, d2, l1, function(t) stop("boom"))),
       "nce_error_model"),
  list("bayes_factor_marglik: not marglik results", quote(bayes_factor_marglik(1, 2)), "nce_error_input"),
  list("bayes_factor_marglik: prior_odds -1", quote(bayes_factor_marglik(ml, ml, prior_odds = -1)), "nce_error_input"),
  list("bayes_factor_marglik: prior_odds Inf", quote(bayes_factor_marglik(ml, ml, prior_odds = Inf)),
       "nce_error_input"),
  list("confint(level = NA) of marglik", quote(confint(ml, level = NA)), "nce_error_input")
)

test_that("hostile inputs give classed conditions", {
  expect_gte(length(fuzz_cases), 40L)
  for (case in fuzz_cases) {
    expect_error(eval(case[[2L]], fuzz_env), class = case[[3L]], label = case[[1L]])
  }
})

test_that("every message names the argument or says what to do", {
  e <- tryCatch(bayes_factor_nce(fuzz_env$d1, fuzz_env$d2, fuzz_env$l1, fuzz_env$l2, ess = c(Inf, 100)),
                error = identity)
  expect_match(conditionMessage(e), "`ess`.*Inf, 100")
  e <- tryCatch(eval(fuzz_cases[[which(vapply(fuzz_cases, `[[`, "", 1L) == "custom: log_density returns NA")]][[2L]],
                     fuzz_env), error = identity)
  expect_match(conditionMessage(e), "`log_density` returned NA at 80 data point.*starting `theta`")
  e <- tryCatch(vnce(fuzz_env$xm, tgm_model(), n_latent = 1e7), error = identity)
  expect_match(conditionMessage(e), "set by `n_latent`")
  e <- tryCatch(vnce(rep(1, 100), mog_model()), error = identity)
  expect_match(conditionMessage(e), "column 1 of `data` has fewer than two distinct observed values")
})

test_that("predict() on a tgm fit: 0 rows give an empty result, points off the orthant density 0", {
  fit <- suppressWarnings(vnce(fuzz_env$x, tgm_model(), n_latent = 2))
  empty <- fuzz_env$x[0, , drop = FALSE]
  expect_identical(predict(fit, newdata = empty), numeric(0))
  expect_identical(predict(fit, newdata = empty, type = "response", se.fit = TRUE),
                   list(fit = numeric(0), se.fit = numeric(0)))
  expect_identical(dim(predict(fit, newdata = empty, type = "lpmatrix")), c(0L, length(coef(fit))))
  x1 <- fuzz_env$x[1, ]
  nd <- rbind(x1, -x1, c(Inf, 1, 1, 1), c(NA, 1, 1, 1), c(NA, -1, 1, 1))
  link <- predict(fit, newdata = nd)
  expect_true(is.finite(link[1L]))
  expect_identical(unname(link[-1L]), c(-Inf, -Inf, NA, -Inf))
  resp <- predict(fit, newdata = nd, type = "response", se.fit = TRUE)
  expect_identical(unname(resp$fit[c(2L, 3L, 5L)]), c(0, 0, 0))
  expect_identical(unname(resp$se.fit[c(2L, 3L, 5L)]), c(0, 0, 0))
  expect_error(predict(fit, newdata = nd, type = "lpmatrix"), class = "nce_error_data")
})

test_that("errors in user functions are nce_error_model quoting them; interrupts go on as interrupts", {
  e <- tryCatch(marglik_nce(fuzz_env$d1, function(p) stop("boom")), error = identity)
  expect_match(conditionMessage(e), "`log_density` failed.*boom")
  e <- tryCatch(bayes_factor_nce(fuzz_env$d1, fuzz_env$d2, fuzz_env$l1, function(t) stop("boom")), error = identity)
  expect_match(conditionMessage(e), "`log_density2` failed.*boom")
  e <- tryCatch(vnce(fuzz_env$y1, custom_model(function(x, z, th) stop("boom"), fuzz_env$gr, start = c(a = 1, c = 0))),
                error = identity)
  expect_match(conditionMessage(e), "`log_density` failed.*boom")
  interrupting <- function(p) {
    signalCondition(structure(class = c("interrupt", "condition"), list()))
    -0.5 * p[, 1]^2
  }
  expect_identical(tryCatch(marglik_nce(fuzz_env$d1, interrupting), interrupt = function(i) "interrupt",
                            error = function(e) "error"), "interrupt")
})
