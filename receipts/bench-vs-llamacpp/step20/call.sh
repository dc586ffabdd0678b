#!/usr/bin/env bash
# Issue 30 (one H200, after step 20): BENCH.md's first table again, every synthetic row in ONE
# call beside llama.cpp built in it (eager from a decode-only run, B=8 from a --batch 8 run,
# prefill512 on the 8B l8 Q4_K slice and the two narrow shapes), after a soak x10 of the
# Gemma mix twin at --batch 8 under --mma auto (the rule's tensor-core kernels, N = 2 on one
# GPU, jitter). Proves: what each bar of issue 30 reads on this build, one call.
# Run: OUT=DIR bash receipts/bench-vs-llamacpp/step20/call.sh  (.stage carried: bin/ppn-gate-p,
# llama.cpp.tgz)
set -u
OUT=${OUT:?}
P=.stage/bin/ppn-gate-p
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
T0=$(date +%s)
. scripts/shapes.sh
mkdir -p /tmp/nm "$OUT"
$P synth ${SHAPES[gemq4km]} -o /tmp/nm/gemq4km.gguf > /dev/null
timeout 60 $P soak --runs 10 --backend cuda --model /tmp/nm/gemq4km.gguf --stages 2 --arms batched,pipelined \
  --batch 8 --prompt-len 24 --gen-len 24 --jitter-us 20 --out /tmp/soak > /tmp/nm/soak.txt 2>&1
echo "soak exit $? at $(( $(date +%s) - T0 )) s: $(grep -m1 -o 'auto: [^"]*' /tmp/soak/run-001.json 2>/dev/null | head -1); $(tail -2 /tmp/nm/soak.txt | tr '\n' ' ')" | tee "$OUT/soak.txt"
ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k llama8b-l8-q4_k_m llama8b-l8-q8_0 llama70b-l2-q4_k llama8b-l32-q4_k_m" \
  PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k" SERVE_ROWS= RECEIPTS= ROUNDS=2 \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log DEADLINE_S=$((582 - ($(date +%s) - T0))) \
  scripts/bench-vs-llamacpp.sh $P .stage/llama.cpp.tgz "$OUT" > "$OUT/bench.out" 2>&1
echo "bench exit $?"; rm -f "$OUT/raw.tar.gz"; cat "$OUT/summary.txt"; tail -3 "$OUT/bench.out"
