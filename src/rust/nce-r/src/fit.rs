//! Binding of the penalised engine: GLM-type fits by Newton/IRLS and penalised fits with
//! smoothing parameters by REML, dense or grouped, with their NCE sandwiches. No numerics here.

use crate::convert::{
    block_columns, count_of, guard, int_slice, irls_control, list_count, list_get, list_number, matrix_blocks,
    opt_real_slice, real_matrix, real_slice, to_r_matrix, zero_based, Res,
};
use crate::run;
use extendr_api::prelude::*;
use nce_core::engine::alias::fit_reml_dense;
use nce_core::engine::design::{DenseDesign, Design};
use nce_core::engine::discrete::{DiscreteDesign, Layout, TermSpec};
use nce_core::engine::family::Family;
use nce_core::engine::grouped::{fit_reml_free_intercepts, FreeGroups, FreeInterceptFit, GroupedDesign};
use nce_core::engine::irls::{self, Control, Problem};
use nce_core::engine::penalty::{Penalty, PenaltySet};
use nce_core::engine::reml::{fit_reml, RemlControl, RemlFit};
use nce_core::engine::sandwich::{grouped_cluster_sandwich, sample_sandwich};
use nce_core::NceError;
use std::sync::atomic::Ordering;

/// The rows' response of a fit, from `response = list(y, weights, offset)` (double vectors,
/// one entry per row); the R objects are kept so that the fit borrows their data. `weights`
/// NULL means 1 for every row (held here, so R need not allocate a vector of ones per fit).
pub(crate) struct Response {
    y: Robj,
    weights: Robj,
    unit_weights: Vec<f64>,
    offset: Robj,
}

pub(crate) fn response_of(response: &List) -> Res<Response> {
    let y = list_get(response, "y", "response")?;
    let weights = list_get(response, "weights", "response")?;
    let unit_weights = if weights.is_null() {
        vec![1.0; real_slice(&y, "response$y")?.len()]
    } else {
        Vec::new()
    };
    Ok(Response {
        y,
        weights,
        unit_weights,
        offset: list_get(response, "offset", "response")?,
    })
}

impl Response {
    /// The response with the family of `settings` (the penalty comes separately).
    pub(crate) fn problem(&self, settings: &FitSettings) -> Res<Problem<'_>> {
        let weights = if self.weights.is_null() {
            &self.unit_weights[..]
        } else {
            real_slice(&self.weights, "response$weights")?
        };
        Ok(Problem::new(
            real_slice(&self.y, "response$y")?,
            weights,
            real_slice(&self.offset, "response$offset")?,
            settings.family,
        ))
    }
}

