# Methods of nce() fits with an mlp() term (class nce_mlp, a subclass of nce_fit): what differs
# from nce_fit is the network's part of the log density; the rest is inherited.

#' Predict from an nce fit with a neural-network term
#'
#' The log density of a fit of [nce()] with an [mlp()] term is
#' \eqn{g(x) + z'\beta + \nu}: the network's output, the other terms, and the intercept's
#' estimate of minus the log normalising constant.
#'
#' Standard errors are refused (`nce_error_unsupported`): the network's weights are not
#' identifiable (permuting the hidden units gives the same function), so there is no sandwich
#' covariance for them. `vcov()` and `confint()` give the other terms' covariance *with the
#' network held fixed*, which understates their uncertainty. For the same reason `"lpmatrix"`
#' is refused: the network is not linear in its parameters.
#'
#' `type = "terms"` gives one column per term. The first, named after the `mlp()` term, is the
#' network's output \eqn{g(x)}, centred at the data rows as fitted. The other terms follow as
#' [mgcv::predict.gam()] gives them: parametric terms uncentred, smooths under their constraints.
#' The intercept is attribute `"constant"`, so that `rowSums()` plus the constant, plus the
#' formula's offsets, is `type = "link"` inside the reference's support.
#'
#' @inheritParams nce_vocabulary
#' @param newdata Data frame with the model's variables; the data by default. Rows with NA give
#'   NA; outside the reference's support the density is 0.
#' @param type `"link"` or `"log_density"` (the normalised log density), `"response"` or
#'   `"density"` (its exponential), `"log_unnormalised"` (without the intercept) or `"terms"`
#'   (a matrix, see Details).
#' @param se.fit Refused (see Details).
#' @return A numeric vector, one value per row of `newdata` (a matrix for `"terms"`).
#' @examples
#' set.seed(1)
#' x <- rnorm(1000)
#' fit <- nce(~ mlp(x, hidden = 16), data.frame(x = x), ref_normal(x = 0, cov = 4), ratio = 5,
#'            control = list(max_epochs = 30))
#' predict(fit, data.frame(x = c(-1, 0, 1)), type = "density")
#' dnorm(c(-1, 0, 1))   # truth
#' @export
predict.nce_mlp <- function(object, newdata, type = c("link", "log_density", "response", "density",
                                                      "log_unnormalised", "lpmatrix", "terms"),
                            se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- predict_type(type)
  check_bool(se.fit, "se.fit")
  if (type == "lpmatrix") refuse("predict(type = \"lpmatrix\")", object)
  if (se.fit) refuse("predict(se.fit = TRUE)", object)
  newdata <- nce_predict_newdata(object, newdata, type)
  if (type == "terms") return(mlp_predict_terms(object, newdata))
  fit <- mlp_log_density(object, newdata, intercept = type != "log_unnormalised")
  nce_finish_prediction(object, newdata, fit, rep(NA_real_, length(fit)), type, FALSE)
}

# g(x) + z'beta (+ the formula's offsets), with or without the intercept; NA at rows with NA.
mlp_log_density <- function(object, newdata, intercept = TRUE) {
  if (!is.null(object$rest_fit)) {
    # Smooth terms beside the network: their fit's log density (-Inf outside the support).
    lin <- stats::predict(object$rest_fit, newdata, type = if (intercept) "link" else "log_unnormalised")
    return(mlp_output(object, newdata) + lin)
  }
  z <- mlp_rest_matrix(object, newdata)
  beta <- stats::coef(object)
  beta[is.na(beta)] <- 0
  if (!intercept) beta[1L] <- 0
  lin <- drop(z %*% beta)
  off <- attr(z, "model.offset")
  if (!is.null(off)) lin <- lin + off
  mlp_output(object, newdata) + lin
}

