//! Model matrices and the cross-products Newton's method needs.
//!
//! Rows are processed in fixed chunks whose partial sums are added in chunk order, so the
//! result is bit-identical whatever the number of rayon threads.

use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Rows per chunk of the parallel accumulations (fixed: results must not depend on threads).
pub const CHUNK_ROWS: usize = 4096;

/// What the fitting code needs from a model matrix.
///
/// Only the first four methods are required; the others have (slow but correct) default
/// implementations in terms of them, which the designs of this crate override with single
/// chunked passes over the rows.
pub trait Design: Sync {
    fn nrow(&self) -> usize;
    fn ncol(&self) -> usize;
    /// out = X beta (no offset).
    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]);
    /// X beta_l for each of `betas`, into new vectors (one pass over the rows where possible).
    fn linear_predictors(&self, betas: &[&[f64]]) -> Vec<Vec<f64>> {
        betas
            .iter()
            .map(|b| {
                let mut e = vec![0.0; self.nrow()];
                self.linear_predictor(b, &mut e);
                e
            })
            .collect()
    }
    /// (X' diag(w) X, X' v).
    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>);

    /// X' diag(w_l) X for each weight vector w_l (one pass over the rows where possible).
    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        let zeros = vec![0.0; self.nrow()];
        weights.iter().map(|w| self.weighted_crossprod(w, &zeros).0).collect()
    }

    /// X' v.
    fn crossprod_vec(&self, v: &[f64]) -> DVector<f64> {
        let zeros = vec![0.0; self.nrow()];
        self.weighted_crossprod(&zeros, v).1
    }

    /// A column of ones, if the design has one (the intercept; used for starting values).
    fn intercept_column(&self) -> Option<usize> {
        None
    }

    /// X as one dense n x p matrix, for designs held dense (`None` otherwise): the REML
    /// derivatives by pairs of rows (`engine::row_pairs`) work on it when the rows are few.
    fn dense_matrix(&self) -> Option<DMatrix<f64>> {
        None
    }

    /// out_i = x_i' M x_i for a symmetric p x p matrix M (e.g. leverages with M = H^{-1}).
    fn row_quadratic_forms(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        let (n, p) = (self.nrow(), self.ncol());
        out.iter_mut().for_each(|o| *o = 0.0);
        let (mut xc, mut yc) = (vec![0.0; n], vec![0.0; n]);
        let mut e = vec![0.0; p];
        for c in 0..p {
            e[c] = 1.0;
            self.linear_predictor(&e, &mut xc);
            e[c] = 0.0;
            let mc: Vec<f64> = (0..p).map(|k| m[(k, c)]).collect();
            self.linear_predictor(&mc, &mut yc);
            for ((o, a), b) in out.iter_mut().zip(&xc).zip(&yc) {
                *o += a * b;
            }
        }
    }
}

/// A dense column-major matrix borrowed from the caller (R's layout): one slice, or one slice
/// per column (`from_columns`: the blocks of a model matrix used where they lie, never bound
/// into one copy).
#[derive(Debug, Clone, Copy)]
pub struct DenseDesign<'a> {
    data: &'a [f64],
    columns: Option<&'a [&'a [f64]]>,
    nrow: usize,
    ncol: usize,
}

impl<'a> DenseDesign<'a> {
    pub fn new(data: &'a [f64], nrow: usize, ncol: usize) -> Result<Self> {
        if data.len() != nrow * ncol {
            return Err(NceError::invalid(
                "x",
                format!(
                    "has {} values, expected {} x {} = {}",
                    data.len(),
                    nrow,
                    ncol,
                    nrow * ncol
                ),
            ));
        }
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                "x",
                format!(
                    "model matrix has a non-finite value at row {}, column {}",
                    i % nrow.max(1) + 1,
                    i / nrow.max(1) + 1
                ),
            ));
        }
        Ok(DenseDesign {
            data,
            columns: None,
            nrow,
            ncol,
        })
    }

    /// The matrix whose column j is `columns[j]` (each of length `nrow`, finite).
    pub fn from_columns(columns: &'a [&'a [f64]], nrow: usize) -> Result<Self> {
        for (j, c) in columns.iter().enumerate() {
            if c.len() != nrow {
                return Err(NceError::invalid(
                    "x",
                    format!("column {} has {} values, expected {nrow}", j + 1, c.len()),
                ));
            }
            if let Some(i) = c.iter().position(|v| !v.is_finite()) {
                return Err(NceError::invalid(
                    "x",
                    format!("model matrix has a non-finite value at row {}, column {}", i + 1, j + 1),
                ));
            }
        }
        Ok(DenseDesign {
            data: &[],
            columns: Some(columns),
            nrow,
            ncol: columns.len(),
        })
    }

    /// As `new` without the scan for non-finite values (tests: a matrix that `new` refuses).
    #[cfg(test)]
    pub(crate) fn from_checked(data: &'a [f64], nrow: usize, ncol: usize) -> Result<Self> {
        if data.len() != nrow * ncol {
            return Self::new(data, nrow, ncol);
        }
        Ok(DenseDesign {
            data,
            columns: None,
            nrow,
            ncol,
        })
    }

    /// As `from_columns` for columns already checked (a block of rows of a checked matrix).
    pub(crate) fn from_checked_columns(columns: &'a [&'a [f64]], nrow: usize) -> Self {
        debug_assert!(columns.iter().all(|c| c.len() == nrow));
        DenseDesign {
            data: &[],
            columns: Some(columns),
            nrow,
            ncol: columns.len(),
        }
    }

    #[inline]
    pub fn col(&self, j: usize) -> &'a [f64] {
        match self.columns {
            Some(c) => c[j],
            None => &self.data[j * self.nrow..(j + 1) * self.nrow],
        }
    }

    /// The matrix, as a view (no copy); `None` for a matrix held by columns.
    pub fn matrix(&self) -> Option<nalgebra::DMatrixView<'a, f64>> {
        match self.columns {
            Some(_) => None,
            None => Some(nalgebra::DMatrixView::from_slice(self.data, self.nrow, self.ncol)),
        }
    }

    fn chunks(&self) -> Vec<(usize, usize)> {
        (0..self.nrow.div_ceil(CHUNK_ROWS).max(1))
            .map(|k| (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(self.nrow)))
            .collect()
    }
}

