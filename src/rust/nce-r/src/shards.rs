//! Binding of nce_core::engine::shards: pooled fits with the row-level block in shards held by the
//! workers of an R `future` plan. The fit runs on the per-call pool; whenever it needs the
//! shards, the R main thread (never a pool thread) calls the R function that runs the shards'
//! tasks. No numerics here.

use crate::convert::{guard, int_count, int_slice, list_get, real_matrix, real_slice, threads_of, zero_based, Res};
use crate::fit::{free_result, grouped_problem, reml_result};
use crate::run::{self, Requester};
use extendr_api::prelude::*;
use nce_core::engine::reml::fit_reml;
use nce_core::engine::shards::{
    fit_reml_free_intercepts_sharded, sharded_cluster_sandwich, ShardBackend, ShardLayout, ShardOp, ShardPart,
    ShardResult, ShardTask, ShardTaskView, ShardedDesign, NO_GROUP,
};
use nce_core::NceError;
use std::sync::atomic::Ordering;

type Answer = Res<Vec<ShardResult>>;

/// Shards reached through the R main thread.
struct RShards<'a>(&'a Requester<Vec<ShardTask>, Answer>);

impl ShardBackend for RShards<'_> {
    fn run(&self, tasks: Vec<ShardTask>) -> Res<Vec<ShardResult>> {
        self.0
            .ask(tasks)
            .unwrap_or_else(|| Err(NceError::Internal("the R main thread stopped answering".into())))
    }
}

fn usize_vec(x: &Robj, arg: &str) -> Res<Vec<usize>> {
    let v = int_slice(x, arg)?;
    if v.iter().any(|&g| g < 0) {
        return Err(NceError::invalid(arg, "must hold non-negative integers"));
    }
    Ok(v.iter().map(|&g| g as usize).collect())
}

fn to_i32(v: &[usize]) -> Vec<i32> {
    v.iter().map(|&g| g as i32).collect()
}

/// Shard `which` (1-based) of a grouped design with B (ngroups x pb) and the 1-based group of
/// each row, split into `shards`: list(rows (1-based, the rows the shard holds: its own rows
/// and all rows of its groups, in row order), own (0-based position of its first own row among
/// them), nrow (its own rows), group (0-based, of its own rows), b, held_group (per held row its
/// group minus g0, 0-based, or -1 outside the shard's groups), g0, g1 (the shard's groups
/// g0..g1, 0-based, end excluded), n_shards). The caller adds A on the held rows (its worker
/// computes them), one shard at a time.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_shard_split(b: Robj, group: Robj, shards: i32, which: i32) -> Robj {
    guard(|| {
        let (bd, ng, pb) = real_matrix(&b, "b")?;
        let g0 = zero_based(&group, "group", ng)?;
        let layout = ShardLayout::new(&g0, ng, int_count(shards, "shards", 1)?)?;
        let s = int_count(which, "which", 1)? - 1;
        if s >= layout.len() {
            return Err(NceError::invalid(
                "which",
                format!("is {}, but there are {} shards", s + 1, layout.len()),
            ));
        }
        let (r0, r1) = layout.rows[s];
        let (t0, t1) = layout.groups[s];
        let (_, own) = layout.held_size(s);
        let one_based = |r: usize| r as i32 + 1;
        let held_group = layout.held_groups(s, &g0);
        Ok(list!(
            rows = layout.held_rows(s).map(one_based).collect::<Vec<i32>>(),
            own = own as i32,
            nrow = (r1 - r0) as i32,
            group = to_i32(&g0[r0..r1]),
            b = RMatrix::new_matrix(ng, pb, |i, j| bd[j * ng + i]),
            held_group = held_group
                .iter()
                .map(|&g| if g == NO_GROUP { -1 } else { g as i32 })
                .collect::<Vec<i32>>(),
            g0 = t0 as i32,
            g1 = t1 as i32,
            n_shards = layout.len() as i32
        )
        .into_robj())
    })
}

/// A task as an R list (its vectors copied to R once, the task then dropped: a REML step's
/// weights are 600 MB a shard at 12 million rows).
fn task_to_r(t: ShardTask) -> Robj {
    list!(
        op = t.op.name(),
        x = t.x,
        nw = t.nw as i32,
        w_held = t.w_held,
        v_held = t.v_held,
        want_aw = t.want_aw
    )
    .into_robj()
}

/// A task from R: its vectors are read in place (`view`), not copied.
struct RTask {
    op: ShardOp,
    nw: usize,
    x: Robj,
    w_held: Robj,
    v_held: Robj,
    want_aw: bool,
}

