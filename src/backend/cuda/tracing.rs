//! `--trace` on CUDA: each piece of work timed by the device.
//!
//! A traced stream records a timing event (created with timing enabled, separate from the
//! runtime's ordering events, which stay as they are and keep timing disabled) before and
//! after each piece the runtime names (`Backend::trace_begin`/`trace_end`), before and after
//! each event wait, and after each ordering record. Nothing reads them while the walk runs:
//! at the next phase (the previous arm has finished its reads) or when the trace is read,
//! each is converted to a time with cuEventElapsedTime against its device's base event,
//! which is recorded on the device's first traced stream when that stream is made and
//! aligned to the host clock read right after the base completed (`base_us`): on one device
//! every time is a device-clock difference; between devices the alignment error is the
//! base synchronize's latency (microseconds).
//!
//! The timing events come from a pool per device: a phase reuses the events of the phases
//! before it, so a trace holds one phase's worth at a time. Within a phase the pool only
//! grows: reading the pending times mid-phase and re-recording their events would move the
//! start of a piece still open (and a wait's start under its end) to a later time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{sys, CudaEvent};

use super::{drv, op_err, DevCtx, GpuEvent, GpuStream};
use crate::backend::trace::{Flow, Piece, Slice, Tracer};
use crate::backend::BResult;

/// Epochs are unique across every trace of the process, so a stamp kept from an earlier
/// epoch or trace (an ordering event's last record) is never read from a reused event.
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// A timing event recorded on a stream: (device, pool index, epoch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stamp {
    dev: usize,
    idx: usize,
    epoch: u64,
}

struct DevTrace {
    base: CudaEvent,
    /// The tracer's clock (µs) when `base` had completed.
    base_us: f64,
    events: Vec<CudaEvent>,
    /// Pool entries not recorded in this epoch.
    free: Vec<usize>,
}

enum Pending {
    Slice {
        track: usize,
        name: &'static str,
        phase: usize,
        step: Option<u64>,
        piece: Option<Piece>,
        start: Stamp,
        end: Stamp,
    },
    Flow {
        src_track: usize,
        src: Stamp,
        dst_track: usize,
        dst: Stamp,
    },
}

struct State {
    devs: Vec<Option<DevTrace>>,
    pending: Vec<Pending>,
    epoch: u64,
    /// The first failure of a call that cannot return one (`trace_begin`, `trace_phase`);
    /// `CudaBackend::trace` reports it.
    error: Option<String>,
}

/// One trace: the shared `Tracer` it fills and the timing events not yet read.
pub struct CudaTrace {
    pub tracer: Arc<Tracer>,
    state: Mutex<State>,
}

/// A traced stream's handle: its trace, track, current step and open piece.
pub(crate) struct StreamTrace {
    trace: Arc<CudaTrace>,
    track: usize,
    /// Walk step plus one (0: none), as the CPU stream's tag.
    step: AtomicU64,
    open: Mutex<Option<Open>>,
}

