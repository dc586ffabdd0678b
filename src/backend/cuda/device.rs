//! One device: its context (the primary context, opened once by `open_device`), its
//! properties (SMs, shared memory limits, compute capability), its kernels, the launch of a
//! kernel (`DevCtx::launch`, programmatic dependent launch on sm_90+) and the launch
//! counter, and the device probes of the backend (peer access, memory bandwidth). Laws it
//! serves: cudarc's automatic event tracking is disabled on the context before any stream,
//! event or buffer exists on it, so nothing hidden orders two streams; programmatic
//! dependent launch relaxes the order of two kernels of one stream only (each engine kernel
//! waits in `pdl_wait()` before it touches anything but read-only weights), never across an
//! event, copy or record; the launch counter counts kernels run, graphs on or off.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaModule};

use super::mma::MMA_KERNELS;
use super::nvrtc::{
    build_image, load_image, whole_source, Image, Modules, Target, ATT_SLOTS, KERNELS, MAIN_HEAD,
    MV_KINDS, MV_MAX_TILE,
};
use super::{drv, mem, op_err, GpuStream};
use crate::backend::BResult;

/// One device: its context, the compiled module and its kernels.
pub struct DevCtx {
    pub(crate) dev: usize,
    pub(crate) ctx: Arc<CudaContext>,
    /// The main module and its kernels, loaded at the first `func` (Err: why it failed, for
    /// every later call).
    pub(super) main: OnceLock<Result<MainModule, String>>,
    /// The main module's build, started by `open_device` on a thread of its own so that it
    /// runs beside the engines' module builds; `func` joins it once.
    pub(super) main_build: Mutex<Option<MainBuild>>,
    /// Kernels launched on this device so far (bookkeeping for `bench`, never hashed).
    pub(super) launches: AtomicU64,
    /// Streaming multiprocessors (sizes the matvec grids; never the arithmetic).
    pub(crate) sms: usize,
    /// Dynamic shared memory a matvec block may use to stage its input tile (the matvec
    /// kernels are opted in to it at load): at most 64 KiB, and 2 KiB under the device's
    /// per-block opt-in limit, which leaves room for the kernels' static arrays.
    pub(crate) stage_max: usize,
    /// Dynamic shared memory a block may use at most (the device's opt-in limit, less 2 KiB
    /// for static arrays): the vectorized matvec's staged tile plus its run sums.
    pub(crate) smem_max: usize,
    /// Engine kernels are launched with programmatic dependent launch (sm_90 and later,
    /// unless `--pdl off`): see `launch`.
    pub(crate) pdl: bool,
    /// NVRTC's virtual architecture for this device (None: its default).
    pub(super) arch: Option<&'static str>,
    /// The real architecture NVRTC compiles CUBIN for when modules are cached (None: PTX).
    pub(super) sm: Option<&'static str>,
    /// Compute capability (major, minor).
    pub(super) cc: (i32, i32),
    /// How modules are obtained (the module cache, shared by every device of the backend).
    pub(super) modules: Arc<Modules>,
    /// Matvec kernels by (kind, row tile): index kind * MV_MAX_TILE + tile - 1, compiled by
    /// `prepare_mv` on first need (one kernel, or for a vectorized kind `MVQ_KERNELS`).
    pub(super) mv: Vec<OnceLock<Vec<CudaFunction>>>,
    /// Serializes `prepare_mv` (two engines on one device compile a kind once).
    pub(super) mv_build: Mutex<()>,
    /// The mma kernels (`MMA_KERNELS`, a module each), compiled by `prepare_modules` on
    /// first need.
    pub(super) mma: Vec<OnceLock<CudaFunction>>,
    /// The attention kernels by slot (`nvrtc::att_slot`, a module each), compiled by
    /// `prepare_modules` on first need.
    pub(super) att: Vec<OnceLock<CudaFunction>>,
}

/// The main module, loaded, with its kernels by name.
pub(super) struct MainModule {
    pub(super) _module: Arc<CudaModule>,
    pub(super) funcs: HashMap<&'static str, CudaFunction>,
}

