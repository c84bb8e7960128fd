# vnce() for the truncated Gaussian graphical model: data checks, noise, starts, the Rust fit.

fit_vnce_tgm <- function(x, model, nu, n_latent, method, impute, control, call = sys.call(-1L)) {
  if (method != "vnce") {
    nce_abort(paste0("method = \"", method, "\" is not available for tgm_model(): ",
                     if (method == "em") {
                       "the posterior of the missing values is not tractable"
                     } else {
                       paste("its marginal over missing values is not tractable; use impute = \"mean\" or",
                             "\"complete\" for NCE baselines")
                     }),
              call = call)
  }
  if (nu != round(nu)) {
    nce_abort(sprintf("`ratio` must be a whole number for tgm_model() (noise rows pair with data rows), not %s.",
                      format(nu)), call = call)
  }
  x <- tgm_data(x, call)
  n_all <- nrow(x)
  miss <- is.na(x)
  data <- switch(impute,
    latent = x,
    mean = {
      m <- colMeans(x, na.rm = TRUE)
      x[miss] <- m[col(x)[miss]]
      x
    },
    complete = {
      keep <- rowSums(miss) == 0L
      p <- ncol(x) * (ncol(x) + 1) / 2 + 1
      if (sum(keep) < p) {
        nce_abort(sprintf("impute = \"complete\" leaves %d complete rows for %d parameters", sum(keep), p), call = call)
      }
      x[keep, , drop = FALSE]
    }
  )
  n <- nrow(data)
  d <- ncol(data)
  noise <- tgm_noise(data, call)
  m <- as.integer(nu) * n
  y <- rs(nce_truncnorm_sample(as.double(m), noise$mean, noise$sd, 0, draw_seed(), nce_threads()), call)
  # Noise rows pair with data rows (row k with data row k mod n) and copy their missingness.
  y[is.na(data)[rep(seq_len(n), nu), , drop = FALSE]] <- NA
  lpx <- rs(nce_truncnorm_log_density(data, noise$mean, noise$sd, 0), call)
  lpy <- rs(nce_truncnorm_log_density(y, noise$mean, noise$sd, 0), call)
  start <- tgm_start(data, model$start, call)
  ctrl <- unclass(control)[c("maxit", "gtol", "ftol", "memory")]
  seed <- draw_seed()
  res <- rs(nce_vnce_tgm(list(x = data, y = y, lpx = lpx, lpy = lpy), start, ctrl,
                         list(n_latent = as.integer(n_latent), seed = seed, threads = nce_threads(),
                              family = model$family)), call)
  vars <- colnames(x)
  if (is.null(vars)) vars <- paste0("x", seq_len(d))
  k_mat <- res$K
  dimnames(k_mat) <- list(vars, vars)
  variational <- if (model$family == "ghk") {
    list(family = "ghk")
  } else {
    prec <- res$prec
    dimnames(prec) <- list(vars, vars)
    list(family = "lognormal", mu = stats::setNames(res$mu, vars), prec = prec)
  }
  up <- which(upper.tri(k_mat, diag = TRUE), arr.ind = TRUE)
  coefs <- c(stats::setNames(k_mat[up], sprintf("K[%s,%s]", vars[up[, 1L]], vars[up[, 2L]])), c = res$c)
  structure(list(
    coefficients = coefs, precision = k_mat, c = res$c,
    variational = variational,
    objective = res$objective, converged = res$converged, iterations = res$iterations,
    evaluations = res$evaluations, message = res$message, grad_norm = res$grad_norm,
    impute = impute, n_latent = n_latent, seed = seed, n = n, n_total = n_all, d = d,
    missing = mean(miss), noise = c(noise, list(y = y, lpx = lpx, lpy = lpy)), data = data, x = x, model = model
  ), class = c("vnce_tgm", "vnce_fit", "nce_result"))
}

