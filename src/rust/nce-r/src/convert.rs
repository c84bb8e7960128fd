//! Conversions from R objects with errors that name the argument, and the error protocol:
//! binding functions never raise R errors themselves (no longjmp over Rust frames, no
//! format-string trap in Rf_error); they return a marked list the R layer turns into a
//! classed condition.

use extendr_api::prelude::*;
use nalgebra::DMatrix;
use nce_core::engine::irls::Control;
use nce_core::optim::LbfgsControl;
use nce_core::NceError;

pub type Res<T> = std::result::Result<T, NceError>;

/// The seed drawn in R (`draw_seed()`): a whole number in [0, 2^53).
pub fn seed_of(seed: f64) -> Res<u64> {
    if !(0.0..9.007_199_254_740_992e15).contains(&seed) {
        return Err(NceError::invalid("seed", "must be a whole number in [0, 2^53)"));
    }
    Ok(seed as u64)
}

/// A count given as a double (R's numbers may exceed the integer range): a whole number of at
/// least `min`, below 2^53.
pub fn count_of(v: f64, arg: &str, min: usize) -> Res<usize> {
    if !(v.is_finite() && v.fract() == 0.0 && v >= min as f64 && v < 9.007_199_254_740_992e15) {
        return Err(NceError::invalid(
            arg,
            format!("must be a whole number of at least {min}, got {v}"),
        ));
    }
    Ok(v as usize)
}

/// A count given as an R integer, at least `min`.
pub fn int_count(v: i32, arg: &str, min: usize) -> Res<usize> {
    if v < 0 || (v as usize) < min {
        return Err(NceError::invalid(
            arg,
            format!("must be an integer of at least {min}, got {v}"),
        ));
    }
    Ok(v as usize)
}

/// The number of threads of the per-call pool.
pub fn threads_of(threads: i32) -> Res<usize> {
    int_count(threads, "threads", 1)
}

/// Element `name` of a list; `arg` names the list in the error.
pub fn list_get(l: &List, name: &str, arg: &str) -> Res<Robj> {
    l.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .ok_or_else(|| NceError::invalid(arg, format!("has no element `{name}`")))
}

/// A single number from a list element given as double or integer.
pub fn list_number(l: &List, name: &str, arg: &str) -> Res<f64> {
    let v = list_get(l, name, arg)?;
    match (v.as_real(), v.as_integer()) {
        (Some(x), _) => Ok(x),
        (None, Some(i)) if !v.is_na() => Ok(f64::from(i)),
        _ => Err(NceError::invalid(arg, format!("`{name}` must be a single number"))),
    }
}

/// A count (whole number >= `min`) from a list element.
pub fn list_count(l: &List, name: &str, arg: &str, min: usize) -> Res<usize> {
    let v = list_number(l, name, arg)?;
    count_of(v, &format!("{arg}${name}"), min)
}

/// A double vector from a list element.
pub fn list_vec(l: &List, name: &str, arg: &str) -> Res<Vec<f64>> {
    let r = list_get(l, name, arg)?;
    Ok(real_slice(&r, &format!("{arg}${name}"))?.to_vec())
}

/// L-BFGS settings from `control` = list(maxit, gtol, ftol, memory), checked once by the core.
pub fn lbfgs_control(control: &List) -> Res<LbfgsControl> {
    let ctrl = LbfgsControl {
        maxit: list_count(control, "maxit", "control", 0)?,
        gtol: list_number(control, "gtol", "control")?,
        ftol: list_number(control, "ftol", "control")?,
        memory: list_count(control, "memory", "control", 0)?,
    };
    ctrl.check()?;
    Ok(ctrl)
}

/// Newton/IRLS settings (`control`'s epsilon and maxit) over `base`, checked by the core.
pub fn irls_control(epsilon: f64, maxit: usize, base: Control) -> Res<Control> {
    let ctrl = Control { epsilon, maxit, ..base };
    ctrl.check()?;
    Ok(ctrl)
}

pub fn real_slice<'a>(x: &'a Robj, arg: &str) -> Res<&'a [f64]> {
    x.as_real_slice()
        .ok_or_else(|| NceError::invalid(arg, format!("must be a double vector, got {:?}", x.rtype())))
}

pub fn int_slice<'a>(x: &'a Robj, arg: &str) -> Res<&'a [i32]> {
    x.as_integer_slice()
        .ok_or_else(|| NceError::invalid(arg, format!("must be an integer vector, got {:?}", x.rtype())))
}

/// (data, nrow, ncol) of a double matrix.
pub fn real_matrix<'a>(x: &'a Robj, arg: &str) -> Res<(&'a [f64], usize, usize)> {
    let data = real_slice(x, arg)?;
    match x.dim() {
        Some(d) if d.len() == 2 => Ok((data, d[0].0 as usize, d[1].0 as usize)),
        _ => Err(NceError::invalid(arg, "must be a double matrix")),
    }
}

/// A block of model-matrix rows built and held in Rust memory (R sees an external pointer in
/// a list of class `"nce_rust_block"`): R's garbage collector neither counts nor copies it, and
/// the fit reads it where it lies.
#[derive(Debug, Default)]
pub struct RowsBlock {
    /// n x ncol, column-major.
    pub data: Vec<f64>,
    pub nrow: usize,
    pub ncol: usize,
}

