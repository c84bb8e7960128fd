//! Learned embeddings of a raw data row x (q values) into the head's features.
//!
//! `Pooled` treats x as T = q / c items of c values each and applies one small network phi to
//! every window of w consecutive items (stride one item), then averages phi over the T - w + 1
//! windows. w = 1 is DeepSets (invariant to permutations of exchangeable items); w >= 2 is a 1-D
//! convolution with global average pooling: the log-likelihood of an order-(w - 1) Markov series
//! is a sum over such windows, so this family can represent the sufficient statistics of such
//! series. All windows of a block of rows go through phi as one matrix product (im2col).

use super::layers::{Stack, StackWs};
use crate::error::{NceError, Result};
use crate::estimators::mlp::Activation;
use rand::Rng;

/// Which embedding, as the caller asks for it.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddingSpec {
    /// x used as is.
    None,
    /// An MLP on the whole of x: hidden layers activated, `out` linear outputs.
    Dense { hidden: Vec<usize>, out: usize },
    /// phi (input `window * item` values, hidden layers activated, `out` linear outputs) on every
    /// window of `window` consecutive items of `item` values, mean-pooled.
    Pooled {
        item: usize,
        window: usize,
        hidden: Vec<usize>,
        out: usize,
    },
}

/// An embedding built for rows of q values.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    q: usize,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    None,
    Dense(Stack),
    /// phi, the values per item, and the number of windows per row.
    Pooled {
        phi: Stack,
        item: usize,
        windows: usize,
    },
}

/// Buffers of one block of rows.
#[derive(Debug, Default, Clone)]
pub struct EmbedWs {
    stack: StackWs,
    /// The windows of the block, one per row (im2col).
    cols: Vec<f64>,
    /// phi at every window, and its back-propagated derivative.
    phi: Vec<f64>,
    dphi: Vec<f64>,
}

impl Embedding {
    pub fn new(spec: &EmbeddingSpec, q: usize, activation: Activation) -> Result<Self> {
        if q == 0 {
            return Err(NceError::invalid("x", "needs at least one column"));
        }
        let kind = match spec {
            EmbeddingSpec::None => Kind::None,
            EmbeddingSpec::Dense { hidden, out } => Kind::Dense(Stack::new(q, hidden, *out, activation, "embedding")?),
            EmbeddingSpec::Pooled {
                item,
                window,
                hidden,
                out,
            } => {
                if *item == 0 || q % item != 0 {
                    return Err(NceError::invalid(
                        "embedding",
                        format!("`item` must divide the {q} columns of x"),
                    ));
                }
                let t = q / item;
                if *window == 0 || *window > t {
                    return Err(NceError::invalid(
                        "embedding",
                        format!("`window` must be between 1 and the {t} items of a row"),
                    ));
                }
                Kind::Pooled {
                    phi: Stack::new(window * item, hidden, *out, activation, "embedding")?,
                    item: *item,
                    windows: t - window + 1,
                }
            }
        };
        Ok(Embedding { q, kind })
    }

    /// Values per raw row.
    pub fn inputs(&self) -> usize {
        self.q
    }

    /// Features per row.
    pub fn outputs(&self) -> usize {
        match &self.kind {
            Kind::None => self.q,
            Kind::Dense(s) | Kind::Pooled { phi: s, .. } => s.outputs(),
        }
    }

    pub fn n_params(&self) -> usize {
        match &self.kind {
            Kind::None => 0,
            Kind::Dense(s) | Kind::Pooled { phi: s, .. } => s.n_params(),
        }
    }

    /// Multiply-adds per raw row of one forward pass.
    pub fn macs_per_row(&self) -> usize {
        match &self.kind {
            Kind::None => 0,
            Kind::Dense(s) => s.macs_per_row(),
            Kind::Pooled { phi, windows, .. } => phi.macs_per_row() * windows,
        }
    }

    pub fn weight_mask(&self) -> Vec<bool> {
        match &self.kind {
            Kind::None => Vec::new(),
            Kind::Dense(s) | Kind::Pooled { phi: s, .. } => s.weight_mask(),
        }
    }

    /// Random starting parameters (full-scale linear outputs: the head sees them as inputs).
    pub fn init<R: Rng>(&self, rng: &mut R, p: &mut [f64]) {
        match &self.kind {
            Kind::None => {}
            Kind::Dense(s) | Kind::Pooled { phi: s, .. } => s.init(rng, 1.0, p),
        }
    }

    /// The features of `rows` rows of `x` (row-major `rows x q`) into `out` (`rows x outputs`).
    pub fn forward(&self, params: &[f64], x: &[f64], rows: usize, ws: &mut EmbedWs, out: &mut [f64]) {
        let m = self.outputs();
        match &self.kind {
            Kind::None => out[..rows * m].copy_from_slice(&x[..rows * m]),
            Kind::Dense(s) => s.forward(params, x, rows, &mut ws.stack, out),
            Kind::Pooled { phi, item, windows } => {
                let (q, nw, span) = (self.q, *windows, phi.inputs());
                ws.cols.clear();
                for r in 0..rows {
                    let xr = &x[r * q..(r + 1) * q];
                    for t in 0..nw {
                        ws.cols.extend_from_slice(&xr[t * item..t * item + span]);
                    }
                }
                ws.phi.resize(rows * nw * m, 0.0);
                phi.forward(params, &ws.cols, rows * nw, &mut ws.stack, &mut ws.phi);
                let scale = 1.0 / nw as f64;
                for r in 0..rows {
                    let o = &mut out[r * m..(r + 1) * m];
                    o.iter_mut().for_each(|v| *v = 0.0);
                    for t in 0..nw {
                        let f = &ws.phi[(r * nw + t) * m..(r * nw + t + 1) * m];
                        o.iter_mut().zip(f).for_each(|(a, b)| *a += b);
                    }
                    o.iter_mut().for_each(|v| *v *= scale);
                }
            }
        }
    }

