//! Telescoping ratio estimation of a log normalising constant (Rhodes, Xu & Gutmann 2020) for
//! `marglik_nce()` when one classifier between the draws and the reference faces a density
//! chasm.
//!
//! Waymarks. On the whitened scale z = L⁻¹(u - μ) (u the unconstrained parameters, μ and LLᵀ
//! the mean and covariance of the draws that fit the reference), the reference is g = N(0, I)
//! and the draws come from p₀ = f̃ / Z with f̃ the kernel times the Jacobians. With
//! t(z) = log f̃(z) - log g(z), the waymarks are p_b ∝ g · exp((1 - b) t), 0 = b₀ < … < b_K = 1:
//! p_{b=0} is the posterior and p_{b=1} the reference. Each neighbouring pair has the known log
//! ratio (b_{k+1} - b_k) t up to its constant c_k = log(Z_k / Z_{k+1}), so the pair's classifier
//! is the 1-D logistic problem of `bridge::solve` (its features are exact), and
//! log Z = Σ c_k because Z_K = 1.
//!
//! Samples of the waymarks: linear mixing of each sample with fresh reference noise,
//! z' = √(1 - β²) z + β ξ (the preconditioned Crank–Nicolson move), accepted with probability
//! min(1, exp((1 - b)(t(z') - t(z)))): the move is reversible for p_b, so mixing never leaves the
//! waymark; between waymarks the samples are resampled with weights exp(-(b_{k+1} - b_k) t)
//! (resample-move). The kernel is evaluated in R between the calls of this module (workers
//! never call R), so this module holds the pieces: whitening, proposals, acceptance, the
//! choice of the next waymark, resampling and the final solve with its standard error.
//!
//! Number of waymarks: the next b is the largest for which the classifier between the two
//! waymarks, estimated from the current samples by importance weighting, has accuracy at most
//! `target` (0.5 = indistinguishable). When the single classifier between the draws and the
//! reference already has that accuracy there is one pair: the plain bridge estimator.
//!
//! Standard error: each pair's estimate is linear in its scores to first order,
//! ĉ_k - c_k ≈ U_k / I_k; a sample of waymark j enters pair j (as class 1) and pair j - 1 (as
//! class 0), so its influence on Σ ĉ_k is φ = s_j / I_j - q_{j-1} / I_{j-1}. Samples descend from
//! the draws through resampling, so influences are summed over each draw's descendants (its
//! "Eve" index, as in Lee & Whiteley's variance estimator for particle filters) and the draws'
//! totals, a series in draw order, get the long-run variance of MCMC draws (initial monotone
//! sequence, per chain). The reference samples of the last waymark are independent.

use crate::convergence::Convergence;
use crate::engine::family::sigmoid;
use crate::error::{NceError, Result};
use crate::estimators::bridge::{self, ess_ims, shrink_cov, Bounds, SolveControl};
use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;

/// Rows per chunk of parallel work (fixed, so results do not depend on the thread count).
const ROWS: usize = 256;

/// The affine map between the whitened and the unconstrained scale, and the bounds.
#[derive(Debug, Clone)]
pub struct Whitening {
    pub mean: Vec<f64>,
    /// Lower Cholesky factor of the covariance.
    pub chol: DMatrix<f64>,
    /// log det L.
    pub log_det: f64,
    pub bounds: Vec<Bounds>,
}

/// Row-chunk ranges of 0..n.
fn chunks(n: usize) -> Vec<(usize, usize)> {
    (0..n.div_ceil(ROWS))
        .map(|c| (c * ROWS, ((c + 1) * ROWS).min(n)))
        .collect()
}

/// Rows r0..r1 of a column-major n x d matrix as an (r1 - r0) x d matrix.
fn rows_of(x: &[f64], n: usize, d: usize, r0: usize, r1: usize) -> DMatrix<f64> {
    DMatrix::from_fn(r1 - r0, d, |i, j| x[j * n + r0 + i])
}

