# Every fit class against the model-object contract (helper-contract.R). Each area adds its
# cases in helper-contract-<area>.R as a function contract_cases_<area>() returning a list of cases.

# testthat sources the helpers into an enclosing environment of this file's: search the chain.
case_makers <- local({
  found <- character()
  env <- environment()
  while (!identical(env, emptyenv())) {
    found <- c(found, ls(envir = env, pattern = "^contract_cases_"))
    env <- parent.env(env)
  }
  sort(unique(found))
})

for (maker in case_makers) {
  for (case in get(maker)()) {
    local({
      case <- case
      test_that(paste("contract:", case$name), {
        expect_contract(case)
      })
    })
  }
}

test_that("every area contributes cases", {
  expect_true(length(case_makers) >= 1L)
})
