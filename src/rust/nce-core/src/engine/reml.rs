//! Smoothing-parameter selection by Laplace-approximate REML for known-scale families.
//!
//! Minimises mgcv's REML score (what `gam(method = "REML")` reports as `gcv.ubre`)
//!     D(rho) = -l(b) + b' S b / 2 + log|H| / 2 - log|S|_+ / 2 - Mp / 2 log(2 pi),
//! H = X'WX + S_lambda, b = b(rho) the penalised fit, by Newton's method on rho = log lambda with
//! the exact gradient and Hessian (including the derivatives of W through b). Each inner fit is
//! a penalised IRLS as in `irls::fit` (same steps, step halving and convergence test), started
//! from the first-order prediction b + sum_j (db/drho_j) (rho_j' - rho_j), with the Hessian of
//! the last iteration reused as the final one. Per outer iteration the derivatives cost a few
//! passes over the rows (see `Ctx::derivs`); everything else is p x p algebra.

use crate::convergence::Convergence;
use crate::engine::design::{Design, CHUNK_ROWS};
use crate::engine::family::Family;
use crate::engine::irls::{Control, GlmFit, Problem};
use crate::engine::newton::newton_step;
use crate::engine::penalty::PenaltySet;
use crate::engine::pirls::{self, Cand};
use crate::engine::row_pairs::{row_pair_traces, row_pairs_pay};
use crate::error::{NceError, Result};
use crate::linalg::aliased_columns;
use nalgebra::{Cholesky, DMatrix, DMatrixView, DVector, Dyn};
use rayon::prelude::*;

#[derive(Debug, Clone)]
pub struct RemlControl {
    /// Fixed smoothing parameters: no selection, just the fit and its REML score.
    pub sp: Option<Vec<f64>>,
    /// Starting smoothing parameters (default: mgcv-like scale from diag(X'WX) / diag(S_j)).
    pub initial_sp: Option<Vec<f64>>,
    /// rho_j stays within +- this of the log of the automatic scale (mgcv-like guard against
    /// smoothing parameters running to 0 or infinity, where the score is flat).
    pub rho_range: f64,
    /// Converged when every free |dD/drho_j| <= tol * (1 + |D|).
    pub tol: f64,
    pub max_outer: usize,
    /// Largest Newton step in any rho_j.
    pub max_step: f64,
    pub max_halving: usize,
    /// Also the score's Hessian in rho at the final point (`RemlFit::hessian`). The iteration
    /// needs it only for its Newton steps, and a fit that stops on the gradient test (or has
    /// fixed smoothing parameters) skips its passes over the rows unless this asks for it.
    pub hessian: bool,
    /// Inner penalised IRLS control.
    pub inner: Control,
}

impl Default for RemlControl {
    fn default() -> Self {
        RemlControl {
            sp: None,
            initial_sp: None,
            rho_range: 15.0,
            tol: 1e-7,
            max_outer: 200,
            max_step: 5.0,
            max_halving: 30,
            hessian: false,
            inner: Control {
                epsilon: 1e-11,
                ..Control::default()
            },
        }
    }
}

