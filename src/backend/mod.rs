//! The device interface the pipeline runtime is written against: buffers, in-order streams,
//! events (record / wait), and per-stage engines that enqueue the model's ops.
//!
//! Semantics every backend must give (they are CUDA's, and the CPU backend reproduces them
//! with worker threads so that an ordering bug in the runtime shows up in CI too):
//! - A stream executes its operations one at a time, in enqueue order, asynchronously to the
//!   host. Two streams run concurrently; nothing orders them but events.
//! - `record(ev, s)` captures "everything enqueued on `s` so far"; `wait(s, ev)` makes every
//!   later operation on `s` wait for the LAST record of `ev` made before the `wait` call.
//!   Waiting on an event that was never recorded is a no-op.
//! - `alloc_zeroed` enqueues its zero-fill on the given stream: the buffer is not defined for
//!   any other stream until that stream is ordered behind it (slot first-use, cache birth).
//! - Errors raised inside an enqueued operation are sticky on that stream and surface at the
//!   next `synchronize`/`download_into` on it.

pub mod any;
pub mod cpu;
pub mod ipc;
pub mod trace;
// The only module where `unsafe` is allowed (driver FFI); every block carries a SAFETY line.
#[allow(unsafe_code)]
pub mod cuda;

use std::ops::Range;
use std::sync::Arc;

use crate::model::{KvOrder, Model, RowAt};

/// Error from a backend call. `what` names the operation and its coordinates (stage, device,
/// layer, step where the caller knows them); the runtime adds context as it propagates.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("device {dev} does not exist ({backend} backend has {count} device(s): 0..{count})")]
    NoSuchDevice {
        backend: &'static str,
        dev: usize,
        count: usize,
    },
    #[error("{backend} backend: {what}")]
    Op { backend: &'static str, what: String },
}

pub type BResult<T> = Result<T, BackendError>;

/// Values in one layer's K (or V) cache: `rows × ctx × kv_dim`, an error naming the three
/// numbers when the product overflows (every backend sizes its caches with this).
pub fn cache_len(backend: &'static str, model: &Model, rows: usize, ctx: usize) -> BResult<usize> {
    let kv_dim = model.cfg.kv_dim();
    rows.checked_mul(ctx)
        .and_then(|v| v.checked_mul(kv_dim))
        .ok_or_else(|| BackendError::Op {
            backend,
            what: format!("cache size overflows: rows {rows} ctx {ctx} kv_dim {kv_dim}"),
        })
}

/// Where one stage's memory measurably lives, as (device, bytes) per device (None: host
/// memory), read back from the allocations themselves (on CUDA the driver's record of each
/// pointer's device), never from the placement that asked for them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Residency {
    /// The engine's weights.
    pub weights: Vec<(Option<usize>, u64)>,
    /// The engine's scratch (its residual and per-op buffers).
    pub scratch: Vec<(Option<usize>, u64)>,
    /// The stage's KV cache (and what the cache carries with it, e.g. RoPE tables).
    pub cache: Vec<(Option<usize>, u64)>,
}

impl Residency {
    /// Adds `bytes` on `dev` to one of the lists, keeping one entry per device.
    pub fn tally(list: &mut Vec<(Option<usize>, u64)>, dev: Option<usize>, bytes: u64) {
        match list.iter_mut().find(|(d, _)| *d == dev) {
            Some((_, b)) => *b += bytes,
            None => list.push((dev, bytes)),
        }
    }
}

/// What one stage's engine owns: its layer range and whether it holds the embedding (stage
/// 0) and the output norm + head (the last stage). `max_rows` sizes the engine's scratch.
#[derive(Clone, Debug)]
pub struct EngineSpec {
    pub stage: usize,
    pub layers: Range<usize>,
    pub embed: bool,
    pub head: bool,
    pub max_rows: usize,
    /// `--fault mma-row-order` (the negative control of `--mma on`): the tensor-core matvec
    /// plants a row-count-dependent order. Ignored by engines without it.
    pub fault_mma_row_order: bool,
    /// `--fault row-count-order`: the CPU engine's head matvec takes another reduction when
    /// a step has more than one row. Ignored by engines without it (cuda).
    pub fault_row_count_order: bool,
}

