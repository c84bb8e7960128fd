# vnce() for user-supplied models with a discrete latent variable, computed in R.

#' A user-supplied unnormalised model with a discrete latent variable
#'
#' Describes phi(x, z; theta) for [vnce()] when z takes a few values, by R functions for
#' log phi and its gradient in theta. The variational family is a multinomial logit,
#' q(z = l | x; W) proportional to exp(f(x)' W_l) with W_1 = 0, where f(x) are the features
#' `q_features(x)` (default (1, x, x^2), the family of Rhodes and Gutmann's section 4.2). Expectations
#' over z are exact sums, and the objective and its gradient are computed in R and maximised by
#' [stats::optim()] (BFGS): much slower than the built-in models, meant for small ones. Because the
#' latent variable is discrete, the exact posterior is available, so `method = "em"` and
#' `method = "nce"` (plain NCE on the model summed over z) work too.
#'
#' @param log_density `function(x, z, theta)`: log phi, the unnormalised log density, at every row
#'   of `x` (a vector, or a matrix with one row per point) for one latent value `z`; returns a
#'   numeric vector. Argument names follow [nce_vocabulary].
#' @param gradient `function(x, z, theta)`: the gradient of `log_density` in theta, a matrix with
#'   one row per point and one column per parameter.
#' @param start Starting values of the parameters (named).
#' @param latent The values the latent variable takes (at least two).
#' @param q_features `function(x)` returning the matrix of features of the variational family.
#' @param reference The reference (noise) density: `NULL` for independent normals fitted to the
#'   data's columns, or a list with `sample = function(n)` and `log_density = function(x)`.
#' @return A model specification (class `vnce_model`).
#' @section What it refuses:
#' * `log_density`, `gradient` or `q_features` not a function, `start` not finite numbers, `latent`
#'   not at least two distinct values without NA, `reference` not `NULL` or a list with functions
#'   `sample` and `log_density` (`nce_error_input`). What the functions return is checked by
#'   [vnce()]; an error inside one of them is raised as `nce_error_model`, naming the function and
#'   quoting its message.
#' @examples
#' # the mixture of mog_model(), written by hand (parameters log theta and c)
#' lp <- function(x, z, th) -th[2] - x^2 / (2 * if (z == 1) 1 else exp(2 * th[1]))
#' gr <- function(x, z, th) cbind(if (z == 1) 0 * x else x^2 * exp(-2 * th[1]), -1)
#' mod <- custom_model(lp, gr, start = c(log_theta = log(3), c = 2.5), latent = c(1, 0))
#' set.seed(1)
#' x <- rmog(400, theta = 4)
#' fit <- vnce(x, mod, method = "nce")   # plain NCE on the marginal: fast
#' exp(coef(fit)[["log_theta"]])
#' \donttest{
#' # joint VNCE over the model and q: slower in R (hundreds of iterations)
#' fit_v <- vnce(x, mod)
#' exp(coef(fit_v)[["log_theta"]])
#' }
#' @export
custom_model <- function(log_density, gradient, start, latent = c(0, 1), q_features = function(x) cbind(1, x, x^2),
                         reference = NULL) {
  check_function(log_density, "log_density")
  check_function(gradient, "gradient")
  if (!is.numeric(start) || length(start) < 1L || any(!is.finite(start))) {
    nce_abort(sprintf("`start` must be finite numbers (the starting values), not %s.", describe_value(start)))
  }
  if (is.null(names(start))) names(start) <- paste0("theta", seq_along(start))
  if (length(latent) < 2L || anyDuplicated(latent) || anyNA(latent)) {
    nce_abort(sprintf("`latent` must hold at least two distinct values, not %s.", describe_value(latent)))
  }
  check_function(q_features, "q_features")
  if (!is.null(reference) && !(is.list(reference) && is.function(reference$sample) &&
                                is.function(reference$log_density))) {
    nce_abort("`reference` must be NULL or a list with functions `sample(n)` and `log_density(x)`")
  }
  structure(list(type = "custom", log_phi = log_density, grad = gradient, theta = start, latent = latent,
                 q_features = q_features, reference = reference), class = "vnce_model")
}

