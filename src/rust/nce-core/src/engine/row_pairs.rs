//! The traces of the REML Hessian by pairs of rows, for designs with few rows against their
//! columns and penalties (the classifiers of the simulator functions: a few thousand rows,
//! hundreds of coefficients, dozens of penalties).
//!
//! The exact Hessian needs tr(A_k A_j) for every pair of penalties, A_j = H^{-1} dH_j with
//! dH_j = X' diag(v_j) X + lambda_j S_j. Formed as matrices, that is one weighted cross-product
//! X' diag(v_j) X per penalty (m n p^2 / 2 multiply-adds) and m products of p x p matrices.
//! With P = X H^{-1} X' (n x n) and G = X H^{-1} (n x p) the same traces are
//!     tr(H^{-1} M_k H^{-1} M_j) = v_k' (P o P) v_j,
//!     tr(H^{-1} M_k H^{-1} S_j) = sum_i v_ki g_i' S_j g_i,
//!     tr(H^{-1} S_k H^{-1} S_j) from the blocks of H^{-1} S_j,
//! n^2 (p + m) multiply-adds in all, which is far less when n is below about m p / 2. P is
//! formed a block of rows at a time and never held whole.

use crate::engine::penalty::PenaltySet;
use nalgebra::DMatrix;
use rayon::prelude::*;

/// Rows of P formed at once (fixed: the result does not depend on the thread count).
const ROW_BLOCK: usize = 128;

/// Whether the traces by pairs of rows are modelled to cost less than the weighted
/// cross-products. Costs in multiply-adds of the cross-product kernel; the p x p products of the
/// products path (m of H^{-1} dH_j, then the m^2 traces) ran about 6 times slower per
/// multiply-add than either path's row kernels (`reml::tests::time_row_pairs`, ten shapes with
/// n = 1,000-20,000, p = 50-383, m = 4-87, 2 threads): it picked the faster path on all ten,
/// or one within 4%, the rows path 2.7-23 times faster where chosen.
pub(crate) fn row_pairs_pay(n: usize, pens: &PenaltySet) -> bool {
    let (n, p, m) = (n as f64, pens.ncoef() as f64, pens.len() as f64);
    let k2: f64 = pens.penalties().iter().map(|s| (s.s.nrows() as f64).powi(2)).sum();
    let by_rows = n * p * p + n * n * (p + m) + n * k2 + n * m * m;
    let by_products = m * n * p * (p + 1.0) / 2.0 + 6.0 * (m * p * p * p + m * m * p * p);
    by_rows < by_products
}

