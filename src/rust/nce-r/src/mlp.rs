//! Binding of nce_core::estimators::mlp: training a network energy by NCE, evaluating it, and
//! Metropolis draws from it. Conversions only; no numerics here.

use crate::convert::{
    guard, list_count, list_get, list_number, list_vec, real_matrix, real_slice, seed_of, threads_of,
};
use crate::run;
use extendr_api::prelude::*;
use nce_core::estimators::mlp::{
    evaluate, Activation, EpochReport, Network, TrainData, TrainResult, TrainSettings, Trainer,
};
use nce_core::sampling::metropolis::{metropolis, ChainControl};
use nce_core::NceError;
use rayon::prelude::*;
use std::sync::atomic::Ordering;
use std::time::Instant;

type Res<T> = std::result::Result<T, NceError>;

/// The network from `settings$inputs`, `settings$hidden` (units per layer) and
/// `settings$activation`.
fn network_of(settings: &List) -> Res<Network> {
    let arg = "settings";
    let inputs = list_count(settings, "inputs", arg, 1)?;
    let hidden = list_vec(settings, "hidden", arg)?
        .iter()
        .map(|&w| crate::convert::count_of(w, "hidden", 1))
        .collect::<Res<Vec<usize>>>()?;
    let act = list_get(settings, "activation", arg)?;
    let activation = act
        .as_str()
        .and_then(Activation::from_name)
        .ok_or_else(|| NceError::invalid("activation", "must be \"relu\", \"softplus\" or \"tanh\""))?;
    Network::new(inputs, hidden, activation)
}

/// A column-major R matrix of `ncol` columns as a row-major vector, with its row count.
pub(crate) fn row_major(x: &Robj, arg: &str, ncol: usize) -> Res<(Vec<f64>, usize)> {
    let (v, n, d) = real_matrix(x, arg)?;
    if d != ncol {
        return Err(NceError::invalid(arg, format!("must have {ncol} column(s), got {d}")));
    }
    let mut out = vec![0.0; v.len()];
    for j in 0..d {
        for i in 0..n {
            out[i * d + j] = v[i + j * n];
        }
    }
    Ok((out, n))
}

fn train_settings(s: &List, p: usize) -> Res<TrainSettings> {
    let arg = "settings";
    let warm = list_get(s, "warm_start", arg)?;
    let warm_start = if warm.is_null() {
        None
    } else {
        Some(real_slice(&warm, "warm_start")?.to_vec())
    };
    let beta_start = list_vec(s, "beta_start", arg)?;
    if beta_start.len() != p {
        return Err(NceError::invalid("beta_start", format!("needs {p} value(s)")));
    }
    Ok(TrainSettings {
        batch: list_count(s, "batch", arg, 1)?,
        max_epochs: list_count(s, "max_epochs", arg, 1)?,
        step: list_number(s, "step", arg)?,
        weight_decay: list_number(s, "weight_decay", arg)?,
        step_patience: list_count(s, "step_patience", arg, 1)?,
        patience: list_count(s, "patience", arg, 1)?,
        n_starts: list_count(s, "n_starts", arg, 1)?,
        seed: seed_of(list_number(s, "seed", arg)?)?,
        beta_start,
        warm_start,
    })
}

/// The rows of a training session, owned (a session outlives the call that made it).
struct SessionRows {
    x: Vec<f64>,
    z: Vec<f64>,
    p: usize,
    y: Vec<f64>,
    weights: Vec<f64>,
    offset: Vec<f64>,
    held: Vec<bool>,
}

impl SessionRows {
    fn view(&self) -> TrainData<'_> {
        TrainData {
            x: &self.x,
            z: &self.z,
            p: self.p,
            y: &self.y,
            weights: &self.weights,
            offset: &self.offset,
            held_out: &self.held,
        }
    }
}

/// A network being trained: R runs its epochs a slice of time at a time and reports progress
/// between the calls, so no R code runs while the workers do.
struct MlpSession {
    net: Network,
    rows: SessionRows,
    trainer: Option<Trainer>,
}

/// `f` on the training session behind the external pointer `session`.
fn with_session<T>(session: Robj, f: impl FnOnce(&mut MlpSession) -> Res<T>) -> Res<T> {
    let bad = || NceError::invalid("session", "is not a training session");
    let mut ptr: ExternalPtr<MlpSession> = session.try_into().map_err(|_| bad())?;
    f(ptr.try_addr_mut().map_err(|_| bad())?)
}

