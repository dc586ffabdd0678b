//! Receipt comparison: every deterministic field (`super::FIELDS` says which are), by path.
//!
//! Outcome: Same (exit 0), Different (exit 1: each differing field by its path with both
//! values, `config.window: 3 vs 2`, and each step list's first divergent step), NotComparable
//! (exit 2: different model or tokens, so a step-by-step comparison would mean nothing).
//!
//! The comparison walks both receipts as written (their typed form, so a field an older
//! receipt lacks reads as its default) and is symmetric: `diff a b` and `diff b a` find the
//! same fields. Arms are matched by name, a repeated name by its occurrence (`arms[eager#2]`
//! is the second arm named eager), never the first match twice.

use serde::Serialize;
use serde_json::Value;

use super::{field_class, Arm, ArmStep, FieldClass, Receipt, Reference, StepKey};

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
    /// Every differing field, in the order the text lines name them.
    pub fields: Vec<FieldDiff>,
    pub references: Vec<PartDiff>,
    pub arms: Vec<PartDiff>,
}

/// One differing field: its path (`config.window`, `arms[eager].steps[5].logits_blake3`) and
/// each receipt's value (None: the field is absent from that receipt). `entries`: the values
/// are the lengths of the list at `path` (the lists differ in length).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldDiff {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b: Option<Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub entries: bool,
}

impl FieldDiff {
    /// The text line: `path: A vs B`.
    pub fn line(&self) -> String {
        let show = |v: &Option<Value>| match v {
            None => "absent".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        };
        let unit = if self.entries { " entries" } else { "" };
        format!(
            "{}: {}{unit} vs {}",
            self.path,
            show(&self.a),
            show(&self.b)
        )
    }
}

