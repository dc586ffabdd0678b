//! The CPU numerics of one transformer layer on plain f32 slices: RMS norm, RoPE, decode
//! attention, activations and the quantized matmul.
//!
//! Rule that holds in this module: every reduction runs in ONE order fixed by the vector
//! length alone — never by the number of rows in the batch, the number of rayon threads, or
//! how layers are split across stages. Sums over a vector use 8 f32 lanes (lane l takes
//! elements l, l+8, ...) closed by the fixed tree `((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))`;
//! `mul_add` is never called (Rust does not contract a*b+c on its own), so the result is
//! the same with or without FMA hardware. Parallelism only ever splits *independent* output
//! elements between threads, so each element is computed by the same instructions whatever
//! the split.

use rayon::prelude::*;

use crate::quant;
use crate::quant::Weight;

/// Closes 8 lane partial sums in the fixed tree every reduction of this crate uses (the
/// one definition lives with the quantized dots).
use crate::quant::finish_lanes as tree8;

/// Fixed-order dot product of two equally long f32 vectors (8 lanes + fixed tree; the tail
/// past the last full group of 8 goes into lanes 0.. in order, as if zero-padded).
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut l = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for j in 0..8 {
            l[j] += x[j] * y[j];
        }
    }
    for (j, (x, y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
        l[j] += x * y;
    }
    tree8(&l)
}

/// Fixed-order sum (8 lanes + fixed tree, tail as in [`dot_f32`]).
pub fn sum_f32(a: &[f32]) -> f32 {
    let mut l = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    for x in &mut ca {
        for j in 0..8 {
            l[j] += x[j];
        }
    }
    for (j, x) in ca.remainder().iter().enumerate() {
        l[j] += x;
    }
    tree8(&l)
}

/// RMS norm of every `w.len()`-long row of `x` into `out`:
/// `out = x * (1 / sqrt(mean(x²) + eps)) * w`. `x.len()` must be a multiple of `w.len()`
/// (one call normalises a batch of residual rows, or every head of a q/k row).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    debug_assert!(out.len() == x.len());
    out.copy_from_slice(x);
    rms_norm_inplace(out, w, eps);
}

/// [`rms_norm`] in place.
pub fn rms_norm_inplace(x: &mut [f32], w: &[f32], eps: f32) {
    let n = w.len();
    debug_assert!(n > 0 && x.len().is_multiple_of(n));
    for xr in x.chunks_exact_mut(n) {
        let ss = dot_f32(xr, xr);
        let inv = 1.0 / (ss / n as f32 + eps).sqrt();
        for (xi, &wi) in xr.iter_mut().zip(w) {
            *xi = (*xi * inv) * wi;
        }
    }
}

/// Which elements of a head RoPE rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(x[2i], x[2i+1])` — llama.cpp `LLAMA_ROPE_TYPE_NORM` (llama: the
    /// GGUF converter permutes q/k rows so this matches HF's rotate_half).
    Norm,
    /// Halves `(x[i], x[i + d/2])` — llama.cpp `LLAMA_ROPE_TYPE_NEOX` (gemma3).
    Neox,
}

/// cos/sin of the RoPE angles `pos * base^(-2i/head_dim) / factors[i]`, i in
/// 0..head_dim/2 (`factors`: a Llama-3.1+ file's `rope_freqs.weight`, which llama.cpp's
/// ggml_rope applies as `theta / freq_factor`; None = all 1). Computed in f64 and rounded once
/// to f32, so the table depends only on (head_dim, base, factors, pos); a device engine that
/// wants the same bits uploads this table rather than computing its own.
pub fn rope_table(
    head_dim: usize,
    base: f32,
    factors: Option<&[f32]>,
    pos: usize,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let half = head_dim / 2;
    debug_assert!(cos.len() == half && sin.len() == half);
    debug_assert!(factors.is_none_or(|f| f.len() == half));
    for i in 0..half {
        let inv_freq = 1.0 / (base as f64).powf((2 * i) as f64 / head_dim as f64);
        let mut a = pos as f64 * inv_freq;
        if let Some(f) = factors {
            a /= f[i] as f64;
        }
        cos[i] = a.cos() as f32;
        sin[i] = a.sin() as f32;
    }
}

/// Rotates every `2 * cos.len()`-long head of `x` by the angles of one position.
pub fn rope_apply(x: &mut [f32], cos: &[f32], sin: &[f32], style: RopeStyle) {
    let half = cos.len();
    let hd = 2 * half;
    debug_assert!(hd > 0 && x.len().is_multiple_of(hd));
    for h in x.chunks_exact_mut(hd) {
        for i in 0..half {
            let (a, b) = match style {
                RopeStyle::Norm => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + half),
            };
            let (x0, x1) = (h[a], h[b]);
            h[a] = x0 * cos[i] - x1 * sin[i];
            h[b] = x0 * sin[i] + x1 * cos[i];
        }
    }
}

/// RoPE for every head of `x` at position `pos` (table + apply).
pub fn rope(x: &mut [f32], head_dim: usize, pos: usize, base: f32, style: RopeStyle) {
    let mut cos = vec![0.0; head_dim / 2];
    let mut sin = vec![0.0; head_dim / 2];
    rope_table(head_dim, base, None, pos, &mut cos, &mut sin);
    rope_apply(x, &cos, &sin, style);
}

/// Shape of one decode-attention call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Multiplies q·k before the softmax (1/sqrt(head_dim) for every supported arch).
    pub scale: f32,
}

