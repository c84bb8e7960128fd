//! The sequential-NCE design: row r is [a_r | b_{g(r)}], with b shared by the rows of a group.
//!
//! X'WX = | A'WA                      sum_t (sum_{r in t} w_r a_r) b_t' |
//!        | (transpose)               sum_t (sum_{r in t} w_r) b_t b_t' |
//! so the group block costs O(ngroups pb^2) instead of O(nrow pb^2). Group sums run over the
//! rows of each group in row order, and all partial sums are added in a fixed order, so results
//! do not depend on the number of threads.

use crate::design::{Design, DenseDesign, CHUNK_ROWS};
use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Groups per chunk of the parallel group sums.
const CHUNK_GROUPS: usize = 1024;

#[derive(Debug, Clone)]
pub struct GroupedDesign<'a> {
    a: DenseDesign<'a>,
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
        let b = DenseDesign::new(b, ngroups, pb).map_err(|e| rename(e, "b"))?;
        if group.len() != nrow {
            return Err(NceError::invalid("group", format!("has length {}, expected {nrow} (rows of a)", group.len())));
        }
        if let Some(r) = group.iter().position(|&g| g >= ngroups) {
            return Err(NceError::invalid("group", format!("row {} names group {} but there are {ngroups}", r + 1, group[r] + 1)));
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
        Ok(GroupedDesign { a, b, group, rows_by_group, group_start })
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

    /// Per group: sum of w, sum of v, and sum of w_r a_r (ngroups x pa, column-major).
    fn group_sums(&self, w: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (ng, pa) = (self.ngroups(), self.pa());
        let parts: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = (0..ng.div_ceil(CHUNK_GROUPS))
            .into_par_iter()
            .map(|k| {
                let (t0, t1) = (k * CHUNK_GROUPS, ((k + 1) * CHUNK_GROUPS).min(ng));
                let m = t1 - t0;
                let (mut ws, mut vs, mut aw) = (vec![0.0; m], vec![0.0; m], vec![0.0; m * pa]);
                for t in t0..t1 {
                    for &r in &self.rows_by_group[self.group_start[t]..self.group_start[t + 1]] {
                        ws[t - t0] += w[r];
                        vs[t - t0] += v[r];
                    }
                }
                for j in 0..pa {
                    let col = self.a.col(j);
                    for t in t0..t1 {
                        let rows = &self.rows_by_group[self.group_start[t]..self.group_start[t + 1]];
                        aw[j * m + t - t0] = rows.iter().map(|&r| w[r] * col[r]).sum();
                    }
                }
                (ws, vs, aw)
            })
            .collect();
        let (mut ws, mut vs, mut aw) = (Vec::with_capacity(ng), Vec::with_capacity(ng), vec![0.0; ng * pa]);
        let mut t0 = 0;
        for (w_c, v_c, a_c) in parts {
            let m = w_c.len();
            for j in 0..pa {
                aw[j * ng + t0..j * ng + t0 + m].copy_from_slice(&a_c[j * m..(j + 1) * m]);
            }
            ws.extend(w_c);
            vs.extend(v_c);
            t0 += m;
        }
        (ws, vs, aw)
    }

    /// sum_t aw_t b_t' (pa x pb), over fixed chunks of groups added in order.
    fn cross_block(&self, aw: &[f64]) -> DMatrix<f64> {
        let (ng, pa, pb) = (self.ngroups(), self.pa(), self.pb());
        let parts: Vec<DMatrix<f64>> = (0..ng.div_ceil(CHUNK_ROWS))
            .into_par_iter()
            .map(|k| {
                let (t0, t1) = (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(ng));
                DMatrix::from_fn(pa, pb, |i, j| {
                    let (x, y) = (&aw[i * ng + t0..i * ng + t1], &self.b.col(j)[t0..t1]);
                    x.iter().zip(y).map(|(p, q)| p * q).sum()
                })
            })
            .collect();
        parts.into_iter().fold(DMatrix::zeros(pa, pb), |acc, m| acc + m)
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
        let (haa, ga) = self.a.weighted_crossprod(w, v);
        let (ws, vs, aw) = self.group_sums(w, v);
        let (hbb, gb) = self.b.weighted_crossprod(&ws, &vs);
        let hab = self.cross_block(&aw);
        let p = pa + pb;
        let mut h = DMatrix::zeros(p, p);
        h.view_mut((0, 0), (pa, pa)).copy_from(&haa);
        h.view_mut((pa, pa), (pb, pb)).copy_from(&hbb);
        h.view_mut((0, pa), (pa, pb)).copy_from(&hab);
        h.view_mut((pa, 0), (pb, pa)).copy_from(&hab.transpose());
        let mut g = DVector::zeros(p);
        g.rows_mut(0, pa).copy_from(&ga);
        g.rows_mut(pa, pb).copy_from(&gb);
        (h, g)
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
    fn rejects_bad_groups() {
        let (a, b, mut group, _) = toy(20, 4);
        assert!(GroupedDesign::new(&a, 20, 3, &b, 4, 4, &group[..19]).is_err());
        group[3] = 4;
        let e = GroupedDesign::new(&a, 20, 3, &b, 4, 4, &group).unwrap_err();
        assert!(e.to_string().contains("row 4"), "{e}");
    }
}
