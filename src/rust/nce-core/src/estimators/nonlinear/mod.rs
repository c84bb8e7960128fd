//! NCE for models nonlinear in their parameters: log p(x) = f(x; theta) + nu.
//!
//! A [`Model`] gives f on a fixed set of rows (data first, then reference) and products with its
//! Jacobian. The objective is minus the NCE logistic log-likelihood (or minus the Poisson-transform
//! log-likelihood) in (nu, theta), minimised by the core's L-BFGS and polished by Fisher-scoring
//! steps. Standard errors: the two-sample sandwich J^{-1} V J^{-1}, with J the Fisher information
//! sum_r w_r g_r g_r' (g_r = (1, df_r/dtheta)) and V the within-sample centred outer products of
//! the scores, which is the asymptotic covariance of Gutmann and Hyvarinen (2012, Theorem 3).

pub mod ica;

use crate::convergence::Convergence;
use crate::error::{NceError, Result};
use crate::optim::{minimise_lbfgs, LbfgsControl, Objective};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Rows per chunk of the parallel loops. Sums are formed per chunk and added in chunk order, so
/// the result does not depend on the number of threads.
pub const CHUNK: usize = 4096;

/// An unnormalised log density f(x; theta) evaluated on a fixed set of rows.
pub trait Model: Sync {
    /// Number of parameters theta (the intercept nu is not one of them).
    fn n_par(&self) -> usize;
    /// Number of rows.
    fn n_row(&self) -> usize;
    /// f at every row for `theta`.
    fn value(&self, theta: &[f64], f: &mut [f64]) -> Result<()>;
    /// Column-major n_row x n_par Jacobian df_r / dtheta_k.
    fn jacobian(&self, theta: &[f64], jac: &mut [f64]) -> Result<()>;
    /// out_k = sum_r v_r df_r/dtheta_k, for the `theta` of the last `value` call. Models with a
    /// cheap structure override this to avoid forming the Jacobian.
    fn jacobian_t_vec(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        let (n, p) = (self.n_row(), self.n_par());
        let mut jac = vec![0.0; n * p];
        self.jacobian(theta, &mut jac)?;
        for (k, o) in out.iter_mut().enumerate() {
            *o = jac[k * n..(k + 1) * n].iter().zip(v).map(|(a, b)| a * b).sum();
        }
        Ok(())
    }
    /// One fused pass over the rows: with (l_r, v_r) = terms(r, f_r), returns (sum_r l_r,
    /// sum_r v_r) and writes sum_r v_r df_r/dtheta into `grad`; l sums to a non-finite value when
    /// f is not finite somewhere. `None` (the default) means the model has no fused pass and the
    /// caller uses `value` and `jacobian_t_vec`.
    fn fused(&self, _theta: &[f64], _terms: &RowFn, _grad: &mut [f64]) -> Result<Option<(f64, f64)>> {
        Ok(None)
    }
}

/// The per-row terms of a fused pass: (row, f_r) -> (l_r, v_r).
pub type RowFn<'a> = dyn Fn(usize, f64) -> (f64, f64) + Sync + 'a;

/// Which NCE criterion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Logistic regression of the label on f + nu + offset (Gutmann and Hyvarinen).
    Logistic,
    /// Poisson transform: data rows contribute f + nu, reference rows -exp(f + nu + offset).
    Poisson,
}

impl Method {
    pub fn from_name(s: &str) -> Option<Method> {
        match s {
            "logistic" => Some(Method::Logistic),
            "poisson" => Some(Method::Poisson),
            _ => None,
        }
    }
}

/// Log-likelihood, its derivative in eta and the Fisher weight of one row.
#[inline]
fn row_terms(method: Method, y: f64, eta: f64) -> (f64, f64, f64) {
    match method {
        Method::Logistic => {
            // log(1 + e^eta) and the logistic mean from one exp(-|eta|), without overflow
            let e = (-eta.abs()).exp();
            let sp = eta.max(0.0) + e.ln_1p();
            let mu = if eta > 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) };
            (y * eta - sp, y - mu, mu * (1.0 - mu))
        }
        Method::Poisson => {
            if y > 0.5 {
                (eta, 1.0, 0.0)
            } else {
                let e = eta.min(700.0).exp();
                (-e, -e, e)
            }
        }
    }
}

