//! Architectures (llama, gemma3, qwen2, qwen3): the config read from GGUF metadata, weight views into the
//! file bytes, the vocabulary (decode only), the forward pass as stage primitives
//! ([`forward`]) and a seeded synthetic-model writer ([`synth`]).
//!
//! Rule that holds in this module: a model is either loaded completely and checked — every
//! key the architecture needs is present with the right type, every tensor has the shape
//! the config implies and a type whose rows are whole blocks — or loading fails with a
//! [`ModelError`] that names the key, tensor or architecture string. Nothing in the file is
//! silently ignored: a tensor the forward pass does not read, or an `<arch>.*` metadata key
//! this crate does not implement (it may change the math: RoPE scaling, a sliding window on
//! an architecture without one, soft-capping, experts), refuses the load naming it, so the
//! gate never runs a different model than the file describes. Quantized weights are
//! never copied or converted: a [`Weight`] is a view into the shared file bytes, so the
//! matmul reads exactly the bytes the file holds.

pub mod forward;
mod rows;
pub mod synth;
mod vocab;

use std::path::Path;

use crate::gguf::{GgufError, GgufFile, Value};
use crate::math::RopeStyle;
use crate::quant::{GgmlType, QuantError, Weight};

pub use forward::{HostKv, HostSession, KvAccess};
pub use rows::{KvOrder, RowAt};
pub use vocab::{Vocab, VocabKind};

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Quant(#[from] QuantError),
    #[error("unsupported architecture {0:?} (supported: llama, gemma3, qwen2, qwen3)")]
    UnsupportedArch(String),
    #[error(
        "tensor {name} is not read by the {arch} forward pass: refusing to run a different \
         model than the file describes"
    )]
    UnreadTensor { name: String, arch: Arch },
    #[error("metadata key {key} = {value}: not implemented for architecture {arch} ({why})")]
    UnsupportedKey {
        key: String,
        value: String,
        arch: Arch,
        why: String,
    },
    #[error("missing metadata key {key}")]
    MissingKey { key: String },
    #[error("metadata key {key}: expected {expected}, found {found}")]
    KeyType {
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("metadata key {key} = {value}: {why}")]
    KeyValue {
        key: String,
        value: String,
        why: String,
    },
    #[error("missing tensor {0}")]
    MissingTensor(String),
    #[error("tensor {name}: dims {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("tensor {name}: {why}")]
    TensorValue { name: String, why: String },
    #[error("tensor {name}: type {ty}: {why}")]
    TensorType {
        name: String,
        ty: GgmlType,
        why: String,
    },
    #[error("token id {id} is not below the vocabulary size {vocab}")]
    TokenId { id: u32, vocab: usize },
    #[error("synthetic model: {what} = {value}: {why}")]
    Synth {
        what: &'static str,
        value: u64,
        why: String,
    },
}

/// A supported architecture (the `general.architecture` string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Llama,
    Gemma3,
    Qwen2,
    Qwen3,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Llama, Arch::Gemma3, Arch::Qwen2, Arch::Qwen3];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Gemma3 => "gemma3",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }
    pub fn from_name(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s)
    }
    /// Per-head RMS norms of q and k before RoPE (`attn_q_norm`, `attn_k_norm`).
    pub fn has_qk_norm(self) -> bool {
        matches!(self, Arch::Gemma3 | Arch::Qwen3)
    }
    /// Optional q/k/v projection biases (`attn_{q,k,v}.bias`), read when the file has them,
    /// as llama.cpp's loaders of these architectures do (every Qwen2 checkpoint has them).
    pub fn reads_qkv_bias(self) -> bool {
        matches!(self, Arch::Llama | Arch::Qwen2 | Arch::Qwen3)
    }
    /// Gemma-style post-attention and post-FFN norms.
    pub fn has_post_norms(self) -> bool {
        self == Arch::Gemma3
    }
    /// `rope_freqs.weight` (Llama-3.1+ per-dimension RoPE frequency factors), read when present.
    pub fn reads_rope_freqs(self) -> bool {
        self == Arch::Llama
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// FFN gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// llama: silu(gate) * up.
    Silu,
    /// gemma3: gelu_tanh(gate) * up.
    GeluTanh,
}

