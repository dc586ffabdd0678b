#!/usr/bin/env bash
# Session 5, streak 2: issue 13's prefill bench (the prime arm at C = 64, 128, 512, one stage
# and N = 2 on one GPU and over two) on the real models, and where a prefill512 chunk's time
# goes under auto (PPN_CUDA_PROF=1: an event around every launch, graphs off) on the real
# models and the 8B shape.
set -u
OUT=$1; mkdir -p $OUT; B=$(cat /tmp/bin/CHOICE); S=$OUT/summary.txt
SM=models/SmolLM2-135M-Instruct.Q4_1.gguf; GM=models/gemma-3-270m-q4_k_m.gguf
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf
for f in smol:$SM gemma:$GM; do
  for pl in "1|0" "2|0,0" "2|0,1"; do
    timeout 90 $B bench --backend cuda --model ${f#*:} --stages ${pl%%|*} --devices ${pl#*|} --arms prime --chunk 64,128,512 --prompt-len 512 --steps 4 > $OUT/bx-${f%%:*}-${pl#*|}.txt 2>&1
    echo "== ${f%%:*} stages ${pl%%|*} devices ${pl#*|} exit $?" >> $S
    grep -E '^  (prime|prefill) ' $OUT/bx-${f%%:*}-${pl#*|}.txt >> $S
  done
done
for f in smol:$SM gemma:$GM l8:$L8; do
  PPN_CUDA_PROF=1 timeout 90 $B bench --backend cuda --model ${f#*:} --stages 1 --arms prime --chunk 512 --prompt-len 512 --steps 2 --repeat 1 > $OUT/prof-${f%%:*}.txt 2>&1
  echo "== prof ${f%%:*} prefill512 exit $?" >> $S; grep -E "cuda prof stage" $OUT/prof-${f%%:*}.txt | tail -12 >> $S
done
tar czf $OUT/bx.tgz -C $OUT $(cd $OUT && ls bx-*.txt prof-*.txt) && rm -f $OUT/bx-*.txt $OUT/prof-*.txt
cat $S
