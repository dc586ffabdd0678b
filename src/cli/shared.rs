//! What the commands that run many gates (soak, battery) share: the interrupt handler and
//! the record it keeps, and the JUnit testcases of a gate that ran or failed to.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use anyhow::Result;

use crate::exit::{EXIT_FAIL, EXIT_INTERRUPTED};
use crate::fsio::OutLock;
use crate::gate::report::verdict_lines;
use crate::receipt::junit;
use crate::receipt::Receipt;
use crate::soak::Summary;

pub(super) static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

/// What the interrupt handler needs to leave a record that agrees with the disk: the soak's
/// summary as last written, where it goes, and the `--out` lock to release. The soak holds
/// this mutex while it writes a run's receipt and then the summary, so a signal never writes
/// a summary between the two.
pub(super) struct Live {
    pub(super) summary: Summary,
    pub(super) path: PathBuf,
    /// Held for its drop, which removes the lock file.
    pub(super) _lock: OutLock,
}

pub(super) static LIVE: Mutex<Option<Live>> = Mutex::new(None);

/// `LIVE`, also after a panic elsewhere held it (the summary is still worth writing).
pub(super) fn live() -> MutexGuard<'static, Option<Live>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The exit code of an interrupted soak or battery: a FAIL among the finished runs is
/// still proof of a bug (1); else 130, what a shell reports for Ctrl-C (one code for
/// SIGINT, SIGTERM and SIGHUP, which the handler cannot tell apart), distinct from a
/// harness error (2).
pub(super) fn interrupted_code(failed: usize) -> i32 {
    if failed > 0 {
        EXIT_FAIL
    } else {
        EXIT_INTERRUPTED
    }
}

/// SIGINT, SIGTERM or SIGHUP (ctrlc's `termination` feature: what Slurm, Kubernetes and
/// systemd send before SIGKILL). First: the summary is rewritten at once with `interrupted:
/// true` (a SIGKILL after a grace period then still finds it), the run in progress
/// finishes, its receipt and the summary are written, and the soak stops. Second: the
/// summary (every finished run, `interrupted: true`) is written again, the `--out` lock
/// removed, and the process leaves at once. (A second install in one process is refused by
/// ctrlc and ignored here.)
pub(super) fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        let n = INTERRUPTS.fetch_add(1, Ordering::SeqCst) + 1;
        let mut g = live();
        let mut failed = 0;
        if let Some(l) = g.as_mut() {
            l.summary.interrupted = true;
            failed = l.summary.failed();
            if let Err(e) = l.summary.write(&l.path) {
                crate::term::eprint_line(format_args!("\nppn-gate: {e}"));
            }
        }
        if n >= 2 {
            // No bar may stay on screen after the process is gone.
            crate::term::clear();
            let met = crate::exit::FAILS_MET.load(Ordering::SeqCst);
            errln!(
                "\nppn-gate: second interrupt, leaving now (what finished is kept: the receipts, a soak's summary, a battery's JUnit file as of its last gate, a hunt's report as of its last shrunk finding){}",
                if met > 0 && failed == 0 {
                    "; a FAIL or finding was met (printed above)"
                } else {
                    ""
                }
            );
            // Dropping the lock removes it; process::exit runs no destructors, so every
            // other lock (a battery's, a hunt's) is removed here.
            drop(g.take());
            crate::fsio::release_locks();
            std::process::exit(interrupted_code(failed.max(met)));
        }
        crate::term::eprint_line(format_args!("\nppn-gate: interrupt: finishing the run in progress, then writing the summary (interrupt again to leave now)"));
    });
}

/// The testcase of a gate that ran: PASS, or a `<failure>` whose message is the first FAIL
/// line (the first divergence, or a misplaced allocation) and whose body is every verdict
/// line; the receipt path as a property.
pub(super) fn receipt_case(
    name: &str,
    class: &str,
    time_s: f64,
    r: &Receipt,
    path: &Path,
) -> junit::Case {
    let lines = verdict_lines(r);
    let outcome = if r.verdict == "PASS" {
        junit::Outcome::Pass
    } else {
        junit::Outcome::Failure {
            message: lines
                .iter()
                .find(|l| l.contains("FAIL"))
                .cloned()
                .unwrap_or_else(|| format!("verdict {}", r.verdict)),
            detail: lines.join("\n"),
        }
    };
    let mut c = junit::Case::new(name, class, outcome);
    c.time_s = time_s;
    c.properties
        .push(("receipt".into(), path.display().to_string()));
    c
}

pub(super) fn error_case(name: &str, class: &str, time_s: f64, e: &anyhow::Error) -> junit::Case {
    let mut c = junit::Case::new(
        name,
        class,
        junit::Outcome::Error {
            message: format!("{e:#}"),
        },
    );
    c.time_s = time_s;
    c
}

/// Writes the report where `--junit` asks (nothing without it). `pending`: the error the
/// command is about to return; a failed write then only warns, so the error the user needs
/// is the one reported.
pub(super) fn write_junit(
    path: Option<&Path>,
    report: &junit::Suite,
    pending: Option<&anyhow::Error>,
) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    // An output aimed at an input: nothing is written (the JUnit path may be that input).
    if pending.is_some_and(|e| e.downcast_ref::<crate::fsio::Clash>().is_some()) {
        return Ok(());
    }
    match report.write(path) {
        Ok(()) => Ok(()),
        Err(e) if pending.is_some() => {
            errln!("ppn-gate: {e}");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
