//! Receipt comparison: the deterministic parts, step by step.
//!
//! Outcome: Same (exit 0), Different (exit 1: names the first divergent step of every part
//! that differs), NotComparable (exit 2: different model or tokens, so a step-by-step
//! comparison would mean nothing).

use serde::Serialize;

use super::{Arm, Receipt, Reference, StepKey};

/// Schema of `diff --json`.
pub const DIFF_SCHEMA: &str = "ppn-gate.diff/1";

#[derive(Debug, PartialEq)]
pub enum DiffOutcome {
    Same,
    Different(Vec<String>),
    NotComparable(String),
}

/// One step list compared (a reference or an arm), for `diff --json`.
#[derive(Debug, PartialEq, Serialize)]
pub struct PartDiff {
    /// "reference", "batch reference row R", or the arm's name.
    pub name: String,
    /// Arms only: each receipt's verdict (null: the arm is missing from that receipt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict_a: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict_b: Option<Option<String>>,
    pub steps_a: usize,
    pub steps_b: usize,
    /// The first step (and row) whose logits hash differs; where the shorter list agrees
    /// with the longer one's start, the longer one's first extra step. Null: no difference.
    pub first_divergent_step: Option<usize>,
    pub first_divergent_row: Option<usize>,
    /// The prime/verify arms: the first divergent step's repeat and chunk, or round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_divergent_key: Option<StepKey>,
    /// Entries of the common length that differ.
    pub differing: usize,
}

