//! Soak classification: many runs of one gate config, and what their failures say.
//!
//! A deterministic bug fails every run at the same first divergent step; a timing race
//! fails some runs, or fails at different steps. One run that passes next to one that fails
//! is already proof of timing dependence: the inputs were identical.

use serde::{Deserialize, Serialize};

use crate::receipt::Receipt;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub run: usize,
    pub verdict: String,
    /// `(arm, first divergent step)` of each failing arm.
    pub divergences: Vec<(String, usize)>,
    pub receipt: String,
    pub ms: f64,
    /// `soak --trace`: the run's trace file, where one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl RunRecord {
    pub fn from_receipt(run: usize, r: &Receipt, path: String) -> RunRecord {
        RunRecord {
            run,
            verdict: r.verdict.clone(),
            divergences: r
                .arms
                .iter()
                .filter_map(|a| {
                    a.first_divergence
                        .as_ref()
                        .map(|d| (a.name.clone(), d.step))
                })
                .collect(),
            receipt: path,
            ms: r.timings.total_ms,
            trace: None,
        }
    }

    /// The earliest divergent step over all arms.
    pub fn first_step(&self) -> Option<usize> {
        self.divergences.iter().map(|d| d.1).min()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// No run finished (the soak ended on an error or a signal before run 1's receipt was
    /// written): nothing was tested, which "clean" would have said was sound.
    NoRun,
    /// No failure, in one run or more.
    Clean,
    /// Every run failed, each at the same arm/step set (two runs or more).
    Deterministic,
    /// One run, and it failed: nothing to compare it with, so neither deterministic nor
    /// timing-dependent can be said (one failure was called deterministic, a verdict the
    /// soak had no evidence for).
    SingleRun,
    /// Some runs passed, or failing runs diverged at different steps.
    TimingDependent,
}

