//! A smooth's basis on many rows made ready for the model matrix: mgcv's column scaling of
//! thin-plate bases and the sum-to-zero constraint that `smoothCon(absorb.cons = TRUE)`
//! absorbs. mgcv absorbs it by `qr.qty()` on the transposed basis, a pass that on ~40,000 rows
//! costs as much as building the basis; here it is one rank-one update per row.
//!
//! Matrices are column-major slices, as R stores them.

use crate::error::{NceError, Result};
use rayon::prelude::*;

/// What mgcv's set-up reads from a basis before absorbing its constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct BasisStats {
    /// The column divisors (root mean squares with `rms_scale`, else ones).
    pub scale: Vec<f64>,
    /// Column means of the scaled basis: mgcv's sum-to-zero constraint `C`.
    pub means: Vec<f64>,
    /// The largest absolute row sum of the scaled basis: `norm(X, "I")`, which scales penalties.
    pub max_row_sum: f64,
}

fn check_basis(x: &[f64], n: usize, k: usize) -> Result<()> {
    if n == 0 || k == 0 {
        return Err(NceError::invalid("x", "must have at least one row and one column"));
    }
    if x.len() != n * k {
        return Err(NceError::invalid("x", format!("must be a {n} x {k} matrix")));
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(NceError::invalid("x", "must be finite"));
    }
    Ok(())
}

/// A constraint's reflection for a basis of `k` columns: `k` finite numbers, `k` >= 2.
fn check_householder(v: &[f64], k: usize) -> Result<()> {
    if v.len() != k || v.iter().any(|e| !e.is_finite()) {
        return Err(NceError::invalid("householder", format!("must be {k} finite numbers")));
    }
    if k < 2 {
        return Err(NceError::invalid(
            "x",
            "must have at least two columns to absorb a constraint",
        ));
    }
    Ok(())
}

/// Column divisors, column means and largest absolute row sum of an n x k basis. With
/// `rms_scale`, each column is first divided by its root mean square over the rows, as
/// mgcv's tprs_setup() scales thin-plate bases (a zero column keeps divisor 1).
pub fn basis_stats(x: &[f64], n: usize, k: usize, rms_scale: bool) -> Result<BasisStats> {
    check_basis(x, n, k)?;
    let scale: Vec<f64> = x
        .chunks_exact(n)
        .map(|col| {
            if !rms_scale {
                return 1.0;
            }
            let r = (col.iter().map(|v| v * v).sum::<f64>() / n as f64).sqrt();
            if r > 0.0 {
                r
            } else {
                1.0
            }
        })
        .collect();
    let means = x
        .chunks_exact(n)
        .zip(&scale)
        .map(|(col, s)| col.iter().map(|v| v / s).sum::<f64>() / n as f64)
        .collect();
    let mut row_sums = vec![0.0; n];
    for (col, s) in x.chunks_exact(n).zip(&scale) {
        for (r, v) in row_sums.iter_mut().zip(col) {
            *r += (v / s).abs();
        }
    }
    let max_row_sum = row_sums.iter().fold(0.0, |a: f64, &b| a.max(b));
    Ok(BasisStats {
        scale,
        means,
        max_row_sum,
    })
}

/// The basis with its columns divided by `scale` and, given `householder`, the constraint
/// absorbed: `t(qr.qty(qrc, t(X / scale)))[, -1]` for `qrc <- qr(t(C))` with one constraint row,
/// whose reflection LINPACK stores as `v = c(qrc$qraux[1], qrc$qr[-1, 1])`: each row x becomes
/// x - (x'v / v_1) v without its first element (n x (k - 1)). A zero `v_1` (a zero constraint)
/// leaves the rows unreflected, as LINPACK's `dqrsl` does. Without `householder`, the scaled
/// basis (n x k). Columns are done in parallel; each is the same whatever the thread count.
pub fn scale_absorb(x: &[f64], n: usize, k: usize, scale: &[f64], householder: Option<&[f64]>) -> Result<Vec<f64>> {
    let cols = if householder.is_some() { k.saturating_sub(1) } else { k };
    let mut out = vec![0.0; n * cols];
    scale_absorb_into(x, n, k, scale, householder, &mut out)?;
    Ok(out)
}

