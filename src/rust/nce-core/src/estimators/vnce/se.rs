//! Standard errors of VNCE estimates: the sandwich of an M-estimator on two independent samples.
//!
//! With the latent draws fixed (one set per row, drawn once from the row's own stream), the VNCE
//! objective is a sum of per-row terms, n data rows and m noise rows, each a function of the
//! parameters and of that row's data and draws only. The data rows (with their draws) are i.i.d.,
//! and so are the noise rows, so the estimate is an M-estimator on two independent samples and
//! its covariance is H^{-1} V H^{-1}, H the Hessian of the summed objective and
//!
//!   V = sum over data rows (s_r - mean_data s)(s_r - mean_data s)'
//!     + sum over noise rows (s_r - mean_noise s)(s_r - mean_noise s)',
//!
//! the per-row scores centred within each sample (the NCE sandwich of engine.md section 4; with
//! nothing missing it is exactly that). With missing values each noise row copies the missingness
//! pattern of the data row it pairs with, so the samples are dependent through the patterns; V
//! then sums over clusters (a data row and its noise rows), which are i.i.d. (`paired_meat`). The
//! Monte Carlo error of the fixed draws is part of each row's term and so is counted. H is
//! obtained by central differences of the exact gradient.

use crate::error::{NceError, Result};
use nalgebra::DMatrix;

/// Hessian of a function at `x` by central differences of its exact gradient `grad`,
/// symmetrised. Steps are `rel` times max(1, |x_j|).
pub fn hessian_by_differences(x: &[f64], rel: f64, grad: &dyn Fn(&[f64]) -> Result<Vec<f64>>) -> Result<DMatrix<f64>> {
    let p = x.len();
    let mut h: DMatrix<f64> = DMatrix::zeros(p, p);
    let mut xs = x.to_vec();
    for j in 0..p {
        let step = rel * x[j].abs().max(1.0);
        xs[j] = x[j] + step;
        let gp = grad(&xs)?;
        xs[j] = x[j] - step;
        let gm = grad(&xs)?;
        xs[j] = x[j];
        if gp.len() != p || gm.len() != p {
            return Err(NceError::invalid("grad", "returned a gradient of the wrong length"));
        }
        for i in 0..p {
            h[(i, j)] = (gp[i] - gm[i]) / (2.0 * step);
        }
    }
    if h.iter().any(|v| !v.is_finite()) {
        return Err(NceError::Numerical(
            "the Hessian of the objective is not finite at the estimate (a difference step left the region \
             where the objective is defined)"
                .to_string(),
        ));
    }
    Ok((&h + h.transpose()) * 0.5)
}

/// Centred outer products of the per-row scores, summed within the two samples: `scores` is
/// row-major (rows x p) with the `n_data` data rows first.
pub fn two_sample_meat(scores: &[f64], rows: usize, n_data: usize, p: usize) -> Result<DMatrix<f64>> {
    if scores.len() != rows * p || n_data == 0 || n_data >= rows {
        return Err(NceError::invalid("scores", "must hold data rows then noise rows"));
    }
    let mut v: DMatrix<f64> = DMatrix::zeros(p, p);
    add_centred_products(&mut v, &scores[..n_data * p]);
    add_centred_products(&mut v, &scores[n_data * p..]);
    symmetric_finite(v)
}

/// Centred outer products of cluster sums: cluster i is data row i with the noise rows k that
/// pair with it (k mod n_data = i). With missing values a noise row copies the missingness
/// pattern of its data row, so the two samples are not independent; the clusters (a data row,
/// its pattern and its noise rows) are.
pub fn paired_meat(scores: &[f64], rows: usize, n_data: usize, p: usize) -> Result<DMatrix<f64>> {
    if scores.len() != rows * p || n_data == 0 || rows <= n_data || (rows - n_data) % n_data != 0 {
        return Err(NceError::invalid(
            "scores",
            "must hold n data rows then a multiple of n noise rows",
        ));
    }
    let mut sums = scores[..n_data * p].to_vec();
    for k in 0..rows - n_data {
        let i = k % n_data;
        for j in 0..p {
            sums[i * p + j] += scores[(n_data + k) * p + j];
        }
    }
    let mut v: DMatrix<f64> = DMatrix::zeros(p, p);
    add_centred_products(&mut v, &sums);
    symmetric_finite(v)
}

