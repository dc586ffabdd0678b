//! A gate's options: every gate flag as a plain value, free of the command-line parser (the
//! cli fills it from its `GateArgs`; a battery, soak, bench or selftest the same way). The
//! one list of the gate's flags: `to_argv` writes every field back as flags, and a
//! multi-process member's command line is `member_argv`, derived from it, so a flag added
//! here and not written out fails to compile (the destructuring names every field), and a
//! test parses the argv back and compares (cli: `options_round_trip_through_argv`).

use std::path::PathBuf;

/// The defaults of the flags whose "given or not" the flag policy reads (`FLAG_RULES`): the
/// field is `None` when the flag was left out, and the accessor of the same name resolves it.
/// `--help` states each (the cli's `GateArgs`).
pub const DEFAULT_TRANSPORT: &str = "auto";
pub const DEFAULT_REPEAT: usize = 3;
pub const DEFAULT_DRAFT: usize = 4;
pub const DEFAULT_WINDOW: usize = 3;
pub const DEFAULT_BATCH: usize = 3;
pub const DEFAULT_GEN_LEN: usize = 16;
pub const DEFAULT_TOPK: usize = 8;
pub const DEFAULT_PEER_TIMEOUT_S: u64 = 20;
pub const DEFAULT_RENDEZVOUS_TIMEOUT_S: u64 = 300;
pub const DEFAULT_LINK_HOST: &str = "127.0.0.1";

/// Every gate flag (their meaning and defaults: the cli's `GateArgs`, one field each; a flag
/// with a default is an `Option` here, `None` when left out, so the flag policy knows what
/// was given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateOptions {
    pub backend: String,
    pub model: Option<PathBuf>,
    pub stages: Option<usize>,
    pub splits: Option<String>,
    pub devices: Option<String>,
    pub transport: Option<String>,
    pub arms: String,
    pub chunk: Option<String>,
    pub repeat: Option<usize>,
    pub draft: Option<usize>,
    pub window: Option<usize>,
    pub batch: Option<usize>,
    pub requests: Option<usize>,
    pub max_rows: Option<usize>,
    pub prefill_chunk: Option<usize>,
    pub prompt_len: Option<usize>,
    pub gen_len: Option<usize>,
    pub seed: u64,
    pub tape: Option<PathBuf>,
    pub topk: Option<usize>,
    /// `--fault`, each as given (parsed and checked by `plan::check_on`).
    pub faults: Vec<String>,
    pub receipt: Option<PathBuf>,
    pub cpu_devices: usize,
    pub jitter_us: u64,
    pub pdl: Option<String>,
    pub graphs: Option<String>,
    pub mma: Option<String>,
    pub cache_dir: Option<PathBuf>,
    pub no_cache: bool,
    pub trace: Option<PathBuf>,
    pub quiet: bool,
    pub procs: Option<usize>,
    pub rank: Option<usize>,
    pub world: Option<usize>,
    pub rendezvous: Option<String>,
    pub ranks: Option<String>,
    pub peer_timeout: Option<u64>,
    pub rendezvous_timeout: Option<u64>,
    pub link_host: Option<String>,
    pub nccl_lib: Option<PathBuf>,
    /// The hidden `--plant-defect SPEC` (`gate::plant`: hunt --self-check's planted defect).
    pub plant_defect: Option<String>,
}

impl GateOptions {
    /// The files a run reads (flag, path): what no output of it may overwrite
    /// (`fsio::check_distinct`).
    pub fn input_files(&self) -> Vec<(&'static str, &std::path::Path)> {
        [
            ("--model", &self.model),
            ("--tape", &self.tape),
            ("--nccl-lib", &self.nccl_lib),
        ]
        .into_iter()
        .filter_map(|(f, p)| p.as_deref().map(|p| (f, p)))
        .collect()
    }

    /// Whether `--arms` names `kind` (an unknown name is `check_on`'s to refuse).
    pub fn runs_arm(&self, kind: crate::arms::ArmKind) -> bool {
        self.arms
            .split(',')
            .any(|a| crate::arms::ArmKind::parse(a.trim()) == Some(kind))
    }

