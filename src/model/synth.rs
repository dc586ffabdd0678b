//! Seeded synthetic models: a complete, loadable GGUF from a small spec, so the gate runs in
//! CI without downloading anything.
//!
//! Rule that holds here: the output bytes are a pure function of the spec — one ChaCha8
//! stream seeded from `spec.seed`, drawn in a fixed tensor order (in parallel chunks that
//! reproduce the sequential stream exactly, see `draw`), quantized by the deterministic
//! `quant::quantize`, written by the GGUF writer in insertion order.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Arch, ModelError};
use crate::gguf::{GgufWriter, Value, ValueType};
use crate::quant::{self, GgmlType};

/// Shape, weight types and seed of a synthetic model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthSpec {
    pub arch: Arch,
    pub layers: usize,
    pub embd: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ff: usize,
    pub vocab: usize,
    pub quant: SynthQuant,
    pub seed: u64,
    /// Width of one head (None: embd / heads). Written as `<arch>.attention.key_length` and
    /// `value_length` (as qwen3 files carry it): q is heads * head_dim wide, which may differ
    /// from embd.
    pub head_dim: Option<usize>,
    /// No `output.weight`: the head reads `token_embd` (gemma3 files always are).
    pub tied: bool,
    /// llama: write `rope_freqs.weight`, seeded per-dimension RoPE frequency factors.
    pub rope_freqs: bool,
    /// gemma3: the sliding window its sliding layers attend over (None:
    /// SYNTH_SLIDING_WINDOW). Real Gemma-3 files carry 512 (270M) or 1024; the short default
    /// makes decode tests of a few dozen steps cross it.
    pub sliding_window: Option<usize>,
}

impl SynthSpec {
    /// Whether the head reads `token_embd` (no `output.weight` written): `--tied`, and every
    /// gemma3 file, tied as the real ones are. One rule for the writer and for synth's size
    /// estimate (`gate::bounds::synth_file_bytes`), so the estimate counts the file written.
    pub fn tied_output(&self) -> bool {
        self.tied || self.arch == Arch::Gemma3
    }
}

/// How a synthetic model's matrices are typed (norms are always f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthQuant {
    /// Every matrix in one type.
    Uniform(GgmlType),
    /// The layout llama.cpp's quantizer gives a llama/gemma3 model for `Q4_K_M` (rule in
    /// `tensor_type`), so a benchmark file is shaped like the ones people download.
    Q4KM,
}

/// The role of a matrix, which is what a quantization mix decides its type by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The token embedding; `tied` when it is also the output head (gemma3).
    TokenEmbd {
        tied: bool,
    },
    Output,
    AttnQ,
    AttnK,
    /// attn_v of layer `il`.
    AttnV {
        il: usize,
    },
    AttnOutput,
    FfnGate,
    FfnUp,
    /// ffn_down of layer `il`.
    FfnDown {
        il: usize,
    },
}

/// `general.file_type` of llama.cpp's Q4_K_M (`LLAMA_FTYPE_MOSTLY_Q4_K_M`).
const FTYPE_Q4_K_M: u32 = 15;

impl SynthQuant {
    pub fn from_name(s: &str) -> Option<SynthQuant> {
        if s.eq_ignore_ascii_case("q4_k_m") {
            return Some(SynthQuant::Q4KM);
        }
        GgmlType::from_name(s).map(SynthQuant::Uniform)
    }

    /// The names `from_name` accepts, for error messages.
    pub fn names() -> String {
        let mut v: Vec<&str> = GgmlType::ALL.iter().map(|t| t.name()).collect();
        v.push("q4_k_m");
        v.join(", ")
    }

    /// Every type the mix may use (the shape check needs their block lengths).
    fn types(self) -> Vec<GgmlType> {
        match self {
            SynthQuant::Uniform(t) => vec![t],
            // Rows that 256 does not tile fall back per matrix (`fallback_type`, down to
            // F16), so the mix fits any shape.
            SynthQuant::Q4KM => vec![],
        }
    }

