//! Multi-process gates: the stages of one pipeline spread over several processes (one per
//! GPU or per group of GPUs, on one host or several), as the engines people gate at scale
//! run them.
//!
//! - Mapping: stage s is held by rank `ranks[s]`; ranks hold contiguous groups in stage
//!   order (`--ranks`, default as even as possible: 4 stages over 2 ranks = 0,0,1,1). A
//!   boundary between two ranks is a link (`--transport ipc`: TCP between processes, the CPU
//!   backend's TEST transport; `--transport nccl`: NCCL send/recv, the real one, on CUDA);
//!   a boundary inside a rank is the in-process slot, as in a single-process gate.
//! - Every member runs the whole gate's control flow (the same walks, so the same step
//!   numbers), computes the single-stage reference itself, and runs its stages; the member
//!   holding the last stage judges the logits, checks that every member's reference agrees,
//!   and writes the ONE receipt with every member's stages, devices, links and residency.
//! - Members meet at a rendezvous (`rendezvous.rs`). Every wait on another member has a
//!   timeout naming it (`--peer-timeout` on a link, `--rendezvous-timeout` at the
//!   rendezvous); a member that fails publishes `abort` there so the others stop at once.
//! - `launch` (`--procs W`) starts W members on this host as children and supervises them.

pub mod launch;
pub mod links;
pub mod rendezvous;

use std::ops::Range;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::arms;
use crate::backend::any::AnyBackend;
use crate::cli::gate::Prepared;
use crate::cli::GateArgs;
use crate::receipt::{self, ProcessInfo, Receipt, StageResident};
use crate::runtime::DistPart;
use rendezvous::Rendezvous;

/// Set once this member's part of the gate has run: from then on a neighbour closing its
/// connections is its orderly exit, not a death (`ipc::watchdog`).
pub static FINISHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This member's rendezvous and name, for `die` (set when the member starts).
static ABORT_TO: std::sync::OnceLock<(Rendezvous, String)> = std::sync::OnceLock::new();

/// A neighbour died or hangs: this member's streams wait on what will never arrive, and a
/// host wait behind them would not return. Report it (naming the neighbour), publish
/// `abort` so the members that wait at the rendezvous stop too, and end the process
/// (exit 2). Called from a link's failed send or receive and from the NCCL watchdog.
pub fn die(msg: String) {
    if FINISHED.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let me = ABORT_TO.get().map(|(_, n)| n.as_str()).unwrap_or("member");
    eprintln!("ppn-gate: error: {me}: {msg}");
    if let Some((r, n)) = ABORT_TO.get() {
        let _ = r.put_within("abort", &format!("{n}: {msg}"), Duration::from_secs(2));
    }
    std::process::exit(crate::exit::EXIT_ERROR);
}

/// How boundaries between processes travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cross {
    /// TCP between processes, CPU backend: a test transport.
    Ipc,
    /// NCCL send/recv between GPUs, CUDA backend.
    Nccl,
}

impl Cross {
    pub fn name(self) -> &'static str {
        match self {
            Cross::Ipc => "ipc",
            Cross::Nccl => "nccl",
        }
    }

    pub fn parse(s: &str) -> Option<Cross> {
        match s {
            "ipc" => Some(Cross::Ipc),
            "nccl" => Some(Cross::Nccl),
            _ => None,
        }
    }
}

/// The number of members of a multi-process gate from its flags (None: one process).
pub fn world_of(a: &GateArgs) -> Option<usize> {
    a.procs.or(a.world)
}

/// The rank of each of `n` stages: `--ranks` as given (checked), else contiguous groups as
/// even as possible, the earlier ranks taking the extra stage.
pub fn rank_map(n: usize, world: usize, ranks: Option<&str>) -> Result<Vec<usize>> {
    if world < 2 {
        bail!("a multi-process gate needs 2 or more members, got {world} (one process: leave out --procs/--world)");
    }
    if n < world {
        bail!("--procs/--world {world}: {world} members need at least {world} stages, --stages gives {n} (every member holds one or more stages)");
    }
    let map = match ranks {
        None => {
            let (q, r) = (n / world, n % world);
            (0..world)
                .flat_map(|k| std::iter::repeat_n(k, q + usize::from(k < r)))
                .collect()
        }
        Some(s) => {
            let v = crate::runtime::placement::parse_list("--ranks", s)?;
            if v.len() != n {
                bail!("--ranks {s}: {} entries for {n} stages", v.len());
            }
            // Contiguous groups in stage order: each process boundary is one link in and
            // one link out, and stage order is rank order.
            if v[0] != 0
                || v.windows(2).any(|w| w[1] != w[0] && w[1] != w[0] + 1)
                || v[n - 1] != world - 1
            {
                bail!(
                    "--ranks {s}: must start at 0, step by 0 or 1 from stage to stage and end at rank {} (each member holds a contiguous group of stages, in order)",
                    world - 1
                );
            }
            v
        }
    };
    Ok(map)
}