# The network's output g(x) at the rows of `newdata` (centred as fitted); NA where an input is
# missing or not finite.
mlp_output <- function(object, newdata) {
  net <- object$network
  g <- rep(NA_real_, nrow(newdata))
  ok <- which(rows_finite(newdata[net$inputs]))
  if (length(ok)) g[ok] <- mlp_forward(net, mlp_inputs(newdata[ok, , drop = FALSE], net$inputs, net$center, net$scale))
  g
}

# The model matrix of the parametric terms beside the network at the rows of `newdata`, one row
# each (NA rows where a covariate is missing), with the formula's offsets as "model.offset".
mlp_rest_matrix <- function(object, newdata) {
  tt <- stats::delete.response(object$rest_terms)
  mf <- stats::model.frame(tt, newdata, na.action = stats::na.pass, xlev = object$xlevels)
  z <- stats::model.matrix(tt, mf, contrasts.arg = object$contrasts)
  out <- matrix(NA_real_, nrow(newdata), ncol(z), dimnames = list(rownames(newdata), colnames(z)))
  # model.matrix() may drop rows with NA: place its rows by name (newdata's own row names).
  out[match(rownames(z), rownames(mf)), ] <- z
  structure(out, assign = attr(z, "assign"), model.offset = stats::model.offset(mf))
}

# predict(type = "terms"): the network's column (named after the mlp() term) and the other
# terms' columns, the intercept as attribute "constant" (see ?predict.nce_mlp).
mlp_predict_terms <- function(object, newdata) {
  labels <- attr(object$terms, "term.labels")
  net_label <- labels[is_mlp_label(labels)]
  rest <- if (!is.null(object$rest_fit)) {
    stats::predict(object$rest_fit, newdata, type = "terms")
  } else {
    z <- mlp_rest_matrix(object, newdata)
    nce_predict_terms(z, stats::coef(object), object$vcov, attr(z, "assign"), stats::delete.response(object$rest_terms),
                      newdata, FALSE)
  }
  out <- cbind(mlp_output(object, newdata), rest)
  colnames(out) <- c(net_label, colnames(rest))
  rownames(out) <- rownames(newdata)
  attr(out, "constant") <- attr(rest, "constant")
  out
}

#' @export
print.nce_mlp <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nNoise-contrastive estimation with a neural-network energy\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  mlp_describe(x, digits)
  if (is.null(x$rest_fit)) {
    cat("\nOther terms (the network held fixed):\n")
    print.default(format(stats::coef(x), digits = digits), print.gap = 2L, quote = FALSE)
  } else {
    cat("\nParametric terms (the network held fixed):\n")
    print.default(format(stats::coef(x)[seq_len(x$rest_fit$nsdf)], digits = digits), print.gap = 2L,
                  quote = FALSE)
    cat("Smooth terms, effective degrees of freedom:\n")
    edf <- vapply(x$rest_fit$smooth, function(sm) sum(x$rest_fit$edf[sm$first.para:sm$last.para]), 0)
    names(edf) <- vapply(x$rest_fit$smooth, function(sm) sm$label, "")
    print.default(format(edf, digits = digits), print.gap = 2L, quote = FALSE)
    if (isTRUE(x$rest_fit$discrete)) cat(discrete_note(x$rest_fit$discrete_layout), " (smooth terms)\n", sep = "")
  }
  cat(log_z_not_identified(x) %||%
        sprintf("\nlog normalising constant (-(Intercept)): %s (importance-sampling check: %s)\n",
                format(x$log_normaliser, digits = digits), format(x$log_normaliser_is, digits = digits)))
  cat(sprintf("%d data points, %d reference points (ratio %g)\n", x$n, x$m, x$ratio))
  if (isTRUE(x$relative)) cat(relative_note(x$reference), "\n", sep = "")
  invisible(x)
}

