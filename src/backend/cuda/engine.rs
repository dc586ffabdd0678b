//! The CUDA engine (one per stage) and KV cache: weights as raw GGUF block bytes on the
//! stage's device, engine-owned scratch, and kernel launches on the stream handed in.
//!
//! Rule that holds here: the engine never owns or picks a stream — every upload at build
//! and every kernel of embed/layer/head goes on the stream the caller passes, so a stage has
//! exactly one stream. Its scratch (x, xn, q, k, v, att, o, g, u) belongs to it alone. The
//! kernels are batch-invariant (each row's arithmetic is the single-row arithmetic; B only
//! adds grid rows) and reduce in fixed orders that match crate::math / crate::quant::dot.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};

use super::mem::{check_range, GpuBuf, Raw};
use super::{alloc_zeroed_on, op_err, upload_raw, upload_slice, DevCtx, GpuStream};
use crate::backend::{BResult, Engine, EngineSpec};
use crate::math::{rope_table, RopeStyle};
use crate::model::{Activation, Model, Weight};
use crate::quant::GgmlType;

/// Rows per position-dependent launch (`POS_ROWS` in kernels/common.cu).
const POS_ROWS: usize = 64;

/// Per-row positions of one launch, passed by value as a kernel parameter.
#[repr(C)]
#[derive(Clone, Copy)]
struct RowPos {
    n: u32,
    pos: [u32; POS_ROWS],
    from: [u32; POS_ROWS],
}

/// Bytes of the RowPos kernel parameter (the CUDA struct must have the same size).
#[cfg(test)]
pub(super) fn row_pos_bytes() -> usize {
    std::mem::size_of::<RowPos>()
}

// SAFETY: RowPos is #[repr(C)] plain old data (u32 and arrays of u32) with exactly the
// layout of `struct RowPos` in kernels/common.cu (4 + 256 + 256 bytes, 4-byte aligned).
unsafe impl DeviceRepr for RowPos {}

/// Largest attention window the kernel's dynamic shared memory holds: the 48 KiB a block may
/// use without opting in, less 64 bytes for the kernel's static `red[2]`.
const MAX_ATTN_POS: usize = (48 * 1024 - 64) / 4;

pub(super) fn fmt_of(ty: GgmlType) -> (i32, &'static str) {
    match ty {
        GgmlType::F32 => (0, "mv_f32"),
        GgmlType::F16 => (1, "mv_f16"),
        GgmlType::BF16 => (2, "mv_bf16"),
        GgmlType::Q4_0 => (3, "mv_q4_0"),
        GgmlType::Q4_1 => (4, "mv_q4_1"),
        GgmlType::Q5_0 => (5, "mv_q5_0"),
        GgmlType::Q5_1 => (6, "mv_q5_1"),
        GgmlType::Q8_0 => (7, "mv_q8_0"),
        GgmlType::Q2K => (8, "mv_q2_k"),
        GgmlType::Q3K => (9, "mv_q3_k"),
        GgmlType::Q4K => (10, "mv_q4_k"),
        GgmlType::Q5K => (11, "mv_q5_k"),
        GgmlType::Q6K => (12, "mv_q6_k"),
    }
}

fn to_i32(v: usize, what: &str) -> BResult<i32> {
    i32::try_from(v).map_err(|_| op_err(format!("{what} = {v} does not fit a kernel int")))
}

fn to_u32(v: usize, what: &str) -> BResult<u32> {
    u32::try_from(v).map_err(|_| op_err(format!("{what} = {v} does not fit a grid dimension")))
}

/// A weight matrix on the device: the file's block bytes, untouched.
struct DevWeight {
    raw: Raw,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    mv: CudaFunction,
}

impl DevWeight {
    fn upload(dx: &Arc<DevCtx>, w: &Weight, s: &GpuStream) -> BResult<DevWeight> {
        let raw = Raw::device(&dx.ctx, w.n_bytes(), &format!("weight {}", w.name))?;
        upload_raw(s, w.bytes(), &raw, 0, Some(dx.dev))?;
        Ok(DevWeight {
            raw,
            ty: w.ty,
            rows: w.rows,
            cols: w.cols,
            row_bytes: w.row_bytes(),
            mv: dx.func(fmt_of(w.ty).1)?.clone(),
        })
    }
}

