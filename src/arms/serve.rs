//! The serve arm: continuous batching through the N stages. A seeded schedule of
//! `--requests` requests (prompt of 1..=--prompt-len tokens, 0..=--gen-len greedy ones,
//! arrivals spread over the run) shares a fixed pool of cache rows (sequences); every step
//! packs the live requests' next rows (one decode row per decoding request, then prefill
//! chunks of at most `--prefill-chunk` positions of the newest arrivals, up to
//! `--max-rows` rows), in an order shuffled per step; a finished request's cache row is
//! reset and handed to the next arrival. Every position of every request must equal that
//! request run alone through the single-stage reference, one token at a time.
//!
//! The schedule depends on the flags and the seed only (never on a logit): each request's
//! tokens are its own reference's tape (teacher-forced prompt, then its greedy tokens), so
//! the whole schedule is fixed before the arm runs, and the arm pipelines `--window` steps
//! as the pipelined arm does. Every member of a multi-process gate walks the same one.

use std::collections::VecDeque;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{rt_err, run_reference, seeded_prompt, GateError, GateEvent, GateSpec, Judge, RefRun};
use crate::backend::Backend;
use crate::model::Model;
use crate::receipt::{self, Arm, ServeRecord, ServeRequest, ServeStep, StepKey};
use crate::runtime::{Fault, Pending, Runtime};

/// The flags' defaults (the cli's `GateArgs` has the same).
pub const DEFAULT_REQUESTS: usize = 12;
pub const DEFAULT_MAX_ROWS: usize = 8;
pub const DEFAULT_PREFILL_CHUNK: usize = 4;
/// Upper bounds checked before any schedule is drawn (a schedule holds every request and
/// every step; the reference runs every request alone).
pub const MAX_REQUESTS: usize = 100_000;
pub const MAX_ROWS: usize = 4096;

/// Salt of the schedule's and the prompts' seeds (other arms draw from the same --seed).
const SALT: u64 = 0x5e72_e5ca_11ed_0029;

/// The serve arm's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeSpec {
    pub requests: usize,
    pub max_rows: usize,
    pub prefill_chunk: usize,
}

impl ServeSpec {
    /// `check_flags` on these flags.
    pub fn check(&self) -> Result<(), String> {
        check_flags(self.requests, self.max_rows, self.prefill_chunk)
    }

    /// Cache rows the requests share: `--max-rows` (every live request gets its decode row
    /// each step), at most one per request.
    pub fn cache_rows(&self) -> usize {
        self.max_rows.min(self.requests).max(1)
    }
}

/// The serve flags' bounds in a serve gate (exit 2 naming the flag); without `--arms serve`
/// the flag policy (`gate::policy`) refuses them.
pub fn check_flags(requests: usize, max_rows: usize, prefill_chunk: usize) -> Result<(), String> {
    if requests == 0 || requests > MAX_REQUESTS {
        return Err(format!(
            "--requests {requests}: the serve arm needs 1..={MAX_REQUESTS} requests"
        ));
    }
    if max_rows == 0 || max_rows > MAX_ROWS {
        return Err(format!(
            "--max-rows {max_rows}: a serve step carries 1..={MAX_ROWS} rows"
        ));
    }
    if prefill_chunk == 0 || prefill_chunk > max_rows {
        return Err(format!(
            "--prefill-chunk {prefill_chunk}: a prefill chunk is 1..=--max-rows ({max_rows}) positions"
        ));
    }
    Ok(())
}

/// A drawn schedule: the requests (each with its cache row) and the steps in issue order.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub cache_rows: usize,
    pub requests: Vec<ServeRequest>,
    pub steps: Vec<ServeStep>,
}

impl Schedule {
    /// Cache slots a sequence needs: the longest request; under `--fault stale-cache` (no
    /// length reset on reuse) the most positions any cache row accumulates over its requests.
    pub fn ctx(&self, stale: bool) -> usize {
        let len = |r: &ServeRequest| r.prompt_len + r.gen_len;
        let mut per_row = vec![0usize; self.cache_rows];
        for r in &self.requests {
            let l = len(r);
            per_row[r.slot] = if stale {
                per_row[r.slot].saturating_add(l)
            } else {
                per_row[r.slot].max(l)
            };
        }
        per_row.into_iter().max().unwrap_or(1).max(1)
    }
}

