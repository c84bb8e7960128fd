//! Set-up of a VNCE problem for the truncated Gaussian graphical model: validated data and noise
//! rows, their missing-value patterns, and the fixed base draws that make the objective a
//! deterministic function of the parameters.

use crate::alloc::{checked_len, try_with_capacity};
use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use crate::sampling::truncnorm::log_cdf;
use rand_distr::{Distribution, StandardNormal};

/// One data or noise row.
pub(crate) struct Row {
    /// Observed values (NaN where missing), length d.
    pub x: Vec<f64>,
    /// log of the observed values (NaN where missing).
    pub log_x: Vec<f64>,
    pub obs: Vec<usize>,
    pub mis: Vec<usize>,
    /// log p_y of the observed coordinates.
    pub lp: f64,
    pub noise: bool,
    /// S base draws eps_s ~ N(0, I_d), draw-major (s * d + j); empty when nothing is missing.
    pub eps: Vec<f64>,
    /// log Phi of the first |mis| base draws of each block (the GHK family's uniforms, in log
    /// space), draw-major (s * |mis| + j).
    pub log_u: Vec<f64>,
}

/// A VNCE problem: n data rows, nu * n noise rows, S latent draws per row with missing values.
/// The samples of a VNCE problem. `x`: n x d data and `y`: m x d noise, both column-major (as R
/// stores them), NaN for missing. Noise row k pairs with data row k mod n and must be missing
/// exactly where that row is; m must be a positive multiple of n. `lpx`, `lpy`: log noise
/// density of each row's observed coordinates.
#[derive(Debug, Clone, Copy)]
pub struct VnceSamples<'a> {
    pub x: &'a [f64],
    pub n: usize,
    pub d: usize,
    pub y: &'a [f64],
    pub m: usize,
    pub lpx: &'a [f64],
    pub lpy: &'a [f64],
}

pub struct TgmVnce {
    pub(crate) d: usize,
    pub(crate) n: usize,
    pub(crate) n_noise: usize,
    pub(crate) log_nu: f64,
    pub(crate) s: usize,
    pub(crate) rows: Vec<Row>,
}

/// Rows per fixed chunk of the parallel loop (results do not depend on the thread count).
pub(crate) const CHUNK: usize = 32;

impl TgmVnce {
    /// The problem of `samples` (see `VnceSamples`), with `n_latent` draws S per row with
    /// missing values from stream `seed`.
    pub fn new(samples: &VnceSamples, n_latent: usize, seed: u64) -> Result<Self> {
        let VnceSamples {
            x,
            n,
            d,
            y,
            m,
            lpx,
            lpy,
        } = *samples;
        if d == 0 || n == 0 {
            return Err(NceError::invalid(
                "x",
                format!("must have at least one row and one column, got {n} x {d}"),
            ));
        }
        if x.len() != n * d {
            return Err(NceError::invalid(
                "x",
                format!("has {} values, expected {n} x {d}", x.len()),
            ));
        }
        if y.len() != m * d {
            return Err(NceError::invalid(
                "y",
                format!("has {} values, expected {m} x {d}", y.len()),
            ));
        }
        if m == 0 || m % n != 0 {
            return Err(NceError::invalid(
                "y",
                format!("must have a positive multiple of nrow(x) = {n} rows, got {m}"),
            ));
        }
        if lpx.len() != n {
            return Err(NceError::invalid(
                "lpx",
                format!("has length {}, expected nrow(x) = {n}", lpx.len()),
            ));
        }
        if lpy.len() != m {
            return Err(NceError::invalid(
                "lpy",
                format!("has length {}, expected nrow(y) = {m}", lpy.len()),
            ));
        }
        if let Some(i) = lpx.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                "lpx",
                format!("must be finite; element {} is {}", i + 1, lpx[i]),
            ));
        }
        if let Some(i) = lpy.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                "lpy",
                format!("must be finite; element {} is {}", i + 1, lpy[i]),
            ));
        }
        if n_latent == 0 {
            return Err(NceError::invalid("n_latent", "must be at least 1"));
        }
        let mut rows: Vec<Row> = Vec::with_capacity(n + m);
        for (arg, data, nr, lp, noise) in [("x", x, n, lpx, false), ("y", y, m, lpy, true)] {
            for i in 0..nr {
                let vals: Vec<f64> = (0..d).map(|j| data[j * nr + i]).collect();
                let mis: Vec<usize> = (0..d).filter(|&j| vals[j].is_nan()).collect();
                let obs: Vec<usize> = (0..d).filter(|&j| !vals[j].is_nan()).collect();
                if obs.is_empty() {
                    return Err(NceError::invalid(arg, format!("row {} has every value missing", i + 1)));
                }
                if let Some(&j) = obs.iter().find(|&&j| !(vals[j].is_finite() && vals[j] > 0.0)) {
                    return Err(NceError::invalid(
                        arg,
                        format!(
                            "observed values must be positive and finite; row {}, column {} is {}",
                            i + 1,
                            j + 1,
                            vals[j]
                        ),
                    ));
                }
                if noise && mis != rows[i % n].mis {
                    return Err(NceError::invalid(
                        "y",
                        format!(
                            "row {} must be missing exactly where its data row {} (of x) is",
                            i + 1,
                            i % n + 1
                        ),
                    ));
                }
                let log_x = vals.iter().map(|v| v.ln()).collect();
                rows.push(Row {
                    x: vals,
                    log_x,
                    obs,
                    mis,
                    lp: lp[i],
                    noise,
                    eps: Vec::new(),
                    log_u: Vec::new(),
                });
            }
        }
        // Base draws, one stream per row (data rows 0..n, noise rows n..n+m).
        for (r, row) in rows.iter_mut().enumerate() {
            if !row.mis.is_empty() {
                let mut rng = stream_rng(seed, r as u64);
                let what = "the latent draws (`n_latent`)";
                row.eps = try_with_capacity(checked_len(&[n_latent, d], what)?, what)?;
                row.eps
                    .extend((0..n_latent * d).map(|_| -> f64 { StandardNormal.sample(&mut rng) }));
                let p = row.mis.len();
                row.log_u = try_with_capacity(n_latent * p, what)?;
                row.log_u
                    .extend((0..n_latent * p).map(|i| log_cdf(row.eps[(i / p) * d + i % p])));
            }
        }
        Ok(TgmVnce {
            d,
            n,
            n_noise: m,
            log_nu: ((m / n) as f64).ln(),
            s: n_latent,
            rows,
        })
    }

    /// The sandwich's middle (se.rs): two independent samples when nothing is missing; else
    /// clusters of a data row with the noise rows that copy its missingness pattern.
    pub(crate) fn meat(&self, scores: &[f64], p: usize) -> Result<nalgebra::DMatrix<f64>> {
        if self.rows.iter().all(|r| r.mis.is_empty()) {
            super::se::two_sample_meat(scores, self.rows.len(), self.n, p)
        } else {
            super::se::paired_meat(scores, self.rows.len(), self.n, p)
        }
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    pub fn n_noise(&self) -> usize {
        self.n_noise
    }

    pub fn n_latent(&self) -> usize {
        self.s
    }
}

impl std::fmt::Debug for TgmVnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TgmVnce {{ d: {}, n: {}, n_noise: {}, n_latent: {} }}",
            self.d, self.n, self.n_noise, self.s
        )
    }
}
