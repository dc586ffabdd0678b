//! Command line: parse (clap) into the gate layer's options, dispatch to one file per
//! subcommand, print. Validation, the plan, the run and the receipt are `crate::gate`'s.
//!
//! Exit codes: 0 every arm PASS (or the subcommand succeeded), 1 a gate FAIL (or `diff`
//! found a difference), 2 a harness error (bad flags, bad files, backend errors) — with a
//! message naming the offending value; `battery` only: 3 nothing failed but a gate was
//! skipped (it needs more devices than this machine has); `soak` and `battery`: 130 stopped by
//! SIGINT, SIGTERM or SIGHUP with no FAIL among the finished runs (128 + SIGINT, as a shell
//! reports Ctrl-C; a FAIL found before the signal still exits 1); any other command drawing a
//! progress bar (`term`) also exits 130 on such a signal, the bar cleared. Every output
//! path is checked writable before any work (exit 2 naming the flag). Configuration comes from flags
//! only, never from environment variables (one location follows them: the default of
//! `--cache-dir`, where the XDG convention puts a user's caches).

mod battery;
mod bench;
mod diff;
#[cfg(test)]
mod flag_bounds;
pub mod gate;
mod hunt;
mod inspect;
#[cfg(test)]
mod policy_tests;
pub mod selftest;
mod shared;
mod soak;
mod synth;
mod trace_check;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::exit::{EXIT_ERROR, EXIT_PASS};
use crate::gate::GateOptions;

