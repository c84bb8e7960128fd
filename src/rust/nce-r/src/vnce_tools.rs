//! Binding of the VNCE tools: truncated normal (fit, sampler, row log densities), the truncated
//! Gaussian graphical model's Gibbs sampler and the mixture-of-Gaussians VNCE / NCE / EM fits.
//! No numerics here.

use crate::convert::{col_major_matrix, guard, list_real, real_matrix, real_slice};
use crate::run;
use crate::threads_of;
use extendr_api::prelude::*;
use nce_core::mog::{EmControl, Mog};
use nce_core::optim::LbfgsControl;
use nce_core::{tgm_sim, truncnorm, NceError};
use std::sync::atomic::Ordering;

fn count_of(v: f64, arg: &str) -> std::result::Result<usize, NceError> {
    if !(v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 1e15) {
        return Err(NceError::invalid(
            arg,
            format!("must be a non-negative whole number, got {v}"),
        ));
    }
    Ok(v as usize)
}

fn seed_of(seed: f64) -> std::result::Result<u64, NceError> {
    if !(seed.is_finite() && seed >= 0.0) {
        return Err(NceError::invalid("seed", "must be a non-negative number"));
    }
    Ok(seed as u64)
}

fn number(l: &List, name: &str) -> std::result::Result<f64, NceError> {
    let v = list_real(l, name)?;
    v.as_real()
        .or_else(|| v.as_integer().map(f64::from))
        .ok_or_else(|| NceError::invalid(name, "must be a single number"))
}

/// MLE of the parent normal of data truncated to (lower, inf): list(mean, sd, loglik, converged).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_truncnorm_fit(x: Robj, lower: f64) -> Robj {
    guard(|| {
        let f = truncnorm::fit(real_slice(&x, "x")?, lower)?;
        Ok(list!(mean = f.mean, sd = f.sd, loglik = f.loglik, converged = f.converged).into_robj())
    })
}

/// n x d matrix, column j drawn from N(mean[j], sd[j]^2) truncated to (lower, inf), stream j.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_truncnorm_sample(n: f64, mean: Robj, sd: Robj, lower: f64, seed: f64, threads: i32) -> Robj {
    guard(|| {
        let n = count_of(n, "n")?;
        let (m, s) = (real_slice(&mean, "mean")?, real_slice(&sd, "sd")?);
        let seed = seed_of(seed)?;
        let draws = run::run(threads_of(threads)?, |_| {
            truncnorm::sample_columns(n, m, s, lower, seed)
        })?;
        Ok(col_major_matrix(draws, n, m.len()))
    })
}

/// Row sums over non-NA entries of log truncated normal densities, column j with (mean[j], sd[j]).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_truncnorm_log_density(x: Robj, mean: Robj, sd: Robj, lower: f64) -> Robj {
    guard(|| {
        let (xd, n, d) = real_matrix(&x, "x")?;
        let (m, s) = (real_slice(&mean, "mean")?, real_slice(&sd, "sd")?);
        if m.len() != d {
            return Err(NceError::invalid(
                "mean",
                format!("must have one entry per column of x ({d}), has {}", m.len()),
            ));
        }
        Ok(run::run(1, |_| truncnorm::row_log_density(xd, n, m, s, lower))?.into_robj())
    })
}

/// n x d draws from the truncated Gaussian graphical model by Gibbs sampling; `require_pd = FALSE`
/// accepts a K the caller found strictly copositive (positive diagonal, mean zero).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_rtgm(
    n: f64,
    k: Robj,
    mean: Robj,
    burnin: i32,
    thin: i32,
    chains: i32,
    start: Robj,
    seed: f64,
    threads: i32,
    require_pd: bool,
) -> Robj {
    guard(|| {
        let n = count_of(n, "n")?;
        let (kd, nr, nc) = real_matrix(&k, "K")?;
        let m = real_slice(&mean, "mean")?;
        if nr != nc || nr != m.len() {
            return Err(NceError::invalid(
                "K",
                format!(
                    "must be a square matrix with one row per mean ({}), is {nr} x {nc}",
                    m.len()
                ),
            ));
        }
        for (v, name) in [(burnin, "burnin"), (thin, "thin"), (chains, "chains")] {
            if v < 0 || (v == 0 && name != "burnin") {
                return Err(NceError::invalid(
                    name,
                    format!(
                        "must be a {} integer, got {v}",
                        if name == "burnin" { "non-negative" } else { "positive" }
                    ),
                ));
            }
        }
        let start = if start.is_null() {
            None
        } else {
            Some(real_slice(&start, "start")?)
        };
        let seed = seed_of(seed)?;
        let draws = run::run(threads_of(threads)?, |stop| {
            tgm_sim::simulate_checked(
                n,
                kd,
                m,
                burnin as usize,
                thin as usize,
                chains as usize,
                start,
                seed,
                stop,
                require_pd,
            )
        })?;
        Ok(col_major_matrix(draws, n, m.len()))
    })
}

