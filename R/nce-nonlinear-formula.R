# Formulas f(x; theta) in the manner of nls(): symbolic gradients by deriv(), with abs() handled
# by the chain rule through sign() (deriv()'s table has no abs()).

nl_formula_model <- function(formula, start, vars, gradient, call) {
  if (!inherits(formula, "formula") || length(formula) != 2L) {
    nce_abort("`formula` must be one-sided, ~ <log density in data columns and parameters>", "input", call)
  }
  expr <- formula[[2L]]
  env <- environment(formula)
  if (is.null(env)) env <- globalenv()
  pnames <- names(start)
  used <- all.vars(expr)
  unused <- setdiff(pnames, used)
  if (length(unused)) {
    nce_abort(sprintf("parameter(s) %s in `start` do not appear in `formula`", paste(unused, collapse = ", ")),
              "input", call)
  }
  other <- setdiff(used, c(pnames, vars))
  # Symbols neither parameters nor data must be numeric constants in the formula's environment.
  unknown <- other[!vapply(other, function(s) {
    exists(s, envir = env) && is.numeric(get(s, envir = env))
  }, logical(1))]
  if (length(unknown)) {
    nce_abort(sprintf(paste("`formula` uses %s, which is neither a reference column (%s) nor a parameter in",
                            "`start`: add it to `start` (or to the reference)"),
                      paste(unknown, collapse = ", "), paste(vars, collapse = ", ")), "input", call)
  }
  log_f <- function(theta, data) {
    e <- list2env(c(as.list(theta), as.list(data)), parent = env)
    v <- eval(expr, e)
    if (length(v) == 1L) v <- rep(v, nrow(data))
    v
  }
  grad_fun <- NULL
  source <- "finite differences"
  if (!is.null(gradient)) {
    grad_fun <- gradient
    source <- "user function"
  } else {
    compiled <- tryCatch(nl_compile(expr, pnames), error = function(e) NULL)
    if (!is.null(compiled)) {
      source <- "symbolic (deriv)"
      grad_fun <- function(theta, data) {
        e <- list2env(c(as.list(theta), as.list(data)), parent = env)
        g <- compiled(e)$grad
        if (nrow(g) == 1L && nrow(data) != 1L) g <- g[rep(1L, nrow(data)), , drop = FALSE]
        g
      }
    }
  }
  structure(list(log_f = log_f, gradient = grad_fun, name = paste(deparse(expr, width.cutoff = 500L), collapse = " "),
                 rust = NULL, gradient_source = source, expr = expr),
            class = "nce_model")
}

# Compile `expr` into function(envir) -> list(value, grad) with grad the length(value) x p matrix of
# derivatives in `pnames`. Each outermost abs(u) is replaced by a symbol whose derivative is
# sign(u) du, with u compiled recursively. Errors when deriv() cannot differentiate a function.
nl_compile <- function(expr, pnames) {
  abs_args <- list()
  replace_abs <- function(e) {
    if (is.call(e)) {
      if (identical(e[[1L]], as.name("abs")) && length(e) == 2L) {
        k <- length(abs_args) + 1L
        abs_args[[k]] <<- e[[2L]]
        return(as.name(sprintf(".nce_abs_%d", k)))
      }
      for (i in seq_along(e)[-1L]) if (!is.null(e[[i]])) e[[i]] <- replace_abs(e[[i]])
    }
    e
  }
  outer <- replace_abs(expr)
  abs_syms <- if (length(abs_args)) sprintf(".nce_abs_%d", seq_along(abs_args)) else character()
  inner <- lapply(abs_args, nl_compile, pnames = pnames)
  dexpr <- stats::deriv(outer, c(pnames, abs_syms))
  p <- length(pnames)
  function(envir) {
    parts <- lapply(inner, function(f) f(envir))
    e <- if (length(parts)) new.env(parent = envir) else envir
    for (k in seq_along(parts)) assign(abs_syms[k], abs(parts[[k]]$value), envir = e)
    v <- eval(dexpr, e)
    g <- attr(v, "gradient")
    attr(v, "gradient") <- NULL
    n <- max(length(v), vapply(parts, function(x) length(x$value), 1L))
    if (length(v) < n) v <- rep(v, length.out = n)
    if (nrow(g) < n) g <- g[rep(seq_len(nrow(g)), length.out = n), , drop = FALSE]
    grad <- g[, seq_len(p), drop = FALSE]
    for (k in seq_along(parts)) {
      gi <- parts[[k]]$grad
      if (nrow(gi) < n) gi <- gi[rep(seq_len(nrow(gi)), length.out = n), , drop = FALSE]
      grad <- grad + g[, p + k] * sign(rep(parts[[k]]$value, length.out = n)) * gi
    }
    dimnames(grad) <- list(NULL, pnames)
    list(value = as.double(v), grad = grad)
  }
}
