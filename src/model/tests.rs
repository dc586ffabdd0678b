//! Pins the loader's errors (each names the key / tensor / arch string) and the forward
//! pass's determinism: a row's logits do not depend on batch size, thread count, or where
//! the layer range is split; sliding layers see exactly the window.

use super::forward::{embed, head, layer, HostKv, HostSession};
use super::synth::{builtin_spec, synth_gguf, SynthSpec, SYNTH_SLIDING_WINDOW};
use super::*;
use crate::gguf::{GgufFile, GgufWriter, Value};

fn synth_file(spec: &SynthSpec) -> GgufFile {
    GgufFile::parse(synth_gguf(spec).expect("synth")).expect("parse")
}

fn gemma_spec() -> SynthSpec {
    SynthSpec {
        arch: Arch::Gemma3,
        layers: 6,
        embd: 64,
        heads: 2,
        kv_heads: 1,
        ff: 128,
        vocab: 384,
        quant: crate::quant::GgmlType::Q8_0.into(),
        seed: 5,
        ..builtin_spec()
    }
}

fn small_llama() -> SynthSpec {
    SynthSpec {
        layers: 4,
        embd: 64,
        heads: 4,
        kv_heads: 2,
        ff: 128,
        vocab: 320,
        ..builtin_spec()
    }
}

/// Re-writes a parsed file through `edit_kv` (metadata) and `edit_t` (tensor name, dims).
fn rewrite(
    f: &GgufFile,
    edit_kv: impl Fn(&str, &Value) -> Option<Value>,
    edit_t: impl Fn(&str, &[u64]) -> Option<Vec<u64>>,
) -> GgufFile {
    let mut w = GgufWriter::new();
    for (k, v) in &f.metadata {
        if k == "general.alignment" {
            continue;
        }
        if let Some(v) = edit_kv(k, v) {
            w.add(k, v);
        }
    }
    for t in &f.tensors {
        if let Some(dims) = edit_t(&t.name, &t.dims) {
            let data = f.tensor_bytes(t).to_vec();
            // Keep the byte count valid for the new dims by re-sizing the data.
            let n: u64 = dims.iter().product();
            let want = t.ty.row_bytes(n).expect("whole blocks") as usize;
            let mut d = data;
            d.resize(want, 0);
            w.add_tensor(&t.name, &dims, t.ty, d).expect("add tensor");
        }
    }
    GgufFile::parse(w.to_bytes()).expect("parse rewritten")
}

/// qwen2 as real checkpoints have it: q/k/v biases, rope base 1e6, here with a tied head.
fn small_qwen2() -> SynthSpec {
    SynthSpec {
        arch: Arch::Qwen2,
        tied: true,
        seed: 11,
        ..small_llama()
    }
}

/// qwen3 with heads twice as wide as embd / heads (q is 128 wide on embd 64).
fn small_qwen3() -> SynthSpec {
    SynthSpec {
        arch: Arch::Qwen3,
        head_dim: Some(32),
        seed: 12,
        ..small_llama()
    }
}

/// llama with seeded RoPE frequency factors (`rope_freqs.weight`).
fn llama_rope_freqs() -> SynthSpec {
    SynthSpec {
        rope_freqs: true,
        ..small_llama()
    }
}

/// `f` with metadata `kv` and F32 tensors `ts` (name, values) added after its own.
fn extend(f: &GgufFile, kv: &[(&str, Value)], ts: &[(&str, Vec<f32>)]) -> GgufFile {
    let mut w = GgufWriter::new();
    for (k, v) in &f.metadata {
        if k != "general.alignment" {
            w.add(k, v.clone());
        }
    }
    for (k, v) in kv {
        w.add(k, v.clone());
    }
    for t in &f.tensors {
        w.add_tensor(&t.name, &t.dims, t.ty, f.tensor_bytes(t).to_vec())
            .expect("add tensor");
    }
    for (name, vals) in ts {
        let bytes = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        w.add_tensor(
            name,
            &[vals.len() as u64],
            crate::quant::GgmlType::F32,
            bytes,
        )
        .expect("add tensor");
    }
    GgufFile::parse(w.to_bytes()).expect("parse extended")
}

fn load_err(f: &GgufFile) -> String {
    Model::load(f).expect_err("load must fail").to_string()
}

