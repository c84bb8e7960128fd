//! Binding of nce_core::estimators::lfire (ratio estimation for simulator models) and of the tabulated
//! Metropolis sampler of amortised ratio posteriors. No numerics here.

use crate::convert::{
    count_of, guard, int_slice, list_count, list_get, list_number, list_vec, real_matrix, real_slice, seed_of, Res,
};
use crate::run;
use extendr_api::prelude::*;
use nce_core::estimators::lasso::cv_logistic_lasso;
use nce_core::estimators::lasso_path::LassoControl;
use nce_core::estimators::lfire::{lfire_fit, LfireData, LfirePenalty};
use nce_core::sampling::metropolis::{metropolis_tables, ChainControl, ChainPrior, SumTables};
use nce_core::NceError;

/// Settings of `nce_lfire_fit` from `settings = list(penalty, control, seed, threads)`:
/// `penalty` "lasso" or "ridge", `control` = list(nlambda, lambda_min_ratio, nfolds, one_se,
/// coarse, onestep) for the lasso.
struct LfireSettings {
    penalty: LfirePenalty,
    seed: u64,
    threads: usize,
}

fn lfire_settings(settings: &List) -> Res<LfireSettings> {
    let arg = "settings";
    let penalty = list_get(settings, "penalty", arg)?;
    let penalty = penalty
        .as_str()
        .ok_or_else(|| NceError::invalid("settings$penalty", "must be a single string"))?;
    let control: List = list_get(settings, "control", arg)?
        .try_into()
        .map_err(|_| NceError::invalid("settings$control", "must be a list"))?;
    let num = |name: &str| list_number(&control, name, "control");
    let pen = match penalty {
        "lasso" => LfirePenalty::Lasso {
            ctrl: LassoControl {
                nlambda: num("nlambda")? as usize,
                lambda_min_ratio: num("lambda_min_ratio")?,
                nfolds: num("nfolds")? as usize,
                coarse: num("coarse")? as usize,
                onestep: num("onestep")? != 0.0,
                ..LassoControl::default()
            },
            one_se: num("one_se")? != 0.0,
        },
        "ridge" => LfirePenalty::Ridge,
        other => {
            return Err(NceError::invalid(
                "penalty",
                format!("must be lasso or ridge, not {other}"),
            ))
        }
    };
    Ok(LfireSettings {
        penalty: pen,
        seed: seed_of(list_number(settings, "seed", arg)?)?,
        threads: list_count(settings, "threads", arg, 1)?,
    })
}

/// LFIRE fits, one per theta. `marginal` (n_m x p) and `at_theta` (stacked, theta g on rows
/// starts[g] + 1 ..= starts[g + 1]) are double matrices of standardised summaries; `settings`
/// as `lfire_settings` reads it. Returns intercept, beta (n_theta x p), lambda, log_ratio,
/// criterion, df.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_lfire_fit(marginal: Robj, at_theta: Robj, starts: Robj, observed: Robj, settings: List) -> Robj {
    guard(|| {
        let LfireSettings {
            penalty: pen,
            seed,
            threads,
        } = lfire_settings(&settings)?;
        let (m, nm, p) = real_matrix(&marginal, "marginal")?;
        let (a, _na, pa) = real_matrix(&at_theta, "at_theta")?;
        if pa != p {
            return Err(NceError::invalid("at_theta", "must have as many columns as `marginal`"));
        }
        let starts: Vec<usize> = int_slice(&starts, "starts")?
            .iter()
            .map(|&s| usize::try_from(s).map_err(|_| NceError::invalid("starts", "must be >= 0")))
            .collect::<std::result::Result<_, _>>()?;
        let observed = real_slice(&observed, "observed")?;
        let data = LfireData {
            marginal: m,
            n_marginal: nm,
            at_theta: a,
            starts: &starts,
            p,
            observed,
        };
        let fits = run::run(threads, |stop| lfire_fit(&data, &pen, seed, stop))?;
        let g = fits.len();
        let beta = RMatrix::new_matrix(g, p, |i, j| fits[i].beta[j]);
        let col = |f: fn(&nce_core::estimators::lfire::LfireFit) -> f64| fits.iter().map(f).collect::<Vec<f64>>();
        Ok(list!(
            intercept = col(|f| f.intercept),
            beta = beta,
            lambda = col(|f| f.lambda),
            log_ratio = col(|f| f.log_ratio),
            criterion = col(|f| f.criterion),
            df = col(|f| f.df)
        )
        .into_robj())
    })
}

/// Cross-validated lasso path of a logistic regression (for tests against glmnet): `x` a
/// double matrix, `y` 0/1, `foldid` 1-based folds. Returns lambda, intercept, beta (p x
/// path length), cvm, cvsd, index_min and index_1se (1-based).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_lasso_cv(x: Robj, y: Robj, foldid: Robj, control: List) -> Robj {
    guard(|| {
        let (xd, n, p) = real_matrix(&x, "x")?;
        let y = real_slice(&y, "y")?;
        let folds: Vec<usize> = int_slice(&foldid, "foldid")?
            .iter()
            .map(|&f| {
                if f >= 1 {
                    Ok((f - 1) as usize)
                } else {
                    Err(NceError::invalid("foldid", "must hold fold numbers from 1"))
                }
            })
            .collect::<std::result::Result<_, _>>()?;
        let num = |name: &str| list_number(&control, name, "control");
        let ctrl = LassoControl {
            nlambda: num("nlambda")? as usize,
            lambda_min_ratio: num("lambda_min_ratio")?,
            // Optional: 1 (every lambda) unless given.
            coarse: if list_get(&control, "coarse", "control").is_ok() {
                num("coarse")? as usize
            } else {
                1
            },
            // Optional: exact K-fold CV unless given.
            onestep: list_get(&control, "onestep", "control").is_ok() && num("onestep")? != 0.0,
            ..LassoControl::default()
        };
        let cv = cv_logistic_lasso(xd, n, p, y, &folds, &ctrl)?;
        let k = cv.path.lambda.len();
        let beta = RMatrix::new_matrix(p, k, |j, l| cv.path.beta[l][j]);
        Ok(list!(
            lambda = cv.path.lambda,
            intercept = cv.path.intercept,
            beta = beta,
            dev_ratio = cv.path.dev_ratio,
            cvm = cv.cvm,
            cvsd = cv.cvsd,
            index_min = (cv.index_min + 1) as i32,
            index_1se = (cv.index_1se + 1) as i32
        )
        .into_robj())
    })
}