# A positive numeric matrix with NA for missing values, or a classed error.
tgm_data <- function(x, call) {
  if (is.data.frame(x)) {
    ok <- vapply(x, is.numeric, TRUE)
    if (!all(ok)) {
      nce_abort(sprintf("`data` has non-numeric columns: %s", paste(names(x)[!ok], collapse = ", ")), call = call)
    }
    x <- as.matrix(x)
  }
  if (!is.matrix(x) || !is.numeric(x)) {
    nce_abort(sprintf("`data` must be a numeric matrix or data frame, not %s.", describe_value(x)), call = call)
  }
  if (nrow(x) < 2L) nce_abort(sprintf("`data` must have at least two rows, not %d.", nrow(x)), call = call)
  storage.mode(x) <- "double"
  if (ncol(x) < 2L) nce_abort(sprintf("`data` must have at least two columns, not %d.", ncol(x)), call = call)
  if (any(is.infinite(x))) {
    r <- which(is.infinite(x), arr.ind = TRUE)[1L, ]
    nce_abort(sprintf("`data` has infinite values (first at row %d, column %d)", r[1], r[2]), call = call)
  }
  x[is.nan(x)] <- NA
  bad <- !is.na(x) & x <= 0
  if (any(bad)) {
    r <- which(bad, arr.ind = TRUE)[1L, ]
    nce_abort(sprintf(paste("`data` must be positive for the truncated Gaussian model on the positive orthant:",
                            "%d values are not (first %g at row %d, column %d)"),
                      sum(bad), x[r[1], r[2]], r[1], r[2]), call = call)
  }
  miss <- is.na(x)
  empty_rows <- which(rowSums(!miss) == 0L)
  if (length(empty_rows)) {
    nce_abort(sprintf("`data` has rows with every value missing: %s", format_positions(empty_rows)), call = call)
  }
  empty_cols <- which(colSums(!miss) < 2L)
  if (length(empty_cols)) {
    nce_abort(sprintf("`data` has columns with fewer than two observed values: %s", format_positions(empty_cols)),
              call = call)
  }
  x
}

# Product of univariate normals truncated at zero, each fitted to a column's observed values.
tgm_noise <- function(x, call) {
  check_distinct_columns(x, call)
  fits <- lapply(seq_len(ncol(x)), function(j) rs(nce_truncnorm_fit(x[!is.na(x[, j]), j], 0), call))
  list(mean = vapply(fits, `[[`, 0, "mean"), sd = vapply(fits, `[[`, 0, "sd"))
}

# Every model's noise is fitted to the data's columns: a column with one distinct value gives it no
# spread (and the fit nothing to estimate), so refuse it, for every vnce() model alike.
check_distinct_columns <- function(x, call) {
  x <- as.matrix(x)
  for (j in seq_len(ncol(x))) {
    if (length(unique(x[!is.na(x[, j]), j])) < 2L) {
      nce_abort(sprintf("column %d of `data` has fewer than two distinct observed values", j), call = call)
    }
  }
}

# Starting values: K diagonal with E[x_j^2] = 1 / K_jj (exact for a half-normal), c its exact log
# normaliser, and the lognormal family matched to the observed log values.
tgm_start <- function(x, user, call) {
  d <- ncol(x)
  k_mat <- diag(1 / colMeans(x^2, na.rm = TRUE), d)
  lx <- log(x)
  v <- apply(lx, 2L, stats::var, na.rm = TRUE)
  start <- list(K = k_mat, c = sum(0.5 * log(pi / (2 * diag(k_mat)))), mu = colMeans(lx, na.rm = TRUE),
                prec = diag(1 / pmax(v, 1e-6), d))
  if (!is.null(user$K)) {
    start$K <- check_precision(user$K, "start$K", call = call)
    if (ncol(start$K) != d) nce_abort(sprintf("`start$K` must be %d x %d", d, d), call = call)
    start$c <- if (is.null(user$c)) tgm_log_normaliser_bound(start$K) else start$c
  }
  if (!is.null(user$c)) {
    check_number(user$c, "start$c", call = call)
    start$c <- user$c
  }
  if (!is.null(user$mu)) {
    if (!is.numeric(user$mu) || length(user$mu) != d || any(!is.finite(user$mu))) {
      nce_abort(sprintf("`start$mu` must be %d finite numbers", d), call = call)
    }
    start$mu <- as.double(user$mu)
  }
  if (!is.null(user$prec)) {
    start$prec <- check_precision(user$prec, "start$prec", call = call)
    if (ncol(start$prec) != d) nce_abort(sprintf("`start$prec` must be %d x %d", d, d), call = call)
  }
  start$K <- unname(start$K)
  start$prec <- unname(start$prec)
  start
}

# A start for c given K: the log normaliser of the diagonal part (exact when K is diagonal).
tgm_log_normaliser_bound <- function(k_mat) sum(0.5 * log(pi / (2 * diag(k_mat))))
