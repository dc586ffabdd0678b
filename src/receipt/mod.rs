//! Receipts: the versioned JSON record of one gate run.
//!
//! Rule: every field is DETERMINISTIC — a function of the model bytes, the backend and its
//! devices, the placement, the config and the tokens only — except the timings and the host
//! facts that [`FIELDS`] lists with the reason for each (`timings`, `tool`, `schema`, the
//! model's and tape's paths, a member process's host and pid). Two runs of a correct runtime
//! give identical deterministic parts; `diff` compares exactly those, field by field, and names
//! each difference by its path (`config.window: 3 vs 2`). A field the table does not name (one
//! added later) is deterministic: it is compared until someone argues here that it is not.
//! Receipts are written atomically (temp file in the same directory, then rename), so a reader
//! never sees half a receipt and an interrupted soak keeps every finished one.

pub mod bench;
pub mod diff;
pub mod junit;

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Version 2 added the prime and verify arms: their steps carry (repeat, chunk) or round
/// keys and the verify arm its rounds. A version-1 receipt is read as a version 2 without
/// them (it has no such arms); any other schema is refused naming it.
pub const SCHEMA: &str = "ppn-gate.receipt/2";
/// Older schemas this tool still reads (and diffs).
pub const SCHEMAS_READ: [&str; 2] = ["ppn-gate.receipt/1", SCHEMA];

/// How `diff` (and so the battery's golden comparison) treats a receipt field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldClass {
    /// Compared: a difference makes the receipts `different`.
    Deterministic,
    /// Compared where both receipts record it; a receipt older than the record (or of a
    /// backend without the setting) lacks it, and a lacking side is no difference.
    WhenRecorded,
    /// A device's name: compared, except that the CPU backend's ` (N threads)` suffix is
    /// compared without N (see [`device_name_key`]).
    DeviceName,
    /// Wall-clock time: differs between any two runs.
    Timing,
    /// A fact of the host that ran the gate, not of the gate.
    Host,
    /// Which build wrote the receipt, in which format.
    Provenance,
}

impl FieldClass {
    /// Whether `diff` compares fields of this class.
    pub fn compared(self) -> bool {
        matches!(
            self,
            FieldClass::Deterministic | FieldClass::WhenRecorded | FieldClass::DeviceName
        )
    }
}

/// One row of the receipt's field table: a path (`.` between keys, `[]` for any index of a
/// list; `arms[]` is any arm, matched by name), its class, and why.
#[derive(Debug)]
pub struct FieldRule {
    pub path: &'static str,
    pub class: FieldClass,
    pub why: &'static str,
}

const fn rule(path: &'static str, class: FieldClass, why: &'static str) -> FieldRule {
    FieldRule { path, class, why }
}

use FieldClass::{Deterministic as Det, DeviceName, Host, Provenance, Timing, WhenRecorded};

