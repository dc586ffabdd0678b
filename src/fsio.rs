//! Atomic file output shared by the GGUF writer and the receipts: a reader sees the old
//! file or the whole new one, never half of it, and a failed write leaves nothing behind.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Per-process counter: two writes to one path from two threads use two temp files.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` through a temp file in the same directory and a rename. The
/// directory must exist. On error the temp file is removed and the first error returned.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // The rename below would replace whatever `path` is: refuse anything but a regular file
    // (as root, `--receipt /dev/null` replaced the system's /dev/null with a receipt).
    // check_writable refuses it before any work; this is the last guard.
    if let Some(kind) = not_a_file(path) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is {kind}, not a file to write", path.display()),
        ));
    }
    // A directory another process's soak, battery, hunt or selftest took after this command
    // started (check_distinct found its outputs free then): this file would land among that
    // run's files, or replace one of them (a gate started before a soak took its --out
    // overwrote the soak's run-001.json). Checked before the temp file is made in it, and
    // again at the rename, so only a lock taken in between those two instants is missed.
    locked_out(path)?;
    let tmp = tmp_path(path)?;
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        locked_out(path)?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the original error is the one worth reporting.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// An error naming the holder when `path`'s directory is another live process's --out
/// (`lock_in`; this process's own lock is its own, so soak, battery, hunt and selftest write
/// there freely).
fn locked_out(path: &Path) -> std::io::Result<()> {
    match lock_in(parent_dir(path)) {
        None => Ok(()),
        Some(h) => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{}: its directory is now the --out directory of {h} (taken after this \
                 command started); not written there",
                shown_path(path)
            ),
        )),
    }
}

/// The directory `path` names its file in: its parent, `.` for a bare name.
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The temp file `write_atomic` writes `path` through: `.<name>.tmp.<pid>.<n>` beside it,
/// `<name>` cut to its first bytes where the whole would pass NAME_MAX (a name near 255
/// bytes, which check_writable's probe passed with a small `n`, failed once `n` gained a
/// digit: a soak's third run). `<pid>.<n>` alone keeps two temp files apart.
fn tmp_path(path: &Path) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let file_name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("output path {} has no file name", path.display()),
        )
    })?;
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix = format!(".tmp.{}.{n}", std::process::id());
    let name = file_name.as_bytes();
    let keep = name.len().min(NAME_MAX - 1 - suffix.len());
    let mut tmp = Vec::with_capacity(NAME_MAX);
    tmp.push(b'.');
    tmp.extend_from_slice(&name[..keep]);
    tmp.extend_from_slice(suffix.as_bytes());
    Ok(parent_dir(path).join(std::ffi::OsStr::from_bytes(&tmp)))
}

/// What `path` is when it exists and is no regular file (a link is followed), else None.
fn not_a_file(path: &Path) -> Option<&'static str> {
    std::fs::metadata(path)
        .ok()
        .filter(|md| !md.is_file())
        .map(|md| file_kind(&md))
}

/// What a path's metadata says it is, for a message (`GGUF file X is a FIFO`, `--receipt
/// /dev/null: is a character device`).
pub fn file_kind(md: &std::fs::Metadata) -> &'static str {
    let t = md.file_type();
    if t.is_file() {
        return "a regular file";
    }
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "a file of another kind"
}

/// Longest file name (one path component, in bytes) Linux file systems take (NAME_MAX).
pub const NAME_MAX: usize = 255;

/// How an output error names the path's flag: the flag where it was given, else what the
/// path is (a default the user never typed: `--out receipts/runs/...` named a flag it was
/// not given).
pub fn flag_name(flag: &str, given: bool) -> String {
    if given {
        flag.to_string()
    } else {
        format!("the default path of {flag} (not given)")
    }
}