    /// The type of a matrix with `role`, rows of `cols` values (its input width, GGUF's
    /// ne[0]), in a model of `spec`'s arch and depth.
    ///
    /// Q4_K_M is llama.cpp's rule (src/llama-quant.cpp, read, not copied) for a dense,
    /// non-falcon model with no imatrix and no per-tensor overrides: Q4_K everywhere, except
    /// - the output head in Q6_K (and, when the embedding is tied to it, the embedding);
    /// - attn_v and ffn_down in Q6_K on the "more bits" layers: the first eighth, the last
    ///   eighth, and every third layer in between (`use_more_bits`);
    /// - on a llama model of 80 layers with grouped KV heads (what llama.cpp classifies as
    ///   70B) the remaining attn_v in Q5_K;
    /// - a matrix whose rows are not whole 256-blocks takes llama.cpp's fallback
    ///   (`fallback_type`): Gemma-3 270M's 640-wide rows are why its real Q4_K_M file holds
    ///   Q5_0 projections and a Q8_0 tied embedding.
    pub fn tensor_type(self, role: Role, spec: &SynthSpec, cols: usize) -> GgmlType {
        let t = match self {
            SynthQuant::Uniform(t) => return t,
            SynthQuant::Q4KM => GgmlType::Q4K,
        };
        let n = spec.layers;
        let seventy_b = spec.arch == Arch::Llama && n == 80 && spec.heads != spec.kv_heads;
        let t = match role {
            Role::Output | Role::TokenEmbd { tied: true } => GgmlType::Q6K,
            Role::AttnV { il } if use_more_bits(il, n) => GgmlType::Q6K,
            Role::AttnV { .. } if seventy_b => GgmlType::Q5K,
            Role::FfnDown { il } if use_more_bits(il, n) => GgmlType::Q6K,
            _ => t,
        };
        fallback_type(t, cols)
    }

    /// llama.cpp's `general.file_type` for the layout, where one names it exactly. A uniform
    /// file has none (llama.cpp's own uniform ftypes still put the head in Q6_K), so llama.cpp
    /// guesses it from the tensors and says so.
    fn file_type(self) -> Option<u32> {
        match self {
            SynthQuant::Q4KM => Some(FTYPE_Q4_K_M),
            SynthQuant::Uniform(_) => None,
        }
    }
}

/// The type llama.cpp writes when `t`'s blocks do not tile a row of `cols` (its
/// `tensor_type_fallback`): a 256-block K type falls to the 32-block type of about the same
/// bits (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), and to F16 where 32 does not tile either.
fn fallback_type(t: GgmlType, cols: usize) -> GgmlType {
    if cols.is_multiple_of(t.block_len()) {
        return t;
    }
    let f = match t {
        GgmlType::Q4K => GgmlType::Q5_0,
        GgmlType::Q5K => GgmlType::Q5_1,
        GgmlType::Q6K => GgmlType::Q8_0,
        other => other,
    };
    if cols.is_multiple_of(f.block_len()) {
        f
    } else {
        GgmlType::F16
    }
}

/// llama.cpp's "use more bits" layers of a Q4_K_M/Q5_K_M mix: the first and last eighth of
/// the depth, and every third layer between them.
fn use_more_bits(il: usize, n: usize) -> bool {
    il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2
}

impl From<GgmlType> for SynthQuant {
    fn from(t: GgmlType) -> Self {
        SynthQuant::Uniform(t)
    }
}

impl std::fmt::Display for SynthQuant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SynthQuant::Uniform(t) => f.write_str(t.name()),
            SynthQuant::Q4KM => f.write_str("q4_k_m"),
        }
    }
}

/// A named shape (`synth --preset`): the widths of a model people pipeline, at any depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    /// The architecture the preset's model has (`--arch` overrides it).
    pub arch: Arch,
    pub embd: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ff: usize,
    /// 32000 for all: the head then weighs what a llama-2-sized vocabulary does (llama 3's
    /// 128256 is `--vocab 128256`); the benchmark rows are about the layers.
    pub vocab: usize,
    /// Layers of the full model (the default `--layers` under the preset).
    pub layers: usize,
}

pub const PRESETS: [Preset; 3] = [
    Preset {
        name: "llama8b",
        arch: Arch::Llama,
        embd: 4096,
        heads: 32,
        kv_heads: 8,
        ff: 14336,
        vocab: 32000,
        layers: 32,
    },
    Preset {
        name: "llama70b",
        arch: Arch::Llama,
        embd: 8192,
        heads: 64,
        kv_heads: 8,
        ff: 28672,
        vocab: 32000,
        layers: 80,
    },
    // Qwen2.5-7B: qwen2 (q/k/v biases, untied head); with `--arch llama` a llama model of
    // that shape.
    Preset {
        name: "qwen7b",
        arch: Arch::Qwen2,
        embd: 3584,
        heads: 28,
        kv_heads: 4,
        ff: 18944,
        vocab: 32000,
        layers: 28,
    },
];

pub fn preset(name: &str) -> Option<Preset> {
    PRESETS.into_iter().find(|p| p.name == name)
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
        quant: SynthQuant::Uniform(GgmlType::Q8_0),
        seed: 0,
        head_dim: None,
        tied: false,
        rope_freqs: false,
        sliding_window: None,
    }
}

