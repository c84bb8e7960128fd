//! Random-walk Metropolis on a log density that is a sum of one-parameter functions given as
//! tables on equally spaced grids, times a box-uniform or independent normal prior. This is the
//! amortised ratio posterior of `ratio_posterior()`: with no parameter-parameter terms in the
//! classifier, the log ratio at a fixed observation is such a sum. The tables are interpolated by
//! local cubics (four nearest grid values), whose error is O(h^4) where the function is smooth
//! and O(h^3) across a spline knot. One ChaCha stream per chain, so draws do not depend on the
//! number of threads.

use crate::alloc::{checked_len, try_with_capacity};
use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use rand::Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// One-parameter functions tabulated on equally spaced grids: function j has `n` values at
/// `lo[j] + i (hi[j] - lo[j]) / (n - 1)`, stored in `values[j n .. (j + 1) n]`.
#[derive(Debug, Clone)]
pub struct SumTables {
    lo: Vec<f64>,
    hi: Vec<f64>,
    n: usize,
    values: Vec<f64>,
}

impl SumTables {
    pub fn new(lo: Vec<f64>, hi: Vec<f64>, n: usize, values: Vec<f64>) -> Result<Self> {
        let d = lo.len();
        if d == 0 || hi.len() != d {
            return Err(NceError::invalid("lo", "needs one range per parameter (at least one)"));
        }
        if n < 4 {
            return Err(NceError::invalid(
                "values",
                "needs at least 4 grid points per parameter",
            ));
        }
        if values.len() != checked_len(&[n, d], "the tables")? {
            return Err(NceError::invalid("values", "must hold n values per parameter"));
        }
        for j in 0..d {
            if !(lo[j].is_finite() && hi[j].is_finite() && lo[j] < hi[j]) {
                return Err(NceError::invalid("lo", "ranges must be finite with lo < hi"));
            }
        }
        if values.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid("values", "must be finite"));
        }
        Ok(SumTables { lo, hi, n, values })
    }

    pub fn dim(&self) -> usize {
        self.lo.len()
    }

    /// Interpolated function j at x (None outside its grid).
    fn one(&self, j: usize, x: f64) -> Option<f64> {
        let (lo, hi) = (self.lo[j], self.hi[j]);
        if !(x >= lo && x <= hi) {
            return None;
        }
        let h = (hi - lo) / (self.n - 1) as f64;
        let u = (x - lo) / h;
        // Stencil of four points i0..i0+3 around the cell of x, shifted inwards at the ends.
        let cell = (u.floor() as usize).min(self.n - 2);
        let i0 = cell.saturating_sub(1).min(self.n - 4);
        let t = u - i0 as f64;
        let f = &self.values[j * self.n + i0..j * self.n + i0 + 4];
        // Lagrange weights at nodes 0, 1, 2, 3 for position t.
        let (t0, t1, t2, t3) = (t, t - 1.0, t - 2.0, t - 3.0);
        let w0 = -t1 * t2 * t3 / 6.0;
        let w1 = t0 * t2 * t3 / 2.0;
        let w2 = -t0 * t1 * t3 / 2.0;
        let w3 = t0 * t1 * t2 / 6.0;
        Some(w0 * f[0] + w1 * f[1] + w2 * f[2] + w3 * f[3])
    }

    /// Sum of the interpolated functions at a point (None when a coordinate is off its grid).
    pub fn eval(&self, x: &[f64]) -> Option<f64> {
        let mut s = 0.0;
        for (j, &xj) in x.iter().enumerate() {
            s += self.one(j, xj)?;
        }
        Some(s)
    }
}

/// The prior of the chain: a box (log density constant inside) or independent normals.
#[derive(Debug, Clone)]
pub enum ChainPrior {
    Uniform { lower: Vec<f64>, upper: Vec<f64> },
    Normal { mean: Vec<f64>, sd: Vec<f64> },
}

impl ChainPrior {
    fn check(&self, d: usize) -> Result<()> {
        let (a, b, what) = match self {
            ChainPrior::Uniform { lower, upper } => (lower, upper, "lower/upper"),
            ChainPrior::Normal { mean, sd } => (mean, sd, "mean/sd"),
        };
        if a.len() != d || b.len() != d {
            return Err(NceError::invalid(
                "prior",
                format!("needs {what} for each of the {d} parameters"),
            ));
        }
        let ok = match self {
            ChainPrior::Uniform { lower, upper } => lower.iter().zip(upper).all(|(l, u)| l < u && !l.is_nan()),
            ChainPrior::Normal { mean, sd } => mean
                .iter()
                .zip(sd)
                .all(|(m, s)| m.is_finite() && s.is_finite() && *s > 0.0),
        };
        if !ok {
            return Err(NceError::invalid(
                "prior",
                "bounds need lower < upper; normal sds must be finite and > 0",
            ));
        }
        Ok(())
    }

