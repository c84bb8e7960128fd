//! Window quadrature of log-additive transition kernels (LATKES): the log normaliser
//! log Z = log ∫_W exp{eta(y | y_prev)} dy of each transition, and with it the kernel's design
//! row averaged under the normalised density (d log Z / d beta, for standard errors).
//!
//! The rule is the midpoint rule on an `nx` x `ny` grid of cells over the window, with the
//! `refine` x `refine` cells around the previous fixation each split into 8 x 8 (the kernel
//! changes fast near it). The kernel is a sum of terms, each a function of one feature of the
//! point (its position, the saccade from the previous fixation, or a map's value there), given
//! as a table on equally spaced values of that feature and interpolated linearly. A term may
//! have several tables (e.g. one per level of a factor `by`); each transition says which.

use crate::spatial::Map;
use crate::{NceError, Result};
use rayon::prelude::*;
use std::f64::consts::PI;
use std::sync::atomic::{AtomicBool, Ordering};

/// Sub-cells per side of a refined cell.
const SUB: usize = 8;

/// Points per block of the feature arrays.
const BLOCK: usize = 512;

/// What a term is a function of, computed at each quadrature point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Feature {
    X,
    Y,
    /// Distance from the window's centre.
    Radius,
    /// Saccade length from the previous fixation.
    Dist,
    /// Saccade direction, tabulated in its pseudo-angle p on [-2, 2] (see [`pseudo_angle`]):
    /// a table for angle a holds f(a(p)) at equally spaced p.
    Angle,
    /// Turn from the previous saccade's direction, wrapped to (-pi, pi].
    RelAngle,
    /// Value of map feature `k` (see [`MapFeature`]).
    Map(usize),
}

/// Equally spaced tables of one term: `values[t * n + i]` is table t at `lo + i * step`;
/// `basis`, when the gradient is wanted, holds the term's design columns at the same values
/// (column by column per table: `basis[(t * ncol + c) * n + i]`) and `cols` their positions in
/// the kernel's coefficients.
#[derive(Clone, Debug)]
pub struct TermTables {
    pub feature: Feature,
    pub lo: f64,
    pub step: f64,
    pub n: usize,
    pub values: Vec<f64>,
    pub basis: Option<Vec<f64>>,
    pub cols: Vec<usize>,
    /// 1 / step, set by [`TermTables::new`].
    inv_step: f64,
}

impl TermTables {
    pub fn new(
        feature: Feature,
        lo: f64,
        step: f64,
        n: usize,
        values: Vec<f64>,
        basis: Option<Vec<f64>>,
        cols: Vec<usize>,
    ) -> Self {
        TermTables {
            feature,
            lo,
            step,
            n,
            values,
            basis,
            cols,
            inv_step: 1.0 / step,
        }
    }

    fn n_tables(&self) -> usize {
        self.values.len() / self.n
    }

    /// Lower table index and weight of the upper one at feature value `v` (linear
    /// extrapolation beyond the ends, which rounding alone reaches).
    #[inline]
    fn locate(&self, v: f64) -> (usize, f64) {
        let pos = (v - self.lo) * self.inv_step;
        // `as` truncates towards 0: the floor for pos >= 0, and 0 below (clamped there anyway).
        let i = (pos.max(0.0) as usize).min(self.n - 2);
        (i, pos - i as f64)
    }
}

/// A map feature: its maps (one, or one per image) over the window.
pub struct MapFeature<'a> {
    pub maps: Vec<Map<'a>>,
}

/// One transition to normalise: the previous fixation, the previous saccade's direction
/// (`None` where there is none or it had length 0: the turn is then 0), the map each map
/// feature reads, and the table each term uses.
#[derive(Clone, Debug)]
pub struct Transition {
    pub prev: (f64, f64),
    pub angle_prev: Option<f64>,
    pub map: Vec<usize>,
    pub table: Vec<usize>,
}

/// The quadrature rule.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub window: [f64; 4],
    pub grid: (usize, usize),
    pub refine: usize,
    /// The window's centre, from which `radius` is measured.
    pub centre: (f64, f64),
}

/// Log normalisers and, with `gradient`, mean design rows (row-major, `ncoef` per transition).
pub struct Normalisers {
    pub log_z: Vec<f64>,
    pub mean_x: Option<Vec<f64>>,
}

