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
    /// More memory asked for than can be allocated (`bytes`, NaN when the size overflows).
    TooLarge { what: String, bytes: f64 },
    /// A user-supplied function (e.g. an R callback) failed; the message says which and why.
    Model(String),
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
            NceError::TooLarge { .. } => "size",
            NceError::Model(_) => "model",
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
            NceError::Model(m) => write!(f, "{m}"),
            NceError::TooLarge { what, bytes } => write!(
                f,
                "{what} would need {}, more than can be allocated; ask for fewer draws or rows",
                human_bytes(*bytes)
            ),
        }
    }
}

impl std::error::Error for NceError {}

/// "12.3 GB"-style size for messages ("an overflowing size" when not finite).
fn human_bytes(b: f64) -> String {
    if !b.is_finite() {
        return "an overflowing size".to_string();
    }
    let units = ["bytes", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = b;
    let mut k = 0;
    while v >= 1000.0 && k + 1 < units.len() {
        v /= 1000.0;
        k += 1;
    }
    if k == 0 {
        format!("{v:.0} {}", units[k])
    } else {
        format!("{v:.1} {}", units[k])
    }
}
