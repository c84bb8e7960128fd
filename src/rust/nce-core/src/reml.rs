//! Smoothing-parameter selection by Laplace-approximate REML for known-scale families.
//!
//! Minimises mgcv's REML score (what `gam(method = "REML")` reports as `gcv.ubre`)
//!     D(rho) = -l(b) + b' S b / 2 + log|H| / 2 - log|S|_+ / 2 - Mp / 2 log(2 pi),
//! H = X'WX + S_lambda, b = b(rho) the penalised fit, by Newton's method on rho = log lambda with
//! the exact gradient and Hessian (including the derivatives of W through b), each inner fit
//! being `irls::fit` warm-started from the previous coefficients.

use crate::design::Design;
use crate::error::{NceError, Result};
use crate::family::Family;
use crate::irls::{self, Control, GlmFit, Problem};
use crate::penalty::PenaltySet;
use nalgebra::{Cholesky, DMatrix, DVector, Dyn, SymmetricEigen};

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
            inner: Control { epsilon: 1e-11, ..Control::default() },
        }
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
    /// REML score D (mgcv's `gcv.ubre`), and its gradient and Hessian in rho.
    pub reml: f64,
    pub gradient: Vec<f64>,
    pub hessian: DMatrix<f64>,
    /// Penalty null-space dimension used in the constant of the score.
    pub mp: usize,
    /// rho_j held at a bound of the allowed range.
    pub at_bound: Vec<bool>,
    /// The inner fit at the final smoothing parameters.
    pub fit: GlmFit,
    pub outer_iterations: usize,
    pub inner_iterations: usize,
    pub converged: bool,
    pub message: String,
}

/// One inner fit with its score; derivatives are filled in on demand.
struct Point {
    rho: Vec<f64>,
    fit: GlmFit,
    score: f64,
    chol: Cholesky<f64, Dyn>,
    /// H = D C D with C = chol's matrix: the diagonal scaling of H.
    dscale: Vec<f64>,
}

struct Derivs {
    grad: Vec<f64>,
    hess: DMatrix<f64>,
}

struct Ctx<'a, D: Design> {
    d: &'a D,
    prob: &'a Problem<'a>,
    pens: &'a PenaltySet,
    ctrl: &'a RemlControl,
    inner_iterations: usize,
}

/// Per-row dW/deta and d2W/deta2 (prior weights applied), W the IRLS weight.
fn weight_derivs(family: Family, y: f64, eta: f64, pw: f64) -> (f64, f64) {
    if pw == 0.0 {
        return (0.0, 0.0);
    }
    match family {
        Family::Binomial => {
            let mu = family.mean(eta);
            let w = mu * (1.0 - mu);
            (pw * w * (1.0 - 2.0 * mu), pw * w * (1.0 - 6.0 * mu + 6.0 * mu * mu))
        }
        Family::Poisson => {
            let mu = family.mean(eta);
            (pw * mu, pw * mu)
        }
        Family::PoissonTransform => {
            if y > 0.5 {
                (0.0, 0.0)
            } else {
                let mu = family.mean(eta);
                (pw * mu, pw * mu)
            }
        }
    }
}

/// Cholesky of D^{-1} H D^{-1}, D = sqrt(diag H): scale-free, so log|H| stays accurate.
fn scaled_cholesky(h: &DMatrix<f64>) -> Result<(Cholesky<f64, Dyn>, Vec<f64>)> {
    let p = h.nrows();
    let d: Vec<f64> = (0..p).map(|i| h[(i, i)].max(f64::MIN_POSITIVE).sqrt()).collect();
    let c = DMatrix::from_fn(p, p, |i, j| h[(i, j)] / (d[i] * d[j]));
    let ch = c
        .cholesky()
        .ok_or_else(|| NceError::Numerical("the penalised Hessian X'WX + S is not positive definite".into()))?;
    Ok((ch, d))
}

