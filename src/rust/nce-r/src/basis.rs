//! Binding of nce_core::engine::basis: thin-plate rows and eigen-decomposition. No numerics here.

use crate::convert::{
    col_major_matrix, guard, int_slice, opt_real_slice, real_matrix, real_slice, rows_block, rows_block_mut,
    threads_of, to_r_matrix, zero_based, Res, RowsBlock,
};
use crate::run::run;
use extendr_api::prelude::*;
use nce_core::engine::basis::{cc_basis_into, cr_basis_into, top_eigen, tprs_e, tprs_predict, TprsBasis};
use nce_core::engine::constraint::{absorb_in_place, basis_stats, scale_absorb_into, scale_in_place, BasisStats};
use nce_core::engine::knots::{place_knots, quantiles_type7, sorted_unique};
use nce_core::engine::print_order::{print_order_ranks, tiny_positions, unique_ranked_rows};
use nce_core::engine::rounding::round_to_grids;
use nce_core::NceError;

/// Rows of a thin-plate basis: `x` (n x d, shifted by the smooth's `shift`), the smooth's `Xu`
/// and `UZ`, penalty order `m` (mgcv's p.order[1]). Returns the n x k matrix predict_tprs gives.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tprs_predict(x: Robj, m: i32, xu: Robj, uz: Robj, threads: i32) -> Robj {
    guard(|| {
        let (out, n, k) = tprs_rows(&x, m, &xu, &uz, threads, |data, _, _| Ok(data))?;
        Ok(col_major_matrix(out, n, k))
    })
}

/// The rows of `nce_tprs_predict` built and held in Rust (a `RowsBlock`), their columns divided by
/// their root mean squares, as mgcv's thin-plate set-up scales them: list(ptr, nrow, ncol, scale,
/// means, max_row_sum), with the divisors, the scaled columns' means (mgcv's sum-to-zero constraint)
/// and largest absolute row sum (`norm(X, "I")`, which scales the penalty). R allocates none of the
/// n rows.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tprs_block(x: Robj, m: i32, xu: Robj, uz: Robj, threads: i32) -> Robj {
    guard(|| {
        let ((data, st), n, k) = tprs_rows(&x, m, &xu, &uz, threads, |mut data, n, k| {
            let st = basis_stats(&data, n, k, true)?;
            scale_in_place(&mut data, n, k, &st.scale)?;
            Ok((data, st))
        })?;
        rust_block(data, n, k, st)
    })
}

/// Rows held in Rust as the R list `nce_rust_block`: list(ptr, nrow, ncol, scale, means,
/// max_row_sum), with the statistics of the rows.
fn rust_block(data: Vec<f64>, n: usize, k: usize, st: BasisStats) -> Res<Robj> {
    let ptr = ExternalPtr::new(RowsBlock { data, nrow: n, ncol: k });
    let mut out = list!(
        ptr = ptr,
        nrow = n as f64,
        ncol = k as i32,
        scale = st.scale,
        means = st.means,
        max_row_sum = st.max_row_sum
    );
    out.set_class(["nce_rust_block"])
        .map_err(|e| NceError::invalid("result", e.to_string()))?;
    Ok(out.into_robj())
}

/// The thin-plate rows of `nce_tprs_predict`'s arguments, then `finish(rows, n, k)`, on the
/// per-call pool: (its result, n, k).
fn tprs_rows<T: Send>(
    x: &Robj,
    m: i32,
    xu: &Robj,
    uz: &Robj,
    threads: i32,
    finish: impl FnOnce(Vec<f64>, usize, usize) -> Res<T> + Send,
) -> Res<(T, usize, usize)> {
    let (xv, n, d) = real_matrix(x, "x")?;
    let (xuv, nu, du) = real_matrix(xu, "Xu")?;
    let (uzv, _, k) = real_matrix(uz, "UZ")?;
    if du != d {
        return Err(NceError::invalid("Xu", format!("must have {d} columns, as x")));
    }
    let m = m.max(0) as usize;
    let threads = threads_of(threads)?;
    let basis = TprsBasis {
        d,
        m,
        xu: xuv,
        nu,
        uz: uzv,
        k,
    };
    let out = run(threads, |_| finish(tprs_predict(xv, n, &basis)?, n, k))?;
    Ok((out, n, k))
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

/// The thin-plate matrix E (nu x nu) of the distinct points `xu` (nu x d), penalty order `m`
/// (tprs.c's order).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tprs_e(xu: Robj, m: i32, threads: i32) -> Robj {
    guard(|| {
        let (xuv, nu, d) = real_matrix(&xu, "Xu")?;
        let m = m.max(0) as usize;
        let threads = threads_of(threads)?;
        let e = run(threads, |_| tprs_e(xuv, nu, d, m))?;
        Ok(to_r_matrix(&e))
    })
}