#[test]
fn unsupported_architecture_is_named() {
    let f = synth_file(&small_llama());
    let g = rewrite(
        &f,
        |k, v| {
            Some(if k == "general.architecture" {
                Value::String("mamba".into())
            } else {
                v.clone()
            })
        },
        |_, d| Some(d.to_vec()),
    );
    let e = load_err(&g);
    assert!(e.contains("\"mamba\""), "{e}");
}

#[test]
fn missing_and_mistyped_keys_are_named() {
    let f = synth_file(&small_llama());
    let g = rewrite(
        &f,
        |k, v| (k != "llama.feed_forward_length").then(|| v.clone()),
        |_, d| Some(d.to_vec()),
    );
    assert!(load_err(&g).contains("llama.feed_forward_length"));
    let g = rewrite(
        &f,
        |k, v| {
            Some(if k == "llama.block_count" {
                Value::String("4".into())
            } else {
                v.clone()
            })
        },
        |_, d| Some(d.to_vec()),
    );
    let e = load_err(&g);
    assert!(
        e.contains("llama.block_count") && e.contains("string"),
        "{e}"
    );
    let g = rewrite(
        &f,
        |k, v| {
            Some(if k == "llama.attention.layer_norm_rms_epsilon" {
                Value::U32(1)
            } else {
                v.clone()
            })
        },
        |_, d| Some(d.to_vec()),
    );
    assert!(load_err(&g).contains("llama.attention.layer_norm_rms_epsilon"));
    let g = rewrite(
        &f,
        |k, v| (k != "tokenizer.ggml.tokens").then(|| v.clone()),
        |_, d| Some(d.to_vec()),
    );
    assert!(load_err(&g).contains("tokenizer.ggml.tokens"));
}

#[test]
fn missing_and_misshapen_tensors_are_named() {
    let f = synth_file(&small_llama());
    let g = rewrite(
        &f,
        |_, v| Some(v.clone()),
        |n, d| (n != "blk.2.ffn_up.weight").then(|| d.to_vec()),
    );
    assert!(load_err(&g).contains("blk.2.ffn_up.weight"));
    let g = rewrite(
        &f,
        |_, v| Some(v.clone()),
        |n, d| {
            Some(if n == "blk.1.attn_k.weight" {
                vec![64, 64]
            } else {
                d.to_vec()
            })
        },
    );
    let e = load_err(&g);
    assert!(e.contains("blk.1.attn_k.weight") && e.contains("64"), "{e}");
    let g = rewrite(
        &f,
        |_, v| Some(v.clone()),
        |n, d| {
            Some(if n == "output_norm.weight" {
                vec![32]
            } else {
                d.to_vec()
            })
        },
    );
    assert!(load_err(&g).contains("output_norm.weight"));
}

#[test]
fn gemma3_needs_its_norm_tensors_and_window() {
    let f = synth_file(&gemma_spec());
    let g = rewrite(
        &f,
        |_, v| Some(v.clone()),
        |n, d| (n != "blk.3.attn_q_norm.weight").then(|| d.to_vec()),
    );
    assert!(load_err(&g).contains("blk.3.attn_q_norm.weight"));
    let g = rewrite(
        &f,
        |k, v| (k != "gemma3.attention.sliding_window").then(|| v.clone()),
        |_, d| Some(d.to_vec()),
    );
    assert!(load_err(&g).contains("gemma3.attention.sliding_window"));
}

#[test]
fn gemma3_config_scales_embeddings_by_rounded_sqrt_and_alternates_rope_bases() {
    let m = Model::load(&synth_file(&gemma_spec())).expect("load");
    assert_eq!(m.cfg.embed_scale, 8.0); // sqrt(64)
    assert_eq!(m.cfg.attn_scale, 1.0 / 32f32.sqrt());
    assert_eq!(m.cfg.layer_rope_base(0), 10000.0);
    assert_eq!(m.cfg.layer_rope_base(5), 1e6);
    // Window (p - w, p]: exactly w positions, self included.
    assert_eq!(m.cfg.attn_start(0, 100), 100 + 1 - SYNTH_SLIDING_WINDOW);
    assert_eq!(m.cfg.attn_start(0, 3), 0);
    assert_eq!(m.cfg.attn_start(5, 100), 0);
}

