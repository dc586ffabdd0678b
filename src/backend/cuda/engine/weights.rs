//! The engine's weights on its device: each matrix as the file's block bytes, or the same
//! values repacked for the vectorized matvec (crate::quant::repack) or the tensor cores
//! (`--mma`), and the norm and bias vectors as f32. Laws it serves: which layout a matrix
//! takes is a function of its format, its shape and the resolved `--mma` setting alone
//! (`vectorized`, `MmaSel::takes`), never of the batch or the stage, so every engine of a
//! gate runs the same kernel family on the same matrix (the families reduce in different
//! orders); gate and up share one layout (they are one launch); every upload goes on the
//! build stream handed in, the stage's one stream.

use std::sync::Arc;

use super::MatKind;
use crate::backend::cuda::mem::Raw;
use crate::backend::cuda::{
    alloc_zeroed_on, op_err, upload_raw, upload_slice, DevCtx, GpuBuf, GpuStream, MmaSel,
};
use crate::backend::BResult;
use crate::model::LayerWeights;
use crate::quant::{repack, GgmlType, Weight};

/// A weight matrix on the device: the file's block bytes untouched, or (`packed`) the same
/// values in the vectorized matvec's layout (crate::quant::repack, kernels/mvq.cu).
pub(super) struct DevWeight {
    pub(super) raw: Raw,
    pub(super) ty: GgmlType,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) row_bytes: usize,
    pub(super) packed: bool,
    /// In the tensor-core layout of its format (`--mma`, crate::quant::repack::repack_mma):
    /// only the kernels of kernels/mma.cu read it.
    pub(super) mma: bool,
}

/// Whether matrices of `ty` with rows of `cols` elements take the vectorized matvec: a
/// function of the format and the shape alone, so every stage and batch of a model runs the
/// same kernel family on the same matrix (the two families reduce in different orders).
pub(in crate::backend::cuda) fn vectorized(ty: GgmlType, cols: usize) -> bool {
    repack::row_bytes(ty, cols).is_some() && cols >= MVQ_MIN_IN
}

/// The narrowest rows the vectorized matvec takes: below it a 32-lane warp has fewer units
/// than lanes, and the byte-wise kernel, which spreads a row over several warps, is faster.
pub(in crate::backend::cuda) const MVQ_MIN_IN: usize = 512;

impl DevWeight {
    /// Uploads `w`, repacked for the tensor-core kernels when `mma` (callers pass `--mma`
    /// and `repack::mma_ok` of the matrix, and for gate|up of both), else for the vectorized
    /// matvec when `pack` (callers pass `vectorized(..)` of the matrix, and for gate|up of
    /// both).
    pub(super) fn upload(
        dx: &Arc<DevCtx>,
        w: &Weight,
        s: &GpuStream,
        pack: bool,
        mma: bool,
    ) -> BResult<DevWeight> {
        let name = format!("weight {}", w.name);
        let (bytes, row_bytes): (std::borrow::Cow<[u8]>, usize) = if mma {
            let b = repack::repack_mma(w.ty, w.rows, w.cols, w.bytes())
                .map_err(|e| op_err(format!("device {}: {name}: {e}", dx.dev)))?;
            let blk = repack::mma_block_bytes(w.ty).ok_or_else(|| {
                op_err(format!(
                    "device {}: {name}: {} has no mma layout",
                    dx.dev,
                    w.ty.name()
                ))
            })?;
            // A row's share of its m-tile's blocks (never used as a row stride: the mma
            // kernels address whole m-tiles).
            (b.into(), w.cols.div_ceil(256) * blk / repack::MMA_TILE_ROWS)
        } else if pack {
            let (b, rb) = repack::repack(w.ty, w.rows, w.cols, w.bytes())
                .map_err(|e| op_err(format!("device {}: {name}: {e}", dx.dev)))?;
            (b.into(), rb)
        } else {
            (w.bytes().into(), w.row_bytes())
        };
        let raw = Raw::device(&dx.ctx, bytes.len(), &name)?;
        upload_raw(s, &bytes, &raw, 0, Some(dx.dev))?;
        Ok(DevWeight {
            raw,
            ty: w.ty,
            rows: w.rows,
            cols: w.cols,
            row_bytes,
            packed: pack && !mma,
            mma,
        })
    }