fit_vnce_custom <- function(x, model, nu, method, control, call = sys.call(-1L)) {
  x <- latent_free_data(x, call)
  n <- NROW(x)
  m <- round(nu * n)
  if (m < 1L) {
    nce_abort(sprintf("`ratio` = %s times the %d points must give at least one noise point: raise `ratio`.",
                      format(nu), n), call = call)
  }
  noise <- model$reference
  if (is.null(noise)) {
    check_distinct_columns(x, call)  # the default normal noise needs spread in every column
    noise <- normal_noise(x)
  }
  y <- call_user(noise$sample, m, arg = "reference$sample", call = call)
  if (NROW(y) != m || NCOL(y) != NCOL(x)) {
    nce_abort("`reference$sample(n)` must return n points shaped like `data`", call = call)
  }
  parts <- custom_parts(model, x, y, log(nu), noise, call)
  custom_check_start(parts, model, call)
  p <- length(model$theta)
  fx <- parts$fx
  n_w <- ncol(fx) * (length(model$latent) - 1L)
  octl <- list(maxit = control$maxit, reltol = max(control$ftol, 1e-14))
  opt_theta <- function(start, q_fixed) {
    stats::optim(start, function(th) -custom_objective(parts, th, NULL, q_fixed)$value,
                 function(th) -custom_objective(parts, th, NULL, q_fixed)$grad[seq_len(p)],
                 method = "BFGS", control = octl)
  }
  trace <- NULL
  if (method == "vnce") {
    o <- stats::optim(c(model$theta, numeric(n_w)),
                      function(par) -custom_objective(parts, par[seq_len(p)], par[-seq_len(p)])$value,
                      function(par) -custom_objective(parts, par[seq_len(p)], par[-seq_len(p)])$grad,
                      method = "BFGS", control = octl)
    theta <- o$par[seq_len(p)]
    w <- o$par[-seq_len(p)]
    names(w) <- sprintf("w[%d,%d]", rep(seq_len(ncol(fx)), length(model$latent) - 1L),
                        rep(seq_len(length(model$latent) - 1L) + 1L, each = ncol(fx)))
    objective <- -o$value
  } else if (method == "em") {
    theta <- model$theta
    trace <- numeric(0)
    o <- list(convergence = 1L, counts = c(0, 0))
    for (it in seq_len(control$em_maxit)) {
      q <- exact_posterior(parts$lphi_x(theta))        # E-step: q = p(z | x; theta_k)
      o <- opt_theta(theta, q)                         # M-step
      theta <- o$par
      trace <- c(trace, custom_nce(parts, theta)$value)
      if (it > 1L && abs(trace[it] - trace[it - 1L]) < control$em_tol) break
    }
    w <- NULL
    objective <- custom_objective(parts, theta, NULL, exact_posterior(parts$lphi_x(theta)))$value
  } else {
    o <- stats::optim(model$theta, function(th) -custom_nce(parts, th)$value, function(th) -custom_nce(parts, th)$grad,
                      method = "BFGS", control = octl)
    theta <- o$par
    w <- NULL
    objective <- -o$value
  }
  names(theta) <- names(model$theta)
  structure(list(
    coefficients = theta, variational = list(w = w), objective = objective,
    nce_objective = custom_nce(parts, theta)$value, trace = trace,
    converged = o$convergence == 0L, iterations = o$counts[[2L]], evaluations = o$counts[[1L]],
    message = if (o$convergence == 0L) "converged" else sprintf("optim() code %d", o$convergence),
    n = n, noise = noise, x = x, model = model, parts = parts
  ), class = c("vnce_custom", "vnce_fit", "nce_result"))
}

# Independent normals fitted to the columns of x.
normal_noise <- function(x) {
  x <- as.matrix(x)
  mu <- colMeans(x)
  s <- apply(x, 2L, stats::sd)
  d <- ncol(x)
  list(
    sample = function(n) {
      y <- matrix(stats::rnorm(n * d, rep(mu, each = n), rep(s, each = n)), n, d)
      if (d == 1L) as.vector(y) else y
    },
    log_density = function(y) {
      rowSums(matrix(stats::dnorm(as.matrix(y), rep(mu, each = NROW(y)), rep(s, each = NROW(y)), log = TRUE),
                     NROW(y)))
    }
  )
}

# Everything that does not change with the parameters, and closures over x and y.
custom_parts <- function(model, x, y, log_nu, noise, call) {
  lpx <- call_user(noise$log_density, x, arg = "reference$log_density", at = "the data", call = call)
  lpy <- call_user(noise$log_density, y, arg = "reference$log_density", at = "the noise points", call = call)
  if (length(lpx) != NROW(x) || any(!is.finite(lpx))) {
    nce_abort("`reference$log_density()` must be finite at every data point", call = call)
  }
  if (length(lpy) != NROW(y) || any(!is.finite(lpy))) {
    nce_abort("`reference$log_density()` must be finite at every noise point", call = call)
  }
  fx <- as.matrix(call_user(model$q_features, x, arg = "q_features", call = call))
  if (nrow(fx) != NROW(x) || any(!is.finite(fx))) {
    nce_abort("`q_features(x)` must give one finite row per point", call = call)
  }
  n_latent <- length(model$latent)
  eval_at <- function(pts, theta) {
    vapply(seq_len(n_latent), function(l) {
      v <- call_user(model$log_phi, pts, model$latent[[l]], theta, arg = "log_density", call = call)
      if (length(v) != NROW(pts)) nce_abort("`log_density` must return one value per point", call = call)
      v
    }, numeric(NROW(pts)))
  }
  grads <- function(pts, theta) {
    lapply(seq_len(n_latent), function(l) {
      g <- as.matrix(call_user(model$grad, pts, model$latent[[l]], theta, arg = "gradient", call = call))
      if (nrow(g) != NROW(pts) || ncol(g) != length(theta)) {
        nce_abort(sprintf("`gradient` must return a %d x %d matrix", NROW(pts), length(theta)), call = call)
      }
      g
    })
  }
  list(x = x, y = y, lpx = lpx, lpy = lpy, fx = fx, log_nu = log_nu, n = NROW(x), L = n_latent,
       lphi_x = function(theta) matrix(eval_at(x, theta), NROW(x)),
       lphi_y = function(theta) matrix(eval_at(y, theta), NROW(y)),
       grad_x = function(theta) grads(x, theta), grad_y = function(theta) grads(y, theta))
}

