//! Binding of the LATKES chain simulator on a grid. No numerics here.

use crate::convert::{
    col_major_matrix, guard, int_slice, list_count, list_get, list_number, real_matrix, real_slice, seed_of,
    zero_based, Res,
};
use crate::run;
use extendr_api::prelude::*;
use nce_core::latkes::quadrature::{log_normalisers, Feature, MapFeature, Rule, TermTables, Transition};
use nce_core::sampling::latkes_sim::LatticeKernel;
use nce_core::spatial::Map;
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

/// Settings of `nce_latkes_normaliser` from `settings = list(window, grid, refine, centre,
/// ncoef, gradient, threads)`.
struct NormaliserSettings {
    rule: Rule,
    ncoef: usize,
    gradient: bool,
    threads: usize,
}

fn normaliser_settings(settings: &List) -> Res<NormaliserSettings> {
    let arg = "settings";
    let (window, grid, centre) = (
        list_get(settings, "window", arg)?,
        list_get(settings, "grid", arg)?,
        list_get(settings, "centre", arg)?,
    );
    let w = real_slice(&window, "window")?;
    let g = int_slice(&grid, "grid")?;
    let c = real_slice(&centre, "centre")?;
    if w.len() != 4 || g.len() != 2 || g.iter().any(|&v| v < 1) || c.len() != 2 {
        return Err(NceError::invalid(
            "grid",
            "grid must be two positive integers, window four numbers and centre two",
        ));
    }
    Ok(NormaliserSettings {
        rule: Rule {
            window: [w[0], w[1], w[2], w[3]],
            grid: (g[0] as usize, g[1] as usize),
            refine: list_count(settings, "refine", arg, 0)?,
            centre: (c[0], c[1]),
        },
        ncoef: list_count(settings, "ncoef", arg, 0)?,
        gradient: list_get(settings, "gradient", arg)?.as_bool().unwrap_or(false),
        threads: list_count(settings, "threads", arg, 1)?,
    })
}

/// One term's tables from list(feature, map, lo, step, n, values, basis, cols): `feature` 1-7
/// for x, y, radius, dist, angle, rel_angle, map (then `map` says which map feature, from 1).
fn term_tables(t: &Robj, k: usize) -> Res<TermTables> {
    let arg = format!("terms[[{}]]", k + 1);
    let l: List = t.try_into().map_err(|_| NceError::invalid(&arg, "must be a list"))?;
    let code = list_count(&l, "feature", &arg, 1)?;
    let feature = match code {
        1 => Feature::X,
        2 => Feature::Y,
        3 => Feature::Radius,
        4 => Feature::Dist,
        5 => Feature::Angle,
        6 => Feature::RelAngle,
        7 => Feature::Map(list_count(&l, "map", &arg, 1)? - 1),
        _ => return Err(NceError::invalid(&arg, format!("has an unknown feature code {code}"))),
    };
    let values = list_get(&l, "values", &arg)?;
    let basis = list_get(&l, "basis", &arg)?;
    let cols = list_get(&l, "cols", &arg)?;
    Ok(TermTables::new(
        feature,
        list_number(&l, "lo", &arg)?,
        list_number(&l, "step", &arg)?,
        list_count(&l, "n", &arg, 2)?,
        real_slice(&values, &arg)?.to_vec(),
        if basis.is_null() {
            None
        } else {
            Some(real_slice(&basis, &arg)?.to_vec())
        },
        zero_based(&cols, &arg, i32::MAX as usize)?,
    ))
}

/// Columns of an integer matrix of `nrow` rows (column-major), 0-based.
fn index_rows(m: &Robj, nrow: usize, arg: &str) -> Res<Vec<Vec<usize>>> {
    if m.is_null() {
        return Ok(vec![Vec::new(); nrow]);
    }
    // the core checks each index against its tables and maps
    let v = zero_based(m, arg, i32::MAX as usize)?;
    if nrow == 0 || v.len() % nrow != 0 {
        return Err(NceError::invalid(arg, format!("must have {nrow} rows")));
    }
    let nc = v.len() / nrow;
    Ok((0..nrow).map(|i| (0..nc).map(|j| v[j * nrow + i]).collect()).collect())
}

/// Log normalisers of LATKES transitions on a window grid (nce_core::quadrature): `terms` a
/// list of term tables (see `term_tables`), `maps` a list (one per map feature) of lists of
/// double matrices, `transitions` = list(px, py, angle_prev (NA: no turn), map, table) with
/// `map` and `table` integer matrices (one row per transition, 1-based). Returns list(log_z,
/// mean_x) (mean_x NULL without `gradient`).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_latkes_normaliser(terms: List, maps: List, transitions: List, settings: List) -> Robj {
    guard(|| {
        let settings = normaliser_settings(&settings)?;
        let terms = terms
            .values()
            .enumerate()
            .map(|(k, t)| term_tables(&t, k))
            .collect::<Res<Vec<_>>>()?;
        let map_robjs: Vec<Vec<Robj>> = maps
            .values()
            .map(|m| List::try_from(m).map(|l| l.values().collect()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| NceError::invalid("maps", "must be a list of lists of matrices"))?;
        let mut features = Vec::with_capacity(map_robjs.len());
        for (k, ms) in map_robjs.iter().enumerate() {
            let mut views = Vec::with_capacity(ms.len());
            for (j, m) in ms.iter().enumerate() {
                let arg = format!("maps[[{}]][[{}]]", k + 1, j + 1);
                let (v, nr, nc) = real_matrix(m, &arg)?;
                views.push(Map::new(v, nr, nc, &arg)?);
            }
            features.push(MapFeature { maps: views });
        }
        let arg = "transitions";
        let (px, py, ap) = (
            list_get(&transitions, "px", arg)?,
            list_get(&transitions, "py", arg)?,
            list_get(&transitions, "angle_prev", arg)?,
        );
        let (px, py, ap) = (
            real_slice(&px, "px")?,
            real_slice(&py, "py")?,
            real_slice(&ap, "angle_prev")?,
        );
        if py.len() != px.len() || ap.len() != px.len() {
            return Err(NceError::invalid(
                arg,
                "px, py and angle_prev must have the same length",
            ));
        }
        let map = index_rows(&list_get(&transitions, "map", arg)?, px.len(), "map")?;
        let table = index_rows(&list_get(&transitions, "table", arg)?, px.len(), "table")?;
        let trans: Vec<Transition> = (0..px.len())
            .map(|i| Transition {
                prev: (px[i], py[i]),
                angle_prev: if ap[i].is_nan() { None } else { Some(ap[i]) },
                map: map[i].clone(),
                table: table[i].clone(),
            })
            .collect();
        let out = run::run(settings.threads, |stop| {
            log_normalisers(
                &settings.rule,
                &features,
                &terms,
                &trans,
                settings.ncoef,
                settings.gradient,
                stop,
            )
        })?;
        let mean_x = match out.mean_x {
            // row-major (transition by coefficient) to R's column-major matrix
            Some(m) => {
                let (n, p) = (trans.len(), settings.ncoef);
                let cm: Vec<f64> = (0..p)
                    .flat_map(|j| (0..n).map(move |i| (i, j)))
                    .map(|(i, j)| m[i * p + j])
                    .collect();
                col_major_matrix(cm, n, p)
            }
            None => ().into_robj(),
        };
        Ok(list!(log_z = out.log_z, mean_x = mean_x).into_robj())
    })
}

extendr_module! {
    mod latkes;
    fn nce_latkes_simulate;
    fn nce_latkes_normaliser;
}
