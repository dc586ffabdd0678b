//! The plan of a gate: its options validated into a `Prepared` (the backend opened, the
//! model loaded, the placement, arms, faults and tokens checked) before any work starts.
//! An invalid value is an error naming its flag (exit 2), never a fallback.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::options::GateOptions;
use super::tape::{args_prompt_len, check_tape, gate_prompt_len, read_tape};
use crate::arms::{self, ArmKind, GateSpec};
use crate::backend::any::AnyBackend;
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::modcache::ModuleCache;
use crate::backend::cuda::{CudaBackend, MmaMode};
use crate::gguf::GgufFile;
use crate::model::synth::{builtin_spec, synth_gguf, SynthSpec};
use crate::model::Model;
use crate::receipt::ModelInfo;
use crate::runtime::fault::Site;
use crate::runtime::placement::{boundary_transports, join, parse_list, stage_devices};
use crate::runtime::{Fault, Placement, TransportChoice};

/// Everything a gate run needs, validated. Soak and battery reuse one `Prepared` (the model
/// is loaded once) and run it repeatedly.
pub struct Prepared {
    pub args: GateOptions,
    pub be: AnyBackend,
    pub model: Arc<Model>,
    pub model_info: ModelInfo,
    pub spec: GateSpec,
    pub load_ms: f64,
    /// Why `--backend auto` chose the CPU (None: it chose CUDA, or the backend was named).
    pub auto_cpu: Option<String>,
}

/// A CUDA on/off flag (`--pdl`, `--graphs`): on when absent; anything but on or off names
/// the value.
pub fn on_off(flag: &str, v: &Option<String>) -> Result<bool> {
    match v.as_deref() {
        None => Ok(true),
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => bail!("{flag} {other:?}: expected on or off"),
    }
}

/// `--mma`: on, off or auto (the default: the Q4_K and Q6_K matrices of models at least
/// MMA_AUTO_MIN_EMBD wide, every format the path takes in runs that prime chunks of at least
/// MMA_AUTO_MIN_ROWS rows); anything else names the value.
pub fn mma_mode(v: &Option<String>) -> Result<MmaMode> {
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
pub fn prime_rows(args: &GateOptions) -> Result<usize> {
    if !args.runs_arm(ArmKind::Prime) {
        return Ok(0);
    }
    let chunks = list_flag("--chunk", &args.chunk)?;
    let sizes = arms::prime_chunk_sizes(chunks.as_deref(), args_prompt_len(args)?);
    Ok(sizes.into_iter().max().unwrap_or(0))
}

/// The most rows a step of the run's batched or serve arm carries (the batched arm's
/// `--batch`, the serve arm's `--max-rows`; 0: neither arm), what `--mma auto` reads besides
/// the width and the prime chunk. From the flags alone, as `prime_rows`.
pub fn batch_rows(args: &GateOptions) -> usize {
    let rows = |arm, n| if args.runs_arm(arm) { n } else { 0 };
    rows(ArmKind::Batched, args.batch()).max(rows(ArmKind::Serve, args.max_rows()))
}

pub fn open_backend(args: &GateOptions) -> Result<AnyBackend> {
    Ok(open_backend_why(args)?.0)
}

/// `open_backend`, and why `--backend auto` chose the CPU (the CUDA open's error: no
/// driver, no device, or what failed), for the header.
pub fn open_backend_why(args: &GateOptions) -> Result<(AnyBackend, Option<String>)> {
    super::bounds::flags(args)?;
    let pdl = on_off("--pdl", &args.pdl)?;
    let graphs = on_off("--graphs", &args.graphs)?;
    let mma = mma_mode(&args.mma)?;
    let mma_rows = prime_rows(args)?;
    let mma_batch = batch_rows(args);
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
                .with_mma_batch(mma_batch)
                .with_module_cache(cache),
        )))
    };
    match args.backend.as_str() {
        "cpu" => Ok((cpu()?, None)),
        // `auto`: CUDA when a driver loads and a device answers, else the CPU backend (the
        // receipt's backend.kind records which one ran; the header says why).
        "auto" => match CudaBackend::open() {
            Ok(be) => Ok((cuda(be)?, None)),
            Err(e) => Ok((cpu()?, Some(format!("{e}")))),
        },
        // Explicit CUDA never falls back: no driver or no device is an error naming why.
        "cuda" => match CudaBackend::open() {
            Ok(be) => Ok((cuda(be)?, None)),
            Err(e) => bail!("--backend cuda: {e}"),
        },
        other => bail!("--backend {other:?}: expected auto, cpu or cuda"),
    }
}

