//! Binding of the built-in references and the truncated normal random-walk kernel: draws and
//! log densities. No numerics here.

use crate::convert::{
    col_major_matrix, count_of, guard, list_count, list_get, list_number, list_vec, real_matrix, real_slice, seed_of,
    threads_of, Res,
};
use crate::run;
use extendr_api::prelude::*;
use nce_core::sampling::kernel::NormalKernel;
use nce_core::sampling::mixture_fit::{fit_mixture_bic, MixtureControl};
use nce_core::sampling::reference::Reference;
use nce_core::NceError;

fn reference_from(spec: &List) -> Res<Reference> {
    let kind = list_get(spec, "kind", "reference")?;
    let kind = kind
        .as_str()
        .ok_or_else(|| NceError::invalid("kind", "must be a string"))?;
    let vecf = |name: &str| list_vec(spec, name, "reference");
    match kind {
        "uniform" => Reference::uniform(vecf("lower")?, vecf("upper")?),
        "normal" => Reference::normal(vecf("mean")?, &vecf("sigma")?),
        "mixture" => Reference::mixture(vecf("weights")?, &vecf("means")?, &vecf("sigmas")?),
        other => Err(NceError::invalid(
            "reference",
            format!("no built-in sampler of kind '{other}'"),
        )),
    }
}

/// `n` draws from a built-in reference: a list of the d `columns` (plain vectors, which R joins
/// into a data frame without copying; R never holds the draws as a matrix, and pooled fits draw
/// millions of rows) and, with `log_density = TRUE`, their log density from the same pass
/// (NULL otherwise), the same values as `nce_ref_log_density()` on the draws.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_sample(spec: List, n: f64, seed: f64, log_density: bool, threads: i32) -> Robj {
    guard(|| {
        let n = count_of(n, "n", 0)?;
        let seed = seed_of(seed)?;
        let r = reference_from(&spec)?;
        let d = r.dim();
        let (draws, lq) = run::run(threads_of(threads)?, |_| {
            let draws = r.sample(n, seed)?;
            let lq = if log_density {
                Some(r.log_density(&draws, n)?)
            } else {
                None
            };
            Ok((draws, lq))
        })?;
        let columns = List::from_values((0..d).map(|j| draws[j * n..(j + 1) * n].into_robj()));
        let log_density = lq.map_or_else(|| ().into_robj(), |v| v.into_robj());
        Ok(list!(columns = columns, log_density = log_density).into_robj())
    })
}

/// log q of a built-in reference at the rows of a matrix.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_log_density(spec: List, x: Robj, threads: i32) -> Robj {
    guard(|| {
        let r = reference_from(&spec)?;
        let (xd, n, p) = real_matrix(&x, "x")?;
        if p != r.dim() {
            return Err(NceError::invalid(
                "x",
                format!("has {p} columns, the reference has {}", r.dim()),
            ));
        }
        let out = run::run(threads_of(threads)?, |_| r.log_density(xd, n))?;
        Ok(out.into_robj())
    })
}

/// Gaussian mixtures fitted by EM to the rows of `x`, one per number of `components`, and the
/// one BIC chooses; `settings` = list(components, n_starts, max_iter, tol, seed, threads).
/// Returns list(components, df, loglik, bic, iterations, converged: one per number tried; chosen
/// (1-based); weights, means (d x G), sigmas (d x d x G, flat) of the chosen fit).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_mixture_fit(x: Robj, settings: List) -> Robj {
    guard(|| {
        let (xd, n, d) = real_matrix(&x, "x")?;
        let components = list_vec(&settings, "components", "settings")?
            .into_iter()
            .map(|g| count_of(g, "components", 1))
            .collect::<Res<Vec<usize>>>()?;
        let control = MixtureControl {
            n_starts: list_count(&settings, "n_starts", "settings", 1)?,
            max_iter: list_count(&settings, "max_iter", "settings", 1)?,
            tol: list_number(&settings, "tol", "settings")?,
            seed: seed_of(list_number(&settings, "seed", "settings")?)?,
        };
        let threads = list_count(&settings, "threads", "settings", 1)?;
        let sel = run::run(threads, |stop| fit_mixture_bic(xd, n, d, &components, &control, stop))?;
        let best = &sel.fits[sel.chosen];
        let g = best.weights.len();
        Ok(list!(
            components = sel.components.iter().map(|&g| g as i32).collect::<Vec<i32>>(),
            df = sel.df.iter().map(|&p| p as f64).collect::<Vec<f64>>(),
            loglik = sel.fits.iter().map(|f| f.loglik).collect::<Vec<f64>>(),
            bic = sel.bic,
            iterations = sel.fits.iter().map(|f| f.iterations as i32).collect::<Vec<i32>>(),
            converged = sel.fits.iter().map(|f| f.converged).collect::<Vec<bool>>(),
            chosen = (sel.chosen + 1) as i32,
            weights = best.weights.clone(),
            means = col_major_matrix(best.means.clone(), d, g),
            sigmas = best.covs.clone()
        )
        .into_robj())
    })
}

fn normal_kernel(sd: &Robj, lower: &Robj, upper: &Robj) -> Res<NormalKernel> {
    NormalKernel::new(
        real_slice(sd, "sd")?.to_vec(),
        real_slice(lower, "lower")?.to_vec(),
        real_slice(upper, "upper")?.to_vec(),
    )
}

/// `n` draws per previous state (rows of `prev`) from the truncated normal random walk.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_kernel_normal_sample(sd: Robj, lower: Robj, upper: Robj, prev: Robj, n: f64, seed: f64, threads: i32) -> Robj {
    guard(|| {
        let k = normal_kernel(&sd, &lower, &upper)?;
        let (pd, t, d) = real_matrix(&prev, "prev")?;
        if d != k.dim() {
            return Err(NceError::invalid(
                "prev",
                format!("has {d} columns, the kernel has {}", k.dim()),
            ));
        }
        let n = count_of(n, "n", 1)?;
        let seed = seed_of(seed)?;
        let draws = run::run(threads_of(threads)?, |_| k.sample(pd, t, n, seed))?;
        Ok(col_major_matrix(draws, t * n, d))
    })
}

/// log q(x | prev) of the truncated normal random walk, row by row.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_kernel_normal_log_density(sd: Robj, lower: Robj, upper: Robj, x: Robj, prev: Robj, threads: i32) -> Robj {
    guard(|| {
        let k = normal_kernel(&sd, &lower, &upper)?;
        let (xd, rows, d) = real_matrix(&x, "x")?;
        let (pd, prow, pdim) = real_matrix(&prev, "prev")?;
        if d != k.dim() || pdim != d || prow != rows {
            return Err(NceError::invalid(
                "x",
                "x and prev must be matrices of the same size, one column per state",
            ));
        }
        let out = run::run(threads_of(threads)?, |_| k.log_density(xd, pd, rows))?;
        Ok(out.into_robj())
    })
}

extendr_module! {
    mod reference;
    fn nce_ref_sample;
    fn nce_ref_log_density;
    fn nce_mixture_fit;
    fn nce_kernel_normal_sample;
    fn nce_kernel_normal_log_density;
}
