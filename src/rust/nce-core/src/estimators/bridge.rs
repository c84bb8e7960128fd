//! Ratios of normalising constants by logistic regression between two samples (Geyer 1994,
//! "reverse logistic regression"; the optimal bridge sampling estimator of Meng & Wong 1996).
//!
//! Draws θ from p1 = f1 / Z1 (sample A, n1 draws) and from p2 = f2 / Z2 (sample B, n2 draws)
//! are labelled 1 and 0. With r(θ) = log f1(θ) - log f2(θ) and ν = log(n1 / n2), the label
//! probability is σ(r(θ) - c + ν) at c = log(Z1 / Z2). The negative log-likelihood
//!
//!   L(c) = Σ_A softplus(-(r_i - c + ν)) + Σ_B softplus(r_j - c + ν)
//!
//! is convex in c, its gradient runs from -n2 (c → -∞) to n1 (c → +∞), so the root exists and
//! is unique. It is found by Newton's method safeguarded by bisection on a bracket. Not the
//! `roots` crate: one pass over the draws gives both L' and L'' (roots' Newton takes them as two
//! functions, two passes), the interrupt is polled between steps, and its absolute stopping test
//! on |L'| ends early on flat, nearly separated problems. Measured on n = 10^4..10^5 normal log
//! ratios: 4-5 passes to 1e-15 here, roots' Newton 6-8 calls of each function (1.4-1.8x the time;
//! error 1.5e-7 when nearly separated), roots' Brent 20-40 passes (5x the time).
//!
//! Two uses: a Bayes factor between models that share a prior (f_k = likelihood × prior, so
//! r = l1 - l2 and c = log K; eq. 19-20 of the NCL report) and one normalising constant against
//! a normalised reference density (f2 = g, Z2 = 1, c = log Z).
//!
//! Also here: effective sample sizes (Geyer's initial monotone sequence) and the transforms of
//! bounded parameters to the real line used by `marglik` (as in bridge sampling).

use crate::convergence::Convergence;
use crate::engine::family::sigmoid;
use crate::error::{NceError, Result};
use crate::sampling::mixture_fit::{fit_mixture_bic, MixtureControl};
use crate::sampling::reference::Reference;
use rayon::prelude::*;
use std::sync::atomic::AtomicBool;

/// Most components of a mixture reference (as mclust's default, 1-9).
const MIXTURE_COMPONENTS: usize = 9;

/// Terms per chunk of a sum; fixed so results do not depend on the thread count.
const CHUNK: usize = 4096;

/// Settings of the 1-D solver.
#[derive(Debug, Clone)]
pub struct SolveControl {
    /// Stop when a Newton step moves c by less than `tol * (1 + |c|)`.
    pub tol: f64,
    pub maxit: usize,
}

impl SolveControl {
    pub fn check(&self) -> Result<()> {
        if !(self.tol.is_finite() && self.tol > 0.0) || self.maxit < 1 {
            return Err(NceError::invalid(
                "control",
                "tol must be positive and maxit at least 1",
            ));
        }
        Ok(())
    }
}

impl Default for SolveControl {
    fn default() -> Self {
        SolveControl { tol: 1e-12, maxit: 200 }
    }
}

/// The fitted log ratio and its uncertainty.
#[derive(Debug, Clone)]
pub struct BridgeFit {
    /// c = log(Z1 / Z2), the maximiser of the logistic likelihood.
    pub log_ratio: f64,
    /// Standard error: sandwich of the two-sample problem with each sample's score variance
    /// inflated by n / ESS (equals Geyer's 1/I - 1/n1 - 1/n2 for independent draws).
    pub se: f64,
    /// The same with ESS = n (independent draws).
    pub se_iid: f64,
    /// Naive inverse Fisher information of the logistic model, 1 / I.
    pub se_fisher: f64,
    /// Fisher information I = Σ p (1 - p) at the optimum.
    pub info: f64,
    /// Effective sample sizes of the score contributions of samples A and B.
    pub ess: [f64; 2],
    pub n: [usize; 2],
    /// Newton/bisection iterations and whether the score test was met.
    pub convergence: Convergence,
    /// min r over A exceeds max r over B: the samples are perfectly classified and the data
    /// only bound c.
    pub separated: bool,
    /// max r over B and min r over A (the range of perfect classifiers when separated).
    pub max_r2: f64,
    pub min_r1: f64,
    /// log mean over B of exp(r): importance sampling with p2 as proposal; its expectation is
    /// at most c (Jensen), a stochastic lower bound.
    pub bound_lower: f64,
    /// -log mean over A of exp(-r): reciprocal importance sampling; a stochastic upper bound.
    pub bound_upper: f64,
    /// Gradient of -ℓ at the returned value (0 at convergence).
    pub gradient: f64,
}

/// Chunked sums of (f(x), g(x)) over a slice, added in a fixed order.
fn chunked_sum2(x: &[f64], f: impl Fn(f64) -> (f64, f64) + Sync) -> (f64, f64) {
    let parts: Vec<(f64, f64)> = x
        .par_chunks(CHUNK)
        .map(|ch| {
            ch.iter().fold((0.0, 0.0), |(a, b), &v| {
                let (p, q) = f(v);
                (a + p, b + q)
            })
        })
        .collect();
    parts.iter().fold((0.0, 0.0), |(a, b), (p, q)| (a + p, b + q))
}

