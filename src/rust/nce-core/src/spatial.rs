//! Spatial covariates for LATKES: values of maps (images, matrices) over a rectangular
//! window, looked up at points by bilinear interpolation between cell centres.
//!
//! Convention: a map of `nrow` x `ncol` values cuts the window [xmin, xmax] x [ymin, ymax]
//! into equal cells; value (i, j) (0-based) sits at the centre of the cell whose x runs over
//! column j from xmin and whose y runs over row i from ymin (row 0 at ymin: the screen/image
//! convention when y grows downwards). Between centres the value is bilinear; in the half
//! cell at the edges (and beyond the window) it is constant along the clamped axis.

use crate::{NceError, Result};

/// One map: `values` in column-major order (R's matrix layout), `nrow` x `ncol`.
#[derive(Clone, Copy, Debug)]
pub struct Map<'a> {
    pub values: &'a [f64],
    pub nrow: usize,
    pub ncol: usize,
}

impl<'a> Map<'a> {
    /// Checks the shape and that every value is finite; `arg` names the map in errors.
    pub fn new(values: &'a [f64], nrow: usize, ncol: usize, arg: &str) -> Result<Self> {
        if nrow == 0 || ncol == 0 {
            return Err(NceError::invalid(arg, "must have at least one row and one column"));
        }
        if values.len() != nrow * ncol {
            return Err(NceError::invalid(
                arg,
                format!("has {} values for {} x {} cells", values.len(), nrow, ncol),
            ));
        }
        if let Some(k) = values.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                arg,
                format!(
                    "has a missing or non-finite value at row {}, column {}",
                    k % nrow + 1,
                    k / nrow + 1
                ),
            ));
        }
        Ok(Map { values, nrow, ncol })
    }

    #[inline]
    fn at(&self, i: usize, j: usize) -> f64 {
        self.values[j * self.nrow + i]
    }

    /// Bilinear value at (x, y) on `window` = [xmin, xmax, ymin, ymax] (assumed valid).
    #[inline]
    pub fn at_point(&self, x: f64, y: f64, window: [f64; 4]) -> f64 {
        let [x0, x1, y0, y1] = window;
        let (j0, j1, tx) = axis((x - x0) / (x1 - x0), self.ncol);
        let (i0, i1, ty) = axis((y - y0) / (y1 - y0), self.nrow);
        (1.0 - ty) * ((1.0 - tx) * self.at(i0, j0) + tx * self.at(i0, j1))
            + ty * ((1.0 - tx) * self.at(i1, j0) + tx * self.at(i1, j1))
    }
}

/// Lower cell index and weight of the upper one along an axis of `n` cells, for a point at
/// fraction `f` of the window's extent.
#[inline]
fn axis(f: f64, n: usize) -> (usize, usize, f64) {
    if n == 1 {
        return (0, 0, 0.0);
    }
    let u = (f * n as f64 - 0.5).clamp(0.0, (n - 1) as f64);
    let lo = (u.floor() as usize).min(n - 2);
    (lo, lo + 1, u - lo as f64)
}

/// Value of `maps[which[k]]` at (x[k], y[k]) for each point k; `window` is
/// [xmin, xmax, ymin, ymax].
pub fn bilinear(maps: &[Map], which: &[usize], x: &[f64], y: &[f64], window: [f64; 4]) -> Result<Vec<f64>> {
    let [x0, x1, y0, y1] = window;
    if !window.iter().all(|v| v.is_finite()) || x0 >= x1 || y0 >= y1 {
        return Err(NceError::invalid(
            "window",
            "must be finite with xmin < xmax and ymin < ymax",
        ));
    }
    if which.len() != x.len() || y.len() != x.len() {
        return Err(NceError::invalid(
            "which",
            format!(
                "`which`, `x` and `y` must have the same length, got {}, {} and {}",
                which.len(),
                x.len(),
                y.len()
            ),
        ));
    }
    if let Some(k) = which.iter().position(|&m| m >= maps.len()) {
        return Err(NceError::invalid(
            "which",
            format!("point {} asks for map {} of {}", k + 1, which[k] + 1, maps.len()),
        ));
    }
    if let Some(k) = (0..x.len()).find(|&k| !x[k].is_finite() || !y[k].is_finite()) {
        return Err(NceError::invalid(
            "x",
            format!("point {} has a missing or non-finite coordinate", k + 1),
        ));
    }
    Ok((0..x.len())
        .map(|k| maps[which[k]].at_point(x[k], y[k], window))
        .collect())
}

