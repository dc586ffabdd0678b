//! The tensor-core (MMA) path's policy and kernel set: which matrices take it (`--mma`:
//! `MmaMode`, resolved per model and run into `MmaSel`), the formats and kernels of the mma
//! module (kernels/mma.cu) and how a kernel is found in it, and the module's build on a
//! device with its fused decode's shared memory budget. Laws it serves: the choice is a
//! function of the model and the run's flags alone (never of timing or the batch), so every
//! engine of a gate (reference, arms, stages, processes) takes the same kernels; every
//! kernel of a format computes THE ORDER of kernels/mma.cu, so which one a launch takes
//! changes no bit (the launch geometry: engine/mma.rs); a device without f16 mma.sync is an
//! error naming it, never a fallback.

use cudarc::driver::CudaFunction;

use super::nvrtc::{compile_and_load_for, load_kernel, module_source};
use super::{op_err, DevCtx};
use crate::backend::BResult;
use crate::quant::repack::MMA_BLOCK;
use crate::quant::GgmlType;

/// `--mma auto` turns the tensor-core path on for the Q4_K and Q6_K matrices (the integer
/// route) of models at least this wide. Why 4096: the widths it was measured on against the
/// FFMA kernels (llama8b- and llama70b-shaped Q4_K files, one H200, 2026-11-30: B=8 2.2-2.8x
/// and prefill512 4x the FFMA kernels, eager 7-10 % slower, each at or above llama.cpp).
/// Q6_K joined Q4_K when it took the integer route (its one-row decode one mma a 32-k chunk,
/// as Q4_K's a sub-block), for a Q4_K_M file's ffn_down, v and vocabulary head. Measured on
/// one H200 (2026-12-05, the same call, receipts/decode-profile-cuda/int-mma/speed.txt): the
/// full-depth 8B Q4_K_M file's eager 400.2 tok/s with Q6_K on FFMA, 469.1 with it here
/// (+17 %), B=8 2432 -> 2600 (BENCH.md issue 30 steps 30 and 31). The narrow models (SmolLM2's
/// 576, Gemma-3's 640) are latency-bound at decode, where mma's extra prep launch per op costs
/// most (measured on their shapes: eager 25 % / 15 % slower), so decode-only runs keep the
/// FFMA kernels there.
pub const MMA_AUTO_MIN_EMBD: usize = 4096;
/// `--mma auto` turns the tensor-core path on for every format it takes when the run primes
/// chunks of at least this many rows (the prime arm's largest `--chunk`), whatever the
/// width: a GEMM's rows share each weight tile, where the FFMA kernels reread it every 8
/// rows. Measured on one H200 (2026-11-30, receipts/mma-tensor-cores): prefill512 on the SmolLM2
/// shape 36.1k -> 56.5k tok/s, on the Gemma-3 shape (Q5_0) 46.4k -> 97.0k, at the eager cost
/// above. 64: a chunk that size already spends most of its time in the matvec GEMMs.
pub const MMA_AUTO_MIN_ROWS: usize = 64;
/// `--mma auto` turns the tensor-core path on for every format it takes, at any width, when
/// the run's batched arm decodes at least this many rows a step (`--batch`), or its serve arm
/// may carry at least this many (`--max-rows`, default 8). Measured on one
/// H200: on the 8B shape (2026-12-01, commit 130b0d2, receipts/decode-profile-cuda/mma-batch/)
/// `--mma on` against auto's FFMA gave the Q8_0 slice B=8 4006 -> 7593 tok/s (+90 %), eager
/// 1218 -> 1163 (-4.5 %), the full-depth Q4_K_M file (its Q6_K matrices) B=8 1854 -> 2313
/// (+25 %), eager 319 -> 313 (-2 %); on the narrow shapes (2026-12-03,
/// receipts/decode-profile-cuda/vocab-head/prof-mma.txt) B=8 +39 % to +61 % (SmolLM2's 6674
/// -> 9641, Gemma-3's Q5_0 6959 -> 10235, its Q4_K_M mix 5449 -> 8783) at an eager cost of
/// 7 % to 23 % in the same run. So a run that decodes 8 rows a step takes the kernels its
/// batched rows are fastest on, and a decode-only run (no batched arm, or fewer rows) keeps
/// the FFMA kernels where the narrow models' one row is fastest: each a function of the
/// flags, the same for every engine of the run (BENCH.md, issue 30 step 20). The serve arm at
/// `--max-rows 8` on the same narrow shapes (one H200, 2026-12-03,
/// receipts/serve-cuda/narrow-mma/): generated tok/s +32 % (SmolLM2 4470 -> 5911), +35 %
/// (Gemma-3's Q5_0 4573 -> 6156), +42 % (its Q4_K_M mix 3726 -> 5287) on the tensor cores.
pub const MMA_AUTO_MIN_BATCH: usize = 8;

