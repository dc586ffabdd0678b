//! Single-row decode speed of the CPU reference (`HostSession`), for the speed target
//! (SmolLM2-135M >= 20 tok/s on the 2-core CI machine).
//!
//! Usage: cargo run --release --example decode_bench -- [MODEL.gguf] [STEPS] [ROWS]
//! (default models/SmolLM2-135M-Instruct.Q4_1.gguf, 64 steps, 1 row). Greedy from BOS, so the
//! run is deterministic; prints tokens/s (rows × steps / wall time, after 4 warm-up steps).
// A developer's example: std's print macros are fine here (clippy.toml refuses them in the
// crate, whose lines must never panic).
#![allow(clippy::disallowed_macros)]

use std::time::Instant;

use ppn_gate::model::{HostSession, Model};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "models/SmolLM2-135M-Instruct.Q4_1.gguf".into());
    let steps: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(64);
    let rows: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let t0 = Instant::now();
    let m = Model::open(std::path::Path::new(&path))?;
    eprintln!(
        "loaded {path} ({} layers, {} weight bytes) in {:.2}s; rayon threads {}",
        m.cfg.n_layers,
        m.weight_bytes,
        t0.elapsed().as_secs_f64(),
        rayon::current_num_threads()
    );
    let warm = 4;
    let mut s = HostSession::new(&m, rows, warm + steps + 1);
    let mut toks = vec![m.vocab.bos().unwrap_or(0); rows];
    let mut t_start = Instant::now();
    for p in 0..warm + steps {
        if p == warm {
            t_start = Instant::now();
        }
        let logits = s.step(&toks, p);
        for (r, t) in toks.iter_mut().enumerate() {
            let row = &logits[r * m.cfg.vocab..(r + 1) * m.cfg.vocab];
            *t = (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b }) as u32;
        }
    }
    let dt = t_start.elapsed().as_secs_f64();
    println!(
        "decode {path}: rows {rows}, {steps} steps in {dt:.3}s = {:.1} tok/s ({:.1} ms/step)",
        (rows * steps) as f64 / dt,
        1e3 * dt / steps as f64
    );
    Ok(())
}
