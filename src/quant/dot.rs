//! Fixed-order dot products straight on quantized bytes: the CPU engine's inner loop.
//!
//! Rule: the sequence of f32 operations producing `dot(ty, row, x)` depends only on `ty` and
//! the row length, so a result is reproducible across batch sizes, thread counts and stage
//! splits. `dot_many` decodes the same 32-element chunks and applies the very same
//! per-chunk step function to each vector, so each of its results is bit-identical to `dot`.
//!
//! The order, with acc = 8 f32 lanes (lane l only ever sees elements i with i % 8 == l):
//! - F32/F16/BF16: acc[i % 8] += w[i] * x[i], strictly in element order.
//! - Block formats, walked as 32-element chunks (one per Q4_0..Q8_0 block, eight per K-quant
//!   super-block): with q the integer code as f32, g_k[l] = q[8k+l] * x[8k+l] and
//!   x_k[l] = x[8k+l], each chunk does
//!     Q4_0, Q5_0, Q8_0:  acc[l] += d * ((g0 + g1) + (g2 + g3))
//!     Q4_1, Q5_1:        acc[l] += d * ((g0 + g1) + (g2 + g3)) + m * ((x0 + x1) + (x2 + x3))
//!     Q4_K, Q5_K:        acc[l] += dl * ((g0 + g1) + (g2 + g3)) - ml * ((x0 + x1) + (x2 + x3))
//!     Q3_K, Q6_K:        acc[l] += dla * (g0 + g1) + dlb * (g2 + g3)
//!     Q2_K:              acc[l] += (dla * (g0 + g1) - mla * (x0 + x1))
//!                                + (dlb * (g2 + g3) - mlb * (x2 + x3))
//!   where dl = d * sc and ml = dmin * m are the per-sub-block products dequantize uses
//!   (a/b: the two 16-element sub-blocks of a chunk). This factored form equals
//!   dequantize-then-dot mathematically and keeps the weights as integer codes, so the hot
//!   loop is widen, convert, multiply, add.
//! - Finally ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
//!
//! Speed: the lanes are `wide::f32x8` values (one AVX2 register under x86-64-v3; a portable
//! fallback elsewhere). Every operation on them is a lane-wise IEEE add/sub/mul/convert, so
//! the results are exactly those of the scalar spelling above; there is no `mul_add`.

use super::dequant::{f16_at, scale_min_k4, scale_q3k};
use super::GgmlType;
use wide::{f32x8, i16x16, i16x8, i32x8, i8x16, u32x8, u8x16};

type V = f32x8;

/// The two f16 values at `b[at..at + 4]`, widened exactly by `half`'s slice conversion.
/// Reading both halves as one 32-bit load into the 4-wide F16C conversion keeps the scale
/// decode off the accumulator's dependency chain; the scalar route made LLVM merge into a
/// live vector register (`vpinsrw`), which serialized the block loop.
#[inline(always)]
fn f16x2(b: &[u8], at: usize) -> [f32; 2] {
    use half::slice::HalfFloatSliceExt;
    let h = [
        half::f16::from_le_bytes([b[at], b[at + 1]]),
        half::f16::from_le_bytes([b[at + 2], b[at + 3]]),
        half::f16::ZERO,
        half::f16::ZERO,
    ];
    let mut o = [0.0f32; 4];
    h.convert_to_f32_slice(&mut o);
    [o[0], o[1]]
}

