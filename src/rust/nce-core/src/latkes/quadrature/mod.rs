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
use std::collections::{HashMap, HashSet};
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
        // Truncation is the floor for pos >= 0 (and 0 below, clamped there anyway); as float
        // operations, so that read_table_avx2() does the same in vector lanes.
        let i = pos.max(0.0).trunc().min((self.n - 2) as f64);
        (i as usize, pos - i)
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
#[inline(always)]
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
#[inline(always)]
pub fn pseudo_angle(dx: f64, dy: f64) -> f64 {
    // Selects, not branches, so that loops over points run in vector lanes.
    let s = dx.abs() + dy.abs();
    let p = (1.0 - dx / s).copysign(dy);
    let p = if p == -2.0 { 2.0 } else { p };
    if s == 0.0 {
        0.0
    } else {
        p
    }
}

/// Angles wrapped to (-pi, pi], as R's `wrap_angle()`.
#[inline(always)]
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
        if t.n < 2
            || t.n > i32::MAX as usize
            || t.values.is_empty()
            || t.values.len() % t.n != 0
            || !(t.step > 0.0)
            || !t.lo.is_finite()
        {
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

/// The rule's points for one previous fixation, as rows: the whole cells of an `nx` x `ny`
/// lattice less the block of `refine` x `refine` cells around the previous fixation, then that
/// block's sub-cells (`SUB` per cell and side), which lie on the window's fine lattice.
/// What every transition's rule reads: the rule, the lattice centred on the transition, the
/// window maps and the term tables.
#[derive(Clone, Copy)]
struct Shared<'k> {
    rule: &'k Rule,
    lat: &'k Lattice,
    maps: &'k [MapFeature<'k>],
    terms: &'k [TermTables],
}

struct Lattice {
    xs: Vec<f64>,
    ys: Vec<f64>,
    /// Centres of the fine lattice's cells.
    fine_xs: Vec<f64>,
    fine_ys: Vec<f64>,
    /// The window's lower corner and a whole cell's sides.
    origin: (f64, f64),
    h: (f64, f64),
    /// Log area of a whole cell.
    log_cell: f64,
    /// The refined block's cells (columns, rows; half-open), empty without refinement.
    block: ([usize; 2], [usize; 2]),
}

/// One row of points: height, abscissae, whether they are whole cells (or sub-cells), and the
/// index of the first in its lattice (row-major).
struct Row<'a> {
    y: f64,
    xs: &'a [f64],
    whole: bool,
    at: usize,
}

impl Lattice {
    fn new(rule: &Rule) -> Self {
        let [x0, x1, y0, y1] = rule.window;
        let (nx, ny) = rule.grid;
        let hx = (x1 - x0) / nx as f64;
        let hy = (y1 - y0) / ny as f64;
        let fine = |lo: f64, h: f64, n: usize| -> Vec<f64> {
            (0..n)
                .flat_map(|i| (0..SUB).map(move |a| lo + (i as f64 + (a as f64 + 0.5) / SUB as f64) * h))
                .collect()
        };
        Lattice {
            xs: (0..nx).map(|i| x0 + (i as f64 + 0.5) * hx).collect(),
            ys: (0..ny).map(|j| y0 + (j as f64 + 0.5) * hy).collect(),
            fine_xs: if rule.refine > 0 { fine(x0, hx, nx) } else { Vec::new() },
            fine_ys: if rule.refine > 0 { fine(y0, hy, ny) } else { Vec::new() },
            origin: (x0, y0),
            h: (hx, hy),
            log_cell: (hx * hy).ln(),
            block: ([0, 0], [0, 0]),
        }
    }

    /// Places the refined block around `prev` (the cell holding it, clamped into the window, as
    /// R's window_points()).
    fn centre_on(&mut self, rule: &Rule, prev: (f64, f64)) {
        let ((x0, y0), (hx, hy)) = (self.origin, self.h);
        let (nx, ny) = rule.grid;
        let cell =
            |p: f64, lo: f64, h: f64, n: usize| -> usize { ((p - lo) / h).ceil().clamp(1.0, n as f64) as usize - 1 };
        let (cx, cy) = (cell(prev.0, x0, hx, nx), cell(prev.1, y0, hy, ny));
        let half = rule.refine / 2;
        self.block = if rule.refine == 0 {
            ([0, 0], [0, 0])
        } else {
            (
                [cx.saturating_sub(half), (cx + half + 1).min(nx)],
                [cy.saturating_sub(half), (cy + half + 1).min(ny)],
            )
        };
    }