mlp_describe <- function(x, digits) {
  net <- x$network
  tr <- x$training
  cat(sprintf("Network: mlp(%s), %s, hidden layers %s: %d parameters\n", paste(net$inputs, collapse = ", "),
              net$activation, paste(net$hidden, collapse = "-"), net$n_params))
  stopped <- tr$starts$stopped_early[tr$best_start]
  run <- max(tr$history$epoch[tr$history$start == tr$best_start])
  cat(sprintf("Training: %d start(s); best start %d, best epoch %d of %d run%s; held-out NCE loss %s\n",
              nrow(tr$starts), tr$best_start, tr$best_epoch, run, epoch_note(stopped, tr$best_epoch, run),
              format(tr$held_out_loss, digits = digits)))
  if (!is.null(tr$rounds)) {
    rd <- tr$rounds
    cat(sprintf("Backfitting with the smooth terms: %d round(s), kept round %d (lowest held-out loss)%s\n",
                nrow(rd), rd$round[rd$kept],
                if (rd$still_improving[1L]) "; still improving: consider a larger `backfit`" else ""))
  }
}

# How training ended. More epochs can help only where the held-out loss was still falling at the
# last epoch run (the best epoch is the last); a best epoch before it means the loss had turned.
epoch_note <- function(stopped, best, run) {
  if (stopped) return(" (stopped early)")
  if (best >= run) " (reached max_epochs still improving: consider more)" else " (reached max_epochs)"
}

#' Summarise an nce fit with a neural-network term
#'
#' As [summary.nce_fit()], with the network's description and training record. The coefficient
#' table is that of the terms beside the network, with standard errors *conditional on the
#' fitted network* (see [predict.nce_mlp()]). The log-likelihood's df counts every parameter of
#' the network plus the other coefficients: an upper bound on its effective number of
#' parameters, so `AIC()` penalises the network fully.
#'
#' @inheritParams nce_vocabulary
#' @param ... Passed to [summary.nce_fit()].
#' @return An object of class `summary.nce_mlp`.
#' @export
summary.nce_mlp <- function(object, ...) {
  s <- if (is.null(object$rest_fit)) summary.nce_fit(object, ...) else mlp_smooth_summary(object, ...)
  s$network <- object$network
  s$training <- object$training
  s$log_normaliser_is <- object$log_normaliser_is
  s[c("proper", "improper_along")] <- list(object$proper, object$improper_along)
  class(s) <- c("summary.nce_mlp", class(s))
  s
}

#' @export
print.summary.nce_mlp <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("\nNoise-contrastive estimation with a neural-network energy\n\nCall:  ",
      paste(deparse(x$call), sep = "\n", collapse = "\n"), "\n\n", sep = "")
  mlp_describe(x, digits)
  cat(sprintf("\n%s terms (%s standard errors, the network held fixed):\n",
              if (is.null(x$s.table)) "Other" else "Parametric", x$se_type))
  stats::printCoefmat(x$coefficients, digits = digits, na.print = "NA")
  if (!is.null(x$s.table)) {
    cat("\nApproximate significance of smooth terms (the network held fixed):\n")
    stats::printCoefmat(x$s.table, digits = digits, has.Pvalue = TRUE, na.print = "NA", cs.ind = 1)
  }
  cat(log_z_not_identified(x) %||%
        sprintf("\nlog normalising constant: %s (importance-sampling check %s)\n",
                format(x$log_normaliser[["estimate"]], digits = digits), format(x$log_normaliser_is, digits = digits)))
  cat(sprintf("%d data points, %d reference points (ratio %g), reference: %s over %s\n",
              x$n, x$m, x$ratio, reference_label(x$reference, x$relative), paste(x$reference$vars, collapse = ", ")))
  format_loglik(x, digits, "normalised model; df, all network parameters")
  invisible(x)
}

# summary() with smooth terms beside the network: the fields summary.nce_fit() gives, with the
# parametric table and the smooth terms' tests of the smooth model's summary.
mlp_smooth_summary <- function(object, se_type = c("sandwich", "naive"), ...) {
  se_type <- match_choice(se_type)
  g <- summary.nce_gam(object$rest_fit, se_type = se_type)
  ln <- object$log_normaliser
  structure(c(list(call = object$call, coefficients = g$p.table, s.table = g$s.table, se_type = se_type,
                   log_normaliser = c(estimate = ln, se = g$log_normaliser[["se"]]), n = object$n, m = object$m,
                   ratio = object$ratio, method = object$method, converged = object$converged,
                   iterations = object$iterations, reference = object$reference, relative = object$relative),
                 summary_loglik(object)),
            class = "summary.nce_fit")
}

