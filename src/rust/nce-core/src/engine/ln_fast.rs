//! A natural logarithm that vectorises: the thin-plate radial kernel takes one per knot and
//! row (84 million in bench/smooth-setup.R's term), too many for the library's scalar `ln`.
//!
//! x = 2^k z with z in [0.6875, 1.375) (the reduction of musl's log), then
//! ln x = k ln 2 - ln(1/c) + log1p(z / c - 1) for the centre c of z's sub-interval among 128, whose
//! 1/c and -ln(1/c) come from a table (a gather in the vector builds: no division, which bounded
//! the earlier atanh series), and |z / c - 1| < 2^-7 leaves a polynomial of degree 7.

use std::sync::LazyLock;

/// Bits of 0.6875, the reduction's offset.
const OFF: u64 = 0x3fe6_0000_0000_0000;
/// log2 of the table's length.
const BITS: u32 = 7;
const LEN: usize = 1 << BITS;

/// 1/c and -ln(1/c) at the centre c of each sub-interval of z, as [`LnTable::ln`] indexes them.
pub struct LnTable {
    invc: [f64; LEN],
    logc: [f64; LEN],
}

static TABLE: LazyLock<LnTable> = LazyLock::new(LnTable::new);

/// The table, built once per process (from the library's `ln`, correctly rounded in practice).
pub fn ln_table() -> &'static LnTable {
    &TABLE
}

/// The sub-interval index, the exponent k (-1022..1024, as a double: an exact conversion, one
/// instruction with AVX-512DQ) and z of x's bits (x = 2^k z).
#[inline(always)]
fn split(ix: u64) -> (usize, f64, f64) {
    let tmp = ix.wrapping_sub(OFF);
    let i = ((tmp >> (52 - BITS)) as usize) & (LEN - 1);
    let k = ((tmp as i64) >> 52) as f64;
    (i, k, f64::from_bits(ix.wrapping_sub(tmp & (0xfff << 52))))
}

impl LnTable {
    fn new() -> Self {
        let mut t = LnTable {
            invc: [0.0; LEN],
            logc: [0.0; LEN],
        };
        // The two sub-intervals beside 1 take c = 1 (|r| < 2^-7 there): ln 1 is 0 and values
        // near 1 keep their relative accuracy.
        let beside_one = [split(1.0f64.to_bits()).0, split(1.0f64.to_bits() - 1).0];
        for i in 0..LEN {
            // The ends of sub-interval i: the first z of index i and the last one.
            let (_, _, lo) = split(OFF + ((i as u64) << (52 - BITS)));
            let (_, _, hi) = split(OFF + (((i + 1) as u64) << (52 - BITS)) - 1);
            let c = if beside_one.contains(&i) { 1.0 } else { 0.5 * (lo + hi) };
            let invc = 1.0 / c;
            t.invc[i] = invc;
            t.logc[i] = -invc.ln();
        }
        t
    }

    /// ln x of a positive normal double, branch-free, within 2 ulp of `ln` (of max(|ln x|, 1):
    /// near x = 1 the error is absolute). Zero, subnormal and non-finite inputs give values the
    /// caller must not use. `FMA` fuses the multiply-adds (the builds for CPUs with FMA).
    #[inline(always)]
    pub fn ln<const FMA: bool>(&self, x: f64) -> f64 {
        // ln 2 in two parts, the first with 32 trailing zero bits, so k ln2_hi is exact.
        const LN2_HI: f64 = 6.931_471_803_691_238e-1;
        const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
        let madd = |a: f64, b: f64, c: f64| if FMA { a.mul_add(b, c) } else { a * b + c };
        let (i, k, z) = split(x.to_bits());
        let (invc, logc) = (self.invc[i], self.logc[i]);
        let r = madd(z, invc, -1.0);
        // hi + lo = k ln 2 + logc + r, the rounding of the sum kept in lo.
        let w = madd(k, LN2_HI, logc);
        let hi = w + r;
        let lo = madd(k, LN2_LO, (w - hi) + r);
        // (log1p(r) - r) / r^2 = -1/2 + r/3 - r^2/4 + r^3/5 - r^4/6 + r^5/7, by Estrin's scheme.
        let r2 = r * r;
        let p01 = madd(1.0 / 3.0, r, -0.5);
        let p23 = madd(1.0 / 5.0, r, -0.25);
        let p45 = madd(1.0 / 7.0, r, -1.0 / 6.0);
        let p = madd(madd(p45, r2, p23), r2, p01);
        hi + madd(r2, p, lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn close(got: f64, x: f64, ulps: f64) -> bool {
        let want = x.ln();
        (got - want).abs() <= ulps * f64::EPSILON * want.abs().max(1.0)
    }

    #[test]
    fn matches_ln() {
        let t = ln_table();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for _ in 0..200_000 {
            // Log-uniform over the normal range, then uniform around 1 (the table's edges).
            let x = (rng.gen::<f64>() * 1400.0 - 700.0).exp();
            let y = 0.6 + 0.9 * rng.gen::<f64>();
            for v in [x, y] {
                assert!(close(t.ln::<true>(v), v, 2.0), "{v}: {} vs {}", t.ln::<true>(v), v.ln());
                assert!(
                    close(t.ln::<false>(v), v, 2.0),
                    "{v}: {} vs {}",
                    t.ln::<false>(v),
                    v.ln()
                );
            }
        }
        let edges = [
            1.0,
            2.0,
            0.5,
            0.6875,
            1.375,
            std::f64::consts::SQRT_2,
            f64::MIN_POSITIVE,
            f64::MAX,
        ];
        for x in edges
            .into_iter()
            .flat_map(|v: f64| [v, f64::from_bits(v.to_bits() - 1), f64::from_bits(v.to_bits() + 1)])
        {
            if x.is_finite() && x >= f64::MIN_POSITIVE {
                assert!(close(t.ln::<true>(x), x, 2.0), "{x}");
                assert!(close(t.ln::<false>(x), x, 2.0), "{x}");
            }
        }
        assert_eq!(t.ln::<true>(1.0), 0.0);
    }
}
