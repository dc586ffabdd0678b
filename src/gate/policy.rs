//! One policy for the gate's flags: a flag given to a run that does not read it is refused
//! (exit 2) naming the flag, the run and who would read it, never accepted and dropped. The
//! rules are one table (`FLAG_RULES`), held against every command that takes gate flags:
//! the gate, launch, soak, a member and selftest's rows (`Reader::Gate`, from `check_on`),
//! a battery entry (`Reader::Battery`, before its plan) and bench (`Reader::Bench`). A flag
//! with a default is an `Option` in `GateOptions`, so "given" is known; flags every run
//! reads (`--seed`, `--jitter-us`: every stream op of either backend, `--backend`, ...) have
//! no rule. The rules' tests (one per rule and a walk of the table) are `cli::policy_tests`,
//! where the cli's parser builds the options.

use anyhow::{bail, Result};

use super::options::GateOptions;
use crate::arms::ArmKind;

/// The command whose run reads the flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The gate's own run: the gate, launch, soak, a member, selftest's rows.
    Gate,
    /// A battery entry: the gate's run, whose lines the battery prints itself.
    Battery,
    /// bench: times the fault-free runtime on seeded tokens (`--steps` of them).
    Bench,
}

impl Reader {
    fn name(self) -> &'static str {
        match self {
            Reader::Gate => "gate",
            Reader::Battery => "battery gate",
            Reader::Bench => "bench",
        }
    }
}

/// What a run is, from its flags alone (no backend, no model: a battery checks every entry
/// before its first gate runs).
#[derive(Clone, Debug)]
pub struct Run {
    pub reader: Reader,
    /// The arms named in `--arms` (an unknown name is left out here; `check_on` names it).
    pub arms: Vec<ArmKind>,
    /// The number of stages, as `stage_devices` counts them (`--stages`, else the length of
    /// `--devices`, else of `--splits` + 1, else 1).
    pub stages: usize,
    /// A multi-process gate (`--procs`, or a member's `--world`).
    pub processes: bool,
    pub transport: String,
    /// A `--tape` gives every position (the gate generates none past it).
    pub tape: bool,
}

impl Run {
    pub fn of(args: &GateOptions, reader: Reader) -> Run {
        let items = |s: &Option<String>| s.as_deref().map(|s| s.split(',').count());
        Run {
            reader,
            arms: args
                .arms
                .split(',')
                .filter_map(|a| ArmKind::parse(a.trim()))
                .collect(),
            stages: args
                .stages
                .or(items(&args.devices))
                .or(items(&args.splits).map(|n| n + 1))
                .unwrap_or(1),
            processes: args.world().is_some(),
            transport: args.transport().to_string(),
            tape: args.tape.is_some(),
        }
    }

    fn has(&self, k: ArmKind) -> bool {
        self.arms.contains(&k)
    }

    /// The run in words, for a refusal.
    fn describe(&self) -> String {
        let arms: Vec<&str> = self.arms.iter().map(|a| a.name()).collect();
        format!(
            "{}, arms {}, {} stage{}, {}",
            self.reader.name(),
            arms.join(","),
            self.stages,
            if self.stages == 1 { "" } else { "s" },
            if self.processes {
                "several processes"
            } else {
                "one process"
            }
        )
    }
}

/// One flag and the runs that read it.
pub struct FlagRule {
    /// The flag as typed (`--chunk`; `--arms verify` for one value of a flag).
    pub flag: &'static str,
    /// The value given, as shown in the refusal (None: not given).
    pub given: fn(&GateOptions) -> Option<String>,
    /// Whether a run reads the flag.
    pub reads: fn(&Run) -> bool,
    /// Who reads it and the way out, the refusal's tail.
    pub why: &'static str,
}

fn show<T: std::fmt::Display>(v: &Option<T>) -> Option<String> {
    v.as_ref().map(|v| v.to_string())
}

fn in_flight_arms(r: &Run) -> bool {
    r.has(ArmKind::Pipelined)
        || r.has(ArmKind::Batched)
        || r.has(ArmKind::Prime)
        || r.has(ArmKind::Serve)
}

/// `--arms` as given when it names `arm` (the `--arms ARM` rules' value).
fn names_arm(a: &GateOptions, arm: &str) -> Option<String> {
    a.arms
        .split(',')
        .any(|x| x.trim() == arm)
        .then(|| a.arms.clone())
}

fn serve_arm(r: &Run) -> bool {
    r.has(ArmKind::Serve)
}

