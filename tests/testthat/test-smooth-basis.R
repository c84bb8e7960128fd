# The package's thin-plate set-up (smooth.construct.ncetp.smooth.spec) against mgcv's own
# constructor: the same space, the same penalty, and an object PredictMat() evaluates to its rows.

tp_pair <- function(spec, data, knots = NULL) {
  ours <- spec
  class(ours) <- "ncetp.smooth.spec"
  list(mgcv = mgcv::smooth.construct(spec, data, knots), nce = mgcv::smooth.construct(ours, data, knots))
}

# Penalised least squares fitted values with the unscaled penalty of each object.
pls_fit <- function(sm, y, lambda) {
  x <- sm$X
  drop(x %*% solve(crossprod(x) + lambda * sm$S[[1L]], crossprod(x, y)))
}

expect_same_smooth <- function(pair, y, tol = 1e-8, knots_rows = FALSE) {
  a <- pair$mgcv
  b <- pair$nce
  expect_s3_class(b, "tprs.smooth")
  expect_equal(dim(b$X), dim(a$X))
  expect_equal(b$shift, a$shift)
  expect_equal(b[c("rank", "null.space.dim", "df", "bs.dim")], a[c("rank", "null.space.dim", "df", "bs.dim")])
  # Same knots (Xu up to the order of its rows).
  key <- function(m) do.call(order, as.data.frame(m))
  expect_equal(b$Xu[key(b$Xu), , drop = FALSE], a$Xu[key(a$Xu), , drop = FALSE], tolerance = 1e-12)
  # The same column space: each basis is the other times a k x k matrix.
  proj <- function(x, on) x - on %*% qr.solve(on, x)
  expect_lt(max(abs(proj(b$X, a$X))) / max(abs(b$X)), tol)
  expect_lt(max(abs(proj(a$X, b$X))) / max(abs(a$X)), tol)
  # The same penalty: penalised fits agree for several smoothing parameters.
  for (lambda in c(1e-3, 1, 100)) {
    expect_lt(max(abs(pls_fit(b, y, lambda) - pls_fit(a, y, lambda))), tol * max(1, abs(y)))
  }
  # mgcv's PredictMat() of the new object gives its own rows back: to 1e-10 where the rows come
  # from the knots (predict_tprs in Rust); with the points as knots mgcv's rows are U diag(v) Z,
  # which differs from E U Z by the eigen-decomposition's residual (mgcv's own objects too).
  nd <- as.data.frame(stats::setNames(lapply(b$term, function(v) attr(y, "data")[[v]]), b$term))
  tol_rows <- if (knots_rows) 1e-10 else 1e-8
  expect_lt(max(abs(mgcv::PredictMat(b, nd) - b$X)), tol_rows * max(1, abs(b$X)))
  # Its rows in Rust (Predict.matrix.ncetprs.smooth) against mgcv's predict_tprs in C, at new
  # points and with a missing covariate.
  expect_s3_class(b, "ncetprs.smooth")
  mgcv_rows <- utils::getFromNamespace("Predict.matrix.tprs.smooth", "mgcv")
  nd2 <- as.data.frame(lapply(nd, function(v) c(stats::runif(50, min(v), max(v)), v[1:3])))
  ours <- mgcv::Predict.matrix(b, nd2)
  expect_lt(max(abs(ours - mgcv_rows(b, nd2))), 1e-10 * max(1, abs(ours)))
  nd2[2L, 1L] <- NA
  expect_true(all(is.na(mgcv::Predict.matrix(b, nd2)[2L, ])))
  expect_equal(mgcv::Predict.matrix(b, nd2)[-2L, ], ours[-2L, ])
}

# A set-up's design as one matrix: its blocks (R matrices and Rust-held rows) bound.
dense_design <- function(x) {
  do.call(cbind, lapply(x, function(b) if (inherits(b, "nce_rust_block")) nce:::nce_block_matrix(b$ptr) else b))
}