/// log of the mean of exp(x) (x may hold -inf).
pub fn log_mean_exp(x: &[f64]) -> f64 {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    let s: f64 = x.iter().map(|v| (v - m).exp()).sum();
    m + (s / x.len() as f64).ln()
}

/// Gradient and Hessian of -ℓ at c.
fn grad_hess(r1: &[f64], r2: &[f64], nu: f64, c: f64) -> (f64, f64) {
    let (ga, ha) = chunked_sum2(r1, |r| {
        let q = sigmoid(-(r - c + nu)); // 1 - p
        (q, q * (1.0 - q))
    });
    let (gb, hb) = chunked_sum2(r2, |r| {
        let p = sigmoid(r - c + nu); // 0 at r = -inf
        (p, p * (1.0 - p))
    });
    (ga - gb, ha + hb)
}

/// Check the log ratios: finite on A; finite or -inf on B (f1 = 0 at a draw of p2 is allowed).
fn check_ratios(r1: &[f64], r2: &[f64]) -> Result<()> {
    if r1.is_empty() || r2.is_empty() {
        return Err(NceError::invalid("draws", "each sample needs at least one draw"));
    }
    if let Some(i) = r1.iter().position(|v| !v.is_finite()) {
        return Err(NceError::invalid(
            "r1",
            format!(
                "log ratio at draw {} of the first sample is {} (must be finite)",
                i + 1,
                r1[i]
            ),
        ));
    }
    if let Some(i) = r2.iter().position(|v| v.is_nan() || *v == f64::INFINITY) {
        return Err(NceError::invalid(
            "r2",
            format!(
                "log ratio at draw {} of the second sample is {} (must be finite or -Inf)",
                i + 1,
                r2[i]
            ),
        ));
    }
    Ok(())
}

/// Solve for c = log(Z1 / Z2). `ess` gives each sample's effective sample size; `None`
/// estimates it from the score contributions (initial monotone sequence, draws in order).
/// `stop` is polled between iterations.
pub fn solve(
    r1: &[f64],
    r2: &[f64],
    ess: [Option<f64>; 2],
    ctrl: &SolveControl,
    stop: &mut dyn FnMut() -> bool,
) -> Result<BridgeFit> {
    ctrl.check()?;
    check_ratios(r1, r2)?;
    let (n1, n2) = (r1.len(), r2.len());
    let nu = (n1 as f64 / n2 as f64).ln();
    let min_r1 = r1.iter().cloned().fold(f64::INFINITY, f64::min);
    let max_r1 = r1.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let max_r2 = r2.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let min_r2 = r2
        .iter()
        .cloned()
        .filter(|v| v.is_finite())
        .fold(f64::INFINITY, f64::min);
    let separated = min_r1 > max_r2;
    let bound_lower = log_mean_exp(r2);
    let neg: Vec<f64> = r1.iter().map(|v| -v).collect();
    let bound_upper = -log_mean_exp(&neg);
    if max_r2 == f64::NEG_INFINITY {
        // f1 vanishes at every draw of p2: the likelihood increases without bound as c → -∞.
        return Ok(BridgeFit {
            log_ratio: f64::NEG_INFINITY,
            se: f64::INFINITY,
            se_iid: f64::INFINITY,
            se_fisher: f64::INFINITY,
            info: 0.0,
            ess: [n1 as f64, n2 as f64],
            n: [n1, n2],
            convergence: Convergence {
                iterations: 0,
                converged: false,
                message: "the samples are perfectly separated".into(),
            },
            separated: true,
            max_r2,
            min_r1,
            bound_lower,
            bound_upper,
            gradient: n1 as f64,
        });
    }

    // Bracket: beyond every |r - c + ν| > 40 the gradient has its limit sign.
    let lo_r = min_r1.min(min_r2);
    let hi_r = max_r1.max(max_r2);
    let pad = 40.0 + nu.abs();
    let (mut lo, mut hi) = (lo_r - pad, hi_r + pad);
    // A start between the importance sampling bounds (or the classifier gap when separated).
    let mut c = if separated {
        0.5 * (max_r2 + min_r1)
    } else {
        0.5 * (bound_lower + bound_upper)
    };
    if !c.is_finite() || c <= lo || c >= hi {
        c = 0.5 * (lo + hi);
    }
    let mut converged = false;
    let mut iterations = 0;
    let (mut g, mut h) = grad_hess(r1, r2, nu, c);
    while iterations < ctrl.maxit {
        if stop() {
            return Err(NceError::Interrupted);
        }
        iterations += 1;
        if g == 0.0 {
            converged = true;
            break;
        }
        if g < 0.0 {
            lo = c;
        } else {
            hi = c;
        }
        let newton = c - g / h;
        let next = if h > 0.0 && newton.is_finite() && newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        let step = (next - c).abs();
        c = next;
        let gh = grad_hess(r1, r2, nu, c);
        g = gh.0;
        h = gh.1;
        if step <= ctrl.tol * (1.0 + c.abs()) || hi - lo <= ctrl.tol * (1.0 + c.abs()) {
            converged = true;
            break;
        }
    }

    // Score contributions at the optimum and their variances.
    let s1: Vec<f64> = r1.iter().map(|&r| sigmoid(-(r - c + nu))).collect();
    let s2: Vec<f64> = r2.iter().map(|&r| sigmoid(r - c + nu)).collect();
    let ess1 = match ess[0] {
        Some(e) => e,
        None => ess_ims(&s1),
    };
    let ess2 = match ess[1] {
        Some(e) => e,
        None => ess_ims(&s2),
    };
    for (k, e) in [ess1, ess2].iter().enumerate() {
        if !(e.is_finite() && *e > 0.0) {
            return Err(NceError::invalid(
                "ess",
                format!("effective sample size {} must be positive, got {e}", k + 1),
            ));
        }
    }
    let v1 = centered_ss(&s1);
    let v2 = centered_ss(&s2);
    let info = h;
    let var_iid = (v1 + v2) / (info * info);
    let var = (v1 * n1 as f64 / ess1 + v2 * n2 as f64 / ess2) / (info * info);
    let fin = |v: f64| {
        if v.is_finite() {
            v.max(0.0).sqrt()
        } else {
            f64::INFINITY
        }
    };
    Ok(BridgeFit {
        log_ratio: c,
        se: fin(var),
        se_iid: fin(var_iid),
        se_fisher: fin(1.0 / info),
        info,
        ess: [ess1, ess2],
        n: [n1, n2],
        convergence: Convergence {
            iterations,
            converged,
            message: if converged {
                String::new()
            } else {
                "iteration limit reached".into()
            },
        },
        separated,
        max_r2,
        min_r1,
        bound_lower,
        bound_upper,
        gradient: g,
    })
}

