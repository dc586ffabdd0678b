//! The forward pass as stage primitives on host slices: [`embed`], one [`layer`], [`head`].
//! A pipeline stage is any run of consecutive layers; [`HostSession`] strings them together
//! with Vec-backed KV caches as the reference.
//!
//! Rule that holds here: every row of a batch is computed independently with the fixed-order
//! kernels of `crate::math`, so a row's values do not depend on which other rows share the
//! call (batch size), on thread count, or on where the layer range is split — the residual
//! stream between layers is the whole state a stage hands to the next.

use super::{Activation, KvOrder, Model, RowAt};
use crate::math::{self, AttnShape};

/// The per-sequence key/value cache of ONE layer, as the layer reads and writes it.
pub trait KvAccess {
    /// Stores the keys and values (each n_kv_heads*head_dim) of sequence `row` at `pos`.
    fn append(&mut self, row: usize, pos: usize, k: &[f32], v: &[f32]);
    /// Replaces `k`/`v` with positions `[from, to)` of sequence `row`, position-major.
    fn read(&self, row: usize, from: usize, to: usize, k: &mut Vec<f32>, v: &mut Vec<f32>);
}

/// Token embeddings (dequantized rows of `token_embd`, times `embed_scale`) into `out`
/// (tokens.len() × n_embd). An id past the vocabulary embeds as zeros: callers validate ids
/// at their input boundary with `Model::check_tokens`.
pub fn embed(m: &Model, tokens: &[u32], out: &mut [f32]) {
    let n = m.cfg.n_embd;
    debug_assert_eq!(out.len(), tokens.len() * n);
    for (&t, row) in tokens.iter().zip(out.chunks_exact_mut(n)) {
        let ok = (t as usize) < m.tok_embd.rows
            && crate::quant::dequantize(m.tok_embd.ty, m.tok_embd.row(t as usize), row).is_ok();
        if !ok {
            row.fill(0.0);
            continue;
        }
        for x in row.iter_mut() {
            *x *= m.cfg.embed_scale;
        }
    }
}

/// One transformer block over a batch of rows, in place on the residual `x`
/// (pos.len() × n_embd). Row r is sequence r at position `pos[r]`; its keys/values are
/// appended to `kv` at that position and it attends to the cached positions its layer's
/// window allows.
pub fn layer(m: &Model, il: usize, x: &mut [f32], pos: &[usize], kv: &mut dyn KvAccess) {
    let at: Vec<RowAt> = pos
        .iter()
        .enumerate()
        .map(|(r, &p)| RowAt {
            pos: p,
            seq: r,
            slot: p,
        })
        .collect();
    layer_rows(m, il, x, &at, KvOrder::Fused, kv)
}

