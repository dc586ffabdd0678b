//! The engine's attention launches (kernels/attention.cu): the rows' positions (`RowPos`
//! groups in `rowpos`, written by `set_rowpos`), the arguments every attention kernel of a
//! layer shares (`AttArgs`, built once by `att_args`), the passes of a step (fused, or store
//! then attend) and each pass's kernel and shared memory. Laws it serves: the multi-row law
//! (a store-first step stores every row's K/V before any row attends; `KvOrder::Racy`, the
//! fault, fuses them); `rowpos_set` launches without programmatic dependent launch, so it
//! writes a step's positions only after the previous step's readers finished (write after
//! read) and attention reads them only after its pdl_wait (read after write); every kernel
//! choice (one row or several per block, early loads or not) runs att_fused's arithmetic,
//! so a row's bits do not depend on the batch; a window the kernels' shared memory cannot
//! hold is refused before any launch (`MAX_ATTN_POS`, checked by `check_layer`).

use cudarc::driver::LaunchConfig;

use super::weights::DevLayer;
use super::{kp, to_i32, to_u32, CudaCache, CudaEngine};
use crate::backend::cuda::{GpuBuf, GpuStream};
use crate::backend::BResult;
use crate::math::RopeStyle;
use crate::model::{KvOrder, Model, RowAt};

/// Rows per RowPos group (`POS_ROWS` in kernels/common.cu).
pub(super) const POS_ROWS: usize = 64;

/// Per-row positions of one attention launch (`struct RowPos` in kernels/common.cu): a
/// step's groups live in the engine's `rowpos` buffer, written by `rowpos_set` (which takes
/// one by value) before the step's layers; attention reads its group through a pointer.
#[repr(C)]
#[derive(Clone, Copy)]
struct RowPos {
    n: u32,
    pos: [u32; POS_ROWS],
    slot: [u32; POS_ROWS],
    seq: [u32; POS_ROWS],
}

/// The first slot a row at `pos` stored at `slot` attends to in a layer of sliding window
/// `window` (0: none), as kernels/attention.cu computes it (its mirror: the kernel takes
/// the window by value and the row from its RowPos). Tested equal to `RowAt::from_slot`.
#[cfg(test)]
pub(in crate::backend::cuda) fn from_slot_in_kernel(pos: u32, slot: u32, window: u32) -> u32 {
    let span = if window > 0 && pos + 1 >= window {
        window - 1
    } else {
        pos
    };
    slot - slot.min(span)
}

/// The attention kernel's `window` argument for layer `il` (0: the whole sequence).
fn window_arg(model: &Model, il: usize) -> BResult<i32> {
    to_i32(model.cfg.layer_window(il).unwrap_or(0), "sliding window")
}

/// The dynamic shared memory of an attention launch: the launch's rows' largest window
/// (launched now), or the largest window a step can have (captured into a graph).
#[derive(Clone, Copy)]
pub(super) enum AttSmem<'a> {
    Rows(&'a [RowAt]),
    Cap,
}

/// u32 words of one RowPos (the `rowpos` buffer holds whole groups of them).
pub(super) const ROWPOS_WORDS: usize = std::mem::size_of::<RowPos>() / 4;

/// Bytes of the RowPos kernel parameter (the CUDA struct must have the same size).
#[cfg(test)]
pub(in crate::backend::cuda) fn row_pos_bytes() -> usize {
    std::mem::size_of::<RowPos>()
}

/// The one-row attention kernel of a launch of `blocks` blocks (heads x rows) on `sms` SMs:
/// `attention_early` (its first K and V loads leave with the RoPE table: shorter dependent
/// chain, ~210 registers, one block per SM) while the launch is one wave of it, else
/// `attention` (~100 registers, two blocks per SM). Both run att_fused's arithmetic, so a
/// row's bits do not depend on which one B picks (kernels/attention.cu).
pub(in crate::backend::cuda) fn att_kernel(blocks: usize, sms: usize) -> &'static str {
    if blocks <= sms {
        "attention_early"
    } else {
        "attention"
    }
}

