//! Which vector build of the kernels runs (the radial block in basis.rs, the register tiles in
//! tile_product.rs; design.rs's dense cross-products and the lasso path ask only whether there is
//! one, `vector()`): AVX-512
//! (with rustc >= 1.89, see build.rs), AVX2 or portable (NCE_NO_SIMD set, or the CPU lacks them).
//! Every vector build has AVX2 and FMA. The two vector builds do the same IEEE operations,
//! fused multiply-adds included, so their results are bit-identical (they differ in the number
//! of lanes only); the portable build rounds each multiply and add (within a few ulp of them).

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Simd {
    None,
    Avx2,
    Avx512,
}

/// The build this process runs, decided once.
pub(crate) fn simd() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        static SIMD: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *SIMD.get_or_init(|| {
            if std::env::var_os("NCE_NO_SIMD").is_some() {
                Simd::None
            } else {
                *available().last().unwrap_or(&Simd::None)
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Simd::None
    }
}

/// Whether a vector build runs (every one has AVX2 and FMA): for kernels with a single AVX2 build.
pub(crate) fn vector() -> bool {
    simd() != Simd::None
}

/// Every build the CPU can run, the portable one first and the widest last (NCE_NO_SIMD not
/// consulted: the tests compare the builds).
pub(crate) fn available() -> Vec<Simd> {
    let mut v = vec![Simd::None];
    #[cfg(target_arch = "x86_64")]
    {
        let avx2_fma = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if avx2_fma {
            v.push(Simd::Avx2);
        }
        // The AVX-512 builds fuse multiply-adds too.
        if cfg!(nce_avx512)
            && avx2_fma
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512dq")
        {
            v.push(Simd::Avx512);
        }
    }
    v
}

/// `fn $name(args) -> ret` that runs `$body(args)` (an `#[inline(always)]` function) compiled
/// for AVX2 where a vector build runs (`vector()`), else its portable build: the same
/// operations, so the same bits, with the loops in four-lane vectors.
macro_rules! avx2_twin {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:ident) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                if $crate::engine::simd::vector() {
                    // SAFETY: every vector build of engine::simd has AVX2.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use avx2_twin;