/// The basis `x` (n x k) with its columns divided by `scale`, in place (the values
/// `scale_absorb` gives without a constraint). Columns are done in parallel.
pub fn scale_in_place(x: &mut [f64], n: usize, k: usize, scale: &[f64]) -> Result<()> {
    check_basis(x, n, k)?;
    if scale.len() != k || scale.iter().any(|s| !s.is_finite() || *s <= 0.0) {
        return Err(NceError::invalid("scale", format!("must be {k} positive numbers")));
    }
    x.par_chunks_mut(n.max(1)).zip(scale.par_iter()).for_each(|(col, s)| {
        if *s != 1.0 {
            col.iter_mut().for_each(|e| *e /= s);
        }
    });
    Ok(())
}

/// `scale_absorb` into `out` (n x k, or n x (k - 1) with `householder`), e.g. a matrix
/// allocated by the caller. A column scale of 1 divides nothing (the same values).
pub fn scale_absorb_into(
    x: &[f64],
    n: usize,
    k: usize,
    scale: &[f64],
    householder: Option<&[f64]>,
    out: &mut [f64],
) -> Result<()> {
    check_basis(x, n, k)?;
    if scale.len() != k || scale.iter().any(|s| !s.is_finite() || *s <= 0.0) {
        return Err(NceError::invalid("scale", format!("must be {k} positive numbers")));
    }
    if let Some(v) = householder {
        check_householder(v, k)?;
    }
    let cols = if householder.is_some() { k - 1 } else { k };
    if out.len() != n * cols {
        return Err(NceError::invalid("out", format!("must hold {n} x {cols} values")));
    }
    let Some(v) = householder else {
        out.par_chunks_mut(n.max(1))
            .zip(x.par_chunks(n.max(1)))
            .zip(scale.par_iter())
            .for_each(|((o, col), s)| {
                if *s == 1.0 {
                    o.copy_from_slice(col);
                } else {
                    o.iter_mut().zip(col).for_each(|(o, e)| *o = e / s);
                }
            });
        return Ok(());
    };
    // t_i = (x_i' v) / v_1, the multiple of v each row loses.
    let mut t = vec![0.0; n];
    if v[0] != 0.0 {
        for ((col, s), vj) in x.chunks_exact(n).zip(scale).zip(v) {
            if *s == 1.0 {
                t.iter_mut().zip(col).for_each(|(ti, e)| *ti += e * vj);
            } else {
                t.iter_mut().zip(col).for_each(|(ti, e)| *ti += e / s * vj);
            }
        }
        for ti in t.iter_mut() {
            *ti /= v[0];
        }
    }
    out.par_chunks_mut(n.max(1)).enumerate().for_each(|(j, col)| {
        let src = &x[(j + 1) * n..(j + 2) * n];
        let (s, vj) = (scale[j + 1], v[j + 1]);
        if s == 1.0 {
            col.iter_mut()
                .zip(src)
                .zip(&t)
                .for_each(|((o, e), ti)| *o = e - ti * vj);
        } else {
            col.iter_mut()
                .zip(src)
                .zip(&t)
                .for_each(|((o, e), ti)| *o = e / s - ti * vj);
        }
    });
    Ok(())
}