fn upload_f32(dx: &Arc<DevCtx>, v: &[f32], s: &GpuStream) -> BResult<GpuBuf> {
    let b = alloc_zeroed_on(dx, v.len(), s)?;
    upload_slice(s, v, &b, 0)?;
    Ok(b)
}

struct DevLayer {
    attn_norm: GpuBuf,
    wq: DevWeight,
    wk: DevWeight,
    wv: DevWeight,
    wo: DevWeight,
    q_norm: Option<GpuBuf>,
    k_norm: Option<GpuBuf>,
    post_attn_norm: Option<GpuBuf>,
    ffn_norm: GpuBuf,
    gate: DevWeight,
    up: DevWeight,
    down: DevWeight,
    post_ffn_norm: Option<GpuBuf>,
}

/// A stage's KV cache: per layer of its range, K and V as `[rows, ctx, kv_dim]` device
/// buffers, plus the RoPE tables (cos/sin for positions 0..ctx) of the bases its layers use,
/// computed on the host by `crate::math::rope_table` so the bits are the CPU's.
pub struct CudaCache {
    dev: usize,
    layers: Range<usize>,
    rows: usize,
    ctx: usize,
    kv_dim: usize,
    k: Vec<GpuBuf>,
    v: Vec<GpuBuf>,
    /// (base bits, table) per distinct RoPE base among the layers.
    rope: Vec<(u32, GpuBuf)>,
}

impl CudaCache {
    pub(super) fn new(
        dx: &Arc<DevCtx>,
        model: &Arc<Model>,
        layers: Range<usize>,
        rows: usize,
        ctx: usize,
        s: &GpuStream,
    ) -> BResult<CudaCache> {
        let c = &model.cfg;
        let kv_dim = c.kv_dim();
        let n = rows
            .checked_mul(ctx)
            .and_then(|v| v.checked_mul(kv_dim))
            .ok_or_else(|| {
                op_err(format!(
                    "cache size overflows: rows {rows} ctx {ctx} kv_dim {kv_dim}"
                ))
            })?;
        let mut k = Vec::with_capacity(layers.len());
        let mut v = Vec::with_capacity(layers.len());
        let mut rope: Vec<(u32, GpuBuf)> = Vec::new();
        let half = c.head_dim / 2;
        for il in layers.clone() {
            k.push(alloc_zeroed_on(dx, n, s)?);
            v.push(alloc_zeroed_on(dx, n, s)?);
            let base = c.layer_rope_base(il);
            if rope.iter().any(|(b, _)| *b == base.to_bits()) {
                continue;
            }
            let mut table = vec![0f32; 2 * ctx * half];
            let (mut cs, mut sn) = (vec![0f32; half], vec![0f32; half]);
            for p in 0..ctx {
                rope_table(c.head_dim, base, p, &mut cs, &mut sn);
                table[p * half..(p + 1) * half].copy_from_slice(&cs);
                table[(ctx + p) * half..(ctx + p + 1) * half].copy_from_slice(&sn);
            }
            rope.push((base.to_bits(), upload_f32(dx, &table, s)?));
        }
        Ok(CudaCache {
            dev: dx.dev,
            layers,
            rows,
            ctx,
            kv_dim,
            k,
            v,
            rope,
        })
    }
}

pub struct CudaEngine {
    dx: Arc<DevCtx>,
    model: Arc<Model>,
    spec: EngineSpec,
    layers: Vec<DevLayer>,
    embd: Option<DevWeight>,
    out_norm: Option<GpuBuf>,
    output: Option<DevWeight>,
    x: GpuBuf,
    xn: GpuBuf,
    q: GpuBuf,
    k: GpuBuf,
    v: GpuBuf,
    att: GpuBuf,
    o: GpuBuf,
    g: GpuBuf,
    u: GpuBuf,
}

