//! A multilayer perceptron f(x): dense hidden layers with one activation, then one linear output
//! unit without bias (the model's intercept carries the constant). Forward and backward passes on
//! blocks of rows, with the matrix products done by `matrixmultiply` (the crate nalgebra already
//! uses for its own products: packed, cache-blocked, SIMD kernels chosen at run time).
//!
//! Parameter layout, hidden layer l of `inputs_l` inputs and `width_l` units: the weights as a
//! row-major `width_l x inputs_l` matrix, then the `width_l` biases; after the last hidden layer,
//! the output weights (one per unit of that layer).

use crate::engine::family::{sigmoid, softplus};
use crate::error::{NceError, Result};
use rand::Rng;
use rand_distr::StandardNormal;

/// The hidden units' activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Relu,
    Softplus,
    Tanh,
}

impl Activation {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "relu" => Some(Activation::Relu),
            "softplus" => Some(Activation::Softplus),
            "tanh" => Some(Activation::Tanh),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn apply(self, z: f64) -> f64 {
        match self {
            Activation::Relu => z.max(0.0),
            Activation::Softplus => softplus(z),
            Activation::Tanh => z.tanh(),
        }
    }

    /// Derivative at pre-activation `z` whose activation is `a`.
    #[inline]
    pub(crate) fn derivative(self, z: f64, a: f64) -> f64 {
        match self {
            Activation::Relu => {
                if z > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            Activation::Softplus => sigmoid(z),
            Activation::Tanh => 1.0 - a * a,
        }
    }
}

/// C = alpha A B + beta C for an `m x k` A and a `k x n` B given by row and column strides, and a
/// row-major `m x n` C. The strides are checked against the slices, so the unsafe call stays in
/// bounds.
pub(crate) fn gemm(
    (m, k, n): (usize, usize, usize),
    alpha: f64,
    (a, rsa, csa): (&[f64], usize, usize),
    (b, rsb, csb): (&[f64], usize, usize),
    beta: f64,
    c: &mut [f64],
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(c.len() >= m * n, "gemm: C too short");
    if k > 0 {
        assert!((m - 1) * rsa + (k - 1) * csa < a.len(), "gemm: A too short");
        assert!((k - 1) * rsb + (n - 1) * csb < b.len(), "gemm: B too short");
    }
    // Safety: every element the kernel reads or writes lies inside the slices (checked above);
    // the three slices do not overlap (C is the only &mut).
    unsafe {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// The network's shape; its parameters live in a separate vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    inputs: usize,
    hidden: Vec<usize>,
    activation: Activation,
    /// Start of each hidden layer's weights in the parameter vector, then of the output weights.
    offsets: Vec<usize>,
    n_params: usize,
}

/// Buffers of one block of rows: each hidden layer's pre-activations and activations, and the
/// back-propagated derivatives.
#[derive(Debug, Default)]
pub struct Workspace {
    pre: Vec<Vec<f64>>,
    act: Vec<Vec<f64>>,
    delta: Vec<f64>,
    delta_prev: Vec<f64>,
}

impl Network {
    /// `inputs` variables, hidden layers of `hidden` units (at least one layer, each of at least
    /// one unit).
    pub fn new(inputs: usize, hidden: Vec<usize>, activation: Activation) -> Result<Self> {
        if inputs == 0 {
            return Err(NceError::invalid("inputs", "the network needs at least one input"));
        }
        if hidden.is_empty() || hidden.iter().any(|&w| w == 0 || w > 100_000) {
            return Err(NceError::invalid(
                "hidden",
                "must give at least one hidden layer, each of 1 to 100000 units",
            ));
        }
        let mut offsets = Vec::with_capacity(hidden.len() + 1);
        let mut at = 0usize;
        let mut fan_in = inputs;
        for &w in &hidden {
            offsets.push(at);
            at = w
                .checked_mul(fan_in + 1)
                .and_then(|s| s.checked_add(at))
                .ok_or_else(|| NceError::invalid("hidden", "too many parameters"))?;
            fan_in = w;
        }
        offsets.push(at);
        let n_params = at + fan_in;
        if n_params > 50_000_000 {
            return Err(NceError::invalid(
                "hidden",
                format!("gives {n_params} parameters; at most 50 million are allowed"),
            ));
        }
        Ok(Network {
            inputs,
            hidden,
            activation,
            offsets,
            n_params,
        })
    }

    pub fn inputs(&self) -> usize {
        self.inputs
    }

    pub fn n_params(&self) -> usize {
        self.n_params
    }

    fn fan_in(&self, l: usize) -> usize {
        if l == 0 {
            self.inputs
        } else {
            self.hidden[l - 1]
        }
    }

    /// Which parameters are weights (true) rather than biases: weight decay shrinks the weights.
    pub fn weight_mask(&self) -> Vec<bool> {
        let mut mask = vec![true; self.n_params];
        for (l, &w) in self.hidden.iter().enumerate() {
            let b0 = self.offsets[l] + w * self.fan_in(l);
            mask[b0..b0 + w].iter_mut().for_each(|m| *m = false);
        }
        mask
    }

    /// Random starting parameters: He (ReLU) or Glorot (softplus, tanh) normal weights, zero
    /// biases, and output weights a tenth of that scale, so the start is close to f = 0.
    pub fn init<R: Rng>(&self, rng: &mut R) -> Vec<f64> {
        let mut p = vec![0.0; self.n_params];
        let gain = if self.activation == Activation::Relu { 2.0 } else { 1.0 };
        for (l, &w) in self.hidden.iter().enumerate() {
            let fan = self.fan_in(l);
            let sd = (gain / fan as f64).sqrt();
            for v in &mut p[self.offsets[l]..self.offsets[l] + w * fan] {
                *v = sd * rng.sample::<f64, _>(StandardNormal);
            }
        }
        let last = *self.hidden.last().unwrap_or(&1);
        let sd = 0.1 / (last as f64).sqrt();
        let o = self.offsets[self.hidden.len()];
        for v in &mut p[o..o + last] {
            *v = sd * rng.sample::<f64, _>(StandardNormal);
        }
        p
    }

    fn prepare(&self, ws: &mut Workspace, rows: usize) {
        ws.pre.resize_with(self.hidden.len(), Vec::new);
        ws.act.resize_with(self.hidden.len(), Vec::new);
        for (l, &w) in self.hidden.iter().enumerate() {
            ws.pre[l].resize(rows * w, 0.0);
            ws.act[l].resize(rows * w, 0.0);
        }
    }

    /// f at `rows` points, `x` row-major `rows x inputs`, into `out`; `ws` keeps what the
    /// backward pass needs.
    pub fn forward(&self, params: &[f64], x: &[f64], rows: usize, ws: &mut Workspace, out: &mut [f64]) {
        assert!(params.len() == self.n_params && x.len() >= rows * self.inputs && out.len() >= rows);
        self.prepare(ws, rows);
        for (l, &w) in self.hidden.iter().enumerate() {
            let fan = self.fan_in(l);
            let o = self.offsets[l];
            let (weights, bias) = (&params[o..o + w * fan], &params[o + w * fan..o + w * fan + w]);
            let (done, rest) = ws.act.split_at_mut(l);
            let input: &[f64] = if l == 0 { x } else { &done[l - 1] };
            let pre = &mut ws.pre[l];
            for r in 0..rows {
                pre[r * w..(r + 1) * w].copy_from_slice(bias);
            }
            // pre (rows x w) += input (rows x fan) * weights' (fan x w)
            gemm((rows, fan, w), 1.0, (input, fan, 1), (weights, 1, fan), 1.0, pre);
            let act = &mut rest[0];
            for (a, &z) in act.iter_mut().zip(pre.iter()) {
                *a = self.activation.apply(z);
            }
        }
        let last = self.hidden.len() - 1;
        let w = self.hidden[last];
        let ow = &params[self.offsets[last + 1]..];
        let act = &ws.act[last];
        for r in 0..rows {
            out[r] = act[r * w..(r + 1) * w].iter().zip(ow).map(|(a, b)| a * b).sum();
        }
    }

    /// Adds to `grad` the gradient of sum_r g[r] f(x_r) at the block of the last `forward` call.
    pub fn backward(&self, params: &[f64], x: &[f64], rows: usize, ws: &mut Workspace, g: &[f64], grad: &mut [f64]) {
        assert!(grad.len() == self.n_params && g.len() >= rows);
        let nl = self.hidden.len();
        let w_last = self.hidden[nl - 1];
        let ow0 = self.offsets[nl];
        // Output weights: sum_r g_r a_r; and the last layer's delta = g w_out * act'.
        {
            let act = &ws.act[nl - 1];
            let gw = &mut grad[ow0..ow0 + w_last];
            for r in 0..rows {
                let a = &act[r * w_last..(r + 1) * w_last];
                for (gj, aj) in gw.iter_mut().zip(a) {
                    *gj += g[r] * aj;
                }
            }
        }
        ws.delta.resize(rows * w_last, 0.0);
        {
            let ow = &params[ow0..ow0 + w_last];
            let (pre, act) = (&ws.pre[nl - 1], &ws.act[nl - 1]);
            for r in 0..rows {
                for j in 0..w_last {
                    let i = r * w_last + j;
                    ws.delta[i] = g[r] * ow[j] * self.activation.derivative(pre[i], act[i]);
                }
            }
        }
        for l in (0..nl).rev() {
            let w = self.hidden[l];
            let fan = self.fan_in(l);
            let o = self.offsets[l];
            let input: &[f64] = if l == 0 { x } else { &ws.act[l - 1] };
            // dW (w x fan) += delta' (w x rows) * input (rows x fan)
            {
                let (gw, gb) = grad[o..o + w * fan + w].split_at_mut(w * fan);
                gemm((w, rows, fan), 1.0, (&ws.delta, 1, w), (input, fan, 1), 1.0, gw);
                for r in 0..rows {
                    for (b, d) in gb.iter_mut().zip(&ws.delta[r * w..(r + 1) * w]) {
                        *b += d;
                    }
                }
            }
            if l == 0 {
                break;
            }
            // delta_prev (rows x fan) = delta (rows x w) * W (w x fan), times act'.
            ws.delta_prev.resize(rows * fan, 0.0);
            let weights = &params[o..o + w * fan];
            gemm(
                (rows, w, fan),
                1.0,
                (&ws.delta, w, 1),
                (weights, fan, 1),
                0.0,
                &mut ws.delta_prev,
            );
            let (pre, act) = (&ws.pre[l - 1], &ws.act[l - 1]);
            for (i, d) in ws.delta_prev.iter_mut().enumerate() {
                *d *= self.activation.derivative(pre[i], act[i]);
            }
            std::mem::swap(&mut ws.delta, &mut ws.delta_prev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream_rng;

    fn f_at(net: &Network, p: &[f64], x: &[f64], rows: usize) -> Vec<f64> {
        let mut ws = Workspace::default();
        let mut out = vec![0.0; rows];
        net.forward(p, x, rows, &mut ws, &mut out);
        out
    }

    #[test]
    fn forward_matches_a_hand_computed_network() {
        // 2 inputs, one hidden layer of 2 tanh units.
        let net = Network::new(2, vec![2], Activation::Tanh).unwrap();
        assert_eq!(net.n_params(), 2 * 3 + 2);
        let p = [0.5, -1.0, 2.0, 0.3, 0.1, -0.2, 1.5, -0.7];
        let x = [0.4, 1.2];
        let h1 = (0.5 * 0.4 - 1.0 * 1.2 + 0.1f64).tanh();
        let h2 = (2.0 * 0.4 + 0.3 * 1.2 - 0.2f64).tanh();
        let want = 1.5 * h1 - 0.7 * h2;
        assert!((f_at(&net, &p, &x, 1)[0] - want).abs() < 1e-14);
    }

    #[test]
    fn gradient_matches_finite_differences_for_each_activation() {
        for act in [Activation::Relu, Activation::Softplus, Activation::Tanh] {
            let net = Network::new(3, vec![5, 4], act).unwrap();
            let mut rng = stream_rng(11, 0);
            let mut p = net.init(&mut rng);
            // Output weights at full scale, so every parameter matters.
            let n = p.len();
            for v in &mut p[n - 4..] {
                *v *= 10.0;
            }
            let rows = 7;
            let x: Vec<f64> = (0..rows * 3).map(|i| ((i * 37 % 11) as f64 - 5.0) / 3.0).collect();
            let g: Vec<f64> = (0..rows).map(|r| 0.3 * r as f64 - 1.0).collect();
            let obj = |p: &[f64]| -> f64 { f_at(&net, p, &x, rows).iter().zip(&g).map(|(f, g)| f * g).sum() };
            let mut ws = Workspace::default();
            let mut out = vec![0.0; rows];
            net.forward(&p, &x, rows, &mut ws, &mut out);
            let mut grad = vec![0.0; n];
            net.backward(&p, &x, rows, &mut ws, &g, &mut grad);
            for k in 0..n {
                let h = 1e-6;
                let (mut a, mut b) = (p.clone(), p.clone());
                a[k] += h;
                b[k] -= h;
                let fd = (obj(&a) - obj(&b)) / (2.0 * h);
                assert!(
                    (fd - grad[k]).abs() < 1e-6 * (1.0 + fd.abs()),
                    "{act:?} parameter {k}: {fd} vs {}",
                    grad[k]
                );
            }
        }
    }

    #[test]
    fn shapes_are_checked() {
        assert!(Network::new(0, vec![3], Activation::Relu).is_err());
        assert!(Network::new(2, vec![], Activation::Relu).is_err());
        assert!(Network::new(2, vec![4, 0], Activation::Relu).is_err());
        assert!(Network::new(10_000, vec![100_000], Activation::Relu).is_err());
        let net = Network::new(10, vec![64, 64], Activation::Relu).unwrap();
        assert_eq!(net.n_params(), 64 * 11 + 64 * 65 + 64);
        let mask = net.weight_mask();
        assert_eq!(mask.iter().filter(|m| !**m).count(), 128);
    }
}
