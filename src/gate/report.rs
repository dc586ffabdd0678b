//! The report of a gate: its receipt (`receipt_of`), its verdict lines, and `emit`, which
//! writes the receipt and prints them.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;

use super::options::GateOptions;
use super::plan::Prepared;
use crate::arms::{self, ArmKind};
use crate::backend::any::AnyBackend;
use crate::exit::{EXIT_FAIL, EXIT_PASS};
use crate::receipt::{
    self, BackendInfo, ConfigInfo, DevBytes, ModuleStats, PlacementInfo, Receipt, StageResident,
    Timings, Tool,
};
use crate::runtime::Placement;

/// The receipt of a gate's result (`t0`: when the gate started; `modules0`: the module
/// counters then; `busy_overlap`: each arm's, from a trace).
pub fn receipt_of(
    p: &Prepared,
    res: arms::GateResult,
    t0: Instant,
    modules0: Option<ModuleStats>,
    busy_overlap: Option<Vec<f64>>,
) -> Result<Receipt> {
    let total_ms = t0.elapsed().as_secs_f64() * 1e3 + p.load_ms;
    let pl = &p.spec.placement;
    let m = &p.model;
    let n = pl.n_stages();
    let stage_weight_bytes = (0..n)
        .map(|s| m.stage_weight_bytes(pl.layers(s), s == 0, s == n - 1))
        .collect();
    let pass = res.pass();
    let has = |k: ArmKind| p.spec.arms.contains(&k);
    Ok(Receipt {
        schema: receipt::SCHEMA.to_string(),
        tool: tool_info(),
        backend: backend_info(p),
        model: p.model_info.clone(),
        placement: PlacementInfo {
            stages: n,
            fence: pl.fence.clone(),
            devices: pl.devices.clone(),
            transports: pl.transports.iter().map(|t| t.name().to_string()).collect(),
            stage_weight_bytes,
            flags: pl.to_flags(),
            resident: stage_resident(pl, res.first_stage, &res.resident),
            misplaced: res.misplaced.clone(),
            processes: None,
        },
        config: ConfigInfo {
            arms: p.spec.arms.iter().map(|a| a.name().to_string()).collect(),
            window: p.spec.window,
            batch: p.spec.batch,
            // Row 0's prompt by the one rule for tapes (a tape's own `prompt_len`, else
            // --prompt-len); also the length of the seeded prompts of batch rows 1..B.
            prompt_len: p.spec.prompt_len,
            gen_len: p.spec.gen_len,
            seed: p.spec.seed,
            topk: p.spec.topk,
            tape: p.args.tape.as_ref().map(|t| t.display().to_string()),
            faults: p.spec.faults.iter().map(|f| f.name().to_string()).collect(),
            chunks: has(ArmKind::Prime).then(|| p.spec.prime_chunks()),
            repeat: has(ArmKind::Prime).then_some(p.spec.repeat),
            draft: has(ArmKind::Verify).then_some(p.spec.draft),
            requests: has(ArmKind::Serve).then_some(p.spec.serve.requests),
            max_rows: has(ArmKind::Serve).then_some(p.spec.serve.max_rows),
            prefill_chunk: has(ArmKind::Serve).then_some(p.spec.serve.prefill_chunk),
            planted_defect: p
                .spec
                .planted
                .then(|| p.args.plant_defect.clone())
                .flatten(),
        },
        reference: res.reference,
        batch_references: res.batch_references,
        arms: res.arms,
        verdict: if pass { "PASS" } else { "FAIL" }.into(),
        timings: Timings {
            load_ms: p.load_ms,
            build_ms: res.build_ms,
            reference_ms: res.reference_ms,
            arm_ms: res.arm_ms,
            total_ms,
            busy_overlap,
            modules: p
                .be
                .module_stats()
                .zip(modules0)
                .map(|(now, before)| now.since(&before)),
        },
    })
}

/// The receipt's form of measured residency, per stage from `first`.
pub fn stage_resident(
    pl: &Placement,
    first: usize,
    resident: &[crate::backend::Residency],
) -> Vec<StageResident> {
    (first..)
        .zip(resident)
        .map(|(s, r)| {
            let db = |l: &[(Option<usize>, u64)]| {
                l.iter()
                    .map(|&(device, bytes)| DevBytes { device, bytes })
                    .collect()
            };
            StageResident {
                stage: s,
                placed: pl.devices[s],
                weights: db(&r.weights),
                scratch: db(&r.scratch),
                cache: db(&r.cache),
            }
        })
        .collect()
}

/// This binary, as receipts name it.
pub fn tool_info() -> Tool {
    Tool {
        name: "ppn-gate".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("PPN_GIT_COMMIT").into(),
    }
}

/// The backend and the devices of the placement, as receipts name them.
pub fn backend_info(p: &Prepared) -> BackendInfo {
    BackendInfo {
        kind: p.be.kind().into(),
        device_names: p
            .spec
            .placement
            .devices
            .iter()
            .map(|&d| p.be.device_name(d))
            .collect(),
        jitter_us: p.args.jitter_us,
        graphs: match &p.be {
            AnyBackend::Cpu(_) => None,
            AnyBackend::Cuda(b) => Some(b.graphs_note().into()),
        },
        mma: match &p.be {
            AnyBackend::Cpu(_) => None,
            AnyBackend::Cuda(b) => Some(b.mma_note(&p.model)),
        },
    }
}

