//! Smooth bases evaluated on data rows, and the thin-plate set-up: the pieces of mgcv's
//! `construct_tprs`/`predict_tprs` (Wood 2003) that cost time on many rows or many unique
//! points. The R layer assembles mgcv's smooth object from them, so `PredictMat()` stays valid.
//!
//! Matrices are column-major slices, as R stores them.

use crate::engine::extreme_eigen::{extreme_eigen, largest_magnitude};
use crate::engine::ln_fast::ln_table;
use crate::engine::simd::{simd, Simd};
use crate::engine::tile_product::{PackedB, TileJob};
use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DMatrixView, SymmetricEigen};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// A spline's knots: at least `min` increasing finite numbers.
fn check_knots(knots: &[f64], min: usize) -> Result<()> {
    if knots.len() < min || knots.iter().any(|k| !k.is_finite()) || knots.windows(2).any(|w| w[1] <= w[0]) {
        return Err(NceError::invalid(
            "knots",
            format!("must be {min} or more increasing finite numbers"),
        ));
    }
    Ok(())
}

/// mgcv's cubic regression spline basis on the rows `x` (its C routine `crspl` with `F`
/// supplied, as `Predict.matrix.cr.smooth` calls it), written into `out` (n x nk,
/// column-major) for the `nk` increasing knots and the smooth's `F` (nk x nk, column-major, the
/// map from values at the knots to second derivatives). Within the knots' range row i is
/// c- F[, j] + c+ F[, j + 1], plus a- at column j and a+ at column j + 1, for the interval
/// [k_j, k_j+1] holding x_i (the lower one at a knot); beyond the ends the spline is linear, as
/// in `crspl`. The same operations in the same order as `crspl`, so the same values.
pub fn cr_basis_into(x: &[f64], knots: &[f64], f: &[f64], out: &mut [f64]) -> Result<()> {
    let nk = knots.len();
    check_knots(knots, 3)?;
    let n = x.len();
    if f.len() != nk * nk {
        return Err(NceError::invalid("f", format!("must be a {nk} x {nk} matrix")));
    }
    if out.len() != n * nk {
        return Err(NceError::invalid("out", format!("must hold {n} x {nk} values")));
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(NceError::invalid("x", format!("row {} is not finite", i + 1)));
    }
    let (kmin, kmax) = (knots[0], knots[nk - 1]);
    fill_spline_rows(
        out,
        n,
        nk,
        |i| {
            let xi = x[i];
            if xi < kmin {
                // Linear below the first knot.
                let h = knots[1] - kmin;
                let xik = xi - kmin;
                SplineRow {
                    rows: [0, 1],
                    weights: [-xik * h / 3.0, -xik * h / 6.0],
                    plus: [1.0 - xik / h, xik / h],
                }
            } else if xi > kmax {
                // Linear above the last knot.
                let h = kmax - knots[nk - 2];
                let xik = xi - kmax;
                SplineRow {
                    rows: [nk - 2, nk - 1],
                    weights: [xik * h / 6.0, xik * h / 3.0],
                    plus: [-xik / h, 1.0 + xik / h],
                }
            } else {
                // crspl's search: the last knot below x, at least the first.
                let j = knots.partition_point(|&t| t < xi).clamp(1, nk - 1) - 1;
                let (xj, xj1) = (knots[j], knots[j + 1]);
                let h = xj1 - xj;
                let (ajm, ajp) = (xj1 - xi, xi - xj);
                SplineRow {
                    rows: [j, j + 1],
                    weights: [(ajm * (ajm * ajm / h - h)) / 6.0, (ajp * (ajp * ajp / h - h)) / 6.0],
                    plus: [ajm / h, ajp / h],
                }
            }
        },
        // F is stored so that crspl reads F[j * nk + c]: "row" j of the map is its column j.
        |r, c| f[r * nk + c],
    );
    Ok(())
}