/// One transformer block over rows placed by `at` (see `RowAt`): row r's key/value go to
/// slot `at[r].slot` of sequence `at[r].seq`, and it attends over that sequence's slots
/// `[from_slot, slot]` in slot order. Every order gives a row the same arithmetic; what
/// `order` changes is only WHEN the stores happen against the reads (see `KvOrder`).
pub fn layer_rows(
    m: &Model,
    il: usize,
    x: &mut [f32],
    at: &[RowAt],
    order: KvOrder,
    kv: &mut dyn KvAccess,
) {
    let c = &m.cfg;
    let lw = &m.layers[il];
    let rows = at.len();
    let (n, qd, kvd, hd) = (c.n_embd, c.q_dim(), c.kv_dim(), c.head_dim);
    debug_assert_eq!(x.len(), rows * n);

    // Attention.
    let mut xn = vec![0.0f32; rows * n];
    math::rms_norm(x, &lw.attn_norm, c.rms_eps, &mut xn);
    let mut q = vec![0.0f32; rows * qd];
    let mut k = vec![0.0f32; rows * kvd];
    let mut v = vec![0.0f32; rows * kvd];
    math::matmul_group(
        &[&lw.wq, &lw.wk, &lw.wv],
        &xn,
        rows,
        &mut [&mut q, &mut k, &mut v],
    );
    // Biases (qwen2): one f32 add on each projection output, as the device engines add them.
    for (out, b, w) in [
        (&mut q, &lw.bq, qd),
        (&mut k, &lw.bk, kvd),
        (&mut v, &lw.bv, kvd),
    ] {
        if let Some(b) = b {
            for row in out.chunks_exact_mut(w) {
                row.iter_mut().zip(b).for_each(|(o, bi)| *o += bi);
            }
        }
    }
    if let (Some(qn), Some(kn)) = (&lw.q_norm, &lw.k_norm) {
        math::rms_norm_inplace(&mut q, qn, c.rms_eps);
        math::rms_norm_inplace(&mut k, kn, c.rms_eps);
    }
    let mut cos = vec![0.0f32; hd / 2];
    let mut sin = vec![0.0f32; hd / 2];
    let shape = AttnShape {
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        head_dim: hd,
        scale: c.attn_scale,
    };
    let mut att = vec![0.0f32; rows * qd];
    let (mut kc, mut vc) = (Vec::new(), Vec::new());
    for (r, a) in at.iter().enumerate() {
        c.layer_rope_table(il, a.pos, &mut cos, &mut sin);
        math::rope_apply(&mut q[r * qd..(r + 1) * qd], &cos, &sin, c.rope_style);
        math::rope_apply(&mut k[r * kvd..(r + 1) * kvd], &cos, &sin, c.rope_style);
    }
    let store = |kv: &mut dyn KvAccess, r: usize| {
        let a = &at[r];
        kv.append(
            a.seq,
            a.slot,
            &k[r * kvd..(r + 1) * kvd],
            &v[r * kvd..(r + 1) * kvd],
        );
    };
    // Row r's attention over its window, read from the cache; under `Racy` its own
    // key/value come from this step's registers (as the fused GPU kernel's shared copy)
    // and the rest is whatever the cache holds at the time of the read.
    let mut attend = |kv: &dyn KvAccess, r: usize, own_from_regs: bool| {
        let a = &at[r];
        let from = a.from_slot(m, il);
        kv.read(a.seq, from, a.slot + 1, &mut kc, &mut vc);
        let n_pos = a.slot + 1 - from;
        if own_from_regs {
            let o = (n_pos - 1) * kvd;
            kc[o..o + kvd].copy_from_slice(&k[r * kvd..(r + 1) * kvd]);
            vc[o..o + kvd].copy_from_slice(&v[r * kvd..(r + 1) * kvd]);
        }
        math::attention(
            &q[r * qd..(r + 1) * qd],
            &kc,
            &vc,
            n_pos,
            shape,
            &mut att[r * qd..(r + 1) * qd],
        );
    };
    match order {
        // Row r stores, then reads: its own slot and earlier steps' slots are written.
        KvOrder::Fused => {
            for r in 0..rows {
                store(kv, r);
                attend(kv, r, false);
            }
        }
        // MULTI-ROW LAW: every row's key/value stored before any row reads the cache.
        KvOrder::StoreFirst => {
            for r in 0..rows {
                store(kv, r);
            }
            for r in 0..rows {
                attend(kv, r, false);
            }
        }
        // The law broken: every row reads before any row of the step stored, so row r sees
        // stale (reset: zero) slots where rows < r of its own sequence belong.
        KvOrder::Racy => {
            for r in 0..rows {
                attend(kv, r, true);
            }
            for r in 0..rows {
                store(kv, r);
            }
        }
    }
    let mut o = vec![0.0f32; rows * n];
    math::matmul(&lw.wo, &att, rows, &mut o);
    if let Some(w) = &lw.post_attn_norm {
        math::rms_norm_inplace(&mut o, w, c.rms_eps);
    }
    for (xi, oi) in x.iter_mut().zip(&o) {
        *xi += oi;
    }

    // Feed-forward.
    math::rms_norm(x, &lw.ffn_norm, c.rms_eps, &mut xn);
    let mut g = vec![0.0f32; rows * c.n_ff];
    let mut u = vec![0.0f32; rows * c.n_ff];
    math::matmul_group(&[&lw.gate, &lw.up], &xn, rows, &mut [&mut g, &mut u]);
    match c.activation {
        Activation::Silu => g
            .iter_mut()
            .zip(&u)
            .for_each(|(gi, ui)| *gi = math::silu(*gi) * ui),
        Activation::GeluTanh => g
            .iter_mut()
            .zip(&u)
            .for_each(|(gi, ui)| *gi = math::gelu_tanh(*gi) * ui),
    }
    math::matmul(&lw.down, &g, rows, &mut o);
    if let Some(w) = &lw.post_ffn_norm {
        math::rms_norm_inplace(&mut o, w, c.rms_eps);
    }
    for (xi, oi) in x.iter_mut().zip(&o) {
        *xi += oi;
    }
}