impl RemlControl {
    /// The one set of rules for these settings (the inner fit's included).
    pub fn check(&self) -> Result<()> {
        self.inner.check()?;
        if !(self.tol > 0.0 && self.rho_range > 0.0 && self.max_step > 0.0) || self.max_outer < 1 {
            return Err(NceError::invalid(
                "control",
                "tol, rho_range and max_step must be positive and max_outer at least 1",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct RemlFit {
    pub coefficients: Vec<f64>,
    /// Smoothing parameters lambda (one per penalty) and their logs.
    pub sp: Vec<f64>,
    pub rho: Vec<f64>,
    /// Bayesian posterior covariance (X'WX + S)^{-1}.
    pub vp: DMatrix<f64>,
    /// Frequentist covariance Vp X'WX Vp.
    pub ve: DMatrix<f64>,
    /// diag(Vp X'WX): effective degrees of freedom per coefficient.
    pub edf: Vec<f64>,
    /// REML score D (mgcv's `gcv.ubre`), and its gradient and Hessian in rho (the Hessian
    /// where the iteration computed it at the final point, or `RemlControl::hessian` asked).
    pub reml: f64,
    pub gradient: Vec<f64>,
    pub hessian: Option<DMatrix<f64>>,
    /// Penalty null-space dimension used in the constant of the score.
    pub mp: usize,
    /// rho_j held at a bound of the allowed range.
    pub at_bound: Vec<bool>,
    /// The inner fit at the final smoothing parameters.
    pub fit: GlmFit,
    /// The outer (Newton on rho) iterations, whether they and the final inner fit converged,
    /// and why not.
    pub convergence: Convergence,
    /// Inner Newton iterations summed over all outer iterations.
    pub inner_iterations: usize,
}

/// The penalised fit at one rho (what `irls::fit` returns, minus what only the final fit needs).
struct Inner {
    beta: Vec<f64>,
    /// Linear predictor including the offset, and the fitted means.
    eta: Vec<f64>,
    mu: Vec<f64>,
    /// X'WX + S_lambda at beta.
    hessian: DMatrix<f64>,
    loglik: f64,
    objective: f64,
    convergence: Convergence,
}

/// One inner fit with its score; derivatives are filled in on demand.
struct Point {
    rho: Vec<f64>,
    fit: Inner,
    score: f64,
    chol: Cholesky<f64, Dyn>,
    /// H = D C D with C = chol's matrix: the diagonal scaling of H.
    dscale: Vec<f64>,
}

pub(crate) struct Derivs {
    pub(crate) grad: Vec<f64>,
    /// None where the gradient alone settled the iteration (`RemlModel::derivs_unless`).
    pub(crate) hess: Option<DMatrix<f64>>,
    /// d beta / d rho_j.
    pub(crate) dbeta: Vec<DVector<f64>>,
}

/// What the outer Newton iteration on rho needs from a model: the penalised fit and score at
/// rho, and the score's derivatives there. `Ctx` (any `Design`) and the free-intercept model of
/// `grouped::fit_reml_free_intercepts` (its Hessian eliminated per group) implement it.
pub(crate) trait RemlModel {
    type Point;
    fn point(
        &mut self,
        rho: &[f64],
        start: Option<&[f64]>,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> Result<Self::Point>;
    fn derivs(&self, pt: &Self::Point) -> Result<Derivs>;
    /// `derivs`, without the Hessian where `enough(gradient)` says the gradient settles the
    /// iteration (the Hessian's passes over the rows cost more than the gradient's). By default
    /// the full derivatives.
    fn derivs_unless(&self, pt: &Self::Point, _enough: &dyn Fn(&[f64]) -> bool) -> Result<Derivs> {
        self.derivs(pt)
    }
    fn score(pt: &Self::Point) -> f64;
    fn rho(pt: &Self::Point) -> &[f64];
    fn beta(pt: &Self::Point) -> &[f64];
    /// The inner fit's convergence and message.
    fn inner_status(pt: &Self::Point) -> (bool, &str);
    /// Where performance iteration at this point's working weights would move rho (see
    /// `freml`); None where the model cannot say.
    fn working_start(&self, _pt: &Self::Point, _lo: &[f64], _hi: &[f64]) -> Option<Vec<f64>> {
        None
    }
    /// Stop later inner fits at this relative change in deviance (None: the control's own);
    /// false where the model has no performance iteration to gain from it.
    fn set_loose_epsilon(&mut self, _epsilon: Option<f64>) -> bool {
        false
    }
    /// Performance iteration from the start `st` (see `Ctx::performance_fit`): the point
    /// (rho, beta) where it settles; None where the model has none or it did not settle.
    fn performance_fit(
        &mut self,
        _st: &Start<'_>,
        _interrupted: &mut dyn FnMut() -> bool,
    ) -> Option<Result<(Vec<f64>, Vec<f64>)>> {
        None
    }
}

/// The inner fits' convergence before the exact Newton phase (first point, performance
/// rounds), which only choose where Newton starts; that point is then refitted in full. On the
/// pooled LATKES problem (588,000 rows, 5 penalties) 12 inner iterations instead of 16, the same
/// optimum (REML score to 1e-6, sp to 5 digits); 1e-3 saved one more, 1e-2 moved the optimum.
const LOOSE_EPSILON: f64 = 1e-4;

/// The change in the degrees of freedom each penalty takes away (`freml::penalty_edf`; the
/// largest over the penalties) below which performance iteration has settled.
const PERFORMANCE_EDF: f64 = 1e-2;

/// The fewest rows for which the fit starts by performance iteration. With little data the REML
/// score can have several optima, and the path decides which one a fit ends at: the classifier
/// of the death model's `design_eig()` (1,200 rows) ended at a lower score than `gam()`'s but a
/// linear predictor up to 3 from it, where the start at the automatic scale ends at gam's
/// optimum. On `nce()` fits of 2,100 to 84,000 rows (`cr`, `te()`, `s + s + ti()` and the
/// three-term thin-plate model, 3 seeds at each of 6 sizes; `bench/reml-start.R`) both starts
/// ended at the same REML score, within 1.4e-5 of each other, and performance iteration took
/// 18-22% fewer inner iterations; from 20,000 rows (16 times the counterexample) it is the start.
const PERFORMANCE_MIN_ROWS: usize = 20_000;

/// The relative change in deviance below which performance iteration starts to move rho: the
/// weights of the first steps are far from the fit's and would send rho far off.
const PERFORMANCE_SETTLED: f64 = 1e-1;

/// The outcome of the outer iteration.
pub(crate) struct Outer<P> {
    pub(crate) pt: P,
    pub(crate) der: Derivs,
    pub(crate) lo: Vec<f64>,
    pub(crate) hi: Vec<f64>,
    pub(crate) fixed: bool,
    pub(crate) convergence: Convergence,
}

struct Ctx<'a, D: Design> {
    d: &'a D,
    prob: &'a Problem<'a>,
    pens: &'a PenaltySet,
    ctrl: &'a RemlControl,
    inner_iterations: usize,
    /// Saturated log-likelihood (for deviances).
    sat: f64,
    /// See `LOOSE_EPSILON`.
    loose_epsilon: Option<f64>,
}

/// Per-row dW/deta and d2W/deta2 (prior weights applied) from the fitted mean mu.
pub(crate) fn weight_derivs(family: Family, y: f64, mu: f64, pw: f64) -> (f64, f64) {
    if pw == 0.0 {
        return (0.0, 0.0);
    }
    match family {
        Family::Binomial => {
            let w = mu * (1.0 - mu);
            (pw * w * (1.0 - 2.0 * mu), pw * w * (1.0 - 6.0 * mu + 6.0 * mu * mu))
        }
        Family::Poisson => (pw * mu, pw * mu),
        Family::PoissonTransform => {
            if y > 0.5 {
                (0.0, 0.0)
            } else {
                (pw * mu, pw * mu)
            }
        }
    }
}

/// `pick` of the `weight_derivs` of every row (in parallel chunks; each row on its own).
pub(crate) fn weight_derivs_rows(prob: &Problem, mu: &[f64], pick: impl Fn((f64, f64)) -> f64 + Sync) -> Vec<f64> {
    let mut v = vec![1.0; mu.len()];
    scale_by_weight_derivs(prob, mu, &mut v, pick);
    v
}

/// `v` times `pick` of the `weight_derivs` of each row, in place.
pub(crate) fn scale_by_weight_derivs(
    prob: &Problem,
    mu: &[f64],
    v: &mut [f64],
    pick: impl Fn((f64, f64)) -> f64 + Sync,
) {
    v.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, a)| {
        for (i, x) in a.iter_mut().enumerate() {
            let r = k * CHUNK_ROWS + i;
            *x *= pick(weight_derivs(prob.family, prob.y[r], mu[r], prob.prior_weights[r]));
        }
    });
}

/// Cholesky of D^{-1} H D^{-1}, D = sqrt(diag H): scale-free, so log|H| stays accurate.
pub(crate) fn scaled_cholesky(h: &DMatrix<f64>) -> Result<(Cholesky<f64, Dyn>, Vec<f64>)> {
    let p = h.nrows();
    let d: Vec<f64> = (0..p).map(|i| h[(i, i)].max(f64::MIN_POSITIVE).sqrt()).collect();
    let c = DMatrix::from_fn(p, p, |i, j| h[(i, j)] / (d[i] * d[j]));
    let ch = c
        .cholesky()
        .ok_or_else(|| NceError::Numerical("the penalised Hessian X'WX + S is not positive definite".into()))?;
    Ok((ch, d))
}

impl<D: Design> Ctx<'_, D> {
    fn deviance(&self, objective: f64) -> f64 {
        2.0 * (self.sat - objective)
    }

    /// Penalised IRLS (`pirls::newton`), warm-started from `start`.
    fn inner(&self, s: &DMatrix<f64>, start: Option<&[f64]>, interrupted: &mut dyn FnMut() -> bool) -> Result<Inner> {
        let loose;
        let ctrl = match self.loose_epsilon {
            Some(epsilon) => {
                loose = Control {
                    epsilon,
                    ..self.ctrl.inner.clone()
                };
                &loose
            }
            None => &self.ctrl.inner,
        };
        let (cur, hessian, convergence) = pirls::newton(self, s, ctrl, start, interrupted)?;
        let prob = self.prob;
        let mu = cur.eta.par_iter().map(|&e| prob.family.mean(e)).collect();
        Ok(Inner {
            beta: cur.beta,
            eta: cur.eta,
            mu,
            hessian,
            loglik: cur.loglik,
            objective: cur.objective,
            convergence,
        })
    }

    /// Performance iteration, as mgcv's `bam` fREML: penalised IRLS in which each step first
    /// moves rho to the working model's REML minimiser at that step's weights
    /// (`freml::working_rho`), then takes the Newton step for the new penalty (halved until the
    /// penalised log-likelihood at that penalty does not fall). It stops once the deviance
    /// changes by less than `LOOSE_EPSILON` (relative) and no penalty's `freml::penalty_edf` by
    /// `PERFORMANCE_EDF`. This replaces a first fit at the automatic scale followed by rounds
    /// that each refit to convergence (`start_phase`, now the fallback, and still the start
    /// below `PERFORMANCE_MIN_ROWS`): on the pooled 560-subject LATKES fit 11 inner iterations
    /// and one Newton step instead of 15 and two (two derivative passes instead of three).
    /// None if it does not settle within the inner fit's `maxit` steps.
    fn performance_fit(
        &mut self,
        st: &Start<'_>,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> Option<Result<(Vec<f64>, Vec<f64>)>> {
        if self.d.nrow() < PERFORMANCE_MIN_ROWS {
            return None;
        }
        let (pens, ctrl) = (self.pens, &self.ctrl.inner);
        let total = |rho: &[f64]| pens.total(&rho.iter().map(|r| r.exp()).collect::<Vec<_>>());
        let mut rho = st.rho0.to_vec();
        let mut s = total(&rho);
        let mut cur: Option<Cand> = st.beta.or(st.start0).and_then(|b| {
            let c = pirls::evaluate(self.d, self.prob, Some(&s), b.to_vec(), Vec::new());
            c.objective.is_finite().then_some(c)
        });
        let mut start_eta = cur.is_none().then(|| pirls::initial_eta(self.prob));
        let n = self.d.nrow();
        let (mut w, mut v) = (vec![0.0; n], vec![0.0; n]);
        let mut spare: Vec<f64> = Vec::new();
        // The last step's relative change in deviance.
        let mut change = f64::INFINITY;
        for it in 0..ctrl.maxit {
            if interrupted() {
                return Some(Err(NceError::Interrupted));
            }
            let eta = cur
                .as_ref()
                .map_or_else(|| start_eta.as_deref().unwrap_or_default(), |c| &c.eta[..]);
            pirls::working_into(self.prob, eta, &mut w, &mut v, None);
            let (mut h, b) = pirls::NewtonModel::system(self, &s, &w, &v).ok()?;
            if it == 0 {
                if let Err(e) = pirls::NewtonModel::check_aliased(self, &h) {
                    return Some(Err(e));
                }
            }
            self.inner_iterations += 1;
            let mut beta = pirls::NewtonModel::solve(self, &h, &b).ok()?;
            let mut moved = f64::INFINITY;
            if change <= PERFORMANCE_SETTLED {
                // Tighter than the rounds' 1e-7, so that a smoothing parameter on a flat stretch
                // goes about as far along it as the exact optimum (settling is judged on edf, not
                // rho): 1e-7 left the pooled 56-subject fit two Newton steps, 1e-8 none beyond the
                // one always taken; 1e-10 sent one to its bound, where the exact refit failed and
                // the start was redone.
                let next = super::freml::working_rho(&h, &beta, pens, &rho, (st.lo, st.hi), self.ctrl.max_step, 1e-8)?;
                let before = super::freml::penalty_edf(&h, pens, &rho)?;
                let s_next = total(&next);
                h += &s_next - &s;
                let after = super::freml::penalty_edf(&h, pens, &next)?;
                moved = before
                    .iter()
                    .zip(&after)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                beta = pirls::NewtonModel::solve(self, &h, &b).ok()?;
                (rho, s) = (next, s_next);
            }
            let mut cand = pirls::evaluate(self.d, self.prob, Some(&s), beta, std::mem::take(&mut spare));
            if let Some(c) = cur.as_mut() {
                // The current point's objective under the new penalty (p x p algebra).
                let old = DVector::from_column_slice(&c.beta);
                c.objective = c.loglik - 0.5 * (old.transpose() * &s * &old)[(0, 0)];
                cand = pirls::halve(c, cand, ctrl.max_halving, |t, e| {
                    pirls::evaluate(self.d, self.prob, Some(&s), t, e)
                })?;
                let (d_new, d_old) = (self.deviance(cand.objective), self.deviance(c.objective));
                change = (d_new - d_old).abs() / (d_new.abs() + 0.1);
                if change <= LOOSE_EPSILON && moved < PERFORMANCE_EDF {
                    return Some(Ok((rho, cand.beta)));
                }
            } else if !cand.objective.is_finite() {
                return None;
            }
            start_eta = None;
            if let Some(old) = cur.replace(cand) {
                spare = old.eta;
            }
        }
        None
    }

    /// Fit at rho (warm-started) and compute the REML score.
    fn point(&mut self, rho: &[f64], start: Option<&[f64]>, interrupted: &mut dyn FnMut() -> bool) -> Result<Point> {
        let lambda: Vec<f64> = rho.iter().map(|r| r.exp()).collect();
        let s = self.pens.total(&lambda);
        let fit = self.inner(&s, start, interrupted)?;
        self.inner_iterations += fit.convergence.iterations;
        let (chol, dscale) = scaled_cholesky(&fit.hessian)?;
        let l = chol.l();
        let log_det_h: f64 = (0..l.nrows()).map(|i| 2.0 * (l[(i, i)].ln() + dscale[i].ln())).sum();
        let beta = DVector::from_column_slice(&fit.beta);
        let pen = (beta.transpose() * &s * &beta)[(0, 0)];
        let log_det_s = self.pens.log_det(rho)?.value;
        let mp = self.pens.null_space_dim() as f64;
        let score =
            -fit.loglik + 0.5 * pen + 0.5 * log_det_h - 0.5 * log_det_s - 0.5 * mp * (2.0 * std::f64::consts::PI).ln();
        if !score.is_finite() {
            return Err(NceError::Numerical("the REML score is not finite".into()));
        }
        Ok(Point {
            rho: rho.to_vec(),
            fit,
            score,
            chol,
            dscale,
        })
    }

    /// H^{-1} from the scaled factor.
    fn h_inverse(pt: &Point) -> DMatrix<f64> {
        let ci = pt.chol.inverse();
        let d = &pt.dscale;
        let m = DMatrix::from_fn(ci.nrows(), ci.ncols(), |i, j| ci[(i, j)] / (d[i] * d[j]));
        (&m + m.transpose()) * 0.5
    }

    /// Exact gradient and Hessian of the score in rho.
    ///
    /// With dH_j = lambda_j S_j + X' diag(w1 X b_j) X (b_j = d beta / d rho_j), the row passes
    /// are: X b_j (m linear predictors), the m matrices X' diag(w1 X b_j) X (one multi-weight
    /// cross-product pass), the leverages x_i' H^{-1} x_i (one pass), and X'(w1 lev) (one pass);
    /// everything else is p x p algebra. tr(H^{-1} X' diag(w1 X b_jk) X) = (X'(w1 lev))' b_jk
    /// needs no pass per pair. A dense design with few rows against its coefficients and
    /// penalties takes the pairs' traces by pairs of rows instead (`engine::row_pairs`), with no
    /// cross-product per penalty.
    fn derivs(&self, pt: &Point) -> Result<Derivs> {
        self.derivs_by(pt, row_pairs_pay(self.d.nrow(), self.pens), &|_| false)
    }

    /// `derivs`, by pairs of rows where `by_rows` and the design is dense, and without the
    /// Hessian where `enough(gradient)`.
    fn derivs_by(&self, pt: &Point, by_rows: bool, enough: &dyn Fn(&[f64]) -> bool) -> Result<Derivs> {
        let (d, pens, prob) = (self.d, self.pens, self.prob);
        let (n, m) = (d.nrow(), pens.len());
        let beta = DVector::from_column_slice(&pt.fit.beta);
        let lam: Vec<f64> = pt.rho.iter().map(|r| r.exp()).collect();
        let hinv = Self::h_inverse(pt);
        let w1 = weight_derivs_rows(prob, &pt.fit.mu, |w| w.0);
        let ld = pens.log_det(&pt.rho)?;

        // The row vectors are ordered so that at most m + 2 are held at once (pooled fits have
        // millions of rows): leverages first, with w1 lev summed at once; then the m linear
        // predictors X b_j, which with w1 and the leverages give the gradient. Past it, the
        // leverages are scaled in place into w2 lev, whose pair sums with the X b_j are taken
        // before those are scaled in place by w1 for the cross-product pass.
        let mut lev = vec![0.0; n];
        d.row_quadratic_forms(&hinv, &mut lev);
        let w1lev: Vec<f64> = w1.iter().zip(&lev).map(|(a, b)| a * b).collect();
        let u = d.crossprod_vec(&w1lev);
        drop(w1lev);

        // First order: tr(A_j) = lambda_j tr(H^{-1} S_j) + sum_i w1_i (X b_j)_i lev_i.
        let sb: Vec<DVector<f64>> = (0..m).map(|j| pens.apply(j, beta.as_slice())).collect();
        let bj: Vec<DVector<f64>> = (0..m).map(|j| &hinv * &sb[j] * (-lam[j])).collect();
        let bref: Vec<&[f64]> = bj.iter().map(|b| b.as_slice()).collect();
        let mut ej = d.linear_predictors(&bref);
        let grad: Vec<f64> = (0..m)
            .map(|j| {
                let tra = lam[j] * pens.trace_with(j, &hinv) + ws_dot3(&w1, &lev, &ej[j]);
                0.5 * lam[j] * beta.dot(&sb[j]) + 0.5 * tra - 0.5 * ld.grad[j]
            })
            .collect();
        if enough(&grad) {
            return Ok(Derivs {
                grad,
                hess: None,
                dbeta: bj,
            });
        }
        // By pairs of rows (engine::row_pairs) where the design is dense and that is cheaper:
        // it needs the leverages again.
        let dense = if by_rows { d.dense_matrix() } else { None };
        let lev_kept = dense.as_ref().map(|_| lev.clone());
        let mut w2lev = lev;
        scale_by_weight_derivs(prob, &pt.fit.mu, &mut w2lev, |w| w.1);
        let pairs: Vec<(usize, usize)> = (0..m).flat_map(|j| (j..m).map(move |k| (j, k))).collect();
        let w2_pairs: Vec<f64> = pairs.iter().map(|&(j, k)| ws_dot3(&w2lev, &ej[j], &ej[k])).collect();
        drop(w2lev);
        let p = hinv.nrows();
        // Second order: tr(A_j), tr(A_k A_j) and u' d2b/drho_j drho_k for the pairs j <= k, with
        // d2b/drho_j drho_k = [j == k] b_j - H^{-1} (dH_k b_j + lambda_j S_j b_k).
        let (cross, u_d2b) = match (dense, lev_kept) {
            (Some(x), Some(lev)) => {
                // By pairs of rows (engine::row_pairs). With h = H^{-1} u and z = X h,
                // u' H^{-1} X' diag(w1 X b_k) X b_j = sum_i z_i w1_i (X b_k)_i (X b_j)_i.
                let h = &hinv * &u;
                let mut z = vec![0.0; n];
                d.linear_predictor(h.as_slice(), &mut z);
                z.iter_mut().zip(&w1).for_each(|(a, b)| *a *= b);
                let zee: Vec<f64> = pairs.iter().map(|&(j, k)| ws_dot3(&z, &ej[j], &ej[k])).collect();
                drop(z);
                let sh: Vec<DVector<f64>> = (0..m).map(|j| pens.apply(j, h.as_slice())).collect();
                let u_d2b: Vec<f64> = pairs
                    .iter()
                    .zip(&zee)
                    .map(|(&(j, k), &zjk)| {
                        let ab = zjk + lam[k] * sh[k].dot(&bj[j]);
                        let hs = lam[j] * sh[j].dot(&bj[k]);
                        let own = if j == k { u.dot(&bj[j]) } else { 0.0 };
                        own - ab - hs
                    })
                    .collect();
                let v = DMatrix::from_fn(n, m, |i, j| w1[i] * ej[j][i]);
                drop(ej);
                let (_, cross) = row_pair_traces(&x, &hinv, &v, &lev, pens, &lam);
                (cross, u_d2b)
            }
            _ => {
                for e in &mut ej {
                    e.iter_mut().zip(&w1).for_each(|(v, a)| *v *= a);
                }
                let vref: Vec<&[f64]> = ej.iter().map(|v| v.as_slice()).collect();
                let mj = d.weighted_crossprods(&vref);
                drop(ej);
                let hj: Vec<DMatrix<f64>> = mj
                    .into_iter()
                    .enumerate()
                    .map(|(j, mut mm)| {
                        pens.add_to(j, &mut mm, lam[j]);
                        mm
                    })
                    .collect();
                // A_j = H^{-1} dH_j, stored as the columns vec(A_j) of one p^2 x m matrix (each
                // product on its own thread), so that the pairs' traces below are one matrix product.
                let mut avec = DMatrix::<f64>::zeros(p * p, m);
                avec.as_mut_slice()
                    .par_chunks_mut(p * p)
                    .zip(hj.par_iter())
                    .for_each(|(col, h)| col.copy_from_slice((&hinv * h).as_slice()));
                drop(hj);
                let aj = |j: usize| DMatrixView::from_slice(&avec.as_slice()[j * p * p..(j + 1) * p * p], p, p);
                // The pairs' products go through blocked matrix products: A_k b_j for all j at
                // once, H^{-1} S_j b_k for all k at once, and tr(A_k A_j) = vec(A_k')' vec(A_j) as
                // one product (pair by pair, each would re-read p x p matrices from memory).
                let bmat = DMatrix::from_fn(p, m, |i, j| bj[j][i]);
                let ab: Vec<DMatrix<f64>> = (0..m).into_par_iter().map(|k| aj(k) * &bmat).collect();
                let hsb: Vec<DMatrix<f64>> = (0..m)
                    .into_par_iter()
                    .map(|j| {
                        let (start, c) = pens.right_mul(j, &hinv);
                        let kj = c.ncols();
                        c * bmat.rows(start, kj)
                    })
                    .collect();
                let avec_t = DMatrix::from_fn(p * p, m, |i, k| avec[(i / p + (i % p) * p, k)]);
                let cross = avec_t.tr_mul(&avec);
                drop(avec_t);
                let u_d2b: Vec<f64> = pairs
                    .par_iter()
                    .map(|&(j, k)| {
                        let mut bjk = -ab[k].column(j) - hsb[j].column(k) * lam[j];
                        if j == k {
                            bjk += &bj[j];
                        }
                        u.dot(&bjk)
                    })
                    .collect();
                (cross, u_d2b)
            }
        };
        drop(w1);
        let entries: Vec<f64> = pairs
            .par_iter()
            .zip(w2_pairs.par_iter())
            .zip(u_d2b.par_iter())
            .map(|((&(j, k), &w2_jk), &u_jk)| {
                let mut tr = if j == k {
                    lam[j] * pens.trace_with(j, &hinv)
                } else {
                    0.0
                };
                tr += u_jk;
                tr += w2_jk;
                let mut v = lam[j] * bj[k].dot(&sb[j]) + 0.5 * (tr - cross[(k, j)]) - 0.5 * ld.hess[(j, k)];
                if j == k {
                    v += 0.5 * lam[j] * beta.dot(&sb[j]);
                }
                v
            })
            .collect();
        let mut hess = DMatrix::zeros(m, m);
        for (&(j, k), &v) in pairs.iter().zip(&entries) {
            hess[(j, k)] = v;
            hess[(k, j)] = v;
        }
        Ok(Derivs {
            grad,
            hess: Some(hess),
            dbeta: bj,
        })
    }
}

/// sum_i a_i b_i c_i over fixed chunks added in order.
fn ws_dot3(a: &[f64], b: &[f64], c: &[f64]) -> f64 {
    let parts: Vec<f64> = a
        .par_chunks(CHUNK_ROWS)
        .zip(b.par_chunks(CHUNK_ROWS))
        .zip(c.par_chunks(CHUNK_ROWS))
        .map(|((x, y), z)| x.iter().zip(y).zip(z).map(|((p, q), r)| p * q * r).sum::<f64>())
        .collect();
    parts.iter().sum()
}

/// mgcv-like starting values: lambda_j S_j comparable with X'WX on S_j's block.
fn auto_rho<D: Design>(d: &D, prob: &Problem, pens: &PenaltySet) -> Vec<f64> {
    let w = start_weights(prob);
    let (xwx, _) = d.weighted_crossprod(&w, &vec![0.0; w.len()]);
    rho_from_diagonal(pens, |j| xwx[(j, j)])
}

/// The working weights at mgcv's starting linear predictor (from y alone), times the prior weights.
pub(crate) fn start_weights(prob: &Problem) -> Vec<f64> {
    (0..prob.y.len())
        .map(|r| {
            let eta0 = match prob.family {
                Family::Binomial => ((prob.y[r] + 0.5) / 2.0 / (1.0 - (prob.y[r] + 0.5) / 2.0)).ln(),
                Family::Poisson => (prob.y[r] + 0.1).ln(),
                Family::PoissonTransform => prob.offset[r],
            };
            prob.prior_weights[r] * prob.family.row(prob.y[r], eta0).weight
        })
        .collect()
}

/// log(tr X'WX / tr S_j) over the penalised diagonal of each penalty's block, given the diagonal
/// of X'WX by column; 0 where either trace vanishes.
pub(crate) fn rho_from_diagonal(pens: &PenaltySet, xwx_diag: impl Fn(usize) -> f64) -> Vec<f64> {
    pens.penalties()
        .iter()
        .map(|pen| {
            let thresh = pen.s.amax() * 1e-8;
            let (mut sx, mut ss) = (0.0, 0.0);
            for i in 0..pen.s.nrows() {
                if pen.s[(i, i)] > thresh {
                    sx += xwx_diag(pen.start + i);
                    ss += pen.s[(i, i)];
                }
            }
            if sx > 0.0 && ss > 0.0 {
                (sx / ss).ln()
            } else {
                0.0
            }
        })
        .collect()
}

pub(crate) fn check_sp(name: &str, sp: &[f64], m: usize) -> Result<Vec<f64>> {
    if sp.len() != m {
        return Err(NceError::invalid(
            name,
            format!("has length {}, expected {m} (one per penalty)", sp.len()),
        ));
    }
    if let Some(i) = sp.iter().position(|&s| !(s > 0.0 && s.is_finite())) {
        return Err(NceError::invalid(
            name,
            format!("must be positive and finite; position {} is {}", i + 1, sp[i]),
        ));
    }
    Ok(sp.iter().map(|s| s.ln()).collect())
}

/// Starting coefficients of the first inner fit when the design has an intercept column: the
/// intercept of the offset-only model (all other coefficients 0), by Newton's method in one
/// variable. From there the first penalised fit needs a few Newton steps fewer than from the
/// response-based start (whose eta ignores the offset, far off in NCE where the offset is a
/// log density ratio).
fn intercept_start<D: Design>(d: &D, prob: &Problem) -> Option<Vec<f64>> {
    let j = d.intercept_column()?;
    let c = offset_only_intercept(prob)?;
    let mut b = vec![0.0; d.ncol()];
    b[j] = c;
    Some(b)
}

/// The intercept of the offset-only model, by Newton steps on the one coefficient (capped at 10
/// a step); None when the weights vanish or it does not stay finite.
pub(crate) fn offset_only_intercept(prob: &Problem) -> Option<f64> {
    let mut c = 0.0;
    for _ in 0..50 {
        let (mut g, mut w) = (0.0, 0.0);
        for r in 0..prob.y.len() {
            let pw = prob.prior_weights[r];
            if pw > 0.0 {
                let (_, gr, wr, _) = pirls::row_terms(prob.family, prob.y[r], prob.offset[r] + c);
                g += pw * gr;
                w += pw * wr;
            }
        }
        if w.is_nan() || w <= 0.0 || !g.is_finite() {
            return None;
        }
        let dc = (g / w).clamp(-10.0, 10.0);
        c += dc;
        if dc.abs() < 1e-8 {
            break;
        }
    }
    c.is_finite().then_some(c)
}

/// Longer steps for smoothing parameters in the exponential tail of the score.
///
/// A term that is (nearly) in its penalty's null space has a score that flattens like
/// D = D_inf + a exp(-rho_j) as rho_j grows (a exp(rho_j) as it falls for a term that wants no
/// penalty): then dD/drho_j = -d2D/drho_j2 and Newton's step in rho_j is one unit whatever the
/// distance to convergence, so rho_j marches one unit per outer iteration while its gradient
/// shrinks by e each time. Where the gradient and curvature show that shape (within 10%), the
/// step in rho_j is lengthened to where the gradient would fall below `target`, at most
/// `max_step`. The outer loop still accepts the step only if the score does not increase.
fn tail_steps(step: &mut [f64], grad: &[f64], hess: &DMatrix<f64>, free: &[usize], max_step: f64, target: f64) {
    for &j in free {
        let (g, h) = (grad[j], hess[(j, j)]);
        if h.is_nan() || h <= 0.0 || g.abs() <= target || (g.abs() - h).abs() > 0.1 * g.abs() {
            continue;
        }
        let dir = -g.signum();
        if step[j] * dir <= 0.0 {
            continue;
        }
        let want = (g.abs() / target).ln().min(max_step);
        if want > step[j].abs() {
            step[j] = dir * want;
        }
    }
}

/// The smallest step in every log smoothing parameter worth an inner fit: step halving stops
/// below it (a change of 0.01% in each smoothing parameter moves the fit by rounding only).
const MIN_STEP: f64 = 1e-4;

/// Fit with smoothing parameters chosen by REML (or fixed by `ctrl.sp`).
///
/// `prob.penalty` must be `None`: the penalty is `penalties` weighted by the smoothing
/// parameters. `prob.start` is used as the first inner fit's start.
pub fn fit_reml<D: Design>(
    d: &D,
    prob: &Problem,
    penalties: &PenaltySet,
    ctrl: &RemlControl,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<RemlFit> {
    ctrl.check()?;
    if prob.penalty.is_some() {
        return Err(NceError::invalid(
            "penalty",
            "give penalties to fit_reml through the penalty set",
        ));
    }
    if penalties.ncoef() != d.ncol() {
        return Err(NceError::invalid(
            "penalties",
            format!(
                "are for {} coefficients but the design has {} columns",
                penalties.ncoef(),
                d.ncol()
            ),
        ));
    }
    if prob.y.len() != d.nrow() {
        return Err(NceError::invalid(
            "y",
            format!("has length {}, expected {}", prob.y.len(), d.nrow()),
        ));
    }
    pirls::validate(d.nrow(), d.ncol(), prob)?;
    let m = penalties.len();
    let sat = prob.saturated_loglik();
    let mut ctx = Ctx {
        d,
        prob,
        pens: penalties,
        ctrl,
        inner_iterations: 0,
        loose_epsilon: None,
        sat,
    };
    let centre = auto_rho(d, prob, penalties);
    let start0 = if prob.start.is_none() {
        intercept_start(d, prob)
    } else {
        None
    };
    let o = optimise(&mut ctx, m, &centre, ctrl, prob.start, start0, interrupted)?;
    finish(&ctx, o.pt, o.der, &o.lo, &o.hi, o.fixed, o.convergence)
}

impl<D: Design> pirls::NewtonModel for Ctx<'_, D> {
    type Hessian = DMatrix<f64>;
    fn prob(&self) -> &Problem<'_> {
        self.prob
    }
    fn ncoef(&self) -> usize {
        self.d.ncol()
    }
    fn deviance(&self, objective: f64) -> f64 {
        Ctx::deviance(self, objective)
    }
    /// eta = X beta + offset and the penalised log-likelihood (chunk sums in chunk order).
    fn evaluate(&self, s: &DMatrix<f64>, beta: Vec<f64>, eta: Vec<f64>) -> Cand {
        pirls::evaluate(self.d, self.prob, Some(s), beta, eta)
    }
    fn system(&self, s: &DMatrix<f64>, w: &[f64], v: &[f64]) -> Result<(DMatrix<f64>, DVector<f64>)> {
        let (mut h, b) = self.d.weighted_crossprod(w, v);
        h += s;
        Ok((h, b))
    }
    fn check_aliased(&self, h: &DMatrix<f64>) -> Result<()> {
        match aliased_columns(h, self.ctrl.inner.alias_tol).iter().position(|&a| a) {
            Some(j) => Err(NceError::Numerical(format!(
                "coefficient {} is not identifiable even with the penalty (aliased)",
                j + 1
            ))),
            None => Ok(()),
        }
    }
    fn solve(&self, h: &DMatrix<f64>, b: &DVector<f64>) -> Result<Vec<f64>> {
        let chol = h
            .clone()
            .cholesky()
            .ok_or_else(|| NceError::Numerical("the Hessian is not positive definite".into()))?;
        Ok(chol.solve(b).as_slice().to_vec())
    }
    fn quad(&self, h: &DMatrix<f64>, st: &DVector<f64>) -> f64 {
        (h.transpose() * st).dot(st)
    }
}

impl<D: Design> RemlModel for Ctx<'_, D> {
    type Point = Point;
    fn point(&mut self, rho: &[f64], start: Option<&[f64]>, interrupted: &mut dyn FnMut() -> bool) -> Result<Point> {
        Ctx::point(self, rho, start, interrupted)
    }
    fn derivs(&self, pt: &Point) -> Result<Derivs> {
        Ctx::derivs(self, pt)
    }
    fn derivs_unless(&self, pt: &Point, enough: &dyn Fn(&[f64]) -> bool) -> Result<Derivs> {
        self.derivs_by(pt, row_pairs_pay(self.d.nrow(), self.pens), enough)
    }
    fn score(pt: &Point) -> f64 {
        pt.score
    }
    fn rho(pt: &Point) -> &[f64] {
        &pt.rho
    }
    fn beta(pt: &Point) -> &[f64] {
        &pt.fit.beta
    }
    fn inner_status(pt: &Point) -> (bool, &str) {
        (pt.fit.convergence.converged, &pt.fit.convergence.message)
    }
    fn working_start(&self, pt: &Point, lo: &[f64], hi: &[f64]) -> Option<Vec<f64>> {
        super::freml::working_rho(
            &pt.fit.hessian,
            &pt.fit.beta,
            self.pens,
            &pt.rho,
            (lo, hi),
            self.ctrl.max_step,
            1e-7,
        )
    }
    fn set_loose_epsilon(&mut self, epsilon: Option<f64>) -> bool {
        self.loose_epsilon = epsilon;
        true
    }
    fn performance_fit(
        &mut self,
        st: &Start<'_>,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> Option<Result<(Vec<f64>, Vec<f64>)>> {
        Ctx::performance_fit(self, st, interrupted)
    }
}

