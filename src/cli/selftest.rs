//! `ppn-gate selftest`: proof, on this machine's backend and devices, that the gate can fail.
//! Every `--fault` runs in the placement that opens its window here (`recipe`), R times, and
//! every placement used also runs R times without a fault (the clean controls: a failure the
//! placement alone causes would make a "caught" fault meaningless). A fault counts as caught
//! only when every run FAILs and a control as passed only when every run PASSes; a fault no
//! placement here can open is listed with the reason and never counted as caught.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use serde::Serialize;

use super::{Cli, SelftestArgs};
use crate::backend::cuda::MmaMode;
use crate::exit::{EXIT_ERROR, EXIT_FAIL, EXIT_PASS};
use crate::gate::bounds;
use crate::gate::opens::{recipe, Recipe};
use crate::gate::plan::{load_model, open_backend, prepare_model, Prepared};
use crate::gate::report::default_receipt_path;
use crate::gate::run::run_prepared;
use crate::gate::watch::Watch;
use crate::gate::GateOptions;
use crate::model::Model;
use crate::receipt::write_atomic;
use crate::runtime::Fault;
use crate::soak::{RunRecord, Summary};
use crate::term::Bar;

/// Whether `--mma on` puts any of the model's matrices on the tensor cores (mma-row-order's
/// plant needs one: a launch over no such matrix plants nothing and would read as a miss).
fn has_mma_matrix(m: &Model) -> bool {
    let on = MmaMode::On.select(m.cfg.n_embd, 0, 0);
    m.layers
        .iter()
        .any(|l| l.matrices().iter().any(|w| on.takes(w.ty, w.rows, w.cols)))
}

/// mma-row-order's row on a model none of whose matrices the tensor-core path takes.
fn mma_closed() -> Recipe {
    Recipe::Closed(
        "the model has no matrix the tensor-core path takes (Q4_K of whole super-blocks; Q8_0, Q4_0, Q4_1, Q5_0 of whole blocks of 32; whole 16-row tiles), so nothing can plant".into(),
    )
}

/// One line of the selftest: a fault, or a clean control (`fault` None) of a placement.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub id: String,
    pub fault: Option<Fault>,
    pub recipe: Recipe,
}

/// A row's own gate flags: its placement, then its fault.
pub fn row_flags(row: &Row) -> Vec<String> {
    let mut v = match &row.recipe {
        Recipe::Opens { flags, .. } => flags.clone(),
        Recipe::Closed(_) => Vec::new(),
    };
    if let Some(f) = row.fault {
        v.extend(["--fault".to_string(), f.name().to_string()]);
    }
    v
}

/// Every fault with its recipe, then one clean control per distinct placement they use.
pub fn plan(cuda: bool, devices: usize) -> Vec<Row> {
    let mut rows: Vec<Row> = Fault::ALL
        .iter()
        .map(|&f| Row {
            id: f.name().to_string(),
            fault: Some(f),
            recipe: recipe(f, cuda, devices),
        })
        .collect();
    let mut controls: Vec<Recipe> = Vec::new();
    for r in &rows {
        if matches!(r.recipe, Recipe::Opens { .. }) && !controls.contains(&r.recipe) {
            controls.push(r.recipe.clone());
        }
    }
    rows.extend(controls.into_iter().enumerate().map(|(i, recipe)| Row {
        id: format!("clean-{}", i + 1),
        fault: None,
        recipe,
    }));
    rows
}

/// What became of a row.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A fault that FAILed the gate in every run (the gate caught it).
    Caught,
    /// A fault that some run did not catch.
    Missed,
    /// A clean control that PASSed every run.
    Passed,
    /// A clean control that some run FAILed.
    Failed,
    /// No placement here opens the fault (not run, not counted).
    CannotOpen,
    /// A harness error: the row stopped (not counted as caught or passed).
    Error,
}

#[derive(Clone, Debug, Serialize)]
pub struct RowResult {
    pub id: String,
    pub fault: Option<String>,
    pub law: Option<&'static str>,
    pub placement: String,
    pub status: Status,
    /// Runs that did what the row needs: FAILed (a fault) or PASSed (a control).
    pub hits: usize,
    pub runs_done: usize,
    /// Why a fault cannot open here, or the harness error.
    pub reason: Option<String>,
    /// The row's soak summary (every run's verdict and receipt).
    pub summary: Option<String>,
}