/// Tables of one-parameter functions: `values` an n x d double matrix (column j on the grid
/// from lo[j] to hi[j]).
fn sum_tables(values: &Robj, lo: &Robj, hi: &Robj) -> std::result::Result<SumTables, NceError> {
    let (v, n, d) = real_matrix(values, "values")?;
    let lo = real_slice(lo, "lo")?.to_vec();
    let hi = real_slice(hi, "hi")?.to_vec();
    if lo.len() != d {
        return Err(NceError::invalid("lo", "needs one value per column of `values`"));
    }
    SumTables::new(lo, hi, n, v.to_vec())
}

/// Settings of the chains of `nce_ratio_metropolis` from `settings = list(scale, burnin, steps,
/// seed, threads)`: `scale` the proposal sds (`metropolis::ChainControl`).
struct ChainSettings {
    scale: Vec<f64>,
    burnin: usize,
    steps: usize,
    seed: u64,
    threads: usize,
}

fn chain_settings(settings: &List) -> Res<ChainSettings> {
    let arg = "settings";
    let scale = list_get(settings, "scale", arg)?;
    Ok(ChainSettings {
        scale: real_slice(&scale, "scale")?.to_vec(),
        burnin: count_of(list_number(settings, "burnin", arg)?, "burnin", 0)?,
        steps: count_of(list_number(settings, "steps", arg)?, "steps", 1)?,
        seed: seed_of(list_number(settings, "seed", arg)?)?,
        threads: list_count(settings, "threads", arg, 1)?,
    })
}

/// Random-walk Metropolis on prior x exp(sum of tabulated functions). `tables` = list(values, lo,
/// hi) (`sum_tables`); `prior`: list(kind = "uniform", lower, upper) or list(kind = "normal",
/// mean, sd); `starts` a chains x d double matrix; `settings` as `chain_settings` reads it.
/// Returns draws (steps x chains x d in R's array order, as a vector), accepted (per chain,
/// after burn-in) and off_table.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_ratio_metropolis(tables: List, prior: List, starts: Robj, settings: List) -> Robj {
    guard(|| {
        let settings = chain_settings(&settings)?;
        let (values, lo, hi) = (
            list_get(&tables, "values", "tables")?,
            list_get(&tables, "lo", "tables")?,
            list_get(&tables, "hi", "tables")?,
        );
        let tables = sum_tables(&values, &lo, &hi)?;
        let kind = list_get(&prior, "kind", "prior")?;
        let pr = match kind.as_str() {
            Some("uniform") => ChainPrior::Uniform {
                lower: list_vec(&prior, "lower", "prior")?,
                upper: list_vec(&prior, "upper", "prior")?,
            },
            Some("normal") => ChainPrior::Normal {
                mean: list_vec(&prior, "mean", "prior")?,
                sd: list_vec(&prior, "sd", "prior")?,
            },
            _ => return Err(NceError::invalid("prior", "`kind` must be \"uniform\" or \"normal\"")),
        };
        let (st, nc, d) = real_matrix(&starts, "starts")?;
        if d != tables.dim() || nc == 0 {
            return Err(NceError::invalid(
                "starts",
                "must have one row per chain and one column per table",
            ));
        }
        let ctrl = ChainControl {
            scale: &settings.scale,
            burnin: settings.burnin,
            steps: settings.steps,
            seed: settings.seed,
        };
        let res = run::run(settings.threads, |stop| {
            metropolis_tables(&tables, &pr, st, &ctrl, stop)
        })?;
        Ok(list!(
            draws = res.draws,
            accepted = res.accepted.iter().map(|&a| a as f64).collect::<Vec<f64>>(),
            off_table = res.off_table as f64
        )
        .into_robj())
    })
}

/// The interpolated sum of the tables at the rows of `x` (NA off the tables).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_sum_tables_eval(values: Robj, lo: Robj, hi: Robj, x: Robj) -> Robj {
    guard(|| {
        let tables = sum_tables(&values, &lo, &hi)?;
        let (xv, n, d) = real_matrix(&x, "x")?;
        if d != tables.dim() {
            return Err(NceError::invalid("x", "must have one column per table"));
        }
        let out: Vec<Option<f64>> = (0..n)
            .map(|i| {
                let row: Vec<f64> = (0..d).map(|j| xv[i + n * j]).collect();
                tables.eval(&row)
            })
            .collect();
        Ok(Doubles::from_values(out.into_iter().map(|v| v.map_or(Rfloat::na(), Rfloat::from))).into_robj())
    })
}

extendr_module! {
    mod simulator;
    fn nce_lfire_fit;
    fn nce_lasso_cv;
    fn nce_ratio_metropolis;
    fn nce_sum_tables_eval;
}
