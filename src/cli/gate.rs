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
pub use crate::backend::any::AnyBackend;
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
/// (`arms::prime_chunk_sizes` of `--chunk` and the prompt by the one rule for tapes,
/// `args_prompt_len`: a tape's `prompt_len`, else `--prompt-len`). From the flags and the
/// tape file alone, so every process and engine of a run agrees. A bad `--arms` is named
/// later by `check_on`.
fn prime_rows(args: &GateArgs) -> Result<usize> {
    let primes = args
        .arms
        .split(',')
        .any(|a| ArmKind::parse(a.trim()) == Some(ArmKind::Prime));
    if !primes {
        return Ok(0);
    }
    let chunks = list_flag("--chunk", &args.chunk)?;
    let sizes = arms::prime_chunk_sizes(chunks.as_deref(), args_prompt_len(args)?);
    Ok(sizes.into_iter().max().unwrap_or(0))
}

pub fn open_backend(args: &GateArgs) -> Result<AnyBackend> {
    super::bounds::flags(args)?;
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

/// The largest tape file read (a token id takes a few bytes of JSON, so this is millions
/// of positions, far past any model's context; an oracle tape's per-step top-k fits many
/// thousand steps). Checked before the file is parsed, so a huge or endless file (a device,
/// a FIFO) costs no more than this much memory.
pub const TAPE_MAX_BYTES: u64 = 16 << 20;

/// The prompt length when neither a tape's `prompt_len` nor `--prompt-len` gives one.
pub const DEFAULT_PROMPT_LEN: usize = 8;

/// A token tape as read from its file: row 0's tokens and, when the file says, how many of
/// them are the prompt. Its bounds against a model (vocab, context length): `check_tape`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tape {
    pub tokens: Vec<u32>,
    pub prompt_len: Option<usize>,
}

/// A JSON value's kind, for errors that name what a field holds instead of what it needs.
fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value as J;
    match v {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(_) => "a number",
        J::String(_) => "a string",
        J::Array(_) => "an array",
        J::Object(_) => "an object",
    }
}

/// A JSON value as errors quote it: short, whatever its size.
fn json_short(v: &serde_json::Value) -> String {
    let t = v.to_string();
    match t.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t,
    }
}

/// Read a tape file: a JSON object with a `tokens` or a `tape` array of token ids (each a
/// non-negative integer that fits a u32) and an optional `prompt_len` (1 up to the tape's
/// length). The file is at most TAPE_MAX_BYTES and UTF-8. Every breach is an error naming
/// the file and the field; nothing here panics on any input.
pub fn read_tape(path: &Path) -> Result<Tape> {
    use std::io::Read as _;
    let name = || format!("--tape {}", path.display());
    let f = std::fs::File::open(path).with_context(name)?;
    // Read one byte past the cap (not what the metadata says: a FIFO or a device has no
    // length), so a file over it is refused having read no more than that.
    let mut bytes = Vec::new();
    f.take(TAPE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(name)?;
    if bytes.len() as u64 > TAPE_MAX_BYTES {
        let size = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map_or_else(
                || "more than".to_string(),
                |m| format!("{} bytes, over", m.len()),
            );
        bail!(
            "{}: {size} the limit of {TAPE_MAX_BYTES} bytes for a tape",
            name()
        );
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        anyhow!(
            "{}: not UTF-8 text (invalid byte at offset {})",
            name(),
            e.valid_up_to()
        )
    })?;
    let v: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{}: not valid JSON", name()))?;
    let obj = v.as_object().ok_or_else(|| {
        anyhow!(
            "{}: the top level is {}, need a JSON object with a `tokens` or `tape` array",
            name(),
            json_kind(&v)
        )
    })?;
    let key = match (obj.get("tokens"), obj.get("tape")) {
        (Some(_), Some(_)) => bail!(
            "{}: has both `tokens` and `tape`: give the token ids once",
            name()
        ),
        (Some(_), None) => "tokens",
        (None, Some(_)) => "tape",
        (None, None) => bail!("{}: no `tokens` or `tape` array", name()),
    };
    let arr = obj[key].as_array().ok_or_else(|| {
        anyhow!(
            "{}: `{key}` is {}, need an array of token ids",
            name(),
            json_kind(&obj[key])
        )
    })?;
    let mut tokens = Vec::with_capacity(arr.len());
    for (i, t) in arr.iter().enumerate() {
        let id = t
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| {
                anyhow!(
                    "{}: `{key}` entry {i} ({}) is not a token id (a non-negative integer)",
                    name(),
                    json_short(t)
                )
            })?;
        tokens.push(id);
    }
    if tokens.is_empty() {
        bail!("{}: `{key}` is empty: the tape is empty", name());
    }
    let prompt_len = match obj.get("prompt_len") {
        None => None,
        Some(p) => {
            let n = p.as_u64().ok_or_else(|| {
                anyhow!(
                    "{}: `prompt_len` ({}) is not a non-negative integer",
                    name(),
                    json_short(p)
                )
            })?;
            if n == 0 || n > tokens.len() as u64 {
                bail!(
                    "{}: `prompt_len` {n}: must be in 1..={} (the tape's {} tokens)",
                    name(),
                    tokens.len(),
                    tokens.len()
                );
            }
            Some(n as usize)
        }
    };
    Ok(Tape { tokens, prompt_len })
}

