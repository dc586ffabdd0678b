//! A gate run you can watch (`run_gate`'s observer for the commands): a progress bar per
//! phase on a terminal (the reference's steps, then each arm's), and, for the gate command,
//! each arm's verdict line on stdout the moment the arm ends.

use crate::arms::GateEvent;
use crate::term::Bar;

use super::report::arm_line;

/// The observer: `event` is what `run_gate` calls.
pub struct Watch {
    quiet: bool,
    print: bool,
    bar: Bar,
    /// Arm verdict lines printed so far (`emit_after` leaves them out).
    pub printed: usize,
}

impl Watch {
    /// Bars unless `quiet`; with `print`, each arm's verdict line as the arm ends (the gate
    /// command); without, bars only (soak, battery, selftest print their own lines).
    pub fn new(quiet: bool, print: bool) -> Watch {
        Watch {
            quiet,
            print,
            bar: Bar::hidden(),
            printed: 0,
        }
    }

    pub fn event(&mut self, e: &GateEvent) {
        match e {
            GateEvent::Start { phase, total } => {
                // The previous phase's bar ends first (a bar only ever grows).
                self.bar = Bar::hidden();
                self.bar = Bar::unless(self.quiet, *phase, *total, "steps");
            }
            GateEvent::Progress { done } => self.bar.set(*done),
            GateEvent::Arm(a) => {
                self.bar = Bar::hidden();
                if self.print {
                    outln!("{}", arm_line(a));
                    self.printed += 1;
                }
            }
        }
    }
}
