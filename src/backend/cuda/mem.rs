//! CUDA memory: raw driver allocations owned by Rust values.
//!
//! Rule that holds here: ordering between streams comes ONLY from the runtime's events.
//! Allocations are plain `cuMemAlloc` (valid at once on every stream); the zero-fill that
//! defines their contents is a `cuMemsetD32Async` on the stream the caller names, so a
//! reader on another stream that is not ordered behind it really can see stale bytes (as the
//! CPU backend's poison shows). Host staging is pinned (`cuMemHostAlloc`, portable and
//! mapped, so under unified addressing its pointer is a valid copy operand on any stream);
//! it is zeroed on the host before the allocation is returned, i.e. before any stream can
//! reference it, which is stronger than "zero-filled on `s`".
//!
//! Freeing: a value is dropped only when the host no longer refers to it, but a stream may
//! still have queued work that reads it. Drop therefore synchronizes the owning context
//! before freeing (drops are rare: teardown and a boundary slot's growth), so no queued
//! operation ever touches freed memory.
//!
//! The helpers at the end (`alloc_zeroed_on`, `zero_fill`, `upload_slice`, `upload_raw`) are
//! how the engine and the backend enqueue a fill or an upload: always on the stream named,
//! after that stream's jitter, never on another.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use super::{drv, op_err, DevCtx, GpuStream};
use crate::backend::BResult;

/// One raw allocation: device memory, or pinned host memory.
pub struct Raw {
    ptr: u64,
    bytes: usize,
    host: bool,
    ctx: Arc<CudaContext>,
}

impl Raw {
    /// `bytes` of device memory on `ctx`'s device (at least 4 bytes, so a zero-length
    /// buffer still has a distinct valid pointer). Contents undefined until filled.
    pub fn device(ctx: &Arc<CudaContext>, bytes: usize, what: &str) -> BResult<Raw> {
        ctx.bind_to_thread()
            .map_err(|e| op_err(format!("{what}: bind context: {e}")))?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: cuMemAlloc writes one device pointer into `ptr`, a valid local; the
        // context is current on this thread (bound above).
        let r = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(4)) }.result();
        r.map_err(|e| {
            op_err(format!(
                "{what}: cuMemAlloc of {bytes} bytes on device {}: {e}",
                ctx.ordinal()
            ))
        })?;
        Ok(Raw {
            ptr,
            bytes,
            host: false,
            ctx: ctx.clone(),
        })
    }

    /// `bytes` of pinned, portable, mapped host memory, zeroed on the host.
    pub fn host(ctx: &Arc<CudaContext>, bytes: usize, what: &str) -> BResult<Raw> {
        ctx.bind_to_thread()
            .map_err(|e| op_err(format!("{what}: bind context: {e}")))?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: cuMemHostAlloc writes one host pointer into `p`, a valid local.
        let r = unsafe { sys::cuMemHostAlloc(&mut p, bytes.max(4), flags) }.result();
        r.map_err(|e| op_err(format!("{what}: cuMemHostAlloc of {bytes} bytes: {e}")))?;
        // SAFETY: `p` points to at least `bytes.max(4)` freshly allocated host bytes that
        // nothing else references yet (no stream has been handed the pointer).
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes.max(4)) };
        Ok(Raw {
            ptr: p as u64,
            bytes,
            host: true,
            ctx: ctx.clone(),
        })
    }

    /// The address (device pointer; for host memory the host pointer, which unified
    /// addressing makes a valid copy operand).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_host(&self) -> bool {
        self.host
    }

    /// The device this allocation lives on as the driver records it (None: pinned host
    /// memory): a measurement of where the bytes are, not of where they were asked for.
    pub fn device_ordinal(&self) -> BResult<Option<usize>> {
        if self.host {
            return Ok(None);
        }
        let mut ord: i32 = -1;
        // SAFETY: cuPointerGetAttribute writes one int (the DEVICE_ORDINAL attribute's type)
        // into `ord`, a valid local; the pointer is this live allocation's base.
        let r = unsafe {
            sys::cuPointerGetAttribute(
                &mut ord as *mut i32 as *mut std::ffi::c_void,
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                self.ptr,
            )
        }
        .result();
        r.map_err(|e| op_err(format!("device of allocation {:#x}: {e}", self.ptr)))?;
        usize::try_from(ord).map(Some).map_err(|_| {
            op_err(format!(
                "device of allocation {:#x}: ordinal {ord}",
                self.ptr
            ))
        })
    }

    /// Adds this allocation's bytes to `list` under the device the driver says it lives
    /// on (weights and buffers alike: residency is measured per allocation).
    pub fn tally(&self, list: &mut Vec<(Option<usize>, u64)>) -> BResult<()> {
        crate::backend::Residency::tally(list, self.device_ordinal()?, self.bytes as u64);
        Ok(())
    }

    /// Reads `out.len()` f32 from host memory at byte offset `off`. The caller has ordered
    /// every stream that writes this memory before the read (a stream synchronize).
    pub fn read_host(&self, off: usize, out: &mut [f32]) -> BResult<()> {
        let n = std::mem::size_of_val(out);
        if !self.host || off.checked_add(n).is_none_or(|e| e > self.bytes) {
            return Err(op_err(format!(
                "host read of {n} bytes at {off} from a {} buffer of {} bytes",
                if self.host { "host" } else { "device" },
                self.bytes
            )));
        }
        // SAFETY: the range [off, off + n) lies inside this live pinned host allocation
        // (checked above); f32 has no invalid bit patterns; the caller synchronized the
        // streams that write it, so no DMA is in flight on these bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.ptr as usize + off) as *const u8,
                out.as_mut_ptr() as *mut u8,
                n,
            )
        };
        Ok(())
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // Errors here cannot be returned; a sticky context error has already been (or will
        // be) reported by the synchronize/download that observed it.
        let _ = self.ctx.bind_to_thread();
        let _ = self.ctx.synchronize();
        // SAFETY: the pointer came from cuMemAlloc / cuMemHostAlloc on this context and is
        // freed exactly once; the context synchronize above drained every stream that could
        // still read or write it, and the host holds no other reference (we are in Drop).
        unsafe {
            if self.host {
                let _ = sys::cuMemFreeHost(self.ptr as *mut std::ffi::c_void);
            } else {
                let _ = sys::cuMemFree_v2(self.ptr);
            }
        }
    }
}

