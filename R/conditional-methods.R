# Methods of conditional nce() fits (class nce_conditional, under nce_fit): coef(), vcov(),
# confint(), nobs(), formula(), model.frame() and drop1() are nce_fit's; what is here differs (the
# normaliser in z is part of the model).

#' Predict from a conditional nce fit
#'
#' @param object An `nce_conditional` fit (from [nce()] with `given`).
#' @param newdata Data frame with the reference's columns and the given
#'   columns (for `type = "log_normaliser"` the given columns suffice); the
#'   data by default.
#' @param type `"link"`: \eqn{\log p(y \mid z) = f(y, z) + \nu(z)}, the log of
#'   the normalised conditional density; `"response"`: its exponential;
#'   `"lpmatrix"`: the matrix that maps the coefficients to `"link"`;
#'   `"terms"`: each term's contribution to \eqn{f(y, z)} (a matrix, one
#'   column per parametric term or smooth, and `"(normaliser)"` for
#'   \eqn{\nu(z)});
#'   `"log_kernel"`: \eqn{f(y, z)} without the normaliser;
#'   `"log_normaliser"`: \eqn{\log Z(z) = -\nu(z)}.
#' @param se.fit Also return standard errors (delta method for `"response"`).
#' @inheritParams nce_vocabulary
#' @return A vector (a matrix for `"lpmatrix"`), or a list with `fit` and
#'   `se.fit`.
#' @examples
#' set.seed(1)
#' z <- runif(300, -1, 1)
#' d <- data.frame(y = rnorm(300, 1 + 2 * z, 0.5), z = z)
#' fit <- nce(~ y + I(y^2) + I(y * z), d, ref_normal(y = 1, cov = 4), ratio = 5, given = ~ z)
#' predict(fit, data.frame(y = c(0, 1), z = c(0, 0)), type = "response")
#' dnorm(c(0, 1), 1, 0.5)   # truth
#' @export
predict.nce_conditional <- function(object, newdata,
                                    type = c("link", "response", "lpmatrix", "terms", "log_kernel", "log_normaliser"),
                                    se.fit = FALSE,  # nolint: object_name_linter.
                                    se_type = c("sandwich", "naive"), ...) {
  type <- predict_type(type)
  v <- stats::vcov(object, se_type = match_choice(se_type))
  if (missing(newdata)) newdata <- cond_data_rows(object)
  beta <- object$coefficients
  pa <- object$row_setup$ncol
  if (type == "log_normaliser") {
    nd <- cond_newdata(object, newdata, need_state = FALSE)
    xb <- setup_predict(object$group_setup, nd, FALSE)
    x <- cbind(matrix(1, nrow(xb), 1L), matrix(0, nrow(xb), pa - 1L), xb)
    fit <- -drop(x %*% beta)
    se <- sqrt(rowSums((x %*% v) * x))
  } else {
    bl <- cond_blocks(object, newdata, support = TRUE)
    x <- cbind(bl$a, bl$b)
    colnames(x) <- names(beta)
    if (type == "lpmatrix") return(x)
    if (type == "terms") return(cond_terms(object, x, v, se.fit, rownames(newdata)))
    if (type == "log_kernel") x[, c(1L, seq_along(beta)[-seq_len(pa)])] <- 0
    p <- zero_density_at(drop(x %*% beta), sqrt(rowSums((x %*% v) * x)), bl$outside, type == "response")
    fit <- p$fit
    se <- p$se
  }
  names(fit) <- names(se) <- rownames(newdata)
  if (se.fit) list(fit = fit, se.fit = se) else fit
}

#' @export
terms.nce_conditional <- function(x, ...) {
  labels <- c(attr(stats::terms(x$nce_formula), "term.labels"),
              attr(stats::terms(x$intercept$intercept), "term.labels"))
  stats::terms(stats::reformulate(labels, env = environment(x$nce_formula)))
}

#' @export
model.matrix.nce_conditional <- function(object, ...) {
  bl <- cond_blocks(object, object$nce_frame)
  x <- cbind(bl$a, bl$b)
  colnames(x) <- names(object$coefficients)
  x
}

