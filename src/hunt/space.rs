//! The hunt's configuration space: a `Draw` (each dimension left at the gate's default, or
//! set), the distribution it is drawn from, and the simpler neighbours the shrinker tries.
//!
//! The distribution, per trial (weights in percent; edges weighted on purpose). A dimension
//! pinned by a gate flag on the hunt's command line is never drawn: every trial takes that
//! flag as given, and the draws fit it (`Space::normalized`: a pinned prompt is every drawn
//! tape's, a pinned chunk or draft grows the drawn prompt and positions to hold it).
//! - stages: 1 (20), 2 (25), 3 (15), 4 (15), the most min(8, n_layers) (10), 5..=most (15).
//! - with 2+ stages: splits (40: one layer per stage but the last (a third), the last layer
//!   alone with the stages before it one layer each (a third), random cuts); devices on a
//!   backend with several (15: each stage on a random device); several processes on the
//!   cpu's ipc transport (15: `--procs 2..=min(3, stages)`), else `--transport host` (20).
//! - arms: each of eager 50, pipelined 50, batched 55, prime 50, verify 45 (at least one);
//!   the gate's default arms (5). A flag only one arm reads is drawn only with that arm
//!   (`ARM_FLAGS`):
//!   window (pipelined, batched): default (30), 1 (20), 2 (10), 4..=8 (20), longer than
//!   the tape (20); batch (batched): default (25), 1 (25), 2..=4 (15), 5..=12 (35);
//!   chunk (prime): default (20), else a ladder of 1..=3 sizes, each 1 (20), the whole
//!   prompt (20), 3, 5 or 7 (40), 2..=prompt+3 (20), each cut to the prompt (the gate
//!   refuses a chunk longer than it); repeat (prime): default (40), 1 (50), 2 (10); draft
//!   (verify): default (40), 1 (30), 6..=12 (30), cut to the positions after the first
//!   round's input (the gate refuses more; none where there is none).
//!   serve (weight 20: a slower arm) reads window too, and requests: default 12 (15), 1
//!   (20), 2..=6 (55), 30..=60 (10: slow on the cpu); max-rows: default 8 (20), 1 (20), 2..=8 (40), 16..=64
//!   (20); prefill-chunk: default 4 (20), 1 (25), = max-rows (25), an odd size (30); never
//!   more than max-rows (the gate refuses it: a larger one is cut to max-rows).
//! - prompt: default 8 (25), 1 (20), 2..=7 (25), 9..=24 (30); gen: 1 (15), 2..=6 (65),
//!   7..=12 (20) (short: trials stay cheap on the CPU).
//! - tape (15): a tape of 2..=24 random tokens below the vocab, with its own prompt_len
//!   (60) or without (then a drawn prompt at most its length); none where --gen-len is
//!   pinned (the gate refuses --gen-len beside a tape, which gives every position).
//! - jitter: 0 (70), 1..=50 µs (15), 200..=400 µs (15). Gate seed: drawn (70), default 0.
//! - on the cuda backend only (the gate refuses them on the cpu): graphs and pdl each
//!   default on (50), off (35), on (15); mma default auto (40), on (30), off (20), auto
//!   (10); and with the prime arm (35), a chunk at the `--mma auto` rows threshold
//!   (`MMA_AUTO_MIN_ROWS` - 1, itself or + 1: 63, 64, 65) added to the ladder, the prompt
//!   grown past it (threshold + 1..=8) where the prompt is free and no tape is drawn.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::arms::ArmKind;

/// The gate's default arms (`--arms` left out).
pub const DEFAULT_ARMS: [ArmKind; 3] = [ArmKind::Eager, ArmKind::Pipelined, ArmKind::Batched];

/// A dimension of the space, named by the gate flag that pins it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dim {
    Stages,
    Splits,
    Devices,
    Transport,
    Procs,
    Arms,
    Chunk,
    Repeat,
    Draft,
    Window,
    Batch,
    PromptLen,
    GenLen,
    Tape,
    Jitter,
    Requests,
    MaxRows,
    PrefillChunk,
    Graphs,
    Pdl,
    Mma,
}

impl Dim {
    pub const ALL: [Dim; 21] = [
        Dim::Stages,
        Dim::Splits,
        Dim::Devices,
        Dim::Transport,
        Dim::Procs,
        Dim::Arms,
        Dim::Chunk,
        Dim::Repeat,
        Dim::Draft,
        Dim::Window,
        Dim::Batch,
        Dim::PromptLen,
        Dim::GenLen,
        Dim::Tape,
        Dim::Jitter,
        Dim::Requests,
        Dim::MaxRows,
        Dim::PrefillChunk,
        Dim::Graphs,
        Dim::Pdl,
        Dim::Mma,
    ];

