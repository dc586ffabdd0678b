//! The device layout of a weight matrix for the CUDA engine's vectorized matvec
//! (`kernels/mvq.cu`): the same quantized values, rearranged so that every load of a row's
//! quant bytes is an aligned 16-byte load.
//!
//! Why: GGUF blocks of Q8_0 (34 bytes), Q4_0 (18), Q4_1 (20), Q5_0 (22), Q5_1 (24) and Q6_K
//! (210) sit at offsets that are only 2- or 4-byte aligned, so a kernel reading them straight
//! issues one small load per few elements and is bound by load instructions, not by DRAM
//! bandwidth. Repacked, a row is a plane of 16-byte-aligned blocks followed by a plane of the
//! per-block f16 scales (Q8_0's 32-byte blocks by 16-byte halves, `q8_half_at`, so that each of
//! a warp's two loads a block is 512 contiguous bytes). The K-quants' sub-block scales are also
//! laid out per unit: Q4_K and Q5_K's twelve packed 6-bit (scale, min) bytes become eight
//! scales and eight mins, one byte each, the four a unit needs in one 32-bit word (decoding
//! the packed form costs a lane more instructions than its 32 elements' dot); Q6_K's sixteen
//! scales are reordered so a unit's two are adjacent.
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

/// Where half `h` (0: quant bytes 0..16, 1: 16..32) of Q8_0 block `b` of a row of `blocks`
/// blocks starts in its repacked quant plane: the plane is rounds of 32 blocks (the last one
/// `blocks % 32` when that is not 0), each round the first halves of its blocks in order, then
/// their second halves. Why: a warp's lanes take a round's 32 blocks, one each, and load a
/// block as two 16-byte halves; laid out by halves, each of those loads is 512 contiguous
/// bytes instead of every 32-byte sector of 1 KB at half use (kernels/mvq.cu Unit<FMT_Q8_0>).
fn q8_half_at(blocks: usize, b: usize, h: usize) -> usize {
    let (round, j) = (b / 32, b % 32);
    let in_round = (blocks - 32 * round).min(32);
    1024 * round + 16 * (h * in_round + j)
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

/// `src` must hold `rows` GGUF rows of `in_row` bytes: else an error naming the mismatch.
fn check_len(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    src: &[u8],
    in_row: usize,
) -> Result<(), String> {
    if src.len() != rows * in_row {
        return Err(format!(
            "{} matrix {rows} x {cols}: {} bytes, expected {}",
            ty.name(),
            src.len(),
            rows * in_row
        ));
    }
    Ok(())
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
    check_len(ty, rows, cols, src, in_row)?;
    let Some((qb, sb)) = planes(ty) else {
        return Err(format!("{} has no vectorized layout", ty.name()));
    };
    let mut out = vec![0u8; rows * out_row];
    par_units(&mut out, out_row, |r, o| {
        let i = &src[r * in_row..(r + 1) * in_row];
        let (qp, sp) = o.split_at_mut(blocks * qb);
        for (b, blk) in i.chunks_exact(ty.block_bytes()).enumerate() {
            if ty == GgmlType::Q8_0 {
                // d to the scale plane; the 32 quants as two halves (q8_half_at).
                sp[b * sb..(b + 1) * sb].copy_from_slice(&blk[..2]);
                for h in 0..2 {
                    let at = q8_half_at(blocks, b, h);
                    qp[at..at + 16].copy_from_slice(&blk[2 + 16 * h..18 + 16 * h]);
                }
                continue;
            }
            let (q, s) = (&mut qp[b * qb..(b + 1) * qb], &mut sp[b * sb..(b + 1) * sb]);
            match ty {
                GgmlType::Q4_0 => {
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
                _ => unreachable!("planes() lists only the formats matched here (Q8_0 above)"),
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

/// Whether a matrix takes a tensor-core layout (and kernels): Q4_K or Q6_K with whole
/// super-blocks of columns, or Q8_0, Q4_0, Q4_1, Q5_0 with whole blocks of 32 (a last partial
/// super-block padded); whole m-tiles of rows. A function of the matrix alone, never of a
/// batch (which formats an engine takes is `--mma`'s, cuda/mma.rs MmaSel).
pub fn mma_ok(ty: GgmlType, rows: usize, cols: usize) -> bool {
    let kq = matches!(ty, GgmlType::Q4K | GgmlType::Q6K);
    let cols_ok = (kq || mma_b32(ty)) && cols.is_multiple_of(mma_col_unit(ty));
    cols_ok && rows > 0 && rows.is_multiple_of(MMA_TILE_ROWS) && cols > 0
}

/// The columns a tensor-core matrix of `ty` comes in whole multiples of: a super-block (256)
/// for Q4_K and Q6_K, whose scales span one; a block of 32 for the 32-element formats (their
/// last super-block may be partial, padded by mma_prep).
pub fn mma_col_unit(ty: GgmlType) -> usize {
    if matches!(ty, GgmlType::Q4K | GgmlType::Q6K) {
        256
    } else {
        32
    }
}

/// The tensor-core layout of any format `mma_ok` takes.
pub fn repack_mma(ty: GgmlType, rows: usize, cols: usize, src: &[u8]) -> Result<Vec<u8>, String> {
    match ty {
        GgmlType::Q4K => repack_mma_q4k(rows, cols, src),
        GgmlType::Q6K => repack_mma_q6k(rows, cols, src),
        _ => repack_mma_b32(ty, rows, cols, src),
    }
}

/// The tensor-core layout of a Q4_K matrix (`src`: rows x cols in GGUF blocks): per (m-tile
/// of 16 rows, super-block), m-tile-major, one MMA_BLOCK-byte block (layout in the head of
/// kernels/mma.cu):
///   [0, 2048)    u32 word (s / 2) * 128 + lane * 4 + 2 (s % 2) + j (lane = 4g + t, sub-block
///                s, j = 0, 1) holds, at byte i, q[row g][32 s + 16 j + 4t + i] in its low
///                nibble and q[row g + 8][same k] in its high one: the u8 A fragment
///                registers 2j (row g) and 2j + 1 (row g + 8) of lane (g, t) for the integer
///                mma of sub-block s (m16n8k32), one mask each;
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
    check_len(ty, rows, cols, src, in_row)?;
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
                    for s in 0..8 {
                        for j in 0..2 {
                            let mut w = [0u8; 4];
                            for (i, b) in w.iter_mut().enumerate() {
                                let k = 32 * s + 16 * j + 4 * t + i;
                                *b = quant(blk(g), k) | quant(blk(g + 8), k) << 4;
                            }
                            let at = 4 * ((s / 2) * 128 + lane * 4 + 2 * (s % 2) + j);
                            o[at..at + 4].copy_from_slice(&w);
                        }
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

/// Q6_K's tensor-core block (kernels/mma.cu MMA6_*): the high pairs, the int8 scales and the
/// f16 d start here.
pub(crate) const Q6K_HI_OFF: usize = 2048;
pub(crate) const Q6K_SC_OFF: usize = 3072;
pub(crate) const Q6K_DOFF: usize = 3328;

/// The raw 6-bit quant q (value q - 32) of element j (0..256) of a GGUF Q6_K block: ql's
/// nibble | qh's pair << 4, bit positions as quant/dequant.rs.
fn q6k_quant(b: &[u8], j: usize) -> u8 {
    let (h, s, l) = (j / 128, (j % 128) / 32, j % 32);
    let within = s * 32 + l;
    let lo = (b[h * 64 + within % 64] >> (4 * (within / 64))) & 15;
    lo | (((b[128 + h * 32 + l] >> (2 * s)) & 3) << 4)
}

/// The tensor-core layout of a Q6_K matrix (`src`: rows x cols in GGUF blocks, cols a
/// multiple of 256): per (m-tile of 16 rows, super-block), m-tile-major, one 3360-byte block
/// (layout in the head of kernels/mma.cu), for lane (g, t) = lane / 4, lane % 4, 32-k chunk s
/// (sub-blocks 2s, 2s + 1), half j (k 32 s + 16 j + 4t + i, i = 0..3):
///   [0, 2048)    Q4_K's nibble words: u32 (s / 2) * 128 + lane * 4 + 2 (s % 2) + j, byte i =
///                q[row g][k] & 15 | (q[row g + 8][k] & 15) << 4;
///   [2048, 3072) the high pairs: u32 512 + (s / 4) * 128 + lane * 4 + s % 4, byte i bits
///                2 (h + 2j) + {0, 1} = q[row g + 8h][k] >> 4 (kernels/mma.cu
///                mma_q6k_afrag's hw);
///   [3072, 3328) per g: the int8 scales of row g, then row g + 8, each its even
///                sub-blocks (0, 2, .., 14) then its odd ones;
///   [3328, 3360) per g: d of row g, d of row g + 8 (f16, little endian).
/// Every quant, scale and d is moved unchanged (the kernels take q - 32 as an s8).
pub fn repack_mma_q6k(rows: usize, cols: usize, src: &[u8]) -> Result<Vec<u8>, String> {
    let ty = GgmlType::Q6K;
    if !mma_ok(ty, rows, cols) {
        return Err(format!(
            "Q6_K matrix {rows} x {cols}: the tensor-core layout needs rows a multiple of \
             {MMA_TILE_ROWS} and columns of 256"
        ));
    }
    let n_sb = cols / 256;
    let in_row = n_sb * ty.block_bytes();
    check_len(ty, rows, cols, src, in_row)?;
    let blk_bytes = mma_block_bytes(ty).expect("Q6_K has a block size");
    let mut out = vec![0u8; rows / MMA_TILE_ROWS * n_sb * blk_bytes];
    par_units(&mut out, n_sb * blk_bytes, |mt, tile| {
        for sb in 0..n_sb {
            let blk = |r: usize| {
                let at = (mt * MMA_TILE_ROWS + r) * in_row + sb * 210;
                &src[at..at + 210]
            };
            let o = &mut tile[sb * blk_bytes..(sb + 1) * blk_bytes];
            for g in 0..8 {
                for t in 0..4 {
                    let lane = 4 * g + t;
                    for s in 0..8 {
                        let mut hw = [0u8; 4];
                        for j in 0..2 {
                            let mut w = [0u8; 4];
                            for (i, b) in w.iter_mut().enumerate() {
                                let k = 32 * s + 16 * j + 4 * t + i;
                                let (qg, q8) = (q6k_quant(blk(g), k), q6k_quant(blk(g + 8), k));
                                *b = (qg & 15) | (q8 & 15) << 4;
                                hw[i] |= (qg >> 4) << (4 * j) | (q8 >> 4) << (4 * j + 2);
                            }
                            let at = 4 * ((s / 2) * 128 + lane * 4 + 2 * (s % 2) + j);
                            o[at..at + 4].copy_from_slice(&w);
                        }
                        let at = Q6K_HI_OFF + 4 * ((s / 4) * 128 + lane * 4 + s % 4);
                        o[at..at + 4].copy_from_slice(&hw);
                    }
                }
                for (h, r) in [g, g + 8].into_iter().enumerate() {
                    let b = blk(r);
                    for sub in 0..16 {
                        o[Q6K_SC_OFF + 32 * g + 16 * h + 8 * (sub % 2) + sub / 2] = b[192 + sub];
                    }
                    o[Q6K_DOFF + 4 * g + 2 * h..][..2].copy_from_slice(&b[208..210]);
                }
            }
        }
    });
    Ok(out)
}

/// The formats of `repack_mma_b32`'s layout (kernels/mma.cu MF_Q8_0..MF_Q5_0): the
/// 32-element ones.
pub fn mma_b32(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0
    )
}

/// Bytes of one (16-row m-tile, 256-column super-block) block of the tensor-core layout of
/// `ty` (kernels/mma.cu MmaF<F>::BLK): each the GGUF bytes of its 16 x 8 blocks of 32
/// (Q8_0 4352, Q4_0 2304, Q4_1 2560, Q5_0 2816) or 16 super-blocks (Q6_K 3360), Q4_K's
/// 2368; None for other formats.
pub fn mma_block_bytes(ty: GgmlType) -> Option<usize> {
    Some(match ty {
        GgmlType::Q4K => MMA_BLOCK,
        GgmlType::Q8_0 => 4352,
        GgmlType::Q4_0 => 2304,
        GgmlType::Q4_1 => 2560,
        GgmlType::Q5_0 => 2816,
        GgmlType::Q6K => 3360,
        _ => return None,
    })
}

/// Per 32-element format: (offset of the scale area, 16-byte scale words per row pair g,
/// offset of Q5_0's high-bit plane, the bias of the stored quant u = q + bias). Mirrors
/// MmaF<F> of kernels/mma.cu.
pub(crate) fn b32_geometry(ty: GgmlType) -> (usize, usize, Option<usize>, i32) {
    match ty {
        GgmlType::Q8_0 => (4096, 2, None, 128),
        GgmlType::Q4_0 => (2048, 2, None, 8),
        GgmlType::Q4_1 => (2048, 4, None, 0),
        GgmlType::Q5_0 => (2560, 2, Some(2048), 16),
        _ => unreachable!("mma_b32 formats only"),
    }
}

/// The stored unsigned quant u = q + bias of element j (0..32) of a GGUF block of `ty`
/// (Q8_0: the i8 plus 128; Q4_0, Q4_1: the nibble; Q5_0: nibble | high bit << 4).
fn b32_quant(ty: GgmlType, b: &[u8], j: usize) -> u8 {
    let nib = |at: usize| {
        if j < 16 {
            b[at + j] & 15
        } else {
            b[at + j - 16] >> 4
        }
    };
    match ty {
        GgmlType::Q8_0 => b[2 + j] ^ 0x80,
        GgmlType::Q4_0 => nib(2),
        GgmlType::Q4_1 => nib(4),
        GgmlType::Q5_0 => {
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            nib(6) | ((((qh >> j) & 1) as u8) << 4)
        }
        _ => unreachable!("mma_b32 formats only"),
    }
}

/// The tensor-core layout of a Q8_0, Q4_0, Q4_1 or Q5_0 matrix (`src`: rows x cols in GGUF
/// blocks of 32; cols a multiple of 32, the last super-block padded with zero bytes, which
/// the kernels never add): per (m-tile of 16 rows, super-block of 256 columns), m-tile-major,
/// one mma_block_bytes(ty) block (kernels/mma.cu MmaF<F>), for lane (g, t) = lane / 4, lane % 4:
///   quants, u = q + bias:
///     Q8_0: byte (ks / 2) * 512 + lane * 16 + (ks % 2) * 8 + 2r + p holds u[row g + 8 (r % 2)]
///           [ks * 16 + 8 (r / 2) + 2t + p] (register r of the A fragment, element p);
///     Q4_0, Q4_1, Q5_0: the f16 nibble words (u32 (ks / 4) * 128 + lane * 4 + ks % 4, nibble
///           h + 2 * half + 4 * pos = u[row g + 8h][ks * 16 + 8 * half + 2t + pos] & 15);
///     Q5_0 also: byte 2048 + lane * 16 + ks, bit h + 2 * half + 4 * pos = that u's bit 4;
///   scales at the format's offset, per g 16-byte words: d[g][0..8], d[g+8][0..8] (f16, the
///   super-block's eight blocks), Q4_1 then m[g][0..8], m[g+8][0..8].
/// Every quant, d and m is moved unchanged.
pub fn repack_mma_b32(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    src: &[u8],
) -> Result<Vec<u8>, String> {
    if !mma_ok(ty, rows, cols) || !mma_b32(ty) {
        return Err(format!(
            "{} matrix {rows} x {cols}: the 32-element tensor-core layout takes Q8_0, Q4_0, \
             Q4_1 or Q5_0 with rows a multiple of {MMA_TILE_ROWS} and columns of 32",
            ty.name()
        ));
    }
    let (bb, bl) = (ty.block_bytes(), ty.block_len());
    let (nblk, n_sb) = (cols / bl, cols.div_ceil(256));
    let in_row = nblk * bb;
    check_len(ty, rows, cols, src, in_row)?;
    let blk_bytes = mma_block_bytes(ty).expect("mma_b32 formats have a block size");
    let (doff, nd, hboff, _) = b32_geometry(ty);
    let mut out = vec![0u8; rows / MMA_TILE_ROWS * n_sb * blk_bytes];
    par_units(&mut out, n_sb * blk_bytes, |mt, tile| {
        for sb in 0..n_sb {
            let o = &mut tile[sb * blk_bytes..(sb + 1) * blk_bytes];
            // GGUF block bi of row r of the tile; None past the matrix's columns.
            let block = |r: usize, bi: usize| {
                let at = (mt * MMA_TILE_ROWS + r) * in_row + bi * bb;
                (bi < nblk).then(|| &src[at..at + bb])
            };
            // u of (row in tile, column in super-block).
            let u = |r: usize, k: usize| {
                let e = sb * 256 + k;
                block(r, e / bl).map_or(0, |b| b32_quant(ty, b, e % bl))
            };
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for ks in 0..16 {
                    let mut w = 0u32;
                    let mut hb = 0u8;
                    for h in 0..2 {
                        for half in 0..2 {
                            for pos in 0..2 {
                                let v = u(g + 8 * h, ks * 16 + 8 * half + 2 * t + pos);
                                let i = h + 2 * half + 4 * pos;
                                if ty == GgmlType::Q8_0 {
                                    let r = h + 2 * half;
                                    o[(ks / 2) * 512 + lane * 16 + (ks % 2) * 8 + 2 * r + pos] = v;
                                } else {
                                    w |= ((v & 15) as u32) << (4 * i);
                                    hb |= ((v >> 4) & 1) << i;
                                }
                            }
                        }
                    }
                    if ty != GgmlType::Q8_0 {
                        let at = 4 * ((ks / 4) * 128 + lane * 4 + ks % 4);
                        o[at..at + 4].copy_from_slice(&w.to_le_bytes());
                    }
                    if let Some(hbo) = hboff {
                        o[hbo + lane * 16 + ks] = hb;
                    }
                }
            }
            for g in 0..8 {
                for (j, (r, off)) in [(g, 0), (g + 8, 0), (g, 2), (g + 8, 2)]
                    .into_iter()
                    .take(nd)
                    .enumerate()
                {
                    for b in 0..8 {
                        if let Some(blk) = block(r, sb * 8 + b) {
                            let at = doff + g * 16 * nd + 16 * j + 2 * b;
                            o[at..at + 2].copy_from_slice(&blk[off..off + 2]);
                        }
                    }
                }
            }
        }
    });
    Ok(out)
}

/// Host mirror of the tensor-core kernels' reading of a 32-element-format matrix: every
/// weight d * q (Q4_1: d * q + m, the crate's f32 expressions) rebuilt from the layout as
/// kernels/mma.cu's lanes see it: m32_afrag's PRMT selectors (Q8_0: register r from bytes
/// 2r, 2r + 1 of its k-step's 8) or nibble masks (bits 0/16, 4/20 of w and of w >> 8) with
/// the Q5_0 high-bit spread (t = hb & 15 | (hb & 0xF0) << 12, then << 4, 7, 2, 5), minus the
/// bias, and m32_add_block's scale words (d[g + 8h][b] at word h, m at word 2 + h). Derived
/// from those definitions, not from `repack_mma_b32`'s loops: the two must agree (tests).
/// Padding columns (past `cols`) are not rebuilt.
#[cfg(test)]
pub(crate) fn mma_b32_weights(ty: GgmlType, rows: usize, cols: usize, packed: &[u8]) -> Vec<f32> {
    let h16 = |b: &[u8], at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
    let blk_bytes = mma_block_bytes(ty).unwrap();
    let (doff, nd, hboff, bias) = b32_geometry(ty);
    let n_sb = cols.div_ceil(256);
    let mut w = vec![f32::NAN; rows * cols];
    for mt in 0..rows / MMA_TILE_ROWS {
        for sb in 0..n_sb {
            let o = &packed[(mt * n_sb + sb) * blk_bytes..(mt * n_sb + sb + 1) * blk_bytes];
            let word = |at: usize| u32::from_le_bytes([o[at], o[at + 1], o[at + 2], o[at + 3]]);
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for ks in 0..16 {
                    let k0 = ks * 16 + 2 * t;
                    // The four registers as (row offset, first k, [u of element 0, 1]).
                    let regs: [(usize, usize, [u32; 2]); 4] = if ty == GgmlType::Q8_0 {
                        let base = (ks / 2) * 512 + lane * 16 + (ks % 2) * 8;
                        let (w0, w1) = (word(base), word(base + 4));
                        // __byte_perm(w, 0x64646464, 0x4140 | 0x4342): bytes 0, 1 | 2, 3
                        let sel = |w: u32, hi: bool| {
                            let s = if hi { 16 } else { 0 };
                            [(w >> s) & 255, (w >> (s + 8)) & 255]
                        };
                        [
                            (0, k0, sel(w0, false)),
                            (8, k0, sel(w0, true)),
                            (0, k0 + 8, sel(w1, false)),
                            (8, k0 + 8, sel(w1, true)),
                        ]
                    } else {
                        let wd = word(4 * ((ks / 4) * 128 + lane * 4 + ks % 4));
                        let hb = hboff.map_or(0, |h| o[h + lane * 16 + ks] as u32);
                        let t2 = (hb & 0x0F) | ((hb & 0xF0) << 12);
                        let (h0, h1, h2, h3) = (
                            (t2 << 4) & 0x0010_0010,
                            (t2 << 7) & 0x0100_0100,
                            (t2 << 2) & 0x0010_0010,
                            (t2 << 5) & 0x0100_0100,
                        );
                        let w8 = wd >> 8;
                        // The register's two 16-bit halves less 0x6400's place: u, or 16 u.
                        let lo = |v: u32| [v & 0xFFFF, v >> 16];
                        let r0 = lo((wd & 0x000F_000F) | h0);
                        let r1 = lo((wd & 0x00F0_00F0) | h1).map(|v| v / 16);
                        let r2 = lo((w8 & 0x000F_000F) | h2);
                        let r3 = lo((w8 & 0x00F0_00F0) | h3).map(|v| v / 16);
                        [(0, k0, r0), (8, k0, r1), (0, k0 + 8, r2), (8, k0 + 8, r3)]
                    };
                    for (dr, k, us) in regs {
                        let (r, h) = (g + dr, dr / 8);
                        for (p, &uv) in us.iter().enumerate() {
                            let c = sb * 256 + k + p;
                            if c >= cols {
                                continue;
                            }
                            let b = (k + p) / 32;
                            let q = (uv as i32 - bias) as f32;
                            let d = h16(o, doff + g * 16 * nd + 16 * h + 2 * b);
                            w[(mt * MMA_TILE_ROWS + r) * cols + c] = if nd == 4 {
                                let m = h16(o, doff + g * 16 * nd + 16 * (2 + h) + 2 * b);
                                d * q + m
                            } else {
                                d * q // Q8_0's q * d: the same product
                            };
                        }
                    }
                }
            }
        }
    }
    w
}

/// Host mirror of the tensor-core kernels' reading of a repacked Q6_K matrix: the weights
/// w = (d * sc) * (q - 32) (the crate's f32 Q6_K expression) rebuilt from the layout as the
/// kernel's lanes see it: the PTX m16n8k32 A-fragment definition (as `mma_q4k_weights`,
/// bytes s8) and mma.cu's mma_q6k_afrag (nibble words as Q4_K's; the high pair from word s
/// % 4 of the lane's high uint4 s / 4, << 4, << 2, as is, >> 2 under 0x30 for registers
/// 0..3; then + 0x60 and ^ 0x80 per byte), with the scale of the register's sub-block (2s
/// for registers 0, 1; 2s + 1 for 2, 3) read as mma_q6k_sc does (its row's 16 bytes, even
/// sub-blocks first). Derived from those definitions, not from `repack_mma_q6k`'s loops:
/// the two must agree (tests).
#[cfg(test)]
pub(crate) fn mma_q6k_weights(rows: usize, cols: usize, packed: &[u8]) -> Vec<f32> {
    let h16 = |b: &[u8], at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
    let blk = mma_block_bytes(GgmlType::Q6K).unwrap();
    let n_sb = cols / 256;
    let mut w = vec![f32::NAN; rows * cols];
    for mt in 0..rows / MMA_TILE_ROWS {
        for sb in 0..n_sb {
            let o = &packed[(mt * n_sb + sb) * blk..(mt * n_sb + sb + 1) * blk];
            let word = |at: usize| u32::from_le_bytes([o[at], o[at + 1], o[at + 2], o[at + 3]]);
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for s in 0..8 {
                    let nib = |j: usize| word(4 * ((s / 2) * 128 + lane * 4 + 2 * (s % 2) + j));
                    let hw = word(Q6K_HI_OFF + 16 * ((s / 4) * 32 + lane) + 4 * (s % 4));
                    let (m, hm) = (0x0F0F_0F0Fu32, 0x3030_3030u32);
                    let regs = [
                        (nib(0) & m) | ((hw << 4) & hm),
                        ((nib(0) >> 4) & m) | ((hw << 2) & hm),
                        (nib(1) & m) | (hw & hm),
                        ((nib(1) >> 4) & m) | ((hw >> 2) & hm),
                    ]
                    .map(|x| x.wrapping_add(0x6060_6060) ^ 0x8080_8080);
                    for (r, reg) in regs.into_iter().enumerate() {
                        let (h, j) = (r % 2, r / 2);
                        let sub = 2 * s + j;
                        let sc = o[Q6K_SC_OFF + 32 * g + 16 * h + 8 * (sub % 2) + sub / 2] as i8;
                        let d = h16(o, Q6K_DOFF + 4 * g + 2 * h);
                        for i in 0..4 {
                            let q = (reg >> (8 * i)) as u8 as i8;
                            let k = 32 * s + 16 * j + 4 * t + i;
                            let e = (mt * MMA_TILE_ROWS + g + 8 * h) * cols + sb * 256 + k;
                            w[e] = (d * sc as f32) * q as f32;
                        }
                    }
                }
            }
        }
    }
    w
}

/// Host mirror of the tensor-core kernels' reading of a repacked matrix: the weights
/// w = (d * sc) * q - dmin * m (the crate's f32 Q4_K expression) rebuilt from the layout as
/// the kernel's lanes see it: the PTX m16n8k32 u8 A-fragment definition (reg 0: row g, k 4t
/// .. 4t+3; reg 1: row g+8; reg 2: row g, k 16+4t ..; reg 3: row g+8, k 16+4t ..; byte i the
/// element k + i) and mma.cu's mma_q4k_afrag (regs 0, 1 from word 2 (s % 2) of the lane's
/// sub-block pair, low and high nibbles; regs 2, 3 from the next word), with each register's
/// sub-block scale byte s of its row. Derived from those definitions, not from
/// `repack_mma_q4k`'s loops: the two must agree (tests).
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
                for s in 0..8 {
                    let word = |j: usize| {
                        let at = 4 * ((s / 2) * 128 + lane * 4 + 2 * (s % 2) + j);
                        u32::from_le_bytes([o[at], o[at + 1], o[at + 2], o[at + 3]])
                    };
                    // (register's word, its nibble shift, its row offset, its first k)
                    for (wj, shift, dr, k0) in [
                        (0, 0, 0, 4 * t),
                        (0, 4, 8, 4 * t),
                        (1, 0, 0, 16 + 4 * t),
                        (1, 4, 8, 16 + 4 * t),
                    ] {
                        let reg = word(wj);
                        let h = dr / 8;
                        let sc = o[2048 + 32 * g + 8 * h + s] as f32;
                        let m = o[2048 + 32 * g + 16 + 8 * h + s] as f32;
                        let d = h16(o, 2304 + 8 * g + 4 * h);
                        let dmin = h16(o, 2304 + 8 * g + 4 * h + 2);
                        for i in 0..4 {
                            let q = ((reg >> (8 * i + shift)) & 15) as f32;
                            let e =
                                (mt * MMA_TILE_ROWS + g + dr) * cols + sb * 256 + 32 * s + k0 + i;
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
            let qs: Vec<u8> = if ty == GgmlType::Q8_0 {
                (0..2)
                    .flat_map(|h| {
                        let at = q8_half_at(nb, u, h);
                        row[at..at + 16].to_vec()
                    })
                    .collect()
            } else {
                row[u * qb..(u + 1) * qb].to_vec()
            };
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
        // 512: one partial round of 16 units (Q8_0's halves); 1280: a whole round of 32 and a
        // partial one of 8.
        for (ty, cols) in GgmlType::ALL
            .into_iter()
            .filter(|&t| is_fast(t))
            .flat_map(|t| [(t, 512usize), (t, 1280)])
        {
            let rows = 3usize;
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

    /// Q8_0's halves tile the quant plane (every 16 bytes once), and within a round of 32
    /// blocks a warp's load of one half is contiguous: lane j's half at the half's start + 16 j
    /// (kernels/mvq.cu Unit<FMT_Q8_0> loads q0 at 1024 r + 16 j and q1 16 * (blocks in the
    /// round) later), at widths with whole rounds, a partial one, and both.
    #[test]
    fn q8_halves_tile_the_plane_in_contiguous_warp_loads() {
        for blocks in [1usize, 5, 18, 31, 32, 33, 64, 152, 448] {
            let mut starts: Vec<usize> = (0..blocks)
                .flat_map(|b| (0..2).map(move |h| q8_half_at(blocks, b, h)))
                .collect();
            starts.sort_unstable();
            let want: Vec<usize> = (0..2 * blocks).map(|k| 16 * k).collect();
            assert_eq!(starts, want, "{blocks} blocks");
            for b in 0..blocks {
                let (r, j) = (b / 32, b % 32);
                let m = (blocks - 32 * r).min(32);
                assert_eq!(q8_half_at(blocks, b, 0), 1024 * r + 16 * j, "{blocks}: {b}");
                assert_eq!(
                    q8_half_at(blocks, b, 1),
                    1024 * r + 16 * m + 16 * j,
                    "{blocks}: {b}"
                );
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
        // Negative control: swap two nibble words of one lane (sub-block 0's halves).
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

    /// Q6_K's tensor-core layout rebuilt by the lanes' mirror (`mma_q6k_weights`) is every
    /// weight of the dequantized matrix, bit for bit, on two shapes; each of a moved nibble
    /// word, moved high pairs, a moved scale and a moved d is caught (the negative controls).
    #[test]
    fn mma_q6k_layout_round_trips_to_the_dequantized_matrix() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
        for (rows, cols) in [(32usize, 512usize), (16, 768)] {
            let v: Vec<f32> = (0..rows * cols)
                .map(|_| rng.gen_range(-2.0f32..2.0))
                .collect();
            let src = quantize(GgmlType::Q6K, &v).unwrap();
            let mut want = vec![0f32; rows * cols];
            dequantize(GgmlType::Q6K, &src, &mut want).unwrap();
            let packed = repack_mma_q6k(rows, cols, &src).unwrap();
            assert_eq!(packed.len(), rows * cols / 256 * 210, "GGUF's bytes");
            let got = mma_q6k_weights(rows, cols, &packed);
            for (e, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "{cols}: element {e}: {g} vs {w}");
            }
            // Lane 0's nibble words of chunk 0 (halves j = 0, 1); its high words of chunks
            // 0, 1; row 0's scales of sub-blocks 0 and 2; d of rows 0 and 8.
            for (a, b) in [
                (0usize, 4usize),
                (Q6K_HI_OFF, Q6K_HI_OFF + 4),
                (Q6K_SC_OFF, Q6K_SC_OFF + 1),
                (Q6K_DOFF, Q6K_DOFF + 2),
            ] {
                let mut bad = packed.clone();
                bad.swap(a, b);
                bad.swap(a + 1, b + 1);
                let worse = mma_q6k_weights(rows, cols, &bad);
                assert!(
                    worse
                        .iter()
                        .zip(&want)
                        .any(|(g, w)| g.to_bits() != w.to_bits()),
                    "moved bytes {a} <-> {b} went unnoticed"
                );
            }
        }
        let e = repack_mma_q6k(16, 576, &[0; 16 * 2 * 210]).unwrap_err();
        assert!(e.contains("Q6_K matrix 16 x 576"), "{e}");
        let e = repack_mma_q6k(16, 256, &[0; 100]).unwrap_err();
        assert!(e.contains("100 bytes"), "{e}");
    }

    /// The formats of `repack_mma_b32` (the 32-element formats), as the tests walk them.
    const MMA_B32_TYPES: [GgmlType; 4] = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
    ];

    /// Each 32-element format's tensor-core layout rebuilt by the lanes' mirror
    /// (`mma_b32_weights`) is every weight of the dequantized matrix, bit for bit, at a width
    /// of whole super-blocks and at SmolLM2's 576 (a last super-block of 64 columns,
    /// padded); a moved quant byte and a moved scale are each caught (negative controls).
    #[test]
    fn mma_b32_layouts_round_trip_to_the_dequantized_matrix() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        for ty in MMA_B32_TYPES {
            for (rows, cols) in [(32usize, 512usize), (16, 576)] {
                let v: Vec<f32> = (0..rows * cols)
                    .map(|_| rng.gen_range(-2.0f32..2.0))
                    .collect();
                let src = quantize(ty, &v).unwrap();
                let mut want = vec![0f32; rows * cols];
                dequantize(ty, &src, &mut want).unwrap();
                let packed = repack_mma_b32(ty, rows, cols, &src).unwrap();
                let blk = mma_block_bytes(ty).unwrap();
                assert_eq!(
                    blk,
                    16 * 256 / ty.block_len() * ty.block_bytes(),
                    "{}: GGUF's bytes",
                    ty.name()
                );
                assert_eq!(packed.len(), rows / 16 * cols.div_ceil(256) * blk);
                let got = mma_b32_weights(ty, rows, cols, &packed);
                for (e, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        w.to_bits(),
                        "{} {cols}: element {e}: {g} vs {w}",
                        ty.name()
                    );
                }
                let (doff, _, hboff, _) = b32_geometry(ty);
                // Negative controls: a quant byte moved (k-step 0 <-> 1 of lane 0), and the
                // d of block 0 of row 0 moved to block 1; Q5_0 also lane 0's high-bit bytes
                // of k-steps 0, 1 <-> 4, 5.
                let mut moves = vec![(0usize, 4usize), (doff, doff + 2)];
                moves.extend(hboff.map(|h| (h, h + 4)));
                for (a, b) in moves {
                    let mut bad = packed.clone();
                    bad.swap(a, b);
                    bad.swap(a + 1, b + 1);
                    let worse = mma_b32_weights(ty, rows, cols, &bad);
                    assert!(
                        worse
                            .iter()
                            .zip(&want)
                            .any(|(g, w)| g.to_bits() != w.to_bits()),
                        "{}: moved bytes {a} <-> {b} went unnoticed",
                        ty.name()
                    );
                }
            }
        }
    }

    /// THE ORDER of kernels/mma.cu for the 32-element formats, emulated on the host (the
    /// prep's 2^E and hi/lo split in f32 as mma_prep does, each block's mma chain (32 columns)
    /// in float64 rounded to f32 once: the hardware's f32 accumulation is within that of it,
    /// then v_b, u_sb and y with the kernels' f32 expressions) against a float64 dot of the
    /// dequantized weights: within 4e-6 of |W||x| (the tensor-core prototype measured Q4_K at
    /// 2.4e-7 on the GPU). Inputs with outliers (+-50 beside 1e-4 values). Negative control:
    /// the same order without the lo halves (f16 activations) misses the bound. (The integer
    /// formats, Q4_K and Q6_K, are checked by the kernel emulator, tests/kernel-emu/mma_emu.cpp,
    /// against a float64 matvec.)
    #[test]
    fn mma_b32_order_emulated_matches_a_float64_dot() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(19);
        let (rows, cols_all) = (16usize, 576usize);
        let x: Vec<f32> = (0..cols_all)
            .map(|i| match i % 97 {
                0 => 50.0,
                1 => -37.5,
                2..=9 => rng.gen_range(-1e-4f32..1e-4),
                _ => rng.gen_range(-1.5f32..1.5),
            })
            .collect();
        let f16r = |v: f32| half::f16::from_f32(v).to_f32();
        // mma_prep: per 256-group E from the group's max |x|, hi = f16(x 2^-E), lo = f16(rest).
        let mut hi = vec![0f32; cols_all];
        let mut lo = vec![0f32; cols_all];
        let mut es = vec![0f32; cols_all.div_ceil(256)];
        for (sb, e) in es.iter_mut().enumerate() {
            let r = sb * 256..(sb * 256 + 256).min(cols_all);
            let m = x[r.clone()].iter().fold(0f32, |m, v| m.max(v.abs()));
            let ex = (((m.to_bits() >> 23) & 255) as i32 - 141).max(-126);
            *e = f32::from_bits(((127 + ex) as u32) << 23);
            let sinv = f32::from_bits(((127 - ex) as u32) << 23);
            for i in r {
                let xs = x[i] * sinv;
                hi[i] = f16r(xs);
                lo[i] = f16r(xs - hi[i]);
            }
        }
        for ty in MMA_B32_TYPES {
            let cols = cols_all;
            let v: Vec<f32> = (0..rows * cols)
                .map(|_| rng.gen_range(-2.0f32..2.0))
                .collect();
            let src = quantize(ty, &v).unwrap();
            let mut w = vec![0f32; rows * cols];
            dequantize(ty, &src, &mut w).unwrap();
            let (.., bias) = b32_geometry(ty);
            let (bb, bl) = (ty.block_bytes(), ty.block_len());
            let cl = 32; // columns of one chain (one scale)
            let h16 = |b: &[u8], at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
            let order = |r: usize, with_lo: bool| {
                let mut y = 0f32;
                for (sb, &e) in es.iter().enumerate().take(cols.div_ceil(256)) {
                    let mut u = 0f32;
                    for c in sb * 256 / cl..((sb + 1) * 256 / cl).min(cols / cl) {
                        let (bi, j0) = (c * cl / bl, c * cl % bl);
                        let blk = &src[(r * cols / bl + bi) * bb..][..bb];
                        let mut s = 0f64;
                        for j in 0..cl {
                            let q = (b32_quant(ty, blk, j0 + j) as i32 - bias) as f64;
                            let xb = hi[c * cl + j] as f64
                                + if with_lo { lo[c * cl + j] as f64 } else { 0.0 };
                            s += q * xb;
                        }
                        let sx = (s as f32) * e;
                        let vb = if ty == GgmlType::Q4_1 {
                            let xsum = x[c * 32..c * 32 + 32].iter().sum::<f32>();
                            h16(blk, 0).mul_add(sx, h16(blk, 2) * xsum)
                        } else {
                            h16(blk, 0) * sx
                        };
                        u += vb;
                    }
                    y += u;
                }
                y
            };
            let (mut worst, mut worst_hi_only) = (0f64, 0f64);
            for r in 0..rows {
                let wr = &w[r * cols..(r + 1) * cols];
                let exact: f64 = wr.iter().zip(&x).map(|(&a, &b)| a as f64 * b as f64).sum();
                let mag: f64 = wr
                    .iter()
                    .zip(&x)
                    .map(|(&a, &b)| (a as f64 * b as f64).abs())
                    .sum();
                worst = worst.max((order(r, true) as f64 - exact).abs() / mag);
                worst_hi_only = worst_hi_only.max((order(r, false) as f64 - exact).abs() / mag);
            }
            assert!(worst <= 4e-6, "{}: error {worst:e} of |W||x|", ty.name());
            assert!(
                worst_hi_only > 4e-6,
                "{}: hi-only {worst_hi_only:e}: the check cannot fail",
                ty.name()
            );
        }
    }

    #[test]
    fn mma_b32_takes_whole_tiles_and_blocks_only() {
        for ty in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
        ] {
            assert!(mma_ok(ty, 32, 576), "{}: 576 = 18 blocks of 32", ty.name());
            assert!(!mma_ok(ty, 40, 576), "{}: 40 rows", ty.name());
            assert!(!mma_ok(ty, 32, 48), "{}: 48 columns", ty.name());
        }
        assert!(!mma_ok(GgmlType::Q5_1, 32, 256), "Q5_1 has no mma layout");
        assert!(
            !mma_ok(GgmlType::Q4K, 32, 576),
            "Q4_K needs whole super-blocks"
        );
        let e = repack_mma_b32(GgmlType::Q8_0, 16, 64, &[0; 10]).unwrap_err();
        assert!(e.contains("10 bytes"), "{e}");
        let e = repack_mma_b32(GgmlType::Q4K, 16, 256, &[0; 16 * 144]).unwrap_err();
        assert!(e.to_lowercase().contains("q4_k"), "{e}");
    }

    #[test]
    fn mma_q4k_refuses_partial_tiles() {
        assert!(mma_ok(GgmlType::Q4K, 32, 256));
        assert!(
            !mma_ok(GgmlType::Q4K, 40, 256),
            "40 rows: not whole m-tiles"
        );
        assert!(!mma_ok(GgmlType::Q5K, 32, 256), "no Q5_K layout");
        assert!(mma_ok(GgmlType::Q6K, 32, 256));
        assert!(
            !mma_ok(GgmlType::Q6K, 32, 576),
            "Q6_K needs whole super-blocks"
        );
        let e = repack_mma_b32(GgmlType::Q6K, 16, 256, &[0; 16 * 210]).unwrap_err();
        assert!(e.to_lowercase().contains("q6_k"), "{e}");
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
