//! The kernel modules: their sources and kernels, their assembly into NVRTC programs, the
//! NVRTC options, compiling (or reading from the module cache, `modcache`) and loading them,
//! and each device's table of matvec modules compiled on first need. Laws it serves: the
//! numerics contract of the options (no FMA contraction, no flush-to-zero, IEEE division
//! and square root, so each operation rounds as the CPU backend's Rust does); one main
//! module per context, compiled once; a matvec module per (kind, row tile) compiled when an
//! engine is built, never by a launch; a cache key covers everything an image depends on
//! (source, options, device, driver, NVRTC, cudarc); an NVRTC failure keeps its compile log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use super::modcache::{ImageKind, Key, KeyParts, ModuleCache, Outcome};
use super::{op_err, DevCtx};
use crate::backend::BResult;

/// The kernel sources, one file per op family, concatenated into one NVRTC program (in this
/// order: later files use the helpers of earlier ones).
pub(super) const SOURCES: [(&str, &str); 8] = [
    ("common.cu", include_str!("kernels/common.cu")),
    ("ffn.cu", include_str!("kernels/ffn.cu")),
    ("matvec.cu", include_str!("kernels/matvec.cu")),
    ("mvq.cu", include_str!("kernels/mvq.cu")),
    ("mma.cu", include_str!("kernels/mma.cu")),
    ("norm.cu", include_str!("kernels/norm.cu")),
    ("attention.cu", include_str!("kernels/attention.cu")),
    ("sched.cu", include_str!("kernels/sched.cu")),
];

/// The kernels of the main module (its build starts when a device is opened; the
/// attention kernels are modules of their own, `ATT_KERNELS`).
pub(super) const KERNELS: [&str; 7] = [
    "embed_rows",
    "add_residual",
    "stage_rows",
    "spin",
    "hold_wait",
    "hold_put",
    "rowpos_set",
];

/// The `#define` head of the main module: every source, no attention kernel.
pub(super) const MAIN_HEAD: &str = "#define ATT_KERNEL -1\n";

/// The attention kernels (kernels/attention.cu), one module each, built with an engine's
/// other modules (`prepare_modules`): the two one-row kernels per head-width class
/// (`ATT_WIDTHS`: the branch of att_entry the host's blocks of 256 take, compiled alone),
/// and `attention_rows`. Why apart: in one program they were the longest NVRTC compile of a
/// cold start, run before anything else could be built.
pub(crate) const ATT_KERNELS: [&str; 3] = ["attention", "attention_early", "attention_rows"];

/// The dynamic shared memory `attention_rows` is opted in to (past the 48 KiB a launch gets
/// without): engine/attention.rs att_rows_tile's bound on q rows, scores and partials (46
/// KiB) plus the score pass's staged k tile (40 KiB, kernels/attention.cu ATR_KS). Two
/// blocks of it still fit an SM's 227 KiB.
pub(crate) const ATT_ROWS_OPT_IN: usize = 86 * 1024;

/// Head widths with a one-row attention instantiation of their own; 0: every other width.
pub(crate) const ATT_WIDTHS: [usize; 4] = [64, 128, 256, 0];

/// Attention module slots: one-row kernel k (0, 1) for width class c at k * 4 + c, then
/// `attention_rows`.
pub(crate) const ATT_SLOTS: usize = 2 * ATT_WIDTHS.len() + 1;

/// The slot of attention kernel `k` (`ATT_KERNELS` index) for heads `hd` wide.
pub(crate) fn att_slot(k: usize, hd: usize) -> usize {
    if k >= 2 {
        return ATT_SLOTS - 1;
    }
    let class = ATT_WIDTHS
        .iter()
        .position(|&w| w == hd)
        .unwrap_or(ATT_WIDTHS.len() - 1);
    k * ATT_WIDTHS.len() + class
}

/// The attention modules an engine with heads `hd` wide launches.
pub(crate) fn att_modules_for(hd: usize) -> Vec<usize> {
    (0..ATT_KERNELS.len()).map(|k| att_slot(k, hd)).collect()
}

/// The kernel name and `#define` head of attention slot `i`.
pub(crate) fn att_module(i: usize) -> (&'static str, String) {
    if i + 1 >= ATT_SLOTS {
        return (ATT_KERNELS[2], "#define ATT_KERNEL 2\n".to_string());
    }
    let (k, c) = (i / ATT_WIDTHS.len(), i % ATT_WIDTHS.len());
    (
        ATT_KERNELS[k],
        format!("#define ATT_KERNEL {k}\n#define ATT_HD {}\n", ATT_WIDTHS[c]),
    )
}