/// An output path checked before any work, so a gate, soak or battery never runs to the
/// end only to find it cannot keep its result: the parent directories are created (as the
/// write itself would), then `write_atomic`'s temp file is created and removed there. Refused
/// with the flag and the path: a directory given as a file path, a name with a NUL byte or
/// longer than NAME_MAX (with the temp file's suffix), a parent that is a file, a read-only
/// or full file system, no permission.
pub fn check_writable(flag: &str, path: &Path) -> anyhow::Result<()> {
    let shown = shown_path(path);
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        anyhow::bail!("{flag} {shown}: the path contains a NUL byte");
    }
    // `m/n/` and `m/n/.` name a directory (a file `n` could not be written there as given).
    let raw = path.as_os_str().as_encoded_bytes();
    if path.is_dir() || path.file_name().is_none() || raw.ends_with(b"/") || raw.ends_with(b"/.") {
        anyhow::bail!("{flag} {shown}: is a directory, need a file path");
    }
    // An output is written to a temp file and renamed over its path, which would replace a
    // device, FIFO or socket there (as root, /dev/null itself): a file path only.
    if let Some(kind) = not_a_file(path) {
        anyhow::bail!(
            "{flag} {shown}: is {kind}, need a file path (an output is written whole and renamed over it)"
        );
    }
    if let Some(c) = path
        .components()
        .map(|c| c.as_os_str().len())
        .find(|&n| n > NAME_MAX)
    {
        anyhow::bail!(
            "{flag} {shown}: a name of {c} bytes; a file name may have at most {NAME_MAX}"
        );
    }
    // create_dir_all under a file says only "File exists": name the file.
    if let Some(f) = path
        .ancestors()
        .skip(1)
        .find(|a| !a.as_os_str().is_empty() && a.exists())
        .filter(|a| !a.is_dir())
    {
        anyhow::bail!(
            "{flag} {shown}: {} is a file, not a directory",
            shown_path(f)
        );
    }
    // The parents the probe makes are removed again (while empty): a command refused later
    // leaves no directories behind; the write itself makes them (receipt::write_atomic).
    let probe = || -> std::io::Result<()> {
        let _made = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => Some(NewDir::create(dir)?),
            None => None,
        };
        let tmp = tmp_path(path)?;
        std::fs::File::create(&tmp)?;
        std::fs::remove_file(&tmp)
    };
    probe().map_err(|e| anyhow::anyhow!("{flag} {shown}: cannot write there: {e}"))
}

/// Which file a path names, to tell whether two paths are one file: an existing path by its
/// device and inode (a symbolic or hard link to it is the same file), a path not yet written
/// by where it would go (`resolved`: two outputs aimed at one new file, its parents made or
/// not).
#[derive(PartialEq, Eq, Debug)]
enum FileId {
    Node(u64, u64),
    New(std::path::PathBuf),
}

fn file_id(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    if let Ok(md) = std::fs::metadata(path) {
        use std::os::unix::fs::MetadataExt;
        return Some(FileId::Node(md.dev(), md.ino()));
    }
    #[cfg(not(unix))]
    if let Ok(c) = std::fs::canonicalize(path) {
        return Some(FileId::New(c));
    }
    path.file_name()?;
    Some(FileId::New(resolved(path)))
}

/// check_distinct's refusal: an output that would overwrite an input or another output. A
/// command ending on it writes no output at all (not even the JUnit file it writes on other
/// errors, which could be the very input: `battery B.json --junit B.json`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Clash(pub String);

/// Refused before any work: an output (flag, path) that is one of the inputs' files, which
/// writing it would destroy (`--receipt m.gguf --model m.gguf` replaced the model with a
/// receipt, exit 0), or two outputs naming one file, of which the later write would keep
/// only its own (`--trace r.json --receipt r.json`). Paths that do not resolve (a parent not
/// yet made) name no existing file and are left to check_writable.
pub fn check_distinct(outputs: &[(&str, &Path)], inputs: &[(&str, &Path)]) -> anyhow::Result<()> {
    let ins: Vec<_> = inputs.iter().map(|(f, p)| (f, p, file_id(p))).collect();
    let outs: Vec<_> = outputs.iter().map(|(f, p)| (f, p, file_id(p))).collect();
    let at: Vec<_> = outputs.iter().map(|(_, p)| resolved(p)).collect();
    for (i, (flag, path, id)) in outs.iter().enumerate() {
        // A directory a running soak, battery or hunt owns: its runs write names there as
        // they go (run-NNN.json, a gate's receipt), and this file would interleave with them
        // or be replaced (`--receipt D/run-005.json` into a live soak's D was accepted).
        if let Some(h) = lock_in(parent_dir(path)) {
            return Err(Clash(format!(
                "{flag} {}: is in the --out directory of {h}; give a path outside it",
                shown_path(path)
            ))
            .into());
        }
        // One output under another's path (`--receipt r.json --trace r.json/x.json`): the
        // first one written makes the other's write fail after the whole run.
        if let Some(j) = (0..outs.len()).find(|&j| at[i] != at[j] && at[i].starts_with(&at[j])) {
            return Err(Clash(format!(
                "{flag} {}: is under the {} path {}, which is written as a file; each output needs a path of its own",
                shown_path(path),
                outs[j].0,
                shown_path(outs[j].1)
            ))
            .into());
        }
        let Some(id) = id else { continue };
        if let Some((iflag, ipath, _)) = ins.iter().find(|(_, _, j)| j.as_ref() == Some(id)) {
            return Err(Clash(format!(
                "{flag} {}: is the {iflag} file {}; an output must not overwrite an input",
                shown_path(path),
                shown_path(ipath)
            ))
            .into());
        }
        if let Some((oflag, _, _)) = outs[..i].iter().find(|(_, _, j)| j.as_ref() == Some(id)) {
            return Err(Clash(format!(
                "{flag} {}: is also the {oflag} path; each output needs a file of its own",
                shown_path(path)
            ))
            .into());
        }
    }
    Ok(())
}

