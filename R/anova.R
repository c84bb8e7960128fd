# Tests between nested nce() fits: Wald tests with the NCE sandwich covariance.

#' Compare nested nce fits
#'
#' With two or more fits of the same data, each larger fit is tested against
#' the next smaller one by a **Wald test with the NCE sandwich covariance** of
#' the larger fit: the null hypothesis is that the larger model's log density
#' lies in the smaller model's span, i.e. \eqn{C\beta = 0} for the contrasts
#' \eqn{C} that span the larger model's columns outside the smaller model's
#' (the extra coefficients when the smaller model's terms are a subset; for a
#' smooth against a linear term, the smooth's non-linear part), and the
#' statistic \eqn{(C\hat\beta)'(C V C')^{-1}(C\hat\beta)} is referred to a
#' chi-squared distribution with `rank(C)` degrees of freedom. A
#' likelihood-ratio test is not used: NCE does not maximise the likelihood, and
#' twice its log-likelihood difference has no chi-squared law. The size of the
#' test was checked by simulation under the null (`bench/anova-size.R`, 300 fits
#' of 100 points at ratio 5): a linear against a quadratic log density rejected
#' at 5% in 4.7% of the fits. For fits with smooth terms `V` is the
#' NCE-corrected Bayesian covariance `Vp` and the test uses all of the extra
#' terms' columns: it is conservative (valid, with less power) when the smooth
#' is shrunk towards the smaller model: a linear fit against `s(y, k = 6)`
#' rejected in 0.7% of the same fits.
#'
#' With one fit, each term is tested (Wald, sandwich covariance) with the
#' other terms in the model; for fits with smooth terms this is mgcv's
#' [mgcv::anova.gam()] on the fit, which uses its NCE-corrected `Vp`.
#'
#' @param object An `nce_fit` (or `nce_gam`).
#' @param ... More fits of the same data, nested in one another (any order).
#' @param test Only `"Wald"`.
#' @return An object of class `anova` (a data frame) with the columns of
#'   [stats::anova.glm()] (`test = "Rao"`): for each fit `Resid. Df` (data
#'   points minus the fit's df), `Resid. Dev` (-2 log-likelihood, see
#'   [logLik.nce_fit()]), and from the second row on `Df` (of the test),
#'   `Deviance` (the drop in `Resid. Dev`), `Wald` (the statistic) and
#'   `Pr(>Chi)` against the previous row. Every anova() between fits of the
#'   package has this layout. With one fit, one row per term.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(400) * (exp(2) - 1)) / 2)
#' f1 <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#' f2 <- update(f1, . ~ . + I(y^2) + I(y^3))
#' anova(f1, f2)
#' anova(f2)
#' @export
anova.nce_fit <- function(object, ..., test = "Wald") {
  if (!identical(test, "Wald")) nce_abort("`test` must be \"Wald\": a likelihood-ratio test is not valid for NCE")
  fits <- c(list(object), list(...))
  is_fit <- vapply(fits, inherits, TRUE, "nce_fit")
  if (!all(is_fit)) nce_abort("all arguments of anova() must be nce fits", "input")
  if (length(fits) == 1L) return(nce_anova_terms(object))
  nce_anova_nested(fits, vapply(as.list(substitute(list(object, ...)))[-1L], function(e) deparse(e)[1L], ""))
}

#' @rdname anova.nce_fit
#' @export
anova.nce_gam <- function(object, ..., test = "Wald") {
  if (length(list(...)) == 0L) {
    if (!identical(test, "Wald")) nce_abort("`test` must be \"Wald\"")
    return(mgcv::anova.gam(as_gam(object)))
  }
  anova.nce_fit(object, ..., test = test)
}

nce_anova_nested <- function(fits, labels, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  n <- vapply(fits, function(f) f$n, 1)
  if (length(unique(n)) > 1L) {
    nce_abort(sprintf("the fits have different numbers of data points (%s): compare fits of the same data",
                      paste(n, collapse = ", ")), "input", call = call)
  }
  df <- vapply(fits, nce_df, 1)
  ord <- order(df)
  fits <- fits[ord]
  labels <- labels[ord]
  k <- length(fits)
  wald <- matrix(NA_real_, k, 3L)
  for (i in seq_len(k)[-1L]) wald[i, ] <- nce_wald(fits[[i - 1L]], fits[[i]], call = call)
  anova_table(fits, wald, "Wald tests of nested NCE fits (sandwich covariance of the larger fit)")
}

