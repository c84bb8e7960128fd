# The contrast step under every fit: nce() (linear, smooth and nonlinear), nce(given =) and
# snce()/latkes() all stack their data rows with reference rows drawn from `reference`, label
# them 1 and 0, and offset each by log(n / m) - log q. One worker does it, with one size check.

# `data`: the data rows (a data frame holding the reference's columns). `ratio`: reference
# points per data point. Unpaired (nce()), m = round(ratio * n) points are drawn from the
# reference at once; `paired = TRUE` (conditional and sequential models) gives each data row
# `ratio` reference rows that copy its other columns, drawn from the kernel at `prev` (the
# previous states, one row per data row) when `prev` is given. `weight_total` (default n) is
# the data's total weight in the offset. `transform`, when given, maps the data and the
# reference rows before they are stacked (snce()'s derived features). `method = "poisson"`
# leaves the data rows without offset (the Poisson transform's data term is f(y) + nu).
# `data_rows` numbers the data rows in the user's data for messages (default 1..n; snce(): the
# transitions' rows). `copies` and `width` describe what the fit will hold per stacked row, for the size check:
# `copies` copies of the data's columns and `width` doubles of its own (design, working
# vectors). The reference is drawn with the same RNG calls, in the same order, as each fit did
# before sharing this worker, so fits under set.seed() are unchanged.
# Returns the stacked `rows`, `y` (1 data, 0 reference), `offset`, `lq_data` and `lq_ref` (log q
# of the data and the reference rows), the (transformed) `data` rows, `n_data`, `n_ref` and `of`
# (each reference row's data row when paired).
contrast <- function(data, reference, ratio, paired = FALSE, prev = NULL, weight_total = NULL, transform = NULL,
                     method = "logistic", data_rows = NULL, copies = 3, width = 12, call = caller_call()) {
  call <- call  # force the caller's call now: forced later, sys.call() would count other frames
  n <- nrow(data)
  vars <- reference$vars
  kernel <- !is.null(prev)
  if (is.null(data_rows)) data_rows <- seq_len(n)
  reserve_heap(contrast_check_size(n, ratio, ncol(data), copies, width, call))
  m <- if (paired) as.double(n) * ratio else as.integer(round(ratio * n))
  if (m < 1L) nce_abort(sprintf("`ratio` = %g gives no reference points for n = %d", ratio, n), "input", call = call)
  lq_data <- if (kernel) kernel_logq(reference, data[vars], prev) else ref_logq(reference, data)
  outside <- which(lq_data == -Inf)
  if (length(outside)) {
    msg <- if (kernel) {
      sprintf("%d state(s) lie outside the reference kernel's support (rows %s of `data`)",
              length(outside), format_positions(data_rows[outside]))
    } else {
      sprintf(paste("%d data point(s) lie outside the reference's support (rows %s):",
                    "NCE needs q > 0 wherever the data are; widen the reference"),
              length(outside), format_positions(data_rows[outside]))
    }
    nce_abort(msg, "support", call = call)
  }
  of <- if (paired) rep(seq_len(n), each = ratio)
  if (!kernel || inherits(reference, "nce_reference")) {
    # A global reference (also when it serves as the kernel): its draws do not depend on `prev`.
    dr <- ref_draw_logq(reference, m)
    u <- dr$draws
    lq_ref <- dr$logq
    refs <- if (paired) u[vars] else u
  } else {
    u <- kernel_draw(reference, prev, ratio)
    refs <- u[vars]
    lq_ref <- kernel_logq(reference, refs, prev[of, , drop = FALSE])
  }
  if (any(lq_ref == -Inf)) {
    nce_abort(sprintf("the reference%s's log density is -Inf at some of its own draws", if (kernel) " kernel" else ""),
              "reference", call = call)
  }
  if (paired) {
    # The stacked rows built at once, then the (row-wise) transform on them: each column is
    # allocated once, not as reference rows and again when stacked.
    rows <- stack_paired(data, of, u, vars)
    if (!is.null(transform)) {
      data <- transform(data)
      rows <- transform(rows)
    }
  } else {
    if (!is.null(transform)) {
      data <- transform(data)
      refs <- transform(refs)
    }
    rows <- stack_rows(data, refs)
  }
  # One allocation: the subtraction reuses c()'s fresh vector (log q of every row is
  # c(lq_data, lq_ref), not kept: the pooled fits hold millions of rows).
  offset <- log((if (is.null(weight_total)) n else weight_total) / m) - c(lq_data, lq_ref)
  if (method == "poisson") offset[seq_len(n)] <- 0
  list(rows = rows, y = rep(c(1, 0), c(n, m)), offset = offset, lq_data = lq_data,
       lq_ref = lq_ref, data = data, n_data = n, n_ref = m, of = of)
}