/// What holds `dir`, where another process's --out lock there says it is running (this
/// process's own lock, and a stale one, are None); a lock that names no holder (being
/// written, or not ours) holds it too, as it does for soak, battery and hunt.
fn lock_in(dir: &Path) -> Option<String> {
    match read_lock(&dir.join(LOCK_NAME)) {
        LockRead::Absent => None,
        LockRead::Holder(h) => (h.alive() && !h.is_this_process())
            .then(|| format!("{}, which is still running", h.describe())),
        LockRead::Unreadable(why) => Some(format!(
            "a process: its lock {} {why}; remove it if no soak, battery or hunt writes there",
            shown_path(&dir.join(LOCK_NAME))
        )),
    }
}

/// A lock file as read: missing, naming its holder, or not a lock (a partial write, another
/// program's file, a FIFO or device: never opened, so never a read that blocks).
enum LockRead {
    Absent,
    Holder(LockHolder),
    Unreadable(String),
}

/// Largest lock file read (ours are a few hundred bytes).
const LOCK_MAX_BYTES: u64 = 64 << 10;

fn read_lock(path: &Path) -> LockRead {
    let md = match std::fs::metadata(path) {
        Ok(md) => md,
        Err(_) if std::fs::symlink_metadata(path).is_err() => return LockRead::Absent,
        Err(e) => return LockRead::Unreadable(format!("cannot be read ({e})")),
    };
    if !md.is_file() {
        return LockRead::Unreadable(format!("is {}, not a lock file", file_kind(&md)));
    }
    if md.len() > LOCK_MAX_BYTES {
        return LockRead::Unreadable(format!("holds {} bytes, not a lock", md.len()));
    }
    match std::fs::read_to_string(path) {
        Err(e) => LockRead::Unreadable(format!("cannot be read ({e})")),
        Ok(t) => match serde_json::from_str::<LockHolder>(&t) {
            Ok(h) => LockRead::Holder(h),
            Err(_) => LockRead::Unreadable("names no holder".into()),
        },
    }
}

/// An --out directory this command created: removed again on drop (with the parents it
/// created, each only while empty) unless `keep` was called, so a command refused after
/// making its --out (a --junit that clashes, a lock held elsewhere) leaves no empty
/// directory behind.
#[must_use]
pub struct NewDir {
    created: Vec<std::path::PathBuf>,
}

impl NewDir {
    /// Creates `dir` and its missing parents, one component at a time (so `new/..` and
    /// `D/.` make `new` and `D`, and exactly those are recorded); a component that is a
    /// symbolic link to nothing is named as such, one that loops by the system's error.
    pub fn create(dir: &Path) -> std::io::Result<NewDir> {
        use std::path::Component;
        let mut made = NewDir {
            created: Vec::new(),
        };
        let mut cur = std::path::PathBuf::new();
        for c in dir.components() {
            cur.push(c.as_os_str());
            if !matches!(c, Component::Normal(_)) {
                continue;
            }
            match std::fs::symlink_metadata(&cur) {
                Ok(md) if md.file_type().is_symlink() => match std::fs::metadata(&cur) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            format!(
                                "{} is a symbolic link to nothing (a missing directory)",
                                cur.display()
                            ),
                        ));
                    }
                    // A loop of links, no permission: the system's words.
                    Err(e) => {
                        return Err(std::io::Error::new(
                            e.kind(),
                            format!("{}: {e}", cur.display()),
                        ))
                    }
                },
                Ok(_) => {}
                Err(_) => {
                    std::fs::create_dir(&cur)?;
                    made.created.push(cur.clone());
                }
            }
        }
        if !dir.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(made)
    }

    /// The directory stays: the command's outputs are being written there.
    pub fn keep(mut self) {
        self.created.clear();
    }
}

