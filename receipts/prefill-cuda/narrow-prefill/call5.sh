#!/usr/bin/env bash
# Issue 30 step 36 (BENCH.md), call 5 on one GPU (call 4's machine, still warm, with the
# llama.cpp build call 4 started in /tmp/lc): G (main 0d5bbfd + the narrow GEMM) beside
# llama-bench / llama-batched-bench on the same synthetic SmolLM2 and Gemma-3 (Q5_0) shapes:
# eager, B=8 and prefill512 (vs/; scripts/bench-vs-llamacpp.sh).
set -u
OUT=${OUT:?}
B=.stage/bin
tail -1 /tmp/lc.log
ROWS="smollm2-shape-q4_1 gemma3-shape-q5_0" PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q5_0" \
  SERVE_ROWS= RECEIPTS= LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log DEADLINE_S=330 \
  scripts/bench-vs-llamacpp.sh $B/G .stage/llama.cpp.tgz "$OUT/vs"
