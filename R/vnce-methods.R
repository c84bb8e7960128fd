# Methods for vnce() fits.

#' @export
print.vnce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nCall:\n", paste(deparse(x$call), collapse = "\n"), "\n\n", sep = "")
  cat(vnce_description(x), "\n")
  if (inherits(x, "vnce_tgm")) {
    cat(sprintf("Precision matrix K (%d x %d), c = %s; %d off-diagonal entries above 0.1 in absolute value\n",
                x$d, x$d, format(x$c, digits = digits), nrow(edges(x, 0.1, abs = TRUE))))
  } else {
    cat("Coefficients:\n")
    print.default(format(coef(x), digits = digits), print.gap = 2L, quote = FALSE)
  }
  cat(sprintf("Objective %s; %s after %d iterations\n", format(x$objective, digits = digits + 3L),
              if (isTRUE(x$converged)) "converged" else "NOT converged", x$iterations))
  invisible(x)
}

vnce_description <- function(x) {
  est <- switch(x$method, vnce = "VNCE", em = "VNCE (EM variant)", nce = "NCE on the marginal model")
  if (inherits(x, "vnce_tgm")) {
    how <- switch(x$impute,
      latent = sprintf("missing values as latent variables, %d draws per point", x$n_latent),
      mean = "NCE after mean imputation", complete = sprintf("NCE on %d complete rows of %d", x$n, x$n_total))
    if (x$impute != "latent") est <- "NCE"
    sprintf("%s, truncated Gaussian graphical model: n = %d, d = %d, %.1f%% missing (%s), nu = %g",
            est, x$n_total, x$d, 100 * x$missing, how, x$nu)
  } else if (inherits(x, "vnce_mog")) {
    sprintf("%s, unnormalised mixture of Gaussians (sigma1 = %g): n = %d, nu = %g", est, x$model$sigma1, x$n, x$nu)
  } else {
    sprintf("%s, custom model with a discrete latent variable: n = %d, nu = %g", est, x$n, x$nu)
  }
}

#' Summarise a vnce() fit
#'
#' @param object A [vnce()] fit.
#' @param threshold For graphical models: list the edges whose precision entry exceeds it.
#' @param ... Unused.
#' @return A list of class `summary.vnce_fit` with the description, estimates, the largest edges
#'   (graphical models), the objective and the optimiser's report.
#' @examples
#' set.seed(1)
#' summary(vnce(rmog(300), mog_model()))
#' @export
summary.vnce_fit <- function(object, threshold = 0.1, ...) {
  out <- list(description = vnce_description(object), objective = object$objective,
              nce_objective = object$nce_objective, converged = object$converged,
              iterations = object$iterations, message = object$message)
  if (inherits(object, "vnce_tgm")) {
    out$edges <- edges(object, threshold)
    out$c <- object$c
    out$noise <- data.frame(mean = object$noise$mean, sd = object$noise$sd, row.names = colnames(object$precision))
  } else {
    out$coefficients <- coef(object)
    out$variational <- object$variational$w
  }
  structure(out, class = "summary.vnce_fit")
}

#' @export
print.summary.vnce_fit <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat(x$description, "\n\n")
  if (!is.null(x$edges)) {
    cat(sprintf("Edges with K[i, j] above the threshold: %d\n", nrow(x$edges)))
    if (nrow(x$edges)) print(utils::head(x$edges, 15L), digits = digits, row.names = FALSE)
    cat(sprintf("c (log normaliser) = %s\n", format(x$c, digits = digits)))
  } else {
    cat("Coefficients:\n")
    print(x$coefficients, digits = digits)
    if (length(x$variational)) {
      cat("Variational parameters:\n")
      print(x$variational, digits = digits)
    }
  }
  cat(sprintf("\nVNCE objective %s", format(x$objective, digits = digits + 3L)))
  if (!is.null(x$nce_objective)) cat(sprintf(", NCE objective at the estimate %s", format(x$nce_objective, digits = digits + 3L)))
  cat(sprintf("\nOptimiser: %s after %d iterations (%s)\n", if (isTRUE(x$converged)) "converged" else "not converged",
              x$iterations, x$message))
  invisible(x)
}