/// Where a divergence is, in the verdict line's words: a serve row by its request, position
/// and serve step; any other by step (position), key and row.
fn divergence_at(d: &crate::receipt::Divergence) -> String {
    match d.key.serve_step {
        Some(k) => format!("request {} position {} (serve step {k})", d.row, d.step),
        None => format!("step {}{} row {}", d.step, d.key.describe(), d.row),
    }
}

/// One verdict line per misplaced allocation (the gate then ran no arm), then one per arm.
pub fn verdict_lines(r: &Receipt) -> Vec<String> {
    let placement = r
        .placement
        .misplaced
        .iter()
        .map(|m| format!("{:<10} FAIL  {m}", "placement"));
    placement.chain(r.arms.iter().map(arm_line)).collect()
}

/// An arm's verdict line (`eager      PASS  16/16 steps bit-identical`).
pub fn arm_line(a: &receipt::Arm) -> String {
    let n = a.steps.len();
    let rounds = if a.rounds.is_empty() {
        String::new()
    } else {
        let acc: usize = a.rounds.iter().map(|r| r.accepted).sum();
        let drafted: usize = a.rounds.iter().map(|r| r.drafted.len()).sum();
        format!(
            "; {} rounds, {acc}/{drafted} drafts accepted",
            a.rounds.len()
        )
    };
    let lost = a.rounds.iter().find(|r| r.accepted != r.expected);
    // An arm that alone computed NaN/Inf says so (the reference is checked finite).
    let nf = (a.non_finite.as_ref()).map_or(String::new(), |x| format!("; {}", x.describe()));
    // The serve arm: what else shared the divergent step.
    let company = match (&a.serve, &a.first_divergence) {
        (Some(s), Some(d)) => d
            .key
            .serve_step
            .map_or(String::new(), |k| s.company(k, d.row)),
        _ => String::new(),
    };
    match (&a.first_divergence, lost) {
                (None, None) => format!(
                    "{:<10} {}  {n}/{n} steps bit-identical{rounds}",
                    a.name, a.verdict
                ),
                (Some(d), _) => format!(
                    "{:<10} {}  first divergence at {}: logit[{}] ref {:e} got {:e}; {}/{n} steps differ{nf}{rounds}{company}",
                    a.name, a.verdict, divergence_at(d), d.index, d.reference, d.got, a.mismatched_steps
                ),
                (None, Some(r)) => format!(
                    "{:<10} {}  round {} at position {} accepted {} drafts, the reference implies {}{rounds}",
                    a.name, a.verdict, r.round, r.start, r.accepted, r.expected
                ),
            }
}

pub fn default_receipt_path(prefix: &str) -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    PathBuf::from("receipts/runs").join(format!("{prefix}-{t}-{}.json", std::process::id()))
}

/// Write a gate's receipt (`--receipt`, else a new file under receipts/runs/), print its
/// verdict lines; the exit code of its verdict.
pub fn emit(args: &GateOptions, r: &Receipt) -> Result<i32> {
    emit_after(args, r, 0)
}

/// `emit` when the verdict lines of the first `shown` arms were printed as those arms
/// ended (`watch::Watch`): the lines not printed yet.
pub fn emit_after(args: &GateOptions, r: &Receipt, shown: usize) -> Result<i32> {
    let path = args
        .receipt
        .clone()
        .unwrap_or_else(|| default_receipt_path("gate"));
    r.write(&path)?;
    let placement = r.placement.misplaced.len();
    for (i, l) in verdict_lines(r).into_iter().enumerate() {
        if i < placement || i >= placement + shown {
            outln!("{l}");
        }
    }
    if !args.quiet {
        // -q keeps the verdict lines only.
        outln!("receipt: {}", path.display());
        for l in describe(r) {
            errln!("ppn-gate: {l}");
        }
    }
    if let (Some(t), Some(o)) = (&args.trace, &r.timings.busy_overlap) {
        let per_arm: Vec<String> = r
            .arms
            .iter()
            .zip(o)
            .map(|(a, f)| format!("{} {:.0}%", a.name, f * 100.0))
            .collect();
        outln!(
            "trace: {} (wall time with 2+ stages busy: {})",
            t.display(),
            per_arm.join(", ")
        );
    }
    Ok(if r.verdict == "PASS" {
        EXIT_PASS
    } else {
        EXIT_FAIL
    })
}

/// Each boundary's transport by name: a link between processes (`ipc`, `nccl`) where the
/// rank map puts its two stages in different members, else the in-process transport.
pub fn transport_names(a: &GateOptions, pl: &Placement) -> Vec<String> {
    let map = a
        .world()
        .and_then(|w| crate::multiproc::rank_map(pl.n_stages(), w, a.ranks.as_deref()).ok());
    pl.transports
        .iter()
        .enumerate()
        .map(|(b, t)| match &map {
            Some(m) if m[b] != m[b + 1] => a.transport().to_string(),
            _ => t.name().to_string(),
        })
        .collect()
}

/// The receipt's processes in one line each, for the gate's log.
pub fn describe(r: &Receipt) -> Vec<String> {
    r.placement
        .processes
        .iter()
        .flatten()
        .map(|p| {
            format!(
                "rank {} on {} (pid {}): stages {:?} on devices {:?}, link in {}, link out {}",
                p.rank,
                p.host,
                p.pid,
                p.stages,
                p.devices,
                p.link_in.as_deref().unwrap_or("-"),
                p.link_out.as_deref().unwrap_or("-")
            )
        })
        .collect()
}