    /// The gate flag's argument id (its field in the cli's `GateArgs`).
    pub fn id(self) -> &'static str {
        match self {
            Dim::Stages => "stages",
            Dim::Splits => "splits",
            Dim::Devices => "devices",
            Dim::Transport => "transport",
            Dim::Procs => "procs",
            Dim::Arms => "arms",
            Dim::Chunk => "chunk",
            Dim::Repeat => "repeat",
            Dim::Draft => "draft",
            Dim::Window => "window",
            Dim::Batch => "batch",
            Dim::PromptLen => "prompt_len",
            Dim::GenLen => "gen_len",
            Dim::Tape => "tape",
            Dim::Jitter => "jitter_us",
            Dim::Requests => "requests",
            Dim::MaxRows => "max_rows",
            Dim::PrefillChunk => "prefill_chunk",
            Dim::Graphs => "graphs",
            Dim::Pdl => "pdl",
            Dim::Mma => "mma",
        }
    }
}

/// Each arm and the flags only it reads: such a flag is drawn, and kept by the shrinker,
/// only while one of its arms is in the trial (a flag no arm reads is refused by the gate).
/// A new arm is one entry here (and one in `ARM_WEIGHTS`).
pub const ARM_FLAGS: &[(ArmKind, &[Dim])] = &[
    (ArmKind::Eager, &[]),
    (ArmKind::Pipelined, &[Dim::Window]),
    (ArmKind::Batched, &[Dim::Window, Dim::Batch]),
    (ArmKind::Prime, &[Dim::Chunk, Dim::Repeat]),
    (ArmKind::Verify, &[Dim::Draft]),
    (
        ArmKind::Serve,
        &[Dim::Window, Dim::Requests, Dim::MaxRows, Dim::PrefillChunk],
    ),
];

/// Each arm's chance in percent of being in a trial that draws its arms.
pub const ARM_WEIGHTS: &[(ArmKind, u32)] = &[
    (ArmKind::Eager, 50),
    (ArmKind::Pipelined, 50),
    (ArmKind::Batched, 55),
    (ArmKind::Prime, 50),
    (ArmKind::Verify, 45),
    (ArmKind::Serve, 20),
];

/// The `--mma auto` rows threshold (the prime arm's largest chunk) the cuda draws straddle.
pub const MMA_ROWS: usize = crate::backend::cuda::MMA_AUTO_MIN_ROWS;

/// A tape the hunt writes into its directory for a trial.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TapeSpec {
    pub len: usize,
    pub prompt_len: Option<usize>,
    pub seed: u64,
}

impl TapeSpec {
    /// The tape file's JSON (`gate::tape`'s format): seeded token ids below `vocab`.
    pub fn json(&self, vocab: usize) -> String {
        use rand::SeedableRng;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let tokens: Vec<u32> = (0..self.len)
            .map(|_| rng.gen_range(0..vocab.max(1) as u32))
            .collect();
        let mut v = serde_json::json!({ "tokens": tokens });
        if let Some(p) = self.prompt_len {
            v["prompt_len"] = p.into();
        }
        v.to_string()
    }
}

/// One trial's configuration: None leaves the dimension as the hunt's command line has it
/// (pinned, or the gate's default).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Draw {
    pub stages: Option<usize>,
    pub splits: Option<Vec<usize>>,
    pub devices: Option<Vec<usize>>,
    /// `host`, or `ipc` (with `procs`).
    pub transport: Option<String>,
    pub procs: Option<usize>,
    #[serde(serialize_with = "arm_names")]
    pub arms: Option<Vec<ArmKind>>,
    pub chunk: Option<Vec<usize>>,
    pub repeat: Option<usize>,
    pub draft: Option<usize>,
    pub window: Option<usize>,
    pub batch: Option<usize>,
    pub prompt_len: Option<usize>,
    pub gen_len: Option<usize>,
    pub tape: Option<TapeSpec>,
    pub jitter_us: Option<u64>,
    pub seed: Option<u64>,
    pub requests: Option<usize>,
    pub max_rows: Option<usize>,
    pub prefill_chunk: Option<usize>,
    /// `on`/`off` (cuda spaces only).
    pub graphs: Option<&'static str>,
    pub pdl: Option<&'static str>,
    /// `auto`/`on`/`off` (cuda spaces only).
    pub mma: Option<&'static str>,
}

/// The arms by their `--arms` names.
fn arm_names<S: serde::Serializer>(a: &Option<Vec<ArmKind>>, s: S) -> Result<S::Ok, S::Error> {
    let names: Option<Vec<&str>> = a.as_ref().map(|v| v.iter().map(|k| k.name()).collect());
    serde::Serialize::serialize(&names, s)
}

