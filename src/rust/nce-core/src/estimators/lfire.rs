//! LFIRE (Thomas, Dutta, Corander, Kaski and Gutmann 2020): for each parameter value theta_g,
//! a penalised logistic regression between the summaries simulated at theta_g (class 1) and
//! the summaries of a shared prior-predictive sample (class 0). Its log-odds, minus
//! log(n_g / n_marginal), estimates log p(s | theta_g) / p(s), evaluated at the observed
//! summaries. The fits are independent: one per theta in a rayon pool, each with its own
//! ChaCha stream for the CV folds, so results do not depend on the thread count.

use crate::engine::design::DenseDesign;
use crate::engine::family::Family;
use crate::engine::irls::{Control, Problem};
use crate::engine::penalty::{Penalty, PenaltySet};
use crate::engine::reml::{fit_reml, RemlControl};
use crate::estimators::lasso::{cv_logistic_lasso, fold_ids};
use crate::estimators::lasso_path::LassoControl;
use crate::rng::stream_rng;
use crate::{NceError, Result};
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// The simulated summaries: marginal (n_m x p) and, stacked, those at each theta (rows
/// starts[g]..starts[g + 1] belong to theta g), both column-major; the observed summaries.
pub struct LfireData<'a> {
    pub marginal: &'a [f64],
    pub n_marginal: usize,
    pub at_theta: &'a [f64],
    pub starts: &'a [usize],
    pub p: usize,
    pub observed: &'a [f64],
}

/// Which penalty: the lasso with lambda chosen by K-fold CV (the minimum of the CV deviance,
/// or the largest lambda within one standard error of it), or a ridge penalty chosen by REML.
#[derive(Debug, Clone)]
pub enum LfirePenalty {
    Lasso { ctrl: LassoControl, one_se: bool },
    Ridge,
}

/// One theta's fit.
#[derive(Debug, Clone)]
pub struct LfireFit {
    pub intercept: f64,
    pub beta: Vec<f64>,
    /// lambda (lasso) or the ridge smoothing parameter.
    pub lambda: f64,
    /// Estimated log p(s_obs | theta) / p(s_obs).
    pub log_ratio: f64,
    /// Lasso: CV deviance at the chosen lambda; ridge: the REML score.
    pub criterion: f64,
    /// Non-zero slopes (lasso) or effective degrees of freedom of the slopes (ridge).
    pub df: f64,
}

impl LfireData<'_> {
    fn n_theta(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    fn check(&self) -> Result<()> {
        let p = self.p;
        if p == 0 {
            return Err(NceError::invalid("summaries", "need at least one summary statistic"));
        }
        if self.marginal.len() != self.n_marginal * p {
            return Err(NceError::invalid("marginal", "has the wrong size"));
        }
        if self.observed.len() != p {
            return Err(NceError::invalid("observed", format!("must have {p} summaries")));
        }
        if self.starts.is_empty() || self.starts[0] != 0 {
            return Err(NceError::invalid("starts", "must start at 0"));
        }
        let total = *self.starts.last().unwrap_or(&0);
        if self.at_theta.len() != total * p {
            return Err(NceError::invalid("at_theta", "has the wrong size"));
        }
        if self.starts.windows(2).any(|w| w[1] < w[0] + 2) {
            return Err(NceError::invalid(
                "at_theta",
                "needs at least two simulations at every theta",
            ));
        }
        if self.n_marginal < 2 {
            return Err(NceError::invalid("marginal", "needs at least two simulations"));
        }
        for (name, v) in [
            ("marginal", self.marginal),
            ("at_theta", self.at_theta),
            ("observed", self.observed),
        ] {
            if v.iter().any(|x| !x.is_finite()) {
                return Err(NceError::invalid(name, "has non-finite summaries"));
            }
        }
        Ok(())
    }

    /// The two-class problem of theta g: column-major (n_g + n_m) x p and the 0/1 labels.
    fn problem(&self, g: usize) -> (Vec<f64>, Vec<f64>, usize, usize) {
        let (a, b) = (self.starts[g], self.starts[g + 1]);
        let ng = b - a;
        let total = *self.starts.last().unwrap_or(&0);
        let n = ng + self.n_marginal;
        let mut x = Vec::with_capacity(n * self.p);
        for j in 0..self.p {
            x.extend_from_slice(&self.at_theta[j * total + a..j * total + b]);
            x.extend_from_slice(&self.marginal[j * self.n_marginal..(j + 1) * self.n_marginal]);
        }
        let mut y = vec![1.0; ng];
        y.resize(n, 0.0);
        (x, y, n, ng)
    }
}

