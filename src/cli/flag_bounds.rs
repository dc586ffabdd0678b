//! The numeric flags family, in process: a seeded loop over every gate flag that sizes
/// something x hostile values (the fixed ones and seeded log-uniform draws over all of u64),
/// each parsed and prepared as the binary would (`prepare_model` on the built-in model,
/// loaded once): every case is accepted (the gate would run, within its bounds) or refused
/// with an error naming the flag. `tests/hostile_flags.rs` runs a seeded sample through the
/// binary itself.
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cli::{Cli, Cmd};
use crate::gate::plan::{load_model, prepare_model};

/// (flag, the flags that make it size something).
const GATE_FLAGS: [(&str, &[&str]); 20] = [
    ("--gen-len", &[]),
    ("--requests", &["--arms", "serve"]),
    ("--max-rows", &["--arms", "serve"]),
    ("--prefill-chunk", &["--arms", "serve"]),
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
    let total =
        crate::gate::bounds::meminfo_available(&meminfo.replace("MemTotal:", "MemAvailable:"))
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
            match prepare_model(&cli.gate.options(), Some(model.clone())) {
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
                Some(Cmd::Soak(a)) => crate::gate::bounds::runs(a.runs),
                Some(Cmd::Selftest(a)) => crate::gate::bounds::runs(a.runs),
                Some(Cmd::Bench(a)) => crate::gate::bounds::bench_steps(a.steps, &model.0.cfg),
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
