#!/usr/bin/env bash
# Issue 30, step 14, call 2 of 2 on one H200 (call 1's `diff` lines all read `different`: its
# receipts differ in placement.resident, the new build's scratch (x2), and the call kept only
# the first line of each diff). Proves, for the new build (N, 797ce72) against O (9917b9f):
#  1. the same bits: scripts/decode-ab.sh's same-bits part (now `diff --ignore
#     placement.resident`, the first lines of each diff kept) on gemq4km and gem under --mma
#     auto, gemq4km under --mma on, smol; prime at chunks 512 and 37 on gem; N's --graphs off
#     and --pdl off against O's default; the 1152- and 2560-wide gemma3 files (same.txt);
#  2. every arm PASS at N = 1 and 3 on gem and gemq4km with prompts, chunks, seeds, splits
#     and drafts no other check uses (gates.txt);
#  3. N beside llama.cpp, built in this call from the anchors tarball, on the Gemma-3 270M
#     Q4_K_M mix twin and the SmolLM2 shape (scripts/bench-vs-llamacpp.sh: eager, B=8,
#     prefill512) in bench/.
# From the repository root, with .stage/ carried: OUT=DIR bash THIS
set -u
O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
SAME="gemq4km:auto gem:auto gemq4km:on smol:auto" SPEED= PREFILL=gem ROUNDS=0 \
  scripts/decode-ab.sh O=$O N=$N > /tmp/ab.log 2>&1
echo "decode-ab exit $?"
G="--backend cuda --model /tmp/ab/gem.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
$O $G --receipt /tmp/ab/o.json > /dev/null 2>&1
for f in "--graphs off" "--pdl off"; do
  $N $G $f --receipt /tmp/ab/n.json > /tmp/ab/n.txt 2>&1; e=$?
  echo "gem N $f against O: exit $e; $($N diff --ignore placement.resident --ignore backend.graphs --ignore backend.pdl /tmp/ab/o.json /tmp/ab/n.json 2>&1 | head -4)" >> $OUT/same.txt
done
$N synth --arch gemma3 --layers 4 --embd 1152 --heads 4 --kv-heads 1 --head-dim 256 --ff 6912 --vocab 8192 --sliding-window 64 --quant q8_0 -o /tmp/ab/g1152.gguf > /dev/null
$N synth --arch gemma3 --layers 4 --embd 2560 --heads 8 --kv-heads 4 --head-dim 256 --ff 10240 --vocab 8192 --sliding-window 64 --quant q4_k -o /tmp/ab/g2560.gguf > /dev/null
for m in g1152 g2560; do
  W="--backend cuda --model /tmp/ab/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $W --receipt /tmp/ab/o.json > /dev/null 2>&1; a=$?
  $N $W --receipt /tmp/ab/n.json > /dev/null 2>&1; b=$?
  echo "$m: exit O $a N $b; $($N diff --ignore placement.resident /tmp/ab/o.json /tmp/ab/n.json 2>&1 | head -4)" >> $OUT/same.txt
done
cat $OUT/same.txt
: > $OUT/gates.txt
for m in gem gemq4km; do
  for g in "--stages 1 --prompt-len 333 --chunk 100 --gen-len 12" \
           "--stages 3 --prompt-len 90 --chunk 37,5 --gen-len 20 --seed 77" \
           "--stages 3 --splits 1,2 --prompt-len 41 --chunk 41 --gen-len 9 --draft 6 --seed 5"; do
    $N --backend cuda --model /tmp/ab/$m.gguf $g --arms eager,pipelined,batched,prime,verify -q \
      > /tmp/ab/g.txt 2>&1
    echo "$m $g: exit $? $(grep -cE 'PASS' /tmp/ab/g.txt) PASS lines, $(grep -cE 'FAIL' /tmp/ab/g.txt) FAIL" >> $OUT/gates.txt
  done
done
cat $OUT/gates.txt
rm -f /tmp/ab/*.gguf
ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" PREFILL_ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" SERVE_ROWS= RECEIPTS= \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log \
  DEADLINE_S=300 scripts/bench-vs-llamacpp.sh $N .stage/llama.cpp.tgz $OUT/bench > /tmp/bench.out 2>&1
echo "bench exit $?"; rm -f $OUT/bench/raw.tar.gz; tail -14 /tmp/bench.out
