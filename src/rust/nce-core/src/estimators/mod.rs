//! Estimators built on the engine and the samplers: bridge sampling / marginal likelihoods by
//! logistic regression, variational NCE for the truncated Gaussian graphical model, and the
//! mixture-of-Gaussians VNCE example, and NCE for models nonlinear in their parameters.

pub mod bridge;
pub mod mog;
pub mod nonlinear;
pub mod vnce;
