//! Independent component analysis with Laplace sources of unit variance:
//! f(x; B) = -sqrt(2) sum_i |b_i' x|, b_i the rows of B (theta = B by rows), and the exact
//! log normaliser c = log|det B| - (d/2) log 2, so the maximum-likelihood fit is computable.

use super::{Model, CHUNK};
use crate::error::{NceError, Result};
use crate::optim::{minimise_lbfgs, LbfgsControl, Objective, OptimResult};
use crate::rng::stream_rng;
use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use std::sync::Mutex;

const SQRT2: f64 = std::f64::consts::SQRT_2;

/// The ICA model on the rows of a column-major n x d matrix.
pub struct IcaModel<'a> {
    x: &'a [f64],
    n: usize,
    d: usize,
    /// Sources of the last `value` call, keyed by theta: the gradient reuses them.
    cache: Mutex<(Vec<f64>, Vec<f64>)>,
    /// Loop over row chunks on the current rayon pool.
    parallel: bool,
}

impl<'a> IcaModel<'a> {
    pub fn new(x: &'a [f64], n: usize, d: usize) -> Result<Self> {
        if d == 0 || x.len() != n * d {
            return Err(NceError::invalid(
                "x",
                format!("must be an n x d matrix, got {} values for d = {d}", x.len()),
            ));
        }
        if !x.iter().all(|v| v.is_finite()) {
            return Err(NceError::invalid("x", "has non-finite values"));
        }
        Ok(IcaModel {
            x,
            n,
            d,
            cache: Mutex::new((Vec::new(), Vec::new())),
            parallel: false,
        })
    }

    /// Loop over row chunks on the current rayon pool (same result for any thread count).
    pub fn with_parallel(mut self, parallel: bool) -> Self {
        self.parallel = parallel;
        self
    }

    /// s_ri = b_i' x_r, row-major n x d (row r at r * d).
    fn sources(&self, theta: &[f64]) -> Vec<f64> {
        let (n, d) = (self.n, self.d);
        let mut s = vec![0.0; n * d];
        let body = |(c, sc): (usize, &mut [f64])| {
            let lo = c * CHUNK;
            for (i, row) in sc.chunks_mut(d).enumerate() {
                let r = lo + i;
                for (a, out) in row.iter_mut().enumerate() {
                    *out = (0..d).map(|j| theta[a * d + j] * self.x[j * n + r]).sum();
                }
            }
        };
        if self.parallel {
            s.par_chunks_mut(CHUNK * d).enumerate().for_each(body);
        } else {
            s.chunks_mut(CHUNK * d).enumerate().for_each(body);
        }
        s
    }
}

impl Model for IcaModel<'_> {
    fn n_par(&self) -> usize {
        self.d * self.d
    }
    fn n_row(&self) -> usize {
        self.n
    }
    fn value(&self, theta: &[f64], f: &mut [f64]) -> Result<()> {
        let s = self.sources(theta);
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        for (fr, row) in f.iter_mut().zip(s.chunks(self.d)) {
            *fr = -SQRT2 * row.iter().map(|v| v.abs()).sum::<f64>();
        }
        *c = (theta.to_vec(), s);
        Ok(())
    }
    fn jacobian(&self, theta: &[f64], jac: &mut [f64]) -> Result<()> {
        let (n, d) = (self.n, self.d);
        let s = self.sources(theta);
        for i in 0..d {
            for j in 0..d {
                let col = &mut jac[(i * d + j) * n..(i * d + j + 1) * n];
                for r in 0..n {
                    col[r] = -SQRT2 * sign(s[r * d + i]) * self.x[j * n + r];
                }
            }
        }
        Ok(())
    }
    fn jacobian_t_vec(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        let (n, d) = (self.n, self.d);
        let c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let fresh;
        let s: &[f64] = if c.0.as_slice() == theta {
            &c.1
        } else {
            fresh = self.sources(theta);
            &fresh
        };
        // Per chunk of rows a partial d x d sum, added in chunk order.
        let body = |c: usize| -> Vec<f64> {
            let lo = c * CHUNK;
            let hi = (lo + CHUNK).min(n);
            let mut part = vec![0.0; d * d];
            for r in lo..hi {
                for i in 0..d {
                    let w = -SQRT2 * sign(s[r * d + i]) * v[r];
                    if w != 0.0 {
                        for j in 0..d {
                            part[i * d + j] += w * self.x[j * n + r];
                        }
                    }
                }
            }
            part
        };
        let chunks = n.div_ceil(CHUNK).max(1);
        let parts: Vec<Vec<f64>> = if self.parallel {
            (0..chunks).into_par_iter().map(body).collect()
        } else {
            (0..chunks).map(body).collect()
        };
        out.iter_mut().for_each(|o| *o = 0.0);
        for part in &parts {
            for (o, p) in out.iter_mut().zip(part) {
                *o += p;
            }
        }
        Ok(())
    }
}

