//! Simulation of LATKES chains on a grid of cells over a rectangular window.
//!
//! The log kernel is split into a state part s(cell), tabulated at the cell centres, and an
//! offset part g(cell - previous cell), tabulated on the lattice of centre-to-centre offsets.
//! A step draws a cell with probability proportional to exp{s(c) + g(c - p)}, p the cell of
//! the previous fixation, then a position uniform within that cell. The chain is therefore
//! exact for the kernel discretised at the grid's resolution. Each chain has its own seeded
//! stream, so results do not depend on the number of threads.

use crate::alloc::{overflow, try_with_capacity};
use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use rand::Rng;
use rayon::prelude::*;

#[derive(Debug, Clone)]
pub struct LatticeKernel {
    nx: usize,
    ny: usize,
    window: [f64; 4],
    /// exp(state - max), nx * ny, x fastest.
    state: Vec<f64>,
    /// exp(offset - max), (2 nx - 1) * (2 ny - 1), x offset fastest, offset (0, 0) at (nx - 1, ny - 1).
    offset: Vec<f64>,
}

fn scaled_exp(v: &[f64], what: &str) -> Result<Vec<f64>> {
    if let Some(i) = v.iter().position(|a| a.is_nan() || *a == f64::INFINITY) {
        return Err(NceError::invalid(
            what,
            format!("entry {} is {} (NaN and +Inf are not allowed)", i + 1, v[i]),
        ));
    }
    let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return Err(NceError::invalid(what, "is -Inf everywhere"));
    }
    Ok(v.iter().map(|a| (a - m).exp()).collect())
}

impl LatticeKernel {
    /// `window` = (xmin, xmax, ymin, ymax); `state` and `offset` are log values.
    pub fn new(nx: usize, ny: usize, window: [f64; 4], state: &[f64], offset: &[f64]) -> Result<Self> {
        if nx == 0 || ny == 0 {
            return Err(NceError::invalid("grid", "needs at least one cell per axis"));
        }
        if !(window.iter().all(|v| v.is_finite()) && window[0] < window[1] && window[2] < window[3]) {
            return Err(NceError::invalid(
                "window",
                "must be finite with xmin < xmax and ymin < ymax",
            ));
        }
        if state.len() != nx * ny {
            return Err(NceError::invalid(
                "state",
                format!("must have nx * ny = {} entries", nx * ny),
            ));
        }
        let no = (2 * nx - 1) * (2 * ny - 1);
        if offset.len() != no {
            return Err(NceError::invalid(
                "offset",
                format!("must have (2 nx - 1) * (2 ny - 1) = {no} entries"),
            ));
        }
        Ok(LatticeKernel {
            nx,
            ny,
            window,
            state: scaled_exp(state, "state")?,
            offset: scaled_exp(offset, "offset")?,
        })
    }

    fn cell_size(&self) -> (f64, f64) {
        (
            (self.window[1] - self.window[0]) / self.nx as f64,
            (self.window[3] - self.window[2]) / self.ny as f64,
        )
    }

    /// Cell (ix, iy) of a position; positions on or beyond the edges go to the border cells.
    fn cell_of(&self, x: f64, y: f64) -> (usize, usize) {
        let (cw, ch) = self.cell_size();
        let ix = ((x - self.window[0]) / cw).floor().clamp(0.0, (self.nx - 1) as f64) as usize;
        let iy = ((y - self.window[2]) / ch).floor().clamp(0.0, (self.ny - 1) as f64) as usize;
        (ix, iy)
    }

