//! The CUDA backend: the `Backend`/`Engine` traits on NVIDIA GPUs through the driver API
//! (cudarc, loaded at run time) and NVRTC-compiled kernels.
//!
//! Rules that hold in this module:
//! - The runtime's explicit events are the ONLY cross-stream ordering. cudarc's automatic
//!   per-buffer event tracking is disabled on every context before any stream or buffer
//!   exists, and memory is raw driver allocations (see `mem`), so nothing hidden can order
//!   two streams and the fault flags (negative controls) keep their power to FAIL.
//! - One context per device (the primary context, created lazily and cached here: two
//!   `CudaContext::new(0)` are the same CUcontext behind different `Arc`s), and one NVRTC
//!   module per context, compiled once, or read from the on-disk module cache (`modcache`)
//!   when an earlier process compiled it for the same source, options, device and toolchain.
//! - Every hashed value comes from a fixed-order reduction that depends only on vector
//!   lengths (kernels/*.cu say the order); no atomics; a [B, .] launch only adds grid rows.
//! - `unsafe` lives only in this module tree; every block has a `// SAFETY:` line.
//! - Every error names the device, the operation and (in the engine) the stage; the runtime
//!   adds layer/step context around engine calls. An NVRTC failure keeps the compile log.

mod engine;
mod mem;
mod mma;
pub mod modcache;
pub mod nccl;
mod tracing;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaModule, PushKernelArg};
use cudarc::nvrtc::Ptx;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use engine::{CudaCache, CudaEngine};
pub use mem::{GpuBuf, PinnedF32};
pub use mma::{mma_note, MmaMode, MmaSel, MMA_AUTO_MIN_EMBD, MMA_AUTO_MIN_ROWS};
use modcache::{ImageKind, Key, KeyParts, ModuleCache, Outcome};

use super::trace::{Piece, Tracer};
use super::{BResult, Backend, BackendError, EngineSpec, Link, Residency};
use crate::model::Model;

/// The kernel sources, one file per op family, concatenated into one NVRTC program (in this
/// order: later files use the helpers of earlier ones).
const SOURCES: [(&str, &str); 8] = [
    ("common.cu", include_str!("kernels/common.cu")),
    ("ffn.cu", include_str!("kernels/ffn.cu")),
    ("matvec.cu", include_str!("kernels/matvec.cu")),
    ("mvq.cu", include_str!("kernels/mvq.cu")),
    ("mma.cu", include_str!("kernels/mma.cu")),
    ("norm.cu", include_str!("kernels/norm.cu")),
    ("attention.cu", include_str!("kernels/attention.cu")),
    ("sched.cu", include_str!("kernels/sched.cu")),
];

/// The kernels of the main module (compiled when a device is opened).
const KERNELS: [&str; 8] = [
    "embed_rows",
    "add_residual",
    "stage_rows",
    "attention",
    "attention_early",
    "attention_rows",
    "spin",
    "rowpos_set",
];

/// The sources of a matvec module (kernels/matvec.cu with its helpers), compiled per (kind,
/// row tile) on first need: one kind per block format (`#define MV_FMT id`) and one generic
/// kind for launches that mix formats (`#define MV_GENERIC`), each module holding one kernel,
/// `mv_tile`, for one row tile (`#define MV_RT rt`, 1..=MV_MAX_TILE). Compiling only the
/// kinds a model uses and the tiles its engines' row counts need keeps a cold start (empty
/// driver JIT cache) short.
/// The vectorized kinds (`MVQ_BASE + format id`, kernels/mvq.cu, weights repacked by
/// crate::quant::repack) add mvq.cu and hold three kernels, one per rows-per-warp variant
/// (`MVQ_KERNELS`).
const MV_SOURCES: [&str; 3] = ["common.cu", "ffn.cu", "matvec.cu"];

/// Matvec module kinds: one per block format id (`engine::fmt_of`, 0..13), then the generic,
/// then the vectorized kind of each format id.
pub(crate) const MV_GENERIC: usize = crate::quant::GgmlType::ALL.len();
pub(crate) const MVQ_BASE: usize = MV_GENERIC + 1;
pub(crate) const MV_KINDS: usize = MVQ_BASE + crate::quant::GgmlType::ALL.len();
/// The kernels of a vectorized module, by weight rows per warp (1, 2, 4).
pub(crate) const MVQ_KERNELS: [&str; 3] = ["mvq_w1", "mvq_w2", "mvq_w4"];
/// The largest matvec row tile (`MV_RT` of a module; kernels/matvec.cu).
pub(crate) const MV_MAX_TILE: usize = 8;
/// The one kernel of every matvec module.
pub(crate) const MV_KERNEL: &str = "mv_tile";

pub(crate) fn op_err(what: String) -> BackendError {
    BackendError::Op {
        backend: "cuda",
        what,
    }
}

/// One device: its context, the compiled module and its kernels.
pub struct DevCtx {
    pub(crate) dev: usize,
    pub(crate) ctx: Arc<CudaContext>,
    /// The main module (None only while `open_device` builds it).
    _module: Option<Arc<CudaModule>>,
    funcs: HashMap<&'static str, CudaFunction>,
    /// Milliseconds the main module took to build for this device (NVRTC + load).
    pub compile_ms: f64,
    /// Kernels launched on this device so far (bookkeeping for `bench`, never hashed).
    launches: AtomicU64,
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
    arch: Option<&'static str>,
    /// The real architecture NVRTC compiles CUBIN for when modules are cached (None: PTX).
    sm: Option<&'static str>,
    /// Compute capability (major, minor).
    cc: (i32, i32),
    /// How modules are obtained (the module cache, shared by every device of the backend).
    modules: Arc<Modules>,
    /// Matvec kernels by (kind, row tile): index kind * MV_MAX_TILE + tile - 1, compiled by
    /// `prepare_mv` on first need (one kernel, or for a vectorized kind `MVQ_KERNELS`).
    mv: Vec<OnceLock<Vec<CudaFunction>>>,
    /// Serializes `prepare_mv` (two engines on one device compile a kind once).
    mv_build: Mutex<()>,
    /// The mma module's kernels (`MMA_KERNELS`), compiled by `prepare_mma` on first need.
    mma: OnceLock<Vec<CudaFunction>>,
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