/// Every gate flag that some runs do not read. A rule per flag (or per value, for `--arms`);
/// `check_flags` walks them in this order.
pub const FLAG_RULES: &[FlagRule] = &[
    FlagRule {
        flag: "--chunk",
        given: |a| show(&a.chunk),
        reads: |r| r.has(ArmKind::Prime),
        why: "only the prime arm reads it (its chunk sizes); add prime to --arms, or leave --chunk out",
    },
    FlagRule {
        flag: "--repeat",
        given: |a| show(&a.repeat),
        reads: |r| r.has(ArmKind::Prime) && r.reader != Reader::Bench,
        why: "only a gate's prime arm reads it (primes per chunk size; bench times a fixed two of each); add prime to a gate's --arms, or leave --repeat out",
    },
    FlagRule {
        flag: "--draft",
        given: |a| show(&a.draft),
        reads: |r| r.has(ArmKind::Verify) && r.reader != Reader::Bench,
        why: "only a gate's verify arm reads it (draft tokens per round); add verify to --arms, or leave --draft out",
    },
    FlagRule {
        flag: "--batch",
        given: |a| show(&a.batch),
        reads: |r| r.has(ArmKind::Batched),
        why: "only the batched arm reads it (its sequences); add batched to --arms, or leave --batch out",
    },
    FlagRule {
        flag: "--window",
        given: |a| show(&a.window),
        reads: in_flight_arms,
        why: "only the pipelined, batched, prime and serve arms keep steps in flight (eager and verify read every step back before the next); add one of them to --arms, or leave --window out",
    },
    FlagRule {
        flag: "--requests",
        given: |a| show(&a.requests),
        reads: serve_arm,
        why: "only the serve arm reads it (its requests); add serve to --arms, or leave --requests out",
    },
    FlagRule {
        flag: "--max-rows",
        given: |a| show(&a.max_rows),
        reads: serve_arm,
        why: "only the serve arm reads it (the rows of a serve step); add serve to --arms, or leave --max-rows out",
    },
    FlagRule {
        flag: "--prefill-chunk",
        given: |a| show(&a.prefill_chunk),
        reads: serve_arm,
        why: "only the serve arm reads it (prompt positions a request prefills per step); add serve to --arms, or leave --prefill-chunk out",
    },
    FlagRule {
        flag: "--transport",
        given: |a| show(&a.transport),
        reads: |r| r.stages >= 2,
        why: "a transport carries the boundaries between stages, and one stage has none; add --stages 2 or more, or leave --transport out",
    },
    FlagRule {
        flag: "--nccl-lib",
        given: |a| a.nccl_lib.as_ref().map(|p| p.display().to_string()),
        reads: |r| r.processes && r.transport == "nccl",
        why: "only --transport nccl loads NCCL, between the processes of a multi-process gate (add --procs W --transport nccl, or leave --nccl-lib out)",
    },
    FlagRule {
        flag: "--peer-timeout",
        given: |a| show(&a.peer_timeout),
        reads: |r| r.processes,
        why: "only the members of a multi-process gate wait on a neighbour's link (add --procs W, or leave --peer-timeout out)",
    },
    FlagRule {
        flag: "--rendezvous-timeout",
        given: |a| show(&a.rendezvous_timeout),
        reads: |r| r.processes,
        why: "only the members of a multi-process gate meet at a rendezvous (add --procs W, or leave --rendezvous-timeout out)",
    },
    FlagRule {
        flag: "--link-host",
        given: |a| show(&a.link_host),
        reads: |r| r.processes,
        why: "only the members of a multi-process gate listen for links (add --procs W, or leave --link-host out)",
    },
    FlagRule {
        flag: "--quiet",
        given: |a| a.quiet.then(String::new),
        reads: |r| r.reader == Reader::Gate,
        why: "only a gate's, launch's and soak's own output reads it: bench prints its table and a battery each gate's verdict lines whatever it says",
    },
    FlagRule {
        flag: "--topk",
        given: |a| show(&a.topk),
        reads: |r| r.reader != Reader::Bench,
        why: "bench records no logits (only a gate's reference keeps the top-k)",
    },
    FlagRule {
        flag: "--gen-len",
        given: |a| show(&a.gen_len),
        reads: |r| !r.tape && (r.reader != Reader::Bench || r.has(ArmKind::Serve)),
        why: "a --tape gives every position, so a gate reads it only without one (it was dropped without a word); bench reads it only for its serve arm's requests (its decode walks take --steps tokens)",
    },
    FlagRule {
        flag: "--prompt-len",
        given: |a| show(&a.prompt_len),
        reads: |r| r.reader != Reader::Bench || r.has(ArmKind::Prime) || r.has(ArmKind::Serve),
        why: "bench reads it only for its prime arm's prompt and its serve arm's requests (its decode walks take --steps tokens)",
    },
    FlagRule {
        flag: "--tape",
        given: |a| a.tape.as_ref().map(|p| p.display().to_string()),
        reads: |r| r.reader != Reader::Bench,
        why: "bench decodes seeded tokens, not a tape",
    },
    FlagRule {
        flag: "--fault",
        given: |a| a.faults.first().cloned(),
        reads: |r| r.reader != Reader::Bench,
        why: "bench measures the fault-free runtime",
    },
    FlagRule {
        flag: "--arms verify",
        given: |a| names_arm(a, "verify"),
        reads: |r| r.reader != Reader::Bench,
        why: "bench has no verify path (it times eager, pipelined, batched, prime and serve); leave verify out of bench's --arms",
    },
];

/// The refusal of the first rule `args` breaks in a run of `reader`, if any.
pub fn unread_flag(args: &GateOptions, reader: Reader) -> Option<String> {
    let run = Run::of(args, reader);
    FLAG_RULES.iter().find_map(|rule| {
        let v = (rule.given)(args)?;
        if (rule.reads)(&run) {
            return None;
        }
        // `--arms verify` shows the whole list; a switch (`--quiet`) has no value.
        let head = match rule.flag.split_once(' ') {
            Some((flag, _)) => format!("{flag} {v}"),
            None if v.is_empty() => rule.flag.to_string(),
            None => format!("{} {v}", rule.flag),
        };
        Some(format!(
            "{head}: has no effect in this run ({}): {}",
            run.describe(),
            rule.why
        ))
    })
}

/// `unread_flag` as an error (exit 2).
pub fn check_flags(args: &GateOptions, reader: Reader) -> Result<()> {
    match unread_flag(args, reader) {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}
