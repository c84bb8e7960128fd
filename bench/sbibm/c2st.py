"""Scores posterior samples against sbibm's reference posterior samples by sbibm's C2ST.

python bench/sbibm/c2st.py TASK OBS --samples SAMPLES.csv [--cache DIR] [--threads 2]
python bench/sbibm/c2st.py TASK OBS [OBS ...] --dir DIR_OF_obs_K.csv

The metric is sbibm.metrics.c2st (an MLP classifier of 2 hidden layers of 10 x dim units,
5-fold cross-validated accuracy, z-scored by the reference's mean and sd): 0.5 means the two
samples are indistinguishable, 1 fully separable. Exactly 10,000 samples are compared with the
10,000 reference samples (the first 10,000 rows of the file; fewer is an error). Prints one line
"TASK OBS C2ST SECONDS" per observation; with --dir also writes DIR/c2st.csv (merged with the other observations' scores there).
"""
import argparse
import os
import time

import numpy as np

try:
    import torch
except ImportError:  # scored by c2st_numpy() below
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))


def read(path):
    a = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2).astype(np.float32)
    return a if torch is None else torch.tensor(a, dtype=torch.float32)


def c2st_numpy(X, Y, seed=1, n_folds=5):
    """sbibm.metrics.c2st line for line in numpy, for an environment without torch (float32 data,
    z-scored by X's mean and unbiased sd as torch.std, the same MLPClassifier and KFold)."""
    from sklearn.model_selection import KFold, cross_val_score
    from sklearn.neural_network import MLPClassifier

    mean = np.mean(X, axis=0)
    sd = np.std(X, axis=0, ddof=1)
    X = (X - mean) / sd
    Y = (Y - mean) / sd
    ndim = X.shape[1]
    clf = MLPClassifier(activation="relu", hidden_layer_sizes=(10 * ndim, 10 * ndim), max_iter=10000,
                        solver="adam", random_state=seed)
    data = np.concatenate((X, Y))
    target = np.concatenate((np.zeros((X.shape[0],)), np.ones((Y.shape[0],))))
    shuffle = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    scores = cross_val_score(clf, data, target, cv=shuffle, scoring="accuracy")
    return np.atleast_1d(np.asarray(np.mean(scores)).astype(np.float32))


def sbibm_c2st():
    """sbibm.metrics.c2st, loaded from its own file: importing sbibm.metrics would load its
    other metrics too, whose dependencies (future, autograd) sbibm's --no-deps install lacks."""
    import importlib.util

    import sbibm

    path = os.path.join(os.path.dirname(sbibm.__file__), "metrics", "c2st.py")
    spec = importlib.util.spec_from_file_location("sbibm_metrics_c2st", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.c2st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("obs", nargs="+", type=int)
    ap.add_argument("--samples")
    ap.add_argument("--dir")
    ap.add_argument("--cache", default=os.path.join(HERE, "cache"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=10000)
    a = ap.parse_args()
    if torch is None:
        os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
        c2st = c2st_numpy
    else:
        torch.set_num_threads(a.threads)
        c2st = sbibm_c2st()

    if (a.dir is None) == (a.samples is None) or (a.samples and len(a.obs) != 1):
        raise SystemExit("c2st.py: give --samples FILE with one observation, or --dir DIR")
    rows = []
    for k in a.obs:
        path = os.path.join(a.dir, f"obs_{k}.csv") if a.dir else a.samples
        x = read(path)
        ref = read(os.path.join(a.cache, a.task, f"reference_{k}.csv"))
        if x.shape[0] < a.n or ref.shape[0] < a.n:
            raise SystemExit(f"c2st.py: {path} has {x.shape[0]} rows, the reference {ref.shape[0]}; need {a.n}")
        if x.shape[1] != ref.shape[1]:
            raise SystemExit(f"c2st.py: {path} has {x.shape[1]} columns, the reference {ref.shape[1]}")
        if not np.isfinite(np.asarray(x)).all():
            raise SystemExit(f"c2st.py: {path} has non-finite values")
        t0 = time.time()
        acc = float(c2st(ref[: a.n], x[: a.n])[0])
        dt = time.time() - t0
        print(f"{a.task} {k} {acc:.4f} {dt:.1f}", flush=True)
        rows.append((k, acc, dt))
    if a.dir:
        # Merged with the scores of other observations already in the file.
        path = os.path.join(a.dir, "c2st.csv")
        old = {}
        if os.path.exists(path):
            with open(path) as f:
                for line in f.read().splitlines()[1:]:
                    k, acc, dt = line.split(",")
                    old[int(k)] = (float(acc), float(dt))
        for k, acc, dt in rows:
            old[k] = (acc, dt)
        with open(path, "w") as f:
            f.write("obs,c2st,seconds\n")
            for k in sorted(old):
                f.write(f"{k},{old[k][0]:.6f},{old[k][1]:.2f}\n")

if __name__ == "__main__":
    main()
