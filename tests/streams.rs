//! The binary's standard streams when they cannot be written, on the CPU backend and the
//! built-in model: a stderr that fails (a full disk, a closed pipe) never panics a command
//! (exit 101, no receipt, a soak's lock left, launch's members orphaned); a stdout that fails
//! with anything but a closed pipe turns a success into exit 2 naming the error, while a
//! FAIL keeps its 1; a launch whose launcher is killed outright leaves no member behind; and
//! an output the user named no path for is named as the default when it cannot be written.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ppn-gate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn full() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full")
}

const GATE: [&str; 6] = ["--backend", "cpu", "--prompt-len", "4", "--gen-len", "4"];

/// stderr on /dev/full: the gate, a soak, a refused flag and a diff that is not comparable
/// each exit with their own code and write what they write.
#[test]
fn a_stderr_that_cannot_be_written_panics_nothing() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().join("r.json");
    let o = bin()
        .args(GATE)
        .args(["--stages", "2", "--receipt"])
        .arg(&r)
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(r.is_file(), "the receipt is written");

    let out = d.path().join("soak");
    let o = bin()
        .args(["soak", "--runs", "2"])
        .args(GATE)
        .arg("--out")
        .arg(&out)
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(out.join("run-002.json").is_file());
    assert!(
        !out.join(".ppn-gate.lock").exists(),
        "the soak's lock is removed"
    );

    let o = bin()
        .args(GATE)
        .args(["--receipt", "/proc/x.json"])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");

    let other = d.path().join("other.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    v["model"]["blake3"] = "0".repeat(64).into();
    std::fs::write(&other, v.to_string()).unwrap();
    let o = bin()
        .arg("diff")
        .args([&r, &other])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "not comparable: {o:?}");
}

/// stdout on /dev/full: `diff` same (its product lost) exits 2 naming the error, `diff`
/// different keeps 1, a PASSing gate exits 2 with its receipt written; stdout on a pipe
/// closed by its reader is not an error (the verdict's code stands).
#[test]
fn a_stdout_that_cannot_be_written_is_no_success() {
    let d = tempfile::tempdir().unwrap();
    let a = Path::new("receipts/golden/builtin-n4-dev0123.json");
    let o = bin()
        .arg("diff")
        .args([a, a])
        .stdout(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("writing results to stdout: No space left"),
        "{err}"
    );

    let b = d.path().join("b.json");
    // cargo runs an integration test in the package root, where `bin` runs the binary.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a).unwrap()).unwrap();
    v["config"]["seed"] = 99.into();
    std::fs::write(&b, v.to_string()).unwrap();
    let o = bin()
        .arg("diff")
        .arg(a)
        .arg(&b)
        .stdout(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "different keeps its code: {o:?}");

    let r = d.path().join("r.json");
    let o = bin()
        .args(GATE)
        .arg("--receipt")
        .arg(&r)
        .stdout(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(r.is_file());

    // A reader that closed the pipe: the gate's PASS stands.
    let mut c = bin()
        .args(GATE)
        .arg("--receipt")
        .arg(d.path().join("p.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    assert_eq!(c.wait().unwrap().code(), Some(0));
}

/// The members a launcher started, whose pids it prints, still alive?
fn alive(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        })
        .collect()
}

/// A launcher killed outright (SIGKILL: no handler, no destructor runs) leaves no member
/// waiting out its timeouts: each sees its launcher gone within a second and leaves, exit 2,
/// removing the launch's rendezvous directory.
#[test]
fn members_leave_when_their_launcher_is_killed() {
    let d = tempfile::tempdir().unwrap();
    let errf = d.path().join("err.txt");
    let mut c = bin()
        .args([
            "launch",
            "--procs",
            "2",
            "--stages",
            "2",
            "--transport",
            "ipc",
        ])
        .args(["--backend", "cpu", "--prompt-len", "4"])
        // Long enough that the members are mid-gate when the launcher dies.
        .args(["--gen-len", "200", "--jitter-us", "3000", "-q"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errf).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let pids = loop {
        let text = std::fs::read_to_string(&errf).unwrap_or_default();
        let pids: Vec<u32> = text
            .lines()
            .filter(|l| l.starts_with("ppn-gate launch:"))
            .filter_map(|l| l.rsplit(" pid ").next()?.trim().parse().ok())
            .collect();
        if pids.len() == 2 {
            break pids;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no members: {text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(alive(&pids).len(), 2, "both members run");
    c.kill().unwrap();
    c.wait().unwrap();
    let t = Instant::now();
    while !alive(&pids).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "members outlived their launcher: {:?}",
            alive(&pids)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(&errf).unwrap();
    assert!(text.contains("the launcher (pid"), "{text}");
}

/// Members started by hand over a directory of the user's that holds a `launcher.pid` (a
/// stale one, naming no parent of theirs) are not watched: both PASS, and the directory
/// and the user's files in it stay (the first form of the watch removed it, files and all).
#[test]
fn a_stale_launcher_pid_in_a_users_rendezvous_is_no_launcher() {
    let d = tempfile::tempdir().unwrap();
    let rdv = d.path().join("rdv");
    std::fs::create_dir(&rdv).unwrap();
    std::fs::write(rdv.join("launcher.pid"), "999999\n").unwrap();
    std::fs::write(rdv.join("notes.txt"), "keep").unwrap();
    let kids: Vec<_> = (0..2)
        .map(|r| {
            bin()
                .args(["--rank", &r.to_string(), "--world", "2", "--rendezvous"])
                .arg(&rdv)
                .args(["--stages", "2", "--transport", "ipc", "-q"])
                .args(GATE)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (r, k) in kids.into_iter().enumerate() {
        let o = k.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "rank {r}: {o:?}");
    }
    assert_eq!(
        std::fs::read_to_string(rdv.join("notes.txt")).unwrap(),
        "keep"
    );
}

/// An output path the user did not give (the default under receipts/runs/) that cannot be
/// written is named as the default, not as a flag the user never typed (`--out receipts/...`).
#[test]
fn a_default_output_path_is_named_as_the_default() {
    let d = tempfile::tempdir().unwrap();
    // receipts/ is a file here: no default output can be made under it.
    std::fs::write(d.path().join("receipts"), "not a directory").unwrap();
    for (args, flag) in [
        (&GATE[..], "--receipt"),
        (&["soak", "--runs", "2", "--backend", "cpu"][..], "--out"),
    ] {
        let o = bin().current_dir(d.path()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "the default path of {flag} (not given) receipts/runs/"
            )),
            "{err}"
        );
    }
}
