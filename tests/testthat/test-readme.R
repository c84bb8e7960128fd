# Every ```r block of README.md runs as written, each in a fresh environment after set.seed(1);
# a block right after a line `<!-- norun -->` is skipped. README.md is not installed with the
# package, so the test runs from a checkout: `make readme-test` sets NCE_README to its path, and
# testthat::test_dir() from the checkout finds it two levels up. Inside R CMD check it skips.

readme_path <- function() {
  path <- Sys.getenv("NCE_README", "")
  if (!nzchar(path)) path <- file.path(testthat::test_path(), "..", "..", "README.md")
  if (!file.exists(path)) return(NULL)
  if (!grepl("^# nce:", readLines(path, n = 1L, warn = FALSE))) return(NULL)  # another package's README
  normalizePath(path)
}

# The R blocks of a markdown file: a list of character vectors, each with attributes `line` (the
# line of its opening fence) and `run` (FALSE when the previous non-blank line is the norun marker).
readme_blocks <- function(path) {
  lines <- readLines(path, warn = FALSE)
  open <- grep("^```\\{?[rR]([ ,}].*)?$", lines)
  close <- grep("^```\\s*$", lines)
  lapply(open, function(o) {
    end <- close[close > o][1L]
    if (is.na(end)) stop("README.md: the ```r block at line ", o, " is not closed")
    before <- lines[seq_len(o - 1L)]
    before <- before[nzchar(trimws(before))]
    marked <- length(before) > 0L && trimws(before[length(before)]) == "<!-- norun -->"
    structure(lines[seq_len(end - o - 1L) + o], line = o, run = !marked)
  })
}

run_block <- function(code) {
  env <- new.env(parent = globalenv())
  set.seed(1)
  eval(parse(text = code, keep.source = FALSE), envir = env)
  env
}

test_that("every R block of README.md runs", {
  path <- readme_path()
  skip_if(is.null(path), "README.md not found (runs from a checkout: make readme-test)")
  blocks <- readme_blocks(path)
  expect_gte(length(blocks), 7L)
  runnable <- vapply(blocks, attr, logical(1), "run")
  expect_lte(sum(!runnable), 2L)  # skipped blocks are the exception
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  old <- options(nce.threads = 2L)
  on.exit(options(old), add = TRUE)
  envs <- list()
  for (i in which(runnable)) {
    b <- blocks[[i]]
    envs[[i]] <- tryCatch({
      env <- NULL
      utils::capture.output(env <- suppressMessages(run_block(b)))
      env
    }, error = function(e) {
      stop("README.md block at line ", attr(b, "line"), ": ", conditionMessage(e), call. = FALSE)
    })
  }

  # The first fit recovers its known answer: theta = 2 and the intercept -log Z.
  first <- envs[[1L]]
  expect_true(is.environment(first) && exists("fit", first, inherits = FALSE))
  cf <- coef(first$fit)
  se <- sqrt(diag(vcov(first$fit)))
  truth <- c(-log(expm1(2) / 2), 2)
  expect_true(all(abs(cf - truth) < 4 * se), info = paste(format(cf), collapse = ", "))
})
