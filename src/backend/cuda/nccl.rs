//! `--transport nccl`: a stage boundary between two processes is an NCCL send on the TX
//! stage's stream and an NCCL recv on the RX side's link stream (`runtime::RxLink`), one
//! two-rank communicator per boundary (TX rank 0, RX rank 1), so no communicator is ever
//! driven from two streams.
//!
//! The library is loaded at run time, like the driver, from a path this module resolves
//! itself and prints: `--nccl-lib PATH` (the file, or a directory holding `libnccl.so.2`:
//! a system install's lib directory, or the `nvidia-nccl-cu13` wheel's `nvidia/nccl/lib`),
//! else `libnccl.so.2` / `libnccl.so` on the dynamic linker's search path. cudarc's `nccl`
//! feature gives the types (`cudarc::nccl::sys`); its own loader only tries names such as
//! `libnccl.so` and `libnccl.so.<CUDA major>`, never the soname `libnccl.so.2` the wheel
//! ships, and panics when none loads, so the functions come from this module's table.
//!
//! Ordering laws (the same as an in-process slot): the send is enqueued on the TX stage's
//! stream after its layers (RAW: it reads x after the compute; WAR: the next step's compute
//! waits for the send on that stream); the recv is enqueued on the link stream after the
//! slot's consumed event (WAR) and before its arrived event, which the RX stage waits
//! (RAW). Exit and reverse publication are per process.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use cudarc::nccl::sys as ns;

use crate::backend::Link;

/// A communicator's unique id (made by one rank, handed to the others out of band).
pub type UniqueId = ns::ncclUniqueId;

type GetVersion = unsafe extern "C" fn(*mut c_int) -> ns::ncclResult_t;
type GetUniqueId = unsafe extern "C" fn(*mut ns::ncclUniqueId) -> ns::ncclResult_t;
type CommInitRank =
    unsafe extern "C" fn(*mut ns::ncclComm_t, c_int, ns::ncclUniqueId, c_int) -> ns::ncclResult_t;
type SendFn = unsafe extern "C" fn(
    *const c_void,
    usize,
    ns::ncclDataType_t,
    c_int,
    ns::ncclComm_t,
    ns::cudaStream_t,
) -> ns::ncclResult_t;
type RecvFn = unsafe extern "C" fn(
    *mut c_void,
    usize,
    ns::ncclDataType_t,
    c_int,
    ns::ncclComm_t,
    ns::cudaStream_t,
) -> ns::ncclResult_t;
type CommFree = unsafe extern "C" fn(ns::ncclComm_t) -> ns::ncclResult_t;
type ErrorString = unsafe extern "C" fn(ns::ncclResult_t) -> *const c_char;
type Group = unsafe extern "C" fn() -> ns::ncclResult_t;

/// The loaded library and the functions this transport calls.
pub struct Nccl {
    _lib: libloading::Library,
    /// What was loaded (printed, and named in the receipt's log line).
    pub path: String,
    /// NCCL's version code (e.g. 22703 for 2.27.3).
    pub version: i32,
    get_unique_id: GetUniqueId,
    comm_init_rank: CommInitRank,
    send: SendFn,
    recv: RecvFn,
    comm_destroy: CommFree,
    comm_abort: CommFree,
    error_string: ErrorString,
    group_start: Group,
    group_end: Group,
}

/// Where libnccl comes from, for every error that could not load it.
pub const WHERE_NCCL: &str = "libnccl.so.2 comes from a system install of NCCL (e.g. the libnccl2 package; its lib directory on LD_LIBRARY_PATH) or from the `nvidia-nccl-cu13` Python wheel's nvidia/nccl/lib (pip install nvidia-nccl-cu13; torch installs it too); name it with --nccl-lib PATH";

/// The candidates `load` tries, in order, for `--nccl-lib` (None: the linker's search path).
pub fn candidates(flag: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    match flag {
        None => Ok(vec!["libnccl.so.2".into(), "libnccl.so".into()]),
        Some(p) if p.is_dir() => Ok(vec![p.join("libnccl.so.2"), p.join("libnccl.so")]),
        Some(p) if p.is_file() => Ok(vec![p.to_path_buf()]),
        // There but neither (a device, a FIFO): say what it is, not that it is missing.
        Some(p) => Err(match std::fs::metadata(p) {
            Ok(md) => format!(
                "--nccl-lib {}: is {}, need the library file or its directory; {WHERE_NCCL}",
                p.display(),
                crate::fsio::file_kind(&md)
            ),
            Err(_) => format!(
                "--nccl-lib {}: no such file or directory; {WHERE_NCCL}",
                p.display()
            ),
        }),
    }
}