test_that("2-D thin plate on all distinct points: same basis and penalty as mgcv", {
  set.seed(11)
  n <- 400
  d <- data.frame(u = runif(n), v = runif(n))
  y <- sin(3 * d$u) + cos(2 * d$v) + rnorm(n, sd = 0.2)
  attr(y, "data") <- d
  expect_same_smooth(tp_pair(mgcv::s(u, v, k = 30), d), y)
})

test_that("2-D thin plate with mgcv's random knots (max.knots) and rows evaluated in Rust", {
  set.seed(12)
  n <- 900
  d <- data.frame(u = rnorm(n), v = rnorm(n))
  # Ties in the data: the shift and the column scaling use every row, the knots the distinct ones.
  d[1:50, ] <- d[51:100, ]
  y <- d$u * d$v + rnorm(n, sd = 0.2)
  attr(y, "data") <- d
  pair <- tp_pair(mgcv::s(u, v, k = 25, xt = list(max.knots = 300)), d)
  expect_equal(nrow(pair$nce$Xu), 300L)
  expect_same_smooth(pair, y, knots_rows = TRUE)
})

test_that("1-D and 3-D thin plate and user knots", {
  set.seed(13)
  n <- 500
  d <- data.frame(u = runif(n), v = runif(n), w = runif(n))
  y <- sin(6 * d$u) + d$v * d$w + rnorm(n, sd = 0.1)
  attr(y, "data") <- d
  expect_same_smooth(tp_pair(mgcv::s(u, k = 12), d), y)
  expect_same_smooth(tp_pair(mgcv::s(u, v, w, k = 40), d), y)
  expect_same_smooth(tp_pair(mgcv::s(u, v, k = 20, m = 3), d), y)
  kn <- list(u = d$u[1:120], v = d$v[1:120])
  expect_same_smooth(tp_pair(mgcv::s(u, v, k = 20), d, kn), y, knots_rows = TRUE)
})

test_that("both eigensolvers: Rust's block Krylov (many points, small k) and mgcv's Lanczos", {
  set.seed(16)
  n <- 1200
  d <- data.frame(u = runif(n), v = runif(n), w = runif(n))
  y <- sin(4 * d$u) * d$v + d$w + rnorm(n, sd = 0.1)
  attr(y, "data") <- d
  # 1,200 distinct points and k = 30: the Rust solver.
  expect_same_smooth(tp_pair(mgcv::s(u, v, k = 30), d), y)
  # 3-D with the default k = 104 (an eigenvalue near-tie at k): slanczos().
  expect_same_smooth(tp_pair(mgcv::s(u, v, w), d), y)
})

test_that("terms it does not cover are built by mgcv", {
  set.seed(14)
  d <- data.frame(u = runif(60), v = runif(60))
  spec <- mgcv::s(u, v, k = 10, m = c(2, 0))
  class(spec) <- "ncetp.smooth.spec"
  sm <- mgcv::smooth.construct(spec, d, NULL)
  ref <- mgcv::smooth.construct(mgcv::s(u, v, k = 10, m = c(2, 0)), d, NULL)
  expect_equal(sm$X, ref$X)
})

test_that("nce() and the grouped set-up use it and give mgcv's fit", {
  set.seed(15)
  n <- 300
  dat <- data.frame(u = stats::rbeta(n, 2, 3), v = stats::rbeta(n, 3, 2))
  ref <- ref_uniform(u = c(0, 1), v = c(0, 1))
  set.seed(16)
  fit <- nce(~ s(u, v, k = 20), data = dat, reference = ref, ratio = 5)
  expect_equal(fit$formula, .label ~ s(u, v, k = 20), ignore_attr = TRUE)
  mf <- model.frame(fit)
  mf$.label <- c(rep(1, n), rep(0, nrow(mf) - n))
  g <- mgcv::gam(.label ~ s(u, v, k = 20) + offset(.offset), family = stats::binomial, data = mf, method = "REML")
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-3)
  setup <- nce:::term_setup(~ s(u, v, k = 20), dat, intercept = FALSE, mode = "bound")
  expect_s3_class(setup$smooth[[1L]], "tprs.smooth")
  expect_equal(unname(mgcv::PredictMat(setup$smooth[[1L]], dat)), unname(setup$X), tolerance = 1e-10)
})