impl RowResult {
    /// The table's line: fault, law, placement, result.
    fn line(&self, widths: (usize, usize, usize), runs: usize) -> String {
        let result = match self.status {
            Status::Caught | Status::Missed => format!("caught {}/{runs}", self.hits),
            Status::Passed | Status::Failed => format!("passed {}/{runs}", self.hits),
            Status::CannotOpen => {
                format!("cannot open here: {}", self.reason.as_deref().unwrap_or(""))
            }
            Status::Error => format!(
                "ERROR after {} run(s): {}",
                self.runs_done,
                self.reason.as_deref().unwrap_or("")
            ),
        };
        let flag = match self.status {
            Status::Caught | Status::Passed | Status::CannotOpen => "  ",
            _ => "!!",
        };
        format!(
            "{flag} {:<w0$} {:<w1$} {:<w2$} {result}",
            self.fault.as_deref().unwrap_or(&self.id),
            self.law.unwrap_or("no fault: every run must PASS"),
            if self.placement.is_empty() {
                "-"
            } else {
                &self.placement
            },
            w0 = widths.0,
            w1 = widths.1,
            w2 = widths.2,
        )
    }
}

/// The selftest's summary file (`<out>/selftest.json`), rewritten after every row.
#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    backend: &'a str,
    devices: usize,
    model: &'a str,
    runs_per_row: usize,
    /// PASS, FAIL, ERROR, or "incomplete" while rows remain.
    verdict: &'a str,
    rows: &'a [RowResult],
}

/// Exit code of a finished selftest: 2 when a row hit a harness error, 1 when a fault that
/// opens here escaped a run or a clean control failed one (or no fault could open at all:
/// then nothing proves the gate can fail), else 0.
pub fn verdict(results: &[RowResult]) -> i32 {
    if results.iter().any(|r| r.status == Status::Error) {
        EXIT_ERROR
    } else if results
        .iter()
        .any(|r| matches!(r.status, Status::Missed | Status::Failed))
        || !results.iter().any(|r| r.status == Status::Caught)
    {
        EXIT_FAIL
    } else {
        EXIT_PASS
    }
}

/// What a run of a row is: one gate, its record (verdict, divergences, receipt path).
pub type RunFn<'a> = dyn FnMut(&Row, usize) -> Result<RunRecord> + 'a;

/// Runs every row `runs` times through `run`, handing the table to `print` line by line as
/// rows finish and rewriting `<out>/selftest.json` after each; returns the rows' results.
pub fn execute(
    rows: &[Row],
    runs: usize,
    out: &Path,
    header: (&str, usize, &str),
    run: &mut RunFn<'_>,
    print: &mut dyn FnMut(String),
) -> Result<Vec<RowResult>> {
    let (backend, devices, model) = header;
    let placement = |r: &Row| match &r.recipe {
        Recipe::Opens { flags, .. } => flags.join(" "),
        Recipe::Closed(_) => String::new(),
    };
    let widths = (
        rows.iter().map(|r| r.id.len()).max().unwrap_or(0).max(7),
        Fault::ALL.iter().map(|f| f.law().len()).max().unwrap_or(0),
        rows.iter().map(|r| placement(r).len()).max().unwrap_or(0),
    );
    print(format!(
        "selftest: {backend} backend, {devices} device(s), model {model}, {runs} run(s) per row"
    ));
    print(format!(
        "   {:<w0$} {:<w1$} {:<w2$} result",
        "fault",
        "law it breaks",
        "placement",
        w0 = widths.0,
        w1 = widths.1,
        w2 = widths.2
    ));
    let summary_path = out.join("selftest.json");
    let mut results: Vec<RowResult> = Vec::with_capacity(rows.len());
    for row in rows {
        let mut res = RowResult {
            id: row.id.clone(),
            fault: row.fault.map(|f| f.name().to_string()),
            law: row.fault.map(|f| f.law()),
            placement: placement(row),
            status: Status::CannotOpen,
            hits: 0,
            runs_done: 0,
            reason: None,
            summary: None,
        };
        match &row.recipe {
            Recipe::Closed(why) => res.reason = Some(why.clone()),
            Recipe::Opens { .. } => {
                let dir = out.join(&row.id);
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("selftest output {}", dir.display()))?;
                let mut s = Summary::new(row_flags(row), runs);
                let sp = dir.join("summary.json");
                res.summary = Some(sp.display().to_string());
                for i in 1..=runs {
                    match run(row, i) {
                        Ok(rec) => {
                            s.push(rec);
                            s.write(&sp)?;
                        }
                        Err(e) => {
                            res.status = Status::Error;
                            res.reason = Some(format!("{e:#}"));
                            break;
                        }
                    }
                }
                res.runs_done = s.runs_done;
                if res.status != Status::Error {
                    let fault = row.fault.is_some();
                    res.hits = if fault { s.failed() } else { s.passed };
                    res.status = match (fault, res.hits == runs) {
                        (true, true) => Status::Caught,
                        (true, false) => Status::Missed,
                        (false, true) => Status::Passed,
                        (false, false) => Status::Failed,
                    };
                }
            }
        }
        print(res.line(widths, runs));
        results.push(res);
        write_report(&summary_path, header, runs, "incomplete", &results)?;
    }
    let v = match verdict(&results) {
        EXIT_PASS => "PASS",
        EXIT_FAIL => "FAIL",
        _ => "ERROR",
    };
    write_report(&summary_path, header, runs, v, &results)?;
    let count = |st: Status| results.iter().filter(|r| r.status == st).count();
    print(format!(
        "selftest {v}: {} fault(s) caught in every run, {} missed; {} clean control(s) passed every run, {} failed; {} error(s); {} fault(s) cannot open here (listed, not counted)",
        count(Status::Caught),
        count(Status::Missed),
        count(Status::Passed),
        count(Status::Failed),
        count(Status::Error),
        count(Status::CannotOpen)
    ));
    print(format!("summary: {}", summary_path.display()));
    Ok(results)
}