/// sign() with sign(0) = 0, the subgradient R's sign() gives.
#[inline]
fn sign(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// Exact log normaliser of the Laplace ICA model: log|det B| - (d/2) log 2 (-Inf if singular).
pub fn log_normaliser(b: &[f64], d: usize) -> f64 {
    let m = DMatrix::from_row_slice(d, d, b);
    m.determinant().abs().ln() - 0.5 * d as f64 * std::f64::consts::LN_2
}

/// Symmetric inverse square root of the data's covariance (the whitening matrix), row-major.
pub fn whitening(x: &[f64], n: usize, d: usize) -> Result<Vec<f64>> {
    if n < 2 {
        return Err(NceError::invalid(
            "x",
            "needs at least two rows to estimate a covariance",
        ));
    }
    let mut mean = vec![0.0; d];
    for (j, m) in mean.iter_mut().enumerate() {
        *m = x[j * n..(j + 1) * n].iter().sum::<f64>() / n as f64;
    }
    let cov = DMatrix::from_fn(d, d, |a, b| {
        (0..n)
            .map(|r| (x[a * n + r] - mean[a]) * (x[b * n + r] - mean[b]))
            .sum::<f64>()
            / (n as f64 - 1.0)
    });
    let eig = cov.symmetric_eigen();
    if !eig.eigenvalues.iter().all(|&l| l > 0.0 && l.is_finite()) {
        return Err(NceError::Numerical(
            "the data's covariance is singular: cannot whiten".into(),
        ));
    }
    let dinv = DMatrix::from_diagonal(&eig.eigenvalues.map(|l| 1.0 / l.sqrt()));
    let w = &eig.eigenvectors * dinv * eig.eigenvectors.transpose();
    Ok((0..d * d).map(|k| w[(k / d, k % d)]).collect())
}

/// Random start `k` for (c, B by rows): B = Q W with Q a random orthogonal matrix (QR of a
/// Gaussian matrix from ChaCha stream `k` of `seed`) and W the whitening matrix; c its exact
/// log normaliser. The same (seed, k) always gives the same start.
pub fn random_start(w: &[f64], d: usize, seed: u64, k: u64) -> Vec<f64> {
    let mut rng = stream_rng(seed, k);
    let g = DMatrix::from_fn(d, d, |_, _| rng.sample::<f64, _>(StandardNormal));
    let qr = g.qr();
    let (mut q, r) = (qr.q(), qr.r());
    // Haar measure: fix the signs by the diagonal of R.
    for j in 0..d {
        if r[(j, j)] < 0.0 {
            q.column_mut(j).neg_mut();
        }
    }
    let wm = DMatrix::from_row_slice(d, d, w);
    let b = q * wm;
    let braw: Vec<f64> = (0..d * d).map(|k| b[(k / d, k % d)]).collect();
    let mut out = vec![log_normaliser(&braw, d)];
    out.extend(braw);
    out
}

/// Minus the mean log-likelihood of the Laplace ICA model, in B (by rows).
pub struct IcaLikelihood<'a> {
    model: IcaModel<'a>,
}

impl<'a> IcaLikelihood<'a> {
    pub fn new(x: &'a [f64], n: usize, d: usize) -> Result<Self> {
        Ok(IcaLikelihood {
            model: IcaModel::new(x, n, d)?,
        })
    }
}

