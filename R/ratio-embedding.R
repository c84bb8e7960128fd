# Learned summaries for the neural ratio classifier: an embedding network reads the raw data
# columns and is trained jointly with the classifier (in Rust), so no hand-made summary caps what
# the classifier can learn. Three shapes: a plain network for vectors, a pooled per-item network
# for exchangeable observations (DeepSets), and a pooled per-window network for series (a 1-D
# convolution with global average pooling).

#' Embedding networks: learned summaries for neural ratio estimation
#'
#' An embedding maps the raw data of a simulation to `out` features that the ratio classifier
#' of [ratio_amortised()] (`classifier = "mlp"`) reads beside the parameters; it is trained
#' jointly with the classifier, so the summaries are learned rather than chosen by hand.
#'
#' * `embed_dense()`: a plain network (hidden layers `hidden`, ReLU, linear output of `out`
#'   units) on the whole data vector. For data vectors whose coordinates have their own meaning.
#' * `embed_set()`: for a data set of exchangeable observations (DeepSets: Zaheer et al. 2017).
#'   The data are read as observations of `item` values each; one network is applied to every
#'   observation and its outputs are averaged, so the features do not depend on the
#'   observations' order.
#' * `embed_series()`: for a series. The network is applied to every window of `window`
#'   consecutive time points (of `item` values each) and its outputs averaged: a 1-D
#'   convolution with global average pooling. The log-likelihood of a Markov series of order
#'   `window - 1` is a sum over such windows, so the pooled features can carry its sufficient
#'   statistics; a recurrent layer was not needed for that and would serialise the work.
#'
#' Set and series data are standardised by one centre and scale over all their values (so the
#' items stay comparable); dense data column by column.
#'
#' @param out Number of features the embedding gives the classifier.
#' @param hidden Units of each hidden layer of the embedding network.
#' @param item Values per observation (set) or per time point (series).
#' @param window Time points per window (series).
#' @param columns The data columns the embedding reads (names or positions among the columns
#'   `summaries` returns); by default all. Columns not read go to the classifier directly, so
#'   hand-made summaries can be combined with an embedding of the raw data.
#' @return An object of class `nce_embedding`.
#' @seealso [ratio_amortised()]
#' @examples
#' embed_set(out = 8)
#' embed_series(window = 2)
#' @name embeddings
NULL

#' @rdname embeddings
#' @export
embed_dense <- function(out = 16L, hidden = c(64, 64), columns = NULL) {
  new_embedding("dense", out, hidden, item = 1L, window = 1L, columns = columns)
}

#' @rdname embeddings
#' @export
embed_set <- function(out = 16L, hidden = c(64, 64), item = 1L, columns = NULL) {
  new_embedding("set", out, hidden, item = item, window = 1L, columns = columns)
}

#' @rdname embeddings
#' @export
embed_series <- function(out = 16L, hidden = c(64, 64), window = 3L, item = 1L, columns = NULL) {
  new_embedding("series", out, hidden, item = item, window = window, columns = columns)
}

new_embedding <- function(kind, out, hidden, item, window, columns, call = caller_call()) {
  call <- call
  check_count(out, "out", max = 4096, call = call)
  check_count(item, "item", max = 1e6, call = call)
  check_count(window, "window", max = 1e6, call = call)
  if (!is.numeric(hidden) || !length(hidden) || anyNA(hidden) || any(hidden < 1) || any(hidden != round(hidden)) ||
      any(hidden > 4096)) {
    check_fail("whole numbers in 1..4096, one per hidden layer", hidden, "hidden", call)
  }
  if (!is.null(columns) && (!(is.character(columns) || is.numeric(columns)) || !length(columns) || anyNA(columns) ||
                            anyDuplicated(columns))) {
    check_fail("NULL, or distinct column names or positions", columns, "columns", call)
  }
  structure(list(kind = kind, out = as.integer(out), hidden = as.integer(hidden), item = as.integer(item),
                 window = as.integer(window), columns = columns), class = "nce_embedding")
}

#' @export
print.nce_embedding <- function(x, ...) {
  what <- switch(x$kind, dense = "network on the data vector",
                 set = sprintf("per-observation network (%d value(s) each), averaged (DeepSets)", x$item),
                 series = sprintf("per-window network (%d time points of %d value(s)), averaged", x$window, x$item))
  cat(sprintf("Embedding: %s; hidden layers %s, %d features\n", what, paste(x$hidden, collapse = "-"), x$out))
  invisible(x)
}

# The embedding's data columns among the summary columns `snames` (all when `columns` is NULL),
# checked against its shape.
embedding_columns <- function(emb, snames, call) {
  cols <- emb$columns
  idx <- if (is.null(cols)) {
    seq_along(snames)
  } else if (is.character(cols)) {
    match(cols, snames)
  } else {
    ifelse(cols >= 1 & cols <= length(snames) & cols == round(cols), cols, NA)
  }
  if (anyNA(idx)) {
    nce_abort(sprintf("`embedding` reads column(s) %s that the summaries do not have (they have %d: %s).",
                      toString(cols[is.na(idx)]), length(snames), toString(utils::head(snames, 6L))),
              "input", call = call)
  }
  q <- length(idx)
  if (emb$kind != "dense") {
    if (q %% emb$item != 0L) {
      nce_abort(sprintf("`embedding` reads %d value(s), not a whole number of items of %d.", q, emb$item),
                "input", call = call)
    }
    if (q / emb$item < emb$window) {
      nce_abort(sprintf("`embedding` windows of %d time points are longer than the series (%d).", emb$window,
                        q / emb$item), "input", call = call)
    }
  }
  idx
}
