//! Bounds before work, the gate layer's half: limits on flags that size time or records
//! (`--jitter-us`, the timeouts, `--runs`, `--stages` before a model is known), and the
//! memory a run implies (`arms::Footprint`, synth's model bytes) held against the host's free
//! memory. Each refusal is an error naming the flag, its value and the limit (exit 2),
//! raised before any work starts.

use anyhow::{bail, Result};

use super::options::GateOptions;
use crate::arms::{human, Footprint, GateSpec};
use crate::model::synth::{SynthQuant, SynthSpec};
use crate::model::Config;

/// `--jitter-us`: at most one second per stream op (a larger delay explores no schedule a
/// second does not, and u64::MAX microseconds is a sleep of 584,942 years).
pub const MAX_JITTER_US: u64 = 1_000_000;

/// `--peer-timeout`, `--rendezvous-timeout`: at most a day.
pub const MAX_TIMEOUT_S: u64 = 86_400;

/// `--runs` (soak, selftest): at most a million. Every run keeps a record in summary.json
/// and a testcase in the JUnit file (also the runs an interrupt left unstarted), so the
/// count sizes memory and files as well as time.
pub const MAX_RUNS: usize = 1_000_000;

/// `--stages` before the model is known: every stage holds a layer, every layer at least 9
/// tensors, and the GGUF reader takes at most `MAX_TENSORS` tensors, so no model has more
/// layers than this (the model's own count is checked when it loads).
pub const MAX_STAGES: usize = (crate::gguf::MAX_TENSORS / 9) as usize;

/// The gate flags that bound time or records, checked before a backend opens.
pub fn flags(args: &GateOptions) -> Result<()> {
    if args.jitter_us > MAX_JITTER_US {
        bail!(
            "--jitter-us {}: at most {MAX_JITTER_US} (one second per stream op)",
            args.jitter_us
        );
    }
    for (flag, v) in [
        ("--peer-timeout", args.peer_timeout()),
        ("--rendezvous-timeout", args.rendezvous_timeout()),
    ] {
        if v > MAX_TIMEOUT_S {
            bail!("{flag} {v}: at most {MAX_TIMEOUT_S} seconds (a day)");
        }
    }
    if let Some(n) = args.stages {
        if n > MAX_STAGES {
            bail!(
                "--stages {n}: at most {MAX_STAGES} (a stage holds a layer; a GGUF file holds at most {} tensors, 9 or more per layer)",
                crate::gguf::MAX_TENSORS
            );
        }
    }
    for (flag, v) in [("--procs", args.procs), ("--world", args.world)] {
        if let Some(w) = v.filter(|&w| w > MAX_STAGES) {
            bail!("{flag} {w}: at most {MAX_STAGES} (every member holds a stage; see --stages)");
        }
    }
    cpu_devices(args.cpu_devices)
}

/// `--cpu-devices N`: at most MAX_STAGES, as many as a run can give stages of their own (a
/// count of 2^64 - 1 let `--devices 0,18446744073709551614` place a stage on a "device" no
/// run could have). Shared by the gate and selftest.
pub fn cpu_devices(n: usize) -> Result<()> {
    if n > MAX_STAGES {
        bail!("--cpu-devices {n}: at most {MAX_STAGES} (a CPU device holds a stage; see --stages)");
    }
    Ok(())
}

/// `--runs` of soak and selftest.
pub fn runs(n: usize) -> Result<()> {
    if n > MAX_RUNS {
        bail!("--runs {n}: at most {MAX_RUNS} (every run keeps a record in summary.json and the JUnit file)");
    }
    Ok(())
}

/// The host's free memory in bytes: `MemAvailable` of /proc/meminfo (what the kernel
/// reckons can be allocated without swapping). None where there is no such file (then no
/// host bound is applied, and the allocator's own failure is the limit).
pub fn host_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo_available(&text)
}

