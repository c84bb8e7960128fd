//! VNCE for the truncated Gaussian graphical model, against truth: finite-difference gradients,
//! the NCE logistic regression when nothing is missing, the closed-form marginal when at most one
//! value per row is missing, and thread invariance.

mod support;

use nalgebra::DMatrix;
use nce_core::design::{with_threads, DenseDesign};
use nce_core::family::{log1pexp, Family};
use nce_core::irls;
use nce_core::optim::{minimise_lbfgs, LbfgsControl, Objective};
use nce_core::rng::stream_rng;
use nce_core::vnce::{fit, n_params, TgmParams, TgmVnce, Terms};
use rand::Rng;
use statrs::distribution::{Continuous, ContinuousCDF, Normal};
use support::tgm_gibbs::{exp_noise, mask, sample_tgm};

fn k_true(d: usize) -> Vec<f64> {
    let mut k = vec![0.0; d * d];
    for i in 0..d {
        k[i * d + i] = 1.0 + 0.25 * (i % 3) as f64;
        if i + 1 < d {
            k[i * d + i + 1] = 0.3;
            k[(i + 1) * d + i] = 0.3;
        }
        if i + 2 < d {
            k[i * d + i + 2] = -0.2;
            k[(i + 2) * d + i] = -0.2;
        }
    }
    k
}

/// Arbitrary parameters: K and prec positive definite, everything else spread out.
fn random_params(d: usize, seed: u64) -> TgmParams {
    let mut rng = stream_rng(seed, 9);
    let mut u = |a: f64, b: f64| rng.gen_range(a..b);
    let mut k = DMatrix::zeros(d, d);
    let mut b = DMatrix::zeros(d, d);
    for i in 0..d {
        for j in 0..d {
            b[(i, j)] = u(-0.5, 0.5);
        }
        k[(i, i)] = u(1.0, 2.0);
        for j in 0..i {
            let v = u(-0.3, 0.3);
            k[(i, j)] = v;
            k[(j, i)] = v;
        }
    }
    let prec = &b * b.transpose() + DMatrix::identity(d, d) * u(0.5, 2.0);
    let c = u(-1.0, 1.0);
    let mu = (0..d).map(|_| u(-1.0, 0.5)).collect();
    TgmParams::from_precision(k, c, mu, &prec, "params").unwrap()
}

/// Data with the given missingness, exponential noise, and the VNCE problem.
fn problem(d: usize, n: usize, nu: usize, s: usize, p_miss: f64, one: bool, seed: u64) -> (TgmVnce, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut x = sample_tgm(&k_true(d), d, n, 200, 3, seed);
    if p_miss > 0.0 {
        mask(&mut x, n, d, p_miss, one, seed);
    }
    let (y, lpx, lpy) = exp_noise(&x, n, d, nu, seed);
    let pr = TgmVnce::new(&x, n, d, &y, nu * n, &lpx, &lpy, s, seed).unwrap();
    (pr, x, y, lpx, lpy)
}

/// Largest |analytic - central difference| over the largest |central difference|.
fn fd_error(pr: &TgmVnce, p: &TgmParams, terms: Terms) -> f64 {
    let d = p.dim();
    let x0 = p.pack();
    let (_, g) = pr.evaluate(p, terms).unwrap();
    let h = 1e-5;
    let mut num = vec![0.0; x0.len()];
    for i in 0..x0.len() {
        let mut xp = x0.clone();
        let mut xm = x0.clone();
        xp[i] += h;
        xm[i] -= h;
        let fp = pr.evaluate(&TgmParams::unpack(d, &xp).unwrap(), terms).unwrap().0;
        let fm = pr.evaluate(&TgmParams::unpack(d, &xm).unwrap(), terms).unwrap().0;
        num[i] = (fp - fm) / (2.0 * h);
    }
    let scale = num.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    g.iter().zip(&num).fold(0.0f64, |m, (a, b)| m.max((a - b).abs())) / scale
}

#[test]
fn gradient_matches_finite_differences() {
    let d = 4;
    let (pr, x, ..) = problem(d, 40, 2, 5, 0.35, false, 11);
    // Mixed patterns: complete rows and rows with 1, 2 and 3 missing values.
    let counts: Vec<usize> = (0..40).map(|i| (0..d).filter(|&j| x[j * 40 + i].is_nan()).count()).collect();
    for c in 0..4 {
        assert!(counts.contains(&c), "no row with {c} missing values");
    }
    for seed in [1, 2, 3] {
        let p = random_params(d, seed);
        for terms in [Terms::Data, Terms::Noise, Terms::Both] {
            let e = fd_error(&pr, &p, terms);
            println!("params {seed}, {terms:?}: max relative gradient error {e:.2e}");
            assert!(e < 1e-6, "{terms:?}: relative error {e}");
        }
    }
}

#[test]
fn same_value_and_gradient_with_one_and_two_threads() {
    let (pr, ..) = problem(5, 150, 3, 7, 0.3, false, 5);
    let p = random_params(5, 4);
    let a = with_threads(1, || pr.evaluate(&p, Terms::Both).unwrap()).unwrap();
    let b = with_threads(2, || pr.evaluate(&p, Terms::Both).unwrap()).unwrap();
    assert!(a.0.is_finite());
    assert_eq!(a.0.to_bits(), b.0.to_bits());
    assert!(a.1.iter().zip(&b.1).all(|(u, v)| u.to_bits() == v.to_bits()));
}

#[test]
fn bad_inputs_name_the_argument() {
    let d = 2;
    let x = vec![1.0, 2.0, f64::NAN, 0.5, 1.0, 3.0];
    let y_ok = vec![1.0, 2.0, f64::NAN, 0.5, 1.0, 3.0];
    let lp = vec![0.0; 3];
    assert!(TgmVnce::new(&x, 3, d, &y_ok, 3, &lp, &lp, 4, 1).is_ok());
    let y_bad = vec![1.0, 2.0, 2.0, 0.5, 1.0, 3.0];
    let e = TgmVnce::new(&x, 3, d, &y_bad, 3, &lp, &lp, 4, 1).unwrap_err().to_string();
    assert!(e.starts_with("`y`") && e.contains("row 3"), "{e}");
    let x_neg = vec![1.0, -2.0, f64::NAN, 0.5, 1.0, 3.0];
    let e = TgmVnce::new(&x_neg, 3, d, &y_ok, 3, &lp, &lp, 4, 1).unwrap_err().to_string();
    assert!(e.starts_with("`x`") && e.contains("row 2"), "{e}");
    let x_all = vec![1.0, 2.0, f64::NAN, 0.5, 1.0, f64::NAN];
    let e = TgmVnce::new(&x_all, 3, d, &y_ok, 3, &lp, &lp, 4, 1).unwrap_err().to_string();
    assert!(e.starts_with("`x`") && e.contains("row 3") && e.contains("every value missing"), "{e}");
    let e = TgmVnce::new(&x, 3, d, &y_ok[..4], 2, &lp, &lp[..2], 4, 1).unwrap_err().to_string();
    assert!(e.starts_with("`y`") && e.contains("multiple"), "{e}");
}
