//! Training a network energy by NCE: the logistic loss of the labels (1 data, 0 reference) on
//! eta = f(x) + z'beta + offset, with f the network and z the model's other (parametric) columns,
//! the intercept among them. Minibatch Adam with decoupled weight decay (AdamW) on the weights,
//! the step halved when the held-out loss stops falling, early stopping on the held-out loss, and
//! several random starts keeping the best.
//!
//! Reproducible: the starts' weights and the minibatch order come from ChaCha streams of one seed;
//! each minibatch is cut into blocks of a fixed number of rows whose gradients are summed in
//! order, so the result is the same bit for bit for any number of threads.

use super::network::{Network, Workspace};
use crate::alloc::checked_len;
use crate::engine::family::{sigmoid, softplus};
use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use rand::Rng;
use rayon::prelude::*;

/// Rows per block of a minibatch: fixed, so the sums do not depend on the thread count.
pub const BLOCK_ROWS: usize = 128;

/// The rows to fit: `x` row-major `n x inputs` (the network's inputs), `z` row-major `n x p`
/// (the other columns), labels `y`, prior weights, offsets, and which rows are held out.
#[derive(Debug, Clone, Copy)]
pub struct TrainData<'a> {
    pub x: &'a [f64],
    pub z: &'a [f64],
    pub p: usize,
    pub y: &'a [f64],
    pub weights: &'a [f64],
    pub offset: &'a [f64],
    pub held_out: &'a [bool],
}

impl TrainData<'_> {
    pub fn rows(&self) -> usize {
        self.y.len()
    }

    pub fn check(&self, net: &Network) -> Result<()> {
        let n = self.rows();
        if n == 0 {
            return Err(NceError::invalid("y", "no rows to fit"));
        }
        if self.x.len() != checked_len(&[n, net.inputs()], "x")? {
            return Err(NceError::invalid(
                "x",
                "must have one row per label and one column per input",
            ));
        }
        if self.z.len() != checked_len(&[n, self.p], "z")? {
            return Err(NceError::invalid("z", "must have one row per label"));
        }
        if self.weights.len() != n || self.offset.len() != n || self.held_out.len() != n {
            return Err(NceError::invalid(
                "weights",
                "weights, offsets and held-out flags need one value per row",
            ));
        }
        if self.y.iter().any(|&v| v != 0.0 && v != 1.0) {
            return Err(NceError::invalid("y", "labels must be 0 or 1"));
        }
        if !self.x.iter().chain(self.z).chain(self.offset).all(|v| v.is_finite())
            || !self.weights.iter().all(|w| w.is_finite() && *w >= 0.0)
        {
            return Err(NceError::invalid(
                "x",
                "inputs, offsets and weights must be finite (weights >= 0)",
            ));
        }
        Ok(())
    }
}

/// What the trainer minimises: a sum of losses over rows (labelled points here; other losses
/// can implement it), with `extra()` coefficients beside the network's parameters.
pub trait Objective: Sync {
    fn rows(&self) -> usize;
    fn held_out(&self, i: usize) -> bool;
    fn extra(&self) -> usize;
    /// Loss summed over rows `idx`; with `grad`, adds its gradient (network, then extra).
    fn block(&self, net: &Network, theta: &[f64], idx: &[usize], grad: Option<&mut [f64]>) -> f64;
}

impl Objective for TrainData<'_> {
    fn rows(&self) -> usize {
        self.y.len()
    }
    fn held_out(&self, i: usize) -> bool {
        self.held_out[i]
    }
    fn extra(&self) -> usize {
        self.p
    }
    fn block(&self, net: &Network, theta: &[f64], idx: &[usize], grad: Option<&mut [f64]>) -> f64 {
        block_loss(net, theta, self, idx, grad)
    }
}

