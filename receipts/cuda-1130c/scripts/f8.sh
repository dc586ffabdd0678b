#!/usr/bin/env bash
# Session 3 final, call f8: the real models from the staged parts, then ppn-gate beside
# llama.cpp on the same files (eager, B=8, prefill512) for SmolLM2, Gemma-3 and the 8B shape.
set -u
OUT=$1; mkdir -p $OUT models
S=$OUT/summary.txt; B=/tmp/bin/N
bash .stage/calls/asm.sh | tee -a $S
T0=$(date +%s)
ROWS="smollm2-q4_1 gemma3-270m-q4_k_m llama8b-l8-q4_k" PREFILL_ROWS="smollm2-q4_1 gemma3-270m-q4_k_m llama8b-l8-q4_k" \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb/build.log MODELS=models COMMIT=${COMMIT:-unknown} DEADLINE_S=$(( 540 - ($(date +%s) - T0) )) \
  bash scripts/bench-vs-llamacpp.sh $B none $OUT/b > $OUT/bench-stdout.txt 2>&1
echo "bench exit $?" | tee -a $S; tail -1 /tmp/lcb/build.log | tee -a $S
cp receipts/bench/vs-llamacpp.json $OUT/ 2>/dev/null
tail -25 $OUT/b/summary.txt 2>/dev/null | tee -a $S