#' @export
model.matrix.nce_mlp <- function(object, ...) refuse("model.matrix", object)

#' @export
anova.nce_mlp <- function(object, ..., test = "Wald") refuse("anova", object)

#' @export
drop1.nce_mlp <- function(object, ...) refuse("drop1", object)

#' @rdname nce_broom
#' @exportS3Method generics::tidy
tidy.nce_mlp <- function(x, parametric = TRUE,  # nolint: object_name_linter.
                         conf.int = FALSE, conf.level = 0.95, ...) {  # nolint: object_name_linter.
  if (is.null(x$rest_fit)) {
    if (!parametric) nce_abort("`parametric = FALSE` needs smooth terms beside mlp()", "input")
    return(tidy.nce_fit(x, conf.int = conf.int, conf.level = conf.level))
  }
  tidy_gam_tables(x, summary.nce_gam(x$rest_fit), parametric, conf.int, conf.level)
}

#' @exportS3Method generics::augment
augment.nce_mlp <- function(x, newdata = NULL,  # nolint: object_name_linter.
                            type.predict = c("link", "response"), ...) {  # nolint: object_name_linter.
  type.predict <- match_choice(type.predict)  # nolint: object_name_linter.
  data <- if (is.null(newdata)) data_rows(x) else newdata
  out <- data
  out$.fitted <- unname(stats::predict(x, data, type = type.predict))
  rownames(out) <- NULL
  nce_as_tibble(out)
}

#' Simulate from an nce fit with a neural-network energy
#'
#' Draws data sets from the fitted density \eqn{\exp\{g(x) + \nu\}} by random-walk Metropolis in
#' Rust (`method = "metropolis"`, the default): `n_chains` chains start at random data points,
#' their proposal scale is tuned in short pilot runs to an acceptance rate between 0.2 and 0.5,
#' and after `burnin` steps every `thin`-th state is kept. The chains stay inside the box spanned
#' by the fit's data and reference points (the network is not fitted beyond them). Chains run in
#' parallel on their own random streams, so the draws do not depend on the number of threads.
#' `method = "sir"` resamples reference draws instead (as [simulate.nce_fit()]), the only method
#' (and the default) when the formula has terms beside `mlp()` or the network does not use every
#' variable of the reference.
#'
#' @inheritParams nce_vocabulary
#' @param nsim Number of data sets (each of the fit's number of data points).
#' @param method `"metropolis"` (the default for a network alone) or `"sir"`.
#' @param n_chains,burnin,thin The chains: how many, steps dropped, and the thinning.
#' @param candidates For `"sir"`: reference draws per simulated point.
#' @return Data frame with the reference's columns and `.sim`; attribute `"acceptance"` (the
#'   chains' acceptance rates) for `"metropolis"`, `"ess"` for `"sir"`.
#' @examples
#' set.seed(1)
#' x <- rnorm(1000)
#' fit <- nce(~ mlp(x, hidden = 16), data.frame(x = x), ref_normal(x = 0, cov = 4), ratio = 5,
#'            control = list(max_epochs = 30))
#' s <- simulate(fit, seed = 2)
#' c(mean(s$x), sd(s$x))   # about 0 and 1
#' @export
simulate.nce_mlp <- function(object, nsim = 1, seed = NULL, method = c("metropolis", "sir"), n_chains = 20L,
                             burnin = 1000L, thin = 10L, candidates = 100, ...) {
  check_proper(object, "simulate()")
  method <- if (missing(method)) {
    if (mlp_alone(object)) "metropolis" else "sir"
  } else {
    check_choice(method, c("metropolis", "sir"), "method")
  }
  net <- object$network
  if (method == "sir") return(simulate.nce_fit(object, nsim = nsim, seed = seed, candidates = candidates))
  check_count(n_chains, "n_chains", max = 10000)
  check_whole(burnin, "burnin", min = 0)
  check_count(thin, "thin", max = 10000)
  if (!mlp_alone(object)) {
    nce_abort(paste("method = \"metropolis\" samples the network alone; with terms beside mlp(), variables",
                    "of the reference outside the network, or `relative = TRUE`, use method = \"sir\""), "input")
  }
  n <- object$n
  check_nsim(nsim, 8 * n * (length(net$inputs) + 1))
  old <- set_sim_seed(seed)
  on.exit(restore_seed(old))
  x <- mlp_draws(object, nsim * n, n_chains, burnin, thin)
  out <- as.data.frame(x)[object$reference$vars]
  out$.sim <- rep(seq_len(nsim), each = n)
  attr(out, "acceptance") <- attr(x, "acceptance")
  out
}

