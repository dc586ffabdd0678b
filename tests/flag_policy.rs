//! The one flag policy through the real binary: every flag given to a run that does not read
//! it is refused (exit 2) with a message naming the flag, before any work; every valid
//! combination of the same flags still runs. Also the small ones of issue 28: negative
//! numbers named by their flag, trace-check's phases, synth's output path, battery's
//! relative paths and fresh default folder, the one-stage note, `-q`'s output. The rules
//! themselves, one test each and a walk of the table: `gate::policy::tests`.

use std::path::Path;
use std::process::{Command, Output};

fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("ppn-gate runs")
}

fn run(args: &[&str]) -> Output {
    run_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Quick gate flags: the built-in model on the CPU, a few steps.
const QUICK: &[&str] = &["--backend", "cpu", "--gen-len", "2", "--prompt-len", "3"];

fn with(cmd: &[&str], flags: &[&str], receipt: &Path) -> Vec<String> {
    let mut v: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    v.extend(flags.iter().map(|s| s.to_string()));
    if cmd.first() == Some(&"bench") {
        v.extend(["--backend", "cpu", "--steps", "2"].map(String::from));
    } else {
        v.extend(QUICK.iter().map(|s| s.to_string()));
        v.extend(["--receipt".into(), receipt.display().to_string()]);
    }
    v
}

/// (command, flags, the flag the refusal names). Each refused before any work.
const REFUSED: &[(&[&str], &[&str], &str)] = &[
    (&[], &["--chunk", "4", "--arms", "eager"], "--chunk 4"),
    (
        &[],
        &["--repeat", "5", "--arms", "eager,pipelined"],
        "--repeat 5",
    ),
    (&[], &["--draft", "2", "--arms", "eager,prime"], "--draft 2"),
    (&[], &["--batch", "8", "--arms", "eager"], "--batch 8"),
    (
        &[],
        &["--window", "4", "--arms", "eager,verify"],
        "--window 4",
    ),
    (&[], &["--transport", "peer"], "--transport peer"),
    (
        &[],
        &["--transport", "host", "--stages", "1"],
        "--transport host",
    ),
    (&[], &["--nccl-lib", "/l", "--stages", "2"], "--nccl-lib /l"),
    (
        &[],
        &["--peer-timeout", "3", "--stages", "2"],
        "--peer-timeout 3",
    ),
    (
        &[],
        &["--rendezvous-timeout", "3", "--stages", "2"],
        "--rendezvous-timeout 3",
    ),
    (
        &[],
        &["--link-host", "10.1.1.1", "--stages", "2"],
        "--link-host 10.1.1.1",
    ),
    (
        &["launch"],
        &[
            "--procs",
            "2",
            "--stages",
            "2",
            "--transport",
            "ipc",
            "--nccl-lib",
            "/l",
        ],
        "--nccl-lib /l",
    ),
    (&["soak", "--runs", "1"], &["--chunk", "4"], "--chunk 4"),
    (&["bench"], &["-q"], "--quiet"),
    (&["bench"], &["--topk", "3"], "--topk 3"),
    (&["bench"], &["--gen-len", "3"], "--gen-len 3"),
    (&["bench"], &["--arms", "verify"], "--arms verify"),
    (
        &["bench"],
        &["--arms", "eager,prime", "--repeat", "2"],
        "--repeat 2",
    ),
    (
        &["bench"],
        &["--batch", "2", "--arms", "pipelined"],
        "--batch 2",
    ),
];

#[test]
fn a_flag_the_run_does_not_read_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    for (i, (cmd, flags, flag)) in REFUSED.iter().enumerate() {
        let mut args = with(cmd, flags, &d.path().join(format!("r{i}.json")));
        if cmd.first() == Some(&"soak") {
            args.retain(|a| !a.starts_with("--receipt") && !a.ends_with(&format!("r{i}.json")));
            args.extend([
                "--out".into(),
                d.path().join(format!("s{i}")).display().to_string(),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(
            t.contains(&format!("error: {flag}")) && t.contains("has no effect in this run"),
            "{args:?}: want {flag:?}: {t}"
        );
        assert!(!t.contains("PASS"), "{args:?} ran: {t}");
        assert!(!d.path().join(format!("r{i}.json")).exists(), "{args:?}");
        // A refused soak writes nothing: no --out directory (nor a summary in it).
        assert!(
            !d.path().join(format!("s{i}")).exists(),
            "{args:?} left its --out"
        );
    }
}

/// The same flags where the run reads them: accepted and PASS (a gate) or measured (bench).
#[test]
fn the_same_flags_where_they_are_read_still_run() {
    let d = tempfile::tempdir().unwrap();
    let ok: &[(&[&str], &[&str])] = &[
        (
            &[],
            &[
                "--chunk",
                "2",
                "--repeat",
                "1",
                "--arms",
                "eager,prime",
                "--window",
                "2",
            ],
        ),
        // (QUICK's 3-token prompt and 2 generated leave one position to draft.)
        (&[], &["--draft", "1", "--arms", "verify"]),
        (
            &[],
            &["--batch", "2", "--arms", "eager,batched", "--window", "2"],
        ),
        (&[], &["--transport", "host", "--stages", "2"]),
        (&[], &["--transport", "auto", "--devices", "0,1"]),
        (&[], &["--stages", "2", "--topk", "3", "-q"]),
        (
            &["bench"],
            &["--arms", "prime", "--chunk", "2", "--prompt-len", "4"],
        ),
        (
            &["bench"],
            &[
                "--batch",
                "2",
                "--window",
                "2",
                "--stages",
                "2",
                "--transport",
                "host",
            ],
        ),
    ];
    for (i, (cmd, flags)) in ok.iter().enumerate() {
        let args = with(cmd, flags, &d.path().join(format!("r{i}.json")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {t}");
        assert!(t.contains("PASS") || t.contains("tok/s"), "{args:?}: {t}");
    }
}

/// A `--chunk` longer than the prompt, or a `--draft` past the positions after the first
/// round's input, is refused (exit 2) naming the value, where the prompt comes from and the
/// limit, before any work (a battery before its first gate): it was cut to the prompt (the
/// room) without a word. At the limit it runs; the defaults are still cut (QUICK's 3-token
/// prompt takes the default ladder 1, 8, 16 as 1, 3 and the default draft 4 as 1).
#[test]
fn a_chunk_or_draft_past_the_prompt_is_refused_naming_the_limit() {
    let d = tempfile::tempdir().unwrap();
    let tape = d.path().join("t.json");
    std::fs::write(&tape, r#"{"tokens": [5, 9, 2, 7, 1, 3], "prompt_len": 2}"#).unwrap();
    let t = tape.to_str().unwrap();
    for (flags, want) in [
        (
            &["--arms", "prime", "--chunk", "1,16"][..],
            &[
                "--chunk 1,16: a chunk of 16 is longer than the 3-position prompt (--prompt-len 3)",
                "at most 3",
            ][..],
        ),
        (
            &["--arms", "eager,prime", "--chunk", "4"][..],
            &["--chunk 4:", "at most 3"][..],
        ),
        (
            &["--arms", "verify", "--draft", "2"][..],
            &[
                "--draft 2:",
                "--prompt-len 3 + --gen-len 2 = 5 positions",
                "at most 1",
            ][..],
        ),
    ] {
        let args = with(&[], flags, &d.path().join("r.json"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        let txt = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {txt}");
        for w in want {
            assert!(txt.contains(w), "{args:?}: want {w:?}: {txt}");
        }
        assert!(!d.path().join("r.json").exists(), "{args:?} ran: {txt}");
    }
    // One generated position: the only round has no position to draft.
    let o = run(&[
        "--backend",
        "cpu",
        "-q",
        "--arms",
        "verify",
        "--draft",
        "1",
        "--gen-len",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--draft 1:") && text(&o).contains("none is left to draft"),
        "{}",
        text(&o)
    );
    // A tape's own prompt_len (2 of 6 tokens: chunks up to 2, drafts up to 3).
    for (flags, want) in [
        (
            &["--arms", "prime", "--chunk", "3"][..],
            "the `prompt_len` 2 of --tape",
        ),
        (&["--arms", "verify", "--draft", "4"][..], "at most 3"),
    ] {
        let o = run(&[&["--backend", "cpu", "-q", "--tape", t][..], flags].concat());
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{flags:?}: {}", text(&o));
    }
    // At the limit, and the defaults: they run.
    for flags in [
        &["--arms", "prime", "--chunk", "1,3"][..],
        &["--arms", "verify", "--draft", "1"][..],
        &["--arms", "prime,verify"][..],
    ] {
        let args = with(&[], flags, &d.path().join("ok.json"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
    let o = run(&[
        "--backend",
        "cpu",
        "-q",
        "--tape",
        t,
        "--arms",
        "prime,verify",
        "--chunk",
        "2",
        "--draft",
        "3",
        "--receipt",
        d.path().join("tape-ok.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A battery refuses the entry before its first gate runs.
    let b = d.path().join("b.json");
    std::fs::write(
        &b,
        r#"{"name": "b", "gates": [
            {"name": "first", "args": ["--backend", "cpu", "--gen-len", "1"]},
            {"name": "bad", "args": ["--backend", "cpu", "--arms", "prime", "--chunk", "9"]}]}"#,
    )
    .unwrap();
    let out = d.path().join("bo");
    let o = run(&[
        "battery",
        b.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--chunk 9: a chunk of 9 is longer than the 8-position prompt"),
        "{}",
        text(&o)
    );
    assert!(
        !out.join("first.json").exists(),
        "a gate ran before the check"
    );
}

/// -q prints the verdict lines only: no `receipt:` line, no header; the receipt is written.
#[test]
fn quiet_prints_only_the_verdict_lines() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().join("r.json");
    let args = with(&[], &["--stages", "2", "-q"], &r);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.lines().all(|l| l.contains("PASS")), "{out}");
    assert!(!text(&o).contains("receipt:"), "{}", text(&o));
    assert!(r.exists());
}

/// One stage: PASS, and stderr says no boundary was exercised (also under -q); two stages:
/// no such note.
#[test]
fn a_one_stage_gate_says_no_boundary_was_exercised() {
    let d = tempfile::tempdir().unwrap();
    for (flags, note) in [
        (&["-q"][..], true),
        (&[][..], true),
        (&["--stages", "2"][..], false),
    ] {
        let args = with(&[], flags, &d.path().join("r.json"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.contains("no boundary was exercised"),
            note,
            "{flags:?}: {err}"
        );
    }
    // soak says it once (not per run), and not for two stages.
    for (stages, note) in [("1", 1), ("2", 0)] {
        let out = d.path().join(format!("soak{stages}"));
        let o = run(&[
            "soak",
            "--runs",
            "2",
            "--backend",
            "cpu",
            "--stages",
            stages,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.matches("no boundary was exercised").count(),
            note,
            "{err}"
        );
    }
}

/// A negative number reaches the flag's own parser: the error names the flag (exit 2).
#[test]
fn negative_numbers_are_named_by_their_flag() {
    for (flag, v) in [
        ("--devices", "-1"),
        ("--splits", "-2"),
        ("--gen-len", "-1"),
        ("--stages", "-3"),
        ("--window", "-1"),
    ] {
        let o = run(&["--backend", "cpu", flag, v]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {v}: {t}");
        assert!(t.contains(flag), "{flag} {v}: {t}");
        assert!(!t.contains("unexpected argument"), "{flag} {v}: {t}");
    }
}

/// A missing model's OS error is printed once.
#[test]
fn a_missing_model_names_its_os_error_once() {
    let o = run(&["--backend", "cpu", "--model", "/nonexistent/m.gguf"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("--model /nonexistent/m.gguf"), "{t}");
    assert_eq!(t.matches("(os error 2)").count(), 1, "{t}");
}

/// A FIFO at `path` (mkfifo).
fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// `args` is refused (exit 2) within 20 s, its message holding `want`: no hang on a device or
/// a FIFO.
fn refused_at_once(args: &[&str], want: &str) {
    let t0 = std::time::Instant::now();
    let o = run(args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
    assert!(t.contains(want), "{args:?}: {t}");
    assert!(t0.elapsed().as_secs() < 20, "{args:?}: {:?}", t0.elapsed());
}

/// A model path that is no regular file is refused before a read, naming what it is: reading
/// /dev/zero whole never ended (the process grew until the kernel killed it), and a FIFO with
/// no writer blocks for ever. The same for `inspect`.
#[test]
fn a_model_that_is_no_regular_file_is_refused_before_a_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("m.gguf");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    for (path, kind) in [
        ("/dev/zero", "a character device"),
        (fifo, "a FIFO"),
        ("/", "a directory"),
    ] {
        let want = format!("{path} is {kind}, not a regular file");
        refused_at_once(&["--backend", "cpu", "--model", path], &want);
        refused_at_once(&["inspect", path], &want);
    }
}

/// An output path that is a device or a FIFO is refused before any work, naming what it is,
/// and left as it was: an output is written to a temp file and renamed over its path, which
/// (run as root) replaced /dev/null itself with a receipt. A link to /dev/null stands in for
/// it here (a regression would replace the link, not the device). And a `--tape` FIFO is
/// refused at once: its open blocked for ever with no writer, an interrupted soak too.
#[test]
fn outputs_that_are_devices_or_fifos_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f");
    mkfifo(&fifo);
    let null = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let (f, n) = (fifo.to_str().unwrap(), null.to_str().unwrap());
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for (args, path, kind) in [
        (
            vec!["--backend", "cpu", "--receipt", n],
            n,
            "a character device",
        ),
        (vec!["--backend", "cpu", "--trace", f], f, "a FIFO"),
        (
            vec![
                "soak",
                "--backend",
                "cpu",
                "--runs",
                "1",
                "--out",
                o,
                "--junit",
                n,
            ],
            n,
            "a character device",
        ),
        (vec!["synth", "--layers", "1", "-o", f], f, "a FIFO"),
    ] {
        refused_at_once(&args, &format!("{path}: is {kind}, need a file path"));
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::symlink_metadata(&null)
        .unwrap()
        .file_type()
        .is_symlink());
    refused_at_once(
        &["--backend", "cpu", "--tape", f],
        &format!("--tape {f}: is a FIFO"),
    );
}

/// trace-check: the reference and unknown phases are refused (exit 2) before the file is
/// read, listing the valid phases.
#[test]
fn trace_check_refuses_phases_the_bars_do_not_apply_to() {
    for ph in ["reference", "prime", "verify", "nonsense"] {
        let o = run(&["trace-check", "/nonexistent/t.json", "--phase", ph]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{ph}: {t}");
        assert!(t.contains("eager, pipelined, batched, serve"), "{ph}: {t}");
        assert!(
            !t.contains("os error"),
            "{ph}: the file was read first: {t}"
        );
    }
}

/// trace-check: a number it refuses is named as the file wrote it (exit 2), not as the
/// float serde_json reads it as (`18446744073709551616`, not `1.8446744073709552e+19`).
#[test]
fn trace_check_names_a_refused_number_as_written() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.json");
    for (ev, want) in [
        (
            r#"{"ph": "M", "name": "thread_name", "tid": 18446744073709551616, "args": {"name": "runtime/stage0@cpu0"}}"#,
            "traceEvents[0]: tid 18446744073709551616 is not a whole number >= 0",
        ),
        (
            r#"{"ph": "X", "name": "layers", "tid": 0, "ts": 1e300, "dur": -1E3, "args": {"phase": "pipelined", "step": 0}}"#,
            "traceEvents[0]: a slice at ts 1e300 lasting -1E3 µs",
        ),
    ] {
        std::fs::write(&t, format!(r#"{{"traceEvents": [{ev}]}}"#)).unwrap();
        let o = run(&["trace-check", t.to_str().unwrap(), "--phase", "pipelined"]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{out}");
        assert!(out.contains(want), "{want}:\n{out}");
        assert!(!out.contains("e+"), "{out}");
    }
}

/// synth checks -o before the work: a directory, a parent that is a file (exit 2 at once,
/// no model built).
#[test]
fn synth_checks_its_output_path_first() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    for out in [d.path().to_path_buf(), file.join("m.gguf")] {
        let t0 = std::time::Instant::now();
        let o = run(&["synth", "--preset", "llama8b", "-o", out.to_str().unwrap()]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains("-o "), "{t}");
        // llama8b takes many seconds to build: refused before that.
        assert!(t0.elapsed().as_secs() < 5, "{:?}: {t}", t0.elapsed());
    }
}

/// A battery's relative paths resolve against its file's directory, from any working
/// directory; a path that does not exist there is refused before the first gate runs,
/// naming the directory; a battery without --out writes a fresh folder each run.
#[test]
fn battery_paths_resolve_beside_the_battery_file() {
    let d = tempfile::tempdir().unwrap();
    let bdir = d.path().join("b");
    std::fs::create_dir_all(bdir.join("m")).unwrap();
    let synth = run(&[
        "synth",
        "--layers",
        "2",
        "--embd",
        "64",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--ff",
        "128",
        "--vocab",
        "512",
        "-o",
        bdir.join("m/tiny.gguf").to_str().unwrap(),
    ]);
    assert_eq!(synth.status.code(), Some(0), "{}", text(&synth));
    let write = |gates: &str| {
        let f = bdir.join("battery.json");
        std::fs::write(&f, format!("{{\"name\": \"rel\", \"gates\": [{gates}]}}")).unwrap();
        f
    };
    let quick = r#""--backend", "cpu", "--gen-len", "2", "--prompt-len", "2", "--stages", "2""#;
    let f = write(&format!(
        r#"{{"name": "first", "args": [{quick}]}}, {{"name": "tiny", "args": ["--model", "m/tiny.gguf", {quick}]}}"#
    ));
    // From another directory (the temp dir's parent of b/), with --out.
    let out = d.path().join("out");
    let o = run_in(
        d.path(),
        &[
            "battery",
            f.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out.join("tiny.json").exists());
    // Refused before the first gate ran: a missing file, naming the directory it resolved
    // against; a path that is there but no file (a directory, a device), saying what it is
    // (it said "no such file").
    let out2 = d.path().join("out2");
    for (model, want) in [
        (
            "m/gone.gguf",
            "no such file (a battery's relative paths resolve against the battery file's directory",
        ),
        ("m", "is a directory, not a regular file"),
        ("/dev/null", "is a character device, not a regular file"),
    ] {
        let f = write(&format!(
            r#"{{"name": "first", "args": [{quick}]}}, {{"name": "odd", "args": ["--model", "{model}", {quick}]}}"#
        ));
        let o = run_in(
            d.path(),
            &[
                "battery",
                f.to_str().unwrap(),
                "--out",
                out2.to_str().unwrap(),
            ],
        );
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains(&format!("{model}: {want}")), "{t}");
        assert!(!t.contains("PASS"), "a gate ran first: {t}");
    }
    // No --out: a fresh folder under receipts/runs of the working directory, per run (its
    // name has the time and the pid, so two runs never share one).
    let f = write(&format!(r#"{{"name": "first", "args": [{quick}]}}"#));
    let runs = d.path().join("receipts/runs");
    let mut seen = Vec::new();
    for _ in 0..2 {
        let o = run_in(d.path(), &["battery", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        seen = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter().all(|n| n.starts_with("battery-rel-")),
        "{seen:?}"
    );
}

/// A battery entry goes through the same policy (and -q, which a battery does not read).
#[test]
fn battery_entries_go_through_the_same_policy() {
    let d = tempfile::tempdir().unwrap();
    for (args, flag) in [
        (
            r#""--backend", "cpu", "--batch", "8", "--arms", "eager""#,
            "--batch 8",
        ),
        (r#""--backend", "cpu", "--stages", "2", "-q""#, "--quiet"),
    ] {
        let f = d.path().join("b.json");
        std::fs::write(
            &f,
            format!(r#"{{"name": "p", "gates": [{{"name": "g", "args": [{args}]}}]}}"#),
        )
        .unwrap();
        let o = run(&[
            "battery",
            f.to_str().unwrap(),
            "--out",
            d.path().join("o").to_str().unwrap(),
        ]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains(&format!("battery gate \"g\": {flag}")), "{t}");
    }
}

/// A fault of multi-row or rollback steps is refused where the tape and prompt leave no such
/// step (found by `ppn-gate hunt`: `--fault no-rollback --arms verify` on a 1-token tape ran
/// no round and PASSed, a blind spot), and still runs where one is left.
#[test]
fn faults_of_steps_the_tape_leaves_out_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.json");
    std::fs::write(&one, r#"{"tokens": [5]}"#).unwrap();
    let all_prompt = dir.path().join("all-prompt.json");
    std::fs::write(&all_prompt, r#"{"tokens": [5, 9, 2, 7], "prompt_len": 4}"#).unwrap();
    let open = dir.path().join("open.json");
    std::fs::write(&open, r#"{"tokens": [5, 9, 2, 7], "prompt_len": 2}"#).unwrap();
    let gate = |fault: &str, arms: &str, tape: &Path, extra: &[&str]| {
        let t = tape.to_str().unwrap();
        let mut a = vec![
            "--backend",
            "cpu",
            "--stages",
            "2",
            "--arms",
            arms,
            "--fault",
            fault,
        ];
        a.extend(["--tape", t]);
        a.extend(extra);
        run(&a)
    };
    for tape in [&one, &all_prompt] {
        let o = gate("no-rollback", "verify", tape, &[]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("roll nothing back"), "{}", text(&o));
    }
    // Verify primes its prompt as one chunk: a 1-token prompt is one row (refused), a
    // 4-token prompt four rows, every one checked (caught, with no round at all).
    let o = gate("chunk-kv-order", "verify", &one, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = gate("chunk-kv-order", "verify", &all_prompt, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // Prime with chunks of one row only: no multi-row step either.
    let o = gate("chunk-kv-order", "prime", &open, &["--chunk", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("multi-row step"), "{}", text(&o));
    // Where a round or a 2-row chunk is left, the fault runs and is caught.
    let o = gate("no-rollback", "verify", &open, &["--draft", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = gate("chunk-kv-order", "prime", &open, &["--chunk", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}
