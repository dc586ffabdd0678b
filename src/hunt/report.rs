//! The hunt's outputs: `DIR/hunt.json` (schema `ppn-gate.hunt/1`, written atomically at the
//! start, after every finding and at the end), the `--junit` file (one testcase per
//! finding, a passing one when there is none), the final table, and on a terminal one
//! progress line (`progress`: a small function, so a shared progress bar can replace it).

use std::io::Write as _;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Hunt, Tally};
use crate::receipt::junit;

pub const SCHEMA: &str = "ppn-gate.hunt/1";

/// hunt.json's value.
pub fn json(h: &Hunt, t: &Tally) -> serde_json::Value {
    serde_json::json!({
        "schema": SCHEMA,
        "seed": h.seed,
        "budget": {
            "trials": h.trials,
            "seconds": h.budget.map(|b| b.as_secs()),
        },
        "model": h.model,
        "flags": h.base_flags,
        "fault": h.fault.map(|f| f.name()),
        "confirm": h.confirm,
        "timeout_s": h.timeout.as_secs(),
        "self_check": h.corner.map(|c| serde_json::json!({
            "corner": c.to_string(),
            "want": h.space.flags(&Hunt::corner_draw(&c), None),
            "miss": h.self_check_miss(t),
        })),
        "trials": t.trials,
        "pass": t.pass,
        "caught": t.caught,
        "fault_opened": t.fault_opened,
        "fault_closed": t.fault_closed,
        "refused": t.refused,
        "findings_count": t.findings.len(),
        "elapsed_s": t.elapsed_s,
        "interrupted": t.interrupted,
        "error": t.error,
        "coverage": t.coverage,
        "findings": t.findings,
    })
}

pub fn write(h: &Hunt, t: &Tally) -> Result<()> {
    let path = h.out.join("hunt.json");
    let text = serde_json::to_string_pretty(&json(h, t)).expect("the report is JSON");
    crate::fsio::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    if let Some(j) = &h.junit {
        suite(h, t)
            .write(j)
            .with_context(|| format!("--junit {}", j.display()))?;
    }
    Ok(())
}

/// One testcase per finding (a `<failure>`), a passing case when there is none.
pub fn suite(h: &Hunt, t: &Tally) -> junit::Suite {
    let mut s = junit::Suite::new("hunt");
    for f in &t.findings {
        let mut c = junit::Case::new(
            &f.name,
            "hunt",
            junit::Outcome::Failure {
                message: format!("{}: {}", f.kind.name(), f.detail),
                detail: format!(
                    "shrunk: {}\nreproduced {}/{} runs\nbattery: {}",
                    f.command, f.reproduced, f.runs, f.battery
                ),
            },
        );
        c.properties.push(("battery".into(), f.battery.clone()));
        s.cases.push(c);
    }
    if t.findings.is_empty() {
        let mut c = junit::Case::new(
            format!("{} trials, no finding", t.trials),
            "hunt",
            junit::Outcome::Pass,
        );
        c.time_s = t.elapsed_s;
        s.cases.push(c);
    }
    if let Some(miss) = h.self_check_miss(t) {
        s.cases.push(junit::Case::new(
            "self-check",
            "hunt",
            junit::Outcome::Failure {
                message: miss,
                detail: String::new(),
            },
        ));
    }
    s
}

/// The final table: counts, then coverage per dimension.
pub fn table(h: &Hunt, t: &Tally) -> Vec<String> {
    let mut l = vec![format!(
        "hunt: {} trials in {:.1}s: {} PASS, {} refused, {} findings{}",
        t.trials,
        t.elapsed_s,
        t.pass,
        t.refused,
        t.findings.len(),
        if t.interrupted { " (interrupted)" } else { "" }
    )];
    if let Some(f) = h.fault {
        l.push(format!(
            "fault {f}: opened in {} trials ({} caught), cannot open in {}",
            t.fault_opened, t.caught, t.fault_closed
        ));
    }
    l.push("coverage (trials):".into());
    for (k, n) in &t.coverage {
        l.push(format!("  {k:<26} {n}"));
    }
    for f in &t.findings {
        l.push(format!(
            "{:<16} {} ({}/{} runs): {}",
            f.name,
            f.kind.name(),
            f.reproduced,
            f.runs,
            f.command
        ));
    }
    l
}

/// The terminal's progress line (stderr, rewritten in place).
pub fn progress(h: &Hunt, t: &Tally, elapsed: Duration) {
    let left = match (h.budget, h.trials) {
        (Some(b), _) => format!("{}s left", b.saturating_sub(elapsed).as_secs()),
        (None, Some(n)) => format!("{} trials left", n.saturating_sub(t.trials)),
        (None, None) => String::new(),
    };
    let mut e = std::io::stderr().lock();
    let _ = write!(
        e,
        "\rhunt: {} trials, {} findings, {}s, {left}\x1b[K",
        t.trials,
        t.findings.len(),
        elapsed.as_secs()
    );
    let _ = e.flush();
}

pub fn progress_clear() {
    let mut e = std::io::stderr().lock();
    let _ = write!(e, "\r\x1b[K");
    let _ = e.flush();
}
