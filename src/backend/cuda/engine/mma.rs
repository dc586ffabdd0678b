//! The engine's tensor-core launches (kernels/mma.cu): the scratch mma_prep writes, the
//! launch geometry (fused decode or prep then decode or GEMM, warps per block, grids) and
//! `mma_launch` itself. Laws it serves: every geometry choice is a function of the launch's
//! shape alone (rows, widths, SM count), never of timing, and every kernel it picks computes
//! THE ORDER of kernels/mma.cu for each output, so the choice is timing only and changes no
//! bit; which matrices come here is decided at upload (weights.rs, cuda/mma.rs).

use std::sync::Arc;

use cudarc::driver::LaunchConfig;

use super::weights::DevWeight;
use super::{kp, to_i32, to_u32, CudaEngine, MODE_GATE_UP};
use crate::backend::cuda::mma::{
    mma_fuses, mma_ints, mma_kernel, MMA_DECODE_K16, MMA_DECODE_K8, MMA_FUSED, MMA_GEMM,
    MMA_GEMM_N, MMA_MIX, MMA_PREP, MMA_WG, MMA_WG_BN, MMA_WG_COL_WORDS, MMA_WG_MT, MMA_WG_NWG,
    MMA_WG_SMEM,
};
use crate::backend::cuda::{alloc_zeroed_on, op_err, DevCtx, GpuBuf, GpuStream};
use crate::backend::BResult;
use crate::quant::GgmlType;

/// mma_prep's output (kernels/mma.cu) for one launch at a time, in one buffer: per column
/// (max_rows rounded up to whole 8-column n-tiles) and super-block of the widest input, the
/// B fragments XF (256 words), then 2^E (XE, 1 float), then the sub-block sums (XS, 8
/// floats); a launch of n_sb super-blocks packs its columns at stride n_sb from each start.
/// Or, for the wgmma GEMM (mma_prep_xg), the same buffer from its start as XG: per block of
/// 32 columns (max_rows rounded up to 32) and super-block one tile of 804 bytes a column.
/// One launch's prep and GEMM use it at a time (stream order; with PDL every kernel waits
/// for its predecessor before touching it), so the two layouts share it.
pub(super) struct MmaScratch {
    pub(super) buf: GpuBuf,
    cols: usize,
    sbs: usize,
}

impl MmaScratch {
    pub(super) fn new(
        dx: &Arc<DevCtx>,
        max_rows: usize,
        width: usize,
        s: &GpuStream,
    ) -> BResult<Self> {
        let (cols, sbs) = (max_rows.div_ceil(8) * 8, width.div_ceil(256));
        let over = || op_err(format!("mma scratch of {cols} x {sbs} overflows"));
        let n = cols
            .checked_mul(sbs)
            .and_then(|u| u.checked_mul(256 + 1 + 8))
            .ok_or_else(over)?;
        let n = n.max(Self::xg_words(max_rows, sbs).ok_or_else(over)?);
        Ok(MmaScratch {
            buf: alloc_zeroed_on(dx, n, s)?,
            cols,
            sbs,
        })
    }

    /// Words of XG for `rows` columns of `sbs` super-blocks (whole blocks of MMA_WG_BN).
    fn xg_words(rows: usize, sbs: usize) -> Option<usize> {
        rows.div_ceil(MMA_WG_BN)
            .checked_mul(MMA_WG_BN)?
            .checked_mul(sbs)?
            .checked_mul(MMA_WG_COL_WORDS)
    }

    /// (XF, XE, XS) device pointers. Each part starts 32-byte aligned (cols is a multiple
    /// of 8), as the kernels' uint4 / float4 loads need.
    fn parts(&self) -> (u64, u64, u64) {
        let n = self.cols * self.sbs;
        (self.buf.at(0), self.buf.at(256 * n), self.buf.at(257 * n))
    }
}

