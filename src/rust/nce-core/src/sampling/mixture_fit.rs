//! A Gaussian mixture with full covariances fitted to data by EM: the reference of
//! `ref_fit(family = "mixture")`, a base density the model can be relative to ("reference +
//! difference = interest"). k-means++ starts, EM to a relative change of the log-likelihood,
//! the best of several starts. Sums over rows go by fixed chunks in order, so the fit does
//! not depend on the thread count.

use crate::error::{NceError, Result};
use crate::linalg::LN_2PI;
use crate::rng::stream_rng;
use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Rows per parallel chunk; partial sums are added in chunk order.
const CHUNK: usize = 1024;
/// Chunks whose statistics are held at once.
const GROUP: usize = 64;
/// Ridge added to each covariance, relative to the data's variance of each column: keeps a
/// component that shrinks onto a few points positive definite, far below any fitted spread.
const RIDGE: f64 = 1e-6;
/// Lloyd iterations of the k-means start.
const LLOYD: usize = 10;
/// EM iterations of each start before the best is continued.
const SHORT: usize = 20;

/// Settings of [`fit_mixture_bic`].
#[derive(Debug, Clone)]
pub struct MixtureControl {
    pub n_starts: usize,
    pub max_iter: usize,
    /// Stop when the log-likelihood changes by less than `tol` times its size.
    pub tol: f64,
    pub seed: u64,
}

/// A fitted mixture: `weights` (G), `means` (d x G, column-major), `covs` (d x d x G).
#[derive(Debug, Clone)]
pub struct MixtureFit {
    pub weights: Vec<f64>,
    pub means: Vec<f64>,
    pub covs: Vec<f64>,
    pub loglik: f64,
    pub iterations: usize,
    pub converged: bool,
}

struct Params {
    weights: Vec<f64>,
    means: Vec<DVector<f64>>,
    covs: Vec<DMatrix<f64>>,
}

/// Per-chunk sufficient statistics about the current means: log-likelihood, then per
/// component N_k, sum r (x - m_k) (d each) and the lower triangle of sum r (x - m_k)(x - m_k)'
/// (d (d + 1) / 2 each, row by row), flat.
struct Stats {
    loglik: f64,
    nk: Vec<f64>,
    s1: Vec<f64>,
    s2: Vec<f64>,
}

impl Stats {
    fn zeros(g: usize, d: usize) -> Self {
        Stats {
            loglik: 0.0,
            nk: vec![0.0; g],
            s1: vec![0.0; g * d],
            s2: vec![0.0; g * d * (d + 1) / 2],
        }
    }

    fn add(&mut self, o: &Stats) {
        self.loglik += o.loglik;
        let pairs = [(&mut self.nk, &o.nk), (&mut self.s1, &o.s1), (&mut self.s2, &o.s2)];
        for (a, b) in pairs {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
    }
}

/// The rows of `x` transposed to row-major, and each column's ridge, once per call: the
/// checks every fit needs.
struct Prepared {
    rows: Vec<f64>,
    n: usize,
    d: usize,
    ridge: Vec<f64>,
}

impl Prepared {
    fn new(x: &[f64], n: usize, d: usize, control: &MixtureControl) -> Result<Self> {
        if d == 0 || x.len() != n * d {
            return Err(NceError::invalid(
                "x",
                format!("must be an n x d matrix with n = {n}, d = {d}"),
            ));
        }
        if control.n_starts == 0 || control.max_iter == 0 || !(control.tol > 0.0) {
            return Err(NceError::invalid(
                "control",
                "n_starts and max_iter must be at least 1 and tol > 0",
            ));
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(NceError::invalid("x", "must be finite"));
        }
        let mut ridge = Vec::with_capacity(d);
        for j in 0..d {
            let col = &x[j * n..(j + 1) * n];
            let m = col.iter().sum::<f64>() / n as f64;
            let v = col.iter().map(|c| (c - m) * (c - m)).sum::<f64>() / n as f64;
            // A constant column has no density a normal can give: refused, not ridged into a spike.
            if !(v > 0.0) {
                return Err(NceError::invalid("x", format!("column {} is constant", j + 1)));
            }
            ridge.push(RIDGE * v);
        }
        let rows = (0..n).flat_map(|i| (0..d).map(move |j| x[j * n + i])).collect();
        Ok(Prepared { rows, n, d, ridge })
    }

