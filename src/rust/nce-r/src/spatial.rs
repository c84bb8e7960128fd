//! Binding of nce_core::spatial: map values at points by bilinear interpolation. No numerics here.

use crate::convert::{guard, int_slice, real_matrix, real_slice};
use extendr_api::prelude::*;
use nce_core::spatial::{bilinear, saccades, Map};
use nce_core::NceError;

/// Values of `maps` (a list of double matrices) at the points (x, y): point k reads map
/// which[k] (1-based). `window` is c(xmin, xmax, ymin, ymax).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_bilinear(maps: List, which: Robj, x: Robj, y: Robj, window: Robj) -> Robj {
    guard(|| {
        let robjs: Vec<Robj> = maps.values().collect();
        let mut views = Vec::with_capacity(robjs.len());
        for (k, m) in robjs.iter().enumerate() {
            let arg = format!("maps[[{}]]", k + 1);
            let (v, nr, nc) = real_matrix(m, &arg)?;
            views.push(Map::new(v, nr, nc, &arg)?);
        }
        let which = int_slice(&which, "which")?
            .iter()
            .map(|&w| {
                if w >= 1 {
                    Ok((w - 1) as usize)
                } else {
                    Err(NceError::invalid("which", "must hold map numbers from 1"))
                }
            })
            .collect::<std::result::Result<Vec<usize>, NceError>>()?;
        let w = real_slice(&window, "window")?;
        if w.len() != 4 {
            return Err(NceError::invalid("window", "must be c(xmin, xmax, ymin, ymax)"));
        }
        let v = bilinear(
            &views,
            &which,
            real_slice(&x, "x")?,
            real_slice(&y, "y")?,
            [w[0], w[1], w[2], w[3]],
        )?;
        Ok(v.into_robj())
    })
}

/// Length and direction of the saccades from (x0, y0) to (x1, y1): list(dist, angle), the
/// angle in (-pi, pi] and 0 for a saccade of length zero.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_saccades(x1: Robj, y1: Robj, x0: Robj, y0: Robj) -> Robj {
    guard(|| {
        let (dist, angle) = saccades(
            real_slice(&x1, "x1")?,
            real_slice(&y1, "y1")?,
            real_slice(&x0, "x0")?,
            real_slice(&y0, "y0")?,
        )?;
        Ok(list!(dist = dist, angle = angle).into_robj())
    })
}

extendr_module! {
    mod spatial;
    fn nce_bilinear;
    fn nce_saccades;
}
