//! Binding of nce_core::vnce: variational NCE for the truncated Gaussian graphical model with
//! missing values. No numerics here.

use crate::convert::{col_major_matrix, guard, list_real, real_matrix, real_slice, to_r_matrix};
use crate::run;
use crate::threads_of;
use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::optim::LbfgsControl;
use nce_core::vnce::{self, param_names, Terms, TgmParams, TgmVnce};
use nce_core::NceError;
use std::sync::atomic::Ordering;

type Res<T> = std::result::Result<T, NceError>;

/// A number from a list element given as double or integer.
fn list_number(l: &List, name: &str, arg: &str) -> Res<f64> {
    let v = list_real(l, name).map_err(|_| NceError::invalid(arg, format!("has no element `{name}`")))?;
    v.as_real()
        .or_else(|| v.as_integer().map(|i| i as f64))
        .ok_or_else(|| NceError::invalid(arg, format!("`{name}` must be a single number")))
}

/// The VNCE problem from the R arguments (matrices column-major, NA for missing).
fn problem(x: &Robj, y: &Robj, lpx: &Robj, lpy: &Robj, n_latent: i32, seed: f64) -> Res<TgmVnce> {
    let (xd, n, d) = real_matrix(x, "x")?;
    let (yd, m, dy) = real_matrix(y, "y")?;
    if dy != d {
        return Err(NceError::invalid(
            "y",
            format!("must have ncol(x) = {d} columns, got {dy}"),
        ));
    }
    let lpx = real_slice(lpx, "lpx")?;
    let lpy = real_slice(lpy, "lpy")?;
    if n_latent < 1 {
        return Err(NceError::invalid(
            "n_latent",
            format!("must be a positive integer, got {n_latent}"),
        ));
    }
    if !(seed.is_finite() && seed >= 0.0) {
        return Err(NceError::invalid("seed", "must be a non-negative number"));
    }
    TgmVnce::new(xd, n, d, yd, m, lpx, lpy, n_latent as usize, seed as u64)
}

/// Parameters from list(K, c, mu, prec); `arg` names the list in errors.
fn params_of(l: &List, d: usize, arg: &str) -> Res<TgmParams> {
    let matrix = |name: &str| -> Res<DMatrix<f64>> {
        let r = list_real(l, name).map_err(|_| NceError::invalid(arg, format!("has no element `{name}`")))?;
        let (v, nr, nc) =
            real_matrix(&r, arg).map_err(|_| NceError::invalid(arg, format!("`{name}` must be a double matrix")))?;
        if nr != d || nc != d {
            return Err(NceError::invalid(
                arg,
                format!("`{name}` must be {d} x {d}, got {nr} x {nc}"),
            ));
        }
        Ok(DMatrix::from_column_slice(d, d, v))
    };
    let k = matrix("K")?;
    let prec = matrix("prec")?;
    let c = list_number(l, "c", arg)?;
    let mu_r = list_real(l, "mu").map_err(|_| NceError::invalid(arg, "has no element `mu`"))?;
    let mu = real_slice(&mu_r, arg).map_err(|_| NceError::invalid(arg, "`mu` must be a double vector"))?;
    if mu.len() != d {
        return Err(NceError::invalid(
            arg,
            format!("`mu` must have length {d}, got {}", mu.len()),
        ));
    }
    TgmParams::from_precision(k, c, mu.to_vec(), &prec, arg)
}

fn control_of(control: &List) -> Res<LbfgsControl> {
    let num = |name: &str| list_number(control, name, "control");
    let ctrl = LbfgsControl {
        maxit: num("maxit")? as usize,
        gtol: num("gtol")?,
        ftol: num("ftol")?,
        memory: num("memory")? as usize,
    };
    if ctrl.maxit < 1 || ctrl.memory < 1 || !(ctrl.gtol >= 0.0) || !(ctrl.ftol >= 0.0) {
        return Err(NceError::invalid(
            "control",
            "maxit and memory must be at least 1, gtol and ftol non-negative",
        ));
    }
    Ok(ctrl)
}

/// The VNCE objective J (maximised) and its gradient in the packing order at `params`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_tgm_objective(
    x: Robj,
    y: Robj,
    lpx: Robj,
    lpy: Robj,
    n_latent: i32,
    seed: f64,
    params: List,
    threads: i32,
) -> Robj {
    guard(|| {
        let pr = problem(&x, &y, &lpx, &lpy, n_latent, seed)?;
        let p = params_of(&params, pr.dim(), "params")?;
        let (value, gradient) = run::run(threads_of(threads)?, |_| pr.evaluate(&p, Terms::Both))?;
        Ok(list!(value = value, gradient = gradient, packing = param_names(pr.dim())).into_robj())
    })
}

/// K and c from list(K, c); `arg` names the list in errors.
fn theta_of(l: &List, d: usize, arg: &str) -> Res<(DMatrix<f64>, f64)> {
    let r = list_real(l, "K").map_err(|_| NceError::invalid(arg, "has no element `K`"))?;
    let (v, nr, nc) = real_matrix(&r, arg).map_err(|_| NceError::invalid(arg, "`K` must be a double matrix"))?;
    if nr != d || nc != d {
        return Err(NceError::invalid(
            arg,
            format!("`K` must be {d} x {d}, got {nr} x {nc}"),
        ));
    }
    Ok((DMatrix::from_column_slice(d, d, v), list_number(l, "c", arg)?))
}