/// Everything the forward pass needs to know about the shapes and constants of a model.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub n_layers: usize,
    pub n_embd: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub vocab: usize,
    pub rms_eps: f32,
    /// RoPE base of global (full-attention) layers.
    pub rope_base: f32,
    /// RoPE base of sliding-window layers (gemma3: 10000; llama: = rope_base).
    pub rope_base_local: f32,
    /// Window of the sliding layers: a query at p attends to positions (p - w, p].
    pub sliding_window: Option<usize>,
    /// Per layer: true when the layer uses the sliding window (and `rope_base_local`).
    pub layer_sliding: Vec<bool>,
    /// Multiplies the token embedding (1.0 llama; sqrt(n_embd) rounded to f32, gemma3).
    pub embed_scale: f32,
    /// Multiplies q·k (1/sqrt(head_dim) for every arch; gemma3-270m: query_pre_attn_scalar
    /// = 256 = head_dim).
    pub attn_scale: f32,
    pub rope_style: RopeStyle,
    pub activation: Activation,
    /// Trained context length (metadata; 0 when absent).
    pub context_length: usize,
    /// Per-dimension RoPE frequency factors (head_dim/2 of them, each > 0): the angle of pair
    /// i is divided by factor i. From `rope_freqs.weight` (llama, read by `Model::load`).
    pub rope_freqs: Option<Vec<f32>>,
}

impl Config {
    /// Width of the concatenated query heads.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }
    /// Width of one position's keys (and values) across kv heads.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
    /// RoPE base of layer `il`.
    pub fn layer_rope_base(&self, il: usize) -> f32 {
        if self.layer_sliding.get(il).copied().unwrap_or(false) {
            self.rope_base_local
        } else {
            self.rope_base
        }
    }
    /// The RoPE cos/sin of layer `il` at `pos` (`crate::math::rope_table` with the layer's base
    /// and the model's frequency factors): the one definition the CPU forward and the device
    /// engines' uploaded tables share.
    pub fn layer_rope_table(&self, il: usize, pos: usize, cos: &mut [f32], sin: &mut [f32]) {
        crate::math::rope_table(
            self.head_dim,
            self.layer_rope_base(il),
            self.rope_freqs.as_deref(),
            pos,
            cos,
            sin,
        );
    }
    /// Layer `il`'s sliding window in positions (None: it attends to the whole sequence).
    pub fn layer_window(&self, il: usize) -> Option<usize> {
        self.sliding_window
            .filter(|_| self.layer_sliding.get(il).copied().unwrap_or(false))
    }

    /// First cached position a query at `pos` attends to in layer `il`.
    pub fn attn_start(&self, il: usize, pos: usize) -> usize {
        match self.layer_window(il) {
            Some(w) => (pos + 1).saturating_sub(w),
            None => 0,
        }
    }

