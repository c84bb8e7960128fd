#' Plot an nce fit
#'
#' For a model in one numeric variable: the fitted (normalised) density with a
#' pointwise confidence band over a histogram of the data. With several
#' variables: the fitted log density along each numeric variable, the others
#' held at the data's medians.
#'
#' @param x An `nce_fit`.
#' @param n_grid Grid points per curve.
#' @param level Confidence level of the band.
#' @param ... Passed to [graphics::plot()].
#' @return `x`, invisibly.
#' @examples
#' set.seed(1)
#' df <- data.frame(y = log1p(runif(500) * (exp(2) - 1)) / 2)
#' plot(nce(~ y, df, ref_uniform(y = c(0, 1))))
#' @export
plot.nce_fit <- function(x, n_grid = 200, level = 0.95, ...) {
  check_count(n_grid, "n_grid", min = 2, max = 1e6)
  check_probability(level, "level")
  data <- data_rows(x)
  vars <- names(data)[vapply(data, is.numeric, TRUE)]
  if (!length(vars)) nce_abort("plot() needs at least one numeric variable in the model", "input")
  z <- stats::qnorm(1 - (1 - level) / 2)
  one_d <- length(x$reference$vars) == 1L
  if (!one_d) {
    old <- graphics::par(mfrow = grDevices::n2mfrow(length(vars)))
    on.exit(graphics::par(old))
  }
  for (v in vars) {
    grid_v <- plot_range(x$reference, data[[v]], v, n_grid)
    newdata <- as.data.frame(lapply(data, function(col) {
      rep(if (is.numeric(col)) stats::median(col) else col[1L], n_grid)
    }))
    newdata[[v]] <- grid_v
    p <- predict(x, newdata, type = if (one_d) "density" else "log_density", se.fit = TRUE)
    lo <- if (one_d) exp(log(p$fit) - z * p$se.fit / p$fit) else p$fit - z * p$se.fit
    hi <- if (one_d) exp(log(p$fit) + z * p$se.fit / p$fit) else p$fit + z * p$se.fit
    if (one_d) {
      h <- graphics::hist(data[[v]], plot = FALSE, breaks = "FD")
      graphics::plot(h, freq = FALSE, col = "grey90", border = "white", main = "", xlab = v,
                     ylim = c(0, max(hi, h$density)), xlim = range(grid_v), ...)
    } else {
      graphics::plot(grid_v, p$fit, type = "n", ylim = range(lo, hi), xlab = v,
                     ylab = "log density (others at medians)", ...)
    }
    graphics::polygon(c(grid_v, rev(grid_v)), c(lo, rev(hi)),
                      col = grDevices::adjustcolor("steelblue", 0.3), border = NA)
    graphics::lines(grid_v, p$fit, col = "steelblue", lwd = 2)
    graphics::rug(data[[v]], col = "grey50")
  }
  invisible(x)
}

# Grid over a uniform reference's box, else the data's range padded by 10%.
plot_range <- function(ref, values, v, n) {
  if (identical(ref$kind, "uniform")) {
    j <- match(v, ref$vars)
    return(seq(ref$lower[j], ref$upper[j], length.out = n))
  }
  r <- range(values)
  pad <- 0.1 * diff(r)
  seq(r[1] - pad, r[2] + pad, length.out = n)
}