    /// Calls `f` on each row of at most BLOCK points: the whole cells row by row, then the
    /// sub-cells of the refined block.
    fn rows(&self, mut f: impl FnMut(Row)) {
        let nx = self.xs.len();
        let ([bx0, bx1], [by0, by1]) = self.block;
        for (j, &y) in self.ys.iter().enumerate() {
            if (by0..by1).contains(&j) {
                emit(&mut f, y, &self.xs[..bx0], true, j * nx);
                emit(&mut f, y, &self.xs[bx1..], true, j * nx + bx1);
            } else {
                emit(&mut f, y, &self.xs, true, j * nx);
            }
        }
        let fx = &self.fine_xs[(bx0 * SUB).min(self.fine_xs.len())..(bx1 * SUB).min(self.fine_xs.len())];
        for jy in by0 * SUB..by1 * SUB {
            emit(&mut f, self.fine_ys[jy], fx, false, jy * SUB * nx + bx0 * SUB);
        }
    }

    /// Calls `f` on each row of the whole cells (`fine` false) or of the fine lattice.
    fn all_rows(&self, fine: bool, mut f: impl FnMut(Row)) {
        let (xs, ys) = if fine {
            (&self.fine_xs, &self.fine_ys)
        } else {
            (&self.xs, &self.ys)
        };
        for (j, &y) in ys.iter().enumerate() {
            emit(&mut f, y, xs, !fine, j * xs.len());
        }
    }
}

/// Passes a row to `f` in parts of at most BLOCK points.
#[inline]
fn emit(f: &mut impl FnMut(Row), y: f64, xs: &[f64], whole: bool, at: usize) {
    for (c, part) in xs.chunks(BLOCK).enumerate() {
        f(Row {
            y,
            xs: part,
            whole,
            at: at + c * BLOCK,
        });
    }
}

/// Scratch space of one worker: the features the terms read at a row's points (one array
/// each, so that each loop is tight), and the per-point accumulators of the two rules.
#[derive(Default)]
struct Scratch {
    feat: [Vec<f64>; 7],
    mapv: Vec<f64>,
    /// Log rule: eta at every point of the transition; product rule: a row's products.
    eta: Vec<f64>,
    /// Product rule: a row's sums of interpolation increments.
    inc: Vec<f64>,
    /// Per term and point (log rule: of the transition; product rule: of a row): table
    /// positions, only with the gradient.
    loc: Vec<Loc>,
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

/// Whether a feature is a function of the position alone (not of the saccade).
#[inline]
fn is_position(f: Feature) -> bool {
    matches!(f, Feature::X | Feature::Y | Feature::Radius | Feature::Map(_))
}

/// Which window features some of the terms read (see [`compute_features`]).
#[derive(Clone, Copy)]
struct Wanted {
    x: bool,
    y: bool,
    radius: bool,
    dist: bool,
    angle: bool,
    rel_angle: bool,
}

impl Wanted {
    /// The features that terms `idx` read (the turn needs the distance too).
    fn of(terms: &[TermTables], idx: &[usize]) -> Self {
        let need = |f: &dyn Fn(Feature) -> bool| idx.iter().any(|&k| f(terms[k].feature));
        Wanted {
            x: need(&|f| f == Feature::X),
            y: need(&|f| f == Feature::Y),
            radius: need(&|f| f == Feature::Radius),
            dist: need(&|f| matches!(f, Feature::Dist | Feature::RelAngle)),
            angle: need(&|f| f == Feature::Angle),
            rel_angle: need(&|f| f == Feature::RelAngle),
        }
    }
}

crate::engine::simd::avx2_twin! {
    /// The `want`ed window features at the points of `row`, as R's latkes_features(): angles on
    /// (-pi, pi], 0 where the saccade has no direction; the turn is 0 where either saccade has
    /// length 0.
    fn compute_features(want: Wanted, tr: &Transition, rule: &Rule, row: &Row, feat: &mut [Vec<f64>; 7])
        => compute_features_body
}

#[inline(always)]
fn compute_features_body(want: Wanted, tr: &Transition, rule: &Rule, row: &Row, feat: &mut [Vec<f64>; 7]) {
    let (xs, y) = (row.xs, row.y);
    for v in feat.iter_mut() {
        v.clear();
    }
    if want.x {
        feat[0].extend_from_slice(xs);
    }
    if want.y {
        feat[1].resize(xs.len(), y);
    }
    if want.radius {
        let (cx, cy) = rule.centre;
        let dy2 = (y - cy) * (y - cy);
        feat[2].extend(xs.iter().map(|&x| ((x - cx) * (x - cx) + dy2).sqrt()));
    }
    let (px, py) = tr.prev;
    let dy = y - py;
    if want.dist {
        feat[3].extend(xs.iter().map(|&x| ((x - px) * (x - px) + dy * dy).sqrt()));
    }
    if want.angle {
        feat[6].extend(xs.iter().map(|&x| pseudo_angle(x - px, dy)));
    }
    if want.rel_angle {
        let ap = tr.angle_prev;
        let (dist, rest) = feat.split_at_mut(4);
        rest[1].extend(xs.iter().zip(&dist[3]).map(|(&x, &d)| {
            let dx = x - px;
            let a = fast_atan2(dy, dx);
            let a = if a == -PI {
                PI
            } else if dx == 0.0 && dy == 0.0 {
                0.0
            } else {
                a
            };
            match ap {
                Some(ap) if d != 0.0 => wrap_angle(a - ap),
                _ => 0.0,
            }
        }));
    }
}

/// The values of the feature term `t` reads at the row's points.
fn term_values<'a>(
    t: &TermTables,
    feat: &'a [Vec<f64>; 7],
    mapv: &'a mut Vec<f64>,
    maps: &[MapFeature],
    tr: &Transition,
    rule: &Rule,
    row: &Row,
) -> &'a [f64] {
    match (slot(t.feature), t.feature) {
        (Some(j), _) => &feat[j],
        (None, Feature::Map(m)) => {
            let map = &maps[m].maps[tr.map[m]];
            mapv.clear();
            mapv.extend(row.xs.iter().map(|&x| map.at_point(x, row.y, rule.window)));
            mapv
        }
        _ => unreachable!("every feature has a slot or is a map"),
    }
}