# TRUE when the log density is the network alone (with the intercept) over every variable of the
# reference: the case the Metropolis sampler of the network serves.
mlp_alone <- function(object) {
  !isTRUE(object$relative) && is.null(object$rest_fit) && setequal(object$network$inputs, object$reference$vars) &&
    ncol(stats::model.matrix(object$rest_terms, object$nce_frame[1L, , drop = FALSE])) == 1L
}

# `k` Metropolis draws from the network energy of an nce_mlp fit (columns: its inputs, on the data's
# scale), from `n_chains` chains interleaved, with attribute "acceptance".
mlp_draws <- function(object, k, n_chains = 20L, burnin = 1000L, thin = 10L) {
  net <- object$network
  d <- length(net$inputs)
  steps <- ceiling(k / n_chains) * thin
  # (with the 12 pilot runs of 200 steps below)
  check_chain_work(n_chains, burnin + 12 * 200, steps, c("n_chains", "burnin", "nsim"))
  # The peak, not the result: every step of every chain is held three times (Rust's vector, its R
  # copy, the array) before thinning, and the k kept draws about five times (thinned, interleaved,
  # rescaled, the data frame and its .sim column); counting only the first copy underestimated
  # the peak of simulate(nsim = 1e5) about 20 times (12.3 GB for a 572 MB result).
  check_size(8 * (3 * as.double(steps) * n_chains * d + 5 * as.double(k) * (d + 1)), "nsim", "simulate()")
  all_x <- mlp_inputs(object$nce_frame, net$inputs, net$center, net$scale)
  lower <- apply(all_x, 2L, min)
  upper <- apply(all_x, 2L, max)
  data_x <- all_x[object$nce_frame$.label == 1, , drop = FALSE]
  starts <- data_x[sample.int(nrow(data_x), n_chains, replace = TRUE), , drop = FALSE]
  settings <- list(inputs = d, hidden = net$hidden, activation = net$activation)
  run <- function(scale, steps, burnin, starts) {
    rs(nce_mlp_metropolis(net$params, settings, lower, upper, starts,
                          list(scale = scale, burnin = burnin, steps = steps, seed = draw_seed(),
                               threads = nce_threads())))
  }
  # Pilot runs: scale the proposal until the acceptance rate is in [0.2, 0.5].
  scale <- rep(2.38 / sqrt(d), d)
  for (i in seq_len(12L)) {
    rate <- mean(run(scale, 200, 0, starts)$accepted) / 200
    if (rate >= 0.2 && rate <= 0.5) break
    scale <- scale * (if (rate < 0.2) 0.5 else 1.6)
  }
  res <- run(scale, steps, burnin, starts)
  draws <- array(res$draws, c(steps, n_chains, d))
  keep <- seq(thin, steps, by = thin)
  x <- matrix(draws[keep, , , drop = FALSE], ncol = d)
  # Interleave the chains so any leading block mixes all of them.
  ord <- order(rep(seq_along(keep), n_chains))
  x <- x[ord, , drop = FALSE][seq_len(k), , drop = FALSE]
  x <- sweep(sweep(x, 2L, net$scale, "*"), 2L, net$center, "+")
  colnames(x) <- net$inputs
  attr(x, "acceptance") <- res$accepted / steps
  x
}