/// What the space allows: the model, the backend, and what the command line pinned.
#[derive(Clone, Debug)]
pub struct Space {
    pub n_layers: usize,
    pub vocab: usize,
    pub context: usize,
    /// Devices the backend has.
    pub devices: usize,
    pub cuda: bool,
    pub pinned: Vec<Dim>,
    /// The arms, stages, prompt and steps a dimension left as given takes.
    pub base_arms: Vec<ArmKind>,
    pub base_stages: usize,
    pub base_prompt: usize,
    pub base_gen: usize,
    /// A pinned `--transport` other than auto, or `--procs`: trials need 2+ stages
    /// (`procs`: at least that many).
    pub base_min_stages: usize,
    /// The serve arm's `--requests`, `--max-rows` and `--prefill-chunk` as given (pinned,
    /// or the default).
    pub base_requests: usize,
    pub base_max_rows: usize,
    pub base_prefill_chunk: usize,
    /// The largest size of a pinned `--chunk` (0: not pinned): every trial's prompt is at
    /// least that long (the gate refuses a chunk longer than the prompt).
    pub base_chunk_max: usize,
    /// A pinned `--draft` K: every trial leaves K + 1 positions after its prompt (the gate
    /// refuses a draft past what the first verify round has after its input).
    pub base_draft: Option<usize>,
}

/// A chunk ladder with each size once, the first of each kept in place (the gate refuses a
/// size listed twice).
fn each_once(ladder: &mut Vec<usize>) {
    let mut seen = Vec::with_capacity(ladder.len());
    ladder.retain(|c| {
        let new = !seen.contains(c);
        seen.push(*c);
        new
    });
}

/// A weighted pick: the index of the entry `r` (0..sum) falls in.
fn pick(rng: &mut ChaCha8Rng, weights: &[u32]) -> usize {
    let total: u32 = weights.iter().sum();
    let mut r = rng.gen_range(0..total);
    for (i, &w) in weights.iter().enumerate() {
        if r < w {
            return i;
        }
        r -= w;
    }
    weights.len() - 1
}

fn pct(rng: &mut ChaCha8Rng, p: u32) -> bool {
    rng.gen_range(0..100) < p
}

impl Space {
    /// A CPU space of 8 devices with every base the flags leave at their defaults (one
    /// stage, prompt 8, 16 generated, the serve defaults): the tests' space.
    #[cfg(test)]
    pub fn defaults_for_tests(
        (n_layers, vocab, context): (usize, usize, usize),
        pinned: Vec<Dim>,
        base_arms: Vec<ArmKind>,
    ) -> Space {
        Space {
            n_layers,
            vocab,
            context,
            devices: 8,
            cuda: false,
            pinned,
            base_arms,
            base_stages: 1,
            base_prompt: 8,
            base_gen: 16,
            base_min_stages: 1,
            base_requests: crate::arms::serve::DEFAULT_REQUESTS,
            base_max_rows: crate::arms::serve::DEFAULT_MAX_ROWS,
            base_prefill_chunk: crate::arms::serve::DEFAULT_PREFILL_CHUNK,
            base_chunk_max: 0,
            base_draft: None,
        }
    }

    fn free(&self, d: Dim) -> bool {
        !self.pinned.contains(&d)
    }

    /// The most stages a trial may have.
    pub fn max_stages(&self) -> usize {
        self.n_layers.clamp(1, 8)
    }

    pub fn arms(&self, d: &Draw) -> Vec<ArmKind> {
        d.arms.clone().unwrap_or_else(|| self.base_arms.clone())
    }

    pub fn stages(&self, d: &Draw) -> usize {
        d.stages.unwrap_or(self.base_stages)
    }

    /// Whether a flag that only some arms read has one of them in the draw.
    pub fn read(&self, d: &Draw, dim: Dim) -> bool {
        let arms = self.arms(d);
        ARM_FLAGS
            .iter()
            .any(|(a, dims)| arms.contains(a) && dims.contains(&dim))
    }

    /// The draw's prompt as the gate resolves it (the tape's own, else the flag, else 8 at
    /// most the tape) and its steps.
    pub fn prompt_and_steps(&self, d: &Draw) -> (usize, usize) {
        let p = d.prompt_len.unwrap_or(self.base_prompt);
        match &d.tape {
            Some(t) => (t.prompt_len.unwrap_or(p.min(t.len)), t.len),
            None => (p, p + d.gen_len.unwrap_or(self.base_gen)),
        }
    }

