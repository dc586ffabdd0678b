//! Long work you can watch, end to end on the CPU backend and the built-in model: every
//! result line reaches a pipe when it is known (a soak's runs, a gate's arms), read here
//! line by line with the time each arrived; no progress bar byte ever reaches a pipe; `-v`
//! alone shows diagnostics. Each timing check is also run on a planted timeline of lines
//! that all arrive at the end (what a buffered stdout gives) and must refuse it.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One line of a child's output and when it was read (seconds since the spawn).
#[derive(Clone, Debug)]
struct Line {
    at: f64,
    text: String,
}

/// What a finished child printed: its stdout and stderr lines with their arrival times,
/// the raw bytes of both, its exit time and code.
struct Run {
    out: Vec<Line>,
    err: Vec<Line>,
    raw: Vec<u8>,
    exit_at: f64,
    code: Option<i32>,
}

/// Runs the binary with `--backend cpu` and both streams piped, each read by its own thread
/// as the lines arrive.
fn watch(args: &[&str]) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ppn-gate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .args(["--backend", "cpu"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = c.spawn().expect("ppn-gate runs");
    let reader = |r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let (mut lines, mut raw) = (Vec::new(), Vec::new());
            let mut r = BufReader::new(r);
            loop {
                let mut buf = Vec::new();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let at = t0.elapsed().as_secs_f64();
                        raw.extend_from_slice(&buf);
                        let text = String::from_utf8_lossy(&buf).trim_end().to_string();
                        lines.push(Line { at, text });
                    }
                }
            }
            (lines, raw)
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let status = child.wait().expect("ppn-gate exits");
    let exit_at = t0.elapsed().as_secs_f64();
    let (out, mut raw) = out.join().unwrap();
    let (err, raw_err) = err.join().unwrap();
    raw.extend(raw_err);
    Run {
        out,
        err,
        raw,
        exit_at,
        code: status.code(),
    }
}

fn all(r: &Run) -> String {
    let f = |v: &[Line]| {
        v.iter()
            .map(|l| l.text.clone())
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!("stdout:\n{}\nstderr:\n{}", f(&r.out), f(&r.err))
}

/// A soak's run lines (`run   i/N PASS  s.ss s`) arrived as the runs ended: one per run, in
/// order, each run's line at least `share` of that run's own time after the previous one
/// (the next run only starts once a line is out), and the first well before the exit (at
/// least `share` of the later runs' time). Lines buffered to the end arrive together.
fn runs_arrived_as_they_ended(
    out: &[Line],
    exit_at: f64,
    runs: usize,
    share: f64,
) -> Result<(), String> {
    let lines: Vec<&Line> = out.iter().filter(|l| l.text.starts_with("run ")).collect();
    if lines.len() != runs {
        return Err(format!("{} run lines, want {runs}: {out:?}", lines.len()));
    }
    let mut secs = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let want = format!("run {:>3}/{runs} PASS  ", i + 1);
        if !l.text.starts_with(&want) {
            return Err(format!("line {i}: {:?}, want {want:?}...", l.text));
        }
        let s: f64 = l.text[want.len()..]
            .trim_end_matches(" s")
            .parse()
            .map_err(|e| format!("{:?}: {e}", l.text))?;
        secs.push(s);
    }
    for i in 1..runs {
        let gap = lines[i].at - lines[i - 1].at;
        if gap < share * secs[i] {
            return Err(format!(
                "run {} line {gap:.3} s after run {}'s, the run took {:.3} s: {out:?}",
                i + 1,
                i,
                secs[i]
            ));
        }
    }
    let later: f64 = secs[1..].iter().sum();
    if exit_at - lines[0].at < share * later {
        return Err(format!(
            "run 1's line {:.3} s before the exit, runs 2.. took {later:.3} s",
            exit_at - lines[0].at
        ));
    }
    Ok(())
}

/// Planted: the same lines all read at the exit, as from a stdout buffered to the end.
fn buffered(out: &[Line], exit_at: f64) -> Vec<Line> {
    out.iter()
        .map(|l| Line {
            at: exit_at,
            text: l.text.clone(),
        })
        .collect()
}

