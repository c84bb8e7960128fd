//! Binding of nce_core::sampling::smc: tempered SMC on a log ratio given as an R function. The
//! sampler runs on the per-call pool; each time it needs the log ratio (or a callback prior) at
//! a batch of points, the R main thread (never a pool thread) calls the R function. No numerics
//! here.

use crate::convert::{guard, list_count, list_get, list_number, list_vec, seed_of, Res};
use crate::run::{self, Requester};
use extendr_api::prelude::*;
use nce_core::sampling::smc::{smc_sample, BatchLogTarget, BatchPrior, BuiltinPrior, FnPrior, SmcControl};
use nce_core::NceError;
use std::sync::atomic::Ordering;

/// What the sampler asks of the R main thread: points are n x d, row-major.
enum Ask {
    LogRatio(Vec<f64>, usize),
    PriorSample(usize),
    PriorDensity(Vec<f64>, usize),
}

type Answer = Res<Vec<f64>>;

fn gone() -> NceError {
    NceError::Internal("the R main thread stopped answering".into())
}

/// The log ratio through the R main thread.
struct RLogRatio<'a> {
    req: &'a Requester<Ask, Answer>,
    d: usize,
}

impl BatchLogTarget for RLogRatio<'_> {
    fn dim(&self) -> usize {
        self.d
    }

    fn log_ratio(&mut self, theta: &[f64], out: &mut [f64]) -> Res<()> {
        let v = self
            .req
            .ask(Ask::LogRatio(theta.to_vec(), out.len()))
            .unwrap_or_else(|| Err(gone()))?;
        out.copy_from_slice(&v);
        Ok(())
    }
}

/// The prior as R gives it: list(kind = "uniform", lower, upper), list(kind = "normal", mean,
/// sd) or list(kind = "callback", sample, log_density) (the functions kept for the main thread).
enum PriorSpec {
    Builtin(BuiltinPrior),
    Callback { sample: Function, log_density: Function },
}

fn prior_spec(prior: &List) -> Res<PriorSpec> {
    let kind = list_get(prior, "kind", "prior")?;
    let fun = |name: &str| -> Res<Function> {
        list_get(prior, name, "prior")?
            .try_into()
            .map_err(|_| NceError::invalid("prior", format!("`{name}` must be a function")))
    };
    Ok(match kind.as_str() {
        Some("uniform") => PriorSpec::Builtin(BuiltinPrior::uniform(
            list_vec(prior, "lower", "prior")?,
            list_vec(prior, "upper", "prior")?,
        )?),
        Some("normal") => PriorSpec::Builtin(BuiltinPrior::normal(
            list_vec(prior, "mean", "prior")?,
            list_vec(prior, "sd", "prior")?,
        )?),
        Some("callback") => PriorSpec::Callback {
            sample: fun("sample")?,
            log_density: fun("log_density")?,
        },
        _ => {
            return Err(NceError::invalid(
                "prior",
                "`kind` must be \"uniform\", \"normal\" or \"callback\"",
            ))
        }
    })
}

/// An R function's answer as doubles, or the classed error: the R layer passes functions that
/// return the condition (class "interrupt" for a user interrupt) instead of raising it.
fn call_r(f: &Function, arg: Robj, what: &str) -> Res<Robj> {
    let out = f.call(pairlist!(arg)).map_err(|e| {
        NceError::Model(format!(
            "`{what}` failed: {e}. Fix `{what}` so that it runs on these arguments."
        ))
    })?;
    if out.inherits("interrupt") {
        return Err(NceError::Interrupted);
    }
    if let Some(msg) = crate::convert::returned_condition(&out) {
        return Err(NceError::Model(format!(
            "`{what}` failed: {msg}. Fix `{what}` so that it runs on these arguments."
        )));
    }
    Ok(out)
}

