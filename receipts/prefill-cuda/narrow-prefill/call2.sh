#!/usr/bin/env bash
# Issue 30 step 35 (BENCH.md), call 2 on one GPU: the store pass's head-wide blocks alone,
# against main, and where a narrow prefill layer goes.
#   O = main (3cc4467), N = O + the store pass change (call 1's GEMM split taken out).
# Proves, with scripts/decode-ab.sh:
#  - the same bits: every arm and serve at N = 2 on the SmolLM2 and Qwen3-0.6B shapes (64- and
#    128-wide heads, Qwen3's head norms), and the prime arm at chunks 512 and 37 on the SmolLM2
#    and Gemma-3 shapes (same.txt);
#  - prefill512 tok/s, the builds alternating, three rounds (prefill.txt);
# and with scripts/prefill-ncu.sh (O, clocks as they run), one SmolLM2 layer's ten prefill
# launches: duration, occupancy, waves, throughputs, warp states (ncu/).
# It starts llama.cpp's build in the background for call 3 (the table beside llama.cpp).
set -u
OUT=${OUT:?}
B=.stage/bin
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
SAME="smol:auto q3:on" SPEED= PREFILL="smol gem" ROUNDS=3 OUT=$OUT \
  timeout 300 scripts/decode-ab.sh O=$B/O N=$B/N
SHAPE=smol KERNELS="mma_gemm|mma_prep|attention" COUNT=10 SKIP=20 CLOCKS=none OUT=$OUT/ncu \
  timeout 200 scripts/prefill-ncu.sh O=$B/O > "$OUT/ncu-summary.txt" 2>&1
tail -2 /tmp/lc.log > "$OUT/llama-build-tail.txt"