    /// Adds to `grad` the gradient of sum dfeat . features at the block of the last `forward`.
    pub fn backward(&self, params: &[f64], x: &[f64], rows: usize, ws: &mut EmbedWs, dfeat: &[f64], grad: &mut [f64]) {
        match &self.kind {
            Kind::None => {}
            Kind::Dense(s) => s.backward(params, x, &mut ws.stack, &dfeat[..rows * self.outputs()], grad, None),
            Kind::Pooled { phi, windows, .. } => {
                let (m, nw) = (self.outputs(), *windows);
                let scale = 1.0 / nw as f64;
                ws.dphi.clear();
                for r in 0..rows {
                    let d = &dfeat[r * m..(r + 1) * m];
                    for _ in 0..nw {
                        ws.dphi.extend(d.iter().map(|v| v * scale));
                    }
                }
                phi.backward(params, &ws.cols, &mut ws.stack, &ws.dphi, grad, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream_rng;

    fn embed(e: &Embedding, p: &[f64], x: &[f64], rows: usize) -> Vec<f64> {
        let mut ws = EmbedWs::default();
        let mut out = vec![0.0; rows * e.outputs()];
        e.forward(p, x, rows, &mut ws, &mut out);
        out
    }

    fn pooled(item: usize, window: usize) -> EmbeddingSpec {
        EmbeddingSpec::Pooled {
            item,
            window,
            hidden: vec![5],
            out: 3,
        }
    }

    #[test]
    fn pooling_is_the_mean_of_phi_over_windows() {
        // q = 6: three items of two values, windows of two items.
        let e = Embedding::new(&pooled(2, 2), 6, Activation::Tanh).unwrap();
        let mut p = vec![0.0; e.n_params()];
        e.init(&mut stream_rng(2, 0), &mut p);
        let x = [0.1, -0.4, 0.7, 1.2, -0.3, 0.5];
        let Kind::Pooled { phi, .. } = &e.kind else {
            unreachable!()
        };
        let mut want = vec![0.0; 3];
        for t in 0..2 {
            let mut ws = StackWs::default();
            let mut o = vec![0.0; 3];
            phi.forward(&p, &x[2 * t..2 * t + 4], 1, &mut ws, &mut o);
            want.iter_mut().zip(&o).for_each(|(a, b)| *a += b / 2.0);
        }
        let got = embed(&e, &p, &x, 1);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-14);
        }
        // DeepSets: permuting the items leaves the embedding unchanged.
        let e = Embedding::new(&pooled(2, 1), 6, Activation::Tanh).unwrap();
        let mut p = vec![0.0; e.n_params()];
        e.init(&mut stream_rng(2, 1), &mut p);
        let perm = [-0.3, 0.5, 0.1, -0.4, 0.7, 1.2];
        let (a, b) = (embed(&e, &p, &x, 1), embed(&e, &p, &perm, 1));
        assert!(a.iter().zip(&b).all(|(u, v)| (u - v).abs() < 1e-14));
    }

    #[test]
    fn gradients_match_finite_differences() {
        let specs = [
            EmbeddingSpec::Dense {
                hidden: vec![4],
                out: 3,
            },
            pooled(1, 1),
            pooled(2, 2),
            pooled(1, 3),
        ];
        for spec in specs {
            let e = Embedding::new(&spec, 6, Activation::Softplus).unwrap();
            let mut p = vec![0.0; e.n_params()];
            e.init(&mut stream_rng(9, 0), &mut p);
            let rows = 4;
            let x: Vec<f64> = (0..rows * 6).map(|i| ((i * 13 % 7) as f64 - 3.0) / 2.0).collect();
            let g: Vec<f64> = (0..rows * 3).map(|i| 0.2 * i as f64 - 1.0).collect();
            let obj = |p: &[f64]| -> f64 { embed(&e, p, &x, rows).iter().zip(&g).map(|(a, b)| a * b).sum() };
            let mut ws = EmbedWs::default();
            let mut out = vec![0.0; rows * 3];
            e.forward(&p, &x, rows, &mut ws, &mut out);
            let mut grad = vec![0.0; p.len()];
            e.backward(&p, &x, rows, &mut ws, &g, &mut grad);
            for k in 0..p.len() {
                let h = 1e-6;
                let (mut a, mut b) = (p.clone(), p.clone());
                a[k] += h;
                b[k] -= h;
                let fd = (obj(&a) - obj(&b)) / (2.0 * h);
                assert!(
                    (fd - grad[k]).abs() < 1e-6 * (1.0 + fd.abs()),
                    "{spec:?} p{k}: {fd} vs {}",
                    grad[k]
                );
            }
        }
    }

    #[test]
    fn shapes_are_checked() {
        assert!(Embedding::new(&pooled(4, 1), 6, Activation::Relu).is_err());
        assert!(Embedding::new(&pooled(2, 4), 6, Activation::Relu).is_err());
        assert!(Embedding::new(&pooled(2, 0), 6, Activation::Relu).is_err());
        let e = Embedding::new(&EmbeddingSpec::None, 6, Activation::Relu).unwrap();
        assert_eq!((e.outputs(), e.n_params()), (6, 0));
    }
}