impl RTask {
    fn from_r(l: &List) -> Res<Self> {
        let get = |name: &str| list_get(l, name, "task");
        let op = get("op")?;
        let op = op.as_str().and_then(ShardOp::from_name).ok_or_else(|| {
            NceError::invalid(
                "task",
                "`op` must be \"info\", \"eta\", \"sums\", \"quad\" or \"free_leverages\"",
            )
        })?;
        let nw = get("nw")?
            .as_integer()
            .filter(|&v| v >= 0)
            .ok_or_else(|| NceError::invalid("task", "`nw` must be a count"))?;
        Ok(RTask {
            op,
            nw: nw as usize,
            x: get("x")?,
            w_held: get("w_held")?,
            v_held: get("v_held")?,
            want_aw: get("want_aw")?.as_bool().unwrap_or(false),
        })
    }

    fn view(&self) -> Res<ShardTaskView<'_>> {
        Ok(ShardTaskView {
            op: self.op,
            x: real_slice(&self.x, "x")?,
            nw: self.nw,
            w_held: real_slice(&self.w_held, "w_held")?,
            v_held: real_slice(&self.v_held, "v_held")?,
            want_aw: self.want_aw,
        })
    }
}

fn result_to_r(r: ShardResult) -> Robj {
    list!(
        rows = r.rows,
        hess = r.hess,
        grad = r.grad,
        gw = r.gw,
        gv = r.gv,
        cross = r.cross,
        aw = r.aw
    )
    .into_robj()
}

fn result_from_r(x: &Robj, s: usize) -> Res<ShardResult> {
    let bad = || {
        NceError::invalid(
            "shards",
            format!("shard {} returned something other than its sums", s + 1),
        )
    };
    let l: List = x.clone().try_into().map_err(|_| bad())?;
    let num = |name: &str| -> Res<Vec<f64>> {
        let v = list_get(&l, name, "shards").map_err(|_| bad())?;
        Ok(real_slice(&v, "shards").map_err(|_| bad())?.to_vec())
    };
    Ok(ShardResult {
        rows: num("rows")?,
        hess: num("hess")?,
        grad: num("grad")?,
        gw: num("gw")?,
        gv: num("gv")?,
        cross: num("cross")?,
        aw: num("aw")?,
    })
}

/// One shard's task on a worker: `shard` as from `nce_shard_split` with `a`, A on its held rows;
/// `task` a list(op, x, nw, w_held, v_held, want_aw). Returns list(rows, hess, grad, gw, gv,
/// cross, aw).
/// @keywords internal
/// @noRd
#[extendr]
fn nce_shard_task(shard: List, task: List, threads: i32) -> Robj {
    guard(|| {
        let get = |name: &str| list_get(&shard, name, "shard");
        let (a, b) = (get("a")?, get("b")?);
        let (ad, nheld, pa) = real_matrix(&a, "shard$a")?;
        let (bd, ngroups, pb) = real_matrix(&b, "shard$b")?;
        let group = usize_vec(&get("group")?, "shard$group")?;
        let held_group: Vec<usize> = int_slice(&get("held_group")?, "shard$held_group")?
            .iter()
            .map(|&g| usize::try_from(g).unwrap_or(NO_GROUP))
            .collect();
        let bound = |name: &str| -> Res<usize> {
            get(name)?
                .as_integer()
                .filter(|&v| v >= 0)
                .map(|v| v as usize)
                .ok_or_else(|| NceError::invalid("shard", format!("`{name}` must be a count")))
        };
        let part = ShardPart {
            a: ad,
            nheld,
            own: bound("own")?,
            nrow: bound("nrow")?,
            pa,
            group: &group,
            b: bd,
            ngroups,
            pb,
            held_group: &held_group,
            g0: bound("g0")?,
            g1: bound("g1")?,
        };
        let task = RTask::from_r(&task)?;
        let view = task.view()?;
        let res = run::run(threads_of(threads)?, |_| part.compute(view))?;
        Ok(result_to_r(res))
    })
}

/// The shards' tasks through the R function `runner(tasks)` (one task per shard; returns one
/// result per shard, or a condition: class "interrupt" when the user interrupted it).
fn serve(runner: &Function, tasks: Vec<ShardTask>) -> Answer {
    let rtasks = List::from_values(tasks.into_iter().map(task_to_r));
    let out = runner
        .call(pairlist!(rtasks))
        .map_err(|e| NceError::invalid("shards", format!("the shards' runner failed: {e}")))?;
    if out.inherits("interrupt") {
        return Err(NceError::Interrupted);
    }
    if let Some(msg) = crate::convert::returned_condition(&out) {
        return Err(NceError::invalid("shards", format!("a shard's worker failed: {msg}")));
    }
    let l: List = out
        .try_into()
        .map_err(|_| NceError::invalid("shards", "the shards' runner must return a list"))?;
    l.values().enumerate().map(|(s, r)| result_from_r(&r, s)).collect()
}