#[test]
fn weight_bytes_add_up_to_the_tensors_read() {
    let f = synth_file(&small_llama());
    let m = Model::load(&f).expect("load");
    let total: u64 = f.tensors.iter().map(|t| t.n_bytes).sum();
    assert_eq!(m.weight_bytes, total);
    assert_eq!(
        (0..m.cfg.n_layers).map(|il| m.layer_bytes(il)).sum::<u64>()
            + m.tok_embd.n_bytes() as u64
            + m.output.n_bytes() as u64
            + 4 * m.cfg.n_embd as u64,
        total
    );
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Decodes `tapes[r]` for every row in lock-step; returns per step the logits.
fn run(m: &Model, tapes: &[Vec<u32>]) -> Vec<Vec<f32>> {
    let mut s = HostSession::new(m, tapes.len(), 64);
    (0..tapes[0].len())
        .map(|p| {
            let toks: Vec<u32> = tapes.iter().map(|t| t[p]).collect();
            s.step(&toks, p)
        })
        .collect()
}

fn tapes(vocab: usize) -> Vec<Vec<u32>> {
    (0..3u32)
        .map(|r| {
            (0..24u32)
                .map(|p| (p * 37 + r * 101 + 7) % vocab as u32)
                .collect()
        })
        .collect()
}

#[test]
fn logits_of_a_row_are_bit_identical_for_batch_1_and_batch_3() {
    for spec in [
        small_llama(),
        gemma_spec(),
        small_qwen2(),
        small_qwen3(),
        llama_rope_freqs(),
    ] {
        let m = Model::load(&synth_file(&spec)).expect("load");
        let t = tapes(spec.vocab);
        let batch = run(&m, &t);
        for r in 0..3 {
            let one = run(&m, &t[r..r + 1]);
            for p in 0..t[0].len() {
                let v = m.cfg.vocab;
                assert_eq!(
                    bits(&one[p]),
                    bits(&batch[p][r * v..(r + 1) * v]),
                    "{} row {r} step {p}",
                    spec.arch
                );
            }
        }
    }
}

#[test]
fn logits_are_bit_identical_for_1_and_2_threads() {
    let spec = gemma_spec();
    let m = Model::load(&synth_file(&spec)).expect("load");
    let t = tapes(spec.vocab);
    let with = |n: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .expect("pool")
            .install(|| run(&m, &t))
    };
    let (a, b) = (with(1), with(2));
    for p in 0..a.len() {
        assert_eq!(bits(&a[p]), bits(&b[p]), "step {p}");
    }
}

#[test]
fn splitting_the_layer_range_does_not_change_a_bit() {
    for (spec, cuts) in [
        (gemma_spec(), [2, 5]),
        (small_qwen2(), [1, 3]),
        (small_qwen3(), [2, 3]),
    ] {
        let m = Model::load(&synth_file(&spec)).expect("load");
        let t = &tapes(spec.vocab)[0];
        let whole = run(&m, std::slice::from_ref(t));
        let mut s = HostSession::new(&m, 1, 64);
        for (p, &tok) in t.iter().enumerate() {
            let mut x = vec![0.0; m.cfg.n_embd];
            embed(&m, &[tok], &mut x);
            s.run_layers(0, cuts[0], &mut x, p);
            s.run_layers(cuts[0], cuts[1], &mut x, p);
            s.run_layers(cuts[1], spec.layers, &mut x, p);
            let mut logits = vec![0.0; m.cfg.vocab];
            head(&m, &x, &mut logits);
            assert_eq!(bits(&logits), bits(&whole[p]), "{} step {p}", spec.arch);
        }
    }
}

/// Residual after layer `il` alone, at the last position of `tape`.
fn one_layer_out(m: &Model, il: usize, tape: &[u32]) -> Vec<f32> {
    let mut kv = HostKv::new(1, m.cfg.kv_dim(), tape.len());
    let mut x = vec![0.0; m.cfg.n_embd];
    for (p, &tok) in tape.iter().enumerate() {
        embed(m, &[tok], &mut x);
        layer(m, il, &mut x, &[p], &mut kv);
    }
    x
}

