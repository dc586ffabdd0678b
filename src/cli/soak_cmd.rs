//! soak, diff, battery and bench: the commands that run or compare many gates.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;

use super::gate::{
    check, check_on, open_backend, prepare, run_prepared, run_traced, verdict_lines, AnyBackend,
    TraceOut,
};
use super::{
    BatteryArgs, BenchArgs, Cli, SoakArgs, EXIT_ERROR, EXIT_FAIL, EXIT_INTERRUPTED, EXIT_PASS,
    EXIT_SKIPPED,
};
use crate::backend::Backend;
use crate::fsio::{check_writable, OutLock};
use crate::receipt::bench::{
    BenchConfig, BenchReceipt, BenchTimings, BusyOverlap, NStagePaths, PathRates, BENCH_SCHEMA,
};
use crate::receipt::diff::{diff as diff_receipts, diff_detail_ignoring, DiffOutcome};
use crate::receipt::junit;
use crate::receipt::Receipt;
use crate::runtime::placement::parse_list;
use crate::runtime::{Placement, Runtime, RuntimeConfig};
use crate::soak::{RunRecord, Summary};

static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

/// What the interrupt handler needs to leave a record that agrees with the disk: the soak's
/// summary as last written, where it goes, and the `--out` lock to release. The soak holds
/// this mutex while it writes a run's receipt and then the summary, so a signal never writes
/// a summary between the two.
struct Live {
    summary: Summary,
    path: PathBuf,
    /// Held for its drop, which removes the lock file.
    _lock: OutLock,
}

static LIVE: Mutex<Option<Live>> = Mutex::new(None);

/// `LIVE`, also after a panic elsewhere held it (the summary is still worth writing).
fn live() -> MutexGuard<'static, Option<Live>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The exit code of an interrupted soak or battery: a FAIL among the finished runs is
/// still proof of a bug (1); else 130, what a shell reports for Ctrl-C (one code for
/// SIGINT, SIGTERM and SIGHUP, which the handler cannot tell apart), distinct from a
/// harness error (2).
fn interrupted_code(failed: usize) -> i32 {
    if failed > 0 {
        EXIT_FAIL
    } else {
        EXIT_INTERRUPTED
    }
}

/// SIGINT, SIGTERM or SIGHUP (ctrlc's `termination` feature: what Slurm, Kubernetes and
/// systemd send before SIGKILL). First: the summary is rewritten at once with `interrupted:
/// true` (a SIGKILL after a grace period then still finds it), the run in progress
/// finishes, its receipt and the summary are written, and the soak stops. Second: the
/// summary (every finished run, `interrupted: true`) is written again, the `--out` lock
/// removed, and the process leaves at once. (A second install in one process is refused by
/// ctrlc and ignored here.)
fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        let n = INTERRUPTS.fetch_add(1, Ordering::SeqCst) + 1;
        let mut g = live();
        let mut failed = 0;
        if let Some(l) = g.as_mut() {
            l.summary.interrupted = true;
            failed = l.summary.failed();
            if let Err(e) = l.summary.write(&l.path) {
                eprintln!("\nppn-gate: {e}");
            }
        }
        if n >= 2 {
            eprintln!("\nppn-gate: second interrupt, leaving now (finished receipts and the summary are kept)");
            // Dropping the lock removes it; process::exit runs no destructors.
            drop(g.take());
            std::process::exit(interrupted_code(failed));
        }
        eprintln!("\nppn-gate: interrupt: finishing the run in progress, then writing the summary (interrupt again to leave now)");
    });
}

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
        eprintln!("ppn-gate: {w}");
    }
}

pub fn soak(a: &SoakArgs) -> Result<i32> {
    // First, so a signal from here on (a SIGTERM during the model load) is an interrupt.
    install_interrupt_handler();
    super::bounds::runs(a.runs)?;
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
    // Every output is checked before any work (the model load included): the directory, its
    // lock, the names written there, --junit and --trace.
    let dir = a.out.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from("receipts/runs").join(format!("soak-{t}-{}", std::process::id()))
    });
    let shown = crate::fsio::shown_path(&dir);
    if dir.as_os_str().as_encoded_bytes().contains(&0) {
        bail!("--out {shown}: the path contains a NUL byte");
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("--out {shown}"))?;
    let lock = OutLock::take("--out", &dir)?;
    let summary_path = dir.join("summary.json");
    check_writable("--out", &summary_path)?;
    check_writable("--out", &dir.join(format!("run-{:03}.json", a.runs)))?;
    if let Some(j) = &a.junit {
        check_writable("--junit", j)?;
    }
    if let Some(t) = &a.gate.trace {
        check_writable("--trace", t)?;
        check_writable("--trace", &run_trace_path(t, a.runs))?;
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
    let r = soak_runs(a, &dir);
    let mut g = live();
    let Some(mut l) = g.take() else {
        // The second interrupt took it and is leaving the process.
        drop(g);
        loop {
            std::thread::park();
        }
    };
    drop(g);
    if let Err(e) = &r {
        record_error(&mut l, e);
    }
    // Dropping `l` removes the lock.
    r
}