/// Log normaliser of one transition by log-sum-exp over the points, the rule for any kernel
/// ([`one_product`] is faster where it applies), and the sum of the point weights; with the
/// gradient, each term's table-row weights are left in `bins` (they sum to that total).
fn one(q: Shared, tr: &Transition, gradient: bool, s: &mut Scratch, bins: &mut [&mut [f64]]) -> (f64, f64) {
    let Shared { rule, lat, maps, terms } = q;
    let all: Vec<usize> = (0..terms.len()).collect();
    let la_sub = lat.log_cell - ((SUB * SUB) as f64).ln();
    s.eta.clear();
    s.loc.resize_with(terms.len(), Loc::default);
    for l in s.loc.iter_mut() {
        l.i.clear();
        l.w.clear();
    }
    let Scratch {
        feat, mapv, eta, loc, ..
    } = s;
    let want = Wanted::of(terms, &all);
    lat.rows(|row| {
        compute_features(want, tr, rule, &row, feat);
        let start = eta.len();
        let la = if row.whole { lat.log_cell } else { la_sub };
        eta.resize(start + row.xs.len(), la);
        let eta = &mut eta[start..];
        for (k, t) in terms.iter().enumerate() {
            let values = term_values(t, feat, mapv, maps, tr, rule, &row);
            let tab = &t.values[tr.table[k] * t.n..(tr.table[k] + 1) * t.n];
            for (e, &v) in eta.iter_mut().zip(values) {
                let (i, w) = t.locate(v);
                *e += tab[i] + w * (tab[i + 1] - tab[i]);
            }
            if gradient {
                for &v in values {
                    let (i, w) = t.locate(v);
                    loc[k].i.push(i as u32);
                    loc[k].w.push(w);
                }
            }
        }
    });
    let mx = s.eta.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !mx.is_finite() {
        return (mx, f64::NAN);
    }
    for e in s.eta.iter_mut() {
        *e = (*e - mx).exp();
    }
    let total: f64 = s.eta.iter().sum();
    let log_z = mx + total.ln();
    if !gradient {
        return (log_z, total);
    }
    // The design row is linear in the table rows: accumulate each point's weight on the two
    // rows it interpolates (then one product with the basis tables per chunk: mean_rows()).
    for (b, l) in bins.iter_mut().zip(&s.loc) {
        b.fill(0.0);
        spread(b, &l.i, &l.w, &s.eta);
    }
    (log_z, total)
}