/// mgcv's cyclic cubic regression spline basis on the rows `x` (`pred.mat()` of
/// `Predict.matrix.cyclic.smooth`), written into `out` (n x (nk - 1), column-major) for the
/// `nk` knots and the smooth's `BD` ((nk - 1) x (nk - 1)). Row i is BD[j1, ] a_i + BD[j, ] b_i,
/// plus up_i / h at column j1 and lo_i / h at column j, where (j1, j) is the knot interval of
/// x_i (left-open, the first closed; j wraps to the first knot at the last) of width h, up_i
/// and lo_i the distances to its ends, a_i = up^3 / 6h - h up / 6 and b_i likewise with lo.
/// Blocks of rows are filled in parallel (`fill_spline_rows`).
pub fn cc_basis_into(x: &[f64], knots: &[f64], bd: &[f64], out: &mut [f64]) -> Result<()> {
    let nk = knots.len();
    check_knots(knots, 4)?;
    let (n, k) = (x.len(), nk - 1);
    if bd.len() != k * k {
        return Err(NceError::invalid("bd", format!("must be a {k} x {k} matrix")));
    }
    if out.len() != n * k {
        return Err(NceError::invalid("out", format!("must hold {n} x {k} values")));
    }
    if let Some(i) = x.iter().position(|v| !(*v >= knots[0] && *v <= knots[nk - 1])) {
        return Err(NceError::invalid(
            "x",
            format!("value {} (row {}) is outside the knots' range", x[i], i + 1),
        ));
    }
    fill_spline_rows(
        out,
        n,
        k,
        |i| {
            let v = x[i];
            let j1 = knots.partition_point(|&t| t < v).max(1) - 1;
            let j = if j1 + 1 == k { 0 } else { j1 + 1 };
            let h = knots[j1 + 1] - knots[j1];
            let (up, lo) = (knots[j1 + 1] - v, v - knots[j1]);
            SplineRow {
                rows: [j1, j],
                weights: [
                    up.powf(3.0) / (6.0 * h) - h * up / 6.0,
                    lo.powf(3.0) / (6.0 * h) - h * lo / 6.0,
                ],
                plus: [up / h, lo / h],
            }
        },
        |r, c| bd[c * k + r],
    );
    Ok(())
}

/// One row of a cubic spline basis: `weights[0] M[rows[0], ] + weights[1] M[rows[1], ]`, then
/// `plus[0]` added at column `rows[0]` and `plus[1]` at column `rows[1]` (M the spline's matrix).
struct SplineRow {
    rows: [usize; 2],
    weights: [f64; 2],
    plus: [f64; 2],
}

/// Rows per block when a spline basis is filled by blocks of rows in parallel.
const SPLINE_BLOCK: usize = 2048;

/// `out` (n x k, column-major) cut into blocks of `block` rows, each block's k column slices
/// together, so that blocks can be written in parallel where they lie.
fn row_blocks(out: &mut [f64], n: usize, k: usize, block: usize) -> Vec<Vec<&mut [f64]>> {
    let mut blocks: Vec<Vec<&mut [f64]>> = (0..n.div_ceil(block)).map(|_| Vec::with_capacity(k)).collect();
    for col in out.chunks_mut(n.max(1)).take(k) {
        for (b, part) in col.chunks_mut(block).enumerate() {
            blocks[b].push(part);
        }
    }
    blocks
}

/// Fill `out` (n x k, column-major) with the rows `row(i)` describes, `m(r, c)` being entry
/// (r, c) of the spline's matrix: blocks of rows in parallel, each row's terms found once and
/// each column written in turn (the same values whatever the thread count).
fn fill_spline_rows(
    out: &mut [f64],
    n: usize,
    k: usize,
    row: impl Fn(usize) -> SplineRow + Sync,
    m: impl Fn(usize, usize) -> f64 + Sync,
) {
    row_blocks(out, n, k, SPLINE_BLOCK)
        .into_par_iter()
        .enumerate()
        .for_each(|(b, mut cols)| {
            let r0 = b * SPLINE_BLOCK;
            let len = cols.first().map_or(0, |c| c.len());
            let terms: Vec<SplineRow> = (r0..r0 + len).map(&row).collect();
            for (c, col) in cols.iter_mut().enumerate() {
                for (o, t) in col.iter_mut().zip(&terms) {
                    *o = t.weights[0] * m(t.rows[0], c) + t.weights[1] * m(t.rows[1], c);
                }
            }
            for (i, t) in terms.iter().enumerate() {
                cols[t.rows[0]][i] += t.plus[0];
                cols[t.rows[1]][i] += t.plus[1];
            }
        });
}

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

    /// eta at the squared distances `r2(i)` for i in 0..out.len(), into `out`. For even d the
    /// logarithm is [`LnTable::ln`](crate::engine::ln_fast::LnTable::ln) (within 2 ulp of
    /// `ln`), which lets the loop vectorise; `FMA` fuses its multiply-adds (the builds for CPUs
    /// with FMA).
    #[inline(always)]
    fn fill<const FMA: bool>(&self, r2: impl Fn(usize) -> f64, out: &mut [f64]) {
        if self.even {
            // The usual case (2m - d = 2, as d = 2 with m = 2) with no power to take.
            if self.power == 2 {
                self.fill_even::<FMA, true>(r2, out);
            } else {
                self.fill_even::<FMA, false>(r2, out);
            }
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                *o = self.of_r2(r2(i));
            }
        }
    }

    /// `fill` for even d (`SQUARE`: 2m - d = 2, no power to take). A subnormal squared
    /// distance (points about 1e-154 apart) takes the logarithm of the smallest normal double
    /// instead of its own (the table's logarithm needs a normal input): eta there is below
    /// 1e-305 either way, and one maximum keeps the loop free of the checks an exact logarithm
    /// would need.
    #[inline(always)]
    fn fill_even<const FMA: bool, const SQUARE: bool>(&self, r2: impl Fn(usize) -> f64, out: &mut [f64]) {
        let half = self.factor * 0.5;
        let p = self.power / 2;
        let t = ln_table();
        for i in 0..out.len() {
            let v = r2(i);
            let pw = if SQUARE { v } else { v.powi(p) };
            let normal = if v < f64::MIN_POSITIVE { f64::MIN_POSITIVE } else { v };
            let e = half * t.ln::<FMA>(normal) * pw;
            out[i] = if v > 0.0 { e } else { 0.0 };
        }
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

/// A fitted thin-plate basis as mgcv keeps it: dimension `d`, penalty order `m` (mgcv's
/// p.order[1]), the `nu` unique knots `xu` (nu x d, column-major, shifted) and `uz`
/// ((nu + M) x k, column-major).
#[derive(Debug, Clone, Copy)]
pub struct TprsBasis<'a> {
    pub d: usize,
    pub m: usize,
    pub xu: &'a [f64],
    pub nu: usize,
    pub uz: &'a [f64],
    pub k: usize,
}

