//! The modified Newton step on the smoothing parameters, shared by the exact REML iteration
//! (`reml`) and the working-model start (`freml`), which `reml` calls: kept apart so that the
//! imports run one way.

use nalgebra::{DMatrix, DVector, SymmetricEigen};

/// Modified Newton direction on the free coordinates: eigenvalues made positive (mgcv-style).
pub(crate) fn newton_step(hess: &DMatrix<f64>, grad: &[f64], free: &[usize], max_step: f64) -> Vec<f64> {
    let k = free.len();
    let h = DMatrix::from_fn(k, k, |a, b| hess[(free[a], free[b])]);
    let g = DVector::from_fn(k, |a, _| grad[free[a]]);
    let e = SymmetricEigen::new(h);
    let top = e.eigenvalues.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let floor = if top > 0.0 { top * 1e-7 } else { 1.0 };
    let inv = DVector::from_fn(k, |i, _| 1.0 / e.eigenvalues[i].abs().max(floor));
    let ut_g = e.eigenvectors.transpose() * g;
    let step = -(&e.eigenvectors * ut_g.component_mul(&inv));
    let big = step.amax();
    let scale = if big > max_step { max_step / big } else { 1.0 };
    let mut full = vec![0.0; hess.nrows()];
    for (a, &j) in free.iter().enumerate() {
        full[j] = step[a] * scale;
    }
    full
}
