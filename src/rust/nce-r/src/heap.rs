//! R's vector heap: grown once before a large fit instead of step by step.

use extendr_api::prelude::*;

extern "C" {
    /// Defined in entrypoint.c: allocVector(REALSXP, n) under R_tryCatchError inside
    /// R_ToplevelExec, dropped at once.
    fn nce_reserve_heap(n: f64) -> std::os::raw::c_int;
}

/// Grows R's vector heap to hold `bytes` more: R grows it only after a full collection, so a fit
/// that allocates it piece by piece runs several full collections where one suffices. 1 when R
/// could allocate that much (nothing is written), 0 when not, -1 when a user interrupt fired
/// inside (the caller raises it again).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_heap_reserve(bytes: f64) -> i32 {
    if !(bytes >= 8.0) || !bytes.is_finite() {
        return 0;
    }
    // Safety: called on the R main thread from .Call; R's errors are caught in C.
    unsafe { nce_reserve_heap((bytes / 8.0).floor()) }
}

extendr_module! {
    mod heap;
    fn nce_heap_reserve;
}