pub fn meminfo_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut it = line["MemAvailable:".len()..].split_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The limit the host gives, in the words an error uses.
fn available_words(avail: u64) -> String {
    format!(
        "the {} this host has available (MemAvailable in /proc/meminfo)",
        human(avail as u128)
    )
}

/// A footprint's host part against `avail` (None: unknown, nothing refused). `what`
/// prefixes the error (the command or the flags it concerns).
pub fn hold_host(fp: &Footprint, avail: Option<u64>, what: &str) -> Result<()> {
    let Some(avail) = avail else { return Ok(()) };
    let need = fp.host_bytes();
    if need <= avail as u128 {
        return Ok(());
    }
    let parts: Vec<String> = fp
        .host
        .iter()
        .take(3)
        .map(|p| format!("{} {} ({})", p.what, human(p.bytes), p.flags))
        .collect();
    bail!(
        "{what}host memory: the run needs at least {}, more than {}; largest parts: {}",
        human(need),
        available_words(avail),
        parts.join("; ")
    )
}

/// A model file against the host's free memory `avail` (None: unknown, nothing refused): the
/// reader holds the whole file while it parses, a lower bound of what loading takes, so a
/// file larger than what is free is refused naming both sizes, not left to the kernel's
/// out-of-memory kill (a signal, no message). `what` names the file as the command took it.
pub fn hold_model_file(what: &str, bytes: u64, avail: Option<u64>) -> Result<()> {
    match avail {
        Some(avail) if bytes > avail => bail!(
            "{what}: the file is {}, more than {} (the model is read whole)",
            human(bytes as u128),
            available_words(avail)
        ),
        _ => Ok(()),
    }
}

/// `hold_model_file` for the file at `path` against this host (a path that cannot be read
/// passes: the open that follows names its error).
pub fn hold_model_path(what: &str, path: &std::path::Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(md) => hold_model_file(what, md.len(), host_available()),
        Err(_) => Ok(()),
    }
}

/// A prepared gate's memory: its host part against the host's free memory. On CUDA the
/// device part (caches, scratch, logits slots) is not checked here: the backend has no query
/// of a device's free memory, and a cuMemAlloc it cannot satisfy is an error naming the
/// bytes and the device (exit 2), not an abort.
pub fn gate_memory(
    spec: &GateSpec,
    cfg: &Config,
    device_resident: bool,
    members: usize,
) -> Result<()> {
    let fp = spec.footprint(cfg, device_resident, members);
    hold_host(&fp, host_available(), "")
}

/// Bytes of the matrices `ppn-gate synth` writes for `spec` (a uniform quant: exactly the file
/// less its metadata, norms and biases; the q4_k_m mix: at most that, each element priced at
/// the mix's narrowest type). A tied
/// model (`--tied`, and gemma3 always) writes no `output.weight`, its head reading
/// `token_embd`, so it counts one vocab x embd matrix, not two: counting the head it does not
/// write would refuse a tied model that fits. Saturating: a hostile shape reads as too large
/// (the shape's own rules are synth's, checked after).
pub fn synth_file_bytes(spec: &SynthSpec) -> u128 {
    let m = |r: usize, c: usize| (r as u128).saturating_mul(c as u128);
    let (q_dim, kv_dim) = synth_q_kv(spec);
    let per_layer = m(q_dim, spec.embd)
        .saturating_mul(2)
        .saturating_add(m(kv_dim, spec.embd).saturating_mul(2))
        .saturating_add(m(spec.ff, spec.embd).saturating_mul(3));
    // token_embd, and output.weight unless the head is tied to it.
    let vocab_matrices = if spec.tied_output() { 1 } else { 2 };
    let elems = m(spec.vocab, spec.embd)
        .saturating_mul(vocab_matrices)
        .saturating_add(per_layer.saturating_mul(spec.layers as u128));
    // Bytes per 1024 elements: the quant's, or for the q4_k_m mix its narrowest type (Q4_K;
    // its Q6_K, Q5_K and fallback matrices are wider), so the estimate stays a lower bound
    // (pricing the mix at Q6_K put it ~1.4x above the file and could refuse one that fits).
    let ty = match spec.quant {
        SynthQuant::Uniform(t) => t,
        SynthQuant::Q4KM => crate::quant::GgmlType::Q4K,
    };
    let per_1k = 1024 / ty.block_len() * ty.block_bytes();
    elems.saturating_mul(per_1k as u128) / 1024
}