    /// Where the kernel of (kind, row tile) is kept in `mv`, if both are in range.
    fn mv_slot(kind: usize, tile: usize) -> Option<usize> {
        (kind < MV_KINDS && (1..=MV_MAX_TILE).contains(&tile))
            .then(|| kind * MV_MAX_TILE + tile - 1)
    }

    /// The matvec kernel of `kind` (a format id, or MV_GENERIC) for row tile `tile`;
    /// `prepare_mv` must have compiled it (engines do at build, for every tile their row
    /// counts use).
    pub(crate) fn mv_func(&self, kind: usize, tile: usize) -> BResult<&CudaFunction> {
        self.mv_variant(kind, tile, 0)
    }

    /// Kernel `variant` (index into `MVQ_KERNELS` for a vectorized kind; 0 otherwise) of the
    /// matvec module (kind, tile).
    pub(crate) fn mv_variant(
        &self,
        kind: usize,
        tile: usize,
        variant: usize,
    ) -> BResult<&CudaFunction> {
        Self::mv_slot(kind, tile)
            .and_then(|i| self.mv[i].get())
            .and_then(|v| v.get(variant))
            .ok_or_else(|| {
                op_err(format!(
                    "device {}: matvec module {kind} (kernel {variant}) with row tile {tile} was \
                     not compiled for this engine",
                    self.dev
                ))
            })
    }

    /// Compiles and loads the matvec modules of `need` (kind, row tile) that this device
    /// lacks, each on its own thread (NVRTC and the driver's JIT of one module are
    /// single-threaded).
    pub(crate) fn prepare_mv(&self, need: &[(usize, usize)]) -> BResult<()> {
        let _g = self
            .mv_build
            .lock()
            .map_err(|_| op_err(format!("device {}: matvec build lock poisoned", self.dev)))?;
        let mut todo: Vec<(usize, usize, usize)> = Vec::new();
        for &(k, t) in need {
            let i = Self::mv_slot(k, t).ok_or_else(|| {
                op_err(format!(
                    "device {}: no matvec module {k} with row tile {t} (kinds < {MV_KINDS}, \
                     tiles 1..={MV_MAX_TILE})",
                    self.dev
                ))
            })?;
            if self.mv[i].get().is_none() && !todo.iter().any(|&(j, _, _)| j == i) {
                todo.push((i, k, t));
            }
        }
        let t0 = Instant::now();
        let built: Vec<(usize, BResult<Vec<CudaFunction>>)> = std::thread::scope(|sc| {
            let hs: Vec<_> = todo
                .iter()
                .map(|&(i, k, t)| (i, k, t, sc.spawn(move || self.build_mv(k, t))))
                .collect();
            hs.into_iter()
                .map(|(i, k, t, h)| {
                    let r = h.join().unwrap_or_else(|_| {
                        Err(op_err(format!(
                            "device {}: matvec module {k} tile {t}: build thread panicked",
                            self.dev
                        )))
                    });
                    (i, r)
                })
                .collect()
        });
        for (i, r) in built {
            // A slot is set once: the lock above keeps a second builder out.
            let _ = self.mv[i].set(r?);
        }
        if !todo.is_empty() {
            let names: Vec<String> = todo.iter().map(|&(_, k, t)| format!("{k}/r{t}")).collect();
            eprintln!(
                "cuda: device {}: matvec modules [{}] ready (NVRTC or module cache, + load) in {:.0} ms",
                self.dev,
                names.join(", "),
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        Ok(())
    }

    fn build_mv(&self, kind: usize, tile: usize) -> BResult<Vec<CudaFunction>> {
        let vectorized = kind >= MVQ_BASE;
        let head = if kind == MV_GENERIC {
            format!("#define MV_GENERIC\n#define MV_RT {tile}\n")
        } else if vectorized {
            format!(
                "#define MVQ_FMT {}\n#define MV_RT {tile}\n",
                kind - MVQ_BASE
            )
        } else {
            format!("#define MV_FMT {kind}\n#define MV_RT {tile}\n")
        };
        let extra: &[&str] = if vectorized { &["mvq.cu"] } else { &[] };
        let src = module_source(head, MV_SOURCES.iter().chain(extra));
        let what = format!("device {}: matvec module {kind} tile {tile}", self.dev);
        let module = compile_and_load(self, &src, &what)?;
        let names: &[&str] = if vectorized {
            &MVQ_KERNELS
        } else {
            &[MV_KERNEL]
        };
        let smem = if vectorized {
            self.smem_max
        } else {
            self.stage_max
        };
        names
            .iter()
            .map(|name| load_kernel(&module, &what, name, Some(smem)))
            .collect()
    }

    pub(crate) fn func(&self, name: &str) -> BResult<&CudaFunction> {
        self.funcs.get(name).ok_or_else(|| {
            op_err(format!(
                "device {}: kernel {name} is not in the module",
                self.dev
            ))
        })
    }
}

/// Kernel `name` of `module` (`what` names the module in errors), opted in to `smem` bytes
/// of dynamic shared memory when given; with PPN_CUDA_PROF its registers and spills printed.
fn load_kernel(
    module: &Arc<CudaModule>,
    what: &str,
    name: &str,
    smem: Option<usize>,
) -> BResult<CudaFunction> {
    let f = module
        .load_function(name)
        .map_err(|e| op_err(format!("{what}: kernel {name}: {e}")))?;
    if let Some(smem) = smem {
        f.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )
        .map_err(|e| {
            op_err(format!(
                "{what}: kernel {name}: allowing {smem} bytes of dynamic shared memory: {e}"
            ))
        })?;
    }
    if std::env::var_os("PPN_CUDA_PROF").is_some() {
        eprintln!(
            "cuda prof: {what} {name}: {:?} regs, {:?} local bytes",
            f.num_regs(),
            f.local_size_bytes()
        );
    }
    Ok(f)
}

/// A module's program text: its `#define` head, then the named SOURCES in the order given.
fn module_source<'a>(head: String, names: impl Iterator<Item = &'a &'a str>) -> String {
    std::iter::once(head)
        .chain(names.map(|name| {
            let s = SOURCES
                .iter()
                .find(|(n, _)| n == name)
                .map_or("", |(_, s)| s);
            format!("// ---- {name}\n{s}\n")
        }))
        .collect()
}