row_lse <- function(a) {
  mx <- apply(a, 1L, max)
  mx + log(rowSums(exp(a - mx)))
}

exact_posterior <- function(lphi) exp(lphi - row_lse(lphi))

# The noise term shared by VNCE and NCE (its expectation over q is exact for a discrete latent).
custom_noise_term <- function(parts, theta) {
  ly <- parts$lphi_y(theta)
  b <- row_lse(ly) - parts$log_nu - parts$lpy
  sm <- exp(ly - row_lse(ly))
  gy <- parts$grad_y(theta)
  up <- -stats::plogis(b)
  grad <- Reduce(`+`, lapply(seq_len(parts$L), function(l) colSums(gy[[l]] * (up * sm[, l]))))
  list(value = sum(stats::plogis(-b, log.p = TRUE)), grad = grad)
}

# VNCE objective (eq. 13) and its gradient in (theta, W); with `q_fixed` the variational
# distribution is that matrix (EM's M-step) and only theta moves.
custom_objective <- function(parts, theta, w, q_fixed = NULL) {
  lx <- parts$lphi_x(theta)
  n_latent <- parts$L
  if (is.null(q_fixed)) {
    w_mat <- matrix(w, ncol(parts$fx), n_latent - 1L)
    eta <- cbind(0, parts$fx %*% w_mat)
    logq <- eta - row_lse(eta)
  } else {
    logq <- log(pmax(q_fixed, 1e-300))
  }
  q <- exp(logq)
  a <- lx - logq - parts$log_nu - parts$lpx
  f <- stats::plogis(a, log.p = TRUE)
  s <- stats::plogis(a)
  gx <- parts$grad_x(theta)
  g_theta <- Reduce(`+`, lapply(seq_len(n_latent), function(l) colSums(gx[[l]] * (q[, l] * (1 - s[, l])))))
  nz <- custom_noise_term(parts, theta)
  value <- (sum(q * f) + nz$value) / parts$n
  grad <- (g_theta + nz$grad) / parts$n
  if (is.null(q_fixed)) {
    gam <- q * (f - (1 - s))
    d_eta <- gam - q * rowSums(gam)
    grad <- c(grad, as.vector(crossprod(parts$fx, d_eta[, -1L, drop = FALSE])) / parts$n)
  }
  list(value = value, grad = grad)
}

# Plain NCE on the marginal model phi(x) = sum_z phi(x, z).
custom_nce <- function(parts, theta) {
  lx <- parts$lphi_x(theta)
  a <- row_lse(lx) - parts$log_nu - parts$lpx
  sm <- exp(lx - row_lse(lx))
  gx <- parts$grad_x(theta)
  up <- 1 - stats::plogis(a)
  g <- Reduce(`+`, lapply(seq_len(parts$L), function(l) colSums(gx[[l]] * (up * sm[, l]))))
  nz <- custom_noise_term(parts, theta)
  list(value = (sum(stats::plogis(a, log.p = TRUE)) + nz$value) / parts$n, grad = (g + nz$grad) / parts$n)
}

# The user's functions must give finite values at the starting theta: say which and where
# (optim() would only say "initial value in 'vmmin' is not finite").
custom_check_start <- function(parts, model, call) {
  th <- model$theta
  lab <- paste(sprintf("%s = %s", names(th), format(th, digits = 4)), collapse = ", ")
  for (what in c("x", "y")) {
    lp <- if (what == "x") parts$lphi_x(th) else parts$lphi_y(th)
    bad <- which(!is.finite(lp), arr.ind = TRUE)
    if (length(bad)) {
      r <- if (is.matrix(bad)) bad[, 1L] else bad
      nce_abort(sprintf(paste0("`log_density` returned %s at %d %s point(s) (rows %s) for the starting `theta` (%s): ",
                               "it must give finite log values there; fix log_density or choose another `theta`."),
                        format(lp[bad][1L]), length(unique(r)), if (what == "x") "data" else "noise",
                        format_positions(unique(r)), lab), call = call)
    }
    g <- if (what == "x") parts$grad_x(th) else parts$grad_y(th)
    if (any(vapply(g, function(m) any(!is.finite(m)), TRUE))) {
      nce_abort(sprintf(paste("`gradient` returned non-finite values at %s points for the starting `theta` (%s):",
                              "fix gradient."), if (what == "x") "data" else "noise", lab), call = call)
    }
  }
}

