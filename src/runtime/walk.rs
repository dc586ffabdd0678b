//! The walk: the lease's holder issues steps (decode rows, prime chunks, verify rounds)
//! stage by stage over this process's stages, keeps each stage's cache lengths (reset,
//! rollback), and reads each step's logits back, eagerly on the caller stream or deferred
//! on the readback stream. The boundary copies between stages are in `boundary`.

use std::sync::MutexGuard;

use super::fault::FAULT_HOLD;
use super::{at, Fault, Pending, RResult, RtError, Runtime, WalkState};
use crate::backend::trace::Piece;
use crate::backend::{Backend, Engine};
use crate::model::{KvOrder, RowAt};

/// Which sequence each row of a step is (`Walk::issue_rows`).
#[derive(Clone, Copy)]
enum Place<'x> {
    /// Row r is sequence r, one position each (decode, the batched arm).
    Each,
    /// Every row is this sequence, at consecutive positions (a prime chunk, a verify round).
    Chunk(usize),
    /// Row r continues sequence `seqs[r]` from its cache length (the serve arm).
    Seqs(&'x [usize]),
}

/// An exclusive walk over the runtime (see `Runtime::walk`).
pub struct Walk<'a, B: Backend> {
    pub(super) rt: &'a Runtime<B>,
    pub(super) st: MutexGuard<'a, WalkState<B>>,
}

impl<'a, B: Backend> Walk<'a, B> {
    /// Enqueue one decode step: row r is sequence r, carrying `tokens[r]` at position
    /// `pos[r]`. Returns at once; the logits are read with `read_eager` or `read_deferred`.
    pub fn issue(&mut self, tokens: &[u32], pos: &[usize]) -> RResult<Pending> {
        self.issue_rows(tokens, pos, Place::Each, false)
    }

    /// Enqueue one step of rows of several sequences (the serve arm's continuous batch):
    /// row r continues sequence `seqs[r]` from that sequence's cache length on each stage, a
    /// sequence's rows in the step at consecutive slots and positions in row order (a
    /// prefill chunk), rows of different sequences in any order. Positions are the cache's
    /// (slot = position: a sequence starts at 0 after `reset_seq`). A sequence with several
    /// rows in the step makes the whole step store-first (every row's key/value stored
    /// before any row's attention reads: the multi-row law across the mixed step). `label`
    /// names the step in the trace (the arm's step number).
    pub fn issue_seqs(&mut self, tokens: &[u32], seqs: &[usize], label: usize) -> RResult<Pending> {
        self.issue_rows(tokens, &vec![label; tokens.len()], Place::Seqs(seqs), false)
    }

    /// Tracing: step `label` (the number given to `issue_seqs`) is named `text()` in the
    /// trace when one is kept (the serve arm: the requests and positions it carries).
    /// Names only: nothing is enqueued.
    pub fn name_step(&self, label: usize, text: &dyn Fn() -> String) {
        self.rt.be.trace_label(label as u64, text);
    }