/// `--mma`: which matrices take the tensor-core kernels (see `CudaBackend::with_mma`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaMode {
    Off,
    On,
    /// Q4_K for models at least `MMA_AUTO_MIN_EMBD` wide; every format the path takes when
    /// the run primes chunks of at least `MMA_AUTO_MIN_ROWS` rows, or when its batched arm
    /// decodes (or its serve arm carries) at least `MMA_AUTO_MIN_BATCH` rows a step (any
    /// width).
    Auto,
}

impl MmaMode {
    /// The formats engines of a model `n_embd` wide take the tensor-core kernels for, in a
    /// run whose largest prime chunk is `prime_rows` (0: no prime arm). A function of the
    /// model and the run's flags alone, so every engine of a gate (reference, arms, stages,
    /// processes) takes the same kernels.
    /// `batch_rows`: the most rows a step of the run's batched or serve arm carries (0:
    /// neither; `gate::plan::batch_rows`),
    /// from the run's flags too.
    pub fn select(self, n_embd: usize, prime_rows: usize, batch_rows: usize) -> MmaSel {
        match self {
            MmaMode::Off => MmaSel::default(),
            MmaMode::On => MmaSel {
                ints: true,
                b32: true,
            },
            MmaMode::Auto => {
                let chunks = prime_rows >= MMA_AUTO_MIN_ROWS;
                let wide = n_embd >= MMA_AUTO_MIN_EMBD;
                let batch = batch_rows >= MMA_AUTO_MIN_BATCH;
                MmaSel {
                    ints: chunks || wide || batch,
                    b32: chunks || batch,
                }
            }
        }
    }
}

/// Which matrices an engine uploads in a tensor-core layout (`MmaMode::select`): a function
/// of the model and the setting alone, the same for every engine of a gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MmaSel {
    /// Q4_K and Q6_K matrices of whole super-blocks (the integer route, `mma_ints`).
    pub ints: bool,
    /// Q8_0, Q4_0, Q4_1, Q5_0 (repack::mma_b32) and Q6_K matrices.
    pub b32: bool,
}

impl MmaSel {
    /// Whether a matrix of `ty`, `rows` x `cols` takes the tensor-core layout and kernels.
    pub fn takes(self, ty: GgmlType, rows: usize, cols: usize) -> bool {
        let on = if mma_ints(ty) { self.ints } else { self.b32 };
        on && crate::quant::repack::mma_ok(ty, rows, cols)
    }
}

/// `--mma` as receipts record it (`CudaBackend::mma_note`): on, off, or auto with what it
/// chose and why. `ints_taken`: whether any matrix of the model takes the integer route
/// (Q4_K, Q6_K) under that choice (auto's width rule turns on those only: a model without
/// such a matrix that takes it, a Q8_0 file, runs no tensor-core kernel, and the note says
/// so).
/// `batch_rows` as `MmaMode::select`'s.
pub fn mma_note(
    mode: MmaMode,
    n_embd: usize,
    prime_rows: usize,
    batch_rows: usize,
    ints_taken: bool,
) -> String {
    let sel = mode.select(n_embd, prime_rows, batch_rows);
    match mode {
        MmaMode::On => "on".into(),
        MmaMode::Off => "off".into(),
        // Auto: what `select` chose (b32 by the prime or the batch rule), with the numbers
        // it read.
        MmaMode::Auto if sel.b32 && prime_rows >= MMA_AUTO_MIN_ROWS => format!(
            "auto: on, every format it takes (prime chunks of {prime_rows} rows >= {MMA_AUTO_MIN_ROWS})"
        ),
        MmaMode::Auto if sel.b32 => format!(
            "auto: on, every format it takes (rows a step {batch_rows} >= {MMA_AUTO_MIN_BATCH})"
        ),
        MmaMode::Auto if sel.ints && ints_taken => {
            format!("auto: on, Q4_K and Q6_K (n_embd {n_embd} >= {MMA_AUTO_MIN_EMBD})")
        }
        MmaMode::Auto if sel.ints => format!(
            "auto: off (n_embd {n_embd} >= {MMA_AUTO_MIN_EMBD} turns on Q4_K and Q6_K only, and no matrix of this model takes it; prime chunks of {prime_rows} rows < {MMA_AUTO_MIN_ROWS}, rows a step {batch_rows} < {MMA_AUTO_MIN_BATCH})"
        ),
        MmaMode::Auto => format!(
            "auto: off (n_embd {n_embd} < {MMA_AUTO_MIN_EMBD}, prime chunks of {prime_rows} rows < {MMA_AUTO_MIN_ROWS}, rows a step {batch_rows} < {MMA_AUTO_MIN_BATCH})"
        ),
    }
}