/// The blocks of a model matrix held as a list of double matrices with the same rows (class
/// `"nce_blocks"`, so that R never binds them into a second copy), or one matrix. A block of
/// class `"nce_rust_block"` is given as its external pointer.
pub fn matrix_blocks(x: &Robj) -> Vec<Robj> {
    match x.as_list() {
        Some(l) if x.inherits("nce_blocks") => l
            .values()
            .map(|b| match b.as_list() {
                Some(bl) if b.inherits("nce_rust_block") => {
                    bl.iter().find(|(n, _)| *n == "ptr").map_or(b.clone(), |(_, p)| p)
                }
                _ => b,
            })
            .collect(),
        _ => vec![x.clone()],
    }
}

/// The rows block behind an external pointer (`nce_rust_block`'s `ptr`).
pub fn rows_block<'a>(x: &'a Robj, arg: &str) -> Res<&'a RowsBlock> {
    let p: &ExternalPtr<RowsBlock> = x
        .try_into()
        .map_err(|_| NceError::invalid(arg, "must hold a block built by the package"))?;
    let b: &RowsBlock = p;
    if b.data.len() != b.nrow * b.ncol {
        return Err(NceError::invalid(arg, "holds a block that was released"));
    }
    Ok(b)
}

/// The rows block behind an external pointer, to change (absorb a constraint, drop columns,
/// release); refused, as by `rows_block`, once released.
pub fn rows_block_mut<'a>(x: &'a mut Robj, arg: &str) -> Res<&'a mut RowsBlock> {
    let p: &mut ExternalPtr<RowsBlock> = x
        .try_into()
        .map_err(|_| NceError::invalid(arg, "must hold a block built by the package"))?;
    let b: &mut RowsBlock = p;
    if b.data.len() != b.nrow * b.ncol {
        return Err(NceError::invalid(arg, "holds a block that was released"));
    }
    Ok(b)
}

/// The columns of `matrix_blocks`, in order, and their common number of rows.
pub fn block_columns<'a>(blocks: &'a [Robj], arg: &str) -> Res<(Vec<&'a [f64]>, usize)> {
    let mut cols = Vec::new();
    let mut nrow = None;
    for b in blocks {
        let (data, n, p) = if b.is_external_pointer() {
            let rb = rows_block(b, arg)?;
            (rb.data.as_slice(), rb.nrow, rb.ncol)
        } else {
            real_matrix(b, arg)?
        };
        if *nrow.get_or_insert(n) != n {
            return Err(NceError::invalid(
                arg,
                format!("has blocks of {} and {n} rows", nrow.unwrap_or(n)),
            ));
        }
        cols.extend((0..p).map(|j| &data[j * n..(j + 1) * n]));
    }
    Ok((cols, nrow.unwrap_or(0)))
}

/// A double vector or NULL.
pub fn opt_real_slice<'a>(x: &'a Robj, arg: &str) -> Res<Option<&'a [f64]>> {
    if x.is_null() {
        Ok(None)
    } else {
        real_slice(x, arg).map(Some)
    }
}

/// 1-based indices (R) to 0-based, each in 1..=`max`.
pub fn zero_based(x: &Robj, arg: &str, max: usize) -> Res<Vec<usize>> {
    let v = int_slice(x, arg)?;
    if let Some(i) = v.iter().position(|&k| k < 1 || k as usize > max) {
        return Err(NceError::invalid(
            arg,
            format!("entry {} is {}, outside 1..{max}", i + 1, v[i]),
        ));
    }
    Ok(v.iter().map(|&k| k as usize - 1).collect())
}

/// A column-major d x d matrix from R.
pub fn square_matrix(x: &Robj, arg: &str, d: usize) -> Res<DMatrix<f64>> {
    let (v, nr, nc) = real_matrix(x, arg)?;
    if nr != d || nc != d {
        return Err(NceError::invalid(arg, format!("must be {d} x {d}, got {nr} x {nc}")));
    }
    Ok(DMatrix::from_column_slice(d, d, v))
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

pub fn respond(r: Res<Robj>) -> Robj {
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
pub fn guard(f: impl FnOnce() -> Res<Robj>) -> Robj {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => respond(r),
        Err(p) => respond(Err(NceError::Internal(panic_message(p.as_ref())))),
    }
}

/// The sessions behind the external pointers of `sessions`, each at most once (two entries for one
/// session would be two mutable borrows of it); `what` names them in the error.
pub fn distinct_sessions<T: 'static>(sessions: &List, what: &str) -> Res<Vec<ExternalPtr<T>>> {
    let bad = || NceError::invalid("sessions", format!("must be a list of distinct {what}"));
    let ptrs: Vec<ExternalPtr<T>> = sessions
        .values()
        .map(|s| s.try_into().map_err(|_| bad()))
        .collect::<Res<_>>()?;
    let mut addr: Vec<usize> = ptrs
        .iter()
        .map(|p| p.try_addr().map(|t| t as *const T as usize).map_err(|_| bad()))
        .collect::<Res<_>>()?;
    addr.sort_unstable();
    if addr.windows(2).any(|w| w[0] == w[1]) {
        return Err(bad());
    }
    Ok(ptrs)
}

/// A training slice's time: `seconds` within 0..60 (0 when not finite).
pub fn slice_budget(seconds: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(if seconds.is_finite() {
        seconds.clamp(0.0, 60.0)
    } else {
        0.0
    })
}

/// The message of an R condition an R callback returned as its value ("unknown error" without
/// one); None when the value is no condition.
pub fn returned_condition(out: &Robj) -> Option<String> {
    if !out.inherits("condition") {
        return None;
    }
    Some(
        out.dollar("message")
            .ok()
            .and_then(|m| m.as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown error".into()),
    )
}
