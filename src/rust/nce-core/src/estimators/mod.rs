//! Estimators built on the engine and the samplers: bridge sampling / marginal likelihoods by
//! logistic regression, variational NCE for the truncated Gaussian graphical model, and the
//! mixture-of-Gaussians VNCE example, NCE for models nonlinear in their parameters, and LFIRE
//! (penalised logistic ratio estimation per parameter value for simulator models), and neural
//! ratio estimation with learned embeddings (`ratio_net`).

pub mod bridge;
pub mod lasso;
pub mod lasso_onestep;
pub mod lasso_path;
pub mod lfire;
pub mod mlp;
pub mod mog;
pub mod nonlinear;
pub mod ratio_net;
pub mod telescope;
pub mod vnce;