impl<D: Design> Ctx<'_, D> {
    /// Fit at rho (warm-started) and compute the REML score.
    fn point(&mut self, rho: &[f64], start: Option<&[f64]>, interrupted: &mut dyn FnMut() -> bool) -> Result<Point> {
        let lambda: Vec<f64> = rho.iter().map(|r| r.exp()).collect();
        let s = self.pens.total(&lambda);
        let prob = Problem { penalty: Some(&s), start, ..*self.prob };
        let fit = irls::fit(self.d, &prob, &self.ctrl.inner, interrupted)?;
        self.inner_iterations += fit.iterations;
        if let Some(j) = fit.aliased.iter().position(|&a| a) {
            return Err(NceError::Numerical(format!(
                "coefficient {} is not identifiable even with the penalty (aliased)",
                j + 1
            )));
        }
        let (chol, dscale) = scaled_cholesky(&fit.hessian)?;
        let l = chol.l();
        let log_det_h: f64 = (0..l.nrows()).map(|i| 2.0 * (l[(i, i)].ln() + dscale[i].ln())).sum();
        let beta = DVector::from_column_slice(&fit.coefficients);
        let pen = (beta.transpose() * &s * &beta)[(0, 0)];
        let log_det_s = self.pens.log_det(rho)?.value;
        let mp = self.pens.null_space_dim() as f64;
        let score = -fit.loglik + 0.5 * pen + 0.5 * log_det_h - 0.5 * log_det_s
            - 0.5 * mp * (2.0 * std::f64::consts::PI).ln();
        if !score.is_finite() {
            return Err(NceError::Numerical("the REML score is not finite".into()));
        }
        Ok(Point { rho: rho.to_vec(), fit, score, chol, dscale })
    }

    /// H^{-1} from the scaled factor.
    fn h_inverse(pt: &Point) -> DMatrix<f64> {
        let ci = pt.chol.inverse();
        let d = &pt.dscale;
        let m = DMatrix::from_fn(ci.nrows(), ci.ncols(), |i, j| ci[(i, j)] / (d[i] * d[j]));
        (&m + m.transpose()) * 0.5
    }

    /// Exact gradient and Hessian of the score in rho.
    fn derivs(&self, pt: &Point) -> Result<Derivs> {
        let (d, pens, prob) = (self.d, self.pens, self.prob);
        let (n, p, m) = (d.nrow(), d.ncol(), pens.len());
        let beta = DVector::from_column_slice(&pt.fit.coefficients);
        let lam: Vec<f64> = pt.rho.iter().map(|r| r.exp()).collect();
        let hinv = Self::h_inverse(pt);
        let (w1, w2): (Vec<f64>, Vec<f64>) = (0..n)
            .map(|r| weight_derivs(prob.family, prob.y[r], pt.fit.eta[r], prob.prior_weights[r]))
            .unzip();
        let ld = pens.log_det(&pt.rho)?;
        let zeros = vec![0.0; n];
        let eta_of = |b: &DVector<f64>| {
            let mut e = vec![0.0; n];
            d.linear_predictor(b.as_slice(), &mut e);
            e
        };

        // First order: S_j b, db/drho_j, X db/drho_j, dH/drho_j.
        let sb: Vec<DVector<f64>> = (0..m).map(|j| pens.apply(j, beta.as_slice())).collect();
        let bj: Vec<DVector<f64>> = (0..m).map(|j| &hinv * &sb[j] * (-lam[j])).collect();
        let ej: Vec<Vec<f64>> = bj.iter().map(eta_of).collect();
        let hj: Vec<DMatrix<f64>> = (0..m)
            .map(|j| {
                let v: Vec<f64> = w1.iter().zip(&ej[j]).map(|(a, b)| a * b).collect();
                d.weighted_crossprod(&v, &zeros).0 + pens.full(j) * lam[j]
            })
            .collect();
        let aj: Vec<DMatrix<f64>> = hj.iter().map(|h| &hinv * h).collect();
        let grad: Vec<f64> = (0..m)
            .map(|j| 0.5 * lam[j] * beta.dot(&sb[j]) + 0.5 * aj[j].trace() - 0.5 * ld.grad[j])
            .collect();

        // Leverages x_i' H^{-1} x_i from X D^{-1} L^{-T}, one column at a time.
        let linv = pt.chol.l().solve_lower_triangular(&DMatrix::identity(p, p)).ok_or_else(|| {
            NceError::Numerical("singular Cholesky factor".into())
        })?;
        let mut lev = vec![0.0; n];
        for c in 0..p {
            let col = DVector::from_fn(p, |i, _| linv[(c, i)] / pt.dscale[i]);
            for (l, z) in lev.iter_mut().zip(eta_of(&col)) {
                *l += z * z;
            }
        }

        // Second order.
        let mut hess = DMatrix::zeros(m, m);
        for j in 0..m {
            for k in j..m {
                // d2b/drho_j drho_k = [j == k] b_j - H^{-1} (dH_k b_j + lambda_j S_j b_k).
                let mut bjk = -(&aj[k] * &bj[j]);
                let sj_bk = pens.apply(j, bj[k].as_slice());
                bjk -= &hinv * sj_bk * lam[j];
                if j == k {
                    bjk += &bj[j];
                }
                let ejk = eta_of(&bjk);
                let mut tr = if j == k { lam[j] * hinv.component_mul(&pens.full(j)).sum() } else { 0.0 };
                for i in 0..n {
                    tr += (w2[i] * ej[j][i] * ej[k][i] + w1[i] * ejk[i]) * lev[i];
                }
                let cross = aj[k].component_mul(&aj[j].transpose()).sum();
                let mut v = lam[j] * bj[k].dot(&sb[j]) + 0.5 * (tr - cross) - 0.5 * ld.hess[(j, k)];
                if j == k {
                    v += 0.5 * lam[j] * beta.dot(&sb[j]);
                }
                hess[(j, k)] = v;
                hess[(k, j)] = v;
            }
        }
        Ok(Derivs { grad, hess })
    }
}