    /// Log density up to a constant (-inf outside the support).
    pub(crate) fn log_density(&self, x: &[f64]) -> f64 {
        match self {
            ChainPrior::Uniform { lower, upper } => {
                if x.iter()
                    .zip(lower.iter().zip(upper))
                    .all(|(v, (l, u))| v >= l && v <= u)
                {
                    0.0
                } else {
                    f64::NEG_INFINITY
                }
            }
            ChainPrior::Normal { mean, sd } => {
                -0.5 * x
                    .iter()
                    .zip(mean.iter().zip(sd))
                    .map(|(v, (m, s))| ((v - m) / s).powi(2))
                    .sum::<f64>()
            }
        }
    }
}

/// Draws of all chains and their counts.
#[derive(Debug, Clone)]
pub struct ChainsResult {
    /// `steps x chains x d`, R's array layout (step fastest, then chain, then parameter).
    pub draws: Vec<f64>,
    /// Accepted proposals per chain after burn-in.
    pub accepted: Vec<usize>,
    /// Proposals (burn-in included) inside the prior's support but off the tables, rejected.
    pub off_table: usize,
}

/// Log target at x: prior + tables; the flag says the point was in the support but off the tables.
fn log_target(tables: &SumTables, prior: &ChainPrior, x: &[f64]) -> (f64, bool) {
    let lp = prior.log_density(x);
    if lp == f64::NEG_INFINITY {
        return (lp, false);
    }
    match tables.eval(x) {
        Some(v) => (lp + v, false),
        None => (f64::NEG_INFINITY, true),
    }
}

struct Chain {
    draws: Vec<f64>,
    accepted: usize,
    off_table: usize,
}

/// Settings of the chains: Gaussian random-walk proposals of sd `scale[j]`, `burnin` steps
/// dropped, then `steps` kept, from stream `seed` (chain c on its stream c).
#[derive(Debug, Clone, Copy)]
pub struct ChainControl<'a> {
    pub scale: &'a [f64],
    pub burnin: usize,
    pub steps: usize,
    pub seed: u64,
}

fn run_chain(
    target: &(dyn Fn(&[f64]) -> (f64, bool) + Sync),
    start: &[f64],
    ctrl: &ChainControl,
    stream: u64,
    stop: &AtomicBool,
) -> Result<Chain> {
    let ChainControl {
        scale,
        burnin,
        steps,
        seed,
    } = *ctrl;
    let d = start.len();
    let mut rng = stream_rng(seed, stream);
    let mut draws = try_with_capacity(checked_len(&[steps, d], "the draws")?, "the draws")?;
    draws.resize(steps * d, 0.0);
    let mut cur = start.to_vec();
    let mut prop = vec![0.0; d];
    let (mut lcur, _) = target(&cur);
    let (mut accepted, mut off_table) = (0usize, 0usize);
    for it in 0..burnin + steps {
        if it % 4096 == 0 && stop.load(Ordering::Relaxed) {
            return Err(NceError::Interrupted);
        }
        for j in 0..d {
            let z: f64 = rng.sample(StandardNormal);
            prop[j] = cur[j] + scale[j] * z;
        }
        let (lprop, off) = target(&prop);
        off_table += off as usize;
        let u: f64 = rng.gen();
        // NaN (both -inf) compares false: the chain stays.
        if u.ln() < lprop - lcur {
            cur.copy_from_slice(&prop);
            lcur = lprop;
            if it >= burnin {
                accepted += 1;
            }
        }
        if it >= burnin {
            let k = it - burnin;
            for j in 0..d {
                draws[k + steps * j] = cur[j];
            }
        }
    }
    Ok(Chain {
        draws,
        accepted,
        off_table,
    })
}

/// Run `starts.len() / d` chains (starts: chains x d, column-major) in parallel in the current
/// rayon pool, as `ctrl` says.
pub fn metropolis_tables(
    tables: &SumTables,
    prior: &ChainPrior,
    starts: &[f64],
    ctrl: &ChainControl,
    stop: &AtomicBool,
) -> Result<ChainsResult> {
    let d = tables.dim();
    prior.check(d)?;
    metropolis(&|x: &[f64]| log_target(tables, prior, x), d, starts, ctrl, stop)
}

