//! L1-penalised logistic regression (the lasso) by coordinate descent on a lambda path, with
//! K-fold cross-validation of the binomial deviance, as glmnet does it (Friedman, Hastie and
//! Tibshirani 2010): objective -(1/n) loglik(b0, beta) + lambda ||beta||_1, intercept free.
//!
//! Each outer step replaces the log-likelihood by its quadratic (IRLS) approximation; the
//! inner coordinate descent works on the weighted Gram matrix X'WX / n ("covariance updates"),
//! so a sweep costs p^2 instead of n p. Features are used as given: standardise them first.
//! Path stops as glmnet's: deviance ratio above 0.999, or its gain below 1e-5 of itself.

use crate::family::sigmoid;
use crate::{NceError, Result};
use rand::seq::SliceRandom;
use rand::Rng;

/// Settings of the path and the cross-validation.
#[derive(Debug, Clone)]
pub struct LassoControl {
    pub nlambda: usize,
    /// Smallest lambda as a fraction of the largest (the one that zeroes every coefficient).
    pub lambda_min_ratio: f64,
    pub nfolds: usize,
    /// Convergence of the inner sweeps: largest weighted coefficient change (glmnet's thresh).
    pub tol: f64,
    pub max_outer: usize,
    pub max_inner: usize,
}

impl Default for LassoControl {
    fn default() -> Self {
        LassoControl {
            nlambda: 100,
            lambda_min_ratio: 1e-4,
            nfolds: 10,
            tol: 1e-7,
            max_outer: 25,
            max_inner: 10_000,
        }
    }
}

/// Coefficients along a lambda path (the path may stop before the last lambda).
#[derive(Debug, Clone)]
pub struct LassoPath {
    pub lambda: Vec<f64>,
    pub intercept: Vec<f64>,
    /// beta[k] holds the p coefficients at lambda[k].
    pub beta: Vec<Vec<f64>>,
    pub dev_ratio: Vec<f64>,
}

/// Cross-validated path: the full-data path, the CV curve and the chosen lambdas.
#[derive(Debug, Clone)]
pub struct CvLasso {
    pub path: LassoPath,
    pub cvm: Vec<f64>,
    pub cvsd: Vec<f64>,
    pub index_min: usize,
    pub index_1se: usize,
}

/// A column-major n x p matrix viewed by rows through an index list.
struct Rows<'a> {
    x: &'a [f64],
    n: usize,
}

impl Rows<'_> {
    #[inline]
    fn at(&self, i: usize, j: usize) -> f64 {
        self.x[j * self.n + i]
    }
}

/// Dot product with four accumulators, so the compiler can keep several multiply-adds in
/// flight (a single running sum is one long dependency chain).
#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut s = [0.0f64; 4];
    for (x, y) in ca.zip(cb) {
        s[0] += x[0] * y[0];
        s[1] += x[1] * y[1];
        s[2] += x[2] * y[2];
        s[3] += x[3] * y[3];
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ra.iter().zip(rb) {
        t += x * y;
    }
    t
}

/// Binomial deviance of 0/1 responses at linear predictors, probabilities clamped as glmnet's
/// CV does (1e-5), so a confident wrong prediction costs a bounded amount.
fn deviance(y: &[f64], eta: &[f64], clamp: bool) -> f64 {
    let mut d = 0.0;
    for (&yi, &e) in y.iter().zip(eta) {
        let mut p = sigmoid(e);
        if clamp {
            p = p.clamp(1e-5, 1.0 - 1e-5);
        }
        let l = if yi > 0.5 { p.ln() } else { (1.0 - p).ln() };
        d -= 2.0 * if l.is_finite() { l } else { -700.0 };
    }
    d
}

