//! GPU-free checks of the CUDA backend's host-side contracts: they compile and run in CI
//! (no GPU there). Kernel behaviour is checked on a GPU by scripts/gpu-validate.sh (section oracle), never here.

use super::engine::{
    att_kernel, att_rows_smax, att_rows_tile, cuda_can_run, fmt_of, kind_of, launch_groups, mix_of,
    mv_args_bytes, mv_args_prefix_bytes, mv_kind, mvq_blocks_per_sm, mvq_dense, mvq_rows_per_warp,
    mvq_smem, pre_fuses, pre_kind, row_pos_bytes, row_tiles, tiles_up_to, vectorized,
    warps_per_feature, MMA_DECODE_MAX, MVD_ROWS, MVQ_MIN_IN, MVQ_PRE_MAX,
};
use super::mma::{MMA_FORMATS, MMA_KERNELS, MMA_SOURCES};
use super::nvrtc::{
    mvq_mix_kind, mvq_mix_pair, ATT_ROWS_OPT_IN, KERNELS, MVQ_KERNELS, MVQ_MIX_BASE,
    MVQ_MIX_KERNELS, MV_KERNEL, MV_KINDS, MV_SOURCES, SOURCES,
};
use super::{CudaBackend, MVQ_BASE, MVQ_DENSE, MVQ_PRE_BASE, MV_GENERIC, MV_MAX_TILE};
use crate::quant::GgmlType;

/// The text of kernel source file `name` (one of SOURCES).
fn source(name: &str) -> &'static str {
    SOURCES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("{name} is a source"))
}