/// Everything `diff` found: the outcome (text lines and exit code) and, for `--json`, each
/// compared step list.
#[derive(Debug, PartialEq)]
pub struct DiffDetail {
    pub outcome: DiffOutcome,
    pub references: Vec<PartDiff>,
    pub arms: Vec<PartDiff>,
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

/// The structured record of one compared list; `at(i)` is the (step, row) of entry i.
fn part(
    name: String,
    (la, lb): (usize, usize),
    diffs: &[usize],
    at: impl Fn(usize) -> (usize, usize),
) -> PartDiff {
    let first = diffs
        .first()
        .copied()
        .or((la != lb).then_some(la.min(lb)))
        .map(at);
    PartDiff {
        name,
        verdict_a: None,
        verdict_b: None,
        steps_a: la,
        steps_b: lb,
        first_divergent_step: first.map(|f| f.0),
        first_divergent_row: first.map(|f| f.1),
        first_divergent_key: None,
        differing: diffs.len(),
    }
}

fn cmp_reference(what: &str, a: &Reference, b: &Reference, out: &mut Vec<String>) -> PartDiff {
    let diffs = divergent(what, &a.steps, &b.steps, out);
    if let Some(&first) = diffs.first() {
        let n = a.steps.len().min(b.steps.len());
        out.push(format!(
            "{what}: first divergent step {} ({} of {n} steps differ)",
            a.steps[first].step,
            diffs.len()
        ));
    }
    let longer = if a.steps.len() >= b.steps.len() { a } else { b };
    part(
        what.to_string(),
        (a.steps.len(), b.steps.len()),
        &diffs,
        |i| (longer.steps[i].step, a.row),
    )
}

fn cmp_arm(a: &Arm, b: &Arm, out: &mut Vec<String>) -> PartDiff {
    let what = format!("arm {}", a.name);
    if a.verdict != b.verdict {
        out.push(format!("{what}: verdict {} vs {}", a.verdict, b.verdict));
    }
    let diffs = divergent(&what, &a.steps, &b.steps, out);
    if let Some(&first) = diffs.first() {
        let s = &a.steps[first];
        let n = a.steps.len().min(b.steps.len());
        out.push(format!(
            "{what}: first divergent step {}{} row {} ({} of {n} step rows differ)",
            s.step,
            s.key.describe(),
            s.row,
            diffs.len()
        ));
    } else if a.first_divergence != b.first_divergence || a.mismatched_steps != b.mismatched_steps {
        out.push(format!("{what}: divergence record differs"));
    }
    let longer = if a.steps.len() >= b.steps.len() { a } else { b };
    let mut p = part(
        a.name.clone(),
        (a.steps.len(), b.steps.len()),
        &diffs,
        |i| (longer.steps[i].step, longer.steps[i].row),
    );
    p.verdict_a = Some(Some(a.verdict.clone()));
    p.verdict_b = Some(Some(b.verdict.clone()));
    let first = diffs
        .first()
        .copied()
        .or((a.steps.len() != b.steps.len()).then_some(a.steps.len().min(b.steps.len())));
    p.first_divergent_key = first
        .map(|i| longer.steps[i].key)
        .filter(|k| *k != StepKey::default());
    // The verify arm's rounds: where the acceptance sequences part.
    if a.rounds != b.rounds {
        let k = a.rounds.iter().zip(&b.rounds).position(|(x, y)| x != y);
        out.push(match k {
            Some(k) => format!(
                "{what}: round {k} differs (start {} vs {}, accepted {} vs {})",
                a.rounds[k].start, b.rounds[k].start, a.rounds[k].accepted, b.rounds[k].accepted
            ),
            None => format!("{what}: {} rounds vs {}", a.rounds.len(), b.rounds.len()),
        });
    }
    p
}

/// An arm present in only one receipt: every one of its steps is a difference.
fn lone_arm(x: &Arm, in_a: bool) -> PartDiff {
    let n = x.steps.len();
    let first = x.steps.first();
    let v = Some(Some(x.verdict.clone()));
    PartDiff {
        name: x.name.clone(),
        verdict_a: if in_a { v.clone() } else { Some(None) },
        verdict_b: if in_a { Some(None) } else { v },
        steps_a: if in_a { n } else { 0 },
        steps_b: if in_a { 0 } else { n },
        first_divergent_step: first.map(|s| s.step),
        first_divergent_row: first.map(|s| s.row),
        first_divergent_key: first.map(|s| s.key).filter(|k| *k != StepKey::default()),
        differing: 0,
    }
}

impl DiffDetail {
    /// The `diff --json` document. `a`, `b`: the paths as given.
    pub fn to_json(&self, a: &str, b: &str) -> serde_json::Value {
        let (verdict, exit, reason, lines) = match &self.outcome {
            DiffOutcome::Same => ("same", 0, None, &[][..]),
            DiffOutcome::Different(l) => ("different", 1, None, &l[..]),
            DiffOutcome::NotComparable(why) => ("not-comparable", 2, Some(why), &[][..]),
        };
        serde_json::json!({
            "schema": DIFF_SCHEMA,
            "a": a,
            "b": b,
            "verdict": verdict,
            "exit_code": exit,
            "reason": reason,
            "differences": lines,
            "references": self.references,
            "arms": self.arms,
        })
    }
}

pub fn diff(a: &Receipt, b: &Receipt) -> DiffOutcome {
    diff_detail(a, b).outcome
}

/// `diff`, with each compared step list recorded.
pub fn diff_detail(a: &Receipt, b: &Receipt) -> DiffDetail {
    let not_comparable = |why: String| DiffDetail {
        outcome: DiffOutcome::NotComparable(why),
        references: Vec::new(),
        arms: Vec::new(),
    };
    if a.model.blake3 != b.model.blake3 {
        return not_comparable(format!(
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
        return not_comparable(match i {
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
    // Which host and pid ran a member is not part of the gate's result.
    for p in [&mut pa, &mut pb] {
        if let Some(ps) = &mut p.processes {
            *ps = ps.iter().map(|x| x.placement_view()).collect();
        }
    }
    if pa != pb {
        // Same flags, other placement: say what differs (e.g. one process vs several).
        let procs = |p: &crate::receipt::PlacementInfo| match &p.processes {
            None => "one process".to_string(),
            Some(v) => format!("{} processes", v.len()),
        };
        let detail = if a.placement.flags == b.placement.flags {
            format!(
                " (transports [{}] in {} vs [{}] in {})",
                a.placement.transports.join(","),
                procs(&a.placement),
                b.placement.transports.join(","),
                procs(&b.placement)
            )
        } else {
            String::new()
        };
        out.push(format!(
            "placement: {} vs {}{detail}",
            a.placement.flags, b.placement.flags
        ));
    }
    if a.config != b.config {
        out.push("config differs".to_string());
    }
    let mut references = vec![cmp_reference(
        "reference",
        &a.reference,
        &b.reference,
        &mut out,
    )];
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
            let what = format!("batch reference row {}", x.row);
            references.push(cmp_reference(&what, x, y, &mut out));
        }
    }
    let mut arms = Vec::new();
    for arm in &a.arms {
        match b.arms.iter().find(|y| y.name == arm.name) {
            Some(y) => arms.push(cmp_arm(arm, y, &mut out)),
            None => {
                out.push(format!("arm {}: missing from the second receipt", arm.name));
                arms.push(lone_arm(arm, true));
            }
        }
    }
    for y in &b.arms {
        if !a.arms.iter().any(|x| x.name == y.name) {
            out.push(format!("arm {}: missing from the first receipt", y.name));
            arms.push(lone_arm(y, false));
        }
    }
    if a.verdict != b.verdict {
        out.push(format!("verdict {} vs {}", a.verdict, b.verdict));
    }
    DiffDetail {
        outcome: if out.is_empty() {
            DiffOutcome::Same
        } else {
            DiffOutcome::Different(out)
        },
        references,
        arms,
    }
}
