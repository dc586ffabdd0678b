//! `ppn-gate hunt`: search the configuration space for a divergence, then shrink it.
//!
//! Each trial draws a configuration (`space`: the distribution, documented there), runs it
//! as a gate in a child process of this binary under a timeout (`trial`), and holds its
//! exit against what the rules expect: a clean trial must PASS; with `--fault F`, a trial
//! whose placement opens F's window (the gate's own rule, `gate::plan::fault_closed`) runs
//! with F and must FAIL, one where F cannot open runs without it and must PASS. Anything
//! else is a finding (`Kind`), never the end of the hunt: it is shrunk (`shrink`), written
//! as a battery file with its receipts, and the hunt goes on. `report` writes hunt.json
//! (after every finding and at the end), the JUnit file and the final table.
//!
//! Below `cli` (which parses flags and passes a parser of gate flags in), above `gate`.

pub mod report;
pub mod shrink;
pub mod space;
pub mod trial;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::arms::ArmKind;
use crate::gate::plan::{check, fault_closed};
use crate::gate::plant::Corner;
use crate::gate::report::verdict_lines;
use crate::gate::GateOptions;
use crate::receipt::Receipt;
use crate::runtime::Fault;
use space::{Draw, Space};
use trial::{run_child, Exit};

/// With `--fault`: trials drawn plainly before the draw favours the fault's window, and
/// the most redraws per trial (`Hunt::draw_trial`).
const FAVOUR_AFTER: usize = 4;
const REDRAWS: usize = 16;
/// Draws tried, before the first trial, for one that opens `--fault`'s window
/// (`Hunt::check_fault_reachable`).
pub const REACH_DRAWS: usize = 4000;

/// What a trial's outcome says against the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A clean trial FAILed: a divergence (or the planted defect).
    Fail,
    /// A trial whose placement opens the fault's window PASSed: the gate missed it.
    BlindSpot,
    /// The gate refused a generated configuration (exit 2): a generator bug.
    Refused,
    /// A panic, an abort, a signal, or an exit code the gate never gives.
    Crash,
    /// Still running at `--timeout-s`: killed.
    Hang,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fail => "fail",
            Kind::BlindSpot => "blind-spot",
            Kind::Refused => "refused",
            Kind::Crash => "crash",
            Kind::Hang => "hang",
        }
    }
}

/// The verdict a trial came back with.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    /// The first FAIL line of its receipt.
    Fail(String),
    Refused(String),
    Crash(String),
    Hang,
    Interrupted,
}

/// A trial's exit 2: the gate refusing the configuration (a finding: the generator drew
/// what the gate does not take), unless its error is the operating system's (`(os error N)`:
/// a full disk under the receipt, a file the hunt wrote gone), which says nothing of the
/// configuration: then the hunt stops as a harness error (exit 2) naming it, rather than
/// report a finding it would shrink against a broken environment.
fn refused_or_environment(stderr_last: &str) -> Result<Verdict> {
    if stderr_last.contains("(os error ") {
        anyhow::bail!(
            "a trial's gate failed on its environment, not its configuration: {stderr_last}"
        );
    }
    Ok(Verdict::Refused(stderr_last.to_string()))
}

/// One evaluated configuration.
#[derive(Clone, Debug)]
pub struct Eval {
    pub verdict: Verdict,
    /// Whether it ran with the hunt's fault (its window opens here).
    pub fault_open: bool,
    pub finding: Option<Kind>,
    /// The gate flags it ran with (the hunt's own and the draw's; no receipt path).
    pub flags: Vec<String>,
    pub receipt: PathBuf,
    pub secs: f64,
}

impl Eval {
    pub fn detail(&self) -> String {
        match &self.verdict {
            Verdict::Pass => "PASS".into(),
            Verdict::Fail(l) | Verdict::Refused(l) | Verdict::Crash(l) => l.clone(),
            Verdict::Hang => "still running at the timeout (killed)".into(),
            Verdict::Interrupted => "interrupted".into(),
        }
    }
}