/// Shared memory of one (row, super-block) of prepared activations in the fused decode
/// kernel (kernels/mma.cu mma_prep_block): XF 256 words, 8 sub-block sums, 2^E.
pub(in crate::backend::cuda) const MMA_FUSE_UNIT: usize = 4 * (256 + 8 + 1);

/// Rounds of (row, super-block) preparation a fused decode block's warps may take: every
/// block prepares all the launch's rows itself (no scratch to share), one item per warp a
/// round, each round about one L2 round trip plus the split, against the mma_prep launch
/// (and its dependent launch gap) it replaces. The 16-warp kernel runs the narrow launches
/// (under two blocks per SM: each block's prep runs beside the others) and takes up to 4
/// rounds; the 8-warp kernel runs the wide ones, where the prep is repeated in many more
/// blocks than there are SMs, and takes up to 2. Measured on one H200 (2026-12-01, same bits;
/// receipts/decode-profile-cuda/fuse-rounds/): a cap of 2 for both, against 4 for both, gave
/// the 8192-wide 70B slice's eager +3 % (1518 -> 1562 tok/s, its 8-warp q|k|v and gate|up at
/// 4 rounds now unfused) but the 8B shape's -2 % (1317 -> 1281: its 16-warp down-proj, 56
/// super-blocks in 4 rounds, is faster fused). Those were Q4_K's launches; since step 23
/// Q4_K never fuses, since step 31 Q6_K neither (cuda/mma.rs mma_fuses), and the rule serves
/// the other formats.
pub(super) fn mma_fuse_rounds(warps: usize) -> usize {
    if warps >= 16 {
        4
    } else {
        2
    }
}

/// Rows of the launches the fused decode takes: one (eager). Measured on one H200 with
/// `--mma on` (against the unfused build, same bits: receipts/mma-fused-decode): eager +16 % on the
/// SmolLM2 shape (1153 -> 1338 tok/s) and +6 % on Gemma-3's, but B = 8 -12 % / -19 % (9206 ->
/// 8110, 8142 -> 6633): every block preparing all eight rows itself costs more than the
/// mma_prep launch it replaces.
pub(super) const MMA_FUSE_MAX_ROWS: usize = 1;

/// The host rule for the fused decode: Some(dynamic shared memory bytes) when a launch of
/// `rows` rows of `n_in` inputs of format `ty` on the decode kernel of `warps` warps
/// (mma_decode_kernel) runs as ONE kernel that prepares its rows itself (decode sized, rows
/// <= MMA_DECODE_MAX; its rows x super-blocks fit `cap`, the device's mma_fuse_cap, and take
/// at most mma_fuse_rounds(warps) rounds of the block's warps; never a format that
/// cuda/mma.rs mma_fuses declines, Q4_K and Q6_K), None for mma_prep then the decode kernel
/// or GEMM.
/// A function of the launch's shape and format alone (never of timing); both paths write the
/// same bytes of XF/XE/XS (kernels/mma.cu mma_prep_sb), so the choice changes no bit.
pub(in crate::backend::cuda) fn mma_fused_smem(
    ty: GgmlType,
    rows: usize,
    n_in: usize,
    warps: usize,
    cap: usize,
) -> Option<usize> {
    if !mma_fuses(ty) {
        return None;
    }
    let items = rows.checked_mul(n_in.div_ceil(256))?;
    let bytes = items.checked_mul(MMA_FUSE_UNIT)?;
    let rounds = items.div_ceil(warps.max(1));
    (rows == MMA_FUSE_MAX_ROWS && bytes <= cap && rounds <= mma_fuse_rounds(warps)).then_some(bytes)
}

