//! Thin extendr binding: converts R objects, calls nce-core, returns plain R lists.
//! No numerics here: each module binds one part of the core, `convert` holds the conversions
//! and the error protocol, `run` the per-call thread pool.

mod bridge;
mod convert;
mod debug;
mod fit;
mod latkes;
mod reference;
mod run;
mod spatial;
mod vnce;
mod vnce_tools;

extendr_api::extendr_module! {
    mod nce;
    use fit;
    use reference;
    use latkes;
    use bridge;
    use vnce_tools;
    use vnce;
    use spatial;
    use debug;
}
