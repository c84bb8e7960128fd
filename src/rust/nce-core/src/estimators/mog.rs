//! The unnormalised mixture of two Gaussians of Rhodes and Gutmann (2019, section 4.2):
//! phi(x, z; theta, c) = exp(-c) (z exp(-x^2 / (2 s1^2)) + (1 - z) exp(-x^2 / (2 theta^2))),
//! z in {0, 1}, with variational family q(z = 0 | x; w) = 1 / (1 + exp(w0 + w1 x + w2 x^2)).
//!
//! The VNCE objective (their eq. 13) is computed with exact sums over z (no Monte Carlo), so
//! VNCE, NCE on the marginal and the EM algorithm of their Corollary 1 can be compared exactly.
//! Parameters are (log theta, c, w0, w1, w2); everything is in log space.

use crate::convergence::Convergence;
use crate::engine::family::{sigmoid, softplus};
use crate::error::{NceError, Result};
use crate::estimators::vnce::se;
use crate::optim::{minimise_lbfgs, LbfgsControl, Objective};
use nalgebra::DMatrix;
use rayon::prelude::*;

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;
/// Points per parallel chunk; partial sums are added in chunk order.
const CHUNK: usize = 2048;

/// Sum over i in 0..len of f(i) = (value, gradient), by fixed chunks in parallel.
#[allow(clippy::needless_range_loop)] // K-length gradient arrays, indexed in step
fn chunked_sum<const K: usize>(len: usize, f: impl Fn(usize) -> (f64, [f64; K]) + Sync) -> (f64, [f64; K]) {
    let parts: Vec<(f64, [f64; K])> = (0..len.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut acc = (0.0, [0.0; K]);
            for i in c * CHUNK..((c + 1) * CHUNK).min(len) {
                let (v, g) = f(i);
                acc.0 += v;
                for k in 0..K {
                    acc.1[k] += g[k];
                }
            }
            acc
        })
        .collect();
    parts.into_iter().fold((0.0, [0.0; K]), |mut a, (v, g)| {
        a.0 += v;
        for k in 0..K {
            a.1[k] += g[k];
        }
        a
    })
}

/// Data, noise and the fixed parts of the model.
pub struct Mog {
    x: Vec<f64>,
    y: Vec<f64>,
    s1: f64,
    /// log p_y at the data and at the noise.
    lpy_x: Vec<f64>,
    lpy_y: Vec<f64>,
    log_nu: f64,
}

#[derive(Clone, Debug)]
pub struct MogFit {
    pub theta: f64,
    pub c: f64,
    pub w: [f64; 3],
    /// The maximised objective: J_VNCE for VNCE and EM, J_NCE for NCE.
    pub objective: f64,
    pub nce_objective: f64,
    pub evaluations: usize,
    pub convergence: Convergence,
    /// J_NCE after each EM M-step (empty unless EM).
    pub trace: Vec<f64>,
}

#[derive(Clone, Debug)]
pub struct EmControl {
    pub em_maxit: usize,
    pub em_tol: f64,
}

impl EmControl {
    pub fn check(&self) -> Result<()> {
        if self.em_maxit < 1 || !(self.em_tol >= 0.0) {
            return Err(NceError::invalid(
                "control",
                "em_maxit must be at least 1 and em_tol non-negative",
            ));
        }
        Ok(())
    }
}

impl Default for EmControl {
    fn default() -> Self {
        EmControl {
            em_maxit: 500,
            em_tol: 1e-10,
        }
    }
}

impl Mog {
    pub fn new(x: &[f64], y: &[f64], sigma1: f64, noise_mean: f64, noise_sd: f64) -> Result<Self> {
        for (v, name) in [(x, "x"), (y, "y")] {
            if v.is_empty() {
                return Err(NceError::invalid(name, "must have at least one value"));
            }
            if let Some(i) = v.iter().position(|a| !a.is_finite()) {
                return Err(NceError::invalid(name, format!("entry {} is not finite", i + 1)));
            }
        }
        if !(sigma1 > 0.0 && sigma1.is_finite()) {
            return Err(NceError::invalid("sigma1", "must be positive and finite"));
        }
        if !noise_mean.is_finite() {
            return Err(NceError::invalid("noise_mean", "must be finite"));
        }
        if !(noise_sd > 0.0 && noise_sd.is_finite()) {
            return Err(NceError::invalid("noise_sd", "must be positive and finite"));
        }
        let lpy = |v: f64| -0.5 * ((v - noise_mean) / noise_sd).powi(2) - noise_sd.ln() - LN_SQRT_2PI;
        Ok(Mog {
            lpy_x: x.iter().map(|&v| lpy(v)).collect(),
            lpy_y: y.iter().map(|&v| lpy(v)).collect(),
            log_nu: (y.len() as f64 / x.len() as f64).ln(),
            x: x.to_vec(),
            y: y.to_vec(),
            s1: sigma1,
        })
    }

