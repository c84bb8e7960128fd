//! Thin extendr binding: converts R objects, calls nce-core, returns plain R lists.
//! No numerics here.

mod bridge;
mod convert;
mod run;
mod spatial;
mod vnce;
mod vnce_tools;

use convert::{col_major_matrix, guard, int_slice, list_real, real_matrix, real_slice, to_r_matrix};
use extendr_api::prelude::*;
use nce_core::alias::{find_aliased, reduce};
use nce_core::design::DenseDesign;
use nce_core::family::Family;
use nce_core::grouped::{fit_reml_free_intercepts, FreeInterceptFit, GroupedDesign};
use nce_core::irls::{self, Control, Problem};
use nce_core::kernel::NormalKernel;
use nce_core::latkes_sim::LatticeKernel;
use nce_core::penalty::{Penalty, PenaltySet};
use nce_core::reference::Reference;
use nce_core::reml::{fit_reml, RemlControl, RemlFit};
use nce_core::sandwich::{grouped_cluster_sandwich, sample_sandwich};
use nce_core::NceError;
use std::sync::atomic::Ordering;

pub(crate) fn threads_of(threads: i32) -> std::result::Result<usize, NceError> {
    if threads < 1 {
        return Err(NceError::invalid(
            "threads",
            format!("must be a positive integer, got {threads}"),
        ));
    }
    Ok(threads as usize)
}

/// Fit a GLM-type objective by Newton/IRLS; with `sample` (0-based sample index per row,
/// or NULL) also the NCE sandwich covariance.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_glm(
    x: Robj,
    y: Robj,
    weights: Robj,
    offset: Robj,
    family: &str,
    sample: Robj,
    control: List,
    threads: i32,
) -> Robj {
    guard(|| {
        let (xd, n, p) = real_matrix(&x, "x")?;
        let (y, w, o, fam) = response_parts(&y, &weights, &offset, family)?;
        let sample = sample_of(&sample, n)?;
        let num = |name: &str| -> std::result::Result<f64, NceError> {
            list_real(&control, name)?
                .as_real()
                .ok_or_else(|| NceError::invalid(name, "must be a number"))
        };
        let ctrl = Control {
            epsilon: num("epsilon")?,
            maxit: num("maxit")? as usize,
            ..Control::default()
        };
        let threads = threads_of(threads)?;
        let design = DenseDesign::new(xd, n, p)?;
        let (fit, sandwich) = run::run(threads, |stop| {
            let prob = Problem {
                y,
                prior_weights: w,
                offset: o,
                family: fam,
                penalty: None,
                start: None,
            };
            let fit = irls::fit(&design, &prob, &ctrl, &mut || stop.load(Ordering::Relaxed))?;
            let sw = match &sample {
                Some(s) => Some(sample_sandwich(&design, &fit.row_grad, s, &fit.cov, &fit.aliased)?),
                None => None,
            };
            Ok((fit, sw))
        })?;
        Ok(list!(
            coefficients = fit.coefficients,
            aliased = fit.aliased,
            cov = to_r_matrix(&fit.cov),
            cov_sandwich = sandwich.map(|s| to_r_matrix(&s)).unwrap_or_else(|| ().into()),
            eta = fit.eta,
            fitted = fit.fitted,
            loglik = fit.loglik,
            deviance = fit.deviance,
            iterations = fit.iterations as i32,
            converged = fit.converged,
            n_certain = fit.n_certain as i32,
            message = fit.message
        )
        .into_robj())
    })
}

fn penalties_from(pens: &List, p: usize) -> std::result::Result<PenaltySet, NceError> {
    let mut out = Vec::with_capacity(pens.len());
    for (k, (_, item)) in pens.iter().enumerate() {
        let l: List = item
            .try_into()
            .map_err(|_| NceError::invalid("penalties", format!("element {} must be a list(start, S)", k + 1)))?;
        let start = list_real(&l, "start")?
            .as_real()
            .ok_or_else(|| NceError::invalid("start", format!("of penalty {} must be a number", k + 1)))?;
        let s_robj = list_real(&l, "S")?;
        let (sd, nr, nc) = real_matrix(&s_robj, "S")?;
        if nr != nc || start < 0.0 {
            return Err(NceError::invalid(
                "penalties",
                format!("penalty {} must be square with a start >= 0", k + 1),
            ));
        }
        out.push(Penalty {
            start: start as usize,
            s: nalgebra::DMatrix::from_column_slice(nr, nc, sd),
        });
    }
    PenaltySet::new(p, out)
}

