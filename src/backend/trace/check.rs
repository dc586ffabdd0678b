//! `ppn-gate trace-check`: the pipeline bars on any trace file this tool wrote (either
//! backend), read back from its JSON:
//! 1. every stage stream of the N-stage runtime has a work slice (not an event wait or
//!    record) for every step of the phase;
//! 2. the slices of one stream never overlap (a stream runs one thing at a time);
//! 3. the overlap is visible: for some stage s and step k, stage s starts step k+1's work
//!    before stage s+1 has finished step k's;
//! 4. (serve) every work slice of a step names the requests and positions it carried (its
//!    `requests` arg), so a slow or failing step can be read as "these requests".

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::is_idle;

/// Slack for the float round trip of `ts`/`dur` (µs): far below any clock's resolution.
const EPS_US: f64 = 1e-3;

/// What the check found: one line per bar, and whether all of them held.
#[derive(Debug)]
pub struct Report {
    pub lines: Vec<String>,
    pub pass: bool,
}

struct Sl {
    /// The slice's index in traceEvents (an error quotes its ts and dur as written).
    at: usize,
    name: String,
    phase: Option<String>,
    step: Option<u64>,
    requests: Option<String>,
    ts: f64,
    end: f64,
}

/// The phases the bars are checked on: the decode arms, one position per step.
pub const PHASES: [&str; 4] = ["eager", "pipelined", "batched", "serve"];

/// Why the bars cannot be checked on `phase` (None: one of `PHASES`).
pub fn phase_problem(phase: &str) -> Option<String> {
    let valid = PHASES.join(", ");
    match phase {
        p if PHASES.contains(&p) => None,
        // The prime and verify arms walk the same positions again (every repeat, chunk size
        // and round), so their slices of one (stage, step) span several walks and the
        // overlap bar would pass on that alone.
        "prime" | "verify" => Some(format!(
            "phase {phase}: its steps repeat positions across walks; the bars are checked on {valid}"
        )),
        // The reference runs one stage: no boundary, so no stage can run ahead of another.
        "reference" => Some(format!(
            "phase reference: the single-stage reference has no second stage to overlap with; the bars are checked on {valid}"
        )),
        _ => Some(format!(
            "phase {phase:?}: not a phase of a gate's trace; the bars are checked on {valid}"
        )),
    }
}