#' Log-likelihood of a conditional nce fit
#'
#' The sum over the data rows of \eqn{\log p(y_i \mid z_i)} under the fitted
#' normalised model, the normaliser being minus the fitted intercept in z; `df`
#' is the number of coefficients, effective ones for penalised terms
#' (normaliser included).
#' @inheritParams nce_vocabulary
#' @param newdata Optional data frame of held-out rows (reference and given
#'   columns).
#' @return An object of class `logLik`.
#' @export
logLik.nce_conditional <- function(object, newdata = NULL, ...) {
  lp <- if (is.null(newdata)) stats::predict(object, type = "link") else stats::predict(object, newdata, type = "link")
  structure(sum(lp), df = sum(object$edf), nobs = length(lp), class = "logLik")
}

#' Compare nested conditional nce fits by a Wald test
#'
#' The larger fit's extra coefficients are tested against zero with its NCE
#' sandwich covariance (a Wald test, valid for NCE; a plain likelihood-ratio
#' test is not, because the NCE objective is not the likelihood).
#' @param object,... Two `nce_conditional` fits, one nested in the other.
#' @return A data frame of class `anova`.
#' @export
anova.nce_conditional <- function(object, ...) {
  fits <- list(object, ...)
  if (length(fits) != 2L || !all(vapply(fits, inherits, TRUE, "nce_conditional"))) {
    nce_abort("anova() of conditional nce fits compares exactly two nested `nce_conditional` fits", "input")
  }
  k <- vapply(fits, function(f) length(f$coefficients), 0)
  fits <- fits[order(k)]
  small <- fits[[1L]]
  big <- fits[[2L]]
  extra <- setdiff(names(big$coefficients), names(small$coefficients))
  if (!length(extra) || !all(names(small$coefficients) %in% names(big$coefficients))) {
    nce_abort("the fits are not nested: the smaller one's coefficients must all be in the larger one", "input")
  }
  b <- big$coefficients[extra]
  v <- big$vcov[extra, extra, drop = FALSE]
  w <- drop(crossprod(b, solve(v, b)))
  df <- length(extra)
  anova_table(list(small, big), rbind(NA, c(df, w, stats::pchisq(w, df, lower.tail = FALSE))),
              "Wald test of nested conditional NCE fits (sandwich covariance)")
}

#' Simulate from a conditional nce fit
#'
#' For each data row, a new y drawn from the fitted \eqn{p(y \mid z_i)} by
#' sampling-importance-resampling: `candidates` reference draws weighted by
#' \eqn{\exp\{f(u, z_i)\}/q(u)}, one kept (Gumbel-max).
#' @inheritParams nce_vocabulary
#' @param nsim Number of data sets.
#' @param candidates Reference draws per simulated point.
#' @return Data frame with the reference's and the given columns and `.sim`.
#' @export
simulate.nce_conditional <- function(object, nsim = 1, seed = NULL, candidates = 100, ...) {
  check_nsim(nsim, 8 * 2 * nrow(object$groups) * (length(object$reference$vars) + length(object$given) + 2))
  check_count(candidates, "candidates", max = 1e6)
  old <- set_sim_seed(seed)
  on.exit(restore_seed(old))
  z <- object$groups
  n <- nrow(z)
  check_size(as.double(n) * candidates * (length(object$reference$vars) + 4) * 8 * 3, "candidates", "simulate()")
  vars <- object$reference$vars
  sims <- lapply(seq_len(nsim), function(s) {
    u <- ref_draw(object$reference, n * candidates)
    nd <- take_rows(z, rep(seq_len(n), each = candidates))
    nd[vars] <- u[vars]
    lw <- stats::predict(object, nd, type = "log_kernel") - ref_logq(object$reference, u)
    g <- lw - log(-log(stats::runif(length(lw))))
    pick <- (seq_len(n) - 1L) * candidates + max.col(matrix(g, n, candidates, byrow = TRUE), ties.method = "first")
    out <- take_rows(nd, pick)
    out$.sim <- s
    out
  })
  out <- do.call(rbind, sims)
  rownames(out) <- NULL
  out
}