impl DenseDesign<'_> {
    /// Upper triangles (row j, column k >= j, stored at j * p + k) of X' diag(w_l) X over
    /// fixed chunks of rows, added in chunk order.
    pub(crate) fn crossprod_parts(&self, weights: &[&[f64]]) -> Vec<Vec<f64>> {
        let p = self.ncol;
        let mut total = vec![vec![0.0; p * p]; weights.len()];
        for part in self.crossprod_chunk_parts(weights) {
            for (t, c) in total.iter_mut().zip(part) {
                for (x, y) in t.iter_mut().zip(c) {
                    *x += y;
                }
            }
        }
        total
    }

    /// The per-chunk terms of `crossprod_parts` (chunk, then weight), before they are added:
    /// row shards aligned to the chunks return these (engine/shards.rs).
    pub(crate) fn crossprod_chunk_parts(&self, weights: &[&[f64]]) -> Vec<Vec<Vec<f64>>> {
        let p = self.ncol;
        let nw = weights.len();
        self.chunks()
            .into_par_iter()
            .map(|(a, b)| {
                let mut outs = vec![vec![0.0; p * p]; nw];
                kernels::syrk(self, a..b, weights, &mut outs, None);
                outs
            })
            .collect()
    }

    /// X' v over fixed chunks of rows, added in chunk order.
    pub(crate) fn crossprod_vec_raw(&self, v: &[f64]) -> Vec<f64> {
        let p = self.ncol;
        let mut g = vec![0.0; p];
        for part in self.crossprod_vec_chunk_parts(v) {
            for (x, y) in g.iter_mut().zip(part) {
                *x += y;
            }
        }
        g
    }

    /// The per-chunk terms of `crossprod_vec_raw`, before they are added.
    pub(crate) fn crossprod_vec_chunk_parts(&self, v: &[f64]) -> Vec<Vec<f64>> {
        self.chunks()
            .into_par_iter()
            .map(|(a, b)| kernels::dots(self, a, b, v))
            .collect()
    }

    /// (`crossprod_parts(&[w])`, `crossprod_vec_raw(v)`) in one pass over the rows, with the
    /// same bits.
    pub(crate) fn crossprod_and_vec_raw(&self, w: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let p = self.ncol;
        let parts: Vec<(Vec<f64>, Vec<f64>)> = self
            .chunks()
            .into_par_iter()
            .map(|(a, b)| {
                let mut outs = vec![vec![0.0; p * p]];
                let mut g = vec![0.0; p];
                kernels::syrk(self, a..b, &[w], &mut outs, Some((v, &mut g)));
                (outs.pop().expect("one weight"), g)
            })
            .collect();
        let (mut h, mut g) = (vec![0.0; p * p], vec![0.0; p]);
        for (hc, gc) in parts {
            h.iter_mut().zip(hc).for_each(|(x, y)| *x += y);
            g.iter_mut().zip(gc).for_each(|(x, y)| *x += y);
        }
        (h, g)
    }

    /// out_i = x_i' M x_i, M given as its upper triangle with doubled off-diagonal entries
    /// (row j, column k >= j at j * p + k).
    pub(crate) fn quadratic_forms_raw(&self, mu: &[f64], out: &mut [f64]) {
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let r0 = k * CHUNK_ROWS;
            kernels::quad(self, r0, r0 + o.len(), mu, o);
        });
    }
}

fn full_from_upper(p: usize, u: &[f64]) -> DMatrix<f64> {
    DMatrix::from_fn(p, p, |i, j| if i <= j { u[i * p + j] } else { u[j * p + i] })
}

/// Upper triangle of a symmetric matrix, off-diagonal entries doubled (for x' M x).
pub(crate) fn doubled_upper(m: &DMatrix<f64>) -> Vec<f64> {
    let p = m.nrows();
    let mut u = vec![0.0; p * p];
    for j in 0..p {
        u[j * p + j] = m[(j, j)];
        for k in j + 1..p {
            u[j * p + k] = m[(j, k)] + m[(k, j)];
        }
    }
    u
}

impl Design for DenseDesign<'_> {
    fn nrow(&self) -> usize {
        self.nrow
    }
    fn ncol(&self) -> usize {
        self.ncol
    }

    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let r0 = k * CHUNK_ROWS;
            o.iter_mut().for_each(|v| *v = 0.0);
            for (j, &b) in beta.iter().enumerate() {
                if b == 0.0 {
                    continue;
                }
                let c = &self.col(j)[r0..r0 + o.len()];
                for (v, x) in o.iter_mut().zip(c) {
                    *v += b * x;
                }
            }
        });
    }

    /// Each chunk of rows reads every column once for all of `betas`; each output's sums are
    /// `linear_predictor`'s, in the same order.
    fn linear_predictors(&self, betas: &[&[f64]]) -> Vec<Vec<f64>> {
        let n = self.nrow;
        let mut outs: Vec<Vec<f64>> = betas.iter().map(|_| vec![0.0; n]).collect();
        let mut chunks: Vec<Vec<&mut [f64]>> = (0..n.div_ceil(CHUNK_ROWS)).map(|_| Vec::new()).collect();
        for out in outs.iter_mut() {
            for (k, o) in out.chunks_mut(CHUNK_ROWS).enumerate() {
                chunks[k].push(o);
            }
        }
        chunks.into_par_iter().enumerate().for_each(|(k, mut os)| {
            let r0 = k * CHUNK_ROWS;
            for j in 0..self.ncol {
                let c = &self.col(j)[r0..r0 + os.first().map_or(0, |o| o.len())];
                for (o, beta) in os.iter_mut().zip(betas) {
                    let b = beta[j];
                    if b == 0.0 {
                        continue;
                    }
                    for (v, x) in o.iter_mut().zip(c) {
                        *v += b * x;
                    }
                }
            }
        });
        outs
    }

    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
        let p = self.ncol;
        let (h, g) = self.crossprod_and_vec_raw(w, v);
        (full_from_upper(p, &h), DVector::from_vec(g))
    }

    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        let p = self.ncol;
        self.crossprod_parts(weights)
            .iter()
            .map(|u| full_from_upper(p, u))
            .collect()
    }

    fn crossprod_vec(&self, v: &[f64]) -> DVector<f64> {
        DVector::from_vec(self.crossprod_vec_raw(v))
    }

    fn row_quadratic_forms(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        self.quadratic_forms_raw(&doubled_upper(m), out);
    }

    fn intercept_column(&self) -> Option<usize> {
        (0..self.ncol).find(|&j| self.col(j).iter().all(|&v| v == 1.0))
    }

    fn dense_matrix(&self) -> Option<DMatrix<f64>> {
        let mut x = DMatrix::zeros(self.nrow, self.ncol);
        for j in 0..self.ncol {
            x.column_mut(j).copy_from_slice(self.col(j));
        }
        Some(x)
    }
}

