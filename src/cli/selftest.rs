//! Where each fault's window opens on a backend (`recipe`): what a gate's refusal of a
//! fault it cannot open points the user to.

use super::gate::AnyBackend;
use crate::runtime::Fault;

/// Where a fault's window opens on a backend, or why no placement there opens it.
#[derive(Clone, Debug, PartialEq)]
pub enum Recipe {
    /// Gate flags that open it. `heavy`: on CUDA the window needs a GPU-bound stage that
    /// lags the stage before it, which the small built-in model never keeps busy long
    /// enough (those faults PASS 20/20 on it).
    Opens {
        flags: Vec<String>,
        heavy: bool,
    },
    Closed(String),
}

/// The placement each fault's window opens in. CPU: the placements `tests/gate.rs` proves
/// FAIL on the built-in model. CUDA: the placements measured on the H200 (20 runs each:
/// `receipts/cuda-final/faults-summary.txt`; across two GPUs `receipts/cuda-multi-2gpu`),
/// where several races only open under `--jitter-us`, the GPU's natural timing rarely
/// losing them. `devices`: how many the backend has.
pub fn recipe(f: Fault, cuda: bool, devices: usize) -> Recipe {
    let opens = |flags: &str, heavy: bool| Recipe::Opens {
        flags: flags.split_whitespace().map(String::from).collect(),
        heavy,
    };
    let spread4 = spread(4, devices);
    match (f, cuda) {
        (Fault::MisplacedCache, _) if devices >= 2 => opens("--stages 2 --devices 0,1", false),
        (Fault::MisplacedCache, _) => Recipe::Closed(format!(
            "one device, nothing to misplace (this backend has {devices})"
        )),
        (Fault::RxNoWait | Fault::NoExitPublish, false) => opens("--stages 2", false),
        (Fault::NoWarGuard, false) => {
            opens("--stages 2 --splits 1 --window 8 --arms pipelined", false)
        }
        (Fault::SingleSlot, false) => {
            opens("--stages 2 --splits 1 --window 4 --arms pipelined", false)
        }
        (Fault::SharedScratch, false) => {
            opens("--stages 4 --arms pipelined --jitter-us 200", false)
        }
        (Fault::SlotFirstUse, false) => {
            opens("--stages 2 --splits 1 --arms pipelined,batched", false)
        }
        (Fault::NoReversePublish, false) => opens("--stages 2 --jitter-us 400 --gen-len 24", false),
        (Fault::NoLoadBarrier, false) => Recipe::Closed(
            "the cpu backend's engines read the model's one host copy: there is no load to race".into(),
        ),
        // Across GPUs the boundary races run over peer copies (gpu-multi's placement:
        // stages in contiguous blocks over the devices).
        (Fault::RxNoWait | Fault::NoExitPublish, true) if devices >= 2 => opens(
            &format!("--stages 4 --devices {spread4} --window 4 --jitter-us 300"),
            false,
        ),
        (Fault::RxNoWait, true) => opens("--stages 4 --window 4", false),
        (Fault::SharedScratch | Fault::NoExitPublish | Fault::NoReversePublish, true) => {
            opens("--stages 4 --window 4 --jitter-us 300", false)
        }
        (Fault::NoWarGuard | Fault::SingleSlot | Fault::SlotFirstUse, true) => {
            opens("--stages 2 --splits 1 --window 8 --arms pipelined", true)
        }
        (Fault::NoLoadBarrier, true) => Recipe::Closed(
            "a finding, not a control: it never fails on CUDA (40/40 runs PASS on the H200; pageable uploads return only once the driver has staged the bytes), see README".into(),
        ),
    }
}

/// `n` stages in contiguous blocks over `g` devices (stage s on device s*g/n).
fn spread(n: usize, g: usize) -> String {
    let d: Vec<usize> = (0..n).map(|s| s * g.max(1) / n).collect();
    crate::runtime::placement::join(&d)
}

/// The end of a gate's refusal of `f`: the placement that opens it on `be`, or why none does.
pub fn where_it_opens(f: Fault, be: &AnyBackend) -> String {
    match recipe(f, matches!(be, AnyBackend::Cuda(_)), be.device_count()) {
        Recipe::Opens { flags, heavy } => format!(
            "it opens with {} (a placement that opens it on this backend{})",
            flags.join(" "),
            if heavy {
                ", on a model whose layers keep the GPU busy"
            } else {
                ""
            }
        ),
        Recipe::Closed(why) => format!("no placement opens it on this backend: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, GateArgs};
    use crate::runtime::fault::Site;
    use anyhow::{anyhow, Result};
    use clap::Parser;

    /// Gate flags through the CLI's own parser (the values a user would type).
    fn parse_gate(argv: &[String]) -> Result<GateArgs> {
        let cli =
            Cli::try_parse_from(std::iter::once("ppn-gate").chain(argv.iter().map(|s| s.as_str())))
                .map_err(|e| anyhow!("gate flags {argv:?}: {}", e.to_string().trim()))?;
        Ok(cli.gate)
    }

    /// Every recipe that opens passes the gate's own window check on that backend, and the
    /// ones that do not open say why: the selftest never plans a run the gate would refuse.
    #[test]
    fn every_recipe_opens_where_the_gate_checks_it() {
        for cuda in [false, true] {
            for g in [1, 2, 3, 4, 8] {
                for f in Fault::ALL {
                    match recipe(f, cuda, g) {
                        Recipe::Opens { flags, .. } => {
                            let mut argv = vec!["--cpu-devices".to_string(), g.to_string()];
                            argv.extend(flags.iter().cloned());
                            let a = parse_gate(&argv).unwrap();
                            let list = |v: &Option<String>| {
                                v.as_deref()
                                    .map(|s| crate::runtime::placement::parse_list("", s).unwrap())
                            };
                            let devices = crate::runtime::placement::stage_devices(
                                a.stages,
                                list(&a.splits).as_deref(),
                                list(&a.devices).as_deref(),
                                g,
                            )
                            .unwrap_or_else(|e| panic!("{f} cuda={cuda} g={g}: {e}"));
                            let eager_only = a.arms == "eager";
                            let site = Site {
                                devices: &devices,
                                in_flight: if eager_only { 1 } else { a.window },
                                uploads_weights: cuda,
                            };
                            assert_eq!(f.cannot_open(&site), None, "{f} cuda={cuda} g={g}");
                        }
                        Recipe::Closed(why) => {
                            assert!(!why.is_empty());
                            // Only these cannot open: one device to misplace nothing on,
                            // and the load race (CPU: nothing loads; CUDA: never fails).
                            assert!(
                                f == Fault::NoLoadBarrier || (f == Fault::MisplacedCache && g == 1),
                                "{f} cuda={cuda} g={g}: {why}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn spread_places_stages_in_contiguous_blocks() {
        assert_eq!(spread(4, 2), "0,0,1,1");
        assert_eq!(spread(4, 8), "0,2,4,6");
        assert_eq!(spread(4, 3), "0,0,1,2");
    }
}
