#!/usr/bin/env bash
# Issue 30 step 50 (BENCH.md "One warpgroup a wgmma GEMM block"), call 3, right after call 2 on
# the same warm machine: L's prefill512 beside llama.cpp's pp512 on the same file (the 8B l8
# Q4_K slice), llama-bench between two of L's runs (pp512.txt), after
# scripts/bench-vs-llamacpp.sh's rows for L (bench.txt; its llama.cpp side is there only if
# llama.cpp's build, started here in the background, ends within DEADLINE_S).
#   OUT=DIR bash receipts/prefill-cuda/one-warpgroup/call3.sh      [needs .stage/llama.cpp.tgz;
#   BIN=another build instead of .stage/bin/L]
set -u
OUT=${OUT:?}
L=${BIN:-.stage/bin/L}
# Not twice (two-in-flight/call1.sh LC=1 may have started it): a second would unpack over it.
[ -f /tmp/lc.log ] || scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
ROWS="llama8b-l8-q4_k gemma3-shape-q4_k_m" PREFILL_ROWS="llama8b-l8-q4_k gemma3-shape-q4_k_m" \
  SERVE_ROWS= RECEIPTS= LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log \
  DEADLINE_S=${DEADLINE_S:-330} WORK=/tmp/bvl scripts/bench-vs-llamacpp.sh "$L" \
  .stage/llama.cpp.tgz /tmp/bvl-out > "$OUT/bench.txt" 2>&1
for i in $(seq 300); do [ -x /tmp/lc/llama.cpp/build/bin/llama-bench ] && break; sleep 1; done
F=/tmp/bvl/m/llama8b-l8-q4_k.gguf
{
  "$L" bench --backend cuda --model $F --arms prime --chunk 512 --prompt-len 512 2>&1 | grep -E 'prefill +\('
  timeout 30 /tmp/lc/llama.cpp/build/bin/llama-bench -m $F -p 512 -n 0 -ngl 99 -r 3 2>&1 | tail -4
  "$L" bench --backend cuda --model $F --arms prime --chunk 512 --prompt-len 512 2>&1 | grep -E 'prefill +\('
} > "$OUT/pp512.txt" 2>&1
cat "$OUT/pp512.txt"
