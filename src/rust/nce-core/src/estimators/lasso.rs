//! K-fold cross-validation of the lasso path (`lasso_path`) by the clamped binomial deviance,
//! as glmnet's `cv.glmnet`: exactly, by a path per fold, or with `ctrl.onestep` approximately,
//! by one Newton step per fold (`lasso_onestep`).

use super::lasso_path::{
    argmin, check_cv_inputs, coarse_path, cv_curve_of, cv_result, deviance, fine_indices, logistic_lasso_path,
    merge_order, path_from, CvLasso, LassoControl, LassoData, LassoPath, Rows,
};
use crate::Result;
use rand::seq::SliceRandom;
use rand::Rng;

/// Fold of each row, as glmnet's `sample(rep(seq(nfolds), length = n))`: balanced sizes in a
/// random order.
pub fn fold_ids<R: Rng>(n: usize, nfolds: usize, rng: &mut R) -> Vec<usize> {
    let mut f: Vec<usize> = (0..n).map(|i| i % nfolds).collect();
    f.shuffle(rng);
    f
}

/// One path's fit at each lambda of the merged sequence: (path, index in it) per lambda.
struct Merged<'a> {
    parts: Vec<(&'a LassoPath, usize)>,
}

impl Merged<'_> {
    fn fit(&self, k: usize) -> (f64, &[f64]) {
        let (p, i) = self.parts[k];
        let i = i.min(p.lambda.len() - 1);
        (p.intercept[i], &p.beta[i])
    }
}

