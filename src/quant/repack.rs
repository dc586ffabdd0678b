//! The device layout of a weight matrix for the CUDA engine's vectorized matvec
//! (`kernels/mvq.cu`): the same quantized values, rearranged so that every load of a row's
//! quant bytes is an aligned 16-byte load.
//!
//! Why: GGUF blocks of Q8_0 (34 bytes), Q4_0 (18), Q4_1 (20), Q5_0 (22), Q5_1 (24) and Q6_K
//! (210) sit at offsets that are only 2- or 4-byte aligned, so a kernel reading them straight
//! issues one small load per few elements and is bound by load instructions, not by DRAM
//! bandwidth. Repacked, a row is a plane of 16-byte-aligned blocks followed by a plane of the
//! per-block f16 scales. The K-quants' sub-block scales are also laid out per unit: Q4_K and
//! Q5_K's twelve packed 6-bit (scale, min) bytes become eight scales and eight mins, one
//! byte each, the four a unit needs in one 32-bit word (decoding the packed form costs a
//! lane more instructions than its 32 elements' dot); Q6_K's sixteen scales are reordered so
//! a unit's two are adjacent.
//!
//! Every value is unchanged (bytes are moved or unpacked, never requantized). The kernel's element
//! order is described in kernels/mvq.cu; `unit_values` below is its host mirror, which the
//! tests hold against `dequantize`.

use super::GgmlType;

/// The formats the vectorized matvec reads (the rest run the byte-wise kernel).
pub fn is_fast(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
    )
}

/// Whether the format's runs carry an offset (A * q + B with B != 0: a min), so a dot needs
/// each run's sum of x (the vectorized matvec keeps those sums in shared memory).
pub fn has_offsets(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q4_1 | GgmlType::Q5_1
    )
}

/// Bytes of block plane and of scale plane per GGUF block, for every vectorized format.
fn planes(ty: GgmlType) -> Option<(usize, usize)> {
    Some(match ty {
        GgmlType::Q8_0 => (32, 2),
        GgmlType::Q4_0 => (16, 2),
        GgmlType::Q4_1 => (16, 4),
        GgmlType::Q5_0 | GgmlType::Q5_1 => (16, 8),
        // Per 256-element super-block: qs 128 | unpacked scales 16; d, dmin in the plane.
        GgmlType::Q4K => (144, 4),
        // qh 32 | qs 128 | unpacked scales 16; d, dmin in the plane.
        GgmlType::Q5K => (176, 4),
        // ql 128 | qh 64 | scales 16 in unit order; d in the plane.
        GgmlType::Q6K => (208, 2),
        _ => return None,
    })
}

/// The (scale, min) 6-bit pair of sub-block j (0..8) of a Q4_K/Q5_K super-block's 12 packed
/// scale bytes (ggml's get_scale_min_k4).
fn scale_min_k4(sc: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (sc[j] & 63, sc[j + 4] & 63)
    } else {
        (
            (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4),
            (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4),
        )
    }
}

/// The unpacked scale bytes of a Q4_K/Q5_K super-block: for unit pair p (units 2p, 2p+1,
/// whose runs are sub-blocks 2p and 2p+1): scale(2p), scale(2p+1), min(2p), min(2p+1).
fn k4_scales(sc: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for p in 0..4 {
        let (s0, m0) = scale_min_k4(sc, 2 * p);
        let (s1, m1) = scale_min_k4(sc, 2 * p + 1);
        out[4 * p..4 * p + 4].copy_from_slice(&[s0, s1, m0, m1]);
    }
    out
}

/// Q6_K's scale index of run r of unit c (sub-block s = (c%4)/2 + 2r of half c/4).
fn q6k_scale_index(c: usize, r: usize) -> usize {
    let (hh, t) = (c / 4, c % 4);
    hh * 8 + 2 * (t / 2 + 2 * r) + t % 2
}

fn pad16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// Bytes of one repacked row of `cols` elements (a multiple of 16), or None when `ty` is not
/// a vectorized format or `cols` is not a whole number of its blocks.
pub fn row_bytes(ty: GgmlType, cols: usize) -> Option<usize> {
    if !is_fast(ty) || !cols.is_multiple_of(ty.block_len()) {
        return None;
    }
    let blocks = cols / ty.block_len();
    let (q, s) = planes(ty)?;
    Some(blocks * q + pad16(blocks * s))
}

