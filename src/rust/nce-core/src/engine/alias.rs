//! Columns that are not identifiable even with the penalty, dropped before a penalised fit.
//!
//! As mgcv does, unpenalised (parametric) columns are the ones dropped when a smooth's
//! null space duplicates them: dropping a penalised column would change the penalty and
//! so the fit, dropping an unpenalised one does not.

use crate::design::{DenseDesign, Design};
use crate::error::Result;
use crate::linalg::aliased_columns;
use crate::penalty::{Penalty, PenaltySet};
use nalgebra::DMatrix;

/// A design and penalty set with the aliased columns removed.
pub struct Reduced {
    /// Column-major data of the kept columns.
    pub data: Vec<f64>,
    pub ncol: usize,
    pub penalties: PenaltySet,
    /// Original index of each kept column.
    pub kept: Vec<usize>,
}

/// Aliased columns of `d` (true = drop), testing penalised columns before unpenalised ones.
pub fn find_aliased(d: &DenseDesign, pens: &PenaltySet, tol: f64) -> Vec<bool> {
    let (n, p) = (d.nrow(), d.ncol());
    let (xtx, _) = d.weighted_crossprod(&vec![1.0; n], &vec![0.0; n]);
    let mut penalised = vec![false; p];
    for pen in pens.penalties() {
        for j in pen.start..pen.start + pen.s.nrows() {
            penalised[j] = true;
        }
    }
    // Intercept and other columns keep their order within each class.
    let order: Vec<usize> = (0..p)
        .filter(|&j| penalised[j])
        .chain((0..p).filter(|&j| !penalised[j]))
        .collect();
    let permuted = DMatrix::from_fn(p, p, |a, b| xtx[(order[a], order[b])]);
    let flags = aliased_columns(&permuted, tol);
    let mut out = vec![false; p];
    for (a, &j) in order.iter().enumerate() {
        out[j] = flags[a];
    }
    out
}

/// The problem without the `aliased` columns.
pub fn reduce(d: &DenseDesign, pens: &PenaltySet, aliased: &[bool]) -> Result<Reduced> {
    let p = d.ncol();
    let kept: Vec<usize> = (0..p).filter(|&j| !aliased[j]).collect();
    let mut data = Vec::with_capacity(kept.len() * d.nrow());
    for &j in &kept {
        data.extend_from_slice(d.col(j));
    }
    // New index of each kept column.
    let mut new_index = vec![usize::MAX; p];
    for (k, &j) in kept.iter().enumerate() {
        new_index[j] = k;
    }
    let mut reduced = Vec::with_capacity(pens.len());
    for pen in pens.penalties() {
        let local: Vec<usize> = (0..pen.s.nrows()).filter(|&i| !aliased[pen.start + i]).collect();
        let start = (pen.start..pen.start + pen.s.nrows())
            .find(|&j| !aliased[j])
            .map(|j| new_index[j])
            .unwrap_or(0);
        let s = DMatrix::from_fn(local.len(), local.len(), |a, b| pen.s[(local[a], local[b])]);
        reduced.push(Penalty { start, s });
    }
    Ok(Reduced {
        data,
        ncol: kept.len(),
        penalties: PenaltySet::new(kept.len(), reduced)?,
        kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_the_parametric_duplicate_of_a_penalty_null_space() {
        // columns: intercept, t (parametric), [t, t^2] penalised only on t^2 (null space: t)
        let n = 20;
        let mut x = vec![0.0; 4 * n];
        for i in 0..n {
            let t = i as f64 / n as f64;
            x[i] = 1.0;
            x[n + i] = t;
            x[2 * n + i] = t;
            x[3 * n + i] = t * t;
        }
        let d = DenseDesign::new(&x, n, 4).unwrap();
        let s = DMatrix::from_row_slice(2, 2, &[0.0, 0.0, 0.0, 1.0]);
        let pens = PenaltySet::new(4, vec![Penalty { start: 2, s }]).unwrap();
        let a = find_aliased(&d, &pens, 1e-9);
        assert_eq!(a, vec![false, true, false, false]);
        let r = reduce(&d, &pens, &a).unwrap();
        assert_eq!(r.kept, vec![0, 2, 3]);
        assert_eq!(r.penalties.penalties()[0].start, 1);
        assert_eq!(r.data.len(), 3 * n);
    }
}
