//! A per-call rayon pool for tests and examples of thread invariance.

/// Run `f` in a rayon pool of `threads` threads built for this call (never the global pool).
pub fn with_threads<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T, rayon::ThreadPoolBuildError> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads.max(1)).build()?;
    Ok(pool.install(f))
}
