//! Binding of nce_core::estimators::mlp: training a network energy by NCE, evaluating it, and
//! Metropolis draws from it. Conversions only; no numerics here.

use crate::convert::{guard, list_count, list_get, list_number, list_vec, real_matrix, real_slice, seed_of};
use crate::run;
use extendr_api::prelude::*;
use nce_core::estimators::mlp::{
    evaluate, train, Activation, EpochReport, Network, TrainData, TrainResult, TrainSettings,
};
use nce_core::sampling::metropolis::{metropolis, ChainControl};
use nce_core::NceError;
use std::sync::atomic::Ordering;

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
fn row_major(x: &Robj, arg: &str, ncol: usize) -> Res<(Vec<f64>, usize)> {
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

/// Train a network energy by NCE. `x`: the network's (standardised) inputs, rows x inputs; `z`:
/// the other columns (the intercept among them), rows x p; `response` = list(y, weights, offset,
/// held_out); `settings` = list(inputs, hidden, activation, batch, max_epochs, step,
/// weight_decay, step_patience, patience, n_starts, seed, threads, beta_start, warm_start,
/// progress), `progress` NULL or an R function(start, epoch, train_loss, held_out_loss) called
/// on the R main thread after every epoch. Returns params, beta, held_out_loss, best_start,
/// best_epoch (1-based), history (epochs x 5: start, epoch, train_loss, held_out_loss, step) and
/// starts (starts x 3: held-out loss, best epoch, stopped early).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_mlp_train(x: Robj, z: Robj, response: List, settings: List) -> Robj {
    guard(|| {
        let net = network_of(&settings)?;
        let (_, _, p) = real_matrix(&z, "z")?;
        let s = train_settings(&settings, p)?;
        let threads = list_count(&settings, "threads", "settings", 1)?;
        let (xr, n) = row_major(&x, "x", net.inputs())?;
        let (zr, nz) = row_major(&z, "z", p)?;
        let r = "response";
        let (yv, wv, ov, hv) = (
            list_get(&response, "y", r)?,
            list_get(&response, "weights", r)?,
            list_get(&response, "offset", r)?,
            list_get(&response, "held_out", r)?,
        );
        let held: Vec<bool> = hv
            .as_logical_slice()
            .ok_or_else(|| NceError::invalid("held_out", "must be logical"))?
            .iter()
            .map(|b| b.is_true())
            .collect();
        if nz != n {
            return Err(NceError::invalid("z", "must have as many rows as `x`"));
        }
        let data = TrainData {
            x: &xr,
            z: &zr,
            p,
            y: real_slice(&yv, "y")?,
            weights: real_slice(&wv, "weights")?,
            offset: real_slice(&ov, "offset")?,
            held_out: &held,
        };
        let progress = list_get(&settings, "progress", "settings")?;
        let progress: Option<Function> = if progress.is_null() {
            None
        } else {
            Some(
                progress
                    .try_into()
                    .map_err(|_| NceError::invalid("progress", "must be NULL or a function"))?,
            )
        };
        let report_epochs = progress.is_some();
        let res = run::run_serving(
            threads,
            |rep: EpochReport| {
                if let Some(f) = &progress {
                    // A failing progress handler must not stop the fit.
                    let _ = f.call(pairlist!(
                        rep.start as f64 + 1.0,
                        rep.epoch as f64,
                        rep.train_loss,
                        rep.held_out_loss
                    ));
                }
            },
            |stop, requester| {
                let mut report = |rep: &EpochReport| {
                    if report_epochs {
                        requester.ask(*rep);
                    }
                };
                train(&net, &data, &s, &mut report, &|| stop.load(Ordering::Relaxed))
            },
        )?;
        Ok(train_result(res))
    })
}

/// The training result as an R list (see `nce_mlp_train`).
fn train_result(res: TrainResult) -> Robj {
    let h = &res.history;
    let mut hist = Vec::with_capacity(5 * h.len());
    hist.extend(h.iter().map(|e| e.start as f64 + 1.0));
    hist.extend(h.iter().map(|e| e.epoch as f64));
    hist.extend(h.iter().map(|e| e.train_loss));
    hist.extend(h.iter().map(|e| e.held_out_loss));
    hist.extend(h.iter().map(|e| e.step));
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
        history = crate::convert::col_major_matrix(hist, h.len(), 5),
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
    fn nce_mlp_train;
    fn nce_mlp_forward;
    fn nce_mlp_metropolis;
}