/// A stream: the cudarc stream, its device and a label for error messages.
pub struct GpuStream {
    pub(crate) s: Arc<cudarc::driver::CudaStream>,
    pub(crate) dx: Arc<DevCtx>,
    label: String,
    /// Schedule explorer: (max delay in ns, this stream's seeded generator).
    jitter: Option<Mutex<(u64, ChaCha8Rng)>>,
    /// `--trace`: this stream's track in the trace that was current when it was made.
    trace: Option<tracing::StreamTrace>,
}

impl GpuStream {
    /// With `--jitter-us`: enqueue a seeded random 0..max delay (the `spin` kernel) before
    /// the next operation on this stream. A no-op otherwise.
    pub(crate) fn jitter(&self) -> BResult<()> {
        let Some(j) = &self.jitter else {
            return Ok(());
        };
        let ns: u64 = {
            let mut g = j
                .lock()
                .map_err(|_| op_err(format!("{}: jitter state poisoned", self.label)))?;
            let max = g.0;
            g.1.gen_range(0..=max)
        };
        let f = self.dx.func("spin")?;
        let mut b = self.s.launch_builder(f);
        b.arg(&ns);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: spin(u64 ns) takes one u64 by value and touches no memory.
        unsafe { b.launch(cfg) }
            .map_err(|e| op_err(format!("jitter on stream {}: {e}", self.label)))?;
        self.dx.count_launch();
        Ok(())
    }

    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn device(&self) -> usize {
        self.dx.dev
    }
}

/// An event (created without timing, as cuEventRecord/cuStreamWaitEvent need nothing more).
pub struct GpuEvent {
    ev: cudarc::driver::CudaEvent,
    dev: usize,
    /// Traced runs only: the track and timing stamp of this event's last record (where a
    /// wait's flow starts). Never consulted for ordering.
    last: Mutex<Option<(usize, tracing::Stamp)>>,
}

pub struct CudaBackend {
    n_devices: usize,
    devs: Mutex<Vec<Option<Arc<DevCtx>>>>,
    jitter_us: u64,
    seed: u64,
    pdl: bool,
    /// Each stage's layer walk replayed as a CUDA graph (`--graphs`, on by default).
    graphs: bool,
    /// Q4_K (on: also Q8_0, Q4_0, Q4_1, Q5_0, Q6_K) matrices on the tensor-core kernels (`--mma`,
    /// auto by default).
    mma: MmaMode,
    /// The run's largest prime chunk (0: no prime arm), what `--mma auto` looks at besides
    /// the model's width (`MmaMode::select`).
    mma_rows: usize,
    next_stream: AtomicU64,
    modules: Arc<Modules>,
    /// `--trace`: the trace streams made from now on record into.
    trace: Mutex<Option<Arc<tracing::CudaTrace>>>,
}

/// How a backend obtains its kernel modules, and what that cost so far.
pub(crate) struct Modules {
    /// The on-disk cache; None (`--no-cache`): NVRTC compiles PTX every time and the driver
    /// JIT-compiles it at load, as before the cache existed.
    cache: Option<ModuleCache>,
    /// Modules compiled without a cache.
    uncached: AtomicU64,
    /// Wall microseconds spent getting modules (compile or cache read, plus the load).
    micros: AtomicU64,
    /// What cache keys depend on besides source and options: (cuDriverGetVersion, the
    /// kernel module's version line), nvrtcVersion.
    driver: (i32, String),
    nvrtc: (i32, i32),
}

impl Modules {
    fn new(cache: Option<ModuleCache>) -> Modules {
        let mut dv: std::ffi::c_int = 0;
        // SAFETY: `dv` is a valid out-pointer; the driver library is loaded (`open` checked).
        let dv = match unsafe { sys::cuDriverGetVersion(&mut dv) }.result() {
            Ok(()) => dv,
            Err(_) => -1,
        };
        let line = std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|t| t.lines().next().map(str::to_string))
            .unwrap_or_default();
        let (mut major, mut minor): (std::ffi::c_int, std::ffi::c_int) = (0, 0);
        // SAFETY: valid out-pointers; the NVRTC library is loaded (`open` checked).
        let nv = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result();
        Modules {
            cache,
            uncached: AtomicU64::new(0),
            micros: AtomicU64::new(0),
            driver: (dv, line),
            nvrtc: if nv.is_ok() { (major, minor) } else { (-1, -1) },
        }
    }

    /// The counters so far (a receipt records the difference over its run).
    fn stats(&self) -> crate::receipt::ModuleStats {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (cache_dir, hits, misses, corrupt, store_errors) = match &self.cache {
            Some(c) => (
                Some(c.dir().display().to_string()),
                n(&c.counters.hits),
                n(&c.counters.misses),
                n(&c.counters.corrupt),
                n(&c.counters.store_errors),
            ),
            None => (None, 0, 0, 0, 0),
        };
        crate::receipt::ModuleStats {
            cache_dir,
            hits,
            misses: misses + n(&self.uncached),
            corrupt,
            store_errors,
            ms: n(&self.micros) as f64 / 1e3,
        }
    }
}