/// The receipt's fields and how `diff` treats each: the one place this is written down
/// (README's "Receipts: what diff compares" prints it). A path's rule is its own row or else
/// its nearest listed ancestor's (`reference` covers `reference.steps[].topk`); a path under
/// no row is deterministic.
pub const FIELDS: &[FieldRule] = &[
    rule("schema", Provenance, "the format version: a version-1 receipt is read as version 2 and compared field by field"),
    rule("tool", Provenance, "the build that wrote it (name, version, git commit): comparing two builds' receipts is what diff is for"),
    rule("backend.kind", Det, "cpu and cuda are different runtimes: one's receipt proves nothing of the other"),
    rule("backend.device_names", DeviceName, "which devices ran the stages; the CPU backend's thread count is the host's core count, and its kernels are bit-identical at any count (math::tests::matmul_is_bit_identical_for_1_2_and_3_threads)"),
    rule("backend.jitter_us", Det, "the schedule the gate explored: a receipt under jitter is a different test"),
    rule("backend.graphs", WhenRecorded, "a CUDA setting: absent on the CPU backend and from receipts older than it"),
    rule("backend.mma", WhenRecorded, "a CUDA setting: absent on the CPU backend and from receipts older than it"),
    rule("model.file", Host, "where the file lies on the host that ran it; model.blake3 names the bytes (another blake3: not comparable)"),
    rule("model.arch", Det, "the model's header"),
    rule("model.n_layers", Det, "the model's header"),
    rule("model.n_embd", Det, "the model's header"),
    rule("model.n_heads", Det, "the model's header"),
    rule("model.n_kv_heads", Det, "the model's header"),
    rule("model.head_dim", Det, "the model's header"),
    rule("model.n_ff", Det, "the model's header"),
    rule("model.vocab", Det, "the model's header"),
    rule("model.weight_bytes", Det, "the weights the runtime holds"),
    rule("model.blake3", Det, "the model's bytes: receipts of different models are not comparable (exit 2)"),
    rule("placement.stages", Det, "the placement under test"),
    rule("placement.fence", Det, "the placement under test"),
    rule("placement.devices", Det, "the placement under test"),
    rule("placement.transports", Det, "the placement under test"),
    rule("placement.stage_weight_bytes", Det, "the placement under test"),
    rule("placement.flags", Det, "the placement under test, as flags"),
    rule("placement.resident", WhenRecorded, "measured residency: absent from receipts older than the record"),
    rule("placement.misplaced", Det, "what the residency check found (read as empty where older receipts lack it)"),
    rule("placement.processes", Det, "multi-process gates: which member held which stages and links (absent: one process)"),
    rule("placement.processes[].device_names", DeviceName, "as backend.device_names"),
    rule("placement.processes[].host", Host, "the host name a member ran on"),
    rule("placement.processes[].pid", Host, "the process id a member had"),
    rule("placement.processes[].build_ms", Timing, "a member's build time"),
    rule("config.arms", Det, "the gate's flags"),
    rule("config.window", Det, "the gate's flags"),
    rule("config.batch", Det, "the gate's flags"),
    rule("config.prompt_len", Det, "the gate's flags"),
    rule("config.gen_len", Det, "the gate's flags"),
    rule("config.seed", Det, "the gate's flags"),
    rule("config.topk", Det, "the gate's flags"),
    rule("config.tape", Host, "the tape's path on the host; its content is reference.tokens (another: not comparable) and config.prompt_len"),
    rule("config.faults", Det, "the gate's flags"),
    rule("config.chunks", Det, "the gate's flags (the prime arm; absent without it)"),
    rule("config.repeat", Det, "the gate's flags (the prime arm; absent without it)"),
    rule("config.draft", Det, "the gate's flags (the verify arm; absent without it)"),
    rule("config.requests", Det, "the gate's flags (the serve arm; absent without it)"),
    rule("config.max_rows", Det, "the gate's flags (the serve arm; absent without it)"),
    rule("config.prefill_chunk", Det, "the gate's flags (the serve arm; absent without it)"),
    rule("config.planted_defect", Det, "the gate's flags (--plant-defect where it planted its flip; absent otherwise)"),
    rule("reference", Det, "the single-stage reference: tokens (another tape: not comparable), each step's token, logits hash and top-k"),
    rule("batch_references", Det, "the references of batched rows 1..B"),
    rule("arms", Det, "every arm, matched by name (a repeated name by its occurrence: arms[eager#2]): verdict, divergence record, steps, rounds"),
    rule("arms[].serve", Det, "the serve arm's requests (arrival, cache row, lengths, reference tape hash) and schedule (per step: admitted requests, rows as [request, position]), drawn from the flags and seed (absent for other arms)"),
    rule("verdict", Det, "the gate's verdict"),
    rule("timings", Timing, "wall-clock times and module-cache counts of this run"),
];

/// The field-table rule of a normalized path (indices written `[]`): its own row, else its
/// nearest listed ancestor's; None: no row covers it (deterministic).
pub fn field_rule(path: &str) -> Option<&'static FieldRule> {
    let covers = |r: &FieldRule| {
        path == r.path
            || path
                .strip_prefix(r.path)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    FIELDS
        .iter()
        .filter(|r| covers(r))
        .max_by_key(|r| r.path.len())
}

/// The class of a normalized path (see [`field_rule`]).
pub fn field_class(path: &str) -> FieldClass {
    field_rule(path).map_or(FieldClass::Deterministic, |r| r.class)
}