/// The indices of the common length whose entries differ.
fn divergent<T: PartialEq>(a: &[T], b: &[T]) -> Vec<usize> {
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

fn cmp_reference(what: &str, a: &Reference, b: &Reference) -> PartDiff {
    let diffs = divergent(&a.steps, &b.steps);
    let longer = if a.steps.len() >= b.steps.len() { a } else { b };
    part(
        what.to_string(),
        (a.steps.len(), b.steps.len()),
        &diffs,
        |i| (longer.steps[i].step, a.row),
    )
}

fn cmp_arm(label: &str, a: &Arm, b: &Arm) -> PartDiff {
    let diffs = divergent(&a.steps, &b.steps);
    let longer = if a.steps.len() >= b.steps.len() { a } else { b };
    let mut p = part(
        label.to_string(),
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
    p
}

/// An arm present in only one receipt: every one of its steps is a difference.
fn lone_arm(label: &str, x: &Arm, in_a: bool) -> PartDiff {
    let n = x.steps.len();
    let first = x.steps.first();
    let v = Some(Some(x.verdict.clone()));
    PartDiff {
        name: label.to_string(),
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

/// Each arm's label: its name, or for the k-th arm of a repeated name (k >= 2) `name#k`. The
/// two receipts' arms are paired by label, so a repeated arm pairs with the other receipt's
/// arm of the same occurrence (or with none), the same way in either order.
fn arm_labels<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    names
        .map(|n| {
            let k = match seen.iter_mut().find(|(m, _)| *m == n) {
                Some((_, k)) => {
                    *k += 1;
                    *k
                }
                None => {
                    seen.push((n, 1));
                    1
                }
            };
            if k == 1 {
                n.to_string()
            } else {
                format!("{n}#{k}")
            }
        })
        .collect()
}

/// The labels of both lists, paired: a's order, then b's labels a lacks.
fn paired_labels(la: &[String], lb: &[String]) -> Vec<(String, Option<usize>, Option<usize>)> {
    let mut v: Vec<_> = la
        .iter()
        .enumerate()
        .map(|(i, l)| (l.clone(), Some(i), lb.iter().position(|m| m == l)))
        .collect();
    for (j, l) in lb.iter().enumerate() {
        if !la.contains(l) {
            v.push((l.clone(), None, Some(j)));
        }
    }
    v
}

/// At most this many entries of one scalar list (tokens, devices) are named one by one; the
/// rest are counted.
const LIST_NAMED: usize = 8;

/// The lists whose entries are steps or rounds: long, so a difference is named by its first
/// differing entry (every differing field of it) and counted, not listed entry by entry.
const STEP_LISTS: [&str; 6] = [
    "reference.steps",
    "batch_references[].steps",
    "arms[].steps",
    "arms[].rounds",
    "arms[].serve.requests",
    "arms[].serve.schedule",
];

/// A value as a field difference records it: whole where it is short, else a summary (a lone
/// arm's hundred steps are named by the arm's path, not printed).
fn brief(v: &Value) -> Value {
    if v.to_string().len() <= 120 {
        return v.clone();
    }
    match v {
        Value::Array(a) => Value::String(format!("<{} entries>", a.len())),
        Value::Object(o) => match (o.get("verdict"), o.get("steps")) {
            (Some(Value::String(verdict)), Some(Value::Array(st))) => {
                Value::String(format!("<verdict {verdict}, {} steps>", st.len()))
            }
            _ => Value::String(format!("<{} fields>", o.len())),
        },
        Value::String(s) => Value::String(format!("{}…", s.chars().take(100).collect::<String>())),
        _ => v.clone(),
    }
}

/// The field-by-field comparison of two receipts' JSON (their typed form written again).
#[derive(Default)]
struct Walk {
    fields: Vec<FieldDiff>,
    lines: Vec<String>,
    /// `diff --ignore`: normalized paths left out, each with what it covers below it.
    ignore: Vec<String>,
}

impl Walk {
    fn push(&mut self, path: &str, a: Option<&Value>, b: Option<&Value>) {
        let d = FieldDiff {
            path: path.to_string(),
            a: a.map(brief),
            b: b.map(brief),
            entries: false,
        };
        self.lines.push(d.line());
        self.fields.push(d);
    }

    fn push_len(&mut self, path: &str, la: usize, lb: usize) {
        let d = FieldDiff {
            path: path.to_string(),
            a: Some(la.into()),
            b: Some(lb.into()),
            entries: true,
        };
        self.lines.push(d.line());
        self.fields.push(d);
    }

    /// Compares the field at `path` (shown) / `norm` (indices as `[]`, the table's form).
    fn field(&mut self, path: &str, norm: &str, a: Option<&Value>, b: Option<&Value>) {
        let class = field_class(norm);
        if !class.compared() || self.ignore.iter().any(|i| covers(i, norm)) {
            return;
        }
        // A recorded field reads as absent where it is null or an empty list: how a receipt
        // older than the record reads (`placement.resident` defaults to empty).
        let own_recorded = class == FieldClass::WhenRecorded
            && super::field_rule(norm).is_some_and(|r| r.path == norm);
        let unrecorded = |v: &&Value| v.is_null() || v.as_array().is_some_and(|l| l.is_empty());
        let (a, b) = if own_recorded {
            (a.filter(|v| !unrecorded(v)), b.filter(|v| !unrecorded(v)))
        } else {
            (a, b)
        };
        let (a, b) = match (a, b) {
            (None, None) => return,
            (Some(a), Some(b)) => (a, b),
            // Only the recorded field's own absence is forgiven, not a key inside it.
            _ if own_recorded => return,
            (a, b) => return self.push(path, a, b),
        };
        if a == b {
            return;
        }
        match (a, b) {
            (Value::Array(x), Value::Array(y)) if norm == "arms" => self.arms(x, y),
            (Value::Array(x), Value::Array(y)) if STEP_LISTS.contains(&norm) => {
                self.step_list(path, norm, x, y)
            }
            (Value::Array(x), Value::Array(y)) => self.list(path, norm, x, y),
            (Value::Object(x), Value::Object(y)) => {
                // Rows of other tokens: their steps are not comparable, the tokens say why.
                let other_tokens =
                    norm == "batch_references[]" && x.get("tokens") != y.get("tokens");
                let keys = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k)));
                for k in keys {
                    if other_tokens && k == "steps" {
                        self.lines
                            .push(format!("{path}: different tokens, steps not compared"));
                        continue;
                    }
                    let join = |p: &str| {
                        if p.is_empty() {
                            k.clone()
                        } else {
                            format!("{p}.{k}")
                        }
                    };
                    self.field(&join(path), &join(norm), x.get(k), y.get(k));
                }
            }
            (Value::String(x), Value::String(y)) if class == FieldClass::DeviceName => {
                if super::device_name_key(x) != super::device_name_key(y) {
                    self.push(path, Some(a), Some(b));
                }
            }
            _ => self.push(path, Some(a), Some(b)),
        }
    }

    /// A list entry by entry: a list of scalars of another length is one difference (both
    /// lists); else each differing entry, the first LIST_NAMED named and the rest counted.
    fn list(&mut self, path: &str, norm: &str, x: &[Value], y: &[Value]) {
        let scalar = |v: &Value| !v.is_array() && !v.is_object();
        if x.len() != y.len() {
            if x.iter().chain(y).all(scalar) {
                return self.push(path, Some(&Value::from(x)), Some(&Value::from(y)));
            }
            self.push_len(path, x.len(), y.len());
        }
        let diffs = divergent(x, y);
        for &i in diffs.iter().take(LIST_NAMED) {
            self.field(
                &format!("{path}[{i}]"),
                &format!("{norm}[]"),
                Some(&x[i]),
                Some(&y[i]),
            );
        }
        if diffs.len() > LIST_NAMED {
            self.lines.push(format!(
                "{path}: {} of {} entries differ (the first {LIST_NAMED} named)",
                diffs.len(),
                x.len().min(y.len())
            ));
        }
    }

    /// A step (or round) list: its length, every field of its first differing entry, and the
    /// count of differing entries, in the words of the part (`arm pipelined: first divergent
    /// step 5 row 0 (1 of 16 step rows differ)`).
    fn step_list(&mut self, path: &str, norm: &str, x: &[Value], y: &[Value]) {
        if x.len() != y.len() {
            self.push_len(path, x.len(), y.len());
        }
        let diffs = divergent(x, y);
        let Some(&first) = diffs.first() else {
            return;
        };
        self.field(
            &format!("{path}[{first}]"),
            &format!("{norm}[]"),
            Some(&x[first]),
            Some(&y[first]),
        );
        let n = x.len().min(y.len());
        let owner = path.rsplit_once('.').map_or(path, |p| p.0);
        let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let e = &x[first];
        self.lines.push(match norm {
            "arms[].rounds" => format!(
                "arm {}: round {} differs (start {} vs {}, accepted {} vs {}; {} of {n} rounds differ)",
                arm_label_of(owner),
                num(e, "round"),
                num(e, "start"),
                num(&y[first], "start"),
                num(e, "accepted"),
                num(&y[first], "accepted"),
                diffs.len()
            ),
            "arms[].steps" => {
                let key = serde_json::from_value::<ArmStep>(e.clone())
                    .map(|s| s.key.describe())
                    .unwrap_or_default();
                format!(
                    "arm {}: first divergent step {}{key} row {} ({} of {n} step rows differ)",
                    arm_label_of(owner),
                    num(e, "step"),
                    num(e, "row"),
                    diffs.len()
                )
            }
            _ => format!(
                "{}: first divergent step {} ({} of {n} steps differ)",
                owner,
                num(e, "step"),
                diffs.len()
            ),
        });
    }

    /// The arms, paired by label (name, or name#k for a repeated one).
    fn arms(&mut self, x: &[Value], y: &[Value]) {
        let name = |v: &Value| {
            v.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let lx = arm_labels(
            x.iter()
                .map(name)
                .collect::<Vec<_>>()
                .iter()
                .map(|s| s.as_str()),
        );
        let ly = arm_labels(
            y.iter()
                .map(name)
                .collect::<Vec<_>>()
                .iter()
                .map(|s| s.as_str()),
        );
        for (label, i, j) in paired_labels(&lx, &ly) {
            self.field(
                &format!("arms[{label}]"),
                "arms[]",
                i.map(|i| &x[i]),
                j.map(|j| &y[j]),
            );
        }
    }
}

/// `eager` of `arms[eager]`.
fn arm_label_of(path: &str) -> &str {
    path.strip_prefix("arms[")
        .and_then(|p| p.strip_suffix(']'))
        .unwrap_or(path)
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
            "fields": self.fields,
            "references": self.references,
            "arms": self.arms,
        })
    }
}