/// The widths of q and of k/v in `spec`'s model (saturating: the shape is checked after).
fn synth_q_kv(spec: &SynthSpec) -> (usize, usize) {
    let head_dim = spec.head_dim.unwrap_or(spec.embd / spec.heads.max(1));
    (
        spec.heads.saturating_mul(head_dim),
        spec.kv_heads.saturating_mul(head_dim),
    )
}

/// Bytes `ppn-gate synth` holds at least for `spec`'s model: the file's bytes twice (the
/// writer's tensors and the file it writes out, alive together while it is written:
/// `synth_file_bytes`) and the largest matrix drawn as f32 (a lower bound of the peak: a
/// refusal is never a false one).
pub fn synth_bytes(spec: &SynthSpec) -> u128 {
    let m = |r: usize, c: usize| (r as u128).saturating_mul(c as u128);
    let (q_dim, _) = synth_q_kv(spec);
    // token_embd is drawn whether or not the head is tied to it.
    let largest = m(spec.vocab, spec.embd)
        .max(m(spec.ff, spec.embd))
        .max(m(q_dim, spec.embd));
    synth_file_bytes(spec)
        .saturating_mul(2)
        .saturating_add(largest.saturating_mul(4))
}

/// synth's model against the host's free memory, naming the shape flags.
pub fn synth_memory(need: u128, shape: &str) -> Result<()> {
    let Some(avail) = host_available() else {
        return Ok(());
    };
    if need > avail as u128 {
        bail!(
            "{shape}: writing this model needs at least {}, more than {}",
            human(need),
            available_words(avail)
        );
    }
    Ok(())
}

