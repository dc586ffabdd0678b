//! CPU streams (worker threads with in-order queues) and events (generation counters).
//!
//! Ordering law implemented here: an operation enqueued on a stream runs after every
//! operation enqueued on that stream before it, and after the event generations it waits
//! for; nothing else orders it. The event's mutex is the only cross-thread edge.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::op_err;
use crate::backend::trace::{Flow, Piece, Slice, Tracer};
use crate::backend::BResult;

type Op = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// What the worker needs to trace an op: its name, and the phase, step and piece it was
/// enqueued under.
struct Queued {
    what: &'static str,
    op: Op,
    phase: usize,
    step: Option<u64>,
    piece: Option<Piece>,
}

/// A traced stream's tracer and track.
#[derive(Clone)]
pub(super) struct TraceHandle {
    pub tracer: Arc<Tracer>,
    pub track: usize,
}

/// How long a stream waits on an event before declaring the walk deadlocked (an event that
/// can never complete is a runtime bug; hanging CI for 90 minutes would hide it).
const EVENT_WAIT_LIMIT: Duration = Duration::from_secs(120);

struct Shared {
    /// First error raised by an operation on this stream (sticky, as CUDA's async errors).
    error: Mutex<Option<String>>,
}

pub struct CpuStream {
    /// Shared so per-op closures (event waits, every step) carry it without a copy.
    label: Arc<str>,
    tx: Mutex<Option<Sender<Queued>>>,
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
    trace: Option<TraceHandle>,
    /// The walk step the host is enqueueing for, plus one (0: none), stamped on each op.
    step_tag: AtomicU64,
    /// The piece of the step the host is enqueueing (traced streams only).
    piece: Mutex<Option<Piece>>,
}

impl CpuStream {
    pub(super) fn spawn(
        label: String,
        jitter_us: u64,
        seed: u64,
        tracer: Option<Arc<Tracer>>,
    ) -> BResult<CpuStream> {
        let (tx, rx) = channel::<Queued>();
        let trace = tracer.map(|tracer| TraceHandle {
            track: tracer.add_track(&label),
            tracer,
        });
        let tr = trace.clone();
        let shared = Arc::new(Shared {
            error: Mutex::new(None),
        });
        let sh = shared.clone();
        let name = label.clone();
        let worker = std::thread::Builder::new()
            .name(label.clone())
            .spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                while let Ok(Queued {
                    what,
                    op,
                    phase,
                    step,
                    piece,
                }) = rx.recv()
                {
                    if jitter_us > 0 {
                        std::thread::sleep(Duration::from_micros(rng.gen_range(0..=jitter_us)));
                    }
                    // After an error the stream keeps draining (waits must still complete so
                    // other streams are not wedged) but every later op is skipped.
                    if sh.error.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                        continue;
                    }
                    // Stamped here, on the worker, around the op itself: after the jitter
                    // delay, which is not work.
                    let start_us = tr.as_ref().map(|t| t.tracer.now_us());
                    let r = op();
                    if let (Some(t), Some(start_us)) = (&tr, start_us) {
                        t.tracer.push_slice(Slice {
                            track: t.track,
                            name: what,
                            phase,
                            step,
                            piece,
                            start_us,
                            end_us: t.tracer.now_us(),
                        });
                    }
                    if let Err(e) = r {
                        *sh.error.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(format!("{what} on stream {name}: {e}"));
                    }
                }
            })
            .map_err(|e| op_err(format!("cannot start stream thread {label}: {e}")))?;
        Ok(CpuStream {
            label: label.into(),
            tx: Mutex::new(Some(tx)),
            shared,
            worker: Mutex::new(Some(worker)),
            trace,
            step_tag: AtomicU64::new(0),
            piece: Mutex::new(None),
        })
    }

    pub(super) fn trace(&self) -> Option<&TraceHandle> {
        self.trace.as_ref()
    }

    /// Ops enqueued from now on belong to walk step `step` (None: not a step's work).
    pub(super) fn set_step(&self, step: Option<u64>) {
        self.step_tag
            .store(step.map_or(0, |s| s + 1), Ordering::Relaxed);
    }

    /// Ops enqueued from now on belong to `piece` (None: to no piece).
    pub(super) fn set_piece(&self, piece: Option<Piece>) {
        if self.trace.is_some() {
            *self.piece.lock().unwrap_or_else(|p| p.into_inner()) = piece;
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// The label as a shared handle, for an op that reports it from the worker.
    pub(super) fn label_arc(&self) -> Arc<str> {
        self.label.clone()
    }

    pub fn enqueue(
        &self,
        what: &'static str,
        op: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> BResult<()> {
        let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(tx) => tx
                .send(Queued {
                    what,
                    op: Box::new(op),
                    phase: self.trace.as_ref().map_or(0, |t| t.tracer.phase()),
                    step: self.step_tag.load(Ordering::Relaxed).checked_sub(1),
                    piece: match &self.trace {
                        Some(_) => *self.piece.lock().unwrap_or_else(|p| p.into_inner()),
                        None => None,
                    },
                })
                .map_err(|_| op_err(format!("{what}: stream {} has stopped", self.label))),
            None => Err(op_err(format!("{what}: stream {} has stopped", self.label))),
        }
    }

    pub fn synchronize(&self) -> BResult<()> {
        let (tx, rx) = channel::<()>();
        self.enqueue("synchronize", move || {
            let _ = tx.send(());
            Ok(())
        })?;
        // The marker op is skipped after an error, so a closed channel also means "errored".
        let _ = rx.recv();
        match self
            .shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            Some(e) => Err(op_err(e)),
            None => Ok(()),
        }
    }
}

