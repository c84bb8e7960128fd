//! Code shared by the bench examples (a folder without main.rs, so not an example itself).
// Each example uses a part of it.
#![allow(dead_code)]

use std::path::Path;

/// A file of little-endian doubles, as the bench scripts' writeBin() writes them.
pub fn read_f64(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The median of timings (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
