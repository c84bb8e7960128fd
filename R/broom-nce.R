# broom's tidy(), glance() and augment() for nce() fits, registered lazily on the generics
# package (R >= 3.6 registers `generics::tidy` methods when generics is loaded).

#' Tidy, glance at and augment nce fits (broom)
#'
#' `tidy()` gives the coefficient table (sandwich standard errors, z
#' statistics; with `conf.int = TRUE` Wald intervals); for fits with smooth
#' terms the parametric coefficients by default, or with
#' `parametric = FALSE` the smooth terms (`edf`, `ref.df`, `statistic`,
#' `p.value`, from [summary.nce_gam()]). `glance()` gives one row: the log
#' normaliser and its standard error, the log-likelihood of the normalised
#' model with its `df`, AIC, BIC, the numbers of data and reference points and
#' whether the fit converged. `augment()` adds to the data (or `newdata`)
#' `.fitted` (the log density, or the density with `type.predict =
#' "response"`) and, with `se_fit = TRUE`, `.se.fit`.
#'
#' @param x An `nce_fit` (or `nce_gam`).
#' @param conf.int Add `conf.low` and `conf.high`.
#' @param conf.level Their level.
#' @param parametric For `nce_gam`: the parametric coefficients (`TRUE`) or
#'   the smooth terms (`FALSE`).
#' @param newdata Data frame to augment instead of the fit's data.
#' @param type.predict `"link"` (log density) or `"response"` (density).
#' @param se_fit Add `.se.fit`.
#' @param ... Unused.
#' @return A data frame.
#' @name nce_broom
#' @examples
#' if (requireNamespace("broom", quietly = TRUE)) {
#'   set.seed(1)
#'   df <- data.frame(y = log1p(runif(300) * (exp(2) - 1)) / 2)
#'   fit <- nce(~ y, df, ref_uniform(y = c(0, 1)))
#'   broom::tidy(fit, conf.int = TRUE)
#'   broom::glance(fit)
#'   head(broom::augment(fit))
#' }
NULL

#' @rdname nce_broom
#' @exportS3Method generics::tidy
tidy.nce_fit <- function(x, conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  check_bool(conf.int, "conf.int")
  tab <- summary(x)$coefficients
  out <- data.frame(term = rownames(tab), estimate = tab[, 1L], std.error = tab[, 2L],
                    statistic = tab[, 3L], p.value = tab[, 4L], row.names = NULL, stringsAsFactors = FALSE)
  if (conf.int) {
    ci <- stats::confint(x, level = conf.level)
    out$conf.low <- unname(ci[, 1L])
    out$conf.high <- unname(ci[, 2L])
  }
  nce_as_tibble(out)
}

#' @rdname nce_broom
#' @exportS3Method generics::tidy
tidy.nce_gam <- function(x, parametric = TRUE,  # nolint: object_name_linter.
                         conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  tidy_gam_tables(x, summary(x), parametric, conf.int, conf.level)
}

# tidy() of a GAM-like fit from its mgcv summary `s`: the parametric coefficients (with Wald
# intervals from confint(x)) or the smooth terms' tests.
tidy_gam_tables <- function(x, s, parametric, conf_int, conf_level, call = caller_call()) {
  call <- call  # force the caller's call now
  check_bool(parametric, "parametric", call = call)
  check_bool(conf_int, "conf.int", call = call)
  if (parametric) {
    tab <- s$p.table
    out <- data.frame(term = rownames(tab), estimate = tab[, 1L], std.error = tab[, 2L],
                      statistic = tab[, 3L], p.value = tab[, 4L], row.names = NULL, stringsAsFactors = FALSE)
    if (conf_int) {
      ci <- stats::confint(x, parm = rownames(tab), level = conf_level)
      out$conf.low <- unname(ci[, 1L])
      out$conf.high <- unname(ci[, 2L])
    }
  } else {
    tab <- s$s.table
    out <- data.frame(term = rownames(tab), edf = tab[, 1L], ref.df = tab[, 2L], statistic = tab[, 3L],
                      p.value = tab[, 4L], row.names = NULL, stringsAsFactors = FALSE)
  }
  nce_as_tibble(out)
}

#' @rdname nce_broom
#' @exportS3Method generics::glance
glance.nce_fit <- function(x, ...) {  # nolint: object_name_linter.
  ll <- stats::logLik(x)
  v <- stats::vcov(x)
  out <- data.frame(log_normaliser = x$log_normaliser, log_normaliser_se = sqrt(max(v[1L, 1L], 0)),
                    logLik = as.numeric(ll), df = attr(ll, "df"), AIC = stats::AIC(x), BIC = stats::BIC(x),
                    nobs = x$n, n_reference = x$m, ratio = x$ratio, method = x$method,
                    reference = x$reference$kind, converged = isTRUE(x$converged),
                    stringsAsFactors = FALSE)
  nce_as_tibble(out)
}

#' @rdname nce_broom
#' @exportS3Method generics::augment
augment.nce_fit <- function(x, newdata = NULL,  # nolint: object_name_linter.
                            type.predict = c("link", "response"), se_fit = FALSE, ...) {  # nolint: object_name_linter.
  type.predict <- match.arg(type.predict)  # nolint: object_name_linter.
  check_bool(se_fit, "se_fit")
  data <- if (is.null(newdata)) data_rows(x) else newdata
  p <- stats::predict(x, data, type = type.predict, se.fit = TRUE)
  out <- data
  out$.fitted <- unname(p$fit)
  if (se_fit) out$.se.fit <- unname(p$se.fit)
  rownames(out) <- NULL
  nce_as_tibble(out)
}

# broom returns tibbles; give one when tibble is installed, else a data frame.
nce_as_tibble <- function(df) {
  if (requireNamespace("tibble", quietly = TRUE)) tibble::as_tibble(df) else df
}