test_that("unique_rows() is mgcv::uniquecombs(x, TRUE): same rows, order and index", {
  set.seed(17)
  cases <- list(
    cbind(runif(3000), runif(3000)),
    cbind(round(runif(3000), 2), round(runif(3000), 1)),
    cbind(rnorm(2000) * 1e-6, c(rep(1, 1000), rnorm(1000) * 1e6)),
    cbind(sample(c(-1, 0, -0, 10, 100, 1e-20, 1e20), 3000, TRUE), sample(c(0.1, 0.11, 1.1, -2), 3000, TRUE),
          as.double(runif(3000) > 0.5)),
    matrix(c(1, 1, 2, 2, 1, 1), 3, 2, byrow = TRUE),
    cbind(x = runif(50), y = runif(50))
  )
  for (x in cases) {
    expect_identical(nce:::unique_rows(x), mgcv::uniquecombs(x, TRUE))
  }
})

test_that("string_ranks() ranks numbers as their strings sort, formatting few of them", {
  by_strings <- function(x) {
    s <- as.character(x)
    match(s, sort(unique(s), method = "radix"))
  }
  set.seed(18)
  u <- runif(20000)
  cases <- list(
    u - mean(u), -runif(3000), rnorm(5000) * 1e-3, rnorm(5000) * 1e-5, rbeta(5000, 2, 3) - 0.4,
    # fixed and scientific notation at the edges, mantissas that are prefixes of others, -0
    c(0, -0, 1, 9.98, 0.0011, 0.00109, 1e-3, 5e-4, 1.5e-5, 1.59e-5, 1.599e-5, 1.6, 1.5, 1.59, 2e-5, 2, 2.5, 1.6e-5),
    c(1.5e-5, 1.59e-5, 1.5e-6, 1.59e-6, -1.5e-5, 0.5, -0.5, 1.6 - 1e-16, 1.6), (1:1000) / 1e6,
    # numbers that print alike (15 digits), and the fallbacks
    c(1, 1 + 2^-52, 1 + 2^-50, 0.3, 0.1 + 0.2), c(9.989, 9.99, 5, 123.5, -10), round(runif(3000), 3)
  )
  for (i in 1:100) {
    n <- 200
    cases[[length(cases) + 1L]] <- switch(i %% 5 + 1, runif(n) - 0.5, rnorm(n) * 10^sample(-7:0, 1),
      round(runif(n), sample(1:6, 1)) - 0.5,
      signif(runif(n) * 10^-sample(3:6, n, TRUE), sample(1:3, n, TRUE)) * sample(c(-1, 1), n, TRUE),
      c(runif(n / 2) * 1e-3, signif(runif(n / 2), 2)))
  }
  for (x in cases) expect_identical(nce:::string_ranks(x), by_strings(x))
})