/// The main module's build in flight: its thread and when it started.
pub(super) struct MainBuild {
    pub(super) thread: std::thread::JoinHandle<BResult<Image>>,
    pub(super) started: Instant,
}

impl DevCtx {
    /// Counts one kernel launch (called after each successful launch).
    pub(crate) fn count_launch(&self) {
        self.launches.fetch_add(1, Ordering::Relaxed);
    }

    /// Graph bookkeeping: `n` kernels ran by one graph replay (added), or `n` launches that
    /// were captured into a graph rather than run (taken back), so `launches` keeps
    /// counting kernels run, graphs on or off.
    pub(crate) fn count_kernels(&self, n: u64, ran: bool) {
        if ran {
            self.launches.fetch_add(n, Ordering::Relaxed);
        } else {
            self.launches.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Enqueues kernel `f` on `s` (cuLaunchKernelEx). With `pdl`, the launch may begin while
    /// the kernel before it on the same stream still runs (programmatic stream
    /// serialization): every engine kernel calls `pdl_trigger()` first (kernels/common.cu),
    /// which lets its successor launch, and `pdl_wait()` (griddepcontrol.wait: the
    /// predecessor grid has completed and its writes are visible) before it reads or writes
    /// anything but read-only weights. The relaxation is between two kernels of one stream
    /// only: an event wait, copy or record between them serializes as always, so the
    /// runtime's cross-stream events keep every law they serve.
    ///
    /// # Safety
    /// `params[i]` points to a value of exactly the type of the kernel's i-th parameter, for
    /// every parameter, and the kernel's accesses stay inside the buffers those values
    /// describe; with `pdl`, `f` is an engine kernel (it begins with `pdl_begin()`).
    pub(crate) unsafe fn launch(
        &self,
        s: &GpuStream,
        f: &CudaFunction,
        cfg: &cudarc::driver::LaunchConfig,
        params: &mut [*mut std::ffi::c_void],
    ) -> Result<(), String> {
        // SAFETY: the caller's contract is this function's (see # Safety).
        unsafe { self.launch_with(s, f, cfg, params, self.pdl) }
    }

    /// `launch` with programmatic dependent launch as `pdl` says (`false` whatever the
    /// device's setting: the kernel starts only after every earlier operation of `s` has
    /// completed, which is what `rowpos_set` needs: the previous step's readers of its
    /// buffer are done, write after read).
    ///
    /// # Safety
    /// As `launch`.
    pub(crate) unsafe fn launch_with(
        &self,
        s: &GpuStream,
        f: &CudaFunction,
        cfg: &cudarc::driver::LaunchConfig,
        params: &mut [*mut std::ffi::c_void],
        pdl: bool,
    ) -> Result<(), String> {
        self.ctx.bind_to_thread().map_err(|e| e.to_string())?;
        // SAFETY: CUlaunchAttribute is a plain C struct (an id and a union of integers and
        // arrays); all-zero bytes are a valid value of it.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let lc = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: s.s.cu_stream(),
            attrs: &mut attr,
            numAttrs: u32::from(pdl),
        };
        // SAFETY: `lc` and `attr` outlive the call (the driver copies them), `f` belongs to
        // this context's module, the stream to this context; the parameter contract is the
        // caller's (see # Safety).
        unsafe {
            sys::cuLaunchKernelEx(
                &lc,
                f.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| e.to_string())?;
        self.count_launch();
        Ok(())
    }
}

pub(super) fn open_device(dev: usize, pdl: bool, modules: Arc<Modules>) -> BResult<DevCtx> {
    let ctx = CudaContext::new(dev)
        .map_err(|e| op_err(format!("device {dev}: creating the context: {e}")))?;
    // SAFETY: called right after the context is created, before any stream, event or
    // buffer exists on it; this backend orders streams only with explicit events (the
    // runtime's) and owns its memory raw (mem.rs), which is the contract the disabled
    // tracking hands to us.
    unsafe { ctx.disable_event_tracking() };
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| op_err(format!("device {dev}: compute capability: {e}")))?;
    // (virtual, real) architecture: PTX for the first, CUBIN for the second.
    let (arch, sm): (Option<&'static str>, Option<&'static str>) = match (major, minor) {
        (7, 0) => (Some("compute_70"), Some("sm_70")),
        (7, 5) => (Some("compute_75"), Some("sm_75")),
        (8, 0) => (Some("compute_80"), Some("sm_80")),
        (8, 6) => (Some("compute_86"), Some("sm_86")),
        (8, 9) => (Some("compute_89"), Some("sm_89")),
        (9, 0) => (Some("compute_90"), Some("sm_90")),
        (10, 0) => (Some("compute_100"), Some("sm_100")),
        (12, 0) => (Some("compute_120"), Some("sm_120")),
        _ => (None, None), // NVRTC's default virtual arch; the driver JITs it forward
    };
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| op_err(format!("device {dev}: multiprocessor count: {e}")))?
        .max(1) as usize;
    let optin = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(|e| op_err(format!("device {dev}: shared memory per block: {e}")))?
        .max(0) as usize;
    let stage_max = (64 * 1024).min(optin.saturating_sub(2 * 1024));
    let src = whole_source(MAIN_HEAD);
    let target = Target {
        cc: (major, minor),
        arch,
        sm,
    };
    // The main module compiles on a thread of its own while the engines' modules build
    // (`prepare_modules`); the first `func` waits for it and loads it.
    let started = Instant::now();
    let what = format!("device {dev}: main module");
    let thread = {
        let modules = modules.clone();
        std::thread::Builder::new()
            .name(format!("nvrtc-main-{dev}"))
            .spawn(move || build_image(&modules, target, &src, &what))
            .map_err(|e| op_err(format!("device {dev}: starting the main module build: {e}")))?
    };
    Ok(DevCtx {
        dev,
        ctx,
        main: OnceLock::new(),
        main_build: Mutex::new(Some(MainBuild { thread, started })),
        launches: AtomicU64::new(0),
        sms,
        stage_max,
        smem_max: optin.saturating_sub(2 * 1024),
        pdl: pdl && major >= 9,
        arch,
        sm,
        cc: (major, minor),
        modules,
        mv: (0..MV_KINDS * MV_MAX_TILE)
            .map(|_| OnceLock::new())
            .collect(),
        mv_build: Mutex::new(()),
        mma: (0..MMA_KERNELS.len()).map(|_| OnceLock::new()).collect(),
        att: (0..ATT_SLOTS).map(|_| OnceLock::new()).collect(),
    })
}

