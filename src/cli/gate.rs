//! The gate command and the small subcommands (inspect, synth, bench): flags → validated
//! plan → run → receipt. Every flag is validated before any work starts; an invalid value
//! is an error naming it (exit 2), never a fallback.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::{GateArgs, SynthArgs, EXIT_FAIL, EXIT_PASS};
use crate::arms::{self, ArmKind, GateSpec};
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::modcache::ModuleCache;
use crate::backend::cuda::{CudaBackend, MmaMode};
use crate::backend::trace::Tracer;
use crate::backend::Backend;
use crate::gguf::GgufFile;
use crate::model::synth::{
    builtin_spec, preset, synth_gguf, synth_gguf_for_tools, Preset, SynthQuant, SynthSpec, PRESETS,
};
use crate::model::{Arch, Model};
use crate::receipt::{
    self, BackendInfo, ConfigInfo, DevBytes, ModelInfo, ModuleStats, PlacementInfo, Receipt,
    StageResident, Timings, Tool,
};
use crate::runtime::fault::Site;
use crate::runtime::placement::{boundary_transports, join, parse_list, stage_devices};
use crate::runtime::{Fault, Placement, TransportChoice};

/// The backend a gate runs on (enum dispatch keeps the runtime generic and monomorphic).
#[derive(Clone)]
pub enum AnyBackend {
    Cpu(Arc<CpuBackend>),
    Cuda(Arc<CudaBackend>),
}

impl AnyBackend {
    pub fn device_count(&self) -> usize {
        match self {
            AnyBackend::Cpu(b) => b.device_count(),
            AnyBackend::Cuda(b) => b.device_count(),
        }
    }
    fn shares_host_weights(&self) -> bool {
        match self {
            AnyBackend::Cpu(b) => b.shares_host_weights(),
            AnyBackend::Cuda(b) => b.shares_host_weights(),
        }
    }
    fn peer_ok(&self, a: usize, b: usize) -> bool {
        match self {
            AnyBackend::Cpu(be) => be.peer_ok(a, b),
            AnyBackend::Cuda(be) => be.peer_ok(a, b),
        }
    }
    pub fn kind(&self) -> &'static str {
        match self {
            AnyBackend::Cpu(b) => b.kind(),
            AnyBackend::Cuda(b) => b.kind(),
        }
    }
    pub fn device_name(&self, d: usize) -> String {
        match self {
            AnyBackend::Cpu(b) => b.device_name(d),
            AnyBackend::Cuda(b) => b.device_name(d),
        }
    }
    /// Tracing: streams made from now on record into a fresh trace.
    pub fn start_trace(&self) {
        match self {
            AnyBackend::Cpu(b) => b.start_trace(),
            AnyBackend::Cuda(b) => b.start_trace(),
        };
    }
    /// The current trace, its times read (after the traced walks).
    pub fn trace(&self) -> Result<Option<Arc<Tracer>>> {
        match self {
            AnyBackend::Cpu(b) => b.trace(),
            AnyBackend::Cuda(b) => b.trace(),
        }
        .context("reading the trace")
    }
    /// The kernel-module counters so far (None: the backend compiles no kernels).
    pub fn module_stats(&self) -> Option<ModuleStats> {
        match self {
            AnyBackend::Cpu(_) => None,
            AnyBackend::Cuda(b) => Some(b.module_stats()),
        }
    }
}

/// Everything a gate run needs, validated. Soak and battery reuse one `Prepared` (the model
/// is loaded once) and run it repeatedly.
pub struct Prepared {
    pub args: GateArgs,
    pub be: AnyBackend,
    pub model: Arc<Model>,
    pub model_info: ModelInfo,
    pub spec: GateSpec,
    pub load_ms: f64,
}

/// A CUDA on/off flag (`--pdl`, `--graphs`): on when absent; anything but on or off names
/// the value.
pub(crate) fn on_off(flag: &str, v: &Option<String>) -> Result<bool> {
    match v.as_deref() {
        None => Ok(true),
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => bail!("{flag} {other:?}: expected on or off"),
    }
}

/// `--mma`: on, off or auto (the default: the Q4_K matrices of models at least
/// MMA_AUTO_MIN_EMBD wide, every format the path takes in runs that prime chunks of at least
/// MMA_AUTO_MIN_ROWS rows); anything else names the value.
pub(crate) fn mma_mode(v: &Option<String>) -> Result<MmaMode> {
    match v.as_deref() {
        None | Some("auto") => Ok(MmaMode::Auto),
        Some("on") => Ok(MmaMode::On),
        Some("off") => Ok(MmaMode::Off),
        Some(other) => bail!("--mma {other:?}: expected on, off or auto"),
    }
}