/// mgcv-like starting values: lambda_j S_j comparable with X'WX on S_j's block.
fn auto_rho<D: Design>(d: &D, prob: &Problem, pens: &PenaltySet) -> Vec<f64> {
    let n = d.nrow();
    let w: Vec<f64> = (0..n)
        .map(|r| {
            let eta0 = match prob.family {
                Family::Binomial => ((prob.y[r] + 0.5) / 2.0 / (1.0 - (prob.y[r] + 0.5) / 2.0)).ln(),
                Family::Poisson => (prob.y[r] + 0.1).ln(),
                Family::PoissonTransform => prob.offset[r],
            };
            prob.prior_weights[r] * prob.family.row(prob.y[r], eta0).weight
        })
        .collect();
    let (xwx, _) = d.weighted_crossprod(&w, &vec![0.0; n]);
    pens.penalties()
        .iter()
        .map(|pen| {
            let k = pen.s.nrows();
            let thresh = pen.s.amax() * 1e-8;
            let (mut sx, mut ss) = (0.0, 0.0);
            for i in 0..k {
                if pen.s[(i, i)] > thresh {
                    sx += xwx[(pen.start + i, pen.start + i)];
                    ss += pen.s[(i, i)];
                }
            }
            if sx > 0.0 && ss > 0.0 { (sx / ss).ln() } else { 0.0 }
        })
        .collect()
}

fn check_sp(name: &str, sp: &[f64], m: usize) -> Result<Vec<f64>> {
    if sp.len() != m {
        return Err(NceError::invalid(name, format!("has length {}, expected {m} (one per penalty)", sp.len())));
    }
    if let Some(i) = sp.iter().position(|&s| !(s > 0.0 && s.is_finite())) {
        return Err(NceError::invalid(name, format!("must be positive and finite; position {} is {}", i + 1, sp[i])));
    }
    Ok(sp.iter().map(|s| s.ln()).collect())
}

