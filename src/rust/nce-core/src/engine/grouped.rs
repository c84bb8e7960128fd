//! The sequential-NCE design: row r is [a_r | b_{g(r)}], with b shared by the rows of a group.
//!
//! X'WX = | A'WA                      sum_t (sum_{r in t} w_r a_r) b_t' |
//!        | (transpose)               sum_t (sum_{r in t} w_r) b_t b_t' |
//! so the group block costs O(ngroups pb^2) instead of O(nrow pb^2). Group sums run over the
//! rows of each group in row order, and all partial sums are added in a fixed order, so results
//! do not depend on the number of threads.

use crate::convergence::Convergence;
use crate::engine::design::{doubled_upper, DenseDesign, Design, CHUNK_ROWS};
use crate::engine::discrete::DiscreteDesign;
use crate::engine::irls::{GlmFit, Problem};
use crate::engine::penalty::PenaltySet;
use crate::engine::pirls::{self, Cand};
use crate::engine::reml::{
    offset_only_intercept, optimise, rho_from_diagonal, start_weights, weight_derivs_rows, Derivs, RemlControl, RemlFit,
};
use crate::error::{NceError, Result};
use crate::linalg::aliased_columns;
use nalgebra::{Cholesky, DMatrix, DMatrixView, DVector, Dyn};
use rayon::prelude::*;

/// Groups per chunk of the parallel group sums.
const CHUNK_GROUPS: usize = 1024;

/// Per group: sums of each weight vector, sums of each plain vector, and for each weight vector
/// the weighted sums of the rows of A (ngroups x pa, column-major).
pub(crate) type GroupSums = (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<Vec<f64>>);

/// Per weight vector the group sums, per plain vector the group sums, and per weight vector
/// the cross block (`weighted_cross_blocks`).
pub(crate) type CrossBlocks = (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<DMatrix<f64>>);

/// The row-level block A: dense (column-major, as given) or discretised.
#[derive(Debug, Clone)]
pub enum RowBlock<'a> {
    Dense(DenseDesign<'a>),
    Discrete(DiscreteDesign<'a>),
}

impl<'a> From<DenseDesign<'a>> for RowBlock<'a> {
    fn from(d: DenseDesign<'a>) -> Self {
        RowBlock::Dense(d)
    }
}

impl<'a> From<DiscreteDesign<'a>> for RowBlock<'a> {
    fn from(d: DiscreteDesign<'a>) -> Self {
        RowBlock::Discrete(d)
    }
}

impl RowBlock<'_> {
    pub fn nrow(&self) -> usize {
        match self {
            RowBlock::Dense(d) => d.nrow(),
            RowBlock::Discrete(d) => d.nrow(),
        }
    }

    pub fn ncol(&self) -> usize {
        match self {
            RowBlock::Dense(d) => d.ncol(),
            RowBlock::Discrete(d) => d.ncol(),
        }
    }

    pub fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
        match self {
            RowBlock::Dense(d) => d.linear_predictor(beta, out),
            RowBlock::Discrete(d) => d.linear_predictor(beta, out),
        }
    }

    fn crossprod_parts(&self, weights: &[&[f64]]) -> Vec<Vec<f64>> {
        match self {
            RowBlock::Dense(d) => d.crossprod_parts(weights),
            RowBlock::Discrete(d) => d.crossprod_parts(weights),
        }
    }

    /// (upper triangle of A' diag(w) A, A' v).
    fn crossprod_and_vec(&self, w: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
        match self {
            RowBlock::Dense(d) => d.crossprod_and_vec_raw(w, v),
            RowBlock::Discrete(d) => {
                let (h, g) = d.crossprod_and_vec(w, v);
                (crate::engine::discrete::upper(&h), g)
            }
        }
    }

    fn crossprod_vec_raw(&self, v: &[f64]) -> Vec<f64> {
        match self {
            RowBlock::Dense(d) => d.crossprod_vec_raw(v),
            RowBlock::Discrete(d) => d.crossprod_vec_raw(v),
        }
    }

    fn quadratic_forms_raw(&self, mu: &[f64], out: &mut [f64]) {
        match self {
            RowBlock::Dense(d) => d.quadratic_forms_raw(mu, out),
            RowBlock::Discrete(d) => d.quadratic_forms_raw(mu, out),
        }
    }

    fn intercept_column(&self) -> Option<usize> {
        match self {
            RowBlock::Dense(d) => d.intercept_column(),
            RowBlock::Discrete(d) => d.intercept_column(),
        }
    }
}

/// The group of a row that belongs to none (`GroupedDesign::for_group_sums`).
pub const NO_GROUP: usize = usize::MAX;

#[derive(Debug, Clone)]
pub struct GroupedDesign<'a> {
    a: RowBlock<'a>,
    b: DenseDesign<'a>,
    group: &'a [usize],
    /// Rows sorted by group (stable), and where each group starts in that list.
    rows_by_group: Vec<usize>,
    group_start: Vec<usize>,
}

impl<'a> GroupedDesign<'a> {
    /// `a`: nrow x pa and `b`: ngroups x pb, both column-major; `group[r]` in 0..ngroups.
    pub fn new(
        a: &'a [f64],
        nrow: usize,
        pa: usize,
        b: &'a [f64],
        ngroups: usize,
        pb: usize,
        group: &'a [usize],
    ) -> Result<Self> {
        let a = DenseDesign::new(a, nrow, pa).map_err(|e| rename(e, "a"))?;
        Self::with_block(a, b, ngroups, pb, group)
    }

    /// As `new` with A given as a row block: a `DenseDesign` (e.g. held by columns) or a
    /// discretised one (`DiscreteDesign`).
    pub fn with_block(
        a: impl Into<RowBlock<'a>>,
        b: &'a [f64],
        ngroups: usize,
        pb: usize,
        group: &'a [usize],
    ) -> Result<Self> {
        Self::build(a.into(), b, ngroups, pb, group, false)
    }

    /// For the group sums only (`group_sums`, `cross_block_parts`): as `with_block`, but a row
    /// whose group is `NO_GROUP` belongs to no group (a shard's rows outside its groups). Its
    /// row-level methods must not be called.
    pub(crate) fn for_group_sums(
        a: impl Into<RowBlock<'a>>,
        b: &'a [f64],
        ngroups: usize,
        pb: usize,
        group: &'a [usize],
    ) -> Result<Self> {
        Self::build(a.into(), b, ngroups, pb, group, true)
    }

    fn build(
        a: RowBlock<'a>,
        b: &'a [f64],
        ngroups: usize,
        pb: usize,
        group: &'a [usize],
        ungrouped_rows: bool,
    ) -> Result<Self> {
        let nrow = a.nrow();
        let b = DenseDesign::new(b, ngroups, pb).map_err(|e| rename(e, "b"))?;
        if group.len() != nrow {
            return Err(NceError::invalid(
                "group",
                format!("has length {}, expected {nrow} (rows of a)", group.len()),
            ));
        }
        let grouped = |g: usize| !(ungrouped_rows && g == NO_GROUP);
        if let Some(r) = group.iter().position(|&g| g >= ngroups && grouped(g)) {
            return Err(NceError::invalid(
                "group",
                format!("row {} names group {} but there are {ngroups}", r + 1, group[r] + 1),
            ));
        }
        // Counting sort keeps rows of a group in row order.
        let mut group_start = vec![0usize; ngroups + 1];
        for &g in group.iter().filter(|&&g| grouped(g)) {
            group_start[g + 1] += 1;
        }
        for t in 0..ngroups {
            group_start[t + 1] += group_start[t];
        }
        let mut next = group_start.clone();
        let mut rows_by_group = vec![0usize; group_start[ngroups]];
        for (r, &g) in group.iter().enumerate().filter(|&(_, &g)| grouped(g)) {
            rows_by_group[next[g]] = r;
            next[g] += 1;
        }
        Ok(GroupedDesign {
            a,
            b,
            group,
            rows_by_group,
            group_start,
        })
    }

    /// Row r of A into `buf` (length pa).
    pub fn a_row_into(&self, r: usize, buf: &mut [f64]) {
        match &self.a {
            RowBlock::Dense(ad) => {
                for (j, b) in buf.iter_mut().enumerate() {
                    *b = ad.col(j)[r];
                }
            }
            RowBlock::Discrete(d) => d.row_into(r, buf),
        }
    }

    pub fn ngroups(&self) -> usize {
        self.b.nrow()
    }

    pub fn pa(&self) -> usize {
        self.a.ncol()
    }

    pub fn pb(&self) -> usize {
        self.b.ncol()
    }

