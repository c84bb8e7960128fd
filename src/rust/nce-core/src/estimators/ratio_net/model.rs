//! The ratio network: an embedding of the raw data row x, and a head, an MLP on
//! [theta (d), hand-made features z (p), embedding (m)] with one logit out (with bias), the
//! estimate of log r(theta, x) = log p(x | theta) / p(x). Parameters: the embedding's, then the
//! head's. `RatioNet` (shape and parameters) evaluates it; the forward and backward passes over a
//! block of (simulation, theta) pairs serve the training.

use super::embedding::{EmbedWs, Embedding, EmbeddingSpec};
use super::layers::{Stack, StackWs};
use crate::alloc::{checked_len, try_filled};
use crate::error::{NceError, Result};
use crate::estimators::mlp::Activation;
use rand::Rng;
use rayon::prelude::*;

/// Rows per block of an evaluation (fixed, so results do not depend on the thread count).
const EVAL_ROWS: usize = 256;

/// The network's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Architecture {
    d: usize,
    p: usize,
    embedding: Embedding,
    head: Stack,
}

/// The rows of simulations: theta (n x d), z (n x p), x (n x q), each row-major.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a> {
    pub theta: &'a [f64],
    pub z: &'a [f64],
    pub x: &'a [f64],
}

/// One block's forward pass over pairs, kept for its backward pass.
#[derive(Debug, Default)]
pub(crate) struct PairPass {
    rows: usize,
    xb: Vec<f64>,
    feat: Vec<f64>,
    hin: Vec<f64>,
    dhin: Vec<f64>,
    dfeat: Vec<f64>,
    /// Row-major rows x (pairs per row).
    pub(crate) logits: Vec<f64>,
    ews: EmbedWs,
    hws: StackWs,
}

impl Architecture {
    /// theta of `d` values, `p` extra features, raw rows of `q` values; the head's hidden widths.
    pub fn new(
        d: usize,
        p: usize,
        q: usize,
        embedding: &EmbeddingSpec,
        head_hidden: &[usize],
        activation: Activation,
    ) -> Result<Self> {
        if d == 0 {
            return Err(NceError::invalid("theta", "needs at least one column"));
        }
        if head_hidden.is_empty() {
            return Err(NceError::invalid("hidden", "the head needs at least one hidden layer"));
        }
        let embedding = Embedding::new(embedding, q, activation)?;
        let head = Stack::new(d + p + embedding.outputs(), head_hidden, 1, activation, "hidden")?;
        Ok(Architecture { d, p, embedding, head })
    }

    pub fn d(&self) -> usize {
        self.d
    }
    pub fn p(&self) -> usize {
        self.p
    }
    pub fn q(&self) -> usize {
        self.embedding.inputs()
    }
    /// Embedding features per row.
    pub fn features(&self) -> usize {
        self.embedding.outputs()
    }
    pub fn n_params(&self) -> usize {
        self.embedding.n_params() + self.head.n_params()
    }

    /// Multiply-adds of one forward pass of a raw row with `pairs` thetas.
    pub fn macs(&self, pairs: usize) -> usize {
        self.embedding.macs_per_row() + pairs * self.head.macs_per_row()
    }

    pub fn weight_mask(&self) -> Vec<bool> {
        let mut m = self.embedding.weight_mask();
        m.extend(self.head.weight_mask());
        m
    }

    /// Random starting parameters; the head's output weights at a tenth of the usual scale so
    /// the start is close to log r = 0.
    pub fn init<R: Rng>(&self, rng: &mut R) -> Vec<f64> {
        let mut p = vec![0.0; self.n_params()];
        let ne = self.embedding.n_params();
        self.embedding.init(rng, &mut p[..ne]);
        self.head.init(rng, 0.1, &mut p[ne..]);
        p
    }