/// Fit the unnormalised mixture of Gaussians by joint VNCE, NCE or the VNCE EM algorithm.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_mog(
    x: Robj,
    y: Robj,
    sigma1: f64,
    noise_mean: f64,
    noise_sd: f64,
    method: &str,
    start: List,
    control: List,
    threads: i32,
) -> Robj {
    guard(|| {
        let mog = Mog::new(real_slice(&x, "x")?, real_slice(&y, "y")?, sigma1, noise_mean, noise_sd)?;
        let theta = number(&start, "theta")?;
        let c = number(&start, "c")?;
        let w_r = list_real(&start, "w")?;
        let w = real_slice(&w_r, "w")?;
        if w.len() != 3 {
            return Err(NceError::invalid("w", format!("must have length 3, has {}", w.len())));
        }
        let maxit = number(&control, "maxit")?;
        let memory = number(&control, "memory")?;
        if !(maxit >= 0.0 && memory >= 1.0) {
            return Err(NceError::invalid(
                "control",
                "maxit must be non-negative and memory positive",
            ));
        }
        let ctrl = LbfgsControl {
            maxit: maxit as usize,
            gtol: number(&control, "gtol")?,
            ftol: number(&control, "ftol")?,
            memory: memory as usize,
        };
        let em_maxit = number(&control, "em_maxit")?;
        if !(em_maxit >= 0.0) {
            return Err(NceError::invalid("em_maxit", "must be non-negative"));
        }
        let em = EmControl {
            em_maxit: em_maxit as usize,
            em_tol: number(&control, "em_tol")?,
        };
        let threads = threads_of(threads)?;
        let method = method.to_string();
        let fit = run::run(threads, |stop| {
            let mut interrupt = || stop.load(Ordering::Relaxed);
            match method.as_str() {
                "vnce" => mog.fit_vnce(theta, c, [w[0], w[1], w[2]], &ctrl, &mut interrupt),
                "nce" => mog.fit_nce(theta, c, &ctrl, &mut interrupt),
                "em" => mog.fit_em(theta, c, &ctrl, &em, &mut interrupt),
                other => Err(NceError::invalid(
                    "method",
                    format!("must be \"vnce\", \"nce\" or \"em\", not \"{other}\""),
                )),
            }
        })?;
        let trace: Robj = if method == "em" {
            fit.trace.into_robj()
        } else {
            ().into()
        };
        Ok(list!(
            theta = fit.theta,
            c = fit.c,
            w = fit.w.to_vec(),
            objective = fit.objective,
            nce_objective = fit.nce_objective,
            iterations = fit.iterations as i32,
            evaluations = fit.evaluations as i32,
            converged = fit.converged,
            message = fit.message,
            trace = trace
        )
        .into_robj())
    })
}

/// Sandwich covariance of a mixture-of-Gaussians estimate: `method = "vnce"` over
/// p = (log theta, c, w0, w1, w2), `"nce"` over (log theta, c) (nce_core::vnce::se).
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn nce_vnce_mog_vcov(
    x: Robj,
    y: Robj,
    sigma1: f64,
    noise_mean: f64,
    noise_sd: f64,
    p: Robj,
    method: &str,
    threads: i32,
) -> Robj {
    guard(|| {
        let mog = Mog::new(real_slice(&x, "x")?, real_slice(&y, "y")?, sigma1, noise_mean, noise_sd)?;
        let p = real_slice(&p, "p")?.to_vec();
        let method = method.to_string();
        let v = run::run(threads_of(threads)?, |_| match method.as_str() {
            "vnce" => mog.vnce_vcov(&p),
            "nce" => mog.nce_vcov(&p),
            other => Err(NceError::invalid(
                "method",
                format!("must be \"vnce\" or \"nce\", not \"{other}\""),
            )),
        })?;
        Ok(crate::convert::to_r_matrix(&v))
    })
}

extendr_module! {
    mod vnce_tools;
    fn nce_truncnorm_fit;
    fn nce_truncnorm_sample;
    fn nce_truncnorm_log_density;
    fn nce_rtgm;
    fn nce_vnce_mog;
    fn nce_vnce_mog_vcov;
}