test_that("the set-up of penalised fits (term_setup(), side constraints) equals gam()'s to rounding", {
  set.seed(11)
  n <- 3000
  dat <- data.frame(u = runif(n), v = runif(n), w = runif(n), w2 = runif(n), w3 = runif(n), g = factor(sample(letters[1:3], n, TRUE)),
                    y = rbinom(n, 1, 0.5))
  # Plain terms of each basis (cubic and cyclic with their rows in Rust), `by` and `pc` terms, and
  # a basis the package leaves to mgcv (cs). (mgcv's gam.side() fails on fx = TRUE terms.)
  f <- y ~ s(u, bs = "cr", k = 10) + s(v, bs = "ps") + s(w) + s(w2, bs = "cc") + s(u, by = g, bs = "cr") +
    s(v, bs = "cr", pc = 0.5) + s(u, v, k = 12) + s(w3, bs = "cs")
  g0 <- mgcv::gam(f, data = dat, family = binomial, fit = FALSE)
  g1 <- nce:::gam_setup(f, dat, rep(0, n), NULL)
  expect_s3_class(g1$X, "nce_blocks")
  g1$X <- dense_design(g1$X)
  expect_identical(g1$term.names, g0$term.names)
  expect_equal(g1$cmX, stats::setNames(g0$cmX, g0$term.names), tolerance = 1e-12)
  for (nm in c("off", "nsdf", "min.edf", "sp")) expect_equal(g1[[nm]], g0[[nm]], ignore_attr = TRUE, label = nm)
  expect_equal(length(g1$smooth), length(g0$smooth))
  newd <- data.frame(u = c(0.1, 0.5, 0.93), v = c(0.2, 0.7, 0.4), w = c(0.05, 0.5, 0.99), w2 = c(0.3, 0.6, 0.9), w3 = c(0.2, 0.3, 0.4),
                     g = factor(c("a", "b", "c")))
  for (i in seq_along(g0$smooth)) {
    a <- g0$smooth[[i]]
    b <- g1$smooth[[i]]
    expect_setequal(names(b), names(a))
    if (a$label == "s(u,v)") {
      # Thin plate of 2 covariates: the Rust set-up's rotated basis, rows predicted in Rust.
      expect_identical(class(b), c("ncetprs.smooth", class(a)))
      next
    }
    # Cyclic splines: rows predicted in Rust (subclass); the others are mgcv's own classes.
    expect_identical(setdiff(class(b), "ncecyclic.smooth"), class(a))
    expect_equal(g1$X[, b$first.para:b$last.para], g0$X[, a$first.para:a$last.para], tolerance = 1e-12)
    expect_equal(b$S, a$S, tolerance = 1e-12)
    expect_identical(attr(b, "del.index"), attr(a, "del.index"))
    expect_equal(b$S.scale, a$S.scale, tolerance = 1e-12)
    expect_identical(attr(b, "nCons"), attr(a, "nCons"))
    expect_equal(unclass(attr(b, "qrc")), unclass(attr(a, "qrc")), tolerance = 1e-12)
    expect_identical(c(b$df, b$rank, b$null.space.dim), c(a$df, a$rank, a$null.space.dim))
    expect_equal(mgcv::PredictMat(b, newd), mgcv::PredictMat(a, newd), tolerance = 1e-12)
  }
  expect_identical(attr(g1$smooth[[7]], "del.index"), attr(g0$smooth[[7]], "del.index"))
})

test_that("nce() with constraints absorbed in Rust: gam's fit, smoothing parameters and term predictions", {
  set.seed(12)
  dat <- data.frame(u = rbeta(400, 2, 3))
  # One-covariate thin plate on 2,400 distinct rows: mgcv's constructor with 2,000 random knots.
  fit <- nce(~ s(u, k = 8), data = dat, reference = ref_uniform(u = c(0, 1)), ratio = 5)
  mf <- model.frame(fit)
  mf$.label <- c(rep(1, 400), rep(0, nrow(mf) - 400))
  g <- mgcv::gam(.label ~ s(u, k = 8) + offset(.offset), family = binomial, data = mf, method = "REML")
  expect_lt(max(abs(fit$linear.predictors - g$linear.predictors)), 1e-4)
  # The same penalty scaling as mgcv, so the same smoothing parameter.
  expect_equal(unname(fit$sp), unname(g$sp), tolerance = 1e-3)
  nd <- data.frame(u = c(0.1, 0.4, 0.8), .offset = 0)
  expect_equal(unname(predict(fit, nd, type = "terms")), unname(predict(g, nd, type = "terms")), tolerance = 1e-3)
})