/// A boundary whose TX and RX stages live in different processes (a multi-process gate):
/// the test transport between processes on the CPU backend (`ipc`), or NCCL on the CUDA
/// backend.
#[derive(Clone)]
pub enum Link {
    Ipc(Arc<ipc::IpcLink>),
    Nccl(Arc<cuda::nccl::NcclLink>),
}

impl Link {
    /// The member at the other end, as errors name it (`rank R (stage S)`).
    pub fn peer(&self) -> &str {
        match self {
            Link::Ipc(l) => l.peer(),
            Link::Nccl(l) => l.peer(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Link::Ipc(_) => "ipc",
            Link::Nccl(_) => "nccl",
        }
    }
}

/// A link this backend does not carry: the error names the transport and the one it does.
pub fn no_link(backend: &'static str, link: &Link) -> BackendError {
    let own = match backend {
        "cpu" => "--transport ipc",
        "cuda" => "--transport nccl",
        _ => "no transport",
    };
    BackendError::Op {
        backend,
        what: format!(
            "--transport {}: the {backend} backend crosses processes with {own} only",
            link.kind()
        ),
    }
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} link to {}", self.kind(), self.peer())
    }
}

/// A device backend. All methods are called from the single host thread that drives a walk
/// (the walk lease makes that exclusive); the streams themselves run asynchronously.
pub trait Backend: Send + Sync + Sized + 'static {
    /// Device memory holding f32 values (token ids travel as exact f32 integers).
    type Buf: Send + Sync + 'static;
    type Stream: Send + Sync + 'static;
    type Event: Send + Sync + 'static;
    /// Host memory a download lands in (`alloc_readback`, `download_into`).
    type HostBuf: Send + Sync + 'static;
    /// One stage's KV cache for its layer range: `rows` sequences × `ctx` positions.
    type Cache: Send + Sync + 'static;
    type Engine: Engine<Self>;

    /// "cpu" or "cuda".
    fn kind(&self) -> &'static str;
    fn device_count(&self) -> usize;
    fn device_name(&self, dev: usize) -> String;
    /// Whether a boundary between `a` and `b` can copy device to device directly.
    fn peer_ok(&self, a: usize, b: usize) -> bool;
    /// Grant peer access both ways between `a` and `b` (a placement with a peer boundary
    /// calls it for that pair at build). A refusal is an error naming the pair: never a
    /// silent staged copy.
    fn enable_peer(&self, a: usize, b: usize) -> BResult<()> {
        if a == b || self.peer_ok(a, b) {
            Ok(())
        } else {
            Err(BackendError::Op {
                backend: self.kind(),
                what: format!("device {a} <-> device {b}: no peer access"),
            })
        }
    }

    fn new_stream(&self, dev: usize, label: &str) -> BResult<Self::Stream>;
    fn new_event(&self, dev: usize) -> BResult<Self::Event>;
    fn record(&self, ev: &Self::Event, s: &Self::Stream) -> BResult<()>;
    fn wait(&self, s: &Self::Stream, ev: &Self::Event) -> BResult<()>;
    /// Fault schedules only (`--fault`, see `runtime::fault`): stream `s` holds, in stream
    /// order, until the NEXT record of `ev` (one enqueued after this call) has completed,
    /// or `limit` has passed; the limit ends it quietly (no error), so a record that never
    /// comes costs `limit`, never a deadlock. A fault that removes an ordering edge uses it
    /// to lose the race it opens on purpose: a delay is a schedule the faulty program
    /// allows, so the control stays a faithful model of the race while its window opens
    /// every time. Both backends hold (CPU: the stream's worker blocks; CUDA: `hold_wait`).
    /// Default: no hold (a backend's own timing and `--jitter-us` would open it).
    fn hold_until_next(
        &self,
        _s: &Self::Stream,
        _ev: &Self::Event,
        _limit: std::time::Duration,
    ) -> BResult<()> {
        Ok(())
    }
    /// Host blocks until everything enqueued on `s` has run; returns its sticky error.
    fn synchronize(&self, s: &Self::Stream) -> BResult<()>;

    /// `n` f32 on `dev`, zero-filled by an operation enqueued on `s`.
    fn alloc_zeroed(&self, dev: usize, n: usize, s: &Self::Stream) -> BResult<Self::Buf>;
    /// `n` f32 of host staging memory (the host-bounce transport), zero-filled on `s`.
    fn alloc_host(&self, n: usize, s: &Self::Stream) -> BResult<Self::Buf>;
    fn buf_len(&self, b: &Self::Buf) -> usize;
    /// Enqueue a copy of `n` values on `s` (device-to-device, peer, or to/from host staging).
    fn copy(
        &self,
        s: &Self::Stream,
        src: &Self::Buf,
        src_off: usize,
        dst: &Self::Buf,
        dst_off: usize,
        n: usize,
    ) -> BResult<()>;
    /// Enqueue an upload of `host` into `dst[off..]` on `s`. `host` may be reused as soon as
    /// this returns (the backend copies or stages it before returning), so a caller keeps
    /// one buffer for every step.
    fn upload(&self, s: &Self::Stream, host: &[f32], dst: &Self::Buf, off: usize) -> BResult<()>;
    /// `n` f32 of host memory that `download_into` lands in, allocated once and reused for
    /// every download (pinned on CUDA, so the DMA writes it directly at full link speed;
    /// plain memory on the CPU). Zero-filled on the host before it is returned.
    fn alloc_readback(&self, dev: usize, n: usize) -> BResult<Self::HostBuf>;
    /// Enqueue a download of `src[off..off+n]` into `dst[0..n]` on `s`, block until it (and
    /// everything before it on `s`) has run, and lend `dst[0..n]`. The only way anything
    /// writes `dst` is this call, which holds `&mut dst` until the copy has finished, so
    /// the returned slice (borrowing `dst`) can never be overwritten while it is read.
    fn download_into<'h>(
        &self,
        s: &Self::Stream,
        src: &Self::Buf,
        off: usize,
        dst: &'h mut Self::HostBuf,
        n: usize,
    ) -> BResult<&'h [f32]>;

    /// A stage's KV cache on `dev`, zero-filled by an operation enqueued on `s` (cache birth).
    fn new_cache(
        &self,
        dev: usize,
        model: &Arc<Model>,
        layers: Range<usize>,
        rows: usize,
        ctx: usize,
        s: &Self::Stream,
    ) -> BResult<Self::Cache>;
    /// Enqueue on `s` a zero-fill of every key/value of `cache` (a reset cache: what a
    /// prime starts from; a row that reads a slot nobody stored since reads zeros).
    fn clear_cache(&self, cache: &Self::Cache, s: &Self::Stream) -> BResult<()>;
    /// A stage's engine on `dev`: its weights (uploaded through it, on `s`) and its scratch.
    fn new_engine(
        &self,
        dev: usize,
        model: &Arc<Model>,
        spec: EngineSpec,
        s: &Self::Stream,
    ) -> BResult<Self::Engine>;

    /// Where `eng`'s weights and scratch and `cache` actually live (see `Residency`).
    fn residency(&self, eng: &Self::Engine, cache: &Self::Cache) -> BResult<Residency>;

    /// Whether the engines compute from the model's one host copy of the weights, shared by
    /// every stage by design (their residency then reports the weights as host memory).
    fn shares_host_weights(&self) -> bool {
        false
    }

    /// Measured memory bandwidth of `dev` in GB/s (bytes read + written per second by a
    /// large device-to-device copy); None where the backend has no such measurement.
    fn bandwidth_gbs(&self, _dev: usize) -> BResult<Option<f64>> {
        Ok(None)
    }

    /// Tracing (`--trace`): a fresh tracer that every stream made from now on records into
    /// (streams made before keep the tracer they had, or none). Changes nothing the ops
    /// compute: the ordering events and the ops stay as they are; tracing only adds clock
    /// reads (CPU) or timing events recorded on the streams (CUDA). None: no tracing here.
    fn start_trace(&self) -> Option<Arc<trace::Tracer>> {
        None
    }

    /// The current tracer with every traced op's times filled in (CUDA reads its timing
    /// events here, blocking until the streams reached them): call after the traced walks.
    fn trace(&self) -> BResult<Option<Arc<trace::Tracer>>> {
        Ok(None)
    }

    /// Tracing: ops enqueued on `s` from now on are walk step `step`'s.
    fn trace_step(&self, _s: &Self::Stream, _step: Option<u64>) {}

    /// Tracing: ops enqueued from now on belong to phase `name` (the reference, an arm).
    fn trace_phase(&self, _name: &str) {}

    /// Tracing: step `step` of the current phase is named `label()` in the trace (the serve
    /// arm: the requests and positions the step carries). Called for its name only when a
    /// trace is kept; no op changes.
    fn trace_label(&self, _step: u64, _label: &dyn Fn() -> String) {}

    /// The most rows one step of this run will carry in any engine (said before the first
    /// engine is built): a backend that compiles kernels per row count builds them all with
    /// the first engine, in one round (a cold start's wait). What each step computes does
    /// not depend on it.
    fn expect_rows(&self, _rows: usize) {}

    /// Tracing: ops enqueued on `s` from now until `trace_end` (or the host blocking in a
    /// `download_into` or `synchronize` on `s`, whose wake-up is not the piece's work) are one
    /// piece of the step.
    fn trace_begin(&self, _s: &Self::Stream, _piece: trace::Piece) {}

    /// Tracing: the piece begun on `s` ends here.
    fn trace_end(&self, _s: &Self::Stream) {}

    /// Kernels launched so far on all devices (0 where the backend does not count them).
    fn launches(&self) -> u64 {
        0
    }

    /// Enqueue on `s` the send of `src[0..n]` as walk step `step` over a link to another
    /// process. Runs in stream order: it reads `src` after everything enqueued before it.
    fn link_send(
        &self,
        _s: &Self::Stream,
        _src: &Self::Buf,
        _n: usize,
        link: &Link,
        _step: u64,
    ) -> BResult<()> {
        Err(no_link(self.kind(), link))
    }

    /// Enqueue on `s` the receive of walk step `step` (`n` values) into `dst[0..n]`. The
    /// ipc transport checks the step it receives; NCCL does not carry it (`step` names the
    /// step in errors only).
    fn link_recv(
        &self,
        _s: &Self::Stream,
        _dst: &Self::Buf,
        _n: usize,
        link: &Link,
        _step: u64,
    ) -> BResult<()> {
        Err(no_link(self.kind(), link))
    }
}