#[derive(Parser, Debug)]
#[command(
    name = "ppn-gate",
    version,
    about = "Gate N-stage pipeline-parallel decode: every arm's logits must be bit-identical to a single-stage reference",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    #[command(flatten)]
    pub gate: GateArgs,
    /// Diagnostics on stderr (module cache, load times, device notes, each arm's start),
    /// for every command; without it none are printed. Results are always on stdout.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Print a GGUF file's architecture, shapes, tensor types and sizes, and metadata.
    Inspect {
        file: PathBuf,
        /// Also list every tensor.
        #[arg(long)]
        tensors: bool,
    },
    /// Write a synthetic model with seeded weights (byte-identical for the same flags).
    Synth(SynthArgs),
    /// Repeat a gate N times; classify failures as deterministic or timing-dependent.
    /// SIGINT, SIGTERM or SIGHUP: summary.json says `interrupted: true` at once, the run in
    /// progress finishes, the soak stops (a second signal: it leaves at once). Exit 0 every
    /// run PASS, 1 a FAIL, 2 an error (the summary's `error` says which run), 130 interrupted
    /// with no FAIL.
    Soak(SoakArgs),
    /// Compare every deterministic field of two receipts (README: "what diff compares"):
    /// each difference named by its path with both values (`config.window: 3 vs 2`). Exit 0
    /// same, 1 different, 2 not comparable (another model or tokens) or a receipt that does
    /// not parse (naming the file and the field).
    Diff {
        a: PathBuf,
        b: PathBuf,
        /// Print the result as JSON (`ppn-gate.diff/1`: verdict, every difference, and per
        /// reference and arm the first divergent step) on stdout; same exit codes.
        #[arg(long)]
        json: bool,
        /// Leave one field (a receipt path such as backend.graphs, config.jitter_us,
        /// backend.mma) out of the comparison: a same-bits check of two settings. Repeatable.
        /// The logits, tokens, verdicts and the model's bytes cannot be ignored (exit 2).
        #[arg(long, value_name = "PATH")]
        ignore: Vec<String>,
    },
    /// Run a battery of gates (a JSON list of gate configs); optionally diff against goldens.
    /// A gate whose `needs_devices` this machine lacks is skipped with the reason: exit 0
    /// every gate ran and passed, 1 a FAIL, 2 an error, 3 no FAIL but a gate skipped, 130
    /// stopped by SIGINT, SIGTERM or SIGHUP (after the gate in progress) with no FAIL.
    Battery(BatteryArgs),
    /// Decode tokens/s of the reference, eager, pipelined and batched paths, prefill of the
    /// prime arm's chunks, and the serve arm's schedule in requests and generated tokens
    /// per second (--arms picks which of pipelined, batched, prime and serve run; eager, the
    /// base of every ratio, always does).
    Bench(BenchArgs),
    /// Run a multi-process gate: W member processes on this host, children of this one
    /// (`--rank r --world W --rendezvous DIR` each); prints the verdicts of the ONE receipt
    /// the member holding the last stage writes. A member that dies or hangs fails the
    /// launch (exit 2) naming it.
    Launch(LaunchArgs),
    /// What of `--transport nccl` this machine can run: load libnccl (printing which), make a
    /// unique id, and with --device a one-rank send/recv on that GPU, bit-compared.
    NcclCheck {
        /// libnccl.so.2, or a directory holding it (default: the linker's search path).
        #[arg(long, value_name = "PATH")]
        nccl_lib: Option<PathBuf>,
        /// Also send to itself through a one-rank communicator on this CUDA device.
        #[arg(long)]
        device: Option<usize>,
    },
    /// Prove the gate can fail here: every --fault in the placement that opens its window on
    /// this backend and device count, R runs each, plus clean controls of those placements.
    /// Exit 0 only when every fault that can open here FAILs every run and every control
    /// PASSes every run; a fault that cannot open here is listed with the reason, not counted.
    Selftest(SelftestArgs),
    /// Search the configuration space for a divergence and shrink each finding to the
    /// smallest configuration that still fails (README: "hunt"). Gate flags given pin their
    /// dimension (one no draw can make valid: exit 2 before any trial); --seed is the hunt's
    /// seed, --fault F its fault (one no draw opens: exit 2 before any trial). Exit 0 no
    /// finding, 1
    /// findings (the report and every finding kept on SIGINT/SIGTERM/SIGHUP), 2 a harness
    /// error, 130 interrupted with no finding.
    Hunt(HuntArgs),
    /// Check a trace file (`--trace`, either backend) against the pipeline bars for one
    /// phase: every stage stream has work in every step, no two slices of one stream
    /// overlap, and some stage s starts step k+1 before stage s+1 finished step k. Exit 0
    /// all hold, 1 one fails, 2 the file is not such a trace.
    TraceCheck {
        file: PathBuf,
        /// The arm whose steps are checked: eager, pipelined, batched or serve (each step
        /// walked once; prime and verify walk positions again, the reference has one stage:
        /// refused).
        #[arg(long, default_value = "pipelined")]
        phase: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct GateArgs {
    /// Backend: auto (CUDA when a driver loads and a device answers, else CPU; the header
    /// then says why: no driver, no device, or the error), cpu, cuda.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// GGUF model file (default: the built-in synthetic model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Number of pipeline stages (default: the length of --devices, else 1).
    #[arg(long, allow_negative_numbers = true)]
    pub stages: Option<usize>,
    /// Stage cuts c1,..,cN-1, strictly increasing in (0, n_layers) (default: even split).
    #[arg(long, allow_negative_numbers = true)]
    pub splits: Option<String>,
    /// Device of each stage d0,..,dN-1 (default: all on device 0).
    #[arg(long, allow_negative_numbers = true)]
    pub devices: Option<String>,
    /// Boundary transport (default auto): auto (peer where the devices have it, else host),
    /// host (bounce every boundary through host memory, same-device ones too), peer (device
    /// to device; a pair without peer access is refused), ipc (cpu backend: TCP between the
    /// processes of a multi-process gate, a test transport), nccl (cuda backend: NCCL
    /// send/recv between the processes of a multi-process gate). Needs 2+ stages (one stage
    /// has no boundary: refused).
    #[arg(long, value_name = "NAME")]
    pub transport: Option<String>,
    /// Arms to run, comma-separated: eager, pipelined, batched, prime, verify, serve (README: "which
    /// flags each arm reads").
    #[arg(long, default_value = "eager,pipelined,batched")]
    pub arms: String,
    /// Prime arm: chunk sizes C[,C2..] (positions of the prompt per step; default 1, 8,
    /// 16 and the whole prompt, each at most the prompt; a size given longer than the prompt
    /// is refused).
    #[arg(long, allow_negative_numbers = true)]
    pub chunk: Option<String>,
    /// Prime arm: primes per chunk size in one process, each on a reset cache (default 3;
    /// refused without the prime arm).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub repeat: Option<usize>,
    /// Verify arm: draft tokens per speculative round (default 4, at most the positions after
    /// the first round's input; refused without the verify arm, and given past those
    /// positions).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub draft: Option<usize>,
    /// Steps (prime: chunks) in flight in the pipelined, batched and prime arms (default 3;
    /// refused when none of them runs).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub window: Option<usize>,
    /// Sequences in the batched arm (default 3; refused without the batched arm).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub batch: Option<usize>,
    /// Serve arm: requests in the seeded schedule (default 12; each a prompt of
    /// 1..=--prompt-len tokens and 0..=--gen-len greedy ones, arriving over the run; refused
    /// without the serve arm).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub requests: Option<usize>,
    /// Serve arm: the most rows one step carries (default 8); also the cache rows
    /// (sequences) the requests share, at most --requests of them (a finished request's row
    /// is reused). Refused without the serve arm.
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub max_rows: Option<usize>,
    /// Serve arm: the most prompt positions of one request one step prefills (default 4, or
    /// --max-rows when that is less; a given one above --max-rows is refused, as it is
    /// without the serve arm).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub prefill_chunk: Option<usize>,
    /// Prompt tokens per sequence (default 8): the seeded prompts' length, and with a
    /// --tape whose JSON has no `prompt_len`, the tape's prompt (the default at most the
    /// tape's length; a given one longer than the tape is refused). A tape with
    /// `prompt_len` sets it: a --prompt-len that differs is refused (exit 2).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub prompt_len: Option<usize>,
    /// Greedy tokens generated by the reference after the prompt. Positions (prompt +
    /// generated, or the tape) are at most the model's context length, and the memory every
    /// sizing flag implies at most the host's available memory: refused before any work.
    /// Default 16.
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub gen_len: Option<usize>,
    #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
    pub seed: u64,
    /// Token tape for row 0 instead of a seeded prompt and greedy tokens: a JSON object with
    /// a `tokens` or `tape` array of token ids (each below the model's vocab; at most the
    /// model's context length of them; the file at most 16 MiB) and an optional
    /// `prompt_len` (1 up to the tape's length; the format of tests/data/oracle). One rule
    /// for every arm: the tape's `prompt_len` (else --prompt-len, default 8) is row 0's
    /// prompt: the prime arm primes it (its default chunks 1, 8, 16 and the whole prompt
    /// reach it), the verify arm primes it and starts its rounds after it, and batch rows
    /// 1.. get seeded prompts of that length. The tape's tokens after the prompt need not
    /// be the model's greedy ones: every arm is teacher-forced on the tape, and verify's
    /// expected acceptance is the reference's own greedy choices there.
    #[arg(long)]
    pub tape: Option<PathBuf>,
    /// Top-k logits recorded per reference step (default 8).
    #[arg(long, allow_negative_numbers = true, value_name = "K")]
    pub topk: Option<usize>,
    /// Break one law on purpose (negative control); repeatable. A fault whose window cannot
    /// open in the gate's placement is refused (exit 2). --help lists each with its law.
    #[arg(long = "fault", value_name = "NAME", long_help = fault_help())]
    pub faults: Vec<String>,
    /// Receipt path (default: a new file under receipts/runs/).
    #[arg(long)]
    pub receipt: Option<PathBuf>,
    /// CPU backend: number of CPU "devices" (domains), 1 to 7281 (as many as stages).
    #[arg(long, allow_negative_numbers = true, default_value_t = 8)]
    pub cpu_devices: usize,
    /// Delay every stream op by a seeded random 0..N µs (schedule explorer; CPU: a sleep on
    /// the stream's worker, CUDA: a spin kernel on the stream). At most 1000000 (a second).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
    pub jitter_us: u64,
    /// CUDA: programmatic dependent launch of engine kernels on sm_90+ (on: a kernel may
    /// launch while its stream predecessor runs and waits in-kernel for it; off: every
    /// kernel starts after its predecessor ends). No effect on any logit bit. Refused on
    /// the CPU backend, which launches no kernels.
    #[arg(long)]
    pub pdl: Option<String>,
    /// CUDA: replay each stage's layer walk as a CUDA graph (on, the default: captured once
    /// per layer range, row count, store order and cache, replayed every step; off: every
    /// kernel launched every step). The same kernels with the same arguments either way: no
    /// effect on any logit bit. The receipt's backend.graphs records what ran. Refused on
    /// the CPU backend, which launches no kernels.
    #[arg(long)]
    pub graphs: Option<String>,
    /// CUDA: the tensor-core (MMA) matvec, for Q8_0, Q4_0, Q4_1, Q5_0, Q6_K and Q4_K
    /// matrices of whole 16-row tiles (Q4_K and Q6_K: whole 256-column super-blocks): on,
    /// off or auto. On: every such matrix is uploaded in the layout of kernels/mma.cu and
    /// every launch over it runs there, for decode tiles and prime/verify chunks alike, in one
    /// reduction order. auto (the default): the Q4_K and Q6_K matrices of models at least 4096 wide
    /// (measured faster at B=8 and prefill; narrower models keep the FFMA kernels at one-row
    /// decode), and every format it covers, at any width, in a run whose prime arm primes
    /// chunks of 64 rows or more (its largest --chunk, or the whole prompt by default), or
    /// whose batched arm has --batch 8 or more, or whose serve arm has --max-rows 8 or more
    /// (its default): so with --mma auto a
    /// `--chunk 64` or a `--batch 8` changes the kernels of the whole run, reference included. A
    /// different order than the FFMA kernels, so different logit bits; every arm is still
    /// compared with a reference run on the same setting. The receipt's backend.mma records
    /// what ran (and why, for auto). `--fault mma-row-order` needs an explicit `--mma on`.
    /// Refused on the CPU backend, which launches no kernels.
    #[arg(long)]
    pub mma: Option<String>,
    /// CUDA: directory of the compiled-module cache (default $XDG_CACHE_HOME/ppn-gate, else
    /// $HOME/.cache/ppn-gate): a module compiled once for a source, option set, device
    /// architecture, driver and NVRTC is read from there by every later process.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// CUDA: no module cache, neither read nor written: every process has NVRTC compile
    /// every module to PTX and the driver JIT-compile it at load (slower starts; the same
    /// kernels, so no logit bit changes). Refused with --cache-dir.
    #[arg(long)]
    pub no_cache: bool,
    /// Write a Chrome/Perfetto trace (JSON `traceEvents`) of the run: a track per stream,
    /// a slice per op (CPU: timed by the worker that ran it) or per piece of work (CUDA:
    /// timed by timing events on the stream), a flow per event wait; the receipt then
    /// records, per arm, the fraction of wall time two or more stages were busy
    /// (`timings.busy_overlap`). Changes no logit bit. soak: one file per run,
    /// FILE's stem + `-run-NNN`; bench: the trace of its traced walks.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print only the verdict lines (one per arm and the gate's; no header, no
    /// `receipt:` line, no description; errors still go to stderr). The gate, launch and
    /// soak (no progress bar) read it; bench and battery entries refuse it.
    #[arg(long, short)]
    pub quiet: bool,
    /// Multi-process gate: run the gate as W member processes on this host (children of
    /// this one; the same as `ppn-gate launch --procs W`). Needs --transport ipc (cpu) or
    /// nccl (cuda) for the boundaries between processes.
    #[arg(long, allow_negative_numbers = true, value_name = "W")]
    pub procs: Option<usize>,
    /// Multi-process gate: this member's rank (0..W), with --world and --rendezvous.
    #[arg(long, allow_negative_numbers = true, value_name = "R", requires_all = ["world", "rendezvous"])]
    pub rank: Option<usize>,
    /// Multi-process gate: the number of members.
    #[arg(long, allow_negative_numbers = true, value_name = "W", requires_all = ["rank", "rendezvous"])]
    pub world: Option<usize>,
    /// Multi-process gate: where members meet: a directory every member sees (empty, one per
    /// gate) or host:port (rank 0 serves it there).
    #[arg(long, value_name = "ADDR", requires_all = ["rank", "world"])]
    pub rendezvous: Option<String>,
    /// Multi-process gate: the rank of each stage r0,..,rN-1, non-decreasing from 0 with
    /// every rank holding at least one stage (default: contiguous, as even as possible).
    #[arg(long, allow_negative_numbers = true)]
    pub ranks: Option<String>,
    /// Multi-process gate: seconds a member waits on a neighbour's link (a boundary's data,
    /// or its heartbeat) before failing, naming that member (default 20).
    #[arg(long, allow_negative_numbers = true, value_name = "S")]
    pub peer_timeout: Option<u64>,
    /// Multi-process gate: seconds a member waits at the rendezvous for the others (start,
    /// results), naming the member that is missing (default 300).
    #[arg(long, allow_negative_numbers = true, value_name = "S")]
    pub rendezvous_timeout: Option<u64>,
    /// Multi-process gate: the address of this member's host that the other members reach
    /// its link listeners at (the ipc links, the NCCL heartbeats). 127.0.0.1 serves one host;
    /// across hosts give this host's address on the network the members share (default
    /// 127.0.0.1).
    #[arg(long, value_name = "HOST")]
    pub link_host: Option<String>,
    /// --transport nccl: the NCCL library to load: a file (libnccl.so.2) or a directory
    /// holding it (a system install's lib dir, or the `nvidia-nccl-cu13` wheel's
    /// nvidia/nccl/lib). Default: the dynamic linker's search path (LD_LIBRARY_PATH, ldconfig).
    #[arg(long, value_name = "PATH")]
    pub nccl_lib: Option<PathBuf>,
    /// Hidden: `hunt --self-check`'s planted defect (gate::plant).
    #[arg(long, value_name = "SPEC", hide = true)]
    pub plant_defect: Option<String>,
}

impl GateArgs {
    /// The gate's options as parsed (the gate layer never sees clap). Every field is named,
    /// so a flag added here and not carried over fails to compile.
    #[deny(unused_variables)]
    pub fn options(&self) -> GateOptions {
        let GateArgs {
            backend,
            model,
            stages,
            splits,
            devices,
            transport,
            arms,
            chunk,
            repeat,
            draft,
            window,
            batch,
            requests,
            max_rows,
            prefill_chunk,
            prompt_len,
            gen_len,
            seed,
            tape,
            topk,
            faults,
            receipt,
            cpu_devices,
            jitter_us,
            pdl,
            graphs,
            mma,
            cache_dir,
            no_cache,
            trace,
            quiet,
            procs,
            rank,
            world,
            rendezvous,
            ranks,
            peer_timeout,
            rendezvous_timeout,
            link_host,
            nccl_lib,
            plant_defect,
        } = self.clone();
        GateOptions {
            backend,
            model,
            stages,
            splits,
            devices,
            transport,
            arms,
            chunk,
            repeat,
            draft,
            window,
            batch,
            requests,
            max_rows,
            prefill_chunk,
            prompt_len,
            gen_len,
            seed,
            tape,
            topk,
            faults,
            receipt,
            cpu_devices,
            jitter_us,
            pdl,
            graphs,
            mma,
            cache_dir,
            no_cache,
            trace,
            quiet,
            procs,
            rank,
            world,
            rendezvous,
            ranks,
            peer_timeout,
            rendezvous_timeout,
            link_host,
            nccl_lib,
            plant_defect,
        }
    }
}

/// Shape flags left out take the preset's value, else the built-in model's (layers 8, embd
/// 256, heads 8, kv-heads 4, ff 512, vocab 2048).
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// llama, gemma3, qwen2 (q/k/v biases), qwen3 (q/k head norms, key_length written).
    /// Default: the preset's architecture, else llama.
    #[arg(long)]
    pub arch: Option<String>,
    /// A named shape: llama8b (4096, 32/8 heads, ff 14336), llama70b (8192, 64/8, ff 28672),
    /// qwen7b (qwen2: 3584, 28/4, ff 18944), each with vocab 32000 and its full depth as the
    /// default --layers; any shape or --arch flag given overrides the preset's value.
    #[arg(long)]
    pub preset: Option<String>,
    #[arg(long, allow_negative_numbers = true)]
    pub layers: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    pub embd: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    pub heads: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    pub kv_heads: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    pub ff: Option<usize>,
    #[arg(long, allow_negative_numbers = true)]
    pub vocab: Option<usize>,
    /// One block format for every matrix (q8_0, q4_k, ...), or q4_k_m: llama.cpp's Q4_K_M
    /// layout (Q4_K, with Q6_K for the head and for attn_v / ffn_down on a third of the layers;
    /// rows 256 does not tile fall back as llama.cpp does: Q4_K to Q5_0, Q6_K to Q8_0).
    #[arg(long, default_value = "q8_0")]
    pub quant: String,
    #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
    pub seed: u64,
    /// Width of one head (default: embd / heads); q is heads * head_dim wide.
    #[arg(long, allow_negative_numbers = true)]
    pub head_dim: Option<usize>,
    /// Tie the output head to token_embd (no output.weight; gemma3 always is).
    #[arg(long)]
    pub tied: bool,
    /// llama: write rope_freqs.weight, seeded per-dimension RoPE frequency factors.
    #[arg(long)]
    pub rope_freqs: bool,
    /// gemma3: the window of its sliding layers (default 16, short for tests; Gemma-3-270M's
    /// own file has 512).
    #[arg(long, allow_negative_numbers = true)]
    pub sliding_window: Option<usize>,
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// Number of gate runs (at most 1000000).
    #[arg(long, allow_negative_numbers = true, default_value_t = 20)]
    pub runs: usize,
    /// Directory for the run receipts and summary.json (default: receipts/runs/soak-<time>).
    /// Locked while the soak runs (.ppn-gate.lock: pid, host, command): a second soak or
    /// battery into it is refused naming the holder; a dead holder's lock is taken over.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write JUnit XML: one testcase per run (a FAIL a <failure> with its first
    /// divergence, a harness error an <error>), rewritten after every run.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// With --trace: every run is traced (so every run has the same timing), but a run's
    /// trace is written only when it FAILs.
    #[arg(long)]
    pub trace_failing: bool,
    #[command(flatten)]
    pub gate: GateArgs,
}