    fn rows(&self) -> Rows<'_> {
        Rows {
            rows: &self.rows,
            n: self.n,
            d: self.d,
            ridge: &self.ridge,
        }
    }
}

/// `g` components fitted to prepared rows (at least g (d + 1) of them).
fn fit_prepared(data: &Rows, g: usize, control: &MixtureControl, stop: &AtomicBool) -> Result<MixtureFit> {
    let Rows { rows, n, d, ridge } = *data;
    // Short runs from every start, then the best continued to convergence ("small EM" starts,
    // Biernacki, Celeux and Govaert 2003): the starts' later iterations are the cost, and a
    // start behind after a few iterations rarely ends ahead.
    let mut best: Option<Run> = None;
    for start in 0..control.n_starts {
        let assign = kmeans_start(rows, n, d, g, control.seed, start as u64);
        let first = Run::new(m_step_hard(rows, n, d, g, &assign, ridge));
        let run = em(data, first, SHORT.min(control.max_iter), control.tol, stop)?;
        if best.as_ref().map_or(true, |b| run.loglik > b.loglik) {
            best = Some(run);
        }
    }
    let run = best.expect("n_starts >= 1");
    let run = if run.converged {
        run
    } else {
        em(data, run, control.max_iter, control.tol, stop)?
    };
    let p = run.params;
    Ok(MixtureFit {
        weights: p.weights,
        means: p.means.iter().flat_map(|m| m.iter().copied()).collect(),
        covs: p.covs.iter().flat_map(|c| c.iter().copied()).collect(),
        loglik: run.loglik,
        iterations: run.iterations,
        converged: run.converged,
    })
}

/// Fits for several numbers of components, and the one BIC chooses.
#[derive(Debug, Clone)]
pub struct MixtureSelection {
    /// One fit per number of components tried, in the order given.
    pub fits: Vec<MixtureFit>,
    /// The numbers of components tried (those the rows allow: at least G (d + 1) rows).
    pub components: Vec<usize>,
    /// Free parameters p = (G - 1) + G d + G d (d + 1) / 2 of each.
    pub df: Vec<usize>,
    /// BIC = -2 log L + p log n.
    pub bic: Vec<f64>,
    /// Index of the lowest BIC.
    pub chosen: usize,
}

/// A mixture fitted to the rows of `x` (n x d, column-major) for each number of `components`
/// the rows allow, and the fit with the lowest BIC, as mclust chooses. `stop` is polled at every
/// EM iteration (a user interrupt).
pub fn fit_mixture_bic(
    x: &[f64],
    n: usize,
    d: usize,
    components: &[usize],
    control: &MixtureControl,
    stop: &AtomicBool,
) -> Result<MixtureSelection> {
    let tried: Vec<usize> = components
        .iter()
        .copied()
        .filter(|&g| g >= 1 && n >= g * (d + 1))
        .collect();
    if tried.is_empty() {
        let g = components.iter().copied().min().unwrap_or(1).max(1);
        return Err(NceError::invalid(
            "components",
            format!(
                "{n} rows are too few for {g} component(s) of {d} variables (at least {})",
                g * (d + 1)
            ),
        ));
    }
    let prepared = Prepared::new(x, n, d, control)?;
    let data = prepared.rows();
    let mut fits = Vec::with_capacity(tried.len());
    let df: Vec<usize> = tried.iter().map(|&g| (g - 1) + g * d + g * d * (d + 1) / 2).collect();
    let mut bic = Vec::with_capacity(tried.len());
    for (&g, &p) in tried.iter().zip(&df) {
        let fit = fit_prepared(&data, g, control, stop)?;
        bic.push(-2.0 * fit.loglik + p as f64 * (n as f64).ln());
        fits.push(fit);
    }
    let chosen = (0..bic.len()).fold(0, |b, i| if bic[i] < bic[b] { i } else { b });
    Ok(MixtureSelection {
        fits,
        components: tried,
        df,
        bic,
        chosen,
    })
}