    /// Reads the config of a GGUF file's architecture from its metadata. `vocab` is the
    /// row count of `token_embd.weight` (gemma3 files carry no `vocab_size` key).
    pub fn from_gguf(f: &GgufFile) -> Result<Config, ModelError> {
        let arch_s = get_str(f, "general.architecture")?;
        let arch = Arch::from_name(arch_s)
            .ok_or_else(|| ModelError::UnsupportedArch(arch_s.to_string()))?;
        let a = arch.name();
        let k = |s: &str| format!("{a}.{s}");
        let n_layers = get_usize(f, &k("block_count"))?;
        let n_embd = get_usize(f, &k("embedding_length"))?;
        let n_ff = get_usize(f, &k("feed_forward_length"))?;
        let n_heads = get_usize(f, &k("attention.head_count"))?;
        let n_kv_heads = opt_usize(f, &k("attention.head_count_kv"))?.unwrap_or(n_heads);
        // The float constants every step's math divides by or raises to: a NaN, an infinity,
        // zero or a negative value makes every logit NaN (or garbage) on every stage alike, so
        // the gate would compare NaN bits with NaN bits and PASS. Refused here, naming the key.
        let rms_eps = finite_positive(
            &k("attention.layer_norm_rms_epsilon"),
            get_f32(f, &k("attention.layer_norm_rms_epsilon"))?,
            "the RMS norm divides by sqrt(mean square + epsilon)",
        )?;
        let rope_base = match opt_f32(f, &k("rope.freq_base"))? {
            Some(b) => finite_positive(
                &k("rope.freq_base"),
                b,
                "RoPE raises the base to fractional powers",
            )?,
            None => 10000.0,
        };
        // The trained context, which bounds every run's positions: required, as llama.cpp
        // requires it (absent, it was read as "unknown" and the bound silently dropped: a
        // 5000-position gate ran on a file naming none); 0 positions is no model.
        let context_length = match get_usize(f, &k("context_length"))? {
            0 => {
                return Err(kv_err(
                    &k("context_length"),
                    0,
                    "must be at least 1 (the positions the model was trained for)".into(),
                ))
            }
            n => n,
        };
        for (key, v) in [
            (k("block_count"), n_layers),
            (k("embedding_length"), n_embd),
            (k("feed_forward_length"), n_ff),
        ] {
            positive(&key, v)?;
        }
        // Every layer has at least 9 tensors: a block_count the file cannot back is refused
        // here, before anything is sized by it.
        if n_layers > f.tensors.len() / 9 {
            return Err(kv_err(
                &k("block_count"),
                n_layers,
                format!("more layers than {} tensors can hold", f.tensors.len()),
            ));
        }
        positive(&k("attention.head_count"), n_heads)?;
        positive(&k("attention.head_count_kv"), n_kv_heads)?;
        if n_heads % n_kv_heads != 0 {
            return Err(kv_err(
                &k("attention.head_count_kv"),
                n_kv_heads,
                format!("does not divide head_count {n_heads}"),
            ));
        }
        // The key the head dim comes from, for its errors (absent: embd / heads).
        let mut hd_key = k("attention.key_length");
        let head_dim = match opt_usize(f, &hd_key)? {
            Some(v) => v,
            None => {
                hd_key = format!("{} / {}", k("embedding_length"), k("attention.head_count"));
                if n_embd % n_heads != 0 {
                    return Err(kv_err(
                        &k("attention.head_count"),
                        n_heads,
                        format!("does not divide embedding_length {n_embd}"),
                    ));
                }
                n_embd / n_heads
            }
        };
        if head_dim == 0 || head_dim % 2 != 0 {
            return Err(kv_err(
                &hd_key,
                head_dim,
                "head dim must be even and positive".into(),
            ));
        }
        // q_dim() and kv_dim() multiply these; n_kv_heads <= n_heads (it divides it).
        if n_heads.checked_mul(head_dim).is_none() {
            return Err(kv_err(
                &hd_key,
                head_dim,
                format!("times head_count {n_heads} overflows"),
            ));
        }
        if let Some(vl) = opt_usize(f, &k("attention.value_length"))? {
            if vl != head_dim {
                return Err(kv_err(
                    &k("attention.value_length"),
                    vl,
                    format!("differs from key length {head_dim} ({hd_key})"),
                ));
            }
        }
        if let Some(rd) = opt_usize(f, &k("rope.dimension_count"))? {
            if rd != head_dim {
                return Err(kv_err(
                    &k("rope.dimension_count"),
                    rd,
                    format!("partial RoPE is not supported (head dim {head_dim}: {hd_key})"),
                ));
            }
        }
        if let Some(sf) = opt_f32(f, &k("rope.scaling.factor"))? {
            if !sf.is_finite() {
                return Err(kv_err(
                    &k("rope.scaling.factor"),
                    sf,
                    "must be finite".into(),
                ));
            }
            if sf != 1.0 && sf != 0.0 {
                return Err(kv_err(
                    &k("rope.scaling.factor"),
                    sf,
                    "RoPE scaling is not supported".into(),
                ));
            }
        }
        let emb = f
            .tensor("token_embd.weight")
            .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
        let vocab = match emb.dims.as_slice() {
            [c, r] if *c == n_embd as u64 && *r > 0 => *r as usize,
            _ => {
                return Err(ModelError::TensorShape {
                    name: "token_embd.weight".into(),
                    expected: vec![n_embd as u64, 0],
                    found: emb.dims.clone(),
                })
            }
        };
        if let Some(vs) = opt_usize(f, &k("vocab_size"))? {
            if vs != vocab {
                return Err(kv_err(
                    &k("vocab_size"),
                    vs,
                    format!("token_embd.weight has {vocab} rows"),
                ));
            }
        }
        check_arch_keys(f, arch)?;
        let attn_scale = (1.0 / (head_dim as f64).sqrt()) as f32;
        // The llama shape; the other architectures change what differs below.
        let mut cfg = Config {
            arch,
            n_layers,
            n_embd,
            n_heads,
            n_kv_heads,
            head_dim,
            n_ff,
            vocab,
            rms_eps,
            rope_base,
            rope_base_local: rope_base,
            sliding_window: None,
            layer_sliding: vec![false; n_layers],
            embed_scale: 1.0,
            attn_scale,
            rope_style: RopeStyle::Norm,
            activation: Activation::Silu,
            context_length,
            rope_freqs: None,
        };
        match arch {
            Arch::Llama => {}
            // llama.cpp LLAMA_ROPE_TYPE_NEOX (HF rotate_half; their converters do not permute
            // q/k rows as the llama converter does).
            Arch::Qwen2 | Arch::Qwen3 => cfg.rope_style = RopeStyle::Neox,
            Arch::Gemma3 => {
                let window = get_usize(f, &k("attention.sliding_window"))?;
                positive(&k("attention.sliding_window"), window)?;
                // Absent from older gemma3 GGUFs (like the 270m one): llama.cpp and HF
                // both fix it at 10000; newer converters write `rope.freq_base_swa`.
                cfg.rope_base_local = match opt_f32(f, &k("rope.freq_base_swa"))? {
                    Some(b) => finite_positive(
                        &k("rope.freq_base_swa"),
                        b,
                        "RoPE raises the base to fractional powers",
                    )?,
                    None => 10000.0,
                };
                cfg.sliding_window = Some(window);
                // Every 6th layer is global (llama.cpp `set_swa_pattern(6)`, HF
                // `sliding_window_pattern = 6`).
                cfg.layer_sliding = (0..n_layers).map(|il| (il + 1) % 6 != 0).collect();
                // HF: `hidden_size ** 0.5` (a Python double) stored as an f32 tensor.
                cfg.embed_scale = (n_embd as f64).sqrt() as f32;
                cfg.rope_style = RopeStyle::Neox;
                cfg.activation = Activation::GeluTanh;
            }
        }
        Ok(cfg)
    }
}