/// Load the model named by `--model`, or build the embedded default.
pub fn load_model(path: Option<&Path>) -> Result<(Arc<Model>, String)> {
    match path {
        Some(p) => {
            super::bounds::hold_model_path(&format!("--model {}", p.display()), p)?;
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

/// The `ppn-gate synth` flags that write `s` again, byte for byte: the shape always, the
/// optional flags only where they differ from their defaults (so the built-in model's name
/// in receipts stays as it was).
pub fn spec_flags(s: &SynthSpec) -> String {
    let mut f = format!(
        "--arch {} --layers {} --embd {} --heads {} --kv-heads {} --ff {} --vocab {} --quant {} --seed {}",
        s.arch, s.layers, s.embd, s.heads, s.kv_heads, s.ff, s.vocab, s.quant, s.seed
    );
    if let Some(hd) = s.head_dim {
        f += &format!(" --head-dim {hd}");
    }
    if s.tied {
        f += " --tied";
    }
    if s.rope_freqs {
        f += " --rope-freqs";
    }
    if let Some(w) = s.sliding_window {
        f += &format!(" --sliding-window {w}");
    }
    f
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
    /// Why `--backend auto` chose the CPU (`open_backend_why`; None from `check_on`).
    pub auto_cpu: Option<String>,
}

pub fn check(args: &GateOptions) -> Result<Checked> {
    let (be, why) = open_backend_why(args)?;
    Ok(Checked {
        auto_cpu: why,
        ..check_on(args, be)?
    })
}

/// `check` on a backend already opened from the same flags.
pub fn check_on(args: &GateOptions, be: AnyBackend) -> Result<Checked> {
    // A flag this run does not read is refused first (the one policy: `policy::FLAG_RULES`).
    super::policy::check_flags(args, super::policy::Reader::Gate)?;
    // The tape's own bounds and the one prompt rule need no model: a battery finds a
    // contradicting --prompt-len before its first gate runs (the vocab and context length
    // are checked against the model in `prepare_model`); so does a chunk or a draft past
    // what that prompt leaves.
    check_prompt_reach(args)?;
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
                "--arms {:?}: unknown arm {:?} (eager, pipelined, batched, prime, verify, serve)",
                args.arms,
                a.trim()
            )
        })?;
        if arms.contains(&k) {
            bail!("--arms {:?}: arm {:?} listed twice", args.arms, a.trim());
        }
        arms.push(k);
    }
    if arms.contains(&ArmKind::Serve) {
        args.serve_spec().check().map_err(anyhow::Error::msg)?;
    }
    let mut faults = Vec::new();
    for f in &args.faults {
        let f = Fault::parse(f)?;
        if let Some(why) = fault_closed(args, &be, &devices, &arms, f) {
            bail!("--fault {f}: {why}");
        }
        // Given twice: refused, as an arm listed twice is (a fault is one law broken once).
        if faults.contains(&f) {
            bail!("--fault {f}: given twice");
        }
        faults.push(f);
    }
    Ok(Checked {
        be,
        devices,
        splits,
        transport,
        arms,
        faults,
        auto_cpu: None,
    })
}