    /// Draw a cell from weights w (nx * ny, x fastest) with row sums `rows`.
    fn pick<R: Rng>(&self, rng: &mut R, w: &[f64], rows: &[f64]) -> Result<(usize, usize)> {
        let total: f64 = rows.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return Err(NceError::invalid(
                "kernel",
                "the kernel's weights vanish or overflow on the grid",
            ));
        }
        let mut u = rng.gen::<f64>() * total;
        let mut iy = self.ny - 1;
        for (j, &r) in rows.iter().enumerate() {
            if u < r {
                iy = j;
                break;
            }
            u -= r;
        }
        let row = &w[iy * self.nx..(iy + 1) * self.nx];
        let mut ix = self.nx - 1;
        for (i, &v) in row.iter().enumerate() {
            if u < v {
                ix = i;
                break;
            }
            u -= v;
        }
        // Round-off can leave u past the last positive weight: step back to one.
        while row[ix] == 0.0 && ix > 0 {
            ix -= 1;
        }
        Ok((ix, iy))
    }

    fn position<R: Rng>(&self, rng: &mut R, (ix, iy): (usize, usize)) -> (f64, f64) {
        let (cw, ch) = self.cell_size();
        let (u, v): (f64, f64) = (rng.gen(), rng.gen());
        (
            self.window[0] + (ix as f64 + u) * cw,
            self.window[2] + (iy as f64 + v) * ch,
        )
    }

    /// One chain: its start (drawn from the state part alone when not finite), then `steps`
    /// transitions. Returns x then y, `steps + 1` values each.
    fn chain(&self, start: (f64, f64), steps: usize, seed: u64, stream: u64) -> Result<(Vec<f64>, Vec<f64>)> {
        let mut rng = stream_rng(seed, stream);
        let (nx, ny) = (self.nx, self.ny);
        let mut w = vec![0.0; nx * ny];
        let mut rows = vec![0.0; ny];
        let len = steps.checked_add(1).ok_or_else(|| overflow("a chain"))?;
        let (mut xs, mut ys) = (try_with_capacity(len, "a chain")?, try_with_capacity(len, "a chain")?);
        let mut cur = if start.0.is_finite() && start.1.is_finite() {
            start
        } else {
            for iy in 0..ny {
                rows[iy] = self.state[iy * nx..(iy + 1) * nx].iter().sum();
            }
            let c = self.pick(&mut rng, &self.state, &rows)?;
            self.position(&mut rng, c)
        };
        xs.push(cur.0);
        ys.push(cur.1);
        let stride = 2 * nx - 1;
        for _ in 0..steps {
            let (px, py) = self.cell_of(cur.0, cur.1);
            for iy in 0..ny {
                let o = (iy + ny - 1 - py) * stride + (nx - 1 - px);
                let s = &self.state[iy * nx..(iy + 1) * nx];
                let g = &self.offset[o..o + nx];
                let out = &mut w[iy * nx..(iy + 1) * nx];
                let mut sum = 0.0;
                for i in 0..nx {
                    out[i] = s[i] * g[i];
                    sum += out[i];
                }
                rows[iy] = sum;
            }
            let c = self.pick(&mut rng, &w, &rows)?;
            cur = self.position(&mut rng, c);
            xs.push(cur.0);
            ys.push(cur.1);
        }
        Ok((xs, ys))
    }

    /// Chains in parallel, chain k on stream k. `starts` holds (x, y) per chain (NaN: draw
    /// from the state part); `steps` the transitions per chain. Returns x and y of all
    /// chains concatenated, each chain's start first.
    pub fn simulate(&self, starts: &[(f64, f64)], steps: &[usize], seed: u64) -> Result<(Vec<f64>, Vec<f64>)> {
        if starts.len() != steps.len() {
            return Err(NceError::invalid("starts", "needs one start per chain"));
        }
        let total = steps
            .iter()
            .try_fold(0usize, |acc, s| acc.checked_add(s.checked_add(1)?));
        let total = total.ok_or_else(|| overflow("the chains"))?;
        // Both results reserved before any chain runs: an impossible size fails at once.
        let (mut x, mut y) = (
            try_with_capacity(total, "the chains")?,
            try_with_capacity(total, "the chains")?,
        );
        let chains: Vec<Result<(Vec<f64>, Vec<f64>)>> = (0..steps.len())
            .into_par_iter()
            .map(|k| self.chain(starts[k], steps[k], seed, k as u64))
            .collect();
        for c in chains {
            let (cx, cy) = c?;
            x.extend(cx);
            y.extend(cy);
        }
        Ok((x, y))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;

    fn flat(nx: usize, ny: usize) -> LatticeKernel {
        LatticeKernel::new(
            nx,
            ny,
            [0.0, 4.0, 0.0, 2.0],
            &vec![0.0; nx * ny],
            &vec![0.0; (2 * nx - 1) * (2 * ny - 1)],
        )
        .unwrap()
    }

    #[test]
    fn thread_invariant_and_in_window() {
        let k = flat(8, 4);
        let starts = vec![(f64::NAN, f64::NAN); 5];
        let steps = vec![300; 5];
        let a = with_threads(1, || k.simulate(&starts, &steps, 9)).unwrap().unwrap();
        let b = with_threads(2, || k.simulate(&starts, &steps, 9)).unwrap().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.0.len(), 5 * 301);
        assert!(a.0.iter().all(|&v| (0.0..=4.0).contains(&v)) && a.1.iter().all(|&v| (0.0..=2.0).contains(&v)));
    }

    #[test]
    fn flat_kernel_is_uniform() {
        let k = flat(4, 2);
        let (x, y) = k.simulate(&[(1.0, 1.0)], &[100_000], 3).unwrap();
        let mx = x.iter().sum::<f64>() / x.len() as f64;
        let my = y.iter().sum::<f64>() / y.len() as f64;
        assert!((mx - 2.0).abs() < 0.02 && (my - 1.0).abs() < 0.01, "{mx} {my}");
        assert_eq!((x[0], y[0]), (1.0, 1.0));
    }

    #[test]
    fn offset_table_moves_the_chain() {
        // Only the offset (+1, 0) is allowed: from cell 0 the chain walks right one cell a step.
        let (nx, ny) = (5, 1);
        let mut off = vec![f64::NEG_INFINITY; 2 * nx - 1];
        off[nx] = 0.0;
        let k = LatticeKernel::new(nx, ny, [0.0, 5.0, 0.0, 1.0], &vec![0.0; nx], &off).unwrap();
        let (x, _) = k.simulate(&[(0.5, 0.5)], &[4], 1).unwrap();
        for (t, v) in x.iter().enumerate() {
            assert_eq!(v.floor() as usize, t);
        }
        assert!(k.simulate(&[(4.5, 0.5)], &[1], 1).is_err());
    }

    #[test]
    fn state_weights_are_respected() {
        // Two cells, weights 1 and 3.
        let k = LatticeKernel::new(2, 1, [0.0, 2.0, 0.0, 1.0], &[0.0, 3f64.ln()], &[0.0; 3]).unwrap();
        let (x, _) = k.simulate(&[(0.5, 0.5)], &[40_000], 5).unwrap();
        let right = x[1..].iter().filter(|&&v| v >= 1.0).count() as f64 / 40_000.0;
        assert!((right - 0.75).abs() < 0.01, "{right}");
        assert!(LatticeKernel::new(2, 1, [0.0, 2.0, 0.0, 1.0], &[0.0, f64::NAN], &[0.0; 3]).is_err());
    }
}