/// The NCE problem: a model, labels (1 data, 0 reference) and offsets, in row order.
pub struct NceProblem<'a, M: Model + ?Sized> {
    pub model: &'a M,
    pub label: &'a [f64],
    pub offset: &'a [f64],
    pub method: Method,
    /// Run the row loops on the current rayon pool (never for models that call into R).
    pub parallel: bool,
}

impl<'a, M: Model + ?Sized> NceProblem<'a, M> {
    pub fn new(model: &'a M, label: &'a [f64], offset: &'a [f64], method: Method) -> Result<Self> {
        let n = model.n_row();
        if label.len() != n || offset.len() != n {
            return Err(NceError::invalid(
                "label",
                format!(
                    "label and offset must have one entry per row ({n}), got {} and {}",
                    label.len(),
                    offset.len()
                ),
            ));
        }
        if !label.iter().all(|&y| y == 0.0 || y == 1.0) {
            return Err(NceError::invalid("label", "must be 0 (reference) or 1 (data)"));
        }
        if !offset.iter().all(|o| o.is_finite()) {
            return Err(NceError::invalid("offset", "must be finite"));
        }
        Ok(NceProblem {
            model,
            label,
            offset,
            method,
            parallel: false,
        })
    }

    /// Run the row loops in parallel on the current rayon pool (same result for any thread count).
    pub fn with_parallel(mut self, parallel: bool) -> Self {
        self.parallel = parallel;
        self
    }

    /// Number of parameters including the intercept (first).
    pub fn dim(&self) -> usize {
        self.model.n_par() + 1
    }

    /// Minus the log-likelihood at par = (nu, theta), and its gradient.
    pub fn value_grad(&self, par: &[f64], grad: &mut [f64]) -> Result<f64> {
        let n = self.model.n_row();
        let (nu, theta) = (par[0], &par[1..]);
        let terms = |r: usize, f: f64| {
            let (l, g, _) = row_terms(self.method, self.label[r], f + nu + self.offset[r]);
            (l, g)
        };
        if let Some((ll, sr)) = self.model.fused(theta, &terms, &mut grad[1..])? {
            if !ll.is_finite() {
                return Ok(f64::INFINITY);
            }
            grad[0] = -sr;
            grad[1..].iter_mut().for_each(|g| *g = -*g);
            return Ok(-ll);
        }
        let mut f = vec![0.0; n];
        self.model.value(theta, &mut f)?;
        if !f.iter().all(|v| v.is_finite()) {
            return Ok(f64::INFINITY);
        }
        let mut resid = vec![0.0; n];
        let body = |(c, rc): (usize, &mut [f64])| -> (f64, f64) {
            let lo = c * CHUNK;
            let (mut ll, mut sr) = (0.0, 0.0);
            for (i, out) in rc.iter_mut().enumerate() {
                let r = lo + i;
                let (l, g, _) = row_terms(self.method, self.label[r], f[r] + nu + self.offset[r]);
                ll += l;
                sr += g;
                *out = g;
            }
            (ll, sr)
        };
        let parts: Vec<(f64, f64)> = if self.parallel {
            resid.par_chunks_mut(CHUNK).enumerate().map(body).collect()
        } else {
            resid.chunks_mut(CHUNK).enumerate().map(body).collect()
        };
        let ll: f64 = parts.iter().map(|p| p.0).sum();
        grad[0] = -parts.iter().map(|p| p.1).sum::<f64>();
        self.model.jacobian_t_vec(theta, &resid, &mut grad[1..])?;
        for g in grad[1..].iter_mut() {
            *g = -*g;
        }
        Ok(-ll)
    }