/// Sliding window written for synthetic gemma3 models: short, so that decode tests of a few
/// dozen steps already exercise the window.
pub const SYNTH_SLIDING_WINDOW: usize = 16;
/// Seed offset of the RoPE frequency factors' own random stream ("rope").
const ROPE_FREQS_STREAM: u64 = 0x726f_7065;
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
    let hd = match spec.head_dim {
        Some(hd) => hd,
        None if !spec.embd.is_multiple_of(spec.heads) => {
            return Err(bad(
                "embd",
                spec.embd,
                format!(
                    "not a multiple of heads = {} (or give --head-dim)",
                    spec.heads
                ),
            ))
        }
        None => spec.embd / spec.heads,
    };
    if hd == 0 || !hd.is_multiple_of(2) {
        return Err(bad(
            "head_dim",
            hd,
            "head dim must be even and positive (RoPE rotates pairs)",
        ));
    }
    if spec.rope_freqs && spec.arch != Arch::Llama {
        return Err(bad(
            "rope_freqs",
            1,
            format!(
                "only llama files carry rope_freqs ({} would refuse it)",
                spec.arch
            ),
        ));
    }
    match spec.sliding_window {
        Some(0) => return Err(bad("sliding_window", 0, "must be positive")),
        // Written as a u32: a larger one wrapped (4294967297 was stored as 1).
        Some(w) if u32::try_from(w).is_err() => {
            return Err(bad(
                "sliding_window",
                w,
                "too large (a u32 in GGUF: --sliding-window at most 4294967295)",
            ))
        }
        Some(w) if spec.arch != Arch::Gemma3 => {
            return Err(bad(
                "sliding_window",
                w,
                format!(
                    "only gemma3 files carry a sliding window ({} has none)",
                    spec.arch
                ),
            ))
        }
        _ => {}
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
    // Every size is a u32 in the file, names its own flag, and the largest matrices
    // (vocab x embd, ff x embd) must have an element count that fits a usize.
    for (what, v) in [
        ("vocab", spec.vocab),
        ("layers", spec.layers),
        ("embd", spec.embd),
        ("ff", spec.ff),
        ("heads", spec.heads),
        ("kv-heads", spec.kv_heads),
        ("head-dim", hd),
    ] {
        if u32::try_from(v).is_err() {
            return Err(bad(what, v, "too large (sizes are u32 in GGUF)"));
        }
    }
    let bl = spec
        .quant
        .types()
        .iter()
        .map(|t| t.block_len())
        .max()
        .unwrap_or(1);
    // Every matrix row length (embd for q/k/v/gate/up/embeddings, ff for down, heads*hd for
    // wo) must be a whole number of quant blocks.
    // (Both factors fit a u32, checked above: no overflow.)
    let q_dim = hd * spec.heads;
    for (what, v) in [
        ("embd", spec.embd),
        ("ff", spec.ff),
        ("heads * head_dim", q_dim),
    ] {
        if v % bl != 0 {
            return Err(bad(
                what,
                v,
                format!("not a multiple of the {} block length {bl}", spec.quant),
            ));
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
    let a = spec.arch;
    let per_layer = 9
        + 3 * (a == Arch::Qwen2) as u64
        + 2 * a.has_qk_norm() as u64
        + 2 * a.has_post_norms() as u64;
    if (spec.layers as u64).saturating_mul(per_layer) + 4 > crate::gguf::MAX_TENSORS {
        return Err(bad(
            "layers",
            spec.layers,
            format!(
                "more tensors than the reader's limit {}",
                crate::gguf::MAX_TENSORS
            ),
        ));
    }
    for (what, v) in [
        ("vocab", spec.vocab),
        ("ff", spec.ff),
        ("heads * head_dim", q_dim),
    ] {
        if v.checked_mul(spec.embd).is_none() {
            return Err(bad(what, v, format!("times embd {} overflows", spec.embd)));
        }
    }
    Ok(hd)
}

/// A uniform draw with standard deviation `std` (uniform on ±std·√3): exactly the values of
/// `n` sequential `gen_range` calls on `rng`, which is left where they leave it.
///
/// Drawn in parallel chunks: ChaCha is a seekable stream and each draw takes one 32-bit word
/// unless the sampler rejects a value that rounds up to the range's end (rare). Every chunk
/// starts at the word the sequential stream would reach if nothing before it was rejected and
/// reports whether it took exactly one word per value; if any chunk did not, the draw is
/// repeated sequentially, so the bytes never depend on the split.
fn draw(rng: &mut ChaCha8Rng, n: usize, std: f32) -> Vec<f32> {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    let a = std * 3f32.sqrt();
    let base = rng.get_word_pos();
    let mut out = vec![0f32; n];
    let exact = out.par_chunks_mut(CHUNK).enumerate().all(|(c, o)| {
        let start = base + (c * CHUNK) as u128;
        let mut r = rng.clone();
        r.set_word_pos(start);
        for v in o.iter_mut() {
            *v = r.gen_range(-a..a);
        }
        r.get_word_pos() == start + o.len() as u128
    });
    if exact {
        rng.set_word_pos(base + n as u128);
    } else {
        for v in out.iter_mut() {
            *v = rng.gen_range(-a..a);
        }
    }
    out
}

/// Norm weights near 1 (1 ± 0.1), so the norms matter but keep activations at unit scale.
fn draw_norm(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| 1.0 + rng.gen_range(-0.1f32..0.1)).collect()
}

/// RoPE frequency factors 2^u, u uniform in [-1, 3) (0.5x to 8x): far from 1 on every pair,
/// high-frequency ones included, so a forward pass that ignores them, or multiplies instead
/// of dividing, gives visibly different logits (Llama-3.1's own factors touch only the
/// low-frequency pairs, whose angles are tiny over a short tape).
fn draw_rope_freqs(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0f32..3.0).exp2()).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

