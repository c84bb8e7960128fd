//! Training a ratio network: minibatches of B simulations, each embedded once and paired with
//! its own theta and K thetas of other simulations of the minibatch (drawn from the epoch's
//! stream), one of the `Loss`es, AdamW (the mlp trainer's), and early stopping on the loss of a
//! held-out share of the simulations, whose negatives are fixed by the seed so the held-out loss
//! is comparable between epochs; the best parameters are kept.
//!
//! Reproducible: every random choice comes from ChaCha streams of one seed (0: starting weights,
//! 1: the held-out split, 2: minibatch order and negatives, 3: the held-out negatives); a
//! minibatch is cut into blocks of a fixed number of simulations whose gradients are summed in
//! order, so the result is the same bit for bit for any number of threads.

use super::loss::{batch_loss, Loss};
use super::model::{Architecture, PairPass, Rows};
use crate::error::{NceError, Result};
use crate::estimators::mlp::train::Adam;
use crate::rng::stream_rng;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// Simulations per block of a minibatch: fixed, so the sums do not depend on the thread count.
pub const BLOCK_ROWS: usize = 64;

/// Most floating-point operations a training may ask for (6 x max_epochs x rows x multiply-adds
/// per simulation, forward and backward): 1e15 is about half a day at the 20 GFLOP/s of a
/// two-core machine, beyond any sensible training; the bound makes a mistyped `max_epochs`
/// an error rather than a session that cannot end.
pub const MAX_TRAINING_FLOPS: f64 = 1e15;

/// Training settings.
#[derive(Debug, Clone)]
pub struct RatioSettings {
    pub loss: Loss,
    /// K: thetas of other simulations per simulation.
    pub n_negatives: usize,
    /// Simulations per minibatch.
    pub batch: usize,
    pub max_epochs: usize,
    /// Adam's step.
    pub step: f64,
    /// Decoupled weight decay (AdamW) of the weights.
    pub weight_decay: f64,
    /// Epochs without a better held-out loss before the step is halved (the late epochs' noise
    /// of a constant step is most of the error left otherwise).
    pub step_patience: usize,
    /// Epochs without a better held-out loss before training stops.
    pub patience: usize,
    /// Share of the simulations held out for early stopping (0: stop on the training loss).
    pub held_out: f64,
    pub seed: u64,
}

impl RatioSettings {
    /// The recommended settings (sbi's where it has them: batch 200, step 5e-4, patience 20,
    /// a tenth held out; K = 5 for NRE-C as sbi's num_classes, 1 otherwise).
    pub fn recommended(loss: Loss, seed: u64) -> Self {
        RatioSettings {
            loss,
            n_negatives: if matches!(loss, Loss::Nrec { .. }) { 5 } else { 1 },
            batch: 200,
            max_epochs: 1000,
            step: 5e-4,
            weight_decay: 0.0,
            step_patience: 5,
            patience: 20,
            held_out: 0.1,
            seed,
        }
    }
}

/// One epoch, as the progress report sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochReport {
    pub epoch: usize,
    pub train_loss: f64,
    pub held_out_loss: f64,
    /// The step the epoch used.
    pub step: f64,
}

/// The best parameters and the record of the training.
#[derive(Debug, Clone)]
pub struct TrainResult {
    pub params: Vec<f64>,
    pub held_out_loss: f64,
    pub best_epoch: usize,
    pub history: Vec<EpochReport>,
    /// Whether it stopped early (rather than at `max_epochs`).
    pub early: bool,
}

/// Consecutive chunks of `n` items of `batch` items at most, a last chunk of one item merged
/// into the one before (a simulation needs another of its minibatch to contrast with).
fn chunks(n: usize, batch: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < n {
        let end = (at + batch).min(n);
        if end - at < 2 && !out.is_empty() {
            let last: &mut (usize, usize) = out.last_mut().expect("a chunk");
            last.1 = end;
        } else {
            out.push((at, end));
        }
        at = end;
    }
    out
}

/// For each simulation `rows[r]` of a minibatch: its own row, then K rows of other simulations of
/// the minibatch (uniform, with replacement), row-major rows x (K + 1).
fn draw_pairs(rows: &[usize], k: usize, rng: &mut ChaCha20Rng) -> Vec<usize> {
    let b = rows.len();
    let mut out = Vec::with_capacity(b * (k + 1));
    for (r, &i) in rows.iter().enumerate() {
        out.push(i);
        for _ in 0..k {
            let j = rng.gen_range(0..b - 1);
            out.push(rows[if j >= r { j + 1 } else { j }]);
        }
    }
    out
}