# Per-row scores of the summed objective (data rows, then noise rows): VNCE over (theta, W), or
# NCE on the marginal over theta.
custom_row_scores <- function(parts, theta, w, method) {
  n_latent <- parts$L
  ly <- parts$lphi_y(theta)
  by <- row_lse(ly) - parts$log_nu - parts$lpy
  smy <- exp(ly - row_lse(ly))
  gy <- parts$grad_y(theta)
  noise <- Reduce(`+`, lapply(seq_len(n_latent), function(l) gy[[l]] * (-stats::plogis(by) * smy[, l])))
  lx <- parts$lphi_x(theta)
  gx <- parts$grad_x(theta)
  if (method != "vnce") {
    a <- row_lse(lx) - parts$log_nu - parts$lpx
    sm <- exp(lx - row_lse(lx))
    data <- Reduce(`+`, lapply(seq_len(n_latent), function(l) gx[[l]] * ((1 - stats::plogis(a)) * sm[, l])))
    return(rbind(data, noise))
  }
  w_mat <- matrix(w, ncol(parts$fx), n_latent - 1L)
  eta <- cbind(0, parts$fx %*% w_mat)
  logq <- eta - row_lse(eta)
  q <- exp(logq)
  a <- lx - logq - parts$log_nu - parts$lpx
  f <- stats::plogis(a, log.p = TRUE)
  s <- stats::plogis(a)
  data <- Reduce(`+`, lapply(seq_len(n_latent), function(l) gx[[l]] * (q[, l] * (1 - s[, l]))))
  gam <- q * (f - (1 - s))
  d_eta <- (gam - q * rowSums(gam))[, -1L, drop = FALSE]
  # column-major vec of fx' d_eta, row by row: feature index fastest, then latent value
  gw <- do.call(cbind, lapply(seq_len(n_latent - 1L), function(l) parts$fx * d_eta[, l]))
  rbind(cbind(data, gw), cbind(noise, matrix(0, nrow(noise), length(w))))
}

# Sandwich covariance of a custom-model fit (two independent samples, data and noise rows; the
# Hessian by central differences of the exact gradient of the summed objective).
custom_vcov <- function(object) {
  parts <- object$parts
  theta <- object$coefficients
  p <- length(theta)
  vn <- object$method == "vnce"
  par <- if (vn) c(theta, object$variational$w) else theta
  grad <- function(v) {
    g <- if (vn) custom_objective(parts, v[seq_len(p)], v[-seq_len(p)])$grad else custom_nce(parts, v)$grad
    g * parts$n
  }
  hess <- numeric_hessian(par, grad)
  scores <- custom_row_scores(parts, theta, if (vn) object$variational$w else NULL, if (vn) "vnce" else "nce")
  vc <- two_sample_sandwich(hess, scores, parts$n)
  vc <- vc[seq_len(p), seq_len(p), drop = FALSE]
  dimnames(vc) <- list(names(theta), names(theta))
  vc
}

numeric_hessian <- function(x, grad, rel = 1e-5) {
  p <- length(x)
  hess <- matrix(0, p, p)
  for (j in seq_len(p)) {
    h <- rel * max(1, abs(x[j]))
    xp <- x
    xm <- x
    xp[j] <- x[j] + h
    xm[j] <- x[j] - h
    hess[, j] <- (grad(xp) - grad(xm)) / (2 * h)
  }
  (hess + t(hess)) / 2
}

# H^{-1} V H^{-1} with V the scores' centred outer products summed within the data rows (the
# first n) and within the noise rows.
two_sample_sandwich <- function(hess, scores, n) {
  cen <- function(centred) sweep(centred, 2L, colMeans(centred))
  centred <- rbind(cen(scores[seq_len(n), , drop = FALSE]), cen(scores[-seq_len(n), , drop = FALSE]))
  hess_inv <- tryCatch(solve(-hess), error = function(e) NULL)
  if (is.null(hess_inv) || any(!is.finite(hess))) {
    nce_abort("the Hessian of the objective is singular at the estimate: the parameters are not identified",
              "numerical", call = NULL)
  }
  vc <- hess_inv %*% crossprod(centred) %*% hess_inv
  (vc + t(vc)) / 2
}