/// No progress bar byte (a carriage return, an escape sequence) in what reached a pipe.
fn no_bar_bytes(r: &Run) -> Result<(), String> {
    match r.raw.iter().position(|&b| b == b'\r' || b == 0x1b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "byte {:#x} at {i}: {:?}",
            r.raw[i],
            String::from_utf8_lossy(&r.raw[i.saturating_sub(40)..(i + 40).min(r.raw.len())])
        )),
    }
}

/// `soak --runs 3` on a pipe prints a line per run as it ends, flushed, with no bar byte.
#[test]
fn a_piped_soak_prints_each_run_as_it_ends() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("soak");
    let r = watch(&[
        "soak",
        "--runs",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--stages",
        "2",
        "--arms",
        "eager,pipelined",
        "--gen-len",
        "40",
        "--jitter-us",
        "100",
    ]);
    assert_eq!(r.code, Some(0), "{}", all(&r));
    runs_arrived_as_they_ended(&r.out, r.exit_at, 3, 0.5)
        .unwrap_or_else(|e| panic!("{e}\n{}", all(&r)));
    // The summary still follows the run lines.
    let last: Vec<&str> = r.out.iter().map(|l| l.text.as_str()).collect();
    assert!(last.contains(&"3/3 PASS"), "{last:?}");
    no_bar_bytes(&r).unwrap();
    // The negative control: the same lines, all arriving at the exit, are refused.
    let e = runs_arrived_as_they_ended(&buffered(&r.out, r.exit_at), r.exit_at, 3, 0.5)
        .expect_err("a buffered stdout must fail the check");
    assert!(e.contains("after run 1's"), "{e}");
}

/// A gate prints each arm's verdict when the arm ends: eager's line reaches the pipe before
/// the last arm starts (its `-v` diagnostic `arm batched: start`), and every arm's line
/// comes before the receipt line. `-v` shows the arm starts; without it stderr has none
/// and no line stdout did not have before.
#[test]
fn a_gate_prints_each_arm_verdict_before_the_next_arms_run() {
    let d = tempfile::tempdir().unwrap();
    let rc = d.path().join("r.json");
    let flags = [
        "--stages",
        "2",
        "--gen-len",
        "40",
        "--jitter-us",
        "100",
        "--receipt",
        rc.to_str().unwrap(),
    ];
    let mut v = flags.to_vec();
    v.push("-v");
    let r = watch(&v);
    assert_eq!(r.code, Some(0), "{}", all(&r));
    let find = |lines: &[Line], p: &str| {
        lines
            .iter()
            .find(|l| l.text.starts_with(p))
            .cloned()
            .unwrap_or_else(|| panic!("no line {p:?}:\n{}", all(&r)))
    };
    let check = |eager: &Line, batched_start: &Line| -> Result<(), String> {
        if eager.at < batched_start.at {
            Ok(())
        } else {
            Err(format!(
                "eager's verdict at {:.3} s, batched started at {:.3} s",
                eager.at, batched_start.at
            ))
        }
    };
    let eager = find(&r.out, "eager      PASS");
    let start = find(&r.err, "arm batched: start");
    check(&eager, &start).unwrap_or_else(|e| panic!("{e}\n{}", all(&r)));
    // The pipelined arm ran between them (its own start diagnostic in between).
    let pip = find(&r.err, "arm pipelined: start");
    assert!(
        eager.at <= pip.at + 0.05 && pip.at < start.at,
        "{}",
        all(&r)
    );
    // Each arm's verdict once, in arm order, then the receipt.
    let texts: Vec<&str> = r.out.iter().map(|l| l.text.as_str()).collect();
    let arms: Vec<&str> = texts
        .iter()
        .filter_map(|t| t.split_whitespace().next())
        .filter(|w| ["eager", "pipelined", "batched"].contains(w))
        .collect();
    assert_eq!(arms, ["eager", "pipelined", "batched"], "{texts:?}");
    assert!(texts.last().unwrap().starts_with("receipt: "), "{texts:?}");
    no_bar_bytes(&r).unwrap();
    // The negative control: a verdict that arrived at the exit is refused.
    let late = Line {
        at: r.exit_at,
        text: eager.text.clone(),
    };
    check(&late, &start).expect_err("a verdict printed at the end must fail the check");

    // Without -v: no diagnostic, the same stdout lines.
    let q = watch(&flags);
    assert_eq!(q.code, Some(0), "{}", all(&q));
    assert!(
        q.err
            .iter()
            .all(|l| !l.text.contains("arm ") || !l.text.contains(": start")),
        "{}",
        all(&q)
    );
    // -v only adds lines: every line of stderr without it is there with it.
    for l in &q.err {
        assert!(
            r.err.iter().any(|m| m.text == l.text),
            "{l:?} not in\n{}",
            all(&r)
        );
    }
    assert!(r.err.len() >= q.err.len() + 3, "{}\n{}", all(&q), all(&r));
    let qt: Vec<&str> = q.out.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(qt.len(), texts.len(), "{qt:?}");
    for (a, b) in qt.iter().zip(&texts) {
        assert_eq!(a.split_whitespace().next(), b.split_whitespace().next());
    }
    no_bar_bytes(&q).unwrap();
}

