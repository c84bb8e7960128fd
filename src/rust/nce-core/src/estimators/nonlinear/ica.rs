//! Independent component analysis with Laplace sources of unit variance:
//! f(x; B) = -sqrt(2) sum_i |b_i' x|, b_i the rows of B (theta = B by rows), and the exact
//! log normaliser c = log|det B| - (d/2) log 2, so the maximum-likelihood fit is computable.

use super::{fit_starts_with, FitControl, Model, MultiFit, NceProblem, Preconditioned, RowFn, StartResult};
use crate::convergence::Convergence;
use crate::error::{NceError, Result};
use crate::optim::{minimise_lbfgs, LbfgsControl, Objective, OptimResult};
use crate::rng::stream_rng;
use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;

const SQRT2: f64 = std::f64::consts::SQRT_2;

/// Rows per chunk of the fused passes: the chunk's sources (d x CHUNK) stay in cache. Partial
/// sums are formed per chunk and added in chunk order, so results do not depend on the threads.
const CHUNK: usize = 1024;

/// The ICA model on the rows of a column-major n x d matrix.
#[derive(Clone)]
pub struct IcaModel<'a> {
    x: &'a [f64],
    n: usize,
    d: usize,
    /// Loop over row chunks on the current rayon pool.
    parallel: bool,
    /// Half-width h of the Huber smoothing of |u| (0: the exact model). |u| is replaced by
    /// (u^2 / h + h) / 2 for |u| < h, which equals |u| and its slope at |u| = h.
    smooth: f64,
}

/// |u|, or its Huber smoothing of half-width h > 0 (branch-free: the signs of the sources are
/// random, so branches would be mispredicted half the time).
#[inline]
fn rho(u: f64, h: f64, hinv: f64) -> f64 {
    let a = u.abs();
    let m = a.min(h);
    0.5 * (m * m * hinv + h) + (a - m)
}

/// d rho / du: u / h clamped to [-1, 1]; for h = 0, sign(u) with sign(0) = 0 (the subgradient
/// R's sign() gives).
#[inline]
fn psi(u: f64, hinv: f64) -> f64 {
    if hinv.is_finite() {
        (u * hinv).clamp(-1.0, 1.0)
    } else {
        sign(u)
    }
}

/// Branch-free sign() with sign(0) = 0, the subgradient R's sign() gives.
#[inline]
fn sign(v: f64) -> f64 {
    ((v > 0.0) as i32 - (v < 0.0) as i32) as f64
}