/// The mma decode kernel slot of a launch of `n_mt` m-tiles (2 per block) of `n_sb`
/// super-blocks: 16 warps (super-blocks in flight) when its blocks run in one
/// wave (at most one a block per SM: a 512-thread block of 80-128 registers holds an SM),
/// or in two short ones (under two per SM, and one round: n_sb <= 16); else 8 (three blocks an
/// SM at 80 registers, so one wave up to 3 x SMs). Every format alike (Q6_K took 8 always
/// while its f16 route's 16-warp kernel spilled ~50 bytes a thread; its integer route's
/// spills 4: scripts/nvrtc-check.py builds both). Measured on one H200 (2026-12-01, same bits,
/// receipts/decode-profile-cuda/preload/): the 8192-wide 70B slice's o and down (256 blocks,
/// 32 and 112 super-blocks) on 8 warps instead of two waves of 16, eager +4 %, B = 8 +6 %;
/// the 8B shape's q|k|v (192 blocks, 16 super-blocks) on 8 warps -3 % eager, so it stays on 16.
/// Rechecked once Q4_K's one-row launches ran unfused (BENCH.md issue 30 step 25): every one
/// of them forced onto 8 warps, or onto 16, eager -5 to -9 % against this rule.
/// A function of the launch's matrices alone; both compute THE ORDER of kernels/mma.cu, so
/// the bits are the same either way (the tensor-core prototype, removed
/// with research/ in f78de77, measured every decode variant equal).
pub(in crate::backend::cuda) fn mma_decode_kernel(
    n_mt: usize,
    n_sb: usize,
    sms: usize,
) -> (usize, u32) {
    let blocks = n_mt.div_ceil(2);
    if blocks <= sms || (blocks < 2 * sms && n_sb <= 16) {
        (MMA_DECODE_K16, 16)
    } else {
        (MMA_DECODE_K8, 8)
    }
}

/// Warps along n of a GEMM block (4 x wn warps, 2 x 2 tiles each): 4, the measured
/// prototype's shape, unless its grid would not give every SM a block (SmolLM2's and
/// Gemma-3's narrow matrices: 576 rows are 5 m-blocks, 40 blocks at 512 rows for 132 SMs);
/// then the largest of 2, 1 that does, else 1. A function of the launch's shape alone;
/// timing only: every tiling adds each output's super-blocks in order in one lane.
pub(in crate::backend::cuda) fn mma_gemm_warps_n(n_mt: usize, rows: usize, sms: usize) -> usize {
    let m_blocks = n_mt.div_ceil(8);
    [4, 2]
        .into_iter()
        .find(|wn| m_blocks * rows.div_ceil(16 * wn) >= sms)
        .unwrap_or(1)
}

/// Whether a Q4_K GEMM launch of `n_mt` m-tiles and `rows` rows takes the wgmma GEMM
/// (kernels/mma.cu mma_gemm_wg, on a device where `DevCtx::mma_wg` holds): a GEMM (rows past
/// MMA_DECODE_MAX) whose blocks, counted as step 48's (MMA_WG_PICK_MT m-tiles x MMA_WG_BN
/// columns), give every SM one; else mma_gemm or the narrow GEMM, whose smaller blocks fill
/// the SMs. Step 47's probe measured it 1.53x mma_gemm over a layer's four 8B-shape matrices
/// at 512 rows, on an H100 and an H200, and slower at 37 and 64 rows on q|k|v and o, whose
/// grids it leaves short of the SMs (receipts/prefill-cuda/wgmma-int/call4). A function of
/// the launch's shape alone; timing only: both kernels compute THE ORDER (every output the
/// same bits).
pub(in crate::backend::cuda) fn mma_gemm_wg(n_mt: usize, rows: usize, sms: usize) -> bool {
    rows > MMA_DECODE_MAX && n_mt.div_ceil(MMA_WG_PICK_MT) * rows.div_ceil(MMA_WG_BN) >= sms
}

/// The m-tiles of a block in mma_gemm_wg's rule: step 48's block of 2 warpgroups, with which
/// the launches that gain were measured. Step 50's blocks of 4 m-tiles changed the kernel's
/// speed, not that set: counted in them, q|k|v took the kernel at 37 and 64 rows too and lost
/// there (receipts/prefill-cuda/one-warpgroup/call2/chunks.txt).
pub(in crate::backend::cuda) const MMA_WG_PICK_MT: usize = 8;

