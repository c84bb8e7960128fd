"""Runs sbi's amortised NRE or NPE on an sbibm task and samples the posterior at observations.

python bench/sbibm/run_sbi.py TASK BUDGET OBS [OBS ...] --method nre|nre_b|npe
    [--seed 1] [--threads 2] [--n-samples 10000] [--cache DIR]

Simulates BUDGET pairs with sbibm's prior and simulator, trains once with sbi's own defaults
(its default networks, training batch size, learning rate and early stopping), then draws
--n-samples posterior samples for each observation. Methods:
  nre    sbi's NRE_A (AALR, Hermans et al. 2020: the binary joint-vs-marginal classifier, as nce's
         ratio_amortised() fits), sampled by MCMC with the settings of sbibm's NRE runner
         (sbibm/algorithms/sbi/snre.py): slice_np_vectorized, 100 chains, thin 10, 25 warm-up
         steps, chains started by sampling-importance-resampling from 10,000 prior draws
         (sbibm's "sir", named "resample" in current sbi).
  nre_b  sbi's NRE_B (what sbi.inference.NRE names, and the variant sbibm's published NRE ran,
         num_atoms 10), same sampler.
  npe    sbi's NPE (NPE_C, a masked autoregressive flow by default), sampled directly
         (rejection of draws outside the prior's support, sbi's default).
Writes DIR/TASK/METHOD/nBUDGET/obs_K.csv (columns theta1..) and times.csv (wall seconds to
simulate, to train (without simulating) and to sample each observation; the process's CPU seconds,
all threads, for simulating and training together and for each sampling) and prints them. One process per budget, so torch's threads
(--threads, default 2) are the only parallelism.
"""
import argparse
import os
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("budget", type=int)
    ap.add_argument("obs", nargs="+", type=int)
    ap.add_argument("--method", required=True, choices=["nre", "nre_b", "npe"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-samples", type=int, default=10000)
    ap.add_argument("--cache", default=os.path.join(HERE, "cache"))
    a = ap.parse_args()

    a.cache = os.path.abspath(a.cache)
    os.makedirs(a.cache, exist_ok=True)
    os.chdir(a.cache)  # sbi writes its tensorboard logs to ./sbi-logs
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    import sbibm
    from sbi.inference import NPE_C, NRE_A, NRE_B

    task = sbibm.get_task(a.task)
    prior = task.get_prior()
    simulator = task.get_simulator()
    out = os.path.join(a.cache, a.task, a.method, f"n{a.budget}")
    os.makedirs(out, exist_ok=True)

    c0 = time.process_time()
    t0 = time.time()
    theta = prior(num_samples=a.budget)
    x = simulator(theta)
    t_sim = time.time() - t0

    sbi_prior = task.get_prior_dist()
    t0 = time.time()
    if a.method == "npe":
        inference = NPE_C(prior=sbi_prior, show_progress_bars=False)
    elif a.method == "nre":
        inference = NRE_A(prior=sbi_prior, show_progress_bars=False)
    else:
        inference = NRE_B(prior=sbi_prior, show_progress_bars=False)
    estimator = inference.append_simulations(theta, x).train()
    epochs = inference.summary["epochs_trained"][-1] if "epochs_trained" in inference.summary else -1
    if a.method == "npe":
        posterior = inference.build_posterior(estimator)
    else:
        posterior = inference.build_posterior(
            estimator,
            sample_with="mcmc",
            mcmc_method="slice_np_vectorized",
            mcmc_parameters={
                "num_chains": 100,
                "thin": 10,
                "warmup_steps": 25,
                "init_strategy": "resample",
                "init_strategy_parameters": {"num_candidate_samples": 10000},
            },
        )
    t_train = time.time() - t0
    cpu_fit = time.process_time() - c0
    print(f"run_sbi.py {a.task} {a.method} n={a.budget}: simulate {t_sim:.1f} s, train {t_train:.1f} s "
          f"({epochs} epochs)", flush=True)

    rows = []
    for k in a.obs:
        obs = task.get_observation(num_observation=k)
        c0 = time.process_time()
        t0 = time.time()
        s = posterior.sample((a.n_samples,), x=obs, show_progress_bars=False).detach().numpy()
        t_s = time.time() - t0
        cpu_s = time.process_time() - c0
        with open(os.path.join(out, f"obs_{k}.csv"), "w") as f:
            f.write(",".join(f"theta{j + 1}" for j in range(s.shape[1])) + "\n")
            for row in s:
                f.write(",".join(repr(float(v)) for v in row) + "\n")
        rows.append((k, t_s, cpu_s))
        # After every observation, so that an interrupted run leaves the times of those done.
        with open(os.path.join(out, "times.csv"), "w") as f:
            f.write("obs,simulate,train,sample,cpu_fit,cpu_sample,epochs\n")
            for kk, tt, cc in rows:
                f.write(f"{kk},{t_sim:.3f},{t_train:.3f},{tt:.3f},{cpu_fit:.3f},{cc:.3f},{epochs}\n")


if __name__ == "__main__":
    main()
