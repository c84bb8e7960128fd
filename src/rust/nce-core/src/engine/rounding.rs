//! Covariates rounded to equally spaced grids for discretised smooths (mgcv's device for
//! large data): each row's cell code, the distinct codes present, how often each occurs and
//! each row's distinct row. One pass over the rows, where R's vector arithmetic made about
//! eight copies of every covariate.

use crate::error::{NceError, Result};

/// Covariates rounded to grids of `m` values over their ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct Rounded {
    /// Each covariate's grid: R's `seq(lo, hi, length.out = m)` (one value when lo = hi).
    pub grids: Vec<Vec<f64>>,
    /// The cell codes present, increasing (1-based, the first covariate varying slowest).
    pub present: Vec<f64>,
    /// How many rows fall in each present cell.
    pub counts: Vec<usize>,
    /// Each row's cell among `present` (0-based).
    pub index: Vec<usize>,
}

/// Dense counting up to this many cells; beyond, the codes are sorted.
const DENSE_CELLS: f64 = 1e7;

/// Rounds the columns `cols` (same length) to grids of `m` values as R computes it: grid step
/// `(lo + (hi - lo) / (m - 1)) - lo`, cell `round((x - lo) / step) + 1` (ties to even, as R's
/// `round()`), code `(code - 1) * len + cell`. None where a value is not finite or the codes
/// would pass 2^52 (the caller keeps the exact basis).
pub fn round_to_grids(cols: &[&[f64]], m: usize) -> Result<Option<Rounded>> {
    let n = cols.first().map_or(0, |c| c.len());
    if n == 0 || m < 2 || cols.iter().any(|c| c.len() != n) {
        return Err(NceError::invalid(
            "x",
            "must be columns of one positive length, with m >= 2",
        ));
    }
    if cols.iter().any(|c| c.iter().any(|v| !v.is_finite())) {
        return Ok(None);
    }
    let mut code = vec![1.0f64; n];
    let mut grids = Vec::with_capacity(cols.len());
    let mut ncode = 1.0f64;
    for col in cols {
        let lo = col.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = col.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let grid: Vec<f64> = if hi > lo {
            // R's seq.default(lo, hi, length.out = m): c(from, from + (1:(m - 2)) * by, to).
            let n1 = (m - 1) as f64;
            let by = (hi - lo) / n1;
            let mut g = Vec::with_capacity(m);
            g.push(lo);
            g.extend((1..m - 1).map(|i| lo + i as f64 * by));
            g.push(hi);
            g
        } else {
            vec![lo]
        };
        let len = grid.len() as f64;
        if grid.len() > 1 {
            let step = grid[1] - grid[0];
            for (c, &x) in code.iter_mut().zip(col.iter()) {
                let k = ((x - lo) / step).round_ties_even() + 1.0;
                *c = (*c - 1.0) * len + k;
            }
        } else {
            for c in code.iter_mut() {
                *c = (*c - 1.0) * len + 1.0;
            }
        }
        ncode *= len;
        grids.push(grid);
    }
    if ncode > 4_503_599_627_370_496.0 {
        return Ok(None);
    }
    let (present, counts, index) = if ncode <= DENSE_CELLS {
        let mut tab = vec![0usize; ncode as usize];
        for &c in &code {
            tab[c as usize - 1] += 1;
        }
        let mut lut = vec![usize::MAX; tab.len()];
        let mut present = Vec::new();
        let mut counts = Vec::new();
        for (i, &t) in tab.iter().enumerate() {
            if t > 0 {
                lut[i] = present.len();
                present.push((i + 1) as f64);
                counts.push(t);
            }
        }
        let index = code.iter().map(|&c| lut[c as usize - 1]).collect();
        (present, counts, index)
    } else {
        let mut present = code.clone();
        present.sort_unstable_by(f64::total_cmp);
        present.dedup();
        let mut counts = vec![0usize; present.len()];
        let index: Vec<usize> = code
            .iter()
            .map(|c| {
                let j = present.partition_point(|p| p < c);
                counts[j] += 1;
                j
            })
            .collect();
        (present, counts, index)
    };
    Ok(Some(Rounded {
        grids,
        present,
        counts,
        index,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_codes_and_counts_as_r_does() {
        // x on [0, 1] with grid 0, 0.5, 1; y constant.
        let x = [0.0, 0.24, 0.25, 0.26, 0.75, 1.0];
        let y = [2.0; 6];
        let r = round_to_grids(&[&x, &y], 3).unwrap().unwrap();
        assert_eq!(r.grids, vec![vec![0.0, 0.5, 1.0], vec![2.0]]);
        // 0.25 / 0.5 = 0.5 rounds to even (0); 0.75 / 0.5 = 1.5 rounds to 2.
        assert_eq!(r.present, vec![1.0, 2.0, 3.0]);
        assert_eq!(r.counts, vec![3, 1, 2]);
        assert_eq!(r.index, vec![0, 0, 0, 1, 2, 2]);
        assert!(round_to_grids(&[&[1.0, f64::NAN]], 3).unwrap().is_none());
        assert!(round_to_grids(&[&x, &[1.0]], 3).is_err());
    }

    #[test]
    fn sorted_codes_agree_with_dense_counting() {
        let x: Vec<f64> = (0..500).map(|i| ((i * 37) % 101) as f64 / 7.0).collect();
        let y: Vec<f64> = (0..500).map(|i| ((i * 53) % 97) as f64).collect();
        let dense = round_to_grids(&[&x, &y], 20).unwrap().unwrap();
        // Five covariates of 25 values: 9.8 million cells, counted densely; six pass 1e7.
        let z: Vec<&[f64]> = vec![&x, &y, &x, &y, &x, &y];
        let sorted = round_to_grids(&z, 25).unwrap().unwrap();
        assert!(sorted.present.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sorted.counts.iter().sum::<usize>(), 500);
        for (i, &j) in sorted.index.iter().enumerate() {
            assert!(sorted.present[j] >= 1.0 && j < sorted.present.len(), "row {i}");
        }
        assert_eq!(dense.counts.iter().sum::<usize>(), 500);
    }
}
