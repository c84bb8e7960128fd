//! Per-row log-likelihood contributions as functions of the linear predictor.
//!
//! Newton's method only needs, for each row, l(eta), its gradient g = dl/deta and the
//! weight w = -d2l/deta2. For canonical GLMs this is IRLS; the Poisson-transform objective
//! of Barthelme & Chopin fits the same way.

/// Largest |eta| used when evaluating exp: beyond it, probabilities are 0 or 1 in double precision.
pub const ETA_CAP: f64 = 700.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Bernoulli/binomial proportion response with logit link.
    Binomial,
    /// Poisson counts with log link.
    Poisson,
    /// Poisson-transformed likelihood: rows with y = 1 contribute eta, rows with y = 0
    /// (reference points, offset holding log(n/m) - log q) contribute -exp(eta).
    PoissonTransform,
}

/// Log-likelihood, gradient and (positive) curvature of one row.
#[derive(Debug, Clone, Copy)]
pub struct RowTerms {
    pub loglik: f64,
    pub grad: f64,
    pub weight: f64,
}

/// The logistic function 1 / (1 + exp(-x)), without overflow for either sign.
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// log(1 + exp(x)) (softplus) without overflow, to the last bit for either sign; the one
/// definition for the engine's families, the networks' losses and activations and VNCE.
#[inline]
pub fn softplus(x: f64) -> f64 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

impl Family {
    pub fn parse(name: &str) -> Option<Family> {
        match name {
            "binomial" => Some(Family::Binomial),
            "poisson" => Some(Family::Poisson),
            "poisson_transform" => Some(Family::PoissonTransform),
            _ => None,
        }
    }

    /// Mean (fitted value) for a linear predictor.
    #[inline]
    pub fn mean(self, eta: f64) -> f64 {
        match self {
            Family::Binomial => sigmoid(eta),
            Family::Poisson | Family::PoissonTransform => eta.min(ETA_CAP).exp(),
        }
    }

    /// Row terms for response y (prior weight applied by the caller).
    #[inline]
    pub fn row(self, y: f64, eta: f64) -> RowTerms {
        match self {
            Family::Binomial => {
                let mu = self.mean(eta);
                // l = y eta - log(1 + e^eta), stable in both tails.
                RowTerms {
                    loglik: y * eta - softplus(eta),
                    grad: y - mu,
                    weight: mu * (1.0 - mu),
                }
            }
            Family::Poisson => {
                let mu = self.mean(eta);
                let lgy = if y > 1.0 { ln_gamma_int(y) } else { 0.0 };
                RowTerms {
                    loglik: y * eta - mu - lgy,
                    grad: y - mu,
                    weight: mu,
                }
            }
            Family::PoissonTransform => {
                if y > 0.5 {
                    RowTerms {
                        loglik: eta,
                        grad: 1.0,
                        weight: 0.0,
                    }
                } else {
                    let mu = self.mean(eta);
                    RowTerms {
                        loglik: -mu,
                        grad: -mu,
                        weight: mu,
                    }
                }
            }
        }
    }

    /// Check a response value is admissible.
    pub fn valid_response(self, y: f64) -> bool {
        match self {
            Family::Binomial => (0.0..=1.0).contains(&y),
            Family::Poisson => y >= 0.0 && y.is_finite(),
            Family::PoissonTransform => y == 0.0 || y == 1.0,
        }
    }

    /// Saturated log-likelihood of a row (for deviances); 0 for the Poisson transform.
    pub fn saturated_loglik(self, y: f64) -> f64 {
        match self {
            Family::Binomial => {
                let a = if y > 0.0 { y * y.ln() } else { 0.0 };
                let b = if y < 1.0 { (1.0 - y) * (1.0 - y).ln() } else { 0.0 };
                a + b
            }
            Family::Poisson => {
                let lgy = if y > 1.0 { ln_gamma_int(y) } else { 0.0 };
                if y > 0.0 {
                    y * y.ln() - y - lgy
                } else {
                    0.0
                }
            }
            Family::PoissonTransform => 0.0,
        }
    }
}

fn ln_gamma_int(y: f64) -> f64 {
    statrs::function::gamma::ln_gamma(y + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_terms_match_finite_differences() {
        for &(y, eta) in &[(1.0, 0.3), (0.0, -2.0), (1.0, 30.0), (0.0, -40.0)] {
            let f = Family::Binomial;
            let h = 1e-5;
            let r = f.row(y, eta);
            let g = (f.row(y, eta + h).loglik - f.row(y, eta - h).loglik) / (2.0 * h);
            assert!((g - r.grad).abs() < 1e-6, "grad {g} vs {}", r.grad);
            let w = -(f.row(y, eta + h).grad - f.row(y, eta - h).grad) / (2.0 * h);
            assert!((w - r.weight).abs() < 1e-6);
        }
    }

    #[test]
    fn softplus_is_stable() {
        assert_eq!(softplus(800.0), 800.0);
        assert!((softplus(0.0) - 2f64.ln()).abs() < 1e-15);
        assert!(softplus(-800.0) >= 0.0);
        assert!((softplus(-30.0) / (-30f64).exp() - 1.0).abs() < 1e-12);
    }
}
