# Truncated Gaussian graphical models: example graphs, a Gibbs sampler, and edge recovery.

#' Precision matrices of ring and hub graphs
#'
#' The two graphs of Rhodes and Gutmann (2019, section 5.2). `ring_graph()` puts weights drawn from
#' U(`low`, `high`) on the superdiagonal and in the top-right corner (so node d joins node 1) and
#' symmetrises. `hub_graph()` adds hubs to a ring: one node in ten (at least one) is joined to a
#' quarter of the other nodes, with weights from the same uniform. The diagonal is one common value
#' that makes the matrix strictly diagonally dominant, hence positive definite.
#'
#' @param d Number of nodes (at least 3).
#' @param low,high Range of the edge weights (positive: in the truncated Gaussian model a positive
#'   K\[i, j\] is a negative conditional association).
#' @param diag The common diagonal value; `NULL` takes the largest row sum of absolute off-diagonal
#'   weights times `1 + margin`.
#' @param margin Relative margin of diagonal dominance used when `diag` is `NULL`.
#' @return A symmetric d x d precision matrix `K` with attribute `graph`, the logical adjacency matrix.
#'   Uses R's random number generator (call [set.seed()] first).
#' @section What it refuses:
#' * `d` not a whole number in 3..46340, `low` not a number > 0, `high` not a number >= `low`,
#'   `diag` not `NULL` or a number > 0, `margin` not a number > 0 (`nce_error_input`);
#' * a `d` x `d` matrix that would not fit in memory (`nce_error_size`, checked before
#'   allocating);
#' * a `diag` too small to make the matrix diagonally dominant (`nce_error_input`): the
#'   matrix would not be guaranteed positive definite.
#' @examples
#' set.seed(1)
#' K <- ring_graph(6)
#' round(K, 2)
#' sum(attr(hub_graph(20), "graph")) / 2   # number of edges
#' @export
ring_graph <- function(d, low = 0.3, high = 0.5, diag = NULL, margin = 0.1) {
  check_graph_args(d, low, high, diag, margin)
  finish_graph(ring_upper(d, low, high), diag, margin)
}

# The ring's edge weights as an upper-triangular matrix (i, i + 1) and (1, d).
ring_upper <- function(d, low, high) {
  k_mat <- matrix(0, d, d)
  w <- stats::runif(d, low, high)
  k_mat[cbind(seq_len(d - 1L), 2:d)] <- w[-d]
  k_mat[1L, d] <- w[d]
  k_mat
}

#' @rdname ring_graph
#' @export
hub_graph <- function(d, low = 0.3, high = 0.5, diag = NULL, margin = 0.1) {
  check_graph_args(d, low, high, diag, margin)
  # The ring's weights only: its diagonal is set once, by finish_graph(), for the whole graph.
  k_mat <- ring_upper(d, low, high)
  n_hubs <- max(1L, round(d / 10))
  n_links <- max(1L, round(d / 4))
  for (h in sample.int(d, n_hubs)) {
    for (j in sample(setdiff(seq_len(d), h), n_links)) {
      k_mat[min(h, j), max(h, j)] <- stats::runif(1L, low, high)
    }
  }
  finish_graph(k_mat, diag, margin)
}

check_graph_args <- function(d, low, high, diag, margin, call = caller_call()) {
  check_count(d, "d", min = 3, max = 46340, call = call)
  check_number(low, "low", min = 0, exclusive_min = TRUE, call = call)
  check_number(high, "high", min = low, call = call)
  check_number(diag, "diag", min = 0, exclusive_min = TRUE, allow_null = TRUE, call = call)
  check_number(margin, "margin", min = 0, exclusive_min = TRUE, call = call)
  # The diagonal dominates the rows' sums of weights: they must stay finite.
  if (!is.finite(4 * d * high * (1 + margin)) || (!is.null(diag) && !is.finite(4 * d * diag))) {
    nce_abort("`high` (or `diag`) is too large: the precision matrix's rows would overflow", "input", call = call)
  }
  check_size(8 * 4 * d^2, "d", "the precision matrix", call = call)
}

