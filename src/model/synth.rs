//! Seeded synthetic models: a complete, loadable GGUF from a small spec, so the gate runs in
//! CI without downloading anything.
//!
//! Rule that holds here: the output bytes are a pure function of the spec — one ChaCha8
//! stream seeded from `spec.seed`, drawn in a fixed tensor order, quantized by the
//! deterministic `quant::quantize`, written by the GGUF writer in insertion order.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Arch, ModelError};
use crate::gguf::{GgufWriter, Value, ValueType};
use crate::quant::{self, GgmlType};

/// Shape, weight type and seed of a synthetic model (head_dim = embd / heads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthSpec {
    pub arch: Arch,
    pub layers: usize,
    pub embd: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ff: usize,
    pub vocab: usize,
    pub quant: GgmlType,
    pub seed: u64,
}

/// The embedded default model: llama-arch, small enough that a CPU decodes it at hundreds of
/// tokens per second, deep enough (8 layers) to split into several stages.
pub fn builtin_spec() -> SynthSpec {
    SynthSpec {
        arch: Arch::Llama,
        layers: 8,
        embd: 256,
        heads: 8,
        kv_heads: 4,
        ff: 512,
        vocab: 2048,
        quant: GgmlType::Q8_0,
        seed: 0,
    }
}

/// Sliding window written for synthetic gemma3 models: short, so that decode tests of a few
/// dozen steps already exercise the window.
pub const SYNTH_SLIDING_WINDOW: usize = 16;
/// Context length written to the metadata.
pub const SYNTH_CONTEXT: usize = 4096;
/// Special tokens at the start of every synthetic vocabulary (SentencePiece adds 256 byte
/// tokens after them; byte-level BPE puts the 256 byte tokens first).
const SP_SPECIALS: [&str; 4] = ["<pad>", "<eos>", "<bos>", "<unk>"];

fn bad(what: &'static str, value: usize, why: impl Into<String>) -> ModelError {
    ModelError::Synth {
        what,
        value: value as u64,
        why: why.into(),
    }
}

fn check(spec: &SynthSpec) -> Result<usize, ModelError> {
    for (what, v) in [
        ("layers", spec.layers),
        ("embd", spec.embd),
        ("heads", spec.heads),
        ("kv_heads", spec.kv_heads),
        ("ff", spec.ff),
    ] {
        if v == 0 {
            return Err(bad(what, v, "must be positive"));
        }
    }
    if !spec.embd.is_multiple_of(spec.heads) {
        return Err(bad(
            "embd",
            spec.embd,
            format!("not a multiple of heads = {}", spec.heads),
        ));
    }
    let hd = spec.embd / spec.heads;
    if !hd.is_multiple_of(2) {
        return Err(bad(
            "embd / heads",
            hd,
            "head dim must be even (RoPE rotates pairs)",
        ));
    }
    if !spec.heads.is_multiple_of(spec.kv_heads) {
        return Err(bad(
            "kv_heads",
            spec.kv_heads,
            format!("does not divide heads = {}", spec.heads),
        ));
    }
    let min_vocab = 256 + SP_SPECIALS.len();
    if spec.vocab < min_vocab {
        return Err(bad(
            "vocab",
            spec.vocab,
            format!("below {min_vocab} (byte tokens + specials)"),
        ));
    }
    let bl = spec.quant.block_len();
    // Every matrix row length (embd for q/k/v/gate/up/embeddings, ff for down; wo's is
    // heads*hd = embd) must be a whole number of quant blocks.
    for (what, v) in [("embd", spec.embd), ("ff", spec.ff)] {
        if v % bl != 0 {
            return Err(bad(
                what,
                v,
                format!("not a multiple of the {} block length {bl}", spec.quant),
            ));
        }
    }
    // Every size is a u32 in the file, names its own flag, and the largest matrices
    // (vocab x embd, ff x embd) must have an element count that fits a usize.
    for (what, v) in [
        ("vocab", spec.vocab),
        ("layers", spec.layers),
        ("embd", spec.embd),
        ("ff", spec.ff),
        ("heads", spec.heads),
        ("kv-heads", spec.kv_heads),
    ] {
        if u32::try_from(v).is_err() {
            return Err(bad(what, v, "too large (sizes are u32 in GGUF)"));
        }
    }
    // What the reader would refuse, refused before anything is generated.
    if spec.vocab as u64 > crate::gguf::MAX_ARRAY_LEN {
        return Err(bad(
            "vocab",
            spec.vocab,
            format!(
                "above the reader's array limit {}",
                crate::gguf::MAX_ARRAY_LEN
            ),
        ));
    }
    if (spec.layers as u64) * 9 + 3 > crate::gguf::MAX_TENSORS {
        return Err(bad(
            "layers",
            spec.layers,
            format!(
                "more tensors than the reader's limit {}",
                crate::gguf::MAX_TENSORS
            ),
        ));
    }
    for (what, v) in [("vocab", spec.vocab), ("ff", spec.ff)] {
        if v.checked_mul(spec.embd).is_none() {
            return Err(bad(what, v, format!("times embd {} overflows", spec.embd)));
        }
    }
    Ok(hd)
}