/// The schedule of `s` (prompt lengths 1..=`max_prompt`, generated 0..=`max_gen`), drawn
/// from `seed`. A step: the requests that arrived by then are admitted into free cache rows
/// (a seeded one of the free rows), then every decoding request gets one row and the
/// prefilling ones, oldest admission first, chunks of up to `prefill_chunk` positions while
/// rows remain; the step's rows are shuffled (a request's rows keep their order: they are
/// consecutive positions of one sequence). A request whose last position was issued frees
/// its row for the next step's arrivals. Arrivals: seeded gaps of 0..=2L/rows steps (L the
/// mean request length, rows the cache rows), so the pool runs about full; a pool with no
/// live request admits the next arrival at once (no empty steps).
pub fn schedule(s: &ServeSpec, seed: u64, max_prompt: usize, max_gen: usize) -> Schedule {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ SALT);
    let n = s.requests;
    let rows_pool = s.cache_rows();
    let mean = max_prompt.div_ceil(2) + max_gen / 2 + 1;
    let gap_max = (2 * mean / rows_pool).max(1);
    let mut requests = Vec::with_capacity(n);
    let mut arrival = 0usize;
    for request in 0..n {
        if request > 0 {
            arrival += rng.gen_range(0..=gap_max);
        }
        requests.push(ServeRequest {
            request,
            arrival,
            prompt_len: rng.gen_range(1..=max_prompt.max(1)),
            gen_len: rng.gen_range(0..=max_gen),
            slot: 0,
            admitted: 0,
            finished: 0,
            tokens_blake3: String::new(),
        });
    }
    let mut free: Vec<usize> = (0..rows_pool).collect();
    // Live requests in admission order, with their next position.
    let mut live: Vec<(usize, usize)> = Vec::new();
    let mut next_arrival = 0usize;
    let mut steps = Vec::new();
    // The clock: arrivals are in steps; an idle pool jumps it to the next arrival.
    let mut clock = 0usize;
    while next_arrival < n || !live.is_empty() {
        if live.is_empty() && next_arrival < n {
            clock = clock.max(requests[next_arrival].arrival);
        }
        let mut admitted = Vec::new();
        while next_arrival < n && requests[next_arrival].arrival <= clock && !free.is_empty() {
            let slot = free.swap_remove(rng.gen_range(0..free.len()));
            let q = next_arrival;
            requests[q].slot = slot;
            requests[q].admitted = steps.len();
            live.push((q, 0));
            admitted.push(q);
            next_arrival += 1;
        }
        // (request, rows this step): decode rows first, then prefill chunks.
        let mut take: Vec<(usize, usize)> = Vec::new();
        let mut budget = s.max_rows;
        for &(q, next) in &live {
            if next >= requests[q].prompt_len {
                take.push((q, 1));
                budget -= 1;
            }
        }
        for &(q, next) in &live {
            let p = requests[q].prompt_len;
            if next < p && budget > 0 {
                let k = s.prefill_chunk.min(p - next).min(budget);
                take.push((q, k));
                budget -= k;
            }
        }
        let mut order: Vec<usize> = take
            .iter()
            .flat_map(|&(q, k)| std::iter::repeat_n(q, k))
            .collect();
        order.shuffle(&mut rng);
        let mut rows = Vec::with_capacity(order.len());
        for q in order {
            let e = live.iter_mut().find(|e| e.0 == q).expect("a live request");
            rows.push((q, e.1));
            e.1 += 1;
        }
        let step = steps.len();
        live.retain(|&(q, next)| {
            let done = next == requests[q].prompt_len + requests[q].gen_len;
            if done {
                requests[q].finished = step;
                free.push(requests[q].slot);
            }
            !done
        });
        steps.push(ServeStep {
            step,
            admitted,
            rows,
        });
        clock += 1;
    }
    Schedule {
        cache_rows: rows_pool,
        requests,
        steps,
    }
}

/// Every request alone through the single-stage reference `ref_rt` (its seeded prompt
/// teacher-forced, then greedy to its length): request q's reference is row q.
pub(super) fn references<B: Backend>(
    ref_rt: &Runtime<B>,
    model: &Model,
    spec: &GateSpec,
    sched: &Schedule,
) -> Result<Vec<RefRun>, GateError> {
    sched
        .requests
        .iter()
        .map(|r| {
            let prompt = seeded_prompt(model, spec.seed ^ SALT, r.request, r.prompt_len);
            run_reference(
                ref_rt,
                r.request,
                prompt,
                r.prompt_len + r.gen_len,
                spec.topk,
                &mut |_| {},
            )
        })
        .collect()
}

