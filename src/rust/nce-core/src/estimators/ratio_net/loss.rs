//! The classification losses of neural ratio estimation on a minibatch of B simulations. Each
//! simulation i has K + 1 logits: column 0 at its own theta (the joint pair), columns 1..=K at
//! thetas of other simulations of the batch (marginal pairs). Every loss is minimised by the
//! logit log r(theta, x) = log p(x | theta) / p(x), with no offset.

use crate::engine::family::{sigmoid, softplus};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Balanced binary cross-entropy: mean_i softplus(-l_i0) + (1/K) sum_k mean_i softplus(l_ik).
    Nre,
    /// Contrastive NRE (NRE-C; Miller, Weniger & Forre 2022, "Contrastive neural ratio estimation",
    /// NeurIPS): 1-out-of-(K + 1) classification of sets of K thetas; `gamma` = the odds of a
    /// joint set against the all-marginal one (sbi's default 1, with K = num_classes = 5).
    Nrec { gamma: f64 },
    /// Balanced NRE (Delaunoy et al. 2022, "Towards reliable simulation-based inference with
    /// balanced neural ratio estimation"): Nre + lambda (mean_joint sigma(l) + mean_marginal
    /// sigma(l) - 1)^2, the balance condition of a calibrated classifier (paper and sbi: 100).
    Bnre { lambda: f64 },
}

impl Loss {
    pub fn from_name(name: &str, gamma: f64, lambda: f64) -> Option<Self> {
        match name {
            "nre" => Some(Loss::Nre),
            "nrec" => Some(Loss::Nrec { gamma }),
            "bnre" => Some(Loss::Bnre { lambda }),
            _ => None,
        }
    }

    /// Whether the parameters are admissible (gamma > 0, lambda >= 0, finite).
    pub fn is_valid(&self) -> bool {
        match *self {
            Loss::Nre => true,
            Loss::Nrec { gamma } => gamma > 0.0 && gamma.is_finite(),
            Loss::Bnre { lambda } => lambda >= 0.0 && lambda.is_finite(),
        }
    }
}

/// log(sum exp(v)) without overflow (v not empty).
fn log_sum_exp(v: &[f64]) -> f64 {
    let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + v.iter().map(|a| (a - m).exp()).sum::<f64>().ln()
}

/// softplus(-l_0) + (1/K) sum_k softplus(l_k) of one simulation; adds its derivative times `w`.
fn nre_row(l: &[f64], k: usize, w: f64, g: Option<&mut [f64]>) -> f64 {
    let inv_k = 1.0 / k as f64;
    let loss = softplus(-l[0]) + inv_k * l[1..].iter().map(|&v| softplus(v)).sum::<f64>();
    if let Some(g) = g {
        g[0] += w * (sigmoid(l[0]) - 1.0);
        for j in 1..=k {
            g[j] += w * inv_k * sigmoid(l[j]);
        }
    }
    loss
}

/// NRE-C of one simulation, as sbi's `NRE_C._loss` (sbi/inference/trainers/nre/nre_c.py; checked
/// against it): the joint set is (own theta, the first K - 1 others), the marginal set the K others;
/// with r = e^l, the class probabilities are K / (K + gamma sum r) for "all marginal" and
/// gamma r_k / (K + gamma sum r) for "k is the joint one", and the two sets are weighted by the
/// class priors 1 / (1 + gamma) (marginal) and gamma / (1 + gamma) (joint). Its optimum is
/// l = log r exactly.
fn nrec_row(l: &[f64], k: usize, gamma: f64, w: f64, g: Option<&mut [f64]>) -> f64 {
    let (lg, lk) = (gamma.ln(), (k as f64).ln());
    let (pj, pm) = (gamma / (1.0 + gamma), 1.0 / (1.0 + gamma));
    // The denominators' terms: log gamma + l over the set, and log K.
    let mut dj: Vec<f64> = l[..k].iter().map(|v| lg + v).collect();
    dj.push(lk);
    let mut dm: Vec<f64> = l[1..=k].iter().map(|v| lg + v).collect();
    dm.push(lk);
    let (zj, zm) = (log_sum_exp(&dj), log_sum_exp(&dm));
    let log_joint = lg + l[0] - zj;
    let log_marginal = lk - zm;
    if let Some(g) = g {
        g[0] -= w * pj;
        for j in 0..k {
            g[j] += w * pj * (dj[j] - zj).exp();
            g[j + 1] += w * pm * (dm[j] - zm).exp();
        }
    }
    -(pj * log_joint + pm * log_marginal)
}