/// Every source in order after `head` (the main module's and the attention modules' text).
pub(super) fn whole_source(head: &str) -> String {
    std::iter::once(head.to_string())
        .chain(
            SOURCES
                .iter()
                .map(|(name, s)| format!("// ---- {name}\n{s}\n")),
        )
        .collect()
}

/// The sources of a matvec module (kernels/matvec.cu with its helpers), compiled per (kind,
/// row tile) on first need: one kind per block format (`#define MV_FMT id`) and one generic
/// kind for launches that mix formats (`#define MV_GENERIC`), each module holding one kernel,
/// `mv_tile`, for one row tile (`#define MV_RT rt`, 1..=MV_MAX_TILE). Compiling only the
/// kinds a model uses and the tiles its engines' row counts need keeps a cold start (empty
/// driver JIT cache) short.
/// The vectorized kinds (`MVQ_BASE + format id`, kernels/mvq.cu, weights repacked by
/// crate::quant::repack) add mvq.cu and hold three kernels, one per rows-per-warp variant
/// (`MVQ_KERNELS`).
pub(super) const MV_SOURCES: [&str; 3] = ["common.cu", "ffn.cu", "matvec.cu"];

/// Matvec module kinds: one per block format id (`engine::fmt_of`, 0..13), then the generic,
/// then the vectorized kind of each format id.
pub(crate) const MV_GENERIC: usize = crate::quant::GgmlType::ALL.len();

pub(crate) const MVQ_BASE: usize = MV_GENERIC + 1;

/// Then the vectorized kinds that fold gemma3's post-norm add into their one-row prologue
/// (`MVQ_PRE_BASE + format id`: the vectorized module with `#define MVQ_PRE`, kernels/mvq.cu
/// mvq_pre_add), built only for engines of models with post-norms, so no other model's
/// kernels carry the fold's code (engine/matvec.rs `pre_kind`).
pub(crate) const MVQ_PRE_BASE: usize = MVQ_BASE + crate::quant::GgmlType::ALL.len();

/// Then the mixed one-row kinds (`MVQ_MIX_BASE + fa * formats + fb`, fa < fb: the
/// vectorized module with `#define MVQ_FMT fa`, `#define MVQ_FMT2 fb` and MVQ_PRE, kernels/mvq.cu
/// mvq_mix_body): one launch over side-by-side matrices of two formats (engine/matvec.rs
/// `mix_of`), built only for the pairs a model's q|k|v holds.
pub(crate) const MVQ_MIX_BASE: usize = MVQ_PRE_BASE + crate::quant::GgmlType::ALL.len();

pub(crate) const MV_KINDS: usize = MVQ_MIX_BASE + crate::quant::GgmlType::ALL.len().pow(2);

/// The mixed kind of format ids fa, fb (`engine::fmt_of`); `mvq_mix_pair` reads it back.
pub(crate) fn mvq_mix_kind(fa: usize, fb: usize) -> usize {
    MVQ_MIX_BASE + fa * crate::quant::GgmlType::ALL.len() + fb
}

/// The format ids (fa, fb) of a mixed kind (`kind >= MVQ_MIX_BASE`).
pub(crate) fn mvq_mix_pair(kind: usize) -> (usize, usize) {
    let nf = crate::quant::GgmlType::ALL.len();
    ((kind - MVQ_MIX_BASE) / nf, (kind - MVQ_MIX_BASE) % nf)
}

/// The kernels of a vectorized module, by weight rows per warp (1, 2, 4), then the dense
/// one-row walk (`mvq_d8`, groups of 8 rows; one-row modules only: `mv_parts`).
pub(crate) const MVQ_KERNELS: [&str; 4] = ["mvq_w1", "mvq_w2", "mvq_w4", "mvq_d8"];

/// The variant index of the dense one-row walk in `MVQ_KERNELS`.
pub(crate) const MVQ_DENSE: usize = 3;

/// The kernels of a mixed module, by weight rows per warp (1, 2); one-row modules only.
pub(crate) const MVQ_MIX_KERNELS: [&str; 2] = ["mvq_x1", "mvq_x2"];

/// The largest matvec row tile (`MV_RT` of a module; kernels/matvec.cu).
pub(crate) const MV_MAX_TILE: usize = 8;

/// The one kernel of every matvec module.
pub(crate) const MV_KERNEL: &str = "mv_tile";