#[test]
fn sliding_layers_see_exactly_the_window_and_global_layers_see_everything() {
    let spec = gemma_spec();
    let m = Model::load(&synth_file(&spec)).expect("load");
    let w = SYNTH_SLIDING_WINDOW;
    let a: Vec<u32> = (0..w as u32 + 5).map(|p| 10 + p).collect();
    // Same last w tokens, different token just before the window.
    let mut b = a.clone();
    b[4] = 300;
    assert_eq!(
        bits(&one_layer_out(&m, 0, &a)),
        bits(&one_layer_out(&m, 0, &b))
    );
    assert_ne!(
        bits(&one_layer_out(&m, 5, &a)),
        bits(&one_layer_out(&m, 5, &b))
    );
    // A difference inside the window reaches a sliding layer.
    let mut c = a.clone();
    c[5] = 300;
    assert_ne!(
        bits(&one_layer_out(&m, 0, &a)),
        bits(&one_layer_out(&m, 0, &c))
    );
}

#[test]
fn builtin_model_argmax_varies_with_position_and_token() {
    let m = Model::load(&synth_file(&builtin_spec())).expect("load");
    let t: Vec<u32> = (0..16u32).map(|p| (p * 131 + 17) % 2048).collect();
    let steps = run(&m, &[t]);
    let argmax = |v: &[f32]| {
        v.iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b })
            .0
    };
    let mut ids: Vec<usize> = steps.iter().map(|l| argmax(l)).collect();
    for l in &steps {
        assert!(l.iter().all(|x| x.is_finite()));
    }
    ids.sort();
    ids.dedup();
    assert!(
        ids.len() >= 8,
        "only {} distinct argmax ids over 16 steps",
        ids.len()
    );
}

#[test]
fn check_tokens_names_the_first_out_of_range_id() {
    let m = Model::load(&synth_file(&small_llama())).expect("load");
    assert!(m.check_tokens(&[0, 319]).is_ok());
    let e = m
        .check_tokens(&[3, 320, 999])
        .expect_err("320 is past the vocab")
        .to_string();
    assert!(e.contains("320") && !e.contains("999"), "{e}");
}

#[test]
fn embed_is_the_dequantized_row_times_the_embed_scale() {
    let m = Model::load(&synth_file(&gemma_spec())).expect("load");
    let n = m.cfg.n_embd;
    let mut x = vec![0.0; 2 * n];
    embed(&m, &[7, 100], &mut x);
    for (r, id) in [7usize, 100].into_iter().enumerate() {
        let mut row = vec![0.0; n];
        crate::quant::dequantize(m.tok_embd.ty, m.tok_embd.row(id), &mut row).expect("dequantize");
        let want: Vec<f32> = row.iter().map(|v| v * 8.0).collect();
        assert_eq!(bits(&x[r * n..(r + 1) * n]), bits(&want));
    }
}

/// Sizes the loader would allocate or multiply by are refused, naming the key, before any
/// allocation (a huge block_count used to abort the process; a huge key_length to overflow).
#[test]
fn block_count_and_head_sizes_the_file_cannot_back_are_errors() {
    let f = synth_file(&small_llama());
    let set = |key: &'static str, val: u64| {
        rewrite(
            &f,
            move |k, v| Some(if k == key { Value::U64(val) } else { v.clone() }),
            |_, d| Some(d.to_vec()),
        )
    };
    let e = load_err(&set("llama.block_count", u64::MAX / 2));
    assert!(
        e.contains("llama.block_count") && e.contains("tensors"),
        "{e}"
    );
    // key_length is optional (synth leaves it out): add it.
    let g = extend(
        &f,
        &[("llama.attention.key_length", Value::U64(1 << 62))],
        &[],
    );
    let e = load_err(&g);
    assert!(
        e.contains("llama.attention.key_length") && e.contains("overflows"),
        "{e}"
    );
}

#[test]
fn qwen2_loads_biases_a_tied_head_and_neox_rope() {
    let f = synth_file(&small_qwen2());
    let m = Model::load(&f).expect("load");
    assert_eq!(m.cfg.arch, Arch::Qwen2);
    assert_eq!(m.cfg.rope_style, RopeStyle::Neox);
    assert_eq!(m.cfg.rope_base, 1e6);
    assert!(f.tensor("output.weight").is_none());
    assert_eq!(m.output.bytes(), m.tok_embd.bytes());
    let l = &m.layers[3];
    let lens = [&l.bq, &l.bk, &l.bv].map(|b| b.as_ref().map(|b| b.len()));
    assert_eq!(lens, [Some(64), Some(32), Some(32)]);
    assert!(l.q_norm.is_none() && l.post_attn_norm.is_none());
    // Every tensor is counted once: the tied head is token_embd.
    let total: u64 = f.tensors.iter().map(|t| t.n_bytes).sum();
    assert_eq!(m.weight_bytes, total);
}