/// Column divisors (root mean squares with `rms_scale`), column means and largest absolute row
/// sum of a basis `x` (n x k): list(scale, means, max_row_sum).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_basis_stats(x: Robj, rms_scale: bool) -> Robj {
    guard(|| {
        let (xv, n, k) = real_matrix(&x, "x")?;
        let st = basis_stats(xv, n, k, rms_scale)?;
        Ok(list!(scale = st.scale, means = st.means, max_row_sum = st.max_row_sum).into_robj())
    })
}

/// The basis `x` (n x k) with columns divided by `scale` and, unless `householder` is NULL, the
/// sum-to-zero constraint whose LINPACK reflection it is absorbed (n x (k - 1)).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_scale_absorb(x: Robj, scale: Robj, householder: Robj, threads: i32) -> Robj {
    guard(|| {
        let (xv, n, k) = real_matrix(&x, "x")?;
        let s = real_slice(&scale, "scale")?;
        let v = opt_real_slice(&householder, "householder")?;
        let threads = threads_of(threads)?;
        let cols = if v.is_some() { k.saturating_sub(1) } else { k };
        let mut out = RMatrix::<f64>::new(n, cols);
        let slice = out.data_mut();
        run(threads, |_| scale_absorb_into(xv, n, k, s, v, slice))?;
        Ok(out.into_robj())
    })
}

/// Rows of a cubic regression spline basis: `x`, the smooth's knots `xp` and `F`. Returns the
/// n x nk matrix mgcv's `Predict.matrix.cr.smooth` gives, allocated once in R and filled in
/// place.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_cr_basis(x: Robj, knots: Robj, f: Robj, threads: i32) -> Robj {
    guard(|| {
        let xv = real_slice(&x, "x")?;
        let kn = real_slice(&knots, "knots")?;
        let fv = real_slice(&f, "f")?;
        let threads = threads_of(threads)?;
        let nk = kn.len();
        // Checked before the n x nk result is allocated.
        if fv.len() != nk * nk {
            return Err(NceError::invalid("f", format!("must be a {nk} x {nk} matrix")));
        }
        let mut out = RMatrix::<f64>::new(xv.len(), nk);
        let slice = out.data_mut();
        run(threads, |_| cr_basis_into(xv, kn, fv, slice))?;
        Ok(out.into_robj())
    })
}

/// Rows of a cyclic cubic spline basis: `x` within the range of `knots` (the smooth's `xp`),
/// the smooth's `BD`. Returns the n x (nk - 1) matrix mgcv's `Predict.matrix.cyclic.smooth`
/// gives, allocated once in R and filled in place.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_cc_basis(x: Robj, knots: Robj, bd: Robj, threads: i32) -> Robj {
    guard(|| {
        let xv = real_slice(&x, "x")?;
        let kn = real_slice(&knots, "knots")?;
        let (bdv, r, c) = real_matrix(&bd, "bd")?;
        let threads = threads_of(threads)?;
        let k = kn.len().saturating_sub(1);
        // Checked before the n x k result is allocated.
        if r != k || c != k {
            return Err(NceError::invalid("bd", format!("must be a {k} x {k} matrix")));
        }
        let mut out = RMatrix::<f64>::new(xv.len(), k);
        let slice = out.data_mut();
        run(threads, |_| cc_basis_into(xv, kn, bdv, slice))?;
        Ok(out.into_robj())
    })
}

