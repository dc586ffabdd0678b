//! Quantizers. Rule: F32/F16/BF16 and Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 reproduce python
//! `gguf.quants.quantize` byte for byte (same f32 operations in the same order, same
//! first-index tie rule for the largest magnitude, same trunc/round-away rounding);
//! `tests/data/quant/` pins that. The K-quants have no python quantizer: they use a plain
//! per-sub-block round-to-nearest whose only promise is valid blocks that dequantize close
//! to the input (the synthetic-model writer needs no more).

use super::dequant::{f16_at, scale_min_k4};
use super::GgmlType;

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

/// f16-rounded value of `v`, i.e. what the block will actually store.
fn f16_round(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

/// ggml_compute_fp32_to_bf16: quiet NaNs, otherwise round to nearest even.
fn bf16_bits(v: f32) -> u16 {
    let n = v.to_bits();
    if n & 0x7fff_ffff > 0x7f80_0000 {
        return ((n >> 16) | 64) as u16;
    }
    ((n as u64 + (0x7fff + ((n >> 16) & 1)) as u64) >> 16) as u16
}

/// `1/d`, or 0 when d is 0 (gguf.quants: `np.where(d == 0, 0, 1 / d)`).
fn inv(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// The element with the largest magnitude, first one on ties (numpy argmax), signed.
fn signed_absmax(x: &[f32]) -> f32 {
    let mut best = 0.0f32;
    let mut best_abs = -1.0f32;
    for &v in x {
        if v.abs() > best_abs {
            best_abs = v.abs();
            best = v;
        }
    }
    best
}

fn min_max(x: &[f32]) -> (f32, f32) {
    let mut lo = f32::INFINITY;
    let mut hi = f32::NEG_INFINITY;
    for &v in x {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    (lo, hi)
}

/// Caller checked: whole blocks, `out` exactly the row's bytes, finite input for blocks.
pub(super) fn quantize_exact(ty: GgmlType, src: &[f32], out: &mut [u8]) {
    match ty {
        GgmlType::F32 => {
            for (o, v) in out.chunks_exact_mut(4).zip(src) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
        GgmlType::F16 => {
            for (o, v) in out.chunks_exact_mut(2).zip(src) {
                o.copy_from_slice(&f16_bytes(*v));
            }
        }
        GgmlType::BF16 => {
            for (o, v) in out.chunks_exact_mut(2).zip(src) {
                o.copy_from_slice(&bf16_bits(*v).to_le_bytes());
            }
        }
        _ => {
            for (x, b) in src
                .chunks_exact(ty.block_len())
                .zip(out.chunks_exact_mut(ty.block_bytes()))
            {
                block(ty, x, b);
            }
        }
    }
}

fn block(ty: GgmlType, x: &[f32], b: &mut [u8]) {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 => {
            // Symmetric: the largest-magnitude element maps to the most negative code.
            let (half_range, max_code) = if ty == GgmlType::Q4_0 {
                (8.0f32, 15u8)
            } else {
                (16.0, 31)
            };
            let d = signed_absmax(x) / -half_range;
            let id = inv(d);
            let mut q = [0u8; 32];
            for (qj, &v) in q.iter_mut().zip(x) {
                *qj = ((v * id + (half_range + 0.5)).trunc() as u8).min(max_code);
            }
            b[0..2].copy_from_slice(&f16_bytes(d));
            pack_low_high(ty, &q, &mut b[2..]);
        }
        GgmlType::Q4_1 | GgmlType::Q5_1 => {
            let max_code = if ty == GgmlType::Q4_1 { 15u8 } else { 31 };
            let (min, max) = min_max(x);
            let d = (max - min) / max_code as f32;
            let id = inv(d);
            let mut q = [0u8; 32];
            for (qj, &v) in q.iter_mut().zip(x) {
                *qj = (((v - min) * id + 0.5).trunc() as u8).min(max_code);
            }
            b[0..2].copy_from_slice(&f16_bytes(d));
            b[2..4].copy_from_slice(&f16_bytes(min));
            pack_low_high(ty, &q, &mut b[4..]);
        }
        GgmlType::Q8_0 => {
            let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let d = amax / 127.0;
            let id = inv(d);
            b[0..2].copy_from_slice(&f16_bytes(d));
            for (o, &v) in b[2..34].iter_mut().zip(x) {
                // f32::round is round-half-away-from-zero, like ggml's roundf.
                *o = ((v * id).round() as i8) as u8;
            }
        }
        GgmlType::Q2K => q2_k(x, b),
        GgmlType::Q3K => q3_k(x, b),
        GgmlType::Q4K | GgmlType::Q5K => q45_k(ty, x, b),
        GgmlType::Q6K => q6_k(x, b),
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {}
    }
}

/// Pack 32 codes the legacy way: qs[j] = low 4 bits of q[j] | low 4 bits of q[j+16] << 4;
/// for the 5-bit formats also qh (u32 LE) bit j = bit 4 of q[j], placed before qs.
fn pack_low_high(ty: GgmlType, q: &[u8; 32], b: &mut [u8]) {
    let qs_at = if matches!(ty, GgmlType::Q5_0 | GgmlType::Q5_1) {
        let mut qh = 0u32;
        for (j, &v) in q.iter().enumerate() {
            qh |= ((v >> 4) as u32 & 1) << j;
        }
        b[0..4].copy_from_slice(&qh.to_le_bytes());
        4
    } else {
        0
    };
    for j in 0..16 {
        b[qs_at + j] = (q[j] & 0x0F) | (q[j + 16] << 4);
    }
}

/// Round-to-nearest code for `v` on the grid `offset + scale * q`, clamped to `lo..=hi`.
fn code(v: f32, scale: f32, offset: f32, lo: i32, hi: i32) -> i32 {
    if scale == 0.0 {
        return lo.max(0).min(hi);
    }
    (((v - offset) / scale).round() as i32).clamp(lo, hi)
}

/// Affine sub-block fit for the "scale and min" K-quants: y = d*sc*q - dmin*m with m >= 0,
/// so the sub-block offset is min(x, 0). Returns (scale, neg_offset) per sub-block.
fn affine_fits(x: &[f32], sub: usize, levels: f32) -> Vec<(f32, f32)> {
    x.chunks_exact(sub)
        .map(|s| {
            let (lo, hi) = min_max(s);
            let lo = lo.min(0.0);
            ((hi - lo) / levels, -lo)
        })
        .collect()
}

/// Super-block scale so that the largest sub-block value maps to `max_code`, f16-rounded.
fn super_scale(vals: impl Iterator<Item = f32>, max_code: f32) -> f32 {
    let m = vals.fold(0.0f32, f32::max);
    f16_round(m / max_code)
}

fn sub_code(v: f32, d: f32, max_code: i32) -> u8 {
    if d == 0.0 {
        0
    } else {
        ((v / d).round() as i32).clamp(0, max_code) as u8
    }
}

/// block_q2_K { scales[16] (lo: scale, hi: min); qs[64]; f16 d; f16 dmin }, sub-blocks of 16.
fn q2_k(x: &[f32], b: &mut [u8]) {
    let fits = affine_fits(x, 16, 3.0);
    let d = super_scale(fits.iter().map(|f| f.0), 15.0);
    let dmin = super_scale(fits.iter().map(|f| f.1), 15.0);
    b[80..82].copy_from_slice(&f16_bytes(d));
    b[82..84].copy_from_slice(&f16_bytes(dmin));
    for (i, f) in fits.iter().enumerate() {
        b[i] = sub_code(f.0, d, 15) | (sub_code(f.1, dmin, 15) << 4);
    }
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    for e in 0..256 {
        let sc = b[e / 16];
        let dl = d * (sc & 0x0F) as f32;
        let ml = dmin * (sc >> 4) as f32;
        let q = code(x[e], dl, -ml, 0, 3) as u8;
        let (h, s, l) = (e / 128, (e % 128) / 32, e % 32);
        b[16 + h * 32 + l] |= q << (2 * s);
    }
}

/// block_q3_K { hmask[32]; qs[64]; scales[12]; f16 d }, signed 6-bit scales, codes -4..=3.
fn q3_k(x: &[f32], b: &mut [u8]) {
    // Per sub-block of 16: the signed largest-magnitude value maps to -4 (as Q4_0 does).
    let scales: Vec<f32> = x
        .chunks_exact(16)
        .map(|s| signed_absmax(s) / -4.0)
        .collect();
    let d = f16_round(signed_absmax(&scales) / -32.0);
    b[108..110].copy_from_slice(&f16_bytes(d));
    for (i, &s) in scales.iter().enumerate() {
        let sc = if d == 0.0 {
            0
        } else {
            ((s / d).round() as i32).clamp(-32, 31)
        };
        let v = (sc + 32) as u8;
        b[96 + i % 8] |= (v & 0x0F) << (4 * (i / 8));
        b[96 + 8 + i % 4] |= (v >> 4) << (2 * (i / 4));
    }
    let d = f16_at(b, 108);
    for (e, &xe) in x.iter().enumerate().take(256) {
        let dl = d * super::dequant::scale_q3k(&b[96..108], e / 16) as f32;
        let q = code(xe, dl, 0.0, -4, 3);
        // stored: low 2 bits of q+4 in qs, and hmask bit SET when q >= 0 (no -4 offset).
        let u = (q + 4) as u8;
        let (h, s, l) = (e / 128, (e % 128) / 32, e % 32);
        b[32 + h * 32 + l] |= (u & 3) << (2 * s);
        if u >= 4 {
            b[l] |= 1 << (e / 32);
        }
    }
}

/// block_q4_K / block_q5_K: f16 d, f16 dmin, 12 packed 6-bit (scale, min) pairs, then
/// (q5 only) qh[32], then qs[128]; sub-blocks of 32.
fn q45_k(ty: GgmlType, x: &[f32], b: &mut [u8]) {
    let five = ty == GgmlType::Q5K;
    let max_q = if five { 31 } else { 15 };
    let fits = affine_fits(x, 32, max_q as f32);
    let d = super_scale(fits.iter().map(|f| f.0), 63.0);
    let dmin = super_scale(fits.iter().map(|f| f.1), 63.0);
    b[0..2].copy_from_slice(&f16_bytes(d));
    b[2..4].copy_from_slice(&f16_bytes(dmin));
    for (j, f) in fits.iter().enumerate() {
        let sc = sub_code(f.0, d, 63);
        let m = sub_code(f.1, dmin, 63);
        // inverse of get_scale_min_k4
        let s = &mut b[4..16];
        if j < 4 {
            s[j] |= sc & 63;
            s[j + 4] |= m & 63;
        } else {
            s[j + 4] |= (sc & 0x0F) | ((m & 0x0F) << 4);
            s[j - 4] |= (sc >> 4) << 6;
            s[j] |= (m >> 4) << 6;
        }
    }
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let qs_at = if five { 48 } else { 16 };
    for sub in 0..8 {
        let (sc, m) = scale_min_k4(&b[4..16], sub);
        let dl = d * sc as f32;
        let ml = dmin * m as f32;
        let (c, k) = (sub / 2, sub % 2);
        for l in 0..32 {
            let q = code(x[sub * 32 + l], dl, -ml, 0, max_q) as u8;
            b[qs_at + c * 32 + l] |= (q & 0x0F) << (4 * k);
            if five {
                b[16 + l] |= (q >> 4) << sub;
            }
        }
    }
}

/// block_q6_K { ql[128]; qh[64]; i8 scales[16]; f16 d }, codes -32..=31, sub-blocks of 16.
fn q6_k(x: &[f32], b: &mut [u8]) {
    let scales: Vec<f32> = x
        .chunks_exact(16)
        .map(|s| signed_absmax(s) / -32.0)
        .collect();
    let d = f16_round(signed_absmax(&scales) / -127.0);
    b[208..210].copy_from_slice(&f16_bytes(d));
    for (i, &s) in scales.iter().enumerate() {
        let sc = if d == 0.0 {
            0
        } else {
            ((s / d).round() as i32).clamp(-128, 127)
        };
        b[192 + i] = sc as i8 as u8;
    }
    let d = f16_at(b, 208);
    for e in 0..256 {
        let dl = d * (b[192 + e / 16] as i8) as f32;
        let u = (code(x[e], dl, 0.0, -32, 31) + 32) as u8;
        let (h, within) = (e / 128, e % 128);
        b[h * 64 + within % 64] |= (u & 0x0F) << (4 * (within / 64));
        b[128 + h * 32 + within % 32] |= (u >> 4) << (2 * (within / 32));
    }
}
