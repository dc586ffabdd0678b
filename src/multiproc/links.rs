//! The links of a multi-process member, built from what the backend offers: the ipc link
//! (`backend::ipc`, CPU) and the NCCL communicator (`backend::cuda::nccl`, CUDA), met
//! through the rendezvous (addresses, unique ids) and watched by heartbeats. A link's
//! failure ends the member (`die`), naming the neighbour.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::rendezvous::Rendezvous;
use super::{local_range, member_name};
use crate::backend::any::AnyBackend;
use crate::backend::cuda::nccl::{self, UniqueId};
use crate::backend::ipc::{watchdog, IpcLink};
use crate::backend::Link;

/// Where and how a member meets its neighbours.
pub struct Meet<'a> {
    pub rdv: &'a Rendezvous,
    /// Each stage's rank.
    pub map: &'a [usize],
    pub rank: usize,
    /// `--link-host`: the address this member's link listeners take.
    pub link_host: &'a str,
    /// `--rendezvous-timeout`, `--peer-timeout`.
    pub rdv_t: Duration,
    pub peer_t: Duration,
}

/// This member's ipc links: the RX side listens on `--link-host` and publishes its address
/// as `link/<b>`, the TX side connects. A link's failure ends the member (`die`), naming
/// the neighbour.
pub fn ipc_links(m: &Meet) -> Result<(Option<Link>, Option<Link>)> {
    let (rdv, map, rank, rdv_t, peer_t) = (m.rdv, m.map, m.rank, m.rdv_t, m.peer_t);
    let n = map.len();
    let local = local_range(map, rank);
    let name = |r: usize| member_name(map, r);
    let listener = if local.start > 0 {
        let l = TcpListener::bind((m.link_host, 0))
            .with_context(|| format!("--link-host {}: cannot listen there", m.link_host))?;
        let b = local.start - 1;
        let addr = format!("{}:{}", m.link_host, l.local_addr()?.port());
        rdv.put(&format!("link/{b}"), &addr)
            .map_err(anyhow::Error::msg)?;
        Some((l, b))
    } else {
        None
    };
    let send = if local.end < n {
        let b = local.end - 1;
        let peer = name(map[local.end]);
        let addr = rdv
            .get(&format!("link/{b}"), rdv_t, &peer)
            .map_err(anyhow::Error::msg)?;
        let l = IpcLink::connect(&addr, b, peer, peer_t).map_err(anyhow::Error::msg)?;
        Some(Link::Ipc(Arc::new(l.fatal(super::die))))
    } else {
        None
    };
    let recv = match listener {
        Some((l, b)) => {
            let peer = name(map[b]);
            let link = IpcLink::accept(&l, b, peer, rdv_t).map_err(anyhow::Error::msg)?;
            // The handshake may wait for the whole rendezvous; data waits --peer-timeout.
            Some(Link::Ipc(Arc::new(
                link.with_timeout(peer_t)
                    .map_err(anyhow::Error::msg)?
                    .fatal(super::die),
            )))
        }
        None => None,
    };
    Ok((recv, send))
}

/// This member's NCCL links: for the boundary into its first stage (it is rank 1 of that
/// boundary's communicator) and out of its last (rank 0, which makes the unique id and
/// publishes it at the rendezvous). Boundaries are set up in ascending order on every
/// member, so the blocking ncclCommInitRank calls pair up without a cycle. Each link also
/// gets a heartbeat watchdog (`ipc::watchdog`): a member that dies or hangs leaves NCCL ops
/// that never complete, and the watchdog turns that into an error naming it. `devices`:
/// each stage's device; `nccl_lib`: `--nccl-lib`.
pub fn nccl_links(
    m: &Meet,
    be: &AnyBackend,
    devices: &[usize],
    nccl_lib: Option<&Path>,
) -> Result<(Option<Link>, Option<Link>)> {
    let AnyBackend::Cuda(be) = be else {
        bail!("--transport nccl: needs the cuda backend");
    };
    let (rdv, map, rank, rdv_t, peer_t) = (m.rdv, m.map, m.rank, m.rdv_t, m.peer_t);
    let lib = nccl::nccl(nccl_lib).map_err(|e| anyhow!(e))?;
    errln!(
        "ppn-gate: rank {rank}: NCCL {} from {}",
        lib.version_text(),
        lib.path
    );
    let n = map.len();
    let local = local_range(map, rank);
    let mut recv = None;
    let mut send = None;
    // Ascending boundary order: the one into this member first, then the one out of it.
    if local.start > 0 {
        let b = local.start - 1;
        let peer = member_name(map, map[b]);
        watch_rx(m.link_host, rdv, b, &peer, rdv_t, peer_t)?;
        let id = share_id(rdv, b, None, &peer, rdv_t)?;
        let dev = devices[local.start];
        recv = Some(nccl::link(be, &lib, id, (1, 2), dev, b, peer)?);
    }
    if local.end < n {
        let b = local.end - 1;
        let peer = member_name(map, map[local.end]);
        watch_tx(rdv, b, &peer, rdv_t, peer_t)?;
        let id = share_id(rdv, b, Some(&|| lib.unique_id()), &peer, rdv_t)?;
        let dev = devices[local.end - 1];
        send = Some(nccl::link(be, &lib, id, (0, 2), dev, b, peer)?);
    }
    Ok((recv, send))
}