/// The run's largest prime chunk from its flags (0: no prime arm), what `--mma auto` looks
/// at besides the model's width: the chunks as the prime arm runs them
/// (`arms::prime_chunk_sizes` of `--chunk` and `--prompt-len`). From the flags alone, so
/// every process and engine of a run agrees. A bad `--arms` is named later by `check_on`.
fn prime_rows(args: &GateArgs) -> Result<usize> {
    let primes = args
        .arms
        .split(',')
        .any(|a| ArmKind::parse(a.trim()) == Some(ArmKind::Prime));
    if !primes {
        return Ok(0);
    }
    let chunks = list_flag("--chunk", &args.chunk)?;
    let sizes = arms::prime_chunk_sizes(chunks.as_deref(), args.prompt_len.max(1));
    Ok(sizes.into_iter().max().unwrap_or(0))
}

pub fn open_backend(args: &GateArgs) -> Result<AnyBackend> {
    let pdl = on_off("--pdl", &args.pdl)?;
    let graphs = on_off("--graphs", &args.graphs)?;
    let mma = mma_mode(&args.mma)?;
    let mma_rows = prime_rows(args)?;
    let cpu = || -> Result<AnyBackend> {
        if args.cpu_devices == 0 {
            bail!("--cpu-devices 0: need at least one CPU device");
        }
        if let Some(v) = &args.pdl {
            bail!("--pdl {v}: the cpu backend launches no kernels (programmatic dependent launch is a CUDA setting)");
        }
        if let Some(v) = &args.graphs {
            bail!("--graphs {v}: the cpu backend launches no kernels (CUDA graphs are a CUDA setting)");
        }
        if let Some(v) = &args.mma {
            bail!("--mma {v}: the cpu backend launches no kernels (the tensor-core matvec is a CUDA setting)");
        }
        if let Some(d) = &args.cache_dir {
            bail!(
                "--cache-dir {}: the cpu backend compiles no kernels (the module cache is a CUDA setting)",
                d.display()
            );
        }
        if args.no_cache {
            bail!("--no-cache: the cpu backend compiles no kernels (the module cache is a CUDA setting)");
        }
        Ok(AnyBackend::Cpu(Arc::new(CpuBackend::new(
            args.cpu_devices,
            args.jitter_us,
            args.seed,
        ))))
    };
    if let (Some(d), true) = (&args.cache_dir, args.no_cache) {
        bail!("--cache-dir {} with --no-cache: pick one", d.display());
    }
    if let Some(t) = &args.trace {
        if t.is_dir() || t.file_name().is_none() {
            bail!("--trace {}: is a directory, need a file path", t.display());
        }
    }
    let cuda = |be: CudaBackend| -> Result<AnyBackend> {
        let cache = if args.no_cache {
            None
        } else {
            let dir = match &args.cache_dir {
                Some(d) => d.clone(),
                None => ModuleCache::default_dir(
                    std::env::var("XDG_CACHE_HOME").ok().as_deref(),
                    std::env::var("HOME").ok().as_deref(),
                )
                .map_err(anyhow::Error::msg)?,
            };
            Some(ModuleCache::open(&dir).map_err(|e| anyhow!("--cache-dir: {e}"))?)
        };
        Ok(AnyBackend::Cuda(Arc::new(
            be.with_jitter(args.jitter_us, args.seed)
                .with_pdl(pdl)
                .with_graphs(graphs)
                .with_mma(mma)
                .with_mma_rows(mma_rows)
                .with_module_cache(cache),
        )))
    };
    match args.backend.as_str() {
        "cpu" => cpu(),
        // `auto`: CUDA when a driver loads and a device answers, else the CPU backend (the
        // receipt's backend.kind records which one ran).
        "auto" => match CudaBackend::open() {
            Ok(be) => cuda(be),
            Err(_) => cpu(),
        },
        // Explicit CUDA never falls back: no driver or no device is an error naming why.
        "cuda" => match CudaBackend::open() {
            Ok(be) => cuda(be),
            Err(e) => bail!("--backend cuda: {e}"),
        },
        other => bail!("--backend {other:?}: expected auto, cpu or cuda"),
    }
}

/// Load the model named by `--model`, or build the embedded default.
pub fn load_model(path: Option<&Path>) -> Result<(Arc<Model>, String)> {
    match path {
        Some(p) => {
            let m = Model::open(p).with_context(|| format!("--model {}", p.display()))?;
            Ok((Arc::new(m), p.display().to_string()))
        }
        None => synth_model(&builtin_spec(), "the built-in model"),
    }
}

/// A synthetic model built in memory (no file), named `builtin:<its synth flags>` in receipts.
pub fn synth_model(spec: &SynthSpec, what: &str) -> Result<(Arc<Model>, String)> {
    let bytes = synth_gguf(spec).with_context(|| format!("building {what}"))?;
    let f = GgufFile::parse(bytes).with_context(|| format!("parsing {what}"))?;
    let m = Model::load(&f).with_context(|| format!("loading {what}"))?;
    Ok((Arc::new(m), format!("builtin:{}", spec_flags(spec))))
}