#[test]
fn qwen3_reads_head_width_from_key_length_and_needs_its_head_norms() {
    let f = synth_file(&small_qwen3());
    let m = Model::load(&f).expect("load");
    assert_eq!(
        (m.cfg.head_dim, m.cfg.q_dim(), m.cfg.kv_dim()),
        (32, 128, 64)
    );
    assert_eq!(m.cfg.attn_scale, 1.0 / 32f32.sqrt());
    assert_eq!(m.cfg.rope_style, RopeStyle::Neox);
    assert_eq!((m.layers[0].wq.rows, m.layers[0].wo.cols), (128, 128));
    assert_eq!(m.layers[0].q_norm.as_ref().map(|v| v.len()), Some(32));
    assert!(m.layers[0].bq.is_none());
    let g = rewrite(
        &f,
        |_, v| Some(v.clone()),
        |n, d| (n != "blk.2.attn_k_norm.weight").then(|| d.to_vec()),
    );
    assert!(load_err(&g).contains("blk.2.attn_k_norm.weight"));
    // Without key_length the head width falls back to embd / heads = 16: q's rows no
    // longer match, and the error names the tensor.
    let g = rewrite(
        &f,
        |k, v| (!k.ends_with(".key_length") && !k.ends_with(".value_length")).then(|| v.clone()),
        |_, d| Some(d.to_vec()),
    );
    let e = load_err(&g);
    assert!(
        e.contains("blk.0.attn_q.weight") && e.contains("128"),
        "{e}"
    );
}

#[test]
fn a_tensor_the_forward_pass_does_not_read_refuses_the_load_naming_it_and_the_arch() {
    let cases: [(SynthSpec, &str, usize); 5] = [
        // An output-projection bias: llama.cpp reads it for llama, we do not compute it.
        (small_llama(), "blk.1.attn_output.bias", 64),
        // Per-dimension RoPE factors are a llama feature; a qwen2 forward never applies them.
        (small_qwen2(), "rope_freqs.weight", 8),
        // Biases on gemma3: not part of its forward.
        (gemma_spec(), "blk.0.attn_q.bias", 64),
        // q/k head norms on an architecture without them.
        (small_qwen2(), "blk.0.attn_q_norm.weight", 16),
        // Anything unknown at all.
        (small_qwen3(), "blk.0.ffn_gate_inp.weight", 64),
    ];
    for (spec, name, len) in cases {
        let g = extend(&synth_file(&spec), &[], &[(name, vec![1.0; len])]);
        let e = load_err(&g);
        assert!(
            e.contains(name) && e.contains(spec.arch.name()) && e.contains("not read"),
            "{e}"
        );
    }
}

#[test]
fn metadata_that_would_change_the_math_refuses_the_load_naming_the_key() {
    let cases: [(SynthSpec, &str, Value); 5] = [
        (
            small_llama(),
            "llama.attention.sliding_window",
            Value::U32(4096),
        ),
        (
            small_qwen2(),
            "qwen2.rope.scaling.type",
            Value::String("yarn".into()),
        ),
        (
            small_qwen3(),
            "qwen3.attention.logit_softcapping",
            Value::F32(50.0),
        ),
        (small_llama(), "llama.expert_count", Value::U32(8)),
        (
            gemma_spec(),
            "gemma3.rope.scaling.type",
            Value::String("longrope".into()),
        ),
    ];
    for (spec, key, v) in cases {
        let g = extend(&synth_file(&spec), &[(key, v)], &[]);
        let e = load_err(&g);
        assert!(
            e.contains(key) && e.contains(spec.arch.name()) && e.contains("not implemented"),
            "{e}"
        );
    }
    // Keys that say "no change" load, and keys of another architecture's prefix are not ours.
    for (key, v) in [
        ("llama.rope.scaling.type", Value::String("none".into())),
        ("llama.expert_count", Value::U32(0)),
        ("qwen2.attention.sliding_window", Value::U32(4096)),
    ] {
        Model::load(&extend(&synth_file(&small_llama()), &[(key, v)], &[])).expect(key);
    }
}