/// Training settings (see `nce_mlp_control()` in R for their meaning and defaults).
#[derive(Debug, Clone)]
pub struct TrainSettings {
    pub batch: usize,
    pub max_epochs: usize,
    pub step: f64,
    pub weight_decay: f64,
    /// Epochs without a better held-out loss before the step is halved.
    pub step_patience: usize,
    /// Epochs without a better held-out loss before training stops.
    pub patience: usize,
    pub n_starts: usize,
    pub seed: u64,
    /// Starting values of the other columns' coefficients (length p).
    pub beta_start: Vec<f64>,
    /// Network parameters to start from instead of random ones (first start only).
    pub warm_start: Option<Vec<f64>>,
}

/// One epoch of one start, as the progress report sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochReport {
    pub start: usize,
    pub epoch: usize,
    pub train_loss: f64,
    pub held_out_loss: f64,
    pub step: f64,
}

/// The best start's parameters and the record of all.
#[derive(Debug, Clone)]
pub struct TrainResult {
    pub params: Vec<f64>,
    pub beta: Vec<f64>,
    pub held_out_loss: f64,
    pub best_start: usize,
    pub best_epoch: usize,
    /// Every epoch of every start.
    pub history: Vec<EpochReport>,
    /// Per start: best held-out loss, its epoch, and whether it stopped early (true) rather than
    /// at `max_epochs`.
    pub starts: Vec<(f64, usize, bool)>,
}

/// Weighted logistic loss and gradient of one block of rows `idx`: adds the network gradient to
/// `grad[..P]` and the other columns' to `grad[P..]`; returns the loss sum.
fn block_loss(net: &Network, theta: &[f64], data: &TrainData, idx: &[usize], grad: Option<&mut [f64]>) -> f64 {
    let np = net.n_params();
    let d = net.inputs();
    let p = data.p;
    let rows = idx.len();
    let mut xb = vec![0.0; rows * d];
    for (r, &i) in idx.iter().enumerate() {
        xb[r * d..(r + 1) * d].copy_from_slice(&data.x[i * d..(i + 1) * d]);
    }
    let mut ws = Workspace::default();
    let mut f = vec![0.0; rows];
    net.forward(&theta[..np], &xb, rows, &mut ws, &mut f);
    let beta = &theta[np..];
    let mut loss = 0.0;
    let mut g = vec![0.0; rows];
    for (r, &i) in idx.iter().enumerate() {
        let zi = &data.z[i * p..(i + 1) * p];
        let eta = f[r] + zi.iter().zip(beta).map(|(a, b)| a * b).sum::<f64>() + data.offset[i];
        let (y, w) = (data.y[i], data.weights[i]);
        loss += w * (softplus(eta) - y * eta);
        g[r] = w * (sigmoid(eta) - y);
    }
    if let Some(grad) = grad {
        let (gn, gb) = grad.split_at_mut(np);
        net.backward(&theta[..np], &xb, rows, &mut ws, &g, gn);
        for (r, &i) in idx.iter().enumerate() {
            let zi = &data.z[i * p..(i + 1) * p];
            for (b, zv) in gb.iter_mut().zip(zi) {
                *b += g[r] * zv;
            }
        }
    }
    loss
}

/// Mean loss and gradient over rows `idx`, in blocks summed in order (thread-count free).
fn batch_gradient(net: &Network, theta: &[f64], data: &dyn Objective, idx: &[usize], grad: &mut [f64]) -> f64 {
    let parts: Vec<(f64, Vec<f64>)> = idx
        .par_chunks(BLOCK_ROWS)
        .map(|b| {
            let mut g = vec![0.0; theta.len()];
            let l = data.block(net, theta, b, Some(&mut g));
            (l, g)
        })
        .collect();
    grad.iter_mut().for_each(|g| *g = 0.0);
    let mut loss = 0.0;
    for (l, g) in parts {
        loss += l;
        for (a, b) in grad.iter_mut().zip(&g) {
            *a += b;
        }
    }
    let scale = 1.0 / idx.len() as f64;
    grad.iter_mut().for_each(|g| *g *= scale);
    loss * scale
}