#' @export
print.nce_conditional <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nConditional noise-contrastive estimation: p(", paste(x$reference$vars, collapse = ", "), " | ",
      paste(x$given, collapse = ", "), ")\n\nCall:  ", paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n",
      sep = "")
  s <- summary(x)
  if (nrow(s$coefficients)) {
    cat("Coefficients:\n")
    print.default(format(s$coefficients[, 1L], digits = digits), print.gap = 2L, quote = FALSE)
  }
  cat(sprintf("\nLog normaliser in %s: %s\n", paste(x$given, collapse = ", "), normaliser_words(x)))
  cat(sprintf("%d data points, %d reference points each (%s)%s\n", x$n, x$ratio, x$reference$kind,
              if (x$converged) "" else "; NOT CONVERGED"))
  invisible(x)
}

#' Summarise a conditional nce fit
#'
#' @inheritParams nce_vocabulary
#' @return An object of class `summary.nce_conditional`: the coefficients of
#'   the unnormalised model (`coefficients`), the log normaliser at each level
#'   of a factor in `given` or over the range of a numeric one
#'   (`normaliser`, with standard errors), smooth terms (`smooths`) and the
#'   fit's settings.
#' @export
summary.nce_conditional <- function(object, se_type = c("sandwich", "naive"), ...) {
  se_type <- match_choice(se_type)
  pa <- object$row_setup$ncol
  cf <- object$coefficients
  lab <- names(cf)
  for (sm in object$smooth) lab[sm$first.para:sm$last.para] <- sm$label
  par <- which(seq_along(cf) <= pa & lab == names(cf) & lab != "(Intercept)")
  se <- sqrt(diag(stats::vcov(object, se_type = se_type)))[par]
  z <- cf[par] / se
  tab <- cbind(Estimate = cf[par], `Std. Error` = se, `z value` = z, `Pr(>|z|)` = 2 * stats::pnorm(-abs(z)))
  grid <- normaliser_grid(object)
  p <- stats::predict(object, grid, type = "log_normaliser", se.fit = TRUE, se_type = se_type)
  grid$log_normaliser <- unname(p$fit)
  grid$se <- unname(p$se.fit)
  smooths <- if (length(object$smooth)) {
    data.frame(term = vapply(object$smooth, `[[`, "", "label"),
               part = ifelse(vapply(object$smooth, `[[`, 0, "first.para") > pa, "normaliser", "model"),
               edf = vapply(object$smooth, function(sm) sum(object$edf[sm$first.para:sm$last.para]), 0))
  }
  structure(c(list(call = object$call, coefficients = tab, normaliser = grid, smooths = smooths, se_type = se_type,
                   given = object$given, n = object$n, ratio = object$ratio, reference = object$reference,
                   reml = object$reml, converged = object$converged), summary_loglik(object)),
            class = "summary.nce_conditional")
}

#' @export
print.summary.nce_conditional <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nConditional noise-contrastive estimation: p(", paste(x$reference$vars, collapse = ", "), " | ",
      paste(x$given, collapse = ", "), ")\n\nCall:  ", paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n",
      sep = "")
  if (nrow(x$coefficients)) {
    cat(sprintf("Coefficients (%s standard errors):\n", x$se_type))
    stats::printCoefmat(x$coefficients, digits = digits)
  }
  if (!is.null(x$smooths)) {
    cat("\nSmooth terms:\n")
    print(x$smooths, digits = digits, row.names = FALSE)
  }
  cat("\nLog normaliser log Z(", paste(x$given, collapse = ", "), "):\n", sep = "")
  print(x$normaliser, digits = digits, row.names = FALSE)
  cat(sprintf("\nlog-likelihood %s (df %s); %d data points, %d reference points each from %s over %s%s\n",
              format(as.numeric(x$logLik), digits = digits + 2L), format(attr(x$logLik, "df"), digits = digits), x$n,
              x$ratio, x$reference$kind,
              paste(x$reference$vars, collapse = ", "), if (x$converged) "" else " (NOT CONVERGED)"))
  invisible(x)
}

