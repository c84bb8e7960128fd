//! A variational family built from the model itself ("ghk"), and the fit of (K, c) with it.
//!
//! For a row with missing set m (size p) and observed set o, the posterior of z = x_m under
//! phi(x) = exp(-x'Kx/2 - c) on the positive orthant is N(mu, A^{-1}) truncated to z > 0, with
//! A = K_mm and mu = -A^{-1} K_mo x_o. Its normaliser is an orthant probability without closed
//! form; q is the proposal of the GHK simulator (Geweke, Hajivassiliou, Keane): with A^{-1} = L L',
//! z = mu + L e and e_j drawn in turn from N(0, 1) truncated so that z_j > 0 (probability P_j).
//! Then phi(x_o, z) / q(z) = exp(-x_o'K_oo x_o / 2 + mu'A mu / 2 - c) (2 pi)^{p/2} |L| prod_j P_j:
//! bounded importance weights, where a lognormal q (density zero at z = 0, where this posterior
//! need not vanish) gives weights of infinite variance in the noise term.
//!
//! The family has no parameters of its own: it moves with K. Its draws come from fixed base
//! draws by inversion (common random numbers), so J(theta, q_theta) is a smooth deterministic
//! function of theta = (K, c), maximised by L-BFGS with the exact gradient, which runs backwards
//! through the GHK recursion, mu = -A^{-1} b and the Cholesky factor of A^{-1}.

use super::fit::FitReport;
use super::objective::draw_weights;
use super::problem::{Row, TgmVnce, CHUNK};
use crate::error::{NceError, Result};
use crate::linalg::{chol_inverse, cholesky, LN_2PI};
use crate::optim::{minimise_lbfgs, LbfgsControl, Objective};
use crate::rng::stream_rng;
use crate::sampling::truncnorm::{log_cdf, log_phi, quantile_log};
use nalgebra::DMatrix;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

/// Per-row work space of the GHK recursion (sized for d missing values and S draws).
struct GhkScratch {
    /// A = K_mm, then its Cholesky factor.
    a: Vec<f64>,
    w: Vec<f64>,
    /// Sigma = A^{-1}.
    sigma: Vec<f64>,
    /// L, the Cholesky factor of Sigma, and L^{-1}.
    l: Vec<f64>,
    linv: Vec<f64>,
    mu: Vec<f64>,
    b: Vec<f64>,
    /// Per draw (draw-major, S x p): t_j, e_j, log P_j and z_j.
    t: Vec<f64>,
    e: Vec<f64>,
    lp: Vec<f64>,
    haz: Vec<f64>,
    z: Vec<f64>,
    /// Backward pass: adjoints of e (one draw), mu, L (p x p), Sigma and b.
    eb: Vec<f64>,
    mub: Vec<f64>,
    lb: Vec<f64>,
    sb: Vec<f64>,
    bb: Vec<f64>,
    m1: Vec<f64>,
}

impl GhkScratch {
    fn new(d: usize, s: usize) -> Self {
        // Grouped by size: d x d matrices, d-vectors, and S x d per-draw values.
        let [a, w, sigma, l, linv, lb, sb, m1] = std::array::from_fn(|_| vec![0.0; d * d]);
        let [mu, b, eb, mub, bb] = std::array::from_fn(|_| vec![0.0; d]);
        let [t, e, lp, haz, z] = std::array::from_fn(|_| vec![0.0; s * d]);
        GhkScratch {
            a,
            w,
            sigma,
            l,
            linv,
            mu,
            b,
            t,
            e,
            lp,
            haz,
            z,
            eb,
            mub,
            lb,
            sb,
            bb,
            m1,
        }
    }
}

/// A row as the GHK passes read it: its values `x` (NaN where missing), the indices of its
/// observed and missing values, and its base uniforms in log space (draw-major).
#[derive(Clone, Copy)]
struct GhkRow<'a> {
    x: &'a [f64],
    obs: &'a [usize],
    mis: &'a [usize],
    log_u: &'a [f64],
}

