# LATKES-like benchmark data: fixation sequences on a 1024 x 768 screen whose transition
# kernel has a centrality bias, a saccade-length effect and a cardinal-direction preference,
# each transition contrasted with `ratio` uniform reference points (sequential NCE).
# Steps are drawn by sampling-importance-resampling from 400 uniform candidates.

bench_kernel <- function(x, y, x_prev, y_prev) {
  radius <- sqrt((x - 512)^2 + (y - 384)^2)
  dist <- sqrt((x - x_prev)^2 + (y - y_prev)^2)
  angle <- atan2(y - y_prev, x - x_prev)
  -radius^2 / (2 * 300^2) + log(pmax(dist, 1e-3)) - dist / 80 + 0.8 * cos(4 * angle)
}

simulate_subject <- function(n_trans, ratio = 20, subject = 1L, candidates = 400L) {
  xs <- numeric(n_trans + 1L)
  ys <- numeric(n_trans + 1L)
  xs[1] <- runif(1, 0, 1024)
  ys[1] <- runif(1, 0, 768)
  for (t in seq_len(n_trans)) {
    cx <- runif(candidates, 0, 1024)
    cy <- runif(candidates, 0, 768)
    lw <- bench_kernel(cx, cy, xs[t], ys[t])
    k <- sample.int(candidates, 1L, prob = exp(lw - max(lw)))
    xs[t + 1L] <- cx[k]
    ys[t + 1L] <- cy[k]
  }
  tr <- seq_len(n_trans)
  rows <- data.frame(
    t = c(tr, rep(tr, each = ratio)),
    x = c(xs[-1], runif(n_trans * ratio, 0, 1024)),
    y = c(ys[-1], runif(n_trans * ratio, 0, 768)),
    .label = rep(c(1, 0), c(n_trans, n_trans * ratio))
  )
  rows$x_prev <- xs[rows$t]
  rows$y_prev <- ys[rows$t]
  rows$dist <- sqrt((rows$x - rows$x_prev)^2 + (rows$y - rows$y_prev)^2)
  rows$angle <- atan2(rows$y - rows$y_prev, rows$x - rows$x_prev)
  rows$radius <- sqrt((rows$x - 512)^2 + (rows$y - 384)^2)
  # log(n/m) - log q with q uniform on the screen
  rows$.offset <- log(1 / ratio) + log(1024 * 768)
  rows$subject <- subject
  list(rows = rows, groups = data.frame(x_prev = xs[tr], y_prev = ys[tr], subject = subject))
}

# `n_subjects` pooled: transition ids made unique across subjects.
simulate_bench <- function(n_subjects = 1L, n_trans = 2000L, ratio = 20, seed = 1L) {
  set.seed(seed)
  parts <- lapply(seq_len(n_subjects), function(s) simulate_subject(n_trans, ratio, s))
  rows <- do.call(rbind, lapply(seq_along(parts), function(s) {
    r <- parts[[s]]$rows
    r$t <- r$t + (s - 1L) * n_trans
    r
  }))
  groups <- do.call(rbind, lapply(parts, `[[`, "groups"))
  # rows sorted by transition, so each transition's rows are contiguous
  rows <- rows[order(rows$t, -rows$.label), ]
  rownames(rows) <- NULL
  list(rows = rows, groups = groups)
}

bench_knots <- list(angle = c(-pi, pi))
bench_row_formula <- ~ s(radius, bs = "cr", k = 10) + s(dist, bs = "cr", k = 10) + s(angle, bs = "cc", k = 10)
bench_group_formula <- ~ te(x_prev, y_prev, k = 5)
bench_gam_formula <- .label ~ s(radius, bs = "cr", k = 10) + s(dist, bs = "cr", k = 10) +
  s(angle, bs = "cc", k = 10) + te(x_prev, y_prev, k = 5)
