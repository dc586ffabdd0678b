//! One policy for the gate's flags: a flag given to a run that does not read it is refused
//! (exit 2) naming the flag, the run and who would read it, never accepted and dropped. The
//! rules are one table (`FLAG_RULES`), held against every command that takes gate flags:
//! the gate, launch, soak, a member and selftest's rows (`Reader::Gate`, from `check_on`),
//! a battery entry (`Reader::Battery`, before its plan) and bench (`Reader::Bench`). A flag
//! with a default is an `Option` in `GateOptions`, so "given" is known; flags every run
//! reads (`--seed`, `--jitter-us`: every stream op of either backend, `--backend`, ...) have
//! no rule.

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
    r.has(ArmKind::Pipelined) || r.has(ArmKind::Batched) || r.has(ArmKind::Prime)
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
        why: "only the pipelined, batched and prime arms keep steps in flight (eager and verify read every step back before the next); add one of them to --arms, or leave --window out",
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
        reads: |r| r.reader != Reader::Bench,
        why: "bench decodes --steps tokens, not a prompt and generated ones",
    },
    FlagRule {
        flag: "--prompt-len",
        given: |a| show(&a.prompt_len),
        reads: |r| r.reader != Reader::Bench || r.has(ArmKind::Prime),
        why: "bench reads it only for its prime arm's prompt (its decode walks take --steps tokens)",
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
        given: |a| {
            a.arms
                .split(',')
                .any(|x| x.trim() == "verify")
                .then(|| a.arms.clone())
        },
        reads: |r| r.reader != Reader::Bench,
        why: "bench has no verify path (it times eager, pipelined, batched and prime); leave verify out of bench's --arms",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn opts(flags: &str) -> GateOptions {
        Cli::try_parse_from(std::iter::once("ppn-gate").chain(flags.split_whitespace()))
            .unwrap_or_else(|e| panic!("{flags}: {e}"))
            .gate
            .options()
    }

    /// `flags` refused in a run of `reader`, the message naming `flag`; `fixed` (the same
    /// run with what reads the flag) accepted.
    fn refused(reader: Reader, flags: &str, flag: &str, fixed: &str) {
        let e = unread_flag(&opts(flags), reader).unwrap_or_else(|| panic!("{flags}: accepted"));
        assert!(e.starts_with(flag), "{flags}: {e}");
        assert!(e.contains("has no effect in this run"), "{e}");
        assert_eq!(unread_flag(&opts(fixed), reader), None, "{fixed}");
    }

    #[test]
    fn chunk_needs_the_prime_arm() {
        refused(
            Reader::Gate,
            "--chunk 4 --arms eager",
            "--chunk 4",
            "--chunk 4 --arms eager,prime",
        );
        refused(
            Reader::Bench,
            "--chunk 4",
            "--chunk 4",
            "--chunk 4 --arms prime",
        );
    }

    #[test]
    fn repeat_needs_a_gates_prime_arm() {
        refused(
            Reader::Gate,
            "--repeat 5",
            "--repeat 5",
            "--repeat 5 --arms prime",
        );
        refused(
            Reader::Bench,
            "--repeat 5 --arms prime",
            "--repeat 5",
            "--arms prime",
        );
    }

    #[test]
    fn draft_needs_the_verify_arm() {
        refused(
            Reader::Gate,
            "--draft 2 --arms eager,prime",
            "--draft 2",
            "--draft 2 --arms verify",
        );
    }

    #[test]
    fn batch_needs_the_batched_arm() {
        refused(
            Reader::Gate,
            "--batch 8 --arms eager",
            "--batch 8",
            "--batch 8 --arms eager,batched",
        );
        refused(
            Reader::Bench,
            "--batch 8 --arms pipelined",
            "--batch 8",
            "--batch 8",
        );
    }

    #[test]
    fn window_needs_an_arm_that_keeps_steps_in_flight() {
        for arms in ["eager", "verify", "eager,verify"] {
            refused(
                Reader::Gate,
                &format!("--window 4 --arms {arms}"),
                "--window 4",
                &format!("--window 4 --arms {arms},prime"),
            );
        }
        for arms in ["pipelined", "batched", "prime"] {
            assert_eq!(
                unread_flag(&opts(&format!("--window 2 --arms {arms}")), Reader::Gate),
                None
            );
        }
    }

    #[test]
    fn transport_needs_a_boundary() {
        for t in ["host", "peer", "auto"] {
            refused(
                Reader::Gate,
                &format!("--transport {t}"),
                &format!("--transport {t}"),
                &format!("--transport {t} --stages 2"),
            );
        }
        // Two stages by --devices or by --splits count too.
        assert_eq!(
            unread_flag(&opts("--transport host --devices 0,1"), Reader::Gate),
            None
        );
        assert_eq!(
            unread_flag(&opts("--transport host --splits 3"), Reader::Gate),
            None
        );
        refused(
            Reader::Bench,
            "--transport host --stages 1",
            "--transport host",
            "--transport host --stages 3",
        );
    }

    #[test]
    fn nccl_lib_needs_nccl_between_processes() {
        refused(
            Reader::Gate,
            "--nccl-lib /x --stages 2",
            "--nccl-lib /x",
            "--nccl-lib /x --stages 2 --procs 2 --transport nccl",
        );
        refused(
            Reader::Gate,
            "--nccl-lib /x --stages 2 --procs 2 --transport ipc",
            "--nccl-lib /x",
            "--stages 2 --procs 2 --transport ipc",
        );
    }

    #[test]
    fn link_flags_need_several_processes() {
        for f in [
            "--peer-timeout 3",
            "--rendezvous-timeout 3",
            "--link-host 10.0.0.1",
        ] {
            let flag = f.split(' ').next().unwrap();
            refused(
                Reader::Gate,
                &format!("{f} --stages 2"),
                f,
                &format!("{f} --stages 2 --procs 2 --transport ipc"),
            );
            // A member (--rank/--world/--rendezvous) reads them as well.
            assert_eq!(
                unread_flag(
                    &opts(&format!(
                        "{f} --stages 2 --rank 0 --world 2 --rendezvous d --transport ipc"
                    )),
                    Reader::Gate
                ),
                None,
                "{flag}"
            );
        }
    }

    #[test]
    fn quiet_is_read_by_the_gates_own_output_only() {
        assert_eq!(unread_flag(&opts("-q"), Reader::Gate), None);
        refused(Reader::Bench, "-q", "--quiet", "");
        refused(Reader::Battery, "-q --stages 2", "--quiet", "--stages 2");
    }

    #[test]
    fn bench_refuses_what_it_ignores() {
        refused(Reader::Bench, "--topk 4", "--topk 4", "");
        refused(Reader::Bench, "--gen-len 4", "--gen-len 4", "");
        refused(
            Reader::Bench,
            "--prompt-len 4",
            "--prompt-len 4",
            "--prompt-len 4 --arms prime",
        );
        refused(Reader::Bench, "--tape t.json", "--tape t.json", "");
        refused(
            Reader::Bench,
            "--fault rx-no-wait",
            "--fault rx-no-wait",
            "",
        );
        refused(
            Reader::Bench,
            "--arms eager,verify",
            "--arms eager,verify",
            "--arms eager,prime",
        );
        // The gate reads every one of them.
        for f in [
            "--topk 4",
            "--gen-len 4",
            "--prompt-len 4",
            "--tape t.json",
            "--arms eager,verify",
        ] {
            assert_eq!(unread_flag(&opts(f), Reader::Gate), None, "{f}");
        }
    }

    /// The table walked: every rule's flag parses as a gate flag; each is refused, naming
    /// itself, in a run that does not read it, where it is the only flag given (no rule is
    /// vacuous); and the defaults alone break no rule for any reader.
    #[test]
    fn every_rule_refuses_its_flag_and_the_defaults_pass() {
        // A value of each rule's flag and a run that does not read it.
        let case = |flag: &str| -> (&str, Reader) {
            match flag {
                "--chunk" => ("--chunk 4 --arms eager", Reader::Gate),
                "--repeat" => ("--repeat 5 --arms eager", Reader::Gate),
                "--draft" => ("--draft 2 --arms eager", Reader::Gate),
                "--batch" => ("--batch 8 --arms eager", Reader::Gate),
                "--window" => ("--window 4 --arms eager", Reader::Gate),
                "--transport" => ("--transport peer", Reader::Gate),
                "--nccl-lib" => ("--nccl-lib /l", Reader::Gate),
                "--peer-timeout" => ("--peer-timeout 3", Reader::Gate),
                "--rendezvous-timeout" => ("--rendezvous-timeout 3", Reader::Gate),
                "--link-host" => ("--link-host h", Reader::Gate),
                "--quiet" => ("--quiet", Reader::Bench),
                "--topk" => ("--topk 3", Reader::Bench),
                "--gen-len" => ("--gen-len 3", Reader::Bench),
                "--prompt-len" => ("--prompt-len 3", Reader::Bench),
                "--tape" => ("--tape t.json", Reader::Bench),
                "--fault" => ("--fault rx-no-wait", Reader::Bench),
                "--arms verify" => ("--arms verify", Reader::Bench),
                other => panic!("rule {other} has no case here: add one"),
            }
        };
        for (i, rule) in FLAG_RULES.iter().enumerate() {
            let (flags, reader) = case(rule.flag);
            let o = opts(flags);
            assert!(
                (rule.given)(&o).is_some(),
                "{}: not given by {flags}",
                rule.flag
            );
            assert!(!(rule.reads)(&Run::of(&o, reader)), "{}", rule.flag);
            let e = unread_flag(&o, reader).unwrap();
            let name = rule.flag.split(' ').next().unwrap();
            assert!(e.starts_with(name), "{}: {e}", rule.flag);
            assert!(e.ends_with(rule.why), "{}: {e}", rule.flag);
            // No rule before it in the table refuses it first.
            assert!(
                FLAG_RULES[..i]
                    .iter()
                    .all(|r| (r.given)(&o).is_none() || (r.reads)(&Run::of(&o, reader))),
                "{}",
                rule.flag
            );
        }
        let d = opts("");
        for reader in [Reader::Gate, Reader::Battery, Reader::Bench] {
            assert_eq!(unread_flag(&d, reader), None, "{reader:?}");
        }
    }
}