/// The check on bar bytes is not vacuous: planted output holding a carriage return or an
/// escape is refused.
#[test]
fn bar_bytes_are_caught_when_planted() {
    for planted in [&b"run 1\r\x1b[2Ksoak [>  ] 0/3"[..], b"x\ry", b"\x1b[2K"] {
        let r = Run {
            out: vec![],
            err: vec![],
            raw: planted.to_vec(),
            exit_at: 0.0,
            code: Some(0),
        };
        assert!(no_bar_bytes(&r).is_err(), "{planted:?}");
    }
}

/// bench prints its results table first (the tok/s rows right after its header, before the
/// bandwidth, launch and build lines), every figure with its unit (`host enqueue X
/// us/token of Y us/token`), and marks every timed figure noise below 16 steps with one
/// line saying why; at 16 steps (the control) nothing is marked.
#[test]
fn bench_prints_its_table_first_with_units_and_marks_noise() {
    let bench = |steps: &str| {
        let r = watch(&[
            "bench", "--steps", steps, "--stages", "2", "--batch", "2", "--arms", "batched",
        ]);
        assert_eq!(r.code, Some(0), "{}", all(&r));
        no_bar_bytes(&r).unwrap();
        r.out.iter().map(|l| l.text.clone()).collect::<Vec<_>>()
    };
    let short = bench("4");
    assert!(short[0].starts_with("bench: cpu backend"), "{short:?}");
    assert!(
        short[1].starts_with("  reference (1 stage, eager)"),
        "{short:?}"
    );
    let at = |v: &[String], p: &str| {
        v.iter()
            .position(|l| l.trim_start().starts_with(p))
            .unwrap_or_else(|| panic!("no {p:?} in {v:?}"))
    };
    let table_end = at(&short, "batched   (B=2");
    for later in [
        "device bandwidth",
        "kernel launches",
        "build:",
        "tracing cost",
    ] {
        assert!(
            at(&short, later) > table_end,
            "{later} before the table: {short:?}"
        );
    }
    let enq = &short[at(&short, "kernel launches")];
    let tail = enq.split("host enqueue ").nth(1).expect(enq);
    let w: Vec<&str> = tail.split_whitespace().collect();
    assert!(
        w[0].parse::<f64>().is_ok()
            && w[1] == "us/token"
            && w[2] == "of"
            && w[3].parse::<f64>().is_ok()
            && w[4] == "us/token",
        "{enq}"
    );
    for p in [
        "reference (1 stage",
        "eager     (2 stages)",
        "batched   (B=2",
        "tracing cost",
    ] {
        let l = &short[at(&short, p)];
        assert!(l.ends_with("(noise: 4 steps)"), "{l}");
    }
    assert!(
        short
            .iter()
            .any(|l| l.contains("fewer than 16 steps is not a measurement")),
        "{short:?}"
    );
    let long = bench("16");
    assert!(
        long[1].starts_with("  reference (1 stage, eager)"),
        "{long:?}"
    );
    assert!(long.iter().all(|l| !l.contains("noise")), "{long:?}");
}
