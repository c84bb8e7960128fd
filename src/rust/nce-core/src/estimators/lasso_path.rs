//! L1-penalised logistic regression (the lasso) by coordinate descent on a lambda path, as
//! glmnet does it (Friedman, Hastie and Tibshirani 2010): objective -(1/n) loglik(b0, beta) +
//! lambda ||beta||_1, intercept free. Also the pieces both cross-validations share (`lasso`,
//! exact; `lasso_onestep`, by one Newton step per fold): their settings and results, the
//! active-set step, the coarse-to-fine lambdas and the CV curve.
//!
//! Each outer step replaces the log-likelihood by its quadratic (IRLS) approximation and
//! minimises it with the penalty exactly on the active features by an active-set method (a
//! proximal Newton step); where the signs do not settle, coordinate descent on the weighted
//! Gram matrix X'WX / n ("covariance updates", a sweep costs p^2 instead of n p) takes over.
//! A lambda's fit ends when its KKT conditions hold to `kkt_tol`: glmnet's rule on the step
//! size alone stops early on correlated features. Features are used as given: standardise
//! them first.
//! Path stops as glmnet's: deviance ratio above 0.999, or its gain below 1e-5 of itself.

use crate::engine::family::sigmoid;
use crate::{NceError, Result};

/// Settings of the path and the cross-validation.
#[derive(Debug, Clone)]
pub struct LassoControl {
    pub nlambda: usize,
    /// Smallest lambda as a fraction of the largest (the one that zeroes every coefficient).
    pub lambda_min_ratio: f64,
    pub nfolds: usize,
    /// Convergence of the inner sweeps: largest weighted coefficient change (glmnet's thresh).
    pub tol: f64,
    /// Largest violation of the KKT conditions (gradient X'(y - mu) / n against lambda) at which
    /// a lambda's fit stops; the change rule alone stops early on correlated features.
    pub kkt_tol: f64,
    pub max_outer: usize,
    pub max_inner: usize,
    /// Cross-validation on every `coarse`-th lambda of the sequence (and the last), then on
    /// every lambda between the two coarse neighbours of the best one; 1: on every lambda.
    pub coarse: usize,
    /// Cross-validation by one Newton step per fold from the full-data fits
    /// (`lasso_onestep`) instead of a path per fold.
    pub onestep: bool,
}

impl Default for LassoControl {
    fn default() -> Self {
        LassoControl {
            nlambda: 100,
            lambda_min_ratio: 1e-4,
            nfolds: 10,
            tol: 1e-7,
            kkt_tol: 1e-8,
            max_outer: 25,
            max_inner: 10_000,
            coarse: 1,
            onestep: false,
        }
    }
}

/// Coefficients along a lambda path (the path may stop before the last lambda).
#[derive(Debug, Clone, Default)]
pub struct LassoPath {
    pub lambda: Vec<f64>,
    pub intercept: Vec<f64>,
    /// beta[k] holds the p coefficients at lambda[k].
    pub beta: Vec<Vec<f64>>,
    pub dev_ratio: Vec<f64>,
    /// Outer (IRLS) steps taken over the whole path.
    pub outer_steps: usize,
}

/// Cross-validated path: the full-data path, the CV curve and the chosen lambdas.
#[derive(Debug, Clone)]
pub struct CvLasso {
    pub path: LassoPath,
    pub cvm: Vec<f64>,
    pub cvsd: Vec<f64>,
    pub index_min: usize,
    pub index_1se: usize,
}

/// The data of a path: features x (column-major n x p) and the 0/1 response y (n).
#[derive(Clone, Copy)]
pub(crate) struct LassoData<'a> {
    pub(crate) x: &'a [f64],
    pub(crate) n: usize,
    pub(crate) p: usize,
    pub(crate) y: &'a [f64],
}

/// A column-major n x p matrix viewed by rows through an index list.
pub(crate) struct Rows<'a> {
    pub(crate) x: &'a [f64],
    pub(crate) n: usize,
}

impl Rows<'_> {
    #[inline]
    pub(crate) fn at(&self, i: usize, j: usize) -> f64 {
        self.x[j * self.n + i]
    }
}

