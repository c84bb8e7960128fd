//! The normal distribution truncated to (lower, +inf): log density, exact sampler and MLE of
//! the parent normal's mean and sd. Everything stays accurate when `lower` is many sd above the
//! mean (the upper tail is taken in log space with a continued fraction for the Mills ratio).

use crate::alloc::{checked_len, try_filled};
use crate::error::{NceError, Result};
use crate::optim::{minimise_lbfgs, LbfgsControl, Objective};
use rand::Rng;
use rand_distr::{Exp1, StandardNormal};
use rayon::prelude::*;

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// log of the standard normal density.
pub fn log_phi(z: f64) -> f64 {
    -0.5 * z * z - LN_SQRT_2PI
}

/// Mills ratio Q(a) / phi(a) for a >= 2 by its continued fraction 1 / (a + 1 / (a + 2 / (a + ...))),
/// evaluated by the modified Lentz method.
fn mills_cf(a: f64) -> f64 {
    let tiny = 1e-300;
    let mut f = a;
    let mut c = a;
    let mut d = 0.0;
    for k in 1..500 {
        let kf = k as f64;
        d = a + kf * d;
        d = if d.abs() < tiny { tiny } else { d };
        c = a + kf / c;
        c = if c.abs() < tiny { tiny } else { c };
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    1.0 / f
}

/// erf(x) by its Taylor series; accurate to a few ulps for |x| <= 1.5.
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x2 / n as f64;
        let t = term / (2 * n + 1) as f64;
        sum += t;
        if t.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

/// log Q(a), Q the standard normal upper tail probability, accurate to ~1e-15 relative for any
/// a (statrs' erfc is only good to ~1e-10 relative, so it is not used here).
pub fn log_upper_tail(a: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        0.0
    } else if a >= 2.0 {
        log_phi(a) + mills_cf(a).ln()
    } else if a > -2.0 {
        (0.5 * (1.0 - erf_series(a / std::f64::consts::SQRT_2))).ln()
    } else {
        (-(log_phi(-a) + mills_cf(-a).ln()).exp()).ln_1p()
    }
}

/// log Phi(x), Phi the standard normal distribution function (accurate in both tails).
pub fn log_cdf(x: f64) -> f64 {
    log_upper_tail(-x)
}

/// The standard normal quantile of exp(lp): x with log Phi(x) = lp, for lp < 0 (given as a log so
/// that far-tail probabilities below the smallest double still invert). A start from statrs'
/// inverse, or in the far lower tail the asymptote polished by Newton steps on the concave log Phi.
pub fn quantile_log(lp: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    if lp.is_nan() || lp >= 0.0 {
        return if lp == 0.0 { f64::INFINITY } else { f64::NAN };
    }
    if lp == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    let std = Normal::standard();
    // statrs' inverse (Boost's erf_inv rational approximations) is accurate to ~1e-15 away from
    // the far lower tail; only there the Newton steps on log Phi are needed.
    if lp > -1e-8 {
        return -std.inverse_cdf(-lp.exp_m1());
    } else if lp > -600.0 {
        return std.inverse_cdf(lp.exp());
    }
    let mut x = {
        // log Phi(x) ~ -x^2/2 - log(-x) - log(2 pi)/2 as x -> -inf.
        let t = -2.0 * lp;
        -(t - t.ln() - (2.0 * std::f64::consts::PI).ln()).sqrt()
    };
    for _ in 0..50 {
        let lc = log_cdf(x);
        let step = (lc - lp) / (log_phi(x) - lc).exp();
        if !step.is_finite() {
            break;
        }
        x -= step;
        if step.abs() <= 1e-14 * (1.0 + x.abs()) {
            break;
        }
    }
    x
}

/// Hazard phi(a) / Q(a) (inverse Mills ratio); 0 at a = -inf.
pub fn hazard(a: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        0.0
    } else if a < 2.0 {
        (log_phi(a) - log_upper_tail(a)).exp()
    } else {
        1.0 / mills_cf(a)
    }
}

fn check_params(mean: f64, sd: f64, lower: f64) -> Result<()> {
    if !mean.is_finite() {
        return Err(NceError::invalid("mean", format!("must be finite, not {mean}")));
    }
    if !(sd > 0.0 && sd.is_finite()) {
        return Err(NceError::invalid(
            "sd",
            format!("must be positive and finite, not {sd}"),
        ));
    }
    if lower.is_nan() || lower == f64::INFINITY {
        return Err(NceError::invalid(
            "lower",
            format!("must be finite or -Inf, not {lower}"),
        ));
    }
    Ok(())
}

