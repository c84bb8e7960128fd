# Test coverage of the R code (`make coverage`): covr installs an instrumented copy of the package,
# runs tests/testthat, and writes coverage/ (an HTML report when DT is installed, the covr object,
# and a per-file summary). The Rust core: `make coverage-rust` (tools/rust-coverage.sh).
options(nce.threads = 2L)
Sys.setenv(NOT_CRAN = "true")
# The tests run through testthat without stopping at failures, so that a failing test (or one
# waiting for another branch) does not throw the whole measurement away; failures are reported.
cov <- covr::package_coverage(".", type = "none", quiet = TRUE, code = c(
  "library(testthat); library(nce)",
  "r <- as.data.frame(testthat::test_dir('tests/testthat', package = 'nce', load_package = 'installed',",
  "                                      stop_on_failure = FALSE, reporter = 'summary'))",
  "cat(sprintf('coverage tests: %d failed, %d passed\\n', sum(r$failed), sum(r$passed)))"))
dir.create("coverage", showWarnings = FALSE)
saveRDS(cov, "coverage/covr.rds")

d <- as.data.frame(cov)
d <- d[startsWith(d$filename, "R/") & d$filename != "R/extendr-wrappers.R", ]
lines <- aggregate(value ~ filename + first_line, d, max)   # covr counts a line once
by_file <- aggregate(value ~ filename, lines, function(v) 100 * mean(v > 0))
names(by_file)[2] <- "percent"
by_file$lines <- as.vector(table(lines$filename)[by_file$filename])
total <- 100 * mean(lines$value > 0)
summary_lines <- c(sprintf("R code coverage (tests/testthat, R/ without the generated extendr wrappers): %.1f%% of %d lines",
                           total, nrow(lines)),
                   sprintf("  %-28s %5.1f%% of %4d lines", by_file$filename, by_file$percent, by_file$lines))
writeLines(summary_lines, "coverage/summary.txt")
writeLines(summary_lines)
if (requireNamespace("DT", quietly = TRUE) && requireNamespace("htmltools", quietly = TRUE)) {
  covr::report(cov, file = file.path(getwd(), "coverage", "index.html"), browse = FALSE)
}
