//! The CPU backend: real concurrency with CUDA's ordering semantics.
//!
//! - A stream is a worker thread executing a queue of closures in order.
//! - An event is a generation counter under a mutex with a condition variable: `record`
//!   assigns the next generation on the host and the stream publishes it when it gets there;
//!   `wait` snapshots the generation on the host and the stream blocks until it is reached.
//!   The mutex hand-off is the happens-before edge, exactly what cuEventRecord /
//!   cuStreamWaitEvent give on a GPU.
//! - Device memory is an array of `AtomicU32` (f32 bits) accessed with `Relaxed` ordering: a
//!   load or store is an ordinary move, so a missing event really races (stale or torn rows
//!   show up in the logits), yet it is defined behaviour and needs no `unsafe`. The only
//!   ordering comes from the events, as on the GPU.
//! - "Devices" are CPU domains (the count is a backend parameter): stages on two of them use
//!   the host-bounce transport, as two GPUs without peer access would.
//! - `jitter_us` delays every stream operation by a seeded random 0..jitter_us µs: a schedule
//!   explorer. A correct runtime gives identical logits under any jitter; a missing ordering
//!   edge turns into a FAIL far more often than under the machine's natural timing.

mod engine;
mod mem;
mod stream;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use engine::{CpuCache, CpuEngine};
pub use mem::{DevMem, HostMem};
pub use stream::{CpuEvent, CpuStream};

use super::trace::{Piece, Tracer};
use super::{BResult, Backend, BackendError, Engine, EngineSpec, Link, Residency};
use crate::model::Model;

pub struct CpuBackend {
    n_devices: usize,
    jitter_us: u64,
    seed: u64,
    next_stream: AtomicU64,
    /// `--trace`: every stream made while this is set records what it runs.
    tracer: Mutex<Option<Arc<Tracer>>>,
}

impl CpuBackend {
    pub const DEFAULT_DEVICES: usize = 8;

    pub fn new(n_devices: usize, jitter_us: u64, seed: u64) -> CpuBackend {
        CpuBackend {
            n_devices,
            jitter_us,
            seed,
            next_stream: AtomicU64::new(0),
            tracer: Mutex::new(None),
        }
    }

    fn tracer(&self) -> Option<Arc<Tracer>> {
        self.tracer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn check_dev(&self, dev: usize) -> BResult<()> {
        if dev < self.n_devices {
            Ok(())
        } else {
            Err(BackendError::NoSuchDevice {
                backend: "cpu",
                dev,
                count: self.n_devices,
            })
        }
    }
}

pub(crate) fn op_err(what: String) -> BackendError {
    BackendError::Op {
        backend: "cpu",
        what,
    }
}

impl Backend for CpuBackend {
    type Buf = Arc<DevMem>;
    type Stream = CpuStream;
    type Event = CpuEvent;
    type HostBuf = HostMem;
    type Cache = CpuCache;
    type Engine = CpuEngine;

    fn kind(&self) -> &'static str {
        "cpu"
    }

    fn device_count(&self) -> usize {
        self.n_devices
    }

    fn device_name(&self, dev: usize) -> String {
        format!("cpu{dev} ({} threads)", rayon::current_num_threads())
    }

    fn peer_ok(&self, a: usize, b: usize) -> bool {
        // CPU domains have no peer copy engine: a cross-domain boundary bounces via host.
        a == b
    }

