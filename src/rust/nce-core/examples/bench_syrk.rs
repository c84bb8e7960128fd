//! Wall time of the dense design's passes at the size of the three-term fit's REML
//! (42,000 rows, 48 columns): X'WX with X'v, X'WX alone, X beta, and the rows' quadratic forms.
//! `cargo run --release -p nce-core --example bench_syrk [reps] [threads] [ncol]`

use nalgebra::DMatrix;
use nce_core::engine::design::{DenseDesign, Design};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

mod common;
use common::median;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(21);
    let threads: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let p: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(48);
    // "syrk": time X'WX + X'v alone (for whole-process A/B timings of the kernel).
    let only = args.get(4).is_some_and(|s| s == "syrk");
    let n = 42_000usize;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let x: Vec<f64> = (0..n * p).map(|_| rng.gen::<f64>() - 0.5).collect();
    let w: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
    let v: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
    let beta: Vec<f64> = (0..p).map(|_| rng.gen::<f64>()).collect();
    let m = DMatrix::from_fn(p, p, |i, j| if i == j { 1.0 } else { 0.01 * (i + j) as f64 });
    let d = DenseDesign::new(&x, n, p).unwrap();
    let (mut t1, mut t2, mut t3, mut t4) = (vec![], vec![], vec![], vec![]);
    let mut eta = vec![0.0; n];
    let mut q = vec![0.0; n];
    for _ in 0..reps {
        pool.install(|| {
            let t0 = Instant::now();
            std::hint::black_box(d.weighted_crossprod(&w, &v));
            t1.push(t0.elapsed().as_secs_f64());
            if only {
                return;
            }
            let t0 = Instant::now();
            std::hint::black_box(d.weighted_crossprods(&[&w]));
            t2.push(t0.elapsed().as_secs_f64());
            let t0 = Instant::now();
            d.linear_predictor(&beta, &mut eta);
            t3.push(t0.elapsed().as_secs_f64());
            let t0 = Instant::now();
            d.row_quadratic_forms(&m, &mut q);
            t4.push(t0.elapsed().as_secs_f64());
        });
    }
    let flops = 2.0 * n as f64 * (p * (p + 1) / 2) as f64;
    let s1 = median(t1);
    if only {
        println!("{threads} threads, {n} x {p}: X'WX+X'v {:.2} ms", 1e3 * s1);
        return;
    }
    println!(
        "{threads} threads, {n} x {p}, median of {reps}: X'WX+X'v {:.2} ms ({:.1} GFLOP/s), X'WX {:.2} ms, X b {:.2} ms, quad {:.2} ms",
        1e3 * s1,
        flops / s1 / 1e9,
        1e3 * median(t2),
        1e3 * median(t3),
        1e3 * median(t4)
    );
}