/// log density at x of N(mean, sd^2) truncated to (lower, inf); -inf below `lower`.
pub fn log_density(x: f64, mean: f64, sd: f64, lower: f64) -> Result<f64> {
    check_params(mean, sd, lower)?;
    if x.is_nan() {
        return Err(NceError::invalid("x", "must not be NaN"));
    }
    Ok(log_density_unchecked(x, mean, sd, lower))
}

pub(crate) fn log_density_unchecked(x: f64, mean: f64, sd: f64, lower: f64) -> f64 {
    if x < lower || x == f64::INFINITY {
        return f64::NEG_INFINITY;
    }
    log_phi((x - mean) / sd) - sd.ln() - log_upper_tail((lower - mean) / sd)
}

/// A standard normal draw conditioned on z >= a: normal rejection in the bulk, Robert's (1995)
/// translated-exponential rejection with the optimal rate when a > 0.5.
pub fn sample_std<R: Rng + ?Sized>(rng: &mut R, a: f64) -> f64 {
    if a <= 0.5 {
        loop {
            let z: f64 = rng.sample(StandardNormal);
            if z >= a {
                return z;
            }
        }
    }
    let rate = 0.5 * (a + (a * a + 4.0).sqrt());
    loop {
        let e: f64 = rng.sample(Exp1);
        let z = a + e / rate;
        let u: f64 = rng.gen();
        if u.ln() <= -0.5 * (z - rate) * (z - rate) {
            return z;
        }
    }
}

/// One draw from N(mean, sd^2) truncated to (lower, inf).
pub fn sample<R: Rng + ?Sized>(rng: &mut R, mean: f64, sd: f64, lower: f64) -> Result<f64> {
    check_params(mean, sd, lower)?;
    // Never below the bound through rounding of mean + sd z.
    Ok((mean + sd * sample_std(rng, (lower - mean) / sd)).max(lower))
}

/// Mean and variance of N(mean, sd^2) truncated to (lower, inf): the closed form the tests
/// check the samplers against.
#[cfg(test)]
pub(crate) fn moments(mean: f64, sd: f64, lower: f64) -> (f64, f64) {
    let a = (lower - mean) / sd;
    let lam = hazard(a);
    let al = if a == f64::NEG_INFINITY { 0.0 } else { a * lam };
    (mean + sd * lam, sd * sd * (1.0 + al - lam * lam))
}

/// n draws per column (n x d, column-major): column j from N(mean[j], sd[j]^2) truncated to
/// (lower, inf), on stream j, in parallel over columns.
pub fn sample_columns(n: usize, mean: &[f64], sd: &[f64], lower: f64, seed: u64) -> Result<Vec<f64>> {
    if mean.len() != sd.len() {
        return Err(NceError::invalid(
            "sd",
            format!("must have one entry per mean ({}), has {}", mean.len(), sd.len()),
        ));
    }
    for (&m, &s) in mean.iter().zip(sd) {
        check_params(m, s, lower)?;
    }
    let len = checked_len(&[n, mean.len()], "the truncated normal draws")?;
    let mut out = try_filled(len, 0.0, "the truncated normal draws")?;
    out.par_chunks_mut(n.max(1)).enumerate().for_each(|(j, col)| {
        let mut rng = crate::rng::stream_rng(seed, j as u64);
        let a = (lower - mean[j]) / sd[j];
        for o in col {
            *o = (mean[j] + sd[j] * sample_std(&mut rng, a)).max(lower);
        }
    });
    Ok(out)
}