    /// The row-level block A (nrow x pa).
    pub fn a(&self) -> &RowBlock<'a> {
        &self.a
    }

    /// B as one matrix (a view, no copy).
    fn b_matrix(&self) -> nalgebra::DMatrixView<'a, f64> {
        self.b.matrix().expect("B is built from one slice (DenseDesign::new)")
    }

    /// The group-level block B (ngroups x pb).
    pub fn b(&self) -> &DenseDesign<'a> {
        &self.b
    }

    /// The group (0-based) of each row.
    pub fn group(&self) -> &'a [usize] {
        self.group
    }

    /// Per group and weight vector w_l: sum of w_l and sum of w_l a_r (ngroups x pa,
    /// column-major); `plain` vectors only get their group sums.
    pub(crate) fn group_sums(&self, ws: &[&[f64]], plain: &[&[f64]]) -> GroupSums {
        let (ng, pa) = (self.ngroups(), self.pa());
        let (nw, nv) = (ws.len(), plain.len());
        let parts: Vec<GroupSums> = (0..ng.div_ceil(CHUNK_GROUPS))
            .into_par_iter()
            .map(|k| self.group_sums_range(k * CHUNK_GROUPS..((k + 1) * CHUNK_GROUPS).min(ng), ws, plain))
            .collect();
        let mut sums = vec![Vec::with_capacity(ng); nw];
        let mut psums = vec![Vec::with_capacity(ng); nv];
        let mut aws = vec![vec![0.0; ng * pa]; nw];
        let mut t0 = 0;
        for (s_c, p_c, a_c) in parts {
            let m = s_c.first().or(p_c.first()).map_or(0, |v| v.len());
            for (aw, ac) in aws.iter_mut().zip(&a_c) {
                for j in 0..pa {
                    aw[j * ng + t0..j * ng + t0 + m].copy_from_slice(&ac[j * m..(j + 1) * m]);
                }
            }
            for (s, c) in sums.iter_mut().zip(s_c) {
                s.extend(c);
            }
            for (s, c) in psums.iter_mut().zip(p_c) {
                s.extend(c);
            }
            t0 += m;
        }
        (sums, psums, aws)
    }

    /// `group_sums` for the groups `ts` only (their sums start at index 0).
    fn group_sums_range(&self, ts: std::ops::Range<usize>, ws: &[&[f64]], plain: &[&[f64]]) -> GroupSums {
        let pa = self.pa();
        let (nw, nv) = (ws.len(), plain.len());
        let (t0, t1) = (ts.start, ts.end);
        let m = t1 - t0;
        let mut sums = vec![vec![0.0; m]; nw];
        let mut psums = vec![vec![0.0; m]; nv];
        let mut aws = vec![vec![0.0; m * pa]; nw];
        let rows_of = |t: usize| &self.rows_by_group[self.group_start[t]..self.group_start[t + 1]];
        for t in t0..t1 {
            let rows = rows_of(t);
            for (v, s) in plain.iter().zip(psums.iter_mut()) {
                s[t - t0] = rows.iter().map(|&r| v[r]).sum();
            }
            for (w, s) in ws.iter().zip(sums.iter_mut()) {
                s[t - t0] = rows.iter().map(|&r| w[r]).sum();
            }
        }
        match &self.a {
            _ if nw == 0 => {}
            // Sixteen columns at a time, the last ones in one pass (group_block()).
            RowBlock::Dense(ad) => {
                let mut j0 = 0;
                while j0 < pa {
                    let (rows_of, aws) = (&rows_of, &mut aws);
                    j0 += by_width!(pa - j0, dense_group_block(ad, j0, t0..t1, ws, rows_of, aws));
                }
            }
            // Term by term, so that one term's distinct rows stay in cache; a mapped
            // term's columns all at once (16 at a time in wider terms).
            RowBlock::Discrete(ad) => {
                for term in 0..ad.nterms() {
                    let (o, pt) = ad.term_cols(term);
                    if let Some((vals, index)) = ad.term_table(term) {
                        let table = MappedTerm { vals, index, p: pt };
                        let mut j = 0;
                        while j < pt {
                            let (rows_of, aws) = (&rows_of, &mut aws);
                            let at = (o, j);
                            j += by_width!(pt - j, mapped_group_block(&table, at, t0..t1, ws, rows_of, aws));
                        }
                        continue;
                    }
                    let mut acc = vec![0.0; nw * pt];
                    for t in t0..t1 {
                        acc.iter_mut().for_each(|a| *a = 0.0);
                        for &r in rows_of(t) {
                            for (al, w) in acc.chunks_exact_mut(pt).zip(ws) {
                                ad.term_axpy_row(term, r, w[r], al);
                            }
                        }
                        for (aw, al) in aws.iter_mut().zip(acc.chunks_exact(pt)) {
                            for (j, a) in al.iter().enumerate() {
                                aw[(o + j) * m + t - t0] = *a;
                            }
                        }
                    }
                }
            }
        }
        (sums, psums, aws)
    }

    /// Per weight vector w_l: the group sums of w_l and the cross block sum_t (A'W_l)_t b_t'
    /// (pa x pb), as `group_sums` then `cross_block`, with the same bits, but a chunk of groups at a
    /// time: the per-group sums A'W_l (ngroups x pa per weight, 37 MB for 5 weights at 28,000
    /// transitions) are never held whole. Also the group sums of each plain vector.
    fn weighted_cross_blocks(&self, ws: &[&[f64]], plain: &[&[f64]]) -> CrossBlocks {
        let (ng, pa, pb) = (self.ngroups(), self.pa(), self.pb());
        let parts = self.weighted_cross_block_parts(ws, plain);
        let mut sums = vec![Vec::with_capacity(ng); ws.len()];
        let mut psums = vec![Vec::with_capacity(ng); plain.len()];
        let mut cross = vec![DMatrix::zeros(pa, pb); ws.len()];
        for (s_c, p_c, c_c) in parts {
            for (s, c) in sums.iter_mut().zip(s_c) {
                s.extend(c);
            }
            for (s, c) in psums.iter_mut().zip(p_c) {
                s.extend(c);
            }
            for (h, c) in cross.iter_mut().zip(c_c) {
                *h = &*h + c;
            }
        }
        (sums, psums, cross)
    }

    /// `weighted_cross_blocks` per chunk of CHUNK_ROWS groups, before the chunks are joined and
    /// added (a shard's part of them).
    pub(crate) fn weighted_cross_block_parts(&self, ws: &[&[f64]], plain: &[&[f64]]) -> Vec<CrossBlocks> {
        let (ng, pa) = (self.ngroups(), self.pa());
        (0..ng.div_ceil(CHUNK_ROWS))
            .into_par_iter()
            .map(|k| {
                let (t0, t1) = (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(ng));
                let (sums, psums, aws) = self.group_sums_range(t0..t1, ws, plain);
                let cross = aws
                    .iter()
                    .map(|a| self.chunk_cross(DMatrixView::from_slice(a, t1 - t0, pa), t0))
                    .collect();
                (sums, psums, cross)
            })
            .collect()
    }

    /// sum_t aw_t b_t' (pa x pb), over fixed chunks of groups added in order (the reference
    /// that `weighted_cross_blocks` is tested against).
    #[cfg(test)]
    fn cross_block(&self, aw: &[f64]) -> DMatrix<f64> {
        let (pa, pb) = (self.pa(), self.pb());
        self.cross_block_parts(aw)
            .into_iter()
            .fold(DMatrix::zeros(pa, pb), |acc, m| acc + m)
    }

    /// The per-chunk terms of `cross_block` (chunks of CHUNK_ROWS groups), before they are added.
    pub(crate) fn cross_block_parts(&self, aw: &[f64]) -> Vec<DMatrix<f64>> {
        let (ng, pa) = (self.ngroups(), self.pa());
        (0..ng.div_ceil(CHUNK_ROWS))
            .into_par_iter()
            .map(|k| {
                let (t0, t1) = (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(ng));
                self.chunk_cross(DMatrixView::from_slice(aw, ng, pa).rows(t0, t1 - t0), t0)
            })
            .collect()
    }

    /// One chunk's term of `cross_block`: aw' B[t0.., ] for the chunk's rows `aw` of A'W (groups
    /// t0..t0 + aw.nrows()), one matrix product (blocked, vectorised).
    fn chunk_cross(&self, aw: DMatrixView<'_, f64>, t0: usize) -> DMatrix<f64> {
        aw.transpose() * self.b_matrix().rows(t0, aw.nrows())
    }

    /// Assemble [A'WA, cross; cross', B'W_gB] from the upper triangles of the blocks.
    fn assemble(&self, haa: &[f64], hbb: &[f64], hab: &DMatrix<f64>) -> DMatrix<f64> {
        assemble(self.pa(), self.pb(), haa, hbb, hab)
    }
}