/// Where the outer iteration starts: see `start_phase`.
pub(crate) struct Start<'a> {
    rho0: &'a [f64],
    /// The caller's start of the first inner fit.
    beta: Option<&'a [f64]>,
    /// The fallback start (e.g. the offset-only intercept).
    start0: Option<&'a [f64]>,
    lo: &'a [f64],
    hi: &'a [f64],
    /// Whether to run the performance rounds (smoothing parameters free, none given to start).
    performance: bool,
}

/// The first inner fit at `rho0`, then the performance iteration (a few rounds at most): each
/// round moves rho to the working model's REML minimiser at the current weights by p x p
/// algebra and costs one inner fit, while an exact Newton step also needs the derivative passes
/// over the rows. A round is kept only if the exact score falls, so the end point is the exact
/// optimum as before.
fn start_phase<M: RemlModel>(ctx: &mut M, st: &Start<'_>, interrupted: &mut dyn FnMut() -> bool) -> Result<M::Point> {
    // The offset-only start can leave rows with weights that vanish numerically (an
    // unpenalised free intercept per group whose rows all have mu near 0 or 1): then the
    // response-based start, whose weights are all positive.
    let mut cur = match ctx.point(st.rho0, st.beta.or(st.start0), interrupted) {
        Err(NceError::Numerical(_)) if st.start0.is_some() && st.beta.is_none() => {
            ctx.point(st.rho0, None, interrupted)?
        }
        r => r?,
    };
    if st.performance {
        for _ in 0..3 {
            let Some(next) = ctx.working_start(&cur, st.lo, st.hi) else {
                break;
            };
            let moved = next
                .iter()
                .zip(M::rho(&cur))
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            if moved < 1e-2 {
                break;
            }
            match ctx.point(&next, Some(M::beta(&cur)), interrupted) {
                Ok(pt) if M::score(&pt) < M::score(&cur) => cur = pt,
                Err(NceError::Interrupted) => return Err(NceError::Interrupted),
                _ => break,
            }
        }
    }
    Ok(cur)
}