/// Dot product with four accumulators, so the compiler can keep several multiply-adds in
/// flight (a single running sum is one long dependency chain). With AVX2 the four accumulators
/// are the lanes of one register: the same sums in the same order, so the same bits. The AVX2
/// build runs where engine::simd runs a vector build (not with NCE_NO_SIMD).
#[inline]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::engine::simd::vector() {
            // SAFETY: every vector build of engine::simd has AVX2.
            return unsafe { dot_avx2(a, b) };
        }
    }
    dot_scalar(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_avx2(a: &[f64], b: &[f64]) -> f64 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let n4 = n - n % 4;
    let mut acc = _mm256_setzero_pd();
    let mut i = 0;
    while i < n4 {
        // SAFETY: i + 4 <= n4 <= the length of both slices.
        let x = _mm256_loadu_pd(a.as_ptr().add(i));
        let y = _mm256_loadu_pd(b.as_ptr().add(i));
        acc = _mm256_add_pd(acc, _mm256_mul_pd(x, y));
        i += 4;
    }
    let mut s = [0.0f64; 4];
    _mm256_storeu_pd(s.as_mut_ptr(), acc);
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for k in n4..n {
        t += a[k] * b[k];
    }
    t
}

#[inline]
fn dot_scalar(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut s = [0.0f64; 4];
    for (x, y) in ca.zip(cb) {
        s[0] += x[0] * y[0];
        s[1] += x[1] * y[1];
        s[2] += x[2] * y[2];
        s[3] += x[3] * y[3];
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ra.iter().zip(rb) {
        t += x * y;
    }
    t
}

/// Sum with four accumulators (a single running sum is latency-bound).
#[inline]
fn sum(a: &[f64]) -> f64 {
    let c = a.chunks_exact(4);
    let r = c.remainder();
    let mut s = [0.0f64; 4];
    for x in c {
        s[0] += x[0];
        s[1] += x[1];
        s[2] += x[2];
        s[3] += x[3];
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for x in r {
        t += x;
    }
    t
}

/// Binomial deviance of 0/1 responses at linear predictors, probabilities clamped as glmnet's
/// CV does (1e-5), so a confident wrong prediction costs a bounded amount.
pub(crate) fn deviance(y: &[f64], eta: &[f64], clamp: bool) -> f64 {
    let mut d = 0.0;
    for (&yi, &e) in y.iter().zip(eta) {
        let mut p = sigmoid(e);
        if clamp {
            p = p.clamp(1e-5, 1.0 - 1e-5);
        }
        let l = if yi > 0.5 { p.ln() } else { (1.0 - p).ln() };
        d -= 2.0 * if l.is_finite() { l } else { -700.0 };
    }
    d
}

/// The lambda sequence of glmnet for standardised features: from the smallest lambda that
/// zeroes every slope down to `lambda_min_ratio` of it, evenly on the log scale.
pub fn lambda_sequence(x: &[f64], n: usize, p: usize, y: &[f64], ctrl: &LassoControl) -> Result<Vec<f64>> {
    check_inputs(x, n, p, y)?;
    let ybar = y.iter().sum::<f64>() / n as f64;
    let mut lmax = 0.0f64;
    for j in 0..p {
        let c = &x[j * n..(j + 1) * n];
        let g: f64 = c.iter().zip(y).map(|(a, b)| a * (b - ybar)).sum::<f64>() / n as f64;
        lmax = lmax.max(g.abs());
    }
    if lmax <= 0.0 {
        lmax = 1e-8;
    }
    let k = ctrl.nlambda.max(1);
    if k == 1 {
        return Ok(vec![lmax]);
    }
    let step = ctrl.lambda_min_ratio.ln() / (k - 1) as f64;
    Ok((0..k).map(|i| lmax * (step * i as f64).exp()).collect())
}

pub(crate) fn check_inputs(x: &[f64], n: usize, p: usize, y: &[f64]) -> Result<()> {
    if x.len() != n * p {
        return Err(NceError::invalid(
            "x",
            format!("has {} values, expected {n} x {p}", x.len()),
        ));
    }
    if y.len() != n {
        return Err(NceError::invalid("y", format!("has {} values, expected {n}", y.len())));
    }
    if n < 2 {
        return Err(NceError::invalid("x", "needs at least two rows"));
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(NceError::invalid("x", "has non-finite values"));
    }
    if y.iter().any(|&v| v != 0.0 && v != 1.0) {
        return Err(NceError::invalid("y", "must hold 0 and 1 only"));
    }
    let s: f64 = y.iter().sum();
    if s == 0.0 || s == n as f64 {
        return Err(NceError::invalid("y", "needs both classes"));
    }
    Ok(())
}

/// Lasso path of the logistic regression of `y` on the rows `rows` of x (column-major n x p),
/// at the given lambdas, warm-started along the path. Each outer (IRLS) step builds the
/// weighted Gram matrix on the active set only and checks the KKT conditions of the inactive
/// features through the full gradient X'(y - mu) / n, which costs n p.
pub fn logistic_lasso_path(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    rows: &[usize],
    lambdas: &[f64],
    ctrl: &LassoControl,
) -> Result<LassoPath> {
    path_from(&LassoData { x, n, p, y }, rows, lambdas, ctrl, None)
}

crate::engine::simd::avx2_twin! {
    /// The path from a starting fit (intercept, slopes) at a larger lambda, or from the null
    /// model with glmnet's stopping rule (`start` None); a path from a start runs every lambda
    /// given. The AVX2 build has no fused multiply-add and no reassociation, so both builds
    /// give the same bits.
    pub(crate) fn path_from(
        data: &LassoData,
        rows: &[usize],
        lambdas: &[f64],
        ctrl: &LassoControl,
        start: Option<(f64, &[f64])>,
    ) -> Result<LassoPath> => path_from_impl
}

/// The full gradient (`xc`: the features' columns, one after another) into `grad`, then every
/// inactive feature that violates the KKT condition at `lam` joined to the active set; true if
/// any joined.
fn admit_violators(
    xc: &[f64],
    resid: &[f64],
    lam: f64,
    grad: &mut [f64],
    is_active: &mut [bool],
    active: &mut Vec<usize>,
) -> bool {
    let m = resid.len();
    let mut added = false;
    for (j, g) in grad.iter_mut().enumerate() {
        *g = dot(&xc[j * m..(j + 1) * m], resid) / m as f64;
        if !is_active[j] && g.abs() > lam {
            is_active[j] = true;
            active.push(j);
            added = true;
        }
    }
    added
}

#[inline(always)]
fn path_from_impl(
    data: &LassoData,
    rows: &[usize],
    lambdas: &[f64],
    ctrl: &LassoControl,
    start: Option<(f64, &[f64])>,
) -> Result<LassoPath> {
    let LassoData { x, n, p, y } = *data;
    let m = rows.len();
    if m < 2 {
        return Err(NceError::invalid("x", "needs at least two rows in every fit"));
    }
    let xr = Rows { x, n };
    let yr: Vec<f64> = rows.iter().map(|&i| y[i]).collect();
    let mf = m as f64;
    let ybar = (yr.iter().sum::<f64>() / mf).clamp(1e-10, 1.0 - 1e-10);
    let null_b0 = (ybar / (1.0 - ybar)).ln();
    let null_dev = deviance(&yr, &vec![null_b0; m], false).max(1e-300);
    let (mut b0, mut beta) = match start {
        Some((b, bs)) => (b, bs.to_vec()),
        None => (null_b0, vec![0.0; p]),
    };
    // Columns gathered once (contiguous per feature) for the gradient and Gram products.
    let mut xc = vec![0.0; m * p];
    for j in 0..p {
        for (r, &i) in rows.iter().enumerate() {
            xc[j * m + r] = xr.at(i, j);
        }
    }
    let col = |j: usize| &xc[j * m..(j + 1) * m];
    let mut eta = vec![b0; m];
    for j in 0..p {
        if beta[j] != 0.0 {
            for (e, v) in eta.iter_mut().zip(col(j)) {
                *e += beta[j] * v;
            }
        }
    }
    let mut out = LassoPath::default();
    let mut active: Vec<usize> = (0..p).filter(|&j| beta[j] != 0.0).collect();
    let mut is_active: Vec<bool> = beta.iter().map(|&b| b != 0.0).collect();
    let mut w = vec![0.0; m];
    let mut resid = vec![0.0; m];
    let mut gram: Vec<f64> = Vec::new();
    let mut xw: Vec<f64> = Vec::new();
    let mut sw = 0.25;
    let mut grad = vec![0.0; p];
    let (mut gfull, mut sfull) = (Vec::new(), Vec::new());
    let mut wa = vec![0.0; m];
    let mut prev_ratio = 0.0;
    // One pass over the rows at eta: IRLS weights and residuals, and the negative
    // log-likelihood (softplus form, from the same exp), which the step control checks.
    let pass = |eta: &[f64], w: &mut [f64], resid: &mut [f64]| -> (f64, f64) {
        let (mut nll, mut sr) = (0.0, 0.0);
        let (mut prod, mut in_prod) = (1.0f64, 0);
        for r in 0..m {
            let e = eta[r];
            let a = (-e.abs()).exp();
            let inv = 1.0 / (1.0 + a);
            let mu = if e >= 0.0 { inv } else { a * inv };
            w[r] = (mu * (1.0 - mu)).max(1e-5);
            resid[r] = yr[r] - mu;
            sr += resid[r];
            let z = if yr[r] > 0.5 { -e } else { e };
            nll += z.max(0.0);
            // log1p(a) was a sixth of the time: small a by its series (error below 3e-13
            // relative), the others multiplied in blocks of 32 (each factor in (1, 2]) with one
            // log per block.
            if a < 1e-3 {
                nll += a * (1.0 - a * (0.5 - a * (1.0 / 3.0)));
            } else {
                prod *= 1.0 + a;
                in_prod += 1;
                if in_prod == 32 {
                    nll += prod.ln();
                    prod = 1.0;
                    in_prod = 0;
                }
            }
        }
        (nll + prod.ln(), sr)
    };
    let l1 = |b: &[f64]| b.iter().map(|v| v.abs()).sum::<f64>();
    let (mut nll, mut sr) = pass(&eta, &mut w, &mut resid);
    let mut beta_old = beta.clone();
    let mut eta_old = eta.clone();
    for (k, &lam) in lambdas.iter().enumerate() {
        let mut tol = ctrl.tol;
        let mut refresh = false;
        let mut newton = true;
        for outer in 0..ctrl.max_outer {
            out.outer_steps += 1;
            beta_old.copy_from_slice(&beta);
            eta_old.copy_from_slice(&eta);
            let b0_old = b0;
            let obj_old = nll / mf + lam * l1(&beta_old);
            // Each outer step solves the penalised quadratic model on the active features
            // exactly (active-set method: a proximal Newton step); sweeps of coordinate descent,
            // which crawl where features are correlated, take over when the signs do not settle.
            let step = if newton {
                let added = admit_violators(&xc, &resid, lam, &mut grad, &mut is_active, &mut active);
                active_gram(&col, &w, &resid, sr, &active, &mut gfull, &mut sfull);
                let c: Vec<f64> = std::iter::once(b0).chain(active.iter().map(|&j| beta[j])).collect();
                active_set_step(&c, &gfull, &sfull, mf, lam).map(|coef| {
                    let q1 = c.len();
                    let mut dlx = 0.0f64;
                    for a in 0..q1 {
                        let d = coef[a] - c[a];
                        dlx = dlx.max(gfull[a * q1 + a] / mf * d * d);
                    }
                    b0 = coef[0];
                    for (a, &j) in active.iter().enumerate() {
                        beta[j] = coef[a + 1];
                    }
                    (added, dlx)
                })
            } else {
                None
            };
            let (added, dlx) = if let Some(s) = step {
                s
            } else {
                newton = false;
                // Full gradient: KKT check of the inactive features, and the active residuals.
                let added = admit_violators(&xc, &resid, lam, &mut grad, &mut is_active, &mut active);
                let q = active.len();
                // The weighted Gram matrix (the Hessian of the quadratic step) on the active set is
                // the costly part (n q^2 / 2). Consecutive lambdas have nearly the same weights, so
                // the previous Hessian serves until the active set grows or a lambda needs a third
                // step (then every second step): the fixed point of the step depends on the exact
                // gradient only, so the solution is unchanged; a stale Hessian only slows it.
                if added || refresh || gram.len() != q * q || (outer >= 2 && outer % 2 == 0) {
                    refresh = false;
                    gram.clear();
                    gram.resize(q * q, 0.0);
                    xw.clear();
                    xw.resize(q, 0.0);
                    sw = sum(&w) / mf;
                    for (a, &ja) in active.iter().enumerate() {
                        let ca = col(ja);
                        for ((u, &c), &v) in wa.iter_mut().zip(ca).zip(&w) {
                            *u = c * v;
                        }
                        xw[a] = sum(&wa) / mf;
                        for (b, &jb) in active.iter().enumerate().take(a + 1) {
                            let g = dot(&wa, col(jb)) / mf;
                            gram[a * q + b] = g;
                            gram[b * q + a] = g;
                        }
                    }
                }
                let inv_diag: Vec<f64> = (0..q).map(|a| 1.0 / gram[a * q + a]).collect();
                let mut res: Vec<f64> = active.iter().map(|&j| grad[j]).collect();
                let mut res0 = sr / mf;
                let mut dlx = 0.0f64;
                let mut d0_tot = 0.0;
                let mut dbeta = vec![0.0; q];
                for _inner in 0..ctrl.max_inner {
                    let mut dmax = 0.0f64;
                    let d0 = res0 / sw;
                    if d0 != 0.0 {
                        b0 += d0;
                        d0_tot += d0;
                        for a in 0..q {
                            res[a] -= xw[a] * d0;
                        }
                        res0 -= sw * d0;
                        dmax = dmax.max(sw * d0 * d0);
                    }
                    for a in 0..q {
                        let j = active[a];
                        let gjj = gram[a * q + a];
                        if gjj <= 0.0 {
                            continue;
                        }
                        // A multiplication: the division's latency sat on the sweep's critical path.
                        let new = soft(res[a] + gjj * beta[j], lam) * inv_diag[a];
                        let d = new - beta[j];
                        if d != 0.0 {
                            beta[j] = new;
                            dbeta[a] += d;
                            let gc = &gram[a * q..(a + 1) * q];
                            for c in 0..q {
                                res[c] -= gc[c] * d;
                            }
                            res0 -= xw[a] * d;
                            dmax = dmax.max(gjj * d * d);
                        }
                    }
                    if dmax < tol {
                        break;
                    }
                }
                dlx = dlx.max(sw * d0_tot * d0_tot);
                for a in 0..q {
                    dlx = dlx.max(gram[a * q + a] * dbeta[a] * dbeta[a]);
                }
                (added, dlx)
            };
            // eta = b0 + X_A beta_A.
            eta.iter_mut().for_each(|e| *e = b0);
            for &j in &active {
                let bj = beta[j];
                if bj != 0.0 {
                    for (e, v) in eta.iter_mut().zip(col(j)) {
                        *e += bj * v;
                    }
                }
            }
            (nll, sr) = pass(&eta, &mut w, &mut resid);
            // Step control: the quadratic step is a descent direction of the penalised
            // objective; where it overshoots (nearly separable classes, far steps between
            // lambdas), halve it until the objective does not increase.
            let mut halvings = 0;
            while nll / mf + lam * l1(&beta) > obj_old + 1e-12 * obj_old.abs() && halvings < 40 {
                for (b, o) in beta.iter_mut().zip(&beta_old) {
                    *b = 0.5 * (*b + o);
                }
                b0 = 0.5 * (b0 + b0_old);
                for (e, o) in eta.iter_mut().zip(&eta_old) {
                    *e = 0.5 * (*e + o);
                }
                (nll, sr) = pass(&eta, &mut w, &mut resid);
                halvings += 1;
            }
            if dlx < tol && !added {
                // Small steps are not yet the optimum where features are correlated (the
                // sweeps crawl along the Gram matrix's small eigenvectors): stop only when
                // the KKT conditions hold, else go on with a fresh Hessian and finer sweeps.
                if kkt_violation(&col, &resid, sr, mf, &beta, lam) <= ctrl.kkt_tol {
                    break;
                }
                tol = (tol * 1e-3).max(1e-30);
                refresh = true;
                newton = true;
            }
        }
        let ratio = 1.0 - 2.0 * nll / null_dev;
        out.lambda.push(lam);
        out.intercept.push(b0);
        out.beta.push(beta.clone());
        out.dev_ratio.push(ratio);
        if start.is_none() && (ratio > 0.999 || (k > 0 && ratio - prev_ratio < 1e-5 * ratio)) {
            break;
        }
        prev_ratio = ratio;
    }
    Ok(out)
}

/// The weighted Gram matrix X1' W X1 (sums; X1 = [1 | X_active], intercept first) and the
/// score X1'(y - mu), for an exact Newton step on the active features.
#[inline(always)]
fn active_gram<'c>(
    col: &impl Fn(usize) -> &'c [f64],
    w: &[f64],
    resid: &[f64],
    sr: f64,
    active: &[usize],
    g: &mut Vec<f64>,
    s: &mut Vec<f64>,
) {
    let q1 = active.len() + 1;
    g.clear();
    g.resize(q1 * q1, 0.0);
    s.clear();
    s.resize(q1, 0.0);
    g[0] = sum(w);
    s[0] = sr;
    let mut wa = vec![0.0; w.len()];
    for (a, &ja) in active.iter().enumerate() {
        let ca = col(ja);
        for ((u, &c), &v) in wa.iter_mut().zip(ca).zip(w) {
            *u = c * v;
        }
        s[a + 1] = dot(ca, resid);
        let g0 = sum(&wa);
        g[a + 1] = g0;
        g[(a + 1) * q1] = g0;
        for (b, &jb) in active.iter().enumerate().take(a + 1) {
            let v = dot(&wa, col(jb));
            g[(a + 1) * q1 + b + 1] = v;
            g[(b + 1) * q1 + a + 1] = v;
        }
    }
}

/// Largest violation of the lasso's optimality conditions: the intercept's score, and for
/// each feature its score X_j'(y - mu) / n against lambda sign(beta_j), or beyond lambda at 0.
#[inline(always)]
fn kkt_violation<'c>(
    col: &impl Fn(usize) -> &'c [f64],
    resid: &[f64],
    sr: f64,
    mf: f64,
    beta: &[f64],
    lam: f64,
) -> f64 {
    let mut v = (sr / mf).abs();
    for (j, &b) in beta.iter().enumerate() {
        let g = dot(col(j), resid) / mf;
        let e = if b > 0.0 {
            (g - lam).abs()
        } else if b < 0.0 {
            (g + lam).abs()
        } else {
            g.abs() - lam
        };
        v = v.max(e);
    }
    v
}

