//! `ppn-gate hunt`: its flags checked and turned into a `crate::hunt::Hunt` (the gate flags
//! given on its command line pin their dimension and ride along to every trial), run, and
//! its table and exit code.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;

use super::shared::{install_interrupt_handler, INTERRUPTS};
use super::{Cli, HuntArgs};
use crate::arms::ArmKind;
use crate::backend::any::AnyBackend;
use crate::exit::{EXIT_FAIL, EXIT_INTERRUPTED, EXIT_PASS};
use crate::fsio::check_writable;
use crate::gate::plan::{
    check_prompt_reach, check_topk, list_flag, load_model, open_backend, PromptReach,
};
use crate::gate::plant::Corner;
use crate::gate::policy::{check_flags, Reader};
use crate::gate::tape::{check_tape, read_tape};
use crate::gate::GateOptions;
use crate::hunt::space::{Dim, Space};
use crate::hunt::trial::parse_budget;
use crate::hunt::Hunt;
use crate::model::Config;
use crate::runtime::{Fault, Placement, TransportChoice};

/// The most `--confirm` runs per candidate, and shrink candidates per finding.
const CONFIRM_MAX: usize = 100;
const SHRINK_LIMIT: usize = 200;

/// The argument ids given on this process's command line (not defaulted), for `hunt`.
fn given_ids() -> BTreeSet<String> {
    use clap::parser::ValueSource;
    use clap::CommandFactory as _;
    let Ok(m) = Cli::command().try_get_matches_from(std::env::args_os()) else {
        return BTreeSet::new();
    };
    let Some(("hunt", sub)) = m.subcommand() else {
        return BTreeSet::new();
    };
    sub.ids()
        .filter(|id| sub.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect()
}

/// Gate flags to options by the gate's own parser (the error: clap's, naming the flag).
fn parse_gate(argv: &[String]) -> Result<GateOptions> {
    let cli =
        Cli::try_parse_from(std::iter::once("ppn-gate".to_string()).chain(argv.iter().cloned()))
            .map_err(|e| anyhow!("{}", e.to_string().trim()))?;
    Ok(cli.gate.options())
}

/// The gate flags given to a hunt, held before the first trial to what they decide whatever
/// the draws make of the rest, in the gate's own words (exit 2 naming the flag): a value no
/// trial can run is a bad flag, not a `refused` finding in every trial. What a draw mends is
/// left to it (a pinned flag only some arms read brings one of them, a pinned chunk or draft
/// grows the drawn prompt and positions, a pinned prefill chunk raises the drawn max-rows);
/// what no draw can mend is refused here: a count of 0, a placement no layer count or
/// device set takes, a transport or process count the drawn stages can never carry, a flag
/// no drawn run reads, a top-k past the vocab, a tape the model refuses, a chunk or draft
/// past a pinned prompt, positions past the model's context. `pinned`: the dimensions the
/// flags fix; `min_stages`: what a pinned transport or process count needs. Returns the
/// pinned placement's stage count (1 where the stages are drawn).
fn check_pinned(
    base: &GateOptions,
    given: &BTreeSet<String>,
    pinned: &[Dim],
    cfg: &Config,
    be: &AnyBackend,
    min_stages: usize,
) -> Result<usize> {
    let is_pinned = |d: Dim| pinned.contains(&d);
    let most = cfg.n_layers.clamp(1, 8);
    // The counts, each alone (a flag left out is its default, which passes).
    let chunks = list_flag("--chunk", &base.chunk)?;
    crate::arms::check_counts(
        base.window(),
        base.batch(),
        chunks.as_deref(),
        base.repeat(),
        base.draft(),
    )
    .map_err(anyhow::Error::msg)?;
    // The serve arm's: a free max-rows is raised to a pinned prefill chunk.
    let rows = if is_pinned(Dim::MaxRows) {
        base.max_rows()
    } else {
        base.max_rows().max(base.prefill_chunk())
    };
    crate::arms::serve::check_flags(base.requests(), rows, base.prefill_chunk())
        .map_err(anyhow::Error::msg)?;
    check_topk(base.topk(), cfg.vocab)?;
    // The placement: stages, splits and devices pin the stage count together, so the gate's
    // own rule decides them (a free --splits or --devices is drawn to fit the stages).
    let transport = base.transport();
    let cross = crate::multiproc::Cross::parse(transport);
    let in_process = match cross {
        Some(_) => TransportChoice::Auto,
        None => TransportChoice::parse(transport)?,
    };
    let stages = if is_pinned(Dim::Stages) {
        let be2 = be.clone();
        Placement::from_flags(
            cfg.n_layers,
            base.stages,
            list_flag("--splits", &base.splits)?.as_deref(),
            list_flag("--devices", &base.devices)?.as_deref(),
            in_process,
            be.device_count(),
            &move |a, b| be2.peer_ok(a, b),
        )?
        .n_stages()
    } else {
        1
    };
    // Processes: the hunt draws --procs (with --transport ipc) only where both are free, so a
    // pinned one needs the other pinned beside it.
    match (base.procs, cross) {
        (Some(w), None) => bail!(
            "--procs {w}: a multi-process trial needs --transport ipc (cpu) or nccl (cuda) between its processes, and the hunt draws no transport beside a pinned --procs: pin --transport too"
        ),
        (None, Some(c)) => bail!(
            "--transport {}: crosses between processes, and the hunt draws --procs only where --transport is free: pin --procs W too",
            c.name()
        ),
        (Some(w), Some(_)) if w < 2 => {
            bail!("--procs {w}: a multi-process trial needs 2 or more members")
        }
        (Some(w), Some(_)) => {
            // Its own words name --procs (the stages: pinned, or the most the hunt draws).
            let n = if is_pinned(Dim::Stages) { stages } else { most };
            crate::multiproc::rank_map(n, w, base.ranks.as_deref())?;
        }
        (None, None) => {}
    }
    // A flag no drawn run reads: the policy on the widest run the draws can make (every arm
    // where the arms are drawn, the most stages where they are, several processes where
    // the hunt may draw them).
    let mut widest = base.clone();
    if !is_pinned(Dim::Arms) {
        widest.arms = ArmKind::ALL.map(|a| a.name()).join(",");
    }
    if !is_pinned(Dim::Stages) {
        widest.stages = Some(most.max(min_stages));
    }
    let multi = !is_pinned(Dim::Procs) && !is_pinned(Dim::Transport) && be.kind() == "cpu";
    if multi && most >= 2 {
        widest.procs = Some(2);
        widest.transport = Some("ipc".into());
    }
    check_flags(&widest, Reader::Gate)
        .map_err(|e| anyhow!("{e:#} (no trial of this hunt reads it: the flags given fix that)"))?;
    // A tape given: the model's bounds.
    if let Some(p) = base.tape.as_deref() {
        check_tape(&read_tape(p)?, p, cfg.vocab, cfg.context_length)?;
    }
    // A chunk or draft past the prompt and positions the flags fix (a free prompt, length
    // or tape is drawn to hold them): the gate's own rule on the least each trial walks.
    let mut least = base.clone();
    least.arms = "prime,verify".into();
    if !given.contains("prompt_len") && !given.contains("tape") {
        least.prompt_len = Some(chunks.iter().flatten().copied().max().unwrap_or(1));
    }
    if !given.contains("gen_len") && !given.contains("tape") {
        least.gen_len = Some(base.draft.map_or(1, |k| k.saturating_add(1)));
    }
    let reach = check_prompt_reach(&least)?;
    let ctx = cfg.context_length;
    if ctx > 0 && reach.steps > ctx {
        let show = |v: Option<String>, flag: &str| v.map(|v| format!("{flag} {v}"));
        let flags: Vec<String> = [
            show(base.prompt_len.map(|p| p.to_string()), "--prompt-len"),
            show(base.gen_len.map(|g| g.to_string()), "--gen-len"),
            show(base.chunk.clone(), "--chunk"),
            show(base.draft.map(|k| k.to_string()), "--draft"),
            show(
                base.tape.as_ref().map(|t| t.display().to_string()),
                "--tape",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        bail!(
            "{}: every trial walks at least {} positions (a {}-position prompt and {} after it), more than the model's context length {ctx} ({}.context_length)",
            flags.join(" "),
            reach.steps,
            reach.prompt,
            reach.steps - reach.prompt,
            cfg.arch
        );
    }
    Ok(stages)
}

pub fn hunt(a: &HuntArgs) -> Result<i32> {
    install_interrupt_handler();
    let given = given_ids();
    let g = a.gate.options();
    if a.trials == Some(0) {
        bail!("--trials 0: a hunt needs at least one trial");
    }
    let budget = a
        .budget
        .as_deref()
        .map(parse_budget)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let budget = match (a.trials, budget) {
        (None, None) => Some(Duration::from_secs(600)),
        (_, b) => b,
    };
    if a.confirm == 0 || a.confirm > CONFIRM_MAX {
        bail!("--confirm {}: must be in 1..={CONFIRM_MAX}", a.confirm);
    }
    if a.timeout_s == 0 || a.timeout_s > 24 * 3600 {
        bail!("--timeout-s {}: must be in 1..=86400", a.timeout_s);
    }
    // Gate flags a hunt cannot honour: it names every trial's receipt itself, starts the
    // members of a multi-process trial itself, and plants its own defect.
    if let Some(r) = &g.receipt {
        bail!(
            "--receipt {}: the hunt writes each trial's receipt under --out",
            r.display()
        );
    }
    if let Some(t) = &g.trace {
        bail!("--trace {}: a hunt does not trace its trials", t.display());
    }
    if g.rank.is_some() || g.world.is_some() || g.rendezvous.is_some() || g.ranks.is_some() {
        bail!("--rank/--world/--rendezvous/--ranks: a hunt starts the members of a multi-process trial itself (pin --procs W)");
    }
    if g.plant_defect.is_some() {
        bail!("--plant-defect: use --self-check (the hunt plants its own corner)");
    }
    if g.faults.len() > 1 {
        bail!(
            "--fault given {} times: a hunt hunts with one fault",
            g.faults.len()
        );
    }
    let fault = g.faults.first().map(|f| Fault::parse(f)).transpose()?;
    if a.self_check && fault.is_some() {
        bail!(
            "--self-check with --fault: the self-check runs clean trials with its planted defect"
        );
    }
    if let Some(j) = &a.junit {
        check_writable("--junit", j)?;
    }
    // Every gate flag given rides along to every trial (and pins its dimension), but the
    // hunt's own seed and fault.
    let base_flags: Vec<String> = g
        .to_argv()
        .into_iter()
        .filter(|arg| {
            let key = arg.trim_start_matches("--").split('=').next().unwrap_or("");
            let id = key.replace('-', "_");
            given.contains(&id) && id != "seed"
        })
        .collect();
    let base = parse_gate(&base_flags)?;
    let be = open_backend(&base)?;
    let (model, model_name) = load_model(base.model.as_deref())?;
    // Devices or splits given fix the stage count too; a tape given fixes the prompt and the
    // positions (its own prompt_len, else --prompt-len or the default, at most its length).
    let pins_stages = ["stages", "devices", "splits"]
        .iter()
        .any(|k| given.contains(*k));
    let pins_prompt = given.contains("tape");
    let pinned: Vec<Dim> = Dim::ALL
        .into_iter()
        .filter(|d| {
            given.contains(d.id())
                || (*d == Dim::Stages && pins_stages)
                || (matches!(d, Dim::PromptLen | Dim::GenLen) && pins_prompt)
        })
        .collect();
    let mut base_arms = Vec::new();
    for name in base.arms.split(',') {
        let k = ArmKind::parse(name.trim())
            .ok_or_else(|| anyhow!("--arms {:?}: unknown arm {:?}", base.arms, name.trim()))?;
        if base_arms.contains(&k) {
            bail!("--arms {:?}: arm {:?} listed twice", base.arms, name.trim());
        }
        base_arms.push(k);
    }
    let base_min_stages = match (base.procs, base.transport()) {
        (Some(w), _) => w,
        (None, "auto") => 1,
        _ => 2,
    };
    let base_stages = check_pinned(&base, &given, &pinned, &model.cfg, &be, base_min_stages)?;
    // The prompt and positions as the gate resolves them (a tape's own, else the flags).
    let reach = PromptReach::of(&base)?;
    let base_prompt = reach.prompt;
    let base_gen = match base.tape {
        Some(_) => reach.steps - reach.prompt,
        None => base.gen_len(),
    };
    let base_chunk_max = list_flag("--chunk", &base.chunk)?
        .and_then(|c| c.into_iter().max())
        .unwrap_or(0);
    let space = Space {
        n_layers: model.cfg.n_layers,
        vocab: model.cfg.vocab,
        context: model.cfg.context_length,
        devices: be.device_count(),
        cuda: be.kind() == "cuda",
        pinned,
        base_arms,
        base_stages,
        base_prompt,
        base_gen,
        base_min_stages,
        base_requests: base.requests(),
        base_max_rows: base.max_rows(),
        base_prefill_chunk: base.prefill_chunk(),
        base_chunk_max,
        base_draft: base.draft,
    };
    drop((be, model));
    let out = a.out.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        PathBuf::from("receipts/runs").join(format!("hunt-{t}-{}", std::process::id()))
    });
    let out_flag = crate::fsio::flag_name("--out", a.out.is_some());
    let (made, _lock) = crate::fsio::take_out_dir(&out_flag, &out)?;
    let out = out
        .canonicalize()
        .with_context(|| format!("--out {}", crate::fsio::shown_path(&out)))?;
    // --junit must not overwrite an input or the report (the trials' own files are named
    // under trials/, shrink/, found/ and tapes/ by the hunt).
    let report_path = out.join("hunt.json");
    let mut outs = vec![
        ("--out", report_path.as_path()),
        ("--out's lock", _lock.path()),
    ];
    outs.extend(a.junit.as_deref().map(|j| ("--junit", j)));
    crate::fsio::check_distinct(&outs, &g.input_files())?;
    // The hunt owns --out (trials/, shrink/, found/, tapes/ under it, named as it goes): a
    // --junit inside it could be any of those files (a trial's receipt was replaced).
    if let Some(j) = &a.junit {
        if crate::fsio::resolved(j).starts_with(&out) {
            bail!(
                "--junit {}: is inside --out {}, which the hunt writes (trials/, shrink/, found/, tapes/); give a path outside it",
                crate::fsio::shown_path(j),
                crate::fsio::shown_path(&out)
            );
        }
    }
    let stop = || INTERRUPTS.load(Ordering::SeqCst) > 0;
    let h = Hunt {
        exe: std::env::current_exe().context("finding this binary (every trial runs it)")?,
        out: out.clone(),
        seed: g.seed,
        trials: a.trials,
        budget,
        fault,
        confirm: a.confirm,
        timeout: Duration::from_secs(a.timeout_s),
        corner: a.self_check.then(|| Corner::of_seed(g.seed)),
        base_flags,
        space,
        parse: &parse_gate,
        stop: &stop,
        junit: a.junit.clone(),
        model: model_name,
        shrink_limit: SHRINK_LIMIT,
    };
    h.check_fault_reachable()?;
    made.keep();
    let t = h.run()?;
    for l in crate::hunt::report::table(&h, &t) {
        outln!("{l}");
    }
    outln!("report: {}", out.join("hunt.json").display());
    if let Some(j) = &a.junit {
        outln!("junit: {}", j.display());
    }
    if a.self_check {
        return Ok(match h.self_check_miss(&t) {
            None if t
                .findings
                .iter()
                .all(|f| f.shrunk == Hunt::corner_draw(&Corner::of_seed(g.seed))) =>
            {
                outln!(
                    "self-check: PASS: found the planted corner {} and shrank it exactly",
                    Corner::of_seed(g.seed)
                );
                EXIT_PASS
            }
            None => {
                outln!("self-check: found the planted corner; other findings above");
                EXIT_FAIL
            }
            Some(miss) => {
                outln!("self-check: FAIL: {miss}");
                EXIT_FAIL
            }
        });
    }
    Ok(match (t.findings.is_empty(), t.interrupted) {
        (false, _) => EXIT_FAIL,
        (true, true) => EXIT_INTERRUPTED,
        (true, false) => EXIT_PASS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::plan::{check, fault_closed, prepare_model};
    use crate::hunt::space::{Draw, DEFAULT_ARMS};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn space(model: &crate::model::Model, pinned: Vec<Dim>, base_arms: Vec<ArmKind>) -> Space {
        let c = &model.cfg;
        Space::defaults_for_tests((c.n_layers, c.vocab, c.context_length), pinned, base_arms)
    }

    fn hunt_in<'a>(out: &Path, space: Space, stop: &'a dyn Fn() -> bool) -> Hunt<'a> {
        Hunt {
            exe: PathBuf::from("unused"),
            out: out.to_path_buf(),
            seed: 0,
            trials: None,
            budget: None,
            fault: None,
            confirm: 1,
            timeout: Duration::from_secs(1),
            corner: None,
            base_flags: vec!["--backend=cpu".into()],
            space,
            parse: &parse_gate,
            stop,
            junit: None,
            model: "builtin".into(),
            shrink_limit: 1,
        }
    }

    use std::path::Path;

    /// Thousands of drawn configurations, each accepted by the gate's own validation in
    /// process (`prepare_model`: flags, placement, arms, tape, positions, memory), without
    /// a fault and with every fault the gate's rule says opens there; a fault the rule says
    /// cannot open is refused by the gate. Every CPU-openable fault opens somewhere, and
    /// every edge of the distribution is met.
    #[test]
    fn every_drawn_configuration_is_accepted_by_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let (model, name) = load_model(None).unwrap();
        let stop = || false;
        let h = hunt_in(
            dir.path(),
            space(&model, vec![], DEFAULT_ARMS.to_vec()),
            &stop,
        );
        let mut rng = ChaCha8Rng::seed_from_u64(2718);
        let mut opened = std::collections::BTreeMap::new();
        let mut coverage = BTreeSet::new();
        for i in 0..2000 {
            let d = h.space.draw(&mut rng);
            coverage.extend(h.space.coverage(&d));
            let flags = h.flags_of(&d).unwrap();
            let opts = parse_gate(&flags).unwrap_or_else(|e| panic!("draw {i} {flags:?}: {e:#}"));
            prepare_model(&opts, Some((model.clone(), name.clone())))
                .unwrap_or_else(|e| panic!("draw {i} {flags:?}: {e:#}"));
            let c = check(&opts).unwrap();
            for f in Fault::ALL {
                let mut with = opts.clone();
                with.faults = vec![f.name().into()];
                match fault_closed(&opts, &c.be, &c.devices, &c.arms, f) {
                    None => {
                        *opened.entry(f.name()).or_insert(0) += 1;
                        prepare_model(&with, Some((model.clone(), name.clone())))
                            .unwrap_or_else(|e| panic!("draw {i} {flags:?} --fault {f}: {e:#}"));
                    }
                    Some(why) => {
                        let e = check(&with).err().map(|e| format!("{e:#}"));
                        assert_eq!(e, Some(format!("--fault {f}: {why}")), "draw {i} {flags:?}");
                    }
                }
            }
        }
        for f in Fault::ALL {
            let cpu_closed = matches!(f, Fault::NoLoadBarrier | Fault::MmaRowOrder);
            assert_eq!(
                opened.contains_key(f.name()),
                !cpu_closed,
                "{f}: {opened:?}"
            );
        }
        for k in [
            "stages 8+",
            "splits one layer first",
            "splits last layer alone",
            "several devices",
            "transport host",
            "several processes",
            "window 1",
            "window past the tape",
            "batch 1",
            "batch 5+",
            "chunk 1",
            "chunk whole prompt",
            "chunk odd",
            "draft 1",
            "draft 6+",
            "prompt 1",
            "tape with its prompt_len",
            "jitter high",
            "arm serve",
            "requests 1",
            "requests 30+",
            "max-rows 1",
            "max-rows 16+",
            "serve reuses rows",
            "prefill-chunk 1",
            "prefill-chunk = max-rows",
            "prefill-chunk odd",
        ] {
            assert!(coverage.contains(k), "never drawn: {k}");
        }
        for k in [
            "graphs off",
            "pdl off",
            "mma on",
            "mma off",
            "chunk at mma rows",
        ] {
            assert!(
                !coverage.contains(k),
                "a cuda dimension drawn on the cpu: {k}"
            );
        }
    }

    /// The GPU dimensions are drawn in a cuda space only: on the cpu the gate refuses each
    /// (so a cpu draw must never carry one), and every cuda draw's flags parse, pass the
    /// flag policy and the serve arm's own check (what needs no GPU), and name valid
    /// values. The `--mma auto` rule's rows (the prime arm's largest chunk as it runs) land
    /// just below, at and above `MMA_AUTO_MIN_ROWS`, and every GPU edge is met.
    #[test]
    fn cuda_draws_carry_the_gpu_dimensions_and_pass_the_flag_policy() {
        use crate::gate::plan::{mma_mode, on_off, prime_rows};
        use crate::gate::policy::{check_flags, Reader};
        use crate::hunt::space::MMA_ROWS;
        for flag in ["--graphs=off", "--pdl=off", "--mma=on"] {
            let o = parse_gate(&["--backend=cpu".into(), flag.into()]).unwrap();
            let e = check(&o)
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            assert!(e.contains("cpu backend"), "{flag} on the cpu: {e:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let (model, _) = load_model(None).unwrap();
        let stop = || false;
        let mut sp = space(&model, vec![], DEFAULT_ARMS.to_vec());
        sp.cuda = true;
        let mut h = hunt_in(dir.path(), sp, &stop);
        h.base_flags = vec!["--backend=cuda".into()];
        let mut rng = ChaCha8Rng::seed_from_u64(64);
        let mut coverage = BTreeSet::new();
        let mut rows = BTreeSet::new();
        for i in 0..1500 {
            let d = h.space.draw(&mut rng);
            coverage.extend(h.space.coverage(&d));
            let flags = h.flags_of(&d).unwrap();
            let o = parse_gate(&flags).unwrap_or_else(|e| panic!("draw {i} {flags:?}: {e:#}"));
            check_flags(&o, Reader::Gate).unwrap_or_else(|e| panic!("draw {i} {flags:?}: {e:#}"));
            o.serve_spec()
                .check()
                .unwrap_or_else(|e| panic!("draw {i} {flags:?}: {e}"));
            on_off("--graphs", &o.graphs).unwrap();
            on_off("--pdl", &o.pdl).unwrap();
            mma_mode(&o.mma).unwrap();
            rows.insert(prime_rows(&o).unwrap());
        }
        for r in [MMA_ROWS - 1, MMA_ROWS, MMA_ROWS + 1] {
            assert!(
                rows.contains(&r),
                "--mma auto rows {r} never drawn: {rows:?}"
            );
        }
        for k in [
            "graphs off",
            "pdl off",
            "mma on",
            "mma off",
            "chunk below mma rows",
            "chunk at mma rows",
            "chunk above mma rows",
            "arm serve",
        ] {
            assert!(coverage.contains(k), "never drawn: {k}");
        }
    }

    /// A pinned `--max-rows` below the default prefill chunk cuts every drawn chunk to it,
    /// and a pinned `--prefill-chunk` above the default rows raises every drawn max-rows:
    /// each draw brings the serve arm and is accepted by the gate's checks.
    #[test]
    fn pinned_serve_rows_and_chunk_keep_every_draw_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let (model, _) = load_model(None).unwrap();
        let stop = || false;
        for (flag, dim, rows, chunk) in [
            (
                "--max-rows=2",
                Dim::MaxRows,
                2,
                crate::arms::serve::DEFAULT_PREFILL_CHUNK,
            ),
            (
                "--prefill-chunk=13",
                Dim::PrefillChunk,
                crate::arms::serve::DEFAULT_MAX_ROWS,
                13,
            ),
        ] {
            let mut sp = space(&model, vec![dim], DEFAULT_ARMS.to_vec());
            sp.base_max_rows = rows;
            sp.base_prefill_chunk = chunk;
            let mut h = hunt_in(dir.path(), sp, &stop);
            h.base_flags.push(flag.into());
            let mut rng = ChaCha8Rng::seed_from_u64(13);
            for i in 0..300 {
                let d = h.space.draw(&mut rng);
                assert!(h.space.arms(&d).contains(&ArmKind::Serve), "{flag}: {d:?}");
                let flags = h.flags_of(&d).unwrap();
                let o = parse_gate(&flags).unwrap();
                assert!(o.prefill_chunk() <= o.max_rows(), "{flags:?}");
                check(&o).unwrap_or_else(|e| panic!("draw {i} {flags:?}: {e:#}"));
            }
        }
    }

    /// A pinned `--prompt-len` is every draw's prompt: a drawn tape's own prompt_len is it
    /// (or absent) and the tape is at least that long, so the gate accepts every draw (it
    /// refuses a tape that contradicts --prompt-len or is shorter than it).
    #[test]
    fn a_pinned_prompt_is_honoured_by_every_drawn_tape() {
        let dir = tempfile::tempdir().unwrap();
        let (model, name) = load_model(None).unwrap();
        let stop = || false;
        for p in [1usize, 3, 30] {
            let mut sp = space(&model, vec![Dim::PromptLen], DEFAULT_ARMS.to_vec());
            sp.base_prompt = p;
            let mut h = hunt_in(dir.path(), sp, &stop);
            h.base_flags.push(format!("--prompt-len={p}"));
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let mut tapes = 0;
            for i in 0..400 {
                let d = h.space.draw(&mut rng);
                assert_eq!(h.space.prompt_and_steps(&d).0, p, "{d:?}");
                if let Some(t) = &d.tape {
                    tapes += 1;
                    assert!(
                        t.prompt_len.is_none_or(|own| own == p) && t.len >= p,
                        "{d:?}"
                    );
                }
                let flags = h.flags_of(&d).unwrap();
                let o = parse_gate(&flags).unwrap();
                prepare_model(&o, Some((model.clone(), name.clone())))
                    .unwrap_or_else(|e| panic!("--prompt-len {p} draw {i} {flags:?}: {e:#}"));
            }
            assert!(tapes > 20, "--prompt-len {p}: {tapes} tapes drawn");
        }
    }

    /// A pinned `--gen-len` goes to every trial and the gate refuses it beside a tape, so no
    /// draw holds one (a hunt with `--gen-len 5` found every tape trial `refused`).
    #[test]
    fn a_pinned_gen_len_draws_no_tape() {
        let dir = tempfile::tempdir().unwrap();
        let (model, _) = load_model(None).unwrap();
        let stop = || false;
        let mut sp = space(&model, vec![Dim::GenLen], DEFAULT_ARMS.to_vec());
        sp.base_gen = 5;
        let mut h = hunt_in(dir.path(), sp, &stop);
        h.base_flags.push("--gen-len=5".into());
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for i in 0..400 {
            let d = h.space.draw(&mut rng);
            assert!(d.tape.is_none(), "draw {i}: {d:?}");
            let o = parse_gate(&h.flags_of(&d).unwrap()).unwrap();
            check_flags(&o, Reader::Gate).unwrap_or_else(|e| panic!("draw {i}: {e:#}"));
        }
        // Left free, tapes are drawn as before.
        let sp = space(&model, vec![], DEFAULT_ARMS.to_vec());
        let h = hunt_in(dir.path(), sp, &stop);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        assert!((0..400).any(|_| h.space.draw(&mut rng).tape.is_some()));
    }

    /// A pinned `--chunk` grows the drawn prompt (and tape) to its largest size, a pinned
    /// `--draft` K the drawn positions after the prompt to K + 1, and a drawn chunk or draft
    /// is cut to what the draw's prompt leaves: the gate, which refuses a chunk longer than
    /// the prompt and a draft past the first round's room, accepts every draw; so does the
    /// shrinker's every candidate.
    #[test]
    fn pinned_chunks_and_drafts_fit_every_draw_and_candidate() {
        let dir = tempfile::tempdir().unwrap();
        let (model, name) = load_model(None).unwrap();
        let stop = || false;
        for (flags, dims, chunk_max, draft) in [
            (&["--chunk=20"][..], &[Dim::Chunk][..], 20, None),
            (&["--chunk=1,9"][..], &[Dim::Chunk][..], 9, None),
            (&["--draft=13"][..], &[Dim::Draft][..], 0, Some(13)),
            (
                &["--chunk=6", "--draft=2", "--prompt-len=6"][..],
                &[Dim::Chunk, Dim::Draft, Dim::PromptLen][..],
                6,
                Some(2),
            ),
            (&[][..], &[][..], 0, None),
        ] {
            let mut sp = space(&model, dims.to_vec(), DEFAULT_ARMS.to_vec());
            sp.base_chunk_max = chunk_max;
            sp.base_draft = draft;
            if dims.contains(&Dim::PromptLen) {
                sp.base_prompt = 6;
            }
            let mut h = hunt_in(dir.path(), sp, &stop);
            h.base_flags.extend(flags.iter().map(|f| f.to_string()));
            let mut rng = ChaCha8Rng::seed_from_u64(31);
            for i in 0..250 {
                let d = h.space.draw(&mut rng);
                assert_eq!(
                    h.space.normalized(d.clone()),
                    d,
                    "{flags:?}: not a fixed point"
                );
                let mut cands = h.space.simpler(&d);
                cands.truncate(12);
                for c in std::iter::once(d.clone()).chain(cands) {
                    let (p, steps) = h.space.prompt_and_steps(&c);
                    assert!(p >= chunk_max, "{flags:?}: {c:?}");
                    assert!(draft.is_none_or(|k| steps > p + k), "{flags:?}: {c:?}");
                    let f = h.flags_of(&c).unwrap();
                    let o = parse_gate(&f).unwrap();
                    prepare_model(&o, Some((model.clone(), name.clone())))
                        .unwrap_or_else(|e| panic!("{flags:?} draw {i} {f:?}: {e:#}"));
                }
            }
        }
    }

    /// A pinned flag that only some arms read brings one of them into every draw, and a
    /// pinned dimension is never drawn.
    #[test]
    fn pinned_dimensions_are_never_drawn_and_bring_their_arm() {
        let dir = tempfile::tempdir().unwrap();
        let (model, _) = load_model(None).unwrap();
        let stop = || false;
        let sp = space(
            &model,
            vec![Dim::Chunk, Dim::Draft, Dim::Stages],
            DEFAULT_ARMS.to_vec(),
        );
        let h = hunt_in(dir.path(), sp, &stop);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..500 {
            let d: Draw = h.space.draw(&mut rng);
            let arms = h.space.arms(&d);
            assert!(
                arms.contains(&ArmKind::Prime) && arms.contains(&ArmKind::Verify),
                "{d:?}"
            );
            assert!(
                d.chunk.is_none() && d.draft.is_none() && d.stages.is_none(),
                "{d:?}"
            );
        }
    }
}