/// Row sums of log densities over the non-NaN (NA) entries of an n x d column-major matrix,
/// column j under N(mean[j], sd[j]^2) truncated to (lower, inf).
pub fn row_log_density(x: &[f64], n: usize, mean: &[f64], sd: &[f64], lower: f64) -> Result<Vec<f64>> {
    let d = mean.len();
    if sd.len() != d {
        return Err(NceError::invalid(
            "sd",
            format!("must have one entry per mean ({d}), has {}", sd.len()),
        ));
    }
    if x.len() != n * d {
        return Err(NceError::invalid("x", format!("must have {d} columns, one per mean")));
    }
    for (&m, &s) in mean.iter().zip(sd) {
        check_params(m, s, lower)?;
    }
    let log_tail: Vec<f64> = mean
        .iter()
        .zip(sd)
        .map(|(&m, &s)| s.ln() + log_upper_tail((lower - m) / s))
        .collect();
    Ok((0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| {
            let mut total = 0.0;
            for j in 0..d {
                let v = x[j * n + i];
                if v.is_nan() {
                    continue;
                }
                total += if v < lower || v == f64::INFINITY {
                    f64::NEG_INFINITY
                } else {
                    log_phi((v - mean[j]) / sd[j]) - log_tail[j]
                };
            }
            total
        })
        .collect())
}

#[derive(Clone, Debug)]
pub struct TruncnormFit {
    pub mean: f64,
    pub sd: f64,
    pub loglik: f64,
    pub converged: bool,
}

/// Negative mean log-likelihood of standardised data u in (b, inf) as a function of
/// (mu, log s) of the standardised parent.
struct NegLik<'a> {
    u: &'a [f64],
    b: f64,
}

impl Objective for NegLik<'_> {
    fn dim(&self) -> usize {
        2
    }
    fn value_grad(&self, p: &[f64], g: &mut [f64]) -> Result<f64> {
        let (mu, eta) = (p[0], p[1]);
        let s = eta.exp();
        if !(s > 0.0 && s.is_finite()) {
            return Ok(f64::INFINITY);
        }
        let n = self.u.len() as f64;
        let a = (self.b - mu) / s;
        let (mut sz, mut sz2) = (0.0, 0.0);
        for &x in self.u {
            let z = (x - mu) / s;
            sz += z;
            sz2 += z * z;
        }
        let lam = hazard(a);
        let al = if a == f64::NEG_INFINITY { 0.0 } else { a * lam };
        let ll = -0.5 * sz2 - n * (LN_SQRT_2PI + eta) - n * log_upper_tail(a);
        g[0] = -(sz / s - n * lam / s) / n;
        g[1] = -(sz2 - n - n * al) / n;
        Ok(-ll / n)
    }
}

