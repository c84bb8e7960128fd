//! Quadratic penalties S_lambda = sum_j lambda_j S_j and a stable log|S_lambda|_+.
//!
//! Each S_j is a dense symmetric positive semi-definite matrix on a contiguous coefficient
//! block. Penalties whose blocks overlap are grouped; log|S|_+ is the sum over groups. A group
//! with one penalty contributes rank(S_j) rho_j + const. A group with several (tensor smooths)
//! uses Wood (2011, JRSSB, appendix B): its range space, hence its rank, is fixed once from the
//! sum of the normalised S_j, and at each lambda an orthogonal similarity transform moves the
//! dominant penalties' range to the front, so that a diagonally scaled Cholesky factorisation
//! stays accurate when the lambda_j differ by many orders of magnitude.

use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector, SymmetricEigen};

/// Eigenvalues below this fraction of the largest count as zero when fixing ranks.
const RANK_TOL: f64 = 1e-11;
/// Penalties whose lambda-weighted norm is below this fraction of the largest are "small".
const DOMINANCE_TOL: f64 = 1e-5;

/// One penalty matrix acting on coefficients [start, start + s.nrows()).
#[derive(Debug, Clone)]
pub struct Penalty {
    pub start: usize,
    pub s: DMatrix<f64>,
}

/// log|S_lambda|_+ and its derivatives with respect to rho = log lambda.
#[derive(Debug, Clone)]
pub struct LogDet {
    pub value: f64,
    pub grad: Vec<f64>,
    pub hess: DMatrix<f64>,
}

#[derive(Debug, Clone)]
struct Group {
    start: usize,
    size: usize,
    members: Vec<usize>,
    rank: usize,
    /// Single penalty: sum of the log non-zero eigenvalues of S_j.
    log_const: f64,
    /// Several penalties: each S_j projected on the group's range space (rank x rank).
    projected: Vec<DMatrix<f64>>,
}

#[derive(Debug, Clone)]
pub struct PenaltySet {
    p: usize,
    penalties: Vec<Penalty>,
    groups: Vec<Group>,
}

fn sorted_eigen(a: &DMatrix<f64>) -> (Vec<f64>, DMatrix<f64>) {
    let e = SymmetricEigen::new(a.clone());
    let mut idx: Vec<usize> = (0..e.eigenvalues.len()).collect();
    idx.sort_by(|&i, &j| e.eigenvalues[j].total_cmp(&e.eigenvalues[i]));
    let vals = idx.iter().map(|&i| e.eigenvalues[i]).collect();
    let vecs = DMatrix::from_fn(a.nrows(), idx.len(), |r, c| e.eigenvectors[(r, idx[c])]);
    (vals, vecs)
}

fn numerical_rank(vals: &[f64]) -> usize {
    let top = vals.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    vals.iter().filter(|&&v| v > top * RANK_TOL).count()
}

impl PenaltySet {
    /// Validate the penalties (square, symmetric, finite, inside p columns) and fix ranks.
    pub fn new(p: usize, penalties: Vec<Penalty>) -> Result<Self> {
        for (j, pen) in penalties.iter().enumerate() {
            let (r, c) = pen.s.shape();
            let name = format!("penalty {}", j + 1);
            if r != c || r == 0 {
                return Err(NceError::invalid(
                    &name,
                    format!("must be a non-empty square matrix, not {r} x {c}"),
                ));
            }
            if pen.start + r > p {
                return Err(NceError::invalid(
                    &name,
                    format!("block [{}, {}) exceeds the {p} coefficients", pen.start, pen.start + r),
                ));
            }
            if pen.s.iter().any(|v| !v.is_finite()) {
                return Err(NceError::invalid(&name, "has non-finite entries"));
            }
            let scale = pen.s.amax();
            if (&pen.s - pen.s.transpose()).amax() > 1e-8 * scale.max(f64::MIN_POSITIVE) {
                return Err(NceError::invalid(&name, "is not symmetric"));
            }
            if scale == 0.0 {
                return Err(NceError::invalid(&name, "is zero"));
            }
        }
        let groups = make_groups(&penalties)?;
        Ok(PenaltySet { p, penalties, groups })
    }

