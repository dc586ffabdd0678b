//! The process exit codes every command returns (the command line's contract: README,
//! "exit codes"); one module so `cli`, the gate layer and `multiproc` name the same numbers.

/// Every arm PASS (or the subcommand succeeded).
pub const EXIT_PASS: i32 = 0;
/// A gate FAIL (or `diff` found a difference).
pub const EXIT_FAIL: i32 = 1;
/// A harness error: bad flags, bad files, backend errors (the message names the value).
pub const EXIT_ERROR: i32 = 2;
/// `battery`: no gate failed, but some were skipped, so the battery proved less than it lists.
pub const EXIT_SKIPPED: i32 = 3;
/// `soak` and `battery` stopped by SIGINT, SIGTERM or SIGHUP with no FAIL among the finished
/// runs: 128 + SIGINT, what a shell reports for Ctrl-C (the handler cannot tell the three
/// apart, so one code), distinct from a harness error (2) and from a FAIL (1, which an
/// interrupted run with a FAIL still exits with: the divergence is proof either way).
pub const EXIT_INTERRUPTED: i32 = 130;

/// FAILs (soak, battery) and findings (hunt) a long command has met so far: what a second
/// interrupt's immediate exit reads, so that it exits EXIT_FAIL where one was met rather
/// than EXIT_INTERRUPTED, which says none was (a hunt left while shrinking a finding it had
/// printed exited 130).
pub static FAILS_MET: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