/// The sum-to-zero constraint absorbed in place: as `scale_absorb_into` with unit scales (the
/// same operations, so the same values), each column j overwritten by column j + 1 less its
/// reflection, and the buffer cut to n x (k - 1). No second copy of the basis is held.
pub fn absorb_in_place(x: &mut Vec<f64>, n: usize, k: usize, v: &[f64]) -> Result<()> {
    check_basis(x, n, k)?;
    check_householder(v, k)?;
    let mut t = vec![0.0; n];
    if v[0] != 0.0 {
        for (col, vj) in x.chunks_exact(n).zip(v) {
            t.iter_mut().zip(col).for_each(|(ti, e)| *ti += e * vj);
        }
        for ti in t.iter_mut() {
            *ti /= v[0];
        }
    }
    for j in 0..k - 1 {
        let (head, tail) = x.split_at_mut((j + 1) * n);
        let vj = v[j + 1];
        head[j * n..]
            .iter_mut()
            .zip(&tail[..n])
            .zip(&t)
            .for_each(|((o, e), ti)| *o = e - ti * vj);
    }
    x.truncate(n * (k - 1));
    x.shrink_to_fit();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // LINPACK's dqrdc2 on the single column c: v = c / (sign(c_1) |c|), v_1 + 1 stored as qraux.
    fn householder_of(c: &[f64]) -> Vec<f64> {
        let nrm = c.iter().map(|e| e * e).sum::<f64>().sqrt().copysign(c[0]);
        let mut v: Vec<f64> = c.iter().map(|e| e / nrm).collect();
        v[0] += 1.0;
        v
    }

    fn basis(n: usize, k: usize) -> Vec<f64> {
        (0..n * k)
            .map(|i| ((i * 7919) % 613) as f64 / 97.0 - 2.0 + (i % k) as f64)
            .collect()
    }

    #[test]
    fn stats_scale_to_unit_root_mean_square() {
        let (n, k) = (50, 4);
        let x = basis(n, k);
        let st = basis_stats(&x, n, k, true).unwrap();
        for (j, col) in x.chunks_exact(n).enumerate() {
            let rms = (col.iter().map(|v| (v / st.scale[j]).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert!((rms - 1.0).abs() < 1e-14);
            let mean = col.iter().sum::<f64>() / n as f64 / st.scale[j];
            assert!((mean - st.means[j]).abs() < 1e-14);
        }
        let plain = basis_stats(&x, n, k, false).unwrap();
        assert!(plain.scale.iter().all(|s| *s == 1.0));
        let max_row = (0..n)
            .map(|i| (0..k).map(|j| x[j * n + i].abs()).sum::<f64>())
            .fold(0.0, f64::max);
        assert_eq!(plain.max_row_sum, max_row);
    }

    #[test]
    fn absorbed_basis_is_centred_and_spans_the_constrained_space() {
        let (n, k) = (60, 5);
        let x = basis(n, k);
        let st = basis_stats(&x, n, k, true).unwrap();
        let v = householder_of(&st.means);
        let xz = scale_absorb(&x, n, k, &st.scale, Some(&v)).unwrap();
        // Centred: every column of X Z sums to zero, since C Z = 0.
        for col in xz.chunks_exact(n) {
            assert!(col.iter().sum::<f64>().abs() < 1e-11);
        }
        // Against the explicit product X diag(1/s) H[, -1] with H = I - v v' / v_1.
        for i in 0..n {
            for j in 1..k {
                let mut e = 0.0;
                for l in 0..k {
                    let h = f64::from(u8::from(l == j)) - v[l] * v[j] / v[0];
                    e += x[l * n + i] / st.scale[l] * h;
                }
                assert!((xz[(j - 1) * n + i] - e).abs() < 1e-12);
            }
        }
        let scaled = scale_absorb(&x, n, k, &st.scale, None).unwrap();
        assert_eq!(scaled[3 * n + 7], x[3 * n + 7] / st.scale[3]);
    }

    #[test]
    fn thread_count_does_not_change_the_result() {
        let (n, k) = (5000, 6);
        let x = basis(n, k);
        let st = basis_stats(&x, n, k, false).unwrap();
        let v = householder_of(&st.means);
        let run = |t: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| scale_absorb(&x, n, k, &st.scale, Some(&v)).unwrap())
        };
        assert_eq!(run(1), run(2));
    }

    #[test]
    fn absorbing_in_place_gives_the_copying_result() {
        let (n, k) = (70, 6);
        let x = basis(n, k);
        let st = basis_stats(&x, n, k, false).unwrap();
        let v = householder_of(&st.means);
        let copied = scale_absorb(&x, n, k, &st.scale, Some(&v)).unwrap();
        let mut inplace = x.clone();
        absorb_in_place(&mut inplace, n, k, &v).unwrap();
        assert_eq!(inplace, copied);
        let mut short = vec![1.0; n];
        assert!(absorb_in_place(&mut short, n, 1, &[1.0]).is_err());
    }

    #[test]
    fn refuses_bad_input() {
        assert!(basis_stats(&[1.0, f64::NAN], 2, 1, false).is_err());
        assert!(basis_stats(&[1.0, 2.0], 3, 1, false).is_err());
        assert!(scale_absorb(&[1.0, 2.0], 1, 2, &[1.0, 0.0], None).is_err());
        assert!(scale_absorb(&[1.0, 2.0], 1, 2, &[1.0, 1.0], Some(&[1.0])).is_err());
        assert!(scale_absorb(&[1.0], 1, 1, &[1.0], Some(&[1.0])).is_err());
    }
}