/// atan2(y, x) within 2e-11 of the library's, several times faster and without branches (the
/// quadrant choices are selects): atan on [0, 1] by one reduction (atan t = pi/6 +
/// atan((sqrt(3) t - 1) / (sqrt(3) + t)) above tan(pi/12)) and the odd Taylor series to u^17 on
/// |u| <= tan(pi/12). atan2(+-0, x) follows the library's signs; (0, 0) gives 0.
#[inline]
fn fast_atan2(y: f64, x: f64) -> f64 {
    const SQRT3: f64 = 1.732_050_807_568_877_2;
    const TAN_PI_12: f64 = 0.267_949_192_431_122_7;
    let (ax, ay) = (x.abs(), y.abs());
    let (mn, mx) = (ax.min(ay), ax.max(ay));
    let t = if mx > 0.0 { mn / mx } else { 0.0 };
    let big = t > TAN_PI_12;
    let u = if big { (SQRT3 * t - 1.0) / (SQRT3 + t) } else { t };
    let base = if big { PI / 6.0 } else { 0.0 };
    let u2 = u * u;
    let series = u
        * (1.0
            + u2 * (-1.0 / 3.0
                + u2 * (1.0 / 5.0
                    + u2 * (-1.0 / 7.0
                        + u2 * (1.0 / 9.0
                            + u2 * (-1.0 / 11.0 + u2 * (1.0 / 13.0 + u2 * (-1.0 / 15.0 + u2 / 17.0))))))));
    let a = base + series;
    let a = if ay > ax { PI / 2.0 - a } else { a };
    let a = if x.is_sign_negative() && !(ax == 0.0 && ay == 0.0) || x < 0.0 {
        PI - a
    } else {
        a
    };
    a.copysign(y)
}

/// The pseudo-angle of direction (dx, dy): 1 - dx / (|dx| + |dy|) with the sign of dy, on
/// [-2, 2], increasing with the angle atan2(dy, dx) (0 along +x, 1 along +y, 2 along -x), so a
/// table in it stands for a table in the angle without an arctangent per point; -2 (the angle
/// -pi) is taken as 2 (pi), and no direction (0, 0) as 0, as R's latkes_features() does.
#[inline]
pub fn pseudo_angle(dx: f64, dy: f64) -> f64 {
    let s = dx.abs() + dy.abs();
    if s == 0.0 {
        return 0.0;
    }
    let p = (1.0 - dx / s).copysign(dy);
    if p == -2.0 {
        2.0
    } else {
        p
    }
}

/// Angles wrapped to (-pi, pi], as R's `wrap_angle()`.
#[inline]
fn wrap_angle(a: f64) -> f64 {
    a - 2.0 * PI * ((a - PI) / (2.0 * PI)).ceil()
}

/// Checks the inputs against each other.
fn check(rule: &Rule, maps: &[MapFeature], terms: &[TermTables], trans: &[Transition], ncoef: usize) -> Result<()> {
    let [x0, x1, y0, y1] = rule.window;
    if !rule.window.iter().all(|v| v.is_finite()) || x0 >= x1 || y0 >= y1 {
        return Err(NceError::invalid(
            "window",
            "must be finite with xmin < xmax and ymin < ymax",
        ));
    }
    if rule.grid.0 == 0 || rule.grid.1 == 0 {
        return Err(NceError::invalid("grid", "must be two positive whole numbers"));
    }
    // The caller checks memory against the machine; this bounds what any caller can ask.
    let cells = (rule.grid.0 as f64) * (rule.grid.1 as f64) + ((rule.refine * SUB) as f64).powi(2);
    if cells > 1e9 {
        return Err(NceError::invalid(
            "grid",
            format!("asks for {cells:.3e} points per transition (at most 1e9)"),
        ));
    }
    for (k, t) in terms.iter().enumerate() {
        let arg = format!("terms[[{}]]", k + 1);
        if t.n < 2 || t.values.is_empty() || t.values.len() % t.n != 0 || !(t.step > 0.0) || !t.lo.is_finite() {
            return Err(NceError::invalid(
                &arg,
                "needs at least two equally spaced table values",
            ));
        }
        if let Feature::Map(m) = t.feature {
            if m >= maps.len() {
                return Err(NceError::invalid(
                    &arg,
                    format!("reads map feature {} of {}", m + 1, maps.len()),
                ));
            }
        }
        if let Some(b) = &t.basis {
            if b.len() != t.values.len() * t.cols.len() || t.cols.iter().any(|&c| c >= ncoef) {
                return Err(NceError::invalid(
                    &arg,
                    "has a basis table that does not match its values and columns",
                ));
            }
        }
    }
    for (i, tr) in trans.iter().enumerate() {
        if !tr.prev.0.is_finite() || !tr.prev.1.is_finite() {
            return Err(NceError::invalid(
                "transitions",
                format!("row {} has a non-finite previous fixation", i + 1),
            ));
        }
        let bad_table = tr.table.len() != terms.len() || tr.table.iter().zip(terms).any(|(&j, t)| j >= t.n_tables());
        let bad_map = tr.map.len() != maps.len() || tr.map.iter().zip(maps).any(|(&j, m)| j >= m.maps.len());
        if bad_table || bad_map {
            return Err(NceError::invalid(
                "transitions",
                format!("row {} names a table or map that does not exist", i + 1),
            ));
        }
    }
    Ok(())
}

