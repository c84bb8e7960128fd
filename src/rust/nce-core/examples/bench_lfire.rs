//! Benchmark of the LFIRE lasso fits (10-fold CV on a lambda path at every grid point) on the
//! ARCH(1) problems written by bench/lfire-dump.R (standardised summaries, binary files).
//!
//!     R_LIBS=.Rlib Rscript bench/lfire-dump.R /tmp/nce-lfire
//!     cargo run --release -p nce-core --example bench_lfire -- [DIR] [--every K] [--coarse C]
//!         [--nlambda L] [--tol T] [--onestep] [--seed S] [--save FILE] [--ref FILE]
//!
//! Fits every K-th grid point on one thread (CV folds from stream g of seed S, as lfire_fit) and
//! prints the time per fit, the mean path length, outer steps per lambda and the chosen lambda
//! index; with K = 1, the symmetrised KL of the posterior (uniform prior) to the exact one.
//! `--save` writes (lambda, log ratio) per fit; `--ref` compares with such a file (same chosen
//! lambda, max |log ratio difference|, and with K = 1 the KL between the two posteriors and the
//! four grid points of largest log ratio). LF_DEBUG=g prints grid point g's path and CV curve.

mod common;

use common::read_f64;
use nce_core::estimators::lasso::{cv_logistic_lasso, fold_ids};
use nce_core::estimators::lasso_path::LassoControl;
use nce_core::rng::stream_rng;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dir = PathBuf::from("/tmp/nce-lfire");
    let (mut every, mut save, mut reference) = (1usize, None, None);
    let mut ctrl = LassoControl::default();
    let mut seed = 9u64;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--every" => {
                every = args[i + 1].parse().unwrap();
                i += 1;
            }
            "--nlambda" => {
                ctrl.nlambda = args[i + 1].parse().unwrap();
                i += 1;
            }
            "--seed" => {
                seed = args[i + 1].parse().unwrap();
                i += 1;
            }
            "--coarse" => {
                ctrl.coarse = args[i + 1].parse().unwrap();
                i += 1;
            }
            "--onestep" => ctrl.onestep = true,
            "--tol" => {
                ctrl.tol = args[i + 1].parse().unwrap();
                i += 1;
            }
            "--save" => {
                save = Some(args[i + 1].clone());
                i += 1;
            }
            "--ref" => {
                reference = Some(args[i + 1].clone());
                i += 1;
            }
            d => dir = PathBuf::from(d),
        }
        i += 1;
    }
    let dims = read_f64(&dir.join("dims.bin"));
    let (nm, p, total) = (dims[0] as usize, dims[1] as usize, dims[2] as usize);
    let marg = read_f64(&dir.join("marg.bin"));
    let at = read_f64(&dir.join("at.bin"));
    let starts: Vec<usize> = read_f64(&dir.join("starts.bin")).iter().map(|&v| v as usize).collect();
    let obs = read_f64(&dir.join("obs.bin"));
    let (mut n_fit, mut len, mut outer, mut kmin) = (0usize, 0usize, 0usize, 0usize);
    let mut out = Vec::new();
    let t0 = Instant::now();
    for g in (0..starts.len() - 1).step_by(every) {
        let (a, b) = (starts[g], starts[g + 1]);
        let ng = b - a;
        let n = ng + nm;
        let mut x = Vec::with_capacity(n * p);
        for j in 0..p {
            x.extend_from_slice(&at[j * total + a..j * total + b]);
            x.extend_from_slice(&marg[j * nm..(j + 1) * nm]);
        }
        let mut y = vec![1.0; ng];
        y.resize(n, 0.0);
        let folds = fold_ids(n, ctrl.nfolds, &mut stream_rng(seed, g as u64));
        let cv = cv_logistic_lasso(&x, n, p, &y, &folds, &ctrl).unwrap();
        let k = cv.index_min;
        if std::env::var("LF_DEBUG").ok().and_then(|v| v.parse::<usize>().ok()) == Some(g) {
            for i in 0..cv.path.lambda.len() {
                let bmax = cv.path.beta[i].iter().fold(0.0f64, |a, b| a.max(b.abs()));
                let eta = cv.path.intercept[i] + cv.path.beta[i].iter().zip(&obs).map(|(u, v)| u * v).sum::<f64>();
                println!(
                    "{i:3} lambda {:.3e} dev_ratio {:.5} max|beta| {bmax:.3} cvm {:.5} eta_obs {eta:.3}",
                    cv.path.lambda[i], cv.path.dev_ratio[i], cv.cvm[i]
                );
            }
        }
        let eta = cv.path.intercept[k] + cv.path.beta[k].iter().zip(&obs).map(|(u, v)| u * v).sum::<f64>();
        out.push((cv.path.lambda[k], eta - (ng as f64 / nm as f64).ln()));
        n_fit += 1;
        len += cv.path.lambda.len();
        outer += cv.path.outer_steps;
        kmin += k;
    }
    let el = t0.elapsed().as_secs_f64();
    let f = n_fit as f64;
    println!(
        "{n_fit} fits: {:.2} ms per fit; full path: {:.1} lambdas, {:.2} outer steps per lambda; index_min {:.1}",
        1e3 * el / f,
        len as f64 / f,
        outer as f64 / len as f64,
        kmin as f64 / f
    );
    // Posterior on the grid (uniform prior) and its symmetrised KL to the exact one.
    let post = |lr: &[f64]| {
        let mx = lr.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = lr.iter().map(|v| (v - mx).exp()).collect();
        let s: f64 = w.iter().sum();
        w.iter().map(|v| v / s).collect::<Vec<f64>>()
    };
    let kl = |p: &[f64], q: &[f64]| {
        p.iter()
            .zip(q)
            .map(|(a, b)| (a - b) * (a.max(1e-300).ln() - b.max(1e-300).ln()))
            .sum::<f64>()
    };
    let lr: Vec<f64> = out.iter().map(|o| o.1).collect();
    let exact_path = dir.join("exact.bin");
    if every == 1 && exact_path.exists() {
        println!(
            "symmetrised KL to the exact posterior: {:.3}",
            kl(&post(&lr), &read_f64(&exact_path))
        );
    }
    if let Some(s) = save {
        let bytes: Vec<u8> = out
            .iter()
            .flat_map(|(l, r)| [*l, *r])
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(s, bytes).unwrap();
    }
    if let Some(r) = reference {
        let rv = read_f64(Path::new(&r));
        let (mut same, mut maxd) = (0usize, 0.0f64);
        for (k, (l, lr)) in out.iter().enumerate() {
            if (rv[2 * k] - l).abs() <= 1e-12 * l.abs() {
                same += 1;
            }
            maxd = maxd.max((rv[2 * k + 1] - lr).abs());
        }
        println!("against the reference: same lambda at {same} of {n_fit}; max |log ratio difference| {maxd:.3e}");
        if every == 1 {
            let rl: Vec<f64> = (0..n_fit).map(|k| rv[2 * k + 1]).collect();
            println!(
                "symmetrised KL to the reference posterior: {:.4}",
                kl(&post(&lr), &post(&rl))
            );
            let mut idx: Vec<usize> = (0..n_fit).collect();
            idx.sort_by(|a, b| lr[*b].partial_cmp(&lr[*a]).unwrap());
            for &g in idx.iter().take(4) {
                println!(
                    "  grid {g}: log ratio {:.3} (reference {:.3}), lambda {:.3e} (reference {:.3e})",
                    lr[g],
                    rl[g],
                    out[g].0,
                    rv[2 * g]
                );
            }
        }
    }
}
