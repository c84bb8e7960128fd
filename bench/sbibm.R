# nce against the Python toolkit sbi on the sbibm benchmark tasks two_moons and slcp (issue 74).
#
#   R_LIBS=/path/to/lib Rscript bench/sbibm.R [budgets] [observations] [tasks]
#
# run from the repository root, e.g. `Rscript bench/sbibm.R 1000,10000 1:10 two_moons`
# (defaults: budgets 1000,10000; observations 1:10; tasks two_moons,slcp). For each task and
# budget (number of simulations) it fits nce::ratio_amortised() once and draws 10,000 posterior
# samples by nce::ratio_posterior() per observation (fit_nce() / sample_nce() below), fits
# nce::ratio_sequential() (truncated-prior rounds) for each observation ("nce seq", fit_nce_seq()), has sbi's
# NRE_A and NPE do the same (bench/sbibm/run_sbi.py), scores every sample against sbibm's reference
# posterior samples by sbibm's C2ST (bench/sbibm/c2st.py; 0.5 = indistinguishable) and prints
# one table: mean C2ST over the observations, its range, the total wall time (simulation,
# training, sampling of all observations) and nce's time over sbi NRE's. Everything on 2
# threads. The Python side lives in bench/sbibm/.venv (bench/sbibm/setup.sh makes it); when it
# cannot be set up, the script says so and stops after nce's fits (no C2ST without sbibm's
# reference samples).
#
# Environment:
#   SBIBM_METHODS   sbi methods to run, comma-separated: nre (NRE_A), nre_b, npe (default "nre,npe")
#   SBIBM_FRESH=1   rerun sbi and nce even where the cache (bench/sbibm/cache) has their samples
#                   (by default runs whose samples and times.csv are cached for all the
#                   observations asked for are reused, and so are C2ST scores newer than their
#                   samples; delete bench/sbibm/cache/TASK/nce to refit nce alone)
#   SBIBM_METHODS=  (empty) runs nce alone
#   SBIBM_NCE       nce methods to run, comma-separated: nce (amortised), nce_seq (sequential, one fit
#                   per observation); default "nce,nce_seq"
#   SBIBM_SEQ_ROUNDS, SBIBM_SEQ_MARGIN  ratio_sequential()'s rounds and margin (default: its own)
#   SBIBM_PYTHON    a Python with numpy, scikit-learn and sbibm (installed --no-deps, without torch) in
#                   place of bench/sbibm/.venv: bench/sbibm/setup.sh is not run, C2ST is sbibm's in numpy
#                   (bench/sbibm/c2st.py), sbi cannot run (set SBIBM_METHODS= ) but its cached scores are read
#   SBIBM_CACHE     the cache directory (default bench/sbibm/cache)
#   SBIBM_NCE_SAMPLER  ratio_posterior() method for nce: "importance" (default: SBIBM_NCE_DRAWS
#                   prior draws, default 1e6, resampled to 10,000 by their weights) or
#                   "metropolis" (10,000 draws of its 100 chains, its own step scale)
#   SBIBM_NICE      niceness of the sbi runs (default 10: the machine may be shared)
#   SBIBM_C2ST_NICE niceness of the C2ST scoring (default 0: it is not timed)
#   SBIBM_C2ST=0    skip the C2ST scoring (e.g. to score elsewhere; cached scores are still read)
#   SBIBM_SEED      seed of R's generator (default 1)
#   SBIBM_TABLE_ONLY=1  run nothing: the table of what the cache holds for the tasks, budgets
#                   and observations asked for (each method on the observations it has times
#                   and C2ST scores for, counted in n_obs), as after an interrupted run

args <- commandArgs(trailingOnly = TRUE)
parse_ints <- function(s) as.integer(eval(str2lang(paste0("c(", s, ")"))))
budgets <- if (length(args) >= 1) parse_ints(args[1]) else c(1000L, 10000L)
obs_ids <- if (length(args) >= 2) parse_ints(args[2]) else 1:10
tasks <- if (length(args) >= 3) strsplit(args[3], ",")[[1]] else c("two_moons", "slcp")
methods_sbi <- strsplit(Sys.getenv("SBIBM_METHODS", "nre,npe"), ",")[[1]]
methods_nce <- strsplit(Sys.getenv("SBIBM_NCE", "nce,nce_seq"), ",")[[1]]
seq_rounds <- Sys.getenv("SBIBM_SEQ_ROUNDS")
seq_margin <- Sys.getenv("SBIBM_SEQ_MARGIN")
fresh <- identical(Sys.getenv("SBIBM_FRESH"), "1")
nce_sampler <- Sys.getenv("SBIBM_NCE_SAMPLER", "smc")
nce_draws <- as.numeric(Sys.getenv("SBIBM_NCE_DRAWS", "1e6"))
nice <- Sys.getenv("SBIBM_NICE", "10")
c2st_nice <- Sys.getenv("SBIBM_C2ST_NICE", "0")
do_c2st <- !identical(Sys.getenv("SBIBM_C2ST"), "0")
table_only <- identical(Sys.getenv("SBIBM_TABLE_ONLY"), "1")
seed <- as.integer(Sys.getenv("SBIBM_SEED", "1"))

