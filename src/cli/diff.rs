//! `ppn-gate diff`: every deterministic field of two receipts compared.

use std::path::Path;

use anyhow::Result;

use crate::exit::{EXIT_ERROR, EXIT_FAIL, EXIT_PASS};
use crate::receipt::diff::{diff_detail_ignoring, DiffOutcome};
use crate::receipt::Receipt;

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
    let detail = diff_detail_ignoring(&ra, &rb, &ignore).map_err(|e| anyhow::anyhow!(e))?;
    Ok(match detail.outcome {
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
            errln!(
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
        // A bad --ignore is the command's error (no document), as check_ignore's is.
        (Ok(ra), Ok(rb)) => {
            diff_detail_ignoring(&ra, &rb, ignore).map_err(|e| anyhow::anyhow!(e))?
        }
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
            errln!("ppn-gate: not comparable: {sa} vs {sb}: {why}");
            EXIT_ERROR
        }
    };
    let text = serde_json::to_string_pretty(&detail.to_json(&sa, &sb))?;
    outln!("{text}");
    Ok(code)
}
