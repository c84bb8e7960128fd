//! Newton / IRLS for (penalised) GLM-type objectives with prior weights and offsets.
//!
//! Maximises sum_r w_r l_r(eta_r) - beta' S beta / 2 with eta = X beta + offset. Each step solves
//! (X'WX + S) beta = X'(W (eta - offset) + g), which is IRLS for canonical links and stays
//! defined where a row's curvature is zero (data rows of the Poisson transform).

use crate::convergence::Convergence;
use crate::engine::design::Design;
use crate::engine::family::Family;
use crate::engine::pirls;
use crate::error::{NceError, Result};
use crate::linalg::{aliased_columns, select, select_vec, spd_inverse, spd_solve};
// Problem and Control live with the iteration they describe; kept here for callers.
pub use crate::engine::pirls::{Control, Problem};
use nalgebra::DMatrix;

#[derive(Debug, Clone)]
pub struct GlmFit {
    /// Coefficients, NaN where aliased.
    pub coefficients: Vec<f64>,
    pub aliased: Vec<bool>,
    /// Inverse of the (penalised) negative Hessian at the optimum, NaN rows/cols where aliased.
    pub cov: DMatrix<f64>,
    /// Negative Hessian X'WX + S (unpenalised part is `hessian - S`), full size.
    pub hessian: DMatrix<f64>,
    /// Linear predictor including offset.
    pub eta: Vec<f64>,
    pub fitted: Vec<f64>,
    /// Prior-weighted gradient of each row's log-likelihood wrt eta (the score is g_r x_r).
    pub row_grad: Vec<f64>,
    pub loglik: f64,
    pub penalised_loglik: f64,
    pub deviance: f64,
    /// Rows with response 1 whose fitted value is numerically 1 (binomial): a sign of separation.
    pub n_certain: usize,
    /// Newton iterations taken; the message says why the fit did not converge.
    pub convergence: Convergence,
}