/// Modified Newton direction on the free coordinates: eigenvalues made positive (mgcv-style).
fn newton_step(hess: &DMatrix<f64>, grad: &[f64], free: &[usize], max_step: f64) -> Vec<f64> {
    let k = free.len();
    let h = DMatrix::from_fn(k, k, |a, b| hess[(free[a], free[b])]);
    let g = DVector::from_fn(k, |a, _| grad[free[a]]);
    let e = SymmetricEigen::new(h);
    let top = e.eigenvalues.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let floor = if top > 0.0 { top * 1e-7 } else { 1.0 };
    let inv = DVector::from_fn(k, |i, _| 1.0 / e.eigenvalues[i].abs().max(floor));
    let ut_g = e.eigenvectors.transpose() * g;
    let step = -(&e.eigenvectors * ut_g.component_mul(&inv));
    let big = step.amax();
    let scale = if big > max_step { max_step / big } else { 1.0 };
    let mut full = vec![0.0; hess.nrows()];
    for (a, &j) in free.iter().enumerate() {
        full[j] = step[a] * scale;
    }
    full
}

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
    if prob.penalty.is_some() {
        return Err(NceError::invalid("penalty", "give penalties to fit_reml through the penalty set"));
    }
    if penalties.ncoef() != d.ncol() {
        return Err(NceError::invalid(
            "penalties",
            format!("are for {} coefficients but the design has {} columns", penalties.ncoef(), d.ncol()),
        ));
    }
    if prob.y.len() != d.nrow() {
        return Err(NceError::invalid("y", format!("has length {}, expected {}", prob.y.len(), d.nrow())));
    }
    let m = penalties.len();
    let mut ctx = Ctx { d, prob, pens: penalties, ctrl, inner_iterations: 0 };
    let centre = auto_rho(d, prob, penalties);
    let (lo, hi): (Vec<f64>, Vec<f64>) = centre.iter().map(|c| (c - ctrl.rho_range, c + ctrl.rho_range)).unzip();
    let clamp = |r: &[f64]| -> Vec<f64> { (0..m).map(|j| r[j].clamp(lo[j], hi[j])).collect() };

    let fixed = ctrl.sp.is_some() || m == 0;
    let rho0 = match (&ctrl.sp, &ctrl.initial_sp) {
        (Some(sp), _) => check_sp("sp", sp, m)?,
        (None, Some(sp)) => clamp(&check_sp("initial_sp", sp, m)?),
        (None, None) => centre.clone(),
    };
    let mut cur = ctx.point(&rho0, prob.start, interrupted)?;
    let mut der = ctx.derivs(&cur)?;
    let mut converged = fixed && cur.fit.converged;
    let mut message = String::new();
    let mut outer = 0;

    if !fixed {
        for it in 0..ctrl.max_outer {
            if interrupted() {
                return Err(NceError::Interrupted);
            }
            // Coordinates at a bound whose gradient pushes outward stay there.
            let free: Vec<usize> = (0..m)
                .filter(|&j| {
                    let at_hi = cur.rho[j] >= hi[j] - 1e-10 && der.grad[j] < 0.0;
                    let at_lo = cur.rho[j] <= lo[j] + 1e-10 && der.grad[j] > 0.0;
                    !(at_hi || at_lo)
                })
                .collect();
            let gmax = free.iter().map(|&j| der.grad[j].abs()).fold(0.0, f64::max);
            if gmax <= ctrl.tol * (1.0 + cur.score.abs()) {
                converged = true;
                break;
            }
            outer = it + 1;
            let mut step = newton_step(&der.hess, &der.grad, &free, ctrl.max_step);
            let mut accepted = None;
            for _ in 0..=ctrl.max_halving {
                let trial: Vec<f64> = clamp(&cur.rho.iter().zip(&step).map(|(r, s)| r + s).collect::<Vec<_>>());
                match ctx.point(&trial, Some(&cur.fit.coefficients), interrupted) {
                    Ok(pt) if pt.score <= cur.score => {
                        accepted = Some(pt);
                        break;
                    }
                    Err(NceError::Interrupted) => return Err(NceError::Interrupted),
                    _ => step.iter_mut().for_each(|s| *s *= 0.5),
                }
            }
            match accepted {
                Some(pt) => {
                    let change = cur.score - pt.score;
                    let moved = pt.rho.iter().zip(&cur.rho).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                    cur = pt;
                    der = ctx.derivs(&cur)?;
                    // Score and rho both stalled at rounding level: as good as it gets.
                    if change <= 1e-13 * (1.0 + cur.score.abs()) && moved < 1e-8 {
                        converged = true;
                        message = "converged: the score stopped changing".into();
                        break;
                    }
                }
                None => {
                    converged = gmax <= 1e3 * ctrl.tol * (1.0 + cur.score.abs());
                    message = format!(
                        "step halving failed to reduce the REML score (largest gradient {gmax:.3e})"
                    );
                    break;
                }
            }
        }
        if !converged && message.is_empty() {
            message = format!("no convergence in {} outer iterations", ctrl.max_outer);
        }
    }
    if !cur.fit.converged {
        converged = false;
        message = format!("inner fit: {}", cur.fit.message);
    }
    finish(&ctx, cur, der, &lo, &hi, fixed, outer, converged, message)
}

