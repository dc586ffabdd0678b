//! Graph capture of a stage's layer walk (`--graphs on`): the walk is captured once per
//! `GraphKey` (layers, rows, store order, cache) and replayed each step. Laws it serves:
//! a capture records the very launches `layer_ops` makes eagerly (the same kernels with the
//! same arguments; only attention's shared memory is the cache's largest window), so graphs
//! on and off give the same bits; the rows' positions, the only per-step data, reach the
//! kernels through `rowpos`, written by `set_rowpos` on the same stream just before the
//! replay (its write-after-read guard is the launch without programmatic dependent
//! launch); `--jitter-us` spins go before the replay, never into a capture; the launch
//! counter counts kernels run, not captured.

use std::ops::Range;

use cudarc::driver::sys;

use super::{AttSmem, CudaCache, CudaEngine};
use crate::backend::cuda::GpuStream;
use crate::backend::BResult;
use crate::model::{KvOrder, RowAt};

/// What a captured layer walk depends on besides the engine itself (its weights and
/// scratch are fixed for its life): the layers, the row count (every launch's grid and row
/// tiles), the store order (the attention passes) and the cache (its K/V and RoPE pointers).
/// Row positions are not in it: they reach the kernels through the `rowpos` buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct GraphKey {
    layers: (usize, usize),
    rows: usize,
    order: KvOrder,
    /// Whether the rows are one sequence (a store-first attend pass may then run
    /// attention_rows; the serve arm's mixed steps may not).
    one_seq: bool,
    cache: u64,
}

/// An instantiated CUDA graph of one stage's layer walk and the kernels it holds.
pub(super) struct Graph {
    exec: sys::CUgraphExec,
    kernels: u64,
}

// SAFETY: a CUgraphExec is a driver handle usable from any thread; the engine launches it
// under its `graphs` lock only, and destroys it once, in Drop.
unsafe impl Send for Graph {}
// SAFETY: as for Send; `&Graph` only reads the handle.
unsafe impl Sync for Graph {}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: `exec` came from cuGraphInstantiateWithFlags and is destroyed only here;
        // a replay still in flight is not affected (the driver frees it on completion).
        let _ = unsafe { sys::cuGraphExecDestroy(self.exec) };
    }
}

impl CudaEngine {
    /// Captures layers `range` for `rows` rows on `s` into an executable graph (stream
    /// capture in thread-local mode: only this thread's calls are restricted while it runs,
    /// other streams and threads go on as they were). The capture enqueues nothing: the
    /// launches are recorded, not run, and counted only when a replay runs them.
    #[allow(clippy::too_many_arguments)]
    fn capture(
        &self,
        s: &GpuStream,
        range: Range<usize>,
        rows: usize,
        order: KvOrder,
        one_seq: bool,
        cache: &CudaCache,
        op: &str,
    ) -> BResult<Graph> {
        let cs = s.s.cu_stream();
        self.dx.ctx.bind_to_thread().map_err(|e| self.err(op, e))?;
        // SAFETY: `cs` is the stage's live stream of this engine's context (a non-blocking
        // stream, never the legacy one); the capture is ended below on every path.
        unsafe {
            sys::cuStreamBeginCapture_v2(
                cs,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }
        .result()
        .map_err(|e| self.err(op, format!("cuStreamBeginCapture: {e}")))?;
        let walk = range.clone().try_for_each(|il| {
            let carry = self.walk_carry(&range, il);
            self.layer_ops(s, il, rows, order, one_seq, cache, AttSmem::Cap, carry)
        });
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: ends the capture begun above on the same stream (also after a failed
        // launch, so the stream leaves capture mode); `graph` is a valid out-pointer.
        let end = unsafe { sys::cuStreamEndCapture(cs, &mut graph) }.result();
        /// Owns the captured graph until it is instantiated (destroyed on every path).
        struct Captured(sys::CUgraph);
        impl Drop for Captured {
            fn drop(&mut self) {
                if !self.0.is_null() {
                    // SAFETY: the graph came from cuStreamEndCapture and is destroyed only
                    // here (an executable graph made from it does not need it).
                    let _ = unsafe { sys::cuGraphDestroy(self.0) };
                }
            }
        }
        let graph = Captured(graph);
        let mut nodes: usize = 0;
        if !graph.0.is_null() {
            // SAFETY: a live graph; a null node array asks for the count only.
            unsafe { sys::cuGraphGetNodes(graph.0, std::ptr::null_mut(), &mut nodes) }
                .result()
                .map_err(|e| self.err(op, format!("cuGraphGetNodes: {e}")))?;
        }
        // The captured launches were counted by `launch`; they run only in replays.
        self.dx.count_kernels(nodes as u64, false);
        walk?;
        end.map_err(|e| self.err(op, format!("cuStreamEndCapture: {e}")))?;
        if graph.0.is_null() {
            return Err(self.err(op, "stream capture produced no graph"));
        }
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: `graph.0` is a live graph of kernel nodes captured above; `exec` is a valid
        // out-pointer.
        unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph.0, 0) }
            .result()
            .map_err(|e| self.err(op, format!("cuGraphInstantiate: {e}")))?;
        Ok(Graph {
            exec,
            kernels: nodes as u64,
        })
    }

    /// The graph path of `layers` (its checks done): the stage's jitter spins, the rows'
    /// positions into `rowpos`, then one replay of the walk captured for this (layers, rows,
    /// order, cache), captured now on first use.
    pub(super) fn replay(
        &self,
        s: &GpuStream,
        range: Range<usize>,
        at: &[RowAt],
        order: KvOrder,
        cache: &CudaCache,
    ) -> BResult<()> {
        let rows = at.len();
        // --jitter-us: the spins `layer` would enqueue (one per layer, the same seeded
        // draws), all before the walk: a spin inside the capture would replay one length.
        for _ in range.clone() {
            s.jitter()?;
        }
        let op = || format!("layers {range:?} ({rows} rows) graph");
        self.set_rowpos(s, at, &op)?;
        let key = GraphKey {
            layers: (range.start, range.end),
            rows,
            order,
            one_seq: CudaEngine::one_seq(at),
            cache: cache.id,
        };
        let mut graphs = self
            .graphs
            .lock()
            .map_err(|_| self.err(&op(), "graph table poisoned"))?;
        let g = match graphs.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.capture(s, range.clone(), rows, order, key.one_seq, cache, &op())?)
            }
        };
        self.dx
            .ctx
            .bind_to_thread()
            .map_err(|e| self.err(&op(), e))?;
        // SAFETY: `g.exec` is a live executable graph of this engine's context (destroyed
        // only when the engine drops); its kernels read this engine's scratch and weights
        // and the cache `key` names (all alive while the engine and cache are, and the
        // cache identity is in the key), the rows' positions from `rowpos`, written just
        // before on the same stream; the launch runs in `s`'s order.
        unsafe { sys::cuGraphLaunch(g.exec, s.s.cu_stream()) }
            .result()
            .map_err(|e| self.err(&op(), format!("cuGraphLaunch: {e}")))?;
        self.dx.count_kernels(g.kernels, true);
        Ok(())
    }
}
