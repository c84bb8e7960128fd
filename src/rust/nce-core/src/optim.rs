//! L-BFGS minimisation with a strong-Wolfe line search (bracketing and zoom with safeguarded
//! cubic interpolation, Nocedal and Wright, algorithms 3.5 and 3.6).
//!
//! Objectives may return a non-finite value to say "outside the domain": the line search then
//! shrinks the step towards the last finite point instead of failing.

use crate::convergence::Convergence;
use crate::error::{NceError, Result};

pub trait Objective: Sync {
    fn dim(&self) -> usize;
    /// Value to MINIMISE at `x`; writes the gradient into `grad` (len dim). A non-finite value
    /// means "outside the domain": the line search must back off, not fail.
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> Result<f64>;
}

#[derive(Clone, Debug)]
pub struct LbfgsControl {
    pub maxit: usize,
    /// Converged when max|grad| <= gtol * max(1, |f|).
    pub gtol: f64,
    /// Converged when an iteration's relative decrease (f_prev - f) / max(|f|, 1) < ftol.
    pub ftol: f64,
    /// Number of correction pairs kept.
    pub memory: usize,
}

impl LbfgsControl {
    /// The one set of rules for these settings: at least one iteration and one correction
    /// pair, non-negative tolerances.
    pub fn check(&self) -> Result<()> {
        if self.maxit < 1 || self.memory < 1 || !(self.gtol >= 0.0) || !(self.ftol >= 0.0) {
            return Err(NceError::invalid(
                "control",
                format!(
                    "maxit and memory must be at least 1, gtol and ftol non-negative; got maxit = {}, \
                     memory = {}, gtol = {}, ftol = {}",
                    self.maxit, self.memory, self.gtol, self.ftol
                ),
            ));
        }
        Ok(())
    }
}

impl Default for LbfgsControl {
    fn default() -> Self {
        LbfgsControl {
            maxit: 1000,
            gtol: 1e-6,
            ftol: 1e-12,
            memory: 10,
        }
    }
}

#[derive(Clone, Debug)]
pub struct OptimResult {
    pub x: Vec<f64>,
    pub value: f64,
    pub grad: Vec<f64>,
    pub evaluations: usize,
    pub convergence: Convergence,
}

const C1: f64 = 1e-4;
const C2: f64 = 0.9;
/// Most function evaluations in one line search.
const MAX_LS_EVALS: usize = 60;

/// A trial point on the search line.
struct Trial {
    a: f64,
    f: f64,
    /// Directional derivative g'd (NaN when the value was not finite).
    d: f64,
    x: Vec<f64>,
    g: Vec<f64>,
}

struct Eval<'a> {
    obj: &'a dyn Objective,
    count: usize,
}

impl Eval<'_> {
    fn at(&mut self, x0: &[f64], dir: &[f64], a: f64) -> Result<Trial> {
        let x: Vec<f64> = x0.iter().zip(dir).map(|(xi, di)| xi + a * di).collect();
        let mut g = vec![0.0; x.len()];
        self.count += 1;
        let mut f = self.obj.value_grad(&x, &mut g)?;
        // A NaN value or gradient counts as outside the domain too.
        if f.is_nan() || !g.iter().all(|v| v.is_finite()) {
            f = f64::INFINITY;
        }
        let d = if f.is_finite() { dot(&g, dir) } else { f64::NAN };
        Ok(Trial { a, f, d, x, g })
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(u, v)| u * v).sum()
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, a| m.max(a.abs()))
}

/// Minimiser of the cubic through (a, fa, da) and (b, fb, db), if it exists.
fn cubic_min(a: f64, fa: f64, da: f64, b: f64, fb: f64, db: f64) -> Option<f64> {
    let d1 = da + db - 3.0 * (fa - fb) / (a - b);
    let disc = d1 * d1 - da * db;
    if !(disc >= 0.0) {
        return None;
    }
    let d2 = (b - a).signum() * disc.sqrt();
    let t = b - (b - a) * (db + d2 - d1) / (db - da + 2.0 * d2);
    t.is_finite().then_some(t)
}