/// sum_r a_r b_r with four running sums (vectorisable, fixed order).
#[inline]
fn dot4(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (u, v) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += u[k] * v[k];
        }
    }
    let tail: f64 = ra.iter().zip(rb).map(|(u, v)| u * v).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
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
            parallel: false,
            smooth: 0.0,
        })
    }

    /// Loop over row chunks on the current rayon pool (same result for any thread count).
    pub fn with_parallel(mut self, parallel: bool) -> Self {
        self.parallel = parallel;
        self
    }

    /// The same model with |u| Huber-smoothed on [-h, h] (h = 0: exact).
    pub fn smoothed(&self, h: f64) -> Self {
        IcaModel {
            smooth: h.max(0.0),
            ..self.clone()
        }
    }

    /// f_r += sum_a rho(s_ra) over the sources of a chunk (before the factor -sqrt(2)).
    fn add_rho(&self, s: &[f64], len: usize, f: &mut [f64]) {
        let h = self.smooth;
        for sa in s.chunks(len.max(1)).take(self.d) {
            if h > 0.0 {
                let hinv = 1.0 / h;
                f.iter_mut().zip(sa).for_each(|(fr, &u)| *fr += rho(u, h, hinv));
            } else {
                f.iter_mut().zip(sa).for_each(|(fr, &u)| *fr += u.abs());
            }
        }
    }

    /// w_r <- psi(w_r) v_r: the sources replaced by the weights of the gradient.
    fn times_psi(&self, w: &mut [f64], v: &[f64]) {
        let hinv = if self.smooth > 0.0 {
            1.0 / self.smooth
        } else {
            f64::INFINITY
        };
        w.iter_mut()
            .zip(v.iter().cycle())
            .for_each(|(wr, &vr)| *wr = psi(*wr, hinv) * vr);
    }

    fn chunks(&self) -> usize {
        self.n.div_ceil(CHUNK).max(1)
    }

    /// Sources s_a = X b_a of the rows of chunk `c`, column-major len x d.
    fn chunk_sources(&self, theta: &[f64], c: usize) -> (usize, usize, Vec<f64>) {
        let (n, d) = (self.n, self.d);
        let lo = c * CHUNK;
        let hi = (lo + CHUNK).min(n);
        let len = hi - lo;
        let mut s = vec![0.0; d * len];
        for (a, sa) in s.chunks_mut(len.max(1)).enumerate().take(d) {
            for j in 0..d {
                let t = theta[a * d + j];
                for (o, &xv) in sa.iter_mut().zip(&self.x[j * n + lo..j * n + hi]) {
                    *o += t * xv;
                }
            }
        }
        (lo, hi, s)
    }

    /// The fused pass of one chunk: (sum l, sum v, all finite, d x d partial gradient).
    fn chunk_pass(&self, theta: &[f64], terms: &RowFn, c: usize) -> (f64, f64, bool, Vec<f64>) {
        let (n, d) = (self.n, self.d);
        let (lo, hi, mut s) = self.chunk_sources(theta, c);
        let len = hi - lo;
        let mut f = vec![0.0; len];
        self.add_rho(&s, len, &mut f);
        let (mut ll, mut sv, mut finite) = (0.0, 0.0, true);
        for (i, fr) in f.iter_mut().enumerate() {
            let fv = -SQRT2 * *fr;
            finite &= fv.is_finite();
            let (l, v) = terms(lo + i, fv);
            ll += l;
            sv += v;
            *fr = -SQRT2 * v;
        }
        let mut part = vec![0.0; d * d];
        for (a, sa) in s.chunks_mut(len.max(1)).enumerate().take(d) {
            self.times_psi(sa, &f);
            for j in 0..d {
                part[a * d + j] = dot4(sa, &self.x[j * n + lo..j * n + hi]);
            }
        }
        (ll, sv, finite, part)
    }

    /// All chunks' fused passes, summed in chunk order.
    fn pass(&self, theta: &[f64], terms: &RowFn, grad: &mut [f64]) -> (f64, f64) {
        let body = |c: usize| self.chunk_pass(theta, terms, c);
        let parts: Vec<(f64, f64, bool, Vec<f64>)> = if self.parallel {
            (0..self.chunks()).into_par_iter().map(body).collect()
        } else {
            (0..self.chunks()).map(body).collect()
        };
        grad.iter_mut().for_each(|g| *g = 0.0);
        let (mut ll, mut sv) = (0.0, 0.0);
        for (l, v, finite, part) in &parts {
            ll += if *finite { *l } else { f64::NEG_INFINITY };
            sv += v;
            for (g, p) in grad.iter_mut().zip(part) {
                *g += p;
            }
        }
        (ll, sv)
    }

    /// Run `body` on every chunk (in parallel when asked), in chunk order.
    fn for_chunks<T: Send>(&self, body: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
        if self.parallel {
            (0..self.chunks()).into_par_iter().map(body).collect()
        } else {
            (0..self.chunks()).map(body).collect()
        }
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
        let parts = self.for_chunks(|c| {
            let (lo, hi, s) = self.chunk_sources(theta, c);
            let len = hi - lo;
            let mut fc = vec![0.0; len];
            self.add_rho(&s, len, &mut fc);
            fc.iter_mut().for_each(|v| *v *= -SQRT2);
            fc
        });
        for (c, fc) in parts.iter().enumerate() {
            f[c * CHUNK..c * CHUNK + fc.len()].copy_from_slice(fc);
        }
        Ok(())
    }
    fn jacobian(&self, theta: &[f64], jac: &mut [f64]) -> Result<()> {
        let (n, d) = (self.n, self.d);
        // per chunk the derivatives of f in the sources, column-major len x d
        let parts = self.for_chunks(|c| {
            let (_, _, mut s) = self.chunk_sources(theta, c);
            let minus = vec![-SQRT2; s.len()];
            self.times_psi(&mut s, &minus);
            s
        });
        for (c, ps) in parts.iter().enumerate() {
            let lo = c * CHUNK;
            let len = ps.len() / d;
            for i in 0..d {
                for j in 0..d {
                    let col = &mut jac[(i * d + j) * n + lo..(i * d + j) * n + lo + len];
                    let xj = &self.x[j * n + lo..j * n + lo + len];
                    for ((o, &p), &xv) in col.iter_mut().zip(&ps[i * len..(i + 1) * len]).zip(xj) {
                        *o = p * xv;
                    }
                }
            }
        }
        Ok(())
    }
    fn jacobian_t_vec(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.pass(theta, &|r, _| (0.0, v[r]), out);
        Ok(())
    }
    fn fused(&self, theta: &[f64], terms: &RowFn, grad: &mut [f64]) -> Result<Option<(f64, f64)>> {
        Ok(Some(self.pass(theta, terms, grad)))
    }
}

