//! The gate: a single-stage reference and three arms over the same tokens, each step's
//! logits hashed and compared bit for bit.
//!
//! - reference: one stage on the first device of the placement, eager, greedy; it fixes the
//!   tape (prompt + greedy tokens) every arm replays, so arms stay aligned after a
//!   divergence and the FAIL names the first divergent step.
//! - eager: one token at a time, logits read on the caller stream each step.
//! - pipelined: the reference's tape replayed with `window` steps in flight, logits read
//!   later through the dedicated readback stream.
//! - batched: `batch` sequences (row 0 = the reference's tape, rows r>0 seeded prompts of
//!   their own) as `[B, n_embd]` rows, issued pipelined; row r is compared with its own
//!   single-stage reference.
//!
//! Faults only ever touch the N-stage runtime; the reference runs fault-free.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::backend::{Backend, Residency};
use crate::model::Model;
use crate::receipt::{
    self, Arm, ArmStep, Divergence, NonFinite, RefStep, Reference, Round, StepKey,
};
use crate::runtime::{DistPart, Fault, Pending, Placement, RtError, Runtime, RuntimeConfig, Walk};

mod bounds;
pub mod serve;
pub use bounds::{human, Footprint, Part};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArmKind {
    Eager,
    Pipelined,
    Batched,
    Prime,
    Verify,
    Serve,
}