/// Mean loss of a minibatch (simulations `rows`, pairs `thetas` from `draw_pairs`); with
/// `grad`, writes its gradient there. Blocks run in parallel, their gradients summed in order.
fn batch_pass(
    arch: &Architecture,
    params: &[f64],
    data: &Rows,
    s: &RatioSettings,
    rows: &[usize],
    thetas: &[usize],
    grad: Option<&mut [f64]>,
) -> f64 {
    let (loss, k) = (s.loss, s.n_negatives);
    let c = k + 1;
    let mut passes: Vec<PairPass> = rows
        .par_chunks(BLOCK_ROWS)
        .zip(thetas.par_chunks(BLOCK_ROWS * c))
        .map(|(r, t)| {
            let mut pass = PairPass::default();
            arch.forward_pairs(params, data, r, t, c, &mut pass);
            pass
        })
        .collect();
    let Some(grad) = grad else {
        let logits: Vec<&[f64]> = passes.iter().map(|p| &p.logits[..]).collect();
        return batch_loss(loss, k, &logits, None);
    };
    let mut dl = vec![Vec::new(); passes.len()];
    let value = {
        let logits: Vec<&[f64]> = passes.iter().map(|p| &p.logits[..]).collect();
        batch_loss(loss, k, &logits, Some(&mut dl))
    };
    let np = params.len();
    let parts: Vec<Vec<f64>> = passes
        .par_iter_mut()
        .zip(dl.par_iter())
        .map(|(pass, g)| {
            let mut gr = vec![0.0; np];
            arch.backward_pairs(params, c, pass, g, &mut gr);
            gr
        })
        .collect();
    grad.iter_mut().for_each(|g| *g = 0.0);
    for part in parts {
        grad.iter_mut().zip(&part).for_each(|(a, b)| *a += b);
    }
    value
}

/// Training as a sequence of epochs, so a caller can report or poll between them:
/// `Trainer::new`, then `epoch` until it returns `None`, then `finish`. The result does not
/// depend on how the epochs are grouped into calls.
pub struct Trainer {
    s: RatioSettings,
    train_rows: Vec<usize>,
    /// Held-out minibatches: their simulations and fixed pairs.
    held: Vec<(Vec<usize>, Vec<usize>)>,
    held_count: usize,
    params: Vec<f64>,
    decay: Vec<bool>,
    adam: Adam,
    grad: Vec<f64>,
    rng: ChaCha20Rng,
    /// Best parameters, their held-out loss and epoch.
    best: (Vec<f64>, f64, usize),
    since_best: usize,
    since_step: usize,
    step: f64,
    epoch: usize,
    early: bool,
    finished: bool,
    history: Vec<EpochReport>,
}

impl Trainer {
    /// Checks the settings against the network and the rows, splits off the held-out
    /// simulations and draws the starting weights.
    pub fn new(arch: &Architecture, data: &Rows, s: RatioSettings) -> Result<Self> {
        let n = arch.check_rows(data)?;
        if s.batch < 2 || s.max_epochs == 0 || s.patience == 0 || s.step_patience == 0 {
            return Err(NceError::invalid(
                "settings",
                "`batch` must be at least 2, `max_epochs`, `patience` and `step_patience` at least 1",
            ));
        }
        if s.n_negatives == 0 || s.n_negatives > 1000 {
            return Err(NceError::invalid("n_negatives", "must be between 1 and 1000"));
        }
        if !s.loss.is_valid() {
            return Err(NceError::invalid(
                "loss",
                "needs gamma > 0 (nrec) and lambda >= 0 (bnre)",
            ));
        }
        if !(s.step > 0.0 && s.step.is_finite() && s.weight_decay >= 0.0 && s.weight_decay.is_finite()) {
            return Err(NceError::invalid(
                "step",
                "the step must be > 0 and the weight decay >= 0",
            ));
        }
        if !(0.0..0.9).contains(&s.held_out) {
            return Err(NceError::invalid("held_out", "must be a share in [0, 0.9)"));
        }
        let flops = 6.0 * s.max_epochs as f64 * n as f64 * arch.macs(s.n_negatives + 1) as f64;
        if flops > MAX_TRAINING_FLOPS {
            return Err(NceError::invalid(
                "max_epochs",
                format!(
                    "asks for about {flops:.1e} floating-point operations (epochs x simulations x network size), \
                     more than the {MAX_TRAINING_FLOPS:.0e} allowed; lower `max_epochs` or use a smaller network"
                ),
            ));
        }
        // The held-out simulations: a random share, by stream 1.
        let mut perm: Vec<usize> = (0..n).collect();
        let mut rng = stream_rng(s.seed, 1);
        for i in (1..n).rev() {
            perm.swap(i, rng.gen_range(0..=i));
        }
        let n_held = if s.held_out > 0.0 {
            ((s.held_out * n as f64).round() as usize).max(2)
        } else {
            0
        };
        if n < n_held + 2 {
            return Err(NceError::invalid(
                "x",
                "needs at least two simulations to train on besides the held-out ones",
            ));
        }
        let mut held_rows = perm[..n_held].to_vec();
        held_rows.sort_unstable();
        let mut train_rows = perm[n_held..].to_vec();
        train_rows.sort_unstable();
        let mut hrng = stream_rng(s.seed, 3);
        let held = chunks(held_rows.len(), s.batch)
            .into_iter()
            .map(|(a, b)| {
                let rows = held_rows[a..b].to_vec();
                let pairs = draw_pairs(&rows, s.n_negatives, &mut hrng);
                (rows, pairs)
            })
            .collect();
        let params = arch.init(&mut stream_rng(s.seed, 0));
        Ok(Trainer {
            decay: arch.weight_mask(),
            adam: Adam::new(params.len()),
            grad: vec![0.0; params.len()],
            best: (params.clone(), f64::INFINITY, 0),
            params,
            rng: stream_rng(s.seed, 2),
            train_rows,
            held,
            held_count: n_held,
            since_best: 0,
            since_step: 0,
            step: s.step,
            epoch: 0,
            early: false,
            finished: false,
            history: Vec::new(),
            s,
        })
    }

