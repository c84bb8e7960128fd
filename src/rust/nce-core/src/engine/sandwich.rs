//! Covariances that are right for NCE.
//!
//! Data and reference points are independent samples, not Bernoulli labels given the points.
//! With scores s_r = g_r x_r, the meat is the sum over samples of the within-sample centred
//! outer products, sum_r s_r s_r' - sum_k n_k sbar_k sbar_k', which reproduces the asymptotic
//! covariance of Gutmann & Hyvarinen (2012) (their rank-one correction is the centring).

use crate::engine::design::Design;
use crate::engine::grouped::{GroupedDesign, RowBlock};
use crate::error::{NceError, Result};
use crate::linalg::select;
use nalgebra::{DMatrix, DVector};

/// Sandwich bread * meat * bread for rows split into independent samples `sample[r]` (0, 1, ...).
/// `bread` is the inverse negative Hessian (NaN rows/cols where `aliased`).
pub fn sample_sandwich<D: Design>(
    d: &D,
    row_grad: &[f64],
    sample: &[usize],
    bread: &DMatrix<f64>,
    aliased: &[bool],
) -> Result<DMatrix<f64>> {
    let n = d.nrow();
    if row_grad.len() != n || sample.len() != n {
        return Err(NceError::invalid(
            "sample",
            format!("must have one entry per row ({n})"),
        ));
    }
    let k = sample.iter().copied().max().unwrap_or(0) + 1;
    let g2: Vec<f64> = row_grad.iter().map(|g| g * g).collect();
    let mut meat = d
        .weighted_crossprods(&[&g2])
        .pop()
        .ok_or_else(|| NceError::Numerical("no cross-product".into()))?;
    for s in 0..k {
        let count = sample.iter().filter(|&&v| v == s).count();
        if count == 0 {
            continue;
        }
        let gs: Vec<f64> = row_grad
            .iter()
            .zip(sample)
            .map(|(g, &v)| if v == s { *g } else { 0.0 })
            .collect();
        let total: DVector<f64> = d.crossprod_vec(&gs);
        meat -= &total * total.transpose() / count as f64;
    }
    Ok(bread_meat_bread(bread, &meat, aliased))
}

