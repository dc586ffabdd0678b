//! `CudaBackend` and its builder: opening the driver (an error naming the problem when
//! libcuda or libnvrtc is missing, the driver does not initialize or no device answers;
//! never a fallback), the run's settings (`--jitter-us`, `--pdl`, `--graphs`, `--mma`, the
//! module cache), what receipts record of them, and the device table. Laws it serves: every
//! setting is fixed before the first device or engine is made, so every engine of a gate
//! runs under the same settings; one context per device, made on first use and shared.

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys};

use super::device::open_device;
use super::modcache::ModuleCache;
use super::nvrtc::Modules;
use super::{mma_note, op_err, tracing, DevCtx, MmaMode};
use crate::backend::{BResult, BackendError};

pub struct CudaBackend {
    pub(super) n_devices: usize,
    pub(super) devs: Mutex<Vec<Option<Arc<DevCtx>>>>,
    pub(super) jitter_us: u64,
    pub(super) seed: u64,
    pub(super) pdl: bool,
    /// Each stage's layer walk replayed as a CUDA graph (`--graphs`, on by default).
    pub(super) graphs: bool,
    /// Q4_K (on: also Q8_0, Q4_0, Q4_1, Q5_0, Q6_K) matrices on the tensor-core kernels (`--mma`,
    /// auto by default).
    pub(super) mma: MmaMode,
    /// The run's largest prime chunk (0: no prime arm), what `--mma auto` looks at besides
    /// the model's width (`MmaMode::select`).
    pub(super) mma_rows: usize,
    /// `with_mma_batch`: the batched arm's rows a step, for `--mma auto`.
    pub(super) mma_batch: usize,
    /// `Backend::expect_rows`: every engine prepares the matvec row tiles up to it (the
    /// run's largest step), so the first engine of a cold start builds them all at once.
    pub(super) rows_hint: AtomicUsize,
    pub(super) next_stream: AtomicU64,
    pub(super) modules: Arc<Modules>,
    /// `--trace`: the trace streams made from now on record into.
    pub(super) trace: Mutex<Option<Arc<tracing::CudaTrace>>>,
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
            mma_batch: 0,
            rows_hint: AtomicUsize::new(0),
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

    /// The rows a step of the run's batched arm decodes (0: no batched arm), for `--mma
    /// auto` (`MmaMode::select`). Set as `with_mma_rows`.
    pub fn with_mma_batch(mut self, batch_rows: usize) -> CudaBackend {
        self.mma_batch = batch_rows;
        self
    }

    /// The `--mma` setting as given (auto unresolved).
    pub fn mma(&self) -> MmaMode {
        self.mma
    }

    /// `--mma` as receipts record it: which formats engines of `model` run on the tensor
    /// cores, and why when auto chose (a model none of whose matrices takes what auto
    /// turned on is named off).
    pub fn mma_note(&self, model: &crate::model::Model) -> String {
        let n_embd = model.cfg.n_embd;
        let sel = self.mma.select(n_embd, self.mma_rows, self.mma_batch);
        let ints_taken = model
            .layers
            .iter()
            .flat_map(|l| l.matrices())
            .chain([&model.output])
            .any(|w| super::mma::mma_ints(w.ty) && sel.takes(w.ty, w.rows, w.cols));
        mma_note(self.mma, n_embd, self.mma_rows, self.mma_batch, ints_taken)
    }

    /// Whether engines replay graphs, and where they cannot although asked, why (receipts
    /// record it): PPN_CUDA_PROF's per-launch timing events cannot sit inside a capture.
    /// With `--jitter-us` the graphs stay on: each stage's spins go before its graph.
    pub fn graphs_note(&self) -> &'static str {
        graphs_note(self.graphs, prof_enabled(), self.jitter_us)
    }

    pub(super) fn current_trace(&self) -> Option<Arc<tracing::CudaTrace>> {
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