#' Plot an nce fit with a neural-network energy
#'
#' One variable: the fitted density over the data's range, with the data's histogram. Two: the
#' fitted density as an image with contours, in the data's range, and the data points. More:
#' the 1-D marginals (diagonal) and 2-D marginals (below it) of draws from the fitted model
#' ([simulate.nce_mlp()]) against the data (above it), for up to `max_vars` variables. With
#' smooth terms beside the network, mgcv's plots of them follow ([plot.nce_gam()], the network
#' held fixed).
#'
#' @inheritParams nce_vocabulary
#' @param n_grid Grid points per axis.
#' @param max_vars Most variables shown in the marginals' grid.
#' @param ... Passed to the plotting functions.
#' @return `x`, invisibly.
#' @export
plot.nce_mlp <- function(x, n_grid = 100L, max_vars = 5L, ...) {
  check_count(n_grid, "n_grid", min = 2, max = 2000)
  check_count(max_vars, "max_vars", min = 2, max = 20)
  vars <- x$network$inputs
  dat <- data_rows(x)
  rng <- lapply(vars, function(v) range(dat[[v]]))
  names(rng) <- vars
  if (length(vars) == 1L) {
    g <- seq(rng[[1]][1], rng[[1]][2], length.out = n_grid)
    nd <- data_rows(x)[rep(1L, n_grid), , drop = FALSE]
    nd[[vars]] <- g
    dens <- stats::predict(x, nd, type = "density")
    graphics::hist(dat[[vars]], breaks = 40, freq = FALSE, main = "Fitted density", xlab = vars,
                   border = "grey70", ylim = c(0, max(dens, na.rm = TRUE) * 1.1), ...)
    graphics::lines(g, dens, lwd = 2)
  } else if (length(vars) == 2L && length(x$reference$vars) == 2L) {
    g1 <- seq(rng[[1]][1], rng[[1]][2], length.out = n_grid)
    g2 <- seq(rng[[2]][1], rng[[2]][2], length.out = n_grid)
    nd <- expand.grid(g1, g2)
    names(nd) <- vars
    z <- matrix(stats::predict(x, nd, type = "density"), n_grid, n_grid)
    graphics::image(g1, g2, z, col = grDevices::hcl.colors(64, "viridis"), xlab = vars[1], ylab = vars[2],
                    main = "Fitted density", ...)
    graphics::contour(g1, g2, z, add = TRUE, drawlabels = FALSE, col = "white")
  } else {
    sims <- simulate(x)
    v <- vars[seq_len(min(length(vars), max_vars))]
    k <- length(v)
    op <- graphics::par(mfrow = c(k, k), mar = c(2, 2, 1, 1))
    on.exit(graphics::par(op))
    for (i in seq_len(k)) for (j in seq_len(k)) {
      if (i == j) {
        dm <- stats::density(sims[[v[i]]])
        dd <- stats::density(dat[[v[i]]])
        graphics::plot(dm, main = v[i], ylim = c(0, max(dm$y, dd$y)), lwd = 2, xlab = "", ...)
        graphics::lines(dd, lty = 2)
      } else {
        src <- if (i > j) sims else dat
        graphics::plot(src[[v[j]]], src[[v[i]]], pch = ".", col = if (i > j) "black" else "grey40",
                       xlab = "", ylab = "", main = if (i > j) "model" else "data", ...)
      }
    }
    graphics::par(op)  # the smooth terms' plots below get the user's layout back
  }
  if (!is.null(x$rest_fit)) plot.nce_gam(x$rest_fit, ...)
  invisible(x)
}