/// `f::<B>(args)` for B = the `width` columns left, at most 16: a term of up to 16 columns in
/// one pass over its rows (each pass reads every row's index and weights again).
macro_rules! by_width {
    ($width:expr, $f:ident $args:tt) => {
        by_width!(@ $width, $f $args, 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $width:expr, $f:ident $args:tt, $($b:literal)*) => {
        match $width {
            $($b => $f::<$b> $args,)*
            _ => $f::<16> $args,
        }
    };
}
use by_width;

/// Columns c0..c0 + B of the weighted group sums for the groups `ts`, `row(r)` giving row r's
/// values in those columns: aws[l][(c0 + q) * m + t - t0] = sum over the rows r of group t, in
/// row order, of ws[l][r] row(r)[q]. B independent sums in registers instead of one chain per
/// column; each still adds its group's rows in row order, so the bits are those of a
/// column-by-column walk. Returns B.
fn group_block<'r, const B: usize>(
    c0: usize,
    ts: std::ops::Range<usize>,
    ws: &[&[f64]],
    rows_of: &impl Fn(usize) -> &'r [usize],
    aws: &mut [Vec<f64>],
    row: impl Fn(usize) -> [f64; B],
) -> usize {
    let m = ts.len();
    let t0 = ts.start;
    for t in ts {
        let rows = rows_of(t);
        for (w, aw) in ws.iter().zip(aws.iter_mut()) {
            let mut acc = [0.0f64; B];
            for &r in rows {
                let wr = w[r];
                let x = row(r);
                for q in 0..B {
                    acc[q] += wr * x[q];
                }
            }
            for (q, a) in acc.iter().enumerate() {
                aw[(c0 + q) * m + t - t0] = *a;
            }
        }
    }
    B
}

/// Columns j0..j0 + B of the weighted group sums of a dense A (group_block()); no row-major
/// copy of A.
fn dense_group_block<'r, const B: usize>(
    ad: &DenseDesign,
    j0: usize,
    ts: std::ops::Range<usize>,
    ws: &[&[f64]],
    rows_of: &impl Fn(usize) -> &'r [usize],
    aws: &mut [Vec<f64>],
) -> usize {
    let cols: [&[f64]; B] = std::array::from_fn(|q| ad.col(j0 + q));
    group_block::<B>(j0, ts, ws, rows_of, aws, |r| std::array::from_fn(|q| cols[q][r]))
}

/// A mapped term of a discretised A: its distinct rows (row-major), 1-based row index, width.
struct MappedTerm<'a> {
    vals: &'a [f64],
    index: &'a [i32],
    p: usize,
}

/// Columns j..j + B of a mapped term whose first column is column o of A (group_block()), each
/// row read from the term's distinct rows.
fn mapped_group_block<'r, const B: usize>(
    term: &MappedTerm,
    (o, j): (usize, usize),
    ts: std::ops::Range<usize>,
    ws: &[&[f64]],
    rows_of: &impl Fn(usize) -> &'r [usize],
    aws: &mut [Vec<f64>],
) -> usize {
    group_block::<B>(o + j, ts, ws, rows_of, aws, |r| {
        let a = (term.index[r] - 1) as usize * term.p + j;
        let x = &term.vals[a..a + B];
        std::array::from_fn(|q| x[q])
    })
}

/// [A'WA, cross; cross', B'W_gB] from the upper triangles of the diagonal blocks.
pub(crate) fn assemble(pa: usize, pb: usize, haa: &[f64], hbb: &[f64], hab: &DMatrix<f64>) -> DMatrix<f64> {
    let up = |u: &[f64], q: usize, i: usize, j: usize| if i <= j { u[i * q + j] } else { u[j * q + i] };
    DMatrix::from_fn(pa + pb, pa + pb, |i, j| match (i < pa, j < pa) {
        (true, true) => up(haa, pa, i, j),
        (false, false) => up(hbb, pb, i - pa, j - pa),
        (true, false) => hab[(i, j - pa)],
        (false, true) => hab[(j, i - pa)],
    })
}

fn rename(e: NceError, arg: &str) -> NceError {
    match e {
        NceError::InvalidInput { msg, .. } => NceError::invalid(arg, msg),
        other => other,
    }
}

impl Design for GroupedDesign<'_> {
    fn nrow(&self) -> usize {
        self.a.nrow()
    }

    fn ncol(&self) -> usize {
        self.pa() + self.pb()
    }

    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
        let (pa, ng) = (self.pa(), self.ngroups());
        self.a.linear_predictor(&beta[..pa], out);
        let mut bb = vec![0.0; ng];
        self.b.linear_predictor(&beta[pa..], &mut bb);
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let g = &self.group[k * CHUNK_ROWS..k * CHUNK_ROWS + o.len()];
            for (v, &t) in o.iter_mut().zip(g) {
                *v += bb[t];
            }
        });
    }

    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
        let (pa, pb) = (self.pa(), self.pb());
        let (haa, ga) = self.a.crossprod_and_vec(w, v);
        let (ws, vs, mut hab) = self.weighted_cross_blocks(&[w], &[v]);
        let hbb = self.b.crossprod_parts(&[&ws[0]]).pop().unwrap();
        let gb = self.b.crossprod_vec_raw(&vs[0]);
        let hab = hab.pop().expect("one weight vector");
        let mut g = DVector::zeros(pa + pb);
        g.rows_mut(0, pa).copy_from_slice(&ga);
        g.rows_mut(pa, pb).copy_from_slice(&gb);
        (self.assemble(&haa, &hbb, &hab), g)
    }

    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        let haa = self.a.crossprod_parts(weights);
        let (ws, _, hab) = self.weighted_cross_blocks(weights, &[]);
        let wsr: Vec<&[f64]> = ws.iter().map(|v| v.as_slice()).collect();
        let hbb = self.b.crossprod_parts(&wsr);
        haa.iter()
            .zip(&hbb)
            .zip(&hab)
            .map(|((ha, hb), c)| self.assemble(ha, hb, c))
            .collect()
    }

    fn crossprod_vec(&self, v: &[f64]) -> DVector<f64> {
        let (pa, pb) = (self.pa(), self.pb());
        let ga = self.a.crossprod_vec_raw(v);
        let (_, vs, _) = self.group_sums(&[], &[v]);
        let gb = self.b.crossprod_vec_raw(&vs[0]);
        let mut g = DVector::zeros(pa + pb);
        g.rows_mut(0, pa).copy_from_slice(&ga);
        g.rows_mut(pa, pb).copy_from_slice(&gb);
        g
    }

    fn intercept_column(&self) -> Option<usize> {
        self.a
            .intercept_column()
            .or_else(|| self.b.intercept_column().map(|j| self.pa() + j))
    }

    /// x' M x = a' M_aa a + 2 a' (M_ab b_t) + b_t' M_bb b_t: the last two terms per group.
    fn row_quadratic_forms(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        let (pa, pb, ng) = (self.pa(), self.pb(), self.ngroups());
        let maa = m.view((0, 0), (pa, pa)).into_owned();
        let mbb = m.view((pa, pa), (pb, pb)).into_owned();
        self.a.quadratic_forms_raw(&doubled_upper(&maa), out);
        let mut dq = vec![0.0; ng];
        self.b.quadratic_forms_raw(&doubled_upper(&mbb), &mut dq);
        // c[j * ng + t] = 2 (M_ab b_t)_j: B (M_ab + M_ba')' (ng x pa, column-major).
        let mab2 = DMatrix::from_fn(pb, pa, |k, j| m[(j, pa + k)] + m[(pa + k, j)]);
        let c = self.b_matrix() * mab2;
        let c = c.as_slice();
        // The same, row-major (one group's entries together), for the discretised A's row gathers.
        let ct: Vec<f64> = match self.a {
            RowBlock::Discrete(_) => (0..ng * pa).map(|i| c[(i % pa) * ng + i / pa]).collect(),
            RowBlock::Dense(_) => Vec::new(),
        };
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let r0 = k * CHUNK_ROWS;
            let g = &self.group[r0..r0 + o.len()];
            for (v, &t) in o.iter_mut().zip(g) {
                *v += dq[t];
            }
            match &self.a {
                RowBlock::Dense(ad) => {
                    for j in 0..pa {
                        let (aj, cj) = (&ad.col(j)[r0..r0 + o.len()], &c[j * ng..(j + 1) * ng]);
                        for ((v, &t), x) in o.iter_mut().zip(g).zip(aj) {
                            *v += x * cj[t];
                        }
                    }
                }
                RowBlock::Discrete(ad) => {
                    let mut x = vec![0.0; pa];
                    for (i, (v, &t)) in o.iter_mut().zip(g).enumerate() {
                        let (r, ctt) = (r0 + i, &ct[t * pa..(t + 1) * pa]);
                        for term in 0..ad.nterms() {
                            let (oj, pj) = ad.term_cols(term);
                            let cj = &ctt[oj..oj + pj];
                            *v += match ad.term_row(term, r) {
                                Some(xr) => xr.iter().zip(cj).map(|(a, b)| a * b).sum::<f64>(),
                                None => {
                                    let x = &mut x[..pj];
                                    x.iter_mut().for_each(|a| *a = 0.0);
                                    ad.term_axpy_row(term, r, 1.0, x);
                                    x.iter().zip(cj).map(|(a, b)| a * b).sum::<f64>()
                                }
                            };
                        }
                    }
                }
            }
        });
    }
}

/// A symmetric "arrow" matrix over (beta, alpha), beta the pa row-level coefficients and alpha
/// one free intercept per group: [[p, r], [r', diag(d)]] (r is pa x ngroups). X' diag(v) X of
/// the design [A | indicator of the row's group] has this form, and so has the penalised
/// Hessian when only beta is penalised.
struct Arrow {
    p: DMatrix<f64>,
    r: DMatrix<f64>,
    d: Vec<f64>,
}

