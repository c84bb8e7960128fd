//! Pooled fits on the grouped design [A | B[group, ]] (engine/grouped.rs) with the rows of A
//! held in shards, e.g. by the worker processes of an R `future` plan.
//!
//! Shard s owns the rows r0..r1 of A (a whole number of the engine's fixed chunks of
//! CHUNK_ROWS rows) for the row-level work (linear predictor, A'WA and A'v per chunk,
//! leverages), and its range of groups g0..g1 (a whole number of the cross block's chunks of
//! CHUNK_ROWS groups) for the group sums, which need all rows of those groups. It holds A once
//! on the union of the two sets of rows, in row order: its own rows are one block of it, and
//! the rows of its groups are mostly among them (a transition's reference rows follow one
//! another), so a shard holds little more than its share of A. Each shard returns its per-chunk
//! partial sums and its groups' sums, and the main process adds them in the order of the
//! in-memory loops: a sharded fit is bit-identical to the in-memory fit whatever the number of
//! shards. The main process keeps row-length vectors, B and the group of each row, never A.

use crate::engine::design::{DenseDesign, Design, CHUNK_ROWS};
pub use crate::engine::grouped::NO_GROUP;
use crate::engine::grouped::{
    assemble, free_intercepts_on, free_leverages_of, FreeInterceptFit, FreeRows, GroupedDesign,
};
use crate::engine::irls::Problem;
use crate::engine::penalty::PenaltySet;
use crate::engine::reml::RemlControl;
use crate::engine::sandwich::{add_group_block, add_group_sums_by_cluster, bread_meat_bread, cluster_score_sums};
use crate::error::{NceError, Result};
use nalgebra::{DMatrix, DVector};
use std::sync::Mutex;

/// Which rows and groups each shard holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardLayout {
    /// Rows r0..r1 of each shard (chunk-aligned).
    pub rows: Vec<(usize, usize)>,
    /// Groups g0..g1 of each shard (aligned to chunks of groups; empty when there are fewer
    /// chunks of groups than shards).
    pub groups: Vec<(usize, usize)>,
    /// All rows of each shard's groups, in row order.
    pub group_rows: Vec<Vec<usize>>,
    /// Where each shard's own rows fall among its group rows: group_rows[s][..lo] lie before
    /// r0 and group_rows[s][hi..] from r1 on.
    pub split_at: Vec<(usize, usize)>,
}

impl ShardLayout {
    /// Split the rows of a grouped design (`group[r]` in 0..ngroups) into `shards` shards.
    pub fn new(group: &[usize], ngroups: usize, shards: usize) -> Result<Self> {
        let n = group.len();
        let nchunks = n.div_ceil(CHUNK_ROWS).max(1);
        if shards == 0 || shards > nchunks {
            return Err(NceError::invalid(
                "shards",
                format!(
                    "must be a whole number from 1 to {nchunks} (the {n} rows make {nchunks} chunk{} of {CHUNK_ROWS} \
                     rows), got {shards}",
                    if nchunks == 1 { "" } else { "s" }
                ),
            ));
        }
        if let Some(r) = group.iter().position(|&g| g >= ngroups) {
            return Err(NceError::invalid(
                "group",
                format!("row {} names group {} but there are {ngroups}", r + 1, group[r] + 1),
            ));
        }
        let split = |m: usize, s: usize| (s * m / shards, (s + 1) * m / shards);
        let rows: Vec<(usize, usize)> = (0..shards)
            .map(|s| {
                let (c0, c1) = split(nchunks, s);
                ((c0 * CHUNK_ROWS).min(n), (c1 * CHUNK_ROWS).min(n))
            })
            .collect();
        let ngc = ngroups.div_ceil(CHUNK_ROWS);
        let groups: Vec<(usize, usize)> = (0..shards)
            .map(|s| {
                let (c0, c1) = split(ngc, s);
                ((c0 * CHUNK_ROWS).min(ngroups), (c1 * CHUNK_ROWS).min(ngroups))
            })
            .collect();
        let mut shard_of_group = vec![0usize; ngroups];
        for (s, &(g0, g1)) in groups.iter().enumerate() {
            shard_of_group[g0..g1].iter_mut().for_each(|v| *v = s);
        }
        let mut group_rows = vec![Vec::new(); shards];
        for (r, &g) in group.iter().enumerate() {
            group_rows[shard_of_group[g]].push(r);
        }
        let split_at = rows
            .iter()
            .zip(&group_rows)
            .map(|(&(r0, r1), gr)| (gr.partition_point(|&r| r < r0), gr.partition_point(|&r| r < r1)))
            .collect();
        Ok(ShardLayout {
            rows,
            groups,
            group_rows,
            split_at,
        })
    }

    /// The rows shard s holds, in row order: its group rows before r0, its own rows r0..r1,
    /// then its group rows from r1 on.
    pub fn held_rows(&self, s: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        let (r0, r1) = self.rows[s];
        let (lo, hi) = self.split_at[s];
        let gr = &self.group_rows[s];
        gr[..lo].iter().copied().chain(r0..r1).chain(gr[hi..].iter().copied())
    }

    /// How many rows shard s holds, and where its own rows start among them.
    pub fn held_size(&self, s: usize) -> (usize, usize) {
        let (r0, r1) = self.rows[s];
        let (lo, hi) = self.split_at[s];
        (lo + (r1 - r0) + self.group_rows[s].len() - hi, lo)
    }