# The one layout of every anova() between fits: anova.glm's columns (test = "Rao"), with the
# Wald statistic of the larger fit against the smaller in place of the score statistic. `fits`
# run from small to large; `tests` has a row (Df, statistic, p-value) per fit, NA in the first.
anova_table <- function(fits, tests, heading, formulas = NULL) {
  ll <- lapply(fits, stats::logLik)
  dev <- -2 * vapply(ll, as.numeric, 0)
  tab <- data.frame(`Resid. Df` = vapply(ll, function(l) attr(l, "nobs") - attr(l, "df"), 0), `Resid. Dev` = dev,
                    Df = tests[, 1L], Deviance = c(NA, -diff(dev)), Wald = tests[, 2L], `Pr(>Chi)` = tests[, 3L],
                    check.names = FALSE, row.names = paste("Model", seq_along(fits)))
  if (is.null(formulas)) formulas <- vapply(fits, function(f) deparse1(stats::formula(f), width.cutoff = 200L), "")
  structure(tab, heading = c(paste0(heading, "\n"), paste0(rownames(tab), ": ", formulas, collapse = "\n")),
            class = c("anova", "data.frame"))
}

# Wald test that `big`'s log density lies in the span of `small`'s: returns (df, chisq, p).
# When the smaller fit's terms are terms of the larger one, the test is of the extra terms'
# coefficients (smooths are rebuilt on each fit's own reference draws, so their bases differ
# slightly between fits); otherwise of the contrasts outside the smaller model's span.
nce_wald <- function(small, big, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  cs <- nce_term_columns(small)
  cb <- nce_term_columns(big)
  beta <- stats::coef(big)
  keep <- !is.na(beta)
  if (all(names(cs) %in% names(cb))) {
    extra <- setdiff(unlist(cb[setdiff(names(cb), names(cs))]), which(!keep))
    if (!length(extra)) nce_abort("the two fits have the same terms: there is nothing to test", "input", call = call)
    cmat <- matrix(0, length(extra), sum(keep))
    cmat[cbind(seq_along(extra), match(extra, which(keep)))] <- 1
    return(nce_wald_stat(cmat, beta[keep], stats::vcov(big)[keep, keep, drop = FALSE]))
  }
  rows <- nce_wald_rows(big)
  xb <- stats::predict(big, rows, type = "lpmatrix")
  xs <- stats::predict(small, rows, type = "lpmatrix")
  xb <- xb[, keep, drop = FALSE]
  scale <- max(1, abs(xb), abs(xs))
  # Nested: the smaller model's columns lie in the larger's span.
  if (max(abs(qr.resid(qr(xb), xs))) > 1e-6 * scale) {
    nce_abort(paste("the fits are not nested: the smaller model has terms outside the larger one's span;",
                    "anova() compares nested fits"), "input", call = call)
  }
  r <- qr.resid(qr(xs), xb)
  sv <- svd(r)
  rank <- sum(sv$d > max(sv$d) * 1e-7 & sv$d > 1e-9 * scale)
  if (rank == 0L) {
    nce_abort("the two fits span the same model: there is nothing to test", "input", call = call)
  }
  cmat <- t(sv$v[, seq_len(rank), drop = FALSE])
  nce_wald_stat(cmat, beta[keep], stats::vcov(big)[keep, keep, drop = FALSE])
}

# (C b)' (C V C')^+ (C b) on chi-squared with rank(C V C') df: returns (df, chisq, p).
nce_wald_stat <- function(cmat, beta, v) {
  cb <- cmat %*% beta
  cv <- cmat %*% v %*% t(cmat)
  e <- eigen((cv + t(cv)) / 2, symmetric = TRUE)
  ok <- e$values > max(e$values) * 1e-10
  stat <- sum((crossprod(e$vectors[, ok, drop = FALSE], cb))^2 / e$values[ok])
  c(sum(ok), stat, stats::pchisq(stat, sum(ok), lower.tail = FALSE))
}