impl Arrow {
    /// M x for x = (x_a, x_alpha).
    fn mul(&self, x: &DVector<f64>) -> DVector<f64> {
        let pa = self.p.nrows();
        let (xa, xg) = (x.rows(0, pa), x.rows(pa, self.d.len()));
        let mut out = DVector::zeros(x.len());
        out.rows_mut(0, pa).copy_from(&(&self.p * xa + &self.r * xg));
        let top = self.r.tr_mul(&xa);
        for t in 0..self.d.len() {
            out[pa + t] = top[t] + self.d[t] * xg[t];
        }
        out
    }
}

/// The penalised Hessian H = [[P + S, Q], [Q', D]] eliminated per group: with the Schur
/// complement Sigma = P + S - Q D^{-1} Q' (pa x pa), H = L diag(Sigma, D) L' for
/// L = [[I, Q D^{-1}], [0, I]], so solves, log|H| and the traces REML needs cost
/// O(ngroups pa^2) instead of O((pa + ngroups)^3).
struct Eliminated {
    h: Arrow,
    sigma: DMatrix<f64>,
    chol: Cholesky<f64, Dyn>,
    dscale: Vec<f64>,
    sigma_inv: DMatrix<f64>,
}

impl Eliminated {
    fn new(h: Arrow) -> Result<Self> {
        if let Some(t) = h.d.iter().position(|&v| v.is_nan() || v <= 0.0) {
            return Err(NceError::Numerical(format!(
                "the free intercept of group {} has no curvature (all its rows are fitted with certainty)",
                t + 1
            )));
        }
        let qs = scale_cols(&h.r, &h.d.iter().map(|v| 1.0 / v).collect::<Vec<_>>());
        let sigma = &h.p - &qs * h.r.transpose();
        let sigma = (&sigma + sigma.transpose()) * 0.5;
        let (chol, dscale) = crate::engine::reml::scaled_cholesky(&sigma)?;
        let ci = chol.inverse();
        let sigma_inv = DMatrix::from_fn(ci.nrows(), ci.ncols(), |i, j| ci[(i, j)] / (dscale[i] * dscale[j]));
        let sigma_inv = (&sigma_inv + sigma_inv.transpose()) * 0.5;
        Ok(Eliminated {
            h,
            sigma,
            chol,
            dscale,
            sigma_inv,
        })
    }

    fn pa(&self) -> usize {
        self.h.p.nrows()
    }

    /// H^{-1} b.
    fn solve(&self, b: &DVector<f64>) -> DVector<f64> {
        let (pa, ng) = (self.pa(), self.h.d.len());
        let bg: Vec<f64> = (0..ng).map(|t| b[pa + t] / self.h.d[t]).collect();
        let rhs = b.rows(0, pa) - &self.h.r * DVector::from_vec(bg);
        let scaled = DVector::from_fn(pa, |i, _| rhs[i] / self.dscale[i]);
        let y = self.chol.solve(&scaled);
        let xa = DVector::from_fn(pa, |i, _| y[i] / self.dscale[i]);
        let top = self.h.r.tr_mul(&xa);
        let mut out = DVector::zeros(pa + ng);
        out.rows_mut(0, pa).copy_from(&xa);
        for t in 0..ng {
            out[pa + t] = (b[pa + t] - top[t]) / self.h.d[t];
        }
        out
    }

    fn log_det(&self) -> f64 {
        let l = self.chol.l();
        let ls: f64 = (0..l.nrows())
            .map(|i| 2.0 * (l[(i, i)].ln() + self.dscale[i].ln()))
            .sum();
        ls + self.h.d.iter().map(|v| v.ln()).sum::<f64>()
    }

    /// L^{-1} M L^{-T} for an arrow M: again an arrow (p~, r~, d) with r~ = r - Q D^{-1} diag(d_M)
    /// and p~ = p - Q D^{-1} r' - r~ D^{-1} Q'.
    fn transform(&self, m: &Arrow) -> Arrow {
        let inv_d: Vec<f64> = self.h.d.iter().map(|v| 1.0 / v).collect();
        let ratio: Vec<f64> = m.d.iter().zip(&inv_d).map(|(a, b)| a * b).collect();
        let rt = &m.r - scale_cols(&self.h.r, &ratio);
        let qs = scale_cols(&self.h.r, &inv_d);
        let p = &m.p - &qs * m.r.transpose() - &rt * qs.transpose();
        Arrow {
            p: (&p + p.transpose()) * 0.5,
            r: rt,
            d: m.d.clone(),
        }
    }
}

/// Columns of `m` scaled by `s`.
fn scale_cols(m: &DMatrix<f64>, s: &[f64]) -> DMatrix<f64> {
    let mut out = m.clone();
    for (j, &v) in s.iter().enumerate() {
        out.column_mut(j).scale_mut(v);
    }
    out
}

/// Fit of `fit_reml_free_intercepts`: the row-level coefficients with their covariances (the
/// beta blocks of the full model's), and the free intercepts with their standard errors.
#[derive(Debug, Clone)]
pub struct FreeInterceptFit {
    /// beta (pa) in `coefficients`, vp, ve, edf of beta; `fit.eta`, `fit.fitted`, `fit.row_grad`
    /// over all rows.
    pub reml: RemlFit,
    pub intercepts: Vec<f64>,
    pub intercept_se: Vec<f64>,
    /// The beta block of the sandwich clustered by `cluster_of_group`, when given.
    pub sandwich: Option<DMatrix<f64>>,
}

/// The row-level operations of the free-intercept fit, on A in memory (`GroupedDesign`) or in
/// row shards (`shards::ShardedDesign`), with the same results bit for bit.
pub(crate) trait FreeRows: Sync {
    fn n_rows(&self) -> usize;
    fn n_a(&self) -> usize;
    fn n_groups(&self) -> usize;
    fn row_groups(&self) -> &[usize];
    /// A beta.
    fn a_eta(&self, beta: &[f64], out: &mut [f64]);
    /// A' diag(w_l) A per weight vector (upper triangle, row-major pa x pa).
    fn a_crossprods(&self, ws: &[&[f64]]) -> Vec<Vec<f64>>;
    /// Per weight vector: the group sums of w_l, and of w_l a_r (pa x ngroups, at j ng + t).
    fn weight_sums(&self, ws: &[&[f64]]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>);
    /// A'v and the group sums of v.
    fn vec_sums(&self, v: &[f64]) -> (Vec<f64>, Vec<f64>);
    /// (a_r - c_t)' Sigma^{-1} (a_r - c_t) + 1 / d_t for each row r of group t, with c_t at
    /// `centres[t pa..(t + 1) pa]`.
    fn free_leverages(&self, si: &DMatrix<f64>, centres: &[f64], d: &[f64]) -> Vec<f64>;
}

/// `FreeRows::free_leverages` on the rows of `gd` (their groups index `centres` and `d`).
pub(crate) fn free_leverages_of(gd: &GroupedDesign, si: &DMatrix<f64>, centres: &[f64], d: &[f64]) -> Vec<f64> {
    let (pa, n) = (gd.pa(), Design::nrow(gd));
    let mut lev = vec![0.0; n];
    lev.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
        let mut x = vec![0.0; pa];
        for (i, l) in o.iter_mut().enumerate() {
            let r = k * CHUNK_ROWS + i;
            let t = gd.group[r];
            gd.a_row_into(r, &mut x);
            for j in 0..pa {
                x[j] -= centres[t * pa + j];
            }
            let mut q = 0.0;
            for a in 0..pa {
                let xa = x[a];
                let col = si.column(a);
                q += xa * (0..pa).map(|b| col[b] * x[b]).sum::<f64>();
            }
            *l = q + 1.0 / d[t];
        }
    });
    lev
}

impl FreeRows for GroupedDesign<'_> {
    fn n_rows(&self) -> usize {
        Design::nrow(self)
    }
    fn n_a(&self) -> usize {
        self.pa()
    }
    fn n_groups(&self) -> usize {
        self.ngroups()
    }
    fn row_groups(&self) -> &[usize] {
        self.group
    }
    fn a_eta(&self, beta: &[f64], out: &mut [f64]) {
        self.a.linear_predictor(beta, out);
    }
    fn a_crossprods(&self, ws: &[&[f64]]) -> Vec<Vec<f64>> {
        self.a.crossprod_parts(ws)
    }
    fn weight_sums(&self, ws: &[&[f64]]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let (ds, _, aw) = self.group_sums(ws, &[]);
        (ds, aw)
    }
    fn vec_sums(&self, v: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let ga = self.a.crossprod_vec_raw(v);
        let (_, mut vs, _) = self.group_sums(&[], &[v]);
        (ga, vs.pop().expect("one plain vector"))
    }
    fn free_leverages(&self, si: &DMatrix<f64>, centres: &[f64], d: &[f64]) -> Vec<f64> {
        free_leverages_of(self, si, centres, d)
    }
}

struct FreeCtx<'b, D: FreeRows + ?Sized> {
    gd: &'b D,
    prob: &'b Problem<'b>,
    pens: &'b PenaltySet,
    ctrl: &'b RemlControl,
    inner_iterations: usize,
    sat: f64,
}

