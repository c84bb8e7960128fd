# Smooth set-up off the critical path: mgcv's thin-plate regression spline built with the
# eigen-decomposition and the basis on the data rows computed in Rust. The object is the one
# mgcv's smooth.construct.tp.smooth.spec() returns (class "tprs.smooth", same UZ/Xu/shift/S
# fields), with the subclass "ncetprs.smooth" whose Predict.matrix() method evaluates new rows
# in Rust; PredictMat() and predict.gam() otherwise use mgcv's own code on it.

#' mgcv's thin-plate regression spline (`bs = "tp"`), set up in Rust
#'
#' The constructor behind `s(...)` (thin plate, the default basis) in the package's fits.
#' It follows [mgcv::smooth.construct.tp.smooth.spec()] step by step: the same shift, the
#' same knots (all distinct covariate points, or mgcv's own random subset of `max.knots` of
#' them drawn with mgcv's seed, or the knots supplied), the same thin-plate matrix E and
#' the same truncation to the `k` eigenvectors of E of largest magnitude, the same
#' null-space constraint, penalty and column scaling. The thin-plate matrix E is built in
#' Rust; its eigen-decomposition is a Rust block Krylov method (full reorthogonalisation and
#' Rayleigh-Ritz, converged to a relative residual of `1e-11`) for 1,000 or more distinct
#' points and `k` up to 40, where it is the faster, else mgcv's Lanczos ([mgcv::slanczos()],
#' at a tolerance of `1e-12`). When there are knots, the basis on the data rows (mgcv's
#' `predict_tprs`) is computed in Rust, in blocks of rows in parallel. The basis spans the
#' same space with the same penalty, so fits and fitted values agree with mgcv's; the
#' coefficients may differ by signs of eigenvectors and by an orthogonal rotation within
#' the constrained space (the null-space basis of the constraint comes from R's `qr()`, not
#' mgcv's Householder code). Terms this does not cover (shrinkage, `m` with a dropped null
#' space, as many knots as `k`) go to mgcv. Internal.
#'
#' @param object,data,knots As for [mgcv::smooth.construct()].
#' @return A `"tprs.smooth"` object, as mgcv's constructor returns, of subclass
#'   `"ncetprs.smooth"` (its rows predicted in Rust: [Predict.matrix.ncetprs.smooth()]).
#' @keywords internal
#' @exportS3Method mgcv::smooth.construct
smooth.construct.ncetp.smooth.spec <- function(object, data, knots) {  # nolint: object_name_linter.
  class(object) <- "tp.smooth.spec"
  sm <- tp_construct(object, data, knots)
  if (is.null(sm)) mgcv::smooth.construct(object, data, knots) else sm
}

