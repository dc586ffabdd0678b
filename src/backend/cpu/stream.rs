//! CPU streams (worker threads with in-order queues) and events (generation counters).
//!
//! Ordering law implemented here: an operation enqueued on a stream runs after every
//! operation enqueued on that stream before it, and after the event generations it waits
//! for; nothing else orders it. The event's mutex is the only cross-thread edge.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::op_err;
use crate::backend::BResult;

type Op = Box<dyn FnOnce() -> Result<(), String> + Send>;

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
    tx: Mutex<Option<Sender<(&'static str, Op)>>>,
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl CpuStream {
    pub(super) fn spawn(label: String, jitter_us: u64, seed: u64) -> BResult<CpuStream> {
        let (tx, rx) = channel::<(&'static str, Op)>();
        let shared = Arc::new(Shared {
            error: Mutex::new(None),
        });
        let sh = shared.clone();
        let name = label.clone();
        let worker = std::thread::Builder::new()
            .name(label.clone())
            .spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                while let Ok((what, op)) = rx.recv() {
                    if jitter_us > 0 {
                        std::thread::sleep(Duration::from_micros(rng.gen_range(0..=jitter_us)));
                    }
                    // After an error the stream keeps draining (waits must still complete so
                    // other streams are not wedged) but every later op is skipped.
                    if sh.error.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                        continue;
                    }
                    if let Err(e) = op() {
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
        })
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
                .send((what, Box::new(op)))
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
}

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

    pub(super) fn complete(&self, gen: u64) {
        let mut st = self.inner.0.lock().unwrap_or_else(|p| p.into_inner());
        st.completed = st.completed.max(gen);
        self.inner.1.notify_all();
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