/// A tape's bounds against the model: every id below the vocab size, and no more positions
/// than the model's context length (`context_length` 0: the model names none).
pub fn check_tape(t: &Tape, path: &Path, vocab: usize, context_length: usize) -> Result<()> {
    for (i, &id) in t.tokens.iter().enumerate() {
        if id as usize >= vocab {
            bail!(
                "--tape {}: entry {i} ({id}) is not a token id below the vocab size {vocab}",
                path.display()
            );
        }
    }
    if context_length > 0 && t.tokens.len() > context_length {
        bail!(
            "--tape {}: {} tokens, more than the model's context length {context_length} (its GGUF `context_length`)",
            path.display(),
            t.tokens.len()
        );
    }
    Ok(())
}

/// Row 0's prompt length by the one rule for tapes: a tape's own `prompt_len`; else
/// `--prompt-len` (default DEFAULT_PROMPT_LEN; with a tape the default is at most the
/// tape's length, a given value longer than the tape is refused). A `--prompt-len` given
/// beside a tape's `prompt_len` must equal it. 0 is refused. `tape`: the tape read from
/// `--tape`, when there is one.
pub fn gate_prompt_len(args: &GateArgs, tape: Option<&Tape>) -> Result<usize> {
    let given = args.prompt_len;
    let path = || {
        args.tape
            .as_deref()
            .map_or_else(String::new, |p| p.display().to_string())
    };
    if given == Some(0) {
        bail!("--prompt-len 0: need at least one prompt token");
    }
    let Some(t) = tape else {
        return Ok(given.unwrap_or(DEFAULT_PROMPT_LEN));
    };
    match (t.prompt_len, given) {
        (Some(own), Some(g)) if g != own => bail!(
            "--prompt-len {g} contradicts --tape {}, whose `prompt_len` is {own}: leave --prompt-len out (the tape sets it) or give {own}",
            path()
        ),
        (Some(own), _) => Ok(own),
        (None, Some(g)) if g > t.tokens.len() => bail!(
            "--prompt-len {g}: longer than --tape {} ({} tokens, no `prompt_len`)",
            path(),
            t.tokens.len()
        ),
        (None, Some(g)) => Ok(g),
        (None, None) => Ok(DEFAULT_PROMPT_LEN.min(t.tokens.len())),
    }
}