/// Penalised fit with smoothing parameters by REML (or fixed `sp`), and the NCE sandwich
/// with the penalised Hessian as bread when `sample` is given.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml(
    x: Robj,
    y: Robj,
    weights: Robj,
    offset: Robj,
    family: &str,
    sample: Robj,
    penalties: List,
    sp: Robj,
    control: List,
    threads: i32,
) -> Robj {
    guard(|| {
        let (xd, n, p) = real_matrix(&x, "x")?;
        let (y, w, o, fam) = response_parts(&y, &weights, &offset, family)?;
        let sample = sample_of(&sample, n)?;
        let pens = penalties_from(&penalties, p)?;
        let ctrl = reml_control(&sp, &control)?;
        let threads = threads_of(threads)?;
        let design = DenseDesign::new(xd, n, p)?;
        let (fit, sandwich, aliased) = run::run(threads, |stop| {
            let prob = Problem {
                y,
                prior_weights: w,
                offset: o,
                family: fam,
                penalty: None,
                start: None,
            };
            let aliased = find_aliased(&design, &pens, 1e-9);
            let reduced = if aliased.iter().any(|&a| a) {
                Some(reduce(&design, &pens, &aliased)?)
            } else {
                None
            };
            let (d, ps) = match &reduced {
                Some(r) => (DenseDesign::new(&r.data, n, r.ncol)?, &r.penalties),
                None => (design, &pens),
            };
            let mut fit = fit_reml(&d, &prob, ps, &ctrl, &mut || stop.load(Ordering::Relaxed))?;
            let mut sw = match &sample {
                Some(s) => Some(sample_sandwich(&d, &fit.fit.row_grad, s, &fit.vp, &fit.fit.aliased)?),
                None => None,
            };
            if let Some(r) = &reduced {
                // Back to the full set of columns: aliased coefficients are 0, as in mgcv.
                fit.coefficients = expand_vec(&fit.coefficients, &r.kept, p);
                fit.edf = expand_vec(&fit.edf, &r.kept, p);
                fit.vp = expand_matrix(&fit.vp, &r.kept, p);
                fit.ve = expand_matrix(&fit.ve, &r.kept, p);
                sw = sw.map(|m| expand_matrix(&m, &r.kept, p));
            }
            Ok((fit, sw, aliased))
        })?;
        Ok(reml_result(fit, sandwich, aliased))
    })
}

/// REML fit on the grouped design [A | B[group, ]]: A holds row-level columns, B one row
/// per group (e.g. the spline intercept of a transition, shared by its data and reference rows).
/// `group` is 1-based. No alias handling: the caller's set-up keeps the design identifiable.
/// With `cluster` (1-based cluster of each group, or NULL) also the clustered sandwich.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml_grouped(
    a: Robj,
    b: Robj,
    group: Robj,
    y: Robj,
    weights: Robj,
    offset: Robj,
    family: &str,
    cluster: Robj,
    penalties: List,
    sp: Robj,
    control: List,
    threads: i32,
) -> Robj {
    guard(|| {
        let (ad, n, pa) = real_matrix(&a, "a")?;
        let (bd, ng, pb) = real_matrix(&b, "b")?;
        let g = int_slice(&group, "group")?;
        if let Some(i) = g.iter().position(|&v| v < 1 || v as usize > ng) {
            return Err(NceError::invalid(
                "group",
                format!("entry {} is {}, outside 1..{ng}", i + 1, g[i]),
            ));
        }
        let g0: Vec<usize> = g.iter().map(|&v| v as usize - 1).collect();
        let (y, w, o, fam) = response_parts(&y, &weights, &offset, family)?;
        let cluster: Option<Vec<usize>> = if cluster.is_null() {
            None
        } else {
            let c = int_slice(&cluster, "cluster")?;
            if c.len() != ng || c.iter().any(|&v| v < 1) {
                return Err(NceError::invalid(
                    "cluster",
                    format!("must hold {ng} positive integers, one per group"),
                ));
            }
            Some(c.iter().map(|&v| v as usize - 1).collect())
        };
        let pens = penalties_from(&penalties, pa + pb)?;
        let ctrl = reml_control(&sp, &control)?;
        let threads = threads_of(threads)?;
        let design = GroupedDesign::new(ad, n, pa, bd, ng, pb, &g0)?;
        let (fit, sandwich) = run::run(threads, |stop| {
            let prob = Problem {
                y,
                prior_weights: w,
                offset: o,
                family: fam,
                penalty: None,
                start: None,
            };
            let fit = fit_reml(&design, &prob, &pens, &ctrl, &mut || stop.load(Ordering::Relaxed))?;
            let sw = match &cluster {
                Some(c) => Some(grouped_cluster_sandwich(
                    ad,
                    n,
                    pa,
                    bd,
                    ng,
                    pb,
                    &g0,
                    c,
                    &fit.fit.row_grad,
                    &fit.vp,
                    &fit.fit.aliased,
                )?),
                None => None,
            };
            Ok((fit, sw))
        })?;
        Ok(reml_result(fit, sandwich, vec![false; pa + pb]))
    })
}