/// Mean weighted loss over rows `idx` (no gradient), in blocks summed in order.
pub fn mean_loss(net: &Network, theta: &[f64], data: &dyn Objective, idx: &[usize]) -> f64 {
    if idx.is_empty() {
        return f64::NAN;
    }
    let parts: Vec<f64> = idx
        .par_chunks(4 * BLOCK_ROWS)
        .map(|b| data.block(net, theta, b, None))
        .collect();
    parts.iter().sum::<f64>() / idx.len() as f64
}

pub(crate) struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    const B1: f64 = 0.9;
    const B2: f64 = 0.999;
    const EPS: f64 = 1e-8;

    pub(crate) fn new(k: usize) -> Self {
        Adam {
            m: vec![0.0; k],
            v: vec![0.0; k],
            t: 0,
        }
    }

    /// One AdamW step: the Adam update, and the weights (`decay[k]`) shrunk by step * wd.
    pub(crate) fn step(&mut self, theta: &mut [f64], grad: &[f64], step: f64, wd: f64, decay: &[bool]) {
        self.t += 1;
        let c1 = 1.0 - Self::B1.powi(self.t);
        let c2 = 1.0 - Self::B2.powi(self.t);
        for k in 0..theta.len() {
            let g = grad[k];
            self.m[k] = Self::B1 * self.m[k] + (1.0 - Self::B1) * g;
            self.v[k] = Self::B2 * self.v[k] + (1.0 - Self::B2) * g * g;
            let upd = (self.m[k] / c1) / ((self.v[k] / c2).sqrt() + Self::EPS);
            if decay[k] {
                theta[k] -= step * wd * theta[k];
            }
            theta[k] -= step * upd;
        }
    }
}

/// One start in progress: its parameters, optimiser, minibatch order and early-stopping state.
struct StartRun {
    theta: Vec<f64>,
    decay: Vec<bool>,
    adam: Adam,
    grad: Vec<f64>,
    order: Vec<usize>,
    rng: rand_chacha::ChaCha20Rng,
    step: f64,
    /// Best parameters, their held-out loss and epoch.
    best: (Vec<f64>, f64, usize),
    since_best: usize,
    since_step: usize,
    epoch: usize,
    early: bool,
}

impl StartRun {
    fn new(net: &Network, s: &TrainSettings, start: usize, train_rows: &[usize]) -> Self {
        let mut theta = match (&s.warm_start, start) {
            (Some(w), 0) => w.clone(),
            _ => net.init(&mut stream_rng(s.seed, 2 * start as u64)),
        };
        theta.extend_from_slice(&s.beta_start);
        let mut decay = net.weight_mask();
        decay.resize(theta.len(), false);
        StartRun {
            adam: Adam::new(theta.len()),
            grad: vec![0.0; theta.len()],
            best: (theta.clone(), f64::INFINITY, 0),
            theta,
            decay,
            order: train_rows.to_vec(),
            rng: stream_rng(s.seed, 2 * start as u64 + 1),
            step: s.step,
            since_best: 0,
            since_step: 0,
            epoch: 0,
            early: false,
        }
    }

