//! Pieces of the penalised Newton/IRLS iteration shared by `irls::fit` and the inner fits of
//! `reml::fit_reml`: input checks, starting values, the (penalised) log-likelihood and the
//! working weights, evaluated over fixed row chunks summed in chunk order (thread-invariant),
//! and the inner Newton loop itself (`newton`), generic over how a model holds its Hessian.

use crate::convergence::Convergence;
use crate::engine::design::{Design, CHUNK_ROWS};
use crate::engine::family::Family;
use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

#[derive(Debug, Clone)]
pub struct Control {
    /// Relative change in deviance at which the fit has converged.
    pub epsilon: f64,
    pub maxit: usize,
    /// Tolerance of the rank test on the scaled cross-product (see `linalg::aliased_columns`).
    pub alias_tol: f64,
    /// Most step halvings per iteration.
    pub max_halving: usize,
}

impl<'a> Problem<'a> {
    /// A problem without penalty matrix or start (the usual case: the penalty comes as a
    /// `PenaltySet` to `fit_reml`, the start from the response).
    pub fn new(y: &'a [f64], prior_weights: &'a [f64], offset: &'a [f64], family: Family) -> Self {
        Problem {
            y,
            prior_weights,
            offset,
            family,
            penalty: None,
            start: None,
        }
    }

    /// The saturated model's weighted log-likelihood (the deviance's reference point).
    pub fn saturated_loglik(&self) -> f64 {
        self.y
            .iter()
            .zip(self.prior_weights)
            .map(|(&y, &w)| w * self.family.saturated_loglik(y))
            .sum()
    }
}

impl Control {
    /// The one set of rules for these settings.
    pub fn check(&self) -> Result<()> {
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(NceError::invalid(
                "epsilon",
                format!("must be a positive number, got {}", self.epsilon),
            ));
        }
        if self.maxit < 1 {
            return Err(NceError::invalid("maxit", "must be at least 1"));
        }
        if !(self.alias_tol >= 0.0) {
            return Err(NceError::invalid("alias_tol", "must be non-negative"));
        }
        Ok(())
    }
}

impl Default for Control {
    fn default() -> Self {
        Control {
            epsilon: 1e-10,
            maxit: 100,
            alias_tol: 1e-9,
            max_halving: 40,
        }
    }
}

/// Everything a fit needs besides the design.
pub struct Problem<'a> {
    pub y: &'a [f64],
    pub prior_weights: &'a [f64],
    pub offset: &'a [f64],
    pub family: Family,
    /// Total penalty matrix S (p x p), if any.
    pub penalty: Option<&'a DMatrix<f64>>,
    /// Starting coefficients; otherwise the family's usual start from the response.
    pub start: Option<&'a [f64]>,
}

/// Checks of a problem's inputs against an n x p design (messages name the argument).
pub(crate) fn validate(n: usize, p: usize, prob: &Problem) -> Result<()> {
    let check = |name: &str, v: &[f64]| -> Result<()> {
        if v.len() != n {
            return Err(NceError::invalid(
                name,
                format!("has length {}, expected {} (rows of the design)", v.len(), n),
            ));
        }
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(NceError::invalid(
                name,
                format!("has a non-finite value at position {}", i + 1),
            ));
        }
        Ok(())
    };
    check("y", prob.y)?;
    check("weights", prob.prior_weights)?;
    check("offset", prob.offset)?;
    if let Some(i) = prob.prior_weights.iter().position(|&w| w < 0.0) {
        return Err(NceError::invalid(
            "weights",
            format!("must be non-negative; position {} is negative", i + 1),
        ));
    }
    if let Some(i) = prob.y.iter().position(|&y| !prob.family.valid_response(y)) {
        return Err(NceError::invalid(
            "y",
            format!(
                "value {} at position {} is not a valid response for this family",
                prob.y[i],
                i + 1
            ),
        ));
    }
    if let Some(s) = prob.penalty {
        if s.nrows() != p || s.ncols() != p {
            return Err(NceError::invalid("penalty", format!("must be {p} x {p}")));
        }
    }
    if let Some(b) = prob.start {
        if b.len() != p || b.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid("start", format!("must be {p} finite values")));
        }
    }
    if n == 0 || p == 0 {
        return Err(NceError::invalid("x", "the design has no rows or no columns"));
    }
    Ok(())
}

