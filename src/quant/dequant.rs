//! Block dequantization, bit-exact with python `gguf.quants` (ggml's reference C).
//!
//! Rule: every element is computed with exactly the f32 operations, in exactly the order,
//! that gguf.quants uses (e.g. Q4_1 is `(d * q) + m`, Q2_K is `(d * sc) * q - (dmin * m)`),
//! each rounded separately (Rust never fuses into FMA), so the output bits match.
//! Layouts are spelled out per format because the K-quant bit packings are irregular.

use super::GgmlType;

/// f16 stored little-endian at `b[0..2]`, widened exactly.
#[inline(always)]
pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// bf16 stored little-endian at `b[at..at + 2]`: the high half of an f32, widened exactly.
#[inline(always)]
pub(super) fn bf16_at(b: &[u8], at: usize) -> f32 {
    f32::from_bits((u16::from_le_bytes([b[at], b[at + 1]]) as u32) << 16)
}

/// Q4_K/Q5_K 6-bit (scale, min) pair `j` of the 12 packed scale bytes
/// (ggml `get_scale_min_k4`).
#[inline(always)]
pub(super) fn scale_min_k4(s: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Q3_K signed 6-bit scale `i` (0..16) of the 12 packed scale bytes: low nibble from
/// bytes 0..8, high two bits from bytes 8..12, minus 32.
#[inline(always)]
pub(super) fn scale_q3k(s: &[u8], i: usize) -> i32 {
    let low = (s[i % 8] >> (4 * (i / 8))) & 0x0F;
    let high = (s[8 + i % 4] >> (2 * (i / 4))) & 0x03;
    (low | (high << 4)) as i32 - 32
}

/// `src` and `out` lengths were checked by the caller (whole blocks, matching bytes).
pub(super) fn dequantize_exact(ty: GgmlType, src: &[u8], out: &mut [f32]) {
    let bb = ty.block_bytes();
    let bl = ty.block_len();
    match ty {
        GgmlType::F32 => {
            for (o, b) in out.iter_mut().zip(src.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, b) in out.iter_mut().zip(src.chunks_exact(2)) {
                *o = f16_at(b, 0);
            }
        }
        GgmlType::BF16 => {
            for (o, b) in out.iter_mut().zip(src.chunks_exact(2)) {
                *o = bf16_at(b, 0);
            }
        }
        _ => {
            for (b, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(bl)) {
                block(ty, b, y);
            }
        }
    }
}

fn block(ty: GgmlType, b: &[u8], y: &mut [f32]) {
    match ty {
        // block_q4_0 { f16 d; u8 qs[16] }: element j = low nibble of qs[j], j+16 = high.
        GgmlType::Q4_0 => {
            let d = f16_at(b, 0);
            for j in 0..16 {
                let q = b[2 + j];
                y[j] = d * ((q & 0x0F) as i32 - 8) as f32;
                y[j + 16] = d * ((q >> 4) as i32 - 8) as f32;
            }
        }
        // block_q4_1 { f16 d; f16 m; u8 qs[16] }
        GgmlType::Q4_1 => {
            let d = f16_at(b, 0);
            let m = f16_at(b, 2);
            for j in 0..16 {
                let q = b[4 + j];
                y[j] = d * (q & 0x0F) as f32 + m;
                y[j + 16] = d * (q >> 4) as f32 + m;
            }
        }
        // block_q5_0 { f16 d; u8 qh[4] (bit j = high bit of element j); u8 qs[16] }
        GgmlType::Q5_0 => {
            let d = f16_at(b, 0);
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            for j in 0..16 {
                let q = b[6 + j];
                let lo = (q & 0x0F) as u32 | (((qh >> j) & 1) << 4);
                let hi = (q >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4);
                y[j] = d * (lo as i32 - 16) as f32;
                y[j + 16] = d * (hi as i32 - 16) as f32;
            }
        }
        // block_q5_1 { f16 d; f16 m; u8 qh[4]; u8 qs[16] }
        GgmlType::Q5_1 => {
            let d = f16_at(b, 0);
            let m = f16_at(b, 2);
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            for j in 0..16 {
                let q = b[8 + j];
                let lo = (q & 0x0F) as u32 | (((qh >> j) & 1) << 4);
                let hi = (q >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4);
                y[j] = d * lo as f32 + m;
                y[j + 16] = d * hi as f32 + m;
            }
        }
        // block_q8_0 { f16 d; i8 qs[32] }
        GgmlType::Q8_0 => {
            let d = f16_at(b, 0);
            for j in 0..32 {
                y[j] = (b[2 + j] as i8) as f32 * d;
            }
        }
        // block_q2_K { u8 scales[16] (lo nibble scale, hi nibble min); u8 qs[64]; f16 d; f16 dmin }
        // element h*128 + s*32 + l  <-  (qs[h*32 + l] >> 2s) & 3, sub-block = element / 16.
        GgmlType::Q2K => {
            let d = f16_at(b, 80);
            let dmin = f16_at(b, 82);
            for h in 0..2 {
                for s in 0..4 {
                    for l in 0..32 {
                        let e = h * 128 + s * 32 + l;
                        let sc = b[e / 16];
                        let dl = d * (sc & 0x0F) as f32;
                        let ml = dmin * (sc >> 4) as f32;
                        let q = (b[16 + h * 32 + l] >> (2 * s)) & 3;
                        y[e] = dl * q as f32 - ml;
                    }
                }
            }
        }
        // block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }
        // low 2 bits as Q2_K; element s*32 + l has hmask bit (hmask[l] >> s) & 1, and the
        // value is low - 4 when that bit is CLEAR.
        GgmlType::Q3K => {
            let d = f16_at(b, 108);
            let scales = &b[96..108];
            for h in 0..2 {
                for s in 0..4 {
                    for l in 0..32 {
                        let e = h * 128 + s * 32 + l;
                        let dl = d * scale_q3k(scales, e / 16) as f32;
                        let low = ((b[32 + h * 32 + l] >> (2 * s)) & 3) as i32;
                        let hbit = ((b[l] >> (e / 32)) & 1) as i32;
                        let q = low - ((hbit ^ 1) << 2);
                        y[e] = dl * q as f32;
                    }
                }
            }
        }
        // block_q4_K { f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }
        // element c*64 + k*32 + l  <-  (qs[c*32 + l] >> 4k) & 15, sub-block = element / 32.
        GgmlType::Q4K => {
            let d = f16_at(b, 0);
            let dmin = f16_at(b, 2);
            let scales = &b[4..16];
            for c in 0..4 {
                for k in 0..2 {
                    let (sc, m) = scale_min_k4(scales, c * 2 + k);
                    let dl = d * sc as f32;
                    let ml = dmin * m as f32;
                    for l in 0..32 {
                        let q = (b[16 + c * 32 + l] >> (4 * k)) & 0x0F;
                        y[c * 64 + k * 32 + l] = dl * q as f32 - ml;
                    }
                }
            }
        }
        // block_q5_K { f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }
        // low nibbles as Q4_K; element e = s*32 + l has high bit (qh[l] >> s) & 1.
        GgmlType::Q5K => {
            let d = f16_at(b, 0);
            let dmin = f16_at(b, 2);
            let scales = &b[4..16];
            for c in 0..4 {
                for k in 0..2 {
                    let sub = c * 2 + k;
                    let (sc, m) = scale_min_k4(scales, sub);
                    let dl = d * sc as f32;
                    let ml = dmin * m as f32;
                    for l in 0..32 {
                        let lo = (b[48 + c * 32 + l] >> (4 * k)) & 0x0F;
                        let hi = (b[16 + l] >> sub) & 1;
                        y[sub * 32 + l] = dl * (lo | (hi << 4)) as f32 - ml;
                    }
                }
            }
        }
        // block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }
        // element h*128 + k*64 + l (l < 64): low nibble (ql[h*64 + l] >> 4k) & 15;
        // element h*128 + s*32 + l (l < 32): high 2 bits (qh[h*32 + l] >> 2s) & 3; minus 32.
        GgmlType::Q6K => {
            let d = f16_at(b, 208);
            for h in 0..2 {
                for s in 0..4 {
                    for l in 0..32 {
                        let e = h * 128 + s * 32 + l;
                        let within = s * 32 + l; // 0..128 inside this half
                        let lo = (b[h * 64 + within % 64] >> (4 * (within / 64))) & 0x0F;
                        let hi = (b[128 + h * 32 + l] >> (2 * s)) & 3;
                        let q = (lo | (hi << 4)) as i32 - 32;
                        let dl = d * (b[192 + e / 16] as i8) as f32;
                        y[e] = dl * q as f32;
                    }
                }
            }
        }
        // F32/F16/BF16 are handled element-wise by the caller.
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {}
    }
}
