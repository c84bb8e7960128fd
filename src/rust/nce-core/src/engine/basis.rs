//! Smooth bases evaluated on data rows, and the thin-plate set-up: the pieces of mgcv's
//! `construct_tprs`/`predict_tprs` (Wood 2003) that cost time on many rows or many unique
//! points. The R layer assembles mgcv's smooth object from them, so `PredictMat()` stays valid.
//!
//! Matrices are column-major slices, as R stores them.

use crate::error::{NceError, Result};
use nalgebra::{DMatrix, SymmetricEigen};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// The order of the thin-plate penalty mgcv uses for `m` in `d` dimensions: `m` itself when
/// 2m > d, else the smallest m with 2m > d + 1 (mgcv's tprs.c).
pub fn tprs_order(m: usize, d: usize) -> usize {
    if 2 * m > d {
        m
    } else {
        let mut m = 0;
        while 2 * m < d + 2 {
            m += 1;
        }
        m
    }
}

/// Powers of the M polynomials spanning the penalty's null space, in mgcv's order
/// (gen_tps_poly_powers): polynomial j is prod_l x_l^powers[j][l].
pub fn tprs_powers(m: usize, d: usize) -> Vec<Vec<usize>> {
    let mut n_poly = 1usize;
    for i in 0..d {
        n_poly *= d + m - 1 - i;
    }
    for i in 2..=d {
        n_poly /= i;
    }
    let mut index = vec![0usize; d];
    let mut out = Vec::with_capacity(n_poly);
    for _ in 0..n_poly {
        out.push(index.clone());
        let mut sum: usize = index.iter().sum();
        if sum < m - 1 {
            index[0] += 1;
        } else {
            sum -= index[0];
            index[0] = 0;
            for j in 1..d {
                index[j] += 1;
                sum += 1;
                if sum == m {
                    sum -= index[j];
                    index[j] = 0;
                } else {
                    break;
                }
            }
        }
    }
    out
}

/// The thin-plate radial function eta(r) of mgcv (order m, dimension d), as a function of r^2.
#[derive(Clone, Copy, Debug)]
pub struct Eta {
    factor: f64,
    power: i32,
    even: bool,
}

impl Eta {
    pub fn new(m: usize, d: usize) -> Result<Self> {
        if 2 * m <= d || d == 0 {
            return Err(NceError::invalid("m", "a thin-plate spline needs 2m > d"));
        }
        let pi = std::f64::consts::PI;
        let (m_i, d_i) = (m as i64, d as i64);
        let even = d % 2 == 0;
        let mut f;
        if even {
            f = if (m_i + 1 + d_i / 2) % 2 != 0 { -1.0 } else { 1.0 };
            for _ in 0..(2 * m - 1) {
                f /= 2.0;
            }
            for _ in 0..d / 2 {
                f /= pi;
            }
            for i in 2..m {
                f /= i as f64;
            }
            for i in 2..=(m - d / 2) {
                f /= i as f64;
            }
        } else {
            let ghalf = pi.sqrt();
            f = ghalf;
            let k = m_i - (d_i - 1) / 2;
            for i in 0..k {
                f /= -0.5 - i as f64;
            }
            for _ in 0..m {
                f /= 4.0;
            }
            for _ in 0..d / 2 {
                f /= pi;
            }
            f /= ghalf;
            for i in 2..m {
                f /= i as f64;
            }
        }
        Ok(Eta {
            factor: f,
            power: (2 * m - d) as i32,
            even,
        })
    }

    /// eta at squared distance `r2` (0 at r = 0, as mgcv).
    #[inline]
    pub fn of_r2(&self, r2: f64) -> f64 {
        if r2 <= 0.0 {
            return 0.0;
        }
        if self.even {
            // log(r) r^(2m-d) with 2m-d even: r^(2m-d) = (r^2)^((2m-d)/2).
            self.factor * 0.5 * r2.ln() * r2.powi(self.power / 2)
        } else {
            self.factor * r2.sqrt().powi(self.power)
        }
    }
}

fn check_points(x: &[f64], n: usize, d: usize, arg: &str) -> Result<()> {
    if d == 0 || x.len() != n * d {
        return Err(NceError::invalid(arg, format!("must be a {n} x {d} matrix")));
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(NceError::invalid(arg, "must hold finite values"));
    }
    Ok(())
}

