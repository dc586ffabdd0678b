//! `ppn-gate bench`: decode tokens/s of the reference, eager, pipelined and batched paths.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::BenchArgs;
use crate::backend::any::AnyBackend;
use crate::backend::Backend;
use crate::exit::EXIT_PASS;
use crate::fsio::check_writable;
use crate::gate::bounds;
use crate::gate::plan::{prepare, Prepared};
use crate::receipt::bench::{
    BenchConfig, BenchReceipt, BenchTimings, BusyOverlap, NStagePaths, PathRates, BENCH_SCHEMA,
};
use crate::runtime::{Placement, Runtime, RuntimeConfig};

/// Decode throughput of the single-stage reference path and the N-stage eager, pipelined
/// and batched paths, measured in one run so their ratios compare.
pub fn bench(a: &BenchArgs) -> Result<i32> {
    if a.steps == 0 {
        bail!("--steps 0: need at least one step");
    }
    // bench times the fault-free runtime on seeded tokens: flags it would otherwise ignore
    // are refused, not dropped.
    if a.gate.options().world().is_some() {
        bail!("--procs/--world: bench times the runtime of one process; a multi-process bench is not built yet (the gate, soak and battery run multi-process)");
    }
    // The flags bench does not read (a tape, faults, -q, --topk, a verify arm, ...): the
    // one policy's table.
    crate::gate::policy::check_flags(&a.gate.options(), crate::gate::policy::Reader::Bench)?;
    if let Some(r) = &a.gate.receipt {
        check_writable("--receipt", r)?;
    }
    if let Some(t) = &a.gate.trace {
        check_writable("--trace", t)?;
    }
    let outs: Vec<_> = [("--receipt", &a.gate.receipt), ("--trace", &a.gate.trace)]
        .into_iter()
        .filter_map(|(f, p)| p.as_deref().map(|p| (f, p)))
        .collect();
    crate::fsio::check_distinct(&outs, &a.gate.options().input_files())?;
    let p = prepare(&a.gate.options())?;
    // bench sizes its runtimes by --steps (and --batch rows), not the gate's positions.
    bounds::bench_steps(a.steps, &p.model.cfg)?;
    let mut sized = p.spec.clone();
    sized.tape = None;
    (sized.prompt_len, sized.gen_len) = (a.steps, 0);
    sized.arms = vec![crate::arms::ArmKind::Eager, crate::arms::ArmKind::Batched];
    bounds::hold_host(
        &sized.footprint(&p.model.cfg, matches!(p.be, AnyBackend::Cuda(_)), 1),
        bounds::host_available(),
        &format!("--steps {}: ", a.steps),
    )?;
    let modules0 = p.be.module_stats();
    let mut r = match &p.be {
        AnyBackend::Cpu(be) => bench_on(be.clone(), &p, a.steps)?,
        AnyBackend::Cuda(be) => bench_on(be.clone(), &p, a.steps)?,
    };
    r.modules =
        p.be.module_stats()
            .zip(modules0)
            .map(|(now, before)| now.since(&before));
    print_bench(&r);
    if let Some(path) = &a.gate.receipt {
        crate::receipt::write_atomic(path, r.to_json().as_bytes())
            .with_context(|| format!("--receipt {}", path.display()))?;
        outln!("receipt: {}", path.display());
    }
    if let Some(t) = &a.gate.trace {
        let tr =
            p.be.trace()?
                .ok_or_else(|| anyhow!("bench: no trace was kept"))?;
        crate::receipt::write_atomic(t, tr.to_json().as_bytes())
            .with_context(|| format!("--trace {}", t.display()))?;
        outln!("trace: {} (the traced walks)", t.display());
    }
    Ok(EXIT_PASS)
}