fn write_report(
    path: &Path,
    (backend, devices, model): (&str, usize, &str),
    runs: usize,
    verdict: &str,
    rows: &[RowResult],
) -> Result<()> {
    let r = Report {
        schema: "ppn-gate.selftest/1",
        backend,
        devices,
        model,
        runs_per_row: runs,
        verdict,
        rows,
    };
    let text = serde_json::to_string_pretty(&r)? + "\n";
    write_atomic(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// Runs rows as real gates: each row's flags after the common ones (backend, CPU devices),
/// on a model loaded once; one `Prepared` per row, reused for its runs.
pub struct GateRunner {
    common: Vec<String>,
    out: PathBuf,
    /// The model of every row (`--model`, or the built-in one) and its receipt name.
    model: (Arc<Model>, String),
    current: Option<(String, Prepared)>,
}

impl GateRunner {
    pub fn new(common: Vec<String>, out: PathBuf, model: (Arc<Model>, String)) -> GateRunner {
        GateRunner {
            common,
            out,
            model,
            current: None,
        }
    }

    /// The row's gate command line (without the program name).
    pub fn argv(&self, row: &Row) -> Vec<String> {
        let mut v = self.common.clone();
        v.extend(row_flags(row));
        v
    }

    pub fn run(&mut self, row: &Row, run: usize) -> Result<RunRecord> {
        if self.current.as_ref().map(|c| &c.0) != Some(&row.id) {
            self.current = None; // free the previous row's runtime state first
            let args = parse_gate(&self.argv(row))?;
            let p = prepare_model(&args, Some(self.model.clone()))
                .with_context(|| format!("selftest row {}", row.id))?;
            self.current = Some((row.id.clone(), p));
        }
        let p = &self.current.as_ref().expect("prepared above").1;
        let mut watch = Watch::new(false, false);
        let r = run_prepared(p, &mut |e| watch.event(e))
            .with_context(|| format!("selftest row {}", row.id))?;
        let path = self.out.join(&row.id).join(format!("run-{run:03}.json"));
        r.write(&path)?;
        Ok(RunRecord::from_receipt(run, &r, path.display().to_string()))
    }
}

/// Gate flags through the CLI's own parser (the values a user would type).
fn parse_gate(argv: &[String]) -> Result<GateOptions> {
    let cli =
        Cli::try_parse_from(std::iter::once("ppn-gate").chain(argv.iter().map(|s| s.as_str())))
            .map_err(|e| anyhow!("gate flags {argv:?}: {}", e.to_string().trim()))?;
    Ok(cli.gate.options())
}

pub fn selftest(a: &SelftestArgs) -> Result<i32> {
    crate::gate::bounds::cpu_devices(a.cpu_devices)?;
    bounds::runs(a.runs)?;
    if a.runs == 0 {
        bail!("--runs 0: need at least one run");
    }
    let mut common = vec![
        "--backend".to_string(),
        a.backend.clone(),
        "--cpu-devices".to_string(),
        a.cpu_devices.to_string(),
        "-q".to_string(),
    ];
    // The backend decides the plan (which recipes, how many devices); every row then names
    // it explicitly, so `auto` cannot pick differently between rows.
    let be = open_backend(&parse_gate(&common)?)?;
    let (kind, devices) = (be.kind(), be.device_count());
    drop(be);
    common[1] = kind.to_string();
    let cuda = kind == "cuda";
    // Loaded once, before any row runs (a model that does not load is a bad flag).
    let model = load_model(a.model.as_deref())?;
    let model_name = model.1.clone();
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_receipt_path("selftest").with_extension(""));
    // Locked as a soak's --out is (its rows write receipts and soaks there).
    let (made, _lock) = crate::fsio::take_out_dir("--out", &out)?;
    made.keep();
    let mut rows = plan(cuda, devices);
    if cuda && !has_mma_matrix(&model.0) {
        for r in rows
            .iter_mut()
            .filter(|r| r.fault == Some(Fault::MmaRowOrder))
        {
            r.recipe = mma_closed();
        }
    }
    let mut runner = GateRunner::new(common, out.clone(), model);
    let opens = rows
        .iter()
        .filter(|r| matches!(r.recipe, Recipe::Opens { .. }))
        .count();
    // On a terminal: every run of every row that opens; dropped (so cleared) on return.
    let bar = Bar::new("selftest", opens.saturating_mul(a.runs), "runs");
    let results = execute(
        &rows,
        a.runs,
        &out,
        (kind, devices, &model_name),
        &mut |row, i| {
            let r = runner.run(row, i);
            bar.inc();
            r
        },
        &mut |line| outln!("{line}"),
    )?;
    bar.finish();
    Ok(verdict(&results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arms::ArmKind;
    use crate::gate::plan::{mma_mode, site, synth_model, Engines};
    use crate::model::synth::builtin_spec;

    /// Every recipe that opens passes the gate's own window check on that backend, and the
    /// ones that do not open say why: the selftest never plans a run the gate would refuse.
    #[test]
    fn every_recipe_opens_where_the_gate_checks_it() {
        for cuda in [false, true] {
            for g in [1, 2, 3, 4, 8] {
                for f in Fault::ALL {
                    match recipe(f, cuda, g) {
                        Recipe::Opens { flags, .. } => {
                            let mut argv = vec!["--cpu-devices".to_string(), g.to_string()];
                            argv.extend(flags.iter().cloned());
                            let a = parse_gate(&argv).unwrap();
                            let list = |v: &Option<String>| {
                                v.as_deref()
                                    .map(|s| crate::runtime::placement::parse_list("", s).unwrap())
                            };
                            let devices = crate::runtime::placement::stage_devices(
                                a.stages,
                                list(&a.splits).as_deref(),
                                list(&a.devices).as_deref(),
                                g,
                            )
                            .unwrap_or_else(|e| panic!("{f} cuda={cuda} g={g}: {e}"));
                            // The gate's own view of these flags (`plan::site`), not a
                            // copy of it: a recipe the gate would refuse fails here.
                            let arms: Vec<ArmKind> = a
                                .arms
                                .split(',')
                                .map(|n| ArmKind::parse(n.trim()).unwrap())
                                .collect();
                            let engine = match cuda {
                                false => Engines::HostWeights,
                                true => Engines::Cuda(mma_mode(&a.mma).unwrap()),
                            };
                            let site = site(&a, engine, &devices, &arms);
                            assert_eq!(f.cannot_open(&site), None, "{f} cuda={cuda} g={g}");
                        }
                        Recipe::Closed(why) => {
                            assert!(!why.is_empty());
                            // Only these cannot open: one device to misplace nothing on,
                            // the load race (CPU: nothing loads; CUDA: never fails), and
                            // the mma control on the CPU (no tensor-core matvec there).
                            assert!(
                                f == Fault::NoLoadBarrier
                                    || (f == Fault::MmaRowOrder && !cuda)
                                    || (f == Fault::MisplacedCache && g == 1),
                                "{f} cuda={cuda} g={g}: {why}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// mma-row-order runs on CUDA only on a model with a matrix `--mma on` takes (the
    /// built-in Q8_0 model has them); on one without (F16) its row is closed, not missed.
    #[test]
    fn mma_row_order_needs_a_model_the_tensor_core_path_takes() {
        use crate::quant::GgmlType;
        let (builtin, _) = synth_model(&builtin_spec(), "builtin").unwrap();
        assert!(has_mma_matrix(&builtin));
        let mut f16 = builtin_spec();
        f16.quant = crate::model::synth::SynthQuant::Uniform(GgmlType::F16);
        let (m, _) = synth_model(&f16, "f16").unwrap();
        assert!(!has_mma_matrix(&m));
        assert!(matches!(
            recipe(Fault::MmaRowOrder, true, 1),
            Recipe::Opens { ref flags } if flags.join(" ").starts_with("--mma on")
        ));
        assert!(matches!(mma_closed(), Recipe::Closed(ref w) if w.contains("no matrix")));
    }

    #[test]
    fn the_plan_has_every_fault_and_one_control_per_placement() {
        let rows = plan(false, 8);
        for f in Fault::ALL {
            assert_eq!(rows.iter().filter(|r| r.fault == Some(f)).count(), 1);
        }
        let controls: Vec<&Row> = rows.iter().filter(|r| r.fault.is_none()).collect();
        // Every placement a fault opens in has exactly one control, and nothing else does.
        for r in rows.iter().filter(|r| r.fault.is_some()) {
            if let Recipe::Opens { .. } = r.recipe {
                assert_eq!(
                    controls.iter().filter(|c| c.recipe == r.recipe).count(),
                    1,
                    "{}",
                    r.id
                );
            }
        }
        // CPU: rx-no-wait and no-exit-publish share --stages 2; 11 placements for 12 faults
        // (chunk-kv-order's prime, no-rollback's verify and the two serve faults' placements
        // are their own).
        assert_eq!(controls.len(), 11);
        assert_eq!(
            plan(false, 1)
                .iter()
                .find(|r| r.id == "misplaced-cache")
                .unwrap()
                .recipe,
            Recipe::Closed("one device, nothing to misplace (this backend has 1)".into())
        );
    }

    fn record(run: usize, pass: bool) -> RunRecord {
        RunRecord {
            run,
            verdict: if pass { "PASS" } else { "FAIL" }.into(),
            divergences: if pass {
                vec![]
            } else {
                vec![("eager".into(), 1)]
            },
            receipt: String::new(),
            ms: 0.0,
            trace: None,
        }
    }

    /// Runs the CPU plan with planted outcomes: `pass(row, run)` is each run's verdict.
    fn planted(
        runs: usize,
        pass: &dyn Fn(&Row, usize) -> Result<bool>,
    ) -> (Vec<RowResult>, i32, Vec<String>) {
        let d = tempfile::tempdir().unwrap();
        let rows = plan(false, 8);
        let mut calls = Vec::new();
        let mut table = Vec::new();
        let res = execute(
            &rows,
            runs,
            d.path(),
            ("cpu", 8, "planted"),
            &mut |r, i| {
                calls.push(r.id.clone());
                pass(r, i).map(|p| record(i, p))
            },
            &mut |l| table.push(l),
        )
        .unwrap();
        // A fault that cannot open is never run.
        assert!(!calls.iter().any(|c| c == "no-load-barrier"));
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("selftest.json")).unwrap())
                .unwrap();
        assert_eq!(written["rows"].as_array().unwrap().len(), rows.len());
        let code = verdict(&res);
        let want = match code {
            EXIT_PASS => "PASS",
            EXIT_FAIL => "FAIL",
            _ => "ERROR",
        };
        assert_eq!(written["verdict"], want);
        // The table: a header, a line per row, the verdict line, the summary path.
        assert_eq!(table.len(), rows.len() + 4, "{table:#?}");
        assert!(table[table.len() - 2].starts_with(&format!("selftest {want}: ")));
        (res, code, table)
    }

    /// The table line of row `id`.
    fn line<'a>(table: &'a [String], id: &str) -> &'a str {
        table
            .iter()
            .find(|l| l[3..].starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no line for {id}: {table:#?}"))
    }

    fn status(res: &[RowResult], id: &str) -> (Status, usize) {
        let r = res.iter().find(|r| r.id == id).unwrap();
        (r.status.clone(), r.hits)
    }

    #[test]
    fn every_fault_caught_and_every_control_clean_passes() {
        let (res, code, table) = planted(3, &|r, _| Ok(r.fault.is_none()));
        assert_eq!(code, EXIT_PASS);
        assert_eq!(status(&res, "rx-no-wait"), (Status::Caught, 3));
        assert_eq!(status(&res, "clean-1"), (Status::Passed, 3));
        assert_eq!(status(&res, "no-load-barrier"), (Status::CannotOpen, 0));
        let l = line(&table, "rx-no-wait");
        assert!(
            l.contains(Fault::RxNoWait.law())
                && l.contains("--stages 2")
                && l.ends_with("caught 3/3"),
            "{l}"
        );
        assert!(line(&table, "no-load-barrier").contains("cannot open here: the cpu backend"));
    }

    #[test]
    fn a_control_that_fails_once_fails_the_selftest() {
        let (res, code, table) = planted(3, &|r, i| {
            Ok(r.fault.is_none() && !(r.id == "clean-2" && i == 2))
        });
        assert_eq!(code, EXIT_FAIL);
        let failed: Vec<&String> = table.iter().filter(|l| l.starts_with("!!")).collect();
        assert_eq!(failed.len(), 1, "{table:#?}");
        assert!(failed[0].ends_with("passed 2/3"), "{}", failed[0]);
        assert_eq!(status(&res, "clean-2"), (Status::Failed, 2));
        assert_eq!(status(&res, "clean-1"), (Status::Passed, 3));
    }

    #[test]
    fn a_fault_that_escapes_one_run_fails_the_selftest() {
        let (res, code, table) = planted(3, &|r, i| {
            Ok(r.fault.is_none() || (r.id == "single-slot" && i == 3))
        });
        assert_eq!(code, EXIT_FAIL);
        assert_eq!(status(&res, "single-slot"), (Status::Missed, 2));
        let l = line(&table, "single-slot");
        assert!(l.starts_with("!!") && l.ends_with("caught 2/3"), "{l}");
    }

    #[test]
    fn a_harness_error_is_exit_2_and_never_a_catch() {
        let (res, code, _) = planted(3, &|r, _| {
            if r.id == "shared-scratch" {
                bail!("engine error")
            }
            Ok(r.fault.is_none())
        });
        assert_eq!(code, EXIT_ERROR);
        let r = res.iter().find(|r| r.id == "shared-scratch").unwrap();
        assert_eq!(
            (r.status.clone(), r.hits, r.runs_done),
            (Status::Error, 0, 0)
        );
        assert_eq!(r.reason.as_deref(), Some("engine error"));
    }

    /// The real gate on the CPU with one row sabotaged: rx-no-wait's runs lose their fault,
    /// so the gate passes them and the selftest must say the fault escaped (exit 1).
    #[test]
    fn a_real_fault_row_run_without_its_fault_is_missed() {
        let d = tempfile::tempdir().unwrap();
        let rows: Vec<Row> = plan(false, 8)
            .into_iter()
            .filter(|r| r.id == "rx-no-wait" || r.id == "no-exit-publish" || r.id == "clean-1")
            .collect();
        assert_eq!(rows.len(), 3);
        let common = ["--backend", "cpu", "-q", "--gen-len", "4"]
            .map(String::from)
            .to_vec();
        let model = load_model(None).unwrap();
        let mut runner = GateRunner::new(common, d.path().to_path_buf(), model);
        let res = execute(
            &rows,
            1,
            d.path(),
            ("cpu", 8, "built-in"),
            &mut |r, i| {
                let mut r = r.clone();
                if r.id == "rx-no-wait" {
                    r.fault = None;
                }
                runner.run(&r, i)
            },
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(status(&res, "rx-no-wait"), (Status::Missed, 0));
        assert_eq!(status(&res, "no-exit-publish"), (Status::Caught, 1));
        assert_eq!(status(&res, "clean-1"), (Status::Passed, 1));
        assert_eq!(verdict(&res), EXIT_FAIL);
        let rec: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.path().join("no-exit-publish/run-001.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            rec["config"]["faults"],
            serde_json::json!(["no-exit-publish"])
        );
        assert_eq!(rec["verdict"], "FAIL");
    }
}
