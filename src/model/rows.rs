//! Where a step's rows sit and how their cache stores are ordered: the two facts about a
//! step that the forward pass (`forward::layer_rows`) reads and every backend's engine
//! takes. They are the model's vocabulary (positions, sequences, cache slots, the
//! attention window of `Config::attn_start`), so they live here, and the backend imports
//! them from the model rather than the model from the backend.

use super::Model;

/// Where one row of a step sits: `pos` is its token position (RoPE), `seq` the sequence it
/// belongs to (the cache row), `slot` the cache slot its key/value go to. Its attention
/// reads its sequence's slots `[slot - (pos - window start), slot]`: the cache's length (the
/// runtime's per-stage bookkeeping, `slot` is the length before the row) governs what a row
/// reads, so a cache that was not rolled back reads the positions it should have dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowAt {
    pub pos: usize,
    pub seq: usize,
    pub slot: usize,
}

impl RowAt {
    /// The first slot row `self` attends to in layer `il` (`Config::attn_start` of its
    /// position, moved by the slot's offset from the position).
    pub fn from_slot(&self, model: &Model, il: usize) -> usize {
        let span = self.pos - model.cfg.attn_start(il, self.pos);
        self.slot.saturating_sub(span)
    }
}

/// How the key/value stores of a step's rows are ordered against their attention reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvOrder {
    /// Each row reads only slots written by earlier steps plus its own (decode steps, the
    /// batched arm: every row its own sequence), so store and attention may be fused per row.
    Fused,
    /// Rows of ONE sequence at consecutive slots (a prime chunk, a verify round): row i
    /// reads the slots of rows < i of the same step, so EVERY row's key/value is stored
    /// before ANY row's attention reads the cache (the multi-row ordering law).
    StoreFirst,
    /// `--fault chunk-kv-order`: rows of one sequence with the stores fused into the
    /// attention pass, so a row may read a sibling's slot before the sibling stored it.
    Racy,
}