#[derive(Args, Debug)]
pub struct HuntArgs {
    /// Trials to run (at least 1); with --budget, whichever ends first.
    #[arg(long, value_name = "N")]
    pub trials: Option<usize>,
    /// Wall-clock budget for the trials: 90s, 10m, 2h (default 10m without --trials). A
    /// finding found in time is shrunk to the end.
    #[arg(long, value_name = "TIME")]
    pub budget: Option<String>,
    /// Runs of each shrink candidate (kept if it fails in any) and of the shrunk result
    /// (its failure rate).
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub confirm: usize,
    /// Directory for the trials, the findings (found/NAME.json battery files and their
    /// receipts) and hunt.json (default: receipts/runs/hunt-<time>-<pid>); locked while the
    /// hunt runs.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write JUnit XML: one testcase per finding, a passing one when there is none.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Plant a defect at a corner of the space derived from --seed (the generator is not
    /// told it); exit 0 only when the hunt finds it and shrinks it exactly to that corner.
    #[arg(long)]
    pub self_check: bool,
    /// Seconds a trial may run before it is killed as a hang.
    #[arg(long, value_name = "T", default_value_t = 60)]
    pub timeout_s: u64,
    #[command(flatten)]
    pub gate: GateArgs,
}

#[derive(Args, Debug)]
pub struct BatteryArgs {
    /// Battery file: JSON `{"name": .., "gates": [{"name": .., "args": [..],
    /// "needs_devices": N (optional: skip the gate where its backend has fewer devices)}, ..]}`.
    /// An entry's relative paths (--model, --tape, --trace, --cache-dir, --nccl-lib) resolve
    /// against the battery file's directory, whatever the working directory; the model and
    /// tape of every gate that runs here are checked to exist before the first gate runs.
    pub file: PathBuf,
    /// Directory for the receipts (default: a fresh receipts/runs/battery-<name>-<time>-<pid>
    /// per run, never the last run's; a directory given is written into, replacing its
    /// `<gate>.json` files); locked while the battery runs, as soak's --out is.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Diff every receipt against `<DIR>/<gate name>.json`.
    #[arg(long)]
    pub golden: Option<PathBuf>,
    /// Also write JUnit XML: one testcase per gate (a FAIL or golden difference a
    /// <failure>, a gate skipped for lack of devices <skipped>, a harness error an <error>).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// Runs per fault and per clean control.
    #[arg(long, allow_negative_numbers = true, default_value_t = 5)]
    pub runs: usize,
    /// Directory for every run's receipt, each row's summary.json and selftest.json
    /// (default: receipts/runs/selftest-<time>-<pid>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Backend: auto (CUDA when a GPU is present, else CPU), cpu, cuda.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// GGUF model for every row (default: the built-in synthetic model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// CPU backend: number of CPU "devices" (domains), 1 to 7281 (as many as stages).
    #[arg(long, allow_negative_numbers = true, default_value_t = 8)]
    pub cpu_devices: usize,
}