/// Newton's method on rho for any `RemlModel` with `m` smoothing parameters, from `centre`
/// (the automatic scale; rho stays within `ctrl.rho_range` of it) or `ctrl`'s sp. `user_start`
/// is the caller's start of the first inner fit; otherwise `start0` (e.g. the offset-only
/// intercept), falling back to the model's own start when that fails numerically.
pub(crate) fn optimise<M: RemlModel>(
    ctx: &mut M,
    m: usize,
    centre: &[f64],
    ctrl: &RemlControl,
    user_start: Option<&[f64]>,
    start0: Option<Vec<f64>>,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<Outer<M::Point>> {
    let (lo, hi): (Vec<f64>, Vec<f64>) = centre.iter().map(|c| (c - ctrl.rho_range, c + ctrl.rho_range)).unzip();
    let clamp = |r: &[f64]| -> Vec<f64> { (0..m).map(|j| r[j].clamp(lo[j], hi[j])).collect() };

    let fixed = ctrl.sp.is_some() || m == 0;
    let rho0 = match (&ctrl.sp, &ctrl.initial_sp) {
        (Some(sp), _) => check_sp("sp", sp, m)?,
        (None, Some(sp)) => clamp(&check_sp("initial_sp", sp, m)?),
        (None, None) => centre.to_vec(),
    };
    let start = Start {
        rho0: &rho0,
        beta: user_start,
        start0: start0.as_deref(),
        lo: &lo,
        hi: &hi,
        performance: !fixed && ctrl.initial_sp.is_none(),
    };
    let loose = start.performance && ctrl.inner.epsilon < LOOSE_EPSILON && ctx.set_loose_epsilon(Some(LOOSE_EPSILON));
    let settled = if loose {
        ctx.performance_fit(&start, interrupted)
    } else {
        None
    };
    // The point performance iteration settles at is not the exact score's optimum, only near it;
    // the test below allows a gradient of tol (1 + |score|), which with millions of rows can
    // pass there by chance (the pooled 560-subject fit: REML score 0.15 above the optimum, edf
    // 41.3 against 40.8). So at least one Newton step is taken from it.
    let mut from_performance = false;
    let mut cur = if let Some(Ok((rho, beta))) = settled {
        ctx.set_loose_epsilon(None);
        match ctx.point(&rho, Some(&beta), interrupted) {
            Err(NceError::Interrupted) => return Err(NceError::Interrupted),
            Err(_) => start_phase(ctx, &start, interrupted)?,
            Ok(pt) => {
                from_performance = true;
                pt
            }
        }
    } else if let Some(Err(e)) = settled {
        return Err(e);
    } else if loose {
        // The loose phase ends with a full refit at its point; should any of it fail (a loose
        // fit can wander where the exact one would not), the phase is run again in full.
        let loose_pt = start_phase(ctx, &start, interrupted);
        ctx.set_loose_epsilon(None);
        let tried = loose_pt.and_then(|pt| {
            let (rho, beta) = (M::rho(&pt).to_vec(), M::beta(&pt).to_vec());
            ctx.point(&rho, Some(&beta), interrupted)
        });
        match tried {
            Err(NceError::Interrupted) => return Err(NceError::Interrupted),
            Err(_) => start_phase(ctx, &start, interrupted)?,
            Ok(pt) => pt,
        }
    } else {
        start_phase(ctx, &start, interrupted)?
    };
    // The free coordinates (those at a bound whose gradient pushes outward stay there) and the
    // largest free gradient.
    let free_gradient = |grad: &[f64], rho: &[f64]| -> (Vec<usize>, f64) {
        let free: Vec<usize> = (0..m)
            .filter(|&j| {
                let at_hi = rho[j] >= hi[j] - 1e-10 && grad[j] < 0.0;
                let at_lo = rho[j] <= lo[j] + 1e-10 && grad[j] > 0.0;
                !(at_hi || at_lo)
            })
            .collect();
        let gmax = free.iter().map(|&j| grad[j].abs()).fold(0.0, f64::max);
        (free, gmax)
    };
    let small = |gmax: f64, score: f64| gmax <= ctrl.tol * (1.0 + score.abs());
    // With fixed smoothing parameters no Newton step needs the Hessian, nor where the gradient
    // test passes at once (but the step always taken from performance iteration's point does).
    let (rho0_now, score0_now) = (M::rho(&cur).to_vec(), M::score(&cur));
    let mut der = ctx.derivs_unless(&cur, &|g| {
        !ctrl.hessian && (fixed || (!from_performance && small(free_gradient(g, &rho0_now).1, score0_now)))
    })?;
    let mut converged = fixed && M::inner_status(&cur).0;
    let mut message = String::new();
    let mut outer = 0;

    if !fixed {
        for it in 0..ctrl.max_outer {
            if interrupted() {
                return Err(NceError::Interrupted);
            }
            let (cur_rho, cur_score) = (M::rho(&cur).to_vec(), M::score(&cur));
            let (free, gmax) = free_gradient(&der.grad, &cur_rho);
            if small(gmax, cur_score) && !(it == 0 && from_performance) {
                converged = true;
                break;
            }
            outer = it + 1;
            // The Hessian is left out only where the gradient test above passes; should rounding
            // differ, it is computed here.
            if der.hess.is_none() {
                der = ctx.derivs(&cur)?;
            }
            let hess = der
                .hess
                .as_ref()
                .ok_or_else(|| NceError::Numerical("no REML Hessian".into()))?;
            let mut step = newton_step(hess, &der.grad, &free, ctrl.max_step);
            tail_steps(
                &mut step,
                &der.grad,
                hess,
                &free,
                ctrl.max_step,
                0.5 * ctrl.tol * (1.0 + cur_score.abs()),
            );
            let mut accepted = None;
            // A step that starts below MIN_STEP (near convergence) keeps all its halvings.
            let cut = step.iter().any(|s| s.abs() >= MIN_STEP);
            for _ in 0..=ctrl.max_halving {
                let trial: Vec<f64> = clamp(&cur_rho.iter().zip(&step).map(|(r, s)| r + s).collect::<Vec<_>>());
                // Warm start from the first-order prediction beta + sum_j (d beta / d rho_j) drho_j.
                let mut start = M::beta(&cur).to_vec();
                for (j, db) in der.dbeta.iter().enumerate() {
                    let dr = trial[j] - cur_rho[j];
                    for (b, v) in start.iter_mut().zip(db.iter()) {
                        *b += dr * v;
                    }
                }
                match ctx.point(&trial, Some(&start), interrupted) {
                    Ok(pt) if M::score(&pt) <= cur_score => {
                        accepted = Some(pt);
                        break;
                    }
                    Err(NceError::Interrupted) => return Err(NceError::Interrupted),
                    _ => step.iter_mut().for_each(|s| *s *= 0.5),
                }
                if cut && step.iter().all(|s| s.abs() < MIN_STEP) {
                    break;
                }
            }
            match accepted {
                Some(pt) => {
                    let change = cur_score - M::score(&pt);
                    let moved = M::rho(&pt)
                        .iter()
                        .zip(&cur_rho)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f64::max);
                    cur = pt;
                    // Score and rho both stalled at rounding level: as good as it gets.
                    let stalled = change <= 1e-13 * (1.0 + M::score(&cur).abs()) && moved < 1e-8;
                    // The Hessian is needed only for another step: not where the gradient
                    // test will pass (the last point of a fit).
                    let (rho_now, score_now) = (M::rho(&cur).to_vec(), M::score(&cur));
                    der = ctx.derivs_unless(&cur, &|g| {
                        !ctrl.hessian && (stalled || small(free_gradient(g, &rho_now).1, score_now))
                    })?;
                    if stalled {
                        converged = true;
                        message = "converged: the score stopped changing".into();
                        break;
                    }
                }
                None => {
                    converged = gmax <= 1e3 * ctrl.tol * (1.0 + cur_score.abs());
                    message = format!("step halving failed to reduce the REML score (largest gradient {gmax:.3e})");
                    break;
                }
            }
        }
        if !converged && message.is_empty() {
            message = format!("no convergence in {} outer iterations", ctrl.max_outer);
        }
    }
    let (inner_ok, inner_msg) = M::inner_status(&cur);
    if !inner_ok {
        converged = false;
        message = format!("inner fit: {inner_msg}");
    }
    Ok(Outer {
        pt: cur,
        der,
        lo,
        hi,
        fixed,
        convergence: Convergence {
            iterations: outer,
            converged,
            message,
        },
    })
}