# The data rows stacked over their paired reference rows: reference row r copies data row
# of[r], with the reference's columns `vars` from the draws `u`. One allocation per column
# (one index over all rows); what stack_rows() cannot join goes through take_rows() and it.
stack_paired <- function(data, of, u, vars) {
  if (!all(vapply(data, simple_column, TRUE))) {
    refs <- take_rows(data, of)
    refs[vars] <- u[vars]
    return(stack_rows(data, refs))
  }
  idx <- c(seq_len(nrow(data)), of)
  out <- lapply(names(data), function(v) {
    x <- data[[v]]
    if (v %in% vars) return(c(x, u[[v]]))
    if (is.factor(x)) return(structure(unclass(x)[idx], levels = levels(x), class = class(x)))
    x[idx]
  })
  attributes(out) <- list(names = names(data), class = "data.frame", row.names = .set_row_names(length(idx)))
  out
}

# The one size check of the contrast: refuse, before drawing, n + m rows beyond R's row limit
# or whose planned allocation (per stacked row `copies` copies of the data's `k` columns and
# `width` doubles of the fit's own) exceeds the memory available (check_size()).
contrast_check_size <- function(n, ratio, k, copies, width, call) {
  # In doubles: an integer ratio (latkes() passes one) times n overflows to NA from 2^31.
  m <- as.double(ratio) * n
  if (m + n > .Machine$integer.max) {
    nce_abort(sprintf(paste("`ratio` = %g asks for %.3g reference points for n = %d, more than R's",
                            "limit of %d rows; lower `ratio`"), ratio, m, n, .Machine$integer.max),
              "size", call = call)
  }
  bytes <- 8 * (as.double(n) + m) * (copies * k + width)
  check_size(bytes, "ratio", "the reference sample", call = call)
  invisible(bytes)
}

# R grows its vector heap only after a full collection, and then by a fifth at a time: a fit
# that allocates a few hundred MB piece by piece ran three full collections on the way up (timings
# in bench/README.md). One request for the planned size makes R grow it at once, in one
# collection; nothing is written, so no memory is touched. Small fits fit the heap R starts
# with; at most 512 MB, so that a huge fit's garbage is still collected as it goes. Returns the
# bytes requested (0 for none).
reserve_heap <- function(bytes) {
  request <- if (bytes >= 2^26) min(as.double(bytes), 2^29) else 0
  # An interrupt that fired inside (the request evaluates R code under R_ToplevelExec) was stopped
  # there: raise it again.
  if (request > 0 && identical(nce_heap_reserve(request), -1L)) nce_interrupt()
  invisible(request)
}

# A column that stack_rows() and stack_paired() join by c() and indexing: a plain vector or a
# factor (no matrix columns, no other classes).
simple_column <- function(v) is.atomic(v) && length(dim(v)) < 2L && (!is.object(v) || is.factor(v))

# rbind() of two data frames with the same columns, column by column: rbind.data.frame's
# factor and row-name handling took a tenth of a pooled fit's set-up. Factors get the union of
# the levels (c.factor, as rbind); anything unusual goes through rbind.
stack_rows <- function(a, b) {
  if (!identical(names(a), names(b)) || !all(vapply(a, simple_column, TRUE)) || !all(vapply(b, simple_column, TRUE)) ||
        !all(vapply(a, is.factor, TRUE) == vapply(b, is.factor, TRUE))) {
    out <- rbind(a, b)
    rownames(out) <- NULL
    return(out)
  }
  out <- lapply(names(a), function(v) {
    x <- a[[v]]
    y <- b[[v]]
    # Same levels: the codes joined (c.factor matches every row's label again, a tenth of a
    # second per 500,000 rows).
    if (is.factor(x) && identical(levels(x), levels(y)) && identical(class(x), class(y))) {
      return(structure(c(unclass(x), unclass(y)), levels = levels(x), class = class(x)))
    }
    c(x, y)
  })
  attributes(out) <- list(names = names(a), class = "data.frame", row.names = .set_row_names(nrow(a) + nrow(b)))
  out
}

# Rows `i` of a data frame, without the unique row names `[.data.frame` builds (costly on the
# ~40,000 reference rows).
take_rows <- function(df, i) {
  out <- lapply(df, function(v) if (length(dim(v)) == 2L) v[i, , drop = FALSE] else v[i])
  attributes(out) <- list(names = names(df), class = class(df), row.names = .set_row_names(length(i)))
  out
}