impl Drop for NewDir {
    fn drop(&mut self) {
        // Deepest first (the reverse of their making, also where the making stopped half
        // way); remove_dir refuses a directory that is not empty, and a parent holding
        // anything else stays.
        for d in self.created.iter().rev() {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
        }
    }
}

/// A soak's, battery's, hunt's or selftest's `--out DIR` (`flag` names it in errors): made
/// where missing, then locked. Bind it as `let (made, lock) = ...`: the lock drops first,
/// then `made` removes the directory where this command made it and nothing was written
/// (call `made.keep()` once the command's work starts).
pub fn take_out_dir(flag: &str, dir: &Path) -> anyhow::Result<(NewDir, OutLock)> {
    let shown = shown_path(dir);
    if dir.as_os_str().as_encoded_bytes().contains(&0) {
        anyhow::bail!("{flag} {shown}: the path contains a NUL byte");
    }
    let made = NewDir::create(dir).map_err(|e| anyhow::anyhow!("{flag} {shown}: {e}"))?;
    let lock = OutLock::take(flag, dir)?;
    Ok((made, lock))
}

/// Whether `path`'s file sits in directory `dir`, both as `resolved` (`./r/x.json` and
/// `r/x.json` are in one directory, made yet or not).
pub fn in_dir(dir: &Path, path: &Path) -> bool {
    resolved(dir) == resolved(parent_dir(path))
}

/// `path` made absolute with its longest existing ancestor resolved (links followed), the
/// rest appended with `.` dropped and `..` taking off the name before it (names that do not
/// exist yet are no links): where a file not yet written would go, for comparing with a
/// directory (`is it under --out?`) or another output before its parents exist.
pub fn resolved(path: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    for a in abs.ancestors() {
        if let Ok(mut c) = std::fs::canonicalize(a) {
            for part in abs.strip_prefix(a).unwrap_or(Path::new("")).components() {
                match part {
                    Component::CurDir => {}
                    Component::ParentDir => {
                        c.pop();
                    }
                    p => c.push(p),
                }
            }
            return c;
        }
    }
    abs
}

/// Largest JSON input read whole (a receipt, a battery file, a trace): far past any this
/// tool writes (a receipt of 100000 steps is a few MB; a trace of a long soak run tens).
pub const JSON_MAX_BYTES: u64 = 256 << 20;

