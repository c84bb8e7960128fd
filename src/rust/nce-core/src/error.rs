//! Errors of the core. Each variant has a short code the R layer turns into a condition class.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum NceError {
    /// An argument has the wrong shape or value.
    InvalidInput { arg: String, msg: String },
    /// The user asked to stop (interrupt polled from the main thread).
    Interrupted,
    /// A linear algebra step failed (e.g. a non positive definite Hessian).
    Numerical(String),
    /// A bug: a panic caught at the boundary to R.
    Internal(String),
}

pub type Result<T> = std::result::Result<T, NceError>;

impl NceError {
    pub fn invalid(arg: &str, msg: impl Into<String>) -> Self {
        NceError::InvalidInput {
            arg: arg.to_string(),
            msg: msg.into(),
        }
    }

    /// Condition class suffix used by the R layer (`nce_error_<code>`).
    pub fn code(&self) -> &'static str {
        match self {
            NceError::InvalidInput { .. } => "input",
            NceError::Interrupted => "interrupt",
            NceError::Numerical(_) => "numerical",
            NceError::Internal(_) => "internal",
        }
    }
}

impl fmt::Display for NceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NceError::InvalidInput { arg, msg } => write!(f, "`{arg}`: {msg}"),
            NceError::Interrupted => write!(f, "interrupted by the user"),
            NceError::Numerical(m) => write!(f, "numerical failure: {m}"),
            NceError::Internal(m) => write!(f, "internal error in the Rust core (please report): {m}"),
        }
    }
}

impl std::error::Error for NceError {}
