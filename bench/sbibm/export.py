"""Writes sbibm's observations 1-10 and reference posterior samples of a task to CSV.

python bench/sbibm/export.py [TASK ...] [--cache DIR]

Files: DIR/TASK/observation_K.csv (one row, columns x1..xd) and DIR/TASK/reference_K.csv
(10,000 rows, columns theta1..thetap), K = 1..10; DIR defaults to bench/sbibm/cache.
"""
import argparse
import os

import sbibm

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks", nargs="*", default=["two_moons", "slcp"])
    ap.add_argument("--cache", default=os.path.join(HERE, "cache"))
    a = ap.parse_args()
    for name in a.tasks:
        task = sbibm.get_task(name)
        out = os.path.join(a.cache, name)
        os.makedirs(out, exist_ok=True)
        for k in range(1, task.num_observations + 1):
            obs = task.get_observation(num_observation=k).numpy()
            ref = task.get_reference_posterior_samples(num_observation=k).numpy()
            write(os.path.join(out, f"observation_{k}.csv"), obs, "x")
            write(os.path.join(out, f"reference_{k}.csv"), ref, "theta")
        print(f"export.py: {name}: observations and reference samples 1-{task.num_observations} in {out}")


def write(path, a, prefix):
    with open(path, "w") as f:
        f.write(",".join(f"{prefix}{j + 1}" for j in range(a.shape[1])) + "\n")
        for row in a:
            f.write(",".join(repr(float(v)) for v in row) + "\n")


if __name__ == "__main__":
    main()
