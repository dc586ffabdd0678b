//! The layer walk (kernels/walk.cu): a stage's one-row decode over its whole layer range in
//! one launch of one thread-block cluster, instead of five launches a layer. Taken for every
//! one-row step of an engine whose layers all fit it (`WalkPlan::for_layers`: pre-norm
//! layers whose seven matrices are one vectorized format, FFMA kernels, sm_90 clusters),
//! never by choice of the caller: every output has the bits of the launches it replaces
//! (the walk runs their device code, mvq_run_on and att_fused, with the same arguments), so
//! the choice cannot change a hash, and the gate proves it each run (the eager arm's rows
//! against the batched arm's, which run the ordinary launches).
//!
//! Laws it serves: the walk's arguments (one `WalkLayer` per layer: its four matvec phases
//! as `mv_args` builds them for `layer_ops`, and its attention as `att_args` does) are
//! uploaded once per (layers, cache) before any capture, so a captured walk replays the
//! same table; its positions come through `rowpos` as every launch's do; a cluster launch
//! makes all its blocks resident together (the cluster barriers inside cannot wait on a
//! block that is not running), and the engine launches one only after the occupancy
//! calculator says one fits.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::LaunchConfig;

use super::attention::{AttArgs, MAX_ATTN_POS};
use super::matvec::{fmt_of, MvArgs};
use super::weights::{DevLayer, DevWeight};
use super::{kp, to_i32, to_u32, CudaCache, CudaEngine, MODE_ADD, MODE_GATE_UP, MODE_STORE};
use crate::backend::cuda::mem::{upload_raw, Raw};
use crate::backend::cuda::nvrtc::walk_slot;
use crate::backend::cuda::{DevCtx, GpuStream};
use crate::backend::BResult;
use crate::model::Config;
use crate::quant::repack;

/// One layer's attention arguments (`struct WalkAtt` in kernels/walk.cu).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct WalkAtt {
    bq: u64,
    bk: u64,
    bv: u64,
    qn: u64,
    kn: u64,
    table: u64,
    kc: u64,
    vc: u64,
    window: i32,
    pad: i32,
}

/// One layer of the walk (`struct WalkLayer`): q|k|v (attn_norm, mode 0), o (mode 1 into x),
/// gate|up (ffn_norm, mode 2), down (mode 1 into x), each as `layer_ops` launches it for
/// one row, their feature counts, and the layer's attention.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct WalkLayer {
    op: [MvArgs; 4],
    att: WalkAtt,
    features: [i32; 4],
}

/// The walk launch's one parameter (`struct WalkArgs`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct WalkArgs {
    layers: u64,
    q: u64,
    k: u64,
    v: u64,
    out: u64,
    rp: u64,
    n_layers: i32,
    style: i32,
    n_heads: i32,
    n_kv_heads: i32,
    hd: i32,
    ctx: i32,
    eps: f32,
    scale: f32,
    buf_bytes: i32,
    tile_floats: i32,
    sc_floats: i32,
    pad: i32,
    trace: u64,
}

/// Cluster sizes the walk tries, largest first (16 is Hopper's non-portable maximum: the
/// most SMs a cluster barrier spans).
const CLUSTERS: [usize; 2] = [16, 8];

/// Shared memory the walk kernel declares statically (its attention copies of q, k, v and
/// partials, the norm sums), kept free of the dynamic part: 3 x 2 KiB + 1 KiB + 80 bytes,
/// rounded up.
const WALK_STATIC: usize = 8 * 1024;

/// Rows per warp of phase k (kernels/walk.cu WALK_NW): gate|up 2, the others 1.
fn phase_nw(k: usize) -> usize {
    if k == 2 {
        2
    } else {
        1
    }
}

/// What an engine's walk needs that its layers fix: the walk module's slot, and per cluster
/// size (`CLUSTERS`) the bytes of one weight buffer (the largest phase's rows one block
/// copies), and the floats of the phase tile.
#[derive(Clone, Debug)]
pub(super) struct WalkPlan {
    pub(super) slot: usize,
    bufs: Vec<(usize, usize)>,
    tile_floats: usize,
}