fn finish<D: Design>(
    ctx: &Ctx<D>,
    pt: Point,
    der: Derivs,
    lo: &[f64],
    hi: &[f64],
    fixed: bool,
    convergence: Convergence,
) -> Result<RemlFit> {
    let lambda: Vec<f64> = pt.rho.iter().map(|r| r.exp()).collect();
    let vp = Ctx::<D>::h_inverse(&pt);
    let xwx = &pt.fit.hessian - ctx.pens.total(&lambda);
    let fit = glm_fit(ctx, &pt.fit, &vp);
    let f = &vp * &xwx;
    let ve = &f * &vp;
    let ve = (&ve + ve.transpose()) * 0.5;
    let edf = (0..f.nrows()).map(|i| f[(i, i)]).collect();
    let at_bound = (0..pt.rho.len())
        .map(|j| !fixed && (pt.rho[j] >= hi[j] - 1e-10 || pt.rho[j] <= lo[j] + 1e-10))
        .collect();
    Ok(RemlFit {
        coefficients: pt.fit.beta.clone(),
        sp: lambda,
        rho: pt.rho,
        vp,
        ve,
        edf,
        reml: pt.score,
        gradient: der.grad,
        hessian: der.hess,
        mp: ctx.pens.null_space_dim(),
        at_bound,
        fit,
        convergence,
        inner_iterations: ctx.inner_iterations,
    })
}

