//! `--transport ipc`: the TEST transport between the processes of a multi-process gate on
//! the CPU backend (one TCP connection per boundary; NCCL is the real transport, on CUDA).
//! It exists so that the multi-process runtime's logic (rank/stage mapping, links, step
//! order, member failure) runs in CI without a GPU. This is the link alone (and its
//! heartbeat, `watchdog`); who listens, who connects and where they meet is `multiproc::links`.
//!
//! A message is one walk step of one boundary: a 24-byte header (magic, boundary, step,
//! value count) and the values as little-endian f32. The receiver checks every header
//! field against the step it expects, so a lost, repeated or reordered message is an error
//! naming both steps, never a silently shifted residual.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MAGIC: u32 = 0x4c4e_5050; // "PPNL"

/// One end of one cross-process boundary.
pub struct IpcLink {
    boundary: usize,
    peer: String,
    timeout: Duration,
    // One op at a time uses it (the link stream, or the TX stage's stream); the mutex only
    // makes the handle shareable between the stream's worker and the runtime.
    sock: Mutex<TcpStream>,
    /// A failed send or receive calls this (a multi-process member's: report, publish abort,
    /// end the process) instead of returning an error to a stream whose dependants would
    /// then wait for events that never come.
    fatal: Option<fn(String)>,
}

impl IpcLink {
    /// The RX end: accept the TX member's connection on `listener` within `timeout`, and
    /// check its hello (the boundary number).
    pub fn accept(
        listener: &TcpListener,
        boundary: usize,
        peer: String,
        timeout: Duration,
    ) -> Result<IpcLink, String> {
        let t0 = Instant::now();
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("boundary {boundary}: listener: {e}"))?;
        let sock = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if t0.elapsed() > timeout {
                        return Err(format!(
                            "boundary {boundary}: {peer} did not connect within {} s",
                            timeout.as_secs()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(format!("boundary {boundary}: accept from {peer}: {e}")),
            }
        };
        let link = IpcLink::new(sock, boundary, peer, timeout)?;
        let mut hello = [0u8; 8];
        link.read_exact_named(&mut hello, "hello")?;
        let (m, b) = (
            u32::from_le_bytes(hello[0..4].try_into().expect("4 bytes")),
            u32::from_le_bytes(hello[4..8].try_into().expect("4 bytes")),
        );
        if m != MAGIC || b as usize != boundary {
            return Err(format!(
                "boundary {boundary}: {} sent hello for boundary {b} (magic {m:#x}): not this gate's link",
                link.peer
            ));
        }
        Ok(link)
    }

    /// The TX end: connect to the RX member at `addr` and say which boundary this is.
    pub fn connect(
        addr: &str,
        boundary: usize,
        peer: String,
        timeout: Duration,
    ) -> Result<IpcLink, String> {
        let sock = TcpStream::connect(addr)
            .map_err(|e| format!("boundary {boundary}: connect to {peer} at {addr}: {e}"))?;
        let link = IpcLink::new(sock, boundary, peer, timeout)?;
        let mut hello = MAGIC.to_le_bytes().to_vec();
        hello.extend_from_slice(&(boundary as u32).to_le_bytes());
        link.write_named(&hello, "hello")?;
        Ok(link)
    }

    fn new(
        sock: TcpStream,
        boundary: usize,
        peer: String,
        timeout: Duration,
    ) -> Result<IpcLink, String> {
        let e = |e: std::io::Error| format!("boundary {boundary} link to {peer}: {e}");
        sock.set_nonblocking(false).map_err(e)?;
        sock.set_nodelay(true).map_err(e)?;
        // A member that hangs turns into an error after `timeout`, never a wait forever.
        sock.set_read_timeout(Some(timeout)).map_err(e)?;
        sock.set_write_timeout(Some(timeout)).map_err(e)?;
        Ok(IpcLink {
            boundary,
            peer,
            timeout,
            sock: Mutex::new(sock),
            fatal: None,
        })
    }