pub fn diff(a: &Receipt, b: &Receipt) -> DiffOutcome {
    diff_detail(a, b).outcome
}

/// `diff`, with each differing field and each compared step list recorded.
pub fn diff_detail(a: &Receipt, b: &Receipt) -> DiffDetail {
    let (va, vb) = (as_value(a), as_value(b));
    detail(a, b, &[], &va, &vb)
}

/// A receipt as the JSON the comparison walks (a Receipt always serializes).
fn as_value(r: &Receipt) -> Value {
    serde_json::to_value(r).expect("receipt serializes")
}

/// True when the table path `rule` is `norm` or one of its ancestors.
fn covers(rule: &str, norm: &str) -> bool {
    norm == rule
        || norm
            .strip_prefix(rule)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// Fields `diff --ignore` may leave out: settings and facts ABOUT a run (a flag that
/// changes no bit by design, such as `backend.graphs`, is what a same-bits check varies),
/// never the logits, tokens and verdicts the comparison exists for, nor the model's bytes.
pub fn check_ignore(path: &str) -> Result<String, String> {
    let norm = path.trim();
    const NEVER: [&str; 5] = [
        "reference",
        "batch_references",
        "arms",
        "verdict",
        "model.blake3",
    ];
    if let Some(n) = NEVER.iter().find(|n| covers(n, norm) || covers(norm, n)) {
        return Err(format!(
            "--ignore {path}: {n} is what diff compares (logits, tokens, verdicts, the model's bytes); it cannot be ignored"
        ));
    }
    if norm.is_empty() || super::field_rule(norm).is_none() {
        let known: Vec<&str> = super::FIELDS
            .iter()
            .map(|r| r.path)
            .filter(|p| !NEVER.iter().any(|n| covers(n, p)))
            .collect();
        return Err(format!(
            "--ignore {path}: not a receipt field; one of: {}",
            known.join(", ")
        ));
    }
    Ok(norm.to_string())
}

/// `--ignore PATH` where PATH goes on below a plain value of `v` (`config.seed.x`): the
/// table covers it by its ancestor's row, so `check_ignore` passes it, yet it names nothing
/// and would leave out nothing while `diff` printed it as ignored. The error names the value.
fn under_value(v: &Value, path: &str) -> Option<String> {
    let mut at = vec![v];
    let mut walked = String::new();
    for seg in path.split('.') {
        let (key, each) = match seg.strip_suffix("[]") {
            Some(k) => (k, true),
            None => (seg, false),
        };
        let mut next = Vec::new();
        for x in at {
            match x {
                Value::Object(m) => next.extend(m.get(key)),
                Value::Null => {}
                Value::Array(_) => {
                    return Some(format!(
                        "--ignore {path}: {walked} is a list, its entries are {walked}[]"
                    ))
                }
                _ => {
                    return Some(format!(
                        "--ignore {path}: {walked} is a value ({}), nothing lies under it",
                        brief(x)
                    ))
                }
            }
        }
        walked = if walked.is_empty() {
            seg.to_string()
        } else {
            format!("{walked}.{seg}")
        };
        at = if each {
            let mut items = Vec::new();
            for x in next {
                match x {
                    Value::Array(l) => items.extend(l),
                    Value::Null => {}
                    _ => {
                        return Some(format!(
                            "--ignore {path}: {} is not a list ({}), it has no [] entries",
                            walked.strip_suffix("[]").unwrap_or(&walked),
                            brief(x)
                        ))
                    }
                }
            }
            items
        } else {
            next
        };
    }
    None
}

/// `diff_detail` with the fields `ignore` names (each passed by `check_ignore`) left out.
/// A path that goes on below a value of either receipt (`under_value`) is refused, naming
/// the value, before anything is compared: the flag is what is wrong (exit 2, an error),
/// whether or not the receipts are comparable.
pub fn diff_detail_ignoring(
    a: &Receipt,
    b: &Receipt,
    ignore: &[String],
) -> Result<DiffDetail, String> {
    let (va, vb) = (as_value(a), as_value(b));
    if let Some(why) = ignore
        .iter()
        .find_map(|i| under_value(&va, i).or(under_value(&vb, i)))
    {
        return Err(why);
    }
    Ok(detail(a, b, ignore, &va, &vb))
}

/// The comparison of `a` and `b` (serialized as `va`, `vb`), leaving out `ignore`'s fields.
fn detail(a: &Receipt, b: &Receipt, ignore: &[String], va: &Value, vb: &Value) -> DiffDetail {
    let not_comparable = |why: String| DiffDetail {
        outcome: DiffOutcome::NotComparable(why),
        fields: Vec::new(),
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
    let mut walk = Walk {
        ignore: ignore.to_vec(),
        ..Walk::default()
    };
    walk.field("", "", Some(va), Some(vb));

    // The structured per-list records of `--json`.
    let mut references = vec![cmp_reference("reference", &a.reference, &b.reference)];
    for (x, y) in a.batch_references.iter().zip(&b.batch_references) {
        if x.tokens == y.tokens {
            let what = format!("batch reference row {}", x.row);
            references.push(cmp_reference(&what, x, y));
        }
    }
    let la = arm_labels(a.arms.iter().map(|x| x.name.as_str()));
    let lb = arm_labels(b.arms.iter().map(|x| x.name.as_str()));
    let arms = paired_labels(&la, &lb)
        .into_iter()
        .map(|(label, i, j)| match (i, j) {
            (Some(i), Some(j)) => cmp_arm(&label, &a.arms[i], &b.arms[j]),
            (Some(i), None) => lone_arm(&label, &a.arms[i], true),
            (None, Some(j)) => lone_arm(&label, &b.arms[j], false),
            (None, None) => unreachable!("a label comes from one of the receipts"),
        })
        .collect();
    DiffDetail {
        outcome: if walk.lines.is_empty() {
            DiffOutcome::Same
        } else {
            DiffOutcome::Different(walk.lines)
        },
        fields: walk.fields,
        references,
        arms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::{field_rule, FieldError};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeSet;

    /// Real receipts of every kind the goldens hold: eager/pipelined/batched with batch rows
    /// and a tape (version 1), prime/verify with rounds (version 2).
    const GOLDENS: [&str; 4] = [
        "gemma-n4-host-tapeT",
        "builtin-prime-verify-n3-dev011",
        "qwen3-oracle-n3-split2-3-b7-w4",
        "qwen3-oracle-prime-verify-n4-split1-2-3",
    ];

    fn golden(name: &str) -> Value {
        let p = format!("{}/receipts/golden/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let r = Receipt::load(std::path::Path::new(&p)).expect("golden loads");
        serde_json::to_value(&r).unwrap()
    }

    fn parse(v: &Value) -> Receipt {
        Receipt::from_json_value(v).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn detail(a: &Value, b: &Value) -> DiffDetail {
        diff_detail(&parse(a), &parse(b))
    }

    /// `diff a b` and `diff b a`: the same outcome kind and the same fields, values swapped.
    fn assert_symmetric(a: &Value, b: &Value) -> DiffDetail {
        let (ab, ba) = (detail(a, b), detail(b, a));
        let kind = |o: &DiffOutcome| std::mem::discriminant(o);
        assert_eq!(
            kind(&ab.outcome),
            kind(&ba.outcome),
            "{:?} / {:?}",
            ab.outcome,
            ba.outcome
        );
        let set = |d: &DiffDetail, swap: bool| -> BTreeSet<String> {
            d.fields
                .iter()
                .map(|f| {
                    let (x, y) = if swap { (&f.b, &f.a) } else { (&f.a, &f.b) };
                    format!("{} {:?} {:?} {}", f.path, x, y, f.entries)
                })
                .collect()
        };
        assert_eq!(set(&ab, false), set(&ba, true), "{:?}", ab.outcome);
        assert_eq!(ab.arms.len(), ba.arms.len());
        ab
    }

    /// Every leaf of `v` as (JSON pointer, diff path, table path).
    fn leaves(v: &Value) -> Vec<(String, String, String)> {
        fn go(
            v: &Value,
            ptr: String,
            path: String,
            norm: String,
            out: &mut Vec<(String, String, String)>,
        ) {
            let join = |p: &str, k: &str| {
                if p.is_empty() {
                    k.to_string()
                } else {
                    format!("{p}.{k}")
                }
            };
            match v {
                Value::Object(o) => {
                    for (k, x) in o {
                        go(x, format!("{ptr}/{k}"), join(&path, k), join(&norm, k), out);
                    }
                }
                Value::Array(a) if norm == "arms" => {
                    let labels = arm_labels(a.iter().map(|x| x["name"].as_str().unwrap()));
                    for (i, (x, l)) in a.iter().zip(labels).enumerate() {
                        go(
                            x,
                            format!("{ptr}/{i}"),
                            format!("{path}[{l}]"),
                            format!("{norm}[]"),
                            out,
                        );
                    }
                }
                Value::Array(a) => {
                    for (i, x) in a.iter().enumerate() {
                        go(
                            x,
                            format!("{ptr}/{i}"),
                            format!("{path}[{i}]"),
                            format!("{norm}[]"),
                            out,
                        );
                    }
                }
                _ => out.push((ptr, path, norm)),
            }
        }
        let mut out = Vec::new();
        go(v, String::new(), String::new(), String::new(), &mut out);
        out
    }

    /// A planted change: its name, the edit to the receipt, and the lines diff must print.
    type Plant = (&'static str, fn(&mut Value), &'static [&'static str]);

    /// The cases the issue found: cpu vs cuda, the model's header, the devices, jitter, and a
    /// duplicated failing arm, each named by its path both ways.
    #[test]
    fn the_fields_diff_used_to_miss_are_named_by_path_both_ways() {
        let base = golden("gemma-n4-host-tapeT");
        let cases: [Plant; 6] = [
            (
                "kind",
                |r| r["backend"]["kind"] = "cuda".into(),
                &["backend.kind: cpu vs cuda"],
            ),
            (
                "layers",
                |r| r["model"]["n_layers"] = 17.into(),
                &["model.n_layers: 18 vs 17"],
            ),
            (
                "bytes",
                |r| r["model"]["weight_bytes"] = 1.into(),
                &["model.weight_bytes: 246587904 vs 1"],
            ),
            (
                "devices",
                |r| r["backend"]["device_names"][2] = "NVIDIA H200".into(),
                &["backend.device_names[2]: cpu0 (2 threads) vs NVIDIA H200"],
            ),
            (
                "jitter",
                |r| r["backend"]["jitter_us"] = 200.into(),
                &["backend.jitter_us: 0 vs 200"],
            ),
            (
                "window",
                |r| r["config"]["window"] = 2.into(),
                &["config.window: 3 vs 2"],
            ),
        ];
        for (what, edit, want) in cases {
            let mut b = base.clone();
            edit(&mut b);
            let d = assert_symmetric(&base, &b);
            let DiffOutcome::Different(lines) = d.outcome else {
                panic!("{what}: {:?}", d.outcome)
            };
            assert_eq!(
                lines,
                want.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{what}"
            );
            assert!(
                matches!(detail(&b, &base).outcome, DiffOutcome::Different(_)),
                "{what}"
            );
        }
        // A second eager arm that FAILed with no steps: different, whichever receipt is first.
        let mut dup = base.clone();
        let mut extra = dup["arms"][0].clone();
        extra["verdict"] = "FAIL".into();
        extra["steps"] = serde_json::json!([]);
        dup["arms"].as_array_mut().unwrap().push(extra);
        let d = assert_symmetric(&base, &dup);
        assert_eq!(d.fields.len(), 1, "{:?}", d.outcome);
        assert_eq!(d.fields[0].path, "arms[eager#2]");
        assert!(d.fields[0].a.is_none() && d.fields[0].b.is_some());
        let back = detail(&dup, &base);
        assert_eq!(back.fields[0].path, "arms[eager#2]");
        assert!(back.fields[0].b.is_none());
        assert!(back
            .arms
            .iter()
            .any(|p| p.name == "eager#2" && p.verdict_b == Some(None)));
        // The same arm twice in both receipts, the second differing: paired by occurrence.
        let mut dup2 = dup.clone();
        dup2["arms"][3]["verdict"] = "PASS".into();
        let d = assert_symmetric(&dup, &dup2);
        assert_eq!(d.fields[0].line(), "arms[eager#2].verdict: FAIL vs PASS");
    }

    /// What the table calls timings and host facts never makes a difference; the CPU's thread
    /// count is read as a host fact, any other change of a device name is not.
    /// `--ignore PATH` leaves that field (and what lies below it) out and nothing else; the
    /// logits' parts and unknown paths are refused naming the path.
    #[test]
    fn ignore_leaves_out_the_named_field_only() {
        let base = golden("builtin-prime-verify-n3-dev011");
        let mut b = base.clone();
        b["config"]["window"] = 7.into();
        b["backend"]["jitter_us"] = 50.into();
        let ign = |paths: &[&str]| -> Vec<String> {
            paths.iter().map(|p| check_ignore(p).unwrap()).collect()
        };
        let (ra, rb) = (parse(&base), parse(&b));
        let all = diff_detail_ignoring(&ra, &rb, &[]).unwrap();
        assert_eq!(all.fields.len(), 2, "{:?}", all.fields);
        let one = diff_detail_ignoring(&ra, &rb, &ign(&["config.window"])).unwrap();
        assert_eq!(
            one.outcome,
            DiffOutcome::Different(vec!["backend.jitter_us: 0 vs 50".into()])
        );
        let both =
            diff_detail_ignoring(&ra, &rb, &ign(&["config.window", "backend.jitter_us"])).unwrap();
        assert_eq!(both.outcome, DiffOutcome::Same);
        // A parent covers its children; the same ignore list is symmetric.
        let parent =
            diff_detail_ignoring(&rb, &ra, &ign(&["config.window", "backend.jitter_us"])).unwrap();
        assert_eq!(parent.outcome, DiffOutcome::Same);
        // Changed logits are never ignorable.
        let mut c = b.clone();
        c["arms"][0]["steps"][0]["logits_blake3"] = "00".repeat(32).into();
        let d = diff_detail_ignoring(
            &ra,
            &parse(&c),
            &ign(&["config.window", "backend.jitter_us"]),
        )
        .unwrap();
        assert!(matches!(d.outcome, DiffOutcome::Different(_)));
        for bad in [
            "arms",
            "arms[].steps",
            "reference.steps",
            "verdict",
            "model.blake3",
            "",
            "backend.nope",
            "x",
        ] {
            let e = check_ignore(bad).unwrap_err();
            assert!(e.contains(&format!("--ignore {bad}:")), "{bad}: {e}");
        }
        // A path the table covers by an ancestor's row but that goes on below a value of
        // the receipts names nothing: refused (exit 2, by the command), naming the value.
        for (bad, why) in [
            (
                "config.window.x",
                "config.window is a value (3), nothing lies under it",
            ),
            (
                "config.chunks[].x",
                "config.chunks[] is a value (1), nothing lies under it",
            ),
            (
                "placement.fence.x",
                "placement.fence is a list, its entries are placement.fence[]",
            ),
            (
                "config.window[]",
                "config.window is not a list (3), it has no [] entries",
            ),
        ] {
            let e = diff_detail_ignoring(&ra, &ra, &ign(&[bad])).unwrap_err();
            assert_eq!(e, format!("--ignore {bad}: {why}"), "{bad}");
        }
        // Where only the other receipt holds the value, the same.
        assert!(diff_detail_ignoring(&ra, &rb, &ign(&["backend.jitter_us.y"])).is_err());
        // An absent field and a list's entries are walked, not refused.
        let ok = ign(&["backend.graphs", "config.faults[]", "placement.fence[]"]);
        assert_eq!(
            diff_detail_ignoring(&ra, &ra, &ok).unwrap().outcome,
            DiffOutcome::Same
        );
    }

    #[test]
    fn timings_and_host_facts_are_not_compared() {
        let base = golden("builtin-prime-verify-n3-dev011");
        let mut b = base.clone();
        b["timings"]["total_ms"] = 1.0e9.into();
        b["timings"]["arm_ms"] = serde_json::json!([1.0]);
        b["tool"]["git_commit"] = "0".repeat(40).into();
        b["tool"]["version"] = "9.9.9".into();
        b["schema"] = "ppn-gate.receipt/1".into();
        b["model"]["file"] = "/elsewhere/builtin.gguf".into();
        b["config"]["tape"] = "/elsewhere/t.json".into();
        b["backend"]["device_names"][0] = "cpu0 (64 threads)".into();
        assert_eq!(detail(&base, &b).outcome, DiffOutcome::Same);
        // A member process's host, pid and build time: host facts; its devices: compared.
        let proc = |host: &str, pid: u32, dev: &str| {
            serde_json::json!([{"rank": 0, "stages": [0, 1, 2], "devices": [0, 1, 1],
                "device_names": [dev], "link_in": null, "link_out": null, "host": host,
                "pid": pid, "reference_blake3": "ab", "build_ms": pid as f64}])
        };
        let (mut p, mut q) = (base.clone(), base.clone());
        p["placement"]["processes"] = proc("node-a", 10, "cpu0 (2 threads)");
        q["placement"]["processes"] = proc("node-b", 99, "cpu0 (16 threads)");
        assert_eq!(detail(&p, &q).outcome, DiffOutcome::Same);
        q["placement"]["processes"] = proc("node-b", 99, "cpu1 (16 threads)");
        let d = assert_symmetric(&p, &q);
        assert_eq!(
            d.outcome,
            DiffOutcome::Different(vec![
                "placement.processes[0].device_names[0]: cpu0 (2 threads) vs cpu1 (16 threads)"
                    .into()
            ])
        );
        // One process vs several: named, not "same".
        let d = assert_symmetric(&base, &p);
        assert_eq!(d.fields[0].path, "placement.processes");
        assert!(d.fields[0].a.is_none());
    }

    /// Every field of the real receipts has a row in the table (its own or an ancestor's),
    /// and the README's table names every row.
    #[test]
    fn every_receipt_field_has_a_rule_and_the_readme_names_each() {
        for g in GOLDENS {
            for (_, path, norm) in leaves(&golden(g)) {
                assert!(
                    field_rule(&norm).is_some(),
                    "{g}: {path} has no rule in FIELDS"
                );
            }
        }
        let readme = include_str!("../../README.md");
        for r in crate::receipt::FIELDS {
            assert!(
                readme.contains(&format!("| `{}` |", r.path)),
                "README lacks {}",
                r.path
            );
        }
    }

    /// The JSON pointer of a diff path with numeric indices (`arms[0].steps[3].x`).
    fn pointer_of(path: &str) -> String {
        let mut p = String::new();
        for part in path.split('.') {
            let mut it = part.split('[');
            p.push('/');
            p.push_str(it.next().unwrap());
            for idx in it {
                p.push('/');
                p.push_str(idx.trim_end_matches(']'));
            }
        }
        p
    }

    /// Random mutations of real receipts: change, remove or add fields, duplicate or remove
    /// arms and steps (one to three at a time). Every case: `diff a b` and `diff b a` agree,
    /// a changed compared field is never `same` (and alone, is named by its path), a change
    /// of timings or host facts only is `same`, and an unknown or missing field is refused
    /// naming its path.
    #[test]
    fn random_mutations_diff_symmetrically_and_name_the_field() {
        let mut rng = ChaCha8Rng::seed_from_u64(25);
        let bases: Vec<Value> = GOLDENS.iter().map(|g| golden(g)).collect();
        let (mut same, mut different, mut unknown, mut missing, mut incomparable) = (0, 0, 0, 0, 0);
        let cases = 500;
        for case in 0..cases {
            let base = &bases[case % bases.len()];
            let mut b = base.clone();
            let n_mut = rng.gen_range(1..=3);
            // Whether a compared field changed, and the path of a lone changed leaf.
            let (mut compared, mut lone_leaf) = (false, None);
            let mut duplicated_arm = false;
            for _ in 0..n_mut {
                let ls = leaves(&b);
                match rng.gen_range(0..8) {
                    // Change one leaf in place (numbers up, strings longer: never back).
                    0..=3 => {
                        let (ptr, path, norm) = &ls[rng.gen_range(0..ls.len())];
                        let new = match b.pointer(ptr).unwrap() {
                            Value::Number(n) if n.is_u64() => {
                                (n.as_u64().unwrap() + rng.gen_range(1..4u64)).into()
                            }
                            Value::Number(n) => (n.as_f64().unwrap() + 0.5).into(),
                            Value::String(s) => format!("{s}x").into(),
                            _ => continue, // null: no same-typed other value
                        };
                        *b.pointer_mut(ptr).unwrap() = new;
                        if field_class(norm).compared() {
                            compared = true;
                            if n_mut == 1 && !ptr.ends_with("/name") {
                                lone_leaf = Some(path.clone());
                            }
                        }
                    }
                    // Remove an object key.
                    4 => {
                        let (ptr, _, norm) = &ls[rng.gen_range(0..ls.len())];
                        let (parent, key) = ptr.rsplit_once('/').unwrap();
                        let Some(Value::Object(o)) = b.pointer_mut(parent) else {
                            continue;
                        };
                        let old = o.remove(key).unwrap();
                        let recorded = field_rule(norm)
                            .is_some_and(|r| r.path == norm && r.class == FieldClass::WhenRecorded);
                        let empty = old.is_null() || old.as_array().is_some_and(|a| a.is_empty());
                        if field_class(norm).compared() && !recorded && !empty {
                            compared = true;
                        }
                    }
                    // Duplicate an arm (a failing copy with fewer steps), or remove one.
                    5 => {
                        let arms = b["arms"].as_array_mut().unwrap();
                        if duplicated_arm || arms.len() == 1 || rng.gen_bool(0.5) {
                            let mut x = arms[rng.gen_range(0..arms.len())].clone();
                            x["verdict"] = "FAIL".into();
                            x["steps"]
                                .as_array_mut()
                                .unwrap()
                                .truncate(rng.gen_range(0..3));
                            arms.push(x);
                            duplicated_arm = true;
                        } else {
                            arms.remove(rng.gen_range(0..arms.len()));
                        }
                        compared = true;
                    }
                    // Remove a step of a step list, or duplicate one (once a case).
                    _ => {
                        let list = if rng.gen_bool(0.3) {
                            "/reference/steps".to_string()
                        } else {
                            let k = rng.gen_range(0..b["arms"].as_array().unwrap().len());
                            format!("/arms/{k}/steps")
                        };
                        let steps = b.pointer_mut(&list).unwrap().as_array_mut().unwrap();
                        if steps.is_empty() {
                            continue;
                        }
                        let i = rng.gen_range(0..steps.len());
                        if n_mut == 1 && rng.gen_bool(0.5) {
                            let x = steps[i].clone();
                            steps.insert(i, x);
                        } else {
                            steps.remove(i);
                        }
                        compared = true;
                    }
                }
            }
            // Last, sometimes: a key the schema does not have, somewhere.
            let mut planted = false;
            if rng.gen_bool(0.12) {
                let ls = leaves(&b);
                let (ptr, _, _) = &ls[rng.gen_range(0..ls.len())];
                let parent = ptr.rsplit_once('/').unwrap().0.to_string();
                if let Some(Value::Object(o)) = b.pointer_mut(&parent) {
                    o.insert("zz_unknown".into(), 1.into());
                    planted = true;
                }
            }
            let r = match Receipt::from_json_value(&b) {
                Err(FieldError::Unknown(f)) => {
                    unknown += 1;
                    assert!(planted, "case {case}: {f} refused, none planted");
                    assert_eq!(
                        b.pointer(&pointer_of(&f)),
                        Some(&Value::from(1)),
                        "case {case}: {f}"
                    );
                    assert!(
                        f.ends_with(".zz_unknown") || f == "zz_unknown",
                        "case {case}: {f}"
                    );
                    continue;
                }
                Err(FieldError::Bad { field, err }) => {
                    missing += 1;
                    // A removed required field, named by its own path.
                    assert_eq!(err, "missing", "case {case}: {field}");
                    let ptr = pointer_of(&field);
                    let (parent, _) = ptr.rsplit_once('/').unwrap();
                    assert!(
                        b.pointer(parent).is_some_and(Value::is_object),
                        "case {case}: {field}"
                    );
                    assert!(b.pointer(&ptr).is_none(), "case {case}: {field}");
                    continue;
                }
                Ok(r) => r,
            };
            assert!(!planted, "case {case}: an unknown key was accepted");
            let bv = serde_json::to_value(&r).unwrap();
            let d = assert_symmetric(base, &bv);
            match &d.outcome {
                DiffOutcome::Same => {
                    same += 1;
                    assert!(
                        !compared,
                        "case {case}: a compared field changed, diff says same"
                    );
                }
                DiffOutcome::Different(lines) => {
                    different += 1;
                    assert!(compared, "case {case}: only host facts changed: {lines:?}");
                    assert!(!d.fields.is_empty(), "case {case}: {lines:?}");
                    if let Some(p) = &lone_leaf {
                        let f: Vec<&str> = d.fields.iter().map(|f| f.path.as_str()).collect();
                        assert_eq!(f, [p.as_str()], "case {case}: {lines:?}");
                        assert!(
                            lines[0].starts_with(&format!("{p}: ")) && lines[0].contains(" vs "),
                            "{lines:?}"
                        );
                    }
                }
                DiffOutcome::NotComparable(why) => {
                    incomparable += 1;
                    assert!(compared, "case {case}: {why}");
                }
            }
        }
        // Every kind of outcome happened (a generator that made one kind proves little).
        eprintln!("{cases} cases: same {same}, different {different}, unknown field {unknown}, missing field {missing}, not comparable {incomparable}");
        assert!(same > 10 && different > 200 && unknown > 10 && missing > 10 && incomparable > 0);
    }
}
