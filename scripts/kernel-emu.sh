#!/usr/bin/env bash
# The kernel emulator: runs the engine's tensor-core kernels (src/backend/cuda/kernels/mma.cu,
# with common.cu, ffn.cu, matvec.cu) on the CPU, without a GPU, and proves that every kernel
# the host may pick for a launch (mma_prep then the 8- and 16-warp decode, the fused decode,
# the GEMM at each warps-along-n) gives every output the bits of the one-row decode of its
# column alone, for all six formats, the three modes, q|k|v launches, partial super-blocks
# and ragged tiles; that the planted --fault mma-row-order changes the GEMM's bits (the check
# can fail); and that the Q4_K decode equals a double-precision matvec of the weights read
# back from the repacked layout (the emulated mma means what the kernels assume).
# What it cannot prove (tests/kernel-emu/emu.h says why): the tensor cores' own rounding,
# timing and memory ordering; the GPU scripts (scripts/gpu-validate.sh) show those.
# Usage: scripts/kernel-emu.sh [--quick]   (needs g++ 12+; exit 0 when every check held)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${KERNEL_EMU_BIN:-target/kernel-emu/mma_emu}"
mkdir -p "$(dirname "$out")"
# -ffp-contract=off: every f32 + and * rounds once, as the engine's NVRTC options (--fmad=false).
${CXX:-g++} -std=c++20 -O2 -ffp-contract=off -DPPN_EMU -include tests/kernel-emu/emu.h \
    -Wno-unknown-pragmas -o "$out" tests/kernel-emu/mma_emu.cpp
"$out" "$@"
