//! The window quadrature against closed forms and brute-force sums.

use super::*;

const W: [f64; 4] = [0.0, 40.0, 0.0, 30.0];

fn rule(grid: (usize, usize), refine: usize) -> Rule {
    Rule {
        window: W,
        grid,
        refine,
        centre: (20.0, 15.0),
    }
}

fn table(feature: Feature, lo: f64, hi: f64, n: usize, f: impl Fn(f64) -> f64) -> TermTables {
    let step = (hi - lo) / (n - 1) as f64;
    TermTables::new(
        feature,
        lo,
        step,
        n,
        (0..n).map(|i| f(lo + i as f64 * step)).collect(),
        None,
        vec![],
    )
}

/// The rule's points for a previous fixation: (x, y, log area).
pub(super) fn points(rule: &Rule, prev: (f64, f64), out: &mut Vec<(f64, f64, f64)>) {
    let mut lat = Lattice::new(rule);
    lat.centre_on(rule, prev);
    let la_sub = lat.log_cell - ((SUB * SUB) as f64).ln();
    out.clear();
    lat.rows(|row| {
        let la = if row.whole { lat.log_cell } else { la_sub };
        out.extend(row.xs.iter().map(|&x| (x, row.y, la)));
    });
}

fn tr(px: f64, py: f64, nterms: usize) -> Transition {
    Transition {
        prev: (px, py),
        angle_prev: None,
        map: vec![],
        table: vec![0; nterms],
    }
}

#[test]
fn fast_atan2_matches_the_library() {
    let mut worst: f64 = 0.0;
    for i in 0..2000 {
        for j in 0..50 {
            let th = -PI + 2.0 * PI * i as f64 / 1999.0;
            let r = 10f64.powi(j % 7 - 3) * (1.0 + j as f64);
            let (y, x) = (r * th.sin(), r * th.cos());
            worst = worst.max((fast_atan2(y, x) - y.atan2(x)).abs());
        }
    }
    assert!(worst < 2e-11, "{worst}");
    for (y, x) in [
        (0.0, 1.0),
        (0.0, -1.0),
        (-0.0, -1.0),
        (1.0, 0.0),
        (-1.0, 0.0),
        (0.0, 0.0),
        (1.0, 1.0),
        (-3.0, -3.0),
    ] {
        assert!((fast_atan2(y, x) - f64::atan2(y, x)).abs() < 2e-11, "{y} {x}");
    }
}

#[test]
fn pseudo_angle_increases_with_the_angle() {
    let mut last = -2.0;
    for i in 1..=4000 {
        let a = -PI + 2.0 * PI * i as f64 / 4000.0;
        let p = pseudo_angle(3.0 * a.cos(), 3.0 * a.sin());
        assert!(p > last, "{a}");
        last = p;
    }
    assert_eq!(pseudo_angle(-1.0, -0.0), 2.0);
    assert_eq!(pseudo_angle(-1.0, 0.0), 2.0);
    assert_eq!(pseudo_angle(0.0, 0.0), 0.0);
    assert_eq!(pseudo_angle(0.0, 5.0), 1.0);
    assert_eq!(pseudo_angle(0.0, -5.0), -1.0);
}

#[test]
fn flat_kernel_gives_the_window_area() {
    let stop = AtomicBool::new(false);
    for refine in [0, 1, 3, 7] {
        let out = log_normalisers(&rule((8, 6), refine), &[], &[], &[tr(3.3, 29.0, 0)], 0, false, &stop).unwrap();
        assert!((out.log_z[0] - (1200.0f64).ln()).abs() < 1e-12);
    }
}

#[test]
fn linear_in_x_matches_the_closed_form() {
    // exp(b x) over [0, 40] x [0, 30]: 30 (e^{40 b} - 1) / b; the midpoint rule's error is
    // O(h^2), here h = 40 / 400.
    let b = 0.07;
    let t = table(Feature::X, 0.0, 40.0, 3, |x| b * x);
    let out = log_normalisers(
        &rule((400, 3), 5),
        &[],
        &[t],
        &[tr(10.0, 10.0, 1)],
        0,
        false,
        &AtomicBool::new(false),
    )
    .unwrap();
    let exact = (30.0 * ((40.0 * b).exp() - 1.0) / b).ln();
    assert!((out.log_z[0] - exact).abs() < 1e-4, "{} vs {exact}", out.log_z[0]);
}

