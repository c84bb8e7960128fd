//! A dense stack with several output units: hidden layers with one activation, then a linear
//! output layer with biases. Forward and backward passes on blocks of rows, the backward pass
//! optionally giving the gradient with respect to the inputs (so a head can back-propagate into
//! the embedding that made part of its inputs).
//!
//! Parameter layout, layer l (the hidden layers, then the output layer) of `fan_l` inputs and
//! `width_l` units: the weights as a row-major `width_l x fan_l` matrix, then the `width_l` biases.

use crate::error::{NceError, Result};
use crate::estimators::mlp::network::gemm;
use crate::estimators::mlp::Activation;
use rand::Rng;
use rand_distr::StandardNormal;

/// Most parameters a stack may have (as `mlp::Network`): beyond this a training is hopeless.
const MAX_PARAMS: usize = 50_000_000;

/// The shape of a dense stack; its parameters live in a separate vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    inputs: usize,
    /// Hidden widths, then the output width.
    widths: Vec<usize>,
    activation: Activation,
    /// Start of each layer's weights in the parameter vector.
    offsets: Vec<usize>,
    n_params: usize,
}

/// Buffers of one block of rows: the hidden layers' pre-activations and activations, and the
/// back-propagated derivatives.
#[derive(Debug, Default, Clone)]
pub struct StackWs {
    pre: Vec<Vec<f64>>,
    act: Vec<Vec<f64>>,
    delta: Vec<f64>,
    delta_prev: Vec<f64>,
}

impl Stack {
    /// `inputs` values in, hidden layers of `hidden` units (possibly none), `out` linear outputs.
    /// `arg` names the setting in errors.
    pub fn new(inputs: usize, hidden: &[usize], out: usize, activation: Activation, arg: &str) -> Result<Self> {
        if inputs == 0 || out == 0 {
            return Err(NceError::invalid(
                arg,
                "a layer stack needs at least one input and one output",
            ));
        }
        if hidden.iter().any(|&w| w == 0 || w > 100_000) || out > 100_000 {
            return Err(NceError::invalid(arg, "every layer must have 1 to 100000 units"));
        }
        let mut widths = hidden.to_vec();
        widths.push(out);
        let mut offsets = Vec::with_capacity(widths.len());
        let mut at = 0usize;
        let mut fan = inputs;
        for &w in &widths {
            offsets.push(at);
            at = w
                .checked_mul(fan + 1)
                .and_then(|s| s.checked_add(at))
                .ok_or_else(|| NceError::invalid(arg, "too many parameters"))?;
            fan = w;
        }
        if at > MAX_PARAMS {
            return Err(NceError::invalid(
                arg,
                format!("gives {at} parameters; at most 50 million are allowed"),
            ));
        }
        Ok(Stack {
            inputs,
            widths,
            activation,
            offsets,
            n_params: at,
        })
    }

    pub fn inputs(&self) -> usize {
        self.inputs
    }

    pub fn outputs(&self) -> usize {
        *self.widths.last().expect("an output layer")
    }

    pub fn n_params(&self) -> usize {
        self.n_params
    }

    /// Multiply-adds per row of one forward pass (the weights' count).
    pub fn macs_per_row(&self) -> usize {
        let mut fan = self.inputs;
        let mut m = 0;
        for &w in &self.widths {
            m += w * fan;
            fan = w;
        }
        m
    }

    fn fan_in(&self, l: usize) -> usize {
        if l == 0 {
            self.inputs
        } else {
            self.widths[l - 1]
        }
    }

    fn hidden_layers(&self) -> usize {
        self.widths.len() - 1
    }

    /// Which parameters are weights (true) rather than biases: weight decay shrinks the weights.
    pub fn weight_mask(&self) -> Vec<bool> {
        let mut mask = vec![true; self.n_params];
        for (l, &w) in self.widths.iter().enumerate() {
            let b0 = self.offsets[l] + w * self.fan_in(l);
            mask[b0..b0 + w].iter_mut().for_each(|m| *m = false);
        }
        mask
    }

