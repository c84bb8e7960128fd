//! The VNCE objective J(theta, alpha) (Rhodes & Gutmann, eq. 13, with Monte Carlo averages over
//! fixed reparametrised draws) and its exact gradient.
//!
//! For a row with missing set m and observed set o, q(u_m | u_o) is the Gaussian conditional of
//! u = log x ~ N(mu, Lambda^{-1}): precision A = Lambda_mm, mean m_c = mu_m - A^{-1} Lambda_mo d_o
//! (d_o = u_o - mu_o). With e = T eps, u_m = m_c + A^{-1} e_m is an exact conditional draw whose
//! log density is -|m|/2 log 2pi + log|A|/2 - e_m' A^{-1} e_m / 2. Each (row, draw) enters through
//! h = l(x) - log q_x(z) = l(x) - log q_u(u_m) + sum(u_m); its gradient is accumulated as
//! gradients wrt mu, wrt Lambda (a general matrix Gbar) and wrt e (sum of ebar eps'), mapped to
//! T once per evaluation: grad_T = lower((Gbar + Gbar') T + sum ebar eps').

use super::params::{n_params, TgmParams};
use super::problem::{Row, TgmVnce, CHUNK};
use crate::engine::family::{sigmoid, softplus};
use crate::error::Result;
use crate::linalg::{chol_inverse, cholesky, LN_2PI};
use crate::optim::Objective;
use rayon::prelude::*;

/// Which rows enter the objective (tests check the data and noise terms separately).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terms {
    Data,
    Noise,
    Both,
}

#[inline]
fn log_sigmoid(a: f64) -> f64 {
    -softplus(-a)
}

/// A row's contribution to J from the values h_s = l(x_s) - log q(z_s) of its S draws (data rows:
/// the average of log sigmoid(h_s - off); noise rows: log sigmoid(-(b - off)) with b the log of
/// the importance-sampling estimate of phi), with h overwritten by the weights dJ/dh_s.
pub(super) fn draw_weights(h: &mut [f64], noise: bool, off: f64) -> f64 {
    let s_n = h.len();
    if noise {
        let hmax = h.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let se: f64 = h.iter().map(|v| (v - hmax).exp()).sum();
        let b = hmax + se.ln() - (s_n as f64).ln();
        let g = -sigmoid(b - off);
        for v in h.iter_mut() {
            *v = g * (*v - hmax).exp() / se;
        }
        log_sigmoid(-(b - off))
    } else {
        let inv_s = 1.0 / s_n as f64;
        let mut value = 0.0;
        for v in h.iter_mut() {
            let a = *v - off;
            value += inv_s * log_sigmoid(a);
            *v = inv_s * sigmoid(-a);
        }
        value
    }
}

/// Gradient wrt the packed theta = (K upper triangle row by row, c) from the sums of w x x'
/// (upper triangle of `xx`) and of w, scaled by `sc`.
pub(super) fn theta_grad(d: usize, xx: &[f64], wsum: f64, sc: f64, g: &mut Vec<f64>) {
    for j in 0..d {
        g.push(-0.5 * xx[j * d + j] * sc);
        for k in j + 1..d {
            g.push(-xx[j * d + k] * sc);
        }
    }
    g.push(-wsum * sc);
}

/// Parameters laid out flat (row-major) for the inner loops.
struct Flat {
    d: usize,
    k: Vec<f64>,
    c: f64,
    mu: Vec<f64>,
    t: Vec<f64>,
    lam: Vec<f64>,
}

impl Flat {
    fn new(p: &TgmParams) -> Self {
        let d = p.dim();
        let lam_m = p.precision();
        let rm = |m: &nalgebra::DMatrix<f64>| (0..d * d).map(|i| m[(i / d, i % d)]).collect::<Vec<f64>>();
        Flat {
            d,
            k: rm(&p.k),
            c: p.c,
            mu: p.mu.clone(),
            t: rm(&p.t),
            lam: rm(&lam_m),
        }
    }
}

