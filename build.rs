// Embeds the git commit into the binary (receipts record it). Outside a git checkout the
// commit is "unknown", never a build failure.
// Cargo reads its directives from the build script's stdout: println! is the interface here
// (clippy.toml refuses it in the crate).
#![allow(clippy::disallowed_macros)]
fn git(args: &[&str]) -> Option<String> {
    std::process::Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    // --no-optional-locks: a plain `git status` refreshes and rewrites the index, whose
    // change made every following `cargo build` run this script and rebuild the crate.
    let dirty = git(&[
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
    ])
    .is_some_and(|s| !s.is_empty());
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
    // When the commit or the tree's state can change: a commit (the branch's ref moves, the
    // index is rewritten), a checkout (HEAD), an edit of what the binary is built from (the
    // receipt said the last commit, no `-dirty`, for a binary built from edited sources).
    for f in ["src", "build.rs", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={f}");
    }
    // A worktree keeps HEAD and the index in its own git directory, the refs in the common one.
    if let (Some(g), Some(c)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let (g, c) = (std::path::Path::new(&g), std::path::Path::new(&c));
        let mut watch = vec![g.join("HEAD"), g.join("index"), c.join("packed-refs")];
        watch.extend(git(&["symbolic-ref", "-q", "HEAD"]).map(|r| c.join(r)));
        // Only files that exist: cargo reruns the script on every build for a missing one.
        for f in watch.iter().filter(|f| f.exists()) {
            println!("cargo:rerun-if-changed={}", f.display());
        }
    }
}
