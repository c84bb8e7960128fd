//! Fitting theta and alpha together by L-BFGS on -J.

use super::params::TgmParams;
use super::problem::TgmVnce;
use crate::convergence::Convergence;
use crate::error::{NceError, Result};
use crate::optim::{minimise_lbfgs, LbfgsControl, Objective, OptimResult};
use nalgebra::DMatrix;

/// How an L-BFGS maximisation of J ended.
#[derive(Debug, Clone)]
pub struct FitReport {
    /// J at the end (maximised).
    pub objective: f64,
    pub evaluations: usize,
    pub convergence: Convergence,
    /// Largest absolute gradient of J over the packed parameters at the end.
    pub grad_norm: f64,
}

impl FitReport {
    /// From a minimisation of -J.
    pub(crate) fn from_minimum(r: &OptimResult) -> Self {
        FitReport {
            objective: -r.value,
            evaluations: r.evaluations,
            convergence: r.convergence.clone(),
            grad_norm: r.grad.iter().fold(0.0, |m, v| m.max(v.abs())),
        }
    }
}

#[derive(Debug, Clone)]
pub struct VnceFit {
    pub params: TgmParams,
    /// Lambda = T T', the fitted precision of log x under q.
    pub precision: DMatrix<f64>,
    pub report: FitReport,
}

/// Maximise J from `start`. `interrupt` is polled once per optimiser iteration.
pub fn fit(
    problem: &TgmVnce,
    start: &TgmParams,
    ctrl: &LbfgsControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<VnceFit> {
    if start.dim() != problem.dim() {
        return Err(NceError::invalid(
            "start",
            format!("has dimension {}, the data {}", start.dim(), problem.dim()),
        ));
    }
    let x0 = start.pack();
    let mut g0 = vec![0.0; x0.len()];
    if !problem.value_grad(&x0, &mut g0)?.is_finite() {
        return Err(NceError::invalid(
            "start",
            "the objective is not finite at the starting values",
        ));
    }
    let r = minimise_lbfgs(problem, &x0, ctrl, interrupt)?;
    let params = TgmParams::unpack(problem.dim(), &r.x)?;
    Ok(VnceFit {
        precision: params.precision(),
        params,
        report: FitReport::from_minimum(&r),
    })
}
