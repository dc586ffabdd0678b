//! A member of a multi-process gate (`--rank r --world W --rendezvous ADDR`): it meets the
//! others at the rendezvous, checks they run the same gate, builds its links (`multiproc::links`),
//! runs its stages of every arm, and the member holding the last stage gathers every
//! member's part into the ONE receipt (`multiproc`'s module doc: the whole protocol).

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::plan::Prepared;
use super::report::{emit, receipt_of, stage_resident, transport_names};
use crate::arms;
use crate::backend::any::AnyBackend;
use crate::multiproc::rendezvous::Rendezvous;
use crate::multiproc::{self, links, local_range, member_name, rank_map, Cross, FINISHED};
use crate::receipt::{ProcessInfo, StageResident};
use crate::runtime::DistPart;

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// blake3 over a reference's step hashes (every member computes the reference; they must
/// agree bit for bit).
fn reference_digest(res: &arms::GateResult) -> String {
    let mut h = blake3::Hasher::new();
    for r in std::iter::once(&res.reference).chain(&res.batch_references) {
        for s in &r.steps {
            h.update(s.logits_blake3.as_bytes());
        }
    }
    h.finalize().to_hex().to_string()
}

/// What a member publishes after its arms (the receipt's writer gathers every member's).
#[derive(serde::Serialize, serde::Deserialize)]
struct MemberResult {
    process: ProcessInfo,
    resident: Vec<StageResident>,
    misplaced: Vec<String>,
}

/// Run this process as member `--rank` of a multi-process gate; returns the exit code
/// (the member holding the last stage: the gate's verdict; the others 0 once it is done).
pub fn member(p: &Prepared) -> Result<i32> {
    let a = &p.args;
    let (rank, world) = (
        a.rank.expect("member has --rank"),
        a.world.expect("member has --world"),
    );
    let addr = a.rendezvous.as_deref().expect("member has --rendezvous");
    if rank >= world {
        bail!("--rank {rank}: must be below --world {world}");
    }
    let n = p.spec.placement.n_stages();
    let map = rank_map(n, world, a.ranks.as_deref())?;
    super::launch::watch_launcher(addr, member_name(&map, rank));
    let reach = Duration::from_secs(p.args.rendezvous_timeout());
    let rdv = Rendezvous::open_within(addr, rank, reach).map_err(anyhow::Error::msg)?;
    multiproc::abort_to(rdv.clone(), member_name(&map, rank));
    let r = member_run(p, &rdv, &map, rank).with_context(|| format!("rank {rank}"));
    if let Err(e) = &r {
        // The others stop waiting at once, naming this member and why.
        let _ = rdv.put("abort", &format!("{}: {e:#}", member_name(&map, rank)));
    }
    r
}