struct Out<'a> {
    w: &'a mut GgufWriter,
    rng: ChaCha8Rng,
    spec: &'a SynthSpec,
}

impl Out<'_> {
    /// A rows×cols matrix, entries with std 1/sqrt(fan_in = cols) (std `std` if given), in
    /// the type the spec's mix gives `role`.
    fn matrix(
        &mut self,
        name: &str,
        role: Role,
        rows: usize,
        cols: usize,
        std: Option<f32>,
    ) -> Result<(), ModelError> {
        let s = std.unwrap_or(1.0 / (cols as f32).sqrt());
        let ty = self.spec.quant.tensor_type(role, self.spec, cols);
        let vals = draw(&mut self.rng, rows * cols, s);
        let data = quant::quantize(ty, &vals)?;
        self.w
            .add_tensor(name, &[cols as u64, rows as u64], ty, data)?;
        Ok(())
    }
    fn norm(&mut self, name: &str, n: usize) -> Result<(), ModelError> {
        let vals = draw_norm(&mut self.rng, n);
        self.vector(name, &vals)
    }
    /// Projection biases, std 0.5: large next to the unit-scale projections, as trained
    /// Qwen2 k biases are, so a dropped bias changes every logit.
    fn bias(&mut self, name: &str, n: usize) -> Result<(), ModelError> {
        let vals = draw(&mut self.rng, n, 0.5);
        self.vector(name, &vals)
    }
    fn vector(&mut self, name: &str, vals: &[f32]) -> Result<(), ModelError> {
        self.w
            .add_tensor(name, &[vals.len() as u64], GgmlType::F32, f32_bytes(vals))?;
        Ok(())
    }
}

/// Writes the synthetic model of `spec` as GGUF bytes (deterministic in `spec`): what the
/// gate's built-in model is, byte for byte as receipts since the first record it.
pub fn synth_gguf(spec: &SynthSpec) -> Result<Vec<u8>, ModelError> {
    Ok(synth_writer(spec)?.to_bytes())
}

/// The same model as `synth_gguf` plus the metadata other tools read to name it (what
/// `ppn-gate synth` writes): llama.cpp names a mix by `general.file_type`. (The merges
/// llama.cpp needs for a gpt2 vocabulary every synthetic file already has: synth_writer.)
pub fn synth_gguf_for_tools(spec: &SynthSpec) -> Result<Vec<u8>, ModelError> {
    let mut w = synth_writer(spec)?;
    if let Some(ft) = spec.quant.file_type() {
        w.add("general.file_type", Value::U32(ft));
    }
    Ok(w.to_bytes())
}

