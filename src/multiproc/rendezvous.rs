//! The rendezvous: a small key-value store through which the members of a multi-process
//! gate find each other (hellos, link addresses, NCCL unique ids, results). Two kinds:
//!
//! - a shared directory (`--rendezvous /path/dir`): one file per key, written atomically
//!   (temporary file + rename); a reader polls until the file exists. Works on one host and
//!   across hosts on a shared file system.
//! - a TCP address (`--rendezvous host:port`): rank 0 serves the store on that address,
//!   every member (rank 0 too) is a client. One line per request, JSON.
//!
//! Every `get` has a timeout: a member that never arrives is an error naming the key (and
//! so the rank), never a wait forever.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone)]
pub enum Rendezvous {
    Dir(PathBuf),
    Tcp {
        addr: String,
        /// How long a request keeps trying to reach the store (`--rendezvous-timeout`; a
        /// store that never answers is an error after it, not a wait of its own).
        reach: Duration,
        /// Rank 0 only: the server thread's store (kept alive with the member).
        _server: Option<Arc<TcpServer>>,
    },
}

/// Whether `addr` names a TCP endpoint (`host:port`) rather than a directory.
fn is_tcp(addr: &str) -> bool {
    !addr.contains('/')
        && addr
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
}

impl Rendezvous {
    /// Open the rendezvous named by `addr` as member `rank`: a TCP address is served by
    /// rank 0; a directory must exist and hold no earlier run's key of this rank.
    pub fn open(addr: &str, rank: usize) -> Result<Rendezvous, String> {
        Rendezvous::open_within(addr, rank, Duration::from_secs(30))
    }

    /// `open`, a TCP store's requests giving up after `reach` (the member's
    /// `--rendezvous-timeout`) when the store cannot be reached.
    pub fn open_within(addr: &str, rank: usize, reach: Duration) -> Result<Rendezvous, String> {
        if is_tcp(addr) {
            let server = if rank == 0 {
                Some(TcpServer::start(addr)?)
            } else {
                None
            };
            return Ok(Rendezvous::Tcp {
                addr: addr.to_string(),
                reach,
                _server: server,
            });
        }
        let dir = PathBuf::from(addr);
        if !dir.is_dir() {
            return Err(format!(
                "--rendezvous {addr}: not a directory (or a TCP host:port); create it, empty, on a file system every member sees"
            ));
        }
        if dir.join(key_file(&format!("hello/{rank}"))).exists() {
            return Err(format!(
                "--rendezvous {addr}: holds an earlier run's files (hello of rank {rank}); use an empty directory per gate"
            ));
        }
        Ok(Rendezvous::Dir(dir))
    }

    pub fn put(&self, key: &str, val: &str) -> Result<(), String> {
        let reach = match self {
            Rendezvous::Tcp { reach, .. } => *reach,
            Rendezvous::Dir(_) => Duration::from_secs(30),
        };
        self.put_within(key, val, reach)
    }

    /// `put`, giving up after `timeout` when a TCP store cannot be reached.
    pub fn put_within(&self, key: &str, val: &str, timeout: Duration) -> Result<(), String> {
        match self {
            Rendezvous::Dir(d) => {
                let p = d.join(key_file(key));
                crate::receipt::write_atomic(&p, val.as_bytes())
                    .map_err(|e| format!("rendezvous {}: writing {key}: {e}", d.display()))
            }
            Rendezvous::Tcp { addr, .. } => {
                let r = tcp_request(
                    addr,
                    &serde_json::json!({"op": "put", "key": key, "val": val}),
                    timeout,
                )?;
                if r.get("ok").and_then(|v| v.as_bool()) == Some(true) {
                    Ok(())
                } else {
                    Err(format!("rendezvous {addr}: put {key}: {r}"))
                }
            }
        }
    }