/// Boundary `b`'s unique id through the rendezvous: the TX member makes it (`make`) and
/// publishes it as `nccl-id/<b>` in hex; the RX member (`make` None) waits for it from `peer`.
pub fn share_id(
    rdv: &Rendezvous,
    b: usize,
    make: Option<&dyn Fn() -> std::result::Result<UniqueId, String>>,
    peer: &str,
    rdv_t: Duration,
) -> Result<UniqueId> {
    let key = format!("nccl-id/{b}");
    match make {
        Some(make) => {
            let id = make().map_err(|e| anyhow!("boundary {b}: {e}"))?;
            rdv.put(&key, &nccl::id_to_hex(&id))
                .map_err(|e| anyhow!(e))?;
            Ok(id)
        }
        None => {
            let hex = rdv.get(&key, rdv_t, peer).map_err(|e| anyhow!(e))?;
            nccl::id_from_hex(&hex).map_err(|e| anyhow!("boundary {b}: from {peer}: {e}"))
        }
    }
}

/// The RX end of boundary `b`'s heartbeat (`watchdog`): listen, publish the address as
/// `watch/<b>`, accept the TX member. A failure ends this process (exit 2), naming `peer`.
pub fn watch_rx(
    host: &str,
    rdv: &Rendezvous,
    b: usize,
    peer: &str,
    rdv_t: Duration,
    peer_t: Duration,
) -> Result<()> {
    let l = TcpListener::bind((host, 0)).map_err(|e| {
        anyhow!("boundary {b} watchdog: --link-host {host}: cannot listen there: {e}")
    })?;
    let addr = format!("{host}:{}", l.local_addr()?.port());
    rdv.put(&format!("watch/{b}"), &addr)
        .map_err(anyhow::Error::msg)?;
    let link = IpcLink::accept(&l, b, peer.to_string(), rdv_t).map_err(anyhow::Error::msg)?;
    // The socket's own timeouts too (accept set them to the rendezvous timeout): the
    // watchdog blocks in a read, and must give up after --peer-timeout, not 300 s.
    let link = link.with_timeout(peer_t).map_err(anyhow::Error::msg)?;
    watchdog(link, &super::FINISHED, super::die).map_err(anyhow::Error::msg)
}

/// The TX end of boundary `b`'s heartbeat (see `watch_rx`).
pub fn watch_tx(
    rdv: &Rendezvous,
    b: usize,
    peer: &str,
    rdv_t: Duration,
    peer_t: Duration,
) -> Result<()> {
    let addr = rdv
        .get(&format!("watch/{b}"), rdv_t, peer)
        .map_err(anyhow::Error::msg)?;
    let link = IpcLink::connect(&addr, b, peer.to_string(), peer_t).map_err(anyhow::Error::msg)?;
    watchdog(link, &super::FINISHED, super::die).map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unique_id_travels_from_the_tx_member_to_the_rx_member() {
        let d = tempfile::tempdir().unwrap();
        let addr = d.path().to_str().unwrap().to_string();
        let t = Duration::from_secs(5);
        let rx = std::thread::spawn({
            let addr = addr.clone();
            move || {
                let r = Rendezvous::open(&addr, 1).unwrap();
                share_id(&r, 4, None, "rank 0 (stage 4)", t).unwrap()
            }
        });
        let mut id = UniqueId { internal: [0; 128] };
        id.internal[0] = 7;
        id.internal[127] = -3;
        let tx = Rendezvous::open(&addr, 0).unwrap();
        let made = share_id(&tx, 4, Some(&|| Ok(id)), "rank 1 (stage 5)", t).unwrap();
        assert_eq!(rx.join().unwrap().internal, made.internal);
        // A damaged id is an error naming the boundary and the member, not a comm that hangs.
        tx.put("nccl-id/5", "00ff").unwrap();
        let e = share_id(&tx, 5, None, "rank 0 (stage 5)", t)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("boundary 5: from rank 0 (stage 5)") && e.contains("256 hex"),
            "{e}"
        );
        // The TX member's failure to make one names the boundary.
        let e = share_id(
            &tx,
            6,
            Some(&|| Err("ncclGetUniqueId: ncclSystemError".into())),
            "x",
            t,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("boundary 6: ncclGetUniqueId"), "{e}");
    }
}
