//! A stage's KV cache on its device: per layer of the stage's range, K and V as
//! `[rows, ctx, kv_dim]` buffers, and the RoPE tables of the bases its layers use. Laws it
//! serves: every buffer is allocated and zero-filled (and reset) on the stream handed in,
//! the stage's one stream, so no fill is unordered against the stage's kernels; a reset
//! refuses a stream of another device; the tables are the host's (`Config::layer_rope_table`),
//! so RoPE has the CPU's bits; each cache has a process-unique `id`, which keys the graphs
//! captured with its pointers (graph.rs).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::weights::upload_f32;
use crate::backend::cuda::{alloc_zeroed_on, op_err, zero_fill, DevCtx, GpuBuf, GpuStream};
use crate::backend::BResult;
use crate::model::Model;

/// A stage's KV cache: per layer of its range, K and V as `[rows, ctx, kv_dim]` device
/// buffers, plus the RoPE tables (cos/sin for positions 0..ctx) of the bases its layers use,
/// computed on the host by `Config::layer_rope_table` so the bits are the CPU's.
pub struct CudaCache {
    /// Unique per cache made in this process: part of a graph's key, so a graph captured
    /// with this cache's pointers is replayed with this cache only.
    pub(super) id: u64,
    pub(super) dev: usize,
    pub(super) layers: Range<usize>,
    pub(super) rows: usize,
    pub(super) ctx: usize,
    pub(super) kv_dim: usize,
    pub(super) k: Vec<GpuBuf>,
    pub(super) v: Vec<GpuBuf>,
    /// (base bits, table) per distinct RoPE base among the layers.
    pub(super) rope: Vec<(u32, GpuBuf)>,
}

impl CudaCache {
    /// Zero-fills every K/V buffer on `s` (a reset cache; the RoPE tables stay). The cache
    /// must live on `s`'s device: a memset of another device's memory would be unordered.
    pub(in crate::backend::cuda) fn clear(&self, s: &GpuStream) -> BResult<()> {
        if s.dx.dev != self.dev {
            return Err(op_err(format!(
                "cache reset: cache on device {} but stream {} on device {}",
                self.dev,
                s.label(),
                s.dx.dev
            )));
        }
        for b in self.k.iter().chain(&self.v) {
            zero_fill(b, s)?;
        }
        Ok(())
    }

    /// Adds the cache's K/V buffers and RoPE tables to `list` by measured device.
    pub(in crate::backend::cuda) fn residency(
        &self,
        list: &mut Vec<(Option<usize>, u64)>,
    ) -> BResult<()> {
        for b in self
            .k
            .iter()
            .chain(&self.v)
            .chain(self.rope.iter().map(|(_, t)| t))
        {
            b.raw.tally(list)?;
        }
        Ok(())
    }

    pub(in crate::backend::cuda) fn new(
        dx: &Arc<DevCtx>,
        model: &Arc<Model>,
        layers: Range<usize>,
        rows: usize,
        ctx: usize,
        s: &GpuStream,
    ) -> BResult<CudaCache> {
        let c = &model.cfg;
        let kv_dim = c.kv_dim();
        let n = crate::backend::cache_len("cuda", model, rows, ctx)?;
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
                c.layer_rope_table(il, p, &mut cs, &mut sn);
                table[p * half..(p + 1) * half].copy_from_slice(&cs);
                table[(ctx + p) * half..(ctx + p + 1) * half].copy_from_slice(&sn);
            }
            rope.push((base.to_bits(), upload_f32(dx, &table, s)?));
        }
        Ok(CudaCache {
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
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

/// Source of `CudaCache::id`.
static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(0);