/// Settings of the fits, from `settings = list(family, sp, control = list(epsilon, maxit),
/// threads)`; `sp` (fixed smoothing parameters) may be NULL or absent. The free-intercept and
/// sharded fits also need `ngroups` (groups), `shards` and `pa` (columns of A): see `count`.
pub(crate) struct FitSettings {
    pub family: Family,
    pub sp: Option<Vec<f64>>,
    /// The inner fits' `control`: convergence tolerance and most iterations.
    pub epsilon: f64,
    pub maxit: usize,
    pub threads: usize,
    /// A discretised design's layout: `settings$layout` ("auto", "compressed" or "dense"),
    /// None for "auto" or absent.
    pub layout: Option<Layout>,
    /// (name, value) of the counts given.
    counts: Vec<(&'static str, usize)>,
}

pub(crate) fn fit_settings(settings: &List) -> Res<FitSettings> {
    let family = list_get(settings, "family", "settings")?;
    let family = family
        .as_str()
        .ok_or_else(|| NceError::invalid("settings$family", "must be a single string"))?;
    let family =
        Family::parse(family).ok_or_else(|| NceError::invalid("family", format!("unknown family '{family}'")))?;
    let sp = match settings.iter().find(|(n, _)| *n == "sp") {
        Some((_, v)) => opt_real_slice(&v, "sp")?.map(<[f64]>::to_vec),
        None => None,
    };
    let mut counts = Vec::new();
    for name in ["ngroups", "shards", "pa"] {
        if settings.iter().any(|(n, _)| n == name) {
            counts.push((name, list_count(settings, name, "settings", 0)?));
        }
    }
    let layout = match settings.iter().find(|(n, _)| *n == "layout") {
        None => None,
        Some((_, v)) => match v.as_str() {
            Some("auto") => None,
            Some("compressed") => Some(Layout::Compressed),
            Some("dense") => Some(Layout::Dense),
            _ => {
                return Err(NceError::invalid(
                    "settings$layout",
                    "must be \"auto\", \"compressed\" or \"dense\"",
                ))
            }
        },
    };
    let control: List = list_get(settings, "control", "settings")?
        .try_into()
        .map_err(|_| NceError::invalid("settings$control", "must be a list(epsilon, maxit)"))?;
    Ok(FitSettings {
        family,
        sp,
        epsilon: list_number(&control, "epsilon", "control")?,
        maxit: list_count(&control, "maxit", "control", 0)?,
        threads: list_count(settings, "threads", "settings", 1)?,
        layout,
        counts,
    })
}

impl FitSettings {
    /// The count `name` (`ngroups`, `shards` or `pa`), which must be given and at least `min`.
    pub(crate) fn count(&self, name: &str, min: usize) -> Res<usize> {
        let &(_, v) = self
            .counts
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| NceError::invalid("settings", format!("has no element `{name}`")))?;
        if v < min {
            return Err(NceError::invalid(
                &format!("settings${name}"),
                format!("must be at least {min}, got {v}"),
            ));
        }
        Ok(v)
    }

    /// Newton/IRLS settings over the defaults, checked by the core.
    pub(crate) fn irls(&self) -> Res<Control> {
        irls_control(self.epsilon, self.maxit, Control::default())
    }

    /// REML settings: fixed `sp` if given; the inner fits need at least the default precision
    /// for REML's derivatives.
    pub(crate) fn reml(&self) -> Res<RemlControl> {
        let base = RemlControl::default();
        let mut inner = irls_control(self.epsilon, self.maxit, base.inner.clone())?;
        inner.epsilon = inner.epsilon.min(base.inner.epsilon);
        let ctrl = RemlControl {
            sp: self.sp.clone(),
            inner,
            ..base
        };
        ctrl.check()?;
        Ok(ctrl)
    }
}

/// Fit a GLM-type objective by Newton/IRLS; with `sample` (0-based sample index per row,
/// or NULL) also the NCE sandwich covariance. `response` and `settings` as `response_of` and
/// `fit_settings` read them (no `sp`).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_glm(x: Robj, response: List, sample: Robj, settings: List) -> Robj {
    guard(|| {
        let (xd, n, p) = real_matrix(&x, "x")?;
        let settings = fit_settings(&settings)?;
        let response = response_of(&response)?;
        let prob = response.problem(&settings)?;
        let sample = sample_of(&sample, n)?;
        let ctrl = settings.irls()?;
        let threads = settings.threads;
        let design = DenseDesign::new(xd, n, p)?;
        let (fit, sandwich) = run::run(threads, |stop| {
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
            iterations = fit.convergence.iterations as i32,
            converged = fit.convergence.converged,
            n_certain = fit.n_certain as i32,
            message = fit.convergence.message
        )
        .into_robj())
    })
}