    pub fn len(&self) -> usize {
        self.penalties.len()
    }

    pub fn is_empty(&self) -> bool {
        self.penalties.is_empty()
    }

    pub fn ncoef(&self) -> usize {
        self.p
    }

    pub fn penalties(&self) -> &[Penalty] {
        &self.penalties
    }

    /// Rank of S_lambda for any lambda > 0 (fixed when the set is built).
    pub fn rank(&self) -> usize {
        self.groups.iter().map(|g| g.rank).sum()
    }

    /// Dimension of the penalty null space (mgcv's Mp).
    pub fn null_space_dim(&self) -> usize {
        self.p - self.rank()
    }

    /// S_lambda as a p x p matrix.
    pub fn total(&self, lambda: &[f64]) -> DMatrix<f64> {
        let mut s = DMatrix::zeros(self.p, self.p);
        for (pen, &l) in self.penalties.iter().zip(lambda) {
            let k = pen.s.nrows();
            let mut v = s.view_mut((pen.start, pen.start), (k, k));
            v += &pen.s * l;
        }
        s
    }

    /// S_j beta as a full-length vector (zero outside the block).
    pub fn apply(&self, j: usize, beta: &[f64]) -> DVector<f64> {
        let pen = &self.penalties[j];
        let k = pen.s.nrows();
        let b = DVector::from_column_slice(&beta[pen.start..pen.start + k]);
        let sb = &pen.s * b;
        let mut out = DVector::zeros(self.p);
        out.rows_mut(pen.start, k).copy_from(&sb);
        out
    }

    /// tr(M S_j) for a p x p matrix M: only M's block of S_j is read (k_j^2, not p^2).
    pub fn trace_with(&self, j: usize, m: &DMatrix<f64>) -> f64 {
        let pen = &self.penalties[j];
        let k = pen.s.nrows();
        m.view((pen.start, pen.start), (k, k))
            .component_mul(&pen.s.transpose())
            .sum()
    }

    /// m += scale S_j, on S_j's block only.
    pub fn add_to(&self, j: usize, m: &mut DMatrix<f64>, scale: f64) {
        let pen = &self.penalties[j];
        let k = pen.s.nrows();
        let mut v = m.view_mut((pen.start, pen.start), (k, k));
        v += &pen.s * scale;
    }

    /// The non-zero columns of M S_j (p x k_j, for S_j's block) and where they start: M S_j
    /// without the p x p product.
    pub fn right_mul(&self, j: usize, m: &DMatrix<f64>) -> (usize, DMatrix<f64>) {
        let pen = &self.penalties[j];
        let k = pen.s.nrows();
        (pen.start, m.columns(pen.start, k) * &pen.s)
    }

    /// log|S_lambda|_+ with gradient and Hessian in rho = log lambda.
    pub fn log_det(&self, rho: &[f64]) -> Result<LogDet> {
        let m = self.len();
        if rho.len() != m || rho.iter().any(|r| !r.is_finite()) {
            return Err(NceError::invalid("rho", format!("must be {m} finite values")));
        }
        let mut out = LogDet {
            value: 0.0,
            grad: vec![0.0; m],
            hess: DMatrix::zeros(m, m),
        };
        for g in &self.groups {
            if g.members.len() == 1 {
                let j = g.members[0];
                out.value += g.rank as f64 * rho[j] + g.log_const;
                out.grad[j] += g.rank as f64;
            } else {
                group_log_det(g, rho, &mut out)?;
            }
        }
        Ok(out)
    }
}