/// A uniform draw with standard deviation `std` (uniform on ±std·√3).
fn draw(rng: &mut ChaCha8Rng, n: usize, std: f32) -> Vec<f32> {
    let a = std * 3f32.sqrt();
    (0..n).map(|_| rng.gen_range(-a..a)).collect()
}

/// Norm weights near 1 (1 ± 0.1), so the norms matter but keep activations at unit scale.
fn draw_norm(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| 1.0 + rng.gen_range(-0.1f32..0.1)).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

struct Out<'a> {
    w: &'a mut GgufWriter,
    rng: ChaCha8Rng,
    quant: GgmlType,
}

impl Out<'_> {
    /// A rows×cols matrix, entries with std 1/sqrt(fan_in = cols) (std `std` if given).
    fn matrix(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        std: Option<f32>,
    ) -> Result<(), ModelError> {
        let s = std.unwrap_or(1.0 / (cols as f32).sqrt());
        let vals = draw(&mut self.rng, rows * cols, s);
        let data = quant::quantize(self.quant, &vals)?;
        self.w
            .add_tensor(name, &[cols as u64, rows as u64], self.quant, data)?;
        Ok(())
    }
    fn norm(&mut self, name: &str, n: usize) -> Result<(), ModelError> {
        let vals = draw_norm(&mut self.rng, n);
        self.w
            .add_tensor(name, &[n as u64], GgmlType::F32, f32_bytes(&vals))?;
        Ok(())
    }
}

