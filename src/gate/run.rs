//! The run of a prepared gate: in this process (`arms::run_gate` on its backend, traced on
//! request) or, with `--procs W`, as W member processes (`launch`).

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::plan::Prepared;
use super::report::receipt_of;
use crate::arms::{self, GateEvent};
use crate::backend::any::AnyBackend;
use crate::receipt::{self, Receipt};

/// Run one gate and build its receipt. `progress` sees each phase start, its progress and
/// each arm's result as the arm ends (`GateEvent`; `watch::Watch` shows them).
/// With `--trace`, the trace goes to its path. A multi-process gate (`--procs W`) runs as W
/// member processes (`launch`), whose last-stage member writes the receipt returned here.
pub fn run_prepared(p: &Prepared, progress: &mut dyn FnMut(&GateEvent)) -> Result<Receipt> {
    let out = p.args.trace.as_deref().map(|path| TraceOut {
        path,
        only_if_fail: false,
    });
    Ok(run_traced(p, out, progress)?.0)
}

/// Where a traced gate run writes its trace.
#[derive(Clone, Copy)]
pub struct TraceOut<'a> {
    pub path: &'a Path,
    /// Write the file only when the gate FAILs (the run is traced either way, so every run
    /// has the same timing).
    pub only_if_fail: bool,
}

/// `run_prepared` tracing into `trace` (None: untraced), a fresh trace per call (a soak
/// writes one per run); also says whether the trace file was written.
pub fn run_traced(
    p: &Prepared,
    trace: Option<TraceOut>,
    progress: &mut dyn FnMut(&GateEvent),
) -> Result<(Receipt, bool)> {
    if p.args.procs.is_some() {
        if let Some(t) = trace {
            bail!(
                "--trace {}: multi-process gates are not traced (trace one process's gate instead)",
                t.path.display()
            );
        }
        return Ok((super::launch::run(p)?, false));
    }
    if p.args.rank.is_some() {
        bail!("--rank: a member's receipt is written by the member holding the last stage; soak, battery and selftest start members with --procs W");
    }
    if trace.is_some() {
        p.be.start_trace();
    }
    let t0 = Instant::now();
    let modules0 = p.be.module_stats();
    let res = match &p.be {
        AnyBackend::Cpu(be) => arms::run_gate(be.clone(), p.model.clone(), &p.spec, progress)?,
        AnyBackend::Cuda(be) => arms::run_gate(be.clone(), p.model.clone(), &p.spec, progress)?,
    };
    let (busy_overlap, wrote) = match trace {
        Some(out) => {
            let write = !out.only_if_fail || !res.pass();
            (Some(write_trace(p, out.path, write, &res.arms)?), write)
        }
        None => (None, false),
    };
    Ok((receipt_of(p, res, t0, modules0, busy_overlap)?, wrote))
}

/// `--trace FILE`: writes the trace (atomically, when `write`) and returns each arm's busy
/// overlap.
fn write_trace(p: &Prepared, path: &Path, write: bool, arms: &[receipt::Arm]) -> Result<Vec<f64>> {
    let tr =
        p.be.trace()?
            .ok_or_else(|| anyhow!("--trace {}: the backend kept no trace", path.display()))?;
    if write {
        receipt::write_atomic(path, tr.to_json().as_bytes())
            .with_context(|| format!("--trace {}", path.display()))?;
    }
    Ok(arms
        .iter()
        .map(|a| tr.overlap(&a.name).unwrap_or(0.0))
        .collect())
}