/// Group penalties with overlapping blocks, and fix each group's rank and range space.
fn make_groups(pens: &[Penalty]) -> Result<Vec<Group>> {
    let mut order: Vec<usize> = (0..pens.len()).collect();
    order.sort_by_key(|&j| pens[j].start);
    let mut groups: Vec<Group> = Vec::new();
    for j in order {
        let (a, b) = (pens[j].start, pens[j].start + pens[j].s.nrows());
        match groups.last_mut() {
            Some(g) if a < g.start + g.size => {
                g.size = g.size.max(b - g.start);
                g.members.push(j);
            }
            _ => groups.push(Group {
                start: a,
                size: b - a,
                members: vec![j],
                rank: 0,
                log_const: 0.0,
                projected: vec![],
            }),
        }
    }
    for (j, pen) in pens.iter().enumerate() {
        let (vals, _) = sorted_eigen(&pen.s);
        if vals[vals.len() - 1] < -1e-8 * vals[0].abs() {
            return Err(NceError::invalid(
                &format!("penalty {}", j + 1),
                "is not positive semi-definite",
            ));
        }
    }
    for g in &mut groups {
        g.members.sort_unstable();
        let embed = |j: usize| -> DMatrix<f64> {
            let pen = &pens[j];
            let k = pen.s.nrows();
            let mut s = DMatrix::zeros(g.size, g.size);
            s.view_mut((pen.start - g.start, pen.start - g.start), (k, k))
                .copy_from(&pen.s);
            s
        };
        if g.members.len() == 1 {
            let (vals, _) = sorted_eigen(&embed(g.members[0]));
            g.rank = numerical_rank(&vals);
            g.log_const = vals[..g.rank].iter().map(|v| v.ln()).sum();
        } else {
            let mut sum = DMatrix::zeros(g.size, g.size);
            for &j in &g.members {
                let s = embed(j);
                sum += &s / s.norm();
            }
            let (vals, vecs) = sorted_eigen(&sum);
            g.rank = numerical_rank(&vals);
            let u = vecs.columns(0, g.rank).into_owned();
            g.projected = g
                .members
                .iter()
                .map(|&j| {
                    let s = u.transpose() * embed(j) * &u;
                    (&s + s.transpose()) * 0.5
                })
                .collect();
        }
        if g.rank == 0 {
            return Err(NceError::invalid("penalties", "a penalty has rank zero"));
        }
    }
    Ok(groups)
}

/// Orthogonal Q putting the range of the dominant penalties first (Wood 2011, appendix B),
/// and for each penalty the index from which its transformed matrix is exactly zero (it is in
/// exact arithmetic; zeroing it stops rounding in a huge lambda_j S_j from swamping the rest).
fn similarity_transform(s: &[DMatrix<f64>], lambda: &[f64]) -> (DMatrix<f64>, Vec<usize>) {
    let r = s[0].nrows();
    let mut q = DMatrix::<f64>::identity(r, r);
    let mut zero_from = vec![r; s.len()];
    let mut k0 = 0;
    let mut remaining: Vec<usize> = (0..s.len()).collect();
    while k0 < r && !remaining.is_empty() {
        let m = r - k0;
        let qn = q.columns(k0, m).into_owned();
        let t: Vec<DMatrix<f64>> = remaining.iter().map(|&j| qn.transpose() * &s[j] * &qn).collect();
        let norms: Vec<f64> = t.iter().map(|x| x.norm()).collect();
        let big = remaining
            .iter()
            .zip(&norms)
            .map(|(&j, &w)| lambda[j] * w)
            .fold(0.0, f64::max);
        if big == 0.0 {
            break;
        }
        let dominant: Vec<bool> = remaining
            .iter()
            .zip(&norms)
            .map(|(&j, &w)| lambda[j] * w > big * DOMINANCE_TOL)
            .collect();
        let mut sum = DMatrix::zeros(m, m);
        for (k, tk) in t.iter().enumerate() {
            if dominant[k] {
                sum += tk / norms[k];
            }
        }
        let (vals, vecs) = sorted_eigen(&sum);
        let rk = numerical_rank(&vals);
        if rk >= m {
            break;
        }
        let rotated = qn * vecs;
        q.columns_mut(k0, m).copy_from(&rotated);
        for (k, &j) in remaining.iter().enumerate() {
            if dominant[k] {
                zero_from[j] = k0 + rk;
            }
        }
        k0 += rk;
        remaining = remaining
            .iter()
            .zip(&dominant)
            .filter(|(_, &d)| !d)
            .map(|(&j, _)| j)
            .collect();
    }
    (q, zero_from)
}