    fn new_stream(&self, dev: usize, label: &str) -> BResult<CpuStream> {
        self.check_dev(dev)?;
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        CpuStream::spawn(
            format!("{label}@cpu{dev}"),
            self.jitter_us,
            self.seed ^ (id.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            self.tracer(),
        )
    }

    fn new_event(&self, dev: usize) -> BResult<CpuEvent> {
        self.check_dev(dev)?;
        Ok(CpuEvent::new())
    }

    fn record(&self, ev: &CpuEvent, s: &CpuStream) -> BResult<()> {
        let gen = ev.next_generation();
        let ev = ev.clone();
        let tr = s.trace().cloned();
        s.enqueue("event record", move || {
            ev.complete(gen, tr.as_ref());
            Ok(())
        })
    }

    fn wait(&self, s: &CpuStream, ev: &CpuEvent) -> BResult<()> {
        let gen = ev.recorded();
        if gen == 0 {
            return Ok(()); // never recorded: a defined no-op, as cuStreamWaitEvent
        }
        let ev = ev.clone();
        let label = s.label_arc();
        let tr = s.trace().cloned();
        s.enqueue("event wait", move || {
            ev.block_until(gen, &label)?;
            if let Some(t) = &tr {
                ev.trace_flow(gen, t);
            }
            Ok(())
        })
    }

    fn hold_until_next(
        &self,
        s: &CpuStream,
        ev: &CpuEvent,
        limit: std::time::Duration,
    ) -> BResult<()> {
        // The next record's generation: `record` hands out generations in host order.
        let gen = ev.recorded() + 1;
        let ev = ev.clone();
        s.enqueue("fault hold", move || {
            ev.block_until_or(gen, limit);
            Ok(())
        })
    }

    fn start_trace(&self) -> Option<Arc<Tracer>> {
        let t = Arc::new(Tracer::new());
        *self.tracer.lock().unwrap_or_else(|p| p.into_inner()) = Some(t.clone());
        Some(t)
    }

    fn trace(&self) -> BResult<Option<Arc<Tracer>>> {
        // Every slice is pushed by the worker as its op finishes: nothing to read back.
        Ok(self.tracer())
    }

    fn trace_step(&self, s: &CpuStream, step: Option<u64>) {
        s.set_step(step);
    }

    fn trace_phase(&self, name: &str) {
        if let Some(t) = self.tracer() {
            t.set_phase(name);
        }
    }

    fn trace_label(&self, step: u64, label: &dyn Fn() -> String) {
        if let Some(t) = self.tracer() {
            t.label_step(step, label());
        }
    }

    fn trace_begin(&self, s: &CpuStream, piece: Piece) {
        s.set_piece(Some(piece));
    }

    fn trace_end(&self, s: &CpuStream) {
        s.set_piece(None);
    }

    fn synchronize(&self, s: &CpuStream) -> BResult<()> {
        s.synchronize()
    }

    fn alloc_zeroed(&self, dev: usize, n: usize, s: &CpuStream) -> BResult<Arc<DevMem>> {
        self.check_dev(dev)?;
        alloc_on(Some(dev), n, s)
    }

    fn alloc_host(&self, n: usize, s: &CpuStream) -> BResult<Arc<DevMem>> {
        alloc_on(None, n, s)
    }

    fn buf_len(&self, b: &Arc<DevMem>) -> usize {
        b.len()
    }

    fn copy(
        &self,
        s: &CpuStream,
        src: &Arc<DevMem>,
        src_off: usize,
        dst: &Arc<DevMem>,
        dst_off: usize,
        n: usize,
    ) -> BResult<()> {
        mem::check_range("copy source", src, src_off, n)?;
        mem::check_range("copy destination", dst, dst_off, n)?;
        let (src, dst) = (src.clone(), dst.clone());
        s.enqueue("copy", move || {
            let mut tmp = vec![0f32; n];
            src.load(src_off, &mut tmp);
            dst.store(dst_off, &tmp);
            Ok(())
        })
    }

    fn upload(&self, s: &CpuStream, host: &[f32], dst: &Arc<DevMem>, off: usize) -> BResult<()> {
        mem::check_range("upload destination", dst, off, host.len())?;
        let dst = dst.clone();
        // The op runs later on the worker: it owns its copy of the values (as CUDA's driver
        // stages a pageable source before returning), so the caller may reuse `host`.
        let host = host.to_vec();
        s.enqueue("upload", move || {
            dst.store(off, &host);
            Ok(())
        })
    }

    fn alloc_readback(&self, dev: usize, n: usize) -> BResult<HostMem> {
        self.check_dev(dev)?;
        Ok(HostMem::new(n))
    }

    fn download_into<'h>(
        &self,
        s: &CpuStream,
        src: &Arc<DevMem>,
        off: usize,
        dst: &'h mut HostMem,
        n: usize,
    ) -> BResult<&'h [f32]> {
        mem::check_range("download source", src, off, n)?;
        if n > dst.len() {
            return Err(op_err(format!(
                "download of {n} values on {} into a readback buffer of {}",
                s.label(),
                dst.len()
            )));
        }
        // The copy is an op on `s` (ordered by the stream's event waits, exactly as the
        // CUDA DMA), writing the host buffer through its own handle.
        let (src, host) = (src.clone(), dst.handle());
        s.enqueue("download", move || {
            let mut h = host.lock().unwrap_or_else(|p| p.into_inner());
            src.load(off, &mut h[..n]);
            Ok(())
        })?;
        s.synchronize()?;
        // The worker consumed (dropped) the op, and with it its handle, before the
        // synchronize marker behind it ran: the host holds the only handle again.
        dst.slice(n).ok_or_else(|| {
            op_err(format!(
                "download on {}: the readback buffer is still held by a queued op",
                s.label()
            ))
        })
    }

    fn new_cache(
        &self,
        dev: usize,
        model: &Arc<Model>,
        layers: Range<usize>,
        rows: usize,
        ctx: usize,
        s: &CpuStream,
    ) -> BResult<CpuCache> {
        self.check_dev(dev)?;
        let kv_dim = model.cfg.kv_dim();
        let n = crate::backend::cache_len("cpu", model, rows, ctx)?;
        let mut k = Vec::with_capacity(layers.len());
        let mut v = Vec::with_capacity(layers.len());
        for _ in layers.clone() {
            k.push(alloc_on(Some(dev), n, s)?);
            v.push(alloc_on(Some(dev), n, s)?);
        }
        Ok(CpuCache {
            layers,
            rows,
            ctx,
            kv_dim,
            k,
            v,
        })
    }

    fn clear_cache(&self, cache: &CpuCache, s: &CpuStream) -> BResult<()> {
        let bufs: Vec<Arc<DevMem>> = cache.k.iter().chain(&cache.v).cloned().collect();
        s.enqueue("cache reset", move || {
            for b in &bufs {
                b.fill(0.0);
            }
            Ok(())
        })
    }

    fn shares_host_weights(&self) -> bool {
        true
    }

    fn link_send(
        &self,
        s: &CpuStream,
        src: &Arc<DevMem>,
        n: usize,
        link: &Link,
        step: u64,
    ) -> BResult<()> {
        mem::check_range("link send source", src, 0, n)?;
        let Link::Ipc(l) = link else {
            return Err(super::no_link("cpu", link));
        };
        let (src, l) = (src.clone(), l.clone());
        // In stream order: the values read here are those every earlier op on `s` wrote.
        s.enqueue("link send", move || {
            let mut v = vec![0f32; n];
            src.load(0, &mut v);
            l.send(step, &v)
        })
    }

    fn link_recv(
        &self,
        s: &CpuStream,
        dst: &Arc<DevMem>,
        n: usize,
        link: &Link,
        step: u64,
    ) -> BResult<()> {
        mem::check_range("link receive destination", dst, 0, n)?;
        let Link::Ipc(l) = link else {
            return Err(super::no_link("cpu", link));
        };
        let (dst, l) = (dst.clone(), l.clone());
        s.enqueue("link recv", move || {
            let v = l.recv(step, n)?;
            dst.store(0, &v);
            Ok(())
        })
    }

    fn residency(&self, eng: &CpuEngine, cache: &CpuCache) -> BResult<Residency> {
        let mut r = Residency::default();
        // The weights: the model's one host copy (`shares_host_weights`), never a domain's.
        let sp = eng.spec();
        let w = eng
            .model()
            .stage_weight_bytes(sp.layers.clone(), sp.embed, sp.head);
        Residency::tally(&mut r.weights, None, w);
        Residency::tally(&mut r.scratch, eng.x().device(), eng.x().bytes());
        for m in cache.k.iter().chain(&cache.v) {
            Residency::tally(&mut r.cache, m.device(), m.bytes());
        }
        Ok(r)
    }

    fn new_engine(
        &self,
        dev: usize,
        model: &Arc<Model>,
        spec: EngineSpec,
        s: &CpuStream,
    ) -> BResult<CpuEngine> {
        self.check_dev(dev)?;
        let n = spec.max_rows.checked_mul(model.cfg.n_embd).ok_or_else(|| {
            op_err(format!(
                "stage {} scratch of {} rows x {} overflows",
                spec.stage, spec.max_rows, model.cfg.n_embd
            ))
        })?;
        let x = alloc_on(Some(dev), n, s)?;
        Ok(CpuEngine::new(model.clone(), spec, x))
    }
}

/// Allocate on `dev`; the zero-fill is an operation on `s` (stream-ordered, as
/// cuMemAllocAsync followed by cuMemsetAsync): until it has run the memory holds a poison
/// pattern, so a reader that is not ordered behind `s` sees garbage, never a lucky zero.
fn alloc_on(dev: Option<usize>, n: usize, s: &CpuStream) -> BResult<Arc<DevMem>> {
    let m = Arc::new(DevMem::poisoned(n, dev));
    let z = m.clone();
    s.enqueue("alloc zero-fill", move || {
        z.fill(0.0);
        Ok(())
    })?;
    Ok(m)
}
