#!/usr/bin/env bash
# Issue 30 step 35 (BENCH.md), call 3 on one GPU (the machine of call 2, still warm, with
# llama.cpp's build that call 2 started in /tmp/lc): where a SmolLM2 prefill layer goes, and
# the narrow rows beside llama.cpp with the store pass change.
#   O = main (3cc4467), N = O + the store pass change (.stage/bin, as call 2).
# Proves:
#  - ncu/ncu-O.txt, ncu-summary.txt: one SmolLM2-shape layer's ten launches of a 512-row prime
#    chunk (prep and GEMM of q|k|v, the store pass, attention_rows, prep and GEMM of o, gate|up
#    and down) after two layers', on O, clocks as they run: duration, grid, registers,
#    occupancy, issue slots, L1/L2/DRAM throughput (scripts/prefill-ncu.sh);
#  - vs/: eager, B=8 and prefill512 of N beside llama-bench / llama-batched-bench on the same
#    synthetic SmolLM2 and Gemma-3 (Q5_0) shapes (scripts/bench-vs-llamacpp.sh).
set -u
OUT=${OUT:?}
B=.stage/bin
SHAPE=smol KERNELS="mma_gemm|mma_prep|attention_rows|^attention$" COUNT=10 SKIP=20 CLOCKS=none \
  OUT=$OUT/ncu timeout 150 scripts/prefill-ncu.sh O=$B/O > "$OUT/ncu-summary.txt" 2>&1
tail -2 /tmp/lc.log
ROWS="smollm2-shape-q4_1 gemma3-shape-q5_0" PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q5_0" \
  SERVE_ROWS= RECEIPTS= LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log DEADLINE_S=380 \
  scripts/bench-vs-llamacpp.sh $B/N .stage/llama.cpp.tgz "$OUT/vs"