    /// The held-out loss of `params` (its fixed pairs), averaged over simulations.
    fn held_out_loss(&self, arch: &Architecture, data: &Rows, params: &[f64]) -> f64 {
        let mut total = 0.0;
        for (rows, pairs) in &self.held {
            let l = batch_pass(arch, params, data, &self.s, rows, pairs, None);
            total += l * rows.len() as f64;
        }
        total / self.held_count as f64
    }

    /// Run the next epoch: `None` when training is over. `data` must be the rows `new` was given;
    /// `stop` is polled before every minibatch.
    pub fn epoch(&mut self, arch: &Architecture, data: &Rows, stop: &dyn Fn() -> bool) -> Result<Option<EpochReport>> {
        if self.finished {
            return Ok(None);
        }
        let epoch = self.epoch + 1;
        // Fisher-Yates from the training stream, then the minibatches' pairs from it.
        let mut order = self.train_rows.clone();
        for i in (1..order.len()).rev() {
            order.swap(i, self.rng.gen_range(0..=i));
        }
        let mut train_loss = 0.0;
        for (a, b) in chunks(order.len(), self.s.batch) {
            if stop() {
                return Err(NceError::Interrupted);
            }
            let rows = &order[a..b];
            let pairs = draw_pairs(rows, self.s.n_negatives, &mut self.rng);
            let l = batch_pass(arch, &self.params, data, &self.s, rows, &pairs, Some(&mut self.grad));
            if !l.is_finite() || self.grad.iter().any(|g| !g.is_finite()) {
                return Err(NceError::Numerical(format!(
                    "the loss became {l} in epoch {epoch}; lower the step (`step`) or standardise theta, z and x"
                )));
            }
            train_loss += l * rows.len() as f64;
            self.adam.step(
                &mut self.params,
                &self.grad,
                self.step,
                self.s.weight_decay,
                &self.decay,
            );
        }
        self.epoch = epoch;
        train_loss /= order.len() as f64;
        let held = if self.held.is_empty() {
            train_loss
        } else {
            self.held_out_loss(arch, data, &self.params)
        };
        let rep = EpochReport {
            epoch,
            train_loss,
            held_out_loss: held,
            step: self.step,
        };
        self.history.push(rep);
        if held < self.best.1 {
            self.best = (self.params.clone(), held, epoch);
            self.since_best = 0;
            self.since_step = 0;
        } else {
            self.since_best += 1;
            self.since_step += 1;
            if self.since_step >= self.s.step_patience {
                self.step *= 0.5;
                self.since_step = 0;
            }
            self.early = self.since_best >= self.s.patience;
        }
        self.finished = self.early || epoch == self.s.max_epochs;
        Ok(Some(rep))
    }

    /// True when training is over.
    pub fn done(&self) -> bool {
        self.finished
    }

    /// The best parameters and the record (training must be over).
    pub fn finish(self) -> Result<TrainResult> {
        if !self.finished {
            return Err(NceError::invalid("session", "training has not finished"));
        }
        let (params, held_out_loss, best_epoch) = self.best;
        Ok(TrainResult {
            params,
            held_out_loss,
            best_epoch,
            history: self.history,
            early: self.early,
        })
    }
}

