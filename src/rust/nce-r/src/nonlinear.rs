//! Binding of nce_core::estimators::nonlinear: NCE for models nonlinear in their parameters, with the model
//! given by an R callback (evaluated on the R main thread, one call per iterate) or built in
//! (Laplace ICA). No numerics here.

use crate::convert::{guard, list_count, list_get, list_number, real_matrix, real_slice, seed_of, to_r_matrix};
use crate::run;
use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::estimators::nonlinear::ica::{self, IcaModel};
use nce_core::estimators::nonlinear::{covariances, fit_starts, FitControl, Method, Model, MultiFit, NceProblem};
use nce_core::optim::LbfgsControl;
use nce_core::NceError;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

type Res<T> = std::result::Result<T, NceError>;

extern "C" {
    /// Defined in entrypoint.c: R_CheckUserInterrupt under R_ToplevelExec.
    fn nce_interrupt_pending() -> std::os::raw::c_int;
}

fn interrupt_pending() -> bool {
    // Safety: these fits run on the R main thread only.
    unsafe { nce_interrupt_pending() != 0 }
}

fn control_of(control: &List) -> Res<FitControl> {
    let num = |name: &str| list_number(control, name, "control");
    let mut c = FitControl::default();
    c.lbfgs.maxit = num("maxit")? as usize;
    c.lbfgs.gtol = num("gtol")?;
    c.polish = num("polish")? as usize;
    Ok(c)
}

/// Starts as the columns of a k x S double matrix.
fn starts_of(starts: &Robj, k: usize) -> Res<Vec<Vec<f64>>> {
    let (v, nr, nc) = real_matrix(starts, "start")?;
    if nr != k {
        return Err(NceError::invalid(
            "start",
            format!("must have {k} rows (intercept and parameters), got {nr}"),
        ));
    }
    Ok((0..nc).map(|s| v[s * nr..(s + 1) * nr].to_vec()).collect())
}

fn method_of(method: &str) -> Res<Method> {
    Method::from_name(method).ok_or_else(|| NceError::invalid("method", "must be \"logistic\" or \"poisson\""))
}

/// The fit's results at the best start (computed where the fit ran; no R objects).
struct Parts {
    fit: MultiFit,
    sandwich: DMatrix<f64>,
    naive: DMatrix<f64>,
    f: Vec<f64>,
    eta: Vec<f64>,
    loglik: f64,
    k: usize,
}

fn fit_parts<M: Model + ?Sized>(prob: &NceProblem<M>, fit: MultiFit) -> Res<Parts> {
    let (state, sandwich, naive) = covariances(prob, &fit.starts[fit.best].par)?;
    Ok(Parts {
        fit,
        sandwich,
        naive,
        f: state.f,
        eta: state.eta,
        loglik: state.loglik,
        k: prob.dim(),
    })
}

/// The fit as an R list: all starts (columns of `starts`), the best start's estimate, its
/// covariances and the linear predictor.
fn result_list(p: Parts) -> Res<Robj> {
    let fit = &p.fit;
    let s = fit.starts.len();
    let best = &fit.starts[fit.best];
    let all = RMatrix::new_matrix(p.k, s, |i, j| fit.starts[j].par[i]).into_robj();
    let values: Vec<f64> = fit.starts.iter().map(|r| r.value).collect();
    let conv: Vec<bool> = fit.starts.iter().map(|r| r.convergence.converged).collect();
    let iters: Vec<i32> = fit.starts.iter().map(|r| r.convergence.iterations as i32).collect();
    let evals: Vec<i32> = fit.starts.iter().map(|r| r.evaluations as i32).collect();
    let msgs: Vec<String> = fit.starts.iter().map(|r| r.convergence.message.clone()).collect();
    Ok(list!(
        coefficients = best.par.clone(),
        cov_sandwich = to_r_matrix(&p.sandwich),
        cov = to_r_matrix(&p.naive),
        f = p.f,
        eta = p.eta,
        loglik = p.loglik,
        best = (fit.best + 1) as i32,
        starts = all,
        values = values,
        converged = conv,
        iterations = iters,
        evaluations = evals,
        messages = msgs
    )
    .into_robj())
}

