//! The gate as a library, between the command line and the runtime: a command's options
//! (`options`, plain values: no parser types) → the plan (`plan`: validated, the backend
//! opened, the model loaded) → the run (`run`: in process, or `launch`ed as the members of a
//! multi-process gate, each a `member`) → the report (`report`: the receipt, its verdict
//! lines). `cli` parses flags into `GateOptions` and prints; `multiproc` below builds the links a
//! member needs from what the backend offers.

pub mod bounds;
pub mod launch;
pub mod member;
pub mod opens;
pub mod options;
pub mod plan;
pub mod plant;
pub mod policy;
pub mod report;
pub mod run;
pub mod tape;
pub mod watch;

pub use options::GateOptions;
pub use plan::Prepared;
