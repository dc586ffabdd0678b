//! The one flag policy's rules (`gate::policy::FLAG_RULES`), one test each and a walk of
//! the table; here, under cli, because the flags are parsed by the cli's own parser.

use crate::cli::Cli;
use crate::gate::policy::*;
use crate::gate::GateOptions;
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

/// A tape gives every position: `--gen-len` beside it was dropped without a word (exit 0,
/// the tape's own length run); now refused naming the flag, in the gate and a battery.
#[test]
fn gen_len_is_unread_beside_a_tape() {
    for reader in [Reader::Gate, Reader::Battery] {
        refused(
            reader,
            "--tape t.json --gen-len 3",
            "--gen-len 3",
            "--tape t.json",
        );
    }
    let e = unread_flag(
        &opts("--tape t.json --gen-len 3 --arms serve"),
        Reader::Gate,
    )
    .unwrap();
    assert!(e.contains("a --tape gives every position"), "{e}");
    // Without a tape the gate reads it, as before.
    assert_eq!(unread_flag(&opts("--gen-len 3"), Reader::Gate), None);
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
            "--requests" => ("--requests 5 --arms eager", Reader::Gate),
            "--max-rows" => ("--max-rows 5 --arms batched", Reader::Gate),
            "--prefill-chunk" => ("--prefill-chunk 2 --arms prime", Reader::Bench),
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
