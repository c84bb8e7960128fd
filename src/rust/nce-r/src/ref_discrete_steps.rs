//! Binding of nce_core::sampling::ref_discrete and nce_core::sampling::ref_steps: Bernoulli and categorical
//! references, and the step-selection kernel. Conversions and checks only.

use crate::convert::threads_of;
use crate::convert::{col_major_matrix, guard, real_matrix, real_slice, seed_of};
use extendr_api::prelude::*;
use nce_core::sampling::ref_discrete::{Bernoulli, Categorical};
use nce_core::sampling::ref_steps::StepKernel;
use nce_core::NceError;

fn count_of(n: f64, seed: f64) -> std::result::Result<(usize, u64), NceError> {
    if !(n.is_finite() && n >= 0.0 && n.fract() == 0.0) {
        return Err(NceError::invalid(
            "n",
            format!("must be a non-negative whole number, got {n}"),
        ));
    }
    Ok((n as usize, seed_of(seed)?))
}

fn categorical_of(probs: &List) -> std::result::Result<Categorical, NceError> {
    let mut p = Vec::with_capacity(probs.len());
    for (k, (_, v)) in probs.iter().enumerate() {
        p.push(real_slice(&v, &format!("prob[[{}]]", k + 1))?.to_vec());
    }
    Categorical::new(p)
}

/// `n` draws (0/1) from independent Bernoulli columns; a column-major n x d matrix.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_bernoulli_sample(prob: Robj, n: f64, seed: f64, threads: i32) -> Robj {
    guard(|| {
        let b = Bernoulli::new(real_slice(&prob, "prob")?.to_vec())?;
        let (n, seed) = count_of(n, seed)?;
        let x = crate::run::run(threads_of(threads)?, |_| Ok(b.sample(n, seed)))?;
        Ok(col_major_matrix(x, n, b.dim()))
    })
}

/// log q of independent Bernoulli columns at the rows of a matrix.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_bernoulli_log_density(prob: Robj, x: Robj, threads: i32) -> Robj {
    guard(|| {
        let b = Bernoulli::new(real_slice(&prob, "prob")?.to_vec())?;
        let (xd, n, _) = real_matrix(&x, "x")?;
        let out = crate::run::run(threads_of(threads)?, |_| b.log_density(xd, n))?;
        Ok(out.into_robj())
    })
}

/// `n` draws of 1-based level codes from independent categorical columns (`prob`: a list
/// of probability vectors); a column-major n x d matrix.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_categorical_sample(prob: List, n: f64, seed: f64, threads: i32) -> Robj {
    guard(|| {
        let c = categorical_of(&prob)?;
        let (n, seed) = count_of(n, seed)?;
        let x = crate::run::run(threads_of(threads)?, |_| Ok(c.sample(n, seed)))?;
        Ok(col_major_matrix(x, n, c.dim()))
    })
}

/// log q of independent categorical columns at rows of 1-based codes.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_categorical_log_density(prob: List, x: Robj, threads: i32) -> Robj {
    guard(|| {
        let c = categorical_of(&prob)?;
        let (xd, n, _) = real_matrix(&x, "x")?;
        let out = crate::run::run(threads_of(threads)?, |_| c.log_density(xd, n))?;
        Ok(out.into_robj())
    })
}

/// `par` = c(shape, scale, kappa, log(2 pi I0(kappa))), kappa NaN for uniform directions.
fn step_kernel(par: &Robj) -> std::result::Result<StepKernel, NceError> {
    let p = real_slice(par, "par")?;
    if p.len() != 4 {
        return Err(NceError::invalid("par", "must be c(shape, scale, kappa, log_norm)"));
    }
    let turn = if p[2].is_nan() { None } else { Some((p[2], p[3])) };
    StepKernel::new(p[0], p[1], turn)
}

/// `n` draws per previous state (rows of `prev`: x, y and, with turning angles, heading).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_steps_sample(par: Robj, prev: Robj, n: f64, seed: f64, threads: i32) -> Robj {
    guard(|| {
        let k = step_kernel(&par)?;
        let (pd, t, d) = real_matrix(&prev, "prev")?;
        if d != k.dim() {
            return Err(NceError::invalid(
                "prev",
                format!("has {d} columns, the kernel has {}", k.dim()),
            ));
        }
        let (n, seed) = count_of(n, seed)?;
        let x = crate::run::run(threads_of(threads)?, |_| k.sample(pd, t, n, seed))?;
        Ok(col_major_matrix(x, t * n, d))
    })
}

/// log q(x | prev) of the step kernel, row by row.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ref_steps_log_density(par: Robj, x: Robj, prev: Robj, threads: i32) -> Robj {
    guard(|| {
        let k = step_kernel(&par)?;
        let (xd, rows, d) = real_matrix(&x, "x")?;
        let (pd, prow, pdim) = real_matrix(&prev, "prev")?;
        if d != k.dim() || pdim != d || prow != rows {
            return Err(NceError::invalid(
                "x",
                "x and prev must be matrices of the same size, one column per state column",
            ));
        }
        let out = crate::run::run(threads_of(threads)?, |_| k.log_density(xd, pd, rows))?;
        Ok(out.into_robj())
    })
}

extendr_module! {
    mod ref_discrete_steps;
    fn nce_ref_bernoulli_sample;
    fn nce_ref_bernoulli_log_density;
    fn nce_ref_categorical_sample;
    fn nce_ref_categorical_log_density;
    fn nce_ref_steps_sample;
    fn nce_ref_steps_log_density;
}
