#!/usr/bin/env bash
# Issue 30 step 36 (BENCH.md), call 4 on one GPU: the narrow GEMM kernel (2 x 1 tiles a warp,
# registers unbounded) for launches short of warps, against main with step 35.
#   S = main (0d5bbfd: step 35's store pass), G = S + the narrow GEMM (.stage/bin).
# Proves, with scripts/decode-ab.sh:
#  - the same bits: every arm and serve at N = 2 (prime chunk 64, B = 8) on the SmolLM2 and
#    Gemma-3 shapes and a 4-layer 8B Q4_K_M slice under --mma on (its chunk-64 q|k|v, o
#    and down GEMMs take the narrow kernel: Q4_K and Q6_K), and the prime arm at chunks 512
#    and 37 on the SmolLM2, Gemma-3 and 8B l8 Q4_K files (same.txt);
#  - prefill512 tok/s, the builds alternating, three rounds (prefill.txt);
#  - per launch kind on a SmolLM2 prefill (PPN_CUDA_PROF, prof.txt).
# It starts llama.cpp's build in the background for call 5 (the table beside llama.cpp).
set -u
OUT=${OUT:?}
B=.stage/bin
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
SAME="smol:auto gem:auto l4m:on" SPEED= PREFILL="smol gem l8q4k" ROUNDS=3 OUT=$OUT \
  timeout 380 scripts/decode-ab.sh S=$B/S G=$B/G
for n in S G; do
  PPN_CUDA_PROF=1 timeout 40 $B/$n bench --backend cuda --model /tmp/ab/smol.gguf --arms prime \
    --chunk 512 --prompt-len 512 2>&1 | grep -E 'mma gemm|mma prep|attention|prefill' | awk '!seen[$0]++' | sed "s/^/$n: /"
done > "$OUT/prof.txt"
tail -2 /tmp/lc.log > "$OUT/llama-build-tail.txt"
