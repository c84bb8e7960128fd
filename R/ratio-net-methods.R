# Methods of the network ratio classifier (ratio_amortised(classifier = "mlp"), class
# nce_ratio_mlp under nce_ratio): the log ratio is the networks' mean logit (their losses make the
# logit the log ratio itself). What needs the GAM (coefficients, covariance, model matrix, smooth
# terms) is not defined here, so the base class refuses it, saying why (refusal_reasons in
# result.R). Documented in ?nce_ratio_methods (ratio-methods.R).

#' @rdname nce_ratio_methods
#' @export
predict.nce_ratio_mlp <- function(object, newdata = NULL, type = c("link", "response", "lpmatrix"),
                                  se.fit = FALSE, ...) {  # nolint: object_name_linter.
  type <- check_choice(type, c("link", "response", "lpmatrix"), "type")
  check_bool(se.fit, "se.fit")
  if (type == "lpmatrix") refuse("predict(type = \"lpmatrix\")", object)
  if (se.fit) refuse("predict(se.fit = TRUE)", object)
  nd <- ratio_newdata(object, newdata)
  out <- rep(NA_real_, nrow(nd))
  ok <- which(rows_finite(nd[c(object$parameters, object$summary_names)]))
  if (length(ok)) {
    rows <- nd[ok, , drop = FALSE]
    out[ok] <- ratio_net_log_ratio(object, rows, rows)
  }
  if (type == "link") out else exp(out)
}

#' @rdname nce_ratio_methods
#' @export
model.frame.nce_ratio_mlp <- function(formula, ...) formula$pairs

#' @rdname nce_ratio_methods
#' @export
logLik.nce_ratio_mlp <- function(object, newdata = NULL, ...) {
  # The classification's Bernoulli log-likelihood on the joint pairs and one shuffle of them; df
  # counts every parameter of every network (an upper bound on the effective number).
  df <- ensemble_n_params(object$networks)
  if (!is.null(newdata)) return(ratio_held_out_loglik(object, newdata, df))
  p <- object$fitted.values
  y <- object$pairs$y
  structure(sum(stats::dbinom(y, 1, p, log = TRUE)), df = df, nobs = nrow(object$pairs), class = "logLik")
}

#' @rdname tidy.nce_ratio
#' @exportS3Method generics::glance
glance.nce_ratio_mlp <- function(x, ...) {  # nolint: object_name_linter.
  cbind(NextMethod(), n_networks = length(x$networks), held_out_loss = mean(held_out_losses(x)))
}

held_out_losses <- function(x) vapply(x$training, function(t) t$held_out_loss, 0)

ensemble_n_params <- function(networks) sum(vapply(networks, function(net) net$n_params, 0))

ratio_classifier_lines.nce_ratio_mlp <- function(x) {  # nolint: object_name_linter.
  loss <- switch(x$loss, nrec = "contrastive (NRE-C)", nre = "binary (NRE)", bnre = "balanced binary (BNRE)")
  k <- length(x$networks)
  epochs <- vapply(x$training, function(t) as.integer(t$best_epoch), 0L)
  loss_h <- held_out_losses(x)
  capped <- epochs >= x$control$max_epochs
  c(sprintf("Classifier: neural network, %s loss, %d other parameter draw(s) per joint pair", loss, x$n_shuffle),
    if (!is.null(x$embedding)) {
      emb <- utils::capture.output(print(x$embedding))
      c(sprintf("  %s columns read through the embedding: %s", length(x$scaling$embedded), emb[1L]), emb[-1L])
    },
    sprintf("%s: ReLU, hidden layers %s, %d parameters%s",
            if (k == 1L) "Network" else sprintf("Ensemble of %d networks, log ratios averaged", k),
            paste(x$hidden, collapse = "-"), x$networks[[1L]]$n_params, if (k > 1L) " each" else ""),
    sprintf("Best epoch%s %s; held-out loss %s", if (k > 1L) "s" else "", paste(epochs, collapse = ", "),
            if (k > 1L) sprintf("%.5f (mean; %.5f-%.5f)", mean(loss_h), min(loss_h), max(loss_h)) else
              sprintf("%.5f", loss_h)),
    if (any(capped)) {
      sprintf("%d network(s) still improving at max_epochs = %d: consider more epochs", sum(capped),
              as.integer(x$control$max_epochs))
    })
}
