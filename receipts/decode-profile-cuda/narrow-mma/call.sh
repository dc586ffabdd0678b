#!/usr/bin/env bash
# Issue 30, step 20 (one H200): `--mma auto`'s batch rule at every width. O = main's build
# before it (10c170d's kernels), P = the rule's build (same kernels; a run whose batched arm
# decodes 8+ rows a step takes the tensor cores on the narrow files too). Proves, in order:
#  (a) P's auto at --batch 8 is exactly O's --mma on (every arm and serve at N = 2 `diff`
#      same but backend.mma), P's gate PASSes and its note names the rule; at --batch 7 P and O
#      are the same bits on FFMA (the rule's edge), on smol, gem and gemq4km (same.txt);
#  (b) eager-only and B=8 runs of O and P alternating once (speed.txt);
#  (c) P beside llama.cpp, built in the call, ROUNDS=3: eager from a decode-only run, B=8
#      from a --batch 8 run (bench/).
# Run: OUT=DIR bash receipts/decode-profile-cuda/narrow-mma/call.sh  (.stage carried:
# bin/ppn-gate-o, bin/ppn-gate-p, llama.cpp.tgz)
set -u
OUT=${OUT:?}
B=.stage/bin O=$B/ppn-gate-o P=$B/ppn-gate-p
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
T0=$(date +%s)
. scripts/shapes.sh
mkdir -p /tmp/nm "$OUT"
for m in smol gem gemq4km; do $P synth ${SHAPES[$m]} -o /tmp/nm/$m.gguf > /dev/null & done; wait
G="--backend cuda --stages 2 --arms eager,pipelined,batched,verify,serve --requests 12 --prompt-len 24 --gen-len 8 -q"
for m in smol gem gemq4km; do
  $P $G --model /tmp/nm/$m.gguf --batch 8 --receipt /tmp/nm/p8.json > /tmp/nm/p8.txt 2>&1; a=$?
  $O $G --model /tmp/nm/$m.gguf --batch 8 --mma on --receipt /tmp/nm/o8.json > /tmp/nm/o8.txt 2>&1; b=$?
  echo "$m B=8: P auto exit $a, O --mma on exit $b; P note: $(python3 -c "import json;print(json.load(open('/tmp/nm/p8.json'))['backend']['mma'])"); diff: $($P diff --ignore backend.mma --ignore placement.resident /tmp/nm/o8.json /tmp/nm/p8.json 2>&1 | head -3 | tr '\n' ' ')"
  $P $G --model /tmp/nm/$m.gguf --batch 7 --receipt /tmp/nm/p7.json > /dev/null 2>&1; a=$?
  $O $G --model /tmp/nm/$m.gguf --batch 7 --receipt /tmp/nm/o7.json > /dev/null 2>&1; b=$?
  echo "$m B=7: P exit $a, O exit $b; diff: $($P diff --ignore placement.resident /tmp/nm/o7.json /tmp/nm/p7.json 2>&1 | head -3 | tr '\n' ' ')"
done | tee "$OUT/same.txt"
for m in smol gem gemq4km; do
  for n in O P; do
    eval b=\$$n
    $b bench --backend cuda --model /tmp/nm/$m.gguf --arms eager --steps 128 2>&1 | grep -E "eager +\(" | sed "s/^/$m $n decode-only: /"
    $b bench --backend cuda --model /tmp/nm/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(" | sed "s/^/$m $n --batch 8: /"
  done
done | tee "$OUT/speed.txt"
echo "checks done at $(( $(date +%s) - T0 )) s"
mkdir -p "$OUT/bench"
ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1 llama8b-l8-q8_0" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= ROUNDS=3 \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log DEADLINE_S=$((585 - ($(date +%s) - T0))) \
  scripts/bench-vs-llamacpp.sh $P .stage/llama.cpp.tgz "$OUT/bench" > "$OUT/bench/bench.out" 2>&1
echo "bench exit $?"; rm -f "$OUT/bench/raw.tar.gz"; cat "$OUT/bench/summary.txt"; tail -3 "$OUT/bench/bench.out"