    /// A finished request's cache row handed to the next: sequence `seq`'s length reset to
    /// 0 on every stage of this process. Host bookkeeping only, like `truncate`: the next
    /// rows store at slots 0.. before they read them (each stage's stream orders those
    /// stores after the previous request's reads on that stage), and a row reads only slots
    /// below its own, so no zero-fill is needed (the cache-reuse law: a reused row starts
    /// empty). `--fault stale-cache`: every stage keeps the previous request's length, so
    /// the new request continues after the stale keys (positions and attention included).
    pub fn reset_seq(&mut self, seq: usize) -> RResult<()> {
        for s in self.rt.lo..self.rt.hi {
            let l = self.st.lens[s].get_mut(seq).ok_or_else(|| {
                RtError::Misuse(format!("reset_seq: sequence {seq} outside the cache"))
            })?;
            if !self.rt.has(Fault::StaleCache) {
                *l = 0;
            }
        }
        Ok(())
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
        self.issue_rows(tokens, &pos, Place::Chunk(0), last_only)
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

    /// `place` says which sequence each row is (see `Place`). `last_only`: the head (and so
    /// the readback) covers the last row only.
    fn issue_rows(
        &mut self,
        tokens: &[u32],
        pos: &[usize],
        place: Place<'_>,
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
        // Row r's sequence and its offset from that sequence's cache length; a row's slot on
        // stage s is lens[s][seq] + offset.
        let seq_at: Vec<(usize, usize)> = match place {
            Place::Each => (0..rows).map(|r| (r, 0)).collect(),
            Place::Chunk(q) => (0..rows).map(|r| (q, r)).collect(),
            Place::Seqs(q) if q.len() != rows => {
                return Err(RtError::Misuse(format!(
                    "step {t}: {rows} rows with {} sequences",
                    q.len()
                )))
            }
            Place::Seqs(q) => (0..rows)
                .map(|r| (q[r], q[..r].iter().filter(|&&x| x == q[r]).count()))
                .collect(),
        };
        let seqs = seq_at.iter().map(|a| a.0 + 1).max().unwrap_or(0);
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
        // (Rows continuing their sequences carry a trace label, not positions: their slots,
        // checked below, are their positions.)
        let given = !matches!(place, Place::Seqs(_));
        if let Some(&bad) = pos.iter().find(|&&x| given && x >= rt.cfg.ctx) {
            return Err(RtError::Misuse(format!(
                "step {t}: position {bad} beyond context {}",
                rt.cfg.ctx
            )));
        }
        let seq_of = |r: usize| seq_at[r];
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
        let multi = match place {
            Place::Each => false,
            Place::Chunk(_) => true,
            Place::Seqs(_) => seq_at.iter().any(|a| a.1 > 0),
        };
        let order = match multi {
            false => KvOrder::Fused,
            true if rt.has(Fault::ChunkKvOrder) => KvOrder::Racy,
            true => KvOrder::StoreFirst,
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
                at(be.hold_until_next(&rt.caller, &inp.consumed, FAULT_HOLD), c)?;
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
                let slot = self.st.lens[s][seq] + k;
                // Rows that continue their sequence sit at the cache's positions.
                let pos = match place {
                    Place::Seqs(_) => slot,
                    _ => pos[r],
                };
                RowAt { pos, seq, slot }
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
            // `--fault shared-scratch`, forced (with the hold at stage lo + 1 below): stage
            // lo writes the one shared scratch for this step only once stage lo + 1 has
            // received the step before into it, so the write lands between that receive and
            // that stage's compute every run. Without it a stage lo a whole step ahead wrote
            // before the receive, which then put the step's values back: after an eager arm,
            // `--arms eager,serve --requests 1 --fault shared-scratch` PASSed (hunt seed 197).
            // Only while earlier steps are in flight, as the hold.
            if s == lo
                && lo + 1 < hi
                && t > 0
                && rt.has(Fault::SharedScratch)
                && self.steps_in_flight()
            {
                let prev = ((t - 1) % 2) as usize;
                let ev = &self.st.bounds[0].slots[prev].ev_rx;
                at(be.wait(&stg.stream, ev), c("shared-scratch order"))?;
            }
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
            if s == lo + 1 && rt.has(Fault::SharedScratch) && self.steps_in_flight() {
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
                    let read = if self.steps_in_flight() {
                        &out.read_rb
                    } else {
                        &out.read_caller
                    };
                    at(be.hold_until_next(&stg.stream, read, FAULT_HOLD), c("head"))?;
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

    /// Whether an issued step's output is still unread: steps are in flight, so the next one
    /// issued runs beside them (what the forced write-after-read and scratch faults hold for).
    pub(super) fn steps_in_flight(&self) -> bool {
        self.st.outputs.iter().any(|o| o.unread.is_some())
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
        if self.steps_in_flight() || !self.st.retired.is_empty() {
            let _ = self.rt.barrier("walk drop");
            for o in self.st.outputs.iter_mut() {
                o.unread = None;
            }
            self.st.retired.clear();
        }
    }
}
