//! Binding of nce_core::estimators::vnce: variational NCE for the truncated Gaussian graphical model with
//! missing values. No numerics here.

use crate::convert::{
    col_major_matrix, guard, int_count, lbfgs_control, list_count, list_get, list_number, real_matrix, real_slice,
    seed_of, square_matrix, threads_of, to_r_matrix, Res,
};
use crate::run;
use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::estimators::vnce::{self, param_names, TgmParams, TgmVnce, VnceSamples};
use nce_core::NceError;
use std::sync::atomic::Ordering;

/// Settings of the TGM entry points, from `settings = list(n_latent, seed, threads, family)`:
/// `n_latent` draws per row with missing values from stream `seed` (the same for a fit and its
/// covariance); `family` ("ghk" or "lognormal") where the entry point needs it.
struct VnceSettings {
    n_latent: usize,
    seed: u64,
    threads: usize,
    family: Option<Family>,
}

fn vnce_settings(settings: &List) -> Res<VnceSettings> {
    let family = match settings.iter().find(|(n, _)| *n == "family") {
        Some((_, f)) => {
            Some(family_of(f.as_str().ok_or_else(|| {
                NceError::invalid("settings$family", "must be a single string")
            })?)?)
        }
        None => None,
    };
    Ok(VnceSettings {
        n_latent: list_count(settings, "n_latent", "settings", 1)?,
        seed: seed_of(list_number(settings, "seed", "settings")?)?,
        threads: list_count(settings, "threads", "settings", 1)?,
        family,
    })
}

impl VnceSettings {
    fn family(&self) -> Res<&Family> {
        self.family
            .as_ref()
            .ok_or_else(|| NceError::invalid("settings", "has no element `family`"))
    }
}

/// The VNCE problem from `samples = list(x, y, lpx, lpy)` (matrices column-major, NA for
/// missing) and the draws of `settings`.
fn problem(samples: &List, settings: &VnceSettings) -> Res<TgmVnce> {
    let x = list_get(samples, "x", "samples")?;
    let y = list_get(samples, "y", "samples")?;
    let lpx = list_get(samples, "lpx", "samples")?;
    let lpy = list_get(samples, "lpy", "samples")?;
    let (xd, n, d) = real_matrix(&x, "x")?;
    let (yd, m, dy) = real_matrix(&y, "y")?;
    if dy != d {
        return Err(NceError::invalid(
            "y",
            format!("must have ncol(x) = {d} columns, got {dy}"),
        ));
    }
    let lpx = real_slice(&lpx, "lpx")?;
    let lpy = real_slice(&lpy, "lpy")?;
    TgmVnce::new(
        &VnceSamples {
            x: xd,
            n,
            d,
            y: yd,
            m,
            lpx,
            lpy,
        },
        settings.n_latent,
        settings.seed,
    )
}

/// The variational family of the TGM fits.
enum Family {
    Ghk,
    Lognormal,
}

fn family_of(family: &str) -> Res<Family> {
    match family {
        "ghk" => Ok(Family::Ghk),
        "lognormal" => Ok(Family::Lognormal),
        other => Err(NceError::invalid(
            "family",
            format!("must be \"ghk\" or \"lognormal\", got \"{other}\""),
        )),
    }
}

/// A d x d matrix element `name` of the list `arg`.
fn list_matrix(l: &List, name: &str, d: usize, arg: &str) -> Res<DMatrix<f64>> {
    square_matrix(&list_get(l, name, arg)?, &format!("{arg}${name}"), d)
}

/// Parameters from list(K, c, mu, prec); `arg` names the list in errors.
fn params_of(l: &List, d: usize, arg: &str) -> Res<TgmParams> {
    let (k, c) = theta_of(l, d, arg)?;
    let prec = list_matrix(l, "prec", d, arg)?;
    let mu_r = list_get(l, "mu", arg)?;
    let mu = real_slice(&mu_r, &format!("{arg}$mu"))?;
    if mu.len() != d {
        return Err(NceError::invalid(
            arg,
            format!("`mu` must have length {d}, got {}", mu.len()),
        ));
    }
    TgmParams::from_precision(k, c, mu.to_vec(), &prec, arg)
}

/// K and c from list(K, c); `arg` names the list in errors.
fn theta_of(l: &List, d: usize, arg: &str) -> Res<(DMatrix<f64>, f64)> {
    Ok((list_matrix(l, "K", d, arg)?, list_number(l, "c", arg)?))
}

