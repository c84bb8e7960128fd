# References for binary and categorical data (Ising and Potts models): independent
# Bernoulli columns and independent categorical columns, sampled and evaluated in Rust
# (nce-core ref_discrete.rs).

#' Bernoulli reference for binary data
#'
#' Independent Bernoulli columns with values 0 and 1: a reference for Ising
#' models and other models of binary vectors. Probabilities are given, or
#' fitted to the data's column means, shrunk away from 0 and 1 as
#' \eqn{(k + 1/2) / (n + 1)} for k ones in n rows, so the reference puts mass
#' on every state.
#'
#' @param prob Named probabilities of a 1, one per column
#'   (`c(y1 = 0.5, y2 = 0.3)`), or one probability for all the columns named
#'   in `vars`; strictly between 0 and 1.
#' @param data Data frame to fit the probabilities to (instead of `prob`).
#' @param vars Columns: with `data`, the columns to cover (default: every
#'   column whose values are all 0 or 1); with one `prob`, the columns it
#'   applies to.
#' @return A reference distribution (class `nce_reference`) for [nce()]; its
#'   draws are numeric 0/1 columns, and data columns may be numeric 0/1 or
#'   logical.
#' @section What it refuses:
#' All refusals are errors of class `nce_error_input`:
#' * both or neither of `prob` and `data`; `vars` not distinct non-empty names;
#' * `prob` not finite probabilities strictly between 0 and 1 (0 or 1 would give states the
#'   reference never draws), several `prob` not named by column, one unnamed `prob` without
#'   `vars`;
#' * `data` not a data frame with at least one row, `vars` not in `data`, or a used column
#'   holding anything but 0/1 (or TRUE/FALSE), NA included.
#' @examples
#' ref_bernoulli(c(y1 = 0.5, y2 = 0.2))
#' ref_bernoulli(0.5, vars = paste0("s", 1:5))
#' d <- data.frame(a = c(0, 1, 1, 1), b = c(TRUE, FALSE, FALSE, FALSE))
#' ref_bernoulli(data = d)
#' @export
ref_bernoulli <- function(prob = NULL, data = NULL, vars = NULL) {
  if (is.null(prob) == is.null(data)) {
    nce_abort("give exactly one of `prob` (the probabilities) or `data` (to fit them to)", "input")
  }
  if (!is.null(vars) &&
      (!is.character(vars) || !length(vars) || anyNA(vars) || any(!nzchar(vars)) || anyDuplicated(vars))) {
    check_fail("distinct column names", vars, "vars", caller_call(0L))
  }
  if (!is.null(data)) {
    check_data_frame(data, "data")
    if (is.null(vars)) {
      vars <- names(data)[vapply(data, is_binary_column, TRUE)]
      if (!length(vars)) nce_abort("`data` has no column whose values are all 0 or 1 (or TRUE/FALSE)", "input")
    }
    absent <- setdiff(vars, names(data))
    if (length(absent)) nce_abort(sprintf("`vars` not in `data`: %s", paste(absent, collapse = ", ")), "input")
    bad <- vars[!vapply(data[vars], is_binary_column, TRUE)]
    if (length(bad)) {
      nce_abort(sprintf("`data` column(s) %s must hold only 0 and 1 (or TRUE and FALSE), without NA",
                        paste(bad, collapse = ", ")), "input")
    }
    k <- vapply(data[vars], function(v) sum(as.double(v)), 0)
    prob <- (k + 0.5) / (nrow(data) + 1)
  } else {
    if (!is.numeric(prob) || !length(prob) || any(!is.finite(prob)) || any(prob <= 0 | prob >= 1)) {
      check_fail("probabilities strictly between 0 and 1", prob, "prob", caller_call(0L))
    }
    if (length(prob) == 1L && is.null(names(prob))) {
      if (is.null(vars)) nce_abort("one unnamed `prob` needs `vars`, the columns it applies to", "input")
      prob <- rep(prob, length(vars))
    } else {
      if (is.null(names(prob)) || any(!nzchar(names(prob))) || anyDuplicated(names(prob))) {
        nce_abort("`prob` must be named by column, e.g. c(y1 = 0.5, y2 = 0.3)", "input")
      }
      if (!is.null(vars)) nce_abort("give `vars` only with `data` or with one unnamed `prob`", "input")
      vars <- names(prob)
    }
  }
  structure(list(kind = "bernoulli", vars = vars, prob = unname(as.double(prob)),
                 fitted = !is.null(data)),
            class = c("nce_ref_bernoulli", "nce_reference"))
}

is_binary_column <- function(v) {
  (is.logical(v) || (is.numeric(v) && !is.factor(v))) && length(v) > 0L && !anyNA(v) && all(v == 0 | v == 1)
}

