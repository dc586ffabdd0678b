//! Command line: parse, plan, dispatch. Exit codes: 0 pass, 1 gate fail, 2 harness error.
pub fn main() -> i32 {
    eprintln!("ppn-gate: under construction");
    2
}
