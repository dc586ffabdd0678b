//! Hostile numbers through the real binary: a seeded sample of (command, flag, value) cases
//! over every numeric flag that sizes something (the gate's, soak's and selftest's --runs,
//! bench's --steps, synth's shape), each run with a short timeout. No case may panic, abort,
//! be killed or outlive its timeout: it exits 0 or 1 with verdict lines (the gate ran
//! within its bounds), or 2 with stderr naming the flag. The whole family runs in process
//! in `cli::flag_bounds`; this is the part only a process shows (aborts, hangs).
// Prints with std's macros, which the test harness captures (clippy.toml refuses them in
// the crate, whose lines must never panic).
#![allow(clippy::disallowed_macros)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// (command words, flag, flags that make it size something).
const FLAGS: &[(&[&str], &str, &[&str])] = &[
    (&[], "--gen-len", &[]),
    (&[], "--prompt-len", &[]),
    (&[], "--batch", &["--arms", "batched"]),
    (&[], "--draft", &["--arms", "verify"]),
    (&[], "--window", &[]),
    (&[], "--repeat", &["--arms", "prime"]),
    (&[], "--chunk", &["--arms", "prime"]),
    (&[], "--jitter-us", &["--arms", "eager", "--gen-len", "2"]),
    (&[], "--topk", &[]),
    (&[], "--stages", &[]),
    (&[], "--splits", &[]),
    (&[], "--devices", &[]),
    (&[], "--cpu-devices", &[]),
    (
        &[],
        "--peer-timeout",
        &["--procs", "2", "--stages", "2", "--transport", "ipc"],
    ),
    (&[], "--procs", &["--transport", "ipc", "--stages", "2"]),
    (&["soak"], "--runs", &["--gen-len", "2"]),
    (&["soak"], "--gen-len", &["--runs", "1"]),
    (&["bench"], "--steps", &[]),
    (&["bench"], "--batch", &["--steps", "2"]),
    (&["synth"], "--layers", &[]),
    (&["synth"], "--embd", &[]),
    (&["synth"], "--vocab", &[]),
    (&["synth"], "--ff", &[]),
    (&["synth"], "--kv-heads", &[]),
    (&["synth"], "--sliding-window", &["--arch", "gemma3"]),
    (&["selftest"], "--runs", &[]),
];

/// The brief's hostile values: 0, 1, huge, u64::MAX, 10^12, negative, non-numeric, empty.
const VALUES: &[&str] = &[
    "0",
    "1",
    "4294967296",
    "18446744073709551615",
    "1000000000000",
    "-1",
    "x",
    "",
];

const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs one case; (exit code, stdout, stderr), or an Err naming a hang or a signal.
fn run(args: &[String]) -> Result<(i32, String, String), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ppn-gate starts");
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t0.elapsed() > TIMEOUT {
            // Our own child, by its handle.
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().expect("output");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    match o.status.code() {
        Some(c) => Ok((c, out, err)),
        None => Err(format!("killed by a signal ({:?}): {err}", o.status)),
    }
}

#[test]
fn hostile_numbers_exit_cleanly_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<(usize, &str)> = (0..FLAGS.len())
        .flat_map(|f| VALUES.iter().map(move |&v| (f, v)))
        .collect();
    cases.shuffle(&mut ChaCha8Rng::seed_from_u64(25));
    // The reproductions always; then a seeded sample of the rest (the whole cross
    // product runs in process: cli::flag_bounds).
    let mut picked: Vec<(usize, &str)> = vec![(0, "1000000000000"), (7, "18446744073709551615")];
    for c in cases {
        if picked.len() >= 96 {
            break;
        }
        // selftest --runs 1 is a whole selftest (each row once): seconds, not a bound.
        if !picked.contains(&c) && (FLAGS[c.0].0 != ["selftest"] || c.1 != "1") {
            picked.push(c);
        }
    }
    let mut tally = std::collections::BTreeMap::<i32, usize>::new();
    let mut bad = Vec::new();
    for (i, &(f, v)) in picked.iter().enumerate() {
        let (cmd, flag, extra) = FLAGS[f];
        let out_dir = dir.path().join(format!("case-{i}"));
        let mut args: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        args.push(format!("{flag}={v}"));
        args.extend(extra.iter().map(|s| s.to_string()));
        let file = |name: &str| out_dir.join(name).display().to_string();
        match cmd.first().copied() {
            Some("synth") => args.extend(["-o".into(), file("m.gguf")]),
            Some("soak") | Some("selftest") => args.extend([
                "--backend".into(),
                "cpu".into(),
                "--out".into(),
                file("out"),
            ]),
            Some("bench") => args.extend(["--backend".into(), "cpu".into()]),
            _ => args.extend([
                "--backend".into(),
                "cpu".into(),
                "-q".into(),
                "--receipt".into(),
                file("r.json"),
            ]),
        }
        std::fs::create_dir_all(&out_dir).unwrap();
        let what = args.join(" ");
        match run(&args) {
            Err(e) => bad.push(format!("{what}: {e}")),
            Ok((code, out, err)) => {
                *tally.entry(code).or_default() += 1;
                let ok = match code {
                    0 | 1 => {
                        // A verdict (gate, soak, selftest), a bench table or a written model.
                        out.contains("PASS")
                            || out.contains("FAIL")
                            || out.contains("tok/s")
                            || out.contains("wrote")
                    }
                    // Synth's shape errors name the shape field (`layers = 0`).
                    2 => err.contains(flag) || err.contains(&flag[2..].replace('-', "_")),
                    _ => false,
                };
                if !ok || err.contains("panicked") {
                    bad.push(format!("{what}: exit {code}\nstdout: {out}\nstderr: {err}"));
                }
            }
        }
    }
    eprintln!(
        "hostile flags: {} cases through the binary, exit codes {tally:?}",
        picked.len()
    );
    assert!(
        bad.is_empty(),
        "cases that failed:\n{}",
        bad.join("\n---\n")
    );
    assert!(
        tally.get(&2).is_some_and(|&n| n > 0),
        "no case was refused: {tally:?}"
    );
}

/// synth's size refusal names every flag that sizes the model, `--head-dim` too (it widens q
/// and kv past embd / heads): a huge head width alone was refused naming only the other
/// shape flags. 2^64 itself is past a usize: the parser names the flag.
#[test]
fn a_huge_head_dim_is_named_by_synth_s_size_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gguf").display().to_string();
    for (hd, want) in [
        ("18446744073709551615", "--head-dim 18446744073709551615"),
        ("4294967296", "--head-dim 4294967296"),
        ("18446744073709551616", "--head-dim"),
    ] {
        let args: Vec<String> = [
            "synth",
            "--arch",
            "llama",
            "--layers",
            "2",
            "--head-dim",
            hd,
            "-o",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([out.clone()])
        .collect();
        let (code, _, err) = run(&args).unwrap();
        assert_eq!(code, 2, "--head-dim {hd}: {err}");
        assert!(err.contains(want), "--head-dim {hd}: {err}");
        assert!(!err.contains("panicked"), "--head-dim {hd}: {err}");
    }
}
