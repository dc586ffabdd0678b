//! The gate command (no subcommand; also `launch`): its options → the plan → the run (or,
//! with `--rank`, this process's part as a member) → the receipt and verdict lines.

use anyhow::Result;

use crate::gate::member::member;
use crate::gate::plan::{prepare, Prepared};
use crate::gate::report::{default_receipt_path, emit_after, transport_names};
use crate::gate::run::run_prepared;
use crate::gate::watch::Watch;
use crate::gate::GateOptions;

/// Run the gate `args` names; the exit code of its verdict.
pub fn run_cli(args: &GateOptions) -> Result<i32> {
    // The outputs are checked before any work: a receipt or trace that cannot be written
    // must not be found after the whole gate ran.
    let default = default_receipt_path("gate");
    let receipt = args.receipt.as_ref().unwrap_or(&default);
    let flag = crate::fsio::flag_name("--receipt", args.receipt.is_some());
    crate::fsio::check_writable(&flag, receipt)?;
    if let Some(t) = &args.trace {
        crate::fsio::check_writable("--trace", t)?;
    }
    let mut outs = vec![("--receipt", receipt.as_path())];
    outs.extend(args.trace.as_deref().map(|t| ("--trace", t)));
    crate::fsio::check_distinct(&outs, &args.input_files())?;
    let p = prepare(args)?;
    if !args.quiet {
        // Why `--backend auto` took the CPU, where it did: a user expecting a GPU sees it.
        let why = p.auto_cpu.as_ref().map_or(String::new(), |e| {
            format!(" (--backend auto: no usable GPU: {e})")
        });
        errln!(
            "ppn-gate: {} backend{why}, model {} ({}, {} layers), {}, transports [{}], arms {}, {} steps",
            p.be.kind(),
            p.model_info.file,
            p.model_info.arch,
            p.model_info.n_layers,
            p.spec.placement.to_flags(),
            transport_names(&p.args, &p.spec.placement).join(","),
            args.arms,
            p.spec.steps()
        );
    }
    if args.rank.is_some() {
        return member(&p);
    }
    one_stage_note(&p);
    // Each arm's verdict is printed as the arm ends; the receipt's lines follow at the end.
    let mut w = Watch::new(args.quiet, true);
    let r = run_prepared(&p, &mut |e| w.event(e))?;
    let code = emit_after(args, &r, w.printed)?;
    if let Some(note) = fault_pass_note(&p.spec.faults, code) {
        errln!("{note}");
    }
    if let Some(note) = verify_idle_note(&r) {
        errln!("{note}");
    }
    Ok(code)
}

/// A verify arm that ran no speculative round (the prompt reached the tape's end, or
/// --gen-len 0): it primed the prompt and compared those steps, but no draft, acceptance or
/// rollback was exercised, which its PASS would otherwise imply. Said even under -q.
pub(super) fn verify_idle_note(r: &crate::receipt::Receipt) -> Option<String> {
    let v = r.arms.iter().find(|a| a.name == "verify")?;
    v.rounds.is_empty().then(|| {
        format!(
            "ppn-gate: note: the verify arm ran no round (prompt {} of {} positions): it compared the primed prompt only; no draft, acceptance or rollback was exercised (a tape or --gen-len with positions after the prompt gives it rounds)",
            r.config.prompt_len,
            r.config.prompt_len + r.config.gen_len
        )
    })
}

/// A gate run under `--fault` that PASSed (exit 0): the fault's window can open in this
/// placement (else the gate refused it), but its race did not land. The forced holds make
/// that rare (before CUDA had them, `--stages 2 --arms pipelined --prompt-len 1 --gen-len 2
/// --fault single-slot` PASSed 3/3 on one H100 with the built-in model); where a hold waits
/// out `FAULT_HOLD` (the write it waits for never issued while it holds) it can still
/// happen. Said even under -q (stderr): a negative control's PASS proves nothing, and a user
/// reading only the verdict would take it for one that held.
pub(super) fn fault_pass_note(
    faults: &[crate::runtime::fault::Fault],
    code: i32,
) -> Option<String> {
    if code != 0 || faults.is_empty() {
        return None;
    }
    let names: Vec<&str> = faults.iter().map(|f| f.name()).collect();
    Some(format!(
        "ppn-gate: note: --fault {} ran and the gate PASSed: the window can open here but the race did not land, so this negative control proved nothing (`ppn-gate selftest` runs each fault where it is measured to land)",
        names.join(",")
    ))
}

