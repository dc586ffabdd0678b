//! The engine's matvec launches (kernels/matvec.cu, kernels/mvq.cu): which module a matrix
//! and an op take, how an op splits into launches and row tiles, each launch's geometry and
//! arguments, and the row staging a large tile needs. Laws it serves: a row's bits never
//! depend on the batch. The kernel family is the matrix's alone (`vectorized`, the layout
//! fixed at upload); the reduction order of every dot is fixed by the op's feature count
//! (`warps_per_feature`), whichever launches and tiles carry it; tiles, grids, staging and
//! rows per warp are timing only. Every module a launch needs is compiled when the engine
//! is built (`modules_needed`), never by a launch.

use cudarc::driver::LaunchConfig;

use super::args::{MvArgs, MvMat};
use super::mma::mma_mix_split;
use super::weights::{DevLayer, DevWeight};
use super::{kp, to_i32, to_u32, CudaEngine, MODE_ADD, MODE_GATE_UP, MODE_STORE};
use crate::backend::cuda::{
    mvq_mix_kind, GpuBuf, GpuStream, MVQ_BASE, MVQ_DENSE, MVQ_PRE_BASE, MV_GENERIC, MV_MAX_TILE,
};
use crate::backend::BResult;
use crate::model::Activation;
use crate::quant::{repack, GgmlType};

/// PPN_CUDA_PROF's names of the FFMA matvec launches, by CudaEngine::prof_op.
const MV_PROF: [&str; 5] = [
    "mv norm+gate|up+act",
    "mv +residual",
    "mv norm+q|k|v",
    "mv norm+head",
    "mv store",
];

/// Warps per block of the fused matvec (`MV_WARPS` in kernels/matvec.cu).
const MV_WARPS: usize = 8;

/// How a matvec over `rows` rows is launched: (first row, rows, row tile) per launch, every
/// launch over whole tiles only, so no kernel runs its per-row checked loop for a partial
/// tile (kernels/matvec.cu `warp_dots`). Up to MV_MAX_TILE rows: one launch with the tile
/// equal to the rows; more: the whole tiles of MV_MAX_TILE, then the rest as one tile. A row's
/// bits never depend on its tile (every tile walks each row's dot in the same order).
/// (An iterator, not a Vec: it runs for every matvec of every decode step.)
pub(in crate::backend::cuda) fn row_tiles(
    rows: usize,
) -> impl Iterator<Item = (usize, usize, usize)> {
    let whole = if rows <= MV_MAX_TILE {
        rows
    } else {
        rows - rows % MV_MAX_TILE
    };
    let first = (0, whole, whole.min(MV_MAX_TILE));
    let rest = (whole < rows).then(|| (whole, rows - whole, rows - whole));
    std::iter::once(first).chain(rest)
}

/// The row tiles an engine of `max_rows` may launch (`row_tiles` of every row count up to
/// it): 1..=max_rows up to MV_MAX_TILE (beyond it, remainders are below MV_MAX_TILE).
pub(in crate::backend::cuda) fn tiles_up_to(max_rows: usize) -> Vec<usize> {
    (1..=max_rows.min(MV_MAX_TILE)).collect()
}

/// The `FMT_*` id of kernels/matvec.cu for a tensor type.
pub(in crate::backend::cuda) fn fmt_of(ty: GgmlType) -> i32 {
    match ty {
        GgmlType::F32 => 0,
        GgmlType::F16 => 1,
        GgmlType::BF16 => 2,
        GgmlType::Q4_0 => 3,
        GgmlType::Q4_1 => 4,
        GgmlType::Q5_0 => 5,
        GgmlType::Q5_1 => 6,
        GgmlType::Q8_0 => 7,
        GgmlType::Q2K => 8,
        GgmlType::Q3K => 9,
        GgmlType::Q4K => 10,
        GgmlType::Q5K => 11,
        GgmlType::Q6K => 12,
    }
}

/// A matrix as the launch planning sees it: its format and whether it is packed for the
/// vectorized matvec (`DevWeight::packed`).
pub(in crate::backend::cuda) type MatKind = (GgmlType, bool);

/// The module kind of one format: its byte-wise module, or (packed) its vectorized one.
pub(in crate::backend::cuda) fn kind_of((ty, packed): MatKind) -> usize {
    fmt_of(ty) as usize + if packed { MVQ_BASE } else { 0 }
}

/// The matvec module a launch over matrices of these kinds runs: the kind's own when they
/// all share one, else the generic one (only byte-wise matrices are ever mixed in a launch).
pub(in crate::backend::cuda) fn mv_kind(mut tys: impl Iterator<Item = MatKind>) -> usize {
    let Some(t0) = tys.next() else {
        return MV_GENERIC;
    };
    if tys.all(|t| t == t0) {
        kind_of(t0)
    } else {
        MV_GENERIC
    }
}

/// How one matvec op over matrices of kinds `tys` is launched: (format, module kind) per
/// launch. Side-by-side matrices (modes 0 and 1) of several kinds go out as one launch per
/// kind; gate|up (mode 2) must stay one launch, so a mixed pair takes the generic module
/// (engines pack gate and up only together, so a mixed pair is byte-wise).
pub(in crate::backend::cuda) fn launch_groups(
    tys: impl Iterator<Item = MatKind>,
    mode: i32,
) -> Vec<(GgmlType, usize)> {
    let tys: Vec<MatKind> = tys.collect();
    let mut out: Vec<(GgmlType, usize)> = Vec::new();
    if mode == MODE_GATE_UP {
        if let Some(&t0) = tys.first() {
            out.push((t0.0, mv_kind(tys.into_iter())));
        }
        return out;
    }
    for t in tys {
        let k = kind_of(t);
        if !out.iter().any(|(_, j)| *j == k) {
            out.push((t.0, k));
        }
    }
    out
}