/// The bars for phase `phase` (an arm's name) of trace `doc`, parsed from `text` (whose
/// literals an error echoes). Err: not a trace this tool wrote (no stage tracks, a malformed
/// event), naming what is missing or the value that is wrong.
pub fn check(doc: &Value, text: &str, phase: &str) -> Result<Report, String> {
    if let Some(why) = phase_problem(phase) {
        return Err(why);
    }
    let ev = doc
        .get("traceEvents")
        .and_then(Value::as_array)
        .ok_or("no traceEvents array")?;
    // A value of event `i` as an error quotes it: as the file wrote it. serde_json holds a
    // number that is no u64/i64 (2^64, 1e300, -0, a fraction) as an f64, whose own text
    // (1.8446744073709552e+19, or Rust's 301 digits for -1e300) is not what the user wrote
    // and would send them looking for a value that is not in the file; `as_written` gives the
    // literal back. Cut like a track name: a file's number may be any length. Built on the
    // error path only, so a good trace is scanned once.
    let shown = |i: usize, at: &str, v: &Value| {
        crate::jsonin::clip(&crate::jsonin::as_written(
            text,
            &format!("/traceEvents/{i}/{at}"),
            v,
        ))
    };
    let mut tracks: BTreeMap<u64, String> = BTreeMap::new();
    let mut slices: BTreeMap<u64, Vec<Sl>> = BTreeMap::new();
    for (i, e) in ev.iter().enumerate() {
        let tid = || match &e["tid"] {
            Value::Null => Err(format!("traceEvents[{i}]: no tid")),
            t => t.as_u64().ok_or_else(|| {
                format!(
                    "traceEvents[{i}]: tid {} is not a whole number >= 0",
                    shown(i, "tid", t)
                )
            }),
        };
        match e["ph"].as_str() {
            Some("M") if e["name"] == "thread_name" => {
                let name = e["args"]["name"]
                    .as_str()
                    .ok_or_else(|| format!("traceEvents[{i}]: thread_name without a name"))?;
                tracks.insert(tid()?, name.to_string());
            }
            Some("X") => {
                let num = |k: &str| match &e[k] {
                    Value::Null => Err(format!("traceEvents[{i}]: slice without a numeric {k}")),
                    v => v.as_f64().ok_or_else(|| {
                        format!(
                            "traceEvents[{i}]: slice with {k} {}, not a number",
                            shown(i, k, v)
                        )
                    }),
                };
                let (ts, dur) = (num("ts")?, num("dur")?);
                // The tool writes a slice's start and length from a clock: never negative.
                // A negative length would pass the overlap bars on a slice that ends before
                // it starts.
                if ts < 0.0 || dur < 0.0 {
                    return Err(format!(
                        "traceEvents[{i}]: a slice at ts {} lasting {} µs (a trace this tool wrote has neither negative)",
                        shown(i, "ts", &e["ts"]),
                        shown(i, "dur", &e["dur"])
                    ));
                }
                // The tool writes a step as a u64 or null (work outside any step). Anything
                // else is refused, naming it: read as "no step", the slice would drop out of
                // the bars without a word and bar 1 would blame a stage for work it did.
                let step = match &e["args"]["step"] {
                    Value::Null => None,
                    k => Some(k.as_u64().ok_or_else(|| {
                        format!(
                            "traceEvents[{i}]: step {} is not a whole number >= 0",
                            shown(i, "args/step", k)
                        )
                    })?),
                };
                // The tool writes a slice's name, phase and requests as strings (phase and
                // requests may be absent). Anything else is refused, naming it: read as
                // empty or none, a slice would leave its phase's bars (or the serve bar)
                // without a word.
                let text_of = |at: &str, v: &Value| match v {
                    Value::Null => Ok(None),
                    Value::String(t) => Ok(Some(t.clone())),
                    _ => Err(format!(
                        "traceEvents[{i}]: {at} {} is not a string",
                        shown(i, at, v)
                    )),
                };
                let name = text_of("name", &e["name"])?.unwrap_or_default();
                let phase = text_of("args/phase", &e["args"]["phase"])?;
                let requests = text_of("args/requests", &e["args"]["requests"])?;
                slices.entry(tid()?).or_default().push(Sl {
                    at: i,
                    name,
                    phase,
                    step,
                    requests: requests.filter(|r| !r.is_empty()),
                    ts,
                    end: ts + dur,
                });
            }
            _ => {}
        }
    }
    // The N-stage runtime's stage streams: "runtime/stage<s>@<device>".
    let mut stages: BTreeMap<usize, u64> = BTreeMap::new();
    for (&tid, name) in &tracks {
        let Some(rest) = name.strip_prefix("runtime/stage") else {
            continue;
        };
        // A stage track whose number does not read is an error, never a track left out (the
        // bars would then pass without the stage it was).
        let s = rest
            .split('@')
            .next()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                format!(
                    "track {:?}: a runtime/stage track without a stage number (runtime/stage<s>@<device>)",
                    crate::jsonin::clip(name)
                )
            })?;
        if stages.insert(s, tid).is_some() {
            return Err(format!("two tracks for stage {s} (one runtime per trace)"));
        }
    }
    let n = stages.len();
    if n == 0 || stages.keys().copied().ne(0..n) {
        return Err(format!(
            "no runtime/stage0..N tracks (found stages {:?})",
            stages.keys().collect::<Vec<_>>()
        ));
    }
    // The overlap bar compares stage s with stage s + 1: a one-stage trace has no pair, so
    // no verdict (it FAILed "in none of 0 pairs", a FAIL no run could have avoided).
    if n == 1 {
        return Err("one stage track: the pipeline bars need a trace of 2 or more stages".into());
    }
    let steps: BTreeSet<u64> = slices
        .values()
        .flatten()
        .filter(|s| s.phase.as_deref() == Some(phase))
        .filter_map(|s| s.step)
        .collect();
    if steps.is_empty() {
        return Err(format!("phase {phase:?} has no step's slices"));
    }
    // The phases the bars take walk one step after another: every step from the first to the
    // last is expected, so a step no stage has (one cut out of every stage, or the steps
    // renumbered 0, 2, 4, ...) is missing work, never a shorter walk that passes.
    let (first, last) = (*steps.first().unwrap_or(&0), *steps.last().unwrap_or(&0));
    let steps: BTreeSet<u64> = (first..=last).collect();
    let mut lines: Vec<String> = Vec::new();
    // One line per bar: PASS with what held, or FAIL with what broke it.
    let mut bar = |ok: bool, held: String, broke: String| {
        lines.push(if ok {
            format!("PASS  {held}")
        } else {
            format!("FAIL  {broke}")
        });
    };

    // 1. Every stage has work in every step: (first work start, last work end) per step.
    let mut span: Vec<BTreeMap<u64, (f64, f64)>> = vec![BTreeMap::new(); n];
    for (s, &tid) in &stages {
        for sl in slices.get(&tid).into_iter().flatten() {
            if sl.phase.as_deref() != Some(phase) || is_idle(&sl.name) {
                continue;
            }
            if let Some(k) = sl.step {
                let x = span[*s].entry(k).or_insert((f64::MAX, f64::MIN));
                x.0 = x.0.min(sl.ts);
                x.1 = x.1.max(sl.end);
            }
        }
    }
    let missing: Vec<String> = (0..n)
        .flat_map(|s| {
            let sp = &span[s];
            steps
                .iter()
                .filter(move |k| !sp.contains_key(k))
                .map(move |k| format!("stage {s} step {k}"))
        })
        .collect();
    bar(
        missing.is_empty(),
        format!(
            "every one of {n} stage streams has work in each of {} steps of {phase}",
            steps.len()
        ),
        format!(
            "{} (stage, step) pairs of {phase} without work: {}{}",
            missing.len(),
            missing[..missing.len().min(5)].join(", "),
            if missing.len() > 5 { ", ..." } else { "" }
        ),
    );

    // 2. No two slices of one stream overlap (every track, every phase).
    let mut clashes = 0usize;
    let mut first: Option<(u64, &Sl, &Sl)> = None;
    for (tid, sl) in &slices {
        let mut v: Vec<&Sl> = sl.iter().collect();
        v.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        for w in v.windows(2) {
            if w[1].ts < w[0].end - EPS_US {
                clashes += 1;
                first.get_or_insert((*tid, w[0], w[1]));
            }
        }
    }
    // The first clash is quoted as the file wrote it (a computed end of a huge ts would
    // print every digit of an f64), each slice by its index in traceEvents; built once,
    // on the failing path only.
    let first = first.map_or(String::new(), |(tid, a, b)| {
        format!(
            "{}: traceEvents[{}] {} at ts {} lasting {} and traceEvents[{}] {} at ts {}",
            crate::jsonin::clip(tracks.get(&tid).map_or("?", |t| t.as_str())),
            a.at,
            crate::jsonin::clip(&a.name),
            shown(a.at, "ts", &ev[a.at]["ts"]),
            shown(a.at, "dur", &ev[a.at]["dur"]),
            b.at,
            crate::jsonin::clip(&b.name),
            shown(b.at, "ts", &ev[b.at]["ts"])
        )
    });
    bar(
        clashes == 0,
        format!(
            "no two slices of one stream overlap ({} tracks)",
            slices.len()
        ),
        format!("{clashes} overlapping slice pairs on one stream, first: {first}"),
    );

    // 3. Some stage runs ahead: stage s's step k+1 starts before stage s+1's step k ends.
    let mut ahead = 0;
    let mut pairs = 0;
    for s in 0..n.saturating_sub(1) {
        for &k in &steps {
            if let (Some(a), Some(b)) = (span[s].get(&(k + 1)), span[s + 1].get(&k)) {
                pairs += 1;
                if a.0 < b.1 {
                    ahead += 1;
                }
            }
        }
    }
    bar(
        ahead > 0,
        format!(
            "overlap visible in {phase}: in {ahead} of {pairs} (stage s, step k) pairs, \
                 stage s started step k+1 before stage s+1 finished step k"
        ),
        format!(
            "no overlap in {phase}: in none of {pairs} (stage s, step k) pairs did stage \
                 s start step k+1 before stage s+1 finished step k"
        ),
    );

    // 4. The serve arm's steps carry different requests each: every work slice of a stage
    //    stream names them.
    if phase == "serve" {
        let mut unnamed: Vec<String> = Vec::new();
        let mut named = 0usize;
        for (s, &tid) in &stages {
            for sl in slices.get(&tid).into_iter().flatten() {
                if sl.phase.as_deref() != Some(phase) || is_idle(&sl.name) || sl.step.is_none() {
                    continue;
                }
                match &sl.requests {
                    Some(_) => named += 1,
                    None => unnamed.push(format!("stage {s} step {}", sl.step.unwrap_or(0))),
                }
            }
        }
        let example = slices
            .values()
            .flatten()
            .find(|s| s.phase.as_deref() == Some(phase) && s.requests.is_some())
            .map(|s| {
                format!(
                    " (step {}: {})",
                    s.step.unwrap_or(0),
                    s.requests.as_deref().unwrap_or("")
                )
            })
            .unwrap_or_default();
        bar(
            unnamed.is_empty(),
            format!("every one of {named} serve work slices names its step's requests{example}"),
            format!(
                "{} serve work slices name no requests, first: {}",
                unnamed.len(),
                unnamed.first().map_or("", |c| c.as_str())
            ),
        );
    }
    Ok(Report {
        pass: lines.iter().all(|l| l.starts_with("PASS")),
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` on a trace built as a value: its text is the value's own JSON.
    fn run(d: &Value, phase: &str) -> Result<Report, String> {
        check(d, &d.to_string(), phase)
    }

    /// A two-stage trace of `steps` steps; each stage's step k takes [10k + 5s, 10k + 5s + 8]
    /// (so stage 0's step k+1 starts at 10k+10, before stage 1's step k ends at 10k+13).
    fn doc(steps: u64) -> Value {
        let mut ev = vec![
            serde_json::json!({"ph": "M", "name": "thread_name", "tid": 0, "args": {"name": "runtime/stage0@cpu0"}}),
            serde_json::json!({"ph": "M", "name": "thread_name", "tid": 1, "args": {"name": "runtime/stage1@cpu1"}}),
        ];
        for k in 0..steps {
            for s in 0..2u64 {
                ev.push(serde_json::json!({"ph": "X", "name": "layers", "tid": s,
                    "ts": (10 * k + 5 * s) as f64, "dur": 8.0,
                    "args": {"phase": "pipelined", "step": k}}));
            }
        }
        serde_json::json!({ "traceEvents": ev })
    }

    /// One stage's trace: no pair to compare, so no verdict (an error, exit 2), not a FAIL.
    #[test]
    fn a_one_stage_trace_is_no_verdict() {
        let mut d = doc(3);
        let ev = d["traceEvents"].as_array_mut().unwrap();
        ev.retain(|e| e["tid"] == 0);
        let e = run(&d, "pipelined").unwrap_err();
        assert!(e.contains("one stage track"), "{e}");
    }

    #[test]
    fn a_pipelined_trace_passes_every_bar() {
        let r = run(&doc(4), "pipelined").unwrap();
        assert!(r.pass, "{:?}", r.lines);
        assert!(r.lines[2].contains("in 3 of 3"), "{:?}", r.lines);
    }

    /// Negative controls: each bar fails on a trace planted to break it.
    #[test]
    fn each_bar_fails_on_a_trace_that_breaks_it() {
        // Serial: stage 0's next step starts only after stage 1 finished (shift by 20 µs).
        let mut d = doc(3);
        for e in d["traceEvents"].as_array_mut().unwrap() {
            if e["ph"] == "X" {
                let k = e["args"]["step"].as_f64().unwrap();
                e["ts"] = (e["ts"].as_f64().unwrap() + 10.0 * k).into();
            }
        }
        let r = run(&d, "pipelined").unwrap();
        assert!(
            !r.pass && r.lines[2].starts_with("FAIL  no overlap"),
            "{:?}",
            r.lines
        );
        assert!(r.lines[0].starts_with("PASS") && r.lines[1].starts_with("PASS"));

        // Stage 1 misses step 2.
        let mut d = doc(3);
        d["traceEvents"]
            .as_array_mut()
            .unwrap()
            .retain(|e| !(e["tid"] == 1 && e["args"]["step"] == 2));
        let r = run(&d, "pipelined").unwrap();
        assert!(
            r.lines[0].contains("FAIL  1 (stage, step) pairs"),
            "{:?}",
            r.lines
        );
        assert!(r.lines[0].contains("stage 1 step 2"), "{:?}", r.lines);

        // A step cut out of every stage (it passed: the steps were those present), and the
        // steps renumbered 0, 2, 4, ...: the steps between are missing on every stage.
        let mut d = doc(5);
        d["traceEvents"]
            .as_array_mut()
            .unwrap()
            .retain(|e| e["args"]["step"] != 3);
        let r = run(&d, "pipelined").unwrap();
        assert!(
            r.lines[0].starts_with("FAIL  2 (stage, step) pairs")
                && r.lines[0].contains("stage 0 step 3, stage 1 step 3"),
            "{:?}",
            r.lines
        );
        let mut d = doc(4);
        for e in d["traceEvents"].as_array_mut().unwrap() {
            if let Some(k) = e["args"]["step"].as_u64() {
                e["args"]["step"] = (2 * k).into();
            }
        }
        let r = run(&d, "pipelined").unwrap();
        assert!(
            r.lines[0].starts_with("FAIL  6 (stage, step) pairs"),
            "{:?}",
            r.lines
        );

        // Two slices of stage 0 overlap.
        let mut d = doc(3);
        d["traceEvents"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
            "ph": "X", "name": "tx", "tid": 0, "ts": 3.0, "dur": 1.0,
            "args": {"phase": "pipelined", "step": 0}}));
        let r = run(&d, "pipelined").unwrap();
        assert!(
            !r.pass && r.lines[1].starts_with("FAIL  1 overlapping"),
            "{:?}",
            r.lines
        );
    }

    /// The serve bar: a serve trace whose slices name their requests passes it; one
    /// slice without them fails it, naming the stage and step; other phases have no such
    /// bar.
    #[test]
    fn serve_slices_must_name_their_requests() {
        let serve = |unnamed: Option<(u64, u64)>| {
            let mut d = doc(3);
            for e in d["traceEvents"].as_array_mut().unwrap() {
                if e["ph"] == "X" {
                    e["args"]["phase"] = "serve".into();
                    let (s, k) = (
                        e["tid"].as_u64().unwrap(),
                        e["args"]["step"].as_u64().unwrap(),
                    );
                    if unnamed != Some((s, k)) {
                        e["args"]["requests"] = format!("r{k}:0-3 r9:{k}").into();
                    }
                }
            }
            run(&d, "serve").unwrap()
        };
        let r = serve(None);
        assert!(r.pass, "{:?}", r.lines);
        assert!(
            r.lines[3].contains("every one of 6 serve work slices")
                && r.lines[3].contains("r0:0-3 r9:0"),
            "{:?}",
            r.lines
        );
        let r = serve(Some((1, 2)));
        assert!(!r.pass, "{:?}", r.lines);
        assert!(
            r.lines[3]
                .starts_with("FAIL  1 serve work slices name no requests, first: stage 1 step 2"),
            "{:?}",
            r.lines
        );
        assert_eq!(run(&doc(3), "pipelined").unwrap().lines.len(), 3);
    }

    #[test]
    fn a_file_that_is_not_a_runtime_trace_is_an_error_naming_why() {
        let e = run(&serde_json::json!({"x": 1}), "pipelined").unwrap_err();
        assert!(e.contains("traceEvents"), "{e}");
        let e = run(&serde_json::json!({"traceEvents": []}), "pipelined").unwrap_err();
        assert!(e.contains("no runtime/stage0..N tracks"), "{e}");
        let e = run(&doc(2), "batched").unwrap_err();
        assert!(e.contains("phase \"batched\" has no step"), "{e}");
    }

    /// What this tool never writes is refused naming the event, not read as something that
    /// passes: a negative length, a tid that is no whole number, a stage track whose number
    /// does not read (left out, the bars would pass without that stage).
    #[test]
    fn impossible_slices_and_tracks_are_refused_naming_the_event() {
        assert!(run(&doc(3), "pipelined").unwrap().pass);
        for (edit, want) in [
            (("dur", serde_json::json!(-8.0)), "lasting -8.0 µs"),
            (("ts", serde_json::json!(-1.0)), "at ts -1"),
            (
                ("tid", serde_json::json!(1.5)),
                "tid 1.5 is not a whole number",
            ),
            (
                ("tid", serde_json::json!("1")),
                "tid \"1\" is not a whole number",
            ),
        ] {
            let mut d = doc(3);
            d["traceEvents"][3][edit.0] = edit.1.clone();
            let e = run(&d, "pipelined").unwrap_err();
            assert!(
                e.starts_with("traceEvents[3]: ") && e.contains(want),
                "{edit:?}: {e}"
            );
        }
        for bad in [
            "runtime/stage-1@cpu0",
            "runtime/stage18446744073709551616@cpu0",
            "runtime/stage@cpu0",
            "runtime/stage+1@cpu0",
        ] {
            let mut d = doc(3);
            d["traceEvents"][1]["args"]["name"] = bad.into();
            let e = run(&d, "pipelined").unwrap_err();
            assert!(
                e.contains(&format!(
                    "track {bad:?}: a runtime/stage track without a stage number"
                )),
                "{e}"
            );
        }
    }

    /// A number the check refuses is echoed as the file wrote it, whatever serde_json made
    /// of it: 2^64 stays 18446744073709551616 (not 1.8446744073709552e+19), -1e300 stays
    /// -1e300 (not 301 digits), -0 stays -0; in a tid (a track or a slice), a ts, a dur or
    /// a step. A step that is no whole number is refused too (read as "no step", the slice
    /// would leave the bars without a word). A literal of any length is cut.
    #[test]
    fn refused_numbers_are_echoed_as_the_file_wrote_them() {
        let long = format!("0.{}1", "0".repeat(300));
        for (event, at, lit, want) in [
            (
                1,
                "tid",
                "18446744073709551616",
                "tid 18446744073709551616 is not a whole number >= 0",
            ),
            (
                3,
                "tid",
                "18446744073709551616",
                "tid 18446744073709551616 is not a whole number >= 0",
            ),
            (3, "tid", "1e300", "tid 1e300 is not a whole number"),
            (3, "tid", "-0", "tid -0 is not a whole number"),
            (3, "tid", "1.50", "tid 1.50 is not a whole number"),
            (3, "ts", "-1e300", "a slice at ts -1e300 lasting 8.0 µs"),
            (
                3,
                "dur",
                "-18446744073709551616",
                "lasting -18446744073709551616 µs",
            ),
            (3, "ts", "\"5\"", "slice with ts \"5\", not a number"),
            (3, "step", "1.5", "step 1.5 is not a whole number >= 0"),
            (
                3,
                "step",
                "18446744073709551616",
                "step 18446744073709551616 is not a whole",
            ),
            (3, "step", "\"2\"", "step \"2\" is not a whole number"),
            (3, "tid", &long, "tid 0.0000000000"),
        ] {
            let mut d = doc(3);
            let slot = if at == "step" {
                &mut d["traceEvents"][event]["args"][at]
            } else {
                &mut d["traceEvents"][event][at]
            };
            *slot = "@here@".into();
            let text = d.to_string().replace("\"@here@\"", lit);
            let v = crate::jsonin::parse_unique(&text).unwrap();
            let e = check(&v, &text, "pipelined").unwrap_err();
            assert!(
                e.starts_with(&format!("traceEvents[{event}]: ")) && e.contains(want),
                "{at} {lit}: {e}"
            );
            assert!(
                !e.contains("e+"),
                "{at} {lit}: serde_json's float text: {e}"
            );
            assert!(e.len() < 250, "{at} {lit}: uncut: {e}");
        }
    }

    /// A slice's name, phase and requests are strings in a trace this tool wrote. Any
    /// other value is refused, naming it as written: read as empty or "no phase", the slice
    /// would leave its phase's bars (or the serve bar) without a word.
    #[test]
    fn a_slice_name_phase_or_requests_that_is_no_string_is_refused() {
        for (path, lit) in [
            ("name", "7"),
            ("name", "[\"layers\"]"),
            ("args/phase", "1e300"),
            ("args/phase", "true"),
            ("args/requests", "{\"r\":3}"),
        ] {
            let mut d = doc(3);
            let e = &mut d["traceEvents"][3];
            match path.strip_prefix("args/") {
                Some(k) => e["args"][k] = "@here@".into(),
                None => e[path] = "@here@".into(),
            }
            let text = d.to_string().replace("\"@here@\"", lit);
            let v = crate::jsonin::parse_unique(&text).unwrap();
            let err = check(&v, &text, "pipelined").unwrap_err();
            assert_eq!(
                err,
                format!("traceEvents[3]: {path} {lit} is not a string"),
                "{path} {lit}"
            );
        }
        // Absent phase and requests stay allowed: work outside any phase, a non-serve step.
        let mut d = doc(3);
        d["traceEvents"][2]["args"] = serde_json::json!({});
        assert!(run(&d, "pipelined").is_ok());
    }

    /// The overlap bar's FAIL line quotes the first clash's slices by index, with ts and
    /// dur as the file wrote them: a huge ts prints as written, not as an f64's every digit.
    #[test]
    fn an_overlap_is_quoted_as_the_file_wrote_it() {
        let mut d = doc(2);
        let ev = d["traceEvents"].as_array_mut().unwrap();
        for (ts, dur) in [("@a@", "@d@"), ("@b@", "@d@")] {
            ev.push(
                serde_json::json!({"ph": "X", "name": "tx", "tid": 5, "ts": ts,
                "dur": dur, "args": {"phase": "eager", "step": 0}}),
            );
        }
        let text = d
            .to_string()
            .replace("\"@a@\"", "1e300")
            .replace("\"@b@\"", "1.0e300")
            .replace("\"@d@\"", "1e299");
        let v = crate::jsonin::parse_unique(&text).unwrap();
        let r = check(&v, &text, "pipelined").unwrap();
        assert!(!r.pass);
        assert_eq!(
            r.lines[1],
            "FAIL  1 overlapping slice pairs on one stream, first: ?: traceEvents[6] tx at ts \
             1e300 lasting 1e299 and traceEvents[7] tx at ts 1.0e300"
        );
    }

    /// Prime and verify walk the same positions again (repeats, chunk sizes, rounds): their
    /// slices of one (stage, step) span several walks, so the bars are refused there rather
    /// than passed on that overlap alone.
    /// The reference (one stage) and names that are no phase are refused before the
    /// trace is read, listing the valid phases; every valid one passes the phase check.
    #[test]
    fn reference_and_unknown_phases_are_refused_listing_the_valid_ones() {
        for ph in ["reference", "runtime", "Pipelined", "", "eager,pipelined"] {
            let e = phase_problem(ph).unwrap_or_else(|| panic!("{ph:?} accepted"));
            assert!(e.ends_with("eager, pipelined, batched, serve"), "{e}");
            assert_eq!(run(&doc(4), ph).unwrap_err(), e);
        }
        for ph in PHASES {
            assert_eq!(phase_problem(ph), None);
        }
    }

    #[test]
    fn prime_and_verify_phases_are_refused_naming_why() {
        for ph in ["prime", "verify"] {
            let e = run(&doc(4), ph).unwrap_err();
            assert!(
                e.contains(&format!("phase {ph}: its steps repeat positions")),
                "{e}"
            );
        }
    }
}