/// A PASS of one stage proves no boundary: said even under -q (stderr), never hidden (the
/// gate and soak alike).
pub(super) fn one_stage_note(p: &Prepared) {
    if p.spec.placement.n_stages() == 1 {
        errln!("ppn-gate: note: one stage: no boundary was exercised (every arm ran the reference's placement; --stages 2 or more gates a boundary)");
    }
}

#[cfg(test)]
mod tests {
    use super::{fault_pass_note, GateOptions};
    use crate::runtime::fault::Fault;

    /// A PASS under a fault is said to prove nothing, naming the faults; a FAIL, a refusal or
    /// a gate without a fault gets no note.
    #[test]
    fn a_pass_under_a_fault_is_flagged() {
        let f = [Fault::SingleSlot, Fault::NoWarGuard];
        let n = fault_pass_note(&f, 0).unwrap();
        assert!(
            n.contains("--fault single-slot,no-war-guard ran and the gate PASSed")
                && n.contains("proved nothing"),
            "{n}"
        );
        assert_eq!(fault_pass_note(&f, 1), None);
        assert_eq!(fault_pass_note(&f, 2), None);
        assert_eq!(fault_pass_note(&[], 0), None);
    }
    use crate::backend::cuda::MmaMode;
    use crate::cli::Cli;
    use crate::gate::plan::{mma_mode, on_off, prime_rows};
    use crate::gate::tape::{check_tape, gate_prompt_len, read_tape, Tape, TAPE_MAX_BYTES};
    use clap::Parser;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn gate_args(flags: &[&str]) -> GateOptions {
        Cli::try_parse_from(std::iter::once("ppn-gate").chain(flags.iter().copied()))
            .unwrap()
            .gate
            .options()
    }

    /// The one rule for tapes: a tape's own `prompt_len` wins; --prompt-len may repeat it but
    /// not contradict it (the error names both values); a tape without one takes the flag
    /// (refused when longer than the tape) or the default 8 (at most the tape); no tape:
    /// the flag or 8; 0 is refused either way.
    #[test]
    fn prompt_len_follows_the_one_rule_for_tapes() {
        let tape = |n: usize, own: Option<usize>| Tape {
            tokens: vec![1; n],
            prompt_len: own,
        };
        let pl = |flags: &[&str], t: Option<&Tape>| gate_prompt_len(&gate_args(flags), t);
        let tf = ["--tape", "t.json"];
        assert_eq!(pl(&[], None).unwrap(), 8);
        assert_eq!(pl(&["--prompt-len", "3"], None).unwrap(), 3);
        assert_eq!(pl(&tf, Some(&tape(40, Some(24)))).unwrap(), 24);
        assert_eq!(
            pl(
                &["--tape", "t.json", "--prompt-len", "24"],
                Some(&tape(40, Some(24)))
            )
            .unwrap(),
            24
        );
        let e = pl(
            &["--tape", "t.json", "--prompt-len", "8"],
            Some(&tape(40, Some(24))),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--prompt-len 8") && e.contains("`prompt_len` is 24"),
            "{e}"
        );
        assert!(e.contains("t.json"), "{e}");
        assert_eq!(pl(&tf, Some(&tape(40, None))).unwrap(), 8);
        assert_eq!(pl(&tf, Some(&tape(5, None))).unwrap(), 5);
        assert_eq!(
            pl(
                &["--tape", "t.json", "--prompt-len", "30"],
                Some(&tape(40, None))
            )
            .unwrap(),
            30
        );
        let e = pl(
            &["--tape", "t.json", "--prompt-len", "41"],
            Some(&tape(40, None)),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--prompt-len 41") && e.contains("40 tokens"),
            "{e}"
        );
        for t in [None, Some(tape(40, None)), Some(tape(40, Some(3)))] {
            let e = pl(&["--tape", "t.json", "--prompt-len", "0"], t.as_ref())
                .unwrap_err()
                .to_string();
            assert!(e.contains("--prompt-len 0"), "{e}");
        }
    }