/// `--fault`'s long help: every fault, the law it breaks and where its window can open.
fn fault_help() -> String {
    let mut s = String::from(
        "Break one law on purpose (negative control): the gate must then FAIL. Repeatable. A fault whose window cannot open in the gate's placement is refused before any work (exit 2), naming why and a placement that opens it. NAME, the law it breaks [where it can open]:",
    );
    for f in crate::runtime::Fault::ALL {
        s.push_str(&format!("\n  {:<19} {} [{}]", f.name(), f.law(), f.needs()));
    }
    s
}

#[derive(Args, Debug)]
pub struct LaunchArgs {
    #[command(flatten)]
    pub gate: GateArgs,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Decode steps per measured path.
    #[arg(long, allow_negative_numbers = true, default_value_t = 32)]
    pub steps: usize,
    #[command(flatten)]
    pub gate: GateArgs,
}

/// Whether this command may run a gate under `--fault` in this process (so hold a stream):
/// a gate, soak or launch given a fault, and selftest and battery (their gates carry faults
/// of their own). hunt's trials are gates of their own processes.
fn may_hold(cli: &Cli) -> bool {
    match &cli.cmd {
        None => !cli.gate.faults.is_empty(),
        Some(Cmd::Soak(a)) => !a.gate.faults.is_empty(),
        Some(Cmd::Launch(a)) => !a.gate.faults.is_empty(),
        Some(Cmd::Selftest(_) | Cmd::Battery(_)) => true,
        Some(_) => false,
    }
}