/// Train to the end; `report` sees every epoch.
pub fn train(
    arch: &Architecture,
    data: &Rows,
    s: &RatioSettings,
    report: &mut dyn FnMut(&EpochReport),
    stop: &dyn Fn() -> bool,
) -> Result<TrainResult> {
    let mut t = Trainer::new(arch, data, s.clone())?;
    while let Some(rep) = t.epoch(arch, data, stop)? {
        report(&rep);
    }
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::super::embedding::EmbeddingSpec;
    use super::*;
    use crate::engine::design::with_threads;
    use crate::estimators::mlp::Activation;

    #[test]
    fn chunks_never_leave_a_lone_simulation() {
        assert_eq!(chunks(5, 2), vec![(0, 2), (2, 5)]);
        assert_eq!(chunks(4, 2), vec![(0, 2), (2, 4)]);
        assert_eq!(chunks(3, 200), vec![(0, 3)]);
        let mut rng = stream_rng(1, 0);
        let rows = [10, 20, 30];
        let p = draw_pairs(&rows, 4, &mut rng);
        for r in 0..3 {
            assert_eq!(p[r * 5], rows[r]);
            assert!(p[r * 5 + 1..(r + 1) * 5]
                .iter()
                .all(|&j| j != rows[r] && rows.contains(&j)));
        }
    }

    fn small_problem(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut rng = stream_rng(8, 0);
        let theta: Vec<f64> = (0..n).map(|_| rng.gen::<f64>() * 2.0 - 1.0).collect();
        let x: Vec<f64> = theta
            .iter()
            .flat_map(|t| (0..4).map(|_| t + rng.gen::<f64>() - 0.5).collect::<Vec<_>>())
            .collect();
        (theta, vec![], x)
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count_or_the_epoch_grouping() {
        let (theta, z, x) = small_problem(400);
        let data = Rows {
            theta: &theta,
            z: &z,
            x: &x,
        };
        let spec = EmbeddingSpec::Pooled {
            item: 1,
            window: 2,
            hidden: vec![6],
            out: 3,
        };
        let arch = Architecture::new(1, 0, 4, &spec, &[8, 8], Activation::Relu).unwrap();
        for loss in [Loss::Nre, Loss::Nrec { gamma: 1.0 }, Loss::Bnre { lambda: 100.0 }] {
            let mut s = RatioSettings::recommended(loss, 3);
            s.max_epochs = 3;
            s.batch = 150;
            let a = with_threads(1, || train(&arch, &data, &s, &mut |_| {}, &|| false))
                .unwrap()
                .unwrap();
            let b = with_threads(2, || train(&arch, &data, &s, &mut |_| {}, &|| false))
                .unwrap()
                .unwrap();
            assert_eq!(a.params, b.params);
            assert_eq!(a.history, b.history);
            assert_eq!(a.history.len(), 3);
            let mut t = Trainer::new(&arch, &data, s.clone()).unwrap();
            while t.epoch(&arch, &data, &|| false).unwrap().is_some() {}
            assert!(t.done());
            assert_eq!(t.finish().unwrap().params, a.params);
        }
        let s = RatioSettings::recommended(Loss::Nre, 3);
        let e = train(&arch, &data, &s, &mut |_| {}, &|| true);
        assert_eq!(e.unwrap_err(), NceError::Interrupted);
        let t = Trainer::new(&arch, &data, s).unwrap();
        assert!(t.finish().is_err());
    }

    #[test]
    fn unbounded_or_bad_settings_are_refused() {
        let (theta, z, x) = small_problem(400);
        let data = Rows {
            theta: &theta,
            z: &z,
            x: &x,
        };
        let arch = Architecture::new(1, 0, 4, &EmbeddingSpec::None, &[8], Activation::Relu).unwrap();
        let mut s = RatioSettings::recommended(Loss::Nre, 1);
        s.max_epochs = 1usize << 50;
        match Trainer::new(&arch, &data, s.clone()) {
            Err(NceError::InvalidInput { arg, .. }) => assert_eq!(arg, "max_epochs"),
            _ => panic!("an unbounded training was accepted"),
        }
        s.max_epochs = 10;
        for bad in [
            RatioSettings { batch: 1, ..s.clone() },
            RatioSettings {
                n_negatives: 0,
                ..s.clone()
            },
            RatioSettings {
                held_out: 0.95,
                ..s.clone()
            },
            RatioSettings {
                loss: Loss::Nrec { gamma: 0.0 },
                ..s.clone()
            },
            RatioSettings {
                step: -1.0,
                ..s.clone()
            },
        ] {
            assert!(Trainer::new(&arch, &data, bad).is_err());
        }
        let short = Rows { x: &x[..8], ..data };
        assert!(Trainer::new(&arch, &short, s).is_err());
    }
}