pub fn classify(runs: &[RunRecord]) -> Class {
    if runs.is_empty() {
        return Class::NoRun;
    }
    let fails: Vec<&RunRecord> = runs.iter().filter(|r| r.verdict != "PASS").collect();
    if fails.is_empty() {
        return Class::Clean;
    }
    if runs.len() == 1 {
        return Class::SingleRun;
    }
    let all_failed = fails.len() == runs.len();
    let same = fails.iter().all(|r| r.divergences == fails[0].divergences);
    if all_failed && same {
        Class::Deterministic
    } else {
        Class::TimingDependent
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub schema: String,
    pub gate_flags: Vec<String>,
    pub runs_requested: usize,
    pub runs_done: usize,
    pub passed: usize,
    pub class: Class,
    /// SIGINT, SIGTERM or SIGHUP arrived: the soak stopped early (or at once, on a second
    /// signal); `runs` lists every run whose receipt is on disk.
    pub interrupted: bool,
    pub runs: Vec<RunRecord>,
    /// The harness error that ended the soak (a run that errored, a receipt that could not
    /// be written): the runs listed are those whose receipts are on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub const SUMMARY_SCHEMA: &str = "ppn-gate.soak/1";

impl Summary {
    pub fn new(gate_flags: Vec<String>, runs_requested: usize) -> Summary {
        Summary {
            schema: SUMMARY_SCHEMA.into(),
            gate_flags,
            runs_requested,
            runs_done: 0,
            passed: 0,
            class: Class::NoRun,
            interrupted: false,
            runs: Vec::new(),
            error: None,
        }
    }

    pub fn push(&mut self, r: RunRecord) {
        if r.verdict == "PASS" {
            self.passed += 1;
        }
        self.runs.push(r);
        self.runs_done = self.runs.len();
        self.class = classify(&self.runs);
    }

    /// Runs that did not pass.
    pub fn failed(&self) -> usize {
        self.runs_done - self.passed
    }

    /// Writes the summary atomically; an error names the file.
    pub fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)? + "\n";
        crate::receipt::write_atomic(path, text.as_bytes()).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("writing soak summary {}: {e}", path.display()),
            )
        })
    }

    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![format!("{}/{} PASS", self.passed, self.runs_done)];
        if self.runs_done < self.runs_requested {
            v[0].push_str(&format!(
                " (interrupted: {} of {} runs done)",
                self.runs_done, self.runs_requested
            ));
        }
        for r in self.runs.iter().filter(|r| r.verdict != "PASS") {
            let d: Vec<String> = r
                .divergences
                .iter()
                .map(|(a, s)| format!("{a}@{s}"))
                .collect();
            v.push(format!(
                "  run {:>3} FAIL first divergence {}",
                r.run,
                d.join(" ")
            ));
        }
        match self.class {
            Class::Clean => {}
            Class::NoRun => v.push("classification: none (no run finished)".into()),
            Class::Deterministic => {
                v.push("classification: deterministic (every run fails at the same step)".into())
            }
            Class::SingleRun => v.push(
                "classification: none from one run (nothing to compare its failure with: --runs 2 or more tells deterministic from timing-dependent)"
                    .into(),
            ),
            Class::TimingDependent => v.push(
                "classification: timing-dependent (failures vary across runs of identical inputs)"
                    .into(),
            ),
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(run: usize, div: &[(&str, usize)]) -> RunRecord {
        RunRecord {
            run,
            verdict: if div.is_empty() { "PASS" } else { "FAIL" }.into(),
            divergences: div.iter().map(|(a, s)| (a.to_string(), *s)).collect(),
            receipt: String::new(),
            ms: 0.0,
            trace: None,
        }
    }

    #[test]
    fn same_step_every_run_is_deterministic() {
        let runs = vec![
            rec(0, &[("pipelined", 5)]),
            rec(1, &[("pipelined", 5)]),
            rec(2, &[("pipelined", 5)]),
        ];
        assert_eq!(classify(&runs), Class::Deterministic);
        assert_eq!(classify(&runs[..2]), Class::Deterministic);
    }

    /// One failing run says nothing about whether the next fails at the same step.
    #[test]
    fn one_failing_run_is_not_classified() {
        assert_eq!(classify(&[rec(0, &[("pipelined", 5)])]), Class::SingleRun);
        assert_eq!(classify(&[rec(0, &[])]), Class::Clean);
        // No run: nothing tested, never "clean" (a soak whose first receipt failed to write).
        assert_eq!(classify(&[]), Class::NoRun);
        assert_eq!(Summary::new(vec![], 3).class, Class::NoRun);
        assert_eq!(serde_json::to_value(Class::NoRun).unwrap(), "no-run");
        let mut s = Summary::new(vec![], 5);
        s.push(rec(1, &[("eager", 0)]));
        let l = s.lines();
        assert!(
            l.last()
                .unwrap()
                .starts_with("classification: none from one run"),
            "{l:?}"
        );
        assert!(!l.iter().any(|x| x.contains("deterministic (")), "{l:?}");
        s.push(rec(2, &[("eager", 0)]));
        assert_eq!(s.class, Class::Deterministic);
    }

    #[test]
    fn differing_steps_or_a_pass_is_timing_dependent() {
        assert_eq!(
            classify(&[rec(0, &[("pipelined", 5)]), rec(1, &[("pipelined", 9)])]),
            Class::TimingDependent
        );
        assert_eq!(
            classify(&[rec(0, &[("pipelined", 5)]), rec(1, &[])]),
            Class::TimingDependent
        );
        assert_eq!(classify(&[rec(0, &[]), rec(1, &[])]), Class::Clean);
    }

    #[test]
    fn summary_counts_and_names_failures() {
        let mut s = Summary::new(vec![], 3);
        s.push(rec(1, &[]));
        s.push(rec(2, &[("batched", 3)]));
        let l = s.lines();
        assert_eq!(l[0], "1/2 PASS (interrupted: 2 of 3 runs done)");
        assert!(
            l[1].contains("run   2 FAIL first divergence batched@3"),
            "{l:?}"
        );
        assert!(l.last().unwrap().contains("timing-dependent"));
    }
}
