//! Binding of nce_core::engine::basis: thin-plate rows and eigen-decomposition. No numerics here.

use crate::convert::{col_major_matrix, guard, real_matrix, threads_of, to_r_matrix};
use crate::run::run;
use extendr_api::prelude::*;
use nce_core::engine::basis::{top_eigen, tprs_e, tprs_predict};
use nce_core::NceError;

/// Rows of a thin-plate basis: `x` (n x d, shifted by the smooth's `shift`), the smooth's `Xu`
/// and `UZ`, penalty order `m` (mgcv's p.order[1]). Returns the n x k matrix predict_tprs gives.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tprs_predict(x: Robj, m: i32, xu: Robj, uz: Robj, threads: i32) -> Robj {
    guard(|| {
        let (xv, n, d) = real_matrix(&x, "x")?;
        let (xuv, nu, du) = real_matrix(&xu, "Xu")?;
        let (uzv, _, k) = real_matrix(&uz, "UZ")?;
        if du != d {
            return Err(NceError::invalid("Xu", format!("must have {d} columns, as x")));
        }
        let m = m.max(0) as usize;
        let threads = threads_of(threads)?;
        let out = run(threads, |_| tprs_predict(xv, n, d, m, xuv, nu, uzv, k))?;
        Ok(col_major_matrix(out, n, k))
    })
}

/// The k eigenpairs of largest magnitude of the thin-plate matrix E of the points `xu` (nu x d,
/// distinct), values in decreasing order: list(values, vectors).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tprs_eigen(xu: Robj, m: i32, k: i32, tol: f64, threads: i32) -> Robj {
    guard(|| {
        let (xuv, nu, d) = real_matrix(&xu, "Xu")?;
        if k < 1 {
            return Err(NceError::invalid("k", "must be at least 1"));
        }
        let m = m.max(0) as usize;
        let threads = threads_of(threads)?;
        let (vals, u) = run(threads, |_| {
            let e = tprs_e(xuv, nu, d, m)?;
            top_eigen(&e, k as usize, tol)
        })?;
        Ok(list!(values = vals, vectors = to_r_matrix(&u)).into_robj())
    })
}

extendr_module! {
    mod basis;
    fn nce_tprs_predict;
    fn nce_tprs_eigen;
}