/// Σ (x - mean)².
fn centered_ss(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    x.iter().map(|v| (v - m) * (v - m)).sum()
}

/// Effective sample size of a series by Geyer's (1992) initial monotone sequence estimator:
/// n / τ with τ = -1 + 2 Σ_m Γ_m / γ_0, Γ_m = γ_{2m} + γ_{2m+1} summed while positive and
/// made monotone, times 1 - (2L - 1) / n for the L lags summed: with the mean estimated, each
/// autocovariance is low by about Var(mean) = τ γ_0 / n, so the long-run variance Σ_{|k|<L} γ_k is
/// low by the factor 1 - (2L - 1) / n (first order; floored at 1/2, past which L > n / 4 and the
/// series is too short for any estimate). Capped at n (so independent draws are never credited
/// with more than n).
pub fn ess_ims(x: &[f64]) -> f64 {
    let n = x.len();
    match iat_ims(x) {
        Some((tau, lags)) => {
            let keep = (1.0 - (2.0 * lags as f64 - 1.0) / n as f64).max(0.5);
            (n as f64 / tau * keep).min(n as f64)
        }
        None => n as f64,
    }
}

/// The integrated autocorrelation time τ of a series by the initial monotone sequence, and the
/// number of lags summed; None for fewer than 4 values, a constant series or τ ≤ 0.
pub fn iat_ims(x: &[f64]) -> Option<(f64, usize)> {
    let n = x.len();
    if n < 4 {
        return None;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let y: Vec<f64> = x.iter().map(|v| v - mean).collect();
    let acov = |k: usize| -> f64 { y[..n - k].iter().zip(&y[k..]).map(|(a, b)| a * b).sum::<f64>() / n as f64 };
    let g0 = acov(0);
    if !(g0 > 0.0) || !g0.is_finite() {
        return None;
    }
    // Autocovariances in parallel batches of lags, stopping at the first non-positive pair sum.
    const BATCH: usize = 64;
    let mut sum_gamma = 0.0;
    let mut prev = f64::INFINITY;
    let mut m = 0usize;
    'outer: loop {
        let lags: Vec<usize> = (2 * m..(2 * m + 2 * BATCH).min(n)).collect();
        if lags.len() < 2 {
            break;
        }
        let ac: Vec<f64> = lags.par_iter().map(|&k| acov(k)).collect();
        for pair in ac.chunks_exact(2) {
            let big = pair[0] + pair[1];
            if big <= 0.0 {
                break 'outer;
            }
            let big = big.min(prev);
            prev = big;
            sum_gamma += big;
            m += 1;
        }
        if ac.len() % 2 == 1 {
            break;
        }
    }
    let tau = (-g0 + 2.0 * sum_gamma) / g0;
    (tau > 0.0).then_some((tau, 2 * m.max(1)))
}

/// Bounds of one coordinate; a transform to the real line follows from which are finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bounds {
    Free,
    Lower(f64),
    Upper(f64),
    Both(f64, f64),
}

impl Bounds {
    pub fn new(lb: f64, ub: f64) -> Result<Self> {
        if lb.is_nan() || ub.is_nan() || lb == f64::INFINITY || ub == f64::NEG_INFINITY || !(lb < ub) {
            return Err(NceError::invalid(
                "lb",
                format!("bounds need lb < ub, lb < Inf and ub > -Inf, got [{lb}, {ub}]"),
            ));
        }
        Ok(match (lb.is_finite(), ub.is_finite()) {
            (false, false) => Bounds::Free,
            (true, false) => Bounds::Lower(lb),
            (false, true) => Bounds::Upper(ub),
            (true, true) => Bounds::Both(lb, ub),
        })
    }

