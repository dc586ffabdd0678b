//! The kernel parameter of every matvec and tensor-core launch: `struct MvMat` and `struct
//! MvArgs` of kernels/matvec.cu, laid out as the CUDA structs (`#[repr(C)]`, checked against
//! the compiled source by the backend's tests). Its own module because both launch families
//! (engine/matvec.rs, engine/mma.rs) fill it, and neither owns the other.

/// One matrix of a fused matvec launch (`struct MvMat` in kernels/matvec.cu).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct MvMat {
    pub(super) w: u64,
    pub(super) row_bytes: u64,
    pub(super) y: u64,
    pub(super) n_out: i32,
    pub(super) fmt: i32,
}

/// A fused matvec launch (`struct MvArgs` in kernels/matvec.cu; the modes are described
/// there).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct MvArgs {
    pub(super) m: [MvMat; 3],
    pub(super) x: u64,
    pub(super) norm: u64,
    pub(super) n_mat: i32,
    pub(super) n_in: i32,
    pub(super) rows: i32,
    pub(super) mode: i32,
    pub(super) act: i32,
    pub(super) eps: f32,
    /// `--fault row-count-order` on a launch of a step with 2+ rows (kernels/matvec.cu
    /// plant_pair); 0 in every clean run.
    pub(super) plant: i32,
    /// gemma3's post-norm add folded in (`PreAdd`; kernels/mvq.cu mvq_pre_add): the engine's
    /// o, the post-norm weights, where block (0, 0) writes the row. 0 unless `pre_fuses`.
    /// Only the MVQ_PRE modules declare these three; every other kernel's MvArgs is the
    /// prefix before them, and the driver copies a parameter's size from the kernel's image.
    pub(super) res_o: u64,
    pub(super) res_w: u64,
    pub(super) res_out: u64,
}

/// Bytes of the MvArgs kernel parameter (the CUDA struct of an MVQ_PRE module must have the
/// same size; the others end before `res_o`).
#[cfg(test)]
pub(in crate::backend::cuda) fn mv_args_bytes() -> usize {
    std::mem::size_of::<MvArgs>()
}

/// Bytes of MvArgs before `res_o`: the whole parameter of a module without MVQ_PRE.
#[cfg(test)]
pub(in crate::backend::cuda) fn mv_args_prefix_bytes() -> usize {
    std::mem::offset_of!(MvArgs, res_o)
}