fn synth_writer(spec: &SynthSpec) -> Result<GgufWriter, ModelError> {
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
    // Head width in the file when it is not embd / heads (llama.cpp's n_embd_head_k).
    let key_length = |w: &mut GgufWriter| {
        w.add(&format!("{a}.attention.key_length"), u32v(hd));
        w.add(&format!("{a}.attention.value_length"), u32v(hd));
    };
    match spec.arch {
        Arch::Llama => {
            w.add(&format!("{a}.rope.freq_base"), Value::F32(10000.0));
            w.add(
                &format!("{a}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-5),
            );
            w.add(&format!("{a}.vocab_size"), u32v(spec.vocab));
            w.add(&format!("{a}.rope.dimension_count"), u32v(hd));
            if hd * spec.heads != spec.embd {
                key_length(&mut w);
            }
        }
        // Qwen2/Qwen3 checkpoints: rope base 1e6, eps 1e-6; qwen3 files always carry the
        // head width (its heads are wider than embd / heads in most sizes).
        Arch::Qwen2 | Arch::Qwen3 => {
            w.add(&format!("{a}.rope.freq_base"), Value::F32(1e6));
            w.add(
                &format!("{a}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-6),
            );
            if spec.arch == Arch::Qwen3 || hd * spec.heads != spec.embd {
                key_length(&mut w);
            }
        }
        Arch::Gemma3 => {
            w.add(&format!("{a}.rope.freq_base"), Value::F32(1e6));
            w.add(
                &format!("{a}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-6),
            );
            key_length(&mut w);
            w.add(
                &format!("{a}.attention.sliding_window"),
                u32v(spec.sliding_window.unwrap_or(SYNTH_SLIDING_WINDOW)),
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
    if model == "gpt2" {
        // llama.cpp refuses a byte-level BPE vocabulary without merges; one (two byte tokens,
        // space-separated as in every GGUF merges list) is enough to load. Decoding never
        // reads it.
        w.add(
            "tokenizer.ggml.merges",
            Value::Array(ValueType::String, vec![Value::String("t 1".into())]),
        );
    }
    w.add("tokenizer.ggml.bos_token_id", Value::U32(bos));
    w.add("tokenizer.ggml.eos_token_id", Value::U32(eos));

    let mut o = Out {
        w: &mut w,
        rng: ChaCha8Rng::seed_from_u64(spec.seed),
        spec,
    };
    let (e, ff, kvd, qd) = (spec.embd, spec.ff, spec.kv_heads * hd, spec.heads * hd);
    let gemma = spec.arch == Arch::Gemma3;
    // Embeddings at unit scale for llama (the first norm rescales anyway); gemma multiplies
    // by sqrt(embd) itself, so its table is drawn at 1/sqrt(embd) like a trained one.
    o.matrix(
        "token_embd.weight",
        Role::TokenEmbd {
            tied: spec.tied_output(),
        },
        spec.vocab,
        e,
        Some(if gemma { 1.0 / (e as f32).sqrt() } else { 1.0 }),
    )?;
    o.norm("output_norm.weight", e)?;
    if !spec.tied_output() {
        // Untied output by default (exercises `output.weight`); gemma stays tied as real ones
        // are.
        o.matrix("output.weight", Role::Output, spec.vocab, e, None)?;
    }
    if spec.rope_freqs {
        // From a stream of their own, so the file without `--rope-freqs` has the very same
        // weights (the control that shows what the factors change).
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ ROPE_FREQS_STREAM);
        o.vector("rope_freqs.weight", &draw_rope_freqs(&mut rng, hd / 2))?;
    }
    for il in 0..spec.layers {
        let n = |s: &str| format!("blk.{il}.{s}.weight");
        let b = |s: &str| format!("blk.{il}.{s}.bias");
        o.norm(&n("attn_norm"), e)?;
        o.matrix(&n("attn_q"), Role::AttnQ, qd, e, None)?;
        o.matrix(&n("attn_k"), Role::AttnK, kvd, e, None)?;
        o.matrix(&n("attn_v"), Role::AttnV { il }, kvd, e, None)?;
        o.matrix(&n("attn_output"), Role::AttnOutput, e, qd, None)?;
        if spec.arch == Arch::Qwen2 {
            o.bias(&b("attn_q"), qd)?;
            o.bias(&b("attn_k"), kvd)?;
            o.bias(&b("attn_v"), kvd)?;
        }
        if spec.arch.has_qk_norm() {
            o.norm(&n("attn_q_norm"), hd)?;
            o.norm(&n("attn_k_norm"), hd)?;
        }
        if spec.arch.has_post_norms() {
            o.norm(&n("post_attention_norm"), e)?;
        }
        o.norm(&n("ffn_norm"), e)?;
        o.matrix(&n("ffn_gate"), Role::FfnGate, ff, e, None)?;
        o.matrix(&n("ffn_up"), Role::FfnUp, ff, e, None)?;
        o.matrix(&n("ffn_down"), Role::FfnDown { il }, e, ff, None)?;
        if spec.arch.has_post_norms() {
            o.norm(&n("post_ffw_norm"), e)?;
        }
    }
    Ok(w)
}

/// Tokenizer model name, token strings, token types, bos, eos. llama, qwen: byte-level BPE with
/// the 256 byte tokens first; gemma3: SentencePiece with 4 specials, then `<0xNN>` byte
/// tokens. The rest are `<tN>` / `▁tN`, so decoded text shows the ids.
fn synth_vocab(spec: &SynthSpec) -> (&'static str, Vec<String>, Vec<i32>, u32, u32) {
    match spec.arch {
        Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => {
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
            quant: GgmlType::Q8_0.into(),
            seed: 3,
            ..builtin_spec()
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
        assert_eq!(SynthQuant::Uniform(m.layers[0].wq.ty), s.quant);
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
    fn a_gemma3_sliding_window_is_written_as_given_and_refused_elsewhere() {
        let s = SynthSpec {
            sliding_window: Some(512),
            ..gemma_spec()
        };
        let m = Model::load(&GgufFile::parse(synth_gguf(&s).expect("synth")).expect("parse"))
            .expect("load");
        assert_eq!(m.cfg.sliding_window, Some(512));
        // The window changes no weight: the default file's tensors, byte for byte.
        let a = GgufFile::parse(synth_gguf(&gemma_spec()).expect("synth")).expect("parse");
        let b = GgufFile::parse(synth_gguf(&s).expect("synth")).expect("parse");
        for t in &b.tensors {
            let u = a.tensor(&t.name).expect("same tensors");
            assert_eq!(a.tensor_bytes(u), b.tensor_bytes(t), "{}", t.name);
        }
        for (spec, want) in [
            (
                SynthSpec {
                    sliding_window: Some(0),
                    ..gemma_spec()
                },
                "must be positive",
            ),
            (
                SynthSpec {
                    sliding_window: Some(64),
                    ..builtin_spec()
                },
                "only gemma3 files carry a sliding window",
            ),
            // Past a u32: refused naming the value, never wrapped (2^32 + 1 was stored as 1).
            (
                SynthSpec {
                    sliding_window: Some((1 << 32) + 1),
                    ..gemma_spec()
                },
                "sliding_window = 4294967297: too large",
            ),
        ] {
            let e = synth_gguf(&spec).expect_err("refused").to_string();
            assert!(e.contains("sliding_window") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn rope_freqs_add_one_tensor_and_change_no_weight() {
        let plain = builtin_spec();
        let with = SynthSpec {
            rope_freqs: true,
            ..plain.clone()
        };
        let a = GgufFile::parse(synth_gguf(&plain).expect("synth")).expect("parse");
        let b = GgufFile::parse(synth_gguf(&with).expect("synth")).expect("parse");
        assert_eq!(b.tensors.len(), a.tensors.len() + 1);
        for t in &b.tensors {
            match a.tensor(&t.name) {
                Some(u) => assert_eq!(a.tensor_bytes(u), b.tensor_bytes(t), "{}", t.name),
                None => assert_eq!(
                    (t.name.as_str(), t.dims.as_slice()),
                    ("rope_freqs.weight", &[16u64][..])
                ),
            }
        }
    }

    #[test]
    fn qwen_specs_write_what_their_architecture_reads() {
        let q2 = SynthSpec {
            arch: Arch::Qwen2,
            tied: true,
            ..builtin_spec()
        };
        let f = GgufFile::parse(synth_gguf(&q2).expect("synth")).expect("parse");
        assert!(f.tensor("output.weight").is_none());
        assert_eq!(
            f.tensor("blk.7.attn_k.bias").map(|t| t.dims.clone()),
            Some(vec![128])
        );
        let q3 = SynthSpec {
            arch: Arch::Qwen3,
            head_dim: Some(64),
            ..builtin_spec()
        };
        let f = GgufFile::parse(synth_gguf(&q3).expect("synth")).expect("parse");
        assert_eq!(
            f.get("qwen3.attention.key_length").and_then(|v| v.as_u64()),
            Some(64)
        );
        // q is heads * head_dim = 512 wide on embd 256.
        let q = f.tensor("blk.0.attn_q.weight").expect("attn_q");
        assert_eq!(q.dims, vec![256, 512]);
        assert!(f.tensor("blk.0.attn_q_norm.weight").is_some());
        for s in [q2, q3] {
            let m = Model::load(&GgufFile::parse(synth_gguf(&s).expect("synth")).expect("parse"))
                .expect("load");
            assert_eq!(m.cfg.arch, s.arch);
        }
    }

    #[test]
    fn rope_freqs_outside_llama_and_odd_head_dims_are_refused_naming_the_flag() {
        for (s, want) in [
            (
                SynthSpec {
                    arch: Arch::Qwen2,
                    rope_freqs: true,
                    ..builtin_spec()
                },
                "rope_freqs",
            ),
            (
                SynthSpec {
                    head_dim: Some(33),
                    ..builtin_spec()
                },
                "head_dim = 33",
            ),
            (
                SynthSpec {
                    embd: 250,
                    quant: GgmlType::F32.into(),
                    ..builtin_spec()
                },
                "embd = 250",
            ),
        ] {
            let e = synth_gguf(&s).expect_err(want).to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn parallel_draw_is_the_sequential_stream_and_leaves_the_rng_where_it_would() {
        for (seed, std, n) in [
            (0u64, 1.0f32, 3 * 65536 + 17),
            (7, 0.013, 65536),
            (9, 2.5, 5),
        ] {
            let mut seq = ChaCha8Rng::seed_from_u64(seed);
            let a = std * 3f32.sqrt();
            let want: Vec<f32> = (0..n).map(|_| seq.gen_range(-a..a)).collect();
            let mut par = ChaCha8Rng::seed_from_u64(seed);
            assert_eq!(draw(&mut par, n, std), want, "seed {seed} n {n}");
            assert_eq!(par.get_word_pos(), seq.get_word_pos());
            assert_eq!(par.gen::<u64>(), seq.gen::<u64>());
        }
    }

    #[test]
    fn more_bits_layers_are_the_first_and_last_eighth_and_every_third_between() {
        let more = |n: usize| (0..n).filter(|&i| use_more_bits(i, n)).collect::<Vec<_>>();
        assert_eq!(more(8), vec![0, 3, 6, 7]);
        assert_eq!(
            more(32),
            vec![0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
        );
        assert_eq!(more(2), vec![1]);
        assert_eq!(more(1), vec![0]);
    }

    fn q4km_spec(arch: Arch, layers: usize) -> SynthSpec {
        SynthSpec {
            arch,
            layers,
            embd: 256,
            heads: 4,
            kv_heads: 2,
            ff: 512,
            vocab: 300,
            quant: SynthQuant::Q4KM,
            seed: 1,
            head_dim: None,
            tied: false,
            rope_freqs: false,
            sliding_window: None,
        }
    }

    fn types_by_name(bytes: Vec<u8>) -> std::collections::HashMap<String, GgmlType> {
        let f = GgufFile::parse(bytes).expect("parse");
        Model::load(&f).expect("a q4_k_m file loads");
        f.tensors.iter().map(|t| (t.name.clone(), t.ty)).collect()
    }

    #[test]
    fn q4_k_m_lays_out_types_as_llama_cpp_does() {
        let ty = types_by_name(synth_gguf(&q4km_spec(Arch::Llama, 8)).expect("synth"));
        assert_eq!(ty["token_embd.weight"], GgmlType::Q4K);
        assert_eq!(ty["output.weight"], GgmlType::Q6K);
        assert_eq!(ty["output_norm.weight"], GgmlType::F32);
        for il in 0..8 {
            let more = [0, 3, 6, 7].contains(&il);
            let hi = if more { GgmlType::Q6K } else { GgmlType::Q4K };
            let t = |s: &str| ty[&format!("blk.{il}.{s}.weight")];
            assert_eq!((t("attn_v"), t("ffn_down")), (hi, hi), "layer {il}");
            for s in ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"] {
                assert_eq!(t(s), GgmlType::Q4K, "layer {il} {s}");
            }
        }
        // gemma3's embedding is its head too: llama.cpp types it as the head.
        let ty = types_by_name(synth_gguf(&q4km_spec(Arch::Gemma3, 6)).expect("synth"));
        assert_eq!(ty["token_embd.weight"], GgmlType::Q6K);
        assert!(!ty.contains_key("output.weight"));
    }

    #[test]
    fn q4_k_m_on_an_80_layer_grouped_llama_puts_the_other_attn_v_in_q5_k() {
        let s = SynthSpec {
            layers: 80,
            ..q4km_spec(Arch::Llama, 80)
        };
        let v = |il| SynthQuant::Q4KM.tensor_type(Role::AttnV { il }, &s, s.embd);
        assert_eq!(
            (v(0), v(10), v(12)),
            (GgmlType::Q6K, GgmlType::Q5K, GgmlType::Q6K)
        );
        assert_eq!(
            SynthQuant::Q4KM.tensor_type(Role::FfnDown { il: 10 }, &s, s.ff),
            GgmlType::Q4K
        );
        let mha = SynthSpec {
            kv_heads: 4,
            ..s.clone()
        };
        assert_eq!(
            SynthQuant::Q4KM.tensor_type(Role::AttnV { il: 10 }, &mha, mha.embd),
            GgmlType::Q4K
        );
    }

    #[test]
    fn q4_k_m_rows_that_256_does_not_tile_take_llama_cpps_fallback() {
        // embd 96: every embd-wide row falls back (96 = 3 blocks of 32), ff 512 does not.
        let s = SynthSpec {
            embd: 96,
            heads: 2,
            kv_heads: 1,
            ..q4km_spec(Arch::Llama, 8)
        };
        let ty = types_by_name(synth_gguf(&s).expect("synth"));
        assert_eq!(ty["token_embd.weight"], GgmlType::Q5_0);
        assert_eq!(ty["output.weight"], GgmlType::Q8_0);
        assert_eq!(ty["blk.0.attn_q.weight"], GgmlType::Q5_0);
        assert_eq!(
            ty["blk.0.attn_v.weight"],
            GgmlType::Q8_0,
            "more bits: Q6_K's fallback"
        );
        assert_eq!(ty["blk.1.attn_v.weight"], GgmlType::Q5_0);
        assert_eq!(
            ty["blk.0.ffn_down.weight"],
            GgmlType::Q6K,
            "ff 512 rows keep Q6_K"
        );
        assert_eq!(ty["blk.1.ffn_down.weight"], GgmlType::Q4K);
        // wo's rows are heads * head_dim = 96 wide too.
        assert_eq!(ty["blk.1.attn_output.weight"], GgmlType::Q5_0);
        // Q5_K falls to Q5_1; rows 32 does not tile either fall to F16.
        assert_eq!(fallback_type(GgmlType::Q5K, 96), GgmlType::Q5_1);
        assert_eq!(fallback_type(GgmlType::Q6K, 40), GgmlType::F16);
        assert_eq!(fallback_type(GgmlType::Q4K, 512), GgmlType::Q4K);
        // Still refused: an embd heads do not divide, named.
        let e = synth_gguf(&SynthSpec { heads: 5, ..s })
            .expect_err("embd 96 over 5 heads")
            .to_string();
        assert!(e.contains("embd = 96"), "{e}");
        assert_eq!(SynthQuant::from_name("Q4_K_M"), Some(SynthQuant::Q4KM));
        assert_eq!(
            SynthQuant::from_name("q6_k"),
            Some(SynthQuant::Uniform(GgmlType::Q6K))
        );
        assert_eq!(SynthQuant::from_name("q4_k_s"), None);
    }

    /// The mix against a file llama.cpp's quantizer wrote: the real Gemma-3 270M Q4_K_M
    /// (fetched by scripts/fetch-models.sh), whose 640-wide rows take the fallback. Its
    /// shape is read from the file, every matrix's type compared by role.
    #[test]
    fn q4_k_m_types_every_matrix_as_the_real_gemma3_file_has_it() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join("gemma-3-270m-q4_k_m.gguf");
        assert!(
            p.exists(),
            "{} is missing: run scripts/fetch-models.sh",
            p.display()
        );
        let f = GgufFile::open(&p).expect("open");
        let u = |k: &str| f.get_u64(&format!("gemma3.{k}")).expect(k) as usize;
        let s = SynthSpec {
            arch: Arch::Gemma3,
            layers: u("block_count"),
            embd: u("embedding_length"),
            heads: u("attention.head_count"),
            kv_heads: u("attention.head_count_kv"),
            ff: u("feed_forward_length"),
            vocab: 262144,
            quant: SynthQuant::Q4KM,
            seed: 0,
            head_dim: Some(u("attention.key_length")),
            tied: true,
            rope_freqs: false,
            sliding_window: None,
        };
        let mut seen = 0;
        for t in &f.tensors {
            let (il, part) = match t.name.strip_prefix("blk.") {
                Some(r) => {
                    let (il, part) = r.split_once('.').expect("blk.N.part");
                    (il.parse::<usize>().expect("layer"), part)
                }
                None => (0, t.name.as_str()),
            };
            let role = match part {
                "token_embd.weight" => Role::TokenEmbd { tied: true },
                "attn_q.weight" => Role::AttnQ,
                "attn_k.weight" => Role::AttnK,
                "attn_v.weight" => Role::AttnV { il },
                "attn_output.weight" => Role::AttnOutput,
                "ffn_gate.weight" => Role::FfnGate,
                "ffn_up.weight" => Role::FfnUp,
                "ffn_down.weight" => Role::FfnDown { il },
                _ => {
                    assert_eq!(t.ty, GgmlType::F32, "{} is a norm", t.name);
                    continue;
                }
            };
            assert_eq!(
                SynthQuant::Q4KM.tensor_type(role, &s, t.dims[0] as usize),
                t.ty,
                "{} ({role:?})",
                t.name
            );
            seen += 1;
        }
        assert_eq!(seen, 1 + 7 * s.layers, "every matrix compared");
    }

    #[test]
    fn files_for_tools_have_merges_once_add_file_type_and_keep_every_tensor() {
        for (spec, merges, ftype) in [
            (q4km_spec(Arch::Llama, 3), true, Some(15u64)),
            (builtin_spec(), true, None),
            (gemma_spec(), false, None),
        ] {
            let plain = GgufFile::parse(synth_gguf(&spec).expect("synth")).expect("parse");
            let tools =
                GgufFile::parse(synth_gguf_for_tools(&spec).expect("synth")).expect("parse");
            let get = |k: &str| {
                tools
                    .metadata
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|e| &e.1)
            };
            let n = tools
                .metadata
                .iter()
                .filter(|(k, _)| k == "tokenizer.ggml.merges")
                .count();
            assert_eq!(n, merges as usize, "{}: merges entries", spec.arch);
            match get("tokenizer.ggml.merges") {
                Some(Value::Array(ValueType::String, v)) => assert!(merges && v.len() == 1),
                None => assert!(!merges, "{}: merges missing", spec.arch),
                Some(other) => panic!("merges is {other:?}"),
            }
            assert_eq!(get("general.file_type").and_then(|v| v.as_u64()), ftype);
            assert_eq!(plain.tensors.len(), tools.tensors.len());
            for (a, b) in plain.tensors.iter().zip(&tools.tensors) {
                assert_eq!((&a.name, a.ty), (&b.name, b.ty));
                assert_eq!(plain.tensor_bytes(a), tools.tensor_bytes(b), "{}", a.name);
            }
            Model::load(&tools).expect("loads");
        }
    }

    #[test]
    fn dims_that_are_not_whole_quant_blocks_are_rejected_naming_the_value() {
        let s = SynthSpec {
            ff: 200,
            quant: GgmlType::Q4K.into(),
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