    /// u on the real line; None outside the open support.
    pub fn forward(&self, x: f64) -> Option<f64> {
        let u = match *self {
            Bounds::Free => x,
            Bounds::Lower(a) => (x > a).then(|| (x - a).ln())?,
            Bounds::Upper(b) => (x < b).then(|| (b - x).ln())?,
            Bounds::Both(a, b) => (x > a && x < b).then(|| ((x - a) / (b - x)).ln())?,
        };
        u.is_finite().then_some(u)
    }

    /// (x, log |dx/du|) at u.
    pub fn inverse(&self, u: f64) -> (f64, f64) {
        match *self {
            Bounds::Free => (u, 0.0),
            Bounds::Lower(a) => (a + u.exp(), u),
            Bounds::Upper(b) => (b - u.exp(), u),
            Bounds::Both(a, b) => {
                let s = sigmoid(u);
                // log σ(u) + log σ(-u) = -|u| - 2 log(1 + e^{-|u|})
                let lj = (b - a).ln() - u.abs() - 2.0 * (-u.abs()).exp().ln_1p();
                (a + (b - a) * s, lj)
            }
        }
    }
}

/// Column-major n x d draws to the real line: (u, log |dx/du| per row). Errors name the first
/// draw outside the open support.
pub fn to_unconstrained(x: &[f64], n: usize, bounds: &[Bounds]) -> Result<(Vec<f64>, Vec<f64>)> {
    let d = bounds.len();
    if x.len() != n * d {
        return Err(NceError::invalid("draws", format!("must have {d} columns")));
    }
    let mut u = vec![0.0; n * d];
    let mut lj = vec![0.0; n];
    for (j, b) in bounds.iter().enumerate() {
        for i in 0..n {
            let v = x[j * n + i];
            let ui = b.forward(v).ok_or_else(|| {
                NceError::invalid(
                    "draws",
                    format!("draw {} has {v} in column {}, outside the bounds {b:?}", i + 1, j + 1),
                )
            })?;
            u[j * n + i] = ui;
            lj[i] += b.inverse(ui).1;
        }
    }
    Ok((u, lj))
}

/// Column-major n x d points on the real line back to the parameter space: (x, log |dx/du|).
pub fn from_unconstrained(u: &[f64], n: usize, bounds: &[Bounds]) -> (Vec<f64>, Vec<f64>) {
    let mut x = vec![0.0; u.len()];
    let mut lj = vec![0.0; n];
    for (j, b) in bounds.iter().enumerate() {
        for i in 0..n {
            let (xi, l) = b.inverse(u[j * n + i]);
            x[j * n + i] = xi;
            lj[i] += l;
        }
    }
    (x, lj)
}

/// Mean and covariance (divisor n - 1, column-major) of column-major n x d draws.
pub fn mean_cov(x: &[f64], n: usize, d: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    if n < 2 || x.len() != n * d {
        return Err(NceError::invalid("draws", "need at least two draws to fit a reference"));
    }
    let mean: Vec<f64> = (0..d)
        .map(|j| x[j * n..(j + 1) * n].iter().sum::<f64>() / n as f64)
        .collect();
    let mut cov = vec![0.0; d * d];
    for a in 0..d {
        for b in 0..=a {
            let s: f64 = (0..n)
                .map(|i| (x[a * n + i] - mean[a]) * (x[b * n + i] - mean[b]))
                .sum::<f64>()
                / (n - 1) as f64;
            cov[a * d + b] = s;
            cov[b * d + a] = s;
        }
    }
    Ok((mean, cov))
}

/// Shrink the correlations of a sample covariance `cov` (column-major d x d, of the column-major
/// n x d draws `x` with means `mean`) towards zero in place, by the Ledoit-Wolf (2004) intensity
/// on the correlation scale: λ = Σ_{a≠b} Var(r̂_ab) / Σ_{a≠b} r̂_ab², clipped to [0, 1], with
/// Var(r̂_ab) estimated from the spread of the products of standardised draws. With d² entries
/// from n draws the noise in a full covariance is a divergence of about d²/(4n) nats, which
/// dominates the gap between the draws and the reference in hundreds of dimensions. Returns λ.
pub fn shrink_cov(x: &[f64], n: usize, d: usize, mean: &[f64], cov: &mut [f64]) -> f64 {
    if d < 2 || n < 2 {
        return 0.0;
    }
    let sd: Vec<f64> = (0..d).map(|a| cov[a * d + a].max(0.0).sqrt()).collect();
    // standardised columns
    let s: Vec<Vec<f64>> = (0..d)
        .map(|a| {
            let k = if sd[a] > 0.0 { 1.0 / sd[a] } else { 0.0 };
            x[a * n..(a + 1) * n].iter().map(|v| (v - mean[a]) * k).collect()
        })
        .collect();
    let nf = n as f64;
    // per column a: Σ_{b<a} Var(r̂_ab) and Σ_{b<a} r̂_ab²
    let parts: Vec<(f64, f64)> = (0..d)
        .into_par_iter()
        .map(|a| {
            let mut num = 0.0;
            let mut den = 0.0;
            for b in 0..a {
                let (mut s1, mut s2) = (0.0, 0.0);
                for (u, v) in s[a].iter().zip(&s[b]) {
                    let p = u * v;
                    s1 += p;
                    s2 += p * p;
                }
                let m = s1 / nf;
                num += (s2 / nf - m * m).max(0.0) / nf;
                let r = s1 / (nf - 1.0);
                den += r * r;
            }
            (num, den)
        })
        .collect();
    let (num, den) = parts.iter().fold((0.0, 0.0), |acc, p| (acc.0 + p.0, acc.1 + p.1));
    let lambda = if den > 0.0 { (num / den).clamp(0.0, 1.0) } else { 0.0 };
    for a in 0..d {
        for b in 0..d {
            if a != b {
                cov[a * d + b] *= 1.0 - lambda;
            }
        }
    }
    lambda
}

