//! Fault flags: each breaks exactly one law of the runtime on purpose (an ordering law, or
//! the placement law for `misplaced-cache`), so the gate can prove it fails when that law is
//! broken (a gate that cannot fail proves nothing).

use super::placement::PlanError;

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
}

impl Fault {
    pub const ALL: [Fault; 9] = [
        Fault::RxNoWait,
        Fault::NoWarGuard,
        Fault::SingleSlot,
        Fault::SharedScratch,
        Fault::SlotFirstUse,
        Fault::NoExitPublish,
        Fault::NoReversePublish,
        Fault::NoLoadBarrier,
        Fault::MisplacedCache,
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
