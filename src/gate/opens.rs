//! Where each fault's window opens on a backend (the placement `ppn-gate selftest` runs it
//! in), or why none there does: what a gate that refuses a `--fault` names as its way out.

use crate::backend::any::AnyBackend;
use crate::runtime::Fault;

/// Where a fault's window opens on a backend, or why no placement there opens it.
#[derive(Clone, Debug, PartialEq)]
pub enum Recipe {
    /// Gate flags that open it.
    Opens {
        flags: Vec<String>,
    },
    Closed(String),
}

/// The placement each fault's window opens in. CPU: the placements `tests/gate.rs` proves
/// FAIL on the built-in model. CUDA: the placements measured on the H200 (20 runs each:
/// `receipts/faults-cuda/faults-x20-1gpu.txt`; across two GPUs `receipts/faults-cuda/multi-2gpu-smol-summary.txt`),
/// some under `--jitter-us` (chosen when the GPU's own timing rarely lost those races; since
/// the CUDA backend holds streams for a fault as the CPU's does, every one of them FAILs on
/// the built-in model: `receipts/faults-cuda/forced-holds/`). `devices`: how many the
/// backend has.
pub fn recipe(f: Fault, cuda: bool, devices: usize) -> Recipe {
    let opens = |flags: &str| Recipe::Opens {
        flags: flags.split_whitespace().map(String::from).collect(),
    };
    let spread4 = spread(4, devices);
    match (f, cuda) {
        (Fault::MisplacedCache, _) if devices >= 2 => opens("--stages 2 --devices 0,1"),
        (Fault::MisplacedCache, _) => Recipe::Closed(format!(
            "one device, nothing to misplace (this backend has {devices})"
        )),
        (Fault::RxNoWait | Fault::NoExitPublish, false) => opens("--stages 2"),
        (Fault::NoWarGuard, false) => {
            opens("--stages 2 --splits 1 --window 8 --arms pipelined")
        }
        (Fault::SingleSlot, false) => {
            opens("--stages 2 --splits 1 --window 4 --arms pipelined")
        }
        (Fault::SharedScratch, false) => {
            opens("--stages 4 --arms pipelined --jitter-us 200")
        }
        (Fault::SlotFirstUse, false) => {
            opens("--stages 2 --splits 1 --arms pipelined,batched")
        }
        (Fault::NoReversePublish, false) => opens("--stages 2 --jitter-us 400 --gen-len 24"),
        // Multi-row laws: a prime of 8-row chunks (the prompt's rows read their siblings'
        // slots), and verify rounds whose rollback the fault skips. The same placements on
        // CUDA, with 64-row chunks there so the one launch holds many racing rows.
        (Fault::ChunkKvOrder, false) => {
            opens("--stages 2 --arms prime --chunk 8 --repeat 1")
        }
        (Fault::ChunkKvOrder, true) => opens(
            "--stages 2 --arms prime --chunk 64 --prompt-len 64 --gen-len 4 --repeat 2"),
        (Fault::NoRollback, _) => opens("--stages 2 --arms verify"),
        (Fault::NoLoadBarrier, false) => Recipe::Closed(
            "the cpu backend's engines read the model's one host copy: there is no load to race".into(),
        ),
        // Across GPUs the boundary races run over peer copies, stages in contiguous blocks
        // over the devices (as measured on two H200s).
        (Fault::RxNoWait | Fault::NoExitPublish, true) if devices >= 2 => opens(
            &format!("--stages 4 --devices {spread4} --window 4 --jitter-us 300")),
        (Fault::RxNoWait, true) => opens("--stages 4 --window 4"),
        (Fault::SharedScratch | Fault::NoExitPublish | Fault::NoReversePublish, true) => {
            opens("--stages 4 --window 4 --jitter-us 300")
        }
        (Fault::NoWarGuard | Fault::SingleSlot | Fault::SlotFirstUse, true) => {
            opens("--stages 2 --splits 1 --window 8 --arms pipelined")
        }
        (Fault::MmaRowOrder, false) => Recipe::Closed(
            "it plants in the tensor-core matvec, which only the cuda backend has".into(),
        ),
        // B = 8 rows share every launch: the planted hi/lo swap reorders all of them. On a
        // model without a matrix the path takes it cannot plant: `selftest` closes the row
        // there (`mma_closed`).
        (Fault::MmaRowOrder, true) => opens("--mma on --stages 2 --arms batched --batch 8"),
        // The serve arm with more requests than cache rows (reuse) on both backends; the
        // row-count plant on the FFMA matvec of either (CUDA: --mma off, where every matrix
        // takes it).
        (Fault::StaleCache, _) => opens(
            "--stages 2 --arms serve --requests 16 --max-rows 4 --prefill-chunk 2"),
        (Fault::RowCountOrder, false) => opens("--stages 2 --arms serve --requests 8"),
        (Fault::RowCountOrder, true) => {
            opens("--mma off --stages 2 --arms serve --requests 8")
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
        Recipe::Opens { flags } => format!(
            "it opens with {} (the placement `ppn-gate selftest` runs it in on this backend)",
            flags.join(" ")
        ),
        Recipe::Closed(why) => format!("no placement opens it on this backend: {why}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn spread_places_stages_in_contiguous_blocks() {
        use super::spread;
        assert_eq!(spread(4, 2), "0,0,1,1");
        assert_eq!(spread(4, 8), "0,2,4,6");
        assert_eq!(spread(4, 3), "0,0,1,2");
    }
}