impl CudaBackend {
    /// Opens the driver: fails (naming the problem) when libcuda or libnvrtc cannot be
    /// loaded, the driver does not initialize, or no device answers. Never falls back.
    pub fn open() -> BResult<CudaBackend> {
        // SAFETY: only tries to dlopen the driver library by its candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err(op_err(
                "no NVIDIA driver: libcuda.so could not be loaded (no GPU driver on this machine)"
                    .into(),
            ));
        }
        // SAFETY: only tries to dlopen the NVRTC library by its candidate names.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(op_err(
                "libnvrtc.so (the CUDA runtime compiler) could not be loaded".into(),
            ));
        }
        // cudarc panics on a missing symbol (a driver older than the bindings): turn that
        // into an error too, never a crash.
        let probe = std::panic::catch_unwind(|| -> Result<i32, String> {
            result::init().map_err(|e| format!("cuInit failed: {e}"))?;
            result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e}"))
        });
        let count = match probe {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err(op_err(e)),
            Err(_) => {
                return Err(op_err(
                    "the CUDA driver library is missing a required symbol (driver too old for CUDA 13 bindings)"
                        .into(),
                ))
            }
        };
        if count <= 0 {
            return Err(op_err("the CUDA driver reports no devices".into()));
        }
        let n = count as usize;
        Ok(CudaBackend {
            n_devices: n,
            devs: Mutex::new((0..n).map(|_| None).collect()),
            jitter_us: 0,
            seed: 0,
            pdl: true,
            graphs: true,
            mma: MmaMode::Auto,
            mma_rows: 0,
            next_stream: AtomicU64::new(0),
            modules: Arc::new(Modules::new(None)),
            trace: Mutex::new(None),
        })
    }

    /// Kernel modules come from `cache` (compiled on a miss and stored), or with None from
    /// NVRTC every time. Must be set before the first device is opened.
    pub fn with_module_cache(mut self, cache: Option<ModuleCache>) -> CudaBackend {
        self.modules = Arc::new(Modules::new(cache));
        self
    }

    /// The module counters of this backend so far.
    pub fn module_stats(&self) -> crate::receipt::ModuleStats {
        self.modules.stats()
    }

    /// Schedule explorer: every later stream enqueues a seeded random 0..`us` µs delay
    /// before each of its copies, uploads, zero-fills, event records and engine ops (the
    /// CUDA counterpart of the CPU backend's `--jitter-us`). 0 turns it off.
    pub fn with_jitter(mut self, us: u64, seed: u64) -> CudaBackend {
        self.jitter_us = us;
        self.seed = seed;
        self
    }

    /// Programmatic dependent launch of engine kernels on sm_90+ (on by default; `false`
    /// launches every kernel fully serialized, for comparison). Must be set before the
    /// first device is opened.
    pub fn with_pdl(mut self, on: bool) -> CudaBackend {
        self.pdl = on;
        self
    }

    /// CUDA graphs (`--graphs`): `true` (the default) captures each stage's layer walk once
    /// per (layers, rows, order, cache) and replays it every step; `false` launches every
    /// kernel every step. Either way the same kernels run with the same arguments, so no
    /// bit changes. Set before the first engine is built.
    pub fn with_graphs(mut self, on: bool) -> CudaBackend {
        self.graphs = on;
        self
    }

    /// The tensor-core matvec (`--mma`): on, every Q4_K and Q6_K matrix of whole 16-row tiles
    /// and whole super-blocks, and every Q8_0, Q4_0, Q4_1, Q5_0 matrix of whole 16-row tiles and
    /// blocks of 32, is uploaded in its layout of kernels/mma.cu and every launch over such
    /// matrices runs there, for every row count (decode tiles and prime/verify chunks alike,
    /// one reduction order); off keeps the FFMA kernels; auto (the default) picks by the
    /// model's width and the run's largest prime chunk (`MmaMode::select`, `with_mma_rows`).
    /// A function of the model and the run's flags alone, so every engine of a gate
    /// (reference and arms, every stage and process) takes the same kernels: each arm still
    /// matches its reference bit for bit. A different order than off, so different bits.
    /// Set before the first engine is built.
    pub fn with_mma(mut self, mode: MmaMode) -> CudaBackend {
        self.mma = mode;
        self
    }

    /// The run's largest prime chunk in rows (0: the run has no prime arm), for `--mma auto`.
    /// Set from the run's flags before the first engine is built, the same for all of them.
    pub fn with_mma_rows(mut self, prime_rows: usize) -> CudaBackend {
        self.mma_rows = prime_rows;
        self
    }

    /// The `--mma` setting as given (auto unresolved).
    pub fn mma(&self) -> MmaMode {
        self.mma
    }

    /// `--mma` as receipts record it: which formats engines of a model `n_embd` wide run on
    /// the tensor cores, and why when auto chose.
    pub fn mma_note(&self, n_embd: usize) -> String {
        mma_note(self.mma, n_embd, self.mma_rows)
    }

    /// Whether engines replay graphs, and where they cannot although asked, why (receipts
    /// record it): PPN_CUDA_PROF's per-launch timing events cannot sit inside a capture.
    /// With `--jitter-us` the graphs stay on: each stage's spins go before its graph.
    pub fn graphs_note(&self) -> &'static str {
        graphs_note(self.graphs, prof_enabled(), self.jitter_us)
    }

    fn current_trace(&self) -> Option<Arc<tracing::CudaTrace>> {
        self.trace.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn check_dev(&self, dev: usize) -> BResult<()> {
        if dev < self.n_devices {
            Ok(())
        } else {
            Err(BackendError::NoSuchDevice {
                backend: "cuda",
                dev,
                count: self.n_devices,
            })
        }
    }

    /// The device's context and kernels, created (and compiled) on first use.
    pub fn device(&self, dev: usize) -> BResult<Arc<DevCtx>> {
        self.check_dev(dev)?;
        let mut devs = self
            .devs
            .lock()
            .map_err(|_| op_err("device table poisoned by a panicked thread".into()))?;
        if let Some(d) = &devs[dev] {
            return Ok(d.clone());
        }
        let d = Arc::new(open_device(dev, self.pdl, self.modules.clone())?);
        devs[dev] = Some(d.clone());
        Ok(d)
    }
}