/// Refuses every `<arch>.*` metadata key this crate does not implement, naming it: such a
/// key may change the math (RoPE scaling, a sliding window, soft-capping, experts, ...), and
/// running the file while ignoring it would gate a different model than the file describes.
/// Keys of other prefixes (`general.*`, `tokenizer.*`) describe the file or the tokenizer,
/// never the forward pass.
fn check_arch_keys(f: &GgufFile, arch: Arch) -> Result<(), ModelError> {
    // Read by `Config::from_gguf`, or informational only while no RoPE scaling is active
    // (a scaling factor other than 1 is refused there).
    const READ: [&str; 15] = [
        "block_count",
        "context_length",
        "embedding_length",
        "feed_forward_length",
        "attention.head_count",
        "attention.head_count_kv",
        "attention.layer_norm_rms_epsilon",
        "attention.key_length",
        "attention.value_length",
        "rope.freq_base",
        "rope.dimension_count",
        "vocab_size",
        "rope.scaling.factor",
        "rope.scaling.original_context_length",
        "rope.scaling.finetuned",
    ];
    const GEMMA3: [&str; 2] = ["attention.sliding_window", "rope.freq_base_swa"];
    let prefix = format!("{}.", arch.name());
    for (key, v) in &f.metadata {
        let Some(rest) = key.strip_prefix(&prefix) else {
            continue;
        };
        if READ.contains(&rest) || (arch == Arch::Gemma3 && GEMMA3.contains(&rest)) {
            continue;
        }
        let why = match rest {
            // "linear" reaches here only with a factor of 1 (or none): no scaling at all.
            "rope.scaling.type" if matches!(v.as_str(), Some("none" | "linear")) => continue,
            "rope.scaling.type" => "this RoPE scaling type is not implemented",
            // A dense model's converter may write an expert count of 0.
            "expert_count" | "expert_used_count" if v.as_u64() == Some(0) => continue,
            "attention.sliding_window" => {
                "this architecture attends to the whole context: a sliding window would change \
                 the math"
            }
            _ => "unknown to this harness: it may change the math",
        };
        let value = match v {
            Value::Array(_, items) => format!("[{} items]", items.len()),
            Value::String(s) => format!("{s:?}"),
            Value::Bool(b) => b.to_string(),
            Value::F32(_) | Value::F64(_) => v.as_f32().map(|x| x.to_string()).unwrap_or_default(),
            _ => (v.as_i64().map(|x| x.to_string()))
                .or_else(|| v.as_u64().map(|x| x.to_string()))
                .unwrap_or_default(),
        };
        return Err(ModelError::UnsupportedKey {
            key: key.clone(),
            value,
            arch,
            why: why.into(),
        });
    }
    Ok(())
}