/// The f16 at `b[at..at + 2]` widened exactly (same value as `half`'s conversion for every
/// non-NaN input; NaN stays NaN), by integer bit moves and one exact power-of-two multiply.
/// Used where a block has a single f16 scale: there LLVM narrows any F16C route to a
/// 16-bit insert into a live vector register (`vpinsrw`), a false dependency on the
/// accumulator that serializes the block loop.
#[inline(always)]
pub(super) fn f16_bits_to_f32(b: &[u8], at: usize) -> f32 {
    let h = u16::from_le_bytes([b[at], b[at + 1]]) as u32;
    let em = h & 0x7fff;
    let sign = (h & 0x8000) << 16;
    let mag = if em >= 0x7c00 {
        // inf / NaN: all-ones exponent, payload kept
        0x7f80_0000 | ((em & 0x3ff) << 13)
    } else {
        // The f16 exponent/mantissa read as f32 bits is the value times 2^-112 (normal and
        // subnormal alike); multiplying by 2^112 is exact.
        (f32::from_bits(em << 13) * f32::from_bits((127 + 112) << 23)).to_bits()
    };
    f32::from_bits(sign | mag)
}

/// The fixed pairwise finish of the 8 lanes.
#[inline(always)]
fn finish_lanes(a: &[f32; 8]) -> f32 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

/// Fixed-order dot product of one weight row (`row` holds `x.len()` elements of `ty`) with
/// `x`. The caller guarantees the lengths (checked at model load); a short row or x only
/// shortens the product, it never panics.
pub fn dot(ty: GgmlType, row: &[u8], x: &[f32]) -> f32 {
    debug_assert_eq!(
        ty.row_bytes(x.len() as u64),
        Some(row.len() as u64),
        "{ty}: row of {} bytes does not hold {} elements",
        row.len(),
        x.len()
    );
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
            let mut out = [0.0f32];
            dot_group(ty, row, &[x], &mut out);
            out[0]
        }
        GgmlType::Q4_0 => block_dot::<Q4_0>(row, x),
        GgmlType::Q4_1 => block_dot::<Q4_1>(row, x),
        GgmlType::Q5_0 => block_dot::<Q5_0>(row, x),
        GgmlType::Q5_1 => block_dot::<Q5_1>(row, x),
        GgmlType::Q8_0 => block_dot::<Q8_0>(row, x),
        GgmlType::Q2K => block_dot::<Q2K>(row, x),
        GgmlType::Q3K => block_dot::<Q3K>(row, x),
        GgmlType::Q4K => block_dot::<Q4K>(row, x),
        GgmlType::Q5K => block_dot::<Q5K>(row, x),
        GgmlType::Q6K => block_dot::<Q6K>(row, x),
    }
}

/// The same weight row against several vectors: `out[i]` is bit-identical to
/// `dot(ty, row, xs[i])`. Each chunk of the row is decoded once for up to `GROUP` vectors.
pub fn dot_many(ty: GgmlType, row: &[u8], xs: &[&[f32]], out: &mut [f32]) {
    debug_assert_eq!(
        xs.len(),
        out.len(),
        "dot_many: {} vectors, {} outputs",
        xs.len(),
        out.len()
    );
    for (xg, og) in xs.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
        dot_group(ty, row, xg, og);
    }
}

/// Vectors handled per pass over the row (their accumulators live on the stack; more
/// vectors take another pass, which changes no result).
const GROUP: usize = 16;

fn dot_group(ty: GgmlType, row: &[u8], xs: &[&[f32]], out: &mut [f32]) {
    match ty {
        GgmlType::F32 => float_group::<F32>(row, xs, out),
        GgmlType::F16 => float_group::<F16>(row, xs, out),
        GgmlType::BF16 => float_group::<Bf16>(row, xs, out),
        GgmlType::Q4_0 => block_group::<Q4_0>(row, xs, out),
        GgmlType::Q4_1 => block_group::<Q4_1>(row, xs, out),
        GgmlType::Q5_0 => block_group::<Q5_0>(row, xs, out),
        GgmlType::Q5_1 => block_group::<Q5_1>(row, xs, out),
        GgmlType::Q8_0 => block_group::<Q8_0>(row, xs, out),
        GgmlType::Q2K => block_group::<Q2K>(row, xs, out),
        GgmlType::Q3K => block_group::<Q3K>(row, xs, out),
        GgmlType::Q4K => block_group::<Q4K>(row, xs, out),
        GgmlType::Q5K => block_group::<Q5K>(row, xs, out),
        GgmlType::Q6K => block_group::<Q6K>(row, xs, out),
    }
}