/// Below this many output bytes a matrix is repacked on the calling thread (threads cost
/// more than they save on the small matrices of the tiny models).
const PAR_MIN_BYTES: usize = 1 << 22;

/// `f(k, unit)` for every `unit`-byte piece k of `out`, spread over the machine's cores in
/// contiguous runs when `out` is large. Why: a gate builds its reference and its staged
/// runtime from the same file, each repacking every matrix at load; on one thread the
/// tensor-core layout of the 1.1 GB 8B shape took ~1.8 s a build. Each piece is written by
/// exactly one call that reads only the source, so the bytes are the serial loop's.
fn par_units(out: &mut [u8], unit: usize, f: impl Fn(usize, &mut [u8]) + Sync) {
    let n = out.len().checked_div(unit).unwrap_or(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(16);
    if threads <= 1 || out.len() < PAR_MIN_BYTES || n < 2 {
        for (k, u) in out.chunks_exact_mut(unit.max(1)).enumerate() {
            f(k, u);
        }
        return;
    }
    let per = n.div_ceil(threads);
    std::thread::scope(|sc| {
        for (c, run) in out.chunks_mut(per * unit).enumerate() {
            let f = &f;
            sc.spawn(move || {
                for (k, u) in run.chunks_exact_mut(unit).enumerate() {
                    f(c * per + k, u);
                }
            });
        }
    });
}

/// The repacked bytes of `rows` rows of `cols` elements given as GGUF blocks (`src` holds
/// rows * row_bytes of the file layout), and their row stride (`row_bytes`). Errors name
/// the mismatch.
pub fn repack(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    src: &[u8],
) -> Result<(Vec<u8>, usize), String> {
    let out_row = row_bytes(ty, cols).ok_or_else(|| {
        format!(
            "{} is not a vectorized matvec format for width {cols}",
            ty.name()
        )
    })?;
    let blocks = cols / ty.block_len();
    let in_row = blocks * ty.block_bytes();
    if src.len() != rows * in_row {
        return Err(format!(
            "{} matrix {rows} x {cols}: {} bytes, expected {}",
            ty.name(),
            src.len(),
            rows * in_row
        ));
    }
    let Some((qb, sb)) = planes(ty) else {
        return Err(format!("{} has no vectorized layout", ty.name()));
    };
    let mut out = vec![0u8; rows * out_row];
    par_units(&mut out, out_row, |r, o| {
        let i = &src[r * in_row..(r + 1) * in_row];
        let (qp, sp) = o.split_at_mut(blocks * qb);
        for (b, blk) in i.chunks_exact(ty.block_bytes()).enumerate() {
            let (q, s) = (&mut qp[b * qb..(b + 1) * qb], &mut sp[b * sb..(b + 1) * sb]);
            match ty {
                GgmlType::Q8_0 | GgmlType::Q4_0 => {
                    s.copy_from_slice(&blk[..2]);
                    q.copy_from_slice(&blk[2..]);
                }
                GgmlType::Q4_1 => {
                    s.copy_from_slice(&blk[..4]);
                    q.copy_from_slice(&blk[4..]);
                }
                GgmlType::Q5_0 => {
                    // d | 2 zero bytes | qh: the qh word 4-byte aligned.
                    s[..2].copy_from_slice(&blk[..2]);
                    s[4..].copy_from_slice(&blk[2..6]);
                    q.copy_from_slice(&blk[6..]);
                }
                GgmlType::Q5_1 => {
                    s.copy_from_slice(&blk[..8]);
                    q.copy_from_slice(&blk[8..]);
                }
                GgmlType::Q4K => {
                    s.copy_from_slice(&blk[..4]);
                    q[..128].copy_from_slice(&blk[16..]);
                    q[128..].copy_from_slice(&k4_scales(&blk[4..16]));
                }
                GgmlType::Q5K => {
                    s.copy_from_slice(&blk[..4]);
                    q[..160].copy_from_slice(&blk[16..]);
                    q[160..].copy_from_slice(&k4_scales(&blk[4..16]));
                }
                GgmlType::Q6K => {
                    q[..192].copy_from_slice(&blk[..192]);
                    for c in 0..8 {
                        for r in 0..2 {
                            q[192 + 2 * c + r] = blk[192 + q6k_scale_index(c, r)];
                        }
                    }
                    s.copy_from_slice(&blk[208..]);
                }
                _ => unreachable!("planes() lists only the formats matched here"),
            }
        }
    });
    Ok((out, out_row))
}

/// Bytes of one block of the tensor-core Q4_K layout (`--mma on`, kernels/mma.cu): 16 rows x
/// one 256-element super-block, 148 bytes a row where GGUF has 144.
pub const MMA_BLOCK: usize = 2368;
/// Rows of one m-tile of the tensor-core layout (the mma's M).
pub const MMA_TILE_ROWS: usize = 16;

/// Whether a matrix takes the tensor-core Q4_K layout (and kernels): Q4_K, whole m-tiles of
/// rows, whole super-blocks of columns. A function of the matrix alone, never of a batch.
pub fn mma_ok(ty: GgmlType, rows: usize, cols: usize) -> bool {
    ty == GgmlType::Q4K
        && rows > 0
        && rows.is_multiple_of(MMA_TILE_ROWS)
        && cols > 0
        && cols.is_multiple_of(256)
}

/// The tensor-core layout of a Q4_K matrix (`src`: rows x cols in GGUF blocks): per (m-tile
/// of 16 rows, super-block), m-tile-major, one MMA_BLOCK-byte block (layout in the head of
/// kernels/mma.cu):
///   [0, 2048)    u32 word (ks / 4) * 128 + lane * 4 + ks % 4 (lane = 4g + t) holds, at nibble
///                h + 2 * half + 4 * pos, q[row g + 8h][ks * 16 + 8 * half + 2t + pos]: the
///                mma A fragment of lane (g, t) for k-step ks;
///   [2048, 2304) per g: scales of rows g and g+8, then mins of rows g and g+8 (8 bytes each);
///   [2304, 2368) per g: d, dmin of row g, d, dmin of row g+8 (f16, little endian).
/// Every quant, scale, min, d and dmin is moved unchanged (the 6-bit pairs unpacked).
pub fn repack_mma_q4k(rows: usize, cols: usize, src: &[u8]) -> Result<Vec<u8>, String> {
    let ty = GgmlType::Q4K;
    if !mma_ok(ty, rows, cols) {
        return Err(format!(
            "Q4_K matrix {rows} x {cols}: the tensor-core layout needs rows a multiple of \
             {MMA_TILE_ROWS} and columns of 256"
        ));
    }
    let n_sb = cols / 256;
    let in_row = n_sb * ty.block_bytes();
    if src.len() != rows * in_row {
        return Err(format!(
            "Q4_K matrix {rows} x {cols}: {} bytes, expected {}",
            src.len(),
            rows * in_row
        ));
    }
    let n_mt = rows / MMA_TILE_ROWS;
    let mut out = vec![0u8; n_mt * n_sb * MMA_BLOCK];
    // The GGUF quant of element e of super-block `b`: qs[c * 32 + l] >> 4k, e = c*64 + k*32 + l.
    let quant = |b: &[u8], e: usize| (b[16 + (e / 64) * 32 + e % 32] >> (4 * ((e % 64) / 32))) & 15;
    par_units(&mut out, n_sb * MMA_BLOCK, |mt, tile| {
        for sb in 0..n_sb {
            let blk = |r: usize| {
                let at = (mt * MMA_TILE_ROWS + r) * in_row + sb * 144;
                &src[at..at + 144]
            };
            let o = &mut tile[sb * MMA_BLOCK..(sb + 1) * MMA_BLOCK];
            for g in 0..8 {
                for t in 0..4 {
                    let lane = 4 * g + t;
                    for ks in 0..16 {
                        let mut w = 0u32;
                        for h in 0..2 {
                            for half in 0..2 {
                                for pos in 0..2 {
                                    let q = quant(blk(g + 8 * h), ks * 16 + 8 * half + 2 * t + pos);
                                    w |= (q as u32) << (4 * (h + 2 * half + 4 * pos));
                                }
                            }
                        }
                        let at = 4 * ((ks / 4) * 128 + lane * 4 + ks % 4);
                        o[at..at + 4].copy_from_slice(&w.to_le_bytes());
                    }
                }
                for (h, r) in [g, g + 8].into_iter().enumerate() {
                    let b = blk(r);
                    for j in 0..8 {
                        let (sc, m) = scale_min_k4(&b[4..16], j);
                        o[2048 + 32 * g + 8 * h + j] = sc;
                        o[2048 + 32 * g + 16 + 8 * h + j] = m;
                    }
                    o[2304 + 8 * g + 4 * h..2304 + 8 * g + 4 * h + 4].copy_from_slice(&b[..4]);
                }
            }
        }
    });
    Ok(out)
}

/// Host mirror of the tensor-core kernels' reading of a repacked matrix: the weights
/// w = (d * sc) * q - dmin * m (the crate's f32 Q4_K expression) rebuilt from the layout as
/// the kernel's lanes see it: the PTX m16n8k16 A-fragment definition (reg 0: row g, k 2t,
/// 2t+1; reg 1: row g+8; reg 2: row g, k 2t+8, 2t+9; reg 3: row g+8, k 2t+8..) and mma.cu's
/// nibble-to-register masks (afrag: bits 0/16, 4/20, 8/24, 12/28), with each register's
/// sub-block scale byte (ks / 2) of its row. Derived from those definitions, not from
/// `repack_mma_q4k`'s loops: the two must agree (tests), as bench.py --cpu checks.
#[cfg(test)]
pub(crate) fn mma_q4k_weights(rows: usize, cols: usize, packed: &[u8]) -> Vec<f32> {
    let h16 = |b: &[u8], at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
    let n_sb = cols / 256;
    let mut w = vec![f32::NAN; rows * cols];
    for mt in 0..rows / MMA_TILE_ROWS {
        for sb in 0..n_sb {
            let o = &packed[(mt * n_sb + sb) * MMA_BLOCK..(mt * n_sb + sb + 1) * MMA_BLOCK];
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for ks in 0..16 {
                    let at = 4 * ((ks / 4) * 128 + lane * 4 + ks % 4);
                    let word = u32::from_le_bytes([o[at], o[at + 1], o[at + 2], o[at + 3]]);
                    let k0 = ks * 16 + 2 * t;
                    // (register's low-nibble bit, its row offset, its first k)
                    for (bit, dr, k) in [(0, 0, k0), (4, 8, k0), (8, 0, k0 + 8), (12, 8, k0 + 8)] {
                        let r = g + dr;
                        let h = dr / 8;
                        let sc = o[2048 + 32 * g + 8 * h + ks / 2] as f32;
                        let m = o[2048 + 32 * g + 16 + 8 * h + ks / 2] as f32;
                        let d = h16(o, 2304 + 8 * g + 4 * h);
                        let dmin = h16(o, 2304 + 8 * g + 4 * h + 2);
                        for (p, shift) in [(0, bit), (1, bit + 16)] {
                            let q = ((word >> shift) & 15) as f32;
                            let e = (mt * MMA_TILE_ROWS + r) * cols + sb * 256 + k + p;
                            w[e] = (d * sc) * q - dmin * m;
                        }
                    }
                }
            }
        }
    }
    w
}

