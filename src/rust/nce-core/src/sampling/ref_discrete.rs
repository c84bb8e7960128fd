//! Discrete references for binary and categorical data: independent Bernoulli columns
//! (Ising models) and independent categorical columns on 1-based level codes (Potts models).
//! Sampling runs in parallel on seeded streams of a fixed number of rows, so draws do not
//! depend on the thread count.

use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// Draws per seeded stream.
const DRAWS_PER_STREAM: usize = 2048;

/// `n` rows of `d` columns drawn row by row by `draw`, as a column-major n x d matrix.
fn sample_rows<F>(n: usize, d: usize, seed: u64, draw: F) -> Vec<f64>
where
    F: Fn(&mut ChaCha20Rng, &mut [f64]) + Sync,
{
    let blocks: Vec<Vec<f64>> = (0..n.div_ceil(DRAWS_PER_STREAM))
        .into_par_iter()
        .map(|k| {
            let rows = DRAWS_PER_STREAM.min(n - k * DRAWS_PER_STREAM);
            let mut rng = stream_rng(seed, k as u64);
            let mut buf = vec![0.0; rows * d];
            for r in 0..rows {
                draw(&mut rng, &mut buf[r * d..(r + 1) * d]);
            }
            buf
        })
        .collect();
    let mut out = vec![0.0; n * d];
    for (k, buf) in blocks.iter().enumerate() {
        for (r, row) in buf.chunks(d.max(1)).enumerate() {
            let i = k * DRAWS_PER_STREAM + r;
            for j in 0..d {
                out[j * n + i] = row[j];
            }
        }
    }
    out
}

/// Independent Bernoulli(p_j) columns with values 0 and 1.
#[derive(Debug, Clone)]
pub struct Bernoulli {
    p: Vec<f64>,
}

impl Bernoulli {
    /// Each probability strictly between 0 and 1 (a reference must put mass on both values).
    pub fn new(p: Vec<f64>) -> Result<Self> {
        if p.is_empty() {
            return Err(NceError::invalid("prob", "needs at least one column"));
        }
        if let Some(j) = p.iter().position(|v| !(v.is_finite() && *v > 0.0 && *v < 1.0)) {
            return Err(NceError::invalid(
                "prob",
                format!("entry {} is {}, not strictly between 0 and 1", j + 1, p[j]),
            ));
        }
        Ok(Bernoulli { p })
    }

    pub fn dim(&self) -> usize {
        self.p.len()
    }

    /// `n` draws as a column-major n x d matrix of 0/1.
    pub fn sample(&self, n: usize, seed: u64) -> Vec<f64> {
        sample_rows(n, self.dim(), seed, |rng, row| {
            for (o, p) in row.iter_mut().zip(&self.p) {
                let u: f64 = rng.gen();
                *o = if u < *p { 1.0 } else { 0.0 };
            }
        })
    }

    /// log q at the rows of a column-major n x d matrix; -inf where a value is not 0 or 1.
    pub fn log_density(&self, x: &[f64], n: usize) -> Result<Vec<f64>> {
        let d = self.dim();
        if x.len() != n * d {
            return Err(NceError::invalid("x", format!("must have {d} columns")));
        }
        let lp: Vec<(f64, f64)> = self.p.iter().map(|p| (p.ln(), (-p).ln_1p())).collect();
        Ok((0..n)
            .into_par_iter()
            .map(|i| {
                let mut lq = 0.0;
                for (j, (l1, l0)) in lp.iter().enumerate() {
                    let v = x[j * n + i];
                    if v == 1.0 {
                        lq += l1;
                    } else if v == 0.0 {
                        lq += l0;
                    } else {
                        return f64::NEG_INFINITY;
                    }
                }
                lq
            })
            .collect())
    }
}

/// Independent categorical columns: column j takes codes 1..=K_j with probabilities probs[j].
#[derive(Debug, Clone)]
pub struct Categorical {
    cum: Vec<Vec<f64>>,
    logp: Vec<Vec<f64>>,
}