test_that("cyclic cubic splines: the rows' basis from Rust is mgcv's, knots to edges", {
  set.seed(61)
  x <- c(-pi, pi, runif(5000, -pi, pi))
  spec <- mgcv::s(angle, bs = "cc", k = 12)
  d <- data.frame(angle = x)
  kn <- list(angle = c(-pi, pi))
  ours <- nce:::smooth.construct.ncecc.smooth.spec(spec, d, kn)
  theirs <- mgcv::smooth.construct(spec, d, kn)
  # mgcv's knots to the bit (as a plain vector: place.knots()' 1-d array dim is not kept).
  expect_identical(ours$xp, as.vector(theirs$xp))
  # Every row, including both knots' ends and the rows on interior knots.
  expect_equal(ours$X, theirs$X, tolerance = 1e-12)
  on_knots <- data.frame(angle = ours$xp)
  expect_equal(nce:::rs(nce:::nce_cc_basis(on_knots$angle, ours$xp, ours$BD, 1L)),
               mgcv::Predict.matrix(theirs, on_knots), tolerance = 1e-12)
  # Predictions: the fit's own rows from Rust; rows it does not cover from mgcv.
  expect_s3_class(ours, c("ncecyclic.smooth", "cyclic.smooth"))
  expect_identical(mgcv::Predict.matrix(ours, d), ours$X)
  # Beyond the knots mgcv wraps the covariate round the cycle.
  expect_equal(mgcv::PredictMat(ours, data.frame(angle = c(0.3, 5, -2))),
               mgcv::PredictMat(theirs, data.frame(angle = c(0.3, 5, -2))), tolerance = 1e-12)
  expect_error(nce:::rs(nce:::nce_cc_basis(4, ours$xp, ours$BD, 1L)), "outside the knots' range",
               class = "nce_error_input")
  expect_error(nce:::rs(nce:::nce_cc_basis(0, ours$xp, ours$BD[-1, ], 1L)), "`bd`", class = "nce_error_input")
})

test_that("cubic regression splines: the rows' basis from Rust is mgcv's, within and beyond the knots", {
  set.seed(62)
  # Ties and rows on the knots: a rounded covariate.
  x <- round(rexp(8000), 2)
  d <- data.frame(u = x)
  spec <- mgcv::s(u, bs = "cr", k = 9)
  ours <- nce:::smooth.construct.ncecr.smooth.spec(spec, d, NULL)
  theirs <- mgcv::smooth.construct(spec, d, NULL)
  # mgcv's knots to the bit (as a plain vector: quantile()'s names are not kept).
  expect_identical(ours$xp, unname(theirs$xp))
  expect_equal(ours$F, theirs$F, tolerance = 1e-14)
  expect_equal(ours$S, theirs$S, tolerance = 1e-14)
  expect_equal(ours$X, theirs$X, tolerance = 1e-13)
  # Prediction beyond both ends (linear extrapolation) and at the knots themselves.
  new <- data.frame(u = c(-1, -0.01, ours$xp, max(x) + c(0.5, 3)))
  expect_equal(nce:::rs(nce:::nce_cr_basis(new$u, ours$xp, ours$F, 1L)), mgcv::Predict.matrix(theirs, new),
               tolerance = 1e-13)
  # Knots supplied, and a term mgcv refuses (too few distinct values) is refused the same way.
  kn <- list(u = c(0, 0.2, 0.5, 1, 2, 4, 8))
  spec7 <- mgcv::s(u, bs = "cr", k = 7)
  expect_equal(nce:::smooth.construct.ncecr.smooth.spec(spec7, d, kn)$X, mgcv::smooth.construct(spec7, d, kn)$X,
               tolerance = 1e-13)
  few <- data.frame(u = rep(1:3, 10))
  expect_error(nce:::smooth.construct.ncecr.smooth.spec(spec, few, NULL), "insufficient unique values")
  # Shrinkage ("cs") stays with mgcv.
  cs <- mgcv::s(u, bs = "cs", k = 9)
  class(cs) <- "ncecr.smooth.spec"
  attr(cs, "shrink") <- 0.1
  expect_equal(nce:::smooth.construct.ncecr.smooth.spec(cs, d, NULL)$S[[1]],
               mgcv::smooth.construct(mgcv::s(u, bs = "cs", k = 9), d, NULL)$S[[1]], tolerance = 1e-12)
  expect_error(nce:::rs(nce:::nce_cr_basis(c(1, NA), ours$xp, ours$F, 1L)), "row 2", class = "nce_error_input")
})

