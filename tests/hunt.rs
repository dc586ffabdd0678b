//! `ppn-gate hunt` end to end on the CPU backend and the built-in model (fixed seeds): a
//! clean hunt finds nothing; with a CPU-openable fault every trial that opens its window is
//! caught or reported as a shrunk blind spot; `--self-check` finds its planted corner and
//! shrinks it exactly; hostile flags exit 2 naming the value.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn hunt(args: &[&str], out: &Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ppn-gate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("hunt")
        .args(["--backend", "cpu", "--out"])
        .arg(out);
    if !args.contains(&"--timeout-s") {
        c.args(["--timeout-s", "60"]);
    }
    c.args(args).output().expect("ppn-gate runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn report(dir: &Path) -> Value {
    let t = std::fs::read_to_string(dir.join("hunt.json")).expect("hunt.json written");
    let v: Value = serde_json::from_str(&t).expect("hunt.json is JSON");
    assert_eq!(v["schema"], "ppn-gate.hunt/1");
    v
}

#[test]
fn a_clean_hunt_finds_nothing_and_reports_its_coverage() {
    let d = tempfile::tempdir().unwrap();
    let junit = d.path().join("hunt.xml");
    let o = hunt(
        &[
            "--trials",
            "25",
            "--seed",
            "7",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &d.path().join("h"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = report(&d.path().join("h"));
    assert_eq!(r["trials"], 25);
    assert_eq!(r["pass"], 25, "{r:#}");
    assert_eq!(r["findings_count"], 0);
    assert_eq!(r["seed"], 7);
    let cov = r["coverage"].as_object().unwrap();
    for k in ["stages 2+", "arm prime", "arm verify", "arm batched"] {
        assert!(
            cov.get(k).and_then(Value::as_u64).unwrap_or(0) > 0,
            "{k}: {cov:?}"
        );
    }
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("hunt: 25 trials") && s.contains("coverage"),
        "{s}"
    );
    let x = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&x).unwrap();
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 1, "{x}");
    assert!(!x.contains("<failure"), "{x}");
    // Every trial's receipt is kept.
    assert!(d.path().join("h/trials/0024/receipt.json").exists());
}

/// Every trial that opened the fault's window either FAILed (caught) or is a blind-spot
/// finding, shrunk, with a battery file that `ppn-gate battery` runs.
fn fault_hunt(fault: &str, seed: &str, trials: &str) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("h");
    let o = hunt(
        &[
            "--trials",
            trials,
            "--seed",
            seed,
            "--fault",
            fault,
            "--confirm",
            "1",
        ],
        &out,
    );
    let r = report(&out);
    let opened = r["fault_opened"].as_u64().unwrap();
    let caught = r["caught"].as_u64().unwrap();
    let findings = r["findings"].as_array().unwrap();
    assert!(
        opened >= 3,
        "{fault}: the fault opened in only {opened} trials: {r:#}"
    );
    assert_eq!(
        r["fault_opened"].as_u64().unwrap() + r["fault_closed"].as_u64().unwrap(),
        r["trials"].as_u64().unwrap()
    );
    let blind = findings
        .iter()
        .filter(|f| f["kind"] == "blind-spot")
        .count() as u64;
    assert_eq!(caught + blind, opened, "{fault}: {r:#}");
    for f in findings {
        assert_eq!(f["kind"], "blind-spot", "{fault}: {f:#}");
        let b = f["battery"].as_str().unwrap();
        let bo = Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
            .args(["battery", b, "--out"])
            .arg(d.path().join("b"))
            .output()
            .unwrap();
        // A blind spot is a gate that PASSes with the fault: its battery passes.
        assert_eq!(bo.status.code(), Some(0), "{}", text(&bo));
    }
    let want = if findings.is_empty() { 0 } else { 1 };
    assert_eq!(o.status.code(), Some(want), "{}", text(&o));
}

#[test]
fn with_rx_no_wait_every_opening_trial_is_caught_or_a_shrunk_blind_spot() {
    fault_hunt("rx-no-wait", "3", "12");
}

#[test]
fn with_no_rollback_every_opening_trial_is_caught_or_a_shrunk_blind_spot() {
    fault_hunt("no-rollback", "4", "14");
}

