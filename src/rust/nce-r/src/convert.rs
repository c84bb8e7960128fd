//! Conversions from R objects with errors that name the argument, and the error protocol:
//! binding functions never raise R errors themselves (no longjmp over Rust frames, no
//! format-string trap in Rf_error); they return a marked list the R layer turns into a
//! classed condition.

use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::NceError;

pub fn real_slice<'a>(x: &'a Robj, arg: &str) -> std::result::Result<&'a [f64], NceError> {
    x.as_real_slice()
        .ok_or_else(|| NceError::invalid(arg, format!("must be a double vector, got {:?}", x.rtype())))
}

pub fn int_slice<'a>(x: &'a Robj, arg: &str) -> std::result::Result<&'a [i32], NceError> {
    x.as_integer_slice()
        .ok_or_else(|| NceError::invalid(arg, format!("must be an integer vector, got {:?}", x.rtype())))
}

/// (data, nrow, ncol) of a double matrix.
pub fn real_matrix<'a>(x: &'a Robj, arg: &str) -> std::result::Result<(&'a [f64], usize, usize), NceError> {
    let data = real_slice(x, arg)?;
    match x.dim() {
        Some(d) if d.len() == 2 => Ok((data, d[0].0 as usize, d[1].0 as usize)),
        _ => Err(NceError::invalid(arg, "must be a double matrix")),
    }
}

pub fn list_real<'a>(l: &'a List, name: &str) -> std::result::Result<Robj, NceError> {
    l.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .ok_or_else(|| NceError::invalid(name, "is missing from the specification list"))
}

pub fn to_r_matrix(m: &DMatrix<f64>) -> Robj {
    RMatrix::new_matrix(m.nrows(), m.ncols(), |i, j| m[(i, j)]).into_robj()
}

pub fn col_major_matrix(data: Vec<f64>, nrow: usize, ncol: usize) -> Robj {
    RMatrix::new_matrix(nrow, ncol, |i, j| data[j * nrow + i]).into_robj()
}

/// The error marker the R layer recognises (class `nce_rust_error`).
pub fn error_robj(code: &str, msg: &str) -> Robj {
    let clean: String = msg.chars().filter(|&c| c != '\0').collect();
    let mut l = list!(code = code, message = clean);
    l.set_class(&["nce_rust_error"])
        .expect("setting a class on a fresh list");
    l.into_robj()
}

pub fn respond(r: std::result::Result<Robj, NceError>) -> Robj {
    match r {
        Ok(v) => v,
        Err(e) => error_robj(e.code(), &e.to_string()),
    }
}

/// Message of a caught panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Run `f` on the main thread and turn a panic into the error marker.
pub fn guard(f: impl FnOnce() -> std::result::Result<Robj, NceError>) -> Robj {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => respond(r),
        Err(p) => respond(Err(NceError::Internal(panic_message(p.as_ref())))),
    }
}
