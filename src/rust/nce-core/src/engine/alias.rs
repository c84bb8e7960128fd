//! Columns that are not identifiable even with the penalty, dropped before a penalised fit.
//!
//! As mgcv does, unpenalised (parametric) columns are the ones dropped when a smooth's
//! null space duplicates them: dropping a penalised column would change the penalty and
//! so the fit, dropping an unpenalised one does not.

use crate::engine::design::{DenseDesign, Design};
use crate::engine::irls::Problem;
use crate::engine::penalty::{Penalty, PenaltySet};
use crate::engine::reml::{fit_reml, RemlControl, RemlFit};
use crate::engine::sandwich::sample_sandwich;
use crate::error::Result;
use crate::linalg::aliased_columns;
use nalgebra::DMatrix;

/// Tolerance of the rank test that finds aliased columns.
const ALIAS_TOL: f64 = 1e-9;

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

/// A REML fit of a dense design whose aliased columns were dropped and put back.
#[derive(Debug, Clone)]
pub struct DenseRemlFit {
    /// The fit at full size: coefficients and edf 0, rows and columns of Vp and Ve 0 where
    /// aliased, as in mgcv. `fit.fit` (the inner fit) keeps the reduced size.
    pub fit: RemlFit,
    /// The NCE sandwich (Vp as bread) when samples were given, at full size.
    pub sandwich: Option<DMatrix<f64>>,
    /// Which columns were dropped.
    pub aliased: Vec<bool>,
}

/// find_aliased -> reduce -> fit_reml -> expand: a penalised fit that drops the columns not
/// identifiable even with the penalty, and with `sample` (0-based sample of each row) the
/// sample sandwich on the identifiable columns.
pub fn fit_reml_dense(
    design: &DenseDesign,
    prob: &Problem,
    pens: &PenaltySet,
    ctrl: &RemlControl,
    sample: Option<&[usize]>,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<DenseRemlFit> {
    let (n, p) = (design.nrow(), design.ncol());
    let aliased = find_aliased(design, pens, ALIAS_TOL);
    let reduced = if aliased.iter().any(|&a| a) {
        Some(reduce(design, pens, &aliased)?)
    } else {
        None
    };
    let (d, ps) = match &reduced {
        Some(r) => (DenseDesign::new(&r.data, n, r.ncol)?, &r.penalties),
        None => (*design, pens),
    };
    let mut fit = fit_reml(&d, prob, ps, ctrl, interrupted)?;
    let mut sandwich = match sample {
        Some(s) => Some(sample_sandwich(&d, &fit.fit.row_grad, s, &fit.vp, &fit.fit.aliased)?),
        None => None,
    };
    if let Some(r) = &reduced {
        fit.coefficients = expand_vec(&fit.coefficients, &r.kept, p);
        fit.edf = expand_vec(&fit.edf, &r.kept, p);
        fit.vp = expand_matrix(&fit.vp, &r.kept, p);
        fit.ve = expand_matrix(&fit.ve, &r.kept, p);
        sandwich = sandwich.map(|m| expand_matrix(&m, &r.kept, p));
    }
    Ok(DenseRemlFit { fit, sandwich, aliased })
}

/// `v` on the `kept` columns back to `p` entries, 0 elsewhere.
fn expand_vec(v: &[f64], kept: &[usize], p: usize) -> Vec<f64> {
    let mut out = vec![0.0; p];
    for (k, &j) in kept.iter().enumerate() {
        out[j] = v[k];
    }
    out
}

/// `m` on the `kept` rows and columns back to p x p, 0 elsewhere.
fn expand_matrix(m: &DMatrix<f64>, kept: &[usize], p: usize) -> DMatrix<f64> {
    let mut out = DMatrix::zeros(p, p);
    for (a, &i) in kept.iter().enumerate() {
        for (b, &j) in kept.iter().enumerate() {
            out[(i, j)] = m[(a, b)];
        }
    }
    out
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

    #[test]
    fn dense_fit_drops_and_restores_an_aliased_column() {
        // [1, t, 1]: the copy of the intercept is dropped; the fit equals the fit of [1, t]
        // (ridge penalty on t), with 0 in the dropped places.
        use crate::engine::family::Family;
        let n = 60;
        let t: Vec<f64> = (0..n).map(|i| i as f64 / n as f64 - 0.5).collect();
        let y: Vec<f64> = (0..n)
            .map(|i| f64::from(u8::from((i * 7) % 5 < 2 + usize::from(t[i] > 0.0))))
            .collect();
        let (w, o) = (vec![1.0; n], vec![0.0; n]);
        let prob = Problem::new(&y, &w, &o, Family::Binomial);
        let ridge = |start| Penalty {
            start,
            s: DMatrix::from_element(1, 1, 1.0),
        };
        let x3: Vec<f64> = [vec![1.0; n], t.clone(), vec![1.0; n]].concat();
        let x2: Vec<f64> = [vec![1.0; n], t.clone()].concat();
        let d3 = DenseDesign::new(&x3, n, 3).unwrap();
        let d2 = DenseDesign::new(&x2, n, 2).unwrap();
        let ctrl = RemlControl::default();
        let sample: Vec<usize> = (0..n).map(|i| i % 2).collect();
        let full = fit_reml_dense(
            &d3,
            &prob,
            &PenaltySet::new(3, vec![ridge(1)]).unwrap(),
            &ctrl,
            Some(&sample),
            &mut || false,
        )
        .unwrap();
        let small = fit_reml(
            &d2,
            &prob,
            &PenaltySet::new(2, vec![ridge(1)]).unwrap(),
            &ctrl,
            &mut || false,
        )
        .unwrap();
        assert_eq!(full.aliased, vec![false, false, true]);
        for j in 0..2 {
            assert!((full.fit.coefficients[j] - small.coefficients[j]).abs() < 1e-10);
            assert!((full.fit.vp[(j, j)] - small.vp[(j, j)]).abs() < 1e-10);
        }
        assert_eq!(full.fit.coefficients[2], 0.0);
        assert_eq!(full.fit.edf[2], 0.0);
        let sw = full.sandwich.unwrap();
        assert_eq!((sw.nrows(), sw.ncols()), (3, 3));
        assert!(sw[(1, 1)] > 0.0 && sw[(2, 2)] == 0.0);
    }
}
