#!/usr/bin/env bash
# The kernel emulator: runs the engine's CUDA kernels on the CPU, without a GPU
# (tests/kernel-emu/emu.h: a block's threads as fibers, warp collectives and mma.sync with
# PTX's fragment layout, f16 as _Float16; Hopper's wgmma, mbarriers and bulk copies), and
# proves what follows.
#  - mma_emu, for the tensor-core kernels (kernels/mma.cu). Every kernel the host may pick for
#    a launch gives every output the bits of the one-row decode of its column alone. The
#    picks are mma_prep then the 8- and 16-warp decode, the fused decode (every format but
#    Q4_K and Q6_K, whose fused kernels it checks all the same), the narrow GEMM, the GEMM at
#    each warps-along-n, and Q4_K's wgmma GEMM (mma_prep_xg then mma_gemm_wg, sm_90a's):
#    on every Q4_K case (rows 1 to 37) and cases of its own (blocks of 4 m-tiles, one
#    warpgroup each, and of 32 columns, last ones ragged; 10 to 12 super-blocks through its
#    2-stage ring; the three modes, q|k|v), its bulk copies landing late (when their
#    mbarrier phase completes, so a stage read before its wait shows old bytes) and early (at
#    issue, so a refill under a stage's readers overwrites it). Misusing wgmma, an mbarrier
#    or a copy, or a deadlock, stops the run (emu.h).
#    The cases span all six formats, the three modes, q|k|v launches, partial super-blocks
#    and ragged tiles; the mixed Q4_K|Q6_K decode (one launch over Q4_K's matrices then
#    Q6_K's) gives each output its format's own launch's bits. The planted --fault mma-row-order changes the GEMM's bits in both
#    forms of the prepared activations (Q4_K's and Q6_K's integer pieces, Q8_0's f16 hi and
#    lo) and the wgmma GEMM's, so the check can fail. The Q4_K and Q6_K decodes (one row,
#    three rows, the GEMM, the wgmma GEMM) equal a double-precision matvec of the weights
#    read back from the repacked layout to 1e-5, at input magnitudes 1, 1e30 and 1e-30, so
#    the emulated integer mma and wgmma mean what the kernels assume; a NaN or inf input
#    makes its row's Q4_K and Q6_K outputs non-finite (the wgmma GEMM's too; the clean row
#    keeps its bits).
#  - att_emu, for attention (kernels/attention.cu). Over the rows of one sequence, the store
#    pass then the attend pass of `attention`, `attention_early` and `attention_rows`
#    (R = 8, 4, 2) give the eager row-by-row path's output and cache bits. The cases span head
#    widths 48 to 256, GQA, windows, biases, head norms, both RoPE styles, and unions of one
#    to three of the staged score pass's 256-position passes. The racy one-launch fused pass
#    FAILs once the grid's blocks run backwards.
#  - norm_emu, for gemma3's post-norm residual add (kernels/norm.cu add_residual): the
#    block-per-row kernel gives the bits of the warp-per-row kernel it replaced, widths 32 to
#    9000, 1 to 9 rows; a reversed-order sum differs (the check can fail).
#  - mvq_emu, for the vectorized FFMA matvec (kernels/mvq.cu, the one-row decode of every
#    model the tensor cores do not take). A row's outputs are the same bits at every row
#    tile (1, 3, 8 rows), rows per warp (1, 2, 4), staged or laid out by stage_rows, and over
#    a full grid or one block. The cases span all eight vectorized formats, widths below, at
#    and past the one-trip prologue's 4096, gate|up and norms. So does the dense one-row walk
#    (mvq_d8: a warp deals 8 narrow rows' units to its 32 lanes) at widths 32 to 992, clean
#    and planted, and over three matrices in one launch (its consecutive-rows path and its
#    per-row lookup). The planted --fault row-count-order changes bits, so the check can fail.
#    And the Q8_0 walks read the layout the host writes (repack::q8_half_at's halves) to
#    within 1e-5 of a double dot of the GGUF blocks, at whole and partial rounds; the same
#    blocks laid out whole must miss it.
# Every harness runs under AddressSanitizer and UBSan: a kernel that reads or writes past a
# buffer (its own, a weight matrix, a __shared__ array) stops the run there, an access a GPU
# would make without a word; so does a vector load off its alignment (emu.h's uint4 is
# alignas(16), as CUDA's: a GPU faults on it).
# What it cannot prove (emu.h says why): the hardware's own rounding inside an mma, timing,
# and memory ordering on a GPU (the async proxy's fences included). The GPU scripts
# (scripts/gpu-validate.sh) show those.
# Usage: scripts/kernel-emu.sh [--quick]   (needs g++ 12+; exit 0 when every check held)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${KERNEL_EMU_DIR:-target/kernel-emu}"
mkdir -p "$dir"
# -ffp-contract=off: every f32 + and * rounds once, as the engine's NVRTC options (--fmad=false).
# -O1: as fast to run as -O2 here and a third quicker to build (CI time).
# AddressSanitizer and UBSan: a kernel's access past its buffer, which a GPU makes silently
# (another allocation's bytes, different from run to run), or an undefined shift or overflow
# stops the harness with the kernel's line (emu.h tells ASan of its fiber switches). Leak
# checking is off: the harnesses exit with what they allocated, and LeakSanitizer needs ptrace,
# which some containers refuse.
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
build() {
    ${CXX:-g++} -std=c++20 -O1 -ffp-contract=off -fsanitize=address,undefined -fno-sanitize-recover=all \
        -DPPN_EMU -include tests/kernel-emu/emu.h -Wno-unknown-pragmas -o "$dir/$1" "tests/kernel-emu/$1.cpp"
}
# All at once; each build's status checked (a failed build must not leave an old binary
# to run).
H=(mma_emu att_emu mvq_emu norm_emu)
declare -A pid
for h in "${H[@]}"; do rm -f "$dir/$h"; build "$h" & pid[$h]=$!; done
for h in "${H[@]}"; do wait "${pid[$h]}" || { echo "kernel-emu: building $h failed" >&2; exit 1; }; done
# Two lanes on two cores (CI's machine): mma_emu, the longest, alone; att_emu, norm_emu and
# mvq_emu one after another beside it. Each lane's lines are printed once both have ended.
( "$dir/att_emu" && "$dir/norm_emu" && "$dir/mvq_emu" ) > "$dir/lane2.log" 2>&1 & v=$!
r=0 rv=0
"$dir/mma_emu" "$@" > "$dir/mma_emu.log" 2>&1 || r=$?
wait "$v" || rv=$?
cat "$dir/lane2.log" "$dir/mma_emu.log"
[ "$r" -eq 0 ] && [ "$rv" -eq 0 ] || { echo "kernel-emu: a check failed (mma_emu exit $r; att_emu, norm_emu, mvq_emu exit $rv)" >&2; exit 1; }
