//! Binding of nce_core::estimators::bridge: normalising constants and Bayes factors by logistic regression
//! between two samples. No numerics here.

use crate::convert::{
    col_major_matrix, count_of, guard, int_count, int_slice, list_count, list_get, list_number, real_matrix,
    real_slice, seed_of, threads_of, to_r_matrix, zero_based, Res,
};
use crate::run;
use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::estimators::bridge::{self, Bounds, ReferenceOptions, SolveControl};
use nce_core::estimators::telescope::{self, Whitening};
use nce_core::NceError;
use std::sync::atomic::Ordering;

/// Solve the 1-D logistic problem for c = log(Z1 / Z2) from the log ratios r = log f1 - log f2
/// at draws of p1 (`r1`) and of p2 (`r2`). `ess`: two effective sample sizes, NA to estimate.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_bridge_solve(r1: Robj, r2: Robj, ess: Robj, tol: f64, maxit: i32, threads: i32) -> Robj {
    guard(|| {
        let r1 = real_slice(&r1, "r1")?;
        let r2 = real_slice(&r2, "r2")?;
        let e = real_slice(&ess, "ess")?;
        if e.len() != 2 {
            return Err(NceError::invalid("ess", "must hold two values (NA to estimate)"));
        }
        let ess = [e[0], e[1]].map(|v| if v.is_nan() { None } else { Some(v) });
        let ctrl = SolveControl {
            tol,
            maxit: int_count(maxit, "maxit", 1)?,
        };
        ctrl.check()?;
        let f = run::run(threads_of(threads)?, |stop| {
            bridge::solve(r1, r2, ess, &ctrl, &mut || stop.load(Ordering::Relaxed))
        })?;
        Ok(list!(
            log_ratio = f.log_ratio,
            se = f.se,
            se_iid = f.se_iid,
            se_fisher = f.se_fisher,
            info = f.info,
            ess = f.ess.to_vec(),
            n = vec![f.n[0] as f64, f.n[1] as f64],
            iterations = f.convergence.iterations as i32,
            converged = f.convergence.converged,
            separated = f.separated,
            max_r2 = f.max_r2,
            min_r1 = f.min_r1,
            bound_lower = f.bound_lower,
            bound_upper = f.bound_upper,
            gradient = f.gradient
        )
        .into_robj())
    })
}

/// Settings of `nce_marglik_reference` from `settings = list(family, df, n_ref, seed, shrink,
/// threads)`: the reference (`bridge::ReferenceOptions`) and the thread count.
struct ReferenceSettings {
    family: String,
    df: f64,
    n_ref: usize,
    seed: u64,
    shrink: bool,
    threads: usize,
}

fn reference_settings(settings: &List) -> Res<ReferenceSettings> {
    let arg = "settings";
    let family = list_get(settings, "family", arg)?
        .as_str()
        .ok_or_else(|| NceError::invalid("settings$family", "must be a single string"))?
        .to_string();
    let shrink = list_get(settings, "shrink", arg)?
        .as_bool()
        .ok_or_else(|| NceError::invalid("settings$shrink", "must be TRUE or FALSE"))?;
    Ok(ReferenceSettings {
        family,
        df: list_number(settings, "df", arg)?,
        n_ref: list_count(settings, "n_ref", arg, 1)?,
        seed: seed_of(list_number(settings, "seed", arg)?)?,
        shrink,
        threads: list_count(settings, "threads", arg, 1)?,
    })
}

impl ReferenceSettings {
    fn options(&self) -> ReferenceOptions<'_> {
        ReferenceOptions {
            family: &self.family,
            df: self.df,
            n_ref: self.n_ref,
            seed: self.seed,
            shrink: self.shrink,
            stop: None,
        }
    }
}

