//! Binding of the LATKES chain simulator on a grid. No numerics here.

use crate::convert::{guard, int_slice, list_count, list_get, list_number, real_slice, seed_of, Res};
use crate::run;
use extendr_api::prelude::*;
use nce_core::sampling::latkes_sim::LatticeKernel;
use nce_core::NceError;

/// Settings of `nce_latkes_simulate` from `settings = list(grid, window, seed, threads)`: the
/// grid's size (nx, ny) and its window (xmin, xmax, ymin, ymax).
struct LatkesSettings {
    grid: (usize, usize),
    window: [f64; 4],
    seed: u64,
    threads: usize,
}

fn latkes_settings(settings: &List) -> Res<LatkesSettings> {
    let arg = "settings";
    let grid = list_get(settings, "grid", arg)?;
    let window = list_get(settings, "window", arg)?;
    let g = int_slice(&grid, "grid")?;
    let w = real_slice(&window, "window")?;
    if g.len() != 2 || g.iter().any(|&v| v < 1) || w.len() != 4 {
        return Err(NceError::invalid(
            "grid",
            "grid must be two positive integers and window four numbers",
        ));
    }
    Ok(LatkesSettings {
        grid: (g[0] as usize, g[1] as usize),
        window: [w[0], w[1], w[2], w[3]],
        seed: seed_of(list_number(settings, "seed", arg)?)?,
        threads: list_count(settings, "threads", arg, 1)?,
    })
}

/// Simulate LATKES chains on a grid: `state` (log, nx * ny) and `offset` (log,
/// (2 nx - 1) * (2 ny - 1)) tables, `chains` = list(start_x, start_y, steps): one start (x, y;
/// NaN to draw it) and one number of steps per chain; `settings` as `latkes_settings` reads it.
/// Returns list(x, y).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_latkes_simulate(state: Robj, offset: Robj, chains: List, settings: List) -> Robj {
    guard(|| {
        let settings = latkes_settings(&settings)?;
        let k = LatticeKernel::new(
            settings.grid.0,
            settings.grid.1,
            settings.window,
            real_slice(&state, "state")?,
            real_slice(&offset, "offset")?,
        )?;
        let (start_x, start_y) = (
            list_get(&chains, "start_x", "chains")?,
            list_get(&chains, "start_y", "chains")?,
        );
        let steps = list_get(&chains, "steps", "chains")?;
        let sx = real_slice(&start_x, "start_x")?;
        let sy = real_slice(&start_y, "start_y")?;
        let st = int_slice(&steps, "steps")?;
        if sx.len() != st.len() || sy.len() != st.len() || st.iter().any(|&v| v < 0) {
            return Err(NceError::invalid(
                "steps",
                "needs one start and a non-negative number of steps per chain",
            ));
        }
        let seed = settings.seed;
        let starts: Vec<(f64, f64)> = sx.iter().zip(sy).map(|(&a, &b)| (a, b)).collect();
        let steps: Vec<usize> = st.iter().map(|&v| v as usize).collect();
        let (x, y) = run::run(settings.threads, |_| k.simulate(&starts, &steps, seed))?;
        Ok(list!(x = x, y = y).into_robj())
    })
}

extendr_module! {
    mod latkes;
    fn nce_latkes_simulate;
}
