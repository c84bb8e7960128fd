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
//! Sums stream over the rows in row order (the index vectors, w and the small matrices stay in
//! cache): each fixed chunk of rows gives a partial sum, and partials are added in chunk order,
//! so results do not depend on the number of threads.

use crate::design::{doubled_upper, DenseDesign, Design, CHUNK_ROWS};
use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Rows per partial sum (fixed, so sums do not depend on the thread count).
const CHUNK: usize = 1 << 16;
/// Partial sums computed at once (bounds the memory of the partials).
const BATCH: usize = 16;
/// Largest m_j m_l for which a cross block is formed by a table of weight sums.
const TABLE_MAX: usize = 1 << 16;

/// sum over fixed row chunks of f(r0, r1, partial), partials added in chunk order.
fn chunked_sum(n: usize, len: usize, f: impl Fn(usize, usize, &mut [f64]) + Sync) -> Vec<f64> {
    let nchunk = n.div_ceil(CHUNK).max(1);
    let mut total = vec![0.0; len];
    for b0 in (0..nchunk).step_by(BATCH) {
        let parts: Vec<Vec<f64>> = (b0..(b0 + BATCH).min(nchunk))
            .into_par_iter()
            .map(|c| {
                let mut part = vec![0.0; len];
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

    /// Per distinct value: the sum of v over its rows.
    fn value_sums(&self, v: &[f64]) -> Vec<f64> {
        if self.m == 1 {
            return chunked_sum(v.len(), 1, |r0, r1, s| s[0] = v[r0..r1].iter().sum());
        }
        chunked_sum(v.len(), self.m, |r0, r1, s| {
            for (&k, &x) in self.index[r0..r1].iter().zip(&v[r0..r1]) {
                s[(k - 1) as usize] += x;
            }
        })
    }
}

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

    /// X_j' v.
    fn crossprod_vec(&self, v: &[f64]) -> Vec<f64> {
        match self {
            Term::Mapped(t) => {
                let s = DVector::from_vec(t.value_sums(v));
                t.mat.tr_mul(&s).as_slice().to_vec()
            }
            Term::Dense(d) => d.crossprod_vec_raw(v),
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

    /// X' v.
    pub fn crossprod_vec_raw(&self, v: &[f64]) -> Vec<f64> {
        let mut g = vec![0.0; self.p];
        for (t, &o) in self.terms.iter().zip(&self.off) {
            g[o..o + t.p()].copy_from_slice(&t.crossprod_vec(v));
        }
        g
    }

    /// X_j' W X_l for j != l (p_j x p_l).
    fn cross_block(&self, j: usize, l: usize, w: &[f64], sums: &[Option<Vec<f64>>]) -> DMatrix<f64> {
        let n = self.nrow;
        let (tj, tl) = (&self.terms[j], &self.terms[l]);
        // A constant term (one distinct row): its row times X_other' w.
        let x_w = |t: &Term, s: &Option<Vec<f64>>| -> DVector<f64> {
            match (t, s) {
                (Term::Mapped(m), Some(s)) => m.mat.tr_mul(&DVector::from_column_slice(s)),
                _ => DVector::from_vec(t.crossprod_vec(w)),
            }
        };
        if let Term::Mapped(mj) = tj {
            if mj.m == 1 {
                return DMatrix::from_row_slice(1, mj.p, mj.row(0)).tr_mul(&x_w(tl, &sums[l]).transpose());
            }
        }
        if let Term::Mapped(ml) = tl {
            if ml.m == 1 {
                return x_w(tj, &sums[j]) * DMatrix::from_row_slice(1, ml.p, ml.row(0));
            }
        }
        // Bucket by the term with fewer distinct values (a mapped one).
        let (b, o, flip) = match (tj, tl) {
            (Term::Mapped(a), Term::Mapped(c)) => {
                if a.m <= c.m {
                    (a, tl, false)
                } else {
                    (c, tj, true)
                }
            }
            (Term::Mapped(a), Term::Dense(_)) => (a, tl, false),
            (Term::Dense(_), Term::Mapped(c)) => (c, tj, true),
            (Term::Dense(_), Term::Dense(_)) => unreachable!("at most one dense term"),
        };
        let po = o.p();
        let mo = o.m(n);
        let block = match o {
            Term::Mapped(om) if b.m * mo <= TABLE_MAX && b.m * mo <= n => {
                // T[a, c]: sums of w over rows with (k_b, k_o) = (a, c); row-major m_b x m_o.
                let t = chunked_sum(n, b.m * mo, |r0, r1, t| {
                    for r in r0..r1 {
                        t[b.k(r) * mo + om.k(r)] += w[r];
                    }
                });
                let t = DMatrix::from_row_slice(b.m, mo, &t);
                b.mat.tr_mul(&(t * &om.mat))
            }
            _ => {
                // D[a, ] = sum over rows with k_b = a of w_r x_o,r; row-major m_b x p_o.
                let d = chunked_sum(n, b.m * po, |r0, r1, d| {
                    for r in r0..r1 {
                        let a = b.k(r);
                        o.axpy_row(r, w[r], &mut d[a * po..(a + 1) * po]);
                    }
                });
                b.mat.tr_mul(&DMatrix::from_row_slice(b.m, po, &d))
            }
        };
        if flip {
            block.transpose()
        } else {
            block
        }
    }

    /// X' diag(w) X.
    pub fn crossprod_full(&self, w: &[f64]) -> DMatrix<f64> {
        let nt = self.terms.len();
        let sums: Vec<Option<Vec<f64>>> = self
            .terms
            .iter()
            .map(|t| match t {
                Term::Mapped(m) => Some(m.value_sums(w)),
                Term::Dense(_) => None,
            })
            .collect();
        let mut h = DMatrix::zeros(self.p, self.p);
        for j in 0..nt {
            let (oj, pj) = (self.off[j], self.terms[j].p());
            let block = match (&self.terms[j], &sums[j]) {
                (Term::Mapped(m), Some(s)) => {
                    let ws = DMatrix::from_fn(m.m, m.p, |a, i| m.mat[(a, i)] * s[a]);
                    m.mat.tr_mul(&ws)
                }
                (Term::Dense(d), _) => {
                    let u = d.crossprod_parts(&[w]).pop().expect("one weight");
                    DMatrix::from_fn(pj, pj, |a, c| if a <= c { u[a * pj + c] } else { u[c * pj + a] })
                }
                _ => unreachable!(),
            };
            h.view_mut((oj, oj), (pj, pj)).copy_from(&block);
            for l in j + 1..nt {
                let (ol, pl) = (self.off[l], self.terms[l].p());
                let c = self.cross_block(j, l, w, &sums);
                h.view_mut((oj, ol), (pj, pl)).copy_from(&c);
                h.view_mut((ol, oj), (pl, pj)).copy_from(&c.transpose());
            }
        }
        h
    }

    /// Upper triangles (row j, column k >= j at j * p + k) of X' diag(w_l) X.
    pub fn crossprod_parts(&self, weights: &[&[f64]]) -> Vec<Vec<f64>> {
        let p = self.p;
        weights
            .iter()
            .map(|w| {
                let h = self.crossprod_full(w);
                let mut u = vec![0.0; p * p];
                for j in 0..p {
                    for k in j..p {
                        u[j * p + k] = h[(j, k)];
                    }
                }
                u
            })
            .collect()
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
        (self.crossprod_full(w), DVector::from_vec(self.crossprod_vec_raw(v)))
    }

    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        weights.iter().map(|w| self.crossprod_full(w)).collect()
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
    use crate::design::with_threads;

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
    fn matches_the_expanded_dense_design_and_is_thread_invariant() {
        for n in [9000usize, 300] {
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
        }
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
}