/// REML fit on [A | one free intercept per group] (e.g. one per transition), the intercepts
/// eliminated per group so the cost is linear in the number of groups. `group` is 1-based
/// (every group in 1..ngroups must have rows); A has no intercept column. Returns what
/// `nce_fit_reml_grouped` returns for the columns of A (`cov_sandwich`: clustered by `cluster`),
/// plus `intercepts` and `intercept_se`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml_free_intercepts(
    a: Robj,
    group: Robj,
    ngroups: i32,
    y: Robj,
    weights: Robj,
    offset: Robj,
    family: &str,
    cluster: Robj,
    penalties: List,
    sp: Robj,
    control: List,
    threads: i32,
) -> Robj {
    guard(|| {
        let (ad, n, pa) = real_matrix(&a, "a")?;
        if ngroups < 1 {
            return Err(NceError::invalid("ngroups", "must be at least 1"));
        }
        let ng = ngroups as usize;
        let g = int_slice(&group, "group")?;
        if let Some(i) = g.iter().position(|&v| v < 1 || v as usize > ng) {
            return Err(NceError::invalid(
                "group",
                format!("entry {} is {}, outside 1..{ng}", i + 1, g[i]),
            ));
        }
        let g0: Vec<usize> = g.iter().map(|&v| v as usize - 1).collect();
        let (y, w, o, fam) = response_parts(&y, &weights, &offset, family)?;
        let cluster: Option<Vec<usize>> = if cluster.is_null() {
            None
        } else {
            let c = int_slice(&cluster, "cluster")?;
            if c.len() != ng || c.iter().any(|&v| v < 1) {
                return Err(NceError::invalid(
                    "cluster",
                    format!("must hold {ng} positive integers, one per group"),
                ));
            }
            Some(c.iter().map(|&v| v as usize - 1).collect())
        };
        let pens = penalties_from(&penalties, pa)?;
        let ctrl = reml_control(&sp, &control)?;
        let threads = threads_of(threads)?;
        let fit = run::run(threads, |stop| {
            let prob = Problem {
                y,
                prior_weights: w,
                offset: o,
                family: fam,
                penalty: None,
                start: None,
            };
            fit_reml_free_intercepts(ad, n, pa, &g0, ng, &prob, &pens, &ctrl, cluster.as_deref(), &mut || {
                stop.load(Ordering::Relaxed)
            })
        })?;
        let FreeInterceptFit {
            reml,
            intercepts,
            intercept_se,
            sandwich,
        } = fit;
        let message = if reml.message.is_empty() {
            reml.fit.message.clone()
        } else {
            reml.message.clone()
        };
        Ok(list!(
            coefficients = reml.coefficients,
            sp = reml.sp,
            vp = to_r_matrix(&reml.vp),
            ve = to_r_matrix(&reml.ve),
            edf = reml.edf,
            reml = reml.reml,
            at_bound = reml.at_bound,
            aliased = vec![false; pa],
            cov_sandwich = sandwich.map(|s| to_r_matrix(&s)).unwrap_or_else(|| ().into()),
            eta = reml.fit.eta,
            fitted = reml.fit.fitted,
            loglik = reml.fit.loglik,
            deviance = reml.fit.deviance,
            outer_iterations = reml.outer_iterations as i32,
            inner_iterations = reml.inner_iterations as i32,
            converged = reml.converged && reml.fit.converged,
            n_certain = reml.fit.n_certain as i32,
            message = message,
            intercepts = intercepts,
            intercept_se = intercept_se
        )
        .into_robj())
    })
}

