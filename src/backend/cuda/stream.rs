//! Streams and events. A `GpuStream` is one cudarc stream of one device's context, with its
//! label, its `--jitter-us` generator and its `--trace` track; a `GpuEvent` is an event
//! without timing. Laws they serve: a stream is in-order and the runtime's explicit events
//! are the only order between streams (cudarc's per-buffer event tracking is off on every
//! context, `open_device`); a jitter spin goes on the stream it delays, before the
//! operation it delays, drawn from that stream's seeded generator; an event's trace stamp
//! is bookkeeping, never consulted for ordering.

use std::sync::{Arc, Mutex};

use cudarc::driver::PushKernelArg;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

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
        let f = self.dx.func("spin")?;
        let mut b = self.s.launch_builder(f);
        b.arg(&ns);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: spin(u64 ns) takes one u64 by value and touches no memory.
        unsafe { b.launch(cfg) }
            .map_err(|e| op_err(format!("jitter on stream {}: {e}", self.label)))?;
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
}
