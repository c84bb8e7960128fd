//! Benchmark of `reml::fit_reml` on the sequential-NCE problems written by bench/make_problem.R.
//!
//!     Rscript bench/make_problem.R subject
//!     cargo run --release -p nce-core --example bench_reml -- [DIR] [--designs grouped,dense]
//!         [--threads 1,2] [--reps N] [--micro] [--count]
//!
//! DIR defaults to /tmp/nce-bench/subject. For each design and thread count it prints the wall
//! time of the whole fit (best of N repetitions), outer/inner iterations, total edf, and the
//! differences from mgcv's gam(method = "REML") (and bam(discrete = TRUE)) fits written by the
//! R script: max |eta - eta_mgcv| over rows and max |log sp - log sp_mgcv|. `--micro` times one
//! pass of each kind; `--count` counts and times the passes over the rows of one grouped fit. A
//! problem written with no per-transition columns (pb = 0 in meta.txt) is timed on the dense design.

mod common;

use common::read_f64;
use nalgebra::{DMatrix, DVector};
use nce_core::engine::design::{DenseDesign, Design};
#[path = "../tests/support/threads.rs"]
mod threads;
use nce_core::engine::family::Family;
use nce_core::engine::grouped::GroupedDesign;
use nce_core::engine::irls::Problem;
use nce_core::engine::penalty::{Penalty, PenaltySet};
use nce_core::engine::reml::{fit_reml, RemlControl, RemlFit};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;
use threads::with_threads;

fn read_f64_opt(path: &Path) -> Option<Vec<f64>> {
    path.exists().then(|| read_f64(path))
}

struct Reference {
    tag: &'static str,
    sp: Vec<f64>,
    eta: Vec<f64>,
    edf: f64,
    info: String,
}

fn reference(dir: &Path, tag: &'static str) -> Option<Reference> {
    let sp = read_f64_opt(&dir.join(format!("{tag}_sp.bin")))?;
    let eta = read_f64(&dir.join(format!("{tag}_eta.bin")));
    let edf = read_f64(&dir.join(format!("{tag}_edf.bin"))).iter().sum();
    let info = std::fs::read_to_string(dir.join(format!("{tag}_info.txt"))).unwrap_or_default();
    Some(Reference {
        tag,
        sp,
        eta,
        edf,
        info: info.trim().to_string(),
    })
}

fn report(label: &str, secs: f64, f: &RemlFit, refs: &[Reference]) {
    let edf: f64 = f.edf.iter().sum();
    print!(
        "{label:<14} {secs:8.3} s  outer {:3} inner {:4}  edf {edf:8.4}  reml {:.6}{}",
        f.convergence.iterations,
        f.inner_iterations,
        f.reml,
        if f.convergence.converged { "" } else { "  NOT CONVERGED" }
    );
    for r in refs {
        let deta = f
            .fit
            .eta
            .iter()
            .zip(&r.eta)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let dsp =
            f.sp.iter()
                .zip(&r.sp)
                .map(|(a, b)| (a.ln() - b.ln()).abs())
                .fold(0.0, f64::max);
        print!(
            "  | vs {}: edf {:+.2}%, max|deta| {deta:.1e}, max|dlog sp| {dsp:.3}",
            r.tag,
            100.0 * (edf - r.edf) / r.edf
        );
    }
    println!();
    let dl: Vec<String> =
        f.sp.iter()
            .zip(&refs.first().map_or(vec![], |r| r.sp.clone()))
            .map(|(a, b)| format!("{:+.3}", a.ln() - b.ln()))
            .collect();
    println!(
        "{:<14} sp {:?}; log sp - log sp_gam per penalty [{}]",
        "",
        f.sp.iter().map(|v| format!("{v:.4e}")).collect::<Vec<_>>(),
        dl.join(", ")
    );
}

/// A design that counts and times the passes over the rows that a fit makes through it.
struct Counting<'a, D: Design + ?Sized> {
    d: &'a D,
    tally: Mutex<BTreeMap<&'static str, (usize, f64)>>,
}

impl<'a, D: Design + ?Sized> Counting<'a, D> {
    fn new(d: &'a D) -> Self {
        Counting {
            d,
            tally: Mutex::new(BTreeMap::new()),
        }
    }

    fn timed<T>(&self, what: &'static str, f: impl FnOnce() -> T) -> T {
        let t0 = Instant::now();
        let out = f();
        let mut t = self.tally.lock().unwrap();
        let e = t.entry(what).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += t0.elapsed().as_secs_f64();
        out
    }
}