if (!file.exists("bench/sbibm-tasks.R")) stop("run from the repository root: Rscript bench/sbibm.R")
source("bench/sbibm-tasks.R")
suppressPackageStartupMessages(library(nce))
options(nce.threads = 2L)
dir_py <- "bench/sbibm"
cache <- Sys.getenv("SBIBM_CACHE", file.path(dir_py, "cache"))
python <- Sys.getenv("SBIBM_PYTHON", file.path(dir_py, ".venv", "bin", "python"))

# --- nce: the two calls the package's developers may want to change -------------------------

# nce at its defaults (the network classifier; SLCP's data are 4 exchangeable 2-D draws, read
# through embed_set(item = 2) when SBIBM_NCE_EMBED=1).
fit_nce <- function(task, budget) {
  tk <- sbibm_task(task)
  emb <- if (task == "slcp" && identical(Sys.getenv("SBIBM_NCE_EMBED"), "1")) nce::embed_set(item = 2) else NULL
  nce::ratio_amortised(tk$simulator, summaries = NULL, prior = tk$prior, n = budget, batch = TRUE,
                       embedding = emb)
}

# nce's sequential rounds for one observation (ratio_sequential() at its defaults, or the rounds and
# margin of SBIBM_SEQ_ROUNDS and SBIBM_SEQ_MARGIN), the same classifier settings as fit_nce().
fit_nce_seq <- function(task, budget, observed) {
  tk <- sbibm_task(task)
  emb <- if (task == "slcp" && identical(Sys.getenv("SBIBM_NCE_EMBED"), "1")) nce::embed_set(item = 2) else NULL
  args <- list(tk$simulator, summaries = NULL, prior = tk$prior, observed = observed, n = budget, batch = TRUE,
               embedding = emb)
  if (nzchar(seq_rounds)) args$rounds <- as.integer(seq_rounds)
  if (nzchar(seq_margin)) args$margin <- as.numeric(seq_margin)
  do.call(nce::ratio_sequential, args)
}

# 10,000 unweighted posterior draws (a matrix, one column per parameter) for one observation, by
# ratio_posterior()'s default sampler (tempered SMC). SBIBM_NCE_SAMPLER=importance resamples
# SBIBM_NCE_DRAWS prior draws by their weights instead (10,000 leave an effective sample of 180
# on two moons, 1,000 simulations, observation 1; 1e6 18,700).
sample_nce <- function(fit, observed, n = 10000L, method = nce_sampler, n_prior = nce_draws) {
  if (method == "importance") {
    post <- nce::ratio_posterior(fit, observed, n_draws = n_prior, method = "importance")
    idx <- sample.int(nrow(post$draws), n, replace = TRUE, prob = post$weights)
    return(post$draws[idx, , drop = FALSE])
  }
  post <- nce::ratio_posterior(fit, observed, n_draws = n, method = method)
  post$draws
}

# --- plumbing ---------------------------------------------------------------------------------

say <- function(...) cat(sprintf(...), "\n", sep = "")

run_py <- function(script, args, nice_it = FALSE, niceness = nice) {
  cmd <- if (nice_it) "nice" else python
  a <- if (nice_it) c("-n", niceness, python, file.path(dir_py, script), args) else c(file.path(dir_py, script), args)
  status <- system2(cmd, a)
  identical(as.integer(status), 0L)
}

