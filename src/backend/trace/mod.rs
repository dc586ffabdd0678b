//! `--trace`: what every stream ran and when, as a Chrome/Perfetto trace. Both backends
//! fill one `Tracer` (tracks, slices, flows) and share its JSON writer and busy-overlap sum.
//!
//! Timestamps come from where the work ran, never from the enqueue (which says when the host
//! asked, not when the work happened): the CPU backend's stream worker reads the clock around
//! each op it runs; the CUDA backend records timing events on the stream around each piece
//! of work and reads them after the phase (`cuda::tracing`). Each slice carries the phase
//! (reference, an arm), the walk step and the piece of work (embed, layers, TX/RX with its
//! slot, head, readback) the host tagged its stream with when it enqueued it. An event wait
//! adds a flow from the record that released it. Tracing touches no value the ops compute:
//! only timing.

pub mod check;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The pieces of one decode step the runtime names (`Backend::trace_begin`): a stream's ops
/// from a `trace_begin` to its `trace_end` belong to that piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// The caller's upload of the step's tokens.
    Input,
    Embed,
    /// A stage's layers for the step.
    Layers,
    /// A boundary's TX copy into its double-buffered slot (the slot index).
    Tx(usize),
    /// A boundary's RX copy out of its slot.
    Rx(usize),
    Head,
    /// The logits' download (caller stream in eager, readback stream in pipelined arms).
    Readback,
}

impl Piece {
    pub fn name(self) -> &'static str {
        match self {
            Piece::Input => "input",
            Piece::Embed => "embed",
            Piece::Layers => "layers",
            Piece::Tx(_) => "tx",
            Piece::Rx(_) => "rx",
            Piece::Head => "head",
            Piece::Readback => "readback",
        }
    }

    pub fn slot(self) -> Option<usize> {
        match self {
            Piece::Tx(k) | Piece::Rx(k) => Some(k),
            _ => None,
        }
    }
}

/// One op (CPU) or piece of work (CUDA) a stream ran: `[start_us, end_us]` from the
/// tracer's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    pub track: usize,
    pub name: &'static str,
    pub phase: usize,
    pub step: Option<u64>,
    /// The piece of the step the op belongs to (None: outside any, e.g. a build's fill).
    pub piece: Option<Piece>,
    pub start_us: f64,
    pub end_us: f64,
}

/// A cross-stream edge: the record at (`src_track`, `src_us`) released the wait at
/// (`dst_track`, `dst_us`).
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    pub src_track: usize,
    pub src_us: f64,
    pub dst_track: usize,
    pub dst_us: f64,
}

#[derive(Default)]
struct Data {
    phases: Vec<String>,
    /// Track names: "<phase when the stream was made>/<stream label>".
    tracks: Vec<String>,
    slices: Vec<Slice>,
    flows: Vec<Flow>,
    /// What a (phase, step) carried, as the arm named it (`Tracer::label_step`; the serve
    /// arm: each request's positions), written into every slice of that step.
    labels: std::collections::HashMap<(usize, u64), String>,
}

/// The ops that are not work: a stream blocked on an event, publishing one (a counter
/// bump), or a host sync marker.
pub fn is_idle(name: &str) -> bool {
    matches!(name, "event wait" | "event record" | "synchronize")
}

pub struct Tracer {
    t0: Instant,
    phase: AtomicUsize,
    data: Mutex<Data>,
}

impl Default for Tracer {
    fn default() -> Tracer {
        Tracer::new()
    }
}

impl Tracer {
    pub fn new() -> Tracer {
        let data = Data {
            phases: vec!["build".into()],
            ..Data::default()
        };
        Tracer {
            t0: Instant::now(),
            phase: AtomicUsize::new(0),
            data: Mutex::new(data),
        }
    }

