//! `ppn-gate launch --procs W` (or `--procs W` on any gate, soak or battery entry): W members
//! of a multi-process gate on this host, children of this process, meeting at a fresh
//! rendezvous directory. The launcher supervises them: when one exits with an error or is
//! killed, the rest are killed and the launch fails (exit 2) naming the member; a member
//! that hangs is caught by its neighbours' link timeouts (`--peer-timeout`), which fail
//! them, and so the launch, naming it.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::plan::Prepared;
use crate::multiproc::{member_name, rank_map};
use crate::receipt::Receipt;

static LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// The file of a launch's rendezvous directory that names the launcher's pid.
const LAUNCHER_PID: &str = "launcher.pid";

/// The name a launch's rendezvous directory starts with (`run`), under the temp directory.
const RDV_PREFIX: &str = "ppn-gate-rdv-";

/// A member whose rendezvous directory names its launcher (`LAUNCHER_PID`), and whose parent
/// that launcher is as it starts, leaves, exit 2, once the launcher is no longer its parent
/// (it died: the member was reparented), removing the launch's own rendezvous directory
/// (`RDV_PREFIX`), which the launcher would have. A member started by hand (`--rank`/`--world`,
/// a TCP rendezvous or a directory of the user's) is not watched, whatever that directory
/// holds: a `launcher.pid` there that names no parent of this process is not its launcher.
pub fn watch_launcher(rendezvous: &str, who: String) {
    let dir = std::path::Path::new(rendezvous);
    let Some(pid) = std::fs::read_to_string(dir.join(LAUNCHER_PID))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .filter(|&pid| pid == std::os::unix::process::parent_id())
    else {
        return;
    };
    let launch_dir = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(RDV_PREFIX))
        .then(|| dir.to_path_buf());
    let _ = std::thread::Builder::new()
        .name("ppn-gate-launcher-watch".into())
        .spawn(move || loop {
            if std::os::unix::process::parent_id() != pid {
                errln!("ppn-gate: error: {who}: the launcher (pid {pid}) is gone; leaving");
                if let Some(d) = &launch_dir {
                    let _ = std::fs::remove_dir_all(d);
                }
                std::process::exit(crate::exit::EXIT_ERROR);
            }
            std::thread::sleep(Duration::from_millis(200));
        });
}

/// The members, killed (those still running) and reaped when dropped: whatever way
/// `supervise` leaves (its verdict, a failed member's error, an error returned early, a
/// panic unwinding), no member outlives it.
struct Members(Vec<(usize, Child)>);

impl Drop for Members {
    fn drop(&mut self) {
        for (_, k) in self.0.iter_mut() {
            if let Ok(None) = k.try_wait() {
                let _ = k.kill();
            }
            let _ = k.wait();
        }
    }
}

/// After the first member fails, how long the others get to report (their own errors name
/// the member they lost) before they are killed.
const GRACE: Duration = Duration::from_secs(2);

fn status_text(st: &ExitStatus) -> (bool, String) {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => (false, format!("exited with code {c}")),
        (None, Some(s)) => (true, format!("was killed by signal {s}")),
        _ => (true, "ended without a code".into()),
    }
}

/// Run the gate `p` as its `--procs` members; returns the receipt the last stage's member
/// wrote.
pub fn run(p: &Prepared) -> Result<Receipt> {
    let a = &p.args;
    let world = a.world().expect("launch has --procs");
    let map = rank_map(p.spec.placement.n_stages(), world, a.ranks.as_deref())?;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "{RDV_PREFIX}{}-{}-{t}",
        std::process::id(),
        LAUNCHES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("launch: rendezvous {}", dir.display()))?;
    // The members watch this process (`watch_launcher`): a launcher killed outright
    // (SIGKILL, or SIGTERM on a pipe, whose default action runs no destructor) leaves no
    // member waiting out its timeouts.
    crate::fsio::write_atomic(
        &dir.join(LAUNCHER_PID),
        std::process::id().to_string().as_bytes(),
    )
    .with_context(|| format!("launch: rendezvous {}", dir.display()))?;
    let r = supervise(p, &map, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn supervise(p: &Prepared, map: &[usize], dir: &std::path::Path) -> Result<Receipt> {
    let world = map[map.len() - 1] + 1;
    let exe = std::env::current_exe().context("launch: locating this binary")?;
    let receipt = dir.join("receipt.json");
    let mut members = Members(Vec::with_capacity(world));
    let kids = &mut members.0;
    let base = p.args.member_argv();
    for r in 0..world {
        let mut c = Command::new(&exe);
        c.args(&base)
            .args(["--rank", &r.to_string(), "--world", &world.to_string()])
            .arg("--rendezvous")
            .arg(dir)
            .arg("--receipt")
            .arg(&receipt)
            .arg("--quiet")
            // `-v` reaches every member: their diagnostics go to the inherited stderr.
            .args((0..crate::term::verbose()).map(|_| "-v"))
            // The launcher prints the verdicts from the receipt; members' errors go to stderr.
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        match c.spawn() {
            Ok(k) => {
                errln!("ppn-gate launch: {} pid {}", member_name(map, r), k.id());
                kids.push((r, k));
            }
            Err(e) => {
                bail!("launch: starting rank {r} ({}): {e}", exe.display());
            }
        }
    }
    // Poll every member; the first that fails starts the grace period.
    let mut done: Vec<Option<ExitStatus>> = vec![None; world];
    let mut failed_at: Option<Instant> = None;
    loop {
        for (r, k) in kids.iter_mut() {
            if done[*r].is_none() {
                if let Some(st) = k.try_wait().context("launch: waiting for a member")? {
                    // 0: PASS (or a member whose part is done), 1: the gate's FAIL verdict.
                    if !matches!(st.code(), Some(0) | Some(1)) && failed_at.is_none() {
                        failed_at = Some(Instant::now());
                    }
                    done[*r] = Some(st);
                }
            }
        }
        if done.iter().all(|d| d.is_some()) {
            break;
        }
        if failed_at.is_some_and(|t| t.elapsed() > GRACE) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if failed_at.is_some() {
        // The members still running are killed as `members` drops, at the bail below.
        // Name the member that died first by a signal (the cause), else every failed one.
        let mut lines = Vec::new();
        let mut killed = Vec::new();
        let mut running = Vec::new();
        for (r, st) in done.iter().enumerate() {
            match st {
                Some(st) => {
                    let (sig, t) = status_text(st);
                    if sig {
                        killed.push(format!("member {} {t}", member_name(map, r)));
                    } else if st.code() != Some(0) {
                        lines.push(format!("{} {t}", member_name(map, r)));
                    }
                }
                None => {
                    running.push(member_name(map, r));
                    lines.push(format!(
                        "{} was still running (killed by the launcher)",
                        member_name(map, r)
                    ))
                }
            }
        }
        // The cause: a member killed by a signal; else one that never ended while the
        // others failed (it hangs: their errors name it too); else whoever failed.
        let head = if !killed.is_empty() {
            killed.join("; ")
        } else if !running.is_empty() {
            format!(
                "{} did not end when the others failed (it hangs?)",
                running.join(", ")
            )
        } else {
            "a member failed".to_string()
        };
        bail!("launch: {head}; {}", lines.join("; "));
    }
    Receipt::load(&receipt).map_err(|e| {
        anyhow!(
            "launch: every member ended, but the last stage's member wrote no readable receipt ({e})"
        )
    })
}