    /// Everything at par: f, eta, row derivative, weights, and the n x (p+1) matrix g of the
    /// derivatives of eta (first column 1).
    pub fn state(&self, par: &[f64]) -> Result<State> {
        let n = self.model.n_row();
        let p = self.model.n_par();
        let (nu, theta) = (par[0], &par[1..]);
        let mut f = vec![0.0; n];
        self.model.value(theta, &mut f)?;
        let mut g = vec![1.0; n * (p + 1)];
        self.model.jacobian(theta, &mut g[n..])?;
        let mut eta = vec![0.0; n];
        let mut resid = vec![0.0; n];
        let mut weight = vec![0.0; n];
        let mut loglik = 0.0;
        for r in 0..n {
            eta[r] = f[r] + nu + self.offset[r];
            let (l, d, w) = row_terms(self.method, self.label[r], eta[r]);
            loglik += l;
            resid[r] = d;
            weight[r] = w;
        }
        Ok(State {
            f,
            eta,
            resid,
            weight,
            g,
            n,
            k: p + 1,
            loglik,
        })
    }
}

/// The fit's quantities at one parameter value.
pub struct State {
    pub f: Vec<f64>,
    pub eta: Vec<f64>,
    pub resid: Vec<f64>,
    pub weight: Vec<f64>,
    /// Column-major n x k derivatives of eta (first column 1).
    pub g: Vec<f64>,
    pub n: usize,
    pub k: usize,
    pub loglik: f64,
}

impl State {
    /// Fisher information sum_r w_r g_r g_r'.
    pub fn information(&self) -> DMatrix<f64> {
        let (n, k) = (self.n, self.k);
        let mut j = DMatrix::zeros(k, k);
        for a in 0..k {
            let ga = &self.g[a * n..(a + 1) * n];
            for b in 0..=a {
                let gb = &self.g[b * n..(b + 1) * n];
                let s: f64 = (0..n).map(|r| self.weight[r] * ga[r] * gb[r]).sum();
                j[(a, b)] = s;
                j[(b, a)] = s;
            }
        }
        j
    }

    /// Gradient of the log-likelihood, sum_r resid_r g_r.
    pub fn score(&self) -> DVector<f64> {
        let n = self.n;
        DVector::from_fn(self.k, |a, _| {
            self.g[a * n..(a + 1) * n]
                .iter()
                .zip(&self.resid)
                .map(|(x, y)| x * y)
                .sum()
        })
    }

    /// Meat of the two-sample sandwich: per sample (label), sum s s' - n_s sbar sbar'.
    pub fn meat(&self, label: &[f64]) -> DMatrix<f64> {
        let (n, k) = (self.n, self.k);
        let mut v = DMatrix::zeros(k, k);
        for lab in [0.0, 1.0] {
            let rows: Vec<usize> = (0..n).filter(|&r| label[r] == lab).collect();
            if rows.is_empty() {
                continue;
            }
            let cnt = rows.len() as f64;
            let mut mean = vec![0.0; k];
            for (a, m) in mean.iter_mut().enumerate() {
                *m = rows.iter().map(|&r| self.resid[r] * self.g[a * n + r]).sum::<f64>() / cnt;
            }
            for a in 0..k {
                for b in 0..=a {
                    let s: f64 = rows
                        .iter()
                        .map(|&r| {
                            let sr = self.resid[r] * self.resid[r];
                            sr * self.g[a * n + r] * self.g[b * n + r]
                        })
                        .sum::<f64>()
                        - cnt * mean[a] * mean[b];
                    v[(a, b)] += s;
                    if a != b {
                        v[(b, a)] += s;
                    }
                }
            }
        }
        v
    }
}

impl<M: Model + ?Sized> Objective for NceProblem<'_, M> {
    fn dim(&self) -> usize {
        NceProblem::dim(self)
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        NceProblem::value_grad(self, x, grad)
    }
}