/// The part of a device name that is compared: the CPU backend names a device `cpuD (N
/// threads)`, N being the rayon pool (the host's cores); the CPU kernels give the same bits at
/// any N, so N is a host fact and reads as `cpuD (threads)`. Any other name is kept whole.
pub fn device_name_key(name: &str) -> std::borrow::Cow<'_, str> {
    let cpu = name.strip_prefix("cpu").and_then(|rest| {
        let (dev, tail) = rest.split_once(" (")?;
        let n = tail.strip_suffix(" threads)")?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (digits(dev) && digits(n)).then(|| format!("cpu{dev} (threads)"))
    });
    match cpu {
        Some(k) => std::borrow::Cow::Owned(k),
        None => std::borrow::Cow::Borrowed(name),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Receipt {
    pub schema: String,
    pub tool: Tool,
    pub backend: BackendInfo,
    pub model: ModelInfo,
    pub placement: PlacementInfo,
    pub config: ConfigInfo,
    pub reference: Reference,
    /// Single-stage references of batched rows 1..B (row 0's is `reference`).
    #[serde(default)]
    pub batch_references: Vec<Reference>,
    pub arms: Vec<Arm>,
    /// "PASS" iff every arm passed.
    pub verdict: String,
    pub timings: Timings,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
    pub git_commit: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BackendInfo {
    pub kind: String,
    /// Names of the devices the placement uses, indexed like `placement.devices`.
    pub device_names: Vec<String>,
    pub jitter_us: u64,
    /// CUDA: whether each stage's layer walk replayed a CUDA graph (`--graphs`): "on",
    /// "off", or where it could not although asked, "off (why)"; an "on" with `--jitter-us`
    /// says where the spins went. Absent on the CPU backend and from older receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graphs: Option<String>,
    /// CUDA: the tensor-core Q4_K matvec (`--mma`): "on" or "off". Absent on the CPU backend
    /// and from older receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mma: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    /// The path as given, or "builtin:<spec>" for the embedded synthetic default.
    pub file: String,
    pub arch: String,
    pub n_layers: usize,
    pub n_embd: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub vocab: usize,
    pub weight_bytes: u64,
    pub blake3: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PlacementInfo {
    pub stages: usize,
    pub fence: Vec<usize>,
    pub devices: Vec<usize>,
    /// Per boundary: "dtod", "peer" or "host".
    pub transports: Vec<String>,
    /// Per stage: bytes of weights the stage's engine holds (layers, plus embedding on
    /// stage 0 and output norm + head on the last).
    pub stage_weight_bytes: Vec<u64>,
    pub flags: String,
    /// Per stage: where its weights, scratch and KV cache measurably live (the backend reads
    /// each allocation's device back). Absent from receipts older than the record.
    #[serde(default)]
    pub resident: Vec<StageResident>,
    /// What lives on a device other than its stage's (empty on a correct runtime). A
    /// non-empty list fails the gate before any arm runs.
    #[serde(default)]
    pub misplaced: Vec<String>,
    /// Multi-process gates only (absent otherwise): which process held which stage, what
    /// crossed each process boundary, and each process's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<ProcessInfo>>,
}

/// One member of a multi-process gate.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProcessInfo {
    pub rank: usize,
    /// The stages it held (contiguous).
    pub stages: Vec<usize>,
    /// Each held stage's device on its host.
    pub devices: Vec<usize>,
    pub device_names: Vec<String>,
    /// The transport of the boundary into its first stage / out of its last ("ipc",
    /// "nccl"; null at the pipeline's ends).
    pub link_in: Option<String>,
    pub link_out: Option<String>,
    /// Where it ran (not compared by `diff`).
    pub host: String,
    pub pid: u32,
    /// blake3 over its own single-stage reference's step hashes: every member computes the
    /// reference and the receipt's writer checks they agree.
    pub reference_blake3: String,
    pub build_ms: f64,
}

impl ProcessInfo {
    /// The deterministic part (`diff` compares this): without host, pid and timings.
    pub fn placement_view(&self) -> ProcessInfo {
        ProcessInfo {
            host: String::new(),
            pid: 0,
            build_ms: 0.0,
            ..self.clone()
        }
    }
}

/// One stage's measured residency (see `crate::backend::Residency`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StageResident {
    pub stage: usize,
    /// The device the placement put the stage on.
    pub placed: usize,
    pub weights: Vec<DevBytes>,
    pub scratch: Vec<DevBytes>,
    pub cache: Vec<DevBytes>,
}

/// Bytes on one device (`device` null: host memory).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DevBytes {
    pub device: Option<usize>,
    pub bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConfigInfo {
    pub arms: Vec<String>,
    pub window: usize,
    pub batch: usize,
    pub prompt_len: usize,
    pub gen_len: usize,
    pub seed: u64,
    pub topk: usize,
    pub tape: Option<String>,
    pub faults: Vec<String>,
    /// The prime arm: its chunk sizes and repeats (absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
    /// The verify arm: drafts per round (absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<usize>,
    /// The serve arm: requests, rows per step and prefill chunk (absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_chunk: Option<usize>,
    /// `--plant-defect SPEC` where it planted its flip in this gate (the hunt's self-check):
    /// a FAIL it caused says so here, never reads as the runtime's own (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planted_defect: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Reference {
    pub row: usize,
    /// The whole tape: prompt then greedy tokens.
    pub tokens: Vec<u32>,
    pub steps: Vec<RefStep>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RefStep {
    pub step: usize,
    /// The token fed at this step (its logits predict the next one).
    pub token: u32,
    pub logits_blake3: String,
    /// `[[id, logit], ..]`, descending, ties by lower id.
    #[serde(deserialize_with = "nan_null::pairs")]
    pub topk: Vec<(u32, f32)>,
}

/// JSON has no NaN or infinity: serde_json writes such a logit as `null`. These read a
/// `null` back as NaN, so a receipt of a poisoned run loads (and `diff` can compare it).
/// A number is an f32 the tool wrote, so one past f32's range (1e39) is refused, naming the
/// value: read as f32 it would turn infinite, equal to every other non-finite logit, and
/// `diff` would call 1e39 and -1e39 the same.
mod nan_null {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer};

    fn logit<E: Error>(v: Option<f64>) -> Result<f32, E> {
        match v {
            None => Ok(f32::NAN),
            Some(x) if (x as f32).is_finite() => Ok(x as f32),
            Some(x) => Err(E::custom(format!(
                "logit {x:e} is past f32's range (a receipt holds f32 logits, null for a non-finite one)"
            ))),
        }
    }

    pub fn f32<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        logit(Option::<f64>::deserialize(d)?)
    }

    pub fn pairs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u32, f32)>, D::Error> {
        Vec::<(u32, Option<f64>)>::deserialize(d)?
            .into_iter()
            .map(|(i, v)| Ok((i, logit(v)?)))
            .collect()
    }
}

