//! Gibbs sampler for the truncated Gaussian graphical model: density on the positive orthant
//! proportional to exp(-(x - m)' K (x - m) / 2), K symmetric positive definite.
//!
//! Each coordinate is redrawn from its full conditional, a univariate normal truncated to
//! (0, inf). Chains run in parallel, chain c on stream c, so output does not depend on threads.

use crate::alloc::{checked_len, try_filled, try_with_capacity};
use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use crate::sampling::truncnorm::sample_std;
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Checked model: precision K (column-major d x d) and mean m.
struct Model {
    d: usize,
    k: Vec<f64>,
    m: Vec<f64>,
}

impl Model {
    /// `require_pd = false` accepts any K with a positive diagonal: the caller has checked that
    /// exp(-x'Kx/2) is integrable on the orthant (K strictly copositive, mean zero).
    fn new_with(k: &[f64], mean: &[f64], require_pd: bool) -> Result<Self> {
        let d = mean.len();
        if d == 0 {
            return Err(NceError::invalid("mean", "must have at least one entry"));
        }
        if let Some(i) = mean.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid("mean", format!("entry {} is not finite", i + 1)));
        }
        if k.len() != d * d {
            return Err(NceError::invalid(
                "K",
                format!("must be {d} x {d} to match `mean`, has {} entries", k.len()),
            ));
        }
        if k.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid("K", "has non-finite entries"));
        }
        for i in 0..d {
            for j in 0..i {
                let (a, b) = (k[i + j * d], k[j + i * d]);
                if (a - b).abs() > 1e-10 * a.abs().max(b.abs()).max(1e-300) {
                    return Err(NceError::invalid(
                        "K",
                        format!(
                            "is not symmetric (entries [{}, {}] and [{}, {}])",
                            i + 1,
                            j + 1,
                            j + 1,
                            i + 1
                        ),
                    ));
                }
            }
        }
        if require_pd && DMatrix::from_column_slice(d, d, k).cholesky().is_none() {
            return Err(NceError::invalid("K", "is not positive definite"));
        }
        if !require_pd
            && ((0..d).any(|j| k[j * d + j].is_nan() || k[j * d + j] <= 0.0) || mean.iter().any(|&v| v != 0.0))
        {
            return Err(NceError::invalid(
                "K",
                "must have a positive diagonal (and the mean must be zero) without the positive-definite check",
            ));
        }
        Ok(Model {
            d,
            k: k.to_vec(),
            m: mean.to_vec(),
        })
    }

    /// One Gibbs sweep over the coordinates in order.
    fn sweep<R: rand::Rng>(&self, rng: &mut R, x: &mut [f64]) {
        let d = self.d;
        for j in 0..d {
            let col = &self.k[j * d..(j + 1) * d];
            let kjj = col[j];
            let mut s = 0.0;
            for (k, (&kjk, (&xk, &mk))) in col.iter().zip(x.iter().zip(&self.m)).enumerate() {
                if k != j {
                    s += kjk * (xk - mk);
                }
            }
            let sd = 1.0 / kjj.sqrt();
            let mu = self.m[j] - s / kjj;
            x[j] = (mu + sd * sample_std(rng, -mu / sd)).max(0.0);
        }
    }
}

/// How the Gibbs chains run.
#[derive(Clone, Debug)]
pub struct Gibbs<'a> {
    /// Sweeps discarded at the start of each chain.
    pub burnin: usize,
    /// Every `thin`-th sweep is kept (at least 1).
    pub thin: usize,
    /// Number of chains (at least 1).
    pub chains: usize,
    /// Start of every chain; `None`: 1 / sqrt(diag K).
    pub start: Option<&'a [f64]>,
    /// `false`: K need only have a positive diagonal and the mean must be zero, for a K the caller
    /// has found strictly copositive (a fitted model that is normalisable on the orthant without
    /// being positive definite).
    pub require_pd: bool,
}

impl Default for Gibbs<'_> {
    fn default() -> Self {
        Gibbs {
            burnin: 0,
            thin: 1,
            chains: 1,
            start: None,
            require_pd: true,
        }
    }
}