/// The stages rank `rank` holds.
pub fn local_range(map: &[usize], rank: usize) -> Range<usize> {
    let lo = map.iter().position(|&r| r == rank).unwrap_or(map.len());
    let hi = map.iter().rposition(|&r| r == rank).map_or(lo, |h| h + 1);
    lo..hi
}

/// A member as messages name it.
pub fn member_name(map: &[usize], rank: usize) -> String {
    let l = local_range(map, rank);
    if l.len() == 1 {
        format!("rank {rank} (stage {})", l.start)
    } else {
        format!("rank {rank} (stages {}..={})", l.start, l.end - 1)
    }
}

/// The gate's flags as a command line for a member (everything but the multi-process
/// placement of this one process, the receipt path and --quiet, which `launch` sets).
pub fn member_argv(a: &GateArgs) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut kv = |k: &str, val: String| {
        v.push(format!("--{k}"));
        v.push(val);
    };
    kv("backend", a.backend.clone());
    if let Some(m) = &a.model {
        kv("model", m.display().to_string());
    }
    if let Some(x) = a.stages {
        kv("stages", x.to_string());
    }
    if let Some(x) = &a.splits {
        kv("splits", x.clone());
    }
    if let Some(x) = &a.devices {
        kv("devices", x.clone());
    }
    kv("transport", a.transport.clone());
    kv("arms", a.arms.clone());
    kv("window", a.window.to_string());
    kv("batch", a.batch.to_string());
    // `prepare` sets it to the prompt as resolved (a tape's own `prompt_len`, else the flag
    // or its default), so every member walks that prompt and refuses a tape that differs.
    if let Some(x) = a.prompt_len {
        kv("prompt-len", x.to_string());
    }
    kv("gen-len", a.gen_len.to_string());
    kv("seed", a.seed.to_string());
    if let Some(t) = &a.tape {
        kv("tape", t.display().to_string());
    }
    kv("topk", a.topk.to_string());
    for f in &a.faults {
        kv("fault", f.clone());
    }
    kv("cpu-devices", a.cpu_devices.to_string());
    kv("jitter-us", a.jitter_us.to_string());
    if let Some(x) = &a.pdl {
        kv("pdl", x.clone());
    }
    if let Some(x) = &a.graphs {
        kv("graphs", x.clone());
    }
    if let Some(x) = &a.mma {
        kv("mma", x.clone());
    }
    if let Some(x) = &a.cache_dir {
        kv("cache-dir", x.display().to_string());
    }
    if let Some(x) = &a.trace {
        kv("trace", x.display().to_string());
    }
    if let Some(x) = &a.ranks {
        kv("ranks", x.clone());
    }
    kv("peer-timeout", a.peer_timeout.to_string());
    kv("link-host", a.link_host.clone());
    kv("rendezvous-timeout", a.rendezvous_timeout.to_string());
    if let Some(x) = &a.nccl_lib {
        kv("nccl-lib", x.display().to_string());
    }
    if a.no_cache {
        v.push("--no-cache".into());
    }
    v
}

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
    let rdv = Rendezvous::open(addr, rank).map_err(anyhow::Error::msg)?;
    let _ = ABORT_TO.set((rdv.clone(), member_name(&map, rank)));
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
    let cross = Cross::parse(&a.transport).ok_or_else(|| {
        anyhow!(
            "--transport {}: a multi-process gate crosses processes with ipc or nccl",
            a.transport
        )
    })?;
    let rdv_t = Duration::from_secs(a.rendezvous_timeout);
    let peer_t = Duration::from_secs(a.peer_timeout);
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
        link_host: &a.link_host,
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
        resident: crate::cli::gate::stage_resident(
            &p.spec.placement,
            res.first_stage,
            &res.resident,
        ),
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
    let mut rc = crate::cli::gate::receipt_of(p, res, t0, modules0, None)?;
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
    let code = crate::cli::gate::emit(a, &rc)?;
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

/// Each boundary's transport by name: a link between processes (`ipc`, `nccl`) where the
/// rank map puts its two stages in different members, else the in-process transport.
pub fn transport_names(a: &GateArgs, pl: &crate::runtime::Placement) -> Vec<String> {
    let map = world_of(a).and_then(|w| rank_map(pl.n_stages(), w, a.ranks.as_deref()).ok());
    pl.transports
        .iter()
        .enumerate()
        .map(|(b, t)| match &map {
            Some(m) if m[b] != m[b + 1] => a.transport.clone(),
            _ => t.name().to_string(),
        })
        .collect()
}