impl Nccl {
    /// Load libnccl from `--nccl-lib` (or the search path): an error naming every path
    /// tried and where the library comes from, never a panic.
    pub fn load(flag: Option<&Path>) -> Result<Nccl, String> {
        let mut tried = Vec::new();
        for c in candidates(flag)? {
            // SAFETY: loading a shared library runs its initializers; libnccl's only set up
            // its own state. Nothing from it is called before the symbols are checked below.
            match unsafe { libloading::Library::new(&c) } {
                Ok(lib) => return Nccl::from_lib(lib, c.display().to_string()),
                Err(e) => tried.push(format!("{}: {e}", c.display())),
            }
        }
        Err(format!(
            "NCCL could not be loaded (tried {}); {WHERE_NCCL}",
            tried.join("; ")
        ))
    }

    fn from_lib(lib: libloading::Library, path: String) -> Result<Nccl, String> {
        fn sym<T: Copy>(lib: &libloading::Library, path: &str, name: &str) -> Result<T, String> {
            let cname = format!("{name}\0");
            // SAFETY: `T` is the C signature of `name` as NCCL's nccl.h declares it (the
            // types are cudarc's bindings of that header); the pointer is used only while
            // `lib` stays loaded (the table owns it).
            unsafe { lib.get::<T>(cname.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| format!("{path}: symbol {name} missing ({e}): not a usable libnccl"))
        }
        let get_version: GetVersion = sym(&lib, &path, "ncclGetVersion")?;
        let mut version: c_int = 0;
        // SAFETY: ncclGetVersion writes one int into `version`, a valid local.
        let r = unsafe { get_version(&mut version) };
        if r != ns::ncclResult_t::ncclSuccess {
            return Err(format!("{path}: ncclGetVersion failed: {r:?}"));
        }
        Ok(Nccl {
            get_unique_id: sym(&lib, &path, "ncclGetUniqueId")?,
            comm_init_rank: sym(&lib, &path, "ncclCommInitRank")?,
            send: sym(&lib, &path, "ncclSend")?,
            recv: sym(&lib, &path, "ncclRecv")?,
            comm_destroy: sym(&lib, &path, "ncclCommDestroy")?,
            comm_abort: sym(&lib, &path, "ncclCommAbort")?,
            error_string: sym(&lib, &path, "ncclGetErrorString")?,
            group_start: sym(&lib, &path, "ncclGroupStart")?,
            group_end: sym(&lib, &path, "ncclGroupEnd")?,
            _lib: lib,
            path,
            version,
        })
    }

    /// "2.27.3" from NCCL's version code.
    pub fn version_text(&self) -> String {
        let v = self.version;
        if v >= 10000 {
            format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
        } else {
            format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
        }
    }

    fn check(&self, r: ns::ncclResult_t, what: &str) -> Result<(), String> {
        if r == ns::ncclResult_t::ncclSuccess {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let s = unsafe { CStr::from_ptr((self.error_string)(r)) };
        Err(format!("{what}: {r:?} ({})", s.to_string_lossy()))
    }

    /// A fresh unique id (the TX rank of a boundary makes it; it travels through the
    /// rendezvous as hex). Needs no GPU.
    pub fn unique_id(&self) -> Result<ns::ncclUniqueId, String> {
        let mut id = ns::ncclUniqueId { internal: [0; 128] };
        // SAFETY: ncclGetUniqueId writes one ncclUniqueId into `id`, a valid local.
        let r = unsafe { (self.get_unique_id)(&mut id) };
        self.check(r, "ncclGetUniqueId")?;
        Ok(id)
    }
}

/// The library, loaded once per process.
pub fn nccl(flag: Option<&Path>) -> Result<Arc<Nccl>, String> {
    static LIB: OnceLock<Result<Arc<Nccl>, String>> = OnceLock::new();
    LIB.get_or_init(|| Nccl::load(flag).map(Arc::new)).clone()
}

pub fn id_to_hex(id: &ns::ncclUniqueId) -> String {
    id.internal
        .iter()
        .map(|&c| format!("{:02x}", c as u8))
        .collect()
}

pub fn id_from_hex(s: &str) -> Result<ns::ncclUniqueId, String> {
    let s = s.trim();
    if s.len() != 256 || !s.is_ascii() {
        return Err(format!(
            "NCCL unique id: {} characters, need 256 hex digits",
            s.len()
        ));
    }
    let mut id = ns::ncclUniqueId { internal: [0; 128] };
    for (i, c) in id.internal.iter_mut().enumerate() {
        let b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| {
            format!(
                "NCCL unique id: {:?} at byte {i} is not hex",
                &s[2 * i..2 * i + 2]
            )
        })?;
        *c = b as c_char;
    }
    Ok(id)
}

/// One boundary's two-rank communicator, this process's end of it.
pub struct NcclLink {
    nccl: Arc<Nccl>,
    comm: Comm,
    /// The other end's rank in the pair (TX is 0, RX is 1).
    peer_rank: c_int,
    peer: String,
    boundary: usize,
}

/// The raw communicator handle.
struct Comm(ns::ncclComm_t);
// SAFETY: an NCCL communicator may be used from any host thread; the runtime drives each
// one from a single stream (one boundary, one side), and the walk lease serializes the host
// calls that enqueue on it.
unsafe impl Send for Comm {}
// SAFETY: see `Send`: no two threads enqueue on one communicator at once (walk lease).
unsafe impl Sync for Comm {}

impl NcclLink {
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Enqueue ncclSend of `n` f32 at device address `ptr` on `stream`.
    ///
    /// # Safety
    /// `ptr` holds `n` f32 of device memory on the communicator's device that stays allocated
    /// until the send completes on `stream`, a live stream of that device's context, which is
    /// current on this thread.
    pub unsafe fn send(&self, ptr: u64, n: usize, stream: ns::cudaStream_t) -> Result<(), String> {
        let f32 = ns::ncclDataType_t::ncclFloat32;
        // SAFETY: the caller's contract (see # Safety); the comm is live (owned here).
        let r = unsafe {
            (self.nccl.send)(
                ptr as *const c_void,
                n,
                f32,
                self.peer_rank,
                self.comm.0,
                stream,
            )
        };
        self.checked(r, "ncclSend to")
    }