    /// Per row that shard s holds (`held_rows`), its group minus g0 if it is one of the
    /// shard's groups, else `NO_GROUP`.
    pub fn held_groups(&self, s: usize, group: &[usize]) -> Vec<usize> {
        let (g0, g1) = self.groups[s];
        self.held_rows(s)
            .map(|r| {
                if (g0..g1).contains(&group[r]) {
                    group[r] - g0
                } else {
                    NO_GROUP
                }
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// What a shard is asked to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardOp {
    /// Sizes, and which columns of A are all ones.
    Info,
    /// The linear predictor of the shard's rows.
    Eta,
    /// Per-chunk A'WA and A'v, and the group sums.
    Sums,
    /// x_r' M x_r for the shard's rows.
    Quad,
    /// The free-intercept leverages (a_r - c_t)' Sigma^{-1} (a_r - c_t) + 1 / d_t of the shard's
    /// rows; `x` holds Sigma^{-1} (pa x pa), the centres (groups x pa, group after group) and d.
    FreeLeverages,
}

impl ShardOp {
    pub fn name(self) -> &'static str {
        match self {
            ShardOp::Info => "info",
            ShardOp::Eta => "eta",
            ShardOp::Sums => "sums",
            ShardOp::Quad => "quad",
            ShardOp::FreeLeverages => "free_leverages",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        [
            ShardOp::Info,
            ShardOp::Eta,
            ShardOp::Sums,
            ShardOp::Quad,
            ShardOp::FreeLeverages,
        ]
        .into_iter()
        .find(|o| o.name() == s)
    }
}

/// One shard's task: only beta- and weight-sized data travel.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardTask {
    pub op: ShardOp,
    /// Eta: the coefficients (pa + pb). Quad: the p x p matrix M, column-major.
    pub x: Vec<f64>,
    /// Sums: the number of weight vectors, and each of them on the rows the shard holds
    /// (`ShardLayout::held_rows`), weight after weight.
    pub nw: usize,
    pub w_held: Vec<f64>,
    /// Sums: a plain vector on the same rows (empty: none).
    pub v_held: Vec<f64>,
    /// Sums: also return the groups' weighted row sums of A.
    pub want_aw: bool,
}

/// A task's data, borrowed (from R vectors on a worker, or from a `ShardTask`): a worker reads
/// the weights where they arrived instead of copying them (at 12 million rows a shard, one
/// REML step's weights are 600 MB).
#[derive(Debug, Clone, Copy)]
pub struct ShardTaskView<'a> {
    pub op: ShardOp,
    pub x: &'a [f64],
    pub nw: usize,
    pub w_held: &'a [f64],
    pub v_held: &'a [f64],
    pub want_aw: bool,
}

impl ShardTask {
    pub fn view(&self) -> ShardTaskView<'_> {
        ShardTaskView {
            op: self.op,
            x: &self.x,
            nw: self.nw,
            w_held: &self.w_held,
            v_held: &self.v_held,
            want_aw: self.want_aw,
        }
    }

    fn new(op: ShardOp) -> Self {
        ShardTask {
            op,
            x: Vec::new(),
            nw: 0,
            w_held: Vec::new(),
            v_held: Vec::new(),
            want_aw: false,
        }
    }
}

/// A shard's answer. `rows`: Info (own rows, pa, rows held, groups, then one 0/1 per
/// column of A: all ones), Eta and Quad (one value per row). Sums: `hess` per chunk and weight
/// the packed upper triangle of A'WA (pa (pa + 1) / 2 values, row by row); `grad` per chunk A'v;
/// `gw` per weight and `gv` the group sums of w and v; `cross` per chunk of groups and weight
/// sum_t (sum_{r in t} w_r a_r) b_t' (pa x pb, column-major); `aw` per weight the groups' sums
/// of w_r a_r (groups x pa, column-major).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShardResult {
    pub rows: Vec<f64>,
    pub hess: Vec<f64>,
    pub grad: Vec<f64>,
    pub gw: Vec<f64>,
    pub gv: Vec<f64>,
    pub cross: Vec<f64>,
    pub aw: Vec<f64>,
}

/// Where the shards are: runs one task per shard (in shard order) and returns the results in
/// the same order. Implemented in-process below (`LocalShards`) and by the R binding.
pub trait ShardBackend: Sync {
    fn run(&self, tasks: Vec<ShardTask>) -> Result<Vec<ShardResult>>;
}

/// One shard's data, borrowed (from R objects on a worker, or from a `LocalShard`).
#[derive(Debug, Clone, Copy)]
pub struct ShardPart<'a> {
    /// A on the rows the shard holds (`ShardLayout::held_rows`: nheld x pa, column-major);
    /// its own `nrow` rows start at `own` among them.
    pub a: &'a [f64],
    pub nheld: usize,
    pub own: usize,
    pub nrow: usize,
    pub pa: usize,
    /// The groups of its own rows (0-based, all groups).
    pub group: &'a [usize],
    /// The whole group block B (ngroups x pb).
    pub b: &'a [f64],
    pub ngroups: usize,
    pub pb: usize,
    /// Per held row, its group minus g0 if in g0..g1, else `NO_GROUP`
    /// (`ShardLayout::held_groups`).
    pub held_group: &'a [usize],
    pub g0: usize,
    pub g1: usize,
}

fn packed_upper(u: &[f64], p: usize, out: &mut Vec<f64>) {
    for j in 0..p {
        out.extend_from_slice(&u[j * p + j..(j + 1) * p]);
    }
}

fn check_len(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(NceError::invalid(
            "task",
            format!("{what} has {got} values, expected {want}"),
        ));
    }
    Ok(())
}