fn positive(key: &str, v: usize) -> Result<(), ModelError> {
    if v == 0 {
        return Err(kv_err(key, 0, "must be positive".into()));
    }
    Ok(())
}

/// `v` (the float read from `key`) when it is finite and > 0, else an error naming the key,
/// the value as read and `why` the math needs it so.
fn finite_positive(key: &str, v: f32, why: &str) -> Result<f32, ModelError> {
    if v.is_finite() && v > 0.0 {
        return Ok(v);
    }
    Err(kv_err(key, v, format!("must be finite and > 0 ({why})")))
}

fn kv_err(key: &str, value: impl std::fmt::Display, why: String) -> ModelError {
    ModelError::KeyValue {
        key: key.to_string(),
        value: value.to_string(),
        why,
    }
}

fn get<'a>(f: &'a GgufFile, key: &str) -> Result<&'a Value, ModelError> {
    f.get(key).ok_or_else(|| ModelError::MissingKey {
        key: key.to_string(),
    })
}

fn type_err(key: &str, expected: &'static str, v: &Value) -> ModelError {
    ModelError::KeyType {
        key: key.to_string(),
        expected,
        found: v.type_name().to_string(),
    }
}

fn get_str<'a>(f: &'a GgufFile, key: &str) -> Result<&'a str, ModelError> {
    let v = get(f, key)?;
    v.as_str().ok_or_else(|| type_err(key, "string", v))
}

fn get_usize(f: &GgufFile, key: &str) -> Result<usize, ModelError> {
    let v = get(f, key)?;
    match v {
        Value::Bool(_) | Value::F32(_) | Value::F64(_) | Value::String(_) | Value::Array(..) => {
            Err(type_err(key, "unsigned integer", v))
        }
        _ => {
            let n = v
                .as_u64()
                .ok_or_else(|| kv_err(key, format!("{v:?}"), "must be non-negative".into()))?;
            usize::try_from(n).map_err(|_| kv_err(key, n, "too large".into()))
        }
    }
}