    /// Enqueue ncclRecv of `n` f32 into device address `ptr` on `stream`.
    ///
    /// # Safety
    /// As `send`, and nothing else reads or writes `ptr[0..n]` until the recv completes
    /// except in stream order after it (the runtime's arrived event).
    pub unsafe fn recv(&self, ptr: u64, n: usize, stream: ns::cudaStream_t) -> Result<(), String> {
        let f32 = ns::ncclDataType_t::ncclFloat32;
        // SAFETY: the caller's contract (see # Safety); the comm is live (owned here).
        let r = unsafe {
            (self.nccl.recv)(
                ptr as *mut c_void,
                n,
                f32,
                self.peer_rank,
                self.comm.0,
                stream,
            )
        };
        self.checked(r, "ncclRecv from")
    }

    fn checked(&self, r: ns::ncclResult_t, what: &str) -> Result<(), String> {
        let ctx = format!("boundary {}: {what} {}", self.boundary, self.peer);
        self.nccl.check(r, &ctx)
    }
}

impl Drop for NcclLink {
    fn drop(&mut self) {
        // After a finished walk every op on the comm has completed (the runtime's barrier);
        // destroy waits for nothing then. A comm whose peer died is aborted instead by the
        // process exiting (the watchdog), never destroyed while an op hangs.
        // SAFETY: the comm was created by ncclCommInitRank and is dropped once.
        let r = unsafe { (self.nccl.comm_destroy)(self.comm.0) };
        if r != ns::ncclResult_t::ncclSuccess {
            // SAFETY: as above; abort frees a comm that destroy refused.
            let _ = unsafe { (self.nccl.comm_abort)(self.comm.0) };
        }
    }
}

/// A communicator of `(me, nranks)` on `dev`, as a link to rank `1 - me` (or to itself in a
/// one-rank communicator). `id` comes from the rank-0 side's `Nccl::unique_id`; how it
/// travels between processes (a rendezvous) is the caller's (`multiproc::links`).
pub fn link(
    be: &super::CudaBackend,
    lib: &Arc<Nccl>,
    id: ns::ncclUniqueId,
    (me, nranks): (c_int, c_int),
    dev: usize,
    boundary: usize,
    peer: String,
) -> Result<Link> {
    let dx = be
        .device(dev)
        .with_context(|| format!("boundary {boundary}: device {dev}"))?;
    // NCCL binds a communicator to the device current on the calling thread.
    dx.ctx
        .bind_to_thread()
        .map_err(|e| anyhow!("boundary {boundary}: bind device {dev}: {e}"))?;
    let mut comm: ns::ncclComm_t = std::ptr::null_mut();
    // SAFETY: ncclCommInitRank writes one communicator handle into `comm`, a valid local;
    // `id` is the communicator's unique id, `me` in 0..nranks.
    let r = unsafe { (lib.comm_init_rank)(&mut comm, nranks, id, me) };
    lib.check(
        r,
        &format!(
            "boundary {boundary}: ncclCommInitRank (rank {me} of {nranks}, device {dev}) with {peer}"
        ),
    )
    .map_err(|e| anyhow!(e))?;
    Ok(Link::Nccl(Arc::new(NcclLink {
        nccl: lib.clone(),
        comm: Comm(comm),
        peer_rank: (nranks - 1) - me,
        peer,
        boundary,
    })))
}

/// `ppn-gate nccl-check`: what of the NCCL transport this machine can run. Loads the library
/// (printing which), makes a unique id (no GPU needed), and with a CUDA device a one-rank
/// communicator that sends `n` values to itself through the backend's link ops (one group,
/// one stream) and compares every bit. Two ranks on one GPU are refused by NCCL, so a real
/// two-process boundary needs two GPUs (scripts/gpu-validate.sh, section nccl).
pub fn check(flag: Option<&Path>, gpu: Option<usize>) -> Result<Vec<String>> {
    let lib = nccl(flag).map_err(|e| anyhow!(e))?;
    let mut out = vec![format!(
        "libnccl {} loaded from {}",
        lib.version_text(),
        lib.path
    )];
    let id = lib.unique_id().map_err(|e| anyhow!(e))?;
    out.push(format!(
        "ncclGetUniqueId: ok ({} bytes, starts {})",
        id.internal.len(),
        &id_to_hex(&id)[..16]
    ));
    let Some(dev) = gpu else {
        out.push("no GPU asked for (--device): send/recv not run".into());
        return Ok(out);
    };
    use crate::backend::Backend;
    let be = super::CudaBackend::open().map_err(|e| anyhow!("--device {dev}: {e}"))?;
    let link = self::link(&be, &lib, id, (0, 1), dev, 0, "itself".into())?;
    let n = 4096usize;
    let s = be.new_stream(dev, "nccl-check")?;
    let src = be.alloc_zeroed(dev, n, &s)?;
    let dst = be.alloc_zeroed(dev, n, &s)?;
    let vals: Vec<f32> = (0..n)
        .map(|i| (i as f32).sin() * 1e3 + f32::EPSILON)
        .collect();
    be.upload(&s, &vals, &src, 0)?;
    // A self send/recv must be one group (NCCL launches the pair together at group end).
    // SAFETY: ncclGroupStart only opens this thread's group.
    lib.check(unsafe { (lib.group_start)() }, "ncclGroupStart")
        .map_err(|e| anyhow!(e))?;
    be.link_send(&s, &src, n, &link, 0)?;
    be.link_recv(&s, &dst, n, &link, 0)?;
    // SAFETY: closes the group opened above, which launches the send/recv on `s`.
    lib.check(unsafe { (lib.group_end)() }, "ncclGroupEnd")
        .map_err(|e| anyhow!(e))?;
    let mut host = be.alloc_readback(dev, n)?;
    let got = be.download_into(&s, &dst, 0, &mut host, n)?;
    let same = got
        .iter()
        .zip(&vals)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    if !same {
        bail!("device {dev}: one-rank NCCL send/recv of {n} values changed bits");
    }
    out.push(format!(
        "device {dev}: one-rank ncclSend/ncclRecv of {n} f32 through the link ops: bit-identical"
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_where_nccl_comes_from() {
        let d = tempfile::tempdir().unwrap();
        // A directory without the library, and a path that does not exist.
        let e = Nccl::load(Some(d.path())).err().unwrap();
        assert!(
            e.contains("libnccl.so.2") && e.contains("nvidia-nccl-cu13"),
            "{e}"
        );
        assert!(e.contains(&d.path().display().to_string()), "{e}");
        let e = Nccl::load(Some(&d.path().join("nope"))).err().unwrap();
        assert!(
            e.contains("no such file or directory") && e.contains("--nccl-lib"),
            "{e}"
        );
        // There, but a device: named as one.
        let e = Nccl::load(Some(Path::new("/dev/zero"))).err().unwrap();
        assert!(
            e.contains("--nccl-lib /dev/zero: is a character device"),
            "{e}"
        );
        // A file that is not a shared library.
        let f = d.path().join("libnccl.so.2");
        std::fs::write(&f, b"not an ELF").unwrap();
        let e = Nccl::load(Some(&f)).err().unwrap();
        assert!(
            e.contains("NCCL could not be loaded") && e.contains("libnccl.so.2"),
            "{e}"
        );
    }

    #[test]
    fn unique_ids_round_trip_through_hex() {
        let mut id = ns::ncclUniqueId { internal: [0; 128] };
        for (i, c) in id.internal.iter_mut().enumerate() {
            *c = (i as u8).wrapping_mul(37) as c_char;
        }
        let h = id_to_hex(&id);
        assert_eq!(h.len(), 256);
        assert_eq!(id_from_hex(&h).unwrap().internal, id.internal);
        assert!(id_from_hex("abc").unwrap_err().contains("256 hex digits"));
        let bad = format!("zz{}", &h[2..]);
        assert!(id_from_hex(&bad).unwrap_err().contains("not hex"));
    }
}
