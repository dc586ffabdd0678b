// Embeds the git commit into the binary (receipts record it). Outside a git checkout the
// commit is "unknown", never a build failure.
fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    let v = if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=PPN_GIT_COMMIT={v}");
    // The locked cudarc version: part of the CUDA module cache's keys (its bindings build the
    // modules). Cargo.lock pins it; a lock without it is a broken checkout, named here.
    let lock = std::fs::read_to_string("Cargo.lock").expect("build.rs: reading Cargo.lock");
    let cudarc = lock
        .split("[[package]]")
        .find(|p| p.contains("\nname = \"cudarc\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .and_then(|v| v.strip_suffix('"'))
        .expect("build.rs: Cargo.lock has no cudarc package with a version");
    println!("cargo:rustc-env=PPN_CUDARC_VERSION={cudarc}");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
}