/// Everything a hunt runs by.
pub struct Hunt<'a> {
    /// This binary (every trial is its child).
    pub exe: PathBuf,
    /// The hunt's directory (absolute): trials/, shrink/, found/, tapes/, hunt.json.
    pub out: PathBuf,
    pub seed: u64,
    pub trials: Option<usize>,
    pub budget: Option<Duration>,
    pub fault: Option<Fault>,
    pub confirm: usize,
    pub timeout: Duration,
    /// `--self-check`: the planted corner (passed to every trial, never to the generator).
    pub corner: Option<Corner>,
    /// Gate flags of every trial: the hunt's pins and carried flags (`--backend`, `--model`).
    pub base_flags: Vec<String>,
    pub space: Space,
    /// Gate flags to options, by the cli's own parser.
    pub parse: &'a dyn Fn(&[String]) -> Result<GateOptions>,
    /// True once the hunt is interrupted (SIGINT, SIGTERM, SIGHUP).
    pub stop: &'a dyn Fn() -> bool,
    pub junit: Option<PathBuf>,
    /// The model's name in the report.
    pub model: String,
    /// Most shrink candidates per finding.
    pub shrink_limit: usize,
}

/// A finding, shrunk.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub name: String,
    pub kind: Kind,
    pub trial: usize,
    pub detail: String,
    /// The draw's flags as found, and shrunk.
    pub found_flags: Vec<String>,
    pub shrunk_flags: Vec<String>,
    pub shrunk: Draw,
    pub shrunk_detail: String,
    /// Of the shrunk configuration's `--confirm` runs, how many reproduced it.
    pub reproduced: usize,
    pub runs: usize,
    pub shrink_tried: usize,
    pub shrink_cut_short: bool,
    /// The one-line command, the battery file and the shrunk runs' receipts.
    pub command: String,
    pub battery: String,
    pub receipts: Vec<String>,
}

/// The hunt's running tallies.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Tally {
    pub trials: usize,
    pub pass: usize,
    /// Trials run with the fault that FAILed as they must.
    pub caught: usize,
    /// Trials where the fault opened (ran with it), and where it could not.
    pub fault_opened: usize,
    pub fault_closed: usize,
    pub refused: usize,
    pub coverage: BTreeMap<&'static str, usize>,
    pub findings: Vec<Finding>,
    pub interrupted: bool,
    pub elapsed_s: f64,
    /// The harness error that ended the hunt (exit 2): what hunt.json says, so the report
    /// read alone is not a clean hunt of fewer trials.
    pub error: Option<String>,
}

