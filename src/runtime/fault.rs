//! Fault flags: each breaks exactly one law of the runtime on purpose (an ordering law, or
//! the placement law for `misplaced-cache`), so the gate can prove it fails when that law is
//! broken (a gate that cannot fail proves nothing).

use super::placement::PlanError;

/// What a gate gives a fault to open in, known from its flags before any model loads.
#[derive(Clone, Copy, Debug)]
pub struct Site<'a> {
    /// Each stage's device.
    pub devices: &'a [usize],
    /// The most steps any of the gate's arms keeps in flight: eager reads every step back
    /// before issuing the next (1); pipelined and batched keep `--window`.
    pub in_flight: usize,
    /// Whether the backend's engines upload weights (cuda) rather than reading the model's
    /// one host copy (cpu).
    pub uploads_weights: bool,
    /// Whether an arm walks several positions of one sequence in one step (prime with a
    /// chunk of 2+ rows, verify's prompt of 2+ or a round with a draft, serve prefilling 2+
    /// rows of one request).
    pub multi_row: bool,
    /// Whether such a step's rows after the first are all checked: a prime chunk, verify's
    /// prompt chunk, a serve prefill chunk (a verify round's are only where a draft is
    /// accepted, which the model decides).
    pub seq_rows_checked: bool,
    /// Whether an arm rolls caches back (verify, in a round with a draft).
    pub rollback: bool,
    /// Whether an arm launches several sequences' rows per step (batched with 2+ rows, serve
    /// where a step carries 2+ rows).
    pub batched: bool,
    /// Whether the engines run the tensor-core Q4_K matvec (`--mma on`, cuda).
    pub mma: bool,
    /// Whether every matvec runs on the FFMA (non-tensor-core) kernels whatever the model:
    /// the cpu backend, or cuda with `--mma off` (auto decides per model when it loads).
    pub ffma: bool,
    /// Whether an arm hands a finished sequence's cache row to a later one (serve, with
    /// more requests than cache rows).
    pub reuse: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Boundary RX does not wait for the slot's TX event (read-after-write).
    RxNoWait,
    /// Boundary TX does not wait for the slot's previous RX (write-after-read guard off).
    NoWarGuard,
    /// Both slot indices alias one buffer while the events stay per slot: the double buffer
    /// is a single buffer whose reuse nothing guards.
    SingleSlot,
    /// Every stage drives stage 0's engine, so all stage streams share one engine's scratch.
    SharedScratch,
    /// A slot grown lazily (zero-filled on the RX stream) is written by TX without waiting
    /// for the zero-fill (slot first-use ordering off).
    SlotFirstUse,
    /// The reader of a step's logits (caller stream, or readback stream) does not wait for
    /// the producing stages (exit publication off).
    NoExitPublish,
    /// Stage streams do not wait for the caller's input upload at walk entry (reverse
    /// publication off).
    NoReversePublish,
    /// The seed's load structure without its barrier: weights, engine scratch and KV caches
    /// are loaded and zero-filled on the caller's (loader) stream instead of each stage's
    /// own, and the stages start without the load barrier.
    NoLoadBarrier,
    /// The last stage's KV cache is born on stage 0's device instead of its own (placement
    /// law: a stage's memory lives on its stage's device). Opens only where the first and
    /// last stages sit on different devices; the gate's residency check catches it.
    MisplacedCache,
    /// The rows of a multi-row step of one sequence store their keys/values in the same
    /// pass that attends, so a row can read a sibling's slot before the sibling stored it
    /// (the multi-row law: every row's key/value stored before any row's attention reads).
    ChunkKvOrder,
    /// A verify round's rollback skips the last stage: it keeps the rejected positions in
    /// its cache, and its next rows store and attend past them.
    NoRollback,
    /// `--mma on`: the tensor-core matvec's order depends on how many rows its launch has
    /// (mma_prep, and the fused decode kernel that does its work, swaps each super-block's
    /// hi and lo fragments when a launch has more than one row, so the mma chain adds lo
    /// before hi), as a batch-dependent kernel would.
    MmaRowOrder,
    /// A finished request's cache row is handed to the next request without its length
    /// reset: the new request continues after the previous one's keys (its positions and
    /// attention window include them), as an engine that reuses a sequence id without
    /// clearing it does.
    StaleCache,
    /// A step of more than one row takes another reduction order in the non-tensor-core
    /// matvec, as engines that switch kernels by batch size do: a row's result depends on
    /// how many rows share its step. The CPU engine's output head dequantizes the weight
    /// row and takes one f32 dot; the CUDA FFMA kernels (matvec.cu and mvq.cu, every
    /// matvec) add each dot's warp partials pairwise first (plant_pair).
    RowCountOrder,
}