#' Impute missing values or evaluate the fitted model
#'
#' For a truncated Gaussian graphical model fitted by [vnce()], `type = "impute"` fills each
#' missing value by its posterior mean given the row's observed values: under the fitted model
#' (a normal truncated to the positive orthant, by self-normalised GHK importance sampling with
#' `n_draws` draws per row) for `family = "ghk"`, under the fitted lognormal conditional for
#' `family = "lognormal"`; `type = "log_phi"` returns the fitted log phi(x) = -x'Kx/2 - c of
#' complete rows (NA for rows with missing values).
#'
#' @param object A [vnce()] fit of [tgm_model()].
#' @param newdata A matrix with the fit's columns; default the data of the fit.
#' @param type `"impute"` or `"log_phi"`.
#' @param n_draws Importance-sampling draws per row for `family = "ghk"` imputation.
#' @param ... Unused.
#' @return The completed matrix, or a vector of log phi values.
#' @examples
#' set.seed(2)
#' x <- rtgm(200, ring_graph(5))
#' x[sample(length(x), 100)] <- NA
#' fit <- vnce(x, tgm_model(), n_latent = 5)
#' head(predict(fit))
#' @export
predict.vnce_tgm <- function(object, newdata = NULL, type = c("impute", "log_phi"), n_draws = 1000, ...) {
  type <- match.arg(type)
  if (!is_count(n_draws) || n_draws < 1) nce_abort("`n_draws` must be a positive whole number")
  x <- if (is.null(newdata)) object$x else newdata
  if (is.data.frame(x)) x <- as.matrix(x)
  if (!is.matrix(x) || !is.numeric(x) || ncol(x) != object$d) {
    nce_abort(sprintf("`newdata` must be a numeric matrix with %d columns", object$d))
  }
  if (type == "log_phi") {
    K <- object$precision
    return(-0.5 * rowSums((x %*% K) * x) - object$c)
  }
  if (any(x <= 0, na.rm = TRUE)) nce_abort("`newdata` must be positive")
  storage.mode(x) <- "double"
  if (identical(object$variational$family, "ghk")) {
    K <- unname(object$precision)
    out <- rs(nce_ghk_impute(unname(x), K, as.integer(n_draws), draw_seed(), nce_threads()))
    dimnames(out) <- dimnames(x)
    return(out)
  }
  mu <- object$variational$mu
  Lam <- object$variational$prec
  lx <- log(x)
  for (i in which(rowSums(is.na(x)) > 0L)) {
    m <- is.na(x[i, ])
    o <- !m
    A <- Lam[m, m, drop = FALSE]
    Ai <- solve(A)
    mc <- mu[m] - Ai %*% Lam[m, o, drop = FALSE] %*% (lx[i, o] - mu[o])
    x[i, m] <- exp(as.vector(mc) + diag(Ai) / 2)
  }
  x
}

#' Plot a vnce() fit
#'
#' For a graphical model: the estimated off-diagonal precision entries as an image, with the true
#' graph's edges outlined when `truth` is given (and its ROC curve beside it). For the mixture and
#' custom models on one-dimensional data: a histogram of the data with the fitted density
#' phi(x; theta) (normalised by the estimated c).
#'
#' @param x A [vnce()] fit.
#' @param truth Optional true graph or precision matrix (graphical models).
#' @param ... Passed to [graphics::image()] or [graphics::hist()].
#' @return `x`, invisibly.
#' @examples
#' set.seed(1)
#' K <- ring_graph(8)
#' fit <- vnce(rtgm(300, K), tgm_model())
#' plot(fit, truth = K)
#' @export
plot.vnce_fit <- function(x, truth = NULL, ...) {
  if (inherits(x, "vnce_tgm")) {
    K <- x$precision
    off <- K
    diag(off) <- NA
    if (!is.null(truth)) {
      op <- graphics::par(mfrow = c(1L, 2L))
      on.exit(graphics::par(op))
    }
    d <- ncol(K)
    lim <- max(abs(off), na.rm = TRUE)
    graphics::image(seq_len(d), seq_len(d), off[, d:1], zlim = c(-lim, lim), axes = FALSE, xlab = "", ylab = "",
                    col = grDevices::hcl.colors(41L, "Blue-Red 3", rev = TRUE), main = "Estimated K (off-diagonal)", ...)
    graphics::axis(1, seq_len(d), colnames(K), las = 2, cex.axis = 0.7)
    graphics::axis(2, seq_len(d), rev(colnames(K)), las = 1, cex.axis = 0.7)
    if (!is.null(truth)) {
      G <- if (!is.null(attr(truth, "graph"))) attr(truth, "graph") else truth != 0
      diag(G) <- FALSE
      ij <- which(G, arr.ind = TRUE)
      graphics::rect(ij[, 1] - 0.5, d + 1 - ij[, 2] - 0.5, ij[, 1] + 0.5, d + 1 - ij[, 2] + 0.5, border = "black")
      plot(edge_roc(x, truth))
    }
  } else {
    if (NCOL(x$x) != 1L) nce_abort("plot() draws one-dimensional fits only")
    graphics::hist(x$x, breaks = 40, freq = FALSE, main = vnce_description(x), xlab = "x", col = "grey90", border = "white", ...)
    g <- seq(min(x$x), max(x$x), length.out = 400)
    graphics::lines(g, exp(vnce_log_phi(x, g)), col = "firebrick", lwd = 2)
  }
  invisible(x)
}

# Fitted log phi(x) summed over the latent variable (1-D models).
vnce_log_phi <- function(fit, g) {
  if (inherits(fit, "vnce_mog")) {
    th <- fit$coefficients[["theta"]]
    s1 <- fit$model$sigma1
    return(-fit$coefficients[["c"]] + log(exp(-g^2 / (2 * s1^2)) + exp(-g^2 / (2 * th^2))))
  }
  m <- fit$model
  row_lse(vapply(m$latent, function(z) m$log_phi(g, z, fit$coefficients), numeric(length(g))))
}
