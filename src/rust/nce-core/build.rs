//! Enables the AVX-512 build of the thin-plate radial kernel (`cfg(nce_avx512)`) when rustc is
//! 1.89 or newer, where the `avx512f` target feature is stable; older compilers (the crate
//! supports 1.80) build the AVX2 and portable kernels only.

use std::process::Command;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(nce_avx512)");
    println!("cargo:rerun-if-env-changed=RUSTC");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let minor = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| {
            // "rustc 1.95.0 (...)": the minor version.
            let ver = v.split_whitespace().nth(1)?.to_string();
            let mut parts = ver.split('.');
            let major: u32 = parts.next()?.parse().ok()?;
            let minor: u32 = parts.next()?.parse().ok()?;
            Some(if major > 1 { u32::MAX } else { minor })
        });
    if minor.is_some_and(|m| m >= 89) {
        println!("cargo:rustc-cfg=nce_avx512");
    }
}