    /// The matrix as launch planning sees it (format, packed).
    pub(super) fn kind(&self) -> MatKind {
        (self.ty, self.packed)
    }

    /// Uploads a matrix that only matvecs read: in the tensor-core layout when `mma` (the
    /// `--mma` setting, resolved) takes the matrix, else packed when its format and shape
    /// take the vectorized kernel. A function of the matrix and the setting alone.
    pub(super) fn upload_mv(
        dx: &Arc<DevCtx>,
        w: &Weight,
        s: &GpuStream,
        mma: MmaSel,
    ) -> BResult<DevWeight> {
        let m = mma.takes(w.ty, w.rows, w.cols);
        DevWeight::upload(dx, w, s, vectorized(w.ty, w.cols), m)
    }
}

pub(super) fn upload_f32(dx: &Arc<DevCtx>, v: &[f32], s: &GpuStream) -> BResult<GpuBuf> {
    let b = alloc_zeroed_on(dx, v.len(), s)?;
    upload_slice(s, v, &b, 0)?;
    Ok(b)
}

pub(super) struct DevLayer {
    pub(super) attn_norm: GpuBuf,
    pub(super) wq: DevWeight,
    pub(super) wk: DevWeight,
    pub(super) wv: DevWeight,
    pub(super) wo: DevWeight,
    pub(super) bq: Option<GpuBuf>,
    pub(super) bk: Option<GpuBuf>,
    pub(super) bv: Option<GpuBuf>,
    pub(super) q_norm: Option<GpuBuf>,
    pub(super) k_norm: Option<GpuBuf>,
    pub(super) post_attn_norm: Option<GpuBuf>,
    pub(super) ffn_norm: GpuBuf,
    pub(super) gate: DevWeight,
    pub(super) up: DevWeight,
    pub(super) down: DevWeight,
    pub(super) post_ffn_norm: Option<GpuBuf>,
}

impl DevLayer {
    /// Uploads layer `lw`'s weights on `s`, each matrix in the layout its format, shape and
    /// `mma` take (`DevWeight::upload_mv`), gate and up in one shared layout.
    pub(super) fn upload(
        dx: &Arc<DevCtx>,
        lw: &LayerWeights,
        s: &GpuStream,
        mma: MmaSel,
    ) -> BResult<DevLayer> {
        let opt = |w: &Option<Vec<f32>>| -> BResult<Option<GpuBuf>> {
            w.as_ref().map(|w| upload_f32(dx, w, s)).transpose()
        };
        // gate|up is one launch: both vectorized (one format) or both byte-wise, or with
        // --mma both in the tensor-core layout (one format, one shape).
        let gu = lw.gate.ty == lw.up.ty
            && vectorized(lw.gate.ty, lw.gate.cols)
            && vectorized(lw.up.ty, lw.up.cols);
        let gu_mma = lw.gate.ty == lw.up.ty
            && lw.gate.rows == lw.up.rows
            && mma.takes(lw.gate.ty, lw.gate.rows, lw.gate.cols)
            && mma.takes(lw.up.ty, lw.up.rows, lw.up.cols);
        Ok(DevLayer {
            attn_norm: upload_f32(dx, &lw.attn_norm, s)?,
            wq: DevWeight::upload_mv(dx, &lw.wq, s, mma)?,
            wk: DevWeight::upload_mv(dx, &lw.wk, s, mma)?,
            wv: DevWeight::upload_mv(dx, &lw.wv, s, mma)?,
            wo: DevWeight::upload_mv(dx, &lw.wo, s, mma)?,
            bq: opt(&lw.bq)?,
            bk: opt(&lw.bk)?,
            bv: opt(&lw.bv)?,
            q_norm: opt(&lw.q_norm)?,
            k_norm: opt(&lw.k_norm)?,
            post_attn_norm: opt(&lw.post_attn_norm)?,
            ffn_norm: upload_f32(dx, &lw.ffn_norm, s)?,
            gate: DevWeight::upload(dx, &lw.gate, s, gu, gu_mma)?,
            up: DevWeight::upload(dx, &lw.up, s, gu, gu_mma)?,
            down: DevWeight::upload_mv(dx, &lw.down, s, mma)?,
            post_ffn_norm: opt(&lw.post_ffn_norm)?,
        })
    }
}
