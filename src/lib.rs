//! ppn-gate: a gate and soak harness for N-stage pipeline-parallel LLM decode.
//!
//! Layering (each module's own `//!` comment states the rule that holds in it):
//! - `term`: terminal output under everything (`-v`, diagnostics, result lines, progress
//!   bars); it names nothing of the crate.
//! - `quant`, `gguf`: file formats (bounded parsing, no panics on bad bytes).
//! - `model`, `math`: architectures and the fixed-order, batch-invariant CPU numerics.
//! - `backend`: the device interface (buffers, in-order streams, events, engines) and its
//!   CPU implementation; the CUDA implementation is the only place `unsafe` may live.
//! - `runtime`: the N-stage pipeline runtime over any backend (placement, boundaries,
//!   readback, the walk lease, fault injection).
//! - `arms`, `receipt`, `soak`: the gate's arms, its receipts and soak summaries.
//! - `gate`: the gate as a library (options, plan, run, report, multi-process members and
//!   launch); `cli` above it only parses flags into its options and prints.
//! - `hunt`: the configuration-space search over gates run as child processes, and its
//!   shrinker (above `gate`, below `cli`).
//! - `multiproc`: multi-process gates (stages in several processes: rendezvous, links, launch).
// `unsafe` is allowed in exactly one module, the CUDA backend (`backend::cuda`), where every
// block carries a `// SAFETY:` line. Everywhere else the compiler refuses it.
#![deny(unsafe_code)]
// Unit tests print with std's macros, which the harness captures (`errln!`/`outln!` write
// to the process's streams); panicking on a stream is a test's to do.
#![cfg_attr(test, allow(clippy::disallowed_macros))]

/// `println!` that never panics: a closed stdout (`ppn-gate soak | head`) drops the line
/// and the command goes on, so its receipts are still written and its exit code still says
/// PASS or FAIL. Flushed at once and printed above any progress bar (`term::out_line`).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::term::out_line(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: a stderr that cannot be written (a closed pipe, a full
/// disk, `2>/dev/full`) drops the line, where `eprintln!` would panic with exit 101 before
/// the receipt is written, a soak's lock removed or `launch`'s members stopped. Printed
/// above any progress bar (`term::eprint_line`). `eprintln!` itself is refused by clippy
/// (`clippy.toml`).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::term::eprint_line(format_args!($($arg)*))
    };
}

/// A diagnostic line (module cache, load times, device notes): stderr, only with `-v`
/// (`term::diag`).
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::term::diag(format_args!($($arg)*))
    };
}

pub mod arms;
pub mod backend;
pub mod cli;
pub mod exit;
pub mod fsio;
pub mod gate;
pub mod gguf;
pub mod hunt;
pub mod jsonin;
pub mod math;
pub mod model;
pub mod multiproc;
pub mod quant;
pub mod receipt;
pub mod runtime;
pub mod soak;
pub mod term;