    /// The number of members of a multi-process gate (None: one process).
    pub fn world(&self) -> Option<usize> {
        self.procs.or(self.world)
    }

    /// `--transport` as the run takes it (default `auto`).
    pub fn transport(&self) -> &str {
        self.transport.as_deref().unwrap_or(DEFAULT_TRANSPORT)
    }

    /// `--repeat` (default `DEFAULT_REPEAT`).
    pub fn repeat(&self) -> usize {
        self.repeat.unwrap_or(DEFAULT_REPEAT)
    }

    /// `--draft` (default `DEFAULT_DRAFT`).
    pub fn draft(&self) -> usize {
        self.draft.unwrap_or(DEFAULT_DRAFT)
    }

    /// `--window` (default `DEFAULT_WINDOW`).
    pub fn window(&self) -> usize {
        self.window.unwrap_or(DEFAULT_WINDOW)
    }

    /// `--batch` (default `DEFAULT_BATCH`).
    pub fn batch(&self) -> usize {
        self.batch.unwrap_or(DEFAULT_BATCH)
    }

    /// `--requests` (default `serve::DEFAULT_REQUESTS`).
    pub fn requests(&self) -> usize {
        self.requests
            .unwrap_or(crate::arms::serve::DEFAULT_REQUESTS)
    }

    /// `--max-rows` (default `serve::DEFAULT_MAX_ROWS`).
    pub fn max_rows(&self) -> usize {
        self.max_rows
            .unwrap_or(crate::arms::serve::DEFAULT_MAX_ROWS)
    }

    /// `--prefill-chunk` (default `serve::DEFAULT_PREFILL_CHUNK`, at most `--max-rows`: a
    /// default never makes a flag the user gave an error; a given chunk above `--max-rows`
    /// is refused).
    pub fn prefill_chunk(&self) -> usize {
        self.prefill_chunk
            .unwrap_or(crate::arms::serve::DEFAULT_PREFILL_CHUNK.min(self.max_rows()))
    }

    /// The serve arm's flags as the run takes them (the defaults above).
    pub fn serve_spec(&self) -> crate::arms::serve::ServeSpec {
        crate::arms::serve::ServeSpec {
            requests: self.requests(),
            max_rows: self.max_rows(),
            prefill_chunk: self.prefill_chunk(),
        }
    }

    /// `--gen-len` (default `DEFAULT_GEN_LEN`).
    pub fn gen_len(&self) -> usize {
        self.gen_len.unwrap_or(DEFAULT_GEN_LEN)
    }

    /// The positions the arms generate after the prompt: none with a tape (it gives every
    /// position), else `--gen-len`.
    pub fn run_gen_len(&self) -> usize {
        match self.tape {
            Some(_) => 0,
            None => self.gen_len(),
        }
    }

    /// `--topk` (default `DEFAULT_TOPK`).
    pub fn topk(&self) -> usize {
        self.topk.unwrap_or(DEFAULT_TOPK)
    }

    /// `--peer-timeout` in seconds (default `DEFAULT_PEER_TIMEOUT_S`).
    pub fn peer_timeout(&self) -> u64 {
        self.peer_timeout.unwrap_or(DEFAULT_PEER_TIMEOUT_S)
    }

    /// `--rendezvous-timeout` in seconds (default `DEFAULT_RENDEZVOUS_TIMEOUT_S`).
    pub fn rendezvous_timeout(&self) -> u64 {
        self.rendezvous_timeout
            .unwrap_or(DEFAULT_RENDEZVOUS_TIMEOUT_S)
    }

    /// `--link-host` (default `DEFAULT_LINK_HOST`).
    pub fn link_host(&self) -> &str {
        self.link_host.as_deref().unwrap_or(DEFAULT_LINK_HOST)
    }

