//! The N-stage pipeline runtime, written once over any `Backend`.
//!
//! Who owns what, and who waits on whom (every arrow is an event wait; nothing else orders
//! two streams):
//!
//! ```text
//!  caller stream (stage 0's device)      stage s stream (its device)           readback stream (last device)
//!  ─ wait in[k].consumed  (WAR)          ─ s=0: wait in[k].ready (REVERSE PUB.)
//!  ─ upload tokens → in[k]               ─ s=0: embed in[k] → x; record in[k].consumed
//!  ─ record in[k].ready                  ─ s>0: wait slot.tx (RAW); copy slot → x; record slot.rx
//!                                        ─ layers [fence[s], fence[s+1]) on x, stage-owned KV
//!                                        ─ s<N-1: wait slot.rx (WAR); [grow: wait slot.grown
//!                                              (FIRST USE)]; copy x → slot; record slot.tx
//!                                        ─ last: wait out[j].read (WAR); head x → out[j];
//!                                              record out[j].done
//!                                        ─ record exit[s]
//!  eager read: wait exit[0..N] (EXIT PUB.), download out[j] → host[j], record out[j].read
//!  deferred read (pipelined arms): readback stream waits out[j].done (EXIT PUB.), downloads
//!  out[j] → host[j], records out[j].read — the stage streams keep running later tokens.
//!  host[j] is the slot's own host buffer (pinned on CUDA), lent to the caller until its
//!  next walk call: the borrow of `&mut Walk` keeps step t+window's download out of it.
//! ```
//!
//! Structural choices that remove races of the seed's runtime by construction:
//! - Each stage has exactly ONE stream, and its engine has none of its own: every op takes
//!   the stage stream explicitly, so there is no engine-vs-stage stream pair to order.
//! - Each stage has its OWN engine (scratch) even when stages share a device.
//! - Everything that crosses streams is persistent (slots, input/output rings, caches,
//!   engine scratch); nothing is freed per step, so no freed block can be reused under a
//!   queued reader (the seed's reverse-publication and exit-publication pool hazards).
//! - Caches and engine scratch are born on the stream that uses them (stream-ordered), and
//!   the build ends with one host barrier over every stream (the load barrier).
//! - One walk at a time owns the boundary/event sequence: the walk lease is a `try_lock`
//!   that fails fast instead of interleaving two walks' slot sequences.
//!
//! Multi-process gates (`crate::multiproc`, `RuntimeConfig::dist`): a process holds a contiguous
//! range of stages `[lo, hi)` and runs the same walk (the same issue/read sequence, so the
//! same step numbers) as every other member. Its boundaries inside the range are the slots
//! above; the boundary into `lo` and the one out of `hi-1` are links to other processes:
//!
//! ```text
//!  TX process, stage hi-1 stream            RX process: link stream (stage lo's device)   stage lo stream
//!  ─ layers on x                            ─ wait link[k].consumed (WAR)                  ─ wait link[k].arrived (RAW)
//!  ─ link send x (RAW: stream order         ─ link recv → link[k] (checks the step)        ─ copy link[k] → x
//!    after the stage's compute)             ─ record link[k].arrived                       ─ record link[k].consumed
//! ```
//!
//! "Checks the step": the ipc link carries the step number and refuses a mismatch by name;
//! NCCL carries only the values, so there a count or order mismatch is an NCCL error or a
//! hang that the link watchdog (`--peer-timeout`) ends.
//!
//! Exit and reverse publication hold per process: the caller of the process holding stage 0
//! uploads the tokens, the readers wait for the local stages; a process without the last
//! stage reads no logits (its reads only bound its steps in flight).
//!
//! The files: this one holds the runtime's state (stages, slots, rings, the walk state) and
//! the lease; `build` builds it, `walk` issues and reads steps, `boundary` copies a step
//! across the boundaries between stages; `placement` plans stages onto devices, `fault`
//! lists the planted faults.

mod boundary;
mod build;
pub mod fault;
pub mod placement;
#[cfg(test)]
mod tests;
mod walk;

use std::ops::Range;
use std::sync::{Arc, Mutex, TryLockError};

pub use fault::Fault;
pub use placement::{Placement, PlanError, Transport, TransportChoice};
pub use walk::Walk;

use crate::backend::{Backend, BackendError, Link, Residency};
use crate::model::{Model, RowAt};

#[derive(Debug, thiserror::Error)]
pub enum RtError {
    #[error(
        "walk lease is held by another walk (one walk at a time owns the boundary/event sequence)"
    )]
    LeaseHeld,
    #[error("{0}")]
    Misuse(String),
    // The backend error is part of the message, not a `source`: `{:#}` printing would
    // otherwise repeat it once per context layer.
    #[error("{ctx}: {err}")]
    Backend { ctx: String, err: BackendError },
}