/// A model evaluated by an R function `callback(theta)` returning list(f, g): f on all rows and
/// the n x p Jacobian (or NULL when the user's function failed; the R side keeps the condition).
struct RModel {
    fun: Function,
    n: usize,
    p: usize,
    /// Jacobian of the last evaluation, keyed by its theta.
    cache: Mutex<Option<(Vec<f64>, Vec<f64>)>>,
}

// Safety: an RModel is only ever used on the R main thread (the fit below never enters a thread
// pool), so the R objects it holds are never touched from another thread; `Model: Sync` is needed
// only because the optimiser's trait asks for it.
unsafe impl Sync for RModel {}

impl RModel {
    fn call(&self, theta: &[f64]) -> Res<(Vec<f64>, Vec<f64>)> {
        let out = self
            .fun
            .call(pairlist!(theta.to_vec()))
            .map_err(|_| NceError::invalid("model", "the model's R function failed"))?;
        if out.is_null() {
            return Err(NceError::invalid("model", "the model's R function failed"));
        }
        let l: List = out
            .try_into()
            .map_err(|_| NceError::invalid("model", "the callback must return list(f, g)"))?;
        let f = list_get(&l, "f", "model")?;
        let g = list_get(&l, "g", "model")?;
        let f = real_slice(&f, "f")?;
        let g = real_slice(&g, "g")?;
        if f.len() != self.n || g.len() != self.n * self.p {
            return Err(NceError::invalid(
                "model",
                format!(
                    "f must have {} values and its gradient {} x {}, got {} and {} values",
                    self.n,
                    self.n,
                    self.p,
                    f.len(),
                    g.len()
                ),
            ));
        }
        Ok((f.to_vec(), g.to_vec()))
    }
}

impl Model for RModel {
    fn n_par(&self) -> usize {
        self.p
    }
    fn n_row(&self) -> usize {
        self.n
    }
    fn value(&self, theta: &[f64], f: &mut [f64]) -> Res<()> {
        let (fv, g) = self.call(theta)?;
        f.copy_from_slice(&fv);
        *self.cache.lock().unwrap() = Some((theta.to_vec(), g));
        Ok(())
    }
    fn jacobian(&self, theta: &[f64], jac: &mut [f64]) -> Res<()> {
        if let Some((t, g)) = self.cache.lock().unwrap().as_ref() {
            if t.as_slice() == theta {
                jac.copy_from_slice(g);
                return Ok(());
            }
        }
        let (_, g) = self.call(theta)?;
        jac.copy_from_slice(&g);
        Ok(())
    }
}

/// Nonlinear NCE with the model as an R callback. `starts` is a (p + 1) x S matrix (intercept
/// first).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_nonlinear_fit_r(
    callback: Robj,
    n_par: i32,
    label: Robj,
    offset: Robj,
    method: &str,
    starts: Robj,
    control: List,
) -> Robj {
    guard(|| {
        let fun: Function = callback
            .try_into()
            .map_err(|_| NceError::invalid("callback", "must be a function"))?;
        if n_par < 1 {
            return Err(NceError::invalid("start", "must name at least one parameter"));
        }
        let label = real_slice(&label, "label")?;
        let offset = real_slice(&offset, "offset")?;
        let model = RModel {
            fun,
            n: label.len(),
            p: n_par as usize,
            cache: Mutex::new(None),
        };
        let prob = NceProblem::new(&model, label, offset, method_of(method)?)?;
        let starts = starts_of(&starts, prob.dim())?;
        let ctrl = control_of(&control)?;
        let fit = fit_starts(&prob, &starts, &ctrl, &mut interrupt_pending)?;
        result_list(fit_parts(&prob, fit)?)
    })
}

/// Settings of `nce_nonlinear_fit_ica` from `settings = list(method, n_random, seed, threads)`.
struct IcaSettings {
    method: Method,
    n_random: usize,
    seed: u64,
    threads: usize,
}