#[test]
fn rope_freqs_divide_each_pairs_angle_and_bad_factors_are_refused() {
    let f = synth_file(&llama_rope_freqs());
    let m = Model::load(&f).expect("load");
    let fr = m.cfg.rope_freqs.clone().expect("rope_freqs read");
    assert_eq!(fr.len(), m.cfg.head_dim / 2);
    assert!(
        fr.iter().any(|&x| x > 2.0) && fr.iter().any(|&x| x < 1.0),
        "{fr:?}"
    );
    let total: u64 = f.tensors.iter().map(|t| t.n_bytes).sum();
    assert_eq!(m.weight_bytes, total);
    // The layer table is math::rope_table with the factors: pair i turns by
    // pos * base^(-2i/d) / factor_i.
    let half = m.cfg.head_dim / 2;
    let (mut c, mut s) = (vec![0.0; half], vec![0.0; half]);
    m.cfg.layer_rope_table(2, 7, &mut c, &mut s);
    for i in 0..half {
        let a = 7.0 / 10000f64.powf(2.0 * i as f64 / m.cfg.head_dim as f64) / fr[i] as f64;
        assert_eq!((c[i], s[i]), (a.cos() as f32, a.sin() as f32), "pair {i}");
    }
    // The same weights without the factors give other logits (the factors are used).
    let g = rewrite(
        &f,
        |_, v| Some(v.clone()),
        |n, d| (n != "rope_freqs.weight").then(|| d.to_vec()),
    );
    let plain = Model::load(&g).expect("load without rope_freqs");
    assert!(plain.cfg.rope_freqs.is_none());
    let t = &tapes(320)[..1];
    assert_ne!(bits(&run(&m, t)[8]), bits(&run(&plain, t)[8]));
    // Zero, negative or NaN factors, and a wrong length, are refused naming the tensor.
    for bad in [0.0, -1.0, f32::NAN] {
        let mut v = fr.clone();
        v[3] = bad;
        let e = load_err(&extend(&g, &[], &[("rope_freqs.weight", v)]));
        assert!(
            e.contains("rope_freqs.weight") && e.contains("factor 3"),
            "{e}"
        );
    }
    let e = load_err(&extend(
        &g,
        &[],
        &[("rope_freqs.weight", vec![1.0; half + 1])],
    ));
    assert!(e.contains("rope_freqs.weight"), "{e}");
}

#[test]
fn qwen2_biases_are_added_to_q_k_and_v() {
    // Zeroing the biases changes the logits; so does zeroing only the v bias (which no
    // norm or softmax could absorb).
    let f = synth_file(&small_qwen2());
    let m = Model::load(&f).expect("load");
    let t = &tapes(320)[..1];
    let base = run(&m, t);
    for which in ["attn_q.bias", "attn_k.bias", "attn_v.bias"] {
        let mut z = m.clone();
        for l in &mut z.layers {
            let b = match which {
                "attn_q.bias" => &mut l.bq,
                "attn_k.bias" => &mut l.bk,
                _ => &mut l.bv,
            };
            b.as_mut().expect("bias").fill(0.0);
        }
        assert_ne!(bits(&run(&z, t)[5]), bits(&base[5]), "{which}");
    }
}

/// `f` with `key` set to `v` (replaced where the file has it, else added).
fn with_key(f: &GgufFile, key: &str, v: Value) -> GgufFile {
    if f.get(key).is_some() {
        let v2 = v.clone();
        rewrite(
            f,
            move |k, old| Some(if k == key { v2.clone() } else { old.clone() }),
            |_, d| Some(d.to_vec()),
        )
    } else {
        extend(f, &[(key, v)], &[])
    }
}