    fn data(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn now_us(&self) -> f64 {
        self.t0.elapsed().as_secs_f64() * 1e6
    }

    /// Ops enqueued from now on belong to phase `name` (the host runs phases one after the
    /// other and each ends with its reads, so the enqueue-time phase is the op's phase).
    pub fn set_phase(&self, name: &str) {
        let mut d = self.data();
        let i = match d.phases.iter().position(|p| p == name) {
            Some(i) => i,
            None => {
                d.phases.push(name.to_string());
                d.phases.len() - 1
            }
        };
        self.phase.store(i, Ordering::Relaxed);
    }

    pub fn phase(&self) -> usize {
        self.phase.load(Ordering::Relaxed)
    }

    /// A new stream's track, named after the phase it was made in and its label.
    pub fn add_track(&self, label: &str) -> usize {
        let mut d = self.data();
        let name = format!("{}/{label}", d.phases[self.phase()]);
        d.tracks.push(name);
        d.tracks.len() - 1
    }

    /// Step `step` of the current phase carried `label` (the serve arm: `r3:12 r7:0-3`,
    /// request 3's position 12 and request 7's positions 0..=3): every slice of that step
    /// gets it as its `requests` arg. A name only: no op or time changes.
    pub fn label_step(&self, step: u64, label: String) {
        let ph = self.phase();
        self.data().labels.insert((ph, step), label);
    }

    pub fn push_slice(&self, s: Slice) {
        self.data().slices.push(s);
    }

    pub fn push_flow(&self, f: Flow) {
        self.data().flows.push(f);
    }

    pub fn tracks(&self) -> Vec<String> {
        self.data().tracks.clone()
    }

    pub fn slices(&self) -> Vec<Slice> {
        self.data().slices.clone()
    }

    pub fn phase_index(&self, name: &str) -> Option<usize> {
        self.data().phases.iter().position(|p| p == name)
    }

    /// The fraction of phase `name`'s wall time (first op start to last op end, any stream)
    /// in which two or more stage streams were running work (event waits and records are
    /// not work).
    /// None when the phase ran nothing.
    pub fn overlap(&self, name: &str) -> Option<f64> {
        let d = self.data();
        let ph = d.phases.iter().position(|p| p == name)?;
        let stage = |t: usize| {
            d.tracks[t]
                .rsplit('/')
                .next()
                .is_some_and(|l| l.starts_with("stage"))
        };
        let of_phase: Vec<&Slice> = d.slices.iter().filter(|s| s.phase == ph).collect();
        let t0 = of_phase.iter().map(|s| s.start_us).reduce(f64::min)?;
        let t1 = of_phase.iter().map(|s| s.end_us).reduce(f64::max)?;
        // Sweep over busy-slice edges: one stream's slices never overlap, so the count of
        // open slices is the count of busy stages.
        let mut edges: Vec<(f64, i32)> = of_phase
            .iter()
            .filter(|s| stage(s.track) && !is_idle(s.name))
            .flat_map(|s| [(s.start_us, 1), (s.end_us, -1)])
            .collect();
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut busy, mut open, mut last) = (0.0, 0, t0);
        for (t, delta) in edges {
            if open >= 2 {
                busy += t - last;
            }
            open += delta;
            last = t;
        }
        Some(if t1 > t0 { busy / (t1 - t0) } else { 0.0 })
    }

    /// The Chrome trace-event JSON (`traceEvents`): a named thread per track, a complete
    /// event ("X") per op with its phase and step, and a flow ("s"/"f") per event wait.
    pub fn to_json(&self) -> String {
        let d = self.data();
        let mut ev = Vec::with_capacity(d.tracks.len() + d.slices.len() + 2 * d.flows.len());
        for (tid, name) in d.tracks.iter().enumerate() {
            ev.push(serde_json::json!({
                "ph": "M", "name": "thread_name", "pid": 1, "tid": tid,
                "args": {"name": name},
            }));
        }
        for s in &d.slices {
            let mut args = serde_json::json!({
                "phase": d.phases[s.phase], "step": s.step,
                "piece": s.piece.map(Piece::name), "slot": s.piece.and_then(Piece::slot),
            });
            if let Some(l) = s.step.and_then(|k| d.labels.get(&(s.phase, k))) {
                args["requests"] = serde_json::Value::String(l.clone());
            }
            ev.push(serde_json::json!({
                "ph": "X", "name": s.name, "cat": d.phases[s.phase], "pid": 1, "tid": s.track,
                "ts": s.start_us, "dur": s.end_us - s.start_us, "args": args,
            }));
        }
        for (id, f) in d.flows.iter().enumerate() {
            ev.push(serde_json::json!({
                "ph": "s", "id": id, "name": "event", "cat": "event", "pid": 1,
                "tid": f.src_track, "ts": f.src_us,
            }));
            ev.push(serde_json::json!({
                "ph": "f", "bp": "e", "id": id, "name": "event", "cat": "event", "pid": 1,
                "tid": f.dst_track, "ts": f.dst_us,
            }));
        }
        let doc = serde_json::json!({"traceEvents": ev, "displayTimeUnit": "ms"});
        doc.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(track: usize, name: &'static str, a: f64, b: f64) -> Slice {
        Slice {
            track,
            name,
            phase: 1,
            step: Some(0),
            piece: None,
            start_us: a,
            end_us: b,
        }
    }

    /// Two stage tracks busy together over [2, 4] of a [0, 10] phase: 0.2. A wait on a third
    /// stage and the caller's work do not count as stage work.
    #[test]
    fn overlap_counts_only_time_with_two_busy_stages() {
        let t = Tracer::new();
        t.set_phase("pipelined");
        for l in ["stage0@cpu0", "stage1@cpu0", "stage2@cpu0", "caller@cpu0"] {
            t.add_track(l);
        }
        t.push_slice(slice(0, "layer", 0.0, 4.0));
        t.push_slice(slice(1, "layer", 2.0, 6.0));
        t.push_slice(slice(2, "event wait", 0.0, 10.0));
        t.push_slice(slice(3, "upload", 1.0, 9.0));
        assert_eq!(t.overlap("pipelined"), Some(0.2));
        assert_eq!(t.overlap("eager"), None);
    }
}
