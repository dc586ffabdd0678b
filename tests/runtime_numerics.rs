//! The runtime's reference path (one stage, CPU backend, device memory) computes exactly what
//! the plain host forward pass computes — so the oracle agreement measured on the host path
//! (tests/oracle.rs) holds for every gate receipt too — and an N-stage split of a real model
//! is bit-identical to it at every step.

use std::path::Path;
use std::sync::Arc;

use ppn_gate::backend::cpu::CpuBackend;
use ppn_gate::model::forward::HostSession;
use ppn_gate::model::Model;
use ppn_gate::runtime::{Placement, Runtime, RuntimeConfig, TransportChoice};

fn model(name: &str) -> Arc<Model> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    Arc::new(Model::open(&p).expect("model loads"))
}

fn tape(name: &str) -> Vec<u32> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/oracle")
        .join(name);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("oracle tape")).unwrap();
    v["tape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

fn runtime_logits(
    m: &Arc<Model>,
    n: usize,
    splits: Option<&[usize]>,
    toks: &[u32],
) -> Vec<Vec<f32>> {
    let placement = Placement::from_flags(
        m.cfg.n_layers,
        Some(n),
        splits,
        None,
        TransportChoice::Auto,
        1,
        &|a, b| a == b,
    )
    .unwrap();
    let cfg = RuntimeConfig {
        placement,
        max_rows: 1,
        max_seqs: 1,
        ctx: toks.len(),
        window: 1,
        faults: vec![],
        dist: None,
    };
    let rt = Runtime::build(Arc::new(CpuBackend::new(1, 0, 0)), m.clone(), cfg).unwrap();
    let mut w = rt.walk().unwrap();
    toks.iter()
        .enumerate()
        .map(|(i, &t)| {
            let p = w.issue(&[t], &[i]).unwrap();
            w.read_eager(p).unwrap().to_vec()
        })
        .collect()
}

fn check(model_file: &str, tape_file: &str, splits: &[usize]) {
    let m = model(model_file);
    let toks = tape(tape_file);
    let mut host = HostSession::new(&m, 1, toks.len());
    let host_logits: Vec<Vec<f32>> = toks
        .iter()
        .enumerate()
        .map(|(i, &t)| host.step(&[t], i))
        .collect();
    let one = runtime_logits(&m, 1, None, &toks);
    let split = runtime_logits(&m, splits.len() + 1, Some(splits), &toks);
    for i in 0..toks.len() {
        let bits = |v: &Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&one[i]),
            bits(&host_logits[i]),
            "{model_file}: runtime vs host forward differ at step {i}"
        );
        assert_eq!(
            bits(&split[i]),
            bits(&one[i]),
            "{model_file}: split {splits:?} vs one stage differ at step {i}"
        );
    }
}

#[test]
fn smollm2_runtime_reference_is_the_host_forward_bit_for_bit() {
    check(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "smollm2-135m-q4_1.tapeA.json",
        &[1, 29],
    );
}

#[test]
fn gemma3_runtime_reference_is_the_host_forward_bit_for_bit() {
    check(
        "gemma-3-270m-q4_k_m.gguf",
        "gemma3-270m-q4_k_m.tapeA.json",
        &[6, 12],
    );
}