/// Entry point: returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version (stdout) with exit 0 and usage errors (stderr) with
            // exit 2. Help that cannot reach its file (`--help > /dev/full`) is no success;
            // a reader that closed the pipe (`--help | head`) is.
            return match e.print() {
                Err(w)
                    if e.exit_code() == EXIT_PASS && w.kind() != std::io::ErrorKind::BrokenPipe =>
                {
                    errln!("ppn-gate: error: writing to stdout: {w}");
                    EXIT_ERROR
                }
                _ => e.exit_code(),
            };
        }
    };
    crate::term::set_verbose(cli.verbose);
    // A run that may hold a stream for a fault gets its device queues before the driver is
    // first used (`queues_for_fault_holds`: with too few, a hold can stall the very stream
    // it waits for, and the negative control PASSes).
    if may_hold(&cli) {
        crate::backend::cuda::queues_for_fault_holds();
    }
    let r = match cli.cmd {
        None => gate::run_cli(&cli.gate.options()),
        Some(Cmd::Inspect { file, tensors }) => inspect::inspect(&file, tensors),
        Some(Cmd::Synth(a)) => synth::synth(&a),
        Some(Cmd::Soak(a)) => soak::soak(&a),
        Some(Cmd::Diff { a, b, json, ignore }) => diff::diff(&a, &b, json, &ignore),
        Some(Cmd::Battery(a)) => battery::battery(&a),
        Some(Cmd::Bench(a)) => bench::bench(&a),
        Some(Cmd::Selftest(a)) => selftest::selftest(&a),
        Some(Cmd::Hunt(a)) => hunt::hunt(&a),
        Some(Cmd::TraceCheck { file, phase }) => trace_check::trace_check(&file, &phase),
        Some(Cmd::NcclCheck { nccl_lib, device }) => {
            crate::backend::cuda::nccl::check(nccl_lib.as_deref(), device).map(|lines| {
                for l in lines {
                    outln!("{l}");
                }
                EXIT_PASS
            })
        }
        Some(Cmd::Launch(a)) => {
            if a.gate.procs.is_none() {
                Err(anyhow::anyhow!(
                    "launch: --procs W is required (the number of member processes)"
                ))
            } else {
                gate::run_cli(&a.gate.options())
            }
        }
    };
    let code = match r {
        Ok(code) => code,
        Err(e) => {
            errln!("ppn-gate: error: {e:#}");
            EXIT_ERROR
        }
    };
    // Results that did not reach stdout's file (a full disk, an I/O error; a closed pipe is
    // a reader that stopped, not an error): a success code must not say the command did its
    // work, so 0 becomes 2; a FAIL (1) or an interrupt keeps its code, which says more.
    // Receipts and other files were written (or refused) on their own.
    match crate::term::out_error() {
        Some(e) => {
            errln!("ppn-gate: error: writing results to stdout: {e}");
            if code == EXIT_PASS {
                EXIT_ERROR
            } else {
                code
            }
        }
        None => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The processes that may hold a stream for a fault, and only those, ask for the
    /// device queues holds need.
    #[test]
    fn only_a_process_that_may_run_a_fault_asks_for_the_hold_queues() {
        let hold = |argv: &[&str]| {
            let argv = std::iter::once("ppn-gate").chain(argv.iter().copied());
            may_hold(&Cli::try_parse_from(argv).unwrap())
        };
        assert!(hold(&["--stages", "2", "--fault", "single-slot"]));
        assert!(hold(&["soak", "--runs", "2", "--fault", "no-war-guard"]));
        assert!(hold(&["launch", "--procs", "2", "--fault", "rx-no-wait"]));
        assert!(hold(&["selftest"]));
        assert!(hold(&["battery", "gates/cpu.json"]));
        assert!(!hold(&["--stages", "2"]));
        assert!(!hold(&["soak", "--runs", "2"]));
        assert!(!hold(&["hunt", "--fault", "single-slot"]));
        assert!(!hold(&["bench", "--stages", "2"]));
    }

    fn parse(argv: impl IntoIterator<Item = String>) -> GateOptions {
        let argv = std::iter::once("ppn-gate".to_string()).chain(argv);
        Cli::try_parse_from(argv).unwrap().gate.options()
    }

    /// Every field away from its default (and a value starting with `-`, a path with a
    /// space, two faults): options -> argv -> clap -> options gives them back, field for
    /// field. A field `to_argv` did not write would come back as its default here.
    fn every_field_set() -> GateOptions {
        GateOptions {
            backend: "cpu".into(),
            model: Some("dir with space/m.gguf".into()),
            stages: Some(3),
            splits: Some("1,2".into()),
            devices: Some("0,1,2".into()),
            transport: Some("ipc".into()),
            arms: "eager,prime,verify".into(),
            chunk: Some("2,5".into()),
            repeat: Some(7),
            draft: Some(6),
            window: Some(5),
            batch: Some(2),
            requests: Some(30),
            max_rows: Some(5),
            prefill_chunk: Some(3),
            prompt_len: Some(3),
            gen_len: Some(4),
            seed: u64::MAX,
            tape: Some("t.json".into()),
            topk: Some(2),
            faults: vec!["rx-no-wait".into(), "-looks-like-a-flag".into()],
            receipt: Some("r.json".into()),
            cpu_devices: 4,
            jitter_us: 7,
            pdl: Some("off".into()),
            graphs: Some("off".into()),
            mma: Some("on".into()),
            cache_dir: Some("c".into()),
            no_cache: true,
            trace: Some("tr.json".into()),
            quiet: true,
            procs: Some(2),
            rank: Some(1),
            world: Some(2),
            rendezvous: Some("127.0.0.1:9".into()),
            ranks: Some("0,0,1".into()),
            peer_timeout: Some(3),
            rendezvous_timeout: Some(4),
            link_host: Some("10.0.0.1".into()),
            nccl_lib: Some("/l".into()),
            plant_defect: Some("stages=3,batch>=5,chunk=7".into()),
        }
    }

    #[test]
    fn options_round_trip_through_argv() {
        let o = every_field_set();
        assert_eq!(parse(o.to_argv()), o);
        // Every default is written too, and comes back.
        let d = parse(Vec::new());
        assert_eq!(parse(d.to_argv()), d);
        // Each field alone away from its default: the argv differs from the default's, so
        // no field is dropped for looking like a default either.
        assert_ne!(o.to_argv(), d.to_argv());
    }

    /// The field-by-field check that the test above is not vacuous: every field of
    /// `every_field_set` differs from its default.
    #[test]
    fn every_field_set_differs_from_the_defaults_in_every_field() {
        let o = format!("{:#?}", every_field_set());
        let d = format!("{:#?}", parse(Vec::new()));
        let (o, d): (Vec<&str>, Vec<&str>) = (o.lines().collect(), d.lines().collect());
        let fields: Vec<_> = o
            .iter()
            .filter(|l| l.starts_with("    ") && !l.starts_with("     ") && l.contains(": "))
            .collect();
        assert_eq!(fields.len(), 41, "{o:?}");
        for f in fields {
            assert!(!d.contains(f), "field left at its default: {f}");
        }
    }

    /// `--help`'s value lists against the code's: every transport (in one process and
    /// between processes) with its meaning, every arm in the order of `ArmKind::ALL`, every
    /// fault with its law; and `--transport`'s parse error names every transport too.
    #[test]
    fn help_lists_every_transport_arm_and_fault_the_code_has() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let help = |id: &str| -> String {
            let a = cmd
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("no argument {id}"));
            let text = a.get_long_help().or(a.get_help()).expect("a help text");
            text.to_string()
        };
        let rendered = Cli::command().render_long_help().to_string();
        let transport = help("transport");
        let names: Vec<&str> = crate::runtime::TransportChoice::ALL
            .iter()
            .map(|t| t.name())
            .chain(crate::multiproc::Cross::ALL.iter().map(|c| c.name()))
            .collect();
        assert_eq!(names, ["auto", "host", "peer", "ipc", "nccl"]);
        let e = crate::runtime::TransportChoice::parse("tcp")
            .unwrap_err()
            .to_string();
        for n in &names {
            assert!(transport.contains(&format!("{n} (")), "{n}: {transport}");
            assert!(e.contains(n), "{n}: {e}");
        }
        let arms: Vec<&str> = crate::arms::ArmKind::ALL.iter().map(|a| a.name()).collect();
        let list = arms.join(", ");
        assert!(help("arms").contains(&list), "{}", help("arms"));
        assert!(rendered.contains(&list));
        let faults = help("faults");
        for f in crate::runtime::Fault::ALL {
            assert!(
                faults.contains(&format!("\n  {:<19} {}", f.name(), f.law())),
                "{}: {faults}",
                f.name()
            );
        }
        // --mma names every format the tensor-core path takes, and auto's prime rule.
        let mma = help("mma");
        for ty in crate::backend::cuda::mma_format_types() {
            let n = ty.name().to_uppercase();
            assert!(mma.contains(&n), "{n}: {mma}");
        }
        assert!(mma.contains(&format!(
            "chunks of {} rows or more",
            crate::backend::cuda::MMA_AUTO_MIN_ROWS
        )));
        assert!(mma.contains(&format!(
            "at least {} wide",
            crate::backend::cuda::MMA_AUTO_MIN_EMBD
        )));
    }

    #[test]
    fn member_argv_carries_every_gate_flag_but_the_launchs_own() {
        let o = every_field_set();
        let m = parse(o.member_argv());
        // What launch sets per member itself.
        let want = GateOptions {
            procs: None,
            rank: None,
            world: None,
            rendezvous: None,
            receipt: None,
            quiet: false,
            ..o
        };
        assert_eq!(m, want);
    }
}