# Symmetrise an upper-triangular weight matrix and set a common diagonal.
finish_graph <- function(upper, diag, margin) {
  k_mat <- upper + t(upper)
  graph <- k_mat != 0
  if (is.null(diag)) diag <- max(rowSums(abs(k_mat))) * (1 + margin)
  base::diag(k_mat) <- diag
  if (any(rowSums(abs(k_mat)) - base::diag(k_mat) >= base::diag(k_mat))) {
    nce_abort(sprintf("`diag` = %g does not make the matrix diagonally dominant", diag), call = sys.call(-1L))
  }
  attr(k_mat, "graph") <- graph
  k_mat
}


#' Simulate from a truncated Gaussian graphical model
#'
#' Draws from the density proportional to exp(-(x - mean)' K (x - mean) / 2) on the positive orthant
#' by coordinate-wise Gibbs sampling in Rust (each full conditional is a univariate normal truncated
#' at zero, sampled exactly). Chains run in parallel, each with its own random stream, so the draws do
#' not depend on the number of threads.
#'
#' @param n Number of draws.
#' @param K Symmetric positive definite precision matrix.
#' @param mean Location vector (length 1 is recycled to the dimension; default 0).
#' @param burnin Sweeps discarded at the start of each chain.
#' @param thin Keep one sweep in `thin`.
#' @param n_chains Number of independent chains; the `n` draws are split between them.
#' @param start Starting point (positive vector), or `NULL` for 1 / sqrt(diag(K)).
#' @return An n x d matrix. Refused (before allocating): `n` whose draws would not fit in memory
#'   (`nce_error_size`), or chains of more than 5e8 sweeps in all (`n_chains` x `burnin` + `n` x
#'   `thin`; `nce_error_size`); a `K` that is not symmetric positive definite; non-whole `n`,
#'   `burnin`, `thin`, `n_chains`.
#' @examples
#' set.seed(1)
#' K <- ring_graph(5)
#' x <- rtgm(500, K)
#' colMeans(x)
#' @export
rtgm <- function(n, K, mean = 0, burnin = 100, thin = 10, n_chains = 1, start = NULL) {  # nolint: object_name_linter.
  call <- sys.call()
  check_count(n, "n", max = 2^52, call = call)
  K <- check_precision(K, "K", call = call)  # nolint: object_name_linter.
  d <- ncol(K)
  if (!is.numeric(mean) || !(length(mean) %in% c(1L, d)) || any(!is.finite(mean))) {
    nce_abort(sprintf("`mean` must be one number or %d finite numbers, not %s.", d, describe_value(mean)), call = call)
  }
  check_count(burnin, "burnin", min = 0, call = call)
  check_count(thin, "thin", call = call)
  check_count(n_chains, "n_chains", max = n, call = call)
  if (!is.null(start) && (!is.numeric(start) || length(start) != d || any(!is.finite(start)) || any(start <= 0))) {
    nce_abort(sprintf("`start` must be NULL or %d positive numbers, not %s.", d, describe_value(start)), call = call)
  }
  # the draws in Rust, their copy into R, and R's own copy when the column names are set
  check_size(8 * 3 * n * d, "n", "rtgm()", call = call)
  check_chain_work(n_chains, burnin, n * thin / n_chains, c("n_chains", "burnin", "n"), call = call)
  x <- rs(nce_rtgm(as.double(n), K, as.double(rep_len(mean, d)),
                   list(burnin = as.integer(burnin), thin = as.integer(thin), chains = as.integer(n_chains),
                        start = if (is.null(start)) NULL else as.double(start), seed = draw_seed(),
                        threads = nce_threads(), require_pd = TRUE)))
  colnames(x) <- colnames(K)
  x
}