/// Every format the tensor-core path takes (`--help` of `--mma` names each).
pub fn mma_format_types() -> [GgmlType; 6] {
    MMA_FORMATS.map(|(t, _)| t)
}

/// The formats of the mma module's kernel sets, in MMA_KERNELS order (kernels/mma.cu
/// MMA_KERNEL_SET: F, suffix).
pub(crate) const MMA_FORMATS: [(GgmlType, &str); 6] = [
    (GgmlType::Q4K, ""),
    (GgmlType::Q8_0, "_q8_0"),
    (GgmlType::Q4_0, "_q4_0"),
    (GgmlType::Q4_1, "_q4_1"),
    (GgmlType::Q5_0, "_q5_0"),
    (GgmlType::Q6K, "_q6_k"),
];

/// The tensor-core Q4_K module (`--mma on`, kernels/mma.cu under `#define MMA_Q4K`, with the
/// matvec sources for MvArgs and the epilogue): compiled once per device, on first need.
pub(crate) const MMA_SOURCES: [&str; 4] = ["common.cu", "ffn.cu", "matvec.cu", "mma.cu"];
/// The kernels of the mma module: mma_prep, then per MMA_FORMATS entry its decode (8 and 16
/// warps), GEMM, narrow GEMM and fused decode (8 and 16 warps; its own prep in shared memory)
/// kernels
/// (mma_kernel indexes them), then the mixed Q4_K-then-Q6_K decode (8 and 16 warps, MMA_MIX),
/// then the wgmma Q4_K GEMM's prep and GEMM (MMA_WG, sm_90a only).
pub(crate) const MMA_KERNELS: [&str; 41] = [
    "mma_prep",
    "mma_decode_k8",
    "mma_decode_k16",
    "mma_gemm",
    "mma_gemm_n",
    "mma_decode_f8",
    "mma_decode_f16",
    "mma_decode_k8_q8_0",
    "mma_decode_k16_q8_0",
    "mma_gemm_q8_0",
    "mma_gemm_n_q8_0",
    "mma_decode_f8_q8_0",
    "mma_decode_f16_q8_0",
    "mma_decode_k8_q4_0",
    "mma_decode_k16_q4_0",
    "mma_gemm_q4_0",
    "mma_gemm_n_q4_0",
    "mma_decode_f8_q4_0",
    "mma_decode_f16_q4_0",
    "mma_decode_k8_q4_1",
    "mma_decode_k16_q4_1",
    "mma_gemm_q4_1",
    "mma_gemm_n_q4_1",
    "mma_decode_f8_q4_1",
    "mma_decode_f16_q4_1",
    "mma_decode_k8_q5_0",
    "mma_decode_k16_q5_0",
    "mma_gemm_q5_0",
    "mma_gemm_n_q5_0",
    "mma_decode_f8_q5_0",
    "mma_decode_f16_q5_0",
    "mma_decode_k8_q6_k",
    "mma_decode_k16_q6_k",
    "mma_gemm_q6_k",
    "mma_gemm_n_q6_k",
    "mma_decode_f8_q6_k",
    "mma_decode_f16_q6_k",
    "mma_decode_k8_mix",
    "mma_decode_k16_mix",
    "mma_prep_xg",
    "mma_gemm_wg",
];