python_ok <- local({
  ok <- nzchar(Sys.getenv("SBIBM_PYTHON")) || identical(as.integer(system2("bash", file.path(dir_py, "setup.sh"))), 0L)
  if (!ok) {
    say("sbibm.R: the Python side (sbi, sbibm) could not be set up (see above): skipping sbi and C2ST.")
  } else if (!all(file.exists(file.path(cache, tasks, sprintf("reference_%d.csv", max(obs_ids))))) &&
             !run_py("export.py", c(tasks, "--cache", cache))) {
    say("sbibm.R: export.py failed: skipping sbi and C2ST.")
    ok <- FALSE
  }
  ok
})

read_obs <- function(task, k) as.matrix(utils::read.csv(file.path(cache, task, sprintf("observation_%d.csv", k))))

write_draws <- function(draws, path) {
  colnames(draws) <- paste0("theta", seq_len(ncol(draws)))
  utils::write.csv(draws, path, row.names = FALSE)
}

sbi_cached <- function(dir, obs) {
  all(file.exists(file.path(dir, c("times.csv", sprintf("obs_%d.csv", obs))))) &&
    all(obs %in% utils::read.csv(file.path(dir, "times.csv"))$obs)
}

c2st_scores <- function(task, dir, obs) {
  out <- file.path(dir, "c2st.csv")
  samples <- file.path(dir, sprintf("obs_%d.csv", obs))
  if (!fresh && file.exists(out) && all(file.mtime(out) > file.mtime(samples))) {
    sc <- utils::read.csv(out)
    if (all(obs %in% sc$obs)) return(sc[match(obs, sc$obs), ])
  }
  if (!do_c2st || !run_py("c2st.py", c(task, obs, "--dir", dir, "--cache", cache), nice_it = TRUE,
                          niceness = c2st_nice)) {
    return(NULL)
  }
  sc <- utils::read.csv(out)
  sc[match(obs, sc$obs), ]
}

# --- the R simulators against sbibm's ----------------------------------------------------------

# Both simulators at the parameters of bench/sbibm/check_tasks.py, 10,000 draws each: the
# difference of means in Monte Carlo standard errors, the ratio of sds, the difference of the
# within-pair correlations and a two-sample Kolmogorov-Smirnov p-value per coordinate.
sbibm_check_tasks <- function() {
  dir <- file.path(cache, "check")
  if (!file.exists(file.path(dir, "thetas.csv")) && !run_py("check_tasks.py", c("--cache", cache))) return(NULL)
  th <- utils::read.csv(file.path(dir, "thetas.csv"))
  rows <- list()
  for (i in seq_len(nrow(th))) {
    task <- th$task[i]
    theta <- as.numeric(strsplit(th$theta[i], " ")[[1]])
    py <- as.matrix(utils::read.csv(file.path(dir, sprintf("%s_%d.csv", task, th$j[i]))))
    tk <- sbibm_task(task)
    n <- nrow(py)
    x <- tk$simulator(matrix(theta, n, length(theta), byrow = TRUE, dimnames = list(NULL, tk$prior$names)), n)
    z <- (colMeans(x) - colMeans(py)) / sqrt(apply(x, 2, stats::var) / n + apply(py, 2, stats::var) / n)
    sdr <- apply(x, 2, stats::sd) / apply(py, 2, stats::sd)
    ks <- vapply(seq_len(ncol(x)), function(j) suppressWarnings(stats::ks.test(x[, j], py[, j])$p.value), 1)
    pairs <- seq(1, ncol(x), by = 2)
    dcor <- vapply(pairs, function(j) stats::cor(x[, j], x[, j + 1]) - stats::cor(py[, j], py[, j + 1]), 1)
    rows[[i]] <- data.frame(task = task, theta = th$theta[i], max_abs_z_mean = max(abs(z)),
                            sd_ratio_min = min(sdr), sd_ratio_max = max(sdr), max_abs_dcor = max(abs(dcor)),
                            min_ks_p = min(ks))
  }
  do.call(rbind, rows)
}

