# Argument checks shared by every exported function, in the manner of rlang's standalone
# type checks: each takes the argument, its name (`arg`) and the user's call (`call`), and
# raises a classed `nce_error_input` (or `nce_error_size`) whose message names the argument,
# the value it got and what it needs. Exported functions call them directly (the default
# `call` is then the user's call); internal helpers pass their caller's `call` on.

# The user's call for messages: the caller of the function that calls this.
caller_call <- function(n = 1L) sys.call(-(n + 1L))

# How a value looks in a message: short, type-aware.
describe_value <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.function(x)) return("a function")
  if (is.data.frame(x)) return(sprintf("a data frame of %d row(s)", nrow(x)))
  if (is.list(x)) return(sprintf("a list of length %d", length(x)))
  if (length(x) == 0L) return(sprintf("an empty %s vector", typeof(x)))
  if (length(x) > 1L) return(sprintf("a %s vector of length %d", typeof(x), length(x)))
  if (is.character(x)) return(sprintf("\"%s\"", substr(x, 1L, 40L)))
  if (is.factor(x)) return("a factor")
  format(x)
}

check_fail <- function(what, x, arg, call, kind = "input") {
  nce_abort(sprintf("`%s` must be %s, not %s.", arg, what, describe_value(x)), kind, call = call)
}

#' @noRd
check_number <- function(x, arg = deparse(substitute(x)), min = -Inf, max = Inf,
                         allow_null = FALSE, allow_infinite = FALSE, exclusive_min = FALSE,
                         call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (allow_null && is.null(x)) return(invisible(x))
  what <- number_what("one number", min, max, exclusive_min)
  if (!is.numeric(x) || is.factor(x) || length(x) != 1L || is.na(x) ||
      (!allow_infinite && !is.finite(x))) {
    check_fail(what, x, arg, call)
  }
  if (x < min || x > max || (exclusive_min && x <= min)) check_fail(what, x, arg, call)
  invisible(x)
}

#' @noRd
check_whole <- function(x, arg = deparse(substitute(x)), min = -Inf, max = Inf,
                        allow_null = FALSE, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (allow_null && is.null(x)) return(invisible(x))
  what <- number_what("one whole number", min, max, FALSE)
  if (!is.numeric(x) || is.factor(x) || length(x) != 1L || !is.finite(x) || x != round(x) ||
      x < min || x > max) {
    check_fail(what, x, arg, call)
  }
  invisible(x)
}

# A count: a whole number >= min (1 by default), below R's integer limit unless `max` says.
check_count <- function(x, arg = deparse(substitute(x)), min = 1, max = .Machine$integer.max,
                        allow_null = FALSE, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  check_whole(x, arg, min = min, max = max, allow_null = allow_null, call = call)
}

number_what <- function(what, min, max, exclusive_min) {
  lo <- if (is.finite(min)) sprintf("%s %s", if (exclusive_min) ">" else ">=", format(min)) else NULL
  hi <- if (is.finite(max)) sprintf("<= %s", format(max)) else NULL
  if (identical(min, 0) && exclusive_min && is.null(hi)) return(paste(what, "> 0"))
  paste(c(what, paste(c(lo, hi), collapse = " and ")), collapse = " ")
}

check_probability <- function(x, arg = deparse(substitute(x)), call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x) || x <= 0 || x >= 1) {
    check_fail("one number strictly between 0 and 1", x, arg, call)
  }
  invisible(x)
}

check_bool <- function(x, arg = deparse(substitute(x)), call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (!is.logical(x) || length(x) != 1L || is.na(x)) check_fail("TRUE or FALSE", x, arg, call)
  invisible(x)
}

check_string <- function(x, arg = deparse(substitute(x)), allow_null = FALSE, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (allow_null && is.null(x)) return(invisible(x))
  if (!is.character(x) || length(x) != 1L || is.na(x)) check_fail("one string", x, arg, call)
  invisible(x)
}

check_data_frame <- function(x, arg = deparse(substitute(x)), min_rows = 1L, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (!is.data.frame(x)) check_fail("a data frame", x, arg, call)
  if (nrow(x) < min_rows) {
    nce_abort(sprintf("`%s` must have at least %d row(s), not %d.", arg, min_rows, nrow(x)), "input", call = call)
  }
  check_unique_names(x, arg, call = call)
  invisible(x)
}

# confint() for broom's tidy(), whose level is `conf.level`: a bad one is refused by that name.
tidy_confint <- function(x, conf_level, ..., call = caller_call()) {
  check_probability(conf_level, "conf.level", call = call)
  stats::confint(x, ..., level = conf_level)
}

