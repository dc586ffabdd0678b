//! The runtime's own unit tests on the CPU backend and the builtin synthetic model: the
//! walk lease, misuse refused by name, the output ring's host buffers and reads, and what an
//! abandoned walk releases.

use super::*;
use crate::backend::cpu::CpuBackend;
use crate::gguf::GgufFile;
use crate::model::synth::{builtin_spec, synth_gguf};

fn builtin() -> Arc<Model> {
    let f = GgufFile::parse(synth_gguf(&builtin_spec()).unwrap()).unwrap();
    Arc::new(Model::load(&f).unwrap())
}

fn rt(n: usize, window: usize) -> Runtime<CpuBackend> {
    let m = builtin();
    let placement = Placement::from_flags(
        m.cfg.n_layers,
        Some(n),
        None,
        None,
        TransportChoice::Auto,
        4,
        &|a, b| a == b,
    )
    .unwrap();
    let cfg = RuntimeConfig {
        placement,
        max_rows: 2,
        max_seqs: 2,
        ctx: 8,
        window,
        faults: vec![],
        dist: None,
    };
    Runtime::build(Arc::new(CpuBackend::new(4, 0, 0)), m, cfg).unwrap()
}

#[test]
fn a_last_only_chunk_reads_back_the_last_row_of_the_full_chunk() {
    // The prefill bench's walk (head on the chunk's last row) must give that row the
    // bits the prime arm's walk gives it, and one row only; the second chunk checks the
    // cache the first one left.
    let rt = rt(2, 2);
    let vocab = rt.model().cfg.vocab;
    let chunks: [(&[u32], usize); 2] = [(&[5, 9], 0), (&[3, 7], 2)];
    let mut full = Vec::new();
    let mut w = rt.walk().unwrap();
    w.reset_caches().unwrap();
    for (toks, p0) in chunks {
        let p = w.issue_chunk(toks, p0).unwrap();
        let v = w.read_deferred(p).unwrap();
        assert_eq!(v.len(), 2 * vocab);
        full.push(v[vocab..].to_vec());
    }
    w.reset_caches().unwrap();
    for ((toks, p0), want) in chunks.into_iter().zip(&full) {
        let p = w.issue_chunk_last(toks, p0).unwrap();
        let v = w.read_deferred(p).unwrap();
        assert_eq!(v.len(), vocab);
        assert!(v.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    // A planted change of the prompt must show (the comparison can fail).
    w.reset_caches().unwrap();
    let p = w.issue_chunk_last(&[5, 8], 0).unwrap();
    let v = w.read_deferred(p).unwrap();
    assert!(v
        .iter()
        .zip(&full[0])
        .any(|(a, b)| a.to_bits() != b.to_bits()));
}

#[test]
fn walk_lease_is_exclusive_and_fails_fast() {
    let rt = rt(2, 2);
    let w = rt.walk().unwrap();
    let t0 = std::time::Instant::now();
    assert!(matches!(rt.walk(), Err(RtError::LeaseHeld)));
    assert!(
        t0.elapsed() < std::time::Duration::from_millis(100),
        "the lease must not block"
    );
    // From another thread too: the lease is not tied to the thread that took it.
    std::thread::scope(|s| {
        s.spawn(|| assert!(matches!(rt.walk(), Err(RtError::LeaseHeld))));
    });
    drop(w);
    assert!(rt.walk().is_ok());
}

#[test]
fn a_pending_step_from_an_abandoned_walk_is_refused_not_read_stale() {
    let rt = rt(2, 2);
    let mut w = rt.walk().unwrap();
    let p = w.issue(&[1], &[0]).unwrap();
    drop(w); // drains and releases the unread slot
    let mut w = rt.walk().unwrap();
    let e = w.read_eager(p).unwrap_err();
    assert!(
        e.to_string().contains("not an unread step of this walk"),
        "{e}"
    );
    // The walk itself is still good.
    let q = w.issue(&[2], &[0]).unwrap();
    assert!(w.read_deferred(q).is_ok());
}

#[test]
fn more_steps_in_flight_than_the_window_is_refused() {
    let rt = rt(2, 2);
    let mut w = rt.walk().unwrap();
    let a = w.issue(&[1], &[0]).unwrap();
    let b = w.issue(&[2], &[1]).unwrap();
    let e = w.issue(&[3], &[2]).unwrap_err();
    assert!(e.to_string().contains("still holds unread step 0"), "{e}");
    w.read_deferred(a).unwrap();
    let c = w.issue(&[3], &[2]).unwrap();
    w.read_deferred(b).unwrap();
    w.read_deferred(c).unwrap();
}

#[test]
fn misuse_is_an_error_naming_the_value() {
    let rt = rt(3, 1);
    let mut w = rt.walk().unwrap();
    let cases: [(&[u32], &[usize], &str); 4] = [
        (&[1, 2, 3], &[0, 0, 0], "3 rows"),
        (&[1], &[8], "position 8 beyond context 8"),
        (&[99_999], &[0], "token 99999 outside vocab"),
        (&[1], &[0, 1], "1 rows with 2 positions"),
    ];
    for (toks, pos, want) in cases {
        let e = w.issue(toks, pos).unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} should contain {want:?}");
    }
}

#[test]
fn reads_reuse_each_output_slot_s_host_buffer_and_return_the_step_s_logits() {
    // Window 2: steps t and t+2 share ring slot t % 2. Every read lends that slot's one
    // host buffer (no allocation per step), and what it lends is step t's logits, not a
    // stale step's: each equals the host forward's (`HostSession`, which the CPU
    // runtime matches bit for bit: tests/runtime_numerics.rs), computed without any
    // readback.
    let piped = rt(2, 2);
    let vocab = piped.model().cfg.vocab;
    let mut host = crate::model::HostSession::new(piped.model(), 2, 8);
    let mut w = piped.walk().unwrap();
    let mut ptrs = Vec::new();
    let mut inflight = std::collections::VecDeque::new();
    for i in 0..8 {
        // Read the oldest step when the window is full or nothing is left to issue; the
        // last two through the caller stream (both streams' reads share the slot's buffer).
        if inflight.len() == 2 || (i >= 6 && !inflight.is_empty()) {
            let (j, p, want): (usize, Pending, Vec<f32>) = inflight.pop_front().unwrap();
            let got = if j < 4 {
                w.read_deferred(p)
            } else {
                w.read_eager(p)
            }
            .unwrap();
            assert_eq!(got.len(), 2 * vocab);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            let diff = crate::receipt::first_diff(&want, got);
            assert!(
                same,
                "step {j}: first differing logit (index, host, read) {diff:?}"
            );
            ptrs.push(got.as_ptr());
        }
        if i < 6 {
            let toks = [(7 + 5 * i) as u32, (3 + 11 * i) as u32];
            let want = host.step(&toks, i);
            inflight.push_back((i, w.issue(&toks, &[i, i]).unwrap(), want));
        }
    }
    assert_eq!(ptrs.len(), 6);
    for t in 0..4 {
        assert_eq!(
            ptrs[t],
            ptrs[t + 2],
            "steps {t} and {} share slot {}",
            t + 2,
            t % 2
        );
        assert_ne!(
            ptrs[t],
            ptrs[t + 1],
            "steps {t} and {} use different slots",
            t + 1
        );
    }
}

#[test]
fn a_download_larger_than_its_host_buffer_is_an_error_naming_both() {
    let be = CpuBackend::new(1, 0, 0);
    let s = be.new_stream(0, "t").unwrap();
    let src = be.alloc_zeroed(0, 8, &s).unwrap();
    let mut host = be.alloc_readback(0, 4).unwrap();
    let e = be.download_into(&s, &src, 0, &mut host, 8).unwrap_err();
    assert!(
        e.to_string().contains("8 values") && e.to_string().contains("of 4"),
        "{e}"
    );
    assert_eq!(
        be.download_into(&s, &src, 4, &mut host, 4).unwrap(),
        &[0.0; 4]
    );
}

#[test]
fn an_abandoned_walk_releases_its_slots() {
    let rt = rt(2, 1);
    {
        let mut w = rt.walk().unwrap();
        let _p = w.issue(&[1], &[0]).unwrap();
        // dropped with the step unread (as an error mid-walk would)
    }
    let mut w = rt.walk().unwrap();
    let p = w.issue(&[1], &[0]).unwrap();
    assert_eq!(w.read_eager(p).unwrap().len(), rt.model().cfg.vocab);
}