# A symmetric positive definite numeric matrix, or a classed error naming `arg`.
check_precision <- function(k_mat, arg, call = caller_call()) {
  if (!is.matrix(k_mat) || !is.numeric(k_mat) || nrow(k_mat) != ncol(k_mat) || nrow(k_mat) < 1L) {
    nce_abort(sprintf("`%s` must be a square numeric matrix, not %s.", arg, describe_value(k_mat)), call = call)
  }
  if (any(!is.finite(k_mat))) {
    nce_abort(sprintf("`%s` has missing or infinite entries (%d of them): give finite values.", arg,
                      sum(!is.finite(k_mat))),
              call = call)
  }
  if (max(abs(k_mat - t(k_mat))) > 1e-8 * max(1, max(abs(k_mat)))) {
    nce_abort(sprintf("`%s` must be symmetric (largest asymmetry %.3g).", arg, max(abs(k_mat - t(k_mat)))), call = call)
  }
  k_mat <- (k_mat + t(k_mat)) / 2
  ok <- tryCatch({
    chol(k_mat)
    TRUE
  }, error = function(e) FALSE)
  if (!ok) {
    ev <- min(eigen(k_mat, symmetric = TRUE, only.values = TRUE)$values)
    nce_abort(sprintf("`%s` is not positive definite (smallest eigenvalue %.3g).", arg, ev), call = call)
  }
  storage.mode(k_mat) <- "double"
  attr(k_mat, "graph") <- NULL
  k_mat
}

#' Edges of an estimated graph
#'
#' The pairs (i, j), i < j, whose off-diagonal precision entry exceeds `threshold`. Following Rhodes
#' and Gutmann (2019) the signed entry is compared by default (their graphs have positive weights);
#' `abs = TRUE` compares absolute values.
#'
#' @param object A [vnce()] fit of a truncated Gaussian graphical model, or a precision matrix
#'   (argument names: [nce_vocabulary]).
#' @param threshold Entries above it are edges.
#' @param abs Compare absolute values.
#' @inheritParams nce_vocabulary
#' @return A data frame with columns `from`, `to` and `weight`, ordered by decreasing weight.
#'   Refused: a non-square or non-numeric `object`, a `threshold` that is not one number.
#' @section What it refuses:
#' * `object` not a [vnce()] fit of a truncated Gaussian graphical model or a square numeric matrix
#'   with at least two rows, `threshold` not one number (infinite allowed), `abs` not TRUE or
#'   FALSE (`nce_error_input`).
#' @examples
#' set.seed(1)
#' K <- ring_graph(6)
#' tgm_edges(K, 0.1)
#' @export
tgm_edges <- function(object, threshold = 0, abs = FALSE, ...) {
  call <- sys.call()
  k_mat <- precision_of(object, call)
  check_number(threshold, "threshold", allow_infinite = TRUE, call = call)
  check_bool(abs, "abs", call = call)
  ij <- which(upper.tri(k_mat), arr.ind = TRUE)
  w <- pair_weights(k_mat, "an edge list", call)
  keep <- (if (abs) base::abs(w) else w) > threshold
  out <- data.frame(from = ij[keep, 1L], to = ij[keep, 2L], weight = w[keep])
  out <- out[order(-(if (abs) base::abs(out$weight) else out$weight)), , drop = FALSE]
  rownames(out) <- NULL
  out
}

# The estimate's off-diagonal entries, one per pair (i < j, column by column), refused when any is
# missing: a missing weight would be ranked, or dropped, as if it were information.
pair_weights <- function(k_mat, use, call) {
  w <- k_mat[upper.tri(k_mat)]
  if (anyNA(w)) {
    nce_abort(sprintf(paste("the estimate has %d missing (NA or NaN) off-diagonal entries of %d: %s needs a",
                            "value for every pair; replace them (e.g. by 0) or drop those nodes."),
                      sum(is.na(w)), length(w), use), "data", call = call)
  }
  w
}