    /// Checks the rows' shapes and values; returns their number.
    pub fn check_rows(&self, rows: &Rows) -> Result<usize> {
        let n = rows.theta.len() / self.d;
        if n == 0 || rows.theta.len() != checked_len(&[n, self.d], "theta")? {
            return Err(NceError::invalid(
                "theta",
                format!("must have {} column(s) and a row", self.d),
            ));
        }
        if rows.z.len() != checked_len(&[n, self.p], "z")? {
            return Err(NceError::invalid(
                "z",
                format!("must have {n} rows of {} value(s)", self.p),
            ));
        }
        if rows.x.len() != checked_len(&[n, self.q()], "x")? {
            return Err(NceError::invalid(
                "x",
                format!("must have {n} rows of {} value(s)", self.q()),
            ));
        }
        if !rows.theta.iter().chain(rows.z).chain(rows.x).all(|v| v.is_finite()) {
            return Err(NceError::invalid("x", "theta, z and x must be finite"));
        }
        Ok(n)
    }

    /// Logits of the pairs of a block: raw rows `idx` of `data`, each with `c` thetas, given in
    /// `thetas` (row-major `idx.len() x c` row indices of `data.theta`). Every raw row is embedded
    /// once; the pass is kept in `pass` for `backward_pairs`.
    pub(crate) fn forward_pairs(
        &self,
        params: &[f64],
        data: &Rows,
        idx: &[usize],
        thetas: &[usize],
        c: usize,
        pass: &mut PairPass,
    ) {
        let (d, p, q, m) = (self.d, self.p, self.q(), self.features());
        let rows = idx.len();
        let ne = self.embedding.n_params();
        pass.rows = rows;
        pass.xb.clear();
        for &i in idx {
            pass.xb.extend_from_slice(&data.x[i * q..(i + 1) * q]);
        }
        pass.feat.resize(rows * m, 0.0);
        self.embedding
            .forward(&params[..ne], &pass.xb, rows, &mut pass.ews, &mut pass.feat);
        let hi = d + p + m;
        pass.hin.clear();
        for (r, &i) in idx.iter().enumerate() {
            for &j in &thetas[r * c..(r + 1) * c] {
                pass.hin.extend_from_slice(&data.theta[j * d..(j + 1) * d]);
                pass.hin.extend_from_slice(&data.z[i * p..(i + 1) * p]);
                pass.hin.extend_from_slice(&pass.feat[r * m..(r + 1) * m]);
            }
        }
        debug_assert_eq!(pass.hin.len(), rows * c * hi);
        pass.logits.resize(rows * c, 0.0);
        self.head
            .forward(&params[ne..], &pass.hin, rows * c, &mut pass.hws, &mut pass.logits);
    }

    /// Adds to `grad` the gradient of sum dlogits . logits at the pass of `forward_pairs`: the
    /// head's, then, through the head's input gradients summed over each row's pairs, the
    /// embedding's.
    pub(crate) fn backward_pairs(
        &self,
        params: &[f64],
        c: usize,
        pass: &mut PairPass,
        dlogits: &[f64],
        grad: &mut [f64],
    ) {
        let (d, p, m) = (self.d, self.p, self.features());
        let hi = d + p + m;
        let rows = pass.rows;
        let ne = self.embedding.n_params();
        let (ge, gh) = grad.split_at_mut(ne);
        let want_dx = ne > 0;
        if want_dx {
            pass.dhin.resize(rows * c * hi, 0.0);
        }
        self.head.backward(
            &params[ne..],
            &pass.hin,
            &mut pass.hws,
            dlogits,
            gh,
            if want_dx { Some(&mut pass.dhin) } else { None },
        );
        if !want_dx {
            return;
        }
        pass.dfeat.clear();
        pass.dfeat.resize(rows * m, 0.0);
        for r in 0..rows {
            let df = &mut pass.dfeat[r * m..(r + 1) * m];
            for k in 0..c {
                let src = &pass.dhin[(r * c + k) * hi + d + p..(r * c + k + 1) * hi];
                df.iter_mut().zip(src).for_each(|(a, b)| *a += b);
            }
        }
        self.embedding
            .backward(&params[..ne], &pass.xb, rows, &mut pass.ews, &pass.dfeat, ge);
    }
}