/// Row 0's prompt and positions from the flags and the tape (the one rule for tapes), each
/// with where it comes from in the flags' words, for an error.
pub struct PromptReach {
    pub prompt: usize,
    pub steps: usize,
    /// `--prompt-len 8`, `the default --prompt-len 8`, `the prompt_len 5 of --tape F`, ...
    pub prompt_src: String,
    /// `--prompt-len 8 + --gen-len 4 = 12 positions`, `--tape F: 12 tokens`.
    pub steps_src: String,
}

impl PromptReach {
    pub fn of(args: &GateOptions) -> Result<PromptReach> {
        let tape = args.tape.as_deref().map(read_tape).transpose()?;
        let prompt = gate_prompt_len(args, tape.as_ref())?;
        let path = || {
            args.tape
                .as_deref()
                .map_or(String::new(), |p| p.display().to_string())
        };
        let flag = match args.prompt_len {
            Some(p) => format!("--prompt-len {p}"),
            None => format!("the default --prompt-len {prompt}"),
        };
        Ok(match tape {
            Some(t) => PromptReach {
                prompt,
                steps: t.tokens.len(),
                prompt_src: match (t.prompt_len, args.prompt_len) {
                    (Some(own), _) => format!("the `prompt_len` {own} of --tape {}", path()),
                    (None, Some(_)) => format!("{flag} with --tape {} (no `prompt_len`)", path()),
                    (None, None) => format!(
                        "the default prompt, {} at most the tape's length, of --tape {} (no `prompt_len`)",
                        super::tape::DEFAULT_PROMPT_LEN,
                        path()
                    ),
                },
                steps_src: format!("--tape {}: {} tokens", path(), t.tokens.len()),
            },
            None => {
                let gen = match args.gen_len {
                    Some(g) => format!("--gen-len {g}"),
                    None => format!("the default --gen-len {}", args.gen_len()),
                };
                let steps = prompt.saturating_add(args.gen_len());
                PromptReach {
                    prompt,
                    steps,
                    steps_src: format!("{flag} + {gen} = {steps} positions"),
                    prompt_src: flag,
                }
            }
        })
    }
}

/// The prompt rule (`args_prompt_len`), and a `--chunk` or `--draft` given past what the
/// prompt and positions leave, refused naming the value and the limit (exit 2) rather than
/// cut without a word: a prime chunk holds prompt positions only (a larger one ran as the
/// whole prompt), and a verify round drafts the positions after its input (a larger draft
/// ran as the first round's room). The defaults are cut as documented (the ladder's 8 and 16
/// at most the prompt, `--draft`'s 4 at most the room): a default is never "given".
pub fn check_prompt_reach(args: &GateOptions) -> Result<PromptReach> {
    let r = PromptReach::of(args)?;
    let chunks = list_flag("--chunk", &args.chunk)?;
    if let (Some(list), true) = (&chunks, args.runs_arm(ArmKind::Prime)) {
        // A size twice would run twice under one name in the receipt (its hashes twice):
        // refused as `--arms eager,eager` is.
        if let Some((i, &c)) = list
            .iter()
            .enumerate()
            .find(|(i, c)| list[..*i].contains(c))
        {
            bail!(
                "--chunk {}: size {c} listed twice (entries {} and {})",
                join(list),
                list.iter().position(|x| *x == c).unwrap_or(0) + 1,
                i + 1
            );
        }
        if let Some(&c) = list.iter().find(|&&c| c > r.prompt) {
            bail!(
                "--chunk {}: a chunk of {c} is longer than the {}-position prompt ({}); a prime chunk holds prompt positions only: at most {}",
                join(list),
                r.prompt,
                r.prompt_src,
                r.prompt
            );
        }
    }
    if let (Some(k), true) = (args.draft, args.runs_arm(ArmKind::Verify)) {
        // Round 0's input is position `prompt`; it drafts the positions after it.
        let room = r.steps.saturating_sub(r.prompt).saturating_sub(1);
        if k > room {
            let limit = if room == 0 {
                "none is left to draft: give more positions after the prompt, or leave --draft out"
                    .to_string()
            } else {
                format!("at most {room}")
            };
            bail!(
                "--draft {k}: more drafts than a verify round can hold: the first round's input is position {} ({}), leaving {room} position(s) after it ({}); {limit}",
                r.prompt,
                r.prompt_src,
                r.steps_src
            );
        }
    }
    Ok(r)
}