test_that("tensor products of cr and cc margins: the margins' rows from Rust, mgcv's smooth", {
  set.seed(63)
  n <- 4000
  d <- data.frame(u = runif(n, 0, 300), a = runif(n, -pi, pi), x = runif(n), y = runif(n))
  kn <- list(a = c(-pi, pi))
  nd <- d[1:40, ]
  for (sp in list(mgcv::te(u, a, bs = c("cr", "cc"), k = c(5, 6)), mgcv::ti(u, a, bs = c("cr", "cc"), k = c(5, 6)),
                  mgcv::te(x, y, k = 4, np = FALSE))) {
    ours <- nce:::smooth_con(sp, d, kn)[[1]]
    theirs <- mgcv::smoothCon(sp, d, kn, absorb.cons = TRUE, scale.penalty = TRUE, null.space.penalty = FALSE)[[1]]
    expect_equal(ours$X, theirs$X, tolerance = 1e-12, label = sp$label)
    expect_equal(ours$S, theirs$S, tolerance = 1e-12, label = sp$label)
    expect_equal(mgcv::PredictMat(ours, nd), mgcv::PredictMat(theirs, nd), tolerance = 1e-12, label = sp$label)
  }
})

test_that("side constraints found on a subsample of many rows equal mgcv's on all of them", {
  # gam_setup() applies gam.side() on 5,000 evenly spaced rows (side_constrain()); gam.side() over
  # every row is the truth, and mgcv's own set-up where the bases are mgcv's (no 2-D thin plate).
  set.seed(3)
  n <- 12000
  dat <- data.frame(u = runif(n), v = rbeta(n, 2, 3), w = rnorm(n), y = rbinom(n, 1, 0.5))
  newd <- data.frame(u = c(0.1, 0.5, 0.93), v = c(0.2, 0.7, 0.4), w = c(-1, 0, 2))
  forms <- list(y ~ s(u, bs = "cr", k = 10) + s(v, bs = "cr", k = 10) + s(u, v, k = 30),  # 2 columns deleted
                y ~ s(u, bs = "cr", k = 5) + s(u, k = 5),                                 # 1 column
                y ~ s(u) + s(v) + te(u, v, k = 4),                                        # te(): mgcv's path
                y ~ s(u, bs = "cr", k = 19) + s(u, bs = "cr", k = 4),                     # a whole penalty: mgcv's
                y ~ s(u, v, k = 20) + s(v, w, k = 20) + s(u))                             # 2-D beside 2-D
  n_del <- c(2L, 1L, 2L, 3L, 2L)
  for (f in seq_along(forms)) {
    a <- suppressWarnings(nce:::gam_setup(forms[[f]], dat, rep(0, n), NULL))
    b <- suppressWarnings(nce:::gam_setup(forms[[f]], dat, rep(0, n), NULL, side_rows = Inf))
    expect_identical(dense_design(a$X), dense_design(b$X))
    if (f %in% 2:4) {
      g <- suppressWarnings(mgcv::gam(forms[[f]], data = dat, family = binomial, fit = FALSE))
      del <- function(x) lapply(x$smooth, function(s) sort(attr(s, "del.index")))
      expect_identical(del(a), del(g))
      expect_equal(dense_design(a$X), g$X, tolerance = 1e-10, ignore_attr = TRUE)
    }
    for (nm in c("S", "off", "rank", "term.names", "cmX", "min.edf", "nsdf", "sp")) expect_identical(a[[nm]], b[[nm]])
    expect_identical(sum(lengths(lapply(a$smooth, attr, "del.index"))), n_del[f])
    for (i in seq_along(a$smooth)) {
      sa <- a$smooth[[i]]
      sb <- b$smooth[[i]]
      expect_identical(sort(attr(sa, "del.index")), sort(attr(sb, "del.index")))
      for (nm in c("S", "rank", "null.space.dim", "df", "first.para", "last.para", "S.scale", "side.constrain")) {
        expect_identical(sa[[nm]], sb[[nm]])
      }
      expect_identical(mgcv::PredictMat(sa, newd), mgcv::PredictMat(sb, newd))
    }
  }
  # It warns once of repeated one-covariate smooths, as mgcv does, with the package's class.
  expect_warning(nce:::gam_setup(forms[[2]], dat, rep(0, n), NULL), "repeated 1-d smooths", class = "nce_warning_rank")
  w <- character(0)
  withCallingHandlers(nce:::gam_setup(forms[[2]], dat, rep(0, n), NULL),
                      warning = function(c) {
                        w <<- c(w, conditionMessage(c))
                        invokeRestart("muffleWarning")
                      })
  expect_identical(w, "model has repeated 1-d smooths of same variable.")
})