fn spec_flags(s: &SynthSpec) -> String {
    format!(
        "--arch {} --layers {} --embd {} --heads {} --kv-heads {} --ff {} --vocab {} --quant {} --seed {}",
        s.arch, s.layers, s.embd, s.heads, s.kv_heads, s.ff, s.vocab, s.quant, s.seed
    )
}

/// Read a tape: JSON with a `tokens` array or a `tape` array of token ids.
pub fn load_tape(path: &Path, vocab: usize) -> Result<Vec<u32>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--tape {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("--tape {}: not valid JSON", path.display()))?;
    let arr = v
        .get("tokens")
        .or_else(|| v.get("tape"))
        .and_then(|a| a.as_array())
        .ok_or_else(|| anyhow!("--tape {}: no `tokens` or `tape` array", path.display()))?;
    let mut out = Vec::with_capacity(arr.len());
    for (i, t) in arr.iter().enumerate() {
        let id = t
            .as_u64()
            .filter(|&id| (id as usize) < vocab)
            .ok_or_else(|| {
                anyhow!(
                    "--tape {}: entry {i} ({t}) is not a token id below the vocab size {vocab}",
                    path.display()
                )
            })?;
        out.push(id as u32);
    }
    if out.is_empty() {
        bail!("--tape {}: the tape is empty", path.display());
    }
    Ok(out)
}

/// A gate's flags checked against its backend before any model loads: the stages' devices,
/// the arms, and every fault's window (a fault that cannot open in this placement is
/// refused, naming why and the placement that opens it). A battery checks every gate this
/// way before the first one runs; a refused fault costs no model load.
pub struct Checked {
    pub be: AnyBackend,
    /// Each stage's device.
    pub devices: Vec<usize>,
    pub splits: Option<Vec<usize>>,
    pub transport: TransportChoice,
    pub arms: Vec<ArmKind>,
    pub faults: Vec<Fault>,
}

pub fn check(args: &GateArgs) -> Result<Checked> {
    check_on(args, open_backend(args)?)
}

/// `check` on a backend already opened from the same flags.
pub fn check_on(args: &GateArgs, be: AnyBackend) -> Result<Checked> {
    let splits = list_flag("--splits", &args.splits)?;
    let devices = stage_devices(
        args.stages,
        splits.as_deref(),
        list_flag("--devices", &args.devices)?.as_deref(),
        be.device_count(),
    )?;
    let transport = check_processes(args, &be, devices.len())?;
    boundary_transports(&devices, transport, &|a, b| be.peer_ok(a, b))?;
    let mut arms = Vec::new();
    for a in args.arms.split(',') {
        let k = ArmKind::parse(a.trim()).ok_or_else(|| {
            anyhow!(
                "--arms {:?}: unknown arm {:?} (eager, pipelined, batched, prime, verify)",
                args.arms,
                a.trim()
            )
        })?;
        if arms.contains(&k) {
            bail!("--arms {:?}: arm {:?} listed twice", args.arms, a.trim());
        }
        arms.push(k);
    }
    let site = Site {
        devices: &devices,
        in_flight: if arms.iter().any(|&a| a != ArmKind::Eager) {
            args.window
        } else {
            1
        },
        uploads_weights: !be.shares_host_weights(),
        multi_row: arms
            .iter()
            .any(|&a| matches!(a, ArmKind::Prime | ArmKind::Verify)),
        rollback: arms.contains(&ArmKind::Verify),
        batched: arms.contains(&ArmKind::Batched),
        // Only an explicit --mma on opens mma-row-order: auto may leave a model on the FFMA
        // kernels (decided when it loads), where the fault would plant nothing.
        mma: matches!(&be, AnyBackend::Cuda(b) if b.mma() == MmaMode::On),
    };
    let mut faults = Vec::new();
    for f in &args.faults {
        let f = Fault::parse(f)?;
        if let Some(why) = f.cannot_open(&site) {
            bail!(
                "--fault {f}: cannot open on --stages {} --devices {}: {why}; {}",
                devices.len(),
                join(&devices),
                super::selftest::where_it_opens(f, &be)
            );
        }
        let across = crate::dist::world_of(args).and_then(|w| {
            let map = crate::dist::rank_map(devices.len(), w, args.ranks.as_deref()).ok()?;
            Some((crate::dist::fault_cannot_cross(f, &map)?, map))
        });
        if let Some((why, map)) = across {
            bail!(
                "--fault {f}: cannot open with stages on ranks {}: {why}",
                join(&map)
            );
        }
        if !faults.contains(&f) {
            faults.push(f);
        }
    }
    Ok(Checked {
        be,
        devices,
        splits,
        transport,
        arms,
        faults,
    })
}

