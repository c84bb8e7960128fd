//! Binding of nce_core::bridge: normalising constants and Bayes factors by logistic regression
//! between two samples. No numerics here.

use crate::convert::{
    col_major_matrix, count_of, guard, int_count, real_matrix, real_slice, seed_of, threads_of, to_r_matrix,
};
use crate::run;
use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::bridge::{self, Bounds, SolveControl};
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
            iterations = f.iterations as i32,
            converged = f.converged,
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

/// Fit a normal or Student t reference to `fit` draws on the unconstrained scale (after the
/// `lb`/`ub` transforms), draw `n_ref` points from it and evaluate what the estimator needs:
/// at the `est` draws the log Jacobian and log reference density; the reference draws mapped
/// back to the parameter space with their log Jacobian and log reference density.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn nce_marglik_reference(
    fit: Robj,
    est: Robj,
    lb: Robj,
    ub: Robj,
    family: &str,
    df: f64,
    n_ref: f64,
    seed: f64,
    threads: i32,
) -> Robj {
    guard(|| {
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
        let n_ref = count_of(n_ref, "n_ref", 1)?;
        let seed = seed_of(seed)?;
        let bounds = lb
            .iter()
            .zip(ub)
            .map(|(&a, &b)| Bounds::new(a, b))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let m = run::run(threads_of(threads)?, |_| {
            bridge::marglik_reference(xf, nf, xe, ne, &bounds, family, df, n_ref, seed)
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

extendr_module! {
    mod bridge;
    fn nce_bridge_solve;
    fn nce_marglik_reference;
}