    /// Random starting parameters into `p` (length `n_params`): He (ReLU) or Glorot normal weights
    /// for the hidden layers, zero biases, and output weights of sd `out_scale / sqrt(fan)`.
    pub fn init<R: Rng>(&self, rng: &mut R, out_scale: f64, p: &mut [f64]) {
        assert_eq!(p.len(), self.n_params);
        p.iter_mut().for_each(|v| *v = 0.0);
        let gain = if self.activation == Activation::Relu { 2.0 } else { 1.0 };
        let nl = self.widths.len();
        for (l, &w) in self.widths.iter().enumerate() {
            let fan = self.fan_in(l);
            let sd = if l + 1 == nl {
                out_scale / (fan as f64).sqrt()
            } else {
                (gain / fan as f64).sqrt()
            };
            for v in &mut p[self.offsets[l]..self.offsets[l] + w * fan] {
                *v = sd * rng.sample::<f64, _>(StandardNormal);
            }
        }
    }

    /// The outputs at `rows` rows of `x` (row-major `rows x inputs`) into `out` (row-major
    /// `rows x outputs`); `ws` keeps what the backward pass needs.
    pub fn forward(&self, params: &[f64], x: &[f64], rows: usize, ws: &mut StackWs, out: &mut [f64]) {
        assert!(params.len() == self.n_params && x.len() >= rows * self.inputs && out.len() >= rows * self.outputs());
        let nh = self.hidden_layers();
        ws.pre.resize_with(nh, Vec::new);
        ws.act.resize_with(nh, Vec::new);
        for l in 0..=nh {
            let (w, fan, o) = (self.widths[l], self.fan_in(l), self.offsets[l]);
            let (weights, bias) = (&params[o..o + w * fan], &params[o + w * fan..o + w * fan + w]);
            let (done, rest) = ws.act.split_at_mut(l.min(nh));
            let input: &[f64] = if l == 0 { x } else { &done[l - 1] };
            let target: &mut [f64] = if l == nh {
                &mut out[..rows * w]
            } else {
                ws.pre[l].resize(rows * w, 0.0);
                &mut ws.pre[l]
            };
            for r in 0..rows {
                target[r * w..(r + 1) * w].copy_from_slice(bias);
            }
            // target (rows x w) += input (rows x fan) * weights' (fan x w)
            gemm((rows, fan, w), 1.0, (input, fan, 1), (weights, 1, fan), 1.0, target);
            if l < nh {
                let act = &mut rest[0];
                act.resize(rows * w, 0.0);
                for (a, &z) in act.iter_mut().zip(ws.pre[l].iter()) {
                    *a = self.activation.apply(z);
                }
            }
        }
    }