/// The multi-process flags checked against each other and the backend; returns the
/// transport of the boundaries inside one process (`--transport ipc|nccl` names the one
/// between processes; inside a process boundaries then take `auto`).
fn check_processes(args: &GateArgs, be: &AnyBackend, n_stages: usize) -> Result<TransportChoice> {
    let cross = crate::dist::Cross::parse(&args.transport);
    let Some(world) = crate::dist::world_of(args) else {
        if let Some(c) = cross {
            bail!(
                "--transport {}: crosses between processes, and this gate runs in one (add --procs W, or --rank/--world/--rendezvous)",
                c.name()
            );
        }
        if args.ranks.is_some() {
            bail!("--ranks: places stages on the processes of a multi-process gate (add --procs W, or --rank/--world/--rendezvous)");
        }
        return Ok(TransportChoice::parse(&args.transport)?);
    };
    if let (Some(_), Some(_)) = (args.procs, args.rank) {
        bail!("--procs with --rank: --procs starts every member itself; --rank runs one member");
    }
    crate::dist::rank_map(n_stages, world, args.ranks.as_deref())?;
    let Some(cross) = cross else {
        bail!(
            "--transport {}: a multi-process gate needs the transport between its processes: ipc (cpu backend; a test transport) or nccl (cuda backend)",
            args.transport
        );
    };
    match (cross, be.kind()) {
        (crate::dist::Cross::Ipc, "cpu") | (crate::dist::Cross::Nccl, "cuda") => {}
        (crate::dist::Cross::Ipc, k) => bail!(
            "--transport ipc: the cpu backend's test transport between processes; the {k} backend crosses with --transport nccl"
        ),
        (crate::dist::Cross::Nccl, k) => bail!(
            "--transport nccl: needs the cuda backend (this gate runs on the {k} backend, whose transport between processes is ipc)"
        ),
    }
    if let Some(t) = &args.trace {
        bail!(
            "--trace {}: traces one process's streams; a multi-process gate has several (run the member you want traced by hand)",
            t.display()
        );
    }
    // The prime and verify arms across processes (every member walks the same plan; the
    // last stage's member judges; verify's members share the reference's acceptance) ran
    // on the ipc transport only: over NCCL they have not run on GPUs yet, so refused there
    // rather than claimed.
    if cross == crate::dist::Cross::Nccl {
        if let Some(a) = args
            .arms
            .split(',')
            .map(str::trim)
            .find(|a| *a == "prime" || *a == "verify")
        {
            bail!(
                "--arms {a}: across processes over --transport nccl not run on GPUs yet (the ipc transport runs it); run it in one process"
            );
        }
    }
    if args.nccl_lib.is_some() && cross != crate::dist::Cross::Nccl {
        bail!("--nccl-lib: only --transport nccl loads NCCL");
    }
    if args.peer_timeout == 0 || args.rendezvous_timeout == 0 {
        bail!("--peer-timeout and --rendezvous-timeout must be at least 1 second");
    }
    Ok(TransportChoice::Auto)
}

fn list_flag(flag: &str, v: &Option<String>) -> Result<Option<Vec<usize>>> {
    Ok(v.as_deref().map(|s| parse_list(flag, s)).transpose()?)
}

pub fn prepare(args: &GateArgs) -> Result<Prepared> {
    prepare_model(args, None)
}

/// `prepare` with the model already loaded (`model`: the model and its receipt name), or
/// loaded here from `--model` (None).
pub fn prepare_model(args: &GateArgs, model: Option<(Arc<Model>, String)>) -> Result<Prepared> {
    let c = check(args)?;
    let be = c.be;
    let t0 = Instant::now();
    let (model, file) = match model {
        Some(m) => m,
        None => load_model(args.model.as_deref())?,
    };
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let cfg = &model.cfg;
    let be2 = be.clone();
    let placement = Placement::from_flags(
        cfg.n_layers,
        Some(c.devices.len()),
        c.splits.as_deref(),
        Some(&c.devices),
        c.transport,
        be.device_count(),
        &move |a, b| be2.peer_ok(a, b),
    )?;
    if args.topk == 0 || args.topk > cfg.vocab {
        bail!("--topk {}: must be in 1..={}", args.topk, cfg.vocab);
    }
    let tape = args
        .tape
        .as_deref()
        .map(|p| load_tape(p, cfg.vocab))
        .transpose()?;
    let spec = GateSpec {
        placement,
        arms: c.arms,
        window: args.window,
        batch: args.batch,
        prompt_len: args.prompt_len,
        gen_len: if tape.is_some() { 0 } else { args.gen_len },
        seed: args.seed,
        topk: args.topk,
        tape,
        faults: c.faults,
        chunks: list_flag("--chunk", &args.chunk)?,
        repeat: args.repeat,
        draft: args.draft,
        dist: None,
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    let model_info = ModelInfo {
        file,
        arch: cfg.arch.to_string(),
        n_layers: cfg.n_layers,
        n_embd: cfg.n_embd,
        n_heads: cfg.n_heads,
        n_kv_heads: cfg.n_kv_heads,
        head_dim: cfg.head_dim,
        n_ff: cfg.n_ff,
        vocab: cfg.vocab,
        weight_bytes: model.weight_bytes,
        blake3: model.file_blake3.clone(),
    };
    Ok(Prepared {
        args: args.clone(),
        be,
        model,
        model_info,
        spec,
        load_ms,
    })
}

/// Run one gate and build its receipt. `progress` sees "reference", then each arm name.
/// With `--trace`, the trace goes to its path. A multi-process gate (`--procs W`) runs as W
/// member processes (`dist::launch`), whose last-stage member writes the receipt returned here.
pub fn run_prepared(p: &Prepared, progress: &mut dyn FnMut(&str)) -> Result<Receipt> {
    let out = p.args.trace.as_deref().map(|path| TraceOut {
        path,
        only_if_fail: false,
    });
    Ok(run_traced(p, out, progress)?.0)
}

/// Where a traced gate run writes its trace.
#[derive(Clone, Copy)]
pub struct TraceOut<'a> {
    pub path: &'a Path,
    /// Write the file only when the gate FAILs (the run is traced either way, so every run
    /// has the same timing).
    pub only_if_fail: bool,
}