#[allow(clippy::too_many_arguments)]
fn finish<D: Design>(
    ctx: &Ctx<D>,
    pt: Point,
    der: Derivs,
    lo: &[f64],
    hi: &[f64],
    fixed: bool,
    outer: usize,
    converged: bool,
    message: String,
) -> Result<RemlFit> {
    let lambda: Vec<f64> = pt.rho.iter().map(|r| r.exp()).collect();
    let vp = Ctx::<D>::h_inverse(&pt);
    let xwx = &pt.fit.hessian - ctx.pens.total(&lambda);
    let f = &vp * &xwx;
    let ve = &f * &vp;
    let ve = (&ve + ve.transpose()) * 0.5;
    let edf = (0..f.nrows()).map(|i| f[(i, i)]).collect();
    let at_bound = (0..pt.rho.len())
        .map(|j| !fixed && (pt.rho[j] >= hi[j] - 1e-10 || pt.rho[j] <= lo[j] + 1e-10))
        .collect();
    Ok(RemlFit {
        coefficients: pt.fit.coefficients.clone(),
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
        fit: pt.fit,
        outer_iterations: outer,
        inner_iterations: ctx.inner_iterations,
        converged,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::DenseDesign;
    use crate::grouped::GroupedDesign;
    use crate::penalty::Penalty;

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
                if u < 1.0 / (1.0 + (-f(t)).exp()) { 1.0 } else { 0.0 }
            })
            .collect()
    }

    #[test]
    fn linear_truth_sends_the_smoothing_parameter_up() {
        let n = 400;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect();
        let y = labels(&x, |t| 2.0 * t - 1.0);
        let (xm, p, pens) = basis(&x);
        let d = DenseDesign::new(&xm, n, p).unwrap();
        let (w, o) = (vec![1.0; n], vec![0.0; n]);
        let prob = Problem { y: &y, prior_weights: &w, offset: &o, family: Family::Binomial, penalty: None, start: None };
        let ctrl = RemlControl { tol: 1e-10, ..Default::default() };
        let f = fit_reml(&d, &prob, &pens, &ctrl, &mut || false).unwrap();
        assert!(f.converged, "{}", f.message);
        let edf: f64 = f.edf.iter().sum();
        assert!(edf < 2.1, "edf {edf}, sp {:?}", f.sp);
        assert!(f.at_bound[0] || f.gradient[0].abs() < 1e-7, "{:?} {:?}", f.at_bound, f.gradient);
    }

    #[test]
    fn grouped_design_gives_the_same_reml_fit_as_the_expanded_one() {
        // Rows in groups of 5 sharing the last two columns [1, z_t].
        let (n, ng) = (500, 100);
        let x: Vec<f64> = (0..n).map(|i| ((i * 37 % n) as f64 + 0.5) / n as f64).collect();
        let group: Vec<usize> = (0..n).map(|r| r / 5).collect();
        let z: Vec<f64> = (0..ng).map(|t| (t as f64 * 0.3).sin()).collect();
        let y = labels(&x, |t| (6.0 * t).sin());
        let (xa, pa, _) = basis(&x);
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
        let (w, o) = (vec![1.0; n], vec![0.0; n]);
        let prob = Problem { y: &y, prior_weights: &w, offset: &o, family: Family::Binomial, penalty: None, start: None };
        let ctrl = RemlControl::default();
        let f1 = fit_reml(&gd, &prob, &pens, &ctrl, &mut || false).unwrap();
        let f2 = fit_reml(&dd, &prob, &pens, &ctrl, &mut || false).unwrap();
        assert!(f1.converged && f2.converged);
        assert!((f1.rho[0] - f2.rho[0]).abs() < 1e-8);
        for (a, b) in f1.coefficients.iter().zip(&f2.coefficients) {
            assert!((a - b).abs() < 1e-8);
        }
        assert!((f1.reml - f2.reml).abs() < 1e-9);
    }

    #[test]
    fn bad_input_and_interrupt() {
        let n = 50;
        let x: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
        let y = labels(&x, |t| t);
        let (xm, p, pens) = basis(&x);
        let d = DenseDesign::new(&xm, n, p).unwrap();
        let (w, o) = (vec![1.0; n], vec![0.0; n]);
        let prob = Problem { y: &y, prior_weights: &w, offset: &o, family: Family::Binomial, penalty: None, start: None };
        let ctrl = RemlControl { sp: Some(vec![1.0, 2.0]), ..Default::default() };
        let e = fit_reml(&d, &prob, &pens, &ctrl, &mut || false).unwrap_err();
        assert!(e.to_string().starts_with("`sp`"), "{e}");
        let ctrl = RemlControl { sp: Some(vec![-1.0]), ..Default::default() };
        assert!(fit_reml(&d, &prob, &pens, &ctrl, &mut || false).is_err());
        let e = fit_reml(&d, &prob, &pens, &RemlControl::default(), &mut || true).unwrap_err();
        assert_eq!(e, NceError::Interrupted);
    }
}
