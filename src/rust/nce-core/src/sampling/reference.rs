//! Built-in reference distributions q: sampling (in parallel, seeded streams) and log density.

use crate::alloc::{checked_len, try_filled};
use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::{ChiSquared, Distribution, StandardNormal};
use rayon::prelude::*;
use statrs::function::gamma::ln_gamma;

/// Draws per seeded stream; fixed so that samples do not depend on the thread count.
const DRAWS_PER_STREAM: usize = 2048;

#[derive(Debug, Clone)]
pub enum Reference {
    /// Independent uniforms on a box.
    Uniform { lower: Vec<f64>, upper: Vec<f64> },
    /// Multivariate normal with lower Cholesky factor of its covariance.
    Normal {
        mean: DVector<f64>,
        chol: DMatrix<f64>,
        log_det: f64,
    },
    /// Multivariate Student t with `df` degrees of freedom, location `mean` and scale matrix
    /// with lower Cholesky factor `chol` (covariance `scale * df / (df - 2)` when df > 2).
    StudentT {
        mean: DVector<f64>,
        chol: DMatrix<f64>,
        log_det: f64,
        df: f64,
    },
    /// Mixture of normals: cumulative weights (for drawing), log weights and components.
    Mixture {
        cumulative: Vec<f64>,
        log_weights: Vec<f64>,
        components: Vec<Reference>,
    },
}

impl Reference {
    pub fn uniform(lower: Vec<f64>, upper: Vec<f64>) -> Result<Self> {
        if lower.len() != upper.len() || lower.is_empty() {
            return Err(NceError::invalid(
                "lower",
                "lower and upper bounds must have the same, positive length",
            ));
        }
        for (j, (a, b)) in lower.iter().zip(&upper).enumerate() {
            if !(a.is_finite() && b.is_finite() && a < b) {
                return Err(NceError::invalid(
                    "bounds",
                    format!("dimension {} needs finite lower < upper, got [{a}, {b}]", j + 1),
                ));
            }
        }
        Ok(Reference::Uniform { lower, upper })
    }

    pub fn normal(mean: Vec<f64>, cov: &[f64]) -> Result<Self> {
        let d = mean.len();
        if d == 0 || cov.len() != d * d {
            return Err(NceError::invalid(
                "sigma",
                format!("must be a {d} x {d} covariance matrix"),
            ));
        }
        if mean.iter().chain(cov).any(|v| !v.is_finite()) {
            return Err(NceError::invalid("sigma", "mean and covariance must be finite"));
        }
        let s = DMatrix::from_column_slice(d, d, cov);
        if (&s - s.transpose()).abs().max() > 1e-8 * s.abs().max() {
            return Err(NceError::invalid("sigma", "covariance matrix is not symmetric"));
        }
        let c = s
            .cholesky()
            .ok_or_else(|| NceError::invalid("sigma", "covariance matrix is not positive definite"))?;
        let chol = c.l();
        let log_det = 2.0 * chol.diagonal().iter().map(|v| v.ln()).sum::<f64>();
        Ok(Reference::Normal {
            mean: DVector::from_vec(mean),
            chol,
            log_det,
        })
    }

    /// Multivariate Student t with location `mean`, scale matrix `scale` (column-major) and
    /// `df` > 0 degrees of freedom.
    pub fn student_t(mean: Vec<f64>, scale: &[f64], df: f64) -> Result<Self> {
        if !(df.is_finite() && df > 0.0) {
            return Err(NceError::invalid(
                "df",
                format!("must be one positive number, got {df}"),
            ));
        }
        match Self::normal(mean, scale)? {
            Reference::Normal { mean, chol, log_det } => Ok(Reference::StudentT {
                mean,
                chol,
                log_det,
                df,
            }),
            _ => unreachable!("Reference::normal returns a normal"),
        }
    }