/// How a backend obtains its kernel modules, and what that cost so far.
pub(crate) struct Modules {
    /// The on-disk cache; None (`--no-cache`): NVRTC compiles PTX every time and the driver
    /// JIT-compiles it at load, as before the cache existed.
    pub(super) cache: Option<ModuleCache>,
    /// Modules compiled without a cache.
    pub(super) uncached: AtomicU64,
    /// Wall microseconds spent getting modules (compile or cache read, plus the load).
    pub(super) micros: AtomicU64,
    /// What cache keys depend on besides source and options: (cuDriverGetVersion, the
    /// kernel module's version line), nvrtcVersion.
    pub(super) driver: (i32, String),
    pub(super) nvrtc: (i32, i32),
}

impl Modules {
    pub(super) fn new(cache: Option<ModuleCache>) -> Modules {
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
    pub(super) fn stats(&self) -> crate::receipt::ModuleStats {
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

/// The NVRTC program name (it appears in compile logs and the images' debug strings).
const PROGRAM_NAME: &str = "ppn_gate_kernels.cu";

/// The cudarc release whose NVRTC and driver bindings build the modules (build.rs reads it
/// from Cargo.lock); part of every cache key.
const CUDARC_VERSION: &str = env!("PPN_CUDARC_VERSION");

/// What a module image is compiled for: a device's compute capability and architectures
/// (`open_device`'s table), copied out of its `DevCtx` so a build can run on a thread of
/// its own before the context's table is complete.
#[derive(Clone, Copy, Debug)]
pub(super) struct Target {
    pub(super) cc: (i32, i32),
    /// NVRTC's virtual architecture (None: its default).
    pub(super) arch: Option<&'static str>,
    /// The real architecture CUBIN is compiled for when modules are cached (None: PTX).
    pub(super) sm: Option<&'static str>,
}

impl Target {
    /// Hopper's architecture-specific target (compute_90a / sm_90a), for the modules that use
    /// wgmma, bulk copies and transaction-count mbarriers (cuda/mma.rs MMA_WG): only for a
    /// device of compute capability 9.0 (`DevCtx::mma_wg`), whose images they are.
    pub(super) fn sm90a(self) -> Target {
        Target {
            cc: self.cc,
            arch: Some("compute_90a"),
            sm: Some("sm_90a"),
        }
    }
}

/// A compiled module not yet loaded into a context: CUBIN or PTX bytes.
pub(super) struct Image {
    kind: ImageKind,
    bytes: Vec<u8>,
}

/// Gets `src`'s module for `dx`'s device and loads it (`build_image`, then `load_image`).
pub(super) fn compile_and_load(dx: &DevCtx, src: &str, what: &str) -> BResult<Arc<CudaModule>> {
    compile_and_load_for(dx, dx.target(), src, what)
}

/// `compile_and_load` for target `t` (the device's own, or its `Target::sm90a`).
pub(super) fn compile_and_load_for(
    dx: &DevCtx,
    t: Target,
    src: &str,
    what: &str,
) -> BResult<Arc<CudaModule>> {
    let image = build_image(&dx.modules, t, src, what)?;
    load_image(&dx.ctx, &dx.modules, image, what)
}

/// `src`'s image for `t`. With a module cache: CUBIN for the device's real architecture (PTX
/// where the table in `open_device` has none), from the cache or compiled and stored;
/// without: PTX compiled now, which the driver JIT-compiles at load (through its own JIT
/// cache). An NVRTC error keeps the compile log. No CUDA context is touched, so builds run on
/// any thread, several at once (`run_parallel`).
pub(super) fn build_image(m: &Modules, t: Target, src: &str, what: &str) -> BResult<Image> {
    let t0 = Instant::now();
    let (kind, arch) = match (&m.cache, t.sm) {
        (Some(_), Some(sm)) => (ImageKind::Cubin, Some(sm)),
        _ => (ImageKind::Ptx, t.arch),
    };
    let options = nvrtc_options(arch);
    let compile = || {
        nvrtc_compile(src, &options, kind)
            .map_err(|e| op_err(format!("{what}: NVRTC compile failed: {e}")))
    };
    let bytes = match &m.cache {
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
                cc: t.cc,
                driver: (m.driver.0, &m.driver.1),
                nvrtc: m.nvrtc,
                cudarc: CUDARC_VERSION,
            });
            let (image, outcome, store_error) = cache.get_or_build(&key, compile)?;
            if let Outcome::Corrupt { reason, .. } = &outcome {
                diag!("cuda: {what}: module cache entry unusable ({reason}); compiled again");
            }
            if let Some(e) = store_error {
                diag!("cuda: {what}: {e}; the module is used without being cached");
            }
            image
        }
    };
    m.micros
        .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    Ok(Image { kind, bytes })
}