/// A JSON input file's text, refused unless it is a regular file of at most JSON_MAX_BYTES
/// in UTF-8: a FIFO would block the open (for ever, an interrupt too), /dev/zero or
/// /dev/urandom would grow memory until the process was killed. The error (InvalidInput for
/// each refusal) says what the path is, not the path: the caller names it.
pub fn read_json_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let refuse = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
    let md = std::fs::metadata(path)?;
    if !md.is_file() {
        return Err(refuse(format!("is {}, need a JSON file", file_kind(&md))));
    }
    // One byte past the cap, whatever the metadata said (a file may grow while read).
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(JSON_MAX_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > JSON_MAX_BYTES {
        return Err(refuse(format!(
            "over the limit of {JSON_MAX_BYTES} bytes for a JSON input"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        refuse(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// read_json_file's text, an error naming `what` and the path (`battery B.json: is a FIFO,
/// need a JSON file`).
pub fn read_json_text(what: &str, path: &Path) -> anyhow::Result<String> {
    read_json_file(path).map_err(|e| anyhow::anyhow!("{what} {}: {e}", shown_path(path)))
}

/// `path` for a message: a name of thousands of bytes is cut to its first 60 characters and
/// its length, so the message stays readable.
pub fn shown_path(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars().count() <= 100 {
        return s;
    }
    let head: String = s.chars().take(60).collect();
    format!("{head}... ({} bytes)", s.len())
}

/// `--out DIR`'s lock: `DIR/.ppn-gate.lock` holds the pid, host, process start time and
/// command line of the process writing there, so a second soak or battery into one
/// directory is refused (their receipts would interleave and one summary be lost) naming
/// the holder. A lock whose process is gone (a SIGKILL, a crash) is stale: it is taken over,
/// saying so. Removed when dropped (and by the interrupt handler before it exits).
#[derive(Debug)]
pub struct OutLock {
    path: std::path::PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct LockHolder {
    pub pid: u32,
    pub host: String,
    /// The holder's start time (field 22 of /proc/PID/stat, clock ticks since boot): a pid
    /// reused by another process does not hold the lock.
    pub start: Option<u64>,
    pub command: String,
}

impl LockHolder {
    pub fn this_process() -> LockHolder {
        LockHolder {
            pid: std::process::id(),
            host: host_name(),
            start: start_time(std::process::id()),
            command: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Whether the holder still runs. A holder on another host (a shared file system)
    /// cannot be checked from here and counts as running.
    pub fn alive(&self) -> bool {
        if self.host != host_name() {
            return true;
        }
        match start_time(self.pid) {
            None => false,
            Some(now) => self.start.is_none_or(|s| s == now),
        }
    }

    /// This process (by pid on this host): a lock naming it is its own, never a rival's.
    pub fn is_this_process(&self) -> bool {
        self.pid == std::process::id() && self.host == host_name()
    }

    pub fn describe(&self) -> String {
        let cmd: String = self.command.chars().take(200).collect();
        format!("pid {} on host {} (`{cmd}`)", self.pid, self.host)
    }
}

pub const LOCK_NAME: &str = ".ppn-gate.lock";

impl OutLock {
    /// Takes `dir`'s lock (`flag` names the directory's flag in errors); `dir` must exist.
    pub fn take(flag: &str, dir: &Path) -> anyhow::Result<OutLock> {
        let path = dir.join(LOCK_NAME);
        let me = LockHolder::this_process();
        let text = serde_json::to_string_pretty(&me)? + "\n";
        // Twice at most: a stale lock removed, then created anew (a rival taking it over at
        // the same moment wins the create_new, and this process is then refused).
        for _ in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(text.as_bytes())
                        .and_then(|_| f.sync_all())
                        .map_err(|e| {
                            let _ = std::fs::remove_file(&path);
                            anyhow::anyhow!(
                                "{flag} {}: writing the lock {}: {e}",
                                dir.display(),
                                path.display()
                            )
                        })?;
                    HELD.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(path.clone());
                    return Ok(OutLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    match read_lock(&path) {
                        LockRead::Holder(h) if h.alive() && !h.is_this_process() => anyhow::bail!(
                            "{flag} {}: in use by {} (its lock {}); give each soak or battery its own --out",
                            dir.display(),
                            h.describe(),
                            path.display()
                        ),
                        LockRead::Holder(h) if h.is_this_process() => {}
                        LockRead::Holder(h) => {
                            let why = if start_time(h.pid).is_some() {
                                "whose pid now names another process"
                            } else {
                                "which no longer runs"
                            };
                            errln!(
                                "ppn-gate: {flag} {}: taking over a stale lock of {}, {why}",
                                dir.display(),
                                h.describe()
                            );
                        }
                        LockRead::Absent => continue,
                        LockRead::Unreadable(why) => {
                            // Being written this instant by its holder, or not a lock of
                            // ours: refused either way, never silently replaced.
                            anyhow::bail!(
                                "{flag} {}: {} exists but {why}; remove it if no soak or battery writes there",
                                dir.display(),
                                path.display()
                            );
                        }
                    }
                    std::fs::remove_file(&path).map_err(|e| {
                        anyhow::anyhow!(
                            "{flag} {}: removing the stale lock {}: {e}",
                            dir.display(),
                            path.display()
                        )
                    })?;
                }
                Err(e) => anyhow::bail!("{flag} {}: cannot write there: {e}", dir.display()),
            }
        }
        anyhow::bail!(
            "{flag} {}: another process took the stale lock {} over first",
            dir.display(),
            path.display()
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OutLock {
    fn drop(&mut self) {
        HELD.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| p != &self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Every lock this process holds: `release_locks` removes them where the process leaves
/// without running destructors (a second interrupt's `process::exit`, which left a
/// battery's or a hunt's lock behind).
static HELD: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes every lock file this process holds (see HELD); for an exit that runs no drops.
pub fn release_locks() {
    for p in HELD.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Field 22 of /proc/PID/stat (start time in clock ticks since boot); None when no such
/// process runs (or no /proc).
fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file name of NAME_MAX bytes is written, and written again after the temp counter
    /// has gained digits: the temp file's name is cut to fit (a 230-byte --trace failed at a
    /// soak's third run, a 255-byte --receipt at once, "File name too long").
    #[test]
    fn a_name_of_name_max_bytes_is_written_whatever_the_counter() {
        let d = tempfile::tempdir().unwrap();
        for len in [200, 230, NAME_MAX] {
            let p = d.path().join(format!("{}.json", "v".repeat(len - 5)));
            check_writable("--receipt", &p).unwrap();
            TMP_COUNTER.fetch_add(1_000_000_007, Ordering::Relaxed);
            write_atomic(&p, b"{}").unwrap();
            let t = tmp_path(&p).unwrap();
            assert!(t.file_name().unwrap().len() <= NAME_MAX, "{len}");
            assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        }
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            3,
            "no temp file left"
        );
    }

    /// One file under any name (a hard link, a symlink, `./x` against `x` in a directory),
    /// a new path named twice, and distinct files told apart.
    #[test]
    fn check_distinct_sees_one_file_under_every_name() {
        let d = tempfile::tempdir().unwrap();
        let p = |n: &str| d.path().join(n);
        std::fs::write(p("in.gguf"), b"model").unwrap();
        std::fs::hard_link(p("in.gguf"), p("hard.gguf")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(p("in.gguf"), p("soft.gguf")).unwrap();
        std::fs::create_dir(p("sub")).unwrap();
        let input = [("--model", p("in.gguf"))];
        let ins: Vec<(&str, &Path)> = input.iter().map(|(f, q)| (*f, q.as_path())).collect();
        for name in ["in.gguf", "hard.gguf", "soft.gguf", "sub/../in.gguf"] {
            let o = p(name);
            let e = check_distinct(&[("--receipt", &o)], &ins).unwrap_err();
            assert!(e.downcast_ref::<Clash>().is_some(), "{name}: {e}");
            assert!(e.to_string().contains("is the --model file"), "{e}");
        }
        let (a, b) = (p("new.json"), p("sub/../new.json"));
        let e = check_distinct(&[("--receipt", &a), ("--trace", &b)], &ins).unwrap_err();
        assert!(e.to_string().contains("also the --receipt path"), "{e}");
        let other = p("other.json");
        check_distinct(&[("--receipt", &a), ("--trace", &other)], &ins).unwrap();
    }

    /// A write into a directory another live process holds as its --out (a lock taken after
    /// this command's start checks) is refused naming the holder, and leaves neither the file
    /// nor a temp file there; once the holder is gone (a stale lock) the same write lands.
    /// This process's own lock never blocks it. The holder is a live `sleep`.
    #[cfg(target_os = "linux")]
    #[test]
    fn write_atomic_refuses_a_directory_another_live_run_took() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("run-001.json");
        let mut sleep = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let holder = LockHolder {
            pid: sleep.id(),
            host: host_name(),
            start: start_time(sleep.id()),
            command: "ppn-gate soak --out D".into(),
        };
        let lock = d.path().join(LOCK_NAME);
        std::fs::write(&lock, serde_json::to_string(&holder).unwrap()).unwrap();
        let e = write_atomic(&target, b"{}").unwrap_err();
        let names = |p: &Path| {
            let mut v: Vec<_> = std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert!(
            e.to_string().contains("is now the --out directory of pid"),
            "{e}"
        );
        assert_eq!(
            names(d.path()),
            [LOCK_NAME],
            "nothing written beside the lock"
        );
        let _ = sleep.kill();
        let _ = sleep.wait();
        write_atomic(&target, b"{}").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"{}");
        // This process's own lock: its own --out.
        let own = LockHolder::this_process();
        std::fs::write(&lock, serde_json::to_string(&own).unwrap()).unwrap();
        write_atomic(&target, b"[]").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"[]");
    }

    /// A JSON input must be a regular UTF-8 file: a directory, a device and bytes that are
    /// not UTF-8 are refused saying which, and a file reads whole.
    #[test]
    fn read_json_file_takes_regular_utf8_files_only() {
        let d = tempfile::tempdir().unwrap();
        let e = read_json_file(d.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        #[cfg(unix)]
        {
            let e = read_json_file(Path::new("/dev/zero")).unwrap_err();
            assert!(e.to_string().contains("is a character device"), "{e}");
        }
        let f = d.path().join("x.json");
        std::fs::write(&f, [b'{', 0xFF, b'}']).unwrap();
        let e = read_json_file(&f).unwrap_err();
        assert!(
            e.to_string()
                .contains("not UTF-8 text (invalid byte at offset 1)"),
            "{e}"
        );
        std::fs::write(&f, "{}").unwrap();
        assert_eq!(read_json_file(&f).unwrap(), "{}");
    }
}