/// Scatter row blocks back into a column-major n x d vector.
fn gather(blocks: Vec<DMatrix<f64>>, n: usize, d: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * d];
    let mut r0 = 0;
    for b in blocks {
        for j in 0..d {
            for i in 0..b.nrows() {
                out[j * n + r0 + i] = b[(i, j)];
            }
        }
        r0 += b.nrows();
    }
    out
}

/// Log density of N(0, I) at each row of column-major n x d z.
pub fn log_std_normal(z: &[f64], n: usize, d: usize) -> Vec<f64> {
    let k = -0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln();
    let mut s = vec![0.0; n];
    for j in 0..d {
        for (i, si) in s.iter_mut().enumerate() {
            let v = z[j * n + i];
            *si += v * v;
        }
    }
    s.iter().map(|v| k - 0.5 * v).collect()
}

impl Whitening {
    /// Mean and covariance of the `fit` draws (column-major nf x d) on the unconstrained scale,
    /// with the correlations shrunk as `shrink_cov` does when `shrink`.
    pub fn fit(x: &[f64], nf: usize, bounds: &[Bounds], shrink: bool) -> Result<Self> {
        let d = bounds.len();
        let (u, _) = bridge::to_unconstrained(x, nf, bounds)?;
        let (mean, mut cov) = bridge::mean_cov(&u, nf, d)?;
        if shrink {
            shrink_cov(&u, nf, d, &mean, &mut cov);
        }
        let chol = DMatrix::from_column_slice(d, d, &cov).cholesky().ok_or_else(|| {
            NceError::invalid(
                "draws",
                "the covariance of the draws (on the unconstrained scale) is not positive definite; \
                 are some parameters constant or collinear?",
            )
        })?;
        let l = chol.l();
        let log_det = l.diagonal().iter().map(|v| v.ln()).sum();
        Ok(Whitening {
            mean,
            chol: l,
            log_det,
            bounds: bounds.to_vec(),
        })
    }

    /// From a mean and a lower Cholesky factor (column-major d x d), as `fit` returned them.
    pub fn from_parts(mean: Vec<f64>, chol: &[f64], bounds: &[Bounds]) -> Result<Self> {
        let d = mean.len();
        if chol.len() != d * d || bounds.len() != d {
            return Err(NceError::invalid("chol", format!("must be {d} x {d} with {d} bounds")));
        }
        let l = DMatrix::from_column_slice(d, d, chol);
        if (0..d).any(|j| !(l[(j, j)] > 0.0) || !l[(j, j)].is_finite()) {
            return Err(NceError::invalid("chol", "must have a positive finite diagonal"));
        }
        let log_det = l.diagonal().iter().map(|v| v.ln()).sum();
        Ok(Whitening {
            mean,
            chol: l.lower_triangle(),
            log_det,
            bounds: bounds.to_vec(),
        })
    }

    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Draws in the parameter space (column-major n x d) to the whitened scale, with
    /// log |dx/dz| - log N(z; 0, I) at each (so that t = log f + this).
    pub fn whiten(&self, x: &[f64], n: usize) -> Result<(Vec<f64>, Vec<f64>)> {
        let d = self.dim();
        let (u, lj) = bridge::to_unconstrained(x, n, &self.bounds)?;
        let blocks: Vec<DMatrix<f64>> = chunks(n)
            .into_par_iter()
            .map(|(r0, r1)| {
                let mut b = rows_of(&u, n, d, r0, r1);
                for j in 0..d {
                    for i in 0..b.nrows() {
                        b[(i, j)] -= self.mean[j];
                    }
                }
                // rows of (u - μ) L⁻ᵀ: solve L Zᵀ = (u - μ)ᵀ
                let zt = self
                    .chol
                    .solve_lower_triangular(&b.transpose())
                    .expect("Cholesky factor has a positive diagonal");
                zt.transpose()
            })
            .collect();
        let z = gather(blocks, n, d);
        let lg = log_std_normal(&z, n, d);
        let extra = lj.iter().zip(&lg).map(|(a, b)| a + self.log_det - b).collect();
        Ok((z, extra))
    }