impl Categorical {
    /// Probabilities per column: non-negative, finite, at least two levels, summing to 1
    /// (within 1e-8; they are renormalised).
    pub fn new(probs: Vec<Vec<f64>>) -> Result<Self> {
        if probs.is_empty() {
            return Err(NceError::invalid("prob", "needs at least one column"));
        }
        let mut cum = Vec::with_capacity(probs.len());
        let mut logp = Vec::with_capacity(probs.len());
        for (j, p) in probs.iter().enumerate() {
            let s: f64 = p.iter().sum();
            if p.len() < 2 || p.iter().any(|v| !(v.is_finite() && *v >= 0.0)) || (s - 1.0).abs() > 1e-8 {
                return Err(NceError::invalid(
                    "prob",
                    format!(
                        "column {} needs at least two non-negative probabilities summing to 1",
                        j + 1
                    ),
                ));
            }
            let mut acc = 0.0;
            cum.push(
                p.iter()
                    .map(|v| {
                        acc += v / s;
                        acc
                    })
                    .collect::<Vec<f64>>(),
            );
            logp.push(p.iter().map(|v| (v / s).ln()).collect());
        }
        Ok(Categorical { cum, logp })
    }

    pub fn dim(&self) -> usize {
        self.cum.len()
    }

    /// `n` draws of 1-based codes as a column-major n x d matrix.
    pub fn sample(&self, n: usize, seed: u64) -> Vec<f64> {
        sample_rows(n, self.dim(), seed, |rng, row| {
            for (o, c) in row.iter_mut().zip(&self.cum) {
                let u: f64 = rng.gen();
                // First level whose cumulative probability exceeds u (levels of probability 0
                // are never drawn); the last level takes the rounding remainder.
                let k = c.partition_point(|v| *v <= u).min(c.len() - 1);
                *o = (k + 1) as f64;
            }
        })
    }

    /// log q at rows of 1-based codes; -inf for codes that are not levels.
    pub fn log_density(&self, x: &[f64], n: usize) -> Result<Vec<f64>> {
        let d = self.dim();
        if x.len() != n * d {
            return Err(NceError::invalid("x", format!("must have {d} columns")));
        }
        Ok((0..n)
            .into_par_iter()
            .map(|i| {
                let mut lq = 0.0;
                for (j, lp) in self.logp.iter().enumerate() {
                    let v = x[j * n + i];
                    if !(v >= 1.0 && v <= lp.len() as f64 && v.fract() == 0.0) {
                        return f64::NEG_INFINITY;
                    }
                    lq += lp[v as usize - 1];
                }
                lq
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;

    #[test]
    fn bernoulli_draws_match_p_and_are_thread_invariant() {
        let b = Bernoulli::new(vec![0.2, 0.7]).unwrap();
        let n = 100_000;
        let a = with_threads(1, || b.sample(n, 3)).unwrap();
        let c = with_threads(3, || b.sample(n, 3)).unwrap();
        assert_eq!(a, c);
        let m0 = a[..n].iter().sum::<f64>() / n as f64;
        let m1 = a[n..].iter().sum::<f64>() / n as f64;
        assert!((m0 - 0.2).abs() < 0.01 && (m1 - 0.7).abs() < 0.01, "{m0} {m1}");
        let l = b.log_density(&[1.0, 0.0, 0.0, 0.5], 2).unwrap();
        assert!((l[0] - (0.2f64.ln() + 0.3f64.ln())).abs() < 1e-15);
        assert_eq!(l[1], f64::NEG_INFINITY);
        assert!(Bernoulli::new(vec![0.0]).is_err());
        assert!(Bernoulli::new(vec![f64::NAN]).is_err());
    }

    #[test]
    fn categorical_draws_match_probabilities() {
        let c = Categorical::new(vec![vec![0.5, 0.0, 0.5], vec![0.1, 0.9]]).unwrap();
        let n = 100_000;
        let x = c.sample(n, 9);
        let count = |j: usize, k: f64| x[j * n..(j + 1) * n].iter().filter(|v| **v == k).count() as f64 / n as f64;
        assert_eq!(count(0, 2.0), 0.0);
        assert!((count(0, 1.0) - 0.5).abs() < 0.01);
        assert!((count(1, 2.0) - 0.9).abs() < 0.01);
        let l = c.log_density(&[1.0, 2.0, 4.0, 2.0, 2.0, 1.0], 3).unwrap();
        assert!((l[0] - (0.5f64.ln() + 0.9f64.ln())).abs() < 1e-15);
        assert_eq!(l[1], f64::NEG_INFINITY);
        assert_eq!(l[2], f64::NEG_INFINITY);
        assert!(Categorical::new(vec![vec![1.0]]).is_err());
        assert!(Categorical::new(vec![vec![0.5, 0.6]]).is_err());
    }
}
