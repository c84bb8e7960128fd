//! Step-selection reference kernel: from the previous position (x, y), a step of gamma
//! length r and direction either uniform or the previous heading plus a von Mises(0, kappa)
//! turning angle. In the plane q(x, y | prev) = gamma(r) vm(turn) / r (polar Jacobian), with
//! vm = 1 / (2 pi) for uniform directions. With turning angles the state carries the heading
//! (direction of the step that arrived), so the kernel's columns are (x, y, heading).

use crate::error::{NceError, Result};
use crate::rng::stream_rng;
use rand::Rng;
use rand_distr::{Distribution, Gamma};
use rayon::prelude::*;
use statrs::function::gamma::ln_gamma;
use std::f64::consts::PI;

/// Transitions per seeded stream; fixed so that draws do not depend on the thread count.
const TRANSITIONS_PER_STREAM: usize = 256;

#[derive(Debug, Clone)]
pub struct StepKernel {
    shape: f64,
    scale: f64,
    /// Von Mises concentration of the turning angle and log(2 pi I0(kappa)); None: uniform
    /// directions.
    turn: Option<(f64, f64)>,
}

/// Angle in (-pi, pi].
pub fn wrap_angle(a: f64) -> f64 {
    let mut v = a % (2.0 * PI);
    if v <= -PI {
        v += 2.0 * PI;
    } else if v > PI {
        v -= 2.0 * PI;
    }
    v
}

/// Von Mises(0, kappa) draw by Best and Fisher's (1979) rejection algorithm.
fn von_mises<R: Rng>(rng: &mut R, kappa: f64) -> f64 {
    if kappa < 1e-8 {
        return PI * (2.0 * rng.gen::<f64>() - 1.0);
    }
    let tau = 1.0 + (1.0 + 4.0 * kappa * kappa).sqrt();
    let rho = (tau - (2.0 * tau).sqrt()) / (2.0 * kappa);
    let r = (1.0 + rho * rho) / (2.0 * rho);
    loop {
        let u1: f64 = rng.gen();
        let u2: f64 = rng.gen();
        let z = (PI * u1).cos();
        let f = (1.0 + r * z) / (r + z);
        let c = kappa * (r - f);
        if c * (2.0 - c) - u2 > 0.0 || (c / u2).ln() + 1.0 - c >= 0.0 {
            let u3: f64 = rng.gen();
            let t = f.clamp(-1.0, 1.0).acos();
            return if u3 < 0.5 { -t } else { t };
        }
    }
}

impl StepKernel {
    /// `kappa` None for uniform directions; `log_norm` = log(2 pi I0(kappa)) (computed by the
    /// caller, which has the Bessel function).
    pub fn new(shape: f64, scale: f64, turn: Option<(f64, f64)>) -> Result<Self> {
        if !(shape.is_finite() && shape > 0.0 && scale.is_finite() && scale > 0.0) {
            return Err(NceError::invalid(
                "shape",
                format!("gamma shape and scale must be positive and finite, got {shape} and {scale}"),
            ));
        }
        if let Some((k, ln)) = turn {
            if !(k.is_finite() && k >= 0.0 && ln.is_finite()) {
                return Err(NceError::invalid(
                    "kappa",
                    format!("must be a finite number >= 0, got {k}"),
                ));
            }
        }
        Ok(StepKernel { shape, scale, turn })
    }

    /// Columns of the state: 2 (x, y) or 3 (x, y, heading).
    pub fn dim(&self) -> usize {
        if self.turn.is_some() {
            3
        } else {
            2
        }
    }

