#!/usr/bin/env bash
# Issue 30 step 35 (BENCH.md), call 1 on one GPU: the prefill GEMM's super-block split for
# launches short of warps, and the store pass's head-wide blocks, against main.
#   O = main (3cc4467), N = O + gemm-split.patch + the store pass change (.stage/bin,
#   stripped release builds).
# Proves, with scripts/decode-ab.sh:
#  - the same bits: every arm and serve at N = 2 (prime chunk 64, B = 8) on the SmolLM2,
#    Gemma-3 and Qwen3-0.6B shapes and a 4-layer Q4_K_M 8B slice (`--mma on`: its chunk-64
#    GEMMs split into 4 groups), and the prime arm at chunks 512 and 37 on the SmolLM2,
#    Gemma-3 and 8B l8 Q4_K files (same.txt);
#  - prefill512 tok/s, the builds alternating, two rounds (prefill.txt);
#  - where a SmolLM2 prefill's time goes, per launch kind (PPN_CUDA_PROF, prof.txt).
# It also starts llama.cpp's build in the background for call 2 (the table beside it).
set -u
OUT=${OUT:?}
B=.stage/bin
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
SAME="smol:auto gem:auto q3:on l4m:on" SPEED= PREFILL="smol gem l8q4k" ROUNDS=2 OUT=$OUT \
  timeout 440 scripts/decode-ab.sh O=$B/O N=$B/N
for n in O N; do
  PPN_CUDA_PROF=1 timeout 40 $B/$n bench --backend cuda --model /tmp/ab/smol.gguf --arms prime \
    --chunk 512 --prompt-len 512 2>&1 | grep -E 'cuda prof stage|prefill' | awk '!seen[$0]++' | sed "s/^/$n: /"
done > "$OUT/prof.txt"
tail -3 /tmp/lc.log > "$OUT/llama-build-tail.txt"