impl WalkPlan {
    /// The plan of an engine whose layers are `layers` (None: the walk does not fit them,
    /// and the engine launches `layer_ops` as before): a device with clusters (sm_90+), every
    /// layer pre-norm, its seven matrices packed for the FFMA kernels (not the tensor-core
    /// layout) in one format, each row a whole number of 16-byte copies.
    pub(super) fn for_layers(dx: &DevCtx, cfg: &Config, layers: &[DevLayer]) -> Option<WalkPlan> {
        if dx.cc.0 < 9 || layers.is_empty() {
            return None;
        }
        let ty = layers[0].wq.ty;
        let ok = |w: &DevWeight| w.packed && !w.mma && w.ty == ty && w.row_bytes.is_multiple_of(16);
        for l in layers {
            if l.post_attn_norm.is_some() || l.post_ffn_norm.is_some() {
                return None;
            }
            if ![&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down]
                .into_iter()
                .all(ok)
            {
                return None;
            }
        }
        let fmt = usize::try_from(fmt_of(ty)).ok()?;
        let slot = walk_slot(fmt, cfg.head_dim)?;
        let l0 = &layers[0];
        // (features, rows per feature slot, row bytes, input width) of each phase.
        let phases = [
            (
                l0.wq.rows + l0.wk.rows + l0.wv.rows,
                l0.wq.row_bytes,
                l0.wq.cols,
            ),
            (l0.wo.rows, l0.wo.row_bytes, l0.wo.cols),
            (l0.gate.rows, l0.gate.row_bytes, l0.gate.cols),
            (l0.down.rows, l0.down.row_bytes, l0.down.cols),
        ];
        let bufs = CLUSTERS
            .iter()
            .map(|&c| {
                let most = phases
                    .iter()
                    .enumerate()
                    .map(|(k, &(features, rb, _))| {
                        let nw = phase_nw(k);
                        let nf = if k == 2 { nw / 2 } else { nw };
                        let groups = features.div_ceil(nf);
                        groups.div_ceil(8 * c) * 8 * nw * rb
                    })
                    .max()
                    .unwrap_or(0);
                (c, most.next_multiple_of(16))
            })
            .collect();
        let sums = repack::has_offsets(ty);
        let tile_floats = phases
            .iter()
            .map(|&(_, _, n)| n + if sums { n / 16 } else { 0 } + 1)
            .max()
            .unwrap_or(0)
            .next_multiple_of(4);
        Some(WalkPlan {
            slot,
            bufs,
            tile_floats,
        })
    }
}

/// A walk ready to launch for one (layers, cache): its uploaded layer table and launch shape.
pub(super) struct WalkEntry {
    table: Raw,
    n_layers: usize,
    cluster: usize,
    buf_bytes: usize,
    tile_floats: usize,
    sc_floats: usize,
    smem: usize,
    /// What every layer's attention shares (att_args of the first layer): the cache's
    /// positions per sequence and the score scale.
    ctx: i32,
    scale: f32,
    style: i32,
    /// PROBE (PPN_WALK_TRACE): the stamp buffer and the per-interval sums.
    trace: Option<Raw>,
    trace_sum: std::sync::Mutex<[f64; 18]>,
}

impl Drop for WalkEntry {
    fn drop(&mut self) {
        if let Ok(a) = self.trace_sum.lock() {
            if a[17] > 0.0 {
                let names = [
                    "qkv compute",
                    "qkv barrier",
                    "qkv fetch",
                    "attention",
                    "att barrier",
                    "o wait",
                    "o compute",
                    "o barrier",
                    "o fetch",
                    "gu wait",
                    "gu compute",
                    "gu barrier",
                    "gu fetch",
                    "down wait",
                    "down compute",
                    "down barrier",
                    "down fetch",
                ];
                let per = a[17] * self.n_layers as f64;
                for (n, v) in names.iter().zip(a.iter()) {
                    eprintln!("walk trace: {n:<14} {:8.2} us per layer", v / per / 1e3);
                }
            }
        }
    }
}

impl CudaEngine {
    /// The walk of layers `range` with `cache` (built and uploaded on `s` on first use,
    /// outside any capture), or None when this engine does not walk or no cluster of it fits
    /// the device.
    pub(super) fn walk_entry(
        &self,
        s: &GpuStream,
        range: &Range<usize>,
        cache: &CudaCache,
    ) -> BResult<Option<Arc<WalkEntry>>> {
        let Some(plan) = &self.walk else {
            return Ok(None);
        };
        let key = (range.start, range.end, cache.id);
        let mut walks = self
            .walks
            .lock()
            .map_err(|_| self.err("layer walk", "walk table poisoned"))?;
        if let Some(e) = walks.get(&key) {
            return Ok(e.clone());
        }
        let e = self.walk_build(s, plan, range, cache)?.map(Arc::new);
        walks.insert(key, e.clone());
        Ok(e)
    }

