//! Binding of the LATKES chain simulator on a grid. No numerics here.

use crate::convert::{guard, int_slice, real_slice, seed_of, threads_of};
use crate::run;
use extendr_api::prelude::*;
use nce_core::sampling::latkes_sim::LatticeKernel;
use nce_core::NceError;

/// Simulate LATKES chains on a grid: `state` (log, nx * ny) and `offset` (log,
/// (2 nx - 1) * (2 ny - 1)) tables, `window` = (xmin, xmax, ymin, ymax), one start (x, y;
/// NaN to draw it) and one number of steps per chain. Returns list(x, y).
/// @keywords internal
/// @noRd
#[extendr]
#[allow(clippy::too_many_arguments)]
fn nce_latkes_simulate(
    state: Robj,
    offset: Robj,
    grid: Robj,
    window: Robj,
    start_x: Robj,
    start_y: Robj,
    steps: Robj,
    seed: f64,
    threads: i32,
) -> Robj {
    guard(|| {
        let g = int_slice(&grid, "grid")?;
        let w = real_slice(&window, "window")?;
        if g.len() != 2 || g.iter().any(|&v| v < 1) || w.len() != 4 {
            return Err(NceError::invalid(
                "grid",
                "grid must be two positive integers and window four numbers",
            ));
        }
        let k = LatticeKernel::new(
            g[0] as usize,
            g[1] as usize,
            [w[0], w[1], w[2], w[3]],
            real_slice(&state, "state")?,
            real_slice(&offset, "offset")?,
        )?;
        let sx = real_slice(&start_x, "start_x")?;
        let sy = real_slice(&start_y, "start_y")?;
        let st = int_slice(&steps, "steps")?;
        if sx.len() != st.len() || sy.len() != st.len() || st.iter().any(|&v| v < 0) {
            return Err(NceError::invalid(
                "steps",
                "needs one start and a non-negative number of steps per chain",
            ));
        }
        let seed = seed_of(seed)?;
        let starts: Vec<(f64, f64)> = sx.iter().zip(sy).map(|(&a, &b)| (a, b)).collect();
        let steps: Vec<usize> = st.iter().map(|&v| v as usize).collect();
        let (x, y) = run::run(threads_of(threads)?, |_| k.simulate(&starts, &steps, seed))?;
        Ok(list!(x = x, y = y).into_robj())
    })
}

extendr_module! {
    mod latkes;
    fn nce_latkes_simulate;
}