/// The lambda sequence of glmnet for standardised features: from the smallest lambda that
/// zeroes every slope down to `lambda_min_ratio` of it, evenly on the log scale.
pub fn lambda_sequence(x: &[f64], n: usize, p: usize, y: &[f64], ctrl: &LassoControl) -> Result<Vec<f64>> {
    check_inputs(x, n, p, y)?;
    let ybar = y.iter().sum::<f64>() / n as f64;
    let mut lmax = 0.0f64;
    for j in 0..p {
        let c = &x[j * n..(j + 1) * n];
        let g: f64 = c.iter().zip(y).map(|(a, b)| a * (b - ybar)).sum::<f64>() / n as f64;
        lmax = lmax.max(g.abs());
    }
    if lmax <= 0.0 {
        lmax = 1e-8;
    }
    let k = ctrl.nlambda.max(1);
    if k == 1 {
        return Ok(vec![lmax]);
    }
    let step = ctrl.lambda_min_ratio.ln() / (k - 1) as f64;
    Ok((0..k).map(|i| lmax * (step * i as f64).exp()).collect())
}

fn check_inputs(x: &[f64], n: usize, p: usize, y: &[f64]) -> Result<()> {
    if x.len() != n * p {
        return Err(NceError::invalid(
            "x",
            format!("has {} values, expected {n} x {p}", x.len()),
        ));
    }
    if y.len() != n {
        return Err(NceError::invalid("y", format!("has {} values, expected {n}", y.len())));
    }
    if n < 2 {
        return Err(NceError::invalid("x", "needs at least two rows"));
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(NceError::invalid("x", "has non-finite values"));
    }
    if y.iter().any(|&v| v != 0.0 && v != 1.0) {
        return Err(NceError::invalid("y", "must hold 0 and 1 only"));
    }
    let s: f64 = y.iter().sum();
    if s == 0.0 || s == n as f64 {
        return Err(NceError::invalid("y", "needs both classes"));
    }
    Ok(())
}

