//! Numerics for noise-contrastive estimation, with no R in it.
//!
//! The R package `nce` calls this crate through a thin extendr binding; everything here
//! is plain Rust and is checked by `cargo test`.

pub mod alias;
pub mod bridge;
pub mod design;
pub mod error;
pub mod family;
pub mod grouped;
pub mod irls;
pub mod kernel;
pub mod lasso;
pub mod latkes_sim;
pub mod lfire;
pub mod linalg;
pub mod mog;
pub mod optim;
pub mod penalty;
pub mod pirls;
pub mod reference;
pub mod reml;
pub mod rng;
pub mod sandwich;
pub mod spatial;
pub mod tgm_sim;
pub mod truncnorm;
pub mod vnce;

pub use error::{NceError, Result};
