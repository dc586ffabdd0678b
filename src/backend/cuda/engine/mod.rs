//! The CUDA engine (one per stage) and KV cache: weights on the stage's device (GGUF block
//! bytes, or for the vectorized matvec the same values repacked by crate::quant::repack),
//! engine-owned scratch, and kernel launches on the stream handed in.
//!
//! Rule that holds here: the engine never owns or picks a stream — every upload at build
//! and every kernel of embed/layer/head goes on the stream the caller passes, so a stage has
//! exactly one stream. Its scratch (x, q, k, v, att, o, h, xn) belongs to it alone. The kernels
//! are batch-invariant (each row's arithmetic is the single-row arithmetic; B only adds
//! rows to a tile or grid rows) and reduce in fixed orders chosen from vector lengths and
//! matrix shapes alone (kernels/*.cu say which).
//!
//! Launches per layer: llama, qwen2, qwen3 5 (norm+q|k|v, attention with the q/k/v biases,
//! q/k head norms, rope and kv store fused in, o-proj+residual, norm+gate|up+act,
//! down+residual); gemma3 5 as well in a one-row step whose matvecs are vectorized (each
//! post-norm add folded into the next launch's prologue: the attention one into gate|up,
//! the FFN one into the next layer's q|k|v, the walk's last layer adding for itself; the
//! residual moves x -> x2 -> x), else 7 (the post-norms a separate norm+add after o-proj
//! and down); one more where q|k|v mix block formats (one launch per format), and one more
//! before a vectorized matvec whose input tile is too large to stage in shared memory
//! (stage_rows). Head: 1 (norm + output matvec). Embed: 1. Matrices whose rows are at least
//! MVQ_MIN_IN wide in a vectorized format (`vectorized`) take kernels/mvq.cu, the rest the
//! byte-wise kernels/matvec.cu; the choice is the matrix's alone, never the batch's. With
//! `--mma on`, Q4_K and Q6_K matrices of whole 16-row tiles and super-blocks (and
//! Q8_0/Q4_0/Q4_1/Q5_0 ones of whole blocks of 32; `--mma auto`: see `MmaMode::select`) take
//! kernels/mma.cu instead (one fused decode launch for a one-row op whose format fuses (not
//! Q4_K: `mma_fuses`) and whose row fits its shared memory, else two: mma_prep, then the
//! decode kernel or the GEMM; `mma_launch`). Every
//! launch goes through `DevCtx::launch` (programmatic dependent launch on sm_90+, see there).
//! A stage's layer walk (`layers`) is, with `--graphs on`, captured once per (layers, rows,
//! store order, cache) as a CUDA graph and replayed each step; the rows' positions, the only
//! per-step data, reach attention through the engine's `rowpos` buffer on both paths.
//!
//! Files, as kernels/*.cu are split: this one holds the engine (its build, checks and
//! scratch), the layer walk `layer_ops` (top to bottom: norm+q|k|v, attention, o-proj,
//! norm+gate|up, down) and the `Engine` impl; `attention` (positions, attention arguments
//! and passes), `matvec` (kernel choice, geometry, launches), `mma` (tensor-core geometry
//! and launch), `weights` (device weights), `cache` (the KV cache), `graph` (capture and
//! replay).
//!
//! Measured on H200s (receipts/README.md indexes each folder): graphs and programmatic
//! dependent launch change no bit (`--graphs off`, `--pdl off` and the builds before them give
//! the same logits hashes: receipts/same-bits-cuda); graphs cut SmolLM2's host enqueue from
//! 466 to 28 us a token (receipts/trace-cuda); the fused one-row mma decode changes no bit and
//! buys eager +16 % / +6 % on the SmolLM2 / Gemma-3 shapes, slower at B = 8, hence one row
//! only (receipts/mma-fused-decode, `mma::MMA_FUSE_MAX_ROWS`); the tensor-core path's gates,
//! `mma-row-order` control and accuracy per format (receipts/mma-tensor-cores, and on the 8B
//! shape receipts/mma-q4k-8b); the figures beside llama.cpp are in BENCH.md.

mod args;
mod attention;
mod cache;
mod graph;
mod matvec;
mod mma;
mod weights;