fn ica_settings(settings: &List) -> Res<IcaSettings> {
    let arg = "settings";
    let method = list_get(settings, "method", arg)?;
    let method = method
        .as_str()
        .ok_or_else(|| NceError::invalid("settings$method", "must be a single string"))?;
    Ok(IcaSettings {
        method: method_of(method)?,
        n_random: list_count(settings, "n_random", arg, 0)?,
        seed: seed_of(list_number(settings, "seed", arg)?)?,
        threads: list_count(settings, "threads", arg, 1)?,
    })
}

/// Nonlinear NCE with the built-in Laplace ICA model on the rows of `x` ((n + m) x d). `starts`
/// is a (d^2 + 1) x S matrix of given starts (may have 0 columns); `settings$n_random` more are
/// drawn from ChaCha streams of `settings$seed` around the whitening matrix of the data rows
/// (label 1). Row loops run in a pool of `settings$threads` threads, in fixed chunks, so the
/// result does not depend on the thread count.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_nonlinear_fit_ica(x: Robj, label: Robj, offset: Robj, starts: Robj, control: List, settings: List) -> Robj {
    guard(|| {
        let IcaSettings {
            method,
            n_random,
            seed,
            threads,
        } = ica_settings(&settings)?;
        let (xd, nr, d) = real_matrix(&x, "x")?;
        let label = real_slice(&label, "label")?;
        let offset = real_slice(&offset, "offset")?;
        let given = starts_of(&starts, d * d + 1)?;
        let ctrl = control_of(&control)?;
        let parts = run::run(threads, |stop| {
            let model = IcaModel::new(xd, nr, d)?.with_parallel(true);
            let prob = NceProblem::new(&model, label, offset, method)?.with_parallel(true);
            let mut all = given;
            if n_random > 0 {
                let data: Vec<usize> = (0..nr).filter(|&r| label[r] == 1.0).collect();
                let nd = data.len();
                let mut xdat = vec![0.0; nd * d];
                for j in 0..d {
                    for (i, &r) in data.iter().enumerate() {
                        xdat[j * nd + i] = xd[j * nr + r];
                    }
                }
                let w = ica::whitening(&xdat, nd, d)?;
                for k in 0..n_random as u64 {
                    all.push(ica::random_start(&w, d, seed, k));
                }
            }
            let fit = ica::fit_starts_ica(&prob, &all, &ctrl, &mut || stop.load(Ordering::Relaxed))?;
            fit_parts(&prob, fit)
        })?;
        result_list(parts)
    })
}

/// Maximum likelihood for the Laplace ICA model (normaliser known) on the rows of `x` (n x d),
/// best of `n_starts` random whitened starts. Returns B by rows, c and the mean log-likelihood.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ica_mle(x: Robj, n_starts: i32, seed: f64, control: List) -> Robj {
    guard(|| {
        let (xd, n, d) = real_matrix(&x, "x")?;
        if n_starts < 1 {
            return Err(NceError::invalid("n_starts", "must be at least 1"));
        }
        let seed = seed_of(seed)?;
        let w = ica::whitening(xd, n, d)?;
        let c = control_of(&control)?;
        let lc = LbfgsControl { ..c.lbfgs };
        let mut best: Option<nce_core::optim::OptimResult> = None;
        let mut values = Vec::new();
        for k in 0..n_starts as u64 {
            let s = ica::random_start(&w, d, seed, k);
            let o = ica::fit_mle(xd, n, d, &s[1..], &lc, &mut interrupt_pending)?;
            values.push(o.value);
            if best.as_ref().map_or(true, |b| o.value < b.value) {
                best = Some(o);
            }
        }
        let b = best.expect("at least one start");
        Ok(list!(
            B = b.x.clone(),
            c = ica::log_normaliser(&b.x, d),
            loglik_mean = -b.value,
            converged = b.convergence.converged,
            message = b.convergence.message,
            values = values
        )
        .into_robj())
    })
}

extendr_module! {
    mod nonlinear;
    fn nce_nonlinear_fit_r;
    fn nce_nonlinear_fit_ica;
    fn nce_ica_mle;
}