/// Length and direction of the saccades from (x0, y0) to (x1, y1), with R's operations in
/// R's order (`sqrt(dx^2 + dy^2)`, `atan2(dy, dx)`), so the features equal those computed in
/// R: the direction lies in (-pi, pi] (atan2's -pi is pi) and a saccade of length zero has
/// direction 0. Returns (dist, angle).
pub fn saccades(x1: &[f64], y1: &[f64], x0: &[f64], y0: &[f64]) -> Result<(Vec<f64>, Vec<f64>)> {
    let n = x1.len();
    if y1.len() != n || x0.len() != n || y0.len() != n {
        return Err(NceError::invalid("x", "the four coordinates must have the same length"));
    }
    let mut dist = vec![0.0; n];
    let mut angle = vec![0.0; n];
    for i in 0..n {
        let dx = x1[i] - x0[i];
        let dy = y1[i] - y0[i];
        dist[i] = (dx * dx + dy * dy).sqrt();
        let a = dy.atan2(dx);
        angle[i] = if dx == 0.0 && dy == 0.0 {
            0.0
        } else if a == -std::f64::consts::PI {
            std::f64::consts::PI
        } else {
            a
        };
    }
    Ok((dist, angle))
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: [f64; 4] = [0.0, 40.0, 0.0, 30.0];

    // Cell centres of a 3 x 4 map on W: x = 5, 15, 25, 35; y = 5, 15, 25.
    fn ramp(a: f64, b: f64, c: f64) -> Vec<f64> {
        let mut v = Vec::new();
        for j in 0..4 {
            for i in 0..3 {
                v.push(a + b * (5.0 + 10.0 * j as f64) + c * (5.0 + 10.0 * i as f64));
            }
        }
        v
    }

    #[test]
    fn linear_ramp_is_exact_between_centres_and_flat_beyond() {
        let v = ramp(1.0, 0.3, -0.7);
        let m = Map::new(&v, 3, 4, "m").unwrap();
        let xs = [5.0, 12.3, 34.9, 20.0, 0.0, 40.0, 2.0];
        let ys = [5.0, 24.1, 6.0, 15.0, 10.0, 0.0, 30.0];
        let got = bilinear(&[m], &[0; 7], &xs, &ys, W).unwrap();
        for k in 0..7 {
            let (cx, cy) = (xs[k].clamp(5.0, 35.0), ys[k].clamp(5.0, 25.0));
            let want = 1.0 + 0.3 * cx - 0.7 * cy;
            assert!((got[k] - want).abs() < 1e-12, "point {k}: {} vs {want}", got[k]);
        }
    }

    #[test]
    fn known_small_matrix_and_map_choice() {
        // 2 x 2 map, column-major [[1, 2], [3, 4]] = rows (1, 3) and (2, 4); centres x = 10, 30, y = 7.5, 22.5.
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [10.0];
        let maps = [Map::new(&a, 2, 2, "a").unwrap(), Map::new(&b, 1, 1, "b").unwrap()];
        let got = bilinear(
            &maps,
            &[0, 0, 0, 1, 0],
            &[20.0, 10.0, 30.0, 3.0, 15.0],
            &[15.0, 7.5, 22.5, 29.0, 7.5],
            W,
        )
        .unwrap();
        assert_eq!(got, vec![2.5, 1.0, 4.0, 10.0, 1.5]);
    }

    #[test]
    fn saccades_follow_r_conventions() {
        let (d, a) = saccades(
            &[3.0, 1.0, -1.0, 2.0],
            &[4.0, 1.0, -0.0, 2.0],
            &[0.0, 1.0, 0.0, 2.0],
            &[0.0, 1.0, 0.0, 3.0],
        )
        .unwrap();
        assert_eq!(d, vec![5.0, 0.0, 1.0, 1.0]);
        assert_eq!(a[0], 4.0f64.atan2(3.0));
        assert_eq!(a[1], 0.0);
        assert_eq!(a[2], std::f64::consts::PI);
        assert_eq!(a[3], -std::f64::consts::FRAC_PI_2);
        assert!(saccades(&[1.0], &[], &[1.0], &[1.0]).is_err());
    }

    #[test]
    fn bad_input_is_an_error() {
        let v = [1.0, f64::NAN];
        assert!(Map::new(&v, 1, 2, "m").is_err());
        assert!(Map::new(&v, 1, 3, "m").is_err());
        let ok = [1.0, 2.0];
        let m = Map::new(&ok, 1, 2, "m").unwrap();
        assert!(bilinear(&[m], &[1], &[1.0], &[1.0], W).is_err());
        assert!(bilinear(&[m], &[0], &[f64::NAN], &[1.0], W).is_err());
        assert!(bilinear(&[m], &[0], &[1.0], &[1.0], [0.0, 0.0, 0.0, 1.0]).is_err());
        assert!(bilinear(&[m], &[0, 0], &[1.0], &[1.0], W).is_err());
    }
}