/// Adds each point's weight `f` at table position (`i`, `w`) to the table rows it
/// interpolates: f (1 - w) to row i, f w to row i + 1 (adjacent: one cache line, mostly).
#[inline]
fn spread(bins: &mut [f64], i: &[u32], w: &[f64], f: &[f64]) {
    for ((&i, &w), &f) in i.iter().zip(w).zip(f) {
        let i = i as usize;
        let fw = f * w;
        bins[i] += f - fw;
        bins[i + 1] += fw;
    }
}

/// A term's tables as [`one_product`] reads them: interval i of table t holds
/// `[exp(v_i - top_t), v_{i+1} - v_i]`, `top_t` being table t's largest value, so that the
/// interpolated kernel's exponential is a product of table entries and one exponential of a
/// small number per point.
struct ProductTables {
    pairs: Vec<[f64; 2]>,
    top: Vec<f64>,
}

impl ProductTables {
    /// None when a table value is not finite (the log rule then handles every transition).
    fn new(t: &TermTables) -> Option<Self> {
        if !t.values.iter().all(|v| v.is_finite()) {
            return None;
        }
        let n = t.n;
        let mut pairs = Vec::with_capacity(t.values.len());
        let mut top = Vec::with_capacity(t.n_tables());
        for v in t.values.chunks_exact(n) {
            let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            top.push(m);
            pairs.extend(v.windows(2).map(|w| [(w[0] - m).exp(), w[1] - w[0]]));
            pairs.push([(v[n - 1] - m).exp(), 0.0]); // never read: keeps n entries per table
        }
        Some(ProductTables { pairs, top })
    }
}

/// Where the Taylor series of [`exp_series`] is used.
const SERIES_RANGE: f64 = 0.125;

/// exp(s) for |s| <= SERIES_RANGE by its Taylor series to s^7 (relative error below 2e-13;
/// the increments of linear interpolation on fine tables are that small).
#[inline(always)]
fn exp_series(s: f64) -> f64 {
    // Constants as products, not quotients: a division per point costs as much as the rest.
    const C: [f64; 8] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
    ];
    C.iter().rev().fold(0.0, |acc, &c| acc * s + c)
}

crate::engine::simd::avx2_twin! {
    /// Multiplies each `wt` by exp of its `inc`: by the series in one branch-free pass where
    /// every increment is in its range (so the pass runs in vector lanes), else point by point.
    fn scale_by_exp(wt: &mut [f64], inc: &[f64]) => scale_by_exp_body
}

#[inline(always)]
fn scale_by_exp_body(wt: &mut [f64], inc: &[f64]) {
    if inc.iter().all(|s| s.abs() <= SERIES_RANGE) {
        for (w, &s) in wt.iter_mut().zip(inc) {
            *w *= exp_series(s);
        }
    } else {
        for (w, &s) in wt.iter_mut().zip(inc) {
            *w *= if s.abs() <= SERIES_RANGE {
                exp_series(s)
            } else {
                s.exp()
            };
        }
    }
}

/// Sum in four lanes (a fixed order, so the same on any thread; no chain of dependent adds).
#[inline]
fn sum4(a: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let ch = a.chunks_exact(4);
    let rest = ch.remainder();
    for x in ch {
        for j in 0..4 {
            acc[j] += x[j];
        }
    }
    let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for x in rest {
        sum += x;
    }
    sum
}

/// The position terms' factors on one lattice (the whole cells, or the fine lattice of the
/// sub-cells), for one choice of their tables and maps: per cell (row-major) the product of
/// their exp(v_i - top) exp(w d_i), and (with the gradient) each one's table position.
#[derive(Default)]
struct PositionCells {
    wt: Vec<f64>,
    loc: Vec<Loc>,
}

impl PositionCells {
    fn new(plan: &ProductPlan, q: Shared, fine: bool, tr: &Transition, gradient: bool, s: &mut Scratch) -> Self {
        let mut out = PositionCells {
            wt: Vec::new(),
            loc: vec![Loc::default(); if gradient { plan.pos.len() } else { 0 }],
        };
        q.lat.all_rows(fine, |row| {
            let (pw, pl) = product_row(&plan.prod, &plan.pos, q, tr, &row, gradient, s);
            out.wt.extend_from_slice(pw);
            for (a, b) in out.loc.iter_mut().zip(pl) {
                a.i.extend_from_slice(&b.i);
                a.w.extend_from_slice(&b.w);
            }
        });
        out
    }
}