/// What the tape and the prompt make of the multi-row arms, known from the flags: whether
/// a prime chunk carries two or more rows (a 1-token prompt, or `--chunk 1`, primes one row
/// a step), whether a verify round drafts anything (a round with no position after its
/// input is one row and rolls nothing back), and what the serve arm's schedule (fixed by
/// the flags and the seed) puts in a step. A fault of those steps cannot open without them
/// (found by `ppn-gate hunt`: a `no-rollback` verify gate on a 1-token tape, a verify gate
/// of one generated position, a `chunk-kv-order` serve gate of 1-token prompts and a
/// `row-count-order` serve gate of one request all PASSed). A tape, prompt or serve flag the
/// gate will refuse counts as open (the gate names the real error).
struct StepShape {
    prime_multi_row: bool,
    /// The prompt is two or more positions: verify primes it as one chunk of that many
    /// rows, every row's logits checked.
    prompt_rows: bool,
    verify_drafts: bool,
    /// The tape's positions: the pipelined and batched arms keep at most this many steps
    /// in flight, less the first (nothing is in flight before it), whatever --window says
    /// (a window past the tape is allowed, and keeps every step in flight).
    steps: usize,
    /// The prime arm's walk, in steps (every chunk size and repeat: the chunks, then one
    /// step a position to the tape's end), as steps of distinct data.
    prime_steps: usize,
    /// The serve arm's schedule, in steps.
    serve_steps: usize,
    /// The serve schedule has a step of two or more rows (any requests).
    serve_rows: bool,
    /// The serve schedule has a step of two or more rows of one request (a prefill chunk).
    serve_seq_rows: bool,
    /// ... and one where a row reading a sibling's slot early reads another value
    /// (`ServeShape::race_lands`).
    serve_race_lands: bool,
}

impl StepShape {
    fn of(args: &GateOptions) -> StepShape {
        let Ok(PromptReach { prompt, steps, .. }) = PromptReach::of(args) else {
            return StepShape::OPEN;
        };
        let chunks = list_flag("--chunk", &args.chunk).ok().flatten();
        let serve = if args.runs_arm(ArmKind::Serve) {
            serve_shape(args, prompt)
        } else {
            ServeShape::default()
        };
        let sizes = crate::arms::prime_chunk_sizes(chunks.as_deref(), prompt);
        // `prime_plan`'s length; a --repeat the gate refuses counts as open.
        let prime_walk = |c: usize| {
            prompt
                .div_ceil(c.max(1))
                .saturating_add(steps - prompt.min(steps))
        };
        let prime_steps = match (args.repeat(), sizes.as_slice()) {
            (0, _) => usize::MAX,
            // One chunk size: the repeats are the same walk again (same positions, rows and
            // tokens from an empty cache), so step s + L carries step s's data (L the walk's
            // length) and an overwrite L steps later changes nothing. A walk of L <= 2 then
            // shows at most L steps in flight (a hunt blind spot: `--arms prime
            // --prompt-len 1 --gen-len 1 --fault no-war-guard` PASSed 3/3).
            (r, &[c]) if r >= 2 && prime_walk(c) <= 2 => prime_walk(c) + 1,
            (r, _) => sizes.iter().fold(0usize, |n, &c| {
                n.saturating_add(prime_walk(c).saturating_mul(r))
            }),
        };
        StepShape {
            prime_multi_row: sizes.iter().any(|&c| c > 1),
            prompt_rows: prompt >= 2,
            // Round 0's input is position `prompt`; it drafts the positions after it.
            verify_drafts: steps > prompt.saturating_add(1),
            steps,
            prime_steps,
            serve_steps: serve.steps,
            serve_rows: serve.rows,
            serve_seq_rows: serve.seq_rows,
            serve_race_lands: serve.race_lands,
        }
    }

