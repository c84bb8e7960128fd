//! The sequential-NCE design: row r is [a_r | b_{g(r)}], with b shared by the rows of a group.
//!
//! X'WX = | A'WA                      sum_t (sum_{r in t} w_r a_r) b_t' |
//!        | (transpose)               sum_t (sum_{r in t} w_r) b_t b_t' |
//! so the group block costs O(ngroups pb^2) instead of O(nrow pb^2). Group sums run over the
//! rows of each group in row order, and all partial sums are added in a fixed order, so results
//! do not depend on the number of threads.

use crate::design::{doubled_upper, kernels, DenseDesign, Design, CHUNK_ROWS};
use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use std::sync::OnceLock;

/// Groups per chunk of the parallel group sums.
const CHUNK_GROUPS: usize = 1024;

/// Per weight vector: group sums of w, of w a_r (ngroups x pa), and of the plain vectors.
type GroupSums = (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<Vec<f64>>);

#[derive(Debug, Clone)]
pub struct GroupedDesign<'a> {
    a: DenseDesign<'a>,
    b: DenseDesign<'a>,
    group: &'a [usize],
    /// Rows sorted by group (stable), and where each group starts in that list.
    rows_by_group: Vec<usize>,
    group_start: Vec<usize>,
    a_rows: OnceLock<Vec<f64>>,
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
        let b = DenseDesign::new(b, ngroups, pb).map_err(|e| rename(e, "b"))?;
        if group.len() != nrow {
            return Err(NceError::invalid(
                "group",
                format!("has length {}, expected {nrow} (rows of a)", group.len()),
            ));
        }
        if let Some(r) = group.iter().position(|&g| g >= ngroups) {
            return Err(NceError::invalid(
                "group",
                format!("row {} names group {} but there are {ngroups}", r + 1, group[r] + 1),
            ));
        }
        // Counting sort keeps rows of a group in row order.
        let mut group_start = vec![0usize; ngroups + 1];
        for &g in group {
            group_start[g + 1] += 1;
        }
        for t in 0..ngroups {
            group_start[t + 1] += group_start[t];
        }
        let mut next = group_start.clone();
        let mut rows_by_group = vec![0usize; nrow];
        for (r, &g) in group.iter().enumerate() {
            rows_by_group[next[g]] = r;
            next[g] += 1;
        }
        Ok(GroupedDesign {
            a,
            b,
            group,
            rows_by_group,
            group_start,
            a_rows: OnceLock::new(),
        })
    }

    /// A in row-major order (built on first use: the group sums read A row by row).
    fn a_rows(&self) -> &[f64] {
        self.a_rows.get_or_init(|| {
            let (n, pa) = (self.a.nrow(), self.pa());
            let mut at = vec![0.0; n * pa];
            at.par_chunks_mut(CHUNK_ROWS * pa.max(1))
                .enumerate()
                .for_each(|(k, chunk)| {
                    let r0 = k * CHUNK_ROWS;
                    for j in 0..pa {
                        let col = self.a.col(j);
                        for (i, row) in chunk.chunks_mut(pa).enumerate() {
                            row[j] = col[r0 + i];
                        }
                    }
                });
            at
        })
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
    pub fn a(&self) -> &DenseDesign<'a> {
        &self.a
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
    fn group_sums(&self, ws: &[&[f64]], plain: &[&[f64]]) -> GroupSums {
        let (ng, pa) = (self.ngroups(), self.pa());
        let (nw, nv) = (ws.len(), plain.len());
        type Part = GroupSums;
        let parts: Vec<Part> = (0..ng.div_ceil(CHUNK_GROUPS))
            .into_par_iter()
            .map(|k| {
                let (t0, t1) = (k * CHUNK_GROUPS, ((k + 1) * CHUNK_GROUPS).min(ng));
                let m = t1 - t0;
                let mut sums = vec![vec![0.0; m]; nw];
                let mut psums = vec![vec![0.0; m]; nv];
                let mut aws = vec![vec![0.0; m * pa]; nw];
                let at = self.a_rows();
                let mut acc = vec![0.0; pa];
                for t in t0..t1 {
                    let rows = &self.rows_by_group[self.group_start[t]..self.group_start[t + 1]];
                    for (v, s) in plain.iter().zip(psums.iter_mut()) {
                        s[t - t0] = rows.iter().map(|&r| v[r]).sum();
                    }
                    for ((w, s), aw) in ws.iter().zip(sums.iter_mut()).zip(aws.iter_mut()) {
                        s[t - t0] = rows.iter().map(|&r| w[r]).sum();
                        // Row-major rows of A: sum_r w_r a_r is a short vector update per row.
                        acc.iter_mut().for_each(|a| *a = 0.0);
                        for &r in rows {
                            let wr = w[r];
                            for (a, x) in acc.iter_mut().zip(&at[r * pa..(r + 1) * pa]) {
                                *a += wr * x;
                            }
                        }
                        for (j, a) in acc.iter().enumerate() {
                            aw[j * m + t - t0] = *a;
                        }
                    }
                }
                (sums, psums, aws)
            })
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

    /// sum_t aw_t b_t' (pa x pb), over fixed chunks of groups added in order.
    fn cross_block(&self, aw: &[f64]) -> DMatrix<f64> {
        let (ng, pa, pb) = (self.ngroups(), self.pa(), self.pb());
        let parts: Vec<DMatrix<f64>> = (0..ng.div_ceil(CHUNK_ROWS))
            .into_par_iter()
            .map(|k| {
                let (t0, t1) = (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(ng));
                DMatrix::from_fn(pa, pb, |i, j| {
                    kernels::dot(&aw[i * ng + t0..i * ng + t1], &self.b.col(j)[t0..t1])
                })
            })
            .collect();
        parts.into_iter().fold(DMatrix::zeros(pa, pb), |acc, m| acc + m)
    }

    /// Assemble [A'WA, cross; cross', B'W_gB] from the upper triangles of the blocks.
    fn assemble(&self, haa: &[f64], hbb: &[f64], hab: &DMatrix<f64>) -> DMatrix<f64> {
        let (pa, pb) = (self.pa(), self.pb());
        let up = |u: &[f64], q: usize, i: usize, j: usize| if i <= j { u[i * q + j] } else { u[j * q + i] };
        DMatrix::from_fn(pa + pb, pa + pb, |i, j| match (i < pa, j < pa) {
            (true, true) => up(haa, pa, i, j),
            (false, false) => up(hbb, pb, i - pa, j - pa),
            (true, false) => hab[(i, j - pa)],
            (false, true) => hab[(j, i - pa)],
        })
    }
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
        let haa = self.a.crossprod_parts(&[w]).pop().unwrap();
        let ga = self.a.crossprod_vec_raw(v);
        let (ws, vs, aw) = self.group_sums(&[w], &[v]);
        let hbb = self.b.crossprod_parts(&[&ws[0]]).pop().unwrap();
        let gb = self.b.crossprod_vec_raw(&vs[0]);
        let hab = self.cross_block(&aw[0]);
        let mut g = DVector::zeros(pa + pb);
        g.rows_mut(0, pa).copy_from_slice(&ga);
        g.rows_mut(pa, pb).copy_from_slice(&gb);
        (self.assemble(&haa, &hbb, &hab), g)
    }

    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        let haa = self.a.crossprod_parts(weights);
        let (ws, _, aw) = self.group_sums(weights, &[]);
        let wsr: Vec<&[f64]> = ws.iter().map(|v| v.as_slice()).collect();
        let hbb = self.b.crossprod_parts(&wsr);
        haa.iter()
            .zip(&hbb)
            .zip(&aw)
            .map(|((ha, hb), a)| self.assemble(ha, hb, &self.cross_block(a)))
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
        // c[j * ng + t] = 2 (M_ab b_t)_j
        let mut c = vec![0.0; pa * ng];
        for (j, cj) in c.chunks_mut(ng).enumerate() {
            let row: Vec<f64> = (0..pb).map(|k| m[(j, pa + k)] + m[(pa + k, j)]).collect();
            self.b.linear_predictor(&row, cj);
        }
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let r0 = k * CHUNK_ROWS;
            let g = &self.group[r0..r0 + o.len()];
            for (v, &t) in o.iter_mut().zip(g) {
                *v += dq[t];
            }
            for j in 0..pa {
                let (aj, cj) = (&self.a.col(j)[r0..r0 + o.len()], &c[j * ng..(j + 1) * ng]);
                for ((v, &t), x) in o.iter_mut().zip(g).zip(aj) {
                    *v += x * cj[t];
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::with_threads;

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
    fn optional_methods_match_dense_and_defaults() {
        /// Only the required methods: exercises the trait's default implementations.
        struct Plain<'a>(DenseDesign<'a>);
        impl Design for Plain<'_> {
            fn nrow(&self) -> usize {
                self.0.nrow()
            }
            fn ncol(&self) -> usize {
                self.0.ncol()
            }
            fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
                self.0.linear_predictor(beta, out)
            }
            fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
                self.0.weighted_crossprod(w, v)
            }
        }
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
    fn rejects_bad_groups() {
        let (a, b, mut group, _) = toy(20, 4);
        assert!(GroupedDesign::new(&a, 20, 3, &b, 4, 4, &group[..19]).is_err());
        group[3] = 4;
        let e = GroupedDesign::new(&a, 20, 3, &b, 4, 4, &group).unwrap_err();
        assert!(e.to_string().contains("row 4"), "{e}");
    }
}