    /// This link's failures call `on_fail` (see `fatal`), which is expected not to return.
    pub fn fatal(mut self, on_fail: fn(String)) -> IpcLink {
        self.fatal = Some(on_fail);
        self
    }

    /// The same link waiting `timeout` for data from now on.
    pub fn with_timeout(self, timeout: Duration) -> Result<IpcLink, String> {
        {
            let s = self.sock.lock().unwrap_or_else(|p| p.into_inner());
            let e = |e: std::io::Error| format!("boundary {}: {e}", self.boundary);
            s.set_read_timeout(Some(timeout)).map_err(e)?;
            s.set_write_timeout(Some(timeout)).map_err(e)?;
        }
        Ok(IpcLink { timeout, ..self })
    }

    fn fail(&self, msg: String) -> String {
        if let Some(on_fail) = self.fatal {
            on_fail(msg.clone());
        }
        msg
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    fn io_err(&self, what: &str, e: std::io::Error) -> String {
        let b = self.boundary;
        match e.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::BrokenPipe
            | ErrorKind::ConnectionAborted => format!(
                "boundary {b}: {} closed the link during {what} (the member exited or died)",
                self.peer
            ),
            ErrorKind::WouldBlock | ErrorKind::TimedOut => format!(
                "boundary {b}: no progress from {} for {} s during {what} (the member hangs or died; --peer-timeout sets the limit)",
                self.peer,
                self.timeout.as_secs()
            ),
            _ => format!("boundary {b}: {what} with {}: {e}", self.peer),
        }
    }

    fn read_exact_named(&self, buf: &mut [u8], what: &str) -> Result<(), String> {
        let mut s = self.sock.lock().unwrap_or_else(|p| p.into_inner());
        s.read_exact(buf)
            .map_err(|e| self.fail(self.io_err(what, e)))
    }

    fn write_named(&self, buf: &[u8], what: &str) -> Result<(), String> {
        let mut s = self.sock.lock().unwrap_or_else(|p| p.into_inner());
        s.write_all(buf)
            .map_err(|e| self.fail(self.io_err(what, e)))
    }

    /// Send walk step `step`'s residual (blocks only while the socket buffer is full).
    pub fn send(&self, step: u64, vals: &[f32]) -> Result<(), String> {
        let mut msg = Vec::with_capacity(24 + vals.len() * 4);
        msg.extend_from_slice(&MAGIC.to_le_bytes());
        msg.extend_from_slice(&(self.boundary as u32).to_le_bytes());
        msg.extend_from_slice(&step.to_le_bytes());
        msg.extend_from_slice(&(vals.len() as u32).to_le_bytes());
        msg.extend_from_slice(&0u32.to_le_bytes());
        for v in vals {
            msg.extend_from_slice(&v.to_le_bytes());
        }
        self.write_named(&msg, &format!("send of step {step}"))
    }

    /// Receive walk step `step`'s residual of `n` values (blocks until it arrives, the
    /// peer closes the link, or the timeout passes).
    pub fn recv(&self, step: u64, n: usize) -> Result<Vec<f32>, String> {
        let what = format!("receive of step {step}");
        let mut h = [0u8; 24];
        self.read_exact_named(&mut h, &what)?;
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let got_step = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        let (m, b, got_n) = (u32_at(0), u32_at(4) as usize, u32_at(16) as usize);
        if m != MAGIC || b != self.boundary || got_step != step || got_n != n {
            return Err(self.fail(format!(
                "boundary {}: expected step {step} ({n} values) from {}, got boundary {b} step {got_step} ({got_n} values, magic {m:#x}): the members' walks differ",
                self.boundary, self.peer
            )));
        }
        let mut bytes = vec![0u8; n * 4];
        self.read_exact_named(&mut bytes, &what)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    }
}