/// `run_prepared` tracing into `trace` (None: untraced), a fresh trace per call (a soak
/// writes one per run); also says whether the trace file was written.
pub fn run_traced(
    p: &Prepared,
    trace: Option<TraceOut>,
    progress: &mut dyn FnMut(&str),
) -> Result<(Receipt, bool)> {
    if p.args.procs.is_some() {
        if let Some(t) = trace {
            bail!(
                "--trace {}: multi-process gates are not traced (trace one process's gate instead)",
                t.path.display()
            );
        }
        return Ok((crate::dist::launch::run(p)?, false));
    }
    if p.args.rank.is_some() {
        bail!("--rank: a member's receipt is written by the member holding the last stage; soak, battery and selftest start members with --procs W");
    }
    if trace.is_some() {
        p.be.start_trace();
    }
    let t0 = Instant::now();
    let modules0 = p.be.module_stats();
    let res = match &p.be {
        AnyBackend::Cpu(be) => arms::run_gate(be.clone(), p.model.clone(), &p.spec, progress)?,
        AnyBackend::Cuda(be) => arms::run_gate(be.clone(), p.model.clone(), &p.spec, progress)?,
    };
    let (busy_overlap, wrote) = match trace {
        Some(out) => {
            let write = !out.only_if_fail || !res.pass();
            (Some(write_trace(p, out.path, write, &res.arms)?), write)
        }
        None => (None, false),
    };
    Ok((receipt_of(p, res, t0, modules0, busy_overlap)?, wrote))
}

/// The receipt of a gate's result (`t0`: when the gate started; `modules0`: the module
/// counters then; `busy_overlap`: each arm's, from a trace).
pub fn receipt_of(
    p: &Prepared,
    res: arms::GateResult,
    t0: Instant,
    modules0: Option<ModuleStats>,
    busy_overlap: Option<Vec<f64>>,
) -> Result<Receipt> {
    let total_ms = t0.elapsed().as_secs_f64() * 1e3 + p.load_ms;
    let pl = &p.spec.placement;
    let m = &p.model;
    let n = pl.n_stages();
    let stage_weight_bytes = (0..n)
        .map(|s| m.stage_weight_bytes(pl.layers(s), s == 0, s == n - 1))
        .collect();
    let pass = res.pass();
    let has = |k: ArmKind| p.spec.arms.contains(&k);
    Ok(Receipt {
        schema: receipt::SCHEMA.to_string(),
        tool: tool_info(),
        backend: backend_info(p),
        model: p.model_info.clone(),
        placement: PlacementInfo {
            stages: n,
            fence: pl.fence.clone(),
            devices: pl.devices.clone(),
            transports: pl.transports.iter().map(|t| t.name().to_string()).collect(),
            stage_weight_bytes,
            flags: pl.to_flags(),
            resident: stage_resident(pl, res.first_stage, &res.resident),
            misplaced: res.misplaced.clone(),
            processes: None,
        },
        config: ConfigInfo {
            arms: p.spec.arms.iter().map(|a| a.name().to_string()).collect(),
            window: p.spec.window,
            batch: p.spec.batch,
            // As given: with a tape it still sets the seeded prompts of batch rows 1..B.
            prompt_len: p.spec.prompt_len,
            gen_len: p.spec.gen_len,
            seed: p.spec.seed,
            topk: p.spec.topk,
            tape: p.args.tape.as_ref().map(|t| t.display().to_string()),
            faults: p.spec.faults.iter().map(|f| f.name().to_string()).collect(),
            chunks: has(ArmKind::Prime).then(|| p.spec.prime_chunks()),
            repeat: has(ArmKind::Prime).then_some(p.spec.repeat),
            draft: has(ArmKind::Verify).then_some(p.spec.draft),
        },
        reference: res.reference,
        batch_references: res.batch_references,
        arms: res.arms,
        verdict: if pass { "PASS" } else { "FAIL" }.into(),
        timings: Timings {
            load_ms: p.load_ms,
            build_ms: res.build_ms,
            reference_ms: res.reference_ms,
            arm_ms: res.arm_ms,
            total_ms,
            busy_overlap,
            modules: p
                .be
                .module_stats()
                .zip(modules0)
                .map(|(now, before)| now.since(&before)),
        },
    })
}