# The total work of Markov chains, n_chains x (burnin + steps) target evaluations (`steps` with
# thinning counted), refused above 5e8: a minute or two for the Metropolis samplers of ratios,
# network energies and truncated Gaussians here (10 s per 2e8 steps for a ratio table, 6 s per 2e7
# for a network energy), where a mistyped burnin would otherwise run for hours.
check_chain_work <- function(n_chains, burnin, steps, args, call = caller_call()) {
  work <- as.double(n_chains) * (as.double(burnin) + as.double(steps))
  if (!is.finite(work) || work > 5e8) {
    args <- paste0("`", args, "`")
    nce_abort(sprintf(paste("the Markov chains would take %s steps in all (chains x (burnin + steps)), more than",
                            "the 5e8 run here: lower %s or %s"), format(work, digits = 3),
                      paste(args[-length(args)], collapse = ", "), args[length(args)]), "size", call = call)
  }
  invisible(work)
}

# Required arguments left out (`absent`: TRUE by name where missing()): one classed error naming
# them, before R's bare "argument is missing, with no default" from deep inside.
check_supplied <- function(absent, call = caller_call()) {
  if (any(absent)) {
    nce_abort(sprintf("argument(s) %s must be given.", paste0("`", names(absent)[absent], "`", collapse = ", ")),
              "input", call = call)
  }
  invisible()
}

# The columns a predict() method needs in `newdata`: one refusal for every class, naming what is
# missing (`hint`: what to give instead).
check_newdata_columns <- function(newdata, needed, hint = NULL, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  miss <- setdiff(needed, names(newdata))
  if (length(miss)) {
    nce_abort(sprintf("`newdata` lacks column(s) %s%s", paste(miss, collapse = ", "),
                      if (is.null(hint)) "" else paste0(": ", hint)), "input", call = call)
  }
  invisible(newdata)
}

check_function <- function(x, arg = deparse(substitute(x)), allow_null = FALSE, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (allow_null && is.null(x)) return(invisible(x))
  if (!is.function(x)) check_fail("a function", x, arg, call)
  invisible(x)
}

# Numeric columns used as coordinates: characters and factors are refused, not coerced
# (a character column would otherwise become a factor with one coefficient per value).
check_numeric_columns <- function(data, cols, arg = deparse(substitute(data)), call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  bad <- cols[!vapply(data[cols], function(v) is.numeric(v) && !is.factor(v), TRUE)]
  if (length(bad)) {
    types <- vapply(data[bad], function(v) class(v)[1L], "")
    nce_abort(sprintf("`%s` column(s) %s must be numeric, not %s: convert with as.numeric() first.",
                      arg, paste(bad, collapse = ", "), paste(unique(types), collapse = "/")),
              "input", call = call)
  }
  invisible(data)
}

# Memory this process may use: the smallest of its soft address-space and data-segment limits
# (RLIMIT_AS and RLIMIT_DATA, as `ulimit -v` and `ulimit -d` set them), its cgroup's memory limit
# (memory.max, or memory.limit_in_bytes under cgroup v1) and the machine's total RAM as the
# ceiling. These are fixed for the process, so the same call on the same machine is refused or
# not whatever else runs at that moment (free memory is not). 8 GiB where none can be read;
# `options(nce.max_memory = bytes)` overrides it. Read once per process (a forked worker reads
# its own): the 18 files took 1 ms of each call, two calls a fit.
available_memory <- function() {
  opt <- getOption("nce.max_memory")
  if (!is.null(opt)) return(as.double(opt))
  pid <- Sys.getpid()
  if (!identical(memory_cache$pid, pid)) {
    lim <- c(process_limits(), cgroup_memory_limit(), total_ram())
    lim <- lim[is.finite(lim) & lim > 0]
    memory_cache$limit <- if (length(lim)) min(lim) else 8 * 2^30
    memory_cache$pid <- pid
  }
  memory_cache$limit
}
memory_cache <- new.env(parent = emptyenv())

read_lines_quietly <- function(path) {
  if (!file.exists(path)) return(character())
  tryCatch(readLines(path, warn = FALSE), error = function(e) character(), warning = function(w) character())
}

# Soft RLIMIT_AS and RLIMIT_DATA in bytes ("unlimited" gives NA).
process_limits <- function() {
  l <- grep("^Max (address space|data size) ", read_lines_quietly("/proc/self/limits"), value = TRUE)
  suppressWarnings(as.double(sub("^Max (address space|data size)\\s+(\\S+).*$", "\\2", l)))
}

# The memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes; "max" gives NA).
cgroup_memory_limit <- function() {
  paths <- sub("^[0-9]+:[^:]*:", "", read_lines_quietly("/proc/self/cgroup"))
  files <- c(file.path("/sys/fs/cgroup", paths, "memory.max"), "/sys/fs/cgroup/memory.max",
             file.path("/sys/fs/cgroup/memory", paths, "memory.limit_in_bytes"),
             "/sys/fs/cgroup/memory/memory.limit_in_bytes")
  suppressWarnings(as.double(unlist(lapply(unique(files), function(f) read_lines_quietly(f)[1L]))))
}

