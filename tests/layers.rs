//! The crate's layers only look down. This reads every `src/**/*.rs` (tests under `src/`
//! included), collects the paths its code names (`use crate::a::{b, c::d}`, `crate::a::f()`,
//! `super::super::x`; comments and string literals are not code and are skipped), builds
//! the graph of top-level modules (with `backend`'s submodules named apart in messages), and
//! holds it against a table of forbidden edges (`RULES`) and a no-cycle rule. The edges that
//! still break a rule today are listed in `KNOWN`, each to be removed; an entry that no
//! longer matches any code fails the test too, so the list can only shrink. The checker
//! itself is tested on planted source trees (a forbidden import, a cycle, a stale entry).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lower layers: nothing in them names the command line.
const LOWER: &[&str] = &[
    "backend", "runtime", "model", "math", "quant", "gguf", "receipt",
];

/// Why `term` names no other module.
const TERM_WHY: &str = "term is the bottom floor: every layer prints through it";

/// A forbidden edge: no file in a top-level module of `from` names anything under `to`.
struct Rule {
    from: &'static [&'static str],
    to: &'static str,
    why: &'static str,
}

const RULES: &[Rule] = &[
    Rule {
        from: LOWER,
        to: "cli",
        why: "the command line is the top floor: it parses flags and calls down",
    },
    Rule {
        from: &["backend"],
        to: "dist",
        why: "the backend offers links; dist builds them from what it offers",
    },
    Rule {
        from: &["dist"],
        to: "cli",
        why: "multi-process members and launch sit below the command line",
    },
    Rule {
        from: &["model", "math"],
        to: "backend",
        why: "the model and its numerics sit below every device",
    },
    Rule {
        from: &["math"],
        to: "model",
        why: "math reads quant (Weight), never the model",
    },
    Rule {
        from: &[
            "backend", "runtime", "model", "math", "quant", "gguf", "receipt", "arms", "soak",
            "dist",
        ],
        to: "gate",
        why: "the gate layer (options, plan, run, report, members) sits on the runtime, under cli",
    },
    Rule {
        from: &["backend"],
        to: "arms",
        why: "the backend is the bottom of the runtime: it knows no gate arm",
    },
    // term (terminal output: -v, diagnostics, result lines, progress bars) is the bottom
    // floor: every module may print through it, so it names none of them.
    Rule {
        from: &["term"],
        to: "cli",
        why: TERM_WHY,
    },
    Rule {
        from: &["term"],
        to: "gate",
        why: TERM_WHY,
    },
    Rule {
        from: &["term"],
        to: "arms",
        why: TERM_WHY,
    },
    Rule {
        from: &["term"],
        to: "runtime",
        why: TERM_WHY,
    },
    Rule {
        from: &["term"],
        to: "backend",
        why: TERM_WHY,
    },
    Rule {
        from: &["term"],
        to: "exit",
        why: TERM_WHY,
    },
    Rule {
        from: &[
            "backend", "runtime", "model", "math", "quant", "gguf", "receipt", "arms", "soak",
            "dist", "gate",
        ],
        to: "hunt",
        why: "the hunt runs gates as child processes: above the gate layer, under cli",
    },
];

/// Edges that break a rule today, as (file, top-level module it names), known and to be
/// removed (AnyBackend/Prepared out of cli into backend and a gate layer; the ipc and NCCL
/// links built by dist). Each entry must still match code: remove it with the import.
/// The graph without these edges must have no cycle.
const KNOWN: &[(&str, &str)] = &[
    // Empty: every upward edge of the tree this check was written against is gone (the ipc
    // link lives in backend, the NCCL and ipc links are built by dist, AnyBackend lives in
    // backend, the gate layer sits between cli and the runtime).
];

/// Top-level modules whose submodules are graph nodes of their own (`backend::cuda`).
const SPLIT: &[&str] = &["backend"];

/// One path named by code: `file:line`, the module the file is (`from`, a graph node) and the
/// module the path reaches (`to`).
#[derive(Clone, Debug)]
struct Ref {
    file: String,
    line: usize,
    from: String,
    to: String,
}

fn top(node: &str) -> &str {
    node.split("::").next().unwrap_or(node)
}