/// Writes the synthetic model of `spec` as GGUF bytes (deterministic in `spec`).
pub fn synth_gguf(spec: &SynthSpec) -> Result<Vec<u8>, ModelError> {
    let hd = check(spec)?;
    let a = spec.arch.name();
    let u32v = |v: usize| Value::U32(v as u32);
    let mut w = GgufWriter::new();
    w.add("general.architecture", Value::String(a.into()));
    w.add(
        "general.name",
        Value::String(format!(
            "ppn-synth-{a}-L{}-E{}-{}-s{}",
            spec.layers, spec.embd, spec.quant, spec.seed
        )),
    );
    w.add(&format!("{a}.block_count"), u32v(spec.layers));
    w.add(&format!("{a}.context_length"), u32v(SYNTH_CONTEXT));
    w.add(&format!("{a}.embedding_length"), u32v(spec.embd));
    w.add(&format!("{a}.feed_forward_length"), u32v(spec.ff));
    w.add(&format!("{a}.attention.head_count"), u32v(spec.heads));
    w.add(&format!("{a}.attention.head_count_kv"), u32v(spec.kv_heads));
    match spec.arch {
        Arch::Llama => {
            w.add(&format!("{a}.rope.freq_base"), Value::F32(10000.0));
            w.add(
                &format!("{a}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-5),
            );
            w.add(&format!("{a}.vocab_size"), u32v(spec.vocab));
            w.add(&format!("{a}.rope.dimension_count"), u32v(hd));
        }
        Arch::Gemma3 => {
            w.add(&format!("{a}.rope.freq_base"), Value::F32(1e6));
            w.add(
                &format!("{a}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-6),
            );
            w.add(&format!("{a}.attention.key_length"), u32v(hd));
            w.add(&format!("{a}.attention.value_length"), u32v(hd));
            w.add(
                &format!("{a}.attention.sliding_window"),
                u32v(SYNTH_SLIDING_WINDOW),
            );
        }
    }
    let (model, tokens, types, bos, eos) = synth_vocab(spec);
    w.add("tokenizer.ggml.model", Value::String(model.into()));
    w.add(
        "tokenizer.ggml.tokens",
        Value::Array(
            ValueType::String,
            tokens.into_iter().map(Value::String).collect(),
        ),
    );
    w.add(
        "tokenizer.ggml.token_type",
        Value::Array(ValueType::I32, types.into_iter().map(Value::I32).collect()),
    );
    w.add("tokenizer.ggml.bos_token_id", Value::U32(bos));
    w.add("tokenizer.ggml.eos_token_id", Value::U32(eos));

    let mut o = Out {
        w: &mut w,
        rng: ChaCha8Rng::seed_from_u64(spec.seed),
        quant: spec.quant,
    };
    let (e, ff, kvd) = (spec.embd, spec.ff, spec.kv_heads * hd);
    let gemma = spec.arch == Arch::Gemma3;
    // Embeddings at unit scale for llama (the first norm rescales anyway); gemma multiplies
    // by sqrt(embd) itself, so its table is drawn at 1/sqrt(embd) like a trained one.
    o.matrix(
        "token_embd.weight",
        spec.vocab,
        e,
        Some(if gemma { 1.0 / (e as f32).sqrt() } else { 1.0 }),
    )?;
    o.norm("output_norm.weight", e)?;
    if !gemma {
        // Untied output for llama (exercises `output.weight`); gemma stays tied as real ones are.
        o.matrix("output.weight", spec.vocab, e, None)?;
    }
    for il in 0..spec.layers {
        let n = |s: &str| format!("blk.{il}.{s}.weight");
        o.norm(&n("attn_norm"), e)?;
        o.matrix(&n("attn_q"), e, e, None)?;
        o.matrix(&n("attn_k"), kvd, e, None)?;
        o.matrix(&n("attn_v"), kvd, e, None)?;
        o.matrix(&n("attn_output"), e, e, None)?;
        if gemma {
            o.norm(&n("attn_q_norm"), hd)?;
            o.norm(&n("attn_k_norm"), hd)?;
            o.norm(&n("post_attention_norm"), e)?;
        }
        o.norm(&n("ffn_norm"), e)?;
        o.matrix(&n("ffn_gate"), ff, e, None)?;
        o.matrix(&n("ffn_up"), ff, e, None)?;
        o.matrix(&n("ffn_down"), e, ff, None)?;
        if gemma {
            o.norm(&n("post_ffw_norm"), e)?;
        }
    }
    Ok(w.to_bytes())
}

/// Tokenizer model name, token strings, token types, bos, eos. llama: byte-level BPE with
/// the 256 byte tokens first; gemma3: SentencePiece with 4 specials, then `<0xNN>` byte
/// tokens. The rest are `<tN>` / `▁tN`, so decoded text shows the ids.
fn synth_vocab(spec: &SynthSpec) -> (&'static str, Vec<String>, Vec<i32>, u32, u32) {
    match spec.arch {
        Arch::Llama => {
            let printable = |b: u32| {
                (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b)
            };
            let mut extra = 0;
            let mut toks: Vec<String> = (0u32..256)
                .map(|b| {
                    let cp = if printable(b) {
                        b
                    } else {
                        extra += 1;
                        255 + extra
                    };
                    char::from_u32(cp).map(String::from).unwrap_or_default()
                })
                .collect();
            let mut types = vec![1i32; 256];
            for s in ["<|endoftext|>", "<|bos|>"] {
                toks.push(s.into());
                types.push(3);
            }
            for i in toks.len()..spec.vocab {
                toks.push(format!("<t{i}>"));
                types.push(1);
            }
            ("gpt2", toks, types, 257, 256)
        }
        Arch::Gemma3 => {
            let mut toks: Vec<String> = SP_SPECIALS.iter().map(|s| s.to_string()).collect();
            let mut types = vec![3i32; SP_SPECIALS.len()];
            for b in 0..256 {
                toks.push(format!("<0x{b:02X}>"));
                types.push(6);
            }
            for i in toks.len()..spec.vocab {
                toks.push(format!("\u{2581}t{i}"));
                types.push(1);
            }
            ("llama", toks, types, 2, 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufFile;
    use crate::model::Model;

    fn gemma_spec() -> SynthSpec {
        SynthSpec {
            arch: Arch::Gemma3,
            layers: 6,
            embd: 128,
            heads: 2,
            kv_heads: 1,
            ff: 256,
            vocab: 512,
            quant: GgmlType::Q8_0,
            seed: 3,
        }
    }

    #[test]
    fn same_spec_gives_identical_bytes_and_another_seed_does_not() {
        let s = builtin_spec();
        let a = synth_gguf(&s).expect("synth");
        assert_eq!(a, synth_gguf(&s).expect("synth"));
        let b = synth_gguf(&SynthSpec { seed: 1, ..s }).expect("synth");
        assert_ne!(a, b);
    }

    #[test]
    fn builtin_model_loads_with_the_spec_shapes() {
        let s = builtin_spec();
        let m = Model::load(&GgufFile::parse(synth_gguf(&s).expect("synth")).expect("parse"))
            .expect("load");
        assert_eq!(m.cfg.arch, Arch::Llama);
        assert_eq!(
            (
                m.cfg.n_layers,
                m.cfg.n_embd,
                m.cfg.n_heads,
                m.cfg.n_kv_heads
            ),
            (s.layers, s.embd, s.heads, s.kv_heads)
        );
        assert_eq!(
            (m.cfg.n_ff, m.cfg.vocab, m.cfg.head_dim),
            (s.ff, s.vocab, s.embd / s.heads)
        );
        assert_eq!(m.layers[0].wq.ty, s.quant);
        assert_eq!(m.vocab.decode(&[72, 105, 300]), "Hi<t300>");
    }

    #[test]
    fn gemma3_synth_loads_with_sliding_layers_and_tied_output() {
        let s = gemma_spec();
        let m = Model::load(&GgufFile::parse(synth_gguf(&s).expect("synth")).expect("parse"))
            .expect("load");
        assert_eq!(m.cfg.arch, Arch::Gemma3);
        assert_eq!(m.cfg.sliding_window, Some(SYNTH_SLIDING_WINDOW));
        assert_eq!(
            m.cfg.layer_sliding,
            vec![true, true, true, true, true, false]
        );
        assert!(m.layers[0].q_norm.is_some() && m.layers[5].post_ffn_norm.is_some());
        assert_eq!(m.output.bytes(), m.tok_embd.bytes());
        assert_eq!(m.vocab.decode(&[2, 300, 4 + 0x41]), "<bos> t300A");
    }

    #[test]
    fn dims_that_are_not_whole_quant_blocks_are_rejected_naming_the_value() {
        let s = SynthSpec {
            ff: 200,
            quant: GgmlType::Q4K,
            embd: 256,
            heads: 4,
            kv_heads: 2,
            ..builtin_spec()
        };
        let e = synth_gguf(&s).expect_err("ff 200 is not a multiple of 256");
        assert!(e.to_string().contains("200"), "{e}");
    }

    #[test]
    fn sizes_the_file_or_the_reader_cannot_hold_are_refused_naming_their_flag() {
        for (s, want) in [
            (
                SynthSpec {
                    layers: 1 << 33,
                    ..builtin_spec()
                },
                "layers = 8589934592",
            ),
            (
                SynthSpec {
                    vocab: 5_000_000,
                    ..builtin_spec()
                },
                "vocab = 5000000",
            ),
            (
                SynthSpec {
                    layers: 100_000,
                    ..builtin_spec()
                },
                "layers = 100000",
            ),
        ] {
            let e = synth_gguf(&s).expect_err(want).to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
