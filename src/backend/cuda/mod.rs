//! The CUDA backend: the `Backend`/`Engine` traits on NVIDIA GPUs through the driver API
//! (cudarc, loaded at run time) and NVRTC-compiled kernels.
//!
//! Rules that hold in this module:
//! - The runtime's explicit events are the ONLY cross-stream ordering. cudarc's automatic
//!   per-buffer event tracking is disabled on every context before any stream or buffer
//!   exists, and memory is raw driver allocations (see `mem`), so nothing hidden can order
//!   two streams and the fault flags (negative controls) keep their power to FAIL.
//! - One context per device (the primary context, created lazily and cached by `CudaBackend`: two
//!   `CudaContext::new(0)` are the same CUcontext behind different `Arc`s), and one NVRTC
//!   module per context, compiled once, or read from the on-disk module cache (`modcache`)
//!   when an earlier process compiled it for the same source, options, device and toolchain.
//! - Every hashed value comes from a fixed-order reduction that depends only on vector
//!   lengths (kernels/*.cu say the order); no atomics; a [B, .] launch only adds grid rows.
//! - `unsafe` lives only in this module tree; every block has a `// SAFETY:` line.
//! - Every error names the device, the operation and (in the engine) the stage; the runtime
//!   adds layer/step context around engine calls. An NVRTC failure keeps the compile log.
//!
//! Files, one concern each: `builder` (`CudaBackend`, its settings, the device table),
//! `backend` (the `Backend` impl), `device` (a device's context, properties, kernel launch),
//! `stream` (streams and events), `mem` (allocations, fills, uploads), `nvrtc` (kernel
//! sources, NVRTC, module loading; `modcache` the on-disk cache), `mma` (the tensor-core
//! policy and kernel set), `engine` (the per-stage engine and KV cache), `nccl` (the NCCL
//! link), `tracing` (`--trace`).

mod backend;
mod builder;
mod device;
mod engine;
mod mem;
mod mma;
pub mod modcache;
pub mod nccl;
mod nvrtc;
mod stream;
mod tracing;

pub(crate) use builder::prof_enabled;
pub use builder::CudaBackend;
pub use device::DevCtx;
pub(crate) use engine::cuda_can_run;
pub use engine::{CudaCache, CudaEngine};
pub(crate) use mem::{alloc_zeroed_on, upload_raw, upload_slice, zero_fill};
pub use mem::{GpuBuf, PinnedF32};
pub use mma::{
    mma_format_types, mma_note, MmaMode, MmaSel, MMA_AUTO_MIN_BATCH, MMA_AUTO_MIN_EMBD,
    MMA_AUTO_MIN_ROWS,
};
pub(crate) use nvrtc::{mvq_mix_kind, MVQ_BASE, MVQ_DENSE, MVQ_PRE_BASE, MV_GENERIC, MV_MAX_TILE};
pub use stream::{queues_for_fault_holds, GpuEvent, GpuStream};

use cudarc::driver::result;

use super::{BResult, BackendError};

pub(crate) fn op_err(what: String) -> BackendError {
    BackendError::Op {
        backend: "cuda",
        what,
    }
}

fn drv<T>(r: Result<T, result::DriverError>, what: impl FnOnce() -> String) -> BResult<T> {
    r.map_err(|e| op_err(format!("{}: {e}", what())))
}

#[cfg(test)]
mod tests;