#[cfg(test)]
pub(super) use args::{mv_args_bytes, mv_args_prefix_bytes};
#[cfg(test)]
pub(super) use attention::{
    att_kernel, att_rows_smax, att_rows_tile, att_store_threads, from_slot_in_kernel, row_pos_bytes,
};
use attention::{AttSmem, ATT_MAX_HD, MAX_ATTN_POS, POS_ROWS, ROWPOS_WORDS};
pub use cache::CudaCache;
use graph::{Graph, GraphKey};
pub(super) use matvec::fmt_of;
#[cfg(test)]
pub(super) use matvec::{
    kind_of, launch_groups, mix_of, mv_kind, mvq_blocks_per_sm, mvq_dense, mvq_rows_per_warp,
    mvq_smem, pre_fuses, pre_kind, row_tiles, tiles_up_to, warps_per_feature, MVD_ROWS,
    MVQ_PRE_MAX,
};
use matvec::{modules_needed, MatKind, PreAdd};
use mma::MmaScratch;
#[cfg(test)]
pub(super) use mma::{
    mma_decode_kernel, mma_fused_smem, mma_gemm_narrow, mma_gemm_warps_n, mma_gemm_wg,
    mma_mix_split, MMA_DECODE_MAX, MMA_FUSE_UNIT, MMA_WG_PICK_MT,
};
use weights::{upload_f32, DevLayer, DevWeight};
#[cfg(test)]
pub(super) use weights::{vectorized, MVQ_MIN_IN};

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use std::ffi::c_void;

use cudarc::driver::{sys, CudaEvent, LaunchConfig};

use super::mem::{check_range, GpuBuf};
use super::{alloc_zeroed_on, op_err, DevCtx, GpuStream, MmaSel};
use crate::backend::{BResult, Engine, EngineSpec, Residency};
use crate::model::{Config, KvOrder, Model, RowAt};

/// A kernel parameter for `DevCtx::launch`: a pointer to the argument's value (the driver
/// copies the value at the launch). MvArgs, MvMat and RowPos are #[repr(C)] plain old data
/// with exactly the layouts of their structs in kernels/*.cu (pointers are 64-bit).
fn kp<T>(v: &T) -> *mut c_void {
    v as *const T as *mut c_void
}

const MODE_STORE: i32 = 0;
const MODE_ADD: i32 = 1;
const MODE_GATE_UP: i32 = 2;

/// Threads of an add_residual block, one block per row (`ADD_THREADS` in kernels/norm.cu,
/// which its launch bounds and the sum's warp 0 assume).
const ADD_THREADS: u32 = 256;

fn to_i32(v: usize, what: &str) -> BResult<i32> {
    i32::try_from(v).map_err(|_| op_err(format!("{what} = {v} does not fit a kernel int")))
}

fn to_u32(v: usize, what: &str) -> BResult<u32> {
    u32::try_from(v).map_err(|_| op_err(format!("{what} = {v} does not fit a grid dimension")))
}