    /// One trial's configuration, drawn by the distribution in the module doc.
    pub fn draw(&self, rng: &mut ChaCha8Rng) -> Draw {
        let mut d = Draw::default();
        let most = self.max_stages();
        if self.free(Dim::Stages) {
            let s = match pick(rng, &[20, 25, 15, 15, 10, 15]) {
                0 => 1,
                1 => 2,
                2 => 3,
                3 => 4,
                4 => most,
                _ => rng.gen_range(5..=most.max(5)),
            };
            let s = s.clamp(self.base_min_stages.min(most), most);
            d.stages = (s != 1).then_some(s);
        }
        if self.free(Dim::Arms) {
            let default = pct(rng, 5);
            let mut arms: Vec<ArmKind> = ARM_WEIGHTS
                .iter()
                .filter(|&&(_, w)| pct(rng, w))
                .map(|&(a, _)| a)
                .collect();
            if default {
                arms = self.base_arms.clone();
            }
            self.keep_readers(&mut arms);
            d.arms = if arms == self.base_arms {
                None
            } else {
                if arms.is_empty() {
                    arms.push(ARM_WEIGHTS[rng.gen_range(0..ARM_WEIGHTS.len())].0);
                }
                arms.sort_by_key(|a| ArmKind::ALL.iter().position(|b| b == a));
                Some(arms)
            };
        }
        // A pinned --gen-len goes to every trial, and the gate refuses it beside a tape.
        if self.free(Dim::Tape) && self.free(Dim::GenLen) && pct(rng, 15) {
            let len = rng.gen_range(2..=24usize.min(self.context));
            d.tape = Some(TapeSpec {
                len,
                prompt_len: pct(rng, 60).then(|| rng.gen_range(1..=len)),
                seed: rng.gen(),
            });
        }
        if self.free(Dim::PromptLen) {
            d.prompt_len = match pick(rng, &[25, 20, 25, 30]) {
                0 => None,
                1 => Some(1),
                2 => Some(rng.gen_range(2..=7)),
                _ => Some(rng.gen_range(9..=24)),
            };
        }
        if self.free(Dim::GenLen) {
            d.gen_len = Some(match pick(rng, &[15, 65, 20]) {
                0 => 1,
                1 => rng.gen_range(2..=6),
                _ => rng.gen_range(7..=12),
            });
        }
        let (p, steps) = {
            let n = self.normalized(d.clone());
            self.prompt_and_steps(&n)
        };
        if self.free(Dim::Window) {
            d.window = match pick(rng, &[30, 20, 10, 20, 20]) {
                0 => None,
                1 => Some(1),
                2 => Some(2),
                3 => Some(rng.gen_range(4..=8)),
                _ => Some(steps + rng.gen_range(1..=4)),
            };
        }
        if self.free(Dim::Batch) {
            d.batch = match pick(rng, &[25, 25, 15, 35]) {
                0 => None,
                1 => Some(1),
                2 => Some(rng.gen_range(2..=4)),
                _ => Some(rng.gen_range(5..=12)),
            };
        }
        if self.free(Dim::Chunk) && !pct(rng, 20) {
            let mut ladder = Vec::new();
            for _ in 0..rng.gen_range(1..=3) {
                let c = match pick(rng, &[20, 20, 40, 20]) {
                    0 => 1,
                    1 => p,
                    2 => [3, 5, 7][rng.gen_range(0..3)],
                    _ => rng.gen_range(2..=p + 3),
                };
                if !ladder.contains(&c) {
                    ladder.push(c);
                }
            }
            d.chunk = Some(ladder);
        }
        if self.free(Dim::Repeat) {
            d.repeat = match pick(rng, &[40, 50, 10]) {
                0 => None,
                1 => Some(1),
                _ => Some(2),
            };
        }
        if self.free(Dim::Draft) {
            d.draft = match pick(rng, &[40, 30, 30]) {
                0 => None,
                1 => Some(1),
                _ => Some(rng.gen_range(6..=12)),
            };
        }
        if self.free(Dim::Jitter) {
            d.jitter_us = match pick(rng, &[70, 15, 15]) {
                0 => None,
                1 => Some(rng.gen_range(1..=50)),
                _ => Some(rng.gen_range(200..=400)),
            };
        }
        self.draw_serve(rng, &mut d);
        if self.cuda {
            self.draw_cuda(rng, &mut d, p);
        }
        if pct(rng, 70) {
            d.seed = Some(rng.gen_range(1..1 << 20));
        }
        let n = self.stages(&d);
        if n >= 2 {
            if self.free(Dim::Splits) && pct(rng, 40) {
                let l = self.n_layers;
                d.splits = Some(match rng.gen_range(0..3) {
                    // One layer per stage but the last, which holds the rest.
                    0 => (1..n).collect(),
                    // The last layer alone, the stages before it one layer each.
                    1 => (l - n + 1..l).collect(),
                    _ => {
                        let mut cuts: Vec<usize> = (1..l).collect();
                        while cuts.len() > n - 1 {
                            cuts.remove(rng.gen_range(0..cuts.len()));
                        }
                        cuts
                    }
                });
            }
            let multi =
                self.free(Dim::Procs) && self.free(Dim::Transport) && !self.cuda && pct(rng, 15);
            if multi {
                d.procs = Some(rng.gen_range(2..=n.min(3)));
                d.transport = Some("ipc".into());
            } else {
                if self.free(Dim::Transport) && pct(rng, 20) {
                    d.transport = Some("host".into());
                }
                if self.free(Dim::Devices) && self.devices >= 2 && pct(rng, 15) {
                    d.devices = Some((0..n).map(|_| rng.gen_range(0..self.devices)).collect());
                }
            }
        }
        self.normalized(d)
    }