    /// w of the exact posterior q(z = 0 | x) = p(z = 0 | x; theta).
    pub fn posterior_w(&self, theta: f64) -> [f64; 3] {
        [0.0, 0.0, 0.5 / (theta * theta) - 0.5 / (self.s1 * self.s1)]
    }

    /// (log phi(v, 0), log phi(v, 1)) and d log phi(v, 0) / d log theta.
    fn log_phi(&self, v: f64, inv_theta2: f64, c: f64) -> (f64, f64, f64) {
        let v2 = v * v;
        (
            -c - 0.5 * v2 * inv_theta2,
            -c - 0.5 * v2 / (self.s1 * self.s1),
            v2 * inv_theta2,
        )
    }

    /// Noise point k's term of both objectives, log(nu p_y / (nu p_y + phi(y))), and its gradient
    /// in (log theta, c).
    fn noise_term(&self, k: usize, inv_theta2: f64, c: f64) -> (f64, [f64; 2]) {
        let (l0, l1, dl0) = self.log_phi(self.y[k], inv_theta2, c);
        let m = l0.max(l1);
        let lphi = m + ((l0 - m).exp() + (l1 - m).exp()).ln();
        let s = lphi - self.log_nu - self.lpy_y[k];
        let sg = sigmoid(s);
        let pi0 = (l0 - lphi).exp();
        // d/d l_z of -softplus(s) is -sigmoid(s) pi_z; sum_z pi_z = 1 for c.
        (-softplus(s), [-sg * pi0 * dl0, sg])
    }

    /// Data point i's term of J_VNCE (times n) and its gradient in (log theta, c, w).
    fn data_vnce_term(&self, i: usize, p: &[f64], inv_t2: f64) -> (f64, [f64; 5]) {
        let c = p[1];
        let x = self.x[i];
        let (l0, l1, dl0) = self.log_phi(x, inv_t2, c);
        let eta = p[2] + p[3] * x + p[4] * x * x;
        let (lq0, lq1) = (-softplus(eta), -softplus(-eta));
        let (q0, q1) = (lq0.exp(), lq1.exp());
        let base = self.log_nu + self.lpy_x[i];
        let (r0, r1) = (base + lq0 - l0, base + lq1 - l1);
        let (sp0, sp1) = (softplus(r0), softplus(r1));
        let (d0, d1) = (q0 * sigmoid(r0), q1 * sigmoid(r1));
        let deta = -q0 * q1 * (sp1 - sp0 + sigmoid(r1) - sigmoid(r0));
        (
            -(q0 * sp0 + q1 * sp1),
            [d0 * dl0, -(d0 + d1), deta, deta * x, deta * x * x],
        )
    }

    /// Data point i's term of J_NCE (times n) and its gradient in (log theta, c).
    fn data_nce_term(&self, i: usize, inv_t2: f64, c: f64) -> (f64, [f64; 2]) {
        let (l0, l1, dl0) = self.log_phi(self.x[i], inv_t2, c);
        let m = l0.max(l1);
        let lphi = m + ((l0 - m).exp() + (l1 - m).exp()).ln();
        let r = self.log_nu + self.lpy_x[i] - lphi;
        let sg = sigmoid(r);
        let pi0 = (l0 - lphi).exp();
        (-softplus(r), [sg * pi0 * dl0, -sg])
    }

    /// Sandwich covariance (se.rs: two independent samples, data and noise) of the VNCE estimate
    /// at p = (log theta, c, w0, w1, w2), in that order; the Hessian by differences of the exact
    /// gradient.
    pub fn vnce_vcov(&self, p: &[f64]) -> Result<DMatrix<f64>> {
        self.sandwich_vcov(
            p,
            5,
            &|q| self.vnce(q).1.to_vec(),
            &|i, inv_t2| self.data_vnce_term(i, p, inv_t2).1.to_vec(),
            &|k, inv_t2| {
                let g = self.noise_term(k, inv_t2, p[1]).1;
                vec![g[0], g[1], 0.0, 0.0, 0.0]
            },
        )
    }