fn bench_on<B: Backend>(be: Arc<B>, p: &Prepared, steps: usize) -> Result<BenchReceipt> {
    let m = p.model.clone();
    let spec = &p.spec;
    let ctx = steps;
    let tokens = crate::arms::seeded_prompt(&m, spec.seed, 0, steps);
    let single = Placement::single(m.cfg.n_layers, spec.placement.devices[0]);
    let mk = |pl: Placement, rows: usize| {
        let t0 = Instant::now();
        let rt = fault_free(&be, p, pl, rows, rows, ctx)?;
        Ok::<_, anyhow::Error>((rt, t0.elapsed().as_secs_f64() * 1e3))
    };
    let time_eager_split = |rt: &Runtime<B>| walk_eager(rt, &tokens);
    let time_eager = |rt: &Runtime<B>| -> Result<f64> { Ok(time_eager_split(rt)?.0) };
    let time_pipe = |rt: &Runtime<B>, rows: usize| walk_windowed(rt, &tokens, rows, spec.window);
    let (rt1, reference_build_ms) = mk(single, 1)?;
    time_eager(&rt1)?; // warm-up (page cache, thread pools)
    let l0 = be.launches();
    let (t_ref, t_enq) = time_eager_split(&rt1)?;
    let launches_per_tok = (be.launches() - l0) as f64 / steps as f64;
    drop(rt1);
    let bw = be.bandwidth_gbs(spec.placement.devices[0])?;
    let rows = spec.batch;
    let (rtn, build_ms) = mk(spec.placement.clone(), rows)?;
    // --arms picks the paths measured after eager (the base of every ratio, always run).
    let want = |k: crate::arms::ArmKind| spec.arms.contains(&k);
    // Warm-up of each measured shape (a few steps, untimed): a step shape's first walk
    // captures its CUDA graphs (`--graphs on`), which a timed walk should not include.
    let warm = &tokens[..tokens.len().min(2 * spec.window.max(1))];
    walk_eager(&rtn, warm)?;
    if want(crate::arms::ArmKind::Pipelined) {
        walk_windowed(&rtn, warm, 1, spec.window)?;
    }
    if want(crate::arms::ArmKind::Batched) {
        walk_windowed(&rtn, warm, rows, spec.window)?;
    }
    let t_eager = time_eager(&rtn)?;
    let t_pipe = want(crate::arms::ArmKind::Pipelined)
        .then(|| time_pipe(&rtn, 1))
        .transpose()?;
    let t_batch = want(crate::arms::ArmKind::Batched)
        .then(|| time_pipe(&rtn, rows))
        .transpose()?;
    drop(rtn);
    let prefill = if want(crate::arms::ArmKind::Prime) {
        bench_prefill(&be, p)?
    } else {
        Vec::new()
    };
    let serve = if want(crate::arms::ArmKind::Serve) {
        Some(bench_serve(&be, p)?)
    } else {
        None
    };
    let tps = |t: f64, r: usize| (steps * r) as f64 / t;
    // The tracing cost and each path's busy overlap: one more walk of each path, on a fresh
    // runtime whose streams are traced (the timed walks above stay untraced). Each walk's
    // wall time includes tracing's host work (clock reads, or timing events recorded);
    // reading CUDA's timing events happens after each walk (at the next phase), outside it.
    let traced = match be.start_trace() {
        None => None,
        Some(_) => {
            be.trace_phase("runtime");
            let (rtt, _) = mk(spec.placement.clone(), rows)?;
            be.trace_phase("eager");
            let e = time_eager(&rtt)?;
            let walk = |k: crate::arms::ArmKind, rows: usize| -> Result<Option<f64>> {
                if !want(k) {
                    return Ok(None);
                }
                be.trace_phase(k.name());
                Ok(Some(time_pipe(&rtt, rows)?))
            };
            let pi = walk(crate::arms::ArmKind::Pipelined, 1)?;
            let ba = walk(crate::arms::ArmKind::Batched, rows)?;
            let tr = be
                .trace()?
                .ok_or_else(|| anyhow!("bench: the traced backend kept no trace"))?;
            let ov = |k: crate::arms::ArmKind, t: Option<f64>| {
                t.map(|_| tr.overlap(k.name()).unwrap_or(0.0))
            };
            Some((
                BusyOverlap {
                    eager: tr.overlap("eager").unwrap_or(0.0),
                    pipelined: ov(crate::arms::ArmKind::Pipelined, pi),
                    batched: ov(crate::arms::ArmKind::Batched, ba),
                },
                NStagePaths {
                    eager: tps(e, 1),
                    pipelined: pi.map(|t| tps(t, 1)),
                    batched: ba.map(|t| tps(t, rows)),
                },
            ))
        }
    };
    let pl = &spec.placement;
    Ok(BenchReceipt {
        schema: BENCH_SCHEMA.into(),
        tool: crate::gate::report::tool_info(),
        unix_time_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty()),
        backend: crate::gate::report::backend_info(p),
        model: p.model_info.clone(),
        config: BenchConfig {
            placement: pl.to_flags(),
            stages: pl.n_stages(),
            devices: pl.devices.clone(),
            steps,
            window: spec.window,
            batch: rows,
            arms: spec.arms.iter().map(|a| a.name().to_string()).collect(),
        },
        bandwidth_gbs: bw,
        floor_tok_s: bw.map(|gbs| gbs * 1e9 / m.weight_bytes as f64),
        launches_per_token: (launches_per_tok > 0.0).then_some(launches_per_tok),
        host_enqueue_us_per_token: 1e6 * t_enq / steps as f64,
        tok_s: PathRates {
            reference: tps(t_ref, 1),
            eager: tps(t_eager, 1),
            pipelined: t_pipe.map(|t| tps(t, 1)),
            batched: t_batch.map(|t| tps(t, rows)),
        },
        timings: BenchTimings {
            load_ms: p.load_ms,
            reference_build_ms,
            build_ms,
        },
        busy_overlap: traced.as_ref().map(|t| t.0.clone()),
        traced_tok_s: traced.map(|t| t.1),
        modules: None,
        prefill,
        serve,
    })
}