/// Adds to the upper triangle of `v` (p x p) the outer products of the rows of `block`
/// (row-major, p columns) centred at their mean.
fn add_centred_products(v: &mut DMatrix<f64>, block: &[f64]) {
    let p = v.nrows();
    let cnt = (block.len() / p) as f64;
    let mut mean = vec![0.0; p];
    for row in block.chunks_exact(p) {
        for (m, s) in mean.iter_mut().zip(row) {
            *m += s / cnt;
        }
    }
    let mut e = vec![0.0; p];
    for row in block.chunks_exact(p) {
        for k in 0..p {
            e[k] = row[k] - mean[k];
        }
        for a in 0..p {
            if e[a] == 0.0 {
                continue;
            }
            for b in a..p {
                v[(a, b)] += e[a] * e[b];
            }
        }
    }
}

/// `v` with its upper triangle mirrored into the lower, or an error if an entry is not finite.
fn symmetric_finite(mut v: DMatrix<f64>) -> Result<DMatrix<f64>> {
    for a in 0..v.nrows() {
        for b in 0..a {
            v[(a, b)] = v[(b, a)];
        }
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(NceError::Numerical(
            "the per-row scores are not finite at the estimate".to_string(),
        ));
    }
    Ok(v)
}

/// H^{-1} V H^{-1} for the Hessian `h` of the summed objective (negative definite at a maximum).
pub fn sandwich(h: &DMatrix<f64>, v: &DMatrix<f64>) -> Result<DMatrix<f64>> {
    let neg = -h.clone();
    let hinv = match nalgebra::Cholesky::new(neg) {
        Some(ch) => -ch.inverse(),
        None => {
            return Err(NceError::Numerical(
                "the Hessian of the objective is not negative definite at the estimate (not a strict maximum: \
                 the parameters are not identified by these data, or the fit did not converge)"
                    .to_string(),
            ))
        }
    };
    let out = &hinv * v * &hinv;
    Ok((&out + out.transpose()) * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hessian_of_a_quadratic_is_exact() {
        // f(x) = -x'Ax/2 with gradient -Ax
        let a = DMatrix::from_row_slice(2, 2, &[2.0, 0.5, 0.5, 1.0]);
        let g = |x: &[f64]| -> Result<Vec<f64>> { Ok(vec![-(2.0 * x[0] + 0.5 * x[1]), -(0.5 * x[0] + x[1])]) };
        let h = hessian_by_differences(&[0.3, -1.0], 1e-4, &g).unwrap();
        assert!((h + &a).abs().max() < 1e-9);
    }

    #[test]
    fn meat_centres_within_samples() {
        // one parameter; data scores 1, 3 (mean 2), noise scores 10, 14 (mean 12)
        let v = two_sample_meat(&[1.0, 3.0, 10.0, 14.0], 4, 2, 1).unwrap();
        assert!((v[(0, 0)] - (1.0 + 1.0 + 4.0 + 4.0)).abs() < 1e-12);
        let h = DMatrix::from_element(1, 1, -2.0);
        let s = sandwich(&h, &v).unwrap();
        assert!((s[(0, 0)] - 10.0 / 4.0).abs() < 1e-12);
    }

    #[test]
    fn meat_is_symmetric_with_off_diagonal_products() {
        // data rows (1, 2), (3, 0): centred (-1, 1), (1, -1); noise rows (10, 5), (14, 5): (-2, 0), (2, 0)
        let v = two_sample_meat(&[1.0, 2.0, 3.0, 0.0, 10.0, 5.0, 14.0, 5.0], 4, 2, 2).unwrap();
        assert_eq!(v, DMatrix::from_row_slice(2, 2, &[10.0, -2.0, -2.0, 2.0]));
        assert!(two_sample_meat(&[1.0, f64::NAN, 3.0, 0.0, 10.0, 5.0, 14.0, 5.0], 4, 2, 2).is_err());
    }

    #[test]
    fn paired_meat_sums_each_data_row_with_its_noise_rows() {
        // n = 2 data rows (scores 1, 3), 4 noise rows pairing 0, 1, 0, 1 (10, 14, 20, 30):
        // cluster sums 1 + 10 + 20 = 31 and 3 + 14 + 30 = 47, mean 39
        let v = paired_meat(&[1.0, 3.0, 10.0, 14.0, 20.0, 30.0], 6, 2, 1).unwrap();
        assert!((v[(0, 0)] - 128.0).abs() < 1e-12);
        assert!(paired_meat(&[1.0, 3.0, 10.0], 3, 2, 1).is_err());
    }
}