/// The objective in coordinates u with par = x0 + T u, T = L^{-T} for the Cholesky factor L of
/// the Fisher information at x0: there the Hessian is near the identity, so L-BFGS starts with
/// Fisher-scoring steps.
pub struct Preconditioned<'a, O: Objective + ?Sized> {
    obj: &'a O,
    x0: Vec<f64>,
    t: DMatrix<f64>,
}

impl<'a, O: Objective + ?Sized> Preconditioned<'a, O> {
    /// `None` when the information is not positive definite.
    pub fn new(obj: &'a O, x0: &[f64], information: DMatrix<f64>) -> Option<Self> {
        let l = information.cholesky()?.l();
        let t = l.transpose().try_inverse()?;
        Some(Preconditioned {
            obj,
            x0: x0.to_vec(),
            t,
        })
    }

    /// par = x0 + T u.
    pub fn par(&self, u: &[f64]) -> Vec<f64> {
        let tu = &self.t * DVector::from_column_slice(u);
        self.x0.iter().zip(tu.iter()).map(|(a, b)| a + b).collect()
    }
}

impl<O: Objective + ?Sized> Objective for Preconditioned<'_, O> {
    fn dim(&self) -> usize {
        self.x0.len()
    }
    fn value_grad(&self, u: &[f64], grad: &mut [f64]) -> Result<f64> {
        let par = self.par(u);
        let mut g = vec![0.0; par.len()];
        let v = self.obj.value_grad(&par, &mut g)?;
        let gu = self.t.transpose() * DVector::from_column_slice(&g);
        grad.copy_from_slice(gu.as_slice());
        Ok(v)
    }
}

/// Settings of one nonlinear fit.
#[derive(Clone, Debug)]
pub struct FitControl {
    pub lbfgs: LbfgsControl,
    /// Most Fisher-scoring steps after L-BFGS (0: none).
    pub polish: usize,
    /// Scoring stops when the Newton decrement g'J^{-1}g / 2 falls below this.
    pub polish_tol: f64,
}

impl Default for FitControl {
    fn default() -> Self {
        FitControl {
            lbfgs: LbfgsControl {
                maxit: 2000,
                gtol: 1e-7,
                ftol: 1e-10,
                memory: 10,
            },
            polish: 20,
            polish_tol: 1e-16,
        }
    }
}

/// The result of one start.
#[derive(Clone, Debug)]
pub struct StartResult {
    pub par: Vec<f64>,
    /// Minus the log-likelihood at `par`.
    pub value: f64,
    pub evaluations: usize,
    /// L-BFGS iterations, and whether (and why not) the fit converged.
    pub convergence: Convergence,
}

