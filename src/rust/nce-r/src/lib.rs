//! Thin extendr binding: converts R objects, calls nce-core, returns plain R lists.
//! No numerics here: each module binds one part of the core, `convert` holds the conversions
//! and the error protocol, `run` the per-call thread pool.

// Project choices for `cargo clippy -- -D warnings` (make lint): `!(x >= 0.0)` rejects NaN
// together with out-of-range values, on purpose; numeric kernels index several arrays with one
// loop variable, which reads better there than zipped iterators.
#![allow(clippy::neg_cmp_op_on_partial_ord, clippy::needless_range_loop)]

mod basis;
mod bridge;
mod convert;
mod debug;
mod fit;
mod heap;
mod latkes;
mod mlp;
mod nonlinear;
mod ratio_net;
mod ref_discrete_steps;
mod reference;
mod run;
mod sampler;
mod shards;
mod simulator;
mod spatial;
mod vnce;
mod vnce_tools;

/// Large blocks freed during a call are kept for the call's next request of the same size
/// (nce_core::block_cache: glibc unmaps them, and fresh pages cost a page fault each).
#[global_allocator]
static GLOBAL: nce_core::block_cache::BlockCache = nce_core::block_cache::BlockCache::new();

extendr_api::extendr_module! {
    mod nce;
    use fit;
    use basis;
    use reference;
    use latkes;
    use mlp;
    use bridge;
    use vnce_tools;
    use vnce;
    use spatial;
    use ref_discrete_steps;
    use nonlinear;
    use ratio_net;
    use debug;
    use simulator;
    use shards;
    use heap;
    use sampler;
}