/// The rows (row-major), their sizes and the covariances' ridge.
struct Rows<'a> {
    rows: &'a [f64],
    n: usize,
    d: usize,
    ridge: &'a [f64],
}

/// An EM run: its parameters, the log-likelihood at them (once computed), and its iterations.
struct Run {
    params: Params,
    loglik: f64,
    iterations: usize,
    converged: bool,
}

impl Run {
    fn new(params: Params) -> Self {
        Run {
            params,
            loglik: f64::NEG_INFINITY,
            iterations: 0,
            converged: false,
        }
    }
}

/// EM iterations on `run` until its log-likelihood changes by less than `tol` times its size,
/// or `max_iter` iterations in all. The parameters returned are those its log-likelihood was
/// computed at.
fn em(data: &Rows, mut run: Run, max_iter: usize, tol: f64, stop: &AtomicBool) -> Result<Run> {
    let Rows { rows, n, d, ridge } = *data;
    // A run resumed after its log-likelihood was computed steps from its parameters first.
    let mut stats = if run.loglik.is_finite() {
        Some(e_step(rows, n, d, &run.params)?)
    } else {
        None
    };
    while run.iterations < max_iter {
        if stop.load(Ordering::Relaxed) {
            return Err(NceError::Interrupted);
        }
        if let Some(s) = stats.take() {
            run.params = m_step(&run.params, &s, n, ridge);
        }
        let s = e_step(rows, n, d, &run.params)?;
        let previous = run.loglik;
        run.loglik = s.loglik;
        run.iterations += 1;
        if (run.loglik - previous).abs() <= tol * run.loglik.abs() {
            run.converged = true;
            break;
        }
        stats = Some(s);
    }
    Ok(run)
}

/// k-means++ centres, then a few Lloyd iterations: each row's nearest centre.
fn kmeans_start(rows: &[f64], n: usize, d: usize, g: usize, seed: u64, start: u64) -> Vec<usize> {
    let mut rng = stream_rng(seed, start);
    let dist2 = |i: usize, c: &[f64]| -> f64 {
        let r = &rows[i * d..(i + 1) * d];
        r.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum()
    };
    let mut centres: Vec<f64> = Vec::with_capacity(g * d);
    let first = rng.gen_range(0..n);
    centres.extend_from_slice(&rows[first * d..(first + 1) * d]);
    let mut near: Vec<f64> = (0..n).map(|i| dist2(i, &centres[0..d])).collect();
    for _ in 1..g {
        let total: f64 = near.iter().sum();
        let pick = if total > 0.0 {
            let u = rng.gen::<f64>() * total;
            let mut acc = 0.0;
            let mut pick = n - 1;
            for (i, v) in near.iter().enumerate() {
                acc += v;
                if acc >= u {
                    pick = i;
                    break;
                }
            }
            pick
        } else {
            rng.gen_range(0..n)
        };
        let c = rows[pick * d..(pick + 1) * d].to_vec();
        for (i, v) in near.iter_mut().enumerate() {
            *v = v.min(dist2(i, &c));
        }
        centres.extend_from_slice(&c);
    }
    let nearest = |centres: &[f64]| -> Vec<usize> {
        (0..n)
            .into_par_iter()
            .map(|i| {
                (0..g)
                    .map(|k| (k, dist2(i, &centres[k * d..(k + 1) * d])))
                    .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a })
                    .0
            })
            .collect()
    };
    let mut assign = nearest(&centres);
    for _ in 0..LLOYD {
        let mut sum = vec![0.0; g * d];
        let mut count = vec![0usize; g];
        for (i, &k) in assign.iter().enumerate() {
            count[k] += 1;
            for j in 0..d {
                sum[k * d + j] += rows[i * d + j];
            }
        }
        for k in 0..g {
            if count[k] > 0 {
                for j in 0..d {
                    centres[k * d + j] = sum[k * d + j] / count[k] as f64;
                }
            }
        }
        let next = nearest(&centres);
        if next == assign {
            break;
        }
        assign = next;
    }
    assign
}

