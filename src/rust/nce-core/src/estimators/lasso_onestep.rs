//! Approximate K-fold cross-validation of the lasso path by one Newton step per fold
//! (Beirami, Razaviyayn, Shahrampour and Tarokh 2017; Rad and Maleki 2020 for leave-one-out).
//!
//! Exact K-fold CV fits K more paths. Here only the full-data path is fitted; at each lambda,
//! each fold's fit is one proximal Newton step from the full-data fit on that fold's training
//! rows: the penalised quadratic model of the training log-likelihood at the full-data fit,
//! solved exactly by coordinate descent (so features may enter or leave). Its Gram matrix and
//! gradient are the full ones minus the held-out rows' parts, so each lambda costs one pass
//! over the rows for all folds together. Removing a tenth of the rows moves the fit by
//! O(1/K); one Newton step leaves an error of the square of that.

use super::lasso_path::{
    active_set_step, argmin, check_cv_inputs, coarse_path, cv_curve_of, cv_result, deviance, dot, fine_indices,
    merge_order, path_from, soft, CvLasso, LassoControl, LassoData, LassoPath,
};
use crate::engine::family::sigmoid;
use crate::Result;

/// One fold: its held-out rows' columns (intercept first), gathered once.
struct Fold {
    /// (p + 1) columns of length `len`: 1, then the features.
    cols: Vec<f64>,
    rows: Vec<usize>,
    y: Vec<f64>,
    len: usize,
}

/// The held-out parts of the weighted Gram matrix (p + 1)^2 and of the score (p + 1) at the
/// full-data fit, for every fold.
struct Parts {
    gram: Vec<Vec<f64>>,
    score: Vec<Vec<f64>>,
}

fn parts_at(folds: &[Fold], p1: usize, mu: &[f64], yall: &[f64]) -> Parts {
    let mut gram = Vec::with_capacity(folds.len());
    let mut score = Vec::with_capacity(folds.len());
    let mut wa = Vec::new();
    let mut w = Vec::new();
    let mut r = Vec::new();
    for f in folds {
        w.clear();
        r.clear();
        for &i in &f.rows {
            w.push((mu[i] * (1.0 - mu[i])).max(1e-5));
            r.push(yall[i] - mu[i]);
        }
        let col = |j: usize| &f.cols[j * f.len..(j + 1) * f.len];
        let mut g = vec![0.0; p1 * p1];
        let mut s = vec![0.0; p1];
        for a in 0..p1 {
            s[a] = dot(col(a), &r);
            wa.clear();
            wa.extend(col(a).iter().zip(&w).map(|(c, v)| c * v));
            for b in 0..=a {
                let v = dot(&wa, col(b));
                g[a * p1 + b] = v;
                g[b * p1 + a] = v;
            }
        }
        gram.push(g);
        score.push(s);
    }
    Parts { gram, score }
}

/// Minimise (1/m) [-s'd + d'G d / 2] + lam ||c_slopes + d_slopes||_1 over d by coordinate
/// descent (intercept, index 0, unpenalised); returns c + d.
fn newton_step(c: &[f64], gram: &[f64], score: &[f64], m: f64, lam: f64, ctrl: &LassoControl) -> Vec<f64> {
    active_set_step(c, gram, score, m, lam).unwrap_or_else(|| cd_step(c, gram, score, m, lam, ctrl))
}

/// The same minimisation by coordinate descent from d = 0 (covariance updates).
fn cd_step(c: &[f64], gram: &[f64], score: &[f64], m: f64, lam: f64, ctrl: &LassoControl) -> Vec<f64> {
    let p1 = c.len();
    let mut coef = c.to_vec();
    // Scaled once: divisions in the sweep sat on its critical path.
    let gs: Vec<f64> = gram.iter().map(|g| g / m).collect();
    let inv: Vec<f64> = (0..p1).map(|a| 1.0 / gs[a * p1 + a]).collect();
    // res = gradient of the smooth part at c + d: (s - G d) / m.
    let mut res: Vec<f64> = score.iter().map(|v| v / m).collect();
    for _ in 0..ctrl.max_inner {
        let mut dmax = 0.0f64;
        for a in 0..p1 {
            let gaa = gs[a * p1 + a];
            if gaa <= 0.0 {
                continue;
            }
            let u = res[a] + gaa * coef[a];
            let new = if a == 0 { u * inv[a] } else { soft(u, lam) * inv[a] };
            let d = new - coef[a];
            if d != 0.0 {
                coef[a] = new;
                let ga = &gs[a * p1..(a + 1) * p1];
                for (rb, gb) in res.iter_mut().zip(ga) {
                    *rb -= gb * d;
                }
                dmax = dmax.max(gaa * d * d);
            }
        }
        if dmax < ctrl.tol {
            break;
        }
    }
    coef
}

