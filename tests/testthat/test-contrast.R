# contrast(): the one contrast step of nce(), nce(given =), nonlinear nce() and snce()/latkes().

test_that("contrast() stacks data and reference rows with labels and offsets", {
  ref <- ref_uniform(y = c(0, 2))
  d <- data.frame(y = c(0.5, 1, 1.5))
  set.seed(1)
  con <- nce:::contrast(d, ref, ratio = 2.5)
  set.seed(1)
  u <- nce:::ref_draw(ref, 8L)
  expect_identical(con$rows, rbind(d, u))
  expect_identical(con$y, rep(c(1, 0), c(3, 8)))
  expect_identical(c(con$n_data, con$n_ref), c(3L, 8L))
  expect_equal(con$offset, log(3 / 8) - rep(-log(2), 11))
  expect_identical(con$lq_ref, nce:::ref_logq(ref, u))
  expect_null(con$lq)
  expect_null(con$of)
  # weights and the Poisson transform
  set.seed(1)
  pw <- nce:::contrast(d, ref, ratio = 2.5, weight_total = 6, method = "poisson")
  expect_identical(pw$offset[1:3], c(0, 0, 0))
  expect_equal(pw$offset[-(1:3)], rep(log(6 / 8) + log(2), 8))
})

test_that("paired contrast copies each data row's other columns into its reference rows", {
  ref <- ref_uniform(y = c(0, 1))
  d <- data.frame(y = c(0.2, 0.7), z = factor(c("a", "b")))
  set.seed(2)
  con <- nce:::contrast(d, ref, ratio = 3L, paired = TRUE)
  expect_identical(con$of, rep(1:2, each = 3))
  expect_identical(as.character(con$rows$z), c("a", "b", rep(c("a", "b"), each = 3)))
  expect_identical(con$offset, log(1 / 3) - c(con$lq_data, con$lq_ref))
  # a transition kernel draws at the previous states
  k <- kernel_normal(c(y = 0.1), window = list(y = c(0, 1)))
  prev <- data.frame(y = c(0.3, 0.6))
  set.seed(3)
  ck <- nce:::contrast(d, k, ratio = 2L, paired = TRUE, prev = prev, transform = function(x) {
    x$y2 <- x$y^2
    x
  })
  expect_identical(ck$rows$y2, ck$rows$y^2)
  expect_identical(ck$data$y2, d$y^2)
  expect_true(all(is.finite(ck$lq)))
})

test_that("contrast() refuses, with the argument named, before drawing", {
  ref <- ref_uniform(y = c(0, 1))
  d <- data.frame(y = c(0.5, 2, 3))
  expect_error(nce:::contrast(d, ref, 2), "2 data point\\(s\\) lie outside.*rows 2, 3", class = "nce_error_support")
  expect_error(nce:::contrast(d[1, , drop = FALSE], ref, 0.1), "gives no reference points", class = "nce_error_input")
  expect_error(nce:::contrast(d, ref, 1e12), "R's limit", class = "nce_error_size")
  old <- options(nce.max_memory = 1e3)
  on.exit(options(old))
  dd <- data.frame(y = runif(50))
  seed <- .Random.seed
  expect_error(nce:::contrast(dd, ref, 5), "`ratio`", class = "nce_error_size")
  expect_identical(.Random.seed, seed)  # refused before any draw
  # the fits share it: the same refusal from each
  expect_error(nce(~ y, dd, ref, ratio = 5), class = "nce_error_size")
  expect_error(snce(~ I(y * y_prev), dd, ref, ratio = 5), class = "nce_error_size")
})

test_that("built-in references draw and score in one pass: the same draws and log densities", {
  refs <- list(ref_uniform(u = c(-1, 2), v = c(0, 5)),
               ref_normal(u = 0.5, v = -1, cov = matrix(c(2, 0.6, 0.6, 1), 2)))
  for (ref in refs) {
    set.seed(4)
    one <- nce:::ref_draw_logq(ref, 1000)
    next_one <- stats::runif(1)
    set.seed(4)
    u <- nce:::ref_draw(ref, 1000)
    expect_identical(one$draws, u)
    expect_identical(one$logq, nce:::ref_logq(ref, u))
    expect_identical(next_one, stats::runif(1))  # the RNG stream goes on as after ref_draw()
  }
  # closed form of the uniform's log density; no draws
  expect_equal(nce:::ref_draw_logq(refs[[1]], 3)$logq, rep(-log(15), 3))
  expect_identical(nrow(nce:::ref_draw_logq(refs[[1]], 0)$draws), 0L)
})

test_that("reserve_heap() grows R's vector heap at once, touches no memory, and never fails loudly", {
  bytes <- function(col) 8 * gc(verbose = FALSE)["Vcells", col]  # R counts vector cells of 8 bytes
  # 256 MB more than R holds now: R grows its collection trigger past it in one step
  want <- bytes("used") + 2^28
  rss <- function() {
    if (!file.exists("/proc/self/status")) return(NA_real_)
    line <- grep("^VmRSS:", readLines("/proc/self/status"), value = TRUE)
    as.numeric(gsub("[^0-9]", "", line)) * 1024
  }
  rss0 <- rss()
  expect_identical(nce:::nce_heap_reserve(want), 1L)  # 1 allocated, 0 refused, -1 interrupted
  expect_gt(bytes("gc trigger"), want)
  if (!is.na(rss0)) expect_lt(rss() - rss0, 2^26)  # the 256 MB were never written
  # what R cannot allocate (beyond any address space) is refused quietly, the session goes on
  expect_silent(expect_identical(nce:::nce_heap_reserve(1e18), 0L))
  for (bad in list(NaN, -1, Inf, 0)) expect_identical(nce:::nce_heap_reserve(bad), 0L)
  # the fits' helper: nothing below 64 MB, and at most 512 MB, for which R then holds room
  # beyond what is live. After a full collection nothing is garbage, so R's trigger (which a
  # young collection does not move) must cover the live data read then plus the request, less
  # the few KB the calls in between leave. In whole-suite runs the room has come out 9.5-9.6 MB
  # short of that (twice, on different days): R sizes its trigger from what is live when the
  # request is made, and testthat's own objects between the two readings move it. The bound
  # allows 16 MB of that drift, 3% of the request; a request not reserved at all misses by 512 MB.
  expect_identical(nce:::reserve_heap(6e7), 0)
  live <- gc(verbose = FALSE)["Vcells", "used"]
  expect_identical(nce:::reserve_heap(1e12), 2^29)
  young <- gc(verbose = FALSE, full = FALSE)["Vcells", ]
  expect_gte(8 * young[["gc trigger"]], 8 * live + 2^29 - 2^24)
})
