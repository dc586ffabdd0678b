//! The CPU engine: one per stage, enqueueing the model's ops (crate::model::forward) on the
//! stage's stream. Its residual `x` is engine-owned scratch, read and written by every op:
//! correct on one stream, a data race when two stage streams drive one engine (the seed's
//! shared-scratch race, which `--fault shared-scratch` recreates on purpose).

use std::ops::Range;
use std::sync::Arc;

use super::mem::DevMem;
use super::stream::CpuStream;
use super::{op_err, CpuBackend};
use crate::backend::{BResult, Engine, EngineSpec};
use crate::model::forward::{self, KvAccess};
use crate::model::{KvOrder, Model, RowAt};

/// A stage's KV cache: per layer of its range, K and V as `[rows, ctx, kv_dim]`.
pub struct CpuCache {
    pub(super) layers: Range<usize>,
    pub(super) rows: usize,
    pub(super) ctx: usize,
    pub(super) kv_dim: usize,
    pub(super) k: Vec<Arc<DevMem>>,
    pub(super) v: Vec<Arc<DevMem>>,
}

/// KvAccess over one layer of a CpuCache (device memory, relaxed atomics).
struct LayerKv {
    k: Arc<DevMem>,
    v: Arc<DevMem>,
    ctx: usize,
    kv_dim: usize,
}

impl KvAccess for LayerKv {
    fn append(&mut self, row: usize, pos: usize, k: &[f32], v: &[f32]) {
        let off = (row * self.ctx + pos) * self.kv_dim;
        self.k.store(off, k);
        self.v.store(off, v);
    }

    fn read(&self, row: usize, from: usize, to: usize, k: &mut Vec<f32>, v: &mut Vec<f32>) {
        let n = (to - from) * self.kv_dim;
        let off = (row * self.ctx + from) * self.kv_dim;
        k.resize(n, 0.0);
        v.resize(n, 0.0);
        self.k.load(off, k);
        self.v.load(off, v);
    }
}

pub struct CpuEngine {
    model: Arc<Model>,
    spec: EngineSpec,
    x: Arc<DevMem>,
}

impl CpuEngine {
    pub(super) fn new(model: Arc<Model>, spec: EngineSpec, x: Arc<DevMem>) -> CpuEngine {
        CpuEngine { model, spec, x }
    }

    pub(super) fn model(&self) -> &Arc<Model> {
        &self.model
    }

    fn check_rows(&self, rows: usize, op: &str) -> BResult<()> {
        if rows == 0 || rows > self.spec.max_rows {
            return Err(op_err(format!(
                "stage {} {op}: {rows} rows, engine scratch holds 1..={}",
                self.spec.stage, self.spec.max_rows
            )));
        }
        Ok(())
    }
}

impl Engine<CpuBackend> for CpuEngine {
    fn spec(&self) -> &EngineSpec {
        &self.spec
    }

    fn x(&self) -> &Arc<DevMem> {
        &self.x
    }

    fn embed(&self, s: &CpuStream, input: &Arc<DevMem>, rows: usize) -> BResult<()> {
        self.check_rows(rows, "embed")?;
        if !self.spec.embed {
            return Err(op_err(format!(
                "stage {} does not hold the embedding",
                self.spec.stage
            )));
        }
        // Checked here, not on the worker: a short buffer must be an error, never a panic
        // on the stream thread.
        super::mem::check_range("embed token ids", input, 0, rows)?;
        let (m, x, input) = (self.model.clone(), self.x.clone(), input.clone());
        let stage = self.spec.stage;
        s.enqueue("embed", move || {
            let mut ids = vec![0f32; rows];
            input.load(0, &mut ids);
            let mut tokens = Vec::with_capacity(rows);
            for (r, &t) in ids.iter().enumerate() {
                // Token ids travel as exact f32 integers; anything else is a torn/poisoned read.
                if !(t >= 0.0 && t.fract() == 0.0 && (t as usize) < m.cfg.vocab) {
                    return Err(format!(
                        "stage {stage} embed: row {r} token {t} is not a token id < {}",
                        m.cfg.vocab
                    ));
                }
                tokens.push(t as u32);
            }
            let mut out = vec![0f32; rows * m.cfg.n_embd];
            forward::embed(&m, &tokens, &mut out);
            x.store(0, &out);
            Ok(())
        })
    }