/// The polynomial null-space matrix T (n x M, column-major) of points `x` (n x d).
pub fn tprs_poly(x: &[f64], n: usize, d: usize, m: usize) -> Vec<f64> {
    let powers = tprs_powers(m, d);
    let mm = powers.len();
    let mut t = vec![1.0; n * mm];
    for (j, pw) in powers.iter().enumerate() {
        for i in 0..n {
            let mut v = 1.0;
            for l in 0..d {
                for _ in 0..pw[l] {
                    v *= x[l * n + i];
                }
            }
            t[j * n + i] = v;
        }
    }
    t
}

/// Rows of the thin-plate basis at points `x` (n x d, already shifted as the smooth's
/// `shift`), given mgcv's `Xu` (nu x d unique knots, shifted) and `UZ` ((nu + M) x k): row i is
/// b_i' UZ with b_i = (eta(|x_i - Xu_j|), j = 1..nu; the M null-space polynomials at x_i), as
/// mgcv's predict_tprs. Returns n x k, column-major. Rows are done in blocks, one matrix
/// product per block, blocks in parallel (the result does not depend on the thread count).
pub fn tprs_predict(
    x: &[f64],
    n: usize,
    d: usize,
    m: usize,
    xu: &[f64],
    nu: usize,
    uz: &[f64],
    k: usize,
) -> Result<Vec<f64>> {
    check_points(x, n, d, "x")?;
    check_points(xu, nu, d, "Xu")?;
    let m = tprs_order(m, d);
    let eta = Eta::new(m, d)?;
    let powers = tprs_powers(m, d);
    let mm = powers.len();
    if uz.len() != (nu + mm) * k {
        return Err(NceError::invalid("UZ", format!("must be a {} x {k} matrix", nu + mm)));
    }
    let uzm = DMatrix::from_column_slice(nu + mm, k, uz);
    const BLOCK: usize = 256;
    let blocks: Vec<DMatrix<f64>> = (0..n.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let lo = b * BLOCK;
            let hi = (lo + BLOCK).min(n);
            let nb = hi - lo;
            // B' (nu + M) x nb, so each row's entries are contiguous.
            let mut bt = DMatrix::<f64>::zeros(nu + mm, nb);
            let mut xi = vec![0.0; d];
            for (c, i) in (lo..hi).enumerate() {
                for l in 0..d {
                    xi[l] = x[l * n + i];
                }
                let mut colv = bt.column_mut(c);
                let col = colv.as_mut_slice();
                if d == 2 {
                    let (x0, x1) = (xi[0], xi[1]);
                    let (u0, u1) = (&xu[..nu], &xu[nu..2 * nu]);
                    for j in 0..nu {
                        let a = x0 - u0[j];
                        let b = x1 - u1[j];
                        col[j] = eta.of_r2(a * a + b * b);
                    }
                } else {
                    for j in 0..nu {
                        let mut r2 = 0.0;
                        for l in 0..d {
                            let z = xi[l] - xu[l * nu + j];
                            r2 += z * z;
                        }
                        col[j] = eta.of_r2(r2);
                    }
                }
                for (p, pw) in powers.iter().enumerate() {
                    let mut v = 1.0;
                    for l in 0..d {
                        for _ in 0..pw[l] {
                            v *= xi[l];
                        }
                    }
                    col[nu + p] = v;
                }
            }
            bt.transpose() * &uzm
        })
        .collect();
    let mut out = vec![0.0; n * k];
    for (b, blk) in blocks.iter().enumerate() {
        let lo = b * BLOCK;
        for j in 0..k {
            for r in 0..blk.nrows() {
                out[j * n + lo + r] = blk[(r, j)];
            }
        }
    }
    Ok(out)
}

/// The thin-plate matrix E (nu x nu) of the points `xu`: E_ij = eta(|xu_i - xu_j|).
pub fn tprs_e(xu: &[f64], nu: usize, d: usize, m: usize) -> Result<DMatrix<f64>> {
    check_points(xu, nu, d, "Xu")?;
    let eta = Eta::new(tprs_order(m, d), d)?;
    let mut e = DMatrix::<f64>::zeros(nu, nu);
    e.as_mut_slice().par_chunks_mut(nu).enumerate().for_each(|(j, col)| {
        for i in 0..nu {
            let mut r2 = 0.0;
            for l in 0..d {
                let z = xu[l * nu + i] - xu[l * nu + j];
                r2 += z * z;
            }
            col[i] = eta.of_r2(r2);
        }
    });
    Ok(e)
}