/// What the product rule shares across transitions: the tables as products, which terms are
/// functions of the position alone, and their factors on the whole cells and on the fine
/// lattice by choice of tables and maps (see [`position_key`]; each left empty where it would
/// cost more than it saves, or too much memory).
struct ProductPlan {
    prod: Vec<ProductTables>,
    pos: Vec<usize>,
    saccade: Vec<usize>,
    all: Vec<usize>,
    cells: HashMap<Vec<usize>, [PositionCells; 2]>,
}

/// The tables and maps of a transition's position terms.
fn position_key(terms: &[TermTables], pos: &[usize], tr: &Transition) -> Vec<usize> {
    pos.iter()
        .flat_map(|&k| {
            let map = match terms[k].feature {
                Feature::Map(m) => tr.map[m],
                _ => 0,
            };
            [tr.table[k], map]
        })
        .collect()
}

/// Numbers kept by the precomputed position factors of one call, at most (80 MB).
const MAX_KEPT: f64 = 1e7;

impl ProductPlan {
    /// None when a table holds a non-finite value.
    fn new(
        rule: &Rule,
        lat: &Lattice,
        maps: &[MapFeature],
        terms: &[TermTables],
        trans: &[Transition],
        gradient: bool,
    ) -> Option<Self> {
        let prod: Vec<ProductTables> = terms.iter().map(ProductTables::new).collect::<Option<_>>()?;
        let (pos, saccade): (Vec<usize>, Vec<usize>) = (0..terms.len()).partition(|&k| is_position(terms[k].feature));
        let mut plan = ProductPlan {
            prod,
            pos,
            saccade,
            all: (0..terms.len()).collect(),
            cells: HashMap::new(),
        };
        if plan.pos.is_empty() {
            return Some(plan);
        }
        let mut keys: Vec<(Vec<usize>, &Transition)> = Vec::new();
        let mut seen = HashSet::new();
        for tr in trans {
            let key = position_key(terms, &plan.pos, tr);
            if seen.insert(key.clone()) {
                keys.push((key, tr));
            }
        }
        // A lattice is precomputed when that costs at most half the points it saves (each
        // transition visits all whole cells but only refine^2 of the cells' sub-cells), within
        // MAX_KEPT numbers (one per cell, and two per cell and term with the gradient).
        let nk = keys.len() as f64;
        let per = 1.0 + if gradient { 2.0 * plan.pos.len() as f64 } else { 0.0 };
        let n_whole = (lat.xs.len() * lat.ys.len()) as f64;
        let n_fine = (lat.fine_xs.len() * lat.fine_ys.len()) as f64;
        let visits = trans.len() as f64;
        let whole = 2.0 * nk <= visits && nk * n_whole * per <= MAX_KEPT;
        let sub_visits = visits * ((rule.refine * SUB) as f64).powi(2);
        let fine =
            whole && n_fine > 0.0 && 2.0 * nk * n_fine <= sub_visits && nk * (n_whole + n_fine) * per <= MAX_KEPT;
        if !whole {
            return Some(plan);
        }
        let mut s = Scratch::default();
        for (key, tr) in keys {
            let q = Shared { rule, lat, maps, terms };
            let w = PositionCells::new(&plan, q, false, tr, gradient, &mut s);
            let f = if fine {
                PositionCells::new(&plan, q, true, tr, gradient, &mut s)
            } else {
                PositionCells::default()
            };
            plan.cells.insert(key, [w, f]);
        }
        Some(plan)
    }
}