#' Categorical reference for factor data
#'
#' Independent categorical columns: uniform on each column's levels, or with
#' given probabilities; a reference for Potts models and other models of
#' vectors of labels.
#'
#' @param ... Named columns, each either a character vector of levels
#'   (uniform over them), a factor (uniform over its levels) or a named
#'   vector of probabilities (names are the levels; summing to 1, each > 0).
#' @param data Data frame whose factor (or character) columns give the levels
#'   (instead of `...`), uniform over each column's levels.
#' @param vars With `data`: the columns to cover (default: every factor and
#'   character column).
#' @return A reference distribution (class `nce_reference`) for [nce()]; its
#'   draws are factor columns with the given levels.
#' @section What it refuses:
#' All refusals are errors of class `nce_error_input`:
#' * columns given both in `...` and `data`, unnamed or duplicated column names, `data` not a
#'   data frame with rows, or without factor or character columns; `vars` not in `data`;
#' * a column that is not levels (character or factor) or named probabilities, fewer than
#'   two distinct levels, NA levels, or probabilities not each > 0 summing to 1.
#' @examples
#' ref_categorical(s1 = c("a", "b", "c"), s2 = c(a = 0.2, b = 0.3, c = 0.5))
#' ref_categorical(data = data.frame(s = factor(c("x", "y", "x"))))
#' @export
ref_categorical <- function(..., data = NULL, vars = NULL) {
  cols <- list(...)
  if (length(cols) && !is.null(data)) nce_abort("give the columns in `...` or `data`, not both", "input")
  if (!is.null(data)) {
    check_data_frame(data, "data")
    if (is.null(vars)) vars <- names(data)[vapply(data, function(v) is.factor(v) || is.character(v), TRUE)]
    if (!is.character(vars) || !length(vars)) nce_abort("`data` has no factor or character column to cover", "input")
    absent <- setdiff(vars, names(data))
    if (length(absent)) nce_abort(sprintf("`vars` not in `data`: %s", paste(absent, collapse = ", ")), "input")
    cols <- lapply(data[vars], function(v) {
      if (is.factor(v)) levels(v) else sort(unique(as.character(v[!is.na(v)])))
    })
  }
  if (!length(cols) || is.null(names(cols)) || any(!nzchar(names(cols))) || anyDuplicated(names(cols))) {
    nce_abort("`...` must be named columns, e.g. ref_categorical(s = c(\"a\", \"b\", \"c\"))", "input")
  }
  levels <- list()
  prob <- list()
  for (v in names(cols)) {
    x <- cols[[v]]
    if (is.factor(x)) x <- levels(x)
    if (is.character(x)) {
      lev <- x
      p <- rep(1 / length(lev), length(lev))
    } else if (is.numeric(x)) {
      lev <- names(x)
      p <- unname(as.double(x))
      if (is.null(lev) || any(!nzchar(lev)) || any(!is.finite(p)) || any(p <= 0) || abs(sum(p) - 1) > 1e-8) {
        nce_abort(sprintf(paste("probabilities of `%s` must be named by level, each > 0, summing to 1",
                                "(e.g. c(a = 0.2, b = 0.8))"), v), "input")
      }
    } else {
      nce_abort(sprintf("`%s` must be levels (character or factor) or named probabilities, not %s",
                        v, describe_value(x)), "input")
    }
    if (length(lev) < 2L || anyNA(lev) || anyDuplicated(lev)) {
      nce_abort(sprintf("`%s` needs at least two distinct levels, without NA", v), "input")
    }
    levels[[v]] <- lev
    prob[[v]] <- p
  }
  structure(list(kind = "categorical", vars = names(levels), levels = levels, prob = prob),
            class = c("nce_ref_categorical", "nce_reference"))
}

#' @export
ref_draw.nce_ref_bernoulli <- function(ref, n) {  # nolint: object_name_linter.
  x <- rs(nce_ref_bernoulli_sample(ref$prob, as.double(n), draw_seed(), nce_threads()))
  colnames(x) <- ref$vars
  as.data.frame(x)
}

#' @export
ref_logq.nce_ref_bernoulli <- function(ref, data) {  # nolint: object_name_linter.
  x <- vapply(ref$vars, function(v) {
    z <- data[[v]]
    if (!(is.logical(z) || (is.numeric(z) && !is.factor(z)))) {
      nce_abort(sprintf("column %s must be numeric 0/1 or logical for a Bernoulli reference, not %s", v, class(z)[1L]),
                "input", call = NULL)
    }
    z <- as.double(z)
    z[is.na(z)] <- NaN
    z
  }, numeric(nrow(data)))
  x <- matrix(x, nrow(data), length(ref$vars))
  rs(nce_ref_bernoulli_log_density(ref$prob, x, nce_threads()))
}

#' @export
ref_draw.nce_ref_categorical <- function(ref, n) {  # nolint: object_name_linter.
  x <- rs(nce_ref_categorical_sample(unname(ref$prob), as.double(n), draw_seed(), nce_threads()))
  out <- lapply(seq_along(ref$vars), function(j) factor(ref$levels[[j]][x[, j]], levels = ref$levels[[j]]))
  names(out) <- ref$vars
  as.data.frame(out)
}

#' @export
ref_logq.nce_ref_categorical <- function(ref, data) {  # nolint: object_name_linter.
  x <- vapply(ref$vars, function(v) {
    code <- match(as.character(data[[v]]), ref$levels[[v]])
    code[is.na(code)] <- 0
    as.double(code)
  }, numeric(nrow(data)))
  x <- matrix(x, nrow(data), length(ref$vars))
  rs(nce_ref_categorical_log_density(unname(ref$prob), x, nce_threads()))
}

#' @export
print.nce_ref_bernoulli <- function(x, ...) {
  cat(sprintf("<nce reference: bernoulli over %s>\n", paste(x$vars, collapse = ", ")))
  cat(sprintf("  P(1): %s%s\n", paste(sprintf("%s %s", x$vars, format(x$prob, digits = 3)), collapse = ", "),
              if (isTRUE(x$fitted)) " (fitted to the data)" else ""))
  invisible(x)
}

#' @export
print.nce_ref_categorical <- function(x, ...) {
  cat(sprintf("<nce reference: categorical over %s>\n", paste(x$vars, collapse = ", ")))
  for (v in x$vars) {
    p <- x$prob[[v]]
    desc <- if (max(abs(p - 1 / length(p))) < 1e-12) "uniform" else paste(format(p, digits = 3), collapse = ", ")
    cat(sprintf("  %s: %d levels (%s): %s\n", v, length(p), paste(x$levels[[v]], collapse = ", "), desc))
  }
  invisible(x)
}