struct FreePoint {
    rho: Vec<f64>,
    beta: Vec<f64>,
    eta: Vec<f64>,
    mu: Vec<f64>,
    loglik: f64,
    objective: f64,
    convergence: Convergence,
    score: f64,
    h: Eliminated,
}

impl<D: FreeRows + ?Sized> FreeCtx<'_, D> {
    fn pa(&self) -> usize {
        self.gd.n_a()
    }

    fn ng(&self) -> usize {
        self.gd.n_groups()
    }

    /// X theta (no offset) for theta = (beta, alpha).
    fn lin(&self, theta: &[f64], mut eta: Vec<f64>) -> Vec<f64> {
        let pa = self.pa();
        eta.resize(self.gd.n_rows(), 0.0);
        self.gd.a_eta(&theta[..pa], &mut eta);
        let alpha = &theta[pa..];
        let group = self.gd.row_groups();
        eta.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let g = &group[k * CHUNK_ROWS..k * CHUNK_ROWS + o.len()];
            for (v, &t) in o.iter_mut().zip(g) {
                *v += alpha[t];
            }
        });
        eta
    }

    /// X' diag(w_l) X for each weight vector, as arrows.
    fn arrows(&self, ws: &[&[f64]]) -> Vec<Arrow> {
        let (pa, ng) = (self.pa(), self.ng());
        let pp = self.gd.a_crossprods(ws);
        let (ds, aw) = self.gd.weight_sums(ws);
        pp.into_iter()
            .zip(ds)
            .zip(aw)
            .map(|((u, d), a)| Arrow {
                p: DMatrix::from_fn(pa, pa, |i, j| if i <= j { u[i * pa + j] } else { u[j * pa + i] }),
                r: DMatrix::from_fn(pa, ng, |i, t| a[i * ng + t]),
                d,
            })
            .collect()
    }

    /// X' v.
    fn crossprod_vec(&self, v: &[f64]) -> DVector<f64> {
        let (pa, ng) = (self.pa(), self.ng());
        let (ga, vs) = self.gd.vec_sums(v);
        let mut g = DVector::zeros(pa + ng);
        g.rows_mut(0, pa).copy_from_slice(&ga);
        g.rows_mut(pa, ng).copy_from_slice(&vs);
        g
    }

    /// Leverages x_r' H^{-1} x_r = a~_r' Sigma^{-1} a~_r + 1 / d_t, a~_r = a_r - Q_t / d_t.
    fn leverages(&self, h: &Eliminated) -> Vec<f64> {
        self.gd
            .free_leverages(&h.sigma_inv, &free_centres(h, self.pa()), &h.h.d)
    }

    /// (H^{-1} b for b = (S_j-like vector on beta, 0)).
    fn solve_beta(&self, h: &Eliminated, va: &DVector<f64>) -> DVector<f64> {
        let mut b = DVector::zeros(self.pa() + self.ng());
        b.rows_mut(0, self.pa()).copy_from(va);
        h.solve(&b)
    }
}

/// The inner fit's Newton system, each step solved by elimination of the intercepts.
/// Q_t / d_t of every group, group after group: the centres of the eliminated design's rows.
fn free_centres(h: &Eliminated, pa: usize) -> Vec<f64> {
    (0..h.h.d.len())
        .flat_map(|t| (0..pa).map(move |i| (t, i)))
        .map(|(t, i)| h.h.r[(i, t)] / h.h.d[t])
        .collect()
}

impl<D: FreeRows + ?Sized> pirls::NewtonModel for FreeCtx<'_, D> {
    type Hessian = Eliminated;
    fn prob(&self) -> &Problem<'_> {
        self.prob
    }
    fn ncoef(&self) -> usize {
        self.pa() + self.ng()
    }
    fn deviance(&self, objective: f64) -> f64 {
        2.0 * (self.sat - objective)
    }
    fn evaluate(&self, s: &DMatrix<f64>, theta: Vec<f64>, eta: Vec<f64>) -> Cand {
        let eta = self.lin(&theta, eta);
        pirls::point(self.prob, Some(s), theta, eta)
    }
    fn system(&self, s: &DMatrix<f64>, w: &[f64], v: &[f64]) -> Result<(Eliminated, DVector<f64>)> {
        let mut h = self.arrows(&[w]).pop().expect("one weight vector");
        h.p += s;
        let b = self.crossprod_vec(v);
        Ok((Eliminated::new(h)?, b))
    }
    fn check_aliased(&self, h: &Eliminated) -> Result<()> {
        match aliased_columns(&h.sigma, self.ctrl.inner.alias_tol)
            .iter()
            .position(|&a| a)
        {
            Some(j) => Err(NceError::Numerical(format!(
                "coefficient {} is not identifiable beside the free intercepts (aliased)",
                j + 1
            ))),
            None => Ok(()),
        }
    }
    fn solve(&self, h: &Eliminated, b: &DVector<f64>) -> Result<Vec<f64>> {
        Ok(h.solve(b).as_slice().to_vec())
    }
    fn quad(&self, h: &Eliminated, st: &DVector<f64>) -> f64 {
        h.h.mul(st).dot(st)
    }
}

impl<D: FreeRows + ?Sized> crate::engine::reml::RemlModel for FreeCtx<'_, D> {
    type Point = FreePoint;

    fn point(
        &mut self,
        rho: &[f64],
        start: Option<&[f64]>,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> Result<FreePoint> {
        let lambda: Vec<f64> = rho.iter().map(|r| r.exp()).collect();
        let s = self.pens.total(&lambda);
        let (c, h, convergence) = pirls::newton(self, &s, &self.ctrl.inner, start, interrupted)?;
        self.inner_iterations += convergence.iterations;
        let b = DVector::from_column_slice(&c.beta[..self.pa()]);
        let pen = (b.transpose() * &s * &b)[(0, 0)];
        let log_det_s = self.pens.log_det(rho)?.value;
        let mp = (self.pens.null_space_dim() + self.ng()) as f64;
        let score =
            -c.loglik + 0.5 * pen + 0.5 * h.log_det() - 0.5 * log_det_s - 0.5 * mp * (2.0 * std::f64::consts::PI).ln();
        if !score.is_finite() {
            return Err(NceError::Numerical("the REML score is not finite".into()));
        }
        let prob = self.prob;
        let mu = c.eta.par_iter().map(|&e| prob.family.mean(e)).collect();
        Ok(FreePoint {
            rho: rho.to_vec(),
            beta: c.beta,
            eta: c.eta,
            mu,
            loglik: c.loglik,
            objective: c.objective,
            convergence,
            score,
            h,
        })
    }

    /// The derivatives of `reml::Ctx::derivs`, with every product by H^{-1} done by
    /// elimination and tr(H^{-1} dH_k H^{-1} dH_j) on the transformed arrows (see `Eliminated`).
    fn derivs(&self, pt: &FreePoint) -> Result<Derivs> {
        let (pens, prob) = (self.pens, self.prob);
        let (m, pa, ng) = (pens.len(), self.pa(), self.ng());
        let h = &pt.h;
        let beta = DVector::from_column_slice(&pt.beta[..pa]);
        let lam: Vec<f64> = pt.rho.iter().map(|r| r.exp()).collect();
        let w1 = weight_derivs_rows(prob, &pt.mu, |w| w.0);
        let w2 = weight_derivs_rows(prob, &pt.mu, |w| w.1);
        let ld = pens.log_det(&pt.rho)?;
        let sb: Vec<DVector<f64>> = (0..m).map(|j| pens.apply(j, beta.as_slice())).collect();
        let bj: Vec<DVector<f64>> = (0..m).map(|j| self.solve_beta(h, &sb[j]) * (-lam[j])).collect();
        // At most m + 3 row vectors at once (as reml::Ctx::derivs): the pair sums with w2 lev
        // are taken before the linear predictors X b_j are scaled in place by w1.
        let mut ej: Vec<Vec<f64>> = bj.iter().map(|b| self.lin(b.as_slice(), Vec::new())).collect();
        let lev = self.leverages(h);
        let w2lev: Vec<f64> = w2.iter().zip(&lev).map(|(a, b)| a * b).collect();
        drop(w2);
        let w2_pairs: Vec<Vec<f64>> = (0..m)
            .map(|j| {
                (j..m)
                    .map(|k| {
                        w2lev
                            .iter()
                            .zip(&ej[j])
                            .zip(&ej[k])
                            .map(|((a, b), c)| a * b * c)
                            .sum::<f64>()
                    })
                    .collect()
            })
            .collect();
        drop(w2lev);
        for e in &mut ej {
            e.iter_mut().zip(&w1).for_each(|(v, a)| *v *= a);
        }
        let vj = ej;
        let vref: Vec<&[f64]> = vj.iter().map(|v| v.as_slice()).collect();
        let mut dh = self.arrows(&vref);
        for (j, a) in dh.iter_mut().enumerate() {
            pens.add_to(j, &mut a.p, lam[j]);
        }
        let si = &h.sigma_inv;
        let tr_s: Vec<f64> = (0..m).map(|j| pens.trace_with(j, si)).collect();
        let grad: Vec<f64> = (0..m)
            .map(|j| {
                let tr = vj[j].iter().zip(&lev).map(|(a, b)| a * b).sum::<f64>() + lam[j] * tr_s[j];
                0.5 * lam[j] * beta.dot(&sb[j]) + 0.5 * tr - 0.5 * ld.grad[j]
            })
            .collect();
        drop(vj);
        let w1lev: Vec<f64> = w1.iter().zip(&lev).map(|(a, b)| a * b).collect();
        let u = self.crossprod_vec(&w1lev);

        // Transformed arrows for the cross traces.
        let tj: Vec<Arrow> = dh.iter().map(|a| h.transform(a)).collect();
        let sip: Vec<DMatrix<f64>> = tj.iter().map(|a| si * &a.p).collect();
        let sir: Vec<DMatrix<f64>> = tj.iter().map(|a| si * &a.r).collect();
        let inv_d: Vec<f64> = h.h.d.iter().map(|v| 1.0 / v).collect();

        let mut hess = DMatrix::zeros(m, m);
        for j in 0..m {
            for k in j..m {
                let mut bjk = -h.solve(&dh[k].mul(&bj[j]));
                let sj_bk = pens.apply(j, &bj[k].as_slice()[..pa]);
                bjk -= self.solve_beta(h, &sj_bk) * lam[j];
                if j == k {
                    bjk += &bj[j];
                }
                let mut tr = if j == k { lam[j] * tr_s[j] } else { 0.0 };
                tr += u.dot(&bjk);
                tr += w2_pairs[j][k - j];
                let mut cross = sip[k].component_mul(&sip[j].transpose()).sum();
                cross += 2.0
                    * (0..ng)
                        .map(|t| tj[j].r.column(t).dot(&sir[k].column(t)) * inv_d[t])
                        .sum::<f64>();
                cross += (0..ng)
                    .map(|t| tj[k].d[t] * tj[j].d[t] * inv_d[t] * inv_d[t])
                    .sum::<f64>();
                let mut v = lam[j] * bj[k].rows(0, pa).dot(&sb[j]) + 0.5 * (tr - cross) - 0.5 * ld.hess[(j, k)];
                if j == k {
                    v += 0.5 * lam[j] * beta.dot(&sb[j]);
                }
                hess[(j, k)] = v;
                hess[(k, j)] = v;
            }
        }
        Ok(Derivs {
            grad,
            hess: Some(hess),
            dbeta: bj,
        })
    }

    fn score(pt: &FreePoint) -> f64 {
        pt.score
    }
    fn rho(pt: &FreePoint) -> &[f64] {
        &pt.rho
    }
    fn beta(pt: &FreePoint) -> &[f64] {
        &pt.beta
    }
    fn inner_status(pt: &FreePoint) -> (bool, &str) {
        (pt.convergence.converged, &pt.convergence.message)
    }
}