    /// Adds to `grad` the gradient of sum_{r,j} dout[r, j] out[r, j] at the block of the last
    /// `forward` call (its rows: those of `dout`, row-major `rows x outputs`); with `dx` (row-major
    /// `rows x inputs`), writes its gradient with respect to the inputs there.
    pub fn backward(
        &self,
        params: &[f64],
        x: &[f64],
        ws: &mut StackWs,
        dout: &[f64],
        grad: &mut [f64],
        dx: Option<&mut [f64]>,
    ) {
        let rows = dout.len() / self.outputs();
        assert!(grad.len() == self.n_params && dout.len() == rows * self.outputs());
        let nh = self.hidden_layers();
        ws.delta.clear();
        ws.delta.extend_from_slice(&dout[..rows * self.outputs()]);
        let mut dx = dx;
        for l in (0..=nh).rev() {
            let (w, fan, o) = (self.widths[l], self.fan_in(l), self.offsets[l]);
            let input: &[f64] = if l == 0 { x } else { &ws.act[l - 1] };
            {
                // dW (w x fan) += delta' (w x rows) * input (rows x fan)
                let (gw, gb) = grad[o..o + w * fan + w].split_at_mut(w * fan);
                gemm((w, rows, fan), 1.0, (&ws.delta, 1, w), (input, fan, 1), 1.0, gw);
                for r in 0..rows {
                    for (b, d) in gb.iter_mut().zip(&ws.delta[r * w..(r + 1) * w]) {
                        *b += d;
                    }
                }
            }
            let weights = &params[o..o + w * fan];
            if l == 0 {
                if let Some(dx) = dx.take() {
                    // dx (rows x fan) = delta (rows x w) * W (w x fan)
                    gemm(
                        (rows, w, fan),
                        1.0,
                        (&ws.delta, w, 1),
                        (weights, fan, 1),
                        0.0,
                        &mut dx[..rows * fan],
                    );
                }
                break;
            }
            ws.delta_prev.resize(rows * fan, 0.0);
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

    fn outputs(s: &Stack, p: &[f64], x: &[f64], rows: usize) -> Vec<f64> {
        let mut ws = StackWs::default();
        let mut out = vec![0.0; rows * s.outputs()];
        s.forward(p, x, rows, &mut ws, &mut out);
        out
    }

    #[test]
    fn a_linear_stack_is_its_affine_map() {
        let s = Stack::new(2, &[], 2, Activation::Relu, "hidden").unwrap();
        assert_eq!(s.n_params(), 6);
        // W = [[1, 2], [3, 4]], b = [0.5, -1]
        let p = [1.0, 2.0, 3.0, 4.0, 0.5, -1.0];
        let out = outputs(&s, &p, &[1.0, -1.0, 2.0, 0.0], 2);
        assert_eq!(out, vec![-0.5, -2.0, 2.5, 5.0]);
    }

    #[test]
    fn gradients_match_finite_differences_for_parameters_and_inputs() {
        for act in [Activation::Relu, Activation::Softplus, Activation::Tanh] {
            for hidden in [vec![], vec![5], vec![4, 3]] {
                let s = Stack::new(3, &hidden, 2, act, "hidden").unwrap();
                let mut p = vec![0.0; s.n_params()];
                s.init(&mut stream_rng(4, 0), 1.0, &mut p);
                // Non-zero biases, so ReLU kinks are not at the test points.
                for (k, v) in p.iter_mut().enumerate() {
                    *v += 0.05 * ((k * 7 % 5) as f64 - 2.0);
                }
                let rows = 6;
                let x: Vec<f64> = (0..rows * 3).map(|i| ((i * 37 % 11) as f64 - 5.0) / 3.0).collect();
                let g: Vec<f64> = (0..rows * 2).map(|r| 0.3 * r as f64 - 1.0).collect();
                let obj =
                    |p: &[f64], x: &[f64]| -> f64 { outputs(&s, p, x, rows).iter().zip(&g).map(|(f, g)| f * g).sum() };
                let mut ws = StackWs::default();
                let mut out = vec![0.0; rows * 2];
                s.forward(&p, &x, rows, &mut ws, &mut out);
                let mut grad = vec![0.0; s.n_params()];
                let mut dx = vec![0.0; rows * 3];
                s.backward(&p, &x, &mut ws, &g, &mut grad, Some(&mut dx));
                let h = 1e-6;
                for k in 0..p.len() {
                    let (mut a, mut b) = (p.clone(), p.clone());
                    a[k] += h;
                    b[k] -= h;
                    let fd = (obj(&a, &x) - obj(&b, &x)) / (2.0 * h);
                    assert!(
                        (fd - grad[k]).abs() < 1e-6 * (1.0 + fd.abs()),
                        "{act:?} {hidden:?} p{k}: {fd} vs {}",
                        grad[k]
                    );
                }
                for k in 0..x.len() {
                    let (mut a, mut b) = (x.clone(), x.clone());
                    a[k] += h;
                    b[k] -= h;
                    let fd = (obj(&p, &a) - obj(&p, &b)) / (2.0 * h);
                    assert!(
                        (fd - dx[k]).abs() < 1e-6 * (1.0 + fd.abs()),
                        "{act:?} {hidden:?} x{k}: {fd} vs {}",
                        dx[k]
                    );
                }
            }
        }
    }

    #[test]
    fn shapes_are_checked() {
        assert!(Stack::new(0, &[3], 1, Activation::Relu, "h").is_err());
        assert!(Stack::new(2, &[0], 1, Activation::Relu, "h").is_err());
        assert!(Stack::new(2, &[3], 0, Activation::Relu, "h").is_err());
        let s = Stack::new(10, &[64, 64], 1, Activation::Relu, "h").unwrap();
        assert_eq!(s.n_params(), 64 * 11 + 64 * 65 + 65);
        assert_eq!(s.weight_mask().iter().filter(|m| !**m).count(), 129);
        assert_eq!(s.macs_per_row(), 640 + 4096 + 64);
    }
}