/// Doubles (or integers) of the expected length from an R answer.
fn numbers(x: &Robj, len: usize, what: &str) -> Res<Vec<f64>> {
    let v: Vec<f64> = if let Some(s) = x.as_real_slice() {
        s.to_vec()
    } else if let Some(s) = x.as_integer_slice() {
        s.iter()
            .map(|&i| if i == i32::MIN { f64::NAN } else { f64::from(i) })
            .collect()
    } else {
        return Err(NceError::Model(format!(
            "`{what}` must return numbers, returned {:?}",
            x.rtype()
        )));
    };
    if v.len() != len {
        return Err(NceError::Model(format!(
            "`{what}` must return {len} values, returned {}",
            v.len()
        )));
    }
    Ok(v)
}

/// Row-major points as an n x d R matrix.
fn points(theta: &[f64], n: usize) -> Robj {
    let d = theta.len().checked_div(n).unwrap_or(0);
    RMatrix::new_matrix(n, d, |i, j| theta[i * d + j]).into_robj()
}

/// `n` draws of a callback prior (an n x d matrix from R) as row-major values, and d; `d`
/// checked when given.
fn prior_draws(sample: &Function, n: usize, d: Option<usize>) -> Res<(Vec<f64>, usize)> {
    let m = call_r(sample, Robj::from(n as f64), "prior$sample")?;
    let dims = m
        .dim()
        .filter(|dm| dm.len() == 2)
        .map(|dm| (dm[0].0 as usize, dm[1].0 as usize));
    let cols = match dims {
        Some((r, c)) if r == n && c >= 1 && (d.is_none() || d == Some(c)) => c,
        _ => {
            return Err(NceError::Model(format!(
                "`prior$sample` must return a {n} x {} matrix",
                d.map_or("d".to_string(), |d| d.to_string())
            )))
        }
    };
    let v = numbers(&m, n * cols, "prior$sample")?;
    // Column-major from R, row-major for the core.
    Ok(((0..n * cols).map(|k| v[(k % cols) * n + k / cols]).collect(), cols))
}

/// The main thread's side: call the R functions.
fn serve(log_ratio: &Function, prior: &PriorSpec, d: usize, q: Ask) -> Answer {
    match q {
        Ask::LogRatio(theta, n) => numbers(&call_r(log_ratio, points(&theta, n), "log_ratio")?, n, "log_ratio"),
        Ask::PriorSample(n) => {
            let PriorSpec::Callback { sample, .. } = prior else {
                return Err(NceError::Internal("a built-in prior asked R for draws".into()));
            };
            let (v, _) = prior_draws(sample, n, Some(d))?;
            Ok(v)
        }
        Ask::PriorDensity(theta, n) => {
            let PriorSpec::Callback { log_density, .. } = prior else {
                return Err(NceError::Internal("a built-in prior asked R for its density".into()));
            };
            // NA stays NaN, which the core refuses.
            numbers(
                &call_r(log_density, points(&theta, n), "prior$log_density")?,
                n,
                "prior$log_density",
            )
        }
    }
}

/// Settings from `settings = list(particles, steps, seed, threads, thin, ess_fraction, moves,
/// max_sweeps, max_stages, independence)`; the last six optional (SmcControl's defaults;
/// `independence` a number, 0 for off).
fn smc_settings(s: &List) -> Res<(SmcControl, usize)> {
    let arg = "settings";
    let has = |name: &str| list_get(s, name, arg).is_ok();
    let def = SmcControl::default();
    let count = |name: &str, min: usize, default: usize| -> Res<usize> {
        if has(name) {
            list_count(s, name, arg, min)
        } else {
            Ok(default)
        }
    };
    let ctrl = SmcControl {
        particles: list_count(s, "particles", arg, 4)?,
        steps: list_count(s, "steps", arg, 1)?,
        thin: count("thin", 1, def.thin)?,
        ess_fraction: if has("ess_fraction") {
            list_number(s, "ess_fraction", arg)?
        } else {
            def.ess_fraction
        },
        moves: if has("moves") {
            list_number(s, "moves", arg)?
        } else {
            def.moves
        },
        max_sweeps: count("max_sweeps", 1, def.max_sweeps)?,
        max_stages: count("max_stages", 1, def.max_stages)?,
        independence: if has("independence") {
            list_number(s, "independence", arg)? != 0.0
        } else {
            def.independence
        },
        seed: seed_of(list_number(s, "seed", arg)?)?,
    };
    Ok((ctrl, list_count(s, "threads", arg, 1)?))
}