/// The receipt's form of measured residency, per stage from `first`.
pub fn stage_resident(
    pl: &Placement,
    first: usize,
    resident: &[crate::backend::Residency],
) -> Vec<StageResident> {
    (first..)
        .zip(resident)
        .map(|(s, r)| {
            let db = |l: &[(Option<usize>, u64)]| {
                l.iter()
                    .map(|&(device, bytes)| DevBytes { device, bytes })
                    .collect()
            };
            StageResident {
                stage: s,
                placed: pl.devices[s],
                weights: db(&r.weights),
                scratch: db(&r.scratch),
                cache: db(&r.cache),
            }
        })
        .collect()
}

/// `--trace FILE`: writes the trace (atomically, when `write`) and returns each arm's busy
/// overlap.
fn write_trace(p: &Prepared, path: &Path, write: bool, arms: &[receipt::Arm]) -> Result<Vec<f64>> {
    let tr =
        p.be.trace()?
            .ok_or_else(|| anyhow!("--trace {}: the backend kept no trace", path.display()))?;
    if write {
        receipt::write_atomic(path, tr.to_json().as_bytes())
            .with_context(|| format!("--trace {}", path.display()))?;
    }
    Ok(arms
        .iter()
        .map(|a| tr.overlap(&a.name).unwrap_or(0.0))
        .collect())
}

/// This binary, as receipts name it.
pub fn tool_info() -> Tool {
    Tool {
        name: "ppn-gate".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("PPN_GIT_COMMIT").into(),
    }
}

/// The backend and the devices of the placement, as receipts name them.
pub fn backend_info(p: &Prepared) -> BackendInfo {
    BackendInfo {
        kind: p.be.kind().into(),
        device_names: p
            .spec
            .placement
            .devices
            .iter()
            .map(|&d| p.be.device_name(d))
            .collect(),
        jitter_us: p.args.jitter_us,
        graphs: match &p.be {
            AnyBackend::Cpu(_) => None,
            AnyBackend::Cuda(b) => Some(b.graphs_note().into()),
        },
        mma: match &p.be {
            AnyBackend::Cpu(_) => None,
            AnyBackend::Cuda(b) => Some(b.mma_note(p.model.cfg.n_embd)),
        },
    }
}

/// One verdict line per misplaced allocation (the gate then ran no arm), then one per arm.
pub fn verdict_lines(r: &Receipt) -> Vec<String> {
    let placement = r
        .placement
        .misplaced
        .iter()
        .map(|m| format!("{:<10} FAIL  {m}", "placement"));
    placement
        .chain(r.arms.iter().map(|a| {
            let n = a.steps.len();
            let rounds = if a.rounds.is_empty() {
                String::new()
            } else {
                let acc: usize = a.rounds.iter().map(|r| r.accepted).sum();
                let drafted: usize = a.rounds.iter().map(|r| r.drafted.len()).sum();
                format!("; {} rounds, {acc}/{drafted} drafts accepted", a.rounds.len())
            };
            let lost = a.rounds.iter().find(|r| r.accepted != r.expected);
            // An arm that alone computed NaN/Inf says so (the reference is checked finite).
            let nf = (a.non_finite.as_ref()).map_or(String::new(), |x| format!("; {}", x.describe()));
            match (&a.first_divergence, lost) {
                (None, None) => format!(
                    "{:<10} {}  {n}/{n} steps bit-identical{rounds}",
                    a.name, a.verdict
                ),
                (Some(d), _) => format!(
                    "{:<10} {}  first divergence at step {}{} row {}: logit[{}] ref {:e} got {:e}; {}/{n} steps differ{nf}{rounds}",
                    a.name, a.verdict, d.step, d.key.describe(), d.row, d.index, d.reference, d.got, a.mismatched_steps
                ),
                (None, Some(r)) => format!(
                    "{:<10} {}  round {} at position {} accepted {} drafts, the reference implies {}{rounds}",
                    a.name, a.verdict, r.round, r.start, r.accepted, r.expected
                ),
            }
        }))
        .collect()
}

pub fn default_receipt_path(prefix: &str) -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    PathBuf::from("receipts/runs").join(format!("{prefix}-{t}-{}.json", std::process::id()))
}