/// Fit a normal or Student t reference to `fit` draws on the unconstrained scale (after the
/// `lb`/`ub` transforms), draw `n_ref` points from it and evaluate what the estimator needs:
/// at the `est` draws the log Jacobian and log reference density; the reference draws mapped
/// back to the parameter space with their log Jacobian and log reference density. `settings` as
/// `reference_settings` reads it.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_marglik_reference(fit: Robj, est: Robj, lb: Robj, ub: Robj, settings: List) -> Robj {
    guard(|| {
        let settings = reference_settings(&settings)?;
        let (xf, nf, d) = real_matrix(&fit, "fit")?;
        let (xe, ne, de) = real_matrix(&est, "est")?;
        let lb = real_slice(&lb, "lb")?;
        let ub = real_slice(&ub, "ub")?;
        if de != d || lb.len() != d || ub.len() != d {
            return Err(NceError::invalid(
                "lb",
                format!("draws, lb and ub must all have dimension {d}"),
            ));
        }
        let n_ref = settings.n_ref;
        let bounds = lb
            .iter()
            .zip(ub)
            .map(|(&a, &b)| Bounds::new(a, b))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let m = run::run(settings.threads, |stop| {
            let options = ReferenceOptions {
                stop: Some(stop),
                ..settings.options()
            };
            bridge::marglik_reference(xf, nf, xe, ne, &bounds, &options)
        })?;
        Ok(list!(
            mean = m.mean,
            cov = to_r_matrix(&DMatrix::from_column_slice(d, d, &m.cov)),
            est_logjac = m.est_logjac,
            est_logref = m.est_logref,
            ref_draws = col_major_matrix(m.ref_draws, n_ref, d),
            ref_logjac = m.ref_logjac,
            ref_logref = m.ref_logref
        )
        .into_robj())
    })
}

fn bounds_of(lb: &Robj, ub: &Robj, d: usize) -> Result<Vec<Bounds>, NceError> {
    let lb = real_slice(lb, "lb")?;
    let ub = real_slice(ub, "ub")?;
    if lb.len() != d || ub.len() != d {
        return Err(NceError::invalid("lb", format!("lb and ub must have length {d}")));
    }
    lb.iter().zip(ub).map(|(&a, &b)| Bounds::new(a, b)).collect()
}

fn whitening_of(whitening: &List) -> Result<Whitening, NceError> {
    let arg = "whitening";
    let (mean, chol) = (list_get(whitening, "mean", arg)?, list_get(whitening, "chol", arg)?);
    let (lb, ub) = (list_get(whitening, "lb", arg)?, list_get(whitening, "ub", arg)?);
    let mean = real_slice(&mean, "mean")?.to_vec();
    let d = mean.len();
    let (l, nr, nc) = real_matrix(&chol, "chol")?;
    if nr != d || nc != d {
        return Err(NceError::invalid("chol", format!("must be {d} x {d}")));
    }
    Whitening::from_parts(mean, l, &bounds_of(&lb, &ub, d)?)
}

/// Telescoping: whiten the `fit` draws' scale (mean, lower Cholesky factor) and the `est` draws,
/// with log |dx/dz| - log N(z; 0, I) at each.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tele_init(fit: Robj, est: Robj, lb: Robj, ub: Robj, shrink: bool, threads: i32) -> Robj {
    guard(|| {
        let (xf, nf, d) = real_matrix(&fit, "fit")?;
        let (xe, ne, de) = real_matrix(&est, "est")?;
        if de != d {
            return Err(NceError::invalid("est", format!("must have {d} columns")));
        }
        let bounds = bounds_of(&lb, &ub, d)?;
        let (w, z, extra) = run::run(threads_of(threads)?, |_| {
            let w = Whitening::fit(xf, nf, &bounds, shrink)?;
            let (z, extra) = w.whiten(xe, ne)?;
            Ok((w, z, extra))
        })?;
        Ok(list!(
            mean = w.mean.clone(),
            chol = to_r_matrix(&w.chol),
            z = col_major_matrix(z, ne, d),
            extra = extra
        )
        .into_robj())
    })
}

/// Telescoping: linear-mixing proposals from whitened `z` and their points in the parameter
/// space with log |dx/dz| - log N(z'; 0, I). `whitening` = list(mean, chol, lb, ub) as
/// `nce_tele_init` gives it (with the bounds); `settings` = list(beta, seed, step, threads):
/// step size `beta`, random stream `step` of `seed`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tele_propose(z: Robj, whitening: List, settings: List) -> Robj {
    guard(|| {
        let arg = "settings";
        let beta = list_number(&settings, "beta", arg)?;
        let seed = list_number(&settings, "seed", arg)?;
        let step = list_number(&settings, "step", arg)?;
        let threads = list_count(&settings, "threads", arg, 1)?;
        let (zv, n, d) = real_matrix(&z, "z")?;
        let w = whitening_of(&whitening)?;
        if w.dim() != d {
            return Err(NceError::invalid("z", format!("must have {} columns", w.dim())));
        }
        let seed = seed_of(seed)?;
        let step = count_of(step, "step", 0)? as u64;
        let (zp, x, extra) = run::run(threads, |_| {
            let zp = telescope::pcn_propose(zv, n, d, beta, seed, step)?;
            let (x, extra) = w.unwhiten(&zp, n);
            Ok((zp, x, extra))
        })?;
        Ok(list!(
            z = col_major_matrix(zp, n, d),
            x = col_major_matrix(x, n, d),
            extra = extra
        )
        .into_robj())
    })
}