    /// Sandwich covariance of the NCE estimate of the marginal model at p = (log theta, c).
    pub fn nce_vcov(&self, p: &[f64]) -> Result<DMatrix<f64>> {
        self.sandwich_vcov(
            p,
            2,
            &|q| self.nce(q).1.to_vec(),
            &|i, inv_t2| self.data_nce_term(i, inv_t2, p[1]).1.to_vec(),
            &|k, inv_t2| self.noise_term(k, inv_t2, p[1]).1.to_vec(),
        )
    }

    /// H^{-1} V H^{-1} at the `len` parameters `p`: H by differences of `mean_grad` (the gradient of
    /// the objective averaged over the data rows) times n, V from the per-row scores
    /// `data_score(i, 1 / theta^2)` and `noise_score(k, 1 / theta^2)`.
    fn sandwich_vcov(
        &self,
        p: &[f64],
        len: usize,
        mean_grad: &dyn Fn(&[f64]) -> Vec<f64>,
        data_score: &dyn Fn(usize, f64) -> Vec<f64>,
        noise_score: &dyn Fn(usize, f64) -> Vec<f64>,
    ) -> Result<DMatrix<f64>> {
        if p.len() != len || p.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid("p", format!("must be {len} finite numbers")));
        }
        let n = self.x.len() as f64;
        let grad = |q: &[f64]| -> Result<Vec<f64>> { Ok(mean_grad(q).iter().map(|v| v * n).collect()) };
        let h = se::hessian_by_differences(p, 1e-5, &grad)?;
        let inv_t2 = (-2.0 * p[0]).exp();
        let mut scores = Vec::with_capacity((self.x.len() + self.y.len()) * len);
        for i in 0..self.x.len() {
            scores.extend(data_score(i, inv_t2));
        }
        for k in 0..self.y.len() {
            scores.extend(noise_score(k, inv_t2));
        }
        let v = se::two_sample_meat(&scores, self.x.len() + self.y.len(), self.x.len(), len)?;
        se::sandwich(&h, &v)
    }

    /// J_VNCE and its gradient at p = (log theta, c, w0, w1, w2).
    pub fn vnce(&self, p: &[f64]) -> (f64, [f64; 5]) {
        let (inv_t2, c) = ((-2.0 * p[0]).exp(), p[1]);
        let (dv, dg) = chunked_sum::<5>(self.x.len(), |i| self.data_vnce_term(i, p, inv_t2));
        let (nv, ng) = chunked_sum::<2>(self.y.len(), |k| self.noise_term(k, inv_t2, c));
        let n = self.x.len() as f64;
        (
            (dv + nv) / n,
            [
                (dg[0] + ng[0]) / n,
                (dg[1] + ng[1]) / n,
                dg[2] / n,
                dg[3] / n,
                dg[4] / n,
            ],
        )
    }

    /// J_NCE of the marginal phi(x) = sum_z phi(x, z) and its gradient at p = (log theta, c).
    pub fn nce(&self, p: &[f64]) -> (f64, [f64; 2]) {
        let (inv_t2, c) = ((-2.0 * p[0]).exp(), p[1]);
        let (dv, dg) = chunked_sum::<2>(self.x.len(), |i| self.data_nce_term(i, inv_t2, c));
        let (nv, ng) = chunked_sum::<2>(self.y.len(), |k| self.noise_term(k, inv_t2, c));
        let n = self.x.len() as f64;
        ((dv + nv) / n, [(dg[0] + ng[0]) / n, (dg[1] + ng[1]) / n])
    }

    fn check_start(theta: f64, c: f64, w: &[f64; 3]) -> Result<()> {
        if !(theta > 0.0 && theta.is_finite()) {
            return Err(NceError::invalid(
                "start",
                format!("theta must be positive and finite, not {theta}"),
            ));
        }
        if !c.is_finite() || !w.iter().all(|v| v.is_finite()) {
            return Err(NceError::invalid("start", "c and w must be finite"));
        }
        Ok(())
    }

    /// Joint maximisation of J_VNCE over (theta, c, w).
    pub fn fit_vnce(
        &self,
        theta: f64,
        c: f64,
        w: [f64; 3],
        ctrl: &LbfgsControl,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<MogFit> {
        Self::check_start(theta, c, &w)?;
        let r = minimise_lbfgs(
            &NegVnce { mog: self, w: None },
            &[theta.ln(), c, w[0], w[1], w[2]],
            ctrl,
            interrupt,
        )?;
        let nce = self.nce(&r.x[..2]).0;
        Ok(MogFit {
            theta: r.x[0].exp(),
            c: r.x[1],
            w: [r.x[2], r.x[3], r.x[4]],
            objective: -r.value,
            nce_objective: nce,
            evaluations: r.evaluations,
            convergence: r.convergence,
            trace: Vec::new(),
        })
    }

    /// Maximisation of J_NCE over (theta, c); `w` of the result is the exact posterior's.
    pub fn fit_nce(
        &self,
        theta: f64,
        c: f64,
        ctrl: &LbfgsControl,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<MogFit> {
        Self::check_start(theta, c, &[0.0; 3])?;
        let r = minimise_lbfgs(&NegNce(self), &[theta.ln(), c], ctrl, interrupt)?;
        let theta = r.x[0].exp();
        Ok(MogFit {
            theta,
            c: r.x[1],
            w: self.posterior_w(theta),
            objective: -r.value,
            nce_objective: -r.value,
            evaluations: r.evaluations,
            convergence: r.convergence,
            trace: Vec::new(),
        })
    }

    /// EM of Corollary 1: E-step w = exact posterior at theta, M-step maximises J_VNCE over
    /// (theta, c) with w fixed; stops when J_NCE changes by less than em_tol. The result's w is
    /// the posterior at the final theta (so its objective is J_VNCE = J_NCE there).
    pub fn fit_em(
        &self,
        theta: f64,
        c: f64,
        ctrl: &LbfgsControl,
        em: &EmControl,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<MogFit> {
        Self::check_start(theta, c, &[0.0; 3])?;
        em.check()?;
        let mut p = [theta.ln(), c];
        let mut j_prev = self.nce(&p).0;
        let (mut trace, mut evaluations, mut converged) = (Vec::new(), 0, false);
        let mut message = format!(
            "EM iteration limit em_maxit = {} reached before convergence",
            em.em_maxit
        );
        for _ in 0..em.em_maxit {
            if interrupt() {
                return Err(NceError::Interrupted);
            }
            let w = self.posterior_w(p[0].exp());
            let r = minimise_lbfgs(&NegVnce { mog: self, w: Some(w) }, &p, ctrl, interrupt)?;
            evaluations += r.evaluations;
            p = [r.x[0], r.x[1]];
            let j = self.nce(&p).0;
            trace.push(j);
            if (j - j_prev).abs() < em.em_tol {
                converged = true;
                message = "change in J_NCE below em_tol".into();
                break;
            }
            j_prev = j;
        }
        let theta = p[0].exp();
        let w = self.posterior_w(theta);
        let objective = self.vnce(&[p[0], p[1], w[0], w[1], w[2]]).0;
        Ok(MogFit {
            theta,
            c: p[1],
            w,
            objective,
            nce_objective: self.nce(&p).0,
            evaluations,
            convergence: Convergence {
                iterations: trace.len(),
                converged,
                message,
            },
            trace,
        })
    }
}

/// -J_VNCE over all five parameters, or over (log theta, c) with w fixed.
struct NegVnce<'a> {
    mog: &'a Mog,
    w: Option<[f64; 3]>,
}

impl Objective for NegVnce<'_> {
    fn dim(&self) -> usize {
        if self.w.is_some() {
            2
        } else {
            5
        }
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        let (v, g) = match self.w {
            Some(w) => self.mog.vnce(&[x[0], x[1], w[0], w[1], w[2]]),
            None => self.mog.vnce(x),
        };
        for (o, gi) in grad.iter_mut().zip(g) {
            *o = -gi;
        }
        Ok(-v)
    }
}