/// The serve arm over `sched` (its references `refs`, row = request): `window` steps in
/// flight (`walk_schedule`); each row's logits judged against its request's reference
/// position.
pub(super) fn serve<B: Backend>(
    rt: &Runtime<B>,
    refs: &[RefRun],
    sched: &Schedule,
    window: usize,
    watch: &mut dyn FnMut(&GateEvent),
) -> Result<Arm, GateError> {
    let vocab = rt.model().cfg.vocab;
    let mut judge = Judge::new("serve", refs).watched(watch);
    // Every stage's cache cleared first, as the prime and verify arms do. A correct walk
    // reads only slots it stored, so the memory it starts on changes no bit; a broken
    // store-before-read order (`--fault chunk-kv-order`) reads whatever a slot holds, and an
    // earlier arm's walk over the same tokens at the same positions (the batched arm's row 0
    // holds the tape, request 0's prompt its prefix) left it the very value the race would
    // miss: the negative control PASSed (hunt, seed 71: `--arms batched,serve --prompt-len 2
    // --max-rows 2 --prefill-chunk 2 --seed 53192`). The bench's timed walks skip it.
    rt.walk()
        .and_then(|mut w| w.reset_caches())
        .map_err(rt_err(|| "serve arm cache reset".to_string()))?;
    walk_schedule(
        rt,
        sched,
        window,
        |q, pos| refs[q].reference.tokens[pos],
        |i, l| {
            let key = StepKey {
                serve_step: Some(i),
                ..StepKey::default()
            };
            for (r, &(q, pos)) in sched.steps[i].rows.iter().enumerate() {
                judge.check_key(pos, q, key, &l[r * vocab..(r + 1) * vocab]);
            }
        },
    )?;
    let mut arm = judge.finish();
    let mut requests = sched.requests.clone();
    for (r, rf) in requests.iter_mut().zip(refs) {
        r.tokens_blake3 = receipt::hash_tokens(&rf.reference.tokens);
    }
    arm.serve = Some(ServeRecord {
        cache_rows: sched.cache_rows,
        requests,
        schedule: sched.steps.clone(),
    });
    Ok(arm)
}

/// One walk of `sched` through `rt` with `window` steps in flight, the arm's and bench's
/// alike: before a step, each request it admits gets its cache row reset on every stage
/// (`Walk::reset_seq`); row (q, pos) carries `token(q, pos)`; `logits(i, l)` gets step i's
/// rows' logits (row-major, the step's row order) where this process holds the last stage.
pub fn walk_schedule<B: Backend>(
    rt: &Runtime<B>,
    sched: &Schedule,
    window: usize,
    token: impl Fn(usize, usize) -> u32,
    mut logits: impl FnMut(usize, &[f32]),
) -> Result<(), GateError> {
    let mut walk = rt.walk().map_err(rt_err(|| "serve arm".to_string()))?;
    let mut inflight: VecDeque<(usize, Pending)> = VecDeque::with_capacity(window);
    let (mut toks, mut seqs) = (Vec::new(), Vec::new());
    let ctx = |i: usize| move || format!("serve arm step {i}");
    let mut drain = |walk: &mut crate::runtime::Walk<'_, B>,
                     (i, p): (usize, Pending)|
     -> Result<(), GateError> {
        let l = walk.read_deferred(p).map_err(rt_err(ctx(i)))?;
        // A member without the last stage reads no logits: the member with them judges.
        if rt.has_output() {
            logits(i, l);
        }
        Ok(())
    };
    for (i, st) in sched.steps.iter().enumerate() {
        if inflight.len() >= window.max(1) {
            let f = inflight.pop_front().expect("window is non-empty");
            drain(&mut walk, f)?;
        }
        for &q in &st.admitted {
            walk.reset_seq(sched.requests[q].slot)
                .map_err(rt_err(ctx(i)))?;
        }
        toks.clear();
        seqs.clear();
        for &(q, pos) in &st.rows {
            toks.push(token(q, pos));
            seqs.push(sched.requests[q].slot);
        }
        walk.name_step(i, &|| step_label(st));
        let p = walk.issue_seqs(&toks, &seqs, i).map_err(rt_err(ctx(i)))?;
        inflight.push_back((i, p));
    }
    while let Some(f) = inflight.pop_front() {
        drain(&mut walk, f)?;
    }
    Ok(())
}

/// Tokens for a timed walk of `sched` (bench): request q's seeded prompt, as the arm's,
/// then seeded tokens where the arm feeds its reference's greedy ones (a value changes no
/// timing; bench computes no reference).
pub fn bench_tokens(model: &Model, seed: u64, sched: &Schedule) -> Vec<Vec<u32>> {
    sched
        .requests
        .iter()
        .map(|r| seeded_prompt(model, seed ^ SALT, r.request, r.prompt_len + r.gen_len))
        .collect()
}