total_ram <- function() {
  l <- grep("^MemTotal:", read_lines_quietly("/proc/meminfo"), value = TRUE)
  suppressWarnings(as.double(sub("^MemTotal:\\s+([0-9]+) kB.*$", "\\1", l)) * 1024)
}

# Refuse, before allocating, a request whose size comes from user input: `bytes` is the
# estimated peak the call needs; `arg` names the argument that sets it.
check_size <- function(bytes, arg, what = "this call", call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  avail <- available_memory()
  if (!is.finite(bytes) || bytes > avail) {
    nce_abort(sprintf(paste("%s would need about %s of memory (set by `%s`), more than the %s available;",
                            "lower `%s`"), what, format_bytes(bytes), arg, format_bytes(avail), arg),
              "size", call = call)
  }
  invisible(bytes)
}

format_bytes <- function(b) {
  if (!is.finite(b)) return("an unbounded amount")
  u <- c("B", "KB", "MB", "GB", "TB", "PB", "EB")
  i <- max(1L, min(length(u), floor(log(max(b, 1), 1024)) + 1L))
  sprintf("%.3g %s", b / 1024^(i - 1L), u[i])
}

# A method that cannot make sense for a class: a classed error saying why (never NULL or
# numeric(0)). `why` completes "...: <why>".
nce_unsupported <- function(method, object, why, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  nce_abort(sprintf("%s() is not available for a %s: %s", method, class(object)[1L], why),
            "unsupported", call = call)
}

# One of `choices`, matched exactly, with a classed error naming the argument and the choices
# (match_choice() below for match.arg()'s partial matching).
check_choice <- function(x, choices, arg = deparse(substitute(x)), call = caller_call()) {
  call <- call
  if (identical(x, choices)) return(choices[1L])
  if (!is.character(x) || length(x) != 1L || is.na(x) || !x %in% choices) {
    check_fail(sprintf("one of %s", paste0("\"", choices, "\"", collapse = ", ")), x, arg, call)
  }
  x
}

# match.arg() itself, classed: `arg` partially matched against `choices` (by default the
# caller's formal default of that argument, as match.arg() reads it), the first choice when `arg`
# is that default, and `nce_error_input` naming the argument and listing the choices otherwise.
# Every method's choice argument goes through it, so `vcov(fit, se_type = "bogus")` is classed.
match_choice <- function(arg, choices, several.ok = FALSE, call = caller_call()) {  # nolint: object_name_linter.
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  name <- deparse(substitute(arg))
  if (missing(choices)) {
    parent <- sys.parent()
    choices <- eval(formals(sys.function(parent))[[name]], envir = sys.frame(parent))
  }
  if (is.null(arg) || identical(arg, choices)) return(if (several.ok) choices else choices[1L])
  ok <- is.character(arg) && length(arg) >= 1L && !anyNA(arg) && (several.ok || length(arg) == 1L)
  i <- if (ok) pmatch(arg, choices, duplicates.ok = TRUE) else NA_integer_
  if (anyNA(i)) {
    check_fail(sprintf("%s of %s", if (several.ok) "some" else "one", paste0("\"", choices, "\"", collapse = ", ")),
               arg, name, call)
  }
  choices[i]
}

# `control =` of every front end: the result of `defaults_fun()` (e.g. nce_control()), or a
# list of some of its settings merged into the defaults by calling `defaults_fun` with them,
# so each setting is checked where it is defined. A list with settings `defaults_fun` returns
# but does not take (lfire_control()'s derived `one_se`) is a complete result and kept as it is.
merge_control <- function(control, defaults_fun, arg = "control", call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  fname <- paste0(deparse(substitute(defaults_fun)), "()")
  if (is.null(control)) return(defaults_fun())
  if (!is.list(control) || is.data.frame(control)) {
    nce_abort(sprintf("`%s` must be %s or a list of some of its settings, not %s.", arg, fname,
                      describe_value(control)), "input", call = call)
  }
  known <- names(formals(defaults_fun))
  nm <- names(control)
  if (length(control) && (is.null(nm) || any(nm == ""))) {
    nce_abort(sprintf("`%s` has unnamed entries; %s knows %s.", arg, fname, paste(known, collapse = ", ")),
              "input", call = call)
  }
  if (all(nm %in% known)) {
    return(tryCatch(do.call(defaults_fun, control), nce_error = function(e) {
      nce_abort(sprintf("in `%s`: %s", arg, conditionMessage(e)), "input", call = call)
    }))
  }
  if (all(nm %in% c(known, names(defaults_fun())))) return(control)
  nce_abort(sprintf("`%s` has unknown setting(s) %s; %s knows %s.", arg,
                    paste(setdiff(nm, c(known, names(defaults_fun()))), collapse = ", "), fname,
                    paste(known, collapse = ", ")), "input", call = call)
}