/// Fit by Newton's method with step halving. `interrupted` is polled once per iteration
/// (from the calling thread) and stops the fit with `NceError::Interrupted`.
pub fn fit<D: Design>(d: &D, prob: &Problem, ctrl: &Control, interrupted: &mut dyn FnMut() -> bool) -> Result<GlmFit> {
    ctrl.check()?;
    let (n, p) = (d.nrow(), d.ncol());
    pirls::validate(n, p, prob)?;
    let sat = prob.saturated_loglik();
    let deviance = |obj: f64| 2.0 * (sat - obj);

    let evaluate = |beta: Vec<f64>, eta: Vec<f64>| pirls::evaluate(d, prob, prob.penalty, beta, eta);
    let mut current = prob.start.map(|b| evaluate(b.to_vec(), Vec::new()));
    // The first working weights come from the response when there is no start, then from the
    // current iterate's eta; the working vectors and a spare linear predictor (the replaced
    // point's) are reused by every step, as in `pirls::newton`.
    let mut start_eta = current.is_none().then(|| pirls::initial_eta(prob));
    let (mut w, mut v) = (vec![0.0; n], vec![0.0; n]);
    let mut spare: Vec<f64> = Vec::new();
    let mut keep: Vec<usize> = Vec::new();
    let mut aliased = vec![false; p];
    let mut converged = false;
    let mut message = String::new();
    let mut iterations = 0;

    for it in 0..ctrl.maxit {
        if interrupted() {
            return Err(NceError::Interrupted);
        }
        iterations = it + 1;
        let eta = match (&current, &start_eta) {
            (Some(c), _) => &c.eta,
            (None, Some(e)) => e,
            (None, None) => unreachable!("a start or a current iterate"),
        };
        pirls::working_into(prob, eta, &mut w, &mut v, None);
        let (mut h, b) = d.weighted_crossprod(&w, &v);
        if let Some(s) = prob.penalty {
            h += s;
        }
        if it == 0 {
            aliased = aliased_columns(&h, ctrl.alias_tol);
            keep = (0..p).filter(|&j| !aliased[j]).collect();
            if keep.is_empty() {
                return Err(NceError::Numerical(
                    "every column of the design is zero or aliased".into(),
                ));
            }
        }
        let sol = spd_solve(&select(&h, &keep), &select_vec(&b, &keep))?;
        let mut beta = vec![0.0; p];
        for (k, &j) in keep.iter().enumerate() {
            beta[j] = sol[k];
        }
        let mut cand = evaluate(beta, std::mem::take(&mut spare));
        if let Some(cur) = &current {
            // Step halving: never accept a worse (or non-finite) objective.
            cand = match pirls::halve(cur, cand, ctrl.max_halving, evaluate) {
                Some(c) => c,
                None => {
                    message = format!("step halving failed to improve the objective at iteration {}", it + 1);
                    break;
                }
            };
            let (d_new, d_old) = (deviance(cand.objective), deviance(cur.objective));
            if (d_new - d_old).abs() <= ctrl.epsilon * (d_new.abs() + 0.1) {
                converged = true;
            }
        } else {
            cand = pirls::finite_start(cand, evaluate)?;
        }
        start_eta = None;
        if let Some(old) = current.replace(cand) {
            spare = old.eta;
        }
        if converged {
            break;
        }
    }
    let state = current.expect("at least one iteration ran");
    if !converged && message.is_empty() {
        message = format!("no convergence in {} iterations", ctrl.maxit);
    }

    // Curvature and scores at the optimum.
    let (w, _, g) = pirls::working(prob, &state.eta);
    let (mut h, _) = d.weighted_crossprod(&w, &vec![0.0; n]);
    if let Some(s) = prob.penalty {
        h += s;
    }
    let inv = spd_inverse(&select(&h, &keep))?;
    let mut cov = DMatrix::from_element(p, p, f64::NAN);
    for (a, &i) in keep.iter().enumerate() {
        for (b, &j) in keep.iter().enumerate() {
            cov[(i, j)] = inv[(a, b)];
        }
    }
    let fitted: Vec<f64> = state.eta.iter().map(|&e| prob.family.mean(e)).collect();
    let n_certain = match prob.family {
        Family::Binomial => prob
            .y
            .iter()
            .zip(&fitted)
            .filter(|(&y, &m)| y == 1.0 && m > 1.0 - 1e-10)
            .count(),
        _ => 0,
    };
    let mut coefficients = state.beta.clone();
    for j in 0..p {
        if aliased[j] {
            coefficients[j] = f64::NAN;
        }
    }
    Ok(GlmFit {
        coefficients,
        aliased,
        cov,
        hessian: h,
        fitted,
        row_grad: g,
        loglik: state.loglik,
        penalised_loglik: state.objective,
        deviance: deviance(state.objective),
        eta: state.eta,
        n_certain,
        convergence: Convergence {
            iterations,
            converged,
            message,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::DenseDesign;

    /// Logistic data with a known answer computed by an independent Newton iteration.
    fn logistic_data(n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut x = vec![0.0; 2 * n];
        let mut y = vec![0.0; n];
        for i in 0..n {
            let t = (i as f64 + 0.5) / n as f64 * 4.0 - 2.0;
            x[i] = 1.0;
            x[n + i] = t;
            // deterministic but not separable labels
            y[i] = if ((i * 7919) % 13) as f64 / 13.0 < 1.0 / (1.0 + (-(0.5 + 1.5 * t)).exp()) {
                1.0
            } else {
                0.0
            };
        }
        (x, y)
    }

    /// `fit` with the default control on a column-major n x p matrix.
    fn fit_dense(x: &[f64], n: usize, p: usize, prob: &Problem, stop: bool) -> Result<GlmFit> {
        fit(
            &DenseDesign::new(x, n, p).unwrap(),
            prob,
            &Control::default(),
            &mut || stop,
        )
    }

    #[test]
    fn score_is_zero_at_the_optimum() {
        let n = 500;
        let (x, y) = logistic_data(n);
        let d = DenseDesign::new(&x, n, 2).unwrap();
        let w = vec![1.0; n];
        let o = vec![0.1; n];
        let prob = Problem::new(&y, &w, &o, Family::Binomial);
        let f = fit(&d, &prob, &Control::default(), &mut || false).unwrap();
        assert!(f.convergence.converged);
        for j in 0..2 {
            let s: f64 = (0..n).map(|i| x[j * n + i] * f.row_grad[i]).sum();
            assert!(s.abs() < 1e-8, "score {s}");
        }
    }

    #[test]
    fn aliased_column_gets_nan_and_the_rest_matches_the_reduced_fit() {
        let n = 300;
        let (x, y) = logistic_data(n);
        let mut x3 = x.clone();
        x3.extend((0..n).map(|i| 2.0 * x[n + i] + 1.0));
        let w = vec![1.0; n];
        let o = vec![0.0; n];
        let prob = Problem::new(&y, &w, &o, Family::Binomial);
        let f2 = fit_dense(&x, n, 2, &prob, false).unwrap();
        let f3 = fit_dense(&x3, n, 3, &prob, false).unwrap();
        assert_eq!(f3.aliased, vec![false, false, true]);
        assert!(f3.coefficients[2].is_nan());
        for j in 0..2 {
            assert!((f2.coefficients[j] - f3.coefficients[j]).abs() < 1e-10);
        }
    }

    #[test]
    fn poisson_with_intercept_only_gives_log_mean() {
        let y = vec![0.0, 1.0, 3.0, 2.0, 5.0, 1.0];
        let n = y.len();
        let x = vec![1.0; n];
        let w = vec![1.0; n];
        let o = vec![0.0; n];
        let prob = Problem::new(&y, &w, &o, Family::Poisson);
        let f = fit_dense(&x, n, 1, &prob, false).unwrap();
        assert!((f.coefficients[0] - 2f64.ln()).abs() < 1e-10);
        assert!((f.cov[(0, 0)] - 1.0 / 12.0).abs() < 1e-8);
    }

    #[test]
    fn interrupt_stops_the_fit() {
        let n = 100;
        let (x, y) = logistic_data(n);
        let w = vec![1.0; n];
        let o = vec![0.0; n];
        let prob = Problem::new(&y, &w, &o, Family::Binomial);
        let r = fit_dense(&x, n, 2, &prob, true);
        assert_eq!(r.unwrap_err(), NceError::Interrupted);
    }

    #[test]
    fn bad_inputs_name_the_argument() {
        let x = vec![1.0; 3];
        let d = DenseDesign::new(&x, 3, 1).unwrap();
        let (w, o) = (vec![1.0; 3], vec![0.0; 3]);
        let y = vec![0.0, 2.0, 1.0];
        let prob = Problem::new(&y, &w, &o, Family::Binomial);
        let e = fit(&d, &prob, &Control::default(), &mut || false).unwrap_err();
        assert!(e.to_string().starts_with("`y`"), "{e}");
        let o2 = vec![0.0, f64::INFINITY, 0.0];
        let y2 = vec![0.0, 1.0, 1.0];
        let prob = Problem::new(&y2, &w, &o2, Family::Binomial);
        let e = fit(&d, &prob, &Control::default(), &mut || false).unwrap_err();
        assert!(
            e.to_string().contains("`offset`") && e.to_string().contains("position 2"),
            "{e}"
        );
    }
}
