#!/usr/bin/env bash
# Session 4: the tensor-core path (X = branch mma d8870d5, --mma on) beside llama.cpp on the
# Q4_K rows, same files and machine as c3.sh; then the accuracy section of gpu-mma-engine.sh.
set -u
OUT=$1; mkdir -p $OUT; S=$OUT/summary.txt
T0=$(date +%s)
ROWS="llama8b-l8-q4_k llama70b-l2-q4_k llama8b-l8-q4_k_m llama8b-l32-q4_k_m" PREFILL_ROWS="llama8b-l8-q4_k" PIPE2=0 PPN_FLAGS="--mma on" \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin MODELS=models COMMIT=d8870d5 DEADLINE_S=300 WORK=/tmp/bench-vs-llamacpp \
  bash scripts/bench-vs-llamacpp.sh /tmp/bin/X none $OUT/b > $OUT/bench-stdout.txt 2>&1
echo "bench (--mma on) exit $?" | tee -a $S
tail -12 $OUT/b/summary.txt | tee -a $S
SECTIONS=acc timeout 120 bash .stage/calls4/scripts/gpu-mma-engine.sh /tmp/bin/X /tmp/c0/mm $OUT/mma > $OUT/mma-acc.txt 2>&1
echo "acc exit $?" | tee -a $S; tail -12 $OUT/mma-acc.txt | tee -a $S