/// Names of every `extern "C" __global__` kernel in the sources.
fn kernels_in_sources() -> Vec<String> {
    let mut out = Vec::new();
    for (_, src) in SOURCES {
        for line in src.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("extern \"C\" __global__ void ") {
                // Skip an optional `__launch_bounds__(..) ` before the name.
                let rest = match rest.strip_prefix("__launch_bounds__(") {
                    Some(r) => r.split_once(") ").map_or(r, |(_, n)| n),
                    None => rest,
                };
                if let Some(name) = rest.split('(').next() {
                    if name != "NAME" {
                        out.push(name.to_string());
                    }
                }
            }
        }
        // kernels/mma.cu's per-format sets: a name `X##SUF` stands for X + each suffix of
        // the source's `MMA_KERNEL_SET(F, SUF)` instantiations.
        let sufs: Vec<&str> = src
            .lines()
            .filter_map(|l| l.strip_prefix("MMA_KERNEL_SET("))
            .filter_map(|r| r.split_once(", ").map(|(_, s)| s.trim_end_matches(')')))
            .collect();
        let templated: Vec<String> = out
            .iter()
            .filter(|n| n.ends_with("##SUF"))
            .cloned()
            .collect();
        out.retain(|n| !n.ends_with("##SUF"));
        for t in templated {
            for suf in &sufs {
                out.push(t.replace("##SUF", suf));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn kernel_table_lists_exactly_the_kernels_the_sources_define() {
    // The main module's table plus the matvec modules' one kernel and the vectorized
    // modules' dense walk (the rows-per-warp variants come from a macro), which
    // `DevCtx::build_mv` loads by name, and the mma module's, which `DevCtx::prepare_mma` loads.
    let mut listed: Vec<String> = KERNELS
        .iter()
        .chain(super::nvrtc::ATT_KERNELS.iter())
        .chain([MV_KERNEL, MVQ_KERNELS[MVQ_DENSE]].iter())
        .chain(MMA_KERNELS.iter())
        .map(|s| s.to_string())
        .collect();
    listed.sort();
    assert_eq!(listed, kernels_in_sources());
}

#[test]
fn every_ggml_type_has_a_format_id_that_the_matvec_dispatch_handles() {
    let matvec = source("matvec.cu");
    let mut ids = Vec::new();
    for ty in GgmlType::ALL {
        let id = fmt_of(ty);
        ids.push(id);
        // The #define that carries this id names a FMT_ constant; the fused matvec's switch
        // has an MV_CASE for it and the element decoder `deq` a case.
        let define = matvec
            .lines()
            .find(|l| {
                let t: Vec<&str> = l.split_whitespace().collect();
                t.len() == 3
                    && t[0] == "#define"
                    && t[1].starts_with("FMT_")
                    && t[2] == id.to_string()
            })
            .unwrap_or_else(|| panic!("{ty}: no `#define FMT_* {id}` in matvec.cu"));
        let name = define.split_whitespace().nth(1).unwrap();
        let deq = matvec.matches(&format!("case {name}:")).count();
        let mv = matvec.matches(&format!("MV_CASE({name})")).count();
        assert!(
            deq >= 1 && mv == 1,
            "{ty}: {name} has {deq} deq case lines and {mv} MV_CASE lines, want >= 1 and 1"
        );
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), GgmlType::ALL.len(), "format ids are distinct");
}

#[test]
fn mv_args_parameter_has_the_layout_of_the_cuda_struct() {
    // struct MvMat { ptr w; u64 row_bytes; ptr y; int n_out; int fmt; } = 32 bytes;
    // struct MvArgs { MvMat m[3]; ptr x; ptr norm; int x 5; float eps; int plant; ptr res_o;
    // ptr res_w; ptr res_out; } = 96 + 16 + 28, padded to the pointers' 8-byte alignment,
    // + 24.
    assert_eq!(mv_args_bytes(), 3 * 32 + 16 + 32 + 24);
    // A module without MVQ_PRE declares the struct up to plant (140 bytes, padded to 144 by
    // its pointers' alignment): res_o starts right there, so that prefix is its parameter.
    assert_eq!(mv_args_prefix_bytes(), 3 * 32 + 16 + 32);
}

#[test]
fn warps_per_feature_is_a_power_of_two_dividing_the_block_and_never_grows_with_features() {
    let mut last = usize::MAX;
    for f in [
        1, 576, 960, 1024, 1025, 1536, 4096, 4097, 16384, 16385, 49152, 262144,
    ] {
        let w = warps_per_feature(f);
        assert!(w.is_power_of_two() && 8 % w == 0, "{f}: {w}");
        assert!(w <= last, "{f}: {w} after {last}");
        last = w;
    }
}

#[test]
fn row_pos_parameter_has_the_layout_of_the_cuda_struct() {
    // struct RowPos { u32 n; u32 pos[POS_ROWS]; u32 slot[POS_ROWS]; u32 seq[POS_ROWS]; }
    // with POS_ROWS 64.
    let common = SOURCES[0].1;
    assert!(common.contains("#define POS_ROWS 64"));
    let body = common
        .split("struct RowPos {")
        .nth(1)
        .and_then(|t| t.split("};").next())
        .expect("common.cu defines struct RowPos");
    let fields: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        fields,
        [
            "u32 n;",
            "u32 pos[POS_ROWS];",
            "u32 slot[POS_ROWS];",
            "u32 seq[POS_ROWS];"
        ]
    );
    assert_eq!(row_pos_bytes(), 4 + 3 * 64 * 4);
}

/// The kernel body of `name` in `file`, from its signature to the next kernel (or the end).
fn kernel_body(file: &str, name: &str) -> &'static str {
    let src = source(file);
    let at = src
        .find(&format!("__global__ void {name}("))
        .unwrap_or_else(|| panic!("{file} defines {name}"));
    let rest = &src[at..];
    let end = rest[1..].find("__global__").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

#[test]
fn attention_reads_the_step_positions_only_after_its_pdl_wait() {
    // Read after write: the step's RowPos is written by rowpos_set earlier on the stream;
    // with programmatic dependent launch the attention kernel may start before that write
    // is done, and pdl_wait() is where it is (transitively) complete. So no `rp->` read may
    // come before the wait. (Negative control: the check sees the read in the old order.)
    let first_read = |body: &str| body.find("rp->").expect("reads rp");
    let wait = |body: &str| body.find("pdl_wait();").expect("waits");
    // Both one-row kernels are att_entry (its wait, then its RowPos read) and nothing else;
    // att_fused, which runs after it, takes the positions by value.
    let src = source("attention.cu");
    let params = &src[src.find("#define ATT_PARAMS").expect("ATT_PARAMS")..];
    let params = &params[..params.find("\n#define").expect("ATT_ARGS after it")];
    assert!(params.contains("int kv_mode, int window,"), "{params}");
    assert!(params.ends_with("const RowPos* rp"), "{params}");
    for (name, flag) in [("attention", "false"), ("attention_early", "true")] {
        let k = kernel_body("attention.cu", name);
        let k = &k[..k.find('\n').expect("one line")];
        assert_eq!(
            k,
            format!("__global__ void {name}(ATT_PARAMS) {{ att_entry<{flag}>(ATT_ARGS); }}")
        );
    }
    let at = src.find("void att_entry(").expect("att_entry");
    let att = &src[at..at + src[at..].find("__global__").expect("a kernel after it")];
    assert!(wait(att) < first_read(att));
    let fused = &src[src.find("void att_fused(").expect("att_fused")..];
    let fused = &fused[..fused.find("#define ATT_PARAMS").expect("after att_fused")];
    assert!(
        !fused.contains("rp->") && !fused.contains("RowPos*"),
        "{fused}"
    );
    let moved = att.replacen("pdl_wait();", "", 1) + "pdl_wait();";
    assert!(wait(&moved) > first_read(&moved));
    // rowpos_set is launched without programmatic dependent launch (`launch_with(.., false)`
    // in set_rowpos), which is its write-after-read guard; it is in the main module.
    assert!(kernel_body("sched.cu", "rowpos_set").contains("RowPos* dst, RowPos v"));
    assert!(KERNELS.contains(&"rowpos_set"));
    let engine = include_str!("engine/attention.rs");
    let set = &engine[engine.find("fn set_rowpos(").expect("set_rowpos")..];
    let set = &set[..set.find("\n    }\n").expect("its end")];
    assert!(
        set.contains("self.dx.launch_with(s, f, &cfg, &mut p, false)"),
        "{set}"
    );
    assert!(!set.contains("self.dx.launch(s"), "{set}");
}

#[test]
fn the_kernels_window_start_is_the_models() {
    // attention.cu computes a row's first slot from (pos, slot, window); the host's truth is
    // RowAt::from_slot (Config::attn_start). Every sliding (window 16) and global layer of a
    // synthetic gemma3, positions 0..40 at slots at, below and far below them.
    let spec = crate::model::synth::SynthSpec {
        arch: crate::model::Arch::Gemma3,
        layers: 6,
        embd: 64,
        heads: 2,
        kv_heads: 1,
        ff: 64,
        vocab: 300,
        ..crate::model::synth::builtin_spec()
    };
    let f = crate::gguf::GgufFile::parse(crate::model::synth::synth_gguf(&spec).unwrap()).unwrap();
    let m = crate::model::Model::load(&f).unwrap();
    let mut sliding = 0;
    for il in 0..6 {
        let w = m.cfg.layer_window(il).unwrap_or(0);
        sliding += usize::from(w > 0);
        for pos in 0..40usize {
            for slot in [pos, pos / 2, pos.saturating_sub(20), 0, pos + 3] {
                let a = crate::model::RowAt { pos, seq: 0, slot };
                assert_eq!(
                    super::engine::from_slot_in_kernel(pos as u32, slot as u32, w as u32) as usize,
                    a.from_slot(&m, il),
                    "layer {il} window {w} pos {pos} slot {slot}"
                );
            }
        }
    }
    assert_eq!(sliding, 5, "gemma3: every 6th layer is global");
}

#[test]
fn graphs_note_says_what_ran_and_why() {
    assert_eq!(super::builder::graphs_note(true, false, 0), "on");
    assert_eq!(super::builder::graphs_note(false, false, 0), "off");
    assert_eq!(super::builder::graphs_note(false, true, 5), "off");
    assert!(super::builder::graphs_note(true, true, 0).starts_with("off (PPN_CUDA_PROF"));
    assert!(super::builder::graphs_note(true, false, 5).starts_with("on (jitter"));
}

#[test]
fn kernels_are_compiled_without_fma_contraction_or_flush_to_zero() {
    // The bit-for-bit agreement with the CPU's f32 order depends on these options; the
    // source of truth is `nvrtc_options`, checked here so a change is deliberate. Every
    // module, cached (CUBIN for sm_XX) or not (PTX), is compiled with them.
    for arch in [None, Some("sm_90"), Some("compute_90")] {
        let o = super::nvrtc::nvrtc_options(arch);
        for want in [
            "--fmad=false",
            "--ftz=false",
            "--prec-div=true",
            "--prec-sqrt=true",
        ] {
            assert!(
                o.iter().any(|x| x == want),
                "{arch:?}: {want} missing from {o:?}"
            );
        }
        assert!(
            !o.iter().any(|x| x.contains("fast") || x == "--fmad=true"),
            "{o:?}"
        );
        let a = o
            .iter()
            .filter(|x| x.starts_with("--gpu-architecture="))
            .count();
        assert_eq!(a, usize::from(arch.is_some()), "{o:?}");
    }
}

#[test]
fn opening_without_a_driver_is_an_error_naming_it_never_a_panic() {
    // On a machine with a driver this opens the backend instead; either way the call
    // returns (no panic) and an error names the missing piece.
    match CudaBackend::open() {
        Ok(be) => assert!(be.n_devices > 0),
        Err(e) => {
            let m = e.to_string();
            assert!(
                m.contains("libcuda")
                    || m.contains("libnvrtc")
                    || m.contains("device")
                    || m.contains("cuInit"),
                "{m}"
            );
        }
    }
}

#[test]
fn a_launch_of_one_format_gets_that_formats_module_and_a_mix_the_generic_one() {
    let mut seen = [false; MV_KINDS];
    for ty in GgmlType::ALL {
        let k = mv_kind([(ty, false); 3].into_iter());
        assert_eq!(k, fmt_of(ty) as usize);
        assert!(
            k < MV_GENERIC,
            "{ty}: kind {k} collides with the generic module"
        );
        let kq = mv_kind([(ty, true); 2].into_iter());
        assert_eq!(kq, MVQ_BASE + fmt_of(ty) as usize);
        assert!(kq < MV_KINDS);
        // The folding module of a vectorized kind (gemma3's post-norm add, MVQ_PRE), and
        // none of any other.
        let kp = pre_kind(kq).expect("a vectorized kind has a folding module");
        assert_eq!(kp, MVQ_PRE_BASE + fmt_of(ty) as usize);
        assert!(kp < MV_KINDS);
        assert_eq!(pre_kind(k), None);
        assert_eq!(pre_kind(kp), None);
        for k in [k, kq, kp] {
            assert!(!seen[k], "{ty}: kind {k} taken twice");
            seen[k] = true;
        }
    }
    assert!(!seen[MV_GENERIC]);
    assert_eq!(pre_kind(MV_GENERIC), None);
    assert_eq!(
        mv_kind([(GgmlType::Q5_0, false), (GgmlType::Q8_0, false)].into_iter()),
        MV_GENERIC
    );
    // Then the mixed one-row kinds, one per ordered pair of format ids (mix_of).
    assert_eq!(MVQ_MIX_BASE, 3 * GgmlType::ALL.len() + 1);
    assert_eq!(MV_KINDS, MVQ_MIX_BASE + GgmlType::ALL.len().pow(2));
}

#[test]
fn a_mixed_kind_reads_back_as_its_pair_of_formats() {
    // build_mv reads the pair back from the kind mix_of formed: every ordered pair, one kind
    // each, all of them inside the mixed range.
    let nf = GgmlType::ALL.len();
    let mut seen = std::collections::HashSet::new();
    for fa in 0..nf {
        for fb in 0..nf {
            let k = mvq_mix_kind(fa, fb);
            assert!((MVQ_MIX_BASE..MV_KINDS).contains(&k), "{fa} {fb}: kind {k}");
            assert_eq!(mvq_mix_pair(k), (fa, fb));
            assert!(seen.insert(k), "{fa} {fb}: kind {k} twice");
        }
    }
}

#[test]
fn two_vectorized_formats_side_by_side_at_one_row_take_one_mixed_launch() {
    use GgmlType::{Q4K, Q5_0, Q6K, Q8_0};
    let p = |t| ((t, true), false);
    // gemma-3's q4_k_m q|k|v in 9 of its 18 layers: q, k Q5_0 and v Q8_0.
    let gem = [p(Q5_0), p(Q5_0), p(Q8_0)];
    let nf = GgmlType::ALL.len();
    let k = MVQ_MIX_BASE + fmt_of(Q5_0) as usize * nf + fmt_of(Q8_0) as usize;
    assert_eq!(mix_of(gem.into_iter(), 1, 0), Some((k, Q5_0, Q8_0)));
    assert!(k < MV_KINDS);
    // The pair in either order is one module, the lower format id first.
    assert_eq!(
        mix_of([p(Q8_0), p(Q5_0), p(Q5_0)].into_iter(), 1, 0),
        Some((k, Q5_0, Q8_0))
    );
    let k46 = MVQ_MIX_BASE + fmt_of(Q4K) as usize * nf + fmt_of(Q6K) as usize;
    assert_eq!(
        mix_of([p(Q4K), p(Q4K), p(Q6K)].into_iter(), 1, 0),
        Some((k46, Q4K, Q6K))
    );
    // Not mixed: more rows, another mode, one format, three formats, a byte-wise matrix or
    // one on the tensor cores.
    assert_eq!(mix_of(gem.into_iter(), 2, 0), None);
    assert_eq!(mix_of(gem.into_iter(), 8, 0), None);
    assert_eq!(mix_of([p(Q5_0), p(Q8_0)].into_iter(), 1, 1), None);
    assert_eq!(mix_of([p(Q5_0), p(Q8_0)].into_iter(), 1, 2), None);
    assert_eq!(mix_of([p(Q5_0), p(Q5_0), p(Q5_0)].into_iter(), 1, 0), None);
    assert_eq!(mix_of([p(Q5_0), p(Q6K), p(Q8_0)].into_iter(), 1, 0), None);
    assert_eq!(
        mix_of([p(Q5_0), p(Q5_0), ((Q8_0, false), false)].into_iter(), 1, 0),
        None
    );
    assert_eq!(
        mix_of([p(Q4K), p(Q4K), ((Q6K, true), true)].into_iter(), 1, 0),
        None
    );
    // Every pair's kind is its own, inside the table, and its module has the two kernels.
    let mut seen = vec![false; MV_KINDS];
    for a in GgmlType::ALL {
        for b in GgmlType::ALL {
            let Some((k, fa, fb)) = mix_of([p(a), p(b)].into_iter(), 1, 0) else {
                assert_eq!(a, b);
                continue;
            };
            assert!((MVQ_MIX_BASE..MV_KINDS).contains(&k));
            assert!(fmt_of(fa) < fmt_of(fb) && [a, b].contains(&fa) && [a, b].contains(&fb));
            if fmt_of(a) < fmt_of(b) {
                assert!(!seen[k], "{a}|{b}: kind {k} taken twice");
                seen[k] = true;
            }
        }
    }
    assert_eq!(MVQ_MIX_KERNELS, ["mvq_x1", "mvq_x2"]);
    let mvq = source("mvq.cu");
    for name in MVQ_MIX_KERNELS {
        assert!(mvq.contains(&format!("MVQ_MIX_KERNEL({name}, ")), "{name}");
    }
}

#[test]
fn mixed_side_by_side_matrices_launch_per_format_and_a_mixed_gate_up_takes_the_generic_module() {
    use GgmlType::{Q4K, Q5_0, Q6K, Q8_0};
    let b = |t| (t, false);
    // q|k|v of gemma-3's q4_k_m file in half its layers: q, k Q5_0 and v Q8_0.
    let g = launch_groups([b(Q5_0), b(Q5_0), b(Q8_0)].into_iter(), 0);
    assert_eq!(
        g,
        vec![(Q5_0, fmt_of(Q5_0) as usize), (Q8_0, fmt_of(Q8_0) as usize)]
    );
    assert_eq!(
        launch_groups([b(Q4K)].into_iter(), 1),
        vec![(Q4K, fmt_of(Q4K) as usize)]
    );
    assert_eq!(
        launch_groups([b(Q5_0), b(Q5_0)].into_iter(), 2),
        vec![(Q5_0, fmt_of(Q5_0) as usize)]
    );
    assert_eq!(
        launch_groups([b(Q5_0), b(Q8_0)].into_iter(), 2),
        vec![(Q5_0, MV_GENERIC)]
    );
    // A q4_k_m layer: q, k Q4_K and v Q6_K, all packed: two vectorized launches.
    let p = |t| (t, true);
    assert_eq!(
        launch_groups([p(Q4K), p(Q4K), p(Q6K)].into_iter(), 0),
        vec![(Q4K, kind_of(p(Q4K))), (Q6K, kind_of(p(Q6K)))]
    );
    assert_eq!(
        launch_groups([p(Q4K), p(Q4K)].into_iter(), 2),
        vec![(Q4K, MVQ_BASE + fmt_of(Q4K) as usize)]
    );
}

#[test]
fn matvec_row_tiles_cover_every_row_once_in_whole_tiles_an_engine_has_compiled() {
    for max_rows in 1..=40 {
        let have = tiles_up_to(max_rows);
        for rows in 1..=max_rows {
            let t: Vec<_> = row_tiles(rows).collect();
            let mut next = 0;
            for &(r0, n, tile) in &t {
                assert_eq!(r0, next, "rows {rows}: {t:?} leaves a gap or overlaps");
                assert!(
                    n > 0 && n % tile == 0,
                    "rows {rows}: {t:?} has a partial tile"
                );
                assert!(
                    (1..=MV_MAX_TILE).contains(&tile) && have.contains(&tile),
                    "rows {rows} of max {max_rows}: tile {tile} not in {have:?}"
                );
                next += n;
            }
            assert_eq!(next, rows, "rows {rows}: {t:?}");
            assert!(t.len() <= 2, "rows {rows}: {t:?}");
        }
    }
    let tiles = |rows| row_tiles(rows).collect::<Vec<_>>();
    assert_eq!(tiles(1), vec![(0, 1, 1)]);
    assert_eq!(tiles(3), vec![(0, 3, 3)]);
    assert_eq!(tiles(19), vec![(0, 16, 8), (16, 3, 3)]);
    assert_eq!(tiles_up_to(3), vec![1, 2, 3]);
    assert_eq!(tiles_up_to(100), (1..=MV_MAX_TILE).collect::<Vec<_>>());
}

#[test]
fn the_kernel_takes_every_row_tile_the_host_may_compile() {
    // kernels/matvec.cu refuses an MV_RT outside 1..8 at compile time; the host's range must
    // be the same.
    let matvec = source("matvec.cu");
    assert!(matvec.contains(&format!("MV_RT < 1 || MV_RT > {MV_MAX_TILE}")));
}

#[test]
fn the_vectorized_kernels_are_the_ones_the_source_instantiates() {
    let mvq = source("mvq.cu");
    for (i, name) in MVQ_KERNELS.iter().enumerate().take(MVQ_DENSE) {
        // Variant i carries 2^i weight rows per warp (mvq_launch picks it from nw).
        assert!(
            mvq.contains(&format!("MVQ_KERNEL({name}, {})", 1 << i)),
            "{name}"
        );
    }
    // The dense walk is the last variant, built as MVQ_NW 1 << MVQ_DENSE (nvrtc.rs build_mv)
    // in one-row modules only, and walks groups of MVD_ROWS rows.
    assert_eq!(MVQ_DENSE + 1, MVQ_KERNELS.len());
    assert_eq!(1 << MVQ_DENSE, MVD_ROWS);
    let dense = MVQ_KERNELS[MVQ_DENSE];
    assert!(mvq.contains(&format!(
        "#if (!defined(MVQ_NW) || MVQ_NW == {MVD_ROWS}) && MV_RT == 1"
    )));
    assert!(mvq.contains(&format!("void __launch_bounds__(256, 3) {dense}(MVQ_ARGS)")));
    assert!(mvq.contains(&format!("#define MVD_ROWS {MVD_ROWS}")));
    // The folded post-norm add's widest row, as the host gates it (pre_fuses).
    assert!(mvq.contains(&format!("#define MVQ_PRE_MAX {MVQ_PRE_MAX}")));
    assert!(mvq.contains(&format!("MV_RT < 1 || MV_RT > {MV_MAX_TILE}")));
}

#[test]
fn vectorized_launch_shapes_fit_the_kernels() {
    // Rows per warp: a kernel exists for it (MVQ_KERNELS[log2 nw]) and gate|up carries
    // both rows of a feature.
    for features in [1, 576, 1024, 4096, 14336, 262144] {
        for gate_up in [false, true] {
            for tile in 1..=MV_MAX_TILE {
                let nw = mvq_rows_per_warp(features, gate_up, tile);
                assert!([1, 2, 4].contains(&nw) && (nw.trailing_zeros() as usize) < MVQ_DENSE);
                assert!(!gate_up || nw >= 2);
            }
        }
    }
    // The dense walk: one-row tiles of rows of at most 24 units (its walk deals at most 31
    // units a row), over enough groups to fill the GPU: the heads of gemma3 (640 wide, vocab
    // 262144) and SmolLM2 (576, 49152) on an H200 (132 SMs), not their q|k|v or gate|up, not
    // Qwen2-0.5B's 896-wide head, never rows 1024 and wider.
    let h200 = 132;
    for (n_in, vocab) in [(640, 262144), (576, 49152), (512, 32000)] {
        assert!(mvq_dense(1, n_in, vocab, false, h200), "{n_in}");
        assert!((2..=MV_MAX_TILE).all(|t| !mvq_dense(t, n_in, vocab, false, h200)));
    }
    for (n_in, features, gate_up) in [(640, 1536, false), (640, 2048, true), (576, 1536, true)] {
        assert!(
            !mvq_dense(1, n_in, features, gate_up, h200),
            "{n_in} {features}"
        );
    }
    // A wave of groups: 3 blocks of 8 warps on every SM; gate|up groups hold 4 features.
    assert!(mvq_dense(1, 640, 8 * 24 * 10, false, 10));
    assert!(!mvq_dense(1, 640, 8 * 24 * 10 - 8, false, 10));
    assert!(mvq_dense(1, 640, 4 * 24 * 10, true, 10));
    assert!(!mvq_dense(1, 800, 1 << 20, false, h200)); // 25 units
    for n_in in [896, 992, 1024, 2048, 4096, 8192] {
        assert!((1..=MV_MAX_TILE).all(|t| !mvq_dense(t, n_in, 1 << 20, false, h200)));
    }
    assert_eq!(mvq_blocks_per_sm(MVD_ROWS, 1), 3);
    // Shared memory: the 8B down projection at an 8-row tile (x not staged) and the 70B
    // one, and every staged tile up to 64 KiB, fit the H200's 227 KiB opt-in.
    use GgmlType::{Q4K, Q8_0};
    assert_eq!(mvq_smem(Q8_0, 1, 4096, true, false), 4 * (4096 + 1));
    assert_eq!(mvq_smem(Q4K, 1, 4096, true, false), 4 * (4096 + 256 + 1));
    assert!(mvq_smem(Q4K, 8, 28672, false, false) < 227 * 1024 - 2048);
    assert!(mvq_smem(Q4K, 4, 4096, true, false) < 227 * 1024 - 2048);
    // gemma3's folded post-norm add: three rows (o, x, w) after the rest, 16-byte aligned
    // (kernels/mvq.cu mvq_pre_at); at its widest it fits the dynamic-shared-memory opt-in of
    // the plain walk (smem_max) and, at the dense walk's widths, of the dense walk
    // (stage_max, 64 KiB).
    assert_eq!(mvq_smem(Q8_0, 1, 640, true, true), 4 * (644 + 3 * 640));
    assert_eq!(
        mvq_smem(Q4K, 1, 768, true, true),
        4 * ((768 + 48 + 1usize).next_multiple_of(4) + 3 * 768)
    );
    assert!(mvq_smem(Q4K, 1, MVQ_PRE_MAX, true, true) < 227 * 1024 - 2048);
    assert!(mvq_smem(Q4K, 1, 992, true, true) <= 64 * 1024);
}

#[test]
fn only_wide_rows_of_the_repacked_formats_are_vectorized() {
    use GgmlType::*;
    for ty in GgmlType::ALL {
        let fast = matches!(ty, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4K | Q5K | Q6K);
        assert_eq!(vectorized(ty, 4096), fast, "{ty}");
        assert!(!vectorized(ty, MVQ_MIN_IN / 2), "{ty}");
    }
    // Rows that are not whole super-blocks stay byte-wise.
    assert!(!vectorized(Q4K, 4096 + 32));
    assert!(vectorized(Q8_0, 4096 + 32));
}

#[test]
fn the_grid_sizing_mirrors_the_vectorized_launch_bounds() {
    // mvq_launch sizes its grid by the blocks the launch bounds keep resident per SM; the
    // kernel's MVQ_MIN_BLOCKS must say the same.
    let mvq = source("mvq.cu");
    assert!(mvq.contains("#define MVQ_MIN_BLOCKS(NW) ((NW) == 4 ? 1 : MV_RT <= 2 ? 3 : 2)"));
    for tile in 1..=MV_MAX_TILE {
        assert_eq!(mvq_blocks_per_sm(4, tile), 1);
        for nw in [1, 2] {
            assert_eq!(mvq_blocks_per_sm(nw, tile), if tile <= 2 { 3 } else { 2 });
        }
    }
}

#[test]
fn the_nvrtc_check_assembles_the_modules_as_the_backend_does() {
    // scripts/nvrtc-check.py mirrors the module assembly of nvrtc.rs in Python; a source or a
    // vectorized format added here and not there would go unchecked by CI.
    let py = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/nvrtc-check.py"),
    )
    .expect("scripts/nvrtc-check.py");
    let names: Vec<String> = SOURCES.iter().map(|(n, _)| format!("{n:?}")).collect();
    assert!(
        py.contains(&format!("SOURCES = [{}]", names.join(", "))),
        "SOURCES"
    );
    let mv: Vec<String> = MV_SOURCES.iter().map(|n| format!("{n:?}")).collect();
    assert!(
        py.contains(&format!("MV_SOURCES = [{}]", mv.join(", "))),
        "MV_SOURCES"
    );
    let fast: Vec<String> = GgmlType::ALL
        .into_iter()
        .filter(|&t| crate::quant::repack::is_fast(t))
        .map(|t| fmt_of(t).to_string())
        .collect();
    assert!(
        py.contains(&format!("VECTORIZED = [{}]", fast.join(", "))),
        "VECTORIZED"
    );
    assert!(py.contains(&format!("FORMATS = {}", GgmlType::ALL.len())));
    // The main module and the attention modules, with the heads the engine gives them.
    use super::nvrtc::{att_module, att_slot, ATT_KERNELS, ATT_SLOTS, ATT_WIDTHS, MAIN_HEAD};
    assert!(py.contains(&format!("{MAIN_HEAD:?} + whole")), "main head");
    let widths: Vec<String> = ATT_WIDTHS.iter().map(|w| w.to_string()).collect();
    assert!(py.contains(&format!("ATT_WIDTHS = [{}]", widths.join(", "))));
    assert!(py.contains(r##"f"#define ATT_KERNEL {k}\n#define ATT_HD {hd}\n" + whole"##));
    assert!(py.contains(r##""#define ATT_KERNEL 2\n" + whole"##));
    assert!(
        py.contains(r##"f"#define MVQ_FMT {fmt}\n#define MV_RT {tile}\n#define MVQ_NW {nw}\n""##)
    );
    // Every (kernel, width) has its slot, the slots are distinct, and each slot's module
    // head instantiates that kernel for that width class (other widths: class 0).
    let mut seen = std::collections::HashSet::new();
    for (k, &kernel) in ATT_KERNELS.iter().enumerate().take(2) {
        for (c, &w) in ATT_WIDTHS.iter().enumerate() {
            let i = att_slot(k, w);
            assert!(seen.insert(i));
            let (name, head) = att_module(i);
            assert_eq!(name, kernel);
            assert_eq!(
                head,
                format!("#define ATT_KERNEL {k}\n#define ATT_HD {w}\n")
            );
            assert_eq!(c, i % ATT_WIDTHS.len());
        }
        for odd in [32, 80, 96, 192, 512] {
            assert_eq!(
                att_slot(k, odd),
                att_slot(k, 0),
                "hd {odd} takes the generic body"
            );
        }
    }
    assert!(seen.insert(att_slot(2, 64)));
    assert_eq!(seen.len(), ATT_SLOTS);
    assert_eq!(
        att_module(att_slot(2, 128)),
        ("attention_rows", "#define ATT_KERNEL 2\n".to_string())
    );
}

#[test]
fn the_one_row_attention_kernel_is_early_only_while_its_launch_is_one_wave() {
    // attention_early holds a block's first K and V trips in registers (one block per SM):
    // a launch of more blocks than SMs would take two waves of it, so it gets `attention`.
    // SmolLM2 decode (9 heads) at B = 1 and 8 on an H200 (132 SMs), an 8B shape (32 heads)
    // at B = 4 and 8, and the boundary itself.
    assert_eq!(att_kernel(9, 132), "attention_early");
    assert_eq!(att_kernel(72, 132), "attention_early");
    assert_eq!(att_kernel(128, 132), "attention_early");
    assert_eq!(att_kernel(132, 132), "attention_early");
    assert_eq!(att_kernel(133, 132), "attention");
    assert_eq!(att_kernel(256, 132), "attention");
    for b in [1, 200] {
        assert!(super::nvrtc::ATT_KERNELS.contains(&att_kernel(b, 132)));
    }
    // Both kernels are the same body (att_entry) with only the EARLY flag apart.
    let src = source("attention.cu");
    assert!(src.contains("att_entry<false>(") && src.contains("att_entry<true>("));
}

/// The store pass's blocks cover every RoPE pair (hd / 2 threads) and every v element (tid
/// and tid + 256), hold the two norm warps, and stay whole warps within 256 threads.
#[test]
fn store_pass_blocks_cover_the_head_in_whole_warps() {
    use super::engine::att_store_threads as t;
    assert_eq!(t(64), 64);
    assert_eq!(t(48), 64);
    assert_eq!(t(80), 96);
    assert_eq!(t(128), 128);
    assert_eq!(t(256), 256);
    assert_eq!(t(512), 256);
    for hd in (2..=512).step_by(2) {
        let n = t(hd);
        assert!(
            n.is_multiple_of(32) && (64..=256).contains(&n),
            "hd {hd}: {n}"
        );
        assert!(n >= hd / 2, "hd {hd}: every RoPE pair has a thread");
        assert!(
            n >= hd.min(256) && n + 256 >= hd,
            "hd {hd}: every v element has a thread"
        );
    }
}

#[test]
fn attention_rows_tiles_fit_shared_memory_and_fall_back_when_they_cannot() {
    // The kernel's limits: R <= ATR_MAX_R (8), heads up to two 256-wide d blocks, the
    // output partials (256 floats a row where hd <= 128) after the score rows, 46 KiB for
    // those, then the staged k tile (heads of 64, 128, 256), all inside the kernel's opt-in.
    let src = source("attention.cu");
    assert!(src.contains("#define ATR_MAX_R 8"));
    // att_rows_smax's slack is one trip of the output loop's V loads.
    assert!(src.contains("#define ATR_VDEPTH 16"));
    assert!(src.contains("float* part = S + R * smax;"));
    assert!(src.contains("#define ATR_KS_STRIDE 20"));
    assert!(src.contains("#define ATR_KS (2 * 256 * ATR_KS_STRIDE)"));
    assert!(src.contains("float* Ks = part + (256 / HD > 1 ? R * 256 : 0);"));
    for hd in [32, 64, 96, 128, 256, 512] {
        for max_pos in [1, 24, 512, 950, 2048] {
            for (heads, sms) in [(32, 132), (4, 132), (9, 1)] {
                if let Some((r, smax, smem)) = att_rows_tile(hd, max_pos, 512, heads, sms) {
                    assert!([2, 4, 8].contains(&r), "{hd} {max_pos}");
                    // Each row's scores: every window, the block's union (r - 1 more), a
                    // 16-position trip read up to 15 past it; 16-byte aligned rows.
                    assert_eq!(smax, att_rows_smax(max_pos, r));
                    assert!(
                        smax >= max_pos + r - 1 + 15 && smax % 4 == 0,
                        "{hd} {max_pos}"
                    );
                    let parts = if hd <= 128 { 256 } else { 0 };
                    // Heads of 64, 128, 256 add the score pass's staged k tile (two
                    // buffers of 256 positions x 20 floats), inside the opt-in.
                    let ks = if [64, 128, 256].contains(&hd) {
                        4 * 2 * 256 * 20
                    } else {
                        0
                    };
                    assert_eq!(smem, 4 * (r * hd + r * smax + r * parts) + ks);
                    assert!(smem - ks <= 46 * 1024, "{hd} {max_pos}");
                    assert!(smem <= ATT_ROWS_OPT_IN, "{hd} {max_pos}");
                }
            }
        }
    }
    // On an H200's 132 SMs: SmolLM2's 9 heads over a 512-row chunk fill the GPU with 8-row
    // blocks (576 >= 264), Gemma-3's 4 heads need 4-row blocks (256 < 264 <= 512), and a
    // 37-row chunk takes 2-row blocks (the most blocks); the 8B shape's 32 heads take 8, over
    // 950 positions too (the tile needs no K/V staging).
    let r = |hd, pos, rows, heads| att_rows_tile(hd, pos, rows, heads, 132).map(|x| x.0);
    assert_eq!(r(64, 512, 512, 9), Some(8));
    assert_eq!(r(256, 512, 512, 4), Some(4));
    assert_eq!(r(64, 512, 37, 9), Some(2));
    assert_eq!(r(128, 950, 512, 32), Some(8));
    // The window decides what fits before the grid does: 8 rows of a 1400-position window
    // do not fit 46 KiB, 4 do.
    assert_eq!(r(64, 1400, 512, 32), Some(4));
    // A long window, a head past 512, one row: the one-row kernel.
    assert_eq!(r(128, 8192, 512, 32), None);
    assert_eq!(r(1024, 16, 512, 32), None);
    assert_eq!(r(64, 512, 1, 9), None);
}

/// Host mirror of kernels/mvq.cu's `tree32` (xor butterfly at distances `ds`, tree32's
/// being 16, 8, 4, 2, 1; own + partner) for value `o` of every lane: what lane 0 ends with.
fn tree32_mirror(lanes: &[Vec<f32>], o: usize, ds: [usize; 5]) -> f32 {
    let mut a: Vec<f32> = lanes.iter().map(|v| v[o]).collect();
    for d in ds {
        a = (0..32).map(|l| a[l] + a[l ^ d]).collect();
    }
    a[0]
}

/// Host mirror of `tree32_split`: per level, a lane keeps the half of its values whose
/// index bit matches its lane bit and adds what its partner sends; then tree32's remaining
/// levels. Returns each lane's one value.
fn tree32_split_mirror(lanes: &[Vec<f32>]) -> Vec<f32> {
    let m = lanes[0].len();
    let mut v: Vec<Vec<f32>> = lanes.to_vec();
    let mut n = m;
    let mut it = [16usize, 8, 4, 2, 1].into_iter();
    while n > 1 {
        let d = it.next().unwrap();
        let prev = v.clone();
        for l in 0..32 {
            let up = l & d != 0;
            for k in 0..n / 2 {
                let keep = if up { prev[l][k + n / 2] } else { prev[l][k] };
                let p = &prev[l ^ d];
                // The partner sends the half it does not keep: ours.
                let recv = if up { p[k + n / 2] } else { p[k] };
                v[l][k] = keep + recv;
            }
        }
        n /= 2;
    }
    let mut a: Vec<f32> = v.iter().map(|x| x[0]).collect();
    for d in it {
        a = (0..32).map(|l| a[l] + a[l ^ d]).collect();
    }
    a
}

#[test]
fn the_split_warp_reduction_gives_tree32_s_bits_for_every_output() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for m in [2usize, 4, 8, 16, 32] {
        let lanes: Vec<Vec<f32>> = (0..32)
            .map(|_| {
                (0..m)
                    .map(|_| rng.gen_range(-1.0f32..1.0) * 10f32.powi(rng.gen_range(-3..4)))
                    .collect()
            })
            .collect();
        const TREE32: [usize; 5] = [16, 8, 4, 2, 1];
        let got = tree32_split_mirror(&lanes);
        let sh = 5 - m.trailing_zeros() as usize;
        for (l, g) in got.iter().enumerate() {
            // Lane l holds output (l >> sh) & (m - 1) (the kernel reads output o from lane
            // o << sh).
            let o = (l >> sh) & (m - 1);
            let want = tree32_mirror(&lanes, o, TREE32);
            assert_eq!(g.to_bits(), want.to_bits(), "m {m} lane {l}");
        }
        // The data tells orders apart: tree32 with its first two levels swapped differs
        // for some output (so the equality above is not one any order would pass).
        assert!(
            (0..m).any(|o| tree32_mirror(&lanes, o, [8, 16, 4, 2, 1]).to_bits()
                != tree32_mirror(&lanes, o, TREE32).to_bits()),
            "m {m}: the level order made no difference"
        );
    }
    // The kernel has the split and reads output o from lane o << SH.
    let src = source("mvq.cu");
    assert!(src.contains("tree32_split<NW, RT>(acc, lane)"));
    assert!(src.contains("(lane << SH) & 31"));
}

#[test]
fn the_mma_module_is_assembled_checked_and_launched_as_its_source_says() {
    // kernels/mma.cu is empty outside the mma module (the main module concatenates every
    // source) and needs MvArgs / mv_finish from matvec.cu, whose embed_rows stays out of it.
    let mma = source("mma.cu");
    assert!(mma.contains("#if defined(MMA_Q4K)"));
    assert_eq!(MMA_SOURCES, ["common.cu", "ffn.cu", "matvec.cu", "mma.cu"]);
    assert!(source("matvec.cu").contains("!defined(MVQ_FMT) && !defined(MMA_Q4K)"));
    // scripts/nvrtc-check.py compiles the same module (CI covers it).
    let py = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/nvrtc-check.py"),
    )
    .expect("scripts/nvrtc-check.py");
    assert!(
        py.contains(r##""#define MMA_Q4K\n" + "".join(src(n) for n in MV_SOURCES + ["mma.cu"])"##)
    );
    // ... and each kernel's own module, with the head the engine gives it.
    assert!(py.contains(&format!("MMA_FORMATS = {}", MMA_FORMATS.len())));
    assert!(py.contains(&format!("MMA_SET_KERNELS = {}", super::mma::MMA_SET)));
    assert!(
        py.contains(r##"f"#define MMA_Q4K\n#define MMA_SET {fset}\n#define MMA_SLOT {slot}\n""##)
    );
    assert!(py.contains(r##""#define MMA_Q4K\n#define MMA_SET -1\n""##));
    assert_eq!(
        super::mma::mma_module_head(super::mma::MMA_PREP),
        "#define MMA_Q4K\n#define MMA_SET -1\n"
    );
    for (f, (ty, _)) in MMA_FORMATS.iter().enumerate() {
        for slot in 0..super::mma::MMA_SET {
            let i = super::mma::mma_kernel(*ty, slot).unwrap();
            assert_eq!(
                super::mma::mma_module_head(i),
                format!("#define MMA_Q4K\n#define MMA_SET {f}\n#define MMA_SLOT {slot}\n")
            );
        }
    }
    // One kernel per module: the set's macro instantiates slot MMA_SLOT alone.
    for k in 0..super::mma::MMA_SET {
        assert!(
            mma.contains(&format!("#define MMA_K{k}(F, SUF)")),
            "MMA_K{k}"
        );
    }
    assert!(mma.contains("#define MMA_ONE(F, SUF) MMA_CAT(MMA_K, MMA_SLOT)(F, SUF)"));
    let kernels = super::mma::mma_kernels_for(
        &[crate::quant::GgmlType::Q4K, crate::quant::GgmlType::Q6K],
        false,
    );
    // The integer formats' fused decode kernels are never launched (mma_fuses), so never
    // compiled; both integer formats bring the mixed decode's two.
    assert_eq!(
        kernels.len(),
        11,
        "mma_prep, Q4_K's four, Q6_K's four, the mixed two"
    );
    assert_eq!(kernels[9..], [super::mma::MMA_MIX, super::mma::MMA_MIX + 1]);
    let kernels = super::mma::mma_kernels_for(&[crate::quant::GgmlType::Q6K], false);
    assert_eq!(
        kernels.len(),
        5,
        "mma_prep, Q6_K's four: no mixed decode without Q4_K"
    );
    let kernels = super::mma::mma_kernels_for(
        &[crate::quant::GgmlType::Q4K, crate::quant::GgmlType::Q8_0],
        false,
    );
    assert_eq!(kernels.len(), 11, "mma_prep, Q4_K's four, Q8_0's six");
    assert_eq!(kernels[0], super::mma::MMA_PREP);
    // A device that runs the wgmma GEMM (DevCtx::mma_wg) builds its prep and GEMM for Q4_K
    // only: a model without Q4_K never compiles them.
    let wg = super::mma::MMA_WG;
    let kernels = super::mma::mma_kernels_for(
        &[crate::quant::GgmlType::Q4K, crate::quant::GgmlType::Q6K],
        true,
    );
    assert_eq!(
        kernels.len(),
        13,
        "the 11 above, then mma_prep_xg and mma_gemm_wg"
    );
    assert_eq!(kernels[11..], [wg, wg + 1]);
    let kernels = super::mma::mma_kernels_for(&[crate::quant::GgmlType::Q6K], true);
    assert!(
        kernels.iter().all(|&k| k < wg),
        "no wgmma kernel without Q4_K"
    );
    // The launch geometry of engine/mma.rs mma_launch: decode blocks of 2 m-tiles (8 or 16
    // warps), GEMM blocks of 4 x 4 warps of 2 x 2 tiles (8 m-tiles x 64 columns); mode 2
    // pairs gate and up in one block / lane only with an even tile count per block or warp.
    for (warps, fused) in [(8, "false"), (16, "false"), (8, "true"), (16, "true")] {
        assert!(mma.contains(&format!("mma_decode_kernel<F, 2, {warps}, {fused}>")));
    }
    assert!(mma.contains("mma_gemm_body<F, 2, 2, 4, 4>"));
    // The narrow GEMM: 4 warps of 2 x 1 tiles (mode 2's gate and up tiles still in one lane).
    assert!(mma.contains("mma_gemm_body<F, 2, 1, 4, 1>"));
    assert_eq!(
        MMA_DECODE_MAX, 8,
        "the decode kernel holds one n-tile of 8 columns"
    );
    // Every format's kernel set is instantiated under the names MMA_KERNELS lists, and the
    // engine's index of (format, slot) names that format's kernel.
    let tags = [
        "MF_Q4K", "MF_Q8_0", "MF_Q4_0", "MF_Q4_1", "MF_Q5_0", "MF_Q6_K",
    ];
    for (f, ((ty, suf), tag)) in MMA_FORMATS.iter().zip(tags).enumerate() {
        assert!(mma.contains(&format!("#define {tag} {f}\n")), "{tag} = {f}");
        let set = format!("MMA_KERNEL_SET({tag}, {suf})");
        assert!(mma.contains(&set), "{set}");
        for n_mt in [2, 64, 256, 528, 1792, 4000] {
            let (slot, warps) = super::engine::mma_decode_kernel(n_mt, 16, 132);
            let k = super::mma::mma_kernel(*ty, slot).unwrap();
            assert_eq!(k, 1 + super::mma::MMA_SET * f + slot);
            assert_eq!(MMA_KERNELS[k], format!("mma_decode_k{warps}{suf}"));
            let k = super::mma::mma_kernel(*ty, super::mma::MMA_FUSED + slot).unwrap();
            assert_eq!(MMA_KERNELS[k], format!("mma_decode_f{warps}{suf}"));
        }
        assert_eq!(
            MMA_KERNELS[super::mma::mma_kernel(*ty, super::mma::MMA_GEMM).unwrap()],
            format!("mma_gemm{suf}")
        );
        assert_eq!(
            MMA_KERNELS[super::mma::mma_kernel(*ty, super::mma::MMA_GEMM_N).unwrap()],
            format!("mma_gemm_n{suf}")
        );
    }
    assert_eq!(
        MMA_KERNELS.len(),
        1 + super::mma::MMA_SET * MMA_FORMATS.len()
            + super::mma::MMA_MIX_KERNELS
            + super::mma::MMA_WG_KERNELS
    );
    // The wgmma GEMM (its prep, slot 0, then the GEMM): module set MMA_FORMATS.len() + 1, its
    // block shape in the head (kernels/mma.cu WG_NWG, WG_NST: what the host sizes from), and
    // nvrtc-check compiles both for sm_90a.
    for (slot, name) in [(0, "mma_prep_xg"), (1, "mma_gemm_wg")] {
        let i = super::mma::MMA_WG + slot;
        assert_eq!(MMA_KERNELS[i], name);
        assert_eq!(
            super::mma::mma_module_head(i),
            format!(
                "#define MMA_Q4K\n#define MMA_SET {}\n#define MMA_SLOT {slot}\n#define WG_NWG {}\n#define WG_NST {}\n",
                MMA_FORMATS.len() + 1,
                super::mma::MMA_WG_NWG,
                super::mma::MMA_WG_NST
            )
        );
        assert!(mma.contains(&format!(
            "#elif MMA_SET == {} && MMA_SLOT == {slot}\nMMA_W{slot}\n",
            MMA_FORMATS.len() + 1
        )));
    }
    assert!(py.contains(&format!("MMA_WG_KERNELS = {}", super::mma::MMA_WG_KERNELS)));
    // The sizes the host launches with are the kernel's: 32 columns and 4 m-tiles a
    // warpgroup a block, XG's 804 bytes a column and super-block, the ring's bytes.
    assert!(mma.contains("#define WG_BN 32\n"));
    assert!(mma.contains("#define WG_MT (4 * WG_NWG)\n"));
    assert!(mma.contains("#define WG_TILE (804 * WG_BN)\n"));
    assert!(mma.contains("#define WG_SMEM (128 + WG_NST * WG_STAGE)\n"));
    assert!(mma.contains("#define WG_STAGE (WG_TILE + WG_MT * MMA_BLK)\n"));
    assert_eq!(super::mma::MMA_WG_BN, 32);
    assert_eq!(super::mma::MMA_WG_MT, 4 * super::mma::MMA_WG_NWG);
    assert_eq!(super::mma::MMA_WG_COL_WORDS * 4, 804);
    assert_eq!(
        super::mma::MMA_WG_SMEM,
        128 + super::mma::MMA_WG_NST * (804 * 32 + super::mma::MMA_WG_MT * 2368)
    );
    // Which Q4_K GEMM launches take it (engine/mma.rs mma_gemm_wg): past the decode's 8 rows,
    // and only where its blocks give each SM one (132 SMs: the 8B shape's gate|up at 37 rows,
    // 224 m-blocks x 2; its o at 512 rows; not its o at 37 rows, 32 x 2 blocks).
    {
        let pick = super::engine::mma_gemm_wg;
        // Counted in step 48's blocks of 8 m-tiles, whatever the kernel's block now is.
        let mt = super::engine::MMA_WG_PICK_MT;
        assert_eq!(mt, 8);
        assert!(!pick(2 * 14336 / 16, 8, 132), "8 rows: the decode kernel");
        assert!(pick(2 * 14336 / 16, 37, 132));
        assert!(pick(4096 / 16, 512, 132));
        assert!(!pick(4096 / 16, 37, 132));
        assert!(pick(132 * mt, 9, 132), "one block an SM: enough");
        assert!(!pick(131 * mt, 9, 132), "one SM without a block");
    }
    // The mixed decode (Q4_K's matrices then Q6_K's): its own module set after the formats',
    // its kernels in the decode slots' order, one macro each.
    for (slot, warps) in [
        (super::mma::MMA_DECODE_K8, 8),
        (super::mma::MMA_DECODE_K16, 16),
    ] {
        let i = super::mma::MMA_MIX + slot;
        assert_eq!(MMA_KERNELS[i], format!("mma_decode_k{warps}_mix"));
        assert_eq!(
            super::mma::mma_module_head(i),
            format!(
                "#define MMA_Q4K\n#define MMA_SET {}\n#define MMA_SLOT {slot}\n",
                MMA_FORMATS.len()
            )
        );
        assert!(mma.contains(&format!(
            "#elif MMA_SET == {} && MMA_SLOT == {slot}\nMMA_M{slot}\n",
            MMA_FORMATS.len()
        )));
    }
    assert!(py.contains(&format!(
        "MMA_MIX_KERNELS = {}",
        super::mma::MMA_MIX_KERNELS
    )));
    // When a launch is mixed (engine/mma.rs mma_mix_split): decode sized, not gate|up, Q4_K's
    // matrices (an even m-tile count) then Q6_K's.
    {
        use crate::quant::GgmlType::{Q4K, Q6K, Q8_0};
        let split = super::engine::mma_mix_split;
        let qkv = [(Q4K, 4096), (Q4K, 1024), (Q6K, 1024)];
        assert_eq!(split(&qkv, 1, false), Some(320));
        assert_eq!(split(&qkv, 8, false), Some(320));
        assert_eq!(split(&qkv, 9, false), None, "the GEMM: a launch per format");
        assert_eq!(split(&qkv, 1, true), None, "gate|up");
        assert_eq!(
            split(&[(Q6K, 1024), (Q4K, 4096)], 1, false),
            None,
            "Q6_K first"
        );
        assert_eq!(
            split(&[(Q4K, 16), (Q6K, 16)], 1, false),
            None,
            "odd Q4_K tiles"
        );
        assert_eq!(split(&[(Q4K, 32), (Q6K, 16)], 1, false), Some(2));
        assert_eq!(split(&[(Q4K, 32), (Q8_0, 16)], 1, false), None, "not Q6_K");
        assert_eq!(split(&[(Q4K, 32), (Q4K, 16)], 1, false), None, "one format");
        assert_eq!(split(&[(Q6K, 32), (Q6K, 16)], 1, false), None, "one format");
    }
    // Every format on 16 warps when the launch is small (a function of its shape alone).
    assert_eq!(super::engine::mma_decode_kernel(2, 16, 132).1, 16);
    // One wave of 16-warp blocks (<= SMs), or two short ones (< 2 x SMs, one round of 16
    // super-blocks); a second wave of longer blocks goes to 8 warps (three blocks an SM).
    let warps = |n_mt, n_sb| super::engine::mma_decode_kernel(n_mt, n_sb, 132).1;
    assert_eq!(warps(264, 112), 16, "132 blocks: one wave");
    assert_eq!(warps(266, 112), 8, "133 blocks of 7 rounds: two waves");
    assert_eq!(warps(384, 16), 16, "8B q|k|v: 192 blocks of one round");
    assert_eq!(warps(512, 32), 8, "70B o: 256 blocks of two rounds");
    assert_eq!(warps(526, 16), 16, "263 blocks, one round");
    assert_eq!(warps(528, 16), 8, "264 blocks: 2 x SMs");
    assert_eq!(super::mma::mma_kernel(crate::quant::GgmlType::Q5K, 0), None);
    // Read after write: every mma kernel reads activations and scratch only after its
    // pdl_wait (weights are read-only; the bodies wait first, then call the per-super-block
    // functions that read XF/XE/XS). Negative control below.
    for (body, reader) in [
        ("mma_decode_body", "mma_dec_sb<F, MT>("),
        ("mma_decode_body", "mma_int_sb<F, MT>("),
        // the fused decode's prep reads a.x (the previous kernel's output)
        ("mma_decode_body", "mma_prep_block("),
        ("mma_gemm_body", "XF +"),
    ] {
        let at = mma.find(&format!("void {body}(")).expect(body);
        let b = &mma[at..];
        assert!(
            b.find("pdl_wait();").unwrap() < b.find(reader).unwrap(),
            "{body}"
        );
    }
    // The one load before pdl_wait that is not a prefetch (the unfused Q4_K decode's first
    // round, mma_decode_body) reads weights only: mma_q4k_load takes the tile bases and
    // nothing of XF/XE/XS or a.x. Negative control: a load of X is caught.
    let reads_x = |b: &str| {
        ["XF", "XE", "XS", "a.x", "xf"]
            .iter()
            .any(|x| b.contains(x))
    };
    for f in ["mma_q4k_load", "mma_q6k_load", "mma_int_load"] {
        let load = &mma[mma.find(&format!("void {f}(")).expect(f)..];
        let load = &load[..load.find("\n}\n").expect("its end")];
        assert!(!reads_x(load), "{f} reads only weights");
    }
    let load = &mma[mma.find("void mma_q6k_load(").unwrap()..];
    let load = &load[..load.find("\n}\n").unwrap()];
    assert!(reads_x(&load.replacen(
        "w.dd[mi] = ",
        "w.dd[mi] = XF[0].x + ",
        1
    )));
    let body = &mma[mma.find("void mma_decode_body(").unwrap()..];
    let wait = body.find("pdl_wait();").unwrap();
    assert!(body[..wait].contains("mma_int_load<F, MT>(base, warp, lane, w0)"));
    let gemm = &mma[mma.find("void mma_gemm_body(").unwrap()..];
    assert!(gemm.find("pdl_wait();").unwrap() < gemm.find("mma_gemm_sb<F, GMT, GNT>(").unwrap());
    let prep = &mma[mma.find(" mma_prep(MvArgs a").expect("mma_prep")..];
    let prep = &prep[..prep.find("__global__").expect("a kernel after it")];
    let first = |b: &str| b.find("a.x").expect("reads x");
    assert!(prep.find("pdl_wait();").unwrap() < first(prep));
    let moved = prep.replacen("pdl_wait();", "", 1) + "pdl_wait();";
    assert!(moved.find("pdl_wait();").unwrap() > first(&moved));
}

/// The layout constants of kernels/mma.cu's MmaF<F> (block size, scale area, scale words per
/// row pair, high-bit plane, quant bias) are the host layout's (repack::mma_block_bytes,
/// b32_geometry), format by format, and Q6_K's block (MMA6_*) is repack's (Q6K_*): the
/// kernels read where `repack_mma_b32` / `repack_mma_q6k` wrote, which the host round-trip
/// tests alone cannot show. And Q6_K's A build in mma_q6k_afrag is the one `mma_q6k_weights`
/// mirrors. Negative control: a changed constant is caught.
#[test]
fn mma_format_table_matches_the_host_layouts() {
    use crate::quant::repack::{b32_geometry, mma_block_bytes, Q6K_DOFF, Q6K_HI_OFF, Q6K_SC_OFF};
    let mma = source("mma.cu");
    let field = |text: &str, tag: &str, name: &str| -> Option<usize> {
        let at = text.find(&format!("struct MmaF<{tag}> {{"))?;
        let body = &text[at..at + text[at..].find("};")?];
        let v = body.split(&format!(" {name} = ")).nth(1)?;
        v.split([',', ' ']).next()?.parse().ok()
    };
    for (ty, tag) in [
        (GgmlType::Q8_0, "MF_Q8_0"),
        (GgmlType::Q4_0, "MF_Q4_0"),
        (GgmlType::Q4_1, "MF_Q4_1"),
        (GgmlType::Q5_0, "MF_Q5_0"),
    ] {
        let (doff, nd, hboff, bias) = b32_geometry(ty);
        let f = |name: &str| field(mma, tag, name).unwrap_or_else(|| panic!("{tag} {name}"));
        assert_eq!(Some(f("BLK")), mma_block_bytes(ty), "{tag} BLK");
        assert_eq!(f("INTS"), 0, "{tag} INTS");
        assert_eq!(f("DOFF"), doff, "{tag} DOFF");
        assert_eq!(f("ND"), nd, "{tag} ND");
        assert_eq!(f("HB") > 0, hboff.is_some(), "{tag} HB");
        assert_eq!(f("HBOFF"), hboff.unwrap_or(0), "{tag} HBOFF");
        assert_eq!(f("BIAS") as i32, bias, "{tag} BIAS");
    }
    let define = |text: &str, name: &str| -> Option<usize> {
        let v = text.split(&format!("#define {name} ")).nth(1)?;
        v.split_whitespace().next()?.parse().ok()
    };
    assert!(mma.contains("enum { BLK = MMA6_BLK, INTS = 1 };"));
    assert!(mma.contains("enum { BLK = MMA_BLK, INTS = 1 };"));
    assert_eq!(define(mma, "MMA6_BLK"), mma_block_bytes(GgmlType::Q6K));
    assert_eq!(define(mma, "MMA6_HI_OFF"), Some(Q6K_HI_OFF));
    assert_eq!(define(mma, "MMA6_SC_OFF"), Some(Q6K_SC_OFF));
    assert_eq!(define(mma, "MMA6_DD_OFF"), Some(Q6K_DOFF));
    let moved = mma.replacen("#define MMA6_SC_OFF 3072", "#define MMA6_SC_OFF 3088", 1);
    assert_ne!(define(&moved, "MMA6_SC_OFF"), Some(Q6K_SC_OFF));
    let moved = mma.replacen("BLK = 2816", "BLK = 2832", 1);
    assert_ne!(
        field(&moved, "MF_Q5_0", "BLK"),
        mma_block_bytes(GgmlType::Q5_0)
    );
    // Q6_K's A build: the high pair under each nibble, then q - 32 per byte (the mirror's
    // masks, shifts and constants).
    for line in [
        "a[0] = (((w0 & M) | ((hw << 4) & H)) + B) ^ X;",
        "a[1] = ((((w0 >> 4) & M) | ((hw << 2) & H)) + B) ^ X;",
        "a[2] = (((w1 & M) | (hw & H)) + B) ^ X;",
        "a[3] = ((((w1 >> 4) & M) | ((hw >> 2) & H)) + B) ^ X;",
        "const u32 M = 0x0F0F0F0Fu, H = 0x30303030u, B = 0x60606060u, X = 0x80808080u;",
        "return (int)(signed char)(u8)(mma_comp4(sc, 2 * (j & 1) + (j >> 3)) >> (8 * ((j >> 1) & 3)));",
    ] {
        assert!(mma.contains(line), "mma.cu: {line}");
    }
}

/// The fused decode rule (engine/mma.rs mma_fused_smem): decode-sized launches whose rows x
/// super-blocks of prepared activations fit the shared memory budget and the block's warps
/// in mma_fuse_rounds rounds (4 for 16 warps, 2 for 8) run as one kernel, except Q4_K
/// (mma_fuses: its unfused kernel preloads its weights; measured faster at every width);
/// the bytes are what the kernel lays out (kernels/mma.cu mma_decode_body, FUSE).
#[test]
fn mma_fuses_a_decode_launch_only_when_its_prepared_rows_fit_the_budget() {
    use super::engine::{mma_fused_smem, MMA_FUSE_UNIT};
    use super::mma::MMA_FUSE_SMEM_MAX;
    use crate::quant::GgmlType;
    let cap = MMA_FUSE_SMEM_MAX;
    let (q4k, q6k, q8) = (GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0);
    // XF (256 words), XS (8 floats), XE (1 float) per (row, super-block), as the kernel
    // carves its dynamic shared memory.
    assert_eq!(MMA_FUSE_UNIT, 4 * (256 + 8 + 1));
    let mma = source("mma.cu");
    assert!(mma.contains("float* xs = (float*)(xf + (size_t)nb * n_sb * 256);"));
    assert!(mma.contains("float* xe = xs + (size_t)nb * n_sb * 8;"));
    // Eager (one row) on the 16-warp kernel: every width up to 61 super-blocks (Llama-3-8B's
    // 14336 included: 4 rounds); a partial last super-block counts whole (SmolLM2's 576: 3).
    assert_eq!(mma_fused_smem(q8, 1, 576, 16, cap), Some(3 * MMA_FUSE_UNIT));
    assert_eq!(
        mma_fused_smem(q8, 1, 14336, 16, cap),
        Some(56 * MMA_FUSE_UNIT)
    );
    assert_eq!(
        mma_fused_smem(q8, 1, 61 * 256, 16, cap),
        Some(61 * MMA_FUSE_UNIT)
    );
    assert_eq!(mma_fused_smem(q8, 1, 62 * 256, 16, cap), None);
    // The rounds: 8 warps take up to 16 (row, super-block) items (2 rounds: the 8B shape's
    // 4096, not the 70B shape's 8192), 16 warps 64 (4 rounds).
    assert_eq!(
        mma_fused_smem(q8, 1, 4096, 8, cap),
        Some(16 * MMA_FUSE_UNIT)
    );
    assert_eq!(mma_fused_smem(q8, 1, 17 * 256, 8, cap), None);
    assert_eq!(mma_fused_smem(q8, 1, 32 * 256, 8, cap), None);
    assert_eq!(
        mma_fused_smem(q8, 1, 32 * 256, 16, cap),
        Some(32 * MMA_FUSE_UNIT)
    );
    assert_eq!(mma_fused_smem(q8, 1, 65 * 256, 16, cap), None);
    assert_eq!(mma_fused_smem(q8, 1, 14336, 8, cap), None);
    // More than one row (B = 8, measured slower fused): never, even where it would fit.
    assert_eq!(mma_fused_smem(q8, 8, 1536, 16, cap), None);
    assert_eq!(mma_fused_smem(q8, 8, 576, 8, cap), None);
    assert_eq!(mma_fused_smem(q8, 2, 576, 16, cap), None);
    assert_eq!(mma_fused_smem(q8, 8, 1536, 8, cap), None);
    assert_eq!(mma_fused_smem(q8, 8, 2048, 16, cap), None);
    assert_eq!(mma_fused_smem(q8, 8, 4096, 16, cap), None);
    // More rows than the decode kernel's n-tile (the GEMM's), or none: never fused.
    assert_eq!(mma_fused_smem(q8, 9, 256, 16, cap), None);
    assert_eq!(mma_fused_smem(q8, 0, 256, 16, cap), None);
    // A device whose opt-in limit is smaller fuses less; a cap of 0 never.
    let c16 = 16 * MMA_FUSE_UNIT;
    assert_eq!(mma_fused_smem(q8, 1, 4096, 16, c16), Some(c16));
    assert_eq!(mma_fused_smem(q8, 1, 4096, 16, c16 - 1), None);
    assert_eq!(mma_fused_smem(q8, 1, 256, 16, 0), None);
    assert_eq!(mma_fused_smem(q8, usize::MAX, usize::MAX, 16, cap), None);
    // Q4_K and Q6_K (the integer formats): never fused, at any width or warps (mma_prep, then
    // the unfused kernel that preloads); another format at the same shapes (Q8_0) keeps the
    // rule above.
    assert!(!super::mma::mma_fuses(q4k) && !super::mma::mma_fuses(q6k));
    assert!(super::mma::mma_fuses(q8));
    for (n_in, warps) in [
        (256, 16),
        (1024, 16),
        (2048, 8),
        (4096, 16),
        (4096, 8),
        (14336, 16),
    ] {
        assert_eq!(
            mma_fused_smem(q4k, 1, n_in, warps, cap),
            None,
            "{n_in} {warps}"
        );
        assert_eq!(mma_fused_smem(q6k, 1, n_in, warps, cap), None);
    }
    assert_eq!(
        mma_fused_smem(q8, 1, 14336, 16, cap),
        Some(56 * MMA_FUSE_UNIT)
    );
    assert_eq!(
        mma_fused_smem(q8, 1, 4096, 16, cap),
        Some(16 * MMA_FUSE_UNIT)
    );
}

/// `--mma auto`'s batch rule: a batched arm of MMA_AUTO_MIN_BATCH rows or more turns on
/// every format the path takes (Q4_K, Q8_0, Q6_K...) at any width, the narrow models'
/// (SmolLM2's 576, Gemma-3's 640) included; one row fewer keeps them on FFMA (a wide model
/// then keeps Q4_K and Q6_K only); the note says which rule chose, with the numbers. Negative control:
/// the rule's edges both ways, and `off` whatever the batch.
#[test]
fn mma_auto_takes_every_format_for_batched_runs() {
    use super::{mma_note, MmaMode, MMA_AUTO_MIN_BATCH as B, MMA_AUTO_MIN_EMBD as W};
    use GgmlType::*;
    assert!(MmaMode::Auto.select(W - 256, 0, B).takes(Q6K, 32, W - 256));
    assert!(!MmaMode::Auto
        .select(W - 256, 0, B - 1)
        .takes(Q6K, 32, W - 256));
    for ty in [Q8_0, Q4_0] {
        assert!(
            MmaMode::Auto.select(W, 0, B).takes(ty, 32, W),
            "{}",
            ty.name()
        );
        assert!(!MmaMode::Auto.select(W, 0, B - 1).takes(ty, 32, W));
        assert!(MmaMode::Auto.select(W - 256, 0, B).takes(ty, 32, W - 256));
        assert!(!MmaMode::Auto
            .select(W - 256, 0, B - 1)
            .takes(ty, 32, W - 256));
        assert!(!MmaMode::Off.select(W, 0, B).takes(ty, 32, W));
    }
    // The narrow shapes: SmolLM2 (576, Q4_1) and Gemma-3 (640: Q5_0, Q8_0, Q4_K).
    for (ty, rows, cols) in [(Q4_1, 1536, 576), (Q5_0, 1024, 640), (Q8_0, 2048, 640)] {
        let takes = |batch| MmaMode::Auto.select(cols, 0, batch).takes(ty, rows, cols);
        for (batch, on) in [(B, true), (64, true), (B - 1, false), (0, false)] {
            assert_eq!(takes(batch), on, "{} at {batch} rows", ty.name());
        }
    }
    // The rule's choice is `--mma on`'s, matrix for matrix (so its bits are on's: the
    // narrow-mma receipts' `diff` of the two).
    for w in [576, 640, 896, W] {
        assert_eq!(MmaMode::Auto.select(w, 0, B), MmaMode::On.select(w, 0, 0));
    }
    assert!(MmaMode::Auto.select(640, 0, B).takes(Q4K, 2048, 1024));
    assert!(!MmaMode::Auto.select(640, 0, B - 1).takes(Q4K, 2048, 1024));
    let note = mma_note(MmaMode::Auto, W, 0, B, true);
    assert!(note.contains(&format!("rows a step {B} >= {B}")), "{note}");
    let note = mma_note(MmaMode::Auto, 576, 0, B, false);
    assert_eq!(
        note,
        format!("auto: on, every format it takes (rows a step {B} >= {B})")
    );
    let note = mma_note(MmaMode::Auto, W, 0, B - 1, true);
    assert!(note.starts_with("auto: on, Q4_K and Q6_K"), "{note}");
    let note = mma_note(MmaMode::Auto, 576, 0, B - 1, false);
    assert!(
        note.starts_with("auto: off (n_embd 576 <")
            && note.contains(&format!("rows a step {} < {B}", B - 1)),
        "{note}"
    );
    let note = mma_note(MmaMode::Auto, W, 512, B, true);
    assert!(note.contains("prime chunks of 512"), "{note}");
}

/// `--mma auto`: Q4_K and Q6_K (the integer route) at MMA_AUTO_MIN_EMBD and wider, nothing
/// else, in runs that prime no
/// chunk of MMA_AUTO_MIN_ROWS rows; in runs that do, every format the path takes, at any
/// width. On: every format; off: none. Only whole m-tiles of whole blocks of 32 take the
/// 32-element formats' layout (SmolLM2's 576 and Gemma-3's 640 included).
#[test]
fn mma_auto_selects_by_width_and_prime_chunk() {
    use super::{
        mma_note, MmaMode, MmaSel, MMA_AUTO_MIN_BATCH as B, MMA_AUTO_MIN_EMBD as W,
        MMA_AUTO_MIN_ROWS as R,
    };
    use GgmlType::*;
    let auto = MmaMode::Auto.select(W, 0, 0);
    assert!(auto.takes(Q4K, 32, W));
    assert!(!MmaMode::Auto
        .select(W - 1, R - 1, 0)
        .takes(Q4K, 32, W - 256));
    assert!(MmaMode::Auto.select(576, R, 0).takes(Q4K, 32, 1536));
    for ty in [Q8_0, Q4_0, Q4_1, Q5_0] {
        assert!(!auto.takes(ty, 32, W), "auto took {}", ty.name());
        assert!(!MmaMode::Auto.select(576, R - 1, 0).takes(ty, 32, 576));
        assert!(
            MmaMode::Auto.select(576, R, 0).takes(ty, 32, 576),
            "{}",
            ty.name()
        );
        assert!(
            MmaMode::On.select(576, 0, 0).takes(ty, 32, 576),
            "{}",
            ty.name()
        );
        assert!(
            MmaMode::On.select(640, 0, 0).takes(ty, 1024, 640),
            "{}",
            ty.name()
        );
        assert!(
            !MmaMode::On.select(576, 0, 0).takes(ty, 40, 576),
            "{}: 40 rows",
            ty.name()
        );
    }
    // Q6_K: whole super-blocks only, with Q4_K (auto's width rule; on; auto's prime rule);
    // Gemma-3's 640 is 2.5 of them: FFMA.
    assert!(auto.takes(Q6K, 32, W), "auto left q6_k");
    assert!(!MmaMode::Auto
        .select(W - 1, R - 1, 0)
        .takes(Q6K, 32, W - 256));
    assert!(MmaMode::On.select(W, 0, 0).takes(Q6K, 32, W));
    assert!(MmaMode::Auto.select(640, R, 0).takes(Q6K, 4096, 2048));
    assert!(MmaMode::On.select(W, 0, 0).takes(Q6K, W, 14336));
    assert!(!MmaMode::On.select(640, 0, 0).takes(Q6K, 1024, 640));
    assert!(!MmaMode::On.select(W, 0, 0).takes(Q5K, 32, W));
    assert!(!MmaMode::On.select(576, 0, 0).takes(Q4K, 32, 576));
    assert_eq!(MmaMode::Off.select(2 * W, 512, 0), MmaSel::default());
    assert_eq!(MmaMode::Auto.select(576, 0, 0), MmaSel::default());
    assert_eq!(
        mma_note(MmaMode::Auto, 576, 512, 0, false),
        format!("auto: on, every format it takes (prime chunks of 512 rows >= {R})")
    );
    assert_eq!(
        mma_note(MmaMode::Auto, W, 0, 0, true),
        format!("auto: on, Q4_K and Q6_K (n_embd {W} >= {W})")
    );
    // A wide model without a Q4_K or Q6_K matrix (a Q8_0 file): auto runs no tensor-core
    // kernel.
    assert_eq!(
        mma_note(MmaMode::Auto, W, 0, 0, false),
        format!("auto: off (n_embd {W} >= {W} turns on Q4_K and Q6_K only, and no matrix of this model takes it; prime chunks of 0 rows < {R}, rows a step 0 < {B})")
    );
    assert!(mma_note(MmaMode::Auto, 576, 16, 0, false).starts_with("auto: off (n_embd 576 <"));
    assert_eq!(mma_note(MmaMode::On, 576, 0, 0, true), "on");
}

/// The GEMM's block width along n: the prototype's 4 warps unless the grid would leave SMs
/// without a block (narrow matrices), then 2 or 1; the grid then covers every n-tile.
#[test]
fn mma_gemm_blocks_narrow_launches_finer_and_still_cover_every_column() {
    use super::engine::mma_gemm_warps_n as wn;
    // The 8B shape's matrices keep the measured tiling at 512 rows.
    assert_eq!(wn(4096 / 16, 512, 132), 4);
    assert_eq!(wn(2 * 14336 / 16, 512, 132), 4);
    // SmolLM2's o / down (576 rows: 36 m-tiles, 5 m-blocks): 5 x 8 = 40 blocks at wn 4,
    // 5 x 16 = 80 at 2, 5 x 32 = 160 at 1.
    assert_eq!(wn(36, 512, 132), 1);
    // Gemma-3's q|k|v (1536 rows: 12 m-blocks): 12 x 16 = 192 at wn 2.
    assert_eq!(wn(96, 512, 132), 2);
    // A short chunk has too few columns for any tiling to fill the SMs: 1.
    assert_eq!(wn(36, 40, 132), 1);
    for (n_mt, rows) in [(36, 512), (96, 512), (256, 512), (36, 40), (4000, 9)] {
        let w = wn(n_mt, rows, 132);
        // blocks along n times n-tiles per block (w warps x 2 tiles of 8) cover every column.
        assert!(rows.div_ceil(16 * w) * 16 * w >= rows);
        assert!([1, 2, 4].contains(&w));
        // The narrow kernel (a block an n-tile of 8) takes exactly the one-warp launches.
        assert_eq!(super::engine::mma_gemm_narrow(n_mt, rows, 132), w == 1);
    }
    // SmolLM2's o / down at 512 rows and a short chunk of the 8B shape take it; the 8B shape's
    // 512-row launches and Gemma-3's q|k|v (two warps along n) do not.
    assert!(super::engine::mma_gemm_narrow(36, 512, 132));
    assert!(super::engine::mma_gemm_narrow(256, 37, 132));
    assert!(!super::engine::mma_gemm_narrow(256, 512, 132));
    assert!(!super::engine::mma_gemm_narrow(96, 512, 132));
}

#[test]
fn the_post_norm_add_folds_only_into_one_row_vectorized_staged_launches() {
    use GgmlType::{Q4K, Q5_0, Q6K, Q8_0};
    let stage_max = 64 * 1024;
    let packed = |ty| ((ty, true), false);
    // gemma3 at 640 wide: q|k|v of mixed formats (one vectorized launch each) and gate|up of
    // one format, one row: folded.
    let qkv = [packed(Q4K), packed(Q4K), packed(Q8_0)];
    assert!(pre_fuses(qkv.iter().copied(), 1, 640, false, stage_max));
    assert!(pre_fuses(
        [packed(Q5_0), packed(Q5_0)].into_iter(),
        1,
        640,
        true,
        stage_max
    ));
    // Two rows or more: add_residual first (the prologue folds it for one row only).
    for rows in [2, 3, 8, 512] {
        assert!(!pre_fuses(qkv.iter().copied(), rows, 640, false, stage_max));
    }
    // A matrix on the tensor cores, or byte-wise (not packed): add_residual first.
    assert!(!pre_fuses(
        [((Q4K, true), true), packed(Q4K)].into_iter(),
        1,
        640,
        false,
        stage_max
    ));
    assert!(!pre_fuses(
        [((Q4K, false), false)].into_iter(),
        1,
        640,
        false,
        stage_max
    ));
    // gate|up of two formats runs the byte-wise generic kernel.
    assert!(!pre_fuses(
        [packed(Q4K), packed(Q6K)].into_iter(),
        1,
        640,
        true,
        stage_max
    ));
    // Rows wider than MVQ_PRE_MAX, or a tile that would not stage: add_residual first.
    assert!(pre_fuses(
        qkv.iter().copied(),
        1,
        MVQ_PRE_MAX,
        false,
        stage_max
    ));
    assert!(!pre_fuses(
        qkv.iter().copied(),
        1,
        MVQ_PRE_MAX + 32,
        false,
        stage_max
    ));
    assert!(!pre_fuses(
        qkv.iter().copied(),
        1,
        2048,
        false,
        4 * 2048 - 4
    ));
    assert!(!pre_fuses([].into_iter(), 1, 640, false, stage_max));
}

#[test]
fn a_model_the_kernels_cannot_walk_is_refused_naming_its_width() {
    // The CUDA shape sweep (seed 7) found models of heads x head_dim 16, 48, 144 and 432
    // refused only at the reference's first step; cuda_can_run refuses them when a stage's
    // engine is built, naming the width, and lets every real shape through.
    let spec = crate::model::synth::builtin_spec();
    let f = crate::gguf::GgufFile::parse(crate::model::synth::synth_gguf(&spec).unwrap()).unwrap();
    let base = crate::model::Model::load(&f).unwrap().cfg;
    assert_eq!(cuda_can_run(&base), Ok(()));
    let with = |heads: usize, hd: usize, embd: usize, ff: usize| {
        let mut c = base.clone();
        (c.n_heads, c.n_kv_heads, c.head_dim, c.n_embd, c.n_ff) = (heads, 1, hd, embd, ff);
        cuda_can_run(&c)
    };
    // SmolLM2 (9 x 64, 576, 1536), Gemma-3-270M (4 x 256, 640, 2048), the 8B (32 x 128).
    for (h, hd, e, ff) in [
        (9, 64, 576, 1536),
        (4, 256, 640, 2048),
        (32, 128, 4096, 14336),
    ] {
        assert_eq!(with(h, hd, e, ff), Ok(()), "{h} x {hd}");
    }
    for (h, hd, want) in [
        (1, 16, "= 16 "),
        (1, 48, "= 48 "),
        (9, 16, "= 144 "),
        (9, 48, "= 432 "),
    ] {
        let e = with(h, hd, 64, 64).unwrap_err();
        assert!(e.contains("n_heads x head_dim") && e.contains(want), "{e}");
    }
    let e = with(2, 32, 80, 64).unwrap_err();
    assert!(e.contains("n_embd = 80 "), "{e}");
    let e = with(2, 32, 64, 100).unwrap_err();
    assert!(e.contains("n_ff = 100 "), "{e}");
    let e = with(1, 1024, 1024, 64).unwrap_err();
    assert!(e.contains("head_dim 1024"), "{e}");
    let e = with(2, 33, 64, 64).unwrap_err();
    assert!(e.contains("head_dim 33"), "{e}");
}
