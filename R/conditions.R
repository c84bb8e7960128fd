# Classed conditions. Errors are `nce_error_<kind>` / `nce_error`, warnings
# `nce_warning_<kind>` / `nce_warning`, so callers can catch them by kind.

nce_abort <- function(message, kind = "input", call = sys.call(-1L)) {
  cond <- structure(
    class = c(paste0("nce_error_", kind), "nce_error", "error", "condition"),
    list(message = message, call = call)
  )
  stop(cond)
}

nce_warn <- function(message, kind, call = sys.call(-1L)) {
  cond <- structure(
    class = c(paste0("nce_warning_", kind), "nce_warning", "warning", "condition"),
    list(message = message, call = call)
  )
  warning(cond)
}

# Rust calls return either their result or a list of class `nce_rust_error`
# (the Rust side never raises R errors itself); turn the latter into a condition.
rs <- function(res, call = sys.call(-1L)) {
  if (inherits(res, "nce_rust_error")) {
    if (identical(res$code, "interrupt")) nce_interrupt()
    nce_abort(res$message, res$code, call = call)
  }
  res
}

# A user interrupt caught on the way (by an R callback's handler, or by the Rust side's poll, which
# returns the code "interrupt") goes on as an interrupt, not as an error: signal the `interrupt`
# condition as R does (tryCatch(interrupt =) and withCallingHandlers() see it), then return to the
# top level as R's own interrupt does.
nce_interrupt <- function() {
  signalCondition(structure(class = c("interrupt", "condition"), list()))
  invokeRestart("abort")
}

# Positions as "1, 5, 9 and 3 more" for messages.
format_positions <- function(i, max = 5L) {
  s <- paste(utils::head(i, max), collapse = ", ")
  if (length(i) > max) s <- paste0(s, " and ", length(i) - max, " more")
  s
}

# Messages of class `nce_message_<kind>` / `nce_message`, muffled by suppressMessages().
nce_inform <- function(message, kind) {
  cond <- structure(
    class = c(paste0("nce_message_", kind), "nce_message", "message", "condition"),
    list(message = paste0(message, "\n"), call = NULL)
  )
  message(cond)
}

# Call a user-supplied function `f(...)`: an error in it becomes `nce_error_model`, naming the
# argument `arg` and quoting the original message, so callers can tell a broken model from bad
# input (the package's own classed errors pass unchanged). An interrupt is no error: it is not
# caught here and goes on as an interrupt.
call_user <- function(f, ..., arg, at = NULL, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  tryCatch(f(...), nce_error = function(e) stop(e), error = function(e) {
    nce_abort(sprintf("`%s` failed%s: %s. Fix `%s` so that it runs on these arguments.", arg,
                      if (is.null(at)) "" else paste(" at", at), conditionMessage(e), arg), "model", call = call)
  })
}
