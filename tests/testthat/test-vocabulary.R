# The shared vocabulary (?nce_vocabulary): every `control =` merges a partial list into its
# defaults through one helper, and refuses unknown settings with nce_error_input; every argument
# of every exported function and registered method of the installed package is a name of the
# table in R/vocabulary.R, with one meaning per name and one name per meaning, and methods use
# their generic's names.

test_that("merge_control() merges, keeps complete results and refuses unknown settings", {
  mc <- nce:::merge_control
  expect_identical(mc(NULL, nce_control), nce_control())
  expect_identical(mc(list(maxit = 5), nce_control), nce_control(maxit = 5))
  expect_identical(mc(nce_control(epsilon = 1e-8), nce_control), nce_control(epsilon = 1e-8))
  expect_identical(mc(list(folds = 3), lfire_control), lfire_control(folds = 3))
  # lfire_control()'s result holds derived settings (`one_se`) it does not take: kept as is
  full <- lfire_control(folds = 4)
  expect_identical(mc(full, lfire_control), full)
  expect_s3_class(mc(list(maxit = 50), vnce_control), "vnce_control")
  expect_error(mc(list(tol = 1), nce_control), "tol.*nce_control\\(\\) knows epsilon, maxit", class = "nce_error_input")
  expect_error(mc(list(1), nce_control), "unnamed", class = "nce_error_input")
  expect_error(mc(3, nce_control), "`control` must be nce_control\\(\\)", class = "nce_error_input")
  expect_error(mc(list(maxit = -1), nce_control), "in `control`.*maxit", class = "nce_error_input")
})

test_that("snce(), latkes(), lfire() and vnce() take a partial control list", {
  set.seed(3)
  y <- numeric(200)
  y[1] <- 0.5
  for (i in 2:200) y[i] <- min(max(y[i - 1] + rnorm(1, 0, 0.1), 0.01), 0.99)
  d <- data.frame(y = y)
  set.seed(1)
  a <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, control = list(maxit = 50))
  set.seed(1)
  b <- snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, control = nce_control(maxit = 50))
  expect_identical(coef(a), coef(b))
  expect_identical(a$control, nce_control(maxit = 50))
  expect_error(snce(~ I(y * y_prev), d, ref_uniform(y = c(0, 1)), ratio = 5, control = list(epsilom = 1)),
               "epsilom", class = "nce_error_input")

  sim <- rlatkes(150, latkes_truth, window = c(0, 1024, 0, 768))
  set.seed(2)
  fl <- latkes(sim, window = c(0, 1024, 0, 768), ratio = 2, kernel = ~ dist, intercept = ~ 1,
               control = list(maxit = 40))
  expect_identical(fl$control, nce_control(maxit = 40))
  expect_error(latkes(sim, window = c(0, 1024, 0, 768), ratio = 2, control = list(bogus = 1)), "bogus",
               class = "nce_error_input")

  p <- toy_lfire_problem(3)
  f1 <- toy_lfire_fit(p, n_theta = 40, n_marginal = 40, control = list(folds = 3, nlambda = 10))
  f2 <- toy_lfire_fit(p, n_theta = 40, n_marginal = 40, control = lfire_control(folds = 3, nlambda = 10))
  expect_identical(f1$posterior, f2$posterior)
  expect_error(lfire(matrix(rnorm(10), 1), p$sim, p$summ, p$pr, theta = p$th, batch = TRUE, control = list(nfolds = 3)),
               "nfolds", class = "nce_error_input")

  set.seed(4)
  x <- rmog(200, theta = 4)
  set.seed(5)
  v1 <- vnce(x, mog_model(), control = list(maxit = 300))
  set.seed(5)
  v2 <- vnce(x, mog_model(), control = vnce_control(maxit = 300))
  expect_identical(coef(v1), coef(v2))
  expect_identical(v1$args$ratio, 1)
  expect_identical(names(formals(vnce))[1:3], c("data", "model", "ratio"))
})


vocab_formals <- function(fn) {
  a <- names(formals(fn))
  if (is.null(a)) character() else a
}

vocab_api <- function() {
  ns <- asNamespace("nce")
  rows <- lapply(sort(getNamespaceExports("nce")), function(f) {
    fn <- get(f, envir = ns)
    if (is.function(fn)) data.frame(fun = f, generic = NA_character_, arg = vocab_formals(fn))
  })
  s3 <- getNamespaceInfo(ns, "S3methods")
  methods <- lapply(seq_len(nrow(s3)), function(i) {
    fn <- get(s3[i, 3L], envir = ns)
    data.frame(fun = s3[i, 3L], generic = s3[i, 1L], arg = vocab_formals(fn))
  })
  do.call(rbind, c(rows, methods))
}

# A generic by name: the package's own (exported or internal), else R's or broom's.
vocab_generic <- function(name) {
  for (pkg in c("nce", "base", "stats", "graphics", "utils", "generics", "mgcv")) {
    if (requireNamespace(pkg, quietly = TRUE) && exists(name, envir = asNamespace(pkg), inherits = FALSE)) {
      return(list(fun = get(name, envir = asNamespace(pkg)), pkg = pkg))
    }
  }
  NULL
}