/// Rows of the thin-plate basis at points `x` (n x d, already shifted as the smooth's
/// `shift`), given mgcv's `Xu` (nu x d unique knots, shifted) and `UZ` ((nu + M) x k): row i is
/// b_i' UZ with b_i = (eta(|x_i - Xu_j|), j = 1..nu; the M null-space polynomials at x_i), as
/// mgcv's predict_tprs. Returns n x k, column-major. Rows are done in blocks, one matrix
/// product per block, blocks in parallel (the result does not depend on the thread count).
pub fn tprs_predict(x: &[f64], n: usize, basis: &TprsBasis) -> Result<Vec<f64>> {
    let TprsBasis { d, m, xu, nu, uz, k } = *basis;
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
    // Row blocks in parallel; within a block, the knots in chunks whose radial block stays in
    // cache, each multiplied into the block's rows of the result at once (no nb x nu matrix),
    // by register tiles that read the radial block where it lies (tile_product). A 128 x 128
    // block (128 KB) stays in a 512 KB L2 beside the packed knots' rows: 0.85-0.9x the time of
    // 256 x 256 on one Zen core (bench_tprs, 2026-11-30).
    const BLOCK: usize = 128;
    const KNOTS: usize = 128;
    let simd = simd();
    let uzp = PackedB::new(uz, nu + mm, 0, nu, k, simd);
    // Each block written where it lies in the result: no second copy of the rows.
    let mut out = vec![0.0; n * k];
    row_blocks(&mut out, n, k, BLOCK)
        .into_par_iter()
        .enumerate()
        .for_each(|(b, mut cols)| {
            let lo = b * BLOCK;
            let hi = (lo + BLOCK).min(n);
            let nb = hi - lo;
            let mut acc = DMatrix::<f64>::zeros(nb, k);
            let mut bm = DMatrix::<f64>::zeros(nb, KNOTS.min(nu));
            for j0 in (0..nu).step_by(KNOTS) {
                let kc = KNOTS.min(nu - j0);
                let part = RadialBlock {
                    x,
                    n,
                    d,
                    lo,
                    hi,
                    xu,
                    nu,
                    j0,
                    kc,
                };
                part.fill_with(simd, &eta, &mut bm.as_mut_slice()[..nb * kc]);
                TileJob {
                    a: bm.as_slice(),
                    lda: nb,
                    nrows: nb,
                    kc,
                    b: &uzp,
                    j0,
                    c: acc.as_mut_slice(),
                    ldc: nb,
                }
                .run(simd);
            }
            let mut tm = DMatrix::<f64>::zeros(nb, mm);
            for (p, pw) in powers.iter().enumerate() {
                let mut colv = tm.column_mut(p);
                let col = colv.as_mut_slice();
                for (c, i) in (lo..hi).enumerate() {
                    let mut v = 1.0;
                    for l in 0..d {
                        for _ in 0..pw[l] {
                            v *= x[l * n + i];
                        }
                    }
                    col[c] = v;
                }
            }
            acc.gemm(1.0, &tm, &uzm.rows(nu, mm), 1.0);
            for (j, col) in cols.iter_mut().enumerate() {
                col.copy_from_slice(acc.column(j).as_slice());
            }
        });
    Ok(out)
}

/// Rows lo..hi of the points `x` (n x d) against knots j0..j0+kc of `xu` (nu x d).
struct RadialBlock<'a> {
    x: &'a [f64],
    n: usize,
    d: usize,
    lo: usize,
    hi: usize,
    xu: &'a [f64],
    nu: usize,
    j0: usize,
    kc: usize,
}

