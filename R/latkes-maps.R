# Spatial covariates for LATKES: maps (saliency maps, images) over the window, looked up at
# the fixations and reference points by bilinear interpolation in Rust (nce-core spatial.rs).

# Checks `maps` and returns one entry per map feature: `mats`, a list of double matrices, and
# `per_image`, whether they are chosen per row by the `map_by` column (their names are the
# image ids). `data`, when given, is checked for the `map_by` column and its ids.
latkes_maps <- function(maps, map_by, data = NULL) {
  if (is.null(maps)) {
    if (!is.null(map_by)) nce_abort("`map_by` is given but `maps` is not", "input")
    return(NULL)
  }
  if (!is.list(maps) || is.data.frame(maps) || !length(maps) || is.null(names(maps)) ||
      any(!nzchar(names(maps))) || anyDuplicated(names(maps))) {
    nce_abort("`maps` must be a named list, e.g. list(saliency = M), with one distinct name per map feature", "input")
  }
  bad <- intersect(names(maps), c("x", "y", "x_prev", "y_prev", latkes_feature_names))
  if (length(bad)) {
    nce_abort(sprintf("map name(s) %s are names of coordinates or built-in features", paste(bad, collapse = ", ")),
              "input")
  }
  out <- lapply(names(maps), function(nm) {
    m <- maps[[nm]]
    if (is.list(m) && !is.data.frame(m)) {
      if (!length(m) || is.null(names(m)) || any(!nzchar(names(m))) || anyDuplicated(names(m))) {
        nce_abort(sprintf("`maps$%s` must be a matrix or a list of matrices named by image id", nm), "input")
      }
      mats <- lapply(names(m), function(id) as_map_matrix(m[[id]], sprintf("maps$%s[[\"%s\"]]", nm, id)))
      names(mats) <- names(m)
      list(mats = mats, per_image = TRUE)
    } else {
      list(mats = list(as_map_matrix(m, sprintf("maps$%s", nm))), per_image = FALSE)
    }
  })
  names(out) <- names(maps)
  if (any(vapply(out, `[[`, TRUE, "per_image"))) {
    if (!is.character(map_by) || length(map_by) != 1L) {
      nce_abort("`maps` holds lists of maps per image: `map_by` must name the column of `data` that chooses the map",
                "input")
    }
    if (!is.null(data)) {
      if (!map_by %in% names(data)) nce_abort(sprintf("`map_by` column %s is not in `data`", map_by), "input")
      for (nm in names(out)) map_index(out[[nm]], nm, data[[map_by]], map_by)
    }
  } else if (!is.null(map_by)) {
    nce_abort("`map_by` is given but every map in `maps` is a single matrix", "input")
  }
  out
}

# A map as a double matrix: a numeric matrix, or an array from png::readPNG() (h x w, or
# h x w x channels, turned into luminance; alpha is ignored).
as_map_matrix <- function(m, what) {
  if (!is.numeric(m) || !is.array(m) || !length(dim(m)) %in% 2:3) {
    nce_abort(sprintf("%s must be a numeric matrix or an image array (h x w or h x w x channels)", what), "input")
  }
  d <- dim(m)
  if (length(d) == 3L) {
    m <- switch(as.character(d[3]),
      "1" = , "2" = m[, , 1],
      "3" = , "4" = 0.2126 * m[, , 1] + 0.7152 * m[, , 2] + 0.0722 * m[, , 3],
      nce_abort(sprintf("%s has %d channels; an image has 1 to 4", what, d[3]), "input"))
    dim(m) <- d[1:2]
  }
  if (any(dim(m) < 1L)) nce_abort(sprintf("%s has no cells", what), "input")
  bad <- which(!is.finite(m), arr.ind = TRUE)
  if (nrow(bad)) {
    nce_abort(sprintf("%s has %d missing or non-finite value(s) (first at row %d, column %d)",
                      what, nrow(bad), bad[1, 1], bad[1, 2]), "input")
  }
  storage.mode(m) <- "double"
  attributes(m) <- list(dim = dim(m))
  m
}

# Which map (1-based) each row's image id picks; an error lists unknown ids.
map_index <- function(mp, nm, ids, map_by) {
  if (!mp$per_image) return(rep(1L, length(ids)))
  ids <- as.character(ids)
  at <- match(ids, names(mp$mats))
  if (anyNA(at)) {
    unknown <- unique(ids[is.na(at)])
    nce_abort(sprintf("`%s` value(s) %s have no map in `maps$%s` (it has %s)", map_by,
                      format_positions(unknown), nm, format_positions(names(mp$mats))), "data")
  }
  at
}

# Adds the map features to the rows of `d` (columns x, y and, for maps per image, `map_by`).
add_map_features <- function(d, maps, map_by, window) {
  for (nm in names(maps)) {
    mp <- maps[[nm]]
    if (mp$per_image && !map_by %in% names(d)) {
      nce_abort(sprintf("the map feature %s needs the column %s (the image of each row) in the data", nm, map_by),
                "input")
    }
    which <- map_index(mp, nm, if (mp$per_image) d[[map_by]] else rep(NA, nrow(d)), map_by)
    d[[nm]] <- rs(nce_bilinear(unname(mp$mats), which, as.double(d$x), as.double(d$y), as.double(window)))
  }
  d
}
