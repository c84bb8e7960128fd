//! Knots of one-covariate cubic splines placed as mgcv places them, from the distinct covariate
//! values sorted once (R's `unique()`, `sort()` and `quantile()` would each copy all rows).

use crate::error::{NceError, Result};

/// The distinct values of `x`, increasing; NaN refused. Zero and negative zero count as one
/// value, as in R's `unique()`.
pub fn sorted_unique(x: &[f64]) -> Result<Vec<f64>> {
    if x.iter().any(|v| v.is_nan()) {
        return Err(NceError::invalid("x", "must not hold NA or NaN"));
    }
    let mut u = x.to_vec();
    u.sort_unstable_by(f64::total_cmp);
    u.dedup_by(|a, b| a == b);
    Ok(u)
}

/// R's `quantile(u, probs)` (type 7) of increasing values `u`, with R's operations in R's
/// order: index 1 + (n - 1) p, and (1 - h) x[lo] + h x[hi] where the two differ.
pub fn quantiles_type7(u: &[f64], probs: &[f64]) -> Result<Vec<f64>> {
    let n = u.len();
    if n == 0 {
        return Err(NceError::invalid("x", "must hold at least one value"));
    }
    probs
        .iter()
        .map(|&p| {
            if !(0.0..=1.0).contains(&p) {
                return Err(NceError::invalid("probs", "must lie in [0, 1]"));
            }
            let index = 1.0 + (n - 1) as f64 * p;
            let (lo, hi) = (index.floor(), index.ceil());
            let qs = u[lo as usize - 1];
            let xh = u[hi as usize - 1];
            if index > lo && xh != qs {
                let h = index - lo;
                Ok((1.0 - h) * qs + h * xh)
            } else {
                Ok(qs)
            }
        })
        .collect()
}

/// mgcv's `place.knots(x, nk)` on increasing distinct values `u`: `nk` knots evenly spread
/// through them, the ends at the extremes, interpolating between neighbours.
pub fn place_knots(u: &[f64], nk: usize) -> Result<Vec<f64>> {
    let n = u.len();
    if nk > n {
        return Err(NceError::invalid(
            "k",
            "more knots than unique data values is not allowed",
        ));
    }
    if nk < 2 {
        return Err(NceError::invalid("k", "too few knots"));
    }
    if nk == 2 {
        return Ok(vec![u[0], u[n - 1]]);
    }
    let delta = (n - 1) as f64 / (nk - 1) as f64;
    let mut knots = vec![0.0; nk];
    knots[0] = u[0];
    knots[nk - 1] = u[n - 1];
    for i in 1..nk - 1 {
        let di = delta * i as f64;
        let lbi = di.floor() + 1.0;
        let frac = di + 1.0 - lbi;
        let l = lbi as usize;
        knots[i] = u[l - 1] * (1.0 - frac) + u[l] * frac;
    }
    Ok(knots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_sorts_and_merges_signed_zeros() {
        let u = sorted_unique(&[3.0, -0.0, 1.0, 0.0, 3.0, -2.5]).unwrap();
        assert_eq!(u, vec![-2.5, 0.0, 1.0, 3.0]);
        assert!(sorted_unique(&[1.0, f64::NAN]).is_err());
    }

    #[test]
    fn quantiles_match_r() {
        // R: quantile(c(1, 2, 4, 8, 16), seq(0, 1, length = 4))
        let q = quantiles_type7(&[1.0, 2.0, 4.0, 8.0, 16.0], &[0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0]).unwrap();
        let want = [1.0, 2.0 + (4.0 - 2.0) / 3.0, 4.0 + 2.0 * (8.0 - 4.0) / 3.0, 16.0];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-14, "{a} {b}");
        }
    }

    #[test]
    fn place_knots_matches_mgcv() {
        // mgcv::place.knots(1:10, 4): 1, 4, 7, 10
        let u: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(place_knots(&u, 4).unwrap(), vec![1.0, 4.0, 7.0, 10.0]);
        // mgcv::place.knots(1:10, 3): 1, 5.5, 10
        assert_eq!(place_knots(&u, 3).unwrap(), vec![1.0, 5.5, 10.0]);
        assert!(place_knots(&u, 11).is_err());
    }
}