fn opt_usize(f: &GgufFile, key: &str) -> Result<Option<usize>, ModelError> {
    if f.get(key).is_none() {
        return Ok(None);
    }
    get_usize(f, key).map(Some)
}

fn get_f32(f: &GgufFile, key: &str) -> Result<f32, ModelError> {
    let v = get(f, key)?;
    match v {
        Value::F32(x) => Ok(*x),
        // A finite f64 beyond f32's range would read as an infinity: named as the file has it.
        Value::F64(x) if x.is_finite() && !(*x as f32).is_finite() => Err(kv_err(
            key,
            format!("{x:e}"),
            "is beyond the range of the f32 the math uses".into(),
        )),
        Value::F64(x) => Ok(*x as f32),
        _ => Err(type_err(key, "float", v)),
    }
}

fn opt_f32(f: &GgufFile, key: &str) -> Result<Option<f32>, ModelError> {
    if f.get(key).is_none() {
        return Ok(None);
    }
    get_f32(f, key).map(Some)
}

/// The weights of one transformer block. The `Option` fields are there in the architectures
/// that have them (q/k norms: gemma3, qwen3; post norms: gemma3; q/k/v biases: llama, qwen2,
/// qwen3 files that carry them).
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: Weight,
    pub wk: Weight,
    pub wv: Weight,
    pub wo: Weight,
    /// Added to the q/k/v projections (before the head norms and RoPE).
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub gate: Weight,
    pub up: Weight,
    pub down: Weight,
    pub post_ffn_norm: Option<Vec<f32>>,
}

impl LayerWeights {
    /// The layer's seven matvec matrices: q, k, v, o, gate, up, down.
    pub fn matrices(&self) -> [&Weight; 7] {
        [
            &self.wq, &self.wk, &self.wv, &self.wo, &self.gate, &self.up, &self.down,
        ]
    }

    /// Bytes of this layer's tensors as the file stores them (norms: 4 per element).
    pub fn n_bytes(&self) -> u64 {
        let mats = self.matrices();
        let norms = [
            Some(&self.attn_norm),
            self.bq.as_ref(),
            self.bk.as_ref(),
            self.bv.as_ref(),
            self.q_norm.as_ref(),
            self.k_norm.as_ref(),
            self.post_attn_norm.as_ref(),
            Some(&self.ffn_norm),
            self.post_ffn_norm.as_ref(),
        ];
        mats.iter().map(|w| w.n_bytes() as u64).sum::<u64>()
            + norms
                .iter()
                .flatten()
                .map(|n| 4 * n.len() as u64)
                .sum::<u64>()
    }
}

/// A loaded model: config, weights (views into the file), vocabulary.
#[derive(Clone, Debug)]
pub struct Model {
    pub cfg: Config,
    pub layers: Vec<LayerWeights>,
    pub tok_embd: Weight,
    pub out_norm: Vec<f32>,
    /// `output.weight`, or `tok_embd` when the file ties them (no `output.weight`).
    pub output: Weight,
    pub vocab: Vocab,
    /// blake3 of the whole GGUF file, hex.
    pub file_blake3: String,
    /// Bytes of all weights the forward pass reads (a tied output counted once).
    pub weight_bytes: u64,
}

impl Model {
    pub fn open(path: &Path) -> Result<Model, ModelError> {
        Model::load(&GgufFile::open(path)?)
    }