/// The float constants the math divides by or raises to, and the context length: a NaN,
/// infinity, zero or negative value is refused at load naming the key and the value as the
/// file has it (a NaN RoPE base made every logit NaN on every stage alike: a false PASS).
#[test]
fn non_finite_or_non_positive_float_metadata_is_refused_naming_key_and_value() {
    let bad = [
        (f32::NAN, "NaN"),
        (f32::INFINITY, "inf"),
        (f32::NEG_INFINITY, "-inf"),
        (0.0, "0"),
        (-0.0, "-0"),
        (-1.0, "-1"),
    ];
    let llama = synth_file(&small_llama());
    let gemma = synth_file(&gemma_spec());
    for (f, key) in [
        (&llama, "llama.rope.freq_base"),
        (&llama, "llama.attention.layer_norm_rms_epsilon"),
        (&gemma, "gemma3.rope.freq_base"),
        (&gemma, "gemma3.rope.freq_base_swa"),
        (&gemma, "gemma3.attention.layer_norm_rms_epsilon"),
    ] {
        for (x, shown) in bad {
            for v in [Value::F32(x), Value::F64(x as f64)] {
                let e = load_err(&with_key(f, key, v.clone()));
                assert!(
                    e.contains(&format!(
                        "metadata key {key} = {shown}: must be finite and > 0"
                    )),
                    "{key} {v:?}: {e}"
                );
            }
        }
        // Positive controls: small, large and subnormal positive values load.
        for x in [1e-6f32, 1.0, 5e5, 1e-40, f32::MAX] {
            let m = Model::load(&with_key(f, key, Value::F32(x)))
                .unwrap_or_else(|e| panic!("{key} = {x}: {e}"));
            assert!(m.cfg.rms_eps == x || m.cfg.rope_base == x || m.cfg.rope_base_local == x);
        }
    }
    // An f64 beyond f32's range would read as an infinity: named as the file has it.
    let e = load_err(&with_key(&llama, "llama.rope.freq_base", Value::F64(1e300)));
    assert!(
        e.contains("llama.rope.freq_base = 1e300: is beyond the range of the f32"),
        "{e}"
    );
    assert!(e.contains("beyond the range of the f32"), "{e}");
    // RoPE scaling: a non-finite factor is named as such (1 and 0 mean no scaling).
    for x in [f32::NAN, f32::INFINITY] {
        let e = load_err(&with_key(
            &llama,
            "llama.rope.scaling.factor",
            Value::F32(x),
        ));
        assert!(
            e.contains(&format!("llama.rope.scaling.factor = {x}: must be finite")),
            "{e}"
        );
    }
    Model::load(&with_key(
        &llama,
        "llama.rope.scaling.factor",
        Value::F32(1.0),
    ))
    .expect("1");
}

#[test]
fn a_context_length_of_0_or_none_is_refused_and_1_loads() {
    let f = synth_file(&small_llama());
    for v in [Value::U32(0), Value::U64(0), Value::I32(0)] {
        let e = load_err(&with_key(&f, "llama.context_length", v));
        assert!(
            e.contains("metadata key llama.context_length = 0: must be at least 1"),
            "{e}"
        );
    }
    let e = load_err(&with_key(&f, "llama.context_length", Value::I32(-1)));
    assert!(e.contains("llama.context_length"), "{e}");
    let m = Model::load(&with_key(&f, "llama.context_length", Value::U32(1))).expect("1");
    assert_eq!(m.cfg.context_length, 1);
    // Absent: refused, naming the key (it bounds every run's positions).
    let g = rewrite(
        &f,
        |k, v| (k != "llama.context_length").then(|| v.clone()),
        |_, d| Some(d.to_vec()),
    );
    let e = load_err(&g);
    assert!(
        e.contains("missing metadata key llama.context_length"),
        "{e}"
    );
}

