//! Wall time of the thin-plate set-up's numerics at the size of bench/smooth-setup.R's term
//! (2,000 knots in 2-D, k = 30, 42,000 rows): the matrix E, its top 30 eigenpairs at mgcv's
//! tolerance 1e-11, and the rows of the basis.
//! `cargo run --release -p nce-core --example bench_tprs [reps] [threads]`

use nce_core::engine::basis::{top_eigen, tprs_e, tprs_predict, TprsBasis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

mod common;
use common::median;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(7);
    let threads: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let (n, nu, k) = (42_000usize, 2_000usize, 30usize);
    // Dimension and penalty order, for E and the basis alike (null space of 3 columns).
    let (d, m) = (2, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let x: Vec<f64> = (0..d * n).map(|_| rng.gen::<f64>()).collect();
    let xu: Vec<f64> = (0..d * nu).map(|_| rng.gen::<f64>()).collect();
    let (mut te, mut tv, mut tr) = (vec![], vec![], vec![]);
    for _ in 0..reps {
        pool.install(|| {
            let t0 = Instant::now();
            let e = tprs_e(&xu, nu, d, m).unwrap();
            te.push(t0.elapsed().as_secs_f64());
            let t0 = Instant::now();
            let (_, u) = top_eigen(&e, k, 1e-11).unwrap();
            tv.push(t0.elapsed().as_secs_f64());
            let mut uz = vec![0.0; (nu + 3) * k];
            for j in 0..k {
                for i in 0..nu {
                    uz[j * (nu + 3) + i] = u[(i, j)];
                }
            }
            let basis = TprsBasis {
                d,
                m,
                xu: &xu,
                nu,
                uz: &uz,
                k,
            };
            let t0 = Instant::now();
            let rows = tprs_predict(&x, n, &basis).unwrap();
            tr.push(t0.elapsed().as_secs_f64());
            std::hint::black_box(rows);
        });
    }
    println!(
        "{threads} threads, median of {reps}: E {:.4} s, top_eigen {:.4} s, rows {:.4} s",
        median(te),
        median(tv),
        median(tr)
    );
}
