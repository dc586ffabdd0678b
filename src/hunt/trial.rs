//! One trial as a child process of this binary under a timeout, and what its exit says.
//! The child runs in its own process group (so a `--procs` gate's members go with it when a
//! hang is killed, and a terminal's Ctrl-C reaches only the hunt, which then stops the
//! child itself); its stdout and stderr go to files in the trial's directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How a child ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Still running at the timeout: killed (with its process group).
    Timeout,
    /// The hunt was interrupted while it ran: killed, no verdict.
    Interrupted,
}

/// A child's run: its exit, its stderr's last lines, its wall time.
#[derive(Clone, Debug)]
pub struct ChildRun {
    pub exit: Exit,
    pub stderr_tail: String,
    pub secs: f64,
}

/// The last `n` lines of a file (empty where it cannot be read).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Kill a child's whole process group (SIGKILL), then the child itself, while the child is
/// still unreaped (so its pid is still its group's id). `kill(1)`: the crate allows no
/// `unsafe` outside the CUDA backend, so no libc call here.
fn kill_group(child: &mut std::process::Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// Run `exe argv` in `dir` (stdout.txt, stderr.txt there) for at most `timeout`;
/// `stop` is polled while it runs (true: kill it, `Exit::Interrupted`).
pub fn run_child(
    exe: &Path,
    argv: &[String],
    dir: &Path,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> Result<ChildRun> {
    use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
    std::fs::create_dir_all(dir).with_context(|| format!("trial directory {}", dir.display()))?;
    let out = std::fs::File::create(dir.join("stdout.txt"))?;
    let err_path: PathBuf = dir.join("stderr.txt");
    let err = std::fs::File::create(&err_path)?;
    let t0 = Instant::now();
    let mut child = Command::new(exe)
        .args(argv)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting trial {}", exe.display()))?;
    let exit = loop {
        if let Some(st) = child.try_wait()? {
            break match (st.code(), st.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                (None, None) => Exit::Code(-1),
            };
        }
        if stop() {
            kill_group(&mut child);
            break Exit::Interrupted;
        }
        if t0.elapsed() >= timeout {
            kill_group(&mut child);
            break Exit::Timeout;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(ChildRun {
        exit,
        stderr_tail: tail(&err_path, 6),
        secs: t0.elapsed().as_secs_f64(),
    })
}

/// `--budget`: a number with an optional unit s, m or h (`90`, `90s`, `10m`, `2h`).
pub fn parse_budget(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1),
        Some((i, 'm')) => (&t[..i], 60),
        Some((i, 'h')) => (&t[..i], 3600),
        _ => (t, 1),
    };
    match num.parse::<u64>() {
        Ok(n) if n >= 1 && n <= 7 * 24 * 3600 / mult => Ok(Duration::from_secs(n * mult)),
        _ => Err(format!(
            "--budget {s:?}: expected a whole number of seconds, minutes or hours >= 1, at most a week (90s, 10m, 2h)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_and_bad_ones_name_the_value() {
        assert_eq!(parse_budget("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_budget("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_budget("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_budget("45s").unwrap(), Duration::from_secs(45));
        for bad in ["xyz", "", "0", "0m", "-5m", "1.5m", "10d", "m", "999999h"] {
            let e = parse_budget(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn a_child_past_its_timeout_is_killed_as_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let r = run_child(
            Path::new("sleep"),
            &["5".into()],
            dir.path(),
            Duration::from_millis(200),
            &|| false,
        )
        .unwrap();
        assert_eq!(r.exit, Exit::Timeout);
        assert!(r.secs < 3.0, "{}", r.secs);
        let r = run_child(
            Path::new("sh"),
            &["-c".into(), "echo boom >&2; kill -ABRT $$".into()],
            dir.path(),
            Duration::from_secs(5),
            &|| false,
        )
        .unwrap();
        assert_eq!(r.exit, Exit::Signal(6));
        assert_eq!(r.stderr_tail, "boom");
    }
}