/// The mixed one-row module of a side-by-side op (mode 0, q|k|v) over `tys` at `rows` rows:
/// when every matrix is packed (vectorized, off the tensor cores) and they hold exactly two
/// formats, `Some((kind, fa, fb))`, fa the format of lower id, whose matrices the launch
/// takes first (kernels/mvq.cu mvq_mix_body), and kind `MVQ_MIX_BASE + fa * formats + fb`.
/// One row only: a multi-row tile keeps a launch per format. Each output keeps its own
/// format's walk, so the choice is timing only. Why: gemma3's Q4_K_M file (v in Q8_0 beside
/// q and k in Q5_0 in 9 of 18 layers) paid a second launch's chain for v's 256 rows.
pub(in crate::backend::cuda) fn mix_of(
    tys: impl Iterator<Item = (MatKind, bool)>,
    rows: usize,
    mode: i32,
) -> Option<(usize, GgmlType, GgmlType)> {
    if rows != 1 || mode != MODE_STORE {
        return None;
    }
    // The first format seen, and the second (a third: no mix). No Vec: this runs for every
    // op of two formats, every decode step with graphs off.
    let (mut a, mut b): (Option<GgmlType>, Option<GgmlType>) = (None, None);
    for ((ty, packed), mma) in tys {
        if !packed || mma {
            return None;
        }
        match (a, b) {
            (None, _) => a = Some(ty),
            (Some(t), None) if t != ty => b = Some(ty),
            (Some(t), Some(u)) if t != ty && u != ty => return None,
            _ => {}
        }
    }
    let (a, b) = (a?, b?);
    let (fa, fb) = if fmt_of(a) < fmt_of(b) {
        (a, b)
    } else {
        (b, a)
    };
    Some((
        mvq_mix_kind(fmt_of(fa) as usize, fmt_of(fb) as usize),
        fa,
        fb,
    ))
}

/// Weight rows per warp of a vectorized launch (1, 2 or 4; gate|up at least 2, a gate row
/// and its up row). Each x value a warp reads serves its rows: tiles over 4 rows take 4 (x
/// reads would bound them otherwise), smaller ones 2 unless that leaves fewer than about
/// 2048 warps. Free to vary: it changes which warp computes a row, never how.
pub(in crate::backend::cuda) fn mvq_rows_per_warp(
    features: usize,
    gate_up: bool,
    tile: usize,
) -> usize {
    if tile > 4 {
        4
    } else if gate_up || features >= 4096 {
        2
    } else {
        1
    }
}

/// Whether a vectorized launch of `tile` rows over rows `n_in` wide with `features` output
/// features (gate|up: `gate_up`) on a GPU of `sms` SMs takes the dense one-row walk
/// (`mvq_d8`, kernels/mvq.cu). It deals a group of MVD_ROWS rows' units to all 32 lanes,
/// where the plain walk leaves 32 - n_in / 32 lanes of a narrow row idle (12 on gemma3's
/// 640-wide rows, 14 on SmolLM2's 576), and pays for it with index arithmetic and a shared
/// memory exchange per group, and with 8 rows a warp where the plain walk has 1 or 2. So it
/// takes only:
/// - one-row tiles of rows of at most 24 units (a quarter of the lanes idle or more);
/// - launches whose groups fill every SM's resident warps at least once (25344 features on
///   an H200: the vocabulary heads), since a launch with fewer groups is bound by one warp's
///   walk, which the dense walk makes longer.
///
/// Measured on one H200 with the rule `tile == 1 && n_in < 1024` (BENCH.md, step 13): the
/// heads of 576 and 640-wide rows 25 -> 17 and 115 -> 84 us; q|k|v and gate|up (1536 and
/// 2048 features) 7.3 -> 9.5 and 8.2 -> 9.9 us; the 896-wide (28 units) head 18 -> 21 us.
/// Free to vary: the dense walk gives every row the plain walk's bits (scripts/kernel-emu.sh,
/// mvq_emu).
pub(in crate::backend::cuda) fn mvq_dense(
    tile: usize,
    n_in: usize,
    features: usize,
    gate_up: bool,
    sms: usize,
) -> bool {
    let per_group = if gate_up { MVD_ROWS / 2 } else { MVD_ROWS };
    let wave = mvq_blocks_per_sm(MVD_ROWS, 1) * MV_WARPS * sms;
    tile == 1 && n_in / 32 <= MVD_MAX_UNITS && features.div_ceil(per_group) >= wave
}

/// Weight rows a warp of the dense walk takes at a time (`MVD_ROWS` in kernels/mvq.cu).
pub(in crate::backend::cuda) const MVD_ROWS: usize = 8;

/// The widest row (in 32-value units) the host gives the dense walk: a quarter of the plain
/// walk's lanes idle or more (the kernel itself walks rows of 1..31 units).
const MVD_MAX_UNITS: usize = 24;

/// Blocks of a vectorized kernel that stay resident per SM: its launch bounds
/// (`MVQ_MIN_BLOCKS` in kernels/mvq.cu; the dense walk, nw = MVD_ROWS, keeps 3), which size
/// the launch's grid.
pub(in crate::backend::cuda) fn mvq_blocks_per_sm(nw: usize, tile: usize) -> usize {
    if nw == MVD_ROWS {
        3
    } else if nw == 4 {
        1
    } else if tile <= 2 {
        3
    } else {
        2
    }
}