    /// Whitened points to the parameter space: (x column-major, log |dx/dz| - log N(z; 0, I)).
    pub fn unwhiten(&self, z: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
        let d = self.dim();
        let lt = self.chol.transpose();
        let blocks: Vec<DMatrix<f64>> = chunks(n)
            .into_par_iter()
            .map(|(r0, r1)| {
                let mut u = rows_of(z, n, d, r0, r1) * &lt;
                for j in 0..d {
                    for i in 0..u.nrows() {
                        u[(i, j)] += self.mean[j];
                    }
                }
                u
            })
            .collect();
        let u = gather(blocks, n, d);
        let (x, lj) = bridge::from_unconstrained(&u, n, &self.bounds);
        let lg = log_std_normal(z, n, d);
        let extra = lj.iter().zip(&lg).map(|(a, b)| a + self.log_det - b).collect();
        (x, extra)
    }
}

/// Linear mixing proposal z' = √(1 - β²) z + β ξ, ξ ~ N(0, I) from stream `step` of `seed`
/// (one sub-stream per chunk of rows).
pub fn pcn_propose(z: &[f64], n: usize, d: usize, beta: f64, seed: u64, step: u64) -> Result<Vec<f64>> {
    if !(beta > 0.0 && beta <= 1.0) || z.len() != n * d {
        return Err(NceError::invalid("beta", format!("must be in (0, 1], got {beta}")));
    }
    let a = (1.0 - beta * beta).max(0.0).sqrt();
    let nch = n.div_ceil(ROWS) as u64;
    let blocks: Vec<DMatrix<f64>> = chunks(n)
        .into_par_iter()
        .enumerate()
        .map(|(c, (r0, r1))| {
            let mut rng = crate::rng::stream_rng(seed, step * nch + c as u64);
            let mut b = rows_of(z, n, d, r0, r1);
            for i in 0..b.nrows() {
                for j in 0..d {
                    let e: f64 = rng.sample(StandardNormal);
                    b[(i, j)] = a * b[(i, j)] + beta * e;
                }
            }
            b
        })
        .collect();
    Ok(gather(blocks, n, d))
}

/// Metropolis acceptance of proposals for p_b ∝ g exp(temp · t): accept i when
/// log U_i < temp (t'_i - t_i), U from stream `step` of `seed`.
pub fn pcn_accept(t: &[f64], tp: &[f64], temp: f64, seed: u64, step: u64) -> Vec<bool> {
    let mut rng = crate::rng::stream_rng(seed, step);
    t.iter()
        .zip(tp)
        .map(|(&a, &b)| {
            let u: f64 = rng.gen();
            let lr = temp * (b - a);
            !lr.is_nan() && u.ln() < lr
        })
        .collect()
}

/// Accuracy of the Bayes classifier between p_k (samples with values `t`) and p_{k+1} at
/// step `db`, estimated by importance weighting of the p_k samples:
/// ½ E_k σ(r - c) + ½ E_{k+1} σ(c - r), r = db t, c = -log E_k exp(-r).
pub fn pair_accuracy(t: &[f64], db: f64) -> f64 {
    let lw: Vec<f64> = t.iter().map(|v| -db * v).collect();
    let c = -bridge::log_mean_exp(&lw);
    let m = lw.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = lw.iter().map(|v| (v - m).exp()).collect();
    let sw: f64 = w.iter().sum();
    let n = t.len() as f64;
    let mut a = 0.0;
    let mut b = 0.0;
    for (i, &v) in t.iter().enumerate() {
        let r = db * v;
        a += sigmoid(r - c);
        b += w[i] * sigmoid(c - r);
    }
    0.5 * a / n + 0.5 * b / sw
}

