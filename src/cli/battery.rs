//! `ppn-gate battery`: a JSON list of gates, each checked before the first runs, run in
//! order, optionally diffed against goldens.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use serde::Deserialize;

use super::shared::{
    error_case, install_interrupt_handler, interrupted_code, receipt_case, write_junit, INTERRUPTS,
};
use super::{BatteryArgs, Cli};
use crate::exit::{EXIT_ERROR, EXIT_FAIL, EXIT_PASS, EXIT_SKIPPED};
use crate::fsio::check_writable;
use crate::gate::plan::{check, check_on, open_backend, prepare};
use crate::gate::report::verdict_lines;
use crate::gate::run::run_prepared;
use crate::gate::watch::Watch;
use crate::receipt::diff::{diff as diff_receipts, DiffOutcome};
use crate::receipt::junit;
use crate::receipt::Receipt;
use crate::runtime::placement::parse_list;
use crate::term::Bar;

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

/// A JSON value for a message, as the file `text` wrote it at `pointer` (a number serde_json
/// reads as an f64 keeps its literal: `jsonin::as_written`), cut to 40 characters.
fn shown_value(text: &str, pointer: &str, v: &serde_json::Value) -> String {
    let t = crate::jsonin::as_written(text, pointer, v);
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
/// `text`: the file, whose literals a message echoes.
fn battery_shape(v: &serde_json::Value, text: &str) -> std::result::Result<(), String> {
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
            Some(V::Number(n))
                if n.as_u64()
                    .is_some_and(|k| k >= 1 && usize::try_from(k).is_ok()) => {}
            // 0 included: a gate runs on at least one device (leave the field out, or null,
            // for a gate that runs on any machine).
            Some(x) => {
                return Err(format!(
                    "{at}.needs_devices: {} where a device count (a whole number >= 1) is needed",
                    shown_value(text, &format!("/gates/{i}/needs_devices"), x)
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
    battery_shape(&v, text).map_err(|e| anyhow!("battery {f}: {e}"))?;
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

/// The directory a battery file's relative paths resolve against: the file's own.
fn battery_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `base` joined with a relative `p`, lexically without `.` and with each `..` taking back
/// the name before it (`gates/../models/m.gguf` is `models/m.gguf`, as the receipt shows
/// it); an absolute `p` as it is.
fn beside(base: &Path, p: &Path) -> PathBuf {
    use std::path::Component as C;
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let mut out: Vec<C> = Vec::new();
    for c in base.components().chain(p.components()) {
        match c {
            C::CurDir => {}
            C::ParentDir if matches!(out.last(), Some(C::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// A battery entry's path flags (--model, --tape, --trace, --cache-dir, --nccl-lib)
/// resolved against the battery file's directory.
fn resolve_paths(g: &mut super::GateArgs, base: &Path) {
    for p in [
        &mut g.model,
        &mut g.tape,
        &mut g.trace,
        &mut g.cache_dir,
        &mut g.nccl_lib,
    ]
    .into_iter()
    .flatten()
    {
        *p = beside(base, p);
    }
}

/// An entry's input files (--model, --tape) must be files, checked before the first gate
/// runs: a wrong path is named with the directory it resolved against.
fn input_problem(g: &super::GateArgs, base: &Path) -> Result<()> {
    for (flag, p) in [("--model", &g.model), ("--tape", &g.tape)] {
        if let Some(p) = p {
            match std::fs::metadata(p) {
                Ok(md) if md.is_file() => {}
                // A FIFO, a directory or a device is there: say what it is, not "no such file".
                Ok(md) => bail!(
                    "{flag} {}: is {}, not a regular file",
                    crate::fsio::shown_path(p),
                    crate::fsio::file_kind(&md)
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                    "{flag} {}: no such file (a battery's relative paths resolve against the battery file's directory, {})",
                    crate::fsio::shown_path(p),
                    crate::fsio::shown_path(base)
                ),
                // A symbolic link loop, no permission: the system's own words.
                Err(e) => bail!("{flag} {}: {e}", crate::fsio::shown_path(p)),
            }
        }
    }
    Ok(())
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
    // The one flag policy, as a battery entry reads the flags (its lines are the battery's).
    crate::gate::policy::check_flags(&cli.gate.options(), crate::gate::policy::Reader::Battery)
        .with_context(ctx)?;
    let Some(k) = g.needs_devices else {
        check(&cli.gate.options()).with_context(ctx)?;
        return Ok(Plan::Run(Box::new(cli)));
    };
    // k >= 1: battery_shape refused 0, naming the file and the entry.
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
    let be = match open_backend(&cli.gate.options()) {
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
    check_on(&cli.gate.options(), be).with_context(ctx)?;
    Ok(Plan::Run(Box::new(cli)))
}

pub fn battery(a: &BatteryArgs) -> Result<i32> {
    install_interrupt_handler();
    if let Some(j) = &a.junit {
        check_writable("--junit", j)?;
        // The inputs known before the battery file is read: the file itself and every golden
        // receipt. battery_run checks all of them again with the gates' own inputs, but a
        // battery that stops before that (a file that does not parse, a gate's bad flag)
        // still writes its JUnit report, which over an input destroyed it (`battery b.json
        // --junit b.json` with b.json unparsable, or `--junit gold/g1.json`).
        let mut ins: Vec<(&str, PathBuf)> = vec![("battery", a.file.clone())];
        if let Some(d) = &a.golden {
            ins.extend(
                std::fs::read_dir(d)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| ("--golden", e.path())),
            );
        }
        let ins: Vec<(&str, &Path)> = ins.iter().map(|(f, p)| (*f, p.as_path())).collect();
        crate::fsio::check_distinct(&[("--junit", j.as_path())], &ins)?;
    }
    let stem = a.file.file_stem().map(|s| s.to_string_lossy().into_owned());
    let mut report = junit::Suite::new(stem.unwrap_or_else(|| "battery".into()));
    let mut checked = false;
    let r = battery_run(a, &mut report, &mut checked);
    if let Err(e) = &r {
        // An error before any gate ran (the file, a gate's flags) has no gate testcase to
        // carry it: one testcase named after the battery does, so CI shows why.
        if !report.has_error() {
            let class = report.name.clone();
            report.cases.push(error_case("battery", &class, 0.0, e));
        }
    }
    // Stopped before its outputs were checked against the gates' inputs (a model, a tape
    // the unread file names): the report may not replace a file that is not a JUnit report,
    // since that file may be one of those inputs.
    let junit = match &a.junit {
        Some(j) if r.is_err() && !checked && j.exists() && !junit::is_report(j) => {
            errln!(
                "ppn-gate: --junit {}: not written: it holds something other than a JUnit report, \
                 and the battery stopped before its outputs were checked against its inputs",
                crate::fsio::shown_path(j)
            );
            None
        }
        j => j.as_deref(),
    };
    write_junit(junit, &report, r.as_ref().err())?;
    if let (Some(j), Ok(_)) = (&a.junit, &r) {
        outln!("junit: {}", j.display());
    }
    r
}

/// `checked`: set once every output has been checked against every input (check_distinct).
fn battery_run(a: &BatteryArgs, report: &mut junit::Suite, checked: &mut bool) -> Result<i32> {
    let text = crate::fsio::read_json_text("battery", &a.file)?;
    // Every field, name and gate's flags are checked before the first gate runs (backend,
    // devices, arms, faults: everything but the model): a bad gate five must not cost the
    // four before it.
    let bf = read_battery(&a.file, &text)?;
    report.name = bf.name.clone();
    let mut gates: Vec<(&BatteryGate, Plan)> = Vec::with_capacity(bf.gates.len());
    // An entry's relative paths name files beside the battery file, wherever it runs from.
    let base = battery_dir(&a.file);
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
        resolve_paths(&mut cli.gate, &base);
        if let Some(r) = &cli.gate.receipt {
            bail!(
                "battery gate {:?}: --receipt {}: the battery writes <out>/{}.json",
                g.name,
                r.display(),
                g.name
            );
        }
        let plan = plan_gate(g, cli)?;
        // A gate that runs here needs its files (one skipped for lack of devices does not).
        if let Plan::Run(c) = &plan {
            input_problem(&c.gate, &base).with_context(|| format!("battery gate {:?}", g.name))?;
        }
        gates.push((g, plan));
    }
    // The default is a fresh folder per run, so a run never overwrites the last one's
    // receipts; an --out given is the user's to reuse (the goldens are regenerated so).
    let out = a.out.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from("receipts/runs").join(format!(
            "battery-{}-{t}-{}",
            bf.name,
            std::process::id()
        ))
    });
    // The outputs, before the first gate: the directory and its lock, every receipt name,
    // every gate's --trace.
    let out_flag = crate::fsio::flag_name("--out", a.out.is_some());
    let (made, _lock) = crate::fsio::take_out_dir(&out_flag, &out)?;
    let receipts: Vec<PathBuf> = gates
        .iter()
        .map(|(g, _)| out.join(format!("{}.json", g.name)))
        .collect();
    for ((g, plan), receipt) in gates.iter().zip(&receipts) {
        check_writable(&out_flag, receipt).with_context(|| format!("battery gate {:?}", g.name))?;
        if let Plan::Run(cli) = plan {
            if let Some(t) = &cli.gate.trace {
                check_writable("--trace", t)
                    .with_context(|| format!("battery gate {:?}", g.name))?;
            }
        }
    }
    // No output may overwrite an input or another output: above all a receipt written over
    // the golden it is then diffed against (`--out D --golden D` read each receipt back as
    // its own golden, "same", and replaced the goldens), and --junit over the battery file.
    let goldens: Vec<PathBuf> = match &a.golden {
        Some(d) => gates
            .iter()
            .map(|(g, _)| d.join(format!("{}.json", g.name)))
            .collect(),
        None => Vec::new(),
    };
    let mut outs: Vec<(&str, &Path)> = receipts.iter().map(|p| ("--out", p.as_path())).collect();
    outs.push(("--out's lock", _lock.path()));
    outs.extend(a.junit.as_deref().map(|j| ("--junit", j)));
    // Each running gate's inputs, as GateOptions::input_files names them.
    let mut read: Vec<(&str, PathBuf)> = Vec::new();
    for (_, plan) in &gates {
        if let Plan::Run(cli) = plan {
            outs.extend(cli.gate.trace.as_deref().map(|t| ("--trace", t)));
            let opts = cli.gate.options();
            read.extend(
                opts.input_files()
                    .into_iter()
                    .map(|(f, p)| (f, p.to_path_buf())),
            );
        }
    }
    let mut ins: Vec<(&str, &Path)> = vec![("battery", a.file.as_path())];
    ins.extend(goldens.iter().map(|p| ("--golden", p.as_path())));
    ins.extend(read.iter().map(|(f, p)| (*f, p.as_path())));
    crate::fsio::check_distinct(&outs, &ins)?;
    *checked = true;
    // Every running gate's golden before the first gate (a missing one stopped the battery at
    // its gate, after the gates before it had run).
    if let Some(d) = &a.golden {
        for ((g, plan), p) in gates.iter().zip(&goldens) {
            if matches!(plan, Plan::Run(_)) && !p.is_file() {
                bail!(
                    "--golden {}: no golden receipt {} for gate {:?}",
                    crate::fsio::shown_path(d),
                    crate::fsio::shown_path(p),
                    g.name
                );
            }
        }
    }
    made.keep();
    let mut worst = EXIT_PASS;
    let (mut passed, mut failed, mut skipped, mut off_golden) = (0, 0, 0, 0);
    // On a terminal from the first gate's start; dropped (so cleared) on every return.
    let bar = Bar::new(format!("battery {}", bf.name), gates.len(), "gates");
    for (i, (g, plan)) in gates.iter().enumerate() {
        bar.set(i);
        if INTERRUPTS.load(Ordering::SeqCst) > 0 {
            // The gates never started are listed, so the XML does not read as a shorter
            // battery that passed.
            not_run(
                report,
                &gates[i..],
                &format!("not run: interrupted after {i} gate(s)"),
            );
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
        let golden = goldens.get(i).map(PathBuf::as_path);
        match run_battery_gate(g, cli, &receipts[i], golden, &mut worst) {
            Ok((mut case, r)) => {
                case.time_s = t0.elapsed().as_secs_f64();
                case.classname = bf.name.clone();
                if r.verdict == "PASS" {
                    passed += 1;
                    // A PASS whose receipt differs from its golden (or cannot be compared):
                    // the exit is 1 (or 2), and the summary line says why.
                    if !matches!(case.outcome, junit::Outcome::Pass) {
                        off_golden += 1;
                        crate::exit::FAILS_MET.fetch_add(1, Ordering::SeqCst);
                    }
                } else {
                    failed += 1;
                    worst = worst.max(EXIT_FAIL);
                    crate::exit::FAILS_MET.fetch_add(1, Ordering::SeqCst);
                }
                report.cases.push(case);
                // The JUnit file as of this gate, the rest listed as not run: what a second
                // interrupt (which leaves at once) keeps; rewritten after every gate and at
                // the end.
                if gates.len() > i + 1 {
                    let mut now = report.clone();
                    let why = format!("not run: the battery left after {} gate(s)", i + 1);
                    not_run(&mut now, &gates[i + 1..], &why);
                    if let Err(e) = write_junit(a.junit.as_deref(), &now, None) {
                        errln!("ppn-gate: {e:#}");
                    }
                }
            }
            Err(e) => {
                // The battery stops at a harness error, as it always has; the gates after
                // this one are listed as not run rather than left out.
                let secs = t0.elapsed().as_secs_f64();
                report.cases.push(error_case(&g.name, &bf.name, secs, &e));
                let why = format!("not run: the battery stopped at gate {:?}'s error", g.name);
                not_run(report, &gates[i + 1..], &why);
                return Err(e);
            }
        }
    }
    bar.finish();
    let golden_note = if off_golden > 0 {
        format!("; {off_golden} PASS not the same as its golden")
    } else {
        String::new()
    };
    outln!(
        "battery {}: {passed} PASS, {failed} FAIL, {skipped} SKIP (of {} gates){golden_note}",
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

/// The gates of `rest` as skipped testcases of `report` (its class), each with `why`: so the
/// XML never reads as a shorter battery that passed.
fn not_run(report: &mut junit::Suite, rest: &[(&BatteryGate, Plan)], why: &str) {
    for (h, _) in rest {
        let case = junit::Case::new(
            &h.name,
            &report.name,
            junit::Outcome::Skipped {
                message: why.to_string(),
            },
        );
        report.cases.push(case);
    }
}

/// Runs one battery gate, prints its lines, writes its receipt at `path` and diffs it against
/// `golden` (both the paths checked before the first gate): its testcase (a golden difference is a `<failure>`, a golden that is not
/// comparable an `<error>`) and its receipt. `worst` takes the golden's exit code.
fn run_battery_gate(
    g: &BatteryGate,
    cli: &Cli,
    path: &Path,
    golden: Option<&Path>,
    worst: &mut i32,
) -> Result<(junit::Case, Receipt)> {
    let t0 = Instant::now();
    let p = prepare(&cli.gate.options()).with_context(|| format!("battery gate {:?}", g.name))?;
    let mut watch = Watch::new(false, false);
    let r = run_prepared(&p, &mut |e| watch.event(e))
        .with_context(|| format!("battery gate {:?}", g.name))?;
    r.write(path)?;
    outln!(
        "{:<28} {}  ({:.1} s)",
        g.name,
        r.verdict,
        t0.elapsed().as_secs_f64()
    );
    for l in verdict_lines(&r) {
        outln!("    {l}");
    }
    let mut case = receipt_case(&g.name, "", 0.0, &r, path);
    let Some(gp) = golden else {
        return Ok((case, r));
    };
    case.properties
        .push(("golden".into(), gp.display().to_string()));
    let golden =
        Receipt::load(gp).with_context(|| format!("golden receipt for gate {:?}", g.name))?;
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
                        ("needs_devices", Value::Number(x)) => x.as_u64().is_some_and(|k| k >= 1),
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

    /// A needs_devices serde_json reads as an f64 is echoed as the file wrote it (2^64, not
    /// 1.8446744073709552e+19; a fraction keeps its digits).
    #[test]
    fn a_huge_or_fractional_needs_devices_is_echoed_as_written() {
        for (lit, want) in [
            (
                "18446744073709551616",
                "needs_devices: 18446744073709551616 where",
            ),
            ("2.50", "needs_devices: 2.50 where"),
            ("1e0", "needs_devices: 1e0 where"),
        ] {
            let t = format!(
                r#"{{"name":"t","gates":[{{"name":"a","args":[]}},{{"name":"b","args":[],"needs_devices":{lit}}}]}}"#
            );
            let e = format!("{:#}", read_battery(Path::new("b.json"), &t).err().unwrap());
            assert!(e.contains(&format!("gates[1] \"b\".{want}")), "{lit}: {e}");
        }
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