/// bread * meat * bread on the identifiable coefficients, symmetrised; NaN where aliased.
pub(crate) fn bread_meat_bread(bread: &DMatrix<f64>, meat: &DMatrix<f64>, aliased: &[bool]) -> DMatrix<f64> {
    let p = meat.nrows();
    let keep: Vec<usize> = (0..p).filter(|&j| !aliased[j]).collect();
    let b = select(bread, &keep);
    let v = &b * select(meat, &keep) * &b;
    let mut out = DMatrix::from_element(p, p, f64::NAN);
    for (x, &i) in keep.iter().enumerate() {
        for (y, &j) in keep.iter().enumerate() {
            out[(i, j)] = 0.5 * (v[(x, y)] + v[(y, x)]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::DenseDesign;

    #[test]
    fn meat_is_centred_within_each_sample() {
        // one column of ones: centred scores within a sample sum to zero, so the meat vanishes.
        let n = 10;
        let x = vec![1.0; n];
        let d = DenseDesign::new(&x, n, 1).unwrap();
        let g: Vec<f64> = (0..n).map(|i| if i < 4 { 0.3 } else { -0.1 }).collect();
        let sample: Vec<usize> = (0..n).map(|i| usize::from(i < 4)).collect();
        let v = sample_sandwich(&d, &g, &sample, &DMatrix::identity(1, 1), &[false]).unwrap();
        assert!(v[(0, 0)].abs() < 1e-15);
    }
}

/// The clusters' score sums (one row per cluster, `p` columns), zero, once `row_grad` (one
/// entry per row of `n`) and `cluster_of_group` (one per group of `ng`) are checked.
pub(crate) fn cluster_score_sums(
    n: usize,
    ng: usize,
    p: usize,
    row_grad: &[f64],
    cluster_of_group: &[usize],
) -> Result<DMatrix<f64>> {
    if row_grad.len() != n {
        return Err(NceError::invalid(
            "row_grad",
            format!("must have one entry per row ({n})"),
        ));
    }
    if cluster_of_group.len() != ng {
        return Err(NceError::invalid(
            "cluster",
            format!("must have one entry per group ({ng})"),
        ));
    }
    let nc = cluster_of_group.iter().copied().max().map_or(0, |m| m + 1);
    Ok(DMatrix::<f64>::zeros(nc, p))
}

/// Sandwich for dependent rows: the meat is sum_c S_c S_c' over clusters c, S_c the sum of the
/// scores g_r x_r of the rows in c (uncentred: in a Markov chain the per-transition score sums
/// are martingale differences). The design is [A | B[group, ]] (B may have no columns);
/// clusters are unions of groups: `cluster_of_group[t]` for each group t.
pub fn grouped_cluster_sandwich(
    design: &GroupedDesign,
    cluster_of_group: &[usize],
    row_grad: &[f64],
    bread: &DMatrix<f64>,
    aliased: &[bool],
) -> Result<DMatrix<f64>> {
    let (n, pa, pb, ng) = (design.nrow(), design.pa(), design.pb(), design.ngroups());
    let group = design.group();
    let p = pa + pb;
    let mut s = cluster_score_sums(n, ng, p, row_grad, cluster_of_group)?;
    match design.a() {
        // Through the per-group sums of row_grad a_r (a row-sharded design returns these: the
        // same result whatever the rows' split; engine/shards.rs).
        RowBlock::Dense(_) => {
            let (_, _, aw) = design.group_sums(&[row_grad], &[]);
            add_group_sums_by_cluster(&mut s, cluster_of_group, &aw[0], pa);
        }
        RowBlock::Discrete(_) => {
            let mut x = vec![0.0; pa];
            for r in 0..n {
                design.a_row_into(r, &mut x);
                let c = cluster_of_group[group[r]];
                for (j, xj) in x.iter().enumerate() {
                    s[(c, j)] += row_grad[r] * xj;
                }
            }
        }
    }
    add_group_block(&mut s, design.b(), group, cluster_of_group, row_grad, pa);
    Ok(bread_meat_bread(bread, &(s.transpose() * &s), aliased))
}

/// s[(cluster of t, j)] += aw[t, j] (aw ngroups x pa, column-major), groups in order.
pub(crate) fn add_group_sums_by_cluster(s: &mut DMatrix<f64>, cluster_of_group: &[usize], aw: &[f64], pa: usize) {
    let ng = cluster_of_group.len();
    for j in 0..pa {
        for t in 0..ng {
            s[(cluster_of_group[t], j)] += aw[j * ng + t];
        }
    }
}

/// The group-level columns of the clustered score sums.
pub(crate) fn add_group_block(
    s: &mut DMatrix<f64>,
    b: &crate::engine::design::DenseDesign,
    group: &[usize],
    cluster_of_group: &[usize],
    row_grad: &[f64],
    pa: usize,
) {
    let (ng, pb, n) = (b.nrow(), b.ncol(), row_grad.len());
    if pb > 0 {
        let mut gsum = vec![0.0; ng];
        for r in 0..n {
            gsum[group[r]] += row_grad[r];
        }
        for k in 0..pb {
            let col = b.col(k);
            for t in 0..ng {
                s[(cluster_of_group[t], pa + k)] += gsum[t] * col[t];
            }
        }
    }
}

#[cfg(test)]
mod cluster_tests {
    use super::*;

    #[test]
    fn one_row_per_cluster_gives_the_uncentred_hc0_meat() {
        // design [1, x] with no B block, each row its own group and cluster
        let n = 5;
        let a: Vec<f64> = [1.0; 5].iter().copied().chain([0.1, 0.4, 0.2, 0.9, 0.5]).collect();
        let g = [0.3, -0.2, 0.1, -0.4, 0.2];
        let group: Vec<usize> = (0..n).collect();
        let d = GroupedDesign::new(&a, n, 2, &[], n, 0, &group).unwrap();
        let v = grouped_cluster_sandwich(&d, &group, &g, &DMatrix::identity(2, 2), &[false, false]).unwrap();
        let m00: f64 = g.iter().map(|x| x * x).sum();
        let m01: f64 = g.iter().zip(&a[n..]).map(|(x, y)| x * x * y).sum();
        assert!((v[(0, 0)] - m00).abs() < 1e-14 && (v[(0, 1)] - m01).abs() < 1e-14);
    }

    #[test]
    fn shared_group_row_enters_once_per_cluster() {
        // two groups of two rows, B = one column; clusters = groups
        let a = vec![1.0; 4];
        let b = vec![2.0, 3.0];
        let group = [0, 0, 1, 1];
        let g = [0.5, -0.2, 0.1, 0.3];
        let d = GroupedDesign::new(&a, 4, 1, &b, 2, 1, &group).unwrap();
        let v = grouped_cluster_sandwich(&d, &[0, 1], &g, &DMatrix::identity(2, 2), &[false, false]).unwrap();
        // S = [[0.3, 0.6], [0.4, 1.2]]
        assert!((v[(1, 1)] - (0.36 + 1.44)).abs() < 1e-12);
        assert!((v[(0, 1)] - (0.18 + 0.48)).abs() < 1e-12);
    }
}