run_nce <- function(task, budget, dir) {
  say("nce: %s, %d simulations", task, budget)
  dir.create(dir, recursive = TRUE, showWarnings = FALSE)
  cpu <- function() sum(proc.time()[c("user.self", "sys.self")])
  t0 <- proc.time()[["elapsed"]]
  c0 <- cpu()
  fit <- fit_nce(task, budget)
  t_fit <- proc.time()[["elapsed"]] - t0
  cpu_fit <- cpu() - c0
  t_sample <- cpu_sample <- numeric(length(obs_ids))
  for (i in seq_along(obs_ids)) {
    observed <- if (python_ok) read_obs(task, obs_ids[i]) else NULL
    if (is.null(observed)) break
    t0 <- proc.time()[["elapsed"]]
    c0 <- cpu()
    draws <- sample_nce(fit, observed)
    t_sample[i] <- proc.time()[["elapsed"]] - t0
    cpu_sample[i] <- cpu() - c0
    write_draws(draws, file.path(dir, sprintf("obs_%d.csv", obs_ids[i])))
  }
  times <- data.frame(obs = obs_ids, simulate = unname(fit$time[["simulation"]]), train = t_fit,
                      sample = t_sample, cpu_fit = cpu_fit, cpu_sample = cpu_sample,
                      train_includes_simulate = TRUE, fit_per_obs = FALSE)
  utils::write.csv(times, file.path(dir, "times.csv"), row.names = FALSE)
  say("  fit %.1f s (simulation %.1f s), sampling %.1f s for %d observations", t_fit, fit$time[["simulation"]],
      sum(t_sample), length(obs_ids))
  times
}

# Sequential nce: one ratio_sequential() fit (all rounds, simulation included) per observation, then
# 10,000 draws by ratio_posterior() (SMC).
run_nce_seq <- function(task, budget, dir) {
  say("nce seq: %s, %d simulations per observation", task, budget)
  dir.create(dir, recursive = TRUE, showWarnings = FALSE)
  cpu <- function() sum(proc.time()[c("user.self", "sys.self")])
  rows <- list()
  for (k in obs_ids) {
    observed <- read_obs(task, k)
    t0 <- proc.time()[["elapsed"]]
    c0 <- cpu()
    fit <- fit_nce_seq(task, budget, observed)
    t_fit <- proc.time()[["elapsed"]] - t0
    cpu_fit <- cpu() - c0
    t0 <- proc.time()[["elapsed"]]
    c0 <- cpu()
    draws <- sample_nce(fit, observed)
    write_draws(draws, file.path(dir, sprintf("obs_%d.csv", k)))
    rows[[length(rows) + 1L]] <- data.frame(obs = k, simulate = unname(fit$time[["simulation"]]), train = t_fit,
                                            sample = proc.time()[["elapsed"]] - t0, cpu_fit = cpu_fit,
                                            cpu_sample = cpu() - c0, train_includes_simulate = TRUE,
                                            fit_per_obs = TRUE, rounds = nrow(fit$rounds),
                                            last_box_prior_mass = fit$rounds$prior_mass[nrow(fit$rounds)])
    say("  observation %d: fit %.1f s (%d rounds, last box %.3g of the prior), sampling %.1f s", k, t_fit,
        nrow(fit$rounds), fit$rounds$prior_mass[nrow(fit$rounds)], rows[[length(rows)]]$sample)
    utils::write.csv(do.call(rbind, rows), file.path(dir, "times.csv"), row.names = FALSE)
  }
  do.call(rbind, rows)
}

# --- the benchmark -------------------------------------------------------------------------------

results <- list()
add <- function(task, budget, method, times, sc) {
  per_obs <- isTRUE(times$fit_per_obs[1])
  results[[length(results) + 1L]] <<- data.frame(
    task = task, budget = budget, method = method, n_obs = nrow(times),
    c2st_mean = if (is.null(sc)) NA_real_ else mean(sc$c2st),
    c2st_min = if (is.null(sc)) NA_real_ else min(sc$c2st),
    c2st_max = if (is.null(sc)) NA_real_ else max(sc$c2st),
    simulate_s = times$simulate[1], train_s = times$train[1], sample_s = sum(times$sample),
    total_s = (if (per_obs) sum(times$train) else times$train[1]) + sum(times$sample) +
      if (isTRUE(times$train_includes_simulate[1])) 0 else times$simulate[1],
    cpu_s = if (is.null(times$cpu_fit)) NA_real_ else (if (per_obs) sum(times$cpu_fit) else times$cpu_fit[1]) +
      sum(times$cpu_sample), fit_per_obs = per_obs)
}

if (python_ok) {
  chk <- sbibm_check_tasks()
  if (!is.null(chk)) {
    say("\nR simulators against sbibm's (10,000 draws each at the same parameters):")
    print(chk, row.names = FALSE, digits = 3)
  }
}