/// E * V with the columns of V split over the pool's threads.
fn sym_times(e: &DMatrix<f64>, v: &DMatrix<f64>) -> DMatrix<f64> {
    let nc = v.ncols();
    let chunk = 8usize;
    let parts: Vec<DMatrix<f64>> = (0..nc.div_ceil(chunk))
        .into_par_iter()
        .map(|c| {
            let lo = c * chunk;
            let w = (lo + chunk).min(nc) - lo;
            e * v.columns(lo, w)
        })
        .collect();
    let mut out = DMatrix::<f64>::zeros(e.nrows(), nc);
    for (c, p) in parts.iter().enumerate() {
        out.columns_mut(c * chunk, p.ncols()).copy_from(p);
    }
    out
}

/// The `k` eigenpairs of largest magnitude of the symmetric matrix `e`, eigenvalues in
/// decreasing order of magnitude... as mgcv's `lanczos_spd(E, U, v, k, -1)` keeps them, by a
/// block Krylov method with full reorthogonalisation and Rayleigh-Ritz (matrix-matrix products
/// instead of Lanczos' matrix-vector ones). Converged when every kept Ritz pair has residual
/// |E u - theta u| <= `tol` |theta_1|. Small matrices are decomposed in full. The start block is
/// a fixed pseudo-random one, so results do not depend on the thread count.
/// Returns (values in decreasing order, as mgcv orders them, U nu x k).
pub fn top_eigen(e: &DMatrix<f64>, k: usize, tol: f64) -> Result<(Vec<f64>, DMatrix<f64>)> {
    let n = e.nrows();
    if k == 0 || k > n {
        return Err(NceError::invalid("k", format!("must be in 1..{n}")));
    }
    let pick = |vals: &[f64]| -> Vec<usize> {
        let mut idx: Vec<usize> = (0..vals.len()).collect();
        idx.sort_by(|&a, &b| {
            vals[b]
                .abs()
                .partial_cmp(&vals[a].abs())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        idx.truncate(k);
        // mgcv returns the kept values in decreasing order (signed).
        idx.sort_by(|&a, &b| vals[b].partial_cmp(&vals[a]).unwrap_or(std::cmp::Ordering::Equal));
        idx
    };
    let full = |e: &DMatrix<f64>| -> (Vec<f64>, DMatrix<f64>) {
        let se = SymmetricEigen::new(e.clone());
        let idx = pick(se.eigenvalues.as_slice());
        let vals = idx.iter().map(|&i| se.eigenvalues[i]).collect();
        let mut u = DMatrix::zeros(n, k);
        for (c, &i) in idx.iter().enumerate() {
            u.set_column(c, &se.eigenvectors.column(i));
        }
        (vals, u)
    };
    let b = (k + 10).min(n);
    if n <= 4 * b || n <= 200 {
        return Ok(full(e));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(0x7470_7273);
    let mut v = DMatrix::<f64>::from_fn(n, b, |_, _| rng.gen::<f64>() - 0.5);
    v = v.qr().q();
    let mut q = DMatrix::<f64>::zeros(n, 0);
    let mut eq = DMatrix::<f64>::zeros(n, 0);
    let max_dim = n.min(40 * b);
    loop {
        let w = sym_times(e, &v);
        let s0 = q.ncols();
        let s = s0 + v.ncols();
        q = q.resize_horizontally(s, 0.0);
        q.columns_mut(s0, v.ncols()).copy_from(&v);
        eq = eq.resize_horizontally(s, 0.0);
        eq.columns_mut(s0, v.ncols()).copy_from(&w);
        let mut t = q.transpose() * &eq;
        t = (&t + t.transpose()) * 0.5;
        let se = SymmetricEigen::new(t);
        let idx = pick(se.eigenvalues.as_slice());
        let mut y = DMatrix::<f64>::zeros(s, k);
        for (c, &i) in idx.iter().enumerate() {
            y.set_column(c, &se.eigenvectors.column(i));
        }
        let vals: Vec<f64> = idx.iter().map(|&i| se.eigenvalues[i]).collect();
        let u = &q * &y;
        let eu = &eq * &y;
        let scale = vals.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let mut worst = 0.0f64;
        for c in 0..k {
            let r = (eu.column(c) - u.column(c) * vals[c]).norm();
            worst = worst.max(r);
        }
        if worst <= tol * scale {
            return Ok((vals, u));
        }
        if s + b > max_dim {
            if n <= 3000 {
                return Ok(full(e));
            }
            return Err(NceError::Numerical(format!(
                "the thin-plate eigen-decomposition did not converge (residual {:.3e} of {:.3e})",
                worst, scale
            )));
        }
        // Next block: E V orthogonalised against the basis so far (twice, for stability).
        let mut nv = w;
        for _ in 0..2 {
            let c = q.transpose() * &nv;
            nv -= &q * c;
        }
        let qr = nv.qr();
        let rdiag = qr.r().diagonal();
        let rmax = rdiag.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        if rmax <= 1e-13 * scale.max(1e-300) {
            // Krylov space exhausted: the basis is invariant, so the Ritz pairs are exact.
            return Ok((vals, u));
        }
        v = qr.q();
        // Re-orthogonalise the new block once more against the basis.
        let c = q.transpose() * &v;
        v -= &q * c;
        v = v.qr().q();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..2 * n).map(|_| rng.gen::<f64>() - 0.5).collect()
    }

    #[test]
    fn powers_follow_mgcv() {
        assert_eq!(tprs_powers(2, 2), vec![vec![0, 0], vec![1, 0], vec![0, 1]]);
        assert_eq!(tprs_powers(2, 1), vec![vec![0], vec![1]]);
        assert_eq!(tprs_order(0, 2), 2);
        assert_eq!(tprs_order(0, 3), 3);
    }

    #[test]
    fn eta_matches_closed_form() {
        // d = 2, m = 2: r^2 log(r) / (8 pi).
        let eta = Eta::new(2, 2).unwrap();
        let r: f64 = 0.7;
        let want = r * r * r.ln() / (8.0 * std::f64::consts::PI);
        assert!((eta.of_r2(r * r) - want).abs() < 1e-15);
        // d = 1, m = 2: Gamma(-3/2) / (16 Gamma(1/2)) |r|^3 = |r|^3 / 12.
        let eta = Eta::new(2, 1).unwrap();
        assert!((eta.of_r2(r * r) - r.powi(3) / 12.0).abs() < 1e-15);
        assert_eq!(eta.of_r2(0.0), 0.0);
    }

    #[test]
    fn top_eigen_matches_full_decomposition() {
        let n = 600;
        let xu = points(n, 3);
        let e = tprs_e(&xu, n, 2, 2).unwrap();
        let (vals, u) = top_eigen(&e, 30, 1e-12).unwrap();
        let se = SymmetricEigen::new(e.clone());
        let mut all: Vec<f64> = se.eigenvalues.iter().copied().collect();
        all.sort_by(|a, b| b.abs().partial_cmp(&a.abs()).unwrap());
        let mut want: Vec<f64> = all[..30].to_vec();
        want.sort_by(|a, b| b.partial_cmp(a).unwrap());
        for (a, b) in vals.iter().zip(want.iter()) {
            assert!((a - b).abs() < 1e-10 * want[0].abs().max(1.0), "{a} vs {b}");
        }
        // Orthonormal eigenvectors with small residuals.
        let utu = u.transpose() * &u;
        assert!((utu - DMatrix::<f64>::identity(30, 30)).amax() < 1e-10);
        let r = &e * &u - &u * DMatrix::from_diagonal(&nalgebra::DVector::from_vec(vals.clone()));
        assert!(r.amax() < 1e-9 * vals[0].abs());
    }

    #[test]
    fn predict_matches_direct_sum() {
        let nu = 50;
        let xu = points(nu, 5);
        let n = 700;
        let x = points(n, 6);
        let k = 7;
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let uz: Vec<f64> = (0..(nu + 3) * k).map(|_| rng.gen::<f64>()).collect();
        let got = tprs_predict(&x, n, 2, 2, &xu, nu, &uz, k).unwrap();
        let eta = Eta::new(2, 2).unwrap();
        for i in [0usize, 255, 256, 699] {
            let mut b = Vec::new();
            for j in 0..nu {
                let r2 = (x[i] - xu[j]).powi(2) + (x[n + i] - xu[nu + j]).powi(2);
                b.push(eta.of_r2(r2));
            }
            b.extend([1.0, x[i], x[n + i]]);
            for c in 0..k {
                let want: f64 = (0..nu + 3).map(|l| b[l] * uz[c * (nu + 3) + l]).sum();
                assert!((got[c * n + i] - want).abs() < 1e-12 * (1.0 + want.abs()));
            }
        }
    }

    #[test]
    fn refuses_bad_input() {
        assert!(tprs_predict(&[f64::NAN, 0.0], 1, 2, 2, &[0.0, 0.0], 1, &[0.0; 4], 1).is_err());
        assert!(Eta::new(1, 2).is_err());
    }
}