/// The groups of a free-intercept fit: the group (0-based) of each row, their number, and the
/// cluster (0-based) of each group for the clustered sandwich, if wanted.
#[derive(Debug, Clone, Copy)]
pub struct FreeGroups<'a> {
    pub group: &'a [usize],
    pub ngroups: usize,
    pub cluster_of_group: Option<&'a [usize]>,
}

/// REML fit of the design [A | one free, unpenalised intercept per group] (conditional-logit
/// style per-transition intercepts), in time linear in the number of groups: the intercepts
/// are eliminated per group (`Eliminated`) in every Newton step, in the REML score and in its
/// derivatives. Same estimates and the same beta covariances as `reml::fit_reml` on the
/// expanded design. `a` (dense, column-major, or discretised) must not hold an intercept
/// column; `penalties` act on the pa columns of `a`. With `cluster_of_group`, also the beta
/// block of the clustered sandwich (clusters are unions of groups).
pub fn fit_reml_free_intercepts<'a>(
    a: impl Into<RowBlock<'a>>,
    groups: FreeGroups,
    prob: &Problem,
    penalties: &PenaltySet,
    ctrl: &RemlControl,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<FreeInterceptFit> {
    let ones = vec![1.0; groups.ngroups];
    let gd = GroupedDesign::with_block(a.into(), &ones, groups.ngroups, 1, groups.group)?;
    free_intercepts_on(&gd, prob, penalties, ctrl, groups.cluster_of_group, interrupted)
}