/// What the marginal-likelihood estimator needs from a reference fitted to posterior draws:
/// the fitted mean and covariance (unconstrained scale, column-major), at the `est` draws their
/// log Jacobian and log reference density, and `n_ref` reference draws mapped back to the
/// parameter space (column-major n_ref x d) with their log Jacobian and log reference density.
#[derive(Debug, Clone)]
pub struct MarglikReference {
    pub mean: Vec<f64>,
    pub cov: Vec<f64>,
    pub est_logjac: Vec<f64>,
    pub est_logref: Vec<f64>,
    pub ref_draws: Vec<f64>,
    pub ref_logjac: Vec<f64>,
    pub ref_logref: Vec<f64>,
}

/// The reference of `marglik_reference`: a normal (`family = "normal"`), Student t (`"t"`,
/// `df` degrees of freedom, scale matching the fitted covariance when df > 2) or mixture of
/// normals (`"mixture"`, EM with 1-9 components chosen by BIC, its starts on stream `seed`),
/// with `n_ref` draws of its own on stream `seed`; with `shrink` its correlations are shrunk
/// towards zero by the Ledoit-Wolf intensity (`shrink_cov`). `stop` is polled by the mixture's
/// EM (a user interrupt).
#[derive(Debug, Clone, Copy)]
pub struct ReferenceOptions<'a> {
    pub family: &'a str,
    pub df: f64,
    pub n_ref: usize,
    pub seed: u64,
    pub shrink: bool,
    pub stop: Option<&'a AtomicBool>,
}

/// Fit the reference `opts` describes to the `fit` draws (column-major nf x d) on the
/// unconstrained scale given by `bounds`, and evaluate it at the `est` draws (ne x d) and at
/// its own draws.
pub fn marglik_reference(
    fit: &[f64],
    nf: usize,
    est: &[f64],
    ne: usize,
    bounds: &[Bounds],
    opts: &ReferenceOptions,
) -> Result<MarglikReference> {
    let ReferenceOptions {
        family,
        df,
        n_ref,
        seed,
        shrink,
        stop,
    } = *opts;
    let d = bounds.len();
    let (uf, _) = to_unconstrained(fit, nf, bounds)?;
    let (ue, est_logjac) = to_unconstrained(est, ne, bounds)?;
    let (mean, mut cov) = mean_cov(&uf, nf, d)?;
    if shrink {
        shrink_cov(&uf, nf, d, &mean, &mut cov);
    }
    let reference = match family {
        "normal" => Reference::normal(mean.clone(), &cov),
        "t" => {
            let k = if df > 2.0 { (df - 2.0) / df } else { 1.0 };
            let scale: Vec<f64> = cov.iter().map(|v| v * k).collect();
            Reference::student_t(mean.clone(), &scale, df)
        }
        "mixture" => {
            let never = AtomicBool::new(false);
            let control = MixtureControl {
                n_starts: 3,
                max_iter: 1000,
                tol: 1e-6,
                // Its own streams: the reference's draws use `seed`'s.
                seed: seed.wrapping_add(0x9E37_79B9_7F4A_7C15),
            };
            let components: Vec<usize> = (1..=MIXTURE_COMPONENTS).collect();
            fit_mixture_bic(&uf, nf, d, &components, &control, stop.unwrap_or(&never)).and_then(|sel| {
                let f = &sel.fits[sel.chosen];
                Reference::mixture(f.weights.clone(), &f.means, &f.covs)
            })
        }
        other => Err(NceError::invalid(
            "reference",
            format!("must be \"normal\", \"t\" or \"mixture\", got '{other}'"),
        )),
    }
    .map_err(|e| match e {
        NceError::InvalidInput { msg, .. } => NceError::invalid(
            "draws",
            format!(
                "cannot fit a reference to the draws (on the unconstrained scale): {msg}; \
                 are some parameters constant or collinear?"
            ),
        ),
        other => other,
    })?;
    let est_logref = reference.log_density(&ue, ne)?;
    let ur = reference.sample(n_ref, seed)?;
    let ref_logref = reference.log_density(&ur, n_ref)?;
    let (ref_draws, ref_logjac) = from_unconstrained(&ur, n_ref, bounds);
    Ok(MarglikReference {
        mean,
        cov,
        est_logjac,
        est_logref,
        ref_draws,
        ref_logjac,
        ref_logref,
    })
}