/// Maximum-likelihood (mean, sd) of the parent normal from data all above `lower`.
pub fn fit(x: &[f64], lower: f64) -> Result<TruncnormFit> {
    if lower.is_nan() || lower == f64::INFINITY {
        return Err(NceError::invalid(
            "lower",
            format!("must be finite or -Inf, not {lower}"),
        ));
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(NceError::invalid("x", format!("entry {} is not finite", i + 1)));
    }
    if let Some(i) = x.iter().position(|&v| v <= lower) {
        return Err(NceError::invalid(
            "x",
            format!("entry {} ({}) is not above lower = {lower}", i + 1, x[i]),
        ));
    }
    let n = x.len() as f64;
    let m0 = x.iter().sum::<f64>() / n.max(1.0);
    let s0 = (x.iter().map(|v| (v - m0).powi(2)).sum::<f64>() / n.max(1.0)).sqrt();
    if x.len() < 2 || s0.is_nan() || s0 <= 0.0 {
        return Err(NceError::invalid("x", "needs at least 2 distinct values"));
    }
    // Standardise for conditioning; start at the sample mean and sd.
    let u: Vec<f64> = x.iter().map(|v| (v - m0) / s0).collect();
    let obj = NegLik {
        u: &u,
        b: (lower - m0) / s0,
    };
    let ctrl = LbfgsControl {
        maxit: 500,
        gtol: 1e-9,
        ftol: 1e-14,
        memory: 10,
    };
    let r = minimise_lbfgs(&obj, &[0.0, 0.0], &ctrl, &mut || false)?;
    let sd = s0 * r.x[1].exp();
    Ok(TruncnormFit {
        mean: m0 + s0 * r.x[0],
        sd,
        loglik: -n * r.value - n * s0.ln(),
        converged: r.convergence.converged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream_rng;

    /// Composite Simpson's rule of exp(log_density) on [lower, lower + width].
    fn integrate(mean: f64, sd: f64, lower: f64, width: f64) -> f64 {
        let m = 200_000;
        let h = width / m as f64;
        let mut s = 0.0;
        for i in 0..=m {
            let w = if i == 0 || i == m {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            s += w * log_density(lower + i as f64 * h, mean, sd, lower).unwrap().exp();
        }
        s * h / 3.0
    }

    #[test]
    fn quantile_log_inverts_log_cdf_in_both_tails() {
        for &x in &[-40.0, -8.0, -3.0, -1.0, 0.0, 0.5, 2.0, 5.0, 8.0] {
            let y = quantile_log(log_cdf(x));
            assert!((y - x).abs() < 1e-9 * (1.0 + x.abs()), "{x} -> {y}");
        }
        // R: qnorm(-1000, log.p = TRUE) = -44.6157477319666
        assert!(
            (quantile_log(-1000.0) + 44.615_747_731_966_6).abs() < 1e-9,
            "{}",
            quantile_log(-1000.0)
        );
        assert!((quantile_log(0.5f64.ln())).abs() < 1e-14);
    }

    #[test]
    fn density_integrates_to_one() {
        for &(mean, sd, lower) in &[
            (0.0, 1.0, -2.0),
            (1.0, 2.0, 0.0),
            (-5.0, 1.0, 0.0),
            (-10.0, 2.0, 0.0),
            (-100.0, 2.5, 0.0),
        ] {
            let a: f64 = (lower - mean) / sd;
            let width = sd * ((-a).max(0.0) + 12.0 + 60.0 / a.max(1.0));
            let total = integrate(mean, sd, lower, width);
            assert!((total - 1.0).abs() < 1e-8, "mean {mean} sd {sd} lower {lower}: {total}");
        }
        assert_eq!(log_density(-0.1, 0.0, 1.0, 0.0).unwrap(), f64::NEG_INFINITY);
        assert!(log_density(0.0, 0.0, -1.0, 0.0).is_err());
    }

    #[test]
    // Reference values keep the digits they were computed to.
    #[allow(clippy::excessive_precision)]
    fn upper_tail_matches_reference_values() {
        // log Q(a) to 20 digits (mpmath, 30-digit arithmetic).
        let reference = [
            (-3.0, -0.0013508099647481937988),
            (-1.0, -0.17275377902344988953),
            (0.0, -std::f64::consts::LN_2),
            (0.5, -1.1759117615936186089),
            (1.0, -1.8410216450092635058),
            (1.5, -2.705944400823889807),
            (2.0, -3.7831843336820319488),
            (3.0, -6.6077262215103495433),
            (5.0, -15.064998393988725736),
            (8.0, -35.013437159914549896),
        ];
        for (a, v) in reference {
            let got = log_upper_tail(a);
            assert!((got - v).abs() < 4e-15 * v.abs().max(1e-3), "a = {a}: {got} vs {v}");
        }
        // Far tail: log Q(a) ~ log phi(a) - log a - 1/a^2 + 2.5/a^4.
        let a = 200.0;
        assert!((log_upper_tail(a) - (log_phi(a) - a.ln() - 1.0 / (a * a) + 2.5 / a.powi(4))).abs() < 1e-10);
        assert_eq!(log_upper_tail(f64::NEG_INFINITY), 0.0);
    }

    #[test]
    fn sampler_matches_closed_form_moments() {
        let n = 200_000;
        for (k, &a) in [-2.0, 0.0, 3.0, 8.0].iter().enumerate() {
            let (mean, sd) = (1.5, 2.0);
            let lower = mean + a * sd;
            let mut rng = stream_rng(42, k as u64);
            let x: Vec<f64> = (0..n).map(|_| sample(&mut rng, mean, sd, lower).unwrap()).collect();
            assert!(x.iter().all(|&v| v >= lower));
            let nf = n as f64;
            let m = x.iter().sum::<f64>() / nf;
            let v = x.iter().map(|t| (t - m).powi(2)).sum::<f64>() / (nf - 1.0);
            let m4 = x.iter().map(|t| (t - m).powi(4)).sum::<f64>() / nf;
            let (tm, tv) = moments(mean, sd, lower);
            let se_m = (tv / nf).sqrt();
            let se_v = ((m4 - v * v) / nf).sqrt();
            assert!((m - tm).abs() < 5.0 * se_m, "a = {a}: mean {m} vs {tm} (se {se_m})");
            assert!((v - tv).abs() < 5.0 * se_v, "a = {a}: var {v} vs {tv} (se {se_v})");
        }
    }

    /// Observed information by central differences of the analytic gradient.
    fn se(x: &[f64], lower: f64, f: &TruncnormFit) -> (f64, f64) {
        let obj = NegLik { u: x, b: lower };
        let p = [f.mean, f.sd.ln()];
        let n = x.len() as f64;
        let h = 1e-5;
        let mut hess = [[0.0; 2]; 2];
        for j in 0..2 {
            let (mut pp, mut pm) = (p, p);
            pp[j] += h;
            pm[j] -= h;
            let (mut gp, mut gm) = ([0.0; 2], [0.0; 2]);
            obj.value_grad(&pp, &mut gp).unwrap();
            obj.value_grad(&pm, &mut gm).unwrap();
            for i in 0..2 {
                hess[i][j] = n * (gp[i] - gm[i]) / (2.0 * h);
            }
        }
        let det = hess[0][0] * hess[1][1] - hess[0][1] * hess[1][0];
        // Var(mean) and Var(log sd); sd's SE by the delta method.
        ((hess[1][1] / det).sqrt(), f.sd * (hess[0][0] / det).sqrt())
    }

    #[test]
    fn fit_recovers_the_parent() {
        for (k, &(mean, sd, lower)) in [(1.0, 2.0, 0.0), (-1.0, 1.5, 0.0)].iter().enumerate() {
            let mut rng = stream_rng(7, k as u64);
            let x: Vec<f64> = (0..20_000)
                .map(|_| sample(&mut rng, mean, sd, lower).unwrap())
                .collect();
            let f = fit(&x, lower).unwrap();
            assert!(f.converged);
            let (se_m, se_s) = se(&x, lower, &f);
            assert!(
                (f.mean - mean).abs() < 4.0 * se_m,
                "mean {} vs {mean} (se {se_m})",
                f.mean
            );
            assert!((f.sd - sd).abs() < 4.0 * se_s, "sd {} vs {sd} (se {se_s})", f.sd);
            // The reported log-likelihood is the sum of log densities, and the score is zero.
            let ll: f64 = x.iter().map(|&v| log_density(v, f.mean, f.sd, lower).unwrap()).sum();
            assert!((ll - f.loglik).abs() < 1e-8 * ll.abs());
            let eps = 1e-4;
            for (dm, ds) in [(eps, 0.0), (-eps, 0.0), (0.0, eps), (0.0, -eps)] {
                let l2: f64 = x
                    .iter()
                    .map(|&v| log_density(v, f.mean + dm, f.sd + ds, lower).unwrap())
                    .sum();
                assert!(l2 <= f.loglik + 1e-9 * ll.abs());
            }
        }
        assert!(fit(&[1.0, 1.0, 1.0], 0.0).is_err());
        assert!(fit(&[1.0, 2.0, -1.0], 0.0).is_err());
        assert!(fit(&[1.0, f64::NAN], 0.0).is_err());
    }
    #[test]
    fn columns_and_row_densities() {
        let (mean, sd) = ([0.0, 3.0, -4.0], [1.0, 0.5, 2.0]);
        let a = crate::engine::design::with_threads(1, || sample_columns(500, &mean, &sd, 1.0, 4))
            .unwrap()
            .unwrap();
        let b = crate::engine::design::with_threads(2, || sample_columns(500, &mean, &sd, 1.0, 4))
            .unwrap()
            .unwrap();
        assert_eq!(a, b);
        assert!(a.iter().all(|&v| v >= 1.0));
        // Column j is stream j of the seed.
        let mut rng = stream_rng(4, 2);
        assert_eq!(a[1000], sample(&mut rng, -4.0, 2.0, 1.0).unwrap());
        let mut x = a[..6].to_vec();
        x.extend_from_slice(&a[500..506]);
        x.extend_from_slice(&a[1000..1006]);
        x[7] = f64::NAN;
        let ld = row_log_density(&x, 6, &mean, &sd, 1.0).unwrap();
        for i in 0..6 {
            let mut want = 0.0;
            for j in 0..3 {
                if !x[j * 6 + i].is_nan() {
                    want += log_density(x[j * 6 + i], mean[j], sd[j], 1.0).unwrap();
                }
            }
            assert!((ld[i] - want).abs() < 1e-12 * want.abs().max(1.0));
        }
        assert!(row_log_density(&x, 6, &mean, &sd[..2], 1.0).is_err());
    }
}
