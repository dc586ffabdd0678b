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
//! Multi-process gates (`crate::dist`, `RuntimeConfig::dist`): a process holds a contiguous
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

pub mod fault;
pub mod placement;

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

pub use fault::Fault;
use fault::FAULT_HOLD;
pub use placement::{Placement, PlanError, Transport, TransportChoice};

use crate::backend::trace::Piece;
use crate::backend::{Backend, BackendError, Engine, EngineSpec, Link, Residency};
use crate::model::{KvOrder, Model, RowAt};

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
    pub fn build(be: Arc<B>, model: Arc<Model>, cfg: RuntimeConfig) -> RResult<Runtime<B>> {
        let p = &cfg.placement;
        let n = p.n_stages();
        if n == 0 || p.n_layers() != model.cfg.n_layers {
            return Err(RtError::Misuse(format!(
                "placement covers {} layers in {n} stages, model has {}",
                p.n_layers(),
                model.cfg.n_layers
            )));
        }
        if cfg.max_rows == 0 || cfg.ctx == 0 || cfg.max_seqs == 0 || cfg.max_seqs > cfg.max_rows {
            return Err(RtError::Misuse(format!(
                "max_rows {}, max_seqs {} and ctx {} must be positive, max_seqs <= max_rows",
                cfg.max_rows, cfg.max_seqs, cfg.ctx
            )));
        }
        let vocab = model.cfg.vocab;
        let (lo, hi) = match &cfg.dist {
            None => (0, n),
            Some(d) => (d.local.start, d.local.end),
        };
        if lo >= hi || hi > n {
            return Err(RtError::Misuse(format!(
                "this process holds stages {lo}..{hi} of {n}"
            )));
        }
        if let Some(d) = &cfg.dist {
            if d.recv.is_some() != (lo > 0) || d.send.is_some() != (hi < n) {
                return Err(RtError::Misuse(format!(
                    "stages {lo}..{hi} of {n}: links given (recv {}, send {}) do not match the range",
                    d.recv.is_some(),
                    d.send.is_some()
                )));
            }
        }
        // This process's first and last stages' devices: the caller stream (input ring) and
        // the readback stream (output ring) live there.
        let dev0 = p.devices[lo];
        let dev_last = p.devices[hi - 1];
        let caller = at(be.new_stream(dev0, "caller"), || {
            format!("caller stream on device {dev0}")
        })?;
        let readback = at(be.new_stream(dev_last, "readback"), || {
            format!("readback stream on device {dev_last}")
        })?;

        let no_load_barrier = cfg.faults.contains(&Fault::NoLoadBarrier);
        let mut stages = Vec::with_capacity(hi - lo);
        let mut engines = Vec::with_capacity(hi - lo);
        for s in lo..hi {
            let dev = p.devices[s];
            let ctx = || format!("stage {s} (device {dev}) build");
            let stream = at(be.new_stream(dev, &format!("stage{s}")), ctx)?;
            // Weights and scratch go through the owning stage's engine, on its stream:
            // the embedding with stage 0, output norm + head with the last stage.
            let mut spec = EngineSpec {
                stage: s,
                layers: p.layers(s),
                embed: s == 0,
                head: s == n - 1,
                max_rows: cfg.max_rows,
                fault_mma_row_order: cfg.faults.contains(&Fault::MmaRowOrder),
            };
            if s == 0 && cfg.faults.contains(&Fault::SharedScratch) {
                // The fault's setup: stage 0's engine holds the whole model, and every
                // stage drives it (see `Runtime::engine`).
                spec = EngineSpec {
                    layers: 0..p.n_layers(),
                    head: true,
                    ..spec
                };
            }
            // Weights and scratch load through the stage's own engine ON ITS OWN STREAM, and
            // the cache is born there too: both are ordered before the stage's first op by
            // the stream itself. `--fault no-load-barrier` loads them on a separate loader
            // stream (an asynchronous loader, as the seed's) and skips the load barrier, the
            // only edge that orders such a load before the stages.
            let loader = if no_load_barrier {
                Some(at(be.new_stream(dev, &format!("loader{s}")), ctx)?)
            } else {
                None
            };
            let load = loader.as_ref().unwrap_or(&stream);
            let eng = at(be.new_engine(dev, &model, spec, load), ctx)?;
            // `--fault misplaced-cache`: the last stage's cache is born on stage 0's device,
            // zero-filled on the caller stream (which lives there; the load barrier orders it
            // before the first step).
            let misplace = s + 1 == n && n > 1 && cfg.faults.contains(&Fault::MisplacedCache);
            let (cdev, cs) = if misplace {
                (dev0, &caller)
            } else {
                (dev, load)
            };
            let cache = at(
                be.new_cache(cdev, &model, p.layers(s), cfg.max_seqs, cfg.ctx, cs),
                ctx,
            )?;
            let exit = at(be.new_event(dev), ctx)?;
            stages.push(Stage {
                dev,
                stream,
                cache,
                exit,
                _loader: loader,
            });
            engines.push(eng);
        }

        let mut bounds = Vec::with_capacity(hi - lo - 1);
        for b in lo..hi - 1 {
            let (txd, rxd) = (p.devices[b], p.devices[b + 1]);
            let ctx = || format!("boundary {b} (device {txd} -> device {rxd}) build");
            if p.transports[b] == Transport::Peer {
                at(be.enable_peer(txd, rxd), ctx)?;
            }
            let mk = || -> RResult<Slot<B>> {
                Ok(Slot {
                    buf: None,
                    ev_tx: at(be.new_event(txd), ctx)?,
                    ev_rx: at(be.new_event(rxd), ctx)?,
                    ev_grown: at(be.new_event(rxd), ctx)?,
                    staging: None,
                })
            };
            let slots = [mk()?, mk()?];
            bounds.push(Boundary {
                transport: p.transports[b],
                slots,
            });
        }

        let mk_in = || -> RResult<InSlot<B>> {
            let ctx = || format!("input ring on device {dev0}");
            Ok(InSlot {
                buf: at(be.alloc_zeroed(dev0, cfg.max_rows, &caller), ctx)?,
                ready: at(be.new_event(dev0), ctx)?,
                consumed: at(be.new_event(dev0), ctx)?,
            })
        };
        let inputs = [mk_in()?, mk_in()?];
        let out_len = cfg.max_rows.checked_mul(vocab).ok_or_else(|| {
            RtError::Misuse(format!(
                "output slot of max_rows {} x vocab {vocab} overflows",
                cfg.max_rows
            ))
        })?;
        let mut outputs = Vec::new();
        for _ in 0..cfg.window.max(1) {
            let ctx = || format!("output ring on device {dev_last}");
            let (buf, host) = if hi == n {
                (
                    Some(at(
                        be.alloc_zeroed(dev_last, out_len, &stages[hi - 1 - lo].stream),
                        ctx,
                    )?),
                    Some(at(be.alloc_readback(dev_last, out_len), ctx)?),
                )
            } else {
                (None, None)
            };
            outputs.push(OutSlot {
                buf,
                host,
                done: at(be.new_event(dev_last), ctx)?,
                read_caller: at(be.new_event(dev0), ctx)?,
                read_rb: at(be.new_event(dev_last), ctx)?,
                unread: None,
            });
        }
        let lens = vec![vec![0; cfg.max_seqs]; n];
        // The link into stage lo: its own stream, its double buffer born (zero-filled) on that
        // stream at full size (no growth across a process boundary), ordered before the
        // first step by the load barrier.
        let rx_link = match cfg.dist.as_ref().and_then(|d| d.recv.clone()) {
            None => None,
            Some(link) => {
                let ctx = || {
                    format!(
                        "boundary {} link RX (stage {lo}, device {dev0}) build",
                        lo - 1
                    )
                };
                let n_vals = cfg.max_rows * model.cfg.n_embd;
                let stream = at(be.new_stream(dev0, &format!("link{}", lo - 1)), ctx)?;
                let mk_buf = || at(be.alloc_zeroed(dev0, n_vals, &stream), ctx);
                let mk_ev = || at(be.new_event(dev0), ctx);
                Some(RxLink {
                    link,
                    bufs: [mk_buf()?, mk_buf()?],
                    arrived: [mk_ev()?, mk_ev()?],
                    consumed: [mk_ev()?, mk_ev()?],
                    stream,
                })
            }
        };
        let max_rows = cfg.max_rows;
        let rt = Runtime {
            be,
            model,
            cfg,
            lo,
            hi,
            stages,
            engines,
            rx_link,
            caller,
            readback,
            state: Mutex::new(WalkState {
                bounds,
                inputs,
                outputs,
                step: 0,
                lens,
                rows_at: Vec::new(),
                tokens_f32: Vec::with_capacity(max_rows),
                retired: Vec::new(),
            }),
        };
        // LOAD BARRIER: one host sync over every stream at build end, never per step. With
        // each stage loading on its own stream it is belt and braces (the caller and
        // readback streams read nothing loaded); with a separate loader stream it is the only
        // edge, which is what `--fault no-load-barrier` removes.
        if !no_load_barrier {
            rt.barrier("load barrier")?;
        }
        Ok(rt)
    }

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