/// A trained network: its shape and parameters.
#[derive(Debug, Clone)]
pub struct RatioNet {
    pub arch: Architecture,
    pub params: Vec<f64>,
}

impl RatioNet {
    pub fn new(arch: Architecture, params: Vec<f64>) -> Result<Self> {
        if params.len() != arch.n_params() || params.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                "params",
                format!("needs {} finite values for this network", arch.n_params()),
            ));
        }
        Ok(RatioNet { arch, params })
    }

    /// The embedding features of the rows of `x` (row-major n x q) as row-major n x m, in
    /// parallel blocks.
    pub fn embed(&self, x: &[f64]) -> Result<Vec<f64>> {
        let (q, m) = (self.arch.q(), self.arch.features());
        if x.len() % q != 0 || x.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid("x", format!("must have {q} finite values per row")));
        }
        let n = x.len() / q;
        let mut out = try_filled(checked_len(&[n, m], "the embedding")?, 0.0, "the embedding")?;
        let ne = self.arch.embedding.n_params();
        out.par_chunks_mut(EVAL_ROWS * m)
            .zip(x.par_chunks(EVAL_ROWS * q))
            .for_each(|(o, xb)| {
                let mut ws = EmbedWs::default();
                self.arch
                    .embedding
                    .forward(&self.params[..ne], xb, xb.len() / q, &mut ws, o);
            });
        Ok(out)
    }

    /// log r at paired rows: theta (n x d), z (n x p, or one row used for every theta) and
    /// embedding features (n x m, or one row), each row-major.
    pub fn log_ratio(&self, theta: &[f64], z: &[f64], features: &[f64]) -> Result<Vec<f64>> {
        let (d, p, m) = (self.arch.d, self.arch.p, self.arch.features());
        if theta.len() % d != 0 || theta.is_empty() {
            return Err(NceError::invalid("theta", format!("must have {d} values per row")));
        }
        let n = theta.len() / d;
        let one = |v: &[f64], w: usize, arg: &str| -> Result<bool> {
            if v.len() == checked_len(&[n, w], arg)? {
                Ok(false)
            } else if v.len() == w {
                Ok(true)
            } else {
                Err(NceError::invalid(
                    arg,
                    format!("must have one row or {n} rows of {w} value(s)"),
                ))
            }
        };
        let (z1, f1) = (one(z, p, "z")?, one(features, m, "x")?);
        if !theta.iter().chain(z).chain(features).all(|v| v.is_finite()) {
            return Err(NceError::invalid("theta", "theta, z and x must be finite"));
        }
        let hi = d + p + m;
        let ne = self.arch.embedding.n_params();
        let mut out = try_filled(n, 0.0, "the log ratios")?;
        out.par_chunks_mut(EVAL_ROWS).enumerate().for_each(|(b, o)| {
            let r0 = b * EVAL_ROWS;
            let mut hin = Vec::with_capacity(o.len() * hi);
            for i in r0..r0 + o.len() {
                let (iz, ifeat) = (if z1 { 0 } else { i }, if f1 { 0 } else { i });
                hin.extend_from_slice(&theta[i * d..(i + 1) * d]);
                hin.extend_from_slice(&z[iz * p..(iz + 1) * p]);
                hin.extend_from_slice(&features[ifeat * m..(ifeat + 1) * m]);
            }
            let mut ws = StackWs::default();
            self.arch.head.forward(&self.params[ne..], &hin, o.len(), &mut ws, o);
        });
        Ok(out)
    }

    /// log r of ONE observed x (q values) and its z (p values) at every theta row (n x d): the
    /// embedding computed once, the head at every theta (the posterior sampler's call).
    pub fn log_ratio_at(&self, theta: &[f64], z: &[f64], x: &[f64]) -> Result<Vec<f64>> {
        if x.len() != self.arch.q() {
            return Err(NceError::invalid(
                "x",
                format!("must be one row of {} values", self.arch.q()),
            ));
        }
        let feat = self.embed(x)?;
        self.log_ratio(theta, z, &feat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream_rng;

    fn arch(spec: EmbeddingSpec) -> Architecture {
        Architecture::new(2, 1, 6, &spec, &[5, 4], Activation::Tanh).unwrap()
    }

    fn specs() -> Vec<EmbeddingSpec> {
        vec![
            EmbeddingSpec::None,
            EmbeddingSpec::Dense {
                hidden: vec![4],
                out: 3,
            },
            EmbeddingSpec::Pooled {
                item: 2,
                window: 2,
                hidden: vec![3],
                out: 2,
            },
        ]
    }

    fn problem(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut rng = stream_rng(5, 0);
        let mut g = |k: usize| -> Vec<f64> { (0..k).map(|_| rng.gen::<f64>() * 2.0 - 1.0).collect() };
        (g(n * 2), g(n), g(n * 6))
    }

    #[test]
    fn pair_gradients_match_finite_differences() {
        for spec in specs() {
            let a = arch(spec.clone());
            let mut params = a.init(&mut stream_rng(1, 0));
            let np = params.len();
            // Full-scale head outputs so every parameter matters.
            let nh = a.head.n_params();
            for v in &mut params[np - nh..] {
                *v *= 3.0;
            }
            let (theta, z, x) = problem(5);
            let data = Rows {
                theta: &theta,
                z: &z,
                x: &x,
            };
            let idx = [3, 0, 4];
            let c = 3;
            let thetas = [3, 1, 2, 0, 4, 4, 4, 2, 1];
            let g: Vec<f64> = (0..9).map(|i| 0.4 * i as f64 - 1.5).collect();
            let obj = |p: &[f64]| -> f64 {
                let mut pass = PairPass::default();
                a.forward_pairs(p, &data, &idx, &thetas, c, &mut pass);
                pass.logits.iter().zip(&g).map(|(l, g)| l * g).sum()
            };
            let mut pass = PairPass::default();
            a.forward_pairs(&params, &data, &idx, &thetas, c, &mut pass);
            let mut grad = vec![0.0; np];
            a.backward_pairs(&params, c, &mut pass, &g, &mut grad);
            for k in 0..np {
                let h = 1e-6;
                let (mut u, mut v) = (params.clone(), params.clone());
                u[k] += h;
                v[k] -= h;
                let fd = (obj(&u) - obj(&v)) / (2.0 * h);
                assert!(
                    (fd - grad[k]).abs() < 1e-6 * (1.0 + fd.abs()),
                    "{spec:?} p{k}: {fd} vs {}",
                    grad[k]
                );
            }
        }
    }

    #[test]
    fn evaluation_agrees_with_the_training_pass() {
        for spec in specs() {
            let a = arch(spec);
            let params = a.init(&mut stream_rng(2, 0));
            let (theta, z, x) = problem(300);
            let data = Rows {
                theta: &theta,
                z: &z,
                x: &x,
            };
            let net = RatioNet::new(a.clone(), params.clone()).unwrap();
            let feat = net.embed(&x).unwrap();
            let lr = net.log_ratio(&theta, &z, &feat).unwrap();
            let idx: Vec<usize> = (0..300).collect();
            let mut pass = PairPass::default();
            a.forward_pairs(&params, &data, &idx, &idx, 1, &mut pass);
            for (u, v) in lr.iter().zip(&pass.logits) {
                assert!((u - v).abs() < 1e-12);
            }
            // One x against many thetas: the paired call with that row repeated.
            let one = net.log_ratio_at(&theta, &z[7..8], &x[7 * 6..8 * 6]).unwrap();
            let zr: Vec<f64> = vec![z[7]; 300];
            let xr: Vec<f64> = (0..300).flat_map(|_| x[7 * 6..8 * 6].to_vec()).collect();
            let paired = net.log_ratio(&theta, &zr, &net.embed(&xr).unwrap()).unwrap();
            assert!(one.iter().zip(&paired).all(|(u, v)| (u - v).abs() < 1e-12));
            assert!(net.log_ratio(&theta, &z[..2], &feat).is_err());
        }
    }
}
