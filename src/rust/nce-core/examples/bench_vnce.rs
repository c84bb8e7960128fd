//! Timing of the VNCE objective for the truncated Gaussian graphical model:
//! d = 20, n = 1000, nu = 1, S = 10, 30% of the values missing.
//! `cargo run --release --example bench_vnce` (P_MISS=0.1 sets another missing fraction).

#[path = "../tests/support/tgm_gibbs.rs"]
mod tgm_gibbs;

use nalgebra::DMatrix;
#[path = "../tests/support/threads.rs"]
mod threads;
use nce_core::estimators::vnce::{fit, fit_ghk, FitReport, TgmParams};
use nce_core::optim::{LbfgsControl, Objective};
use std::time::Instant;
use threads::with_threads;

/// One fit's line: its time since `t0` and how it ended (with `grad`, also max |grad|).
fn report(what: &str, threads: usize, t0: Instant, r: &FitReport, grad: bool) {
    let grad = if grad {
        format!(", max |grad| {:.1e}", r.grad_norm)
    } else {
        String::new()
    };
    println!(
        "{what}, {threads} thread(s): {:.2} s, {} iterations, {} evaluations, converged {} ({}), J = {:.6}{grad}",
        t0.elapsed().as_secs_f64(),
        r.convergence.iterations,
        r.evaluations,
        r.convergence.converged,
        r.convergence.message,
        r.objective
    );
}

fn main() {
    let (d, n, nu, s) = (20, 1000, 1, 10);
    let k = tgm_gibbs::k_true(d);
    let mut x = tgm_gibbs::sample_tgm(&k, d, n, 500, 5, 1);
    let p_miss: f64 = std::env::var("P_MISS").ok().and_then(|v| v.parse().ok()).unwrap_or(0.3);
    tgm_gibbs::mask(&mut x, n, d, p_miss, false, 1);
    let miss = x.iter().filter(|v| v.is_nan()).count();
    let (pr, ..) = tgm_gibbs::tgm_vnce(&x, n, d, nu, s, 1, 7);
    let mu: Vec<f64> = (0..d)
        .map(|j| {
            let v: Vec<f64> = (0..n)
                .map(|i| x[j * n + i])
                .filter(|v| !v.is_nan())
                .map(f64::ln)
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        })
        .collect();
    let start = TgmParams::from_precision(DMatrix::identity(d, d), 0.0, mu, &DMatrix::identity(d, d), "start").unwrap();
    let x0 = start.pack();
    println!(
        "d = {d}, n = {n}, nu = {nu}, S = {s}, {:.1}% missing, {} parameters",
        100.0 * miss as f64 / (n * d) as f64,
        x0.len()
    );
    for threads in [1, 2] {
        let reps = 50;
        let t = with_threads(threads, || {
            let mut g = vec![0.0; x0.len()];
            pr.value_grad(&x0, &mut g).unwrap();
            let t0 = Instant::now();
            for _ in 0..reps {
                pr.value_grad(&x0, &mut g).unwrap();
            }
            t0.elapsed().as_secs_f64() / reps as f64
        })
        .unwrap();
        println!("value + gradient, {threads} thread(s): {:.2} ms", 1e3 * t);
    }
    for threads in [1, 2] {
        let t0 = Instant::now();
        let f = with_threads(threads, || {
            fit(&pr, &start, &LbfgsControl::default(), &mut || false).unwrap()
        })
        .unwrap();
        report("full fit", threads, t0, &f.report, true);
        let kd: Vec<f64> = (0..d).map(|j| f.params.k[(j, j)]).collect();
        let k01: Vec<f64> = (0..d - 1).map(|j| f.params.k[(j, j + 1)]).collect();
        if threads == 2 {
            println!("fitted diag(K) {:.2?}\nfitted K[j, j+1] {:.2?} (truth 0.3)", kd, k01);
        }
    }
    for threads in [1, 2] {
        let t0 = Instant::now();
        let f = with_threads(threads, || {
            fit_ghk(
                &pr,
                &DMatrix::identity(d, d),
                0.0,
                &LbfgsControl::default(),
                &mut || false,
            )
            .unwrap()
        })
        .unwrap();
        report("GHK family", threads, t0, &f.report, false);
        if threads == 2 {
            let kd: Vec<f64> = (0..d).map(|j| f.k[(j, j)]).collect();
            let k01: Vec<f64> = (0..d - 1).map(|j| f.k[(j, j + 1)]).collect();
            let k02: Vec<f64> = (0..d - 2).map(|j| f.k[(j, j + 2)]).collect();
            println!(
                "fitted diag(K) {:.2?}\nfitted K[j, j+1] {:.2?} (truth 0.3)\nfitted K[j, j+2] {:.2?} (truth -0.2)",
                kd, k01, k02
            );
        }
    }
}