/// The factors of terms `idx` at the points of a row: exp(sum of v_i - top) exp(sum of w d_i),
/// and (with the gradient) each term's table positions, left in `s.eta` and `s.loc[..idx.len()]`.
fn product_row<'s>(
    prod: &[ProductTables],
    idx: &[usize],
    q: Shared,
    tr: &Transition,
    row: &Row,
    gradient: bool,
    s: &'s mut Scratch,
) -> (&'s mut [f64], &'s [Loc]) {
    let Shared { rule, maps, terms, .. } = q;
    let Scratch {
        feat,
        mapv,
        eta,
        inc,
        loc,
        ..
    } = s;
    compute_features(Wanted::of(terms, idx), tr, rule, row, feat);
    let np = row.xs.len();
    eta.clear();
    eta.resize(np, 1.0);
    inc.clear();
    inc.resize(np, 0.0);
    if gradient {
        loc.resize_with(idx.len().max(loc.len()), Loc::default);
    }
    for (slot, &k) in idx.iter().enumerate() {
        let t = &terms[k];
        let values = term_values(t, feat, mapv, maps, tr, rule, row);
        let pairs = &prod[k].pairs[tr.table[k] * t.n..(tr.table[k] + 1) * t.n];
        let l = if gradient {
            let l = &mut loc[slot];
            l.i.resize(np, 0);
            l.w.resize(np, 0.0);
            Some(l)
        } else {
            None
        };
        read_table(t, pairs, values, &mut Reading { wt: eta, inc, loc: l });
    }
    scale_by_exp(eta, inc);
    (&mut eta[..], &loc[..if gradient { idx.len() } else { 0 }])
}

/// Table positions of a row's points for one term (the product rule's, with the gradient):
/// the lower table row and the upper one's weight.
#[derive(Clone, Default)]
struct Loc {
    i: Vec<u32>,
    w: Vec<f64>,
}

/// The product rule's reading of one term's table (`pairs`, see [`ProductTables`]) at the
/// feature `values` of a row: multiplies each `wt` by exp(v_i - top), adds w d_i to each
/// `inc`, and records the positions in `loc` when given. With AVX2, four points at a time
/// (gathering the table entries), with the same operations in the same order: the same bits.
fn read_table(t: &TermTables, pairs: &[[f64; 2]], values: &[f64], out: &mut Reading) {
    let n = values.len();
    assert!(
        out.wt.len() == n
            && out.inc.len() == n
            && pairs.len() == t.n
            && out.loc.as_ref().map_or(true, |l| l.i.len() == n && l.w.len() == n)
    );
    #[allow(unused_mut)]
    let mut start = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::engine::simd::vector() {
        // SAFETY: every vector build has AVX2; the lengths are checked above.
        start = unsafe { read_table_avx2(t, pairs, values, out) };
    }
    read_table_scalar(t, pairs, values, out, start);
}

/// What a table's reading updates: the weights it multiplies, the increments it adds to, and
/// the positions it records (when given).
struct Reading<'r> {
    wt: &'r mut [f64],
    inc: &'r mut [f64],
    loc: Option<&'r mut Loc>,
}

/// [`read_table`] one point at a time, from point `start` on.
fn read_table_scalar(t: &TermTables, pairs: &[[f64; 2]], values: &[f64], out: &mut Reading, start: usize) {
    let Reading { wt, inc, loc } = out;
    for q in start..values.len() {
        let (i, w) = t.locate(values[q]);
        let [e, d] = pairs[i];
        wt[q] *= e;
        inc[q] += w * d;
        if let Some(l) = loc.as_deref_mut() {
            l.i[q] = i as u32;
            l.w[q] = w;
        }
    }
}

/// [`read_table`] four points at a time, up to the last multiple of four; returns that count.
/// [`TermTables::locate`] in vector lanes: floor as truncation of the position clamped at 0
/// (max returns 0 for NaN, as f64::max does), then the minimum with n - 2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn read_table_avx2(t: &TermTables, pairs: &[[f64; 2]], values: &[f64], out: &mut Reading) -> usize {
    use std::arch::x86_64::*;
    let Reading { wt, inc, loc } = out;
    let n4 = values.len() - values.len() % 4;
    let base = pairs.as_ptr() as *const f64;
    let lo = _mm256_set1_pd(t.lo);
    let inv = _mm256_set1_pd(t.inv_step);
    let top = _mm256_set1_pd((t.n - 2) as f64);
    let zero = _mm256_setzero_pd();
    let mut q = 0;
    while q < n4 {
        // SAFETY: q + 4 <= n4 <= every slice's length (checked by the caller); the indices are
        // at most n - 2 < pairs.len(), so both gathers read inside `pairs`.
        unsafe {
            let pos = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(values.as_ptr().add(q)), lo), inv);
            let ip = _mm256_min_pd(
                _mm256_round_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(_mm256_max_pd(pos, zero)),
                top,
            );
            let idx = _mm256_cvttpd_epi32(ip);
            let twice = _mm_slli_epi32::<1>(idx);
            let e = _mm256_i32gather_pd::<8>(base, twice);
            let d = _mm256_i32gather_pd::<8>(base.add(1), twice);
            let w = _mm256_sub_pd(pos, ip);
            let pw = wt.as_mut_ptr().add(q);
            _mm256_storeu_pd(pw, _mm256_mul_pd(_mm256_loadu_pd(pw), e));
            let pi = inc.as_mut_ptr().add(q);
            _mm256_storeu_pd(pi, _mm256_add_pd(_mm256_loadu_pd(pi), _mm256_mul_pd(w, d)));
            if let Some(l) = loc.as_deref_mut() {
                _mm_storeu_si128(l.i.as_mut_ptr().add(q) as *mut __m128i, idx);
                _mm256_storeu_pd(l.w.as_mut_ptr().add(q), w);
            }
        }
        q += 4;
    }
    n4
}