/// Whether a GEMM launch takes the narrow kernel (kernels/mma.cu MMA_K3, `mma_gemm_n`: 4 warps
/// of 2 x 1 tiles, a block an n-tile of 8 columns, registers unbounded): where even one warp
/// along n (`mma_gemm_warps_n` 1) leaves the grid short of warps. Why: Nsight Compute of a
/// SmolLM2-shape prefill layer (512 rows; BENCH.md issue 30 step 35) found its 576-row o and
/// down GEMMs at 160 blocks of 4 warps, 7 % occupancy and 10-13 % of the issue slots, 75 of
/// the layer's 252 us; the 2 x 1 tiles give twice the warps. Measured on one H100
/// (2026-12-05, receipts/prefill-cuda/narrow-prefill/call4, BENCH.md issue 30 step 36):
/// prefill512 on the SmolLM2 shape +3.1 %, Gemma-3's +2.3 %, the 8B slice (no narrow launch
/// at 512 rows) unchanged. A function of the launch's shape alone; timing only: the same
/// body walks each output's super-blocks in order in one lane (kernel-emu runs the narrow
/// kernel beside the others on every case).
pub(in crate::backend::cuda) fn mma_gemm_narrow(n_mt: usize, rows: usize, sms: usize) -> bool {
    mma_gemm_warps_n(n_mt, rows, sms) == 1
}

/// PPN_CUDA_PROF's names of the mma decode launches (fused, unfused), by
/// CudaEngine::prof_op, so that a profile says which matrix of a layer is far from the
/// bandwidth.
const MMA_PROF: [(&str, &str); 5] = [
    ("mma decode fused gate|up", "mma decode gate|up"),
    ("mma decode fused +residual", "mma decode +residual"),
    ("mma decode fused q|k|v", "mma decode q|k|v"),
    ("mma decode fused head", "mma decode head"),
    ("mma decode fused store", "mma decode store"),
];

/// PPN_CUDA_PROF's names of the wgmma GEMM launches, by CudaEngine::prof_op.
const MMA_WG_PROF: [&str; 5] = [
    "mma gemm wg gate|up",
    "mma gemm wg +residual",
    "mma gemm wg q|k|v",
    "mma gemm wg head",
    "mma gemm wg store",
];

/// The mixed decode's rule (kernels/mma.cu mma_decode_mix): Some(m-tiles of the Q4_K
/// matrices) when a launch of `rows` rows over matrices of `tys` (each `n_out` rows, in
/// launch order) may go out as ONE decode launch, Q4_K's then Q6_K's: decode sized (rows <=
/// MMA_DECODE_MAX), not gate|up (one format by construction), at least one matrix of each,
/// every Q4_K one before every Q6_K one (engine/matvec.rs orders an op's matrices so), and an
/// even Q4_K m-tile count (a block's two m-tiles of one format). None: a launch per format.
/// Each output is its format's decode body's (the same bits as those launches; kernel-emu's
/// mixed case checks it), so the rule is timing only: it saves a prep and a decode launch per
/// op (a Q4_K_M file's q|k|v where v is Q6_K), measured in BENCH.md issue 30 step 32.
pub(in crate::backend::cuda) fn mma_mix_split(
    tys: &[(GgmlType, usize)],
    rows: usize,
    gate_up: bool,
) -> Option<usize> {
    if rows > MMA_DECODE_MAX || gate_up {
        return None;
    }
    let q4 = tys.iter().take_while(|(t, _)| *t == GgmlType::Q4K).count();
    let rest = &tys[q4..];
    if q4 == 0 || rest.is_empty() || rest.iter().any(|(t, _)| *t != GgmlType::Q6K) {
        return None;
    }
    let split: usize = tys[..q4].iter().map(|(_, n)| n / 16).sum();
    split.is_multiple_of(2).then_some(split)
}