fn open_device(dev: usize, pdl: bool, modules: Arc<Modules>) -> BResult<DevCtx> {
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
    let src: String = SOURCES
        .iter()
        .map(|(name, s)| format!("// ---- {name}\n{s}\n"))
        .collect();
    let mut dx = DevCtx {
        dev,
        ctx,
        _module: None,
        funcs: HashMap::new(),
        compile_ms: 0.0,
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
        mma: OnceLock::new(),
    };
    let t0 = Instant::now();
    let hits0 = dx.modules.stats().hits;
    let module = compile_and_load(&dx, &src, &format!("device {dev}: main module"))?;
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let how = if dx.modules.stats().hits > hits0 {
        "read from the module cache"
    } else {
        "compiled by NVRTC"
    };
    let mut funcs = HashMap::new();
    for name in KERNELS {
        let f = module
            .load_function(name)
            .map_err(|e| op_err(format!("device {dev}: kernel {name}: {e}")))?;
        funcs.insert(name, f);
    }
    eprintln!(
        "cuda: device {dev} (sm_{major}{minor}): main module {how}, loaded in {compile_ms:.0} ms"
    );
    if std::env::var_os("PPN_CUDA_PROF").is_some() {
        // Diagnostics: registers, spills and residency of the main module's hot kernels.
        for name in ["attention", "attention_early"] {
            if let Some(f) = funcs.get(name) {
                eprintln!(
                    "cuda prof: {name}: {:?} regs, {:?} local bytes, {:?} blocks of 256 per SM",
                    f.num_regs(),
                    f.local_size_bytes(),
                    f.occupancy_max_active_blocks_per_multiprocessor(256, 0, None)
                );
            }
        }
    }
    dx._module = Some(module);
    dx.funcs = funcs;
    dx.compile_ms = compile_ms;
    Ok(dx)
}

/// The NVRTC program name (it appears in compile logs and the images' debug strings).
const PROGRAM_NAME: &str = "ppn_gate_kernels.cu";
/// The cudarc release whose NVRTC and driver bindings build the modules (build.rs reads it
/// from Cargo.lock); part of every cache key.
const CUDARC_VERSION: &str = env!("PPN_CUDARC_VERSION");

/// Gets `src`'s module for `dx`'s device and loads it. With a module cache: CUBIN for the
/// device's real architecture (PTX where the table in `open_device` has none), from the cache
/// or compiled and stored; without: PTX compiled now, which the driver JIT-compiles at load
/// (through its own JIT cache). An NVRTC error keeps the compile log.
fn compile_and_load(dx: &DevCtx, src: &str, what: &str) -> BResult<Arc<CudaModule>> {
    let t0 = Instant::now();
    let m = &*dx.modules;
    let (kind, arch) = match (&m.cache, dx.sm) {
        (Some(_), Some(sm)) => (ImageKind::Cubin, Some(sm)),
        _ => (ImageKind::Ptx, dx.arch),
    };
    let options = nvrtc_options(arch);
    let compile = || {
        nvrtc_compile(src, &options, kind)
            .map_err(|e| op_err(format!("{what}: NVRTC compile failed: {e}")))
    };
    let image = match &m.cache {
        None => {
            m.uncached.fetch_add(1, Ordering::Relaxed);
            compile()?
        }
        Some(cache) => {
            let key = Key::of(&KeyParts {
                source: src,
                options: &options,
                name: PROGRAM_NAME,
                kind,
                cc: dx.cc,
                driver: (m.driver.0, &m.driver.1),
                nvrtc: m.nvrtc,
                cudarc: CUDARC_VERSION,
            });
            let (image, outcome, store_error) = cache.get_or_build(&key, compile)?;
            if let Outcome::Corrupt { reason, .. } = &outcome {
                eprintln!("cuda: {what}: module cache entry unusable ({reason}); compiled again");
            }
            if let Some(e) = store_error {
                eprintln!("cuda: {what}: {e}; the module is used without being cached");
            }
            image
        }
    };
    let image = match kind {
        ImageKind::Cubin => Ptx::from_binary(image),
        ImageKind::Ptx => Ptx::from_src(
            String::from_utf8(image)
                .map_err(|_| op_err(format!("{what}: the PTX image is not UTF-8 text")))?,
        ),
    };
    let module = dx
        .ctx
        .load_module(image)
        .map_err(|e| op_err(format!("{what}: loading the {} module: {e}", kind.name())))?;
    m.micros
        .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    Ok(module)
}

/// NVRTC options. The numerics contract: no contraction into FMA, no flush-to-zero, IEEE
/// division and square root, so each + * / sqrt rounds exactly like the CPU backend's Rust.
/// (The same flags, in the same order, as cudarc's `CompileOptions` gave before the cache.)
fn nvrtc_options(arch: Option<&str>) -> Vec<String> {
    let mut o: Vec<String> = [
        "--ftz=false",
        "--prec-sqrt=true",
        "--prec-div=true",
        "--fmad=false",
    ]
    .map(String::from)
    .to_vec();
    if let Some(a) = arch {
        o.push(format!("--gpu-architecture={a}"));
    }
    o
}