/// Threads of a store-pass block (`attention` with kv_mode 1) for heads `hd` wide: the head,
/// in whole warps, at least two (the head norms take warps 0 and 1) and at most 256 (a
/// thread holds v elements tid and tid + 256). Every thread of a pass that only stores does
/// the same expressions whatever the block's size (a RoPE pair below hd / 2, v elements
/// below hd), so the cache's bits are the same; the attend passes keep 256 threads, which
/// their output split rests on (kernels/attention.cu). Why: a 512-row SmolLM2 chunk's store
/// pass was 1536 blocks of 256 threads at ~100 registers, two an SM, about six waves of one
/// short chain each (12.6 us a layer, BENCH.md issue 30 step 11); at 64 threads an SM holds
/// ten.
pub(in crate::backend::cuda) fn att_store_threads(hd: usize) -> usize {
    if hd >= 256 {
        256
    } else {
        hd.next_multiple_of(32).max(64)
    }
}

/// Head dimension the attention kernel's static shared memory holds (`ATT_MAX_HD`).
pub(super) const ATT_MAX_HD: usize = 512;

/// Largest attention window the kernel's dynamic shared memory holds: the 48 KiB a block may
/// use without opting in, less the static q/k/v head copies, one head more (the RoPE cos/sin
/// the kernel once staged; now spare, kept so the accepted windows stay as they were), the
/// output partials and 64 bytes for `red[12]`.
pub(super) const MAX_ATTN_POS: usize = (48 * 1024 - 4 * ATT_MAX_HD * 4 - 256 * 4 - 64) / 4;

/// The dynamic shared memory a block of `attention_rows` may ask for without an opt-in:
/// 48 KiB less 2 KiB for its static arrays (static and dynamic count against one limit).
const ATT_ROWS_SMEM: usize = 46 * 1024;

/// The staged k tile of `attention_rows`' score pass for heads of 64, 128 and 256
/// (kernels/attention.cu ATR_KS: two buffers of 256 positions x 16 elements, rows 20 floats
/// apart), after the q rows, score rows and partials that ATT_ROWS_SMEM bounds.
const ATT_ROWS_KS: usize = 4 * 2 * 256 * 20;

// Every tile att_rows_tile returns fits what nvrtc.rs opts attention_rows in to.
const _: () = assert!(ATT_ROWS_SMEM + ATT_ROWS_KS <= crate::backend::cuda::nvrtc::ATT_ROWS_OPT_IN);

/// Blocks of `attention_rows` one SM holds at once (256 threads of at most 128 registers:
/// its `__launch_bounds__(256, 2)`; ptxas's count, `scripts/nvrtc-check.py --regs`, 124 with
/// nothing spilled).
const ATT_ROWS_PER_SM: usize = 2;

/// The positions a row of `attention_rows`' scores holds (its `smax`) for windows of up to
/// `max_pos` positions and `r` rows a block: the block's rows store their scores from one
/// origin, the start of the union of their windows (up to `max_pos + r - 1` positions:
/// consecutive slots of one sequence), and the output loop's 16-byte reads of a trip of
/// ATR_VDEPTH positions may run up to ATR_VDEPTH - 1 past that, reading (never adding) the
/// slack; a multiple of 4 keeps every row's scores 16-byte aligned.
pub(in crate::backend::cuda) fn att_rows_smax(max_pos: usize, r: usize) -> usize {
    const ATR_VDEPTH: usize = 16; // kernels/attention.cu
    (max_pos.max(1) + r + ATR_VDEPTH).next_multiple_of(4)
}