/// An exclusive walk over the runtime (see `Runtime::walk`).
pub struct Walk<'a, B: Backend> {
    rt: &'a Runtime<B>,
    st: MutexGuard<'a, WalkState<B>>,
}

impl<'a, B: Backend> Walk<'a, B> {
    /// Enqueue one decode step: row r is sequence r, carrying `tokens[r]` at position
    /// `pos[r]`. Returns at once; the logits are read with `read_eager` or `read_deferred`.
    pub fn issue(&mut self, tokens: &[u32], pos: &[usize]) -> RResult<Pending> {
        self.issue_rows(tokens, pos, None, false)
    }

    /// Enqueue one multi-row step of ONE sequence (a prime chunk, a verify round): row r
    /// carries `tokens[r]` at position `pos0 + r` of sequence 0, its key/value at that
    /// sequence's next slots, and attends causally over the cache up to its own slot.
    pub fn issue_chunk(&mut self, tokens: &[u32], pos0: usize) -> RResult<Pending> {
        self.chunk(tokens, pos0, false)
    }

    /// `issue_chunk` whose head runs on the chunk's last row only, so the pending step
    /// reads back one row of logits: what a prefill needs before decoding (and what
    /// llama-bench's pp512 computes). The prime arm gates every position, with
    /// `issue_chunk`; this serves the prefill bench.
    pub fn issue_chunk_last(&mut self, tokens: &[u32], pos0: usize) -> RResult<Pending> {
        self.chunk(tokens, pos0, true)
    }

    /// Sequence 0's rows at positions pos0.. (`issue_chunk`, `issue_chunk_last`).
    fn chunk(&mut self, tokens: &[u32], pos0: usize, last_only: bool) -> RResult<Pending> {
        let pos: Vec<usize> = (pos0..pos0 + tokens.len()).collect();
        self.issue_rows(tokens, &pos, Some(0), last_only)
    }

    /// Reset every stage's cache: lengths to 0 and, on each stage's stream (ordered after
    /// the stage's earlier steps by the stream itself), every key/value zero-filled.
    pub fn reset_caches(&mut self) -> RResult<()> {
        let rt = self.rt;
        // This process's stages (lo..hi, global numbers: `lens` is indexed by them).
        for s in rt.lo..rt.hi {
            let stg = rt.stage(s);
            at(rt.be.clear_cache(&stg.cache, &stg.stream), || {
                format!("stage {s} (device {}) cache reset", stg.dev)
            })?;
            self.st.lens[s].iter_mut().for_each(|x| *x = 0);
        }
        Ok(())
    }