    pub fn load(f: &GgufFile) -> Result<Model, ModelError> {
        let mut cfg = Config::from_gguf(f)?;
        let vocab = Vocab::from_gguf(f)?;
        let arch = cfg.arch;
        let (e, hd) = (cfg.n_embd, cfg.head_dim);
        let mut t = Loader {
            f,
            read: Default::default(),
        };
        let tok_embd = t.matrix("token_embd.weight", cfg.vocab, e)?;
        let tied = f.tensor("output.weight").is_none();
        let output = if tied {
            tok_embd.clone()
        } else {
            t.matrix("output.weight", cfg.vocab, e)?
        };
        let out_norm = t.vector("output_norm.weight", e)?;
        if arch.reads_rope_freqs() {
            let name = "rope_freqs.weight";
            let factors = t.opt_vector(name, hd / 2, true)?;
            let mut all = factors.iter().flatten().enumerate();
            if let Some((i, x)) = all.find(|(_, x)| !(x.is_finite() && **x > 0.0)) {
                return Err(ModelError::TensorValue {
                    name: name.into(),
                    why: format!("factor {i} is {x} (RoPE divides by it: must be finite and > 0)"),
                });
            }
            cfg.rope_freqs = factors;
        }
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for il in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{il}.{s}.weight");
            let b = |s: &str| format!("blk.{il}.{s}.bias");
            let (qn, pn, bias) = (
                arch.has_qk_norm(),
                arch.has_post_norms(),
                arch.reads_qkv_bias(),
            );
            layers.push(LayerWeights {
                attn_norm: t.vector(&n("attn_norm"), e)?,
                wq: t.matrix(&n("attn_q"), cfg.q_dim(), e)?,
                wk: t.matrix(&n("attn_k"), cfg.kv_dim(), e)?,
                wv: t.matrix(&n("attn_v"), cfg.kv_dim(), e)?,
                wo: t.matrix(&n("attn_output"), e, cfg.q_dim())?,
                bq: t.opt_vector(&b("attn_q"), cfg.q_dim(), bias)?,
                bk: t.opt_vector(&b("attn_k"), cfg.kv_dim(), bias)?,
                bv: t.opt_vector(&b("attn_v"), cfg.kv_dim(), bias)?,
                q_norm: t.req_vector(&n("attn_q_norm"), hd, qn)?,
                k_norm: t.req_vector(&n("attn_k_norm"), hd, qn)?,
                post_attn_norm: t.req_vector(&n("post_attention_norm"), e, pn)?,
                ffn_norm: t.vector(&n("ffn_norm"), e)?,
                gate: t.matrix(&n("ffn_gate"), cfg.n_ff, e)?,
                up: t.matrix(&n("ffn_up"), cfg.n_ff, e)?,
                down: t.matrix(&n("ffn_down"), e, cfg.n_ff)?,
                post_ffn_norm: t.req_vector(&n("post_ffw_norm"), e, pn)?,
            });
        }
        // Every tensor of the file is read above, or the file describes a model this forward
        // pass does not compute (an output bias, a fused qkv, experts, a rope_freqs on an
        // architecture that never applies one, ...).
        if let Some(u) = f.tensors.iter().find(|ti| !t.read.contains(&ti.name)) {
            return Err(ModelError::UnreadTensor {
                name: u.name.clone(),
                arch,
            });
        }
        let mut weight_bytes = tok_embd.n_bytes() as u64 + 4 * out_norm.len() as u64;
        if !tied {
            weight_bytes += output.n_bytes() as u64;
        }
        weight_bytes += layers.iter().map(|l| l.n_bytes()).sum::<u64>();
        weight_bytes += cfg.rope_freqs.as_ref().map_or(0, |v| 4 * v.len() as u64);
        let file_blake3 = blake3::hash(f.bytes()).to_hex().to_string();
        Ok(Model {
            cfg,
            layers,
            tok_embd,
            out_norm,
            output,
            vocab,
            file_blake3,
            weight_bytes,
        })
    }

    /// Bytes of layer `il`'s weights (0 for an index past the last layer).
    pub fn layer_bytes(&self, il: usize) -> u64 {
        self.layers.get(il).map_or(0, |l| l.n_bytes())
    }

    /// Weight bytes of one stage's engine: its layers, plus the embedding when it embeds
    /// and the output norm and head when it holds the head.
    pub fn stage_weight_bytes(
        &self,
        layers: std::ops::Range<usize>,
        embed: bool,
        head: bool,
    ) -> u64 {
        let mut b: u64 = layers.map(|il| self.layer_bytes(il)).sum();
        if embed {
            b += self.tok_embd.n_bytes() as u64;
        }
        if head {
            b += self.output.n_bytes() as u64 + 4 * self.out_norm.len() as u64;
        }
        b
    }

    /// Checks token ids against the vocabulary, naming the first bad one. [`forward::embed`]
    /// itself never fails (an out-of-range id embeds as zeros), so input boundaries call this.
    pub fn check_tokens(&self, tokens: &[u32]) -> Result<(), ModelError> {
        match tokens.iter().find(|&&t| t as usize >= self.cfg.vocab) {
            Some(&t) => Err(ModelError::TokenId {
                id: t,
                vocab: self.cfg.vocab,
            }),
            None => Ok(()),
        }
    }
}