impl Hunt<'_> {
    /// The trial flags of a draw: the hunt's, the draw's (its tape written into tapes/),
    /// the planted corner's.
    pub fn flags_of(&self, d: &Draw) -> Result<Vec<String>> {
        let tape = match &d.tape {
            Some(t) => {
                let json = t.json(self.space.vocab);
                let name = format!("{}.json", &blake3::hash(json.as_bytes()).to_hex()[..16]);
                let path = self.out.join("tapes").join(name);
                if !path.exists() {
                    std::fs::create_dir_all(self.out.join("tapes"))
                        .with_context(|| format!("creating {}", self.out.display()))?;
                    crate::fsio::write_atomic(&path, json.as_bytes())
                        .with_context(|| format!("writing tape {}", path.display()))?;
                }
                Some(path.display().to_string())
            }
            None => None,
        };
        let mut f = self.base_flags.clone();
        f.extend(self.space.flags(d, tape.as_deref()));
        if let Some(c) = &self.corner {
            f.push(format!("--plant-defect={c}"));
        }
        Ok(f)
    }

    /// Run one configuration in `dir` and judge it.
    pub fn evaluate(&self, d: &Draw, dir: &Path) -> Result<Eval> {
        let mut flags = self.flags_of(d)?;
        let receipt = dir.join("receipt.json");
        let done = |verdict: Verdict, fault_open: bool, flags: Vec<String>, secs: f64| {
            let finding = match (&verdict, fault_open) {
                (Verdict::Pass, true) => Some(Kind::BlindSpot),
                (Verdict::Pass, false) | (Verdict::Interrupted, _) => None,
                (Verdict::Fail(_), true) => None,
                (Verdict::Fail(_), false) => Some(Kind::Fail),
                (Verdict::Refused(_), _) => Some(Kind::Refused),
                (Verdict::Crash(_), _) => Some(Kind::Crash),
                (Verdict::Hang, _) => Some(Kind::Hang),
            };
            Eval {
                verdict,
                fault_open,
                finding,
                flags,
                receipt: receipt.clone(),
                secs,
            }
        };
        // Refused in process, by the gate's own checks: the child would refuse it too.
        let mut opts = match (self.parse)(&flags) {
            Ok(o) => o,
            Err(e) => return Ok(done(Verdict::Refused(format!("{e:#}")), false, flags, 0.0)),
        };
        let checked = match check(&opts) {
            Ok(c) => c,
            Err(e) => return Ok(done(Verdict::Refused(format!("{e:#}")), false, flags, 0.0)),
        };
        let mut fault_open = false;
        if let Some(f) = self.fault {
            if fault_closed(&opts, &checked.be, &checked.devices, &checked.arms, f).is_none() {
                fault_open = true;
                opts.faults = vec![f.name().to_string()];
                flags.push(format!("--fault={f}"));
            }
        }
        drop(checked);
        opts.receipt = Some(receipt.clone());
        opts.quiet = true;
        let run = run_child(&self.exe, &opts.to_argv(), dir, self.timeout, self.stop)?;
        let last = |s: &str| s.lines().last().unwrap_or("").to_string();
        let verdict = match run.exit {
            Exit::Code(0) => Verdict::Pass,
            Exit::Code(1) => match Receipt::load(&receipt) {
                Ok(r) => Verdict::Fail(
                    verdict_lines(&r)
                        .into_iter()
                        .find(|l| l.contains("FAIL"))
                        .unwrap_or_else(|| format!("verdict {}", r.verdict)),
                ),
                Err(e) => Verdict::Crash(format!("exit 1 without a receipt: {e}")),
            },
            Exit::Code(2) => refused_or_environment(&last(&run.stderr_tail))?,
            Exit::Code(101) => Verdict::Crash(format!("panicked: {}", run.stderr_tail)),
            Exit::Code(c) => Verdict::Crash(format!("exit {c}: {}", last(&run.stderr_tail))),
            Exit::Signal(s) => {
                Verdict::Crash(format!("killed by signal {s}: {}", last(&run.stderr_tail)))
            }
            Exit::Timeout => Verdict::Hang,
            Exit::Interrupted => Verdict::Interrupted,
        };
        Ok(done(verdict, fault_open, flags, run.secs))
    }

    /// A trial's draw. With `--fault F`, once `FAVOUR_AFTER` trials have run and fewer than
    /// a third of them opened F's window (a fault that needs a corner the distribution meets
    /// rarely: stale-cache needs the serve arm with more requests than cache rows), the draw
    /// is redrawn up to `REDRAWS` times until the gate's own rule (`fault_closed`) says F
    /// opens there; the last draw is kept if none does. Without a fault, one draw.
    fn draw_trial(&self, rng: &mut ChaCha8Rng, tally: &Tally) -> Result<Draw> {
        let mut d = self.space.draw(rng);
        let Some(f) = self.fault else {
            return Ok(d);
        };
        if tally.trials < FAVOUR_AFTER || tally.fault_opened * 3 >= tally.trials {
            return Ok(d);
        }
        for _ in 0..REDRAWS {
            if self.opens(&d, f)? {
                break;
            }
            d = self.space.draw(rng);
        }
        Ok(d)
    }

    /// With `--fault F`: some draw of this space must open F's window (the gate's own rule),
    /// tried on up to REACH_DRAWS tape-less draws of a generator of its own (the trials'
    /// draws are unchanged). With none, the flags given keep F shut in every trial the hunt
    /// could run, and a hunt that never tests F must not end as one that found nothing
    /// (`--fault stale-cache --arms eager` ran its trials and exited 0): an error before any
    /// trial, which the CLI turns into exit 2.
    pub fn check_fault_reachable(&self) -> Result<()> {
        let Some(f) = self.fault else {
            return Ok(());
        };
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x9e37_79b9_7f4a_7c15);
        for _ in 0..REACH_DRAWS {
            let d = self.space.draw(&mut rng);
            if d.tape.is_none() && self.opens(&d, f)? {
                return Ok(());
            }
        }
        anyhow::bail!(
            "--fault {f}: its window opened in none of {REACH_DRAWS} configurations drawn with the flags given ({}), so no trial could test it; it opens where {}",
            if self.base_flags.is_empty() {
                "none".to_string()
            } else {
                self.base_flags.join(" ")
            },
            f.needs()
        )
    }

    /// Whether fault `f` opens at draw `d` by the gate's rule (a draw the gate refuses: no;
    /// `evaluate` reports it).
    fn opens(&self, d: &Draw, f: Fault) -> Result<bool> {
        let Ok(opts) = (self.parse)(&self.flags_of(d)?) else {
            return Ok(false);
        };
        Ok(match check(&opts) {
            Ok(c) => fault_closed(&opts, &c.be, &c.devices, &c.arms, f).is_none(),
            Err(_) => false,
        })
    }

    fn finished(&self, t0: Instant, tally: &Tally) -> bool {
        if let Some(n) = self.trials {
            if tally.trials >= n {
                return true;
            }
        }
        self.budget.is_some_and(|b| t0.elapsed() >= b)
    }

    /// The hunt: trials until `--trials` or `--budget` (or an interrupt), each finding
    /// shrunk as found. Returns the tallies (hunt.json already written).
    pub fn run(&self) -> Result<Tally> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut tally = Tally::default();
        let t0 = Instant::now();
        let tty = std::io::stderr().is_terminal();
        report::write(self, &tally)?;
        let r = self.trials_until_done(&mut rng, &mut tally, t0, tty);
        if tty {
            report::progress_clear();
        }
        tally.interrupted |= (self.stop)();
        tally.elapsed_s = t0.elapsed().as_secs_f64();
        if let Err(e) = r {
            tally.error = Some(format!("{e:#}"));
            // Best effort: the error itself is what the command reports.
            let _ = report::write(self, &tally);
            return Err(e);
        }
        report::write(self, &tally)?;
        Ok(tally)
    }

    /// `run`'s loop: trials until done, each finding shrunk and the report rewritten.
    fn trials_until_done(
        &self,
        rng: &mut ChaCha8Rng,
        tally: &mut Tally,
        t0: Instant,
        tty: bool,
    ) -> Result<()> {
        while !self.finished(t0, tally) {
            if (self.stop)() {
                tally.interrupted = true;
                break;
            }
            let d = self.draw_trial(rng, tally)?;
            let i = tally.trials;
            let e = self.evaluate(&d, &self.out.join("trials").join(format!("{i:04}")))?;
            if e.verdict == Verdict::Interrupted {
                tally.interrupted = true;
                break;
            }
            tally.trials += 1;
            for k in self.space.coverage(&d) {
                *tally.coverage.entry(k).or_default() += 1;
            }
            match &e.verdict {
                Verdict::Pass => tally.pass += 1,
                Verdict::Fail(_) if e.fault_open => tally.caught += 1,
                Verdict::Refused(_) => tally.refused += 1,
                _ => {}
            }
            if self.fault.is_some() {
                if e.fault_open {
                    tally.fault_opened += 1;
                } else {
                    tally.fault_closed += 1;
                }
            }
            if let Some(kind) = e.finding {
                if tty {
                    report::progress_clear();
                }
                let draw_flags = self.space.flags(&d, Some("TAPE"));
                // Met before it is shrunk: a second interrupt during the shrink exits 1.
                crate::exit::FAILS_MET.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                outln!(
                    "finding {}: {} at trial {i}: {} [{}]",
                    tally.findings.len() + 1,
                    kind.name(),
                    e.detail(),
                    draw_flags.join(" ")
                );
                let f = self.shrink(&d, kind, i, &e)?;
                outln!(
                    "  shrunk: {} (reproduced {}/{} runs); battery {}",
                    f.command,
                    f.reproduced,
                    f.runs,
                    f.battery
                );
                tally.findings.push(f);
                // The self-check's job is done once it found and shrank its corner.
                if self.corner.is_some() && self.self_check_miss(tally).is_none() {
                    tally.elapsed_s = t0.elapsed().as_secs_f64();
                    report::write(self, tally)?;
                    break;
                }
                tally.elapsed_s = t0.elapsed().as_secs_f64();
                report::write(self, tally)?;
            }
            if tty {
                report::progress(self, tally, t0.elapsed());
            }
        }
        Ok(())
    }

    /// Shrink finding `kind` of draw `d` (trial `trial`), confirm the result `--confirm`
    /// times, write its battery file.
    fn shrink(&self, d: &Draw, kind: Kind, trial: usize, e: &Eval) -> Result<Finding> {
        let name = format!("{}-{trial:04}", kind.name());
        let sdir = self.out.join("shrink").join(&name);
        let mut runs = 0usize;
        let mut err = None;
        let mut reproduces = |c: &Draw| -> Option<bool> {
            for _ in 0..self.confirm {
                runs += 1;
                match self.evaluate(c, &sdir.join(format!("{runs:04}"))) {
                    Ok(x) if x.verdict == Verdict::Interrupted => return None,
                    Ok(x) if x.finding == Some(kind) => return Some(true),
                    Ok(_) => {}
                    Err(e2) => {
                        err = Some(e2);
                        return None;
                    }
                }
            }
            Some(false)
        };
        let s = shrink::minimize(&self.space, d, self.shrink_limit, &mut reproduces);
        if let Some(e2) = err {
            return Err(e2);
        }
        // The shrunk configuration, `--confirm` runs for its rate and its receipts.
        let fdir = self.out.join("found").join(&name);
        let (mut reproduced, mut ran, mut receipts) = (0, 0, Vec::new());
        let mut last = None;
        for k in 0..self.confirm {
            let x = self.evaluate(&s.draw, &fdir.join(format!("run-{k}")))?;
            if x.verdict == Verdict::Interrupted {
                break;
            }
            ran += 1;
            if x.finding == Some(kind) {
                reproduced += 1;
            }
            if x.receipt.exists() {
                receipts.push(x.receipt.display().to_string());
            }
            last = Some(x);
        }
        let flags = last
            .as_ref()
            .map_or_else(|| e.flags.clone(), |x| x.flags.clone());
        let battery = self.out.join("found").join(format!("{name}.json"));
        std::fs::create_dir_all(self.out.join("found"))
            .with_context(|| format!("creating {}", self.out.display()))?;
        let bjson = serde_json::json!({
            "name": format!("hunt-{name}"),
            "gates": [{ "name": name, "args": flags }],
        });
        crate::fsio::write_atomic(
            &battery,
            serde_json::to_string_pretty(&bjson)
                .expect("a battery is JSON")
                .as_bytes(),
        )
        .with_context(|| format!("writing {}", battery.display()))?;
        Ok(Finding {
            name,
            kind,
            trial,
            detail: e.detail(),
            found_flags: self.space.flags(d, Some("TAPE")),
            shrunk_flags: self.space.flags(&s.draw, Some("TAPE")),
            shrunk: s.draw.clone(),
            shrunk_detail: last.map_or_else(String::new, |x| x.detail()),
            reproduced,
            runs: ran,
            shrink_tried: s.tried,
            shrink_cut_short: s.cut_short,
            command: format!("ppn-gate {}", flags.join(" ")),
            battery: battery.display().to_string(),
            receipts,
        })
    }

    /// The draw `--self-check` must shrink to: the planted corner and nothing else.
    pub fn corner_draw(c: &Corner) -> Draw {
        let mut arms = vec![ArmKind::Prime];
        if c.batch_min.is_some() {
            arms.insert(0, ArmKind::Batched);
        }
        Draw {
            stages: (c.stages != 1).then_some(c.stages),
            arms: Some(arms),
            batch: c.batch_min,
            chunk: Some(vec![c.chunk]),
            ..Draw::default()
        }
    }

    /// `--self-check`: None when the corner was found and shrunk exactly to it, else why
    /// not.
    pub fn self_check_miss(&self, tally: &Tally) -> Option<String> {
        let c = self.corner?;
        let want = Self::corner_draw(&c);
        let hits: Vec<&Finding> = tally
            .findings
            .iter()
            .filter(|f| f.kind == Kind::Fail)
            .collect();
        if hits.iter().any(|f| f.shrunk == want) {
            return None;
        }
        Some(match hits.first() {
            None => format!(
                "the planted corner {c} was not found in {} trials",
                tally.trials
            ),
            Some(f) => format!(
                "the planted corner {c} shrank to [{}], not exactly to [{}]",
                f.shrunk_flags.join(" "),
                self.space.flags(&want, None).join(" ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trial's exit 2 is a refusal (a finding) unless the operating system's error is what
    /// its gate ended on: a full disk under a trial's receipt stopped a hunt with a "refused"
    /// finding it then shrank.
    #[test]
    fn an_exit_2_on_an_os_error_is_the_environment_not_a_refusal() {
        let cfg = "ppn-gate: error: --draft 5: more drafts than a verify round can hold";
        assert_eq!(
            refused_or_environment(cfg).unwrap(),
            Verdict::Refused(cfg.into())
        );
        let env = "ppn-gate: error: cannot write receipt /h/trials/t0/receipt.json: No space \
                   left on device (os error 28)";
        let e = refused_or_environment(env).unwrap_err().to_string();
        assert!(
            e.contains("environment") && e.contains("os error 28"),
            "{e}"
        );
    }
}
