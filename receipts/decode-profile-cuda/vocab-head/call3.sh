#!/usr/bin/env bash
# Issue 30, step 18, call 3 (one H200, the machine still warm after call2.sh, so llama.cpp's
# build that call2.sh started had finished): N5 beside llama.cpp on the Gemma-3 270M Q4_K_M
# mix twin and the SmolLM2 shape (eager, B=8: bench/), then PPN_CUDA_PROF per op of M and N5
# on both gemma3 files (prof.txt: the head's launch time; on gemq4km the Q6_K v launches share
# the head's label, BENCH.md step 13).
# Run: OUT=DIR bash receipts/decode-profile-cuda/vocab-head/call3.sh  (after call2.sh)
set -u
OUT=${OUT:?}
B=.stage/bin
mkdir -p "$OUT/bench"
ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log DEADLINE_S=380 \
  scripts/bench-vs-llamacpp.sh $B/ppn-gate-n5 .stage/llama.cpp.tgz "$OUT/bench" > "$OUT/bench/bench.out" 2>&1
rm -f "$OUT/bench/raw.tar.gz"
for n in m n5; do
  for m in gem gemq4km; do
    echo "=== $n $m: PPN_CUDA_PROF=1 bench --arms pipelined --steps 64"
    PPN_CUDA_PROF=1 $B/ppn-gate-$n bench --backend cuda --model /tmp/ab/$m.gguf --arms pipelined --steps 64 2>&1 \
      | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -8
  done
done > "$OUT/prof.txt" 2>&1