    /// Mixture of `weights.len()` normals: `means` d x G and `covs` d x d x G, column-major.
    pub fn mixture(weights: Vec<f64>, means: &[f64], covs: &[f64]) -> Result<Self> {
        let g = weights.len();
        if g == 0 || means.len() % g != 0 {
            return Err(NceError::invalid(
                "means",
                "must be a d x G matrix, one column per weight",
            ));
        }
        let d = means.len() / g;
        if d == 0 || covs.len() != d * d * g {
            return Err(NceError::invalid("sigmas", format!("must be {d} x {d} x {g}")));
        }
        if weights.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(NceError::invalid("weights", "must be finite and positive"));
        }
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cumulative = Vec::with_capacity(g);
        for w in &weights {
            acc += w / total;
            cumulative.push(acc);
        }
        let components = (0..g)
            .map(|k| Reference::normal(means[k * d..(k + 1) * d].to_vec(), &covs[k * d * d..(k + 1) * d * d]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Reference::Mixture {
            cumulative,
            log_weights: weights.iter().map(|w| (w / total).ln()).collect(),
            components,
        })
    }

    pub fn dim(&self) -> usize {
        match self {
            Reference::Uniform { lower, .. } => lower.len(),
            Reference::Normal { mean, .. } | Reference::StudentT { mean, .. } => mean.len(),
            Reference::Mixture { components, .. } => components[0].dim(),
        }
    }

    /// log q at one point (`row`, length d; finite).
    fn log_density_row(&self, row: &[f64]) -> f64 {
        let d = row.len();
        match self {
            Reference::Uniform { lower, upper } => {
                let mut lq = 0.0;
                for j in 0..d {
                    let v = row[j];
                    if !(v >= lower[j] && v <= upper[j]) {
                        return f64::NEG_INFINITY;
                    }
                    lq -= (upper[j] - lower[j]).ln();
                }
                lq
            }
            Reference::Normal { mean, chol, log_det } => {
                let r = DVector::from_fn(d, |j, _| row[j] - mean[j]);
                let z = chol.solve_lower_triangular(&r).expect("Cholesky factor is nonsingular");
                -0.5 * (d as f64 * (2.0 * std::f64::consts::PI).ln() + log_det + z.norm_squared())
            }
            Reference::StudentT {
                mean,
                chol,
                log_det,
                df,
            } => {
                let r = DVector::from_fn(d, |j, _| row[j] - mean[j]);
                let z = chol.solve_lower_triangular(&r).expect("Cholesky factor is nonsingular");
                let dd = d as f64;
                ln_gamma(0.5 * (df + dd))
                    - ln_gamma(0.5 * df)
                    - 0.5 * dd * (df * std::f64::consts::PI).ln()
                    - 0.5 * log_det
                    - 0.5 * (df + dd) * (z.norm_squared() / df).ln_1p()
            }
            Reference::Mixture {
                log_weights,
                components,
                ..
            } => {
                let l: Vec<f64> = components
                    .iter()
                    .zip(log_weights)
                    .map(|(c, lw)| lw + c.log_density_row(row))
                    .collect();
                let mx = l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                mx + l.iter().map(|v| (v - mx).exp()).sum::<f64>().ln()
            }
        }
    }

    fn draw_row<R: Rng>(&self, rng: &mut R, out: &mut [f64]) {
        match self {
            Reference::Uniform { lower, upper } => {
                for (j, o) in out.iter_mut().enumerate() {
                    let u: f64 = rng.gen();
                    *o = lower[j] + (upper[j] - lower[j]) * u;
                }
            }
            Reference::Normal { mean, chol, .. } => {
                let d = mean.len();
                let z: Vec<f64> = (0..d).map(|_| rng.sample(StandardNormal)).collect();
                for i in 0..d {
                    let mut s = mean[i];
                    for k in 0..=i {
                        s += chol[(i, k)] * z[k];
                    }
                    out[i] = s;
                }
            }
            Reference::StudentT { mean, chol, df, .. } => {
                let d = mean.len();
                let z: Vec<f64> = (0..d).map(|_| rng.sample(StandardNormal)).collect();
                let w: f64 = ChiSquared::new(*df).expect("df checked positive").sample(rng);
                let f = (df / w).sqrt();
                for i in 0..d {
                    let mut s = 0.0;
                    for k in 0..=i {
                        s += chol[(i, k)] * z[k];
                    }
                    out[i] = mean[i] + f * s;
                }
            }
            Reference::Mixture {
                cumulative, components, ..
            } => {
                let u: f64 = rng.gen();
                let k = cumulative.iter().position(|&c| u < c).unwrap_or(components.len() - 1);
                components[k].draw_row(rng, out);
            }
        }
    }

