# Speed of nonlinear NCE on the ICA model at N = 1000, ratio 10 (11,000 rows, 17 parameters), in
# CPU time (user + system of this process, so a machine shared with other jobs inflates it less
# than wall time). Rscript bench/ica-speed.R [fits] [threads]   (R_LIBS pointing at the package)
# 1. The built-in Rust model: one start per fit, `fits` data sets; the whole nce() call (reference
#    draws, set-up, fit, sandwich), and the Rust fit alone as reported by the fit's start table.
# 2. The R-callback route (the same model written as R functions, nce_model()): CPU time of the
#    whole fit against the CPU time spent inside the user's two R functions.
# The Rust-only CPU time of one fit is also measured without R by
#   cargo run --release -p nce-core --example bench_ica [fits] [threads]
suppressMessages(library(nce))
args <- commandArgs(trailingOnly = TRUE)
fits <- if (length(args) >= 1) as.integer(args[1]) else 40L
threads <- if (length(args) >= 2) as.integer(args[2]) else 1L
options(nce.threads = threads)
d <- 4
cpu <- function(expr) {
  t <- system.time(expr)
  t[["user.self"]] + t[["sys.self"]]
}
set.seed(3)
one <- function() {
  repeat {
    A <- matrix(rnorm(16), 4)
    if (kappa(A) < 50) break
  }
  x <- rica(1000, A)
  ref <- do.call(ref_normal, c(as.list(stats::setNames(rep(0, d), names(x))), list(cov = A %*% t(A))))
  fit <- NULL
  t <- cpu(fit <- nce(model = ica_model(), data = x, reference = ref, ratio = 10))
  c(cpu = t, evaluations = fit$start_table$evaluations[1], iterations = fit$start_table$iterations[1])
}
invisible(one()) # warm-up
res <- t(replicate(fits, one()))
q <- stats::quantile(1000 * res[, "cpu"], c(0.25, 0.5, 0.75))
cat(sprintf(paste("Rust ICA via nce(), N = 1000, ratio 10, one start, %d fits, options(nce.threads = %d):",
                  "CPU median %.0f ms (quartiles %.0f, %.0f); evaluations median %.0f, iterations %.0f\n"),
            fits, threads, q[2], q[1], q[3], stats::median(res[, "evaluations"]), stats::median(res[, "iterations"])))

# R-callback route, started at the MLE (as a user with a good start would).
set.seed(3)
A <- matrix(rnorm(16), 4)
x <- rica(1000, A)
ref <- do.call(ref_normal, c(as.list(stats::setNames(rep(0, d), names(x))), list(cov = A %*% t(A))))
im <- ica_model()
spent <- 0
calls <- 0
timed <- function(f) {
  force(f)
  function(theta, data) {
    t1 <- proc.time()
    on.exit({
      t2 <- proc.time() - t1
      spent <<- spent + t2[["user.self"]] + t2[["sys.self"]]
      calls <<- calls + 1
    })
    f(theta, data)
  }
}
mle <- ica_mle(x)
st <- stats::setNames(as.double(t(mle$B)), sprintf("B[%d,%d]", rep(1:4, each = 4), rep(1:4, 4)))
total <- cpu(fr <- suppressWarnings(nce(model = nce_model(timed(im$log_f), timed(im$gradient)), data = x,
                                        reference = ref, ratio = 10, start = st)))
cat(sprintf(paste("R-callback route: %.2f s CPU in total, %.2f s in the user's R functions (%d calls,",
                  "%d evaluations): ratio %.2f\n"),
            total, spent, calls, fr$start_table$evaluations[1], total / spent))