    /// One hostile tape file: its bytes and what the error must name (None: it is a valid
    /// tape, whose tokens and prompt_len must then read back).
    struct Case {
        bytes: Vec<u8>,
        want: Option<String>,
        valid: Option<Tape>,
    }

    const VOCAB: usize = 2048;
    const CTX: usize = 64;

    /// A random JSON value that is not a non-negative integer below 2^32 (a wrong-typed id
    /// or prompt_len), and its text.
    fn not_an_id(rng: &mut ChaCha8Rng) -> String {
        match rng.gen_range(0..9) {
            0 => format!("-{}", rng.gen_range(1..u32::MAX)),
            1 => format!("{}.5", rng.gen_range(0..100)),
            2 => format!("\"{}\"", rng.gen_range(0..100)),
            3 => "null".into(),
            4 => "true".into(),
            5 => format!("[{}]", rng.gen_range(0..100)),
            6 => format!("{{\"id\": {}}}", rng.gen_range(0..100)),
            7 => format!("{}", u64::from(u32::MAX) + rng.gen_range(1..1u64 << 40)),
            _ => "1e300".into(),
        }
    }

    fn ids(rng: &mut ChaCha8Rng, n: usize) -> Vec<u32> {
        (0..n).map(|_| rng.gen_range(0..VOCAB as u32)).collect()
    }

    fn list(v: &[String]) -> String {
        format!("[{}]", v.join(", "))
    }