/// Logit equality for receipts: as f32 for finite values; any two non-finite values are
/// equal, since JSON writes every one of them as the same `null`.
fn same_logit(a: f32, b: f32) -> bool {
    a == b || (!a.is_finite() && !b.is_finite())
}

impl PartialEq for RefStep {
    fn eq(&self, o: &Self) -> bool {
        self.step == o.step
            && self.token == o.token
            && self.logits_blake3 == o.logits_blake3
            && self.topk.len() == o.topk.len()
            && self
                .topk
                .iter()
                .zip(&o.topk)
                .all(|(a, b)| a.0 == b.0 && same_logit(a.1, b.1))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Arm {
    pub name: String,
    pub verdict: String,
    pub mismatched_steps: usize,
    pub first_divergence: Option<Divergence>,
    pub steps: Vec<ArmStep>,
    /// The verify arm: every speculative round, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
    /// Steps whose logits held a NaN or an infinity where the (finite) reference's did not:
    /// the arm alone computed them (absent when none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_finite: Option<NonFinite>,
    /// The serve arm: its requests and schedule (absent for the other arms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeRecord>,
}

/// The serve arm's schedule as it ran: every request and every step's rows, so a FAIL names
/// what else shared the divergent step. Deterministic: drawn from the flags and the seed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServeRecord {
    /// Cache rows (sequences) the requests share.
    pub cache_rows: usize,
    pub requests: Vec<ServeRequest>,
    pub schedule: Vec<ServeStep>,
}

/// One request of the serve arm: when it arrived, was admitted and finished (serve steps),
/// its cache row, lengths, and the blake3 of its reference tape (prompt then greedy tokens).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServeRequest {
    pub request: usize,
    pub arrival: usize,
    pub admitted: usize,
    pub finished: usize,
    pub slot: usize,
    pub prompt_len: usize,
    pub gen_len: usize,
    pub tokens_blake3: String,
}

/// One step of the serve arm: the requests admitted (their cache rows reset) before it, and
/// its rows in issue order, each `[request, position]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServeStep {
    pub step: usize,
    pub admitted: Vec<usize>,
    pub rows: Vec<(usize, usize)>,
}

impl ServeRecord {
    /// What else step `step` carried besides request `request`: `request q positions a..b`,
    /// each request once (for the FAIL line).
    pub fn company(&self, step: usize, request: usize) -> String {
        let Some(st) = self.schedule.get(step) else {
            return String::new();
        };
        let mut seen: Vec<(usize, usize, usize)> = Vec::new();
        for &(q, p) in &st.rows {
            match seen.iter_mut().find(|e| e.0 == q) {
                Some(e) => e.2 = p,
                None => seen.push((q, p, p)),
            }
        }
        let others: Vec<String> = seen
            .iter()
            .filter(|e| e.0 != request)
            .map(|&(q, a, b)| match a == b {
                true => format!("request {q} position {a}"),
                false => format!("request {q} positions {a}..={b}"),
            })
            .collect();
        let mine = st.rows.iter().filter(|e| e.0 == request).count();
        format!(
            "; serve step {step} had {} rows: {mine} of request {request}{}",
            st.rows.len(),
            if others.is_empty() {
                ", nothing else".to_string()
            } else {
                format!(", {}", others.join(", "))
            }
        )
    }
}

/// An arm's non-finite logits: how many of its steps held any, and the first such step.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct NonFinite {
    /// Arm steps (one row of one position each) with at least one NaN or infinite logit.
    pub steps: usize,
    /// The first such step's position, row and key.
    pub step: usize,
    pub row: usize,
    #[serde(flatten)]
    pub key: StepKey,
    /// Its NaN or infinite logits, of `vocab`.
    pub count: usize,
    pub vocab: usize,
}

impl NonFinite {
    /// The verdict line's words for it.
    pub fn describe(&self) -> String {
        format!(
            "non-finite logits (NaN/Inf) in {} steps where the reference is finite, first at step {}{} row {}: {} of {}",
            self.steps,
            self.step,
            self.key.describe(),
            self.row,
            self.count,
            self.vocab
        )
    }
}

/// How many of `row`'s values are NaN or infinite.
pub fn count_non_finite(row: &[f32]) -> usize {
    row.iter().filter(|x| !x.is_finite()).count()
}

/// Where a step of the prime or verify arm belongs beyond its position: a prime's repeat
/// and chunk size, a verify round. Absent (null) for the other arms.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct StepKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// The serve arm's step (the position is the step's `step`, the request its `row`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_step: Option<usize>,
}

impl StepKey {
    /// ` (repeat r, chunk C)` / ` (round k)` / empty, for messages.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if let Some(r) = self.repeat {
            v.push(format!("repeat {r}"));
        }
        if let Some(c) = self.chunk {
            v.push(format!("chunk {c}"));
        }
        if let Some(k) = self.round {
            v.push(format!("round {k}"));
        }
        if let Some(k) = self.serve_step {
            v.push(format!("serve step {k}"));
        }
        if v.is_empty() {
            String::new()
        } else {
            format!(" ({})", v.join(", "))
        }
    }
}