    /// `n` draws as a column-major n x d matrix (R's layout). Buffers are allocated fallibly:
    /// a size the machine cannot hold is a `TooLarge` error.
    pub fn sample(&self, n: usize, seed: u64) -> Result<Vec<f64>> {
        let d = self.dim();
        let len = checked_len(&[n, d], "the reference draws")?;
        // Row-major draws, one stream per block of rows, then transposed.
        let mut rows = try_filled(len, 0.0, "the reference draws")?;
        rows.par_chunks_mut((DRAWS_PER_STREAM * d).max(1))
            .enumerate()
            .for_each(|(k, buf)| {
                let mut rng = stream_rng(seed, k as u64);
                for row in buf.chunks_mut(d) {
                    self.draw_row(&mut rng, row);
                }
            });
        let mut out = try_filled(len, 0.0, "the reference draws")?;
        for (i, row) in rows.chunks(d.max(1)).enumerate() {
            for j in 0..d {
                out[j * n + i] = row[j];
            }
        }
        Ok(out)
    }

    /// log q at the rows of a column-major n x d matrix (-inf outside the support).
    pub fn log_density(&self, x: &[f64], n: usize) -> Result<Vec<f64>> {
        let d = self.dim();
        if x.len() != n * d {
            return Err(NceError::invalid("x", format!("must have {d} columns")));
        }
        let out = (0..n)
            .into_par_iter()
            .map_init(
                || vec![0.0; d],
                |row, i| {
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = x[j * n + i];
                    }
                    self.log_density_row(row)
                },
            )
            .collect();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;

