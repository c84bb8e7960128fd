# Gate of `make lint-r` (issue #30): no function in R/ longer than 100 lines (roxygen excluded,
# the definition from `name <- function(` to its closing brace), and no name defined twice at the
# top level (the file collated later would replace the other silently). Prints the longest and
# fails on any over the limit or defined twice.
limit <- 100L
rows <- list()
for (f in list.files("R", pattern = "[.]R$", full.names = TRUE)) {
  ex <- parse(f, keep.source = TRUE)
  refs <- attr(ex, "srcref")
  for (i in seq_along(ex)) {
    e <- ex[[i]]
    if (is.call(e) && as.character(e[[1L]]) %in% c("<-", "=") && is.call(e[[3L]]) &&
        identical(e[[3L]][[1L]], as.name("function"))) {
      rows[[length(rows) + 1L]] <- data.frame(file = f, fn = deparse(e[[2L]])[1L],
                                              lines = refs[[i]][3L] - refs[[i]][1L] + 1L)
    }
  }
}
d <- do.call(rbind, rows)
d <- d[order(-d$lines), ]
over <- d[d$lines > limit, ]
cat(sprintf("%d functions in R/; longest: %s\n", nrow(d),
            paste(sprintf("%s (%s, %d lines)", d$fn[1:3], d$file[1:3], d$lines[1:3]), collapse = ", ")))
if (nrow(over)) {
  print(over, row.names = FALSE)
  stop(sprintf("%d function(s) in R/ over %d lines", nrow(over), limit), call. = FALSE)
}
twice <- d[d$fn %in% d$fn[duplicated(d$fn)], ]
if (nrow(twice)) {
  print(twice[order(twice$fn), ], row.names = FALSE)
  stop(sprintf("%d function name(s) defined more than once in R/", length(unique(twice$fn))), call. = FALSE)
}