/// Row terms (log-likelihood, gradient, weight) and mean; one exp for the binomial.
#[inline]
pub(crate) fn row_terms(family: Family, y: f64, eta: f64) -> (f64, f64, f64, f64) {
    match family {
        Family::Binomial => {
            let e = (-eta.abs()).exp();
            let mu = if eta >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) };
            let ll = y * eta - (eta.max(0.0) + e.ln_1p());
            (ll, y - mu, mu * (1.0 - mu), mu)
        }
        _ => {
            let t = family.row(y, eta);
            (t.loglik, t.grad, t.weight, family.mean(eta))
        }
    }
}

/// Each row's score d loglik / d eta times its prior weight (0 for rows of weight 0): the
/// per-row scores the sandwich's meat is built from.
pub(crate) fn row_gradients(prob: &Problem, eta: &[f64]) -> Vec<f64> {
    eta.iter()
        .enumerate()
        .map(|(r, &e)| {
            let pw = prob.prior_weights[r];
            if pw == 0.0 {
                0.0
            } else {
                pw * row_terms(prob.family, prob.y[r], e).1
            }
        })
        .collect()
}

/// The family's usual start from the response (as glm's mustart), as a linear predictor.
pub(crate) fn initial_eta(prob: &Problem) -> Vec<f64> {
    prob.y
        .iter()
        .zip(prob.prior_weights)
        .zip(prob.offset)
        .map(|((&y, &w), &o)| match prob.family {
            Family::Binomial => {
                let m = (w * y + 0.5) / (w + 1.0);
                (m / (1.0 - m)).ln()
            }
            Family::Poisson => (y + 0.1).ln(),
            Family::PoissonTransform => o,
        })
        .collect()
}

/// A point of the iteration: coefficients, eta = X beta + offset, log-likelihood and the
/// penalised log-likelihood (the objective).
pub(crate) struct Cand {
    pub beta: Vec<f64>,
    pub eta: Vec<f64>,
    pub loglik: f64,
    pub objective: f64,
}

/// The point at `beta`, its linear predictor written into `eta` (a spare n-vector of any
/// content, or empty: reusing a rejected point's vector spares a page-faulted allocation of n
/// rows per step).
pub(crate) fn evaluate<D: Design>(
    d: &D,
    prob: &Problem,
    s: Option<&DMatrix<f64>>,
    beta: Vec<f64>,
    mut eta: Vec<f64>,
) -> Cand {
    eta.resize(d.nrow(), 0.0);
    d.linear_predictor(&beta, &mut eta);
    point(prob, s, beta, eta)
}

/// The point at `theta` given its X theta (no offset) in `eta`; the penalty S applies to the
/// first S.nrows() coefficients.
pub(crate) fn point(prob: &Problem, s: Option<&DMatrix<f64>>, theta: Vec<f64>, mut eta: Vec<f64>) -> Cand {
    let parts: Vec<f64> = eta
        .par_chunks_mut(CHUNK_ROWS)
        .enumerate()
        .map(|(k, e)| {
            let r0 = k * CHUNK_ROWS;
            let mut ll = 0.0;
            for (i, v) in e.iter_mut().enumerate() {
                let r = r0 + i;
                *v += prob.offset[r];
                let w = prob.prior_weights[r];
                if w > 0.0 {
                    ll += w * row_terms(prob.family, prob.y[r], *v).0;
                }
            }
            ll
        })
        .collect();
    let loglik: f64 = parts.iter().sum();
    let pen = match s {
        Some(s) => {
            let b = DVector::from_column_slice(&theta[..s.nrows()]);
            (b.transpose() * s * &b)[(0, 0)]
        }
        None => 0.0,
    };
    Cand {
        beta: theta,
        eta,
        loglik,
        objective: loglik - 0.5 * pen,
    }
}

