//! Discretised designs (Wood, Li, Shaddick and Augustin 2017, section 3): the model matrix is a
//! list of terms X = [X_1 | ... | X_K], each either a small matrix of distinct rows M_j (m_j x p_j)
//! with an index k_j (row r of X_j is M_j[k_j(r), ]), or a dense block (at most one; the
//! parametric columns). Nothing n x p is formed:
//!
//! - X beta: v_j = M_j beta_j, then eta_r = sum_j v_j[k_j(r)], O(n K).
//! - X_j' W X_j = M_j' diag(s_j) M_j with s_j the sums of w over the rows of each distinct value.
//! - X_j' W X_l (j != l): either M_j' T M_l with T[a, c] the sum of w over rows with k_j = a and
//!   k_l = c (when m_j m_l is small), or M_j' D with D[a, ] = sum over rows with k_j = a of
//!   w_r X_l[r, ], O(n p_l).
//! - x_r' H x_r: per-value tables of the quadratic forms, looked up per row.
//!
//! When the cross blocks of many terms would cost more than one pass over X expanded, the fit
//! holds X dense instead (`DiscreteDesign::layout`, a cost model of these kernels).
//!
//! Sums stream over the rows in row order (the index vectors, w and the small matrices stay in
//! cache): each fixed chunk of rows gives a partial sum, and partials are added in chunk order,
//! so results do not depend on the number of threads.

use crate::engine::design::{doubled_upper, DenseDesign, Design, CHUNK_ROWS};
use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Rows per partial sum (fixed, so sums do not depend on the thread count).
const CHUNK: usize = 1 << 16;
/// Partial sums computed at once (bounds the memory of the partials).
const BATCH: usize = 16;
/// Largest m_j m_l for which a cross block is formed by a table of weight sums.
const TABLE_MAX: usize = 1 << 16;

/// Costs per operation of the kernels of X' W X, in multiply-adds of the dense kernel (blocked
/// and vectorised; 0.07 ns per weight vector on the 2-core build machine): a row of a pass over
/// the rows reading an index, an add into a per-value sum at a row's index, a multiply-add of
/// the small products with the distinct rows, an entry of the per-value sums written out, a
/// multiply-add of gathered row blocks, an add reading the dense block's columns at stride n.
/// Fitted (least squares on the log times) to the times of 48 shapes in `calibrate_layout_costs`
/// (ignored test; 1 and 8 weight vectors, 2 threads, 2026-11-27): the choice it makes was the
/// faster one in 81 of 96 cases, and where it was not, the other layout was at most 1.65x faster.
const COST_PASS: f64 = 22.0;
const COST_SCATTERED: f64 = 8.6;
const COST_FLOPS: f64 = 3.25;
const COST_SUMS: f64 = 34.6;
const COST_GATHERED: f64 = 6.4;
const COST_STRIDED: f64 = 25.1;
/// The largest expanded design (bytes) the dense layout may take: beyond it the memory that
/// compression saves is worth more than its time.
const DENSE_MAX_BYTES: f64 = (1u64 << 30) as f64;

/// How a discretised design is held while it is fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Each term as its distinct rows and an index (nothing n x p is formed).
    Compressed,
    /// The rounded bases expanded into one dense n x p block.
    Dense,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Compressed => "compressed",
            Layout::Dense => "dense",
        }
    }
}

/// The modelled cost of one X' W X (the step the REML iteration repeats most), in multiply-adds
/// of the dense kernel: `compressed` by the terms' per-value sums and cross blocks as
/// `DiscreteDesign` forms them, `dense` with X expanded, n p (p + 1) / 2. With many terms of many
/// distinct values the cross blocks, a pass over the rows each, cost more than one dense pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayoutCosts {
    pub compressed: f64,
    pub dense: f64,
}

/// Operation counts of X' W X (one weight vector), by kind.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ops {
    /// Passes over the rows reading an index (value sums, and one per cross block).
    pub(crate) passes: f64,
    /// Adds into a per-value sum at a row's index.
    pub(crate) scattered: f64,
    /// The same, reading the dense block's columns at stride n.
    pub(crate) strided: f64,
    /// Multiply-adds of gathered row blocks.
    pub(crate) gathered: f64,
    /// Multiply-adds of the small products with the distinct rows.
    pub(crate) flops: f64,
    /// Multiply-adds of the dense kernel (the dense term's own block).
    pub(crate) dense: f64,
    /// Entries of the per-value sums written out and copied (m_b p_o per cross block).
    pub(crate) sums: f64,
}

impl Ops {
    fn add(&mut self, o: &Ops) {
        self.passes += o.passes;
        self.scattered += o.scattered;
        self.strided += o.strided;
        self.gathered += o.gathered;
        self.flops += o.flops;
        self.dense += o.dense;
        self.sums += o.sums;
    }
}

/// Whether the cross block of mapped b and o is formed by a table of weight sums.
fn table_ok(b: &Mapped, o: &Term, n: usize) -> bool {
    matches!(o, Term::Mapped(om) if b.m * om.m <= TABLE_MAX && b.m * om.m <= n)
}

/// Operations of the cross block bucketed by b: a table of weight sums over (k_b, k_o), or the
/// sums of w x_o per value of b (reading a dense o's columns strided); then the small products
/// with b's distinct rows.
fn pair_ops(b: &Mapped, o: &Term, n: usize) -> Ops {
    let (bm, bp, op) = (b.m as f64, b.p as f64, o.p() as f64);
    if table_ok(b, o, n) {
        return Ops {
            passes: n as f64,
            scattered: n as f64,
            flops: bm * o.m(n) as f64 * op + bm * bp * op,
            sums: bm * o.m(n) as f64,
            ..Ops::default()
        };
    }
    let adds = n as f64 * op;
    let (scattered, strided) = match o {
        Term::Mapped(_) => (adds, 0.0),
        Term::Dense(_) => (0.0, adds),
    };
    Ops {
        passes: n as f64,
        scattered,
        strided,
        flops: bm * bp * op,
        sums: bm * op,
        ..Ops::default()
    }
}

/// The upper triangle of a square matrix, row-major (row j, column k >= j at j * p + k).
pub(crate) fn upper(h: &DMatrix<f64>) -> Vec<f64> {
    let p = h.nrows();
    let mut u = vec![0.0; p * p];
    for j in 0..p {
        for k in j..p {
            u[j * p + k] = h[(j, k)];
        }
    }
    u
}

/// A zero vector written out rather than calloc'd. The partial sums read before they write, and
/// a first read of calloc'd memory maps the shared zero page, so each first write is then a
/// copy-on-write fault with a TLB shootdown across the threads: with partials of tens of MB, as
/// many per-value sums per weight vector make, that took a third of the CPU time.
fn zeroed(len: usize) -> Vec<f64> {
    let mut v: Vec<f64> = Vec::with_capacity(len);
    // Opaque to the optimiser, which would otherwise turn the allocation and fill into calloc.
    std::hint::black_box(&mut v).resize(len, 0.0);
    v
}

/// The `n` blocks of `w` columns of `m`, in order.
fn split_columns(m: &DMatrix<f64>, n: usize, w: usize) -> Vec<DMatrix<f64>> {
    (0..n).map(|l| m.columns(l * w, w).into_owned()).collect()
}