impl CudaEngine {
    pub(super) fn new(
        dx: &Arc<DevCtx>,
        model: &Arc<Model>,
        spec: EngineSpec,
        s: &GpuStream,
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
        let opt = |w: &Option<Vec<f32>>| -> BResult<Option<GpuBuf>> {
            w.as_ref().map(|w| upload_f32(dx, w, s)).transpose()
        };
        let mut layers = Vec::with_capacity(spec.layers.len());
        for il in spec.layers.clone() {
            let lw = &model.layers[il];
            layers.push(DevLayer {
                attn_norm: upload_f32(dx, &lw.attn_norm, s)?,
                wq: DevWeight::upload(dx, &lw.wq, s)?,
                wk: DevWeight::upload(dx, &lw.wk, s)?,
                wv: DevWeight::upload(dx, &lw.wv, s)?,
                wo: DevWeight::upload(dx, &lw.wo, s)?,
                q_norm: opt(&lw.q_norm)?,
                k_norm: opt(&lw.k_norm)?,
                post_attn_norm: opt(&lw.post_attn_norm)?,
                ffn_norm: upload_f32(dx, &lw.ffn_norm, s)?,
                gate: DevWeight::upload(dx, &lw.gate, s)?,
                up: DevWeight::upload(dx, &lw.up, s)?,
                down: DevWeight::upload(dx, &lw.down, s)?,
                post_ffn_norm: opt(&lw.post_ffn_norm)?,
            });
        }
        let embd = if spec.embed {
            Some(DevWeight::upload(dx, &model.tok_embd, s)?)
        } else {
            None
        };
        let (out_norm, output) = if spec.head {
            (
                Some(upload_f32(dx, &model.out_norm, s)?),
                Some(DevWeight::upload(dx, &model.output, s)?),
            )
        } else {
            (None, None)
        };
        let r = spec.max_rows;
        let mk = |n: usize| -> BResult<GpuBuf> {
            let len = r
                .checked_mul(n)
                .ok_or_else(|| op_err(format!("scratch of {r} x {n} overflows")))?;
            alloc_zeroed_on(dx, len, s)
        };
        Ok(CudaEngine {
            dx: dx.clone(),
            model: model.clone(),
            layers,
            embd,
            out_norm,
            output,
            x: mk(c.n_embd)?,
            xn: mk(c.n_embd)?,
            q: mk(c.q_dim())?,
            k: mk(c.kv_dim())?,
            v: mk(c.kv_dim())?,
            att: mk(c.q_dim())?,
            o: mk(c.n_embd)?,
            g: mk(c.n_ff)?,
            u: mk(c.n_ff)?,
            spec,
        })
    }

    fn err(&self, op: &str, e: impl std::fmt::Display) -> crate::backend::BackendError {
        op_err(format!(
            "device {} stage {} {op}: {e}",
            self.dx.dev, self.spec.stage
        ))
    }

    /// Checks an engine call's stream and rows, then (with --jitter-us) delays the stream.
    fn check(&self, s: &GpuStream, rows: usize, op: &str) -> BResult<()> {
        if rows == 0 || rows > self.spec.max_rows {
            return Err(self.err(
                op,
                format!(
                    "{rows} rows, engine scratch holds 1..={}",
                    self.spec.max_rows
                ),
            ));
        }
        if s.device() != self.dx.dev {
            return Err(self.err(
                op,
                format!(
                    "stream {} is on device {}, the engine's weights on device {}",
                    s.label(),
                    s.device(),
                    self.dx.dev
                ),
            ));
        }
        s.jitter()
    }