/// Forward GHK pass for a row with observed values `x` (NaN where missing): fills the scratch
/// (Sigma, L, mu, b and per draw t, e, log P_j, the hazard phi(r_j) / Phi(r_j) of r_j = t_j / L_jj,
/// and z) and returns the part of
/// log phi(x_o, z) - log q(z) that is the same for every draw, without -c:
/// -x_o'K_oo x_o / 2 + b'Sigma b / 2 + p log(2 pi) / 2 + log|L|.
/// `log_u` holds S x p base uniforms in log space (draw-major); `k` is K row-major. None when K_mm
/// is not positive definite.
fn ghk_forward(k: &[f64], d: usize, row: &GhkRow, s_n: usize, sc: &mut GhkScratch) -> Option<f64> {
    let GhkRow { x, obs, mis, log_u } = *row;
    let p = mis.len();
    for i in 0..p {
        for j in 0..p {
            sc.a[i * p + j] = k[mis[i] * d + mis[j]];
        }
    }
    if !cholesky(&mut sc.a[..p * p], p) {
        return None;
    }
    chol_inverse(&sc.a[..p * p], p, &mut sc.w[..p * p], &mut sc.sigma[..p * p]);
    sc.l[..p * p].copy_from_slice(&sc.sigma[..p * p]);
    if !cholesky(&mut sc.l[..p * p], p) {
        return None;
    }
    for i in 0..p {
        for j in i + 1..p {
            sc.l[i * p + j] = 0.0;
        }
    }
    for i in 0..p {
        sc.b[i] = obs.iter().map(|&o| k[mis[i] * d + o] * x[o]).sum();
    }
    for i in 0..p {
        sc.mu[i] = -(0..p).map(|j| sc.sigma[i * p + j] * sc.b[j]).sum::<f64>();
    }
    let mut q_oo = 0.0;
    for &a in obs {
        q_oo += x[a] * obs.iter().map(|&o| k[a * d + o] * x[o]).sum::<f64>();
    }
    let b_sigma_b = -(0..p).map(|i| sc.b[i] * sc.mu[i]).sum::<f64>();
    let l = &sc.l[..p * p];
    let log_det_l: f64 = (0..p).map(|j| l[j * p + j].ln()).sum();
    for s in 0..s_n {
        let o = s * p;
        for j in 0..p {
            let t = sc.mu[j] + (0..j).map(|m| l[j * p + m] * sc.e[o + m]).sum::<f64>();
            let ljj = l[j * p + j];
            // e_j > -t / L_jj with probability P_j = Phi(t / L_jj); -e_j = Phi^{-1}(u_j P_j).
            let r = t / ljj;
            let lpj = log_cdf(r);
            let ej = (-quantile_log(log_u[o + j] + lpj)).max(-r);
            sc.t[o + j] = t;
            sc.e[o + j] = ej;
            sc.lp[o + j] = lpj;
            sc.haz[o + j] = (log_phi(r) - lpj).exp();
            sc.z[o + j] = (t + ljj * ej).max(0.0);
        }
    }
    Some(-0.5 * q_oo + 0.5 * b_sigma_b + 0.5 * p as f64 * LN_2PI + log_det_l)
}