/// Penalised fit with smoothing parameters by REML (or fixed `sp`), and the NCE sandwich
/// with the penalised Hessian as bread when `sample` is given. `x` may also be a discretised
/// design, a list of terms `list(values, index)` as for `nce_fit_reml_grouped`'s `a`, fitted
/// compressed (no alias handling then: the caller's set-up keeps the design identifiable) or
/// expanded into one dense block as the cost model or `settings$layout` says; the result then
/// names it in `layout`. `response` and `settings` as for `nce_fit_glm`, `settings$sp` the fixed
/// smoothing parameters or NULL. `x` may also be a list of blocks (class `"nce_blocks"`: R
/// matrices and Rust-held rows), read in place.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml(x: Robj, response: List, sample: Robj, penalties: List, settings: List) -> Robj {
    guard(|| {
        let settings = fit_settings(&settings)?;
        let response = response_of(&response)?;
        let threads = settings.threads;
        if let Some(parts) = term_parts(&x)? {
            let prob = response.problem(&settings)?;
            let n = prob.y.len();
            let specs = term_specs(&parts, n)?;
            let design = DiscreteDesign::new(n, &specs)?;
            let p = design.ncol();
            let sample = sample_of(&sample, n)?;
            let pens = penalties_from(&penalties, p)?;
            let ctrl = settings.reml()?;
            let layout = settings.layout.unwrap_or_else(|| design.layout());
            if layout == Layout::Dense {
                // The rounded bases expanded: one dense pass beats the cross blocks of many terms.
                let x = design.dense_columns()?;
                let dense = DenseDesign::new(&x, n, p)?;
                let res = dense_reml_result(threads, &dense, &prob, &pens, &ctrl, sample.as_deref())?;
                return Ok(with_layout(res, layout));
            }
            let (fit, sandwich) = fit_reml_then(threads, &design, &prob, &pens, &ctrl, |d, fit| {
                sample
                    .as_deref()
                    .map(|s| sample_sandwich(d, &fit.fit.row_grad, s, &fit.vp, &fit.fit.aliased))
            })?;
            return Ok(with_layout(reml_result(fit, sandwich, vec![false; p]), layout));
        }
        // A list of blocks ("nce_blocks": R matrices and Rust-held rows) is read where it lies.
        let blocks = matrix_blocks(&x);
        let cols;
        let design = if x.inherits("nce_blocks") {
            let n;
            (cols, n) = block_columns(&blocks, "x")?;
            DenseDesign::from_columns(&cols, n)?
        } else {
            let (xd, n, p) = real_matrix(&x, "x")?;
            DenseDesign::new(xd, n, p)?
        };
        let n = design.nrow();
        let prob = response.problem(&settings)?;
        let sample = sample_of(&sample, n)?;
        let pens = penalties_from(&penalties, design.ncol())?;
        let ctrl = settings.reml()?;
        dense_reml_result(threads, &design, &prob, &pens, &ctrl, sample.as_deref())
    })
}

/// The REML fit of a dense design with alias handling, on the per-call pool (polling for
/// interrupts), as an R list.
fn dense_reml_result(
    threads: usize,
    design: &DenseDesign,
    prob: &Problem,
    pens: &PenaltySet,
    ctrl: &RemlControl,
    sample: Option<&[usize]>,
) -> Res<Robj> {
    let f = run::run(threads, |stop| {
        fit_reml_dense(design, prob, pens, ctrl, sample, &mut || stop.load(Ordering::Relaxed))
    })?;
    Ok(reml_result(f.fit, f.sandwich, f.aliased))
}

/// The inputs of a grouped fit, from `problem = list(group, response, cluster, penalties,
/// settings)`: `group` (1-based group of each row), `response` as `response_of` reads it,
/// `cluster` (1-based cluster of each group, or NULL), `penalties` as `penalties_from` reads
/// them and `settings` as `fit_settings`. One list, so the four grouped entry points (in memory
/// or sharded, spline or free intercepts) read it in one place.
pub(crate) struct GroupedProblem {
    pub settings: FitSettings,
    pub response: Response,
    group: Robj,
    cluster: Robj,
    penalties: List,
}

pub(crate) fn grouped_problem(problem: &List) -> Res<GroupedProblem> {
    let settings: List = list_get(problem, "settings", "problem")?
        .try_into()
        .map_err(|_| NceError::invalid("problem$settings", "must be a list"))?;
    let response: List = list_get(problem, "response", "problem")?
        .try_into()
        .map_err(|_| NceError::invalid("problem$response", "must be a list(y, weights, offset)"))?;
    let penalties: List = list_get(problem, "penalties", "problem")?
        .try_into()
        .map_err(|_| NceError::invalid("penalties", "must be a list of list(start, S)"))?;
    Ok(GroupedProblem {
        settings: fit_settings(&settings)?,
        response: response_of(&response)?,
        group: list_get(problem, "group", "problem")?,
        cluster: list_get(problem, "cluster", "problem")?,
        penalties,
    })
}

