//! C += A B for a tall A the caller has just computed (column-major, one column per knot of a
//! thin-plate basis) and a small B, without packing A: A's columns are read where they lie, MR
//! rows at a time, and each tile of C (MR rows x NR columns) stays in registers over all of A's
//! columns. A general product (matrixmultiply's) copies every block of A into its own layout
//! first, which for a product with only k = 10-60 columns costs half as much as the
//! multiply-adds themselves.
//!
//! Each entry of C is its own sum over A's columns in order, so the result does not depend on
//! the number of threads; the builds with FMA (AVX2, AVX-512) differ from the portable one only
//! in rounding (fused multiply-adds).

use crate::engine::simd::Simd;

/// B (kc x k, column-major) as the kernels read it: row-major, its columns padded with zeros to
/// a multiple of `nr`.
pub(crate) struct PackedB {
    data: Vec<f64>,
    /// Padded width (a multiple of nr).
    kp: usize,
    k: usize,
    rows: usize,
    nr: usize,
}

impl PackedB {
    /// Rows `r0..r0 + rows` of `b` (`ldb` rows, `k` columns, column-major), for the tiles of
    /// the build `simd`.
    pub(crate) fn new(b: &[f64], ldb: usize, r0: usize, rows: usize, k: usize, simd: Simd) -> Self {
        let nr = tile_nr(simd);
        let kp = k.div_ceil(nr) * nr;
        let mut data = vec![0.0; rows * kp];
        for j in 0..rows {
            for c in 0..k {
                data[j * kp + c] = b[c * ldb + r0 + j];
            }
        }
        PackedB { data, kp, k, rows, nr }
    }

    /// The rows from j0 on.
    fn rows_from(&self, j0: usize) -> &[f64] {
        &self.data[j0 * self.kp..]
    }
}

/// The register tile's column count in the build `simd`, which `PackedB` pads to.
fn tile_nr(simd: Simd) -> usize {
    match simd {
        Simd::None => 2,
        Simd::Avx2 => 6,
        Simd::Avx512 => 10,
    }
}

/// c[r, col] += sum_j a[j * lda + r] b[j0 + j, col] for rows 0..nrows of the block, the columns
/// j = 0..kc of `a` (column stride `lda`), and B's rows j0..j0 + kc; `c` is nrows x k,
/// column-major with stride `ldc`.
pub(crate) struct TileJob<'a> {
    pub a: &'a [f64],
    pub lda: usize,
    pub nrows: usize,
    pub kc: usize,
    pub b: &'a PackedB,
    pub j0: usize,
    pub c: &'a mut [f64],
    pub ldc: usize,
}

impl TileJob<'_> {
    /// Run on the kernels of `simd` (a build engine::simd found the CPU has).
    pub(crate) fn run(self, simd: Simd) {
        debug_assert!(self.j0 + self.kc <= self.b.rows && self.b.nr == tile_nr(simd));
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: engine::simd found AVX2 and FMA.
            Simd::Avx2 => unsafe { self.run_avx2() },
            #[cfg(all(target_arch = "x86_64", nce_avx512))]
            // SAFETY: engine::simd found AVX-512F, AVX-512DQ and FMA.
            Simd::Avx512 => unsafe { self.run_avx512() },
            _ => self.run_tiles::<4, 2, false>(),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(self) {
        self.run_tiles::<8, 6, true>()
    }

    #[cfg(all(target_arch = "x86_64", nce_avx512))]
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    unsafe fn run_avx512(self) {
        self.run_tiles::<16, 10, true>()
    }

    #[inline(always)]
    fn run_tiles<const MR: usize, const NR: usize, const FMA: bool>(self) {
        let TileJob {
            a,
            lda,
            nrows,
            kc,
            b,
            j0,
            c,
            ldc,
        } = self;
        let bp = b.rows_from(j0);
        let kp = b.kp;
        let full = nrows / MR * MR;
        for c0 in (0..b.k).step_by(NR) {
            let ncols = NR.min(b.k - c0);
            for r0 in (0..full).step_by(MR) {
                let acc = tile::<MR, NR, FMA>(a, lda, r0, kc, &bp[c0..], kp);
                for (q, col) in acc.iter().enumerate().take(ncols) {
                    let out = &mut c[(c0 + q) * ldc + r0..(c0 + q) * ldc + r0 + MR];
                    for (o, v) in out.iter_mut().zip(col) {
                        *o += v;
                    }
                }
            }
            // The rows left over (fewer than MR), one at a time.
            for r in full..nrows {
                for q in 0..ncols {
                    let mut s = 0.0;
                    for j in 0..kc {
                        let (x, y) = (a[j * lda + r], bp[j * kp + c0 + q]);
                        s = if FMA { x.mul_add(y, s) } else { x * y + s };
                    }
                    c[(c0 + q) * ldc + r] += s;
                }
            }
        }
    }
}

