//! `ppn-gate soak`: repeat a gate N times; classify failures as deterministic or
//! timing-dependent.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::shared::{
    error_case, install_interrupt_handler, interrupted_code, live, receipt_case, write_junit, Live,
    INTERRUPTS,
};
use super::SoakArgs;
use crate::exit::{EXIT_ERROR, EXIT_FAIL, EXIT_PASS};
use crate::fsio::check_writable;
use crate::gate::bounds;
use crate::gate::plan::{prepare, Prepared};
use crate::gate::report::verdict_lines;
use crate::gate::run::{run_traced, TraceOut};
use crate::gate::watch::Watch;
use crate::receipt::junit;
use crate::soak::{RunRecord, Summary};
use crate::term::Bar;

/// The command line as given, for the summary (lossy: a non-UTF-8 path must not panic).
fn gate_flags() -> Vec<String> {
    std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Records a soak's error in its summary (`error`), so the summary on disk says why the
/// soak stopped; a summary that cannot be written either only warns (the error returned is
/// the one the user needs).
fn record_error(l: &mut Live, e: &anyhow::Error) {
    l.summary.error = Some(format!("{e:#}"));
    if let Err(w) = l.summary.write(&l.path) {
        errln!("ppn-gate: {w}");
    }
}

pub fn soak(a: &SoakArgs) -> Result<i32> {
    // First, so a signal from here on (a SIGTERM during the model load) is an interrupt.
    install_interrupt_handler();
    bounds::runs(a.runs)?;
    if a.runs == 0 {
        bail!("--runs 0: need at least one run");
    }
    if let Some(r) = &a.gate.receipt {
        bail!(
            "--receipt {}: soak writes run-NNN.json and summary.json under --out",
            r.display()
        );
    }
    if a.trace_failing && a.gate.trace.is_none() {
        bail!("--trace-failing: needs --trace FILE (where the failing runs' traces go)");
    }
    // A flag no run reads is refused before anything is written (no --out left behind).
    crate::gate::policy::check_flags(&a.gate.options(), crate::gate::policy::Reader::Gate)?;
    // Every output is checked before any work (the model load included): the directory, its
    // lock, the names written there, --junit and --trace.
    let dir = a.out.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from("receipts/runs").join(format!("soak-{t}-{}", std::process::id()))
    });
    let out_flag = crate::fsio::flag_name("--out", a.out.is_some());
    let (made, lock) = crate::fsio::take_out_dir(&out_flag, &dir)?;
    let summary_path = dir.join("summary.json");
    check_writable(&out_flag, &summary_path)?;
    check_writable(&out_flag, &dir.join(format!("run-{:03}.json", a.runs)))?;
    if let Some(j) = &a.junit {
        check_writable("--junit", j)?;
    }
    if let Some(t) = &a.gate.trace {
        check_writable("--trace", t)?;
        check_writable("--trace", &run_trace_path(t, a.runs))?;
    }
    // No output may overwrite an input or another output: the explicit paths, then the
    // families of names the runs write (run-NNN.json under --out, T-run-NNN.ext beside
    // --trace T), which the model, the tape or --junit must not be either.
    let mut outs = vec![
        ("--out", summary_path.as_path()),
        ("--out's lock", lock.path()),
    ];
    outs.extend(a.junit.as_deref().map(|j| ("--junit", j)));
    outs.extend(a.gate.trace.as_deref().map(|t| ("--trace", t)));
    let opts = a.gate.options();
    let ins = opts.input_files();
    crate::fsio::check_distinct(&outs, &ins)?;
    for (flag, p) in ins.iter().chain(outs[2..].iter()) {
        // The path or a directory above it (`--junit D/run-001.json/x.xml`).
        if let Some(what) = p
            .ancestors()
            .find_map(|q| soak_writes(&dir, a.gate.trace.as_deref(), a.runs, q))
        {
            bail!(
                "{flag} {}: is {what}, which the soak writes; give it another name",
                crate::fsio::shown_path(p)
            );
        }
    }
    // The summary exists from here on: an interrupt during the model load leaves one too.
    {
        let mut g = live();
        let l = g.insert(Live {
            summary: Summary::new(gate_flags(), a.runs),
            path: summary_path.clone(),
            _lock: lock,
        });
        l.summary.interrupted = INTERRUPTS.load(Ordering::SeqCst) > 0;
        l.summary.write(&l.path)?;
    }
    // The model load and the plan: a flag refused here (a fault no placement opens, a bad
    // split, a missing model) leaves nothing behind, as every refusal before any work does;
    // an interrupt during the load keeps the summary that says so.
    let (r, refused) = match prepare(&a.gate.options()) {
        Ok(p) => (soak_runs(a, &dir, &p), false),
        Err(e) => (Err(e), true),
    };
    let mut g = live();
    let Some(mut l) = g.take() else {
        // The second interrupt took it and is leaving the process.
        drop(g);
        loop {
            std::thread::park();
        }
    };
    drop(g);
    if refused && !l.summary.interrupted {
        // Dropping `l` removes the lock, then `made` removes --out where the soak made it.
        let _ = std::fs::remove_file(&l.path);
        return r;
    }
    made.keep();
    if let Err(e) = &r {
        record_error(&mut l, e);
    }
    // Dropping `l` removes the lock.
    r
}