/// Index of mma_prep in MMA_KERNELS.
pub(super) const MMA_PREP: usize = 0;
/// Slots of a format's kernel set (mma_kernel): decode with 8 or 16 warps, GEMM, the narrow
/// GEMM (engine/mma.rs mma_gemm_narrow), then the fused decode with 8 or 16 warps (slot
/// MMA_FUSED + the unfused decode slot).
pub(super) const MMA_DECODE_K8: usize = 0;
pub(super) const MMA_DECODE_K16: usize = 1;
pub(super) const MMA_GEMM: usize = 2;
pub(super) const MMA_GEMM_N: usize = 3;
pub(super) const MMA_FUSED: usize = 4;
/// Kernels per format (kernels/mma.cu MMA_KERNEL_SET).
pub(super) const MMA_SET: usize = 6;
// mma_kernels_for drops a set's tail from MMA_FUSED on: the fused slots must be the last.
const _: () = assert!(MMA_FUSED + 2 == MMA_SET);

/// The MMA_KERNELS index of the mixed decode with 8 warps (then 16: + MMA_DECODE_K16), after
/// every format's set: one launch over Q4_K's matrices then Q6_K's (kernels/mma.cu
/// mma_decode_mix; engine/mma.rs mma_mix_split says when), module set MMA_FORMATS.len().
pub(super) const MMA_MIX: usize = 1 + MMA_SET * MMA_FORMATS.len();
/// Kernels of the mixed decode (slots MMA_DECODE_K8, MMA_DECODE_K16).
pub(super) const MMA_MIX_KERNELS: usize = 2;

/// The MMA_KERNELS index of the wgmma Q4_K GEMM's prep (kernels/mma.cu mma_prep_xg; then the
/// GEMM mma_gemm_wg at + 1), module set MMA_FORMATS.len() + 1, compiled for sm_90a
/// (`DevCtx::mma_wg`; engine/mma.rs mma_gemm_wg says which launches take it).
pub(super) const MMA_WG: usize = MMA_MIX + MMA_MIX_KERNELS;
/// Kernels of the wgmma GEMM (its prep, slot 0, and the GEMM, slot 1).
pub(super) const MMA_WG_KERNELS: usize = 2;
const _: () = assert!(MMA_WG + MMA_WG_KERNELS == MMA_KERNELS.len());

/// Warpgroups of a wgmma GEMM block (kernels/mma.cu WG_NWG: each 4 m-tiles, 64 weight rows)
/// and stages of its ring (WG_NST), given to the kernel by its module head. One warpgroup,
/// three blocks an SM (step 50): on one H100 the 8B shape's gate|up 940 -> 906 us a launch
/// and prefill512 +1.1 % against two warpgroups, two blocks an SM, every output the same bits
/// (receipts/prefill-cuda/one-warpgroup/call2). Two wgmma in flight a warpgroup (step 51):
/// gate|up 903 -> 852 us, prefill512 +4.7 % (receipts/prefill-cuda/two-in-flight/call1).
pub(crate) const MMA_WG_NWG: usize = 1;
pub(crate) const MMA_WG_NST: usize = 2;
/// The wgmma GEMM's dynamic shared memory (kernels/mma.cu WG_SMEM: 128 bytes of mbarriers,
/// then MMA_WG_NST stages of one super-block's 32-column XG tile, 804 x 32 bytes, and the
/// block's MMA_WG_MT m-tiles' 2368-byte weight blocks).
pub(crate) const MMA_WG_SMEM: usize =
    128 + MMA_WG_NST * (4 * MMA_WG_COL_WORDS * MMA_WG_BN + MMA_WG_MT * MMA_BLOCK);
/// The wgmma GEMM's prepared activations a column and super-block: XG's 804 bytes (768
/// of digits, 8 sub-block sums, 2^E), in u32 words.
pub(crate) const MMA_WG_COL_WORDS: usize = 804 / 4;
/// Columns of a wgmma GEMM block (kernels/mma.cu WG_BN) and its m-tiles (WG_MT).
pub(crate) const MMA_WG_BN: usize = 32;
pub(crate) const MMA_WG_MT: usize = 4 * MMA_WG_NWG;

/// The MMA_KERNELS index of kernel `slot` of format `ty`'s set, None for a format without one.
pub(super) fn mma_kernel(ty: GgmlType, slot: usize) -> Option<usize> {
    let f = MMA_FORMATS.iter().position(|(t, _)| *t == ty)?;
    Some(1 + MMA_SET * f + slot)
}

