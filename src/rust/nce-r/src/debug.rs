//! Entry points for tests of the error protocol (errors and panics on either side of the pool).

use crate::convert::guard;
use crate::run;
use extendr_api::prelude::*;
use nce_core::NceError;

/// For tests of the error path: returns an error carrying `msg`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_debug_error(msg: &str) -> Robj {
    guard(|| Err(NceError::invalid("msg", msg.to_string())))
}

/// For tests of the panic path: panics on the main thread or, with `worker`, inside the pool.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_debug_panic(msg: &str, worker: bool) -> Robj {
    guard(|| {
        if worker {
            let m = msg.to_string();
            run::run(2, move |_| -> Result<(), NceError> { panic!("{}", m) })?;
            Ok(().into())
        } else {
            panic!("{}", msg)
        }
    })
}

extendr_module! {
    mod debug;
    fn nce_debug_error;
    fn nce_debug_panic;
}
