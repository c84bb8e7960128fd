//! Numerics for noise-contrastive estimation, with no R in it.
//!
//! The R package `nce` calls this crate through a thin extendr binding; everything here
//! is plain Rust and is checked by `cargo test`.
//!
//! Layout: `engine` (the penalised engine), `sampling` (samplers and references),
//! `estimators` (estimators built on them), and shared pieces at the top (errors, random
//! streams, small dense linear algebra, L-BFGS, map interpolation).

pub mod alloc;
pub mod engine;
pub mod error;
pub mod estimators;
pub mod linalg;
pub mod optim;
pub mod rng;
pub mod sampling;
pub mod spatial;

// Flat paths (`nce_core::reml`, `crate::design`, ...) stay valid for callers.
pub use engine::{alias, design, family, grouped, irls, penalty, pirls, reml, sandwich};
pub use error::{NceError, Result};
pub use estimators::{bridge, mog, vnce};
pub use sampling::{kernel, latkes_sim, reference, tgm_sim, truncnorm};
