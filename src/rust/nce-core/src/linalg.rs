//! Small dense linear algebra: pivoted Cholesky for rank detection, inverses of SPD matrices.

use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};

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