pub(crate) fn free_intercepts_on<D: FreeRows + ?Sized>(
    gd: &D,
    prob: &Problem,
    penalties: &PenaltySet,
    ctrl: &RemlControl,
    cluster_of_group: Option<&[usize]>,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<FreeInterceptFit> {
    let (nrow, pa, ngroups) = (gd.n_rows(), gd.n_a(), gd.n_groups());
    if penalties.ncoef() != pa {
        return Err(NceError::invalid(
            "penalties",
            format!("are for {} coefficients but `a` has {pa} columns", penalties.ncoef()),
        ));
    }
    if prob.penalty.is_some() || prob.start.is_some() {
        return Err(NceError::invalid(
            "prob",
            "give penalties through the penalty set and no start",
        ));
    }
    pirls::validate(nrow, pa + ngroups, prob)?;
    let mut sizes = vec![0usize; ngroups];
    for &t in gd.row_groups() {
        sizes[t] += 1;
    }
    if let Some(t) = sizes.iter().position(|&c| c == 0) {
        return Err(NceError::invalid("group", format!("group {} has no rows", t + 1)));
    }
    if let Some(c) = cluster_of_group {
        if c.len() != ngroups {
            return Err(NceError::invalid(
                "cluster",
                format!("must have one entry per group ({ngroups})"),
            ));
        }
    }
    let m = penalties.len();
    let sat = prob.saturated_loglik();
    let mut ctx = FreeCtx {
        gd,
        prob,
        pens: penalties,
        ctrl,
        inner_iterations: 0,
        sat,
    };
    // Automatic scale of the smoothing parameters as `reml::auto_rho` (the intercepts carry no
    // penalty).
    let centre = free_auto_rho(gd, prob, penalties);
    // The offset-only start: one common intercept (as `reml::intercept_start`).
    let start0 = offset_only_intercept(prob).map(|c| {
        let mut b = vec![0.0; pa + ngroups];
        b[pa..].iter_mut().for_each(|v| *v = c);
        b
    });
    let o = optimise(&mut ctx, m, &centre, ctrl, None, start0, interrupted)?;
    let pt = o.pt;
    let h = &pt.h;
    let lambda: Vec<f64> = pt.rho.iter().map(|r| r.exp()).collect();
    let s = penalties.total(&lambda);
    let si = h.sigma_inv.clone();
    // Ve = Vp X'WX Vp, beta block: Sigma^{-1} (Sigma - S) Sigma^{-1}; edf = diag(I - Sigma^{-1} S).
    let ve = &si - &si * &s * &si;
    let ve = (&ve + ve.transpose()) * 0.5;
    let f = DMatrix::identity(pa, pa) - &si * &s;
    let edf: Vec<f64> = (0..pa).map(|i| f[(i, i)]).collect();
    let intercept_se: Vec<f64> = (0..ngroups)
        .map(|t| {
            let c = h.h.r.column(t) / h.h.d[t];
            (1.0 / h.h.d[t] + (&si * &c).dot(&c)).max(0.0).sqrt()
        })
        .collect();
    let row_grad = pirls::row_gradients(prob, &pt.eta[..nrow]);
    let sandwich = cluster_of_group.map(|c| {
        // Cluster scores of the eliminated design: sum_r g_r (a_r - Q_t / d_t), from the group
        // sums of g and g a (clusters are unions of groups), group after group.
        let nc = c.iter().copied().max().map_or(0, |v| v + 1);
        let mut z = DMatrix::<f64>::zeros(nc, pa);
        let (gs, gaw) = gd.weight_sums(&[&row_grad]);
        let (gs, gaw) = (&gs[0], &gaw[0]);
        for (t, &cl) in c.iter().enumerate() {
            for j in 0..pa {
                z[(cl, j)] += gaw[j * ngroups + t] - gs[t] * (h.h.r[(j, t)] / h.h.d[t]);
            }
        }
        let meat = z.transpose() * &z;
        let v = &si * meat * &si;
        (&v + v.transpose()) * 0.5
    });
    let n_certain = match prob.family {
        crate::engine::family::Family::Binomial => prob
            .y
            .iter()
            .zip(&pt.mu)
            .filter(|(&y, &mu)| y == 1.0 && mu > 1.0 - 1e-10)
            .count(),
        _ => 0,
    };
    let at_bound = (0..m)
        .map(|j| !o.fixed && (pt.rho[j] >= o.hi[j] - 1e-10 || pt.rho[j] <= o.lo[j] + 1e-10))
        .collect();
    let hess_beta = h.h.p.clone();
    let fit = GlmFit {
        coefficients: pt.beta[..pa].to_vec(),
        aliased: vec![false; pa],
        cov: si.clone(),
        hessian: hess_beta,
        eta: pt.eta.clone(),
        fitted: pt.mu.clone(),
        row_grad,
        loglik: pt.loglik,
        penalised_loglik: pt.objective,
        deviance: 2.0 * (sat - pt.objective),
        n_certain,
        convergence: pt.convergence.clone(),
    };
    Ok(FreeInterceptFit {
        reml: RemlFit {
            coefficients: pt.beta[..pa].to_vec(),
            sp: lambda,
            rho: pt.rho.clone(),
            vp: si,
            ve,
            edf,
            reml: pt.score,
            gradient: o.der.grad,
            hessian: o.der.hess,
            mp: penalties.null_space_dim() + ngroups,
            at_bound,
            fit,
            convergence: o.convergence,
            inner_iterations: ctx.inner_iterations,
        },
        intercepts: pt.beta[pa..].to_vec(),
        intercept_se,
        sandwich,
    })
}

/// `reml::auto_rho` for the free-intercept design: lambda_j S_j comparable with A'WA.
fn free_auto_rho<D: FreeRows + ?Sized>(gd: &D, prob: &Problem, pens: &PenaltySet) -> Vec<f64> {
    let w = start_weights(prob);
    let u = gd.a_crossprods(&[&w]).pop().expect("one weight vector");
    let pa = gd.n_a();
    rho_from_diagonal(pens, |j| u[j * pa + j])
}

/// Test data of the free-intercept fit: `ng` groups of one data row and `per - 1` reference rows
/// (with `snce_layout` all data rows first, then the reference rows group by group, as snce()
/// stacks them; else each group's rows together, its data row first), in clusters of `cluster`
/// consecutive groups. A (n x pa): a parametric column and a 5-column basis with its
/// second-difference penalty `s`.
#[cfg(test)]
pub(crate) struct FreeToy {
    pub ng: usize,
    pub n: usize,
    pub pa: usize,
    pub a: Vec<f64>,
    pub y: Vec<f64>,
    pub w: Vec<f64>,
    pub group: Vec<usize>,
    pub offset: Vec<f64>,
    pub s: DMatrix<f64>,
    pub clusters: Vec<usize>,
}

#[cfg(test)]
impl FreeToy {
    pub fn new(ng: usize, per: usize, snce_layout: bool, cluster: usize) -> Self {
        let n = ng * per;
        let pa = 6;
        let mut a = vec![0.0; n * pa];
        let (mut y, mut group, mut offset) = (vec![0.0; n], vec![0usize; n], vec![0.0; n]);
        for r in 0..n {
            let (t, data) = if snce_layout {
                if r < ng {
                    (r, true)
                } else {
                    ((r - ng) / (per - 1), false)
                }
            } else {
                (r / per, r % per == 0)
            };
            group[r] = t;
            y[r] = if data { 1.0 } else { 0.0 };
            let x = ((r as f64) * 0.618_033_988_7).fract();
            let u = ((r as f64) * 0.414_213_56 + t as f64 * 0.1).fract();
            a[r] = x * (t as f64 / ng as f64) + if data { 0.3 * x } else { 0.0 };
            for k in 0..5 {
                let c = k as f64 / 4.0;
                a[(k + 1) * n + r] = (-(u - c).powi(2) / 0.05).exp() + if data { 0.1 * u } else { 0.0 };
            }
            offset[r] = (1.0 / (per - 1) as f64).ln() + 0.2 * x;
        }
        let mut d2 = DMatrix::zeros(3, 5);
        for i in 0..3 {
            d2[(i, i)] = 1.0;
            d2[(i, i + 1)] = -2.0;
            d2[(i, i + 2)] = 1.0;
        }
        FreeToy {
            ng,
            n,
            pa,
            a,
            y,
            w: vec![1.0; n],
            group,
            offset,
            s: d2.transpose() * d2,
            clusters: (0..ng).map(|t| t / cluster).collect(),
        }
    }

    /// Binomial, unit prior weights.
    pub fn prob(&self) -> Problem<'_> {
        Problem::new(&self.y, &self.w, &self.offset, crate::engine::family::Family::Binomial)
    }

    /// `s` on A's basis columns.
    pub fn pens(&self) -> PenaltySet {
        let pen = crate::engine::penalty::Penalty {
            start: 1,
            s: self.s.clone(),
        };
        PenaltySet::new(self.pa, vec![pen]).unwrap()
    }

    /// The in-memory fit, with the cluster sandwich.
    pub fn fit(&self, ctrl: &RemlControl) -> FreeInterceptFit {
        let groups = FreeGroups {
            group: &self.group,
            ngroups: self.ng,
            cluster_of_group: Some(&self.clusters),
        };
        let a = DenseDesign::new(&self.a, self.n, self.pa).unwrap();
        fit_reml_free_intercepts(a, groups, &self.prob(), &self.pens(), ctrl, &mut || false).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;

    /// Non-contiguous groups of varying size, and the expanded dense matrix.
    fn toy(nrow: usize, ng: usize) -> (Vec<f64>, Vec<f64>, Vec<usize>, Vec<f64>) {
        let (pa, pb) = (3, 4);
        let a: Vec<f64> = (0..nrow * pa).map(|i| ((i as f64) * 0.37).sin()).collect();
        let b: Vec<f64> = (0..ng * pb).map(|i| ((i as f64) * 0.71).cos() + 0.5).collect();
        let group: Vec<usize> = (0..nrow).map(|r| (r * 7 + r / 5) % ng).collect();
        let mut x = vec![0.0; nrow * (pa + pb)];
        for r in 0..nrow {
            for j in 0..pa {
                x[j * nrow + r] = a[j * nrow + r];
            }
            for j in 0..pb {
                x[(pa + j) * nrow + r] = b[j * ng + group[r]];
            }
        }
        (a, b, group, x)
    }

    #[test]
    fn matches_the_expanded_dense_design_and_is_thread_invariant() {
        let (nrow, ng) = (9000, 1500);
        let (a, b, group, x) = toy(nrow, ng);
        let gd = GroupedDesign::new(&a, nrow, 3, &b, ng, 4, &group).unwrap();
        let dd = DenseDesign::new(&x, nrow, 7).unwrap();
        let w: Vec<f64> = (0..nrow).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
        let v: Vec<f64> = (0..nrow).map(|i| (i % 5) as f64 - 2.0).collect();
        let (h1, g1) = with_threads(1, || gd.weighted_crossprod(&w, &v)).unwrap();
        let (h2, g2) = with_threads(2, || gd.weighted_crossprod(&w, &v)).unwrap();
        assert_eq!(h1, h2);
        assert_eq!(g1, g2);
        let (hd, gdn) = dd.weighted_crossprod(&w, &v);
        let scale = hd.amax();
        assert!((&h1 - &hd).amax() < 1e-10 * scale, "{}", (&h1 - &hd).amax());
        assert!((&g1 - &gdn).amax() < 1e-10 * gdn.amax());
        let beta = [0.3, -1.0, 2.0, 0.5, 0.1, -0.7, 1.1];
        let (mut e1, mut e2) = (vec![0.0; nrow], vec![0.0; nrow]);
        gd.linear_predictor(&beta, &mut e1);
        dd.linear_predictor(&beta, &mut e2);
        assert!(e1.iter().zip(&e2).all(|(p, q)| (p - q).abs() < 1e-12));
    }

    #[test]
    fn cross_blocks_by_chunk_equal_the_whole_group_sums() {
        // More groups than one chunk of CHUNK_ROWS, so several chunks are summed.
        let (nrow, ng) = (30_000, 9_000);
        let (a, b, group, _) = toy(nrow, ng);
        let gd = GroupedDesign::new(&a, nrow, 3, &b, ng, 4, &group).unwrap();
        let w1: Vec<f64> = (0..nrow).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
        let w2: Vec<f64> = (0..nrow).map(|i| ((i as f64) * 0.13).sin()).collect();
        let ws: [&[f64]; 2] = [&w1, &w2];
        let (sums, _, aw) = gd.group_sums(&ws, &[]);
        for threads in [1, 2] {
            let (s, _, c) = with_threads(threads, || gd.weighted_cross_blocks(&ws, &[])).unwrap();
            assert_eq!(s, sums);
            for (l, cl) in c.iter().enumerate() {
                assert_eq!(*cl, gd.cross_block(&aw[l]));
            }
        }
    }

    #[test]
    fn optional_methods_match_dense_and_defaults() {
        // Only the required methods: exercises the trait's default implementations.
        crate::engine::design::dense_without_matrix!(Plain, defaults);
        let (nrow, ng) = (5003, 700);
        let (a, b, group, x) = toy(nrow, ng);
        let gd = GroupedDesign::new(&a, nrow, 3, &b, ng, 4, &group).unwrap();
        let dd = DenseDesign::new(&x, nrow, 7).unwrap();
        let pd = Plain(dd);
        let w1: Vec<f64> = (0..nrow).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
        let w2: Vec<f64> = (0..nrow).map(|i| ((i % 13) as f64 - 6.0) * 0.1).collect();
        let m = DMatrix::from_fn(7, 7, |i, j| {
            1.0 / (1.0 + i as f64 + j as f64) + if i == j { 0.5 } else { 0.0 }
        });
        let ws: [&[f64]; 2] = [&w1, &w2];
        let (hg, hd, hp) = (
            gd.weighted_crossprods(&ws),
            dd.weighted_crossprods(&ws),
            pd.weighted_crossprods(&ws),
        );
        for k in 0..2 {
            let scale = hp[k].amax();
            assert!((&hg[k] - &hp[k]).amax() < 1e-10 * scale && (&hd[k] - &hp[k]).amax() < 1e-10 * scale);
            let naive = DMatrix::from_fn(7, 7, |i, j| {
                (0..nrow)
                    .map(|r| ws[k][r] * x[i * nrow + r] * x[j * nrow + r])
                    .sum::<f64>()
            });
            assert!((&hp[k] - naive).amax() < 1e-10 * scale);
        }
        let (cg, cd, cp) = (gd.crossprod_vec(&w2), dd.crossprod_vec(&w2), pd.crossprod_vec(&w2));
        assert!((&cg - &cp).amax() < 1e-10 * cp.amax() && (&cd - &cp).amax() < 1e-10 * cp.amax());
        let (mut qg, mut qd, mut qp) = (vec![0.0; nrow], vec![0.0; nrow], vec![0.0; nrow]);
        gd.row_quadratic_forms(&m, &mut qg);
        dd.row_quadratic_forms(&m, &mut qd);
        pd.row_quadratic_forms(&m, &mut qp);
        for r in 0..nrow {
            assert!(
                (qg[r] - qp[r]).abs() < 1e-10 * (1.0 + qp[r].abs())
                    && (qd[r] - qp[r]).abs() < 1e-10 * (1.0 + qp[r].abs())
            );
        }
        let q1 = with_threads(1, || {
            let mut q = vec![0.0; nrow];
            gd.row_quadratic_forms(&m, &mut q);
            (q, gd.weighted_crossprods(&ws))
        })
        .unwrap();
        let q2 = with_threads(2, || {
            let mut q = vec![0.0; nrow];
            gd.row_quadratic_forms(&m, &mut q);
            (q, gd.weighted_crossprods(&ws))
        })
        .unwrap();
        assert_eq!(q1, q2);
    }

    #[test]
    fn free_intercepts_match_the_expanded_reml_fit() {
        use crate::engine::penalty::Penalty;
        use crate::engine::reml::fit_reml;
        // 80 groups of 1 data row and 6 reference rows, in clusters of 4.
        let data = FreeToy::new(80, 7, false, 4);
        let (ng, n, pa, group) = (data.ng, data.n, data.pa, &data.group[..]);
        let prob = data.prob();
        // Converged tightly: the two fits take different paths (the expanded one starts by
        // performance iteration), and only their common end point is compared.
        let ctrl = RemlControl {
            tol: 1e-11,
            inner: crate::engine::pirls::Control {
                epsilon: 1e-14,
                ..Default::default()
            },
            ..RemlControl::default()
        };
        let fit = || data.fit(&ctrl);
        let free = fit();
        // Expanded: [1, A] and treatment contrasts of the group.
        let mut af = vec![1.0; n * (pa + 1)];
        af[n..].copy_from_slice(&data.a);
        let mut b = vec![0.0; ng * (ng - 1)];
        for t in 1..ng {
            b[(t - 1) * ng + t] = 1.0;
        }
        let gd = GroupedDesign::new(&af, n, pa + 1, &b, ng, ng - 1, group).unwrap();
        let pens_f = PenaltySet::new(
            pa + ng,
            vec![Penalty {
                start: 2,
                s: data.s.clone(),
            }],
        )
        .unwrap();
        let full = fit_reml(&gd, &prob, &pens_f, &ctrl, &mut || false).unwrap();
        let r = &free.reml;
        for j in 0..pa {
            assert!((r.coefficients[j] - full.coefficients[j + 1]).abs() < 1e-8, "coef {j}");
            assert!((r.edf[j] - full.edf[j + 1]).abs() < 1e-7, "edf {j}");
            for k in 0..pa {
                let scale = full.vp[(j + 1, j + 1)].abs().max(1e-12);
                assert!(
                    (r.vp[(j, k)] - full.vp[(j + 1, k + 1)]).abs() < 1e-7 * scale,
                    "vp {j} {k}"
                );
                assert!(
                    (r.ve[(j, k)] - full.ve[(j + 1, k + 1)]).abs() < 1e-7 * scale,
                    "ve {j} {k}"
                );
            }
        }
        assert!(
            (r.reml - full.reml).abs() < 1e-8 * full.reml.abs(),
            "{} {}",
            r.reml,
            full.reml
        );
        assert!((r.sp[0] - full.sp[0]).abs() < 1e-6 * full.sp[0]);
        assert!((free.intercepts[0] - full.coefficients[0]).abs() < 1e-8);
        for t in 1..ng {
            let want = full.coefficients[0] + full.coefficients[pa + t];
            // Relative, and to its standard error: a group whose rows are nearly separated has a
            // weakly pinned intercept (group 58: se 1.7e5), which rounding moves by ~1e-6.
            assert!(
                (free.intercepts[t] - want).abs() < 1e-7 * (1.0 + want.abs()) + 1e-9 * free.intercept_se[t],
                "group {t}"
            );
        }
        // The clustered sandwich: same beta block as on the expanded design.
        let sw = crate::engine::sandwich::grouped_cluster_sandwich(
            &gd,
            &data.clusters,
            &full.fit.row_grad,
            &full.vp,
            &full.fit.aliased,
        )
        .unwrap();
        let fs = free.sandwich.as_ref().unwrap();
        for j in 0..pa {
            for k in 0..pa {
                let scale = sw[(j + 1, j + 1)].abs().max(1e-12);
                assert!(
                    (fs[(j, k)] - sw[(j + 1, k + 1)]).abs() < 1e-6 * scale,
                    "sandwich {j} {k}"
                );
            }
        }
        // Thread invariance.
        let again = with_threads(2, fit).unwrap();
        let one = with_threads(1, fit).unwrap();
        assert_eq!(again.reml.coefficients, one.reml.coefficients);
    }

    #[test]
    fn rejects_bad_groups() {
        let (a, b, mut group, _) = toy(20, 4);
        assert!(GroupedDesign::new(&a, 20, 3, &b, 4, 4, &group[..19]).is_err());
        group[3] = 4;
        let e = GroupedDesign::new(&a, 20, 3, &b, 4, 4, &group).unwrap_err();
        assert!(e.to_string().contains("row 4"), "{e}");
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use crate::engine::discrete::timing::Synthetic;
    use std::time::Instant;

    #[test]
    #[ignore]
    fn timing_grouped_discrete() {
        let (ng, per) = (28_000usize, 21usize);
        let n = ng * per;
        let synthetic = Synthetic::new(n);
        let specs = synthetic.specs();
        let pb = 24;
        let b: Vec<f64> = (0..ng * pb).map(|i| ((i as f64) * 0.71).cos()).collect();
        let group: Vec<usize> = (0..n).map(|r| if r < ng { r } else { (r - ng) / (per - 1) }).collect();
        let gd = GroupedDesign::with_block(DiscreteDesign::new(n, &specs).unwrap(), &b, ng, pb, &group).unwrap();
        let p = gd.ncol();
        let w: Vec<f64> = (0..n).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
        let t = Instant::now();
        let _ = gd.weighted_crossprod(&w, &w);
        eprintln!("grouped crossprod {:?}", t.elapsed());
        let t = Instant::now();
        let _ = gd.a.crossprod_parts(&[&w]);
        eprintln!("  A part {:?}", t.elapsed());
        let best = |f: &dyn Fn()| {
            (0..20)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .fold(f64::MAX, f64::min)
        };
        eprintln!(
            "  group sums (best of 20) {:.2} ms",
            best(&|| drop(gd.group_sums(&[&w], &[])))
        );
        eprintln!(
            "  A part (best of 20) {:.2} ms",
            best(&|| drop(gd.a.crossprod_parts(&[&w])))
        );
        eprintln!(
            "  crossprod (best of 20) {:.2} ms",
            best(&|| drop(gd.weighted_crossprod(&w, &w)))
        );
        let mut e = vec![0.0; n];
        let beta: Vec<f64> = (0..p).map(|i| i as f64 * 0.01).collect();
        let t = Instant::now();
        gd.linear_predictor(&beta, &mut e);
        eprintln!("linpred {:?}", t.elapsed());
        let m = DMatrix::from_fn(p, p, |i, j| 1.0 / (1.0 + i as f64 + j as f64));
        let t = Instant::now();
        gd.row_quadratic_forms(&m, &mut e);
        eprintln!("quad {:?}", t.elapsed());
        let t = Instant::now();
        gd.a.quadratic_forms_raw(&doubled_upper(&m.view((0, 0), (34, 34)).into_owned()), &mut e);
        eprintln!("  A quad {:?}", t.elapsed());
        let ws: Vec<&[f64]> = vec![&w; 5];
        let t = Instant::now();
        let _ = gd.weighted_crossprods(&ws);
        eprintln!("5 crossprods {:?}", t.elapsed());
    }
}
