# The model-object contract: every fit class answers every method of `contract_methods`, or
# gives a classed `nce_error_unsupported` that the case declares in `unsupported` (never
# NULL, numeric(0) or another error). Cases come from functions named `contract_cases_*`
# defined in helper-contract-<area>.R files; test-contract.R runs them all.
#
# A case is a list:
#   name         label in test output
#   fit          function() returning the fit (small: the whole table runs in CI)
#   nested       optional function() returning a fit nested in `fit` (for anova, logLik order)
#   newdata      optional data frame of raw data rows as the user would pass them
#   newdata_index  optional: positions in predict(fit) that predict(fit, newdata) reproduces
#   unsupported  methods the class refuses with nce_error_unsupported
#   response_is_exp_link  TRUE (default) when type = "response" is exp(type = "link")
#   loglik_ordered  TRUE when the nested fit's logLik must not exceed the fit's
#   skip         checks left out for a known gap, each with a comment in the case saying why
#   held_out_nobs  optional function(k): nobs of logLik(newdata = k rows) where a row is scored as
#                several (a ratio classifier's simulation: its joint and shuffled pairs); k by default

# anova.glm's columns with a Wald test in place of the score test of test = "Rao".
anova_columns <- c("Resid. Df", "Resid. Dev", "Df", "Deviance", "Wald", "Pr(>Chi)")

contract_methods <- c("print", "summary", "coef", "vcov", "confint", "predict", "predict_newdata",
                      "predict_se", "predict_link", "predict_response", "predict_lpmatrix",
                      "fitted", "residuals", "logLik", "AIC", "BIC", "anova", "update",
                      "model.frame", "model.matrix", "nobs", "formula", "terms", "plot",
                      "simulate", "tidy", "glance", "augment")