/// The backend's buffer of f32 values: device memory on `dev`, or host staging (dev None).
pub struct GpuBuf {
    pub(super) raw: Raw,
    pub(super) len: usize,
    pub(super) dev: Option<usize>,
}

impl GpuBuf {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device this buffer lives on (None: host staging).
    pub fn device(&self) -> Option<usize> {
        self.dev
    }

    /// Device address of element `i` (bounds checked by the caller).
    pub(super) fn at(&self, i: usize) -> u64 {
        self.raw.ptr() + 4 * i as u64
    }
}

/// Bounds check at enqueue time, naming the values.
pub fn check_range(what: &str, b: &GpuBuf, off: usize, n: usize) -> BResult<()> {
    match off.checked_add(n) {
        Some(end) if end <= b.len => Ok(()),
        _ => Err(op_err(format!(
            "{what}: range {off}..{off}+{n} outside buffer of {} values",
            b.len
        ))),
    }
}

/// Pinned host memory a download lands in (`Backend::download_into`): allocated once per
/// output ring slot, so the DMA writes it directly and the host reads it without a copy.
/// The only writer is a DMA enqueued by `download_into`, which holds `&mut` of this value
/// from the enqueue until after the synchronize that finishes it; shared borrows (the lent
/// slice) therefore never overlap a write in flight.
pub struct PinnedF32 {
    raw: Raw,
    len: usize,
}