/// [`one`] as a product: exp(eta) at a point is exp(sum of the table tops) times, per term,
/// exp(v_i - top) exp(w (v_{i+1} - v_i)), the same linear interpolation of each table as [`one`]
/// reads, without a log-sum-exp pass or one library exponential per point; on whole cells the
/// position terms' factors come precomputed. Returns None when the product underflows (kernels
/// whose table tops are far from their sum's maximum), for [`one`]. Returns as [`one`] does.
fn one_product(
    q: Shared,
    plan: &ProductPlan,
    tr: &Transition,
    gradient: bool,
    s: &mut Scratch,
    bins: &mut [&mut [f64]],
) -> Option<(f64, f64)> {
    let Shared { lat, terms, .. } = q;
    let cells = if plan.cells.is_empty() {
        None
    } else {
        plan.cells.get(&position_key(terms, &plan.pos, tr))
    };
    for b in bins.iter_mut() {
        b.fill(0.0);
    }
    let sub_area = 1.0 / (SUB * SUB) as f64;
    let mut total = 0.0;
    lat.rows(|row| {
        // The position terms' factors, where precomputed on this row's lattice.
        let pc = cells.map(|c| &c[usize::from(!row.whole)]).filter(|c| !c.wt.is_empty());
        let idx = if pc.is_some() { &plan.saccade } else { &plan.all };
        let (wt, loc) = product_row(&plan.prod, idx, q, tr, &row, gradient, s);
        let area = if row.whole { 1.0 } else { sub_area };
        let c = row.at;
        match pc {
            Some(pc) => {
                for (f, &p) in wt.iter_mut().zip(&pc.wt[c..c + row.xs.len()]) {
                    *f *= p * area;
                }
            }
            None => {
                for f in wt.iter_mut() {
                    *f *= area;
                }
            }
        }
        total += sum4(wt);
        if !gradient {
            return;
        }
        // Each point's weight on the two table rows it interpolates, term by term.
        for (l, &k) in loc.iter().zip(idx) {
            spread(bins[k], &l.i, &l.w, wt);
        }
        if let Some(pc) = pc {
            let r = c..c + wt.len();
            for (l, &k) in pc.loc.iter().zip(&plan.pos) {
                spread(bins[k], &l.i[r.clone()], &l.w[r.clone()], wt);
            }
        }
    });
    // Below this, sums lose digits to subnormal numbers: the log rule keeps them.
    if !(total > 1e-280 && total.is_finite()) {
        return None;
    }
    let top: f64 = plan.prod.iter().zip(&tr.table).map(|(p, &j)| p.top[j]).sum();
    Some((top + total.ln() + lat.log_cell, total))
}

