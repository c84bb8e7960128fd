//! Covariances that are right for NCE.
//!
//! Data and reference points are independent samples, not Bernoulli labels given the points.
//! With scores s_r = g_r x_r, the meat is the sum over samples of the within-sample centred
//! outer products, sum_r s_r s_r' - sum_k n_k sbar_k sbar_k', which reproduces the asymptotic
//! covariance of Gutmann & Hyvarinen (2012) (their rank-one correction is the centring).

use crate::design::Design;
use crate::error::{NceError, Result};
use crate::linalg::select;
use nalgebra::{DMatrix, DVector};

/// Sandwich bread * meat * bread for rows split into independent samples `sample[r]` (0, 1, ...).
/// `bread` is the inverse negative Hessian (NaN rows/cols where `aliased`).
pub fn sample_sandwich<D: Design>(
    d: &D,
    row_grad: &[f64],
    sample: &[usize],
    bread: &DMatrix<f64>,
    aliased: &[bool],
) -> Result<DMatrix<f64>> {
    let n = d.nrow();
    let p = d.ncol();
    if row_grad.len() != n || sample.len() != n {
        return Err(NceError::invalid("sample", format!("must have one entry per row ({n})")));
    }
    let k = sample.iter().copied().max().unwrap_or(0) + 1;
    let g2: Vec<f64> = row_grad.iter().map(|g| g * g).collect();
    let mut meat = d.weighted_crossprod(&g2, &vec![0.0; n]).0;
    for s in 0..k {
        let count = sample.iter().filter(|&&v| v == s).count();
        if count == 0 {
            continue;
        }
        let gs: Vec<f64> = row_grad.iter().zip(sample).map(|(g, &v)| if v == s { *g } else { 0.0 }).collect();
        let total: DVector<f64> = d.weighted_crossprod(&vec![0.0; n], &gs).1;
        meat -= &total * total.transpose() / count as f64;
    }
    let keep: Vec<usize> = (0..p).filter(|&j| !aliased[j]).collect();
    let b = select(bread, &keep);
    let m = select(&meat, &keep);
    let v = &b * m * &b;
    let mut out = DMatrix::from_element(p, p, f64::NAN);
    for (a, &i) in keep.iter().enumerate() {
        for (c, &j) in keep.iter().enumerate() {
            out[(i, j)] = 0.5 * (v[(a, c)] + v[(c, a)]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::DenseDesign;

    #[test]
    fn meat_is_centred_within_each_sample() {
        // one column of ones: centred scores within a sample sum to zero, so the meat vanishes.
        let n = 10;
        let x = vec![1.0; n];
        let d = DenseDesign::new(&x, n, 1).unwrap();
        let g: Vec<f64> = (0..n).map(|i| if i < 4 { 0.3 } else { -0.1 }).collect();
        let sample: Vec<usize> = (0..n).map(|i| usize::from(i < 4)).collect();
        let v = sample_sandwich(&d, &g, &sample, &DMatrix::identity(1, 1), &[false]).unwrap();
        assert!(v[(0, 0)].abs() < 1e-15);
    }
}
