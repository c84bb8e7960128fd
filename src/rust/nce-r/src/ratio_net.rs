//! Binding of nce_core::estimators::ratio_net: training a neural ratio estimator with a learned
//! embedding of the raw data, as a session run a slice of time at a time, and evaluating it.
//! Conversions only; no numerics here.

use crate::convert::{
    guard, list_count, list_get, list_number, list_vec, real_matrix, real_slice, seed_of, threads_of,
};
use crate::mlp::row_major;
use crate::run;
use extendr_api::prelude::*;
use nce_core::estimators::mlp::Activation;
use nce_core::estimators::ratio_net::{
    Architecture, EmbeddingSpec, EpochReport, Loss, RatioNet, RatioSettings, Rows, TrainResult, Trainer,
};
use nce_core::NceError;
use rayon::prelude::*;
use std::sync::atomic::Ordering;
use std::time::Instant;

type Res<T> = std::result::Result<T, NceError>;

/// Layer widths from a numeric vector (possibly empty).
fn widths(l: &List, name: &str, arg: &str) -> Res<Vec<usize>> {
    list_vec(l, name, arg)?
        .iter()
        .map(|&w| crate::convert::count_of(w, name, 1))
        .collect()
}

/// The embedding from `settings$embedding` = list(kind = "none" | "dense" | "pooled", hidden,
/// out, item, window) (only the elements its kind uses are read).
fn embedding_of(settings: &List) -> Res<EmbeddingSpec> {
    let e = list_get(settings, "embedding", "settings")?;
    let e = e
        .as_list()
        .ok_or_else(|| NceError::invalid("embedding", "must be a list"))?;
    let arg = "embedding";
    let kind = list_get(&e, "kind", arg)?;
    match kind.as_str() {
        Some("none") => Ok(EmbeddingSpec::None),
        Some("dense") => Ok(EmbeddingSpec::Dense {
            hidden: widths(&e, "hidden", arg)?,
            out: list_count(&e, "out", arg, 1)?,
        }),
        Some("pooled") => Ok(EmbeddingSpec::Pooled {
            item: list_count(&e, "item", arg, 1)?,
            window: list_count(&e, "window", arg, 1)?,
            hidden: widths(&e, "hidden", arg)?,
            out: list_count(&e, "out", arg, 1)?,
        }),
        _ => Err(NceError::invalid(
            "embedding",
            "`kind` must be \"none\", \"dense\" or \"pooled\"",
        )),
    }
}

/// The network for theta of `d` values, `p` features z and raw rows of `q` values, from
/// `settings$embedding`, `settings$hidden` (the head's widths) and `settings$activation`.
fn architecture_of(settings: &List, d: usize, p: usize, q: usize) -> Res<Architecture> {
    let act = list_get(settings, "activation", "settings")?;
    let activation = act
        .as_str()
        .and_then(Activation::from_name)
        .ok_or_else(|| NceError::invalid("activation", "must be \"relu\", \"softplus\" or \"tanh\""))?;
    Architecture::new(
        d,
        p,
        q,
        &embedding_of(settings)?,
        &widths(settings, "hidden", "settings")?,
        activation,
    )
}

fn train_settings(s: &List) -> Res<RatioSettings> {
    let arg = "settings";
    let name = list_get(s, "loss", arg)?;
    let loss = name
        .as_str()
        .and_then(|n| {
            Loss::from_name(
                n,
                list_number(s, "gamma", arg).ok()?,
                list_number(s, "lambda", arg).ok()?,
            )
        })
        .ok_or_else(|| {
            NceError::invalid(
                "loss",
                "must be \"nre\", \"nrec\" or \"bnre\" (with numbers `gamma` and `lambda` in the settings)",
            )
        })?;
    Ok(RatioSettings {
        loss,
        n_negatives: list_count(s, "n_negatives", arg, 1)?,
        batch: list_count(s, "batch", arg, 2)?,
        max_epochs: list_count(s, "max_epochs", arg, 1)?,
        step: list_number(s, "step", arg)?,
        weight_decay: list_number(s, "weight_decay", arg)?,
        step_patience: list_count(s, "step_patience", arg, 1)?,
        patience: list_count(s, "patience", arg, 1)?,
        held_out: list_number(s, "held_out", arg)?,
        seed: seed_of(list_number(s, "seed", arg)?)?,
    })
}