impl GroupedProblem {
    /// The 0-based group of each of the `nrow` rows, of `ngroups` groups.
    pub(crate) fn group(&self, ngroups: usize, nrow: usize) -> Res<Vec<usize>> {
        let g0 = zero_based(&self.group, "group", ngroups)?;
        if g0.len() != nrow {
            return Err(NceError::invalid(
                "group",
                format!("has length {}, expected {nrow} (one per row)", g0.len()),
            ));
        }
        Ok(g0)
    }

    /// The 0-based cluster of each of the `ngroups` groups, or None.
    pub(crate) fn cluster(&self, ngroups: usize) -> Res<Option<Vec<usize>>> {
        cluster_of(&self.cluster, ngroups)
    }

    /// The penalties over `p` coefficients.
    pub(crate) fn penalties(&self, p: usize) -> Res<PenaltySet> {
        penalties_from(&self.penalties, p)
    }
}

/// REML fit on the grouped design [A | B[group, ]]: A holds row-level columns, B one row
/// per group (e.g. the spline intercept of a transition, shared by its data and reference rows).
/// No alias handling: the caller's set-up keeps the design identifiable. With a `cluster` also
/// the clustered sandwich. `a` may also be a discretised block: a list of terms `list(values =
/// <m x p matrix>, index = <1-based integer row of values per row, or NULL for a dense block>)`.
/// `problem` as `grouped_problem` reads it.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml_grouped(a: Robj, b: Robj, problem: List) -> Robj {
    guard(|| {
        let problem = grouped_problem(&problem)?;
        let settings = &problem.settings;
        let (bd, ng, pb) = real_matrix(&b, "b")?;
        let prob = problem.response.problem(settings)?;
        let g0 = problem.group(ng, prob.y.len())?;
        let cluster = problem.cluster(ng)?;
        let parts = term_parts(&a)?;
        let blocks = matrix_blocks(&a);
        let cols;
        let design = match &parts {
            Some(parts) => {
                let n = prob.y.len();
                GroupedDesign::with_block(DiscreteDesign::new(n, &term_specs(parts, n)?)?, bd, ng, pb, &g0)?
            }
            None => {
                let n;
                (cols, n) = block_columns(&blocks, "a")?;
                GroupedDesign::with_block(DenseDesign::from_columns(&cols, n)?, bd, ng, pb, &g0)?
            }
        };
        let pa = design.pa();
        let pens = problem.penalties(pa + pb)?;
        let ctrl = settings.reml()?;
        let (fit, sandwich) = fit_reml_then(settings.threads, &design, &prob, &pens, &ctrl, |d, fit| {
            cluster
                .as_deref()
                .map(|c| grouped_cluster_sandwich(d, c, &fit.fit.row_grad, &fit.vp, &fit.fit.aliased))
        })?;
        Ok(reml_result(fit, sandwich, vec![false; pa + pb]))
    })
}

