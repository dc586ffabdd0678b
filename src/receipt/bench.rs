//! The bench receipt (`ppn-gate bench --receipt FILE`): one run's decode figures as JSON, for
//! scripts that put them beside another tool's (scripts/bench-vs-llamacpp.sh). Unlike a gate
//! receipt nothing in it is deterministic: it is a measurement, with what was measured.

use serde::{Deserialize, Serialize};

use super::{BackendInfo, ModelInfo, ModuleStats, Tool};

pub const BENCH_SCHEMA: &str = "ppn-gate.bench/1";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchReceipt {
    pub schema: String,
    pub tool: Tool,
    /// When the run ended (seconds since the Unix epoch, UTC).
    pub unix_time_s: u64,
    /// The machine's host name, where the OS says it.
    pub host: Option<String>,
    pub backend: BackendInfo,
    pub model: ModelInfo,
    pub config: BenchConfig,
    /// Device memory bandwidth measured in the same run (GB/s, read + write), null on a
    /// backend that does not measure it.
    pub bandwidth_gbs: Option<f64>,
    /// bandwidth / weight bytes: the decode rate at which every weight is read once per token.
    pub floor_tok_s: Option<f64>,
    /// Kernel launches per token of the reference path (null on a backend without kernels).
    pub launches_per_token: Option<f64>,
    /// Host time spent enqueueing one reference token.
    pub host_enqueue_us_per_token: f64,
    pub tok_s: PathRates,
    pub timings: BenchTimings,
    /// Per path, the fraction of its wall time with two or more stage streams running
    /// work, from one more traced walk of each path after the timed ones (tracing never
    /// touches the timed walks). Absent from older receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_overlap: Option<BusyOverlap>,
    /// The tracing cost: tokens per second of those traced walks (beside `tok_s`, which
    /// is untraced). Absent from older receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_tok_s: Option<NStagePaths>,
    /// CUDA: the modules the run compiled or took from the module cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<ModuleStats>,
    /// `--arms prime`: prefill throughput of the prime arm's walk per chunk size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill: Vec<PrefillRate>,
    /// `--arms serve`: the serve arm's schedule walked on the placement, timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeRate>,
}

/// One timed walk of the serve arm's seeded schedule (`--requests`, `--max-rows`,
/// `--prefill-chunk`, prompts of 1..=`--prompt-len`, 0..=`--gen-len` generated) on the
/// placement with `--window` steps in flight, every row's logits read back as the arm reads
/// them: the better of two walks after a warm-up one.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServeRate {
    pub requests: usize,
    pub max_rows: usize,
    pub prefill_chunk: usize,
    /// The cache rows (sequences) the requests share.
    pub cache_rows: usize,
    pub max_prompt: usize,
    pub max_gen: usize,
    /// Steps of the schedule, and rows over all of them (every position of every request).
    pub steps: usize,
    pub rows: usize,
    /// Prompt positions (prefilled rows) and generated ones (decode rows fed a generated
    /// token) over all requests: `rows = prompt_tokens + generated_tokens`.
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub wall_s: f64,
    pub requests_per_s: f64,
    pub generated_tok_s: f64,
    /// Every row, prompt and generated: rows / wall_s.
    pub rows_per_s: f64,
}

/// Prompt tokens per second of one prime (a reset cache, the prompt as chunks of `chunk`
/// positions, `window` chunks in flight, every position's logits read back as the prime
/// arm reads them), on one stage and on the bench's N stages; and of the same walk with
/// each chunk's head on its last position only (`last_*`: a prefill, what llama-bench's
/// pp512 computes).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PrefillRate {
    pub chunk: usize,
    pub prompt: usize,
    pub one_stage_tok_s: f64,
    pub staged_tok_s: f64,
    #[serde(default)]
    pub last_one_stage_tok_s: f64,
    #[serde(default)]
    pub last_staged_tok_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchConfig {
    /// The placement flags of the measured runtime (the reference is always one stage).
    pub placement: String,
    pub stages: usize,
    pub devices: Vec<usize>,
    pub steps: usize,
    pub window: usize,
    /// Rows of the batched path.
    pub batch: usize,
    /// The paths measured after eager (`--arms`).
    pub arms: Vec<String>,
}

/// Decode tokens per second of each path (batched: all rows together); null where `--arms`
/// left the path out.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PathRates {
    /// One stage, eager (the gate's reference).
    pub reference: f64,
    /// The placement, eager.
    pub eager: f64,
    pub pipelined: Option<f64>,
    pub batched: Option<f64>,
}

/// One figure per N-stage path (`busy_overlap`, `traced_tok_s`): null where `--arms` left
/// the path out.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NStagePaths {
    pub eager: f64,
    pub pipelined: Option<f64>,
    pub batched: Option<f64>,
}

pub type BusyOverlap = NStagePaths;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchTimings {
    /// Reading and checking the model file.
    pub load_ms: f64,
    /// Building the one-stage runtime, the first on the device (on CUDA this is where the
    /// modules are compiled or read from the cache).
    pub reference_build_ms: f64,
    /// Building the placement's runtime.
    pub build_ms: f64,
}

impl BenchReceipt {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("bench receipt serializes") + "\n"
    }
}