/// A step's name in a trace: each request it carries, in the order of its first row, with
/// its positions (`r3:12 r7:0-3`: request 3's position 12, request 7's 0 to 3).
pub fn step_label(st: &ServeStep) -> String {
    let mut spans: Vec<(usize, usize, usize)> = Vec::new();
    for &(q, pos) in &st.rows {
        match spans.iter_mut().find(|s| s.0 == q) {
            Some(s) => {
                s.1 = s.1.min(pos);
                s.2 = s.2.max(pos);
            }
            None => spans.push((q, pos, pos)),
        }
    }
    spans
        .iter()
        .map(|&(q, a, b)| {
            if a == b {
                format!("r{q}:{a}")
            } else {
                format!("r{q}:{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `--fault stale-cache` is among `faults` (the schedule's cache sizing).
pub(super) fn stale(faults: &[Fault]) -> bool {
    faults.contains(&Fault::StaleCache)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Schedules from seeded flags nobody wrote down: every request's every position is
    /// issued exactly once and in order, rows per step in 1..=M, a request's chunk at most
    /// C rows, at most one row per decoding request, live requests never share a cache
    /// row, and rows are reused once requests outnumber them.
    #[test]
    fn schedules_issue_every_position_once_within_the_bounds() {
        let mut rng = ChaCha8Rng::seed_from_u64(29);
        for case in 0..300 {
            let max_rows = rng.gen_range(1..=64);
            let s = ServeSpec {
                requests: rng.gen_range(1..=200),
                max_rows,
                prefill_chunk: rng.gen_range(1..=max_rows),
            };
            let (p, g) = (rng.gen_range(1..=20), rng.gen_range(0..=20));
            let sc = schedule(&s, rng.gen(), p, g);
            let mut next = vec![0usize; s.requests];
            let mut owner: Vec<Option<usize>> = vec![None; sc.cache_rows];
            for st in &sc.steps {
                assert!(
                    (1..=s.max_rows).contains(&st.rows.len()),
                    "case {case}: {st:?}"
                );
                for &q in &st.admitted {
                    let slot = sc.requests[q].slot;
                    if let Some(o) = owner[slot] {
                        assert!(
                            sc.requests[o].finished < st.step,
                            "case {case}: row reused live"
                        );
                    }
                    owner[slot] = Some(q);
                }
                let mut per = std::collections::HashMap::new();
                for &(q, pos) in &st.rows {
                    assert_eq!(owner[sc.requests[q].slot], Some(q), "case {case}");
                    assert_eq!(pos, next[q], "case {case}: request {q} out of order");
                    next[q] += 1;
                    *per.entry(q).or_insert(0usize) += 1;
                }
                for (&q, &k) in &per {
                    let r = &sc.requests[q];
                    let decoding = next[q] - k >= r.prompt_len;
                    assert!(
                        k <= if decoding { 1 } else { s.prefill_chunk },
                        "case {case}"
                    );
                }
            }
            for r in &sc.requests {
                assert_eq!(next[r.request], r.prompt_len + r.gen_len, "case {case}");
                assert!(r.prompt_len >= 1 && r.prompt_len <= p && r.gen_len <= g);
            }
            if s.requests > s.max_rows {
                let mut slots: Vec<usize> = sc.requests.iter().map(|r| r.slot).collect();
                slots.sort_unstable();
                slots.dedup();
                assert!(slots.len() <= sc.cache_rows);
            }
            assert!(sc.ctx(true) >= sc.ctx(false));
        }
        // The same flags and seed draw the same schedule; another seed another.
        let s = ServeSpec {
            requests: 40,
            max_rows: 6,
            prefill_chunk: 3,
        };
        assert_eq!(schedule(&s, 5, 8, 8), schedule(&s, 5, 8, 8));
        assert_ne!(schedule(&s, 5, 8, 8), schedule(&s, 6, 8, 8));
    }

    /// A step's trace name lists each request once, in the order of its first row, with
    /// the span of its positions.
    #[test]
    fn a_step_label_names_each_request_and_its_positions() {
        let st = ServeStep {
            step: 4,
            admitted: vec![7],
            rows: vec![(7, 0), (3, 12), (7, 1), (7, 2), (9, 5), (7, 3)],
        };
        assert_eq!(step_label(&st), "r7:0-3 r3:12 r9:5");
    }

    #[test]
    fn serve_flags_are_refused_naming_the_flag() {
        let e = |r, m, c| check_flags(r, m, c).unwrap_err();
        assert!(e(0, 8, 4).starts_with("--requests 0"));
        assert!(e(MAX_REQUESTS + 1, 8, 4).starts_with("--requests"));
        assert!(e(3, 0, 1).starts_with("--max-rows 0"));
        assert!(e(3, MAX_ROWS + 1, 1).starts_with("--max-rows"));
        assert!(e(3, 8, 0).starts_with("--prefill-chunk 0"));
        let c = e(3, 2, 3);
        assert!(
            c.starts_with("--prefill-chunk 3") && c.contains("--max-rows (2)"),
            "{c}"
        );
        // Without the serve arm the flag policy refuses them (gate::policy, tests/serve.rs).
        assert!(check_flags(12, 8, 4).is_ok());
        assert!(check_flags(1, 1, 1).is_ok());
    }
}
