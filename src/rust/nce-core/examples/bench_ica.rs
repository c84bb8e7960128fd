//! CPU time of one Laplace-ICA NCE fit at N = 1000, ratio 10 (11,000 rows, 17 parameters), one
//! random whitened start, Gaussian reference with the data's covariance A A', as in bench/ica.R.
//! `cargo run --release -p nce-core --example bench_ica [fits] [threads]`
//! Prints the median and quartiles of the per-fit CPU time of the process (all threads; user +
//! system, from clock_gettime(CLOCK_PROCESS_CPUTIME_ID)), the wall time, evaluations and the error.
//! The fit is the one nce() runs for ica_model() (`fit_starts_ica`, same settings). OLD=1 runs
//! plain L-BFGS on the exact objective instead (the route before the smoothing); VALS=file writes
//! each fit's exact objective and B error, to compare the two; MICRO=1 times one objective
//! evaluation and one Fisher information.

#[path = "../tests/support/threads.rs"]
mod threads;

use nalgebra::DMatrix;
use nce_core::estimators::nonlinear::ica::{self, IcaModel};
use nce_core::estimators::nonlinear::{fit_starts, FitControl, Method, NceProblem};
use nce_core::rng::stream_rng;
use rand::Rng;
use rand_distr::StandardNormal;
use std::time::Instant;

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}
extern "C" {
    fn clock_gettime(clk: i32, tp: *mut Timespec) -> i32;
}

/// CPU seconds of the whole process.
fn cpu() -> f64 {
    let mut t = Timespec { sec: 0, nsec: 0 };
    // Safety: a plain libc call writing into `t`; 2 = CLOCK_PROCESS_CPUTIME_ID on Linux.
    unsafe { clock_gettime(2, &mut t) };
    t.sec as f64 + 1e-9 * t.nsec as f64
}

struct Problem {
    x: Vec<f64>,
    label: Vec<f64>,
    off: Vec<f64>,
    w: Vec<f64>,
    a: DMatrix<f64>,
    n_all: usize,
}

fn problem(n: usize, ratio: usize, seed: u64) -> Problem {
    let d = 4;
    let mut rng = stream_rng(seed, 0);
    let a = loop {
        let a = DMatrix::from_fn(d, d, |_, _| rng.sample::<f64, _>(StandardNormal));
        let sv = a.clone().singular_values();
        if sv.max() / sv.min() < 50.0 {
            break a;
        }
    };
    let m = ratio * n;
    let n_all = n + m;
    let cov = &a * a.transpose();
    let l = cov.clone().cholesky().unwrap().l();
    let cinv = cov.clone().try_inverse().unwrap();
    let ldet = cov.determinant().ln();
    let mut x = vec![0.0; n_all * d];
    for r in 0..n_all {
        let z: Vec<f64> = if r < n {
            (0..d)
                .map(|_| {
                    let u: f64 = rng.gen::<f64>() - 0.5;
                    -u.signum() * (1.0 - 2.0 * u.abs()).ln() / std::f64::consts::SQRT_2
                })
                .collect()
        } else {
            (0..d).map(|_| rng.sample::<f64, _>(StandardNormal)).collect()
        };
        let mix = if r < n { &a } else { &l };
        for i in 0..d {
            x[i * n_all + r] = (0..d).map(|j| mix[(i, j)] * z[j]).sum();
        }
    }
    let off: Vec<f64> = (0..n_all)
        .map(|r| {
            let u: Vec<f64> = (0..d).map(|i| x[i * n_all + r]).collect();
            let mut q = 0.0;
            for i in 0..d {
                for j in 0..d {
                    q += u[i] * cinv[(i, j)] * u[j];
                }
            }
            let lq = -0.5 * q - 0.5 * ldet - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln();
            (n as f64 / m as f64).ln() - lq
        })
        .collect();
    let label: Vec<f64> = (0..n_all).map(|r| if r < n { 1.0 } else { 0.0 }).collect();
    let xd: Vec<f64> = (0..d).flat_map(|j| x[j * n_all..j * n_all + n].to_vec()).collect();
    let w = ica::whitening(&xd, n, d).unwrap();
    Problem {
        x,
        label,
        off,
        w,
        a,
        n_all,
    }
}

