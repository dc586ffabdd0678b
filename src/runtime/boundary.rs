//! The boundaries of a walk step: the TX into and RX out of an in-process slot (the
//! double-buffered, grow-only residual between two stages, over the placement's transport)
//! and the RX of a link from another process, each ordered by the slot's events alone; and
//! the holds that the write-after-read faults plant there.

use super::fault::FAULT_HOLD;
use super::walk::Walk;
use super::{at, Fault, RResult, RtError, Transport};
use crate::backend::trace::Piece;
use crate::backend::{Backend, Engine};

impl<B: Backend> Walk<'_, B> {
    /// Under a write-after-read fault, the slot index whose next write the reader of slot
    /// `idx` at boundary `b` holds for, so that write lands before the read (the stale read
    /// the fault allows, every run): `--fault no-war-guard`, this slot's next write (two
    /// steps on); `--fault single-slot`, the other index's (the next step, into the one
    /// shared buffer). Only at boundary 0, whose writer (stage 0) holds for nothing: a hold
    /// at every boundary would chain each one's wait behind the next's. And only while
    /// earlier steps are in flight: an arm that reads every step back before issuing the
    /// next never issues that write during the hold, which would only spend `FAULT_HOLD`.
    pub(super) fn war_hold(&self, b: usize, idx: usize) -> Option<usize> {
        let rt = self.rt;
        if b != 0 || !self.steps_in_flight() {
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
    pub(super) fn tx(&mut self, b: usize, idx: usize, rows: usize, t: u64) -> RResult<()> {
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
    pub(super) fn rx_link(&mut self, idx: usize, rows: usize, t: u64) -> RResult<()> {
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
    pub(super) fn rx(&mut self, b: usize, idx: usize, rows: usize, t: u64) -> RResult<()> {
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
}
