//! Placement as pure data: the stage fence, the device of each stage and the transport of
//! each boundary, validated from flags with errors that name the offending value. It
//! round-trips to its CLI spelling (`--stages N --splits c1,.. --devices d0,..`).

use std::fmt;

/// How the hidden state crosses one boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Same device: a device-to-device copy on the TX stream.
    Dtod,
    /// Different devices with peer access: a peer copy on the TX stream.
    Peer,
    /// Bounce through host staging memory (two copies on the TX stream).
    Host,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Dtod => "dtod",
            Transport::Peer => "peer",
            Transport::Host => "host",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--transport`: what the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TransportChoice {
    /// Same device: dtod; across devices: peer where the backend has it, else host bounce.
    #[default]
    Auto,
    /// Host bounce on every boundary (also same-device ones: exercises the path on one GPU).
    Host,
    /// Peer copy across devices; a pair without peer access is an error naming it.
    Peer,
}

impl TransportChoice {
    /// Every in-process choice (`--help` and the parse error list them, with the transports
    /// between processes, `multiproc::Cross::ALL`).
    pub const ALL: [TransportChoice; 3] = [
        TransportChoice::Auto,
        TransportChoice::Host,
        TransportChoice::Peer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TransportChoice::Auto => "auto",
            TransportChoice::Host => "host",
            TransportChoice::Peer => "peer",
        }
    }

    /// An in-process transport by name; anything else (the transports between processes
    /// are `multiproc::Cross`'s, checked before this) names every transport there is.
    pub fn parse(s: &str) -> Result<TransportChoice, PlanError> {
        TransportChoice::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                PlanError(format!(
                    "--transport {s:?}: expected auto, host or peer in one process, or ipc (cpu) or nccl (cuda) between the processes of a multi-process gate"
                ))
            })
    }
}

/// A placement or flag error: exit code 2, message names the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// N+1 entries `[0, c1, .., cN-1, n_layers]`; stage s runs layers `[fence[s], fence[s+1])`.
    pub fence: Vec<usize>,
    pub devices: Vec<usize>,
    pub transports: Vec<Transport>,
}

/// Parse a comma-separated list of unsigned integers, naming the flag and the bad item.
pub fn parse_list(flag: &str, s: &str) -> Result<Vec<usize>, PlanError> {
    s.split(',')
        .map(|p| {
            p.trim().parse::<usize>().map_err(|_| {
                PlanError(format!(
                    "{flag} {s:?}: {:?} is not a non-negative integer",
                    p.trim()
                ))
            })
        })
        .collect()
}

/// The device of each stage, from the flags alone (no model needed: a fault's window and a
/// battery's device needs are judged on it before any model loads). The stage count is
/// `--stages`, else the length of `--devices`, else one more than the cuts; every stage is on
/// device 0 unless `--devices` says otherwise, and every named device must exist.
pub fn stage_devices(
    stages: Option<usize>,
    splits: Option<&[usize]>,
    devices: Option<&[usize]>,
    device_count: usize,
) -> Result<Vec<usize>, PlanError> {
    let n = match (stages, devices) {
        (Some(n), Some(d)) if n != d.len() => {
            return Err(PlanError(format!(
                "--stages {n} but --devices lists {} device(s) ({}): they must agree",
                d.len(),
                join(d)
            )))
        }
        (Some(n), _) => n,
        (None, Some(d)) => d.len(),
        (None, None) => splits.map(|c| c.len() + 1).unwrap_or(1),
    };
    if n == 0 {
        return Err(PlanError("--stages 0: need at least one stage".into()));
    }
    let devices: Vec<usize> = devices.map(|d| d.to_vec()).unwrap_or_else(|| vec![0; n]);
    if let Some(&bad) = devices.iter().find(|&&d| d >= device_count) {
        return Err(PlanError(format!(
            "--devices {}: device {bad} does not exist ({device_count} device(s): 0..{})",
            join(&devices),
            device_count.saturating_sub(1)
        )));
    }
    Ok(devices)
}

/// The transport of each boundary between consecutive stages on `devices` (no model needed:
/// a gate whose `--transport peer` cannot be honoured is refused before any model loads).
pub fn boundary_transports(
    devices: &[usize],
    transport: TransportChoice,
    peer_ok: &dyn Fn(usize, usize) -> bool,
) -> Result<Vec<Transport>, PlanError> {
    devices
        .windows(2)
        .enumerate()
        .map(|(b, w)| {
            let (a, c) = (w[0], w[1]);
            Ok(match transport {
                TransportChoice::Host => Transport::Host,
                _ if a == c => Transport::Dtod,
                TransportChoice::Peer if !peer_ok(a, c) => {
                    return Err(PlanError(format!(
                        "--transport peer: boundary {b} (device {a} -> device {c}) has no peer access; use --transport host or auto"
                    )))
                }
                TransportChoice::Peer => Transport::Peer,
                TransportChoice::Auto if peer_ok(a, c) => Transport::Peer,
                TransportChoice::Auto => Transport::Host,
            })
        })
        .collect()
}

impl Placement {
    /// Validate flags into a placement. `device_count` is the backend's; `peer_ok(a, b)`
    /// says whether a boundary between devices a and b can copy directly.
    pub fn from_flags(
        n_layers: usize,
        stages: Option<usize>,
        splits: Option<&[usize]>,
        devices: Option<&[usize]>,
        transport: TransportChoice,
        device_count: usize,
        peer_ok: &dyn Fn(usize, usize) -> bool,
    ) -> Result<Placement, PlanError> {
        let devices = stage_devices(stages, splits, devices, device_count)?;
        let n = devices.len();
        if n > n_layers {
            return Err(PlanError(format!(
                "--stages {n} exceeds the model's {n_layers} layers"
            )));
        }
        let mut fence = vec![0usize];
        match splits {
            Some(c) => {
                if c.len() != n - 1 {
                    return Err(PlanError(format!(
                        "--splits {}: {} cut(s) for {n} stages, need {}",
                        join(c),
                        c.len(),
                        n - 1
                    )));
                }
                fence.extend_from_slice(c);
            }
            None => fence.extend((1..n).map(|s| s * n_layers / n)),
        }
        fence.push(n_layers);
        for (i, w) in fence.windows(2).enumerate() {
            if w[0] >= w[1] {
                let cuts = &fence[1..fence.len() - 1];
                return Err(PlanError(format!(
                    "--splits {}: cuts must be strictly increasing inside (0, {n_layers}); stage {i} would be [{}, {})",
                    join(cuts),
                    w[0],
                    w[1]
                )));
            }
        }
        let transports = boundary_transports(&devices, transport, peer_ok)?;
        Ok(Placement {
            fence,
            devices,
            transports,
        })
    }

    pub fn n_stages(&self) -> usize {
        self.devices.len()
    }

    pub fn n_layers(&self) -> usize {
        *self.fence.last().unwrap_or(&0)
    }

    pub fn layers(&self, s: usize) -> std::ops::Range<usize> {
        self.fence[s]..self.fence[s + 1]
    }

    /// The stage that owns layer `il`.
    pub fn stage_of(&self, il: usize) -> usize {
        self.fence[1..]
            .iter()
            .position(|&end| il < end)
            .unwrap_or(self.n_stages() - 1)
    }

    /// One stage holding every layer, on `dev` (the gate's reference placement).
    pub fn single(n_layers: usize, dev: usize) -> Placement {
        Placement {
            fence: vec![0, n_layers],
            devices: vec![dev],
            transports: vec![],
        }
    }

    /// The CLI spelling that rebuilds this placement.
    pub fn to_flags(&self) -> String {
        let cuts = &self.fence[1..self.fence.len() - 1];
        let mut s = format!(
            "--stages {} --devices {}",
            self.n_stages(),
            join(&self.devices)
        );
        if !cuts.is_empty() {
            s.push_str(&format!(" --splits {}", join(cuts)));
        }
        // The transport is spelled whenever `auto` could rebuild something else. Every
        // boundary host: `--transport host` (what it asked for; where `auto` chose it, for
        // want of peer access on every boundary, host rebuilds the same). Any peer boundary:
        // `--transport peer`, so a rebuild on a machine without that peer access is refused
        // with the pair named, never silently bounced through host. A mix of host and dtod
        // boundaries can only come from `auto` (host makes every boundary host).
        let t = &self.transports;
        if !t.is_empty() && t.iter().all(|x| *x == Transport::Host) {
            s.push_str(" --transport host");
        } else if t.contains(&Transport::Peer) {
            s.push_str(" --transport peer");
        }
        s
    }
}

/// `0,1,2`: a list as its flag spells it.
pub fn join(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(
        n_layers: usize,
        st: Option<usize>,
        sp: Option<&[usize]>,
        dv: Option<&[usize]>,
    ) -> Result<Placement, PlanError> {
        Placement::from_flags(n_layers, st, sp, dv, TransportChoice::Auto, 4, &|a, b| {
            a == b
        })
    }

    #[test]
    fn even_split_by_default() {
        let p = place(30, Some(4), None, None).unwrap();
        assert_eq!(p.fence, vec![0, 7, 15, 22, 30]);
        assert_eq!(p.devices, vec![0, 0, 0, 0]);
        assert_eq!(p.transports, vec![Transport::Dtod; 3]);
        assert_eq!(p.stage_of(6), 0);
        assert_eq!(p.stage_of(7), 1);
        assert_eq!(p.stage_of(29), 3);
    }

    #[test]
    fn cross_device_without_peer_bounces_via_host() {
        let p = place(8, None, None, Some(&[0, 1, 1])).unwrap();
        assert_eq!(p.transports, vec![Transport::Host, Transport::Dtod]);
        let e = Placement::from_flags(
            8,
            None,
            None,
            Some(&[0, 1]),
            TransportChoice::Peer,
            4,
            &|a, b| a == b,
        )
        .unwrap_err();
        assert!(e.0.contains("device 0 -> device 1"), "{e}");
    }

    #[test]
    fn rejects_each_bad_flag_naming_the_value() {
        let cases: Vec<(Result<Placement, PlanError>, &str)> = vec![
            (place(30, Some(3), Some(&[10, 5]), None), "10,5"),
            (
                place(30, Some(2), Some(&[0]), None),
                "stage 0 would be [0, 0)",
            ),
            (place(30, Some(2), Some(&[30]), None), "[30, 30)"),
            (
                place(30, Some(3), Some(&[10]), None),
                "1 cut(s) for 3 stages",
            ),
            (place(4, Some(5), None, None), "--stages 5 exceeds"),
            (
                place(30, None, None, Some(&[0, 7])),
                "device 7 does not exist",
            ),
            (
                place(30, Some(4), None, Some(&[0, 1])),
                "--stages 4 but --devices lists 2",
            ),
            (place(30, Some(0), None, None), "--stages 0"),
        ];
        for (r, want) in cases {
            let e = r.expect_err(want);
            assert!(
                e.0.contains(want),
                "error {:?} should contain {:?}",
                e.0,
                want
            );
        }
        assert!(parse_list("--devices", "0,x")
            .unwrap_err()
            .0
            .contains("\"x\""));
    }

    #[test]
    fn spelling_round_trips() {
        let p = place(30, Some(3), Some(&[1, 29]), Some(&[0, 2, 1])).unwrap();
        let f = p.to_flags();
        // No peer access here: auto bounced both boundaries through host.
        assert_eq!(
            f,
            "--stages 3 --devices 0,2,1 --splits 1,29 --transport host"
        );
        let q = place(
            30,
            Some(3),
            Some(&parse_list("--splits", "1,29").unwrap()),
            Some(&parse_list("--devices", "0,2,1").unwrap()),
        )
        .unwrap();
        assert_eq!(p, q);
    }

    #[test]
    fn a_forced_host_bounce_on_one_device_is_spelled_and_rebuilds() {
        let host = |choice| {
            Placement::from_flags(30, Some(2), None, None, choice, 4, &|a, b| a == b).unwrap()
        };
        let p = host(TransportChoice::Host);
        assert_eq!(p.transports, vec![Transport::Host]);
        assert_eq!(
            p.to_flags(),
            "--stages 2 --devices 0,0 --splits 15 --transport host"
        );
        // Auto on one device copies device to device: nothing to spell.
        assert_eq!(
            host(TransportChoice::Auto).to_flags(),
            "--stages 2 --devices 0,0 --splits 15"
        );
    }

    /// Across two devices with peer access, `--transport host` and `auto` (peer) must spell
    /// differently, and each spelling must rebuild its own placement: a receipt's flags
    /// reproduce the run. (Found on two H200s: the host-bounce receipts' flags lacked it.)
    #[test]
    fn cross_device_host_and_peer_are_spelled_and_rebuild() {
        let mk = |choice, dv: &[usize]| {
            Placement::from_flags(30, None, None, Some(dv), choice, 4, &|_, _| true).unwrap()
        };
        for (choice, dv, want) in [
            (TransportChoice::Host, &[0, 1][..], " --transport host"),
            (TransportChoice::Auto, &[0, 1][..], " --transport peer"),
            (
                TransportChoice::Peer,
                &[0, 0, 1, 1][..],
                " --transport peer",
            ),
            (
                TransportChoice::Host,
                &[0, 0, 1, 1][..],
                " --transport host",
            ),
        ] {
            let p = mk(choice, dv);
            let f = p.to_flags();
            assert!(f.ends_with(want), "{choice:?} {dv:?}: {f}");
            let back = match want {
                " --transport host" => TransportChoice::Host,
                _ => TransportChoice::Peer,
            };
            assert_eq!(mk(back, dv), p, "{f}");
        }
        // Mixed dtod and host only comes from auto without peer access: nothing to spell.
        let p = Placement::from_flags(
            30,
            None,
            None,
            Some(&[0, 0, 1]),
            TransportChoice::Auto,
            4,
            &|a, b| a == b,
        )
        .unwrap();
        assert_eq!(p.transports, vec![Transport::Dtod, Transport::Host]);
        assert_eq!(p.to_flags(), "--stages 3 --devices 0,0,1 --splits 10,20");
    }
}
