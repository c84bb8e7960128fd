//! Small dense linear algebra: pivoted Cholesky for rank detection, inverses of SPD matrices,
//! and in-place Cholesky on row-major scratch buffers for the per-row work of VNCE.

use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};

/// log(2 pi), for Gaussian log densities.
pub const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// Columns that are (numerically) linear combinations of earlier ones.
///
/// Works on the correlation-scaled matrix so units do not matter; `tol` is relative to
/// the unit diagonal (1e-9 on a cross-product is a relative singular value near 3e-5 of X).
/// Columns are taken in their given order, so the later of two collinear columns is dropped,
/// as in `glm()`.
pub fn aliased_columns(a: &DMatrix<f64>, tol: f64) -> Vec<bool> {
    let p = a.nrows();
    let mut alias = vec![false; p];
    let scale: Vec<f64> = (0..p).map(|j| a[(j, j)].max(0.0).sqrt()).collect();
    // Gram-Schmidt in the a-inner product on scaled columns (an ordered Cholesky).
    let mut l = DMatrix::<f64>::zeros(p, p);
    for j in 0..p {
        if scale[j] == 0.0 {
            alias[j] = true;
            continue;
        }
        let mut d = 1.0;
        for k in 0..j {
            if alias[k] {
                continue;
            }
            let mut s = a[(j, k)] / (scale[j] * scale[k]);
            for m in 0..k {
                s -= l[(j, m)] * l[(k, m)];
            }
            l[(j, k)] = s / l[(k, k)];
            d -= l[(j, k)] * l[(j, k)];
        }
        if d <= tol {
            alias[j] = true;
            for k in 0..j {
                l[(j, k)] = 0.0;
            }
        } else {
            l[(j, j)] = d.sqrt();
        }
    }
    alias
}

/// Submatrix of the kept rows and columns.
pub fn select(a: &DMatrix<f64>, keep: &[usize]) -> DMatrix<f64> {
    DMatrix::from_fn(keep.len(), keep.len(), |i, j| a[(keep[i], keep[j])])
}

pub fn select_vec(v: &DVector<f64>, keep: &[usize]) -> DVector<f64> {
    DVector::from_fn(keep.len(), |i, _| v[keep[i]])
}

/// Solve H x = b for symmetric positive definite H.
pub fn spd_solve(h: &DMatrix<f64>, b: &DVector<f64>) -> Result<DVector<f64>> {
    let c = h
        .clone()
        .cholesky()
        .ok_or_else(|| NceError::Numerical("the Hessian is not positive definite".into()))?;
    Ok(c.solve(b))
}

/// Inverse of a symmetric positive definite matrix.
pub fn spd_inverse(h: &DMatrix<f64>) -> Result<DMatrix<f64>> {
    let c = h
        .clone()
        .cholesky()
        .ok_or_else(|| NceError::Numerical("the Hessian is not positive definite".into()))?;
    let inv = c.inverse();
    // Symmetrise against rounding.
    Ok((&inv + inv.transpose()) * 0.5)
}

/// In-place Cholesky of a p x p row-major SPD matrix (lower factor); false if not PD.
pub fn cholesky(a: &mut [f64], p: usize) -> bool {
    for j in 0..p {
        let mut s = a[j * p + j];
        for k in 0..j {
            s -= a[j * p + k] * a[j * p + k];
        }
        if !(s > 0.0) {
            return false;
        }
        let l = s.sqrt();
        a[j * p + j] = l;
        for i in j + 1..p {
            let mut s = a[i * p + j];
            for k in 0..j {
                s -= a[i * p + k] * a[j * p + k];
            }
            a[i * p + j] = s / l;
        }
    }
    true
}

/// Inverse of L L' (L lower, row-major) into `inv`, using `w` (p * p) as scratch for L^{-1}.
pub fn chol_inverse(l: &[f64], p: usize, w: &mut [f64], inv: &mut [f64]) {
    // w = L^{-1} (lower), by forward substitution column by column.
    for v in w.iter_mut() {
        *v = 0.0;
    }
    for c in 0..p {
        for i in c..p {
            let mut s = if i == c { 1.0 } else { 0.0 };
            for k in c..i {
                s -= l[i * p + k] * w[k * p + c];
            }
            w[i * p + c] = s / l[i * p + i];
        }
    }
    // inv = W' W
    for i in 0..p {
        for j in i..p {
            let mut s = 0.0;
            for k in j..p {
                s += w[k * p + i] * w[k * p + j];
            }
            inv[i * p + j] = s;
            inv[j * p + i] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_collinear_columns_whatever_their_scale() {
        // columns: 1, x, 1e6 * x + 2 (collinear with the first two), z
        let n = 50;
        let mut x = DMatrix::<f64>::zeros(n, 4);
        for i in 0..n {
            let t = i as f64 / n as f64;
            x[(i, 0)] = 1.0;
            x[(i, 1)] = t;
            x[(i, 2)] = 1e6 * t + 2.0;
            x[(i, 3)] = (7.0 * t).sin();
        }
        let a = x.transpose() * &x;
        assert_eq!(aliased_columns(&a, 1e-9), vec![false, false, true, false]);
    }
}