/// The runs of a soak whose outputs are checked and whose summary is in `LIVE`.
fn soak_runs(a: &SoakArgs, dir: &Path) -> Result<i32> {
    let mut report = junit::Suite::new("soak");
    let p = prepare(&a.gate)?;
    let bar = if a.gate.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(a.runs as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("soak {bar:30} {pos}/{len} runs, {msg} [{elapsed_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
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
        let (r, traced) = match run_traced(&p, out, &mut |_| {}) {
            Ok(r) => r,
            Err(e) => {
                fail_case(&mut report, &e)?;
                return Err(e);
            }
        };
        let trace = trace_path
            .filter(|_| traced)
            .map(|t| t.display().to_string());
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
        // Rewritten after every run, like the summary: an interrupted soak keeps it.
        write_junit(a.junit.as_deref(), &report, None)?;
        if r.verdict != "PASS" {
            bar.println(format!(
                "run {run:>3} FAIL: {}",
                verdict_lines(&r)
                    .into_iter()
                    .filter(|l| l.contains("FAIL"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        bar.set_message(format!("{passed} PASS, {failed} FAIL"));
        bar.inc(1);
    }
    bar.finish_and_clear();
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
    Ok(if summary.interrupted {
        interrupted_code(summary.failed())
    } else if summary.failed() > 0 {
        EXIT_FAIL
    } else if summary.runs_done < a.runs {
        EXIT_ERROR
    } else {
        EXIT_PASS
    })
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

/// `ppn-gate trace-check FILE --phase ARM` (see `backend::trace::check`).
pub fn trace_check(file: &Path, phase: &str) -> Result<i32> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("trace-check {}", file.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("trace-check {}: not valid JSON", file.display()))?;
    let r = crate::backend::trace::check::check(&doc, phase)
        .map_err(|e| anyhow!("trace-check {}: {e}", file.display()))?;
    for l in &r.lines {
        outln!("{l}");
    }
    Ok(if r.pass { EXIT_PASS } else { EXIT_FAIL })
}

/// The testcase of a gate that ran: PASS, or a `<failure>` whose message is the first FAIL
/// line (the first divergence, or a misplaced allocation) and whose body is every verdict
/// line; the receipt path as a property.
fn receipt_case(name: &str, class: &str, time_s: f64, r: &Receipt, path: &Path) -> junit::Case {
    let lines = verdict_lines(r);
    let outcome = if r.verdict == "PASS" {
        junit::Outcome::Pass
    } else {
        junit::Outcome::Failure {
            message: lines
                .iter()
                .find(|l| l.contains("FAIL"))
                .cloned()
                .unwrap_or_else(|| format!("verdict {}", r.verdict)),
            detail: lines.join("\n"),
        }
    };
    let mut c = junit::Case::new(name, class, outcome);
    c.time_s = time_s;
    c.properties
        .push(("receipt".into(), path.display().to_string()));
    c
}

fn error_case(name: &str, class: &str, time_s: f64, e: &anyhow::Error) -> junit::Case {
    let mut c = junit::Case::new(
        name,
        class,
        junit::Outcome::Error {
            message: format!("{e:#}"),
        },
    );
    c.time_s = time_s;
    c
}

/// Writes the report where `--junit` asks (nothing without it). `pending`: the error the
/// command is about to return; a failed write then only warns, so the error the user needs
/// is the one reported.
fn write_junit(
    path: Option<&Path>,
    report: &junit::Suite,
    pending: Option<&anyhow::Error>,
) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    match report.write(path) {
        Ok(()) => Ok(()),
        Err(e) if pending.is_some() => {
            eprintln!("ppn-gate: {e}");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

pub fn diff(a: &Path, b: &Path, json: bool, ignore: &[String]) -> Result<i32> {
    let ignore = ignore
        .iter()
        .map(|p| crate::receipt::diff::check_ignore(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!(e))?;
    if json {
        return diff_json(a, b, &ignore);
    }
    let ra = Receipt::load(a)?;
    let rb = Receipt::load(b)?;
    Ok(match diff_detail_ignoring(&ra, &rb, &ignore).outcome {
        DiffOutcome::Same => {
            let but = if ignore.is_empty() {
                String::new()
            } else {
                format!(" but {}", ignore.join(", "))
            };
            outln!(
                "same: {} and {} agree on every deterministic field{but}",
                a.display(),
                b.display()
            );
            EXIT_PASS
        }
        DiffOutcome::Different(lines) => {
            outln!("different: {} vs {}", a.display(), b.display());
            for l in lines {
                outln!("  {l}");
            }
            EXIT_FAIL
        }
        DiffOutcome::NotComparable(why) => {
            eprintln!(
                "ppn-gate: not comparable: {} vs {}: {why}",
                a.display(),
                b.display()
            );
            EXIT_ERROR
        }
    })
}

/// `diff --json`: a consumer reads stdout, so every outcome is a JSON document there,
/// including a receipt that cannot be read (verdict `not-comparable`, the reason naming the
/// file); the message also goes to stderr for a human.
fn diff_json(a: &Path, b: &Path, ignore: &[String]) -> Result<i32> {
    let (sa, sb) = (a.display().to_string(), b.display().to_string());
    let detail = match (Receipt::load(a), Receipt::load(b)) {
        (Ok(ra), Ok(rb)) => diff_detail_ignoring(&ra, &rb, ignore),
        (Err(e), _) | (_, Err(e)) => crate::receipt::diff::DiffDetail {
            outcome: DiffOutcome::NotComparable(e.to_string()),
            fields: Vec::new(),
            references: Vec::new(),
            arms: Vec::new(),
        },
    };
    let code = match &detail.outcome {
        DiffOutcome::Same => EXIT_PASS,
        DiffOutcome::Different(_) => EXIT_FAIL,
        DiffOutcome::NotComparable(why) => {
            eprintln!("ppn-gate: not comparable: {sa} vs {sb}: {why}");
            EXIT_ERROR
        }
    };
    let text = serde_json::to_string_pretty(&detail.to_json(&sa, &sb))?;
    outln!("{text}");
    Ok(code)
}

/// A battery or gate name: it names `<out>/<name>.json` (and the default `--out`), so a plain
/// file name short enough for the atomic write's temp name: the problem, or None.
fn name_problem(n: &str) -> Option<String> {
    if n.is_empty() {
        Some("is empty".into())
    } else if n.contains('\0') {
        Some("contains a NUL byte".into())
    } else if n.contains(['/', '\\']) {
        Some("contains a path separator ('/' or '\\'); a name must be a plain file name".into())
    } else if n.starts_with('.') {
        Some("starts with '.'; a name must be a plain file name".into())
    } else if n.chars().any(char::is_control) {
        Some("contains a control character".into())
    } else if n.len() > BATTERY_NAME_MAX {
        Some(format!(
            "is {} bytes long; a name may have at most {BATTERY_NAME_MAX} (it names <out>/<name>.json)",
            n.len()
        ))
    } else {
        None
    }
}

/// The longest battery or gate name: `<name>.json` and the atomic write's temp file beside
/// it (`.<name>.json.tmp.<pid>.<n>`) within NAME_MAX.
const BATTERY_NAME_MAX: usize = crate::fsio::NAME_MAX - 40;

/// A name for a message: `{:?}` (a NUL shows as `\0`), cut to 40 characters.
fn short(n: &str) -> String {
    if n.chars().count() <= 60 {
        return format!("{n:?}");
    }
    let head: String = n.chars().take(40).collect();
    format!("{head:?}... ({} bytes)", n.len())
}

/// A JSON value for a message, cut to 40 characters.
fn shown_value(v: &serde_json::Value) -> String {
    let t = v.to_string();
    if t.chars().count() <= 60 {
        return t;
    }
    let head: String = t.chars().take(40).collect();
    format!("{head}... ({} bytes)", t.len())
}

/// What a JSON value is, for a message.
fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value as V;
    match v {
        V::Null => "null",
        V::Bool(_) => "a boolean",
        V::Number(_) => "a number",
        V::String(_) => "a string",
        V::Array(_) => "an array",
        V::Object(_) => "an object",
    }
}

/// The shape of a battery file, field by field, so an error names the entry and the field
/// (`gates[2] "tp2".args[1]: a number where a string is needed`); serde's own errors name
/// neither. Duplicate keys, which a JSON value cannot show, are serde's to find after.
fn battery_shape(v: &serde_json::Value) -> std::result::Result<(), String> {
    use serde_json::Value as V;
    let V::Object(o) = v else {
        return Err(format!(
            "{} where an object {{\"name\": .., \"gates\": [..]}} is needed",
            json_kind(v)
        ));
    };
    if let Some(k) = o.keys().find(|k| !["name", "gates"].contains(&k.as_str())) {
        return Err(format!(
            "unknown field {} (a battery has name and gates)",
            short(k)
        ));
    }
    match o.get("name") {
        None => return Err("missing field name".into()),
        Some(V::String(_)) => {}
        Some(x) => return Err(format!("name: {} where a string is needed", json_kind(x))),
    }
    let gates = match o.get("gates") {
        None => return Err("missing field gates".into()),
        Some(V::Array(g)) => g,
        Some(x) => return Err(format!("gates: {} where an array is needed", json_kind(x))),
    };
    for (i, g) in gates.iter().enumerate() {
        let V::Object(go) = g else {
            return Err(format!(
                "gates[{i}]: {} where an object {{\"name\": .., \"args\": [..]}} is needed",
                json_kind(g)
            ));
        };
        let at = match go.get("name") {
            Some(V::String(n)) => format!("gates[{i}] {}", short(n)),
            _ => format!("gates[{i}]"),
        };
        if let Some(k) = go
            .keys()
            .find(|k| !["name", "args", "needs_devices"].contains(&k.as_str()))
        {
            return Err(format!(
                "{at}: unknown field {} (a gate has name, args and needs_devices)",
                short(k)
            ));
        }
        match go.get("name") {
            None => return Err(format!("{at}: missing field name")),
            Some(V::String(_)) => {}
            Some(x) => {
                return Err(format!(
                    "{at}.name: {} where a string is needed",
                    json_kind(x)
                ))
            }
        }
        match go.get("args") {
            None => return Err(format!("{at}: missing field args")),
            Some(V::Array(args)) => {
                if let Some((j, x)) = args.iter().enumerate().find(|(_, x)| !x.is_string()) {
                    return Err(format!(
                        "{at}.args[{j}]: {} where a string (one flag or value) is needed",
                        json_kind(x)
                    ));
                }
            }
            Some(x) => {
                return Err(format!(
                    "{at}.args: {} where an array of strings is needed",
                    json_kind(x)
                ))
            }
        }
        match go.get("needs_devices") {
            None | Some(V::Null) => {}
            Some(V::Number(n)) if n.as_u64().is_some_and(|k| usize::try_from(k).is_ok()) => {}
            Some(x) => {
                return Err(format!(
                    "{at}.needs_devices: {} where a device count (a whole number >= 0) is needed",
                    shown_value(x)
                ))
            }
        }
    }
    Ok(())
}

/// A battery file read and checked: its shape field by field, then the names (plain file
/// names, no gate's twice) and at least one gate. Every error names the file, the entry
/// and the field.
fn read_battery(file: &Path, text: &str) -> Result<BatteryFile> {
    let f = crate::fsio::shown_path(file);
    let v: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("battery {f}: not JSON"))?;
    battery_shape(&v).map_err(|e| anyhow!("battery {f}: {e}"))?;
    let bf: BatteryFile =
        serde_json::from_str(text).with_context(|| format!("battery {f}: not a battery file"))?;
    if let Some(why) = name_problem(&bf.name) {
        bail!("battery {f}: name {}: {why}", short(&bf.name));
    }
    if bf.gates.is_empty() {
        bail!("battery {f}: no gates");
    }
    for (i, g) in bf.gates.iter().enumerate() {
        if let Some(why) = name_problem(&g.name) {
            bail!("battery {f}: gates[{i}].name {}: {why}", short(&g.name));
        }
        if let Some(j) = bf.gates[..i].iter().position(|h| h.name == g.name) {
            bail!(
                "battery {f}: gates[{i}].name {}: the name of gates[{j}] too (their receipts would overwrite each other)",
                short(&g.name)
            );
        }
    }
    Ok(bf)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatteryFile {
    name: String,
    gates: Vec<BatteryGate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatteryGate {
    name: String,
    args: Vec<String>,
    /// Devices the gate's backend must have: on a machine with fewer (or, for `--backend
    /// cuda`, none) the gate is skipped with the reason, never run and never a PASS. Without
    /// it a missing device is an error, as on the command line.
    #[serde(default)]
    needs_devices: Option<usize>,
}

/// What the battery does with a gate, decided before the first gate runs.
enum Plan {
    /// Boxed: the parsed flags are large next to a skip reason.
    Run(Box<Cli>),
    Skip(String),
}

/// A gate's `needs_devices` against this machine: run it, or skip it saying why. Its flags
/// are checked like every other gate's when it runs here.
fn plan_gate(g: &BatteryGate, cli: Cli) -> Result<Plan> {
    let ctx = || format!("battery gate {:?}", g.name);
    let Some(k) = g.needs_devices else {
        check(&cli.gate).with_context(ctx)?;
        return Ok(Plan::Run(Box::new(cli)));
    };
    if k == 0 {
        bail!(
            "battery gate {:?}: needs_devices 0: a gate needs at least one device",
            g.name
        );
    }
    // The gate's own --devices must fit what it claims to need, or a machine with exactly
    // `k` devices would fail it as a bad flag instead of running it.
    if let Some(d) = &cli.gate.devices {
        let list = parse_list("--devices", d).with_context(ctx)?;
        if let Some(&bad) = list.iter().find(|&&x| x >= k) {
            bail!(
                "battery gate {:?}: needs_devices {k} but --devices {d} names device {bad}",
                g.name
            );
        }
    }
    let be = match open_backend(&cli.gate) {
        Ok(be) => be,
        // A backend that is absent here (no driver, no GPU) is what needs_devices is for;
        // any other backend error is a bad flag.
        Err(e) if cli.gate.backend == "cuda" => {
            return Ok(Plan::Skip(format!("needs {k} cuda device(s); {e:#}")))
        }
        Err(e) => return Err(e).with_context(ctx),
    };
    let have = be.device_count();
    if have < k {
        return Ok(Plan::Skip(format!(
            "needs {k} {} device(s), this machine has {have}",
            be.kind()
        )));
    }
    check_on(&cli.gate, be).with_context(ctx)?;
    Ok(Plan::Run(Box::new(cli)))
}

pub fn battery(a: &BatteryArgs) -> Result<i32> {
    install_interrupt_handler();
    if let Some(j) = &a.junit {
        check_writable("--junit", j)?;
    }
    let stem = a.file.file_stem().map(|s| s.to_string_lossy().into_owned());
    let mut report = junit::Suite::new(stem.unwrap_or_else(|| "battery".into()));
    let r = battery_run(a, &mut report);
    if let Err(e) = &r {
        // An error before any gate ran (the file, a gate's flags) has no gate testcase to
        // carry it: one testcase named after the battery does, so CI shows why.
        if !report.has_error() {
            let class = report.name.clone();
            report.cases.push(error_case("battery", &class, 0.0, e));
        }
    }
    write_junit(a.junit.as_deref(), &report, r.as_ref().err())?;
    if let (Some(j), Ok(_)) = (&a.junit, &r) {
        outln!("junit: {}", j.display());
    }
    r
}

fn battery_run(a: &BatteryArgs, report: &mut junit::Suite) -> Result<i32> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("battery {}", a.file.display()))?;
    // Every field, name and gate's flags are checked before the first gate runs (backend,
    // devices, arms, faults: everything but the model): a bad gate five must not cost the
    // four before it.
    let bf = read_battery(&a.file, &text)?;
    report.name = bf.name.clone();
    let mut gates: Vec<(&BatteryGate, Plan)> = Vec::with_capacity(bf.gates.len());
    for g in &bf.gates {
        let argv = std::iter::once("ppn-gate".to_string()).chain(g.args.iter().cloned());
        let mut cli = Cli::try_parse_from(argv)
            .map_err(|e| anyhow!("battery gate {:?}: {}", g.name, e.to_string().trim()))?;
        // A multi-process gate: `["launch", "--procs", "W", ...]` is the gate with --procs W.
        if let Some(super::Cmd::Launch(l)) = cli.cmd.take_if(|c| matches!(c, super::Cmd::Launch(_)))
        {
            if l.gate.procs.is_none() {
                bail!("battery gate {:?}: launch needs --procs W", g.name);
            }
            cli.gate = l.gate;
        }
        if cli.cmd.is_some() {
            bail!(
                "battery gate {:?}: args must be gate flags, not a subcommand",
                g.name
            );
        }
        if let Some(r) = &cli.gate.receipt {
            bail!(
                "battery gate {:?}: --receipt {}: the battery writes <out>/{}.json",
                g.name,
                r.display(),
                g.name
            );
        }
        gates.push((g, plan_gate(g, cli)?));
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("receipts/runs").join(format!("battery-{}", bf.name)));
    // The outputs, before the first gate: the directory and its lock, every receipt name,
    // every gate's --trace.
    let shown = crate::fsio::shown_path(&out);
    if out.as_os_str().as_encoded_bytes().contains(&0) {
        bail!("--out {shown}: the path contains a NUL byte");
    }
    std::fs::create_dir_all(&out).with_context(|| format!("--out {shown}"))?;
    let _lock = OutLock::take("--out", &out)?;
    for (g, plan) in &gates {
        check_writable("--out", &out.join(format!("{}.json", g.name)))
            .with_context(|| format!("battery gate {:?}", g.name))?;
        if let Plan::Run(cli) = plan {
            if let Some(t) = &cli.gate.trace {
                check_writable("--trace", t)
                    .with_context(|| format!("battery gate {:?}", g.name))?;
            }
        }
    }
    let mut worst = EXIT_PASS;
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (i, (g, plan)) in gates.iter().enumerate() {
        if INTERRUPTS.load(Ordering::SeqCst) > 0 {
            // The gates never started are listed, so the XML does not read as a shorter
            // battery that passed.
            for (h, _) in &gates[i..] {
                report.cases.push(junit::Case::new(
                    &h.name,
                    &bf.name,
                    junit::Outcome::Skipped {
                        message: format!("not run: interrupted after {i} gate(s)"),
                    },
                ));
            }
            outln!(
                "battery {}: {passed} PASS, {failed} FAIL, {skipped} SKIP (interrupted: {i} of {} gates done)",
                bf.name,
                gates.len()
            );
            outln!("receipts: {}", out.display());
            return Ok(interrupted_code(failed));
        }
        let cli = match plan {
            Plan::Run(cli) => cli.as_ref(),
            Plan::Skip(why) => {
                outln!("{:<28} SKIP  {why}", g.name);
                report.cases.push(junit::Case::new(
                    &g.name,
                    &bf.name,
                    junit::Outcome::Skipped {
                        message: why.clone(),
                    },
                ));
                skipped += 1;
                continue;
            }
        };
        let t0 = Instant::now();
        match run_battery_gate(a, g, cli, &out, &mut worst) {
            Ok((mut case, r)) => {
                case.time_s = t0.elapsed().as_secs_f64();
                case.classname = bf.name.clone();
                if r.verdict == "PASS" {
                    passed += 1;
                } else {
                    failed += 1;
                    worst = worst.max(EXIT_FAIL);
                }
                report.cases.push(case);
            }
            Err(e) => {
                // The battery stops at a harness error, as it always has; the gates after
                // this one are listed as not run rather than left out.
                let secs = t0.elapsed().as_secs_f64();
                report.cases.push(error_case(&g.name, &bf.name, secs, &e));
                for (h, _) in &gates[i + 1..] {
                    report.cases.push(junit::Case::new(
                        &h.name,
                        &bf.name,
                        junit::Outcome::Skipped {
                            message: format!(
                                "not run: the battery stopped at gate {:?}'s error",
                                g.name
                            ),
                        },
                    ));
                }
                return Err(e);
            }
        }
    }
    outln!(
        "battery {}: {passed} PASS, {failed} FAIL, {skipped} SKIP (of {} gates)",
        bf.name,
        gates.len()
    );
    outln!("receipts: {}", out.display());
    // A skipped gate proved nothing here: a battery that skipped any is not a pass.
    if worst == EXIT_PASS && skipped > 0 {
        worst = EXIT_SKIPPED;
    }
    Ok(worst)
}

/// Runs one battery gate, prints its lines, writes its receipt and diffs it against the
/// golden: its testcase (a golden difference is a `<failure>`, a golden that is not
/// comparable an `<error>`) and its receipt. `worst` takes the golden's exit code.
fn run_battery_gate(
    a: &BatteryArgs,
    g: &BatteryGate,
    cli: &Cli,
    out: &Path,
    worst: &mut i32,
) -> Result<(junit::Case, Receipt)> {
    let t0 = Instant::now();
    let p = prepare(&cli.gate).with_context(|| format!("battery gate {:?}", g.name))?;
    let r = run_prepared(&p, &mut |_| {}).with_context(|| format!("battery gate {:?}", g.name))?;
    let path = out.join(format!("{}.json", g.name));
    r.write(&path)?;
    outln!(
        "{:<28} {}  ({:.1} s)",
        g.name,
        r.verdict,
        t0.elapsed().as_secs_f64()
    );
    for l in verdict_lines(&r) {
        outln!("    {l}");
    }
    let mut case = receipt_case(&g.name, "", 0.0, &r, &path);
    let Some(gd) = &a.golden else {
        return Ok((case, r));
    };
    let gp = gd.join(format!("{}.json", g.name));
    case.properties
        .push(("golden".into(), gp.display().to_string()));
    let golden =
        Receipt::load(&gp).with_context(|| format!("golden receipt for gate {:?}", g.name))?;
    match diff_receipts(&golden, &r) {
        DiffOutcome::Same => outln!("    golden: same as {}", gp.display()),
        DiffOutcome::Different(lines) => {
            outln!("    golden: DIFFERENT from {}", gp.display());
            for l in &lines {
                outln!("      {l}");
            }
            *worst = (*worst).max(EXIT_FAIL);
            let head = format!("golden: DIFFERENT from {}", gp.display());
            // A gate that FAILed keeps its divergence as the message; the golden lines join
            // the body either way.
            case.outcome = match case.outcome {
                junit::Outcome::Failure { message, detail } => junit::Outcome::Failure {
                    message,
                    detail: format!("{detail}\n{head}\n{}", lines.join("\n")),
                },
                _ => junit::Outcome::Failure {
                    message: format!("{head}: {}", lines.first().map_or("", |l| l.as_str())),
                    detail: lines.join("\n"),
                },
            };
        }
        DiffOutcome::NotComparable(why) => {
            outln!("    golden: NOT COMPARABLE with {}: {why}", gp.display());
            *worst = EXIT_ERROR;
            case.outcome = junit::Outcome::Error {
                message: format!("golden: NOT COMPARABLE with {}: {why}", gp.display()),
            };
        }
    }
    Ok((case, r))
}

/// Decode throughput of the single-stage reference path and the N-stage eager, pipelined
/// and batched paths, measured in one run so their ratios compare.
pub fn bench(a: &BenchArgs) -> Result<i32> {
    if a.steps == 0 {
        bail!("--steps 0: need at least one step");
    }
    // bench times the fault-free runtime on seeded tokens: flags it would otherwise ignore
    // are refused, not dropped.
    if crate::dist::world_of(&a.gate).is_some() {
        bail!("--procs/--world: bench times the runtime of one process; a multi-process bench is not built yet (the gate, soak and battery run multi-process)");
    }
    if let Some(t) = &a.gate.tape {
        bail!(
            "--tape {}: bench decodes seeded tokens, not a tape",
            t.display()
        );
    }
    if let Some(f) = a.gate.faults.first() {
        bail!("--fault {f}: bench measures the fault-free runtime");
    }
    if let Some(r) = &a.gate.receipt {
        check_writable("--receipt", r)?;
    }
    if let Some(t) = &a.gate.trace {
        check_writable("--trace", t)?;
    }
    let p = prepare(&a.gate)?;
    // bench sizes its runtimes by --steps (and --batch rows), not the gate's positions.
    super::bounds::bench_steps(a.steps, &p.model.cfg)?;
    let mut sized = p.spec.clone();
    sized.tape = None;
    (sized.prompt_len, sized.gen_len) = (a.steps, 0);
    sized.arms = vec![crate::arms::ArmKind::Eager, crate::arms::ArmKind::Batched];
    super::bounds::hold_host(
        &sized.footprint(&p.model.cfg, matches!(p.be, AnyBackend::Cuda(_)), 1),
        super::bounds::host_available(),
        &format!("--steps {}: ", a.steps),
    )?;
    let modules0 = p.be.module_stats();
    let mut r = match &p.be {
        AnyBackend::Cpu(be) => bench_on(be.clone(), &p, a.steps)?,
        AnyBackend::Cuda(be) => bench_on(be.clone(), &p, a.steps)?,
    };
    r.modules =
        p.be.module_stats()
            .zip(modules0)
            .map(|(now, before)| now.since(&before));
    print_bench(&r);
    if let Some(path) = &a.gate.receipt {
        crate::receipt::write_atomic(path, r.to_json().as_bytes())
            .with_context(|| format!("--receipt {}", path.display()))?;
        outln!("receipt: {}", path.display());
    }
    if let Some(t) = &a.gate.trace {
        let tr =
            p.be.trace()?
                .ok_or_else(|| anyhow!("bench: no trace was kept"))?;
        crate::receipt::write_atomic(t, tr.to_json().as_bytes())
            .with_context(|| format!("--trace {}", t.display()))?;
        outln!("trace: {} (the traced walks)", t.display());
    }
    Ok(EXIT_PASS)
}

fn bench_on<B: Backend>(
    be: Arc<B>,
    p: &super::gate::Prepared,
    steps: usize,
) -> Result<BenchReceipt> {
    let m = p.model.clone();
    let spec = &p.spec;
    let ctx = steps;
    let tokens = crate::arms::seeded_prompt(&m, spec.seed, 0, steps);
    let single = Placement::single(m.cfg.n_layers, spec.placement.devices[0]);
    let mk = |pl: Placement, rows: usize| {
        let t0 = Instant::now();
        let rt = Runtime::build(
            be.clone(),
            m.clone(),
            RuntimeConfig {
                placement: pl,
                max_rows: rows,
                max_seqs: rows,
                ctx,
                window: spec.window,
                faults: vec![],
                dist: None,
            },
        )?;
        Ok::<_, anyhow::Error>((rt, t0.elapsed().as_secs_f64() * 1e3))
    };
    let time_eager_split = |rt: &Runtime<B>| walk_eager(rt, &tokens);
    let time_eager = |rt: &Runtime<B>| -> Result<f64> { Ok(time_eager_split(rt)?.0) };
    let time_pipe = |rt: &Runtime<B>, rows: usize| walk_windowed(rt, &tokens, rows, spec.window);
    let (rt1, reference_build_ms) = mk(single, 1)?;
    time_eager(&rt1)?; // warm-up (page cache, thread pools)
    let l0 = be.launches();
    let (t_ref, t_enq) = time_eager_split(&rt1)?;
    let launches_per_tok = (be.launches() - l0) as f64 / steps as f64;
    drop(rt1);
    let bw = be.bandwidth_gbs(spec.placement.devices[0])?;
    let rows = spec.batch;
    let (rtn, build_ms) = mk(spec.placement.clone(), rows)?;
    // --arms picks the paths measured after eager (the base of every ratio, always run).
    let want = |k: crate::arms::ArmKind| spec.arms.contains(&k);
    // Warm-up of each measured shape (a few steps, untimed): a step shape's first walk
    // captures its CUDA graphs (`--graphs on`), which a timed walk should not include.
    let warm = &tokens[..tokens.len().min(2 * spec.window.max(1))];
    walk_eager(&rtn, warm)?;
    if want(crate::arms::ArmKind::Pipelined) {
        walk_windowed(&rtn, warm, 1, spec.window)?;
    }
    if want(crate::arms::ArmKind::Batched) {
        walk_windowed(&rtn, warm, rows, spec.window)?;
    }
    let t_eager = time_eager(&rtn)?;
    let t_pipe = want(crate::arms::ArmKind::Pipelined)
        .then(|| time_pipe(&rtn, 1))
        .transpose()?;
    let t_batch = want(crate::arms::ArmKind::Batched)
        .then(|| time_pipe(&rtn, rows))
        .transpose()?;
    drop(rtn);
    let prefill = if want(crate::arms::ArmKind::Prime) {
        bench_prefill(&be, p)?
    } else {
        Vec::new()
    };
    let tps = |t: f64, r: usize| (steps * r) as f64 / t;
    // The tracing cost and each path's busy overlap: one more walk of each path, on a fresh
    // runtime whose streams are traced (the timed walks above stay untraced). Each walk's
    // wall time includes tracing's host work (clock reads, or timing events recorded);
    // reading CUDA's timing events happens after each walk (at the next phase), outside it.
    let traced = match be.start_trace() {
        None => None,
        Some(_) => {
            be.trace_phase("runtime");
            let (rtt, _) = mk(spec.placement.clone(), rows)?;
            be.trace_phase("eager");
            let e = time_eager(&rtt)?;
            let walk = |k: crate::arms::ArmKind, rows: usize| -> Result<Option<f64>> {
                if !want(k) {
                    return Ok(None);
                }
                be.trace_phase(k.name());
                Ok(Some(time_pipe(&rtt, rows)?))
            };
            let pi = walk(crate::arms::ArmKind::Pipelined, 1)?;
            let ba = walk(crate::arms::ArmKind::Batched, rows)?;
            let tr = be
                .trace()?
                .ok_or_else(|| anyhow!("bench: the traced backend kept no trace"))?;
            let ov = |k: crate::arms::ArmKind, t: Option<f64>| {
                t.map(|_| tr.overlap(k.name()).unwrap_or(0.0))
            };
            Some((
                BusyOverlap {
                    eager: tr.overlap("eager").unwrap_or(0.0),
                    pipelined: ov(crate::arms::ArmKind::Pipelined, pi),
                    batched: ov(crate::arms::ArmKind::Batched, ba),
                },
                NStagePaths {
                    eager: tps(e, 1),
                    pipelined: pi.map(|t| tps(t, 1)),
                    batched: ba.map(|t| tps(t, rows)),
                },
            ))
        }
    };
    let pl = &spec.placement;
    Ok(BenchReceipt {
        schema: BENCH_SCHEMA.into(),
        tool: super::gate::tool_info(),
        unix_time_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty()),
        backend: super::gate::backend_info(p),
        model: p.model_info.clone(),
        config: BenchConfig {
            placement: pl.to_flags(),
            stages: pl.n_stages(),
            devices: pl.devices.clone(),
            steps,
            window: spec.window,
            batch: rows,
            arms: spec.arms.iter().map(|a| a.name().to_string()).collect(),
        },
        bandwidth_gbs: bw,
        floor_tok_s: bw.map(|gbs| gbs * 1e9 / m.weight_bytes as f64),
        launches_per_token: (launches_per_tok > 0.0).then_some(launches_per_tok),
        host_enqueue_us_per_token: 1e6 * t_enq / steps as f64,
        tok_s: PathRates {
            reference: tps(t_ref, 1),
            eager: tps(t_eager, 1),
            pipelined: t_pipe.map(|t| tps(t, 1)),
            batched: t_batch.map(|t| tps(t, rows)),
        },
        timings: BenchTimings {
            load_ms: p.load_ms,
            reference_build_ms,
            build_ms,
        },
        busy_overlap: traced.as_ref().map(|t| t.0.clone()),
        traced_tok_s: traced.map(|t| t.1),
        modules: None,
        prefill,
    })
}

/// `bench --arms prime`: prefill tok/s of a prime of the `--prompt-len` seeded prompt at
/// every chunk size, on one stage (the placement's first device) and on the placement.
/// Each figure is the better of two timed primes after a warm-up one.
fn bench_prefill<B: Backend>(
    be: &Arc<B>,
    p: &super::gate::Prepared,
) -> Result<Vec<crate::receipt::bench::PrefillRate>> {
    let (m, spec) = (&p.model, &p.spec);
    let n = spec.prime_len();
    let tokens = crate::arms::seeded_prompt(m, spec.seed, 0, n);
    let chunks = spec.prime_chunks();
    let max_c = chunks.iter().copied().max().unwrap_or(1);
    let single = Placement::single(m.cfg.n_layers, spec.placement.devices[0]);
    let mut rates: Vec<crate::receipt::bench::PrefillRate> = chunks
        .iter()
        .map(|&c| crate::receipt::bench::PrefillRate {
            chunk: c,
            prompt: n,
            one_stage_tok_s: 0.0,
            staged_tok_s: 0.0,
            last_one_stage_tok_s: 0.0,
            last_staged_tok_s: 0.0,
        })
        .collect();
    for (k, pl) in [single, spec.placement.clone()].into_iter().enumerate() {
        let rt = Runtime::build(
            be.clone(),
            m.clone(),
            RuntimeConfig {
                placement: pl,
                max_rows: max_c,
                max_seqs: 1,
                ctx: n,
                window: spec.window,
                faults: vec![],
                dist: None,
            },
        )?;
        for r in rates.iter_mut() {
            for last in [false, true] {
                let walk = || walk_prime(&rt, &tokens, r.chunk, spec.window, last);
                walk()?;
                let v = n as f64 / walk()?.min(walk()?);
                match (k, last) {
                    (0, false) => r.one_stage_tok_s = v,
                    (0, true) => r.last_one_stage_tok_s = v,
                    (_, false) => r.staged_tok_s = v,
                    (_, true) => r.last_staged_tok_s = v,
                }
            }
        }
    }
    Ok(rates)
}

/// Wall time of one prime of `tokens` in chunks of `c` with `window` chunks in flight
/// (`last`: each chunk's head on its last position only).
fn walk_prime<B: Backend>(
    rt: &Runtime<B>,
    tokens: &[u32],
    c: usize,
    window: usize,
    last: bool,
) -> Result<f64> {
    let mut w = rt.walk()?;
    w.reset_caches()?;
    let t0 = Instant::now();
    let mut inflight = std::collections::VecDeque::new();
    for a in (0..tokens.len()).step_by(c) {
        if inflight.len() >= window.max(1) {
            w.read_deferred(inflight.pop_front().expect("non-empty"))?;
        }
        let b = (a + c).min(tokens.len());
        let pd = if last {
            w.issue_chunk_last(&tokens[a..b], a)?
        } else {
            w.issue_chunk(&tokens[a..b], a)?
        };
        inflight.push_back(pd);
    }
    while let Some(pd) = inflight.pop_front() {
        w.read_deferred(pd)?;
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Wall time of an eager walk over `tokens`, and the part of it the host spent enqueueing
/// (issue).
fn walk_eager<B: Backend>(rt: &Runtime<B>, tokens: &[u32]) -> Result<(f64, f64)> {
    let mut w = rt.walk()?;
    let mut enq = 0.0;
    let t0 = Instant::now();
    for (i, &t) in tokens.iter().enumerate() {
        let ti = Instant::now();
        let pd = w.issue(&[t], &[i])?;
        enq += ti.elapsed().as_secs_f64();
        w.read_eager(pd)?;
    }
    Ok((t0.elapsed().as_secs_f64(), enq))
}

/// Wall time of a walk over `tokens` with `window` steps in flight, `rows` rows a step.
fn walk_windowed<B: Backend>(
    rt: &Runtime<B>,
    tokens: &[u32],
    rows: usize,
    window: usize,
) -> Result<f64> {
    let mut w = rt.walk()?;
    let t0 = Instant::now();
    crate::arms::drive_windowed(
        &mut w,
        tokens.len(),
        window,
        |i, t| t.resize(rows, tokens[i]),
        |_, _| Ok::<(), anyhow::Error>(()),
        |i, e| anyhow!("bench step {i}: {e}"),
    )?;
    Ok(t0.elapsed().as_secs_f64())
}

fn print_bench(r: &BenchReceipt) {
    let c = &r.config;
    let t = &r.tok_s;
    outln!(
        "bench: {} backend, model {} ({} weight bytes), {}, window {}, {} steps",
        r.backend.kind,
        r.model.file,
        r.model.weight_bytes,
        c.placement,
        c.window,
        c.steps
    );
    match (r.bandwidth_gbs, r.floor_tok_s) {
        (Some(gbs), Some(floor)) => outln!(
            "  device bandwidth {gbs:.0} GB/s (D2D copy, read+write) -> floor {:.1} us/token, max {floor:.0} tok/s (weight bytes / bandwidth)",
            1e6 / floor
        ),
        _ => outln!("  device bandwidth n/a -> floor n/a"),
    }
    let launches = r
        .launches_per_token
        .map_or("n/a".to_string(), |l| format!("{l:.1}"));
    outln!(
        "  kernel launches per token (reference) {launches}; host enqueue {:.1} us/token of {:.1}",
        r.host_enqueue_us_per_token,
        1e6 / t.reference
    );
    let modules = r.modules.as_ref().map_or(String::new(), |m| {
        format!(
            " (kernel modules: {} compiled, {} from the cache, {:.0} ms)",
            m.misses + m.corrupt,
            m.hits,
            m.ms
        )
    });
    outln!(
        "  build: reference runtime {:.0} ms, {}-stage runtime {:.0} ms{modules}",
        r.timings.reference_build_ms,
        c.stages,
        r.timings.build_ms
    );
    if let Some(o) = &r.busy_overlap {
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0));
        outln!(
            "  wall time with 2+ stages busy (one more, traced walk): eager {}, pipelined {}, batched {}",
            pct(Some(o.eager)),
            pct(o.pipelined),
            pct(o.batched)
        );
    }
    if let Some(tt) = &r.traced_tok_s {
        let rel = |v: Option<f64>, base: Option<f64>| match (v, base) {
            (Some(v), Some(b)) => format!("{v:.1} tok/s ({:.0}% of untraced)", 100.0 * v / b),
            _ => "-".to_string(),
        };
        outln!(
            "  tracing cost (the traced walks): eager {}, pipelined {}, batched {}",
            rel(Some(tt.eager), Some(t.eager)),
            rel(tt.pipelined, t.pipelined),
            rel(tt.batched, t.batched)
        );
    }
    outln!("  reference (1 stage, eager)   {:>9.1} tok/s", t.reference);
    outln!(
        "  eager     ({} stages)         {:>9.1} tok/s  ({:.2}x reference)",
        c.stages,
        t.eager,
        t.eager / t.reference
    );
    if let Some(v) = t.pipelined {
        outln!(
            "  pipelined (window {})         {:>9.1} tok/s  ({:.2}x eager)",
            c.window,
            v,
            v / t.eager
        );
    }
    if let Some(v) = t.batched {
        outln!(
            "  batched   (B={}, aggregate)  {:>9.1} tok/s  ({:.2}x eager)",
            c.batch,
            v,
            v / t.eager
        );
    }
    for f in &r.prefill {
        outln!(
            "  prime     (C={}, {} tokens)  {:>9.1} tok/s one stage, {:>9.1} tok/s {} stages (every position's logits)",
            f.chunk,
            f.prompt,
            f.one_stage_tok_s,
            f.staged_tok_s,
            c.stages
        );
        outln!(
            "  prefill   (C={}, {} tokens)  {:>9.1} tok/s one stage, {:>9.1} tok/s {} stages (last position's logits)",
            f.chunk,
            f.prompt,
            f.last_one_stage_tok_s,
            f.last_staged_tok_s,
            c.stages
        );
    }
}

#[cfg(test)]
mod battery_file_tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use serde_json::{json, Value};

    /// A hostile value for a field: every JSON type, and strings a file name cannot be.
    fn hostile(rng: &mut rand_chacha::ChaCha8Rng) -> Value {
        match rng.gen_range(0..12) {
            0 => Value::Null,
            1 => json!(rng.gen::<bool>()),
            2 => json!(rng.gen::<i64>()),
            3 => json!(-1),
            4 => json!(rng.gen::<f64>() * 1e6),
            5 => json!("x".repeat(rng.gen_range(190..6000))),
            6 => json!(format!("a{}b", '\0')),
            7 => json!("dir/name"),
            8 => json!(".hidden"),
            9 => json!(""),
            10 => json!([1, "two", null]),
            _ => json!({"k": "v"}),
        }
    }

    /// Random batteries, each one valid file with one hostile mutation (a field replaced,
    /// removed, an unknown key, a duplicate name): never a panic, and every refusal names
    /// the file and, for a gate's fault, the entry (`gates[i]`) and the field. A mutation
    /// that leaves a valid file is read as one.
    #[test]
    fn hostile_battery_files_are_refused_naming_entry_and_field() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(25);
        let file = Path::new("b.json");
        let (mut refused, mut read) = (0, 0);
        for case in 0..3000 {
            let n = rng.gen_range(1..4);
            let mut v = json!({"name": "t", "gates": (0..n).map(|i| json!({
                "name": format!("g{i}"), "args": ["--stages", "2"], "needs_devices": 1
            })).collect::<Vec<_>>()});
            let i = rng.gen_range(0..n);
            let field = ["name", "args", "needs_devices"][rng.gen_range(0..3)];
            // (the substring the error must hold, or None where the file stays valid)
            let want: Option<String> = match rng.gen_range(0..7) {
                0 => {
                    let h = hostile(&mut rng);
                    let valid = match (field, &h) {
                        ("name", Value::String(s)) => name_problem(s).is_none(),
                        ("needs_devices", Value::Null) => true,
                        ("needs_devices", Value::Number(x)) => x.as_u64().is_some(),
                        _ => false,
                    };
                    v["gates"][i][field] = h;
                    (!valid).then(|| format!("gates[{i}]"))
                }
                1 => {
                    v["gates"][i].as_object_mut().unwrap().remove(field);
                    (field != "needs_devices").then(|| format!("missing field {field}"))
                }
                2 => {
                    v["gates"][i]["nedds_devices"] = json!(2);
                    Some(format!(
                        "gates[{i}] \"g{i}\": unknown field \"nedds_devices\""
                    ))
                }
                3 if n > 1 => {
                    v["gates"][n - 1]["name"] = json!("g0");
                    Some(format!(
                        "gates[{}].name \"g0\": the name of gates[0] too",
                        n - 1
                    ))
                }
                4 => {
                    v["gates"][i]["args"][rng.gen_range(0..2)] = hostile(&mut rng);
                    let bad = v["gates"][i]["args"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|a| !a.is_string());
                    bad.then(|| format!("gates[{i}] \"g{i}\".args["))
                }
                5 => {
                    let h = hostile(&mut rng);
                    let valid = matches!(&h, Value::String(s) if name_problem(s).is_none());
                    v["name"] = h;
                    (!valid).then(|| "name".to_string())
                }
                _ => {
                    v["gates"] = hostile(&mut rng);
                    Some("gates".to_string())
                }
            };
            let text = serde_json::to_string(&v).unwrap();
            match (read_battery(file, &text), &want) {
                (Err(e), Some(w)) => {
                    let m = format!("{e:#}");
                    assert!(m.starts_with("battery b.json: "), "case {case}: {m}");
                    assert!(
                        m.contains(w.as_str()),
                        "case {case}: want {w:?} in {m}\n{text:.300}"
                    );
                    assert!(m.len() < 400, "case {case}: a message of {} bytes", m.len());
                    refused += 1;
                }
                (Ok(bf), None) => {
                    assert_eq!(bf.gates.len(), n, "case {case}");
                    read += 1;
                }
                (Err(e), None) => panic!("case {case}: a valid file refused: {e:#}\n{text:.300}"),
                (Ok(_), Some(w)) => panic!("case {case}: accepted, want {w:?}\n{text:.300}"),
            }
        }
        // Both outcomes were exercised, the refusals far more.
        assert!(
            refused > 2000 && read > 50,
            "{refused} refused, {read} read"
        );
        eprintln!("battery files: {refused} refused naming the field, {read} read");
    }

    /// Duplicate JSON keys, which a JSON value cannot show, are refused by serde naming the
    /// field; bytes that are not JSON name the file.
    #[test]
    fn duplicate_keys_and_non_json_are_refused() {
        let f = Path::new("b.json");
        let e = read_battery(
            f,
            r#"{"name":"t","gates":[{"name":"a","name":"b","args":[]}]}"#,
        )
        .err()
        .unwrap();
        assert!(format!("{e:#}").contains("duplicate field `name`"), "{e:#}");
        for t in [
            "",
            "{",
            "\u{0}",
            "[]",
            "null",
            "{\"name\":\"t\",\"gates\":[]}",
        ] {
            let e = read_battery(f, t).err().unwrap();
            assert!(
                format!("{e:#}").starts_with("battery b.json: "),
                "{t:?}: {e:#}"
            );
        }
    }
}