pub fn run_cli(args: &GateArgs) -> Result<i32> {
    let p = prepare(args)?;
    if !args.quiet {
        eprintln!(
            "ppn-gate: {} backend, model {} ({}, {} layers), {}, transports [{}], arms {}, {} steps",
            p.be.kind(),
            p.model_info.file,
            p.model_info.arch,
            p.model_info.n_layers,
            p.spec.placement.to_flags(),
            crate::dist::transport_names(&p.args, &p.spec.placement).join(","),
            args.arms,
            p.spec.steps()
        );
    }
    if args.rank.is_some() {
        return crate::dist::member(&p);
    }
    let r = run_prepared(&p, &mut |_| {})?;
    emit(args, &r)
}

/// Write a gate's receipt (`--receipt`, else a new file under receipts/runs/), print its
/// verdict lines; the exit code of its verdict.
pub fn emit(args: &GateArgs, r: &Receipt) -> Result<i32> {
    let path = args
        .receipt
        .clone()
        .unwrap_or_else(|| default_receipt_path("gate"));
    r.write(&path)?;
    for l in verdict_lines(r) {
        outln!("{l}");
    }
    outln!("receipt: {}", path.display());
    if !args.quiet {
        for l in crate::dist::describe(r) {
            eprintln!("ppn-gate: {l}");
        }
    }
    if let (Some(t), Some(o)) = (&args.trace, &r.timings.busy_overlap) {
        let per_arm: Vec<String> = r
            .arms
            .iter()
            .zip(o)
            .map(|(a, f)| format!("{} {:.0}%", a.name, f * 100.0))
            .collect();
        outln!(
            "trace: {} (wall time with 2+ stages busy: {})",
            t.display(),
            per_arm.join(", ")
        );
    }
    Ok(if r.verdict == "PASS" {
        EXIT_PASS
    } else {
        EXIT_FAIL
    })
}

pub fn inspect(file: &Path, tensors: bool) -> Result<i32> {
    let f = GgufFile::open(file).with_context(|| format!("inspect {}", file.display()))?;
    outln!(
        "file: {} (GGUF v{}, {} bytes)",
        file.display(),
        f.version,
        f.bytes().len()
    );
    outln!("alignment: {}, data offset: {}", f.alignment, f.data_offset);
    match Model::load(&f) {
        Ok(m) => {
            let c = &m.cfg;
            outln!(
                "architecture: {} — {} layers, n_embd {}, heads {} (kv {}), head_dim {}, ff {}, vocab {}",
                c.arch, c.n_layers, c.n_embd, c.n_heads, c.n_kv_heads, c.head_dim, c.n_ff, c.vocab
            );
            outln!("weight bytes: {}", m.weight_bytes);
        }
        Err(e) => outln!("architecture: not loadable as a supported model: {e}"),
    }
    let mut by_type: std::collections::BTreeMap<String, (usize, u64)> = Default::default();
    for t in &f.tensors {
        let e = by_type.entry(t.ty.name().to_string()).or_default();
        e.0 += 1;
        e.1 += t.n_bytes;
    }
    outln!("tensors: {}", f.tensors.len());
    for (ty, (n, b)) in &by_type {
        outln!("  {ty:<6} {n:>5} tensors {b:>12} bytes");
    }
    outln!("metadata ({} keys):", f.metadata.len());
    for (k, v) in &f.metadata {
        outln!("  {k} = {}", short_value(v));
    }
    if tensors {
        for t in &f.tensors {
            outln!(
                "  {:<40} {:<6} {:?} {} bytes @ {}",
                t.name,
                t.ty.name(),
                t.dims,
                t.n_bytes,
                t.offset
            );
        }
    }
    Ok(EXIT_PASS)
}