/// Response, prior weights, offset and family of a fit, checked.
fn response_parts<'a>(
    y: &'a Robj,
    weights: &'a Robj,
    offset: &'a Robj,
    family: &str,
) -> std::result::Result<(&'a [f64], &'a [f64], &'a [f64], Family), NceError> {
    let fam = Family::parse(family).ok_or_else(|| NceError::invalid("family", format!("unknown family '{family}'")))?;
    Ok((
        real_slice(y, "y")?,
        real_slice(weights, "weights")?,
        real_slice(offset, "offset")?,
        fam,
    ))
}

fn reml_control(sp: &Robj, control: &List) -> std::result::Result<RemlControl, NceError> {
    let sp: Option<Vec<f64>> = if sp.is_null() {
        None
    } else {
        Some(real_slice(sp, "sp")?.to_vec())
    };
    let num = |name: &str| -> std::result::Result<f64, NceError> {
        list_real(control, name)?
            .as_real()
            .ok_or_else(|| NceError::invalid(name, "must be a number"))
    };
    let mut ctrl = RemlControl {
        sp,
        ..RemlControl::default()
    };
    ctrl.inner.epsilon = ctrl.inner.epsilon.min(num("epsilon")?);
    ctrl.inner.maxit = num("maxit")? as usize;
    Ok(ctrl)
}

fn reml_result(fit: RemlFit, sandwich: Option<nalgebra::DMatrix<f64>>, aliased: Vec<bool>) -> Robj {
    list!(
        coefficients = fit.coefficients,
        sp = fit.sp,
        vp = to_r_matrix(&fit.vp),
        ve = to_r_matrix(&fit.ve),
        edf = fit.edf,
        reml = fit.reml,
        at_bound = fit.at_bound,
        aliased = aliased,
        cov_sandwich = sandwich.map(|s| to_r_matrix(&s)).unwrap_or_else(|| ().into()),
        eta = fit.fit.eta,
        fitted = fit.fit.fitted,
        loglik = fit.fit.loglik,
        deviance = fit.fit.deviance,
        outer_iterations = fit.outer_iterations as i32,
        inner_iterations = fit.inner_iterations as i32,
        converged = fit.converged && fit.fit.converged,
        n_certain = fit.fit.n_certain as i32,
        message = if fit.message.is_empty() {
            fit.fit.message
        } else {
            fit.message
        }
    )
    .into_robj()
}

fn expand_vec(v: &[f64], kept: &[usize], p: usize) -> Vec<f64> {
    let mut out = vec![0.0; p];
    for (k, &j) in kept.iter().enumerate() {
        out[j] = v[k];
    }
    out
}

fn expand_matrix(m: &nalgebra::DMatrix<f64>, kept: &[usize], p: usize) -> nalgebra::DMatrix<f64> {
    let mut out = nalgebra::DMatrix::zeros(p, p);
    for (a, &i) in kept.iter().enumerate() {
        for (b, &j) in kept.iter().enumerate() {
            out[(i, j)] = m[(a, b)];
        }
    }
    out
}

fn sample_of(sample: &Robj, n: usize) -> std::result::Result<Option<Vec<usize>>, NceError> {
    if sample.is_null() {
        return Ok(None);
    }
    let s = int_slice(sample, "sample")?;
    if s.len() != n || s.iter().any(|&v| v < 0) {
        return Err(NceError::invalid(
            "sample",
            format!("must hold {n} non-negative integers"),
        ));
    }
    Ok(Some(s.iter().map(|&v| v as usize).collect()))
}

fn reference_from(spec: &List) -> std::result::Result<Reference, NceError> {
    let kind: String = list_real(spec, "kind")?
        .as_str()
        .ok_or_else(|| NceError::invalid("kind", "must be a string"))?
        .to_string();
    let vecf = |name: &str| -> std::result::Result<Vec<f64>, NceError> {
        let r = list_real(spec, name)?;
        Ok(real_slice(&r, name)?.to_vec())
    };
    match kind.as_str() {
        "uniform" => Reference::uniform(vecf("lower")?, vecf("upper")?),
        "normal" => Reference::normal(vecf("mean")?, &vecf("sigma")?),
        other => Err(NceError::invalid(
            "reference",
            format!("no built-in sampler of kind '{other}'"),
        )),
    }
}