    /// A pinned flag that only some arms read needs one of them (the gate refuses a flag
    /// no arm of the run reads): the first of its readers joins `arms` where none is there.
    fn keep_readers(&self, arms: &mut Vec<ArmKind>) {
        for dim in Dim::ALL.into_iter().filter(|&x| !self.free(x)) {
            let readers = || ARM_FLAGS.iter().filter(|(_, ds)| ds.contains(&dim));
            if readers().next().is_some() && !readers().any(|(a, _)| arms.contains(a)) {
                if let Some((a, _)) = readers().next() {
                    arms.push(*a);
                }
            }
        }
    }

    /// The serve arm's dimensions (module doc), each drawn only where it is free.
    fn draw_serve(&self, rng: &mut ChaCha8Rng, d: &mut Draw) {
        if !self.read(d, Dim::Requests) {
            return;
        }
        if self.free(Dim::Requests) {
            d.requests = match pick(rng, &[15, 20, 55, 10]) {
                0 => None,
                1 => Some(1),
                2 => Some(rng.gen_range(2..=6)),
                _ => Some(rng.gen_range(30..=60)),
            };
        }
        if self.free(Dim::MaxRows) {
            d.max_rows = match pick(rng, &[20, 20, 40, 20]) {
                0 => None,
                1 => Some(1),
                2 => Some(rng.gen_range(2..=8)),
                _ => Some(rng.gen_range(16..=64)),
            };
        }
        if self.free(Dim::PrefillChunk) {
            let rows = d.max_rows.unwrap_or(self.base_max_rows);
            d.prefill_chunk = match pick(rng, &[20, 25, 25, 30]) {
                0 => None,
                1 => Some(1),
                2 => Some(rows),
                // An odd size at most max-rows (1 where max-rows is 1 or 2).
                _ => {
                    let o = rng.gen_range(1..=rows) | 1;
                    Some(if o > rows { o - 2 } else { o })
                }
            };
        }
    }

    /// The GPU dimensions (module doc): cuda spaces only. `p`: the drawn prompt.
    fn draw_cuda(&self, rng: &mut ChaCha8Rng, d: &mut Draw, p: usize) {
        let on_off = |rng: &mut ChaCha8Rng| match pick(rng, &[50, 35, 15]) {
            0 => None,
            1 => Some("off"),
            _ => Some("on"),
        };
        if self.free(Dim::Graphs) {
            d.graphs = on_off(rng);
        }
        if self.free(Dim::Pdl) {
            d.pdl = on_off(rng);
        }
        if self.free(Dim::Mma) {
            d.mma = [None, Some("on"), Some("off"), Some("auto")][pick(rng, &[40, 30, 20, 10])];
        }
        if self.free(Dim::Chunk) && self.read(d, Dim::Chunk) && pct(rng, 35) {
            let c = MMA_ROWS - 1 + rng.gen_range(0..3);
            let ladder = d.chunk.get_or_insert_with(Vec::new);
            if !ladder.contains(&c) {
                ladder.push(c);
            }
            if self.free(Dim::PromptLen) && d.tape.is_none() && p <= c {
                d.prompt_len = Some(c + rng.gen_range(1..=8));
            }
        }
    }

    /// The draw with every flag the gate would refuse as meaningless dropped: a flag whose
    /// arms are absent, a boundary flag of one stage, splits or devices of another stage
    /// count, a prompt or gen that the tape sets.
    pub fn normalized(&self, mut d: Draw) -> Draw {
        let n = self.stages(&d);
        if n < 2 {
            d.splits = None;
            d.devices = None;
            d.transport = None;
            d.procs = None;
        }
        if d.splits
            .as_ref()
            .is_some_and(|s| s.len() + 1 != n || s.iter().any(|&c| c == 0 || c >= self.n_layers))
        {
            d.splits = None;
        }
        if d.devices.as_ref().is_some_and(|v| v.len() != n) {
            d.devices = None;
        }
        if d.procs.is_some_and(|w| w > n || w < 2) {
            d.procs = None;
        }
        if d.procs.is_none() && d.transport.as_deref() == Some("ipc") {
            d.transport = None;
        }
        if d.procs.is_some() {
            // Several processes cross on ipc, the shrinker's transport back to its default
            // too (the gate refuses --procs without a transport between processes).
            d.transport = Some("ipc".into());
            d.devices = None;
        }
        if d.arms.as_ref().is_some_and(|a| a.is_empty()) {
            d.arms = None;
        }
        // The shrinker's fewer (or default) arms keep a reader of every pinned flag, as the
        // draw does.
        let mut arms = self.arms(&d);
        let before = arms.clone();
        self.keep_readers(&mut arms);
        if d.arms.is_some() || arms != before {
            arms.sort_by_key(|a| ArmKind::ALL.iter().position(|b| b == a));
            d.arms = Some(arms);
        }
        let probe = Draw {
            arms: d.arms.clone(),
            ..Draw::default()
        };
        let unread = |dim| !self.read(&probe, dim);
        if unread(Dim::Window) {
            d.window = None;
        }
        if unread(Dim::Batch) {
            d.batch = None;
        }
        if unread(Dim::Chunk) {
            d.chunk = None;
        }
        if unread(Dim::Repeat) {
            d.repeat = None;
        }
        if unread(Dim::Draft) {
            d.draft = None;
        }
        if unread(Dim::Requests) {
            d.requests = None;
            d.max_rows = None;
            d.prefill_chunk = None;
        }
        // A prefill chunk is at most --max-rows positions (the gate refuses a larger one):
        // the free one of the two gives way (a pinned chunk raises the rows).
        let rows = d.max_rows.unwrap_or(self.base_max_rows);
        let chunk = d.prefill_chunk.unwrap_or(self.base_prefill_chunk);
        if chunk > rows && !unread(Dim::Requests) {
            if self.free(Dim::PrefillChunk) {
                d.prefill_chunk = Some(rows);
            } else if self.free(Dim::MaxRows) {
                d.max_rows = Some(chunk);
            }
        }
        if !self.cuda {
            d.graphs = None;
            d.pdl = None;
            d.mma = None;
        }
        if let Some(t) = &mut d.tape {
            t.len = t.len.max(1);
            // A pinned --prompt-len is every trial's prompt: a drawn tape's own prompt_len is
            // it, and the tape is at least that long (the gate refuses a tape whose
            // prompt_len contradicts --prompt-len, or shorter than a --prompt-len).
            if !self.free(Dim::PromptLen) {
                t.prompt_len = t.prompt_len.map(|_| self.base_prompt);
                t.len = t.len.max(self.base_prompt);
            }
            t.prompt_len = t.prompt_len.map(|p| p.clamp(1, t.len));
            if t.prompt_len.is_some() || d.prompt_len.is_some_and(|p| p > t.len) {
                d.prompt_len = None;
            }
            d.gen_len = None;
        }
        self.fit_prompt(&mut d);
        d
    }