/// Start training a network energy by NCE. `x`: the network's (standardised) inputs, rows x
/// inputs; `z`: the other columns (the intercept among them), rows x p; `response` = list(y,
/// weights, offset, held_out); `settings` = list(inputs, hidden, activation, batch, max_epochs,
/// step, weight_decay, step_patience, patience, n_starts, seed, beta_start, warm_start).
/// Returns the session (an external pointer) for `nce_mlp_sessions_run`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_mlp_session(x: Robj, z: Robj, response: List, settings: List) -> Robj {
    guard(|| {
        let net = network_of(&settings)?;
        let (_, _, p) = real_matrix(&z, "z")?;
        let s = train_settings(&settings, p)?;
        let (x, n) = row_major(&x, "x", net.inputs())?;
        let (z, nz) = row_major(&z, "z", p)?;
        if nz != n {
            return Err(NceError::invalid("z", "must have as many rows as `x`"));
        }
        let r = "response";
        let held: Vec<bool> = list_get(&response, "held_out", r)?
            .as_logical_slice()
            .ok_or_else(|| NceError::invalid("held_out", "must be logical"))?
            .iter()
            .map(|b| b.is_true())
            .collect();
        let rows = SessionRows {
            x,
            z,
            p,
            y: list_vec(&response, "y", r)?,
            weights: list_vec(&response, "weights", r)?,
            offset: list_vec(&response, "offset", r)?,
            held,
        };
        let data = rows.view();
        data.check(&net)?;
        let trainer = Trainer::new(&net, &data, s)?;
        let session = MlpSession {
            net,
            rows,
            trainer: Some(trainer),
        };
        Ok(ExternalPtr::new(session).into())
    })
}

/// Run epochs of several sessions side by side, each for about `seconds` (at least one epoch,
/// unless its training is over), in one pool of `threads` threads: one network per thread is
/// faster than one network's small minibatch products split over threads. Each session's
/// epochs are what they would be alone (its blocks are summed in a fixed order), so the
/// networks do not depend on the thread count. Returns a list with one entry per session:
/// list(reports = the epochs run, as `epoch_matrix`; done = whether every start is finished).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_mlp_sessions_run(sessions: List, seconds: f64, threads: i32) -> Robj {
    guard(|| {
        let mut ptrs = crate::convert::distinct_sessions::<MlpSession>(&sessions, "training sessions")?;
        let mut sess: Vec<&mut MlpSession> = ptrs
            .iter_mut()
            .map(|p| {
                p.try_addr_mut()
                    .map_err(|_| NceError::invalid("sessions", "holds a freed session"))
            })
            .collect::<Res<_>>()?;
        let threads = threads_of(threads)?;
        let budget = crate::convert::slice_budget(seconds);
        let out = run::run(threads, |stop| {
            sess.par_iter_mut()
                .map(|s| {
                    let MlpSession { net, rows, trainer, .. } = &mut **s;
                    let mut reports: Vec<EpochReport> = Vec::new();
                    let trainer = trainer
                        .as_mut()
                        .ok_or_else(|| NceError::invalid("sessions", "holds a session that has returned its result"))?;
                    let data = rows.view();
                    let began = Instant::now();
                    while let Some(rep) = trainer.epoch(net, &data, &|| stop.load(Ordering::Relaxed))? {
                        reports.push(rep);
                        if began.elapsed() >= budget {
                            break;
                        }
                    }
                    Ok((reports, trainer.done()))
                })
                .collect::<Res<Vec<_>>>()
        })?;
        Ok(List::from_values(
            out.iter()
                .map(|(r, done)| list!(reports = epoch_matrix(r), done = *done).into_robj()),
        )
        .into_robj())
    })
}

/// The result of a finished session: params, beta, held_out_loss, best_start, best_epoch
/// (1-based), history (epochs x 5: start, epoch, train_loss, held_out_loss, step) and starts
/// (starts x 3: held-out loss, best epoch, stopped early). The session is spent.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_mlp_session_result(session: Robj) -> Robj {
    guard(|| {
        with_session(session, |sess| {
            let trainer = sess
                .trainer
                .take_if(|t| t.done())
                .ok_or_else(|| NceError::invalid("session", "has not finished training"))?;
            Ok(train_result(trainer.finish(&sess.net)?))
        })
    })
}