/// Row-chunk kernels. Rows are copied into zero-padded column-major blocks of `SUB` rows and
/// reduced over `LANES` independent partial sums, added in a fixed order at the end, so the
/// results depend neither on the number of threads nor on where a chunk sits in memory. On
/// x86-64 CPUs with AVX2 and FMA the same code is compiled a second time with those features
/// (chosen at run time); elsewhere it is plain (auto-vectorised) Rust.
pub(crate) mod kernels {
    use super::DenseDesign;

    const LANES: usize = 8;
    /// Rows per block (a multiple of 4 * LANES).
    const SUB: usize = 256;

    #[inline(always)]
    fn fm<const F: bool>(a: f64, b: f64, c: f64) -> f64 {
        if F {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }

    #[inline(always)]
    fn hsum(v: &[f64; LANES]) -> f64 {
        ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))
    }

    #[inline(always)]
    fn arr(s: &[f64]) -> &[f64; LANES] {
        s.try_into().unwrap()
    }

    /// The four dot products a_r . b (r < 4), a_r at a[r * SUB..], over `len` (multiple of LANES).
    #[inline(always)]
    fn dot4<const F: bool>(a: &[f64], b: &[f64], len: usize) -> [f64; 4] {
        let (a0, a1, a2, a3) = (
            &a[..len],
            &a[SUB..SUB + len],
            &a[2 * SUB..2 * SUB + len],
            &a[3 * SUB..3 * SUB + len],
        );
        let b = &b[..len];
        let mut acc = [[0.0f64; LANES]; 4];
        for ((((c0, c1), c2), c3), cb) in a0
            .chunks_exact(LANES)
            .zip(a1.chunks_exact(LANES))
            .zip(a2.chunks_exact(LANES))
            .zip(a3.chunks_exact(LANES))
            .zip(b.chunks_exact(LANES))
        {
            let (c0, c1, c2, c3, cb) = (arr(c0), arr(c1), arr(c2), arr(c3), arr(cb));
            for l in 0..LANES {
                acc[0][l] = fm::<F>(c0[l], cb[l], acc[0][l]);
                acc[1][l] = fm::<F>(c1[l], cb[l], acc[1][l]);
                acc[2][l] = fm::<F>(c2[l], cb[l], acc[2][l]);
                acc[3][l] = fm::<F>(c3[l], cb[l], acc[3][l]);
            }
        }
        [hsum(&acc[0]), hsum(&acc[1]), hsum(&acc[2]), hsum(&acc[3])]
    }

    /// Rows s0..s0 + len of every column of `d` into `xs` (`width` rows a column), zero-padded.
    #[inline(always)]
    fn fill_panel(d: &DenseDesign, s0: usize, len: usize, xs: &mut [f64], width: usize) {
        for (j, dst) in xs.chunks_exact_mut(width).take(d.ncol).enumerate() {
            dst[..len].copy_from_slice(&d.col(j)[s0..s0 + len]);
            dst[len..].iter_mut().for_each(|v| *v = 0.0);
        }
    }

    /// Kernel of the cross-product: out[(j, k)] += sum_i a_j[i] b_k[i] over `len` rows (a
    /// multiple of LANES) for the 4 columns a[0..4] and the columns b[k0..k1].
    type Dot4 = fn(&[&[f64]; 4], &[&[f64]], usize) -> Vec<[f64; 4]>;

    fn dot4_all<const F: bool>(a: &[&[f64]; 4], b: &[&[f64]], len: usize) -> Vec<[f64; 4]> {
        let mut flat = vec![0.0; 4 * SUB];
        for (r, ar) in a.iter().enumerate() {
            flat[r * SUB..r * SUB + len].copy_from_slice(&ar[..len]);
        }
        b.iter().map(|bk| dot4::<F>(&flat, bk, len)).collect()
    }

    /// The two kernels of one instruction set: four-column cross-products and one dot product.
    type Kernels = (Dot4, fn(&[f64], &[f64]) -> f64);

    #[inline(always)]
    fn syrk_impl(
        d: &DenseDesign,
        rows: std::ops::Range<usize>,
        ws: &[&[f64]],
        outs: &mut [Vec<f64>],
        mut vg: Option<(&[f64], &mut [f64])>,
        (dot4, dot): Kernels,
    ) {
        let (r0, r1) = (rows.start, rows.end);
        let p = d.ncol;
        let p4 = p.div_ceil(4) * 4;
        let mut xs = vec![0.0; p * SUB];
        let mut wx = vec![0.0; p4 * SUB];
        let mut s0 = r0;
        while s0 < r1 {
            let len = SUB.min(r1 - s0);
            let lenp = len.div_ceil(LANES) * LANES;
            let cols: Vec<&[f64]> = if len == SUB {
                (0..p).map(|j| &d.col(j)[s0..s0 + SUB]).collect()
            } else {
                fill_panel(d, s0, len, &mut xs, SUB);
                xs.chunks(SUB).collect()
            };
            // X'v in the same pass, while the block is in cache (as `dots` adds it).
            if let Some((v, g)) = &mut vg {
                add_block_dots(d, s0..s0 + len, v, g, dot);
            }
            for (w, out) in ws.iter().zip(outs.iter_mut()) {
                let w = &w[s0..s0 + len];
                for j in 0..p {
                    let dst = &mut wx[j * SUB..j * SUB + len];
                    for ((t, x), ww) in dst.iter_mut().zip(cols[j]).zip(w) {
                        *t = x * ww;
                    }
                    wx[j * SUB + len..j * SUB + lenp].iter_mut().for_each(|v| *v = 0.0);
                }
                for j0 in (0..p).step_by(4) {
                    let a: [&[f64]; 4] = std::array::from_fn(|q| &wx[(j0 + q) * SUB..(j0 + q + 1) * SUB]);
                    let res = dot4(&a, &cols[j0..], lenp);
                    for (kk, r) in res.iter().enumerate() {
                        let k = j0 + kk;
                        for (q, v) in r.iter().enumerate() {
                            let j = j0 + q;
                            if j < p && j <= k {
                                out[j * p + k] += v;
                            }
                        }
                    }
                }
            }
            s0 += len;
        }
    }

    /// out += x_i' M x_i for rows i in r0..r1 (out has r1 - r0 entries); mu = doubled upper triangle.
    #[inline(always)]
    fn quad_impl<const F: bool>(d: &DenseDesign, r0: usize, r1: usize, mu: &[f64], out: &mut [f64]) {
        const R: usize = 4;
        const RB: usize = R * LANES;
        let p = d.ncol;
        let mut xs = vec![0.0; p * SUB];
        let mut s0 = r0;
        while s0 < r1 {
            let len = SUB.min(r1 - s0);
            fill_panel(d, s0, len, &mut xs, SUB);
            let mut i0 = 0;
            while i0 < len {
                let mut q = [[0.0f64; LANES]; R];
                for j in 0..p {
                    let mut t = [[0.0f64; LANES]; R];
                    let row = &mu[j * p..j * p + p];
                    for k in j..p {
                        let c = row[k];
                        let xk = &xs[k * SUB + i0..k * SUB + i0 + RB];
                        for r in 0..R {
                            let x = arr(&xk[r * LANES..(r + 1) * LANES]);
                            for l in 0..LANES {
                                t[r][l] = fm::<F>(c, x[l], t[r][l]);
                            }
                        }
                    }
                    let xj = &xs[j * SUB + i0..j * SUB + i0 + RB];
                    for r in 0..R {
                        let x = arr(&xj[r * LANES..(r + 1) * LANES]);
                        for l in 0..LANES {
                            q[r][l] = fm::<F>(x[l], t[r][l], q[r][l]);
                        }
                    }
                }
                let m = RB.min(len - i0);
                let base = s0 - r0 + i0;
                for (i, o) in out[base..base + m].iter_mut().enumerate() {
                    *o = q[i / LANES][i % LANES];
                }
                i0 += RB;
            }
            s0 += len;
        }
    }

    #[inline(always)]
    fn dot_impl<const F: bool>(a: &[f64], b: &[f64]) -> f64 {
        let mut acc = [0.0f64; LANES];
        let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
        let (ra, rb) = (ca.remainder(), cb.remainder());
        for (x, y) in ca.zip(cb) {
            let (x, y) = (arr(x), arr(y));
            for l in 0..LANES {
                acc[l] = fm::<F>(x[l], y[l], acc[l]);
            }
        }
        let mut s = hsum(&acc);
        for (x, y) in ra.iter().zip(rb) {
            s += x * y;
        }
        s
    }

    #[cfg(target_arch = "x86_64")]
    mod fma {
        use super::*;
        use std::arch::x86_64::*;

        #[target_feature(enable = "avx2,fma")]
        unsafe fn hsum4(v: __m256d) -> f64 {
            let mut t = [0.0f64; 4];
            _mm256_storeu_pd(t.as_mut_ptr(), v);
            (t[0] + t[1]) + (t[2] + t[3])
        }

        /// The four a columns' starts, each checked to hold `len` values (the kernels read
        /// them by pointer).
        pub(super) fn column_pointers(a: &[&[f64]; 4], len: usize) -> [*const f64; 4] {
            std::array::from_fn(|r| {
                assert!(a[r].len() >= len);
                a[r].as_ptr()
            })
        }

        /// Four a columns against b columns two at a time: 8 accumulators of 4 lanes.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn dot4_fma(a: &[&[f64]; 4], b: &[&[f64]], len: usize) -> Vec<[f64; 4]> {
            let mut res = vec![[0.0f64; 4]; b.len()];
            let ap = column_pointers(a, len);
            let mut k = 0;
            while k < b.len() {
                let two = k + 1 < b.len();
                assert!(b[k].len() >= len && (!two || b[k + 1].len() >= len));
                let b0 = b[k].as_ptr();
                let b1 = if two { b[k + 1].as_ptr() } else { b0 };
                let mut acc = [_mm256_setzero_pd(); 8];
                let mut i = 0;
                while i < len {
                    let x0 = _mm256_loadu_pd(b0.add(i));
                    let x1 = _mm256_loadu_pd(b1.add(i));
                    for r in 0..4 {
                        let y = _mm256_loadu_pd(ap[r].add(i));
                        acc[2 * r] = _mm256_fmadd_pd(y, x0, acc[2 * r]);
                        acc[2 * r + 1] = _mm256_fmadd_pd(y, x1, acc[2 * r + 1]);
                    }
                    i += 4;
                }
                for r in 0..4 {
                    res[k][r] = hsum4(acc[2 * r]);
                    if two {
                        res[k + 1][r] = hsum4(acc[2 * r + 1]);
                    }
                }
                k += 2;
            }
            res
        }

        fn dot4_fma_safe(a: &[&[f64]; 4], b: &[&[f64]], len: usize) -> Vec<[f64; 4]> {
            // SAFETY: only reached after the run-time feature check in `syrk`.
            unsafe { dot4_fma(a, b, len) }
        }

        pub(super) fn dot_safe(a: &[f64], b: &[f64]) -> f64 {
            // SAFETY: as above.
            unsafe { dot(a, b) }
        }

        #[target_feature(enable = "avx2,fma")]
        pub unsafe fn syrk(
            d: &DenseDesign,
            rows: std::ops::Range<usize>,
            ws: &[&[f64]],
            outs: &mut [Vec<f64>],
            vg: Option<(&[f64], &mut [f64])>,
        ) {
            syrk_impl(d, rows, ws, outs, vg, (dot4_fma_safe, dot_safe))
        }
        /// x_i' M x_i for 32 rows at a time: t = sum_{k >= j} M'_jk x_k, q += x_j t.
        #[target_feature(enable = "avx2,fma")]
        pub unsafe fn quad(d: &DenseDesign, r0: usize, r1: usize, mu: &[f64], out: &mut [f64]) {
            let p = d.ncol;
            assert!(mu.len() >= p * p && out.len() >= r1 - r0);
            let mut xs = vec![0.0; p * SUB];
            let mut s0 = r0;
            while s0 < r1 {
                let len = SUB.min(r1 - s0);
                fill_panel(d, s0, len, &mut xs, SUB);
                let xp = xs.as_ptr();
                let mut i0 = 0;
                while i0 < len {
                    let mut q = [_mm256_setzero_pd(); 8];
                    for j in 0..p {
                        let mut t = [_mm256_setzero_pd(); 8];
                        for k in j..p {
                            let c = _mm256_set1_pd(*mu.get_unchecked(j * p + k));
                            let base = xp.add(k * SUB + i0);
                            for r in 0..8 {
                                t[r] = _mm256_fmadd_pd(c, _mm256_loadu_pd(base.add(4 * r)), t[r]);
                            }
                        }
                        let base = xp.add(j * SUB + i0);
                        for r in 0..8 {
                            q[r] = _mm256_fmadd_pd(_mm256_loadu_pd(base.add(4 * r)), t[r], q[r]);
                        }
                    }
                    let mut buf = [0.0f64; 32];
                    for r in 0..8 {
                        _mm256_storeu_pd(buf.as_mut_ptr().add(4 * r), q[r]);
                    }
                    let m = 32.min(len - i0);
                    let base = s0 - r0 + i0;
                    out[base..base + m].copy_from_slice(&buf[..m]);
                    i0 += 32;
                }
                s0 += len;
            }
        }

        #[target_feature(enable = "avx2,fma")]
        pub unsafe fn dot(a: &[f64], b: &[f64]) -> f64 {
            let n = a.len().min(b.len());
            let (ap, bp) = (a.as_ptr(), b.as_ptr());
            let mut acc = [_mm256_setzero_pd(); 4];
            let mut i = 0;
            while i + 16 <= n {
                for r in 0..4 {
                    acc[r] = _mm256_fmadd_pd(
                        _mm256_loadu_pd(ap.add(i + 4 * r)),
                        _mm256_loadu_pd(bp.add(i + 4 * r)),
                        acc[r],
                    );
                }
                i += 16;
            }
            let v = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
            let mut s = hsum4(v);
            while i < n {
                s += a[i] * b[i];
                i += 1;
            }
            s
        }
    }

    /// The cross-product on AVX-512 as an outer-product kernel: each block's weighted rows are
    /// packed 16 columns to a panel, row by row, and a 16 x 8 tile of X'WX (16 accumulators)
    /// takes 2 loads and 8 broadcasts per row for its 16 multiply-adds, all from the L1 and L2
    /// caches. The dot-product kernel of the AVX2 build reads 8 vectors per 16 and is bound by
    /// the L2 cache's bandwidth here (0.55 of the time on 42,000 x 48: bench_syrk).
    // The AVX-512 intrinsics are stable since rustc 1.89; build.rs sets nce_avx512 only there.
    #[cfg(all(target_arch = "x86_64", nce_avx512))]
    #[allow(clippy::incompatible_msrv)]
    mod avx512 {
        use super::*;
        use std::arch::x86_64::*;

        /// Columns to a packed panel, and to a kernel tile.
        const PANEL: usize = 16;
        const TILE: usize = 8;

        #[inline(always)]
        unsafe fn idx(e: [i64; 8]) -> __m512i {
            _mm512_set_epi64(e[7], e[6], e[5], e[4], e[3], e[2], e[1], e[0])
        }

        /// r[q] holds 8 rows of column q; returns t[i] holding row i's 8 columns.
        #[inline(always)]
        unsafe fn transpose8(r: [__m512d; 8]) -> [__m512d; 8] {
            let a: [__m512d; 8] = std::array::from_fn(|q| {
                let (x, y) = (r[q & !1], r[q | 1]);
                if q % 2 == 0 {
                    _mm512_unpacklo_pd(x, y)
                } else {
                    _mm512_unpackhi_pd(x, y)
                }
            });
            // a[0] = (r0[0], r1[0], r0[2], r1[2], ...), a[1] the odd rows; a[2], a[3] of r2, r3.
            let (lo, hi) = (idx([0, 1, 8, 9, 4, 5, 12, 13]), idx([2, 3, 10, 11, 6, 7, 14, 15]));
            let b: [__m512d; 8] = std::array::from_fn(|q| {
                // b[4h + m] for the rows 4h..4h + 4: m = 0, 1 rows 0|4 and 1|5; m = 2, 3 rows 2|6, 3|7.
                let (h, m) = (q / 4, q % 4);
                let (x, y) = (a[4 * h + m % 2], a[4 * h + 2 + m % 2]);
                _mm512_permutex2var_pd(x, if m < 2 { lo } else { hi }, y)
            });
            // b[m] = (r0..r3 at row m, r0..r3 at row m + 4) in the order m = 0, 1, 2, 3 -> rows 0, 1, 2, 3.
            std::array::from_fn(|i| {
                let m = i % 4;
                let (x, y) = (b[m], b[4 + m]);
                if i < 4 {
                    _mm512_shuffle_f64x2::<0x44>(x, y)
                } else {
                    _mm512_shuffle_f64x2::<0xEE>(x, y)
                }
            })
        }

        /// pack[(J * len + i) * PANEL + c] = w_i x_{s0 + i, PANEL J + c}, zero past the last column.
        #[target_feature(enable = "avx512f,avx512dq,fma")]
        unsafe fn pack_weighted(d: &DenseDesign, s0: usize, len: usize, w: &[f64], pack: &mut [f64]) {
            let p = d.ncol;
            let np = p.div_ceil(PANEL);
            assert!(w.len() >= len && pack.len() >= np * len * PANEL);
            let full = len / 8 * 8;
            for jp in 0..np {
                for h in 0..PANEL / 8 {
                    let c0 = PANEL * jp + 8 * h;
                    let cols: [Option<&[f64]>; 8] =
                        std::array::from_fn(|q| (c0 + q < p).then(|| &d.col(c0 + q)[s0..s0 + len]));
                    let mut i0 = 0;
                    while i0 < full {
                        let wv = _mm512_loadu_pd(w.as_ptr().add(i0));
                        let r: [__m512d; 8] = std::array::from_fn(|q| match cols[q] {
                            Some(c) => _mm512_mul_pd(_mm512_loadu_pd(c.as_ptr().add(i0)), wv),
                            None => _mm512_setzero_pd(),
                        });
                        let t = transpose8(r);
                        for (i, ti) in t.iter().enumerate() {
                            _mm512_storeu_pd(pack.as_mut_ptr().add((jp * len + i0 + i) * PANEL + 8 * h), *ti);
                        }
                        i0 += 8;
                    }
                    for i in full..len {
                        for (q, c) in cols.iter().enumerate() {
                            pack[(jp * len + i) * PANEL + 8 * h + q] = c.map_or(0.0, |c| c[i] * w[i]);
                        }
                    }
                }
            }
        }

        /// ct[k * pp + j] += sum over the block's rows of (w x_j) x_k, for the tiles that hold
        /// some j <= k (entries below the diagonal of those tiles are summed and not read).
        #[target_feature(enable = "avx512f,avx512dq,fma")]
        unsafe fn outer_block(d: &DenseDesign, s0: usize, len: usize, pack: &[f64], ct: &mut [f64], pp: usize) {
            let p = d.ncol;
            let np = p.div_ceil(PANEL);
            assert!(pack.len() >= np * len * PANEL && ct.len() >= p * pp && pp >= np * PANEL);
            for jp in 0..np {
                let j0 = PANEL * jp;
                let a = pack.as_ptr().add(jp * len * PANEL);
                for kt in j0 / TILE..p.div_ceil(TILE) {
                    let k0 = TILE * kt;
                    // Past the last column: the last one again (its sums are not kept).
                    let bp: [*const f64; TILE] =
                        std::array::from_fn(|q| d.col((k0 + q).min(p - 1))[s0..s0 + len].as_ptr());
                    let mut acc = [_mm512_setzero_pd(); 2 * TILE];
                    for i in 0..len {
                        let a0 = _mm512_loadu_pd(a.add(PANEL * i));
                        let a1 = _mm512_loadu_pd(a.add(PANEL * i + 8));
                        for q in 0..TILE {
                            let b = _mm512_set1_pd(*bp[q].add(i));
                            acc[q] = _mm512_fmadd_pd(a0, b, acc[q]);
                            acc[TILE + q] = _mm512_fmadd_pd(a1, b, acc[TILE + q]);
                        }
                    }
                    for q in 0..TILE.min(p - k0) {
                        let c = ct.as_mut_ptr().add((k0 + q) * pp + j0);
                        _mm512_storeu_pd(c, _mm512_add_pd(_mm512_loadu_pd(c), acc[q]));
                        _mm512_storeu_pd(c.add(8), _mm512_add_pd(_mm512_loadu_pd(c.add(8)), acc[TILE + q]));
                    }
                }
            }
        }

        /// `fma::quad` on 64 rows at a time (eight 8-lane vectors), each group's rows copied
        /// column after column into one compact panel (p x 64: 24 KB at p = 48) that stays in
        /// the L1 cache over its p^2 / 2 passes; a block's columns 256 rows apart fall into the
        /// same few L1 sets and were re-read from L2. Each row's sums are taken in the same
        /// order, so the values are the AVX2 build's to the bit.
        #[target_feature(enable = "avx512f,avx512dq,fma")]
        pub unsafe fn quad(d: &DenseDesign, r0: usize, r1: usize, mu: &[f64], out: &mut [f64]) {
            const G: usize = 64;
            let p = d.ncol;
            assert!(mu.len() >= p * p && out.len() >= r1 - r0);
            let mut xs = vec![0.0; p * G];
            let mut s0 = r0;
            while s0 < r1 {
                let len = G.min(r1 - s0);
                fill_panel(d, s0, len, &mut xs, G);
                let xp = xs.as_ptr();
                let mut q = [_mm512_setzero_pd(); 8];
                for j in 0..p {
                    let mut t = [_mm512_setzero_pd(); 8];
                    for k in j..p {
                        let c = _mm512_set1_pd(*mu.get_unchecked(j * p + k));
                        let base = xp.add(k * G);
                        for r in 0..8 {
                            t[r] = _mm512_fmadd_pd(c, _mm512_loadu_pd(base.add(8 * r)), t[r]);
                        }
                    }
                    let base = xp.add(j * G);
                    for r in 0..8 {
                        q[r] = _mm512_fmadd_pd(_mm512_loadu_pd(base.add(8 * r)), t[r], q[r]);
                    }
                }
                let mut buf = [0.0f64; G];
                for r in 0..8 {
                    _mm512_storeu_pd(buf.as_mut_ptr().add(8 * r), q[r]);
                }
                out[s0 - r0..s0 - r0 + len].copy_from_slice(&buf[..len]);
                s0 += len;
            }
        }

        #[target_feature(enable = "avx512f,avx512dq,fma")]
        pub unsafe fn syrk(
            d: &DenseDesign,
            rows: std::ops::Range<usize>,
            ws: &[&[f64]],
            outs: &mut [Vec<f64>],
            mut vg: Option<(&[f64], &mut [f64])>,
        ) {
            let p = d.ncol;
            let pp = p.div_ceil(PANEL) * PANEL;
            let mut pack = vec![0.0; pp * SUB];
            let mut cts = vec![vec![0.0; p * pp]; ws.len()];
            let mut s0 = rows.start;
            while s0 < rows.end {
                let len = SUB.min(rows.end - s0);
                // X'v by the AVX2 kernel (AVX-512 implies AVX2 and FMA): the same bits as there.
                if let Some((v, g)) = &mut vg {
                    add_block_dots(d, s0..s0 + len, v, g, super::fma::dot_safe);
                }
                for (w, ct) in ws.iter().zip(cts.iter_mut()) {
                    pack_weighted(d, s0, len, &w[s0..s0 + len], &mut pack);
                    outer_block(d, s0, len, &pack, ct, pp);
                }
                s0 += len;
            }
            for (ct, out) in cts.iter().zip(outs.iter_mut()) {
                for k in 0..p {
                    for j in 0..=k {
                        out[j * p + k] += ct[k * pp + j];
                    }
                }
            }
        }
    }

    /// outs[l][j * p + k] += sum_{i in rows} ws[l][i] x_ij x_ik for j <= k; with `vg = (v, g)`
    /// also g += X'v over the same rows, block by block as `dots` adds it.
    pub fn syrk(
        d: &DenseDesign,
        rows: std::ops::Range<usize>,
        ws: &[&[f64]],
        outs: &mut [Vec<f64>],
        vg: Option<(&[f64], &mut [f64])>,
    ) {
        #[cfg(all(target_arch = "x86_64", nce_avx512))]
        if crate::engine::simd::simd() == crate::engine::simd::Simd::Avx512 {
            // SAFETY: the CPU has the features the function was compiled for.
            return unsafe { avx512::syrk(d, rows, ws, outs, vg) };
        }
        #[cfg(target_arch = "x86_64")]
        if crate::engine::simd::vector() {
            // SAFETY: the CPU has the features the function was compiled for.
            return unsafe { fma::syrk(d, rows, ws, outs, vg) };
        }
        syrk_impl(d, rows, ws, outs, vg, (dot4_all::<false>, dot))
    }

    /// g_j += x_j' v over the rows of one block: the one step of X'v that `dots` and the fused
    /// pass of `syrk` share, so the two give the same bits.
    #[inline(always)]
    fn add_block_dots(
        d: &DenseDesign,
        rows: std::ops::Range<usize>,
        v: &[f64],
        g: &mut [f64],
        dot: fn(&[f64], &[f64]) -> f64,
    ) {
        for (j, gj) in g.iter_mut().enumerate() {
            *gj += dot(&d.col(j)[rows.clone()], &v[rows.clone()]);
        }
    }

    /// X'v over rows r0..r1, each column's sum added block by block (SUB rows) in row order.
    pub fn dots(d: &DenseDesign, r0: usize, r1: usize, v: &[f64]) -> Vec<f64> {
        let mut g = vec![0.0; d.ncol];
        let mut s0 = r0;
        while s0 < r1 {
            let len = SUB.min(r1 - s0);
            add_block_dots(d, s0..s0 + len, v, &mut g, dot);
            s0 += len;
        }
        g
    }

    /// out[i - r0] = x_i' M x_i for rows r0..r1; mu = M's upper triangle, off-diagonal doubled.
    pub fn quad(d: &DenseDesign, r0: usize, r1: usize, mu: &[f64], out: &mut [f64]) {
        #[cfg(all(target_arch = "x86_64", nce_avx512))]
        if crate::engine::simd::simd() == crate::engine::simd::Simd::Avx512 {
            // SAFETY: the CPU has the features the function was compiled for.
            return unsafe { avx512::quad(d, r0, r1, mu, out) };
        }
        #[cfg(target_arch = "x86_64")]
        if crate::engine::simd::vector() {
            // SAFETY: as above.
            return unsafe { fma::quad(d, r0, r1, mu, out) };
        }
        quad_impl::<false>(d, r0, r1, mu, out)
    }

    pub fn dot(a: &[f64], b: &[f64]) -> f64 {
        #[cfg(target_arch = "x86_64")]
        if crate::engine::simd::vector() {
            // SAFETY: as above.
            return unsafe { fma::dot(a, b) };
        }
        dot_impl::<false>(a, b)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::engine::simd::{available, Simd};

        /// Every build's cross-product kernel against the naive sums: column counts that leave
        /// each tile width partly filled, a partial last block, three weights and X'v fused.
        #[test]
        fn every_build_matches_naive_sums() {
            for &(n, p) in &[(1037usize, 1usize), (1037, 5), (300, 9), (2 * SUB + 3, 46)] {
                let x: Vec<f64> = (0..n * p).map(|i| ((i * 7919 % 1013) as f64) / 1013.0 - 0.5).collect();
                let d = DenseDesign::new(&x, n, p).unwrap();
                let ws: Vec<Vec<f64>> = (0..3)
                    .map(|l| (0..n).map(|i| 0.1 + ((i + l) % 17) as f64 / 17.0).collect())
                    .collect();
                let wr: Vec<&[f64]> = ws.iter().map(|w| w.as_slice()).collect();
                let v: Vec<f64> = (0..n).map(|i| (i % 5) as f64 - 2.0).collect();
                for simd in available() {
                    let mut outs = vec![vec![0.0; p * p]; 3];
                    let mut g = vec![0.0; p];
                    let vg = Some((v.as_slice(), g.as_mut_slice()));
                    match simd {
                        #[cfg(all(target_arch = "x86_64", nce_avx512))]
                        // SAFETY: available() found the features.
                        Simd::Avx512 => unsafe { avx512::syrk(&d, 0..n, &wr, &mut outs, vg) },
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: as above.
                        Simd::Avx2 => unsafe { fma::syrk(&d, 0..n, &wr, &mut outs, vg) },
                        _ => syrk_impl(&d, 0..n, &wr, &mut outs, vg, (dot4_all::<false>, dot_impl::<false>)),
                    }
                    for (w, out) in ws.iter().zip(&outs) {
                        for j in 0..p {
                            for k in 0..p {
                                let want: f64 = (0..n).map(|i| w[i] * x[j * n + i] * x[k * n + i]).sum();
                                let got = if j <= k { out[j * p + k] } else { 0.0 };
                                let want = if j <= k { want } else { 0.0 };
                                assert!(
                                    (got - want).abs() <= 1e-10 * want.abs().max(1.0),
                                    "{simd:?} {n} {p} {j} {k}: {got} {want}"
                                );
                            }
                        }
                    }
                    for (j, gj) in g.iter().enumerate() {
                        let want: f64 = (0..n).map(|i| v[i] * x[j * n + i]).sum();
                        assert!((gj - want).abs() <= 1e-10 * want.abs().max(1.0), "{simd:?} g {j}");
                    }
                }
            }
        }

        /// Every build's quadratic forms x_i' M x_i against the naive sums, on row counts that
        /// leave partial 32- and 64-row groups; the two FMA builds agree to the bit (each row's
        /// sums in the same order).
        #[test]
        fn every_build_quad_matches_naive_sums() {
            for &(n, p) in &[(1037usize, 1usize), (300, 9), (2 * SUB + 45, 46)] {
                let x: Vec<f64> = (0..n * p).map(|i| ((i * 7919 % 1013) as f64) / 1013.0 - 0.5).collect();
                let d = DenseDesign::new(&x, n, p).unwrap();
                let m = nalgebra::DMatrix::from_fn(p, p, |j, k| 1.0 / (1.0 + j as f64 + k as f64));
                let mu = crate::engine::design::doubled_upper(&m);
                let (r0, r1) = (3, n);
                let mut fused: Option<Vec<f64>> = None;
                for simd in available() {
                    let mut out = vec![0.0; r1 - r0];
                    match simd {
                        #[cfg(all(target_arch = "x86_64", nce_avx512))]
                        // SAFETY: available() found the features.
                        Simd::Avx512 => unsafe { avx512::quad(&d, r0, r1, &mu, &mut out) },
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: as above.
                        Simd::Avx2 => unsafe { fma::quad(&d, r0, r1, &mu, &mut out) },
                        _ => quad_impl::<false>(&d, r0, r1, &mu, &mut out),
                    }
                    for (i, got) in out.iter().enumerate() {
                        let r = r0 + i;
                        let want: f64 = (0..p)
                            .flat_map(|j| (0..p).map(move |k| (j, k)))
                            .map(|(j, k)| x[j * n + r] * m[(j, k)] * x[k * n + r])
                            .sum();
                        assert!(
                            (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                            "{simd:?} {n} {p} {r}"
                        );
                    }
                    if simd != Simd::None {
                        match &fused {
                            Some(prev) => assert_eq!(prev, &out, "{simd:?} differs from the other FMA build"),
                            None => fused = Some(out),
                        }
                    }
                }
            }
        }
    }
}