# The table from the cache alone: each method on the observations it has times and scores for.
cached_table <- function() {
  for (task in tasks) {
    for (budget in budgets) {
      for (m in c(methods_sbi, methods_nce)) {
        dir <- file.path(cache, task, m, paste0("n", budget))
        f_t <- file.path(dir, "times.csv")
        f_c <- file.path(dir, "c2st.csv")
        if (!file.exists(f_t)) next
        times <- utils::read.csv(f_t)
        sc <- if (file.exists(f_c)) utils::read.csv(f_c) else NULL
        keep <- intersect(obs_ids, times$obs)
        if (!is.null(sc)) keep <- intersect(keep, sc$obs)
        if (!length(keep)) next
        add(task, budget, if (m %in% c("nce", "nce_seq")) sub("_", " ", m) else paste0("sbi ", m),
            times[match(keep, times$obs), ],
            if (is.null(sc)) NULL else sc[match(keep, sc$obs), ])
      }
    }
  }
}

set.seed(seed)
if (table_only) {
  cached_table()
  tasks <- character()
}
for (task in tasks) {
  for (budget in budgets) {
    if (python_ok) {
      for (m in methods_sbi) {
        dir <- file.path(cache, task, m, paste0("n", budget))
        if (fresh || !sbi_cached(dir, obs_ids)) {
          say("sbi %s: %s, %d simulations, observations %s", m, task, budget, paste(obs_ids, collapse = " "))
          if (!run_py("run_sbi.py", c(task, budget, obs_ids, "--method", m, "--cache", cache), nice_it = TRUE)) {
            say("sbibm.R: run_sbi.py failed for %s %s %d: skipped", m, task, budget)
            next
          }
        }
        times <- utils::read.csv(file.path(dir, "times.csv"))
        times <- times[match(obs_ids, times$obs), ]
        add(task, budget, paste0("sbi ", m), times, c2st_scores(task, dir, obs_ids))
      }
    }
    for (m in methods_nce) {
      dir <- file.path(cache, task, m, paste0("n", budget))
      if (!fresh && python_ok && sbi_cached(dir, obs_ids)) {
        say("%s: %s, %d simulations: cached in %s", m, task, budget, dir)
        times <- utils::read.csv(file.path(dir, "times.csv"))
        times <- times[match(obs_ids, times$obs), ]
      } else if (m == "nce_seq") {
        if (!python_ok) next  # the observations come from sbibm
        times <- run_nce_seq(task, budget, dir)
      } else {
        times <- run_nce(task, budget, dir)
      }
      add(task, budget, sub("_", " ", m), times, if (python_ok) c2st_scores(task, dir, obs_ids) else NULL)
    }
  }
}

tab <- do.call(rbind, results)
# Time for all the observations asked for: fit + that many times the mean sampling time (the
# total itself when a method has every observation; projected after an interrupted run).
# A sequential fit serves one observation: its fit time scales with the observations too.
tab$fit_s <- tab$total_s - tab$sample_s
tab$sample_per_obs_s <- tab$sample_s / tab$n_obs
tab$time_all_obs_s <- ifelse(tab$fit_per_obs, tab$total_s / tab$n_obs * length(obs_ids),
                             tab$fit_s + length(obs_ids) * tab$sample_per_obs_s)
ref <- tab[tab$method == "sbi nre", c("task", "budget", "time_all_obs_s")]
tab$time_vs_sbi_nre <- tab$time_all_obs_s /
  ref$time_all_obs_s[match(paste(tab$task, tab$budget), paste(ref$task, ref$budget))]
tab$c2st_range <- sprintf("%.3f-%.3f", tab$c2st_min, tab$c2st_max)
out <- tab[, c("task", "budget", "method", "n_obs", "c2st_mean", "c2st_range", "simulate_s", "fit_s",
               "sample_per_obs_s", "total_s", "time_vs_sbi_nre", "cpu_s")]
say("\nsbibm: mean C2ST over observations %s (0.5 best), wall times in seconds (2 threads):\nfit_s simulation and training, total_s fit and sampling of the n_obs observations,\ntime_vs_sbi_nre (fit + %d x mean sampling time) over sbi NRE's, cpu_s CPU seconds of all threads; nce sampler: %s",
    paste(obs_ids, collapse = ","), length(obs_ids), if (nce_sampler == "importance") sprintf("importance, %g prior draws", nce_draws) else nce_sampler)
print(format(out, digits = 3), row.names = FALSE)
utils::write.csv(out, file.path(cache, sprintf("results-%s.csv", format(Sys.time(), "%Y%m%d-%H%M%S"))),
                 row.names = FALSE)
