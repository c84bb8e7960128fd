# Build the pkgdown site into docs/ (`make site`), offline, from the package installed in R_LIBS.
# Fails when an example or an article fails: articles stop on errors (knitr), and examples, which
# pkgdown 2.0.7 evaluates without stopping, are checked for error output afterwards.
options(nce.threads = 2L, pkgdown.internet = FALSE)  # no asking CRAN whether the package is there
pkg <- pkgdown::as_pkgdown(".")

# Every exported topic that no section of _pkgdown.yml selects goes to an "Other topics" section,
# so that new functions never break the build; they are listed so that they get a section.
reference <- pkg$meta$reference
topics <- pkg$topics
selected <- unique(unlist(lapply(reference, function(s) pkgdown:::select_topics(s$contents, topics))))
other <- setdiff(which(!topics$internal), selected)
if (length(other)) {
  message("site: in no reference section of _pkgdown.yml (shown under 'Other topics'): ",
          paste(topics$name[other], collapse = ", "))
  reference <- c(reference, list(list(title = "Other topics", contents = as.list(topics$name[other]))))
}

pkgdown::build_site(".", override = list(reference = reference), devel = FALSE, preview = FALSE,
                    new_process = FALSE, install = FALSE)

# The home page is README.md, whose links to vignettes/<name>.Rmd are right on GitHub: on the site
# they point at the articles.
index <- file.path("docs", "index.html")
html <- readLines(index, warn = FALSE)
writeLines(gsub("href=\"vignettes/([A-Za-z0-9_-]+)[.]Rmd\"", "href=\"articles/\\1.html\"", html), index)

# MathJax from Debian's libjs-mathjax: only what the TeX-AMS_CHTML configuration loads.
mj_src <- "/usr/share/javascript/mathjax"
if (!file.exists(file.path(mj_src, "MathJax.js"))) {
  stop("site: MathJax not found in ", mj_src, " (Debian package libjs-mathjax)")
}
mj <- file.path("docs", "mathjax")
unlink(mj, recursive = TRUE)
for (part in c("MathJax.js", "config/TeX-AMS_CHTML.js", "extensions", "jax/input/TeX", "jax/element",
               "jax/output/CommonHTML", "fonts/HTML-CSS/TeX/woff")) {
  to <- file.path(mj, dirname(part))
  dir.create(to, recursive = TRUE, showWarnings = FALSE)
  file.copy(file.path(mj_src, part), to, recursive = TRUE)
}

# pkgdown shows a failing example as output with class r-err instead of stopping.
pages <- list.files("docs/reference", pattern = "[.]html$", full.names = TRUE)
bad <- pages[vapply(pages, function(p) any(grepl("r-err", readLines(p, warn = FALSE), fixed = TRUE)),
                    logical(1))]
if (length(bad)) stop("site: examples fail in ", paste(basename(bad), collapse = ", "))
remote <- list.files("docs", pattern = "[.]html$", recursive = TRUE, full.names = TRUE)
cdn <- remote[vapply(remote, function(p) any(grepl("<(script|link)[^>]+(src|href)=\"https?://",
                                                     readLines(p, warn = FALSE))), logical(1))]
if (length(cdn)) stop("site: pages load remote scripts or styles: ", paste(cdn, collapse = ", "))
message("site: docs/index.html")