/// Run `f` in a rayon pool of `threads` threads built for this call (never the global pool);
/// for the unit tests of thread invariance (integration tests and examples have their own copy
/// in tests/support/threads.rs).
#[cfg(test)]
pub(crate) fn with_threads<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| NceError::Numerical(format!("could not start a thread pool: {e}")))?;
    Ok(pool.install(f))
}

/// Test-only: `struct $name<'a>(DenseDesign<'a>)`, a `Design` without `dense_matrix` (so REML
/// never works on pairs of rows) whose other optional methods are the trait's `defaults` or
/// DenseDesign's (`forwarded`). The caller must have `Design` in scope.
#[cfg(test)]
macro_rules! dense_without_matrix {
    ($name:ident, defaults) => {
        $crate::engine::design::dense_without_matrix!($name {});
    };
    ($name:ident, forwarded) => {
        $crate::engine::design::dense_without_matrix!($name {
            fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<nalgebra::DMatrix<f64>> {
                self.0.weighted_crossprods(weights)
            }
            fn crossprod_vec(&self, v: &[f64]) -> nalgebra::DVector<f64> {
                self.0.crossprod_vec(v)
            }
            fn row_quadratic_forms(&self, m: &nalgebra::DMatrix<f64>, out: &mut [f64]) {
                self.0.row_quadratic_forms(m, out)
            }
        });
    };
    ($name:ident { $($optional:tt)* }) => {
        struct $name<'a>($crate::engine::design::DenseDesign<'a>);
        impl $crate::engine::design::Design for $name<'_> {
            fn nrow(&self) -> usize {
                self.0.nrow()
            }
            fn ncol(&self) -> usize {
                self.0.ncol()
            }
            fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
                self.0.linear_predictor(beta, out)
            }
            fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (nalgebra::DMatrix<f64>, nalgebra::DVector<f64>) {
                self.0.weighted_crossprod(w, v)
            }
            $($optional)*
        }
    };
}
#[cfg(test)]
pub(crate) use dense_without_matrix;

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(n: usize) -> (Vec<f64>, usize, usize) {
        let p = 3;
        let mut x = vec![0.0; n * p];
        for i in 0..n {
            x[i] = 1.0;
            x[n + i] = (i as f64 * 0.37).sin();
            x[2 * n + i] = (i as f64 * 0.11).cos() * 3.0;
        }
        (x, n, p)
    }

    #[test]
    fn crossprod_matches_naive_and_is_thread_invariant() {
        let (x, n, p) = toy(10_000);
        let d = DenseDesign::new(&x, n, p).unwrap();
        let w: Vec<f64> = (0..n).map(|i| 0.5 + (i % 7) as f64 / 7.0).collect();
        let v: Vec<f64> = (0..n).map(|i| (i % 5) as f64 - 2.0).collect();
        let (h1, g1) = with_threads(1, || d.weighted_crossprod(&w, &v)).unwrap();
        let (h2, g2) = with_threads(2, || d.weighted_crossprod(&w, &v)).unwrap();
        assert_eq!(h1, h2);
        assert_eq!(g1, g2);
        let mut naive = DMatrix::<f64>::zeros(p, p);
        for i in 0..n {
            for j in 0..p {
                for k in 0..p {
                    naive[(j, k)] += w[i] * x[j * n + i] * x[k * n + i];
                }
            }
        }
        assert!((h1 - naive).abs().max() < 1e-8);
    }

    #[test]
    fn columns_give_the_same_products_as_one_matrix() {
        let (x, n, p) = toy(10_000);
        let whole = DenseDesign::new(&x, n, p).unwrap();
        // Two blocks, as R holds a model matrix's terms: the columns lie in different vectors.
        let (b1, b2) = (x[..n].to_vec(), x[n..].to_vec());
        let cols: Vec<&[f64]> = vec![&b1, &b2[..n], &b2[n..]];
        let parts = DenseDesign::from_columns(&cols, n).unwrap();
        assert!(parts.matrix().is_none());
        let w: Vec<f64> = (0..n).map(|i| 0.5 + (i % 7) as f64 / 7.0).collect();
        let v: Vec<f64> = (0..n).map(|i| (i % 5) as f64 - 2.0).collect();
        assert_eq!(whole.weighted_crossprod(&w, &v), parts.weighted_crossprod(&w, &v));
        let beta = [0.3, -1.2, 0.7];
        let (mut e1, mut e2) = (vec![0.0; n], vec![0.0; n]);
        whole.linear_predictor(&beta, &mut e1);
        parts.linear_predictor(&beta, &mut e2);
        assert_eq!(e1, e2);
        // Several at once (a partial last chunk, a zero coefficient skipped): the same bits.
        let beta2 = [0.0, 2.5, -0.4];
        let mut e3 = vec![0.0; n];
        whole.linear_predictor(&beta2, &mut e3);
        assert_eq!(parts.linear_predictors(&[&beta, &beta2]), vec![e1.clone(), e3]);
        let short = [1.0, 2.0];
        let e = DenseDesign::from_columns(&cols[..1], n + 1).unwrap_err();
        assert!(e.to_string().contains("column 1 has"), "{e}");
        let bad = [1.0, f64::INFINITY];
        let e = DenseDesign::from_columns(&[&short[..], &bad[..]], 2).unwrap_err();
        assert!(e.to_string().contains("row 2, column 2"), "{e}");
    }

    #[test]
    fn rejects_wrong_length_and_non_finite() {
        assert!(DenseDesign::new(&[1.0, 2.0, 3.0], 2, 2).is_err());
        let e = DenseDesign::new(&[1.0, f64::NAN, 3.0, 4.0], 2, 2).unwrap_err();
        assert!(e.to_string().contains("row 2, column 1"), "{e}");
    }
}
