//! The order mgcv gives the distinct rows of a smooth's covariates (`uniquecombs()`: the rows'
//! strings `paste0(x[, 1], "*", x[, 2], ...)` sorted in the C locale), from the numbers where
//! their printed strings sort as the numbers do. Which knots mgcv's thin-plate set-up draws
//! depends on that order, so the package's set-up must reproduce it.

/// The positions of the numbers whose strings the caller must format (0 < |x| < 0.0011: perhaps
/// printed as "M e-XX"), or `None` where only the strings can decide (no numbers, NA or NaN, or
/// |x| >= 9.99: "10" sorts before "9").
pub fn tiny_positions(x: &[f64]) -> Option<Vec<usize>> {
    if x.is_empty() || x.iter().any(|v| v.is_nan() || v.abs() >= 9.99) {
        return None;
    }
    Some((0..x.len()).filter(|&i| x[i] != 0.0 && x[i].abs() < 0.0011).collect())
}

/// Ranks (1-based, equal strings equal ranks) of the numbers `x` in the C-locale order of R's
/// `as.character(x)`, or `None` where the numbers cannot decide it. Numbers with
/// 0.0011 <= |x| < 9.99 print in fixed notation ("0.ddd", "d.ddd"), whose strings sort as the
/// numbers do: negatives ("-" first) before the rest, each by |x|. A number printed as "M e-XX"
/// (at `sci`, from the caller's formatting) sorts after every string that starts with its mantissa
/// M, that is just below M plus one unit of M's last digit (`sci_key`), and among such numbers by
/// the exponent string (`sci_erank`, 1-based). `None` where a key is within 1e-13 of a number's
/// magnitude, or two fixed-notation numbers closer than 2e-14 (relative) may print alike.
pub fn print_order_ranks(x: &[f64], sci: &[usize], sci_key: &[f64], sci_erank: &[u32]) -> Option<Vec<u32>> {
    let n = x.len();
    if n > u32::MAX as usize {
        return None;
    }
    let mut key: Vec<f64> = x.iter().map(|v| v.abs()).collect();
    let mut erank = vec![0u32; n];
    let mut is_sci = vec![false; n];
    for ((&i, &k), &e) in sci.iter().zip(sci_key).zip(sci_erank) {
        key[i] = k;
        erank[i] = e;
        is_sci[i] = true;
    }
    let mut plain: Vec<f64> = (0..n).filter(|&i| !is_sci[i]).map(|i| x[i].abs()).collect();
    plain.sort_unstable_by(f64::total_cmp);
    let near = |v: f64| {
        let pos = plain.partition_point(|&w| w <= v);
        [pos.checked_sub(1), Some(pos)]
            .into_iter()
            .flatten()
            .filter_map(|j| plain.get(j))
            .any(|&w| (w - v).abs() <= 1e-13 * v)
    };
    if sci_key.iter().any(|&v| near(v)) {
        return None;
    }
    // Fixed-notation numbers print 15 significant digits: closer ones might print alike.
    if plain.windows(2).any(|w| {
        let d = w[1] - w[0];
        d > 0.0 && d <= 2e-14 * w[1]
    }) {
        return None;
    }
    // Sorted as packed keys (sign, magnitude's bits in total order, exponent rank, position):
    // contiguous tuples sort about 3x faster than positions compared through three arrays.
    let mut keys: Vec<(bool, u64, u32, u32)> = (0..n)
        .map(|i| {
            (
                x[i] >= 0.0 || x[i].is_nan(),
                total_order_bits(key[i]),
                erank[i],
                i as u32,
            )
        })
        .collect();
    keys.sort_unstable();
    let mut ranks = vec![0u32; n];
    let mut r = 0u32;
    // Equal strings: equal in all but the position.
    let string = |t: &(bool, u64, u32, u32)| (t.0, t.1, t.2);
    for (k, t) in keys.iter().enumerate() {
        if k == 0 || string(&keys[k - 1]) != string(t) {
            r += 1;
        }
        ranks[t.3 as usize] = r;
    }
    Some(ranks)
}

