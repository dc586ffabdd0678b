//! Streams and events. A `GpuStream` is one cudarc stream of one device's context, with its
//! label, its `--jitter-us` generator and its `--trace` track; a `GpuEvent` is an event
//! without timing. Laws they serve: a stream is in-order and the runtime's explicit events
//! are the only order between streams (cudarc's per-buffer event tracking is off on every
//! context, `open_device`); a jitter spin goes on the stream it delays, before the
//! operation it delays, drawn from that stream's seeded generator; an event's trace stamp
//! is bookkeeping, never consulted for ordering.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{LaunchArgs, PushKernelArg};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::mem::Raw;
use super::{op_err, tracing, DevCtx};
use crate::backend::BResult;

/// A stream: the cudarc stream, its device and a label for error messages.
pub struct GpuStream {
    pub(crate) s: Arc<cudarc::driver::CudaStream>,
    pub(crate) dx: Arc<DevCtx>,
    pub(super) label: String,
    /// Schedule explorer: (max delay in ns, this stream's seeded generator).
    pub(super) jitter: Option<Mutex<(u64, ChaCha8Rng)>>,
    /// `--trace`: this stream's track in the trace that was current when it was made.
    pub(super) trace: Option<tracing::StreamTrace>,
}

impl GpuStream {
    /// With `--jitter-us`: enqueue a seeded random 0..max delay (the `spin` kernel) before
    /// the next operation on this stream. A no-op otherwise.
    pub(crate) fn jitter(&self) -> BResult<()> {
        let Some(j) = &self.jitter else {
            return Ok(());
        };
        let ns: u64 = {
            let mut g = j
                .lock()
                .map_err(|_| op_err(format!("{}: jitter state poisoned", self.label)))?;
            let max = g.0;
            g.1.gen_range(0..=max)
        };
        // SAFETY: spin(u64 ns) takes one u64 by value and touches no memory.
        unsafe {
            self.launch_one_thread("spin", "jitter", |b| {
                b.arg(&ns);
            })
        }
    }

    /// Launches schedule kernel `name` of the main module (`spin`, `hold_wait`, `hold_put`)
    /// as one thread on this stream, with the arguments `args` pushes; `what` names the
    /// launch in an error.
    ///
    /// # Safety
    /// `args` pushes exactly `name`'s parameters, in order, and any memory they point to
    /// stays valid until this stream has run the launch.
    unsafe fn launch_one_thread<'a>(
        &'a self,
        name: &str,
        what: &str,
        args: impl FnOnce(&mut LaunchArgs<'a>),
    ) -> BResult<()> {
        let f = self.dx.func(name)?;
        let mut b = self.s.launch_builder(f);
        args(&mut b);
        // SAFETY: the caller's contract: `args` matched `name`'s parameters and their memory.
        unsafe { b.launch(ONE_THREAD) }
            .map_err(|e| op_err(format!("{what} on stream {}: {e}", self.label)))?;
        self.dx.count_launch();
        Ok(())
    }

    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn device(&self) -> usize {
        self.dx.dev
    }
}

/// An event (created without timing, as cuEventRecord/cuStreamWaitEvent need nothing more).
pub struct GpuEvent {
    pub(super) ev: cudarc::driver::CudaEvent,
    pub(super) dev: usize,
    /// Traced runs only: the track and timing stamp of this event's last record (where a
    /// wait's flow starts). Never consulted for ordering.
    pub(super) last: Mutex<Option<(usize, tracing::Stamp)>>,
    /// Fault holds only (`hold_until_next`): how many times this event has been recorded,
    /// counted in host order as the records are enqueued (the CPU backend's generations).
    pub(super) gen: AtomicU32,
    /// Fault holds only: the word each record's generation is stored into once its stream
    /// reaches the record (`hold_put`), where a held stream polls it (`hold_wait`). Pinned,
    /// mapped host memory, so a stream of any device reads it. Made by the first hold on
    /// this event; an event no fault holds on never has one and its records launch nothing
    /// (a record reads it without a lock: every record of every step passes here).
    pub(super) word: OnceLock<Raw>,
}

