//! Outputs never destroy inputs, and a JSON input is a file: the real binary on the CPU
//! backend, each case a command that once exited 0 having overwritten what it read (a model
//! replaced by a receipt, the goldens by the receipts checked against them, a battery file by
//! its JUnit report), ran a hunt that never tested its fault, or hung on a FIFO or
//! /dev/zero. Each must now exit 2 with one line naming the flags, and leave every input's
//! bytes as they were.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary in `dir` (stdin closed) for at most 60 s: a case that hangs (a FIFO read)
/// fails here instead of stalling the suite.
fn run_in(dir: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ppn-gate starts");
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ppn-gate {args:?} ran past 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2, one error line holding every piece of `says`.
fn refused(o: &Output, says: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {e}");
    for s in says {
        assert!(e.contains(s), "{s:?} not in: {e}");
    }
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn model_in(dir: &Path) -> Vec<u8> {
    let o = run_in(dir, &["synth", "--layers", "2", "-o", "m.gguf"]);
    assert!(o.status.success(), "synth: {}", stderr(&o));
    bytes(&dir.join("m.gguf"))
}

#[test]
fn a_gate_output_on_its_model_tape_or_other_output_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let m = model_in(dir);
    std::fs::write(dir.join("t.json"), r#"{"tokens": [1, 2, 3, 4, 5, 6]}"#).unwrap();
    let t = bytes(&dir.join("t.json"));
    std::os::unix::fs::symlink("m.gguf", dir.join("link.gguf")).unwrap();
    let cpu = ["--backend", "cpu", "--arms", "eager"];
    for (args, says) in [
        (
            vec!["--model", "m.gguf", "--receipt", "m.gguf"],
            vec!["--receipt m.gguf", "--model file"],
        ),
        // Another name for the same file: one file all the same.
        (
            vec!["--model", "m.gguf", "--receipt", "link.gguf"],
            vec!["--receipt link.gguf", "--model file m.gguf"],
        ),
        (
            vec!["--model", "m.gguf", "--trace", "./m.gguf"],
            vec!["--trace ./m.gguf", "--model file"],
        ),
        (
            vec!["--tape", "t.json", "--receipt", "t.json"],
            vec!["--receipt t.json", "--tape file"],
        ),
        (
            vec!["--receipt", "r.json", "--trace", "r.json"],
            vec!["--trace r.json", "also the --receipt path"],
        ),
    ] {
        let o = run_in(dir, &[&cpu[..], &args[..]].concat());
        refused(&o, &says);
        assert!(!dir.join("r.json").exists(), "{args:?} wrote a receipt");
    }
    let o = run_in(
        dir,
        &[
            "bench",
            "--backend",
            "cpu",
            "--steps",
            "2",
            "--model",
            "m.gguf",
            "--trace",
            "m.gguf",
        ],
    );
    refused(&o, &["--trace m.gguf", "--model file"]);
    assert_eq!(bytes(&dir.join("m.gguf")), m, "the model was overwritten");
    assert_eq!(bytes(&dir.join("t.json")), t, "the tape was overwritten");
    // The control: distinct paths run, and PASS.
    let o = run_in(
        dir,
        &[&cpu[..], &["--model", "m.gguf", "--receipt", "r.json"]].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_soak_output_among_its_runs_files_or_inputs_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let m = model_in(dir);
    let soak = [
        "soak",
        "--backend",
        "cpu",
        "--runs",
        "2",
        "--arms",
        "eager",
        "--gen-len",
        "2",
    ];
    for (args, says) in [
        (
            vec!["--out", "s", "--junit", "s/summary.json"],
            vec!["--junit s/summary.json"],
        ),
        // The lock file is an output too: a JUnit there was deleted with it (or, left as
        // the lock, blocked the directory).
        (
            vec!["--out", "s", "--junit", "s/.ppn-gate.lock"],
            vec!["--junit s/.ppn-gate.lock", "also the --out's lock path"],
        ),
        (
            vec!["--out", "s", "--junit", "s/run-002.json"],
            vec!["run 002 of the soak's receipts"],
        ),
        (
            vec!["--out", "s", "--model", "m.gguf", "--junit", "m.gguf"],
            vec!["--junit m.gguf", "--model file"],
        ),
        (
            vec![
                "--out",
                "s",
                "--stages",
                "2",
                "--trace",
                "tr.json",
                "--junit",
                "tr-run-001.json",
            ],
            vec!["run 001's trace of --trace tr.json"],
        ),
    ] {
        let o = run_in(dir, &[&soak[..], &args[..]].concat());
        refused(&o, &says);
    }
    assert_eq!(bytes(&dir.join("m.gguf")), m, "the model was overwritten");
    // Each refusal came after --out was made: the soak took it away again.
    assert!(!dir.join("s").exists(), "a refused soak left its --out");
    // Past the runs the soak writes: not one of its names, so it runs.
    let o = run_in(
        dir,
        &[&soak[..], &["--out", "s", "--junit", "s/run-003.json"]].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// An --out given again holds this soak's runs only: a soak of 1 run in the folder of one of
/// 3 kept run-002.json and run-003.json beside its own, from another configuration. An input
/// named like a run receipt (a tape) is kept, and the soak reads it.
#[test]
fn a_soak_in_an_earlier_soaks_out_removes_that_soaks_runs() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let soak = |runs: &str, more: &[&str]| {
        let mut v = vec![
            "soak",
            "--backend",
            "cpu",
            "--runs",
            runs,
            "--arms",
            "eager",
        ];
        v.extend_from_slice(more);
        run_in(dir, &v)
    };
    let o = soak("3", &["--out", "s", "--gen-len", "3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for r in ["run-001.json", "run-002.json", "run-003.json"] {
        assert!(dir.join("s").join(r).is_file(), "{r}");
    }
    let tape = r#"{"tokens": [5, 6, 7, 8, 9, 10], "prompt_len": 4}"#;
    std::fs::write(dir.join("s/run-009.json"), tape).unwrap();
    let o = soak("1", &["--out", "s", "--tape", "s/run-009.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--out s: removed 3 run receipt(s) an earlier soak left there"),
        "{}",
        stderr(&o)
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.join("s"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["run-001.json", "run-009.json", "summary.json"]);
    assert_eq!(bytes(&dir.join("s/run-009.json")), tape.as_bytes());
    let run = String::from_utf8(bytes(&dir.join("s/run-001.json"))).unwrap();
    assert!(
        run.contains("\"prompt_len\": 4"),
        "run-001 is not this soak's: {run}"
    );
}

#[test]
fn a_battery_never_writes_over_its_goldens_or_its_own_file() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let battery = |window: &str| {
        format!(
            r#"{{"name": "b", "gates": [{{"name": "g1", "args": ["--backend", "cpu", "--arms", "eager,pipelined", "--window", "{window}"]}}]}}"#
        )
    };
    std::fs::write(dir.join("b.json"), battery("2")).unwrap();
    let o = run_in(dir, &["battery", "b.json", "--out", "gold"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let gold = bytes(&dir.join("gold/g1.json"));
    // A battery that now differs from its golden (another window): against a fresh --out
    // the golden catches it; with --out on the goldens it was read back as its own golden
    // ("same", exit 0) and the golden replaced.
    std::fs::write(dir.join("b.json"), battery("3")).unwrap();
    let o = run_in(
        dir,
        &["battery", "b.json", "--out", "runs", "--golden", "gold"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The summary line says why a battery of PASSes exits 1.
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("1 PASS, 0 FAIL, 0 SKIP (of 1 gates); 1 PASS not the same as its golden"),
        "{out}"
    );
    let o = run_in(
        dir,
        &["battery", "b.json", "--out", "gold", "--golden", "./gold"],
    );
    refused(&o, &["--out gold/g1.json", "--golden file ./gold/g1.json"]);
    assert_eq!(
        bytes(&dir.join("gold/g1.json")),
        gold,
        "the golden was overwritten"
    );
    // A golden missing: refused before the first gate runs (no receipt written).
    let o = run_in(
        dir,
        &["battery", "b.json", "--out", "runs2", "--golden", "nogold"],
    );
    refused(
        &o,
        &["--golden nogold: no golden receipt nogold/g1.json for gate \"g1\""],
    );
    assert!(
        !dir.join("runs2").exists(),
        "a refused battery left its --out"
    );
    let b = bytes(&dir.join("b.json"));
    let o = run_in(dir, &["battery", "b.json", "--junit", "b.json"]);
    refused(&o, &["--junit b.json", "battery file b.json"]);
    assert_eq!(
        bytes(&dir.join("b.json")),
        b,
        "the battery file was overwritten"
    );
    // A battery that stops before its outputs are checked (a file that does not parse, a
    // gate's bad flag) wrote its error report over whatever --junit named: the battery
    // file, a golden, a gate's model.
    std::fs::write(dir.join("bad.json"), r#"{"name": "b""#).unwrap();
    std::fs::write(
        dir.join("flag.json"),
        r#"{"name": "b", "gates": [{"name": "g1", "args": ["--bogus"]}]}"#,
    )
    .unwrap();
    let m = model_in(dir);
    for (file, junit, says) in [
        ("bad.json", "bad.json", "battery file bad.json"),
        ("flag.json", "flag.json", "battery file flag.json"),
        ("bad.json", "gold/g1.json", "--golden file"),
        ("flag.json", "gold/g1.json", "--golden file"),
    ] {
        let before = bytes(&dir.join(junit));
        let o = run_in(
            dir,
            &["battery", file, "--golden", "gold", "--junit", junit],
        );
        refused(&o, &[&format!("--junit {junit}"), says]);
        assert_eq!(
            bytes(&dir.join(junit)),
            before,
            "{file}: {junit} overwritten"
        );
    }
    // An input the unread file would name (its gate's model): not a JUnit report, so kept.
    for file in ["bad.json", "flag.json"] {
        let o = run_in(dir, &["battery", file, "--junit", "m.gguf"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("--junit m.gguf: not written"),
            "{}",
            stderr(&o)
        );
        assert_eq!(
            bytes(&dir.join("m.gguf")),
            m,
            "{file}: the model overwritten"
        );
    }
    // A new path, or the report of an earlier run, still gets the error's report.
    for _ in 0..2 {
        let o = run_in(dir, &["battery", "bad.json", "--junit", "j.xml"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let x = String::from_utf8(bytes(&dir.join("j.xml"))).unwrap();
        assert!(x.contains("<error message="), "{x}");
    }
}

/// A directory a running soak, battery or hunt writes (its --out, locked): another command's
/// output there would interleave with its runs or be replaced by one (`--receipt
/// D/run-005.json` into a live soak's D was accepted). The holder here is a live `sleep`
/// named in a lock as a soak would write it; once it is gone the lock is stale and the
/// directory free.
#[test]
fn an_output_in_a_running_soaks_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let mut holder = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep starts");
    std::fs::create_dir(dir.join("busy")).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let lock = format!(
        r#"{{"pid": {}, "host": "{}", "start": null, "command": "ppn-gate soak --out busy"}}"#,
        holder.id(),
        host.trim()
    );
    std::fs::write(dir.join("busy/.ppn-gate.lock"), lock).unwrap();
    let gate = ["--backend", "cpu", "--arms", "eager", "--gen-len", "2"];
    let o = run_in(
        dir,
        &[&gate[..], &["--receipt", "busy/run-005.json"]].concat(),
    );
    refused(
        &o,
        &[
            "--receipt busy/run-005.json: is in the --out directory of pid",
            "ppn-gate soak --out busy",
            "still running",
        ],
    );
    let o = run_in(
        dir,
        &[
            "soak",
            "--backend",
            "cpu",
            "--runs",
            "1",
            "--gen-len",
            "2",
            "--out",
            "mine",
            "--junit",
            "busy/j.xml",
        ],
    );
    refused(
        &o,
        &["--junit busy/j.xml: is in the --out directory of pid"],
    );
    assert!(!dir.join("busy/run-005.json").exists());
    assert!(!dir.join("busy/j.xml").exists());
    assert!(!dir.join("mine").exists(), "a refused soak left its --out");
    // A subdirectory is not the locked directory: its files are no names the soak writes.
    let o = run_in(
        dir,
        &[&gate[..], &["--receipt", "busy/sub/r.json"]].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = holder.kill();
    let _ = holder.wait();
    let o = run_in(
        dir,
        &[&gate[..], &["--receipt", "busy/run-005.json"]].concat(),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "a stale lock held: {}",
        stderr(&o)
    );
}

/// Everything the directory held before the command, as a sorted list of paths.
fn tree(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            v.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            }
        }
    }
    v.sort();
    v
}

/// Refused before any work and nothing left: paths through directories not made yet and
/// `..` (their directories were left behind), an output under another output's path or
/// ending in `/` (found only after the whole run), a soak whose flags its plan refuses (its
/// --out and summary were left), and --out directories locked by a lock that names no
/// holder or is no file (a gate wrote there; a FIFO hung the soak for ever).
#[test]
fn odd_output_paths_are_refused_up_front_and_leave_nothing() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let g = ["--backend", "cpu", "--arms", "eager", "--gen-len", "2"];
    let before = tree(dir);
    for (args, says) in [
        (
            vec!["--receipt", "new/../x.json", "--trace", "x.json"],
            "--trace x.json: is also the --receipt path",
        ),
        (
            vec!["--receipt", "n1/n2/../../n3/x.json", "--trace", "n3/x.json"],
            "is also the --receipt path",
        ),
        (
            vec!["--receipt", "r.json", "--trace", "r.json/x.json"],
            "--trace r.json/x.json: is under the --receipt path r.json",
        ),
        (
            vec!["--receipt", "a/r.json/x.json", "--trace", "a/r.json"],
            "--receipt a/r.json/x.json: is under the --trace path a/r.json",
        ),
        (vec!["--receipt", "m/n/"], "--receipt m/n/: is a directory"),
        (vec!["--trace", "m/n/."], "--trace m/n/.: is a directory"),
    ] {
        let o = run_in(dir, &[&g[..], &args[..]].concat());
        refused(&o, &[says]);
        assert_eq!(tree(dir), before, "{args:?} left files or directories");
    }
    let soak = ["soak", "--backend", "cpu", "--runs", "2", "--gen-len", "2"];
    for (args, says) in [
        (
            vec!["--out", "s/d", "--junit", "s/d/run-001.json/x.xml"],
            "run 001 of the soak's receipts",
        ),
        (
            vec!["--out", "s/d", "--junit", "s/d/.ppn-gate.lock/x.xml"],
            "--junit s/d/.ppn-gate.lock/x.xml: s/d/.ppn-gate.lock is a file",
        ),
        // Refused by the plan, after the summary is first written.
        (
            vec!["--out", "s/d", "--arms", "eager", "--fault", "stale-cache"],
            "--fault stale-cache",
        ),
        (
            vec!["--out", "s/d", "--stages", "2", "--splits", "99"],
            "--splits",
        ),
    ] {
        let o = run_in(dir, &[&soak[..], &args[..]].concat());
        refused(&o, &[says]);
        assert_eq!(tree(dir), before, "{args:?} left files or directories");
    }
    // `D/.` for a directory not made yet is D.
    let o = run_in(dir, &[&soak[..], &["--out", "dot/."]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.join("dot/summary.json").is_file());
    // A lock that names no holder holds its directory for a gate as for a soak; one that is
    // a FIFO is refused at once, never opened.
    std::fs::create_dir(dir.join("held")).unwrap();
    std::fs::write(dir.join("held/.ppn-gate.lock"), "{\"pid\": 12").unwrap();
    let o = run_in(dir, &[&g[..], &["--receipt", "held/r.json"]].concat());
    refused(&o, &["--receipt held/r.json", "names no holder"]);
    std::fs::create_dir(dir.join("fifo")).unwrap();
    let made = Command::new("mkfifo")
        .arg(dir.join("fifo/.ppn-gate.lock"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let o = run_in(dir, &[&g[..], &["--receipt", "fifo/r.json"]].concat());
    refused(&o, &["--receipt fifo/r.json", "not a lock file"]);
    let o = run_in(dir, &[&soak[..], &["--out", "fifo"]].concat());
    refused(&o, &["--out fifo", "not a lock file"]);
}

#[test]
fn a_hunt_whose_fault_no_draw_opens_is_refused_before_any_trial() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let h = [
        "hunt",
        "--backend",
        "cpu",
        "--trials",
        "2",
        "--confirm",
        "1",
        "--out",
        "h",
    ];
    for (args, says) in [
        (
            vec!["--fault", "stale-cache", "--arms", "eager"],
            vec!["--fault stale-cache", "--arms=eager", "the serve arm"],
        ),
        (
            vec!["--fault", "no-load-barrier"],
            vec!["--fault no-load-barrier", "the cuda backend"],
        ),
        (
            vec!["--fault", "single-slot", "--arms", "eager"],
            vec!["--fault single-slot", "--arms=eager"],
        ),
    ] {
        let o = run_in(dir, &[&h[..], &args[..]].concat());
        refused(&o, &says);
        assert!(
            !dir.join("h").exists(),
            "{args:?} left --out (or ran a trial)"
        );
    }
    let o = run_in(dir, &[&h[..], &["--junit", "h/hunt.json"]].concat());
    refused(&o, &["--junit h/hunt.json", "also the --out path"]);
    // Anywhere under --out: the hunt names its files there as it goes (a trial's receipt
    // was replaced by the JUnit XML).
    let o = run_in(
        dir,
        &[&h[..], &["--junit", "h/trials/0001/receipt.json"]].concat(),
    );
    refused(
        &o,
        &["--junit h/trials/0001/receipt.json", "is inside --out"],
    );
    assert!(!dir.join("h").exists(), "a refused hunt left its --out");
}

#[test]
fn json_inputs_that_are_not_files_are_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::fs::write(dir.join("r.json"), "{}").unwrap();
    for args in [
        vec!["diff", "fifo", "r.json"],
        vec!["diff", "/dev/zero", "r.json"],
        vec!["battery", "fifo"],
        vec!["battery", "/dev/zero"],
        vec!["trace-check", "/dev/zero", "--phase", "pipelined"],
        vec!["trace-check", ".", "--phase", "pipelined"],
    ] {
        let t0 = Instant::now();
        let o = run_in(dir, &args);
        refused(&o, &["need a JSON file"]);
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{args:?} took {:?}",
            t0.elapsed()
        );
    }
}