/// Lasso path on all rows with one-step approximate K-fold CV of the (clamped) binomial
/// deviance; the same result type, lambdas (coarse and fine, see `cv_logistic_lasso`) and
/// path as the exact CV, which it replaces when `ctrl.onestep` is set.
pub(crate) fn cv_logistic_lasso_onestep(data: &LassoData, folds: &[usize], ctrl: &LassoControl) -> Result<CvLasso> {
    let LassoData { x, n, p, y } = *data;
    let nfolds = check_cv_inputs(x, n, p, y, folds)?;
    let p1 = p + 1;
    let fd: Vec<Fold> = (0..nfolds)
        .map(|f| {
            let rows: Vec<usize> = (0..n).filter(|&i| folds[i] == f).collect();
            let len = rows.len();
            let mut cols = vec![1.0; len];
            for j in 0..p {
                cols.extend(rows.iter().map(|&i| x[j * n + i]));
            }
            let y = rows.iter().map(|&i| y[i]).collect();
            Fold { cols, rows, y, len }
        })
        .collect();
    let total_y: f64 = y.iter().sum();
    // Held-out mean deviance of every fold at every fit of a path.
    let fold_dev = |path: &LassoPath| -> Vec<Vec<f64>> {
        let mut dev = vec![Vec::with_capacity(path.lambda.len()); nfolds];
        let mut eta = vec![0.0; n];
        let mut mu = vec![0.0; n];
        for k in 0..path.lambda.len() {
            let (b0, beta) = (path.intercept[k], &path.beta[k]);
            eta.iter_mut().for_each(|e| *e = b0);
            for (j, &bj) in beta.iter().enumerate() {
                if bj != 0.0 {
                    for (e, v) in eta.iter_mut().zip(&x[j * n..(j + 1) * n]) {
                        *e += bj * v;
                    }
                }
            }
            for (m, &e) in mu.iter_mut().zip(&eta) {
                *m = sigmoid(e);
            }
            let parts = parts_at(&fd, p1, &mu, y);
            let gsum: Vec<f64> = (0..p1 * p1).map(|i| parts.gram.iter().map(|g| g[i]).sum()).collect();
            let ssum: Vec<f64> = (0..p1).map(|i| parts.score.iter().map(|s| s[i]).sum()).collect();
            let mut c = Vec::with_capacity(p1);
            c.push(b0);
            c.extend_from_slice(beta);
            for (f, fold) in fd.iter().enumerate() {
                if fold.len == 0 {
                    dev[f].push(0.0);
                    continue;
                }
                let m = (n - fold.len) as f64;
                let ytr: f64 = total_y - fold.y.iter().sum::<f64>();
                let coef = if ytr == 0.0 || ytr == m {
                    // The training rows hold one class: the fit predicts it with certainty.
                    let mut one = vec![0.0; p1];
                    one[0] = if ytr == 0.0 { -30.0 } else { 30.0 };
                    one
                } else {
                    let g: Vec<f64> = gsum.iter().zip(&parts.gram[f]).map(|(a, b)| a - b).collect();
                    let s: Vec<f64> = ssum.iter().zip(&parts.score[f]).map(|(a, b)| a - b).collect();
                    newton_step(&c, &g, &s, m, path.lambda[k], ctrl)
                };
                let mut et = vec![coef[0]; fold.len];
                for j in 1..p1 {
                    if coef[j] != 0.0 {
                        for (e, v) in et.iter_mut().zip(&fold.cols[j * fold.len..(j + 1) * fold.len]) {
                            *e += coef[j] * v;
                        }
                    }
                }
                dev[f].push(deviance(&fold.y, &et, true) / fold.len as f64);
            }
        }
        dev
    };
    let fold_n: Vec<f64> = fd.iter().map(|f| f.len as f64).collect();
    let curve = |dev: &[Vec<f64>], nl: usize| cv_curve_of(&fold_n, dev, nl);
    let step = ctrl.coarse.max(1);
    let (all_lambdas, coarse_idx, path) = coarse_path(x, n, p, y, ctrl)?;
    let nc = path.lambda.len();
    let all: Vec<usize> = (0..n).collect();
    let dev_c = fold_dev(&path);
    let (cvm_c, _) = curve(&dev_c, nc);
    let kc = argmin(&cvm_c);
    let fine = fine_indices(&coarse_idx, kc);
    let (path, dev) = if step == 1 || fine.is_empty() {
        (path, dev_c)
    } else {
        let fine_l: Vec<f64> = fine.iter().map(|&i| all_lambdas[i]).collect();
        let from = kc.saturating_sub(1);
        let seg = path_from(
            &LassoData { x, n, p, y },
            &all,
            &fine_l,
            ctrl,
            Some((path.intercept[from], &path.beta[from])),
        )?;
        let dev_f = fold_dev(&seg);
        // Merge coarse and fine fits in lambda order (decreasing).
        let order = merge_order(&coarse_idx, &fine);
        let mut merged = LassoPath {
            outer_steps: path.outer_steps + seg.outer_steps,
            ..LassoPath::default()
        };
        let mut dev = vec![Vec::with_capacity(order.len()); nfolds];
        for &(_, is_fine, k) in &order {
            let (src, d) = if is_fine { (&seg, &dev_f) } else { (&path, &dev_c) };
            merged.lambda.push(src.lambda[k]);
            merged.intercept.push(src.intercept[k]);
            merged.beta.push(src.beta[k].clone());
            merged.dev_ratio.push(src.dev_ratio[k]);
            for f in 0..nfolds {
                dev[f].push(d[f][k]);
            }
        }
        (merged, dev)
    };
    let nl = path.lambda.len();
    let (cvm, cvsd) = curve(&dev, nl);
    Ok(cv_result(path, cvm, cvsd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream_rng;
    use rand_distr::{Distribution, StandardNormal};

    /// A weighted Gram matrix and score of a random logistic problem with an intercept column.
    fn quadratic(n: usize, p1: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = stream_rng(seed, 0);
        let mut x = vec![0.0; n * p1];
        for i in 0..n {
            x[i * p1] = 1.0;
            for j in 1..p1 {
                let v: f64 = StandardNormal.sample(&mut rng);
                // Correlated features, as products of autocorrelations are.
                x[i * p1 + j] = v + if j > 1 { 0.6 * x[i * p1 + j - 1] } else { 0.0 };
            }
        }
        let mut g = vec![0.0; p1 * p1];
        let mut s = vec![0.0; p1];
        for i in 0..n {
            let r = &x[i * p1..(i + 1) * p1];
            let eta = 0.3 * r[1] - 0.5 * r[2] + 0.2 * r[3];
            let mu = sigmoid(eta);
            let y = if (i * 7919 % 13) as f64 / 13.0 < mu { 1.0 } else { 0.0 };
            for a in 0..p1 {
                s[a] += r[a] * (y - mu);
                for b in 0..p1 {
                    g[a * p1 + b] += mu * (1.0 - mu) * r[a] * r[b];
                }
            }
        }
        (g, s)
    }

    #[test]
    fn active_set_step_is_the_minimiser_found_by_coordinate_descent() {
        let ctrl = LassoControl {
            tol: 1e-16,
            max_inner: 100_000,
            ..LassoControl::default()
        };
        let (n, p1) = (400, 9);
        let mut checked = 0;
        for seed in 0..6u64 {
            let (g, s) = quadratic(n, p1, seed);
            // Start points whose supports are wrong in places: the active set must move.
            let c: Vec<f64> = (0..p1)
                .map(|j| [0.1, 0.25, -0.3, 0.0, 0.05, 0.0, -0.02, 0.0, 0.0][j])
                .collect();
            for &lam in &[0.001, 0.005, 0.02, 0.05] {
                let cd = cd_step(&c, &g, &s, n as f64, lam, &ctrl);
                if let Some(act) = active_set_step(&c, &g, &s, n as f64, lam) {
                    checked += 1;
                    for j in 0..p1 {
                        assert!(
                            (cd[j] - act[j]).abs() < 1e-7,
                            "seed {seed} lam {lam} j {j}: {} vs {}",
                            cd[j],
                            act[j]
                        );
                    }
                }
                // Whichever way, newton_step satisfies the KKT conditions of the quadratic.
                let x = newton_step(&c, &g, &s, n as f64, lam, &ctrl);
                for j in 0..p1 {
                    let grad = (s[j] - (0..p1).map(|k| g[j * p1 + k] * (x[k] - c[k])).sum::<f64>()) / n as f64;
                    if j == 0 {
                        assert!(grad.abs() < 1e-7);
                    } else if x[j] != 0.0 {
                        assert!((grad - lam * x[j].signum()).abs() < 1e-7);
                    } else {
                        assert!(grad.abs() <= lam + 1e-7);
                    }
                }
            }
        }
        assert!(checked >= 18, "the active-set method settled in {checked} of 24 cases");
    }
}