/// bench's `--steps`: positions against the model's context length.
pub fn bench_steps(steps: usize, cfg: &Config) -> Result<()> {
    if cfg.context_length > 0 && steps > cfg.context_length {
        bail!(
            "--steps {steps}: more positions than the model's context length {} ({}.context_length); at most {}",
            cfg.context_length,
            cfg.arch,
            cfg.context_length
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_read_in_kib_and_refuses_what_it_cannot_read() {
        let t = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(meminfo_available(t), Some(20_000_000 * 1024));
        assert_eq!(meminfo_available("MemFree: 1 kB\n"), None);
        assert_eq!(meminfo_available("MemAvailable: x kB\n"), None);
        assert_eq!(
            meminfo_available("MemAvailable: 18446744073709551615 kB\n"),
            None
        );
        // This host has one (Linux).
        assert!(host_available().is_some_and(|b| b > 0));
    }

    #[test]
    fn a_model_file_past_the_free_memory_is_refused_naming_both() {
        let p = "--model /m/70b.gguf";
        assert!(hold_model_file(p, 1 << 30, Some(1 << 30)).is_ok());
        assert!(
            hold_model_file(p, u64::MAX, None).is_ok(),
            "unknown: nothing refused"
        );
        let e = format!(
            "{:#}",
            hold_model_file(p, (1 << 30) + 1, Some(1 << 30)).unwrap_err()
        );
        assert!(e.starts_with("--model /m/70b.gguf: the file is "), "{e}");
        assert!(e.contains(&human((1u128 << 30) + 1)), "{e}");
        assert!(e.contains(&available_words(1 << 30)), "{e}");
    }

    #[test]
    fn synth_bytes_saturate_and_scale() {
        use crate::model::synth::builtin_spec;
        let small = synth_bytes(&builtin_spec());
        let deep = synth_bytes(&SynthSpec {
            layers: 16,
            ..builtin_spec()
        });
        assert!(small > 0 && deep > small);
        let huge = synth_bytes(&SynthSpec {
            layers: usize::MAX,
            embd: usize::MAX,
            heads: 1,
            kv_heads: 1,
            ff: 1,
            vocab: usize::MAX,
            head_dim: Some(usize::MAX),
            quant: SynthQuant::Uniform(crate::quant::GgmlType::F32),
            ..builtin_spec()
        });
        assert_eq!(huge, u128::MAX);
    }

    /// synth's estimate counts what it writes: a tied model (`--tied`; gemma3 always) has no
    /// `output.weight`, so its estimate is the untied one's less exactly that matrix's bytes
    /// (vocab x embd at the quant's bytes per element), and never above the file actually
    /// written, whose matrices it counts byte for byte (the file adds only metadata, norms
    /// and alignment). Counting the unwritten head, the estimate was above the tied file.
    #[test]
    fn synth_estimate_counts_no_output_matrix_for_a_tied_model() {
        use crate::gguf::GgufFile;
        use crate::model::synth::{builtin_spec, synth_gguf_for_tools};
        use crate::model::Arch;
        use crate::quant::GgmlType;
        // The file synth writes for `spec`: its length and its matrices' bytes.
        let written = |spec: &SynthSpec| {
            let bytes = synth_gguf_for_tools(spec).expect("synth");
            let file = bytes.len() as u128;
            let f = GgufFile::parse(bytes).expect("parse");
            assert_eq!(f.tensor("output.weight").is_some(), !spec.tied_output());
            let matrices: u128 = f
                .tensors
                .iter()
                .filter(|t| t.dims.len() == 2)
                .map(|t| f.tensor_bytes(t).len() as u128)
                .sum();
            (file, matrices)
        };
        for untied in [
            builtin_spec(),
            SynthSpec {
                quant: SynthQuant::Uniform(GgmlType::F16),
                ..builtin_spec()
            },
            SynthSpec {
                arch: Arch::Qwen2,
                quant: SynthQuant::Uniform(GgmlType::Q4_0),
                ..builtin_spec()
            },
        ] {
            let tied = SynthSpec {
                tied: true,
                ..untied.clone()
            };
            let ty = match untied.quant {
                SynthQuant::Uniform(t) => t,
                SynthQuant::Q4KM => unreachable!(),
            };
            let head = (untied.vocab * untied.embd / ty.block_len() * ty.block_bytes()) as u128;
            assert_eq!(
                synth_file_bytes(&untied) - synth_file_bytes(&tied),
                head,
                "{untied:?}"
            );
            // The peak: the file held twice, so twice the head's bytes less.
            assert_eq!(synth_bytes(&untied) - synth_bytes(&tied), 2 * head);
            for spec in [&untied, &tied] {
                let (file, matrices) = written(spec);
                let est = synth_file_bytes(spec);
                assert!(est <= file, "{spec:?}: estimate {est} > file {file}");
                assert_eq!(est, matrices, "{spec:?}");
            }
        }
        // gemma3 is tied whatever --tied says: its estimate is its file's matrices too.
        let gemma = SynthSpec {
            arch: Arch::Gemma3,
            ..builtin_spec()
        };
        let (file, matrices) = written(&gemma);
        assert_eq!(synth_file_bytes(&gemma), matrices);
        assert!(synth_file_bytes(&gemma) <= file);
        // The q4_k_m mix (Q6_K head and some v and down, Q4_K the rest): a lower bound of its
        // matrices, within the Q6_K share of them (priced at Q6_K it was ~1.4x the file).
        for tied in [false, true] {
            let mix = SynthSpec {
                quant: SynthQuant::Q4KM,
                tied,
                ..builtin_spec()
            };
            let (_, matrices) = written(&mix);
            let est = synth_file_bytes(&mix);
            assert!(
                est <= matrices,
                "{mix:?}: estimate {est} > matrices {matrices}"
            );
            assert!(
                est * 3 >= matrices * 2,
                "{mix:?}: estimate {est} far below {matrices}"
            );
        }
    }
}