impl PinnedF32 {
    pub fn new(ctx: &Arc<CudaContext>, n: usize, what: &str) -> BResult<PinnedF32> {
        let bytes = n
            .checked_mul(4)
            .ok_or_else(|| op_err(format!("{what}: {n} values overflow")))?;
        Ok(PinnedF32 {
            raw: Raw::host(ctx, bytes, what)?,
            len: n,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The address a DMA into this memory targets (the caller holds `&mut self`).
    pub(super) fn dma_target(&mut self) -> *mut std::ffi::c_void {
        self.raw.ptr() as *mut std::ffi::c_void
    }

    /// The first `n` values (bounds checked by the caller: n <= len).
    pub(super) fn slice(&self, n: usize) -> &[f32] {
        let n = n.min(self.len);
        // SAFETY: the pinned allocation is live for as long as `self` is borrowed, holds at
        // least 4 * len bytes (cuMemHostAlloc of at least that size), and is page aligned,
        // so aligned for f32, whose every bit pattern is valid. No DMA writes it while this
        // borrow lives: DMAs into it are enqueued only through `&mut self` (`dma_target`)
        // by `download_into`, which synchronizes the stream before lending a slice.
        unsafe { std::slice::from_raw_parts(self.raw.ptr() as *const f32, n) }
    }

    /// The first `n` values for a host-side write (a host-staging source); same
    /// conditions as `slice`, with `&mut self` excluding every other borrow.
    pub(super) fn slice_mut(&mut self, n: usize) -> &mut [f32] {
        let n = n.min(self.len);
        // SAFETY: as in `slice`; `&mut self` makes this the only reference into the memory,
        // and the caller synchronized the stream of any DMA that targeted it before.
        unsafe { std::slice::from_raw_parts_mut(self.raw.ptr() as *mut f32, n) }
    }
}

/// `n` f32 on `dx`'s device; the zero-fill is a cuMemsetD32Async enqueued on `s`.
pub(crate) fn alloc_zeroed_on(dx: &Arc<DevCtx>, n: usize, s: &GpuStream) -> BResult<GpuBuf> {
    let bytes = n
        .checked_mul(4)
        .ok_or_else(|| op_err(format!("device {}: {n} values overflow", dx.dev)))?;
    let raw = Raw::device(&dx.ctx, bytes, &format!("alloc on {}", s.label()))?;
    let b = GpuBuf {
        raw,
        len: n,
        dev: Some(dx.dev),
    };
    zero_fill(&b, s)?;
    Ok(b)
}

/// Enqueue on `s` a zero-fill of every value of `b` (a fresh allocation, a cache reset).
pub(crate) fn zero_fill(b: &GpuBuf, s: &GpuStream) -> BResult<()> {
    let n = b.len;
    if n > 0 {
        s.jitter()?;
        drv(s.dx.ctx.bind_to_thread(), || {
            format!("zero-fill on {}: bind context", s.label())
        })?;
        // SAFETY: `b.raw` is a live allocation of at least 4 * n bytes (a GpuBuf of n
        // values); the memset writes exactly n 32-bit words of it, in `s`'s order.
        let r = unsafe { sys::cuMemsetD32Async(b.raw.ptr(), 0, n, s.s.cu_stream()) }.result();
        drv(r, || {
            format!("zero-fill of {n} values on stream {}", s.label())
        })?;
    }
    Ok(())
}

/// Enqueue a host-to-device copy of `host` into `dst[off..]` on `s`.
///
/// The source is pageable host memory: per the CUDA driver's documented behaviour for
/// pageable sources, cuMemcpyHtoDAsync returns only after the bytes were copied into driver
/// staging memory, so the caller may free `host` as soon as this returns; the DMA into
/// `dst` itself happens in `s`'s order.
pub(crate) fn upload_slice<T: Copy>(
    s: &GpuStream,
    host: &[T],
    dst: &GpuBuf,
    off: usize,
) -> BResult<()> {
    upload_raw(s, host, &dst.raw, 4 * off, dst.device())
}

pub(crate) fn upload_raw<T: Copy>(
    s: &GpuStream,
    host: &[T],
    dst: &Raw,
    byte_off: usize,
    dev: Option<usize>,
) -> BResult<()> {
    let bytes = std::mem::size_of_val(host);
    if dst.is_host() || dev.is_none() {
        return Err(op_err(format!(
            "upload on {}: destination is host staging (uploads go to device memory)",
            s.label()
        )));
    }
    if byte_off.checked_add(bytes).is_none_or(|e| e > dst.bytes()) {
        return Err(op_err(format!(
            "upload on {}: {bytes} bytes at {byte_off} outside a buffer of {} bytes",
            s.label(),
            dst.bytes()
        )));
    }
    if bytes == 0 {
        return Ok(());
    }
    drv(s.dx.ctx.bind_to_thread(), || {
        format!("upload on {}: bind context", s.label())
    })?;
    // SAFETY: the destination range is inside a live device allocation (checked above);
    // `host` is a valid slice of `bytes` bytes for the duration of the call, and the driver
    // stages pageable sources before returning (see the function comment).
    let r = unsafe {
        sys::cuMemcpyHtoDAsync_v2(
            dst.ptr() + byte_off as u64,
            host.as_ptr() as *const std::ffi::c_void,
            bytes,
            s.s.cu_stream(),
        )
    }
    .result();
    drv(r, || {
        format!("upload of {bytes} bytes on stream {}", s.label())
    })
}