/// REML fit on [A | one free intercept per group] (e.g. one per transition), the intercepts
/// eliminated per group so the cost is linear in the number of groups (every group must have
/// rows); A has no intercept column. Returns what `nce_fit_reml_grouped` returns for the columns
/// of A (`cov_sandwich`: clustered by the problem's `cluster`), plus `intercepts` and
/// `intercept_se`. `problem` as for `nce_fit_reml_grouped`, with the number of groups in
/// `settings$ngroups`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml_free_intercepts(a: Robj, problem: List) -> Robj {
    guard(|| {
        let problem = grouped_problem(&problem)?;
        let settings = &problem.settings;
        let ng = settings.count("ngroups", 1)?;
        let prob = problem.response.problem(settings)?;
        let g0 = problem.group(ng, prob.y.len())?;
        let cluster = problem.cluster(ng)?;
        let ctrl = settings.reml()?;
        let threads = settings.threads;
        let groups = FreeGroups {
            group: &g0,
            ngroups: ng,
            cluster_of_group: cluster.as_deref(),
        };
        let parts = term_parts(&a)?;
        let (fit, pa) = match &parts {
            Some(parts) => {
                let n = prob.y.len();
                let specs = term_specs(parts, n)?;
                let pa = specs.iter().map(|s| s.p).sum();
                let pens = problem.penalties(pa)?;
                let fit = run::run(threads, |stop| {
                    let ad = DiscreteDesign::new(n, &specs)?;
                    fit_reml_free_intercepts(ad, groups, &prob, &pens, &ctrl, &mut || stop.load(Ordering::Relaxed))
                })?;
                (fit, pa)
            }
            None => {
                let blocks = matrix_blocks(&a);
                let (cols, n) = block_columns(&blocks, "a")?;
                let ad = DenseDesign::from_columns(&cols, n)?;
                let pa = ad.ncol();
                let pens = problem.penalties(pa)?;
                let fit = run::run(threads, |stop| {
                    fit_reml_free_intercepts(ad, groups, &prob, &pens, &ctrl, &mut || stop.load(Ordering::Relaxed))
                })?;
                (fit, pa)
            }
        };
        free_result(fit, pa)
    })
}

/// A free-intercept fit for R: the dense fit's fields, then the intercepts.
pub(crate) fn free_result(fit: FreeInterceptFit, pa: usize) -> Res<Robj> {
    let FreeInterceptFit {
        reml,
        intercepts,
        intercept_se,
        sandwich,
    } = fit;
    let internal = |e: extendr_api::Error| NceError::invalid("result", e.to_string());
    let out: List = reml_result(reml, sandwich, vec![false; pa])
        .try_into()
        .map_err(internal)?;
    let mut names: Vec<String> = out.names().map(|n| n.map(str::to_string).collect()).unwrap_or_default();
    let mut values: Vec<Robj> = out.values().collect();
    names.extend(["intercepts".to_string(), "intercept_se".to_string()]);
    values.extend([intercepts.into(), intercept_se.into()]);
    Ok(List::from_names_and_values(names, values)
        .map_err(internal)?
        .into_robj())
}

/// The terms of a discretised block (a list of `list(values, index)`), or None for a matrix.
fn term_parts(a: &Robj) -> Res<Option<Vec<(Robj, Robj)>>> {
    let Some(list) = a.as_list().filter(|_| !a.inherits("nce_blocks")) else {
        return Ok(None);
    };
    let bad = || NceError::invalid("a", "must be a matrix or a list of list(values, index) terms");
    list.values()
        .map(|t| {
            let t = t.as_list().ok_or_else(bad)?;
            let get = |name: &str| t.iter().find(|(n, _)| *n == name).map(|(_, v)| v).ok_or_else(bad);
            Ok((get("values")?, get("index")?))
        })
        .collect::<Res<Vec<_>>>()
        .map(Some)
}

/// Term specifications borrowing the R objects of `term_parts`.
fn term_specs(parts: &[(Robj, Robj)], nrow: usize) -> Res<Vec<TermSpec<'_>>> {
    parts
        .iter()
        .map(|(values, index)| {
            let (v, m, p) = real_matrix(values, "a")?;
            let index = if index.is_null() {
                if m != nrow {
                    return Err(NceError::invalid(
                        "a",
                        format!("a dense term must have {nrow} rows, got {m}"),
                    ));
                }
                None
            } else {
                Some(int_slice(index, "a")?)
            };
            Ok(TermSpec { values: v, m, p, index })
        })
        .collect()
}

/// Cluster of each group (1-based in R, 0-based here), or None for NULL.
pub(crate) fn cluster_of(cluster: &Robj, ng: usize) -> Res<Option<Vec<usize>>> {
    if cluster.is_null() {
        return Ok(None);
    }
    let c = int_slice(cluster, "cluster")?;
    if c.len() != ng || c.iter().any(|&v| v < 1) {
        return Err(NceError::invalid(
            "cluster",
            format!("must hold {ng} positive integers, one per group"),
        ));
    }
    Ok(Some(c.iter().map(|&v| v as usize - 1).collect()))
}