/// Lasso path on all rows with K-fold cross-validation of the (clamped) binomial deviance.
/// `folds` gives each row's fold (0..nfolds). With `ctrl.coarse` = c > 1 the paths run on every
/// c-th lambda of the sequence (and the last); then, from the fits at the coarse lambda above
/// the best one, on every lambda between its two coarse neighbours. The returned path and CV
/// curve hold the coarse lambdas and that fine stretch, in decreasing order.
pub fn cv_logistic_lasso(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    folds: &[usize],
    ctrl: &LassoControl,
) -> Result<CvLasso> {
    if ctrl.onestep {
        return super::lasso_onestep::cv_logistic_lasso_onestep(&LassoData { x, n, p, y }, folds, ctrl);
    }
    let nfolds = check_cv_inputs(x, n, p, y, folds)?;
    let step = ctrl.coarse.max(1);
    let (all_lambdas, coarse_idx, path) = coarse_path(x, n, p, y, ctrl)?;
    let nc = path.lambda.len();
    let all: Vec<usize> = (0..n).collect();
    let xr = Rows { x, n };
    struct Fold {
        test: Vec<usize>,
        yt: Vec<f64>,
        train: Vec<usize>,
        // None: the training rows hold one class (the fit predicts it with certainty).
        path: Option<LassoPath>,
        one_class: f64,
    }
    let mut fd: Vec<Fold> = Vec::with_capacity(nfolds);
    for f in 0..nfolds {
        let train: Vec<usize> = (0..n).filter(|&i| folds[i] != f).collect();
        let test: Vec<usize> = (0..n).filter(|&i| folds[i] == f).collect();
        let yt: Vec<f64> = test.iter().map(|&i| y[i]).collect();
        let ytrain_sum: f64 = train.iter().map(|&i| y[i]).sum();
        let single = ytrain_sum == 0.0 || ytrain_sum == train.len() as f64;
        let fp = if test.is_empty() || single {
            None
        } else {
            Some(logistic_lasso_path(x, n, p, y, &train, &path.lambda, ctrl)?)
        };
        let one_class = if ytrain_sum == 0.0 { -30.0 } else { 30.0 };
        fd.push(Fold {
            test,
            yt,
            train,
            path: fp,
            one_class,
        });
    }
    // Held-out mean deviance of a fit (a fold path that stopped early keeps its last fit for
    // the remaining lambdas, as glmnet's predict does).
    let held_out = |fold: &Fold, fit: Option<(f64, &[f64])>| -> f64 {
        let mut eta = vec![0.0; fold.test.len()];
        match fit {
            Some((b0, beta)) => {
                eta.iter_mut().for_each(|e| *e = b0);
                for (j, &bj) in beta.iter().enumerate() {
                    if bj != 0.0 {
                        for (e, &i) in eta.iter_mut().zip(&fold.test) {
                            *e += bj * xr.at(i, j);
                        }
                    }
                }
            }
            None => eta.iter_mut().for_each(|e| *e = fold.one_class),
        }
        deviance(&fold.yt, &eta, true) / fold.test.len() as f64
    };
    let fold_n: Vec<f64> = fd.iter().map(|f| f.test.len() as f64).collect();
    let cv_curve = |merged_folds: &[Option<Merged>], nl: usize| -> (Vec<f64>, Vec<f64>) {
        let dev: Vec<Vec<f64>> = fd
            .iter()
            .zip(merged_folds)
            .map(|(f, mf)| {
                (0..nl)
                    .map(|k| {
                        if f.test.is_empty() {
                            0.0
                        } else {
                            held_out(f, mf.as_ref().map(|m| m.fit(k)))
                        }
                    })
                    .collect()
            })
            .collect();
        cv_curve_of(&fold_n, &dev, nl)
    };
    let coarse_folds: Vec<Option<Merged>> = fd
        .iter()
        .map(|f| {
            f.path.as_ref().map(|p| Merged {
                parts: (0..nc).map(|k| (p, k)).collect(),
            })
        })
        .collect();
    let (cvm_c, cvsd_c) = cv_curve(&coarse_folds, nc);
    let kc = argmin(&cvm_c);
    let fine = fine_indices(&coarse_idx, kc);
    let (path, cvm, cvsd) = if step == 1 || fine.is_empty() {
        (path, cvm_c, cvsd_c)
    } else {
        let fine_l: Vec<f64> = fine.iter().map(|&i| all_lambdas[i]).collect();
        let from = kc.saturating_sub(1);
        let start_of = |p: &LassoPath| {
            let i = from.min(p.lambda.len() - 1);
            (p.intercept[i], p.beta[i].clone())
        };
        let (b0, bs) = start_of(&path);
        let seg = path_from(&LassoData { x, n, p, y }, &all, &fine_l, ctrl, Some((b0, &bs)))?;
        let mut fold_seg: Vec<Option<LassoPath>> = Vec::with_capacity(nfolds);
        for f in &fd {
            fold_seg.push(match &f.path {
                Some(fp) => {
                    let (b0, bs) = start_of(fp);
                    Some(path_from(
                        &LassoData { x, n, p, y },
                        &f.train,
                        &fine_l,
                        ctrl,
                        Some((b0, &bs)),
                    )?)
                }
                None => None,
            });
        }
        // Merged order: all lambda indices, coarse and fine, increasing (lambda decreasing).
        let order = merge_order(&coarse_idx, &fine);
        let pick = |c: &LassoPath, s: &LassoPath, o: &(usize, bool, usize)| -> (f64, Vec<f64>, f64, f64) {
            let (src, k) = if o.1 { (s, o.2) } else { (c, o.2) };
            let k = k.min(src.lambda.len() - 1);
            (src.lambda[k], src.beta[k].clone(), src.intercept[k], src.dev_ratio[k])
        };
        let mut merged = LassoPath {
            outer_steps: path.outer_steps + seg.outer_steps,
            ..LassoPath::default()
        };
        for o in &order {
            let (l, b, b0, r) = pick(&path, &seg, o);
            merged.lambda.push(l);
            merged.beta.push(b);
            merged.intercept.push(b0);
            merged.dev_ratio.push(r);
        }
        let nl = merged.lambda.len();
        let mf: Vec<Option<Merged>> = fd
            .iter()
            .zip(&fold_seg)
            .map(|(f, s)| match (&f.path, s) {
                (Some(c), Some(s)) => Some(Merged {
                    parts: order.iter().map(|o| if o.1 { (s, o.2) } else { (c, o.2) }).collect(),
                }),
                _ => None,
            })
            .collect();
        let (cvm, cvsd) = cv_curve(&mf, nl);
        (merged, cvm, cvsd)
    };
    Ok(cv_result(path, cvm, cvsd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::lasso_path::tests::problem;
    use crate::rng::stream_rng;

    /// Coarse-to-fine CV: the path holds every `coarse`-th lambda and the fine stretch around
    /// the best, in decreasing order; its fits match the full path's at the same lambdas, and the
    /// chosen lambda is the full grid's when the CV curve has one minimum.
    #[test]
    fn coarse_cv_matches_the_full_path() {
        let (n, p) = (600, 6);
        let (x, y) = problem(n, p, 11);
        let full_ctrl = LassoControl {
            nlambda: 40,
            lambda_min_ratio: 1e-3,
            tol: 1e-12,
            ..LassoControl::default()
        };
        let folds = fold_ids(n, 5, &mut stream_rng(5, 1));
        let full = cv_logistic_lasso(&x, n, p, &y, &folds, &full_ctrl).unwrap();
        let ctrl = LassoControl {
            coarse: 4,
            ..full_ctrl.clone()
        };
        let cv = cv_logistic_lasso(&x, n, p, &y, &folds, &ctrl).unwrap();
        assert!(cv.path.lambda.len() < full.path.lambda.len());
        assert!(cv.path.lambda.windows(2).all(|w| w[1] < w[0]));
        for (k, l) in cv.path.lambda.iter().enumerate() {
            // The full path may stop earlier (glmnet's rule sees smaller steps there).
            let Some(i) = full.path.lambda.iter().position(|v| v == l) else {
                assert!(*l < *full.path.lambda.last().unwrap());
                continue;
            };
            assert!((cv.cvm[k] - full.cvm[i]).abs() < 1e-6);
            for j in 0..p {
                assert!((cv.path.beta[k][j] - full.path.beta[i][j]).abs() < 1e-4);
            }
        }
        assert_eq!(cv.path.lambda[cv.index_min], full.path.lambda[full.index_min]);
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