/// Telescoping: Metropolis acceptance at temperature `temp`; the next waymark; resampling
/// (1-based indices).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tele_accept(t: Robj, tp: Robj, temp: f64, seed: f64, step: f64) -> Robj {
    guard(|| {
        let t = real_slice(&t, "t")?;
        let tp = real_slice(&tp, "tp")?;
        if t.len() != tp.len() {
            return Err(NceError::invalid("tp", "must match t"));
        }
        let seed = seed_of(seed)?;
        let step = count_of(step, "step", 0)? as u64;
        Ok(telescope::pcn_accept(t, tp, temp, seed, step).into_robj())
    })
}

/// @keywords internal
/// @noRd
#[extendr]
fn nce_tele_next(t: Robj, b: f64, target: f64) -> Robj {
    guard(|| Ok(telescope::next_waymark(real_slice(&t, "t")?, b, target)?.into_robj()))
}

/// @keywords internal
/// @noRd
#[extendr]
fn nce_tele_resample(t: Robj, db: f64, seed: f64, step: f64) -> Robj {
    guard(|| {
        let seed = seed_of(seed)?;
        let step = count_of(step, "step", 0)? as u64;
        let idx = telescope::resample(real_slice(&t, "t")?, db, seed, step);
        Ok(idx.iter().map(|&i| (i + 1) as i32).collect::<Vec<i32>>().into_robj())
    })
}

/// Telescoping: solve every neighbouring pair (in parallel) and combine with the standard error.
/// `sets`: list of the K + 1 vectors of t; `b`: the waymarks; `eve`: list of K integer vectors
/// (1-based draw each sample descends from); `chains`: chain lengths; `ess`: NA to estimate.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tele_solve(sets: List, b: Robj, eve: List, chains: Robj, ess: f64, threads: i32) -> Robj {
    guard(|| {
        let sets: Vec<Vec<f64>> = sets
            .values()
            .map(|v| real_slice(&v, "sets").map(|s| s.to_vec()))
            .collect::<Result<_, _>>()?;
        let n0 = sets.first().map(|s| s.len()).unwrap_or(0);
        let eve: Vec<Vec<usize>> = eve
            .values()
            .map(|v| zero_based(&v, "eve", n0))
            .collect::<Result<_, _>>()?;
        let b = real_slice(&b, "b")?;
        let chains: Vec<usize> = int_slice(&chains, "chains")?
            .iter()
            .map(|&c| c.max(0) as usize)
            .collect();
        let ess = if ess.is_nan() { None } else { Some(ess) };
        let f = run::run(threads_of(threads)?, |stop| {
            telescope::solve(&sets, b, &eve, &chains, ess, &SolveControl::default(), &|| {
                stop.load(Ordering::Relaxed)
            })
        })?;
        Ok(list!(
            log_z = f.log_z,
            se = f.se,
            se_iid = f.se_iid,
            ess = f.ess,
            c = f.c,
            se_pair = f.se_pair,
            accuracy = f.accuracy,
            converged = f.convergence.converged,
            separated = f.separated,
            iterations = f.convergence.iterations as i32
        )
        .into_robj())
    })
}

/// Effective sample size of a series of stacked chains (`chains`: their lengths): each chain's
/// long-run variance by the initial monotone sequence, deviations from the overall mean.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ess_chains(x: Robj, chains: Robj) -> Robj {
    guard(|| {
        let x = real_slice(&x, "x")?;
        let ch: Vec<usize> = int_slice(&chains, "chains")?
            .iter()
            .map(|&c| c.max(0) as usize)
            .collect();
        if ch.iter().sum::<usize>() != x.len() || ch.contains(&0) {
            return Err(NceError::invalid(
                "chains",
                format!("chain lengths must be positive and sum to {}", x.len()),
            ));
        }
        Ok(telescope::long_run_ss(x, &ch).1.into_robj())
    })
}

extendr_module! {
    mod bridge;
    fn nce_ess_chains;
    fn nce_bridge_solve;
    fn nce_marglik_reference;
    fn nce_tele_init;
    fn nce_tele_propose;
    fn nce_tele_accept;
    fn nce_tele_next;
    fn nce_tele_resample;
    fn nce_tele_solve;
}
