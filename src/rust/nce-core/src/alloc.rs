//! Fallible allocation for buffers whose size comes from the user (numbers of draws, rows,
//! latent samples): a request the allocator cannot meet is a `TooLarge` error (R class
//! `nce_error_size`), never an abort of the R session.

use crate::error::{NceError, Result};

fn too_large<T>(len: Option<usize>, what: &str) -> NceError {
    let bytes = len.map_or(f64::NAN, |n| n as f64 * std::mem::size_of::<T>().max(1) as f64);
    NceError::TooLarge {
        what: what.to_string(),
        bytes,
    }
}

/// The error for a size that overflows `usize`.
pub fn overflow(what: &str) -> NceError {
    too_large::<u8>(None, what)
}

/// Product of sizes, or a `TooLarge` error naming `what` when it overflows `usize`.
pub fn checked_len(dims: &[usize], what: &str) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| overflow(what))
}

/// An empty vector with room for `len` elements, allocated fallibly.
pub fn try_with_capacity<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| too_large::<T>(Some(len), what))?;
    Ok(v)
}

/// `len` copies of `value`, allocated fallibly.
pub fn try_filled<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len, what)?;
    v.resize(len, value);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_sizes_are_errors_not_aborts() {
        // Over isize::MAX bytes: capacity overflow.
        let e = try_filled(usize::MAX / 4, 0.0f64, "the draws").unwrap_err();
        assert_eq!(e.code(), "size");
        assert!(e.to_string().contains("the draws"), "{e}");
        // Representable but far beyond any machine (2^60 bytes): the allocator refuses.
        let e = try_with_capacity::<f64>(1usize << 57, "the reference points").unwrap_err();
        assert_eq!(e.code(), "size");
        assert!(e.to_string().contains("1.2 EB"), "{e}");
        assert_eq!(checked_len(&[usize::MAX, 2], "n").unwrap_err().code(), "size");
        assert_eq!(checked_len(&[3, 4], "n").unwrap(), 12);
    }

    #[test]
    fn small_sizes_allocate() {
        let v = try_filled(5, 1.5, "v").unwrap();
        assert_eq!(v, vec![1.5; 5]);
        let w: Vec<u8> = try_with_capacity(10, "w").unwrap();
        assert!(w.capacity() >= 10 && w.is_empty());
    }
}