/// Minimise from one start: L-BFGS, then Fisher-scoring steps with step halving while they
/// decrease the objective (quadratic convergence when f is linear in theta).
pub fn fit_one<M: Model + ?Sized>(
    prob: &NceProblem<M>,
    start: &[f64],
    ctrl: &FitControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<StartResult> {
    let o = minimise_lbfgs(prob, start, &ctrl.lbfgs, interrupt)?;
    let mut par = o.x;
    let mut value = o.value;
    let mut convergence = o.convergence;
    let mut evaluations = o.evaluations;
    let k = prob.dim();
    let mut grad = vec![0.0; k];
    for _ in 0..ctrl.polish {
        if interrupt() {
            return Err(NceError::Interrupted);
        }
        let st = prob.state(&par)?;
        let j = st.information();
        let score = st.score();
        let Some(ch) = j.cholesky() else { break };
        let step = ch.solve(&score);
        let decrement = score.dot(&step) / 2.0;
        if !(decrement.is_finite()) {
            break;
        }
        if decrement <= ctrl.polish_tol * value.abs().max(1.0) {
            convergence.converged = true;
            convergence.message = "converged (Fisher-scoring decrement below tolerance)".to_string();
            break;
        }
        // A Fisher step is a descent direction; if a thousandth of it does not decrease the
        // objective, the objective is flat at round-off or kinked here (|.| in f): stop.
        let mut t = 1.0;
        let mut moved = false;
        for _ in 0..11 {
            let trial: Vec<f64> = par.iter().zip(step.iter()).map(|(a, b)| a + t * b).collect();
            evaluations += 1;
            let v = prob.value_grad(&trial, &mut grad)?;
            if v.is_finite() && v <= value {
                par = trial;
                value = v;
                moved = true;
                break;
            }
            t /= 2.0;
        }
        if !moved {
            break;
        }
    }
    Ok(StartResult {
        par,
        value,
        evaluations,
        convergence,
    })
}

/// All starts and the index of the best (lowest objective among finite ones).
pub struct MultiFit {
    pub starts: Vec<StartResult>,
    pub best: usize,
}

pub fn fit_starts<M: Model + ?Sized>(
    prob: &NceProblem<M>,
    starts: &[Vec<f64>],
    ctrl: &FitControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<MultiFit> {
    fit_starts_with(starts, |s| fit_one(prob, s, ctrl, interrupt))
}

/// Every start fitted by `fit` (in order) and the index of the best (lowest finite objective).
pub fn fit_starts_with(starts: &[Vec<f64>], mut fit: impl FnMut(&[f64]) -> Result<StartResult>) -> Result<MultiFit> {
    if starts.is_empty() {
        return Err(NceError::invalid("n_starts", "needs at least one start"));
    }
    let out = starts.iter().map(|s| fit(s)).collect::<Result<Vec<_>>>()?;
    best_of(out)
}

/// The starts' results and the index of the best (lowest finite objective).
fn best_of(out: Vec<StartResult>) -> Result<MultiFit> {
    let best = (0..out.len())
        .filter(|&i| out[i].value.is_finite())
        .min_by(|&a, &b| out[a].value.total_cmp(&out[b].value))
        .ok_or_else(|| NceError::Numerical("no start reached a finite objective".into()))?;
    Ok(MultiFit { starts: out, best })
}

/// Covariances at the optimum: (sandwich, naive J^{-1}); NaN when J is singular.
pub fn covariances<M: Model + ?Sized>(
    prob: &NceProblem<M>,
    par: &[f64],
) -> Result<(State, DMatrix<f64>, DMatrix<f64>)> {
    let st = prob.state(par)?;
    let j = st.information();
    let k = st.k;
    match j.clone().cholesky() {
        Some(ch) => {
            let inv = ch.inverse();
            let meat = st.meat(prob.label);
            let sw = &inv * meat * &inv;
            let sw = (&sw + sw.transpose()) * 0.5;
            Ok((st, sw, inv))
        }
        None => {
            let nan = DMatrix::from_element(k, k, f64::NAN);
            Ok((st, nan.clone(), nan))
        }
    }
}

/// A model given by a closure-free table: f and its Jacobian as explicit functions (for tests).
pub struct FnModel<F, J>
where
    F: Fn(&[f64], &mut [f64]) -> Result<()> + Sync,
    J: Fn(&[f64], &mut [f64]) -> Result<()> + Sync,
{
    pub n: usize,
    pub p: usize,
    pub f: F,
    pub j: J,
}

impl<F, J> Model for FnModel<F, J>
where
    F: Fn(&[f64], &mut [f64]) -> Result<()> + Sync,
    J: Fn(&[f64], &mut [f64]) -> Result<()> + Sync,
{
    fn n_par(&self) -> usize {
        self.p
    }
    fn n_row(&self) -> usize {
        self.n
    }
    fn value(&self, theta: &[f64], f: &mut [f64]) -> Result<()> {
        (self.f)(theta, f)
    }
    fn jacobian(&self, theta: &[f64], jac: &mut [f64]) -> Result<()> {
        (self.j)(theta, jac)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream_rng;
    use rand::Rng;
    use rand_distr::StandardNormal;

    /// Gaussian N(mu, s^2) written as f = -(x - mu)^2 exp(-2 ls) / 2, theta = (mu, ls), with
    /// data and a wide normal reference.
    fn gauss_problem(n: usize, m: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut rng = stream_rng(3, 0);
        let mut x = Vec::new();
        for _ in 0..n {
            let z: f64 = rng.sample(StandardNormal);
            x.push(1.0 + 0.5 * z);
        }
        let mut off = vec![0.0; n + m];
        for _ in 0..m {
            let z: f64 = rng.sample(StandardNormal);
            x.push(2.0 * z);
        }
        let lq = |u: f64| -0.5 * (u / 2.0).powi(2) - (2.0f64).ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
        let label: Vec<f64> = (0..n + m).map(|r| if r < n { 1.0 } else { 0.0 }).collect();
        for r in 0..n + m {
            off[r] = (n as f64 / m as f64).ln() - lq(x[r]);
        }
        (x, label, off)
    }

    #[allow(clippy::type_complexity)]
    fn gauss_model(
        x: &[f64],
    ) -> FnModel<
        impl Fn(&[f64], &mut [f64]) -> Result<()> + Sync + '_,
        impl Fn(&[f64], &mut [f64]) -> Result<()> + Sync + '_,
    > {
        let n = x.len();
        FnModel {
            n,
            p: 2,
            f: move |th: &[f64], f: &mut [f64]| {
                let k = (-2.0 * th[1]).exp();
                for (fr, xr) in f.iter_mut().zip(x) {
                    *fr = -(xr - th[0]).powi(2) * k / 2.0;
                }
                Ok(())
            },
            j: move |th: &[f64], j: &mut [f64]| {
                let k = (-2.0 * th[1]).exp();
                for r in 0..n {
                    j[r] = (x[r] - th[0]) * k;
                    j[n + r] = (x[r] - th[0]).powi(2) * k;
                }
                Ok(())
            },
        }
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let (x, label, off) = gauss_problem(200, 400);
        let model = gauss_model(&x);
        for method in [Method::Logistic, Method::Poisson] {
            let prob = NceProblem::new(&model, &label, &off, method).unwrap();
            let par = [-0.3, 0.7, -0.4];
            let mut g = vec![0.0; 3];
            prob.value_grad(&par, &mut g).unwrap();
            for k in 0..3 {
                let h = 1e-6;
                let mut a = par;
                let mut b = par;
                a[k] += h;
                b[k] -= h;
                let mut tmp = vec![0.0; 3];
                let fd = (prob.value_grad(&a, &mut tmp).unwrap() - prob.value_grad(&b, &mut tmp).unwrap()) / (2.0 * h);
                assert!(
                    (fd - g[k]).abs() <= 1e-6 * g[k].abs().max(1.0),
                    "{method:?} {k}: {fd} vs {}",
                    g[k]
                );
            }
        }
    }

    #[test]
    fn recovers_gaussian_and_normaliser() {
        let (x, label, off) = gauss_problem(2000, 20000);
        let model = gauss_model(&x);
        let prob = NceProblem::new(&model, &label, &off, Method::Logistic).unwrap();
        let fit = fit_starts(&prob, &[vec![0.0, 0.0, 0.0]], &FitControl::default(), &mut || false).unwrap();
        let b = &fit.starts[fit.best];
        assert!(b.convergence.converged, "{}", b.convergence.message);
        // truth: mu = 1, log sd = ln 0.5, nu = -log(sqrt(2 pi) 0.5)
        assert!((b.par[1] - 1.0).abs() < 0.05);
        assert!((b.par[2] - 0.5f64.ln()).abs() < 0.05);
        let nu = -(0.5 * (2.0 * std::f64::consts::PI).sqrt()).ln();
        assert!((b.par[0] - nu).abs() < 0.05);
        let (_, sw, naive) = covariances(&prob, &b.par).unwrap();
        for a in 0..3 {
            assert!(sw[(a, a)] > 0.0 && naive[(a, a)] > 0.0);
        }
        // gradient at the optimum is tiny
        let mut g = vec![0.0; 3];
        prob.value_grad(&b.par, &mut g).unwrap();
        assert!(g.iter().all(|v| v.abs() < 1e-4), "{g:?}");
    }
}