/// Step halving: move `cand` half-way back to `cur` until its objective is finite and not
/// worse. None when `max_halving` halvings did not get there. `evaluate` takes the
/// coefficients and a spare linear-predictor vector (the rejected point's).
pub(crate) fn halve(
    cur: &Cand,
    mut cand: Cand,
    max_halving: usize,
    evaluate: impl Fn(Vec<f64>, Vec<f64>) -> Cand,
) -> Option<Cand> {
    let acceptable = |c: &Cand| c.objective.is_finite() && c.objective >= cur.objective - 1e-12 * cur.objective.abs();
    for _ in 0..max_halving {
        if acceptable(&cand) {
            return Some(cand);
        }
        let half: Vec<f64> = cur.beta.iter().zip(&cand.beta).map(|(a, b)| 0.5 * (a + b)).collect();
        cand = evaluate(half, cand.eta);
    }
    acceptable(&cand).then_some(cand)
}

/// The first iterate: `cand`, or where its objective is not finite (a bad first step from the
/// response-based start) the point at zero coefficients, which must be finite.
pub(crate) fn finite_start(cand: Cand, evaluate: impl FnOnce(Vec<f64>, Vec<f64>) -> Cand) -> Result<Cand> {
    if cand.objective.is_finite() {
        return Ok(cand);
    }
    let zero = evaluate(vec![0.0; cand.beta.len()], cand.eta);
    if !zero.objective.is_finite() {
        return Err(NceError::Numerical(
            "the objective is not finite at the starting values".into(),
        ));
    }
    Ok(zero)
}

/// A model for `newton`: its points, and its penalised Newton system with the Hessian in the
/// model's own form (dense for any `Design`, per-group intercepts eliminated in `grouped`).
pub(crate) trait NewtonModel {
    type Hessian;
    fn prob(&self) -> &Problem<'_>;
    fn ncoef(&self) -> usize;
    fn deviance(&self, objective: f64) -> f64;
    /// The point at `theta`, its linear predictor written into the spare vector `eta`.
    fn evaluate(&self, s: &DMatrix<f64>, theta: Vec<f64>, eta: Vec<f64>) -> Cand;
    /// H = X'WX + S and X'v for the working weights w and working vector v.
    fn system(&self, s: &DMatrix<f64>, w: &[f64], v: &[f64]) -> Result<(Self::Hessian, DVector<f64>)>;
    /// An error naming the first aliased coefficient (checked on the first Hessian).
    fn check_aliased(&self, h: &Self::Hessian) -> Result<()>;
    fn solve(&self, h: &Self::Hessian, b: &DVector<f64>) -> Result<Vec<f64>>;
    /// st' H st.
    fn quad(&self, h: &Self::Hessian, st: &DVector<f64>) -> f64;
}