/// Per-chunk sums: objective, weighted x x' (upper triangle), sum of weights (for c), and the
/// gradients wrt mu, Lambda (Gbar) and the sum of ebar eps' (lower triangle).
pub(super) struct Acc {
    pub(super) value: f64,
    pub(super) xx: Vec<f64>,
    pub(super) wsum: f64,
    gmu: Vec<f64>,
    gbar: Vec<f64>,
    ee: Vec<f64>,
}

impl Acc {
    pub(super) fn new(d: usize) -> Self {
        Acc {
            value: 0.0,
            xx: vec![0.0; d * d],
            wsum: 0.0,
            gmu: vec![0.0; d],
            gbar: vec![0.0; d * d],
            ee: vec![0.0; d * d],
        }
    }

    pub(super) fn add(&mut self, o: &Acc) {
        self.value += o.value;
        self.wsum += o.wsum;
        for (a, b) in [
            (&mut self.xx, &o.xx),
            (&mut self.gmu, &o.gmu),
            (&mut self.gbar, &o.gbar),
            (&mut self.ee, &o.ee),
        ] {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }

    /// x x' weighted by w (upper triangle) and w into the sum for c.
    #[inline]
    pub(super) fn add_theta(&mut self, d: usize, x: &[f64], w: f64) {
        self.wsum += w;
        for j in 0..d {
            let wx = w * x[j];
            let row = &mut self.xx[j * d..(j + 1) * d];
            for k in j..d {
                row[k] += wx * x[k];
            }
        }
    }
}

/// Index of the upper-triangle entry for the unordered pair (a, b).
#[inline]
fn sym(a: usize, b: usize, d: usize) -> usize {
    if a <= b {
        a * d + b
    } else {
        b * d + a
    }
}

/// l(x) = -x'Kx/2 - c, with Kx written to `kx`.
#[inline]
fn log_phi(f: &Flat, x: &[f64], kx: &mut [f64]) -> f64 {
    let d = f.d;
    let mut q = 0.0;
    for j in 0..d {
        let row = &f.k[j * d..(j + 1) * d];
        let mut s = 0.0;
        for k in 0..d {
            s += row[k] * x[k];
        }
        kx[j] = s;
        q += s * x[j];
    }
    -0.5 * q - f.c
}

/// Scratch space for one chunk.
struct Scratch {
    a: Vec<f64>,
    w: Vec<f64>,
    ainv: Vec<f64>,
    d_o: Vec<f64>,
    mc: Vec<f64>,
    e: Vec<f64>,
    kx: Vec<f64>,
    kxo: Vec<f64>,
    zs: Vec<f64>,
    zbar: Vec<f64>,
    us: Vec<f64>,
    kappas: Vec<f64>,
    gls: Vec<f64>,
    h: Vec<f64>,
    v: Vec<f64>,
    vsum: Vec<f64>,
}

impl Scratch {
    fn new(d: usize, s: usize) -> Self {
        // Grouped by size: d x d matrices, d-vectors, S x d per-draw values and S-vectors.
        let [a, w, ainv] = std::array::from_fn(|_| vec![0.0; d * d]);
        let [d_o, mc, e, kx, kxo, zbar, v, vsum] = std::array::from_fn(|_| vec![0.0; d]);
        let [zs, us, kappas, gls] = std::array::from_fn(|_| vec![0.0; s * d]);
        Scratch {
            a,
            w,
            ainv,
            d_o,
            mc,
            e,
            kx,
            kxo,
            zs,
            zbar,
            us,
            kappas,
            gls,
            h: vec![0.0; s],
            v,
            vsum,
        }
    }
}

impl TgmVnce {
    /// J and its gradient wrt the packed parameters (J is maximised), for the chosen terms.
    pub fn evaluate(&self, params: &TgmParams, terms: Terms) -> Result<(f64, Vec<f64>)> {
        if params.dim() != self.d {
            return Err(crate::NceError::invalid(
                "params",
                format!("have dimension {}, the data {}", params.dim(), self.d),
            ));
        }
        let f = Flat::new(params);
        let d = self.d;
        let parts: Vec<Acc> = self
            .rows
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut acc = Acc::new(d);
                let mut sc = Scratch::new(d, self.s);
                for row in chunk {
                    let keep = match terms {
                        Terms::Both => true,
                        Terms::Data => !row.noise,
                        Terms::Noise => row.noise,
                    };
                    if keep {
                        self.row_terms(&f, row, &mut acc, &mut sc);
                    }
                }
                acc
            })
            .collect();
        let mut tot = Acc::new(d);
        for p in &parts {
            tot.add(p);
        }
        Ok(self.finish(&f, tot))
    }

    #[allow(clippy::needless_range_loop)] // i indexes the missing set and its scratch rows together
    fn row_terms(&self, f: &Flat, row: &Row, acc: &mut Acc, sc: &mut Scratch) {
        let d = self.d;
        let off = self.log_nu + row.lp;
        if row.mis.is_empty() {
            let h = log_phi(f, &row.x, &mut sc.kx);
            let w = if row.noise {
                acc.value += log_sigmoid(-(h - off));
                -sigmoid(h - off)
            } else {
                acc.value += log_sigmoid(h - off);
                sigmoid(-(h - off))
            };
            acc.add_theta(d, &row.x, w);
            return;
        }
        if !self.forward(f, row, sc) {
            acc.value = f64::NAN;
            return;
        }
        // Upstream weights dJ/dh per draw, written into h's place.
        acc.value += draw_weights(&mut sc.h[..self.s], row.noise, off);
        self.backward(f, row, acc, sc);
    }

    /// Forward pass of a row with missing values: the conditional normal of log x_m given x_o
    /// (A = Lambda_mm, its inverse, the mean m_c) and, per draw s, z_s = exp(u_s), the terms of
    /// dJ/dz and h_s = l(x_s) - log q(z_s) in `sc.h`. False when A is not positive definite.
    fn forward(&self, f: &Flat, row: &Row, sc: &mut Scratch) -> bool {
        let d = self.d;
        let (mi, oi) = (&row.mis, &row.obs);
        let (p, s_n) = (mi.len(), self.s);
        // A = Lambda_mm, its factor, log|A| and inverse.
        for i in 0..p {
            for j in 0..p {
                sc.a[i * p + j] = f.lam[mi[i] * d + mi[j]];
            }
        }
        if !cholesky(&mut sc.a[..p * p], p) {
            return false;
        }
        let logdet_a: f64 = 2.0 * (0..p).map(|i| sc.a[i * p + i].ln()).sum::<f64>();
        chol_inverse(&sc.a[..p * p], p, &mut sc.w[..p * p], &mut sc.ainv[..p * p]);
        let ainv = &sc.ainv[..p * p];
        // Conditional mean m_c = mu_m - A^{-1} Lambda_mo d_o.
        for (j, &o) in oi.iter().enumerate() {
            sc.d_o[j] = row.log_x[o] - f.mu[o];
        }
        for i in 0..p {
            let lrow = &f.lam[mi[i] * d..(mi[i] + 1) * d];
            sc.v[i] = oi.iter().enumerate().map(|(j, &o)| lrow[o] * sc.d_o[j]).sum();
        }
        for i in 0..p {
            sc.mc[i] = f.mu[mi[i]] - (0..p).map(|j| ainv[i * p + j] * sc.v[j]).sum::<f64>();
        }
        let logq_const = -0.5 * p as f64 * LN_2PI + 0.5 * logdet_a;
        // Observed parts of x'Kx, fixed over the draws: K_mo x_o and x_o' K_oo x_o.
        let mut q_oo = 0.0;
        for &a in oi {
            let krow = &f.k[a * d..(a + 1) * d];
            q_oo += row.x[a] * oi.iter().map(|&b| krow[b] * row.x[b]).sum::<f64>();
        }
        for i in 0..p {
            let krow = &f.k[mi[i] * d..(mi[i] + 1) * d];
            sc.kxo[i] = oi.iter().map(|&b| krow[b] * row.x[b]).sum();
        }
        for s in 0..s_n {
            let eps = &row.eps[s * d..(s + 1) * d];
            for i in 0..p {
                let r = mi[i];
                let trow = &f.t[r * d..r * d + r + 1];
                sc.e[i] = trow.iter().zip(eps).map(|(a, b)| a * b).sum();
            }
            let kap = &mut sc.kappas[s * p..(s + 1) * p];
            let z = &mut sc.zs[s * p..(s + 1) * p];
            let mut quad = 0.0;
            let mut usum = 0.0;
            for i in 0..p {
                let k: f64 = (0..p).map(|j| ainv[i * p + j] * sc.e[j]).sum();
                kap[i] = k;
                quad += sc.e[i] * k;
                let u = sc.mc[i] + k;
                sc.us[s * p + i] = u;
                usum += u;
                z[i] = u.exp();
            }
            // (Kx)_m = K_mo x_o + K_mm z and x'Kx = x_o'K_oo x_o + z'K_mo x_o + z'(Kx)_m.
            let mut xkx = q_oo;
            for i in 0..p {
                let krow = &f.k[mi[i] * d..(mi[i] + 1) * d];
                let kxm = sc.kxo[i] + (0..p).map(|j| krow[mi[j]] * z[j]).sum::<f64>();
                xkx += z[i] * (sc.kxo[i] + kxm);
                sc.gls[s * p + i] = 1.0 - kxm * z[i];
            }
            let l = -0.5 * xkx - f.c;
            sc.h[s] = l - (logq_const - 0.5 * quad) + usum;
        }
        true
    }

    /// Backward pass: the draw weights in `sc.h` (dJ/dh_s) through the draws to the sums in
    /// `acc` (theta's x x' terms, the gradients in mu and in the factor of Lambda).
    fn backward(&self, f: &Flat, row: &Row, acc: &mut Acc, sc: &mut Scratch) {
        let d = self.d;
        let (mi, oi) = (&row.mis, &row.obs);
        let (p, s_n) = (mi.len(), self.s);
        let ainv = &sc.ainv[..p * p];
        // Accumulate the gradient.
        for v in sc.vsum[..p].iter_mut() {
            *v = 0.0;
        }
        let mut wrow = 0.0;
        for v in sc.zbar[..p].iter_mut() {
            *v = 0.0;
        }
        for s in 0..s_n {
            let w = sc.h[s];
            wrow += w;
            // theta: the missing-missing block of w x x' here, the rest once per row below.
            let z = &sc.zs[s * p..(s + 1) * p];
            for i in 0..p {
                let wz = w * z[i];
                sc.zbar[i] += wz;
                for j in i..p {
                    acc.xx[sym(mi[i], mi[j], d)] += wz * z[j];
                }
            }
            let gl = &sc.gls[s * p..(s + 1) * p];
            let kap = &sc.kappas[s * p..(s + 1) * p];
            let u = &sc.us[s * p..(s + 1) * p];
            let eps = &row.eps[s * d..(s + 1) * d];
            for i in 0..p {
                sc.v[i] = (0..p).map(|j| ainv[i * p + j] * gl[j]).sum();
            }
            for i in 0..p {
                let r = mi[i];
                acc.gmu[r] += w * gl[i];
                sc.vsum[i] += w * sc.v[i];
                let wv = w * sc.v[i];
                let wk = 0.5 * w * kap[i];
                let grow = &mut acc.gbar[r * d..(r + 1) * d];
                for j in 0..p {
                    grow[mi[j]] -= wv * (u[j] - f.mu[mi[j]]) + wk * kap[j];
                }
                let we = w * (sc.v[i] + kap[i]);
                let erow = &mut acc.ee[r * d..r * d + r + 1];
                for (a, b) in erow.iter_mut().zip(eps) {
                    *a += we * b;
                }
            }
        }
        acc.wsum += wrow;
        for (ja, &a) in oi.iter().enumerate() {
            let wa = wrow * row.x[a];
            for &b in &oi[ja..] {
                acc.xx[a * d + b] += wa * row.x[b];
            }
            for i in 0..p {
                acc.xx[sym(a, mi[i], d)] += sc.zbar[i] * row.x[a];
            }
        }
        for i in 0..p {
            let r = mi[i];
            let grow = &mut acc.gbar[r * d..(r + 1) * d];
            for j in 0..p {
                grow[mi[j]] -= 0.5 * wrow * ainv[i * p + j];
            }
            for (j, &o) in oi.iter().enumerate() {
                grow[o] -= sc.vsum[i] * sc.d_o[j];
            }
        }
        for &o in oi {
            let lrow = &f.lam[o * d..(o + 1) * d];
            acc.gmu[o] += (0..p).map(|i| lrow[mi[i]] * sc.vsum[i]).sum::<f64>();
        }
    }

    /// Each row's term of the gradient of n J (not divided by n) wrt the packed parameters,
    /// row-major (n + m) x n_params with the data rows first (the sandwich's scores, se.rs).
    pub fn row_scores(&self, params: &TgmParams) -> Result<Vec<f64>> {
        let f = Flat::new(params);
        let d = self.d;
        let n = self.n as f64;
        let parts: Vec<Vec<f64>> = self
            .rows
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut out = Vec::with_capacity(chunk.len() * n_params(d));
                let mut sc = Scratch::new(d, self.s);
                for row in chunk {
                    let mut acc = Acc::new(d);
                    self.row_terms(&f, row, &mut acc, &mut sc);
                    let (_, g) = self.finish(&f, acc);
                    out.extend(g.into_iter().map(|v| v * n));
                }
                out
            })
            .collect();
        Ok(parts.concat())
    }

    /// Sandwich covariance of the joint estimate (theta, alpha) of the lognormal family in the
    /// packing order (se.rs); the theta block is that of (K, c).
    pub fn lognormal_vcov(&self, params: &TgmParams) -> Result<nalgebra::DMatrix<f64>> {
        let d = self.d;
        let n = self.n as f64;
        let x = params.pack();
        let grad = |v: &[f64]| -> Result<Vec<f64>> {
            let p = TgmParams::unpack(d, v)?;
            let (j, g) = self.evaluate(&p, Terms::Both)?;
            if !j.is_finite() {
                return Err(crate::NceError::Numerical(
                    "the objective is not finite next to the estimate".to_string(),
                ));
            }
            Ok(g.into_iter().map(|v| v * n).collect())
        };
        let h = super::se::hessian_by_differences(&x, 1e-5, &grad)?;
        let scores = self.row_scores(params)?;
        let v = self.meat(&scores, n_params(d))?;
        super::se::sandwich(&h, &v)
    }

    /// Scale by 1/n and map the accumulated sums to the packed parameters.
    fn finish(&self, f: &Flat, tot: Acc) -> (f64, Vec<f64>) {
        let d = self.d;
        let sc = 1.0 / self.n as f64;
        let mut g = Vec::with_capacity(n_params(d));
        theta_grad(d, &tot.xx, tot.wsum, sc, &mut g);
        g.extend(tot.gmu.iter().map(|v| v * sc));
        // grad_T = lower((Gbar + Gbar') T) + sum ebar eps'.
        let mut gt = vec![0.0; d * d];
        for i in 0..d {
            for k in 0..=i {
                let mut s = tot.ee[i * d + k];
                for j in k..d {
                    s += (tot.gbar[i * d + j] + tot.gbar[j * d + i]) * f.t[j * d + k];
                }
                gt[i * d + k] = s * sc;
            }
        }
        g.extend((0..d).map(|j| gt[j * d + j] * f.t[j * d + j]));
        for i in 1..d {
            for k in 0..i {
                g.push(gt[i * d + k]);
            }
        }
        (tot.value * sc, g)
    }
}

/// L-BFGS view: minimise -J over the packed parameters.
impl Objective for TgmVnce {
    fn dim(&self) -> usize {
        n_params(self.d)
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        let p = TgmParams::unpack(self.d, x)?;
        let (j, g) = self.evaluate(&p, Terms::Both)?;
        for (a, b) in grad.iter_mut().zip(&g) {
            *a = -b;
        }
        Ok(-j)
    }
}
