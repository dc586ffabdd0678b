#!/usr/bin/env bash
# Call 1: attention_rows rewrite, A/B against main's build: bits (every arm at N=2, prime at
# chunks 512 and 37) and prefill512 speed on the SmolLM2, Gemma-3 and 8B-l8 shapes; per-op
# profile of the prefill.
set -u
B=.stage/bin
mkdir -p /tmp/ab
. scripts/shapes.sh
$B/new synth ${SHAPES[gem]} -o /tmp/ab/gem.gguf > /dev/null
OUT=$OUT SAME="smol:off gem:auto q3:off" PREFILL="smol gem l8q4k" SPEED="" ROUNDS=2 \
  timeout 420 scripts/decode-ab.sh O=$B/old N=$B/new > $OUT/ab.log 2>&1
for m in smol gem l8q4k; do for n in old new; do
  PPN_CUDA_PROF=1 timeout 40 $B/$n bench --backend cuda --model /tmp/ab/$m.gguf --arms prime --chunk 512 --prompt-len 512 2>&1 \
    | grep -E 'attention|gemm|prefill +\(' | sed "s/^/$m $n: /"
done; done > $OUT/prof.txt 2>&1
cat $OUT/same.txt; cat $OUT/prefill.txt; grep -E 'attention rows|prefill' $OUT/prof.txt