    /// One pass over the training rows in a fresh random order; returns the epoch's report and
    /// whether this start is finished (stopped early or at `max_epochs`).
    fn epoch(
        &mut self,
        net: &Network,
        data: &dyn Objective,
        s: &TrainSettings,
        start: usize,
        held_rows: &[usize],
        stop: &dyn Fn() -> bool,
    ) -> Result<(EpochReport, bool)> {
        self.epoch += 1;
        let epoch = self.epoch;
        // Fisher-Yates from this start's stream.
        for i in (1..self.order.len()).rev() {
            let j = self.rng.gen_range(0..=i);
            self.order.swap(i, j);
        }
        let mut train_loss = 0.0;
        for batch in self.order.chunks(s.batch) {
            if stop() {
                return Err(NceError::Interrupted);
            }
            let l = batch_gradient(net, &self.theta, data, batch, &mut self.grad);
            if !l.is_finite() || self.grad.iter().any(|g| !g.is_finite()) {
                return Err(NceError::Numerical(format!(
                    "the loss became {l} in epoch {epoch} of start {}; lower the step (`step`) or standardise the inputs",
                    start + 1
                )));
            }
            train_loss += l * batch.len() as f64;
            self.adam
                .step(&mut self.theta, &self.grad, self.step, s.weight_decay, &self.decay);
        }
        train_loss /= self.order.len() as f64;
        let held = if held_rows.is_empty() {
            train_loss
        } else {
            mean_loss(net, &self.theta, data, held_rows)
        };
        let rep = EpochReport {
            start,
            epoch,
            train_loss,
            held_out_loss: held,
            step: self.step,
        };
        if held < self.best.1 {
            self.best = (self.theta.clone(), held, epoch);
            self.since_best = 0;
            self.since_step = 0;
        } else {
            self.since_best += 1;
            self.since_step += 1;
            if self.since_step >= s.step_patience {
                self.step *= 0.5;
                self.since_step = 0;
            }
            if self.since_best >= s.patience {
                self.early = true;
            }
        }
        Ok((rep, self.early || epoch == s.max_epochs))
    }
}

/// Training as a sequence of epochs over all starts, so a caller can report or poll between
/// them: `Trainer::new`, then `epoch` until it returns `None`, then `finish`. The result does not
/// depend on how the epochs are grouped into calls.
pub struct Trainer {
    s: TrainSettings,
    train_rows: Vec<usize>,
    held_rows: Vec<usize>,
    /// The start running (or next to run).
    start: usize,
    current: Option<StartRun>,
    history: Vec<EpochReport>,
    starts: Vec<(f64, usize, bool)>,
    /// Best start so far: parameters, held-out loss, epoch, start.
    best: Option<(Vec<f64>, f64, usize, usize)>,
}

impl Trainer {
    /// Checks the settings against the network and the data.
    pub fn new(net: &Network, data: &dyn Objective, s: TrainSettings) -> Result<Self> {
        if s.batch == 0 || s.max_epochs == 0 || s.n_starts == 0 || s.patience == 0 || s.step_patience == 0 {
            return Err(NceError::invalid(
                "control",
                "batch, epochs, starts and patience must be at least 1",
            ));
        }
        if !(s.step > 0.0 && s.step.is_finite() && s.weight_decay >= 0.0 && s.weight_decay.is_finite()) {
            return Err(NceError::invalid(
                "control",
                "the step must be > 0 and the weight decay >= 0",
            ));
        }
        if s.beta_start.len() != data.extra() || s.beta_start.iter().any(|b| !b.is_finite()) {
            return Err(NceError::invalid(
                "beta_start",
                "needs one finite value per column of z",
            ));
        }
        if let Some(w) = &s.warm_start {
            if w.len() != net.n_params() || w.iter().any(|v| !v.is_finite()) {
                return Err(NceError::invalid(
                    "warm_start",
                    format!("needs {} finite network parameters", net.n_params()),
                ));
            }
        }
        let train_rows: Vec<usize> = (0..data.rows()).filter(|&i| !data.held_out(i)).collect();
        let held_rows: Vec<usize> = (0..data.rows()).filter(|&i| data.held_out(i)).collect();
        if train_rows.is_empty() {
            return Err(NceError::invalid("held_out", "leaves no rows to train on"));
        }
        Ok(Trainer {
            starts: Vec::with_capacity(s.n_starts),
            s,
            train_rows,
            held_rows,
            start: 0,
            current: None,
            history: Vec::new(),
            best: None,
        })
    }