/// The points of the rule for one previous fixation: (x, y, log area).
fn points(rule: &Rule, prev: (f64, f64), out: &mut Vec<(f64, f64, f64)>) {
    out.clear();
    let [x0, x1, y0, y1] = rule.window;
    let (nx, ny) = rule.grid;
    let hx = (x1 - x0) / nx as f64;
    let hy = (y1 - y0) / ny as f64;
    // The cell holding the previous fixation (clamped into the window), as R's window_points().
    let cell = |p: f64, lo: f64, h: f64, n: usize| -> usize { ((p - lo) / h).ceil().clamp(1.0, n as f64) as usize - 1 };
    let (cx, cy) = (cell(prev.0, x0, hx, nx), cell(prev.1, y0, hy, ny));
    let half = rule.refine / 2;
    let near = |i: usize, j: usize| rule.refine > 0 && i.abs_diff(cx) <= half && j.abs_diff(cy) <= half;
    let la = (hx * hy).ln();
    for j in 0..ny {
        for i in 0..nx {
            if !near(i, j) {
                out.push((x0 + (i as f64 + 0.5) * hx, y0 + (j as f64 + 0.5) * hy, la));
            }
        }
    }
    if rule.refine == 0 {
        return;
    }
    let la_sub = (hx * hy / (SUB * SUB) as f64).ln();
    for j in cy.saturating_sub(half)..(cy + half + 1).min(ny) {
        for i in cx.saturating_sub(half)..(cx + half + 1).min(nx) {
            for b in 0..SUB {
                for a in 0..SUB {
                    let ox = (a as f64 + 0.5) / SUB as f64;
                    let oy = (b as f64 + 0.5) / SUB as f64;
                    out.push((x0 + (i as f64 + ox) * hx, y0 + (j as f64 + oy) * hy, la_sub));
                }
            }
        }
    }
}

/// Scratch space of one worker: the points (x, y, log area), the features the terms read at
/// them (one array each, so that each loop is tight), and eta.
#[derive(Default)]
struct Scratch {
    pts: Vec<(f64, f64, f64)>,
    feat: [Vec<f64>; 7],
    mapv: Vec<f64>,
    eta: Vec<f64>,
    /// Per term and point: table index and weight (only with the gradient).
    loc: Vec<Vec<(usize, f64)>>,
    bins: Vec<f64>,
}

/// Index into `Scratch::feat` of a window feature (maps are computed per term).
#[inline]
fn slot(f: Feature) -> Option<usize> {
    match f {
        Feature::X => Some(0),
        Feature::Y => Some(1),
        Feature::Radius => Some(2),
        Feature::Dist => Some(3),
        Feature::Angle => Some(6),
        Feature::RelAngle => Some(5),
        Feature::Map(_) => None,
    }
}

