//! Binding of nce_core::bridge: normalising constants and Bayes factors by logistic regression
//! between two samples. No numerics here.

use crate::convert::{col_major_matrix, guard, real_matrix, real_slice, to_r_matrix};
use crate::run;
use crate::threads_of;
use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::bridge::{self, Bounds, SolveControl};
use nce_core::reference::Reference;
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
        if !(tol.is_finite() && tol > 0.0) || maxit < 1 {
            return Err(NceError::invalid(
                "control",
                "tol must be positive and maxit at least 1",
            ));
        }
        let ctrl = SolveControl {
            tol,
            maxit: maxit as usize,
        };
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
        if !(n_ref.is_finite() && n_ref >= 1.0 && n_ref.fract() == 0.0) {
            return Err(NceError::invalid(
                "n_ref",
                format!("must be a positive whole number, got {n_ref}"),
            ));
        }
        if !(seed.is_finite() && seed >= 0.0) {
            return Err(NceError::invalid("seed", "must be a non-negative number"));
        }
        let bounds = lb
            .iter()
            .zip(ub)
            .map(|(&a, &b)| Bounds::new(a, b))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let n_ref = n_ref as usize;
        let out = run::run(threads_of(threads)?, |_| {
            let (uf, _) = bridge::to_unconstrained(xf, nf, &bounds)?;
            let (ue, lje) = bridge::to_unconstrained(xe, ne, &bounds)?;
            let (mean, cov) = bridge::mean_cov(&uf, nf, d)?;
            let reference = match family {
                "normal" => Reference::normal(mean.clone(), &cov),
                "t" => {
                    // Scale matching the fitted covariance when it exists (df > 2).
                    let k = if df > 2.0 { (df - 2.0) / df } else { 1.0 };
                    let scale: Vec<f64> = cov.iter().map(|v| v * k).collect();
                    Reference::student_t(mean.clone(), &scale, df)
                }
                other => Err(NceError::invalid("reference", format!("must be \"normal\" or \"t\", got '{other}'"))),
            }
            .map_err(|e| match e {
                NceError::InvalidInput { msg, .. } => NceError::invalid(
                    "draws",
                    format!("cannot fit a reference to the draws (on the unconstrained scale): {msg}; are some parameters constant or collinear?"),
                ),
                other => other,
            })?;
            let lge = reference.log_density(&ue, ne)?;
            let ur = reference.sample(n_ref, seed as u64);
            let lgr = reference.log_density(&ur, n_ref)?;
            let (xr, ljr) = bridge::from_unconstrained(&ur, n_ref, &bounds);
            Ok((mean, cov, lje, lge, xr, ljr, lgr))
        })?;
        let (mean, cov, lje, lge, xr, ljr, lgr) = out;
        Ok(list!(
            mean = mean,
            cov = to_r_matrix(&DMatrix::from_column_slice(d, d, &cov)),
            est_logjac = lje,
            est_logref = lge,
            ref_draws = col_major_matrix(xr, n_ref, d),
            ref_logjac = ljr,
            ref_logref = lgr
        )
        .into_robj())
    })
}

extendr_module! {
    mod bridge;
    fn nce_bridge_solve;
    fn nce_marglik_reference;
}