// ---- block formats ----------------------------------------------------------------------

/// One decoded 32-element chunk: integer codes as f32 in four groups of 8 (group k =
/// elements 8k..8k+8), and up to four scales whose meaning is the format's.
struct Chunk {
    q: [V; 4],
    s: [f32; 4],
}

trait Format {
    /// Bytes per block.
    const BB: usize;
    /// 32-element chunks per block.
    const CPB: usize;
    /// Decode chunk `c` of block `b` (`b.len() == BB`).
    fn decode(b: &[u8], c: usize) -> Chunk;
    /// The fixed-order step: fold one chunk times 32 elements of x into the lanes.
    fn step(ch: &Chunk, x: &X32, acc: &mut V);
}

/// 32 elements of x as four groups of 8.
type X32 = [[f32; 8]; 4];

/// x as 32-element chunks (a trailing partial chunk is never used: callers pass whole
/// blocks).
#[inline(always)]
fn x_chunks(x: &[f32]) -> &[X32] {
    x.as_chunks::<8>().0.as_chunks::<4>().0
}

/// Run `$body` with `$c` bound to each chunk index 0..CPB of a block, in order, spelled
/// out so every chunk index is a constant (the K-quant decodes then use constant shifts and
/// offsets; as a loop, or as a closure LLVM declined to inline, Q4_K/Q6_K ran 1.6x slower).
macro_rules! each_chunk {
    ($F:ty, |$c:ident| $body:block) => {
        if <$F>::CPB == 1 {
            let $c = 0usize;
            $body
        } else {
            debug_assert_eq!(<$F>::CPB, 8);
            each_chunk!(@ $c, $body, 0 1 2 3 4 5 6 7);
        }
    };
    (@ $c:ident, $body:block, $($i:literal)*) => {
        $({
            let $c: usize = $i;
            $body
        })*
    };
}

/// One vector: the same decode and step as `block_group`, with the lanes kept in a register
/// across the row and no per-call setup for a group.
#[inline(always)]
fn block_dot<F: Format>(row: &[u8], x: &[f32]) -> f32 {
    let mut a = V::ZERO;
    for (b, xb) in row
        .chunks_exact(F::BB)
        .zip(x_chunks(x).chunks_exact(F::CPB))
    {
        each_chunk!(F, |c| { F::step(&F::decode(b, c), &xb[c], &mut a) });
    }
    finish_lanes(&a.to_array())
}

#[inline(always)]
fn block_group<F: Format>(row: &[u8], xs: &[&[f32]], out: &mut [f32]) {
    let g = xs.len().min(out.len()).min(GROUP);
    // Chunks every operand holds: a short operand shortens the product, never panics.
    let n_blocks = xs[..g]
        .iter()
        .fold(row.len() / F::BB, |n, x| n.min(x_chunks(x).len() / F::CPB));
    let mut xc: [&[X32]; GROUP] = [&[]; GROUP];
    for (d, x) in xc.iter_mut().zip(&xs[..g]) {
        *d = &x_chunks(x)[..n_blocks * F::CPB];
    }
    let mut acc = [V::ZERO; GROUP];
    for (bi, b) in row.chunks_exact(F::BB).take(n_blocks).enumerate() {
        each_chunk!(F, |c| {
            let ch = F::decode(b, c);
            for (a, x) in acc[..g].iter_mut().zip(&xc[..g]) {
                F::step(&ch, &x[bi * F::CPB + c], a);
            }
        });
    }
    for (o, a) in out[..g].iter_mut().zip(&acc) {
        *o = finish_lanes(&a.to_array());
    }
}

#[inline(always)]
fn xv(x: &X32) -> [V; 4] {
    [V::from(x[0]), V::from(x[1]), V::from(x[2]), V::from(x[3])]
}