/// Backward pass for a row after `ghk_forward`: given the weights w_s = dJ/dh_s of its draws
/// (h_s = const + sum_j log P_j), adds dJ/dK (as a full d x d matrix treating the entries as
/// free; the caller symmetrises) into `g`.
fn ghk_backward(d: usize, row: &GhkRow, w: &[f64], sc: &mut GhkScratch, g: &mut [f64]) {
    let GhkRow { x, obs, mis, log_u } = *row;
    let p = mis.len();
    let wsum: f64 = w.iter().sum();
    sc.mub[..p].iter_mut().for_each(|v| *v = 0.0);
    sc.lb[..p * p].iter_mut().for_each(|v| *v = 0.0);
    let l = &sc.l[..p * p];
    for (s, &ws) in w.iter().enumerate() {
        let o = s * p;
        sc.eb[..p].iter_mut().for_each(|v| *v = 0.0);
        for j in (0..p).rev() {
            let ej = sc.e[o + j];
            // -e_j = Phi^{-1}(u_j P_j): d e_j / d log P_j = -Phi(-e_j) / phi(e_j) = -u_j P_j / phi(e_j).
            let de = -(log_u[o + j] + sc.lp[o + j] - log_phi(ej)).exp();
            let hl = 1.0 + sc.eb[j] * de;
            let r = sc.t[o + j] / l[j * p + j];
            let rb = hl * sc.haz[o + j];
            let ljj = l[j * p + j];
            let tb = rb / ljj;
            sc.lb[j * p + j] -= ws * rb * r / ljj;
            sc.mub[j] += ws * tb;
            for m in 0..j {
                sc.eb[m] += tb * l[j * p + m];
                sc.lb[j * p + m] += ws * tb * sc.e[o + m];
            }
        }
    }
    // log|L| in the constant.
    for j in 0..p {
        sc.lb[j * p + j] += wsum / l[j * p + j];
    }
    // Back through L = chol(Sigma): Sigma_bar = sym(L^{-T} Phi(L' L_bar) L^{-1}), Phi = lower
    // triangle with half the diagonal.
    let mut li = std::mem::take(&mut sc.linv);
    let mut scratch_inv = std::mem::take(&mut sc.m1);
    chol_inverse(l, p, &mut li[..p * p], &mut scratch_inv[..p * p]);
    // m1 = Phi(L' L_bar)
    for i in 0..p {
        for j in 0..=i {
            let mut v: f64 = (i..p).map(|k| l[k * p + i] * sc.lb[k * p + j]).sum();
            if i == j {
                v *= 0.5;
            }
            scratch_inv[i * p + j] = v;
        }
        for j in i + 1..p {
            scratch_inv[i * p + j] = 0.0;
        }
    }
    // sb = L^{-T} m1 L^{-1}: first w = m1 L^{-1}, then L^{-T} w.
    for i in 0..p {
        for j in 0..p {
            sc.w[i * p + j] = (j..p).map(|k| scratch_inv[i * p + k] * li[k * p + j]).sum();
        }
    }
    for i in 0..p {
        for j in 0..p {
            sc.sb[i * p + j] = (i..p).map(|k| li[k * p + i] * sc.w[k * p + j]).sum();
        }
    }
    sc.linv = li;
    sc.m1 = scratch_inv;
    // Symmetrise, and add mu = -Sigma b and b'Sigma b / 2 (times the sum of weights).
    for i in 0..p {
        for j in 0..=i {
            let v = 0.5 * (sc.sb[i * p + j] + sc.sb[j * p + i]) - 0.5 * (sc.mub[i] * sc.b[j] + sc.b[i] * sc.mub[j])
                + 0.5 * wsum * sc.b[i] * sc.b[j];
            sc.sb[i * p + j] = v;
            sc.sb[j * p + i] = v;
        }
    }
    for i in 0..p {
        sc.bb[i] = -(0..p).map(|j| sc.sigma[i * p + j] * sc.mub[j]).sum::<f64>() - wsum * sc.mu[i];
    }
    // A_bar = -Sigma Sigma_bar Sigma into K_mm; b = K_mo x_o; -x_o'K_oo x_o / 2.
    for i in 0..p {
        for j in 0..p {
            sc.w[i * p + j] = (0..p).map(|k| sc.sigma[i * p + k] * sc.sb[k * p + j]).sum();
        }
    }
    for i in 0..p {
        for j in 0..p {
            let v: f64 = (0..p).map(|k| sc.w[i * p + k] * sc.sigma[k * p + j]).sum();
            g[mis[i] * d + mis[j]] -= v;
        }
    }
    for i in 0..p {
        for &o in obs {
            g[mis[i] * d + o] += sc.bb[i] * x[o];
        }
    }
    for &a in obs {
        for &b in obs {
            g[a * d + b] -= 0.5 * wsum * x[a] * x[b];
        }
    }
}