/// Why fault `f` cannot open in a multi-process gate whose stages sit on ranks `map` (None:
/// it can, in a boundary inside a process or across one).
pub fn fault_cannot_cross(f: crate::runtime::Fault, map: &[usize]) -> Option<String> {
    use crate::runtime::Fault;
    let inner = map.windows(2).any(|w| w[0] == w[1]);
    match f {
        Fault::SharedScratch => Some(
            "every stage would drive stage 0's engine, which lives in another process than the others".into(),
        ),
        Fault::MisplacedCache => Some(
            "it births the last stage's cache on stage 0's device, which another process holds".into(),
        ),
        // A link's buffers are born at full size when the runtime is built (ordered by the
        // load barrier): there is no lazy growth across a process boundary to misorder.
        Fault::SlotFirstUse if !inner => Some(
            "its window is a lazily grown slot, and every boundary here crosses processes, whose buffers are born at full size (put two stages in one process: --ranks)".into(),
        ),
        _ => None,
    }
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

pub use receipt::write_atomic;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_argv_carries_every_gate_flag() {
        use clap::Parser;
        // Every gate flag set away from its default: a member must see the same gate, so a
        // flag `member_argv` forgot would show here as a difference.
        let argv = [
            "ppn-gate",
            "--backend",
            "cpu",
            "--model",
            "m.gguf",
            "--stages",
            "3",
            "--splits",
            "1,2",
            "--devices",
            "0,1,2",
            "--transport",
            "ipc",
            "--arms",
            "eager",
            "--window",
            "5",
            "--batch",
            "2",
            "--prompt-len",
            "3",
            "--gen-len",
            "4",
            "--seed",
            "9",
            "--tape",
            "t.json",
            "--topk",
            "2",
            "--fault",
            "rx-no-wait",
            "--cpu-devices",
            "4",
            "--jitter-us",
            "7",
            "--pdl",
            "off",
            "--graphs",
            "off",
            "--mma",
            "on",
            "--cache-dir",
            "c",
            "--no-cache",
            "--trace",
            "tr.json",
            "--ranks",
            "0,0,1",
            "--peer-timeout",
            "3",
            "--rendezvous-timeout",
            "4",
            "--link-host",
            "10.0.0.1",
            "--nccl-lib",
            "/l",
            "--procs",
            "2",
            "--receipt",
            "r",
            "-q",
        ];
        let a = crate::cli::Cli::try_parse_from(argv).unwrap().gate;
        let again = std::iter::once("ppn-gate".to_string()).chain(member_argv(&a));
        let b = crate::cli::Cli::try_parse_from(again).unwrap().gate;
        // What launch sets per member itself.
        let norm = |mut g: GateArgs| {
            (g.procs, g.receipt, g.quiet) = (None, None, false);
            format!("{g:?}")
        };
        assert_eq!(norm(a), norm(b));
    }

    #[test]
    fn default_map_is_contiguous_and_even() {
        assert_eq!(rank_map(3, 3, None).unwrap(), vec![0, 1, 2]);
        assert_eq!(rank_map(4, 2, None).unwrap(), vec![0, 0, 1, 1]);
        assert_eq!(rank_map(5, 2, None).unwrap(), vec![0, 0, 0, 1, 1]);
        assert_eq!(local_range(&[0, 0, 1, 1], 1), 2..4);
        assert_eq!(member_name(&[0, 0, 1, 1], 0), "rank 0 (stages 0..=1)");
        assert_eq!(member_name(&[0, 1, 2], 2), "rank 2 (stage 2)");
    }

    #[test]
    fn a_bad_map_is_refused_naming_the_value() {
        assert_eq!(rank_map(4, 2, Some("0,1,1,1")).unwrap(), vec![0, 1, 1, 1]);
        for (ranks, want) in [
            ("0,1,0,1", "contiguous"),
            ("1,1,0,0", "must start at 0"),
            ("0,0,2,2", "step by 0 or 1"),
            ("0,0,0", "3 entries for 4 stages"),
            ("0,0,0,0", "end at rank 1"),
            ("0,x,1,1", "not a non-negative integer"),
        ] {
            let e = rank_map(4, 2, Some(ranks)).unwrap_err().to_string();
            assert!(e.contains(want), "{ranks}: {e}");
        }
        assert!(rank_map(2, 3, None)
            .unwrap_err()
            .to_string()
            .contains("at least 3 stages"));
        assert!(rank_map(2, 1, None)
            .unwrap_err()
            .to_string()
            .contains("2 or more"));
    }
}