/// Half-widths of the Huber smoothing of |u| in the two phases of an ICA fit, in units of the
/// sources b_i'x (unit variance under the model). The first gets near the optimum; the second is
/// so narrow that its minimiser is as good as one of the exact objective: for 11,000 rows the
/// exact objective at it is within the objective's kink noise (a few hundredths) of the lowest
/// value L-BFGS finds on the exact objective after hundreds of iterations, and no higher on average.
pub const SMOOTH_COARSE: f64 = 0.1;
pub const SMOOTH_FINE: f64 = 0.003;

/// Minimise `prob` from `x0` by L-BFGS in the coordinates of [`Preconditioned`] (Fisher
/// information at x0; plain coordinates if it is not positive definite).
fn minimise_preconditioned(
    prob: &NceProblem<IcaModel>,
    x0: &[f64],
    ctrl: &LbfgsControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<StartResult> {
    let info = prob.state(x0)?.information();
    let (par, o) = match Preconditioned::new(prob, x0, info) {
        Some(pc) => {
            let o = minimise_lbfgs(&pc, &vec![0.0; x0.len()], ctrl, interrupt)?;
            (pc.par(&o.x), o)
        }
        None => {
            let o = minimise_lbfgs(prob, x0, ctrl, interrupt)?;
            (o.x.clone(), o)
        }
    };
    Ok(StartResult {
        par,
        value: o.value,
        evaluations: o.evaluations,
        convergence: o.convergence,
    })
}

/// One ICA fit from `start`. |b'x| has a kink at every row, so L-BFGS on the exact objective
/// crawls (hundreds of iterations) once it is near the optimum, where the kinks dominate. Instead:
/// L-BFGS preconditioned by the Fisher information on the objective with |.| Huber-smoothed on
/// [-SMOOTH_COARSE, SMOOTH_COARSE], then again (information recomputed) with SMOOTH_FINE; `value`
/// is the exact objective at the result. `ctrl.lbfgs` applies to each phase.
pub fn fit_one_ica(
    prob: &NceProblem<IcaModel>,
    start: &[f64],
    ctrl: &FitControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<StartResult> {
    let mut par = start.to_vec();
    let (mut iterations, mut evaluations) = (0, 0);
    let mut last = None;
    for h in [SMOOTH_COARSE, SMOOTH_FINE] {
        let model = prob.model.smoothed(h);
        let sp = NceProblem::new(&model, prob.label, prob.offset, prob.method)?.with_parallel(prob.parallel);
        let r = minimise_preconditioned(&sp, &par, &ctrl.lbfgs, interrupt)?;
        iterations += r.convergence.iterations;
        evaluations += r.evaluations + 1;
        par = r.par.clone();
        last = Some(r);
    }
    let last = last.expect("two phases");
    let mut grad = vec![0.0; par.len()];
    let value = prob.value_grad(&par, &mut grad)?;
    Ok(StartResult {
        par,
        value,
        evaluations: evaluations + 1,
        convergence: Convergence {
            iterations,
            converged: last.convergence.converged,
            message: format!(
                "{} (|.| smoothed on [-{SMOOTH_FINE}, {SMOOTH_FINE}])",
                last.convergence.message
            ),
        },
    })
}

/// All starts of an ICA fit by [`fit_one_ica`] and the best (lowest exact objective).
pub fn fit_starts_ica(
    prob: &NceProblem<IcaModel>,
    starts: &[Vec<f64>],
    ctrl: &FitControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<MultiFit> {
    fit_starts_with(starts, |s| fit_one_ica(prob, s, ctrl, interrupt))
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
        let (fsum, _) = self.model.pass(b, &|_, f| (f, 1.0), grad);
        if !fsum.is_finite() {
            return Ok(f64::INFINITY);
        }
        let nf = n as f64;
        // d log|det B| / dB_ij = (B^{-T})_ij = inv_ji
        for i in 0..d {
            for j in 0..d {
                grad[i * d + j] = -(grad[i * d + j] / nf + inv[(j, i)]);
            }
        }
        let ll = fsum / nf + logdet - 0.5 * d as f64 * std::f64::consts::LN_2;
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
    use super::super::{FitControl, Method, NceProblem};
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
        let fit = fit_starts_ica(&prob, &starts, &FitControl::default(), &mut || false).unwrap();
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
            let fit = fit_starts_ica(&prob, &[random_start(&w, d, 1, k)], &FitControl::default(), &mut || {
                false
            })
            .unwrap();
            let r = &fit.starts[0];
            eprintln!(
                "start {k}: {:?}, {} iterations, {} evaluations, {}",
                t.elapsed(),
                r.convergence.iterations,
                r.evaluations,
                r.convergence.message
            );
        }
    }

    /// A small NCE problem: ICA data with a standard normal reference.
    fn small_problem(n: usize, m: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let a = DMatrix::from_row_slice(3, 3, &[1.0, 0.2, 0.0, 0.1, 1.0, 0.3, -0.2, 0.0, 1.0]);
        let mut x = ica_data(n + m, &a, seed);
        let mut rng = stream_rng(seed + 1, 0);
        for j in 0..3 {
            for r in n..n + m {
                x[j * (n + m) + r] = rng.sample::<f64, _>(StandardNormal);
            }
        }
        let label: Vec<f64> = (0..n + m).map(|r| if r < n { 1.0 } else { 0.0 }).collect();
        let off: Vec<f64> = (0..n + m)
            .map(|r| {
                let q: f64 = (0..3).map(|j| x[j * (n + m) + r].powi(2)).sum();
                (n as f64 / m as f64).ln() + 0.5 * q + 1.5 * (2.0 * std::f64::consts::PI).ln()
            })
            .collect();
        (x, label, off)
    }

    #[test]
    fn fused_pass_matches_value_and_jacobian() {
        let (n, m) = (300, 900);
        let (x, label, off) = small_problem(n, m, 21);
        let th: Vec<f64> = (0..10).map(|k| 0.15 * k as f64 - 0.6).collect();
        for h in [0.0, 0.05] {
            let model = IcaModel::new(&x, n + m, 3).unwrap().smoothed(h);
            for method in [Method::Logistic, Method::Poisson] {
                let prob = NceProblem::new(&model, &label, &off, method).unwrap();
                let mut g = vec![0.0; 10];
                let v = prob.value_grad(&th, &mut g).unwrap();
                // the same from f and the full Jacobian
                let mut f = vec![0.0; n + m];
                model.value(&th[1..], &mut f).unwrap();
                let mut jac = vec![0.0; (n + m) * 9];
                model.jacobian(&th[1..], &mut jac).unwrap();
                let (mut ll, mut g0) = (0.0, 0.0);
                let mut gj = [0.0; 9];
                for r in 0..n + m {
                    let (l, d, _) = super::super::row_terms(method, label[r], f[r] + th[0] + off[r]);
                    ll += l;
                    g0 += d;
                    for (k, o) in gj.iter_mut().enumerate() {
                        *o += d * jac[k * (n + m) + r];
                    }
                }
                assert!((v + ll).abs() < 1e-9 * ll.abs(), "{v} vs {}", -ll);
                assert!((g[0] + g0).abs() < 1e-9 * g0.abs().max(1.0));
                for k in 0..9 {
                    assert!((g[k + 1] + gj[k]).abs() < 1e-9 * gj[k].abs().max(1.0), "{k}");
                }
            }
        }
    }

    #[test]
    fn smoothed_gradient_matches_finite_differences() {
        let (n, m) = (200, 600);
        let (x, label, off) = small_problem(n, m, 31);
        let model = IcaModel::new(&x, n + m, 3).unwrap().smoothed(0.1);
        let prob = NceProblem::new(&model, &label, &off, Method::Logistic).unwrap();
        let th: Vec<f64> = (0..10).map(|k| 0.1 * k as f64 - 0.4).collect();
        let mut g = vec![0.0; 10];
        prob.value_grad(&th, &mut g).unwrap();
        let mut tmp = vec![0.0; 10];
        for k in 0..10 {
            let h = 1e-6;
            let (mut a, mut b) = (th.clone(), th.clone());
            a[k] += h;
            b[k] -= h;
            let fd = (prob.value_grad(&a, &mut tmp).unwrap() - prob.value_grad(&b, &mut tmp).unwrap()) / (2.0 * h);
            assert!((fd - g[k]).abs() <= 1e-6 * g[k].abs().max(1.0), "{k}: {fd} vs {}", g[k]);
        }
    }

    /// The smoothed, preconditioned fit reaches an exact objective as low as plain L-BFGS on the
    /// exact objective (within the kink noise), and its smoothed objective is stationary.
    #[test]
    fn smoothed_fit_is_as_good_as_the_exact_one() {
        let (n, m) = (800, 3200);
        let (x, label, off) = small_problem(n, m, 41);
        let model = IcaModel::new(&x, n + m, 3).unwrap();
        let prob = NceProblem::new(&model, &label, &off, Method::Logistic).unwrap();
        let xd: Vec<f64> = (0..3).flat_map(|j| x[j * (n + m)..j * (n + m) + n].to_vec()).collect();
        let w = whitening(&xd, n, 3).unwrap();
        let ctrl = FitControl {
            polish: 0,
            ..Default::default()
        };
        for k in 0..2 {
            let s = random_start(&w, 3, 2, k);
            let new = fit_starts_ica(&prob, std::slice::from_ref(&s), &ctrl, &mut || false).unwrap();
            let old = super::super::fit_starts(&prob, &[s], &ctrl, &mut || false).unwrap();
            let (a, b) = (&new.starts[0], &old.starts[0]);
            assert!(a.value <= b.value + 0.05, "start {k}: {} vs {}", a.value, b.value);
            assert!(a.evaluations < b.evaluations, "{} vs {}", a.evaluations, b.evaluations);
            let sm = model.smoothed(SMOOTH_FINE);
            let sp = NceProblem::new(&sm, &label, &off, Method::Logistic).unwrap();
            let mut g = vec![0.0; 10];
            let v = sp.value_grad(&a.par, &mut g).unwrap();
            assert!(g.iter().all(|u| u.abs() < 1e-4 * v), "{g:?}");
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