/// One register tile: sum_j a[j * lda + r0 + r] b[j * kp + q] for r < MR, q < NR. Each column's
/// accumulator is its own variable (`tile!`), indexed by constants only, so that it stays in
/// registers (one array of all of them is kept on the stack).
#[inline(always)]
fn tile<const MR: usize, const NR: usize, const FMA: bool>(
    a: &[f64],
    lda: usize,
    r0: usize,
    kc: usize,
    b: &[f64],
    kp: usize,
) -> [[f64; MR]; NR] {
    const { assert!(NR <= 12, "tile! names 12 accumulators") };
    macro_rules! tile {
        ($($acc:ident $q:literal),*) => {{
            $(let mut $acc = [0.0f64; MR];)*
            for j in 0..kc {
                let av: [f64; MR] = a[j * lda + r0..j * lda + r0 + MR].try_into().unwrap();
                let bv = &b[j * kp..j * kp + NR];
                $(
                    if $q < NR {
                        let bq = bv[$q];
                        for r in 0..MR {
                            $acc[r] = if FMA { av[r].mul_add(bq, $acc[r]) } else { av[r] * bq + $acc[r] };
                        }
                    }
                )*
            }
            let mut out = [[0.0f64; MR]; NR];
            $(if $q < NR { out[$q] = $acc; })*
            out
        }};
    }
    tile!(c0 0, c1 1, c2 2, c3 3, c4 4, c5 5, c6 6, c7 7, c8 8, c9 9, c10 10, c11 11)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::simd::available;

    #[test]
    fn matches_a_plain_product() {
        // Row counts and widths that leave remainders for every tile shape.
        let (nrows, lda, kc, ldb, k) = (37, 41, 23, 30, 13);
        let a: Vec<f64> = (0..lda * kc).map(|i| ((i * 7 % 19) as f64 - 9.0) / 7.0).collect();
        let b: Vec<f64> = (0..ldb * k).map(|i| ((i * 5 % 17) as f64 - 8.0) / 3.0).collect();
        let j0 = 4;
        for simd in available() {
            let pb = PackedB::new(&b, ldb, 2, 27, k, simd);
            let ldc = nrows + 3;
            let mut c = vec![1.0; ldc * k];
            TileJob {
                a: &a,
                lda,
                nrows,
                kc,
                b: &pb,
                j0,
                c: &mut c,
                ldc,
            }
            .run(simd);
            for col in 0..k {
                for r in 0..nrows {
                    let want: f64 = 1.0 + (0..kc).map(|j| a[j * lda + r] * b[col * ldb + 2 + j0 + j]).sum::<f64>();
                    let got = c[col * ldc + r];
                    assert!(
                        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                        "{simd:?} {r} {col}: {got} {want}"
                    );
                }
                for r in nrows..ldc {
                    assert_eq!(c[col * ldc + r], 1.0);
                }
            }
        }
    }
}