/// `src`'s files as (path relative to the crate root, module path); the crate roots
/// (`lib.rs`, `main.rs`, `bin/`) are not modules of the graph.
fn files(root: &Path) -> Result<Vec<(String, Vec<String>)>, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in rd {
            let p = e.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
        Ok(())
    }
    let src = root.join("src");
    let mut paths = Vec::new();
    walk(&src, &mut paths)?;
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let rel = p.strip_prefix(&src).expect("under src");
        let mut segs: Vec<String> = rel
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let last = segs.pop().expect("a file name");
        let root_file = segs.is_empty() && (last == "lib.rs" || last == "main.rs");
        if root_file || segs.first().is_some_and(|s| s == "bin") {
            continue;
        }
        if last != "mod.rs" {
            segs.push(last.trim_end_matches(".rs").to_string());
        }
        let name = format!("src/{}", rel.to_string_lossy().replace('\\', "/"));
        out.push((name, segs));
    }
    Ok(out)
}

/// The source with comments, string and char literals blanked (newlines kept, so lines
/// still count), leaving only code.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(i + k).copied();
        if at(0) == Some('/') && at(1) == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
                out.push(' ');
            }
        } else if at(0) == Some('/') && at(1) == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if at(0) == Some('r')
            && (i == 0 || !ident(c[i - 1]) || (c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2]))))
            && matches!(at(1), Some('"') | Some('#'))
        {
            // A raw string r"..." / r#"..."# (br too); `r#ident` is a raw identifier.
            let mut hashes = 0;
            while at(1 + hashes) == Some('#') {
                hashes += 1;
            }
            if at(1 + hashes) != Some('"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let open = 2 + hashes;
            (0..open).for_each(|_| out.push(' '));
            i += open;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    (0..=hashes).for_each(|_| out.push(' '));
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if at(0) == Some('"') {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if at(0) == Some('\'') && (at(1) == Some('\\') || at(2) == Some('\'')) {
            // A char literal ('x', '\n', '\''); a lifetime or label has no closing quote.
            out.push(' ');
            i += 1;
            if c[i] == '\\' {
                out.push(' ');
                i += 1;
            }
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Sep,
    P(char),
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[s..i].iter().collect()), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::P(ch), line));
            i += 1;
        }
    }
    out
}