/// Fit the truncated Gaussian graphical model exp(-x'Kx/2 - c) on (0, inf)^d by variational NCE,
/// missing values (NA) as latent variables. `family`: "ghk" (q = the model's truncated-normal
/// posterior through the GHK simulator; `start` = list(K, c)) or "lognormal" (joint lognormal q,
/// `start` = list(K, c, mu, prec) with `prec` the precision of log x). `y`: nu * nrow(x) noise
/// rows, row k missing where data row k mod n is; `lpx`, `lpy`: log noise density of each row's
/// observed coordinates. The result has `mu` and `prec` for the lognormal family only.
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn nce_vnce_tgm(
    x: Robj,
    y: Robj,
    lpx: Robj,
    lpy: Robj,
    n_latent: i32,
    seed: f64,
    start: List,
    control: List,
    threads: i32,
    family: &str,
) -> Robj {
    guard(|| {
        let pr = problem(&x, &y, &lpx, &lpy, n_latent, seed)?;
        let ctrl = control_of(&control)?;
        let threads = threads_of(threads)?;
        let (k, c, q, r) = match family {
            "ghk" => {
                let (k0, c0) = theta_of(&start, pr.dim(), "start")?;
                let f = run::run(threads, |stop| {
                    vnce::fit_ghk(&pr, &k0, c0, &ctrl, &mut || stop.load(Ordering::Relaxed))
                })?;
                (f.k, f.c, None, f.report)
            }
            "lognormal" => {
                let st = params_of(&start, pr.dim(), "start")?;
                st.check_k_positive_definite("start")?;
                let f = run::run(threads, |stop| {
                    vnce::fit(&pr, &st, &ctrl, &mut || stop.load(Ordering::Relaxed))
                })?;
                (f.params.k, f.params.c, Some((f.params.mu, f.precision)), f.report)
            }
            other => {
                return Err(NceError::invalid(
                    "family",
                    format!("must be \"ghk\" or \"lognormal\", got \"{other}\""),
                ))
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
            iterations = r.iterations as i32,
            evaluations = r.evaluations as i32,
            converged = r.converged,
            message = r.message,
            grad_norm = r.grad_norm
        )
        .into_robj())
    })
}

/// The GHK-family objective J (maximised) and its gradient wrt (K upper triangle row by row, c).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_vnce_tgm_ghk_objective(
    x: Robj,
    y: Robj,
    lpx: Robj,
    lpy: Robj,
    n_latent: i32,
    seed: f64,
    params: List,
    threads: i32,
) -> Robj {
    guard(|| {
        let pr = problem(&x, &y, &lpx, &lpy, n_latent, seed)?;
        let (k, c) = theta_of(&params, pr.dim(), "params")?;
        let (value, gradient) = run::run(threads_of(threads)?, |_| pr.ghk_objective(&k, c))?;
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
        let (kd, kr, kc) = real_matrix(&k, "K")?;
        if kr != d || kc != d {
            return Err(NceError::invalid("K", format!("must be {d} x {d}, got {kr} x {kc}")));
        }
        if n_draws < 1 {
            return Err(NceError::invalid(
                "n_draws",
                format!("must be a positive integer, got {n_draws}"),
            ));
        }
        if !(seed.is_finite() && seed >= 0.0) {
            return Err(NceError::invalid("seed", "must be a non-negative number"));
        }
        let km = DMatrix::from_column_slice(d, d, kd);
        let out = run::run(threads_of(threads)?, |_| {
            vnce::ghk_impute(xd, n, d, &km, n_draws as usize, seed as u64)
        })?;
        Ok(col_major_matrix(out, n, d))
    })
}

/// Sandwich covariance of a fitted VNCE estimate (nce_core::vnce::se): for `family = "ghk"` over
/// theta = (K upper triangle row by row, c) at `params` = list(K, c); for "lognormal" over all
/// packed parameters at list(K, c, mu, prec). The same x, y, lpx, lpy, n_latent and seed as the
/// fit give the same fixed draws. Returns list(vcov, names).
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn nce_vnce_tgm_vcov(
    x: Robj,
    y: Robj,
    lpx: Robj,
    lpy: Robj,
    n_latent: i32,
    seed: f64,
    params: List,
    family: &str,
    threads: i32,
) -> Robj {
    guard(|| {
        let pr = problem(&x, &y, &lpx, &lpy, n_latent, seed)?;
        let d = pr.dim();
        let threads = threads_of(threads)?;
        let (v, names) = match family {
            "ghk" => {
                let (k, c) = theta_of(&params, d, "params")?;
                let v = run::run(threads, |_| pr.ghk_vcov(&k, c))?;
                let names: Vec<String> = param_names(d).into_iter().take(vnce::n_params(d)).collect();
                let nt = d * (d + 1) / 2 + 1;
                (v, names.into_iter().take(nt).collect::<Vec<_>>())
            }
            "lognormal" => {
                let p = params_of(&params, d, "params")?;
                let v = run::run(threads, |_| pr.lognormal_vcov(&p))?;
                (v, param_names(d))
            }
            other => {
                return Err(NceError::invalid(
                    "family",
                    format!("must be \"ghk\" or \"lognormal\", got \"{other}\""),
                ))
            }
        };
        Ok(list!(vcov = to_r_matrix(&v), names = names).into_robj())
    })
}

extendr_module! {
    mod vnce;
    fn nce_vnce_tgm;
    fn nce_vnce_tgm_objective;
    fn nce_vnce_tgm_ghk_objective;
    fn nce_ghk_impute;
    fn nce_vnce_tgm_vcov;
}
