library(testthat)
library(nce)

test_check("nce")