    const OPEN: StepShape = StepShape {
        prime_multi_row: true,
        prompt_rows: true,
        verify_drafts: true,
        steps: usize::MAX,
        prime_steps: usize::MAX,
        serve_steps: usize::MAX,
        serve_rows: true,
        serve_seq_rows: true,
        serve_race_lands: true,
    };
}

/// The serve arm's schedule (the one the gate will walk: prompts of 1..=prompt, generated
/// 0..=--gen-len, none with a tape) as the fault rule reads it.
#[derive(Default)]
struct ServeShape {
    steps: usize,
    /// A step of two or more rows.
    rows: bool,
    /// A step of two or more rows of one request (a prefill chunk).
    seq_rows: bool,
    /// A step of two or more rows of one request (a prefill chunk) where a row that reads a
    /// sibling's slot before the sibling stored it reads another value than the sibling's:
    /// the request's cache row is the first it hosts (the arm clears the cache first: zeros),
    /// or a read slot is past position 0. Why not position 0 of a reused row: every prompt
    /// starts with the model's BOS where it has one (`seeded_prompt`), so each request's
    /// position 0 holds the same key/value, and the stale slot the race reads is the right
    /// one (a hunt blind spot, seed 71's sweep: `--arms serve --prompt-len 2 --max-rows 2
    /// --prefill-chunk 2 --seed 2 --fault chunk-kv-order` PASSed, its two-row prefills both
    /// [0, 1] in reused rows).
    race_lands: bool,
}

/// Flags the serve arm refuses count as open (the gate names the real error).
fn serve_shape(args: &GateOptions, prompt: usize) -> ServeShape {
    let spec = args.serve_spec();
    if spec.check().is_err() {
        return ServeShape {
            steps: usize::MAX,
            rows: true,
            seq_rows: true,
            race_lands: true,
        };
    }
    let sched = crate::arms::serve::schedule(&spec, args.seed, prompt, args.run_gen_len());
    ServeShape {
        steps: sched.steps.len(),
        rows: sched.steps.iter().any(|st| st.rows.len() >= 2),
        seq_rows: serve_prefills(&sched, |_, _| true),
        race_lands: serve_race_lands(&sched),
    }
}

/// Whether a step of `sched` holds two or more rows of one request q whose top position is
/// `top` and `keep(q, top)`.
fn serve_prefills(
    sched: &crate::arms::serve::Schedule,
    keep: impl Fn(usize, usize) -> bool,
) -> bool {
    sched.steps.iter().any(|st| {
        st.rows.iter().any(|&(q, _)| {
            let mine = st.rows.iter().filter(|r| r.0 == q);
            let (n, top) = mine.fold((0, 0), |(n, top), r| (n + 1, top.max(r.1)));
            n >= 2 && keep(q, top)
        })
    })
}

/// `ServeShape::race_lands` of a schedule: a step with two or more rows of one request whose
/// cache row hosts it first, or whose rows reach position 2 (the row there reads slot 1).
fn serve_race_lands(sched: &crate::arms::serve::Schedule) -> bool {
    // The first request each cache row hosts, in admission order.
    let mut first: Vec<Option<usize>> = vec![None; sched.cache_rows];
    for st in &sched.steps {
        for &q in &st.admitted {
            if let Some(f) = sched.requests.get(q).and_then(|r| first.get_mut(r.slot)) {
                f.get_or_insert(q);
            }
        }
    }
    serve_prefills(sched, |q, top| {
        let fresh = sched
            .requests
            .get(q)
            .and_then(|r| first.get(r.slot))
            .is_some_and(|f| *f == Some(q));
        fresh || top >= 2
    })
}

/// What a backend's engines are, as the fault rule reads them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Engines {
    /// Engines reading the model's one host copy, every matvec on the FFMA kernels (cpu).
    HostWeights,
    /// Engines uploading weights (cuda), with their tensor-core mode.
    Cuda(MmaMode),
}