/// Squared error of B after greedy alignment of rows (as bench/ica.R).
fn b_error(bh: &[f64], a: &DMatrix<f64>) -> f64 {
    let d = a.nrows();
    let bm = DMatrix::from_row_slice(d, d, bh);
    let p = &bm * a;
    let b = a.clone().try_inverse().unwrap();
    let mut al = DMatrix::zeros(d, d);
    let (mut rows, mut cols): (Vec<usize>, Vec<usize>) = ((0..d).collect(), (0..d).collect());
    for _ in 0..d {
        let (mut bi, mut bj, mut mx) = (0, 0, -1.0);
        for &i in &rows {
            for &j in &cols {
                if p[(i, j)].abs() > mx {
                    (bi, bj, mx) = (i, j, p[(i, j)].abs());
                }
            }
        }
        let s = p[(bi, bj)].signum();
        for k in 0..d {
            al[(bj, k)] = s * bm[(bi, k)];
        }
        rows.retain(|&v| v != bi);
        cols.retain(|&v| v != bj);
    }
    (al - b).iter().map(|v| v * v).sum()
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let fits: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(40);
    let nthreads: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1);
    let (n, ratio, d) = (1000, 10, 4);
    if std::env::var("MICRO").is_ok() {
        let pr = problem(n, ratio, 100);
        let model = IcaModel::new(&pr.x, pr.n_all, d).unwrap();
        let prob = NceProblem::new(&model, &pr.label, &pr.off, Method::Logistic).unwrap();
        let start = ica::random_start(&pr.w, d, 7, 0);
        let mut g = vec![0.0; 17];
        let c0 = cpu();
        for _ in 0..200 {
            prob.value_grad(&start, &mut g).unwrap();
        }
        let c1 = cpu();
        for _ in 0..20 {
            let st = prob.state(&start).unwrap();
            let _ = st.information();
        }
        let c2 = cpu();
        println!(
            "value_grad {:.3} ms, state + information {:.3} ms",
            (c1 - c0) * 5.0,
            (c2 - c1) * 50.0
        );
        return;
    }
    let mut cpus = Vec::new();
    let mut walls = Vec::new();
    let mut evals = Vec::new();
    let mut errs = Vec::new();
    let mut iters = Vec::new();
    let mut vals = Vec::new();
    for k in 0..fits {
        let pr = problem(n, ratio, 100 + k as u64);
        let model = IcaModel::new(&pr.x, pr.n_all, d).unwrap().with_parallel(true);
        let prob = NceProblem::new(&model, &pr.label, &pr.off, Method::Logistic)
            .unwrap()
            .with_parallel(true);
        let start = ica::random_start(&pr.w, d, 7, k as u64);
        let (c0, t0) = (cpu(), Instant::now());
        // the settings nce() passes for ica_model() (R/nce-nonlinear.R)
        let ctrl = FitControl {
            lbfgs: nce_core::optim::LbfgsControl {
                maxit: 2000,
                gtol: 1e-9,
                ..Default::default()
            },
            polish: 0,
            ..Default::default()
        };
        let fit = threads::with_threads(nthreads, || {
            if std::env::var("OLD").is_ok() {
                fit_starts(&prob, &[start], &ctrl, &mut || false)
            } else {
                ica::fit_starts_ica(&prob, &[start], &ctrl, &mut || false)
            }
            .unwrap()
            .starts
            .remove(0)
        })
        .unwrap();
        cpus.push(cpu() - c0);
        walls.push(t0.elapsed().as_secs_f64());
        let r = &fit;
        evals.push(r.evaluations as f64);
        iters.push(r.convergence.iterations as f64);
        errs.push(b_error(&r.par[1..], &pr.a));
        vals.push(r.value);
        if k < 3 {
            eprintln!(
                "fit {k}: {:.0} ms CPU, {} iterations, {} evaluations, value {:.6}, {}",
                1e3 * cpus[k],
                r.convergence.iterations,
                r.evaluations,
                r.value,
                r.convergence.message
            );
        }
    }
    println!(
        "{fits} fits, {nthreads} thread(s): CPU median {:.1} ms (quartiles {:.1}, {:.1}), wall median {:.1} ms; \
         evaluations median {:.0}, iterations median {:.0}; median B error {:.4}",
        1e3 * quantile(&mut cpus.clone(), 0.5),
        1e3 * quantile(&mut cpus.clone(), 0.25),
        1e3 * quantile(&mut cpus, 0.75),
        1e3 * quantile(&mut walls, 0.5),
        quantile(&mut evals, 0.5),
        quantile(&mut iters, 0.5),
        quantile(&mut errs, 0.5)
    );
    if let Ok(p) = std::env::var("VALS") {
        let txt: Vec<String> = vals.iter().zip(&errs).map(|(v, e)| format!("{v:.8} {e:.8}")).collect();
        std::fs::write(p, txt.join("\n")).unwrap();
    }
}