/// A double matrix as row-major values with its dimensions.
fn matrix_rows(x: &Robj, arg: &str) -> Res<(Vec<f64>, usize, usize)> {
    let (_, n, k) = real_matrix(x, arg)?;
    let (v, _) = row_major(x, arg, k)?;
    Ok((v, n, k))
}

/// A ratio network being trained, with its simulations (owned: a session outlives the call that
/// made it).
struct RatioSession {
    arch: Architecture,
    theta: Vec<f64>,
    z: Vec<f64>,
    x: Vec<f64>,
    trainer: Option<Trainer>,
}

impl RatioSession {
    fn rows(&self) -> Rows<'_> {
        Rows {
            theta: &self.theta,
            z: &self.z,
            x: &self.x,
        }
    }
}

/// Start training a neural ratio estimator. `theta`: n x d parameters of the simulations; `z`:
/// n x p hand-made features (p may be 0); `x`: n x q raw simulated data; `settings` =
/// list(embedding = list(kind = "none" | "dense" | "pooled", hidden, out, item, window), hidden
/// (the head's widths), activation, loss = "nre" | "nrec" | "bnre", n_negatives, gamma, lambda,
/// batch, max_epochs, step, weight_decay, step_patience, patience, held_out, seed). Returns the
/// session (an external pointer) for `nce_ratio_net_sessions_run`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ratio_net_session(theta: Robj, z: Robj, x: Robj, settings: List) -> Robj {
    guard(|| {
        let (theta, n, d) = matrix_rows(&theta, "theta")?;
        let (z, nz, p) = matrix_rows(&z, "z")?;
        let (x, nx, q) = matrix_rows(&x, "x")?;
        if nz != n || nx != n {
            return Err(NceError::invalid("x", "theta, z and x must have the same rows"));
        }
        let arch = architecture_of(&settings, d, p, q)?;
        let s = train_settings(&settings)?;
        let mut session = RatioSession {
            arch,
            theta,
            z,
            x,
            trainer: None,
        };
        let trainer = Trainer::new(&session.arch, &session.rows(), s)?;
        session.trainer = Some(trainer);
        Ok(ExternalPtr::new(session).into())
    })
}

