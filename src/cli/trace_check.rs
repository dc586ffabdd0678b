//! `ppn-gate trace-check`: a trace file held against the pipeline bars for one phase.

use std::path::Path;

use anyhow::{anyhow, Result};

use crate::exit::{EXIT_FAIL, EXIT_PASS};

/// `ppn-gate trace-check FILE --phase ARM` (see `backend::trace::check`).
pub fn trace_check(file: &Path, phase: &str) -> Result<i32> {
    // A phase the bars do not apply to is a bad flag (exit 2), before the file is read.
    if let Some(why) = crate::backend::trace::check::phase_problem(phase) {
        anyhow::bail!("trace-check --phase: {why}");
    }
    let text = crate::fsio::read_json_text("trace-check", file)?;
    let doc = crate::jsonin::parse_unique(&text)
        .map_err(|e| anyhow!("trace-check {}: {e}", file.display()))?;
    let r = crate::backend::trace::check::check(&doc, &text, phase)
        .map_err(|e| anyhow!("trace-check {}: {e}", file.display()))?;
    for l in &r.lines {
        outln!("{l}");
    }
    Ok(if r.pass { EXIT_PASS } else { EXIT_FAIL })
}
