#!/usr/bin/env bash
# Issue 30, step 14 (gemma3's post-norm adds folded into the next one-row matvec), call 1 of 2
# on one H200. Proves, for the new build (N, 797ce72) against the one before (O, 9917b9f):
#  1. the same bits: scripts/decode-ab.sh, every arm and serve at N = 2 `diff` O against N on
#     the Gemma-3 shapes (gemq4km: the real file's Q4_K_M mix; gem: Q5_0) under --mma auto,
#     gemq4km under --mma on (its Q4_K q|k|v and gate|up on the tensor cores: the adds run
#     apart), and smol (no post-norms: the control); prime at chunks 512 and 37 on gem
#     (same.txt); N with --graphs off and with --pdl off against O's default (same.txt);
#  2. gemma3 wider than one float4 a thread (1152 wide, Q8_0; 2560 wide, Q4_K: gemma3 1B and
#     4B widths, 4 layers): O against N the same, and every arm PASS at N = 1 and 3 (wide.txt);
#  3. eager and B=8 of both builds alternating twice on gemq4km, gem, smol and the 8B Q8_0
#     slice l2q8 (its one-row Q8_0 gate|up kernel spills 16 bytes more in N: ptxas) (speed.txt),
#     prefill512 on gem (prefill.txt), PPN_CUDA_PROF per op (prof.txt);
#  4. soak x20 of gem at N = 2 on one GPU, pipelined and eager with --jitter-us (soak.txt).
# From the repository root, with .stage/ carried: OUT=DIR bash THIS
set -u
O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate
SAME="gemq4km:auto gem:auto gemq4km:on smol:auto" SPEED="gemq4km gem smol l2q8" PREFILL=gem ROUNDS=2 PROF=1 \
  scripts/decode-ab.sh O=$O N=$N > /tmp/ab.log 2>&1
echo "decode-ab exit $?"
G="--backend cuda --model /tmp/ab/gem.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
$O $G --receipt /tmp/ab/o.json > /dev/null 2>&1
for f in "--graphs off" "--pdl off"; do
  $N $G $f --receipt /tmp/ab/n.json > /tmp/ab/n.txt 2>&1; e=$?
  echo "gem N $f against O: exit $e; $($N diff /tmp/ab/o.json /tmp/ab/n.json 2>&1 | head -1)" >> $OUT/same.txt
done
tail -2 $OUT/same.txt
: > $OUT/wide.txt
$N synth --arch gemma3 --layers 4 --embd 1152 --heads 4 --kv-heads 1 --head-dim 256 --ff 6912 --vocab 8192 --sliding-window 64 --quant q8_0 -o /tmp/ab/g1152.gguf > /dev/null
$N synth --arch gemma3 --layers 4 --embd 2560 --heads 8 --kv-heads 4 --head-dim 256 --ff 10240 --vocab 8192 --sliding-window 64 --quant q4_k -o /tmp/ab/g2560.gguf > /dev/null
for m in g1152 g2560; do
  W="--backend cuda --model /tmp/ab/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $W --receipt /tmp/ab/o.json > /dev/null 2>&1; a=$?
  $N $W --receipt /tmp/ab/n.json > /dev/null 2>&1; b=$?
  echo "$m O $a N $b: $($N diff /tmp/ab/o.json /tmp/ab/n.json 2>&1 | head -1)" >> $OUT/wide.txt
  for g in "--stages 1 --prompt-len 100 --chunk 30 --gen-len 10" "--stages 3 --prompt-len 77 --chunk 13 --gen-len 12 --seed 9"; do
    $N --backend cuda --model /tmp/ab/$m.gguf $g --arms eager,pipelined,batched,prime,verify -q > /tmp/ab/g.txt 2>&1
    echo "$m $g: exit $? $(grep -c PASS /tmp/ab/g.txt) PASS lines, $(grep -c FAIL /tmp/ab/g.txt) FAIL" >> $OUT/wide.txt
  done
done
cat $OUT/wide.txt
timeout 120 $N soak --runs 20 --backend cuda --model /tmp/ab/gem.gguf --stages 2 --arms pipelined,eager \
  --prompt-len 40 --gen-len 24 --jitter-us 20 --out /tmp/soak > $OUT/soak.txt 2>&1; echo "soak exit $?" >> $OUT/soak.txt
tail -3 $OUT/soak.txt
