//! Non-finite numbers are never a PASS, end to end on the CPU backend: a file whose float
//! metadata is NaN, infinite, zero or negative (or whose context length is 0) is refused at
//! load naming the key and the value; a file whose weights make the fault-free reference
//! compute NaN or an infinity is a harness error naming the step and the count, in one
//! process and across processes (exit 2, no receipt, no verdict); and a sample of random
//! header mutations behaves through the CLI as the library says (the bulk of that property
//! test is `model::tests::random_header_mutations_load_valid_or_fail_naming_the_key_or_offset`).
// Prints with std's macros, which the test harness captures (clippy.toml refuses them in
// the crate, whose lines must never panic).
#![allow(clippy::disallowed_macros)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ppn_gate::gguf::GgufFile;
use ppn_gate::model::synth::{builtin_spec, synth_gguf, SynthSpec};
use ppn_gate::model::Model;
use rand::{Rng, SeedableRng};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .args(["--backend", "cpu"])
        .output()
        .expect("ppn-gate runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A small llama (Q8_0 tensors, vocab 300) as GGUF bytes.
fn small() -> Vec<u8> {
    synth_gguf(&SynthSpec {
        layers: 4,
        embd: 64,
        heads: 2,
        kv_heads: 1,
        ff: 128,
        vocab: 300,
        seed: 9,
        ..builtin_spec()
    })
    .expect("synth")
}

/// Where `key`'s value starts in GGUF `bytes` (a key is a u64 length, its bytes, then a u32
/// value type).
fn value_at(bytes: &[u8], key: &str) -> usize {
    let mut pat = (key.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(key.as_bytes());
    let at = bytes
        .windows(pat.len())
        .position(|w| w == pat)
        .unwrap_or_else(|| panic!("{key} in the header"));
    at + pat.len() + 4
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p
}

/// A short gate on `model` (receipt into `dir`).
fn gate(model: &Path, dir: &Path, extra: &[&str]) -> (Output, PathBuf) {
    let r = dir.join(format!(
        "{}.json",
        model.file_stem().unwrap().to_str().unwrap()
    ));
    let mut a = vec![
        "--model",
        model.to_str().unwrap(),
        "--prompt-len",
        "3",
        "--gen-len",
        "3",
        "-q",
        "--receipt",
        r.to_str().unwrap(),
    ];
    // A tape gives every position: --gen-len beside it is refused (exit 2), so it goes.
    if extra.contains(&"--tape") {
        a.drain(4..6);
    }
    a.extend_from_slice(extra);
    (run(&a), r)
}

/// rope.freq_base and the RMS epsilon at NaN, inf, 0 and -1, and context_length 0: each a
/// copy of a model that passes, exit 2 naming the key and the value (NaN here made every
/// logit NaN on every stage alike: a PASS of NaN bits against NaN bits).
#[test]
fn non_finite_or_non_positive_metadata_exits_2_naming_the_key() {
    let d = tempfile::tempdir().unwrap();
    let base = small();
    let (ok, r) = gate(&write(d.path(), "base.gguf", &base), d.path(), &[]);
    assert_eq!(ok.status.code(), Some(0), "control: {}", text(&ok));
    assert!(r.exists());
    let mut cases = Vec::new();
    for key in [
        "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon",
    ] {
        for (x, shown) in [
            (f32::NAN, "NaN"),
            (f32::INFINITY, "inf"),
            (0.0, "0"),
            (-1.0, "-1"),
        ] {
            let mut b = base.clone();
            let v = value_at(&b, key);
            b[v..v + 4].copy_from_slice(&x.to_le_bytes());
            cases.push((
                b,
                format!("metadata key {key} = {shown}: must be finite and > 0"),
            ));
        }
    }
    let mut b = base.clone();
    let v = value_at(&b, "llama.context_length");
    b[v..v + 4].copy_from_slice(&0u32.to_le_bytes());
    cases.push((
        b,
        "metadata key llama.context_length = 0: must be at least 1".into(),
    ));
    for (i, (b, want)) in cases.iter().enumerate() {
        let m = write(d.path(), &format!("bad{i}.gguf"), b);
        let (o, r) = gate(&m, d.path(), &[]);
        assert_eq!(o.status.code(), Some(2), "{want}: {}", text(&o));
        assert!(text(&o).contains(want), "{want}:\n{}", text(&o));
        assert!(
            !text(&o).contains("panicked") && !text(&o).contains("PASS"),
            "{}",
            text(&o)
        );
        assert!(!r.exists(), "{want}: no receipt for a refused model");
    }
}

/// GGUF bytes of `small()` with one f16 block scale of `tensor` row `row` set to f16 NaN
/// (Q8_0 rows of 64: two blocks of a 2-byte scale and 32 int8).
fn poison_q8(bytes: &[u8], tensor: &str, row: usize) -> Vec<u8> {
    let f = GgufFile::parse(bytes.to_vec()).unwrap();
    let t = f.tensor(tensor).unwrap();
    let at = f.tensor_range(t).start + row * 2 * 34;
    let mut b = bytes.to_vec();
    b[at..at + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
    b
}

/// Corrupt weights: the fault-free reference computes NaN or an infinity, which is a harness
/// error naming the step, the token and the count, never a PASS and never a runtime FAIL;
/// also when the reference is computed by every member of a multi-process gate.
#[test]
fn non_finite_reference_logits_exit_2_naming_the_step_and_count() {
    let d = tempfile::tempdir().unwrap();
    let base = small();
    let tape = d.path().join("tape.json");
    std::fs::write(&tape, r#"{"tokens": [1, 7, 9, 42, 5, 6, 8]}"#).unwrap();
    let t = tape.to_str().unwrap();
    // The embedding of token 42, at tape step 3: every logit NaN from step 3.
    let emb = write(
        d.path(),
        "emb.gguf",
        &poison_q8(&base, "token_embd.weight", 42),
    );
    // One row of the head: logit 17 NaN at every step.
    let head = write(
        d.path(),
        "head.gguf",
        &poison_q8(&base, "output.weight", 17),
    );
    // An F32 norm weight at +inf: the final norm's outputs, and so the logits, non-finite.
    let mut b = base.clone();
    let f = GgufFile::parse(base.clone()).unwrap();
    let at = f
        .tensor_range(f.tensor("output_norm.weight").unwrap())
        .start
        + 4 * 5;
    b[at..at + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let norm = write(d.path(), "norm.gguf", &b);
    for (m, extra, want) in [
        (
            &emb,
            &["--tape", t][..],
            "reference row 0 step 3 (token 42): 300 of 300 logits are not finite (first: logit[0] = NaN)",
        ),
        (
            &head,
            &["--tape", t, "--stages", "2", "--arms", "eager,pipelined,batched,prime"][..],
            "reference row 0 step 0 (token 1): 1 of 300 logits are not finite (first: logit[17] = NaN)",
        ),
        (&norm, &[][..], "reference row 0 step 0 (token "),
        // Two member processes: each computes the reference and exits 2 naming it.
        (
            &emb,
            &["--tape", t, "--stages", "2", "--procs", "2", "--transport", "ipc"][..],
            "reference row 0 step 3 (token 42): 300 of 300 logits are not finite",
        ),
    ] {
        let (o, r) = gate(m, d.path(), extra);
        let s = text(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {s}");
        assert!(s.contains(want), "{want}:\n{s}");
        assert!(s.contains("the model file (corrupt weights or metadata) or the engine"), "{s}");
        assert!(!s.contains("PASS") && !s.contains("FAIL") && !s.contains("panicked"), "{s}");
        assert!(!r.exists(), "no receipt: {s}");
        if extra.contains(&"--procs") {
            assert!(s.contains("launch: a member failed"), "{s}");
        }
    }
    // Control: the same tape on the unpoisoned file passes.
    let (o, _) = gate(
        &write(d.path(), "clean.gguf", &base),
        d.path(),
        &["--tape", t],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A seeded sample of the GGUF-metadata property test through the binary: hostile float
/// values and random header bytes give exit 2 with the library's own error (naming the key,
/// tensor or offset), or a model that loads and gates (exit 0; or exit 2 naming a non-finite
/// reference). Never a panic, an abort or a runtime FAIL.
#[test]
fn header_mutations_through_the_cli_match_the_library_and_exit_0_or_2() {
    let d = tempfile::tempdir().unwrap();
    let base = small();
    let f = GgufFile::parse(base.clone()).unwrap();
    let data_start = f
        .tensors
        .iter()
        .map(|t| f.tensor_range(t).start)
        .min()
        .unwrap();
    let floats = [
        "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon",
    ];
    let hostile = [
        f32::NAN.to_bits(),
        f32::INFINITY.to_bits(),
        f32::NEG_INFINITY.to_bits(),
        0,
        0x8000_0000,
        (-1.0f32).to_bits(),
        1,
        f32::MAX.to_bits(),
        // Valid ones too: those load and gate.
        (1e-3f32).to_bits(),
        (1e-6f32).to_bits(),
        (5e5f32).to_bits(),
        (1.0f32).to_bits(),
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x6366_6e74);
    let (mut refused, mut gated) = (0, 0);
    for case in 0..40 {
        let mut b = base.clone();
        if case % 2 == 0 {
            let v = value_at(&b, floats[rng.gen_range(0..floats.len())]);
            let x = hostile[rng.gen_range(0..hostile.len())];
            b[v..v + 4].copy_from_slice(&x.to_le_bytes());
        } else {
            for _ in 0..rng.gen_range(1..=3) {
                let at = rng.gen_range(0..data_start);
                b[at] = rng.gen();
            }
        }
        let lib = GgufFile::parse(b.clone())
            .map_err(|e| e.to_string())
            .and_then(|f| Model::load(&f).map(|_| ()).map_err(|e| e.to_string()));
        let m = write(d.path(), &format!("m{case}.gguf"), &b);
        let (o, _) = gate(&m, d.path(), &[]);
        let s = text(&o);
        assert!(!s.contains("panicked"), "case {case}: {s}");
        match lib {
            Err(e) => {
                refused += 1;
                assert_eq!(o.status.code(), Some(2), "case {case}: {s}");
                assert!(s.contains(&e), "case {case}: the library's {e:?} in:\n{s}");
            }
            Ok(()) => {
                gated += 1;
                match o.status.code() {
                    Some(0) => {}
                    Some(2) => assert!(s.contains("logits are not finite"), "case {case}: {s}"),
                    c => panic!("case {case}: exit {c:?}: {s}"),
                }
            }
        }
    }
    eprintln!("40 header mutations: {refused} refused (exit 2), {gated} loaded and gated");
    assert!(
        refused >= 10 && gated >= 4,
        "{refused} refused, {gated} gated"
    );
}

/// An arm that alone computed NaN/Inf FAILs saying so in its verdict line (what the CLI
/// prints), from its receipt record; a receipt without the record (every golden) prints as
/// before and re-serializes without the key.
#[test]
fn an_arms_own_non_finite_logits_are_named_in_its_verdict_line() {
    use ppn_gate::gate::report::verdict_lines;
    use ppn_gate::receipt::{Divergence, NonFinite, Receipt, StepKey};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("receipts/golden");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(!text.contains("non_finite"), "{}", p.display());
        let r = Receipt::load(&p).unwrap();
        assert!(r.arms.iter().all(|a| a.non_finite.is_none()));
        let back = serde_json::to_string(&r).unwrap();
        assert!(!back.contains("non_finite"), "{}", p.display());
        assert!(verdict_lines(&r).iter().all(|l| !l.contains("non-finite")));
        n += 1;
    }
    assert!(n >= 5, "{n} goldens");
    let mut r = Receipt::load(&dir.join("builtin-n4-dev0123.json")).unwrap();
    let a = &mut r.arms[1];
    a.verdict = "FAIL".into();
    a.mismatched_steps = 5;
    a.first_divergence = Some(Divergence {
        step: 2,
        row: 0,
        key: StepKey::default(),
        index: 9,
        reference: 1.5,
        got: f32::NAN,
    });
    a.non_finite = Some(NonFinite {
        steps: 4,
        step: 2,
        row: 0,
        key: StepKey::default(),
        count: 2048,
        vocab: 2048,
    });
    let lines = verdict_lines(&r);
    assert_eq!(
        lines[1],
        "pipelined  FAIL  first divergence at step 2 row 0: logit[9] ref 1.5e0 got NaN; 5/24 \
         steps differ; non-finite logits (NaN/Inf) in 4 steps where the reference is finite, \
         first at step 2 row 0: 2048 of 2048",
        "{lines:?}"
    );
    assert!(!lines[0].contains("non-finite") && !lines[2].contains("non-finite"));
}
