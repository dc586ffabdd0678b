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

use cudarc::driver::{sys, CudaFunction, CudaModule};
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

/// The kernels of the main module (compiled when a device is opened).
pub(super) const KERNELS: [&str; 8] = [
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
pub(super) const MV_SOURCES: [&str; 3] = ["common.cu", "ffn.cu", "matvec.cu"];

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

/// Gets `src`'s module for `dx`'s device and loads it. With a module cache: CUBIN for the
/// device's real architecture (PTX where the table in `open_device` has none), from the cache
/// or compiled and stored; without: PTX compiled now, which the driver JIT-compiles at load
/// (through its own JIT cache). An NVRTC error keeps the compile log.
pub(super) fn compile_and_load(dx: &DevCtx, src: &str, what: &str) -> BResult<Arc<CudaModule>> {
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
                diag!("cuda: {what}: module cache entry unusable ({reason}); compiled again");
            }
            if let Some(e) = store_error {
                diag!("cuda: {what}: {e}; the module is used without being cached");
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
        eprintln!(
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
            diag!(
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