/// Compiles `src` with NVRTC and returns the image of `kind`: CUBIN (the options must name a
/// real architecture, sm_XX) or PTX text. An error carries NVRTC's status and compile log.
fn nvrtc_compile(src: &str, options: &[String], kind: ImageKind) -> Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result as nr, sys as ns};
    let csrc = std::ffi::CString::new(src)
        .map_err(|_| "the kernel source contains a NUL byte".to_string())?;
    let name = std::ffi::CString::new(PROGRAM_NAME).expect("no NUL in the program name");
    /// Owns an NVRTC program: destroyed exactly once, on every path out.
    struct Program(ns::nvrtcProgram);
    impl Drop for Program {
        fn drop(&mut self) {
            // SAFETY: the handle came from nvrtcCreateProgram and is destroyed only here.
            let _ = unsafe { nr::destroy_program(self.0) };
        }
    }
    let prog = Program(
        nr::create_program(&csrc, Some(&name)).map_err(|e| format!("nvrtcCreateProgram: {e}"))?,
    );
    // `csrc` and `name` outlive `prog` (declared before it), as NVRTC requires.
    // SAFETY: `prog.0` is a live program (owned by `prog` until the end of this function).
    if let Err(e) = unsafe { nr::compile_program(prog.0, options) } {
        // SAFETY: as above.
        let log = unsafe { nr::get_program_log(prog.0) }
            .map(|l| {
                let b: Vec<u8> = l
                    .iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| c as u8)
                    .collect();
                String::from_utf8_lossy(&b).into_owned()
            })
            .unwrap_or_else(|e| format!("(no log: {e})"));
        return Err(format!("{e}; options {options:?}; compile log:\n{log}"));
    }
    match kind {
        ImageKind::Ptx => {
            // SAFETY: `prog.0` is live and compiled.
            let ptx = unsafe { nr::get_ptx(prog.0) }.map_err(|e| format!("nvrtcGetPTX: {e}"))?;
            // The PTX text ends at its NUL terminator.
            Ok(ptx
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect())
        }
        ImageKind::Cubin => {
            let mut n: usize = 0;
            // SAFETY: `prog.0` is live and compiled; `n` is a valid out-pointer.
            unsafe { ns::nvrtcGetCUBINSize(prog.0, &mut n) }
                .result()
                .map_err(|e| format!("nvrtcGetCUBINSize: {e}"))?;
            if n == 0 {
                return Err(format!("NVRTC produced no CUBIN (options {options:?})"));
            }
            let mut cubin = vec![0u8; n];
            // SAFETY: `cubin` has exactly the n bytes nvrtcGetCUBINSize asked for.
            unsafe { ns::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| format!("nvrtcGetCUBIN: {e}"))?;
            Ok(cubin)
        }
    }
}

/// The NCCL link behind `link` (an ipc link is refused), with `s`'s jitter applied and its
/// context bound to this thread (NCCL enqueues on the current context's stream).
fn nccl_on<'l>(s: &GpuStream, link: &'l Link, what: &str) -> BResult<&'l nccl::NcclLink> {
    let Link::Nccl(l) = link else {
        return Err(crate::backend::no_link("cuda", link));
    };
    s.jitter()?;
    drv(s.dx.ctx.bind_to_thread(), || {
        format!("link {what} on {}: bind context", s.label())
    })?;
    Ok(l)
}

/// What `CudaBackend::graphs_note` records for `--graphs` (`asked`), PPN_CUDA_PROF (`prof`)
/// and `--jitter-us`.
pub(crate) fn graphs_note(asked: bool, prof: bool, jitter_us: u64) -> &'static str {
    if !asked {
        "off"
    } else if prof {
        "off (PPN_CUDA_PROF times every launch)"
    } else if jitter_us > 0 {
        "on (jitter spins before each stage's graph)"
    } else {
        "on"
    }
}

/// Per-launch profiling (PPN_CUDA_PROF set): the engine records timing events around every
/// launch, which rules out capturing its layers as a graph.
pub(crate) fn prof_enabled() -> bool {
    std::env::var_os("PPN_CUDA_PROF").is_some()
}

fn drv<T>(r: Result<T, result::DriverError>, what: impl FnOnce() -> String) -> BResult<T> {
    r.map_err(|e| op_err(format!("{}: {e}", what())))
}

impl Backend for CudaBackend {
    type Buf = GpuBuf;
    type Stream = GpuStream;
    type Event = GpuEvent;
    type HostBuf = PinnedF32;
    type Cache = CudaCache;
    type Engine = CudaEngine;