    /// Run the next epoch (of the current start, or the first of the next); `None` when every
    /// start is finished. `data` must be the rows `new` was given.
    pub fn epoch(
        &mut self,
        net: &Network,
        data: &dyn Objective,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<EpochReport>> {
        if self.start == self.s.n_starts {
            return Ok(None);
        }
        let (s, start, held_rows) = (&self.s, self.start, &self.held_rows);
        let run = self
            .current
            .get_or_insert_with(|| StartRun::new(net, s, start, &self.train_rows));
        let (rep, finished) = run.epoch(net, data, s, start, held_rows, stop)?;
        self.history.push(rep);
        if finished {
            let run = self.current.take().expect("a start in progress");
            let (theta, loss, epoch) = run.best;
            self.starts.push((loss, epoch, run.early));
            if self.best.as_ref().map_or(true, |b| loss < b.1) {
                self.best = Some((theta, loss, epoch, start));
            }
            self.start += 1;
        }
        Ok(Some(rep))
    }

    /// True when every start is finished.
    pub fn done(&self) -> bool {
        self.start == self.s.n_starts
    }

    /// The best start's parameters and the record of all (every start must be finished).
    pub fn finish(self, net: &Network) -> Result<TrainResult> {
        let Some((theta, loss, epoch, start)) = self.best.filter(|_| self.start == self.s.n_starts) else {
            return Err(NceError::invalid("session", "training has not finished"));
        };
        let np = net.n_params();
        Ok(TrainResult {
            params: theta[..np].to_vec(),
            beta: theta[np..].to_vec(),
            held_out_loss: loss,
            best_start: start,
            best_epoch: epoch,
            history: self.history,
            starts: self.starts,
        })
    }
}

/// Fit the network (and the other columns' coefficients) to `data`, as `s` says. `report` sees
/// every epoch; `stop` is polled before every minibatch.
pub fn train(
    net: &Network,
    data: &TrainData,
    s: &TrainSettings,
    report: &mut dyn FnMut(&EpochReport),
    stop: &dyn Fn() -> bool,
) -> Result<TrainResult> {
    data.check(net)?;
    let mut t = Trainer::new(net, data, s.clone())?;
    while let Some(rep) = t.epoch(net, data, stop)? {
        report(&rep);
    }
    t.finish(net)
}

/// f at the `n` rows of `x` (row-major `n x inputs`), in blocks, in parallel.
pub fn evaluate(net: &Network, params: &[f64], x: &[f64]) -> Result<Vec<f64>> {
    let d = net.inputs();
    if params.len() != net.n_params() {
        return Err(NceError::invalid(
            "params",
            format!("needs {} values for this network", net.n_params()),
        ));
    }
    if x.len() % d != 0 {
        return Err(NceError::invalid("x", "must have one column per input"));
    }
    let n = x.len() / d;
    let mut out = vec![0.0; n];
    out.par_chunks_mut(4 * BLOCK_ROWS)
        .zip(x.par_chunks(4 * BLOCK_ROWS * d))
        .for_each(|(o, xb)| {
            let mut ws = Workspace::default();
            net.forward(params, xb, o.len(), &mut ws, o);
        });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::network::Activation;
    use super::*;
    use crate::engine::design::with_threads;
    use rand_distr::{Distribution, Normal};

    /// NCE of N(0, 1) data against a N(0, 2^2) reference with ratio 1: the exact log ratio is
    /// log p - log q = log 2 - 3 x^2 / 8, so the fitted f + intercept should approach it.
    /// The rows of a test problem, owned; `data()` views them with an intercept column.
    struct Problem {
        x: Vec<f64>,
        y: Vec<f64>,
        offset: Vec<f64>,
        held: Vec<bool>,
        ones: Vec<f64>,
    }

    impl Problem {
        fn data(&self) -> TrainData<'_> {
            TrainData {
                x: &self.x,
                z: &self.ones,
                p: 1,
                y: &self.y,
                weights: &self.ones,
                offset: &self.offset,
                held_out: &self.held,
            }
        }
    }

