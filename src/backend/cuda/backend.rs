//! The `Backend` trait on CUDA: streams, events, copies, uploads, downloads, the NCCL link,
//! caches and engines, each a thin, checked call into the driver. Laws it serves: every
//! operation is enqueued on the stream named and only there (after that stream's jitter),
//! so the runtime's events are the only cross-stream order; every range is checked before a
//! driver call touches it; a download returns only after its stream finished the copy;
//! errors name the stream, device and operation.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::device::{can_access_peer, measure_bandwidth};
use super::{
    alloc_zeroed_on, drv, mem, nccl, op_err, tracing, upload_slice, CudaBackend, CudaCache,
    CudaEngine, GpuBuf, GpuEvent, GpuStream, PinnedF32,
};
use crate::backend::trace::{Piece, Tracer};
use crate::backend::{BResult, Backend, EngineSpec, Link, Residency};
use crate::model::Model;

impl Backend for CudaBackend {
    type Buf = GpuBuf;
    type Stream = GpuStream;
    type Event = GpuEvent;
    type HostBuf = PinnedF32;
    type Cache = CudaCache;
    type Engine = CudaEngine;

    fn kind(&self) -> &'static str {
        "cuda"
    }

    fn device_count(&self) -> usize {
        self.n_devices
    }

    fn device_name(&self, dev: usize) -> String {
        let name = result::device::get(dev as i32).and_then(result::device::get_name);
        match name {
            Ok(n) => format!("cuda{dev} {n}"),
            Err(e) => format!("cuda{dev} (name unavailable: {e})"),
        }
    }

    fn peer_ok(&self, a: usize, b: usize) -> bool {
        // Peer copy needs access both ways (cuDeviceCanAccessPeer, probed once per call at
        // placement time, never per step). All memory here is plain cuMemAlloc (no
        // stream-ordered pools), so cuCtxEnablePeerAccess alone maps it: no pool grant.
        a == b || (can_access_peer(a, b) && can_access_peer(b, a))
    }

    fn enable_peer(&self, a: usize, b: usize) -> BResult<()> {
        if a == b {
            return Ok(());
        }
        if !self.peer_ok(a, b) {
            return Err(op_err(format!(
                "device {a} <-> device {b}: cuDeviceCanAccessPeer refuses the pair (use --transport host)"
            )));
        }
        let (da, db) = (self.device(a)?, self.device(b)?);
        for (from, to) in [(&da, &db), (&db, &da)] {
            drv(from.ctx.bind_to_thread(), || {
                format!("device {}: bind context for peer access", from.dev)
            })?;
            // SAFETY: both contexts are live primary contexts held by this backend's device
            // table; the call only changes the current context's peer mappings.
            let rc = unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) };
            match rc {
                sys::cudaError_enum::CUDA_SUCCESS
                | sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                other => {
                    return Err(op_err(format!(
                        "cuCtxEnablePeerAccess(device {} -> device {}) refused: {other:?}",
                        from.dev, to.dev
                    )))
                }
            }
        }
        Ok(())
    }

    fn new_stream(&self, dev: usize, label: &str) -> BResult<GpuStream> {
        let dx = self.device(dev)?;
        let s = drv(dx.ctx.new_stream(), || {
            format!("device {dev}: creating stream {label}")
        })?;
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let jitter = (self.jitter_us > 0).then(|| {
            Mutex::new((
                self.jitter_us.saturating_mul(1000),
                ChaCha8Rng::seed_from_u64(self.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ))
        });
        let label = format!("{label}@cuda{dev}");
        let trace = match self.current_trace() {
            Some(t) => Some(t.attach(&dx, &s, &label)?),
            None => None,
        };
        Ok(GpuStream {
            s,
            dx,
            label,
            jitter,
            trace,
        })
    }

    fn new_event(&self, dev: usize) -> BResult<GpuEvent> {
        let dx = self.device(dev)?;
        let ev = drv(dx.ctx.new_event(None), || {
            format!("device {dev}: creating an event")
        })?;
        Ok(GpuEvent {
            ev,
            dev,
            last: Mutex::new(None),
            gen: std::sync::atomic::AtomicU32::new(0),
            word: std::sync::OnceLock::new(),
        })
    }

    fn record(&self, ev: &GpuEvent, s: &GpuStream) -> BResult<()> {
        s.jitter()?;
        drv(ev.ev.record(&s.s), || {
            format!("record event (device {}) on stream {}", ev.dev, s.label())
        })?;
        // Where a fault hold watches this event, its generation is stored behind the record.
        ev.count_record(s)?;
        // Traced: a separate timing event right behind the ordering record (which stays as
        // it is), where the flows of the waits this record releases start.
        match &s.trace {
            Some(t) => t.recorded(s, ev),
            None => Ok(()),
        }
    }

    fn wait(&self, s: &GpuStream, ev: &GpuEvent) -> BResult<()> {
        // cuStreamWaitEvent on a never-recorded event is a no-op, as the trait requires.
        let wait = || {
            drv(s.s.wait(&ev.ev), || {
                format!("stream {} wait on event (device {})", s.label(), ev.dev)
            })
        };
        match &s.trace {
            Some(t) => t.wait(s, ev, wait),
            None => wait(),
        }
    }

    fn hold_until_next(
        &self,
        s: &GpuStream,
        ev: &GpuEvent,
        limit: std::time::Duration,
    ) -> BResult<()> {
        // Faults only: after this stream's jitter, as every operation on it.
        s.jitter()?;
        let dx = self.device(ev.dev)?;
        ev.hold(s, &dx.ctx, limit)
    }

    fn start_trace(&self) -> Option<Arc<Tracer>> {
        let t = Arc::new(tracing::CudaTrace::new(self.n_devices));
        let tracer = t.tracer.clone();
        *self.trace.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
        Some(tracer)
    }

    fn trace(&self) -> BResult<Option<Arc<Tracer>>> {
        match self.current_trace() {
            Some(t) => {
                t.finish()?;
                Ok(Some(t.tracer.clone()))
            }
            None => Ok(None),
        }
    }

    fn trace_step(&self, s: &GpuStream, step: Option<u64>) {
        if let Some(t) = &s.trace {
            t.set_step(step);
        }
    }

    fn expect_rows(&self, rows: usize) {
        self.rows_hint
            .fetch_max(rows, std::sync::atomic::Ordering::Relaxed);
    }

    fn trace_phase(&self, name: &str) {
        if let Some(t) = self.current_trace() {
            t.phase(name);
        }
    }

    fn trace_label(&self, step: u64, label: &dyn Fn() -> String) {
        if let Some(t) = self.current_trace() {
            t.tracer.label_step(step, label());
        }
    }

    fn trace_begin(&self, s: &GpuStream, piece: Piece) {
        if let Some(t) = &s.trace {
            t.begin(s, piece);
        }
    }

    fn trace_end(&self, s: &GpuStream) {
        if let Some(t) = &s.trace {
            t.end(s);
        }
    }

    fn synchronize(&self, s: &GpuStream) -> BResult<()> {
        // A piece open on `s` ends before the host blocks (its wake-up is not the work).
        self.trace_end(s);
        drv(s.s.synchronize(), || {
            format!("synchronize stream {} (device {})", s.label(), s.device())
        })
    }

    fn alloc_zeroed(&self, dev: usize, n: usize, s: &GpuStream) -> BResult<GpuBuf> {
        let dx = self.device(dev)?;
        alloc_zeroed_on(&dx, n, s)
    }

    fn alloc_host(&self, n: usize, s: &GpuStream) -> BResult<GpuBuf> {
        let bytes = n
            .checked_mul(4)
            .ok_or_else(|| op_err(format!("host staging of {n} values overflows")))?;
        let raw = mem::Raw::host(
            &s.dx.ctx,
            bytes,
            &format!("host staging for stream {}", s.label()),
        )?;
        Ok(GpuBuf {
            raw,
            len: n,
            dev: None,
        })
    }

    fn buf_len(&self, b: &GpuBuf) -> usize {
        b.len()
    }

    fn copy(
        &self,
        s: &GpuStream,
        src: &GpuBuf,
        src_off: usize,
        dst: &GpuBuf,
        dst_off: usize,
        n: usize,
    ) -> BResult<()> {
        mem::check_range("copy source", src, src_off, n)?;
        mem::check_range("copy destination", dst, dst_off, n)?;
        if n == 0 {
            return Ok(());
        }
        s.jitter()?;
        drv(s.dx.ctx.bind_to_thread(), || {
            format!("copy on {}: bind context", s.label())
        })?;
        // SAFETY: both ranges lie inside live allocations (checked above; the buffers are
        // borrowed for this call and any later free synchronizes their context first, see
        // mem.rs). Under unified addressing cuMemcpyAsync infers device, peer device or
        // pinned host for each pointer. The copy runs in `s`'s order.
        let r =
            unsafe { sys::cuMemcpyAsync(dst.at(dst_off), src.at(src_off), 4 * n, s.s.cu_stream()) }
                .result();
        drv(r, || {
            format!(
                "copy of {n} values ({} -> {}) on stream {}",
                place(src),
                place(dst),
                s.label()
            )
        })
    }

    fn upload(&self, s: &GpuStream, host: &[f32], dst: &GpuBuf, off: usize) -> BResult<()> {
        mem::check_range("upload destination", dst, off, host.len())?;
        s.jitter()?;
        upload_slice(s, host, dst, off)
    }

    fn alloc_readback(&self, dev: usize, n: usize) -> BResult<PinnedF32> {
        let dx = self.device(dev)?;
        PinnedF32::new(
            &dx.ctx,
            n,
            &format!("readback buffer of {n} values for device {dev}"),
        )
    }

    fn download_into<'h>(
        &self,
        s: &GpuStream,
        src: &GpuBuf,
        off: usize,
        dst: &'h mut PinnedF32,
        n: usize,
    ) -> BResult<&'h [f32]> {
        mem::check_range("download source", src, off, n)?;
        if n > dst.len() {
            return Err(op_err(format!(
                "download of {n} values on stream {} into a readback buffer of {}",
                s.label(),
                dst.len()
            )));
        }
        if src.raw.is_host() || n == 0 {
            // Host staging (or nothing to copy): the stream's order first, then a plain
            // host read of what the stream wrote.
            self.synchronize(s)?;
            if n > 0 {
                src.raw.read_host(4 * off, dst.slice_mut(n))?;
            }
            return Ok(dst.slice(n));
        }
        drv(s.dx.ctx.bind_to_thread(), || {
            format!("download on {}: bind context", s.label())
        })?;
        let target = dst.dma_target();
        // SAFETY: the source range lies inside a live device allocation (checked above);
        // the destination is `dst`'s pinned allocation of at least 4 * n bytes (checked
        // above), held by `&mut` until the synchronize below has finished the copy, so no
        // host reference reads it meanwhile. The copy runs in `s`'s order.
        let r = unsafe { sys::cuMemcpyDtoHAsync_v2(target, src.at(off), 4 * n, s.s.cu_stream()) }
            .result();
        drv(r, || {
            format!("download of {n} values on stream {}", s.label())
        })?;
        self.synchronize(s)?;
        Ok(dst.slice(n))
    }

    fn link_send(
        &self,
        s: &GpuStream,
        src: &GpuBuf,
        n: usize,
        link: &Link,
        step: u64,
    ) -> BResult<()> {
        mem::check_range("link send source", src, 0, n)?;
        let l = nccl_on(s, link, "send")?;
        // SAFETY: `src[0..n]` lies inside a live allocation on this stream's device (checked
        // above; any free synchronizes its context first, see mem.rs); the stream belongs to
        // the context `nccl_on` bound; the send runs in `s`'s order, after the stage's
        // compute (RAW), and the stage's next op waits for it on that stream (WAR).
        let r = unsafe { l.send(src.at(0), n, s.s.cu_stream() as _) };
        r.map_err(|e| op_err(format!("{e} on stream {}, step {step}", s.label())))
    }

    fn link_recv(
        &self,
        s: &GpuStream,
        dst: &GpuBuf,
        n: usize,
        link: &Link,
        step: u64,
    ) -> BResult<()> {
        mem::check_range("link receive destination", dst, 0, n)?;
        let l = nccl_on(s, link, "recv")?;
        // SAFETY: as link_send; the runtime orders every other access to `dst` behind this
        // recv with the link's arrived event (RAW) and this recv behind the stage's consumed
        // event (WAR).
        let r = unsafe { l.recv(dst.at(0), n, s.s.cu_stream() as _) };
        r.map_err(|e| op_err(format!("{e} on stream {}, step {step}", s.label())))
    }

    fn residency(&self, eng: &CudaEngine, cache: &CudaCache) -> BResult<Residency> {
        let mut r = Residency::default();
        eng.residency(&mut r)?;
        cache.residency(&mut r.cache)?;
        Ok(r)
    }

    fn new_cache(
        &self,
        dev: usize,
        model: &Arc<Model>,
        layers: Range<usize>,
        rows: usize,
        ctx: usize,
        s: &GpuStream,
    ) -> BResult<CudaCache> {
        let dx = self.device(dev)?;
        CudaCache::new(&dx, model, layers, rows, ctx, s)
    }

    fn clear_cache(&self, cache: &CudaCache, s: &GpuStream) -> BResult<()> {
        cache.clear(s)
    }

    fn new_engine(
        &self,
        dev: usize,
        model: &Arc<Model>,
        spec: EngineSpec,
        s: &GpuStream,
    ) -> BResult<CudaEngine> {
        let dx = self.device(dev)?;
        let mma = self
            .mma
            .select(model.cfg.n_embd, self.mma_rows, self.mma_batch);
        let prepare_rows = spec
            .max_rows
            .max(self.rows_hint.load(std::sync::atomic::Ordering::Relaxed));
        CudaEngine::new(&dx, model, spec, s, self.graphs, mma, prepare_rows)
    }

    fn bandwidth_gbs(&self, dev: usize) -> BResult<Option<f64>> {
        let dx = self.device(dev)?;
        measure_bandwidth(&dx).map(Some)
    }

    fn launches(&self) -> u64 {
        match self.devs.lock() {
            Ok(devs) => devs
                .iter()
                .flatten()
                .map(|d| d.launches.load(Ordering::Relaxed))
                .sum(),
            Err(_) => 0,
        }
    }
}

/// The NCCL link behind `link` (an ipc link is refused), with `s`'s jitter applied and its
/// context bound to this thread (NCCL enqueues on the current context's stream).
fn nccl_on<'l>(s: &GpuStream, link: &'l Link, what: &str) -> BResult<&'l nccl::NcclLink> {
    let Link::Nccl(l) = link else {
        return Err(crate::backend::no_link("cuda", link));
    };
    s.jitter()?;
    drv(s.dx.ctx.bind_to_thread(), || {
        format!("link {what} on {}: bind context", s.label())
    })?;
    Ok(l)
}

fn place(b: &GpuBuf) -> String {
    match b.device() {
        Some(d) => format!("device {d}"),
        None => "host staging".into(),
    }
}