/// Tempered SMC on prior(theta) exp(log_ratio(theta)), then `steps` draws per particle (chain)
/// at the posterior. `log_ratio` an R function of an n x d matrix returning n log ratios (-Inf
/// allowed); `prior` list(kind = "uniform", lower, upper), list(kind = "normal", mean, sd) or
/// list(kind = "callback", sample = function(n) n x d matrix, log_density = function(theta
/// matrix) n values, -Inf outside the support); the functions may return a condition instead of
/// raising it (class "interrupt" for an interrupt), which becomes `nce_error_model`; d is the
/// prior's length (or the columns of a callback prior's draws). `settings` as `smc_settings`
/// reads it. Returns list(draws = steps x chains x d array, acceptance (per chain), ess (per
/// parameter), betas, log_evidence, stages, sweeps (per stage), stage_acceptance, evaluations,
/// calls, log_ratio and log_prior (steps x chains, at the draws), components and
/// independence_acceptance of the final phase's independence proposal).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_smc_sample(log_ratio: Robj, prior: List, settings: List) -> Robj {
    guard(|| {
        let log_ratio: Function = log_ratio
            .try_into()
            .map_err(|_| NceError::invalid("log_ratio", "must be a function"))?;
        let (ctrl, threads) = smc_settings(&settings)?;
        let spec = prior_spec(&prior)?;
        if i32::try_from(ctrl.particles).is_err() || i32::try_from(ctrl.steps).is_err() {
            return Err(NceError::invalid("settings", "particles and steps must be below 2^31"));
        }
        // A callback prior's first draws are taken here, on the main thread: they give d.
        let (builtin, first, d) = match &spec {
            PriorSpec::Builtin(b) => (Some(b.clone()), None, b.dim()),
            PriorSpec::Callback { sample, .. } => {
                let (v, d) = prior_draws(sample, ctrl.particles, None)?;
                (None, Some(v), d)
            }
        };
        let res = run::run_serving(
            threads,
            |q| serve(&log_ratio, &spec, d, q),
            |stop, req| {
                let mut target = RLogRatio { req, d };
                let poll = || stop.load(Ordering::Relaxed);
                match builtin {
                    Some(mut b) => smc_sample(&mut target, &mut b, &ctrl, &poll),
                    None => {
                        let mut first = first;
                        let mut p = FnPrior {
                            dim: d,
                            sample: |n: usize| match first.take() {
                                Some(v) if v.len() == n * d => Ok(v),
                                _ => req.ask(Ask::PriorSample(n)).unwrap_or_else(|| Err(gone())),
                            },
                            log_density: |theta: &[f64], out: &mut [f64]| {
                                let v = req
                                    .ask(Ask::PriorDensity(theta.to_vec(), out.len()))
                                    .unwrap_or_else(|| Err(gone()))?;
                                out.copy_from_slice(&v);
                                Ok(())
                            },
                        };
                        smc_sample(&mut target, &mut p as &mut dyn BatchPrior, &ctrl, &poll)
                    }
                }
            },
        )?;
        let mut draws = Robj::from(res.draws);
        draws
            .set_attrib("dim", vec![res.steps as i32, res.chains as i32, res.d as i32])
            .map_err(|e| NceError::Internal(format!("setting the draws' dimensions: {e}")))?;
        Ok(list!(
            draws = draws,
            acceptance = res.acceptance,
            ess = res.ess,
            betas = res.betas,
            log_evidence = res.log_evidence,
            stages = (res.sweeps.len()) as i32,
            sweeps = res.sweeps.iter().map(|&s| s as i32).collect::<Vec<i32>>(),
            stage_acceptance = res.stage_acceptance,
            evaluations = res.evaluations as f64,
            calls = res.calls as f64,
            log_ratio = res.log_ratio,
            log_prior = res.log_prior,
            components = res.components as i32,
            independence_acceptance = res.independence_acceptance
        )
        .into_robj())
    })
}

extendr_module! {
    mod sampler;
    fn nce_smc_sample;
}