    fn gaussian_problem(n: usize) -> Problem {
        let mut rng = stream_rng(3, 0);
        let (p, q) = (Normal::new(0.0, 1.0).unwrap(), Normal::new(0.0, 2.0).unwrap());
        let mut x = Vec::with_capacity(2 * n);
        let mut y = Vec::with_capacity(2 * n);
        for i in 0..2 * n {
            let data = i < n;
            let v: f64 = if data { p.sample(&mut rng) } else { q.sample(&mut rng) };
            x.push(v);
            y.push(if data { 1.0 } else { 0.0 });
        }
        // offset: log(n/m) - log q(x) = -log q(x)
        let offset: Vec<f64> = x
            .iter()
            .map(|v| 0.5 * (2.0 * std::f64::consts::PI * 4.0).ln() + v * v / 8.0)
            .collect();
        let held: Vec<bool> = (0..2 * n).map(|i| i % 10 == 0).collect();
        Problem {
            x,
            y,
            offset,
            held,
            ones: vec![1.0; 2 * n],
        }
    }

    fn settings(seed: u64) -> TrainSettings {
        TrainSettings {
            batch: 256,
            max_epochs: 60,
            step: 0.01,
            weight_decay: 0.0,
            step_patience: 4,
            patience: 10,
            n_starts: 1,
            seed,
            beta_start: vec![0.0],
            warm_start: None,
        }
    }

    #[test]
    fn recovers_a_gaussian_log_density() {
        let n = 4000;
        let problem = gaussian_problem(n);
        let data = problem.data();
        let net = Network::new(1, vec![16, 16], Activation::Tanh).unwrap();
        let r = with_threads(2, || train(&net, &data, &settings(1), &mut |_| {}, &|| false))
            .unwrap()
            .unwrap();
        // log p(x) = f(x) + intercept against -x^2/2 - log sqrt(2 pi), on [-2, 2].
        let grid: Vec<f64> = (0..41).map(|i| -2.0 + 0.1 * i as f64).collect();
        let f = evaluate(&net, &r.params, &grid).unwrap();
        let err = grid
            .iter()
            .zip(&f)
            .map(|(g, fv)| (fv + r.beta[0] - (-g * g / 2.0 - 0.5 * (2.0 * std::f64::consts::PI).ln())).abs())
            .fold(0.0, f64::max);
        assert!(err < 0.15, "max error of the log density {err}");
        assert!(r.held_out_loss < 2.0f64.ln());
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let n = 600;
        let problem = gaussian_problem(n);
        let data = problem.data();
        let net = Network::new(1, vec![8, 8], Activation::Relu).unwrap();
        let mut s = settings(5);
        s.max_epochs = 5;
        s.n_starts = 2;
        s.batch = 500;
        let a = with_threads(1, || train(&net, &data, &s, &mut |_| {}, &|| false))
            .unwrap()
            .unwrap();
        let b = with_threads(3, || train(&net, &data, &s, &mut |_| {}, &|| false))
            .unwrap()
            .unwrap();
        assert_eq!(a.params, b.params);
        assert_eq!(a.beta, b.beta);
        assert_eq!(a.history, b.history);
        let mut epochs = 0;
        let e = train(&net, &data, &s, &mut |_| epochs += 1, &|| true);
        assert_eq!(e.unwrap_err(), NceError::Interrupted);
        assert_eq!(epochs, 0);
    }