/// The runs of a soak whose outputs are checked and whose summary is in `LIVE`.
fn soak_runs(a: &SoakArgs, dir: &Path, p: &Prepared) -> Result<i32> {
    remove_earlier_runs(dir, &a.gate.options().input_files())?;
    let mut report = junit::Suite::new("soak");
    super::gate::one_stage_note(p);
    // On a terminal from run 1's start; dropped (so cleared) on every return, an error's
    // included, and cleared by the interrupt handler before it prints.
    let bar = Bar::unless(a.gate.quiet, "soak", a.runs, "runs");
    for run in 1..=a.runs {
        if INTERRUPTS.load(Ordering::SeqCst) > 0 {
            break;
        }
        let path = dir.join(format!("run-{run:03}.json"));
        let trace_path = a.gate.trace.as_deref().map(|t| run_trace_path(t, run));
        let out = trace_path.as_deref().map(|path| TraceOut {
            path,
            only_if_fail: a.trace_failing,
        });
        let t0 = Instant::now();
        let fail_case = |report: &mut junit::Suite, e: &anyhow::Error| {
            // The runs before this one keep their testcases; this one is the error.
            report.cases.push(error_case(
                &format!("run-{run:03}"),
                "soak",
                t0.elapsed().as_secs_f64(),
                e,
            ));
            write_junit(a.junit.as_deref(), report, Some(e))
        };
        let mut watch = Watch::new(a.gate.quiet, false);
        let (r, traced) = match run_traced(p, out, &mut |e| watch.event(e)) {
            Ok(r) => r,
            Err(e) => {
                fail_case(&mut report, &e)?;
                return Err(e);
            }
        };
        let trace = trace_path
            .filter(|_| traced)
            .map(|t| t.display().to_string());
        if run == 1 {
            if let Some(note) = super::gate::verify_idle_note(&r) {
                errln!("{note}");
            }
        }
        let mut rec = RunRecord::from_receipt(run, &r, path.display().to_string());
        rec.trace = trace.clone();
        // The receipt, then the summary that counts it, under LIVE: a run is counted only
        // once its receipt is on disk, and a summary that cannot count it removes it again,
        // so summary.json and the run-NNN.json files always agree.
        let (passed, failed) = {
            let mut g = live();
            let l = g.as_mut().expect("the soak's summary is live");
            if let Err(e) = r.write(&path) {
                let e = anyhow::Error::from(e).context(format!("run {run:03}"));
                drop(g);
                fail_case(&mut report, &e)?;
                return Err(e);
            }
            let before = l.summary.clone();
            l.summary.push(rec);
            if let Err(e) = l.summary.write(&l.path) {
                l.summary = before;
                // Best effort; the freed space may let the error note be written.
                let _ = std::fs::remove_file(&path);
                let e = anyhow::Error::from(e).context(format!(
                    "run {run:03} (its receipt {} was removed: the summary could not count it)",
                    path.display()
                ));
                drop(g);
                fail_case(&mut report, &e)?;
                return Err(e);
            }
            (l.summary.passed, l.summary.failed())
        };
        let mut case = receipt_case(
            &format!("run-{run:03}"),
            "soak",
            t0.elapsed().as_secs_f64(),
            &r,
            &path,
        );
        if let Some(t) = &trace {
            case.properties.push(("trace".into(), t.clone()));
        }
        report.cases.push(case);
        // One line per run as it ends (also on a pipe: flushed at once), before the JUnit
        // file, whose write may fail: the run is done, its receipt and summary entry written.
        outln!("{}", run_line(run, a.runs, &r, t0.elapsed().as_secs_f64()));
        // Rewritten after every run, like the summary: an interrupted soak keeps it.
        write_junit(a.junit.as_deref(), &report, None)?;
        bar.set_message(format!("{passed} PASS, {failed} FAIL"));
        bar.inc();
    }
    // Off the screen before the summary prints.
    bar.finish();
    let summary = {
        let mut g = live();
        let l = g.as_mut().expect("the soak's summary is live");
        if INTERRUPTS.load(Ordering::SeqCst) > 0 {
            l.summary.interrupted = true;
            l.summary.write(&l.path)?;
        }
        l.summary.clone()
    };
    let summary_path = dir.join("summary.json");
    if summary.interrupted {
        // The runs never started are listed, so the XML does not read as a shorter soak
        // that passed.
        for run in summary.runs_done + 1..=a.runs {
            report.cases.push(junit::Case::new(
                format!("run-{run:03}"),
                "soak",
                junit::Outcome::Skipped {
                    message: format!("not run: interrupted after run {}", summary.runs_done),
                },
            ));
        }
        write_junit(a.junit.as_deref(), &report, None)?;
    }
    for l in summary.lines() {
        outln!("{l}");
    }
    outln!("summary: {}", summary_path.display());
    if let Some(j) = &a.junit {
        outln!("junit: {}", j.display());
    }
    let code = if summary.interrupted {
        interrupted_code(summary.failed())
    } else if summary.failed() > 0 {
        EXIT_FAIL
    } else if summary.runs_done < a.runs {
        EXIT_ERROR
    } else {
        EXIT_PASS
    };
    // Every run PASSed under a fault: the control proved nothing (the gate's own note).
    if let Some(note) = super::gate::fault_pass_note(&p.spec.faults, code) {
        errln!("{note}");
    }
    Ok(code)
}