test_that("thin-plate rows kept in Rust give the smooth smoothCon() gives", {
  # tp_con_rust(): with knots (more distinct points than max.knots) the rows are a Rust block; the
  # object must be the one smoothCon(absorb.cons = FALSE) then absorb_constraints() give.
  set.seed(1)
  n <- 3000
  dat <- data.frame(u = runif(n), v = rbeta(n, 2, 3))
  specs <- list(mgcv::s(u, v, k = 30), mgcv::s(u, v, k = 12, fx = TRUE), mgcv::s(u, v, k = 20, xt = list(max.knots = 500)),
                mgcv::s(u, log(v), k = 15))
  for (sp in specs) {
    ours <- nce:::smooth_con(sp, dat, NULL, rust_rows = TRUE)[[1]]
    expect_s3_class(ours$X, "nce_rust_block")
    ncetp <- sp
    class(ncetp) <- "ncetp.smooth.spec"
    theirs <- mgcv::smoothCon(ncetp, dat, NULL, absorb.cons = FALSE, scale.penalty = TRUE, null.space.penalty = FALSE)[[1]]
    theirs <- nce:::absorb_constraints(theirs, theirs$C)
    expect_equal(nce:::nce_block_matrix(ours$X$ptr), theirs$X, tolerance = 1e-12, label = sp$label)
    expect_identical(class(ours), class(theirs))
    expect_setequal(names(ours), names(theirs))
    for (nm in setdiff(names(theirs), "X")) expect_equal(ours[[nm]], theirs[[nm]], tolerance = 1e-13, label = nm)
    expect_equal(attributes(ours)[c("qrc", "nCons")], attributes(theirs)[c("qrc", "nCons")], tolerance = 1e-13)
    sub <- c(3L, 1L, 2999L)
    expect_identical(nce:::nce_block_rows(ours$X$ptr, sub), nce:::nce_block_matrix(ours$X$ptr)[sub, ])
  }
})

test_that("a wrong number of smoothing parameters is refused in the right number", {
  set.seed(2)
  d <- data.frame(u = rbeta(300, 2, 3))
  ref <- ref_uniform(u = c(0, 1))
  expect_error(nce(~ s(u), d, ref, sp = c(1, 2)), "`sp` must be 1 positive number, one per penalty \\(s\\(u\\)\\)",
               class = "nce_error_input")
  expect_warning(nce(~ s(u) + s(u, k = 5), d, ref), "repeated 1-d smooths", class = "nce_warning_rank")
})