# Function-specific names: an argument whose name the table gives another meaning, kept because
# the name is the natural one where it stands. Short on purpose: add a name to the table instead.
vocab_specific <- rbind(
  # the coordinate columns of scanpaths and steps (x is elsewhere the object of print() or plot())
  data.frame(fun = c("latkes", "ref_steps", "step_headings"), arg = "x"),
  data.frame(fun = c("latkes", "ref_steps", "step_headings"), arg = "y"),
  # the time points per window of a series embedding (window is elsewhere the spatial window)
  data.frame(fun = "embed_series", arg = "window"),
  # a gamma step length's scale and a Metropolis proposal's sd (scale is elsewhere extractAIC()'s)
  data.frame(fun = c("ref_steps", "ratio_posterior"), arg = "scale"),
  # rmog(): the model's parameter theta, one number (theta is elsewhere a matrix of values)
  data.frame(fun = "rmog", arg = "theta")
)

# Methods of the package's internal generics (ref_draw(), ref_logq(), kernel_draw(), ...) are
# registered only so that R dispatches them; they are not part of the API.
vocab_user_api <- function(api) {
  internal <- !is.na(api$generic) & !(api$generic %in% getNamespaceExports("nce")) &
    vapply(api$generic, function(g) identical(vocab_generic(g)$pkg, "nce"), NA)
  api[!internal, ]
}

test_that("every argument name of the API is in the vocabulary table (or a listed function-specific name)", {
  table <- nce:::vocabulary
  api <- vocab_user_api(vocab_api())
  expect_gt(length(unique(api$fun)), 300L)  # the exported functions and the methods were all read
  specific <- paste(vocab_specific$fun, vocab_specific$arg)
  off <- api[!(api$arg %in% names(table)) & !(paste(api$fun, api$arg) %in% specific), ]
  expect_identical(unique(sprintf("%s(%s)", off$fun, off$arg)), character())
  # every listed function-specific name is still used where it is listed
  used <- paste(api$fun, api$arg)
  expect_identical(setdiff(specific, used), character())
})

test_that("the table gives each name one meaning and each meaning one name, and has no unused names", {
  table <- nce:::vocabulary
  expect_false(anyDuplicated(names(table)) > 0L)
  expect_identical(unname(table[duplicated(tolower(table))]), character())
  expect_true(all(nzchar(table)))
  api <- vocab_user_api(vocab_api())
  expect_identical(setdiff(names(table), api$arg), character())
})

test_that("the drifted names are gone: one name for the covariance, the reference, the fit, starting values", {
  api <- vocab_user_api(vocab_api())
  # #75's list: se_type everywhere for sandwich/naive, reference for the noise density, object for a
  # fit, start for starting values, log_density for a log density function, n_chains for chains
  # run, batch_size for a minibatch, and no deprecated ref_normal(mean =, cov =) form
  for (gone in c("noise", "loglik1", "loglik2", "lb", "ub", "holdout", "ref")) {
    expect_false(gone %in% api$arg, info = gone)
  }
  cov_type <- api[api$arg == "type" & api$generic %in% c("vcov", "confint", "summary"), ]
  expect_identical(cov_type$fun, character())
  expect_false("fit" %in% api$arg[api$fun %in% c("nce_adapt", "ref_model")])
  expect_false("theta" %in% names(formals(custom_model)))
  expect_false("chains" %in% names(formals(rtgm)))
  expect_false("batch" %in% c(names(formals(nce_mlp_control)), names(formals(nce_ratio_control))))
  expect_error(ref_normal(mean = c(y = 0), cov = 4), "named vector", class = "nce_error_input")
  # the old covariance argument is refused where it would fall silently into `...`
  set.seed(1)
  fit <- nce(~ y, data.frame(y = runif(200)), ref_uniform(y = c(0, 1)), ratio = 2)
  expect_error(vcov(fit, type = "naive"), "use `se_type`", class = "nce_error_input")
  expect_error(confint(fit, type = "naive"), "use `se_type`", class = "nce_error_input")
  expect_error(summary(fit, type = "naive"), "use `se_type`", class = "nce_error_input")
  expect_false(identical(vcov(fit, se_type = "naive"), vcov(fit)))
})

test_that("methods use their generic's argument names, in the generic's order", {
  api <- vocab_api()
  s3 <- getNamespaceInfo(asNamespace("nce"), "S3methods")
  bad <- character()
  for (i in seq_len(nrow(s3))) {
    g <- vocab_generic(s3[i, 1L])
    if (is.null(g) || is.primitive(g$fun)) next
    gen <- names(formals(g$fun))
    if (s3[i, 1L] == "plot") gen <- setdiff(gen, "y")  # plot(x, y, ...): methods drop y, as R allows
    m <- names(formals(get(s3[i, 3L], envir = asNamespace("nce"))))
    # the generic's arguments before its `...` open the method, in order (up to the method's own
    # `...`, which may take the rest), and a generic's argument the method has keeps its name:
    # R CMD check's rule, here also for broom's generics and the package's own
    lead <- gen[seq_len(match("...", gen, nomatch = length(gen) + 1L) - 1L)]
    lead <- lead[seq_len(min(length(lead), match("...", m, nomatch = length(m) + 1L) - 1L))]
    if (!identical(m[seq_along(lead)], lead) || !identical(m[m %in% gen], gen[gen %in% m])) {
      bad <- c(bad, s3[i, 3L])
    }
  }
  expect_identical(bad, character())
  # and the methods of one generic give one meaning one name: no two of a generic's methods
  # use different table names for what the table says is the same thing (checked through the
  # table's one-name-per-meaning rule above); here, the covariance is se_type in all of them
  se_like <- api[!is.na(api$generic) & api$arg %in% c("se_type", "type") &
                   api$generic %in% c("vcov", "confint", "summary", "tidy", "plot", "anova"), ]
  expect_true(all(se_like$arg == "se_type"))
})