/// The window features the terms read, at every point of `s.pts`, as R's latkes_features():
/// angles on (-pi, pi], 0 where the saccade has no direction; the turn is 0 where either
/// saccade has length 0.
fn compute_features(
    terms: &[TermTables],
    tr: &Transition,
    rule: &Rule,
    pts: &[(f64, f64, f64)],
    feat: &mut [Vec<f64>; 7],
) {
    let need = |f: &dyn Fn(Feature) -> bool| terms.iter().any(|t| f(t.feature));
    let np = pts.len();
    for v in feat.iter_mut() {
        v.clear();
    }
    if need(&|f| f == Feature::X) {
        feat[0].extend(pts.iter().map(|p| p.0));
    }
    if need(&|f| f == Feature::Y) {
        feat[1].extend(pts.iter().map(|p| p.1));
    }
    if need(&|f| f == Feature::Radius) {
        let (cx, cy) = rule.centre;
        feat[2].extend(
            pts.iter()
                .map(|p| ((p.0 - cx) * (p.0 - cx) + (p.1 - cy) * (p.1 - cy)).sqrt()),
        );
    }
    let (px, py) = tr.prev;
    if need(&|f| matches!(f, Feature::Dist | Feature::RelAngle)) {
        feat[3].extend(
            pts.iter()
                .map(|p| ((p.0 - px) * (p.0 - px) + (p.1 - py) * (p.1 - py)).sqrt()),
        );
    }
    if need(&|f| f == Feature::Angle) {
        feat[6].extend(pts.iter().map(|p| pseudo_angle(p.0 - px, p.1 - py)));
    }
    if need(&|f| f == Feature::RelAngle) {
        feat[4].extend(pts.iter().map(|p| {
            let (dx, dy) = (p.0 - px, p.1 - py);
            let a = fast_atan2(dy, dx);
            if a == -PI {
                PI
            } else if dx == 0.0 && dy == 0.0 {
                0.0
            } else {
                a
            }
        }));
    }
    if need(&|f| f == Feature::RelAngle) {
        let (dist, angle) = (&feat[3], &feat[4]);
        let rel: Vec<f64> = (0..np)
            .map(|q| match tr.angle_prev {
                Some(ap) if dist[q] != 0.0 => wrap_angle(angle[q] - ap),
                _ => 0.0,
            })
            .collect();
        feat[5] = rel;
    }
}

/// Log normaliser (and mean design row) of one transition.
fn one(
    rule: &Rule,
    maps: &[MapFeature],
    terms: &[TermTables],
    tr: &Transition,
    gradient: bool,
    ncoef: usize,
    s: &mut Scratch,
) -> (f64, Vec<f64>) {
    points(rule, tr.prev, &mut s.pts);
    s.eta.clear();
    s.eta.extend(s.pts.iter().map(|p| p.2));
    if gradient {
        s.loc.resize_with(terms.len(), Vec::new);
        for l in s.loc.iter_mut() {
            l.clear();
        }
    }
    let Scratch {
        pts,
        feat,
        mapv,
        eta,
        loc,
        ..
    } = s;
    let tabs: Vec<&[f64]> = terms
        .iter()
        .enumerate()
        .map(|(k, t)| &t.values[tr.table[k] * t.n..(tr.table[k] + 1) * t.n])
        .collect();
    // Blocks of points small enough for the feature arrays to stay in the first-level cache.
    for (b, block) in pts.chunks(BLOCK).enumerate() {
        compute_features(terms, tr, rule, block, feat);
        let eta = &mut eta[b * BLOCK..b * BLOCK + block.len()];
        for (k, t) in terms.iter().enumerate() {
            let values: &[f64] = match (slot(t.feature), t.feature) {
                (Some(j), _) => &feat[j],
                (None, Feature::Map(m)) => {
                    let map = &maps[m].maps[tr.map[m]];
                    mapv.clear();
                    mapv.extend(block.iter().map(|p| map.at_point(p.0, p.1, rule.window)));
                    mapv
                }
                _ => unreachable!("every feature has a slot or is a map"),
            };
            let tab = tabs[k];
            for (e, &v) in eta.iter_mut().zip(values) {
                let (i, w) = t.locate(v);
                *e += tab[i] + w * (tab[i + 1] - tab[i]);
            }
            if gradient {
                loc[k].extend(values.iter().map(|&v| t.locate(v)));
            }
        }
    }
    let mx = s.eta.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !mx.is_finite() {
        return (mx, vec![f64::NAN; if gradient { ncoef } else { 0 }]);
    }
    for e in s.eta.iter_mut() {
        *e = (*e - mx).exp();
    }
    let total: f64 = s.eta.iter().sum();
    let log_z = mx + total.ln();
    if !gradient {
        return (log_z, Vec::new());
    }
    // The design row is linear in the table rows: accumulate each point's weight on the two
    // rows it interpolates, then one pass over the basis table per term.
    let mut mean = vec![0.0; ncoef];
    let inv_total = 1.0 / total;
    for (k, t) in terms.iter().enumerate() {
        let Some(basis) = &t.basis else { continue };
        s.bins.clear();
        s.bins.resize(t.n, 0.0);
        for (&(i, w), &e) in s.loc[k].iter().zip(&s.eta) {
            let p = e * inv_total;
            s.bins[i] += p - p * w;
            s.bins[i + 1] += p * w;
        }
        let nc = t.cols.len();
        for c in 0..nc {
            let at = (tr.table[k] * nc + c) * t.n;
            mean[t.cols[c]] += dot(&s.bins, &basis[at..at + t.n]);
        }
    }
    (log_z, mean)
}