# The steps of smooth.construct.tp.smooth.spec and tprs.c's tprs_setup(); NULL where mgcv
# should build the term itself. With `rust_rows`, rows computed from knots are built and kept in
# Rust (an "nce_rust_block" carrying the scaled columns' means and largest absolute row sum).
tp_construct <- function(object, data, knots, rust_rows = FALSE) {
  if (!is.null(attr(object, "shrink"))) return(NULL)
  max_knots <- if (is.null(object$xt$max.knots)) 2000 else object$xt$max.knots
  seed <- if (is.null(object$xt$seed)) 1 else object$xt$seed
  d <- object$dim
  cols <- lapply(object$term, function(v) data[[v]])
  n <- length(cols[[1L]])
  if (!all(vapply(cols, function(v) is.numeric(v) && length(v) == n && !anyNA(v) && all(is.finite(v)), TRUE)) ||
      n < 2L) {
    return(NULL)
  }
  x <- matrix(unlist(cols, use.names = FALSE), n, d)
  shift <- colMeans(x)
  xs <- x - rep(shift, each = n)
  knt <- NULL
  xu_rows <- NULL  # the rows' distinct points, when found for choosing knots
  if (!is.null(knots) && all(object$term %in% names(knots))) {
    kl <- lapply(object$term, function(v) knots[[v]])
    if (length(unique(lengths(kl))) != 1L || lengths(kl)[1L] > n) return(NULL)
    knt <- matrix(unlist(kl, use.names = FALSE), ncol = d) - rep(shift, each = lengths(kl)[1L])
  } else if (n > max_knots) {
    xu_rows <- xu <- unique_rows(xs)
    if (nrow(xu) > max_knots) {
      temp_seed <- utils::getFromNamespace("temp.seed", "mgcv")
      rngs <- temp_seed(seed)
      ind <- sample(seq_len(nrow(xu)), max_knots, replace = FALSE)
      temp_seed(rngs)
      knt <- xu[ind, , drop = FALSE]
    }
  }
  object$p.order[is.na(object$p.order)] <- 0
  m_big <- mgcv::null.space.dimension(d, object$p.order[1L])
  if (length(object$p.order) > 1L && object$p.order[2L] == 0) return(NULL)
  def_k <- c(8, 27, 100)
  if (object$bs.dim[1L] < 0) object$bs.dim <- m_big + def_k[min(d, length(def_k))]
  k <- object$bs.dim
  if (k < m_big + 1L) return(NULL)
  use_knots <- !is.null(knt) && nrow(knt) >= k
  pts <- if (use_knots) knt else xs
  xu <- if (!use_knots && !is.null(xu_rows)) xu_rows else unique_rows(pts)
  idx <- attr(xu, "index")
  attributes(xu) <- list(dim = dim(xu))
  nu <- nrow(xu)
  if (nu <= k) return(NULL)
  check_size(8 * 2 * as.double(nu)^2, "k", "the thin-plate matrix of the smooth's distinct points", call = NULL)
  m <- tp_order(object$p.order[1L], d)
  eig <- tp_eigen(xu, m, k)
  u <- eig$vectors
  v <- eig$values
  tmat <- tp_poly(xu, m)
  # Null space of the constraint T'U delta = 0 (tprs_setup's QT factorisation).
  z <- qr.Q(qr(t(crossprod(tmat, u))), complete = TRUE)[, (m_big + 1L):k, drop = FALSE]
  kz <- k - m_big
  uz <- matrix(0, nu + m_big, k)
  uz[seq_len(nu), seq_len(kz)] <- u %*% z
  uz[nu + seq_len(m_big), kz + seq_len(m_big)] <- diag(m_big)
  s_mat <- matrix(0, k, k)
  s_mat[seq_len(kz), seq_len(kz)] <- crossprod(z, v * z)
  threads <- nce_threads(call = NULL)
  # Columns scaled to root mean square 1 over the data rows, as tprs_setup() does (in Rust).
  if (use_knots && rust_rows) {
    stats <- rs(nce_tprs_block(xs, as.integer(object$p.order[1L]), xu, uz, threads))
  } else {
    xmat <- if (use_knots) rs(nce_tprs_predict(xs, as.integer(object$p.order[1L]), xu, uz, threads)) else
      cbind((u * rep(v, each = nu)) %*% z, tmat)[idx, , drop = FALSE]
    stats <- rs(nce_basis_stats(xmat, TRUE))
  }
  w <- stats$scale
  uz <- uz / rep(w, each = nu + m_big)
  s_mat <- s_mat / outer(w, w)
  object$S <- list()
  if (!object$fixed) object$S[[1L]] <- (s_mat + t(s_mat)) / 2
  object$UZ <- uz
  object$Xu <- xu
  object$df <- object$bs.dim
  object$shift <- array(shift, d)
  object$rank <- k - m_big
  object$null.space.dim <- m_big
  object$drop.null <- 0
  # mgcv's class, with the rows of predictions evaluated in Rust (Predict.matrix.ncetprs.smooth()).
  class(object) <- c("ncetprs.smooth", "tprs.smooth")
  object$X <- if (inherits(stats, "nce_rust_block")) stats else rs(nce_scale_absorb(xmat, w, NULL, threads))
  object
}

#' Rows of the package's thin-plate smooths, evaluated in Rust
#'
#' The [mgcv::Predict.matrix()] method of the thin-plate smooths the package sets up
#' ([smooth.construct.ncetp.smooth.spec()]): mgcv's `predict_tprs` (the radial basis at the knots
#' `Xu` and the null-space polynomials, times `UZ`) computed in Rust, in blocks of rows in
#' parallel, so predictions, plots and simulations on many rows take about as long as the fit's
#' own basis (42,000 rows against 2,000 knots: 0.1 s, where mgcv's C code takes 1.8 s). The same
#' matrix as mgcv's `Predict.matrix.tprs.smooth()` to 1e-10; rows with missing or infinite
#' covariates are `NA`. Internal.
#'
#' @param object A smooth from [smooth.construct.ncetp.smooth.spec()].
#' @param data A data frame or list with the smooth's covariates.
#' @return The basis at the rows of `data` (one row each).
#' @keywords internal
#' @exportS3Method mgcv::Predict.matrix
Predict.matrix.ncetprs.smooth <- function(object, data) {  # nolint: object_name_linter.
  cols <- lapply(object$term, function(v) data[[v]])
  n <- length(cols[[1L]])
  if (n < 1L || !identical(object$drop.null, 0) ||
      !all(vapply(cols, function(v) is.numeric(v) && length(v) == n, TRUE))) {
    return(NextMethod())
  }
  x <- matrix(as.double(unlist(cols, use.names = FALSE)), n, object$dim) - rep(object$shift, each = n)
  ok <- is.finite(rowSums(x))
  threads <- nce_threads(call = NULL)
  p_order <- as.integer(object$p.order[1L])
  if (all(ok)) return(rs(nce_tprs_predict(x, p_order, object$Xu, object$UZ, threads)))
  out <- matrix(NA_real_, n, ncol(object$UZ))
  if (any(ok)) out[ok, ] <- rs(nce_tprs_predict(x[ok, , drop = FALSE], p_order, object$Xu, object$UZ, threads))
  out
}