/// (g0 + g1) + (g2 + g3), g_k = q_k * x_k.
#[inline(always)]
fn qx4(q: &[V; 4], x: &[V; 4]) -> V {
    (q[0] * x[0] + q[1] * x[1]) + (q[2] * x[2] + q[3] * x[3])
}

/// (x0 + x1) + (x2 + x3).
#[inline(always)]
fn sx4(x: &[V; 4]) -> V {
    (x[0] + x[1]) + (x[2] + x[3])
}

/// acc += d * ((g0 + g1) + (g2 + g3))
#[inline(always)]
fn step_sym(ch: &Chunk, x: &X32, acc: &mut V) {
    let x = xv(x);
    *acc += V::splat(ch.s[0]) * qx4(&ch.q, &x);
}

/// acc += d * ((g0 + g1) + (g2 + g3)) + m * ((x0 + x1) + (x2 + x3))
#[inline(always)]
fn step_min(ch: &Chunk, x: &X32, acc: &mut V) {
    let x = xv(x);
    *acc += V::splat(ch.s[0]) * qx4(&ch.q, &x) + V::splat(ch.s[1]) * sx4(&x);
}

/// acc += dl * ((g0 + g1) + (g2 + g3)) - ml * ((x0 + x1) + (x2 + x3))
#[inline(always)]
fn step_kmin(ch: &Chunk, x: &X32, acc: &mut V) {
    let x = xv(x);
    *acc += V::splat(ch.s[0]) * qx4(&ch.q, &x) - V::splat(ch.s[1]) * sx4(&x);
}

/// acc += dla * (g0 + g1) + dlb * (g2 + g3)
#[inline(always)]
fn step_half(ch: &Chunk, x: &X32, acc: &mut V) {
    let (q, x) = (&ch.q, xv(x));
    let ga = q[0] * x[0] + q[1] * x[1];
    let gb = q[2] * x[2] + q[3] * x[3];
    *acc += V::splat(ch.s[0]) * ga + V::splat(ch.s[1]) * gb;
}

/// 16 bytes at `b[at..at + 16]`, zero-extended to two groups of 8 i32.
#[inline(always)]
fn widen16(b: &[u8], at: usize) -> [i32x8; 2] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    let w = i16x16::from(u8x16::from(a)).to_array();
    halves(w)
}

/// 16 bytes at `b[at..at + 16]` read as i8, sign-extended to two groups of 8 i32.
#[inline(always)]
fn widen16_signed(b: &[u8], at: usize) -> [i32x8; 2] {
    let mut a = [0i8; 16];
    for (d, s) in a.iter_mut().zip(&b[at..at + 16]) {
        *d = *s as i8;
    }
    let w = i16x16::from_i8x16(i8x16::from(a)).to_array();
    halves(w)
}

#[inline(always)]
fn halves(w: [i16; 16]) -> [i32x8; 2] {
    let h = w.as_chunks::<8>().0;
    [
        i32x8::from_i16x8(i16x8::from(h[0])),
        i32x8::from_i16x8(i16x8::from(h[1])),
    ]
}

/// 32 bytes at `b[at..at + 32]`, zero-extended to four groups of 8 i32.
#[inline(always)]
fn widen32(b: &[u8], at: usize) -> [i32x8; 4] {
    let [a, c] = widen16(b, at);
    let [e, f] = widen16(b, at + 16);
    [a, c, e, f]
}

#[inline(always)]
fn to_f32(q: [i32x8; 4]) -> [V; 4] {
    q.map(f32x8::from_i32x8)
}

/// Lane l of group k holds bit 8k + l of `qh`, moved to bit 4 (the 5th bit of a Q5 code).
#[inline(always)]
fn q5_high(qh: u32) -> [i32x8; 4] {
    let h = i32x8::splat(qh as i32);
    let one = i32x8::splat(1);
    std::array::from_fn(|k| {
        let base = 8 * k as u32;
        let sh = u32x8::from([
            base,
            base + 1,
            base + 2,
            base + 3,
            base + 4,
            base + 5,
            base + 6,
            base + 7,
        ]);
        ((h >> sh) & one) << 4
    })
}