impl ShardPart<'_> {
    /// Column j of A on the shard's own rows.
    fn own_col(&self, j: usize) -> &[f64] {
        let o = j * self.nheld + self.own;
        &self.a[o..o + self.nrow]
    }

    /// Run one task on this shard.
    pub fn compute(&self, task: ShardTaskView<'_>) -> Result<ShardResult> {
        let (pa, pb, n, nh) = (self.pa, self.pb, self.nrow, self.nheld);
        if self.g1 < self.g0 || self.g1 > self.ngroups {
            return Err(NceError::invalid(
                "shard",
                "its range of groups is not within the groups",
            ));
        }
        if self.own + n > nh || self.held_group.len() != nh {
            return Err(NceError::invalid(
                "shard",
                "its own rows or its rows' groups do not fit the rows it holds",
            ));
        }
        let ngs = self.g1 - self.g0;
        let held = DenseDesign::new(self.a, nh, pa).map_err(|e| match e {
            NceError::InvalidInput { msg, .. } => NceError::invalid("shard$a", msg),
            other => other,
        })?;
        // The own rows, read in place; as a grouped design over all groups (its counting sort
        // of the rows by group) only for the tasks that use one.
        let cols: Vec<&[f64]> = (0..pa).map(|j| self.own_col(j)).collect();
        let ad = DenseDesign::from_checked_columns(&cols, n);
        let rows_design = || GroupedDesign::with_block(ad, self.b, self.ngroups, pb, self.group);
        let mut out = ShardResult::default();
        match task.op {
            ShardOp::Info => {
                // The fit's first task checks the own rows' groups too.
                rows_design()?;
                out.rows = vec![n as f64, pa as f64, nh as f64, ngs as f64];
                out.rows
                    .extend((0..pa).map(|j| f64::from(u8::from(ad.col(j).iter().all(|&v| v == 1.0)))));
            }
            ShardOp::Eta => {
                check_len("x", task.x.len(), pa + pb)?;
                out.rows = vec![0.0; n];
                rows_design()?.linear_predictor(task.x, &mut out.rows);
            }
            ShardOp::Quad => {
                let p = pa + pb;
                check_len("x", task.x.len(), p * p)?;
                out.rows = vec![0.0; n];
                rows_design()?.row_quadratic_forms(&DMatrix::from_column_slice(p, p, task.x), &mut out.rows);
            }
            ShardOp::FreeLeverages => {
                let ng = self.ngroups;
                check_len("x", task.x.len(), pa * pa + ng * pa + ng)?;
                let si = DMatrix::from_column_slice(pa, pa, &task.x[..pa * pa]);
                let centres = &task.x[pa * pa..pa * pa + ng * pa];
                let d = &task.x[pa * pa + ng * pa..];
                out.rows = free_leverages_of(&rows_design()?, &si, centres, d);
            }
            ShardOp::Sums => {
                let nw = task.nw;
                check_len("w_held", task.w_held.len(), nw * nh)?;
                let has_v = !task.v_held.is_empty();
                if has_v {
                    check_len("v_held", task.v_held.len(), nh)?;
                }
                let own = self.own..self.own + n;
                let wh: Vec<&[f64]> = (0..nw).map(|l| &task.w_held[l * nh..(l + 1) * nh]).collect();
                let ws: Vec<&[f64]> = wh.iter().map(|w| &w[own.clone()]).collect();
                if nw > 0 {
                    for chunk in ad.crossprod_chunk_parts(&ws) {
                        for u in &chunk {
                            packed_upper(u, pa, &mut out.hess);
                        }
                    }
                }
                if has_v {
                    out.grad = ad.crossprod_vec_chunk_parts(&task.v_held[own]).concat();
                }
                if ngs > 0 {
                    let bsub: Vec<f64> = (0..pb)
                        .flat_map(|k| {
                            self.b[k * self.ngroups + self.g0..k * self.ngroups + self.g1]
                                .iter()
                                .copied()
                        })
                        .collect();
                    let gd = GroupedDesign::for_group_sums(held, &bsub, ngs, pb, self.held_group)?;
                    let plain: Vec<&[f64]> = if has_v { vec![task.v_held] } else { vec![] };
                    if task.want_aw {
                        let (gw, gv, aw) = gd.group_sums(&wh, &plain);
                        out.gw = gw.concat();
                        out.gv = gv.concat();
                        let parts: Vec<Vec<DMatrix<f64>>> = aw.iter().map(|a| gd.cross_block_parts(a)).collect();
                        for c in 0..ngs.div_ceil(CHUNK_ROWS) {
                            for p in &parts {
                                out.cross.extend_from_slice(p[c].as_slice());
                            }
                        }
                        out.aw = aw.concat();
                    } else {
                        // A chunk of groups at a time: the groups' sums of w_l a_r (1 million
                        // groups x pa a weight at S = 560) are never held whole.
                        let parts = gd.weighted_cross_block_parts(&wh, &plain);
                        let mut gw = vec![Vec::with_capacity(ngs); nw];
                        for (sums, psums, cross) in parts {
                            for (g, c) in gw.iter_mut().zip(sums) {
                                g.extend(c);
                            }
                            psums.into_iter().for_each(|c| out.gv.extend(c));
                            cross.iter().for_each(|m| out.cross.extend_from_slice(m.as_slice()));
                        }
                        out.gw = gw.concat();
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A shard's data, owned: for in-process shards (tests) and for building the shards' data.
#[derive(Debug, Clone)]
pub struct LocalShard {
    pub a: Vec<f64>,
    pub nheld: usize,
    pub own: usize,
    pub nrow: usize,
    pub pa: usize,
    pub group: Vec<usize>,
    pub b: Vec<f64>,
    pub ngroups: usize,
    pub pb: usize,
    pub held_group: Vec<usize>,
    pub g0: usize,
    pub g1: usize,
}

/// The rows `rows` of `a`, in that order (rows.len() x a.ncol(), column-major).
fn gather_rows(a: &DenseDesign, rows: impl Iterator<Item = usize> + Clone) -> Vec<f64> {
    (0..a.ncol())
        .flat_map(|j| {
            let col = a.col(j);
            rows.clone().map(move |r| col[r])
        })
        .collect()
}

impl LocalShard {
    /// Split A (nrow x pa), B (ngroups x pb) and `group` by `layout`.
    pub fn split(
        a: &DenseDesign,
        b: &[f64],
        ngroups: usize,
        pb: usize,
        group: &[usize],
        layout: &ShardLayout,
    ) -> Result<Vec<LocalShard>> {
        let (nrow, pa) = (a.nrow(), a.ncol());
        DenseDesign::new(b, ngroups, pb)?;
        if group.len() != nrow {
            return Err(NceError::invalid(
                "group",
                format!("has length {}, expected {nrow}", group.len()),
            ));
        }
        Ok((0..layout.len())
            .map(|s| {
                let (r0, r1) = layout.rows[s];
                let (g0, g1) = layout.groups[s];
                let (nheld, own) = layout.held_size(s);
                LocalShard {
                    a: gather_rows(a, layout.held_rows(s)),
                    nheld,
                    own,
                    nrow: r1 - r0,
                    pa,
                    group: group[r0..r1].to_vec(),
                    b: b.to_vec(),
                    ngroups,
                    pb,
                    held_group: layout.held_groups(s, group),
                    g0,
                    g1,
                }
            })
            .collect())
    }

    pub fn part(&self) -> ShardPart<'_> {
        ShardPart {
            a: &self.a,
            nheld: self.nheld,
            own: self.own,
            nrow: self.nrow,
            pa: self.pa,
            group: &self.group,
            b: &self.b,
            ngroups: self.ngroups,
            pb: self.pb,
            held_group: &self.held_group,
            g0: self.g0,
            g1: self.g1,
        }
    }
}

/// Shards held in this process (run one after the other).
#[derive(Debug, Clone)]
pub struct LocalShards(pub Vec<LocalShard>);

impl ShardBackend for LocalShards {
    fn run(&self, tasks: Vec<ShardTask>) -> Result<Vec<ShardResult>> {
        self.0
            .iter()
            .zip(&tasks)
            .map(|(s, t)| s.part().compute(t.view()))
            .collect()
    }
}

/// The shards' sums added in the in-memory order.
struct Sums {
    haa: Vec<Vec<f64>>,
    ga: Vec<f64>,
    gw: Vec<Vec<f64>>,
    gv: Vec<f64>,
    hab: Vec<DMatrix<f64>>,
    aw: Vec<Vec<f64>>,
}

/// The grouped design [A | B[group, ]] with A in shards: implements `Design` with the results
/// of `GroupedDesign` bit for bit. A shard failure is recorded (see `failed`), and the methods
/// then return NaN: the caller stops the fit and reports the failure.
pub struct ShardedDesign<'a> {
    b: DenseDesign<'a>,
    group: &'a [usize],
    pa: usize,
    layout: ShardLayout,
    backend: &'a dyn ShardBackend,
    intercept: Option<usize>,
    failure: Mutex<Option<NceError>>,
}

impl<'a> ShardedDesign<'a> {
    /// B (ngroups x pb, column-major), the group of each row (0-based), the columns of A and
    /// the shards (asked for their sizes here).
    pub fn new(
        b: &'a [f64],
        ngroups: usize,
        pb: usize,
        group: &'a [usize],
        pa: usize,
        shards: usize,
        backend: &'a dyn ShardBackend,
    ) -> Result<Self> {
        let b = DenseDesign::new(b, ngroups, pb).map_err(|e| match e {
            NceError::InvalidInput { msg, .. } => NceError::invalid("b", msg),
            other => other,
        })?;
        let layout = ShardLayout::new(group, ngroups, shards)?;
        let res = backend.run(vec![ShardTask::new(ShardOp::Info); layout.len()])?;
        let mut ones = vec![true; pa];
        check_count(&res, layout.len())?;
        for (s, r) in res.iter().enumerate() {
            let (r0, r1) = layout.rows[s];
            let (g0, g1) = layout.groups[s];
            let want = [r1 - r0, pa, layout.held_size(s).0, g1 - g0];
            if r.rows.len() != 4 + pa || r.rows[..4].iter().zip(want).any(|(&a, b)| a != b as f64) {
                return Err(NceError::invalid(
                    "shards",
                    format!(
                        "shard {} holds other data than this fit's (sizes {:?}, expected {want:?}): were the shards \
                         written for another fit?",
                        s + 1,
                        &r.rows[..r.rows.len().min(4)]
                    ),
                ));
            }
            for (o, &f) in ones.iter_mut().zip(&r.rows[4..]) {
                *o &= f == 1.0;
            }
        }
        let b_int = b.intercept_column();
        let intercept = ones.iter().position(|&o| o).or_else(|| b_int.map(|j| pa + j));
        Ok(ShardedDesign {
            b,
            group,
            pa,
            layout,
            backend,
            intercept,
            failure: Mutex::new(None),
        })
    }

    pub fn layout(&self) -> &ShardLayout {
        &self.layout
    }

    pub fn pa(&self) -> usize {
        self.pa
    }

    pub fn pb(&self) -> usize {
        self.b.ncol()
    }

    pub fn ngroups(&self) -> usize {
        self.b.nrow()
    }

    /// A shard has failed: the fit should stop.
    pub fn failed(&self) -> bool {
        self.failure.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// The first shard failure, if any.
    pub fn take_failure(&self) -> Option<NceError> {
        self.failure.lock().ok().and_then(|mut f| f.take())
    }

    fn fail(&self, e: NceError) {
        if let Ok(mut f) = self.failure.lock() {
            f.get_or_insert(e);
        }
    }

    /// Run the tasks unless a shard has failed before; record a failure.
    fn call(&self, tasks: Vec<ShardTask>) -> Option<Vec<ShardResult>> {
        if self.failed() {
            return None;
        }
        match self
            .backend
            .run(tasks)
            .and_then(|r| check_count(&r, self.layout.len()).map(|_| r))
        {
            Ok(r) => Some(r),
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    /// One value per row from an Eta or Quad task.
    fn per_row(&self, task: ShardTask, out: &mut [f64]) {
        let res = self.call(vec![task; self.layout.len()]);
        let Some(res) = res else {
            out.iter_mut().for_each(|v| *v = f64::NAN);
            return;
        };
        for (s, r) in res.iter().enumerate() {
            let (r0, r1) = self.layout.rows[s];
            if r.rows.len() != r1 - r0 {
                self.fail(bad_size(s, "values per row", r.rows.len(), r1 - r0));
                out.iter_mut().for_each(|v| *v = f64::NAN);
                return;
            }
            out[r0..r1].copy_from_slice(&r.rows);
        }
    }

    /// A'diag(w_l)A and A'v per chunk, and the group sums, from all shards, added in order.
    fn sums(&self, ws: &[&[f64]], v: Option<&[f64]>, want_aw: bool) -> Option<Sums> {
        let (pa, pb, ng) = (self.pa, self.pb(), self.ngroups());
        let nw = ws.len();
        let tasks: Vec<ShardTask> = (0..self.layout.len())
            .map(|s| {
                let gather = |x: &[f64]| self.layout.held_rows(s).map(|r| x[r]).collect::<Vec<f64>>();
                ShardTask {
                    op: ShardOp::Sums,
                    x: Vec::new(),
                    nw,
                    w_held: ws.iter().flat_map(|w| gather(w)).collect(),
                    v_held: v.map(gather).unwrap_or_default(),
                    want_aw,
                }
            })
            .collect();
        let res = self.call(tasks)?;
        let pp = pa * (pa + 1) / 2;
        let mut out = Sums {
            haa: vec![vec![0.0; pa * pa]; nw],
            ga: vec![0.0; pa],
            gw: vec![Vec::with_capacity(ng); nw],
            gv: Vec::with_capacity(ng),
            hab: vec![DMatrix::zeros(pa, pb); nw],
            aw: vec![vec![0.0; if want_aw { ng * pa } else { 0 }]; nw],
        };
        for (s, r) in res.iter().enumerate() {
            let (r0, r1) = self.layout.rows[s];
            let (g0, g1) = self.layout.groups[s];
            let (nch, ngs) = ((r1 - r0).div_ceil(CHUNK_ROWS).max(1), g1 - g0);
            let ngc = ngs.div_ceil(CHUNK_ROWS);
            let sizes = [
                ("A'WA terms", r.hess.len(), if nw > 0 { nch * nw * pp } else { 0 }),
                ("A'v terms", r.grad.len(), if v.is_some() { nch * pa } else { 0 }),
                ("group sums of w", r.gw.len(), nw * ngs),
                ("group sums of v", r.gv.len(), if v.is_some() { ngs } else { 0 }),
                ("cross terms", r.cross.len(), ngc * nw * pa * pb),
                (
                    "weighted group sums",
                    r.aw.len(),
                    if want_aw { nw * ngs * pa } else { 0 },
                ),
            ];
            if let Some((what, got, want)) = sizes.iter().find(|(_, g, w)| g != w) {
                self.fail(bad_size(s, what, *got, *want));
                return None;
            }
            // Chunks in order; within a chunk, weight after weight (as crossprod_parts adds them).
            let mut it = r.hess.chunks_exact(pp.max(1));
            for _ in 0..nch {
                for h in out.haa.iter_mut() {
                    let u = it.next().unwrap_or(&[]);
                    let mut k = 0;
                    for j in 0..pa {
                        for c in j..pa {
                            h[j * pa + c] += u[k];
                            k += 1;
                        }
                    }
                }
            }
            for part in r.grad.chunks_exact(pa.max(1)).take(if v.is_some() { nch } else { 0 }) {
                for (x, y) in out.ga.iter_mut().zip(part) {
                    *x += y;
                }
            }
            for (l, g) in out.gw.iter_mut().enumerate() {
                g.extend_from_slice(&r.gw[l * ngs..(l + 1) * ngs]);
            }
            out.gv.extend_from_slice(&r.gv);
            let block = pa * pb;
            for c in 0..ngc {
                for (l, h) in out.hab.iter_mut().enumerate() {
                    let o = (c * nw + l) * block;
                    *h += DMatrix::from_column_slice(pa, pb, &r.cross[o..o + block]);
                }
            }
            if want_aw {
                for (l, a) in out.aw.iter_mut().enumerate() {
                    let src = &r.aw[l * ngs * pa..(l + 1) * ngs * pa];
                    for j in 0..pa {
                        a[j * ng + g0..j * ng + g1].copy_from_slice(&src[j * ngs..(j + 1) * ngs]);
                    }
                }
            }
        }
        Some(out)
    }

    fn nan_matrix(&self) -> DMatrix<f64> {
        let p = self.ncol();
        DMatrix::from_element(p, p, f64::NAN)
    }
}

fn check_count(res: &[ShardResult], want: usize) -> Result<()> {
    if res.len() != want {
        return Err(NceError::invalid(
            "shards",
            format!("{} shard results came back, expected {want}", res.len()),
        ));
    }
    Ok(())
}

fn bad_size(s: usize, what: &str, got: usize, want: usize) -> NceError {
    NceError::invalid(
        "shards",
        format!("shard {} returned {got} {what}, expected {want}", s + 1),
    )
}

impl Design for ShardedDesign<'_> {
    fn nrow(&self) -> usize {
        self.group.len()
    }

    fn ncol(&self) -> usize {
        self.pa + self.pb()
    }

    fn linear_predictor(&self, beta: &[f64], out: &mut [f64]) {
        let mut task = ShardTask::new(ShardOp::Eta);
        task.x = beta.to_vec();
        self.per_row(task, out);
    }

    fn weighted_crossprod(&self, w: &[f64], v: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
        let (pa, pb) = (self.pa, self.pb());
        let Some(s) = self.sums(&[w], Some(v), false) else {
            return (self.nan_matrix(), DVector::from_element(pa + pb, f64::NAN));
        };
        let hbb = self.b.crossprod_parts(&[&s.gw[0]]).pop().expect("one weight");
        let gb = self.b.crossprod_vec_raw(&s.gv);
        let mut g = DVector::zeros(pa + pb);
        g.rows_mut(0, pa).copy_from_slice(&s.ga);
        g.rows_mut(pa, pb).copy_from_slice(&gb);
        (assemble(pa, pb, &s.haa[0], &hbb, &s.hab[0]), g)
    }

    fn weighted_crossprods(&self, weights: &[&[f64]]) -> Vec<DMatrix<f64>> {
        let Some(s) = self.sums(weights, None, false) else {
            return weights.iter().map(|_| self.nan_matrix()).collect();
        };
        let wsr: Vec<&[f64]> = s.gw.iter().map(|v| v.as_slice()).collect();
        let hbb = self.b.crossprod_parts(&wsr);
        s.haa
            .iter()
            .zip(&hbb)
            .zip(&s.hab)
            .map(|((ha, hb), ab)| assemble(self.pa, self.pb(), ha, hb, ab))
            .collect()
    }

    fn crossprod_vec(&self, v: &[f64]) -> DVector<f64> {
        let (pa, pb) = (self.pa, self.pb());
        let Some(s) = self.sums(&[], Some(v), false) else {
            return DVector::from_element(pa + pb, f64::NAN);
        };
        let gb = self.b.crossprod_vec_raw(&s.gv);
        let mut g = DVector::zeros(pa + pb);
        g.rows_mut(0, pa).copy_from_slice(&s.ga);
        g.rows_mut(pa, pb).copy_from_slice(&gb);
        g
    }

    fn intercept_column(&self) -> Option<usize> {
        self.intercept
    }

    fn row_quadratic_forms(&self, m: &DMatrix<f64>, out: &mut [f64]) {
        let mut task = ShardTask::new(ShardOp::Quad);
        task.x = m.as_slice().to_vec();
        self.per_row(task, out);
    }
}

/// The free-intercept operations from the shards (B has no columns): the results of
/// `GroupedDesign`'s, bit for bit, since the shards return the same per-chunk and per-group
/// sums and per-row values. After a shard failure they are NaN (see `failed`).
impl FreeRows for ShardedDesign<'_> {
    fn n_rows(&self) -> usize {
        self.group.len()
    }
    fn n_a(&self) -> usize {
        self.pa
    }
    fn n_groups(&self) -> usize {
        self.ngroups()
    }
    fn row_groups(&self) -> &[usize] {
        self.group
    }
    fn a_eta(&self, beta: &[f64], out: &mut [f64]) {
        let mut task = ShardTask::new(ShardOp::Eta);
        task.x = beta.to_vec();
        task.x.resize(self.pa + self.pb(), 0.0);
        self.per_row(task, out);
    }
    fn a_crossprods(&self, ws: &[&[f64]]) -> Vec<Vec<f64>> {
        match self.sums(ws, None, false) {
            Some(s) => s.haa,
            None => vec![vec![f64::NAN; self.pa * self.pa]; ws.len()],
        }
    }
    fn weight_sums(&self, ws: &[&[f64]]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        match self.sums(ws, None, true) {
            Some(s) => (s.gw, s.aw),
            None => {
                let ng = self.ngroups();
                (
                    vec![vec![f64::NAN; ng]; ws.len()],
                    vec![vec![f64::NAN; ng * self.pa]; ws.len()],
                )
            }
        }
    }
    fn vec_sums(&self, v: &[f64]) -> (Vec<f64>, Vec<f64>) {
        match self.sums(&[], Some(v), false) {
            Some(s) => (s.ga, s.gv),
            None => (vec![f64::NAN; self.pa], vec![f64::NAN; self.ngroups()]),
        }
    }
    fn free_leverages(&self, si: &DMatrix<f64>, centres: &[f64], d: &[f64]) -> Vec<f64> {
        let mut task = ShardTask::new(ShardOp::FreeLeverages);
        task.x = si.as_slice().to_vec();
        task.x.extend_from_slice(centres);
        task.x.extend_from_slice(d);
        let mut out = vec![0.0; self.group.len()];
        self.per_row(task, &mut out);
        out
    }
}

/// `grouped::fit_reml_free_intercepts` (one free intercept per group) with A in row shards, B
/// without columns: the same fit as in memory, bit for bit.
pub fn fit_reml_free_intercepts_sharded(
    design: &ShardedDesign,
    prob: &Problem,
    penalties: &PenaltySet,
    ctrl: &RemlControl,
    cluster_of_group: Option<&[usize]>,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<FreeInterceptFit> {
    if design.pb() != 0 {
        return Err(NceError::invalid(
            "b",
            "must have no columns: the groups' intercepts are free",
        ));
    }
    free_intercepts_on(design, prob, penalties, ctrl, cluster_of_group, interrupted)
}

/// `grouped_cluster_sandwich` on a sharded design (the same result).
pub fn sharded_cluster_sandwich(
    design: &ShardedDesign,
    cluster_of_group: &[usize],
    row_grad: &[f64],
    bread: &DMatrix<f64>,
    aliased: &[bool],
) -> Result<DMatrix<f64>> {
    let (n, pa, ng) = (design.nrow(), design.pa(), design.ngroups());
    let mut s = cluster_score_sums(n, ng, pa + design.pb(), row_grad, cluster_of_group)?;
    let Some(sums) = design.sums(&[row_grad], None, true) else {
        return Err(design
            .take_failure()
            .unwrap_or_else(|| NceError::Internal("a shard failed".into())));
    };
    add_group_sums_by_cluster(&mut s, cluster_of_group, &sums.aw[0], pa);
    add_group_block(&mut s, &design.b, design.group, cluster_of_group, row_grad, pa);
    Ok(bread_meat_bread(bread, &(s.transpose() * &s), aliased))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::design::with_threads;
    use crate::engine::sandwich::grouped_cluster_sandwich;

    /// The sequential-NCE layout: one data row per group first, then `per` reference rows per
    /// group; an intercept column in A.
    fn toy(ng: usize, per: usize) -> (Vec<f64>, usize, usize, Vec<f64>, usize, Vec<usize>) {
        let (pa, pb) = (4, 3);
        let n = ng * (1 + per);
        let group: Vec<usize> = (0..n).map(|r| if r < ng { r } else { (r - ng) / per }).collect();
        let mut a: Vec<f64> = (0..n * pa).map(|i| ((i as f64) * 0.37).sin()).collect();
        a[..n].iter_mut().for_each(|v| *v = 1.0);
        let b: Vec<f64> = (0..ng * pb).map(|i| ((i as f64) * 0.71).cos() + 0.5).collect();
        (a, n, pa, b, pb, group)
    }

    #[test]
    fn layout_is_chunk_aligned_and_checks_the_count() {
        let group: Vec<usize> = (0..10_000).map(|r| r % 5000).collect();
        let l = ShardLayout::new(&group, 5000, 3).unwrap();
        assert_eq!(l.rows, vec![(0, 4096), (4096, 8192), (8192, 10_000)]);
        assert_eq!(l.groups, vec![(0, 0), (0, 4096), (4096, 5000)]);
        assert_eq!(l.group_rows.iter().map(Vec::len).sum::<usize>(), 10_000);
        // Held: the union of own and group rows, in row order, the own rows one block of it.
        for s in 0..3 {
            let held: Vec<usize> = l.held_rows(s).collect();
            let (r0, r1) = l.rows[s];
            let mut want: Vec<usize> = (r0..r1).chain(l.group_rows[s].iter().copied()).collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(held, want);
            let (nheld, own) = l.held_size(s);
            assert_eq!((nheld, held[own]), (want.len(), r0));
            let hg = l.held_groups(s, &group);
            let (g0, g1) = l.groups[s];
            for (&r, &g) in held.iter().zip(&hg) {
                assert_eq!(
                    g,
                    if (g0..g1).contains(&group[r]) {
                        group[r] - g0
                    } else {
                        NO_GROUP
                    }
                );
            }
        }
        // The sequential-NCE layout (a transition's reference rows one after another): a shard
        // holds its own rows and little more (here: the other shard's data rows of its groups).
        let (ng, per) = (40_000, 4);
        let seq: Vec<usize> = (0..ng * (1 + per))
            .map(|r| if r < ng { r } else { (r - ng) / per })
            .collect();
        let l = ShardLayout::new(&seq, ng, 2).unwrap();
        for s in 0..2 {
            let (r0, r1) = l.rows[s];
            let extra = l.held_size(s).0 - (r1 - r0);
            assert!(
                extra <= ng / 2 + CHUNK_ROWS * (1 + per),
                "shard {s} holds {extra} extra rows"
            );
        }
        for bad in [0, 4] {
            let e = ShardLayout::new(&group, 5000, bad).unwrap_err();
            assert!(
                matches!(e, NceError::InvalidInput { ref arg, .. } if arg == "shards"),
                "{e}"
            );
        }
    }

    #[test]
    fn sharded_design_is_bit_identical_to_the_in_memory_design() {
        let (ng, per) = (4500, 3);
        let (a, n, pa, b, pb, group) = toy(ng, per);
        let gd = GroupedDesign::new(&a, n, pa, &b, ng, pb, &group).unwrap();
        let w: Vec<f64> = (0..n).map(|i| 0.2 + (i % 11) as f64 / 5.0).collect();
        let w2: Vec<f64> = (0..n).map(|i| ((i % 13) as f64 - 6.0) / 7.0).collect();
        let v: Vec<f64> = (0..n).map(|i| (i % 5) as f64 - 2.0).collect();
        let beta: Vec<f64> = (0..pa + pb).map(|j| (j as f64 * 0.9).sin()).collect();
        let m = DMatrix::from_fn(pa + pb, pa + pb, |i, j| 1.0 / (1.0 + i as f64 + j as f64));
        let clusters: Vec<usize> = (0..ng).map(|t| t / 50).collect();
        let bread = DMatrix::identity(pa + pb, pa + pb);
        let aliased = vec![false; pa + pb];
        let mut eta0 = vec![0.0; n];
        gd.linear_predictor(&beta, &mut eta0);
        let mut q0 = vec![0.0; n];
        gd.row_quadratic_forms(&m, &mut q0);
        let hw0 = gd.weighted_crossprod(&w, &v);
        let hs0 = gd.weighted_crossprods(&[&w, &w2]);
        let g0 = gd.crossprod_vec(&v);
        let sw0 = grouped_cluster_sandwich(&gd, &clusters, &v, &bread, &aliased).unwrap();
        for shards in 1..=4 {
            let layout = ShardLayout::new(&group, ng, shards).unwrap();
            let backend = LocalShards(
                LocalShard::split(&DenseDesign::new(&a, n, pa).unwrap(), &b, ng, pb, &group, &layout).unwrap(),
            );
            let sd = ShardedDesign::new(&b, ng, pb, &group, pa, shards, &backend).unwrap();
            assert_eq!(sd.intercept_column(), gd.intercept_column());
            let threads = 1 + shards % 2;
            let (eta, q, hw, hs, g) = with_threads(threads, || {
                let mut eta = vec![0.0; n];
                sd.linear_predictor(&beta, &mut eta);
                let mut q = vec![0.0; n];
                sd.row_quadratic_forms(&m, &mut q);
                (
                    eta,
                    q,
                    sd.weighted_crossprod(&w, &v),
                    sd.weighted_crossprods(&[&w, &w2]),
                    sd.crossprod_vec(&v),
                )
            })
            .unwrap();
            assert_eq!(eta, eta0, "{shards} shards");
            assert_eq!(q, q0, "{shards} shards");
            assert_eq!(hw, hw0, "{shards} shards");
            assert_eq!(hs, hs0, "{shards} shards");
            assert_eq!(g, g0, "{shards} shards");
            let sw = sharded_cluster_sandwich(&sd, &clusters, &v, &bread, &aliased).unwrap();
            assert_eq!(sw, sw0, "{shards} shards");
            assert!(!sd.failed());
        }
    }

    #[test]
    fn sharded_free_intercept_fit_is_bit_identical_to_the_in_memory_fit() {
        use crate::engine::grouped::FreeToy;
        // 3,000 groups of 1 data row and 4 reference rows (15,000 rows: 4 chunks), as snce() stacks
        // them, in clusters of 30.
        let data = FreeToy::new(3000, 5, true, 30);
        let (ng, n, pa) = (data.ng, data.n, data.pa);
        let (a, group, clusters) = (&data.a[..], &data.group[..], &data.clusters[..]);
        let (prob, pens) = (data.prob(), data.pens());
        let ctrl = RemlControl::default();
        let mem = data.fit(&ctrl);
        let b: Vec<f64> = Vec::new();
        for shards in 1..=3 {
            let layout = ShardLayout::new(group, ng, shards).unwrap();
            let backend = LocalShards(
                LocalShard::split(&DenseDesign::new(a, n, pa).unwrap(), &b, ng, 0, group, &layout).unwrap(),
            );
            let sd = ShardedDesign::new(&b, ng, 0, group, pa, shards, &backend).unwrap();
            let fit = with_threads(1 + shards % 2, || {
                fit_reml_free_intercepts_sharded(&sd, &prob, &pens, &ctrl, Some(clusters), &mut || false)
            })
            .unwrap()
            .unwrap();
            assert!(!sd.failed());
            assert_eq!(fit.reml.coefficients, mem.reml.coefficients, "{shards} shards");
            assert_eq!(fit.reml.sp, mem.reml.sp, "{shards} shards");
            assert_eq!(fit.reml.vp, mem.reml.vp, "{shards} shards");
            assert_eq!(fit.intercepts, mem.intercepts, "{shards} shards");
            assert_eq!(fit.intercept_se, mem.intercept_se, "{shards} shards");
            assert_eq!(fit.sandwich, mem.sandwich, "{shards} shards");
            assert_eq!(fit.reml.fit.eta, mem.reml.fit.eta, "{shards} shards");
        }
        // A B with columns is refused.
        let layout = ShardLayout::new(group, ng, 1).unwrap();
        let b1 = vec![1.0; ng];
        let backend =
            LocalShards(LocalShard::split(&DenseDesign::new(a, n, pa).unwrap(), &b1, ng, 1, group, &layout).unwrap());
        let sd = ShardedDesign::new(&b1, ng, 1, group, pa, 1, &backend).unwrap();
        assert!(fit_reml_free_intercepts_sharded(&sd, &prob, &pens, &ctrl, None, &mut || false).is_err());
    }

    #[test]
    fn a_non_finite_shard_is_refused_by_the_first_task() {
        let (mut a, n, pa, b, pb, group) = toy(500, 3);
        a[n + 7] = f64::NAN;
        let layout = ShardLayout::new(&group, 500, 1).unwrap();
        let backend = LocalShards(
            LocalShard::split(
                &DenseDesign::from_checked(&a, n, pa).unwrap(),
                &b,
                500,
                pb,
                &group,
                &layout,
            )
            .unwrap(),
        );
        let e = ShardedDesign::new(&b, 500, pb, &group, pa, 1, &backend).err().unwrap();
        assert!(e.to_string().contains("non-finite value at row 8, column 2"), "{e}");
    }

    #[test]
    fn a_failing_shard_is_recorded_not_panicked() {
        struct Broken;
        impl ShardBackend for Broken {
            fn run(&self, tasks: Vec<ShardTask>) -> Result<Vec<ShardResult>> {
                if tasks[0].op == ShardOp::Info {
                    Ok(vec![ShardResult {
                        rows: vec![100.0, 1.0, 100.0, 10.0, 1.0],
                        ..Default::default()
                    }])
                } else {
                    Err(NceError::invalid("shards", "worker lost"))
                }
            }
        }
        let group: Vec<usize> = (0..100).map(|r| r % 10).collect();
        let b = vec![1.0; 10];
        let sd = ShardedDesign::new(&b, 10, 1, &group, 1, 1, &Broken).unwrap();
        assert_eq!(sd.intercept_column(), Some(0));
        let mut eta = vec![0.0; 100];
        sd.linear_predictor(&[1.0, 1.0], &mut eta);
        assert!(eta.iter().all(|v| v.is_nan()));
        assert!(sd.failed());
        assert!(sd.take_failure().unwrap().to_string().contains("worker lost"));
    }
}