    /// These options as gate flags (`--flag=value`, so a value starting with `-` stays a
    /// value): parsed by the cli, they give these options back. Every field is named here, and
    /// one named but not written is an unused variable, denied.
    #[deny(unused_variables)]
    pub fn to_argv(&self) -> Vec<String> {
        let GateOptions {
            backend,
            model,
            stages,
            splits,
            devices,
            transport,
            arms,
            chunk,
            repeat,
            draft,
            window,
            batch,
            requests,
            max_rows,
            prefill_chunk,
            prompt_len,
            gen_len,
            seed,
            tape,
            topk,
            faults,
            receipt,
            cpu_devices,
            jitter_us,
            pdl,
            graphs,
            mma,
            cache_dir,
            no_cache,
            trace,
            quiet,
            procs,
            rank,
            world,
            rendezvous,
            ranks,
            peer_timeout,
            rendezvous_timeout,
            link_host,
            nccl_lib,
            plant_defect,
        } = self;
        let mut v: Vec<String> = Vec::new();
        let mut kv = |k: &str, val: &dyn std::fmt::Display| v.push(format!("--{k}={val}"));
        let path = |p: &PathBuf| p.display().to_string();
        kv("backend", backend);
        if let Some(x) = model {
            kv("model", &path(x));
        }
        if let Some(x) = stages {
            kv("stages", x);
        }
        if let Some(x) = splits {
            kv("splits", x);
        }
        if let Some(x) = devices {
            kv("devices", x);
        }
        if let Some(x) = transport {
            kv("transport", x);
        }
        kv("arms", arms);
        if let Some(x) = chunk {
            kv("chunk", x);
        }
        if let Some(x) = repeat {
            kv("repeat", x);
        }
        if let Some(x) = draft {
            kv("draft", x);
        }
        if let Some(x) = window {
            kv("window", x);
        }
        if let Some(x) = batch {
            kv("batch", x);
        }
        if let Some(x) = requests {
            kv("requests", x);
        }
        if let Some(x) = max_rows {
            kv("max-rows", x);
        }
        if let Some(x) = prefill_chunk {
            kv("prefill-chunk", x);
        }
        if let Some(x) = prompt_len {
            kv("prompt-len", x);
        }
        if let Some(x) = gen_len {
            kv("gen-len", x);
        }
        kv("seed", seed);
        if let Some(x) = tape {
            kv("tape", &path(x));
        }
        if let Some(x) = topk {
            kv("topk", x);
        }
        for f in faults {
            kv("fault", f);
        }
        if let Some(x) = receipt {
            kv("receipt", &path(x));
        }
        kv("cpu-devices", cpu_devices);
        kv("jitter-us", jitter_us);
        if let Some(x) = pdl {
            kv("pdl", x);
        }
        if let Some(x) = graphs {
            kv("graphs", x);
        }
        if let Some(x) = mma {
            kv("mma", x);
        }
        if let Some(x) = cache_dir {
            kv("cache-dir", &path(x));
        }
        if let Some(x) = trace {
            kv("trace", &path(x));
        }
        if let Some(x) = procs {
            kv("procs", x);
        }
        if let Some(x) = rank {
            kv("rank", x);
        }
        if let Some(x) = world {
            kv("world", x);
        }
        if let Some(x) = rendezvous {
            kv("rendezvous", x);
        }
        if let Some(x) = ranks {
            kv("ranks", x);
        }
        if let Some(x) = peer_timeout {
            kv("peer-timeout", x);
        }
        if let Some(x) = rendezvous_timeout {
            kv("rendezvous-timeout", x);
        }
        if let Some(x) = link_host {
            kv("link-host", x);
        }
        if let Some(x) = nccl_lib {
            kv("nccl-lib", &path(x));
        }
        if let Some(x) = plant_defect {
            kv("plant-defect", x);
        }
        if *no_cache {
            v.push("--no-cache".into());
        }
        if *quiet {
            v.push("--quiet".into());
        }
        v
    }

    /// The gate's flags as a command line for a member: every flag but the ones `launch`
    /// sets per member (its place in the multi-process gate, the receipt path, --quiet).
    pub fn member_argv(&self) -> Vec<String> {
        GateOptions {
            procs: None,
            rank: None,
            world: None,
            rendezvous: None,
            receipt: None,
            quiet: false,
            ..self.clone()
        }
        .to_argv()
    }
}