/// stale-cache opens only in the serve arm with more requests than cache rows (a corner the
/// plain distribution meets rarely): the hunt's draw favours the fault's window, every
/// trial where it opened is caught (no blind spot), and each of them ran serve reusing rows.
#[test]
fn with_stale_cache_the_hunt_draws_serve_and_catches_every_opening_trial() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("h");
    let o = hunt(
        &[
            "--trials",
            "14",
            "--seed",
            "11",
            "--fault",
            "stale-cache",
            "--confirm",
            "1",
        ],
        &out,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = report(&out);
    let opened = r["fault_opened"].as_u64().unwrap();
    assert!(
        opened >= 5,
        "stale-cache opened in only {opened} trials: {r:#}"
    );
    assert_eq!(r["caught"].as_u64().unwrap(), opened, "{r:#}");
    assert_eq!(r["findings_count"], 0, "{r:#}");
    let cov = r["coverage"].as_object().unwrap();
    let reuse = cov.get("serve reuses rows").and_then(Value::as_u64);
    assert!(reuse.unwrap_or(0) >= opened, "{cov:?}");
}

#[test]
fn self_check_finds_its_planted_corner_and_shrinks_it_exactly() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("h");
    // Seed 1's corner: stages 3, a chunk of 3 (gate::plant::Corner::of_seed); found at
    // trial 33 of the draw the serve and GPU dimensions take (seeds 2, 3, 4: trials 80, 65,
    // 50, each shrunk exactly to its corner).
    let o = hunt(
        &[
            "--self-check",
            "--seed",
            "1",
            "--trials",
            "150",
            "--confirm",
            "2",
        ],
        &out,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = report(&out);
    assert_eq!(r["self_check"]["corner"], "stages=3,chunk=3");
    assert!(r["self_check"]["miss"].is_null(), "{r:#}");
    let f = &r["findings"][0];
    assert_eq!(f["kind"], "fail");
    assert_eq!(
        f["shrunk_flags"],
        serde_json::json!(["--stages=3", "--arms=prime", "--chunk=3"]),
        "{f:#}"
    );
    assert_eq!(f["reproduced"], 2);
    assert!(
        r["trials"].as_u64().unwrap() < 150,
        "stops once found: {r:#}"
    );
    // The battery file reproduces the FAIL, through the gate's real comparison.
    let bo = Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
        .args(["battery", f["battery"].as_str().unwrap(), "--out"])
        .arg(d.path().join("b"))
        .output()
        .unwrap();
    assert_eq!(bo.status.code(), Some(1), "{}", text(&bo));
    assert!(text(&bo).contains("prime      FAIL"), "{}", text(&bo));
    // The same corner without the planted flag passes: the defect is the flag's alone.
    let args: Vec<String> = f["command"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .filter(|a| !a.starts_with("--plant-defect"))
        .map(String::from)
        .collect();
    let g = Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
        .args(&args)
        .arg("--receipt")
        .arg(d.path().join("clean.json"))
        .output()
        .unwrap();
    assert_eq!(g.status.code(), Some(0), "{args:?}: {}", text(&g));
}

/// A gate flag given to the hunt that no draw of the rest can make valid is a bad flag: exit
/// 2 naming it, before any trial (the hunt's directory not even made), never a `refused`
/// finding in every trial (exit 1). A flag a draw can mend is not refused here: a chunk
/// longer than the default prompt (the drawn prompt grows to it), stages 3 with splits of
/// the same count.
#[test]
fn pinned_flags_no_draw_can_mend_exit_2_naming_the_flag() {
    let d = tempfile::tempdir().unwrap();
    for (args, want) in [
        (&["--stages", "0"][..], "--stages 0"),
        (&["--stages", "99"][..], "--stages 99"),
        (&["--batch", "0"][..], "--batch 0"),
        (&["--window", "0"][..], "--window 0"),
        (&["--draft", "0"][..], "--draft 0"),
        (&["--repeat", "0"][..], "--repeat 0"),
        (&["--chunk", "4,0"][..], "--chunk 4,0"),
        (&["--requests", "0"][..], "--requests 0"),
        (
            &["--max-rows", "2", "--prefill-chunk", "3"][..],
            "--prefill-chunk 3",
        ),
        (&["--splits", "1,1"][..], "--splits 1,1"),
        (&["--splits", "3", "--stages", "3"][..], "--splits 3"),
        (&["--devices", "0,9"][..], "--devices 0,9"),
        (&["--topk", "0"][..], "--topk 0"),
        (&["--arms", "eager", "--chunk", "4"][..], "--chunk 4"),
        (&["--arms", "eager,eager"][..], "listed twice"),
        (
            &["--stages", "1", "--transport", "host"][..],
            "--transport host",
        ),
        (&["--transport", "ipc"][..], "--transport ipc"),
        (&["--procs", "2"][..], "--procs 2"),
        (&["--procs", "1", "--transport", "ipc"][..], "--procs 1"),
        (&["--prompt-len", "5000"][..], "--prompt-len 5000"),
        (&["--prompt-len", "3", "--chunk", "4"][..], "--chunk 4"),
        (
            &["--prompt-len", "3", "--gen-len", "2", "--draft", "2"][..],
            "--draft 2",
        ),
    ] {
        let out = d.path().join("h");
        let o = hunt(&[&["--trials", "2"][..], args].concat(), &out);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(
            t.contains(&format!("error: {want}")) || t.contains(want),
            "{args:?}: {t}"
        );
        assert!(
            !t.contains("finding") && !out.exists(),
            "{args:?} ran trials: {t}"
        );
    }
    let o = hunt(
        &[
            "--trials",
            "3",
            "--chunk",
            "12",
            "--splits",
            "2,5",
            "--confirm",
            "1",
        ],
        &d.path().join("ok"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A pinned --prompt-len is every trial's prompt: drawn tapes carry it as their prompt_len
/// (or none) and reach it, so no trial is refused for a contradiction (seed 5 drew such
/// tapes at trials 2 and 3). A pinned --tape sets the prompt of every trial (no --prompt-len
/// is drawn beside it); a pinned --chunk or --draft grows the drawn prompt and positions.
#[test]
fn pinned_prompts_tapes_chunks_and_drafts_are_honoured_by_every_trial() {
    let d = tempfile::tempdir().unwrap();
    for (i, args) in [
        &["--prompt-len", "3", "--trials", "12"][..],
        &[
            "--tape",
            "tests/data/oracle/synth/synth-qwen3-L4-E256.tapeA.json",
            "--trials",
            "8",
        ][..],
        &["--chunk", "20", "--trials", "6"][..],
        &["--draft", "14", "--trials", "6"][..],
    ]
    .into_iter()
    .enumerate()
    {
        let out = d.path().join(format!("h{i}"));
        let o = hunt(
            &[&["--seed", "5", "--confirm", "1"][..], args].concat(),
            &out,
        );
        let r = report(&out);
        assert_eq!(r["refused"], 0, "{args:?}: {r:#}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
}

#[test]
fn hostile_hunt_flags_exit_2_naming_the_value() {
    let d = tempfile::tempdir().unwrap();
    for (args, want) in [
        (&["--trials", "0"][..], "--trials 0"),
        (&["--budget", "xyz"][..], "\"xyz\""),
        (&["--budget", "0m"][..], "\"0m\""),
        (&["--confirm", "0"][..], "--confirm 0"),
        (&["--timeout-s", "0"][..], "--timeout-s 0"),
        (&["--fault", "nope"][..], "\"nope\""),
        (
            &["--fault", "rx-no-wait", "--fault", "no-rollback"][..],
            "--fault given 2 times",
        ),
        (
            &["--self-check", "--fault", "rx-no-wait"][..],
            "--self-check with --fault",
        ),
        (&["--receipt", "r.json"][..], "--receipt r.json"),
        (
            &["--plant-defect", "stages=3,chunk=7"][..],
            "--plant-defect",
        ),
        (&["--trials", "x"][..], "--trials"),
    ] {
        let o = hunt(args, &d.path().join("h"));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains(want), "{args:?}: {t}");
        assert!(!t.contains("panicked"), "{args:?}: {t}");
    }
}