/// Whether a one-row launch of format `ty` may take the fused decode (the kernel that
/// prepares its row itself; engine/mma.rs mma_fused_smem has the rest of the rule): every
/// format but the integer ones (`mma_ints`: Q4_K, and since step 31 Q6_K, which shares Q4_K's
/// decode structure, measured as a whole in BENCH.md issue 30 steps 30 and 31, not fused
/// against unfused). Q4_K's unfused decode loads its first round of weights into registers
/// before `pdl_wait` (kernels/mma.cu mma_decode_body, PRE), so their DRAM trip overlaps
/// mma_prep and the launch boundary; the fused kernel holds its prep across that point and
/// cannot. Measured on one H200 (2026-12-04, the same bits; BENCH.md issue 30 step 23,
/// receipts/decode-profile-cuda/unfused-q4k/): Q4_K unfused, eager on the 8B shape's Q4_K
/// slice 1310 -> 1394-1406 tok/s (+7 %), the full-depth Q4_K_M file 313 -> 327 (+5 %), a
/// 1024-wide Qwen3-shaped Q4_K file under `--mma on` 1108 -> 1259 (+13 %), a 2048-wide one
/// 1340 -> 1422 (+6 %); every one-row launch unfused, the formats without the preload lost
/// (the narrow shapes under `--mma on`: SmolLM2's Q4_1 1424 -> 1210, -15 %; Gemma-3's Q5_0
/// -7 %; the Q8_0 Qwen shapes -3 to -6 %), so they keep the fused kernel.
pub(super) fn mma_fuses(ty: GgmlType) -> bool {
    !mma_ints(ty)
}

/// Whether matrices of `ty` take the integer route (kernels/mma.cu MmaF<F>::INTS): Q4_K and
/// Q6_K, whose launches mma_prep feeds with integer pieces of the activations (its `ints`)
/// and whose decode preloads its first weights (so never fuses, as `mma_fuses` says).
pub(in crate::backend::cuda) fn mma_ints(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4K | GgmlType::Q6K)
}