/// Epoch reports as an R matrix, a row each: start (1-based), epoch, train_loss, held_out_loss,
/// step.
fn epoch_matrix(reports: &[EpochReport]) -> Robj {
    let mut m = Vec::with_capacity(5 * reports.len());
    m.extend(reports.iter().map(|e| e.start as f64 + 1.0));
    m.extend(reports.iter().map(|e| e.epoch as f64));
    m.extend(reports.iter().map(|e| e.train_loss));
    m.extend(reports.iter().map(|e| e.held_out_loss));
    m.extend(reports.iter().map(|e| e.step));
    crate::convert::col_major_matrix(m, reports.len(), 5)
}

/// The training result as an R list (see `nce_mlp_session_result`).
fn train_result(res: TrainResult) -> Robj {
    let ns = res.starts.len();
    let mut starts = Vec::with_capacity(3 * ns);
    starts.extend(res.starts.iter().map(|s| s.0));
    starts.extend(res.starts.iter().map(|s| s.1 as f64));
    starts.extend(res.starts.iter().map(|s| if s.2 { 1.0 } else { 0.0 }));
    list!(
        params = res.params,
        beta = res.beta,
        held_out_loss = res.held_out_loss,
        best_start = res.best_start as f64 + 1.0,
        best_epoch = res.best_epoch as f64,
        history = epoch_matrix(&res.history),
        starts = crate::convert::col_major_matrix(starts, ns, 3)
    )
    .into_robj()
}

/// The network's output at the rows of `x` (rows x inputs). `settings` = list(inputs, hidden,
/// activation, threads).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_mlp_forward(x: Robj, params: Robj, settings: List) -> Robj {
    guard(|| {
        let net = network_of(&settings)?;
        let threads = list_count(&settings, "threads", "settings", 1)?;
        let (xr, _) = row_major(&x, "x", net.inputs())?;
        let params = real_slice(&params, "params")?;
        let out = run::run(threads, |_| evaluate(&net, params, &xr))?;
        Ok(Robj::from(out))
    })
}

/// Random-walk Metropolis on exp(f) inside the box [lower, upper] (the network's input scale).
/// `starts` chains x inputs; `chains` = list(scale, burnin, steps, seed, threads). Returns draws
/// (steps x chains x inputs, R's array order) and accepted (per chain).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_mlp_metropolis(params: Robj, settings: List, lower: Robj, upper: Robj, starts: Robj, chains: List) -> Robj {
    guard(|| {
        let net = network_of(&settings)?;
        let d = net.inputs();
        let params = real_slice(&params, "params")?;
        if params.len() != net.n_params() {
            return Err(NceError::invalid("params", format!("needs {} values", net.n_params())));
        }
        let (lo, hi) = (real_slice(&lower, "lower")?, real_slice(&upper, "upper")?);
        if lo.len() != d || hi.len() != d || lo.iter().zip(hi).any(|(a, b)| !(a < b)) {
            return Err(NceError::invalid("lower", "needs lower < upper for each input"));
        }
        let (st, nc, sd) = real_matrix(&starts, "starts")?;
        if sd != d || nc == 0 {
            return Err(NceError::invalid(
                "starts",
                "must have one row per chain and one column per input",
            ));
        }
        let scale = list_vec(&chains, "scale", "chains")?;
        let ctrl = ChainControl {
            scale: &scale,
            burnin: list_count(&chains, "burnin", "chains", 0)?,
            steps: list_count(&chains, "steps", "chains", 1)?,
            seed: seed_of(list_number(&chains, "seed", "chains")?)?,
        };
        let threads = list_count(&chains, "threads", "chains", 1)?;
        let target = |x: &[f64]| -> (f64, bool) {
            if x.iter().zip(lo.iter().zip(hi)).any(|(v, (a, b))| v < a || v > b) {
                return (f64::NEG_INFINITY, false);
            }
            let mut ws = nce_core::estimators::mlp::network::Workspace::default();
            let mut out = [0.0];
            net.forward(params, x, 1, &mut ws, &mut out);
            (out[0], false)
        };
        let res = run::run(threads, |stop| metropolis(&target, d, st, &ctrl, stop))?;
        Ok(list!(
            draws = res.draws,
            accepted = res.accepted.iter().map(|&a| a as f64).collect::<Vec<f64>>()
        )
        .into_robj())
    })
}

extendr_module! {
    mod mlp;
    fn nce_mlp_session;
    fn nce_mlp_sessions_run;
    fn nce_mlp_session_result;
    fn nce_mlp_forward;
    fn nce_mlp_metropolis;
}