    fn case(rng: &mut ChaCha8Rng) -> Case {
        let key = if rng.gen_bool(0.5) { "tape" } else { "tokens" };
        let n = rng.gen_range(1..CTX);
        let good = ids(rng, n);
        let text: Vec<String> = good.iter().map(|t| t.to_string()).collect();
        let c = |s: String, want: &str| Case {
            bytes: s.into_bytes(),
            want: Some(want.to_string()),
            valid: None,
        };
        match rng.gen_range(0..18) {
            0 => {
                // A wrong-typed entry at a random index.
                let i = rng.gen_range(0..n);
                let mut t = text.clone();
                t[i] = not_an_id(rng);
                c(
                    format!("{{\"{key}\": {}}}", list(&t)),
                    &format!("`{key}` entry {i} ("),
                )
            }
            1 => {
                // An id at or past the vocab.
                let i = rng.gen_range(0..n);
                let id = rng.gen_range(VOCAB as u64..=u64::from(u32::MAX));
                let mut t = text.clone();
                t[i] = id.to_string();
                c(
                    format!("{{\"{key}\": {}}}", list(&t)),
                    &format!("entry {i} ({id}) is not a token id below the vocab size {VOCAB}"),
                )
            }
            2 => c(
                // prompt_len 0 or past the tape, up to absurd.
                format!(
                    "{{\"{key}\": {}, \"prompt_len\": {}}}",
                    list(&text),
                    if rng.gen_bool(0.3) {
                        0
                    } else {
                        rng.gen_range(n as u64 + 1..=u64::MAX)
                    }
                ),
                "`prompt_len` ",
            ),
            3 => c(
                format!(
                    "{{\"{key}\": {}, \"prompt_len\": {}}}",
                    list(&text),
                    not_an_id(rng)
                ),
                "`prompt_len` ",
            ),
            4 => c(
                format!("{{\"prompt_len\": {}, \"steps\": []}}", rng.gen_range(1..9)),
                "no `tokens` or `tape` array",
            ),
            5 => c(format!("{{\"{key}\": []}}"), &format!("`{key}` is empty")),
            6 => {
                let v = not_an_id(rng);
                let kind = if v.starts_with('[') {
                    // An array of one integer is a valid one-token tape: make it an object.
                    "an object"
                } else {
                    ""
                };
                let v = if kind.is_empty() { v } else { "{}".into() };
                c(format!("{{\"{key}\": {v}}}"), &format!("`{key}` is "))
            }
            7 => {
                // Invalid UTF-8 somewhere in an otherwise plausible file.
                let mut b = format!("{{\"{key}\": {}}}", list(&text)).into_bytes();
                let at = rng.gen_range(0..b.len());
                b.insert(at, [0xff, 0xc0, 0x80, 0xfe][rng.gen_range(0..4)]);
                Case {
                    bytes: b,
                    want: Some("not UTF-8".into()),
                    valid: None,
                }
            }
            8 => {
                // Nested garbage past serde_json's recursion limit.
                let depth = rng.gen_range(200..5000);
                c(
                    format!("{{\"{key}\": {}{}}}", "[".repeat(depth), "]".repeat(depth)),
                    "not valid JSON",
                )
            }
            9 => {
                let s = format!("{{\"{key}\": {}}}", list(&text));
                let cut = rng.gen_range(0..s.len());
                c(s[..cut].to_string(), "not valid JSON")
            }
            10 => c(
                [list(&text), "42".into(), "\"tape\"".into(), "null".into()][rng.gen_range(0..4)]
                    .clone(),
                "the top level is",
            ),
            11 => c(
                format!("{{\"tokens\": {}, \"tape\": {}}}", list(&text), list(&text)),
                "both `tokens` and `tape`",
            ),
            12 => {
                let len = CTX + rng.gen_range(1..100);
                let long = ids(rng, len);
                let t: Vec<String> = long.iter().map(|t| t.to_string()).collect();
                c(
                    format!("{{\"{key}\": {}}}", list(&t)),
                    &format!("more than the model's context length {CTX}"),
                )
            }
            13 => {
                // Random bytes: whatever they are, never a panic (an error or, rarely, a tape).
                let len = rng.gen_range(0..64);
                Case {
                    bytes: (0..len).map(|_| rng.gen()).collect(),
                    want: Some(String::new()),
                    valid: None,
                }
            }
            14 => {
                // A field no tape has (a misspelled prompt_len was ignored, the default used).
                let k =
                    ["prompt_length", "promptLen", "gen-len", "Tokens", ""][rng.gen_range(0..5)];
                c(
                    format!(
                        "{{\"{key}\": {}, \"{k}\": {}}}",
                        list(&text),
                        rng.gen_range(1..=n)
                    ),
                    &format!("unknown field `{k}`"),
                )
            }
            15 => {
                // An oracle tape cut or extended: its prompt and generated counts no longer
                // make the tape.
                let p = rng.gen_range(1..=n);
                let g = (n - p) as u64 + rng.gen_range(1..1000);
                c(
                    format!(
                        "{{\"{key}\": {}, \"prompt_len\": {p}, \"gen_len\": {g}}}",
                        list(&text)
                    ),
                    &format!(
                        "`gen_len` {g} and `prompt_len` {p} do not make the tape's {n} tokens"
                    ),
                )
            }
            _ => {
                // Valid, with extra keys an oracle file carries.
                let own = rng.gen_bool(0.5).then(|| rng.gen_range(1..=n));
                let pl = own.map_or(String::new(), |p| format!(", \"prompt_len\": {p}"));
                Case {
                    bytes: format!(
                        "{{\"vocab\": {VOCAB}, \"{key}\": {}{pl}, \"steps\": [{{\"x\": [1]}}]}}",
                        list(&text)
                    )
                    .into_bytes(),
                    want: None,
                    valid: Some(Tape {
                        tokens: good,
                        prompt_len: own,
                    }),
                }
            }
        }
    }

