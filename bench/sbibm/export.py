"""Writes sbibm's observations 1-10 and reference posterior samples of a task to CSV.

python bench/sbibm/export.py [TASK ...] [--cache DIR]

Files: DIR/TASK/observation_K.csv (one row, columns x1..xd) and DIR/TASK/reference_K.csv
(10,000 rows, columns theta1..thetap), K = 1..10; DIR defaults to bench/sbibm/cache.
"""
import argparse
import importlib.util
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks", nargs="*", default=["two_moons", "slcp"])
    ap.add_argument("--cache", default=os.path.join(HERE, "cache"))
    a = ap.parse_args()
    try:
        import sbibm
    except ImportError:  # sbibm installed without torch: its files are read directly
        sbibm = None
    for name in a.tasks:
        out = os.path.join(a.cache, name)
        os.makedirs(out, exist_ok=True)
        task = sbibm.get_task(name) if sbibm else None
        for k in range(1, (task.num_observations if task else 10) + 1):
            if task:
                obs = task.get_observation(num_observation=k).numpy()
                ref = task.get_reference_posterior_samples(num_observation=k).numpy()
            else:
                obs, ref = (sbibm_file(name, k, f) for f in ("observation.csv", "reference_posterior_samples.csv.bz2"))
            write(os.path.join(out, f"observation_{k}.csv"), obs, "x")
            write(os.path.join(out, f"reference_{k}.csv"), ref, "theta")
        print(f"export.py: {name}: observations and reference samples 1-{k} in {out}")


def sbibm_file(task, k, file):
    """A file of sbibm's task folder as float32, as sbibm's get_tensor_from_csv() reads it."""
    root = importlib.util.find_spec("sbibm").submodule_search_locations[0]
    path = os.path.join(root, "tasks", task, "files", f"num_observation_{k}", file)
    return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2).astype(np.float32)


def write(path, a, prefix):
    with open(path, "w") as f:
        f.write(",".join(f"{prefix}{j + 1}" for j in range(a.shape[1])) + "\n")
        for row in a:
            f.write(",".join(repr(float(v)) for v in row) + "\n")


if __name__ == "__main__":
    main()
