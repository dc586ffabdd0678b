//! The on-disk cache of compiled kernel modules (CUBIN, or PTX where NVRTC has no real
//! architecture for the device): a repeated gate skips NVRTC, which costs seconds per module.
//!
//! Rules that hold here:
//! - An entry's name is the blake3 of everything its bytes depend on (`KeyParts`): source,
//!   NVRTC options, image kind, device architecture, driver, NVRTC and cudarc versions. A
//!   changed input is another file, never a stale hit.
//! - An entry is read only after its header (magic, key, length, blake3 of the payload)
//!   checks out; anything else is counted as corrupt and compiled again, never loaded blindly.
//! - Entries are written through `fsio::write_atomic` (own temp file, then rename): processes
//!   that fill the cache at once each rename a complete file, so a reader sees a whole entry
//!   or none.
//! - Nothing here touches CUDA: the compiler is a closure, so the logic is tested on the CPU.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Entry header magic; a format change bumps the digit (the key schema below as well).
const MAGIC: &[u8; 8] = b"PPNMOD1\n";
const HEADER: usize = 8 + 32 + 8 + 32;
/// Folded into every key, so a change of what a key means orphans the old entries.
const KEY_SCHEMA: &str = "ppn-gate module cache key v1";

/// What a compiled module's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for one real architecture (loading skips the driver's PTX JIT).
    Cubin,
    /// PTX, JIT-compiled by the driver at load.
    Ptx,
}

impl ImageKind {
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Cubin => "cubin",
            ImageKind::Ptx => "ptx",
        }
    }
}

/// Everything a module's bytes depend on.
#[derive(Clone, Debug)]
pub struct KeyParts<'a> {
    pub source: &'a str,
    /// NVRTC options exactly as passed (architecture included).
    pub options: &'a [String],
    /// The NVRTC program name (it appears in the image's debug strings).
    pub name: &'a str,
    pub kind: ImageKind,
    /// Compute capability of the device the module is for.
    pub cc: (i32, i32),
    /// cuDriverGetVersion, and the driver's own version string where the OS has it.
    pub driver: (i32, &'a str),
    /// nvrtcVersion.
    pub nvrtc: (i32, i32),
    pub cudarc: &'a str,
}

/// A 32-byte cache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key([u8; 32]);

impl Key {
    pub fn of(p: &KeyParts) -> Key {
        let mut h = blake3::Hasher::new();
        // Every field length-prefixed: no two different part lists hash the same bytes.
        let mut put = |b: &[u8]| {
            h.update(&(b.len() as u64).to_le_bytes());
            h.update(b);
        };
        put(KEY_SCHEMA.as_bytes());
        put(p.kind.name().as_bytes());
        put(p.name.as_bytes());
        put(&(p.options.len() as u64).to_le_bytes());
        for o in p.options {
            put(o.as_bytes());
        }
        put(p.source.as_bytes());
        for v in [p.cc.0, p.cc.1, p.driver.0, p.nvrtc.0, p.nvrtc.1] {
            put(&v.to_le_bytes());
        }
        put(p.driver.1.as_bytes());
        put(p.cudarc.as_bytes());
        Key(*h.finalize().as_bytes())
    }

    fn hex(&self) -> String {
        blake3::Hash::from(self.0).to_hex().to_string()
    }
}

/// Where a module came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Hit,
    /// Compiled; `stored` says whether the cache now holds it.
    Miss {
        stored: bool,
    },
    /// An entry was there but unusable (the reason names the file and the check that
    /// failed); compiled again and `stored`.
    Corrupt {
        reason: String,
        stored: bool,
    },
}

/// Counters of one cache over its life (monotonic; the receipts take differences).
#[derive(Debug, Default)]
pub struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub corrupt: AtomicU64,
    pub store_errors: AtomicU64,
}

pub struct ModuleCache {
    dir: PathBuf,
    pub counters: Counters,
}

