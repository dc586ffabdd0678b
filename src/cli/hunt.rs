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
use crate::exit::{EXIT_FAIL, EXIT_INTERRUPTED, EXIT_PASS};
use crate::fsio::{check_writable, OutLock};
use crate::gate::plan::{load_model, open_backend};
use crate::gate::plant::Corner;
use crate::gate::tape::args_prompt_len;
use crate::gate::GateOptions;
use crate::hunt::space::{Dim, Space};
use crate::hunt::trial::parse_budget;
use crate::hunt::Hunt;
use crate::runtime::Fault;

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
    // Devices or splits given fix the stage count too.
    let pins_stages = ["stages", "devices", "splits"]
        .iter()
        .any(|k| given.contains(*k));
    let pinned: Vec<Dim> = Dim::ALL
        .into_iter()
        .filter(|d| given.contains(d.id()) || (*d == Dim::Stages && pins_stages))
        .collect();
    let mut base_arms = Vec::new();
    for name in base.arms.split(',') {
        let k = ArmKind::parse(name.trim())
            .ok_or_else(|| anyhow!("--arms {:?}: unknown arm {:?}", base.arms, name.trim()))?;
        base_arms.push(k);
    }
    let base_stages = base
        .stages
        .or_else(|| base.devices.as_ref().map(|d| d.split(',').count()))
        .unwrap_or(1);
    let base_min_stages = match (base.procs, base.transport()) {
        (Some(w), _) => w,
        (None, "auto") => 1,
        _ => 2,
    };
    let space = Space {
        n_layers: model.cfg.n_layers,
        vocab: model.cfg.vocab,
        context: model.cfg.context_length,
        devices: be.device_count(),
        cuda: be.kind() == "cuda",
        pinned,
        base_arms,
        base_stages,
        base_prompt: args_prompt_len(&base)?,
        base_gen: base.gen_len(),
        base_min_stages,
        base_requests: base.requests(),
        base_max_rows: base.max_rows(),
        base_prefill_chunk: base.prefill_chunk(),
    };
    drop((be, model));
    let out = a.out.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        PathBuf::from("receipts/runs").join(format!("hunt-{t}-{}", std::process::id()))
    });
    std::fs::create_dir_all(&out)
        .with_context(|| format!("--out {}", crate::fsio::shown_path(&out)))?;
    let out = out
        .canonicalize()
        .with_context(|| format!("--out {}", crate::fsio::shown_path(&out)))?;
    let _lock = OutLock::take("--out", &out)?;
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
            crate::arms::serve::check_flags(o.requests(), o.max_rows(), o.prefill_chunk())
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