    /// The prompt and positions a chunk or draft needs: the gate refuses a `--chunk` longer
    /// than the prompt and a `--draft` past the positions after the first round's input,
    /// so a pinned one grows the free prompt, generated length or tape to hold it, and a
    /// drawn one is cut to what the draw's prompt leaves (each drawn chunk at most the
    /// prompt; a draft at most the room, none where there is no room). A pinned prompt or
    /// length too short for a pinned chunk or draft is refused before the hunt starts
    /// (`cli::hunt`).
    fn fit_prompt(&self, d: &mut Draw) {
        let need = self.base_chunk_max;
        // Until nothing moves: a tape without its own prompt_len takes the default prompt at
        // most its length, so a longer tape can lengthen the prompt (twice at most).
        for _ in 0..4 {
            let before = d.clone();
            let (p, _) = self.prompt_and_steps(d);
            if p < need && self.free(Dim::PromptLen) {
                match &mut d.tape {
                    Some(t) => {
                        match &mut t.prompt_len {
                            Some(own) => *own = need,
                            None => d.prompt_len = Some(need),
                        }
                        t.len = t.len.max(need);
                    }
                    None => d.prompt_len = Some(need),
                }
            }
            let (p, steps) = self.prompt_and_steps(d);
            if let Some(k) = self.base_draft {
                let want = p.saturating_add(k).saturating_add(1);
                if steps < want {
                    match &mut d.tape {
                        Some(t) => t.len = want,
                        None if self.free(Dim::GenLen) => d.gen_len = Some(k + 1),
                        None => {}
                    }
                }
            }
            if *d == before {
                break;
            }
        }
        let (p, steps) = self.prompt_and_steps(d);
        if let Some(ladder) = &mut d.chunk {
            for c in ladder.iter_mut() {
                *c = (*c).min(p);
            }
            each_once(ladder);
        }
        let room = steps.saturating_sub(p).saturating_sub(1);
        d.draft = d.draft.map(|k| k.min(room)).filter(|&k| k >= 1);
    }