/// sum over fixed row chunks of f(r0, r1, partial), partials added in chunk order.
fn chunked_sum(n: usize, len: usize, f: impl Fn(usize, usize, &mut [f64]) + Sync) -> Vec<f64> {
    let nchunk = n.div_ceil(CHUNK).max(1);
    let mut total = zeroed(len);
    for b0 in (0..nchunk).step_by(BATCH) {
        let parts: Vec<Vec<f64>> = (b0..(b0 + BATCH).min(nchunk))
            .into_par_iter()
            .map(|c| {
                let mut part = zeroed(len);
                f(c * CHUNK, ((c + 1) * CHUNK).min(n), &mut part);
                part
            })
            .collect();
        for part in parts {
            for (t, v) in total.iter_mut().zip(part) {
                *t += v;
            }
        }
    }
    total
}

/// One term of a discretised design, as given: `values` is m x p column-major; `index` (1-based,
/// length nrow) picks the row of `values` of each row of the design, or is `None` for a dense
/// block (m = nrow, row r is row r).
#[derive(Debug, Clone, Copy)]
pub struct TermSpec<'a> {
    pub values: &'a [f64],
    pub m: usize,
    pub p: usize,
    pub index: Option<&'a [i32]>,
}

#[derive(Debug, Clone)]
struct Mapped<'a> {
    m: usize,
    p: usize,
    mat: DMatrix<f64>,
    /// `mat` row-major, for row gathers.
    rows: Vec<f64>,
    index: &'a [i32],
}

impl Mapped<'_> {
    #[inline]
    fn k(&self, r: usize) -> usize {
        (self.index[r] - 1) as usize
    }

    #[inline]
    fn row(&self, a: usize) -> &[f64] {
        &self.rows[a * self.p..(a + 1) * self.p]
    }

    /// M' diag(s) M.
    fn weighted_gram(&self, s: &[f64]) -> DMatrix<f64> {
        let ws = DMatrix::from_fn(self.m, self.p, |a, i| self.mat[(a, i)] * s[a]);
        self.mat.tr_mul(&ws)
    }
}

/// Per mapped term (None for the dense one) and vector v_l: the sums of v_l over the rows of
/// each distinct value (`sums[j][l][a]`).
type ValueSums = Vec<Option<Vec<Vec<f64>>>>;

#[derive(Debug, Clone)]
enum Term<'a> {
    Mapped(Mapped<'a>),
    Dense(DenseDesign<'a>),
}

impl Term<'_> {
    fn p(&self) -> usize {
        match self {
            Term::Mapped(t) => t.p,
            Term::Dense(d) => d.ncol(),
        }
    }

    fn m(&self, n: usize) -> usize {
        match self {
            Term::Mapped(t) => t.m,
            Term::Dense(_) => n,
        }
    }

    /// X_j' v, from v's value sums `s` for a mapped term.
    fn crossprod_vec(&self, v: &[f64], s: Option<&[f64]>) -> Vec<f64> {
        match (self, s) {
            (Term::Mapped(t), Some(s)) => t.mat.tr_mul(&DVector::from_column_slice(s)).as_slice().to_vec(),
            (Term::Dense(d), _) => d.crossprod_vec_raw(v),
            (Term::Mapped(_), None) => unreachable!("a mapped term has value sums"),
        }
    }

    /// acc += w x_r (this term's columns).
    #[inline]
    fn axpy_row(&self, r: usize, w: f64, acc: &mut [f64]) {
        match self {
            Term::Mapped(t) => {
                for (a, x) in acc.iter_mut().zip(t.row(t.k(r))) {
                    *a += w * x;
                }
            }
            Term::Dense(d) => {
                for (j, a) in acc.iter_mut().enumerate() {
                    *a += w * d.col(j)[r];
                }
            }
        }
    }
}

/// A discretised design; see the module documentation.
#[derive(Debug, Clone)]
pub struct DiscreteDesign<'a> {
    nrow: usize,
    terms: Vec<Term<'a>>,
    off: Vec<usize>,
    p: usize,
}