    #[test]
    fn sampling_is_thread_invariant_and_reproducible() {
        let r = Reference::normal(vec![1.0, -1.0], &[2.0, 0.5, 0.5, 1.0]).unwrap();
        let a = with_threads(1, || r.sample(10_000, 42)).unwrap().unwrap();
        let b = with_threads(2, || r.sample(10_000, 42)).unwrap().unwrap();
        assert_eq!(a, b);
        let c = r.sample(10_000, 43).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn normal_draws_have_the_right_moments() {
        let n = 200_000;
        let r = Reference::normal(vec![1.0, -1.0], &[2.0, 0.5, 0.5, 1.0]).unwrap();
        let x = r.sample(n, 1).unwrap();
        let m0 = x[..n].iter().sum::<f64>() / n as f64;
        let m1 = x[n..].iter().sum::<f64>() / n as f64;
        let c01 = (0..n).map(|i| (x[i] - m0) * (x[n + i] - m1)).sum::<f64>() / n as f64;
        assert!((m0 - 1.0).abs() < 0.02 && (m1 + 1.0).abs() < 0.02);
        assert!((c01 - 0.5).abs() < 0.02, "cov {c01}");
    }

    #[test]
    fn mixture_density_and_draws() {
        // 1-D: 0.3 N(-2, 1) + 0.7 N(1, 0.25).
        let r = Reference::mixture(vec![0.3, 0.7], &[-2.0, 1.0], &[1.0, 0.25]).unwrap();
        let dn =
            |x: f64, m: f64, v: f64| (-(x - m) * (x - m) / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt();
        let l = r.log_density(&[0.5, -2.0], 2).unwrap();
        for (i, x) in [0.5, -2.0].iter().enumerate() {
            let want = (0.3 * dn(*x, -2.0, 1.0) + 0.7 * dn(*x, 1.0, 0.25)).ln();
            assert!((l[i] - want).abs() < 1e-13, "{} {}", l[i], want);
        }
        let n = 200_000;
        let a = with_threads(1, || r.sample(n, 9)).unwrap().unwrap();
        let b = with_threads(2, || r.sample(n, 9)).unwrap().unwrap();
        assert_eq!(a, b);
        let mean = a.iter().sum::<f64>() / n as f64;
        let left = a.iter().filter(|v| **v < -0.5).count() as f64 / n as f64;
        assert!((mean - 0.1).abs() < 0.01, "mean {mean}");
        // P(x < -0.5) = 0.3 Phi(1.5) + 0.7 Phi(-3) = 0.28084.
        assert!((left - 0.28084).abs() < 0.004, "share {left}");
        assert!(Reference::mixture(vec![0.5, -0.5], &[0.0, 1.0], &[1.0, 1.0]).is_err());
        assert!(Reference::mixture(vec![0.5, 0.5], &[0.0, 1.0], &[1.0]).is_err());
    }

    #[test]
    fn normal_log_density_matches_closed_form() {
        let r = Reference::normal(vec![0.0, 0.0], &[1.0, 0.0, 0.0, 1.0]).unwrap();
        let l = r.log_density(&[0.0, 0.0], 1).unwrap();
        assert!((l[0] + (2.0 * std::f64::consts::PI).ln()).abs() < 1e-14);
    }

    #[test]
    fn student_t_density_and_moments() {
        // 1-D t with 3 df: density at 0 is Gamma(2) / (Gamma(1.5) sqrt(3 pi)).
        let r = Reference::student_t(vec![0.0], &[1.0], 3.0).unwrap();
        let l = r.log_density(&[0.0, 1.0], 2).unwrap();
        let f0 = 1.0 / (ln_gamma(1.5).exp() * (3.0 * std::f64::consts::PI).sqrt());
        assert!((l[0] - f0.ln()).abs() < 1e-12);
        assert!((l[1] - (f0 * (1.0f64 + 1.0 / 3.0).powf(-2.0)).ln()).abs() < 1e-12);
        // 2-D, df 6: covariance is scale * 6 / 4.
        let n = 200_000;
        let r = Reference::student_t(vec![1.0, -1.0], &[2.0, 0.5, 0.5, 1.0], 6.0).unwrap();
        let a = with_threads(1, || r.sample(n, 5)).unwrap().unwrap();
        let b = with_threads(3, || r.sample(n, 5)).unwrap().unwrap();
        assert_eq!(a, b);
        let m0 = a[..n].iter().sum::<f64>() / n as f64;
        let m1 = a[n..].iter().sum::<f64>() / n as f64;
        let v0 = a[..n].iter().map(|v| (v - m0).powi(2)).sum::<f64>() / n as f64;
        let c01 = (0..n).map(|i| (a[i] - m0) * (a[n + i] - m1)).sum::<f64>() / n as f64;
        assert!((m0 - 1.0).abs() < 0.02 && (m1 + 1.0).abs() < 0.02);
        assert!((v0 - 3.0).abs() < 0.1, "var {v0}");
        assert!((c01 - 0.75).abs() < 0.05, "cov {c01}");
        assert!(Reference::student_t(vec![0.0], &[1.0], 0.0).is_err());
    }

    #[test]
    fn uniform_support_and_density() {
        let r = Reference::uniform(vec![0.0, 0.0], vec![2.0, 4.0]).unwrap();
        let l = r.log_density(&[1.0, 3.0, 1.0, 5.0], 2).unwrap();
        assert!((l[0] + 8f64.ln()).abs() < 1e-15);
        assert_eq!(l[1], f64::NEG_INFINITY);
        assert!(Reference::uniform(vec![1.0], vec![0.0]).is_err());
        assert!(Reference::normal(vec![0.0, 0.0], &[1.0, 2.0, 2.0, 1.0]).is_err());
    }
}