/// Where faults can open in a gate of these flags (stages on `devices`, running `arms` on
/// engines `engine`): the one view `fault_closed` (the gate and hunt) and the selftest's
/// recipes are checked by.
pub(crate) fn site<'a>(
    args: &GateOptions,
    engine: Engines,
    devices: &'a [usize],
    arms: &[ArmKind],
) -> Site<'a> {
    let shape = StepShape::of(args);
    let serve = arms.contains(&ArmKind::Serve);
    let verify = arms.contains(&ArmKind::Verify);
    let prime = arms.contains(&ArmKind::Prime) && shape.prime_multi_row;
    Site {
        devices,
        // Steps in flight, the most of any arm: one where an arm reads each step back before
        // the next (eager; verify, to accept or roll back), else --window, at most the arm's
        // walk less its first step (the tape's positions; prime's plan; serve's schedule):
        // the runtime's write-after-read holds engage only while an earlier step's output is
        // unread, so step s holds for step s + 2's write. Counted from the window alone,
        // `--arms verify`, a window past a 2-position tape, a 3-position tape and a 2-step
        // serve schedule each let no-war-guard or single-slot run and PASS, controls that
        // could not fail.
        in_flight: arms
            .iter()
            .map(|a| {
                let walk = match a {
                    ArmKind::Eager | ArmKind::Verify => return 1,
                    ArmKind::Pipelined | ArmKind::Batched => shape.steps,
                    ArmKind::Prime => shape.prime_steps,
                    ArmKind::Serve => shape.serve_steps,
                };
                args.window().min(walk.saturating_sub(1)).max(1)
            })
            .max()
            .unwrap_or(1),
        uploads_weights: matches!(engine, Engines::Cuda(_)),
        multi_row: prime
            || (verify && (shape.prompt_rows || shape.verify_drafts))
            || (serve && shape.serve_seq_rows),
        // A round's rows after its input are checked only where a draft is accepted, which
        // the model decides (round 0's one draft is always wrong): `--arms verify
        // --prompt-len 1 --gen-len 2 --fault chunk-kv-order` PASSed. Its prompt chunk's
        // rows are all checked.
        seq_rows_checked: prime
            || (verify && shape.prompt_rows)
            || (serve && shape.serve_race_lands),
        rollback: verify && shape.verify_drafts,
        // One batched row, or a serve schedule of one row a step, steps one row at a time.
        batched: (arms.contains(&ArmKind::Batched) && args.batch() >= 2)
            || (serve && shape.serve_rows),
        // Only an explicit --mma on opens mma-row-order: auto may leave a model on the FFMA
        // kernels (decided when it loads), where the fault would plant nothing.
        mma: matches!(engine, Engines::Cuda(MmaMode::On)),
        ffma: matches!(engine, Engines::HostWeights | Engines::Cuda(MmaMode::Off)),
        reuse: serve && args.requests() > args.max_rows(),
    }
}

/// Why fault `f` cannot open in a gate of these flags (stages on `devices`, running `arms`
/// on `be`), in the words of the gate's refusal after `--fault NAME: `; None where it can
/// open. The one rule the gate refuses by and `hunt` draws by.
pub fn fault_closed(
    args: &GateOptions,
    be: &AnyBackend,
    devices: &[usize],
    arms: &[ArmKind],
    f: Fault,
) -> Option<String> {
    let engine = match be {
        AnyBackend::Cuda(b) => Engines::Cuda(b.mma()),
        AnyBackend::Cpu(_) => Engines::HostWeights,
    };
    let site = site(args, engine, devices, arms);
    if let Some(why) = f.cannot_open(&site) {
        return Some(format!(
            "cannot open on --stages {} --devices {}: {why}; {}",
            devices.len(),
            join(devices),
            super::opens::where_it_opens(f, be)
        ));
    }
    let map =
        crate::multiproc::rank_map(devices.len(), args.world()?, args.ranks.as_deref()).ok()?;
    let why = crate::multiproc::fault_cannot_cross(f, &map)?;
    Some(format!(
        "cannot open with stages on ranks {}: {why}",
        join(&map)
    ))
}