impl GpuEvent {
    /// Counts a record just enqueued on `s` and, where a hold watches this event, enqueues
    /// the store of its generation behind it (the release a `hold_wait` acquires).
    pub(super) fn count_record(&self, s: &GpuStream) -> BResult<()> {
        let gen = self.gen.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        // Pairs with `hold`'s fence: a first hold made on another thread while this record
        // is enqueued either sees this generation or this record sees its word, never
        // neither (a hold waiting for a generation nobody stores would wait out its limit).
        fence(Ordering::SeqCst);
        let Some(w) = self.word.get() else {
            return Ok(());
        };
        let ptr = w.ptr();
        // SAFETY: hold_put(u32* word, u32 gen) stores one u32 at `word`, the first 4 bytes
        // of a live pinned, portable, mapped host allocation this event owns (it outlives
        // every stream that can reach it: Raw's drop synchronizes its context first).
        unsafe {
            s.launch_one_thread("hold_put", "hold_put", |b| {
                b.arg(&ptr);
                b.arg(&gen);
            })
        }
    }

    /// Enqueues on `s` a wait for this event's next record (generation + 1 of those
    /// enqueued so far) or `limit`, whichever comes first; makes the word on first use.
    pub(super) fn hold(
        &self,
        s: &GpuStream,
        ctx: &Arc<cudarc::driver::CudaContext>,
        limit: std::time::Duration,
    ) -> BResult<()> {
        if self.word.get().is_none() {
            // Its zeroes are below every generation to come: a record enqueued before this
            // word existed stored nothing, and none is waited for (gen + 1 below). Two holds
            // racing here: the loser's word is dropped before any stream saw it.
            let _ = self.word.set(Raw::host(ctx, 4, "fault hold word")?);
        }
        // Pairs with `count_record`'s fence (the word published before the generation read).
        fence(Ordering::SeqCst);
        let ptr = self.word.get().map(Raw::ptr).unwrap_or(0);
        let gen = self.gen.load(Ordering::SeqCst).wrapping_add(1);
        let ns = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: hold_wait(const u32* word, u32 gen, u64 ns) only loads the one u32 at
        // `word` (a live mapped host allocation this event owns, as in `count_record`).
        unsafe {
            s.launch_one_thread("hold_wait", "hold_wait", |b| {
                b.arg(&ptr);
                b.arg(&gen);
                b.arg(&ns);
            })
        }
    }
}

/// The hardware work queues the driver gives a device's streams under `--fault`. Streams
/// beyond a device's queue count share queues, in order: a stream held by `hold_wait` then
/// also stops every stream sharing its queue. With the driver's default of 8, eight stages
/// on one GPU (and the caller's and readback streams) are more streams than queues, and the
/// write a hold waited for sat behind it: each hold waited out its limit and the fault
/// PASSed (`hunt` found `--stages 8 --fault single-slot` PASSing 3/3 on one H100; with 32
/// queues it FAILs, `receipts/faults-cuda/forced-holds/`). 32 is the driver's maximum.
const FAULT_CONNECTIONS: &str = "32";

/// Before the driver is first used: gives every device `FAULT_CONNECTIONS` hardware work
/// queues, for a process that may run a fault hold (the variable is the driver's, read once
/// when it initializes; the run's own configuration still comes from flags alone). Only
/// such processes: the extra queues cost about 0.6 s of set-up at eight stages on one GPU
/// and nothing measurable per token (`receipts/faults-cuda/forced-holds/queues.txt`).
pub fn queues_for_fault_holds() {
    std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", FAULT_CONNECTIONS);
}

/// One block of one thread: the schedule kernels' launch (`spin`, `hold_wait`, `hold_put`).
const ONE_THREAD: cudarc::driver::LaunchConfig = cudarc::driver::LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (1, 1, 1),
    shared_mem_bytes: 0,
};