/// Final norm and output projection: `x` rows×n_embd -> `logits` rows×vocab.
pub fn head(m: &Model, x: &[f32], logits: &mut [f32]) {
    let n = m.cfg.n_embd;
    let rows = x.len() / n;
    debug_assert_eq!(logits.len(), rows * m.cfg.vocab);
    let mut xn = vec![0.0f32; x.len()];
    math::rms_norm(x, &m.out_norm, m.cfg.rms_eps, &mut xn);
    math::matmul(&m.output, &xn, rows, logits);
}

/// A Vec-backed KV cache of one layer for several sequences. Each sequence's storage grows
/// on demand (a position never written reads as zeros), so no position is out of range.
#[derive(Clone, Debug, Default)]
pub struct HostKv {
    kv_dim: usize,
    seqs: Vec<(Vec<f32>, Vec<f32>)>,
}

impl HostKv {
    /// `rows` sequences of `kv_dim` floats per position, room reserved for `max_ctx`.
    pub fn new(rows: usize, kv_dim: usize, max_ctx: usize) -> HostKv {
        let seq = || {
            (
                Vec::with_capacity(max_ctx * kv_dim),
                Vec::with_capacity(max_ctx * kv_dim),
            )
        };
        HostKv {
            kv_dim,
            seqs: (0..rows).map(|_| seq()).collect(),
        }
    }

    fn seq_mut(&mut self, row: usize) -> &mut (Vec<f32>, Vec<f32>) {
        if row >= self.seqs.len() {
            self.seqs.resize_with(row + 1, Default::default);
        }
        &mut self.seqs[row]
    }
}

impl KvAccess for HostKv {
    fn append(&mut self, row: usize, pos: usize, k: &[f32], v: &[f32]) {
        let d = self.kv_dim;
        let (ks, vs) = self.seq_mut(row);
        let end = (pos + 1) * d;
        if ks.len() < end {
            ks.resize(end, 0.0);
            vs.resize(end, 0.0);
        }
        ks[pos * d..end].copy_from_slice(&k[..d]);
        vs[pos * d..end].copy_from_slice(&v[..d]);
    }

    fn read(&self, row: usize, from: usize, to: usize, k: &mut Vec<f32>, v: &mut Vec<f32>) {
        let d = self.kv_dim;
        k.clear();
        v.clear();
        k.resize((to - from) * d, 0.0);
        v.resize((to - from) * d, 0.0);
        if let Some((ks, vs)) = self.seqs.get(row) {
            let hi = (to * d).min(ks.len());
            let lo = (from * d).min(hi);
            k[..hi - lo].copy_from_slice(&ks[lo..hi]);
            v[..hi - lo].copy_from_slice(&vs[lo..hi]);
        }
    }
}

/// The reference decoder: `rows` sequences decoded in lock-step on host, one KV cache per
/// layer.
pub struct HostSession<'m> {
    pub model: &'m Model,
    pub kv: Vec<HostKv>,
}

impl<'m> HostSession<'m> {
    pub fn new(model: &'m Model, rows: usize, max_ctx: usize) -> HostSession<'m> {
        let kv = (0..model.cfg.n_layers)
            .map(|_| HostKv::new(rows, model.cfg.kv_dim(), max_ctx))
            .collect();
        HostSession { model, kv }
    }

    /// One decode step: `tokens[r]` is row r's token at position `pos`; returns the logits,
    /// rows × vocab. `tokens.len()` is the batch (normally `rows`).
    pub fn step(&mut self, tokens: &[u32], pos: usize) -> Vec<f32> {
        let m = self.model;
        let mut x = vec![0.0f32; tokens.len() * m.cfg.n_embd];
        embed(m, tokens, &mut x);
        self.run_layers(0, m.cfg.n_layers, &mut x, pos);
        let mut logits = vec![0.0f32; tokens.len() * m.cfg.vocab];
        head(m, &x, &mut logits);
        logits
    }

    /// Layers `[a, b)` on the residual `x` (batch × n_embd), every row at position `pos`.
    pub fn run_layers(&mut self, a: usize, b: usize, x: &mut [f32], pos: usize) {
        let rows = x.len() / self.model.cfg.n_embd;
        let p = vec![pos; rows];
        for il in a..b.min(self.model.cfg.n_layers) {
            layer(self.model, il, x, &p, &mut self.kv[il]);
        }
    }
}