# Coefficient positions of each term, named by label (mgcv's labels for smooths), intercept
# included as "(Intercept)".
nce_term_columns <- function(fit) {
  if (inherits(fit, "nce_gam")) {
    labels <- c("(Intercept)", attr(fit$pterms, "term.labels"))
    out <- split(seq_along(fit$assign), factor(labels[fit$assign + 1L], levels = labels))
    for (sm in fit$smooth) out[[sm$label]] <- sm$first.para:sm$last.para
    return(out)
  }
  x <- nce_model_matrix(fit, data_rows(fit)[1L, , drop = FALSE])$x
  labels <- c("(Intercept)", attr(fit$terms, "term.labels"))
  split(seq_len(ncol(x)), factor(labels[attr(x, "assign") + 1L], levels = labels))
}

# Points at which to compare two models' spans: the data and up to 5000 reference points.
nce_wald_rows <- function(fit) {
  fr <- fit$nce_frame
  ref <- which(fr$.label == 0)
  if (length(ref) > 5000L) ref <- ref[round(seq(1, length(ref), length.out = 5000L))]
  fr[c(which(fr$.label == 1), ref), fit$reference$vars, drop = FALSE]
}

# One fit: each term against the others, Wald with the sandwich covariance.
nce_anova_terms <- function(object) {
  tt <- object$terms
  labels <- attr(tt, "term.labels")
  x <- stats::predict(object, type = "lpmatrix")
  assign <- attr(x, "assign")
  beta <- stats::coef(object)
  v <- stats::vcov(object)
  tab <- t(vapply(seq_along(labels), function(j) {
    cols <- which(assign == j & !is.na(beta))
    if (!length(cols)) return(c(0, NA, NA))
    vj <- v[cols, cols, drop = FALSE]
    stat <- drop(crossprod(beta[cols], solve(vj, beta[cols])))
    c(length(cols), stat, stats::pchisq(stat, length(cols), lower.tail = FALSE))
  }, numeric(3L)))
  tab <- as.data.frame(tab)
  names(tab) <- c("Df", "Wald", "Pr(>Chi)")
  rownames(tab) <- labels
  structure(tab, heading = c("Wald tests of each term (NCE sandwich covariance)\n",
                             paste("Model:", paste(deparse(object$nce_formula), collapse = " "))),
            class = c("anova", "data.frame"))
}

#' Drop each term of an nce fit in turn
#'
#' Refits the model without each term (new reference draws, via [update()])
#' and reports each smaller fit's `df` and AIC with the Wald test of the term
#' from [anova.nce_fit()].
#'
#' @param object An `nce_fit` (or `nce_gam`).
#' @param scope Term labels to drop (all by default).
#' @param ... Unused.
#' @return An `anova` data frame, one row for the full fit and one per term.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#' drop1(nce(~ y + I(y^2), df, ref_uniform(y = c(0, 1))))
#' @export
drop1.nce_fit <- function(object, scope, ...) {
  labels <- attr(stats::terms(object$nce_formula), "term.labels")
  if (missing(scope)) scope <- labels
  if (!is.character(scope) || !all(scope %in% labels)) {
    nce_abort(sprintf("`scope` must be term labels of the model (%s)", paste(labels, collapse = ", ")), "input")
  }
  env <- parent.frame()
  full_df <- nce_df(object)
  rows <- lapply(scope, function(term) {
    f <- stats::update.formula(object$nce_formula, stats::as.formula(paste("~ . -", term)))
    small <- stats::update(object, formula. = f)
    w <- nce_wald(small, object)
    c(nce_df(small), stats::AIC(small), w)
  })
  tab <- rbind(c(full_df, stats::AIC(object), NA, NA, NA), do.call(rbind, rows))
  tab <- as.data.frame(tab)
  names(tab) <- c("Df", "AIC", "Wald Df", "Wald", "Pr(>Chi)")
  rownames(tab) <- c("<none>", scope)
  structure(tab, heading = c("Single term deletions (refits; Wald tests with the NCE sandwich covariance)\n",
                             paste("Model:", paste(deparse(object$nce_formula), collapse = " "))),
            class = c("anova", "data.frame"))
}
