"""Simulates sbibm's two_moons and slcp at fixed parameters, for the comparison with the R
simulators of bench/sbibm-tasks.R (sbibm_check_tasks() in bench/sbibm.R).

python bench/sbibm/check_tasks.py [--n 10000] [--cache DIR]

Writes DIR/check/TASK_J.csv: n simulations (columns x1..xd) at the J-th parameter vector of
THETAS, and DIR/check/thetas.csv.
"""
import argparse
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
THETAS = {
    "two_moons": [[0.0, 0.0], [0.5, -0.3], [-0.7, 0.8]],
    "slcp": [[0.5, -1.0, 1.2, -0.8, 0.6], [-2.0, 1.5, 0.7, 1.5, -1.5], [1.0, 2.0, -1.5, 0.4, 2.5]],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--cache", default=os.path.join(HERE, "cache"))
    a = ap.parse_args()
    torch.manual_seed(2)
    import sbibm

    out = os.path.join(a.cache, "check")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "thetas.csv"), "w") as f:
        f.write("task,j,theta\n")
        for name, thetas in THETAS.items():
            sim = sbibm.get_task(name).get_simulator()
            for j, th in enumerate(thetas, 1):
                f.write(f"{name},{j},{' '.join(map(repr, th))}\n")
                x = sim(torch.tensor([th] * a.n, dtype=torch.float32)).numpy()
                with open(os.path.join(out, f"{name}_{j}.csv"), "w") as g:
                    g.write(",".join(f"x{k + 1}" for k in range(x.shape[1])) + "\n")
                    for row in x:
                        g.write(",".join(repr(float(v)) for v in row) + "\n")
    print(f"check_tasks.py: sbibm simulations in {out}")


if __name__ == "__main__":
    main()