impl ModuleCache {
    /// The default location: `$XDG_CACHE_HOME/ppn-gate`, else `$HOME/.cache/ppn-gate` (a
    /// relative XDG_CACHE_HOME is ignored, as the XDG spec says). An error when neither
    /// gives an absolute directory.
    pub fn default_dir(
        xdg_cache_home: Option<&str>,
        home: Option<&str>,
    ) -> Result<PathBuf, String> {
        let abs = |v: Option<&str>| v.map(PathBuf::from).filter(|p| p.is_absolute());
        if let Some(x) = abs(xdg_cache_home) {
            return Ok(x.join("ppn-gate"));
        }
        if let Some(h) = abs(home) {
            return Ok(h.join(".cache").join("ppn-gate"));
        }
        Err(format!(
            "no module cache location: XDG_CACHE_HOME is {xdg_cache_home:?} and HOME is \
             {home:?} (neither an absolute path); pass --cache-dir DIR or --no-cache"
        ))
    }

    /// Opens (creating) the cache directory; the error names it.
    pub fn open(dir: &Path) -> Result<ModuleCache, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("module cache {}: cannot create it: {e}", dir.display()))?;
        if !dir.is_dir() {
            return Err(format!("module cache {}: not a directory", dir.display()));
        }
        Ok(ModuleCache {
            dir: dir.to_path_buf(),
            counters: Counters::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(format!("{}.mod", key.hex()))
    }

    /// The module of `key`: from the cache when a valid entry is there, else from `build`
    /// (then stored). A store failure leaves the module usable: it is counted, reported in
    /// the outcome, and the caller says so.
    pub fn get_or_build<E>(
        &self,
        key: &Key,
        build: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<(Vec<u8>, Outcome, Option<String>), E> {
        let path = self.path(key);
        let corrupt = match std::fs::read(&path) {
            Ok(bytes) => match parse_entry(key, &bytes) {
                Ok(payload) => {
                    self.counters.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok((payload.to_vec(), Outcome::Hit, None));
                }
                Err(why) => Some(format!("{}: {why}", path.display())),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(format!("{}: unreadable: {e}", path.display())),
        };
        let payload = build()?;
        let store_error = crate::fsio::write_atomic(&path, &entry_bytes(key, &payload))
            .err()
            .map(|e| format!("module cache: storing {}: {e}", path.display()));
        if store_error.is_some() {
            self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
        }
        let stored = store_error.is_none();
        let outcome = match corrupt {
            Some(reason) => {
                self.counters.corrupt.fetch_add(1, Ordering::Relaxed);
                Outcome::Corrupt { reason, stored }
            }
            None => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                Outcome::Miss { stored }
            }
        };
        Ok((payload, outcome, store_error))
    }
}

/// magic | key | payload length (u64 LE) | blake3(payload) | payload
fn entry_bytes(key: &Key, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&key.0);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(blake3::hash(payload).as_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of a valid entry for `key`, or which check failed.
fn parse_entry<'a>(key: &Key, bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < HEADER {
        return Err(format!(
            "{} bytes, shorter than the {HEADER}-byte header",
            bytes.len()
        ));
    }
    let (head, payload) = bytes.split_at(HEADER);
    if &head[..8] != MAGIC {
        return Err("bad magic (not a module cache entry of this version)".into());
    }
    if head[8..40] != key.0 {
        return Err("the entry's key is not its file name's".into());
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&head[40..48]);
    let len = u64::from_le_bytes(len);
    if len != payload.len() as u64 {
        return Err(format!(
            "payload of {} bytes, header says {len}",
            payload.len()
        ));
    }
    if blake3::hash(payload).as_bytes()[..] != head[48..80] {
        return Err("payload checksum mismatch".into());
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn parts<'a>(source: &'a str, options: &'a [String]) -> KeyParts<'a> {
        KeyParts {
            source,
            options,
            name: "k.cu",
            kind: ImageKind::Cubin,
            cc: (9, 0),
            driver: (13000, "580.1"),
            nvrtc: (13, 0),
            cudarc: "0.19.10",
        }
    }

    fn opts() -> Vec<String> {
        vec!["--fmad=false".into(), "--gpu-architecture=sm_90".into()]
    }

    #[test]
    fn the_key_changes_with_every_input_and_only_with_them() {
        let o = opts();
        let base = parts("src", &o);
        assert_eq!(Key::of(&base), Key::of(&parts("src", &opts())));
        let o2 = vec!["--fmad=false".into(), "--gpu-architecture=sm_80".into()];
        // Splitting one option in two must not collide with the joined one.
        let o3 = vec!["--fmad=false--gpu-architecture=sm_90".into()];
        let variants = [
            KeyParts {
                source: "src ",
                ..base.clone()
            },
            KeyParts {
                options: &o2,
                ..base.clone()
            },
            KeyParts {
                options: &o3,
                ..base.clone()
            },
            KeyParts {
                name: "j.cu",
                ..base.clone()
            },
            KeyParts {
                kind: ImageKind::Ptx,
                ..base.clone()
            },
            KeyParts {
                cc: (8, 9),
                ..base.clone()
            },
            KeyParts {
                driver: (12080, "580.1"),
                ..base.clone()
            },
            KeyParts {
                driver: (13000, "580.2"),
                ..base.clone()
            },
            KeyParts {
                nvrtc: (13, 1),
                ..base.clone()
            },
            KeyParts {
                cudarc: "0.19.11",
                ..base.clone()
            },
        ];
        let mut keys = vec![Key::of(&base)];
        for v in &variants {
            let k = Key::of(v);
            assert!(!keys.contains(&k), "{v:?} collides");
            keys.push(k);
        }
    }

    /// A compile closure that counts its calls.
    fn compiler<'a>(
        calls: &'a Cell<usize>,
        out: &'a [u8],
    ) -> impl FnOnce() -> Result<Vec<u8>, String> + 'a {
        move || {
            calls.set(calls.get() + 1);
            Ok(out.to_vec())
        }
    }

    #[test]
    fn a_stored_module_is_a_hit_for_the_next_process_and_a_miss_for_another_key() {
        let d = tempfile::tempdir().unwrap();
        let o = opts();
        let k = Key::of(&parts("a", &o));
        let calls = Cell::new(0);
        let c1 = ModuleCache::open(&d.path().join("new/dir")).unwrap();
        let (b, out, err) = c1.get_or_build(&k, compiler(&calls, b"image-a")).unwrap();
        assert_eq!(
            (b.as_slice(), out, err, calls.get()),
            (&b"image-a"[..], Outcome::Miss { stored: true }, None, 1)
        );
        // A second cache object on the same directory: what another gate process sees.
        let c2 = ModuleCache::open(&d.path().join("new/dir")).unwrap();
        let (b, out, _) = c2.get_or_build(&k, compiler(&calls, b"other")).unwrap();
        assert_eq!(
            (b.as_slice(), out, calls.get()),
            (&b"image-a"[..], Outcome::Hit, 1)
        );
        let k2 = Key::of(&parts("b", &o));
        let (b, out, _) = c2.get_or_build(&k2, compiler(&calls, b"image-b")).unwrap();
        assert_eq!(
            (b.as_slice(), out, calls.get()),
            (&b"image-b"[..], Outcome::Miss { stored: true }, 2)
        );
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!((n(&c2.counters.hits), n(&c2.counters.misses)), (1, 1));
        // Nothing but the two entries: no temp file left behind.
        let mut names: Vec<String> = std::fs::read_dir(c2.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut want = vec![format!("{}.mod", k.hex()), format!("{}.mod", k2.hex())];
        want.sort();
        assert_eq!(names, want);
    }

    #[test]
    fn a_damaged_entry_is_never_loaded_but_rebuilt_and_replaced() {
        let d = tempfile::tempdir().unwrap();
        let o = opts();
        let k = Key::of(&parts("a", &o));
        let other = Key::of(&parts("b", &o));
        let c = ModuleCache::open(d.path()).unwrap();
        let good = entry_bytes(&k, b"the-image");
        let path = c.path(&k);
        let damage: Vec<(&str, Vec<u8>)> = vec![
            ("shorter than", good[..HEADER - 1].to_vec()),
            ("payload of 4 bytes", good[..HEADER + 4].to_vec()),
            ("checksum", {
                let mut b = good.clone();
                *b.last_mut().unwrap() ^= 1;
                b
            }),
            ("bad magic", {
                let mut b = good.clone();
                b[0] = b'X';
                b
            }),
            ("key is not", entry_bytes(&other, b"the-image")),
            ("shorter than", Vec::new()),
        ];
        for (want, bytes) in damage {
            std::fs::write(&path, &bytes).unwrap();
            let calls = Cell::new(0);
            let (b, out, _) = c.get_or_build(&k, compiler(&calls, b"the-image")).unwrap();
            assert_eq!(
                (b.as_slice(), calls.get()),
                (&b"the-image"[..], 1),
                "{want}"
            );
            match out {
                Outcome::Corrupt {
                    reason,
                    stored: true,
                } => {
                    assert!(
                        reason.contains(want) && reason.contains(&k.hex()),
                        "{reason}"
                    )
                }
                other => panic!("{want}: {other:?}"),
            }
            // Replaced by a valid entry: the next lookup is a hit.
            assert_eq!(std::fs::read(&path).unwrap(), good, "{want}");
            let (_, out, _) = c.get_or_build(&k, compiler(&calls, b"x")).unwrap();
            assert_eq!(out, Outcome::Hit);
        }
        assert_eq!(c.counters.corrupt.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn a_failed_build_stores_nothing_and_a_failed_store_still_returns_the_module() {
        let d = tempfile::tempdir().unwrap();
        let o = opts();
        let k = Key::of(&parts("a", &o));
        let c = ModuleCache::open(&d.path().join("c")).unwrap();
        let r = c.get_or_build(&k, || Err::<Vec<u8>, _>("nvrtc: syntax error".to_string()));
        assert_eq!(r.unwrap_err(), "nvrtc: syntax error");
        assert!(!c.path(&k).exists());
        // The directory is gone and a file stands in its place: the store must fail.
        std::fs::remove_dir_all(c.dir()).unwrap();
        std::fs::write(c.dir(), b"not a dir").unwrap();
        let calls = Cell::new(0);
        let (b, out, err) = c.get_or_build(&k, compiler(&calls, b"img")).unwrap();
        assert_eq!((b.as_slice(), calls.get()), (&b"img"[..], 1));
        // The entry's path cannot even be read (ENOTDIR): an unusable entry, named as such.
        match out {
            Outcome::Corrupt {
                reason,
                stored: false,
            } => assert!(reason.contains("unreadable"), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert!(err.unwrap().contains(&k.hex()));
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(
            (n(&c.counters.store_errors), n(&c.counters.corrupt)),
            (1, 1)
        );
        // Opening a cache on a file is refused, naming it.
        let e = ModuleCache::open(c.dir()).err().unwrap();
        assert!(e.contains(&c.dir().display().to_string()), "{e}");
    }

    #[test]
    fn processes_filling_one_entry_at_once_leave_one_valid_entry() {
        let d = tempfile::tempdir().unwrap();
        let o = opts();
        let k = Key::of(&parts("a", &o));
        let image: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    // Each thread its own cache object, as separate processes would have.
                    let c = ModuleCache::open(d.path()).unwrap();
                    for _ in 0..20 {
                        let (b, out, err) =
                            c.get_or_build(&k, || Ok::<_, ()>(image.clone())).unwrap();
                        assert_eq!(b, image);
                        assert!(
                            err.is_none() && !matches!(out, Outcome::Corrupt { .. }),
                            "{out:?}"
                        );
                    }
                });
            }
        });
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert_eq!(
            parse_entry(&k, &std::fs::read(d.path().join(&names[0])).unwrap()).unwrap(),
            &image[..]
        );
    }

    #[test]
    fn the_default_location_follows_xdg_then_home_and_refuses_neither() {
        let p = |x, h| ModuleCache::default_dir(x, h);
        assert_eq!(
            p(Some("/x"), Some("/h")).unwrap(),
            PathBuf::from("/x/ppn-gate")
        );
        assert_eq!(
            p(None, Some("/h")).unwrap(),
            PathBuf::from("/h/.cache/ppn-gate")
        );
        assert_eq!(
            p(Some("rel"), Some("/h")).unwrap(),
            PathBuf::from("/h/.cache/ppn-gate")
        );
        let e = p(Some("rel"), None).unwrap_err();
        assert!(e.contains("\"rel\"") && e.contains("--cache-dir"), "{e}");
    }
}
