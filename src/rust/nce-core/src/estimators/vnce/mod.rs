//! Variational noise-contrastive estimation (Rhodes & Gutmann 2019) for the truncated Gaussian
//! graphical model phi(x) = exp(-x'Kx/2 - c) on (0, inf)^d with missing values as latent
//! variables and a joint lognormal variational family (their section 5), or the model's own
//! truncated-normal posterior through the GHK simulator, which moves with (K, c) (ghk.rs).

mod fit;
mod ghk;
mod objective;
mod params;
mod problem;
pub mod se;

pub use fit::{fit, FitReport, VnceFit};
pub use ghk::{fit_ghk, ghk_impute, GhkFit};
pub use objective::Terms;
pub use params::{n_params, param_names, TgmParams};
pub use problem::{TgmVnce, VnceSamples};