/// Minimiser of the quadratic through (a, fa, da) and (b, fb).
fn quad_min(a: f64, fa: f64, da: f64, b: f64, fb: f64) -> Option<f64> {
    let h = b - a;
    let curv = (fb - fa - da * h) / (h * h);
    let t = a - da / (2.0 * curv);
    (curv > 0.0 && t.is_finite()).then_some(t)
}

/// Next trial in the bracket [lo, hi] (either order), kept away from the ends.
fn interpolate(lo: &Trial, hi: &Trial) -> f64 {
    let guess = if hi.f.is_finite() {
        cubic_min(lo.a, lo.f, lo.d, hi.a, hi.f, hi.d).or_else(|| quad_min(lo.a, lo.f, lo.d, hi.a, hi.f))
    } else {
        None // past the domain's edge: bisect
    };
    let (l, h) = (lo.a.min(hi.a), lo.a.max(hi.a));
    let w = h - l;
    match guess {
        Some(t) => t.clamp(l + 0.1 * w, h - 0.1 * w),
        None => 0.5 * (l + h),
    }
}

enum Search {
    /// A point meeting the strong Wolfe conditions.
    Wolfe(Trial),
    /// Sufficient decrease only (the search ran out of room or evaluations).
    Decrease(Trial),
    Failed(String),
}

/// Strong-Wolfe line search from `start` (a = 0) along `dir`, first trial `a0`.
fn line_search(ev: &mut Eval, start: &Trial, dir: &[f64], a0: f64) -> Result<Search> {
    let (f0, d0) = (start.f, start.d);
    let x0 = &start.x;
    let armijo = |t: &Trial| t.f.is_finite() && t.f <= f0 + C1 * t.a * d0;
    let wolfe = |t: &Trial| t.d.abs() <= -C2 * d0;
    let used0 = ev.count;

    let mut prev = Trial {
        a: 0.0,
        f: f0,
        d: d0,
        x: Vec::new(),
        g: Vec::new(),
    };
    let mut a = a0;
    // Smallest step known to leave the domain.
    let mut edge = f64::INFINITY;
    let mut first = true;
    let (mut lo, mut hi) = loop {
        if ev.count - used0 >= MAX_LS_EVALS {
            return Ok(best_or_fail(
                prev,
                "no acceptable step within the line search's evaluation budget",
            ));
        }
        let t = ev.at(x0, dir, a)?;
        if !t.f.is_finite() {
            edge = a;
            a = prev.a + 0.2 * (a - prev.a);
            if a - prev.a <= 1e-16 * a.max(1.0) {
                return Ok(best_or_fail(
                    prev,
                    "the objective is not finite arbitrarily close to the current point",
                ));
            }
            continue;
        }
        if !armijo(&t) || (!first && t.f >= prev.f) {
            break (prev, t);
        }
        if wolfe(&t) {
            return Ok(Search::Wolfe(t));
        }
        if t.d >= 0.0 {
            break (t, prev);
        }
        // Still descending: extrapolate, but stay short of a known edge.
        let mut next = (4.0 * t.a).min(cubic_min(prev.a, prev.f, prev.d, t.a, t.f, t.d).unwrap_or(4.0 * t.a));
        next = next.max(1.1 * t.a);
        if edge.is_finite() {
            next = next.min(0.5 * (t.a + edge));
        }
        prev = t;
        a = next;
        first = false;
    };

    // Zoom: lo has the lowest sufficient-decrease value seen; the minimiser lies between lo and hi.
    loop {
        if ev.count - used0 >= MAX_LS_EVALS {
            return Ok(best_or_fail(
                lo,
                "no strong-Wolfe step within the line search's evaluation budget",
            ));
        }
        if (hi.a - lo.a).abs() <= 1e-14 * lo.a.abs().max(hi.a.abs()) {
            return Ok(best_or_fail(
                lo,
                "the line search's bracket collapsed without a decrease",
            ));
        }
        let a = interpolate(&lo, &hi);
        let t = ev.at(x0, dir, a)?;
        if !armijo(&t) || t.f >= lo.f {
            hi = t;
        } else {
            if wolfe(&t) {
                return Ok(Search::Wolfe(t));
            }
            if t.d * (hi.a - lo.a) >= 0.0 {
                hi = lo;
            }
            lo = t;
        }
    }
}