pub(crate) fn soft(u: f64, lam: f64) -> f64 {
    if u > lam {
        u - lam
    } else if u < -lam {
        u + lam
    } else {
        0.0
    }
}

/// The checks of a cross-validated fit; returns the number of folds.
pub(crate) fn check_cv_inputs(x: &[f64], n: usize, p: usize, y: &[f64], folds: &[usize]) -> Result<usize> {
    check_inputs(x, n, p, y)?;
    if folds.len() != n {
        return Err(NceError::invalid("folds", "must give one fold per row"));
    }
    let nfolds = folds.iter().copied().max().map_or(0, |m| m + 1);
    if nfolds < 2 {
        return Err(NceError::invalid("nfolds", "must be at least 2"));
    }
    Ok(nfolds)
}

/// The lambda sequence, the indices of its coarse lambdas reached by the all-rows path, and
/// that path.
pub(crate) fn coarse_path(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    ctrl: &LassoControl,
) -> Result<(Vec<f64>, Vec<usize>, LassoPath)> {
    let all_lambdas = lambda_sequence(x, n, p, y, ctrl)?;
    let mut coarse_idx = coarse_indices(all_lambdas.len(), ctrl.coarse);
    let coarse_l: Vec<f64> = coarse_idx.iter().map(|&i| all_lambdas[i]).collect();
    let all: Vec<usize> = (0..n).collect();
    let path = logistic_lasso_path(x, n, p, y, &all, &coarse_l, ctrl)?;
    coarse_idx.truncate(path.lambda.len());
    Ok((all_lambdas, coarse_idx, path))
}