/// A cubic (`kind = "cr"`: `m` is the smooth's `F`) or cyclic cubic (`"cc"`: `m` is `BD`)
/// spline basis on the rows `x` for the knots `knots`, built and held in Rust (a
/// `RowsBlock`): list(ptr, nrow, ncol, scale (ones), means, max_row_sum), the column means being mgcv's
/// sum-to-zero constraint and the largest absolute row sum `norm(X, "I")`, which scales the
/// penalty. R allocates none of the n rows.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_spline_block(kind: &str, x: Robj, knots: Robj, m: Robj, threads: i32) -> Robj {
    guard(|| {
        let xv = real_slice(&x, "x")?;
        let kn = real_slice(&knots, "knots")?;
        let mv = real_slice(&m, "m")?;
        let threads = threads_of(threads)?;
        let n = xv.len();
        let k = match kind {
            "cr" => kn.len(),
            "cc" => kn.len().saturating_sub(1),
            _ => return Err(NceError::invalid("kind", "must be \"cr\" or \"cc\"")),
        };
        if n == 0 || k == 0 || mv.len() != k * k {
            return Err(NceError::invalid(
                "m",
                format!("must be a {k} x {k} matrix, for at least one row"),
            ));
        }
        let (data, st) = run(threads, |_| {
            let mut data = vec![0.0; n * k];
            if kind == "cr" {
                cr_basis_into(xv, kn, mv, &mut data)?;
            } else {
                cc_basis_into(xv, kn, mv, &mut data)?;
            }
            let st = basis_stats(&data, n, k, false)?;
            Ok((data, st))
        })?;
        rust_block(data, n, k, st)
    })
}

/// The block behind `ptr` with its sum-to-zero constraint (LINPACK reflection `householder`)
/// absorbed in place: its new number of columns.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_block_absorb(ptr: Robj, householder: Robj) -> Robj {
    guard(|| {
        let v = real_slice(&householder, "householder")?;
        let mut ptr = ptr;
        let b = rows_block_mut(&mut ptr, "ptr")?;
        absorb_in_place(&mut b.data, b.nrow, b.ncol, v)?;
        b.ncol -= 1;
        Ok(Robj::from(b.ncol as i32))
    })
}

/// Frees the rows of the block behind `ptr` now (not when R next collects garbage).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_block_release(ptr: Robj) -> Robj {
    guard(|| {
        let mut ptr = ptr;
        // Anything else is left alone. The shape is kept, so that reading the block again is
        // refused as released.
        if let Ok(b) = rows_block_mut(&mut ptr, "ptr") {
            b.data = Vec::new();
        }
        Ok(Robj::from(()))
    })
}

/// A copy of the rows of the block behind `ptr` as an R matrix (for checks: fits read the
/// block where it lies).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_block_matrix(ptr: Robj) -> Robj {
    guard(|| {
        let b = rows_block(&ptr, "ptr")?;
        Ok(col_major_matrix(b.data.clone(), b.nrow, b.ncol))
    })
}

/// The block behind `ptr` without its columns `cols` (1-based), in place: its new number of columns.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_block_drop(ptr: Robj, cols: Robj) -> Robj {
    guard(|| {
        let mut ptr = ptr;
        let b = rows_block_mut(&mut ptr, "ptr")?;
        let drop = zero_based(&cols, "cols", b.ncol)?;
        let n = b.nrow;
        let mut kept = 0;
        for j in 0..b.ncol {
            if !drop.contains(&j) {
                b.data.copy_within(j * n..(j + 1) * n, kept * n);
                kept += 1;
            }
        }
        b.data.truncate(kept * n);
        b.ncol = kept;
        Ok(Robj::from(kept as i32))
    })
}

/// The rows `rows` (1-based) of the block behind `ptr` as an R matrix.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_block_rows(ptr: Robj, rows: Robj) -> Robj {
    guard(|| {
        let b = rows_block(&ptr, "ptr")?;
        let idx = zero_based(&rows, "rows", b.nrow)?;
        let mut out = RMatrix::<f64>::new(idx.len(), b.ncol);
        let slice = out.data_mut();
        for (j, col) in b.data.chunks_exact(b.nrow.max(1)).take(b.ncol).enumerate() {
            for (o, &i) in slice[j * idx.len()..(j + 1) * idx.len()].iter_mut().zip(&idx) {
                *o = col[i];
            }
        }
        Ok(out.into_robj())
    })
}

/// The 1-based positions of the numbers in `x` whose strings R must format before
/// `nce_print_ranks` (engine::print_order::tiny_positions), or NULL where only the strings can
/// rank them.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_tiny_positions(x: Robj) -> Robj {
    guard(|| {
        let xv = real_slice(&x, "x")?;
        Ok(tiny_positions(xv).map_or_else(
            || Robj::from(()),
            |t| t.iter().map(|&i| (i + 1) as i32).collect::<Vec<i32>>().into_robj(),
        ))
    })
}