fn tensor<'a>(f: &'a GgufFile, name: &str) -> Result<&'a crate::gguf::TensorInfo, ModelError> {
    f.tensor(name)
        .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
}

/// Reads a file's tensors for `Model::load`, recording each name it reads, so that a tensor
/// nothing read is found afterwards.
struct Loader<'a> {
    f: &'a GgufFile,
    read: std::collections::HashSet<String>,
}

impl Loader<'_> {
    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Weight, ModelError> {
        self.read.insert(name.to_string());
        matrix(self.f, name, rows, cols)
    }
    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
        self.read.insert(name.to_string());
        norm(self.f, name, len)
    }
    /// `name` when the architecture has it (`needed`: missing is an error), else None (and
    /// left unread: a file that has it anyway is refused after loading).
    fn req_vector(
        &mut self,
        name: &str,
        len: usize,
        needed: bool,
    ) -> Result<Option<Vec<f32>>, ModelError> {
        needed.then(|| self.vector(name, len)).transpose()
    }
    /// `name` when the architecture reads it (`reads`) and the file has it, else None.
    fn opt_vector(
        &mut self,
        name: &str,
        len: usize,
        reads: bool,
    ) -> Result<Option<Vec<f32>>, ModelError> {
        let present = self.f.tensor(name).is_some();
        self.req_vector(name, len, reads && present)
    }
}

/// A `rows`×`cols` matrix tensor (ggml dims `[cols, rows]`) as a view into the file.
fn matrix(f: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<Weight, ModelError> {
    let t = tensor(f, name)?;
    if t.dims != [cols as u64, rows as u64] {
        return Err(ModelError::TensorShape {
            name: name.into(),
            expected: vec![cols as u64, rows as u64],
            found: t.dims.clone(),
        });
    }
    let r = f.tensor_range(t);
    let w = Weight::view(name, t.ty, rows, cols, f.bytes().clone(), r.start)?;
    if w.n_bytes() != r.len() {
        return Err(ModelError::TensorType {
            name: name.into(),
            ty: t.ty,
            why: format!("{} bytes stored, {} expected", r.len(), w.n_bytes()),
        });
    }
    Ok(w)
}

/// A 1-D weight of `len` elements (a norm, bias or RoPE factor vector), dequantized to f32
/// (F32 in every supported file; GGUF gemma norms already include the +1 of Gemma's
/// `(1 + w)` scaling).
fn norm(f: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let t = tensor(f, name)?;
    if t.dims != [len as u64] {
        return Err(ModelError::TensorShape {
            name: name.into(),
            expected: vec![len as u64],
            found: t.dims.clone(),
        });
    }
    let want =
        t.ty.row_bytes(len as u64)
            .ok_or_else(|| ModelError::TensorType {
                name: name.into(),
                ty: t.ty,
                why: format!(
                    "length {len} is not a multiple of the block length {}",
                    t.ty.block_len()
                ),
            })?;
    let bytes = f.tensor_bytes(t);
    if bytes.len() as u64 != want {
        return Err(ModelError::TensorType {
            name: name.into(),
            ty: t.ty,
            why: format!("{} bytes stored, {want} expected", bytes.len()),
        });
    }
    let mut out = vec![0.0f32; len];
    crate::quant::dequantize(t.ty, bytes, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