/// Dynamic shared memory (bytes) of a vectorized launch: the staged tile when `staged`,
/// the run sums of x for a format with offsets, the tile's norm factors, and with `pre`
/// (gemma3's post-norm add folded in, `PreAdd`) three rows of n_in floats (o, x and the norm
/// weights) at the next 16-byte boundary (kernels/mvq.cu mvq_pre_at).
pub(in crate::backend::cuda) fn mvq_smem(
    ty: GgmlType,
    tile: usize,
    n_in: usize,
    staged: bool,
    pre: bool,
) -> usize {
    let sums = if repack::has_offsets(ty) {
        tile * n_in / 16
    } else {
        0
    };
    let floats = if staged { tile * n_in } else { 0 } + sums + tile;
    4 * if pre {
        floats.next_multiple_of(4) + 3 * n_in
    } else {
        floats
    }
}

/// The widest row a one-row launch folds gemma3's post-norm add into (`MVQ_PRE_MAX` in
/// kernels/mvq.cu; its three rows and the tile then take at most 65 KiB of shared memory).
pub(in crate::backend::cuda) const MVQ_PRE_MAX: usize = 4096;

/// gemma3's post-norm residual add ahead of a matvec op: the op's input rows are `base +
/// post_norm(o)` (norm weights `w`, o the engine's scratch `o`), and they must end up in
/// `out` (engine scratch other than `base`: the next add reads it as its base). One-row ops
/// whose every launch is vectorized fold it into their prologue (`pre_fuses`,
/// kernels/mvq.cu mvq_pre_add); any other op runs add_residual first. Both compute x' with
/// the same expressions in the same order, so the choice is timing only.
#[derive(Clone, Copy)]
pub(super) struct PreAdd<'a> {
    pub(super) base: u64,
    pub(super) w: &'a GpuBuf,
    pub(super) out: u64,
}

/// The module kind whose one-row kernels fold a `PreAdd` (built with `#define MVQ_PRE`) of
/// a vectorized kind (`MVQ_BASE + format`), or None for any other kind.
pub(in crate::backend::cuda) fn pre_kind(kind: usize) -> Option<usize> {
    (MVQ_BASE..MVQ_PRE_BASE)
        .contains(&kind)
        .then(|| kind - MVQ_BASE + MVQ_PRE_BASE)
}

/// Whether an op over matrices `mats` (as `MatKind` with the mma flag) for `rows` rows of
/// width `n_in` folds a `PreAdd` into its prologue: one row, every matrix vectorized and
/// off the tensor cores (mma kernels and the byte-wise kernels do not take it; a gate|up
/// pair of one format, so it is one vectorized launch), the row no wider than MVQ_PRE_MAX
/// and its tile staged in shared memory (`stage_max`, as mvq_launch stages it).
/// (An iterator, not a slice: the engine asks for each gemma3 q|k|v and gate|up op, every
/// decode step with graphs off.)
pub(in crate::backend::cuda) fn pre_fuses(
    mats: impl Iterator<Item = (MatKind, bool)> + Clone,
    rows: usize,
    n_in: usize,
    gate_up: bool,
    stage_max: usize,
) -> bool {
    let Some((k0, _)) = mats.clone().next() else {
        return false;
    };
    rows == 1
        && n_in <= MVQ_PRE_MAX
        && 4 * n_in <= stage_max
        && mats.clone().all(|((_, packed), mma)| packed && !mma)
        && (!gate_up || mats.clone().all(|m| m.0 == k0))
}

/// Warps that share one output feature's dot (a power of two dividing MV_WARPS). A function
/// of the launch's feature count alone — the matrix shapes, never the batch — so a row's
/// reduction order is fixed: few features get more warps each (up to about 4096 warps, one
/// wave at 32 resident warps per SM on an H200), to keep the GPU busy.
pub(in crate::backend::cuda) fn warps_per_feature(features: usize) -> usize {
    let mut w = MV_WARPS;
    while w > 1 && features * w > 4096 {
        w /= 2;
    }
    w
}

/// The matvec modules (kind, row tile) the launches over `layers` and `output` need for up
/// to `max_rows` rows, and the formats of their matrices in the tensor-core layout (whose
/// mma kernels are needed too). A function of the matrices and `max_rows` alone.
pub(super) fn modules_needed(
    layers: &[DevLayer],
    output: Option<&DevWeight>,
    max_rows: usize,
) -> (Vec<(usize, usize)>, Vec<GgmlType>) {
    let mut kinds: Vec<usize> = Vec::new();
    let mut pre: Vec<usize> = Vec::new();
    let mut mix: Vec<usize> = Vec::new();
    let mut mma: Vec<GgmlType> = Vec::new();
    let mut need = |tys: &[&DevWeight], mode: i32, folds: bool| {
        mma.extend(tys.iter().filter(|w| w.mma).map(|w| w.ty));
        if let Some((k, _, _)) = mix_of(tys.iter().map(|w| (w.kind(), w.mma)), 1, mode) {
            mix.push(k);
        }
        let groups = launch_groups(tys.iter().filter(|w| !w.mma).map(|w| w.kind()), mode);
        if folds {
            // gemma3: q|k|v and gate|up may fold a post-norm add at one row (`PreAdd`).
            pre.extend(groups.iter().filter_map(|g| pre_kind(g.1)));
        }
        kinds.extend(groups.into_iter().map(|g| g.1));
    };
    for l in layers {
        let folds = l.post_attn_norm.is_some() || l.post_ffn_norm.is_some();
        need(&[&l.wq, &l.wk, &l.wv], MODE_STORE, folds);
        need(&[&l.wo], MODE_ADD, false);
        need(&[&l.gate, &l.up], MODE_GATE_UP, folds);
        need(&[&l.down], MODE_ADD, false);
    }
    if let Some(o) = output {
        need(&[o], MODE_STORE, false);
    }
    kinds.sort_unstable();
    kinds.dedup();
    pre.sort_unstable();
    pre.dedup();
    mix.sort_unstable();
    mix.dedup();
    let tiles = tiles_up_to(max_rows);
    // The folding and mixed kinds at one row only: neither runs a larger tile (pre_fuses,
    // mix_of).
    let need: Vec<(usize, usize)> = kinds
        .iter()
        .flat_map(|&k| tiles.iter().map(move |&t| (k, t)))
        .chain(pre.into_iter().chain(mix).map(|k| (k, 1)))
        .collect();
    mma.sort_unstable_by_key(|t| *t as usize);
    mma.dedup();
    (need, mma)
}