impl Drop for CpuStream {
    fn drop(&mut self) {
        // Close the queue, then let the worker drain what was enqueued (stream destruction
        // in CUDA also completes pending work first).
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }
}

#[derive(Default)]
struct EvState {
    /// Generations handed out by `record` on the host.
    recorded: u64,
    /// Highest generation a stream has reached.
    completed: u64,
    /// Traced runs only: the last few completions as (generation, track, µs), so a wait can
    /// draw its flow from the record that released it.
    traced: Vec<(u64, usize, f64)>,
}

/// Completions kept for flows: a wait snapshots a generation at most a window of steps
/// behind the newest record, far fewer than this.
const TRACED_COMPLETIONS: usize = 64;

#[derive(Clone, Default)]
pub struct CpuEvent {
    inner: Arc<(Mutex<EvState>, Condvar)>,
}

impl CpuEvent {
    pub fn new() -> CpuEvent {
        CpuEvent::default()
    }

    pub(super) fn next_generation(&self) -> u64 {
        let mut st = self.inner.0.lock().unwrap_or_else(|p| p.into_inner());
        st.recorded += 1;
        st.recorded
    }

    pub(super) fn recorded(&self) -> u64 {
        self.inner
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .recorded
    }

    pub(super) fn complete(&self, gen: u64, trace: Option<&TraceHandle>) {
        let mut st = self.inner.0.lock().unwrap_or_else(|p| p.into_inner());
        st.completed = st.completed.max(gen);
        if let Some(t) = trace {
            if st.traced.len() == TRACED_COMPLETIONS {
                st.traced.remove(0);
            }
            st.traced.push((gen, t.track, t.tracer.now_us()));
        }
        self.inner.1.notify_all();
    }

    /// Traced: after `block_until(gen)` returned, the flow from the record of `gen` to now on
    /// `trace`'s track (none when that record is no longer kept).
    pub(super) fn trace_flow(&self, gen: u64, trace: &TraceHandle) {
        let src = {
            let st = self.inner.0.lock().unwrap_or_else(|p| p.into_inner());
            st.traced.iter().find(|c| c.0 == gen).copied()
        };
        if let Some((_, src_track, src_us)) = src {
            trace.tracer.push_flow(Flow {
                src_track,
                src_us,
                dst_track: trace.track,
                dst_us: trace.tracer.now_us(),
            });
        }
    }

    /// Blocks until generation `gen` completes or `limit` passes; whether it completed.
    pub(super) fn block_until_or(&self, gen: u64, limit: Duration) -> bool {
        let start = Instant::now();
        let mut st = self.inner.0.lock().unwrap_or_else(|p| p.into_inner());
        while st.completed < gen {
            let Some(left) = limit.checked_sub(start.elapsed()) else {
                return false;
            };
            st = self
                .inner
                .1
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    pub(super) fn block_until(&self, gen: u64, waiter: &str) -> Result<(), String> {
        let start = Instant::now();
        let mut st = self.inner.0.lock().unwrap_or_else(|p| p.into_inner());
        while st.completed < gen {
            let left = EVENT_WAIT_LIMIT.checked_sub(start.elapsed()).ok_or_else(|| {
                format!("stream {waiter} waited {EVENT_WAIT_LIMIT:?} for event generation {gen} (reached {}): deadlock", st.completed)
            })?;
            st = self
                .inner
                .1
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(())
    }
}
