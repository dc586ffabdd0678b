//! Bounds before work, the CLI's half: limits on flags that size time or records
//! (`--jitter-us`, the timeouts, `--runs`, `--stages` before a model is known), and the
//! memory a run implies (`arms::Footprint`, synth's model bytes) held against the host's free
//! memory. Each refusal is an error naming the flag, its value and the limit (exit 2),
//! raised before any work starts.

use anyhow::{bail, Result};

use super::GateArgs;
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
pub fn flags(args: &GateArgs) -> Result<()> {
    if args.jitter_us > MAX_JITTER_US {
        bail!(
            "--jitter-us {}: at most {MAX_JITTER_US} (one second per stream op)",
            args.jitter_us
        );
    }
    for (flag, v) in [
        ("--peer-timeout", args.peer_timeout),
        ("--rendezvous-timeout", args.rendezvous_timeout),
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

fn meminfo_available(text: &str) -> Option<u64> {
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
    fn synth_bytes_saturate_and_scale() {
        let small = synth_bytes(8, 256, 256, 128, 512, 2048, 1088);
        let deep = synth_bytes(16, 256, 256, 128, 512, 2048, 1088);
        assert!(small > 0 && deep > small);
        let huge = synth_bytes(usize::MAX, usize::MAX, usize::MAX, 1, 1, usize::MAX, 4096);
        assert_eq!(huge, u128::MAX);
    }
}

/// The numeric flags family, in process: a seeded loop over every gate flag that sizes
/// something x hostile values (the fixed ones and seeded log-uniform draws over all of u64),
/// each parsed and prepared as the binary would (`prepare_model` on the built-in model,
/// loaded once): every case is accepted (the gate would run, within its bounds) or refused
/// with an error naming the flag. `tests/hostile_flags.rs` runs a seeded sample through the
/// binary itself.
#[cfg(test)]
mod property {
    use clap::Parser;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use crate::cli::gate::{load_model, prepare_model};
    use crate::cli::{Cli, Cmd};

    /// (flag, the flags that make it size something).
    pub(super) const GATE_FLAGS: [(&str, &[&str]); 17] = [
        ("--gen-len", &[]),
        ("--prompt-len", &[]),
        ("--batch", &["--arms", "batched"]),
        ("--draft", &["--arms", "verify"]),
        ("--window", &[]),
        ("--repeat", &["--arms", "prime"]),
        ("--chunk", &["--arms", "prime"]),
        ("--jitter-us", &[]),
        ("--topk", &[]),
        ("--stages", &[]),
        ("--splits", &[]),
        ("--devices", &[]),
        ("--cpu-devices", &[]),
        ("--seed", &[]),
        (
            "--peer-timeout",
            &["--procs", "2", "--stages", "2", "--transport", "ipc"],
        ),
        (
            "--rendezvous-timeout",
            &["--procs", "2", "--stages", "2", "--transport", "ipc"],
        ),
        ("--procs", &["--transport", "ipc", "--stages", "2"]),
    ];

    pub(super) const HOSTILE: [&str; 12] = [
        "0",
        "1",
        "4097",
        "4294967296",
        "1000000000000",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "x",
        "",
        "1.5",
        " 3",
    ];

    /// The hostile values and `n` seeded draws, log-uniform over u64.
    fn values(rng: &mut ChaCha8Rng, n: usize) -> Vec<String> {
        let mut v: Vec<String> = HOSTILE.iter().map(|s| s.to_string()).collect();
        for _ in 0..n {
            let bits = rng.gen_range(0..64u32);
            v.push((rng.gen::<u64>() >> (63 - bits)).to_string());
        }
        v
    }

    #[test]
    fn numeric_flags_are_accepted_within_bounds_or_refused_naming_the_flag() {
        let model = load_model(None).unwrap();
        let ctx = model.0.cfg.context_length;
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let total = super::meminfo_available(&meminfo.replace("MemTotal:", "MemAvailable:"))
            .unwrap() as u128;
        let mut rng = ChaCha8Rng::seed_from_u64(25);
        let (mut accepted, mut refused, mut clap_refused) = (0, 0, 0);
        let mut bad = Vec::new();
        for (flag, extra) in GATE_FLAGS {
            for v in values(&mut rng, 8) {
                let arg = format!("{flag}={v}");
                let argv = ["ppn-gate", "--backend", "cpu", &arg]
                    .into_iter()
                    .chain(extra.iter().copied());
                let cli = match Cli::try_parse_from(argv) {
                    Ok(c) => c,
                    Err(e) => {
                        clap_refused += 1;
                        if !e.to_string().contains(flag) {
                            bad.push(format!("{arg}: clap: {e}"));
                        }
                        continue;
                    }
                };
                match prepare_model(&cli.gate, Some(model.clone())) {
                    Ok(p) => {
                        accepted += 1;
                        // What an accepted gate will walk is within the model's context
                        // and the host's memory (or the gate was refused).
                        assert!(p.spec.steps() <= ctx, "{arg}: {} steps", p.spec.steps());
                        // (MemTotal: prepare held it to MemAvailable as it read then, which
                        // other processes move; never above the total.)
                        let fp = p.spec.footprint(&p.model.cfg, false, 1);
                        assert!(fp.host_bytes() <= total, "{arg}");
                    }
                    Err(e) => {
                        refused += 1;
                        let m = format!("{e:#}");
                        if !m.contains(flag) {
                            bad.push(format!("{arg}: {m}"));
                        }
                    }
                }
            }
        }
        // Soak's and selftest's --runs and bench's --steps: their own bounds.
        for (cmd, flag) in [
            ("soak", "--runs"),
            ("selftest", "--runs"),
            ("bench", "--steps"),
        ] {
            for v in values(&mut rng, 8) {
                let arg = format!("{flag}={v}");
                let cli = match Cli::try_parse_from(["ppn-gate", cmd, "--backend", "cpu", &arg]) {
                    Ok(c) => c,
                    Err(e) => {
                        clap_refused += 1;
                        if !e.to_string().contains(flag) {
                            bad.push(format!("{cmd} {arg}: clap: {e}"));
                        }
                        continue;
                    }
                };
                let r = match cli.cmd {
                    Some(Cmd::Soak(a)) => super::runs(a.runs),
                    Some(Cmd::Selftest(a)) => super::runs(a.runs),
                    Some(Cmd::Bench(a)) => super::bench_steps(a.steps, &model.0.cfg),
                    other => panic!("{other:?}"),
                };
                match r {
                    Ok(()) => accepted += 1,
                    Err(e) if e.to_string().contains(flag) => refused += 1,
                    Err(e) => bad.push(format!("{cmd} {arg}: {e}")),
                }
            }
        }
        eprintln!(
            "numeric flags: {} cases: {accepted} accepted, {refused} refused by the gate, {clap_refused} by the parser",
            accepted + refused + clap_refused
        );
        assert!(
            bad.is_empty(),
            "errors not naming their flag:\n{}",
            bad.join("\n")
        );
        assert!(accepted > 0 && refused > 0 && clap_refused > 0);
    }
}