#[test]
fn gradient_is_the_mean_design_row() {
    // One term linear in dist with basis column dist: mean_x = E[dist] under the density.
    let n = 101;
    let hi = 60.0;
    let mut t = table(Feature::Dist, 0.0, hi, n, |d| -d / 10.0);
    t.basis = Some((0..n).map(|i| i as f64 * hi / (n - 1) as f64).collect());
    t.cols = vec![1];
    let r = rule((40, 30), 7);
    let trans = [tr(12.0, 7.0, 1), tr(39.0, 1.0, 1)];
    let out = log_normalisers(
        &r,
        &[],
        std::slice::from_ref(&t),
        &trans,
        2,
        true,
        &AtomicBool::new(false),
    )
    .unwrap();
    let m = out.mean_x.unwrap();
    // Direct sums over the same points.
    for (k, tr) in trans.iter().enumerate() {
        let mut pts = Vec::new();
        points(&r, tr.prev, &mut pts);
        let (mut z, mut zd) = (0.0, 0.0);
        for p in &pts {
            let d = ((p.0 - tr.prev.0).powi(2) + (p.1 - tr.prev.1).powi(2)).sqrt();
            let e = (-d / 10.0 + p.2).exp();
            z += e;
            zd += e * d;
        }
        assert!((out.log_z[k] - z.ln()).abs() < 1e-12);
        assert!((m[k * 2 + 1] - zd / z).abs() < 1e-9, "{} vs {}", m[k * 2 + 1], zd / z);
        assert_eq!(m[k * 2], 0.0);
    }
}

#[test]
fn product_rule_matches_the_log_rule() {
    // Three terms, two tables each, steep and flat, with the gradient; also a kernel whose
    // product underflows (tops far apart from where the sum peaks), left to the log rule.
    let n = 513;
    let mut terms = Vec::new();
    for (f, lo, hi, a) in [
        (Feature::Radius, 0.0, 26.0, 0.3),
        (Feature::Dist, 0.0, 51.0, -0.5),
        (Feature::Angle, -2.0, 2.0, 1.5),
    ] {
        let step = (hi - lo) / (n - 1) as f64;
        let x = |i: usize| lo + i as f64 * step;
        let values = (0..2 * n)
            .map(|j| a * (1.0 + (j / n) as f64) * (x(j % n) * 0.7).sin() - 0.01 * x(j % n))
            .collect();
        let basis = (0..2 * n * 2).map(|j| (x(j % n) + (j / n) as f64).cos()).collect();
        terms.push(TermTables::new(
            f,
            lo,
            step,
            n,
            values,
            Some(basis),
            vec![terms.len() * 2, terms.len() * 2 + 1],
        ));
    }
    let r = rule((40, 30), 7);
    let mut trans: Vec<Transition> = [(12.0, 7.0), (39.9, 0.1), (0.0, 30.0), (20.0, 15.0), (3.0, 3.0)]
        .into_iter()
        .enumerate()
        .map(|(k, prev)| Transition {
            prev,
            angle_prev: None,
            map: vec![],
            table: vec![k % 2, (k / 2) % 2, 1],
        })
        .collect();
    // 60 more with the radius's first table: enough to precompute the fine lattice too.
    trans.extend((0..60).map(|i| Transition {
        prev: (0.6 * i as f64, 29.0 - 0.45 * i as f64),
        angle_prev: None,
        map: vec![],
        table: vec![0, i % 2, i % 2],
    }));
    let mut s = Scratch::default();
    let mut lat = Lattice::new(&r);
    // The position terms' factors precomputed nowhere (one transition), on the whole cells
    // (five, two choices of table), and on both lattices (60, one choice).
    for (range, whole, fine) in [(0..1, false, false), (0..5, true, false), (5..65, true, true)] {
        let plan = ProductPlan::new(&r, &lat, &[], &terms, &trans[range.clone()], true).unwrap();
        let c = plan.cells.values().next();
        assert_eq!(c.is_some(), whole);
        assert_eq!(c.is_some_and(|c| !c[1].wt.is_empty()), fine);
        for t in trans[range].iter().step_by(7) {
            lat.centre_on(&r, t.prev);
            let mut b1 = vec![vec![0.0; n]; 3];
            let mut b2 = b1.clone();
            let mut v1: Vec<&mut [f64]> = b1.iter_mut().map(|b| &mut b[..]).collect();
            let mut v2: Vec<&mut [f64]> = b2.iter_mut().map(|b| &mut b[..]).collect();
            let q = Shared {
                rule: &r,
                lat: &lat,
                maps: &[],
                terms: &terms,
            };
            let (lz, total) = one(q, t, true, &mut s, &mut v1);
            let (lz2, total2) = one_product(q, &plan, t, true, &mut s, &mut v2).unwrap();
            assert!((lz - lz2).abs() < 1e-12, "{lz} {lz2}");
            for (a, b) in b1.iter().flatten().zip(b2.iter().flatten()) {
                assert!((a / total - b / total2).abs() < 1e-12, "{a} {b}");
            }
        }
    }
    // exp(-800 x) and exp(+800 x) on [0, 40]: tops 0 and 32000, the sum's peak at -0.
    let up = table(Feature::X, 0.0, 40.0, 3, |x| 800.0 * x);
    let down = table(Feature::X, 0.0, 40.0, 3, |x| -800.0 * x);
    let t = tr(10.0, 10.0, 2);
    let pair = [up, down];
    let plan = ProductPlan::new(&r, &lat, &[], &pair, std::slice::from_ref(&t), false).unwrap();
    lat.centre_on(&r, t.prev);
    let q = Shared {
        rule: &r,
        lat: &lat,
        maps: &[],
        terms: &pair,
    };
    assert!(one_product(q, &plan, &t, false, &mut s, &mut []).is_none());
    let out = log_normalisers(&r, &[], &pair, &[t], 0, false, &AtomicBool::new(false)).unwrap();
    assert!((out.log_z[0] - 1200f64.ln()).abs() < 1e-9, "{}", out.log_z[0]);
}