/// `n` draws (n x d, column-major) from `g.chains` Gibbs chains after `g.burnin` sweeps, keeping
/// every `g.thin`-th sweep. Chain c takes n / chains draws (the first n % chains chains one more)
/// and uses stream c of `seed`; rows of chain 0 come first. Stops with `Interrupted` once `stop` is
/// set (checked every 64 sweeps).
pub fn simulate(n: usize, k: &[f64], mean: &[f64], g: &Gibbs, seed: u64, stop: &AtomicBool) -> Result<Vec<f64>> {
    let Gibbs {
        burnin,
        thin,
        chains,
        start,
        require_pd,
    } = *g;
    let model = Model::new_with(k, mean, require_pd)?;
    let d = model.d;
    if thin == 0 {
        return Err(NceError::invalid("thin", "must be at least 1"));
    }
    if chains == 0 {
        return Err(NceError::invalid("chains", "must be at least 1"));
    }
    let x0: Vec<f64> = match start {
        Some(s) => {
            if s.len() != d {
                return Err(NceError::invalid(
                    "start",
                    format!("must have {d} entries, has {}", s.len()),
                ));
            }
            if let Some(i) = s.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(NceError::invalid(
                    "start",
                    format!("entry {} must be finite and non-negative, is {}", i + 1, s[i]),
                ));
            }
            s.to_vec()
        }
        None => (0..d).map(|j| 1.0 / model.k[j * d + j].sqrt()).collect(),
    };
    if thin.checked_mul(n).is_none() {
        return Err(NceError::invalid("n", "is too large"));
    }
    let len = checked_len(&[n, d], "the TGM draws")?;
    // The result, reserved before any chain runs so that an impossible size fails at once.
    let mut res = try_filled(len, 0.0, "the TGM draws")?;
    let sizes: Vec<usize> = (0..chains).map(|c| n / chains + usize::from(c < n % chains)).collect();
    let runs: Vec<Result<Vec<f64>>> = (0..chains)
        .into_par_iter()
        .map(|c| {
            let mut rng = stream_rng(seed, c as u64);
            let mut x = x0.clone();
            let mut out = try_with_capacity(sizes[c] * d, "the TGM draws")?;
            let mut sweeps = 0usize;
            let mut step = |x: &mut [f64]| -> Result<()> {
                sweeps += 1;
                if sweeps % 64 == 0 && stop.load(Ordering::Relaxed) {
                    return Err(NceError::Interrupted);
                }
                model.sweep(&mut rng, x);
                Ok(())
            };
            if sizes[c] == 0 {
                return Ok(out);
            }
            for _ in 0..burnin {
                step(&mut x)?;
            }
            for _ in 0..sizes[c] {
                for _ in 0..thin {
                    step(&mut x)?;
                }
                out.extend_from_slice(&x);
            }
            Ok(out)
        })
        .collect();
    // Row-major chain blocks to one column-major matrix.
    let mut row = 0;
    for r in runs {
        let block = r?;
        for (i, xi) in block.chunks(d).enumerate() {
            for (j, v) in xi.iter().enumerate() {
                res[j * n + row + i] = *v;
            }
        }
        row += block.len() / d;
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;
    use crate::sampling::truncnorm::moments;

    /// `simulate` with positive-definite K and no interruption; `sweeps` = (burnin, thin, chains).
    fn sim(
        n: usize,
        k: &[f64],
        m: &[f64],
        sweeps: (usize, usize, usize),
        start: Option<&[f64]>,
        seed: u64,
    ) -> Result<Vec<f64>> {
        let (burnin, thin, chains) = sweeps;
        let g = Gibbs {
            burnin,
            thin,
            chains,
            start,
            require_pd: true,
        };
        simulate(n, k, m, &g, seed, &AtomicBool::new(false))
    }

    #[test]
    fn one_dimension_matches_truncated_normal() {
        let (m, sd) = (-0.7, 1.3);
        let n = 100_000;
        let x = sim(n, &[1.0 / (sd * sd)], &[m], (10, 1, 2), None, 3).unwrap();
        let nf = n as f64;
        let mean = x.iter().sum::<f64>() / nf;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (nf - 1.0);
        let m4 = x.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / nf;
        let (tm, tv) = moments(m, sd, 0.0);
        // d = 1: every sweep is an exact independent draw.
        assert!((mean - tm).abs() < 5.0 * (tv / nf).sqrt(), "{mean} vs {tm}");
        assert!((var - tv).abs() < 5.0 * ((m4 - var * var) / nf).sqrt(), "{var} vs {tv}");
    }

    /// E[x], E[x x'] of the 2-D model by Simpson's rule on [0, 10]^2.
    fn quadrature(k: &[f64], m: &[f64]) -> ([f64; 2], [[f64; 2]; 2]) {
        let g = 2000;
        let h = 10.0 / g as f64;
        let w = |i: usize| {
            if i == 0 || i == g {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            }
        };
        let (mut z, mut e1, mut e2) = (0.0, [0.0; 2], [[0.0; 2]; 2]);
        for i in 0..=g {
            for j in 0..=g {
                let x = [i as f64 * h, j as f64 * h];
                let r = [x[0] - m[0], x[1] - m[1]];
                let q = k[0] * r[0] * r[0] + 2.0 * k[1] * r[0] * r[1] + k[3] * r[1] * r[1];
                let p = w(i) * w(j) * (-0.5 * q).exp();
                z += p;
                for a in 0..2 {
                    e1[a] += p * x[a];
                    for b in 0..2 {
                        e2[a][b] += p * x[a] * x[b];
                    }
                }
            }
        }
        let mean = [e1[0] / z, e1[1] / z];
        let mut cov = [[0.0; 2]; 2];
        for a in 0..2 {
            for b in 0..2 {
                cov[a][b] = e2[a][b] / z - mean[a] * mean[b];
            }
        }
        (mean, cov)
    }

    /// Batch-means standard error of the mean of a chain's statistic.
    fn batch_se(v: &[f64], batches: usize) -> f64 {
        let b = v.len() / batches;
        let means: Vec<f64> = (0..batches)
            .map(|i| v[i * b..(i + 1) * b].iter().sum::<f64>() / b as f64)
            .collect();
        let mm = means.iter().sum::<f64>() / batches as f64;
        let var = means.iter().map(|x| (x - mm).powi(2)).sum::<f64>() / (batches - 1) as f64;
        (var / batches as f64).sqrt()
    }

    #[test]
    fn two_dimensions_match_quadrature() {
        // Negative partial correlation (K_12 > 0) and one mean below the boundary.
        let k = [1.0, 0.6, 0.6, 2.0];
        let m = [0.5, -0.3];
        let n = 120_000;
        // One chain so the batches are consecutive stretches of one chain.
        let x = sim(n, &k, &m, (100, 1, 1), None, 11).unwrap();
        let (tm, tc) = quadrature(&k, &m);
        let col = |j: usize| &x[j * n..(j + 1) * n];
        for a in 0..2 {
            let xa = col(a);
            let ma = xa.iter().sum::<f64>() / n as f64;
            let se = batch_se(xa, 60);
            assert!((ma - tm[a]).abs() < 5.0 * se, "mean {a}: {ma} vs {} (se {se})", tm[a]);
            for b in a..2 {
                let xb = col(b);
                let prod: Vec<f64> = xa.iter().zip(xb).map(|(u, v)| (u - tm[a]) * (v - tm[b])).collect();
                let c = prod.iter().sum::<f64>() / n as f64;
                let se = batch_se(&prod, 60);
                assert!(
                    (c - tc[a][b]).abs() < 5.0 * se,
                    "cov {a}{b}: {c} vs {} (se {se})",
                    tc[a][b]
                );
            }
        }
    }

    #[test]
    fn same_draws_for_any_thread_count() {
        let k = [2.0, -0.5, 0.1, -0.5, 1.5, 0.2, 0.1, 0.2, 1.0];
        let m = [0.1, 1.0, -2.0];
        let run = || sim(1001, &k, &m, (5, 2, 4), Some(&[1.0, 1.0, 1.0]), 9).unwrap();
        let a = with_threads(1, run).unwrap();
        let b = with_threads(2, run).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 3003);
        assert!(a.iter().all(|&v| v >= 0.0));
        // Chain 0 (251 rows) comes first and starts from its own stream.
        let c0 = sim(251, &k, &m, (5, 2, 1), Some(&[1.0, 1.0, 1.0]), 9).unwrap();
        for j in 0..3 {
            assert_eq!(&a[j * 1001..j * 1001 + 251], &c0[j * 251..(j + 1) * 251]);
        }
    }

    #[test]
    fn validates_arguments() {
        let e = sim(10, &[1.0, 2.0, 2.0, 1.0], &[0.0, 0.0], (1, 1, 1), None, 1).unwrap_err();
        assert!(e.to_string().contains("not positive definite"), "{e}");
        assert!(sim(10, &[1.0, 0.5, 0.4, 1.0], &[0.0, 0.0], (1, 1, 1), None, 1).is_err());
        assert!(sim(10, &[1.0], &[0.0, 0.0], (1, 1, 1), None, 1).is_err());
        assert!(sim(10, &[1.0], &[0.0], (1, 0, 1), None, 1).is_err());
        assert!(sim(10, &[1.0], &[0.0], (1, 1, 0), None, 1).is_err());
        assert!(sim(10, &[1.0], &[0.0], (1, 1, 1), Some(&[-1.0]), 1).is_err());
        assert!(sim(10, &[1.0], &[f64::NAN], (1, 1, 1), None, 1).is_err());
        let stop = AtomicBool::new(true);
        assert_eq!(
            simulate(
                10,
                &[1.0],
                &[0.0],
                &Gibbs {
                    burnin: 1000,
                    ..Gibbs::default()
                },
                1,
                &stop
            )
            .unwrap_err(),
            NceError::Interrupted
        );
    }

    #[test]
    fn copositive_k_needs_require_pd_false() {
        // K = [[1, 1.5], [1.5, 1]]: indefinite, but exp(-x'Kx/2) is integrable on the orthant.
        let k = [1.0, 1.5, 1.5, 1.0];
        let stop = AtomicBool::new(false);
        let pd = Gibbs::default();
        assert!(simulate(5, &k, &[0.0, 0.0], &pd, 1, &stop).is_err());
        let cop = Gibbs {
            require_pd: false,
            ..Gibbs::default()
        };
        let x = simulate(5, &k, &[0.0, 0.0], &cop, 1, &stop).unwrap();
        assert!(x.len() == 10 && x.iter().all(|&v| v >= 0.0));
        // Without the positive-definite check the mean must be zero.
        assert!(simulate(5, &k, &[0.1, 0.0], &cop, 1, &stop).is_err());
    }
}