/// Indices of the coarse lambdas among `nl`: every `step`-th, and the last.
pub(crate) fn coarse_indices(nl: usize, step: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..nl).step_by(step.max(1)).collect();
    if idx.last() != Some(&(nl - 1)) {
        idx.push(nl - 1);
    }
    idx
}

/// The fine stretch: lambda indices strictly between the coarse neighbours of the best coarse
/// lambda (position `kc` among `coarse_idx`), other than coarse ones.
pub(crate) fn fine_indices(coarse_idx: &[usize], kc: usize) -> Vec<usize> {
    let nc = coarse_idx.len();
    let lo = if kc > 0 { coarse_idx[kc - 1] } else { coarse_idx[0] };
    let hi = if kc + 1 < nc {
        coarse_idx[kc + 1]
    } else {
        coarse_idx[kc]
    };
    (lo + 1..hi).filter(|i| !coarse_idx.contains(i)).collect()
}

/// Coarse and fine lambdas in one order (lambda decreasing): (index in the sequence, fine?,
/// position in its own list).
pub(crate) fn merge_order(coarse_idx: &[usize], fine: &[usize]) -> Vec<(usize, bool, usize)> {
    let mut order: Vec<(usize, bool, usize)> = coarse_idx.iter().enumerate().map(|(k, &i)| (i, false, k)).collect();
    order.extend(fine.iter().enumerate().map(|(k, &i)| (i, true, k)));
    order.sort_by_key(|o| o.0);
    order
}

