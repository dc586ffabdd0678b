//! Micro-benchmark of `quant::dot` / `quant::dot_many`, single thread: GB/s of weight bytes
//! streamed for the SmolLM2-135M shapes (Q4_1 576x1536 / 1536x576 FFN, Q8_0 49152x576 tied
//! output head) and the Gemma-3 formats. Not a test: timings are machine-dependent.
//!
//! Times are CPU time of the benchmark thread (see `thread_cpu_s`).
//!
//! Run: cargo run --release --example quant_bench
// A developer's example: std's print macros are fine here (clippy.toml refuses them in the
// crate, whose lines must never panic).
#![allow(clippy::disallowed_macros)]

use ppn_gate::quant::{dot, dot_many, quantize, GgmlType};
use std::time::Instant;

fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// CPU seconds this thread has run (utime + stime from /proc, clock ticks of 10 ms): on a
/// shared machine this is steadier than wall time.
fn thread_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn bench(ty: GgmlType, rows: usize, cols: usize, batch: usize) {
    let mut seed = 42u64;
    let w: Vec<f32> = (0..rows * cols).map(|_| lcg(&mut seed) * 0.05).collect();
    let q = quantize(ty, &w).expect("quantize");
    let rb = q.len() / rows;
    let xs: Vec<Vec<f32>> = (0..batch)
        .map(|_| (0..cols).map(|_| lcg(&mut seed)).collect())
        .collect();
    let refs: Vec<&[f32]> = xs.iter().map(|x| x.as_slice()).collect();
    let mut out = vec![0.0f32; rows * batch];
    // Repeat for at least ~0.5 s of work, after one warm-up pass.
    let pass = |out: &mut [f32]| {
        for (r, o) in q.chunks_exact(rb).zip(out.chunks_exact_mut(batch)) {
            if batch == 1 {
                o[0] = dot(ty, r, &xs[0]);
            } else {
                dot_many(ty, r, &refs, o);
            }
        }
    };
    pass(&mut out);
    let mut iters = 0u32;
    let t = Instant::now();
    let c0 = thread_cpu_s();
    while thread_cpu_s() - c0 < 0.5 {
        pass(&mut out);
        iters += 1;
    }
    let wall = t.elapsed().as_secs_f64() / iters as f64;
    let s = (thread_cpu_s() - c0) / iters as f64;
    let checksum: f32 = out.iter().sum();
    println!(
        "{:5} {:6}x{:5} B={} : {:7.3} ms/pass (wall {:7.3})  {:6.2} GB/s weights  {:6.2} Gelem/s (x B)  [sum {checksum:.3}]",
        ty.name(),
        rows,
        cols,
        batch,
        s * 1e3,
        wall * 1e3,
        q.len() as f64 / s / 1e9,
        (rows * cols * batch) as f64 / s / 1e9
    );
}

fn main() {
    // QB_TYPE=q6_k: only that type (for profiling one kernel)
    if let Some(ty) = std::env::var("QB_TYPE")
        .ok()
        .and_then(|n| GgmlType::from_name(&n))
    {
        let rows = std::env::var("QB_ROWS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(1024);
        bench(ty, rows, 2048, 1);
        return;
    }
    bench(GgmlType::Q4_1, 1536, 576, 1);
    bench(GgmlType::Q4_1, 576, 1536, 1);
    bench(GgmlType::Q8_0, 49152, 576, 1);
    bench(GgmlType::Q4_1, 1536, 576, 4);
    bench(GgmlType::Q8_0, 49152, 576, 4);
    if std::env::var_os("QB_ONLY").is_some() {
        return;
    }
    for ty in [GgmlType::Q5_0, GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0] {
        bench(ty, 640, 2048, 1);
    }
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q5_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q5K,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::F32,
    ] {
        bench(ty, 1024, 1024, 1);
    }
}