struct NegNce<'a>(&'a Mog);

impl Objective for NegNce<'_> {
    fn dim(&self) -> usize {
        2
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> Result<f64> {
        let (v, g) = self.0.nce(x);
        grad[0] = -g[0];
        grad[1] = -g[1];
        Ok(-v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;
    use crate::rng::stream_rng;
    use rand::Rng;
    use rand_distr::StandardNormal;

    /// n draws from the normalised model: N(0, s1^2) w.p. s1 / (s1 + theta), else N(0, theta^2);
    /// m noise draws from N(0, noise_sd^2).
    fn problem(n: usize, m: usize, theta: f64, noise_sd: f64, seed: u64) -> Mog {
        let mut rng = stream_rng(seed, 0);
        let x: Vec<f64> = (0..n)
            .map(|_| {
                let z: f64 = rng.sample(StandardNormal);
                if rng.gen::<f64>() < 1.0 / (1.0 + theta) {
                    z
                } else {
                    theta * z
                }
            })
            .collect();
        let mut rng = stream_rng(seed, 1);
        let y: Vec<f64> = (0..m)
            .map(|_| noise_sd * rng.sample::<f64, _>(StandardNormal))
            .collect();
        Mog::new(&x, &y, 1.0, 0.0, noise_sd).unwrap()
    }

    fn tight() -> LbfgsControl {
        LbfgsControl {
            maxit: 2000,
            gtol: 1e-11,
            ftol: 0.0,
            memory: 10,
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let mog = problem(300, 450, 4.0, 4.0, 5);
        let p = [1.2, 2.1, 0.3, -0.2, 0.15];
        let (_, g) = mog.vnce(&p);
        let (_, gn) = mog.nce(&p[..2]);
        for j in 0..5 {
            let h = 1e-5;
            let (mut a, mut b) = (p, p);
            a[j] += h;
            b[j] -= h;
            let fd = (mog.vnce(&a).0 - mog.vnce(&b).0) / (2.0 * h);
            assert!(
                (fd - g[j]).abs() < 1e-6 * g[j].abs().max(1e-3),
                "vnce {j}: {fd} vs {}",
                g[j]
            );
            if j < 2 {
                let fd = (mog.nce(&a[..2]).0 - mog.nce(&b[..2]).0) / (2.0 * h);
                assert!(
                    (fd - gn[j]).abs() < 1e-6 * gn[j].abs().max(1e-3),
                    "nce {j}: {fd} vs {}",
                    gn[j]
                );
            }
        }
        // Tight bound at the posterior, strictly below elsewhere (Theorem 1).
        let w = mog.posterior_w(p[0].exp());
        let (jn, jv) = (mog.nce(&p[..2]).0, mog.vnce(&[p[0], p[1], w[0], w[1], w[2]]).0);
        assert!((jn - jv).abs() < 1e-13, "{jn} {jv}");
        assert!(mog.vnce(&p).0 < jn - 1e-6);
        // Extreme parameters stay finite.
        let (v, g) = mog.vnce(&[-6.0, 300.0, 50.0, -40.0, 30.0]);
        assert!(v.is_finite() && g.iter().all(|a| a.is_finite()));
    }

    #[test]
    fn vnce_optimum_is_the_nce_optimum() {
        let mog = problem(1000, 1000, 4.0, 4.0, 1);
        let never = &mut || false;
        let nce = mog.fit_nce(2.0, 1.0, &tight(), never).unwrap();
        let vnce = mog.fit_vnce(2.0, 1.0, [0.0, 0.0, 0.0], &tight(), never).unwrap();
        assert!(
            (vnce.theta - nce.theta).abs() < 1e-5 * nce.theta,
            "{} {}",
            vnce.theta,
            nce.theta
        );
        assert!((vnce.c - nce.c).abs() < 1e-5);
        assert!((vnce.objective - nce.objective).abs() < 1e-8);
        let post = mog.posterior_w(nce.theta);
        for i in 0..=80 {
            let x = -20.0 + 0.5 * i as f64;
            let q = |w: &[f64; 3]| sigmoid(-(w[0] + w[1] * x + w[2] * x * x));
            assert!(
                (q(&vnce.w) - q(&post)).abs() < 1e-3,
                "x = {x}: {} vs {}",
                q(&vnce.w),
                q(&post)
            );
        }

        // EM: J_NCE never decreases and ends at the same theta.
        let em = mog
            .fit_em(
                2.0,
                1.0,
                &tight(),
                &EmControl {
                    em_maxit: 1000,
                    em_tol: 1e-13,
                },
                never,
            )
            .unwrap();
        eprintln!(
            "em {} iterations, theta {}, converged {}",
            em.convergence.iterations, em.theta, em.convergence.converged
        );
        assert!(em.convergence.converged, "{}", em.convergence.message);
        let j0 = mog.nce(&[2.0f64.ln(), 1.0]).0;
        let mut prev = j0;
        for &j in &em.trace {
            assert!(j >= prev - 1e-12, "{j} < {prev}");
            prev = j;
        }
        assert!(
            (em.theta - nce.theta).abs() < 1e-6 * nce.theta,
            "{} {}",
            em.theta,
            nce.theta
        );
        assert!((em.nce_objective - nce.objective).abs() < 1e-10);
    }

    /// Sandwich standard errors of the NCE estimate of (log theta, c) from per-point scores.
    fn nce_se(mog: &Mog, p: &[f64; 2]) -> [f64; 2] {
        let n = mog.x.len() as f64;
        let inv_t2 = (-2.0 * p[0]).exp();
        let h = 1e-5;
        let mut hess = [[0.0; 2]; 2];
        for j in 0..2 {
            let (mut a, mut b) = (*p, *p);
            a[j] += h;
            b[j] -= h;
            let (ga, gb) = (mog.nce(&a).1, mog.nce(&b).1);
            for i in 0..2 {
                hess[i][j] = (ga[i] - gb[i]) / (2.0 * h);
            }
        }
        // Covariance of the score sum: data and noise points are independent samples.
        let mut meat = [[0.0; 2]; 2];
        let mut add = |scores: Vec<[f64; 2]>| {
            let k = scores.len() as f64;
            let mean = [
                scores.iter().map(|s| s[0]).sum::<f64>() / k,
                scores.iter().map(|s| s[1]).sum::<f64>() / k,
            ];
            for s in &scores {
                for i in 0..2 {
                    for j in 0..2 {
                        meat[i][j] += (s[i] - mean[i]) * (s[j] - mean[j]) / (n * n);
                    }
                }
            }
        };
        let data = (0..mog.x.len())
            .map(|i| {
                let one = Mog {
                    x: vec![mog.x[i]],
                    y: vec![],
                    s1: mog.s1,
                    lpy_x: vec![mog.lpy_x[i]],
                    lpy_y: vec![],
                    log_nu: mog.log_nu,
                };
                one.nce(p).1
            })
            .collect();
        add(data);
        add((0..mog.y.len()).map(|k| mog.noise_term(k, inv_t2, p[1]).1).collect());
        let det = hess[0][0] * hess[1][1] - hess[0][1] * hess[1][0];
        let inv = [
            [hess[1][1] / det, -hess[0][1] / det],
            [-hess[1][0] / det, hess[0][0] / det],
        ];
        let mut cov = [[0.0; 2]; 2];
        for i in 0..2 {
            for j in 0..2 {
                for a in 0..2 {
                    for b in 0..2 {
                        cov[i][j] += inv[i][a] * meat[a][b] * inv[b][j];
                    }
                }
            }
        }
        [cov[0][0].sqrt(), cov[1][1].sqrt()]
    }

    #[test]
    fn true_normaliser_is_recovered() {
        let theta = 4.0;
        let mog = problem(10_000, 10_000, theta, 4.0, 2);
        let fit = mog
            .fit_vnce(2.0, 1.0, [0.0; 3], &LbfgsControl::default(), &mut || false)
            .unwrap();
        assert!(fit.convergence.converged, "{}", fit.convergence.message);
        let c_true = ((2.0 * std::f64::consts::PI).sqrt() * (1.0 + theta)).ln();
        let se = nce_se(&mog, &[fit.theta.ln(), fit.c]);
        eprintln!(
            "c {} vs {c_true} (se {}), theta {} (se of log theta {})",
            fit.c, se[1], fit.theta, se[0]
        );
        assert!((fit.c - c_true).abs() < 4.0 * se[1]);
        assert!((fit.theta.ln() - theta.ln()).abs() < 4.0 * se[0]);
        assert!(se[1] < 0.1);
    }

    #[test]
    fn same_result_for_any_thread_count() {
        let mog = problem(5000, 7000, 4.0, 4.0, 3);
        let p = [1.0, 2.0, 0.1, 0.2, -0.3];
        let a = with_threads(1, || mog.vnce(&p)).unwrap();
        let b = with_threads(2, || mog.vnce(&p)).unwrap();
        assert_eq!(a, b);
    }
}