/// Lasso path of the logistic regression of `y` on the rows `rows` of x (column-major n x p),
/// at the given lambdas, warm-started along the path. Each outer (IRLS) step builds the
/// weighted Gram matrix on the active set only and checks the KKT conditions of the inactive
/// features through the full gradient X'(y - mu) / n, which costs n p.
pub fn logistic_lasso_path(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    rows: &[usize],
    lambdas: &[f64],
    ctrl: &LassoControl,
) -> Result<LassoPath> {
    let m = rows.len();
    if m < 2 {
        return Err(NceError::invalid("x", "needs at least two rows in every fit"));
    }
    let xr = Rows { x, n };
    let yr: Vec<f64> = rows.iter().map(|&i| y[i]).collect();
    let mf = m as f64;
    let ybar = (yr.iter().sum::<f64>() / mf).clamp(1e-10, 1.0 - 1e-10);
    let mut b0 = (ybar / (1.0 - ybar)).ln();
    let mut beta = vec![0.0; p];
    let null_dev = deviance(&yr, &vec![b0; m], false).max(1e-300);
    // Columns gathered once (contiguous per feature) for the gradient and Gram products.
    let mut xc = vec![0.0; m * p];
    for j in 0..p {
        for (r, &i) in rows.iter().enumerate() {
            xc[j * m + r] = xr.at(i, j);
        }
    }
    let col = |j: usize| &xc[j * m..(j + 1) * m];
    let mut eta = vec![b0; m];
    let mut out = LassoPath {
        lambda: Vec::new(),
        intercept: Vec::new(),
        beta: Vec::new(),
        dev_ratio: Vec::new(),
    };
    let mut active: Vec<usize> = Vec::new();
    let mut is_active = vec![false; p];
    let mut w = vec![0.0; m];
    let mut resid = vec![0.0; m];
    let mut gram: Vec<f64> = Vec::new();
    let mut xw: Vec<f64> = Vec::new();
    let mut sw = 0.25;
    let mut grad = vec![0.0; p];
    let mut wa = vec![0.0; m];
    let mut prev_ratio = 0.0;
    for (k, &lam) in lambdas.iter().enumerate() {
        for outer in 0..ctrl.max_outer {
            let mut sr = 0.0;
            for r in 0..m {
                let mu = sigmoid(eta[r]);
                w[r] = (mu * (1.0 - mu)).max(1e-5);
                resid[r] = yr[r] - mu;
                sr += resid[r];
            }
            // Full gradient: KKT check of the inactive features, and the active residuals.
            for (j, g) in grad.iter_mut().enumerate() {
                *g = dot(col(j), &resid) / mf;
            }
            let mut added = false;
            for j in 0..p {
                if !is_active[j] && grad[j].abs() > lam {
                    is_active[j] = true;
                    active.push(j);
                    added = true;
                }
            }
            let q = active.len();
            // The weighted Gram matrix (the Hessian of the quadratic step) on the active set is
            // the costly part (n q^2 / 2). Consecutive lambdas have nearly the same weights, so
            // the previous Hessian serves until the active set grows or a lambda needs a third
            // step (then every second step): the fixed point of the step depends on the exact
            // gradient only, so the solution is unchanged; a stale Hessian only slows it.
            if added || gram.len() != q * q || (outer >= 2 && outer % 2 == 0) {
                gram.clear();
                gram.resize(q * q, 0.0);
                xw.clear();
                xw.resize(q, 0.0);
                sw = w.iter().sum::<f64>() / mf;
                for (a, &ja) in active.iter().enumerate() {
                    let ca = col(ja);
                    for ((u, &c), &v) in wa.iter_mut().zip(ca).zip(&w) {
                        *u = c * v;
                    }
                    xw[a] = wa.iter().sum::<f64>() / mf;
                    for (b, &jb) in active.iter().enumerate().take(a + 1) {
                        let g = dot(&wa, col(jb)) / mf;
                        gram[a * q + b] = g;
                        gram[b * q + a] = g;
                    }
                }
            }
            let mut res: Vec<f64> = active.iter().map(|&j| grad[j]).collect();
            let mut res0 = sr / mf;
            let mut dlx = 0.0f64;
            let mut d0_tot = 0.0;
            let mut dbeta = vec![0.0; q];
            for _inner in 0..ctrl.max_inner {
                let mut dmax = 0.0f64;
                let d0 = res0 / sw;
                if d0 != 0.0 {
                    b0 += d0;
                    d0_tot += d0;
                    for a in 0..q {
                        res[a] -= xw[a] * d0;
                    }
                    res0 -= sw * d0;
                    dmax = dmax.max(sw * d0 * d0);
                }
                for a in 0..q {
                    let j = active[a];
                    let gjj = gram[a * q + a];
                    if gjj <= 0.0 {
                        continue;
                    }
                    let new = soft(res[a] + gjj * beta[j], lam) / gjj;
                    let d = new - beta[j];
                    if d != 0.0 {
                        beta[j] = new;
                        dbeta[a] += d;
                        let gc = &gram[a * q..(a + 1) * q];
                        for c in 0..q {
                            res[c] -= gc[c] * d;
                        }
                        res0 -= xw[a] * d;
                        dmax = dmax.max(gjj * d * d);
                    }
                }
                if dmax < ctrl.tol {
                    break;
                }
            }
            dlx = dlx.max(sw * d0_tot * d0_tot);
            for a in 0..q {
                dlx = dlx.max(gram[a * q + a] * dbeta[a] * dbeta[a]);
            }
            // eta = b0 + X_A beta_A.
            eta.iter_mut().for_each(|e| *e = b0);
            for &j in &active {
                let bj = beta[j];
                if bj != 0.0 {
                    for (e, v) in eta.iter_mut().zip(col(j)) {
                        *e += bj * v;
                    }
                }
            }
            if dlx < ctrl.tol && !added {
                break;
            }
        }
        let ratio = 1.0 - deviance(&yr, &eta, false) / null_dev;
        out.lambda.push(lam);
        out.intercept.push(b0);
        out.beta.push(beta.clone());
        out.dev_ratio.push(ratio);
        if ratio > 0.999 || (k > 0 && ratio - prev_ratio < 1e-5 * ratio) {
            break;
        }
        prev_ratio = ratio;
    }
    Ok(out)
}