impl<'a> DiscreteDesign<'a> {
    pub fn new(nrow: usize, specs: &[TermSpec<'a>]) -> Result<Self> {
        let mut terms = Vec::with_capacity(specs.len());
        let mut off = Vec::with_capacity(specs.len());
        let mut p = 0;
        let mut dense = 0;
        for (j, s) in specs.iter().enumerate() {
            let what = format!("term {}", j + 1);
            if s.values.len() != s.m * s.p {
                return Err(NceError::invalid(
                    "terms",
                    format!("{what} has {} values, expected {} x {}", s.values.len(), s.m, s.p),
                ));
            }
            if s.values.iter().any(|v| !v.is_finite()) {
                return Err(NceError::invalid("terms", format!("{what} has non-finite values")));
            }
            off.push(p);
            p += s.p;
            match s.index {
                None => {
                    dense += 1;
                    if dense > 1 {
                        return Err(NceError::invalid("terms", "at most one dense term"));
                    }
                    terms.push(Term::Dense(DenseDesign::new(s.values, nrow, s.p)?));
                }
                Some(index) => {
                    if index.len() != nrow {
                        return Err(NceError::invalid(
                            "terms",
                            format!("the index of {what} has length {}, expected {nrow}", index.len()),
                        ));
                    }
                    if s.m == 0 || s.m > u32::MAX as usize || nrow > u32::MAX as usize {
                        return Err(NceError::invalid("terms", format!("{what} has {} distinct rows", s.m)));
                    }
                    if let Some(r) = index.iter().position(|&k| k < 1 || k as usize > s.m) {
                        return Err(NceError::invalid(
                            "terms",
                            format!(
                                "row {} of the index of {what} is {}, outside 1..{}",
                                r + 1,
                                index[r],
                                s.m
                            ),
                        ));
                    }
                    let mat = DMatrix::from_column_slice(s.m, s.p, s.values);
                    let rows: Vec<f64> = (0..s.m)
                        .flat_map(|a| (0..s.p).map(move |i| (a, i)))
                        .map(|(a, i)| mat[(a, i)])
                        .collect();
                    terms.push(Term::Mapped(Mapped {
                        m: s.m,
                        p: s.p,
                        mat,
                        rows,
                        index,
                    }));
                }
            }
        }
        Ok(DiscreteDesign { nrow, terms, off, p })
    }

    /// Number of terms.
    pub fn nterms(&self) -> usize {
        self.terms.len()
    }

    /// (first column, number of columns) of term j.
    pub fn term_cols(&self, j: usize) -> (usize, usize) {
        (self.off[j], self.terms[j].p())
    }

    /// acc += w x_r restricted to term j's columns (acc has that term's length).
    #[inline]
    pub fn term_axpy_row(&self, j: usize, r: usize, w: f64, acc: &mut [f64]) {
        self.terms[j].axpy_row(r, w, acc);
    }

    /// Row r of term j's columns when the term is mapped (None for the dense term).
    #[inline]
    pub fn term_row(&self, j: usize, r: usize) -> Option<&[f64]> {
        match &self.terms[j] {
            Term::Mapped(t) => Some(t.row(t.k(r))),
            Term::Dense(_) => None,
        }
    }

    /// Term j's distinct rows (row-major, m x p) and its 1-based row index when the term is
    /// mapped (None for the dense term).
    #[inline]
    pub fn term_table(&self, j: usize) -> Option<(&[f64], &[i32])> {
        match &self.terms[j] {
            Term::Mapped(t) => Some((&t.rows, t.index)),
            Term::Dense(_) => None,
        }
    }

    /// Row r of X into `buf` (length p).
    pub fn row_into(&self, r: usize, buf: &mut [f64]) {
        buf.iter_mut().for_each(|v| *v = 0.0);
        self.axpy_row(r, 1.0, buf);
    }

    /// acc += w x_r.
    #[inline]
    pub fn axpy_row(&self, r: usize, w: f64, acc: &mut [f64]) {
        for (t, &o) in self.terms.iter().zip(&self.off) {
            t.axpy_row(r, w, &mut acc[o..o + t.p()]);
        }
    }

    /// Value sums of every mapped term for each of `vs`, in one pass over fixed row chunks.
    fn value_sums(&self, vs: &[&[f64]]) -> ValueSums {
        let nv = vs.len();
        let mut mapped = Vec::new();
        let mut len = 0;
        for t in &self.terms {
            if let Term::Mapped(m) = t {
                mapped.push((m, len));
                len += nv * m.m;
            }
        }
        let total = chunked_sum(self.nrow, len, |r0, r1, s| {
            for &(m, o) in &mapped {
                for (l, v) in vs.iter().enumerate() {
                    let sl = &mut s[o + l * m.m..o + (l + 1) * m.m];
                    if m.m == 1 {
                        sl[0] = v[r0..r1].iter().sum();
                        continue;
                    }
                    for (&k, &x) in m.index[r0..r1].iter().zip(&v[r0..r1]) {
                        sl[(k - 1) as usize] += x;
                    }
                }
            }
        });
        let mut next = mapped.iter();
        self.terms
            .iter()
            .map(|t| match t {
                Term::Mapped(m) => {
                    let &(_, o) = next.next().expect("one entry per mapped term");
                    Some(
                        (0..nv)
                            .map(|l| total[o + l * m.m..o + (l + 1) * m.m].to_vec())
                            .collect(),
                    )
                }
                Term::Dense(_) => None,
            })
            .collect()
    }

    /// X' v from the value sums of v (vector `l` of `sums`).
    fn crossprod_vec_with(&self, v: &[f64], sums: &ValueSums, l: usize) -> Vec<f64> {
        let mut g = vec![0.0; self.p];
        for ((t, &o), s) in self.terms.iter().zip(&self.off).zip(sums) {
            g[o..o + t.p()].copy_from_slice(&t.crossprod_vec(v, s.as_ref().map(|s| s[l].as_slice())));
        }
        g
    }

    /// X' v.
    pub fn crossprod_vec_raw(&self, v: &[f64]) -> Vec<f64> {
        let sums = self.value_sums(&[v]);
        self.crossprod_vec_with(v, &sums, 0)
    }

    /// X_j' W_l X_t (p_j x p_t) for each weight vector w_l, j != t.
    fn cross_blocks(&self, j: usize, t: usize, ws: &[&[f64]], sums: &ValueSums) -> Vec<DMatrix<f64>> {
        let (n, nw) = (self.nrow, ws.len());
        // X_k' w_l.
        let x_w = |k: usize, l: usize| {
            DVector::from_vec(self.terms[k].crossprod_vec(ws[l], sums[k].as_ref().map(|s| s[l].as_slice())))
        };
        // A constant term (one distinct row): its row times X_other' w.
        if let Term::Mapped(mj) = &self.terms[j] {
            if mj.m == 1 {
                let row = DMatrix::from_row_slice(1, mj.p, mj.row(0));
                return (0..nw).map(|l| row.tr_mul(&x_w(t, l).transpose())).collect();
            }
        }
        if let Term::Mapped(mt) = &self.terms[t] {
            if mt.m == 1 {
                let row = DMatrix::from_row_slice(1, mt.p, mt.row(0));
                return (0..nw).map(|l| x_w(j, l) * &row).collect();
            }
        }
        let (b, o, flip) = self.orient(j, t);
        let (po, mo) = (o.p(), o.m(n));
        if b.m * 2 > n {
            return self.gathered_blocks(b, o, ws, flip);
        }
        let blocks: Vec<DMatrix<f64>> = match o {
            Term::Mapped(om) if table_ok(b, o, n) => {
                // T_l[a, c]: sums of w_l over rows with (k_b, k_o) = (a, c), at (a m_o + c) nw + l.
                let t = chunked_sum(n, b.m * mo * nw, |r0, r1, t| {
                    for r in r0..r1 {
                        let cell = (b.k(r) * mo + om.k(r)) * nw;
                        for (v, w) in t[cell..cell + nw].iter_mut().zip(ws) {
                            *v += w[r];
                        }
                    }
                });
                let mut all = DMatrix::<f64>::zeros(b.m, nw * po);
                for l in 0..nw {
                    let tl = DMatrix::from_fn(b.m, mo, |a, c| t[(a * mo + c) * nw + l]);
                    all.columns_mut(l * po, po).copy_from(&(tl * &om.mat));
                }
                split_columns(&(b.mat.transpose() * &all), nw, po)
            }
            _ => {
                // D_l[a, ] = sum over rows with k_b = a of w_l,r x_o,r, at ((a nw + l) p_o).
                let d = chunked_sum(n, b.m * nw * po, |r0, r1, d| match o {
                    Term::Mapped(om) => {
                        for r in r0..r1 {
                            let x = om.row(om.k(r));
                            let base = b.k(r) * nw * po;
                            for (dl, w) in d[base..base + nw * po].chunks_exact_mut(po).zip(ws) {
                                let wr = w[r];
                                for (a, xv) in dl.iter_mut().zip(x) {
                                    *a += wr * xv;
                                }
                            }
                        }
                    }
                    Term::Dense(_) => {
                        for r in r0..r1 {
                            let base = b.k(r) * nw * po;
                            for (dl, w) in d[base..base + nw * po].chunks_exact_mut(po).zip(ws) {
                                o.axpy_row(r, w[r], dl);
                            }
                        }
                    }
                });
                // All weights' D_l side by side (m_b x nw p_o, the layout of d transposed), then
                // one blocked product with B' instead of nw dot-product loops.
                let all = DMatrix::from_fn(b.m, nw * po, |a, c| d[a * nw * po + c]);
                split_columns(&(b.mat.transpose() * &all), nw, po)
            }
        };
        if flip {
            blocks.into_iter().map(|c| c.transpose()).collect()
        } else {
            blocks
        }
    }

    /// The orientation of the cross block of terms j != t (neither constant): the mapped term b
    /// whose values bucket the rows, the other term o, and whether (b, o) is (t, j). Of the two
    /// orientations, the one with fewer operations.
    fn orient(&self, j: usize, t: usize) -> (&Mapped<'a>, &Term<'a>, bool) {
        let n = self.nrow;
        let cost = |b: &Mapped, o: &Term| {
            let c = pair_ops(b, o, n);
            c.scattered + c.flops
        };
        match (&self.terms[j], &self.terms[t]) {
            (Term::Mapped(a), Term::Mapped(c)) => {
                if cost(c, &self.terms[j]) < cost(a, &self.terms[t]) {
                    (c, &self.terms[j], true)
                } else {
                    (a, &self.terms[t], false)
                }
            }
            (Term::Mapped(a), Term::Dense(_)) => (a, &self.terms[t], false),
            (Term::Dense(_), Term::Mapped(c)) => (c, &self.terms[j], true),
            (Term::Dense(_), Term::Dense(_)) => unreachable!("at most one dense term"),
        }
    }

    /// The modelled cost of one X' W X in this layout and with X expanded into one dense
    /// block, in units of a multiply-add of the dense kernel; see [`LayoutCosts`].
    pub fn layout_costs(&self) -> LayoutCosts {
        let ops = self.layout_ops();
        let p = self.p as f64;
        LayoutCosts {
            compressed: ops.dense
                + COST_FLOPS * ops.flops
                + COST_PASS * ops.passes
                + COST_SCATTERED * ops.scattered
                + COST_STRIDED * ops.strided
                + COST_GATHERED * ops.gathered
                + COST_SUMS * ops.sums,
            dense: self.nrow as f64 * p * (p + 1.0) / 2.0,
        }
    }

    /// The operations of one X' W X in this layout, by kind.
    pub(crate) fn layout_ops(&self) -> Ops {
        let n = self.nrow as f64;
        let mut ops = Ops::default();
        for (j, tj) in self.terms.iter().enumerate() {
            match tj {
                Term::Mapped(m) => {
                    ops.passes += n;
                    ops.flops += (m.m * m.p * m.p) as f64;
                }
                Term::Dense(d) => ops.dense += n * (d.ncol() * (d.ncol() + 1)) as f64 / 2.0,
            }
            for t in j + 1..self.terms.len() {
                let constant = |k: usize| matches!(&self.terms[k], Term::Mapped(m) if m.m == 1);
                if constant(j) || constant(t) {
                    // Its row times the other term's X' w, from the value sums already counted.
                    continue;
                }
                let (b, o, _) = self.orient(j, t);
                let c = if b.m * 2 > self.nrow {
                    Ops {
                        gathered: n * (b.p * o.p()) as f64,
                        ..Ops::default()
                    }
                } else {
                    pair_ops(b, o, self.nrow)
                };
                ops.add(&c);
            }
        }
        ops
    }

    /// The layout to fit in: compressed unless one dense block is modelled to be cheaper and
    /// takes at most `DENSE_MAX_BYTES`.
    pub fn layout(&self) -> Layout {
        let c = self.layout_costs();
        let bytes = (self.nrow * self.p * std::mem::size_of::<f64>()) as f64;
        if c.dense < c.compressed && bytes <= DENSE_MAX_BYTES {
            Layout::Dense
        } else {
            Layout::Compressed
        }
    }

    /// X expanded: n x p, column-major (R's layout), allocated fallibly.
    pub fn dense_columns(&self) -> Result<Vec<f64>> {
        let n = self.nrow;
        let len = crate::alloc::checked_len(&[n, self.p], "the expanded design")?;
        let mut x = crate::alloc::try_filled(len, 0.0, "the expanded design")?;
        for (t, &o) in self.terms.iter().zip(&self.off) {
            for c in 0..t.p() {
                let col = &mut x[(o + c) * n..(o + c + 1) * n];
                match t {
                    Term::Mapped(m) => {
                        let v = m.mat.column(c);
                        for (x, &k) in col.iter_mut().zip(m.index) {
                            *x = v[(k - 1) as usize];
                        }
                    }
                    Term::Dense(d) => col.copy_from_slice(d.col(c)),
                }
            }
        }
        Ok(x)
    }

    /// X_b' W_l X_o for a term b with about as many distinct values as rows (m_b > n / 2):
    /// both terms' rows gathered in blocks and multiplied, per weight vector (p_b x p_o partial
    /// sums; the per-value sums of w x_o would be m_b x p_o per weight, as large as the rows).
    /// Blocks of rows in a fixed order within each chunk, so sums do not depend on the threads.
    fn gathered_blocks(&self, b: &Mapped, o: &Term, ws: &[&[f64]], flip: bool) -> Vec<DMatrix<f64>> {
        const ROWS: usize = 2048;
        let (n, nw, pb, po) = (self.nrow, ws.len(), b.p, o.p());
        let t = chunked_sum(n, nw * pb * po, |r0, r1, part| {
            for s0 in (r0..r1).step_by(ROWS) {
                let s1 = (s0 + ROWS).min(r1);
                let gb = DMatrix::from_fn(s1 - s0, pb, |i, c| b.rows[b.k(s0 + i) * pb + c]);
                let gbt = gb.transpose();
                let go = match o {
                    Term::Mapped(om) => DMatrix::from_fn(s1 - s0, po, |i, c| om.rows[om.k(s0 + i) * po + c]),
                    Term::Dense(d) => DMatrix::from_fn(s1 - s0, po, |i, c| d.col(c)[s0 + i]),
                };
                for (l, w) in ws.iter().enumerate() {
                    let wgo = DMatrix::from_fn(s1 - s0, po, |i, c| w[s0 + i] * go[(i, c)]);
                    let prod = &gbt * wgo;
                    for (acc, v) in part[l * pb * po..(l + 1) * pb * po].iter_mut().zip(prod.as_slice()) {
                        *acc += v;
                    }
                }
            }
        });
        (0..nw)
            .map(|l| {
                let c = DMatrix::from_column_slice(pb, po, &t[l * pb * po..(l + 1) * pb * po]);
                if flip {
                    c.transpose()
                } else {
                    c
                }
            })
            .collect()
    }

    /// X' diag(w_l) X for each weight vector, the mapped terms' parts from `sums` (whose first
    /// ws.len() vectors are the weights). The blocks of the pairs of terms are computed in
    /// parallel (each on its own, so the result does not depend on the thread count).
    fn crossprods_with(&self, ws: &[&[f64]], sums: &ValueSums) -> Vec<DMatrix<f64>> {
        let (nt, nw) = (self.terms.len(), ws.len());
        let pairs: Vec<(usize, usize)> = (0..nt).flat_map(|j| (j..nt).map(move |l| (j, l))).collect();
        let blocks: Vec<Vec<DMatrix<f64>>> = pairs
            .par_iter()
            .map(|&(j, l)| {
                if j != l {
                    return self.cross_blocks(j, l, ws, sums);
                }
                let pj = self.terms[j].p();
                match (&self.terms[j], &sums[j]) {
                    (Term::Mapped(m), Some(s)) => s[..nw].iter().map(|s| m.weighted_gram(s)).collect(),
                    (Term::Dense(d), _) => d
                        .crossprod_parts(ws)
                        .into_iter()
                        .map(|u| DMatrix::from_fn(pj, pj, |a, c| if a <= c { u[a * pj + c] } else { u[c * pj + a] }))
                        .collect(),
                    (Term::Mapped(_), None) => unreachable!("a mapped term has value sums"),
                }
            })
            .collect();
        let mut hs = vec![DMatrix::zeros(self.p, self.p); nw];
        for (&(j, l), bl) in pairs.iter().zip(blocks) {
            let (oj, pj, ol, pl) = (self.off[j], self.terms[j].p(), self.off[l], self.terms[l].p());
            for (h, c) in hs.iter_mut().zip(bl) {
                h.view_mut((oj, ol), (pj, pl)).copy_from(&c);
                if j != l {
                    h.view_mut((ol, oj), (pl, pj)).copy_from(&c.transpose());
                }
            }
        }
        hs
    }

    /// X' diag(w) X.
    pub fn crossprod_full(&self, w: &[f64]) -> DMatrix<f64> {
        self.crossprods(&[w]).pop().expect("one weight vector")
    }

    /// X' diag(w_l) X for each weight vector, every pass over the rows shared by all of them.
    pub fn crossprods(&self, ws: &[&[f64]]) -> Vec<DMatrix<f64>> {
        let sums = self.value_sums(ws);
        self.crossprods_with(ws, &sums)
    }

    /// (X' diag(w) X, X' v), the value sums of w and v from one pass.
    pub fn crossprod_and_vec(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, Vec<f64>) {
        let sums = self.value_sums(&[w, v]);
        let h = self.crossprods_with(&[w], &sums).pop().expect("one weight vector");
        (h, self.crossprod_vec_with(v, &sums, 1))
    }

    /// Upper triangles (row j, column k >= j at j * p + k) of X' diag(w_l) X.
    pub fn crossprod_parts(&self, weights: &[&[f64]]) -> Vec<Vec<f64>> {
        self.crossprods(weights).iter().map(upper).collect()
    }

    /// out_r = x_r' M x_r for symmetric M (p x p).
    pub fn quadratic_forms_full(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        let n = self.nrow;
        let nt = self.terms.len();
        // Contributions: per mapped term the diagonal table; per pair a table or a row-major
        // matrix C (m_l x p_j) dotted with x_j,r; the dense term's own block by the dense kernel.
        enum Part<'b> {
            Diag(&'b Mapped<'b>, Vec<f64>),
            Table(&'b Mapped<'b>, &'b Mapped<'b>, Vec<f64>, usize),
            DotMapped(&'b Mapped<'b>, &'b Mapped<'b>, Vec<f64>),
            DotDense(&'b DenseDesign<'b>, &'b Mapped<'b>, Vec<f64>),
        }
        let mut parts: Vec<Part> = Vec::new();
        let mut dense_q: Option<Vec<f64>> = None;
        for j in 0..nt {
            let (oj, pj) = (self.off[j], self.terms[j].p());
            let mjj = m.view((oj, oj), (pj, pj)).into_owned();
            match &self.terms[j] {
                Term::Mapped(t) => {
                    let xm = &t.mat * &mjj;
                    let d: Vec<f64> = (0..t.m).map(|a| xm.row(a).dot(&t.mat.row(a))).collect();
                    parts.push(Part::Diag(t, d));
                }
                Term::Dense(d) => {
                    let mut q = vec![0.0; n];
                    d.quadratic_forms_raw(&doubled_upper(&mjj), &mut q);
                    dense_q = Some(q);
                }
            }
            for l in j + 1..nt {
                let (ol, pl) = (self.off[l], self.terms[l].p());
                let mjl = m.view((oj, ol), (pj, pl)).into_owned() * 2.0;
                match (&self.terms[j], &self.terms[l]) {
                    (Term::Mapped(a), Term::Mapped(c)) if a.m * c.m <= TABLE_MAX && a.m * c.m <= n => {
                        let t = &a.mat * &mjl * c.mat.transpose();
                        let rows: Vec<f64> = (0..a.m)
                            .flat_map(|i| (0..c.m).map(move |k| (i, k)))
                            .map(|(i, k)| t[(i, k)])
                            .collect();
                        parts.push(Part::Table(a, c, rows, c.m));
                    }
                    (Term::Mapped(a), Term::Mapped(c)) if c.p < a.p => {
                        // The shorter row is dotted: C = M_j (2 M_jl) (m_j x p_l), row-major.
                        let cm = &a.mat * &mjl;
                        let rows: Vec<f64> = (0..a.m)
                            .flat_map(|i| (0..pl).map(move |k| (i, k)))
                            .map(|(i, k)| cm[(i, k)])
                            .collect();
                        parts.push(Part::DotMapped(c, a, rows));
                    }
                    (tj, Term::Mapped(c)) => {
                        // C = M_l (2 M_jl)' (m_l x p_j), row-major.
                        let cm = &c.mat * mjl.transpose();
                        let rows: Vec<f64> = (0..c.m)
                            .flat_map(|i| (0..pj).map(move |k| (i, k)))
                            .map(|(i, k)| cm[(i, k)])
                            .collect();
                        parts.push(match tj {
                            Term::Mapped(a) => Part::DotMapped(a, c, rows),
                            Term::Dense(d) => Part::DotDense(d, c, rows),
                        });
                    }
                    (Term::Mapped(a), Term::Dense(d)) => {
                        // C = M_j (2 M_jl) (m_j x p_l), dotted with the dense row.
                        let cm = &a.mat * &mjl;
                        let rows: Vec<f64> = (0..a.m)
                            .flat_map(|i| (0..pl).map(move |k| (i, k)))
                            .map(|(i, k)| cm[(i, k)])
                            .collect();
                        parts.push(Part::DotDense(d, a, rows));
                    }
                    (Term::Dense(_), Term::Dense(_)) => unreachable!("at most one dense term"),
                }
            }
        }
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let r0 = k * CHUNK_ROWS;
            for (i, v) in o.iter_mut().enumerate() {
                let r = r0 + i;
                let mut q = dense_q.as_ref().map_or(0.0, |d| d[r]);
                for part in &parts {
                    q += match part {
                        Part::Diag(t, d) => d[t.k(r)],
                        Part::Table(a, c, t, mc) => t[a.k(r) * mc + c.k(r)],
                        Part::DotMapped(a, c, rows) => {
                            let cr = &rows[c.k(r) * a.p..(c.k(r) + 1) * a.p];
                            a.row(a.k(r)).iter().zip(cr).map(|(x, y)| x * y).sum::<f64>()
                        }
                        Part::DotDense(d, c, rows) => {
                            let pd = d.ncol();
                            let cr = &rows[c.k(r) * pd..(c.k(r) + 1) * pd];
                            cr.iter().enumerate().map(|(j, y)| d.col(j)[r] * y).sum::<f64>()
                        }
                    };
                }
                *v = q;
            }
        });
    }

    /// out_r = x_r' M x_r, M given by its upper triangle with doubled off-diagonal entries.
    pub fn quadratic_forms_raw(&self, mu: &[f64], out: &mut [f64]) {
        let p = self.p;
        let m = DMatrix::from_fn(p, p, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Equal => mu[i * p + i],
            std::cmp::Ordering::Less => 0.5 * mu[i * p + j],
            std::cmp::Ordering::Greater => 0.5 * mu[j * p + i],
        });
        self.quadratic_forms_full(&m, out);
    }
}