impl ArmKind {
    pub const ALL: [ArmKind; 6] = [
        ArmKind::Eager,
        ArmKind::Pipelined,
        ArmKind::Batched,
        ArmKind::Prime,
        ArmKind::Verify,
        ArmKind::Serve,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ArmKind::Eager => "eager",
            ArmKind::Pipelined => "pipelined",
            ArmKind::Batched => "batched",
            ArmKind::Prime => "prime",
            ArmKind::Verify => "verify",
            ArmKind::Serve => "serve",
        }
    }

    pub fn parse(s: &str) -> Option<ArmKind> {
        ArmKind::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// What a gate runs, after validation.
#[derive(Clone, Debug)]
pub struct GateSpec {
    pub placement: Placement,
    pub arms: Vec<ArmKind>,
    pub window: usize,
    pub batch: usize,
    /// Row 0's prompt (with a tape: the first `prompt_len` tape tokens; the CLI takes the
    /// tape's own `prompt_len`, else --prompt-len), primed by the prime and verify arms; also
    /// the length of the seeded prompts of batch rows 1.. . At least 1, at most `steps()`.
    pub prompt_len: usize,
    pub gen_len: usize,
    pub seed: u64,
    pub topk: usize,
    /// A fixed tape for row 0 (then prompt_len/gen_len do not apply to row 0).
    pub tape: Option<Vec<u32>>,
    pub faults: Vec<Fault>,
    /// The prime arm's chunk sizes (None: 1, 8, 16 and the whole prompt).
    pub chunks: Option<Vec<usize>>,
    /// Primes per chunk size (the prime arm), each on a reset cache.
    pub repeat: usize,
    /// Drafts per speculative round (the verify arm).
    pub draft: usize,
    /// The serve arm's requests, rows per step and prefill chunk.
    pub serve: serve::ServeSpec,
    /// A member of a multi-process gate: the stages this process runs and its links (None:
    /// every stage in this process).
    pub dist: Option<DistPart>,
    /// The hidden `--plant-defect` matched (gate::plant): the prime arm's first judged
    /// logit gets its lowest bit flipped before the comparison, so the gate FAILs there.
    pub planted: bool,
}

/// The prime arm's chunk sizes for a prompt of `p` positions: `chunks` as given (default 1,
/// 8, 16 and the whole prompt), each at most `p`, duplicates of an earlier effective size
/// dropped. Only the default ladder is cut here: a size given longer than the prompt is
/// refused before any work (`gate::plan::check_on`), never run as a shorter one.
/// `GateSpec::prime_chunks`, and `--mma auto`'s reading of the flags
/// (gate::plan::prime_rows), both go through it.
pub fn prime_chunk_sizes(chunks: Option<&[usize]>, p: usize) -> Vec<usize> {
    let given = chunks.map_or_else(|| vec![1, 8, 16, p], <[usize]>::to_vec);
    let mut out: Vec<usize> = Vec::new();
    for c in given {
        let c = c.min(p);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The counts an arm's flags give, each at least 1 (`chunks`: every size given), refused in
/// the CLI's words. Each decides alone, whatever the rest of the run: `GateSpec::validate`
/// holds a spec to them, and `hunt` its pinned flags before the first trial.
pub fn check_counts(
    window: usize,
    batch: usize,
    chunks: Option<&[usize]>,
    repeat: usize,
    draft: usize,
) -> Result<(), String> {
    if window == 0 {
        return Err("--window 0: need at least one step in flight".into());
    }
    if batch == 0 {
        return Err("--batch 0: need at least one sequence".into());
    }
    if let Some(c) = chunks {
        if c.is_empty() || c.contains(&0) {
            return Err(format!(
                "--chunk {}: every chunk size must be at least 1",
                c.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    if repeat == 0 {
        return Err("--repeat 0: need at least one prime per chunk size".into());
    }
    if draft == 0 {
        return Err("--draft 0: a verify round needs at least one draft".into());
    }
    Ok(())
}

impl GateSpec {
    /// The spec's own rules, in the CLI's words: `prepare` reports a breach as a bad flag
    /// (exit 2) before any work, and `run_gate` refuses one from any other caller.
    pub fn validate(&self) -> Result<(), String> {
        check_counts(
            self.window,
            self.batch,
            self.chunks.as_deref(),
            self.repeat,
            self.draft,
        )?;
        if self.prompt_len == 0 {
            return Err("--prompt-len 0: need at least one prompt token".into());
        }
        if self.steps_checked().is_none() {
            return Err(format!(
                "--prompt-len {} + --gen-len {}: the position count overflows a usize",
                self.prompt_len, self.gen_len
            ));
        }
        if self.ctx_checked().is_none() {
            return Err(format!(
                "--draft {}: the verify arm's cache slots, {} steps x (draft + 1) + 1, overflow a usize",
                self.draft,
                self.steps()
            ));
        }
        if self.steps() == 0 {
            return Err("the gate has 0 steps (an empty tape)".into());
        }
        if self.prompt_len > self.steps() {
            return Err(format!(
                "prompt of {} tokens: longer than the tape's {}",
                self.prompt_len,
                self.steps()
            ));
        }
        if self.arms.contains(&ArmKind::Serve) {
            self.serve.check()?;
        }
        Ok(())
    }

    /// Prompt positions the prime and verify arms prime: the whole prompt (`validate`: 1 up
    /// to the tape's length), never fewer.
    pub fn prime_len(&self) -> usize {
        self.prompt_len
    }

    /// The prime arm's chunk sizes as run: as given (default 1, 8, 16 and the whole
    /// prompt), each at most the prompt, duplicates of an earlier effective size dropped.
    pub fn prime_chunks(&self) -> Vec<usize> {
        prime_chunk_sizes(self.chunks.as_deref(), self.prime_len())
    }

    /// Most rows one step carries across the arms.
    fn max_rows(&self) -> usize {
        let mut m = self.batch_rows();
        if self.arms.contains(&ArmKind::Prime) {
            m = m.max(self.prime_chunks().into_iter().max().unwrap_or(1));
        }
        if self.arms.contains(&ArmKind::Verify) {
            m = m.max(self.prime_len()).max(self.draft.saturating_add(1));
        }
        if self.arms.contains(&ArmKind::Serve) {
            m = m.max(self.serve.max_rows);
        }
        m
    }

    /// Sequences the runtime's caches hold: the batched rows, or the serve arm's cache rows.
    fn max_seqs(&self) -> usize {
        match self.arms.contains(&ArmKind::Serve) {
            true => self.batch_rows().max(self.serve.cache_rows()),
            false => self.batch_rows(),
        }
    }

    /// The serve arm's schedule (None without the arm): prompts of 1..=prompt_len, generated
    /// 0..=gen_len, from the seed.
    pub fn serve_schedule(&self) -> Option<serve::Schedule> {
        self.arms
            .contains(&ArmKind::Serve)
            .then(|| serve::schedule(&self.serve, self.seed, self.prompt_len, self.gen_len))
    }

    /// Cache slots per sequence: the tape, and with the verify arm room for a stage that
    /// kept every rejected draft (`--fault no-rollback` must FAIL on logits, not overflow).
    /// Saturates where the product overflows (`validate` refuses that first).
    fn ctx(&self) -> usize {
        let c = self.ctx_checked().unwrap_or(usize::MAX);
        match self.serve_schedule() {
            Some(s) => c.max(s.ctx(serve::stale(&self.faults))),
            None => c,
        }
    }

    /// Steps every row runs: the tape's length, or prompt + generated.
    pub fn steps(&self) -> usize {
        match &self.tape {
            Some(t) => t.len(),
            // Saturating: `validate` refuses an overflowing sum, naming both flags.
            None => self.prompt_len.saturating_add(self.gen_len),
        }
    }

    fn batch_rows(&self) -> usize {
        if self.arms.contains(&ArmKind::Batched) {
            self.batch
        } else {
            1
        }
    }
}

/// The deterministic results of a gate plus its timings (the CLI wraps them in a receipt).
pub struct GateResult {
    pub reference: Reference,
    pub batch_references: Vec<Reference>,
    /// The runtime under test's measured residency, per stage this process holds (from
    /// `first_stage` on; every stage in a single-process gate).
    pub resident: Vec<Residency>,
    pub first_stage: usize,
    /// What `misplacements` found (non-empty: no arm ran).
    pub misplaced: Vec<String>,
    pub arms: Vec<Arm>,
    pub build_ms: f64,
    pub reference_ms: f64,
    pub arm_ms: Vec<f64>,
}

impl GateResult {
    pub fn pass(&self) -> bool {
        self.misplaced.is_empty() && self.arms.iter().all(|a| a.verdict == "PASS")
    }
}

/// What a gate reports as it runs (`run_gate`'s observer), so a caller can show progress
/// and print each verdict the moment it is decided: a phase's start with its amount of
/// work, the work done in it, and each arm's result as the arm ends.
#[derive(Debug)]
pub enum GateEvent<'a> {
    /// A phase starts: `reference` (`total`: reference steps over every row) or an arm by
    /// name (`total`: the steps it checks, `GateSpec::checks`).
    Start { phase: &'a str, total: usize },
    /// `done` of the current phase's `total` finished.
    Progress { done: usize },
    /// An arm ended: its result, verdict and first divergence included (the receipt's own).
    Arm(&'a Arm),
}

impl GateSpec {
    /// The steps the arm `kind` checks in a single-process gate (the length of its receipt
    /// `steps`): one per tape position (eager, pipelined, verify: its rounds' accepted
    /// positions and the position after each cover the tape once), per row for batched,
    /// per chunk size and repeat for prime.
    pub fn checks(&self, kind: ArmKind) -> usize {
        let steps = self.steps();
        match kind {
            ArmKind::Eager | ArmKind::Pipelined | ArmKind::Verify => steps,
            ArmKind::Batched => steps.saturating_mul(self.batch_rows()),
            ArmKind::Prime => steps
                .saturating_mul(self.prime_chunks().len())
                .saturating_mul(self.repeat),
            // Every row of every serve step is one request's position, checked once.
            ArmKind::Serve => self
                .serve_schedule()
                .map_or(0, |sc| sc.steps.iter().map(|st| st.rows.len()).sum()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{0}")]
    Spec(String),
    #[error("{phase}: {err}")]
    Runtime { phase: String, err: RtError },
    /// The fault-free single-stage reference computed a NaN or an infinity: no arm can be
    /// judged against it (NaN bits equal NaN bits, so every arm would PASS; or an arm would be
    /// blamed for what the file or the engine did). A harness error (exit 2), never a verdict.
    #[error(
        "reference row {row} step {step} (token {token}): {count} of {vocab} logits are not \
         finite (first: logit[{index}] = {value}); the reference runs fault-free on one stage, \
         so the model file (corrupt weights or metadata) or the engine computing it is broken, \
         not the runtime under test: no verdict"
    )]
    NonFiniteReference {
        row: usize,
        step: usize,
        token: u32,
        count: usize,
        vocab: usize,
        index: usize,
        value: f32,
    },
}

/// Wrap a runtime error with the phase it happened in. The phase is built only on the error
/// path: these sit in per-step loops, where an eager `format!` would allocate every step.
fn rt_err(phase: impl FnOnce() -> String) -> impl FnOnce(RtError) -> GateError {
    move |err| GateError::Runtime {
        phase: phase(),
        err,
    }
}

/// Seeded prompt of row `row`: BOS (when the vocabulary has one) then uniform random ids.
pub fn seeded_prompt(model: &Model, seed: u64, row: usize, len: usize) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(row as u64 * 0x9E37_79B9));
    let mut v = Vec::with_capacity(len);
    if let Some(b) = model.vocab.bos() {
        v.push(b);
    }
    while v.len() < len {
        v.push(rng.gen_range(0..model.cfg.vocab as u32));
    }
    v.truncate(len);
    v
}

/// A single-stage reference walk: eager, greedy after the prompt. Returns the tape, the
/// receipt steps and every step's logits (kept to name the first divergent value).
struct RefRun {
    reference: Reference,
    logits: Vec<Vec<f32>>,
}

fn run_reference<B: Backend>(
    rt: &Runtime<B>,
    row: usize,
    mut tape: Vec<u32>,
    steps: usize,
    topk: usize,
    tick: &mut dyn FnMut(usize),
) -> Result<RefRun, GateError> {
    let mut walk = rt
        .walk()
        .map_err(rt_err(|| format!("reference row {row}")))?;
    let mut out = Vec::with_capacity(steps);
    let mut logits = Vec::with_capacity(steps);
    for i in 0..steps {
        let tok = tape[i];
        let p = walk
            .issue(&[tok], &[i])
            .map_err(rt_err(|| format!("reference row {row} step {i}")))?;
        let l = walk
            .read_eager(p)
            .map_err(rt_err(|| format!("reference row {row} step {i}")))?;
        check_finite_reference(row, i, tok, l)?;
        // topk >= 1 (validated): its first entry is the greedy token, by the same order
        // (larger logit, then lower id) as `receipt::argmax`, without a second vocab pass.
        let top = receipt::topk(l, topk.max(1));
        if i + 1 == tape.len() && tape.len() < steps {
            tape.push(top[0].0);
        }
        out.push(RefStep {
            step: i,
            token: tok,
            logits_blake3: receipt::hash_logits(l),
            topk: top,
        });
        // The reference keeps every step's logits (to name a first divergent value).
        logits.push(l.to_vec());
        tick(i + 1);
    }
    Ok(RefRun {
        reference: Reference {
            row,
            tokens: tape,
            steps: out,
        },
        logits,
    })
}

/// A reference step's logits, refused (`GateError::NonFiniteReference`) when any is NaN or
/// infinite.
fn check_finite_reference(row: usize, step: usize, token: u32, l: &[f32]) -> Result<(), GateError> {
    match l.iter().position(|x| !x.is_finite()) {
        None => Ok(()),
        Some(index) => Err(GateError::NonFiniteReference {
            row,
            step,
            token,
            count: receipt::count_non_finite(l),
            vocab: l.len(),
            index,
            value: l[index],
        }),
    }
}

/// Compares arm outputs against the references as they arrive.
struct Judge<'a, 'w> {
    refs: &'a [RefRun],
    /// Told the count of steps checked after each (`GateEvent::Progress`).
    watch: Option<&'w mut dyn FnMut(&GateEvent)>,
    name: &'static str,
    steps: Vec<ArmStep>,
    mismatched: usize,
    first: Option<Divergence>,
    /// Steps whose logits held a NaN or an infinity (the references are finite: checked by
    /// `run_reference`, so such a step never matches).
    non_finite: Option<NonFinite>,
}

impl<'a, 'w> Judge<'a, 'w> {
    fn new(name: &'static str, refs: &'a [RefRun]) -> Self {
        Judge {
            refs,
            watch: None,
            name,
            steps: Vec::new(),
            mismatched: 0,
            first: None,
            non_finite: None,
        }
    }

    /// The judge telling `watch` its progress.
    fn watched(mut self, watch: &'w mut dyn FnMut(&GateEvent)) -> Self {
        self.watch = Some(watch);
        self
    }

    fn check(&mut self, step: usize, row: usize, got: &[f32]) {
        self.check_key(step, row, StepKey::default(), got)
    }

    /// `check` of a step that carries a (repeat, chunk) or round key.
    fn check_key(&mut self, step: usize, row: usize, key: StepKey, got: &[f32]) {
        let h = receipt::hash_logits(got);
        let r = &self.refs[row];
        if h != r.reference.steps[step].logits_blake3 {
            self.mismatched += 1;
            if self.first.is_none() {
                let (index, reference, got) =
                    receipt::first_diff(&r.logits[step], got).unwrap_or((0, f32::NAN, f32::NAN));
                self.first = Some(Divergence {
                    step,
                    row,
                    key,
                    index,
                    reference,
                    got,
                });
            }
            // Counted only on a mismatch: a matching hash is the finite reference's bits.
            let count = receipt::count_non_finite(got);
            if count > 0 {
                let nf = self.non_finite.get_or_insert(NonFinite {
                    steps: 0,
                    step,
                    row,
                    key,
                    count,
                    vocab: got.len(),
                });
                nf.steps += 1;
            }
        }
        self.steps.push(ArmStep {
            step,
            row,
            key,
            logits_blake3: h,
        });
        if let Some(w) = self.watch.as_mut() {
            w(&GateEvent::Progress {
                done: self.steps.len(),
            });
        }
    }

    fn finish(self) -> Arm {
        Arm {
            name: self.name.to_string(),
            verdict: if self.mismatched == 0 { "PASS" } else { "FAIL" }.to_string(),
            mismatched_steps: self.mismatched,
            first_divergence: self.first,
            steps: self.steps,
            rounds: Vec::new(),
            serve: None,
            non_finite: self.non_finite,
        }
    }
}

/// Run a whole gate on backend `be`: the reference(s), then the selected arms on one
/// N-stage runtime. `progress` sees each phase start, its progress and each arm's result
/// as the arm ends (`GateEvent`).
pub fn run_gate<B: Backend>(
    be: Arc<B>,
    model: Arc<Model>,
    spec: &GateSpec,
    progress: &mut dyn FnMut(&GateEvent),
) -> Result<GateResult, GateError> {
    spec.validate().map_err(GateError::Spec)?;
    spec.check_positions(&model.cfg).map_err(GateError::Spec)?;
    let steps = spec.steps();
    let rows = spec.batch_rows();

    // Reference: single stage on the placement's first device (a member of a multi-process
    // gate: its own first stage's device; every member computes it), fault-free.
    let t0 = Instant::now();
    let first_stage = spec.dist.as_ref().map_or(0, |d| d.local.start);
    let single = Placement::single(model.cfg.n_layers, spec.placement.devices[first_stage]);
    be.trace_phase("reference");
    // The arms' largest step, before the first engine: a backend compiling kernels per row
    // count builds the arms' with the reference's (one round on a cold start).
    be.expect_rows(spec.max_rows());
    let ref_rt = Runtime::build(
        be.clone(),
        model.clone(),
        RuntimeConfig {
            placement: single,
            max_rows: 1,
            max_seqs: 1,
            ctx: steps,
            window: 1,
            faults: vec![],
            dist: None,
        },
    )
    .map_err(rt_err(|| "reference build".to_string()))?;
    let mut refs = Vec::with_capacity(rows);
    progress(&GateEvent::Start {
        phase: "reference",
        total: rows.saturating_mul(steps),
    });
    for r in 0..rows {
        let prompt = match (&spec.tape, r) {
            (Some(t), 0) => t.clone(),
            _ => seeded_prompt(&model, spec.seed, r, spec.prompt_len),
        };
        let tick = &mut |i: usize| {
            progress(&GateEvent::Progress {
                done: r * steps + i,
            })
        };
        refs.push(run_reference(&ref_rt, r, prompt, steps, spec.topk, tick)?);
    }
    // The serve arm's requests, each alone (row = request).
    let sched = spec.serve_schedule();
    let serve_refs = match &sched {
        Some(sc) => serve::references(&ref_rt, &model, spec, sc)?,
        None => Vec::new(),
    };
    drop(ref_rt);
    let reference_ms = t0.elapsed().as_secs_f64() * 1e3;

    let t1 = Instant::now();
    let host_weights_ok = be.shares_host_weights();
    be.trace_phase("runtime");
    let rt = Runtime::build(
        be.clone(),
        model.clone(),
        RuntimeConfig {
            placement: spec.placement.clone(),
            max_rows: spec.max_rows(),
            max_seqs: spec.max_seqs(),
            ctx: spec.ctx(),
            window: spec.window,
            faults: spec.faults.clone(),
            dist: spec.dist.clone(),
        },
    )
    .map_err(rt_err(|| {
        format!("runtime build ({})", spec.placement.to_flags())
    }))?;
    let build_ms = t1.elapsed().as_secs_f64() * 1e3;

    // PLACEMENT: every stage's memory on its stage's device, as measured. A runtime that
    // put something elsewhere is not the one asked for: it fails here, before any arm.
    let resident = rt
        .residency()
        .map_err(rt_err(|| "residency check".to_string()))?;
    let misplaced = misplacements(&spec.placement, first_stage, &resident, host_weights_ok);
    // A member of a multi-process gate starts its walks when every member is built, and
    // none does when any member found a misplacement (the receipt, written by the last
    // stage's member from every member's list, then FAILs naming it).
    let mut any_misplaced = !misplaced.is_empty();
    if let Some(ready) = spec.dist.as_ref().and_then(|d| d.ready.as_ref()) {
        any_misplaced = ready(any_misplaced).map_err(GateError::Spec)?;
    }
    let mut arms = Vec::new();
    let mut arm_ms = Vec::new();
    let kinds: &[ArmKind] = if !any_misplaced { &spec.arms } else { &[] };
    for &kind in kinds {
        let ta = Instant::now();
        be.trace_phase(kind.name());
        let total = spec.checks(kind);
        diag!("arm {}: start ({total} steps to check)", kind.name());
        progress(&GateEvent::Start {
            phase: kind.name(),
            total,
        });
        let w = &mut *progress;
        let arm = match kind {
            ArmKind::Eager => eager(&rt, &refs[..1], steps, w)?,
            ArmKind::Pipelined => pipelined(&rt, &refs[..1], steps, spec.window, "pipelined", w)?,
            ArmKind::Batched => pipelined(&rt, &refs, steps, spec.window, "batched", w)?,
            ArmKind::Prime => prime(&rt, &refs[0], spec, w)?,
            ArmKind::Verify => verify(&rt, &refs[0], spec, w)?,
            ArmKind::Serve => {
                let sc = sched.as_ref().expect("the serve arm's schedule");
                serve::serve(&rt, &serve_refs, sc, spec.window, w)?
            }
        };
        arm_ms.push(ta.elapsed().as_secs_f64() * 1e3);
        progress(&GateEvent::Arm(&arm));
        arms.push(arm);
    }
    let mut refs = refs.into_iter().map(|r| r.reference);
    let reference = refs.next().expect("at least one reference row");
    Ok(GateResult {
        reference,
        batch_references: refs.collect(),
        resident,
        first_stage,
        misplaced,
        arms,
        build_ms,
        reference_ms,
        arm_ms,
    })
}

/// Everything of `res` (one Residency per stage from `first`) that lives on a device other
/// than its stage's, one line each. Host memory counts as misplaced too, except the weights where the
/// backend computes from one shared host copy by design (`host_weights_ok`:
/// `Backend::shares_host_weights`).
pub fn misplacements(
    pl: &Placement,
    first: usize,
    res: &[Residency],
    host_weights_ok: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (s, r) in (first..).zip(res) {
        let placed = pl.devices[s];
        for (what, list) in [
            ("weights", &r.weights),
            ("scratch", &r.scratch),
            ("cache", &r.cache),
        ] {
            for &(dev, bytes) in list {
                match dev {
                    Some(d) if d == placed => {}
                    None if what == "weights" && host_weights_ok => {}
                    Some(d) => out.push(format!(
                        "stage {s} {what}: {bytes} bytes on device {d}, placed on device {placed}"
                    )),
                    None => out.push(format!(
                        "stage {s} {what}: {bytes} bytes in host memory, placed on device {placed}"
                    )),
                }
            }
        }
    }
    out
}

fn eager<B: Backend>(
    rt: &Runtime<B>,
    refs: &[RefRun],
    steps: usize,
    watch: &mut dyn FnMut(&GateEvent),
) -> Result<Arm, GateError> {
    let mut walk = rt.walk().map_err(rt_err(|| "eager arm".to_string()))?;
    let mut judge = Judge::new("eager", refs).watched(watch);
    let tape = &refs[0].reference.tokens;
    for (i, &tok) in tape.iter().enumerate().take(steps) {
        let p = walk
            .issue(&[tok], &[i])
            .map_err(rt_err(|| format!("eager arm step {i}")))?;
        let l = walk
            .read_eager(p)
            .map_err(rt_err(|| format!("eager arm step {i}")))?;
        // A member without the last stage reads no logits: the process with it judges.
        if rt.has_output() {
            judge.check(i, 0, l);
        }
    }
    Ok(judge.finish())
}

/// Drive one walk with up to `window` steps in flight: issue step i with the tokens that
/// `tokens(i, buf)` puts in `buf` (one per row, all at position i), and whenever the window
/// is full (and at the end) read the oldest step through the readback stream and hand
/// `(step, logits)` to `sink`, in step order (the logits lent from the output slot's host
/// buffer for the call: no copy, no allocation per step). The pipelined and batched arms and `bench`
/// all issue this way. The token and position buffers are reused across steps.
pub fn drive_windowed<B: Backend, E>(
    walk: &mut Walk<'_, B>,
    steps: usize,
    window: usize,
    mut tokens: impl FnMut(usize, &mut Vec<u32>),
    mut sink: impl FnMut(usize, &[f32]) -> Result<(), E>,
    err: impl Fn(usize, RtError) -> E,
) -> Result<(), E> {
    // (tape index, pending step): the runtime numbers steps over its whole life.
    let mut inflight: VecDeque<(usize, Pending)> = VecDeque::with_capacity(window);
    let (mut t, mut pos) = (Vec::new(), Vec::new());
    for i in 0..steps {
        if inflight.len() >= window.max(1) {
            let (j, p) = inflight.pop_front().expect("window is non-empty");
            sink(j, walk.read_deferred(p).map_err(|e| err(j, e))?)?;
        }
        t.clear();
        tokens(i, &mut t);
        pos.clear();
        pos.resize(t.len(), i);
        let p = walk.issue(&t, &pos).map_err(|e| err(i, e))?;
        inflight.push_back((i, p));
    }
    while let Some((j, p)) = inflight.pop_front() {
        sink(j, walk.read_deferred(p).map_err(|e| err(j, e))?)?;
    }
    Ok(())
}

/// Pipelined issue over `refs.len()` rows (1: the pipelined arm; B: the batched arm):
/// `window` steps in flight, logits drained through the readback stream in order.
fn pipelined<B: Backend>(
    rt: &Runtime<B>,
    refs: &[RefRun],
    steps: usize,
    window: usize,
    name: &'static str,
    watch: &mut dyn FnMut(&GateEvent),
) -> Result<Arm, GateError> {
    let vocab = rt.model().cfg.vocab;
    let mut walk = rt.walk().map_err(rt_err(|| format!("{name} arm")))?;
    let mut judge = Judge::new(name, refs).watched(watch);
    drive_windowed(
        &mut walk,
        steps,
        window,
        |i, t| t.extend(refs.iter().map(|r| r.reference.tokens[i])),
        |i, l| {
            if rt.has_output() {
                for r in 0..refs.len() {
                    judge.check(i, r, &l[r * vocab..(r + 1) * vocab]);
                }
            }
            Ok(())
        },
        |i, e| rt_err(|| format!("{name} arm step {i}"))(e),
    )?;
    Ok(judge.finish())
}

/// One step of the prime arm: `tokens` at positions `pos0..`, as a chunk of one sequence
/// (`chunk`) or a one-row decode step; `reset`: the caches are reset before it.
struct PrimeStep {
    pos0: usize,
    len: usize,
    chunk: bool,
    key: StepKey,
    reset: bool,
}

/// The prime arm's walk: for every chunk size C and repeat r, a reset cache, the prompt
/// as chunks of C consecutive positions of one sequence, then one-token decode to the
/// tape's end. One walk for all of it, `window` steps in flight (chunks of one prime
/// overlap across the stages, and a prime's first chunk enters while the previous prime's
/// decode is still draining: the boundary slots grow from 1 row to C then mid-walk).
fn prime_plan(spec: &GateSpec) -> Vec<PrimeStep> {
    let (p, steps) = (spec.prime_len(), spec.steps());
    let mut plan = Vec::new();
    for c in spec.prime_chunks() {
        for r in 0..spec.repeat {
            let key = StepKey {
                repeat: Some(r),
                chunk: Some(c),
                round: None,
                serve_step: None,
            };
            for a in (0..p).step_by(c) {
                plan.push(PrimeStep {
                    pos0: a,
                    len: c.min(p - a),
                    chunk: true,
                    key,
                    reset: a == 0,
                });
            }
            for i in p..steps {
                plan.push(PrimeStep {
                    pos0: i,
                    len: 1,
                    chunk: false,
                    key,
                    reset: false,
                });
            }
        }
    }
    plan
}

/// The prime arm: every position's logits of every prime equal the one-row reference's.
fn prime<B: Backend>(
    rt: &Runtime<B>,
    r0: &RefRun,
    spec: &GateSpec,
    watch: &mut dyn FnMut(&GateEvent),
) -> Result<Arm, GateError> {
    let vocab = rt.model().cfg.vocab;
    let tape = &r0.reference.tokens;
    let refs = std::slice::from_ref(r0);
    let mut walk = rt.walk().map_err(rt_err(|| "prime arm".to_string()))?;
    let mut judge = Judge::new("prime", refs).watched(watch);
    let plan = prime_plan(spec);
    let mut inflight: VecDeque<(usize, Pending)> = VecDeque::new();
    let ctx = |i: usize| {
        let st: &PrimeStep = &plan[i];
        move || format!("prime arm position {}{}", st.pos0, st.key.describe())
    };
    let drain = |walk: &mut Walk<'_, B>,
                 judge: &mut Judge,
                 (i, p): (usize, Pending)|
     -> Result<(), GateError> {
        let st = &plan[i];
        let l = walk.read_deferred(p).map_err(rt_err(ctx(i)))?;
        // A member of a multi-process gate without the last stage walks the same plan and
        // reads no logits: the member with them judges.
        if rt.has_output() {
            for r in 0..st.len {
                let got = &l[r * vocab..(r + 1) * vocab];
                if spec.planted && i == 0 && r == 0 {
                    // --plant-defect: one flipped bit, judged like any arm's logits.
                    let mut bad = got.to_vec();
                    bad[0] = f32::from_bits(bad[0].to_bits() ^ 1);
                    judge.check_key(st.pos0, 0, st.key, &bad);
                    continue;
                }
                judge.check_key(st.pos0 + r, 0, st.key, got);
            }
        }
        Ok(())
    };
    for (i, st) in plan.iter().enumerate() {
        if inflight.len() >= spec.window.max(1) {
            let f = inflight.pop_front().expect("window is non-empty");
            drain(&mut walk, &mut judge, f)?;
        }
        if st.reset {
            walk.reset_caches().map_err(rt_err(ctx(i)))?;
        }
        let toks = &tape[st.pos0..st.pos0 + st.len];
        let p = if st.chunk {
            walk.issue_chunk(toks, st.pos0)
        } else {
            walk.issue(toks, &[st.pos0])
        }
        .map_err(rt_err(ctx(i)))?;
        inflight.push_back((i, p));
    }
    while let Some(f) = inflight.pop_front() {
        drain(&mut walk, &mut judge, f)?;
    }
    Ok(judge.finish())
}

/// The greedy token of a logits row (larger logit, then lower id: `receipt::topk`'s order).
fn greedy(l: &[f32]) -> u32 {
    receipt::topk(l, 1)[0].0
}

/// A seeded draft token that is neither `tape_tok` (the tape's token there) nor `greedy_tok`
/// (the reference's greedy choice there), so a correct runtime must reject it and the
/// positions after it are never walked on it. The tape's token plus a seeded offset in
/// 1..vocab, drawn again while that is the greedy choice (on a tape of greedy tokens the
/// first draw always stands, so such gates keep their drafts). A vocab of 2 or fewer ids
/// may have no such token: then the tape's own when it is not the greedy choice (still
/// rejected, and the tape's), else the next id.
fn wrong_draft(rng: &mut ChaCha8Rng, vocab: usize, tape_tok: u32, greedy_tok: u32) -> u32 {
    let v = vocab.max(1) as u32;
    if v <= 2 {
        return if tape_tok != greedy_tok {
            tape_tok
        } else {
            (tape_tok + 1) % v
        };
    }
    loop {
        let off = rng.gen_range(1..v);
        let t = ((u64::from(tape_tok) + u64::from(off)) % u64::from(v)) as u32;
        if t != greedy_tok {
            return t;
        }
    }
}

/// The verify arm: the prompt primed as one chunk, then speculative rounds to the tape's
/// end. Round k at position `start` walks the input token and the next K tape tokens as
/// drafts (one replaced by a seeded wrong token in round 0 and in a seeded half of the
/// rounds after it) as ONE step of K+1 rows, accepts the longest draft prefix matching its
/// own greedy choices, rolls every stage's cache back to the accepted length and goes on
/// from the first rejected position, whose input is the tape's token there (teacher
/// forced, as the reference ran: the tape need not be the model's greedy path). The
/// accepted positions' logits must be the reference's, and each round's acceptance what
/// the reference's own greedy choices imply: draft i is accepted where it equals the
/// greedy token of the reference's logits at position start+i-1 (never where it merely
/// equals the tape's next token). The wrong draft is neither the tape's token nor the
/// reference's greedy choice, so a correct runtime rejects it, and every position a round
/// accepts or reads carries tape tokens only: each has a reference logits row.
/// Across processes only the last stage's member has logits, so every member walks the
/// acceptance the reference implies (every member computes the reference: the same
/// schedule everywhere; members' caches must roll back alike) and the last one records and
/// judges its own.
fn verify<B: Backend>(
    rt: &Runtime<B>,
    r0: &RefRun,
    spec: &GateSpec,
    watch: &mut dyn FnMut(&GateEvent),
) -> Result<Arm, GateError> {
    let judging = rt.has_output();
    let multi = spec.dist.is_some();
    let vocab = rt.model().cfg.vocab;
    let tape = &r0.reference.tokens;
    let (p, steps, k) = (spec.prime_len(), spec.steps(), spec.draft);
    let mut walk = rt.walk().map_err(rt_err(|| "verify arm".to_string()))?;
    let mut judge = Judge::new("verify", std::slice::from_ref(r0)).watched(watch);
    walk.reset_caches()
        .map_err(rt_err(|| "verify arm cache reset".to_string()))?;
    let prompt_key = StepKey {
        chunk: Some(p),
        ..StepKey::default()
    };
    let pend = walk
        .issue_chunk(&tape[..p], 0)
        .map_err(rt_err(|| "verify arm prompt".to_string()))?;
    let l = walk
        .read_eager(pend)
        .map_err(rt_err(|| "verify arm prompt".to_string()))?;
    if judging {
        for r in 0..p {
            judge.check_key(r, 0, prompt_key, &l[r * vocab..(r + 1) * vocab]);
        }
    }
    // The reference's greedy token at every position (from its logits, by `greedy`'s
    // order), what each round's expected acceptance is read from.
    let ref_greedy: Vec<u32> = r0.logits.iter().map(|l| greedy(l)).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x5eed_d4af);
    let mut rounds = Vec::new();
    let mut start = p;
    while start < steps {
        let round = rounds.len();
        // The rounds near the tape's end draft what is left; a given --draft past what the
        // first round has left is refused before any work (`gate::plan::check_on`).
        let ke = k.min(steps - 1 - start);
        let mut toks = tape[start..=start + ke].to_vec();
        // Round 0 always carries a wrong draft (so a skipped rollback always has rejected
        // positions to keep), later rounds in a seeded half.
        let replaced = (ke > 0 && (round == 0 || rng.gen_bool(0.5))).then(|| {
            let j = rng.gen_range(1..=ke);
            toks[j] = wrong_draft(&mut rng, vocab, tape[start + j], ref_greedy[start + j - 1]);
            j
        });
        let c = || format!("verify arm round {round} at position {start}");
        let pend = walk.issue_chunk(&toks, start).map_err(rt_err(c))?;
        let l = walk.read_eager(pend).map_err(rt_err(c))?;
        let row = |r: usize| &l[r * vocab..(r + 1) * vocab];
        // The reference's acceptance from its own greedy choices at the round's positions
        // (the tape's next token is that only on a tape the reference generated itself);
        // the arm's from its own logits (a member without them: the reference's).
        let expected = (1..=ke)
            .take_while(|&i| toks[i] == ref_greedy[start + i - 1])
            .count();
        let accepted = if judging {
            (1..=ke)
                .take_while(|&i| toks[i] == greedy(row(i - 1)))
                .count()
        } else {
            expected
        };
        let key = StepKey {
            round: Some(round),
            ..StepKey::default()
        };
        if judging {
            for r in 0..=accepted {
                judge.check_key(start + r, 0, key, row(r));
            }
        }
        // ROLLBACK: every stage's cache back to the accepted positions (across processes,
        // the reference's acceptance: the schedule every member shares).
        let kept = if multi { expected } else { accepted };
        walk.truncate(0, start + kept + 1).map_err(rt_err(c))?;
        rounds.push(Round {
            round,
            start,
            drafted: toks[1..].to_vec(),
            replaced,
            accepted,
            expected,
        });
        start += kept + 1;
    }
    let mut arm = judge.finish();
    if rounds.iter().any(|r| r.accepted != r.expected) {
        arm.verdict = "FAIL".into();
    }
    arm.rounds = rounds;
    Ok(arm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::TransportChoice;

    #[test]
    fn misplacements_name_stage_part_bytes_and_devices() {
        let pl = Placement::from_flags(
            4,
            Some(2),
            None,
            Some(&[3, 5]),
            TransportChoice::Auto,
            8,
            &|_, _| false,
        )
        .unwrap();
        let good = Residency {
            weights: vec![(None, 10)],
            scratch: vec![(Some(3), 4)],
            cache: vec![(Some(3), 8)],
        };
        let bad = Residency {
            weights: vec![(Some(5), 10), (Some(3), 2)],
            scratch: vec![(Some(5), 4)],
            cache: vec![(None, 8)],
        };
        // Stage 0 host weights (not allowed here); stage 1's weights partly on device 3 and
        // its cache in host memory.
        assert_eq!(
            misplacements(&pl, 0, &[good.clone(), bad.clone()], false),
            vec![
                "stage 0 weights: 10 bytes in host memory, placed on device 3".to_string(),
                "stage 1 weights: 2 bytes on device 3, placed on device 5".to_string(),
                "stage 1 cache: 8 bytes in host memory, placed on device 5".to_string(),
            ]
        );
        // Host weights are allowed where the backend shares one host copy (the CPU); a host
        // cache never is.
        assert_eq!(
            misplacements(&pl, 0, &[good.clone(), bad], true),
            vec![
                "stage 1 weights: 2 bytes on device 3, placed on device 5".to_string(),
                "stage 1 cache: 8 bytes in host memory, placed on device 5".to_string(),
            ]
        );
        let fine = Residency {
            weights: vec![(Some(5), 10)],
            scratch: vec![(Some(5), 4)],
            cache: vec![(Some(5), 8)],
        };
        assert!(misplacements(&pl, 0, &[good, fine], true).is_empty());
    }

    /// The verify arm's wrong draft is neither the tape's token nor the reference's greedy
    /// choice (so a correct runtime always rejects it), always below the vocab; on a greedy
    /// tape (tape token = greedy) it is the old draw, the tape token plus a seeded offset.
    #[test]
    fn wrong_draft_is_neither_the_tape_token_nor_the_greedy_choice() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..20_000 {
            let vocab = if rng.gen_bool(0.2) {
                rng.gen_range(3..6)
            } else {
                rng.gen_range(3..70_000)
            };
            let tape = rng.gen_range(0..vocab as u32);
            let greedy = if rng.gen_bool(0.3) {
                tape
            } else {
                rng.gen_range(0..vocab as u32)
            };
            let w = wrong_draft(&mut rng, vocab, tape, greedy);
            assert!(
                (w as usize) < vocab && w != tape && w != greedy,
                "{vocab} {tape} {greedy}: {w}"
            );
        }
        let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(3), ChaCha8Rng::seed_from_u64(3));
        for _ in 0..100 {
            let off = a.gen_range(1..2048u32);
            assert_eq!(wrong_draft(&mut b, 2048, 100, 100), (100 + off) % 2048);
        }
        assert_eq!(wrong_draft(&mut rng, 2, 0, 1), 0);
        assert_eq!(wrong_draft(&mut rng, 2, 1, 1), 0);
    }

    /// A reference row of `steps` steps with finite logits `vocab` wide (step i: i + j / 8).
    fn finite_ref(steps: usize, vocab: usize) -> RefRun {
        let logits: Vec<Vec<f32>> = (0..steps)
            .map(|i| (0..vocab).map(|j| i as f32 + j as f32 / 8.0).collect())
            .collect();
        RefRun {
            reference: Reference {
                row: 0,
                tokens: (0..steps as u32).collect(),
                steps: logits
                    .iter()
                    .enumerate()
                    .map(|(i, l)| RefStep {
                        step: i,
                        token: i as u32,
                        logits_blake3: receipt::hash_logits(l),
                        topk: receipt::topk(l, 1),
                    })
                    .collect(),
            },
            logits,
        }
    }

    /// An arm whose logits alone hold NaN or infinities FAILs, and its record says how many
    /// steps and where the first one is, with its count; a finite divergence records none
    /// (and its receipt JSON has no `non_finite` key: older receipts keep their bytes).
    #[test]
    fn judge_fails_an_arm_whose_logits_alone_are_non_finite_and_counts_them() {
        let vocab = 8;
        let refs = [finite_ref(4, vocab)];
        let mut j = Judge::new("eager", &refs);
        j.check(0, 0, &refs[0].logits[0].clone());
        let mut l1 = refs[0].logits[1].clone();
        l1[2] = f32::NAN;
        l1[5] = f32::INFINITY;
        l1[7] = f32::NEG_INFINITY;
        j.check(1, 0, &l1);
        let mut l2 = refs[0].logits[2].clone();
        l2[0] += 1.0; // a finite divergence
        j.check(2, 0, &l2);
        j.check(3, 0, &[f32::NAN; 8]);
        let arm = j.finish();
        assert_eq!(arm.verdict, "FAIL");
        assert_eq!(arm.mismatched_steps, 3);
        let d = arm.first_divergence.as_ref().expect("divergence");
        assert_eq!((d.step, d.index), (1, 2));
        assert!(d.got.is_nan());
        let nf = arm.non_finite.clone().expect("non-finite recorded");
        assert_eq!(
            nf,
            NonFinite {
                steps: 2,
                step: 1,
                row: 0,
                key: StepKey::default(),
                count: 3,
                vocab,
            }
        );
        assert_eq!(
            nf.describe(),
            "non-finite logits (NaN/Inf) in 2 steps where the reference is finite, first at \
             step 1 row 0: 3 of 8"
        );
        let json = serde_json::to_value(&arm).unwrap();
        assert_eq!(json["non_finite"]["count"], 3);
        let back: Arm = serde_json::from_value(json).unwrap();
        assert_eq!(back.non_finite, arm.non_finite);

        // Finite divergences only (a batched row 1 too): no record, no key.
        let refs = [finite_ref(2, vocab), finite_ref(2, vocab)];
        let mut j = Judge::new("batched", &refs);
        let mut l = refs[1].logits[1].clone();
        l[3] = -l[3];
        j.check(1, 1, &l);
        j.check_key(
            0,
            0,
            StepKey {
                round: Some(0),
                ..StepKey::default()
            },
            &refs[0].logits[0].clone(),
        );
        let arm = j.finish();
        assert_eq!((arm.verdict.as_str(), arm.mismatched_steps), ("FAIL", 1));
        assert!(arm.non_finite.is_none());
        assert!(serde_json::to_value(&arm)
            .unwrap()
            .get("non_finite")
            .is_none());
    }

    /// A synthetic model with one f16 block scale of `tensor` row `row` set to `bits` (every
    /// synthetic tensor is Q8_0 here: a block is a 2-byte f16 scale then 32 int8).
    fn poisoned(tensor: &str, row: usize, bits: u16) -> Arc<Model> {
        use crate::gguf::GgufFile;
        let spec = crate::model::synth::SynthSpec {
            layers: 2,
            embd: 64,
            heads: 2,
            kv_heads: 1,
            ff: 128,
            vocab: 300,
            ..crate::model::synth::builtin_spec()
        };
        let mut b = crate::model::synth::synth_gguf(&spec).unwrap();
        let f = GgufFile::parse(b.clone()).unwrap();
        let t = f.tensor(tensor).unwrap();
        assert_eq!(t.ty, crate::quant::GgmlType::Q8_0);
        let at = f.tensor_range(t).start + row * (64 / 32) * 34;
        b[at..at + 2].copy_from_slice(&bits.to_le_bytes());
        Arc::new(Model::load(&GgufFile::parse(b).unwrap()).unwrap())
    }

    fn spec_for(model: &Model, tape: Vec<u32>, arms: Vec<ArmKind>) -> GateSpec {
        let placement = Placement::from_flags(
            model.cfg.n_layers,
            Some(2),
            None,
            Some(&[0, 1]),
            TransportChoice::Auto,
            2,
            &|_, _| false,
        )
        .unwrap();
        GateSpec {
            placement,
            arms,
            window: 2,
            batch: 2,
            prompt_len: 2,
            gen_len: 0,
            seed: 3,
            topk: 1,
            tape: Some(tape),
            faults: vec![],
            chunks: None,
            repeat: 1,
            draft: 2,
            serve: serve::ServeSpec {
                requests: 3,
                max_rows: 2,
                prefill_chunk: 2,
            },
            dist: None,
            planted: false,
        }
    }

    /// The observer sees, in order: the reference's start and its steps, then per arm its
    /// start with `checks`, its progress counting up to exactly that total (the receipt's
    /// steps), and the arm's own result the moment it ends, before the next arm starts.
    /// Random tapes, batches, chunks, repeats and drafts; a fault (the negative control)
    /// changes no event but the verdicts the arm events carry.
    #[test]
    fn gate_events_announce_each_arm_its_total_and_its_verdict_in_order() {
        use crate::backend::cpu::CpuBackend;
        let be = Arc::new(CpuBackend::new(2, 0, 0));
        let mut rng = ChaCha8Rng::seed_from_u64(28);
        let m = poisoned("output.weight", 17, 0);
        for case in 0..12 {
            let n = rng.gen_range(3..9);
            let tape: Vec<u32> = (0..n).map(|_| rng.gen_range(0..300)).collect();
            let mut spec = spec_for(&m, tape, ArmKind::ALL.to_vec());
            spec.batch = rng.gen_range(1..4);
            spec.repeat = rng.gen_range(1..3);
            spec.draft = rng.gen_range(1..4);
            spec.window = rng.gen_range(1..4);
            spec.chunks = Some(vec![rng.gen_range(1..4), rng.gen_range(1..6)]);
            let fault = case % 3 == 2;
            if fault {
                spec.faults = vec![Fault::RxNoWait];
            }
            let mut log: Vec<String> = Vec::new();
            let mut phase: Option<(String, usize, usize)> = None;
            let res = run_gate(be.clone(), m.clone(), &spec, &mut |e| match e {
                GateEvent::Start { phase: p, total } => {
                    if let Some((q, t, d)) = &phase {
                        assert_eq!(d, t, "case {case}: {q} ended at {d} of {t}");
                    }
                    log.push(format!("start {p} {total}"));
                    phase = Some((p.to_string(), *total, 0));
                }
                GateEvent::Progress { done } => {
                    let (p, t, d) = phase.as_mut().expect("progress inside a phase");
                    assert_eq!(*done, *d + 1, "case {case}: {p} counts one by one");
                    assert!(*done <= *t, "case {case}: {p} {done} > {t}");
                    *d = *done;
                }
                GateEvent::Arm(a) => {
                    let (p, t, d) = phase.as_ref().expect("an arm inside its phase");
                    assert_eq!((p.as_str(), d), (a.name.as_str(), t), "case {case}");
                    assert_eq!(a.steps.len(), *t, "case {case}: {p}'s checks");
                    log.push(format!("end {} {}", a.name, a.verdict));
                }
            })
            .unwrap();
            let mut want = vec![format!("start reference {}", spec.batch * n)];
            for (k, a) in spec.arms.iter().zip(&res.arms) {
                assert_eq!(a.steps.len(), spec.checks(*k), "case {case}: {}", a.name);
                want.push(format!("start {} {}", k.name(), spec.checks(*k)));
                want.push(format!("end {} {}", a.name, a.verdict));
            }
            assert_eq!(log, want, "case {case}");
            assert_eq!(res.pass(), !fault, "case {case}: {log:?}");
        }
    }

    /// The fault-free reference computing NaN or an infinity is a harness error naming the
    /// row, step, token and count, before any arm runs (never a PASS of NaN against NaN, never
    /// an arm's FAIL); the same model unpoisoned passes every arm (the control).
    #[test]
    fn a_non_finite_reference_is_a_harness_error_naming_the_step_and_count() {
        use crate::backend::cpu::CpuBackend;
        let be = Arc::new(CpuBackend::new(2, 0, 0));
        let all = ArmKind::ALL.to_vec();
        let tape = vec![1, 7, 9, 42, 5, 6];
        // f16 NaN and +inf in the head's row 17 scale: logit 17 alone, from step 0 on.
        for bits in [0x7e00u16, 0x7c00] {
            let m = poisoned("output.weight", 17, bits);
            let spec = spec_for(&m, tape.clone(), all.clone());
            let mut seen = Vec::new();
            let e = run_gate(be.clone(), m, &spec, &mut |ev| {
                if let GateEvent::Arm(a) = ev {
                    seen.push(a.name.clone())
                }
            })
            .err()
            .expect("a harness error");
            match &e {
                GateError::NonFiniteReference {
                    row: 0,
                    step: 0,
                    token: 1,
                    count: 1,
                    vocab: 300,
                    index: 17,
                    ..
                } => {}
                other => panic!("{other}"),
            }
            assert!(seen.is_empty(), "no arm ran: {seen:?}");
            let msg = e.to_string();
            assert!(msg.contains("reference row 0 step 0 (token 1): 1 of 300 logits are not finite (first: logit[17] = "), "{msg}");
            assert!(
                msg.contains("the model file (corrupt weights or metadata) or the engine"),
                "{msg}"
            );
        }
        // The embedding of token 42 (step 3 of the tape): the whole row NaN from step 3.
        let m = poisoned("token_embd.weight", 42, 0x7e00);
        let spec = spec_for(&m, tape.clone(), all.clone());
        match run_gate(be.clone(), m, &spec, &mut |_| {}).err() {
            Some(GateError::NonFiniteReference {
                row: 0,
                step: 3,
                token: 42,
                count: 300,
                index: 0,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        // The batched arm's rows 1.. are references too: a token only row 1's seeded prompt
        // holds, poisoned, names row 1.
        let clean = poisoned("output.weight", 17, 0);
        let p1 = seeded_prompt(&clean, 3, 1, 2);
        let tok = *p1.last().unwrap();
        assert!(!tape.contains(&tok) && p1.len() == 2, "{p1:?}");
        let m = poisoned("token_embd.weight", tok as usize, 0x7e00);
        let spec = spec_for(&m, tape.clone(), vec![ArmKind::Batched]);
        match run_gate(be.clone(), m, &spec, &mut |_| {}).err() {
            Some(GateError::NonFiniteReference {
                row: 1,
                step: 1,
                count: 300,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        // Control: the file unpoisoned (a scale of 0 is finite) passes every arm (on its own
        // greedy tape: verify's expectation from a foreign tape is another matter).
        let m = poisoned("output.weight", 17, 0);
        let mut spec = spec_for(&m, vec![], all);
        (spec.tape, spec.gen_len) = (None, 4);
        let res = run_gate(be, m, &spec, &mut |_| {}).unwrap();
        assert!(res.pass());
        assert!(res.arms.iter().all(|a| a.non_finite.is_none()));
    }

    #[test]
    fn tally_keeps_one_entry_per_device() {
        let mut l = Vec::new();
        Residency::tally(&mut l, Some(1), 4);
        Residency::tally(&mut l, None, 2);
        Residency::tally(&mut l, Some(1), 6);
        assert_eq!(l, vec![(Some(1), 10), (None, 2)]);
    }
}