    fn check_prev(&self, prev: &[f64], t: usize) -> Result<()> {
        let d = self.dim();
        if prev.len() != t * d {
            return Err(NceError::invalid("prev", format!("must be a {t} x {d} matrix")));
        }
        if let Some(i) = prev.iter().position(|v| !v.is_finite()) {
            return Err(NceError::invalid(
                "prev",
                format!("previous state {} is not finite", i % t.max(1) + 1),
            ));
        }
        if d == 3 {
            if let Some(i) = (0..t).find(|&i| prev[2 * t + i].abs() > PI + 1e-9) {
                return Err(NceError::invalid(
                    "heading",
                    format!(
                        "transition {} starts from a fix without a heading (the first of its sequence, or a heading \
                         outside [-pi, pi]): fit with order = 2 so that every transition has a previous step",
                        i + 1
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `n` draws for each of the `t` previous states (column-major t x dim): a column-major
    /// (t * n) x dim matrix, the n draws of transition 0 first.
    pub fn sample(&self, prev: &[f64], t: usize, n: usize, seed: u64) -> Result<Vec<f64>> {
        self.check_prev(prev, t)?;
        let d = self.dim();
        let gamma = Gamma::new(self.shape, self.scale).map_err(|e| NceError::invalid("shape", e.to_string()))?;
        let blocks: Vec<Vec<f64>> = (0..t.div_ceil(TRANSITIONS_PER_STREAM))
            .into_par_iter()
            .map(|k| {
                let mut rng = stream_rng(seed, k as u64);
                let t0 = k * TRANSITIONS_PER_STREAM;
                let t1 = (t0 + TRANSITIONS_PER_STREAM).min(t);
                let mut buf = Vec::with_capacity((t1 - t0) * n * d);
                for tr in t0..t1 {
                    for _ in 0..n {
                        let r = gamma.sample(&mut rng);
                        let dir = match self.turn {
                            Some((kappa, _)) => wrap_angle(prev[2 * t + tr] + von_mises(&mut rng, kappa)),
                            None => PI * (2.0 * rng.gen::<f64>() - 1.0),
                        };
                        buf.push(prev[tr] + r * dir.cos());
                        buf.push(prev[t + tr] + r * dir.sin());
                        if d == 3 {
                            buf.push(dir);
                        }
                    }
                }
                buf
            })
            .collect();
        let rows = t * n;
        let mut out = vec![0.0; rows * d];
        let mut i = 0;
        for buf in &blocks {
            for row in buf.chunks(d) {
                for j in 0..d {
                    out[j * rows + i] = row[j];
                }
                i += 1;
            }
        }
        Ok(out)
    }

    /// log q(x | prev) row by row (both column-major rows x dim); -inf at zero-length steps.
    pub fn log_density(&self, x: &[f64], prev: &[f64], rows: usize) -> Result<Vec<f64>> {
        let d = self.dim();
        if x.len() != rows * d {
            return Err(NceError::invalid("x", format!("must be a {rows} x {d} matrix")));
        }
        self.check_prev(prev, rows)?;
        let lg = ln_gamma(self.shape) + self.shape * self.scale.ln();
        Ok((0..rows)
            .into_par_iter()
            .map(|i| {
                let dx = x[i] - prev[i];
                let dy = x[rows + i] - prev[rows + i];
                let r = dx.hypot(dy);
                if !(r > 0.0 && r.is_finite()) {
                    return f64::NEG_INFINITY;
                }
                let step = (self.shape - 1.0) * r.ln() - r / self.scale - lg - r.ln();
                let angle = match self.turn {
                    Some((kappa, log_norm)) => kappa * wrap_angle(dy.atan2(dx) - prev[2 * rows + i]).cos() - log_norm,
                    None => -(2.0 * PI).ln(),
                };
                step + angle
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;

    // log(2 pi I0(2)).
    const LN_2PI_I0_2: f64 = 2.661_870_607_892_302;

    #[test]
    fn draws_are_thread_invariant_with_the_right_step_and_turn_moments() {
        let k = StepKernel::new(2.0, 50.0, Some((2.0, LN_2PI_I0_2))).unwrap();
        let t = 1000;
        let n = 100;
        let mut prev = vec![0.0; 3 * t];
        for i in 0..t {
            prev[i] = i as f64;
            prev[2 * t + i] = 1.0;
        }
        let a = with_threads(1, || k.sample(&prev, t, n, 11)).unwrap().unwrap();
        let b = with_threads(3, || k.sample(&prev, t, n, 11)).unwrap().unwrap();
        assert_eq!(a, b);
        let rows = t * n;
        let (mut sr, mut sc) = (0.0, 0.0);
        for i in 0..rows {
            let p = i / n;
            let (dx, dy) = (a[i] - prev[p], a[rows + i]);
            sr += dx.hypot(dy);
            sc += (dy.atan2(dx) - 1.0).cos();
            assert!((wrap_angle(dy.atan2(dx)) - a[2 * rows + i]).abs() < 1e-9);
        }
        // Mean step shape * scale = 100; E cos(turn) = I1(2) / I0(2) = 0.697775.
        assert!((sr / rows as f64 - 100.0).abs() < 0.5, "{}", sr / rows as f64);
        assert!((sc / rows as f64 - 0.697_775).abs() < 0.005, "{}", sc / rows as f64);
    }

    #[test]
    fn log_density_is_the_polar_gamma_von_mises_density() {
        let k = StepKernel::new(2.0, 50.0, Some((2.0, LN_2PI_I0_2))).unwrap();
        // Step of length 5 along the previous heading 0.3.
        let x = [5.0 * 0.3f64.cos(), 5.0 * 0.3f64.sin(), 0.3];
        let l = k.log_density(&x, &[0.0, 0.0, 0.3], 1).unwrap();
        let gamma = 5.0f64.ln() - 5.0 / 50.0 - 2.0 * 50.0f64.ln();
        assert!((l[0] - (gamma - 5.0f64.ln() + 2.0 - LN_2PI_I0_2)).abs() < 1e-12);
        let u = StepKernel::new(2.0, 50.0, None).unwrap();
        let l = u.log_density(&[3.0, 3.0, 4.0, 3.0], &[0.0, 3.0, 0.0, 3.0], 2).unwrap();
        assert!((l[0] - (gamma - 5.0f64.ln() - (2.0 * PI).ln())).abs() < 1e-12);
        assert_eq!(l[1], f64::NEG_INFINITY);
        assert!(k.log_density(&x, &[0.0, 0.0, 7.0], 1).is_err());
        assert!(StepKernel::new(0.0, 1.0, None).is_err());
    }
}