impl<D: Design + ?Sized> Design for Counting<'_, D> {
    fn nrow(&self) -> usize {
        self.d.nrow()
    }
    fn ncol(&self) -> usize {
        self.d.ncol()
    }
    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
        self.timed("linear predictor", || self.d.linear_predictor(beta, out))
    }
    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
        self.timed("cross-product X'WX, X'Wz", || self.d.weighted_crossprod(w, v))
    }
    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        self.timed("m cross-products X'diag(w_j)X", || self.d.weighted_crossprods(weights))
    }
    fn crossprod_vec(&self, v: &[f64]) -> DVector<f64> {
        self.timed("X'v", || self.d.crossprod_vec(v))
    }
    fn intercept_column(&self) -> Option<usize> {
        self.d.intercept_column()
    }
    fn row_quadratic_forms(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        self.timed("leverages x'Mx", || self.d.row_quadratic_forms(m, out))
    }
}

/// One fit through a `Counting` design: its time, iterations and each kind of pass.
fn count_passes(d: &(dyn Design + Sync), threads: usize, prob: &Problem, pens: &PenaltySet, ctrl: &RemlControl) {
    let cd = Counting::new(d);
    let t0 = Instant::now();
    let f = with_threads(threads, || fit_reml(&cd, prob, pens, ctrl, &mut || false).unwrap()).unwrap();
    let total = t0.elapsed().as_secs_f64();
    println!(
        "{threads} threads: fit {:.1} ms, {} outer and {} inner iterations",
        total * 1e3,
        f.convergence.iterations,
        f.inner_iterations
    );
    let tally = cd.tally.into_inner().unwrap();
    let in_passes: f64 = tally.values().map(|v| v.1).sum();
    for (what, (calls, secs)) in &tally {
        println!(
            "  {what:<30} {calls:4} calls  {:8.1} ms  ({:.2} ms each)",
            secs * 1e3,
            secs * 1e3 / *calls as f64
        );
    }
    println!(
        "  outside the passes (p x p algebra, set-up)  {:.1} ms",
        (total - in_passes) * 1e3
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dir = PathBuf::from("/tmp/nce-bench/subject");
    let mut designs = vec!["grouped".to_string(), "dense".to_string()];
    let mut threads = vec![1usize, 2];
    let mut reps = 3usize;
    let mut micro = false;
    let mut count = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--designs" => {
                designs = args[i + 1].split(',').map(String::from).collect();
                i += 1;
            }
            "--threads" => {
                threads = args[i + 1].split(',').map(|s| s.parse().unwrap()).collect();
                i += 1;
            }
            "--reps" => {
                reps = args[i + 1].parse().unwrap();
                i += 1;
            }
            "--micro" => micro = true,
            "--count" => count = true,
            other => dir = PathBuf::from(other),
        }
        i += 1;
    }

    let meta: Vec<usize> = std::fs::read_to_string(dir.join("meta.txt"))
        .expect("meta.txt: run bench/make_problem.R first")
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    let (n, ng, pa, pb) = (meta[0], meta[1], meta[2], meta[3]);
    let p = pa + pb;
    let a = read_f64(&dir.join("A.bin"));
    let b = read_f64(&dir.join("B.bin"));
    let group: Vec<usize> = std::fs::read(dir.join("group.bin"))
        .unwrap()
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect();
    let y = read_f64(&dir.join("y.bin"));
    let offset = read_f64(&dir.join("offset.bin"));
    let pens: Vec<Penalty> = std::fs::read_to_string(dir.join("pen.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let k: usize = f[1].parse().unwrap();
            let s = read_f64(&dir.join(f[2]));
            Penalty {
                start: f[0].parse().unwrap(),
                s: DMatrix::from_column_slice(k, k, &s),
            }
        })
        .collect();
    let pens = PenaltySet::new(p, pens).unwrap();
    let refs: Vec<Reference> = ["gam", "bam"].into_iter().filter_map(|t| reference(&dir, t)).collect();
    println!(
        "{}: {n} rows, {ng} transitions, {pa} + {pb} columns, {} penalties; dense design {:.1} MB",
        dir.display(),
        pens.len(),
        (n * p * 8) as f64 / 1048576.0
    );
    for r in &refs {
        println!(
            "  mgcv {}: seconds, score, outer = {}; edf {:.4}; sp {:?}",
            r.tag, r.info, r.edf, r.sp
        );
    }

    let w = vec![1.0; n];
    let prob = Problem::new(&y, &w, &offset, Family::Binomial);
    let ctrl = RemlControl::default();
    if micro || count {
        // One design: the grouped one, or for a problem without per-transition columns (pb = 0)
        // the dense one.
        let (dd, gdd);
        let gd: &(dyn Design + Sync) = if pb == 0 {
            dd = DenseDesign::new(&a, n, pa).unwrap();
            &dd
        } else {
            gdd = GroupedDesign::new(&a, n, pa, &b, ng, pb, &group).unwrap();
            &gdd
        };
        if count {
            for &th in &threads {
                count_passes(gd, th, &prob, &pens, &ctrl);
            }
            return;
        }
        // Per-pass costs: one weighted cross-product, leverages, linear predictor.
        let wt: Vec<f64> = (0..n).map(|i| 0.05 + (i % 7) as f64 * 0.01).collect();
        let hinv = DMatrix::<f64>::identity(p, p) * 1e-3;
        for &th in &threads {
            with_threads(th, || {
                let reps = 50;
                let t0 = Instant::now();
                for _ in 0..reps {
                    std::hint::black_box(gd.weighted_crossprod(&wt, &wt));
                }
                let t1 = t0.elapsed().as_secs_f64() / reps as f64;
                let t0 = Instant::now();
                for _ in 0..reps {
                    std::hint::black_box(gd.weighted_crossprods(&[&wt, &wt, &wt, &wt, &wt]));
                }
                let t5 = t0.elapsed().as_secs_f64() / reps as f64;
                let mut lev = vec![0.0; n];
                let t0 = Instant::now();
                for _ in 0..reps {
                    gd.row_quadratic_forms(&hinv, &mut lev);
                }
                let tq = t0.elapsed().as_secs_f64() / reps as f64;
                let beta = vec![0.1; p];
                let t0 = Instant::now();
                for _ in 0..reps {
                    gd.linear_predictor(&beta, &mut lev);
                }
                let tl = t0.elapsed().as_secs_f64() / reps as f64;
                println!(
                    "{th} threads: crossprod {:.2} ms, 5 crossprods {:.2} ms, leverages {:.2} ms, linear predictor {:.2} ms",
                    t1 * 1e3, t5 * 1e3, tq * 1e3, tl * 1e3
                );
            })
            .unwrap();
        }
        return;
    }
    let run = |d: &dyn Fn() -> (f64, RemlFit), label: &str| {
        let mut best: Option<(f64, RemlFit)> = None;
        for _ in 0..reps {
            let (t, f) = d();
            if best.as_ref().map_or(true, |(bt, _)| t < *bt) {
                best = Some((t, f));
            }
        }
        let (t, f) = best.unwrap();
        report(label, t, &f, &refs);
        f
    };
    let mut fits: Vec<RemlFit> = Vec::new();
    for design in &designs {
        match design.as_str() {
            "grouped" => {
                let gd = GroupedDesign::new(&a, n, pa, &b, ng, pb, &group).unwrap();
                for &th in &threads {
                    let f = run(
                        &|| {
                            with_threads(th, || {
                                let t0 = Instant::now();
                                let f = fit_reml(&gd, &prob, &pens, &ctrl, &mut || false).unwrap();
                                (t0.elapsed().as_secs_f64(), f)
                            })
                            .unwrap()
                        },
                        &format!("grouped {th}t"),
                    );
                    fits.push(f);
                }
            }
            "dense" => {
                let mut x = Vec::with_capacity(n * p);
                x.extend_from_slice(&a);
                for j in 0..pb {
                    x.extend(group.iter().map(|&t| b[j * ng + t]));
                }
                let dd = DenseDesign::new(&x, n, p).unwrap();
                assert_eq!(dd.ncol(), p);
                for &th in &threads {
                    let f = run(
                        &|| {
                            with_threads(th, || {
                                let t0 = Instant::now();
                                let f = fit_reml(&dd, &prob, &pens, &ctrl, &mut || false).unwrap();
                                (t0.elapsed().as_secs_f64(), f)
                            })
                            .unwrap()
                        },
                        &format!("dense {th}t"),
                    );
                    fits.push(f);
                }
            }
            other => panic!("unknown design {other}"),
        }
    }
    // Thread counts must give the same bits (per design); designs agree to rounding.
    let per = threads.len();
    for (k, chunk) in fits.chunks(per).enumerate() {
        let same = chunk
            .windows(2)
            .all(|w| w[0].coefficients == w[1].coefficients && w[0].reml == w[1].reml);
        println!("{}: results identical across threads: {same}", designs[k]);
    }
    if fits.len() > per {
        let (f1, f2) = (&fits[0], &fits[per]);
        let dc = f1
            .coefficients
            .iter()
            .zip(&f2.coefficients)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!(
            "grouped vs dense: max|coef diff| {dc:.2e}, score diff {:.2e}",
            f1.reml - f2.reml
        );
    }
}