/// Attention of ONE query row over `n_pos` cached positions (the caller has already picked
/// the window: every position in `k`/`v` is attended). `q`/`out`: n_heads×head_dim;
/// `k`/`v`: n_pos × n_kv_heads × head_dim, position-major (the `KvAccess::read` layout).
/// Grouped-query: head h reads kv head `h / (n_heads / n_kv_heads)`.
///
/// Order: scores by [`dot_f32`]; max (exact, order-free); exp; the denominator by
/// [`sum_f32`] over positions; then `out[d] = Σ_t p_t·v_t[d]` accumulated in position order
/// 0, 1, 2, ... — all fixed by n_pos and head_dim.
pub fn attention(q: &[f32], k: &[f32], v: &[f32], n_pos: usize, s: AttnShape, out: &mut [f32]) {
    let hd = s.head_dim;
    let kvd = s.n_kv_heads * hd;
    debug_assert!(q.len() == s.n_heads * hd && out.len() == q.len());
    debug_assert!(k.len() == n_pos * kvd && v.len() == k.len());
    debug_assert!(s.n_kv_heads > 0 && s.n_heads.is_multiple_of(s.n_kv_heads));
    let group = s.n_heads / s.n_kv_heads;
    let mut p = vec![0.0f32; n_pos];
    for h in 0..s.n_heads {
        let kh = h / group;
        let qh = &q[h * hd..(h + 1) * hd];
        let oh = &mut out[h * hd..(h + 1) * hd];
        for (t, pt) in p.iter_mut().enumerate() {
            let kt = &k[t * kvd + kh * hd..t * kvd + (kh + 1) * hd];
            *pt = dot_f32(qh, kt) * s.scale;
        }
        let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for pt in p.iter_mut() {
            *pt = (*pt - max).exp();
        }
        let inv = 1.0 / sum_f32(&p);
        oh.fill(0.0);
        for (t, &pt) in p.iter().enumerate() {
            let w = pt * inv;
            let vt = &v[t * kvd + kh * hd..t * kvd + (kh + 1) * hd];
            for (o, &vi) in oh.iter_mut().zip(vt) {
                *o += w * vi;
            }
        }
    }
}

/// GELU, tanh approximation (HF `gelu_pytorch_tanh`, gemma's FFN activation).
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh())
}

/// SiLU `x * sigmoid(x)` (llama's FFN activation).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Output features per rayon task. Big enough that a task's overhead (~1 µs) is small next
/// to its dots, small enough that both cores stay busy on the narrowest matrices (192
/// rows). Changing it changes speed only: each output element is one independent dot.
fn chunk_features(n_out: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    // ~8 tasks per thread for load balance, never fewer than 16 features per task.
    n_out.div_ceil(threads * 8).max(16)
}

/// `out[r][o] = dot(w.row(o), x[r])` for r in 0..rows: `x` is rows×w.cols, `out` rows×w.rows.
/// Parallel over output features; each element is `quant::dot` (rows = 1) or one slot of
/// `quant::dot_many` (bit-identical to `dot` by that module's contract), so every output
/// element has the same bits for any `rows` and any thread count.
pub fn matmul(w: &Weight, x: &[f32], rows: usize, out: &mut [f32]) {
    matmul_group(&[w], x, rows, &mut [out]);
}

/// Several weights against the same input (q/k/v, gate/up) in ONE parallel dispatch, which
/// saves a thread wake-up and join per weight. `outs[i]` is rows×ws[i].rows; each element
/// has exactly the bits [`matmul`] gives it.
pub fn matmul_group(ws: &[&Weight], x: &[f32], rows: usize, outs: &mut [&mut [f32]]) {
    debug_assert_eq!(ws.len(), outs.len());
    if rows == 0 {
        return;
    }
    let n_in = ws.first().map_or(0, |w| w.cols);
    debug_assert!(ws.iter().all(|w| w.cols == n_in));
    debug_assert_eq!(x.len(), rows * n_in);
    if rows == 1 {
        // Task = (weight, first feature, output slice).
        let mut tasks: Vec<(&Weight, usize, &mut [f32])> = Vec::new();
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            debug_assert_eq!(out.len(), w.rows);
            let chunk = chunk_features(w.rows);
            for (c, oc) in out.chunks_mut(chunk).enumerate() {
                tasks.push((w, c * chunk, oc));
            }
        }
        tasks.into_par_iter().for_each(|(w, first, oc)| {
            for (j, o) in oc.iter_mut().enumerate() {
                *o = quant::dot(w.ty, w.row(first + j), x);
            }
        });
        return;
    }
    // Feature-major scratch so each task owns a contiguous block; transposed afterwards.
    let xs: Vec<&[f32]> = x.chunks_exact(n_in).collect();
    let mut scratch: Vec<Vec<f32>> = ws.iter().map(|w| vec![0.0f32; w.rows * rows]).collect();
    let mut tasks: Vec<(&Weight, usize, &mut [f32])> = Vec::new();
    for (w, t) in ws.iter().zip(scratch.iter_mut()) {
        let chunk = chunk_features(w.rows);
        for (c, tc) in t.chunks_mut(chunk * rows).enumerate() {
            tasks.push((w, c * chunk, tc));
        }
    }
    tasks.into_par_iter().for_each(|(w, first, tc)| {
        for (j, o) in tc.chunks_exact_mut(rows).enumerate() {
            quant::dot_many(w.ty, w.row(first + j), &xs, o);
        }
    });
    for ((w, t), out) in ws.iter().zip(&scratch).zip(outs.iter_mut()) {
        debug_assert_eq!(out.len(), rows * w.rows);
        for (o, tr) in t.chunks_exact(rows).enumerate() {
            for (r, &val) in tr.iter().enumerate() {
                out[r * w.rows + o] = val;
            }
        }
    }
}

#[cfg(test)]
mod tests;
