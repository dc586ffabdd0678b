#!/usr/bin/env bash
# Call 2: attention_rows heaviest-first + R by grid + store pass over kv heads (new2) against
# main (old) and call 1's build (new1): bits, prefill512 speeds, per-op profile, gates at N=1/3
# with odd prompt lengths and chunks, windows past 512.
set -u
B=.stage/bin
mkdir -p /tmp/ab
. scripts/shapes.sh
$B/new2 synth ${SHAPES[gem]} -o /tmp/ab/gem.gguf > /dev/null
OUT=$OUT SAME="smol:off gem:auto q3:off" PREFILL="smol gem l8q4k" SPEED="" ROUNDS=1 \
  timeout 300 scripts/decode-ab.sh O=$B/old N=$B/new2 > $OUT/ab.log 2>&1
for m in smol gem l8q4k; do for n in new1 new2 old new2; do
  timeout 30 $B/$n bench --backend cuda --model /tmp/ab/$m.gguf --arms prime --chunk 512 --prompt-len 512 2>&1 \
    | grep -E 'prefill +\(' | sed "s/^/$m $n: /"
done; done >> $OUT/prefill.txt 2>&1
for m in smol gem; do
  PPN_CUDA_PROF=1 timeout 30 $B/new2 bench --backend cuda --model /tmp/ab/$m.gguf --arms prime --chunk 512 --prompt-len 512 2>&1 \
    | grep -E 'attention|gemm|prep' | sed "s/^/$m new2: /"
done > $OUT/prof.txt 2>&1
g() { timeout 60 $B/new2 --backend cuda --model /tmp/ab/$1.gguf --stages $2 --arms eager,pipelined,batched,prime,verify --batch 8 --chunk $3 --prompt-len $4 --gen-len 8 -q > /tmp/ab/g.txt 2>&1; echo "$1 N=$2 chunk $3 prompt $4: exit $? $(tail -1 /tmp/ab/g.txt)"; }
{ g smol 1 100 333; g gem 3 300 700; g q3 3 512 1000; g smol 3 37 90; } > $OUT/gates.txt
cat $OUT/same.txt $OUT/prefill.txt $OUT/gates.txt; grep -E 'attention' $OUT/prof.txt