    fn layer(
        &self,
        s: &CpuStream,
        il: usize,
        rows: &[RowAt],
        order: KvOrder,
        cache: &CpuCache,
    ) -> BResult<()> {
        self.check_rows(rows.len(), "layer")?;
        let stage = self.spec.stage;
        if !self.spec.layers.contains(&il) || !cache.layers.contains(&il) {
            return Err(op_err(format!(
                "stage {stage} layer {il}: outside engine layers {:?} / cache layers {:?}",
                self.spec.layers, cache.layers
            )));
        }
        // Checked here, not on the worker: a bad row is an error naming it, never a panic.
        if let Some(a) = rows
            .iter()
            .find(|a| a.seq >= cache.rows || a.slot >= cache.ctx || a.pos >= cache.ctx)
        {
            return Err(op_err(format!(
                "stage {stage} layer {il}: row at position {} sequence {} slot {} outside the cache ({} sequences x {} slots)",
                a.pos, a.seq, a.slot, cache.rows, cache.ctx
            )));
        }
        let li = il - cache.layers.start;
        let mut kv = LayerKv {
            k: cache.k[li].clone(),
            v: cache.v[li].clone(),
            ctx: cache.ctx,
            kv_dim: cache.kv_dim,
        };
        let (m, x, rows) = (self.model.clone(), self.x.clone(), rows.to_vec());
        s.enqueue("layer", move || {
            let mut xs = vec![0f32; rows.len() * m.cfg.n_embd];
            x.load(0, &mut xs);
            forward::layer_rows(&m, il, &mut xs, &rows, order, &mut kv);
            x.store(0, &xs);
            Ok(())
        })
    }

    fn head(&self, s: &CpuStream, first: usize, rows: usize, logits: &Arc<DevMem>) -> BResult<()> {
        self.check_rows(first + rows, "head")?;
        if !self.spec.head {
            return Err(op_err(format!(
                "stage {} does not hold the output head",
                self.spec.stage
            )));
        }
        let vocab = self.model.cfg.vocab;
        super::mem::check_range("head logits", logits, 0, rows * vocab)?;
        let (m, x, logits) = (self.model.clone(), self.x.clone(), logits.clone());
        // `--fault row-count-order` plants only where the step has several rows.
        let planted = self.spec.fault_row_count_order && rows > 1;
        s.enqueue("head", move || {
            let mut xs = vec![0f32; rows * m.cfg.n_embd];
            x.load(first * m.cfg.n_embd, &mut xs);
            let mut out = vec![0f32; rows * vocab];
            if planted {
                head_dequantized(&m, &xs, &mut out)?;
            } else {
                forward::head(&m, &xs, &mut out);
            }
            logits.store(0, &out);
            Ok(())
        })
    }
}

/// `--fault row-count-order`: the head as a multi-row kernel of another family would
/// compute it: each output row dequantized to f32, then one fixed-order f32 dot per row,
/// instead of the quantized dot the one-row path (and the reference) takes. The same
/// values up to rounding, in another reduction order: a row's logits then depend on how
/// many rows share its step.
fn head_dequantized(m: &Model, x: &[f32], logits: &mut [f32]) -> Result<(), String> {
    let n = m.cfg.n_embd;
    let vocab = m.cfg.vocab;
    let mut xn = vec![0.0f32; x.len()];
    crate::math::rms_norm(x, &m.out_norm, m.cfg.rms_eps, &mut xn);
    let mut w = vec![0.0f32; n];
    for f in 0..vocab {
        crate::quant::dequantize(m.output.ty, m.output.row(f), &mut w)
            .map_err(|e| format!("row-count-order head: output row {f}: {e}"))?;
        for (r, xr) in xn.chunks_exact(n).enumerate() {
            logits[r * vocab + f] = crate::math::dot_f32(&w, xr);
        }
    }
    Ok(())
}