/// Penalties from list(list(start, S), ...), `start` 0-based.
pub(crate) fn penalties_from(pens: &List, p: usize) -> Res<PenaltySet> {
    let mut out = Vec::with_capacity(pens.len());
    for (k, (_, item)) in pens.iter().enumerate() {
        let arg = format!("penalties[[{}]]", k + 1);
        let l: List = item
            .try_into()
            .map_err(|_| NceError::invalid(&arg, "must be a list(start, S)"))?;
        let start = list_number(&l, "start", &arg)?;
        let s_robj = list_get(&l, "S", &arg)?;
        let (sd, nr, nc) = real_matrix(&s_robj, &arg)?;
        if nr != nc || !(start >= 0.0) {
            return Err(NceError::invalid(&arg, "must be square with a start >= 0"));
        }
        out.push(Penalty {
            start: start as usize,
            s: nalgebra::DMatrix::from_column_slice(nr, nc, sd),
        });
    }
    PenaltySet::new(p, out)
}

/// The REML fit on the per-call pool (polling for interrupts), then the sandwich `sandwich`
/// builds from it, if any: the one shape of the discretised and grouped entry points.
fn fit_reml_then<D: Design + Sync>(
    threads: usize,
    design: &D,
    prob: &Problem,
    pens: &PenaltySet,
    ctrl: &RemlControl,
    sandwich: impl FnOnce(&D, &RemlFit) -> Option<Result<nalgebra::DMatrix<f64>, NceError>> + Send,
) -> Result<(RemlFit, Option<nalgebra::DMatrix<f64>>), NceError> {
    run::run(threads, |stop| {
        let fit = fit_reml(design, prob, pens, ctrl, &mut || stop.load(Ordering::Relaxed))?;
        let sw = sandwich(design, &fit).transpose()?;
        Ok((fit, sw))
    })
}

pub(crate) fn reml_result(fit: RemlFit, sandwich: Option<nalgebra::DMatrix<f64>>, aliased: Vec<bool>) -> Robj {
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
        outer_iterations = fit.convergence.iterations as i32,
        inner_iterations = fit.inner_iterations as i32,
        converged = fit.convergence.converged && fit.fit.convergence.converged,
        n_certain = fit.fit.n_certain as i32,
        message = if fit.convergence.message.is_empty() {
            fit.fit.convergence.message
        } else {
            fit.convergence.message
        }
    )
    .into_robj()
}

/// The layout the cost model picks for a discretised design `x` (a list of terms as for
/// `nce_fit_reml`) of `nrow` rows: "compressed", or "dense" where one dense pass over the rounded
/// bases beats the compressed terms' cross blocks (then the exact design costs the same per pass,
/// and rounding buys nothing).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_discrete_layout(x: Robj, nrow: f64) -> Robj {
    guard(|| {
        let n = count_of(nrow, "nrow", 1)?;
        let parts = term_parts(&x)?.ok_or_else(|| NceError::invalid("x", "must be a list of discretised terms"))?;
        let specs = term_specs(&parts, n)?;
        Ok(DiscreteDesign::new(n, &specs)?.layout().name().into_robj())
    })
}

/// A fit's result with the layout its discretised design was fitted in (`layout`).
fn with_layout(res: Robj, layout: Layout) -> Robj {
    let mut out: Vec<(String, Robj)> = res
        .as_list()
        .map(|l| l.iter().map(|(n, v)| (n.to_string(), v)).collect())
        .unwrap_or_default();
    out.push(("layout".to_string(), layout.name().into()));
    List::from_pairs(out).into_robj()
}

/// 0-based sample of each row, or None for NULL.
fn sample_of(sample: &Robj, n: usize) -> Res<Option<Vec<usize>>> {
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

extendr_module! {
    mod fit;
    fn nce_fit_glm;
    fn nce_fit_reml;
    fn nce_fit_reml_grouped;
    fn nce_fit_reml_free_intercepts;
    fn nce_discrete_layout;
}