    /// The cache length of sequence `seq` on stage `s` (what its next row stores at).
    pub fn cache_len(&self, s: usize, seq: usize) -> Option<usize> {
        self.st.lens.get(s)?.get(seq).copied()
    }

    /// ROLLBACK: every stage's cache of sequence `seq` back to `len` positions (the
    /// accepted ones of a verify round). The dropped slots stay in memory but lie beyond
    /// the length, so no later row reads them before storing over them. Host bookkeeping
    /// only: the next step's ops carry the new length, and each stage's stream orders them
    /// after its earlier steps. `--fault no-rollback`: the last stage keeps its length.
    pub fn truncate(&mut self, seq: usize, len: usize) -> RResult<()> {
        // This process's stages, by global number; the fault spares the pipeline's last.
        let n = self.rt.cfg.placement.n_stages();
        for s in self.rt.lo..self.rt.hi {
            let cur = self.cache_len(s, seq).ok_or_else(|| {
                RtError::Misuse(format!("truncate: sequence {seq} outside the cache"))
            })?;
            if len > cur {
                return Err(RtError::Misuse(format!(
                    "truncate: stage {s} sequence {seq} holds {cur} positions, cannot roll back to {len}"
                )));
            }
            if s + 1 == n && self.rt.has(Fault::NoRollback) {
                continue;
            }
            self.st.lens[s][seq] = len;
        }
        Ok(())
    }