impl Design for DiscreteDesign<'_> {
    fn nrow(&self) -> usize {
        self.nrow
    }

    fn ncol(&self) -> usize {
        self.p
    }

    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
        let mut vals: Vec<(&Mapped, Vec<f64>)> = Vec::new();
        let mut dense_done = false;
        for (t, &o) in self.terms.iter().zip(&self.off) {
            let b = &beta[o..o + t.p()];
            match t {
                Term::Mapped(m) => vals.push((m, (&m.mat * DVector::from_column_slice(b)).as_slice().to_vec())),
                Term::Dense(d) => {
                    d.linear_predictor(b, out);
                    dense_done = true;
                }
            }
        }
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let r0 = k * CHUNK_ROWS;
            for (i, v) in o.iter_mut().enumerate() {
                let r = r0 + i;
                let mut e = if dense_done { *v } else { 0.0 };
                for (m, vv) in &vals {
                    e += vv[m.k(r)];
                }
                *v = e;
            }
        });
    }

    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
        let (h, g) = self.crossprod_and_vec(w, v);
        (h, DVector::from_vec(g))
    }

    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        self.crossprods(weights)
    }

    fn crossprod_vec(&self, v: &[f64]) -> DVector<f64> {
        DVector::from_vec(self.crossprod_vec_raw(v))
    }

    fn intercept_column(&self) -> Option<usize> {
        for (t, &o) in self.terms.iter().zip(&self.off) {
            match t {
                Term::Mapped(m) if m.m == 1 => {
                    if let Some(j) = m.row(0).iter().position(|&v| v == 1.0) {
                        return Some(o + j);
                    }
                }
                Term::Dense(d) => {
                    if let Some(j) = d.intercept_column() {
                        return Some(o + j);
                    }
                }
                _ => {}
            }
        }
        None
    }

    fn row_quadratic_forms(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        self.quadratic_forms_full(m, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;

    /// Terms: a constant, a dense block of 2 columns, two mapped terms; and the expanded matrix.
    fn toy(n: usize) -> (Vec<Vec<f64>>, Vec<Vec<i32>>, Vec<f64>) {
        let (m1, m2) = (37usize, 400usize);
        let c = vec![1.0];
        let dense: Vec<f64> = (0..2 * n).map(|i| ((i as f64) * 0.37).sin()).collect();
        let v1: Vec<f64> = (0..m1 * 4).map(|i| ((i as f64) * 0.71).cos()).collect();
        let v2: Vec<f64> = (0..m2 * 3).map(|i| ((i as f64) * 1.3).sin() + 0.2).collect();
        let i1: Vec<i32> = (0..n).map(|r| ((r * 7 + r / 3) % m1) as i32 + 1).collect();
        let i2: Vec<i32> = (0..n).map(|r| ((r * 13 + r / 11) % m2) as i32 + 1).collect();
        let p = 1 + 2 + 4 + 3;
        let mut x = vec![0.0; n * p];
        for r in 0..n {
            x[r] = 1.0;
            x[n + r] = dense[r];
            x[2 * n + r] = dense[n + r];
            for j in 0..4 {
                x[(3 + j) * n + r] = v1[j * m1 + i1[r] as usize - 1];
            }
            for j in 0..3 {
                x[(7 + j) * n + r] = v2[j * m2 + i2[r] as usize - 1];
            }
        }
        (vec![c, dense, v1, v2], vec![vec![1; n], i1, i2], x)
    }

    #[test]
    fn many_distinct_values_gathered_match_the_dense_design() {
        // Two mapped terms with nearly as many distinct values as rows (the gathered blocks),
        // across more than one block of rows.
        let n = 5000;
        let (m1, m2, p1, p2) = (4000usize, 4500usize, 3usize, 5usize);
        let v1: Vec<f64> = (0..m1 * p1).map(|i| ((i as f64) * 0.013).sin()).collect();
        let v2: Vec<f64> = (0..m2 * p2).map(|i| ((i as f64) * 0.029).cos() + 0.1).collect();
        let i1: Vec<i32> = (0..n).map(|r| ((r * 7919) % m1) as i32 + 1).collect();
        let i2: Vec<i32> = (0..n).map(|r| ((r * 104_729 + 3) % m2) as i32 + 1).collect();
        let mut x = vec![0.0; n * (p1 + p2)];
        for r in 0..n {
            for j in 0..p1 {
                x[j * n + r] = v1[j * m1 + i1[r] as usize - 1];
            }
            for j in 0..p2 {
                x[(p1 + j) * n + r] = v2[j * m2 + i2[r] as usize - 1];
            }
        }
        let specs = [
            TermSpec {
                values: &v1,
                m: m1,
                p: p1,
                index: Some(&i1),
            },
            TermSpec {
                values: &v2,
                m: m2,
                p: p2,
                index: Some(&i2),
            },
        ];
        let dd = DiscreteDesign::new(n, &specs).unwrap();
        let de = DenseDesign::new(&x, n, p1 + p2).unwrap();
        let w: Vec<f64> = (0..n).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
        let w2: Vec<f64> = (0..n).map(|i| ((i % 7) as f64 - 3.0) * 0.3).collect();
        let h1 = with_threads(1, || dd.weighted_crossprods(&[&w, &w2])).unwrap();
        let h2 = with_threads(2, || dd.weighted_crossprods(&[&w, &w2])).unwrap();
        assert_eq!(h1, h2);
        let he = de.weighted_crossprods(&[&w, &w2]);
        for (a, e) in h1.iter().zip(&he) {
            assert!((a - e).amax() < 1e-10 * e.amax(), "{}", (a - e).amax());
        }
    }

    #[test]
    fn matches_the_expanded_dense_design_and_is_thread_invariant() {
        // 40000 rows: the (37 x 400)-cell table for the two mapped terms; fewer: sums per value.
        for n in [40000usize, 9000, 300] {
            let (vals, idx, x) = toy(n);
            let specs = [
                TermSpec {
                    values: &vals[0],
                    m: 1,
                    p: 1,
                    index: Some(&idx[0]),
                },
                TermSpec {
                    values: &vals[1],
                    m: n,
                    p: 2,
                    index: None,
                },
                TermSpec {
                    values: &vals[2],
                    m: 37,
                    p: 4,
                    index: Some(&idx[1]),
                },
                TermSpec {
                    values: &vals[3],
                    m: 400,
                    p: 3,
                    index: Some(&idx[2]),
                },
            ];
            let dd = DiscreteDesign::new(n, &specs).unwrap();
            let de = DenseDesign::new(&x, n, 10).unwrap();
            let w: Vec<f64> = (0..n).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
            let v: Vec<f64> = (0..n).map(|i| (i % 5) as f64 - 2.0).collect();
            let (h1, g1) = with_threads(1, || dd.weighted_crossprod(&w, &v)).unwrap();
            let (h2, g2) = with_threads(2, || dd.weighted_crossprod(&w, &v)).unwrap();
            assert_eq!(h1, h2);
            assert_eq!(g1, g2);
            let (he, ge) = de.weighted_crossprod(&w, &v);
            assert!((&h1 - &he).amax() < 1e-10 * he.amax(), "{}", (&h1 - &he).amax());
            assert!((&g1 - &ge).amax() < 1e-10 * ge.amax());
            // Several weight vectors in one pass: each as on its own.
            let w2: Vec<f64> = (0..n).map(|i| ((i % 7) as f64 - 3.0) * 0.3).collect();
            let hs = with_threads(2, || dd.weighted_crossprods(&[&w, &w2])).unwrap();
            assert_eq!(hs[0], h1);
            let he2 = de.weighted_crossprods(&[&w2]).pop().unwrap();
            assert!(
                (&hs[1] - &he2).amax() < 1e-10 * he2.amax(),
                "{}",
                (&hs[1] - &he2).amax()
            );
            let beta: Vec<f64> = (0..10).map(|i| (i as f64 * 0.3).cos()).collect();
            let (mut e1, mut e2) = (vec![0.0; n], vec![0.0; n]);
            dd.linear_predictor(&beta, &mut e1);
            de.linear_predictor(&beta, &mut e2);
            assert!(e1.iter().zip(&e2).all(|(p, q)| (p - q).abs() < 1e-12));
            let m = DMatrix::from_fn(10, 10, |i, j| {
                1.0 / (1.0 + i as f64 + j as f64) + if i == j { 0.5 } else { 0.0 }
            });
            let (mut q1, mut q2) = (vec![0.0; n], vec![0.0; n]);
            with_threads(2, || dd.row_quadratic_forms(&m, &mut q1)).unwrap();
            de.row_quadratic_forms(&m, &mut q2);
            assert!(q1.iter().zip(&q2).all(|(p, q)| (p - q).abs() < 1e-10 * (1.0 + q.abs())));
            let mut q3 = vec![0.0; n];
            with_threads(1, || dd.row_quadratic_forms(&m, &mut q3)).unwrap();
            assert_eq!(q1, q3);
            assert_eq!(dd.intercept_column(), Some(0));
            // Expanded, the terms are the dense design, column for column.
            assert_eq!(dd.dense_columns().unwrap(), x);
        }
    }

    /// An intercept as a mapped term of one distinct row (`one` = [1], `ones` all 1).
    pub(crate) fn intercept_spec<'a>(one: &'a [f64], ones: &'a [i32]) -> TermSpec<'a> {
        TermSpec {
            values: one,
            m: 1,
            p: 1,
            index: Some(ones),
        }
    }

    /// Terms of `m` distinct rows and `p` columns each, indexed over n rows, after an intercept.
    fn layout_of(n: usize, terms: &[(usize, usize)]) -> (Layout, LayoutCosts) {
        let vals: Vec<Vec<f64>> = terms
            .iter()
            .map(|&(m, p)| (0..m * p).map(|i| (i as f64 * 0.7).sin()).collect())
            .collect();
        let idx: Vec<Vec<i32>> = terms
            .iter()
            .map(|&(m, _)| (0..n).map(|r| (r * 31 % m) as i32 + 1).collect())
            .collect();
        let (one, ones) = (vec![1.0], vec![1; n]);
        let mut specs = vec![intercept_spec(&one, &ones)];
        for (j, &(m, p)) in terms.iter().enumerate() {
            specs.push(TermSpec {
                values: &vals[j],
                m,
                p,
                index: Some(&idx[j]),
            });
        }
        let dd = DiscreteDesign::new(n, &specs).unwrap();
        (dd.layout(), dd.layout_costs())
    }

    #[test]
    fn the_cost_model_expands_many_terms_of_many_values_on_few_rows() {
        // The 5-parameter classifier's shape (35 terms of 800-3600 values on 10,000 rows): the
        // cross blocks, a pass each, cost more than one dense pass (measured 2.3-4.5x).
        let many: Vec<(usize, usize)> = (0..35).map(|j| (800 + 80 * j, 8)).collect();
        let (layout, c) = layout_of(10_000, &many);
        assert_eq!(layout, Layout::Dense, "{c:?}");
        // Few terms on many rows (the three-term fit at 420,000 rows; measured 0.5-0.7x).
        let (layout, c) = layout_of(420_000, &[(2000, 9), (2000, 9), (8000, 29)]);
        assert_eq!(layout, Layout::Compressed, "{c:?}");
        // Beyond the memory cap the dense block is never chosen: 35 terms on 600,000 rows would
        // expand to 1.3 GB.
        let (layout, c) = layout_of(600_000, &many);
        assert!(c.dense < c.compressed, "{c:?}");
        assert_eq!(layout, Layout::Compressed);
    }

    #[test]
    fn rejects_bad_terms() {
        let v = [1.0, 2.0];
        let idx = [1, 3];
        let e = DiscreteDesign::new(
            2,
            &[TermSpec {
                values: &v,
                m: 2,
                p: 1,
                index: Some(&idx),
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        assert!(DiscreteDesign::new(
            3,
            &[TermSpec {
                values: &v,
                m: 2,
                p: 1,
                index: Some(&idx)
            }]
        )
        .is_err());
    }
}

#[cfg(test)]
pub(crate) mod timing {
    use super::*;
    use std::time::Instant;

    /// The synthetic discretised problem of the ignored timing tests (here and in `grouped`): an
    /// intercept and three terms of 2000 unique rows (9, 9 and 15 columns) indexed over n rows.
    pub(crate) struct Synthetic {
        c: Vec<f64>,
        ic: Vec<i32>,
        vals: Vec<Vec<f64>>,
        idx: Vec<Vec<i32>>,
    }

    const MS: [usize; 3] = [2000, 2000, 2000];
    const PS: [usize; 3] = [9, 9, 15];

    impl Synthetic {
        pub(crate) fn new(n: usize) -> Self {
            let vals = MS
                .iter()
                .zip(&PS)
                .map(|(&m, &p)| (0..m * p).map(|i| ((i as f64) * 0.37).sin()).collect())
                .collect();
            let idx = MS
                .iter()
                .enumerate()
                .map(|(j, &m)| {
                    (0..n)
                        .map(|r| (((r * (7 + j * 6)) ^ (r >> 3)) % m) as i32 + 1)
                        .collect()
                })
                .collect();
            Synthetic {
                c: vec![1.0],
                ic: vec![1; n],
                vals,
                idx,
            }
        }

        pub(crate) fn specs(&self) -> Vec<TermSpec<'_>> {
            let mut specs = vec![TermSpec {
                values: &self.c,
                m: 1,
                p: 1,
                index: Some(&self.ic),
            }];
            for j in 0..3 {
                specs.push(TermSpec {
                    values: &self.vals[j],
                    m: MS[j],
                    p: PS[j],
                    index: Some(&self.idx[j]),
                });
            }
            specs
        }
    }

    #[test]
    #[ignore]
    fn timing_discrete_vs_dense() {
        let n = 2_000_000usize;
        let synthetic = Synthetic::new(n);
        let specs = synthetic.specs();
        let t = Instant::now();
        let dd = DiscreteDesign::new(n, &specs).unwrap();
        eprintln!("new {:?}", t.elapsed());
        let p = dd.ncol();
        let w: Vec<f64> = (0..n).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
        let t = Instant::now();
        let h = dd.crossprod_full(&w);
        eprintln!("crossprod {:?} {}", t.elapsed(), h[(0, 0)]);
        let t = Instant::now();
        let g = dd.crossprod_vec_raw(&w);
        eprintln!("crossprod_vec {:?} {}", t.elapsed(), g[0]);
        let beta: Vec<f64> = (0..p).map(|i| i as f64).collect();
        let mut e = vec![0.0; n];
        let t = Instant::now();
        dd.linear_predictor(&beta, &mut e);
        eprintln!("linpred {:?}", t.elapsed());
        let m = DMatrix::from_fn(p, p, |i, j| 1.0 / (1.0 + i as f64 + j as f64));
        let t = Instant::now();
        dd.row_quadratic_forms(&m, &mut e);
        eprintln!("quad {:?}", t.elapsed());
        let mut x = vec![0.0; n * p];
        for r in 0..n {
            let mut buf = vec![0.0; p];
            dd.row_into(r, &mut buf);
            for j in 0..p {
                x[j * n + r] = buf[j];
            }
        }
        let de = DenseDesign::new(&x, n, p).unwrap();
        let t = Instant::now();
        let _ = de.weighted_crossprod(&w, &w);
        eprintln!("dense crossprod {:?}", t.elapsed());
        let t = Instant::now();
        de.row_quadratic_forms(&m, &mut e);
        eprintln!("dense quad {:?}", t.elapsed());
    }

    /// Calibration of the layout cost model: X' W X (1 and 8 weight vectors) compressed and
    /// expanded, on shapes of the package's benchmarks, with the modelled costs. Run with
    /// `cargo test --release -p nce-core --lib calibrate_layout_costs -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn calibrate_layout_costs() {
        // (label, n, terms as (m, p)); an intercept term is added.
        // (label, rows, terms as (distinct rows, columns)).
        type Shape = (&'static str, usize, Vec<(usize, usize)>);
        let mut shapes: Vec<Shape> = vec![
            (
                "gaussian5-like 35 terms",
                10_000,
                (0..35).map(|j| (800 + 80 * j, if j < 10 { 9 } else { 7 })).collect(),
            ),
            (
                "gaussian5-like 35 terms, 40k",
                40_000,
                (0..35).map(|j| (800 + 80 * j, if j < 10 { 9 } else { 7 })).collect(),
            ),
            ("10 terms", 100_000, (0..10).map(|_| (2000, 9)).collect()),
            ("three-term 420k", 420_000, vec![(2000, 9), (2000, 9), (8000, 29)]),
            ("three-term 42k", 42_000, vec![(2000, 9), (2000, 9), (8000, 29)]),
            ("one te", 20_000, vec![(5000, 24)]),
            (
                "latkes-like",
                41_580,
                vec![(2000, 9), (2000, 9), (9000, 29), (2500, 29)],
            ),
            ("20 terms of 200", 50_000, (0..20).map(|_| (200, 5)).collect()),
        ];
        let mut g5: Vec<(usize, usize)> = (0..30).map(|j| (800 + 90 * j, if j < 10 { 9 } else { 7 })).collect();
        g5.extend([(10_000, 7); 5]);
        shapes.push(("g5 with 5 identity terms", 10_000, g5));
        shapes.push(("identity pair", 20_000, vec![(20_000, 10), (20_000, 10), (2000, 9)]));
        // m = 0: a dense block of p columns.
        shapes.push((
            "dense 4 + 3 terms",
            50_000,
            vec![(0, 4), (2000, 9), (2000, 9), (5000, 20)],
        ));
        shapes.push((
            "dense 12 + 8 terms",
            20_000,
            vec![
                (0, 12),
                (1000, 9),
                (1000, 9),
                (1500, 9),
                (1500, 9),
                (2000, 7),
                (2000, 7),
                (3000, 7),
                (3000, 7),
            ],
        ));
        for n in [10_000usize, 100_000] {
            for k in [2usize, 6, 20] {
                for m in [150usize, 1500, 4000] {
                    for p in [6usize, 20] {
                        shapes.push(("grid", n, (0..k).map(|j| (m + 7 * j, p)).collect()));
                    }
                }
            }
        }
        for (label, n, terms) in shapes {
            let vals: Vec<Vec<f64>> = terms
                .iter()
                .enumerate()
                .map(|(j, &(m, p))| (0..m * p).map(|i| ((i * (j + 3)) as f64 * 0.37).sin()).collect())
                .collect();
            let vals: Vec<Vec<f64>> = terms
                .iter()
                .zip(vals)
                .map(|(&(m, p), v)| {
                    if m == 0 {
                        (0..n * p).map(|i| (i as f64 * 0.11).cos()).collect()
                    } else {
                        v
                    }
                })
                .collect();
            let idx: Vec<Vec<i32>> = terms
                .iter()
                .enumerate()
                .map(|(j, &(m, _))| {
                    (0..n)
                        .map(|r| match m {
                            0 => 1,
                            _ if m == n => r as i32 + 1,
                            _ => ((r * (7 + 6 * j)) ^ (r >> 3)) as i32 % m as i32 + 1,
                        })
                        .collect()
                })
                .collect();
            let one = vec![1.0];
            let ones = vec![1; n];
            let mut specs = vec![super::tests::intercept_spec(&one, &ones)];
            for (j, &(m, p)) in terms.iter().enumerate() {
                specs.push(if m == 0 {
                    TermSpec {
                        values: &vals[j],
                        m: n,
                        p,
                        index: None,
                    }
                } else {
                    TermSpec {
                        values: &vals[j],
                        m,
                        p,
                        index: Some(&idx[j]),
                    }
                });
            }
            let dd = DiscreteDesign::new(n, &specs).unwrap();
            let x = dd.dense_columns().unwrap();
            let de = DenseDesign::new(&x, n, dd.ncol()).unwrap();
            let ws: Vec<Vec<f64>> = (0..8)
                .map(|l| (0..n).map(|i| 0.2 + ((i + l) % 11) as f64 / 5.0).collect())
                .collect();
            let wr: Vec<&[f64]> = ws.iter().map(|w| w.as_slice()).collect();
            let time = |f: &dyn Fn()| {
                let mut best = f64::INFINITY;
                for _ in 0..3 {
                    let t = Instant::now();
                    f();
                    best = best.min(t.elapsed().as_secs_f64());
                }
                best
            };
            let c = dd.layout_costs();
            for nw in [1usize, 8] {
                let w = &wr[..nw];
                let tc = time(&|| {
                    std::hint::black_box(dd.crossprods(w));
                });
                let td = time(&|| {
                    std::hint::black_box(de.weighted_crossprods(w));
                });
                let o = dd.layout_ops();
                eprintln!(
                    "CAL,{label},{n},{nw},{tc},{td},{},{},{},{},{},{},{},{}",
                    o.passes,
                    o.scattered,
                    o.strided,
                    o.gathered,
                    o.flops,
                    o.sums,
                    c.dense,
                    c.compressed / c.dense
                );
            }
        }
    }
}