/// The next waymark after `b`: 1 when the classifier from p_b straight to the reference has
/// accuracy at most `target`, otherwise the b' whose pair has accuracy `target` (bisection).
pub fn next_waymark(t: &[f64], b: f64, target: f64) -> Result<f64> {
    let ok = target > 0.5 && target < 1.0 && (0.0..1.0).contains(&b);
    if !ok {
        return Err(NceError::invalid(
            "accuracy",
            format!("must be in (0.5, 1), got {target}"),
        ));
    }
    if t.iter().any(|v| !v.is_finite()) {
        return Err(NceError::invalid("t", "log ratios at the samples must be finite"));
    }
    if pair_accuracy(t, 1.0 - b) <= target {
        return Ok(1.0);
    }
    let (mut lo, mut hi) = (0.0, 1.0 - b);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if pair_accuracy(t, mid) > target {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // At least a tiny step forward, so the loop over waymarks ends.
    Ok((b + lo.max(1e-9 * (1.0 - b))).min(1.0))
}

/// Systematic resampling with log weights -db t: 0-based indices of the n survivors.
pub fn resample(t: &[f64], db: f64, seed: u64, step: u64) -> Vec<usize> {
    let n = t.len();
    let lw: Vec<f64> = t.iter().map(|v| -db * v).collect();
    let m = lw.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = lw.iter().map(|v| (v - m).exp()).collect();
    let sw: f64 = w.iter().sum();
    let u0: f64 = crate::rng::stream_rng(seed, step).gen();
    let mut out = Vec::with_capacity(n);
    let mut cum = 0.0;
    let mut j = 0;
    for i in 0..n {
        let target = (i as f64 + u0) / n as f64 * sw;
        while j + 1 < n && cum + w[j] < target {
            cum += w[j];
            j += 1;
        }
        out.push(j);
    }
    out
}

/// The telescoped estimate with its pairs.
#[derive(Debug, Clone)]
pub struct TelescopeFit {
    pub log_z: f64,
    pub se: f64,
    pub se_iid: f64,
    /// Effective sample size of the draws' total influences.
    pub ess: f64,
    /// Per pair: c_k = log(Z_k / Z_{k+1}), its own standard error (pair alone, draws
    /// independent), the classifier's accuracy at the estimate, Newton iterations, converged.
    pub c: Vec<f64>,
    pub se_pair: Vec<f64>,
    pub accuracy: Vec<f64>,
    pub separated: bool,
    /// Newton iterations summed over the pairs; converged when every pair's fit did.
    pub convergence: Convergence,
}

/// Solve every pair (in parallel) and combine. `sets[j]` holds t at the samples of waymark j
/// (j = 0..=K; set 0 the draws, set K the reference samples), `b` the K + 1 waymarks,
/// `eve[j]` for j = 0..K the 0-based draw each sample of waymark j descends from (set K is
/// independent), `chains` the chain lengths of the draws (their sum = len of set 0), `ess` an
/// effective sample size of the draws to use instead of the estimate.
pub fn solve(
    sets: &[Vec<f64>],
    b: &[f64],
    eve: &[Vec<usize>],
    chains: &[usize],
    ess: Option<f64>,
    ctrl: &SolveControl,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<TelescopeFit> {
    let k = b.len().saturating_sub(1);
    if k == 0 || sets.len() != k + 1 || eve.len() != k {
        return Err(NceError::invalid(
            "waymarks",
            "need K + 1 sets of samples, K + 1 waymarks and K ancestries",
        ));
    }
    if b[0] != 0.0 || b[k] != 1.0 || b.windows(2).any(|w| !(w[1] > w[0])) {
        return Err(NceError::invalid("waymarks", "must increase from 0 to 1"));
    }
    let n0 = sets[0].len();
    if chains.iter().sum::<usize>() != n0 || chains.contains(&0) {
        return Err(NceError::invalid(
            "chains",
            format!("chain lengths must be positive and sum to {n0}"),
        ));
    }
    for j in 0..k {
        if eve[j].len() != sets[j].len() || eve[j].iter().any(|&a| a >= n0) {
            return Err(NceError::invalid(
                "eve",
                format!("ancestry of waymark {j} does not match its samples"),
            ));
        }
    }
    let fits: Vec<Result<bridge::BridgeFit>> = (0..k)
        .into_par_iter()
        .map(|p| {
            let db = b[p + 1] - b[p];
            let r1: Vec<f64> = sets[p].iter().map(|v| db * v).collect();
            let r2: Vec<f64> = sets[p + 1].iter().map(|v| db * v).collect();
            let n1 = r1.len() as f64;
            let n2 = r2.len() as f64;
            bridge::solve(&r1, &r2, [Some(n1), Some(n2)], ctrl, &mut || stop())
        })
        .collect();
    let fits = fits.into_iter().collect::<Result<Vec<_>>>()?;
    let separated = fits.iter().any(|f| f.separated);
    let c: Vec<f64> = fits.iter().map(|f| f.log_ratio).collect();
    let log_z: f64 = c.iter().sum();
    // Influence of each sample on Σ ĉ.
    let nu: Vec<f64> = (0..k)
        .map(|p| (sets[p].len() as f64 / sets[p + 1].len() as f64).ln())
        .collect();
    let mut total = vec![0.0; n0];
    let mut last = Vec::new();
    for j in 0..=k {
        let phi: Vec<f64> = sets[j]
            .iter()
            .map(|&t| {
                let mut v = 0.0;
                if j < k {
                    let r = (b[j + 1] - b[j]) * t;
                    v += sigmoid(-(r - c[j] + nu[j])) / fits[j].info;
                }
                if j > 0 {
                    let r = (b[j] - b[j - 1]) * t;
                    if r.is_finite() {
                        v -= sigmoid(r - c[j - 1] + nu[j - 1]) / fits[j - 1].info;
                    }
                }
                v
            })
            .collect();
        if j < k {
            for (i, v) in phi.iter().enumerate() {
                total[eve[j][i]] += v;
            }
        } else {
            last = phi;
        }
    }
    let ss_last = centred_ss(&last);
    let (ss, ess_est) = long_run_ss(&total, chains);
    let ess_used = ess.unwrap_or(ess_est);
    let raw = centred_ss(&total);
    let var = raw * n0 as f64 / ess_used + ss_last;
    let var_iid = raw + ss_last;
    let _ = ss;
    let fin = |v: f64| {
        if v.is_finite() {
            v.max(0.0).sqrt()
        } else {
            f64::INFINITY
        }
    };
    let accuracy = (0..k)
        .map(|p| {
            let db = b[p + 1] - b[p];
            let a: f64 = sets[p].iter().map(|v| sigmoid(db * v - c[p] + nu[p])).sum::<f64>() / sets[p].len() as f64;
            let q: f64 = sets[p + 1]
                .iter()
                .map(|v| sigmoid(-(db * v - c[p] + nu[p])))
                .sum::<f64>()
                / sets[p + 1].len() as f64;
            0.5 * (a + q)
        })
        .collect();
    Ok(TelescopeFit {
        log_z,
        se: fin(var),
        se_iid: fin(var_iid),
        ess: ess_used,
        se_pair: fits.iter().map(|f| f.se).collect(),
        accuracy,
        separated,
        convergence: Convergence {
            iterations: fits.iter().map(|f| f.convergence.iterations).sum(),
            converged: fits.iter().all(|f| f.convergence.converged),
            message: fits
                .iter()
                .map(|f| f.convergence.message.as_str())
                .find(|m| !m.is_empty())
                .unwrap_or("")
                .into(),
        },
        c,
    })
}

/// Σ (x - mean)².
fn centred_ss(x: &[f64]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    let m = x.iter().sum::<f64>() / x.len() as f64;
    x.iter().map(|v| (v - m) * (v - m)).sum()
}

/// Long-run sum of squares of a series of stacked chains, Σ_c SS_c · n_c / ESS_c (each chain's
/// ESS by the initial monotone sequence, deviations from the overall mean, so that differences
/// between chains count), and the total effective sample size n · SS / that.
pub fn long_run_ss(x: &[f64], chains: &[usize]) -> (f64, f64) {
    let n = x.len();
    let m = x.iter().sum::<f64>() / n.max(1) as f64;
    let mut total = 0.0;
    let mut start = 0;
    for &len in chains {
        let seg: Vec<f64> = x[start..start + len].iter().map(|v| v - m).collect();
        let ss: f64 = seg.iter().map(|v| v * v).sum();
        let e = ess_ims(&seg);
        total += if e > 0.0 { ss * len as f64 / e } else { ss };
        start += len;
    }
    let raw = centred_ss(x);
    let ess = if total > 0.0 { n as f64 * raw / total } else { n as f64 };
    (total, ess.min(n as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::bridge::ar1;

    #[test]
    fn per_chain_ess_of_identical_stacked_chains_is_twice_one_chain() {
        // Two copies of one chain: the overall mean is each chain's mean, so the per-chain long-run sum of
        // squares is twice one chain's and the effective sample size doubles exactly.
        let mut rng = crate::rng::stream_rng(22, 0);
        let y = ar1(3000, 0.9, &mut rng);
        let one = ess_ims(&y);
        let two = long_run_ss(&[y.clone(), y.clone()].concat(), &[3000, 3000]).1;
        assert!((two / (2.0 * one) - 1.0).abs() < 1e-10, "{two} vs 2 x {one}");
        assert!(one < 0.1 * 3000.0, "AR(1) 0.9 has ESS about n / 19, got {one}");
    }

    fn free(d: usize) -> Vec<Bounds> {
        vec![Bounds::Free; d]
    }

    /// Gamma(2, 1) kernels on the log scale: log f̃(u) = Σ (2u - eᵘ), exact log Z = 0.
    fn gamma_draws(n: usize, d: usize, seed: u64) -> Vec<f64> {
        let mut rng = crate::rng::stream_rng(seed, 0);
        let mut x = vec![0.0; n * d];
        for v in x.iter_mut() {
            let e1: f64 = -rng.gen::<f64>().ln();
            let e2: f64 = -rng.gen::<f64>().ln();
            *v = (e1 + e2).ln();
        }
        x
    }

    fn log_f(x: &[f64], n: usize, d: usize) -> Vec<f64> {
        (0..n)
            .map(|i| (0..d).map(|j| 2.0 * x[j * n + i] - x[j * n + i].exp()).sum())
            .collect()
    }

    /// The whole resample-move loop, as R runs it.
    fn telescope(d: usize, n: usize, seed: u64, target: f64, moves: usize) -> TelescopeFit {
        let xf = gamma_draws(n, d, seed);
        let xe = gamma_draws(n, d, seed + 100);
        let w = Whitening::fit(&xf, n, &free(d), false).unwrap();
        let (mut z, extra) = w.whiten(&xe, n).unwrap();
        let lf = log_f(&xe, n, d);
        let mut t: Vec<f64> = lf.iter().zip(&extra).map(|(a, b)| a + b).collect();
        let mut sets = vec![t.clone()];
        let mut eves = vec![(0..n).collect::<Vec<usize>>()];
        let mut eve: Vec<usize> = (0..n).collect();
        let mut bs = vec![0.0];
        let mut b = 0.0;
        let mut beta: f64 = 0.5;
        let mut step = 0u64;
        loop {
            let nb = next_waymark(&t, b, target).unwrap();
            if nb >= 1.0 {
                bs.push(1.0);
                break;
            }
            let idx = resample(&t, nb - b, seed, 1_000_000 + step);
            z = (0..d)
                .flat_map(|j| idx.iter().map(move |&i| (j, i)))
                .map(|(j, i)| z[j * n + i])
                .collect();
            t = idx.iter().map(|&i| t[i]).collect();
            eve = idx.iter().map(|&i| eve[i]).collect();
            for _ in 0..moves {
                step += 1;
                let zp = pcn_propose(&z, n, d, beta, seed, step).unwrap();
                let (xp, ex) = w.unwhiten(&zp, n);
                let tp: Vec<f64> = log_f(&xp, n, d).iter().zip(&ex).map(|(a, b)| a + b).collect();
                let acc = pcn_accept(&t, &tp, 1.0 - nb, seed, 2_000_000 + step);
                let rate = acc.iter().filter(|&&a| a).count() as f64 / n as f64;
                for i in 0..n {
                    if acc[i] {
                        t[i] = tp[i];
                        for j in 0..d {
                            z[j * n + i] = zp[j * n + i];
                        }
                    }
                }
                beta = (beta * (rate - 0.3).exp()).clamp(0.01, 1.0);
            }
            b = nb;
            bs.push(b);
            sets.push(t.clone());
            eves.push(eve.clone());
        }
        let mut rng = crate::rng::stream_rng(seed, 3_000_000);
        let zr: Vec<f64> = (0..n * d).map(|_| rng.sample(StandardNormal)).collect();
        let (xr, ex) = w.unwhiten(&zr, n);
        sets.push(log_f(&xr, n, d).iter().zip(&ex).map(|(a, b)| a + b).collect());
        solve(&sets, &bs, &eves, &[n], None, &SolveControl::default(), &|| false).unwrap()
    }

    #[test]
    fn whitening_round_trips() {
        let (n, d) = (500, 3);
        let x = gamma_draws(n, d, 1);
        let w = Whitening::fit(&x, n, &free(d), false).unwrap();
        let (z, e1) = w.whiten(&x, n).unwrap();
        let (x2, e2) = w.unwhiten(&z, n);
        for i in 0..n * d {
            assert!((x[i] - x2[i]).abs() < 1e-10);
        }
        for i in 0..n {
            assert!((e1[i] - e2[i]).abs() < 1e-9);
        }
        // whitened draws have mean 0 and identity covariance
        let (m, c) = bridge::mean_cov(&z, n, d).unwrap();
        assert!(m.iter().all(|v| v.abs() < 1e-10));
        for a in 0..d {
            for b in 0..d {
                assert!((c[a * d + b] - if a == b { 1.0 } else { 0.0 }).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn ledoit_wolf_shrinks_noise_and_keeps_strong_correlations() {
        let (n, d) = (400, 30);
        // independent columns: the sample correlations are noise, shrunk almost to zero
        let x = gamma_draws(n, d, 4);
        let (m, mut c) = bridge::mean_cov(&x, n, d).unwrap();
        let diag: Vec<f64> = (0..d).map(|a| c[a * d + a]).collect();
        let lam = shrink_cov(&x, n, d, &m, &mut c);
        assert!(lam > 0.8, "{lam}");
        assert!((0..d).all(|a| c[a * d + a] == diag[a]));
        // one common factor (correlation 0.8): little shrinkage
        let mut rng = crate::rng::stream_rng(5, 0);
        let f: Vec<f64> = (0..n).map(|_| rng.sample(StandardNormal)).collect();
        let y: Vec<f64> = (0..n * d)
            .map(|k| 0.8f64.sqrt() * f[k % n] + 0.2f64.sqrt() * rng.sample::<f64, _>(StandardNormal))
            .collect();
        let (m, mut c) = bridge::mean_cov(&y, n, d).unwrap();
        let before = c[1];
        let lam = shrink_cov(&y, n, d, &m, &mut c);
        assert!(lam < 0.05, "{lam}");
        assert!((c[1] - (1.0 - lam) * before).abs() < 1e-12);
        assert_eq!(shrink_cov(&y, n, 1, &m, &mut [1.0]), 0.0);
    }

    #[test]
    fn proposals_do_not_depend_on_threads() {
        let (n, d) = (1000, 4);
        let z = gamma_draws(n, d, 2);
        let a = crate::engine::design::with_threads(1, || pcn_propose(&z, n, d, 0.3, 5, 7))
            .unwrap()
            .unwrap();
        let b = crate::engine::design::with_threads(3, || pcn_propose(&z, n, d, 0.3, 5, 7))
            .unwrap()
            .unwrap();
        assert_eq!(a, b);
        assert!(pcn_propose(&z, n, d, 0.0, 5, 7).is_err());
    }

    #[test]
    fn systematic_resampling_follows_the_weights() {
        let t: Vec<f64> = (0..1000).map(|i| if i < 500 { 0.0 } else { -(3f64).ln() }).collect();
        // weights exp(-t): 1 for the first half, 3 for the second
        let idx = resample(&t, 1.0, 3, 0);
        let second = idx.iter().filter(|&&i| i >= 500).count();
        assert!((second as i64 - 750).abs() <= 1, "{second}");
        assert!(idx.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn accuracy_and_waymarks() {
        let t: Vec<f64> = (0..2000).map(|i| ((i as f64) * 0.731).sin() * 3.0).collect();
        assert!((pair_accuracy(&t, 0.0) - 0.5).abs() < 1e-12);
        assert!(pair_accuracy(&t, 1.0) > pair_accuracy(&t, 0.2));
        let b = next_waymark(&t, 0.0, 0.55).unwrap();
        assert!(b > 0.0 && b < 1.0);
        assert!((pair_accuracy(&t, b) - 0.55).abs() < 1e-6);
        assert_eq!(next_waymark(&[1.0; 10], 0.0, 0.55).unwrap(), 1.0);
        assert!(next_waymark(&t, 0.0, 0.5).is_err());
    }

    #[test]
    fn one_pair_is_the_bridge_estimator() {
        let r1: Vec<f64> = (0..3000).map(|i| ((i as f64) * 0.37).sin() + 0.3).collect();
        let r2: Vec<f64> = (0..2000).map(|i| ((i as f64) * 0.11).cos() - 0.2).collect();
        let eve = vec![(0..3000).collect::<Vec<usize>>()];
        let f = solve(
            &[r1.clone(), r2.clone()],
            &[0.0, 1.0],
            &eve,
            &[3000],
            None,
            &SolveControl::default(),
            &|| false,
        )
        .unwrap();
        let g = bridge::solve(&r1, &r2, [None, Some(2000.0)], &SolveControl::default(), &mut || false).unwrap();
        assert!((f.log_z - g.log_ratio).abs() < 1e-12);
        assert!((f.se - g.se).abs() < 1e-9 * g.se, "{} vs {}", f.se, g.se);
        assert!((f.se_iid - g.se_iid).abs() < 1e-9 * g.se_iid);
    }

    #[test]
    fn gamma_product_in_forty_dimensions() {
        // one classifier has accuracy near 0.85 here; the telescoped estimate is within 0.03
        let f = telescope(40, 4000, 11, 0.55, 5);
        assert!(f.c.len() > 1);
        assert!(
            f.log_z.abs() < 0.05 && f.log_z.abs() < 4.0 * f.se,
            "{} se {}",
            f.log_z,
            f.se
        );
        assert!(f.accuracy.iter().all(|&a| a < 0.6));
    }

    /// Experiment (not run by default): NCE_TELE="d n target moves seeds" cargo test --release
    /// -p nce-core telescope_experiment -- --ignored --nocapture
    #[test]
    #[ignore]
    fn telescope_experiment() {
        let spec = std::env::var("NCE_TELE").unwrap_or_else(|_| "100 5000 0.55 5 3".into());
        let v: Vec<f64> = spec.split_whitespace().map(|s| s.parse().unwrap()).collect();
        for seed in 0..v[4] as u64 {
            let t0 = std::time::Instant::now();
            let f = telescope(v[0] as usize, v[1] as usize, 1000 + seed, v[2], v[3] as usize);
            println!(
                "d {} n {} target {} moves {} seed {seed}: log Z {:.4} se {:.4} K {} time {:.1}s",
                v[0],
                v[1],
                v[2],
                v[3],
                f.log_z,
                f.se,
                f.c.len(),
                t0.elapsed().as_secs_f64()
            );
        }
    }
}
