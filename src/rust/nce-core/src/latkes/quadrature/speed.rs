//! Timing of the window quadrature (ignored by default).

use super::*;

/// `cargo test --release -p nce-core quadrature::speed -- --ignored --nocapture`
#[test]
#[ignore]
fn time_per_point() {
    let n = 8193;
    let mk = |f: Feature, lo: f64, hi: f64| {
        let step = (hi - lo) / (n - 1) as f64;
        TermTables::new(
            f,
            lo,
            step,
            n,
            // Three periods over the range: a kernel as smooth as fitted ones.
            (0..n).map(|i| (6.0 * PI * i as f64 / (n - 1) as f64).sin()).collect(),
            None,
            vec![],
        )
    };
    let all = [
        mk(Feature::Radius, 0.0, 700.0),
        mk(Feature::Dist, 0.0, 1400.0),
        mk(Feature::Angle, -2.0, 2.0),
    ];
    let rule = Rule {
        window: [0.0, 1024.0, 0.0, 768.0],
        grid: (128, 96),
        refine: 15,
        centre: (512.0, 384.0),
    };
    for pick in [vec![], vec![0], vec![1], vec![2], vec![0, 1, 2]] {
        let terms: Vec<TermTables> = pick.iter().map(|&k| all[k].clone()).collect();
        let trans: Vec<Transition> = (0..400)
            .map(|i| Transition {
                prev: (2.5 * i as f64, 1.9 * i as f64),
                angle_prev: None,
                map: vec![],
                table: vec![0; terms.len()],
            })
            .collect();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let t = std::time::Instant::now();
        let out =
            pool.install(|| log_normalisers(&rule, &[], &terms, &trans, 0, false, &AtomicBool::new(false)).unwrap());
        let el = t.elapsed().as_secs_f64();
        let mut pts = Vec::new();
        super::tests::points(&rule, (0.0, 0.0), &mut pts);
        println!(
            "terms {pick:?}: {:.1} ns per point, {}",
            el / (400.0 * pts.len() as f64) * 1e9,
            out.log_z[0]
        );
    }
}
