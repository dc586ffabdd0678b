//! The binary's bench receipt and the synth flags the llama.cpp comparison relies on
//! (scripts/bench-vs-llamacpp.sh reads both), and the module-cache flags, end to end.

use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ppn-gate"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
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

#[test]
fn bench_receipt_holds_the_figures_it_printed() {
    let d = tempfile::tempdir().expect("temp dir");
    let path = d.path().join("sub/bench.json");
    let o = run(&[
        "bench",
        "--backend",
        "cpu",
        "--stages",
        "2",
        "--batch",
        "2",
        "--steps",
        "4",
        "--arms",
        "batched",
        "--receipt",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("written")).expect("JSON");
    assert_eq!(r["schema"], "ppn-gate.bench/1");
    assert_eq!(r["backend"]["kind"], "cpu");
    assert_eq!(r["config"]["stages"], 2);
    assert_eq!(r["config"]["batch"], 2);
    // --arms batched: the pipelined path was not measured, and says so with a null.
    assert!(r["tok_s"]["pipelined"].is_null(), "{r}");
    let out = text(&o);
    for path in ["reference", "eager", "batched"] {
        let v = r["tok_s"][path]
            .as_f64()
            .unwrap_or_else(|| panic!("{path}: {r}"));
        assert!(v > 0.0, "{path} {v}");
        // The printed line carries the same figure (one decimal).
        assert!(
            out.contains(&format!("{v:.1} tok/s")),
            "{path} {v:.1} not in:\n{out}"
        );
    }
    // The CPU backend measures no bandwidth: no floor rather than an invented one.
    assert!(
        r["bandwidth_gbs"].is_null() && r["floor_tok_s"].is_null(),
        "{r}"
    );
    // Busy overlap (a traced walk per path after the timed ones): batched, two stages with
    // steps in flight, keeps both busy at once some of the time; eager, whose host waits for
    // every stage each step, hardly ever (a lazily grown slot's zero-fill at most).
    let ov = &r["busy_overlap"];
    assert!(ov["pipelined"].is_null(), "{r}");
    let (e, b) = (
        ov["eager"].as_f64().unwrap(),
        ov["batched"].as_f64().unwrap(),
    );
    assert!((0.0..=1.0).contains(&e) && (0.0..=1.0).contains(&b), "{ov}");
    assert!(b > e, "{ov}");
    assert!(
        out.contains(&format!(
            "eager {:.0}%, pipelined -, batched {:.0}%",
            e * 100.0,
            b * 100.0
        )),
        "{out}"
    );
    // The tracing cost: the traced walks' rates beside the untraced ones, printed as a share.
    let tt = &r["traced_tok_s"];
    assert!(tt["pipelined"].is_null(), "{r}");
    let te = tt["eager"].as_f64().unwrap();
    assert!(te > 0.0 && tt["batched"].as_f64().unwrap() > 0.0, "{r}");
    assert!(
        out.contains(&format!(
            "tracing cost (the traced walks): eager {te:.1} tok/s ({:.0}% of untraced)",
            100.0 * te / r["tok_s"]["eager"].as_f64().unwrap()
        )),
        "{out}"
    );
    assert!(r["model"]["weight_bytes"].as_u64().unwrap() > 0);
    assert!(r["model"]["file"].as_str().unwrap().starts_with("builtin:"));
    assert!(!r["tool"]["git_commit"].as_str().unwrap().is_empty());
}

/// `bench --arms serve` times the serve arm's schedule: the receipt's counts are the
/// schedule's (every position of every request once: rows = prompt + generated, requests as
/// given, the cache rows shared), its rates are those counts over the one wall time, and the
/// printed line carries them; the same flags give the same schedule (counts) again, another
/// seed another; serve flags without the serve arm are refused naming the flag.
#[test]
fn bench_serve_times_the_serve_schedule_and_says_what_it_counted() {
    let d = tempfile::tempdir().expect("temp dir");
    let bench = |seed: &str, name: &str| {
        let path = d.path().join(name);
        let o = run(&[
            "bench",
            "--backend",
            "cpu",
            "--stages",
            "3",
            "--arms",
            "serve",
            "--requests",
            "30",
            "--max-rows",
            "6",
            "--prefill-chunk",
            "3",
            "--prompt-len",
            "9",
            "--gen-len",
            "11",
            "--steps",
            "16",
            "--seed",
            seed,
            "--receipt",
            path.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        (r, text(&o))
    };
    let (r, out) = bench("5", "a.json");
    let s = &r["serve"];
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}")) as f64;
    assert_eq!(n("requests"), 30.0);
    assert_eq!(
        (n("max_rows"), n("prefill_chunk"), n("cache_rows")),
        (6.0, 3.0, 6.0)
    );
    assert_eq!(n("rows"), n("prompt_tokens") + n("generated_tokens"), "{s}");
    // At most 6 rows a step, and at least one: the steps bound the rows.
    assert!(
        n("steps") * 6.0 >= n("rows") && n("rows") >= n("steps"),
        "{s}"
    );
    assert!(
        n("prompt_tokens") >= 30.0 && n("prompt_tokens") <= 270.0,
        "{s}"
    );
    let wall = s["wall_s"].as_f64().unwrap();
    for (k, count) in [
        ("requests_per_s", "requests"),
        ("generated_tok_s", "generated_tokens"),
        ("rows_per_s", "rows"),
    ] {
        let v = s[k].as_f64().unwrap();
        assert!((v - n(count) / wall).abs() <= 1e-9 * v.max(1.0), "{k}: {s}");
    }
    assert!(
        out.contains(&format!(
            "serve     (R=30, M=6, C=3)  {:>9.1} req/s, {:.1} generated tok/s",
            s["requests_per_s"].as_f64().unwrap(),
            s["generated_tok_s"].as_f64().unwrap()
        )),
        "{out}"
    );
    let (again, _) = bench("5", "b.json");
    let (other, _) = bench("6", "c.json");
    for k in ["steps", "rows", "prompt_tokens", "generated_tokens"] {
        assert_eq!(again["serve"][k], s[k], "{k}");
    }
    assert!(
        ["steps", "rows", "generated_tokens"]
            .iter()
            .any(|k| other["serve"][*k] != s[*k]),
        "seed 6 drew seed 5's schedule: {}",
        other["serve"]
    );
    // Without the serve arm its flags are refused, and bench without serve has no row.
    let o = run(&[
        "bench",
        "--backend",
        "cpu",
        "--steps",
        "4",
        "--requests",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--requests 3: has no effect"),
        "{}",
        text(&o)
    );
}

#[test]
fn synth_preset_and_q4_k_m_write_the_named_shape_and_mix() {
    let d = tempfile::tempdir().expect("temp dir");
    let f = d.path().join("m.gguf");
    // The llama8b widths with the size flags turned down: explicit flags override the preset.
    let o = run(&[
        "synth",
        "--preset",
        "llama8b",
        "--layers",
        "2",
        "--embd",
        "512",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--ff",
        "768",
        "--vocab",
        "300",
        "--quant",
        "q4_k_m",
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["inspect", f.to_str().unwrap(), "--tensors"]);
    let out = text(&o);
    assert!(
        out.contains("2 layers, n_embd 512, heads 4 (kv 2), head_dim 128, ff 768, vocab 300"),
        "{out}"
    );
    assert!(
        out.contains("cuda backend: its kernels take this shape"),
        "{out}"
    );
    assert!(out.contains("general.file_type = 15"), "{out}");
    assert!(out.contains("tokenizer.ggml.merges = [\"t 1\"]"), "{out}");
    // 2 layers: layer 1 is in the last eighth, so its attn_v is Q6_K and layer 0's is Q4_K.
    for (name, ty) in [
        ("blk.0.attn_v.weight", "q4_k"),
        ("blk.1.attn_v.weight", "q6_k"),
        ("blk.1.ffn_down.weight", "q6_k"),
        ("output.weight", "q6_k"),
        ("token_embd.weight", "q4_k"),
    ] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{out}"));
        assert!(line.split_whitespace().nth(1) == Some(ty), "{line}");
    }
    // Bad names and shapes exit 2 naming the value (rows 256 does not tile are no longer one:
    // the mix falls back per matrix as llama.cpp does; heads that do not divide embd are).
    for (args, want) in [
        (vec!["--preset", "llama13b"], "--preset \"llama13b\""),
        (vec!["--quant", "q4_k_s"], "--quant \"q4_k_s\""),
        (
            vec![
                "--quant",
                "q4_k_m",
                "--embd",
                "96",
                "--heads",
                "5",
                "--kv-heads",
                "1",
            ],
            "embd = 96",
        ),
    ] {
        let mut a = vec!["synth", "-o", "/nonexistent/x.gguf"];
        a.extend(args);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{a:?}: {}", text(&o));
    }
}

/// The module cache is a CUDA setting: on the CPU backend its flags are refused, never
/// silently ignored, and the two cannot be combined.
#[test]
fn module_cache_flags_are_refused_where_no_kernels_are_compiled() {
    for (args, want) in [
        (
            vec!["--backend", "cpu", "--cache-dir", "/tmp/x"],
            "--cache-dir /tmp/x: the cpu backend compiles no kernels",
        ),
        (
            vec!["bench", "--backend", "cpu", "--no-cache"],
            "--no-cache: the cpu backend",
        ),
        (
            vec!["--cache-dir", "/tmp/x", "--no-cache"],
            "--cache-dir /tmp/x with --no-cache",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
}

#[test]
fn a_preset_names_its_architecture_and_arch_overrides_it() {
    let d = tempfile::tempdir().expect("temp dir");
    // qwen7b is a qwen2 model (q/k/v biases) unless --arch says otherwise; small widths so
    // the test stays quick (explicit shape flags override the preset's).
    let shape = [
        "--layers",
        "1",
        "--embd",
        "256",
        "--heads",
        "2",
        "--kv-heads",
        "1",
        "--ff",
        "512",
        "--vocab",
        "300",
        "--quant",
        "q8_0",
    ];
    for (arch, want, bias) in [
        (None, "architecture: qwen2", true),
        (Some("llama"), "architecture: llama", false),
    ] {
        let f = d.path().join(format!("{want}.gguf").replace(": ", "-"));
        let mut args = vec!["synth", "--preset", "qwen7b"];
        if let Some(a) = arch {
            args.extend(["--arch", a]);
        }
        args.extend(shape);
        args.extend(["-o", f.to_str().unwrap()]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = run(&["inspect", f.to_str().unwrap(), "--tensors"]);
        let out = text(&o);
        assert!(out.contains(want), "{out}");
        assert_eq!(out.contains("blk.0.attn_q.bias"), bias, "{out}");
    }
}

#[test]
fn the_flags_synth_prints_write_the_same_file_again() {
    // What `synth` prints after "in N s:" is the file's recipe: run again with exactly those
    // flags, it must write the same bytes. Each optional flag once away from its default
    // (a head width other than embd / heads, a tied head, RoPE factors, a gemma3 window).
    let d = tempfile::tempdir().expect("temp dir");
    let small = "--layers 2 --embd 128 --heads 2 --kv-heads 1 --ff 256 --vocab 300";
    for extra in [
        "--arch llama --head-dim 96 --tied --rope-freqs",
        "--arch gemma3 --head-dim 128 --sliding-window 40 --quant q5_0",
        "--arch qwen2 --seed 7 --quant q4_1",
    ] {
        let a = d.path().join("a.gguf");
        let b = d.path().join("b.gguf");
        let mut args: Vec<&str> = vec!["synth"];
        args.extend(small.split(' '));
        args.extend(extra.split(' '));
        args.extend(["-o", a.to_str().unwrap()]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let out = text(&o);
        let printed = out
            .lines()
            .find_map(|l| l.split_once(" s: ").map(|(_, f)| f.trim().to_string()))
            .unwrap_or_else(|| panic!("no flags printed: {out}"));
        let mut again: Vec<&str> = vec!["synth"];
        again.extend(printed.split(' '));
        again.extend(["-o", b.to_str().unwrap()]);
        let o = run(&again);
        assert_eq!(o.status.code(), Some(0), "{printed}: {}", text(&o));
        assert_eq!(
            std::fs::read(&a).expect("a"),
            std::fs::read(&b).expect("b"),
            "{extra} printed {printed}"
        );
    }
}

#[test]
fn inspect_says_when_the_cuda_kernels_cannot_run_a_shape() {
    // The CUDA shape sweep's finding: one head of 16 gives attn_output 16 wide, which the
    // matvec kernels (32-element chunks) cannot walk. inspect says so without a GPU, naming
    // the width; the gate on CUDA refuses it when a stage is built (cuda_can_run).
    let d = tempfile::tempdir().expect("temp dir");
    let f = d.path().join("w16.gguf");
    let o = run(&[
        "synth",
        "--arch",
        "qwen3",
        "--layers",
        "2",
        "--embd",
        "32",
        "--heads",
        "1",
        "--kv-heads",
        "1",
        "--head-dim",
        "16",
        "--ff",
        "64",
        "--vocab",
        "300",
        "--quant",
        "bf16",
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["inspect", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains(
            "cuda backend: cannot run this model: its n_heads x head_dim = 16 is not a multiple \
             of 32"
        ),
        "{out}"
    );
    // The CPU backend runs it, every arm bit-identical.
    let o = run(&[
        "--backend",
        "cpu",
        "--model",
        f.to_str().unwrap(),
        "--stages",
        "2",
        "--gen-len",
        "4",
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}
