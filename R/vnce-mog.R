# vnce() for the unnormalised mixture of Gaussians (Rhodes and Gutmann, 2019, section 4.2).

fit_vnce_mog <- function(x, model, nu, method, control, call = sys.call(-1L)) {
  x <- latent_free_data(x, call)
  if (NCOL(x) != 1L) nce_abort("`data` must be a numeric vector for mog_model()", call = call)
  x <- as.vector(x)
  check_distinct_columns(x, call)
  n <- length(x)
  m <- round(nu * n)
  if (m < 1L) nce_abort("`ratio * length(data)` must give at least one noise point", call = call)
  # The model is centred at zero: so is the noise, with the data's second moment.
  noise <- list(mean = 0, sd = sqrt(mean(x^2)))
  y <- stats::rnorm(m, noise$mean, noise$sd)
  s1 <- model$sigma1
  theta0 <- if (is.null(model$start$theta)) max(noise$sd, 1.5 * s1) else model$start$theta
  check_number(theta0, "start$theta", min = 0, exclusive_min = TRUE, call = call)
  start <- list(
    theta = theta0,
    c = if (is.null(model$start$c)) log(sqrt(2 * pi) * (s1 + theta0)) else model$start$c,
    w = if (is.null(model$start$w)) c(0, 0, 1 / (2 * theta0^2) - 1 / (2 * s1^2)) else model$start$w
  )
  check_number(start$c, "start$c", call = call)
  if (!is.numeric(start$w) || length(start$w) != 3L || any(!is.finite(start$w))) {
    nce_abort("`start$w` must be three finite numbers", call = call)
  }
  res <- rs(nce_vnce_mog(list(x = x, y = y, sigma1 = s1, noise_mean = noise$mean, noise_sd = noise$sd), method, start,
                         unclass(control), nce_threads()), call)
  structure(list(
    coefficients = c(theta = res$theta, c = res$c),
    variational = list(w = stats::setNames(res$w, c("w0", "w1", "w2"))),
    objective = res$objective, nce_objective = res$nce_objective, trace = res$trace,
    converged = res$converged, iterations = res$iterations, evaluations = res$evaluations,
    message = res$message, n = n, noise = c(noise, list(y = y)), x = x, model = model
  ), class = c("vnce_mog", "vnce_fit", "nce_result"))
}

# Finite numeric data without missing values, as a vector or matrix.
latent_free_data <- function(x, call) {
  if (is.data.frame(x)) x <- as.matrix(x)
  if (!is.numeric(x) || length(x) < 2L) {
    nce_abort(sprintf("`data` must be numeric with at least two values, not %s.", describe_value(x)), call = call)
  }
  bad <- !is.finite(x)
  if (any(bad)) {
    nce_abort(sprintf("`data` has missing or infinite values at %s (this model has no missing data)",
                      format_positions(which(bad))), call = call)
  }
  storage.mode(x) <- "double"
  x
}
