//! Binding of the VNCE tools: truncated normal (fit, sampler, row log densities), the truncated
//! Gaussian graphical model's Gibbs sampler and the mixture-of-Gaussians VNCE / NCE / EM fits.
//! No numerics here.

use crate::convert::{
    col_major_matrix, count_of, guard, lbfgs_control, list_count, list_get, list_number, list_vec, opt_real_slice,
    real_matrix, real_slice, seed_of, threads_of, Res,
};
use crate::run;
use extendr_api::prelude::*;
use nce_core::estimators::mog::{EmControl, Mog};
use nce_core::sampling::{tgm_sim, truncnorm};
use nce_core::NceError;
use std::sync::atomic::Ordering;

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
        let n = count_of(n, "n", 0)?;
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

/// Settings of the Gibbs sampler from `settings = list(burnin, thin, chains, start, seed, threads,
/// require_pd)`; `start` may be NULL.
struct GibbsSettings {
    burnin: usize,
    thin: usize,
    chains: usize,
    start: Option<Vec<f64>>,
    seed: u64,
    threads: usize,
    require_pd: bool,
}

fn gibbs_settings(settings: &List) -> Res<GibbsSettings> {
    let arg = "settings";
    let start = list_get(settings, "start", arg)?;
    let require_pd = list_get(settings, "require_pd", arg)?
        .as_bool()
        .ok_or_else(|| NceError::invalid("settings$require_pd", "must be TRUE or FALSE"))?;
    Ok(GibbsSettings {
        burnin: list_count(settings, "burnin", arg, 0)?,
        thin: list_count(settings, "thin", arg, 1)?,
        chains: list_count(settings, "chains", arg, 1)?,
        start: opt_real_slice(&start, "start")?.map(<[f64]>::to_vec),
        seed: seed_of(list_number(settings, "seed", arg)?)?,
        threads: list_count(settings, "threads", arg, 1)?,
        require_pd,
    })
}

/// n x d draws from the truncated Gaussian graphical model by Gibbs sampling, as `settings`
/// (`gibbs_settings`) says; `require_pd = FALSE` accepts a K the caller found strictly copositive
/// (positive diagonal, mean zero).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_rtgm(n: f64, k: Robj, mean: Robj, settings: List) -> Robj {
    guard(|| {
        let settings = gibbs_settings(&settings)?;
        let n = count_of(n, "n", 0)?;
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
        let g = tgm_sim::Gibbs {
            burnin: settings.burnin,
            thin: settings.thin,
            chains: settings.chains,
            start: settings.start.as_deref(),
            require_pd: settings.require_pd,
        };
        let seed = settings.seed;
        let draws = run::run(settings.threads, |stop| tgm_sim::simulate(n, kd, m, &g, seed, stop))?;
        Ok(col_major_matrix(draws, n, m.len()))
    })
}

/// The mixture-of-Gaussians problem from `model = list(x, y, sigma1, noise_mean, noise_sd)`: data,
/// noise sample, the model's fixed sd and the noise's mean and sd.
fn mog_of(model: &List) -> Res<Mog> {
    let arg = "model";
    let x = list_get(model, "x", arg)?;
    let y = list_get(model, "y", arg)?;
    Mog::new(
        real_slice(&x, "x")?,
        real_slice(&y, "y")?,
        list_number(model, "sigma1", arg)?,
        list_number(model, "noise_mean", arg)?,
        list_number(model, "noise_sd", arg)?,
    )
}

/// Fit the unnormalised mixture of Gaussians (`model` as `mog_of` reads it) by joint VNCE, NCE or
/// the VNCE EM algorithm.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_mog(model: List, method: &str, start: List, control: List, threads: i32) -> Robj {
    guard(|| {
        let mog = mog_of(&model)?;
        let theta = list_number(&start, "theta", "start")?;
        let c = list_number(&start, "c", "start")?;
        let w = list_vec(&start, "w", "start")?;
        if w.len() != 3 {
            return Err(NceError::invalid("w", format!("must have length 3, has {}", w.len())));
        }
        let ctrl = lbfgs_control(&control)?;
        let em = EmControl {
            em_maxit: list_count(&control, "em_maxit", "control", 0)?,
            em_tol: list_number(&control, "em_tol", "control")?,
        };
        em.check()?;
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
            iterations = fit.convergence.iterations as i32,
            evaluations = fit.evaluations as i32,
            converged = fit.convergence.converged,
            message = fit.convergence.message,
            trace = trace
        )
        .into_robj())
    })
}

/// Sandwich covariance of a mixture-of-Gaussians estimate: `method = "vnce"` over
/// p = (log theta, c, w0, w1, w2), `"nce"` over (log theta, c) (nce_core::estimators::vnce::se);
/// `model` as for `nce_vnce_mog`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_mog_vcov(model: List, p: Robj, method: &str, threads: i32) -> Robj {
    guard(|| {
        let mog = mog_of(&model)?;
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