/// One speculative round of the verify arm: it walked `drafted.len() + 1` positions from
/// `start` (the input token, then the drafts), the arm accepted `accepted` drafts by its
/// own logits, and the reference's greedy choices imply `expected`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Round {
    pub round: usize,
    pub start: usize,
    pub drafted: Vec<u32>,
    /// The draft index replaced by a wrong token (null: every draft is the tape's).
    pub replaced: Option<usize>,
    pub accepted: usize,
    pub expected: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ArmStep {
    /// The position (the tape index) whose logits these are.
    pub step: usize,
    pub row: usize,
    #[serde(flatten)]
    pub key: StepKey,
    pub logits_blake3: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Divergence {
    pub step: usize,
    pub row: usize,
    #[serde(flatten)]
    pub key: StepKey,
    /// First logit index whose bits differ.
    pub index: usize,
    #[serde(rename = "ref", deserialize_with = "nan_null::f32")]
    pub reference: f32,
    #[serde(deserialize_with = "nan_null::f32")]
    pub got: f32,
}

impl PartialEq for Divergence {
    fn eq(&self, o: &Self) -> bool {
        (self.step, self.row, self.index, self.key) == (o.step, o.row, o.index, o.key)
            && same_logit(self.reference, o.reference)
            && same_logit(self.got, o.got)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Timings {
    pub load_ms: f64,
    pub build_ms: f64,
    pub reference_ms: f64,
    /// Per arm, in `arms` order.
    pub arm_ms: Vec<f64>,
    pub total_ms: f64,
    /// `--trace` only: per arm, in `arms` order, the fraction of the arm's wall time in
    /// which two or more stage streams were running work (event waits and records are not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_overlap: Option<Vec<f64>>,
    /// CUDA: the kernel modules this run compiled or took from the module cache (the first
    /// runtime built on a device pays for them: usually the reference's, inside
    /// `reference_ms`). Absent on the CPU backend and from older receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<ModuleStats>,
}

/// Kernel modules a run needed, and where they came from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct ModuleStats {
    /// The on-disk module cache, null with `--no-cache`.
    pub cache_dir: Option<String>,
    /// Modules read from the cache (no NVRTC).
    pub hits: u64,
    /// Modules compiled by NVRTC (and stored, with a cache).
    pub misses: u64,
    /// Cache entries found unusable (unreadable, or failing their header, length or checksum
    /// check) and compiled again.
    pub corrupt: u64,
    /// Compiled modules the cache could not store (each named on stderr; the run went on).
    pub store_errors: u64,
    /// Wall milliseconds spent getting modules: NVRTC or the cache read, and the load.
    pub ms: f64,
}

impl ModuleStats {
    /// What happened between `before` and `self` (two snapshots of one backend's counters).
    pub fn since(&self, before: &ModuleStats) -> ModuleStats {
        ModuleStats {
            cache_dir: self.cache_dir.clone(),
            hits: self.hits.saturating_sub(before.hits),
            misses: self.misses.saturating_sub(before.misses),
            corrupt: self.corrupt.saturating_sub(before.corrupt),
            store_errors: self.store_errors.saturating_sub(before.store_errors),
            ms: self.ms - before.ms,
        }
    }
}

/// blake3 hex of a token tape as little-endian u32 (the serve arm's per-request record).
pub fn hash_tokens(tokens: &[u32]) -> String {
    let mut h = blake3::Hasher::new();
    for t in tokens {
        h.update(&t.to_le_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// blake3 hex of a logits row as little-endian f32.
///
/// Why the byte view: one `update` per value (4 bytes) took 4.0 ms for one Gemma-3 row
/// (262,144 values) where one `update` of the row's bytes takes 0.3 ms (this 2-core machine,
/// 2026-11-30), so gates and soaks of large-vocabulary models spent most of a step hashing
/// on the host while the GPU waited. On a little-endian target the row's memory IS its
/// little-endian bytes (bytemuck's checked cast, no copy).
pub fn hash_logits(row: &[f32]) -> String {
    let mut h = blake3::Hasher::new();
    #[cfg(target_endian = "little")]
    {
        h.update(bytemuck::cast_slice(row));
    }
    #[cfg(not(target_endian = "little"))]
    for part in row.chunks(1024) {
        let mut buf = [0u8; 4096];
        for (b, v) in buf.chunks_exact_mut(4).zip(part) {
            b.copy_from_slice(&v.to_le_bytes());
        }
        h.update(&buf[..4 * part.len()]);
    }
    h.finalize().to_hex().to_string()
}

/// The k largest logits, descending, ties by lower id. NaN sorts below everything (a NaN
/// row still gets a stable top-k, and its hash already says it differs).
pub fn topk(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let key = |i: &u32| {
        let v = row[*i as usize];
        if v.is_nan() {
            f32::NEG_INFINITY
        } else {
            v
        }
    };
    // Total order: larger logit first, then lower id. Selection then a sort of k items: a
    // 262k-entry vocab is not sorted whole every step.
    let order = |a: &u32, b: &u32| key(b).total_cmp(&key(a)).then(a.cmp(b));
    let mut idx: Vec<u32> = (0..row.len() as u32).collect();
    let k = k.min(idx.len());
    if k == 0 {
        return Vec::new();
    }
    if k < idx.len() {
        idx.select_nth_unstable_by(k - 1, order);
        idx.truncate(k);
    }
    idx.sort_by(order);
    idx.into_iter().map(|i| (i, row[i as usize])).collect()
}

/// First index whose bits differ, with both values.
pub fn first_diff(reference: &[f32], got: &[f32]) -> Option<(usize, f32, f32)> {
    if reference.len() != got.len() {
        let i = reference.len().min(got.len());
        return Some((
            i,
            reference.get(i).copied().unwrap_or(f32::NAN),
            got.get(i).copied().unwrap_or(f32::NAN),
        ));
    }
    reference
        .iter()
        .zip(got)
        .position(|(a, b)| a.to_bits() != b.to_bits())
        .map(|i| (i, reference[i], got[i]))
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error("cannot read receipt {path}: {err}")]
    Read { path: String, err: std::io::Error },
    /// Not JSON, or an object with a key twice (crate::jsonin).
    #[error("receipt {path}: {err}")]
    Json { path: String, err: String },
    #[error("receipt {path} has schema {got:?}, this tool reads {SCHEMAS_READ:?}")]
    Schema { path: String, got: String },
    /// A field of the wrong type or value, or a missing one (`field`: its path, `.` for the
    /// document itself).
    #[error("receipt {path}: field {field}: {err}")]
    Field {
        path: String,
        field: String,
        err: String,
    },
    /// A field the schema does not have: refused, never silently dropped (diff could not
    /// compare it, and a mistyped key would hide the field it meant).
    #[error("receipt {path}: field {field} is not in the schema {SCHEMA}")]
    Unknown { path: String, field: String },
    #[error("cannot write receipt {path}: {err}")]
    Write { path: String, err: std::io::Error },
}

/// The first `*blake3` field of a receipt file that is not a blake3 hash as the gate writes
/// one (64 lowercase hex digits), with its path (`arms[1].steps[3].logits_blake3`) and the
/// value as JSON. Why: `diff` compares hashes as strings, so two hand-edited receipts whose
/// `model.blake3` was emptied, or whose steps held `"zz"`, compared "same".
fn bad_hash(v: &serde_json::Value, at: &str) -> Option<(String, String)> {
    use serde_json::Value as J;
    let is_hash =
        |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match v {
        J::Object(m) => m.iter().find_map(|(k, x)| {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            if !k.ends_with("blake3") {
                bad_hash(x, &here)
            } else if x.as_str().is_some_and(is_hash) {
                None
            } else {
                Some((here, x.to_string()))
            }
        }),
        J::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| bad_hash(x, &format!("{at}[{i}]"))),
        _ => None,
    }
}

impl Receipt {
    pub fn load(path: &Path) -> Result<Receipt, ReceiptError> {
        let p = path.display().to_string();
        let text = crate::fsio::read_json_file(path).map_err(|err| ReceiptError::Read {
            path: p.clone(),
            err,
        })?;
        let v = crate::jsonin::parse_unique(&text).map_err(|err| ReceiptError::Json {
            path: p.clone(),
            err,
        })?;
        let schema = v
            .get("schema")
            .and_then(|s| s.as_str())
            .unwrap_or("<missing>");
        if !SCHEMAS_READ.contains(&schema) {
            return Err(ReceiptError::Schema {
                path: p,
                got: schema.to_string(),
            });
        }
        if let Some((field, got)) = bad_hash(&v, "") {
            return Err(ReceiptError::Field {
                path: p,
                field,
                err: format!(
                    "{}: not a blake3 hash (64 lowercase hex digits)",
                    crate::jsonin::clip(&got)
                ),
            });
        }
        Receipt::from_json_value(&v).map_err(|e| match e {
            FieldError::Bad { field, err } => ReceiptError::Field {
                path: p,
                field,
                err,
            },
            FieldError::Unknown(field) => ReceiptError::Unknown {
                path: p,
                field: crate::jsonin::clip(&field),
            },
        })
    }

    /// A receipt from parsed JSON (its schema already checked), every error naming the field.
    pub fn from_json_value(v: &serde_json::Value) -> Result<Receipt, FieldError> {
        let r: Receipt = serde_path_to_error::deserialize(v).map_err(|e| {
            let (at, err) = (e.path().to_string(), e.into_inner().to_string());
            // serde names a missing field in its message, at the parent's path: name the
            // field's own path instead.
            let missing = err
                .strip_prefix("missing field `")
                .and_then(|m| m.strip_suffix('`'));
            match missing {
                Some(k) if at == "." => FieldError::Bad {
                    field: k.to_string(),
                    err: "missing".into(),
                },
                Some(k) => FieldError::Bad {
                    field: format!("{at}.{k}"),
                    err: "missing".into(),
                },
                None => FieldError::Bad { field: at, err },
            }
        })?;
        let back = serde_json::to_value(&r).expect("receipt serializes");
        match unknown_field(v, &back, "") {
            Some(field) => Err(FieldError::Unknown(field)),
            None => Ok(r),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("receipt serializes") + "\n"
    }

    /// Write atomically: temp file beside the target, then rename.
    pub fn write(&self, path: &Path) -> Result<(), ReceiptError> {
        write_atomic(path, self.to_json().as_bytes()).map_err(|err| ReceiptError::Write {
            path: path.display().to_string(),
            err,
        })
    }
}

/// Why a JSON document is not a receipt, naming the field by its path (`config.window`,
/// `arms[1].steps[3].logits_blake3`).
#[derive(Debug, PartialEq)]
pub enum FieldError {
    Bad { field: String, err: String },
    Unknown(String),
}

/// The first key of `raw` that the typed receipt does not have (`back` is the receipt written
/// again): a key it writes nowhere, except a null or empty list, which is how an absent
/// optional field or an empty default list may be written.
fn unknown_field(raw: &serde_json::Value, back: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (raw, back) {
        (Value::Object(r), Value::Object(b)) => r.iter().find_map(|(k, rv)| {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            match b.get(k) {
                Some(bv) => unknown_field(rv, bv, &here),
                None if rv.is_null() || rv.as_array().is_some_and(|a| a.is_empty()) => None,
                None => Some(here),
            }
        }),
        (Value::Array(r), Value::Array(b)) => r
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (rv, bv))| unknown_field(rv, bv, &format!("{at}[{i}]"))),
        _ => None,
    }
}

/// Write `bytes` to `path` atomically (`crate::fsio::write_atomic`), creating parents.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    crate::fsio::write_atomic(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A golden receipt's text edited by `edit`, loaded from a file: the error it gives.
    fn load_edited(edit: impl Fn(&mut serde_json::Value) -> String) -> String {
        let golden =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("receipts/golden/builtin-n4-dev0123.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&golden).unwrap()).unwrap();
        let text = edit(&mut v);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        std::fs::write(&p, text).unwrap();
        assert!(Receipt::load(&golden).is_ok());
        format!("{}", Receipt::load(&p).unwrap_err())
    }

    /// A hash field that is no blake3 hash is refused naming its path: two receipts with
    /// `model.blake3` emptied, or a step's hash `"zz"`, compared "same" in `diff`.
    #[test]
    fn a_hash_that_is_not_a_blake3_hash_is_refused() {
        type Edit = fn(&mut serde_json::Value);
        let cases: [(&str, Edit); 5] = [
            ("field model.blake3: \"\"", |v| {
                v["model"]["blake3"] = "".into()
            }),
            ("field arms[0].steps[3].logits_blake3: \"zz\"", |v| {
                v["arms"][0]["steps"][3]["logits_blake3"] = "zz".into()
            }),
            ("field reference.steps[0].logits_blake3: null", |v| {
                v["reference"]["steps"][0]["logits_blake3"] = serde_json::Value::Null
            }),
            // 64 digits, upper case: not what the gate writes, and not equal as a string.
            ("field model.blake3: \"ABCDEF", |v| {
                v["model"]["blake3"] = "ABCDEF"
                    .repeat(10)
                    .chars()
                    .take(64)
                    .collect::<String>()
                    .into()
            }),
            ("field reference.steps[2].logits_blake3: \"0000", |v| {
                v["reference"]["steps"][2]["logits_blake3"] = "0".repeat(65).into()
            }),
        ];
        for (want, edit) in cases {
            let e = load_edited(|v| {
                edit(v);
                serde_json::to_string(v).unwrap()
            });
            assert!(
                e.contains(want) && e.contains("not a blake3 hash"),
                "{want}: {e}"
            );
        }
    }

    #[test]
    fn a_logit_past_f32_range_is_refused_not_read_as_infinity() {
        // 1e39 and -1e39 would both turn infinite, equal as every non-finite logit is, and
        // `diff` would call the two files the same.
        for x in ["1e39", "-1e39", "1e308"] {
            let e = load_edited(|v| {
                // a sentinel no golden value shares, replaced by the number as written
                v["reference"]["steps"][1]["topk"][2][1] = serde_json::json!(0.123456789012);
                let t = serde_json::to_string(v).unwrap();
                assert_eq!(t.matches("0.123456789012").count(), 1);
                t.replace("0.123456789012", x)
            });
            assert!(
                e.contains("field reference.steps[1].topk: logit"),
                "{x}: {e}"
            );
            assert!(e.contains("past f32's range"), "{x}: {e}");
        }
        // f32::MAX itself, as serde_json writes it, still reads.
        let e = load_edited(|v| {
            v["reference"]["steps"][1]["topk"][2][1] = serde_json::json!(f32::MAX);
            v["zz"] = serde_json::json!(1);
            serde_json::to_string(v).unwrap()
        });
        assert!(e.contains("field zz is not in the schema"), "{e}");
    }

    #[test]
    fn a_receipt_with_a_key_twice_is_refused_and_a_long_key_is_cut() {
        let e = load_edited(|v| {
            let t = serde_json::to_string(v).unwrap();
            format!("{{\"schema\": \"bogus/9\", {}", &t[1..])
        });
        assert!(e.contains("key \"schema\" appears twice"), "{e}");
        let e = load_edited(|v| {
            v["K".repeat(10_000_000)] = serde_json::json!(1);
            serde_json::to_string(v).unwrap()
        });
        assert!(
            e.len() < 300 && e.contains("(10000000 bytes) is not in the schema"),
            "{e}"
        );
    }

    #[test]
    fn non_finite_logits_round_trip_through_json_and_compare_equal() {
        let d = Divergence {
            step: 3,
            row: 1,
            // A prime step's key travels flattened beside the step (and nulls stay NaN).
            key: StepKey {
                repeat: Some(2),
                chunk: Some(8),
                round: None,
                serve_step: None,
            },
            index: 7,
            reference: 1.5,
            got: f32::NAN,
        };
        let st = RefStep {
            step: 0,
            token: 5,
            logits_blake3: "ab".into(),
            topk: vec![(2, 1.0), (4, f32::INFINITY), (9, f32::NAN)],
        };
        let d2: Divergence = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        let st2: RefStep = serde_json::from_str(&serde_json::to_string(&st).unwrap()).unwrap();
        assert!(d2.got.is_nan() && d2.reference == 1.5);
        assert_eq!(d2, d);
        assert_eq!(st2, st);
        // A finite difference is still a difference.
        let other = Divergence {
            got: 2.0,
            ..d.clone()
        };
        assert_ne!(other, d);
        let mut st3 = st.clone();
        st3.topk[0].1 = 1.25;
        assert_ne!(st3, st);
    }

    #[test]
    fn topk_is_descending_with_ties_by_lower_id_and_nan_last() {
        let row = [1.0, 3.0, f32::NAN, 3.0, -1.0, 2.0];
        assert_eq!(topk(&row, 4), vec![(1, 3.0), (3, 3.0), (5, 2.0), (0, 1.0)]);
        assert_eq!(topk(&row, 1)[0].0, 1); // the greedy choice
        assert_eq!(topk(&row, 99).len(), row.len());
        assert!(topk(&row, 0).is_empty());
    }

    #[test]
    fn topk_selection_matches_a_full_sort() {
        // Many ties and a NaN: the selection path must give exactly the full sort's prefix.
        let row: Vec<f32> = (0..5000u32)
            .map(|i| {
                if i == 77 {
                    f32::NAN
                } else {
                    ((i * 7919) % 97) as f32
                }
            })
            .collect();
        let mut full: Vec<u32> = (0..row.len() as u32).collect();
        let key = |i: u32| {
            if row[i as usize].is_nan() {
                f32::NEG_INFINITY
            } else {
                row[i as usize]
            }
        };
        full.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
        for k in [1, 2, 20, 97, 4999] {
            let got: Vec<u32> = topk(&row, k).into_iter().map(|x| x.0).collect();
            assert_eq!(got, full[..k].to_vec(), "k = {k}");
        }
    }

    #[test]
    fn hash_is_of_little_endian_f32_bytes() {
        let row = [1.0f32, -2.5];
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1.0f32.to_le_bytes());
        bytes.extend_from_slice(&(-2.5f32).to_le_bytes());
        assert_eq!(hash_logits(&row), blake3::hash(&bytes).to_hex().to_string());
        // A row spanning several of the hasher's 4 KiB pieces, the last one partial.
        let long: Vec<f32> = (0..2500).map(|i| (i as f32).sin()).collect();
        let bytes: Vec<u8> = long.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            hash_logits(&long),
            blake3::hash(&bytes).to_hex().to_string()
        );
        // -0.0 and 0.0 compare equal as floats but are different bits: the gate sees them.
        assert_ne!(hash_logits(&[0.0]), hash_logits(&[-0.0]));
        assert_eq!(first_diff(&[0.0, 1.0], &[-0.0, 1.0]), Some((0, 0.0, -0.0)));
    }

    #[test]
    fn a_vocabulary_sized_row_hashes_its_le_bytes() {
        // A Gemma-3 row: the hash is blake3 of the LE bytes, value by value, and one flipped
        // bit anywhere changes it.
        let mut row: Vec<f32> = (0..262_144)
            .map(|i| (i as f32 * 0.37).sin() * 30.0)
            .collect();
        let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        let h = hash_logits(&row);
        assert_eq!(h, blake3::hash(&bytes).to_hex().to_string());
        row[200_001] = f32::from_bits(row[200_001].to_bits() ^ 1);
        assert_ne!(hash_logits(&row), h);
    }
}