impl DevCtx {
    /// What this device's modules are compiled for.
    pub(super) fn target(&self) -> Target {
        Target {
            cc: self.cc,
            arch: self.arch,
            sm: self.sm,
        }
    }

    /// The main module: joins its build (started by `open_device`) and loads it on first
    /// use; a failure is kept and returned to every later caller.
    pub(super) fn main_module(&self) -> BResult<&MainModule> {
        if let Some(m) = self.main.get() {
            return m.as_ref().map_err(|e| op_err(e.clone()));
        }
        let dev = self.dev;
        let mut build = self
            .main_build
            .lock()
            .map_err(|_| op_err(format!("device {dev}: main module build lock poisoned")))?;
        if self.main.get().is_none() {
            let loaded = match build.take() {
                None => Err(format!("device {dev}: the main module build was lost")),
                Some(b) => self.load_main(b),
            };
            let _ = self.main.set(loaded);
        }
        drop(build);
        match self.main.get() {
            Some(m) => m.as_ref().map_err(|e| op_err(e.clone())),
            None => Err(op_err(format!("device {dev}: main module not loaded"))),
        }
    }

    fn load_main(&self, b: MainBuild) -> Result<MainModule, String> {
        let dev = self.dev;
        let what = format!("device {dev}: main module");
        let hits0 = self.modules.stats().hits;
        let image = b
            .thread
            .join()
            .map_err(|_| format!("{what}: build thread panicked"))?
            .map_err(|e| e.to_string())?;
        let module =
            load_image(&self.ctx, &self.modules, image, &what).map_err(|e| e.to_string())?;
        let mut funcs = HashMap::new();
        for name in KERNELS {
            let f = module
                .load_function(name)
                .map_err(|e| format!("device {dev}: kernel {name}: {e}"))?;
            funcs.insert(name, f);
        }
        let how = if self.modules.stats().hits > hits0 {
            "read from the module cache"
        } else {
            "built (NVRTC or module cache)"
        };
        diag!(
            "cuda: device {dev} (sm_{}{}): main module {how}, ready {:.0} ms after the device opened",
            self.cc.0,
            self.cc.1,
            b.started.elapsed().as_secs_f64() * 1e3
        );
        if std::env::var_os("PPN_CUDA_PROF").is_some() {
            // Diagnostics: registers, spills and residency of the main module's hot kernels.
            for name in ["attention", "attention_early"] {
                if let Some(f) = funcs.get(name) {
                    errln!(
                        "cuda prof: {name}: {:?} regs, {:?} local bytes, {:?} blocks of 256 per SM",
                        f.num_regs(),
                        f.local_size_bytes(),
                        f.occupancy_max_active_blocks_per_multiprocessor(256, 0, None)
                    );
                }
            }
        }
        Ok(MainModule {
            _module: module,
            funcs,
        })
    }
}