/// The kernel's design rows averaged under each transition's density, `ncoef` per transition
/// (row-major), from the terms' table-row weights of the transitions `trans` (`bins[k]`: one
/// row of `n` per transition, summing to its `totals` entry): per term and table, one product
/// of those rows with the table's basis columns.
fn mean_rows(terms: &[TermTables], trans: &[Transition], bins: &[Vec<f64>], totals: &[f64], ncoef: usize) -> Vec<f64> {
    let mut mean = vec![0.0; trans.len() * ncoef];
    let mut gathered = Vec::new();
    let mut c = Vec::new();
    for (k, t) in terms.iter().enumerate() {
        let Some(basis) = &t.basis else { continue };
        let nc = t.cols.len();
        let mut tables: Vec<usize> = trans.iter().map(|tr| tr.table[k]).collect();
        tables.sort_unstable();
        tables.dedup();
        for &j in &tables {
            let rows: Vec<usize> = (0..trans.len()).filter(|&i| trans[i].table[k] == j).collect();
            // The rows of this table, copied together only when tables are mixed.
            let a: &[f64] = if tables.len() == 1 {
                &bins[k]
            } else {
                gathered.clear();
                for &i in &rows {
                    gathered.extend_from_slice(&bins[k][i * t.n..(i + 1) * t.n]);
                }
                &gathered
            };
            c.clear();
            c.resize(rows.len() * nc, 0.0);
            let b = &basis[j * nc * t.n..(j + 1) * nc * t.n];
            // SAFETY: a is rows x n (row-major), b is n x nc (column-major: column c at c * n),
            // c is rows x nc (row-major); the lengths match these shapes.
            unsafe {
                matrixmultiply::dgemm(
                    rows.len(),
                    t.n,
                    nc,
                    1.0,
                    a.as_ptr(),
                    t.n as isize,
                    1,
                    b.as_ptr(),
                    1,
                    t.n as isize,
                    0.0,
                    c.as_mut_ptr(),
                    nc as isize,
                    1,
                );
            }
            for (r, &i) in rows.iter().enumerate() {
                let inv = 1.0 / totals[i];
                for (cc, &col) in t.cols.iter().enumerate() {
                    mean[i * ncoef + col] += c[r * nc + cc] * inv;
                }
            }
        }
    }
    mean
}

/// Transitions per chunk: the unit of work of a thread, of the interrupt poll, and of one
/// matrix product of table-row weights with basis tables (fixed, so results do not depend on
/// the number of threads).
const CHUNK: usize = 32;

/// Log normalisers of a chunk of transitions and their mean design rows.
type Chunk = (Vec<f64>, Vec<f64>);

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
    let base = Lattice::new(rule);
    let plan = ProductPlan::new(rule, &base, maps, terms, trans, grad);
    let chunks: Vec<Result<Chunk>> = trans
        .par_chunks(CHUNK)
        // Scratch kept across a worker's chunks: fresh megabytes per chunk cost page faults.
        .map_init(
            || (Scratch::default(), Lattice::new(rule), Vec::new()),
            |(s, lat, store): &mut (Scratch, Lattice, Vec<Vec<f64>>), ch| {
                if stop.load(Ordering::Relaxed) {
                    return Err(NceError::Interrupted);
                }
                // Per term, the table-row weights of each transition of the chunk, one after another.
                // (Zeroed per transition by the rules, while that part is in cache.)
                store.resize_with(if grad { terms.len() } else { 0 }, Vec::new);
                for (v, t) in store.iter_mut().zip(terms) {
                    v.resize(ch.len() * t.n, 0.0);
                }
                let mut log_z = Vec::with_capacity(ch.len());
                let mut totals = Vec::with_capacity(ch.len());
                for (r, tr) in ch.iter().enumerate() {
                    let mut bins: Vec<&mut [f64]> = store
                        .iter_mut()
                        .zip(terms)
                        .map(|(v, t)| &mut v[r * t.n..(r + 1) * t.n])
                        .collect();
                    lat.centre_on(rule, tr.prev);
                    let q = Shared { rule, lat, maps, terms };
                    let (lz, total) = plan
                        .as_ref()
                        .and_then(|p| one_product(q, p, tr, grad, s, &mut bins))
                        .unwrap_or_else(|| one(q, tr, grad, s, &mut bins));
                    log_z.push(lz);
                    totals.push(total);
                }
                let mean = if grad {
                    mean_rows(terms, ch, store, &totals, ncoef)
                } else {
                    Vec::new()
                };
                Ok((log_z, mean))
            },
        )
        .collect();
    let mut log_z = Vec::with_capacity(trans.len());
    let mut mean_x = if gradient {
        Vec::with_capacity(trans.len() * ncoef)
    } else {
        Vec::new()
    };
    for ch in chunks {
        let (lz, m) = ch?;
        if gradient {
            if grad {
                mean_x.extend(m);
            } else {
                mean_x.extend(std::iter::repeat(0.0).take(ncoef * lz.len()));
            }
        }
        log_z.extend(lz);
    }
    Ok(Normalisers {
        log_z,
        mean_x: gradient.then_some(mean_x),
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod speed;