    /// Y[r] = W · X[r] for r < rows.
    fn matvec(
        &self,
        s: &GpuStream,
        w: &DevWeight,
        x: u64,
        y: u64,
        rows: usize,
        op: &str,
    ) -> BResult<()> {
        let n_in = to_i32(w.cols, "matvec n_in")?;
        let n_out = to_i32(w.rows, "matvec n_out")?;
        let row_bytes = w.row_bytes as u64;
        let wp = w.raw.ptr();
        let cfg = LaunchConfig {
            grid_dim: (
                to_u32(w.rows.div_ceil(32), "matvec blocks")?,
                to_u32(rows, "rows")?,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = s.s.launch_builder(&w.mv);
        b.arg(&wp)
            .arg(&row_bytes)
            .arg(&n_in)
            .arg(&n_out)
            .arg(&x)
            .arg(&y);
        // SAFETY: mv_<fmt>(const u8* W, u64 row_bytes, int n_in, int n_out, const float* X,
        // float* Y) with matching argument types; W holds w.rows rows of row_bytes bytes of
        // type w.ty (uploaded from the checked Weight); X and Y are engine scratch or
        // caller buffers holding rows * n_in / rows * n_out values (checked by callers).
        unsafe { b.launch(cfg) }.map_err(|e| self.err(&format!("{op} ({})", w.ty), e))?;
        Ok(())
    }

    /// out[v] = rms_norm(x[v]) * w over n_vec vectors of n elements (in place allowed).
    fn rms_norm(
        &self,
        s: &GpuStream,
        x: u64,
        w: &GpuBuf,
        out: u64,
        n_vec: usize,
        op: &str,
    ) -> BResult<()> {
        let n = to_i32(w.len(), "norm length")?;
        let nv = to_i32(n_vec, "norm vectors")?;
        let eps = self.model.cfg.rms_eps;
        let wp = w.at(0);
        let cfg = LaunchConfig {
            grid_dim: (to_u32(n_vec.div_ceil(4), "norm blocks")?, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.dx.func("rms_norm")?;
        let mut b = s.s.launch_builder(f);
        b.arg(&x).arg(&wp).arg(&out).arg(&nv).arg(&n).arg(&eps);
        // SAFETY: rms_norm(const float* x, const float* w, float* out, int n_vec, int n,
        // float eps); x and out hold n_vec * n values (engine scratch sized max_rows x
        // width, n_vec <= rows checked), w holds n.
        unsafe { b.launch(cfg) }.map_err(|e| self.err(op, e))?;
        Ok(())
    }

    /// x += post_norm(o) (or x += o when `w` is None), rows of n_embd.
    fn add_residual(
        &self,
        s: &GpuStream,
        w: Option<&GpuBuf>,
        rows: usize,
        op: &str,
    ) -> BResult<()> {
        let c = &self.model.cfg;
        let n = to_i32(c.n_embd, "n_embd")?;
        let r = to_i32(rows, "rows")?;
        let (wp, has) = match w {
            Some(w) => (w.at(0), 1i32),
            None => (0u64, 0i32),
        };
        let (x, o) = (self.x.at(0), self.o.at(0));
        let eps = c.rms_eps;
        let cfg = LaunchConfig {
            grid_dim: (to_u32(rows.div_ceil(4), "add blocks")?, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.dx.func("add_residual")?;
        let mut b = s.s.launch_builder(f);
        b.arg(&x)
            .arg(&o)
            .arg(&wp)
            .arg(&r)
            .arg(&n)
            .arg(&eps)
            .arg(&has);
        // SAFETY: add_residual(float* x, const float* o, const float* w, int rows, int n,
        // float eps, int has_norm); x and o are engine scratch of max_rows x n_embd
        // (rows checked), w is read only when has_norm = 1 and then holds n_embd values.
        unsafe { b.launch(cfg) }.map_err(|e| self.err(op, e))?;
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
        let (fmt, _) = fmt_of(e.ty);
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
        let mut b = s.s.launch_builder(f);
        b.arg(&tp)
            .arg(&row_bytes)
            .arg(&fmt)
            .arg(&n)
            .arg(&vocab)
            .arg(&scale)
            .arg(&ip)
            .arg(&xp);
        // SAFETY: embed_rows(const u8* table, u64 row_bytes, int fmt, int n_embd, int vocab,
        // float scale, const float* ids, float* x); the table holds `vocab` rows of
        // row_bytes bytes of format `fmt`; ids holds >= rows values (checked); x is the
        // engine's [max_rows, n_embd] residual (rows checked). Bad ids are clamped in-kernel.
        unsafe { b.launch(cfg) }.map_err(|e| self.err("embed", e))?;
        Ok(())
    }

    fn layer(
        &self,
        s: &GpuStream,
        il: usize,
        rows: usize,
        pos: &[usize],
        cache: &CudaCache,
    ) -> BResult<()> {
        let op = format!("layer {il}");
        self.check(s, rows, &op)?;
        if !self.spec.layers.contains(&il) || !cache.layers.contains(&il) {
            return Err(self.err(
                &op,
                format!(
                    "outside engine layers {:?} / cache layers {:?}",
                    self.spec.layers, cache.layers
                ),
            ));
        }
        if cache.dev != self.dx.dev || cache.kv_dim != self.model.cfg.kv_dim() {
            return Err(self.err(
                &op,
                format!(
                    "cache (device {}, kv_dim {}) does not fit this engine (device {}, kv_dim {})",
                    cache.dev,
                    cache.kv_dim,
                    self.dx.dev,
                    self.model.cfg.kv_dim()
                ),
            ));
        }
        if pos.len() != rows || rows > cache.rows {
            return Err(self.err(
                &op,
                format!(
                    "{} positions for {rows} rows (cache rows {})",
                    pos.len(),
                    cache.rows
                ),
            ));
        }
        if let Some(&p) = pos.iter().find(|&&p| p >= cache.ctx) {
            return Err(self.err(
                &op,
                format!("position {p} beyond cache context {}", cache.ctx),
            ));
        }
        let c = &self.model.cfg;
        let lw = &self.layers[il - self.spec.layers.start];
        let li = il - cache.layers.start;
        let (qd, kvd, hd) = (c.q_dim(), c.kv_dim(), c.head_dim);
        let base = c.layer_rope_base(il).to_bits();
        let table = cache
            .rope
            .iter()
            .find(|(b, _)| *b == base)
            .map(|(_, t)| t)
            .ok_or_else(|| self.err(&op, "no RoPE table for this layer's base"))?;

        // Attention.
        let (x, xn, q, k, v, att, o) = (
            self.x.at(0),
            self.xn.at(0),
            self.q.at(0),
            self.k.at(0),
            self.v.at(0),
            self.att.at(0),
            self.o.at(0),
        );
        self.rms_norm(s, x, &lw.attn_norm, xn, rows, &format!("{op} attn_norm"))?;
        self.matvec(s, &lw.wq, xn, q, rows, &format!("{op} attn_q"))?;
        self.matvec(s, &lw.wk, xn, k, rows, &format!("{op} attn_k"))?;
        self.matvec(s, &lw.wv, xn, v, rows, &format!("{op} attn_v"))?;
        if let (Some(qn), Some(kn)) = (&lw.q_norm, &lw.k_norm) {
            self.rms_norm(s, q, qn, q, rows * c.n_heads, &format!("{op} q_norm"))?;
            self.rms_norm(s, k, kn, k, rows * c.n_kv_heads, &format!("{op} k_norm"))?;
        }
        let style: i32 = match c.rope_style {
            RopeStyle::Norm => 0,
            RopeStyle::Neox => 1,
        };
        let (nh, nkv, hd_i, ctx_i, kvd_i) = (
            to_i32(c.n_heads, "n_heads")?,
            to_i32(c.n_kv_heads, "n_kv_heads")?,
            to_i32(hd, "head_dim")?,
            to_i32(cache.ctx, "ctx")?,
            to_i32(kvd, "kv_dim")?,
        );
        let (tp, kc, vc) = (table.at(0), cache.k[li].at(0), cache.v[li].at(0));
        let scale = c.attn_scale;
        for c0 in (0..rows).step_by(POS_ROWS) {
            let cn = (rows - c0).min(POS_ROWS);
            let mut rp = RowPos {
                n: cn as u32,
                pos: [0; POS_ROWS],
                from: [0; POS_ROWS],
            };
            let mut max_pos = 0usize;
            for r in 0..cn {
                let p = pos[c0 + r];
                let from = c.attn_start(il, p);
                rp.pos[r] = to_u32(p, "position")?;
                rp.from[r] = to_u32(from, "window start")?;
                max_pos = max_pos.max(p + 1 - from);
            }
            if max_pos > MAX_ATTN_POS {
                return Err(self.err(
                    &op,
                    format!(
                        "attention window of {max_pos} positions exceeds the kernel's {MAX_ATTN_POS}"
                    ),
                ));
            }
            let row0 = to_i32(c0, "row")?;
            let (qc, kcur, vcur, ac) = (
                q + 4 * (c0 * qd) as u64,
                k + 4 * (c0 * kvd) as u64,
                v + 4 * (c0 * kvd) as u64,
                att + 4 * (c0 * qd) as u64,
            );
            let cn_u = cn as u32;
            // RoPE on q and k heads.
            let total = (c.n_heads + c.n_kv_heads) * (hd / 2);
            let cfg = LaunchConfig {
                grid_dim: (to_u32(total.div_ceil(128), "rope blocks")?, cn_u, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let f = self.dx.func("rope_qk")?;
            let mut b = s.s.launch_builder(f);
            b.arg(&qc)
                .arg(&kcur)
                .arg(&nh)
                .arg(&nkv)
                .arg(&hd_i)
                .arg(&tp)
                .arg(&ctx_i)
                .arg(&style)
                .arg(&rp);
            // SAFETY: rope_qk(float* q, float* k, int n_heads, int n_kv_heads, int hd,
            // const float* table, int ctx, int style, RowPos rp); q/k point at row c0 of the
            // engine's scratch with cn rows left; the table holds 2 * ctx * hd/2 values and
            // every rp.pos < ctx (checked above).
            unsafe { b.launch(cfg) }.map_err(|e| self.err(&format!("{op} rope"), e))?;
            // KV append.
            let cfg = LaunchConfig {
                grid_dim: (to_u32(kvd.div_ceil(128), "kv blocks")?, cn_u, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let f = self.dx.func("kv_store")?;
            let mut b = s.s.launch_builder(f);
            b.arg(&kcur)
                .arg(&vcur)
                .arg(&kc)
                .arg(&vc)
                .arg(&kvd_i)
                .arg(&ctx_i)
                .arg(&row0)
                .arg(&rp);
            // SAFETY: kv_store(const float* k, const float* v, float* K, float* V, int kvd,
            // int ctx, int row0, RowPos rp); K/V are this layer's [cache.rows, ctx, kvd]
            // buffers, row0 + cn <= rows <= cache.rows and rp.pos < ctx (checked above).
            unsafe { b.launch(cfg) }.map_err(|e| self.err(&format!("{op} kv store"), e))?;
            // Attention over the window.
            let cfg = LaunchConfig {
                grid_dim: (to_u32(c.n_heads, "heads")?, cn_u, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: to_u32(4 * max_pos, "attention shared memory")?,
            };
            let f = self.dx.func("attention")?;
            let mut b = s.s.launch_builder(f);
            b.arg(&qc)
                .arg(&kc)
                .arg(&vc)
                .arg(&ac)
                .arg(&nh)
                .arg(&nkv)
                .arg(&hd_i)
                .arg(&ctx_i)
                .arg(&scale)
                .arg(&row0)
                .arg(&rp);
            // SAFETY: attention(const float* q, const float* K, const float* V, float* out,
            // int n_heads, int n_kv_heads, int hd, int ctx, float scale, int row0, RowPos rp);
            // q/out are scratch rows from c0; K/V as for kv_store; every window
            // [from, pos] lies in 0..ctx and fits the dynamic shared memory requested.
            unsafe { b.launch(cfg) }.map_err(|e| self.err(&format!("{op} attention"), e))?;
        }
        self.matvec(s, &lw.wo, att, o, rows, &format!("{op} attn_output"))?;
        self.add_residual(
            s,
            lw.post_attn_norm.as_ref(),
            rows,
            &format!("{op} attn residual"),
        )?;

        // Feed-forward.
        let (g, u) = (self.g.at(0), self.u.at(0));
        self.rms_norm(s, x, &lw.ffn_norm, xn, rows, &format!("{op} ffn_norm"))?;
        self.matvec(s, &lw.gate, xn, g, rows, &format!("{op} ffn_gate"))?;
        self.matvec(s, &lw.up, xn, u, rows, &format!("{op} ffn_up"))?;
        let n_act = rows * c.n_ff;
        let n_act_i = to_i32(n_act, "ffn elements")?;
        let kind: i32 = match c.activation {
            Activation::Silu => 0,
            Activation::GeluTanh => 1,
        };
        let cfg = LaunchConfig {
            grid_dim: (to_u32(n_act.div_ceil(256), "act blocks")?, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.dx.func("act_mul")?;
        let mut b = s.s.launch_builder(f);
        b.arg(&g).arg(&u).arg(&n_act_i).arg(&kind);
        // SAFETY: act_mul(float* g, const float* u, int n, int kind); g and u are engine
        // scratch of max_rows x n_ff >= n values.
        unsafe { b.launch(cfg) }.map_err(|e| self.err(&format!("{op} ffn act"), e))?;
        self.matvec(s, &lw.down, g, o, rows, &format!("{op} ffn_down"))?;
        self.add_residual(
            s,
            lw.post_ffn_norm.as_ref(),
            rows,
            &format!("{op} ffn residual"),
        )
    }

    fn head(&self, s: &GpuStream, rows: usize, logits: &GpuBuf) -> BResult<()> {
        self.check(s, rows, "head")?;
        let (Some(norm), Some(out)) = (&self.out_norm, &self.output) else {
            return Err(self.err("head", "this stage does not hold the output head"));
        };
        check_range("head logits", logits, 0, rows * out.rows).map_err(|e| self.err("head", e))?;
        if logits.device() != Some(self.dx.dev) {
            return Err(self.err("head", "logits buffer is not on the engine's device"));
        }
        let (x, xn) = (self.x.at(0), self.xn.at(0));
        self.rms_norm(s, x, norm, xn, rows, "head output_norm")?;
        self.matvec(s, out, xn, logits.at(0), rows, "head output")
    }
}