/// The multi-process flags checked against each other and the backend; returns the
/// transport of the boundaries inside one process (`--transport ipc|nccl` names the one
/// between processes; inside a process boundaries then take `auto`).
fn check_processes(
    args: &GateOptions,
    be: &AnyBackend,
    n_stages: usize,
) -> Result<TransportChoice> {
    let cross = crate::multiproc::Cross::parse(args.transport());
    let Some(world) = args.world() else {
        if let Some(c) = cross {
            bail!(
                "--transport {}: crosses between processes, and this gate runs in one (add --procs W, or --rank/--world/--rendezvous)",
                c.name()
            );
        }
        if args.ranks.is_some() {
            bail!("--ranks: places stages on the processes of a multi-process gate (add --procs W, or --rank/--world/--rendezvous)");
        }
        return Ok(TransportChoice::parse(args.transport())?);
    };
    if let (Some(_), Some(_)) = (args.procs, args.rank) {
        bail!("--procs with --rank: --procs starts every member itself; --rank runs one member");
    }
    crate::multiproc::rank_map(n_stages, world, args.ranks.as_deref())?;
    let Some(cross) = cross else {
        bail!(
            "--transport {}: a multi-process gate needs the transport between its processes: ipc (cpu backend; a test transport) or nccl (cuda backend)",
            args.transport()
        );
    };
    match (cross, be.kind()) {
        (crate::multiproc::Cross::Ipc, "cpu") | (crate::multiproc::Cross::Nccl, "cuda") => {}
        (crate::multiproc::Cross::Ipc, k) => bail!(
            "--transport ipc: the cpu backend's test transport between processes; the {k} backend crosses with --transport nccl"
        ),
        (crate::multiproc::Cross::Nccl, k) => bail!(
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
    if cross == crate::multiproc::Cross::Nccl {
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
    if args.nccl_lib.is_some() && cross != crate::multiproc::Cross::Nccl {
        bail!("--nccl-lib: only --transport nccl loads NCCL");
    }
    if args.peer_timeout() == 0 || args.rendezvous_timeout() == 0 {
        bail!("--peer-timeout and --rendezvous-timeout must be at least 1 second");
    }
    Ok(TransportChoice::Auto)
}

pub(crate) fn list_flag(flag: &str, v: &Option<String>) -> Result<Option<Vec<usize>>> {
    Ok(v.as_deref().map(|s| parse_list(flag, s)).transpose()?)
}

/// `--topk` against the model's vocab: 1 up to every logit.
pub fn check_topk(topk: usize, vocab: usize) -> Result<()> {
    if topk == 0 || topk > vocab {
        bail!("--topk {topk}: must be in 1..={vocab}");
    }
    Ok(())
}

pub fn prepare(args: &GateOptions) -> Result<Prepared> {
    prepare_model(args, None)
}

/// `prepare` with the model already loaded (`model`: the model and its receipt name), or
/// loaded here from `--model` (None).
pub fn prepare_model(args: &GateOptions, model: Option<(Arc<Model>, String)>) -> Result<Prepared> {
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
    check_topk(args.topk(), cfg.vocab)?;
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
        window: args.window(),
        batch: args.batch(),
        prompt_len,
        gen_len: args.run_gen_len(),
        seed: args.seed,
        topk: args.topk(),
        tape: tape.map(|t| t.tokens),
        faults: c.faults,
        chunks: list_flag("--chunk", &args.chunk)?,
        repeat: args.repeat(),
        draft: args.draft(),
        serve: args.serve_spec(),
        dist: None,
        planted: super::plant::planted(args)?,
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
    // --prompt-len (`GateOptions::member_argv`) and refuses a tape that says otherwise, so every
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
        auto_cpu: c.auto_cpu,
    })
}