fn soft(u: f64, lam: f64) -> f64 {
    if u > lam {
        u - lam
    } else if u < -lam {
        u + lam
    } else {
        0.0
    }
}

/// Fold of each row, as glmnet's `sample(rep(seq(nfolds), length = n))`: balanced sizes in a
/// random order.
pub fn fold_ids<R: Rng>(n: usize, nfolds: usize, rng: &mut R) -> Vec<usize> {
    let mut f: Vec<usize> = (0..n).map(|i| i % nfolds).collect();
    f.shuffle(rng);
    f
}

/// Lasso path on all rows with K-fold cross-validation of the (clamped) binomial deviance.
/// `folds` gives each row's fold (0..nfolds).
pub fn cv_logistic_lasso(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    folds: &[usize],
    ctrl: &LassoControl,
) -> Result<CvLasso> {
    check_inputs(x, n, p, y)?;
    if folds.len() != n {
        return Err(NceError::invalid("folds", "must give one fold per row"));
    }
    let nfolds = folds.iter().copied().max().map_or(0, |m| m + 1);
    if nfolds < 2 {
        return Err(NceError::invalid("nfolds", "must be at least 2"));
    }
    let lambdas = lambda_sequence(x, n, p, y, ctrl)?;
    let all: Vec<usize> = (0..n).collect();
    let path = logistic_lasso_path(x, n, p, y, &all, &lambdas, ctrl)?;
    let nl = path.lambda.len();
    let xr = Rows { x, n };
    // Per fold: mean held-out deviance at each lambda of the full path; a fold path that
    // stopped early keeps its last fit for the remaining lambdas (glmnet's predict does too).
    let mut fold_dev = vec![vec![0.0; nl]; nfolds];
    let mut fold_n = vec![0usize; nfolds];
    for f in 0..nfolds {
        let train: Vec<usize> = (0..n).filter(|&i| folds[i] != f).collect();
        let test: Vec<usize> = (0..n).filter(|&i| folds[i] == f).collect();
        fold_n[f] = test.len();
        if test.is_empty() {
            continue;
        }
        let yt: Vec<f64> = test.iter().map(|&i| y[i]).collect();
        let ytrain_sum: f64 = train.iter().map(|&i| y[i]).sum();
        let fp = if ytrain_sum == 0.0 || ytrain_sum == train.len() as f64 {
            None
        } else {
            Some(logistic_lasso_path(x, n, p, y, &train, &path.lambda, ctrl)?)
        };
        let mut eta = vec![0.0; test.len()];
        for (k, dev_k) in fold_dev[f].iter_mut().enumerate() {
            match &fp {
                Some(fp) => {
                    let kk = k.min(fp.lambda.len() - 1);
                    eta.iter_mut().for_each(|e| *e = fp.intercept[kk]);
                    for (j, &bj) in fp.beta[kk].iter().enumerate() {
                        if bj != 0.0 {
                            for (e, &i) in eta.iter_mut().zip(&test) {
                                *e += bj * xr.at(i, j);
                            }
                        }
                    }
                }
                None => {
                    let b = if ytrain_sum == 0.0 { -30.0 } else { 30.0 };
                    eta.iter_mut().for_each(|e| *e = b);
                }
            }
            *dev_k = deviance(&yt, &eta, true) / test.len() as f64;
        }
    }
    let wsum: f64 = fold_n.iter().map(|&c| c as f64).sum();
    let kf = fold_n.iter().filter(|&&c| c > 0).count().max(2) as f64;
    let mut cvm = vec![0.0; nl];
    let mut cvsd = vec![0.0; nl];
    for k in 0..nl {
        let m: f64 = (0..nfolds).map(|f| fold_n[f] as f64 * fold_dev[f][k]).sum::<f64>() / wsum;
        let v: f64 = (0..nfolds)
            .map(|f| fold_n[f] as f64 * (fold_dev[f][k] - m).powi(2))
            .sum::<f64>()
            / wsum;
        cvm[k] = m;
        cvsd[k] = (v / (kf - 1.0)).sqrt();
    }
    let index_min = (0..nl).fold(0, |b, k| if cvm[k] < cvm[b] { k } else { b });
    let bound = cvm[index_min] + cvsd[index_min];
    let index_1se = (0..nl).find(|&k| cvm[k] <= bound).unwrap_or(index_min);
    Ok(CvLasso {
        path,
        cvm,
        cvsd,
        index_min,
        index_1se,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream_rng;
    use rand_distr::{Distribution, StandardNormal};

    fn problem(n: usize, p: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = stream_rng(seed, 0);
        let x: Vec<f64> = (0..n * p).map(|_| StandardNormal.sample(&mut rng)).collect();
        let y: Vec<f64> = (0..n)
            .map(|i| {
                let eta = 0.3 + 1.5 * x[i] - 1.0 * x[n + i];
                if rng.gen::<f64>() < sigmoid(eta) {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        (x, y)
    }

    /// KKT conditions of the lasso at every lambda of the path.
    #[test]
    fn path_satisfies_kkt() {
        let (n, p) = (400, 6);
        let (x, y) = problem(n, p, 3);
        let ctrl = LassoControl {
            nlambda: 20,
            tol: 1e-12,
            ..LassoControl::default()
        };
        let lam = lambda_sequence(&x, n, p, &y, &ctrl).unwrap();
        let rows: Vec<usize> = (0..n).collect();
        let path = logistic_lasso_path(&x, n, p, &y, &rows, &lam, &ctrl).unwrap();
        assert!(path.beta[0].iter().all(|&b| b.abs() < 1e-10));
        for k in 0..path.lambda.len() {
            let eta: Vec<f64> = (0..n)
                .map(|i| path.intercept[k] + (0..p).map(|j| x[j * n + i] * path.beta[k][j]).sum::<f64>())
                .collect();
            let r: Vec<f64> = (0..n).map(|i| y[i] - sigmoid(eta[i])).collect();
            assert!(r.iter().sum::<f64>().abs() / (n as f64) < 1e-5);
            for j in 0..p {
                let g = (0..n).map(|i| x[j * n + i] * r[i]).sum::<f64>() / n as f64;
                let b = path.beta[k][j];
                if b == 0.0 {
                    assert!(g.abs() <= path.lambda[k] * (1.0 + 1e-3) + 1e-6, "k {k} j {j} g {g}");
                } else {
                    assert!((g - path.lambda[k] * b.signum()).abs() < 1e-4, "k {k} j {j} g {g}");
                }
            }
        }
    }

    /// CV keeps the two real effects (shrunk towards 0) and drops the noise features.
    #[test]
    fn cv_picks_signal_and_drops_noise() {
        let (n, p) = (600, 6);
        let (x, y) = problem(n, p, 11);
        let ctrl = LassoControl {
            nlambda: 40,
            lambda_min_ratio: 1e-3,
            ..LassoControl::default()
        };
        let folds = fold_ids(n, 5, &mut stream_rng(5, 1));
        let cv = cv_logistic_lasso(&x, n, p, &y, &folds, &ctrl).unwrap();
        let b = &cv.path.beta[cv.index_1se];
        assert!(b[0] > 0.5 && b[1] < -0.2, "{b:?}");
        assert!(b[2..].iter().all(|v| v.abs() < 0.1), "{b:?}");
        assert!(cv.index_1se <= cv.index_min);
    }
}