/// Host mirror of the kernel's decode of unit `u` (32 elements) of a repacked row: which
/// elements the unit covers and, for each, the value its (scale A, offset B, quant q) stand
/// for, A * q + B in one fused multiply-add. (The kernel never forms that value: it takes
/// A * sum(q * x) + B * sum(x) per run; the mirror checks the layout and the decode of A, B
/// and q it relies on.) Tests only.
#[cfg(test)]
pub(crate) fn unit_values(ty: GgmlType, row: &[u8], cols: usize, u: usize) -> Vec<(usize, f32)> {
    let h16 = |b: &[u8], at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
    let nb = cols / 32; // units per row
    let mut out = Vec::with_capacity(32);
    // (first element of run 0, gap to run 1, [A, B] per run, the 32 quants minus bias).
    let (e0, gap, ab, q): (usize, usize, [(f32, f32); 2], [i32; 32]) = match ty {
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let (qb, sb) = planes(ty).unwrap();
            let qs = &row[u * qb..(u + 1) * qb];
            let s = &row[nb * qb + u * sb..nb * qb + (u + 1) * sb];
            let d = h16(s, 0);
            let m = if has_offsets(ty) { h16(s, 2) } else { 0.0 };
            let qh = if sb == 8 {
                u32::from_le_bytes([s[4], s[5], s[6], s[7]])
            } else {
                0
            };
            let mut q = [0i32; 32];
            for (j, v) in q.iter_mut().enumerate() {
                *v = match ty {
                    GgmlType::Q8_0 => qs[j] as i8 as i32,
                    _ => {
                        let nib = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 } as i32;
                        let hi = if matches!(ty, GgmlType::Q5_0 | GgmlType::Q5_1) {
                            (((qh >> j) & 1) << 4) as i32
                        } else {
                            0
                        };
                        let bias = match ty {
                            GgmlType::Q4_0 => 8,
                            GgmlType::Q5_0 => 16,
                            _ => 0,
                        };
                        (nib | hi) - bias
                    }
                };
            }
            (32 * u, 16, [(d, m), (d, m)], q)
        }
        GgmlType::Q4K | GgmlType::Q5K => {
            let five = ty == GgmlType::Q5K;
            let bb = if five { 176 } else { 144 };
            let (sbi, c) = (u / 8, u % 8);
            let b = &row[sbi * bb..(sbi + 1) * bb];
            let dp = (cols / 256) * bb + 4 * sbi;
            let (d, dmin) = (h16(row, dp), h16(row, dp + 2));
            let scw = &b[bb - 16 + 4 * (c / 2)..][..4];
            let qs = &b[if five { 32 } else { 0 } + 16 * c..][..16];
            let mut q = [0i32; 32];
            let mut ab = [(0.0, 0.0); 2];
            for (r, abr) in ab.iter_mut().enumerate() {
                let sub = 2 * (c / 2) + r;
                *abr = (d * scw[r] as f32, -(dmin * scw[2 + r] as f32));
                for i in 0..16 {
                    let nib = (qs[i] >> (4 * r)) & 15;
                    let hi = if five {
                        ((b[16 * (c % 2) + i] >> sub) & 1) << 4
                    } else {
                        0
                    };
                    q[16 * r + i] = (nib | hi) as i32;
                }
            }
            (sbi * 256 + (c / 2) * 64 + (c % 2) * 16, 32, ab, q)
        }
        GgmlType::Q6K => {
            let (sbi, c) = (u / 8, u % 8);
            let (hh, t) = (c / 4, c % 4);
            let b = &row[sbi * 208..(sbi + 1) * 208];
            let d = h16(row, (cols / 256) * 208 + 2 * sbi);
            let mut q = [0i32; 32];
            let mut ab = [(0.0, 0.0); 2];
            for (r, abr) in ab.iter_mut().enumerate() {
                let s = t / 2 + 2 * r;
                *abr = (d * (b[192 + 2 * c + r] as i8 as f32), 0.0);
                for i in 0..16 {
                    let lo = (b[hh * 64 + 16 * t + i] >> (4 * r)) & 15;
                    let hi = (b[128 + hh * 32 + 16 * (t % 2) + i] >> (2 * s)) & 3;
                    q[16 * r + i] = (lo | (hi << 4)) as i32 - 32;
                }
            }
            (
                sbi * 256 + hh * 128 + (t / 2) * 32 + (t % 2) * 16,
                64,
                ab,
                q,
            )
        }
        _ => panic!("not a vectorized format"),
    };
    for (j, &qv) in q.iter().enumerate() {
        let r = j / 16;
        let (a, b) = ab[r];
        out.push((e0 + gap * r + j % 16, a.mul_add(qv as f32, b)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize, quantize};
    use rand::{Rng, SeedableRng};

    /// Every vectorized format: the repacked row decoded unit by unit with the kernel's
    /// operations covers each element exactly once and gives the dequantized value (exactly,
    /// or within the rounding of the one fused multiply-add where the GGUF decode rounds twice).
    #[test]
    fn repacked_units_decode_to_the_dequantized_row() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for ty in GgmlType::ALL.into_iter().filter(|&t| is_fast(t)) {
            let (rows, cols) = (3usize, 512usize);
            let v: Vec<f32> = (0..rows * cols)
                .map(|_| rng.gen_range(-2.0f32..2.0))
                .collect();
            let src = quantize(ty, &v).unwrap();
            let (packed, rb) = repack(ty, rows, cols, &src).unwrap();
            assert_eq!(Some(rb), row_bytes(ty, cols));
            assert_eq!(rb % 16, 0, "{}", ty.name());
            assert_eq!(packed.len(), rows * rb);
            let in_row = src.len() / rows;
            for r in 0..rows {
                let mut want = vec![0f32; cols];
                dequantize(ty, &src[r * in_row..(r + 1) * in_row], &mut want).unwrap();
                let mut seen = vec![false; cols];
                for u in 0..cols / 32 {
                    for (e, got) in unit_values(ty, &packed[r * rb..(r + 1) * rb], cols, u) {
                        assert!(!seen[e], "{} element {e} decoded twice", ty.name());
                        seen[e] = true;
                        // |values| < 2.2 here: a fused vs a twice-rounded decode differ by
                        // a few ulps of the terms (<= ~16 for Q4_K's scale * quant).
                        let tol = 1e-5;
                        assert!(
                            (got - want[e]).abs() <= tol,
                            "{} row {r} element {e}: {got} vs {}",
                            ty.name(),
                            want[e]
                        );
                    }
                }
                assert!(seen.iter().all(|&s| s), "{} misses elements", ty.name());
            }
        }
    }

    /// A matrix large enough to be repacked on several threads gives the bytes of its rows
    /// repacked apart, each slice below the threshold and so on the calling thread: every
    /// output piece depends on its own rows only, whichever thread writes it. Both layouts,
    /// on random bytes (the repacks copy and shuffle bits, never read them as numbers).
    #[test]
    fn repacks_on_several_threads_give_the_serial_bytes() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (rows, cols) = (2048usize, 4096usize);
        let in_row = cols / 256 * 144;
        let src: Vec<u8> = (0..rows * in_row).map(|_| rng.gen()).collect();
        let big = repack_mma_q4k(rows, cols, &src).unwrap();
        assert!(
            big.len() >= PAR_MIN_BYTES,
            "the test must take the threaded path"
        );
        let mut apart = Vec::new();
        for s in src.chunks(64 * in_row) {
            apart.extend(repack_mma_q4k(64, cols, s).unwrap());
        }
        assert!(big == apart, "tensor-core layout differs from its slices'");
        let (big, rb) = repack(GgmlType::Q4K, rows, cols, &src).unwrap();
        assert!(big.len() >= PAR_MIN_BYTES);
        let mut apart = Vec::new();
        for s in src.chunks(64 * in_row) {
            apart.extend(repack(GgmlType::Q4K, 64, cols, s).unwrap().0);
        }
        assert_eq!(apart.len(), rows * rb);
        assert!(big == apart, "vectorized layout differs from its slices'");
    }

    /// The tensor-core layout rebuilt by the lanes' mirror (`mma_q4k_weights`) is every
    /// weight of the dequantized matrix, bit for bit; one moved byte is caught (the negative
    /// control: the check can fail).
    #[test]
    fn mma_q4k_layout_round_trips_to_the_dequantized_matrix() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        let (rows, cols) = (32usize, 512usize);
        let v: Vec<f32> = (0..rows * cols)
            .map(|_| rng.gen_range(-2.0f32..2.0))
            .collect();
        let src = quantize(GgmlType::Q4K, &v).unwrap();
        let mut want = vec![0f32; rows * cols];
        dequantize(GgmlType::Q4K, &src, &mut want).unwrap();
        let packed = repack_mma_q4k(rows, cols, &src).unwrap();
        assert_eq!(
            packed.len(),
            rows * cols / 256 * 148,
            "2.8% over GGUF's 144 per row"
        );
        let got = mma_q4k_weights(rows, cols, &packed);
        for (e, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "element {e}: {g} vs {w}");
        }
        // Negative control: swap two nibble words of one lane (k-steps 0 and 1).
        let mut bad = packed.clone();
        for i in 0..4 {
            bad.swap(i, 4 + i);
        }
        let worse = mma_q4k_weights(rows, cols, &bad);
        assert!(
            worse
                .iter()
                .zip(&want)
                .any(|(g, w)| g.to_bits() != w.to_bits()),
            "a moved word went unnoticed"
        );
    }

    #[test]
    fn mma_q4k_refuses_partial_tiles() {
        assert!(mma_ok(GgmlType::Q4K, 32, 256));
        assert!(
            !mma_ok(GgmlType::Q4K, 40, 256),
            "40 rows: not whole m-tiles"
        );
        assert!(!mma_ok(GgmlType::Q6K, 32, 256), "not Q4_K");
        let e = repack_mma_q4k(40, 256, &[0; 40 * 144]).unwrap_err();
        assert!(e.contains("40 x 256"), "{e}");
        let e = repack_mma_q4k(16, 256, &[0; 100]).unwrap_err();
        assert!(e.contains("100 bytes"), "{e}");
    }

    #[test]
    fn repack_refuses_what_it_cannot_lay_out() {
        assert!(repack(GgmlType::F16, 1, 32, &[0; 64]).is_err());
        assert!(repack(GgmlType::Q8_0, 2, 32, &[0; 34])
            .unwrap_err()
            .contains("34 bytes"));
        assert_eq!(row_bytes(GgmlType::Q4K, 100), None);
    }
}