/// A use tree or expression path from `t[i]` on, every leaf appended to `out` as a full path
/// (`prefix` + segments, `self` segments dropped); returns the index after it.
fn tree(
    t: &[(Tok, usize)],
    mut i: usize,
    mut path: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match t.get(i).map(|x| &x.0) {
            Some(Tok::Ident(s)) => {
                if s != "self" {
                    path.push(s.clone());
                }
                i += 1;
            }
            Some(Tok::P('{')) => {
                i += 1;
                loop {
                    if matches!(t.get(i).map(|x| &x.0), Some(Tok::P('}'))) {
                        return i + 1;
                    }
                    i = tree(t, i, path.clone(), out);
                    match t.get(i).map(|x| &x.0) {
                        Some(Tok::P(',')) => i += 1,
                        Some(Tok::P('}')) => return i + 1,
                        _ => return i,
                    }
                }
            }
            _ => {
                out.push(path);
                return i;
            }
        }
        if matches!(t.get(i).map(|x| &x.0), Some(Tok::Sep)) {
            i += 1;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// The graph node a module path belongs to: its top-level module, or `top::sub` for a
/// submodule of a `SPLIT` module. None for the crate root.
fn node(path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<String> {
    let t = path.first()?;
    if !modules.contains(&path[..1].to_vec()) {
        return None; // an item of the crate root, not a module
    }
    if SPLIT.contains(&t.as_str()) && path.len() >= 2 && modules.contains(&path[..2].to_vec()) {
        return Some(format!("{t}::{}", path[1]));
    }
    Some(t.clone())
}

/// Every path out of its own top-level module that the code under `root/src` names.
fn scan(root: &Path) -> Result<Vec<Ref>, String> {
    let files = files(root)?;
    let mut modules: BTreeSet<Vec<String>> = BTreeSet::new();
    for (_, m) in &files {
        for k in 1..=m.len() {
            modules.insert(m[..k].to_vec());
        }
    }
    let mut refs = Vec::new();
    for (name, module) in &files {
        let src = std::fs::read_to_string(root.join(name)).map_err(|e| format!("{name}: {e}"))?;
        let t = tokens(&strip(&src));
        let from = node(module, &modules).expect("a file under src/ is a module");
        // Inline modules (`mod tests { .. }`) as (name, brace depth inside them).
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut i = 0;
        while i < t.len() {
            let prev_sep = i > 0 && matches!(t[i - 1].0, Tok::Sep | Tok::P('$'));
            match &t[i].0 {
                Tok::P('{') => depth += 1,
                Tok::P('}') => {
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                Tok::Ident(k) if k == "mod" => {
                    if let (Some((Tok::Ident(n), _)), Some((Tok::P('{'), _))) =
                        (t.get(i + 1), t.get(i + 2))
                    {
                        inline.push((n.clone(), depth + 1));
                    }
                }
                Tok::Ident(k)
                    if (k == "crate" || k == "super")
                        && !prev_sep
                        && t.get(i + 1).map(|x| &x.0) == Some(&Tok::Sep) =>
                {
                    let line = t[i].1;
                    let (base, start) = if k == "crate" {
                        (Vec::new(), i + 2)
                    } else {
                        let mut here: Vec<String> = module.clone();
                        here.extend(inline.iter().map(|(n, _)| n.clone()));
                        let mut j = i;
                        while matches!(&t.get(j).map(|x| &x.0), Some(Tok::Ident(s)) if s == "super")
                            && t.get(j + 1).map(|x| &x.0) == Some(&Tok::Sep)
                        {
                            here.pop();
                            j += 2;
                        }
                        (here, j)
                    };
                    let mut paths = Vec::new();
                    let end = tree(&t, start, base, &mut paths);
                    for p in paths {
                        if let Some(to) = node(&p, &modules) {
                            // One reference per line and target (`use crate::a::{b, c}`).
                            let dup = refs.last().is_some_and(|r: &Ref| {
                                r.file == *name && r.line == line && r.to == to
                            });
                            if top(&to) != module[0] && !dup {
                                refs.push(Ref {
                                    file: name.clone(),
                                    line,
                                    from: from.clone(),
                                    to,
                                });
                            }
                        }
                    }
                    i = end;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
    Ok(refs)
}

/// What is wrong with the tree under `root` against `rules` and `known`: a forbidden edge
/// not in `known`, a `known` entry that no longer matches (or breaks no rule), a cycle of
/// top-level modules once the `known` edges are set aside. Empty: the layers hold.
fn check(root: &Path, rules: &[Rule], known: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let refs = scan(root)?;
    let mut problems = Vec::new();
    let forbidden = |r: &Ref| {
        rules
            .iter()
            .find(|u| u.from.contains(&top(&r.from)) && u.to == top(&r.to))
    };
    let is_known = |r: &Ref| known.iter().any(|&(f, to)| f == r.file && to == top(&r.to));
    for r in &refs {
        if let Some(u) = forbidden(r) {
            if !is_known(r) {
                problems.push(format!(
                    "forbidden: {}:{} ({}) names crate::{}: {}",
                    r.file, r.line, r.from, r.to, u.why
                ));
            }
        }
    }
    for &(f, to) in known {
        let hits: Vec<&Ref> = refs
            .iter()
            .filter(|r| r.file == f && top(&r.to) == to)
            .collect();
        if hits.is_empty() {
            problems.push(format!(
                "stale allowance: {f} no longer names crate::{to}: remove it from KNOWN"
            ));
        } else if hits.iter().all(|r| forbidden(r).is_none()) {
            problems.push(format!(
                "needless allowance: {f} -> {to} breaks no rule: remove it from KNOWN"
            ));
        }
    }
    // The top-level graph without the known edges, one example reference per edge.
    let mut edges: BTreeMap<(String, String), &Ref> = BTreeMap::new();
    for r in refs.iter().filter(|r| !is_known(r)) {
        edges
            .entry((top(&r.from).to_string(), top(&r.to).to_string()))
            .or_insert(r);
    }
    let nodes: Vec<String> = edges
        .keys()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let ix = |s: &str| nodes.iter().position(|n| n == s).expect("a node");
    let n = nodes.len();
    let mut reach = vec![vec![false; n]; n];
    for (a, b) in edges.keys() {
        reach[ix(a)][ix(b)] = true;
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                if reach[i][k] && reach[k][j] {
                    reach[i][j] = true;
                }
            }
        }
    }
    let mut seen = vec![false; n];
    for i in 0..n {
        if seen[i] || !reach[i][i] {
            continue;
        }
        let comp: Vec<usize> = (0..n).filter(|&j| reach[i][j] && reach[j][i]).collect();
        comp.iter().for_each(|&j| seen[j] = true);
        let names: Vec<&str> = comp.iter().map(|&j| nodes[j].as_str()).collect();
        let ties: Vec<String> = edges
            .iter()
            .filter(|((a, b), _)| names.contains(&a.as_str()) && names.contains(&b.as_str()))
            .map(|((a, b), r)| format!("{a} -> {b} ({}:{})", r.file, r.line))
            .collect();
        problems.push(format!("cycle: {}: {}", names.join(", "), ties.join("; ")));
    }
    Ok(problems)
}

#[test]
fn layers_only_look_down_and_no_module_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let problems = check(root, RULES, KNOWN).expect("the tree reads");
    assert!(
        problems.is_empty(),
        "the layers do not hold:\n{}",
        problems.join("\n")
    );
    // The scan saw the crate: it must find the edges every layer has (a scanner that read
    // nothing would pass the check above).
    let refs = scan(root).unwrap();
    for (from, to) in [
        ("model", "quant"),
        ("math", "quant"),
        ("runtime", "backend"),
        ("cli", "runtime"),
        ("backend::cuda", "model"),
    ] {
        assert!(
            refs.iter().any(|r| r.from == from && r.to.starts_with(to)),
            "no edge {from} -> {to} seen: the scan is broken"
        );
    }
}

/// A planted tree under a fresh temp dir: `files` as (path under the root, text).
fn plant(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("a temp dir");
    for (p, text) in files {
        let p = d.path().join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    d
}

const PLANT_RULES: &[Rule] = &[
    Rule {
        from: &["model", "math"],
        to: "backend",
        why: "planted: model below backend",
    },
    Rule {
        from: &["model"],
        to: "cli",
        why: "planted: model below cli",
    },
];

fn planted() -> tempfile::TempDir {
    plant(&[
        (
            "src/lib.rs",
            "pub mod a;\npub mod b;\npub mod backend;\npub mod cli;\npub mod model;\n",
        ),
        // a <-> b: a cycle, one side through a grouped use, the other through an expression.
        (
            "src/a/mod.rs",
            "use crate::{b::{self, Thing}};\npub fn g() {}\n",
        ),
        (
            "src/b.rs",
            "pub struct Thing;\nfn f() {\n    crate::a::g()\n}\n",
        ),
        ("src/backend/mod.rs", "pub mod cuda;\npub trait Engine {}\n"),
        ("src/backend/cuda.rs", "use super::Engine;\n"),
        ("src/cli/mod.rs", "pub struct Args;\n"),
        // Forbidden: model -> cli (in a nested group) and model -> backend::cuda (through
        // `super::super` from an inline module). Comments, strings and char literals that
        // spell crate paths are not code and must not count.
        (
            "src/model/mod.rs",
            "pub mod forward;\nuse crate::{cli::{self, Args}};\n\
             // use crate::backend::Engine;\n/* crate::backend::cuda */\n\
             const S: &str = \"crate::backend::Engine\";\nconst R: &str = r#\"crate::backend\"#;\n\
             const C: char = '\"';\nfn l<'x>(_: &'x str) {}\n",
        ),
        (
            "src/model/forward.rs",
            "mod tests {\n    use super::super::super::backend::cuda;\n}\nuse super::Thing;\n",
        ),
    ])
}

#[test]
fn the_checker_finds_a_planted_forbidden_import_and_a_cycle() {
    let d = planted();
    let problems = check(d.path(), PLANT_RULES, &[]).unwrap();
    let has = |s: &str| problems.iter().any(|p| p.contains(s));
    assert!(
        has("forbidden: src/model/mod.rs:2 (model) names crate::cli"),
        "{problems:#?}"
    );
    assert!(
        has("forbidden: src/model/forward.rs:2 (model) names crate::backend::cuda"),
        "{problems:#?}"
    );
    assert!(
        has("cycle: a, b: a -> b (src/a/mod.rs:1); b -> a (src/b.rs:3)"),
        "{problems:#?}"
    );
    // Nothing else: the commented, quoted and char-literal paths did not count.
    assert_eq!(problems.len(), 3, "{problems:#?}");
}

#[test]
fn a_known_edge_passes_and_a_stale_or_needless_one_fails() {
    let d = planted();
    // Allowing both forbidden edges leaves only the cycle.
    let known = [
        ("src/model/mod.rs", "cli"),
        ("src/model/forward.rs", "backend"),
    ];
    let problems = check(d.path(), PLANT_RULES, &known).unwrap();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("cycle: a, b"), "{problems:#?}");
    // An allowance whose import is gone, and one for an edge no rule forbids, both fail.
    let known = [
        ("src/model/mod.rs", "cli"),
        ("src/model/forward.rs", "backend"),
        ("src/b.rs", "cli"),
        ("src/a/mod.rs", "b"),
    ];
    let problems = check(d.path(), PLANT_RULES, &known).unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p
                == "stale allowance: src/b.rs no longer names crate::cli: remove it from KNOWN"),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("needless allowance: src/a/mod.rs -> b")),
        "{problems:#?}"
    );
    // Known edges also leave the cycle check: allowing b -> a (with a rule against it) breaks the cycle.
    let rules = [Rule {
        from: &["b"],
        to: "a",
        why: "planted",
    }];
    let known = [("src/b.rs", "a")];
    let problems: Vec<String> = check(d.path(), &rules, &known).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}