/// Draw `n` points from a built-in reference; a column-major n x d matrix.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_sample(spec: List, n: f64, seed: f64, threads: i32) -> Robj {
    guard(|| {
        if !(n.is_finite() && n >= 0.0 && n.fract() == 0.0) {
            return Err(NceError::invalid(
                "n",
                format!("must be a non-negative whole number, got {n}"),
            ));
        }
        if !(seed.is_finite() && seed >= 0.0) {
            return Err(NceError::invalid("seed", "must be a non-negative number"));
        }
        let r = reference_from(&spec)?;
        let n = n as usize;
        let d = r.dim();
        let draws = run::run(threads_of(threads)?, |_| Ok(r.sample(n, seed as u64)))?;
        Ok(col_major_matrix(draws, n, d))
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

fn normal_kernel(sd: &Robj, lower: &Robj, upper: &Robj) -> std::result::Result<NormalKernel, NceError> {
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
        if !(n.is_finite() && n >= 1.0 && n.fract() == 0.0) || !(seed.is_finite() && seed >= 0.0) {
            return Err(NceError::invalid(
                "n",
                "n must be a positive whole number and seed non-negative",
            ));
        }
        let n = n as usize;
        let draws = run::run(threads_of(threads)?, |_| k.sample(pd, t, n, seed as u64))?;
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

/// Simulate LATKES chains on a grid: `state` (log, nx * ny) and `offset` (log,
/// (2 nx - 1) * (2 ny - 1)) tables, `window` = (xmin, xmax, ymin, ymax), one start (x, y;
/// NaN to draw it) and one number of steps per chain. Returns list(x, y).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_latkes_simulate(
    state: Robj,
    offset: Robj,
    grid: Robj,
    window: Robj,
    start_x: Robj,
    start_y: Robj,
    steps: Robj,
    seed: f64,
    threads: i32,
) -> Robj {
    guard(|| {
        let g = int_slice(&grid, "grid")?;
        let w = real_slice(&window, "window")?;
        if g.len() != 2 || g.iter().any(|&v| v < 1) || w.len() != 4 {
            return Err(NceError::invalid(
                "grid",
                "grid must be two positive integers and window four numbers",
            ));
        }
        let k = LatticeKernel::new(
            g[0] as usize,
            g[1] as usize,
            [w[0], w[1], w[2], w[3]],
            real_slice(&state, "state")?,
            real_slice(&offset, "offset")?,
        )?;
        let sx = real_slice(&start_x, "start_x")?;
        let sy = real_slice(&start_y, "start_y")?;
        let st = int_slice(&steps, "steps")?;
        if sx.len() != st.len() || sy.len() != st.len() || st.iter().any(|&v| v < 0) {
            return Err(NceError::invalid(
                "steps",
                "needs one start and a non-negative number of steps per chain",
            ));
        }
        if !(seed.is_finite() && seed >= 0.0) {
            return Err(NceError::invalid("seed", "must be a non-negative number"));
        }
        let starts: Vec<(f64, f64)> = sx.iter().zip(sy).map(|(&a, &b)| (a, b)).collect();
        let steps: Vec<usize> = st.iter().map(|&v| v as usize).collect();
        let (x, y) = run::run(threads_of(threads)?, |_| k.simulate(&starts, &steps, seed as u64))?;
        Ok(list!(x = x, y = y).into_robj())
    })
}

/// For tests of the error path: returns an error carrying `msg`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_debug_error(msg: &str) -> Robj {
    guard(|| Err(NceError::invalid("msg", msg.to_string())))
}

/// For tests of the panic path: panics on the main thread or, with `worker`, inside the pool.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_debug_panic(msg: &str, worker: bool) -> Robj {
    guard(|| {
        if worker {
            let m = msg.to_string();
            run::run(2, move |_| -> std::result::Result<(), NceError> { panic!("{}", m) })?;
            Ok(().into())
        } else {
            panic!("{}", msg)
        }
    })
}

extendr_module! {
    mod nce;
    use bridge;
    use vnce_tools;
    use vnce;
    use spatial;
    fn nce_fit_glm;
    fn nce_fit_reml;
    fn nce_fit_reml_grouped;
    fn nce_fit_reml_free_intercepts;
    fn nce_ref_sample;
    fn nce_ref_log_density;
    fn nce_kernel_normal_sample;
    fn nce_kernel_normal_log_density;
    fn nce_latkes_simulate;
    fn nce_debug_error;
    fn nce_debug_panic;
}