impl RadialBlock<'_> {
    /// eta(|x_i - xu_j|) into `out` ((hi - lo) x kc, column-major), one knot (column) at a time
    /// over contiguous rows, so the loops vectorise. Dimensions 1-3 take each squared distance
    /// where its eta is (no pass through memory between them).
    #[inline(always)]
    fn fill_body<const FMA: bool>(&self, eta: &Eta, out: &mut [f64]) {
        match self.d {
            1 => self.fill_d::<FMA, 1>(eta, out),
            2 => self.fill_d::<FMA, 2>(eta, out),
            3 => self.fill_d::<FMA, 3>(eta, out),
            _ => self.fill_any::<FMA>(eta, out),
        }
    }

    /// `fill_body` for dimension `D`.
    #[inline(always)]
    fn fill_d<const FMA: bool, const D: usize>(&self, eta: &Eta, out: &mut [f64]) {
        let nb = self.hi - self.lo;
        let cols: [&[f64]; D] = std::array::from_fn(|l| &self.x[l * self.n + self.lo..l * self.n + self.hi]);
        for (c, col) in out.chunks_exact_mut(nb).take(self.kc).enumerate() {
            let j = self.j0 + c;
            let u: [f64; D] = std::array::from_fn(|l| self.xu[l * self.nu + j]);
            // Cut to the column's length, so the compiler sees every row index in bounds.
            let cols: [&[f64]; D] = std::array::from_fn(|l| &cols[l][..col.len()]);
            // The same sum, in the same order, as fill_any's.
            let r2 = |i: usize| {
                let mut acc = 0.0;
                for l in 0..D {
                    let z = cols[l][i] - u[l];
                    acc += z * z;
                }
                acc
            };
            eta.fill::<FMA>(r2, col);
        }
    }

    /// `fill_body` for any dimension: the squared distances of a column first, then their eta.
    #[inline(always)]
    fn fill_any<const FMA: bool>(&self, eta: &Eta, out: &mut [f64]) {
        let nb = self.hi - self.lo;
        let mut r2 = vec![0.0; nb];
        for (c, col) in out.chunks_exact_mut(nb).take(self.kc).enumerate() {
            let j = self.j0 + c;
            r2.iter_mut().for_each(|v| *v = 0.0);
            for l in 0..self.d {
                let xl = &self.x[l * self.n + self.lo..l * self.n + self.hi];
                let u = self.xu[l * self.nu + j];
                for (acc, &xv) in r2.iter_mut().zip(xl) {
                    let z = xv - u;
                    *acc += z * z;
                }
            }
            // Cut to the column's length, as in fill_d, so the loop keeps no bounds checks.
            let r2 = &r2[..col.len()];
            eta.fill::<FMA>(|i| r2[i], col);
        }
    }

    fn fill(&self, eta: &Eta, out: &mut [f64]) {
        self.fill_body::<false>(eta, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fill_avx2(&self, eta: &Eta, out: &mut [f64]) {
        self.fill_body::<true>(eta, out);
    }

    #[cfg(all(target_arch = "x86_64", nce_avx512))]
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    unsafe fn fill_avx512(&self, eta: &Eta, out: &mut [f64]) {
        self.fill_body::<true>(eta, out);
    }

    /// The build `simd` says (see engine::simd).
    fn fill_with(&self, simd: Simd, eta: &Eta, out: &mut [f64]) {
        match simd {
            #[cfg(all(target_arch = "x86_64", nce_avx512))]
            // SAFETY: simd() checked that the CPU has these instructions.
            Simd::Avx512 => unsafe { self.fill_avx512(eta, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { self.fill_avx2(eta, out) },
            _ => self.fill(eta, out),
        }
    }
}

/// The thin-plate matrix E (nu x nu) of the points `xu`: E_ij = eta(|xu_i - xu_j|).
pub fn tprs_e(xu: &[f64], nu: usize, d: usize, m: usize) -> Result<DMatrix<f64>> {
    check_points(xu, nu, d, "Xu")?;
    let eta = Eta::new(tprs_order(m, d), d)?;
    let mut e = DMatrix::<f64>::zeros(nu, nu);
    let simd = simd();
    e.as_mut_slice().par_chunks_mut(nu).enumerate().for_each(|(j, col)| {
        let part = RadialBlock {
            x: xu,
            n: nu,
            d,
            lo: 0,
            hi: nu,
            xu,
            nu,
            j0: j,
            kc: 1,
        };
        part.fill_with(simd, &eta, col);
    });
    Ok(e)
}

/// Rows per panel of the products below. The panels are fixed, so every product (and the order
/// of every sum over panels) is the same on any number of threads.
const PANEL: usize = 256;

/// `f(lo, len)` for each row panel of `n` rows, in parallel, the results in panel order.
fn per_panel<F>(n: usize, f: F) -> Vec<DMatrix<f64>>
where
    F: Fn(usize, usize) -> DMatrix<f64> + Sync,
{
    (0..n.div_ceil(PANEL))
        .into_par_iter()
        .map(|c| {
            let lo = c * PANEL;
            f(lo, PANEL.min(n - lo))
        })
        .collect()
}

/// A * B for a tall A, its row panels in parallel.
fn panel_times(a: DMatrixView<f64>, b: DMatrixView<f64>) -> DMatrix<f64> {
    let parts = per_panel(a.nrows(), |lo, len| a.rows(lo, len) * b);
    let mut out = DMatrix::<f64>::zeros(a.nrows(), b.ncols());
    for (c, p) in parts.iter().enumerate() {
        out.rows_mut(c * PANEL, p.nrows()).copy_from(p);
    }
    out
}

/// A' B for tall A and B with the same rows: one product per row panel in parallel, summed in
/// panel order.
fn panel_tr_times(a: DMatrixView<f64>, b: DMatrixView<f64>) -> DMatrix<f64> {
    // An explicit transpose: nalgebra's tr_mul is dot products, not a blocked product.
    let parts = per_panel(a.nrows(), |lo, len| a.rows(lo, len).transpose() * b.rows(lo, len));
    let mut out = DMatrix::<f64>::zeros(a.ncols(), b.ncols());
    for p in &parts {
        out += p;
    }
    out
}

/// n x s column-major storage that grows by whole columns without copying what it holds
/// (the Krylov basis Q and its image E Q).
struct Columns {
    n: usize,
    data: Vec<f64>,
}

impl Columns {
    fn new(n: usize) -> Self {
        Columns { n, data: Vec::new() }
    }

    fn ncols(&self) -> usize {
        self.data.len() / self.n.max(1)
    }

    fn push(&mut self, m: &DMatrix<f64>) {
        self.data.extend_from_slice(m.as_slice());
    }

    fn view(&self) -> DMatrixView<'_, f64> {
        DMatrixView::from_slice(&self.data, self.n, self.ncols())
    }
}

/// The `k` eigenpairs of largest magnitude of the symmetric matrix `e`, eigenvalues in
/// decreasing order of magnitude... as mgcv's `lanczos_spd(E, U, v, k, -1)` keeps them, by a
/// block Krylov method with full reorthogonalisation and Rayleigh-Ritz (matrix-matrix products
/// instead of Lanczos' matrix-vector ones). Converged when every kept Ritz pair has residual
/// |E u - theta u| <= `tol` |theta_1|. Small matrices are decomposed in full. The start block
/// comes from a subsample of the points on 1,000 points and more (`nystrom_start`), else it is a
/// fixed pseudo-random one; neither depends on the thread count, so the results do not.
/// Returns (values in decreasing order, as mgcv orders them, U nu x k).
pub fn top_eigen(e: &DMatrix<f64>, k: usize, tol: f64) -> Result<(Vec<f64>, DMatrix<f64>)> {
    top_eigen_from(e, k, tol, true)
}

/// `top_eigen`, with `nystrom` false for a random start block on every size (the tests' second
/// path to the same pairs).
fn top_eigen_from(e: &DMatrix<f64>, k: usize, tol: f64, nystrom: bool) -> Result<(Vec<f64>, DMatrix<f64>)> {
    let n = e.nrows();
    if k == 0 || k > n {
        return Err(NceError::invalid("k", format!("must be in 1..{n}")));
    }
    let full = |e: &DMatrix<f64>| -> (Vec<f64>, DMatrix<f64>) {
        let se = SymmetricEigen::new(e.clone());
        let idx = largest_magnitude(se.eigenvalues.as_slice(), k);
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
    // The random path does not compute a start only to drop it.
    let mut v = match nystrom.then(|| nystrom_start(e, b)).flatten() {
        Some(v) => v,
        None => {
            let mut rng = ChaCha8Rng::seed_from_u64(0x7470_7273);
            DMatrix::<f64>::from_fn(n, b, |_, _| rng.gen::<f64>() - 0.5).qr().q()
        }
    };
    let mut q = Columns::new(n);
    let mut eq = Columns::new(n);
    let mut t_prev = DMatrix::<f64>::zeros(0, 0);
    let mut iter = 0usize;
    let max_dim = n.min(40 * b);
    // Residuals are never small after one or two blocks: the first check is at the third.
    let mut next_check = 3usize;
    let mut last_check: Option<(usize, f64)> = None;
    let mut best = f64::INFINITY;
    let mut stalls = 0usize;
    loop {
        let w = panel_times(e.as_view(), v.as_view());
        let s0 = q.ncols();
        let s = s0 + v.ncols();
        q.push(&v);
        eq.push(&w);
        // Projected matrix Q'EQ, extended by the new block's rows and columns only.
        let mut tn = DMatrix::<f64>::zeros(s, s);
        tn.view_mut((0, 0), (s0, s0)).copy_from(&t_prev);
        let cross = panel_tr_times(q.view(), w.as_view());
        for c in 0..v.ncols() {
            for r in 0..s {
                let val = if r >= s0 {
                    0.5 * (cross[(r, c)] + cross[(s0 + c, r - s0)])
                } else {
                    cross[(r, c)]
                };
                tn[(r, s0 + c)] = val;
                tn[(s0 + c, r)] = val;
            }
        }
        t_prev = tn.clone();
        iter += 1;
        if iter < next_check && s + b <= max_dim {
            // No Rayleigh-Ritz (the dense eigen-decomposition of T, dearer than a block product
            // once T has a few hundred rows) where the residuals cannot be small yet.
            let (rmax, nv) = next_block(q.view(), &w, &cross);
            if rmax <= 0.0 {
                return Err(NceError::Numerical("empty Krylov block".into()));
            }
            v = nv;
            continue;
        }
        let ritz = || -> Result<_> {
            let (vals, y) =
                extreme_eigen(&tn, k).ok_or_else(|| NceError::Numerical("non-finite thin-plate matrix".into()))?;
            let u = panel_times(q.view(), y.as_view());
            let eu = panel_times(eq.view(), y.as_view());
            let worst = (0..k)
                .map(|c| (eu.column(c) - u.column(c) * vals[c]).norm())
                .fold(0.0f64, f64::max);
            Ok((vals, u, worst))
        };
        // With a second thread, the Ritz pairs (their small eigenproblem runs on one thread)
        // beside the next block (products over both); on one thread the block only once the
        // pairs have not converged. The block is the same either way, so the result does not
        // depend on the thread count.
        let (ritz, ahead) = if rayon::current_num_threads() > 1 {
            let (r, nb) = rayon::join(ritz, || next_block(q.view(), &w, &cross));
            (r, Some(nb))
        } else {
            (ritz(), None)
        };
        let (vals, u, worst) = ritz?;
        let scale = vals.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let rho = worst / scale.max(f64::MIN_POSITIVE);
        if worst <= tol * scale {
            return Ok((vals, u));
        }
        // Stagnation: two checks in a row not halving the best residual, with the residual
        // within 100 tol. This is the attainable accuracy when a kept eigenvalue's magnitude
        // nearly ties with the first one left out (the Ritz pair swaps between them).
        if rho >= 0.5 * best {
            stalls += 1;
        } else {
            stalls = 0;
        }
        if stalls >= 2 && rho <= 100.0 * tol {
            return Ok((vals, u));
        }
        next_check = next_check_after(iter, rho, last_check, tol);
        last_check = Some((iter, rho));
        best = best.min(rho);
        if s + b > max_dim {
            if n <= 3000 {
                return Ok(full(e));
            }
            return Err(NceError::Numerical(format!(
                "the thin-plate eigen-decomposition did not converge (residual {:.3e} of {:.3e})",
                worst, scale
            )));
        }
        let (rmax, nv) = ahead.unwrap_or_else(|| next_block(q.view(), &w, &cross));
        if rmax <= 1e-13 * scale.max(1e-300) {
            // Krylov space exhausted: the basis is invariant, so the Ritz pairs are exact.
            return Ok((vals, u));
        }
        v = nv;
    }
}

/// A start block for `top_eigen` on a large E: the top `b` eigenvectors of E on every tenth
/// point (at least 2b points), extended to all points as Nystrom does (E[:, S] u / lambda) and
/// orthonormalised. On bench_tprs's 2,000 knots it starts 50x closer than a random block and
/// the solver stops after 6 blocks instead of 8. None where the matrix is too small for a
/// subsample to pay, or the subsample's solve fails (a random start then).
fn nystrom_start(e: &DMatrix<f64>, b: usize) -> Option<DMatrix<f64>> {
    let n = e.nrows();
    if n < 1000 {
        return None;
    }
    let m0 = (n / 10).max(2 * b);
    // Evenly spread over the points' order: mgcv's knots are a random sample (then this is
    // one too) or unique rows sorted by their first coordinate (then it spreads over that).
    let idx: Vec<usize> = (0..m0).map(|i| i * n / m0).collect();
    let sub = DMatrix::<f64>::from_fn(m0, m0, |i, j| e[(idx[i], idx[j])]);
    // Only the b pairs wanted are taken back through the tridiagonal reduction (extreme_eigen:
    // 3.7 ms at 200 points and b = 40, where the full decomposition top_eigen takes at that
    // size took 5.6 ms).
    let (vals, us) = extreme_eigen(&sub, b)?;
    let mut cols = DMatrix::<f64>::zeros(n, m0);
    for (c, &j) in idx.iter().enumerate() {
        cols.set_column(c, &e.column(j));
    }
    let mut v = panel_times(cols.as_view(), us.as_view());
    for (mut col, &val) in v.column_iter_mut().zip(&vals) {
        col.scale_mut(if val != 0.0 { 1.0 / val } else { 0.0 });
    }
    v.iter().all(|x| x.is_finite()).then(|| orthonormalise(v))
}

/// The iteration of the next convergence check after one at `iter` with relative residual
/// `rho`: from the rate per iteration since the previous check, the iterations a constant rate
/// needs to reach `tol`, less one (the rate improves as the Ritz pairs converge), at most 4
/// ahead; the next iteration when the rate is slow (above 1/2) or unknown.
fn next_check_after(iter: usize, rho: f64, last: Option<(usize, f64)>, tol: f64) -> usize {
    let Some((i0, rho0)) = last else {
        return iter + 1;
    };
    if rho0 <= 0.0 || rho <= 0.0 || iter <= i0 {
        return iter + 1;
    }
    let rate = (rho / rho0).powf(1.0 / (iter - i0) as f64);
    if !(rate > 0.0 && rate < 0.5) {
        return iter + 1;
    }
    let needed = ((tol / rho).ln() / rate.ln()).ceil();
    let ahead = if needed.is_finite() && needed > 1.0 {
        (needed as usize - 1).min(4)
    } else {
        1
    };
    iter + ahead.max(1)
}

/// The next Krylov block: `w` = E V orthogonalised against the basis `q` (twice, for
/// stability; `qw` = Q'W, which the projected matrix needed already, is the first pass's
/// coefficients), orthonormalised, and once more against `q`; with the largest column norm
/// after the two passes (the block has vanished when it is small).
fn next_block(q: DMatrixView<f64>, w: &DMatrix<f64>, qw: &DMatrix<f64>) -> (f64, DMatrix<f64>) {
    let project_out = |mut x: DMatrix<f64>| -> DMatrix<f64> {
        let c = panel_tr_times(q, x.as_view());
        x -= panel_times(q, c.as_view());
        x
    };
    let nv = project_out(w - panel_times(q, qw.as_view()));
    let rmax = nv.column_iter().fold(0.0f64, |a, c| a.max(c.norm()));
    (rmax, orthonormalise(project_out(orthonormalise(nv))))
}

/// An orthonormal basis of the columns of `x` (tall, full rank), by Cholesky QR twice (products
/// of the whole block rather than Householder's column by column), or Householder QR where `x`
/// is too ill-conditioned for the Gram matrix (condition above 1e5).
fn orthonormalise(x: DMatrix<f64>) -> DMatrix<f64> {
    let chol_qr = |x: &DMatrix<f64>| -> Option<DMatrix<f64>> {
        let g = panel_tr_times(x.as_view(), x.as_view());
        let l = g.cholesky()?.unpack();
        let d = l.diagonal();
        let (lo, hi) = d
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
        if !(lo > 1e-5 * hi) {
            return None;
        }
        // X R^-1 with R = L': solve L Z' = I for Z = R^-1's transpose... Z = L^-T.
        let mut z = DMatrix::<f64>::identity(l.nrows(), l.nrows());
        if !l.tr_solve_lower_triangular_mut(&mut z) {
            return None;
        }
        Some(panel_times(x.as_view(), z.as_view()))
    };
    match chol_qr(&x).and_then(|y| chol_qr(&y)) {
        Some(y) => y,
        None => x.qr().q(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..2 * n).map(|_| rng.gen::<f64>() - 0.5).collect()
    }

    /// A side x side grid of unit spacing, centred: rows running fastest along the first
    /// coordinate, or (`sorted`) sorted by it, as mgcv's unique rows are.
    fn grid(side: usize, sorted: bool) -> Vec<f64> {
        let n = side * side;
        let half = (side as f64 - 1.0) / 2.0;
        (0..2 * n)
            .map(|i| {
                let p = i % n;
                let c = if (i < n) != sorted { p % side } else { p / side };
                c as f64 - half
            })
            .collect()
    }

    /// Magnitudes of `v`, largest first (where magnitudes tie, a solver may keep either sign).
    fn magnitudes(v: &[f64]) -> Vec<f64> {
        let mut m: Vec<f64> = v.iter().map(|x| x.abs()).collect();
        m.sort_by(|a, b| b.partial_cmp(a).unwrap());
        m
    }

    /// Orthonormal eigenvectors `u` with residuals |E u - u diag(vals)| below 1e-9 scale.
    fn assert_pairs(e: &DMatrix<f64>, vals: &[f64], u: &DMatrix<f64>, scale: f64, what: &str) {
        let k = vals.len();
        let utu = u.transpose() * u;
        assert!((utu - DMatrix::<f64>::identity(k, k)).amax() < 1e-10, "{what}");
        let r = e * u - u * DMatrix::from_diagonal(&nalgebra::DVector::from_row_slice(vals));
        assert!(r.amax() < 1e-9 * scale, "{what}: residual {}", r.amax());
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
        assert_pairs(&e, &vals, &u, vals[0].abs(), "600 points");
    }

    #[test]
    fn top_eigen_on_a_regular_grid() {
        // A regular grid's symmetries give E repeated eigenvalues (mgcv's notes on its Lanczos
        // routine: inverse iteration failed there). 20 x 20 points, unit spacing, centred.
        let n = 20 * 20;
        let e = tprs_e(&grid(20, false), n, 2, 2).unwrap();
        let mut all: Vec<f64> = SymmetricEigen::new(e.clone()).eigenvalues.iter().copied().collect();
        all.sort_by(|a, b| b.abs().partial_cmp(&a.abs()).unwrap());
        let scale = all[0].abs();
        for k in [30, 31, 40] {
            let (vals, u) = top_eigen(&e, k, 1e-11).unwrap();
            // Where the k-th and (k+1)-th magnitudes tie, either may be kept: compare magnitudes.
            for (a, b) in magnitudes(&vals).iter().zip(magnitudes(&all[..k]).iter()) {
                assert!((a - b).abs() < 1e-10 * scale, "k = {k}: {a} vs {b}");
            }
            assert_pairs(&e, &vals, &u, scale, &format!("k = {k}"));
        }
    }

    /// The Nystrom start block (1,000 points and more) against a random one: the same pairs, on
    /// random points and on a regular grid (repeated eigenvalues), and the grid's points in a
    /// sorted order (mgcv's unique rows), so the subsample is a band of rows.
    #[test]
    fn top_eigen_start_blocks_agree() {
        for xu in [points(1200, 8), grid(33, true)] {
            let n = xu.len() / 2;
            let e = tprs_e(&xu, n, 2, 2).unwrap();
            let (va, ua) = top_eigen(&e, 30, 1e-11).unwrap();
            let (vb, _) = top_eigen_from(&e, 30, 1e-11, false).unwrap();
            let scale = va[0].abs().max(va[29].abs());
            for (a, b) in magnitudes(&va).iter().zip(magnitudes(&vb).iter()) {
                assert!((a - b).abs() < 1e-10 * scale, "n = {n}: {a} vs {b}");
            }
            assert_pairs(&e, &va, &ua, scale, &format!("n = {n}"));
        }
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
        let basis = TprsBasis {
            d: 2,
            m: 2,
            xu: &xu,
            nu,
            uz: &uz,
            k,
        };
        let got = tprs_predict(&x, n, &basis).unwrap();
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
    fn radial_builds_agree_bit_for_bit() {
        // The vectorised builds of the radial kernel against the portable one, with points
        // at distances from 0 (a knot among the rows) to far apart, and a subnormal one.
        let (n, nu, d) = (300, 70, 2);
        let mut x = points(n, 11);
        let xu = points(nu, 12);
        x[5] = xu[3];
        x[n + 5] = xu[nu + 3];
        x[6] = xu[4] + 1e-160;
        x[n + 6] = xu[nu + 4];
        let eta = Eta::new(2, d).unwrap();
        let part = RadialBlock {
            x: &x,
            n,
            d,
            lo: 3,
            hi: 290,
            xu: &xu,
            nu,
            j0: 1,
            kc: 60,
        };
        let mut plain = vec![0.0; 287 * 60];
        part.fill(&eta, &mut plain);
        let mut fast = vec![1.0; 287 * 60];
        let simd = simd();
        part.fill_with(simd, &eta, &mut fast);
        let scale = plain.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(plain.iter().zip(&fast).all(|(a, b)| (a - b).abs() <= 1e-14 * scale));
        assert_eq!(plain[2 + 287 * 2], 0.0);
        assert_eq!(fast[2 + 287 * 2], 0.0);
        // The AVX2 build against the AVX-512 one, where the CPU has both: the same bits.
        #[cfg(target_arch = "x86_64")]
        if simd == Simd::Avx512 {
            let mut avx2 = vec![2.0; 287 * 60];
            part.fill_with(Simd::Avx2, &eta, &mut avx2);
            assert!(avx2.iter().zip(&fast).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }

    #[test]
    fn refuses_bad_input() {
        let basis = TprsBasis {
            d: 2,
            m: 2,
            xu: &[0.0, 0.0],
            nu: 1,
            uz: &[0.0; 4],
            k: 1,
        };
        assert!(tprs_predict(&[f64::NAN, 0.0], 1, &basis).is_err());
        assert!(Eta::new(1, 2).is_err());
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    /// cargo test --release -p nce-core basis_timing -- --ignored --nocapture
    #[test]
    #[ignore]
    fn basis_timing() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let nu = 2000;
        let n = 42000;
        let k = 30;
        let xu: Vec<f64> = (0..2 * nu).map(|_| rng.gen::<f64>()).collect();
        let x: Vec<f64> = (0..2 * n).map(|_| rng.gen::<f64>()).collect();
        let t = std::time::Instant::now();
        let e = tprs_e(&xu, nu, 2, 2).unwrap();
        println!("E: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let (_v, u) = top_eigen(&e, k, 1e-11).unwrap();
        println!("eigen: {:?}", t.elapsed());
        let uz = DMatrix::<f64>::from_fn(nu + 3, k, |i, j| if i < nu { u[(i, j)] } else { 1.0 });
        let t = std::time::Instant::now();
        let basis = TprsBasis {
            d: 2,
            m: 2,
            xu: &xu,
            nu,
            uz: uz.as_slice(),
            k,
        };
        let _ = tprs_predict(&x, n, &basis).unwrap();
        println!("predict: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let mut s = 0.0;
        for i in 0..n * nu / 10 {
            s += ((i as f64) * 1e-6 + 0.5).ln();
        }
        println!("ln x {}: {:?} ({s})", n * nu / 10, t.elapsed());
    }
}