/// Run epochs of several sessions side by side, each for about `seconds` (at least one epoch,
/// unless its training is over), in one pool of `threads` threads; each session's epochs are
/// what they would be alone. Returns a list with one entry per session: list(reports = the
/// epochs run, as `epoch_matrix`; done = whether its training is over).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ratio_net_sessions_run(sessions: List, seconds: f64, threads: i32) -> Robj {
    guard(|| {
        let mut ptrs = crate::convert::distinct_sessions::<RatioSession>(&sessions, "ratio-network sessions")?;
        let mut sess: Vec<&mut RatioSession> = ptrs
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
                    let RatioSession {
                        arch,
                        theta,
                        z,
                        x,
                        trainer,
                    } = &mut **s;
                    let trainer = trainer
                        .as_mut()
                        .ok_or_else(|| NceError::invalid("sessions", "holds a session that has returned its result"))?;
                    let data = Rows { theta, z, x };
                    let mut reports: Vec<EpochReport> = Vec::new();
                    let began = Instant::now();
                    while let Some(rep) = trainer.epoch(arch, &data, &|| stop.load(Ordering::Relaxed))? {
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

/// Epoch reports as an R matrix, a row each: epoch, train_loss, held_out_loss, step.
fn epoch_matrix(reports: &[EpochReport]) -> Robj {
    let mut m = Vec::with_capacity(4 * reports.len());
    m.extend(reports.iter().map(|e| e.epoch as f64));
    m.extend(reports.iter().map(|e| e.train_loss));
    m.extend(reports.iter().map(|e| e.held_out_loss));
    m.extend(reports.iter().map(|e| e.step));
    crate::convert::col_major_matrix(m, reports.len(), 4)
}

fn train_result(res: TrainResult, arch: &Architecture) -> Robj {
    list!(
        params = res.params,
        held_out_loss = res.held_out_loss,
        best_epoch = res.best_epoch as f64,
        history = epoch_matrix(&res.history),
        stopped_early = res.early,
        dims = vec![arch.d() as f64, arch.p() as f64, arch.q() as f64]
    )
    .into_robj()
}

/// The result of a finished session: list(params, held_out_loss, best_epoch, history (epochs x
/// 4: epoch, train_loss, held_out_loss, step), stopped_early, dims = c(d, p, q)). The session is
/// spent.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ratio_net_session_result(session: Robj) -> Robj {
    guard(|| {
        let bad = || NceError::invalid("session", "is not a ratio-network session");
        let mut ptr: ExternalPtr<RatioSession> = session.try_into().map_err(|_| bad())?;
        let sess = ptr.try_addr_mut().map_err(|_| bad())?;
        let trainer = sess
            .trainer
            .take_if(|t| t.done())
            .ok_or_else(|| NceError::invalid("session", "has not finished training"))?;
        Ok(train_result(trainer.finish()?, &sess.arch))
    })
}

/// The trained network from its parameters and the settings it was trained with.
fn net_of(params: &Robj, settings: &List, d: usize, p: usize, q: usize) -> Res<RatioNet> {
    let arch = architecture_of(settings, d, p, q)?;
    RatioNet::new(arch, real_slice(params, "params")?.to_vec())
}

/// log r(theta, x) at paired rows: `theta` n x d, `z` n x p or 1 x p, `x` n x q or 1 x q (one row
/// is used for every theta and embedded once: the posterior sampler's call). `settings` as for
/// the session (its embedding, hidden and activation are read). Returns n values.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ratio_net_log_ratio(params: Robj, settings: List, theta: Robj, z: Robj, x: Robj, threads: i32) -> Robj {
    guard(|| {
        let (theta, _, d) = matrix_rows(&theta, "theta")?;
        let (z, _, p) = matrix_rows(&z, "z")?;
        let (x, _, q) = matrix_rows(&x, "x")?;
        let net = net_of(&params, &settings, d, p, q)?;
        let threads = threads_of(threads)?;
        let out = run::run(threads, |_| {
            let feat = net.embed(&x)?;
            net.log_ratio(&theta, &z, &feat)
        })?;
        Ok(Robj::from(out))
    })
}

/// The embedding of the rows of `x` (n x q) as an n x m matrix. `settings` as for the session,
/// with `d` and `p` (the columns of theta and z it was trained with; `dims` of the result).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ratio_net_embed(params: Robj, settings: List, x: Robj, threads: i32) -> Robj {
    guard(|| {
        let (x, n, q) = matrix_rows(&x, "x")?;
        let d = list_count(&settings, "d", "settings", 1)?;
        let p = list_count(&settings, "p", "settings", 0)?;
        let net = net_of(&params, &settings, d, p, q)?;
        let m = net.arch.features();
        let threads = threads_of(threads)?;
        let feat = run::run(threads, |_| net.embed(&x))?;
        // Row-major n x m to R's column-major.
        Ok(RMatrix::new_matrix(n, m, |i, j| feat[i * m + j]).into_robj())
    })
}

extendr_module! {
    mod ratio_net;
    fn nce_ratio_net_session;
    fn nce_ratio_net_sessions_run;
    fn nce_ratio_net_session_result;
    fn nce_ratio_net_log_ratio;
    fn nce_ratio_net_embed;
}