fn short_value(v: &crate::gguf::Value) -> String {
    use crate::gguf::Value;
    match v {
        Value::Array(_, items) if items.len() > 8 => {
            format!(
                "[{} items: {}, ...]",
                items.len(),
                items[..3]
                    .iter()
                    .map(short_value)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        Value::Array(_, items) => format!(
            "[{}]",
            items.iter().map(short_value).collect::<Vec<_>>().join(", ")
        ),
        Value::String(s) if s.len() > 80 => format!(
            "{:?}...",
            &s[..s.char_indices().nth(77).map(|x| x.0).unwrap_or(s.len())]
        ),
        Value::String(s) => format!("{s:?}"),
        other => format!("{other:?}")
            .split('(')
            .nth(1)
            .map(|x| x.trim_end_matches(')').to_string())
            .unwrap_or_default(),
    }
}

pub fn synth(a: &SynthArgs) -> Result<i32> {
    let arch = match a.arch.as_deref() {
        None => None,
        Some(name) => Some(Arch::from_name(name).ok_or_else(|| {
            anyhow!(
                "--arch {name:?}: expected one of {}",
                Arch::ALL.map(|a| a.name()).join(", ")
            )
        })?),
    };
    let quant = SynthQuant::from_name(&a.quant).ok_or_else(|| {
        anyhow!(
            "--quant {:?}: unknown type (one of {})",
            a.quant,
            SynthQuant::names()
        )
    })?;
    let base = builtin_spec();
    let p = match a.preset.as_deref() {
        None => None,
        Some(name) => Some(preset(name).ok_or_else(|| {
            anyhow!(
                "--preset {name:?}: unknown (one of {})",
                PRESETS.map(|p| p.name).join(", ")
            )
        })?),
    };
    let pick = |flag: Option<usize>, of_preset: fn(&Preset) -> usize, builtin: usize| {
        flag.or(p.as_ref().map(of_preset)).unwrap_or(builtin)
    };
    let spec = SynthSpec {
        arch: arch.or(p.map(|p| p.arch)).unwrap_or(Arch::Llama),
        layers: pick(a.layers, |p| p.layers, base.layers),
        embd: pick(a.embd, |p| p.embd, base.embd),
        heads: pick(a.heads, |p| p.heads, base.heads),
        kv_heads: pick(a.kv_heads, |p| p.kv_heads, base.kv_heads),
        ff: pick(a.ff, |p| p.ff, base.ff),
        vocab: pick(a.vocab, |p| p.vocab, base.vocab),
        quant,
        seed: a.seed,
        head_dim: a.head_dim,
        tied: a.tied,
        rope_freqs: a.rope_freqs,
    };
    let t0 = Instant::now();
    let bytes = synth_gguf_for_tools(&spec)?;
    // Load what we wrote before declaring success: a synth that writes an unloadable file
    // would only fail later, far from its cause.
    let f = GgufFile::parse(bytes).context("re-reading the synthetic model")?;
    let m = Model::load(&f).context("loading the synthetic model")?;
    let bytes = f.bytes();
    receipt::write_atomic(&a.output, bytes)
        .with_context(|| format!("writing {}", a.output.display()))?;
    outln!(
        "wrote {} ({} bytes, blake3 {}) in {:.1} s: {}",
        a.output.display(),
        bytes.len(),
        m.file_blake3,
        t0.elapsed().as_secs_f64(),
        spec_flags(&spec)
    );
    Ok(EXIT_PASS)
}

#[cfg(test)]
mod tests {
    use super::{mma_mode, on_off, prime_rows, MmaMode};
    use crate::cli::Cli;
    use clap::Parser;

    /// `--pdl`/`--graphs` default on; only "on" and "off" parse, anything else is an error
    /// naming the flag and the value.
    #[test]
    fn on_off_flags_take_their_default_and_name_bad_values() {
        assert!(on_off("--pdl", &None).unwrap());
        assert!(!on_off("--graphs", &Some("off".into())).unwrap());
        let e = on_off("--graphs", &Some("yes".into())).unwrap_err();
        assert_eq!(e.to_string(), "--graphs \"yes\": expected on or off");
    }

    /// `--mma` defaults to auto; on and off are what they say; anything else names the
    /// value (what auto selects: backend::cuda::tests).
    #[test]
    fn mma_defaults_to_auto_and_names_bad_values() {
        assert_eq!(mma_mode(&None).unwrap(), MmaMode::Auto);
        assert_eq!(mma_mode(&Some("auto".into())).unwrap(), MmaMode::Auto);
        assert_eq!(mma_mode(&Some("on".into())).unwrap(), MmaMode::On);
        assert_eq!(mma_mode(&Some("off".into())).unwrap(), MmaMode::Off);
        let e = mma_mode(&Some("yes".into())).unwrap_err();
        assert_eq!(e.to_string(), "--mma \"yes\": expected on, off or auto");
    }

    /// What `--mma auto` reads off the flags: the prime arm's largest chunk as it runs
    /// (default: the whole prompt; every chunk at most --prompt-len), 0 without a prime arm.
    #[test]
    fn prime_rows_is_the_largest_chunk_the_prime_arm_runs() {
        let rows = |flags: &str| {
            let cli =
                Cli::try_parse_from(std::iter::once("ppn-gate").chain(flags.split(' '))).unwrap();
            prime_rows(&cli.gate).unwrap()
        };
        assert_eq!(rows("--arms eager,batched --chunk 512"), 0);
        assert_eq!(rows("--arms prime --chunk 8,512,16 --prompt-len 512"), 512);
        assert_eq!(rows("--arms eager,prime --prompt-len 100"), 100);
        assert_eq!(rows("--arms prime --chunk 512 --prompt-len 40"), 40);
        assert_eq!(rows("--arms verify --prompt-len 100"), 0);
        let cli = Cli::try_parse_from(["ppn-gate", "--arms", "prime", "--chunk", "8,x"]).unwrap();
        assert!(prime_rows(&cli.gate)
            .unwrap_err()
            .to_string()
            .contains("--chunk"));
    }
}