# `sp`: NULL or one finite number > 0 per penalty (the one check of every smooth set-up).
check_sp <- function(sp, m, names = NULL, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (!is.null(sp) && (!is.numeric(sp) || length(sp) != m || any(!is.finite(sp)) || any(!(sp > 0)))) {
    nce_abort(sprintf("`sp` must be %d positive number%s, one per penalty%s", m, if (m == 1L) "" else "s",
                      if (length(names)) sprintf(" (%s)", paste(names, collapse = ", ")) else ""),
              "input", call = call)
  }
  sp
}

# The size check of every simulate() method (and of other counts of repeated work): `nsim` a
# count, at most `max`, and `nsim` times `bytes_each` bytes within the memory limit. Refused
# at once, with `nce_error_size`, before anything is drawn.
check_nsim <- function(nsim, bytes_each = 0, arg = "nsim", what = "the simulations", max = Inf,
                       call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  if (is.numeric(nsim) && length(nsim) == 1L && is.finite(nsim) && nsim > max) {
    nce_abort(sprintf("`%s` = %s asks for more than the %s %s allowed; lower `%s`", arg, format(nsim),
                      format(max), what, arg), "size", call = call)
  }
  check_count(nsim, arg, call = call)
  check_size(as.double(nsim) * bytes_each, arg, what, call = call)
}

# predict() far from the data: warn (nce_warning_extrapolation) when numeric columns of `newdata`
# lie outside the range the fit saw, widened by `slack` times its width on each side (a new sample
# of the same covariates falls a little outside now and then). `seen` is a data frame (or named
# list) of the fitted values of those columns; columns missing from either side are skipped.
# Returns `newdata` invisibly.
check_extrapolation <- function(newdata, seen, arg = "newdata", call = caller_call(), slack = 0.05) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  cols <- intersect(names(seen), names(newdata))
  out <- character()
  for (v in cols) {
    s <- seen[[v]]
    x <- newdata[[v]]
    if (!is.numeric(s) || !is.numeric(x) || is.factor(s) || is.factor(x)) next
    r <- range(s[is.finite(s)])
    if (!all(is.finite(r))) next
    pad <- slack * diff(r) + 1e-8 * max(1, abs(r))
    bad <- which(is.finite(x) & (x < r[1L] - pad | x > r[2L] + pad))
    if (length(bad)) {
      out <- c(out, sprintf("%s outside [%s, %s] (rows %s)", v, format(r[1L], digits = 4),
                            format(r[2L], digits = 4), format_positions(bad)))
    }
  }
  if (length(out)) {
    nce_warn(sprintf("`%s` has %s: the fit extrapolates beyond the range of its data there.", arg,
                     paste(out, collapse = "; ")), "extrapolation", call = call)
  }
  invisible(newdata)
}

# Columns of a data frame must have distinct names (`[[` and model.frame() use the first of a
# repeated name silently).
check_unique_names <- function(x, arg = deparse(substitute(x)), call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  nm <- names(x)
  dup <- unique(nm[duplicated(nm) & !is.na(nm) & nm != ""])
  if (length(dup)) {
    nce_abort(sprintf("`%s` has duplicated column name(s) %s: give each column its own name.", arg,
                      paste(dup, collapse = ", ")), "input", call = call)
  }
  invisible(x)
}

# Observed summaries against the simulations' (`sim_names`, in the simulations' order): the same
# number, and when the simulations' summaries are named, the same names, matched by name (the
# observed summaries come back in the simulations' order). "s1", "s2", ... are the names given
# to unnamed summaries. A mismatch is a classed error naming `arg`.
match_summaries <- function(s_obs, sim_names, arg = "observed", call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  k <- length(sim_names)
  if (length(s_obs) != k) {
    nce_abort(sprintf("`%s` gives %d summaries but the simulations have %d: `summaries` must give the same ones.",
                      arg, length(s_obs), k), "input", call = call)
  }
  if (identical(names(s_obs), sim_names)) return(s_obs)
  auto <- paste0("s", seq_len(k))
  if (identical(sim_names, auto) || is.null(sim_names)) {
    return(stats::setNames(s_obs, sim_names))
  }
  if (anyDuplicated(sim_names) || !setequal(names(s_obs), sim_names) || anyDuplicated(names(s_obs))) {
    nce_abort(sprintf("`%s`'s summaries are named %s but the simulations' are named %s: give the same names.",
                      arg, paste(names(s_obs), collapse = ", "), paste(sim_names, collapse = ", ")),
              "input", call = call)
  }
  s_obs[sim_names]
}