    fn walk_build(
        &self,
        s: &GpuStream,
        plan: &WalkPlan,
        range: &Range<usize>,
        cache: &CudaCache,
    ) -> BResult<Option<WalkEntry>> {
        let op = || format!("layer walk {range:?}");
        let c = &self.model.cfg;
        // The scores' shared memory: the largest window any step of this cache can have in
        // these layers (check_layer refuses a step beyond MAX_ATTN_POS before any launch).
        let sc_floats = range
            .clone()
            .map(|il| {
                c.layer_window(il)
                    .unwrap_or(cache.ctx)
                    .min(cache.ctx)
                    .min(MAX_ATTN_POS)
            })
            .max()
            .unwrap_or(1)
            .next_multiple_of(4);
        let f = self
            .dx
            .walk_func(plan.slot)
            .map_err(|e| self.err(&op(), e))?;
        let mut pick = None;
        for &(cluster, buf) in &plan.bufs {
            let smem = 2 * buf + 4 * (plan.tile_floats + sc_floats);
            if smem + WALK_STATIC > self.dx.smem_max + 2 * 1024 {
                continue;
            }
            let cfg = walk_cfg(cluster, smem)?;
            let fits = self
                .dx
                .max_active_clusters(f, &cfg, cluster as u32)
                .map_err(|e| self.err(&op(), format!("cluster occupancy: {e}")))?;
            if fits >= 1 {
                pick = Some((cluster, buf, smem));
                break;
            }
        }
        let Some((cluster, buf_bytes, smem)) = pick else {
            diag!(
                "cuda: stage {} {}: no cluster of the walk fits this device: layer launches",
                self.spec.stage,
                op()
            );
            return Ok(None);
        };
        diag!(
            "cuda: stage {} {}: one launch of a cluster of {cluster} blocks, {smem} bytes of \
             shared memory each (two weight buffers of {buf_bytes})",
            self.spec.stage,
            op()
        );
        let mut table: Vec<WalkLayer> = Vec::with_capacity(range.len());
        let mut shared = (0i32, 0f32, 0i32);
        for il in range.clone() {
            let lw = &self.layers[il - self.spec.layers.start];
            let rope = self.layer_table(il, cache)?;
            let a: AttArgs = self.att_args(il, lw, cache, rope)?;
            shared = (a.ctx, a.scale, a.style);
            let (x, q, k, v, att, h) = (
                self.x.at(0),
                self.q.at(0),
                self.k.at(0),
                self.v.at(0),
                self.att.at(0),
                self.h.at(0),
            );
            let ops: [(Vec<(&DevWeight, u64)>, u64, Option<&_>, i32); 4] = [
                (
                    vec![(&lw.wq, q), (&lw.wk, k), (&lw.wv, v)],
                    x,
                    Some(&lw.attn_norm),
                    MODE_STORE,
                ),
                (vec![(&lw.wo, x)], att, None, MODE_ADD),
                (
                    vec![(&lw.gate, h), (&lw.up, 0)],
                    x,
                    Some(&lw.ffn_norm),
                    MODE_GATE_UP,
                ),
                (vec![(&lw.down, x)], h, None, MODE_ADD),
            ];
            let mut wl = WalkLayer::default();
            for (k, (mats, input, norm, mode)) in ops.iter().enumerate() {
                let (mut args, features) = self.mv_args(mats, *input, *norm, *mode, &op)?;
                // The walk computes a phase's rows from one copy of one row size.
                if mats.iter().any(|(w, _)| w.row_bytes != mats[0].0.row_bytes) {
                    return Ok(None);
                }
                args.rows = 1;
                wl.op[k] = args;
                wl.features[k] = to_i32(features, "walk features")?;
            }
            wl.att = WalkAtt {
                bq: a.bq,
                bk: a.bk,
                bv: a.bv,
                qn: a.qn,
                kn: a.kn,
                table: a.table,
                kc: a.kc,
                vc: a.vc,
                window: a.window,
                pad: 0,
            };
            table.push(wl);
        }
        let bytes = std::mem::size_of_val(&table[..]);
        let raw = Raw::device(&self.dx.ctx, bytes, &op())?;
        upload_raw(s, &table, &raw, 0, Some(self.dx.dev))?;
        Ok(Some(WalkEntry {
            table: raw,
            n_layers: range.len(),
            cluster,
            buf_bytes,
            tile_floats: plan.tile_floats,
            sc_floats,
            smem,
            ctx: shared.0,
            scale: shared.1,
            style: shared.2,
            trace: if std::env::var_os("PPN_WALK_TRACE").is_some() {
                Some(Raw::device(
                    &self.dx.ctx,
                    8 * 18 * range.len(),
                    "walk trace",
                )?)
            } else {
                None
            },
            trace_sum: std::sync::Mutex::new([0.0; 18]),
        }))
    }

