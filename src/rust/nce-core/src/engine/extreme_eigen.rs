//! A few eigenpairs of largest magnitude of a dense symmetric matrix of a few hundred rows: the
//! Rayleigh-Ritz step of the thin-plate set-up's block Krylov solver (`basis::top_eigen`).
//! A full decomposition accumulates every rotation of the QR iteration into all n eigenvectors
//! (about 6 n^3 flops); here the matrix is reduced to tridiagonal form once (Householder), the
//! wanted eigenvalues are found by bisection (Sturm counts, O(n) each step), their eigenvectors
//! by inverse iteration on the tridiagonal matrix, and only those k vectors are taken back
//! through the reflectors: at n = 320 and k = 30, 11-15 ms against nalgebra's 40-50 ms.

use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The `k` eigenpairs of largest magnitude of the symmetric matrix `a`, values in decreasing
/// (signed) order with their unit eigenvectors as columns. Eigenvalues are accurate to about
/// eps ||a||, as a full decomposition's; vectors of eigenvalues closer than 1e-3 ||a|| are
/// orthogonalised against each other (LAPACK `dstein`'s rule). None for a non-finite matrix or
/// when k is 0 or above its order.
pub fn extreme_eigen(a: &DMatrix<f64>, k: usize) -> Option<(Vec<f64>, DMatrix<f64>)> {
    let n = a.nrows();
    if k == 0 || k > n || a.ncols() != n || a.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let tri = Tridiagonal::new(a.clone());
    let norm = tri.norm();
    if norm == 0.0 {
        let mut z = DMatrix::zeros(n, k);
        for c in 0..k {
            z[(c, c)] = 1.0;
        }
        return Some((vec![0.0; k], z));
    }
    // The candidates: the k smallest and the k largest eigenvalues (ascending index), of which
    // the k largest in magnitude are kept.
    let mut idx: Vec<usize> = (0..k).chain(n - k..n).collect();
    idx.sort_unstable();
    idx.dedup();
    let candidates = tri.eigenvalues(&idx, norm);
    let vals: Vec<f64> = largest_magnitude(&candidates, k)
        .iter()
        .map(|&i| candidates[i])
        .collect();
    let z = tri.eigenvectors(&vals, norm);
    Some((vals, tri.back_transform(z)))
}