/// Loads `image` into `ctx` (the driver JIT-compiles a PTX image here).
pub(super) fn load_image(
    ctx: &Arc<CudaContext>,
    m: &Modules,
    image: Image,
    what: &str,
) -> BResult<Arc<CudaModule>> {
    let t0 = Instant::now();
    let kind = image.kind;
    let ptx = match kind {
        ImageKind::Cubin => Ptx::from_binary(image.bytes),
        ImageKind::Ptx => Ptx::from_src(
            String::from_utf8(image.bytes)
                .map_err(|_| op_err(format!("{what}: the PTX image is not UTF-8 text")))?,
        ),
    };
    let module = ctx
        .load_module(ptx)
        .map_err(|e| op_err(format!("{what}: loading the {} module: {e}", kind.name())))?;
    m.micros
        .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    Ok(module)
}

/// One job of `run_parallel`: a module build, run once on whichever thread takes it.
pub(super) type Job<'a, T> = Box<dyn FnOnce() -> T + Send + 'a>;

/// Runs `jobs` on at most as many threads as the host has cores, and returns their results
/// in job order (None: the job panicked). NVRTC compiles one program on one thread, so a
/// cold start's modules are built side by side: its time is the longest module's, not the
/// sum. Which thread builds which module changes no byte of any image.
pub(super) fn run_parallel<'a, T: Send>(
    jobs: Vec<Job<'a, T>>,
    on_done: &(dyn Fn() + Sync),
) -> Vec<Option<T>> {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;
    let n = jobs.len();
    let cores = std::thread::available_parallelism().map_or(4, |c| c.get());
    let queue: Vec<Mutex<Option<Job<'a, T>>>> =
        jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let out: Vec<Mutex<Option<T>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..cores.min(n) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let job = queue[i].lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(job) = job {
                    // A panicking build is that job's None, never a poisoned pool.
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).ok();
                    *out[i].lock().unwrap_or_else(|e| e.into_inner()) = r;
                    on_done();
                }
            });
        }
    });
    out.into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

/// NVRTC options. The numerics contract: no contraction into FMA, no flush-to-zero, IEEE
/// division and square root, so each + * / sqrt rounds exactly like the CPU backend's Rust.
/// (The same flags, in the same order, as cudarc's `CompileOptions` gave before the cache.)
pub(super) fn nvrtc_options(arch: Option<&str>) -> Vec<String> {
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

/// Kernel `name` of `module` (`what` names the module in errors), opted in to `smem` bytes
/// of dynamic shared memory when given; with PPN_CUDA_PROF its registers and spills printed.
pub(super) fn load_kernel(
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
        errln!(
            "cuda prof: {what} {name}: {:?} regs, {:?} local bytes",
            f.num_regs(),
            f.local_size_bytes()
        );
    }
    Ok(f)
}

/// A module's program text: its `#define` head, then the named SOURCES in the order given.
pub(super) fn module_source<'a>(head: String, names: impl Iterator<Item = &'a &'a str>) -> String {
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

impl DevCtx {
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

