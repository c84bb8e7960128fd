//! Smoothing parameters of the working model at fixed weights (performance iteration, as
//! mgcv's `bam` fREML does), used to start the exact REML Newton iteration close to its end.
//!
//! At an inner fit with Hessian H0 = X'WX + S(rho0) and coefficients beta0, the working
//! Gaussian model with weights W and pseudo-data z has X'Wz = H0 beta0 (the penalised score
//! vanishes at beta0). Its REML score as a function of rho, with A = X'WX and b = H0 beta0,
//! H = A + S(rho), beta = H^{-1} b, is, up to a constant,
//!   V(rho) = (-b'beta + log|H| - log|S(rho)|_+) / 2,
//! with gradient (lambda_j beta'S_j beta + lambda_j tr(H^{-1} S_j) - d log|S|_+) / 2; all of it
//! is p x p algebra, no pass over the rows. Its minimiser is where performance iteration at
//! these weights would move rho; the exact (Laplace) score decides whether the move is taken.

use super::newton::newton_step;
use super::penalty::PenaltySet;
use nalgebra::{DMatrix, DVector};

/// Largest coefficient count for which the working start is tried: each of its Newton steps
/// costs an inverse (p^3 flops) and m thin products, against m p^3 per exact step.
const MAX_P: usize = 400;

/// The working model's REML minimiser in rho, from `rho0` within the bounds [lo, hi], by
/// Newton's method with an eigenvalue-modified Hessian and step halving, to a largest gradient
/// of `tol` (1 + |score|); None if it cannot be computed.
pub(crate) fn working_rho(
    h0: &DMatrix<f64>,
    beta0: &[f64],
    pens: &PenaltySet,
    rho0: &[f64],
    (lo, hi): (&[f64], &[f64]),
    max_step: f64,
    tol: f64,
) -> Option<Vec<f64>> {
    let (p, m) = (h0.nrows(), pens.len());
    if m == 0 || p > MAX_P || beta0.len() != p {
        return None;
    }
    let lam0: Vec<f64> = rho0.iter().map(|r| r.exp()).collect();
    let a = h0 - pens.total(&lam0);
    let b = h0 * DVector::from_column_slice(beta0);
    // Score, gradient and Hessian at rho.
    let eval = |rho: &[f64], with_derivs: bool| -> Option<(f64, Vec<f64>, DMatrix<f64>)> {
        let lam: Vec<f64> = rho.iter().map(|r| r.exp()).collect();
        let h = &a + pens.total(&lam);
        let hs = (&h + h.transpose()) * 0.5;
        let chol = hs.cholesky()?;
        let beta = chol.solve(&b);
        let logdet_h = 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
        let ld = pens.log_det(rho).ok()?;
        let v = 0.5 * (-b.dot(&beta) + logdet_h - ld.value);
        if !v.is_finite() {
            return None;
        }
        if !with_derivs {
            return Some((v, Vec::new(), DMatrix::zeros(0, 0)));
        }
        let hinv = chol.inverse();
        // M_j = H^{-1} S_j is zero outside S_j's columns: only those (p x k_j) are formed, so a
        // step costs one inverse and m thin products instead of m p x p products.
        let sb: Vec<DVector<f64>> = (0..m).map(|j| pens.apply(j, beta.as_slice())).collect();
        let mj: Vec<(usize, DMatrix<f64>)> = (0..m).map(|j| pens.right_mul(j, &hinv)).collect();
        let trace = |(start, c): &(usize, DMatrix<f64>)| (0..c.ncols()).map(|i| c[(start + i, i)]).sum::<f64>();
        // tr(M_j M_k): columns of M_j at S_j's block, rows of M_j at S_k's block.
        let cross = |(sj, cj): &(usize, DMatrix<f64>), (sk, ck): &(usize, DMatrix<f64>)| {
            cj.rows(*sk, ck.ncols())
                .component_mul(&ck.rows(*sj, cj.ncols()).transpose())
                .sum()
        };
        let grad: Vec<f64> = (0..m)
            .map(|j| 0.5 * (lam[j] * beta.dot(&sb[j]) + lam[j] * trace(&mj[j]) - ld.grad[j]))
            .collect();
        let mut hess = DMatrix::zeros(m, m);
        for j in 0..m {
            let hsj = &hinv * &sb[j];
            for k in j..m {
                let mut v = -2.0 * lam[j] * lam[k] * sb[k].dot(&hsj)
                    - lam[j] * lam[k] * cross(&mj[j], &mj[k])
                    - ld.hess[(j, k)];
                if j == k {
                    v += lam[j] * beta.dot(&sb[j]) + lam[j] * trace(&mj[j]);
                }
                hess[(j, k)] = 0.5 * v;
                hess[(k, j)] = 0.5 * v;
            }
        }
        Some((v, grad, hess))
    };
    let clamp = |r: &[f64]| -> Vec<f64> { (0..m).map(|j| r[j].clamp(lo[j], hi[j])).collect() };
    let mut rho = clamp(rho0);
    let (mut v, mut grad, mut hess) = eval(&rho, true)?;
    for _ in 0..50 {
        let free: Vec<usize> = (0..m)
            .filter(|&j| !((rho[j] >= hi[j] - 1e-10 && grad[j] < 0.0) || (rho[j] <= lo[j] + 1e-10 && grad[j] > 0.0)))
            .collect();
        let gmax = free.iter().map(|&j| grad[j].abs()).fold(0.0, f64::max);
        if gmax <= tol * (1.0 + v.abs()) {
            break;
        }
        let mut step = newton_step(&hess, &grad, &free, max_step);
        let mut moved = false;
        for _ in 0..25 {
            let trial = clamp(&rho.iter().zip(&step).map(|(r, s)| r + s).collect::<Vec<_>>());
            match eval(&trial, false) {
                Some((vt, _, _)) if vt <= v => {
                    rho = trial;
                    moved = true;
                    break;
                }
                _ => step.iter_mut().for_each(|s| *s *= 0.5),
            }
        }
        if !moved {
            break;
        }
        (v, grad, hess) = eval(&rho, true)?;
    }
    rho.iter().all(|r| r.is_finite()).then_some(rho)
}