/// The positions of the `k` values of largest magnitude in `vals`, ordered by decreasing value
/// (signed), as mgcv keeps a thin-plate term's eigenvalues.
pub(crate) fn largest_magnitude(vals: &[f64], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..vals.len()).collect();
    idx.sort_by(|&a, &b| {
        vals[b]
            .abs()
            .partial_cmp(&vals[a].abs())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    idx.truncate(k);
    idx.sort_by(|&a, &b| vals[b].partial_cmp(&vals[a]).unwrap_or(std::cmp::Ordering::Equal));
    idx
}

/// A symmetric matrix reduced to tridiagonal form Q' A Q by Householder reflectors (LAPACK
/// `dsytd2`, lower): the diagonal, the subdiagonal and the reflectors.
struct Tridiagonal {
    diag: Vec<f64>,
    sub: Vec<f64>,
    /// Reflector j (column j, rows j+1..) is I - tau_j v v' with v = (1, v_{j+2}, ...).
    refl: DMatrix<f64>,
    tau: Vec<f64>,
}

impl Tridiagonal {
    fn new(mut a: DMatrix<f64>) -> Self {
        let n = a.nrows();
        let mut tau = vec![0.0; n.saturating_sub(1)];
        let mut p = vec![0.0; n];
        for j in 0..n.saturating_sub(2) {
            let m = n - j - 1;
            // The reflector that zeroes a[j+2.., j]; its v[1..] stays there for the
            // back-transform (nothing below writes column j).
            let (beta, t) = {
                let x = &mut a.column_mut(j);
                let col = &mut x.as_mut_slice()[j + 1..];
                householder(col)
            };
            tau[j] = t;
            if t == 0.0 {
                continue;
            }
            let v: Vec<f64> = a.column(j).as_slice()[j + 1..].to_vec();
            a[(j + 1, j)] = beta;
            // p = tau A22 v (A22 full, symmetric), then w = p - (tau/2)(p'v) v.
            let p = &mut p[..m];
            p.iter_mut().for_each(|x| *x = 0.0);
            for (c, &vc) in v.iter().enumerate() {
                let col = &a.as_slice()[(j + 1 + c) * n + j + 1..(j + 2 + c) * n];
                let s = t * vc;
                for (pi, &ai) in p.iter_mut().zip(col) {
                    *pi += ai * s;
                }
            }
            let pv: f64 = p.iter().zip(&v).map(|(x, y)| x * y).sum();
            let half = 0.5 * t * pv;
            for (pi, &vi) in p.iter_mut().zip(&v) {
                *pi -= half * vi;
            }
            // A22 -= v w' + w v'.
            for c in 0..m {
                let (vc, wc) = (v[c], p[c]);
                let col = &mut a.column_mut(j + 1 + c);
                let col = &mut col.as_mut_slice()[j + 1..];
                for ((ai, &vi), &wi) in col.iter_mut().zip(&v).zip(p.iter()) {
                    *ai -= vi * wc + wi * vc;
                }
            }
        }
        let diag = (0..n).map(|i| a[(i, i)]).collect();
        let sub = (0..n.saturating_sub(1)).map(|i| a[(i + 1, i)]).collect();
        Tridiagonal {
            diag,
            sub,
            refl: a,
            tau,
        }
    }

    /// The largest row sum of absolute values (a bound on every eigenvalue's magnitude).
    fn norm(&self) -> f64 {
        let n = self.diag.len();
        (0..n)
            .map(|i| {
                let lo = if i > 0 { self.sub[i - 1].abs() } else { 0.0 };
                let hi = if i + 1 < n { self.sub[i].abs() } else { 0.0 };
                self.diag[i].abs() + lo + hi
            })
            .fold(0.0, f64::max)
    }

    /// The eigenvalues of ascending indices `idx`, by bisection on Sturm counts (the signs of
    /// the LDL' pivots of T - x I, with LAPACK `dstebz`'s guard against a zero pivot), all
    /// bisections in step so that their divisions overlap, each to a few ulp of its size plus
    /// eps `norm` (the accuracy of any backward-stable method).
    fn eigenvalues(&self, idx: &[usize], norm: f64) -> Vec<f64> {
        let n = self.diag.len();
        let m = idx.len();
        let pivmin = f64::MIN_POSITIVE * norm.max(1.0);
        let e2: Vec<f64> = self.sub.iter().map(|v| v * v).collect();
        let bound = norm * (1.0 + 4.0 * f64::EPSILON);
        let (mut lo, mut hi) = (vec![-bound; m], vec![bound; m]);
        let mut x = vec![0.0; m];
        let mut q = vec![0.0; m];
        let mut below = vec![0usize; m];
        // Each round halves every interval; 2^-1100 is below the smallest double.
        for _ in 0..1100 {
            let mut open = false;
            for s in 0..m {
                x[s] = 0.5 * (lo[s] + hi[s]);
                let width = f64::EPSILON * (2.0 * lo[s].abs().max(hi[s].abs()) + norm);
                open |= x[s] > lo[s] && x[s] < hi[s] && hi[s] - lo[s] > width;
            }
            if !open {
                break;
            }
            below.iter_mut().for_each(|c| *c = 0);
            for i in 0..n {
                for s in 0..m {
                    let prev = if i == 0 { 0.0 } else { e2[i - 1] / q[s] };
                    let mut v = self.diag[i] - x[s] - prev;
                    if v.abs() < pivmin {
                        v = -pivmin;
                    }
                    q[s] = v;
                    below[s] += usize::from(v < 0.0);
                }
            }
            for s in 0..m {
                if below[s] > idx[s] {
                    hi[s] = x[s];
                } else {
                    lo[s] = x[s];
                }
            }
        }
        (0..m).map(|s| 0.5 * (lo[s] + hi[s])).collect()
    }

    /// Eigenvectors of the tridiagonal matrix for the eigenvalues `vals`, by inverse iteration
    /// (three solves from a fixed pseudo-random start of its own), each orthogonalised against
    /// the earlier ones whose eigenvalues lie within 1e-3 `norm` of its own.
    fn eigenvectors(&self, vals: &[f64], norm: f64) -> DMatrix<f64> {
        let n = self.diag.len();
        let mut z = DMatrix::<f64>::zeros(n, vals.len());
        let ortol = 1e-3 * norm;
        let mut rng = ChaCha8Rng::seed_from_u64(0x7269_747a);
        for (c, &lam) in vals.iter().enumerate() {
            let lu = ShiftedLu::new(&self.diag, &self.sub, lam, norm);
            let mut x: Vec<f64> = (0..n).map(|_| rng.gen::<f64>() + 0.5).collect();
            for _ in 0..3 {
                lu.solve(&mut x);
                for p in 0..c {
                    if (vals[p] - lam).abs() <= ortol {
                        let zp = z.column(p);
                        let d: f64 = x.iter().zip(zp.iter()).map(|(a, b)| a * b).sum();
                        for (xi, &zi) in x.iter_mut().zip(zp.iter()) {
                            *xi -= d * zi;
                        }
                    }
                }
                let nrm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
                let s = if nrm > 0.0 { 1.0 / nrm } else { 0.0 };
                x.iter_mut().for_each(|v| *v *= s);
            }
            z.column_mut(c).copy_from_slice(&x);
        }
        z
    }

    /// Q z: the tridiagonal matrix's eigenvectors as the original matrix's.
    fn back_transform(&self, mut z: DMatrix<f64>) -> DMatrix<f64> {
        let n = self.diag.len();
        for j in (0..n.saturating_sub(2)).rev() {
            let t = self.tau[j];
            if t == 0.0 {
                continue;
            }
            let v = &self.refl.as_slice()[j * n + j + 1..(j + 1) * n];
            for mut col in z.column_iter_mut() {
                let x = &mut col.as_mut_slice()[j + 1..];
                // v = (1, refl[j+2.., j]).
                let d = x[0] + v[1..].iter().zip(&x[1..]).map(|(a, b)| a * b).sum::<f64>();
                let s = t * d;
                x[0] -= s;
                for (xi, &vi) in x[1..].iter_mut().zip(&v[1..]) {
                    *xi -= s * vi;
                }
            }
        }
        z
    }
}

/// The Householder reflector of `x` (LAPACK `dlarfg`): overwrites x[1..] with v[1..] (v[0] = 1)
/// and returns (beta, tau) with (I - tau v v') x = (beta, 0, ..., 0).
fn householder(x: &mut [f64]) -> (f64, f64) {
    let alpha = x[0];
    let xnorm = x[1..].iter().map(|v| v * v).sum::<f64>().sqrt();
    if xnorm == 0.0 {
        return (alpha, 0.0);
    }
    let beta = -alpha.signum() * alpha.hypot(xnorm);
    let tau = (beta - alpha) / beta;
    let scale = 1.0 / (alpha - beta);
    x[1..].iter_mut().for_each(|v| *v *= scale);
    x[0] = 1.0;
    (beta, tau)
}

/// T - lambda I = P L U for a tridiagonal T, by Gaussian elimination with partial pivoting
/// (LAPACK `dlagtf`), pivots of size below eps `norm` raised to it so that solves at an
/// eigenvalue stay finite.
struct ShiftedLu {
    /// U's diagonal, first and second superdiagonals; L's multipliers; whether rows swapped.
    d: Vec<f64>,
    u1: Vec<f64>,
    u2: Vec<f64>,
    l: Vec<f64>,
    swap: Vec<bool>,
}

impl ShiftedLu {
    fn new(diag: &[f64], sub: &[f64], lam: f64, norm: f64) -> Self {
        let n = diag.len();
        let tiny = f64::EPSILON * norm;
        let mut d: Vec<f64> = diag.iter().map(|v| v - lam).collect();
        let mut u1: Vec<f64> = sub.to_vec();
        let mut u2 = vec![0.0; n.saturating_sub(2)];
        let mut l = vec![0.0; n.saturating_sub(1)];
        let mut swap = vec![false; n.saturating_sub(1)];
        // Step i eliminates column i of row i+1, (sub[i], d[i+1], sub[i+1]) as yet untouched,
        // with row i or (when it is the larger there) row i+1 as the pivot row.
        for i in 0..n.saturating_sub(1) {
            if sub[i].abs() > d[i].abs() {
                swap[i] = true;
                let m = d[i] / sub[i];
                l[i] = m;
                d[i] = sub[i];
                let t = u1[i];
                u1[i] = d[i + 1];
                d[i + 1] = t - m * d[i + 1];
                if i + 2 < n {
                    u2[i] = sub[i + 1];
                    u1[i + 1] = -m * sub[i + 1];
                }
            } else {
                if d[i].abs() < tiny {
                    d[i] = tiny.max(f64::MIN_POSITIVE);
                }
                let m = sub[i] / d[i];
                l[i] = m;
                d[i + 1] -= m * u1[i];
            }
        }
        if n > 0 && d[n - 1].abs() < tiny {
            d[n - 1] = tiny.max(f64::MIN_POSITIVE);
        }
        ShiftedLu { d, u1, u2, l, swap }
    }

    /// Overwrites `x` with (T - lambda I)^-1 x.
    fn solve(&self, x: &mut [f64]) {
        let n = self.d.len();
        for i in 0..n.saturating_sub(1) {
            if self.swap[i] {
                x.swap(i, i + 1);
            }
            x[i + 1] -= self.l[i] * x[i];
        }
        for i in (0..n).rev() {
            let mut v = x[i];
            if i + 1 < n {
                v -= self.u1[i] * x[i + 1];
            }
            if i + 2 < n {
                v -= self.u2[i] * x[i + 2];
            }
            x[i] = v / self.d[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::SymmetricEigen;

    fn check(a: &DMatrix<f64>, k: usize) {
        let (vals, z) = extreme_eigen(a, k).unwrap();
        let n = a.nrows();
        let se = SymmetricEigen::new(a.clone());
        let mut want: Vec<f64> = se.eigenvalues.iter().copied().collect();
        want.sort_by(|x, y| y.abs().partial_cmp(&x.abs()).unwrap());
        want.truncate(k);
        want.sort_by(|x, y| y.partial_cmp(x).unwrap());
        let norm = a.iter().fold(0.0f64, |m, v| m.max(v.abs())) * n as f64;
        for (g, w) in vals.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-13 * norm, "{g} vs {w}");
        }
        let gram = z.transpose() * &z;
        assert!((gram - DMatrix::<f64>::identity(k, k)).amax() < 1e-12);
        for c in 0..k {
            let r = (a * z.column(c) - z.column(c) * vals[c]).norm();
            assert!(r <= 1e-12 * norm, "residual {r}");
        }
    }

    #[test]
    fn matches_full_decomposition() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for &(n, k) in &[(1usize, 1usize), (2, 1), (3, 3), (12, 4), (80, 30), (200, 30)] {
            let b = DMatrix::<f64>::from_fn(n, n, |_, _| rng.gen::<f64>() - 0.5);
            check(&(&b + b.transpose()), k);
        }
    }

    #[test]
    fn repeated_and_clustered_eigenvalues() {
        // Q diag(values) Q' with exact ties, near ties and a zero block.
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let n = 60;
        let q = DMatrix::<f64>::from_fn(n, n, |_, _| rng.gen::<f64>() - 0.5).qr().q();
        let vals: Vec<f64> = (0..n)
            .map(|i| match i {
                0..=4 => 5.0,
                5..=9 => -5.0 + 1e-13 * i as f64,
                10..=19 => 1.0 / (i as f64),
                _ => 0.0,
            })
            .collect();
        let a = &q * DMatrix::from_diagonal(&nalgebra::DVector::from_vec(vals)) * q.transpose();
        let a = (&a + a.transpose()) * 0.5;
        check(&a, 10);
        check(&a, 15);
        // Diagonal and zero matrices (already tridiagonal; off-diagonals zero).
        let d = DMatrix::from_diagonal(&nalgebra::DVector::from_fn(20, |i, _| (i as f64) - 9.5));
        check(&d, 6);
        let (v, z) = extreme_eigen(&DMatrix::zeros(5, 5), 2).unwrap();
        assert_eq!(v, vec![0.0, 0.0]);
        assert!(((z.transpose() * &z) - DMatrix::<f64>::identity(2, 2)).amax() < 1e-15);
    }

    #[test]
    fn refuses_bad_input() {
        assert!(extreme_eigen(&DMatrix::zeros(3, 3), 0).is_none());
        assert!(extreme_eigen(&DMatrix::zeros(3, 3), 4).is_none());
        let mut a = DMatrix::<f64>::zeros(3, 3);
        a[(1, 1)] = f64::NAN;
        assert!(extreme_eigen(&a, 1).is_none());
    }
}
