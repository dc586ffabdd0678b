//! GPU-free checks of the CUDA backend's host-side contracts: they compile and run in CI
//! (no GPU there). Kernel behaviour is checked on a GPU by scripts/gpu-check.sh, never here.

use super::engine::{fmt_of, row_pos_bytes};
use super::{CudaBackend, KERNELS, SOURCES};
use crate::quant::GgmlType;

/// Names of every `extern "C" __global__` kernel in the sources, including those that the
/// MV(...) macro instantiates.
fn kernels_in_sources() -> Vec<String> {
    let mut out = Vec::new();
    for (_, src) in SOURCES {
        for line in src.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("extern \"C\" __global__ void ") {
                if let Some(name) = rest.split('(').next() {
                    if name != "NAME" {
                        out.push(name.to_string());
                    }
                }
            }
            if let Some(rest) = l.strip_prefix("MV(") {
                out.push(rest.split(',').next().unwrap_or("").to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn kernel_table_lists_exactly_the_kernels_the_sources_define() {
    let mut listed: Vec<String> = KERNELS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(listed, kernels_in_sources());
}

#[test]
fn every_ggml_type_has_a_matvec_kernel_and_the_format_id_of_matvec_cu() {
    let matvec = SOURCES
        .iter()
        .find(|(n, _)| *n == "matvec.cu")
        .map(|(_, s)| *s)
        .expect("matvec.cu is a source");
    for ty in GgmlType::ALL {
        let (id, kernel) = fmt_of(ty);
        assert!(KERNELS.contains(&kernel), "{ty}: {kernel} not loaded");
        // The kernel's name spells the type, and its MV(...) line uses the FMT_ constant
        // whose #define carries the id the embedding kernel is given.
        assert_eq!(kernel, format!("mv_{}", ty.name()));
        let mv_line = matvec
            .lines()
            .find(|l| l.starts_with(&format!("MV({kernel},")))
            .unwrap_or_else(|| panic!("no MV line for {kernel}"));
        let fmt_const = mv_line
            .trim_end_matches(')')
            .rsplit(',')
            .next()
            .unwrap()
            .trim();
        let define = format!("#define {fmt_const} {id}");
        assert!(
            matvec.lines().any(|l| l.trim() == define),
            "{ty}: expected `{define}` in matvec.cu"
        );
    }
}

#[test]
fn row_pos_parameter_has_the_layout_of_the_cuda_struct() {
    // struct RowPos { u32 n; u32 pos[POS_ROWS]; u32 from[POS_ROWS]; } with POS_ROWS 64.
    let common = SOURCES[0].1;
    assert!(common.contains("#define POS_ROWS 64"));
    assert_eq!(row_pos_bytes(), 4 + 2 * 64 * 4);
}

#[test]
fn kernels_are_compiled_without_fma_contraction_or_flush_to_zero() {
    // The bit-for-bit agreement with the CPU's f32 order depends on these options; the
    // source of truth is `compile_options`, checked here so a change is deliberate.
    let o = super::compile_options(None);
    assert_eq!(o.fmad, Some(false));
    assert_eq!(o.ftz, Some(false));
    assert_eq!(o.prec_div, Some(true));
    assert_eq!(o.prec_sqrt, Some(true));
    assert_eq!(o.use_fast_math, Some(false));
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
