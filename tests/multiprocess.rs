//! Multi-process gates on the CPU backend with the test transport `--transport ipc`: the
//! stages of one pipeline in several processes of the real binary (issue 17). Every gate
//! here is the built-in model with few steps (each test takes about a second or two).

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ppn-gate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("ppn-gate runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Member `r` of `world` started by hand, meeting at `addr`.
fn member(r: usize, world: usize, addr: &str) -> Command {
    let mut c = bin();
    c.args(["--rank", &r.to_string(), "--world", &world.to_string()]);
    c.args(["--rendezvous", addr]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn load(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every arm's step hashes, as (arm, [hash]) pairs.
fn arm_hashes(r: &Value) -> Vec<(String, Vec<String>)> {
    r["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let h = a["steps"].as_array().unwrap();
            (
                a["name"].as_str().unwrap().to_string(),
                h.iter()
                    .map(|s| s["logits_blake3"].as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

const GATE: [&str; 4] = ["--backend", "cpu", "--gen-len", "8"];
/// Two stages over two processes on the CPU backend.
const TWO: [&str; 8] = [
    "--procs",
    "2",
    "--stages",
    "2",
    "--transport",
    "ipc",
    "--backend",
    "cpu",
];

#[test]
fn three_stages_in_three_processes_pass_every_arm_with_the_single_process_bits() {
    let d = tempfile::tempdir().unwrap();
    let (multi, single) = (d.path().join("m.json"), d.path().join("s.json"));
    let mut args = vec![
        "launch",
        "--procs",
        "3",
        "--stages",
        "3",
        "--transport",
        "ipc",
    ];
    args.extend(GATE);
    args.extend(["--receipt", multi.to_str().unwrap()]);
    let o = run(&args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    for arm in ["eager", "pipelined", "batched"] {
        assert!(
            t.lines().any(|l| l.starts_with(arm) && l.contains("PASS")),
            "{arm}: {t}"
        );
    }
    let m = load(&multi);
    // ONE receipt, naming which process held which stage and what crossed.
    let procs = m["placement"]["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3);
    for (r, p) in procs.iter().enumerate() {
        assert_eq!(p["rank"], r);
        assert_eq!(p["stages"], serde_json::json!([r]));
    }
    assert_eq!(procs[0]["link_in"], Value::Null);
    assert_eq!(procs[1]["link_in"], "ipc");
    assert_eq!(procs[2]["link_out"], Value::Null);
    assert_eq!(
        m["placement"]["transports"],
        serde_json::json!(["ipc", "ipc"])
    );
    assert_eq!(m["placement"]["resident"].as_array().unwrap().len(), 3);
    let pids: Vec<_> = procs.iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    assert!(pids[0] != pids[1] && pids[1] != pids[2], "{pids:?}");

    // The same gate in one process: every logit bit the same; diff names only the placement.
    let mut args = vec!["--stages", "3"];
    args.extend(GATE);
    args.extend(["--receipt", single.to_str().unwrap(), "-q"]);
    assert_eq!(run(&args).status.code(), Some(0));
    let s = load(&single);
    assert_eq!(arm_hashes(&s), arm_hashes(&m));
    assert_eq!(s["reference"], m["reference"]);
    let o = run(&["diff", single.to_str().unwrap(), multi.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    // Each differing field by its path: the transports and the members (absent in one).
    let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("  ")).collect();
    assert_eq!(
        lines,
        [
            "  placement.transports[0]: dtod vs ipc",
            "  placement.transports[1]: dtod vs ipc",
            "  placement.processes: absent vs <3 entries>"
        ],
        "{t}"
    );
}

#[test]
fn four_stages_over_two_processes_pass_and_a_gate_flag_places_them() {
    let d = tempfile::tempdir().unwrap();
    let rc = d.path().join("r.json");
    let mut args = vec!["--procs", "2", "--stages", "4", "--transport", "ipc"];
    args.extend(GATE);
    args.extend(["--receipt", rc.to_str().unwrap()]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = load(&rc);
    let procs = r["placement"]["processes"].as_array().unwrap();
    assert_eq!(procs[0]["stages"], serde_json::json!([0, 1]));
    assert_eq!(procs[1]["stages"], serde_json::json!([2, 3]));
    assert_eq!(
        r["placement"]["transports"],
        serde_json::json!(["dtod", "ipc", "dtod"])
    );
    // --ranks places them unevenly: stage 0 alone, 1..3 together.
    let mut args = vec!["--procs", "2", "--stages", "4", "--transport", "ipc"];
    args.extend(["--ranks", "0,1,1,1", "--arms", "pipelined"]);
    args.extend(GATE);
    args.extend(["--receipt", rc.to_str().unwrap()]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = load(&rc);
    assert_eq!(
        r["placement"]["processes"][1]["stages"],
        serde_json::json!([1, 2, 3])
    );
}

/// The boundary laws across a process boundary still have their negative controls: each
/// fault below opens at the link into stage 1 (every boundary crosses processes) and FAILs.
#[test]
fn faults_open_across_the_process_boundary() {
    // Stage 1 holds 7 of the 8 layers, so the receiving side lags and the sender runs up to
    // --window steps ahead: the window a missing WAR guard or a single slot needs. The clean
    // control ("") of that placement must PASS.
    let lag = ["--splits", "1"];
    for (fault, arms) in [
        ("", "eager,pipelined"),
        ("rx-no-wait", "eager"),
        ("no-war-guard", "pipelined"),
        ("single-slot", "pipelined"),
        ("no-exit-publish", "eager"),
    ] {
        let mut args = vec!["--procs", "2", "--stages", "2", "--transport", "ipc"];
        if !fault.is_empty() {
            args.extend(["--fault", fault]);
        }
        args.extend(["--arms", arms, "-q"]);
        args.extend(lag);
        // Only the pipelined arm reads --window (the flag policy refuses it for eager).
        if arms.contains("pipelined") {
            args.extend(["--window", "4"]);
        }
        args.extend(GATE);
        let d = tempfile::tempdir().unwrap();
        let rc = d.path().join("r.json");
        args.extend(["--receipt", rc.to_str().unwrap()]);
        let o = run(&args);
        let t = text(&o);
        if fault.is_empty() {
            assert_eq!(o.status.code(), Some(0), "clean control: {t}");
            continue;
        }
        assert_eq!(o.status.code(), Some(1), "{fault}: {t}");
        assert!(t.contains(&format!("{arms:<10} FAIL")), "{fault}: {t}");
    }
    // slot-first-use opens at a boundary inside a member (stages 0 and 1 on rank 0), where
    // the slot's first use lands while the RX stage is busy: stage 1 holds 6 of the 8
    // layers (as tests/gate.rs's --splits 1 placement; an even split let it close under
    // load once in a full test run).
    let mut args = vec![
        "--procs", "2", "--stages", "3", "--splits", "1,7", "--ranks", "0,0,1",
    ];
    args.extend([
        "--transport",
        "ipc",
        "--fault",
        "slot-first-use",
        "--arms",
        "pipelined",
    ]);
    args.extend(GATE);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // Where a fault cannot open across processes it is refused, saying why.
    let o = run(&[&TWO[..], &["--fault", "slot-first-use"]].concat());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("every boundary here crosses processes"), "{t}");
}

/// Reads the launch's stderr until `rank R ... pid P` lines name every member.
fn member_pids(err: &mut impl BufRead, world: usize) -> Vec<u32> {
    let mut pids = vec![0; world];
    let mut line = String::new();
    while pids.contains(&0) {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "launch ended early");
        if let Some(rest) = line.strip_prefix("ppn-gate launch: rank ") {
            let r: usize = rest.split(' ').next().unwrap().parse().unwrap();
            pids[r] = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
        }
    }
    pids
}

/// Kill one member mid-gate: the launch exits 2 within 30 s, naming it. `signal`: KILL (a
/// member that dies) or STOP (one that hangs: its neighbours' link timeouts name it).
/// The signal goes once every member has said it is ready (its links connected, its
/// runtime built), so it lands in the walks every run: a fixed sleep after the launch let
/// it land in a member's start-up on a loaded machine, where the neighbour's error is a
/// link that never connected.
fn kill_member(signal: &str) -> (Option<i32>, String, Duration) {
    // The launcher's rendezvous directory is made under TMPDIR: a private one here, so
    // the test finds it (and only it) and reads the members' `ready` keys there.
    let tmp = tempfile::tempdir().unwrap();
    let mut c = bin();
    c.env("TMPDIR", tmp.path());
    c.args([
        "launch",
        "--procs",
        "3",
        "--stages",
        "3",
        "--transport",
        "ipc",
    ]);
    c.args([
        "--backend",
        "cpu",
        "--gen-len",
        "120",
        "--jitter-us",
        "200",
        "-q",
    ]);
    // A member that hangs before its walks is named by the rendezvous (it never says it is
    // ready), one that hangs during them by its neighbours' link timeouts.
    c.args(["--peer-timeout", "3", "--rendezvous-timeout", "8"]);
    let d = tempfile::tempdir().unwrap();
    c.arg("--receipt").arg(d.path().join("r.json"));
    let mut child = c
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let pids = member_pids(&mut err, 3);
    let t0 = Instant::now();
    loop {
        let ready = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("ppn-gate-rdv-"))
            .any(|e| (0..3).all(|r| e.path().join(format!("ready--{r}")).exists()));
        if ready {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the launch ended before its members were ready"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "members never got ready"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let k = Command::new("kill")
        .args([&format!("-{signal}"), &pids[1].to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let st = child.wait().unwrap();
    (st.code(), rest, t0.elapsed())
}

#[test]
fn a_member_killed_mid_gate_fails_the_launch_naming_it() {
    let (code, err, took) = kill_member("KILL");
    assert_eq!(code, Some(2), "{err}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(
        err.contains("member rank 1 (stage 1) was killed by signal 9"),
        "{err}"
    );
}

#[test]
fn a_member_that_hangs_fails_the_launch_naming_it() {
    let (code, err, took) = kill_member("STOP");
    assert_eq!(code, Some(2), "{err}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    // Its neighbours time out (on the link mid-walk, or at the rendezvous where its walks
    // had ended), naming it; then the launcher ends the stopped member too.
    assert!(
        err.contains("no progress from rank 1 (stage 1)")
            || err.contains("rank 1 (stage 1) did not publish \"result/1\""),
        "{err}"
    );
    assert!(
        err.contains("launch: rank 1 (stage 1) did not end when the others failed"),
        "{err}"
    );
}

/// Members started by hand (as mpirun or srun would), meeting at a directory and at a TCP
/// address served by rank 0.
#[test]
fn members_started_by_hand_meet_at_a_directory_or_a_tcp_rendezvous() {
    let d = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    // Two members at a directory; three at a TCP address (rank 0, which serves it, must
    // outlive the middle member's last poll).
    for (addr, world) in [
        (d.path().join("rdv").display().to_string(), 2),
        (format!("127.0.0.1:{port}"), 3),
    ] {
        if !addr.contains(':') {
            std::fs::create_dir(&addr).unwrap();
        }
        let rc = d.path().join("r.json");
        let stages = world.to_string();
        let kids: Vec<_> = (0..world)
            .map(|r| {
                let mut c = member(r, world, &addr);
                c.args(["--stages", &stages, "--transport", "ipc", "--arms", "eager"]);
                c.args(GATE);
                c.arg("--receipt").arg(&rc).spawn().unwrap()
            })
            .collect();
        let outs: Vec<Output> = kids
            .into_iter()
            .map(|k| k.wait_with_output().unwrap())
            .collect();
        for (r, o) in outs.iter().enumerate() {
            assert_eq!(o.status.code(), Some(0), "{addr} rank {r}: {}", text(o));
        }
        // The last stage's member prints the verdict and writes the receipt.
        let last = text(&outs[world - 1]);
        assert!(last.contains("eager      PASS"), "{last}");
        let procs = &load(&rc)["placement"]["processes"];
        assert_eq!(procs.as_array().unwrap().len(), world);
        std::fs::remove_file(&rc).unwrap();
    }
    // The directory now holds that run's files: a second gate there is refused.
    let o = run(&[
        "--rank",
        "0",
        "--world",
        "2",
        "--rendezvous",
        d.path().join("rdv").to_str().unwrap(),
        "--stages",
        "2",
        "--transport",
        "ipc",
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("earlier run"), "{}", text(&o));
}

#[test]
fn a_member_with_other_flags_is_named_and_the_gate_fails_fast() {
    let d = tempfile::tempdir().unwrap();
    let addr = d.path().display().to_string();
    let kids: Vec<_> = (0..2)
        .map(|r| {
            let mut c = member(r, 2, &addr);
            c.args(["--stages", "2", "--transport", "ipc", "--backend", "cpu"]);
            c.args(["--seed", &r.to_string(), "--rendezvous-timeout", "20"]);
            c.spawn().unwrap()
        })
        .collect();
    let t0 = Instant::now();
    for k in kids {
        let o = k.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("runs a different gate"), "{}", text(&o));
    }
    assert!(t0.elapsed() < Duration::from_secs(15));
}

#[test]
fn bad_multi_process_flags_exit_2_naming_the_value() {
    for (args, want) in [
        (
            vec!["--stages", "2", "--transport", "ipc"],
            "this gate runs in one",
        ),
        (
            vec!["--procs", "2", "--stages", "2"],
            "needs the transport between its processes",
        ),
        (
            vec!["--procs", "2", "--stages", "2", "--transport", "nccl"],
            "--transport nccl: needs the cuda backend",
        ),
        (
            vec!["--procs", "3", "--stages", "2", "--transport", "ipc"],
            "at least 3 stages",
        ),
        (
            vec![
                "--procs",
                "2",
                "--stages",
                "3",
                "--transport",
                "ipc",
                "--ranks",
                "0,1,0",
            ],
            "--ranks 0,1,0",
        ),
        (
            vec!["--procs", "1", "--stages", "2", "--transport", "ipc"],
            "2 or more members",
        ),
        (
            vec![
                "--procs",
                "2",
                "--stages",
                "2",
                "--transport",
                "ipc",
                "--trace",
                "t.json",
            ],
            "--trace t.json",
        ),
        (vec!["--ranks", "0,1", "--stages", "2"], "--ranks"),
    ] {
        let mut a = args.clone();
        a.extend(["--backend", "cpu"]);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
    let o = run(&["launch", "--backend", "cpu", "--stages", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--procs W is required"), "{}", text(&o));
}

/// Without libnccl where --nccl-lib points, the NCCL check (and a gate with --transport
/// nccl) fails with exit 2, saying where the library comes from.
#[test]
fn a_missing_libnccl_says_where_it_comes_from() {
    let d = tempfile::tempdir().unwrap();
    let o = run(&["nccl-check", "--nccl-lib", d.path().to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("NCCL could not be loaded"), "{t}");
    assert!(
        t.contains("nvidia-nccl-cu13") && t.contains("--nccl-lib"),
        "{t}"
    );
    let o = run(&[&TWO[..], &["--nccl-lib", "x"]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("only --transport nccl loads NCCL"),
        "{}",
        text(&o)
    );
}

#[test]
fn soak_and_battery_run_multi_process_gates() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("soak");
    let soak = ["soak", "--runs", "2", "--out", out.to_str().unwrap()];
    let o = run(&[&soak[..], &TWO, &["--gen-len", "4", "--arms", "pipelined"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("2/2 PASS"), "{}", text(&o));
    let summary = load(&out.join("summary.json"));
    assert_eq!(summary["passed"], 2, "{summary}");
    let run1 = load(&out.join("run-001.json"));
    assert_eq!(run1["placement"]["processes"].as_array().unwrap().len(), 2);

    let bat = d.path().join("b.json");
    std::fs::write(
        &bat,
        serde_json::json!({"name": "mp", "gates": [
            {"name": "launch-3", "args": ["launch", "--procs", "3", "--stages", "3",
                "--transport", "ipc", "--backend", "cpu", "--gen-len", "4"]},
            {"name": "procs-2", "args": ["--procs", "2", "--stages", "4",
                "--transport", "ipc", "--backend", "cpu", "--gen-len", "4",
                "--fault", "rx-no-wait", "--arms", "eager"]}
        ]})
        .to_string(),
    )
    .unwrap();
    let bout = d.path().join("bout");
    let o = run(&[
        "battery",
        bat.to_str().unwrap(),
        "--out",
        bout.to_str().unwrap(),
    ]);
    let t = text(&o);
    // The second gate's fault makes it FAIL (exit 1): the battery ran both.
    assert_eq!(o.status.code(), Some(1), "{t}");
    let r = load(&bout.join("launch-3.json"));
    assert_eq!(r["verdict"], "PASS");
    assert_eq!(r["placement"]["processes"].as_array().unwrap().len(), 3);
    assert_eq!(load(&bout.join("procs-2.json"))["verdict"], "FAIL");
}

/// Members by hand: once every member has said it is ready (its runtime built), rank 1 stops
/// mid-walk. Its neighbours' link timeouts name it and both exit 2 (rank 0 possibly through
/// the abort that rank 2 publishes), within the timeout, not forever.
#[test]
fn a_member_that_hangs_mid_walk_is_named_by_its_neighbours() {
    let d = tempfile::tempdir().unwrap();
    let addr = d.path().display().to_string();
    let mut kids: Vec<_> = (0..3)
        .map(|r| {
            let mut c = member(r, 3, &addr);
            c.args(["--stages", "3", "--transport", "ipc", "--backend", "cpu"]);
            c.args([
                "--gen-len",
                "120",
                "--jitter-us",
                "200",
                "--peer-timeout",
                "3",
            ]);
            c.arg("--receipt").arg(d.path().join("r.json"));
            c.spawn().unwrap()
        })
        .collect();
    let t0 = Instant::now();
    while !(0..3).all(|r| d.path().join(format!("ready--{r}")).exists()) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "members never got ready"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = kids[1].id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let t1 = Instant::now();
    let stopped = kids.remove(1);
    for (r, k) in [0, 2].into_iter().zip(kids) {
        let o = k.wait_with_output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "rank {r}: {t}");
        assert!(
            t.contains("no progress from rank 1 (stage 1)"),
            "rank {r}: {t}"
        );
    }
    assert!(t1.elapsed() < Duration::from_secs(30), "{:?}", t1.elapsed());
    let mut stopped = stopped;
    let _ = stopped.kill();
    let _ = stopped.wait();
}

/// The prime and verify arms across processes: every member walks the same plan (verify:
/// the reference's acceptance), the last stage's member judges; the receipt's logits and
/// rounds equal the one-process gate's, and both multi-row faults FAIL across the boundary.
#[test]
fn prime_and_verify_run_across_processes_with_the_single_process_bits() {
    let d = tempfile::tempdir().unwrap();
    let (multi, single) = (d.path().join("m.json"), d.path().join("s.json"));
    let pv = [
        "--arms",
        "prime,verify",
        "--prompt-len",
        "23",
        "--gen-len",
        "16",
    ];
    let o = run(&[&TWO[..], &pv[..], &["--receipt", multi.to_str().unwrap()]].concat());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    for arm in ["prime", "verify"] {
        assert!(
            t.lines().any(|l| l.starts_with(arm) && l.contains("PASS")),
            "{arm}: {t}"
        );
    }
    let one = ["--backend", "cpu", "--stages", "2", "-q"];
    let o = run(&[&one[..], &pv[..], &["--receipt", single.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (m, s) = (load(&multi), load(&single));
    assert_eq!(arm_hashes(&s), arm_hashes(&m));
    assert_eq!(s["arms"][1]["rounds"], m["arms"][1]["rounds"]);
    assert!(!m["arms"][1]["rounds"].as_array().unwrap().is_empty());
    for (fault, arm) in [("no-rollback", "verify"), ("chunk-kv-order", "prime")] {
        let o = run(&[&TWO[..], &pv[2..], &["--arms", arm, "--fault", fault]].concat());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{fault}: {t}");
        assert!(
            t.lines().any(|l| l.starts_with(arm) && l.contains("FAIL")),
            "{fault}: {t}"
        );
    }
}

/// Issue 25 across processes: a tape of seeded random tokens (not the model's greedy path)
/// with its own `prompt_len` 15. Every member reads the prompt from the tape (launch hands
/// each the resolved --prompt-len) and computes the reference, whose greedy choices set
/// verify's acceptance everywhere: prime and verify PASS over 2 processes with the
/// one-process gate's logits and rounds, the rounds start after the tape's prompt, and a
/// skipped rollback still FAILs across the boundary.
#[test]
fn a_non_greedy_tape_s_prompt_holds_across_processes() {
    use rand::{Rng, SeedableRng};
    let d = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2525);
    let tokens: Vec<u32> = (0..30).map(|_| rng.gen_range(0..2048)).collect();
    let t = d.path().join("t.json");
    std::fs::write(
        &t,
        serde_json::json!({"prompt_len": 15, "tape": tokens}).to_string(),
    )
    .unwrap();
    let (multi, single) = (d.path().join("m.json"), d.path().join("s.json"));
    let pv = ["--arms", "prime,verify", "--tape", t.to_str().unwrap()];
    let o = run(&[&TWO[..], &pv[..], &["--receipt", multi.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let one = ["--backend", "cpu", "--stages", "2", "-q"];
    let o = run(&[&one[..], &pv[..], &["--receipt", single.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (m, s) = (load(&multi), load(&single));
    assert_eq!(m["verdict"], "PASS");
    assert_eq!(m["config"]["prompt_len"], 15);
    assert_eq!(m["config"]["chunks"], serde_json::json!([1, 8, 15]));
    assert_eq!(arm_hashes(&s), arm_hashes(&m));
    assert_eq!(s["arms"][1]["rounds"], m["arms"][1]["rounds"]);
    let rounds = m["arms"][1]["rounds"].as_array().unwrap();
    assert_eq!(rounds[0]["start"], 15);
    assert!(rounds.iter().all(|r| r["accepted"] == r["expected"]));
    let o = run(&[
        &TWO[..],
        &pv[2..],
        &["--arms", "verify", "--fault", "no-rollback"],
    ]
    .concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // A member told another prompt than the tape's is refused (exit 2, both values named).
    let o = run(&[&TWO[..], &pv[..], &["--prompt-len", "8"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--prompt-len 8 contradicts"),
        "{}",
        text(&o)
    );
}

/// Every gate flag reaches the members (their command line is derived from the gate's
/// options, not written out by hand): --chunk, --repeat and --draft, which a hand-written
/// member command line once left out, show in the receipt the last stage's member writes.
#[test]
fn prime_and_verify_settings_reach_every_member() {
    let d = tempfile::tempdir().unwrap();
    let multi = d.path().join("m.json");
    let flags = [
        "--arms",
        "prime,verify",
        "--chunk",
        "3,5",
        "--repeat",
        "2",
        "--draft",
        "2",
        "--prompt-len",
        "10",
        "--gen-len",
        "8",
    ];
    let o = run(&[
        &TWO[..],
        &flags[..],
        &["--receipt", multi.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let m = load(&multi);
    assert_eq!(m["config"]["chunks"], serde_json::json!([3, 5]));
    assert_eq!(m["config"]["repeat"], 2);
    assert_eq!(m["config"]["draft"], 2);
    let rounds = m["arms"][1]["rounds"].as_array().unwrap();
    assert!(!rounds.is_empty());
    assert!(rounds
        .iter()
        .all(|r| r["drafted"].as_array().unwrap().len() <= 2));
}

/// `launch -v` hands the `-v` to every member (each says when its arm starts, on the
/// inherited stderr); without it no member prints a diagnostic.
#[test]
fn launch_passes_verbose_to_every_member() {
    let d = tempfile::tempdir().unwrap();
    for (v, want) in [(true, 2), (false, 0)] {
        let r = d.path().join(format!("v{v}.json"));
        let mut args = vec![
            "launch",
            "--procs",
            "2",
            "--backend",
            "cpu",
            "--stages",
            "2",
            "--transport",
            "ipc",
            "--arms",
            "eager",
            "--receipt",
            r.to_str().unwrap(),
        ];
        if v {
            args.insert(1, "-v");
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.matches("arm eager: start").count(),
            want,
            "-v {v}: {err}"
        );
    }
}