/// One profiled launch: its kind and the events recorded around it.
type ProfSpan = (&'static str, CudaEvent, CudaEvent);

pub struct CudaEngine {
    dx: Arc<DevCtx>,
    model: Arc<Model>,
    spec: EngineSpec,
    layers: Vec<DevLayer>,
    embd: Option<DevWeight>,
    out_norm: Option<GpuBuf>,
    output: Option<DevWeight>,
    x: GpuBuf,
    /// The residual's second home (gemma3: the post-norm adds move it x -> x2 -> x within a
    /// layer, `layer_ops`); one float for models without post-norms.
    x2: GpuBuf,
    q: GpuBuf,
    k: GpuBuf,
    v: GpuBuf,
    att: GpuBuf,
    o: GpuBuf,
    h: GpuBuf,
    /// Input rows of a vectorized matvec whose tile does not stage in shared memory, laid
    /// out (and normalized) by stage_rows: max_rows x xn_width.
    xn: GpuBuf,
    xn_width: usize,
    /// `--mma on` with a matrix in the tensor-core layout: mma_prep's output for any launch
    /// (MmaScratch), sized for max_rows rounded up to 8 columns and the widest input.
    mma: Option<MmaScratch>,
    /// The step's RowPos groups (ROWPOS_WORDS u32 each, max_rows / POS_ROWS rounded up).
    rowpos: GpuBuf,
    /// Layer walks replay CUDA graphs (`--graphs on`, and no PPN_CUDA_PROF).
    use_graphs: bool,
    /// The captured layer walks (`layers`), destroyed with the engine.
    graphs: Mutex<HashMap<GraphKey, Graph>>,
    /// With PPN_CUDA_PROF set: GPU timing events around each launch, by kernel kind,
    /// summed and printed when the engine is dropped (a diagnostic; it adds event records
    /// on the engine's own stream only).
    prof: Option<Mutex<Vec<ProfSpan>>>,
}

/// What the kernels hold, checked once when a stage's engine is built (not per layer and
/// step), so that a model they cannot run is refused before any byte is uploaded or the
/// reference decodes a step: the attention kernel's head (even, at most ATT_MAX_HD, whole
/// groups of heads a kv head) and the matvec kernels' widths, walked in whole 32-element
/// chunks (mv_args checks each launch's too).
pub(crate) fn cuda_can_run(c: &Config) -> Result<(), String> {
    let hd = c.head_dim;
    if hd > ATT_MAX_HD || !hd.is_multiple_of(2) || !c.n_heads.is_multiple_of(c.n_kv_heads) {
        return Err(format!(
            "head_dim {hd} (must be even and <= {ATT_MAX_HD}) or heads {}/{} unsupported",
            c.n_heads, c.n_kv_heads
        ));
    }
    for (what, n) in [
        ("n_embd", c.n_embd),
        ("n_heads x head_dim", c.n_heads * hd),
        ("n_ff", c.n_ff),
    ] {
        if !n.is_multiple_of(32) {
            return Err(format!(
                "its {what} = {n} is not a multiple of 32 (the matvec kernels walk a matrix's \
                 width in 32-element chunks)"
            ));
        }
    }
    Ok(())
}

impl CudaEngine {
    /// The engine's weights and scratch by measured device (see `Residency`).
    pub(super) fn residency(&self, r: &mut Residency) -> BResult<()> {
        for l in &self.layers {
            for w in [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down] {
                w.raw.tally(&mut r.weights)?;
            }
        }
        for w in self.embd.iter().chain(&self.output) {
            w.raw.tally(&mut r.weights)?;
        }
        for l in &self.layers {
            let norms = [
                &l.bq,
                &l.bk,
                &l.bv,
                &l.q_norm,
                &l.k_norm,
                &l.post_attn_norm,
                &l.post_ffn_norm,
            ];
            for b in [&l.attn_norm, &l.ffn_norm]
                .into_iter()
                .chain(norms.into_iter().flatten())
            {
                b.raw.tally(&mut r.weights)?;
            }
        }
        if let Some(b) = &self.out_norm {
            b.raw.tally(&mut r.weights)?;
        }
        for b in [
            &self.x,
            &self.x2,
            &self.q,
            &self.k,
            &self.v,
            &self.att,
            &self.o,
            &self.h,
            &self.xn,
            &self.rowpos,
        ] {
            b.raw.tally(&mut r.scratch)?;
        }
        if let Some(m) = &self.mma {
            m.buf.raw.tally(&mut r.scratch)?;
        }
        Ok(())
    }

    pub(super) fn new(
        dx: &Arc<DevCtx>,
        model: &Arc<Model>,
        spec: EngineSpec,
        s: &GpuStream,
        graphs: bool,
        mma: MmaSel,
        prepare_rows: usize,
    ) -> BResult<CudaEngine> {
        if s.device() != dx.dev {
            return Err(op_err(format!(
                "stage {} engine on device {}: build stream {} is on device {}",
                spec.stage,
                dx.dev,
                s.label(),
                s.device()
            )));
        }
        let c = &model.cfg;
        if spec.layers.end > c.n_layers {
            return Err(op_err(format!(
                "stage {} engine: layers {:?} beyond the model's {}",
                spec.stage, spec.layers, c.n_layers
            )));
        }
        cuda_can_run(c).map_err(|e| {
            op_err(format!(
                "device {} stage {} engine: the cuda backend cannot run this model: {e}",
                dx.dev, spec.stage
            ))
        })?;
        let mut layers = Vec::with_capacity(spec.layers.len());
        for il in spec.layers.clone() {
            layers.push(DevLayer::upload(dx, &model.layers[il], s, mma)?);
        }
        let embd = if spec.embed {
            // The embedding is read row by row (embed_rows), in the file's layout.
            Some(DevWeight::upload(dx, &model.tok_embd, s, false, false)?)
        } else {
            None
        };
        let (out_norm, output) = if spec.head {
            (
                Some(upload_f32(dx, &model.out_norm, s)?),
                Some(DevWeight::upload_mv(dx, &model.output, s, mma)?),
            )
        } else {
            (None, None)
        };
        // The matvec modules this engine's launches need (see `mv`): compiled now, once per
        // device, so no launch compiles.
        // (Matrices in the tensor-core layout run the mma module instead: see `mv`.)
        // The tiles up to `prepare_rows` (the run's largest step, >= this engine's max_rows):
        // a cold start's first engine builds the later engines' modules in the same round.
        let (need, mma_formats) = modules_needed(&layers, output.as_ref(), prepare_rows);
        let mma_kernels = if mma_formats.is_empty() {
            Vec::new()
        } else {
            crate::backend::cuda::mma::mma_kernels_for(&mma_formats, dx.mma_wg())
        };
        dx.prepare_modules(
            &need,
            &mma_kernels,
            &crate::backend::cuda::nvrtc::att_modules_for(c.head_dim),
        )
        .map_err(|e| op_err(format!("stage {} engine: {e}", spec.stage)))?;
        let r = spec.max_rows;
        // stage_rows lays out the input of any matvec: x (n_embd), att (q_dim) or h (n_ff).
        let xn_width = c.n_embd.max(c.n_ff).max(c.q_dim());
        let mk = |n: usize| -> BResult<GpuBuf> {
            let len = r
                .checked_mul(n)
                .ok_or_else(|| op_err(format!("scratch of {r} x {n} overflows")))?;
            alloc_zeroed_on(dx, len, s)
        };
        let x2 = if layers.iter().any(|l| l.post_attn_norm.is_some()) {
            mk(c.n_embd)?
        } else {
            alloc_zeroed_on(dx, 1, s)?
        };
        Ok(CudaEngine {
            dx: dx.clone(),
            model: model.clone(),
            layers,
            embd,
            out_norm,
            output,
            x: mk(c.n_embd)?,
            x2,
            q: mk(c.q_dim())?,
            k: mk(c.kv_dim())?,
            v: mk(c.kv_dim())?,
            att: mk(c.q_dim())?,
            o: mk(c.n_embd)?,
            h: mk(c.n_ff)?,
            xn: mk(xn_width)?,
            xn_width,
            mma: if !mma_formats.is_empty() {
                Some(MmaScratch::new(dx, r, xn_width, s)?)
            } else {
                None
            },
            rowpos: alloc_zeroed_on(dx, r.div_ceil(POS_ROWS) * ROWPOS_WORDS, s)?,
            use_graphs: graphs && !super::prof_enabled(),
            graphs: Mutex::new(HashMap::new()),
            prof: super::prof_enabled().then(|| Mutex::new(Vec::new())),
            spec,
        })
    }

    /// Profiling only: a timing event recorded on `s` before a launch.
    fn prof_start(&self, s: &GpuStream) -> Option<CudaEvent> {
        self.prof.as_ref()?;
        let ev = self
            .dx
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .ok()?;
        ev.record(&s.s).ok()?;
        Some(ev)
    }

    /// Profiling only: the op of a matvec launch as PPN_CUDA_PROF files it, from what the
    /// launch knows (its mode, matrices and norm), one rule for the FFMA and the tensor-core
    /// families: an index into their label tables (matvec.rs MV_PROF, mma.rs MMA_PROF):
    /// 0 gate|up, 1 +residual, 2 q|k|v (or a part of it of two matrices), 3 a normed lone
    /// matrix (the head; also a Q4_K_M file's Q6_K v, launched apart), 4 any other store.
    fn prof_op(mode: i32, n_mats: usize, norm: bool) -> usize {
        match (mode, n_mats, norm) {
            (MODE_GATE_UP, _, _) => 0,
            (MODE_ADD, _, _) => 1,
            (_, 2.., _) => 2,
            (_, _, true) => 3,
            _ => 4,
        }
    }

    /// Profiling only: the matching event after the launch, filed under `kind`.
    fn prof_end(&self, s: &GpuStream, kind: &'static str, e0: Option<CudaEvent>) {
        let (Some(p), Some(e0)) = (&self.prof, e0) else {
            return;
        };
        let e1 = self
            .dx
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        if let (Ok(e1), Ok(mut v)) = (e1, p.lock()) {
            if e1.record(&s.s).is_ok() {
                v.push((kind, e0, e1));
            }
        }
    }

    fn err(&self, op: &str, e: impl std::fmt::Display) -> crate::backend::BackendError {
        op_err(format!(
            "device {} stage {} {op}: {e}",
            self.dx.dev, self.spec.stage
        ))
    }

    /// Checks an engine call's stream and rows, then (with --jitter-us) delays the stream.
    fn check(&self, s: &GpuStream, rows: usize, op: &str) -> BResult<()> {
        self.check_call(s, rows, &|| op.to_string())?;
        s.jitter()
    }

    /// Checks an engine call's stream and rows (`op` names the call, formatted on the error
    /// path only: `layers` runs every step).
    fn check_call(&self, s: &GpuStream, rows: usize, op: &dyn Fn() -> String) -> BResult<()> {
        if rows == 0 || rows > self.spec.max_rows {
            return Err(self.err(
                &op(),
                format!(
                    "{rows} rows, engine scratch holds 1..={}",
                    self.spec.max_rows
                ),
            ));
        }
        if s.device() != self.dx.dev {
            return Err(self.err(
                &op(),
                format!(
                    "stream {} is on device {}, the engine's weights on device {}",
                    s.label(),
                    s.device(),
                    self.dx.dev
                ),
            ));
        }
        Ok(())
    }

    /// The checks of layer `il` for rows `at` that need no stream: the layer in the engine's
    /// and the cache's ranges, the cache made for this engine, every row inside the cache
    /// and every row's window within what the attention kernel's shared memory holds.
    fn check_layer(&self, il: usize, at: &[RowAt], cache: &CudaCache) -> BResult<()> {
        let op = || format!("layer {il}");
        if !self.spec.layers.contains(&il) || !cache.layers.contains(&il) {
            return Err(self.err(
                &op(),
                format!(
                    "outside engine layers {:?} / cache layers {:?}",
                    self.spec.layers, cache.layers
                ),
            ));
        }
        if cache.dev != self.dx.dev || cache.kv_dim != self.model.cfg.kv_dim() {
            return Err(self.err(
                &op(),
                format!(
                    "cache (device {}, kv_dim {}) does not fit this engine (device {}, kv_dim {})",
                    cache.dev,
                    cache.kv_dim,
                    self.dx.dev,
                    self.model.cfg.kv_dim()
                ),
            ));
        }
        if let Some(a) = at
            .iter()
            .find(|a| a.seq >= cache.rows || a.slot >= cache.ctx || a.pos >= cache.ctx)
        {
            return Err(self.err(
                &op(),
                format!(
                    "row at position {} sequence {} slot {} outside the cache ({} sequences x {} slots)",
                    a.pos, a.seq, a.slot, cache.rows, cache.ctx
                ),
            ));
        }
        let max_pos = at.iter().map(|a| self.att_window(a, il)).max().unwrap_or(0);
        if max_pos > MAX_ATTN_POS {
            return Err(self.err(
                &op(),
                format!(
                    "attention window of {max_pos} positions exceeds the kernel's {MAX_ATTN_POS}"
                ),
            ));
        }
        Ok(())
    }

    /// Whether a step's rows are all one sequence (a prime chunk, a verify round): only
    /// then may a store-first attend pass run attention_rows, which reads one sequence's
    /// cache for a block of rows. A store-first step of several sequences (the serve arm's
    /// mixed steps) attends one row per block (`attention`, each row its own sequence).
    fn one_seq(at: &[RowAt]) -> bool {
        at.iter().all(|a| a.seq == at[0].seq)
    }

    /// How layer `il` of the walk over `range` hands gemma3's post-FFN add on (`layer_ops`'s
    /// `carry`): (whether the layer before left its add pending, whether this one leaves
    /// its own). Inside one walk a layer's post-FFN add folds into the next layer's q|k|v
    /// prologue; the walk's last layer adds for itself, so `x` holds every layer's result
    /// when a walk ends (`Engine::layers`), as after every `layer`. A function of the range
    /// alone: the launches eager and the captured ones are the same.
    fn walk_carry(&self, range: &Range<usize>, il: usize) -> (bool, bool) {
        let post = |l: usize| {
            l >= self.spec.layers.start
                && self
                    .layers
                    .get(l - self.spec.layers.start)
                    .is_some_and(|lw| lw.post_ffn_norm.is_some() && lw.post_attn_norm.is_some())
        };
        let carry_in = il > range.start && post(il - 1) && post(il);
        let leave = il + 1 < range.end && post(il) && post(il + 1);
        (carry_in, leave)
    }

    /// The launches of layer `il` for `rows` rows (checked by `check_layer`, positions in
    /// `rowpos`): the same kernels and arguments whether they run now or are captured.
    /// `carry` (`walk_carry`): whether the residual comes in as `x2 + post_ffn_norm(o)` of
    /// the layer before (its add pending), and whether this layer leaves its own so.
    #[allow(clippy::too_many_arguments)]
    fn layer_ops(
        &self,
        s: &GpuStream,
        il: usize,
        rows: usize,
        order: KvOrder,
        one_seq: bool,
        cache: &CudaCache,
        smem: AttSmem,
        (carry_in, leave): (bool, bool),
    ) -> BResult<()> {
        // The layer's name, formatted on error paths only (graphs off: every step).
        let op = || format!("layer {il}");
        let c = &self.model.cfg;
        let lw = &self.layers[il - self.spec.layers.start];
        let base = c.layer_rope_base(il).to_bits();
        let table = cache
            .rope
            .iter()
            .find(|(b, _)| *b == base)
            .map(|(_, t)| t)
            .ok_or_else(|| self.err(&op(), "no RoPE table for this layer's base"))?;

        // gemma3's post-norm adds move the residual between x and x2 (each add reads one
        // and writes the other: a one-row launch that folds the add in reads its base in
        // every block while block (0, 0) writes the sum): x -> x2 after attention, x2 -> x
        // after the FFN, so a layer ends in x. An add pending from the layer before (its
        // post-FFN add, `carry_in`) folds into this layer's q|k|v.
        let (x, x2, q, k, v, att, o, h) = (
            self.x.at(0),
            self.x2.at(0),
            self.q.at(0),
            self.k.at(0),
            self.v.at(0),
            self.att.at(0),
            self.o.at(0),
            self.h.at(0),
        );
        let pending = if carry_in {
            let prev = &self.layers[il - 1 - self.spec.layers.start];
            let w = prev.post_ffn_norm.as_ref().ok_or_else(|| {
                self.err(&op(), "a pending post-FFN add from a layer without one")
            })?;
            Some(PreAdd {
                base: x2,
                w,
                out: x,
            })
        } else {
            None
        };

        // 1. attn_norm + q|k|v in one launch (the pending add in its prologue).
        self.mv_pre(
            s,
            &[(&lw.wq, q), (&lw.wk, k), (&lw.wv, v)],
            x,
            pending,
            Some(&lw.attn_norm),
            rows,
            MODE_STORE,
            &|| format!("{} attn_norm+qkv", op()),
        )?;

        // 2. q/k/v bias + q/k norm + RoPE + KV store + attention, one launch per pass.
        self.attention(s, il, lw, rows, order, one_seq, cache, table, smem, &op)?;

        // 3. o-proj; llama adds into x in the epilogue, gemma3 post-norms first: the add
        // x2 = x + post_attn_norm(o) goes with the gate|up launch below.
        let attn_add = match &lw.post_attn_norm {
            None => {
                self.mv(s, &[(&lw.wo, x)], att, None, rows, MODE_ADD, &|| {
                    format!("{} attn_output+residual", op())
                })?;
                None
            }
            Some(pn) => {
                self.mv(s, &[(&lw.wo, o)], att, None, rows, MODE_STORE, &|| {
                    format!("{} attn_output", op())
                })?;
                Some(PreAdd {
                    base: x,
                    w: pn,
                    out: x2,
                })
            }
        };
        // Where the residual is from here on.
        let res = if attn_add.is_some() { x2 } else { x };

        // 4. ffn_norm + gate|up + activation in one launch (gemma3's attention add in its
        // prologue).
        self.mv_pre(
            s,
            &[(&lw.gate, h), (&lw.up, 0)],
            x,
            attn_add,
            Some(&lw.ffn_norm),
            rows,
            MODE_GATE_UP,
            &|| format!("{} ffn_norm+gate+up", op()),
        )?;

        // 5. down; residual as for the o-proj: gemma3's x = x2 + post_ffn_norm(o) here, or
        // (`leave`) in the next layer's q|k|v.
        match &lw.post_ffn_norm {
            None if res == x => self.mv(s, &[(&lw.down, x)], h, None, rows, MODE_ADD, &|| {
                format!("{} ffn_down+residual", op())
            }),
            Some(pn) if res == x2 => {
                self.mv(s, &[(&lw.down, o)], h, None, rows, MODE_STORE, &|| {
                    format!("{} ffn_down", op())
                })?;
                if leave {
                    return Ok(());
                }
                self.add_residual(s, Some(pn), rows, x, x2, &|| {
                    format!("{} ffn residual", op())
                })
            }
            // The model loader gives a layer both post-norms or neither (gemma3).
            _ => Err(self.err(&op(), "one post-norm without the other")),
        }
    }

    /// y = base + post_norm(o) (or base + o when `w` is None), rows of n_embd, `y` and `base`
    /// distinct engine scratch (x and x2): one block of ADD_THREADS per row.
    #[allow(clippy::too_many_arguments)]
    fn add_residual(
        &self,
        s: &GpuStream,
        w: Option<&GpuBuf>,
        rows: usize,
        y: u64,
        base: u64,
        op: &dyn Fn() -> String,
    ) -> BResult<()> {
        let c = &self.model.cfg;
        let n = to_i32(c.n_embd, "n_embd")?;
        let r = to_i32(rows, "rows")?;
        let (wp, has) = match w {
            Some(w) => (w.at(0), 1i32),
            None => (0u64, 0i32),
        };
        if y == base {
            return Err(self.err(&op(), "post-norm add in place"));
        }
        let o = self.o.at(0);
        let eps = c.rms_eps;
        let cfg = LaunchConfig {
            grid_dim: (to_u32(rows, "add blocks")?, 1, 1),
            block_dim: (ADD_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.dx.func("add_residual")?;
        let e0 = self.prof_start(s);
        let mut p = [
            kp(&y),
            kp(&base),
            kp(&o),
            kp(&wp),
            kp(&r),
            kp(&n),
            kp(&eps),
            kp(&has),
        ];
        // SAFETY: add_residual(float* y, const float* x, const float* o, const float* w,
        // int rows, int n, float eps, int has_norm), blocks of ADD_THREADS (its launch
        // bounds); y, x (base) and o are three distinct engine scratch buffers (the kernel's
        // __restrict__: y != base checked above, o is neither x nor x2) of max_rows x n_embd
        // (rows checked), w is read only when has_norm = 1 and then holds n_embd values.
        unsafe { self.dx.launch(s, f, &cfg, &mut p) }.map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, "post-norm+add", e0);
        Ok(())
    }
}

impl Engine<super::CudaBackend> for CudaEngine {
    fn spec(&self) -> &EngineSpec {
        &self.spec
    }

    fn x(&self) -> &GpuBuf {
        &self.x
    }

    fn embed(&self, s: &GpuStream, input: &GpuBuf, rows: usize) -> BResult<()> {
        self.check(s, rows, "embed")?;
        let Some(e) = &self.embd else {
            return Err(self.err("embed", "this stage does not hold the embedding"));
        };
        check_range("embed token ids", input, 0, rows).map_err(|e| self.err("embed", e))?;
        if input.device() != Some(self.dx.dev) {
            return Err(self.err("embed", "token ids are not on the engine's device"));
        }
        let c = &self.model.cfg;
        let fmt = fmt_of(e.ty);
        let n = to_i32(c.n_embd, "n_embd")?;
        let vocab = to_i32(e.rows, "vocab")?;
        let row_bytes = e.row_bytes as u64;
        let scale = c.embed_scale;
        let (tp, ip, xp) = (e.raw.ptr(), input.at(0), self.x.at(0));
        let cfg = LaunchConfig {
            grid_dim: (to_u32(rows, "rows")?, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.dx.func("embed_rows")?;
        let mut p = [
            kp(&tp),
            kp(&row_bytes),
            kp(&fmt),
            kp(&n),
            kp(&vocab),
            kp(&scale),
            kp(&ip),
            kp(&xp),
        ];
        // SAFETY: embed_rows(const u8* table, u64 row_bytes, int fmt, int n_embd, int vocab,
        // float scale, const float* ids, float* x); the table holds `vocab` rows of
        // row_bytes bytes of format `fmt`; ids holds >= rows values (checked); x is the
        // engine's [max_rows, n_embd] residual (rows checked). Bad ids are clamped in-kernel.
        unsafe { self.dx.launch(s, f, &cfg, &mut p) }.map_err(|e| self.err("embed", e))?;
        Ok(())
    }

    fn layer(
        &self,
        s: &GpuStream,
        il: usize,
        at: &[RowAt],
        order: KvOrder,
        cache: &CudaCache,
    ) -> BResult<()> {
        let op = format!("layer {il}");
        self.check(s, at.len(), &op)?;
        self.check_layer(il, at, cache)?;
        self.set_rowpos(s, at, &|| op.clone())?;
        let one = Self::one_seq(at);
        // A lone layer leaves x final: no add is carried in or out.
        self.layer_ops(
            s,
            il,
            at.len(),
            order,
            one,
            cache,
            AttSmem::Rows(at),
            (false, false),
        )
    }

    /// The stage's layer walk: the rows' positions into `rowpos` (one `rowpos_set` per
    /// POS_ROWS rows), then the layers, as launches (graphs off) or as one replay of the walk
    /// captured for this (layers, rows, order, cache) on first use. The same kernels run
    /// with the same arguments either way (the captured attention launches only ask for the
    /// largest window the cache allows as shared memory, which changes no arithmetic), so
    /// graphs on and off give the same bits.
    fn layers(
        &self,
        s: &GpuStream,
        range: Range<usize>,
        at: &[RowAt],
        order: KvOrder,
        cache: &CudaCache,
    ) -> BResult<()> {
        let rows = at.len();
        let walk_op = || format!("layers {range:?}");
        self.check_call(s, rows, &walk_op)?;
        if range.is_empty() {
            return Ok(());
        }
        for il in range.clone() {
            self.check_layer(il, at, cache)?;
        }
        if !self.use_graphs {
            self.set_rowpos(s, at, &walk_op)?;
            for il in range.clone() {
                // --jitter-us: one spin before each layer, as `layer` enqueues it.
                s.jitter()?;
                let one = Self::one_seq(at);
                let carry = self.walk_carry(&range, il);
                self.layer_ops(s, il, rows, order, one, cache, AttSmem::Rows(at), carry)?;
            }
            return Ok(());
        }
        self.replay(s, range, at, order, cache)
    }

    fn head(&self, s: &GpuStream, first: usize, rows: usize, logits: &GpuBuf) -> BResult<()> {
        self.check(s, first + rows, "head")?;
        let (Some(norm), Some(out)) = (&self.out_norm, &self.output) else {
            return Err(self.err("head", "this stage does not hold the output head"));
        };
        check_range("head logits", logits, 0, rows * out.rows).map_err(|e| self.err("head", e))?;
        if logits.device() != Some(self.dx.dev) {
            return Err(self.err("head", "logits buffer is not on the engine's device"));
        }
        self.mv(
            s,
            &[(out, logits.at(0))],
            // x holds max_rows >= first + rows rows of n_embd (check above).
            self.x.at(0) + (4 * first * self.model.cfg.n_embd) as u64,
            Some(norm),
            rows,
            MODE_STORE,
            &|| "head output_norm+output".to_string(),
        )
    }
}

impl Drop for CudaEngine {
    fn drop(&mut self) {
        let Some(p) = &self.prof else {
            return;
        };
        let Ok(v) = p.lock() else {
            return;
        };
        let mut by: Vec<(&'static str, usize, f64)> = Vec::new();
        for (kind, e0, e1) in v.iter() {
            let ms = e0.elapsed_ms(e1).map_or(f64::NAN, f64::from);
            match by.iter_mut().find(|(k, _, _)| k == kind) {
                Some(b) => {
                    b.1 += 1;
                    b.2 += ms;
                }
                None => by.push((kind, 1, ms)),
            }
        }
        for (kind, n, ms) in by {
            errln!(
                "cuda prof stage {}: {kind:<22} {n:>7} launches {ms:>9.3} ms  {:>7.2} us each",
                self.spec.stage,
                1e3 * ms / n as f64
            );
        }
    }
}