/// Legacy 4/5-bit codes in ggml order: element j < 16 is the low nibble of qs[j], element
/// j + 16 its high nibble; `high` adds bit 4; minus `offset`.
#[inline(always)]
fn legacy_codes(b: &[u8], at: usize, high: [i32x8; 4], offset: i32) -> [V; 4] {
    let [a, c] = widen16(b, at);
    let (m15, off) = (i32x8::splat(15), i32x8::splat(offset));
    to_f32([
        ((a & m15) | high[0]) - off,
        ((c & m15) | high[1]) - off,
        ((a >> 4) | high[2]) - off,
        ((c >> 4) | high[3]) - off,
    ])
}

const NO_HIGH: [i32x8; 4] = [i32x8::ZERO; 4];

struct Q4_0;
impl Format for Q4_0 {
    const BB: usize = 18;
    const CPB: usize = 1;
    #[inline(always)]
    fn decode(b: &[u8], _c: usize) -> Chunk {
        Chunk {
            q: legacy_codes(b, 2, NO_HIGH, 8),
            s: [f16_bits_to_f32(b, 0), 0.0, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_sym(ch, x, acc)
    }
}

struct Q4_1;
impl Format for Q4_1 {
    const BB: usize = 20;
    const CPB: usize = 1;
    #[inline(always)]
    fn decode(b: &[u8], _c: usize) -> Chunk {
        Chunk {
            q: legacy_codes(b, 4, NO_HIGH, 0),
            s: {
                let [d, m] = f16x2(b, 0);
                [d, m, 0.0, 0.0]
            },
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_min(ch, x, acc)
    }
}

struct Q5_0;
impl Format for Q5_0 {
    const BB: usize = 22;
    const CPB: usize = 1;
    #[inline(always)]
    fn decode(b: &[u8], _c: usize) -> Chunk {
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        Chunk {
            q: legacy_codes(b, 6, q5_high(qh), 16),
            s: [f16_bits_to_f32(b, 0), 0.0, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_sym(ch, x, acc)
    }
}

struct Q5_1;
impl Format for Q5_1 {
    const BB: usize = 24;
    const CPB: usize = 1;
    #[inline(always)]
    fn decode(b: &[u8], _c: usize) -> Chunk {
        let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        Chunk {
            q: legacy_codes(b, 8, q5_high(qh), 0),
            s: {
                let [d, m] = f16x2(b, 0);
                [d, m, 0.0, 0.0]
            },
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_min(ch, x, acc)
    }
}

struct Q8_0;
impl Format for Q8_0 {
    const BB: usize = 34;
    const CPB: usize = 1;
    #[inline(always)]
    fn decode(b: &[u8], _c: usize) -> Chunk {
        let [q0, q1] = widen16_signed(b, 2);
        let [q2, q3] = widen16_signed(b, 18);
        Chunk {
            q: to_f32([q0, q1, q2, q3]),
            s: [f16_bits_to_f32(b, 0), 0.0, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_sym(ch, x, acc)
    }
}

/// Chunk c = h*4 + s of a Q2_K/Q3_K super-block holds the 2-bit codes
/// (qs[h*32 + l] >> 2s) & 3, l = 0..32 (`at` = offset of qs in the block).
#[inline(always)]
fn crumbs(b: &[u8], at: usize, c: usize) -> [i32x8; 4] {
    let (h, s) = (c / 4, c % 4);
    let three = i32x8::splat(3);
    widen32(b, at + h * 32).map(|v| (v >> (2 * s as u32)) & three)
}

struct Q2K;
impl Format for Q2K {
    const BB: usize = 84;
    const CPB: usize = 8;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let [d, dmin] = f16x2(b, 80);
        let (sa, sb) = (b[2 * c], b[2 * c + 1]);
        Chunk {
            q: to_f32(crumbs(b, 16, c)),
            s: [
                d * (sa & 0x0F) as f32,
                dmin * (sa >> 4) as f32,
                d * (sb & 0x0F) as f32,
                dmin * (sb >> 4) as f32,
            ],
        }
    }
    /// acc += (dla * (g0 + g1) - mla * (x0 + x1)) + (dlb * (g2 + g3) - mlb * (x2 + x3))
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        let (q, x) = (&ch.q, xv(x));
        let [dla, mla, dlb, mlb] = ch.s.map(V::splat);
        let ga = q[0] * x[0] + q[1] * x[1];
        let gb = q[2] * x[2] + q[3] * x[3];
        *acc += (dla * ga - mla * (x[0] + x[1])) + (dlb * gb - mlb * (x[2] + x[3]));
    }
}

struct Q3K;
impl Format for Q3K {
    const BB: usize = 110;
    const CPB: usize = 8;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let d = f16_bits_to_f32(b, 108);
        let low = crumbs(b, 32, c);
        // hmask bit c of byte l CLEAR means the code is low - 4.
        let one = i32x8::splat(1);
        let hm = widen32(b, 0).map(|v| (((v >> c as u32) & one) ^ one) << 2);
        let scales = &b[96..108];
        Chunk {
            q: to_f32([
                low[0] - hm[0],
                low[1] - hm[1],
                low[2] - hm[2],
                low[3] - hm[3],
            ]),
            s: [
                d * scale_q3k(scales, 2 * c) as f32,
                d * scale_q3k(scales, 2 * c + 1) as f32,
                0.0,
                0.0,
            ],
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_half(ch, x, acc)
    }
}

/// Chunk c = pair*2 + k of a Q4_K/Q5_K super-block: nibble k of qs[pair*32 .. +32]
/// (`at` = offset of qs in the block).
#[inline(always)]
fn k_nibbles(b: &[u8], at: usize, c: usize) -> [i32x8; 4] {
    let (pair, k) = (c / 2, c % 2);
    let m15 = i32x8::splat(15);
    widen32(b, at + pair * 32).map(|v| (v >> (4 * k as u32)) & m15)
}

struct Q4K;
impl Format for Q4K {
    const BB: usize = 144;
    const CPB: usize = 8;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let [d, dmin] = f16x2(b, 0);
        let (sc, m) = scale_min_k4(&b[4..16], c);
        Chunk {
            q: to_f32(k_nibbles(b, 16, c)),
            s: [d * sc as f32, dmin * m as f32, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_kmin(ch, x, acc)
    }
}

struct Q5K;
impl Format for Q5K {
    const BB: usize = 176;
    const CPB: usize = 8;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let [d, dmin] = f16x2(b, 0);
        let (sc, m) = scale_min_k4(&b[4..16], c);
        let lo = k_nibbles(b, 48, c);
        let one = i32x8::splat(1);
        let hi = widen32(b, 16).map(|v| ((v >> c as u32) & one) << 4);
        Chunk {
            q: to_f32([lo[0] | hi[0], lo[1] | hi[1], lo[2] | hi[2], lo[3] | hi[3]]),
            s: [d * sc as f32, dmin * m as f32, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_kmin(ch, x, acc)
    }
}

struct Q6K;
impl Format for Q6K {
    const BB: usize = 210;
    const CPB: usize = 8;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let d = f16_bits_to_f32(b, 208);
        // chunk c = h*4 + s: low nibble (ql[h*64 + (s%2)*32 + l] >> 4*(s/2)) & 15,
        // high bits (qh[h*32 + l] >> 2s) & 3, minus 32.
        let (h, s) = (c / 4, c % 4);
        let (m15, three, off) = (i32x8::splat(15), i32x8::splat(3), i32x8::splat(32));
        let lo = widen32(b, h * 64 + (s % 2) * 32).map(|v| (v >> (4 * (s / 2)) as u32) & m15);
        let hi = widen32(b, 128 + h * 32).map(|v| ((v >> (2 * s) as u32) & three) << 4);
        Chunk {
            q: to_f32([
                (lo[0] | hi[0]) - off,
                (lo[1] | hi[1]) - off,
                (lo[2] | hi[2]) - off,
                (lo[3] | hi[3]) - off,
            ]),
            s: [
                d * (b[192 + 2 * c] as i8) as f32,
                d * (b[192 + 2 * c + 1] as i8) as f32,
                0.0,
                0.0,
            ],
        }
    }
    #[inline(always)]
    fn step(ch: &Chunk, x: &X32, acc: &mut V) {
        step_half(ch, x, acc)
    }
}

// ---- float formats ----------------------------------------------------------------------

trait FloatFormat {
    /// Bytes per element.
    const S: usize;
    /// Widen 8 elements (`b.len() == 8 * S`).
    fn widen8(b: &[u8]) -> [f32; 8];
    /// Widen one element (`b.len() == S`).
    fn widen1(b: &[u8]) -> f32;
}

struct F32;
impl FloatFormat for F32 {
    const S: usize = 4;
    #[inline(always)]
    fn widen8(b: &[u8]) -> [f32; 8] {
        let mut w = [0.0f32; 8];
        for (o, c) in w.iter_mut().zip(b.as_chunks::<4>().0) {
            *o = f32::from_le_bytes(*c);
        }
        w
    }
    #[inline(always)]
    fn widen1(b: &[u8]) -> f32 {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

struct F16;
impl FloatFormat for F16 {
    const S: usize = 2;
    #[inline(always)]
    fn widen8(b: &[u8]) -> [f32; 8] {
        use half::slice::HalfFloatSliceExt;
        let mut h = [half::f16::ZERO; 8];
        for (o, c) in h.iter_mut().zip(b.as_chunks::<2>().0) {
            *o = half::f16::from_le_bytes(*c);
        }
        let mut w = [0.0f32; 8];
        // the crate's slice conversion uses the 8-wide F16C instruction when available
        h.convert_to_f32_slice(&mut w);
        w
    }
    #[inline(always)]
    fn widen1(b: &[u8]) -> f32 {
        f16_at(b, 0)
    }
}

struct Bf16;
impl FloatFormat for Bf16 {
    const S: usize = 2;
    #[inline(always)]
    fn widen8(b: &[u8]) -> [f32; 8] {
        let mut w = [0.0f32; 8];
        for (o, c) in w.iter_mut().zip(b.as_chunks::<2>().0) {
            *o = f32::from_bits((u16::from_le_bytes(*c) as u32) << 16);
        }
        w
    }
    #[inline(always)]
    fn widen1(b: &[u8]) -> f32 {
        f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)
    }
}

/// Float rows: whole groups of 8 go lane-wise through `f32x8`; the last `n % 8` elements
/// are added to lanes 0.. in order, after all groups, exactly as acc[i % 8] += w[i] * x[i].
fn float_group<F: FloatFormat>(row: &[u8], xs: &[&[f32]], out: &mut [f32]) {
    let g = xs.len().min(out.len()).min(GROUP);
    let n = xs[..g].iter().fold(row.len() / F::S, |n, x| n.min(x.len()));
    let full = n / 8;
    let mut acc = [V::ZERO; GROUP];
    for (i, wb) in row.chunks_exact(8 * F::S).take(full).enumerate() {
        let w = V::from(F::widen8(wb));
        for (a, x) in acc[..g].iter_mut().zip(&xs[..g]) {
            let xg = x.as_chunks::<8>().0;
            *a += w * V::from(xg[i]);
        }
    }
    for (k, (o, a)) in out[..g].iter_mut().zip(&acc).enumerate() {
        let mut lanes = a.to_array();
        for (l, i) in (full * 8..n).enumerate() {
            lanes[l] += F::widen1(&row[i * F::S..(i + 1) * F::S]) * xs[k][i];
        }
        *o = finish_lanes(&lanes);
    }
}