expect_contract <- function(case) {
  info <- function(what) paste(case$name, what)
  if (is.null(case$response_is_exp_link)) case$response_is_exp_link <- TRUE
  fit <- case$fit()
  cf <- NULL
  n <- NULL
  call_m <- function(method, fun) {
    if (method %in% case$unsupported) {
      expect_error(fun(), class = "nce_error_unsupported", info = info(method))
      return(NULL)
    }
    # Report every failing method, not just the first: an error becomes a failure.
    v <- tryCatch(suppressWarnings(fun()), error = function(e) {
      fail(sprintf("%s: %s failed: %s", case$name, method, conditionMessage(e)))
      NULL
    })
    if (is.null(v)) return(NULL)
    expect_false(is.null(v), info = info(paste(method, "returned NULL")))
    expect_false(is.numeric(v) && length(v) == 0L, info = info(paste(method, "returned numeric(0)")))
    v
  }

  call_m("print", function() {
    out <- utils::capture.output(v <- print(fit))
    expect_true(length(out) > 0L, info = info("print prints"))
    expect_identical(v, fit, info = info("print returns its argument"))
    TRUE
  })
  call_m("summary", function() {
    s <- summary(fit)
    out <- utils::capture.output(print(s))
    expect_true(length(out) > 0L, info = info("summary prints"))
    s
  })
  n <- call_m("nobs", function() {
    v <- stats::nobs(fit)
    expect_true(is.numeric(v) && length(v) == 1L && v >= 1 && v == round(v), info = info("nobs"))
    v
  })
  cf <- call_m("coef", function() {
    v <- stats::coef(fit)
    expect_true(is.numeric(v) && !is.null(names(v)), info = info("coef is named numeric"))
    v
  })
  call_m("vcov", function() {
    v <- stats::vcov(fit)
    expect_true(is.matrix(v) && nrow(v) == ncol(v), info = info("vcov square"))
    if (!is.null(cf) && is.null(dim(cf))) expect_equal(rownames(v), names(cf), info = info("vcov names"))
    expect_true(all(diag(v)[!is.na(diag(v))] >= 0), info = info("vcov diagonal >= 0"))
    v
  })
  call_m("confint", function() {
    v <- stats::confint(fit)
    expect_true(is.matrix(v) && ncol(v) == 2L, info = info("confint two columns"))
    expect_true(all(v[, 1] <= v[, 2], na.rm = TRUE), info = info("confint ordered"))
    if (!is.null(cf) && is.null(dim(cf)) && length(cf) == nrow(v)) {
      expect_true(all(v[, 1] <= cf & cf <= v[, 2], na.rm = TRUE), info = info("confint contains the estimate"))
    }
    v
  })
  p0 <- call_m("predict", function() {
    v <- stats::predict(fit)
    expect_true(is.numeric(v) && length(v) >= 1L, info = info("predict numeric"))
    expect_identical(v, stats::predict(fit, type = "link"), info = info("predict() defaults to type = \"link\""))
    e <- expect_error(stats::predict(fit, type = "no_such_type"), class = "nce_error_input",
                      info = info("unknown type is a classed error"))
    expect_match(conditionMessage(e), "\"link\"", info = info("unknown type lists the valid ones"))
    v
  })
  expect_choices_classed(fit, info)
  if (!is.null(case$newdata)) {
    call_m("predict_newdata", function() {
      v <- stats::predict(fit, newdata = case$newdata)
      expect_equal(length(v), nrow(case$newdata), info = info("predict(newdata) length"))
      if (!is.null(case$newdata_index) && !is.null(p0)) {
        expect_equal(unname(v), unname(p0[case$newdata_index]), tolerance = 1e-8,
                     info = info("predict(newdata) equals predict on the training rows"))
      }
      nd0 <- stats::predict(fit, newdata = utils::head(case$newdata, 0L))
      expect_equal(NROW(nd0), 0L, info = info("predict() at 0 rows is empty"))
      nd1 <- stats::predict(fit, newdata = utils::head(case$newdata, 1L))
      expect_equal(NROW(nd1), 1L, info = info("predict() at 1 row has 1 value"))
      v
    })
  }
  if (!is.null(case$data) && !is.null(p0)) {
    call_m("predict_newdata", function() {
      v <- stats::predict(fit, newdata = case$data)
      # Sequences give one value per row, NA where a row starts its sequence.
      if (length(v) != length(p0)) {
        # ... named by the rows: the in-sample value of a name is the value of the same row.
        if (!is.null(names(p0))) {
          expect_true(all(names(p0) %in% names(v)), info = info("in-sample predict() names are the data's rows"))
          expect_equal(unname(v[names(p0)]), unname(p0), tolerance = 1e-8,
                       info = info("predict()[name] and predict(newdata = data)[name] are the same transition"))
        }
        v <- v[!is.na(v)]
      }
      expect_equal(unname(v), unname(p0), tolerance = 1e-8,
                   info = info("predict(newdata = the fitted data) equals the in-sample prediction"))
      d0 <- stats::predict(fit, newdata = utils::head(case$data, 0L))
      expect_equal(NROW(d0), 0L, info = info("predict() at 0 rows of the fitted data's kind is empty"))
      v
    })
  }
  nd <- if (is.null(case$newdata)) list() else list(newdata = case$newdata)
  call_m("predict_se", function() {
    v <- do.call(stats::predict, c(list(fit), nd, list(se.fit = TRUE)))
    expect_true(is.list(v) && all(c("fit", "se.fit") %in% names(v)), info = info("se.fit list"))
    expect_equal(length(v$fit), length(v$se.fit), info = info("se.fit length"))
    expect_true(all(v$se.fit[!is.na(v$se.fit)] >= 0), info = info("se.fit >= 0"))
    v
  })
  link <- call_m("predict_link", function() do.call(stats::predict, c(list(fit), nd, list(type = "link"))))
  call_m("predict_response", function() {
    v <- do.call(stats::predict, c(list(fit), nd, list(type = "response")))
    if (isTRUE(case$response_is_exp_link) && !is.null(link)) {
      expect_equal(unname(v), unname(exp(link)), tolerance = 1e-8, info = info("response = exp(link)"))
    }
    v
  })
  call_m("predict_lpmatrix", function() {
    x <- do.call(stats::predict, c(list(fit), nd, list(type = "lpmatrix")))
    expect_true(is.matrix(x), info = info("lpmatrix is a matrix"))
    if (!is.null(link) && !is.null(cf)) {
      b <- cf
      b[is.na(b)] <- 0
      # Offsets (the formula's, and log q of a fit relative to its reference) as mgcv gives them.
      off <- attr(x, "model.offset")
      lp <- drop(x %*% b) + if (length(off)) off else 0
      expect_equal(unname(lp), unname(link), tolerance = 1e-8, info = info("lpmatrix %*% coef + offset = link"))
    }
    x
  })
  call_m("fitted", function() {
    v <- stats::fitted(fit)
    if (!is.null(n)) expect_equal(NROW(v), n, info = info("fitted has nobs values"))
    if (!"predict_response" %in% case$unsupported) {
      expect_equal(unname(v), unname(stats::predict(fit, type = "response")), tolerance = 1e-8,
                   info = info("fitted() equals predict(type = \"response\")"))
    }
    v
  })
  call_m("residuals", function() {
    v <- stats::residuals(fit)
    expect_true(is.numeric(v), info = info("residuals numeric"))
    v
  })
  ll <- call_m("logLik", function() {
    v <- stats::logLik(fit)
    expect_s3_class(v, "logLik")
    expect_true(is.finite(as.numeric(v)), info = info("logLik finite"))
    expect_true(attr(v, "df") > 0, info = info("logLik df > 0"))
    if (!is.null(n)) expect_equal(attr(v, "nobs"), n, info = info("logLik nobs"))
    v
  })
  # logLik(newdata =) is the held-out log-likelihood of the new rows (nobs: their number), or a
  # classed refusal: never the in-sample value with `newdata` silently ignored.
  if (!is.null(ll) && !is.null(case$newdata) && !"logLik_newdata" %in% case$skip) {
    for (k in unique(c(1L, nrow(case$newdata)))) {
      nd_k <- utils::head(case$newdata, k)
      held <- tryCatch(suppressWarnings(stats::logLik(fit, newdata = nd_k)), nce_error = function(e) e)
      if (inherits(held, "error")) next
      expect_s3_class(held, "logLik")
      n_k <- if (is.null(case$held_out_nobs)) k else case$held_out_nobs(k)
      expect_equal(attr(held, "nobs"), n_k, info = info(sprintf("logLik(newdata = %d rows) counts them", k)))
      expect_true(is.finite(as.numeric(held)), info = info("held-out logLik finite"))
    }
  }
  call_m("AIC", function() {
    v <- stats::AIC(fit)
    if (!is.null(ll)) expect_equal(v, -2 * as.numeric(ll) + 2 * attr(ll, "df"), info = info("AIC = -2 logLik + 2 df"))
    v
  })
  # extractAIC() and deviance() come from logLik(): they agree with it, or refuse with it.
  if (is.null(ll)) {
    expect_error(stats::extractAIC(fit), class = "nce_error_unsupported", info = info("extractAIC refused with logLik"))
    expect_error(stats::deviance(fit), class = "nce_error_unsupported", info = info("deviance refused with logLik"))
  } else {
    expect_equal(stats::extractAIC(fit), c(attr(ll, "df"), -2 * as.numeric(ll) + 2 * attr(ll, "df")),
                 tolerance = 1e-8, info = info("extractAIC() = (df, AIC)"))
  }
  if (!is.null(ll)) {
    s <- summary(fit)
    expect_equal(as.numeric(s$logLik), as.numeric(ll), tolerance = 1e-8, info = info("summary()$logLik = logLik()"))
    expect_equal(attr(s$logLik, "df"), attr(ll, "df"), tolerance = 1e-8, info = info("summary() df = logLik() df"))
    expect_equal(s$aic, -2 * as.numeric(ll) + 2 * attr(ll, "df"), tolerance = 1e-8, info = info("summary()$aic = AIC()"))
    expect_equal(stats::deviance(fit), -2 * as.numeric(ll), tolerance = 1e-8, info = info("deviance() = -2 logLik()"))
    if (requireNamespace("broom", quietly = TRUE)) {
      g <- broom::glance(fit)
      expect_equal(g$logLik, as.numeric(ll), tolerance = 1e-8, info = info("glance()$logLik = logLik()"))
      expect_equal(g$AIC, stats::AIC(fit), tolerance = 1e-8, info = info("glance()$AIC = AIC()"))
      expect_equal(g$BIC, stats::BIC(fit), tolerance = 1e-8, info = info("glance()$BIC = BIC()"))
      # One deviance: glance() reports the one deviance() gives (a penalised one was stored apart).
      if ("deviance" %in% names(g)) {
        expect_equal(g$deviance, stats::deviance(fit), tolerance = 1e-8, info = info("glance()$deviance = deviance()"))
      }
    }
  }
  call_m("BIC", function() {
    v <- stats::BIC(fit)
    if (!is.null(ll)) {
      expect_equal(v, -2 * as.numeric(ll) + log(attr(ll, "nobs")) * attr(ll, "df"), info = info("BIC"))
    }
    v
  })
  if (!is.null(case$nested)) {
    small <- case$nested()
    call_m("anova", function() {
      a <- stats::anova(small, fit)
      expect_true(is.data.frame(a) && nrow(a) == 2L, info = info("anova two rows"))
      expect_identical(names(a), anova_columns, info = info("anova has anova.glm's columns"))
      p <- a[["Pr(>Chi)"]][2L]
      expect_true(is.numeric(p) && p >= 0 && p <= 1, info = info("anova p-value in [0, 1]"))
      a
    })
    if (isTRUE(case$loglik_ordered) && !is.null(ll)) {
      expect_lte(as.numeric(stats::logLik(small)), as.numeric(ll) + 1e-8)
    }
  } else if ("anova" %in% case$unsupported) {
    expect_error(stats::anova(fit, fit), class = "nce_error_unsupported", info = info("anova"))
  }
  call_m("update", function() {
    v <- stats::update(fit)
    expect_identical(class(v), class(fit), info = info("update keeps the class"))
    if (!is.null(cf)) {
      expect_identical(stats::coef(v), cf, info = info("update() reproduces the fit"))
    } else if (!is.null(p0)) {
      expect_identical(stats::predict(v), p0, info = info("update() reproduces the fit"))
    }
    v
  })
  call_m("model.frame", function() {
    v <- stats::model.frame(fit)
    expect_true(is.data.frame(v) && nrow(v) >= 1L, info = info("model.frame is a data frame"))
    v
  })
  call_m("model.matrix", function() {
    v <- stats::model.matrix(fit)
    expect_true(is.matrix(v), info = info("model.matrix is a matrix"))
    if (!is.null(cf) && is.null(dim(cf))) expect_equal(ncol(v), length(cf), info = info("model.matrix columns"))
    v
  })
  call_m("formula", function() {
    v <- stats::formula(fit)
    expect_s3_class(v, "formula")
    v
  })
  call_m("terms", function() {
    v <- stats::terms(fit)
    expect_s3_class(v, "terms")
    v
  })
  call_m("plot", function() {
    grDevices::pdf(NULL)
    on.exit(grDevices::dev.off())
    plot(fit)
    TRUE
  })
  call_m("simulate", function() {
    v <- stats::simulate(fit, nsim = 1, seed = 1)
    expect_true(is.data.frame(v) || is.list(v), info = info("simulate returns data"))
    v
  })
  if (requireNamespace("broom", quietly = TRUE)) {
    call_m("tidy", function() {
      v <- broom::tidy(fit)
      expect_true(is.data.frame(v) && all(c("term", "estimate") %in% names(v)), info = info("tidy columns"))
      v
    })
    call_m("glance", function() {
      v <- broom::glance(fit)
      expect_true(is.data.frame(v) && nrow(v) == 1L, info = info("glance one row"))
      v
    })
    call_m("augment", function() {
      v <- broom::augment(fit)
      expect_true(is.data.frame(v) && nrow(v) >= 1L, info = info("augment rows"))
      expect_true(".fitted" %in% names(v), info = info("augment .fitted"))
      v
    })
  }
  invisible(fit)
}