    /// The value of `key`, waiting up to `timeout` for some member to put it. `who` names
    /// the member expected to (for the error). A member that failed and published `abort`
    /// ends the wait at once with its message.
    pub fn get(&self, key: &str, timeout: Duration, who: &str) -> Result<String, String> {
        let t0 = Instant::now();
        loop {
            if let Some(v) = self.try_get(key)? {
                return Ok(v);
            }
            if key != "abort" {
                if let Some(why) = self.try_get("abort")? {
                    return Err(format!(
                        "rendezvous: the gate was aborted while waiting for {who}'s {key:?}: {why}"
                    ));
                }
            }
            if t0.elapsed() > timeout {
                return Err(format!(
                    "rendezvous: {who} did not publish {key:?} within {} s (the member died, hangs, or never started)",
                    timeout.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The value of `key` if some member has put it.
    fn try_get(&self, key: &str) -> Result<Option<String>, String> {
        match self {
            Rendezvous::Dir(d) => {
                let p = d.join(key_file(key));
                match std::fs::read_to_string(&p) {
                    Ok(s) => Ok(Some(s)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(format!("rendezvous {}: {key}: {e}", p.display())),
                }
            }
            Rendezvous::Tcp { addr, reach, .. } => {
                // The server answers at once (found or not), so a dead server is seen too.
                let r = tcp_request(addr, &serde_json::json!({"op": "get", "key": key}), *reach)?;
                Ok(r.get("val").and_then(|v| v.as_str()).map(str::to_string))
            }
        }
    }
}

/// Keys are `a/b` paths; a directory store flattens them into one file name.
fn key_file(key: &str) -> String {
    key.replace('/', "--")
}

fn tcp_request(
    addr: &str,
    req: &serde_json::Value,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let t0 = Instant::now();
    // Rank 0 may not be listening yet: retry the connection until the timeout.
    let mut s = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if t0.elapsed() > timeout => {
                return Err(format!(
                    "rendezvous {addr}: cannot reach rank 0's store for {} s: {e}",
                    timeout.as_secs()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let e = |e: std::io::Error| format!("rendezvous {addr}: {e}");
    s.set_read_timeout(Some(timeout)).map_err(e)?;
    let mut line = req.to_string();
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(e)?;
    let mut resp = String::new();
    BufReader::new(s).read_line(&mut resp).map_err(e)?;
    serde_json::from_str(&resp)
        .map_err(|err| format!("rendezvous {addr}: bad answer {resp:?}: {err}"))
}

/// Rank 0's store behind a TCP rendezvous.
pub struct TcpServer {
    map: Mutex<HashMap<String, String>>,
    changed: Condvar,
}

impl TcpServer {
    fn start(addr: &str) -> Result<Arc<TcpServer>, String> {
        let l = TcpListener::bind(addr)
            .map_err(|e| format!("--rendezvous {addr}: rank 0 cannot listen there: {e}"))?;
        let srv = Arc::new(TcpServer {
            map: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
        });
        let s2 = srv.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let s3 = s2.clone();
                std::thread::spawn(move || {
                    let _ = s3.serve(c);
                });
            }
        });
        Ok(srv)
    }

    fn serve(&self, c: TcpStream) -> std::io::Result<()> {
        c.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut line = String::new();
        BufReader::new(c.try_clone()?).read_line(&mut line)?;
        let req: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let key = req
            .get("key")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_string();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let resp = match req.get("op").and_then(|o| o.as_str()) {
            Some("put") => {
                let v = req.get("val").and_then(|v| v.as_str()).unwrap_or("");
                map.insert(key, v.to_string());
                self.changed.notify_all();
                serde_json::json!({"ok": true})
            }
            Some("get") => match map.get(&key) {
                Some(v) => serde_json::json!({"val": v}),
                None => serde_json::json!({"missing": key}),
            },
            _ => serde_json::json!({"error": format!("bad request {line:?}")}),
        };
        drop(map);
        let mut out = resp.to_string();
        out.push('\n');
        let mut c = c;
        c.write_all(out.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_and_dir_addresses_are_told_apart() {
        assert!(is_tcp("127.0.0.1:29500"));
        assert!(is_tcp("node01:29500"));
        assert!(!is_tcp("/tmp/rdv"));
        assert!(!is_tcp("rdv"));
        assert!(!is_tcp("./a:1"));
    }

    /// A TCP store nobody serves: every request gives up after the member's timeout (it
    /// waited a fixed 30 s per request, a put and the abort put a minute, whatever
    /// --rendezvous-timeout said).
    #[test]
    fn an_unreachable_tcp_store_fails_within_the_members_timeout() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port(); // closed again: nothing listens there
        let addr = format!("127.0.0.1:{port}");
        let r = Rendezvous::open_within(&addr, 1, Duration::from_millis(300)).unwrap();
        let t0 = Instant::now();
        let e = r.put("hello/1", "x").unwrap_err();
        assert!(e.contains("cannot reach rank 0's store"), "{e}");
        let e = r
            .get("hello/0", Duration::from_secs(60), "rank 0")
            .unwrap_err();
        assert!(e.contains("cannot reach"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn a_directory_store_round_trips_and_times_out_naming_the_member() {
        let d = tempfile::tempdir().unwrap();
        let r = Rendezvous::open(d.path().to_str().unwrap(), 1).unwrap();
        r.put("hello/1", "x").unwrap();
        assert_eq!(
            r.get("hello/1", Duration::from_secs(1), "rank 1").unwrap(),
            "x"
        );
        let e = r
            .get("hello/2", Duration::from_millis(100), "rank 2")
            .unwrap_err();
        assert!(e.contains("rank 2 did not publish \"hello/2\""), "{e}");
        // A second run in the same directory is refused, not mixed with the first.
        let e = Rendezvous::open(d.path().to_str().unwrap(), 1)
            .err()
            .unwrap();
        assert!(e.contains("earlier run"), "{e}");
    }

    #[test]
    fn a_tcp_store_served_by_rank_0_answers_every_member() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr = format!("127.0.0.1:{port}");
        let r0 = Rendezvous::open(&addr, 0).unwrap();
        let r1 = Rendezvous::open(&addr, 1).unwrap();
        r1.put("link/0", "127.0.0.1:1").unwrap();
        assert_eq!(
            r0.get("link/0", Duration::from_secs(2), "rank 1").unwrap(),
            "127.0.0.1:1"
        );
        let e = r1
            .get("nope", Duration::from_millis(100), "rank 0")
            .unwrap_err();
        assert!(e.contains("rank 0 did not publish"), "{e}");
    }
}
