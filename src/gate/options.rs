//! A gate's options: every gate flag as a plain value, free of the command-line parser (the
//! cli fills it from its `GateArgs`; a battery, soak, bench or selftest the same way). The
//! one list of the gate's flags: `to_argv` writes every field back as flags, and a
//! multi-process member's command line is `member_argv`, derived from it, so a flag added
//! here and not written out fails to compile (the destructuring names every field), and a
//! test parses the argv back and compares (cli: `options_round_trip_through_argv`).

use std::path::PathBuf;

/// Every gate flag (their meaning and defaults: the cli's `GateArgs`, one field each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateOptions {
    pub backend: String,
    pub model: Option<PathBuf>,
    pub stages: Option<usize>,
    pub splits: Option<String>,
    pub devices: Option<String>,
    pub transport: String,
    pub arms: String,
    pub chunk: Option<String>,
    pub repeat: usize,
    pub draft: usize,
    pub window: usize,
    pub batch: usize,
    pub requests: usize,
    pub max_rows: usize,
    pub prefill_chunk: usize,
    pub prompt_len: Option<usize>,
    pub gen_len: usize,
    pub seed: u64,
    pub tape: Option<PathBuf>,
    pub topk: usize,
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
    pub peer_timeout: u64,
    pub rendezvous_timeout: u64,
    pub link_host: String,
    pub nccl_lib: Option<PathBuf>,
}

impl GateOptions {
    /// The number of members of a multi-process gate (None: one process).
    pub fn world(&self) -> Option<usize> {
        self.procs.or(self.world)
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
        kv("transport", transport);
        kv("arms", arms);
        if let Some(x) = chunk {
            kv("chunk", x);
        }
        kv("repeat", repeat);
        kv("draft", draft);
        kv("window", window);
        kv("batch", batch);
        kv("requests", requests);
        kv("max-rows", max_rows);
        kv("prefill-chunk", prefill_chunk);
        if let Some(x) = prompt_len {
            kv("prompt-len", x);
        }
        kv("gen-len", gen_len);
        kv("seed", seed);
        if let Some(x) = tape {
            kv("tape", &path(x));
        }
        kv("topk", topk);
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
        kv("peer-timeout", peer_timeout);
        kv("rendezvous-timeout", rendezvous_timeout);
        kv("link-host", link_host);
        if let Some(x) = nccl_lib {
            kv("nccl-lib", &path(x));
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