/// The runner of a sharded fit (see `serve`).
fn runner_of(runner: Robj) -> Res<Function> {
    runner
        .try_into()
        .map_err(|_| NceError::invalid("runner", "must be a function"))
}

/// REML fit on the grouped design [A | B[group, ]] with A in `shards` shards reached through
/// `runner` (see `serve`): as `nce_fit_reml_grouped` for a dense A with `pa` columns, with
/// the same results bit for bit. `problem` as for `nce_fit_reml_grouped`, with the number of
/// shards and of columns of A in `settings$shards` and `settings$pa`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml_grouped_sharded(runner: Robj, b: Robj, problem: List) -> Robj {
    guard(|| {
        let problem = grouped_problem(&problem)?;
        let settings = &problem.settings;
        let shards = settings.count("shards", 1)?;
        let pa = settings.count("pa", 0)?;
        let (bd, ng, pb) = real_matrix(&b, "b")?;
        let prob = problem.response.problem(settings)?;
        let runner = runner_of(runner)?;
        let g0 = problem.group(ng, prob.y.len())?;
        let cluster = problem.cluster(ng)?;
        let pens = problem.penalties(pa + pb)?;
        let ctrl = settings.reml()?;
        let (fit, sandwich) = run::run_serving(
            settings.threads,
            |tasks| serve(&runner, tasks),
            |stop, requester| {
                let backend = RShards(requester);
                let design = ShardedDesign::new(bd, ng, pb, &g0, pa, shards, &backend)?;
                let fit = fit_reml(&design, &prob, &pens, &ctrl, &mut || {
                    stop.load(Ordering::Relaxed) || design.failed()
                });
                // A shard's failure (or an interrupt while the shards ran) is the cause.
                if let Some(e) = design.take_failure() {
                    return Err(e);
                }
                let fit = fit?;
                let sandwich = cluster
                    .as_deref()
                    .map(|c| sharded_cluster_sandwich(&design, c, &fit.fit.row_grad, &fit.vp, &fit.fit.aliased))
                    .transpose()?;
                Ok((fit, sandwich))
            },
        )?;
        Ok(reml_result(fit, sandwich, vec![false; pa + pb]))
    })
}

/// REML fit on [A | one free intercept per group] with A in `shards` shards reached through
/// `runner` (the shards written with a B of no columns): as `nce_fit_reml_free_intercepts` for a
/// dense A with `pa` columns, with the same results bit for bit. `problem` as for
/// `nce_fit_reml_free_intercepts`, with `settings$shards` and `settings$pa`.
/// @keywords internal
/// @noRd
#[extendr]
fn nce_fit_reml_free_intercepts_sharded(runner: Robj, problem: List) -> Robj {
    guard(|| {
        let problem = grouped_problem(&problem)?;
        let settings = &problem.settings;
        let shards = settings.count("shards", 1)?;
        let pa = settings.count("pa", 1)?;
        let ng = settings.count("ngroups", 1)?;
        let prob = problem.response.problem(settings)?;
        let runner = runner_of(runner)?;
        let g0 = problem.group(ng, prob.y.len())?;
        let cluster = problem.cluster(ng)?;
        let pens = problem.penalties(pa)?;
        let ctrl = settings.reml()?;
        let no_b: Vec<f64> = Vec::new();
        let fit = run::run_serving(
            settings.threads,
            |tasks| serve(&runner, tasks),
            |stop, requester| {
                let backend = RShards(requester);
                let design = ShardedDesign::new(&no_b, ng, 0, &g0, pa, shards, &backend)?;
                let fit =
                    fit_reml_free_intercepts_sharded(&design, &prob, &pens, &ctrl, cluster.as_deref(), &mut || {
                        stop.load(Ordering::Relaxed) || design.failed()
                    });
                // A shard's failure (or an interrupt while the shards ran) is the cause.
                if let Some(e) = design.take_failure() {
                    return Err(e);
                }
                fit
            },
        )?;
        free_result(fit, pa)
    })
}

extendr_module! {
    mod shards;
    fn nce_fit_reml_free_intercepts_sharded;
    fn nce_shard_split;
    fn nce_shard_task;
    fn nce_fit_reml_grouped_sharded;
}