/// `attention_rows`' tile for `rows` rows of `n_heads` heads `hd` wide over windows of up to
/// `max_pos` positions, on a GPU of `sms` SMs: (R rows per block, score row length, dynamic
/// shared memory bytes: those plus ATT_ROWS_KS for heads of 64, 128 and 256, whose scores
/// stage k). R is one of 8, 4, 2 whose q rows, score rows and output partials (256 floats a
/// row where 256 / hd groups split the positions, hd <= 128) fit ATT_ROWS_SMEM: the largest
/// whose grid still fills every SM's ATT_ROWS_PER_SM slots, else 2 (the most blocks). Why:
/// a block's rows run one after another inside it, so a grid of fewer blocks than slots
/// leaves SMs idle for the longest block's whole time (Gemma-3's 4 heads over a 512-row
/// chunk: 256 blocks of 8 rows for 264 slots). None when none fits (a long window: the
/// one-row kernel takes the pass), the head is wider than the kernel's two 256-wide d
/// blocks, or there is one row. R changes no arithmetic (kernels/attention.cu).
pub(in crate::backend::cuda) fn att_rows_tile(
    hd: usize,
    max_pos: usize,
    rows: usize,
    n_heads: usize,
    sms: usize,
) -> Option<(usize, usize, usize)> {
    if hd == 0 || hd > 512 || rows < 2 {
        return None;
    }
    let parts = if 256 / hd > 1 { 256 } else { 0 };
    let ks = if matches!(hd, 64 | 128 | 256) {
        ATT_ROWS_KS
    } else {
        0
    };
    let fit = |r: usize| {
        let smax = att_rows_smax(max_pos, r);
        let bytes = 4 * (r * hd + r * smax + r * parts);
        (bytes <= ATT_ROWS_SMEM).then_some((r, smax, bytes + ks))
    };
    let fills = |r: usize| n_heads.saturating_mul(rows.div_ceil(r)) >= ATT_ROWS_PER_SM * sms;
    [8usize, 4]
        .into_iter()
        .filter(|&r| fills(r))
        .find_map(fit)
        .or_else(|| fit(2))
}

/// The arguments every attention launch of one layer and step shares, whichever pass and
/// kernel takes them (`attention` / `attention_early`: ATT_PARAMS, and `attention_rows`, in
/// kernels/attention.cu): built once per layer by `CudaEngine::att_args`, each launch then
/// passes the ones its kernel's signature names, in its order.
struct AttArgs {
    /// The engine's q/k/v scratch (row 0).
    q: u64,
    k: u64,
    v: u64,
    /// Biases (0: none).
    bq: u64,
    bk: u64,
    bv: u64,
    /// q/k head norms (0: none).
    qn: u64,
    kn: u64,
    eps: f32,
    /// The layer's RoPE table and style.
    table: u64,
    style: i32,
    /// The layer's K and V cache.
    kc: u64,
    vc: u64,
    /// The attention output (the engine's att scratch, row 0).
    out: u64,
    /// (n_heads, n_kv_heads, head_dim)
    heads: (i32, i32, i32),
    ctx: i32,
    scale: f32,
    window: i32,
    /// RowPos group 0 of the engine's rowpos buffer.
    rp: u64,
}

impl CudaEngine {
    /// Cache slots row `a` attends to in layer `il` (its attention scores' shared memory).
    pub(super) fn att_window(&self, a: &RowAt, il: usize) -> usize {
        a.slot + 1 - a.from_slot(&self.model, il)
    }