/// One stage's engine: enqueues the model's ops on the stream it is handed. It never owns a
/// stream of its own, so there is exactly one stream per stage and no second, unordered
/// launch path (the seed's engine-vs-stage stream race cannot be written against this API).
///
/// The engine's working residual `x()` is engine-owned scratch, safe on one stream at a time
/// and shared state the moment two streams drive the same engine: stages never share one.
pub trait Engine<B: Backend>: Send + Sync + 'static {
    fn spec(&self) -> &EngineSpec;
    /// The engine's working residual, `[max_rows, n_embd]`.
    fn x(&self) -> &B::Buf;
    /// `x[r] = embed(tokens[r])` for `rows` rows; token ids are read from `input[0..rows]`.
    fn embed(&self, s: &B::Stream, input: &B::Buf, rows: usize) -> BResult<()>;
    /// Layer `il` on `x` in place for `rows.len()` rows, row r where `rows[r]` says (its
    /// key/value stored at its slot of its sequence, `order` saying how the stores are
    /// ordered against the attention reads).
    fn layer(
        &self,
        s: &B::Stream,
        il: usize,
        rows: &[RowAt],
        order: KvOrder,
        cache: &B::Cache,
    ) -> BResult<()>;
    /// Layers `range` (in order) on `x`, each as `layer` with the same rows, order and cache:
    /// a stage's whole layer walk of one step. A backend may enqueue it as one unit (CUDA
    /// replays a captured graph of the walk); what it computes is `layer`'s, layer by layer,
    /// and an error names the failing layer where the backend can tell it.
    fn layers(
        &self,
        s: &B::Stream,
        range: Range<usize>,
        rows: &[RowAt],
        order: KvOrder,
        cache: &B::Cache,
    ) -> BResult<()> {
        for il in range {
            self.layer(s, il, rows, order, cache)?;
        }
        Ok(())
    }
    /// Output norm + head of `x`'s rows `first..first + rows` into `logits[0..rows*vocab]`
    /// (first > 0: a prefill that needs only its last position's logits).
    fn head(&self, s: &B::Stream, first: usize, rows: usize, logits: &B::Buf) -> BResult<()>;
}