fn member_run(p: &Prepared, rdv: &Rendezvous, map: &[usize], rank: usize) -> Result<i32> {
    let a = &p.args;
    let world = map[map.len() - 1] + 1;
    let n = map.len();
    let local = local_range(map, rank);
    let cross = Cross::parse(a.transport()).ok_or_else(|| {
        anyhow!(
            "--transport {}: a multi-process gate crosses processes with ipc or nccl",
            a.transport()
        )
    })?;
    let rdv_t = Duration::from_secs(a.rendezvous_timeout());
    let peer_t = Duration::from_secs(a.peer_timeout());
    let name = |r: usize| member_name(map, r);

    // Every member must run the same gate: the same model file, tokens, placement, arms and
    // faults (different flags would make the walks differ mid-gate).
    let config = blake3::hash(
        format!(
            "{:?}|{}|{}|{:?}",
            p.spec,
            p.model_info.blake3,
            p.be.kind(),
            map
        )
        .as_bytes(),
    )
    .to_hex()
    .to_string();
    let hello =
        serde_json::json!({"pid": std::process::id(), "host": host_name(), "config": config});
    rdv.put(&format!("hello/{rank}"), &hello.to_string())
        .map_err(anyhow::Error::msg)?;
    for r in 0..world {
        let h = rdv
            .get(&format!("hello/{r}"), rdv_t, &name(r))
            .map_err(anyhow::Error::msg)?;
        let h: serde_json::Value = serde_json::from_str(&h).context("rendezvous hello")?;
        if h.get("config").and_then(|c| c.as_str()) != Some(config.as_str()) {
            bail!("{} runs a different gate (its model, flags or placement differ from this member's): every member needs the same gate flags", name(r));
        }
    }

    // Links: the RX side listens and publishes its address, the TX side connects.
    let meet = links::Meet {
        rdv,
        map,
        rank,
        link_host: a.link_host(),
        rdv_t,
        peer_t,
    };
    let (recv, send) = match cross {
        Cross::Ipc => links::ipc_links(&meet)?,
        Cross::Nccl => links::nccl_links(
            &meet,
            &p.be,
            &p.spec.placement.devices,
            a.nccl_lib.as_deref(),
        )?,
    };

    let mut spec = p.spec.clone();
    // Every member's reference and build done before any link waits on data: the link
    // timeout then measures a neighbour's steps, not its start-up.
    let ready: crate::runtime::ReadyBarrier = {
        let (rdv, names) = (rdv.clone(), (0..world).map(name).collect::<Vec<_>>());
        std::sync::Arc::new(move |misplaced_here: bool| {
            let mine = if misplaced_here { "misplaced" } else { "1" };
            rdv.put(&format!("ready/{rank}"), mine)?;
            let mut any = false;
            for (r, who) in names.iter().enumerate() {
                any |= rdv.get(&format!("ready/{r}"), rdv_t, who)? == "misplaced";
            }
            Ok(any)
        })
    };
    spec.dist = Some(DistPart {
        local: local.clone(),
        recv,
        send,
        ready: Some(ready),
    });
    let t0 = std::time::Instant::now();
    let modules0 = p.be.module_stats();
    let res = match &p.be {
        AnyBackend::Cpu(be) => arms::run_gate(be.clone(), p.model.clone(), &spec, &mut |_| {})?,
        AnyBackend::Cuda(be) => arms::run_gate(be.clone(), p.model.clone(), &spec, &mut |_| {})?,
    };
    FINISHED.store(true, std::sync::atomic::Ordering::SeqCst);
    let link = |b: Option<usize>| b.map(|_| cross.name().to_string());
    let me = MemberResult {
        process: ProcessInfo {
            rank,
            stages: local.clone().collect(),
            devices: local.clone().map(|s| p.spec.placement.devices[s]).collect(),
            device_names: local
                .clone()
                .map(|s| p.be.device_name(p.spec.placement.devices[s]))
                .collect(),
            link_in: link(local.start.checked_sub(1)),
            link_out: link((local.end < n).then_some(local.end)),
            host: host_name(),
            pid: std::process::id(),
            reference_blake3: reference_digest(&res),
            build_ms: res.build_ms,
        },
        resident: stage_resident(&p.spec.placement, res.first_stage, &res.resident),
        misplaced: res.misplaced.clone(),
    };
    rdv.put(&format!("result/{rank}"), &serde_json::to_string(&me)?)
        .map_err(anyhow::Error::msg)?;
    if local.end < n {
        // Wait until the receipt is written: with a TCP rendezvous rank 0 serves the store
        // the writer still reads.
        rdv.get("done", rdv_t, &name(world - 1))
            .map_err(anyhow::Error::msg)?;
        bye(rdv, rank, world, &name);
        return Ok(crate::exit::EXIT_PASS);
    }

    // The last stage's member: gather every member's part into ONE receipt.
    let mut all = Vec::with_capacity(world);
    for r in 0..world {
        let s = rdv
            .get(&format!("result/{r}"), rdv_t, &name(r))
            .map_err(anyhow::Error::msg)?;
        let m: MemberResult =
            serde_json::from_str(&s).with_context(|| format!("result of {}", name(r)))?;
        if m.process.reference_blake3 != me.process.reference_blake3 {
            bail!(
                "{}'s single-stage reference differs from {}'s (reference digests {} vs {}): the members do not compute the same model bit for bit",
                name(r),
                name(rank),
                m.process.reference_blake3,
                me.process.reference_blake3
            );
        }
        all.push(m);
    }
    let mut rc = receipt_of(p, res, t0, modules0, None)?;
    rc.placement.resident = all.iter().flat_map(|m| m.resident.clone()).collect();
    rc.placement.misplaced = all.iter().flat_map(|m| m.misplaced.clone()).collect();
    rc.placement.transports = transport_names(a, &p.spec.placement);
    rc.backend.device_names = all
        .iter()
        .flat_map(|m| m.process.device_names.clone())
        .collect();
    rc.placement.processes = Some(all.into_iter().map(|m| m.process).collect());
    let pass = rc.placement.misplaced.is_empty() && rc.arms.iter().all(|a| a.verdict == "PASS");
    rc.verdict = if pass { "PASS" } else { "FAIL" }.into();
    let code = emit(a, &rc)?;
    rdv.put("done", "1").map_err(anyhow::Error::msg)?;
    bye(rdv, rank, world, &name);
    Ok(code)
}

/// The end of a member: it says so, and rank 0, which serves a TCP rendezvous, stays until
/// every member has (else a member still polling for `done` would lose the store and fail
/// a gate that passed). Best effort and bounded: the gate's result is already written.
fn bye(rdv: &Rendezvous, rank: usize, world: usize, name: &dyn Fn(usize) -> String) {
    let _ = rdv.put(&format!("bye/{rank}"), "1");
    if rank == 0 {
        for r in 1..world {
            let _ = rdv.get(&format!("bye/{r}"), Duration::from_secs(10), &name(r));
        }
    }
}