/// `bench --arms serve`: the serve arm's schedule (its flags and seed) walked on the
/// placement with `--window` steps in flight, every row's logits read back, as the arm
/// walks it but with no reference and no judging: requests, generated tokens and rows per
/// second of the better of two timed walks after a warm-up one (which also captures each
/// step shape's CUDA graphs).
fn bench_serve<B: Backend>(be: &Arc<B>, p: &Prepared) -> Result<crate::receipt::bench::ServeRate> {
    let (m, spec) = (&p.model, &p.spec);
    let sched = spec
        .serve_schedule()
        .ok_or_else(|| anyhow!("bench: the serve path without the serve arm"))?;
    let tokens = crate::arms::serve::bench_tokens(m, spec.seed, &sched);
    be.expect_rows(spec.serve.max_rows);
    let rt = fault_free(
        be,
        p,
        spec.placement.clone(),
        spec.serve.max_rows,
        sched.cache_rows,
        sched.ctx(false),
    )?;
    let walk = || -> Result<f64> {
        let t0 = Instant::now();
        crate::arms::serve::walk_schedule(
            &rt,
            &sched,
            spec.window,
            |q, pos| tokens[q][pos],
            |_, _| {},
        )?;
        Ok(t0.elapsed().as_secs_f64())
    };
    walk()?;
    let wall = walk()?.min(walk()?);
    let rows: usize = sched.steps.iter().map(|s| s.rows.len()).sum();
    let prompt: usize = sched.requests.iter().map(|r| r.prompt_len).sum();
    let generated: usize = sched.requests.iter().map(|r| r.gen_len).sum();
    Ok(crate::receipt::bench::ServeRate {
        requests: sched.requests.len(),
        max_rows: spec.serve.max_rows,
        prefill_chunk: spec.serve.prefill_chunk,
        cache_rows: sched.cache_rows,
        max_prompt: spec.prompt_len,
        max_gen: spec.gen_len,
        steps: sched.steps.len(),
        rows,
        prompt_tokens: prompt,
        generated_tokens: generated,
        wall_s: wall,
        requests_per_s: sched.requests.len() as f64 / wall,
        generated_tok_s: generated as f64 / wall,
        rows_per_s: rows as f64 / wall,
    })
}

/// The fault-free runtime bench times: `placement`, steps of up to `max_rows` rows over
/// `max_seqs` sequences of `ctx` slots, `--window` in flight, one process.
fn fault_free<B: Backend>(
    be: &Arc<B>,
    p: &Prepared,
    placement: Placement,
    max_rows: usize,
    max_seqs: usize,
    ctx: usize,
) -> Result<Runtime<B>> {
    Ok(Runtime::build(
        be.clone(),
        p.model.clone(),
        RuntimeConfig {
            placement,
            max_rows,
            max_seqs,
            ctx,
            window: p.spec.window,
            faults: vec![],
            dist: None,
        },
    )?)
}