/// tr(A_j) (m) and tr(A_k A_j) (m x m) for A_j = H^{-1} (X' diag(v_j) X + lambda_j S_j):
/// `x` the design (n x p), `hinv` = H^{-1}, `v` (n x m) the weight vectors v_j as columns,
/// `lev` the leverages x_i' H^{-1} x_i.
pub(crate) fn row_pair_traces(
    x: &DMatrix<f64>,
    hinv: &DMatrix<f64>,
    v: &DMatrix<f64>,
    lev: &[f64],
    pens: &PenaltySet,
    lambda: &[f64],
) -> (Vec<f64>, DMatrix<f64>) {
    let (n, m) = (x.nrows(), pens.len());
    let blocks: Vec<(usize, usize)> = (0..n.div_ceil(ROW_BLOCK))
        .map(|b| (b * ROW_BLOCK, ROW_BLOCK.min(n - b * ROW_BLOCK)))
        .collect();
    // G = X H^{-1}, by blocks of rows.
    let g_parts: Vec<DMatrix<f64>> = blocks.par_iter().map(|&(lo, nb)| x.rows(lo, nb) * hinv).collect();
    let mut g = DMatrix::<f64>::zeros(n, x.ncols());
    for (&(lo, nb), part) in blocks.iter().zip(&g_parts) {
        g.rows_mut(lo, nb).copy_from(part);
    }
    drop(g_parts);
    // (P o P) V, a block of rows of P at a time.
    let xt = x.transpose();
    let ppv_parts: Vec<DMatrix<f64>> = blocks
        .par_iter()
        .map(|&(lo, nb)| {
            let mut pb = g.rows(lo, nb) * &xt;
            pb.iter_mut().for_each(|e| *e *= *e);
            pb * v
        })
        .collect();
    drop(xt);
    let mut ppv = DMatrix::<f64>::zeros(n, m);
    for (&(lo, nb), part) in blocks.iter().zip(&ppv_parts) {
        ppv.rows_mut(lo, nb).copy_from(part);
    }
    drop(ppv_parts);
    let mm = v.tr_mul(&ppv);
    // Q_ij = g_i' S_j g_i on S_j's block of columns.
    let mut q = DMatrix::<f64>::zeros(n, m);
    q.as_mut_slice()
        .par_chunks_mut(n)
        .zip(pens.penalties().par_iter())
        .for_each(|(col, pen)| {
            let k = pen.s.nrows();
            let gb = g.columns(pen.start, k);
            let gs = gb * &pen.s;
            for (i, c) in col.iter_mut().enumerate() {
                *c = (0..k).map(|l| gs[(i, l)] * gb[(i, l)]).sum();
            }
        });
    let ms = v.tr_mul(&q);
    // The non-zero columns C_j of H^{-1} S_j: tr(H^{-1} S_k H^{-1} S_j) = sum of C_k's rows of
    // S_j's block times C_j's rows of S_k's block, transposed.
    let c: Vec<(usize, DMatrix<f64>)> = (0..m).into_par_iter().map(|j| pens.right_mul(j, hinv)).collect();
    let mut cross = DMatrix::<f64>::zeros(m, m);
    for k in 0..m {
        for j in 0..=k {
            let (sk, ck) = (&c[k].0, &c[k].1);
            let (sj, cj) = (&c[j].0, &c[j].1);
            let (kk, kj) = (ck.ncols(), cj.ncols());
            let ss = ck.rows(*sj, kj).component_mul(&cj.rows(*sk, kk).transpose()).sum();
            let t = mm[(k, j)] + lambda[j] * ms[(k, j)] + lambda[k] * ms[(j, k)] + lambda[k] * lambda[j] * ss;
            cross[(k, j)] = t;
            cross[(j, k)] = t;
        }
    }
    let tra = (0..m)
        .map(|j| {
            let vl: f64 = v.column(j).iter().zip(lev).map(|(a, b)| a * b).sum();
            vl + lambda[j] * pens.trace_with(j, hinv)
        })
        .collect();
    (tra, cross)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::penalty::Penalty;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The traces by pairs of rows equal those of the matrices A_j formed in full.
    #[test]
    fn traces_match_full_matrices() {
        let (n, p) = (700, 12);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let x = DMatrix::from_fn(n, p, |_, _| rng.gen::<f64>() - 0.5);
        let mut pens = Vec::new();
        for (start, k) in [(1usize, 5usize), (1, 5), (6, 6), (8, 3)] {
            let a = DMatrix::from_fn(k, k, |_, _| rng.gen::<f64>());
            pens.push(Penalty {
                start,
                s: &a * a.transpose(),
            });
        }
        let pens = PenaltySet::new(p, pens).unwrap();
        let m = pens.len();
        let lambda: Vec<f64> = (0..m).map(|j| 0.3 + j as f64).collect();
        let w: Vec<f64> = (0..n).map(|_| 0.05 + rng.gen::<f64>() * 0.2).collect();
        let mut h = x.transpose() * DMatrix::from_diagonal(&nalgebra::DVector::from_vec(w)) * &x;
        h += pens.total(&lambda);
        let hinv = h.clone().cholesky().unwrap().inverse();
        let v = DMatrix::from_fn(n, m, |_, _| rng.gen::<f64>() - 0.5);
        let lev: Vec<f64> = (0..n)
            .map(|i| (x.row(i) * &hinv * x.row(i).transpose())[(0, 0)])
            .collect();
        let (tra, cross) = row_pair_traces(&x, &hinv, &v, &lev, &pens, &lambda);
        let a: Vec<DMatrix<f64>> = (0..m)
            .map(|j| {
                let mut dh = x.transpose() * DMatrix::from_diagonal(&v.column(j).into_owned()) * &x;
                pens.add_to(j, &mut dh, lambda[j]);
                &hinv * dh
            })
            .collect();
        // Bit for bit the same on 1 and 2 threads.
        let on = |t: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| row_pair_traces(&x, &hinv, &v, &lev, &pens, &lambda))
        };
        let (one, two) = (on(1), on(2));
        assert_eq!(one.0, two.0);
        assert_eq!(one.1, two.1);
        assert_eq!(one.1, cross);
        for j in 0..m {
            assert!((tra[j] - a[j].trace()).abs() < 1e-10 * a[j].trace().abs().max(1.0));
            for k in 0..m {
                let want = (&a[k] * &a[j]).trace();
                assert!((cross[(k, j)] - want).abs() < 1e-10 * want.abs().max(1.0), "{k} {j}");
            }
        }
    }
}
