# A user interrupt (SIGINT, as Ctrl-C sends) at any moment of a long fit must reach R as the
# `interrupt` condition. The Rust side polls R for it and takes it; it used to be lost when the
# work finished after the poll took it. A child R process fits while the test signals it.

interrupt_child <- function(delay, dir) {
  pid_file <- file.path(dir, sprintf("pid-%g", delay))
  out_file <- file.path(dir, sprintf("out-%g", delay))
  script <- file.path(dir, sprintf("child-%g.R", delay))
  writeLines(c(
    "library(nce)",
    "set.seed(1)",
    "screen <- c(0, 1024, 0, 768)",
    "fix <- rlatkes(10000, list(radius = function(r) -r / 200, dist = function(d) -d / 120), window = screen,",
    "               n_trials = 20)",
    sprintf("writeLines(as.character(Sys.getpid()), %s)", deparse(pid_file)),
    "r <- tryCatch({latkes(fix, group = 'trial', window = screen, ratio = 30); 'FITTED'},",
    "              interrupt = function(i) 'INTERRUPT')",
    # After the fit, a signal that came late is caught here; one that the fit swallowed is not.
    "r2 <- tryCatch({Sys.sleep(3); 'SLEPT'}, interrupt = function(i) 'LATE')",
    sprintf("writeLines(c(r, r2), %s)", deparse(out_file))), script)
  env <- paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep))
  system2(file.path(R.home("bin"), "Rscript"), script, env = env, wait = FALSE, stdout = FALSE, stderr = FALSE)
  t0 <- Sys.time()
  while (!file.exists(pid_file) && Sys.time() - t0 < 60) Sys.sleep(0.02)
  Sys.sleep(0.05)
  pid <- as.integer(readLines(pid_file))
  Sys.sleep(delay)
  tools::pskill(pid, tools::SIGINT)
  while (!file.exists(out_file) && Sys.time() - t0 < 90) Sys.sleep(0.05)
  Sys.sleep(0.05)
  readLines(out_file)
}

test_that("an interrupt at any moment of a latkes() fit reaches R as an interrupt", {
  skip_on_cran()
  skip_on_os("windows")
  dir <- tempfile("interrupt")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE))
  delays <- c(0.01, 0.3, 0.7, 1.1, 1.6, 2.1)
  out <- lapply(delays, interrupt_child, dir = dir)
  # Every signal is seen: during the fit ("INTERRUPT") or, when the fit was over, after it ("LATE").
  lost <- vapply(out, function(o) identical(o, c("FITTED", "SLEPT")), TRUE)
  expect_false(any(lost), info = paste(vapply(out, paste, "", collapse = "/"), collapse = ", "))
  expect_gte(sum(vapply(out, function(o) identical(o[1], "INTERRUPT"), TRUE)), 4L)
})