/// Rows of a launch the decode kernel takes (one n-tile of 8 columns); more go to the GEMM.
/// Timing only: both kernels compute THE ORDER (the GPU script's chunk gates check it).
pub(in crate::backend::cuda) const MMA_DECODE_MAX: usize = 8;

impl CudaEngine {
    /// The tensor-core launch (kernels/mma.cu) over `mats`, every one in the mma layout:
    /// mma_prep (the rows normalized as stage_rows does, then split into B fragments: Q4_K's
    /// int8 pieces, the other formats' f16 hi and lo), then for all `rows` at once the
    /// decode kernel (up to MMA_DECODE_MAX rows) or the GEMM, each ending in mv_finish
    /// (store, += residual, act(gate) * up); or, when mma_fused_smem takes the launch's
    /// shape, one fused decode kernel that prepares the rows itself with mma_prep's
    /// expressions. Every output is THE ORDER of kernels/mma.cu, whatever the rows: the
    /// kernel choice is timing only.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mma_launch(
        &self,
        s: &GpuStream,
        mats: &[(&DevWeight, u64)],
        x: u64,
        norm: Option<&GpuBuf>,
        rows: usize,
        mode: i32,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let Some(scratch) = &self.mma else {
            return Err(self.err(&op(), "an mma launch on an engine without mma scratch"));
        };
        let ty = mats[0].0.ty;
        let gate_up = mode == MODE_GATE_UP;
        // Q4_K's matrices then Q6_K's in one decode launch (mma_mix_split), or one format
        // (every launch of a one-format op: nothing to build on the walk).
        let mix = if mats.iter().all(|(w, _)| w.ty == ty) {
            None
        } else {
            let tys: Vec<(GgmlType, usize)> = mats.iter().map(|(w, _)| (w.ty, w.rows)).collect();
            mma_mix_split(&tys, rows, gate_up)
        };
        if mats
            .iter()
            .any(|(w, _)| !w.mma || (mix.is_none() && w.ty != ty))
        {
            return Err(self.err(
                &op(),
                "an mma launch over a matrix not in the mma layout or of another format",
            ));
        }
        if gate_up && (mats.len() != 2 || mats[0].0.rows != mats[1].0.rows) {
            return Err(self.err(&op(), "mma gate|up needs two matrices of one shape"));
        }
        let kernel = |slot: usize| {
            mma_kernel(ty, slot)
                .ok_or_else(|| self.err(&op(), format!("no mma kernels for {}", ty.name())))
        };
        let n_in = mats[0].0.cols;
        // Super-blocks of 256 inputs; the 32-element formats' last one may be partial
        // (mma_prep pads it with zeros, the kernels add only whole blocks of 32 of n_in).
        let n_sb = n_in.div_ceil(256);
        let unit = crate::quant::repack::mma_col_unit(ty);
        if rows == 0 || rows > scratch.cols || n_sb > scratch.sbs || !n_in.is_multiple_of(unit) {
            return Err(self.err(
                &op(),
                format!(
                    "mma launch of {rows} rows of width {n_in}: scratch holds {} x {}",
                    scratch.cols,
                    256 * scratch.sbs
                ),
            ));
        }
        let (mut a, _) = self.mv_args(mats, x, norm, mode, op)?;
        a.rows = to_i32(rows, "rows")?;
        // m-tiles: the matrices' back to back, or gate|up's pairs (kernels/mma.cu head).
        let n_mt: usize = if gate_up {
            2 * mats[0].0.rows / 16
        } else {
            mats.iter().map(|(w, _)| w.rows / 16).sum()
        };
        let (xf, xe, xs) = scratch.parts();
        let decode = rows <= MMA_DECODE_MAX;
        // --fault mma-row-order: the planted row-count-dependent order (kernels/mma.cu),
        // in mma_prep and the fused decode alike.
        let plant = i32::from(self.spec.fault_mma_row_order);
        let (n_mt_i, n_sb_i, rows_i) = (
            to_i32(n_mt, "mma m-tiles")?,
            to_i32(n_sb, "mma super-blocks")?,
            to_i32(rows, "rows")?,
        );
        let (k, warps) = mma_decode_kernel(n_mt, n_sb, self.dx.sms);
        let prof_op = Self::prof_op(mode, mats.len(), norm.is_some());
        let (fused_kind, dec_kind) = MMA_PROF[prof_op];
        // The decode kernels' grid, fused or not: 2 m-tiles a block.
        let dec = |smem: u32| -> BResult<LaunchConfig> {
            Ok(LaunchConfig {
                grid_dim: (to_u32(n_mt.div_ceil(2), "mma decode blocks")?, 1, 1),
                block_dim: (32 * warps, 1, 1),
                shared_mem_bytes: smem,
            })
        };
        // (mma_fuses declines Q4_K, so a mixed launch never fuses.)
        if let Some(smem) = mma_fused_smem(ty, rows, n_in, warps as usize, self.dx.mma_fuse_cap()) {
            let cfg = dec(to_u32(smem, "mma fused shared memory")?)?;
            let f = self.dx.mma_func(kernel(MMA_FUSED + k)?)?;
            let e0 = self.prof_start(s);
            let mut p = [kp(&a), kp(&n_mt_i), kp(&n_sb_i), kp(&rows_i), kp(&plant)];
            // SAFETY: mma_decode_f8/f16 of format ty (MMA_KERNEL_SET: MvArgs a, int n_mt, int
            // n_sb, int ncols, int plant); the weights and outputs as for the decode kernel
            // below (same checks above); a.x holds `rows` rows of n_in floats and a.norm, when
            // set, n_in values (as for mma_prep below); the dynamic shared memory `smem` is
            // rows * n_sb * MMA_FUSE_UNIT bytes, what mma_prep_block lays out, and at most
            // mma_fuse_cap, which prepare_mma opted the kernel in to.
            unsafe { self.dx.launch(s, f, &cfg, &mut p) }.map_err(|e| self.err(&op(), e))?;
            self.prof_end(s, fused_kind, e0);
            return Ok(());
        }
        // The wgmma GEMM (mma_gemm_wg, a GEMM: rows past MMA_DECODE_MAX): its own prep and
        // layout.
        if ty == GgmlType::Q4K && self.dx.mma_wg() && mma_gemm_wg(n_mt, rows, self.dx.sms) {
            let dims = (n_mt_i, n_sb_i, rows_i);
            return self.mma_wg_launch(s, &a, scratch, dims, plant, MMA_WG_PROF[prof_op], op);
        }
        // The GEMM reads whole n-tiles of 8 columns (the padding prepared as zeros); the
        // decode kernel reads only the launch's rows. Warps of a block take 8 super-blocks.
        let cols = if decode { rows } else { rows.div_ceil(8) * 8 };
        let prep = LaunchConfig {
            grid_dim: (
                to_u32(cols, "mma prep columns")?,
                to_u32(n_sb.div_ceil(8), "mma prep super-block groups")?,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // Q4_K's and Q6_K's integer pieces, the other formats' f16 hi and lo (kernels/mma.cu,
        // "Prepared activations"): every matrix of the launch is of format ty (checked above).
        let ints = i32::from(mma_ints(ty));
        let e0 = self.prof_start(s);
        let mut p = [kp(&a), kp(&xf), kp(&xe), kp(&xs), kp(&plant), kp(&ints)];
        // SAFETY: mma_prep(MvArgs a, u32* XF, float* XE, float* XS, int plant, int ints); a.x holds a.rows rows
        // of n_in floats (engine scratch of max_rows, rows checked by callers; the head's x
        // offset is checked), n_in a multiple of 32 (float4-aligned rows; the kernel reads
        // no input at or past n_in, checked above per format); a.norm, when
        // set, holds n_in values; the scratch parts hold scratch.cols >= cols columns of
        // scratch.sbs >= n_sb super-blocks (checked above, cols <= rows rounded up to 8),
        // written at stride n_sb (grid.y * 8 warps cover every super-block).
        unsafe {
            self.dx
                .launch(s, self.dx.mma_func(MMA_PREP)?, &prep, &mut p)
        }
        .map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, "mma prep", e0);
        let (f, cfg, kind) = if mix.is_some() {
            // The mixed decode: MMA_MIX's kernels in the decode slots' order (k), with one
            // argument more (mt_split, below).
            (self.dx.mma_func(MMA_MIX + k)?, dec(0)?, dec_kind)
        } else if decode {
            (self.dx.mma_func(kernel(k)?)?, dec(0)?, dec_kind)
        } else {
            // g2x2w4x4: a block covers 4 x 2 m-tiles and wn x 2 n-tiles of 8 columns (wn = 4,
            // or fewer on a narrow launch).
            let wn = mma_gemm_warps_n(n_mt, rows, self.dx.sms);
            // The narrow GEMM (mma_gemm_narrow): 4 warps of 2 x 1 tiles, a block an n-tile.
            let narrow = mma_gemm_narrow(n_mt, rows, self.dx.sms);
            let cols_per_block = if narrow { 8 } else { 16 * wn };
            let cfg = LaunchConfig {
                grid_dim: (
                    to_u32(n_mt.div_ceil(8), "mma gemm m-blocks")?,
                    to_u32(rows.div_ceil(cols_per_block), "mma gemm n-blocks")?,
                    1,
                ),
                block_dim: (to_u32(128 * wn, "mma gemm threads")?, 1, 1),
                shared_mem_bytes: 0,
            };
            let slot = if narrow { MMA_GEMM_N } else { MMA_GEMM };
            (self.dx.mma_func(kernel(slot)?)?, cfg, "mma gemm")
        };
        let e0 = self.prof_start(s);
        let split_i = to_i32(mix.unwrap_or(0), "mma mixed split")?;
        let mut p = [
            kp(&a),
            kp(&xf),
            kp(&xe),
            kp(&xs),
            kp(&n_mt_i),
            kp(&n_sb_i),
            kp(&rows_i),
            kp(&split_i),
        ];
        let p = if mix.is_some() {
            &mut p[..]
        } else {
            &mut p[..7]
        };
        // SAFETY: mma_decode_k8/k16/mma_gemm of format ty (MMA_KERNEL_SET: MvArgs a, const
        // uint4* XF, const float* XE, const float* XS, int n_mt, int n_sb, int ncols), or the
        // mixed decode (mma_decode_k8_mix/k16_mix: the same and int mt_split, the 8th
        // argument, passed only then); every matrix is of format ty (checked above; mixed:
        // the first mt_split m-tiles Q4_K's, the rest Q6_K's, mma_mix_split) and its pointer
        // holds n_out / 16 m-tiles of
        // n_sb blocks of mma_block_bytes(ty) (repack_mma at upload, n_out a multiple of 16;
        // the kernels read blocks of 32 below n_in only, n_in checked a multiple of the
        // format's unit above) and n_mt counts them as the kernel maps them (mode 2:
        // gate and up of one shape, checked above); XF/XE/XS were written by mma_prep above
        // on this stream for `cols` columns (the GEMM reads up to its last n-tile, all
        // prepared; the decode kernel reads columns < rows only, zeros past them); each y
        // holds rows x n_out (engine
        // scratch of max_rows, or the head's checked logits range); the decode kernel's
        // grid covers ceil(n_mt / 2) blocks of 2 m-tiles, the GEMM's its 8 x 2wn tile blocks
        // (the kernel reads its warps along n from blockDim), the narrow GEMM's its 8 x 1
        // (128 threads, one n-tile a block: mma_gemm_narrow only where wn is 1).
        unsafe { self.dx.launch(s, f, &cfg, p) }.map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, kind, e0);
        Ok(())
    }

    /// The wgmma GEMM's two launches (kernels/mma.cu): mma_prep_xg (the rows normalized and
    /// split as mma_prep does, laid out as XG in the scratch) then mma_gemm_wg. `a`: the
    /// launch's arguments (Q4_K matrices in the mma layout, checked by mma_launch); `dims`:
    /// its m-tiles, super-blocks and rows; `kind`: PPN_CUDA_PROF's name of the GEMM launch.
    #[allow(clippy::too_many_arguments)]
    fn mma_wg_launch(
        &self,
        s: &GpuStream,
        a: &super::args::MvArgs,
        scratch: &MmaScratch,
        dims: (i32, i32, i32),
        plant: i32,
        kind: &'static str,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let (n_mt_i, n_sb_i, rows_i) = dims;
        let (n_mt, n_sb, rows) = (n_mt_i as usize, n_sb_i as usize, rows_i as usize);
        let cols = rows.div_ceil(MMA_WG_BN) * MMA_WG_BN;
        let words = MmaScratch::xg_words(rows, n_sb);
        if words.is_none_or(|w| w > scratch.buf.len()) {
            return Err(self.err(
                &op(),
                format!(
                    "mma wg launch of {rows} rows x {n_sb} super-blocks: XG outgrows the scratch"
                ),
            ));
        }
        let xg = scratch.buf.at(0);
        let prep = LaunchConfig {
            grid_dim: (
                to_u32(cols, "mma wg prep columns")?,
                to_u32(n_sb.div_ceil(8), "mma wg prep super-block groups")?,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let e0 = self.prof_start(s);
        let mut p = [kp(a), kp(&xg), kp(&plant)];
        // SAFETY: mma_prep_xg(MvArgs a, u8* XG, int plant); a.x holds a.rows = rows rows of
        // n_in floats and a.norm, when set, n_in values (as for mma_prep, checked by
        // mma_launch; n_in a multiple of 256 for Q4_K); XG is the scratch from its start, which
        // holds xg_words(rows, n_sb) words (checked above): ceil(rows / 32) blocks of n_sb
        // tiles of 804 x 32 bytes, every byte of which the grid's cols columns x n_sb
        // super-blocks write (columns past rows as zeros).
        unsafe { self.dx.launch(s, self.dx.mma_func(MMA_WG)?, &prep, &mut p) }
            .map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, "mma prep wg", e0);
        let cfg = LaunchConfig {
            grid_dim: (
                to_u32(cols / MMA_WG_BN, "mma wg n-blocks")?,
                to_u32(n_mt.div_ceil(MMA_WG_MT), "mma wg m-blocks")?,
                1,
            ),
            block_dim: (to_u32(128 * MMA_WG_NWG, "mma wg threads")?, 1, 1),
            shared_mem_bytes: to_u32(MMA_WG_SMEM, "mma wg shared memory")?,
        };
        let e0 = self.prof_start(s);
        let mut p = [kp(a), kp(&xg), kp(&n_mt_i), kp(&n_sb_i), kp(&rows_i)];
        // SAFETY: mma_gemm_wg(MvArgs a, const u8* XG, int n_mt, int n_sb, int ncols); every
        // matrix of a is Q4_K in the mma layout (mma_launch's checks), n_mt its m-tiles as
        // mma_tile maps them (mode 2: gate and up of one shape), each of n_sb 2368-byte blocks
        // (16-byte aligned, as the bulk copies need: the allocation and 2368 = 16 x 148); XG
        // was written by mma_prep_xg above on this stream for cols columns (the GEMM's grid
        // covers exactly those blocks of 32 and reads no column past them); each y holds rows
        // x n_out (stores only for columns < rows); MMA_WG_SMEM bytes of dynamic shared memory,
        // which build_mma_kernel opted the kernel in to.
        unsafe {
            self.dx
                .launch(s, self.dx.mma_func(MMA_WG + 1)?, &cfg, &mut p)
        }
        .map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, kind, e0);
        Ok(())
    }
}