/// Test data (here and in `telescope`'s tests): an AR(1) series of unit variance.
#[cfg(test)]
pub(crate) fn ar1(n: usize, phi: f64, rng: &mut rand_chacha::ChaCha20Rng) -> Vec<f64> {
    use rand::Rng;
    use rand_distr::StandardNormal;
    let mut x = vec![0.0; n];
    x[0] = rng.sample::<f64, _>(StandardNormal);
    for t in 1..n {
        x[t] = phi * x[t - 1] + (1.0 - phi * phi).sqrt() * rng.sample::<f64, _>(StandardNormal);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use rand_distr::StandardNormal;

    fn never() -> impl FnMut() -> bool {
        || false
    }

    #[test]
    fn normal_kernel_against_its_normal_reference_is_exact() {
        // f1 = exp(-x²/2) (Z1 = sqrt(2π)) and p2 = N(0, 1): r = log sqrt(2π) everywhere.
        let r1 = vec![0.5 * (2.0 * std::f64::consts::PI).ln(); 100];
        let r2 = vec![0.5 * (2.0 * std::f64::consts::PI).ln(); 300];
        let f = solve(&r1, &r2, [None, None], &SolveControl::default(), &mut never()).unwrap();
        assert!((f.log_ratio - 0.5 * (2.0 * std::f64::consts::PI).ln()).abs() < 1e-10);
        assert!(f.convergence.converged && !f.separated);
        assert!(f.se < 1e-6); // constant ratio: no error at all
    }

    #[test]
    fn two_normals_ratio_within_standard_errors() {
        // f1 = exp(-(x-1)²/(2·4)) (Z1 = 2 sqrt(2π)), f2 = exp(-x²/2) (Z2 = sqrt(2π)): c = log 2.
        let n = 20_000;
        let mut rng = crate::rng::stream_rng(11, 0);
        let lf1 = |x: f64| -(x - 1.0) * (x - 1.0) / 8.0;
        let lf2 = |x: f64| -x * x / 2.0;
        let x1: Vec<f64> = (0..n)
            .map(|_| 1.0 + 2.0 * rng.sample::<f64, _>(StandardNormal))
            .collect();
        let x2: Vec<f64> = (0..n / 2).map(|_| rng.sample::<f64, _>(StandardNormal)).collect();
        let r1: Vec<f64> = x1.iter().map(|&x| lf1(x) - lf2(x)).collect();
        let r2: Vec<f64> = x2.iter().map(|&x| lf1(x) - lf2(x)).collect();
        let f = solve(&r1, &r2, [None, None], &SolveControl::default(), &mut never()).unwrap();
        let err = f.log_ratio - 2f64.ln();
        assert!(err.abs() < 3.0 * f.se, "err {err} se {}", f.se);
        assert!(f.se < 0.05 && f.se <= f.se_fisher);
        assert!(f.gradient.abs() < 1e-6);
        assert!(f.bound_lower <= f.bound_upper + 1e-12);
        // Geyer: sandwich = 1/I - 1/n1 - 1/n2 at the optimum (for independent draws, ESS = n).
        let f2 = solve(
            &r1,
            &r2,
            [Some(n as f64), Some((n / 2) as f64)],
            &SolveControl::default(),
            &mut never(),
        )
        .unwrap();
        let geyer = 1.0 / f2.info - 1.0 / n as f64 - 1.0 / (n / 2) as f64;
        assert!(
            (f2.se * f2.se - geyer).abs() < 0.05 * geyer,
            "{} vs {geyer}",
            f2.se * f2.se
        );
    }

    #[test]
    fn results_do_not_depend_on_threads() {
        let r1: Vec<f64> = (0..50_000).map(|i| ((i as f64) * 0.37).sin() + 0.3).collect();
        let r2: Vec<f64> = (0..30_000).map(|i| ((i as f64) * 0.11).cos() - 0.2).collect();
        let a = crate::engine::design::with_threads(1, || {
            solve(&r1, &r2, [None, None], &SolveControl::default(), &mut || false)
        })
        .unwrap()
        .unwrap();
        let b = crate::engine::design::with_threads(4, || {
            solve(&r1, &r2, [None, None], &SolveControl::default(), &mut || false)
        })
        .unwrap()
        .unwrap();
        assert_eq!(a.log_ratio, b.log_ratio);
        assert_eq!(a.se, b.se);
    }

    #[test]
    fn separation_is_flagged_and_bracketed() {
        let r1 = vec![10.0, 11.0, 12.0];
        let r2 = vec![-5.0, -4.0, -6.0, f64::NEG_INFINITY];
        let f = solve(&r1, &r2, [None, None], &SolveControl::default(), &mut never()).unwrap();
        assert!(f.separated);
        assert_eq!((f.max_r2, f.min_r1), (-4.0, 10.0));
        assert!(f.bound_lower <= f.max_r2 && f.bound_upper >= f.min_r1);
        assert!(f.log_ratio > -4.0 && f.log_ratio < 10.0);
        let g = solve(
            &r1,
            &[f64::NEG_INFINITY; 3],
            [None, None],
            &SolveControl::default(),
            &mut never(),
        )
        .unwrap();
        assert!(g.separated && g.bound_lower == f64::NEG_INFINITY && g.bound_upper.is_finite());
    }

    #[test]
    fn bad_ratios_are_rejected() {
        let ctl = SolveControl::default();
        assert!(solve(&[1.0, f64::NAN], &[0.0], [None, None], &ctl, &mut never()).is_err());
        assert!(solve(&[1.0, f64::NEG_INFINITY], &[0.0], [None, None], &ctl, &mut never()).is_err());
        assert!(solve(&[1.0], &[f64::INFINITY], [None, None], &ctl, &mut never()).is_err());
        assert!(solve(&[], &[0.0], [None, None], &ctl, &mut never()).is_err());
        assert!(matches!(
            solve(&[1.0], &[0.0], [None, None], &ctl, &mut || true),
            Err(NceError::Interrupted)
        ));
    }

    #[test]
    fn ess_of_ar1_matches_closed_form() {
        // AR(1) with coefficient φ: τ = (1 + φ) / (1 - φ).
        let n = 200_000;
        let phi: f64 = 0.8;
        let mut rng = crate::rng::stream_rng(3, 0);
        let mut x = vec![0.0; n];
        for t in 1..n {
            x[t] = phi * x[t - 1] + (1.0 - phi * phi).sqrt() * rng.sample::<f64, _>(StandardNormal);
        }
        let ess = ess_ims(&x);
        let expect = n as f64 * (1.0 - phi) / (1.0 + phi);
        assert!((ess / expect - 1.0).abs() < 0.1, "ess {ess} vs {expect}");
        let iid: Vec<f64> = (0..n).map(|_| rng.sample::<f64, _>(StandardNormal)).collect();
        let e = ess_ims(&iid);
        assert!(e > 0.9 * n as f64 && e <= n as f64);
        assert_eq!(ess_ims(&[1.0; 100]), 100.0);
    }

    #[test]
    fn ess_of_short_effective_chains_is_honest() {
        // Metropolis chains in bench/mcmc-coverage.R leave ~50 effective draws in the estimation half: at
        // n = 5000, φ = 0.98 (ESS 50.5) the ESS must be nearly unbiased and the mean's interval must cover.
        let (n, phi, reps) = (5000usize, 0.98f64, 100usize);
        let expect = n as f64 * (1.0 - phi) / (1.0 + phi);
        let mut rng = crate::rng::stream_rng(11, 0);
        let (mut sum_ess, mut covered) = (0.0, 0usize);
        for _ in 0..reps {
            let x = ar1(n, phi, &mut rng);
            let ess = ess_ims(&x);
            sum_ess += ess;
            let mean = x.iter().sum::<f64>() / n as f64;
            let var = centered_ss(&x) / (n as f64 - 1.0);
            if mean.abs() <= 1.96 * (var / ess).sqrt() {
                covered += 1;
            }
        }
        let mean_ess = sum_ess / reps as f64;
        assert!(
            (mean_ess / expect - 1.0).abs() < 0.15,
            "mean ess {mean_ess} vs {expect}"
        );
        // 100 replications: Monte Carlo s.e. of a 95% coverage is 2.2 points.
        assert!(covered >= 88, "coverage {covered} of {reps}");
    }

    #[test]
    fn mean_corrected_ess_of_short_chains_is_conservative_within_a_fifth() {
        // AR(1), φ = 0.95: τ = 39, so 1,000 draws hold 25.6 effective ones and the sum runs to ~70 lags. The
        // variance of the mean is γ_0 n / ESS, so n / ESS (not ESS) is what must not be too small. Measured
        // over 400 chains (Monte Carlo s.e. about 2%): the raw sum is ~7% low, the mean-corrected one ~15%
        // high (the truncation at the first negative pair partly offsets the mean's bias). Asserted: the
        // correction never understates τ and overstates it by at most a fifth.
        let (n, phi, reps) = (1000usize, 0.95f64, 400usize);
        let tau = (1.0 + phi) / (1.0 - phi);
        let mut rng = crate::rng::stream_rng(21, 0);
        let (mut corrected, mut raw) = (0.0, 0.0);
        for _ in 0..reps {
            let x = ar1(n, phi, &mut rng);
            corrected += n as f64 / ess_ims(&x) / reps as f64;
            raw += iat_ims(&x).unwrap().0 / reps as f64;
        }
        assert!(
            corrected > tau && corrected < 1.2 * tau,
            "mean n / ESS {corrected} vs τ {tau}"
        );
        assert!(raw < tau && raw > 0.85 * tau, "uncorrected τ {raw} vs {tau}");
    }

    #[test]
    fn transforms_round_trip_with_jacobians() {
        let bs = [
            Bounds::new(f64::NEG_INFINITY, f64::INFINITY).unwrap(),
            Bounds::new(0.0, f64::INFINITY).unwrap(),
            Bounds::new(f64::NEG_INFINITY, 2.0).unwrap(),
            Bounds::new(-1.0, 3.0).unwrap(),
        ];
        let x = [0.3, 0.7, 1.5, 2.9];
        for (b, &v) in bs.iter().zip(&x) {
            let u = b.forward(v).unwrap();
            let (back, lj) = b.inverse(u);
            assert!((back - v).abs() < 1e-12);
            let h = 1e-6;
            let num = ((b.inverse(u + h).0 - b.inverse(u - h).0) / (2.0 * h)).abs().ln();
            assert!((lj - num).abs() < 1e-6, "{b:?}: {lj} vs {num}");
        }
        assert!(bs[3].forward(3.0).is_none() && bs[1].forward(-0.1).is_none());
        assert!(Bounds::new(1.0, 1.0).is_err());
        let (u, lj) = to_unconstrained(&[0.5, 0.25], 2, &[Bounds::new(0.0, 1.0).unwrap()]).unwrap();
        let (x, lj2) = from_unconstrained(&u, 2, &[Bounds::new(0.0, 1.0).unwrap()]);
        assert!((x[1] - 0.25).abs() < 1e-14 && (lj[0] - 0.25f64.ln()).abs() < 1e-12 && lj == lj2);
        assert!(to_unconstrained(&[0.5, 1.5], 2, &[Bounds::new(0.0, 1.0).unwrap()]).is_err());
    }

    #[test]
    fn beta_normaliser_through_a_fitted_reference() {
        // Beta(3, 5) kernel x²(1-x)⁴ on (0, 1): Z = B(3, 5) = 1/105. Draws from the Beta by
        // the ratio of gammas; reference normal fitted on the logit scale.
        let n = 40_000;
        let mut rng = crate::rng::stream_rng(9, 0);
        let g = |k: usize, rng: &mut rand_chacha::ChaCha20Rng| -> f64 { (0..k).map(|_| -rng.gen::<f64>().ln()).sum() };
        let x: Vec<f64> = (0..n)
            .map(|_| {
                let a = g(3, &mut rng);
                let b = g(5, &mut rng);
                a / (a + b)
            })
            .collect();
        let bounds = [Bounds::new(0.0, 1.0).unwrap()];
        let m = marglik_reference(
            &x,
            n,
            &x,
            n,
            &bounds,
            &ReferenceOptions {
                family: "normal",
                df: f64::NAN,
                n_ref: n,
                seed: 17,
                shrink: false,
                stop: None,
            },
        )
        .unwrap();
        let lk = |x: f64| 2.0 * x.ln() + 4.0 * (1.0 - x).ln();
        let r1: Vec<f64> = (0..n).map(|i| lk(x[i]) + m.est_logjac[i] - m.est_logref[i]).collect();
        let r2: Vec<f64> = (0..n)
            .map(|i| lk(m.ref_draws[i]) + m.ref_logjac[i] - m.ref_logref[i])
            .collect();
        let f = solve(&r1, &r2, [None, None], &SolveControl::default(), &mut never()).unwrap();
        let exact = -(105f64).ln();
        assert!(
            (f.log_ratio - exact).abs() < 0.01 && (f.log_ratio - exact).abs() < 4.0 * f.se,
            "{} vs {exact}, se {}",
            f.log_ratio,
            f.se
        );
    }

    #[test]
    fn marglik_reference_evaluates_the_fitted_t() {
        // Draws with mean 1 and variance 4 on (0, inf) after the log transform: the t reference
        // has the sample mean, a scale matching the covariance, and its own density values.
        let n = 2000;
        let u: Vec<f64> = (0..n)
            .map(|i| 1.0 + 2.0 * ((i as f64 + 0.5) / n as f64 * 12.0).sin())
            .collect();
        let x: Vec<f64> = u.iter().map(|v| v.exp()).collect();
        let bounds = [Bounds::new(0.0, f64::INFINITY).unwrap()];
        let df = 5.0;
        let m = marglik_reference(
            &x,
            n,
            &x[..10],
            10,
            &bounds,
            &ReferenceOptions {
                family: "t",
                df,
                n_ref: 300,
                seed: 4,
                shrink: false,
                stop: None,
            },
        )
        .unwrap();
        let (mean, cov) = mean_cov(&u, n, 1).unwrap();
        assert!((m.mean[0] - mean[0]).abs() < 1e-12 && (m.cov[0] - cov[0]).abs() < 1e-12);
        let t = Reference::student_t(mean.clone(), &[cov[0] * (df - 2.0) / df], df).unwrap();
        let want = t.log_density(&u[..10], 10).unwrap();
        for i in 0..10 {
            assert!((m.est_logref[i] - want[i]).abs() < 1e-12);
            assert!((m.est_logjac[i] - u[i]).abs() < 1e-12, "log |dx/du| = u on (0, inf)");
        }
        assert_eq!(m.ref_draws.len(), 300);
        assert!(m.ref_draws.iter().all(|&v| v > 0.0));
        for i in 0..300 {
            assert!((m.ref_logjac[i] - m.ref_draws[i].ln()).abs() < 1e-9);
        }
        assert!(marglik_reference(
            &x,
            n,
            &x,
            n,
            &bounds,
            &ReferenceOptions {
                family: "cauchy",
                df: 1.0,
                n_ref: 1,
                seed: 1,
                shrink: false,
                stop: None,
            }
        )
        .is_err());
    }
}