#' Plot the log normaliser of a conditional nce fit
#'
#' The fitted \eqn{\log Z(z)} with a pointwise confidence band, against each
#' given column (others at their first level or median): a curve for numeric
#' columns, points with intervals for factors.
#' @inheritParams nce_vocabulary
#' @param n_grid Grid points for numeric columns.
#' @param ... Passed to the plotting functions.
#' @return `x`, invisibly.
#' @export
plot.nce_conditional <- function(x, level = 0.95, n_grid = 100, ...) {
  q <- stats::qnorm(1 - (1 - level) / 2)
  z <- x$groups
  for (v in x$given) {
    base <- lapply(z, function(c) if (is.factor(c)) c[1L] else stats::median(c))
    g <- if (is.factor(z[[v]])) {
      factor(levels(z[[v]]), levels = levels(z[[v]]))
    } else {
      seq(min(z[[v]]), max(z[[v]]), length.out = n_grid)
    }
    nd <- as.data.frame(base)[rep(1L, length(g)), , drop = FALSE]
    nd[[v]] <- g
    p <- stats::predict(x, nd, type = "log_normaliser", se.fit = TRUE)
    lo <- p$fit - q * p$se.fit
    hi <- p$fit + q * p$se.fit
    if (is.factor(g)) {
      graphics::plot(seq_along(g), p$fit, ylim = range(lo, hi), xaxt = "n", xlab = v, ylab = "log Z", pch = 19, ...)
      graphics::axis(1, at = seq_along(g), labels = levels(g))
      graphics::segments(seq_along(g), lo, seq_along(g), hi)
    } else {
      graphics::plot(g, p$fit, type = "n", ylim = range(lo, hi), xlab = v, ylab = "log Z", ...)
      graphics::polygon(c(g, rev(g)), c(lo, rev(hi)), col = grDevices::adjustcolor("steelblue", 0.3), border = NA)
      graphics::lines(g, p$fit, lwd = 2, col = "steelblue")
      graphics::rug(z[[v]], col = "grey50")
    }
  }
  invisible(x)
}

#' Tidy a conditional nce fit
#'
#' @inheritParams nce_vocabulary
#' @param conf.int Add Wald confidence limits.
#' @return A data frame with one row per parametric coefficient: `term`,
#'   `component` (`"model"` for f(y, z), `"normaliser"` for the intercept in
#'   z), `estimate`, `std.error` (sandwich), `statistic`, `p.value`, and with
#'   `conf.int = TRUE` `conf.low`, `conf.high`. Spline coefficients are left
#'   out, as broom does for mgcv's smooths.
#' @exportS3Method generics::tidy
tidy.nce_conditional <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  cf <- x$coefficients
  lab <- names(cf)
  for (sm in x$smooth) lab[sm$first.para:sm$last.para] <- NA
  keep <- which(!is.na(lab))
  se <- sqrt(diag(x$vcov))[keep]
  out <- data.frame(term = names(cf)[keep],
                    component = ifelse(keep > x$row_setup$ncol | keep == 1L, "normaliser", "model"),
                    estimate = unname(cf[keep]), std.error = unname(se), statistic = unname(cf[keep] / se),
                    p.value = unname(2 * stats::pnorm(-abs(cf[keep] / se))), stringsAsFactors = FALSE)
  if (conf.int) {
    z <- stats::qnorm(1 - (1 - conf.level) / 2)
    out$conf.low <- out$estimate - z * out$std.error
    out$conf.high <- out$estimate + z * out$std.error
  }
  out
}

#' Glance at a conditional nce fit
#'
#' @inheritParams nce_vocabulary
#' @return A one-row data frame: `nobs`, `ratio`, `logLik`, `df`, `AIC`,
#'   `BIC`, `converged`.
#' @exportS3Method generics::glance
glance.nce_conditional <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  data.frame(nobs = x$n, ratio = x$ratio, logLik = as.numeric(ll), df = attr(ll, "df"),
             AIC = stats::AIC(ll), BIC = stats::BIC(ll), converged = x$converged)
}

#' Augment data with a conditional nce fit's predictions
#'
#' @inheritParams nce_vocabulary
#' @param newdata Data frame with the reference's and the given columns; the
#'   fit's data by default.
#' @return `newdata` with `.fitted` (the log conditional density, type
#'   `"link"`) and `.se.fit`.
#' @exportS3Method generics::augment
augment.nce_conditional <- function(x, newdata = NULL, ...) {  # nolint: object_name_linter.
  if (is.null(newdata)) newdata <- cond_data_rows(x)
  p <- stats::predict(x, newdata, type = "link", se.fit = TRUE)
  newdata$.fitted <- unname(p$fit)
  newdata$.se.fit <- unname(p$se.fit)
  newdata
}