/// A soak run's line: `run   2/3 PASS  0.52 s`, a FAIL with its FAIL verdict lines.
fn run_line(run: usize, runs: usize, r: &crate::receipt::Receipt, secs: f64) -> String {
    let w = runs.to_string().len().max(3);
    let mut l = format!("run {run:>w$}/{runs} {}  {secs:.2} s", r.verdict);
    if r.verdict != "PASS" {
        let fails: Vec<String> = verdict_lines(r)
            .into_iter()
            .filter(|l| l.contains("FAIL"))
            .collect();
        l.push_str(&format!(": {}", fails.join("; ")));
    }
    l
}

/// An --out given again: the run receipts (run-NNN.json) an earlier soak left there are
/// removed before run 1, so the folder holds this soak's runs only (a soak of 2 runs in the
/// --out of one of 5 kept run-003..005.json beside its own, from another configuration, where
/// anything reading run-*.json took them for this soak's). An input of this soak (a tape
/// named so) is never removed; the summary is this soak's already.
fn remove_earlier_runs(dir: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let is_run = name.to_str().and_then(run_digits).is_some();
        if !is_run || !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let p = e.path();
        if crate::fsio::check_distinct(&[("--out", p.as_path())], inputs).is_err() {
            continue;
        }
        std::fs::remove_file(&p)
            .with_context(|| format!("--out: removing an earlier soak's {}", p.display()))?;
        removed += 1;
    }
    if removed > 0 {
        errln!(
            "ppn-gate: --out {}: removed {removed} run receipt(s) an earlier soak left there",
            crate::fsio::shown_path(dir)
        );
    }
    Ok(())
}

/// The digits of a run receipt's name, `run-NNN.json` (three digits or more), if `name` is
/// one.
fn run_digits(name: &str) -> Option<&str> {
    name.strip_prefix("run-")
        .and_then(|n| n.strip_suffix(".json"))
        .filter(|d| d.len() >= 3 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// What `p` is among the files a soak of `runs` runs writes besides its explicit outputs, if
/// one: a run receipt `DIR/run-NNN.json` (NNN of 1..=runs, three digits or more), or with
/// --trace T a run's trace (`run_trace_path`, beside T; T itself is an explicit output).
fn soak_writes(dir: &Path, trace: Option<&Path>, runs: usize, p: &Path) -> Option<String> {
    let name = p.file_name()?.to_str()?;
    let run_of = |n: &str| {
        n.parse::<usize>()
            .ok()
            .filter(|&i| (1..=runs).contains(&i) && format!("{i:03}") == n)
    };
    let receipt = run_digits(name);
    if receipt.and_then(run_of).is_some() && crate::fsio::in_dir(dir, p) {
        return Some(format!(
            "run {} of the soak's receipts under --out",
            receipt?
        ));
    }
    let t = trace?;
    // A run's trace name for run i is run_trace_path(t, i): find i from the digits where the
    // first run's name has them.
    let first = run_trace_path(t, 1).file_name()?.to_str()?.to_string();
    let (head, tail) = first.split_once("-run-001")?;
    let digits = name
        .strip_prefix(head)?
        .strip_prefix("-run-")?
        .strip_suffix(tail)?;
    if run_of(digits).is_some() && crate::fsio::in_dir(crate::fsio::parent_dir(t), p) {
        return Some(format!("run {digits}'s trace of --trace {}", t.display()));
    }
    None
}

/// `soak --trace FILE`: run `run`'s trace, `<FILE's stem>-run-NNN<.FILE's extension>` beside
/// FILE (the same NNN as the run's receipt).
fn run_trace_path(file: &Path, run: usize) -> PathBuf {
    let stem = file
        .file_stem()
        .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
    let ext = file
        .extension()
        .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
    file.with_file_name(format!("{stem}-run-{run:03}{ext}"))
}