/// Ranks of `x` in the C-locale order of its strings (engine::print_order::print_order_ranks),
/// `sci` 1-based, or NULL where the strings must decide.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_print_ranks(x: Robj, sci: Robj, sci_key: Robj, sci_erank: Robj) -> Robj {
    guard(|| {
        let xv = real_slice(&x, "x")?;
        let sci = zero_based(&sci, "sci", xv.len())?;
        let key = real_slice(&sci_key, "sci_key")?;
        let erank: Vec<u32> = int_slice(&sci_erank, "sci_erank")?
            .iter()
            .map(|&e| e.max(0) as u32)
            .collect();
        if key.len() != sci.len() || erank.len() != sci.len() {
            return Err(NceError::invalid(
                "sci_key",
                "must have one key and exponent rank per position",
            ));
        }
        Ok(print_order_ranks(xv, &sci, key, &erank).map_or_else(
            || Robj::from(()),
            |r| r.iter().map(|&v| v as i32).collect::<Vec<i32>>().into_robj(),
        ))
    })
}

/// The distinct rows of columns given by their ranks (a list of integer vectors, one per column)
/// in the order R's `order(..., method = "radix")` gives: list(first, index), both 1-based.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_unique_ranked_rows(ranks: List) -> Robj {
    guard(|| {
        let cols: Vec<Vec<u32>> = ranks
            .values()
            .map(|r| Ok(int_slice(&r, "ranks")?.iter().map(|&v| v.max(0) as u32).collect()))
            .collect::<Res<_>>()?;
        let n = cols.first().map_or(0, Vec::len);
        if cols.iter().any(|c| c.len() != n) {
            return Err(NceError::invalid("ranks", "must have one rank per row in each column"));
        }
        let refs: Vec<&[u32]> = cols.iter().map(Vec::as_slice).collect();
        let (first, index) = unique_ranked_rows(&refs, n);
        let first: Vec<i32> = first.iter().map(|&i| (i + 1) as i32).collect();
        let index: Vec<i32> = index.iter().map(|&i| i as i32).collect();
        Ok(list!(first = first, index = index).into_robj())
    })
}

/// Knots of a one-covariate spline from the distinct values of `x`: R's
/// `quantile(unique(x), probs)` (`place = FALSE`, mgcv's cr knots) or mgcv's
/// `place.knots(x, nk)` (`place = TRUE`, with `nk` = length(probs), cc knots).
/// list(knots, n_unique).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_spline_knots(x: Robj, probs: Robj, place: bool) -> Robj {
    guard(|| {
        let xv = real_slice(&x, "x")?;
        let pv = real_slice(&probs, "probs")?;
        let u = sorted_unique(xv)?;
        let knots = if place {
            place_knots(&u, pv.len())?
        } else {
            quantiles_type7(&u, pv)?
        };
        Ok(list!(knots = knots, n_unique = u.len() as f64).into_robj())
    })
}

/// The covariates `cols` (a list of double vectors) rounded to grids of `m` values:
/// list(grids, present, counts, index), `index` 1-based, or NULL where a value is not finite.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_round_to_grids(cols: List, m: i32) -> Robj {
    guard(|| {
        let robjs: Vec<Robj> = cols.values().collect();
        let views = robjs
            .iter()
            .map(|c| real_slice(c, "cols"))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(r) = round_to_grids(&views, m.max(0) as usize)? else {
            return Ok(Robj::from(()));
        };
        let grids = List::from_values(r.grids);
        let counts: Vec<f64> = r.counts.iter().map(|&c| c as f64).collect();
        let index: Vec<i32> = r.index.iter().map(|&i| i as i32 + 1).collect();
        Ok(list!(grids = grids, present = r.present, counts = counts, index = index).into_robj())
    })
}

extendr_module! {
    mod basis;
    fn nce_spline_block;
    fn nce_block_absorb;
    fn nce_block_release;
    fn nce_block_matrix;
    fn nce_block_rows;
    fn nce_tiny_positions;
    fn nce_print_ranks;
    fn nce_unique_ranked_rows;
    fn nce_block_drop;
    fn nce_spline_knots;
    fn nce_round_to_grids;
    fn nce_cc_basis;
    fn nce_cr_basis;
    fn nce_tprs_predict;
    fn nce_tprs_block;
    fn nce_tprs_eigen;
    fn nce_tprs_e;
    fn nce_basis_stats;
    fn nce_scale_absorb;
}