    #[test]
    fn a_trainer_run_epoch_by_epoch_gives_the_result_of_train() {
        let n = 300;
        let problem = gaussian_problem(n);
        let data = problem.data();
        let net = Network::new(1, vec![4], Activation::Relu).unwrap();
        let mut s = settings(7);
        s.max_epochs = 6;
        s.n_starts = 2;
        let whole = train(&net, &data, &s, &mut |_| {}, &|| false).unwrap();
        let mut t = Trainer::new(&net, &data, s.clone()).unwrap();
        let mut seen = Vec::new();
        while let Some(rep) = t.epoch(&net, &data, &|| false).unwrap() {
            seen.push(rep);
        }
        assert!(t.done());
        assert_eq!(seen, whole.history);
        let stepped = t.finish(&net).unwrap();
        assert_eq!(stepped.params, whole.params);
        assert_eq!(stepped.beta, whole.beta);
        // Asking for the result before the last epoch is an error, not a partial result.
        let mut t = Trainer::new(&net, &data, s).unwrap();
        t.epoch(&net, &data, &|| false).unwrap();
        assert!(t.finish(&net).is_err());
    }

    #[test]
    fn bad_inputs_are_refused() {
        let net = Network::new(1, vec![4], Activation::Relu).unwrap();
        let x = [0.0, 1.0];
        let z = [1.0, 1.0];
        let data = TrainData {
            x: &x,
            z: &z,
            p: 1,
            y: &[1.0, 2.0],
            weights: &[1.0, 1.0],
            offset: &[0.0, 0.0],
            held_out: &[false, false],
        };
        assert!(train(&net, &data, &settings(1), &mut |_| {}, &|| false).is_err());
        let data = TrainData {
            y: &[1.0, 0.0],
            held_out: &[true, true],
            ..data
        };
        assert!(train(&net, &data, &settings(1), &mut |_| {}, &|| false).is_err());
    }

    /// Ignored speed check: one epoch of 100,000 rows through a 10-64-64-1 network (batch 256).
    /// cargo test --release -p nce-core --lib mlp::train::tests::speed -- --ignored --nocapture
    #[test]
    #[ignore]
    fn speed() {
        let n = 100_000;
        let d = 10;
        let mut rng = stream_rng(1, 0);
        let x: Vec<f64> = (0..n * d).map(|_| rng.gen::<f64>()).collect();
        let y: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
        let z = vec![1.0; n];
        let w = vec![1.0; n];
        let offset = vec![0.0; n];
        let held = vec![false; n];
        let data = TrainData {
            x: &x,
            z: &z,
            p: 1,
            y: &y,
            weights: &w,
            offset: &offset,
            held_out: &held,
        };
        let net = Network::new(d, vec![64, 64], Activation::Relu).unwrap();
        let mut s = settings(1);
        s.max_epochs = 3;
        s.patience = 100;
        for threads in [1, 2] {
            let t = std::time::Instant::now();
            with_threads(threads, || train(&net, &data, &s, &mut |_| {}, &|| false))
                .unwrap()
                .unwrap();
            let per = t.elapsed().as_secs_f64() / 3.0;
            // forward + backward ~ 3 x 2 x rows x (10*64 + 64*64 + 64) flops
            let flops = 6.0 * n as f64 * (10.0 * 64.0 + 64.0 * 64.0 + 64.0);
            println!(
                "{threads} thread(s): {per:.3} s per epoch, {:.2} GFLOP/s",
                flops / per / 1e9
            );
        }
        // The machine's matrix-multiply rate on one core, for comparison: 1024^3 products.
        let k = 1024;
        let a: Vec<f64> = (0..k * k).map(|i| (i % 7) as f64).collect();
        let mut c = vec![0.0; k * k];
        let t = std::time::Instant::now();
        for _ in 0..3 {
            // Safety: all three buffers are k x k, row-major.
            unsafe {
                matrixmultiply::dgemm(
                    k,
                    k,
                    k,
                    1.0,
                    a.as_ptr(),
                    k as isize,
                    1,
                    a.as_ptr(),
                    k as isize,
                    1,
                    0.0,
                    c.as_mut_ptr(),
                    k as isize,
                    1,
                );
            }
        }
        let rate = 3.0 * 2.0 * (k as f64).powi(3) / t.elapsed().as_secs_f64() / 1e9;
        println!("dgemm 1024^3 on one thread: {rate:.2} GFLOP/s");
    }
}
