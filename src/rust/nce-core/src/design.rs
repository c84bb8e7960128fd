//! Model matrices and the cross-products Newton's method needs.
//!
//! Rows are processed in fixed chunks whose partial sums are added in chunk order, so the
//! result is bit-identical whatever the number of rayon threads.

use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Rows per chunk of the parallel accumulations (fixed: results must not depend on threads).
pub const CHUNK_ROWS: usize = 4096;

/// What the fitting code needs from a model matrix.
pub trait Design: Sync {
    fn nrow(&self) -> usize;
    fn ncol(&self) -> usize;
    /// out = X beta (no offset).
    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]);
    /// (X' diag(w) X, X' v).
    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>);
}

/// A dense column-major matrix borrowed from the caller (R's layout).
#[derive(Debug, Clone, Copy)]
pub struct DenseDesign<'a> {
    data: &'a [f64],
    nrow: usize,
    ncol: usize,
}

impl<'a> DenseDesign<'a> {
    pub fn new(data: &'a [f64], nrow: usize, ncol: usize) -> Result<Self> {
        if data.len() != nrow * ncol {
            return Err(NceError::invalid(
                "x",
                format!("has {} values, expected {} x {} = {}", data.len(), nrow, ncol, nrow * ncol),
            ));
        }
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                "x",
                format!("model matrix has a non-finite value at row {}, column {}", i % nrow.max(1) + 1, i / nrow.max(1) + 1),
            ));
        }
        Ok(DenseDesign { data, nrow, ncol })
    }

    #[inline]
    pub fn col(&self, j: usize) -> &'a [f64] {
        &self.data[j * self.nrow..(j + 1) * self.nrow]
    }

    /// Row i copied into `buf`.
    pub fn row_into(&self, i: usize, buf: &mut [f64]) {
        for (j, b) in buf.iter_mut().enumerate() {
            *b = self.data[j * self.nrow + i];
        }
    }

    fn chunks(&self) -> Vec<(usize, usize)> {
        (0..self.nrow.div_ceil(CHUNK_ROWS).max(1))
            .map(|k| (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(self.nrow)))
            .collect()
    }
}

impl Design for DenseDesign<'_> {
    fn nrow(&self) -> usize {
        self.nrow
    }
    fn ncol(&self) -> usize {
        self.ncol
    }

    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
        out.par_chunks_mut(CHUNK_ROWS).enumerate().for_each(|(k, o)| {
            let r0 = k * CHUNK_ROWS;
            o.iter_mut().for_each(|v| *v = 0.0);
            for (j, &b) in beta.iter().enumerate() {
                if b == 0.0 {
                    continue;
                }
                let c = &self.col(j)[r0..r0 + o.len()];
                for (v, x) in o.iter_mut().zip(c) {
                    *v += b * x;
                }
            }
        });
    }

    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
        let p = self.ncol;
        let parts: Vec<(Vec<f64>, Vec<f64>)> = self
            .chunks()
            .into_par_iter()
            .map(|(a, b)| {
                let mut h = vec![0.0; p * p];
                let mut g = vec![0.0; p];
                let wc = &w[a..b];
                let mut wx = vec![0.0; b - a];
                for j in 0..p {
                    let cj = &self.col(j)[a..b];
                    g[j] = cj.iter().zip(&v[a..b]).map(|(x, y)| x * y).sum();
                    for (t, (x, ww)) in wx.iter_mut().zip(cj.iter().zip(wc)) {
                        *t = x * ww;
                    }
                    for k in j..p {
                        let ck = &self.col(k)[a..b];
                        h[j * p + k] = wx.iter().zip(ck).map(|(x, y)| x * y).sum();
                    }
                }
                (h, g)
            })
            .collect();
        let mut h = DMatrix::zeros(p, p);
        let mut g = DVector::zeros(p);
        for (hc, gc) in parts {
            for j in 0..p {
                g[j] += gc[j];
                for k in j..p {
                    h[(j, k)] += hc[j * p + k];
                }
            }
        }
        for j in 0..p {
            for k in 0..j {
                h[(j, k)] = h[(k, j)];
            }
        }
        (h, g)
    }
}

/// Run `f` in a rayon pool of `threads` threads built for this call (never the global pool).
pub fn with_threads<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| NceError::Numerical(format!("could not start a thread pool: {e}")))?;
    Ok(pool.install(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(n: usize) -> (Vec<f64>, usize, usize) {
        let p = 3;
        let mut x = vec![0.0; n * p];
        for i in 0..n {
            x[i] = 1.0;
            x[n + i] = (i as f64 * 0.37).sin();
            x[2 * n + i] = (i as f64 * 0.11).cos() * 3.0;
        }
        (x, n, p)
    }

    #[test]
    fn crossprod_matches_naive_and_is_thread_invariant() {
        let (x, n, p) = toy(10_000);
        let d = DenseDesign::new(&x, n, p).unwrap();
        let w: Vec<f64> = (0..n).map(|i| 0.5 + (i % 7) as f64 / 7.0).collect();
        let v: Vec<f64> = (0..n).map(|i| (i % 5) as f64 - 2.0).collect();
        let (h1, g1) = with_threads(1, || d.weighted_crossprod(&w, &v)).unwrap();
        let (h2, g2) = with_threads(2, || d.weighted_crossprod(&w, &v)).unwrap();
        assert_eq!(h1, h2);
        assert_eq!(g1, g2);
        let mut naive = DMatrix::<f64>::zeros(p, p);
        for i in 0..n {
            for j in 0..p {
                for k in 0..p {
                    naive[(j, k)] += w[i] * x[j * n + i] * x[k * n + i];
                }
            }
        }
        assert!((h1 - naive).abs().max() < 1e-8);
    }

    #[test]
    fn rejects_wrong_length_and_non_finite() {
        assert!(DenseDesign::new(&[1.0, 2.0, 3.0], 2, 2).is_err());
        let e = DenseDesign::new(&[1.0, f64::NAN, 3.0, 4.0], 2, 2).unwrap_err();
        assert!(e.to_string().contains("row 2, column 1"), "{e}");
    }
}