/// Number of packed theta parameters (K upper triangle row by row, then c).
pub fn n_theta(d: usize) -> usize {
    d * (d + 1) / 2 + 1
}

fn pack_theta(k: &DMatrix<f64>, c: f64) -> Vec<f64> {
    let d = k.nrows();
    let mut out = Vec::with_capacity(n_theta(d));
    for j in 0..d {
        for l in j..d {
            out.push(k[(j, l)]);
        }
    }
    out.push(c);
    out
}

fn unpack_theta(d: usize, x: &[f64]) -> (DMatrix<f64>, f64) {
    let mut k = DMatrix::zeros(d, d);
    let mut it = 0;
    for j in 0..d {
        for l in j..d {
            k[(j, l)] = x[it];
            k[(l, j)] = x[it];
            it += 1;
        }
    }
    (k, x[it])
}

/// Per-chunk sums: J and dJ/dK (full d x d) and dJ/dc.
struct GhkAcc {
    value: f64,
    g: Vec<f64>,
    gc: f64,
}

impl TgmVnce {
    /// J(theta, q_theta) with the GHK family, and its gradient wrt theta = (K upper triangle row
    /// by row, c). The value is -inf where some row's K_mm is not positive definite.
    pub fn ghk_objective(&self, k: &DMatrix<f64>, c: f64) -> Result<(f64, Vec<f64>)> {
        let d = self.d;
        if k.nrows() != d || k.ncols() != d {
            return Err(NceError::invalid("K", format!("must be {d} x {d}")));
        }
        let kf: Vec<f64> = (0..d * d).map(|i| k[(i / d, i % d)]).collect();
        let parts: Vec<GhkAcc> = self
            .rows
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut acc = GhkAcc {
                    value: 0.0,
                    g: vec![0.0; d * d],
                    gc: 0.0,
                };
                let mut sc = GhkScratch::new(d, self.s);
                let mut h = vec![0.0; self.s];
                for row in chunk {
                    self.ghk_row_terms(&kf, c, row, &mut acc, &mut sc, &mut h);
                }
                acc
            })
            .collect();
        let mut g_full = vec![0.0; d * d];
        let (mut value, mut gc) = (0.0, 0.0);
        for p in &parts {
            value += p.value;
            gc += p.gc;
            for (a, b) in g_full.iter_mut().zip(&p.g) {
                *a += b;
            }
        }
        let sc = 1.0 / self.n as f64;
        let mut g = Vec::with_capacity(n_theta(d));
        for j in 0..d {
            g.push(g_full[j * d + j] * sc);
            for l in j + 1..d {
                g.push((g_full[j * d + l] + g_full[l * d + j]) * sc);
            }
        }
        g.push(gc * sc);
        Ok((value * sc, g))
    }

    /// Each row's term of the gradient of n J (not divided by n) wrt theta = (K upper triangle row
    /// by row, c), row-major (n + m) x n_theta with the data rows first: the per-row scores of the
    /// sandwich (se.rs).
    pub fn ghk_row_scores(&self, k: &DMatrix<f64>, c: f64) -> Result<Vec<f64>> {
        let d = self.d;
        if k.nrows() != d || k.ncols() != d {
            return Err(NceError::invalid("K", format!("must be {d} x {d}")));
        }
        let kf: Vec<f64> = (0..d * d).map(|i| k[(i / d, i % d)]).collect();
        let nt = n_theta(d);
        let parts: Vec<Vec<f64>> = self
            .rows
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut out = Vec::with_capacity(chunk.len() * nt);
                let mut sc = GhkScratch::new(d, self.s);
                let mut h = vec![0.0; self.s];
                for row in chunk {
                    let mut acc = GhkAcc {
                        value: 0.0,
                        g: vec![0.0; d * d],
                        gc: 0.0,
                    };
                    self.ghk_row_terms(&kf, c, row, &mut acc, &mut sc, &mut h);
                    for j in 0..d {
                        out.push(acc.g[j * d + j]);
                        for l in j + 1..d {
                            out.push(acc.g[j * d + l] + acc.g[l * d + j]);
                        }
                    }
                    out.push(acc.gc);
                }
                out
            })
            .collect();
        Ok(parts.concat())
    }

    /// Sandwich covariance of the GHK-family estimate (K, c) in the packing order of theta (se.rs).
    pub fn ghk_vcov(&self, k: &DMatrix<f64>, c: f64) -> Result<DMatrix<f64>> {
        let d = self.d;
        let x = pack_theta(k, c);
        let n = self.n as f64;
        let grad = |th: &[f64]| -> Result<Vec<f64>> {
            let (kk, cc) = unpack_theta(d, th);
            let (v, g) = self.ghk_objective(&kk, cc)?;
            if !v.is_finite() {
                return Err(NceError::Numerical(
                    "the objective is not finite next to the estimate (some row's K_mm is not positive definite)"
                        .to_string(),
                ));
            }
            Ok(g.into_iter().map(|v| v * n).collect())
        };
        let h = super::se::hessian_by_differences(&x, 1e-5, &grad)?;
        let scores = self.ghk_row_scores(k, c)?;
        let v = self.meat(&scores, n_theta(d))?;
        super::se::sandwich(&h, &v)
    }

    fn ghk_row_terms(&self, kf: &[f64], c: f64, row: &Row, acc: &mut GhkAcc, sc: &mut GhkScratch, h: &mut [f64]) {
        let d = self.d;
        let off = self.log_nu + row.lp;
        if row.mis.is_empty() {
            let x = &row.x;
            let q: f64 = (0..d)
                .map(|a| x[a] * (0..d).map(|b| kf[a * d + b] * x[b]).sum::<f64>())
                .sum();
            h[0] = -0.5 * q - c;
            acc.value += draw_weights(&mut h[..1], row.noise, off);
            for a in 0..d {
                for b in 0..d {
                    acc.g[a * d + b] -= 0.5 * h[0] * x[a] * x[b];
                }
            }
            acc.gc -= h[0];
            return;
        }
        let Some(konst) = ghk_forward(
            kf,
            d,
            &GhkRow {
                x: &row.x,
                obs: &row.obs,
                mis: &row.mis,
                log_u: &row.log_u,
            },
            self.s,
            sc,
        ) else {
            acc.value = f64::NEG_INFINITY;
            return;
        };
        let p = row.mis.len();
        for (s, hs) in h.iter_mut().enumerate() {
            *hs = konst - c + sc.lp[s * p..(s + 1) * p].iter().sum::<f64>();
        }
        acc.value += draw_weights(h, row.noise, off);
        acc.gc -= h.iter().sum::<f64>();
        ghk_backward(
            d,
            &GhkRow {
                x: &row.x,
                obs: &row.obs,
                mis: &row.mis,
                log_u: &row.log_u,
            },
            h,
            sc,
            &mut acc.g,
        );
    }
}