    /// Step 2 of layer `il` (`layer_ops`): q/k/v bias + q/k norm + RoPE + KV store +
    /// attention for `rows` rows, one launch per pass of `order`, its scores' shared memory
    /// as `smem` says; `table` is the layer's RoPE table in `cache`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attention(
        &self,
        s: &GpuStream,
        il: usize,
        lw: &DevLayer,
        rows: usize,
        order: KvOrder,
        one_seq: bool,
        cache: &CudaCache,
        table: &GpuBuf,
        smem: AttSmem,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let c = &self.model.cfg;
        let a = self.att_args(il, lw, cache, table)?;
        // One launch per kv_mode over all the step's rows: a fused pass, or for rows of one
        // sequence a store pass over every row before an attend pass over any (the
        // multi-row law; `KvOrder::Racy`, the fault, fuses them). Why one launch and not one
        // per RowPos group: a 512-row prime chunk took 16 launches per layer (~22 us each on
        // an H200, one block latency apiece) for work that fills the GPU in one or two waves.
        let modes: &[i32] = match order {
            KvOrder::Fused | KvOrder::Racy => &[0],
            KvOrder::StoreFirst => &[1, 2],
        };
        // Shared memory for the scores: the rows' largest window (checked against
        // MAX_ATTN_POS by check_layer), or, captured, the largest any step of this cache can
        // have (ctx positions, or the layer's window), capped at MAX_ATTN_POS (a step beyond
        // it is refused by check_layer before any launch).
        let max_pos = match smem {
            AttSmem::Rows(at) => at.iter().map(|a| self.att_window(a, il)).max().unwrap_or(1),
            AttSmem::Cap => c
                .layer_window(il)
                .unwrap_or(cache.ctx)
                .min(cache.ctx)
                .min(MAX_ATTN_POS),
        };
        for &kv_mode in modes {
            if kv_mode == 2 && rows > 1 && one_seq {
                // The attend pass of one sequence's rows: several rows per block when its
                // shared memory fits (attention_rows; every row the same bits). Rows of
                // several sequences (serve) take the one-row kernel's attend pass.
                if let Some(rt) = att_rows_tile(c.head_dim, max_pos, rows, c.n_heads, self.dx.sms) {
                    self.attention_rows(s, &a, rows, rt, op)?;
                    continue;
                }
            }
            self.attention_one(s, &a, rows, kv_mode, max_pos, op)?;
        }
        Ok(())
    }

    /// The arguments of layer `il`'s attention launches (`AttArgs`): its weights `lw`, its
    /// slice of `cache` and RoPE `table`, the engine's scratch and `rowpos`.
    fn att_args(
        &self,
        il: usize,
        lw: &DevLayer,
        cache: &CudaCache,
        table: &GpuBuf,
    ) -> BResult<AttArgs> {
        let c = &self.model.cfg;
        let li = il - cache.layers.start;
        let hd = c.head_dim;
        let style: i32 = match c.rope_style {
            RopeStyle::Norm => 0,
            RopeStyle::Neox => 1,
        };
        let (nh, nkv, hd_i, ctx_i) = (
            to_i32(c.n_heads, "n_heads")?,
            to_i32(c.n_kv_heads, "n_kv_heads")?,
            to_i32(hd, "head_dim")?,
            to_i32(cache.ctx, "ctx")?,
        );
        let window = window_arg(&self.model, il)?;
        let (qn, kn) = match (&lw.q_norm, &lw.k_norm) {
            (Some(qn), Some(kn)) => (qn.at(0), kn.at(0)),
            _ => (0u64, 0u64),
        };
        let bias = |b: &Option<GpuBuf>| b.as_ref().map_or(0u64, |b| b.at(0));
        let (bq, bk, bv) = (bias(&lw.bq), bias(&lw.bk), bias(&lw.bv));
        let eps = c.rms_eps;
        let (tp, kc, vc) = (table.at(0), cache.k[li].at(0), cache.v[li].at(0));
        let scale = c.attn_scale;
        // Row r of the launch reads RowPos group r / POS_ROWS, entry r % POS_ROWS: the
        // groups lie back to back from group 0 (rowpos_at).
        let rpp = self.rowpos_at(0);
        Ok(AttArgs {
            q: self.q.at(0),
            k: self.k.at(0),
            v: self.v.at(0),
            bq,
            bk,
            bv,
            qn,
            kn,
            eps,
            table: tp,
            style,
            kc,
            vc,
            out: self.att.at(0),
            heads: (nh, nkv, hd_i),
            ctx: ctx_i,
            scale,
            window,
            rp: rpp,
        })
    }

    /// One pass (`kv_mode`: 0 fused, 1 store, 2 attend) of the one-row kernel over `rows`
    /// rows, `max_pos` floats of dynamic shared memory for the scores.
    fn attention_one(
        &self,
        s: &GpuStream,
        a: &AttArgs,
        rows: usize,
        kv_mode: i32,
        max_pos: usize,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let c = &self.model.cfg;
        let (nh, nkv, hd_i) = a.heads;
        // The store pass: one block per kv head (the kernel's block kh is its group's first
        // q head, the one that stores); the other passes: one per q head.
        let heads = if kv_mode == 1 {
            c.n_kv_heads
        } else {
            c.n_heads
        };
        // The store pass: blocks of the head's width, and no score row (it attends to nothing).
        let (threads, score_floats) = if kv_mode == 1 {
            (att_store_threads(c.head_dim), 0)
        } else {
            (256, max_pos)
        };
        let cfg = LaunchConfig {
            grid_dim: (to_u32(heads, "heads")?, to_u32(rows, "attention rows")?, 1),
            block_dim: (to_u32(threads, "attention threads")?, 1, 1),
            shared_mem_bytes: to_u32(4 * score_floats, "attention shared memory")?,
        };
        let f = self
            .dx
            .att_func(att_kernel(heads * rows, self.dx.sms), c.head_dim)?;
        let e0 = self.prof_start(s);
        let mut p = [
            kp(&a.q),
            kp(&a.k),
            kp(&a.v),
            kp(&a.bq),
            kp(&a.bk),
            kp(&a.bv),
            kp(&a.qn),
            kp(&a.kn),
            kp(&a.eps),
            kp(&a.table),
            kp(&a.style),
            kp(&a.kc),
            kp(&a.vc),
            kp(&a.out),
            kp(&nh),
            kp(&nkv),
            kp(&hd_i),
            kp(&a.ctx),
            kp(&a.scale),
            kp(&kv_mode),
            kp(&a.window),
            kp(&a.rp),
        ];
        // SAFETY: attention / attention_early (one signature, ATT_PARAMS in
        // kernels/attention.cu): (const float* q, const float* k, const float* v,
        // const float* bq, const float* bk, const float* bv, const float* qn,
        // const float* kn, float eps, const float* table, int style, float* K, float* V,
        // float* out, int n_heads, int n_kv_heads, int hd, int ctx, float scale,
        // int kv_mode, int window, const RowPos* rp); q/k/v/out point at row 0 of the
        // engine's scratch, which holds max_rows >= rows rows (check_call);
        // bq is 0 or holds q_dim values, bk/bv 0 or kv_dim each (uploaded from the
        // loader-checked bias vectors); qn/kn are 0 or hold hd values each; the table holds
        // 2 * ctx * hd/2 values; rp is group 0 of the engine's rowpos buffer, whose
        // groups r / POS_ROWS set_rowpos filled for every row r < rows (grid.y; rows
        // past a group's n read their q/k/v scratch row, which exists, and exit), every
        // pos < ctx, seq < cache.rows and
        // slot < ctx (check_layer); K/V are this layer's [cache.rows, ctx, kv_dim]
        // buffers; the kernel's window start (its `from`, RowAt::from_slot's value) keeps
        // every row's window inside the dynamic shared memory requested (check_layer
        // and `attention`'s max_pos); hd <= ATT_MAX_HD.
        unsafe { self.dx.launch(s, f, &cfg, &mut p) }
            .map_err(|e| self.err(&format!("{} attention", op()), e))?;
        self.prof_end(s, "attention", e0);
        Ok(())
    }

    /// The attend pass of a step whose rows are one sequence (the store pass over all of
    /// them enqueued before), `R` rows per block (`tile` from att_rows_tile for the launch's
    /// largest window).
    fn attention_rows(
        &self,
        s: &GpuStream,
        a: &AttArgs,
        rows: usize,
        (r, smax, smem): (usize, usize, usize),
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let (nh, nkv, hd) = a.heads;
        let rows_i = to_i32(rows, "attention rows")?;
        let r_i = to_i32(r, "rows per block")?;
        let smax = to_i32(smax, "score row")?;
        let cfg = LaunchConfig {
            grid_dim: (
                to_u32(nh as usize, "heads")?,
                to_u32(rows.div_ceil(r), "row blocks")?,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: to_u32(smem, "attention_rows shared memory")?,
        };
        let f = self.dx.att_func("attention_rows", hd as usize)?;
        let e0 = self.prof_start(s);
        let mut p = [
            kp(&a.q),
            kp(&a.bq),
            kp(&a.qn),
            kp(&a.eps),
            kp(&a.table),
            kp(&a.style),
            kp(&a.kc),
            kp(&a.vc),
            kp(&a.out),
            kp(&nh),
            kp(&nkv),
            kp(&hd),
            kp(&a.ctx),
            kp(&a.scale),
            kp(&a.window),
            kp(&a.rp),
            kp(&rows_i),
            kp(&r_i),
            kp(&smax),
        ];
        // SAFETY: attention_rows(const float* q, const float* bq, const float* qn, float eps,
        // const float* table, int style, const float* K, const float* V, float* out,
        // int n_heads, int n_kv_heads, int hd, int ctx, float scale, int window,
        // const RowPos* rp, int rows, int R, int smax); q/out point at row 0 of the
        // engine's scratch (max_rows >= rows rows, check_call), bq is 0 or holds q_dim
        // values, qn 0 or hd; the table holds 2 * ctx * hd/2 values; rp is group 0 of the
        // engine's rowpos buffer, filled for every row < rows by set_rowpos (every pos <
        // ctx, seq < cache.rows, slot < ctx: check_layer; one sequence: `attention` runs
        // this kernel only where CudaEngine::one_seq holds);
        // K/V are the layer's [cache.rows, ctx, kv_dim] buffers; the dynamic shared memory
        // (<= 46 KiB, plus the static arrays: no opt-in needed) holds R * hd + R * smax
        // floats, and R * 256 more where hd <= 128, with smax >= every row's window
        // (att_rows_tile of the launch's largest), R <= 8 and hd <= 512 (ATR_MAX_R and the
        // kernel's two d blocks).
        unsafe { self.dx.launch(s, f, &cfg, &mut p) }
            .map_err(|e| self.err(&format!("{} attention rows", op()), e))?;
        self.prof_end(s, "attention rows", e0);
        Ok(())
    }

    /// Enqueues the rows' positions into `rowpos`, one `rowpos_set` per POS_ROWS rows, each
    /// launched without programmatic dependent launch: it starts after every earlier
    /// operation of `s` completed, so the previous step's attention launches have read
    /// their positions (write after read); the attention launches after it read them only
    /// after their pdl_wait (read after write). Rows are checked (`check_call`).
    pub(super) fn set_rowpos(
        &self,
        s: &GpuStream,
        at: &[RowAt],
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let f = self.dx.func("rowpos_set")?;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        for (g, c0) in (0..at.len()).step_by(POS_ROWS).enumerate() {
            let cn = (at.len() - c0).min(POS_ROWS);
            let mut rp = RowPos {
                n: cn as u32,
                pos: [0; POS_ROWS],
                slot: [0; POS_ROWS],
                seq: [0; POS_ROWS],
            };
            for (r, a) in at[c0..c0 + cn].iter().enumerate() {
                rp.pos[r] = to_u32(a.pos, "position")?;
                rp.slot[r] = to_u32(a.slot, "cache slot")?;
                rp.seq[r] = to_u32(a.seq, "sequence")?;
            }
            let dst = self.rowpos_at(g);
            let mut p = [kp(&dst), kp(&rp)];
            // SAFETY: rowpos_set(RowPos* dst, RowPos v); RowPos is laid out as the CUDA
            // struct; dst is group g of the engine's rowpos buffer, which holds
            // max_rows / POS_ROWS (rounded up) groups, and g < that since at.len() <=
            // max_rows (check_call).
            unsafe { self.dx.launch_with(s, f, &cfg, &mut p, false) }
                .map_err(|e| self.err(&format!("{} row positions", op()), e))?;
        }
        Ok(())
    }

    /// Device address of RowPos group `g` in `rowpos`.
    fn rowpos_at(&self, g: usize) -> u64 {
        self.rowpos.at(0) + (g * std::mem::size_of::<RowPos>()) as u64
    }
}