/// `bench --arms prime`: prefill tok/s of a prime of the `--prompt-len` seeded prompt at
/// every chunk size, on one stage (the placement's first device) and on the placement.
/// Each figure is the better of two timed primes after a warm-up one.
fn bench_prefill<B: Backend>(
    be: &Arc<B>,
    p: &Prepared,
) -> Result<Vec<crate::receipt::bench::PrefillRate>> {
    let (m, spec) = (&p.model, &p.spec);
    let n = spec.prime_len();
    let tokens = crate::arms::seeded_prompt(m, spec.seed, 0, n);
    let chunks = spec.prime_chunks();
    let max_c = chunks.iter().copied().max().unwrap_or(1);
    let single = Placement::single(m.cfg.n_layers, spec.placement.devices[0]);
    let mut rates: Vec<crate::receipt::bench::PrefillRate> = chunks
        .iter()
        .map(|&c| crate::receipt::bench::PrefillRate {
            chunk: c,
            prompt: n,
            one_stage_tok_s: 0.0,
            staged_tok_s: 0.0,
            last_one_stage_tok_s: 0.0,
            last_staged_tok_s: 0.0,
        })
        .collect();
    for (k, pl) in [single, spec.placement.clone()].into_iter().enumerate() {
        let rt = fault_free(be, p, pl, max_c, 1, n)?;
        for r in rates.iter_mut() {
            for last in [false, true] {
                let walk = || walk_prime(&rt, &tokens, r.chunk, spec.window, last);
                walk()?;
                let v = n as f64 / walk()?.min(walk()?);
                match (k, last) {
                    (0, false) => r.one_stage_tok_s = v,
                    (0, true) => r.last_one_stage_tok_s = v,
                    (_, false) => r.staged_tok_s = v,
                    (_, true) => r.last_staged_tok_s = v,
                }
            }
        }
    }
    Ok(rates)
}