fn group_log_det(g: &Group, rho: &[f64], out: &mut LogDet) -> Result<()> {
    let lam: Vec<f64> = g.members.iter().map(|&j| rho[j].exp()).collect();
    let (q, zero_from) = similarity_transform(&g.projected, &lam);
    let sj: Vec<DMatrix<f64>> = g
        .projected
        .iter()
        .zip(&zero_from)
        .map(|(s, &z)| {
            let t = q.transpose() * s * &q;
            DMatrix::from_fn(g.rank, g.rank, |i, k| if i < z && k < z { t[(i, k)] } else { 0.0 })
        })
        .collect();
    let mut m = DMatrix::zeros(g.rank, g.rank);
    for (s, l) in sj.iter().zip(&lam) {
        m += s * *l;
    }
    // Diagonal scaling removes the block scale differences the transform exposed.
    let d: Vec<f64> = (0..g.rank).map(|i| m[(i, i)].max(f64::MIN_POSITIVE).sqrt()).collect();
    let c = DMatrix::from_fn(g.rank, g.rank, |i, k| m[(i, k)] / (d[i] * d[k]));
    let chol = c
        .cholesky()
        .ok_or_else(|| NceError::Numerical("a tensor penalty lost rank (log|S| undefined)".into()))?;
    let l = chol.l();
    out.value += (0..g.rank).map(|i| 2.0 * (l[(i, i)].ln() + d[i].ln())).sum::<f64>();
    let cinv = chol.inverse();
    let minv = DMatrix::from_fn(g.rank, g.rank, |i, k| cinv[(i, k)] / (d[i] * d[k]));
    let ms: Vec<DMatrix<f64>> = sj.iter().zip(&lam).map(|(s, l)| &minv * s * *l).collect();
    for (a, &ja) in g.members.iter().enumerate() {
        out.grad[ja] += ms[a].trace();
        out.hess[(ja, ja)] += ms[a].trace();
        for (b, &jb) in g.members.iter().enumerate() {
            out.hess[(ja, jb)] -= ms[a].component_mul(&ms[b].transpose()).sum();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Second-difference penalty on k coefficients (rank k - 2).
    fn diff2(k: usize) -> DMatrix<f64> {
        let d = DMatrix::from_fn(k - 2, k, |i, j| match j as i64 - i as i64 {
            0 | 2 => 1.0,
            1 => -2.0,
            _ => 0.0,
        });
        d.transpose() * d
    }

    /// The block products equal the products with S_j embedded in a p x p matrix.
    #[test]
    fn block_products_match_embedded_penalties() {
        let p = 12;
        let pens = PenaltySet::new(
            p,
            vec![
                Penalty { start: 1, s: diff2(5) },
                Penalty {
                    start: 7,
                    s: diff2(4) * 3.0,
                },
            ],
        )
        .unwrap();
        let m = DMatrix::from_fn(p, p, |i, j| ((i * 7 + j * 3) % 11) as f64 - 4.5 + 0.1 * i as f64);
        for j in 0..2 {
            let full = pens.total(&[(j == 0) as u8 as f64, (j == 1) as u8 as f64]);
            let tr = (&m * &full).trace();
            assert!((pens.trace_with(j, &m) - tr).abs() < 1e-12 * (1.0 + tr.abs()));
            let mut a = m.clone();
            pens.add_to(j, &mut a, 2.5);
            assert!((a - (&m + &full * 2.5)).amax() < 1e-12);
            let (start, c) = pens.right_mul(j, &m);
            let prod = &m * &full;
            let k = c.ncols();
            assert!((prod.columns(start, k) - &c).amax() < 1e-12);
            assert_eq!(prod.columns(0, start).amax(), 0.0);
            assert_eq!(prod.columns(start + k, p - start - k).amax(), 0.0);
        }
    }

    fn kron(a: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
        let (ra, ca, rb, cb) = (a.nrows(), a.ncols(), b.nrows(), b.ncols());
        DMatrix::from_fn(ra * rb, ca * cb, |i, j| a[(i / rb, j / cb)] * b[(i % rb, j % cb)])
    }

    fn tensor_set() -> PenaltySet {
        let (a, b) = (diff2(5), diff2(4));
        let s1 = kron(&a, &DMatrix::identity(4, 4));
        let s2 = kron(&DMatrix::identity(5, 5), &b);
        PenaltySet::new(
            22,
            vec![
                Penalty { start: 1, s: s1 },
                Penalty { start: 1, s: s2 },
                Penalty {
                    start: 21,
                    s: DMatrix::from_element(1, 1, 2.0),
                },
            ],
        )
        .unwrap()
    }

    /// Log pseudo-determinant from a plain eigen-decomposition, fine when lambdas are similar.
    fn naive(set: &PenaltySet, rho: &[f64]) -> f64 {
        let lam: Vec<f64> = rho.iter().map(|r| r.exp()).collect();
        let (vals, _) = sorted_eigen(&set.total(&lam));
        vals[..set.rank()].iter().map(|v| v.ln()).sum()
    }

    #[test]
    fn single_penalty_is_rank_times_rho() {
        let set = PenaltySet::new(8, vec![Penalty { start: 2, s: diff2(6) }]).unwrap();
        assert_eq!(set.rank(), 4);
        assert_eq!(set.null_space_dim(), 4);
        let a = set.log_det(&[0.0]).unwrap();
        let b = set.log_det(&[2.0]).unwrap();
        assert!((b.value - a.value - 8.0).abs() < 1e-12);
        assert!((a.value - naive(&set, &[0.0])).abs() < 1e-10);
        assert_eq!(b.grad, vec![4.0]);
    }

    #[test]
    fn tensor_log_det_matches_naive_and_finite_differences() {
        let set = tensor_set();
        // rank: 22 - 1 (last) ... null space of the tensor block is 2 x 2 = 4, plus column 0.
        assert_eq!(set.rank(), 20 - 4 + 1);
        let rho = [0.3, -1.2, 0.5];
        let ld = set.log_det(&rho).unwrap();
        assert!(
            (ld.value - naive(&set, &rho)).abs() < 1e-9,
            "{} vs {}",
            ld.value,
            naive(&set, &rho)
        );
        let h = 1e-5;
        for j in 0..3 {
            let mut rp = rho;
            let mut rm = rho;
            rp[j] += h;
            rm[j] -= h;
            let (p, m) = (set.log_det(&rp).unwrap(), set.log_det(&rm).unwrap());
            assert!(((p.value - m.value) / (2.0 * h) - ld.grad[j]).abs() < 1e-6);
            for k in 0..3 {
                let fd = (p.grad[k] - m.grad[k]) / (2.0 * h);
                assert!(
                    (fd - ld.hess[(j, k)]).abs() < 1e-6,
                    "hess {j} {k}: {fd} vs {}",
                    ld.hess[(j, k)]
                );
            }
        }
    }

    #[test]
    fn tensor_log_det_is_stable_for_very_different_lambdas() {
        // With lambda_1 / lambda_2 = e^60 a plain eigen-decomposition loses every digit of the
        // small part. In this limit S_2 only matters on the 16 - 12 = 4 directions of the range
        // outside range(S_1), so d log|S| / d rho_2 = 4 and log|S| moves by exactly 4 per unit.
        let set = tensor_set();
        let a = set.log_det(&[30.0, -30.0, 0.0]).unwrap();
        let b = set.log_det(&[30.0, -29.0, 0.0]).unwrap();
        assert!((a.grad[1] - 4.0).abs() < 1e-8, "{}", a.grad[1]);
        assert!((b.value - a.value - 4.0).abs() < 1e-8, "{}", b.value - a.value);
        assert!((a.grad[0] + a.grad[1] - 16.0).abs() < 1e-8);
    }

    #[test]
    fn bad_penalties_are_rejected() {
        let bad = DMatrix::from_row_slice(2, 2, &[1.0, 0.5, 0.0, 1.0]);
        assert!(PenaltySet::new(3, vec![Penalty { start: 0, s: bad }]).is_err());
        assert!(PenaltySet::new(3, vec![Penalty { start: 2, s: diff2(3) }]).is_err());
        let indefinite = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        let e = PenaltySet::new(
            3,
            vec![Penalty {
                start: 0,
                s: indefinite,
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("semi-definite"), "{e}");
    }
}
