//! CPU "device memory": f32 bits in `AtomicU32`s, every access `Relaxed`.
//!
//! Relaxed atomics give no ordering between threads: ordering comes only from the events
//! (their mutex hand-off), exactly as on a GPU. An unordered reader therefore really sees a
//! stale, torn or poisoned row, which is what lets the gate catch a missing edge on the CPU.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::op_err;
use crate::backend::BResult;

/// Bits of freshly allocated, not yet zero-filled memory: a quiet NaN with a recognisable
/// payload, so a read that races the zero-fill poisons the logits visibly.
pub const POISON_BITS: u32 = 0x7FC0_DEAD;

pub struct DevMem {
    data: Box<[AtomicU32]>,
    /// The CPU domain this memory was allocated on (None: host staging).
    dev: Option<usize>,
}

impl DevMem {
    pub fn poisoned(n: usize, dev: Option<usize>) -> DevMem {
        DevMem {
            data: (0..n).map(|_| AtomicU32::new(POISON_BITS)).collect(),
            dev,
        }
    }

    /// The domain this memory was allocated on (None: host staging).
    pub fn device(&self) -> Option<usize> {
        self.dev
    }

    /// Bytes of f32 values held.
    pub fn bytes(&self) -> u64 {
        4 * self.data.len() as u64
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn load(&self, off: usize, out: &mut [f32]) {
        let n = out.len();
        for (o, a) in out.iter_mut().zip(&self.data[off..off + n]) {
            *o = f32::from_bits(a.load(Relaxed));
        }
    }

    pub fn store(&self, off: usize, src: &[f32]) {
        for (a, v) in self.data[off..off + src.len()].iter().zip(src) {
            a.store(v.to_bits(), Relaxed);
        }
    }

    pub fn fill(&self, v: f32) {
        for a in self.data.iter() {
            a.store(v.to_bits(), Relaxed);
        }
    }
}

/// Bounds check at enqueue time (host side), so a bad offset is an error naming the values,
/// never a panic on a worker thread.
pub fn check_range(what: &str, b: &Arc<DevMem>, off: usize, n: usize) -> BResult<()> {
    match off.checked_add(n) {
        Some(end) if end <= b.len() => Ok(()),
        _ => Err(op_err(format!(
            "{what}: range {off}..{off}+{n} outside buffer of {} values",
            b.len()
        ))),
    }
}

/// Host memory a download lands in (`Backend::download_into`): plain f32 values, allocated
/// once. The download op on a stream's worker writes them through a second handle; the host
/// lends them only when it holds the sole handle again (after the stream synchronize), so
/// a lent slice is never written under a reader.
pub struct HostMem {
    data: Arc<Mutex<Box<[f32]>>>,
    len: usize,
}

impl HostMem {
    pub fn new(n: usize) -> HostMem {
        HostMem {
            data: Arc::new(Mutex::new(vec![0f32; n].into_boxed_slice())),
            len: n,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// A handle for the op that writes the values.
    pub(super) fn handle(&self) -> Arc<Mutex<Box<[f32]>>> {
        self.data.clone()
    }

    /// The first `n` values, lent while no other handle exists (None: an op still holds
    /// one). Exclusive access proves no writer; the mutex is not taken.
    pub(super) fn slice(&mut self, n: usize) -> Option<&[f32]> {
        let m = Arc::get_mut(&mut self.data)?;
        let v = m.get_mut().unwrap_or_else(|p| p.into_inner());
        v.get(..n)
    }
}