# Every choice argument of the class's methods (a formal whose default is a character vector of
# choices, as match.arg() reads them): an unknown value is a classed error (or the class's
# refusal), never match.arg()'s unclassed one.
choice_generics <- c("vcov", "confint", "summary", "predict", "plot", "simulate", "logLik", "residuals",
                     "tidy", "augment", "glance")

expect_choices_classed <- function(fit, info) {
  for (generic in choice_generics) {
    method <- NULL
    for (cl in class(fit)) {
      method <- utils::getS3method(generic, cl, optional = TRUE, envir = asNamespace("nce"))
      if (!is.null(method)) break
    }
    if (is.null(method)) next
    fun <- switch(generic, tidy = generics::tidy, augment = generics::augment, glance = generics::glance,
                  match.fun(generic))
    for (a in names(formals(method))) {
      choices <- tryCatch(eval(formals(method)[[a]]), error = function(e) NULL)
      if (!is.character(choices) || length(choices) < 2L) next
      e <- tryCatch(suppressWarnings(do.call(fun, stats::setNames(list(fit, "no_such_choice"), c("", a)))),
                    error = function(e) e)
      expect_true(inherits(e, "nce_error_input") || inherits(e, "nce_error_unsupported"),
                  info = info(sprintf("%s(%s = \"no_such_choice\") is a classed error", generic, a)))
    }
  }
}