    /// `chunk_seq`: None, row r is sequence r (one position each); Some(q), every row is
    /// sequence q at consecutive positions. `last_only`: the head (and so the readback)
    /// covers the last row only.
    fn issue_rows(
        &mut self,
        tokens: &[u32],
        pos: &[usize],
        chunk_seq: Option<usize>,
        last_only: bool,
    ) -> RResult<Pending> {
        let rt = self.rt;
        let be = &*rt.be;
        let p = &rt.cfg.placement;
        let n = p.n_stages();
        let rows = tokens.len();
        let t = self.st.step;
        if rows == 0 || rows > rt.cfg.max_rows || pos.len() != rows {
            return Err(RtError::Misuse(format!(
                "step {t}: {rows} rows with {} positions (runtime holds 1..={} rows)",
                pos.len(),
                rt.cfg.max_rows
            )));
        }
        let seqs = chunk_seq.map_or(rows, |q| q + 1);
        if seqs > rt.cfg.max_seqs {
            return Err(RtError::Misuse(format!(
                "step {t}: {seqs} sequences, the caches hold {}",
                rt.cfg.max_seqs
            )));
        }
        if let Some(&bad) = tokens.iter().find(|&&x| x as usize >= rt.model.cfg.vocab) {
            return Err(RtError::Misuse(format!(
                "step {t}: token {bad} outside vocab {}",
                rt.model.cfg.vocab
            )));
        }
        if let Some(&bad) = pos.iter().find(|&&x| x >= rt.cfg.ctx) {
            return Err(RtError::Misuse(format!(
                "step {t}: position {bad} beyond context {}",
                rt.cfg.ctx
            )));
        }
        // Row r's sequence and its offset from that sequence's cache length; a row's slot on
        // stage s is lens[s][seq] + offset.
        let seq_of = |r: usize| chunk_seq.map_or((r, 0), |q| (q, r));
        // This process's stages' slots, checked before anything is enqueued, so a full cache
        // is an error naming the stage, never a partial step.
        for s in rt.lo..rt.hi {
            for r in 0..rows {
                let (seq, k) = seq_of(r);
                let slot = self.st.lens[s][seq] + k;
                if slot >= rt.cfg.ctx {
                    return Err(RtError::Misuse(format!(
                        "step {t}: stage {s} sequence {seq} cache slot {slot} beyond context {}",
                        rt.cfg.ctx
                    )));
                }
            }
        }
        // Multi-row steps of one sequence store every row's key/value before any row reads
        // the cache (`KvOrder::StoreFirst`); `--fault chunk-kv-order` fuses them.
        let order = match chunk_seq {
            None => KvOrder::Fused,
            Some(_) if rt.has(Fault::ChunkKvOrder) => KvOrder::Racy,
            Some(_) => KvOrder::StoreFirst,
        };
        let (lo, hi) = (rt.lo, rt.hi);
        let j = (t % self.st.outputs.len() as u64) as usize;
        if let Some(u) = self.st.outputs[j].unread {
            return Err(RtError::Misuse(format!(
                "step {t}: output slot {j} still holds unread step {u} (more than {} steps in flight)",
                self.st.outputs.len()
            )));
        }
        self.st.step += 1;
        // Tracing only: everything this call enqueues is this decode step's work. The trace
        // names it by row 0's position (the arm's step), not the walk counter `t`, which
        // runs on across the arms sharing this runtime.
        let pos0 = pos[0] as u64;
        be.trace_step(&rt.caller, Some(pos0));
        for stg in &rt.stages {
            be.trace_step(&stg.stream, Some(pos0));
        }
        // Input ring slot and boundary slot of this step (both double-buffered).
        let k = (t % 2) as usize;

        // Caller: input ring slot k. WAR: the upload waits until stage 0 consumed step t-2.
        // (Only the process holding stage 0 has tokens to upload.)
        if lo == 0 {
            let st = &mut *self.st;
            st.tokens_f32.clear();
            st.tokens_f32.extend(tokens.iter().map(|&x| x as f32));
            let inp = &st.inputs[k];
            let c = || format!("caller stream, step {t}");
            at(be.wait(&rt.caller, &inp.consumed), c)?;
            // `--fault no-reverse-publish`, forced: the upload lands only once stage 0 (which
            // no longer waits for it) has embedded this step, from the slot's old tokens.
            if rt.has(Fault::NoReversePublish) {
                at(
                    be.hold_until_next(&rt.caller, &inp.consumed, FAULT_HOLD),
                    c,
                )?;
            }
            // Tracing only (here and at every trace_begin/trace_end below): names the piece
            // of the step the ops between them are; no op or event changes.
            be.trace_begin(&rt.caller, Piece::Input);
            at(be.upload(&rt.caller, &st.tokens_f32, &inp.buf, 0), c)?;
            be.trace_end(&rt.caller);
            at(be.record(&inp.ready, &rt.caller), c)?;
        }

        // Taken out of the state for the loop (rx/tx borrow the walk), put back after it.
        let mut rows_at = std::mem::take(&mut self.st.rows_at);
        for s in lo..hi {
            let stg = rt.stage(s);
            // The stage's rows at the slots its cache lengths give, then the lengths grown
            // past them (host bookkeeping; the stage's ops below carry the slots).
            rows_at.clear();
            rows_at.extend((0..rows).map(|r| {
                let (seq, k) = seq_of(r);
                RowAt {
                    pos: pos[r],
                    seq,
                    slot: self.st.lens[s][seq] + k,
                }
            }));
            for a in &rows_at {
                let l = &mut self.st.lens[s][a.seq];
                *l = (*l).max(a.slot + 1);
            }
            let rows_at = &rows_at[..];
            let eng = rt.engine(s);
            // Error context, formatted only on the error path (this runs every step).
            let c = |what: &'static str| {
                let dev = stg.dev;
                move || format!("stage {s} (device {dev}) {what}, step {t}")
            };
            if s == 0 {
                let inp = &self.st.inputs[k];
                // REVERSE PUBLICATION: the stage reads what the caller's stream wrote.
                if !rt.has(Fault::NoReversePublish) {
                    at(be.wait(&stg.stream, &inp.ready), c("input wait"))?;
                }
                be.trace_begin(&stg.stream, Piece::Embed);
                at(eng.embed(&stg.stream, &inp.buf, rows), c("embed"))?;
                be.trace_end(&stg.stream);
                at(be.record(&inp.consumed, &stg.stream), c("embed"))?;
            } else if s == lo {
                self.rx_link(k, rows, t)?;
            } else {
                self.rx(s - 1, k, rows, t)?;
            }
            // `--fault shared-scratch`, forced: stage lo+1, having received step t into the
            // one shared scratch, computes only once stage lo has run its next step in it
            // (only while earlier steps are in flight; at stage lo+1 alone, as `war_hold`).
            let overlaps = self.st.outputs.iter().any(|o| o.unread.is_some());
            if s == lo + 1 && overlaps && rt.has(Fault::SharedScratch) {
                at(
                    be.hold_until_next(&stg.stream, &rt.stage(lo).exit, FAULT_HOLD),
                    c("shared-scratch hold"),
                )?;
            }
            be.trace_begin(&stg.stream, Piece::Layers);
            // The stage's whole layer walk as one engine call (CUDA may replay it as one
            // graph); the boundary's event waits and records stay outside it, around it.
            // The engine's error names the failing layer.
            let layers = p.layers(s);
            at(
                eng.layers(&stg.stream, layers.clone(), rows_at, order, &stg.cache),
                || format!("stage {s} (device {}) layers {layers:?}, step {t}", stg.dev),
            )?;
            be.trace_end(&stg.stream);
            if s + 1 < hi {
                self.tx(s, k, rows, t)?;
            } else if s + 1 < n {
                // LINK TX: the send is enqueued on this stage's stream after its layers, so
                // what it reads is ordered after the stage's compute (RAW) and the next
                // step's compute cannot overwrite x before the send has read it (WAR).
                let link = rt.cfg.dist.as_ref().and_then(|d| d.send.as_ref());
                let link = link.ok_or_else(|| {
                    RtError::Misuse(format!("stage {s}: no link to stage {}", s + 1))
                })?;
                let n_vals = rows * rt.model.cfg.n_embd;
                at(be.link_send(&stg.stream, eng.x(), n_vals, link, t), || {
                    format!(
                        "boundary {s} link TX (stage {s}, device {} -> {}), step {t}",
                        stg.dev,
                        link.peer()
                    )
                })?;
                // The ring slot's completion: this process's part of step t is done.
                at(
                    be.record(&self.st.outputs[j].done, &stg.stream),
                    c("link send"),
                )?;
            } else {
                let out = &self.st.outputs[j];
                let buf = out
                    .buf
                    .as_ref()
                    .expect("the last stage's process has logits");
                // WAR on the output slot: the previous reader of slot j has finished.
                at(be.wait(&stg.stream, &out.read_caller), c("head"))?;
                at(be.wait(&stg.stream, &out.read_rb), c("head"))?;
                // `--fault no-exit-publish`, forced: the head writes the slot only once this
                // step's reader (which no longer waits for it) has downloaded it: the caller
                // where each step is read before the next (eager), else the readback stream.
                if rt.has(Fault::NoExitPublish) {
                    let overlaps = self.st.outputs.iter().any(|o| o.unread.is_some());
                    let read = if overlaps { &out.read_rb } else { &out.read_caller };
                    at(
                        be.hold_until_next(&stg.stream, read, FAULT_HOLD),
                        c("head"),
                    )?;
                }
                be.trace_begin(&stg.stream, Piece::Head);
                let first = if last_only { rows - 1 } else { 0 };
                at(eng.head(&stg.stream, first, rows - first, buf), c("head"))?;
                be.trace_end(&stg.stream);
                at(be.record(&out.done, &stg.stream), c("head"))?;
            }
            at(be.record(&stg.exit, &stg.stream), c("exit record"))?;
        }
        self.st.rows_at = rows_at;
        let out = &mut self.st.outputs[j];
        out.unread = Some(t);
        Ok(Pending {
            step: t,
            slot: j,
            rows: if last_only { 1 } else { rows },
            pos0: pos[0] as u64,
        })
    }

    /// Under a write-after-read fault, the slot index whose next write the reader of slot
    /// `idx` at boundary `b` holds for, so that write lands before the read (the stale read
    /// the fault allows, every run): `--fault no-war-guard`, this slot's next write (two
    /// steps on); `--fault single-slot`, the other index's (the next step, into the one
    /// shared buffer). Only at boundary 0, whose writer (stage 0) holds for nothing: a hold
    /// at every boundary would chain each one's wait behind the next's. And only while
    /// earlier steps are in flight: an arm that reads every step back before issuing the
    /// next never issues that write during the hold, which would only spend `FAULT_HOLD`.
    fn war_hold(&self, b: usize, idx: usize) -> Option<usize> {
        let rt = self.rt;
        let overlaps = self.st.outputs.iter().any(|o| o.unread.is_some());
        if b != 0 || !overlaps {
            return None;
        }
        if rt.has(Fault::SingleSlot) {
            Some(1 - idx)
        } else if rt.has(Fault::NoWarGuard) {
            Some(idx)
        } else {
            None
        }
    }

    /// Boundary TX at boundary `b` (stage b's stream), slot index `idx`.
    fn tx(&mut self, b: usize, idx: usize, rows: usize, t: u64) -> RResult<()> {
        let rt = self.rt;
        let be = &*rt.be;
        let n_vals = rows * rt.model.cfg.n_embd;
        let (tx_s, rx_s) = (rt.stage(b), rt.stage(b + 1));
        let c = || {
            format!(
                "boundary {b} TX (stage {b}, device {} -> device {}) slot {idx}, step {t}",
                tx_s.dev, rx_s.dev
            )
        };
        let st = &mut *self.st;
        let bd = &mut st.bounds[b - rt.lo];
        let retired = &mut st.retired;
        let transport = bd.transport;
        // `--fault single-slot`: both indices write one buffer; events stay per index.
        let buf_idx = if rt.has(Fault::SingleSlot) { 0 } else { idx };
        // WAR: this slot's previous RX has copied the old value out.
        if !rt.has(Fault::NoWarGuard) {
            at(be.wait(&tx_s.stream, &bd.slots[idx].ev_rx), c)?;
        }
        let have = bd.slots[buf_idx]
            .buf
            .as_ref()
            .map(|x| be.buf_len(x))
            .unwrap_or(0);
        if have < n_vals {
            // Grow-only: a new persistent buffer on the RX device, zero-filled on the RX
            // stream. FIRST-USE ORDERING: TX must not write it before that zero-fill ran.
            // `--fault slot-first-use`, forced: the RX stream zero-fills only once this
            // step's TX has written the slot, so the fill lands over what TX wrote.
            if rt.has(Fault::SlotFirstUse) {
                let ev_tx = &bd.slots[idx].ev_tx;
                at(be.hold_until_next(&rx_s.stream, ev_tx, FAULT_HOLD), c)?;
            }
            let fresh = at(be.alloc_zeroed(rx_s.dev, n_vals, &rx_s.stream), c)?;
            let sl = &mut bd.slots[buf_idx];
            at(be.record(&sl.ev_grown, &rx_s.stream), c)?;
            if !rt.has(Fault::SlotFirstUse) {
                at(be.wait(&tx_s.stream, &sl.ev_grown), c)?;
            }
            if let Some(old) = sl.buf.replace(fresh) {
                retired.push(old);
            }
        }
        // `--fault rx-no-wait`, forced: TX writes the slot only once this step's RX (which
        // no longer waits for it) has copied it out, so RX reads the old value every run.
        if rt.has(Fault::RxNoWait) {
            at(
                be.hold_until_next(&tx_s.stream, &bd.slots[idx].ev_rx, FAULT_HOLD),
                c,
            )?;
        }
        let x = rt.engine(b).x();
        let dst = bd.slots[buf_idx].buf.as_ref().expect("slot grown above");
        be.trace_begin(&tx_s.stream, Piece::Tx(idx));
        match transport {
            Transport::Dtod | Transport::Peer => {
                at(be.copy(&tx_s.stream, x, 0, dst, 0, n_vals), c)?
            }
            Transport::Host => {
                let sl = &mut bd.slots[idx];
                let have = sl.staging.as_ref().map(|h| be.buf_len(h)).unwrap_or(0);
                if have < n_vals {
                    // Staging is only ever touched by this TX stream: stream-ordered.
                    let fresh = at(be.alloc_host(n_vals, &tx_s.stream), c)?;
                    if let Some(old) = sl.staging.replace(fresh) {
                        retired.push(old);
                    }
                }
                let h = bd.slots[idx].staging.as_ref().expect("staging grown above");
                let dst = bd.slots[buf_idx].buf.as_ref().expect("slot grown above");
                at(be.copy(&tx_s.stream, x, 0, h, 0, n_vals), c)?;
                at(be.copy(&tx_s.stream, h, 0, dst, 0, n_vals), c)?;
            }
        }
        be.trace_end(&tx_s.stream);
        at(
            be.record(&self.st.bounds[b - rt.lo].slots[idx].ev_tx, &tx_s.stream),
            c,
        )
    }

    /// Link RX into this process's first stage `lo` (boundary `lo - 1`), slot index `idx`:
    /// the link stream receives step `t` into the slot, the stage stream copies it out.
    fn rx_link(&mut self, idx: usize, rows: usize, t: u64) -> RResult<()> {
        let rt = self.rt;
        let be = &*rt.be;
        let n_vals = rows * rt.model.cfg.n_embd;
        let lo = rt.lo;
        let rx_s = rt.stage(lo);
        let l = rt
            .rx_link
            .as_ref()
            .ok_or_else(|| RtError::Misuse(format!("stage {lo}: no link from stage {}", lo - 1)))?;
        let c = || {
            format!(
                "boundary {} link RX ({} -> stage {lo}, device {}) slot {idx}, step {t}",
                lo - 1,
                l.link.peer(),
                rx_s.dev
            )
        };
        // `--fault single-slot`: both indices receive into one buffer; events stay per index.
        let buf = &l.bufs[if rt.has(Fault::SingleSlot) { 0 } else { idx }];
        // WAR: the slot's previous content (step t-2) has been copied out by the stage.
        if !rt.has(Fault::NoWarGuard) {
            at(be.wait(&l.stream, &l.consumed[idx]), c)?;
        }
        // `--fault rx-no-wait`, forced: the receive lands only once the stage has copied
        // the slot out (its next `consumed` record, below).
        if rt.has(Fault::RxNoWait) {
            at(
                be.hold_until_next(&l.stream, &l.consumed[idx], FAULT_HOLD),
                c,
            )?;
        }
        at(be.link_recv(&l.stream, buf, n_vals, &l.link, t), c)?;
        at(be.record(&l.arrived[idx], &l.stream), c)?;
        // RAW: the stage reads the slot only after the receive has landed.
        if !rt.has(Fault::RxNoWait) {
            at(be.wait(&rx_s.stream, &l.arrived[idx]), c)?;
        }
        // The WAR faults, forced: the stage copies the slot out only once the next receive
        // into its buffer has landed over it (see `war_hold`).
        if let Some(i) = self.war_hold(lo - 1, idx) {
            at(
                be.hold_until_next(&rx_s.stream, &l.arrived[i], FAULT_HOLD),
                c,
            )?;
        }
        at(
            be.copy(&rx_s.stream, buf, 0, rt.engine(lo).x(), 0, n_vals),
            c,
        )?;
        at(be.record(&l.consumed[idx], &rx_s.stream), c)
    }

    /// Boundary RX at boundary `b` (stage b+1's stream), slot index `idx`.
    fn rx(&mut self, b: usize, idx: usize, rows: usize, t: u64) -> RResult<()> {
        let rt = self.rt;
        let be = &*rt.be;
        let n_vals = rows * rt.model.cfg.n_embd;
        let rx_s = rt.stage(b + 1);
        let c = || {
            format!(
                "boundary {b} RX (stage {}, device {}) slot {idx}, step {t}",
                b + 1,
                rx_s.dev
            )
        };
        let bd = &self.st.bounds[b - rt.lo];
        let buf_idx = if rt.has(Fault::SingleSlot) { 0 } else { idx };
        let sl = &bd.slots[idx];
        // RAW: the slot holds this step's residual only after its TX event.
        if !rt.has(Fault::RxNoWait) {
            at(be.wait(&rx_s.stream, &sl.ev_tx), c)?;
        }
        // The WAR faults, forced: RX copies the slot out only once the next TX into its
        // buffer has landed over it (see `war_hold`).
        if let Some(i) = self.war_hold(b, idx) {
            at(
                be.hold_until_next(&rx_s.stream, &bd.slots[i].ev_tx, FAULT_HOLD),
                c,
            )?;
        }
        let src = bd.slots[buf_idx]
            .buf
            .as_ref()
            .ok_or_else(|| RtError::Misuse(format!("boundary {b} RX before any TX, step {t}")))?;
        be.trace_begin(&rx_s.stream, Piece::Rx(idx));
        at(
            be.copy(&rx_s.stream, src, 0, rt.engine(b + 1).x(), 0, n_vals),
            c,
        )?;
        be.trace_end(&rx_s.stream);
        at(be.record(&sl.ev_rx, &rx_s.stream), c)
    }

    /// A pending step is read once, from the walk that issued it: its slot must still hold
    /// that step unread (a stale or foreign `Pending` is an error, not a stale read).
    fn check_unread(&self, p: &Pending) -> RResult<()> {
        match self.st.outputs.get(p.slot) {
            Some(o) if o.unread == Some(p.step) => Ok(()),
            _ => Err(RtError::Misuse(format!(
                "step {}: not an unread step of this walk (slot {})",
                p.step, p.slot
            ))),
        }
    }

    /// Both reads' common tail, on the reader's stream `s` (the caller's, `caller`, or the
    /// readback stream) after its exit-publication waits: the step's logits (`rows` rows of
    /// the slot's device buffer) downloaded straight into the slot's own host buffer,
    /// allocated once at build (pinned on CUDA: the DMA lands there; no allocation or copy
    /// per step; a traced readback piece); the slot's read event recorded; the slot
    /// released; the host buffer lent. A process without the last stage (no buffers) reads
    /// nothing: the host still waits for `s`, so its steps in flight stay bounded as the
    /// last stage's are.
    fn read_slot(
        &mut self,
        p: &Pending,
        s: &B::Stream,
        caller: bool,
        c: impl Fn() -> String,
    ) -> RResult<&[f32]> {
        let rt = self.rt;
        let be = &*rt.be;
        let out = &mut self.st.outputs[p.slot];
        be.trace_begin(s, Piece::Readback);
        let v = match (out.buf.as_ref(), out.host.as_mut()) {
            (Some(buf), Some(host)) => at(
                be.download_into(s, buf, 0, host, p.rows * rt.model.cfg.vocab),
                &c,
            )?,
            _ => {
                at(be.synchronize(s), &c)?;
                &[]
            }
        };
        be.trace_end(s);
        // WAR on the slot's device buffer: a later head into it waits for this read.
        let read = if caller {
            &out.read_caller
        } else {
            &out.read_rb
        };
        at(be.record(read, s), &c)?;
        out.unread = None;
        Ok(v)
    }

    /// Eager read: the caller's stream waits every stage's exit event (EXIT PUBLICATION of
    /// all stages, so when this returns the whole walk step is finished everywhere and the
    /// caller may touch anything), then downloads the logits into the slot's host buffer.
    /// The slice is lent until the walk's next call (see `OutSlot::host`).
    pub fn read_eager(&mut self, p: Pending) -> RResult<&[f32]> {
        self.check_unread(&p)?;
        let rt = self.rt;
        let be = &*rt.be;
        let c = || format!("eager read on the caller stream, step {}", p.step);
        be.trace_step(&rt.caller, Some(p.pos0));
        if !rt.has(Fault::NoExitPublish) {
            for st in &rt.stages {
                at(be.wait(&rt.caller, &st.exit), c)?;
            }
        }
        self.read_slot(&p, &rt.caller, true, c)
    }

    /// Deferred read: the dedicated readback stream waits this step's completion event on
    /// the last stage (EXIT PUBLICATION of the producer), downloads, and records the slot's
    /// read event; later steps keep running on the stage streams meanwhile. The logits land
    /// in the slot's host buffer, lent until the walk's next call (see `OutSlot::host`).
    pub fn read_deferred(&mut self, p: Pending) -> RResult<&[f32]> {
        self.check_unread(&p)?;
        let rt = self.rt;
        let be = &*rt.be;
        let c = || format!("deferred read on the readback stream, step {}", p.step);
        be.trace_step(&rt.readback, Some(p.pos0));
        if !rt.has(Fault::NoExitPublish) {
            at(be.wait(&rt.readback, &self.st.outputs[p.slot].done), c)?;
        }
        self.read_slot(&p, &rt.readback, false, c)
    }
}