pub(crate) fn argmin(c: &[f64]) -> usize {
    (0..c.len()).fold(0, |b, k| if c[k] < c[b] { k } else { b })
}

/// CV mean and standard error per lambda from each fold's held-out mean deviance `dev[f][k]`,
/// folds weighted by their sizes `fold_n` (as glmnet's cv.glmnet).
pub(crate) fn cv_curve_of(fold_n: &[f64], dev: &[Vec<f64>], nl: usize) -> (Vec<f64>, Vec<f64>) {
    let wsum: f64 = fold_n.iter().sum();
    let kf = fold_n.iter().filter(|&&v| v > 0.0).count().max(2) as f64;
    let mut cvm = vec![0.0; nl];
    let mut cvsd = vec![0.0; nl];
    for k in 0..nl {
        let m: f64 = fold_n.iter().zip(dev).map(|(w, d)| w * d[k]).sum::<f64>() / wsum;
        let v: f64 = fold_n.iter().zip(dev).map(|(w, d)| w * (d[k] - m).powi(2)).sum::<f64>() / wsum;
        cvm[k] = m;
        cvsd[k] = (v / (kf - 1.0)).sqrt();
    }
    (cvm, cvsd)
}

/// The result with lambda.min and lambda.1se (the largest lambda within one SE of the minimum).
pub(crate) fn cv_result(path: LassoPath, cvm: Vec<f64>, cvsd: Vec<f64>) -> CvLasso {
    let index_min = argmin(&cvm);
    let bound = cvm[index_min] + cvsd[index_min];
    let index_1se = (0..cvm.len()).find(|&k| cvm[k] <= bound).unwrap_or(index_min);
    CvLasso {
        path,
        cvm,
        cvsd,
        index_min,
        index_1se,
    }
}

