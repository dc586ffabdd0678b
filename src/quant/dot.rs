//! Fixed-order dot products straight on quantized bytes: the CPU engine's inner loop.
//!
//! Rule: the sequence of f32 operations producing `dot(ty, row, x)` depends only on `ty` and
//! the row length, so a result is reproducible across batch sizes, thread counts and stage
//! splits. `dot_many` decodes the same chunks and applies the very same term and sum
//! functions to each vector, so each of its results is bit-identical to `dot`.
//!
//! The order, with acc = 8 f32 lanes (lane l only ever sees elements i with i % 8 == l):
//!
//! ```text
//! F32/F16/BF16: acc[i % 8] += w[i] * x[i], strictly in element order.
//!
//! Block formats, walked as 32-element chunks; q = integer code as f32,
//! g_k[l] = q[8k+l] * x[8k+l], x_k[l] = x[8k+l]; a chunk's term t[l] is
//!   Q4_0, Q5_0, Q8_0:  d * ((g0 + g1) + (g2 + g3))
//!   Q4_1, Q5_1:        d * ((g0 + g1) + (g2 + g3)) + m * ((x0 + x1) + (x2 + x3))
//!   Q4_K, Q5_K:        dl * ((g0 + g1) + (g2 + g3)) - ml * ((x0 + x1) + (x2 + x3))
//!   Q3_K, Q6_K:        dla * (g0 + g1) + dlb * (g2 + g3)
//!   Q2_K:              (dla * (g0 + g1) - mla * (x0 + x1))
//!                      + (dlb * (g2 + g3) - mlb * (x2 + x3))
//! legacy block (one chunk):        acc += t
//! K-quant super-block (8 chunks):  acc += ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7))
//!
//! finally: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))
//! ```
//!
//! dl = d * sc and ml = dmin * m are the per-sub-block products dequantize uses (a/b: the
//! two 16-element sub-blocks of a chunk). This factored form equals dequantize-then-dot
//! mathematically and keeps the weights as integer codes, so the hot loop is widen,
//! convert, multiply, add.
//!
//! Speed: the lanes are `wide::f32x8` values (one AVX2 register under x86-64-v3; a portable
//! fallback elsewhere). Every operation on them is a lane-wise IEEE add/sub/mul/convert, so
//! the results are exactly those of the scalar spelling above; there is no `mul_add`.
//! Several shapes below exist only to steer codegen and are noted where they appear.

use super::dequant::{f16_at, scale_min_k4, scale_q3k};
use super::GgmlType;
use wide::{f32x8, i16x16, i16x8, i32x8, i8x16, u32x8, u8x16};

type V = f32x8;

/// The two f16 values at `b[at..at + 4]`, widened exactly by `half`'s slice conversion.
/// Reading both halves as one 32-bit load into the 4-wide F16C conversion keeps the scale
/// decode off the accumulator's dependency chain; the scalar route made LLVM merge into a
/// live vector register (`vpinsrw`), which serialized the block loop. A lone scale at the
/// end of a block is read as the second half of the pair ending there.
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
/// Used for a lone scale at the start of a block (Q4_0, Q5_0, Q8_0): there LLVM narrows
/// any F16C route to a 16-bit insert into a live vector register (`vpinsrw`), a false
/// dependency on the accumulator that serializes the block loop.
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

/// The fixed pairwise finish of the 8 lanes (also `math`'s tree for f32 reductions).
#[inline(always)]
pub(crate) fn finish_lanes(a: &[f32; 8]) -> f32 {
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
    /// The chunk's fixed-order term: its 32 elements times 32 elements of x, in 8 lanes.
    fn term(ch: &Chunk, x: &X32) -> V;
}

/// 32 elements of x as four groups of 8.
type X32 = [[f32; 8]; 4];

/// x as 32-element chunks (a trailing partial chunk is never used: callers pass whole
/// blocks).
#[inline(always)]
fn x_chunks(x: &[f32]) -> &[X32] {
    x.as_chunks::<8>().0.as_chunks::<4>().0
}

/// A block's contribution to the lanes: the term of its one chunk, or for 8-chunk
/// super-blocks ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7)). Spelled out (a macro, not
/// a loop or closure) so every chunk index is a constant after expansion: the K-quant
/// decodes then use constant shifts and offsets, and the eight terms are independent, with
/// one add per super-block on the accumulator's dependency chain.
macro_rules! block_sum {
    ($F:ty, |$c:ident| $term:expr) => {
        if <$F>::CPB == 1 {
            let $c = 0usize;
            $term
        } else {
            debug_assert_eq!(<$F>::CPB, 8);
            let [t0, t1, t2, t3, t4, t5, t6, t7] = block_sum!(@terms $c, $term, 0 1 2 3 4 5 6 7);
            ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7))
        }
    };
    (@terms $c:ident, $term:expr, $($i:literal)*) => {
        [$({
            let $c: usize = $i;
            $term
        }),*]
    };
}