    /// The tape input family, hostile: 2000 seeded random files (wrong types, negative and
    /// out-of-range ids, ids past the vocab, prompt_len 0 or past the tape up to u64::MAX,
    /// an unknown field, a `gen_len` that does not fit,
    /// missing keys, empty, non-UTF-8, nesting past the parser's limit, truncation, a
    /// non-object top level, both keys, past the context length, random bytes) and as many
    /// random byte mutations of valid files. None panics; each is refused naming the file
    /// and what its case breaks, or (valid) reads back its tokens and prompt_len.
    #[test]
    fn hostile_tapes_never_panic_and_name_the_field() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("t.json");
        let mut rng = ChaCha8Rng::seed_from_u64(25);
        let read = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            read_tape(&path).and_then(|t| check_tape(&t, &path, VOCAB, CTX).map(|_| t))
        };
        let (mut refused, mut valid) = (0, 0);
        for i in 0..2000 {
            let c = case(&mut rng);
            match (read(&c.bytes), &c.want) {
                (Ok(t), None) => {
                    assert_eq!(Some(&t), c.valid.as_ref(), "case {i}");
                    valid += 1;
                }
                (Err(e), Some(want)) => {
                    let e = format!("{e:#}");
                    assert!(
                        e.starts_with(&format!("--tape {}", path.display())),
                        "case {i}: {e}"
                    );
                    assert!(e.contains(want.as_str()), "case {i}: want {want:?} in {e}");
                    refused += 1;
                }
                // Random bytes may (rarely) be a valid tape.
                (Ok(_), Some(w)) if w.is_empty() => {}
                (r, want) => panic!(
                    "case {i} ({:?}): want {want:?}, got {:?}",
                    String::from_utf8_lossy(&c.bytes),
                    r.map_err(|e| format!("{e:#}"))
                ),
            }
            // A mutation of a valid file: an error naming the file, or a tape within bounds.
            let n = rng.gen_range(1..CTX);
            let t: Vec<String> = ids(&mut rng, n).iter().map(|t| t.to_string()).collect();
            let mut b = format!(
                "{{\"prompt_len\": {}, \"tape\": {}}}",
                rng.gen_range(1..=n),
                list(&t)
            )
            .into_bytes();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..b.len());
                match rng.gen_range(0..3) {
                    0 => b[at] = rng.gen(),
                    1 => {
                        b.remove(at);
                    }
                    _ => b.insert(at, b"[]{}\",:-0e9\\"[rng.gen_range(0..12)]),
                }
                if b.is_empty() {
                    break;
                }
            }
            match read(&b) {
                Ok(t) => {
                    assert!(!t.tokens.is_empty() && t.tokens.len() <= CTX);
                    assert!(t.tokens.iter().all(|&id| (id as usize) < VOCAB));
                    assert!(t.prompt_len.is_none_or(|p| p >= 1 && p <= t.tokens.len()));
                }
                Err(e) => {
                    let e = format!("{e:#}");
                    assert!(e.starts_with(&format!("--tape {}", path.display())), "{e}");
                }
            }
        }
        assert!(
            refused > 1500 && valid > 50,
            "refused {refused}, valid {valid}"
        );
    }

    /// A file over the cap is refused naming its size and the limit, before it is parsed;
    /// an endless one (a device) after reading no more than the cap.
    #[test]
    fn a_tape_file_over_the_cap_is_refused_naming_its_size() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("big.json");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(TAPE_MAX_BYTES + 7).unwrap();
        let e = format!("{:#}", read_tape(&path).unwrap_err());
        assert!(
            e.contains(&format!("{} bytes", TAPE_MAX_BYTES + 7))
                && e.contains(&format!("limit of {TAPE_MAX_BYTES} bytes")),
            "{e}"
        );
        let e = format!(
            "{:#}",
            read_tape(std::path::Path::new("/dev/zero")).unwrap_err()
        );
        assert!(
            e.contains(&format!("more than the limit of {TAPE_MAX_BYTES} bytes")),
            "{e}"
        );
        let e = format!("{:#}", read_tape(d.path()).unwrap_err());
        assert!(e.contains("--tape"), "{e}");
    }

    /// `--pdl`/`--graphs` default on; only "on" and "off" parse, anything else is an error
    /// naming the flag and the value.
    #[test]
    fn on_off_flags_take_their_default_and_name_bad_values() {
        assert!(on_off("--pdl", &None).unwrap());
        assert!(!on_off("--graphs", &Some("off".into())).unwrap());
        let e = on_off("--graphs", &Some("yes".into())).unwrap_err();
        assert_eq!(e.to_string(), "--graphs \"yes\": expected on or off");
    }

    /// `--mma` defaults to auto; on and off are what they say; anything else names the
    /// value (what auto selects: backend::cuda::tests).
    #[test]
    fn mma_defaults_to_auto_and_names_bad_values() {
        assert_eq!(mma_mode(&None).unwrap(), MmaMode::Auto);
        assert_eq!(mma_mode(&Some("auto".into())).unwrap(), MmaMode::Auto);
        assert_eq!(mma_mode(&Some("on".into())).unwrap(), MmaMode::On);
        assert_eq!(mma_mode(&Some("off".into())).unwrap(), MmaMode::Off);
        let e = mma_mode(&Some("yes".into())).unwrap_err();
        assert_eq!(e.to_string(), "--mma \"yes\": expected on, off or auto");
    }

    /// What `--mma auto` reads off the flags besides the prime chunk: the batched arm's
    /// `--batch` and the serve arm's `--max-rows` (each its default when not given), the
    /// larger of the two that run, 0 without either arm.
    #[test]
    fn batch_rows_is_the_batched_arms_batch_or_the_serve_arms_rows() {
        use crate::gate::plan::batch_rows;
        let rows = |flags: &str| {
            let cli =
                Cli::try_parse_from(std::iter::once("ppn-gate").chain(flags.split(' '))).unwrap();
            batch_rows(&cli.gate.options())
        };
        assert_eq!(rows("--arms eager,batched --batch 8"), 8);
        assert_eq!(rows("--arms batched --batch 3"), 3);
        assert_eq!(rows("--arms eager,pipelined"), 0);
        assert_eq!(
            rows("--arms eager,batched"),
            crate::gate::options::DEFAULT_BATCH
        );
        assert_eq!(rows("--arms serve --max-rows 8"), 8);
        assert_eq!(rows("--arms serve --max-rows 4"), 4);
        assert_eq!(rows("--arms batched,serve --batch 3 --max-rows 5"), 5);
        assert_eq!(rows("--arms batched,serve --batch 9 --max-rows 5"), 9);
        assert_eq!(rows("--arms serve"), crate::arms::serve::DEFAULT_MAX_ROWS);
        assert_eq!(rows("--arms eager,pipelined,verify"), 0);
    }

    /// What `--mma auto` reads off the flags: the prime arm's largest chunk as it runs
    /// (default: the whole prompt; every chunk at most --prompt-len), 0 without a prime arm.
    #[test]
    fn prime_rows_is_the_largest_chunk_the_prime_arm_runs() {
        let rows = |flags: &str| {
            let cli =
                Cli::try_parse_from(std::iter::once("ppn-gate").chain(flags.split(' '))).unwrap();
            prime_rows(&cli.gate.options()).unwrap()
        };
        assert_eq!(rows("--arms eager,batched --chunk 512"), 0);
        assert_eq!(rows("--arms prime --chunk 8,512,16 --prompt-len 512"), 512);
        assert_eq!(rows("--arms eager,prime --prompt-len 100"), 100);
        assert_eq!(rows("--arms prime --chunk 512 --prompt-len 40"), 40);
        assert_eq!(rows("--arms verify --prompt-len 100"), 0);
        // A tape's own prompt_len, the one rule for tapes.
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.json");
        std::fs::write(&t, r#"{"prompt_len": 24, "tape": [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]}"#).unwrap();
        assert_eq!(rows(&format!("--arms prime --tape {}", t.display())), 24);
        assert_eq!(
            rows(&format!("--arms prime --chunk 512 --tape {}", t.display())),
            24
        );
        let cli = Cli::try_parse_from(["ppn-gate", "--arms", "prime", "--chunk", "8,x"]).unwrap();
        assert!(prime_rows(&cli.gate.options())
            .unwrap_err()
            .to_string()
            .contains("--chunk"));
    }
}