/// Parameters from a hard assignment (an empty cluster gets the data's mean and covariance).
fn m_step_hard(rows: &[f64], n: usize, d: usize, g: usize, assign: &[usize], ridge: &[f64]) -> Params {
    let mut nk = vec![0.0; g];
    let mut mean = vec![DVector::<f64>::zeros(d); g];
    let mut all = DVector::<f64>::zeros(d);
    for (i, &k) in assign.iter().enumerate() {
        let r = DVector::from_column_slice(&rows[i * d..(i + 1) * d]);
        nk[k] += 1.0;
        mean[k] += &r;
        all += &r;
    }
    all /= n as f64;
    for k in 0..g {
        if nk[k] > 0.0 {
            mean[k] /= nk[k];
        } else {
            mean[k] = all.clone();
        }
    }
    let mut cov = vec![DMatrix::<f64>::zeros(d, d); g];
    let mut cov_all = DMatrix::<f64>::zeros(d, d);
    for (i, &k) in assign.iter().enumerate() {
        let r = DVector::from_column_slice(&rows[i * d..(i + 1) * d]);
        let z = &r - &mean[k];
        cov[k].ger(1.0, &z, &z, 1.0);
        let za = &r - &all;
        cov_all.ger(1.0, &za, &za, 1.0);
    }
    cov_all /= n as f64;
    for k in 0..g {
        if nk[k] >= (d + 1) as f64 {
            cov[k] /= nk[k];
        } else {
            cov[k] = cov_all.clone();
        }
        for j in 0..d {
            cov[k][(j, j)] += ridge[j];
        }
    }
    let total: f64 = nk.iter().map(|v| v.max(1.0)).sum();
    Params {
        weights: nk.iter().map(|v| v.max(1.0) / total).collect(),
        means: mean,
        covs: cov,
    }
}

