//! Estimators built on the engine and the samplers: bridge sampling / marginal likelihoods by
//! logistic regression, variational NCE for the truncated Gaussian graphical model, and the
//! mixture-of-Gaussians VNCE example.

pub mod bridge;
pub mod mog;
pub mod vnce;