/// lambda_j tr(H^{-1} S_j) for each penalty at H = `h`: the degrees of freedom penalty j takes
/// away. A smoothing parameter whose penalty has taken away (nearly) all its block can move far
/// without changing the fit, so changes in these, not in rho, say when rho has settled.
pub(crate) fn penalty_edf(h: &DMatrix<f64>, pens: &PenaltySet, rho: &[f64]) -> Option<Vec<f64>> {
    let hs = (h + h.transpose()) * 0.5;
    let hinv = hs.cholesky()?.inverse();
    Some(
        (0..pens.len())
            .map(|j| {
                let (start, c) = pens.right_mul(j, &hinv);
                rho[j].exp() * (0..c.ncols()).map(|i| c[(start + i, i)]).sum::<f64>()
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::penalty::Penalty;

    /// The working score by finite differences agrees with the analytic derivatives at the
    /// minimiser: the gradient vanishes there, and moving any rho raises the score.
    #[test]
    fn working_rho_minimises_the_working_score() {
        // X'WX of a smooth-like problem: 12 columns, two penalised blocks (second differences).
        let p = 12;
        let a = DMatrix::from_fn(p, p, |i, j| {
            let d = (i as f64 - j as f64).abs();
            50.0 * (-0.3 * d).exp() + if i == j { 5.0 } else { 0.0 }
        });
        let diff2 = |k: usize| {
            let d = DMatrix::from_fn(k - 2, k, |i, j| match j as isize - i as isize {
                0 | 2 => 1.0,
                1 => -2.0,
                _ => 0.0,
            });
            d.transpose() * d
        };
        let pens = PenaltySet::new(
            p,
            vec![Penalty { start: 1, s: diff2(6) }, Penalty { start: 7, s: diff2(5) }],
        )
        .unwrap();
        let beta0: Vec<f64> = (0..p).map(|i| (i as f64 * 0.7).sin()).collect();
        let rho0: Vec<f64> = vec![1.0, -1.0];
        let h0 = &a + pens.total(&[rho0[0].exp(), rho0[1].exp()]);
        let (lo, hi) = (vec![-20.0; 2], vec![20.0; 2]);
        let rho = working_rho(&h0, &beta0, &pens, &rho0, (&lo, &hi), 5.0, 1e-7).unwrap();
        // The same score written out directly.
        let b = &h0 * DVector::from_column_slice(&beta0);
        let score = |r: &[f64]| {
            let h = &a + pens.total(&[r[0].exp(), r[1].exp()]);
            let beta = h.clone().cholesky().unwrap().solve(&b);
            0.5 * (-b.dot(&beta) + h.determinant().ln() - pens.log_det(r).unwrap().value)
        };
        let v = score(&rho);
        for j in 0..2 {
            for d in [-1e-3, 1e-3] {
                let mut r = rho.clone();
                r[j] += d;
                assert!(
                    score(&r) >= v - 1e-8 * (1.0 + v.abs()),
                    "rho {rho:?} is not a minimum along {j}"
                );
            }
            let mut r1 = rho.clone();
            let mut r2 = rho.clone();
            r1[j] += 1e-5;
            r2[j] -= 1e-5;
            let g = (score(&r1) - score(&r2)) / 2e-5;
            assert!(
                g.abs() < 1e-6 * (1.0 + v.abs()) + 1e-6,
                "rho {rho:?}: gradient {g} along {j}"
            );
        }
    }
}
