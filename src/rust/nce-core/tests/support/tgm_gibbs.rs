//! Test support: draws from the truncated Gaussian graphical model exp(-x'Kx/2) on (0, inf)^d by
//! Gibbs sampling (each full conditional is a normal truncated to (0, inf), drawn by inversion),
//! missing-value masks, independent exponential noise with its log density, and the VNCE problem
//! on data and noise.

#![allow(dead_code)]

use nce_core::estimators::vnce::{TgmVnce, VnceSamples};
use nce_core::rng::stream_rng;
use rand::Rng;
use statrs::distribution::{ContinuousCDF, Normal};

/// n draws (column-major n x d) from one Gibbs chain after `burn` sweeps, `thin` sweeps apart.
pub fn sample_tgm(k: &[f64], d: usize, n: usize, burn: usize, thin: usize, seed: u64) -> Vec<f64> {
    let std = Normal::new(0.0, 1.0).unwrap();
    let mut rng = stream_rng(seed, 0);
    let mut x = vec![1.0; d];
    let mut out = vec![0.0; n * d];
    for sweep in 0..burn + n * thin {
        for j in 0..d {
            let a = k[j * d + j];
            let b: f64 = (0..d).filter(|&l| l != j).map(|l| k[j * d + l] * x[l]).sum();
            let (m, s) = (-b / a, 1.0 / a.sqrt());
            // z > alpha = -m / s, drawn as -Phi^{-1}(U Phi(-alpha)) (stable in the upper tail).
            let alpha = -m / s;
            let u: f64 = rng.gen_range(1e-300..1.0);
            let z = -std.inverse_cdf(u * std.cdf(-alpha));
            x[j] = (m + s * z).max(1e-300);
        }
        if sweep >= burn && (sweep - burn) % thin == thin - 1 {
            let i = (sweep - burn) / thin;
            for j in 0..d {
                out[j * n + i] = x[j];
            }
        }
    }
    out
}

/// Sets entries to NaN with probability `p`, never a whole row; with `one` at most one per row.
pub fn mask(x: &mut [f64], n: usize, d: usize, p: f64, one: bool, seed: u64) {
    let mut rng = stream_rng(seed, 1);
    for i in 0..n {
        if one {
            if rng.gen::<f64>() < p {
                let j = rng.gen_range(0..d);
                x[j * n + i] = f64::NAN;
            }
            continue;
        }
        let mut left = d;
        for j in 0..d {
            if left > 1 && rng.gen::<f64>() < p {
                x[j * n + i] = f64::NAN;
                left -= 1;
            }
        }
    }
}

/// Independent exponential noise (rate 1 / column mean of the observed data): m = nu * n rows,
/// missing where the paired data row is, and log p_y of the observed coordinates of x and y.
pub fn exp_noise(x: &[f64], n: usize, d: usize, nu: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let rate: Vec<f64> = (0..d)
        .map(|j| {
            let v: Vec<f64> = (0..n).map(|i| x[j * n + i]).filter(|v| !v.is_nan()).collect();
            v.len() as f64 / v.iter().sum::<f64>()
        })
        .collect();
    let m = nu * n;
    let mut rng = stream_rng(seed, 2);
    let mut y = vec![0.0; m * d];
    for k in 0..m {
        for j in 0..d {
            let u: f64 = rng.gen_range(1e-300..1.0);
            y[j * m + k] = if x[j * n + k % n].is_nan() {
                f64::NAN
            } else {
                -u.ln() / rate[j]
            };
        }
    }
    let lp = |v: &[f64], nr: usize| -> Vec<f64> {
        (0..nr)
            .map(|i| {
                (0..d)
                    .filter(|&j| !v[j * nr + i].is_nan())
                    .map(|j| rate[j].ln() - rate[j] * v[j * nr + i])
                    .sum()
            })
            .collect()
    };
    (y.clone(), lp(x, n), lp(&y, m))
}

/// `exp_noise(x, .., noise_seed)` and the VNCE problem on x and it, with `n_latent` draws per
/// row with missing values from stream `seed`: (problem, y, lpx, lpy).
pub fn tgm_vnce(
    x: &[f64],
    n: usize,
    d: usize,
    nu: usize,
    n_latent: usize,
    noise_seed: u64,
    seed: u64,
) -> (TgmVnce, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (y, lpx, lpy) = exp_noise(x, n, d, nu, noise_seed);
    let samples = VnceSamples {
        x,
        n,
        d,
        y: &y,
        m: nu * n,
        lpx: &lpx,
        lpy: &lpy,
    };
    let pr = TgmVnce::new(&samples, n_latent, seed).unwrap();
    (pr, y, lpx, lpy)
}

/// A banded precision matrix (row-major): diagonal 1, 1.25, 1.5, .., first off-diagonal 0.3,
/// second -0.2; positive definite (smallest eigenvalue 0.245 at d = 20).
pub fn k_true(d: usize) -> Vec<f64> {
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