/// L-BFGS view of the GHK fit: minimise -J over theta. Where some row's K_mm is not positive
/// definite (its GHK draws do not exist) the value is infinite and the line search backs off; K
/// itself need not be positive definite (phi is integrable on the orthant for copositive K), as
/// in NCE without missing values.
struct GhkProblem<'a>(&'a TgmVnce);

impl Objective for GhkProblem<'_> {
    fn dim(&self) -> usize {
        n_theta(self.0.d)
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        let (k, c) = unpack_theta(self.0.d, x);
        let (j, g) = self.0.ghk_objective(&k, c)?;
        for (a, b) in grad.iter_mut().zip(&g) {
            *a = -b;
        }
        Ok(-j)
    }
}

#[derive(Debug, Clone)]
pub struct GhkFit {
    pub k: DMatrix<f64>,
    pub c: f64,
    pub report: FitReport,
}

/// Maximise J(theta, q_theta) with the GHK family from (k0, c0) (K0 positive definite).
/// `interrupt` is polled once per L-BFGS iteration.
pub fn fit_ghk(
    pr: &TgmVnce,
    k0: &DMatrix<f64>,
    c0: f64,
    ctrl: &LbfgsControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<GhkFit> {
    let d = pr.d;
    if k0.nrows() != d || k0.ncols() != d {
        return Err(NceError::invalid("start", format!("K must be {d} x {d}")));
    }
    if nalgebra::Cholesky::new(k0.clone()).is_none() {
        return Err(NceError::invalid("start", "K is not positive definite"));
    }
    if !c0.is_finite() {
        return Err(NceError::invalid("start", "c must be finite"));
    }
    let x0 = pack_theta(k0, c0);
    let obj = GhkProblem(pr);
    let mut g0 = vec![0.0; x0.len()];
    if !obj.value_grad(&x0, &mut g0)?.is_finite() {
        return Err(NceError::invalid(
            "start",
            "the objective is not finite at the starting values",
        ));
    }
    let r = minimise_lbfgs(&obj, &x0, ctrl, interrupt)?;
    let (k, c) = unpack_theta(d, &r.x);
    Ok(GhkFit {
        k,
        c,
        report: FitReport::from_minimum(&r),
    })
}

/// Posterior means of the missing values (NaN) of `x` (n x d, column-major) under the model with
/// precision K, by self-normalised GHK importance sampling with `n_draws` draws per row (stream
/// per row of `seed`). Returns x with the missing values filled, column-major.
pub fn ghk_impute(x: &[f64], n: usize, d: usize, k: &DMatrix<f64>, n_draws: usize, seed: u64) -> Result<Vec<f64>> {
    if x.len() != n * d {
        return Err(NceError::invalid(
            "x",
            format!("has {} values, expected {n} x {d}", x.len()),
        ));
    }
    if k.nrows() != d || k.ncols() != d {
        return Err(NceError::invalid("K", format!("must be {d} x {d}")));
    }
    if n_draws == 0 {
        return Err(NceError::invalid("n_draws", "must be at least 1"));
    }
    let kf: Vec<f64> = (0..d * d).map(|i| k[(i / d, i % d)]).collect();
    let rows: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut row: Vec<f64> = (0..d).map(|j| x[j * n + i]).collect();
            let mis: Vec<usize> = (0..d).filter(|&j| row[j].is_nan()).collect();
            if mis.is_empty() {
                return Ok(row);
            }
            let obs: Vec<usize> = (0..d).filter(|&j| !row[j].is_nan()).collect();
            let mut rng = stream_rng(seed, i as u64);
            let p = mis.len();
            let log_u: Vec<f64> = (0..n_draws * p)
                .map(|_| log_cdf(StandardNormal.sample(&mut rng)))
                .collect();
            let mut sc = GhkScratch::new(d, n_draws);
            if ghk_forward(
                &kf,
                d,
                &GhkRow {
                    x: &row,
                    obs: &obs,
                    mis: &mis,
                    log_u: &log_u,
                },
                n_draws,
                &mut sc,
            )
            .is_none()
            {
                return Err(NceError::Numerical(format!(
                    "K restricted to the missing values of row {} is not positive definite",
                    i + 1
                )));
            }
            // Self-normalised importance weights phi / q, proportional to prod_j P_j.
            let logp: Vec<f64> = (0..n_draws).map(|s| sc.lp[s * p..(s + 1) * p].iter().sum()).collect();
            let lmax = logp.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = logp.iter().map(|v| (v - lmax).exp()).collect();
            let wsum: f64 = w.iter().sum();
            for (jj, &m) in mis.iter().enumerate() {
                row[m] = (0..n_draws).map(|s| w[s] * sc.z[s * p + jj]).sum::<f64>() / wsum;
            }
            Ok(row)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut out = vec![0.0; n * d];
    for (i, row) in rows.iter().enumerate() {
        for j in 0..d {
            out[j * n + i] = row[j];
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::vnce::VnceSamples;
    use crate::sampling::truncnorm::log_upper_tail;

    fn kmat() -> DMatrix<f64> {
        DMatrix::from_row_slice(
            4,
            4,
            &[
                1.5, 0.4, -0.3, 0.1, 0.4, 2.0, 0.2, -0.2, -0.3, 0.2, 1.2, 0.3, 0.1, -0.2, 0.3, 1.8,
            ],
        )
    }

    fn flat(k: &DMatrix<f64>) -> Vec<f64> {
        let d = k.nrows();
        (0..d * d).map(|i| k[(i / d, i % d)]).collect()
    }

    fn base(p: usize, s: usize, seed: u64) -> Vec<f64> {
        let mut rng = stream_rng(seed, 0);
        (0..s * p).map(|_| log_cdf(StandardNormal.sample(&mut rng))).collect()
    }

    /// With one missing value the GHK weight is exact: log phi(x_o, z) - log q(z) is the same for
    /// every draw and equals the closed-form log marginal.
    #[test]
    fn one_missing_value_gives_the_exact_marginal() {
        let k = kmat();
        let x = [0.7, f64::NAN, 1.1, 0.4];
        let mut sc = GhkScratch::new(4, 5);
        let konst = ghk_forward(
            &flat(&k),
            4,
            &GhkRow {
                x: &x,
                obs: &[0, 2, 3],
                mis: &[1],
                log_u: &base(1, 5, 3),
            },
            5,
            &mut sc,
        )
        .unwrap();
        // int_0^inf exp(-x'Kx/2) dz with a = K_11 and b = sum_o K_1o x_o.
        let (a, b) = (2.0, 0.4 * 0.7 + 0.2 * 1.1 - 0.2 * 0.4);
        let xo = [0.7, 1.1, 0.4];
        let ko = [[1.5, -0.3, 0.1], [-0.3, 1.2, 0.3], [0.1, 0.3, 1.8]];
        let qoo: f64 = (0..3)
            .map(|i| (0..3).map(|j| xo[i] * ko[i][j] * xo[j]).sum::<f64>())
            .sum();
        let exact =
            -0.5 * qoo + b * b / (2.0 * a) + 0.5 * (2.0 * std::f64::consts::PI / a).ln() + log_upper_tail(b / a.sqrt());
        for s in 0..5 {
            assert!(sc.z[s] > 0.0);
            assert!(
                (konst + sc.lp[s] - exact).abs() < 1e-12,
                "draw {s}: {} vs {exact}",
                konst + sc.lp[s]
            );
        }
    }

    /// With several missing values, h_s = const + sum_j log P_j equals log phi(x_o, z_s) - log q(z_s)
    /// computed directly from the draw (q(z) = prod_j N(e_j) / P_j / |L|).
    #[test]
    fn weights_equal_phi_over_q_at_the_draws() {
        let k = kmat();
        let x = [f64::NAN, 0.9, f64::NAN, f64::NAN];
        let (mis, obs) = ([0usize, 2, 3], [1usize]);
        let mut sc = GhkScratch::new(4, 7);
        let konst = ghk_forward(
            &flat(&k),
            4,
            &GhkRow {
                x: &x,
                obs: &obs,
                mis: &mis,
                log_u: &base(3, 7, 5),
            },
            7,
            &mut sc,
        )
        .unwrap();
        let log_det_l: f64 = (0..3).map(|j| sc.l[j * 3 + j].ln()).sum();
        for s in 0..7 {
            let mut xf = x;
            for (i, &m) in mis.iter().enumerate() {
                xf[m] = sc.z[s * 3 + i];
                assert!(xf[m] >= 0.0);
            }
            let q: f64 = (0..4)
                .map(|i| (0..4).map(|j| xf[i] * k[(i, j)] * xf[j]).sum::<f64>())
                .sum();
            let logq: f64 = (0..3).map(|j| log_phi(sc.e[s * 3 + j]) - sc.lp[s * 3 + j]).sum::<f64>() - log_det_l;
            let h = konst + sc.lp[s * 3..s * 3 + 3].iter().sum::<f64>();
            assert!(
                (-0.5 * q - logq - h).abs() < 1e-10,
                "draw {s}: {} vs {h}",
                -0.5 * q - logq
            );
        }
    }

    fn small_problem(s: usize) -> TgmVnce {
        let (n, d) = (25, 4);
        let mut rng = stream_rng(11, 1);
        let mut x: Vec<f64> = (0..n * d)
            .map(|_| 0.2 + rand::Rng::gen::<f64>(&mut rng) * 1.5)
            .collect();
        let mut y: Vec<f64> = (0..n * d)
            .map(|_| 0.1 + rand::Rng::gen::<f64>(&mut rng) * 2.0)
            .collect();
        for i in 0..n {
            for j in 0..d {
                // Every pattern size from none to all but one missing.
                if (i + 3 * j) % 5 < i % 4 {
                    x[j * n + i] = f64::NAN;
                    y[j * n + i] = f64::NAN;
                }
            }
        }
        let lpx: Vec<f64> = (0..n).map(|i| -1.0 - 0.05 * i as f64).collect();
        let lpy: Vec<f64> = (0..n).map(|i| -1.5 + 0.03 * i as f64).collect();
        TgmVnce::new(
            &VnceSamples {
                x: &x,
                n,
                d,
                y: &y,
                m: n,
                lpx: &lpx,
                lpy: &lpy,
            },
            s,
            9,
        )
        .unwrap()
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let pr = small_problem(6);
        let k = kmat();
        let x0 = pack_theta(&k, 0.3);
        let (j0, g) = pr.ghk_objective(&k, 0.3).unwrap();
        assert!(j0.is_finite());
        let h = 1e-6;
        for i in 0..x0.len() {
            let (mut xp, mut xm) = (x0.clone(), x0.clone());
            xp[i] += h;
            xm[i] -= h;
            let (kp, cp) = unpack_theta(4, &xp);
            let (km, cm) = unpack_theta(4, &xm);
            let fd = (pr.ghk_objective(&kp, cp).unwrap().0 - pr.ghk_objective(&km, cm).unwrap().0) / (2.0 * h);
            assert!(
                (fd - g[i]).abs() < 1e-7 * (1.0 + fd.abs()),
                "parameter {i}: analytic {} vs fd {fd}",
                g[i]
            );
        }
    }

    #[test]
    fn fit_is_thread_invariant_and_imputation_fills_positive_means() {
        let pr = small_problem(5);
        let k0 = DMatrix::identity(4, 4);
        let ctrl = LbfgsControl {
            maxit: 300,
            ..Default::default()
        };
        let f1 =
            crate::engine::design::with_threads(1, || fit_ghk(&pr, &k0, 0.0, &ctrl, &mut || false).unwrap()).unwrap();
        let f2 =
            crate::engine::design::with_threads(2, || fit_ghk(&pr, &k0, 0.0, &ctrl, &mut || false).unwrap()).unwrap();
        assert_eq!(f1.k, f2.k);
        assert!(f1.report.objective.is_finite() && f1.report.grad_norm < 1e-3, "{f1:?}");
        // Rows (0.5, 1.0, NA) and (NA, 0.2, NA), column-major.
        let x = [0.5, f64::NAN, 1.0, 0.2, f64::NAN, f64::NAN];
        let k3 = DMatrix::from_row_slice(3, 3, &[1.0, 0.3, 0.0, 0.3, 1.0, 0.2, 0.0, 0.2, 1.0]);
        let filled = ghk_impute(&x, 2, 3, &k3, 20_000, 4).unwrap();
        assert_eq!((filled[0], filled[2], filled[3]), (0.5, 1.0, 0.2));
        assert!(filled.iter().all(|v| v.is_finite() && *v > 0.0));
        // Row 1's missing value given the others: N(m, 1) truncated at 0 with m = -0.2, mean
        // m + phi(m) / Phi(m); 20,000 exact draws (sd < 0.7) put the average within 0.015.
        let m: f64 = -0.2;
        let mean = m + (log_phi(m) - log_cdf(m)).exp();
        assert!((filled[4] - mean).abs() < 0.015, "{} vs {mean}", filled[4]);
    }
}
