//! Neural ratio estimation for amortised simulation-based inference: a classifier between joint
//! pairs (theta_i, x_i), x_i simulated at theta_i, and pairs with theta from other simulations,
//! whose logit estimates log r(theta, x) = log p(x | theta) / p(x). The raw data row x goes
//! through a learned embedding (`embedding`: none, a dense MLP, or a pooled per-window network,
//! DeepSets or 1-D convolution), the head (`model`) sees [theta, z, embedding]; `loss` holds the
//! NRE, NRE-C and BNRE losses, `train` the minibatch training, `layers` the dense stacks.

pub mod embedding;
pub mod layers;
pub mod loss;
pub mod model;
pub mod train;

#[cfg(test)]
mod tests;

pub use embedding::EmbeddingSpec;
pub use loss::Loss;
pub use model::{Architecture, RatioNet, Rows};
pub use train::{train, EpochReport, RatioSettings, TrainResult, Trainer};