/// Fit the truncated Gaussian graphical model exp(-x'Kx/2 - c) on (0, inf)^d by variational NCE,
/// missing values (NA) as latent variables. `family`: "ghk" (q = the model's truncated-normal
/// posterior through the GHK simulator; `start` = list(K, c)) or "lognormal" (joint lognormal q,
/// `start` = list(K, c, mu, prec) with `prec` the precision of log x). `samples` = list(x, y,
/// lpx, lpy): `y` nu * nrow(x) noise rows, row k missing where data row k mod n is; `lpx`, `lpy`
/// the log noise density of each row's observed coordinates. `settings` = list(n_latent, seed,
/// threads, family). The result has `mu` and `prec` for the lognormal family only.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_tgm(samples: List, start: List, control: List, settings: List) -> Robj {
    guard(|| {
        let settings = vnce_settings(&settings)?;
        let pr = problem(&samples, &settings)?;
        let ctrl = lbfgs_control(&control)?;
        let threads = settings.threads;
        let (k, c, q, r) = match settings.family()? {
            Family::Ghk => {
                let (k0, c0) = theta_of(&start, pr.dim(), "start")?;
                let f = run::run(threads, |stop| {
                    vnce::fit_ghk(&pr, &k0, c0, &ctrl, &mut || stop.load(Ordering::Relaxed))
                })?;
                (f.k, f.c, None, f.report)
            }
            Family::Lognormal => {
                let st = params_of(&start, pr.dim(), "start")?;
                st.check_k_positive_definite("start")?;
                let f = run::run(threads, |stop| {
                    vnce::fit(&pr, &st, &ctrl, &mut || stop.load(Ordering::Relaxed))
                })?;
                (f.params.k, f.params.c, Some((f.params.mu, f.precision)), f.report)
            }
        };
        let (mu, prec) = match q {
            Some((mu, prec)) => (mu.into_robj(), to_r_matrix(&prec)),
            None => (().into_robj(), ().into_robj()),
        };
        Ok(list!(
            K = to_r_matrix(&k),
            c = c,
            mu = mu,
            prec = prec,
            objective = r.objective,
            iterations = r.convergence.iterations as i32,
            evaluations = r.evaluations as i32,
            converged = r.convergence.converged,
            message = r.convergence.message,
            grad_norm = r.grad_norm
        )
        .into_robj())
    })
}

/// The GHK-family objective J (maximised) and its gradient wrt (K upper triangle row by row, c);
/// `samples` and `settings` as for `nce_vnce_tgm` (no `family`).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_tgm_ghk_objective(samples: List, params: List, settings: List) -> Robj {
    guard(|| {
        let settings = vnce_settings(&settings)?;
        let pr = problem(&samples, &settings)?;
        let (k, c) = theta_of(&params, pr.dim(), "params")?;
        let (value, gradient) = run::run(settings.threads, |_| pr.ghk_objective(&k, c))?;
        Ok(list!(value = value, gradient = gradient).into_robj())
    })
}

/// Posterior means of the missing values (NA) of `x` under precision K by self-normalised GHK
/// importance sampling with `n_draws` draws per row.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ghk_impute(x: Robj, k: Robj, n_draws: i32, seed: f64, threads: i32) -> Robj {
    guard(|| {
        let (xd, n, d) = real_matrix(&x, "x")?;
        let km = square_matrix(&k, "K", d)?;
        let n_draws = int_count(n_draws, "n_draws", 1)?;
        let seed = seed_of(seed)?;
        let out = run::run(threads_of(threads)?, |_| vnce::ghk_impute(xd, n, d, &km, n_draws, seed))?;
        Ok(col_major_matrix(out, n, d))
    })
}

/// Sandwich covariance of a fitted VNCE estimate (nce_core::estimators::vnce::se): for `family = "ghk"` over
/// theta = (K upper triangle row by row, c) at `params` = list(K, c); for "lognormal" over all
/// packed parameters at list(K, c, mu, prec). The same `samples` and `settings` (n_latent, seed)
/// as the fit give the same fixed draws. Returns list(vcov, names).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_tgm_vcov(samples: List, params: List, settings: List) -> Robj {
    guard(|| {
        let settings = vnce_settings(&settings)?;
        let pr = problem(&samples, &settings)?;
        let d = pr.dim();
        let threads = settings.threads;
        let (v, names) = match settings.family()? {
            Family::Ghk => {
                let (k, c) = theta_of(&params, d, "params")?;
                let v = run::run(threads, |_| pr.ghk_vcov(&k, c))?;
                // theta = (K upper triangle, c): the first d (d + 1) / 2 + 1 packed names.
                (v, param_names(d).into_iter().take(d * (d + 1) / 2 + 1).collect())
            }
            Family::Lognormal => {
                let p = params_of(&params, d, "params")?;
                let v = run::run(threads, |_| pr.lognormal_vcov(&p))?;
                (v, param_names(d))
            }
        };
        Ok(list!(vcov = to_r_matrix(&v), names = names).into_robj())
    })
}

extendr_module! {
    mod vnce;
    fn nce_vnce_tgm;
    fn nce_vnce_tgm_ghk_objective;
    fn nce_ghk_impute;
    fn nce_vnce_tgm_vcov;
}