/// Responsibilities at the current parameters, summed into the statistics of the next M-step
/// (about the current means), with the log-likelihood. Each component's whitening is the
/// inverse of its covariance's Cholesky factor, applied in place (no allocation per row).
fn e_step(rows: &[f64], n: usize, d: usize, p: &Params) -> Result<Stats> {
    let g = p.weights.len();
    let tri = d * (d + 1) / 2;
    // Lower triangles of L_k^{-1}, row by row, and log w_k - (d log 2 pi + log det) / 2.
    let mut whiten = vec![0.0; g * tri];
    let mut consts = Vec::with_capacity(g);
    for k in 0..g {
        let c = p.covs[k]
            .clone()
            .cholesky()
            .ok_or_else(|| NceError::Numerical("a mixture component's covariance is not positive definite".into()))?;
        let l = c.l();
        let log_det = 2.0 * l.diagonal().iter().map(|v| v.ln()).sum::<f64>();
        consts.push(p.weights[k].ln() - 0.5 * (d as f64 * LN_2PI + log_det));
        let inv = l
            .solve_lower_triangular(&DMatrix::identity(d, d))
            .ok_or_else(|| NceError::Numerical("a mixture component's Cholesky factor is singular".into()))?;
        let mut t = k * tri;
        for i in 0..d {
            for j in 0..=i {
                whiten[t] = inv[(i, j)];
                t += 1;
            }
        }
    }
    let means: Vec<f64> = p.means.iter().flat_map(|m| m.iter().copied()).collect();
    let chunk_stats = |c: usize| {
        let mut s = Stats::zeros(g, d);
        let mut lk = vec![0.0; g];
        let mut diff = vec![0.0; g * d];
        for i in c * CHUNK..((c + 1) * CHUNK).min(n) {
            let r = &rows[i * d..(i + 1) * d];
            for k in 0..g {
                let dk = &mut diff[k * d..(k + 1) * d];
                for j in 0..d {
                    dk[j] = r[j] - means[k * d + j];
                }
                let w = &whiten[k * tri..(k + 1) * tri];
                let mut q = 0.0;
                let mut t = 0;
                for a in 0..d {
                    let z: f64 = w[t..t + a + 1].iter().zip(&dk[..=a]).map(|(x, y)| x * y).sum();
                    t += a + 1;
                    q += z * z;
                }
                lk[k] = consts[k] - 0.5 * q;
            }
            let mx = lk.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            lk.iter_mut().for_each(|v| *v = (*v - mx).exp());
            let se: f64 = lk.iter().sum();
            s.loglik += mx + se.ln();
            for k in 0..g {
                let w = lk[k] / se;
                if w == 0.0 {
                    continue;
                }
                s.nk[k] += w;
                let dk = &diff[k * d..(k + 1) * d];
                for (acc, v) in s.s1[k * d..(k + 1) * d].iter_mut().zip(dk) {
                    *acc += w * v;
                }
                let s2 = &mut s.s2[k * tri..(k + 1) * tri];
                let mut t = 0;
                for a in 0..d {
                    let wa = w * dk[a];
                    for (acc, v) in s2[t..t + a + 1].iter_mut().zip(&dk[..=a]) {
                        *acc += wa * v;
                    }
                    t += a + 1;
                }
            }
        }
        s
    };
    // Chunks in groups, each group's statistics added in chunk order: memory is bounded by one
    // group, and the sums do not depend on the thread count.
    let chunks = n.div_ceil(CHUNK);
    let mut total = Stats::zeros(g, d);
    for first in (0..chunks).step_by(GROUP) {
        let parts: Vec<Stats> = (first..(first + GROUP).min(chunks))
            .into_par_iter()
            .map(chunk_stats)
            .collect();
        for part in &parts {
            total.add(part);
        }
    }
    if !total.loglik.is_finite() {
        return Err(NceError::Numerical("the mixture's log-likelihood is not finite".into()));
    }
    Ok(total)
}

