#!/usr/bin/env bash
# The tensor-core Q4_K prototype (research/mma-q4k) on the GPU machine: bitwise batch
# invariance (decode B = 1..8, GEMM C = 16/64/512, every variant against the 1-column run),
# accuracy against float64, decode GB/s and C=512 GEMM TFLOP/s on the 8B shapes.
# Usage: scripts/gpu-mma.sh OUT     (no binary, no model: CuPy + numpy; about a minute)
# Writes OUT/mma-q4k.json, OUT/mma-q4k.txt and OUT/log.txt; exit 1 when a check fails.
set -u
OUT=${1:?usage: scripts/gpu-mma.sh OUT}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >"$OUT/log.txt" 2>&1
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" >>"$OUT/log.txt" 2>&1
timeout 300 python3 research/mma-q4k/bench.py "$OUT" 2>&1 | tee -a "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