/// Device memory bandwidth in GB/s (bytes read + bytes written per second): the best of five
/// 256 MiB device-to-device copies on a private stream, timed by GPU events. A one-off
/// measurement for `bench`, outside every per-step path (the event waits below block only
/// on this private stream's work).
pub(super) fn measure_bandwidth(dx: &Arc<DevCtx>) -> BResult<f64> {
    const BYTES: usize = 256 << 20;
    let dev = dx.dev;
    let s = drv(dx.ctx.new_stream(), || {
        format!("device {dev}: bandwidth stream")
    })?;
    let a = mem::Raw::device(&dx.ctx, BYTES, "bandwidth source")?;
    let b = mem::Raw::device(&dx.ctx, BYTES, "bandwidth destination")?;
    let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let e0 = drv(dx.ctx.new_event(timing), || {
        format!("device {dev}: timing event")
    })?;
    let e1 = drv(dx.ctx.new_event(timing), || {
        format!("device {dev}: timing event")
    })?;
    drv(dx.ctx.bind_to_thread(), || {
        format!("device {dev}: bind context")
    })?;
    // SAFETY: `a` is a live allocation of BYTES bytes; the memset writes BYTES / 4 words.
    let r = unsafe { sys::cuMemsetD32Async(a.ptr(), 0, BYTES / 4, s.cu_stream()) }.result();
    drv(r, || format!("device {dev}: bandwidth memset"))?;
    let mut best = f64::INFINITY;
    for i in 0..6 {
        drv(e0.record(&s), || format!("device {dev}: timing record"))?;
        // SAFETY: both are live device allocations of BYTES bytes, not overlapping; the
        // copy runs on the private stream `s`, and both buffers outlive it (the elapsed
        // query below waits for e1, recorded after the copy).
        let r = unsafe { sys::cuMemcpyAsync(b.ptr(), a.ptr(), BYTES, s.cu_stream()) }.result();
        drv(r, || format!("device {dev}: bandwidth copy"))?;
        drv(e1.record(&s), || format!("device {dev}: timing record"))?;
        let ms = drv(e0.elapsed_ms(&e1), || format!("device {dev}: timing"))? as f64;
        if i > 0 && ms > 0.0 {
            best = best.min(ms);
        }
    }
    if !best.is_finite() {
        return Err(op_err(format!(
            "device {dev}: bandwidth copies took no time"
        )));
    }
    Ok(2.0 * BYTES as f64 / (best * 1e-3) / 1e9)
}

/// Whether device `a` can read and write device `b`'s memory directly (false on any error:
/// the caller then refuses a peer boundary, naming the pair).
pub(super) fn can_access_peer(a: usize, b: usize) -> bool {
    let (Ok(da), Ok(db)) = (result::device::get(a as i32), result::device::get(b as i32)) else {
        return false;
    };
    let mut can: std::ffi::c_int = 0;
    // SAFETY: `can` is a valid out-pointer; da/db are device handles from cuDeviceGet.
    let rc = unsafe { sys::cuDeviceCanAccessPeer(&mut can, da, db) };
    rc == sys::cudaError_enum::CUDA_SUCCESS && can != 0
}