/// The next parameters from the statistics about the current means.
fn m_step(p: &Params, s: &Stats, n: usize, ridge: &[f64]) -> Params {
    let g = p.weights.len();
    let d = ridge.len();
    let tri = d * (d + 1) / 2;
    let mut means = Vec::with_capacity(g);
    let mut covs = Vec::with_capacity(g);
    let mut weights = Vec::with_capacity(g);
    for k in 0..g {
        // A component that lost every row keeps its place with a vanishing weight.
        let nk = s.nk[k].max(1e-300);
        let delta = DVector::from_fn(d, |j, _| s.s1[k * d + j] / nk);
        let mut cov = DMatrix::<f64>::zeros(d, d);
        let mut t = k * tri;
        for a in 0..d {
            for b in 0..=a {
                let v = s.s2[t] / nk - delta[a] * delta[b];
                cov[(a, b)] = v;
                cov[(b, a)] = v;
                t += 1;
            }
        }
        for j in 0..d {
            cov[(j, j)] += ridge[j];
        }
        means.push(&p.means[k] + delta);
        covs.push(cov);
        weights.push((s.nk[k] / n as f64).max(1e-300));
    }
    let total: f64 = weights.iter().sum();
    weights.iter_mut().for_each(|w| *w /= total);
    Params { weights, means, covs }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;
    use crate::sampling::reference::Reference;

    /// One fit of `g` components.
    fn fit_mixture(x: &[f64], n: usize, d: usize, g: usize) -> Result<MixtureFit> {
        fit_mixture_bic(x, n, d, &[g], &control(), &AtomicBool::new(false)).map(|sel| sel.fits[0].clone())
    }

    fn control() -> MixtureControl {
        MixtureControl {
            n_starts: 3,
            max_iter: 500,
            tol: 1e-10,
            seed: 7,
        }
    }

    #[test]
    fn one_component_is_the_sample_mean_and_ml_covariance() {
        let r = Reference::normal(vec![1.0, -2.0], &[2.0, 0.6, 0.6, 1.0]).unwrap();
        let n = 5000;
        let x = r.sample(n, 3).unwrap();
        let f = fit_mixture(&x, n, 2, 1).unwrap();
        let m0 = x[..n].iter().sum::<f64>() / n as f64;
        let m1 = x[n..].iter().sum::<f64>() / n as f64;
        let c01 = (0..n).map(|i| (x[i] - m0) * (x[n + i] - m1)).sum::<f64>() / n as f64;
        let c00 = (0..n).map(|i| (x[i] - m0).powi(2)).sum::<f64>() / n as f64;
        assert!((f.means[0] - m0).abs() < 1e-12 && (f.means[1] - m1).abs() < 1e-12);
        assert!((f.covs[1] - c01).abs() < 1e-10 && (f.covs[0] - c00 - RIDGE * c00).abs() < 1e-10);
        assert!((f.weights[0] - 1.0).abs() < 1e-15);
    }

    #[test]
    fn two_separated_components_are_recovered_whatever_the_threads() {
        let a = Reference::normal(vec![-3.0, 0.0], &[1.0, 0.5, 0.5, 1.0]).unwrap();
        let b = Reference::normal(vec![3.0, 1.0], &[0.5, 0.0, 0.0, 2.0]).unwrap();
        let (na, nb) = (3000, 1000);
        let (xa, xb) = (a.sample(na, 1).unwrap(), b.sample(nb, 2).unwrap());
        let n = na + nb;
        let mut x = Vec::with_capacity(2 * n);
        for j in 0..2 {
            x.extend_from_slice(&xa[j * na..(j + 1) * na]);
            x.extend_from_slice(&xb[j * nb..(j + 1) * nb]);
        }
        let f1 = with_threads(1, || fit_mixture(&x, n, 2, 2)).unwrap().unwrap();
        let f2 = with_threads(2, || fit_mixture(&x, n, 2, 2)).unwrap().unwrap();
        assert_eq!(f1.means, f2.means);
        assert_eq!(f1.covs, f2.covs);
        assert!(f1.converged);
        let k = if f1.means[0] < 0.0 { 0 } else { 1 };
        assert!((f1.weights[k] - 0.75).abs() < 0.02, "{:?}", f1.weights);
        assert!((f1.means[2 * k] + 3.0).abs() < 0.06 && (f1.means[2 * (1 - k)] - 3.0).abs() < 0.1);
        assert!((f1.covs[4 * k + 1] - 0.5).abs() < 0.08, "{:?}", f1.covs);
    }

    #[test]
    fn bic_chooses_two_separated_components() {
        let a = Reference::normal(vec![-4.0], &[1.0]).unwrap();
        let b = Reference::normal(vec![4.0], &[1.0]).unwrap();
        let mut x = a.sample(2000, 1).unwrap();
        x.extend(b.sample(2000, 2).unwrap());
        let sel = fit_mixture_bic(&x, 4000, 1, &[1, 2, 3, 4], &control(), &AtomicBool::new(false)).unwrap();
        assert_eq!(sel.components[sel.chosen], 2);
        assert_eq!(sel.fits.len(), 4);
        assert!(fit_mixture_bic(&x[..3], 3, 1, &[2, 3], &control(), &AtomicBool::new(false)).is_err());
    }

    #[test]
    fn refuses_too_few_rows_and_bad_settings() {
        let x = vec![0.0, 1.0, 2.0, 3.0];
        assert!(fit_mixture(&x, 4, 1, 3).is_err());
        assert!(fit_mixture(&x, 2, 2, 0).is_err());
        assert!(fit_mixture(&[f64::NAN, 1.0, 2.0, 3.0], 4, 1, 1).is_err());
        assert!(fit_mixture(&[1.0, 1.0, 1.0, 1.0], 4, 1, 1).is_err());
    }
}
