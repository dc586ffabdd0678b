#!/usr/bin/env bash
# Session 5, streak 2: the whole table of issue 12 and the prefill512 rows of issue 13, the
# chosen build (/tmp/bin/CHOICE) beside llama.cpp on the same files in this one call
# (scripts/bench-vs-llamacpp.sh, every row, the two-GPU pipelined row).
set -u
OUT=$1; mkdir -p $OUT models
S=$OUT/summary.txt; B=$(cat /tmp/bin/CHOICE)
echo "BIN $B $($B --version)" | tee -a $S
bash .stage/calls5/asm.sh | tee -a $S
cat /tmp/sm/synth.log | tee -a $S
T0=$(date +%s)
PREFILL_ROWS="smollm2-q4_1 gemma3-270m-q4_k_m llama8b-l8-q4_k" \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb/build.log MODELS=models COMMIT=${COMMIT:-unknown} DEADLINE_S=$(( 575 - ($(date +%s) - T0) )) \
  bash scripts/bench-vs-llamacpp.sh $B none $OUT/b > $OUT/bench-stdout.txt 2>&1
echo "bench exit $?" | tee -a $S; tail -1 /tmp/lcb/build.log | tee -a $S
cp receipts/bench/vs-llamacpp.json $OUT/ 2>/dev/null
tail -30 $OUT/b/summary.txt 2>/dev/null | tee -a $S