/// Wall time of one prime of `tokens` in chunks of `c` with `window` chunks in flight
/// (`last`: each chunk's head on its last position only).
fn walk_prime<B: Backend>(
    rt: &Runtime<B>,
    tokens: &[u32],
    c: usize,
    window: usize,
    last: bool,
) -> Result<f64> {
    let mut w = rt.walk()?;
    w.reset_caches()?;
    let t0 = Instant::now();
    let mut inflight = std::collections::VecDeque::new();
    for a in (0..tokens.len()).step_by(c) {
        if inflight.len() >= window.max(1) {
            w.read_deferred(inflight.pop_front().expect("non-empty"))?;
        }
        let b = (a + c).min(tokens.len());
        let pd = if last {
            w.issue_chunk_last(&tokens[a..b], a)?
        } else {
            w.issue_chunk(&tokens[a..b], a)?
        };
        inflight.push_back(pd);
    }
    while let Some(pd) = inflight.pop_front() {
        w.read_deferred(pd)?;
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Wall time of an eager walk over `tokens`, and the part of it the host spent enqueueing
/// (issue).
fn walk_eager<B: Backend>(rt: &Runtime<B>, tokens: &[u32]) -> Result<(f64, f64)> {
    let mut w = rt.walk()?;
    let mut enq = 0.0;
    let t0 = Instant::now();
    for (i, &t) in tokens.iter().enumerate() {
        let ti = Instant::now();
        let pd = w.issue(&[t], &[i])?;
        enq += ti.elapsed().as_secs_f64();
        w.read_eager(pd)?;
    }
    Ok((t0.elapsed().as_secs_f64(), enq))
}

/// Wall time of a walk over `tokens` with `window` steps in flight, `rows` rows a step.
fn walk_windowed<B: Backend>(
    rt: &Runtime<B>,
    tokens: &[u32],
    rows: usize,
    window: usize,
) -> Result<f64> {
    let mut w = rt.walk()?;
    let t0 = Instant::now();
    crate::arms::drive_windowed(
        &mut w,
        tokens.len(),
        window,
        |i, t| t.resize(rows, tokens[i]),
        |_, _| Ok::<(), anyhow::Error>(()),
        |i, e| anyhow!("bench step {i}: {e}"),
    )?;
    Ok(t0.elapsed().as_secs_f64())
}

/// Below this many steps a figure timed over them is flagged as noise: a few steps' wall
/// time is dominated by one-off costs (the first launch, a page fault, a scheduler tick),
/// and a ratio of two such walks (tracing cost, speedups) can swing by 2x between runs.
pub const NOISE_STEPS: usize = 16;

/// The note after a figure timed over `steps` steps: ` (noise: N steps)` below
/// `NOISE_STEPS`, else nothing.
fn noise(steps: usize) -> String {
    if steps < NOISE_STEPS {
        format!(" (noise: {steps} steps)")
    } else {
        String::new()
    }
}

/// The results table first (tokens/s of every path), then what explains them (bandwidth
/// floor, launches, enqueue cost, build times, overlap, tracing cost); every figure with
/// its unit, and every figure timed over fewer than `NOISE_STEPS` steps flagged.
fn print_bench(r: &BenchReceipt) {
    let c = &r.config;
    let t = &r.tok_s;
    let n = noise(c.steps);
    outln!(
        "bench: {} backend, model {} ({} weight bytes), {}, window {}, {} steps",
        r.backend.kind,
        r.model.file,
        r.model.weight_bytes,
        c.placement,
        c.window,
        c.steps
    );
    outln!(
        "  reference (1 stage, eager)   {:>9.1} tok/s{n}",
        t.reference
    );
    outln!(
        "  eager     ({} stages)         {:>9.1} tok/s  ({:.2}x reference){n}",
        c.stages,
        t.eager,
        t.eager / t.reference
    );
    if let Some(v) = t.pipelined {
        outln!(
            "  pipelined (window {})         {:>9.1} tok/s  ({:.2}x eager){n}",
            c.window,
            v,
            v / t.eager
        );
    }
    if let Some(v) = t.batched {
        outln!(
            "  batched   (B={}, aggregate)  {:>9.1} tok/s  ({:.2}x eager){n}",
            c.batch,
            v,
            v / t.eager
        );
    }
    for f in &r.prefill {
        let n = noise(f.prompt);
        outln!(
            "  prime     (C={}, {} tokens)  {:>9.1} tok/s one stage, {:>9.1} tok/s {} stages (every position's logits){n}",
            f.chunk,
            f.prompt,
            f.one_stage_tok_s,
            f.staged_tok_s,
            c.stages
        );
        outln!(
            "  prefill   (C={}, {} tokens)  {:>9.1} tok/s one stage, {:>9.1} tok/s {} stages (last position's logits){n}",
            f.chunk,
            f.prompt,
            f.last_one_stage_tok_s,
            f.last_staged_tok_s,
            c.stages
        );
    }
    if let Some(s) = &r.serve {
        let n = noise(s.steps);
        outln!(
            "  serve     (R={}, M={}, C={})  {:>9.1} req/s, {:.1} generated tok/s, {:.1} rows/s ({} steps, {} prompt + {} generated positions, window {}){n}",
            s.requests,
            s.max_rows,
            s.prefill_chunk,
            s.requests_per_s,
            s.generated_tok_s,
            s.rows_per_s,
            s.steps,
            s.prompt_tokens,
            s.generated_tokens,
            c.window
        );
    }
    if c.steps < NOISE_STEPS {
        outln!(
            "  (noise: a figure timed over fewer than {NOISE_STEPS} steps is not a measurement; give --steps {NOISE_STEPS} or more)"
        );
    }
    match (r.bandwidth_gbs, r.floor_tok_s) {
        (Some(gbs), Some(floor)) => outln!(
            "  device bandwidth {gbs:.0} GB/s (D2D copy, read+write) -> floor {:.1} us/token, max {floor:.0} tok/s (weight bytes / bandwidth)",
            1e6 / floor
        ),
        _ => outln!("  device bandwidth n/a -> floor n/a"),
    }
    let launches = r
        .launches_per_token
        .map_or("n/a".to_string(), |l| format!("{l:.1}"));
    outln!(
        "  kernel launches per token (reference) {launches}; host enqueue {:.1} us/token of {:.1} us/token{n}",
        r.host_enqueue_us_per_token,
        1e6 / t.reference
    );
    let modules = r.modules.as_ref().map_or(String::new(), |m| {
        format!(
            " (kernel modules: {} compiled, {} from the cache, {:.0} ms)",
            m.misses + m.corrupt,
            m.hits,
            m.ms
        )
    });
    outln!(
        "  build: reference runtime {:.0} ms, {}-stage runtime {:.0} ms{modules}",
        r.timings.reference_build_ms,
        c.stages,
        r.timings.build_ms
    );
    if let Some(o) = &r.busy_overlap {
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0));
        outln!(
            "  wall time with 2+ stages busy (one more, traced walk): eager {}, pipelined {}, batched {}{n}",
            pct(Some(o.eager)),
            pct(o.pipelined),
            pct(o.batched)
        );
    }
    if let Some(tt) = &r.traced_tok_s {
        let rel = |v: Option<f64>, base: Option<f64>| match (v, base) {
            (Some(v), Some(b)) => format!("{v:.1} tok/s ({:.0}% of untraced)", 100.0 * v / b),
            _ => "-".to_string(),
        };
        outln!(
            "  tracing cost (the traced walks): eager {}, pipelined {}, batched {}{n}",
            rel(Some(tt.eager), Some(t.eager)),
            rel(tt.pipelined, t.pipelined),
            rel(tt.batched, t.batched)
        );
    }
}