/// The step by an active-set method: on a support S with signs sigma, the stationarity
/// conditions are linear, G_SS x_S = b_S - m lam sigma_S with b = s + G c (x the new
/// coefficients, zero off S), solved by Cholesky. The solution is the minimiser if the signs
/// hold and every slope off S has |b_j - (G x)_j| <= m lam. Starting from the full-data fit's
/// support (nearly always right), slopes whose sign flips leave S and violators enter it, for a
/// few rounds; None if that does not settle (coordinate descent then takes over).
pub(crate) fn active_set_step(c: &[f64], gram: &[f64], score: &[f64], m: f64, lam: f64) -> Option<Vec<f64>> {
    let p1 = c.len();
    let b: Vec<f64> = (0..p1)
        .map(|j| score[j] + dot(&gram[j * p1..(j + 1) * p1], c))
        .collect();
    let mut sign: Vec<f64> = c.iter().map(|v| v.signum() * (*v != 0.0) as u8 as f64).collect();
    sign[0] = 0.0;
    let ml = m * lam;
    for _round in 0..6 {
        let support: Vec<usize> = (0..p1).filter(|&j| j == 0 || sign[j] != 0.0).collect();
        let q = support.len();
        let gss = nalgebra::DMatrix::from_fn(q, q, |i, k| gram[support[i] * p1 + support[k]]);
        let rhs = nalgebra::DVector::from_fn(q, |i, _| b[support[i]] - ml * sign[support[i]]);
        let xs = gss.cholesky()?.solve(&rhs);
        let mut coef = vec![0.0; p1];
        for (i, &j) in support.iter().enumerate() {
            coef[j] = xs[i];
        }
        let mut changed = false;
        for &j in support.iter().skip(1) {
            if coef[j] * sign[j] <= 0.0 {
                sign[j] = 0.0;
                changed = true;
            }
        }
        if !changed {
            for j in 1..p1 {
                if sign[j] == 0.0 {
                    let g = b[j]
                        - support
                            .iter()
                            .enumerate()
                            .map(|(i, &k)| gram[j * p1 + k] * xs[i])
                            .sum::<f64>();
                    if g.abs() > ml * (1.0 + 1e-9) {
                        sign[j] = g.signum();
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return Some(coef);
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::family::sigmoid;
    use crate::rng::stream_rng;
    use rand::Rng;
    use rand_distr::{Distribution, StandardNormal};

    /// n rows of p standard normal features and a logistic response on the first two.
    pub(crate) fn problem(n: usize, p: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = stream_rng(seed, 0);
        let x: Vec<f64> = (0..n * p).map(|_| StandardNormal.sample(&mut rng)).collect();
        let y: Vec<f64> = (0..n)
            .map(|i| {
                let eta = 0.3 + 1.5 * x[i] - 1.0 * x[n + i];
                if rng.gen::<f64>() < sigmoid(eta) {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        (x, y)
    }

    /// The path over the default lambda sequence, on every row.
    fn full_path(x: &[f64], n: usize, p: usize, y: &[f64], ctrl: &LassoControl) -> LassoPath {
        let lam = lambda_sequence(x, n, p, y, ctrl).unwrap();
        let rows: Vec<usize> = (0..n).collect();
        logistic_lasso_path(x, n, p, y, &rows, &lam, ctrl).unwrap()
    }

    /// KKT conditions of the lasso at every lambda of the path.
    #[test]
    fn path_satisfies_kkt() {
        let (n, p) = (400, 6);
        let (x, y) = problem(n, p, 3);
        let ctrl = LassoControl {
            nlambda: 20,
            tol: 1e-12,
            ..LassoControl::default()
        };
        let path = full_path(&x, n, p, &y, &ctrl);
        assert!(path.beta[0].iter().all(|&b| b.abs() < 1e-10));
        for k in 0..path.lambda.len() {
            let eta: Vec<f64> = (0..n)
                .map(|i| path.intercept[k] + (0..p).map(|j| x[j * n + i] * path.beta[k][j]).sum::<f64>())
                .collect();
            let r: Vec<f64> = (0..n).map(|i| y[i] - sigmoid(eta[i])).collect();
            assert!(r.iter().sum::<f64>().abs() / (n as f64) < 1e-5);
            for j in 0..p {
                let g = (0..n).map(|i| x[j * n + i] * r[i]).sum::<f64>() / n as f64;
                let b = path.beta[k][j];
                if b == 0.0 {
                    assert!(g.abs() <= path.lambda[k] * (1.0 + 1e-3) + 1e-6, "k {k} j {j} g {g}");
                } else {
                    assert!((g - path.lambda[k] * b.signum()).abs() < 1e-4, "k {k} j {j} g {g}");
                }
            }
        }
    }

    /// Nearly separable classes: the step control keeps the penalised objective decreasing, so
    /// the fits stay finite and the deviance ratio in [0, 1] even with far steps between lambdas.
    #[test]
    fn step_control_on_nearly_separable_classes() {
        let (n, p) = (300, 4);
        let (x, _) = problem(n, p, 4);
        let y: Vec<f64> = (0..n)
            .map(|i| if x[i] + 0.05 * x[n + i] > 0.0 { 1.0 } else { 0.0 })
            .collect();
        let ctrl = LassoControl {
            nlambda: 6,
            lambda_min_ratio: 1e-5,
            ..LassoControl::default()
        };
        let path = full_path(&x, n, p, &y, &ctrl);
        for k in 0..path.lambda.len() {
            assert!(
                path.dev_ratio[k] >= -1e-12 && path.dev_ratio[k] <= 1.0,
                "{:?}",
                path.dev_ratio
            );
            assert!(path.beta[k].iter().all(|b| b.is_finite()));
        }
        assert!(path.dev_ratio.windows(2).all(|w| w[1] >= w[0] - 1e-9));
    }
}
