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
//! - This module: the rank map and the links (`links.rs`) from what the backend offers; the
//!   member's part of a gate and `--procs W`'s launch are the gate layer's (`gate::member`,
//!   `gate::launch`).

pub mod links;
pub mod rendezvous;

use std::ops::Range;
use std::time::Duration;

use anyhow::{bail, Result};

use rendezvous::Rendezvous;

/// Set once this member's part of the gate has run: from then on a neighbour closing its
/// connections is its orderly exit, not a death (`ipc::watchdog`).
pub static FINISHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This member's rendezvous and name, for `die` (set when the member starts: `abort_to`).
static ABORT_TO: std::sync::OnceLock<(Rendezvous, String)> = std::sync::OnceLock::new();

/// Where `die` publishes `abort`, and the name it gives this member (set once, when the
/// member starts; later calls are ignored).
pub fn abort_to(rdv: Rendezvous, name: String) {
    let _ = ABORT_TO.set((rdv, name));
}

/// A neighbour died or hangs: this member's streams wait on what will never arrive, and a
/// host wait behind them would not return. Report it (naming the neighbour), publish
/// `abort` so the members that wait at the rendezvous stop too, and end the process
/// (exit 2). Called from a link's failed send or receive and from the NCCL watchdog.
pub fn die(msg: String) {
    if FINISHED.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let me = ABORT_TO.get().map(|(_, n)| n.as_str()).unwrap_or("member");
    errln!("ppn-gate: error: {me}: {msg}");
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
    /// Every transport between processes (`--help` lists them).
    pub const ALL: [Cross; 2] = [Cross::Ipc, Cross::Nccl];

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

#[cfg(test)]
mod tests {
    use super::*;

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
