//! Reference kernels q(y_t | y_{t-1}) of sequential NCE: a normal random walk around the
//! previous state, independent per dimension, optionally truncated to a window.

use crate::alloc::{checked_len, try_filled};
use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use rand::Rng;
use rayon::prelude::*;
use statrs::distribution::{Continuous, ContinuousCDF, Normal};

/// Transitions per seeded stream; fixed so that draws do not depend on the thread count.
const TRANSITIONS_PER_STREAM: usize = 256;

#[derive(Debug, Clone)]
pub struct NormalKernel {
    sd: Vec<f64>,
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl NormalKernel {
    /// `lower`/`upper` may be infinite (no truncation in that direction).
    pub fn new(sd: Vec<f64>, lower: Vec<f64>, upper: Vec<f64>) -> Result<Self> {
        let d = sd.len();
        if d == 0 || lower.len() != d || upper.len() != d {
            return Err(NceError::invalid(
                "sd",
                "sd, lower and upper must have one entry per state column",
            ));
        }
        if let Some(j) = sd.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(NceError::invalid(
                "sd",
                format!("must be positive and finite; entry {} is {}", j + 1, sd[j]),
            ));
        }
        if let Some(j) = (0..d).find(|&j| !(lower[j] < upper[j]) || lower[j].is_nan() || upper[j].is_nan()) {
            return Err(NceError::invalid(
                "window",
                format!("dimension {} needs lower < upper", j + 1),
            ));
        }
        Ok(NormalKernel { sd, lower, upper })
    }

    pub fn dim(&self) -> usize {
        self.sd.len()
    }

    fn check_prev(&self, prev: &[f64], t: usize) -> Result<()> {
        if prev.len() != t * self.dim() {
            return Err(NceError::invalid(
                "prev",
                format!("must be a {t} x {} matrix", self.dim()),
            ));
        }
        if let Some(i) = prev.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                "prev",
                format!("previous state {} is not finite", i % t.max(1) + 1),
            ));
        }
        Ok(())
    }

    /// `n` draws for each of the `t` previous states (column-major t x d): a column-major
    /// (t * n) x d matrix, the n draws of transition 0 first.
    pub fn sample(&self, prev: &[f64], t: usize, n: usize, seed: u64) -> Result<Vec<f64>> {
        self.check_prev(prev, t)?;
        let d = self.dim();
        let std = Normal::new(0.0, 1.0).expect("standard normal");
        let rows = checked_len(&[t, n], "the kernel draws")?;
        let len = checked_len(&[rows, d], "the kernel draws")?;
        // Row-major draws (the n draws of transition 0 first), one stream per block of
        // transitions, then transposed.
        let mut buf = try_filled(len, 0.0, "the kernel draws")?;
        buf.par_chunks_mut((TRANSITIONS_PER_STREAM * n * d).max(1))
            .enumerate()
            .for_each(|(k, block)| {
                let mut rng = stream_rng(seed, k as u64);
                let t0 = k * TRANSITIONS_PER_STREAM;
                for (i, row) in block.chunks_mut(d).enumerate() {
                    let tr = t0 + i / n;
                    for (j, o) in row.iter_mut().enumerate() {
                        let mu = prev[j * t + tr];
                        let (a, b) = (
                            std.cdf((self.lower[j] - mu) / self.sd[j]),
                            std.cdf((self.upper[j] - mu) / self.sd[j]),
                        );
                        // Inverse-CDF draw from the truncated normal.
                        let u: f64 = a + (b - a) * rng.gen::<f64>();
                        let z = std.inverse_cdf(u.clamp(1e-300, 1.0 - 1e-16));
                        *o = (mu + self.sd[j] * z).clamp(self.lower[j], self.upper[j]);
                    }
                }
            });
        let mut out = try_filled(len, 0.0, "the kernel draws")?;
        for (r, row) in buf.chunks(d.max(1)).enumerate() {
            for j in 0..d {
                out[j * rows + r] = row[j];
            }
        }
        Ok(out)
    }

    /// log q(x_r | prev_r) for matching rows of two column-major r x d matrices.
    pub fn log_density(&self, x: &[f64], prev: &[f64], rows: usize) -> Result<Vec<f64>> {
        self.check_prev(prev, rows)?;
        let d = self.dim();
        if x.len() != rows * d {
            return Err(NceError::invalid("x", format!("must be a {rows} x {d} matrix")));
        }
        let std = Normal::new(0.0, 1.0).expect("standard normal");
        Ok((0..rows)
            .into_par_iter()
            .map(|r| {
                let mut lq = 0.0;
                for j in 0..d {
                    let (v, mu, s) = (x[j * rows + r], prev[j * rows + r], self.sd[j]);
                    if !(v >= self.lower[j] && v <= self.upper[j]) {
                        return f64::NEG_INFINITY;
                    }
                    let mass = std.cdf((self.upper[j] - mu) / s) - std.cdf((self.lower[j] - mu) / s);
                    lq += std.ln_pdf((v - mu) / s) - s.ln() - mass.ln();
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
    fn untruncated_log_density_is_normal() {
        let k = NormalKernel::new(vec![2.0], vec![f64::NEG_INFINITY], vec![f64::INFINITY]).unwrap();
        let l = k.log_density(&[1.0], &[0.0], 1).unwrap();
        let exact = -0.5 * (2.0 * std::f64::consts::PI).ln() - 2f64.ln() - 0.125;
        assert!((l[0] - exact).abs() < 1e-12);
    }

    #[test]
    fn truncated_density_integrates_to_one_and_draws_stay_inside() {
        let k = NormalKernel::new(vec![0.5], vec![0.0], vec![1.0]).unwrap();
        let prev = [0.9];
        let m = 20_000;
        let grid: Vec<f64> = (0..m).map(|i| (i as f64 + 0.5) / m as f64).collect();
        let l = k.log_density(&grid, &vec![0.9; m], m).unwrap();
        let integral: f64 = l.iter().map(|v| v.exp() / m as f64).sum();
        assert!((integral - 1.0).abs() < 1e-6, "{integral}");
        let draws = k.sample(&prev, 1, 50_000, 3).unwrap();
        assert!(draws.iter().all(|v| (0.0..=1.0).contains(v)));
        // mean of the truncated normal by quadrature
        let mean_q: f64 = grid.iter().zip(&l).map(|(g, v)| g * v.exp() / m as f64).sum();
        let mean_d = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean_q - mean_d).abs() < 0.005, "{mean_q} {mean_d}");
    }

    #[test]
    fn draws_are_thread_invariant_and_transition_major() {
        let k = NormalKernel::new(vec![1.0, 1.0], vec![f64::NEG_INFINITY; 2], vec![f64::INFINITY; 2]).unwrap();
        let t = 1000;
        let prev: Vec<f64> = (0..2 * t)
            .map(|i| (i % t) as f64 * 100.0 * if i < t { 1.0 } else { -1.0 })
            .collect();
        let a = with_threads(1, || k.sample(&prev, t, 3, 9).unwrap()).unwrap();
        let b = with_threads(2, || k.sample(&prev, t, 3, 9).unwrap()).unwrap();
        assert_eq!(a, b);
        // row 3*tr + i belongs to transition tr: near its previous state
        let rows = 3 * t;
        assert!((a[3 * 500] - 50_000.0).abs() < 10.0 && (a[rows + 3 * 500] + 50_000.0).abs() < 10.0);
    }
}