    /// The walk of `w`'s layers for the step's one row (its position already in `rowpos`):
    /// one cluster launch on `s`.
    pub(super) fn walk_launch(
        &self,
        s: &GpuStream,
        w: &WalkEntry,
        range: &Range<usize>,
    ) -> BResult<()> {
        let op = || format!("layer walk {range:?}");
        let Some(plan) = &self.walk else {
            return Err(self.err(&op(), "this engine has no walk"));
        };
        // Every layer shares these (the scratch, heads, scale, positions); the per-layer
        // ones are in the table.
        let c = &self.model.cfg;
        let args = WalkArgs {
            layers: w.table.ptr(),
            q: self.q.at(0),
            k: self.k.at(0),
            v: self.v.at(0),
            out: self.att.at(0),
            rp: self.rowpos.at(0),
            n_layers: to_i32(w.n_layers, "walk layers")?,
            style: w.style,
            n_heads: to_i32(c.n_heads, "n_heads")?,
            n_kv_heads: to_i32(c.n_kv_heads, "n_kv_heads")?,
            hd: to_i32(c.head_dim, "head_dim")?,
            ctx: w.ctx,
            eps: c.rms_eps,
            scale: w.scale,
            buf_bytes: to_i32(w.buf_bytes, "walk buffer")?,
            tile_floats: to_i32(w.tile_floats, "walk tile")?,
            sc_floats: to_i32(w.sc_floats, "walk scores")?,
            pad: 0,
            trace: w.trace.as_ref().map_or(0, |t| t.ptr()),
        };
        let cfg = walk_cfg(w.cluster, w.smem)?;
        let f = self
            .dx
            .walk_func(plan.slot)
            .map_err(|e| self.err(&op(), e))?;
        let e0 = self.prof_start(s);
        let mut p = [kp(&args)];
        // SAFETY: walk_layers(WalkArgs w) of the walk module of this engine's format and head
        // width; WalkArgs, WalkLayer and WalkAtt are laid out as the CUDA structs
        // (#[repr(C)], the same fields in the same order); `layers` holds n_layers
        // WalkLayers uploaded on this stream before (walk_build), each phase's MvArgs built
        // by mv_args for one row over this engine's scratch and matrices (packed, one
        // format, rows a multiple of 16 bytes: WalkPlan::for_layers), its attention by
        // att_args (the layer's K/V cache and RoPE table, every position checked by
        // check_layer); the grid is one cluster of `cluster` blocks (the occupancy
        // calculator said one fits), its dynamic shared memory the two buffers, tile and
        // scores the kernel lays out, within the opt-in set at load.
        unsafe { self.dx.launch_cluster(s, f, &cfg, &mut p, w.cluster as u32) }
            .map_err(|e| self.err(&op(), e))?;
        self.prof_end(s, "layer walk", e0);
        if let Some(t) = &w.trace {
            // PROBE: the stamps of this walk, summed per interval.
            s.s.synchronize().map_err(|e| self.err(&op(), e))?;
            let mut host = vec![0u64; 18 * w.n_layers];
            // SAFETY: PROBE: `t` holds 18 * n_layers u64 written by the walk just synchronized.
            unsafe {
                cudarc::driver::sys::cuMemcpyDtoH_v2(
                    host.as_mut_ptr() as *mut std::ffi::c_void,
                    t.ptr(),
                    8 * host.len(),
                )
            }
            .result()
            .map_err(|e| self.err(&op(), e))?;
            let mut acc = w.trace_sum.lock().map_err(|_| self.err(&op(), "trace"))?;
            for l in 0..w.n_layers {
                let h = &host[18 * l..18 * l + 18];
                let d = |a: usize, b: usize| h[b].saturating_sub(h[a]) as f64;
                // ready->done, done->synced, synced->fetched for each matvec phase, and attention
                let parts = [
                    d(0, 1),
                    d(1, 2),
                    d(2, 3),
                    d(3, 16),
                    d(16, 17),
                    d(17, 4),
                    d(4, 5),
                    d(5, 6),
                    d(6, 7),
                    d(7, 8),
                    d(8, 9),
                    d(9, 10),
                    d(10, 11),
                    d(11, 12),
                    d(12, 13),
                    d(13, 14),
                    d(14, 15),
                ];
                for (a, p) in acc.iter_mut().zip(parts) {
                    *a += p;
                }
            }
            acc[17] += 1.0;
        }
        Ok(())
    }
}

/// One cluster of `cluster` blocks of 256 threads with `smem` bytes of dynamic shared memory.
fn walk_cfg(cluster: usize, smem: usize) -> BResult<LaunchConfig> {
    Ok(LaunchConfig {
        grid_dim: (to_u32(cluster, "walk blocks")?, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: to_u32(smem, "walk shared memory")?,
    })
}