/// The longest a fault's forced schedule holds a stream (`Backend::hold_until_next`): a
/// boundary fault holds one side of the race until the other side's next op has landed, so
/// the stale read it allows happens every run (on both backends: the CPU's stream workers
/// block, a CUDA stream runs `hold_wait`). The hold's end is that op's completion; the
/// limit only ends one whose op is never issued while it holds (a walk's last steps, a
/// slot's growth), so it bounds the cost, and a step that reaches it merely loses its
/// chance to open.
pub const FAULT_HOLD: std::time::Duration = std::time::Duration::from_millis(200);

impl Fault {
    pub const ALL: [Fault; 14] = [
        Fault::RxNoWait,
        Fault::NoWarGuard,
        Fault::SingleSlot,
        Fault::SharedScratch,
        Fault::SlotFirstUse,
        Fault::NoExitPublish,
        Fault::NoReversePublish,
        Fault::NoLoadBarrier,
        Fault::MisplacedCache,
        Fault::ChunkKvOrder,
        Fault::NoRollback,
        Fault::MmaRowOrder,
        Fault::StaleCache,
        Fault::RowCountOrder,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::RxNoWait => "rx-no-wait",
            Fault::NoWarGuard => "no-war-guard",
            Fault::SingleSlot => "single-slot",
            Fault::SharedScratch => "shared-scratch",
            Fault::SlotFirstUse => "slot-first-use",
            Fault::NoExitPublish => "no-exit-publish",
            Fault::NoReversePublish => "no-reverse-publish",
            Fault::NoLoadBarrier => "no-load-barrier",
            Fault::MisplacedCache => "misplaced-cache",
            Fault::ChunkKvOrder => "chunk-kv-order",
            Fault::NoRollback => "no-rollback",
            Fault::MmaRowOrder => "mma-row-order",
            Fault::StaleCache => "stale-cache",
            Fault::RowCountOrder => "row-count-order",
        }
    }

    /// The law the fault breaks, in one line (`--help`, the selftest table).
    pub fn law(self) -> &'static str {
        match self {
            Fault::RxNoWait => "boundary RX waits for the slot's TX event (read after write)",
            Fault::NoWarGuard => "boundary TX waits for the slot's previous RX (write after read)",
            Fault::SingleSlot => "the two slots of a boundary are distinct buffers",
            Fault::SharedScratch => "every stage has its own engine scratch, even on one device",
            Fault::SlotFirstUse => "a grown slot's zero-fill is ordered before TX writes it",
            Fault::NoExitPublish => "the reader of a step's logits waits for the producing stages",
            Fault::NoReversePublish => "stage 0 waits for the caller's input upload",
            Fault::NoLoadBarrier => {
                "loads are ordered before the stages (own stream or load barrier)"
            }
            Fault::MisplacedCache => "every stage's memory lives on its stage's device",
            Fault::ChunkKvOrder => {
                "a multi-row step stores every row's key/value before any row's attention reads"
            }
            Fault::NoRollback => {
                "a verify round rolls every stage's cache back to the accepted length"
            }
            Fault::MmaRowOrder => {
                "a row's matvec order never depends on how many rows share its launch"
            }
            Fault::StaleCache => "a reused cache row starts empty: its length reset per stage",
            Fault::RowCountOrder => {
                "a row's matvec order never depends on how many rows share its step (non-tensor-core path)"
            }
        }
    }

    /// Where the fault's window can open at all, in words (`--help`); `cannot_open` is the
    /// check itself.
    pub fn needs(self) -> &'static str {
        match self {
            Fault::RxNoWait | Fault::SlotFirstUse => "2+ stages",
            Fault::NoWarGuard => {
                "2+ stages and 3+ steps in flight (pipelined or batched arm, --window 3+)"
            }
            Fault::SingleSlot => {
                "2+ stages and 2+ steps in flight (pipelined or batched arm, --window 2+)"
            }
            Fault::SharedScratch => "2+ stages, all on one device, and 2+ steps in flight (pipelined, batched, prime or serve arm, --window 2+)",
            Fault::NoExitPublish | Fault::NoReversePublish => "any placement",
            Fault::NoLoadBarrier => {
                "the cuda backend (where it is a never-fails finding, see README)"
            }
            Fault::MisplacedCache => "the first and last stages on different devices",
            Fault::ChunkKvOrder => "a prime arm with a chunk of 2+ rows, a verify arm with a prompt of 2+, or a serve arm prefilling 2+ rows of a request (multi-row steps of one sequence)",
            Fault::NoRollback => "the verify arm, with 2+ positions after the prompt (a round with a draft)",
            Fault::MmaRowOrder => {
                "--mma on (cuda), an arm with several rows per step (batched with --batch 2+, prime, verify, serve), a model with matrices in a tensor-core format (Q4_K, Q8_0, Q4_0, Q4_1, Q5_0, Q6_K)"
            }
            Fault::StaleCache => "the serve arm with more --requests than cache rows (--max-rows)",
            Fault::RowCountOrder => {
                "the non-tensor-core matvec (the cpu backend, or cuda with --mma off), an arm with several rows per step (batched with --batch 2+, prime, verify, serve)"
            }
        }
    }

    /// Why the fault's window cannot open at `site` (the gate refuses it: a negative
    /// control that cannot fail proves nothing), or None where it can. Structural only:
    /// where a window can open, the runtime's fault holds (`FAULT_HOLD`) make the run lose
    /// the race, on the CPU backend and on CUDA alike.
    pub fn cannot_open(self, site: &Site) -> Option<String> {
        let n = site.devices.len();
        let (Some(&d0), Some(&d_last)) = (site.devices.first(), site.devices.last()) else {
            return Some("there are no stages".into());
        };
        let boundary = matches!(
            self,
            Fault::RxNoWait | Fault::NoWarGuard | Fault::SingleSlot | Fault::SlotFirstUse
        );
        if boundary && n < 2 {
            return Some(
                "it breaks a law of the boundary between two stages, and one stage has no boundary"
                    .into(),
            );
        }
        let window = |need: usize, hazard: &str| {
            (site.in_flight < need).then(|| {
                format!(
                    "{hazard}, so it needs {need} steps in flight, and these arms keep at most {} (eager and verify read every step back before the next; pipelined, batched, prime and serve keep --window, at most their walk's steps less the first, which has none before it: the tape's positions, prime's chunks and positions, serve's schedule)",
                    site.in_flight
                )
            })
        };
        match self {
            Fault::NoWarGuard => window(
                3,
                "a slot is written again two steps after its last read",
            ),
            Fault::SingleSlot => window(2, "the one shared buffer is overwritten by the next step"),
            Fault::SharedScratch if n < 2 => {
                Some("it makes every stage drive stage 0's engine, and one stage already does".into())
            }
            Fault::SharedScratch => site
                .devices
                .iter()
                .position(|&d| d != d0)
                .map(|s| {
                    format!(
                        "every stage drives stage 0's engine, whose scratch is on device {d0}, so it needs two or more stages all on one device (stage {s} is on device {})",
                        site.devices[s]
                    )
                })
                // The stages' uses of the one scratch clash only while stage 0 runs a step
                // and a later stage the step before (found by `ppn-gate hunt`: --window 1
                // and a verify gate PASSed).
                .or_else(|| {
                    window(
                        2,
                        "the stages clash in the shared scratch only while stage 0 runs a step ahead of a later stage",
                    )
                }),
            // The CPU engine uploads no weights (it reads the model's host bytes), so its
            // "load" is a few zero-fills and the race window is microseconds: the flag could
            // not make the gate FAIL reliably.
            Fault::NoLoadBarrier if !site.uploads_weights => Some(
                "it needs a backend whose engines upload weights (cuda), and the cpu backend loads none"
                    .into(),
            ),
            Fault::MisplacedCache if d_last == d0 => Some(format!(
                "it births the last stage's KV cache on stage 0's device, and both are device {d0}: nothing to misplace (it needs the first and last stages on different devices)"
            )),
            Fault::ChunkKvOrder if !site.seq_rows_checked => Some(
                "it breaks the order of a multi-row step of one sequence, and none of these arms walks one whose later rows are all checked (prime does with a chunk of 2+ rows, verify with a prompt of 2+, serve where a request's prompt is prefilled 2+ rows at a time in a cache row it is the first to use, or reaching position 2: every prompt starts with BOS, so a reused row's slot 0 already holds what the race would miss; a verify round's later rows are checked only where the model accepts a draft)"
                    .into(),
            ),
            Fault::NoRollback if !site.rollback => Some(
                "it skips a verify round's cache rollback, and these arms roll nothing back (verify does, in a round with a draft: it needs 2+ positions after the prompt)"
                    .into(),
            ),
            Fault::MmaRowOrder if !site.mma => Some(
                "it plants a row-count-dependent order in the tensor-core matvec, which runs only with --mma on on the cuda backend"
                    .into(),
            ),
            Fault::MmaRowOrder if !(site.batched || site.multi_row) => Some(
                "it changes the order of launches of several rows, and these arms launch one row at a time (batched with --batch 2+, prime with a chunk of 2+, verify with a prompt of 2+ or a round with a draft, serve where a step carries 2+ rows launch several)"
                    .into(),
            ),
            Fault::StaleCache if !site.reuse => Some(
                "it skips the length reset of a reused cache row, and no arm here reuses one (serve does, with more --requests than cache rows)"
                    .into(),
            ),
            // Planted in the FFMA kernels: under --mma on or auto a model's matrices may take
            // the tensor-core kernels (mma-row-order plants there), where it would plant
            // nothing and the control could not fail.
            Fault::RowCountOrder if !site.ffma => Some(
                "it is planted in the non-tensor-core (FFMA) matvec, and under --mma on or auto the model's matrices may take the tensor-core kernels instead (give --mma off; mma-row-order is their control)"
                    .into(),
            ),
            Fault::RowCountOrder if !(site.batched || site.multi_row) => Some(
                "it changes the order of steps of several rows, and these arms step one row at a time (batched with --batch 2+, prime with a chunk of 2+, verify with a prompt of 2+ or a round with a draft, serve where a step carries 2+ rows step several)"
                    .into(),
            ),
            _ => None,
        }
    }

    pub fn parse(s: &str) -> Result<Fault, PlanError> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                PlanError(format!(
                    "--fault {s:?}: unknown fault; known: {}",
                    Fault::ALL
                        .iter()
                        .map(|f| f.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::{Fault, Site};

    /// A cuda site of two stages on device 0, three steps in flight, one row a step, every
    /// matvec on the FFMA kernels: each test sets what its fault reads.
    fn base() -> Site<'static> {
        Site {
            devices: &[0, 0],
            in_flight: 3,
            uploads_weights: true,
            multi_row: false,
            seq_rows_checked: false,
            rollback: false,
            batched: false,
            mma: false,
            ffma: true,
            reuse: false,
        }
    }

    /// mma-row-order opens only where the tensor-core matvec runs (`--mma on`) and an arm
    /// launches several rows; everywhere else the gate refuses it, saying why.
    #[test]
    fn mma_row_order_opens_only_with_mma_and_multi_row_launches() {
        let site = |mma: bool, batched: bool, multi_row: bool| Site {
            devices: &[0],
            multi_row,
            batched,
            mma,
            ffma: !mma,
            ..base()
        };
        let f = Fault::MmaRowOrder;
        assert_eq!(f.cannot_open(&site(true, true, false)), None);
        assert_eq!(f.cannot_open(&site(true, false, true)), None);
        assert!(f
            .cannot_open(&site(false, true, true))
            .unwrap()
            .contains("only with --mma on"));
        assert!(f
            .cannot_open(&site(true, false, false))
            .unwrap()
            .contains("one row at a time"));
        assert_eq!(Fault::parse("mma-row-order").unwrap(), f);
    }

    /// row-count-order opens on either backend where every matvec is an FFMA one (the cpu
    /// backend, cuda --mma off) and a step has several rows; under --mma on or auto it is
    /// refused naming --mma off, and one row a step names why.
    #[test]
    fn row_count_order_opens_only_on_the_ffma_path_with_several_rows() {
        let site = |cuda: bool, ffma: bool, batched: bool| Site {
            uploads_weights: cuda,
            batched,
            ffma,
            ..base()
        };
        let f = Fault::RowCountOrder;
        assert_eq!(f.cannot_open(&site(false, true, true)), None);
        assert_eq!(f.cannot_open(&site(true, true, true)), None);
        assert!(f
            .cannot_open(&site(true, false, true))
            .unwrap()
            .contains("give --mma off"));
        assert!(f
            .cannot_open(&site(true, true, false))
            .unwrap()
            .contains("one row at a time"));
    }
}