fn fit_one(data: &LfireData, g: usize, pen: &LfirePenalty, seed: u64, stop: &AtomicBool) -> Result<LfireFit> {
    let (x, y, n, ng) = data.problem(g);
    let p = data.p;
    let prior_odds = (ng as f64 / data.n_marginal as f64).ln();
    match pen {
        LfirePenalty::Lasso { ctrl, one_se } => {
            let folds = fold_ids(n, ctrl.nfolds, &mut stream_rng(seed, g as u64));
            let cv = cv_logistic_lasso(&x, n, p, &y, &folds, ctrl)?;
            let k = if *one_se { cv.index_1se } else { cv.index_min };
            let beta = cv.path.beta[k].clone();
            let b0 = cv.path.intercept[k];
            let eta = b0 + beta.iter().zip(data.observed).map(|(a, b)| a * b).sum::<f64>();
            Ok(LfireFit {
                intercept: b0,
                df: beta.iter().filter(|&&v| v != 0.0).count() as f64,
                beta,
                lambda: cv.path.lambda[k],
                log_ratio: eta - prior_odds,
                criterion: cv.cvm[k],
            })
        }
        LfirePenalty::Ridge => {
            let mut xd = vec![1.0; n];
            xd.extend_from_slice(&x);
            let design = DenseDesign::new(&xd, n, p + 1)?;
            let w = vec![1.0; n];
            let o = vec![0.0; n];
            let prob = Problem {
                y: &y,
                prior_weights: &w,
                offset: &o,
                family: Family::Binomial,
                penalty: None,
                start: None,
            };
            let pens = PenaltySet::new(
                p + 1,
                vec![Penalty {
                    start: 1,
                    s: DMatrix::identity(p, p),
                }],
            )?;
            let ctrl = RemlControl {
                inner: Control::default(),
                ..RemlControl::default()
            };
            let fit = fit_reml(&design, &prob, &pens, &ctrl, &mut || stop.load(Ordering::Relaxed))?;
            let c = &fit.coefficients;
            let eta = c[0] + c[1..].iter().zip(data.observed).map(|(a, b)| a * b).sum::<f64>();
            Ok(LfireFit {
                intercept: c[0],
                beta: c[1..].to_vec(),
                lambda: fit.sp[0],
                log_ratio: eta - prior_odds,
                criterion: fit.reml,
                df: fit.edf[1..].iter().sum(),
            })
        }
    }
}

/// Fit every theta (in the current rayon pool). `stop` is polled between fits.
pub fn lfire_fit(data: &LfireData, pen: &LfirePenalty, seed: u64, stop: &AtomicBool) -> Result<Vec<LfireFit>> {
    data.check()?;
    if let LfirePenalty::Lasso { ctrl, .. } = pen {
        if ctrl.nfolds < 2
            || ctrl.nlambda < 1
            || ctrl.coarse < 1
            || !(ctrl.lambda_min_ratio > 0.0 && ctrl.lambda_min_ratio < 1.0)
        {
            return Err(NceError::invalid(
                "control",
                "needs nfolds >= 2, nlambda >= 1, coarse >= 1, 0 < lambda_min_ratio < 1",
            ));
        }
    }
    (0..data.n_theta())
        .into_par_iter()
        .map(|g| {
            if stop.load(Ordering::Relaxed) {
                return Err(NceError::Interrupted);
            }
            fit_one(data, g, pen, seed, stop)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, StandardNormal};

    /// Gaussian location: s ~ N(theta, 1), marginal N(0, 2) (theta ~ N(0, 1)). With the
    /// summaries (s, s^2) the true log ratio is quadratic in s, so both penalties recover it.
    #[test]
    fn gaussian_log_ratio() {
        let (nm, nt) = (2000, 2000);
        let mut rng = stream_rng(1, 0);
        let mut draw = |mean: f64, sd: f64| -> f64 {
            let z: f64 = StandardNormal.sample(&mut rng);
            mean + sd * z
        };
        let marg: Vec<f64> = (0..nm).map(|_| draw(0.0, 2f64.sqrt())).collect();
        let thetas = [-1.0, 0.0, 1.5];
        let at: Vec<Vec<f64>> = thetas
            .iter()
            .map(|&t| (0..nt).map(|_| draw(t, 1.0)).collect())
            .collect();
        let mut marginal = marg.clone();
        marginal.extend(marg.iter().map(|v| v * v));
        let total = nt * thetas.len();
        let mut at_theta: Vec<f64> = at.iter().flatten().copied().collect();
        at_theta.extend(at.iter().flatten().map(|v| v * v));
        assert_eq!(at_theta.len(), 2 * total);
        let starts: Vec<usize> = (0..=thetas.len()).map(|g| g * nt).collect();
        let s_obs = 0.5;
        let observed = [s_obs, s_obs * s_obs];
        let data = LfireData {
            marginal: &marginal,
            n_marginal: nm,
            at_theta: &at_theta,
            starts: &starts,
            p: 2,
            observed: &observed,
        };
        let stop = AtomicBool::new(false);
        let truth = |t: f64| {
            let l1 = -0.5 * (s_obs - t).powi(2);
            let l0 = -0.5 * s_obs * s_obs / 2.0 - 0.5 * 2f64.ln();
            l1 - l0
        };
        for pen in [
            LfirePenalty::Lasso {
                ctrl: LassoControl::default(),
                one_se: false,
            },
            LfirePenalty::Ridge,
        ] {
            let fits = lfire_fit(&data, &pen, 9, &stop).unwrap();
            for (g, f) in fits.iter().enumerate() {
                assert!(
                    (f.log_ratio - truth(thetas[g])).abs() < 0.15,
                    "{pen:?} g {g} {}",
                    f.log_ratio
                );
            }
        }
    }
}