type RResult<T> = Result<T, RtError>;

fn at<T>(r: Result<T, BackendError>, ctx: impl FnOnce() -> String) -> RResult<T> {
    r.map_err(|err| RtError::Backend { ctx: ctx(), err })
}

#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    pub placement: Placement,
    /// Largest number of rows a step may carry (sequences of a batch, or positions of one
    /// sequence in a prime chunk or verify round).
    pub max_rows: usize,
    /// Sequences each stage's KV cache holds (the batch; 1 without a batched arm).
    pub max_seqs: usize,
    /// KV cache slots per sequence.
    pub ctx: usize,
    /// Most steps in flight (issued, logits not yet read); sizes the output ring.
    pub window: usize,
    pub faults: Vec<Fault>,
    /// A member of a multi-process gate: the stages this process holds and its links to
    /// the neighbouring processes (None: every stage lives here).
    pub dist: Option<DistPart>,
}

/// Called once a member's runtime is built, before its first walk, with whether this member
/// found a misplacement: returns when every member is ready (or an error naming the one that
/// is not), so a link's data timeout never counts a neighbour's build or reference time, and
/// says whether ANY member found one (then no member walks: a member that skipped its arms
/// would leave its neighbours waiting on links that never carry data).
pub type ReadyBarrier = Arc<dyn Fn(bool) -> Result<bool, String> + Send + Sync>;

/// The part of a multi-process gate one process runs.
#[derive(Clone)]
pub struct DistPart {
    /// The stages this process holds (contiguous).
    pub local: Range<usize>,
    /// The boundary into `local.start` (from the process holding stage `local.start - 1`).
    pub recv: Option<Link>,
    /// The boundary out of `local.end - 1` (to the process holding stage `local.end`).
    pub send: Option<Link>,
    pub ready: Option<ReadyBarrier>,
}

impl std::fmt::Debug for DistPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistPart")
            .field("local", &self.local)
            .field("recv", &self.recv)
            .field("send", &self.send)
            .finish_non_exhaustive()
    }
}

/// The receiving end of a boundary whose TX stage lives in another process: a link stream
/// on the RX stage's device receives into a double buffer, event-ordered with the RX stage
/// exactly as an in-process slot (arrived = the slot's TX event, consumed = its RX event).
struct RxLink<B: Backend> {
    link: Link,
    stream: B::Stream,
    bufs: [B::Buf; 2],
    arrived: [B::Event; 2],
    consumed: [B::Event; 2],
}

struct Stage<B: Backend> {
    dev: usize,
    stream: B::Stream,
    cache: B::Cache,
    /// Recorded at the end of every step's work on this stage (exit publication).
    exit: B::Event,
    /// Only under `--fault no-load-barrier`: the stream the stage's load ran on.
    _loader: Option<B::Stream>,
}

struct Slot<B: Backend> {
    /// Grow-only persistent buffer on the RX device.
    buf: Option<B::Buf>,
    ev_tx: B::Event,
    ev_rx: B::Event,
    /// Recorded on the RX stream after a growth's zero-fill (slot first-use ordering).
    ev_grown: B::Event,
    /// Host staging for the host-bounce transport (grow-only, TX-stream ordered).
    staging: Option<B::Buf>,
}

struct Boundary<B: Backend> {
    transport: Transport,
    slots: [Slot<B>; 2],
}

struct InSlot<B: Backend> {
    buf: B::Buf,
    ready: B::Event,
    consumed: B::Event,
}

struct OutSlot<B: Backend> {
    /// None in a process that does not hold the last stage (it reads no logits; the ring
    /// then only bounds its steps in flight, `done` recorded after its last stage's work).
    buf: Option<B::Buf>,
    /// The host side of the slot: `max_rows x vocab` f32 that every read of the slot
    /// downloads into (None where `buf` is None). Reused across steps; a read lends it until
    /// the walk's next call, which the borrow of `&mut Walk` enforces, so no later step's
    /// download into it can run while a caller still reads it.
    host: Option<B::HostBuf>,
    done: B::Event,
    read_caller: B::Event,
    read_rb: B::Event,
    /// The step whose logits sit here unread (the host never reissues an unread slot).
    unread: Option<u64>,
}