/// Random-walk Metropolis on any log target of `d` variables: `target(x)` gives the log density
/// up to a constant (-inf outside the support) and a flag counted in `off_table`. Chains as in
/// `metropolis_tables`, one ChaCha stream each.
pub fn metropolis(
    target: &(dyn Fn(&[f64]) -> (f64, bool) + Sync),
    d: usize,
    starts: &[f64],
    ctrl: &ChainControl,
    stop: &AtomicBool,
) -> Result<ChainsResult> {
    let ChainControl { scale, steps, .. } = *ctrl;
    if scale.len() != d || scale.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(NceError::invalid(
            "scale",
            "must be one finite number > 0 per parameter",
        ));
    }
    if d == 0 || starts.is_empty() || starts.len() % d != 0 || starts.iter().any(|v| !v.is_finite()) {
        return Err(NceError::invalid(
            "starts",
            "must be a finite matrix with one column per parameter",
        ));
    }
    if steps == 0 {
        return Err(NceError::invalid("steps", "must be at least 1"));
    }
    let chains = starts.len() / d;
    let total = checked_len(&[steps, chains, d], "the draws")?;
    let mut draws = try_with_capacity(total, "the draws")?;
    draws.resize(total, 0.0);
    let runs: Vec<Result<Chain>> = (0..chains)
        .into_par_iter()
        .map(|c| {
            let start: Vec<f64> = (0..d).map(|j| starts[c + chains * j]).collect();
            run_chain(target, &start, ctrl, c as u64, stop)
        })
        .collect();
    let mut accepted = Vec::with_capacity(chains);
    let mut off_table = 0;
    for (c, r) in runs.into_iter().enumerate() {
        let ch = r?;
        for j in 0..d {
            let dst = steps * (c + chains * j);
            draws[dst..dst + steps].copy_from_slice(&ch.draws[steps * j..steps * (j + 1)]);
        }
        accepted.push(ch.accepted);
        off_table += ch.off_table;
    }
    Ok(ChainsResult {
        draws,
        accepted,
        off_table,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;

    fn grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64).collect()
    }

    #[test]
    fn cubic_interpolation_is_exact_for_cubics_and_close_for_smooth_functions() {
        let f = |x: f64| 0.5 * x.powi(3) - x * x + 2.0;
        let xs = grid(-1.0, 2.0, 7);
        let t = SumTables::new(vec![-1.0], vec![2.0], 7, xs.iter().map(|&x| f(x)).collect()).unwrap();
        for &x in &[-1.0, -0.93, 0.0, 0.31, 1.77, 2.0] {
            assert!((t.eval(&[x]).unwrap() - f(x)).abs() < 1e-12);
        }
        assert!(t.eval(&[2.0001]).is_none());
        // sin on 1025 points over (0, 6.3): error below h^4 max|f''''| / 24 (6e-11; 3.4e-11 inside).
        let n = 1025;
        let xs = grid(0.0, 6.3, n);
        let t = SumTables::new(vec![0.0], vec![6.3], n, xs.iter().map(|x| x.sin()).collect()).unwrap();
        let err = (0..1000)
            .map(|i| 6.3 * i as f64 / 999.0)
            .map(|x| (t.eval(&[x]).unwrap() - x.sin()).abs());
        assert!(err.fold(0.0, f64::max) < 6.1e-11);
    }

    /// Gaussian target: tables of -x^2 / (2 s^2) (s = 0.5 and 2), box prior wide enough to be
    /// irrelevant; means and sds of the draws against the truth, within Monte Carlo error.
    fn gaussian_run(threads: usize, seed: u64) -> ChainsResult {
        let n = 2001;
        let sds = [0.5, 2.0];
        let (lo, hi) = (vec![-10.0, -10.0], vec![10.0, 12.0]);
        let mut values = Vec::new();
        for j in 0..2 {
            values.extend(grid(lo[j], hi[j], n).iter().map(|x| -x * x / (2.0 * sds[j] * sds[j])));
        }
        let t = SumTables::new(lo.clone(), hi.clone(), n, values).unwrap();
        let prior = ChainPrior::Uniform { lower: lo, upper: hi };
        let chains = 20;
        let starts: Vec<f64> = (0..2 * chains).map(|i| (i % 7) as f64 * 0.1).collect();
        let stop = AtomicBool::new(false);
        with_threads(threads, || {
            metropolis_tables(
                &t,
                &prior,
                &starts,
                &ChainControl {
                    scale: &[1.2, 4.8],
                    burnin: 200,
                    steps: 5000,
                    seed,
                },
                &stop,
            )
            .unwrap()
        })
        .unwrap()
    }

    #[test]
    fn gaussian_target_is_recovered_and_thread_invariant() {
        let a = gaussian_run(1, 3);
        let b = gaussian_run(3, 3);
        assert_eq!(a.draws, b.draws);
        assert_eq!(a.accepted, b.accepted);
        let per = 5000 * 20;
        for (j, s) in [0.5f64, 2.0].iter().enumerate() {
            let x = &a.draws[per * j..per * (j + 1)];
            let m = x.iter().sum::<f64>() / per as f64;
            let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / per as f64;
            // ESS about per / 5 for this scale: sd of the mean about s / 220; 5 of those.
            assert!(m.abs() < 5.0 * s / 220.0, "mean {m}");
            assert!((v.sqrt() / s - 1.0).abs() < 0.03, "sd {}", v.sqrt());
        }
        assert_eq!(a.off_table, 0);
        let rate = a.accepted.iter().sum::<usize>() as f64 / per as f64;
        assert!(rate > 0.2 && rate < 0.6, "acceptance {rate}");
    }

    #[test]
    fn normal_prior_and_off_table_proposals() {
        // Flat tables on (-1, 1), standard normal prior: the target is the normal truncated to
        // the tables, and proposals beyond them are counted.
        let n = 11;
        let t = SumTables::new(vec![-1.0], vec![1.0], n, vec![0.0; n]).unwrap();
        let prior = ChainPrior::Normal {
            mean: vec![0.0],
            sd: vec![1.0],
        };
        let stop = AtomicBool::new(false);
        let r = metropolis_tables(
            &t,
            &prior,
            &[0.0, 0.5],
            &ChainControl {
                scale: &[1.0],
                burnin: 10,
                steps: 20000,
                seed: 1,
            },
            &stop,
        )
        .unwrap();
        assert!(r.off_table > 0);
        assert!(r.draws.iter().all(|x| x.abs() <= 1.0));
        // Truncated N(0, 1) on (-1, 1): variance 1 - 2 phi(1) / (2 Phi(1) - 1) = 0.2911.
        let m = r.draws.iter().sum::<f64>() / r.draws.len() as f64;
        let v = r.draws.iter().map(|x| (x - m).powi(2)).sum::<f64>() / r.draws.len() as f64;
        assert!((v - 0.2911).abs() < 0.02, "variance {v}");
    }

    #[test]
    fn malformed_input_is_refused() {
        let stop = AtomicBool::new(false);
        assert!(SumTables::new(vec![0.0], vec![1.0], 3, vec![0.0; 3]).is_err());
        assert!(SumTables::new(vec![1.0], vec![0.0], 4, vec![0.0; 4]).is_err());
        assert!(SumTables::new(vec![0.0], vec![1.0], 4, vec![0.0, f64::NAN, 0.0, 0.0]).is_err());
        let t = SumTables::new(vec![0.0], vec![1.0], 4, vec![0.0; 4]).unwrap();
        let box1 = ChainPrior::Uniform {
            lower: vec![0.0],
            upper: vec![1.0],
        };
        // Five kept steps from stream 1 with proposal sd `scale`, after no burn-in.
        let five = |scale| ChainControl {
            scale,
            burnin: 0,
            steps: 5,
            seed: 1,
        };
        assert!(metropolis_tables(&t, &box1, &[0.5], &five(&[0.0]), &stop).is_err());
        assert!(metropolis_tables(&t, &box1, &[f64::NAN], &five(&[0.1]), &stop).is_err());
        let none = ChainControl {
            steps: 0,
            ..five(&[0.1])
        };
        assert!(metropolis_tables(&t, &box1, &[0.5], &none, &stop).is_err());
        let bad = ChainPrior::Normal {
            mean: vec![0.0],
            sd: vec![-1.0],
        };
        assert!(metropolis_tables(&t, &bad, &[0.5], &five(&[0.1]), &stop).is_err());
        stop.store(true, Ordering::Relaxed);
        assert_eq!(
            metropolis_tables(&t, &box1, &[0.5], &five(&[0.1]), &stop).unwrap_err(),
            NceError::Interrupted
        );
    }
}