precision_of <- function(object, call = caller_call()) {
  k_mat <- if (inherits(object, "vnce_tgm")) object$precision else object
  if (!is.matrix(k_mat) || !is.numeric(k_mat) || nrow(k_mat) != ncol(k_mat) || nrow(k_mat) < 2L) {
    nce_abort(sprintf(paste("`object` must be a vnce() fit of a truncated Gaussian graphical model or a square numeric",
                            "matrix with at least two rows, not %s."), describe_value(k_mat)), call = call)
  }
  k_mat
}

#' ROC curve and AUC of edge recovery
#'
#' Scores every pair (i, j), i < j, by its estimated precision entry (signed, or absolute with
#' `abs = TRUE`) and compares with the true graph: the area under the ROC curve is the probability
#' that a true edge scores above a non-edge (ties count one half).
#'
#' @param object A [vnce()] fit of a truncated Gaussian graphical model, or an estimated precision
#'   matrix (argument names: [nce_vocabulary]).
#' @param truth The true graph: a logical adjacency matrix, or a precision matrix (non-zero
#'   off-diagonal entries are edges), e.g. from [ring_graph()].
#' @param abs Score by absolute value.
#' @return A list of class `nce_edge_roc` with `auc` and `roc`, a data frame of false- and
#'   true-positive rates by threshold; `plot()` draws the curve.
#' @section What it refuses:
#' * `object` not a [vnce()] fit of a truncated Gaussian graphical model or a square numeric matrix
#'   with at least two rows, `abs` not TRUE or FALSE (`nce_error_input`);
#' * `truth` not a matrix of the same size, with NA entries (in the matrix or in its `graph`
#'   attribute), or without both edges and
#'   non-edges (no AUC is defined then) (`nce_error_input`);
#' * NA or NaN off-diagonal entries in the estimate (`nce_error_data`): a missing score
#'   would be ranked as if it were information.
#' @examples
#' set.seed(1)
#' K <- ring_graph(8)
#' estimate <- K + matrix(rnorm(64, sd = 0.1), 8)   # only the upper triangle is used
#' edge_roc(estimate, K)$auc
#' @export
edge_roc <- function(object, truth, abs = FALSE) {
  call <- sys.call()
  k_mat <- precision_of(object, call)
  check_bool(abs, "abs", call = call)
  g_true <- if (!is.null(attr(truth, "graph"))) attr(truth, "graph") else truth
  if (!is.matrix(g_true) || !identical(dim(g_true), dim(k_mat))) {
    nce_abort(sprintf("`truth` must be a matrix of the same size as the estimate (%d x %d), not %s.",
                      nrow(k_mat), ncol(k_mat), describe_value(g_true)), call = call)
  }
  # a precision matrix's NA entries count too, not only its "graph" attribute (which would hide them)
  if (anyNA(g_true) || (is.atomic(truth) && anyNA(truth))) {
    nce_abort("`truth` has missing entries: every pair must be an edge or not.", call = call)
  }
  g_true <- if (is.logical(g_true)) g_true else g_true != 0
  up <- upper.tri(k_mat)
  w <- pair_weights(k_mat, "an AUC", call)
  score <- if (abs) base::abs(w) else w
  edge <- g_true[up]
  if (!any(edge) || all(edge)) nce_abort("`truth` must have both edges and non-edges.", call = call)
  r <- rank(score)
  n1 <- sum(edge)
  n0 <- sum(!edge)
  auc <- (sum(r[edge]) - n1 * (n1 + 1) / 2) / (n1 * n0)
  th <- sort(unique(score), decreasing = TRUE)
  roc <- data.frame(threshold = c(Inf, th),
                    fpr = c(0, vapply(th, function(t) sum(score >= t & !edge) / n0, 0)),
                    tpr = c(0, vapply(th, function(t) sum(score >= t & edge) / n1, 0)))
  as_result(structure(list(auc = auc, roc = roc, n_edges = n1, n_pairs = length(score)),
                      class = c("nce_edge_roc", "nce_result")), call = match.call(), rng = NULL, env = parent.frame())
}