/// Heartbeats over a link's control connection: this end writes a byte every
/// `timeout / 4` (at least every second) and expects one from the other end within
/// `timeout`. A neighbour that dies (EOF) or hangs (silence) calls `on_fail` with a message
/// naming it, unless `finished` says this member's part of the gate is done (then a closed
/// connection is the neighbour's orderly exit). NCCL links need it: a peer that dies leaves
/// ops that never complete on the GPU, and a host wait on them would never return.
pub fn watchdog(
    link: IpcLink,
    finished: &'static std::sync::atomic::AtomicBool,
    on_fail: impl FnOnce(String) + Send + 'static,
) -> Result<(), String> {
    let sock = link.sock.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut w = sock
        .try_clone()
        .map_err(|e| format!("boundary {} watchdog: {e}", link.boundary))?;
    let beat = (link.timeout / 4).min(Duration::from_secs(1));
    std::thread::spawn(move || loop {
        if w.write_all(b"h").is_err() {
            return; // the reader reports why
        }
        std::thread::sleep(beat);
    });
    let (b, peer, timeout) = (link.boundary, link.peer, link.timeout);
    std::thread::spawn(move || {
        let mut r = sock;
        let mut one = [0u8; 1];
        loop {
            if let Err(e) = r.read_exact(&mut one) {
                if finished.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let why = match e.kind() {
                    ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                        format!("no heartbeat for {} s (it hangs)", timeout.as_secs())
                    }
                    _ => format!("its heartbeat connection closed ({e}): it exited or died"),
                };
                on_fail(format!("boundary {b}: {peer}: {why}"));
                return;
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(timeout: Duration) -> (IpcLink, IpcLink) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            IpcLink::connect(&addr, 3, "rank 1 (stage 4)".into(), timeout).unwrap()
        });
        let rx = IpcLink::accept(&l, 3, "rank 0 (stage 3)".into(), timeout).unwrap();
        (t.join().unwrap(), rx)
    }

    #[test]
    fn values_cross_bit_exact_and_a_wrong_step_is_named() {
        let (tx, rx) = pair(Duration::from_secs(5));
        let v = vec![1.5f32, f32::NAN, -0.0, f32::MIN_POSITIVE];
        tx.send(7, &v).unwrap();
        let got = rx.recv(7, 4).unwrap();
        assert_eq!(
            got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        tx.send(9, &v).unwrap();
        let e = rx.recv(8, 4).unwrap_err();
        assert!(e.contains("expected step 8") && e.contains("step 9"), "{e}");
    }

    #[test]
    fn the_watchdog_names_a_neighbour_that_hangs_or_dies_but_not_one_that_finished() {
        use std::sync::atomic::AtomicBool;
        static DONE: AtomicBool = AtomicBool::new(false);
        static NOT_DONE: AtomicBool = AtomicBool::new(false);
        // A silent neighbour (its end never beats): the timeout names it.
        let (tx, rx) = pair(Duration::from_millis(400));
        let (s, r) = std::sync::mpsc::channel();
        watchdog(rx, &NOT_DONE, move |m| s.send(m).unwrap()).unwrap();
        let m = r.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(m.contains("rank 0 (stage 3): no heartbeat"), "{m}");
        drop(tx);
        // Two beating ends: no failure while both live; one ends: the other names it.
        let (tx, rx) = pair(Duration::from_millis(400));
        let (s, r) = std::sync::mpsc::channel();
        watchdog(rx, &NOT_DONE, move |m| s.send(m).unwrap()).unwrap();
        let (s2, r2) = std::sync::mpsc::channel::<String>();
        watchdog(tx, &DONE, move |m| s2.send(m).unwrap()).unwrap();
        assert!(
            r.recv_timeout(Duration::from_millis(1200)).is_err(),
            "both alive"
        );
        // The TX end finished: its own watchdog stays quiet when the connection goes.
        DONE.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(r2.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_closed_or_silent_peer_is_an_error_naming_it() {
        let (tx, rx) = pair(Duration::from_millis(300));
        let t0 = Instant::now();
        let e = rx.recv(0, 4).unwrap_err();
        assert!(e.contains("no progress from rank 0 (stage 3)"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(3));
        drop(tx);
        let e = rx.recv(0, 4).unwrap_err();
        assert!(e.contains("rank 0 (stage 3) closed the link"), "{e}");
    }
}