struct WalkState<B: Backend> {
    bounds: Vec<Boundary<B>>,
    inputs: [InSlot<B>; 2],
    outputs: Vec<OutSlot<B>>,
    step: u64,
    /// Each stage's cache length per sequence: the slot the next row of that sequence
    /// stores at, and the end of what its attention reads. Host bookkeeping that every
    /// later op on the stage's stream is enqueued with, so stream order alone orders a
    /// rollback (`Walk::truncate`) after the stage's earlier steps and before its next.
    lens: Vec<Vec<usize>>,
    /// A stage's rows of the step being issued (reused: no allocation per step).
    rows_at: Vec<RowAt>,
    /// The step's tokens as f32 for the upload (reused: no allocation per step).
    tokens_f32: Vec<f32>,
    /// Buffers replaced by a slot's growth. Queued copies on the TX or RX stream may still
    /// touch them, so they are released only after a barrier (walk end), never at the
    /// replacement: a device free would be ordered on one stream only.
    retired: Vec<B::Buf>,
}

pub struct Runtime<B: Backend> {
    be: Arc<B>,
    model: Arc<Model>,
    cfg: RuntimeConfig,
    /// The stages this process holds (all of them unless `cfg.dist`); `stages[i]` and
    /// `engines[i]` are stage `lo + i`'s.
    lo: usize,
    hi: usize,
    stages: Vec<Stage<B>>,
    engines: Vec<B::Engine>,
    rx_link: Option<RxLink<B>>,
    caller: B::Stream,
    readback: B::Stream,
    state: Mutex<WalkState<B>>,
}

/// A step issued but not yet read back.
#[must_use = "a pending step's logits must be read (its output slot stays reserved)"]
#[derive(Debug)]
pub struct Pending {
    pub step: u64,
    slot: usize,
    rows: usize,
    /// Row 0's position: the decode step of the arm that issued it, as traces name it.
    pos0: u64,
}

impl<B: Backend> Runtime<B> {
    /// Host barrier over every stream of the runtime (load barrier at build; drain at the
    /// end of a walk). Never per step.
    pub fn barrier(&self, why: &str) -> RResult<()> {
        for (i, st) in self.stages.iter().enumerate() {
            at(self.be.synchronize(&st.stream), || {
                format!("{why}: stage {} (device {})", self.lo + i, st.dev)
            })?;
        }
        if let Some(l) = &self.rx_link {
            at(self.be.synchronize(&l.stream), || {
                format!("{why}: link stream into stage {}", self.lo)
            })?;
        }
        at(self.be.synchronize(&self.caller), || {
            format!("{why}: caller stream")
        })?;
        at(self.be.synchronize(&self.readback), || {
            format!("{why}: readback stream")
        })
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// Where each stage's weights, scratch and cache actually live, as the backend measures
    /// them from the allocations: each stage's own engine (also under `--fault
    /// shared-scratch`, where every stage drives stage 0's) and its own cache.
    /// (Multi-process: this process's stages, `local_stages().start` first.)
    pub fn residency(&self) -> RResult<Vec<Residency>> {
        (0..self.stages.len())
            .map(|i| {
                let st = &self.stages[i];
                at(self.be.residency(&self.engines[i], &st.cache), || {
                    format!("stage {} (device {}) residency", self.lo + i, st.dev)
                })
            })
            .collect()
    }

    /// The stages this process holds (all of them in a single-process gate).
    pub fn local_stages(&self) -> Range<usize> {
        self.lo..self.hi
    }

    /// Whether this process holds the last stage, so that its reads return logits.
    pub fn has_output(&self) -> bool {
        self.hi == self.cfg.placement.n_stages()
    }

    fn stage(&self, s: usize) -> &Stage<B> {
        &self.stages[s - self.lo]
    }

    pub fn has(&self, f: Fault) -> bool {
        self.cfg.faults.contains(&f)
    }

    /// Acquire the walk lease: exclusive ownership of the boundary/event sequence for one
    /// complete walk. Fails fast rather than blocking.
    pub fn walk(&self) -> RResult<Walk<'_, B>> {
        match self.state.try_lock() {
            Ok(mut st) => {
                // A walk starts new sequences: every stage's cache is empty (length 0). The
                // slots keep what earlier walks stored; each is stored before it is read.
                for l in st.lens.iter_mut() {
                    l.iter_mut().for_each(|x| *x = 0);
                }
                Ok(Walk { rt: self, st })
            }
            Err(TryLockError::WouldBlock) => Err(RtError::LeaseHeld),
            Err(TryLockError::Poisoned(_)) => Err(RtError::Misuse(
                "walk state poisoned by a panicked walk".into(),
            )),
        }
    }

    /// The engine stage `s` runs through: its own, or stage 0's under `--fault shared-scratch`.
    fn engine(&self, s: usize) -> &B::Engine {
        if self.has(Fault::SharedScratch) {
            &self.engines[0]
        } else {
            &self.engines[s - self.lo]
        }
    }
}