/// Penalised Newton (IRLS) with step halving, warm-started from `start`, for the inner fits of
/// `reml::fit_reml` and `grouped::fit_reml_free_intercepts`. The Hessian computed at the
/// accepted iterate doubles as the next step's and, once the deviance has converged, as the
/// final one (returned), so a fit costs one cross-product per step.
pub(crate) fn newton<M: NewtonModel>(
    m: &M,
    s: &DMatrix<f64>,
    ctrl: &Control,
    start: Option<&[f64]>,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<(Cand, M::Hessian, Convergence)> {
    let p = m.ncoef();
    let mut current: Option<Cand> = start.and_then(|b| {
        let c = m.evaluate(s, b.to_vec(), Vec::new());
        c.objective.is_finite().then_some(c)
    });
    // The first working weights come from the response when there is no start; after that
    // from the current iterate's eta. The n-vectors (weights, working vector, a spare linear
    // predictor) are allocated once per fit and reused by every step.
    let mut start_eta = current.is_none().then(|| initial_eta(m.prob()));
    let n = m.prob().y.len();
    let (mut w, mut v) = (vec![0.0; n], vec![0.0; n]);
    let mut spare: Vec<f64> = Vec::new();
    let mut conv = Convergence::default();
    let mut final_h = None;
    for it in 0..=ctrl.maxit {
        if interrupted() {
            return Err(NceError::Interrupted);
        }
        let eta = match (&current, &start_eta) {
            (Some(c), _) => &c.eta,
            (None, Some(e)) => e,
            (None, None) => unreachable!("a start or a current iterate"),
        };
        working_into(m.prob(), eta, &mut w, &mut v, None);
        let (h, b) = m.system(s, &w, &v)?;
        if it == 0 {
            m.check_aliased(&h)?;
        }
        if conv.converged || it == ctrl.maxit || !conv.message.is_empty() {
            final_h = Some(h);
            break;
        }
        conv.iterations = it + 1;
        let beta = m.solve(&h, &b)?;
        // Newton decrement: the step's predicted deviance decrease, (b1 - b0)' H (b1 - b0).
        let predicted = current.as_ref().map(|cur| {
            let st = DVector::from_iterator(p, beta.iter().zip(&cur.beta).map(|(a, b)| a - b));
            (m.quad(&h, &st), m.deviance(cur.objective))
        });
        let mut cand = m.evaluate(s, beta, std::mem::take(&mut spare));
        if let Some(cur) = &current {
            cand = match halve(cur, cand, ctrl.max_halving, |t, e| m.evaluate(s, t, e)) {
                Some(c) => c,
                None => {
                    // With a very ill-conditioned H (smoothing parameters near their upper
                    // bound) rounding in the Newton direction can outweigh a predicted gain
                    // that is already tiny: then the current iterate is the fit.
                    if let Some((dec, d_old)) = predicted {
                        if dec.abs() <= 1e3 * ctrl.epsilon * (d_old.abs() + 0.1) {
                            conv.converged = true;
                            final_h = Some(h);
                            break;
                        }
                    }
                    conv.message = format!("step halving failed to improve the objective at iteration {}", it + 1);
                    // Keep the current iterate (its Hessian is recomputed above).
                    continue;
                }
            };
            let (d_new, d_old) = (m.deviance(cand.objective), m.deviance(cur.objective));
            if (d_new - d_old).abs() <= ctrl.epsilon * (d_new.abs() + 0.1) {
                conv.converged = true;
            }
        } else {
            cand = finite_start(cand, |t, e| m.evaluate(s, t, e))?;
        }
        start_eta = None;
        if let Some(old) = current.replace(cand) {
            spare = old.eta;
        }
    }
    let cur = current.expect("at least one iteration ran");
    if !conv.converged && conv.message.is_empty() {
        conv.message = format!("no convergence in {} iterations", ctrl.maxit);
    }
    Ok((cur, final_h.expect("the loop ends with a Hessian"), conv))
}

/// Hessian weights w, working vector W (eta - offset) + g and gradients g at eta, prior
/// weights applied.
pub(crate) fn working(prob: &Problem, eta: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = eta.len();
    let (mut w, mut v, mut g) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    working_into(prob, eta, &mut w, &mut v, Some(&mut g));
    (w, v, g)
}

/// `working` into given n-vectors (every row written; the gradients only when asked for).
pub(crate) fn working_into(prob: &Problem, eta: &[f64], w: &mut [f64], v: &mut [f64], g: Option<&mut [f64]>) {
    let row = |r: usize| -> (f64, f64, f64) {
        let pw = prob.prior_weights[r];
        if pw == 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let (_, gt, wt, _) = row_terms(prob.family, prob.y[r], eta[r]);
        let (wr, gr) = (pw * wt, pw * gt);
        (wr, wr * (eta[r] - prob.offset[r]) + gr, gr)
    };
    let wv = w
        .par_chunks_mut(CHUNK_ROWS)
        .zip(v.par_chunks_mut(CHUNK_ROWS))
        .enumerate();
    match g {
        Some(g) => wv.zip(g.par_chunks_mut(CHUNK_ROWS)).for_each(|((k, (wc, vc)), gc)| {
            for (i, ((wr, vr), gr)) in wc.iter_mut().zip(vc.iter_mut()).zip(gc.iter_mut()).enumerate() {
                (*wr, *vr, *gr) = row(k * CHUNK_ROWS + i);
            }
        }),
        None => wv.for_each(|(k, (wc, vc))| {
            for (i, (wr, vr)) in wc.iter_mut().zip(vc.iter_mut()).enumerate() {
                let (a, b, _) = row(k * CHUNK_ROWS + i);
                (*wr, *vr) = (a, b);
            }
        }),
    }
}