/// One vector: the same decode, terms and sums as `block_group`, with the lanes kept in a
/// register across the row and no per-call setup for a group.
#[inline(always)]
fn block_dot<F: Format>(row: &[u8], x: &[f32]) -> f32 {
    let mut a = V::ZERO;
    for (b, xb) in row
        .chunks_exact(F::BB)
        .zip(x_chunks(x).chunks_exact(F::CPB))
    {
        a += block_sum!(F, |c| F::term(&F::decode(b, c), &xb[c]));
    }
    finish_lanes(&a.to_array())
}

#[inline(always)]
fn block_group<F: Format>(row: &[u8], xs: &[&[f32]], out: &mut [f32]) {
    let g = xs.len().min(out.len()).min(GROUP);
    // Blocks every operand holds: a short operand shortens the product, never panics.
    let n_blocks = xs[..g]
        .iter()
        .fold(row.len() / F::BB, |n, x| n.min(x_chunks(x).len() / F::CPB));
    let mut xc: [&[X32]; GROUP] = [&[]; GROUP];
    for (d, x) in xc.iter_mut().zip(&xs[..g]) {
        *d = &x_chunks(x)[..n_blocks * F::CPB];
    }
    let mut acc = [V::ZERO; GROUP];
    for (bi, b) in row.chunks_exact(F::BB).take(n_blocks).enumerate() {
        if F::CPB == 1 {
            let ch = F::decode(b, 0);
            for (a, x) in acc[..g].iter_mut().zip(&xc[..g]) {
                *a += F::term(&ch, &x[bi]);
            }
        } else {
            // decode the super-block once, then every vector takes its terms
            let chs = [
                F::decode(b, 0),
                F::decode(b, 1),
                F::decode(b, 2),
                F::decode(b, 3),
                F::decode(b, 4),
                F::decode(b, 5),
                F::decode(b, 6),
                F::decode(b, 7),
            ];
            for (a, x) in acc[..g].iter_mut().zip(&xc[..g]) {
                let xb = &x[bi * 8..bi * 8 + 8];
                *a += block_sum!(F, |c| F::term(&chs[c], &xb[c]));
            }
        }
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

/// d * ((g0 + g1) + (g2 + g3))
#[inline(always)]
fn term_sym(ch: &Chunk, x: &X32) -> V {
    let x = xv(x);
    V::splat(ch.s[0]) * qx4(&ch.q, &x)
}

/// d * ((g0 + g1) + (g2 + g3)) + m * ((x0 + x1) + (x2 + x3))
#[inline(always)]
fn term_min(ch: &Chunk, x: &X32) -> V {
    let x = xv(x);
    V::splat(ch.s[0]) * qx4(&ch.q, &x) + V::splat(ch.s[1]) * sx4(&x)
}

/// dl * ((g0 + g1) + (g2 + g3)) - ml * ((x0 + x1) + (x2 + x3))
#[inline(always)]
fn term_kmin(ch: &Chunk, x: &X32) -> V {
    let x = xv(x);
    V::splat(ch.s[0]) * qx4(&ch.q, &x) - V::splat(ch.s[1]) * sx4(&x)
}

/// dla * (g0 + g1) + dlb * (g2 + g3)
#[inline(always)]
fn term_half(ch: &Chunk, x: &X32) -> V {
    let (q, x) = (&ch.q, xv(x));
    let ga = q[0] * x[0] + q[1] * x[1];
    let gb = q[2] * x[2] + q[3] * x[3];
    V::splat(ch.s[0]) * ga + V::splat(ch.s[1]) * gb
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
    const BB: usize = GgmlType::Q4_0.block_bytes();
    const CPB: usize = GgmlType::Q4_0.block_len() / 32;
    #[inline(always)]
    fn decode(b: &[u8], _c: usize) -> Chunk {
        Chunk {
            q: legacy_codes(b, 2, NO_HIGH, 8),
            s: [f16_bits_to_f32(b, 0), 0.0, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn term(ch: &Chunk, x: &X32) -> V {
        term_sym(ch, x)
    }
}

struct Q4_1;
impl Format for Q4_1 {
    const BB: usize = GgmlType::Q4_1.block_bytes();
    const CPB: usize = GgmlType::Q4_1.block_len() / 32;
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
    fn term(ch: &Chunk, x: &X32) -> V {
        term_min(ch, x)
    }
}

struct Q5_0;
impl Format for Q5_0 {
    const BB: usize = GgmlType::Q5_0.block_bytes();
    const CPB: usize = GgmlType::Q5_0.block_len() / 32;
    #[inline(always)]
    fn decode(b: &[u8], _c: usize) -> Chunk {
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        Chunk {
            q: legacy_codes(b, 6, q5_high(qh), 16),
            s: [f16_bits_to_f32(b, 0), 0.0, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn term(ch: &Chunk, x: &X32) -> V {
        term_sym(ch, x)
    }
}

struct Q5_1;
impl Format for Q5_1 {
    const BB: usize = GgmlType::Q5_1.block_bytes();
    const CPB: usize = GgmlType::Q5_1.block_len() / 32;
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
    fn term(ch: &Chunk, x: &X32) -> V {
        term_min(ch, x)
    }
}

struct Q8_0;
impl Format for Q8_0 {
    const BB: usize = GgmlType::Q8_0.block_bytes();
    const CPB: usize = GgmlType::Q8_0.block_len() / 32;
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
    fn term(ch: &Chunk, x: &X32) -> V {
        term_sym(ch, x)
    }
}

// K-quant codes are assembled in 16-bit lanes (half the integer operations of 32-bit
// lanes), then sign-extended to i32 and converted.

/// 32 bytes at `b[at..at + 32]`, zero-extended to two groups of 16 i16.
#[inline(always)]
fn widen32_16(b: &[u8], at: usize) -> [i16x16; 2] {
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    lo.copy_from_slice(&b[at..at + 16]);
    hi.copy_from_slice(&b[at + 16..at + 32]);
    [i16x16::from(u8x16::from(lo)), i16x16::from(u8x16::from(hi))]
}

/// Two groups of 16 small signed codes as four groups of 8 f32 (exact).
#[inline(always)]
fn codes16_to_f32(v: [i16x16; 2]) -> [V; 4] {
    let [a, c] = halves(v[0].to_array());
    let [e, f] = halves(v[1].to_array());
    to_f32([a, c, e, f])
}

/// Chunk c = h*4 + s of a Q2_K/Q3_K super-block holds the 2-bit codes
/// (qs[h*32 + l] >> 2s) & 3, l = 0..32 (`at` = offset of qs in the block).
#[inline(always)]
fn crumbs(b: &[u8], at: usize, c: usize) -> [i16x16; 2] {
    let (h, s) = (c / 4, c % 4);
    let three = i16x16::splat(3);
    widen32_16(b, at + h * 32).map(|v| (v >> (2 * s as u32)) & three)
}

struct Q2K;
impl Format for Q2K {
    const BB: usize = GgmlType::Q2K.block_bytes();
    const CPB: usize = GgmlType::Q2K.block_len() / 32;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let [d, dmin] = f16x2(b, 80);
        let (sa, sb) = (b[2 * c], b[2 * c + 1]);
        Chunk {
            q: codes16_to_f32(crumbs(b, 16, c)),
            s: [
                d * (sa & 0x0F) as f32,
                dmin * (sa >> 4) as f32,
                d * (sb & 0x0F) as f32,
                dmin * (sb >> 4) as f32,
            ],
        }
    }
    /// (dla * (g0 + g1) - mla * (x0 + x1)) + (dlb * (g2 + g3) - mlb * (x2 + x3))
    #[inline(always)]
    fn term(ch: &Chunk, x: &X32) -> V {
        let (q, x) = (&ch.q, xv(x));
        let [dla, mla, dlb, mlb] = ch.s.map(V::splat);
        let ga = q[0] * x[0] + q[1] * x[1];
        let gb = q[2] * x[2] + q[3] * x[3];
        (dla * ga - mla * (x[0] + x[1])) + (dlb * gb - mlb * (x[2] + x[3]))
    }
}

struct Q3K;
impl Format for Q3K {
    const BB: usize = GgmlType::Q3K.block_bytes();
    const CPB: usize = GgmlType::Q3K.block_len() / 32;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let d = f16x2(b, 106)[1];
        let low = crumbs(b, 32, c);
        // hmask bit c of byte l CLEAR means the code is low - 4.
        let one = i16x16::splat(1);
        let hm = widen32_16(b, 0).map(|v| (((v >> c as u32) & one) ^ one) << 2);
        let scales = &b[96..108];
        Chunk {
            q: codes16_to_f32([low[0] - hm[0], low[1] - hm[1]]),
            s: [
                d * scale_q3k(scales, 2 * c) as f32,
                d * scale_q3k(scales, 2 * c + 1) as f32,
                0.0,
                0.0,
            ],
        }
    }
    #[inline(always)]
    fn term(ch: &Chunk, x: &X32) -> V {
        term_half(ch, x)
    }
}

/// Chunk c = pair*2 + k of a Q4_K/Q5_K super-block: nibble k of qs[pair*32 .. +32]
/// (`at` = offset of qs in the block).
#[inline(always)]
fn k_nibbles(b: &[u8], at: usize, c: usize) -> [i16x16; 2] {
    let (pair, k) = (c / 2, c % 2);
    let m15 = i16x16::splat(15);
    widen32_16(b, at + pair * 32).map(|v| (v >> (4 * k as u32)) & m15)
}

struct Q4K;
impl Format for Q4K {
    const BB: usize = GgmlType::Q4K.block_bytes();
    const CPB: usize = GgmlType::Q4K.block_len() / 32;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let [d, dmin] = f16x2(b, 0);
        let (sc, m) = scale_min_k4(&b[4..16], c);
        Chunk {
            q: codes16_to_f32(k_nibbles(b, 16, c)),
            s: [d * sc as f32, dmin * m as f32, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn term(ch: &Chunk, x: &X32) -> V {
        term_kmin(ch, x)
    }
}

struct Q5K;
impl Format for Q5K {
    const BB: usize = GgmlType::Q5K.block_bytes();
    const CPB: usize = GgmlType::Q5K.block_len() / 32;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let [d, dmin] = f16x2(b, 0);
        let (sc, m) = scale_min_k4(&b[4..16], c);
        let lo = k_nibbles(b, 48, c);
        let one = i16x16::splat(1);
        let hi = widen32_16(b, 16).map(|v| ((v >> c as u32) & one) << 4);
        Chunk {
            q: codes16_to_f32([lo[0] | hi[0], lo[1] | hi[1]]),
            s: [d * sc as f32, dmin * m as f32, 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn term(ch: &Chunk, x: &X32) -> V {
        term_kmin(ch, x)
    }
}

struct Q6K;
impl Format for Q6K {
    const BB: usize = GgmlType::Q6K.block_bytes();
    const CPB: usize = GgmlType::Q6K.block_len() / 32;
    #[inline(always)]
    fn decode(b: &[u8], c: usize) -> Chunk {
        let d = f16x2(b, 206)[1];
        // chunk c = h*4 + s: low nibble (ql[h*64 + (s%2)*32 + l] >> 4*(s/2)) & 15,
        // high bits (qh[h*32 + l] >> 2s) & 3, minus 32.
        let (h, s) = (c / 4, c % 4);
        let (m15, three, off) = (i16x16::splat(15), i16x16::splat(3), i16x16::splat(32));
        let lo = widen32_16(b, h * 64 + (s % 2) * 32).map(|v| (v >> (4 * (s / 2)) as u32) & m15);
        let hi = widen32_16(b, 128 + h * 32).map(|v| ((v >> (2 * s) as u32) & three) << 4);
        // All 16 sub-block scales d * sc in two vector multiplies (the same products as
        // scalar ones); as 16 scalar int->float conversions LLVM created false dependencies
        // (`vcvtsi2ss` merging into live registers) that halved the speed.
        let [sa, sb] = widen16_signed(b, 192).map(f32x8::from_i32x8);
        let dv = V::splat(d);
        let dl = [(dv * sa).to_array(), (dv * sb).to_array()];
        Chunk {
            q: codes16_to_f32([(lo[0] | hi[0]) - off, (lo[1] | hi[1]) - off]),
            s: [dl[c / 4][(2 * c) % 8], dl[c / 4][(2 * c + 1) % 8], 0.0, 0.0],
        }
    }
    #[inline(always)]
    fn term(ch: &Chunk, x: &X32) -> V {
        term_half(ch, x)
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
    const S: usize = GgmlType::F32.block_bytes();
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
    const S: usize = GgmlType::F16.block_bytes();
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
    const S: usize = GgmlType::BF16.block_bytes();
    #[inline(always)]
    fn widen8(b: &[u8]) -> [f32; 8] {
        let mut w = [0.0f32; 8];
        for (o, c) in w.iter_mut().zip(b.as_chunks::<2>().0) {
            *o = super::dequant::bf16_at(c, 0);
        }
        w
    }
    #[inline(always)]
    fn widen1(b: &[u8]) -> f32 {
        super::dequant::bf16_at(b, 0)
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