/// The inner fit in `irls::fit`'s form.
fn glm_fit<D: Design>(ctx: &Ctx<D>, f: &Inner, vp: &DMatrix<f64>) -> GlmFit {
    let prob = ctx.prob;
    let row_grad = pirls::row_gradients(prob, &f.eta);
    let n_certain = match prob.family {
        Family::Binomial => prob
            .y
            .iter()
            .zip(&f.mu)
            .filter(|(&y, &m)| y == 1.0 && m > 1.0 - 1e-10)
            .count(),
        _ => 0,
    };
    GlmFit {
        coefficients: f.beta.clone(),
        aliased: vec![false; f.beta.len()],
        cov: vp.clone(),
        hessian: f.hessian.clone(),
        eta: f.eta.clone(),
        fitted: f.mu.clone(),
        row_grad,
        loglik: f.loglik,
        penalised_loglik: f.objective,
        deviance: ctx.deviance(f.objective),
        n_certain,
        convergence: f.convergence.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::DenseDesign;
    use crate::engine::grouped::GroupedDesign;
    use crate::engine::penalty::Penalty;

    /// Columns 1, x, cos(k pi x) (k = 1..8) with penalty diag(k^4) on the cosine terms.
    fn basis(x: &[f64]) -> (Vec<f64>, usize, PenaltySet) {
        let (n, p) = (x.len(), 10);
        let mut xm = vec![0.0; n * p];
        for (i, &t) in x.iter().enumerate() {
            xm[i] = 1.0;
            xm[n + i] = t;
            for k in 1..=8 {
                xm[(k + 1) * n + i] = (k as f64 * std::f64::consts::PI * t).cos();
            }
        }
        let s = DMatrix::from_fn(8, 8, |i, j| if i == j { ((i + 1) as f64).powi(4) } else { 0.0 });
        (xm, p, PenaltySet::new(p, vec![Penalty { start: 2, s }]).unwrap())
    }

    /// Deterministic 0/1 responses with P(y = 1) = plogis(f(x)).
    fn labels(x: &[f64], f: impl Fn(f64) -> f64) -> Vec<f64> {
        x.iter()
            .enumerate()
            .map(|(i, &t)| {
                let u = ((i as f64 * 0.618_033_988_75) % 1.0 + 0.5 * (i as f64 * 0.414_213_562).sin().abs()) % 1.0;
                if u < 1.0 / (1.0 + (-f(t)).exp()) {
                    1.0
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The test set-up: x, binomial labels from f, the cosine basis with its penalties, unit
    /// weights and zero offsets.
    struct Setup {
        y: Vec<f64>,
        xm: Vec<f64>,
        p: usize,
        pens: PenaltySet,
        w: Vec<f64>,
        o: Vec<f64>,
    }

    impl Setup {
        fn new(x: &[f64], f: impl Fn(f64) -> f64) -> Self {
            let n = x.len();
            let (xm, p, pens) = basis(x);
            Setup {
                y: labels(x, f),
                xm,
                p,
                pens,
                w: vec![1.0; n],
                o: vec![0.0; n],
            }
        }

        fn prob(&self) -> Problem<'_> {
            Problem::new(&self.y, &self.w, &self.o, Family::Binomial)
        }

        fn dense(&self) -> DenseDesign<'_> {
            DenseDesign::new(&self.xm, self.y.len(), self.p).unwrap()
        }
    }

    /// No penalties: the fit is the unpenalised GLM, and the derivatives have no pairs.
    #[test]
    fn no_penalties_is_the_plain_glm() {
        let n = 300;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect();
        let st = Setup::new(&x, |t| 2.0 * t - 1.0);
        let d = DenseDesign::new(&st.xm[..2 * n], n, 2).unwrap();
        let pens = PenaltySet::new(2, vec![]).unwrap();
        let f = fit_reml(&d, &st.prob(), &pens, &RemlControl::default(), &mut || false).unwrap();
        assert!(f.convergence.converged, "{}", f.convergence.message);
        assert!(f.gradient.is_empty() && f.sp.is_empty());
        assert!((f.edf.iter().sum::<f64>() - 2.0).abs() < 1e-10, "edf {:?}", f.edf);
        // The score equations X'(y - mu) = 0 of the unpenalised fit.
        for j in 0..2 {
            let g: f64 = (0..n)
                .map(|i| st.xm[j * n + i] * (st.y[i] - 1.0 / (1.0 + (-f.fit.eta[i]).exp())))
                .sum();
            assert!(g.abs() < 1e-6, "score {j}: {g}");
        }
    }

    #[test]
    fn linear_truth_sends_the_smoothing_parameter_up() {
        let n = 400;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect();
        let st = Setup::new(&x, |t| 2.0 * t - 1.0);
        let ctrl = RemlControl {
            tol: 1e-10,
            ..Default::default()
        };
        let f = fit_reml(&st.dense(), &st.prob(), &st.pens, &ctrl, &mut || false).unwrap();
        assert!(f.convergence.converged, "{}", f.convergence.message);
        let edf: f64 = f.edf.iter().sum();
        assert!(edf < 2.1, "edf {edf}, sp {:?}", f.sp);
        assert!(
            f.at_bound[0] || f.gradient[0].abs() < 1e-7,
            "{:?} {:?}",
            f.at_bound,
            f.gradient
        );
    }

    #[test]
    fn grouped_design_gives_the_same_reml_fit_as_the_expanded_one() {
        // Rows in groups of 5 sharing the last two columns [1, z_t].
        let (n, ng) = (500, 100);
        let x: Vec<f64> = (0..n).map(|i| ((i * 37 % n) as f64 + 0.5) / n as f64).collect();
        let group: Vec<usize> = (0..n).map(|r| r / 5).collect();
        let z: Vec<f64> = (0..ng).map(|t| (t as f64 * 0.3).sin()).collect();
        let st = Setup::new(&x, |t| (6.0 * t).sin());
        let (xa, pa) = (&st.xm, st.p);
        let b: Vec<f64> = z.iter().map(|_| 1.0).chain(z.iter().copied()).collect();
        // The grouped intercept replaces column 0 of the basis.
        let a = &xa[n..];
        let gd = GroupedDesign::new(a, n, pa - 1, &b, ng, 2, &group).unwrap();
        let mut dense = a.to_vec();
        dense.extend(group.iter().map(|_| 1.0));
        dense.extend(group.iter().map(|&t| z[t]));
        let dd = DenseDesign::new(&dense, n, pa + 1).unwrap();
        let s = DMatrix::from_fn(8, 8, |i, j| if i == j { ((i + 1) as f64).powi(4) } else { 0.0 });
        let pens = PenaltySet::new(pa + 1, vec![Penalty { start: 1, s }]).unwrap();
        let prob = st.prob();
        let ctrl = RemlControl::default();
        let f1 = fit_reml(&gd, &prob, &pens, &ctrl, &mut || false).unwrap();
        let f2 = fit_reml(&dd, &prob, &pens, &ctrl, &mut || false).unwrap();
        assert!(f1.convergence.converged && f2.convergence.converged);
        assert!((f1.rho[0] - f2.rho[0]).abs() < 1e-8);
        for (a, b) in f1.coefficients.iter().zip(&f2.coefficients) {
            assert!((a - b).abs() < 1e-8);
        }
        assert!((f1.reml - f2.reml).abs() < 1e-9);
    }

    // The design of `DenseDesign` without its dense matrix: the derivatives by products.
    crate::engine::design::dense_without_matrix!(ByProducts, forwarded);

    /// Few rows, many coefficients and penalties: the derivatives by pairs of rows give the fit,
    /// gradient and Hessian of the derivatives by weighted cross-products.
    #[test]
    fn row_pairs_give_the_same_fit_and_hessian() {
        let (n, kc) = (80, 30);
        let p = kc + 2;
        let x: Vec<f64> = (0..n).map(|i| ((i * 29 % n) as f64 + 0.5) / n as f64).collect();
        let mut xm = vec![0.0; n * p];
        for (i, &t) in x.iter().enumerate() {
            xm[i] = 1.0;
            xm[n + i] = t;
            for k in 1..=kc {
                xm[(k + 1) * n + i] = (k as f64 * std::f64::consts::PI * t).cos();
            }
        }
        // One penalty per pair of cosine terms, diag(k^4).
        let pens: Vec<Penalty> = (0..kc / 2)
            .map(|b| Penalty {
                start: 2 + 2 * b,
                s: DMatrix::from_fn(2, 2, |i, j| if i == j { ((2 * b + i + 1) as f64).powi(4) } else { 0.0 }),
            })
            .collect();
        let pens = PenaltySet::new(p, pens).unwrap();
        assert!(row_pairs_pay(n, &pens));
        let y = labels(&x, |t| (5.0 * t).sin());
        let (w, o) = (vec![1.0; n], vec![0.0; n]);
        let prob = Problem::new(&y, &w, &o, Family::Binomial);
        let d = DenseDesign::new(&xm, n, p).unwrap();
        let ctrl = RemlControl {
            hessian: true,
            ..Default::default()
        };
        let f1 = fit_reml(&d, &prob, &pens, &ctrl, &mut || false).unwrap();
        let f2 = fit_reml(&ByProducts(d), &prob, &pens, &ctrl, &mut || false).unwrap();
        assert!(f1.convergence.converged && f2.convergence.converged);
        assert!((f1.reml - f2.reml).abs() < 1e-8, "{} {}", f1.reml, f2.reml);
        for (a, b) in f1.rho.iter().zip(&f2.rho) {
            assert!((a - b).abs() < 1e-4, "rho {a} {b}");
        }
        for (a, b) in f1.coefficients.iter().zip(&f2.coefficients) {
            assert!((a - b).abs() < 1e-5, "coefficient {a} {b}");
        }
        let (h1, h2) = (f1.hessian.unwrap(), f2.hessian.unwrap());
        let scale = h2.amax();
        assert!((&h1 - &h2).amax() < 1e-6 * scale, "{}", (&h1 - &h2).amax());
        for (a, b) in f1.gradient.iter().zip(&f2.gradient) {
            assert!((a - b).abs() < 1e-6, "gradient {a} {b}");
        }
        // At the same smoothing parameters, the same derivatives to rounding.
        let fixed = RemlControl {
            sp: Some(f2.sp.clone()),
            hessian: true,
            ..Default::default()
        };
        let g1 = fit_reml(&d, &prob, &pens, &fixed, &mut || false).unwrap();
        let g2 = fit_reml(&ByProducts(d), &prob, &pens, &fixed, &mut || false).unwrap();
        let (h1, h2) = (g1.hessian.unwrap(), g2.hessian.unwrap());
        let diff = (&h1 - &h2).amax();
        assert!(diff < 1e-10 * h2.amax(), "Hessian differs by {diff}");
        for (a, b) in g1.gradient.iter().zip(&g2.gradient) {
            assert!((a - b).abs() < 1e-10 * (1.0 + b.abs()), "gradient {a} {b}");
        }
    }

    /// Times of the derivatives by pairs of rows and by products, on random designs of the
    /// shapes of the package's classifiers, beside `row_pairs_pay`'s modelled costs:
    /// `cargo test --release -p nce-core --lib time_row_pairs -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn time_row_pairs() {
        use rand::{Rng, SeedableRng};
        let shapes = [
            (1000, 383, 87, 8),
            (2000, 383, 87, 8),
            (4000, 383, 87, 8),
            (8000, 383, 87, 8),
            (4000, 266, 60, 8),
            (10000, 266, 60, 8),
            (4000, 353, 32, 16),
            (2000, 100, 20, 8),
            (2000, 50, 4, 16),
            (20000, 60, 6, 10),
        ];
        for &(n, p, m, k) in &shapes {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
            let mut xm: Vec<f64> = (0..n * p).map(|_| rng.gen::<f64>() - 0.5).collect();
            xm[..n].iter_mut().for_each(|v| *v = 1.0);
            let y: Vec<f64> = (0..n).map(|i| ((i * 7 + 3) % 5 < 2) as u8 as f64).collect();
            // Pairs of penalties on disjoint blocks, as ti() terms have: the two margins' penalties.
            let k = k.min(2 * (p - 1) / m);
            let pens: Vec<Penalty> = (0..m)
                .map(|j| Penalty {
                    start: 1 + (j / 2) * k,
                    s: DMatrix::from_fn(k, k, |a, b| if a == b && (a + j) % 2 == 0 { 1.0 } else { 0.0 }),
                })
                .collect();
            let pens = PenaltySet::new(p, pens).unwrap();
            let (w, o) = (vec![1.0; n], vec![0.0; n]);
            let prob = Problem::new(&y, &w, &o, Family::Binomial);
            let d = DenseDesign::new(&xm, n, p).unwrap();
            let ctrl = RemlControl::default();
            let mut c1 = Ctx {
                d: &d,
                prob: &prob,
                pens: &pens,
                ctrl: &ctrl,
                inner_iterations: 0,
                loose_epsilon: None,
                sat: prob.saturated_loglik(),
            };
            let rho = vec![0.0; m];
            let pt = c1.point(&rho, None, &mut || false).unwrap();
            let time = |f: &dyn Fn()| {
                let mut best = f64::INFINITY;
                for _ in 0..3 {
                    let t0 = std::time::Instant::now();
                    f();
                    best = best.min(t0.elapsed().as_secs_f64());
                }
                best
            };
            let t1 = time(&|| {
                c1.derivs_by(&pt, true, &|_| false).unwrap();
            });
            let t2 = time(&|| {
                c1.derivs_by(&pt, false, &|_| false).unwrap();
            });
            println!(
                "n {n:6} p {p:4} m {m:3}: rows {t1:.3} s, products {t2:.3} s, ratio {:.2}; chosen {}",
                t2 / t1,
                if row_pairs_pay(n, &pens) { "rows" } else { "products" }
            );
        }
    }

    #[test]
    fn bad_input_and_interrupt() {
        let n = 50;
        let x: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
        let st = Setup::new(&x, |t| t);
        let (d, prob, pens) = (st.dense(), st.prob(), &st.pens);
        let ctrl = RemlControl {
            sp: Some(vec![1.0, 2.0]),
            ..Default::default()
        };
        let e = fit_reml(&d, &prob, pens, &ctrl, &mut || false).unwrap_err();
        assert!(e.to_string().starts_with("`sp`"), "{e}");
        let ctrl = RemlControl {
            sp: Some(vec![-1.0]),
            ..Default::default()
        };
        assert!(fit_reml(&d, &prob, pens, &ctrl, &mut || false).is_err());
        let e = fit_reml(&d, &prob, pens, &RemlControl::default(), &mut || true).unwrap_err();
        assert_eq!(e, NceError::Interrupted);
    }

    /// A one-parameter score D(rho) = rho^2 whose reported gradient has the wrong sign, so that
    /// no step along it lowers the score: a wall, as at the end of ARCH(1)'s classifier fits,
    /// where every step that would lower the score leaves a coefficient aliased.
    struct Wall {
        fits: usize,
    }

    struct WallPoint {
        rho: Vec<f64>,
        score: f64,
    }

    impl RemlModel for Wall {
        type Point = WallPoint;
        fn point(&mut self, rho: &[f64], _: Option<&[f64]>, _: &mut dyn FnMut() -> bool) -> Result<WallPoint> {
            self.fits += 1;
            Ok(WallPoint {
                rho: rho.to_vec(),
                score: rho[0] * rho[0],
            })
        }
        fn derivs(&self, pt: &WallPoint) -> Result<Derivs> {
            Ok(Derivs {
                grad: vec![-2.0 * pt.rho[0]],
                hess: Some(DMatrix::from_element(1, 1, 2.0)),
                dbeta: vec![DVector::zeros(0)],
            })
        }
        fn score(pt: &WallPoint) -> f64 {
            pt.score
        }
        fn rho(pt: &WallPoint) -> &[f64] {
            &pt.rho
        }
        fn beta(_: &WallPoint) -> &[f64] {
            &[]
        }
        fn inner_status(_: &WallPoint) -> (bool, &str) {
            (true, "")
        }
    }

    #[test]
    fn step_halving_stops_at_the_smallest_useful_step() {
        // Newton's step is 3 (gradient -6, curvature 2); halving reaches MIN_STEP = 1e-4 after
        // 15 halvings: 15 trial fits and the first, where max_halving would allow 31 trials.
        let mut wall = Wall { fits: 0 };
        let o = optimise(&mut wall, 1, &[3.0], &RemlControl::default(), None, None, &mut || false).unwrap();
        assert_eq!(o.pt.rho, vec![3.0]);
        assert!(!o.convergence.converged);
        assert!(
            o.convergence.message.starts_with("step halving failed"),
            "{}",
            o.convergence.message
        );
        assert_eq!(wall.fits, 16);
    }
}