/// Where `key`'s value type (u32) and value start in GGUF `bytes` (the key is written as a
/// u64 length then its bytes).
fn value_at(bytes: &[u8], key: &str) -> (usize, usize) {
    let mut pat = (key.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(key.as_bytes());
    let at = bytes
        .windows(pat.len())
        .position(|w| w == pat)
        .unwrap_or_else(|| panic!("{key} in the header"));
    (at + pat.len(), at + pat.len() + 4)
}

/// Property test of the GGUF metadata input family: seeded random mutations of a small
/// synthetic file's header (float and integer values overwritten with hostile ones, value
/// types changed, random bytes anywhere before the data section) never panic, and each case
/// either loads a model whose constants are finite and positive and whose logits are finite,
/// or fails naming what is wrong: the mutated key where the mutation hit one value, else a
/// key, tensor, offset or header field.
#[test]
fn random_header_mutations_load_valid_or_fail_naming_the_key_or_offset() {
    use rand::{Rng, SeedableRng};
    let spec = SynthSpec {
        layers: 2,
        embd: 32,
        heads: 2,
        kv_heads: 1,
        ff: 64,
        vocab: 300,
        ..builtin_spec()
    };
    let base = synth_gguf(&spec).expect("synth");
    let f0 = GgufFile::parse(base.clone()).expect("parse");
    let data_start = f0
        .tensors
        .iter()
        .map(|t| f0.tensor_range(t).start)
        .min()
        .expect("tensors");
    let floats = [
        "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon",
    ];
    let ints = [
        "llama.block_count",
        "llama.context_length",
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.vocab_size",
        "llama.rope.dimension_count",
    ];
    let hostile_f32 = [
        f32::NAN.to_bits(),
        0xffc0_0000, // negative quiet NaN
        0x7f80_0001, // signalling NaN
        f32::INFINITY.to_bits(),
        f32::NEG_INFINITY.to_bits(),
        0,
        0x8000_0000, // -0
        (-1.0f32).to_bits(),
        1, // smallest subnormal
        f32::MAX.to_bits(),
    ];
    let hostile_u32 = [0u32, 1, 2, 3, 7, 0x7fff_ffff, u32::MAX];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x6775_6666);
    let (mut loaded, mut refused) = (0usize, 0usize);
    let cases = 1000;
    for case in 0..cases {
        let mut b = base.clone();
        let family = case % 4;
        // The key one mutation hit (families 0-2), which an error must then name.
        let hit: Option<&str> = match family {
            0 => {
                let key = floats[rng.gen_range(0..floats.len())];
                let (_, v) = value_at(&b, key);
                let x = if rng.gen_bool(0.7) {
                    hostile_f32[rng.gen_range(0..hostile_f32.len())]
                } else {
                    rng.gen()
                };
                b[v..v + 4].copy_from_slice(&x.to_le_bytes());
                Some(key)
            }
            1 => {
                let key = ints[rng.gen_range(0..ints.len())];
                let (_, v) = value_at(&b, key);
                let x = if rng.gen_bool(0.7) {
                    hostile_u32[rng.gen_range(0..hostile_u32.len())]
                } else {
                    rng.gen()
                };
                b[v..v + 4].copy_from_slice(&x.to_le_bytes());
                Some(key)
            }
            2 => {
                // Another value type: the value bytes then read as that type (or run past).
                let all: Vec<&str> = floats.iter().chain(&ints).copied().collect();
                let key = all[rng.gen_range(0..all.len())];
                let (t, _) = value_at(&b, key);
                let ty: u32 = rng.gen_range(0..16);
                b[t..t + 4].copy_from_slice(&ty.to_le_bytes());
                None
            }
            _ => {
                for _ in 0..rng.gen_range(1..=4) {
                    let at = rng.gen_range(0..data_start);
                    b[at] = rng.gen();
                }
                None
            }
        };
        let what = format!("case {case} (family {family}, key {hit:?})");
        let outcome = std::panic::catch_unwind(|| {
            let f = GgufFile::parse(b).map_err(|e| e.to_string())?;
            let m = Model::load(&f).map_err(|e| e.to_string())?;
            let logits = run(&m, &[vec![1, 2]]);
            Ok::<_, String>((m.cfg.clone(), logits))
        })
        .unwrap_or_else(|_| panic!("{what}: panicked"));
        match outcome {
            Ok((cfg, logits)) => {
                loaded += 1;
                for x in [cfg.rope_base, cfg.rope_base_local, cfg.rms_eps] {
                    assert!(x.is_finite() && x > 0.0, "{what}: loaded {cfg:?}");
                }
                assert!(cfg.n_layers > 0 && cfg.vocab > 0, "{what}: {cfg:?}");
                let bad = logits.iter().flatten().filter(|x| !x.is_finite()).count();
                assert_eq!(bad, 0, "{what}: loaded, {bad} non-finite logits: {cfg:?}");
            }
            Err(e) => {
                refused += 1;
                match hit {
                    // The key, or (a value that contradicts another key or the tensors)
                    // the key it contradicts naming this one, or the tensor.
                    Some(key) => assert!(
                        e.contains(key)
                            || e.contains(&key["llama.".len()..])
                            || e.contains("tensor "),
                        "{what}: {e}"
                    ),
                    None => assert!(
                        [
                            "key",
                            "offset",
                            "tensor",
                            "magic",
                            "version",
                            "count",
                            "alignment"
                        ]
                        .iter()
                        .any(|w| e.contains(w)),
                        "{what}: names nothing: {e}"
                    ),
                }
            }
        }
    }
    // Both outcomes occur (the generator is neither all-valid nor all-broken).
    assert!(
        loaded >= 20 && refused >= 100,
        "{loaded} loaded, {refused} refused"
    );
    eprintln!(
        "{cases} header mutations: {loaded} loaded valid, {refused} refused naming the field"
    );
}
