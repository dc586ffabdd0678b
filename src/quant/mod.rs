//! GGML block formats: the type table, CPU dequantization, quantization (the synthetic-model
//! writer uses it) and the fixed-order dot kernels the CPU engine multiplies with.
//!
//! Determinism rule for this module: every reduction runs in one fixed order that depends
//! only on the row length, never on how many rows, threads or stages share the call. Dot
//! products accumulate in 8 f32 lanes (lane l takes elements l, l+8, l+16, ... of the row)
//! and finish with a fixed pairwise tree; no atomics, no thread-count-dependent splits
//! (`dot.rs` spells out the exact per-format order). Dequantization and the quantizers that gguf.quants also has are bit-exact with the python
//! `gguf.quants` package (a port of ggml's reference C); `tests/data/quant/` pins that.

mod dequant;
mod dot;
mod quantize;
pub mod repack;
#[cfg(test)]
mod tests;
mod weight;

pub(crate) use dot::finish_lanes;
pub use dot::{dot, dot_many};
pub use weight::Weight;

/// A tensor element type as GGUF numbers it. Only the formats this project can dequantize
/// are listed; any other id is an "unknown type" error at parse time, naming the id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    BF16,
}

impl GgmlType {
    pub const ALL: [GgmlType; 13] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::BF16,
    ];

    /// The GGUF/ggml type id (`ggml_type` in ggml.h).
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::BF16 => 30,
        }
    }

    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.into_iter().find(|t| t.id() == id)
    }

    /// Elements per block.
    pub const fn block_len(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => {
                32
            }
            GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => 256,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::Q2K => 84,
            GgmlType::Q3K => 110,
            GgmlType::Q4K => 144,
            GgmlType::Q5K => 176,
            GgmlType::Q6K => 210,
        }
    }

    /// Lower-case name as the CLI spells it (`--quant q4_k`).
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q2K => "q2_k",
            GgmlType::Q3K => "q3_k",
            GgmlType::Q4K => "q4_k",
            GgmlType::Q5K => "q5_k",
            GgmlType::Q6K => "q6_k",
            GgmlType::BF16 => "bf16",
        }
    }

    pub fn from_name(s: &str) -> Option<GgmlType> {
        let l = s.to_ascii_lowercase();
        GgmlType::ALL.into_iter().find(|t| t.name() == l)
    }

    /// Bytes for `n` elements, `None` when `n` is not a whole number of blocks or overflows.
    pub fn row_bytes(self, n: u64) -> Option<u64> {
        let bl = self.block_len() as u64;
        if !n.is_multiple_of(bl) {
            return None;
        }
        (n / bl).checked_mul(self.block_bytes() as u64)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a (de)quantization call was refused. Every variant names the type and the lengths.
#[derive(Debug, thiserror::Error)]
pub enum QuantError {
    #[error("{ty}: {n} elements is not a whole number of {block_len}-element blocks")]
    PartialBlock {
        ty: GgmlType,
        n: usize,
        block_len: usize,
    },
    #[error("{ty}: {n} elements take {expected} bytes, got {got}")]
    ByteLength {
        ty: GgmlType,
        n: usize,
        expected: usize,
        got: usize,
    },
    #[error("{ty}: cannot quantize non-finite value {value} at index {index}")]
    NonFinite {
        ty: GgmlType,
        index: usize,
        value: f32,
    },
    /// A weight view refused ([`Weight::view`]): its rows are not whole blocks, or its bytes
    /// overflow or exceed what the data holds.
    #[error("tensor {name}: type {ty}: {why}")]
    Tensor {
        name: String,
        ty: GgmlType,
        why: String,
    },
}

/// Bytes for `n` elements of `ty`, or the error that names why `n` does not fit the blocks.
fn checked_row_bytes(ty: GgmlType, n: usize) -> Result<usize, QuantError> {
    let partial = QuantError::PartialBlock {
        ty,
        n,
        block_len: ty.block_len(),
    };
    ty.row_bytes(n as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or(partial)
}

/// Dequantize `out.len()` elements from `src` (exactly `row_bytes(out.len())` bytes).
/// Bit-exact with `gguf.quants.dequantize`.
pub fn dequantize(ty: GgmlType, src: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    let expected = checked_row_bytes(ty, out.len())?;
    if src.len() != expected {
        return Err(QuantError::ByteLength {
            ty,
            n: out.len(),
            expected,
            got: src.len(),
        });
    }
    dequant::dequantize_exact(ty, src, out);
    Ok(())
}

/// Quantize `src` into `ty` blocks. F32/F16/BF16 and the legacy 32-element formats produce
/// the same bytes as `gguf.quants.quantize`; the K-quants use a simple per-block
/// round-to-nearest (valid blocks that dequantize close to the input). Block formats refuse
/// non-finite input (a NaN scale would poison the whole block); float formats keep it.
pub fn quantize(ty: GgmlType, src: &[f32]) -> Result<Vec<u8>, QuantError> {
    use rayon::prelude::*;
    // Blocks are independent, so large inputs are checked and quantized over the rayon pool
    // in whole blocks: the bytes are the same for any split (the synthetic 8B/70B-shaped
    // models quantize billions of values; single-threaded that took minutes).
    const PAR_MIN: usize = 1 << 18;
    const CHUNK: usize = 1 << 16; // a multiple of every block length (1, 32, 256)
    let par = src.len() >= PAR_MIN;
    let n_bytes = checked_row_bytes(ty, src.len())?;
    if ty.block_len() > 1 {
        let bad = if par {
            src.par_iter().position_first(|v| !v.is_finite())
        } else {
            src.iter().position(|v| !v.is_finite())
        };
        if let Some(index) = bad {
            let value = src[index];
            return Err(QuantError::NonFinite { ty, index, value });
        }
    }
    let mut out = vec![0u8; n_bytes];
    if par {
        let chunk_bytes = CHUNK / ty.block_len() * ty.block_bytes();
        out.par_chunks_mut(chunk_bytes)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(o, x)| quantize::quantize_exact(ty, x, o));
    } else {
        quantize::quantize_exact(ty, src, &mut out);
    }
    Ok(out)
}