/// Dot product in four lanes (a fixed order: the same result on any thread).
#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..4 {
            acc[j] += x[j] * y[j];
        }
    }
    let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// Log normaliser and mean design row of one transition.
type One = (f64, Vec<f64>);

/// Log normaliser of each transition under the rule (and with `gradient`, the mean of the
/// kernel's design row under each normalised density, `ncoef` columns). Transitions are split
/// into fixed chunks and each is computed on its own, so results do not depend on the number
/// of threads. `stop` is polled between chunks.
pub fn log_normalisers(
    rule: &Rule,
    maps: &[MapFeature],
    terms: &[TermTables],
    trans: &[Transition],
    ncoef: usize,
    gradient: bool,
    stop: &AtomicBool,
) -> Result<Normalisers> {
    check(rule, maps, terms, trans, ncoef)?;
    let grad = gradient && terms.iter().any(|t| t.basis.is_some());
    let chunks: Vec<Result<Vec<One>>> = trans
        .par_chunks(16)
        .map(|ch| {
            if stop.load(Ordering::Relaxed) {
                return Err(NceError::Interrupted);
            }
            let mut s = Scratch::default();
            Ok(ch
                .iter()
                .map(|tr| one(rule, maps, terms, tr, grad, ncoef, &mut s))
                .collect())
        })
        .collect();
    let mut log_z = Vec::with_capacity(trans.len());
    let mut mean_x = if gradient {
        Vec::with_capacity(trans.len() * ncoef)
    } else {
        Vec::new()
    };
    for ch in chunks {
        for (lz, m) in ch? {
            log_z.push(lz);
            if gradient {
                if grad {
                    mean_x.extend(m);
                } else {
                    mean_x.extend(std::iter::repeat(0.0).take(ncoef));
                }
            }
        }
    }
    Ok(Normalisers {
        log_z,
        mean_x: gradient.then_some(mean_x),
    })
}

#[cfg(test)]
mod tests {
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
        let stop = AtomicBool::new(false);
        let t = table(Feature::Map(0), 0.0, 1.0, 3, |v| v);
        assert!(log_normalisers(&rule((4, 3), 1), &[], &[t], &[tr(1.0, 1.0, 1)], 0, false, &stop).is_err());
        let t = table(Feature::X, 0.0, 1.0, 3, |v| v);
        assert!(log_normalisers(
            &rule((4, 3), 1),
            &[],
            std::slice::from_ref(&t),
            &[tr(1.0, 1.0, 0)],
            0,
            false,
            &stop
        )
        .is_err());
        assert!(log_normalisers(
            &rule((0, 3), 1),
            &[],
            std::slice::from_ref(&t),
            &[tr(1.0, 1.0, 1)],
            0,
            false,
            &stop
        )
        .is_err());
        let bad = |r: Rule, t: &TermTables| {
            log_normalisers(&r, &[], std::slice::from_ref(t), &[tr(1.0, 1.0, 1)], 0, false, &stop)
        };
        assert!(bad(rule((100_000, 100_000), 1), &t).is_err()); // 1e10 points: refused before allocating
        assert!(log_normalisers(&rule((4, 3), 1), &[], &[t], &[tr(f64::NAN, 1.0, 1)], 0, false, &stop).is_err());
    }
}

#[cfg(test)]
mod speed {
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
                (0..n).map(|i| (lo + i as f64 * step).sin()).collect(),
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
            let out = pool
                .install(|| log_normalisers(&rule, &[], &terms, &trans, 0, false, &AtomicBool::new(false)).unwrap());
            let el = t.elapsed().as_secs_f64();
            let mut pts = Vec::new();
            points(&rule, (0.0, 0.0), &mut pts);
            println!(
                "terms {pick:?}: {:.1} ns per point, {}",
                el / (400.0 * pts.len() as f64) * 1e9,
                out.log_z[0]
            );
        }
    }
}
