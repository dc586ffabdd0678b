#!/usr/bin/env bash
# Issue 30, step 13, call 2 on one H200: the kept rule (the dense walk only for one-row
# launches of rows of at most 24 units whose groups fill the GPU: the vocabulary heads).
# Proves, for the new build (N) against the one before (O, 26ea8e7):
#  1. the same bits: scripts/decode-ab.sh, every arm and serve at N = 2 `diff` same on the
#     narrow shapes (scripts/shapes.sh gemq4km, gem, smol; qw05, 896 wide, which the rule
#     leaves on the plain walk) (same.txt); eager and B=8 of both builds alternating twice
#     (speed.txt); PPN_CUDA_PROF per op (prof.txt);
#  2. every arm PASS at N = 1 and 3 on gem and smol with prompts, chunks and tapes no other
#     check uses (gates.txt);
#  3. the new build beside llama.cpp, built in this call, on the Gemma-3 Q4_K_M mix and SmolLM2
#     shapes (scripts/bench-vs-llamacpp.sh: eager, B=8, prefill512) in bench/.
# From the repository root, with .stage/ carried: OUT=DIR bash THIS
set -u
O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
SAME="gemq4km:auto gem:auto smol:auto qw05:auto" SPEED="gemq4km gem smol qw05" ROUNDS=2 PROF=1 \
  scripts/decode-ab.sh O=$O N=$N > /tmp/ab.log 2>&1
echo "decode-ab exit $?"
: > $OUT/gates.txt
for m in gem smol; do
  for g in "--stages 1 --prompt-len 333 --chunk 100 --gen-len 12" \
           "--stages 3 --prompt-len 90 --chunk 37,5 --gen-len 20 --seed 77" \
           "--stages 3 --splits 1,2 --prompt-len 41 --chunk 41 --gen-len 9 --draft 6 --seed 5"; do
    $N --backend cuda --model /tmp/ab/$m.gguf $g --arms eager,pipelined,batched,prime,verify -q \
      --receipt /tmp/ab/g.json > /tmp/ab/g.txt 2>&1
    echo "$m $g: exit $? $(grep -cE 'PASS' /tmp/ab/g.txt) PASS lines, $(grep -cE 'FAIL' /tmp/ab/g.txt) FAIL" >> $OUT/gates.txt
  done
done
cat $OUT/gates.txt
rm -f /tmp/ab/*.gguf
ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" PREFILL_ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" SERVE_ROWS= RECEIPTS= \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log \
  DEADLINE_S=330 scripts/bench-vs-llamacpp.sh $N .stage/llama.cpp.tgz $OUT/bench > /tmp/bench.out 2>&1
echo "bench exit $?"; rm -f $OUT/bench/raw.tar.gz; tail -14 /tmp/bench.out