#[test]
#[cfg(target_arch = "x86_64")]
fn avx2_table_reads_are_the_scalar_ones_bit_for_bit() {
    if !std::is_x86_feature_detected!("avx2") {
        return;
    }
    let t = table(Feature::Dist, -1.0, 60.0, 1001, |d| (d / 7.0).sin() - d / 30.0);
    let prod = ProductTables::new(&t).unwrap();
    // Inside, at the ends, beyond them, and NaN.
    let mut values: Vec<f64> = (0..203).map(|i| -3.0 + i as f64 * 0.317).collect();
    values.extend([-1.0, 60.0, 1e300, -1e300, f64::NAN, 0.0, -0.0]);
    values.truncate(values.len() - values.len() % 4);
    let n = values.len();
    let run = |simd: bool| {
        let (mut wt, mut inc) = (vec![1.5; n], vec![0.25; n]);
        let mut loc = Loc {
            i: vec![0; n],
            w: vec![0.0; n],
        };
        let mut out = Reading {
            wt: &mut wt,
            inc: &mut inc,
            loc: Some(&mut loc),
        };
        if simd {
            // SAFETY: AVX2 is present (checked above); the slices have matching lengths.
            let done = unsafe { read_table_avx2(&t, &prod.pairs, &values, &mut out) };
            assert_eq!(done, n);
        } else {
            read_table_scalar(&t, &prod.pairs, &values, &mut out, 0);
        }
        (wt, inc, loc.i, loc.w)
    };
    let (a, b) = (run(true), run(false));
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.0), bits(&b.0));
    assert_eq!(bits(&a.1), bits(&b.1));
    assert_eq!(a.2, b.2);
    assert_eq!(bits(&a.3), bits(&b.3));
}

#[test]
fn refined_points_cover_the_window_once() {
    let r = rule((10, 6), 5);
    let mut pts = Vec::new();
    for prev in [(0.0, 0.0), (20.0, 15.0), (40.0, 30.0), (3.9, 29.0)] {
        points(&r, prev, &mut pts);
        let area: f64 = pts.iter().map(|p| p.2.exp()).sum();
        assert!((area - 1200.0).abs() < 1e-9);
    }
}

#[test]
fn results_do_not_depend_on_threads() {
    let t = table(Feature::Angle, -2.0, 2.0, 257, |p| 0.5 * (4.0 * p).cos());
    let trans: Vec<Transition> = (0..50).map(|i| tr(i as f64 * 0.8, 30.0 - i as f64 * 0.6, 1)).collect();
    let run = |threads| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            log_normalisers(
                &rule((20, 15), 3),
                &[],
                std::slice::from_ref(&t),
                &trans,
                0,
                false,
                &AtomicBool::new(false),
            )
            .unwrap()
            .log_z
        })
    };
    assert_eq!(run(1), run(3));
}

#[test]
fn bad_input_is_an_error() {
    use std::slice;
    let stop = AtomicBool::new(false);
    let map_term = table(Feature::Map(0), 0.0, 1.0, 3, |v| v);
    let x_term = table(Feature::X, 0.0, 1.0, 3, |v| v);
    // Each case wrong in one way.
    let cases = [
        (rule((4, 3), 1), &map_term, tr(1.0, 1.0, 1)), // reads a map, none given
        (rule((4, 3), 1), &x_term, tr(1.0, 1.0, 0)),   // no table index for the term
        (rule((0, 3), 1), &x_term, tr(1.0, 1.0, 1)),   // empty grid
        (rule((100_000, 100_000), 1), &x_term, tr(1.0, 1.0, 1)), // 1e10 points: refused before allocating
        (rule((4, 3), 1), &x_term, tr(f64::NAN, 1.0, 1)), // non-finite previous fixation
    ];
    for (i, (r, t, x)) in cases.iter().enumerate() {
        let got = log_normalisers(r, &[], slice::from_ref(*t), slice::from_ref(x), 0, false, &stop);
        assert!(got.is_err(), "case {i}");
    }
}