    fn kind(&self) -> &'static str {
        "cuda"
    }

    fn device_count(&self) -> usize {
        self.n_devices
    }

    fn device_name(&self, dev: usize) -> String {
        let name = result::device::get(dev as i32).and_then(result::device::get_name);
        match name {
            Ok(n) => format!("cuda{dev} {n}"),
            Err(e) => format!("cuda{dev} (name unavailable: {e})"),
        }
    }

    fn peer_ok(&self, a: usize, b: usize) -> bool {
        // Peer copy needs access both ways (cuDeviceCanAccessPeer, probed once per call at
        // placement time, never per step). All memory here is plain cuMemAlloc (no
        // stream-ordered pools), so cuCtxEnablePeerAccess alone maps it: no pool grant.
        a == b || (can_access_peer(a, b) && can_access_peer(b, a))
    }

    fn enable_peer(&self, a: usize, b: usize) -> BResult<()> {
        if a == b {
            return Ok(());
        }
        if !self.peer_ok(a, b) {
            return Err(op_err(format!(
                "device {a} <-> device {b}: cuDeviceCanAccessPeer refuses the pair (use --transport host)"
            )));
        }
        let (da, db) = (self.device(a)?, self.device(b)?);
        for (from, to) in [(&da, &db), (&db, &da)] {
            drv(from.ctx.bind_to_thread(), || {
                format!("device {}: bind context for peer access", from.dev)
            })?;
            // SAFETY: both contexts are live primary contexts held by this backend's device
            // table; the call only changes the current context's peer mappings.
            let rc = unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) };
            match rc {
                sys::cudaError_enum::CUDA_SUCCESS
                | sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                other => {
                    return Err(op_err(format!(
                        "cuCtxEnablePeerAccess(device {} -> device {}) refused: {other:?}",
                        from.dev, to.dev
                    )))
                }
            }
        }
        Ok(())
    }

    fn new_stream(&self, dev: usize, label: &str) -> BResult<GpuStream> {
        let dx = self.device(dev)?;
        let s = drv(dx.ctx.new_stream(), || {
            format!("device {dev}: creating stream {label}")
        })?;
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let jitter = (self.jitter_us > 0).then(|| {
            Mutex::new((
                self.jitter_us.saturating_mul(1000),
                ChaCha8Rng::seed_from_u64(self.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ))
        });
        let label = format!("{label}@cuda{dev}");
        let trace = match self.current_trace() {
            Some(t) => Some(t.attach(&dx, &s, &label)?),
            None => None,
        };
        Ok(GpuStream {
            s,
            dx,
            label,
            jitter,
            trace,
        })
    }

    fn new_event(&self, dev: usize) -> BResult<GpuEvent> {
        let dx = self.device(dev)?;
        let ev = drv(dx.ctx.new_event(None), || {
            format!("device {dev}: creating an event")
        })?;
        Ok(GpuEvent {
            ev,
            dev,
            last: Mutex::new(None),
        })
    }

    fn record(&self, ev: &GpuEvent, s: &GpuStream) -> BResult<()> {
        s.jitter()?;
        drv(ev.ev.record(&s.s), || {
            format!("record event (device {}) on stream {}", ev.dev, s.label())
        })?;
        // Traced: a separate timing event right behind the ordering record (which stays as
        // it is), where the flows of the waits this record releases start.
        match &s.trace {
            Some(t) => t.recorded(s, ev),
            None => Ok(()),
        }
    }

    fn wait(&self, s: &GpuStream, ev: &GpuEvent) -> BResult<()> {
        // cuStreamWaitEvent on a never-recorded event is a no-op, as the trait requires.
        let wait = || {
            drv(s.s.wait(&ev.ev), || {
                format!("stream {} wait on event (device {})", s.label(), ev.dev)
            })
        };
        match &s.trace {
            Some(t) => t.wait(s, ev, wait),
            None => wait(),
        }
    }

    fn start_trace(&self) -> Option<Arc<Tracer>> {
        let t = Arc::new(tracing::CudaTrace::new(self.n_devices));
        let tracer = t.tracer.clone();
        *self.trace.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
        Some(tracer)
    }

    fn trace(&self) -> BResult<Option<Arc<Tracer>>> {
        match self.current_trace() {
            Some(t) => {
                t.finish()?;
                Ok(Some(t.tracer.clone()))
            }
            None => Ok(None),
        }
    }

    fn trace_step(&self, s: &GpuStream, step: Option<u64>) {
        if let Some(t) = &s.trace {
            t.set_step(step);
        }
    }

    fn trace_phase(&self, name: &str) {
        if let Some(t) = self.current_trace() {
            t.phase(name);
        }
    }

    fn trace_begin(&self, s: &GpuStream, piece: Piece) {
        if let Some(t) = &s.trace {
            t.begin(s, piece);
        }
    }

    fn trace_end(&self, s: &GpuStream) {
        if let Some(t) = &s.trace {
            t.end(s);
        }
    }

    fn synchronize(&self, s: &GpuStream) -> BResult<()> {
        // A piece open on `s` ends before the host blocks (its wake-up is not the work).
        self.trace_end(s);
        drv(s.s.synchronize(), || {
            format!("synchronize stream {} (device {})", s.label(), s.device())
        })
    }

    fn alloc_zeroed(&self, dev: usize, n: usize, s: &GpuStream) -> BResult<GpuBuf> {
        let dx = self.device(dev)?;
        alloc_zeroed_on(&dx, n, s)
    }

    fn alloc_host(&self, n: usize, s: &GpuStream) -> BResult<GpuBuf> {
        let bytes = n
            .checked_mul(4)
            .ok_or_else(|| op_err(format!("host staging of {n} values overflows")))?;
        let raw = mem::Raw::host(
            &s.dx.ctx,
            bytes,
            &format!("host staging for stream {}", s.label()),
        )?;
        Ok(GpuBuf {
            raw,
            len: n,
            dev: None,
        })
    }

    fn buf_len(&self, b: &GpuBuf) -> usize {
        b.len()
    }

    fn copy(
        &self,
        s: &GpuStream,
        src: &GpuBuf,
        src_off: usize,
        dst: &GpuBuf,
        dst_off: usize,
        n: usize,
    ) -> BResult<()> {
        mem::check_range("copy source", src, src_off, n)?;
        mem::check_range("copy destination", dst, dst_off, n)?;
        if n == 0 {
            return Ok(());
        }
        s.jitter()?;
        drv(s.dx.ctx.bind_to_thread(), || {
            format!("copy on {}: bind context", s.label())
        })?;
        // SAFETY: both ranges lie inside live allocations (checked above; the buffers are
        // borrowed for this call and any later free synchronizes their context first, see
        // mem.rs). Under unified addressing cuMemcpyAsync infers device, peer device or
        // pinned host for each pointer. The copy runs in `s`'s order.
        let r =
            unsafe { sys::cuMemcpyAsync(dst.at(dst_off), src.at(src_off), 4 * n, s.s.cu_stream()) }
                .result();
        drv(r, || {
            format!(
                "copy of {n} values ({} -> {}) on stream {}",
                place(src),
                place(dst),
                s.label()
            )
        })
    }

    fn upload(&self, s: &GpuStream, host: &[f32], dst: &GpuBuf, off: usize) -> BResult<()> {
        mem::check_range("upload destination", dst, off, host.len())?;
        s.jitter()?;
        upload_slice(s, host, dst, off)
    }

    fn alloc_readback(&self, dev: usize, n: usize) -> BResult<PinnedF32> {
        let dx = self.device(dev)?;
        PinnedF32::new(
            &dx.ctx,
            n,
            &format!("readback buffer of {n} values for device {dev}"),
        )
    }

    fn download_into<'h>(
        &self,
        s: &GpuStream,
        src: &GpuBuf,
        off: usize,
        dst: &'h mut PinnedF32,
        n: usize,
    ) -> BResult<&'h [f32]> {
        mem::check_range("download source", src, off, n)?;
        if n > dst.len() {
            return Err(op_err(format!(
                "download of {n} values on stream {} into a readback buffer of {}",
                s.label(),
                dst.len()
            )));
        }
        if src.raw.is_host() || n == 0 {
            // Host staging (or nothing to copy): the stream's order first, then a plain
            // host read of what the stream wrote.
            self.synchronize(s)?;
            if n > 0 {
                src.raw.read_host(4 * off, dst.slice_mut(n))?;
            }
            return Ok(dst.slice(n));
        }
        drv(s.dx.ctx.bind_to_thread(), || {
            format!("download on {}: bind context", s.label())
        })?;
        let target = dst.dma_target();
        // SAFETY: the source range lies inside a live device allocation (checked above);
        // the destination is `dst`'s pinned allocation of at least 4 * n bytes (checked
        // above), held by `&mut` until the synchronize below has finished the copy, so no
        // host reference reads it meanwhile. The copy runs in `s`'s order.
        let r = unsafe { sys::cuMemcpyDtoHAsync_v2(target, src.at(off), 4 * n, s.s.cu_stream()) }
            .result();
        drv(r, || {
            format!("download of {n} values on stream {}", s.label())
        })?;
        self.synchronize(s)?;
        Ok(dst.slice(n))
    }

    fn link_send(
        &self,
        s: &GpuStream,
        src: &GpuBuf,
        n: usize,
        link: &Link,
        step: u64,
    ) -> BResult<()> {
        mem::check_range("link send source", src, 0, n)?;
        let l = nccl_on(s, link, "send")?;
        // SAFETY: `src[0..n]` lies inside a live allocation on this stream's device (checked
        // above; any free synchronizes its context first, see mem.rs); the stream belongs to
        // the context `nccl_on` bound; the send runs in `s`'s order, after the stage's
        // compute (RAW), and the stage's next op waits for it on that stream (WAR).
        let r = unsafe { l.send(src.at(0), n, s.s.cu_stream() as _) };
        r.map_err(|e| op_err(format!("{e} on stream {}, step {step}", s.label())))
    }

    fn link_recv(
        &self,
        s: &GpuStream,
        dst: &GpuBuf,
        n: usize,
        link: &Link,
        step: u64,
    ) -> BResult<()> {
        mem::check_range("link receive destination", dst, 0, n)?;
        let l = nccl_on(s, link, "recv")?;
        // SAFETY: as link_send; the runtime orders every other access to `dst` behind this
        // recv with the link's arrived event (RAW) and this recv behind the stage's consumed
        // event (WAR).
        let r = unsafe { l.recv(dst.at(0), n, s.s.cu_stream() as _) };
        r.map_err(|e| op_err(format!("{e} on stream {}, step {step}", s.label())))
    }

    fn residency(&self, eng: &CudaEngine, cache: &CudaCache) -> BResult<Residency> {
        let mut r = Residency::default();
        eng.residency(&mut r)?;
        cache.residency(&mut r.cache)?;
        Ok(r)
    }

    fn new_cache(
        &self,
        dev: usize,
        model: &Arc<Model>,
        layers: Range<usize>,
        rows: usize,
        ctx: usize,
        s: &GpuStream,
    ) -> BResult<CudaCache> {
        let dx = self.device(dev)?;
        CudaCache::new(&dx, model, layers, rows, ctx, s)
    }

    fn clear_cache(&self, cache: &CudaCache, s: &GpuStream) -> BResult<()> {
        cache.clear(s)
    }

    fn new_engine(
        &self,
        dev: usize,
        model: &Arc<Model>,
        spec: EngineSpec,
        s: &GpuStream,
    ) -> BResult<CudaEngine> {
        let dx = self.device(dev)?;
        let mma = self.mma.select(model.cfg.n_embd, self.mma_rows);
        CudaEngine::new(&dx, model, spec, s, self.graphs, mma)
    }

    fn bandwidth_gbs(&self, dev: usize) -> BResult<Option<f64>> {
        let dx = self.device(dev)?;
        measure_bandwidth(&dx).map(Some)
    }

    fn launches(&self) -> u64 {
        match self.devs.lock() {
            Ok(devs) => devs
                .iter()
                .flatten()
                .map(|d| d.launches.load(Ordering::Relaxed))
                .sum(),
            Err(_) => 0,
        }
    }
}