    /// The draw as gate flags (`--flag=value`), `tape`: the path its tape was written to.
    pub fn flags(&self, d: &Draw, tape: Option<&str>) -> Vec<String> {
        let list = |v: &[usize]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut f = Vec::new();
        let mut kv = |k: &str, v: String| f.push(format!("--{k}={v}"));
        if let Some(x) = d.stages {
            kv("stages", x.to_string());
        }
        if let Some(x) = &d.splits {
            kv("splits", list(x));
        }
        if let Some(x) = &d.devices {
            kv("devices", list(x));
        }
        if let Some(x) = &d.transport {
            kv("transport", x.clone());
        }
        if let Some(x) = d.procs {
            kv("procs", x.to_string());
        }
        if let Some(x) = &d.arms {
            let names: Vec<&str> = x.iter().map(|a| a.name()).collect();
            kv("arms", names.join(","));
        }
        if let Some(x) = &d.chunk {
            kv("chunk", list(x));
        }
        if let Some(x) = d.repeat {
            kv("repeat", x.to_string());
        }
        if let Some(x) = d.draft {
            kv("draft", x.to_string());
        }
        if let Some(x) = d.window {
            kv("window", x.to_string());
        }
        if let Some(x) = d.batch {
            kv("batch", x.to_string());
        }
        if let Some(x) = d.prompt_len {
            kv("prompt-len", x.to_string());
        }
        if let Some(x) = d.gen_len {
            kv("gen-len", x.to_string());
        }
        if let (Some(_), Some(p)) = (&d.tape, tape) {
            kv("tape", p.to_string());
        }
        if let Some(x) = d.jitter_us {
            kv("jitter-us", x.to_string());
        }
        if let Some(x) = d.requests {
            kv("requests", x.to_string());
        }
        if let Some(x) = d.max_rows {
            kv("max-rows", x.to_string());
        }
        if let Some(x) = d.prefill_chunk {
            kv("prefill-chunk", x.to_string());
        }
        for (k, x) in [("graphs", d.graphs), ("pdl", d.pdl), ("mma", d.mma)] {
            if let Some(x) = x {
                kv(k, x.to_string());
            }
        }
        if let Some(x) = d.seed {
            kv("seed", x.to_string());
        }
        f
    }

    /// The draw's simpler neighbours, most promising first: every flag but the structure
    /// (stages, arms, chunks, batch) back to the default at once, then each dimension back
    /// to the gate's default, then smaller (fewer stages, arms, chunks; smaller batch, window,
    /// draft, prompt, gen, tape; no jitter; one process). A default is simpler than any set
    /// value, and a smaller value than a larger one. Each is normalized, and differs.
    pub fn simpler(&self, d: &Draw) -> Vec<Draw> {
        let mut out: Vec<Draw> = Vec::new();
        let smaller = |v: usize| -> Vec<Option<usize>> {
            let mut c = vec![None];
            for x in [1, v / 2, v.saturating_sub(1)] {
                if x >= 1 && x < v && !c.contains(&Some(x)) {
                    c.push(Some(x));
                }
            }
            c
        };
        let mut push = |c: Draw| {
            let c = self.normalized(c);
            if c != *d && !out.contains(&c) {
                out.push(c);
            }
        };
        // Every flag but the structure (stages, arms, chunk ladder, batch) back to its
        // default at once: one run where the failure needs none of them.
        push(Draw {
            stages: d.stages,
            arms: d.arms.clone(),
            chunk: d.chunk.clone(),
            batch: d.batch,
            ..Draw::default()
        });
        if let Some(w) = d.procs {
            push(Draw {
                procs: None,
                transport: None,
                ..d.clone()
            });
            for x in smaller(w).into_iter().flatten() {
                push(Draw {
                    procs: Some(x),
                    ..d.clone()
                });
            }
        }
        if let Some(s) = d.stages {
            for x in smaller(s) {
                push(Draw {
                    stages: x,
                    ..d.clone()
                });
            }
        }
        for c in [
            Draw {
                transport: None,
                ..d.clone()
            },
            Draw {
                devices: None,
                ..d.clone()
            },
            Draw {
                splits: None,
                ..d.clone()
            },
            Draw {
                tape: None,
                ..d.clone()
            },
            Draw {
                jitter_us: None,
                ..d.clone()
            },
            Draw {
                graphs: None,
                ..d.clone()
            },
            Draw {
                pdl: None,
                ..d.clone()
            },
            Draw {
                mma: None,
                ..d.clone()
            },
        ] {
            push(c);
        }
        if let Some(arms) = &d.arms {
            for i in 0..arms.len() {
                let mut a = arms.clone();
                a.remove(i);
                push(Draw {
                    arms: Some(a),
                    ..d.clone()
                });
            }
            if arms.len() >= DEFAULT_ARMS.len() {
                push(Draw {
                    arms: None,
                    ..d.clone()
                });
            }
        }
        if let Some(ladder) = &d.chunk {
            push(Draw {
                chunk: None,
                ..d.clone()
            });
            for i in 0..ladder.len() {
                if ladder.len() > 1 {
                    let mut l = ladder.clone();
                    l.remove(i);
                    push(Draw {
                        chunk: Some(l),
                        ..d.clone()
                    });
                }
                for x in smaller(ladder[i]).into_iter().flatten() {
                    let mut l = ladder.clone();
                    l[i] = x;
                    each_once(&mut l);
                    push(Draw {
                        chunk: Some(l),
                        ..d.clone()
                    });
                }
            }
        }
        type Field = fn(&mut Draw) -> &mut Option<usize>;
        let fields: [Field; 9] = [
            |d| &mut d.batch,
            |d| &mut d.window,
            |d| &mut d.draft,
            |d| &mut d.repeat,
            |d| &mut d.prompt_len,
            |d| &mut d.gen_len,
            |d| &mut d.requests,
            |d| &mut d.max_rows,
            |d| &mut d.prefill_chunk,
        ];
        for field in fields {
            let mut probe = d.clone();
            if let Some(v) = *field(&mut probe) {
                for x in smaller(v) {
                    let mut c = d.clone();
                    *field(&mut c) = x;
                    push(c);
                }
            }
        }
        if let Some(t) = &d.tape {
            for len in smaller(t.len).into_iter().flatten() {
                push(Draw {
                    tape: Some(TapeSpec { len, ..t.clone() }),
                    ..d.clone()
                });
            }
            if let Some(p) = t.prompt_len {
                for x in smaller(p) {
                    push(Draw {
                        tape: Some(TapeSpec {
                            prompt_len: x,
                            ..t.clone()
                        }),
                        ..d.clone()
                    });
                }
            }
        }
        if let Some(j) = d.jitter_us {
            for x in [1, j / 2] {
                if x >= 1 && x < j {
                    push(Draw {
                        jitter_us: Some(x),
                        ..d.clone()
                    });
                }
            }
        }
        push(Draw {
            seed: None,
            ..d.clone()
        });
        out
    }

