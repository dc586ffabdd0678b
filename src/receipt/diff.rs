//! Receipt comparison: the deterministic parts, step by step.
//!
//! Outcome: Same (exit 0), Different (exit 1: names the first divergent step of every part
//! that differs), NotComparable (exit 2: different model or tokens, so a step-by-step
//! comparison would mean nothing).

use super::{Arm, Receipt, Reference};

#[derive(Debug, PartialEq)]
pub enum DiffOutcome {
    Same,
    Different(Vec<String>),
    NotComparable(String),
}

/// Compares two step lists element-wise: a length mismatch line, then the indices that
/// differ. Shared by references and arms so both report divergence the same way.
fn divergent<T: PartialEq>(what: &str, a: &[T], b: &[T], out: &mut Vec<String>) -> Vec<usize> {
    if a.len() != b.len() {
        out.push(format!("{what}: {} steps vs {}", a.len(), b.len()));
    }
    (0..a.len().min(b.len()))
        .filter(|&i| a[i] != b[i])
        .collect()
}

fn cmp_reference(what: &str, a: &Reference, b: &Reference, out: &mut Vec<String>) {
    let diffs = divergent(what, &a.steps, &b.steps, out);
    if let Some(&first) = diffs.first() {
        let n = a.steps.len().min(b.steps.len());
        out.push(format!(
            "{what}: first divergent step {} ({} of {n} steps differ)",
            a.steps[first].step,
            diffs.len()
        ));
    }
}

fn cmp_arm(a: &Arm, b: &Arm, out: &mut Vec<String>) {
    let what = format!("arm {}", a.name);
    if a.verdict != b.verdict {
        out.push(format!("{what}: verdict {} vs {}", a.verdict, b.verdict));
    }
    let diffs = divergent(&what, &a.steps, &b.steps, out);
    if let Some(&first) = diffs.first() {
        let s = &a.steps[first];
        let n = a.steps.len().min(b.steps.len());
        out.push(format!(
            "{what}: first divergent step {} row {} ({} of {n} step rows differ)",
            s.step,
            s.row,
            diffs.len()
        ));
    } else if a.first_divergence != b.first_divergence || a.mismatched_steps != b.mismatched_steps {
        out.push(format!("{what}: divergence record differs"));
    }
}

pub fn diff(a: &Receipt, b: &Receipt) -> DiffOutcome {
    if a.model.blake3 != b.model.blake3 {
        return DiffOutcome::NotComparable(format!(
            "different models: blake3 {} vs {}",
            a.model.blake3, b.model.blake3
        ));
    }
    if a.reference.tokens != b.reference.tokens {
        let i = a
            .reference
            .tokens
            .iter()
            .zip(&b.reference.tokens)
            .position(|(x, y)| x != y);
        return DiffOutcome::NotComparable(match i {
            Some(i) => format!(
                "different tokens: first at position {i} ({} vs {})",
                a.reference.tokens[i], b.reference.tokens[i]
            ),
            None => format!(
                "different tape lengths: {} vs {}",
                a.reference.tokens.len(),
                b.reference.tokens.len()
            ),
        });
    }
    let mut out = Vec::new();
    // The measured residency is compared only when both receipts carry it (older ones do
    // not); the rest of the placement always.
    let (ra, rb) = (&a.placement.resident, &b.placement.resident);
    if !ra.is_empty() && !rb.is_empty() && ra != rb {
        out.push("placement: measured residency differs".to_string());
    }
    let (mut pa, mut pb) = (a.placement.clone(), b.placement.clone());
    (pa.resident, pb.resident) = (Vec::new(), Vec::new());
    if pa != pb {
        out.push(format!(
            "placement: {} vs {}",
            a.placement.flags, b.placement.flags
        ));
    }
    if a.config != b.config {
        out.push("config differs".to_string());
    }
    cmp_reference("reference", &a.reference, &b.reference, &mut out);
    if a.batch_references.len() != b.batch_references.len() {
        out.push(format!(
            "batch references: {} rows vs {}",
            a.batch_references.len(),
            b.batch_references.len()
        ));
    }
    for (x, y) in a.batch_references.iter().zip(&b.batch_references) {
        if x.tokens != y.tokens {
            out.push(format!("batch reference row {}: different tokens", x.row));
        } else {
            cmp_reference(&format!("batch reference row {}", x.row), x, y, &mut out);
        }
    }
    for arm in &a.arms {
        match b.arms.iter().find(|y| y.name == arm.name) {
            Some(y) => cmp_arm(arm, y, &mut out),
            None => out.push(format!("arm {}: missing from the second receipt", arm.name)),
        }
    }
    for y in &b.arms {
        if !a.arms.iter().any(|x| x.name == y.name) {
            out.push(format!("arm {}: missing from the first receipt", y.name));
        }
    }
    if a.verdict != b.verdict {
        out.push(format!("verdict {} vs {}", a.verdict, b.verdict));
    }
    if out.is_empty() {
        DiffOutcome::Same
    } else {
        DiffOutcome::Different(out)
    }
}
