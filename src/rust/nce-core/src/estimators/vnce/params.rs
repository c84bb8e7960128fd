//! Parameters of the truncated Gaussian graphical model and of its lognormal variational family,
//! and their packing into one vector for the optimiser.
//!
//! Packing order: theta = (K_jk for j <= k, row by row: K11, K12, .., K1d, K22, ..; then c), then
//! alpha = (mu_1..mu_d, tau_1..tau_d, the strict lower part of T row by row: T21, T31, T32, ..),
//! where Lambda = T T' is the precision of log x under q and T_jj = exp(tau_j).

use crate::error::{NceError, Result};
use nalgebra::DMatrix;

#[derive(Debug, Clone, PartialEq)]
pub struct TgmParams {
    /// Symmetric d x d matrix K of phi(x) = exp(-x'Kx/2 - c).
    pub k: DMatrix<f64>,
    /// Negative log normalising constant parameter c.
    pub c: f64,
    /// Mean of u = log x under the variational lognormal.
    pub mu: Vec<f64>,
    /// Lower-triangular factor of the precision Lambda = T T' of u (positive diagonal).
    pub t: DMatrix<f64>,
}

/// Number of packed parameters for dimension d.
pub fn n_params(d: usize) -> usize {
    d * (d + 1) / 2 + 1 + 2 * d + d * (d.saturating_sub(1)) / 2
}

/// Names of the packed parameters, in packing order (1-based indices as in R).
pub fn param_names(d: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n_params(d));
    for j in 0..d {
        for k in j..d {
            out.push(format!("K[{},{}]", j + 1, k + 1));
        }
    }
    out.push("c".to_string());
    out.extend((0..d).map(|j| format!("mu[{}]", j + 1)));
    out.extend((0..d).map(|j| format!("tau[{}]", j + 1)));
    for i in 1..d {
        for k in 0..i {
            out.push(format!("T[{},{}]", i + 1, k + 1));
        }
    }
    out
}

impl TgmParams {
    /// Parameters from K, c, mu and the precision `prec` of log x (factorised here).
    /// `arg` names the argument in errors (e.g. "start").
    pub fn from_precision(k: DMatrix<f64>, c: f64, mu: Vec<f64>, prec: &DMatrix<f64>, arg: &str) -> Result<Self> {
        let d = k.nrows();
        if k.ncols() != d || prec.nrows() != d || prec.ncols() != d || mu.len() != d {
            return Err(NceError::invalid(
                arg,
                format!(
                    "K ({} x {}), mu (length {}) and prec ({} x {}) must agree in dimension",
                    k.nrows(),
                    k.ncols(),
                    mu.len(),
                    prec.nrows(),
                    prec.ncols()
                ),
            ));
        }
        check_finite_symmetric(&k, arg, "K")?;
        check_finite_symmetric(prec, arg, "prec")?;
        if !c.is_finite() || mu.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid(arg, "c and mu must be finite"));
        }
        let chol = nalgebra::Cholesky::new(prec.clone())
            .ok_or_else(|| NceError::invalid(arg, "prec is not positive definite"))?;
        Ok(TgmParams { k, c, mu, t: chol.l() })
    }

    /// Error naming `arg` unless K is positive definite (a sufficient condition for phi to be
    /// integrable on the positive orthant; required of starting values).
    pub fn check_k_positive_definite(&self, arg: &str) -> Result<()> {
        match nalgebra::Cholesky::new(self.k.clone()) {
            Some(_) => Ok(()),
            None => Err(NceError::invalid(arg, "K is not positive definite")),
        }
    }

    pub fn dim(&self) -> usize {
        self.mu.len()
    }

    /// Lambda = T T', the precision of log x under q.
    pub fn precision(&self) -> DMatrix<f64> {
        &self.t * self.t.transpose()
    }

    pub fn pack(&self) -> Vec<f64> {
        let d = self.dim();
        let mut out = Vec::with_capacity(n_params(d));
        for j in 0..d {
            for k in j..d {
                out.push(self.k[(j, k)]);
            }
        }
        out.push(self.c);
        out.extend_from_slice(&self.mu);
        out.extend((0..d).map(|j| self.t[(j, j)].ln()));
        for i in 1..d {
            for k in 0..i {
                out.push(self.t[(i, k)]);
            }
        }
        out
    }

    pub fn unpack(d: usize, x: &[f64]) -> Result<Self> {
        if x.len() != n_params(d) {
            return Err(NceError::invalid(
                "params",
                format!("has length {}, expected {}", x.len(), n_params(d)),
            ));
        }
        let mut it = x.iter().copied();
        let mut next = || it.next().expect("length checked above");
        let mut k = DMatrix::zeros(d, d);
        for j in 0..d {
            for l in j..d {
                let v = next();
                k[(j, l)] = v;
                k[(l, j)] = v;
            }
        }
        let c = next();
        let mu: Vec<f64> = (0..d).map(|_| next()).collect();
        let mut t = DMatrix::zeros(d, d);
        for j in 0..d {
            t[(j, j)] = next().exp();
        }
        for i in 1..d {
            for l in 0..i {
                t[(i, l)] = next();
            }
        }
        Ok(TgmParams { k, c, mu, t })
    }
}

fn check_finite_symmetric(m: &DMatrix<f64>, arg: &str, what: &str) -> Result<()> {
    if m.iter().any(|v| !v.is_finite()) {
        return Err(NceError::invalid(arg, format!("{what} has non-finite entries")));
    }
    let d = m.nrows();
    for i in 0..d {
        for j in 0..i {
            let (a, b) = (m[(i, j)], m[(j, i)]);
            if (a - b).abs() > 1e-10 * (1.0 + a.abs().max(b.abs())) {
                return Err(NceError::invalid(
                    arg,
                    format!(
                        "{what} is not symmetric (entries [{},{}] and [{},{}])",
                        i + 1,
                        j + 1,
                        j + 1,
                        i + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_round_trip_and_names() {
        let d = 3;
        let k = DMatrix::from_row_slice(3, 3, &[2.0, 0.3, -0.1, 0.3, 1.5, 0.2, -0.1, 0.2, 1.0]);
        let prec = DMatrix::from_row_slice(3, 3, &[1.0, 0.2, 0.0, 0.2, 2.0, 0.5, 0.0, 0.5, 3.0]);
        let p = TgmParams::from_precision(k.clone(), 0.7, vec![0.1, -0.2, 0.3], &prec, "start").unwrap();
        assert!((p.precision() - &prec).abs().max() < 1e-12);
        let x = p.pack();
        assert_eq!(x.len(), n_params(d));
        assert_eq!(param_names(d).len(), n_params(d));
        assert_eq!(param_names(d)[1], "K[1,2]");
        let q = TgmParams::unpack(d, &x).unwrap();
        assert_eq!(q.k, k);
        assert!((q.t - &p.t).abs().max() < 1e-14);
        let bad = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        let e = TgmParams::from_precision(DMatrix::identity(2, 2), 0.0, vec![0.0; 2], &bad, "start").unwrap_err();
        assert!(
            e.to_string().contains("`start`") && e.to_string().contains("positive definite"),
            "{e}"
        );
    }
}