fn best_or_fail(t: Trial, why: &str) -> Search {
    if t.a > 0.0 {
        Search::Decrease(t)
    } else {
        Search::Failed(why.to_string())
    }
}

/// Minimise `obj` from `x0` by L-BFGS. Stopping for maxit or a failed line search is not an
/// error: `converged` is false and `message` says why, with the best point found.
pub fn minimise_lbfgs(
    obj: &dyn Objective,
    x0: &[f64],
    ctrl: &LbfgsControl,
    interrupt: &mut dyn FnMut() -> bool,
) -> Result<OptimResult> {
    let n = obj.dim();
    if x0.len() != n {
        return Err(NceError::invalid(
            "start",
            format!("has length {} but the objective has {} parameters", x0.len(), n),
        ));
    }
    if let Some(i) = x0.iter().position(|v| !v.is_finite()) {
        return Err(NceError::invalid("start", format!("entry {} is not finite", i + 1)));
    }
    ctrl.check()?;
    let memory = ctrl.memory;
    let mut ev = Eval { obj, count: 0 };
    let zero = vec![0.0; n];
    let mut cur = ev.at(x0, &zero, 0.0)?;
    if !cur.f.is_finite() {
        return Err(NceError::invalid(
            "start",
            "the objective (or its gradient) is not finite at the start",
        ));
    }
    let finish = |cur: Trial, it: usize, ev: &Eval, converged: bool, message: String| OptimResult {
        x: cur.x,
        value: cur.f,
        grad: cur.g,
        evaluations: ev.count,
        convergence: Convergence {
            iterations: it,
            converged,
            message,
        },
    };
    if max_abs(&cur.g) <= ctrl.gtol * cur.f.abs().max(1.0) {
        return Ok(finish(cur, 0, &ev, true, "gradient below gtol at the start".into()));
    }

    let mut s_hist: Vec<Vec<f64>> = Vec::with_capacity(memory);
    let mut y_hist: Vec<Vec<f64>> = Vec::with_capacity(memory);
    let mut rho: Vec<f64> = Vec::with_capacity(memory);
    let mut alpha = vec![0.0; memory];
    for it in 1..=ctrl.maxit {
        if interrupt() {
            return Err(NceError::Interrupted);
        }
        // Two-loop recursion for d = -H g.
        let mut dir: Vec<f64> = cur.g.iter().map(|v| -v).collect();
        let k = s_hist.len();
        for j in (0..k).rev() {
            alpha[j] = rho[j] * dot(&s_hist[j], &dir);
            for (di, yi) in dir.iter_mut().zip(&y_hist[j]) {
                *di -= alpha[j] * yi;
            }
        }
        if k > 0 {
            let gamma = dot(&s_hist[k - 1], &y_hist[k - 1]) / dot(&y_hist[k - 1], &y_hist[k - 1]);
            dir.iter_mut().for_each(|v| *v *= gamma);
        }
        for j in 0..k {
            let b = rho[j] * dot(&y_hist[j], &dir);
            for (di, si) in dir.iter_mut().zip(&s_hist[j]) {
                *di += (alpha[j] - b) * si;
            }
        }
        let mut deriv = dot(&cur.g, &dir);
        if !(deriv < 0.0) || !deriv.is_finite() {
            // Not a descent direction (round-off in the memory): restart from steepest descent.
            s_hist.clear();
            y_hist.clear();
            rho.clear();
            dir = cur.g.iter().map(|v| -v).collect();
            deriv = dot(&cur.g, &dir);
        }
        cur.d = deriv;
        let a0 = if s_hist.is_empty() {
            (1.0 / dot(&dir, &dir).sqrt()).min(1.0)
        } else {
            1.0
        };

        let mut outcome = line_search(&mut ev, &cur, &dir, a0)?;
        if let Search::Failed(_) = outcome {
            if !s_hist.is_empty() {
                // Retry once along steepest descent with the memory dropped.
                s_hist.clear();
                y_hist.clear();
                rho.clear();
                dir = cur.g.iter().map(|v| -v).collect();
                cur.d = dot(&cur.g, &dir);
                let a0 = (1.0 / dot(&dir, &dir).sqrt()).min(1.0);
                outcome = line_search(&mut ev, &cur, &dir, a0)?;
            }
        }
        let next = match outcome {
            Search::Wolfe(t) | Search::Decrease(t) => t,
            Search::Failed(why) => {
                return Ok(finish(cur, it - 1, &ev, false, format!("line search failed: {why}")));
            }
        };

        let s: Vec<f64> = next.x.iter().zip(&cur.x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = next.g.iter().zip(&cur.g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        // Keep the pair only when it keeps H positive definite.
        if sy > 1e-12 * dot(&y, &y).sqrt() * dot(&s, &s).sqrt() && sy > 0.0 {
            if s_hist.len() == memory {
                s_hist.remove(0);
                y_hist.remove(0);
                rho.remove(0);
            }
            s_hist.push(s);
            y_hist.push(y);
            rho.push(1.0 / sy);
        }
        let f_prev = cur.f;
        cur = next;
        let scale = cur.f.abs().max(1.0);
        if max_abs(&cur.g) <= ctrl.gtol * scale {
            return Ok(finish(cur, it, &ev, true, "gradient below gtol".into()));
        }
        if (f_prev - cur.f) / scale < ctrl.ftol {
            return Ok(finish(cur, it, &ev, true, "relative decrease below ftol".into()));
        }
    }
    let maxit = ctrl.maxit;
    Ok(finish(
        cur,
        maxit,
        &ev,
        false,
        format!("iteration limit maxit = {maxit} reached before convergence"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rosenbrock(usize);
    impl Objective for Rosenbrock {
        fn dim(&self) -> usize {
            self.0
        }
        fn value_grad(&self, x: &[f64], g: &mut [f64]) -> Result<f64> {
            let mut f = 0.0;
            g.iter_mut().for_each(|v| *v = 0.0);
            for i in 0..self.0 - 1 {
                let a = x[i + 1] - x[i] * x[i];
                let b = 1.0 - x[i];
                f += 100.0 * a * a + b * b;
                g[i] += -400.0 * a * x[i] - 2.0 * b;
                g[i + 1] += 200.0 * a;
            }
            Ok(f)
        }
    }

    fn never() -> impl FnMut() -> bool {
        || false
    }

    fn rosen(d: usize, start: &[f64]) {
        let r = minimise_lbfgs(&Rosenbrock(d), start, &LbfgsControl::default(), &mut never()).unwrap();
        assert!(r.convergence.converged, "{}", r.convergence.message);
        let err = r.x.iter().map(|v| (v - 1.0).abs()).fold(0.0, f64::max);
        assert!(
            err < 1e-6,
            "d = {d}: max error {err}, {} iterations, {}",
            r.convergence.iterations,
            r.convergence.message
        );
        eprintln!(
            "rosenbrock d = {d}: error {err:.1e}, {} iterations, {} evaluations, {}",
            r.convergence.iterations, r.evaluations, r.convergence.message
        );
    }

    #[test]
    fn rosenbrock_2_and_10() {
        rosen(2, &[-1.2, 1.0]);
        let s: Vec<f64> = (0..10).map(|i| if i % 2 == 0 { -1.2 } else { 1.0 }).collect();
        rosen(10, &s);
    }

    /// f = (x - c)' A (x - c) / 2 with A = diag(1..50) plus a rank-one coupling.
    struct Quad {
        c: Vec<f64>,
    }
    impl Quad {
        fn apply(&self, v: &[f64]) -> Vec<f64> {
            let s: f64 = v.iter().sum();
            v.iter()
                .enumerate()
                .map(|(i, vi)| (i + 1) as f64 * vi + 0.5 * s)
                .collect()
        }
    }
    impl Objective for Quad {
        fn dim(&self) -> usize {
            self.c.len()
        }
        fn value_grad(&self, x: &[f64], g: &mut [f64]) -> Result<f64> {
            let r: Vec<f64> = x.iter().zip(&self.c).map(|(a, b)| a - b).collect();
            let ar = self.apply(&r);
            g.copy_from_slice(&ar);
            Ok(0.5 * dot(&r, &ar))
        }
    }

    #[test]
    fn convex_quadratic_50() {
        let c: Vec<f64> = (0..50).map(|i| ((i as f64) * 0.7).sin() * 3.0).collect();
        let q = Quad { c: c.clone() };
        let r = minimise_lbfgs(&q, &vec![0.0; 50], &LbfgsControl::default(), &mut never()).unwrap();
        assert!(r.convergence.converged, "{}", r.convergence.message);
        let err = r.x.iter().zip(&c).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(err < 1e-6, "max error {err}");
        assert!(r.value < 1e-10);
    }

    /// sum (x_i - 2)^2 but +Inf outside the box [-1, 1]^d: the minimum is at the corner.
    /// Inside, a barrier -log(1 - x_i^2) keeps the minimum interior and makes long steps leave the box.
    struct Boxed(std::sync::atomic::AtomicUsize);
    impl Objective for Boxed {
        fn dim(&self) -> usize {
            3
        }
        fn value_grad(&self, x: &[f64], g: &mut [f64]) -> Result<f64> {
            if x.iter().any(|v| v.abs() >= 1.0) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(f64::INFINITY);
            }
            let mut f = 0.0;
            for (i, &v) in x.iter().enumerate() {
                f += (v - 2.0).powi(2) - 0.01 * (1.0 - v * v).ln();
                g[i] = 2.0 * (v - 2.0) + 0.02 * v / (1.0 - v * v);
            }
            Ok(f)
        }
    }

    #[test]
    fn infinite_outside_a_box_backs_off() {
        let b = Boxed(Default::default());
        let r = minimise_lbfgs(&b, &[0.0, -0.5, 0.5], &LbfgsControl::default(), &mut never()).unwrap();
        assert!(r.convergence.converged, "{}", r.convergence.message);
        // The line search did step outside and came back.
        assert!(b.0.load(std::sync::atomic::Ordering::Relaxed) > 0);
        // Stationary point: 2 (v - 2) + 0.02 v / (1 - v^2) = 0 inside (0, 1); solve by bisection.
        let (mut lo, mut hi) = (0.0, 1.0 - 1e-15);
        for _ in 0..200 {
            let m = 0.5 * (lo + hi);
            if 2.0 * (m - 2.0) + 0.02 * m / (1.0 - m * m) < 0.0 {
                lo = m
            } else {
                hi = m
            }
        }
        for v in &r.x {
            assert!((v - lo).abs() < 1e-7, "{v} vs {lo}");
        }
    }

    #[test]
    fn maxit_is_reported_not_an_error() {
        let ctrl = LbfgsControl {
            maxit: 3,
            ..Default::default()
        };
        let r = minimise_lbfgs(&Rosenbrock(2), &[-1.2, 1.0], &ctrl, &mut never()).unwrap();
        assert!(!r.convergence.converged);
        assert_eq!(r.convergence.iterations, 3);
        assert!(r.convergence.message.contains("maxit"), "{}", r.convergence.message);
        // The best point so far is kept: below the start's value.
        assert!(r.value < 24.2);
    }

    #[test]
    fn bad_start_and_interrupt() {
        let e = minimise_lbfgs(
            &Boxed(Default::default()),
            &[2.0, 0.0, 0.0],
            &LbfgsControl::default(),
            &mut never(),
        )
        .unwrap_err();
        assert!(matches!(e, NceError::InvalidInput { ref arg, .. } if arg == "start"));
        let e = minimise_lbfgs(&Rosenbrock(2), &[-1.2, 1.0], &LbfgsControl::default(), &mut || true).unwrap_err();
        assert_eq!(e, NceError::Interrupted);
    }

    /// A flat function: nowhere to go, the line search cannot decrease it.
    struct Tilted;
    impl Objective for Tilted {
        fn dim(&self) -> usize {
            1
        }
        fn value_grad(&self, x: &[f64], g: &mut [f64]) -> Result<f64> {
            // Gradient says "go right" but every step right leaves the domain.
            g[0] = -1.0;
            Ok(if x[0] > 0.0 { f64::INFINITY } else { -x[0] })
        }
    }

    #[test]
    fn failed_line_search_keeps_the_point() {
        let r = minimise_lbfgs(&Tilted, &[0.0], &LbfgsControl::default(), &mut never()).unwrap();
        assert!(!r.convergence.converged);
        assert!(
            r.convergence.message.contains("line search"),
            "{}",
            r.convergence.message
        );
        assert_eq!(r.x, vec![0.0]);
    }
}