/// A piece begun on a stream: the piece, its phase and step, and its start stamp.
type Open = (Piece, usize, Option<u64>, Stamp);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CudaTrace {
    pub fn new(n_devices: usize) -> CudaTrace {
        CudaTrace {
            tracer: Arc::new(Tracer::new()),
            state: Mutex::new(State {
                devs: (0..n_devices).map(|_| None).collect(),
                pending: Vec::new(),
                epoch: EPOCH.fetch_add(1, Ordering::Relaxed),
                error: None,
            }),
        }
    }

    /// A new stream's trace handle; the stream's device gets its base event now (recorded
    /// on this stream, which has nothing queued yet) if it has none.
    pub(crate) fn attach(
        self: &Arc<Self>,
        dx: &Arc<DevCtx>,
        s: &Arc<cudarc::driver::CudaStream>,
        label: &str,
    ) -> BResult<StreamTrace> {
        let mut st = lock(&self.state);
        let dev = dx.dev;
        if st.devs[dev].is_none() {
            let base = timing_event(dx)?;
            drv(base.record(s), || format!("device {dev}: trace base event"))?;
            drv(base.synchronize(), || {
                format!("device {dev}: trace base event")
            })?;
            st.devs[dev] = Some(DevTrace {
                base,
                base_us: self.tracer.now_us(),
                events: Vec::new(),
                free: Vec::new(),
            });
        }
        Ok(StreamTrace {
            trace: self.clone(),
            track: self.tracer.add_track(label),
            step: AtomicU64::new(0),
            open: Mutex::new(None),
        })
    }

    /// Records a pooled timing event on `s` (after everything enqueued on it so far).
    fn stamp(&self, s: &GpuStream) -> BResult<Stamp> {
        let mut st = lock(&self.state);
        let dev = s.dx.dev;
        let epoch = st.epoch;
        let d = st.devs[dev]
            .as_mut()
            .ok_or_else(|| op_err(format!("trace: device {dev} has no base event")))?;
        let idx = match d.free.pop() {
            Some(i) => i,
            None => {
                d.events.push(timing_event(&s.dx)?);
                d.events.len() - 1
            }
        };
        drv(d.events[idx].record(&s.s), || {
            format!("trace: timing event on stream {}", s.label())
        })?;
        Ok(Stamp { dev, idx, epoch })
    }

    fn keep_error(&self, r: BResult<()>) {
        if let Err(e) = r {
            lock(&self.state).error.get_or_insert(e.to_string());
        }
    }

    /// Reads every pending time into the tracer and returns the pool (the walks that
    /// recorded them have finished or are waited for here: elapsed_ms synchronizes each
    /// event first).
    fn resolve(&self, st: &mut State) -> BResult<()> {
        let pending = std::mem::take(&mut st.pending);
        let devs = &st.devs;
        let time = |p: Stamp| -> BResult<f64> {
            let d = devs[p.dev]
                .as_ref()
                .ok_or_else(|| op_err(format!("trace: device {} has no base", p.dev)))?;
            let ms = drv(d.base.elapsed_ms(&d.events[p.idx]), || {
                format!("trace: reading a timing event on device {}", p.dev)
            })?;
            Ok(d.base_us + f64::from(ms) * 1e3)
        };
        for p in pending {
            match p {
                Pending::Slice {
                    track,
                    name,
                    phase,
                    step,
                    piece,
                    start,
                    end,
                } => self.tracer.push_slice(Slice {
                    track,
                    name,
                    phase,
                    step,
                    piece,
                    start_us: time(start)?,
                    end_us: time(end)?,
                }),
                Pending::Flow {
                    src_track,
                    src,
                    dst_track,
                    dst,
                } => self.tracer.push_flow(Flow {
                    src_track,
                    src_us: time(src)?,
                    dst_track,
                    dst_us: time(dst)?,
                }),
            }
        }
        for d in st.devs.iter_mut().flatten() {
            d.free = (0..d.events.len()).collect();
        }
        st.epoch = EPOCH.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Reads every pending time now (the caller's walks have finished); the first error
    /// this trace kept, if any.
    pub fn finish(&self) -> BResult<()> {
        let mut st = lock(&self.state);
        if let Some(e) = &st.error {
            return Err(op_err(e.clone()));
        }
        self.resolve(&mut st)
    }

    /// A new phase: the previous one's walks have finished, so its times are read now and
    /// its events return to the pool.
    pub fn phase(&self, name: &str) {
        self.tracer.set_phase(name);
        let r = self.resolve(&mut lock(&self.state));
        self.keep_error(r);
    }

    fn push(&self, p: Pending) {
        lock(&self.state).pending.push(p);
    }

    /// The stamp `ev`'s last record left, if it belongs to this trace's current epoch.
    fn current(&self, s: Stamp) -> bool {
        lock(&self.state).epoch == s.epoch
    }
}

fn timing_event(dx: &DevCtx) -> BResult<CudaEvent> {
    drv(
        dx.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)),
        || format!("device {}: creating a timing event", dx.dev),
    )
}

impl StreamTrace {
    pub(crate) fn set_step(&self, step: Option<u64>) {
        self.step
            .store(step.map_or(0, |s| s + 1), Ordering::Relaxed);
    }

    fn step(&self) -> Option<u64> {
        self.step.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Opens `piece` on `s` (closing one left open).
    pub(crate) fn begin(&self, s: &GpuStream, piece: Piece) {
        self.end(s);
        let t = &self.trace;
        match t.stamp(s) {
            Ok(start) => {
                *lock(&self.open) = Some((piece, t.tracer.phase(), self.step(), start));
            }
            Err(e) => t.keep_error(Err(e)),
        }
    }

    /// Closes the open piece on `s`, if any.
    pub(crate) fn end(&self, s: &GpuStream) {
        let Some((piece, phase, step, start)) = lock(&self.open).take() else {
            return;
        };
        let t = &self.trace;
        match t.stamp(s) {
            Ok(end) => t.push(Pending::Slice {
                track: self.track,
                name: piece.name(),
                phase,
                step,
                piece: Some(piece),
                start,
                end,
            }),
            Err(e) => t.keep_error(Err(e)),
        }
    }

    /// After an ordering record of `ev` on `s`: the stamp a later wait's flow starts from.
    pub(crate) fn recorded(&self, s: &GpuStream, ev: &GpuEvent) -> BResult<()> {
        let stamp = self.trace.stamp(s)?;
        *lock(&ev.last) = Some((self.track, stamp));
        Ok(())
    }

    /// `wait` (the ordering wait itself) between two stamps on `s`: an "event wait" slice
    /// and a flow from the record that releases it. A wait on an event this trace never saw
    /// recorded (or recorded in an earlier phase) only gets its slice.
    pub(crate) fn wait(
        &self,
        s: &GpuStream,
        ev: &GpuEvent,
        wait: impl FnOnce() -> BResult<()>,
    ) -> BResult<()> {
        let t = &self.trace;
        let src = *lock(&ev.last);
        let start = t.stamp(s)?;
        wait()?;
        let end = t.stamp(s)?;
        t.push(Pending::Slice {
            track: self.track,
            name: "event wait",
            phase: t.tracer.phase(),
            step: self.step(),
            piece: lock(&self.open).map(|o| o.0),
            start,
            end,
        });
        if let Some((src_track, src)) = src.filter(|&(_, p)| t.current(p)) {
            t.push(Pending::Flow {
                src_track,
                src,
                dst_track: self.track,
                dst: end,
            });
        }
        Ok(())
    }
}
