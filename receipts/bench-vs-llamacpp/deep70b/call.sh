#!/usr/bin/env bash
# Issue 30 step 6, the kept build (C: A's unfused Q4_K preload, and the 16-warp decode only
# for one wave or two one-round waves): bits against O (HEAD), then the rows beside
# llama.cpp built in the same call.
set -u
O=.stage/bin/ppn-gate-old C=.stage/bin/ppn-gate-c
mkdir -p /tmp/t $OUT/bench
$O synth --preset llama8b --layers 8 --quant q4_k -o /tmp/t/l8q4k.gguf > /dev/null &
$O synth --preset llama70b --layers 2 --quant q4_k -o /tmp/t/l70.gguf > /dev/null &
wait
: > $OUT/same.txt
for m in l70 l8q4k; do
  F="--backend cuda --model /tmp/t/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $F --receipt /tmp/t/o.json > /tmp/t/o.txt 2>&1; a=$?
  $C $F --receipt /tmp/t/c.json > /tmp/t/c.txt 2>&1; b=$?
  echo "$m --mma auto: exit O $a C $b; $($O diff /tmp/t/o.json /tmp/t/c.json 2>&1 | head -1)" >> $OUT/same.txt
done
cat $OUT/same.txt
rm -f /tmp/t/*.gguf
ROWS="llama8b-l8-q4_k llama70b-l2-q4_k llama8b-l32-q4_k_m llama70b-l21-q4_k" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= \
  scripts/bench-vs-llamacpp.sh $C .stage/llama.cpp.tgz $OUT/bench > /tmp/t/bench.out 2>&1
echo "bench exit $?"; rm -f $OUT/bench/raw.tar.gz; tail -12 /tmp/t/bench.out
