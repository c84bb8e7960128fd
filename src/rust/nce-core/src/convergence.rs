//! How an iterative fit ended, one type for the result types that report it.

/// Iterations taken, whether the convergence test was met, and why the iteration stopped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Convergence {
    pub iterations: usize,
    pub converged: bool,
    pub message: String,
}
