//! Numerics for noise-contrastive estimation, with no R in it.
//!
//! The R package `nce` calls this crate through a thin extendr binding; everything here
//! is plain Rust and is checked by `cargo test`.
//!
//! Layout: `engine` (the penalised engine), `sampling` (samplers and references),
//! `estimators` (estimators built on them), `latkes` (the LATKES window quadrature), and shared
//! pieces at the top (errors, random streams, small dense linear algebra, L-BFGS, maps).

// Project choices for `cargo clippy -- -D warnings` (make lint): `!(x >= 0.0)` rejects NaN
// together with out-of-range values, on purpose; numeric kernels index several arrays with one
// loop variable, which reads better there than zipped iterators.
#![allow(clippy::neg_cmp_op_on_partial_ord, clippy::needless_range_loop)]

pub mod alloc;
pub mod block_cache;
pub mod convergence;
pub mod engine;
pub mod error;
pub mod estimators;
pub mod latkes;
pub mod linalg;
pub mod optim;
pub mod rng;
pub mod sampling;
pub mod spatial;

pub use error::{NceError, Result};