impl<B: Backend> Drop for Walk<'_, B> {
    fn drop(&mut self) {
        // A walk abandoned with steps in flight (an error mid-walk) drains every stream so
        // the next walk starts from a quiet runtime, and releases the unread output slots.
        // Retired slot buffers are freed only behind the same barrier.
        let (rt, be) = (self.rt, &*self.rt.be);
        // Tracing: what is enqueued after the walk is no step's work.
        for s in [&rt.caller, &rt.readback]
            .into_iter()
            .chain(rt.stages.iter().map(|st| &st.stream))
            .chain(rt.rx_link.iter().map(|l| &l.stream))
        {
            be.trace_step(s, None);
        }
        if self.st.outputs.iter().any(|o| o.unread.is_some()) || !self.st.retired.is_empty() {
            let _ = self.rt.barrier("walk drop");
            for o in self.st.outputs.iter_mut() {
                o.unread = None;
            }
            self.st.retired.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::CpuBackend;
    use crate::gguf::GgufFile;
    use crate::model::synth::{builtin_spec, synth_gguf};

    fn builtin() -> Arc<Model> {
        let f = GgufFile::parse(synth_gguf(&builtin_spec()).unwrap()).unwrap();
        Arc::new(Model::load(&f).unwrap())
    }

    fn rt(n: usize, window: usize) -> Runtime<CpuBackend> {
        let m = builtin();
        let placement = Placement::from_flags(
            m.cfg.n_layers,
            Some(n),
            None,
            None,
            TransportChoice::Auto,
            4,
            &|a, b| a == b,
        )
        .unwrap();
        let cfg = RuntimeConfig {
            placement,
            max_rows: 2,
            max_seqs: 2,
            ctx: 8,
            window,
            faults: vec![],
            dist: None,
        };
        Runtime::build(Arc::new(CpuBackend::new(4, 0, 0)), m, cfg).unwrap()
    }

    #[test]
    fn a_last_only_chunk_reads_back_the_last_row_of_the_full_chunk() {
        // The prefill bench's walk (head on the chunk's last row) must give that row the
        // bits the prime arm's walk gives it, and one row only; the second chunk checks the
        // cache the first one left.
        let rt = rt(2, 2);
        let vocab = rt.model().cfg.vocab;
        let chunks: [(&[u32], usize); 2] = [(&[5, 9], 0), (&[3, 7], 2)];
        let mut full = Vec::new();
        let mut w = rt.walk().unwrap();
        w.reset_caches().unwrap();
        for (toks, p0) in chunks {
            let p = w.issue_chunk(toks, p0).unwrap();
            let v = w.read_deferred(p).unwrap();
            assert_eq!(v.len(), 2 * vocab);
            full.push(v[vocab..].to_vec());
        }
        w.reset_caches().unwrap();
        for ((toks, p0), want) in chunks.into_iter().zip(&full) {
            let p = w.issue_chunk_last(toks, p0).unwrap();
            let v = w.read_deferred(p).unwrap();
            assert_eq!(v.len(), vocab);
            assert!(v.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        // A planted change of the prompt must show (the comparison can fail).
        w.reset_caches().unwrap();
        let p = w.issue_chunk_last(&[5, 8], 0).unwrap();
        let v = w.read_deferred(p).unwrap();
        assert!(v
            .iter()
            .zip(&full[0])
            .any(|(a, b)| a.to_bits() != b.to_bits()));
    }

    #[test]
    fn walk_lease_is_exclusive_and_fails_fast() {
        let rt = rt(2, 2);
        let w = rt.walk().unwrap();
        let t0 = std::time::Instant::now();
        assert!(matches!(rt.walk(), Err(RtError::LeaseHeld)));
        assert!(
            t0.elapsed() < std::time::Duration::from_millis(100),
            "the lease must not block"
        );
        // From another thread too: the lease is not tied to the thread that took it.
        std::thread::scope(|s| {
            s.spawn(|| assert!(matches!(rt.walk(), Err(RtError::LeaseHeld))));
        });
        drop(w);
        assert!(rt.walk().is_ok());
    }

    #[test]
    fn a_pending_step_from_an_abandoned_walk_is_refused_not_read_stale() {
        let rt = rt(2, 2);
        let mut w = rt.walk().unwrap();
        let p = w.issue(&[1], &[0]).unwrap();
        drop(w); // drains and releases the unread slot
        let mut w = rt.walk().unwrap();
        let e = w.read_eager(p).unwrap_err();
        assert!(
            e.to_string().contains("not an unread step of this walk"),
            "{e}"
        );
        // The walk itself is still good.
        let q = w.issue(&[2], &[0]).unwrap();
        assert!(w.read_deferred(q).is_ok());
    }

    #[test]
    fn more_steps_in_flight_than_the_window_is_refused() {
        let rt = rt(2, 2);
        let mut w = rt.walk().unwrap();
        let a = w.issue(&[1], &[0]).unwrap();
        let b = w.issue(&[2], &[1]).unwrap();
        let e = w.issue(&[3], &[2]).unwrap_err();
        assert!(e.to_string().contains("still holds unread step 0"), "{e}");
        w.read_deferred(a).unwrap();
        let c = w.issue(&[3], &[2]).unwrap();
        w.read_deferred(b).unwrap();
        w.read_deferred(c).unwrap();
    }

    #[test]
    fn misuse_is_an_error_naming_the_value() {
        let rt = rt(3, 1);
        let mut w = rt.walk().unwrap();
        let cases: [(&[u32], &[usize], &str); 4] = [
            (&[1, 2, 3], &[0, 0, 0], "3 rows"),
            (&[1], &[8], "position 8 beyond context 8"),
            (&[99_999], &[0], "token 99999 outside vocab"),
            (&[1], &[0, 1], "1 rows with 2 positions"),
        ];
        for (toks, pos, want) in cases {
            let e = w.issue(toks, pos).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        }
    }

    #[test]
    fn reads_reuse_each_output_slot_s_host_buffer_and_return_the_step_s_logits() {
        // Window 2: steps t and t+2 share ring slot t % 2. Every read lends that slot's one
        // host buffer (no allocation per step), and what it lends is step t's logits, not a
        // stale step's: each equals the host forward's (`HostSession`, which the CPU
        // runtime matches bit for bit: tests/runtime_numerics.rs), computed without any
        // readback.
        let piped = rt(2, 2);
        let vocab = piped.model().cfg.vocab;
        let mut host = crate::model::HostSession::new(piped.model(), 2, 8);
        let mut w = piped.walk().unwrap();
        let mut ptrs = Vec::new();
        let mut inflight = std::collections::VecDeque::new();
        for i in 0..8 {
            // Read the oldest step when the window is full or nothing is left to issue; the
            // last two through the caller stream (both streams' reads share the slot's buffer).
            if inflight.len() == 2 || (i >= 6 && !inflight.is_empty()) {
                let (j, p, want): (usize, Pending, Vec<f32>) = inflight.pop_front().unwrap();
                let got = if j < 4 {
                    w.read_deferred(p)
                } else {
                    w.read_eager(p)
                }
                .unwrap();
                assert_eq!(got.len(), 2 * vocab);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                let diff = crate::receipt::first_diff(&want, got);
                assert!(
                    same,
                    "step {j}: first differing logit (index, host, read) {diff:?}"
                );
                ptrs.push(got.as_ptr());
            }
            if i < 6 {
                let toks = [(7 + 5 * i) as u32, (3 + 11 * i) as u32];
                let want = host.step(&toks, i);
                inflight.push_back((i, w.issue(&toks, &[i, i]).unwrap(), want));
            }
        }
        assert_eq!(ptrs.len(), 6);
        for t in 0..4 {
            assert_eq!(
                ptrs[t],
                ptrs[t + 2],
                "steps {t} and {} share slot {}",
                t + 2,
                t % 2
            );
            assert_ne!(
                ptrs[t],
                ptrs[t + 1],
                "steps {t} and {} use different slots",
                t + 1
            );
        }
    }

    #[test]
    fn a_download_larger_than_its_host_buffer_is_an_error_naming_both() {
        let be = CpuBackend::new(1, 0, 0);
        let s = be.new_stream(0, "t").unwrap();
        let src = be.alloc_zeroed(0, 8, &s).unwrap();
        let mut host = be.alloc_readback(0, 4).unwrap();
        let e = be.download_into(&s, &src, 0, &mut host, 8).unwrap_err();
        assert!(
            e.to_string().contains("8 values") && e.to_string().contains("of 4"),
            "{e}"
        );
        assert_eq!(
            be.download_into(&s, &src, 4, &mut host, 4).unwrap(),
            &[0.0; 4]
        );
    }

    #[test]
    fn an_abandoned_walk_releases_its_slots() {
        let rt = rt(2, 1);
        {
            let mut w = rt.walk().unwrap();
            let _p = w.issue(&[1], &[0]).unwrap();
            // dropped with the step unread (as an error mid-walk would)
        }
        let mut w = rt.walk().unwrap();
        let p = w.issue(&[1], &[0]).unwrap();
        assert_eq!(w.read_eager(p).unwrap().len(), rt.model().cfg.vocab);
    }
}