# The k eigenpairs of largest magnitude of the thin-plate matrix E of the distinct points xu
# (values decreasing), by the Rust block Krylov solver where it is the faster one (many points, few
# eigenpairs: 1,000 or more points and k <= 40), else by mgcv's Lanczos routine (slanczos()) on
# E built in Rust, at tolerance 1e-12 (relative residuals near 1e-15; slanczos()'s default
# sqrt(eps) leaves 1e-8 differences from mgcv's own thin-plate basis). The split between the two
# was timed (bench/README.md); neither depends on the thread count.
tp_eigen <- function(xu, m, k) {
  threads <- nce_threads(call = NULL)
  if (nrow(xu) >= 1000L && k <= 40L) {
    return(rs(nce_tprs_eigen(xu, as.integer(m), as.integer(k), 1e-11, threads)))
  }
  e <- rs(nce_tprs_e(xu, as.integer(m), threads))
  eig <- mgcv::slanczos(e, k, -1L, tol = 1e-12, nt = threads)
  o <- order(eig$values, decreasing = TRUE)
  list(values = eig$values[o], vectors = eig$vectors[, o, drop = FALSE])
}

# mgcv::uniquecombs(x, ordered = TRUE) of a numeric matrix, the same rows in the same order with
# the same "index" attribute, without pasting the columns into one string per row: mgcv orders
# the strings paste0(x[, 1], "*", x[, 2], ...) in the C locale, and as "*" sorts before every
# character of a number's string, that is the order of the columns' own strings taken in turn,
# which a sort of the columns' string ranks (string_ranks(), then nce_unique_ranked_rows()) gives.
# Equal rows keep the first.
unique_rows <- function(x) {
  if (ncol(x) == 1L) return(mgcv::uniquecombs(x, TRUE))
  u <- rs(nce_unique_ranked_rows(lapply(seq_len(ncol(x)), function(j) string_ranks(x[, j]))))
  xu <- x[u$first, , drop = FALSE]
  attr(xu, "index") <- u$index
  xu
}

# Ranks of the numbers x in the C-locale order of as.character(x) (equal strings, equal ranks).
# Formatting every number (15 significant digits) is what costs; most need none. Every number
# with 0.0011 <= |x| < 9.99 prints in fixed notation ("0.ddd" or "d.ddd"), whose strings sort as
# the numbers do, negatives ("-" first) before the rest and by |x|; two such numbers print the same
# only if they agree to 15 digits, which is checked for (numbers closer than 2e-14 relative send
# the column to the strings). Numbers below 0.0011 in size are formatted here; those printed as
# "M e-XX" sort after every string that starts with the mantissa M, that is just below M + one
# unit of M's last digit, and among themselves by the exponent string. The ranking, with its
# checks, is Rust's (nce_print_ranks()). Anything else (|x| >= 9.99, non-finite values, or
# mantissa bounds within 1e-13 of another number) ranks by the strings.
string_ranks <- function(x) {
  x <- as.double(x)
  by_strings <- function() {
    s <- as.character(x)
    match(s, sort(unique(s), method = "radix"))
  }
  tiny <- rs(nce_tiny_positions(x))
  if (is.null(tiny)) return(by_strings())
  sci <- integer(0)
  up <- numeric(0)
  erank <- integer(0)
  if (length(tiny)) {
    s <- as.character(abs(x[tiny]))
    is_sci <- grepl("e", s, fixed = TRUE)
    if (any(is_sci)) {
      sci <- tiny[is_sci]
      m <- sub("e.*", "", s[is_sci])
      e <- sub(".*e", "", s[is_sci])
      dot <- regexpr(".", m, fixed = TRUE)
      up <- as.numeric(m) + 10^-ifelse(dot > 0L, nchar(m) - dot, 0L)
      ups <- sort(unique(up))
      # (Equal bounds of different mantissas: one is a prefix of the other, "1" and "1.9".)
      if (length(ups) != length(unique(m)) || (length(ups) > 1L && any(diff(ups) <= 1e-13 * ups[-1L]))) {
        return(by_strings())
      }
      erank <- match(e, sort(unique(e), method = "radix"))
    }
  }
  r <- rs(nce_print_ranks(x, sci, up, erank))
  if (is.null(r)) by_strings() else r
}

# Penalty order used by tprs.c for p.order m in d dimensions.
tp_order <- function(m, d) {
  if (2 * m > d) return(m)
  m <- 0
  while (2 * m < d + 2) m <- m + 1
  m
}

# Null-space polynomials of the points (rows of x) in tprs.c's order (gen_tps_poly_powers).
tp_poly <- function(x, m) {
  d <- ncol(x)
  n_poly <- mgcv::null.space.dimension(d, m)
  index <- integer(d)
  out <- matrix(1, nrow(x), n_poly)
  for (i in seq_len(n_poly)) {
    for (j in seq_len(d)) if (index[j] > 0L) out[, i] <- out[, i] * x[, j]^index[j]
    s <- sum(index)
    if (s < m - 1L) {
      index[1L] <- index[1L] + 1L
    } else {
      s <- s - index[1L]
      index[1L] <- 0L
      for (j in seq_len(d)[-1L]) {
        index[j] <- index[j] + 1L
        s <- s + 1L
        if (s == m) {
          s <- s - index[j]
          index[j] <- 0L
        } else {
          break
        }
      }
    }
  }
  out
}