impl Objective for IcaLikelihood<'_> {
    fn dim(&self) -> usize {
        self.model.d * self.model.d
    }
    fn value_grad(&self, b: &[f64], grad: &mut [f64]) -> Result<f64> {
        let (n, d) = (self.model.n, self.model.d);
        let m = DMatrix::from_row_slice(d, d, b);
        let Some(inv) = m.clone().try_inverse() else {
            return Ok(f64::INFINITY);
        };
        let logdet = m.determinant().abs().ln();
        if !logdet.is_finite() {
            return Ok(f64::INFINITY);
        }
        let mut f = vec![0.0; n];
        self.model.value(b, &mut f)?;
        let ones = vec![1.0; n];
        self.model.jacobian_t_vec(b, &ones, grad)?;
        let nf = n as f64;
        // d log|det B| / dB_ij = (B^{-T})_ij = inv_ji
        for i in 0..d {
            for j in 0..d {
                grad[i * d + j] = -(grad[i * d + j] / nf + inv[(j, i)]);
            }
        }
        let ll = f.iter().sum::<f64>() / nf + logdet - 0.5 * d as f64 * std::f64::consts::LN_2;
        Ok(-ll)
    }
}

/// Maximum-likelihood fit of B from one start (B by rows); value is minus the mean log-likelihood.
pub fn fit_mle(
    x: &[f64],
    n: usize,
    d: usize,
    start: &[f64],
    ctrl: &LbfgsControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<OptimResult> {
    let obj = IcaLikelihood::new(x, n, d)?;
    minimise_lbfgs(&obj, start, ctrl, interrupt)
}

#[cfg(test)]
mod tests {
    use super::super::{fit_starts, FitControl, Method, NceProblem};
    use super::*;

    /// x = A s with Laplace(unit variance) sources, column-major n x d.
    fn ica_data(n: usize, a: &DMatrix<f64>, seed: u64) -> Vec<f64> {
        let d = a.nrows();
        let mut rng = stream_rng(seed, 0);
        let mut x = vec![0.0; n * d];
        for r in 0..n {
            let s: Vec<f64> = (0..d)
                .map(|_| {
                    let u: f64 = rng.gen::<f64>() - 0.5;
                    -u.signum() * (1.0 - 2.0 * u.abs()).ln() / SQRT2
                })
                .collect();
            for i in 0..d {
                x[i * n + r] = (0..d).map(|j| a[(i, j)] * s[j]).sum();
            }
        }
        x
    }

    #[test]
    fn mle_and_nce_recover_b() {
        let d = 2;
        let a = DMatrix::from_row_slice(2, 2, &[1.0, 0.5, -0.3, 0.8]);
        let b_true = a.clone().try_inverse().unwrap();
        let n = 1500;
        let x = ica_data(n, &a, 11);
        let w = whitening(&x, n, d).unwrap();
        let mut best = f64::INFINITY;
        let mut bhat = vec![];
        for k in 0..4 {
            let s = random_start(&w, d, 5, k);
            let o = fit_mle(&x, n, d, &s[1..], &LbfgsControl::default(), &mut || false).unwrap();
            if o.value < best {
                best = o.value;
                bhat = o.x;
            }
        }
        // rows match up to order and sign
        let bh = DMatrix::from_row_slice(d, d, &bhat);
        let p = &bh * &a; // near a signed permutation
        for i in 0..d {
            let mx = (0..d).map(|j| p[(i, j)].abs()).fold(0.0, f64::max);
            assert!((mx - 1.0).abs() < 0.1, "{p}");
        }
        let _ = b_true;

        // NCE with a Gaussian reference of the data's covariance, ratio 5.
        let m = 5 * n;
        let cov = &a * a.transpose();
        let chol = cov.clone().cholesky().unwrap();
        let l = chol.l();
        let mut rng = stream_rng(12, 0);
        let mut all = vec![0.0; (n + m) * d];
        for j in 0..d {
            for r in 0..n {
                all[j * (n + m) + r] = x[j * n + r];
            }
        }
        let cinv = cov.clone().try_inverse().unwrap();
        let ldet = cov.determinant().ln();
        let mut lq = vec![0.0; n + m];
        for r in 0..n + m {
            if r >= n {
                let z: Vec<f64> = (0..d).map(|_| rng.sample::<f64, _>(StandardNormal)).collect();
                for i in 0..d {
                    all[i * (n + m) + r] = (0..d).map(|j| l[(i, j)] * z[j]).sum();
                }
            }
            let u: Vec<f64> = (0..d).map(|i| all[i * (n + m) + r]).collect();
            let mut q = 0.0;
            for i in 0..d {
                for j in 0..d {
                    q += u[i] * cinv[(i, j)] * u[j];
                }
            }
            lq[r] = -0.5 * q - 0.5 * ldet - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln();
        }
        let label: Vec<f64> = (0..n + m).map(|r| if r < n { 1.0 } else { 0.0 }).collect();
        let off: Vec<f64> = lq.iter().map(|q| (n as f64 / m as f64).ln() - q).collect();
        let model = IcaModel::new(&all, n + m, d).unwrap();
        let prob = NceProblem::new(&model, &label, &off, Method::Logistic).unwrap();
        let starts: Vec<Vec<f64>> = (0..4).map(|k| random_start(&w, d, 9, k)).collect();
        let fit = fit_starts(&prob, &starts, &FitControl::default(), &mut || false).unwrap();
        let par = &fit.starts[fit.best].par;
        let bh = DMatrix::from_row_slice(d, d, &par[1..]);
        let p = &bh * &a;
        for i in 0..d {
            let mx = (0..d).map(|j| p[(i, j)].abs()).fold(0.0, f64::max);
            assert!((mx - 1.0).abs() < 0.1, "{p}");
        }
        // c close to its exact value for the estimated B
        assert!((par[0] - log_normaliser(&par[1..], d)).abs() < 0.1);
    }

    /// cargo test --release -p nce-core ica_timing -- --ignored --nocapture
    #[test]
    #[ignore]
    fn ica_timing() {
        let d = 4;
        let a = DMatrix::from_fn(4, 4, |i, j| if i == j { 1.0 } else { 0.3 * ((i + 2 * j) as f64).sin() });
        let n = 1000;
        let m = 10 * n;
        let mut x = ica_data(n + m, &a, 4);
        // reference rows: Gaussian with identity-ish scale (timing only)
        let mut rng = stream_rng(8, 0);
        for j in 0..d {
            for r in n..n + m {
                x[j * (n + m) + r] = rng.sample::<f64, _>(StandardNormal);
            }
        }
        let label: Vec<f64> = (0..n + m).map(|r| if r < n { 1.0 } else { 0.0 }).collect();
        let off: Vec<f64> = (0..n + m)
            .map(|r| {
                let q: f64 = (0..d).map(|j| x[j * (n + m) + r].powi(2)).sum();
                (0.1f64).ln() + 0.5 * q + 2.0 * (2.0 * std::f64::consts::PI).ln()
            })
            .collect();
        let model = IcaModel::new(&x, n + m, d).unwrap();
        let prob = NceProblem::new(&model, &label, &off, Method::Logistic).unwrap();
        let w = whitening(&x[..], n + m, d).unwrap();
        for k in 0..3 {
            let t = std::time::Instant::now();
            let fit = fit_starts(&prob, &[random_start(&w, d, 1, k)], &FitControl::default(), &mut || {
                false
            })
            .unwrap();
            let r = &fit.starts[0];
            eprintln!(
                "start {k}: {:?}, {} iterations, {} evaluations, {}",
                t.elapsed(),
                r.iterations,
                r.evaluations,
                r.message
            );
        }
    }

    #[test]
    fn jacobian_products_agree() {
        let a = DMatrix::from_row_slice(3, 3, &[1.0, 0.2, 0.0, 0.1, 1.0, 0.3, -0.2, 0.0, 1.0]);
        let n = 50;
        let x = ica_data(n, &a, 2);
        let m = IcaModel::new(&x, n, 3).unwrap();
        let th: Vec<f64> = (0..9).map(|k| 0.1 * k as f64 - 0.3).collect();
        let v: Vec<f64> = (0..n).map(|r| (r as f64).sin()).collect();
        let mut full = vec![0.0; n * 9];
        m.jacobian(&th, &mut full).unwrap();
        let mut o = vec![0.0; 9];
        m.jacobian_t_vec(&th, &v, &mut o).unwrap();
        for k in 0..9 {
            let e: f64 = (0..n).map(|r| full[k * n + r] * v[r]).sum();
            assert!((e - o[k]).abs() < 1e-12);
        }
    }
}