/// `gate_prompt_len` reading `--tape` itself (where no tape has been read yet).
pub fn args_prompt_len(args: &GateArgs) -> Result<usize> {
    let tape = args.tape.as_deref().map(read_tape).transpose()?;
    gate_prompt_len(args, tape.as_ref())
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
    // The tape's own bounds and the one prompt rule need no model: a battery finds a
    // contradicting --prompt-len before its first gate runs (the vocab and context length
    // are checked against the model in `prepare_model`).
    args_prompt_len(args)?;
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
    let tape = match args.tape.as_deref() {
        Some(p) => {
            let t = read_tape(p)?;
            check_tape(&t, p, cfg.vocab, cfg.context_length)?;
            Some(t)
        }
        None => None,
    };
    let prompt_len = gate_prompt_len(args, tape.as_ref())?;
    let spec = GateSpec {
        placement,
        arms: c.arms,
        window: args.window,
        batch: args.batch,
        prompt_len,
        gen_len: if tape.is_some() { 0 } else { args.gen_len },
        seed: args.seed,
        topk: args.topk,
        tape: tape.map(|t| t.tokens),
        faults: c.faults,
        chunks: list_flag("--chunk", &args.chunk)?,
        repeat: args.repeat,
        draft: args.draft,
        dist: None,
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    // Bounds before work: positions against the context length, the run's bytes against
    // the host's free memory (the members of `--procs W` all run on this host).
    spec.check_positions(cfg).map_err(anyhow::Error::msg)?;
    super::bounds::gate_memory(
        &spec,
        cfg,
        matches!(be, AnyBackend::Cuda(_)),
        args.procs.unwrap_or(1),
    )?;
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
    // The prompt as resolved, as if given: a member of a multi-process gate gets it as its
    // --prompt-len (`dist::member_argv`) and refuses a tape that says otherwise, so every
    // member walks the same prompt.
    let mut args = args.clone();
    args.prompt_len = Some(prompt_len);
    Ok(Prepared {
        args,
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
            // Row 0's prompt by the one rule for tapes (a tape's own `prompt_len`, else
            // --prompt-len); also the length of the seeded prompts of batch rows 1..B.
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
    // The outputs are checked before any work: a receipt or trace that cannot be written
    // must not be found after the whole gate ran.
    let default = default_receipt_path("gate");
    crate::fsio::check_writable("--receipt", args.receipt.as_ref().unwrap_or(&default))?;
    if let Some(t) = &args.trace {
        crate::fsio::check_writable("--trace", t)?;
    }
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
    // Bounds before work: the model's bytes against the host's free memory (saturating: a
    // hostile shape reads as too large; the shape's own rules are synth's, checked next).
    let head_dim = spec.head_dim.unwrap_or(spec.embd / spec.heads.max(1));
    let (q_dim, kv_dim) = (
        spec.heads.saturating_mul(head_dim),
        spec.kv_heads.saturating_mul(head_dim),
    );
    // Bytes per 1024 elements of the widest type the mix writes (q4_k_m: Q6_K).
    let ty = match quant {
        SynthQuant::Uniform(t) => t,
        SynthQuant::Q4KM => crate::quant::GgmlType::Q6K,
    };
    let per_1k = 1024 / ty.block_len() * ty.block_bytes();
    super::bounds::synth_memory(
        super::bounds::synth_bytes(
            spec.layers,
            spec.embd,
            q_dim,
            kv_dim,
            spec.ff,
            spec.vocab,
            per_1k,
        ),
        &format!(
            "--layers {} --embd {} --heads {} --kv-heads {} --ff {} --vocab {}",
            spec.layers, spec.embd, spec.heads, spec.kv_heads, spec.ff, spec.vocab
        ),
    )?;
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
    use super::{
        check_tape, gate_prompt_len, mma_mode, on_off, prime_rows, read_tape, MmaMode, Tape,
        TAPE_MAX_BYTES,
    };
    use crate::cli::Cli;
    use clap::Parser;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn gate_args(flags: &[&str]) -> crate::cli::GateArgs {
        Cli::try_parse_from(std::iter::once("ppn-gate").chain(flags.iter().copied()))
            .unwrap()
            .gate
    }

    /// The one rule for tapes: a tape's own `prompt_len` wins; --prompt-len may repeat it but
    /// not contradict it (the error names both values); a tape without one takes the flag
    /// (refused when longer than the tape) or the default 8 (at most the tape); no tape:
    /// the flag or 8; 0 is refused either way.
    #[test]
    fn prompt_len_follows_the_one_rule_for_tapes() {
        let tape = |n: usize, own: Option<usize>| Tape {
            tokens: vec![1; n],
            prompt_len: own,
        };
        let pl = |flags: &[&str], t: Option<&Tape>| gate_prompt_len(&gate_args(flags), t);
        let tf = ["--tape", "t.json"];
        assert_eq!(pl(&[], None).unwrap(), 8);
        assert_eq!(pl(&["--prompt-len", "3"], None).unwrap(), 3);
        assert_eq!(pl(&tf, Some(&tape(40, Some(24)))).unwrap(), 24);
        assert_eq!(
            pl(
                &["--tape", "t.json", "--prompt-len", "24"],
                Some(&tape(40, Some(24)))
            )
            .unwrap(),
            24
        );
        let e = pl(
            &["--tape", "t.json", "--prompt-len", "8"],
            Some(&tape(40, Some(24))),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--prompt-len 8") && e.contains("`prompt_len` is 24"),
            "{e}"
        );
        assert!(e.contains("t.json"), "{e}");
        assert_eq!(pl(&tf, Some(&tape(40, None))).unwrap(), 8);
        assert_eq!(pl(&tf, Some(&tape(5, None))).unwrap(), 5);
        assert_eq!(
            pl(
                &["--tape", "t.json", "--prompt-len", "30"],
                Some(&tape(40, None))
            )
            .unwrap(),
            30
        );
        let e = pl(
            &["--tape", "t.json", "--prompt-len", "41"],
            Some(&tape(40, None)),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--prompt-len 41") && e.contains("40 tokens"),
            "{e}"
        );
        for t in [None, Some(tape(40, None)), Some(tape(40, Some(3)))] {
            let e = pl(&["--tape", "t.json", "--prompt-len", "0"], t.as_ref())
                .unwrap_err()
                .to_string();
            assert!(e.contains("--prompt-len 0"), "{e}");
        }
    }

    /// One hostile tape file: its bytes and what the error must name (None: it is a valid
    /// tape, whose tokens and prompt_len must then read back).
    struct Case {
        bytes: Vec<u8>,
        want: Option<String>,
        valid: Option<Tape>,
    }

    const VOCAB: usize = 2048;
    const CTX: usize = 64;

    /// A random JSON value that is not a non-negative integer below 2^32 (a wrong-typed id
    /// or prompt_len), and its text.
    fn not_an_id(rng: &mut ChaCha8Rng) -> String {
        match rng.gen_range(0..9) {
            0 => format!("-{}", rng.gen_range(1..u32::MAX)),
            1 => format!("{}.5", rng.gen_range(0..100)),
            2 => format!("\"{}\"", rng.gen_range(0..100)),
            3 => "null".into(),
            4 => "true".into(),
            5 => format!("[{}]", rng.gen_range(0..100)),
            6 => format!("{{\"id\": {}}}", rng.gen_range(0..100)),
            7 => format!("{}", u64::from(u32::MAX) + rng.gen_range(1..1u64 << 40)),
            _ => "1e300".into(),
        }
    }

    fn ids(rng: &mut ChaCha8Rng, n: usize) -> Vec<u32> {
        (0..n).map(|_| rng.gen_range(0..VOCAB as u32)).collect()
    }

    fn list(v: &[String]) -> String {
        format!("[{}]", v.join(", "))
    }

    fn case(rng: &mut ChaCha8Rng) -> Case {
        let key = if rng.gen_bool(0.5) { "tape" } else { "tokens" };
        let n = rng.gen_range(1..CTX);
        let good = ids(rng, n);
        let text: Vec<String> = good.iter().map(|t| t.to_string()).collect();
        let c = |s: String, want: &str| Case {
            bytes: s.into_bytes(),
            want: Some(want.to_string()),
            valid: None,
        };
        match rng.gen_range(0..16) {
            0 => {
                // A wrong-typed entry at a random index.
                let i = rng.gen_range(0..n);
                let mut t = text.clone();
                t[i] = not_an_id(rng);
                c(
                    format!("{{\"{key}\": {}}}", list(&t)),
                    &format!("`{key}` entry {i} ("),
                )
            }
            1 => {
                // An id at or past the vocab.
                let i = rng.gen_range(0..n);
                let id = rng.gen_range(VOCAB as u64..=u64::from(u32::MAX));
                let mut t = text.clone();
                t[i] = id.to_string();
                c(
                    format!("{{\"{key}\": {}}}", list(&t)),
                    &format!("entry {i} ({id}) is not a token id below the vocab size {VOCAB}"),
                )
            }
            2 => c(
                // prompt_len 0 or past the tape, up to absurd.
                format!(
                    "{{\"{key}\": {}, \"prompt_len\": {}}}",
                    list(&text),
                    if rng.gen_bool(0.3) {
                        0
                    } else {
                        rng.gen_range(n as u64 + 1..=u64::MAX)
                    }
                ),
                &format!("`prompt_len` "),
            ),
            3 => c(
                format!(
                    "{{\"{key}\": {}, \"prompt_len\": {}}}",
                    list(&text),
                    not_an_id(rng)
                ),
                "`prompt_len` ",
            ),
            4 => c(
                format!("{{\"prompt_len\": {}, \"steps\": []}}", rng.gen_range(1..9)),
                "no `tokens` or `tape` array",
            ),
            5 => c(format!("{{\"{key}\": []}}"), &format!("`{key}` is empty")),
            6 => {
                let v = not_an_id(rng);
                let kind = if v.starts_with('[') {
                    // An array of one integer is a valid one-token tape: make it an object.
                    "an object"
                } else {
                    ""
                };
                let v = if kind.is_empty() { v } else { "{}".into() };
                c(format!("{{\"{key}\": {v}}}"), &format!("`{key}` is "))
            }
            7 => {
                // Invalid UTF-8 somewhere in an otherwise plausible file.
                let mut b = format!("{{\"{key}\": {}}}", list(&text)).into_bytes();
                let at = rng.gen_range(0..b.len());
                b.insert(at, [0xff, 0xc0, 0x80, 0xfe][rng.gen_range(0..4)]);
                Case {
                    bytes: b,
                    want: Some("not UTF-8".into()),
                    valid: None,
                }
            }
            8 => {
                // Nested garbage past serde_json's recursion limit.
                let depth = rng.gen_range(200..5000);
                c(
                    format!("{{\"{key}\": {}{}}}", "[".repeat(depth), "]".repeat(depth)),
                    "not valid JSON",
                )
            }
            9 => {
                let s = format!("{{\"{key}\": {}}}", list(&text));
                let cut = rng.gen_range(0..s.len());
                c(s[..cut].to_string(), "not valid JSON")
            }
            10 => c(
                [list(&text), "42".into(), "\"tape\"".into(), "null".into()][rng.gen_range(0..4)]
                    .clone(),
                "the top level is",
            ),
            11 => c(
                format!("{{\"tokens\": {}, \"tape\": {}}}", list(&text), list(&text)),
                "both `tokens` and `tape`",
            ),
            12 => {
                let len = CTX + rng.gen_range(1..100);
                let long = ids(rng, len);
                let t: Vec<String> = long.iter().map(|t| t.to_string()).collect();
                c(
                    format!("{{\"{key}\": {}}}", list(&t)),
                    &format!("more than the model's context length {CTX}"),
                )
            }
            13 => {
                // Random bytes: whatever they are, never a panic (an error or, rarely, a tape).
                let len = rng.gen_range(0..64);
                Case {
                    bytes: (0..len).map(|_| rng.gen()).collect(),
                    want: Some(String::new()),
                    valid: None,
                }
            }
            _ => {
                // Valid, with extra keys an oracle file carries.
                let own = rng.gen_bool(0.5).then(|| rng.gen_range(1..=n));
                let pl = own.map_or(String::new(), |p| format!(", \"prompt_len\": {p}"));
                Case {
                    bytes: format!(
                        "{{\"vocab\": {VOCAB}, \"{key}\": {}{pl}, \"steps\": [{{\"x\": [1]}}]}}",
                        list(&text)
                    )
                    .into_bytes(),
                    want: None,
                    valid: Some(Tape {
                        tokens: good,
                        prompt_len: own,
                    }),
                }
            }
        }
    }

    /// The tape input family, hostile: 2000 seeded random files (wrong types, negative and
    /// out-of-range ids, ids past the vocab, prompt_len 0 or past the tape up to u64::MAX,
    /// missing keys, empty, non-UTF-8, nesting past the parser's limit, truncation, a
    /// non-object top level, both keys, past the context length, random bytes) and as many
    /// random byte mutations of valid files. None panics; each is refused naming the file
    /// and what its case breaks, or (valid) reads back its tokens and prompt_len.
    #[test]
    fn hostile_tapes_never_panic_and_name_the_field() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("t.json");
        let mut rng = ChaCha8Rng::seed_from_u64(25);
        let read = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            read_tape(&path).and_then(|t| check_tape(&t, &path, VOCAB, CTX).map(|_| t))
        };
        let (mut refused, mut valid) = (0, 0);
        for i in 0..2000 {
            let c = case(&mut rng);
            match (read(&c.bytes), &c.want) {
                (Ok(t), None) => {
                    assert_eq!(Some(&t), c.valid.as_ref(), "case {i}");
                    valid += 1;
                }
                (Err(e), Some(want)) => {
                    let e = format!("{e:#}");
                    assert!(
                        e.starts_with(&format!("--tape {}", path.display())),
                        "case {i}: {e}"
                    );
                    assert!(e.contains(want.as_str()), "case {i}: want {want:?} in {e}");
                    refused += 1;
                }
                // Random bytes may (rarely) be a valid tape.
                (Ok(_), Some(w)) if w.is_empty() => {}
                (r, want) => panic!(
                    "case {i} ({:?}): want {want:?}, got {:?}",
                    String::from_utf8_lossy(&c.bytes),
                    r.map_err(|e| format!("{e:#}"))
                ),
            }
            // A mutation of a valid file: an error naming the file, or a tape within bounds.
            let n = rng.gen_range(1..CTX);
            let t: Vec<String> = ids(&mut rng, n).iter().map(|t| t.to_string()).collect();
            let mut b = format!(
                "{{\"prompt_len\": {}, \"tape\": {}}}",
                rng.gen_range(1..=n),
                list(&t)
            )
            .into_bytes();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..b.len());
                match rng.gen_range(0..3) {
                    0 => b[at] = rng.gen(),
                    1 => {
                        b.remove(at);
                    }
                    _ => b.insert(at, b"[]{}\",:-0e9\\"[rng.gen_range(0..12)]),
                }
                if b.is_empty() {
                    break;
                }
            }
            match read(&b) {
                Ok(t) => {
                    assert!(!t.tokens.is_empty() && t.tokens.len() <= CTX);
                    assert!(t.tokens.iter().all(|&id| (id as usize) < VOCAB));
                    assert!(t.prompt_len.map_or(true, |p| p >= 1 && p <= t.tokens.len()));
                }
                Err(e) => {
                    let e = format!("{e:#}");
                    assert!(e.starts_with(&format!("--tape {}", path.display())), "{e}");
                }
            }
        }
        assert!(
            refused > 1500 && valid > 50,
            "refused {refused}, valid {valid}"
        );
    }

    /// A file over the cap is refused naming its size and the limit, before it is parsed;
    /// an endless one (a device) after reading no more than the cap.
    #[test]
    fn a_tape_file_over_the_cap_is_refused_naming_its_size() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("big.json");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(TAPE_MAX_BYTES + 7).unwrap();
        let e = format!("{:#}", read_tape(&path).unwrap_err());
        assert!(
            e.contains(&format!("{} bytes", TAPE_MAX_BYTES + 7))
                && e.contains(&format!("limit of {TAPE_MAX_BYTES} bytes")),
            "{e}"
        );
        let e = format!(
            "{:#}",
            read_tape(std::path::Path::new("/dev/zero")).unwrap_err()
        );
        assert!(
            e.contains(&format!("more than the limit of {TAPE_MAX_BYTES} bytes")),
            "{e}"
        );
        let e = format!("{:#}", read_tape(d.path()).unwrap_err());
        assert!(e.contains("--tape"), "{e}");
    }

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
        // A tape's own prompt_len, the one rule for tapes.
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.json");
        std::fs::write(&t, r#"{"prompt_len": 24, "tape": [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]}"#).unwrap();
        assert_eq!(rows(&format!("--arms prime --tape {}", t.display())), 24);
        assert_eq!(
            rows(&format!("--arms prime --chunk 512 --tape {}", t.display())),
            24
        );
        let cli = Cli::try_parse_from(["ppn-gate", "--arms", "prime", "--chunk", "8,x"]).unwrap();
        assert!(prime_rows(&cli.gate)
            .unwrap_err()
            .to_string()
            .contains("--chunk"));
    }
}