impl CudaEngine {
    /// One fused matvec launch over `mats` (their outputs side by side), input rows
    /// `x` (`[rows, n_in]`, normalized in the prologue when `norm` is given), epilogue `mode`.
    /// Callers pass matrices of one input width and output buffers holding rows x n_out.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mv(
        &self,
        s: &GpuStream,
        mats: &[(&DevWeight, u64)],
        x: u64,
        norm: Option<&GpuBuf>,
        rows: usize,
        mode: i32,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        self.mv_pre(s, mats, x, None, norm, rows, mode, op)
    }

    /// `mv` whose input rows are `x` or, with `pre`, gemma3's `pre.base + post_norm(o)`
    /// (left in `pre.out`): folded into the prologue where `pre_fuses`, else add_residual
    /// first and then `mv` over `pre.out`. The same bits either way (kernels/mvq.cu
    /// mvq_pre_add).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mv_pre(
        &self,
        s: &GpuStream,
        mats: &[(&DevWeight, u64)],
        x: u64,
        pre: Option<PreAdd>,
        norm: Option<&GpuBuf>,
        rows: usize,
        mode: i32,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let pre = match pre {
            Some(p) => {
                let kinds = mats.iter().map(|(w, _)| (w.kind(), w.mma));
                let n_in = mats.first().map_or(0, |(w, _)| w.cols);
                if pre_fuses(kinds, rows, n_in, mode == MODE_GATE_UP, self.dx.stage_max) {
                    Some(p)
                } else {
                    self.add_residual(s, Some(p.w), rows, p.out, p.base, op)?;
                    return self.mv_pre(s, mats, p.out, None, norm, rows, mode, op);
                }
            }
            None => None,
        };
        let x = pre.map_or(x, |p| p.base);
        // The reduction order of every dot is fixed by the whole op's feature count (its
        // warps per feature), whichever launches carry it.
        let features: usize = mats
            .iter()
            .enumerate()
            .filter(|(i, _)| mode != MODE_GATE_UP || *i == 0)
            .map(|(_, (w, _))| w.rows)
            .sum();
        // The split of each byte-wise dot over warps, from the op's shape (a vectorized dot
        // is one warp's, whatever the shape).
        let wpf = warps_per_feature(features);
        // --mma: the matrices in a tensor-core layout go out as one mma launch per format, in
        // order of first appearance (gate|up: both or neither, one format, decided at
        // upload), the rest below as without it. Which matrices those are is fixed at upload
        // from the matrices alone, never by the rows; each output's order is its own row's
        // (kernels/mma.cu), so how the launches are split changes no bits.
        // An op whose matrices all take it in one format (every op of a Q4_K model) goes out
        // as it is, with no split to build on the walk.
        if let Some((w0, _)) = mats.first() {
            if mats.iter().all(|(w, _)| w.mma && w.ty == w0.ty) {
                // (pre_fuses never holds for an mma matrix: `pre` is None here.)
                return self.mma_launch(s, mats, x, norm, rows, mode, op);
            }
        }
        // Q4_K's and Q6_K's matrices (a Q4_K_M file's q|k|v, v Q6_K) decode as ONE launch,
        // Q4_K's first (engine/mma.rs mma_mix_split): each output has its own pointer, so the
        // launch order of the matrices is free, and each its format's bits.
        if mats.iter().all(|(w, _)| w.mma) {
            let mut ord: Vec<(&DevWeight, u64)> = Vec::with_capacity(mats.len());
            ord.extend(mats.iter().filter(|(w, _)| w.ty == GgmlType::Q4K));
            ord.extend(mats.iter().filter(|(w, _)| w.ty != GgmlType::Q4K));
            let tys: Vec<(GgmlType, usize)> = ord.iter().map(|(w, _)| (w.ty, w.rows)).collect();
            if mma_mix_split(&tys, rows, mode == MODE_GATE_UP).is_some() {
                return self.mma_launch(s, &ord, x, norm, rows, mode, op);
            }
        }
        let rest_buf: Vec<(&DevWeight, u64)>;
        let mats = if mats.iter().any(|(w, _)| w.mma) {
            let (m, rest): (Vec<_>, Vec<_>) = mats.iter().copied().partition(|(w, _)| w.mma);
            if mode == MODE_GATE_UP && !rest.is_empty() {
                return Err(self.err(&op(), "gate|up with one matrix in the mma layout"));
            }
            let mut tys: Vec<GgmlType> = Vec::new();
            for (w, _) in &m {
                if !tys.contains(&w.ty) {
                    tys.push(w.ty);
                }
            }
            for ty in tys {
                let group: Vec<_> = m.iter().copied().filter(|(w, _)| w.ty == ty).collect();
                self.mma_launch(s, &group, x, norm, rows, mode, op)?;
            }
            if rest.is_empty() {
                return Ok(());
            }
            rest_buf = rest;
            &rest_buf[..]
        } else {
            mats
        };
        // One launch (the decode path: every op of a one-format model) without building the
        // groups; exactly the cases where `launch_groups` gives one.
        let k0 = mats[0].0.kind();
        if mode == MODE_GATE_UP || mats.iter().all(|(w, _)| w.kind() == k0) {
            return self.mv_launch(s, mats, x, pre, norm, rows, mode, wpf, op);
        }
        // Two vectorized formats side by side at one row (gemma3's q|k|v): one mixed launch,
        // when its one-row tile stages (as every such launch of one format does).
        if let Some(mix) = mix_of(mats.iter().map(|(w, _)| (w.kind(), w.mma)), rows, mode) {
            let n_in = mats[0].0.cols;
            let features: usize = mats.iter().map(|(w, _)| w.rows).sum();
            if 4 * n_in <= self.dx.stage_max && !mvq_dense(1, n_in, features, false, self.dx.sms) {
                return self.mvq_mix_launch(s, mats, x, pre, norm, mix, op);
            }
        }
        // Mixed kinds side by side (q|k|v): one launch per kind, each with the op's split,
        // so every feature's bits are those of a fused launch.
        for (_, kind) in launch_groups(mats.iter().map(|(w, _)| w.kind()), mode) {
            let part: Vec<(&DevWeight, u64)> = mats
                .iter()
                .filter(|(w, _)| kind_of(w.kind()) == kind)
                .copied()
                .collect();
            // With `pre`, every launch forms the same row and writes the same bits to out.
            self.mv_launch(s, &part, x, pre, norm, rows, mode, wpf, op)?;
        }
        Ok(())
    }

    /// The arguments of one fused matvec launch over `mats` (kernels/matvec.cu MvArgs; the
    /// rows are set per launch) and its output features (mode 2: the gate's). Checks that
    /// every matrix has the launch's width, a whole number of 32-element chunks.
    pub(super) fn mv_args(
        &self,
        mats: &[(&DevWeight, u64)],
        x: u64,
        norm: Option<&GpuBuf>,
        mode: i32,
        op: &dyn Fn() -> String,
    ) -> BResult<(MvArgs, usize)> {
        let c = &self.model.cfg;
        let n_in = mats[0].0.cols;
        // The kernel walks whole 32-element chunks (every block format's block is 32 or 256
        // elements; a float matrix must be 32-aligned too).
        if !n_in.is_multiple_of(32) {
            return Err(self.err(
                &op(),
                format!("matrix width {n_in} is not a multiple of 32"),
            ));
        }
        let mut a = MvArgs {
            x,
            norm: norm.map_or(0, |w| w.at(0)),
            n_mat: mats.len() as i32,
            n_in: to_i32(n_in, "matvec n_in")?,
            mode,
            act: match c.activation {
                Activation::Silu => 0,
                Activation::GeluTanh => 1,
            },
            eps: c.rms_eps,
            ..Default::default()
        };
        let mut features = 0usize;
        for (i, (w, y)) in mats.iter().enumerate() {
            if w.cols != n_in {
                return Err(self.err(
                    &op(),
                    format!("matrices of widths {} and {n_in} in one launch", w.cols),
                ));
            }
            a.m[i] = MvMat {
                w: w.raw.ptr(),
                row_bytes: w.row_bytes as u64,
                y: *y,
                n_out: to_i32(w.rows, "matvec n_out")?,
                fmt: fmt_of(w.ty),
            };
            if mode != MODE_GATE_UP || i == 0 {
                features += w.rows;
            }
        }
        Ok((a, features))
    }

    /// One matvec launch over `mats` with `wpf` warps per feature (byte-wise), or the
    /// vectorized launch when they are packed.
    #[allow(clippy::too_many_arguments)]
    fn mv_launch(
        &self,
        s: &GpuStream,
        mats: &[(&DevWeight, u64)],
        x: u64,
        pre: Option<PreAdd>,
        norm: Option<&GpuBuf>,
        rows: usize,
        mode: i32,
        wpf: usize,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let n_in = mats[0].0.cols;
        let (mut a, features) = self.mv_args(mats, x, norm, mode, op)?;
        // --fault row-count-order: the planted order on every launch of a step of 2+ rows
        // (a row's result then depends on how many rows share its step).
        a.plant = i32::from(self.spec.fault_row_count_order && rows > 1);
        let kind = mv_kind(mats.iter().map(|(w, _)| w.kind()));
        // Two dots per pass: gate and up of one feature when they share a format, or two
        // adjacent features of a lone matrix whose features each get one warp (the head).
        // Neither changes any dot's order (kernels/matvec.cu: warp_dots).
        // (A mixed-format launch runs the generic kernel, which never pairs.)
        let pair = match mode {
            MODE_GATE_UP => mats.len() == 2 && mats[0].0.ty == mats[1].0.ty,
            _ => mats.len() == 1 && wpf == 1,
        };
        let per_slot = if pair && mode != MODE_GATE_UP { 2 } else { 1 };
        let groups = features.div_ceil(per_slot * MV_WARPS / wpf);
        let wpf_i = wpf as i32;
        let feat_i = to_i32(features, "matvec features")?;
        let pair_i = pair as i32;
        let prof_kind = MV_PROF[Self::prof_op(mode, mats.len(), norm.is_some())];
        if mats[0].0.packed {
            if let Some(p) = pre {
                a.res_o = self.o.at(0);
                a.res_w = p.w.at(0);
                a.res_out = p.out;
            }
            return self.mvq_launch(s, mats, &a, kind, norm, (rows, features), prof_kind, op);
        }
        if pre.is_some() {
            return Err(self.err(&op(), "a post-norm add folded into a byte-wise launch"));
        }
        for (r0, n, tile) in row_tiles(rows) {
            let f = self.dx.mv_func(kind, tile)?;
            // This launch's rows r0..r0+n: x and every y start at row r0 (each row's result
            // is independent of the others and of the tile).
            let mut t = a;
            t.x = x + (4 * r0 * n_in) as u64;
            t.rows = to_i32(n, "rows")?;
            for (m, (w, y)) in t.m.iter_mut().zip(mats) {
                m.y = *y + (4 * r0 * w.rows) as u64;
            }
            // Enough blocks for one round of feature slots, at most what the GPU holds at
            // once (4 per SM for tiles up to 4 rows, else 3: the kernel's launch bounds):
            // extra slots loop inside the blocks.
            let per_sm = if tile <= 4 { 4 } else { 3 };
            let blocks = groups.min(per_sm * self.dx.sms);
            // The input tile (and the norm weights) go to shared memory when they fit: the
            // dot loop then never waits on a global load of x.
            let stage_bytes = 4 * (tile + norm.is_some() as usize) * n_in;
            let stage_x = stage_bytes <= self.dx.stage_max;
            let cfg = LaunchConfig {
                grid_dim: (
                    to_u32(blocks, "matvec blocks")?,
                    to_u32(n / tile, "matvec row tiles")?,
                    1,
                ),
                block_dim: (32 * MV_WARPS as u32, 1, 1),
                shared_mem_bytes: if stage_x { stage_bytes as u32 } else { 0 },
            };
            let stage_i = stage_x as i32;
            let e0 = self.prof_start(s);
            let mut p = [kp(&t), kp(&wpf_i), kp(&feat_i), kp(&stage_i), kp(&pair_i)];
            // SAFETY: mv_tile(MvArgs a, int wpf, int features, int stage_x, int pair), the
            // module's tile equal to `tile` and n a whole number of tiles (row_tiles), with
            // MvArgs laid out as the CUDA struct, features the launch's output features (mode
            // 2: the gate's), stage_x set only when the dynamic shared memory requested (at
            // most stage_max, which the kernel is opted in to) holds the tile and, for a norm
            // launch, the norm weights; pair only for gate|up of one format or a lone matrix;
            // each matrix pointer holds n_out rows of row_bytes bytes of its format (uploaded
            // from the checked Weight), all of width n_in; x holds rows * n_in values and each
            // y rows * n_out (engine scratch sized max_rows, rows checked by the callers; the
            // head's logits range is checked), so rows r0..r0+n of both are in range; norm,
            // when set, holds n_in values.
            unsafe { self.dx.launch(s, f, &cfg, &mut p) }.map_err(|e| self.err(&op(), e))?;
            self.prof_end(s, prof_kind, e0);
        }
        Ok(())
    }

    /// One vectorized matvec launch (kernels/mvq.cu) per row tile: `a` is the launch's
    /// arguments with every matrix packed and of module `kind`, `features` its output
    /// features (mode 2: the gate's). A tile too large to stage in shared memory reads rows
    /// that stage_rows laid out (and normalized) in the engine's `xn` first.
    #[allow(clippy::too_many_arguments)]
    fn mvq_launch(
        &self,
        s: &GpuStream,
        mats: &[(&DevWeight, u64)],
        a: &MvArgs,
        kind: usize,
        norm: Option<&GpuBuf>,
        (rows, features): (usize, usize),
        prof_kind: &'static str,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let n_in = mats[0].0.cols;
        let ty = mats[0].0.ty;
        // mv_kind gives a vectorized kind only when every matrix is packed and of one format
        // (a mix is the generic, byte-wise kind).
        if kind < MVQ_BASE {
            return Err(self.err(&op(), "a vectorized launch over unpacked or mixed matrices"));
        }
        let gate_up = a.mode == MODE_GATE_UP;
        if gate_up && mats.len() != 2 {
            return Err(self.err(&op(), "gate|up needs its two matrices"));
        }
        let feat_i = to_i32(features, "matvec features")?;
        let mut laid_out = false;
        let pre = a.res_o != 0;
        for (r0, n, tile) in row_tiles(rows) {
            // Weight rows a warp takes at a time, and the kernel: the dense walk's groups are
            // MVD_ROWS rows (variant MVQ_DENSE), the others' nw (variant log2 nw).
            let dense = mvq_dense(tile, n_in, features, gate_up, self.dx.sms);
            let (nw, variant) = if dense {
                (MVD_ROWS, MVQ_DENSE)
            } else {
                let nw = mvq_rows_per_warp(features, gate_up, tile);
                (nw, nw.trailing_zeros() as usize)
            };
            // A launch that folds gemma3's post-norm add runs its kind's MVQ_PRE module.
            let module = if pre {
                pre_kind(kind).ok_or_else(|| self.err(&op(), "no folding module for this kind"))?
            } else {
                kind
            };
            let f = self.dx.mv_variant(module, tile, variant)?;
            // The tile stages in shared memory when it fits: up to stage_max, or for a
            // four-rows-per-warp kernel (one block per SM by its launch bounds, so shared
            // memory costs no residency) whatever the block may use beside the run sums.
            // Timing only: staged and laid-out tiles give every row the same bits. Measured
            // on an H200 (B=8, 8B shape, Q8_0): 3415 -> 3712 tok/s, receipts `same`.
            let limit = if nw == 4 {
                self.dx
                    .smem_max
                    .saturating_sub(mvq_smem(ty, tile, n_in, false, false))
            } else {
                self.dx.stage_max
            };
            let staged = 4 * tile * n_in <= limit.max(self.dx.stage_max);
            if pre && (tile != 1 || !staged) {
                return Err(self.err(
                    &op(),
                    "a post-norm add folded into an unstaged or multi-row tile",
                ));
            }
            let mut t = *a;
            t.x = a.x + (4 * r0 * n_in) as u64;
            if !staged {
                // The kernel reads such a tile from xn, laid out (and normalized) there for
                // all rows at once, on the first tile that needs it.
                if !laid_out {
                    self.stage_rows(s, a.x, norm, rows, n_in, op)?;
                    laid_out = true;
                }
                t.x = self.xn.at(0) + (4 * r0 * n_in) as u64;
                t.norm = 0;
            }
            t.rows = to_i32(n, "rows")?;
            for (m, (w, y)) in t.m.iter_mut().zip(mats) {
                m.y = *y + (4 * r0 * w.rows) as u64;
            }
            // Groups of nw rows (mode 2: nw / 2 features), one per warp at a time; at most
            // as many blocks as the launch bounds keep resident, extra groups loop inside
            // the warps. A launch of several row tiles (grid.y, a prime chunk) shares that
            // residency between its tiles, so each block stages its tile once for many
            // groups: a 512-row chunk on SmolLM2's shape (64 tiles, 96 blocks each, one
            // group per warp) spent most of each block staging 8 rows for 16 features.
            // Timing only: the order of a dot never depends on the grid.
            let per_group = if gate_up { nw / 2 } else { nw };
            let resident = mvq_blocks_per_sm(nw, tile) * self.dx.sms;
            let blocks = features
                .div_ceil(per_group)
                .div_ceil(MV_WARPS)
                .min((resident / (n / tile)).max(1))
                .max(1);
            let smem = mvq_smem(ty, tile, n_in, staged, pre);
            if smem > self.dx.smem_max {
                return Err(self.err(
                    &op(),
                    format!("{smem} bytes of shared memory for a {tile}-row tile of width {n_in}"),
                ));
            }
            let cfg = LaunchConfig {
                grid_dim: (
                    to_u32(blocks, "matvec blocks")?,
                    to_u32(n / tile, "matvec row tiles")?,
                    1,
                ),
                block_dim: (32 * MV_WARPS as u32, 1, 1),
                shared_mem_bytes: smem as u32,
            };
            let stage_i = staged as i32;
            let e0 = self.prof_start(s);
            let mut p = [kp(&t), kp(&feat_i), kp(&stage_i)];
            // SAFETY: mvq_wN(MvArgs a, int features, int stage_x) of the module (kind, tile),
            // N = nw (MVQ_KERNELS[log2 nw]), or mvq_d8 (same arguments) when `dense`, which
            // holds only for one-row tiles (the only modules that compile it) of rows of at
            // most MVD_MAX_UNITS units (its walk deals 1..31); n is a whole number of tiles
            // (row_tiles); MvArgs is laid out as the CUDA struct and every matrix pointer holds n_out rows of
            // row_bytes bytes in crate::quant::repack's layout of format `ty` (packed at
            // upload, checked above), all of width n_in (checked by mv_launch), a multiple of
            // 32 whose units the kernel reads only below n_in / 32; x (or xn) holds rows *
            // n_in values and each y rows * n_out (engine scratch of max_rows, rows checked by
            // callers; the head's logits range is checked), so rows r0..r0+n are in range;
            // the dynamic shared memory requested (<= smem_max, opted in at load) is what
            // the kernel lays out for this tile, format and stage_x (mvq_smem); norm, when
            // set, holds n_in values and is set only when stage_x (else x is xn, laid out).
            unsafe { self.dx.launch(s, f, &cfg, &mut p) }.map_err(|e| self.err(&op(), e))?;
            self.prof_end(s, prof_kind, e0);
        }
        Ok(())
    }

    /// The mixed one-row launch (kernels/mvq.cu mvq_x1 / mvq_x2) over side-by-side matrices
    /// of two packed formats (`mix_of`: kind, fa, fb): fa's matrices first, in their order,
    /// then fb's, each output written through its own pointer (so the order is free); the
    /// grid shared between the two formats' walks in proportion to their groups. Staged, so
    /// the prologue normalizes (and, with `pre`, forms the post-norm add) in every block.
    #[allow(clippy::too_many_arguments)]
    fn mvq_mix_launch(
        &self,
        s: &GpuStream,
        mats: &[(&DevWeight, u64)],
        x: u64,
        pre: Option<PreAdd>,
        norm: Option<&GpuBuf>,
        (kind, fa, fb): (usize, GgmlType, GgmlType),
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        // fa's matrices first, then fb's, on the stack: MvArgs holds at most three (q|k|v),
        // and this runs on every one-row q|k|v launch when graphs are off.
        let mut buf = [*mats
            .first()
            .ok_or_else(|| self.err(&op(), "a mixed launch of no matrices"))?;
            3];
        if mats.len() > buf.len() {
            return Err(self.err(
                &op(),
                format!(
                    "a mixed launch of {} matrices (at most {})",
                    mats.len(),
                    buf.len()
                ),
            ));
        }
        let mut n = 0;
        for m in mats
            .iter()
            .filter(|(w, _)| w.ty == fa)
            .chain(mats.iter().filter(|(w, _)| w.ty == fb))
        {
            buf[n] = *m;
            n += 1;
        }
        let ord = &buf[..n];
        let (mut a, features) = self.mv_args(ord, x, norm, MODE_STORE, op)?;
        let n_in = ord[0].0.cols;
        let fa_features: usize = ord
            .iter()
            .filter(|(w, _)| w.ty == fa)
            .map(|(w, _)| w.rows)
            .sum();
        if !ord.iter().all(|(w, _)| w.packed && !w.mma)
            || fa_features == 0
            || fa_features == features
        {
            return Err(self.err(&op(), "a mixed launch needs packed matrices of two formats"));
        }
        if 4 * n_in > self.dx.stage_max {
            return Err(self.err(&op(), "a mixed launch of an unstaged tile"));
        }
        a.rows = 1;
        if let Some(p) = pre {
            a.res_o = self.o.at(0);
            a.res_w = p.w.at(0);
            a.res_out = p.out;
        }
        let nw = mvq_rows_per_warp(features, false, 1);
        let resident = mvq_blocks_per_sm(nw, 1) * self.dx.sms;
        let need_a = fa_features.div_ceil(nw).div_ceil(MV_WARPS);
        let need_b = (features - fa_features).div_ceil(nw).div_ceil(MV_WARPS);
        // Each format's blocks: all it can use when the two fit one wave, else the wave
        // shared in proportion (at least one block each). Timing only.
        let (nba, nbb) = if need_a + need_b <= resident {
            (need_a, need_b)
        } else {
            let ba = (resident * need_a / (need_a + need_b)).clamp(1, resident - 1);
            (ba, resident - ba)
        };
        let smem = mvq_smem(fa, 1, n_in, true, pre.is_some()).max(mvq_smem(
            fb,
            1,
            n_in,
            true,
            pre.is_some(),
        ));
        if smem > self.dx.smem_max {
            return Err(self.err(
                &op(),
                format!("{smem} bytes of shared memory for a mixed one-row launch of width {n_in}"),
            ));
        }
        let f = self.dx.mv_variant(kind, 1, nw.trailing_zeros() as usize)?;
        let cfg = LaunchConfig {
            grid_dim: (to_u32(nba + nbb, "matvec blocks")?, 1, 1),
            block_dim: (32 * MV_WARPS as u32, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let (feat_i, fa_i, nba_i) = (
            to_i32(features, "matvec features")?,
            to_i32(fa_features, "matvec features")?,
            to_i32(nba, "matvec blocks")?,
        );
        let prof_kind = MV_PROF[Self::prof_op(MODE_STORE, ord.len(), norm.is_some())];
        let e0 = self.prof_start(s);
        let mut p = [kp(&a), kp(&feat_i), kp(&fa_i), kp(&nba_i)];
        // SAFETY: mvq_xN(MvArgs a, int features, int fa, int nba) of the mixed module `kind`
        // (MVQ_FMT fa, MVQ_FMT2 fb, MVQ_PRE, one-row), N = nw (1 or 2: mvq_rows_per_warp at
        // one row); MvArgs is laid out as the CUDA struct of an MVQ_PRE module (res_* zero
        // unless `pre`), its matrices fa's (features 0..fa_features) then fb's, each packed
        // in crate::quant::repack's layout of its format (checked above), all of width n_in
        // (mv_args), a multiple of 32; x holds one row of n_in values and each y one row of
        // n_out (engine scratch); the tile is staged (4 n_in <= stage_max, checked) and the
        // dynamic shared memory requested (<= smem_max, opted in at load) is the larger of
        // the two formats' one-row layouts (mvq_smem), which each half lays out for itself;
        // norm, when set, holds n_in values; 1 <= nba < nba + nbb blocks.
        unsafe { self.dx.launch(s, f, &cfg, &mut p) }.map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, prof_kind, e0);
        Ok(())
    }

    /// xn[r] = x[r] (normalized by w when given) for rows r < rows of width n, in the
    /// vectorized matvec's swizzled layout (kernels/norm.cu stage_rows).
    fn stage_rows(
        &self,
        s: &GpuStream,
        x: u64,
        w: Option<&GpuBuf>,
        rows: usize,
        n: usize,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        if n > self.xn_width {
            return Err(self.err(
                &op(),
                format!("rows of width {n} exceed the staging scratch"),
            ));
        }
        let (xp, op_) = (x, self.xn.at(0));
        let (wp, has) = w.map_or((0u64, 0i32), |w| (w.at(0), 1));
        let (r, n_i, eps) = (
            to_i32(rows, "rows")?,
            to_i32(n, "width")?,
            self.model.cfg.rms_eps,
        );
        let cfg = LaunchConfig {
            // One block of 256 threads per row (sumsq256 in kernels/common.cu).
            grid_dim: (to_u32(rows, "stage blocks")?, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.dx.func("stage_rows")?;
        let e0 = self.prof_start(s);
        let mut p = [
            kp(&xp),
            kp(&wp),
            kp(&op_),
            kp(&r),
            kp(&n_i),
            kp(&eps),
            kp(&has),
        ];
        // SAFETY: stage_rows(const float* x, const float* w, float* out, int rows, int n,
        // float eps, int has_norm); x is engine scratch holding rows x n values (the matvec's
        // input), out the engine's xn of max_rows x xn_width (rows <= max_rows checked by
        // callers, n <= xn_width above; n a multiple of 32, so float4-aligned rows); w is
        // read only when has_norm and then holds n values.
        unsafe { self.dx.launch(s, f, &cfg, &mut p) }.map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, "stage x (unstaged tile)", e0);
        Ok(())
    }
}