/// The MMA_KERNELS indices a device needs for matrices of `formats`: mma_prep and each
/// format's set (which kernel of a set a launch takes depends on its size), less the
/// fused decode kernels of a format that never fuses (mma_fuses); and with `wg` (a device
/// that runs the wgmma GEMM, `DevCtx::mma_wg`) and Q4_K among the formats, MMA_WG's two.
pub(super) fn mma_kernels_for(formats: &[GgmlType], wg: bool) -> Vec<usize> {
    let mut v = vec![MMA_PREP];
    for &ty in formats {
        // The fused slots are the set's last two (asserted at MMA_SET).
        let slots = if mma_fuses(ty) { MMA_SET } else { MMA_FUSED };
        v.extend((0..slots).filter_map(|slot| mma_kernel(ty, slot)));
    }
    // Both integer formats: a Q4_K_M file's q|k|v (Q4_K q and k, Q6_K v) decodes as one launch.
    if formats.contains(&GgmlType::Q4K) && formats.contains(&GgmlType::Q6K) {
        v.extend(MMA_MIX..MMA_MIX + MMA_MIX_KERNELS);
    }
    if wg && formats.contains(&GgmlType::Q4K) {
        v.extend(MMA_WG..MMA_WG + MMA_WG_KERNELS);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The `#define` head of kernel `i`'s module: kernels/mma.cu instantiates only format
/// MMA_SET's kernel MMA_SLOT (mma_prep alone for MMA_SET -1).
pub(super) fn mma_module_head(i: usize) -> String {
    if i == MMA_PREP {
        return "#define MMA_Q4K\n#define MMA_SET -1\n".to_string();
    }
    let (f, slot) = if i >= MMA_WG {
        (MMA_FORMATS.len() + 1, i - MMA_WG)
    } else if i >= MMA_MIX {
        (MMA_FORMATS.len(), i - MMA_MIX)
    } else {
        ((i - 1) / MMA_SET, (i - 1) % MMA_SET)
    };
    let wg = if i >= MMA_WG {
        format!("#define WG_NWG {MMA_WG_NWG}\n#define WG_NST {MMA_WG_NST}\n")
    } else {
        String::new()
    };
    format!("#define MMA_Q4K\n#define MMA_SET {f}\n#define MMA_SLOT {slot}\n{wg}")
}

/// The fused decode's dynamic shared memory budget: 64 KiB holds a one-row launch of up to
/// 61 super-blocks (15616 inputs: every matrix of Llama-3-8B, down-proj's 14336 included).
/// The kernels take up to 8 rows; the host fuses one (MMA_FUSE_MAX_ROWS). Beside the 16-warp
/// kernel's static 16.3 KiB that is ~82 KiB per block, under every sm_80+ opt-in limit.
pub(super) const MMA_FUSE_SMEM_MAX: usize = 64 * 1024;
/// The decode kernels' static shared memory, rounded up (ptxas sm_90: 16672 bytes for the
/// 16-warp fused kernel: red, sumsq256_rows_inv's 64 + 8 floats).
pub(super) const MMA_DECODE_STATIC_SMEM: usize = 17 * 1024;

impl DevCtx {
    /// mma.sync m16n8k16 with f16 inputs needs sm_80 or later: an older device is an error
    /// naming it, never a silent fallback.
    pub(crate) fn mma_supported(&self) -> BResult<()> {
        if self.cc.0 < 8 {
            return Err(op_err(format!(
                "device {}: --mma on needs tensor cores with f16 mma.sync (sm_80 or later), \
                 this device is sm_{}{}",
                self.dev, self.cc.0, self.cc.1
            )));
        }
        Ok(())
    }

    /// Compiles and loads kernel `i` of MMA_KERNELS as a module of its own
    /// (`mma_module_head`), for `prepare_modules`.
    pub(crate) fn build_mma_kernel(&self, i: usize) -> BResult<CudaFunction> {
        let name = MMA_KERNELS[i];
        let src = module_source(mma_module_head(i), MMA_SOURCES.iter());
        let what = format!("device {}: mma kernel {name}", self.dev);
        // The wgmma kernels are Hopper's architecture-specific code (sm_90a): built only
        // where mma_wg holds, never JIT-compiled for another device.
        let wg = i >= MMA_WG;
        if wg && !self.mma_wg() {
            return Err(op_err(format!(
                "{what}: the wgmma GEMM needs compute capability 9.0 and {MMA_WG_SMEM} bytes \
                 of shared memory a block; this device is sm_{}{} with {}",
                self.cc.0, self.cc.1, self.smem_max
            )));
        }
        let target = if wg {
            self.target().sm90a()
        } else {
            self.target()
        };
        let module = compile_and_load_for(self, target, &src, &what)?;
        // The fused decode kernels take their prepared rows in dynamic shared memory, up to
        // mma_fuse_cap bytes (engine/mma.rs mma_fused_smem); the wgmma GEMM its ring.
        let smem = if name.starts_with("mma_decode_f") {
            Some(self.mma_fuse_cap())
        } else if i == MMA_WG + 1 {
            Some(MMA_WG_SMEM)
        } else {
            None
        };
        load_kernel(&module, &what, name, smem)
    }

    /// Whether this device runs the wgmma Q4_K GEMM (MMA_WG): compute capability 9.0 exactly
    /// (sm_90a code runs on no other) with MMA_WG_SMEM bytes of shared memory a block. A
    /// function of the device alone, so every engine on it takes the same kernels; the GEMM
    /// computes THE ORDER as mma_gemm does, so whether a device takes it changes no bit.
    pub(crate) fn mma_wg(&self) -> bool {
        self.cc == (9, 0) && self.smem_max >= MMA_WG_SMEM
    }

    /// Dynamic shared memory a fused mma decode launch may take on this device: the crate's
    /// budget (MMA_FUSE_SMEM_MAX), less where the device's opt-in limit cannot hold
    /// it beside the kernel's static arrays (every sm_80+ device holds the whole budget).
    pub(crate) fn mma_fuse_cap(&self) -> usize {
        MMA_FUSE_SMEM_MAX.min(self.smem_max.saturating_sub(MMA_DECODE_STATIC_SMEM))
    }

    /// The name of kernel `i` of the mma module (`MMA_KERNELS`), as `prepare_modules` shows
    /// its builds: the kernel list is this module's, which the generic builder does not read.
    pub(crate) fn mma_kernel_name(&self, i: usize) -> &'static str {
        MMA_KERNELS.get(i).copied().unwrap_or("?")
    }

    /// Kernel `i` of the mma module (`MMA_KERNELS`); `prepare_modules` must have built it.
    pub(crate) fn mma_func(&self, i: usize) -> BResult<&CudaFunction> {
        self.mma.get(i).and_then(|k| k.get()).ok_or_else(|| {
            op_err(format!(
                "device {}: mma kernel {} was not compiled for this engine",
                self.dev,
                self.mma_kernel_name(i)
            ))
        })
    }
}