/// Mean loss over the batch whose logits come in `blocks` (each row-major `rows x (K + 1)`, in
/// order); with `grads` (one buffer per block, same shapes), writes the loss's derivatives with
/// respect to the logits there. The blocks are visited in order, so the result does not depend
/// on how they were computed.
pub fn batch_loss(loss: Loss, k: usize, blocks: &[&[f64]], grads: Option<&mut [Vec<f64>]>) -> f64 {
    assert!(k >= 1);
    let c = k + 1;
    let b: usize = blocks.iter().map(|l| l.len() / c).sum();
    let w = 1.0 / b as f64;
    let mut grads = grads;
    if let Some(gs) = grads.as_deref_mut() {
        for (g, l) in gs.iter_mut().zip(blocks) {
            g.clear();
            g.resize(l.len(), 0.0);
        }
    }
    let mut total = 0.0;
    for (bi, l) in blocks.iter().enumerate() {
        for r in 0..l.len() / c {
            let lr = &l[r * c..(r + 1) * c];
            let gr = grads.as_deref_mut().map(|gs| &mut gs[bi][r * c..(r + 1) * c]);
            total += match loss {
                Loss::Nre | Loss::Bnre { .. } => nre_row(lr, k, w, gr),
                Loss::Nrec { gamma } => nrec_row(lr, k, gamma, w, gr),
            };
        }
    }
    let mut mean = total * w;
    if let Loss::Bnre { lambda } = loss {
        // The balance statistic needs the whole batch before any derivative.
        let inv_k = 1.0 / k as f64;
        let mut s = 0.0;
        for l in blocks {
            for r in 0..l.len() / c {
                s += sigmoid(l[r * c]) + inv_k * l[r * c + 1..(r + 1) * c].iter().map(|&v| sigmoid(v)).sum::<f64>();
            }
        }
        let s = s * w - 1.0;
        mean += lambda * s * s;
        if let Some(gs) = grads {
            let coef = 2.0 * lambda * s * w;
            for (g, l) in gs.iter_mut().zip(blocks) {
                for (i, (gv, &lv)) in g.iter_mut().zip(l.iter()).enumerate() {
                    let sg = sigmoid(lv);
                    let per = if i % c == 0 { 1.0 } else { inv_k };
                    *gv += coef * per * sg * (1.0 - sg);
                }
            }
        }
    }
    mean
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits(b: usize, k: usize) -> Vec<f64> {
        (0..b * (k + 1)).map(|i| ((i * 29 % 17) as f64 - 8.0) / 3.0).collect()
    }

    #[test]
    fn gradients_match_finite_differences() {
        for loss in [
            Loss::Nre,
            Loss::Nrec { gamma: 1.0 },
            Loss::Nrec { gamma: 0.3 },
            Loss::Bnre { lambda: 100.0 },
        ] {
            for k in [1, 4] {
                let (b1, b2) = (3, 2);
                let l = logits(b1 + b2, k);
                let split = b1 * (k + 1);
                let f = |l: &[f64]| batch_loss(loss, k, &[&l[..split], &l[split..]], None);
                let mut gs = vec![Vec::new(), Vec::new()];
                let v = batch_loss(loss, k, &[&l[..split], &l[split..]], Some(&mut gs));
                assert!((v - f(&l)).abs() < 1e-14);
                let g: Vec<f64> = gs.concat();
                for j in 0..l.len() {
                    let h = 1e-6;
                    let (mut a, mut b) = (l.clone(), l.clone());
                    a[j] += h;
                    b[j] -= h;
                    let fd = (f(&a) - f(&b)) / (2.0 * h);
                    assert!(
                        (fd - g[j]).abs() < 1e-7 * (1.0 + fd.abs()),
                        "{loss:?} K={k} logit {j}: {fd} vs {}",
                        g[j]
                    );
                }
            }
        }
    }

    /// The population optimum of each loss is l = log r. With the marginal and joint densities of
    /// a two-point problem the expected loss is a function of the logits at the four (theta, x)
    /// pairs; its gradient at l = log r must vanish.
    #[test]
    fn the_optimum_is_the_log_ratio() {
        // theta, x in {0, 1}; p(theta) = (0.5, 0.5); p(x | theta) = [[0.8, 0.2], [0.3, 0.7]].
        let pth = [0.5, 0.5];
        let lik: [[f64; 2]; 2] = [[0.8, 0.2], [0.3, 0.7]];
        let px = [0.5 * 0.8 + 0.5 * 0.3, 0.5 * 0.2 + 0.5 * 0.7];
        let lr = |t: usize, x: usize| (lik[t][x] / px[x]).ln();
        for (loss, k) in [
            (Loss::Nre, 1),
            (Loss::Nre, 3),
            (Loss::Nrec { gamma: 1.0 }, 2),
            (Loss::Nrec { gamma: 2.5 }, 3),
        ] {
            // Expected loss over (theta_0, x) joint and K independent marginal thetas, by
            // enumeration; its derivative in the table l[t][x] by finite differences.
            let expected = |tab: &[[f64; 2]; 2]| -> f64 {
                let mut e = 0.0;
                let combos = 2usize.pow(k as u32);
                for t0 in 0..2 {
                    for x in 0..2 {
                        let pj = pth[t0] * lik[t0][x];
                        for c in 0..combos {
                            let mut l = vec![tab[t0][x]];
                            let mut pm = 1.0;
                            for j in 0..k {
                                let t = (c >> j) & 1;
                                pm *= pth[t];
                                l.push(tab[t][x]);
                            }
                            e += pj * pm * batch_loss(loss, k, &[&l], None);
                        }
                    }
                }
                e
            };
            let tab = [[lr(0, 0), lr(0, 1)], [lr(1, 0), lr(1, 1)]];
            for t in 0..2 {
                for x in 0..2 {
                    let h = 1e-5;
                    let (mut a, mut b) = (tab, tab);
                    a[t][x] += h;
                    b[t][x] -= h;
                    let d = (expected(&a) - expected(&b)) / (2.0 * h);
                    assert!(d.abs() < 1e-8, "{loss:?} K={k}: derivative {d} at l = log r");
                }
            }
        }
    }
}