    /// Compiles and loads every module an engine needs that this device lacks: the matvec
    /// modules of `mv` (kind, row tile), the mma kernels `mma` (indices into MMA_KERNELS,
    /// one module each) and the attention modules `att` (slots, `att_slot`), all at once on the host's cores (`run_parallel`),
    /// beside the main module, which `open_device` started on a thread of its own. A cold
    /// start so takes about its longest module, not the sum of them.
    pub(crate) fn prepare_modules(
        &self,
        mv: &[(usize, usize)],
        mma: &[usize],
        att: &[usize],
    ) -> BResult<()> {
        let _g = self
            .mv_build
            .lock()
            .map_err(|_| op_err(format!("device {}: matvec build lock poisoned", self.dev)))?;
        let mut todo_mv: Vec<(usize, usize, usize)> = Vec::new();
        for &(k, t) in mv {
            let i = Self::mv_slot(k, t).ok_or_else(|| {
                op_err(format!(
                    "device {}: no matvec module {k} with row tile {t} (kinds < {MV_KINDS}, \
                     tiles 1..={MV_MAX_TILE})",
                    self.dev
                ))
            })?;
            if self.mv[i].get().is_none() && !todo_mv.iter().any(|&(j, _, _)| j == i) {
                todo_mv.push((i, k, t));
            }
        }
        let mut todo_mma: Vec<usize> = Vec::new();
        for &i in mma {
            let slot = self.mma.get(i).ok_or_else(|| {
                op_err(format!(
                    "device {}: no mma kernel {i} (the mma module has {})",
                    self.dev,
                    self.mma.len()
                ))
            })?;
            if slot.get().is_none() && !todo_mma.contains(&i) {
                todo_mma.push(i);
            }
        }
        if !todo_mma.is_empty() {
            self.mma_supported()?;
        }
        let mut todo_att: Vec<usize> = Vec::new();
        for &i in att {
            let slot = self
                .att
                .get(i)
                .ok_or_else(|| op_err(format!("device {}: no attention module {i}", self.dev)))?;
            if slot.get().is_none() && !todo_att.contains(&i) {
                todo_att.push(i);
            }
        }
        if todo_mv.is_empty() && todo_mma.is_empty() && todo_att.is_empty() {
            return Ok(());
        }
        /// One built module's kernels, and where they go.
        enum Built {
            /// (slot, kind, tile, variant, kernel).
            Mv(usize, usize, usize, usize, CudaFunction),
            Mma(usize, CudaFunction),
            Att(usize, CudaFunction),
        }
        let t0 = Instant::now();
        let mut names: Vec<String> = Vec::new();
        let mut jobs: Vec<Job<'_, BResult<Built>>> = Vec::new();
        // The attention modules first: the longest of a cold start, and the pool takes its
        // jobs in order, so they start at once.
        for &i in &todo_att {
            let (name, head) = att_module(i);
            names.push(format!("{name} ({})", head.trim().replace('\n', " ")));
            jobs.push(Box::new(move || Ok(Built::Att(i, self.build_att(i)?))));
        }
        for &(i, k, t) in &todo_mv {
            for part in 0..Self::mv_parts(k, t) {
                names.push(format!("{k}/r{t}/{part}"));
                jobs.push(Box::new(move || {
                    Ok(Built::Mv(i, k, t, part, self.build_mv(k, t, part)?))
                }));
            }
        }
        for &i in &todo_mma {
            names.push(self.mma_kernel_name(i).to_string());
            jobs.push(Box::new(move || {
                Ok(Built::Mma(i, self.build_mma_kernel(i)?))
            }));
        }
        let n = jobs.len();
        let mut first_err = None;
        // A vectorized matvec module's variants, gathered in MVQ_KERNELS order by slot.
        let mut parts: std::collections::BTreeMap<usize, Vec<Option<CudaFunction>>> =
            std::collections::BTreeMap::new();
        // A cold start shows its builds on a terminal (a warm one is over before it draws).
        let bar =
            crate::term::Bar::new(format!("device {}: kernel modules", self.dev), n, "modules");
        let built = run_parallel(jobs, &|| bar.inc());
        bar.finish();
        for (r, what) in built.into_iter().zip(&names) {
            let r = r.unwrap_or_else(|| {
                Err(op_err(format!(
                    "device {}: module {what}: build thread panicked",
                    self.dev
                )))
            });
            // A slot is set once: the lock above keeps a second builder out.
            match r {
                Ok(Built::Mv(i, k, t, part, f)) => {
                    let v = parts
                        .entry(i)
                        .or_insert_with(|| vec![None; Self::mv_parts(k, t)]);
                    if let Some(p) = v.get_mut(part) {
                        *p = Some(f);
                    }
                }
                Ok(Built::Mma(i, f)) => {
                    let _ = self.mma[i].set(f);
                }
                Ok(Built::Att(i, f)) => {
                    let _ = self.att[i].set(f);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        for (i, v) in parts {
            // Every part built (no error above): the slot's kernels in variant order.
            let _ = self.mv[i].set(v.into_iter().flatten().collect());
        }
        diag!(
            "cuda: device {}: {n} kernel modules [{}] ready (NVRTC or module cache, + load, \
             side by side) in {:.0} ms",
            self.dev,
            names.join(", "),
            t0.elapsed().as_secs_f64() * 1e3
        );
        Ok(())
    }

    /// The kernels of matvec module (kind, tile): one, or for a vectorized kind one per
    /// `MVQ_KERNELS` variant, each built as a module of its own (`build_mv`); the dense walk
    /// only in one-row modules (kernels/mvq.cu compiles it only at MV_RT 1).
    fn mv_parts(kind: usize, tile: usize) -> usize {
        if kind < MVQ_BASE {
            1
        } else if kind >= MVQ_MIX_BASE {
            MVQ_MIX_KERNELS.len()
        } else if tile == 1 {
            MVQ_KERNELS.len()
        } else {
            MVQ_DENSE
        }
    }

    /// Compiles and loads kernel `part` of matvec module (kind, tile): a vectorized kind's
    /// variant `part` alone (`#define MVQ_NW`, 8 for the dense walk; kernels/mvq.cu), so its
    /// variants compile side by side.
    fn build_mv(&self, kind: usize, tile: usize, part: usize) -> BResult<CudaFunction> {
        let vectorized = kind >= MVQ_BASE;
        let mixed = kind >= MVQ_MIX_BASE;
        let head = if kind == MV_GENERIC {
            format!("#define MV_GENERIC\n#define MV_RT {tile}\n")
        } else if mixed {
            // The pair's module: one-row (kernels/mvq.cu rejects another tile), folding.
            let (fa, fb) = mvq_mix_pair(kind);
            format!(
                "#define MVQ_FMT {fa}\n#define MVQ_FMT2 {fb}\n#define MV_RT {tile}\n\
                 #define MVQ_NW {}\n#define MVQ_PRE\n",
                1 << part
            )
        } else if vectorized {
            // The folding kinds are the same module with MVQ_PRE defined.
            let (base, pre) = if kind >= MVQ_PRE_BASE {
                (MVQ_PRE_BASE, "#define MVQ_PRE\n")
            } else {
                (MVQ_BASE, "")
            };
            format!(
                "#define MVQ_FMT {}\n#define MV_RT {tile}\n#define MVQ_NW {}\n{pre}",
                kind - base,
                1 << part
            )
        } else {
            format!("#define MV_FMT {kind}\n#define MV_RT {tile}\n")
        };
        let extra: &[&str] = if vectorized { &["mvq.cu"] } else { &[] };
        let src = module_source(head, MV_SOURCES.iter().chain(extra));
        let (name, smem) = if mixed {
            (MVQ_MIX_KERNELS[part], self.smem_max)
        } else if vectorized && part == MVQ_DENSE {
            // Its rows are under 1024 wide (a tile of at most 4 KB), and its 8.3 KiB of static
            // slots must fit beside the dynamic limit.
            (MVQ_KERNELS[part], self.stage_max)
        } else if vectorized {
            (MVQ_KERNELS[part], self.smem_max)
        } else {
            (MV_KERNEL, self.stage_max)
        };
        let what = format!(
            "device {}: matvec module {kind} tile {tile} {name}",
            self.dev
        );
        let module = compile_and_load(self, &src, &what)?;
        load_kernel(&module, &what, name, Some(smem))
    }

    /// Compiles and loads attention slot `i`'s module (`att_module`).
    fn build_att(&self, i: usize) -> BResult<CudaFunction> {
        let (name, head) = att_module(i);
        let what = format!(
            "device {}: attention module {name} ({})",
            self.dev,
            head.trim().replace('\n', " ")
        );
        let module = compile_and_load(self, &whole_source(&head), &what)?;
        let smem = (name == ATT_KERNELS[2]).then_some(ATT_ROWS_OPT_IN);
        load_kernel(&module, &what, name, smem)
    }

    /// Attention kernel `name` (of `ATT_KERNELS`) for heads `hd` wide; `prepare_modules`
    /// must have built it (engines do at build).
    pub(crate) fn att_func(&self, name: &str, hd: usize) -> BResult<&CudaFunction> {
        let k = ATT_KERNELS
            .iter()
            .position(|&n| n == name)
            .unwrap_or(ATT_KERNELS.len());
        self.att
            .get(att_slot(k, hd))
            .filter(|_| k < ATT_KERNELS.len())
            .and_then(|f| f.get())
            .ok_or_else(|| {
                op_err(format!(
                    "device {}: attention kernel {} for heads {hd} wide was not compiled for \
                     this engine",
                    self.dev, name
                ))
            })
    }

    pub(crate) fn func(&self, name: &str) -> BResult<&CudaFunction> {
        self.main_module()?.funcs.get(name).ok_or_else(|| {
            op_err(format!(
                "device {}: kernel {name} is not in the module",
                self.dev
            ))
        })
    }
}
