//! Bounds before work, the gate layer's half: limits on flags that size time or records
//! (`--jitter-us`, the timeouts, `--runs`, `--stages` before a model is known), and the
//! memory a run implies (`arms::Footprint`, synth's model bytes) held against the host's free
//! memory. Each refusal is an error naming the flag, its value and the limit (exit 2),
//! raised before any work starts.

use anyhow::{bail, Result};

use super::options::GateOptions;
use crate::arms::{human, Footprint, GateSpec};
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

/// Bytes `ppn-gate synth` holds at least for a model: the file's bytes twice (the writer's
/// tensors and the file it writes out, alive together while it is written) and the largest
/// matrix drawn as f32 (a lower bound of the peak: a refusal is never a false one). `bytes_per_1k`: the quant's bytes per 1024 elements.
pub fn synth_bytes(
    layers: usize,
    embd: usize,
    q_dim: usize,
    kv_dim: usize,
    ff: usize,
    vocab: usize,
    bytes_per_1k: usize,
) -> u128 {
    let m = |r: usize, c: usize| (r as u128).saturating_mul(c as u128);
    let per_layer = m(q_dim, embd)
        .saturating_mul(2)
        .saturating_add(m(kv_dim, embd).saturating_mul(2))
        .saturating_add(m(ff, embd).saturating_mul(3));
    let elems = m(vocab, embd)
        .saturating_mul(2)
        .saturating_add(per_layer.saturating_mul(layers as u128));
    let file = elems.saturating_mul(bytes_per_1k as u128) / 1024;
    let largest = m(vocab, embd).max(m(ff, embd)).max(m(q_dim, embd));
    file.saturating_mul(2)
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
        let small = synth_bytes(8, 256, 256, 128, 512, 2048, 1088);
        let deep = synth_bytes(16, 256, 256, 128, 512, 2048, 1088);
        assert!(small > 0 && deep > small);
        let huge = synth_bytes(usize::MAX, usize::MAX, usize::MAX, 1, 1, usize::MAX, 4096);
        assert_eq!(huge, u128::MAX);
    }
}