    /// What a draw covers, for the report's coverage table: one key per edge it touches.
    pub fn coverage(&self, d: &Draw) -> Vec<&'static str> {
        let mut k = Vec::new();
        let n = self.stages(d);
        let arms = self.arms(d);
        let (p, steps) = self.prompt_and_steps(d);
        let mut on = |b: bool, key: &'static str| {
            if b {
                k.push(key);
            }
        };
        on(n == 1, "stages 1");
        on(n >= 2, "stages 2+");
        on(n >= 8, "stages 8+");
        on(n == self.max_stages() && n >= 2, "stages at the most");
        on(
            d.splits.as_ref().is_some_and(|s| s.first() == Some(&1)),
            "splits one layer first",
        );
        on(
            d.splits
                .as_ref()
                .is_some_and(|s| s.last() == Some(&(self.n_layers - 1))),
            "splits last layer alone",
        );
        on(
            d.devices
                .as_ref()
                .is_some_and(|v| v.iter().any(|&x| x != v[0])),
            "several devices",
        );
        on(d.transport.as_deref() == Some("host"), "transport host");
        on(d.procs.is_some(), "several processes");
        for a in ArmKind::ALL {
            if arms.contains(&a) {
                k.push(match a {
                    ArmKind::Eager => "arm eager",
                    ArmKind::Pipelined => "arm pipelined",
                    ArmKind::Batched => "arm batched",
                    ArmKind::Prime => "arm prime",
                    ArmKind::Verify => "arm verify",
                    ArmKind::Serve => "arm serve",
                });
            }
        }
        let mut on = |b: bool, key: &'static str| {
            if b {
                k.push(key);
            }
        };
        on(d.window == Some(1), "window 1");
        on(d.window.is_some_and(|w| w > steps), "window past the tape");
        on(d.batch == Some(1), "batch 1");
        on(d.batch.is_some_and(|b| b >= 5), "batch 5+");
        let ladder = d.chunk.clone().unwrap_or_default();
        on(ladder.contains(&1), "chunk 1");
        on(ladder.contains(&p), "chunk whole prompt");
        on(
            ladder.iter().any(|&c| c > 1 && c % 2 == 1 && c < p),
            "chunk odd",
        );
        on(d.draft == Some(1), "draft 1");
        on(d.draft.is_some_and(|x| x >= 6), "draft 6+");
        on(p == 1, "prompt 1");
        on(d.tape.is_some(), "tape");
        on(
            d.tape.as_ref().is_some_and(|t| t.prompt_len.is_some()),
            "tape with its prompt_len",
        );
        on(d.jitter_us.is_some(), "jitter");
        on(d.jitter_us.is_some_and(|j| j >= 200), "jitter high");
        if arms.contains(&ArmKind::Serve) {
            let (req, rows) = (
                d.requests.unwrap_or(self.base_requests),
                d.max_rows.unwrap_or(self.base_max_rows),
            );
            let chunk = d.prefill_chunk.unwrap_or(self.base_prefill_chunk);
            on(req == 1, "requests 1");
            on(req >= 30, "requests 30+");
            on(rows == 1, "max-rows 1");
            on(rows >= 16, "max-rows 16+");
            on(req > rows, "serve reuses rows");
            on(chunk == 1, "prefill-chunk 1");
            on(chunk == rows && rows > 1, "prefill-chunk = max-rows");
            on(chunk > 1 && chunk % 2 == 1, "prefill-chunk odd");
        }
        on(d.graphs == Some("off"), "graphs off");
        on(d.pdl == Some("off"), "pdl off");
        on(d.mma == Some("on"), "mma on");
        on(d.mma == Some("off"), "mma off");
        on(ladder.contains(&(MMA_ROWS - 1)), "chunk below mma rows");
        on(ladder.contains(&MMA_ROWS), "chunk at mma rows");
        on(ladder.contains(&(MMA_ROWS + 1)), "chunk above mma rows");
        k
    }
}