/// The bits of `v` as an unsigned integer that orders as `f64::total_cmp` does.
fn total_order_bits(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// The distinct rows of columns given by their ranks (`ranks[j][i]`: row i's rank in column j),
/// ordered by the columns' ranks in turn, as R's `order(r1, r2, ..., method = "radix")` orders
/// them: (the first row of each distinct row in that order, 0-based; each row's distinct row,
/// 1-based). Equal rows keep the first.
pub fn unique_ranked_rows(ranks: &[&[u32]], n: usize) -> (Vec<usize>, Vec<usize>) {
    let mut first = Vec::new();
    let mut index = vec![0usize; n];
    // Row i, a new distinct row or the same as the one before it in the order.
    let mut take = |i: usize, new: bool| {
        if new {
            first.push(i);
        }
        index[i] = first.len();
    };
    if ranks.len() <= 4 && n <= u32::MAX as usize {
        // Up to four columns: each row's ranks packed in one u128 beside its position, sorted as
        // contiguous pairs (positions compared through the columns cost 3x more); ties in
        // position order, so each distinct row's first comes first. Neighbours are compared by
        // their keys too.
        let mut keys: Vec<(u128, u32)> = (0..n)
            .map(|i| (ranks.iter().fold(0u128, |a, r| (a << 32) | u128::from(r[i])), i as u32))
            .collect();
        keys.sort_unstable();
        for (k, &(key, i)) in keys.iter().enumerate() {
            take(i as usize, k == 0 || keys[k - 1].0 != key);
        }
    } else {
        let mut order: Vec<usize> = (0..n).collect();
        // A stable sort: equal rows stay in their order, so each distinct row's first comes first.
        order.sort_by(|&i, &j| row_cmp(ranks, i, j));
        for (k, &i) in order.iter().enumerate() {
            take(i, k == 0 || row_cmp(ranks, order[k - 1], i).is_ne());
        }
    }
    (first, index)
}

/// Rows i and j compared by their ranks, column by column.
fn row_cmp(ranks: &[&[u32]], i: usize, j: usize) -> std::cmp::Ordering {
    ranks
        .iter()
        .map(|r| r[i].cmp(&r[j]))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_notation_ranks_follow_the_strings() {
        // "-0.2" < "-0.5" < "0" < "0.25" < "1.5" in the C locale.
        let x = [0.25, -0.5, 1.5, -0.2, 0.0, 0.25];
        let tiny = tiny_positions(&x).unwrap();
        assert!(tiny.is_empty());
        assert_eq!(print_order_ranks(&x, &[], &[], &[]).unwrap(), vec![4, 2, 5, 1, 3, 4]);
        assert!(tiny_positions(&[1.0, 10.0]).is_none());
        assert!(print_order_ranks(&[0.5, 0.5 + 1e-15], &[], &[], &[]).is_none());
    }

    /// The packed sorts against positions sorted stably through the arrays (the definition):
    /// random numbers with repeats, both signs, zeros and "M e-XX" keys; rows of 1-5 columns
    /// (five take the unpacked path) with many repeated rows.
    #[test]
    fn packed_sorts_match_the_definition() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let n = 3000;
        let pool: Vec<f64> = (0..400).map(|_| (rng.gen::<f64>() - 0.4) * 9.0).collect();
        let mut x: Vec<f64> = (0..n).map(|_| pool[rng.gen_range(0..pool.len())]).collect();
        x[7] = 0.0;
        x[8] = -0.0;
        let sci: Vec<usize> = (0..n).step_by(97).collect();
        let sci_key: Vec<f64> = sci.iter().map(|&i| 0.5 + (i % 5) as f64).collect();
        let sci_erank: Vec<u32> = sci.iter().map(|&i| (i % 3) as u32 + 1).collect();
        let got = print_order_ranks(&x, &sci, &sci_key, &sci_erank).unwrap();
        let mut key: Vec<f64> = x.iter().map(|v| v.abs()).collect();
        let mut erank = vec![0u32; n];
        for ((&i, &k), &e) in sci.iter().zip(&sci_key).zip(&sci_erank) {
            key[i] = k;
            erank[i] = e;
        }
        let cmp = |i: usize, j: usize| {
            (x[j] < 0.0)
                .cmp(&(x[i] < 0.0))
                .then(key[i].total_cmp(&key[j]))
                .then(erank[i].cmp(&erank[j]))
        };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| cmp(i, j));
        let mut want = vec![0u32; n];
        let mut r = 0;
        for (k, &i) in order.iter().enumerate() {
            if k == 0 || cmp(order[k - 1], i).is_ne() {
                r += 1;
            }
            want[i] = r;
        }
        assert_eq!(got, want);
        for d in 1..=5 {
            let cols: Vec<Vec<u32>> = (0..d).map(|_| (0..n).map(|_| rng.gen_range(1..4)).collect()).collect();
            let refs: Vec<&[u32]> = cols.iter().map(|c| c.as_slice()).collect();
            let (first, index) = unique_ranked_rows(&refs, n);
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&i, &j| row_cmp(&refs, i, j));
            let mut want_first = Vec::new();
            let mut want_index = vec![0usize; n];
            for (k, &i) in order.iter().enumerate() {
                if k == 0 || row_cmp(&refs, order[k - 1], i).is_ne() {
                    want_first.push(i);
                }
                want_index[i] = want_first.len();
            }
            assert_eq!((first, index), (want_first, want_index), "{d} columns");
        }
    }

    #[test]
    fn rows_are_ordered_by_ranks_in_turn() {
        let a = [2u32, 1, 2, 1];
        let b = [1u32, 3, 1, 2];
        let (first, index) = unique_ranked_rows(&[&a, &b], 4);
        assert_eq!(first, vec![3, 1, 0]);
        assert_eq!(index, vec![3, 2, 3, 1]);
    }
}