/// Device memory bandwidth in GB/s (bytes read + bytes written per second): the best of five
/// 256 MiB device-to-device copies on a private stream, timed by GPU events. A one-off
/// measurement for `bench`, outside every per-step path (the event waits below block only
/// on this private stream's work).
fn measure_bandwidth(dx: &Arc<DevCtx>) -> BResult<f64> {
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

fn place(b: &GpuBuf) -> String {
    match b.device() {
        Some(d) => format!("device {d}"),
        None => "host staging".into(),
    }
}

/// `n` f32 on `dx`'s device; the zero-fill is a cuMemsetD32Async enqueued on `s`.
pub(crate) fn alloc_zeroed_on(dx: &Arc<DevCtx>, n: usize, s: &GpuStream) -> BResult<GpuBuf> {
    let bytes = n
        .checked_mul(4)
        .ok_or_else(|| op_err(format!("device {}: {n} values overflow", dx.dev)))?;
    let raw = mem::Raw::device(&dx.ctx, bytes, &format!("alloc on {}", s.label()))?;
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
    dst: &mem::Raw,
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

#[cfg(test)]
mod tests;

/// Whether device `a` can read and write device `b`'s memory directly (false on any error:
/// the caller then refuses a peer boundary, naming the pair).
fn can_access_peer(a: usize, b: usize) -> bool {
    let (Ok(da), Ok(db)) = (result::device::get(a as i32), result::device::get(b as i32)) else {
        return false;
    };
    let mut can: std::ffi::c_int = 0;
    // SAFETY: `can` is a valid out-pointer; da/db are device handles from cuDeviceGet.
    let rc = unsafe { sys::cuDeviceCanAccessPeer(&mut can, da, db) };
    rc == sys::cudaError_enum::CUDA_SUCCESS && can != 0
}
